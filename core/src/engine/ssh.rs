//! `ssh://[user@]host[:port]` daemon endpoints (SPEC §6.2.2), as the
//! Docker CLI reaches them: each connection is the system's OpenSSH client
//! (`ssh` on `PATH`) running `docker system dial-stdio` on the remote
//! machine, and the Engine API is spoken over the child's stdin and
//! stdout. odek writes no SSH of its own.
//!
//! Fail-closed where the Docker CLI leaves it to the user's configuration:
//! every `ssh` is run with `-T`, `-o BatchMode=yes` (no prompt can hang an
//! agent), `-o StrictHostKeyChecking=yes` (an unknown or changed host key
//! is a refusal, never accepted), `-o ConnectTimeout=<s>`, no forwarding,
//! and `--` before the destination, which is checked first
//! ([`SshTarget::parse`]): a user, host or port that could be read as an
//! option is refused. Options given on the command line win over
//! `~/.ssh/config`, so a lax configuration cannot loosen them. The child is
//! killed when its connection is dropped, and what it wrote on stderr
//! (foreign bytes) is shown escaped in errors, with the fix for an unknown
//! host key or a refused login.

use std::fmt;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};

use super::{EngineError, EngineErrorKind, Op};

/// The command run on the remote machine: the Docker CLI's own bridge from
/// stdio to the daemon's socket.
pub const REMOTE_COMMAND: [&str; 3] = ["docker", "system", "dial-stdio"];

/// Most bytes of an `ssh` child's stderr kept for messages (4 KiB).
const STDERR_CAP: usize = 4096;

/// Most `ssh` connections of this process in their handshake at once (4):
/// odek asks several things of the engine at once, and sshd drops
/// connections past its `MaxStartups` (10 unauthenticated by default). A
/// connection holds its place until the daemon's first byte comes back.
const SETUP_LIMIT: usize = 4;

static SETUP: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(SETUP_LIMIT);

/// Where `ssh://[user@]host[:port]` points, checked: nothing in it can be
/// read by `ssh` as an option.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SshTarget {
    /// The login name (`-l`); `None`: ssh's default (config or local user).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// The host name or address (an IPv6 address without its brackets).
    pub host: String,
    /// The port (`-p`); `None`: ssh's default (config or 22).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
}

impl fmt::Display for SshTarget {
    /// `ssh://user@host:port` as given (`[…]` around an IPv6 address).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ssh://")?;
        if let Some(u) = &self.user {
            write!(f, "{u}@")?;
        }
        if self.host.contains(':') {
            write!(f, "[{}]", self.host)?;
        } else {
            f.write_str(&self.host)?;
        }
        if let Some(p) = self.port {
            write!(f, ":{p}")?;
        }
        Ok(())
    }
}

impl SshTarget {
    /// Parses what follows `ssh://`: `[user@]host[:port]`, optionally with
    /// a trailing `/`. Errors (a reason for [`super::EndpointError::Invalid`]):
    /// a password, path, query or fragment; an empty or malformed user,
    /// host or port; any character outside a user's `[A-Za-z0-9._-]` or a
    /// host's `[A-Za-z0-9.-]` (an IPv6 address in brackets); a user or host
    /// that begins with `-` (it would be an option to `ssh`).
    pub fn parse(rest: &str) -> Result<SshTarget, String> {
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.contains(['/', '?', '#']) {
            return Err("expected ssh://[user@]host[:port] (no path, query or fragment)".into());
        }
        let (user, hostport) = match rest.rsplit_once('@') {
            Some((u, h)) => (Some(u), h),
            None => (None, rest),
        };
        let user = match user {
            None => None,
            Some(u) if u.contains(':') => {
                return Err("a password in the URL is not supported: use an SSH key".into())
            }
            Some("") => return Err("the user before @ is empty".into()),
            Some(u) if u.starts_with('-') => {
                return Err("the user begins with '-' (it would be an ssh option)".into())
            }
            Some(u)
                if !u
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-')) =>
            {
                return Err("the user may hold only letters, digits, '.', '_' and '-'".into())
            }
            Some(u) => Some(u.to_string()),
        };
        let (host, port) = if let Some(after) = hostport.strip_prefix('[') {
            let (addr, tail) = after
                .split_once(']')
                .ok_or("an IPv6 address lacks its closing ']'")?;
            if addr.parse::<std::net::Ipv6Addr>().is_err() {
                return Err(format!("{addr:?} in brackets is not an IPv6 address"));
            }
            let port = match tail {
                "" => None,
                t => Some(t.strip_prefix(':').ok_or("expected :port after ']'")?),
            };
            (addr.to_string(), port)
        } else {
            match hostport.split_once(':') {
                Some((h, p)) => (h.to_string(), Some(p)),
                None => (hostport.to_string(), None),
            }
        };
        if host.is_empty() {
            return Err("the host is empty".into());
        }
        if host.starts_with('-') {
            return Err("the host begins with '-' (it would be an ssh option)".into());
        }
        if !host.contains(':')
            && !host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-'))
        {
            return Err(
                "the host may hold only letters, digits, '.' and '-' (an IPv6 address goes in brackets)"
                    .into(),
            );
        }
        let port = match port {
            None => None,
            Some(p) => Some(
                Some(p)
                    .filter(|p| p.bytes().all(|b| b.is_ascii_digit()))
                    .and_then(|p| p.parse::<u16>().ok())
                    .filter(|p| *p != 0)
                    .ok_or("the port is not a number between 1 and 65535")?,
            ),
        };
        Ok(SshTarget { user, host, port })
    }

    /// True when the host is loopback (`localhost`, `127.0.0.0/8`, `::1`):
    /// the daemon runs on this machine.
    pub fn is_loopback(&self) -> bool {
        self.host.eq_ignore_ascii_case("localhost")
            || self
                .host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
    }

    /// The arguments of `ssh` for one connection (SPEC §6.2.2): `-T`, the
    /// fail-closed options, `-l user` and `-p port` when given, then `--`,
    /// the host and `docker system dial-stdio`. `connect_timeout` is rounded up to
    /// whole seconds (at least 1).
    pub fn ssh_args(&self, connect_timeout: Duration) -> Vec<String> {
        let secs = connect_timeout.as_secs() + u64::from(connect_timeout.subsec_nanos() > 0);
        let mut a: Vec<String> = [
            "-T",
            "-o",
            "BatchMode=yes",
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            "ForwardAgent=no",
            "-o",
            "ForwardX11=no",
            "-o",
            "ClearAllForwardings=yes",
            "-o",
            "PermitLocalCommand=no",
            // A shared connection checks no host key, and a master it
            // would start outlives odek: never one.
            "-o",
            "ControlMaster=no",
            "-o",
            "ControlPath=none",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        a.push("-o".into());
        a.push(format!("ConnectTimeout={}", secs.max(1)));
        // A loopback target counts as this machine (bind mounts, the
        // account, egress; SPEC §6.2.2): the operator's ssh config must not
        // take it elsewhere (`Host localhost` with `HostName`, a `Host *`
        // `ProxyJump`). The first value ssh obtains wins, and the command
        // line comes before every config file.
        if self.is_loopback() {
            for o in [
                format!(
                    "HostName={}",
                    self.host.trim_start_matches('[').trim_end_matches(']')
                ),
                "ProxyJump=none".into(),
                "ProxyCommand=none".into(),
            ] {
                a.push("-o".into());
                a.push(o);
            }
        }
        if let Some(u) = &self.user {
            a.push("-l".into());
            a.push(u.clone());
        }
        if let Some(p) = self.port {
            a.push("-p".into());
            a.push(p.to_string());
        }
        a.push("--".into());
        a.push(self.host.clone());
        a.extend(REMOTE_COMMAND.iter().map(|s| s.to_string()));
        a
    }
}

/// The `ssh` program on `PATH` (as the Docker CLI runs it). Errors: a
/// sentence saying none was found and how to install one.
pub fn find_program() -> Result<PathBuf, String> {
    find_program_in(&std::env::var_os("PATH").unwrap_or_default())
}

/// [`find_program`] in the directories of `path` (a `PATH` value).
pub(crate) fn find_program_in(path: &std::ffi::OsStr) -> Result<PathBuf, String> {
    for dir in std::env::split_paths(path) {
        // An empty or relative entry names the working directory (the
        // repository): never searched, as Go's LookPath refuses it.
        if dir.as_os_str().is_empty() || dir.is_relative() {
            continue;
        }
        let candidate = dir.join("ssh");
        if let Ok(m) = std::fs::metadata(&candidate) {
            use std::os::unix::fs::PermissionsExt;
            if m.is_file() && m.permissions().mode() & 0o111 != 0 {
                return Ok(candidate);
            }
        }
    }
    Err(format!(
        "no `ssh` program on PATH ({}): install the OpenSSH client (Debian: apt-get install openssh-client)",
        crate::text::shown(path)
    ))
}

/// What an `ssh` child wrote on stderr (capped) and how it ended, shared
/// between its connection and whoever explains a failure.
#[derive(Clone, Default)]
pub(crate) struct Diagnostics {
    stderr: Arc<Mutex<Vec<u8>>>,
    done: Arc<tokio::sync::Notify>,
    finished: Arc<std::sync::atomic::AtomicBool>,
}

impl Diagnostics {
    fn text(&self) -> String {
        let bytes = self.stderr.lock().map(|b| b.clone()).unwrap_or_default();
        String::from_utf8_lossy(&bytes).trim().to_string()
    }

    /// Waits (at most `budget`) until stderr is closed, i.e. `ssh` exited
    /// or closed it, so a failure's message has all of it.
    async fn settled(&self, budget: Duration) {
        let wait = async {
            loop {
                let notified = self.done.notified();
                if self.finished.load(std::sync::atomic::Ordering::Acquire) {
                    return;
                }
                notified.await;
            }
        };
        let _ = tokio::time::timeout(budget, wait).await;
    }

    /// The error for a connection through `ssh` to `target` that failed
    /// with `cause` (for `op`), read from what `ssh` said on stderr: an
    /// unknown or changed host key, a refused login, a remote machine
    /// without the `docker` command are `Rejected` with the fix; anything
    /// else is `Unreachable`. stderr is shown escaped.
    pub(crate) async fn explain(&self, target: &SshTarget, op: Op, cause: &str) -> EngineError {
        self.settled(Duration::from_secs(2)).await;
        explain_text(target, op, cause, &self.text())
    }
}

/// [`Diagnostics::explain`] on `stderr` already read.
pub(crate) fn explain_text(target: &SshTarget, op: Op, cause: &str, stderr: &str) -> EngineError {
    let said = if stderr.is_empty() {
        "ssh said nothing on stderr".to_string()
    } else {
        format!("ssh said: {}", crate::text::foreign(stderr))
    };
    let host_for_keyscan = match target.port {
        Some(p) => format!("-p {p} {}", target.host),
        None => target.host.clone(),
    };
    let known = match target.port {
        Some(p) => format!("[{}]:{p}", target.host),
        None => target.host.clone(),
    };
    let fix = if stderr.contains("REMOTE HOST IDENTIFICATION HAS CHANGED")
        || stderr.contains("Host key for") && stderr.contains("has changed")
    {
        Some(format!(
            "the host key of {target} is not the one in your known_hosts: this may be someone in the middle; if the machine's key was really changed, check its new fingerprint with its administrator, then `ssh-keygen -R '{known}'` and add the new key"
        ))
    } else if stderr.contains("Host key verification failed")
        || stderr.contains("No ED25519 host key is known")
        || stderr.contains("host key is known for")
    {
        Some(format!(
            "the host key of {target} is not in your known_hosts, and odek never accepts an unknown host key: fetch it with `ssh-keyscan {host_for_keyscan} > key.pub`, check its fingerprint (`ssh-keygen -lf key.pub`) against the machine's own (`ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub` there), then `cat key.pub >> ~/.ssh/known_hosts` (or connect once with `ssh` and answer yes after checking)"
        ))
    } else if stderr.contains("Permission denied") {
        Some(format!(
            "{target} refused the login: odek's ssh runs with BatchMode (no password or passphrase prompt), so give it a key the remote user's authorized_keys holds (in ssh-agent, or IdentityFile in ~/.ssh/config)"
        ))
    } else if stderr.contains("command not found")
        || stderr.contains("docker: not found")
        || stderr.contains("No such file or directory") && stderr.contains("docker")
    {
        Some(format!(
            "{target} has no `docker` command for the login user: install the Docker CLI there (odek runs `docker system dial-stdio` on it)"
        ))
    } else if stderr.contains("Unsupported option")
        || stderr.contains("Bad configuration option")
        || stderr.contains("bad configuration option")
    {
        Some(
            "the local `ssh` does not accept odek's options: odek needs OpenSSH 7.6 or newer"
                .to_string(),
        )
    } else {
        None
    };
    match fix {
        Some(fix) => EngineError::new(
            op,
            EngineErrorKind::Rejected,
            format!("ssh to {target} failed ({cause}; {said}): {fix}"),
        ),
        None => EngineError::new(
            op,
            EngineErrorKind::Unreachable,
            format!("ssh to {target} failed ({cause}; {said})"),
        ),
    }
}

/// One connection to the daemon through an `ssh` child: writes go to its
/// stdin, reads come from its stdout. The child is killed when this is
/// dropped (and reaped by the runtime).
pub(crate) struct SshStream {
    stdin: tokio::process::ChildStdin,
    stdout: tokio::process::ChildStdout,
    /// Held for its kill-on-drop.
    _child: tokio::process::Child,
    /// What the child says, for errors.
    pub(crate) diagnostics: Diagnostics,
    /// Its place among the handshakes ([`SETUP_LIMIT`]), given back at the
    /// first byte read from the daemon.
    setup: Option<tokio::sync::SemaphorePermit<'static>>,
}

impl SshStream {
    /// Starts `ssh` ([`find_program`], [`SshTarget::ssh_args`]) for one
    /// connection, once fewer than [`SETUP_LIMIT`] others are in their
    /// handshake. Errors (for `op`): no `ssh` program or it cannot be
    /// started, `Rejected` with the fix (nothing was connected).
    /// Besides the host fallback, the one place in odek-core that starts
    /// a process (core/clippy.toml, core/tests/structure.rs).
    #[allow(clippy::disallowed_types, clippy::disallowed_methods)]
    pub(crate) async fn spawn(
        target: &SshTarget,
        connect_timeout: Duration,
        op: Op,
    ) -> Result<SshStream, EngineError> {
        let setup = SETUP.acquire().await.ok();
        let program = find_program().map_err(|why| {
            EngineError::new(op, EngineErrorKind::Rejected, format!("{target}: {why}"))
        })?;
        let mut child = tokio::process::Command::new(&program)
            .args(target.ssh_args(connect_timeout))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| {
                EngineError::new(
                    op,
                    EngineErrorKind::Rejected,
                    format!(
                        "{target}: cannot run {} ({e}): install the OpenSSH client (Debian: apt-get install openssh-client)",
                        crate::text::shown(&program)
                    ),
                )
            })?;
        let (Some(stdin), Some(stdout), Some(mut stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(EngineError::new(
                op,
                EngineErrorKind::Rejected,
                format!("{target}: ssh started without its pipes"),
            ));
        };
        let diagnostics = Diagnostics::default();
        let d = diagnostics.clone();
        tokio::spawn(async move {
            let mut buf = [0u8; 1024];
            loop {
                match stderr.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if let Ok(mut kept) = d.stderr.lock() {
                            let room = STDERR_CAP.saturating_sub(kept.len());
                            kept.extend_from_slice(&buf[..n.min(room)]);
                        }
                    }
                }
            }
            d.finished.store(true, std::sync::atomic::Ordering::Release);
            d.done.notify_waiters();
        });
        Ok(SshStream {
            stdin,
            stdout,
            _child: child,
            diagnostics,
            setup,
        })
    }

    /// The descriptor of the pipe to the child's stdin: while any copy of
    /// it is open, the remote end of the connection stays open (the owner
    /// link's, SPEC §6.1).
    pub(crate) fn stdin_fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        self.stdin.as_raw_fd()
    }
}

impl AsyncRead for SshStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let r = Pin::new(&mut self.stdout).poll_read(cx, buf);
        if r.is_ready() {
            // The daemon answered (or the connection ended): the handshake
            // is over either way.
            self.setup = None;
        }
        r
    }
}

impl AsyncWrite for SshStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stdin).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stdin).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stdin).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse_user_host_port() {
        for (input, user, host, port) in [
            ("h", None, "h", None),
            ("me@h", Some("me"), "h", None),
            ("me@h:2222", Some("me"), "h", Some(2222)),
            (
                "me@docker.example.com:22/",
                Some("me"),
                "docker.example.com",
                Some(22),
            ),
            ("10.0.0.5", None, "10.0.0.5", None),
            ("u_1.x-y@[::1]:2200", Some("u_1.x-y"), "::1", Some(2200)),
            ("[fe80::1]", None, "fe80::1", None),
        ] {
            let t = SshTarget::parse(input).unwrap_or_else(|e| panic!("{input}: {e}"));
            assert_eq!(
                (t.user.as_deref(), t.host.as_str(), t.port),
                (user, host, port),
                "{input}"
            );
        }
        let t = SshTarget::parse("me@[::1]:2200").expect("v6");
        assert_eq!(t.to_string(), "ssh://me@[::1]:2200");
        assert!(t.is_loopback());
        assert!(!SshTarget::parse("h").expect("h").is_loopback());
    }

    #[test]
    fn anything_ssh_could_read_as_an_option_is_refused() {
        for (input, why) in [
            ("-oProxyCommand=sh", "begins with '-'"),
            ("-oProxyCommand=touch${IFS}x@h", "begins with '-'"),
            ("me@-oProxyCommand=x", "begins with '-'"),
            ("-p@h", "begins with '-'"),
            ("me@h:-1", "port"),
            ("me@h:22 -oX", "port"),
            ("me@h -oX:22", "host may hold only"),
            ("me@h:2x", "port"),
            ("me@h:0", "port"),
            ("me@h:65536", "port"),
            ("me@h:+22", "port"),
            ("me;id@h", "user may hold only"),
            ("me@h;id", "host may hold only"),
            ("me@$(id)", "host may hold only"),
            ("me@h\tx", "host may hold only"),
            ("me:pw@h", "password"),
            ("@h", "user before @ is empty"),
            ("me@", "host is empty"),
            ("", "host is empty"),
            ("me@h/var/run/docker.sock", "no path"),
            ("me@h?x=1", "no path"),
            ("[::1", "closing"),
            ("[nothost]:22", "not an IPv6"),
            ("::1", "host is empty"),
        ] {
            let err = SshTarget::parse(input).expect_err(input);
            assert!(err.contains(why), "{input:?}: {err}");
        }
    }

    #[test]
    fn ssh_args_are_fail_closed_and_the_destination_follows_double_dash() {
        let t = SshTarget::parse("me@h.example:2222").expect("valid");
        let args = t.ssh_args(Duration::from_millis(4500));
        let joined = args.join(" ");
        assert_eq!(
            joined,
            "-T -o BatchMode=yes -o StrictHostKeyChecking=yes -o ForwardAgent=no -o ForwardX11=no -o ClearAllForwardings=yes -o PermitLocalCommand=no -o ControlMaster=no -o ControlPath=none -o ConnectTimeout=5 -l me -p 2222 -- h.example docker system dial-stdio"
        );
        // Never a laxer host key policy.
        assert!(!joined.contains("accept-new") && !joined.contains("StrictHostKeyChecking=no"));
        // Everything before `--` is odek's own; the target's parts appear
        // only as values of -l/-p or after `--`.
        let dd = args.iter().position(|a| a == "--").expect("--");
        assert_eq!(
            &args[dd + 1..],
            ["h.example", "docker", "system", "dial-stdio"]
        );
        // No user or port: ssh's defaults (config, local user, 22).
        let args = SshTarget::parse("h")
            .expect("valid")
            .ssh_args(Duration::ZERO);
        assert!(!args.iter().any(|a| a == "-l" || a == "-p"), "{args:?}");
        assert!(args.iter().any(|a| a == "ConnectTimeout=1"), "{args:?}");
    }

    #[test]
    fn failures_are_explained_with_the_fix_and_stderr_escaped() {
        let t = SshTarget::parse("me@10.0.0.5:2222").expect("valid");
        let e = explain_text(
            &t,
            Op::Version,
            "connection closed",
            "No ED25519 host key is known for [10.0.0.5]:2222 and you have requested strict checking.\r\nHost key verification failed.\x1b[31m",
        );
        assert_eq!(e.kind, EngineErrorKind::Rejected);
        assert!(
            e.message.contains("odek never accepts an unknown host key")
                && e.message.contains("ssh-keyscan -p 2222 10.0.0.5")
                && e.message.contains(">> ~/.ssh/known_hosts")
                && !e.message.contains('\x1b'),
            "{}",
            e.message
        );
        let e = explain_text(
            &t,
            Op::Version,
            "x",
            "@@@@@@@\n@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\nHost key verification failed.",
        );
        assert!(
            e.kind == EngineErrorKind::Rejected
                && e.message.contains("someone in the middle")
                && e.message.contains("ssh-keygen -R '[10.0.0.5]:2222'"),
            "{}",
            e.message
        );
        let e = explain_text(
            &t,
            Op::Version,
            "x",
            "me@10.0.0.5: Permission denied (publickey).",
        );
        assert!(
            e.kind == EngineErrorKind::Rejected && e.message.contains("authorized_keys"),
            "{}",
            e.message
        );
        let e = explain_text(&t, Op::Version, "x", "sh: 1: docker: not found");
        assert!(
            e.kind == EngineErrorKind::Rejected
                && e.message.contains("install the Docker CLI there"),
            "{}",
            e.message
        );
        let e = explain_text(
            &t,
            Op::Version,
            "x",
            "ssh: connect to host 10.0.0.5 port 2222: Connection refused",
        );
        assert_eq!(e.kind, EngineErrorKind::Unreachable, "{}", e.message);
    }

    /// A relative `PATH` entry (`.`,
    /// `bin`, `../x`) makes odek run an `ssh` found relative to its
    /// working directory, typically the repository; the Docker CLI's Go
    /// `exec.LookPath` refuses such a result (`exec.ErrDot`). Seen
    /// failing: `find_program_in` returns the relative path.
    #[test]
    fn a_relative_path_entry_is_never_searched() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().expect("tempdir");
        let ssh = d.path().join("ssh");
        std::fs::write(&ssh, "#!/bin/sh\ntouch pwned\n").expect("write");
        std::fs::set_permissions(&ssh, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        // The same directory, named relative to this process's cwd.
        let cwd = std::env::current_dir().expect("cwd");
        let depth = cwd.components().count() - 1;
        let rel: PathBuf = std::iter::repeat_n("..", depth)
            .collect::<PathBuf>()
            .join(d.path().strip_prefix("/").expect("absolute"));
        assert!(rel.is_relative() && rel.join("ssh").exists(), "{rel:?}");
        let found = find_program_in(rel.as_os_str());
        assert!(
            found.is_err(),
            "a relative PATH entry was searched: odek would run {found:?}"
        );
        // The premise: the same directory named absolutely is searched.
        assert_eq!(find_program_in(d.path().as_os_str()), Ok(ssh));
    }
}
