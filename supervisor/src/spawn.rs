//! Starting one command: everything is prepared before `fork`, the child
//! only makes system calls (no allocation), and an exec failure comes back
//! over a close-on-exec pipe.

use crate::confine;
use crate::pty;
use crate::sys;
use odek_supervisor::proto::{Failed, NotStarted, Start};
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// The `PATH` used when the command's environment has none.
const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// An environment: `(name, value)` byte pairs in order.
pub type Env = Vec<(Vec<u8>, Vec<u8>)>;

/// A started command's process and the parent's ends of its streams.
pub struct Child {
    /// Its pid (also its process group and session).
    pub pid: i32,
    /// The write end of its stdin pipe (`Start.stdin` without a terminal).
    pub stdin: Option<OwnedFd>,
    /// Its stdout pipe's read end, or the terminal's master (non-blocking).
    pub stdout: OwnedFd,
    /// Its stderr pipe's read end (non-blocking); `None` with a terminal.
    pub stderr: Option<OwnedFd>,
}

/// The steps of the child, reported with errno through the error pipe.
#[derive(Clone, Copy)]
#[repr(u8)]
enum Step {
    Setsid = 1,
    Ctty,
    Dup,
    Bounding,
    Securebits,
    Groups,
    Gid,
    Uid,
    Caps,
    Ambient,
    NoNewPrivs,
    Chdir,
    Exec,
    /// exec failed with `ENOENT` on a program that exists: its interpreter
    /// is missing.
    Interpreter,
}

impl Step {
    fn from_byte(b: u8) -> &'static str {
        match b {
            1 => "setsid",
            2 => "the terminal",
            3 => "dup2",
            4 => "dropping the bounding set",
            5 => "securebits",
            6 => "setgroups",
            7 => "setresgid",
            8 => "setresuid",
            9 => "capset",
            10 => "clearing ambient capabilities",
            11 => "no_new_privs",
            12 => "chdir",
            14 => "its interpreter",
            _ => "exec",
        }
    }
}

/// A C string, or a refusal naming `what`.
fn cstr(what: &str, s: &[u8]) -> Result<CString, String> {
    CString::new(s).map_err(|_| format!("{what} contains a NUL byte"))
}

/// The command's environment: `base` overlaid with `overlay`, later pairs
/// winning, the order of first appearance kept.
pub fn merge_env(base: &[(Vec<u8>, Vec<u8>)], overlay: &[(String, String)]) -> Result<Env, String> {
    let mut env: Env = base.to_vec();
    for (k, v) in overlay {
        if k.is_empty() || k.contains('=') || k.contains('\0') {
            return Err(format!("bad environment variable name {k:?}"));
        }
        match env.iter_mut().find(|(ek, _)| ek == k.as_bytes()) {
            Some(slot) => slot.1 = v.as_bytes().to_vec(),
            None => env.push((k.as_bytes().to_vec(), v.as_bytes().to_vec())),
        }
    }
    Ok(env)
}

/// Whether a command of `uid` needs its own `HOME`: it is not root, named
/// none itself, and inherited root's (`/root`, which Docker gives the
/// supervisor's environment as the container's user is root) or none.
pub fn needs_home(uid: u32, env: &Env, named: bool) -> bool {
    let inherited = env.iter().find(|(k, _)| k == b"HOME").map(|(_, v)| v);
    uid != 0 && !named && inherited.is_none_or(|h| h == b"/root")
}

/// The home of `uid` in `passwd` (the image's `/etc/passwd`), else `/`:
/// what the exec API gives a user.
pub fn home_in(uid: u32, passwd: &str) -> Vec<u8> {
    passwd
        .lines()
        .find_map(|line| {
            let f: Vec<&str> = line.split(':').collect();
            (f.len() >= 7 && f[2].parse::<u32>().ok() == Some(uid) && f[5].starts_with('/'))
                .then(|| f[5].as_bytes().to_vec())
        })
        .unwrap_or_else(|| b"/".to_vec())
}

/// The paths `execvp` would try for `argv0` under `path`.
fn candidates(argv0: &str, path: &str) -> Vec<String> {
    if argv0.contains('/') {
        return vec![argv0.to_string()];
    }
    path.split(':')
        .map(|dir| {
            let dir = if dir.is_empty() { "." } else { dir };
            format!("{}/{argv0}", dir.trim_end_matches('/'))
        })
        .collect()
}

/// A NULL-terminated pointer array over `v`.
fn ptrs(v: &[CString]) -> Vec<*const libc::c_char> {
    v.iter()
        .map(|c| c.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}

/// Opens `/dev/null` read-only, close-on-exec.
fn dev_null() -> io::Result<OwnedFd> {
    // SAFETY: a constant C string path.
    let fd =
        sys::cvt(unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) })?;
    // SAFETY: fd was just opened and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Starts `start` with the supervisor's environment `base_env`, dropping
/// capabilities `0..=cap_last`.
///
/// Errors: the [`odek_supervisor::proto::Failed`] frame's content (bad
/// request, program not found, not permitted, cwd missing, …), with its
/// [`NotStarted`] reason when the program could not be started as a shell
/// reports it (not found, not executable, no such working directory).
pub fn spawn(
    start: &Start,
    base_env: &[(Vec<u8>, Vec<u8>)],
    cap_last: u32,
) -> Result<Child, Failed> {
    let argv0 = start.argv.first().ok_or("empty argv")?;
    if argv0.is_empty() {
        return Err("empty program name".into());
    }
    let mut env = merge_env(base_env, &start.env)?;
    let named = start.env.iter().any(|(k, _)| k == "HOME");
    if needs_home(start.uid, &env, named) {
        let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
        let home = home_in(start.uid, &passwd);
        match env.iter_mut().find(|(k, _)| k == b"HOME") {
            Some(slot) => slot.1 = home,
            None => env.push((b"HOME".to_vec(), home)),
        }
    }
    let path = env
        .iter()
        .find(|(k, _)| k == b"PATH")
        .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
        .unwrap_or_else(|| DEFAULT_PATH.to_string());
    let argv: Vec<CString> = start
        .argv
        .iter()
        .map(|a| cstr("an argument", a.as_bytes()))
        .collect::<Result<_, _>>()?;
    let envp: Vec<CString> = env
        .iter()
        .map(|(k, v)| {
            let mut kv = k.clone();
            kv.push(b'=');
            kv.extend_from_slice(v);
            cstr("an environment value", &kv)
        })
        .collect::<Result<_, _>>()?;
    let progs: Vec<CString> = candidates(argv0, &path)
        .into_iter()
        .filter_map(|p| CString::new(p).ok())
        .collect();
    let cwd = cstr("cwd", start.cwd.as_bytes())?;
    let argv_p = ptrs(&argv);
    let envp_p = ptrs(&envp);
    let groups: Vec<libc::gid_t> = start.groups.clone();
    let io_err = |what: &str, e: io::Error| format!("{what}: {e}");

    // The child's stdio and the parent's ends.
    let (child_in, child_out, child_err, parent_in, parent_out, parent_err);
    let tty;
    if let Some(ws) = start.tty {
        let (master, slave) = pty::open(ws).map_err(|e| io_err("opening a terminal", e))?;
        tty = Some(slave);
        child_in = None;
        child_out = None;
        child_err = None;
        parent_in = None;
        parent_out = master;
        parent_err = None;
    } else {
        tty = None;
        let (in_r, in_w) = if start.stdin {
            let (r, w) = sys::pipe().map_err(|e| io_err("pipe", e))?;
            sys::set_nonblock(w.as_raw_fd()).map_err(|e| io_err("pipe", e))?;
            (r, Some(w))
        } else {
            (dev_null().map_err(|e| io_err("/dev/null", e))?, None)
        };
        let (out_r, out_w) = sys::pipe().map_err(|e| io_err("pipe", e))?;
        let (err_r, err_w) = sys::pipe().map_err(|e| io_err("pipe", e))?;
        sys::set_nonblock(out_r.as_raw_fd()).map_err(|e| io_err("pipe", e))?;
        sys::set_nonblock(err_r.as_raw_fd()).map_err(|e| io_err("pipe", e))?;
        child_in = Some(in_r);
        child_out = Some(out_w);
        child_err = Some(err_w);
        parent_in = in_w;
        parent_out = out_r;
        parent_err = Some(err_r);
    }
    let (err_r, err_w) = sys::pipe().map_err(|e| io_err("pipe", e))?;

    let raw = |fd: &Option<OwnedFd>| fd.as_ref().map_or(-1, |f| f.as_raw_fd());
    let fds = ChildFds {
        tty: raw(&tty),
        stdin: raw(&child_in),
        stdout: raw(&child_out),
        stderr: raw(&child_err),
        report: err_w.as_raw_fd(),
    };
    let plan = ChildPlan {
        fds,
        cap_last,
        groups: &groups,
        uid: start.uid,
        gid: start.gid,
        cwd: &cwd,
        progs: &progs,
        argv: &argv_p,
        envp: &envp_p,
    };

    // SAFETY: the supervisor is single-threaded; the child runs `child_main`,
    // which only makes system calls on memory prepared above and never returns.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io_err("fork", io::Error::last_os_error()).into());
    }
    if pid == 0 {
        child_main(&plan);
    }
    drop((tty, child_in, child_out, child_err, err_w));

    // Wait for exec (EOF) or the child's report (step, errno) — for at most
    // EXEC_REPORT_BUDGET: once the child has the command's uid, a process of
    // that uid can SIGSTOP it before its exec, and the supervisor must not
    // wait on it for ever.
    let mut report = [0u8; 5];
    let mut got = 0;
    let deadline = std::time::Instant::now() + EXEC_REPORT_BUDGET;
    while got < report.len() {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let mut pfd = libc::pollfd {
            fd: err_r.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd on the stack.
        let ready = unsafe { libc::poll(&mut pfd, 1, left.as_millis().min(60_000) as libc::c_int) };
        if ready == 0 {
            // SAFETY: the child we forked; SIGKILL ends it even when stopped.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                let mut status = 0;
                libc::waitpid(pid, &mut status, 0);
            }
            return Err(Failed::new(format!(
                "the command did not start within {} s (stopped before its exec?)",
                EXEC_REPORT_BUDGET.as_secs()
            )));
        }
        if ready < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            break;
        }
        match sys::read(err_r.as_raw_fd(), &mut report[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(_) => break,
        }
    }
    if got == 0 {
        return Ok(Child {
            pid,
            stdin: parent_in,
            stdout: parent_out,
            stderr: parent_err,
        });
    }
    let mut status = 0;
    // SAFETY: reaps the child we just forked, which has exited or will.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    let errno = i32::from_le_bytes([report[1], report[2], report[3], report[4]]);
    let err = io::Error::from_raw_os_error(errno);
    let (message, not_started) = match (report[0], errno) {
        (13, libc::ENOENT) => (format!("`{argv0}` not found"), Some(NotStarted::NotFound)),
        (13, libc::EACCES) => (
            format!("`{argv0}`: permission denied"),
            Some(NotStarted::NotExecutable),
        ),
        (13, libc::ENOEXEC) => (format!("`{argv0}`: {err}"), Some(NotStarted::NotExecutable)),
        (13, _) => (format!("`{argv0}`: {err}"), None),
        (14, _) => (
            format!("`{argv0}`: its interpreter (the program on its #! line, or its dynamic loader) was not found"),
            Some(NotStarted::NoInterpreter),
        ),
        (12, libc::ENOENT | libc::ENOTDIR) => (
            format!("cannot enter `{}`: {err}", start.cwd),
            Some(NotStarted::NoWorkdir),
        ),
        (12, _) => (format!("cannot enter `{}`: {err}", start.cwd), None),
        (s, _) => (
            format!("setting up the command ({}): {err}", Step::from_byte(s)),
            None,
        ),
    };
    Err(Failed {
        message,
        not_started,
    })
}

/// How long the supervisor waits for a forked command to reach its exec.
const EXEC_REPORT_BUDGET: std::time::Duration = std::time::Duration::from_secs(5);

/// The child's fds before `dup2` (-1: none).
struct ChildFds {
    tty: RawFd,
    stdin: RawFd,
    stdout: RawFd,
    stderr: RawFd,
    report: RawFd,
}

/// Everything the child needs, prepared before `fork`.
struct ChildPlan<'a> {
    fds: ChildFds,
    cap_last: u32,
    groups: &'a [libc::gid_t],
    uid: u32,
    gid: u32,
    cwd: &'a CString,
    progs: &'a [CString],
    argv: &'a [*const libc::c_char],
    envp: &'a [*const libc::c_char],
}

/// Reports `step` and errno to the parent and exits 127.
fn fail(report: RawFd, step: Step, errno: i32) -> ! {
    let e = errno.to_le_bytes();
    let msg = [step as u8, e[0], e[1], e[2], e[3]];
    // SAFETY: writes 5 bytes from a stack array, then exits without unwinding.
    unsafe {
        libc::write(report, msg.as_ptr().cast(), msg.len());
        libc::_exit(127)
    }
}

/// The forked child: confine, set up stdio, exec. Only system calls; never
/// returns.
fn child_main(p: &ChildPlan) -> ! {
    let r = p.fds.report;
    let check = |step: Step, rv: libc::c_long| {
        if rv < 0 {
            fail(r, step, sys::errno());
        }
    };
    // SAFETY (whole block): system calls on integers and on memory prepared
    // before fork that stays valid in the child; no allocation happens.
    unsafe {
        // Signal dispositions and mask back to defaults (SIG_IGN survives exec).
        for sig in 1..libc::SIGRTMAX() {
            if sig != libc::SIGKILL && sig != libc::SIGSTOP {
                libc::signal(sig, libc::SIG_DFL);
            }
        }
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());

        check(Step::Setsid, libc::setsid().into());
        if p.fds.tty >= 0 {
            for target in 0..3 {
                check(Step::Dup, libc::dup2(p.fds.tty, target).into());
            }
            check(Step::Ctty, libc::ioctl(0, libc::TIOCSCTTY, 0).into());
        } else {
            check(Step::Dup, libc::dup2(p.fds.stdin, 0).into());
            check(Step::Dup, libc::dup2(p.fds.stdout, 1).into());
            check(Step::Dup, libc::dup2(p.fds.stderr, 2).into());
        }
        for cap in 0..=p.cap_last {
            check(
                Step::Bounding,
                confine::prctl(confine::PR_CAPBSET_DROP, cap as libc::c_ulong).into(),
            );
        }
        check(
            Step::Securebits,
            confine::prctl(confine::PR_SET_SECUREBITS, confine::COMMAND_SECUREBITS).into(),
        );
        check(
            Step::Groups,
            libc::setgroups(p.groups.len(), p.groups.as_ptr()).into(),
        );
        check(Step::Gid, libc::setresgid(p.gid, p.gid, p.gid).into());
        check(Step::Uid, libc::setresuid(p.uid, p.uid, p.uid).into());
        check(Step::Caps, confine::capset(0, 0, 0));
        check(
            Step::Ambient,
            libc::prctl(
                confine::PR_CAP_AMBIENT,
                confine::PR_CAP_AMBIENT_CLEAR_ALL,
                0 as libc::c_ulong,
                0 as libc::c_ulong,
                0 as libc::c_ulong,
            )
            .into(),
        );
        check(
            Step::NoNewPrivs,
            confine::prctl(confine::PR_SET_NO_NEW_PRIVS, 1).into(),
        );
        check(Step::Chdir, libc::chdir(p.cwd.as_ptr()).into());
        // Every fd but 0/1/2 closes at exec (the report pipe included).
        if libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        ) < 0
        {
            for fd in 3..4096 {
                libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
            }
        }
        // execvp's search, over the command's own PATH.
        let mut denied = false;
        let mut no_interpreter = false;
        let mut last = libc::ENOENT;
        for prog in p.progs {
            libc::execve(prog.as_ptr(), p.argv.as_ptr(), p.envp.as_ptr());
            let e = sys::errno();
            match e {
                libc::EACCES => denied = true,
                // The file is there: what exec did not find is its
                // interpreter.
                libc::ENOENT if libc::access(prog.as_ptr(), libc::F_OK) == 0 => {
                    no_interpreter = true;
                }
                libc::ENOENT
                | libc::ENOTDIR
                | libc::ESTALE
                | libc::ELOOP
                | libc::ENAMETOOLONG
                | libc::ENODEV
                | libc::ETIMEDOUT => {}
                _ => {
                    last = e;
                    break;
                }
            }
        }
        if denied && last == libc::ENOENT {
            last = libc::EACCES;
        }
        if no_interpreter && last == libc::ENOENT {
            fail(r, Step::Interpreter, last)
        }
        fail(r, Step::Exec, last)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(home: Option<&str>) -> Env {
        let mut e = vec![(b"PATH".to_vec(), b"/bin".to_vec())];
        if let Some(h) = home {
            e.push((b"HOME".to_vec(), h.as_bytes().to_vec()));
        }
        e
    }

    #[test]
    fn a_non_root_command_never_inherits_roots_home() {
        assert!(needs_home(1000, &env(Some("/root")), false));
        assert!(needs_home(1000, &env(None), false));
        assert!(!needs_home(0, &env(Some("/root")), false));
        assert!(!needs_home(1000, &env(Some("/home/odek")), false));
        assert!(!needs_home(1000, &env(Some("/root")), true));
        let passwd =
            "root:x:0:0:root:/root:/bin/sh\ndaemon:x:1:1:d:/usr/sbin:/bin/false\nbad:x:7\n";
        assert_eq!(home_in(1, passwd), b"/usr/sbin");
        assert_eq!(home_in(7, passwd), b"/");
        assert_eq!(home_in(1000, passwd), b"/");
    }
}
