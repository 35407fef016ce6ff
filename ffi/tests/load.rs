//! Load test of the C ABI against the real engine (SPEC §10.1
//! "thread-safe: handles usable from any thread"), calling the exported
//! `extern "C"` functions of the `odek` library directly.
//!
//! 16 threads × 5 cycles (override with `ODEK_LOAD_THREADS` and
//! `ODEK_LOAD_CYCLES`) share ONE client handle; each thread has its own
//! temp workdir and runs resolve → launch → exec (`redis-cli -h redis ping`
//! → PONG) → destroy against the Compose fixture (`odeke2e<ns>`, tests/ns.sh). Every cycle
//! must succeed or fail with a typed error (a §6.3 class and an `ODEK_E_*`
//! code; never a panic, internal error or bad handle); the whole run must
//! finish before a deadline (no deadlock); afterwards no container of any of
//! the workdirs is left, and the process's open file descriptors
//! (`/proc/self/fd`) and threads (`Threads:` in `/proc/self/status`) are
//! back to the baseline taken after one warm-up cycle (the library's
//! runtime starts its fixed workers on first use).
//!
//! Real Docker is required: without a daemon the test FAILS, it never skips.
//! The fixture is prepared with `tests/images/build.sh` and
//! `tests/fixtures/compose/up.sh odeke2e<ns>` (both idempotent).
//!
//! Run: `cargo test -p odek-ffi --test load -- --nocapture`
//! Larger: `ODEK_LOAD_THREADS=32 ODEK_LOAD_CYCLES=20 cargo test -p odek-ffi --release --test load -- --nocapture`
#![allow(unsafe_code)]

use std::ffi::{c_char, CStr, CString};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use odek::{
    odek_client_free, odek_client_new, odek_client_t, odek_error_class, odek_error_code,
    odek_error_free, odek_error_message, odek_error_t, odek_exec, odek_launch, odek_resolve,
    odek_sandbox_destroy, odek_sandbox_t, odek_string_free,
};

// This checkout's fixture project and image (tests/e2e/build.rs).
use odek_e2e::{BASE_IMAGE as IMAGE, PROJECT, TEST_NS};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("ffi/ is one level below the root")
        .to_path_buf()
}

fn env_usize(name: &str, default: usize) -> usize {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .ok()
            .filter(|n| *n > 0)
            .unwrap_or_else(|| panic!("{name} must be a positive integer (got {v:?})")),
        Err(_) => default,
    }
}

/// Daemon answers, images exist, the Compose fixture runs (idempotent).
fn fixture() {
    let info = Command::new("docker")
        .args(["info", "--format", "{{.ServerVersion}}"])
        .output()
        .expect("run docker");
    assert!(
        info.status.success(),
        "the Docker daemon is unreachable; this load test never skips — start Docker ({})",
        String::from_utf8_lossy(&info.stderr).trim()
    );
    for script in [
        vec!["tests/images/build.sh"],
        vec!["tests/fixtures/compose/up.sh", PROJECT],
    ] {
        let st = Command::new("bash")
            .arg(repo().join(script[0]))
            .args(&script[1..])
            .env("ODEK_TEST_NS", TEST_NS)
            .status()
            .expect("run bash");
        assert!(st.success(), "{script:?} failed");
    }
}

/// Container IDs of odek sandboxes whose workdir is `dir`.
fn leftovers(dir: &Path) -> Vec<String> {
    let out = Command::new("docker")
        .args([
            "ps",
            "-aq",
            "--filter",
            "label=dev.odek.sandbox=true",
            "--filter",
        ])
        .arg(format!("label=dev.odek.workdir={}", dir.display()))
        .output()
        .expect("docker ps");
    assert!(out.status.success(), "docker ps failed");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

fn fd_count() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .count()
}

fn thread_count() -> usize {
    std::fs::read_to_string("/proc/self/status")
        .expect("/proc/self/status")
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("Threads: line")
}

/// An error object read out and freed.
#[derive(Debug, Clone)]
struct OdekError {
    code: i32,
    class: String,
    message: String,
}

/// Takes ownership of `e` (NULL = success).
fn take(e: *mut odek_error_t) -> Result<(), OdekError> {
    if e.is_null() {
        return Ok(());
    }
    // SAFETY: `e` is a live error object returned by odek, freed once below.
    let err = unsafe {
        OdekError {
            code: odek_error_code(e),
            class: CStr::from_ptr(odek_error_class(e))
                .to_string_lossy()
                .into_owned(),
            message: CStr::from_ptr(odek_error_message(e))
                .to_string_lossy()
                .into_owned(),
        }
    };
    // SAFETY: as above.
    unsafe { odek_error_free(e) };
    Err(err)
}

/// Copies and frees a string returned by odek.
fn take_string(s: *mut c_char) -> String {
    assert!(!s.is_null(), "odek returned success with a NULL string");
    // SAFETY: a NUL-terminated string returned by odek, freed once.
    let v = unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned();
    // SAFETY: as above.
    unsafe { odek_string_free(s) };
    v
}

/// The client handle, shared by every thread (the ABI allows it).
#[derive(Clone, Copy)]
struct ClientPtr(*mut odek_client_t);
// SAFETY: odek client handles are opaque IDs, usable from any thread
// (SPEC §10.1; ffi/include/odek.h "Thread safety").
unsafe impl Send for ClientPtr {}

/// The §6.3 classes (plus config); a typed failure carries one of them and
/// a code outside the ABI-misuse / internal range.
fn is_typed(e: &OdekError) -> bool {
    let class_ok = matches!(
        e.class.as_str(),
        "config" | "docker-rejected" | "image-unavailable" | "daemon-unreachable"
    );
    let code_ok = (200..700).contains(&e.code);
    class_ok && code_ok && !e.message.is_empty()
}

/// One resolve → launch → exec → destroy cycle. `Err` carries the step.
fn cycle(client: ClientPtr, workdir: &Path) -> Result<(), (String, OdekError)> {
    let req = serde_json::json!({
        "workdir": workdir.display().to_string(),
        "settings": {"sandbox_compose_project": PROJECT, "sandbox_image": IMAGE},
        "read_user_config": false,
    })
    .to_string();
    let req = CString::new(req).expect("no NUL");
    let mut plan_ptr: *mut c_char = std::ptr::null_mut();
    // SAFETY: valid client, NUL-terminated request, writable out.
    take(unsafe { odek_resolve(client.0, req.as_ptr(), &mut plan_ptr) })
        .map_err(|e| ("resolve".to_string(), e))?;
    let plan = CString::new(take_string(plan_ptr)).expect("no NUL");
    let null = CString::new("null").expect("no NUL");
    let mut sb: *mut odek_sandbox_t = std::ptr::null_mut();
    // SAFETY: valid client, NUL-terminated plan and approval, writable out.
    take(unsafe { odek_launch(client.0, plan.as_ptr(), null.as_ptr(), &mut sb) })
        .map_err(|e| ("launch".to_string(), e))?;
    assert!(!sb.is_null(), "launch succeeded with a NULL handle");
    let exec_req = CString::new(r#"{"argv":["redis-cli","-h","redis","ping"]}"#).expect("no NUL");
    let mut res_ptr: *mut c_char = std::ptr::null_mut();
    // SAFETY: valid sandbox handle, NUL-terminated request, writable out.
    let exec = take(unsafe { odek_exec(sb, exec_req.as_ptr(), &mut res_ptr) });
    let exec = exec.map(|()| take_string(res_ptr));
    // Always destroy, whatever exec did.
    // SAFETY: a handle from odek_launch, destroyed once.
    let destroyed = take(unsafe { odek_sandbox_destroy(sb) });
    let result = exec.map_err(|e| ("exec".to_string(), e))?;
    destroyed.map_err(|e| ("destroy".to_string(), e))?;
    let v: serde_json::Value = serde_json::from_str(&result).expect("exec result JSON");
    assert_eq!(v["schema"], "odek.exec-result/1", "{v}");
    assert_eq!(v["exit_code"], 0, "redis-cli failed: {v}");
    assert_eq!(
        v["stdout"].as_str().map(str::trim),
        Some("PONG"),
        "unexpected answer: {v}"
    );
    Ok(())
}

/// Removes every sandbox of the workdirs (even when the test failed).
struct Cleanup(Vec<PathBuf>);

impl Drop for Cleanup {
    fn drop(&mut self) {
        for d in &self.0 {
            for id in leftovers(d) {
                let _ = Command::new("docker").args(["rm", "-f", &id]).output();
            }
        }
    }
}

/// Polls until `f() <= limit` or `wait` passes; returns the last value.
fn settles(wait: Duration, limit: usize, f: fn() -> usize) -> usize {
    let deadline = Instant::now() + wait;
    loop {
        let v = f();
        if v <= limit || Instant::now() >= deadline {
            return v;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn many_threads_launch_exec_destroy_on_one_client() {
    fixture();
    let threads = env_usize("ODEK_LOAD_THREADS", 16);
    let cycles = env_usize("ODEK_LOAD_CYCLES", 5);
    // Generous: a cycle takes ~1-3 s; 2 cores shared by all threads.
    let deadline = Duration::from_secs(
        std::env::var("ODEK_LOAD_DEADLINE_SECS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(120 + 6 * (threads * cycles) as u64),
    );

    // ODEK_HOME out of the operator's way; the request does not read the
    // user config anyway.
    let home = tempfile::Builder::new()
        .prefix("odek-load-home-")
        .tempdir()
        .expect("tempdir");
    std::env::set_var("ODEK_HOME", home.path());
    let dirs: Vec<tempfile::TempDir> = (0..=threads)
        .map(|i| {
            tempfile::Builder::new()
                .prefix(&format!("odek-load-{i}-"))
                .tempdir()
                .expect("tempdir")
        })
        .collect();
    let paths: Vec<PathBuf> = dirs
        .iter()
        .map(|d| d.path().canonicalize().expect("canonical"))
        .collect();
    let _cleanup = Cleanup(paths.clone());

    let opts = CString::new("{}").expect("no NUL");
    let mut client: *mut odek_client_t = std::ptr::null_mut();
    // SAFETY: NUL-terminated options, writable out.
    take(unsafe { odek_client_new(opts.as_ptr(), &mut client) }).expect("client_new");
    let client = ClientPtr(client);

    // Warm-up: starts the library's runtime and negotiates the API version.
    cycle(client, &paths[threads]).unwrap_or_else(|(step, e)| panic!("warm-up {step}: {e:?}"));
    std::thread::sleep(Duration::from_millis(500));
    let base_fds = fd_count();
    let base_threads = thread_count();
    eprintln!("load: baseline after warm-up: {base_fds} fds, {base_threads} threads");

    let t0 = Instant::now();
    let (tx, rx) = mpsc::channel();
    let mut workers = Vec::new();
    for (i, dir) in paths.iter().take(threads).cloned().enumerate() {
        let tx = tx.clone();
        workers.push(
            std::thread::Builder::new()
                .name(format!("load-{i}"))
                .spawn(move || {
                    for c in 0..cycles {
                        let t = Instant::now();
                        let r = cycle(client, &dir);
                        let _ = tx.send((i, c, t.elapsed(), r));
                    }
                })
                .expect("spawn worker"),
        );
    }
    drop(tx);
    let total = threads * cycles;
    let mut results = Vec::with_capacity(total);
    let mut peak_threads = 0;
    let mut peak_fds = 0;
    while results.len() < total {
        let left = deadline.saturating_sub(t0.elapsed());
        match rx.recv_timeout(left.min(Duration::from_millis(250))) {
            Ok(r) => results.push(r),
            Err(mpsc::RecvTimeoutError::Timeout) if t0.elapsed() < deadline => {}
            Err(mpsc::RecvTimeoutError::Timeout) => panic!(
                "deadlock or hang: only {}/{total} cycles finished within {deadline:?}",
                results.len()
            ),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                panic!("a worker died (panicked) after {} cycles", results.len())
            }
        }
        peak_threads = peak_threads.max(thread_count());
        peak_fds = peak_fds.max(fd_count());
    }
    for w in workers {
        w.join().expect("worker panicked");
    }
    let took = t0.elapsed();

    let mut ok = 0;
    let mut typed = Vec::new();
    let mut untyped = Vec::new();
    let mut durations: Vec<Duration> = Vec::new();
    for (i, c, d, r) in &results {
        durations.push(*d);
        match r {
            Ok(()) => ok += 1,
            Err((step, e)) if is_typed(e) => {
                typed.push(format!("thread {i} cycle {c} {step}: {e:?}"))
            }
            Err((step, e)) => untyped.push(format!("thread {i} cycle {c} {step}: {e:?}")),
        }
    }
    durations.sort();
    let p50 = durations[durations.len() / 2];
    let max = durations[durations.len() - 1];
    eprintln!(
        "load: {threads} threads x {cycles} cycles = {total}: {ok} ok, {} typed errors, {} untyped, in {took:?} (cycle p50 {p50:?}, max {max:?}); peak {peak_fds} fds, {peak_threads} threads",
        typed.len(),
        untyped.len()
    );
    for t in &typed {
        eprintln!("load: typed error: {t}");
    }
    assert!(untyped.is_empty(), "untyped failures: {untyped:#?}");

    // SAFETY: the client from odek_client_new, freed once.
    take(unsafe { odek_client_free(client.0) }).expect("client_free");

    for d in &paths {
        let left = leftovers(d);
        assert!(
            left.is_empty(),
            "containers left for {}: {left:?}",
            d.display()
        );
    }
    // Idle blocking-pool threads of the runtime linger up to 10 s.
    let fds = settles(Duration::from_secs(30), base_fds, fd_count);
    let thr = settles(Duration::from_secs(30), base_threads, thread_count);
    eprintln!(
        "load: after: {fds} fds (baseline {base_fds}), {thr} threads (baseline {base_threads})"
    );
    assert!(fds <= base_fds, "fd leak: {fds} open, baseline {base_fds}");
    assert!(
        thr <= base_threads,
        "thread leak: {thr} threads, baseline {base_threads}"
    );
}
