//! Helpers for odek's real-Docker end-to-end tests (SPEC §12).
//!
//! The suite never skips: a missing daemon, image or binary is a failure with
//! the command that fixes it. Tests only talk to containers they start (the
//! Compose fixture and odek sandboxes); "no internet" is asserted from the
//! container's routing table, never by probing outside.

pub mod dns_stub;
pub mod fault_proxy;
pub mod operator;
pub mod podman;
pub mod portable;
pub mod remote;
pub mod second_daemon;
pub mod sshd;
pub mod tls_certs;
pub mod tty;

pub use operator::{operators, Operator};

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

/// This checkout's test namespace (xtask/src/ns.rs, compiled in by
/// build.rs): every image and Compose project name below carries it, so two
/// checkouts sharing a Docker daemon keep apart.
pub const TEST_NS: &str = env!("ODEK_TEST_NS");
/// Repository prefix of this checkout's test images (`<prefix>/base:1`); an
/// image a test builds is named under it too.
pub const IMAGE_PREFIX: &str = concat!("odek-test-", env!("ODEK_TEST_NS"));
/// Compose project the shared fixture runs as.
pub const PROJECT: &str = concat!("odeke2e", env!("ODEK_TEST_NS"));
/// Base test image (shell, redis-cli, pg_isready, getent, ip).
pub const BASE_IMAGE: &str = concat!("odek-test-", env!("ODEK_TEST_NS"), "/base:1");
/// BusyBox only, its ash as `/bin/sh` (tests/images/build.sh): the shell
/// and tools of the pinned alpine default, which cannot be pulled here.
pub const BUSYBOX_IMAGE: &str = concat!("odek-test-", env!("ODEK_TEST_NS"), "/busybox:1");
/// Label on everything the tests create besides odek's own containers.
pub const TEST_LABEL: &str = "dev.odek.test=true";
/// Label naming this checkout on the networks the tests create, so that
/// tests/e2e/cleanup.sh removes only this checkout's.
pub const NS_LABEL: &str = concat!("dev.odek.test.ns=", env!("ODEK_TEST_NS"));

/// The workspace root (`ODEK_REPO` overrides it, e.g. when the compiled
/// suite runs elsewhere, as in the Nix VM test).
pub fn repo() -> PathBuf {
    if let Ok(r) = std::env::var("ODEK_REPO") {
        return PathBuf::from(r);
    }
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("tests/e2e is two levels below the root")
        .to_path_buf()
}

/// The `odek` binary next to this test executable (`target/<profile>/odek`).
pub fn odek_bin() -> PathBuf {
    if let Ok(p) = std::env::var("ODEK_BIN") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("test executable path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps/<test>");
    let bin = profile_dir.join("odek");
    if !bin.exists() {
        UNUSABLE.store(true, std::sync::atomic::Ordering::SeqCst);
    }
    assert!(
        bin.exists(),
        "{} is missing: run `cargo build -p odek-cli` (or `cargo xtask e2e`) first",
        bin.display()
    );
    assert_fresh(&bin);
    bin
}

/// Set when the odek binary is missing or stale (its check panicked): a
/// `Drop` must not run odek then, which would panic again during the
/// unwind — an abort that skips every other cleanup (second daemons left
/// running).
static UNUSABLE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Fails when a source file of the CLI or core is newer than the binary:
/// `cargo test -p odek-e2e` does not rebuild `odek` by itself.
fn assert_fresh(bin: &Path) {
    static CHECKED: OnceLock<()> = OnceLock::new();
    CHECKED.get_or_init(|| {
        let built = std::fs::metadata(bin)
            .and_then(|m| m.modified())
            .expect("binary mtime");
        let mut stack = vec![repo().join("cli/src"), repo().join("core/src")];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let p = entry.path();
                if p.is_dir() {
                    stack.push(p);
                } else if let Ok(m) = entry.metadata().and_then(|m| m.modified()) {
                    if m > built {
                        UNUSABLE.store(true, std::sync::atomic::Ordering::SeqCst);
                    }
                    assert!(
                        m <= built,
                        "{} is newer than {}: run `cargo build -p odek-cli` (or `cargo xtask e2e`) first",
                        p.display(),
                        bin.display()
                    );
                }
            }
        }
    });
}

/// What the suite's odek gets as `ODEK_SUPERVISOR`: the caller's value
/// when set (empty: off), else `ODEK_SUPERVISOR_BIN` (the static binary
/// `cargo xtask` builds), else nothing (odek then looks beside itself,
/// where cargo's dynamic build lies, and says the supervisor is off).
pub fn supervisor_env() -> Option<std::ffi::OsString> {
    std::env::var_os("ODEK_SUPERVISOR").or_else(|| std::env::var_os("ODEK_SUPERVISOR_BIN"))
}

/// Runs a command, returning its output; panics when it cannot start.
pub fn run(cmd: &mut Command) -> Output {
    cmd.output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"))
}

/// `docker <args>` → stdout (trimmed); panics on failure.
pub fn docker(args: &[&str]) -> String {
    let out = run(Command::new("docker").args(args));
    assert!(
        out.status.success(),
        "docker {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// `docker <args>` → success flag (for probes like inspect).
pub fn docker_ok(args: &[&str]) -> bool {
    run(Command::new("docker").args(args)).status.success()
}

/// `docker <args>` → stdout (trimmed) when it succeeds, `None` when it
/// fails: for an object a concurrent test may remove between a listing and
/// its inspect.
pub fn docker_try(args: &[&str]) -> Option<String> {
    let out = run(Command::new("docker").args(args));
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Makes sure the daemon answers, the test images exist and the shared
/// Compose fixture runs. Called by every test; does the work once.
pub fn fixture() {
    static READY: OnceLock<()> = OnceLock::new();
    READY.get_or_init(|| {
        let info = run(Command::new("docker").args(["info", "--format", "{{.ServerVersion}}"]));
        assert!(
            info.status.success(),
            "the Docker daemon is unreachable; the e2e suite never skips — start Docker ({})",
            String::from_utf8_lossy(&info.stderr).trim()
        );
        if !docker_ok(&["image", "inspect", BASE_IMAGE]) {
            let st = run(Command::new("bash")
                .arg(repo().join("tests/images/build.sh"))
                .env("ODEK_TEST_NS", TEST_NS));
            assert!(st.status.success(), "tests/images/build.sh failed");
        }
        let nets = docker(&[
            "network",
            "ls",
            "-q",
            "--filter",
            &format!("label=com.docker.compose.project={PROJECT}"),
        ]);
        let running = docker(&[
            "ps",
            "-q",
            "--filter",
            &format!("label=com.docker.compose.project={PROJECT}"),
            "--filter",
            "health=healthy",
        ]);
        if nets.lines().count() < 2 || running.lines().count() < 2 {
            let out = run(Command::new("bash")
                .arg(repo().join("tests/fixtures/compose/up.sh"))
                .arg(PROJECT)
                .env("ODEK_TEST_NS", TEST_NS));
            assert!(
                out.status.success(),
                "fixture up failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    });
}

/// A scratch project directory with its own `$ODEK_HOME`, and the odek
/// command line bound to it.
pub struct Project {
    /// Keeps the directory alive.
    pub dir: tempfile::TempDir,
    /// `$ODEK_HOME` (outside the project directory).
    pub home: tempfile::TempDir,
    /// Who runs odek here; `None`: the suite's own identity.
    pub operator: Option<Operator>,
    /// Every odek of this project runs with `ODEK_SUPERVISOR=` (empty):
    /// sandboxes through the exec API ([`Project::exec_api`]).
    pub exec_api: bool,
}

impl Project {
    /// A fresh project directory (`/tmp/odek-e2e-*`), odek run by the
    /// suite's own identity.
    pub fn new() -> Project {
        Project::create(None)
    }

    /// A fresh project directory and `$ODEK_HOME` owned by `op`, who runs
    /// every odek command of this project ([`Operator::command`]).
    pub fn as_operator(op: Operator) -> Project {
        let p = Project::create(Some(op));
        op.own(p.dir.path());
        op.own(p.home.path());
        p
    }

    /// A fresh project for a test whose engine is a second daemon only
    /// ([`second_daemon::SecondDaemon`]): the machine's daemon is not
    /// asked for the shared fixture (its Compose project), only the images
    /// a test copies in ([`second_daemon::SecondDaemon::load_image`]).
    pub fn for_second_daemon() -> Project {
        Project::scratch(None)
    }

    fn create(operator: Option<Operator>) -> Project {
        fixture();
        Project::scratch(operator)
    }

    fn scratch(operator: Option<Operator>) -> Project {
        let home = tempfile::Builder::new()
            .prefix("odek-e2e-home-")
            .tempdir()
            .expect("tempdir");
        // Private whatever the umask: a group-writable $ODEK_HOME is refused
        // (SPEC §7.3).
        std::fs::set_permissions(
            home.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o700),
        )
        .expect("chmod the home");
        Project {
            dir: tempfile::Builder::new()
                .prefix("odek-e2e-")
                .tempdir()
                .expect("tempdir"),
            home,
            operator,
            exec_api: false,
        }
    }

    /// The same project with the supervisor turned off (`ODEK_SUPERVISOR=`):
    /// for the tests of the exec API's path (the fallback, which must stay
    /// covered while the supervisor is the default).
    pub fn exec_api(mut self) -> Project {
        self.exec_api = true;
        self
    }

    /// The project directory (canonical).
    pub fn path(&self) -> PathBuf {
        self.dir.path().canonicalize().expect("canonical tempdir")
    }

    /// `odek -C <dir> <args>` with a clean `ODEK_*` environment but for
    /// `ODEK_SUPERVISOR` ([`supervisor_env`]): the suite runs supervised
    /// sandboxes, as users do. A test of the exec API's path sets
    /// `ODEK_SUPERVISOR=` (empty) on the command.
    pub fn odek(&self, args: &[&str]) -> Command {
        let mut c = Command::new(odek_bin());
        c.current_dir(self.path())
            .arg("-C")
            .arg(self.path())
            .args(args)
            .env("ODEK_HOME", self.home.path());
        for (k, _) in std::env::vars() {
            if k.starts_with("ODEK_")
                && ![
                    "ODEK_HOME",
                    "ODEK_BIN",
                    "ODEK_SUPERVISOR",
                    "ODEK_EGRESS_BIN",
                ]
                .contains(&k.as_str())
            {
                c.env_remove(&k);
            }
        }
        match supervisor_env() {
            _ if self.exec_api => {
                c.env("ODEK_SUPERVISOR", "");
            }
            Some(sup) => {
                c.env("ODEK_SUPERVISOR", sup);
            }
            None => {}
        }
        match self.operator {
            Some(op) => op.command(c),
            None => c,
        }
    }

    /// IDs of odek containers whose `/workspace` is this project.
    pub fn leftovers(&self) -> Vec<String> {
        docker(&[
            "ps",
            "-aq",
            "--filter",
            "label=dev.odek.sandbox=true",
            "--filter",
            &format!("label=dev.odek.workdir={}", self.path().display()),
        ])
        .lines()
        .map(str::to_string)
        .collect()
    }

    /// This project with its `$ODEK_HOME` already knowing the test images'
    /// paths (`images/`, what odek's probe of an image found: SPEC §6.1), so
    /// that a test counting the engine calls of one launch — through a fault
    /// proxy — sees only the sandbox's, not the one-time probe's.
    pub fn with_known_images(self) -> Project {
        static WARM: OnceLock<Project> = OnceLock::new();
        let warm = WARM.get_or_init(|| {
            let p = Project::new();
            for image in [BASE_IMAGE, BUSYBOX_IMAGE] {
                p.odek_ok(&["run", "--sandbox-image", image, "--", "true"]);
            }
            p
        });
        let from = warm.home.path().join("images");
        let to = self.home.path().join("images");
        std::fs::create_dir_all(&to).expect("mkdir images");
        for e in std::fs::read_dir(&from)
            .expect("the warmed images dir")
            .flatten()
        {
            std::fs::copy(e.path(), to.join(e.file_name())).expect("copy image facts");
        }
        if let Some(op) = self.operator {
            op.own(self.home.path());
            op.own(&to);
            for e in std::fs::read_dir(&to).expect("images").flatten() {
                op.own(&e.path());
            }
        }
        self
    }

    /// IDs of this project's sandboxes: [`Project::leftovers`] without the
    /// short-lived probe odek creates, and removes, to read an image.
    pub fn sandboxes(&self) -> Vec<String> {
        let probes = docker(&[
            "ps",
            "-aq",
            "--no-trunc",
            "--filter",
            "label=dev.odek.probe",
        ]);
        self.leftovers()
            .into_iter()
            .filter(|id| !probes.lines().any(|p| p.starts_with(id.as_str())))
            .collect()
    }

    /// A host path a refused command would have created.
    pub fn marker(&self) -> PathBuf {
        self.path().join("host-marker")
    }

    /// A shell command that creates [`Project::marker`] when run on the host.
    pub fn marker_cmd(&self) -> String {
        format!("touch {}", self.marker().display())
    }
}

impl Default for Project {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for Project {
    fn drop(&mut self) {
        // Never leave a sandbox behind, even when an assertion failed —
        // nor its link network: only this project's odek (its key) would
        // sweep it, and the services connected to it keep it, so leftovers
        // would use up the daemon's address pools (about 30 networks).
        for id in self.leftovers() {
            let name = quiet_docker(&["inspect", "-f", "{{.Name}}", &id]);
            let _ = docker_ok(&["rm", "-f", &id]);
            let name = name.trim().trim_start_matches('/');
            if !name.is_empty() {
                remove_network_and_members(&format!("{name}-link"));
            }
        }
        // What a killed owner left (a link network) is this home's to sweep.
        if !UNUSABLE.load(std::sync::atomic::Ordering::SeqCst) {
            let _ = self.run_odek(&["sandbox", "gc"]);
        }
    }
}

/// `docker ARGS`' stdout, empty when it fails (never panics: for cleanup).
fn quiet_docker(args: &[&str]) -> String {
    Command::new("docker")
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

/// Disconnects every container from network `net` and removes it; best
/// effort (for cleanup).
pub fn remove_network_and_members(net: &str) {
    let members = quiet_docker(&[
        "network",
        "inspect",
        "-f",
        "{{range $id, $c := .Containers}}{{$id}} {{end}}",
        net,
    ]);
    for id in members.split_whitespace() {
        let _ = quiet_docker(&["network", "disconnect", "-f", net, id]);
    }
    let _ = quiet_docker(&["network", "rm", net]);
}

/// stdout as text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// stderr as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Asserts a refusal: exit 125, `needle` in stderr, the host marker absent
/// and no odek container left for this project.
pub fn assert_refused(p: &Project, out: &Output, needle: &str) {
    let err = stderr(out);
    assert_eq!(
        out.status.code(),
        Some(125),
        "expected refusal (125); stderr:\n{err}\nstdout:\n{}",
        stdout(out)
    );
    assert!(
        err.contains(needle),
        "stderr does not mention {needle:?}:\n{err}"
    );
    assert!(
        !p.marker().exists(),
        "the command ran on the host: {} exists",
        p.marker().display()
    );
    assert!(
        p.leftovers().is_empty(),
        "odek container left: {:?}",
        p.leftovers()
    );
}

/// A Docker network created by a test, removed on drop.
pub struct TestNetwork {
    /// Name.
    pub name: String,
    /// Full ID.
    pub id: String,
}

impl TestNetwork {
    /// `docker network create` with the test label and extra args.
    pub fn create(name: &str, extra: &[&str]) -> TestNetwork {
        let mut args = vec![
            "network", "create", "--label", TEST_LABEL, "--label", NS_LABEL,
        ];
        args.extend_from_slice(extra);
        args.push(name);
        let id = docker(&args);
        TestNetwork {
            name: name.to_string(),
            id,
        }
    }
}

impl Drop for TestNetwork {
    fn drop(&mut self) {
        let _ = docker_ok(&["network", "rm", &self.id]);
    }
}

/// A unique suffix for names made by one test.
pub fn unique(prefix: &str) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "{prefix}{}x{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

// ---------------------------------------------------------------------------
// Helpers added for the e2e suites in tests/*.rs (lifecycle, networks,
// refusals, fallback, registry, signals, config view).
// ---------------------------------------------------------------------------

/// How long one odek invocation may take before the suite calls it hung.
pub const ODEK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(90);

/// Runs `cmd` with stdin closed, capturing its output; kills it (SIGKILL)
/// and panics when it takes longer than `limit`, so a hung odek fails the
/// test instead of stalling the suite.
pub fn run_timeout(cmd: &mut Command, limit: std::time::Duration) -> Output {
    use std::process::Stdio;
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let desc = format!("{cmd:?}");
    let child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {desc}: {e}"));
    wait_timeout(child, limit, &desc)
}

/// Waits for a spawned `child` (its piped output collected), killing it
/// (SIGKILL) and panicking when it takes longer than `limit`; `desc` names it
/// in the panic.
pub fn wait_timeout(child: std::process::Child, limit: std::time::Duration, desc: &str) -> Output {
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(Ok(out)) => out,
        Ok(Err(e)) => panic!("waiting for {desc}: {e}"),
        Err(_) => {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
            panic!("{desc} did not finish within {limit:?} (killed)")
        }
    }
}

/// Owned strings as `&str`s (for building argument lists).
pub fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

impl Project {
    /// Runs `odek -C <dir> <args>` (with [`ODEK_TIMEOUT`]).
    pub fn run_odek(&self, args: &[&str]) -> Output {
        run_timeout(&mut self.odek(args), ODEK_TIMEOUT)
    }

    /// Runs `odek -C <dir> <args>` with extra environment variables.
    pub fn run_odek_env(&self, env: &[(&str, &str)], args: &[&str]) -> Output {
        let mut c = self.odek(args);
        for (k, v) in env {
            c.env(k, v);
        }
        run_timeout(&mut c, ODEK_TIMEOUT)
    }

    /// Runs odek and panics (with both streams) unless it exits 0.
    pub fn odek_ok(&self, args: &[&str]) -> Output {
        let out = self.run_odek(args);
        assert!(
            out.status.success(),
            "odek {args:?} failed ({:?})\nstdout:\n{}\nstderr:\n{}",
            out.status.code(),
            stdout(&out),
            stderr(&out)
        );
        out
    }

    /// `["sh", "-c", <marker_cmd>]`: the command refusal tests ask odek to run.
    pub fn marker_argv(&self) -> Vec<String> {
        vec!["sh".into(), "-c".into(), self.marker_cmd()]
    }
}

/// The `odek: sandbox …` startup line of a launch (SPEC §6.4), if any.
pub fn startup_line(o: &Output) -> Option<String> {
    stderr(o)
        .lines()
        .find(|l| l.starts_with("odek: sandbox "))
        .map(str::to_string)
}

/// Major version of the Docker Engine (e.g. 20 for 20.10.24).
pub fn engine_major() -> u32 {
    let v = docker(&["version", "--format", "{{.Server.Version}}"]);
    v.split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or_else(|| panic!("cannot parse the engine version {v:?}"))
}

/// Full ID of the network with this exact name.
pub fn network_id(name: &str) -> String {
    docker(&["network", "inspect", "-f", "{{.Id}}", name])
}

/// A random lowercase hex string of `n` characters (n ≤ 16).
pub fn random_hex(n: usize) -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.write_u32(std::process::id());
    let s = format!("{:016x}", h.finish());
    s[..n.min(16)].to_string()
}

/// The Docker daemon's unix socket path (from `DOCKER_HOST=unix://…`, else
/// the default socket), for the few calls the docker CLI cannot make.
pub fn docker_socket() -> String {
    match std::env::var("DOCKER_HOST") {
        Ok(h) if h.starts_with("unix://") => h.trim_start_matches("unix://").to_string(),
        Ok(h) if !h.is_empty() => panic!("the e2e helpers need a unix:// DOCKER_HOST (got {h})"),
        _ => "/var/run/docker.sock".to_string(),
    }
}

impl TestNetwork {
    /// Creates a labelled bridge network through the Engine API with
    /// `CheckDuplicate: false`, so a second network with an existing name
    /// can be made (the docker CLI refuses that).
    pub fn create_unchecked(name: &str) -> TestNetwork {
        TestNetwork::create_unchecked_labelled(name, &[])
    }

    /// [`TestNetwork::create_unchecked`] with more labels besides the test
    /// label (e.g. `com.docker.compose.project`).
    pub fn create_unchecked_labelled(name: &str, labels: &[(&str, &str)]) -> TestNetwork {
        let mut all = serde_json::Map::new();
        all.insert("dev.odek.test".into(), "true".into());
        all.insert("dev.odek.test.ns".into(), TEST_NS.into());
        for (k, v) in labels {
            all.insert((*k).to_string(), (*v).to_string().into());
        }
        let body = serde_json::json!({
            "Name": name,
            "CheckDuplicate": false,
            "Driver": "bridge",
            "Labels": all,
        })
        .to_string();
        let out = run(Command::new("curl").args([
            "-sS",
            "--fail-with-body",
            "--max-time",
            "20",
            "--unix-socket",
            &docker_socket(),
            "-H",
            "Content-Type: application/json",
            "-X",
            "POST",
            "http://localhost/networks/create",
            "-d",
            &body,
        ]));
        assert!(
            out.status.success(),
            "creating network {name} through the API failed: {}{}",
            stdout(&out),
            stderr(&out)
        );
        let v: serde_json::Value =
            serde_json::from_slice(&out.stdout).expect("JSON from POST /networks/create");
        let id = v["Id"]
            .as_str()
            .unwrap_or_else(|| panic!("no Id in {v}"))
            .to_string();
        TestNetwork {
            name: name.to_string(),
            id,
        }
    }
}

/// Polls `f` every 100 ms until it returns true or `limit` passes.
pub fn wait_until(limit: std::time::Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + limit;
    loop {
        if f() {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// Shell snippet printing the container's pids.max (cgroup v1, else v2).
pub const PIDS_MAX_CMD: &str =
    "cat /sys/fs/cgroup/pids/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids.max";

/// Removes the images (by tag or ID) a test made, or made odek make, on drop.
pub struct Tags(pub Vec<String>);

impl Drop for Tags {
    fn drop(&mut self) {
        for t in &self.0 {
            let _ = docker_ok(&["image", "rm", "-f", t]);
        }
    }
}

/// `odek-sandbox:<first 12 bytes of the SHA-256 in hex>` of a Dockerfile
/// (the tag odek builds `Dockerfile.odek` as, SPEC §5).
pub fn tag_of(dockerfile: &str) -> String {
    let f = tempfile::NamedTempFile::new().expect("temp file");
    std::fs::write(f.path(), dockerfile).expect("write");
    let out = run(Command::new("sha256sum").arg(f.path()));
    let hex = String::from_utf8_lossy(&out.stdout);
    format!("odek-sandbox:{}", &hex[..24])
}

/// IDs of the networks sandbox `container` reaches (SPEC §4.4), sorted:
/// the network IDs of the plan in its `dev.odek.plan` label. Checked
/// against Docker: the sandbox's only network is its own link network
/// `<name>-link` (labelled `dev.odek.link=<name>`), and every running
/// container of each of those networks that still exists (but sandboxes)
/// is connected to that link (`--sandbox-network bridge` adds the default
/// bridge). A sandbox is never attached to the planned
/// networks themselves, so the engine's `NetworkSettings.Networks` no
/// longer tells what it reaches.
///
/// # Panics
/// When one of those checks fails.
pub fn reached_network_ids(container: &str) -> Vec<String> {
    let inspect: serde_json::Value =
        serde_json::from_str(&docker(&["container", "inspect", container])).expect("inspect JSON");
    let c = &inspect[0];
    let name = c["Name"].as_str().expect("Name").trim_start_matches('/');
    let link = format!("{name}-link");
    let plan: serde_json::Value = serde_json::from_str(
        c["Config"]["Labels"]["dev.odek.plan"]
            .as_str()
            .expect("the plan label"),
    )
    .expect("plan JSON");
    // `--sandbox-network bridge` adds the default bridge; a plan that
    // reaches the internet without it, the shared `odek-out`; nothing else.
    let way_out = plan["network_mode"] != "bridge" && plan["internet"] == true;
    let on: Vec<&String> = c["NetworkSettings"]["Networks"]
        .as_object()
        .expect("networks")
        .keys()
        .filter(|n| !(plan["network_mode"] == "bridge" && *n == "bridge"))
        .filter(|n| !(way_out && *n == "odek-out"))
        .collect();
    assert_eq!(on, [&link], "{name}'s only network is its link network");
    if way_out {
        assert!(
            c["NetworkSettings"]["Networks"].get("odek-out").is_some(),
            "{name} reaches the internet through odek-out"
        );
    }
    let link_info: serde_json::Value =
        serde_json::from_str(&docker(&["network", "inspect", &link])).expect("network JSON");
    let link_info = &link_info[0];
    assert_eq!(
        link_info["Labels"]["dev.odek.link"].as_str(),
        Some(name),
        "{link} is labelled as {name}'s link"
    );
    let linked = |id: &str| {
        link_info["Containers"]
            .as_object()
            .is_some_and(|m| m.contains_key(id))
    };
    let mut ids: Vec<String> = plan["networks"]
        .as_array()
        .expect("the plan's networks")
        .iter()
        .map(|n| n["id"].as_str().expect("network id").to_string())
        .collect();
    ids.sort();
    for id in &ids {
        let out = run(Command::new("docker").args(["network", "inspect", id]));
        if !out.status.success() {
            continue; // gone (the project is down): nothing to reach there
        }
        let n: serde_json::Value = serde_json::from_slice(&out.stdout).expect("network JSON");
        for (cid, m) in n[0]["Containers"].as_object().into_iter().flatten() {
            let member = m["Name"].as_str().unwrap_or_default();
            if member.starts_with("odek-") {
                continue;
            }
            assert!(
                linked(cid),
                "{member} (on planned network {id}) is not connected to {link}"
            );
        }
    }
    ids
}
