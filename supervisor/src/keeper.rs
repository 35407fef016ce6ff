//! The keeper: the container's process (tini's child). It confines itself
//! once, holds the owner link (fds 0 and 1) and the relay socket, and forks
//! the server that runs commands. It relays whole frames between the owner's
//! stream and the server's socket, so it owns every frame boundary:
//!
//! - the owner's stream ends (or a malformed frame arrives from the core):
//!   the server is killed, every process of the sandbox is killed and the
//!   keeper exits 0 (the container ends), as before the split;
//! - the server dies (a signal from outside the sandbox, a crash, an invalid
//!   frame of its own): the keeper kills the process trees of the commands
//!   it was running ([`Kind::Tracked`] and not yet [`Kind::Untracked`]) —
//!   their status is unknown to the core, so nothing of them keeps running
//!   unseen — starts a new server on the same socket and relay listener,
//!   sends [`Kind::Restarted`] and drops every frame of the core until
//!   [`Kind::Resume`];
//! - more than [`MAX_RESTARTS`] deaths within [`RESTART_WINDOW`]: a notice,
//!   then the sandbox ends as on the owner's end (exit 71), so that a broken
//!   server does not spin.
//!
//! A server that exits 0 ended the owner session itself (a malformed frame,
//! a write error): the keeper ends the sandbox too.

use crate::kill::{self, Tree};
use crate::server::{self, Options};
use crate::session::HIGH_WATER;
use crate::{confine, log, sys};
use odek_supervisor::proto::{self, Decoder, Frame, Kind, Restarted, Tracked, OUTPUT_CHUNK};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use odek_supervisor::proto::MAX_RESTARTS;

/// The window of [`MAX_RESTARTS`].
const RESTART_WINDOW: Duration = Duration::from_secs(proto::RESTART_WINDOW_SECS);
/// The keeper's exit status after a crash loop.
const CRASH_LOOP_EXIT: i32 = 71;

/// Bytes queued for one fd, whole frames only.
#[derive(Default)]
struct Queue {
    frames: VecDeque<Vec<u8>>,
    pos: usize,
    len: usize,
}

impl Queue {
    fn push(&mut self, f: &Frame) {
        let b = f.encode();
        self.len += b.len();
        self.frames.push_back(b);
    }

    /// Writes until `fd` would block. Errors: a write error.
    fn flush(&mut self, fd: RawFd) -> io::Result<()> {
        while let Some(head) = self.frames.front() {
            match sys::write(fd, &head[self.pos..]) {
                Ok(n) => {
                    self.pos += n;
                    self.len -= n;
                    if self.pos == head.len() {
                        self.frames.pop_front();
                        self.pos = 0;
                    }
                }
                Err(e) if sys::would_block(&e) => return Ok(()),
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// The running server.
struct Child {
    pid: i32,
    sock: OwnedFd,
    dec: Decoder,
    to: Queue,
    /// Its Ready is still to come (swallowed after a restart: the core
    /// learns of the new server from [`Kind::Restarted`]).
    ready_pending: bool,
}

struct Keeper {
    options: Options,
    listener: OwnedFd,
    me: i32,
    server: Child,
    from_owner: Decoder,
    to_owner: Queue,
    /// Command roots of the current server: pid → start ticks.
    tracked: BTreeMap<i32, u64>,
    /// After a restart, until the core's Resume: the core's frames are
    /// dropped.
    awaiting_resume: bool,
    generation: u32,
    deaths: VecDeque<Instant>,
    buf: Vec<u8>,
}

/// Confines the process, binds the relay socket, forks the first server
/// and relays until the owner link ends. A setup failure exits 70.
pub fn run(options: Options) -> ! {
    let setup = || -> Result<Keeper, String> {
        confine::confine(options.uid, options.gid)?;
        // Inherited fds beyond stdio never reach a server or a command.
        for fd in 3..1024 {
            let _ = sys::set_cloexec(fd);
        }
        let listener = server::relay_listener(&options.relay)?;
        sys::set_nonblock(0).map_err(|e| format!("stdin: {e}"))?;
        sys::set_nonblock(1).map_err(|e| format!("stdout: {e}"))?;
        let server = fork_server(&options, &listener, true)?;
        Ok(Keeper {
            options: options.clone(),
            listener,
            me: std::process::id() as i32,
            server,
            from_owner: Decoder::new(),
            to_owner: Queue::default(),
            tracked: BTreeMap::new(),
            awaiting_resume: false,
            generation: 0,
            deaths: VecDeque::new(),
            buf: vec![0; OUTPUT_CHUNK],
        })
    };
    match setup() {
        Ok(k) => k.run(),
        Err(e) => {
            log(&format!("odek-supervisor: {e}"));
            std::process::exit(70);
        }
    }
}

/// Forks a server on a new socket pair: the child's fds 0 and 1 become its
/// end, its name `odek-server` (`/proc/<pid>/comm`).
fn fork_server(options: &Options, listener: &OwnedFd, first: bool) -> Result<Child, String> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: socketpair writes two fds into the array we own.
    sys::cvt(unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    })
    .map_err(|e| format!("socketpair: {e}"))?;
    // SAFETY: both fds were just created and are owned by nobody else.
    let (ours, theirs) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: the keeper is single-threaded, so the child may run Rust code.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(format!("fork: {}", io::Error::last_os_error()));
    }
    if pid == 0 {
        drop(ours);
        let t = theirs.as_raw_fd();
        // SAFETY: dup2 onto stdin/stdout (clears close-on-exec there);
        // PR_SET_NAME takes a NUL-terminated string we own.
        unsafe {
            if libc::dup2(t, 0) < 0 || libc::dup2(t, 1) < 0 {
                libc::_exit(70);
            }
            libc::prctl(
                libc::PR_SET_NAME,
                c"odek-server".as_ptr() as libc::c_ulong,
                0 as libc::c_ulong,
                0 as libc::c_ulong,
                0 as libc::c_ulong,
            );
        }
        drop(theirs);
        // SAFETY: dup of the listener the keeper keeps; the server owns the
        // copy.
        let l = unsafe { libc::fcntl(listener.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) };
        if l < 0 {
            log("odek-supervisor: dup of the relay socket failed");
            std::process::exit(70);
        }
        // SAFETY: l was just created.
        let listener = unsafe { OwnedFd::from_raw_fd(l) };
        server::serve(options.clone(), listener);
    }
    drop(theirs);
    sys::set_nonblock(ours.as_raw_fd()).map_err(|e| format!("socket: {e}"))?;
    Ok(Child {
        pid,
        sock: ours,
        dec: Decoder::new(),
        to: Queue::default(),
        ready_pending: !first,
    })
}

/// How a wait status reads.
fn how(status: i32) -> String {
    if libc::WIFSIGNALED(status) {
        format!("killed by signal {}", libc::WTERMSIG(status))
    } else if libc::WIFEXITED(status) {
        format!("exited with status {}", libc::WEXITSTATUS(status))
    } else {
        format!("ended (wait status {status})")
    }
}

impl Keeper {
    fn run(mut self) -> ! {
        loop {
            let s = self.server.sock.as_raw_fd();
            let owner_events = if self.server.to.len < HIGH_WATER {
                libc::POLLIN
            } else {
                0
            };
            let server_events = (if self.to_owner.len < HIGH_WATER {
                libc::POLLIN
            } else {
                0
            }) | (if self.server.to.len > 0 {
                libc::POLLOUT
            } else {
                0
            });
            let mut fds = [
                libc::pollfd {
                    fd: 0,
                    events: owner_events,
                    revents: 0,
                },
                libc::pollfd {
                    fd: s,
                    events: server_events,
                    revents: 0,
                },
                libc::pollfd {
                    fd: if self.to_owner.len > 0 { 1 } else { -1 },
                    events: libc::POLLOUT,
                    revents: 0,
                },
            ];
            // SAFETY: fds is a valid array of three pollfds.
            let n = unsafe { libc::poll(fds.as_mut_ptr(), 3, -1) };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    log(&format!("odek-supervisor: poll: {e}"));
                    std::thread::sleep(Duration::from_millis(10));
                }
                continue;
            }
            if fds[0].revents & libc::POLLIN != 0 {
                self.owner_input();
            } else if fds[0].revents & (libc::POLLHUP | libc::POLLERR) != 0 {
                self.end("end of stream");
            }
            if fds[1].revents & libc::POLLOUT != 0 {
                if let Err(e) = self.server.to.flush(s) {
                    self.server_died(format!("write: {e}"));
                    continue;
                }
            }
            if fds[1].revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0 {
                self.server_input();
            }
            if fds[2].revents != 0 {
                if let Err(e) = self.to_owner.flush(1) {
                    self.end(&format!("write: {e}"));
                }
            }
        }
    }

    /// Frames from the core: relayed whole to the server, but for
    /// [`Kind::Resume`] (the keeper's) and anything while a Resume is
    /// awaited (dropped).
    fn owner_input(&mut self) {
        match sys::read(0, &mut self.buf) {
            Ok(0) => self.end("end of stream"),
            Ok(n) => self.from_owner.push(&self.buf[..n]),
            Err(e) if sys::would_block(&e) => return,
            Err(e) => self.end(&format!("read: {e}")),
        }
        loop {
            match self.from_owner.next_frame() {
                Ok(Some(f)) if f.kind == Kind::Resume => self.awaiting_resume = false,
                Ok(Some(_)) if self.awaiting_resume => {}
                Ok(Some(f)) => self.server.to.push(&f),
                Ok(None) => break,
                Err(e) => {
                    log(&format!("odek-supervisor: malformed frame: {e}"));
                    self.end(&format!("malformed frame: {e}"));
                }
            }
        }
        if let Err(e) = self.server.to.flush(self.server.sock.as_raw_fd()) {
            self.server_died(format!("write: {e}"));
        }
    }

    /// Frames from the server: the ledger kept, Ready of a restarted server
    /// swallowed, the rest relayed whole to the core.
    fn server_input(&mut self) {
        let s = self.server.sock.as_raw_fd();
        match sys::read(s, &mut self.buf) {
            Ok(0) => return self.server_died("closed its stream".into()),
            Ok(n) => self.server.dec.push(&self.buf[..n]),
            Err(e) if sys::would_block(&e) => return,
            Err(e) => return self.server_died(format!("read: {e}")),
        }
        loop {
            match self.server.dec.next_frame() {
                Ok(Some(f)) => match f.kind {
                    Kind::Tracked | Kind::Untracked => match f.parse::<Tracked>() {
                        Ok(t) if f.kind == Kind::Tracked => {
                            self.tracked.insert(t.pid as i32, t.start);
                        }
                        // Only the process it tracked: a later one with
                        // the same pid (another command) stays tracked.
                        Ok(t) => {
                            if self.tracked.get(&(t.pid as i32)) == Some(&t.start) {
                                self.tracked.remove(&(t.pid as i32));
                            }
                        }
                        Err(e) => return self.server_died(format!("sent an invalid frame: {e}")),
                    },
                    Kind::Ready if self.server.ready_pending => {
                        self.server.ready_pending = false;
                    }
                    Kind::Resume | Kind::Restarted => {
                        return self
                            .server_died(format!("sent a {:?} frame, the keeper's own", f.kind))
                    }
                    _ => self.to_owner.push(&f),
                },
                Ok(None) => break,
                Err(e) => return self.server_died(format!("sent an invalid frame: {e}")),
            }
        }
        if let Err(e) = self.to_owner.flush(1) {
            self.end(&format!("write: {e}"));
        }
    }

    /// The server is gone or must go: reap it, kill its commands' trees,
    /// start another (or end the sandbox after a crash loop, or when it
    /// ended the owner session itself).
    fn server_died(&mut self, why: String) {
        let pid = self.server.pid;
        // SAFETY: a signal to our own child.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        let mut status = 0;
        // SAFETY: waitpid writes one int we own.
        while unsafe { libc::waitpid(pid, &mut status, 0) } < 0 && sys::errno() == libc::EINTR {}
        if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
            // It ended the owner session itself (its log says why).
            self.end("the server ended the owner session");
        }
        let reason = if why == "closed its stream" {
            how(status)
        } else {
            format!("{why} ({})", how(status))
        };
        log(&format!(
            "odek-supervisor: the server (pid {pid}) died: {reason}"
        ));
        let now = Instant::now();
        self.deaths.push_back(now);
        while self
            .deaths
            .front()
            .is_some_and(|t| now.duration_since(*t) > RESTART_WINDOW)
        {
            self.deaths.pop_front();
        }
        // The dead server's commands: their trees are killed (their status
        // is unknown to the core; nothing of them runs on unseen).
        let roots = std::mem::take(&mut self.tracked);
        let mut killed = true;
        let mut reaped = vec![];
        for (&root, &start) in &roots {
            let tree = Tree {
                root,
                start,
                me: self.me,
                overlapped: true,
                before: vec![],
                other_roots: roots
                    .keys()
                    .copied()
                    .filter(|&p| p != root)
                    .collect::<BTreeSet<_>>(),
            };
            killed &= kill::kill_tree(&tree, &mut reaped).confirmed;
        }
        if self.deaths.len() > MAX_RESTARTS {
            let text = format!(
                "odek-supervisor: its server died {} times within {} s (last: {reason}); the sandbox ends",
                self.deaths.len(),
                RESTART_WINDOW.as_secs()
            );
            log(&text);
            self.to_owner.push(&Frame {
                kind: Kind::Notice,
                id: 0,
                payload: text.into_bytes(),
            });
            self.finish(CRASH_LOOP_EXIT);
        }
        let next = match fork_server(&self.options, &self.listener, false) {
            Ok(c) => c,
            Err(e) => {
                log(&format!("odek-supervisor: restart failed: {e}"));
                self.finish(CRASH_LOOP_EXIT);
            }
        };
        self.generation += 1;
        self.awaiting_resume = true;
        let restarted = Restarted {
            generation: self.generation,
            pid: next.pid as u32,
            reason,
            commands: roots.len() as u32,
            killed,
        };
        self.server = next;
        self.to_owner
            .push(&Frame::json(Kind::Restarted, 0, &restarted));
        if let Err(e) = self.to_owner.flush(1) {
            self.end(&format!("write: {e}"));
        }
    }

    /// The owner link ended (or the core broke the protocol): everything is
    /// killed and the keeper exits 0.
    fn end(&mut self, why: &str) -> ! {
        log(&format!(
            "odek-supervisor: owner session ended ({why}); killing every process"
        ));
        self.finish(0)
    }

    /// Kills the server and every process of the sandbox, writes what is
    /// queued for the owner (best effort, 1 s) and exits with `code`.
    fn finish(&mut self, code: i32) -> ! {
        // SAFETY: a signal to our own child.
        unsafe { libc::kill(self.server.pid, libc::SIGKILL) };
        let mut reaped = vec![];
        kill::kill_everything(&[self.me], &mut reaped);
        let deadline = Instant::now() + Duration::from_secs(1);
        while self.to_owner.len > 0 && Instant::now() < deadline {
            if self.to_owner.flush(1).is_err() {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        std::process::exit(code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_statuses_read() {
        assert_eq!(how(9), "killed by signal 9");
        assert_eq!(how(70 << 8), "exited with status 70");
    }
}
