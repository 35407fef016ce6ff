//! A second Docker daemon, for tests that need an engine set up otherwise
//! than the machine's: another host resolver behind it (CVE-2024-29018,
//! SPEC §4.6), other endpoints (TLS, ssh: SPEC §6.2).
//!
//! It is the machine's own `dockerd` binary, started as a child of the test
//! in a mount and a network namespace of its own (`unshare -m -n
//! --propagation private`), with everything of its own under one temporary
//! directory (`/tmp/odek-e2e-dd-*`): `--data-root`, `--exec-root`,
//! `--pidfile`, its socket (`-H unix://…/run/docker.sock`, reachable from
//! the host's namespace like any file), a `--config-file` of its own
//! (empty unless [`DaemonOptions::daemon_json`] says; the machine's
//! `daemon.json` is not read), and a containerd it starts itself
//! (a system containerd is hidden from it by a tmpfs on `/run/containerd`
//! in its namespace: a shared one would run its containers outside it).
//!
//! Its network namespace is its own, so nothing it does to networking
//! reaches the host's: a daemon in the host's namespace with
//! `--bridge=none` deletes the host's `docker0` (libnetwork removes the
//! default bridge it is told not to use), and its networks' bridges and
//! routes would sit beside the machine's daemon's. In its namespace it has
//! only `lo` (brought up), no default bridge (`--bridge=none`), no iptables
//! rules, IP forwarding left alone; its containers' traffic cannot leave
//! the namespace at all. What it "forwards to the host's resolver" goes to
//! its namespace's loopback, where
//! [`DnsStub::start_in`](crate::dns_stub::DnsStub::start_in) serves
//! ([`SecondDaemon::netns`]). A TCP endpoint of its own (TLS, ssh) is
//! reached the same way, from a thread that joined that namespace. With
//! [`DaemonOptions::resolv_conf`] it sees that text as `/etc/resolv.conf`
//! (a bind mount in its mount namespace only; the host's file is never
//! touched).
//!
//! [`SecondDaemon`] stops it on drop, pass or fail: its containers and
//! networks are removed through its API, the daemon is stopped (SIGTERM,
//! then SIGKILL), what it started that still runs (its containerd, shims)
//! is killed by process ID, and the directory is removed; its namespaces go
//! with their last process. `tests/e2e/cleanup.sh` does the same for one a
//! killed test left.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// How a [`SecondDaemon`] is started.
#[derive(Clone, Debug, Default)]
pub struct DaemonOptions {
    /// What the daemon reads as `/etc/resolv.conf` (the host resolver it
    /// forwards containers' lookups to); `None`: the host's file.
    pub resolv_conf: Option<String>,
    /// More `dockerd` arguments (another `-H`, `--tlsverify`, …).
    pub extra_args: Vec<String>,
    /// The daemon's `--config-file` text (e.g. `"runtimes"` with
    /// `runtimeArgs`, which `--add-runtime` cannot give); `None`: `{}`.
    pub daemon_json: Option<String>,
    /// An address (`192.0.2.1/32`) its namespace's `lo` also gets before
    /// the daemon starts: a TCP endpoint on it is not loopback to odek, so
    /// the daemon counts as on another machine (SPEC §6.2.2), while no
    /// traffic leaves the namespace.
    pub extra_address: Option<String>,
}

/// A running second daemon; stopped and removed on drop.
pub struct SecondDaemon {
    dir: Option<tempfile::TempDir>,
    child: Option<Child>,
    socket: PathBuf,
}

/// The `dockerd` binary: on `PATH`, or `/usr/sbin/dockerd`.
fn dockerd() -> PathBuf {
    let found = Command::new("sh")
        .args(["-c", "command -v dockerd || ls /usr/sbin/dockerd"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|s| !s.is_empty());
    match found {
        Some(p) => PathBuf::from(p.lines().next().unwrap_or_default()),
        None => panic!(
            "no dockerd binary on this machine: the second daemon is the machine's own dockerd (Debian: apt-get install docker.io)"
        ),
    }
}

/// The script `unshare` runs: bring `lo` up, hide a system containerd, bind
/// the resolver file, then become dockerd with the arguments after it.
const START: &str = r#"set -e
ip link set lo up
if [ -n "$ODEK_DD_ADDR" ]; then ip addr add "$ODEK_DD_ADDR" dev lo; fi
if [ -d /run/containerd ]; then mount -t tmpfs -o mode=0711 odek-dd /run/containerd; fi
if [ -n "$ODEK_DD_RESOLV" ]; then mount --bind "$ODEK_DD_RESOLV" /etc/resolv.conf; fi
exec "$@"
"#;

impl SecondDaemon {
    /// Starts a daemon and waits (up to 60 s) until it answers on its
    /// socket. Panics, with the daemon's log, when it cannot: not root, no
    /// `dockerd`/`unshare`/`ip`, or the daemon refused to start.
    pub fn start(opts: DaemonOptions) -> SecondDaemon {
        assert!(
            rustix::process::geteuid().is_root(),
            "a second Docker daemon needs root (namespaces of its own)"
        );
        let dir = tempfile::Builder::new()
            .prefix("odek-e2e-dd-")
            .tempdir_in("/tmp")
            .expect("tempdir");
        let d = dir.path().to_path_buf();
        // Searchable by all (tempfile makes it 0700): a sandbox running as
        // a non-root operator's uid is started from the data root below.
        std::fs::set_permissions(&d, std::os::unix::fs::PermissionsExt::from_mode(0o711))
            .expect("chmod");
        for sub in ["root", "exec", "run"] {
            std::fs::create_dir_all(d.join(sub)).expect("mkdir");
        }
        std::fs::write(
            d.join("daemon.json"),
            opts.daemon_json.as_deref().unwrap_or("{}\n"),
        )
        .expect("daemon.json");
        let resolv = opts.resolv_conf.as_ref().map(|text| {
            let p = d.join("resolv.conf");
            std::fs::write(&p, text).expect("resolv.conf");
            p
        });
        let socket = d.join("run/docker.sock");
        let log = std::fs::File::create(d.join("dockerd.log")).expect("log");
        let mut cmd = Command::new("unshare");
        cmd.args([
            "-m",
            "-n",
            "--propagation",
            "private",
            "sh",
            "-c",
            START,
            "odek-dd",
        ])
        .arg(dockerd())
        .arg("--config-file")
        .arg(d.join("daemon.json"))
        .arg("--data-root")
        .arg(d.join("root"))
        .arg("--exec-root")
        .arg(d.join("exec"))
        .arg("--pidfile")
        .arg(d.join("run/docker.pid"))
        .arg("-H")
        .arg(format!("unix://{}", socket.display()))
        .args([
            "--bridge=none",
            "--iptables=false",
            "--ip-forward=false",
            "--ip-masq=false",
            "--storage-driver=vfs",
            "--containerd-namespace=odek-dd",
            "--containerd-plugins-namespace=odek-dd-plugins",
        ])
        .args(&opts.extra_args)
        .env_remove("DOCKER_HOST")
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log"))
        .stderr(log);
        match &opts.extra_address {
            Some(a) => cmd.env("ODEK_DD_ADDR", a),
            None => cmd.env_remove("ODEK_DD_ADDR"),
        };
        match &resolv {
            Some(p) => cmd.env("ODEK_DD_RESOLV", p),
            None => cmd.env_remove("ODEK_DD_RESOLV"),
        };
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run unshare (util-linux): {e}"));
        let mut daemon = SecondDaemon {
            dir: Some(dir),
            child: Some(child),
            socket,
        };
        daemon.wait_ready();
        daemon
    }

    /// Polls the daemon until it answers; panics with its log otherwise.
    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if self.socket.exists() && self.docker_output(&["version"]).status.success() {
                return;
            }
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    let log = self.log();
                    self.stop();
                    panic!("the second dockerd exited ({status}) before it answered:\n{log}");
                }
            }
            if Instant::now() > deadline {
                let log = self.log();
                self.stop();
                panic!("the second dockerd did not answer within 60 s:\n{log}");
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Its network namespace (`/proc/<pid>/ns/net`), for a thread to join
    /// ([`DnsStub::start_in`](crate::dns_stub::DnsStub::start_in)).
    pub fn netns(&self) -> PathBuf {
        let pid = self.child.as_ref().expect("running").id();
        PathBuf::from(format!("/proc/{pid}/ns/net"))
    }

    /// `cmd` run in the daemon's network namespace (`nsenter --net=…`),
    /// with the same arguments, environment and directory: how a test
    /// reaches a TCP endpoint of the daemon's (TLS on its `127.0.0.1`).
    /// Only the network namespace is entered: files are the host's.
    pub fn in_netns(&self, cmd: &Command) -> Command {
        let mut c = Command::new("nsenter");
        c.arg(format!("--net={}", self.netns().display()))
            .arg("--")
            .arg(cmd.get_program())
            .args(cmd.get_args());
        for (k, v) in cmd.get_envs() {
            match v {
                Some(v) => c.env(k, v),
                None => c.env_remove(k),
            };
        }
        if let Some(d) = cmd.get_current_dir() {
            c.current_dir(d);
        }
        c
    }

    /// Its directory (data, exec root, socket, log).
    pub fn dir(&self) -> &Path {
        self.dir.as_ref().expect("running").path()
    }

    /// Its endpoint as `DOCKER_HOST` names it:
    /// `unix:///tmp/odek-e2e-dd-…/run/docker.sock`.
    pub fn host(&self) -> String {
        format!("unix://{}", self.socket.display())
    }

    /// The daemon's log so far.
    pub fn log(&self) -> String {
        self.dir
            .as_ref()
            .and_then(|d| std::fs::read_to_string(d.path().join("dockerd.log")).ok())
            .unwrap_or_default()
    }

    /// `docker -H <it> <args>`.
    pub fn docker_output(&self, args: &[&str]) -> Output {
        Command::new("docker")
            .arg("-H")
            .arg(self.host())
            .args(args)
            .env_remove("DOCKER_CONTEXT")
            .output()
            .unwrap_or_else(|e| panic!("cannot run docker: {e}"))
    }

    /// `docker -H <it> <args>` → stdout (trimmed); panics on failure.
    pub fn docker(&self, args: &[&str]) -> String {
        let out = self.docker_output(args);
        assert!(
            out.status.success(),
            "docker -H {} {args:?} failed: {}",
            self.host(),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Copies `image` from the machine's daemon into this one (`docker
    /// save | docker -H … load`); no registry is asked.
    pub fn load_image(&self, image: &str) {
        let tar = self.dir().join("image.tar");
        crate::docker(&["save", "-o", &tar.display().to_string(), image]);
        self.docker(&["load", "-i", &tar.display().to_string()]);
        let _ = std::fs::remove_file(tar);
    }

    /// Stops it and removes everything it made (idempotent; drop calls it).
    pub fn stop(&mut self) {
        let Some(dir) = self.dir.take() else {
            return;
        };
        let answers = self.child.is_some() && self.docker_output(&["version"]).status.success();
        if answers {
            let ids = self.docker_output(&["ps", "-aq"]);
            for id in String::from_utf8_lossy(&ids.stdout).split_whitespace() {
                let _ = self.docker_output(&["rm", "-f", id]);
            }
            let nets = self.docker_output(&["network", "ls", "-q", "--filter", "type=custom"]);
            for id in String::from_utf8_lossy(&nets.stdout).split_whitespace() {
                let _ = self.docker_output(&["network", "rm", id]);
            }
        }
        if let Some(mut child) = self.child.take() {
            if let Some(pid) = rustix::process::Pid::from_raw(child.id() as i32) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
            }
            let deadline = Instant::now() + Duration::from_secs(30);
            while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(100));
            }
            if matches!(child.try_wait(), Ok(None)) {
                let _ = child.kill();
            }
            let _ = child.wait();
        }
        kill_started_under(dir.path());
        // The namespaces' mounts and interfaces went with their last
        // process; what is left is plain files (vfs layers), removed with
        // the directory.
        let path = dir.path().to_path_buf();
        if dir.close().is_err() {
            let _ = std::fs::remove_dir_all(&path);
        }
    }
}

impl Drop for SecondDaemon {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Kills (SIGKILL, by process ID) every process whose command line names
/// `dir`: what the daemon started under it (its containerd, shims) and
/// outlived it. Waits up to 10 s for them to go.
fn kill_started_under(dir: &Path) {
    let needle = dir.display().to_string();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut left = Vec::new();
        for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            if pid == std::process::id() as i32 {
                continue;
            }
            let Ok(cmdline) = std::fs::read(e.path().join("cmdline")) else {
                continue;
            };
            if String::from_utf8_lossy(&cmdline).contains(&needle) {
                left.push(pid);
            }
        }
        if left.is_empty() || Instant::now() > deadline {
            return;
        }
        for pid in left {
            if let Some(p) = rustix::process::Pid::from_raw(pid) {
                let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}
