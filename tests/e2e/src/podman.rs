//! A Podman API service of the test's own (SPEC §6.2.3), for the e2e test
//! of odek on Podman (`tests/podman.rs`).
//!
//! Debian's `podman system service` serves the Docker-compatible API on a
//! socket in a temporary directory (`/tmp/odek-e2e-podman-*`), started as a
//! child of the test in a mount and a network namespace of its own
//! (`unshare -m -n --propagation private`, as [`crate::second_daemon`]
//! does for `dockerd`): its bridges, netavark's firewall rules and
//! aardvark-dns stay in that namespace, and its containers' traffic cannot
//! leave it. Everything else of its own lies under the directory too: its
//! storage (`overlay`; `graphroot`, `runroot`: `storage.conf`, named by
//! `CONTAINERS_STORAGE_CONF`), its `containers.conf` (`CONTAINERS_CONF`:
//! libpod's `tmp_dir`, netavark's `network_config_dir`, `cgroupfs`, file
//! events) — the machine's own Podman, its storage,
//! networks and config are never touched.
//!
//! Every `podman` and `podman-compose` command of the harness runs in the
//! service's namespaces (`nsenter -t PID -n -m`), with the same two
//! variables, so `podman-compose` creates the networks and containers the
//! service then serves. The test images are copied in (`docker save |
//! podman load`); nothing is pulled.
//!
//! Two limits of this machine are set, not left to Podman: as root Podman
//! gives each container `nofile` and `nproc` of 1048576 and, without
//! `CAP_SYS_RESOURCE` here, runc cannot set them ("error setting rlimit");
//! `default_ulimits` gives the limits the service runs with instead.
//!
//! [`Podman`] stops on drop, pass or fail: its containers and networks are
//! removed through `podman`, the service is stopped (SIGTERM, then
//! SIGKILL), what it started that still runs (conmon, aardvark-dns) is
//! killed by process ID, and the directory is removed.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A running Podman API service; stopped and removed on drop.
pub struct Podman {
    dir: Option<tempfile::TempDir>,
    child: Option<Child>,
    socket: PathBuf,
}

/// The hard limit of `resource` this process has (what runc may set).
fn hard_limit(resource: rustix::process::Resource, cap: u64) -> u64 {
    rustix::process::getrlimit(resource)
        .maximum
        .unwrap_or(cap)
        .min(cap)
}

impl Podman {
    /// Starts the service and waits (up to 30 s) until `/_ping` answers.
    pub fn start() -> Podman {
        let dir = tempfile::Builder::new()
            .prefix("odek-e2e-podman-")
            .tempdir()
            .expect("tempdir");
        let d = dir.path();
        for sub in ["root", "runroot", "tmp", "networks"] {
            std::fs::create_dir_all(d.join(sub)).expect("mkdir");
        }
        std::fs::write(
            d.join("storage.conf"),
            format!(
                "[storage]\ndriver = \"overlay\"\ngraphroot = \"{}\"\nrunroot = \"{}\"\n",
                d.join("root").display(),
                d.join("runroot").display()
            ),
        )
        .expect("storage.conf");
        // nproc: Podman itself runs with at most 32768 here.
        let nofile = hard_limit(rustix::process::Resource::Nofile, 1 << 20);
        let nproc = hard_limit(rustix::process::Resource::Nproc, 32768);
        std::fs::write(
            d.join("containers.conf"),
            format!(
                "[containers]\ndefault_ulimits = [\"nofile={nofile}:{nofile}\", \"nproc={nproc}:{nproc}\"]\n\
                 [engine]\ntmp_dir = \"{}\"\ncgroup_manager = \"cgroupfs\"\nevents_logger = \"file\"\n\
                 [network]\nnetwork_backend = \"netavark\"\nnetwork_config_dir = \"{}\"\n",
                d.join("tmp").display(),
                d.join("networks").display()
            ),
        )
        .expect("containers.conf");
        let socket = d.join("podman.sock");
        let log = std::fs::File::create(d.join("service.log")).expect("log");
        let mut cmd = Command::new("unshare");
        // Descriptors inherited from the test's parents (a `flock` on the
        // Docker lock of this machine) are closed: a service that outlived
        // a killed test must not hold them.
        cmd.args(["-m", "-n", "--propagation", "private", "bash", "-c"])
            .arg(
                "for fd in $(ls /proc/$$/fd); do [ \"$fd\" -gt 2 ] && eval \"exec $fd>&-\"; done 2>/dev/null; \
                 ip link set lo up && exec podman system service --time=0 \"$0\"",
            )
            .arg(format!("unix://{}", socket.display()))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log);
        Self::conf_env(d, &mut cmd);
        let child = cmd
            .spawn()
            .expect("unshare podman system service (Debian: apt-get install podman)");
        let mut p = Podman {
            dir: Some(dir),
            child: Some(child),
            socket,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let ping = Command::new("curl")
                .args(["-sf", "--unix-socket"])
                .arg(&p.socket)
                .arg("http://podman/_ping")
                .output();
            if ping.is_ok_and(|o| o.status.success()) {
                return p;
            }
            if let Some(Some(status)) = p.child.as_mut().map(|c| c.try_wait().ok().flatten()) {
                let log = p.log();
                p.stop();
                panic!("podman system service exited ({status}):\n{log}");
            }
            if Instant::now() > deadline {
                let log = p.log();
                p.stop();
                panic!("podman system service did not answer within 30 s:\n{log}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn conf_env(dir: &Path, cmd: &mut Command) {
        cmd.env("CONTAINERS_CONF", dir.join("containers.conf"))
            .env("CONTAINERS_STORAGE_CONF", dir.join("storage.conf"))
            .env_remove("CONTAINER_HOST")
            .env_remove("CONTAINER_CONNECTION");
    }

    /// Its directory.
    pub fn dir(&self) -> &Path {
        self.dir.as_ref().expect("running").path()
    }

    /// The service's process ID (its namespaces are the containers').
    fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// `DOCKER_HOST` for it: `unix:///tmp/odek-e2e-podman-…/podman.sock`.
    pub fn host(&self) -> String {
        format!("unix://{}", self.socket.display())
    }

    /// `program args…` in the service's namespaces with its configuration.
    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new("nsenter");
        c.args(["-t", &self.pid().to_string(), "-n", "-m", program]);
        Self::conf_env(self.dir(), &mut c);
        c
    }

    /// `podman args…`, whatever it exits with.
    pub fn podman_output(&self, args: &[&str]) -> Output {
        crate::run(self.command("podman").args(args).stdin(Stdio::null()))
    }

    /// `podman args…`, which must succeed: its stdout, trimmed.
    pub fn podman(&self, args: &[&str]) -> String {
        let out = self.podman_output(args);
        assert!(
            out.status.success(),
            "podman {args:?} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Copies `images` from the machine's Docker (`docker save | podman
    /// load`): nothing is pulled.
    pub fn load_images(&self, images: &[&str]) {
        let tar = self.dir().join("images.tar");
        let mut args = vec!["save", "-o"];
        let t = tar.display().to_string();
        args.push(&t);
        args.extend_from_slice(images);
        crate::docker(&args);
        self.podman(&["load", "-q", "-i", &t]);
        let _ = std::fs::remove_file(tar);
    }

    /// `podman-compose -p project -f tests/fixtures/compose/docker-compose.yml args…`
    /// with this checkout's image names.
    pub fn compose(&self, project: &str, args: &[&str]) -> Output {
        let file = crate::repo().join("tests/fixtures/compose/docker-compose.yml");
        let mut c = self.command("podman-compose");
        c.args(["-p", project, "-f"])
            .arg(file)
            .args(args)
            .env("ODEK_TEST_NS", crate::TEST_NS)
            .env("ODEK_TEST_IMAGES", crate::IMAGE_PREFIX)
            .stdin(Stdio::null());
        crate::run(&mut c)
    }

    /// Brings the Compose fixture up as `project` with podman-compose and
    /// waits (up to 60 s) until redis answers `PING` and postgres
    /// `pg_isready` (podman-compose's health checks need systemd timers,
    /// which this machine has not: each is asked here instead).
    pub fn compose_up(&self, project: &str) {
        let out = self.compose(project, &["up", "-d"]);
        assert!(
            out.status.success(),
            "podman-compose up failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let ok = crate::wait_until(Duration::from_secs(60), || {
            self.podman_output(&["exec", &format!("{project}_redis_1"), "redis-cli", "ping"])
                .status
                .success()
                && self
                    .podman_output(&[
                        "exec",
                        &format!("{project}_postgres_1"),
                        "pg_isready",
                        "-h",
                        "127.0.0.1",
                    ])
                    .status
                    .success()
        });
        assert!(
            ok,
            "the fixture did not come up on Podman:\n{}\n{}",
            self.podman(&["ps", "-a"]),
            String::from_utf8_lossy(
                &self
                    .podman_output(&["logs", &format!("{project}_postgres_1")])
                    .stderr
            )
        );
    }

    /// The service's log so far.
    pub fn log(&self) -> String {
        self.dir
            .as_ref()
            .and_then(|d| std::fs::read_to_string(d.path().join("service.log")).ok())
            .unwrap_or_default()
    }

    /// Stops it and removes everything it made (idempotent; drop calls it).
    pub fn stop(&mut self) {
        let Some(dir) = self.dir.as_ref().map(|d| d.path().to_path_buf()) else {
            return;
        };
        // Never panics: it runs in drop, also while a failed test unwinds.
        let running = self
            .child
            .as_mut()
            .and_then(|c| matches!(c.try_wait(), Ok(None)).then(|| c.id()));
        if let Some(pid) = running {
            for args in [
                &["rm", "-a", "-f", "-t", "0"][..],
                &["network", "prune", "-f"],
            ] {
                let mut c = Command::new("nsenter");
                c.args(["-t", &pid.to_string(), "-n", "-m", "podman"])
                    .args(args)
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null());
                Self::conf_env(&dir, &mut c);
                let _ = c.status();
            }
        }
        // Everything that runs with the service's network namespace:
        // the service, conmon, aardvark-dns, container processes.
        let ns = self
            .child
            .as_ref()
            .and_then(|c| std::fs::read_link(format!("/proc/{}/ns/net", c.id())).ok());
        if let Some(mut child) = self.child.take() {
            if let Some(pid) = rustix::process::Pid::from_raw(child.id() as i32) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
            }
            let deadline = Instant::now() + Duration::from_secs(10);
            while child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        if let Some(ns) = ns {
            for pid in pids_in_netns(&ns) {
                if let Some(p) = rustix::process::Pid::from_raw(pid) {
                    let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
                }
            }
        }
        // Processes die asynchronously; the directory goes when they have.
        let _ = crate::wait_until(Duration::from_secs(5), || {
            std::fs::remove_dir_all(&dir).is_ok() || !dir.exists()
        });
        self.dir.take();
    }
}

impl Drop for Podman {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The processes in network namespace `ns` (`net:[…]`, as
/// `/proc/PID/ns/net` reads): the service's own namespace, so only what it
/// started.
fn pids_in_netns(ns: &Path) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_link(format!("/proc/{pid}/ns/net")).is_ok_and(|l| l.as_path() == ns)
        })
        .collect()
}
