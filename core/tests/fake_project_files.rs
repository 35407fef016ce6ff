//! Files read from the project (SPEC §3.2, §5): `odek.json` and
//! `Dockerfile.odek` are opened once, `O_NOFOLLOW | O_NONBLOCK`, checked
//! with `fstat` and read through that descriptor, so an agent swapping
//! them in a tight loop for a symlink to a host file or for a named pipe
//! never gets the host file parsed and never makes odek hang.
//!
//! Each swap test resolves for at least [`RACE`] and [`RUNS`] runs while a
//! thread exchanges the file (`renameat2(RENAME_EXCHANGE)`, so the path
//! always exists) with the hostile one; every resolve must answer within
//! [`DEADLINE`], with the regular file's content or a refusal naming what
//! was found, and both must have been met.

// `renameat2(RENAME_EXCHANGE)` and `mknodat` as the tests use them are
// Linux's (the engine odek drives runs there).
#![cfg(target_os = "linux")]

mod common;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::*;
use odek_core::image::ImageSource;
use odek_core::{FailureClass, Plan};
use sha2::{Digest, Sha256};

/// Resolves per swap test, at least.
const RUNS: usize = 200;

/// How long a swap test resolves, at least: on the code this guards
/// against, the window between a check by path and the open by path is
/// met within a few hundred to a few thousand resolves.
const RACE: Duration = Duration::from_secs(5);

/// Longest a swap test resolves while waiting to meet both files.
const BUDGET: Duration = Duration::from_secs(60);

/// Longest a resolve may take (the fake engine answers at once).
const DEADLINE: Duration = Duration::from_secs(5);

/// What the file is swapped with.
#[derive(Clone)]
enum Hostile {
    /// A symlink to this host file.
    Symlink(PathBuf),
    /// A named pipe nobody writes to.
    Fifo,
}

fn mkfifo(path: &Path) {
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .expect("mkfifo");
}

/// Swaps `path` between a regular file holding `regular` and `hostile`
/// until dropped: both are made once, then exchanged in place
/// (`renameat2(RENAME_EXCHANGE)`, atomic: the path always exists) as fast
/// as the kernel allows.
struct Swapper {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Swapper {
    fn start(path: &Path, regular: &[u8], hostile: Hostile) -> Swapper {
        let bad = path.with_extension("swap-hostile");
        std::fs::write(path, regular).expect("write");
        match &hostile {
            Hostile::Symlink(host) => std::os::unix::fs::symlink(host, &bad).expect("ln"),
            Hostile::Fifo => mkfifo(&bad),
        }
        let stop = Arc::new(AtomicBool::new(false));
        let swaps = Arc::new(AtomicUsize::new(0));
        let (path, s, n) = (path.to_path_buf(), stop.clone(), swaps.clone());
        let thread = std::thread::spawn(move || {
            let exchange = || {
                rustix::fs::renameat_with(
                    rustix::fs::CWD,
                    &bad,
                    rustix::fs::CWD,
                    &path,
                    rustix::fs::RenameFlags::EXCHANGE,
                )
                .expect("exchange")
            };
            while !s.load(Ordering::Relaxed) {
                exchange();
                n.fetch_add(1, Ordering::Relaxed);
            }
            // Leave the regular file at the path.
            if n.load(Ordering::Relaxed) % 2 == 1 {
                exchange();
            }
        });
        // Resolve only once the swaps are under way.
        while swaps.load(Ordering::Relaxed) < 10 {
            std::thread::sleep(Duration::from_millis(1));
        }
        Swapper {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Swapper {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Resolves `s` on a thread of its own (a resolve stuck in a blocking
/// `open` cannot be timed out from its own thread), each answer awaited at
/// most [`DEADLINE`], until at least [`RUNS`] answers are in, [`RACE`] has
/// passed, and both the
/// regular file was read (`regular` holds for the plan) and the hostile one
/// refused (the message holds one of `refusal`), for at most [`BUDGET`]
/// (the swapper's writes may stall on a busy disk while resolves, which
/// only read, go on). Panics naming an answer that hung, that was made
/// from another file, or that is another error.
fn resolve_in_a_loop(
    s: &Arc<Setup>,
    what: &str,
    regular: impl Fn(&Plan) -> bool,
    refusal: &[&str],
) {
    let (tx, rx) = mpsc::channel();
    let stop = Arc::new(AtomicBool::new(false));
    let (setup, halt) = (s.clone(), stop.clone());
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        while !halt.load(Ordering::Relaxed) {
            if tx.send(rt.block_on(setup.resolve())).is_err() {
                return;
            }
        }
    });
    let started = Instant::now();
    let (mut n, mut read, mut refused) = (0usize, 0usize, 0usize);
    while n < RUNS || started.elapsed() < RACE || read == 0 || refused == 0 {
        assert!(
            started.elapsed() < BUDGET,
            "in {BUDGET:?}, {n} resolves met the regular file {read} times and the {what} {refused} times: the swap did not race"
        );
        n += 1;
        match rx.recv_timeout(DEADLINE) {
            Err(_) => panic!(
                "resolve {n} did not answer within {DEADLINE:?}: odek waits on the {what} swapped in"
            ),
            Ok(Ok(plan)) => {
                assert!(
                    regular(&plan),
                    "resolve {n}: the plan was made from another file than the project's regular one: {plan:?}"
                );
                read += 1;
            }
            Ok(Err(e)) => {
                let msg = e.to_string();
                assert_eq!(e.class(), FailureClass::Config, "{msg}");
                assert!(
                    refusal.iter().any(|r| msg.contains(r)),
                    "resolve {n}: unexpected error: {msg}"
                );
                refused += 1;
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
}

/// A host file outside the working directory.
fn host_file(s: &Setup, name: &str, content: &str) -> PathBuf {
    let p = s.root().join(name);
    std::fs::write(&p, content).expect("host file");
    p
}

const PROJECT_JSON: &str = r#"{"sandbox_pids_limit": 100}"#;
const HOST_JSON: &str = r#"{"sandbox_pids_limit": 7}"#;

#[test]
fn odek_json_swapped_for_a_symlink_in_a_loop_never_reads_the_host_file() {
    let s = Arc::new(Setup::new());
    let host = host_file(&s, "host.json", HOST_JSON);
    let _swapper = Swapper::start(
        &s.workdir.join("odek.json"),
        PROJECT_JSON.as_bytes(),
        Hostile::Symlink(host),
    );
    resolve_in_a_loop(
        &s,
        "symlink",
        |p| p.pids_limit == 100,
        &["is a symlink; a project config must be a regular file in the project directory"],
    );
}

#[test]
fn odek_json_swapped_for_a_fifo_in_a_loop_never_hangs() {
    let s = Arc::new(Setup::new());
    let _swapper = Swapper::start(
        &s.workdir.join("odek.json"),
        PROJECT_JSON.as_bytes(),
        Hostile::Fifo,
    );
    resolve_in_a_loop(
        &s,
        "FIFO",
        |p| p.pids_limit == 100,
        &["is a named pipe (FIFO), not a regular file"],
    );
}

const PROJECT_DOCKERFILE: &str = "FROM odek-test/base:1\n";
const HOST_DOCKERFILE: &str = "FROM host-file-was-read:1\n";

fn sha(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// True when `plan` builds the project's own `Dockerfile.odek`.
fn builds_the_project_dockerfile(plan: &Plan) -> bool {
    matches!(&plan.image.source, ImageSource::Dockerfile { sha256, .. } if *sha256 == sha(PROJECT_DOCKERFILE))
}

#[test]
fn dockerfile_odek_swapped_for_a_symlink_in_a_loop_never_reads_the_host_file() {
    let s = Arc::new(Setup::without_image());
    let host = host_file(&s, "host.Dockerfile", HOST_DOCKERFILE);
    let _swapper = Swapper::start(
        &s.workdir.join("Dockerfile.odek"),
        PROJECT_DOCKERFILE.as_bytes(),
        Hostile::Symlink(host),
    );
    resolve_in_a_loop(
        &s,
        "symlink",
        builds_the_project_dockerfile,
        &["Dockerfile.odek is a symbolic link; Dockerfile.odek must be a readable regular file"],
    );
}

#[test]
fn dockerfile_odek_swapped_for_a_fifo_in_a_loop_never_hangs() {
    let s = Arc::new(Setup::without_image());
    let _swapper = Swapper::start(
        &s.workdir.join("Dockerfile.odek"),
        PROJECT_DOCKERFILE.as_bytes(),
        Hostile::Fifo,
    );
    resolve_in_a_loop(
        &s,
        "FIFO",
        builds_the_project_dockerfile,
        &["Dockerfile.odek is a named pipe (FIFO), not a regular file"],
    );
}

// ---------------------------------------------------------------------------
// Each refusal on its own, through resolve: nothing is read, nothing waits.

#[tokio::test]
async fn odek_json_that_is_a_directory_fifo_or_too_large_is_refused_naming_why() {
    let s = Setup::new();
    let path = s.workdir.join("odek.json");
    std::fs::create_dir(&path).expect("mkdir");
    let e = s.resolve().await.expect_err("a directory");
    assert_refused_before_create(
        &s,
        &e,
        FailureClass::Config,
        "is a directory, not a regular file",
    );
    std::fs::remove_dir(&path).expect("rmdir");

    mkfifo(&path);
    let started = std::time::Instant::now();
    let e = s.resolve().await.expect_err("a FIFO");
    assert!(started.elapsed() < DEADLINE, "it waited on the FIFO");
    assert_refused_before_create(
        &s,
        &e,
        FailureClass::Config,
        "is a named pipe (FIFO), not a regular file",
    );
    std::fs::remove_file(&path).expect("rm");

    std::fs::write(&path, vec![b' '; (1 << 20) + 1]).expect("write");
    let e = s.resolve().await.expect_err("too large");
    assert_refused_before_create(
        &s,
        &e,
        FailureClass::Config,
        "larger than the 1048576-byte limit",
    );
}

#[tokio::test]
async fn dockerfile_odek_that_is_a_directory_fifo_or_too_large_is_refused_naming_why() {
    let s = Setup::without_image();
    let path = s.workdir.join("Dockerfile.odek");
    std::fs::create_dir(&path).expect("mkdir");
    let e = s.resolve().await.expect_err("a directory");
    assert_refused_before_create(
        &s,
        &e,
        FailureClass::Config,
        "is a directory, not a regular file",
    );
    std::fs::remove_dir(&path).expect("rmdir");

    mkfifo(&path);
    let started = std::time::Instant::now();
    let e = s.resolve().await.expect_err("a FIFO");
    assert!(started.elapsed() < DEADLINE, "it waited on the FIFO");
    assert_refused_before_create(
        &s,
        &e,
        FailureClass::Config,
        "is a named pipe (FIFO), not a regular file",
    );
    std::fs::remove_file(&path).expect("rm");

    std::fs::write(&path, vec![b'#'; (4 << 20) + 1]).expect("write");
    let e = s.resolve().await.expect_err("too large");
    assert_refused_before_create(
        &s,
        &e,
        FailureClass::Config,
        "larger than the 4194304-byte limit",
    );
    // Under the cap it is read.
    std::fs::write(&path, format!("{PROJECT_DOCKERFILE}{}", "#".repeat(100))).expect("write");
    s.resolve().await.expect("a Dockerfile of 122 bytes");
}

#[tokio::test]
async fn a_user_config_that_is_a_fifo_is_refused_without_waiting() {
    let s = Setup::new();
    mkfifo(&s.odek_home.join("config.json"));
    let started = std::time::Instant::now();
    let e = s.resolve().await.expect_err("a FIFO");
    assert!(started.elapsed() < DEADLINE, "it waited on the FIFO");
    assert_refused_before_create(&s, &e, FailureClass::Config, "not a regular file");
}
