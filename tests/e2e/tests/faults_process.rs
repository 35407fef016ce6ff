//! Process faults: signals to `odek run` during setup and during
//! the command, SIGKILL (orphan reaped by `odek sandbox gc`), and the
//! sandbox container killed under a running command (`docker kill`).
//!
//! "During setup" is pinned with the fault proxy (`odek_e2e::fault_proxy`):
//! it stalls the container's `start`, so odek is provably inside the launch
//! when the signal arrives; "during exec" waits until the proxy has relayed
//! the exec start. Every command is a marker command that would create a
//! file on the host if it ever ran there.

use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use odek_e2e::fault_proxy::{Action, FaultProxy, Rule, Then};
use odek_e2e::{docker, docker_ok, stdout, strs, wait_until, Project, BASE_IMAGE, PROJECT};

/// Serialises the tests that leave an orphan for `odek sandbox gc`.
static GC: Mutex<()> = Mutex::new(());

fn gc_lock() -> std::sync::MutexGuard<'static, ()> {
    GC.lock().unwrap_or_else(|p| p.into_inner())
}

/// `sh -c 'echo run >> /workspace/started; touch <host marker>; sleep
/// 60'`: in the container the host path does not exist, so only a host
/// execution creates the marker; each run in the sandbox adds a line to
/// `started` ([`runs_in_sandbox`]), whichever way it ran (the exec API or
/// odek's supervisor, whose commands the proxy does not see).
fn sleeper(p: &Project) -> Vec<String> {
    vec![
        "sh".into(),
        "-c".into(),
        format!(
            "echo run >> /workspace/started; {}; sleep 60",
            p.marker_cmd()
        ),
    ]
}

/// How many times [`sleeper`] started in `p`'s sandbox.
fn runs_in_sandbox(p: &Project) -> usize {
    std::fs::read_to_string(p.path().join("started"))
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

/// Waits (≤ 30 s) until [`sleeper`] runs in container `id`: its `sleep 60`
/// in the container's process list.
fn wait_for_the_sleep(id: &str, proxy: &FaultProxy) {
    let seen = wait_until(Duration::from_secs(30), || {
        let out = odek_e2e::run(Command::new("docker").args(["top", id]));
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("sleep 60")
    });
    assert!(
        seen,
        "the command never started in {id}:\n{}",
        proxy.transcript()
    );
}

/// Spawns `odek run --sandbox-compose PROJECT … -- <cmd>` through `proxy`.
fn spawn_run(p: &Project, proxy: &FaultProxy, cmd: &[String], call_timeout: &str) -> Child {
    let mut argv: Vec<String> = vec![
        "run".into(),
        "--sandbox-compose".into(),
        PROJECT.into(),
        "--sandbox-image".into(),
        BASE_IMAGE.into(),
        "--".into(),
    ];
    argv.extend(cmd.iter().cloned());
    p.odek(&strs(&argv))
        .env("DOCKER_HOST", proxy.docker_host())
        .env("ODEK_DOCKER_TIMEOUT", call_timeout)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn odek")
}

fn kill(child: &Child, sig: &str) {
    let st = Command::new("kill")
        .args([&format!("-{sig}"), &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(st.success(), "kill -{sig} failed");
}

/// Waits (≤ `limit`) for the child; kills it and panics otherwise.
fn wait_exit(child: &mut Child, limit: Duration, what: &str) -> ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(st) = child.try_wait().expect("try_wait") {
            return st;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("odek did not exit within {limit:?} after {what} (hang)");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn output_of(child: &mut Child) -> (String, String) {
    use std::io::Read;
    let mut out = String::new();
    let mut err = String::new();
    if let Some(o) = child.stdout.as_mut() {
        let _ = o.read_to_string(&mut out);
    }
    if let Some(e) = child.stderr.as_mut() {
        let _ = e.read_to_string(&mut err);
    }
    (out, err)
}

/// The container odek created for `p` (exactly one).
fn the_container(p: &Project, proxy: &FaultProxy) -> String {
    let left = p.leftovers();
    assert_eq!(
        left.len(),
        1,
        "expected one sandbox container: {left:?}\n{}",
        proxy.transcript()
    );
    left[0].clone()
}

// ---------------------------------------------------------------------------
// SIGINT / SIGTERM during setup: `start` is stalled by the proxy.
// ---------------------------------------------------------------------------

fn signal_while_start_stalls(sig: &str, code: i32) {
    let p = Project::new().with_known_images();
    let proxy = FaultProxy::start(vec![Rule::new(
        "POST",
        "/containers/*/start",
        1,
        Action::Stall,
        Then::Relay,
    )]);
    // A long per-call budget: the stall lasts until the signal.
    let mut child = spawn_run(&p, &proxy, &p.marker_argv(), "60");
    assert!(
        proxy.wait_fired(Duration::from_secs(30)),
        "odek never reached start:\n{}",
        proxy.transcript()
    );
    let id = the_container(&p, &proxy);
    assert_eq!(
        docker(&["inspect", "-f", "{{.State.Status}}", &id]),
        "created",
        "the stalled start must not have reached the daemon"
    );
    let t0 = Instant::now();
    kill(&child, sig);
    let st = wait_exit(&mut child, Duration::from_secs(15), &format!("SIG{sig}"));
    let took = t0.elapsed();
    let (_, err) = output_of(&mut child);
    let ctx = format!("stderr:\n{err}\nrequests:\n{}", proxy.transcript());
    assert_eq!(
        st.code(),
        Some(code),
        "after SIG{sig} during setup: {st:?}\n{ctx}"
    );
    assert!(
        !docker_ok(&["container", "inspect", &id]),
        "container {id} left after SIG{sig} during setup\n{ctx}"
    );
    assert!(p.leftovers().is_empty(), "{:?}", p.leftovers());
    assert!(!p.marker().exists(), "the command ran on the host");
    assert!(
        proxy.count("DELETE", "/containers/*") >= 1,
        "no removal went to the daemon\n{ctx}"
    );
    eprintln!("SIG{sig} during setup: exited and cleaned up in {took:?}");
}

#[test]
fn sigint_during_setup_removes_the_container_and_exits_130() {
    signal_while_start_stalls("INT", 130);
}

#[test]
fn sigterm_during_setup_removes_the_container_and_exits_143() {
    signal_while_start_stalls("TERM", 143);
}

/// Spawns `odek sandbox up --sandbox-compose PROJECT …` through `proxy`.
fn spawn_up(p: &Project, proxy: &FaultProxy, call_timeout: &str) -> Child {
    p.odek(&[
        "sandbox",
        "up",
        "--sandbox-compose",
        PROJECT,
        "--sandbox-image",
        BASE_IMAGE,
    ])
    .env("DOCKER_HOST", proxy.docker_host())
    .env("ODEK_DOCKER_TIMEOUT", call_timeout)
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("spawn odek sandbox up")
}

#[test]
fn sigint_during_sandbox_up_removes_the_half_made_sandbox() {
    // A detached sandbox outlives gc, so an interrupted `sandbox up` must
    // remove what it created itself: here a container created, not started.
    let p = Project::new().with_known_images();
    let proxy = FaultProxy::start(vec![Rule::new(
        "POST",
        "/containers/*/start",
        1,
        Action::Stall,
        Then::Relay,
    )]);
    let mut child = spawn_up(&p, &proxy, "60");
    assert!(
        proxy.wait_fired(Duration::from_secs(30)),
        "odek never reached start:\n{}",
        proxy.transcript()
    );
    let id = the_container(&p, &proxy);
    kill(&child, "INT");
    let st = wait_exit(&mut child, Duration::from_secs(15), "SIGINT");
    let (out, err) = output_of(&mut child);
    let ctx = format!(
        "stdout:\n{out}\nstderr:\n{err}\nrequests:\n{}",
        proxy.transcript()
    );
    assert_eq!(st.code(), Some(130), "{st:?}\n{ctx}");
    assert!(
        !docker_ok(&["container", "inspect", &id]),
        "container {id} left after SIGINT during sandbox up\n{ctx}"
    );
    assert!(p.leftovers().is_empty(), "{:?}", p.leftovers());
    assert!(err.contains("removed"), "{ctx}");
    assert!(out.trim().is_empty(), "no sandbox name is printed: {ctx}");
}

#[test]
fn a_second_sigint_stops_waiting_for_a_create_that_does_not_answer() {
    // The create reached the daemon but its answer never comes: the first
    // SIGINT waits (up to 10 s) for it, a second one stops the wait, and
    // the container is removed by its pre-chosen name.
    let _gc = gc_lock();
    let p = Project::new().with_known_images();
    let proxy = FaultProxy::start(vec![Rule::new(
        "POST",
        "/containers/create",
        1,
        Action::StallAfterForward,
        Then::Relay,
    )]);
    let mut child = spawn_run(&p, &proxy, &p.marker_argv(), "60");
    assert!(
        proxy.wait_fired(Duration::from_secs(30)),
        "{}",
        proxy.transcript()
    );
    assert!(
        wait_until(Duration::from_secs(10), || p.sandboxes().len() == 1),
        "the forwarded create did not land:\n{}",
        proxy.transcript()
    );
    kill(&child, "INT");
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        child.try_wait().expect("try_wait").is_none(),
        "odek did not wait for the create's answer"
    );
    let t0 = Instant::now();
    kill(&child, "INT");
    let st = wait_exit(&mut child, Duration::from_secs(5), "the second SIGINT");
    let took = t0.elapsed();
    let (_, err) = output_of(&mut child);
    let ctx = format!("stderr:\n{err}\nrequests:\n{}", proxy.transcript());
    assert_eq!(st.code(), Some(130), "{st:?}\n{ctx}");
    assert!(err.contains("interrupt again to stop waiting"), "{ctx}");
    assert!(
        wait_until(Duration::from_secs(5), || p.leftovers().is_empty()),
        "container left: {:?}\n{ctx}",
        p.leftovers()
    );
    assert!(err.contains("removed"), "{ctx}");
    assert!(!p.marker().exists());
    eprintln!("second SIGINT: exited {took:?} after it");
}

// ---------------------------------------------------------------------------
// SIGINT / SIGTERM during the command.
// ---------------------------------------------------------------------------

/// Spawns a run of [`sleeper`] and waits until its exec started.
fn running_sleeper(p: &Project, proxy: &FaultProxy) -> (Child, String) {
    let child = spawn_run(p, proxy, &sleeper(p), "10");
    let mut id = String::new();
    let created = wait_until(Duration::from_secs(30), || match p.leftovers().as_slice() {
        [one] => {
            id = one.clone();
            true
        }
        _ => false,
    });
    assert!(created, "no sandbox appeared:\n{}", proxy.transcript());
    wait_for_the_sleep(&id, proxy);
    (child, id)
}

fn signal_during_exec(sig: &str, code: i32) {
    let p = Project::new().with_known_images();
    let proxy = FaultProxy::observer();
    let (mut child, id) = running_sleeper(&p, &proxy);
    let t0 = Instant::now();
    kill(&child, sig);
    let st = wait_exit(&mut child, Duration::from_secs(15), &format!("SIG{sig}"));
    let took = t0.elapsed();
    let (_, err) = output_of(&mut child);
    assert_eq!(
        st.code(),
        Some(code),
        "after SIG{sig} during exec: {st:?}\n{err}"
    );
    assert!(
        !docker_ok(&["container", "inspect", &id]),
        "container {id} left after SIG{sig} during exec\n{err}"
    );
    assert!(p.leftovers().is_empty(), "{:?}", p.leftovers());
    assert!(!p.marker().exists(), "the command ran on the host");
    assert!(took < Duration::from_secs(10), "cleanup took {took:?}");
    eprintln!("SIG{sig} during exec: exited and cleaned up in {took:?}");
}

#[test]
fn sigint_during_exec_removes_the_container_and_exits_130() {
    signal_during_exec("INT", 130);
}

#[test]
fn sigterm_during_exec_removes_the_container_and_exits_143() {
    signal_during_exec("TERM", 143);
}

// ---------------------------------------------------------------------------
// SIGKILL: nothing can clean up; the orphan is labelled with its (now dead)
// owner and `odek sandbox gc` removes it.
// ---------------------------------------------------------------------------

fn gc_reaps(p: &Project, orphan: &str) {
    let ls = stdout(&p.odek_ok(&["sandbox", "ls", "--json"]));
    let list: serde_json::Value = serde_json::from_str(&ls).expect("ls --json");
    let entry = list
        .as_array()
        .expect("array")
        .iter()
        .find(|e| e["id"].as_str().is_some_and(|i| i.starts_with(orphan)))
        .unwrap_or_else(|| panic!("orphan {orphan} not listed:\n{ls}"));
    assert_eq!(entry["owner_gone"], true, "{entry}");
    assert_eq!(entry["detached"], false, "{entry}");
    let gc = p.odek_ok(&["sandbox", "gc"]);
    let name = entry["name"].as_str().expect("name");
    assert!(
        stdout(&gc).lines().any(|l| l.trim() == name),
        "gc did not report removing {name}:\n{}",
        stdout(&gc)
    );
    assert!(
        !docker_ok(&["container", "inspect", orphan]),
        "gc did not remove {orphan}"
    );
    assert!(p.leftovers().is_empty(), "{:?}", p.leftovers());
}

#[test]
fn sigkill_during_setup_leaves_an_orphan_that_gc_reaps() {
    let _gc = gc_lock();
    let p = Project::new().with_known_images();
    let proxy = FaultProxy::start(vec![Rule::new(
        "POST",
        "/containers/*/start",
        1,
        Action::Stall,
        Then::Relay,
    )]);
    let mut child = spawn_run(&p, &proxy, &p.marker_argv(), "60");
    assert!(
        proxy.wait_fired(Duration::from_secs(30)),
        "{}",
        proxy.transcript()
    );
    let id = the_container(&p, &proxy);
    kill(&child, "KILL");
    let st = wait_exit(&mut child, Duration::from_secs(10), "SIGKILL");
    assert_eq!(st.signal(), Some(9), "{st:?}");
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        docker_ok(&["container", "inspect", &id]),
        "the container vanished without gc after SIGKILL"
    );
    drop(proxy);
    gc_reaps(&p, &id);
    assert!(!p.marker().exists(), "the command ran on the host");
}

#[test]
fn sigkill_during_exec_leaves_no_sandbox_without_gc() {
    // SPEC §6.1 owner lifetime: nothing runs in the SIGKILLed process, yet
    // the engine removes the sandbox once its stdin attachment is gone.
    let _gc = gc_lock();
    let p = Project::new().with_known_images();
    let proxy = FaultProxy::observer();
    let (mut child, id) = running_sleeper(&p, &proxy);
    kill(&child, "KILL");
    let st = wait_exit(&mut child, Duration::from_secs(10), "SIGKILL");
    assert_eq!(st.signal(), Some(9), "{st:?}");
    drop(proxy);
    assert!(
        wait_until(Duration::from_secs(10), || !docker_ok(&[
            "container",
            "inspect",
            &id
        ])),
        "10 s after SIGKILL of odek, its sandbox {id} is still there (no gc was run)"
    );
    assert!(p.leftovers().is_empty(), "{:?}", p.leftovers());
    assert!(!p.marker().exists(), "the command ran on the host");
}

// ---------------------------------------------------------------------------
// The container is killed under a running command: odek reports an error
// quickly, never hangs, never retries (neither in the container nor on the
// host).
// ---------------------------------------------------------------------------

/// What odek did after its sandbox container was killed under a command.
struct Killed {
    took: Duration,
    status: ExitStatus,
    stderr: String,
    ctx: String,
    execs: usize,
}

/// Kills `id` with `docker kill` once `proxy` relayed the exec start, and
/// measures how long `child` takes to exit after it.
fn kill_container_under(mut child: Child, proxy: &FaultProxy, id: &str) -> Killed {
    let t0 = Instant::now();
    docker(&["kill", id]);
    let status = wait_exit(&mut child, Duration::from_secs(30), "docker kill");
    let took = t0.elapsed();
    let (out, err) = output_of(&mut child);
    let ctx = format!(
        "exit {status:?} after {took:?}\nstdout:\n{out}\nstderr:\n{err}\nrequests:\n{}",
        proxy.transcript()
    );
    Killed {
        took,
        status,
        stderr: err,
        ctx,
        execs: proxy.count("POST", "/containers/*/exec"),
    }
}

/// `odek run … -- sh -c 'touch <marker>; sleep 60'`, container killed mid-exec.
fn kill_under_run(p: &Project) -> Killed {
    let proxy = FaultProxy::observer();
    let (child, id) = running_sleeper(p, &proxy);
    let k = kill_container_under(child, &proxy, &id);
    eprintln!(
        "docker kill under odek run: exit {:?} after {:?}",
        k.status.code(),
        k.took
    );
    assert!(p.leftovers().is_empty(), "{:?}\n{}", p.leftovers(), k.ctx);
    k
}

/// `odek sandbox up`, then `odek sandbox exec <name> -- sh -c 'touch
/// <marker>; sleep 60'`, container killed mid-exec; the killed sandbox is
/// removed with `odek sandbox down` afterwards.
fn kill_under_sandbox_exec(p: &Project) -> Killed {
    let up = p.odek_ok(&[
        "sandbox",
        "up",
        "--sandbox-compose",
        PROJECT,
        "--sandbox-image",
        BASE_IMAGE,
    ]);
    let name = stdout(&up).trim().to_string();
    let proxy = FaultProxy::observer();
    let mut argv: Vec<String> = vec!["sandbox".into(), "exec".into(), name.clone(), "--".into()];
    argv.extend(sleeper(p));
    let child = p
        .odek(&strs(&argv))
        .env("DOCKER_HOST", proxy.docker_host())
        .env("ODEK_DOCKER_TIMEOUT", "10")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn odek sandbox exec");
    wait_for_the_sleep(&name, &proxy);
    let k = kill_container_under(child, &proxy, &name);
    eprintln!(
        "docker kill under odek sandbox exec: exit {:?} after {:?}",
        k.status.code(),
        k.took
    );
    p.odek_ok(&["sandbox", "down", &name]);
    assert!(p.leftovers().is_empty(), "{:?}", p.leftovers());
    k
}

/// Within 5 s, a failure status, the command neither re-run in the
/// container nor run on the host.
fn assert_fails_fast_without_retry(p: &Project, k: &Killed) {
    let ctx = &k.ctx;
    assert!(
        k.took < Duration::from_secs(5),
        "odek took {:?} to notice\n{ctx}",
        k.took
    );
    assert!(
        k.status.code().is_some_and(|c| c != 0),
        "expected a failure status\n{ctx}"
    );
    assert!(
        !p.marker().exists(),
        "the command was retried on the host\n{ctx}"
    );
    assert_eq!(
        runs_in_sandbox(p),
        1,
        "the command was run more than once ({} execs)\n{ctx}",
        k.execs
    );
}

/// odek says the sandbox stopped under the command (exec.rs has that
/// message), instead of passing 137 off as the command's own status.
fn assert_reported_as_sandbox_stopped(k: &Killed) {
    assert_eq!(
        k.status.code(),
        Some(137),
        "the killed sandbox is passed off as the command's own status\n{}",
        k.ctx
    );
    assert!(
        k.stderr.contains("odek: error") && k.stderr.contains("stopped while the command ran"),
        "no error message for the killed sandbox\n{}",
        k.ctx
    );
}

#[test]
fn container_killed_during_odek_run_fails_within_5s_without_retry() {
    let p = Project::new().with_known_images();
    let k = kill_under_run(&p);
    assert_fails_fast_without_retry(&p, &k);
}

#[test]
fn container_killed_during_sandbox_exec_fails_within_5s_without_retry() {
    let p = Project::new().with_known_images();
    let k = kill_under_sandbox_exec(&p);
    assert_fails_fast_without_retry(&p, &k);
}

#[test]
fn container_killed_during_odek_run_is_reported_as_an_error() {
    let p = Project::new().with_known_images();
    let k = kill_under_run(&p);
    assert_fails_fast_without_retry(&p, &k);
    assert_reported_as_sandbox_stopped(&k);
}

#[test]
fn container_killed_during_sandbox_exec_is_reported_as_an_error() {
    let p = Project::new().with_known_images();
    let k = kill_under_sandbox_exec(&p);
    assert_fails_fast_without_retry(&p, &k);
    assert_reported_as_sandbox_stopped(&k);
}

// ---------------------------------------------------------------------------
// SIGINT while the create is still in flight at a slow daemon: odek removes
// by the pre-chosen name (twice, 300 ms apart) and exits; a create that the
// daemon completes later must not leave a container behind.
// ---------------------------------------------------------------------------

#[test]
fn sigint_while_a_slow_create_is_in_flight_leaves_nothing() {
    let _gc = gc_lock();
    let p = Project::new().with_known_images();
    let proxy = FaultProxy::start(vec![Rule::new(
        "POST",
        "/containers/create",
        1,
        Action::Delay(Duration::from_secs(3)),
        Then::Relay,
    )]);
    let mut child = spawn_run(&p, &proxy, &p.marker_argv(), "60");
    assert!(
        proxy.wait_fired(Duration::from_secs(30)),
        "{}",
        proxy.transcript()
    );
    std::thread::sleep(Duration::from_millis(300));
    kill(&child, "INT");
    let st = wait_exit(&mut child, Duration::from_secs(15), "SIGINT");
    let (_, err) = output_of(&mut child);
    assert_eq!(st.code(), Some(130), "{st:?}\n{err}");
    // Let the delayed create land.
    std::thread::sleep(Duration::from_secs(4));
    let left = p.leftovers();
    if !left.is_empty() {
        // Reap it (owner gone) before failing, so nothing is left.
        let _ = p.odek_ok(&["sandbox", "gc"]);
        assert!(p.leftovers().is_empty(), "gc did not reap {left:?}");
        panic!(
            "container {left:?} created after odek said it was removed:\n{err}\nrequests:\n{}",
            proxy.transcript()
        );
    }
    assert!(!p.marker().exists());
}

// ---------------------------------------------------------------------------
// SIGINT while the daemon has stopped answering: odek cannot remove the
// container; it must exit (within its removal budgets) and must not claim
// the sandbox was removed. The orphan is reaped by gc.
// ---------------------------------------------------------------------------

#[test]
fn sigint_while_the_daemon_stopped_answering_does_not_claim_removal() {
    let _gc = gc_lock();
    let p = Project::new().with_known_images();
    let proxy = FaultProxy::start(vec![Rule::new(
        "POST",
        "/containers/*/start",
        1,
        Action::Stall,
        Then::Stall,
    )]);
    let mut child = spawn_run(&p, &proxy, &p.marker_argv(), "5");
    assert!(
        proxy.wait_fired(Duration::from_secs(30)),
        "{}",
        proxy.transcript()
    );
    let id = the_container(&p, &proxy);
    let t0 = Instant::now();
    kill(&child, "INT");
    let st = wait_exit(&mut child, Duration::from_secs(30), "SIGINT");
    let took = t0.elapsed();
    let (_, err) = output_of(&mut child);
    eprintln!(
        "SIGINT with a silent daemon: exit {:?} after {took:?}",
        st.code()
    );
    drop(proxy);
    let still_there = docker_ok(&["container", "inspect", &id]);
    if still_there {
        gc_reaps(&p, &id);
    }
    assert_eq!(st.code(), Some(130), "{st:?}\n{err}");
    assert!(
        still_there,
        "the container was removed through a silent daemon?\n{err}"
    );
    assert!(
        !err.contains(" removed"),
        "odek claims the sandbox was removed, but it is still there:\n{err}"
    );
    assert!(
        err.contains("odek sandbox gc"),
        "odek does not say how to reap the sandbox it left:\n{err}"
    );
}
