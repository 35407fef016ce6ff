//! An OpenSSH server for `ssh://` engine tests (SPEC §6.2.2): the
//! machine's `sshd`, run by the test in a [`SecondDaemon`]'s network
//! namespace on its `127.0.0.1` only, with a host key made by the test
//! (`ssh-keygen`), logins for root by a client key made by the test alone
//! (no password, no PAM), and `DOCKER_HOST` set in its sessions to the
//! second daemon's socket, so the remote `docker system dial-stdio` reaches
//! that daemon.
//!
//! The client side never touches the operator's own `~/.ssh`: each
//! [`SshClient`] is a directory of its own with the client key, a
//! `known_hosts`, an `ssh_config` naming both, and a `bin/ssh` wrapper that
//! runs `/usr/bin/ssh -F <that config> "$@"`; the test puts that `bin`
//! first on odek's `PATH`. The config says `StrictHostKeyChecking
//! accept-new` on purpose: a lax configuration that odek's own
//! `-o StrictHostKeyChecking=yes` must override.
//!
//! [`Sshd`] stops the server on drop (SIGTERM, then SIGKILL, by its process
//! ID) and removes its directory.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::second_daemon::SecondDaemon;

/// The port sshd listens on, on the daemon namespace's 127.0.0.1.
pub const SSH_PORT: u16 = 2222;

/// A running sshd; stopped on drop.
pub struct Sshd {
    dir: tempfile::TempDir,
    child: Option<Child>,
}

fn keygen(path: &Path, comment: &str) {
    let out = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", comment, "-f"])
        .arg(path)
        .output()
        .unwrap_or_else(|e| panic!("cannot run ssh-keygen (openssh-client): {e}"));
    assert!(
        out.status.success(),
        "ssh-keygen: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn sshd_binary() -> PathBuf {
    let p = PathBuf::from("/usr/sbin/sshd");
    assert!(
        p.exists(),
        "no /usr/sbin/sshd on this machine: the ssh:// tests run the machine's OpenSSH server (Debian: apt-get install openssh-server)"
    );
    p
}

impl Sshd {
    /// Starts sshd in `dd`'s network namespace on `127.0.0.1:SSH_PORT`
    /// and waits (up to 20 s) until it listens; panics with its log
    /// otherwise. Makes its host key, a second "other" host key (for a
    /// changed-key test) and the client key whose public half it accepts.
    pub fn start(dd: &SecondDaemon) -> Sshd {
        let dir = tempfile::Builder::new()
            .prefix("odek-e2e-sshd-")
            .tempdir_in("/tmp")
            .expect("tempdir");
        let d = dir.path();
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        keygen(&d.join("host_key"), "odek-e2e host");
        keygen(&d.join("other_host_key"), "odek-e2e other host");
        keygen(&d.join("client_key"), "odek-e2e client");
        std::fs::copy(d.join("client_key.pub"), d.join("authorized_keys"))
            .expect("authorized_keys");
        // sshd's privilege separation directory (compiled in).
        std::fs::create_dir_all("/run/sshd").expect("/run/sshd");
        let config = format!(
            "ListenAddress 127.0.0.1:{SSH_PORT}\n\
             HostKey {d}/host_key\n\
             PidFile {d}/sshd.pid\n\
             AuthorizedKeysFile {d}/authorized_keys\n\
             StrictModes no\n\
             PubkeyAuthentication yes\n\
             PasswordAuthentication no\n\
             KbdInteractiveAuthentication no\n\
             UsePAM no\n\
             PermitRootLogin prohibit-password\n\
             AllowUsers root\n\
             X11Forwarding no\n\
             AllowTcpForwarding no\n\
             SetEnv DOCKER_HOST={host}\n",
            d = d.display(),
            host = dd.host()
        );
        std::fs::write(d.join("sshd_config"), config).expect("sshd_config");
        let log = std::fs::File::create(d.join("sshd.log")).expect("log");
        let mut cmd = Command::new(sshd_binary());
        cmd.args(["-D", "-e", "-f"]).arg(d.join("sshd_config"));
        let child = dd
            .in_netns(&cmd)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start sshd: {e}"));
        let mut s = Sshd {
            dir,
            child: Some(child),
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if s.log().contains("Server listening on 127.0.0.1") {
                return s;
            }
            if let Some(Ok(Some(status))) = s.child.as_mut().map(Child::try_wait) {
                panic!("sshd exited ({status}):\n{}", s.log());
            }
            assert!(
                Instant::now() < deadline,
                "sshd did not listen within 20 s:\n{}",
                s.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Its log so far (`-e`: stderr).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("sshd.log")).unwrap_or_default()
    }

    /// The `known_hosts` line for its real host key (`[127.0.0.1]:2222 …`).
    pub fn known_host_line(&self) -> String {
        self.line_for("host_key.pub")
    }

    /// A `known_hosts` line naming it with another key: a changed host key.
    pub fn wrong_host_line(&self) -> String {
        self.line_for("other_host_key.pub")
    }

    fn line_for(&self, file: &str) -> String {
        let key = std::fs::read_to_string(self.dir.path().join(file)).expect("host key");
        let mut parts = key.split_whitespace();
        format!(
            "[127.0.0.1]:{SSH_PORT} {} {}\n",
            parts.next().expect("type"),
            parts.next().expect("key")
        )
    }

    /// A client directory for uid `uid`/gid `gid` with `known_hosts`
    /// holding `known` (the client key, config and `bin/ssh` wrapper as
    /// described in the module).
    pub fn client(&self, name: &str, known: &str, uid: u32, gid: u32) -> SshClient {
        let dir = self.dir.path().join(format!("client-{name}"));
        std::fs::create_dir_all(dir.join("bin")).expect("mkdir");
        std::fs::copy(self.dir.path().join("client_key"), dir.join("id_ed25519")).expect("key");
        std::fs::write(dir.join("known_hosts"), known).expect("known_hosts");
        std::fs::write(
            dir.join("ssh_config"),
            format!(
                "Host *\n  UserKnownHostsFile {d}/known_hosts\n  GlobalKnownHostsFile /dev/null\n  IdentityFile {d}/id_ed25519\n  IdentitiesOnly yes\n  StrictHostKeyChecking accept-new\n  LogLevel ERROR\n",
                d = dir.display()
            ),
        )
        .expect("ssh_config");
        std::fs::write(
            dir.join("bin/ssh"),
            format!(
                "#!/bin/sh\nexec /usr/bin/ssh -F {} \"$@\"\n",
                dir.join("ssh_config").display()
            ),
        )
        .expect("wrapper");
        for (p, mode) in [
            (dir.clone(), 0o755),
            (dir.join("bin"), 0o755),
            (dir.join("bin/ssh"), 0o755),
            (dir.join("id_ed25519"), 0o600),
            (dir.join("known_hosts"), 0o644),
            (dir.join("ssh_config"), 0o644),
        ] {
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).expect("chmod");
            std::os::unix::fs::chown(&p, Some(uid), Some(gid)).expect("chown");
        }
        SshClient { dir }
    }

    /// Stops sshd (SIGTERM, then SIGKILL after 5 s); idempotent.
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        if let Some(pid) = rustix::process::Pid::from_raw(child.id() as i32) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        if matches!(child.try_wait(), Ok(None)) {
            let _ = child.kill();
        }
        let _ = child.wait();
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A client directory ([`Sshd::client`]).
pub struct SshClient {
    dir: PathBuf,
}

impl SshClient {
    /// `PATH` for odek: the wrapper's `bin` first, then the system's.
    pub fn path_env(&self) -> String {
        format!(
            "{}:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
            self.dir.join("bin").display()
        )
    }

    /// Its `known_hosts` as it is now.
    pub fn known_hosts(&self) -> String {
        std::fs::read_to_string(self.dir.join("known_hosts")).unwrap_or_default()
    }
}
