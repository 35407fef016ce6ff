//! The supervisor binary in real containers, started exactly as the core
//! starts it (tini as init, user 0:0, every capability dropped but SETUID,
//! SETGID, KILL and SETPCAP, no-new-privileges, entrypoint replaced), spoken
//! to over the protocol of `odek_supervisor::proto`.
//!
//! Needs Docker and the offline test images (`cargo xtask images`). Run the
//! suite under the Docker lock:
//! `flock /tmp/odek-docker.lock cargo test -p odek-supervisor --test docker`.
//! `ODEK_SUPERVISOR_BIN` names a prebuilt static binary; otherwise the test
//! builds one.
#![allow(clippy::unwrap_used)]

use odek_e2e::portable;
use odek_supervisor::proto::{
    Decoder, Exit, Failed, Frame, Kind, NotStarted, Poll, Polled, ProcessRef, Ready, Restarted,
    Spawned, Start, Started, WinSize, BACKGROUND_BUFFER, MAX_BACKGROUND, MAX_RESTARTS,
};
use std::collections::VecDeque;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

/// The Debian test image (this checkout's: tests/e2e/build.rs).
const BASE: &str = odek_e2e::BASE_IMAGE;
/// The BusyBox-only test image.
const BUSYBOX: &str = odek_e2e::BUSYBOX_IMAGE;
/// The supervisor's uid and gid.
const S: u32 = 65533;
/// The relay socket name.
const RELAY: &str = "odek-sup-test";
/// The label on every container these tests create.
const LABEL: &str = "dev.odek.test=supervisor";
/// How long any single expectation may take.
const WAIT: Duration = Duration::from_secs(20);

/// Timing-sensitive tests run alone (write lock), others together (read
/// lock): a couple of CPUs shared by a dozen containers slow Docker's attach
/// stream enough to blur a 3 s budget.
static TIMING: RwLock<()> = RwLock::new(());

/// Shared access for a test that measures nothing.
fn shared() -> RwLockReadGuard<'static, ()> {
    TIMING.read().unwrap_or_else(|e| e.into_inner())
}

/// Exclusive access for a test that measures time.
fn exclusive() -> RwLockWriteGuard<'static, ()> {
    TIMING.write().unwrap_or_else(|e| e.into_inner())
}

/// The static binary under test (built once per test process).
fn bin() -> &'static PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(p) = std::env::var_os("ODEK_SUPERVISOR_BIN") {
            return PathBuf::from(p);
        }
        let workspace = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
        let target = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("static");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .current_dir(&workspace)
            .args([
                "build",
                "--release",
                "-p",
                "odek-supervisor",
                "--bin",
                "odek-supervisor",
                "--target",
                "x86_64-unknown-linux-gnu",
            ])
            .env("RUSTFLAGS", "-C target-feature=+crt-static")
            .env("CARGO_TARGET_DIR", &target)
            .status()
            .expect("run cargo build");
        assert!(status.success(), "building the static supervisor failed");
        target.join("x86_64-unknown-linux-gnu/release/odek-supervisor")
    })
}

/// A unique container name.
fn container_name() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "odek-sup-test-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    )
}

/// A protocol stream over a child process's stdin/stdout (`docker run -i`
/// or `docker exec -i … relay`).
struct Link {
    child: Child,
    stdin: Option<ChildStdin>,
    rx: Receiver<Frame>,
    backlog: VecDeque<Frame>,
    stderr: Arc<Mutex<String>>,
    stderr_done: Option<std::thread::JoinHandle<()>>,
}

impl Link {
    /// Spawns `cmd` and starts decoding its stdout.
    fn spawn(mut cmd: Command) -> Link {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn docker");
        let mut out = child.stdout.take().unwrap();
        let mut err = child.stderr.take().unwrap();
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            let mut dec = Decoder::new();
            let mut buf = vec![0u8; 65536];
            loop {
                let n = match out.read(&mut buf) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => n,
                };
                dec.push(&buf[..n]);
                while let Some(f) = dec.next_frame().expect("valid frames from the supervisor") {
                    if tx.send(f).is_err() {
                        return;
                    }
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let sink = stderr.clone();
        let stderr_done = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s);
            sink.lock().unwrap().push_str(&s);
        });
        Link {
            stdin: child.stdin.take(),
            child,
            rx,
            backlog: VecDeque::new(),
            stderr,
            stderr_done: Some(stderr_done),
        }
    }

    /// What the process wrote to stderr so far.
    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Waits for the process to end and returns all it wrote to stderr.
    fn finish(&mut self) -> (std::process::ExitStatus, String) {
        let status = self.child.wait().unwrap();
        if let Some(t) = self.stderr_done.take() {
            let _ = t.join();
        }
        (status, self.stderr())
    }

    /// Sends one frame.
    fn send(&mut self, f: &Frame) {
        let stdin = self.stdin.as_mut().expect("link open");
        stdin.write_all(&f.encode()).expect("write frame");
        stdin.flush().unwrap();
    }

    /// The next frame matching `pred` (others are kept), `None` at the
    /// deadline or the stream's end.
    fn next_where(&mut self, timeout: Duration, pred: impl Fn(&Frame) -> bool) -> Option<Frame> {
        if let Some(i) = self.backlog.iter().position(&pred) {
            return self.backlog.remove(i);
        }
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(f) if pred(&f) => return Some(f),
                Ok(f) => self.backlog.push_back(f),
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => return None,
            }
        }
    }

    /// The session's Ready.
    fn ready(&mut self) -> Ready {
        let f = self
            .next_where(WAIT, |f| f.kind == Kind::Ready)
            .unwrap_or_else(|| panic!("no Ready; stderr: {}", self.stderr()));
        f.parse().unwrap()
    }

    /// Sends Start and returns the Started pid or the Failed message.
    fn start(&mut self, id: u32, start: &Start) -> Result<u32, String> {
        self.start_failed(id, start).map_err(|f| f.message)
    }

    /// Sends Start and returns the Started pid or the whole Failed frame.
    fn start_failed(&mut self, id: u32, start: &Start) -> Result<u32, Failed> {
        self.send(&Frame::json(Kind::Start, id, start));
        let f = self
            .next_where(WAIT, |f| {
                f.id == id && matches!(f.kind, Kind::Started | Kind::Failed)
            })
            .unwrap_or_else(|| panic!("no Started/Failed for {id}; stderr: {}", self.stderr()));
        match f.kind {
            Kind::Started => Ok(f.parse::<Started>().unwrap().pid),
            _ => Err(f.parse::<Failed>().unwrap()),
        }
    }

    /// Collects command `id`'s output until its Exit.
    fn collect(&mut self, id: u32, timeout: Duration) -> Run {
        let mut run = Run::default();
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let f = self.next_where(left, |f| f.id == id).unwrap_or_else(|| {
                panic!(
                    "no Exit for {id} (stdout so far {:?}); stderr: {}",
                    String::from_utf8_lossy(&run.stdout),
                    self.stderr()
                )
            });
            match f.kind {
                Kind::Stdout => run.stdout.extend_from_slice(&f.payload),
                Kind::Stderr => run.stderr.extend_from_slice(&f.payload),
                Kind::Exit => {
                    run.exit = f.parse().unwrap();
                    return run;
                }
                other => panic!("unexpected {other:?} for {id}"),
            }
        }
    }

    /// Sends Background and returns the Spawned or the Failed message.
    fn background(&mut self, id: u32, start: &Start) -> Result<Spawned, String> {
        self.send(&Frame::json(Kind::Background, id, start));
        let f = self
            .next_where(WAIT, |f| {
                f.id == id && matches!(f.kind, Kind::Spawned | Kind::Failed)
            })
            .unwrap_or_else(|| panic!("no Spawned/Failed for {id}; stderr: {}", self.stderr()));
        match f.kind {
            Kind::Spawned => Ok(f.parse().unwrap()),
            _ => Err(f.parse::<Failed>().unwrap().message),
        }
    }

    /// Sends `kind` (Poll or KillProcess) with `payload` and collects the
    /// output frames and the Polled, or the Failed message.
    fn ask(&mut self, id: u32, f: Frame) -> Result<(Run, Polled), String> {
        self.send(&f);
        let mut run = Run::default();
        loop {
            let f = self
                .next_where(WAIT, |f| f.id == id)
                .unwrap_or_else(|| panic!("no Polled for {id}; stderr: {}", self.stderr()));
            match f.kind {
                Kind::Stdout => run.stdout.extend_from_slice(&f.payload),
                Kind::Stderr => run.stderr.extend_from_slice(&f.payload),
                Kind::Polled => return Ok((run, f.parse().unwrap())),
                Kind::Failed => return Err(f.parse::<Failed>().unwrap().message),
                other => panic!("unexpected {other:?} for {id}"),
            }
        }
    }

    /// A background process's output since `cursor`.
    fn poll(
        &mut self,
        id: u32,
        process: &str,
        cursor: Option<u64>,
    ) -> Result<(Run, Polled), String> {
        let poll = Poll {
            process: process.into(),
            cursor,
        };
        self.ask(id, Frame::json(Kind::Poll, id, &poll))
    }

    /// Kills a background process.
    fn kill_process(&mut self, id: u32, process: &str) -> Result<Polled, String> {
        let which = ProcessRef {
            process: process.into(),
        };
        self.ask(id, Frame::json(Kind::KillProcess, id, &which))
            .map(|(_, p)| p)
    }

    /// Polls until `pred` holds for the output so far (from cursor 0).
    fn poll_until(
        &mut self,
        id: u32,
        process: &str,
        pred: impl Fn(&Run, &Polled) -> bool,
    ) -> (Run, Polled) {
        let deadline = Instant::now() + WAIT;
        loop {
            let (run, polled) = self.poll(id, process, Some(0)).expect("polled");
            if pred(&run, &polled) {
                return (run, polled);
            }
            assert!(
                Instant::now() < deadline,
                "never true: {:?} {polled:?}",
                run.out()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Starts and collects one command.
    fn run(&mut self, id: u32, start: &Start) -> Run {
        let pid = self
            .start(id, start)
            .unwrap_or_else(|m| panic!("Failed: {m}"));
        let mut run = self.collect(id, WAIT);
        run.pid = pid;
        run
    }
}

/// One command's outcome.
#[derive(Debug, Default)]
struct Run {
    pid: u32,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    exit: Exit,
}

impl Run {
    /// Stdout as text.
    fn out(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    /// Its exit and both streams, for a failure message.
    fn shown(&self) -> String {
        format!(
            "{:?}\nstdout: {:?}\nstderr: {:?}",
            self.exit,
            self.out(),
            String::from_utf8_lossy(&self.stderr)
        )
    }
}

/// A `Start` for `argv` as uid/gid 1000 in `/`.
fn cmd(argv: &[&str]) -> Start {
    Start {
        argv: argv.iter().map(|s| s.to_string()).collect(),
        env: vec![],
        cwd: "/".into(),
        uid: 1000,
        gid: 1000,
        groups: vec![],
        tty: None,
        stdin: false,
        timeout_ms: None,
    }
}

/// A shell script as a `Start`.
fn sh(script: &str) -> Start {
    cmd(&["/bin/sh", "-c", script])
}

/// One container running the supervisor, with its owner link.
struct Sup {
    name: String,
    owner: Link,
    ready: Ready,
}

impl Sup {
    /// Starts a container of `image` with `extra` docker-run options.
    fn new(image: &str, extra: &[&str]) -> Sup {
        Sup::serving(image, extra, &[])
    }

    /// As [`Sup::new`], with `serve_extra` after `serve`'s own arguments.
    fn serving(image: &str, extra: &[&str], serve_extra: &[&str]) -> Sup {
        let name = container_name();
        let mut c = Command::new("docker");
        c.args([
            "run", "-i", "--rm", "--init", "--name", &name, "--user", "0:0",
        ])
        .args(["--cap-drop", "ALL"])
        .args(["--cap-add", "SETUID", "--cap-add", "SETGID"])
        .args(["--cap-add", "KILL", "--cap-add", "SETPCAP"])
        .args(["--security-opt", "no-new-privileges"])
        .args(["--network", "none"])
        .arg("-v")
        .arg(format!("{}:/.odek/odek-supervisor:ro", bin().display()))
        .args(["--entrypoint", "/.odek/odek-supervisor"])
        .args(["--label", LABEL])
        .args(extra)
        .arg(image)
        .args(["serve", "--uid", &S.to_string(), "--gid", &S.to_string()])
        .args(["--relay", RELAY])
        .args(serve_extra);
        let mut owner = Link::spawn(c);
        let ready = owner.ready();
        Sup { name, owner, ready }
    }

    /// A relay session through `docker exec -i --user <user>`.
    fn relay(&self, user: &str) -> Link {
        let mut c = Command::new("docker");
        c.args(["exec", "-i", "--user", user, &self.name]).args([
            "/.odek/odek-supervisor",
            "relay",
            RELAY,
        ]);
        Link::spawn(c)
    }

    /// A live check: the supervisor still answers.
    fn ping(&mut self) {
        self.owner.send(&Frame {
            kind: Kind::Ping,
            id: 0,
            payload: b"hi".to_vec(),
        });
        let pong = self
            .owner
            .next_where(Duration::from_secs(5), |f| f.kind == Kind::Pong);
        assert_eq!(pong.map(|f| f.payload), Some(b"hi".to_vec()), "no Pong");
    }

    /// Process list (pid and args) from a command.
    fn ps(&mut self, id: u32) -> String {
        self.owner
            .run(id, &cmd(&["ps", "-eo", "pid,ppid,user,args"]))
            .out()
    }
}

impl Drop for Sup {
    fn drop(&mut self) {
        let _ = Command::new("docker")
            .args(["rm", "-f", &self.name])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let _ = self.owner.child.kill();
        let _ = self.owner.child.wait();
    }
}

#[test]
fn binary_is_static_and_small() {
    let b = bin();
    let file = Command::new("file").arg(b).output().expect("file(1)");
    let file = String::from_utf8_lossy(&file.stdout);
    assert!(
        file.contains("statically linked") || file.contains("static-pie"),
        "{file}"
    );
    let ldd = Command::new("ldd").arg(b).output().expect("ldd");
    let ldd =
        String::from_utf8_lossy(&ldd.stdout).to_string() + &String::from_utf8_lossy(&ldd.stderr);
    assert!(
        ldd.contains("not a dynamic executable") || ldd.contains("statically linked"),
        "{ldd}"
    );
    let stripped = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("odek-supervisor.stripped");
    std::fs::copy(b, &stripped).unwrap();
    assert!(Command::new("strip")
        .arg(&stripped)
        .status()
        .unwrap()
        .success());
    let size = std::fs::metadata(&stripped).unwrap().len();
    eprintln!("stripped odek-supervisor: {size} bytes");
    assert!(
        size <= 2 << 20,
        "stripped binary is {size} bytes, over 2 MiB"
    );
}

#[test]
fn ready_exit_codes_env_cwd_ids_and_streams() {
    let _guard = shared();
    let mut sup = Sup::new(BASE, &[]);
    assert_eq!(sup.ready.uid, S);
    assert_eq!(sup.ready.gid, S);
    assert_eq!(sup.ready.relay, RELAY);
    assert_eq!(sup.ready.version, odek_supervisor::proto::VERSION);
    // KILL(5) SETGID(6) SETUID(7) SETPCAP(8).
    assert_eq!(sup.ready.cap_eff, "00000000000001e0");

    let r = sup.owner.run(1, &sh("exit 3"));
    assert_eq!((r.exit.code, r.exit.signal), (Some(3), None));
    let r = sup.owner.run(2, &sh("kill -TERM $$"));
    assert_eq!((r.exit.code, r.exit.signal), (None, Some(15)));

    let mut s = sh("echo \"$FOO|$BAR|$PATH\"");
    s.env = vec![
        ("FOO".into(), "one".into()),
        ("BAR".into(), "x".into()),
        ("FOO".into(), "two".into()),
    ];
    let r = sup.owner.run(3, &s);
    assert_eq!(
        r.out(),
        "two|x|/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n"
    );

    let mut s = cmd(&["pwd"]);
    s.cwd = "/tmp".into();
    assert_eq!(sup.owner.run(4, &s).out(), "/tmp\n");

    // HOME: root's only for root; another uid gets its passwd home or /.
    assert_eq!(sup.owner.run(30, &sh("echo $HOME")).out(), "/\n");
    let mut s = sh("echo $HOME");
    (s.uid, s.gid) = (0, 0);
    assert_eq!(sup.owner.run(31, &s).out(), "/root\n");
    (s.uid, s.gid) = (1, 1);
    assert_eq!(sup.owner.run(32, &s).out(), "/usr/sbin\n");
    s.env = vec![("HOME".into(), "/tmp".into())];
    assert_eq!(sup.owner.run(33, &s).out(), "/tmp\n");

    let r = sup.owner.run(5, &sh("id -u; id -g; id -G"));
    assert_eq!(r.out(), "1000\n1000\n1000\n");
    let mut s = sh("id -u; id -g; id -G");
    (s.uid, s.gid, s.groups) = (0, 0, vec![0, 27]);
    assert_eq!(sup.owner.run(6, &s).out(), "0\n0\n0 27\n");

    let r = sup.owner.run(7, &sh("echo out; echo err >&2; echo out2"));
    assert_eq!(r.out(), "out\nout2\n");
    assert_eq!(String::from_utf8_lossy(&r.stderr), "err\n");

    // stdin off: /dev/null.
    assert_eq!(sup.owner.run(8, &cmd(&["cat"])).out(), "");
    // stdin round trip.
    let mut s = cmd(&["cat"]);
    s.stdin = true;
    sup.owner.start(9, &s).unwrap();
    let big: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    for chunk in big.chunks(100_000) {
        sup.owner.send(&Frame {
            kind: Kind::Stdin,
            id: 9,
            payload: chunk.to_vec(),
        });
    }
    sup.owner.send(&Frame {
        kind: Kind::Stdin,
        id: 9,
        payload: vec![],
    });
    let r = sup.owner.collect(9, WAIT);
    assert_eq!(r.exit.code, Some(0));
    assert!(r.stdout == big, "cat returned {} bytes", r.stdout.len());

    // Refusals and exec failures are Failed, not Exit; a program that could
    // not start says why for the core to word (`not_started`).
    let f = sup
        .owner
        .start_failed(10, &cmd(&["no-such-program"]))
        .unwrap_err();
    assert!(f.message.contains("not found"), "{f:?}");
    assert_eq!(f.not_started, Some(NotStarted::NotFound), "{f:?}");
    let f = sup
        .owner
        .start_failed(11, &cmd(&["/etc/passwd"]))
        .unwrap_err();
    assert!(f.message.contains("permission denied"), "{f:?}");
    assert_eq!(f.not_started, Some(NotStarted::NotExecutable), "{f:?}");
    let mut s = cmd(&["true"]);
    s.uid = S;
    let f = sup.owner.start_failed(12, &s).unwrap_err();
    assert!(f.message.contains("supervisor"), "{f:?}");
    assert_eq!(
        f.not_started, None,
        "a refusal is no program failing: {f:?}"
    );
    assert!(sup.owner.start(13, &cmd(&[])).is_err());
    let mut s = cmd(&["true"]);
    s.cwd = "/nonexistent".into();
    let f = sup.owner.start_failed(14, &s).unwrap_err();
    assert!(f.message.contains("/nonexistent"), "{f:?}");
    assert_eq!(f.not_started, Some(NotStarted::NoWorkdir), "{f:?}");
    // A script whose #! interpreter is missing: it exists, so not "not
    // found" but its interpreter.
    let r = sup.owner.run(
        16,
        &sh("printf '#!/no/such/interp\\necho hi\\n' > /tmp/nointerp.sh && chmod +x /tmp/nointerp.sh"),
    );
    assert_eq!(r.exit.code, Some(0), "{}", r.out());
    let f = sup
        .owner
        .start_failed(17, &cmd(&["/tmp/nointerp.sh"]))
        .unwrap_err();
    assert!(f.message.contains("interpreter"), "{f:?}");
    assert_eq!(f.not_started, Some(NotStarted::NoInterpreter), "{f:?}");
    sup.owner.start(15, &cmd(&["sleep", "5"])).unwrap();
    assert!(sup
        .owner
        .start(15, &cmd(&["true"]))
        .unwrap_err()
        .contains("already"));
    sup.owner.send(&Frame {
        kind: Kind::Kill,
        id: 15,
        payload: vec![],
    });
    let r = sup.owner.collect(15, WAIT);
    assert!(r.exit.cancelled && r.exit.killed, "{:?}", r.exit);
    sup.ping();
}

/// What every image must get the same (ids 100-107): an exit code and a
/// signal, env, cwd, the command's user, stdout and stderr apart, a stdin
/// round trip through `cat` (a NUL among the bytes), and a terminal that
/// `tty` sees and whose resize `stty size` sees. Busybox, Debian and a
/// read-only root run it.
fn portable_basics(sup: &mut Sup) {
    let r = sup.owner.run(100, &sh("exit 3"));
    assert_eq!((r.exit.code, r.exit.signal), (Some(3), None));
    let r = sup.owner.run(101, &sh("kill -TERM $$"));
    assert_eq!((r.exit.code, r.exit.signal), (None, Some(15)));
    let mut s = sh("echo \"$FOO\"; pwd; id -u; echo err >&2");
    s.env = vec![("FOO".into(), "bar".into())];
    s.cwd = "/tmp".into();
    let r = sup.owner.run(102, &s);
    assert_eq!(r.out(), "bar\n/tmp\n1000\n");
    assert_eq!(String::from_utf8_lossy(&r.stderr), "err\n");
    let mut s = cmd(&["cat"]);
    s.stdin = true;
    sup.owner.start(103, &s).expect("cat starts");
    for payload in [b"a\0b".to_vec(), b"c\n".to_vec(), vec![]] {
        sup.owner.send(&Frame {
            kind: Kind::Stdin,
            id: 103,
            payload,
        });
    }
    let r = sup.owner.collect(103, WAIT);
    assert_eq!(
        (r.exit.code, r.stdout.as_slice()),
        (Some(0), &b"a\0bc\n"[..])
    );
    let mut s = cmd(&["tty"]);
    s.tty = Some(WinSize { cols: 80, rows: 24 });
    let r = sup.owner.run(104, &s);
    assert!(r.out().starts_with("/dev/pts/"), "{:?}", r.out());
    let mut s = sh("stty size; read x; stty size");
    s.tty = Some(WinSize { cols: 80, rows: 24 });
    s.stdin = true;
    sup.owner.start(105, &s).expect("stty starts");
    // The terminal's output may come in more than one frame ("24 80", then
    // "\r\n" on a loaded machine): read up to the line's end.
    let mut first = Vec::new();
    while !first.ends_with(b"\r\n") {
        let f = sup
            .owner
            .next_where(WAIT, |f| f.id == 105 && f.kind == Kind::Stdout)
            .unwrap_or_else(|| panic!("first stty size: {:?}", String::from_utf8_lossy(&first)));
        first.extend_from_slice(&f.payload);
    }
    assert_eq!(String::from_utf8_lossy(&first), "24 80\r\n");
    sup.owner.send(&Frame::json(
        Kind::Resize,
        105,
        &WinSize {
            cols: 132,
            rows: 50,
        },
    ));
    sup.owner.send(&Frame {
        kind: Kind::Stdin,
        id: 105,
        payload: b"\n".to_vec(),
    });
    let r = sup.owner.collect(105, WAIT);
    assert!(r.out().ends_with("50 132\r\n"), "{:?}", r.out());
    assert_eq!(r.exit.code, Some(0));
}

#[test]
fn terminal_and_resize() {
    let _guard = shared();
    let mut sup = Sup::new(BASE, &[]);
    portable_basics(&mut sup);
}

#[test]
fn timeouts_kill_the_whole_tree() {
    let _guard = exclusive();
    let mut sup = Sup::new(BASE, &[]);
    let mut s = sh("sleep 3; touch /tmp/late1");
    s.timeout_ms = Some(1000);
    let t = Instant::now();
    let r = sup.owner.run(1, &s);
    assert!(
        r.exit.timed_out && r.exit.killed && !r.exit.cancelled,
        "{:?}",
        r.exit
    );
    assert_eq!((r.exit.code, r.exit.signal), (None, Some(9)));
    assert!(
        t.elapsed() < Duration::from_millis(2500),
        "{:?}",
        t.elapsed()
    );

    let mut s = sh("setsid sh -c 'sleep 3; touch /tmp/late2' & sleep 60");
    s.timeout_ms = Some(1000);
    let r = sup.owner.run(2, &s);
    assert!(r.exit.timed_out && r.exit.killed, "{:?}", r.exit);

    // A double fork orphaned to the supervisor, in its own session.
    let mut s = sh("(setsid sh -c 'sleep 3; touch /tmp/late3' &) ; sleep 60");
    s.timeout_ms = Some(1000);
    let r = sup.owner.run(3, &s);
    assert!(r.exit.timed_out && r.exit.killed, "{:?}", r.exit);
    assert!(r.exit.escaped.is_empty(), "{:?}", r.exit);

    // A process whose leader thread exited alone (SYS_exit) shows `Z`
    // while its other thread runs on: it is killed, not counted dead.
    let mut s = sh("cat > /tmp/zl && chmod +x /tmp/zl");
    s.stdin = true;
    sup.owner.start(6, &s).unwrap();
    for payload in [zombie_leader_elf(), vec![]] {
        sup.owner.send(&Frame {
            kind: Kind::Stdin,
            id: 6,
            payload,
        });
    }
    assert_eq!(sup.owner.collect(6, WAIT).exit.code, Some(0));
    let live = "cat /proc/[0-9]*/task/*/stat 2>/dev/null | grep -c '(zl) [RSD]'";
    // Positive control: without a timeout it lives on past its command.
    let r = sup
        .owner
        .run(7, &sh(&format!("(setsid /tmp/zl &); sleep 0.3; {live}")));
    assert_eq!(r.out(), "1\n", "the test program did not run as planned");
    let mut s = sh("pkill -9 zl; (setsid /tmp/zl &) ; sleep 60");
    s.timeout_ms = Some(1000);
    let r = sup.owner.run(8, &s);
    assert!(r.exit.timed_out && r.exit.killed, "{:?}", r.exit);
    let r = sup.owner.run(9, &sh(live));
    assert_eq!(r.out(), "0\n", "a thread of the killed tree runs on");

    std::thread::sleep(Duration::from_secs(4));
    let r = sup.owner.run(4, &sh("ls /tmp"));
    assert!(
        !r.out().contains("late"),
        "a killed command wrote: {}",
        r.out()
    );
    let ps = sup.ps(5);
    assert!(!ps.contains("sleep"), "left running:\n{ps}");
}

#[test]
fn background_jobs_outlive_their_command_without_delaying_it() {
    let _guard = exclusive();
    let mut sup = Sup::new(BASE, &[]);
    let t = Instant::now();
    let r = sup.owner.run(1, &sh("sleep 100 & echo started"));
    let took = t.elapsed();
    assert_eq!(r.out(), "started\n");
    assert_eq!(r.exit.code, Some(0));
    assert!(took < Duration::from_secs(1), "Exit took {took:?}");
    let ps = sup.ps(2);
    assert!(ps.contains("sleep 100"), "background job gone:\n{ps}");
    // A later command's timeout leaves it alone (it started before).
    let mut s = sh("sleep 30");
    s.timeout_ms = Some(500);
    let r = sup.owner.run(3, &s);
    assert!(r.exit.timed_out && r.exit.killed, "{:?}", r.exit);
    let ps = sup.ps(4);
    assert!(
        ps.contains("sleep 100"),
        "background job killed by another command's timeout:\n{ps}"
    );
    // A background job writing to the pipe forever does not hold anything up.
    let t = Instant::now();
    let r = sup.owner.run(5, &sh("yes > /dev/stdout & echo go"));
    assert!(r.out().starts_with("go\n") || r.out().contains("go\n"));
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    sup.ping();
}

#[test]
fn a_background_server_answers_later_commands_and_its_kill_ends_it() {
    let _guard = shared();
    let mut sup = Sup::new(BASE, &[]);
    assert_eq!(
        sup.ready
            .background
            .map(|b| (b.max_processes, b.buffer_bytes)),
        Some((MAX_BACKGROUND as u32, BACKGROUND_BUFFER as u64))
    );
    let started = sup
        .owner
        .background(
            1,
            &sh("echo starting; echo oops >&2; exec redis-server --port 7002 --save '' --appendonly no"),
        )
        .expect("spawned");
    // The Spawned came at once; the server keeps running, unattached.
    let (run, polled) = sup.owner.poll_until(2, &started.process, |r, _| {
        r.out().contains("Ready to accept connections")
    });
    assert!(run.out().starts_with("starting\n"), "{}", run.out());
    assert_eq!(String::from_utf8_lossy(&run.stderr), "oops\n");
    assert_eq!(
        (polled.cursor, polled.dropped, polled.exit.clone()),
        (0, 0, None)
    );
    assert_eq!(polled.pid, started.pid);
    // A later command reaches it.
    let r = sup.owner.run(3, &cmd(&["redis-cli", "-p", "7002", "ping"]));
    assert_eq!(r.out(), "PONG\n");
    // From the cursor: only what came after.
    let (later, again) = sup
        .owner
        .poll(4, &started.process, Some(polled.next))
        .expect("polled");
    assert_eq!(again.cursor, polled.next);
    assert_eq!(
        again.next,
        polled.next + later.stdout.len() as u64 + later.stderr.len() as u64
    );
    // A later command's timeout leaves it alone.
    let mut s = sh("sleep 30");
    s.timeout_ms = Some(300);
    let r = sup.owner.run(5, &s);
    assert!(r.exit.timed_out, "{:?}", r.exit);
    assert_eq!(
        sup.owner
            .run(6, &cmd(&["redis-cli", "-p", "7002", "ping"]))
            .out(),
        "PONG\n"
    );
    // A relay session sees it, and its end does not end it.
    let mut relay = sup.relay(&S.to_string());
    relay.ready();
    relay
        .poll(1, &started.process, None)
        .expect("seen by a relay");
    drop(relay);
    // The kill ends its tree; the status says so, and stays readable.
    let killed = sup.owner.kill_process(7, &started.process).expect("killed");
    let exit = killed.exit.expect("ended");
    assert!(exit.cancelled && exit.killed, "{exit:?}");
    let (_, after) = sup
        .owner
        .poll(8, &started.process, None)
        .expect("still known");
    assert_eq!(after.exit.map(|e| e.cancelled), Some(true));
    let ps = sup.ps(9);
    assert!(!ps.contains("redis-server"), "left running:\n{ps}");
    // Unknown names and cursors beyond the end are refused.
    let bad = sup.owner.poll(10, "1-999", None).expect_err("unknown");
    assert!(bad.contains("no background process"), "{bad}");
    let bad = sup
        .owner
        .poll(11, &started.process, Some(after.next + 1))
        .expect_err("beyond");
    assert!(bad.contains("beyond"), "{bad}");
    // An ended one's kill ends what is left of its session.
    let left = sup
        .owner
        .background(12, &sh("sleep 301 & echo forked"))
        .expect("spawned");
    let (_, ended) = sup.owner.poll_until(13, &left.process, |r, p| {
        p.exit.is_some() && r.out() == "forked\n"
    });
    assert_eq!(ended.exit.and_then(|e| e.code), Some(0));
    assert!(
        sup.ps(14).contains("sleep 301"),
        "the leftover is not running"
    );
    let killed = sup.owner.kill_process(15, &left.process).expect("killed");
    assert_eq!(
        killed.exit.and_then(|e| e.code),
        Some(0),
        "its own status stands"
    );
    let ps = sup.ps(16);
    assert!(!ps.contains("sleep 301"), "left running:\n{ps}");
    sup.ping();
}

#[test]
fn background_output_is_bounded_and_ended_processes_are_evicted() {
    let _guard = shared();
    let mut sup = Sup::new(BASE, &[]);
    // 3 MiB of output: the first 2 MiB are dropped, and the poll says so.
    let big = sup
        .owner
        .background(1, &sh("head -c 3145728 /dev/zero; echo done >&2"))
        .expect("spawned");
    let (run, polled) = sup.owner.poll_until(2, &big.process, |r, p| {
        p.exit.is_some() && r.stderr.ends_with(b"done\n")
    });
    assert_eq!(polled.exit.as_ref().and_then(|e| e.code), Some(0));
    assert_eq!(polled.next, 3 * 1024 * 1024 + 5);
    assert_eq!(polled.cursor, polled.next - BACKGROUND_BUFFER as u64);
    assert_eq!(polled.dropped, polled.cursor);
    assert_eq!(run.stdout.len() + run.stderr.len(), BACKGROUND_BUFFER);
    // No stdin, no terminal.
    let mut s = cmd(&["cat"]);
    s.stdin = true;
    let no = sup.owner.background(3, &s).expect_err("refused");
    assert!(no.contains("no stdin"), "{no}");
    // MAX_BACKGROUND running: the next is refused; once one ended, it is
    // evicted to make room (the oldest ended first).
    let mut names = vec![];
    for i in 1..MAX_BACKGROUND {
        names.push(
            sup.owner
                .background(100 + i as u32, &cmd(&["sleep", "300"]))
                .expect("spawned")
                .process,
        );
    }
    sup.owner.kill_process(4, &names[0]).expect("killed");
    let spare = sup
        .owner
        .background(5, &cmd(&["sleep", "300"]))
        .expect("room after evicting an ended one");
    sup.owner
        .background(10, &cmd(&["sleep", "300"]))
        .expect("room after evicting the other ended one");
    let refused = sup
        .owner
        .background(6, &cmd(&["sleep", "300"]))
        .expect_err("full");
    assert!(refused.contains("already run"), "{refused}");
    // The oldest ended ones went first: `big`, then the killed one.
    assert!(sup.owner.poll(7, &big.process, None).is_err());
    assert!(sup.owner.poll(8, &names[0], None).is_err());
    assert!(sup.owner.poll(9, &spare.process, None).is_ok());
    sup.ping();
}

#[test]
fn background_processes_end_with_the_server_and_the_sandbox() {
    let _guard = shared();
    let mut sup = Sup::new(BASE, &[]);
    let server = sup.ready.pid;
    // Its root exits at once; what it started keeps the pipe and runs.
    let bg = sup
        .owner
        .background(1, &sh("sleep 300 & echo forked"))
        .expect("spawned");
    let (_, polled) = sup.owner.poll_until(2, &bg.process, |r, p| {
        p.exit.is_some() && r.out() == "forked\n"
    });
    assert_eq!(polled.exit.and_then(|e| e.code), Some(0));
    assert!(sup.ps(3).contains("sleep 300"));
    kill_from_outside(&sup.name, server);
    let r = restarted(&mut sup, 999);
    assert!(r.killed, "{r:?}");
    resume(&mut sup);
    // The new server does not know it, and its tree is gone.
    let unknown = sup.owner.poll(4, &bg.process, None).expect_err("unknown");
    assert!(unknown.contains("no background process"), "{unknown}");
    let ps = sup.ps(5);
    assert!(!ps.contains("sleep 300"), "left running:\n{ps}");
    // The owner link's end ends everything.
    sup.owner
        .background(6, &cmd(&["sleep", "300"]))
        .expect("spawned");
    drop(sup.owner.stdin.take());
    let (status, _) = sup.owner.finish();
    assert!(status.success(), "docker run: {status}");
}

/// `yes` under a 2 s timeout.
fn flood(sup: &mut Sup) -> (Run, Duration) {
    let mut s = cmd(&["yes"]);
    s.timeout_ms = Some(2000);
    let t = Instant::now();
    let r = sup.owner.run(1, &s);
    let took = t.elapsed();
    eprintln!("yes: {} bytes, Exit after {took:?}", r.stdout.len());
    assert!(r.exit.timed_out && r.exit.killed, "{:?}", r.exit);
    assert!(r.stdout.len() > 1000);
    sup.ping();
    (r, took)
}

/// Docker's default json-file log driver copies the attach stream to disk
/// and slows it to about 1 MB/s on the test host, so output already handed
/// to Docker before the kill delays the Exit by up to a second: the 3 s
/// budget is asserted with logging off (as the core should run sandboxes),
/// and only measured with it on.
#[test]
fn flooding_output_is_killed_on_time() {
    let _guard = exclusive();
    let mut sup = Sup::new(BASE, &["--log-driver", "none"]);
    let (_, took) = flood(&mut sup);
    assert!(took < Duration::from_secs(3), "reported after {took:?}");
    drop(sup);
    // With json-file logging the daemon writes the flood to its log as
    // well: 6.1 s was seen at a load of 10 on 2 cores. A bound that
    // catches a kill that never comes, not a timing target.
    let mut sup = Sup::new(BASE, &[]);
    let (_, took) = flood(&mut sup);
    assert!(
        took < Duration::from_secs(10),
        "reported after {took:?} (json-file logging)"
    );
}

#[test]
fn a_root_command_has_no_power_over_the_supervisor() {
    let _guard = shared();
    let mut sup = Sup::new(BASE, &[]);
    let me = sup.ready.pid;
    let root = |script: &str| {
        let mut s = sh(script);
        (s.uid, s.gid) = (0, 0);
        s
    };
    let r = sup.owner.run(
        1,
        &root("grep -E '^Cap(Eff|Prm|Inh|Bnd|Amb)' /proc/self/status"),
    );
    let out = r.out();
    let caps: Vec<&str> = out.lines().collect();
    assert_eq!(caps.len(), 5, "{}", r.out());
    for line in caps {
        assert!(line.ends_with("0000000000000000"), "{line}");
    }
    let r = sup.owner.run(2, &root(&format!("kill -9 {me}")));
    assert_ne!(r.exit.code, Some(0), "kill -9 of the supervisor worked");
    let r = sup.owner.run(3, &root(&format!("kill -STOP {me}")));
    assert_ne!(r.exit.code, Some(0), "kill -STOP of the supervisor worked");
    let r = sup.owner.run(4, &root(&format!("cat /proc/{me}/fd/0")));
    assert_ne!(r.exit.code, Some(0), "read the supervisor's stdin");
    let r = sup.owner.run(
        5,
        &root(&format!(
            "ls -l /proc/{me}/fd/ /proc/{me}/environ; cat /proc/{me}/environ"
        )),
    );
    assert_ne!(r.exit.code, Some(0), "{}", r.out());
    // Positive control: the same shell can kill its own child.
    let r = sup
        .owner
        .run(6, &root("sleep 30 & kill -9 $!; wait $!; echo $?"));
    assert_eq!(r.out(), "137\n");
    // A setuid program gains nothing either (no_new_privs, no bounding set).
    let r = sup.owner.run(7, &sh("su -c true root </dev/null"));
    assert_ne!(r.exit.code, Some(0));
    sup.ping();
    let r = sup.owner.run(8, &sh("echo alive"));
    assert_eq!(r.out(), "alive\n");
}

#[test]
fn a_bound_supervisor_runs_commands_only_as_its_account() {
    let _guard = shared();
    let mut sup = Sup::serving(BASE, &[], &["--commands", "1000:1000"]);
    assert_eq!(sup.ready.commands, Some([1000, 1000]));
    // Positive control: the bound account runs.
    let r = sup.owner.run(1, &sh("id -u; id -g; id -G"));
    assert_eq!(r.out(), "1000\n1000\n1000\n");
    // Root, another uid or gid, or a supplementary group: refused.
    for (id, (uid, gid, groups)) in [
        (0, 0, vec![]),
        (0, 1000, vec![]),
        (1000, 0, vec![]),
        (1001, 1000, vec![]),
        (1000, 1000, vec![0]),
    ]
    .into_iter()
    .enumerate()
    {
        let mut s = sh("touch /tmp/ran");
        (s.uid, s.gid, s.groups) = (uid, gid, groups.clone());
        let m = sup
            .owner
            .start(10 + id as u32, &s)
            .expect_err("a Start for another account ran");
        assert!(m.contains("1000:1000"), "{uid}:{gid} {groups:?}: {m}");
    }
    // The supervisor's own gid, even when bound elsewhere, and nothing ran.
    let mut s = sh("touch /tmp/ran");
    s.gid = S;
    assert!(sup.owner.start(20, &s).unwrap_err().contains("supervisor"));
    let r = sup
        .owner
        .run(21, &sh("test -e /tmp/ran && echo ran || echo none"));
    assert_eq!(r.out(), "none\n");
}

#[test]
fn serve_refuses_commands_sharing_its_ids() {
    let _guard = shared();
    for ids in [format!("{S}:1000"), format!("1000:{S}"), "x:1".into()] {
        let out = Command::new(bin())
            .args(["serve", "--uid", &S.to_string(), "--gid", &S.to_string()])
            .args(["--relay", "x", "--commands", &ids])
            .output()
            .expect("run the supervisor binary");
        assert_eq!(out.status.code(), Some(70), "{ids}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("--commands"), "{ids}: {err}");
    }
}

#[test]
fn owner_eof_kills_everything_and_ends_the_container() {
    let _guard = shared();
    let mut sup = Sup::new(BASE, &[]);
    let r = sup.owner.run(
        1,
        &sh("sleep 100 & nohup sleep 200 >/dev/null 2>&1 & echo ok"),
    );
    assert_eq!(r.out(), "ok\n");
    sup.owner.start(2, &cmd(&["sleep", "300"])).unwrap();
    let t = Instant::now();
    drop(sup.owner.stdin.take());
    loop {
        if let Some(status) = sup.owner.child.try_wait().unwrap() {
            assert!(
                status.success(),
                "docker run: {status}; {}",
                sup.owner.stderr()
            );
            break;
        }
        assert!(t.elapsed() < WAIT, "the container did not end");
        std::thread::sleep(Duration::from_millis(50));
    }
    let inspect = Command::new("docker")
        .args(["inspect", &sup.name])
        .output()
        .unwrap();
    assert!(!inspect.status.success(), "container still exists");
}

#[test]
fn relay_sessions_only_for_the_supervisor_uid() {
    let _guard = shared();
    let mut sup = Sup::new(BASE, &[]);
    // Another uid is refused by the relay (server not ours) and the supervisor.
    let mut bad = sup.relay("1000");
    let (status, stderr) = bad.finish();
    assert!(!status.success());
    assert!(stderr.contains("refusing"), "{stderr}");
    assert!(bad
        .next_where(Duration::from_secs(1), |f| f.kind == Kind::Ready)
        .is_none());
    let notice = sup
        .owner
        .next_where(WAIT, |f| f.kind == Kind::Notice)
        .expect("a Notice about the refused relay");
    let text = String::from_utf8_lossy(&notice.payload);
    assert!(text.contains("uid 1000"), "{text}");
    // A command that connects in a loop gets a few notices through, not
    // one per connection, and the supervisor goes on serving.
    let r = sup.owner.run(
        9,
        &sh(&format!(
            "for i in $(seq 40); do /.odek/odek-supervisor relay {RELAY} </dev/null 2>/dev/null; done; echo done"
        )),
    );
    assert_eq!(r.out(), "done\n");
    sup.ping();
    let mut shown = 0;
    while sup
        .owner
        .next_where(Duration::from_millis(300), |f| f.kind == Kind::Notice)
        .is_some()
    {
        shown += 1;
    }
    assert!(
        (1..=5).contains(&shown),
        "{shown} notices for 40 connections"
    );

    // uid S gets a session of its own.
    let mut good = sup.relay(&S.to_string());
    let ready = good.ready();
    assert_eq!(ready.pid, sup.ready.pid);
    let r = good.run(1, &sh("id -u"));
    assert_eq!(r.out(), "1000\n");
    // Ids are per session: id 1 may run on the owner session at once.
    good.start(2, &cmd(&["sleep", "100"])).unwrap();
    assert_eq!(sup.owner.run(2, &sh("echo owner")).out(), "owner\n");
    // The relay's end kills its commands.
    drop(good.stdin.take());
    let (status, stderr) = good.finish();
    assert!(status.success(), "{stderr}");
    std::thread::sleep(Duration::from_millis(300));
    let ps = sup.ps(3);
    assert!(
        !ps.contains("sleep 100"),
        "relay command survived its session:\n{ps}"
    );
    sup.ping();
}

#[test]
fn read_only_root_and_noexec_tmp() {
    let _guard = shared();
    let mut sup = Sup::new(BASE, &["--read-only", "--tmpfs", "/tmp:noexec"]);
    portable_basics(&mut sup);
    let r = sup.owner.run(1, &sh("echo hi; touch /x"));
    assert_eq!(r.out(), "hi\n");
    assert_ne!(r.exit.code, Some(0));
    let r = sup.owner.run(2, &sh("cp /bin/true /tmp/t && /tmp/t"));
    assert_ne!(r.exit.code, Some(0), "exec from a noexec /tmp worked");
    let mut s = cmd(&["tty"]);
    s.tty = Some(WinSize { cols: 80, rows: 24 });
    assert!(sup.owner.run(3, &s).out().starts_with("/dev/pts/"));
    let mut s = sh("sleep 30");
    s.timeout_ms = Some(300);
    assert!(sup.owner.run(4, &s).exit.killed);
}

#[test]
fn busybox_image() {
    let _guard = shared();
    let mut sup = Sup::new(BUSYBOX, &[]);
    portable_basics(&mut sup);
    let r = sup.owner.run(1, &sh("id -u; echo $0"));
    assert_eq!(r.out(), "1000\n/bin/sh\n");
    let mut s = sh("sleep 30 & sleep 30");
    s.timeout_ms = Some(500);
    let r = sup.owner.run(2, &s);
    assert!(r.exit.timed_out && r.exit.killed, "{:?}", r.exit);
    let r = sup.owner.run(3, &sh("ps"));
    assert!(!r.out().contains("sleep"), "{}", r.out());
}

/// One of the sandboxes every portable behaviour is checked on.
struct Setting {
    /// Which, for a failure message.
    what: &'static str,
    image: &'static str,
    /// Its `docker run` options.
    extra: &'static [&'static str],
    /// A directory its commands (uid 1000) can write.
    dir: &'static str,
    /// The server its image offers, given `dir`.
    server: fn(&str) -> portable::Server,
}

fn redis(_dir: &str) -> portable::Server {
    portable::redis(7002)
}

fn httpd(dir: &str) -> portable::Server {
    portable::busybox_httpd(dir, 8080)
}

/// Debian, BusyBox, and a read-only root with a noexec `/tmp` (as odek's
/// own). BusyBox's image has a `/tmp` of root's, mode 0755, which a tmpfs
/// over it keeps (whatever `mode=` says): its commands write in a tmpfs of
/// its own.
const SETTINGS: [Setting; 3] = [
    Setting {
        what: "debian",
        image: BASE,
        extra: &[],
        dir: "/tmp",
        server: redis,
    },
    Setting {
        what: "busybox",
        image: BUSYBOX,
        extra: &["--tmpfs", "/scratch:mode=1777"],
        dir: "/scratch",
        server: httpd,
    },
    Setting {
        what: "read-only root",
        image: BASE,
        extra: &["--read-only", "--tmpfs", "/tmp:noexec"],
        dir: "/tmp",
        server: redis,
    },
];

/// Which of `files` exist in the container (asked by command `id`).
fn existing(sup: &mut Sup, id: u32, files: &[String]) -> Vec<String> {
    let script = format!(
        "for f in {}; do [ -e \"$f\" ] && echo \"$f\"; done; true",
        files.join(" ")
    );
    let r = sup.owner.run(id, &sh(&script));
    r.out().lines().map(str::to_string).collect()
}

#[test]
fn a_timeout_kills_a_shells_whole_tree_on_every_image() {
    let _guard = shared();
    // What ran on, per setting: all three are tried before the verdict.
    let mut ran_on = vec![];
    for s in &SETTINGS {
        let what = s.what;
        let mut sup = Sup::new(s.image, s.extra);
        let (control, killed) = (format!("{}/control", s.dir), format!("{}/killed", s.dir));
        let r = sup
            .owner
            .run(300, &sh(&format!("mkdir {control} {killed}")));
        assert_eq!(r.exit.code, Some(0), "{what}: {}", r.shown());
        // Positive control: without a timeout, every tree writes its files.
        let control = portable::timeout_trees(&control, 1, "sleep 2");
        for (i, t) in (301..).zip(&control) {
            let r = sup.owner.run(i, &sh(&t.script));
            assert_eq!(
                r.exit.code,
                Some(0),
                "{what}, control {}: {}",
                t.name,
                r.shown()
            );
        }
        let want: Vec<String> = control.iter().flat_map(|t| t.late.clone()).collect();
        assert_eq!(existing(&mut sup, 310, &want), want, "{what}: the control");
        // Under a 1 s timeout, each is killed whole and the kill confirmed.
        let trees = portable::timeout_trees(&killed, 3, "sleep 60");
        for (i, t) in (311..).zip(&trees) {
            let mut st = sh(&t.script);
            st.timeout_ms = Some(1000);
            let r = sup.owner.run(i, &st);
            assert!(
                r.exit.timed_out && r.exit.killed && r.exit.escaped.is_empty(),
                "{what}, {}: {:?}",
                t.name,
                r.exit
            );
        }
        // Every `sleep 3` started before its tree's kill: had any part of
        // a tree run on, its file would be there 3 s after the last kill.
        std::thread::sleep(Duration::from_secs(3));
        let late: Vec<String> = trees.iter().flat_map(|t| t.late.clone()).collect();
        let written = existing(&mut sup, 320, &late);
        let ps = sup.owner.run(321, &sh(portable::LIST_PROCESSES)).out();
        let left = portable::matching(&ps, "sleep");
        if !written.is_empty() || !left.is_empty() {
            ran_on.push(format!("{what}: written {written:?}, running {left:?}"));
        }
    }
    assert!(
        ran_on.is_empty(),
        "a killed tree ran on:\n{}",
        ran_on.join("\n")
    );
}

#[test]
fn a_background_server_started_by_one_command_answers_a_later_one_on_every_image() {
    let _guard = shared();
    for s in &SETTINGS {
        let (what, server) = (s.what, (s.server)(s.dir));
        let mut sup = Sup::new(s.image, s.extra);
        // Positive control: nothing answers before it is started.
        let r = sup.owner.run(400, &sh(&server.ask));
        assert_ne!(
            r.exit.code,
            Some(0),
            "{what}: {} answered: {}",
            server.name,
            r.shown()
        );
        let mut st = sh(&server.start);
        st.cwd = s.dir.into();
        let r = sup.owner.run(401, &st);
        assert_eq!(r.exit.code, Some(0), "{what}: {}", r.shown());
        // Later commands reach it (once it listens).
        let deadline = Instant::now() + WAIT;
        let mut id = 402;
        loop {
            let r = sup.owner.run(id, &sh(&server.ask));
            id += 1;
            if r.out() == server.answer {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: {} never answered: {}",
                server.name,
                r.shown()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        // Another command's timeout leaves it alone.
        let mut st = sh("sleep 30");
        st.timeout_ms = Some(300);
        let r = sup.owner.run(id, &st);
        assert!(r.exit.timed_out && r.exit.killed, "{what}: {:?}", r.exit);
        let r = sup.owner.run(id + 1, &sh(&server.ask));
        assert_eq!(
            r.out(),
            server.answer,
            "{what}: after a timeout: {}",
            r.shown()
        );
    }
}

#[test]
fn orphans_are_reported_not_killed_while_another_command_runs() {
    let _guard = shared();
    let mut sup = Sup::new(BASE, &[]);
    sup.owner.start(1, &cmd(&["sleep", "60"])).unwrap();
    let mut s = sh("(setsid sleep 41 &); sleep 60");
    s.timeout_ms = Some(700);
    let r = sup.owner.run(2, &s);
    assert!(r.exit.timed_out && r.exit.killed, "{:?}", r.exit);
    assert_eq!(r.exit.escaped.len(), 1, "{:?}", r.exit);
    let ps = sup.ps(3);
    let pid = r.exit.escaped[0].to_string();
    assert!(
        ps.lines()
            .any(|l| l.split_whitespace().next() == Some(pid.as_str()) && l.contains("sleep 41")),
        "escaped pid {pid} is not the orphan:\n{ps}"
    );
    sup.owner.send(&Frame {
        kind: Kind::Kill,
        id: 1,
        payload: vec![],
    });
    let r = sup.owner.collect(1, WAIT);
    assert!(r.exit.cancelled && r.exit.killed, "{:?}", r.exit);
}

#[test]
fn a_malformed_frame_ends_the_owner_session() {
    let _guard = shared();
    let mut sup = Sup::new(BASE, &[]);
    sup.owner.run(1, &sh("sleep 100 & true"));
    let stdin = sup.owner.stdin.as_mut().unwrap();
    stdin.write_all(&[0, 0, 0, 5, 0x7f, 0, 0, 0, 1]).unwrap();
    stdin.flush().unwrap();
    let t = Instant::now();
    while sup.owner.child.try_wait().unwrap().is_none() {
        assert!(t.elapsed() < WAIT, "the container did not end");
        std::thread::sleep(Duration::from_millis(50));
    }
    let (status, stderr) = sup.owner.finish();
    assert!(status.success(), "{status}");
    assert!(stderr.contains("unknown frame kind"), "{stderr}");
}

/// A static x86-64 ELF whose main thread starts a second thread (which
/// loops on `pause`) and then ends alone with `SYS_exit`: the leader shows
/// `Z` in `/proc` while the process lives on.
fn zombie_leader_elf() -> Vec<u8> {
    let code: [u8; 49] = [
        0xB8, 0x38, 0, 0, 0, // mov eax, 56 (clone)
        0xBF, 0x00, 0x0F, 0x01, 0x00, // mov edi, CLONE_VM|FS|FILES|SIGHAND|THREAD
        0x48, 0xC7, 0xC6, 0x00, 0x80, 0x40, 0x00, // mov rsi, 0x408000 (stack)
        0x31, 0xD2, // xor edx, edx
        0x45, 0x31, 0xD2, // xor r10d, r10d
        0x45, 0x31, 0xC0, // xor r8d, r8d
        0x0F, 0x05, // syscall
        0x85, 0xC0, // test eax, eax
        0x74, 0x09, // jz thread
        0xB8, 0x3C, 0, 0, 0, // mov eax, 60 (exit: this thread only)
        0x31, 0xFF, // xor edi, edi
        0x0F, 0x05, // syscall
        0xB8, 0x22, 0, 0, 0, // thread: mov eax, 34 (pause)
        0x0F, 0x05, // syscall
        0xEB, 0xF7, // jmp thread
    ];
    let base: u64 = 0x40_0000;
    let entry = base + 64 + 56;
    let size = (64 + 56 + code.len()) as u64;
    let mut e = Vec::new();
    e.extend_from_slice(b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0");
    e.extend_from_slice(&2u16.to_le_bytes()); // ET_EXEC
    e.extend_from_slice(&62u16.to_le_bytes()); // x86-64
    e.extend_from_slice(&1u32.to_le_bytes());
    e.extend_from_slice(&entry.to_le_bytes());
    e.extend_from_slice(&64u64.to_le_bytes()); // program headers
    e.extend_from_slice(&0u64.to_le_bytes()); // no section headers
    e.extend_from_slice(&0u32.to_le_bytes());
    for v in [64u16, 56, 1, 64, 0, 0] {
        e.extend_from_slice(&v.to_le_bytes());
    }
    e.extend_from_slice(&1u32.to_le_bytes()); // PT_LOAD
    e.extend_from_slice(&7u32.to_le_bytes()); // RWX
    e.extend_from_slice(&0u64.to_le_bytes()); // offset
    e.extend_from_slice(&base.to_le_bytes()); // vaddr
    e.extend_from_slice(&base.to_le_bytes()); // paddr
    e.extend_from_slice(&size.to_le_bytes()); // filesz
    e.extend_from_slice(&0x1_0000u64.to_le_bytes()); // memsz
    e.extend_from_slice(&0x1000u64.to_le_bytes()); // align
    e.extend_from_slice(&code);
    e
}

/// SIGKILL to `pid` from outside the sandbox's commands: `docker exec` as
/// root, which has the container's CAP_KILL (no command has it).
fn kill_from_outside(name: &str, pid: u32) {
    let out = Command::new("docker")
        .args([
            "exec",
            "-u",
            "0",
            name,
            "sh",
            "-c",
            &format!("kill -9 {pid}"),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "docker exec kill -9 {pid}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The next Restarted frame (nothing about command `id` may come first).
fn restarted(sup: &mut Sup, id: u32) -> Restarted {
    let f = sup
        .owner
        .next_where(WAIT, |f| f.kind == Kind::Restarted || f.id == id)
        .unwrap_or_else(|| panic!("no Restarted frame; stderr: {}", sup.owner.stderr()));
    assert_eq!(f.kind, Kind::Restarted, "{f:?} came before Restarted");
    f.parse().unwrap()
}

/// The core's answer to Restarted.
fn resume(sup: &mut Sup) {
    sup.owner.send(&Frame {
        kind: Kind::Resume,
        id: 0,
        payload: vec![],
    });
}

#[test]
fn a_killed_server_restarts_its_commands_are_unknown_and_the_owner_link_holds() {
    let _guard = shared();
    let mut sup = Sup::new(BASE, &[]);
    let server = sup.ready.pid;
    sup.owner
        .start(1, &sh("sleep 30; touch /tmp/late"))
        .expect("started");
    kill_from_outside(&sup.name, server);
    // Command 1 gets no Exit (its status is unknown): the keeper says the
    // server restarted, and killed command 1's tree.
    let r = restarted(&mut sup, 1);
    assert_eq!((r.generation, r.commands, r.killed), (1, 1, true), "{r:?}");
    assert_ne!(r.pid, server);
    assert!(r.reason.contains("signal 9"), "{r:?}");
    // Until the core's Resume, its frames are dropped: this one never runs.
    sup.owner
        .send(&Frame::json(Kind::Start, 2, &sh("touch /tmp/early")));
    resume(&mut sup);
    let run = sup.owner.run(
        3,
        &sh("test -e /tmp/early && echo ran || echo none; pgrep -x sleep || echo gone"),
    );
    assert_eq!(run.out(), "none\ngone\n", "{:?}", run);
    assert!(
        sup.owner
            .next_where(Duration::from_millis(500), |f| f.id == 1
                || f.id == 2
                || f.kind == Kind::Tracked)
            .is_none(),
        "a frame about a dropped command, or the server's ledger, reached the core"
    );
    sup.ping();
    // The owner link still holds: its end kills everything, the container
    // goes within 10 s.
    sup.owner.start(4, &cmd(&["sleep", "300"])).unwrap();
    let t = Instant::now();
    drop(sup.owner.stdin.take());
    loop {
        if let Some(status) = sup.owner.child.try_wait().unwrap() {
            assert!(status.success(), "docker run: {status}");
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the container did not end"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let inspect = Command::new("docker")
        .args(["inspect", &sup.name])
        .output()
        .unwrap();
    assert!(!inspect.status.success(), "container still exists");
}

#[test]
fn no_command_can_make_the_server_restart_and_the_outside_can() {
    let _guard = shared();
    let mut sup = Sup::new(BASE, &[]);
    let server = sup.ready.pid;
    // Root, and the plain account: every fatal signal to the server and to
    // its keeper (the server's parent) is refused.
    let script = format!(
        "k=$(awk '/^PPid/{{print $2}}' /proc/{server}/status); echo keeper=$k; \
         for p in {server} $k; do for s in KILL SEGV ABRT BUS TERM INT; do kill -s $s $p 2>/dev/null && echo SIGNALLED $s $p; done; done; \
         sleep 30 & kill -9 $! && echo CONTROL; echo done"
    );
    for (id, root) in [(1, true), (2, false)] {
        let mut s = sh(&script);
        if root {
            (s.uid, s.gid) = (0, 0);
        }
        let r = sup.owner.run(id, &s);
        let out = r.out();
        assert!(out.contains("CONTROL\ndone\n"), "{out}");
        assert!(!out.contains("keeper=\n"), "no keeper found: {out}");
        assert!(!out.contains("SIGNALLED"), "a command signalled: {out}");
    }
    sup.ping();
    assert!(
        sup.owner
            .next_where(Duration::from_millis(500), |f| f.kind == Kind::Restarted)
            .is_none(),
        "the server restarted after a command's signals"
    );
    let r = sup.owner.run(3, &sh("echo alive"));
    assert_eq!(r.out(), "alive\n");
    // Positive control: the same kill from outside restarts it.
    kill_from_outside(&sup.name, server);
    let r = restarted(&mut sup, u32::MAX);
    assert_eq!(r.commands, 0, "{r:?}");
    resume(&mut sup);
    let r = sup.owner.run(4, &sh("echo again"));
    assert_eq!(r.out(), "again\n");
}

#[test]
fn a_crash_loop_ends_the_sandbox() {
    let _guard = shared();
    let mut sup = Sup::new(BASE, &[]);
    let mut server = sup.ready.pid;
    for n in 1..=MAX_RESTARTS as u32 {
        kill_from_outside(&sup.name, server);
        let r = restarted(&mut sup, u32::MAX);
        assert_eq!(r.generation, n);
        server = r.pid;
        resume(&mut sup);
    }
    kill_from_outside(&sup.name, server);
    let notice = sup
        .owner
        .next_where(WAIT, |f| f.kind == Kind::Notice)
        .expect("a notice");
    let text = String::from_utf8_lossy(&notice.payload).into_owned();
    assert!(
        text.contains(&format!("died {} times", MAX_RESTARTS + 1)),
        "{text}"
    );
    let t = Instant::now();
    while sup.owner.child.try_wait().unwrap().is_none() {
        assert!(t.elapsed() < WAIT, "the container did not end");
        std::thread::sleep(Duration::from_millis(50));
    }
    let (status, _) = sup.owner.finish();
    assert_eq!(status.code(), Some(71), "{status}");
}

/// Not a test: the median round trip of `true` over the owner link, for
/// comparing two binaries (`ODEK_SUPERVISOR_BIN`), e.g. the keeper's relay
/// hop. `cargo test -p odek-supervisor --test docker -- --ignored
/// --nocapture round_trip_median`.
#[test]
#[ignore]
fn round_trip_median() {
    let _guard = exclusive();
    let mut sup = Sup::new(BASE, &[]);
    let n = 300;
    let mut took: Vec<Duration> = (0..n + 20)
        .map(|i| {
            let t = Instant::now();
            let r = sup.owner.run(i + 1, &cmd(&["true"]));
            assert_eq!(r.exit.code, Some(0));
            t.elapsed()
        })
        .skip(20)
        .collect();
    took.sort();
    println!(
        "round trip of true over the owner link ({}): median {:.3} ms, p90 {:.3} ms (N={n})",
        bin().display(),
        took[took.len() / 2].as_secs_f64() * 1e3,
        took[took.len() * 9 / 10].as_secs_f64() * 1e3
    );
}

/// Makes the sandbox's PID namespace hand out `next` as its next pid (what
/// a wrapped pid space does), from the host: root `nsenter`s its PID
/// namespace and sets `ns_last_pid`.
fn set_next_pid(name: &str, next: u32) {
    let pid = Command::new("docker")
        .args(["inspect", "-f", "{{.State.Pid}}", name])
        .output()
        .expect("docker inspect");
    let pid = String::from_utf8_lossy(&pid.stdout).trim().to_string();
    let status = Command::new("nsenter")
        .args(["-t", &pid, "-p", "--", "sh", "-c"])
        .arg(format!("echo {} > /proc/sys/kernel/ns_last_pid", next - 1))
        .status()
        .expect("nsenter");
    assert!(status.success(), "nsenter {pid}: {status}");
}

/// An ended background process whose pid a later command got (the pid
/// space wrapped): its kill touches nothing of that command, and the
/// keeper still tracks the command, so a server's death kills it. Names
/// carry the server's random tag: another tag's name is unknown.
#[test]
fn a_reused_pid_is_never_killed_for_an_ended_process_nor_untracked() {
    let _guard = shared();
    let mut sup = Sup::new(BASE, &[]);
    let server = sup.ready.pid;
    let a = sup.owner.background(1, &sh("echo A")).expect("spawned");
    sup.owner.poll_until(3, &a.process, |_, p| p.exit.is_some());
    set_next_pid(&sup.name, a.pid);
    let b = sup
        .owner
        .background(4, &cmd(&["sleep", "1000"]))
        .expect("spawned");
    assert_eq!(b.pid, a.pid, "the test could not make the pid be reused");
    // The ended one's kill leaves the later command running.
    sup.owner.kill_process(5, &a.process).expect("killed");
    let (_, still) = sup.owner.poll(6, &b.process, None).expect("known");
    assert!(
        still.exit.is_none(),
        "the reused pid's command was killed: {still:?}"
    );
    assert!(sup.ps(7).contains("sleep 1000"));
    // The keeper still tracks it: the server's death kills it.
    kill_from_outside(&sup.name, server);
    let r = restarted(&mut sup, 999);
    assert!(r.killed, "{r:?}");
    resume(&mut sup);
    let ps = sup.ps(8);
    assert!(!ps.contains("sleep 1000"), "left running, untracked:\n{ps}");
    let a = sup.owner.background(9, &sh("echo A")).expect("spawned");
    let (tag, _) = a.process.split_once('-').expect("tag-n");
    assert!(
        tag.len() == 16 && tag.bytes().all(|b| b.is_ascii_hexdigit()),
        "{}",
        a.process
    );
    let other = format!(
        "{}-1",
        if tag == "0000000000000000" {
            "1111111111111111"
        } else {
            "0000000000000000"
        }
    );
    let unknown = sup.owner.poll(10, &other, None).expect_err("another tag");
    assert!(unknown.contains("no background process"), "{unknown}");
}

/// The host pid of container `name`'s init.
fn host_pid(name: &str) -> u32 {
    let out = Command::new("docker")
        .args(["inspect", "-f", "{{.State.Pid}}", name])
        .output()
        .expect("docker inspect");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("a pid")
}

/// The command line of the process whose pid in `name`'s PID namespace is
/// `pid`, read from the host's `/proc` (no process is made in the sandbox,
/// which would take a pid there or count as a command).
fn cmdline_in(name: &str, pid: u32) -> Option<String> {
    let ns = std::fs::read_link(format!("/proc/{}/ns/pid", host_pid(name))).ok()?;
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let p = entry.file_name().to_string_lossy().into_owned();
        if !p.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        if std::fs::read_link(format!("/proc/{p}/ns/pid"))
            .ok()
            .as_ref()
            != Some(&ns)
        {
            continue;
        }
        let status = std::fs::read_to_string(format!("/proc/{p}/status")).unwrap_or_default();
        let inner = status
            .lines()
            .find_map(|l| l.strip_prefix("NSpid:"))
            .and_then(|l| l.split_whitespace().last())
            .and_then(|v| v.parse::<u32>().ok());
        let zombie = status
            .lines()
            .any(|l| l.starts_with("State:") && l.contains('Z'));
        if inner == Some(pid) && !zombie {
            let cmd = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
            return Some(
                String::from_utf8_lossy(&cmd)
                    .replace('\0', " ")
                    .trim()
                    .to_string(),
            );
        }
    }
    None
}

/// A background process's main process ended, leaving an orphan in a
/// session of its own (`setsid`), and then the main process's pid went to
/// another process — here the orphan's own child, once the pid space
/// wrapped, while nothing else ran. `process_kill` still finds the orphan
/// (adopted by the supervisor) and that child, kills both, and claims the
/// kill only once they are gone; a second kill finds nothing left and
/// claims nothing.
#[test]
fn a_setsid_orphan_is_killed_after_its_roots_pid_is_reused() {
    let _guard = shared();
    let mut sup = Sup::new(BASE, &[]);
    let a = sup
        .owner
        .background(
            1,
            &sh("mkfifo /tmp/go && (setsid sh -c 'read x < /tmp/go; sleep 1003; true' &) && echo started"),
        )
        .expect("spawned");
    let (run, ended) = sup.owner.poll_until(2, &a.process, |r, p| {
        p.exit.is_some() && r.out().contains("started")
    });
    assert_eq!(
        ended.exit.as_ref().and_then(|e| e.code),
        Some(0),
        "{:?}",
        run.out()
    );
    // The orphan waits on the FIFO, forking nothing; the host makes the
    // next pid the ended main process's and then lets the orphan go on.
    set_next_pid(&sup.name, a.pid);
    let fifo = format!("/proc/{}/root/tmp/go", host_pid(&sup.name));
    std::fs::OpenOptions::new()
        .write(true)
        .open(&fifo)
        .and_then(|mut f| f.write_all(b"go\n"))
        .expect("write the FIFO");
    let deadline = Instant::now() + WAIT;
    while cmdline_in(&sup.name, a.pid).as_deref() != Some("sleep 1003") {
        assert!(
            Instant::now() < deadline,
            "the test could not make the orphan's child take pid {}: {:?}",
            a.pid,
            cmdline_in(&sup.name, a.pid)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let killed = sup.owner.kill_process(3, &a.process).expect("killed");
    let exit = killed.exit.expect("ended");
    assert_eq!(
        cmdline_in(&sup.name, a.pid),
        None,
        "left running after process_kill said {exit:?}"
    );
    assert!(
        exit.killed && exit.escaped.is_empty() && !exit.nothing_to_kill,
        "{exit:?}"
    );
    assert_eq!(exit.code, Some(0), "its own status stands");
    // Nothing is left: the next kill kills nothing and says so.
    let again = sup.owner.kill_process(4, &a.process).expect("killed");
    let exit = again.exit.expect("ended");
    assert!(
        !exit.killed && exit.nothing_to_kill && exit.escaped.is_empty(),
        "{exit:?}"
    );
    let ps = sup.ps(5);
    assert!(
        !ps.contains("sleep 1003") && !ps.contains("read x"),
        "left running:\n{ps}"
    );
}
