//! The daemon lost in the middle of a launch (SPEC §6.1, §6.3):
//! odek talks to Docker through a fault-injecting proxy
//! (`odek_e2e::fault_proxy`) that drops or stalls the connection at one
//! request of the launch sequence. Every case runs
//! `odek run --sandbox-compose PROJECT --sandbox-image BASE_IMAGE --
//! sh -c 'touch <host marker>'` with `ODEK_DOCKER_TIMEOUT=3` and expects:
//! exit 125, failure class `daemon-unreachable`, the host marker absent, and
//! either no container left (the daemon came back, so odek removed it) or —
//! when the daemon "truly vanished" — a labelled orphan that the next
//! `odek sandbox gc` on the real socket removes once odek has exited.

use std::process::Output;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use odek_e2e::fault_proxy::{Action, FaultProxy, Rule, Then};
use odek_e2e::{
    docker, docker_ok, run_timeout, stderr, stdout, strs, wait_until, Project, BASE_IMAGE, PROJECT,
};

/// Per-call time budget given to odek (seconds).
const CALL_TIMEOUT: &str = "3";

/// Serialises the tests that leave an orphan for `odek sandbox gc`: gc
/// removes every sandbox whose owner is gone, so two such tests must not
/// reap each other's orphan.
static GC: Mutex<()> = Mutex::new(());

fn gc_lock() -> std::sync::MutexGuard<'static, ()> {
    GC.lock().unwrap_or_else(|p| p.into_inner())
}

const CREATE: (&str, &str) = ("POST", "/containers/create");
const START: (&str, &str) = ("POST", "/containers/*/start");
const CONNECT: (&str, &str) = ("POST", "/networks/*/connect");
/// By full ID: a launch first inspects other sandboxes by name (the sweep of
/// orphaned link networks, SPEC §4.4), which is not the verify.
const VERIFY: (&str, &str) = ("GET", "/containers/<id>/json");
/// Which [`VERIFY`] request is the sandbox's: the launch inspects the
/// fixture's two services by ID first, to connect them to the sandbox's
/// link network (SPEC §4.4).
const VERIFY_NTH: usize = 3;
/// The idle-process check (SPEC §6.1), concurrent with the connects.
const TOP: (&str, &str) = ("GET", "/containers/*/top");

/// Runs the marker command through `proxy` (extra flags before `--`).
fn run_through(p: &Project, proxy: &FaultProxy, extra: &[&str]) -> (Output, Duration) {
    let mut argv: Vec<String> = vec![
        "run".into(),
        "--sandbox-compose".into(),
        PROJECT.into(),
        "--sandbox-image".into(),
        BASE_IMAGE.into(),
    ];
    argv.extend(extra.iter().map(|s| s.to_string()));
    argv.push("--".into());
    argv.extend(p.marker_argv());
    let mut cmd = p.odek(&strs(&argv));
    cmd.env("DOCKER_HOST", proxy.docker_host())
        .env("ODEK_DOCKER_TIMEOUT", CALL_TIMEOUT);
    let t0 = Instant::now();
    let out = run_timeout(&mut cmd, Duration::from_secs(90));
    (out, t0.elapsed())
}

fn context(out: &Output, proxy: &FaultProxy) -> String {
    format!(
        "exit {:?}\nstderr:\n{}\nstdout:\n{}\nrequests through the proxy:\n{}",
        out.status.code(),
        stderr(out),
        stdout(out),
        proxy.transcript()
    )
}

/// Exit 125, class daemon-unreachable, marker absent, the rule fired.
fn assert_daemon_unreachable(p: &Project, out: &Output, proxy: &FaultProxy) {
    let ctx = context(out, proxy);
    assert!(proxy.fired(), "the fault never fired:\n{ctx}");
    assert_eq!(out.status.code(), Some(125), "{ctx}");
    assert!(
        stderr(out).contains("error (daemon-unreachable)"),
        "not reported as daemon-unreachable:\n{ctx}"
    );
    assert!(
        !p.marker().exists(),
        "the command ran on the host: {} exists\n{ctx}",
        p.marker().display()
    );
    assert!(
        startup_absent(out),
        "a startup line was printed although the launch failed:\n{ctx}"
    );
}

fn startup_absent(out: &Output) -> bool {
    odek_e2e::startup_line(out).is_none()
}

/// The daemon comes back after the fault: odek removes the container itself.
fn recovers(rule: Rule, extra: &[&str]) -> Duration {
    recovers_in(Project::new().with_known_images(), rule, extra)
}

/// [`recovers`] in project `p` (e.g. one through the exec API).
fn recovers_in(p: Project, rule: Rule, extra: &[&str]) -> Duration {
    let proxy = FaultProxy::start(vec![rule]);
    let (out, took) = run_through(&p, &proxy, extra);
    assert_daemon_unreachable(&p, &out, &proxy);
    assert!(
        p.leftovers().is_empty(),
        "container left although the daemon answered the removal: {:?}\n{}",
        p.leftovers(),
        context(&out, &proxy)
    );
    eprintln!("fault handled in {took:?}");
    took
}

/// The daemon (through the proxy) vanishes for good after the owner's
/// stdin attachment was made (SPEC §6.1 owner lifetime): odek cannot remove
/// the container, but once odek has exited its connection is gone, and the
/// engine removes the container by itself — no orphan is left for gc.
fn vanishes_owned(rule: Rule, extra: &[&str]) -> Duration {
    vanishes_owned_in(Project::new().with_known_images(), rule, extra)
}

/// [`vanishes_owned`] in project `p` (e.g. one through the exec API).
fn vanishes_owned_in(p: Project, rule: Rule, extra: &[&str]) -> Duration {
    let _gc = gc_lock();
    let proxy = FaultProxy::start(vec![rule]);
    let (out, took) = run_through(&p, &proxy, extra);
    assert_daemon_unreachable(&p, &out, &proxy);
    assert!(
        proxy.count("POST", "/containers/*/attach") == 1,
        "the fault came before the attachment:\n{}",
        proxy.transcript()
    );
    drop(proxy);
    let ctx = format!("stderr:\n{}", stderr(&out));
    assert!(
        stderr(&out).contains("odek sandbox gc"),
        "the message does not say how an orphan would be reaped:\n{ctx}"
    );
    assert!(
        wait_until(Duration::from_secs(10), || p.leftovers().is_empty()),
        "10 s after odek exited, its sandbox {:?} is still there (no gc was run)\n{ctx}",
        p.leftovers()
    );
    eprintln!("fault handled in {took:?} (the engine removed the sandbox)");
    took
}

/// The daemon vanishes for good at the fault, before the owner's stdin
/// attachment: odek cannot remove the container; the orphan is labelled,
/// its owner is gone once odek exited, and `odek sandbox gc` on the real
/// socket removes it.
fn vanishes(rule: Rule, extra: &[&str]) -> Duration {
    let _gc = gc_lock();
    let p = Project::new().with_known_images();
    let proxy = FaultProxy::start(vec![rule]);
    let (out, took) = run_through(&p, &proxy, extra);
    assert_daemon_unreachable(&p, &out, &proxy);
    drop(proxy);
    eprintln!("fault handled in {took:?} (orphan left for gc)");
    let ctx = format!("stderr:\n{}", stderr(&out));
    let left = p.leftovers();
    assert_eq!(
        left.len(),
        1,
        "expected exactly one orphan (the daemon vanished after create): {left:?}\n{ctx}"
    );
    let orphan = &left[0];
    assert!(
        stderr(&out).contains("odek sandbox gc"),
        "the message does not say how the orphan is reaped:\n{ctx}"
    );
    // Labelled, and its owner (the odek process) is gone.
    assert_eq!(
        docker(&[
            "inspect",
            "-f",
            "{{index .Config.Labels \"dev.odek.sandbox\"}}",
            orphan
        ]),
        "true"
    );
    let ls = stdout(&p.odek_ok(&["sandbox", "ls", "--json"]));
    let list: serde_json::Value = serde_json::from_str(&ls).expect("ls --json");
    let entry = list
        .as_array()
        .expect("array")
        .iter()
        .find(|e| {
            e["id"]
                .as_str()
                .is_some_and(|i| i.starts_with(orphan.as_str()))
        })
        .unwrap_or_else(|| panic!("orphan {orphan} not listed:\n{ls}"));
    assert_eq!(entry["owner_gone"], true, "{entry}");
    // gc directly on the real socket (no DOCKER_HOST override).
    let gc = p.odek_ok(&["sandbox", "gc"]);
    let name = entry["name"].as_str().expect("name").to_string();
    assert!(
        stdout(&gc).lines().any(|l| l.trim() == name),
        "gc did not report removing {name}:\n{}{}",
        stdout(&gc),
        stderr(&gc)
    );
    assert!(
        wait_until(Duration::from_secs(5), || !docker_ok(&[
            "container",
            "inspect",
            orphan
        ])),
        "gc did not remove {orphan}"
    );
    assert!(p.leftovers().is_empty(), "{:?}", p.leftovers());
    took
}

fn rule(target: (&str, &str), nth: usize, action: Action, then: Then) -> Rule {
    Rule::new(target.0, target.1, nth, action, then)
}

/// `--sandbox-network bridge` plus the project's two networks: the
/// container starts on the default bridge, its link network is connected
/// after start, then the project's services are connected to the link
/// (SPEC §4.4), so there is a second connect.
const TWO_CONNECTS: &[&str] = &["--sandbox-network", "bridge"];

// ---------------------------------------------------------------------------
// The proxy itself relays a whole run (so the faults below are the only
// difference).
// ---------------------------------------------------------------------------

#[test]
fn through_the_exec_api_proxy_relays_a_complete_run() {
    proxy_relays_a_complete_run(true);
}

#[test]
fn through_the_supervisor_proxy_relays_a_complete_run() {
    proxy_relays_a_complete_run(false);
}

/// The launch sequence and the command as the daemon saw them: through the
/// exec API (the idle process listed, one exec), or through the supervisor
/// (the owner's attachment carries the command: no listing, no exec).
fn proxy_relays_a_complete_run(exec_api: bool) {
    let p = Project::new().with_known_images();
    let p = if exec_api { p.exec_api() } else { p };
    let proxy = FaultProxy::observer();
    let mut cmd = p.odek(&[
        "run",
        "--sandbox-compose",
        PROJECT,
        "--sandbox-image",
        BASE_IMAGE,
        "--sandbox-network",
        "bridge",
        "--",
        "sh",
        "-c",
        "redis-cli -h redis ping; echo done >&2",
    ]);
    cmd.env("DOCKER_HOST", proxy.docker_host())
        .env("ODEK_DOCKER_TIMEOUT", CALL_TIMEOUT);
    let out = run_timeout(&mut cmd, Duration::from_secs(60));
    let ctx = context(&out, &proxy);
    assert_eq!(out.status.code(), Some(0), "{ctx}");
    assert!(stdout(&out).contains("PONG"), "{ctx}");
    assert!(stderr(&out).contains("done"), "{ctx}");
    // The launch sequence as the daemon saw it.
    assert_eq!(proxy.count(CREATE.0, CREATE.1), 1, "{ctx}");
    assert_eq!(proxy.count(START.0, START.1), 1, "{ctx}");
    // The sandbox to its link network, then redis and postgres to the link.
    assert_eq!(proxy.count(CONNECT.0, CONNECT.1), 3, "{ctx}");
    assert!(proxy.count(VERIFY.0, VERIFY.1) >= 1, "{ctx}");
    if exec_api {
        assert!(proxy.count(TOP.0, TOP.1) >= 1, "{ctx}");
        assert_eq!(proxy.count("POST", "/exec/*/start"), 1, "{ctx}");
    } else {
        assert_eq!(proxy.count(TOP.0, TOP.1), 0, "{ctx}");
        assert_eq!(proxy.count("POST", "/exec/*/start"), 0, "{ctx}");
        assert!(
            stderr(&out).contains("supervisor=on"),
            "the startup line does not say supervisor=on:\n{ctx}"
        );
    }
    assert_eq!(proxy.count("POST", "/containers/*/attach"), 1, "{ctx}");
    assert_eq!(proxy.count("DELETE", "/containers/*"), 1, "{ctx}");
    assert!(p.leftovers().is_empty());
}

// ---------------------------------------------------------------------------
// The daemon comes back: odek removes what it created.
// ---------------------------------------------------------------------------

#[test]
fn connection_dropped_before_create_reaches_the_daemon() {
    recovers(rule(CREATE, 1, Action::Drop, Then::Relay), &[]);
}

#[test]
fn create_answer_lost_container_removed_by_name() {
    recovers(rule(CREATE, 1, Action::DropAfterForward, Then::Relay), &[]);
}

#[test]
fn start_answer_lost_container_removed() {
    recovers(rule(START, 1, Action::DropAfterForward, Then::Relay), &[]);
}

#[test]
fn connection_dropped_during_second_connect() {
    recovers(rule(CONNECT, 2, Action::Drop, Then::Relay), TWO_CONNECTS);
}

#[test]
fn second_connect_answer_lost() {
    recovers(
        rule(CONNECT, 2, Action::DropAfterForward, Then::Relay),
        TWO_CONNECTS,
    );
}

#[test]
fn connection_dropped_during_verify() {
    recovers(rule(VERIFY, VERIFY_NTH, Action::Drop, Then::Relay), &[]);
}

// The idle process's listing is the exec API's path (a supervised sandbox
// is ready at its supervisor's first frame instead).

#[test]
fn through_the_exec_api_connection_dropped_during_the_process_listing() {
    recovers_in(
        Project::new().with_known_images().exec_api(),
        rule(TOP, 1, Action::Drop, Then::Relay),
        &[],
    );
}

#[test]
fn through_the_exec_api_process_listing_stalls_then_times_out_and_is_removed() {
    let took = recovers_in(
        Project::new().with_known_images().exec_api(),
        rule(TOP, 1, Action::Stall, Then::Relay),
        &[],
    );
    assert!(
        took >= Duration::from_secs(3),
        "no timeout waited: {took:?}"
    );
    assert!(took < Duration::from_secs(30), "took {took:?}");
}

#[test]
fn a_lost_create_answer_never_removes_another_sandbox_of_that_name() {
    // `odek sandbox up --name X` while sandbox X runs: the daemon answers
    // 409, the answer is lost, and the removal by name must leave X alone
    // (found by a review: X was force-removed and odek said "removed").
    let p = Project::new().with_known_images();
    let name = format!("odek-e2e-{}", odek_e2e::random_hex(8));
    let up = |extra_env: Option<&FaultProxy>| {
        let mut cmd = p.odek(&[
            "sandbox",
            "up",
            "--name",
            &name,
            "--sandbox-image",
            BASE_IMAGE,
        ]);
        if let Some(proxy) = extra_env {
            cmd.env("DOCKER_HOST", proxy.docker_host())
                .env("ODEK_DOCKER_TIMEOUT", CALL_TIMEOUT);
        }
        run_timeout(&mut cmd, Duration::from_secs(60))
    };
    let first = up(None);
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    let id = docker(&["inspect", "-f", "{{.Id}}", &name]);
    let proxy = FaultProxy::start(vec![rule(CREATE, 1, Action::DropAfterForward, Then::Relay)]);
    let out = up(Some(&proxy));
    let ctx = context(&out, &proxy);
    let alive = docker_ok(&["container", "inspect", &id])
        && docker(&["inspect", "-f", "{{.State.Running}}", &id]) == "true";
    let _ = p.run_odek(&["sandbox", "down", &name]);
    assert!(proxy.fired(), "{ctx}");
    assert_ne!(out.status.code(), Some(0), "{ctx}");
    assert!(alive, "the running sandbox {name} was removed\n{ctx}");
    assert!(stderr(&out).contains("left alone"), "{ctx}");
    assert!(p.leftovers().is_empty(), "{:?}", p.leftovers());
}

#[test]
fn create_stalls_then_times_out_and_is_removed_by_name() {
    let took = recovers(rule(CREATE, 1, Action::StallAfterForward, Then::Relay), &[]);
    assert!(
        took >= Duration::from_secs(3),
        "no timeout waited: {took:?}"
    );
    assert!(took < Duration::from_secs(30), "took {took:?}");
}

#[test]
fn start_stalls_then_times_out_and_is_removed() {
    let took = recovers(rule(START, 1, Action::StallAfterForward, Then::Relay), &[]);
    assert!(
        took >= Duration::from_secs(3),
        "no timeout waited: {took:?}"
    );
    assert!(took < Duration::from_secs(30), "took {took:?}");
}

#[test]
fn second_connect_stalls_then_times_out_and_is_removed() {
    let took = recovers(rule(CONNECT, 2, Action::Stall, Then::Relay), TWO_CONNECTS);
    assert!(
        took >= Duration::from_secs(3),
        "no timeout waited: {took:?}"
    );
    assert!(took < Duration::from_secs(30), "took {took:?}");
}

#[test]
fn verify_stalls_then_times_out_and_is_removed() {
    let took = recovers(rule(VERIFY, VERIFY_NTH, Action::Stall, Then::Relay), &[]);
    assert!(
        took >= Duration::from_secs(3),
        "no timeout waited: {took:?}"
    );
    assert!(took < Duration::from_secs(30), "took {took:?}");
}

// ---------------------------------------------------------------------------
// The daemon vanishes for good (every later connection refused): odek
// cannot remove; gc on the real socket reaps the orphan after odek exited.
// ---------------------------------------------------------------------------

#[test]
fn daemon_vanishes_after_create() {
    vanishes(rule(CREATE, 1, Action::DropAfterForward, Then::Refuse), &[]);
}

#[test]
fn daemon_vanishes_after_start() {
    vanishes_owned(rule(START, 1, Action::DropAfterForward, Then::Refuse), &[]);
}

#[test]
fn daemon_vanishes_during_second_connect() {
    vanishes_owned(rule(CONNECT, 2, Action::Drop, Then::Refuse), TWO_CONNECTS);
}

#[test]
fn through_the_exec_api_daemon_vanishes_during_the_process_listing() {
    vanishes_owned_in(
        Project::new().with_known_images().exec_api(),
        rule(TOP, 1, Action::Drop, Then::Refuse),
        &[],
    );
}

#[test]
fn daemon_vanishes_during_verify() {
    vanishes_owned(rule(VERIFY, VERIFY_NTH, Action::Drop, Then::Refuse), &[]);
}

// ---------------------------------------------------------------------------
// The daemon stops answering (accepts, never replies): every call times out,
// including the best-effort removal; gc reaps the orphan later.
// ---------------------------------------------------------------------------

#[test]
fn daemon_stops_answering_after_start() {
    let took = vanishes_owned(rule(START, 1, Action::StallAfterForward, Then::Stall), &[]);
    // The start times out, then the removal does: two budgets, not more.
    assert!(took >= Duration::from_secs(6), "took only {took:?}");
    assert!(took < Duration::from_secs(30), "took {took:?}");
}

#[test]
fn daemon_stops_answering_after_create() {
    let took = vanishes(rule(CREATE, 1, Action::StallAfterForward, Then::Stall), &[]);
    assert!(took >= Duration::from_secs(6), "took only {took:?}");
    assert!(took < Duration::from_secs(30), "took {took:?}");
}

// ---------------------------------------------------------------------------
// A daemon that is slow, not gone: the create lands after odek gave up on it
// and already "removed" the container by name.
// ---------------------------------------------------------------------------

#[test]
fn create_that_lands_after_the_timeout_leaves_no_container() {
    let _gc = gc_lock();
    let p = Project::new().with_known_images();
    let proxy = FaultProxy::start(vec![rule(
        CREATE,
        1,
        Action::Delay(Duration::from_secs(5)),
        Then::Relay,
    )]);
    let (out, _took) = run_through(&p, &proxy, &[]);
    assert_daemon_unreachable(&p, &out, &proxy);
    // Give the delayed create time to land.
    assert!(
        proxy.wait_for("DELETE", "/containers/*", 1, Duration::from_secs(10)),
        "no removal attempted:\n{}",
        proxy.transcript()
    );
    std::thread::sleep(Duration::from_secs(4));
    let left = p.leftovers();
    // Whatever happened, gc reaps it (the owner is gone) — check that first
    // so nothing is left even when the assertion below fails.
    if !left.is_empty() {
        let claimed = stderr(&out).contains("the container was removed");
        let _ = p.odek_ok(&["sandbox", "gc"]);
        assert!(p.leftovers().is_empty(), "gc did not reap {left:?}");
        panic!(
            "a create that landed after the timeout left container {left:?} although odek said {}:\n{}",
            if claimed {
                "\"the container was removed\""
            } else {
                "nothing about it"
            },
            context(&out, &proxy)
        );
    }
}

// ---------------------------------------------------------------------------
// The daemon lost while the command runs: an error, never a retry on the
// host (the marker command would create the host file).
// ---------------------------------------------------------------------------

/// Runs the marker command with the exec start's answer lost (the exec
/// API's path: a supervised sandbox's commands go over its owner's
/// attachment); returns the output after checking the common expectations.
fn lost_at_exec_start(then: Then) -> (Project, Output) {
    let p = Project::new().with_known_images().exec_api();
    let proxy = FaultProxy::start(vec![Rule::new(
        "POST",
        "/exec/*/start",
        1,
        Action::DropAfterForward,
        then,
    )]);
    let (out, took) = run_through(&p, &proxy, &[]);
    let ctx = context(&out, &proxy);
    assert!(proxy.fired(), "the fault never fired:\n{ctx}");
    // The command had started: 255 ("it may have partly run"), never 125.
    assert_eq!(out.status.code(), Some(255), "{ctx}");
    assert!(
        stderr(&out).contains("error (daemon-unreachable)"),
        "not reported as daemon-unreachable:\n{ctx}"
    );
    assert!(!p.marker().exists(), "the command ran on the host\n{ctx}");
    assert_eq!(
        proxy.count("POST", "/containers/*/exec"),
        1,
        "the command was run again\n{ctx}"
    );
    assert!(took < Duration::from_secs(30), "took {took:?}\n{ctx}");
    drop(proxy);
    (p, out)
}

#[test]
fn through_the_exec_api_exec_stream_lost_is_an_error_and_the_container_is_removed() {
    let (p, out) = lost_at_exec_start(Then::Relay);
    assert!(
        p.leftovers().is_empty(),
        "container left: {:?}\n{}",
        p.leftovers(),
        stderr(&out)
    );
}

#[test]
fn through_the_exec_api_daemon_vanishes_during_exec_orphan_reaped_by_gc() {
    let _gc = gc_lock();
    let (p, out) = lost_at_exec_start(Then::Refuse);
    let left = p.leftovers();
    assert_eq!(left.len(), 1, "{left:?}\n{}", stderr(&out));
    let gc = p.odek_ok(&["sandbox", "gc"]);
    assert!(
        wait_until(Duration::from_secs(5), || p.leftovers().is_empty()),
        "gc did not reap {left:?}:\n{}{}",
        stdout(&gc),
        stderr(&gc)
    );
}

// ---------------------------------------------------------------------------
// Implicit mode (no `--sandbox`, no networks): an unreachable daemon would
// fall back to the host, but one lost *after* it answered the ping is
// fatal — the command never runs on the host.
// ---------------------------------------------------------------------------

fn implicit_mode_lost_at(rule: Rule) {
    let p = Project::new().with_known_images();
    let proxy = FaultProxy::start(vec![rule]);
    let mut cmd = p.odek(&[
        "run",
        "--sandbox-image",
        BASE_IMAGE,
        "--",
        "sh",
        "-c",
        &p.marker_cmd(),
    ]);
    cmd.env("DOCKER_HOST", proxy.docker_host())
        .env("ODEK_DOCKER_TIMEOUT", CALL_TIMEOUT);
    let out = run_timeout(&mut cmd, Duration::from_secs(60));
    assert_daemon_unreachable(&p, &out, &proxy);
    assert!(
        !stderr(&out).contains("NO SANDBOX"),
        "fell back to the host:\n{}",
        context(&out, &proxy)
    );
    assert!(p.leftovers().is_empty(), "{:?}", p.leftovers());
}

#[test]
fn implicit_mode_daemon_vanishing_at_the_image_step_is_fatal_not_a_fallback() {
    implicit_mode_lost_at(rule(("GET", "/images/**"), 1, Action::Drop, Then::Refuse));
}

#[test]
fn implicit_mode_daemon_stalling_at_create_is_fatal_not_a_fallback() {
    implicit_mode_lost_at(rule(CREATE, 1, Action::StallAfterForward, Then::Relay));
}

#[test]
fn proxy_counts_each_request_of_a_keep_alive_connection() {
    odek_e2e::fixture();
    let proxy = FaultProxy::observer();
    // curl reuses one connection for several URLs (HTTP/1.1 keep-alive).
    let out = odek_e2e::run(std::process::Command::new("curl").args([
        "-sS",
        "--max-time",
        "20",
        "--unix-socket",
        &proxy.path().display().to_string(),
        "http://localhost/v1.41/version",
        "http://localhost/_ping",
        "http://localhost/v1.41/containers/json?all=1",
    ]));
    assert!(out.status.success(), "curl failed: {}", stderr(&out));
    let body = stdout(&out);
    assert!(body.contains("ApiVersion") && body.contains("OK"), "{body}");
    let seen = proxy.seen();
    let paths: Vec<&str> = seen.iter().map(|s| s.path.as_str()).collect();
    assert_eq!(
        paths,
        ["/version", "/_ping", "/containers/json"],
        "{seen:?}"
    );
    assert!(
        seen.iter().all(|s| s.conn == seen[0].conn),
        "expected one reused connection: {seen:?}"
    );
}
