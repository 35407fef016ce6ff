//! `odek approve` (SPEC §7): the approval card of a project at a real
//! pseudo-terminal and a stored trust, without running anything or
//! creating any container; a later `odek run` without a terminal then runs
//! on that trust.

use std::process::{Command, Stdio};
use std::time::Duration;

use expectrl::{ControlCode, Expect};
use odek_e2e::fault_proxy::FaultProxy;
use odek_e2e::tty::{finish, trust_card};
use odek_e2e::{run, stderr, stdout, Project, BASE_IMAGE, PROJECT};

const STORE: &str = "project_sandbox_approvals.json";

fn project_file(p: &Project, json: &str) {
    std::fs::write(p.path().join("odek.json"), json).expect("write odek.json");
}

/// `odek approve --sandbox-image BASE_IMAGE` for `p`, its Docker calls
/// through `proxy`.
fn approve_cmd(p: &Project, proxy: &FaultProxy, extra: &[&str]) -> Command {
    let mut args = vec!["approve", "--sandbox-image", BASE_IMAGE];
    args.extend_from_slice(extra);
    let mut c = p.odek(&args);
    c.env("DOCKER_HOST", proxy.docker_host());
    c
}

/// Asserts that `proxy` saw requests (so it was used) and that every one
/// only read: no container, exec, pull, build or network was created.
fn only_reads(proxy: &FaultProxy) {
    let seen = proxy.seen();
    assert!(
        !seen.is_empty(),
        "odek approve did not talk to the daemon through the proxy"
    );
    let writes: Vec<String> = seen
        .iter()
        .filter(|s| !matches!(s.method.as_str(), "GET" | "HEAD"))
        .map(|s| format!("{} {}", s.method, s.raw_path))
        .collect();
    assert!(
        writes.is_empty(),
        "odek approve changed something on the daemon: {writes:?}\n{}",
        proxy.transcript()
    );
}

fn redis_ping_without_a_terminal(p: &Project) -> std::process::Output {
    run(p
        .odek(&[
            "run",
            "--sandbox-image",
            BASE_IMAGE,
            "--",
            "redis-cli",
            "-h",
            "redis",
            "ping",
        ])
        .stdin(Stdio::null()))
}

#[test]
fn approve_with_t_stores_the_trust_and_a_run_without_a_terminal_runs() {
    let p = Project::new();
    project_file(
        &p,
        &format!(r#"{{"sandbox_compose_project": "{PROJECT}"}}"#),
    );
    // Before: a run without a terminal is refused and names the fix.
    let before = redis_ping_without_a_terminal(&p);
    odek_e2e::assert_refused(&p, &before, "needs operator approval");
    assert!(
        stderr(&before).contains(&format!("odek approve -C {}", p.path().display())),
        "{}",
        stderr(&before)
    );

    let proxy = FaultProxy::observer();
    let mut s = odek_e2e::tty::spawn(approve_cmd(&p, &proxy, &[]), Duration::from_secs(60));
    let card = trust_card(&mut s);
    assert!(card.contains(&format!("{PROJECT}_backend")), "{card}");
    assert!(card.contains("odek.json"), "{card}");
    s.send_line("t").expect("answer t");
    let (out, code) = finish(s);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("trusted; key"), "{out}");
    assert!(out.contains("nothing ran"), "{out}");
    only_reads(&proxy);
    assert!(p.leftovers().is_empty(), "odek approve left a container");
    let store = std::fs::read_to_string(p.home.path().join(STORE)).expect("store written");
    assert!(store.contains("true"), "{store}");

    // The trust is `odek run`'s: no terminal, no prompt, it runs.
    let after = redis_ping_without_a_terminal(&p);
    assert!(after.status.success(), "{}", stderr(&after));
    assert_eq!(stdout(&after).trim(), "PONG");
    assert!(!stderr(&after).contains("Approve?"), "{}", stderr(&after));

    // Asked again, it says the trust exists (no terminal needed) and
    // changes nothing.
    let again = run(approve_cmd(&p, &proxy, &["--json"]).stdin(Stdio::null()));
    assert!(again.status.success(), "{}", stderr(&again));
    assert!(
        stderr(&again).contains("already trusted"),
        "{}",
        stderr(&again)
    );
    let v: serde_json::Value = serde_json::from_str(&stdout(&again)).expect("JSON");
    assert_eq!(v["status"], "already_trusted", "{v}");
    assert_eq!(v["request"]["trusted"], true, "{v}");
    assert_eq!(
        std::fs::read_to_string(p.home.path().join(STORE)).expect("store"),
        store
    );
}

#[test]
fn a_denial_stores_nothing_and_the_run_still_asks() {
    for answer in ["N", "eof", "once"] {
        let p = Project::new();
        project_file(
            &p,
            &format!(r#"{{"sandbox_compose_project": "{PROJECT}"}}"#),
        );
        let proxy = FaultProxy::observer();
        let mut s = odek_e2e::tty::spawn(
            approve_cmd(&p, &proxy, &["--json"]),
            Duration::from_secs(60),
        );
        trust_card(&mut s);
        if answer == "eof" {
            s.send(ControlCode::EndOfTransmission).expect("send EOF");
        } else {
            s.send_line(answer).expect("answer");
        }
        let (out, code) = finish(s);
        assert_eq!(code, 1, "{answer}: {out}");
        assert!(
            out.contains("not approved: nothing was stored"),
            "{answer}: {out}"
        );
        assert!(out.contains(r#""status": "denied""#), "{answer}: {out}");
        only_reads(&proxy);
        let stored = std::fs::read_to_string(p.home.path().join(STORE)).unwrap_or_default();
        assert!(
            !stored.contains("true"),
            "{answer}: a denial stored {stored}"
        );
        let list = run(&mut p.odek(&["approvals", "list", "--json"]));
        assert_eq!(stdout(&list).trim(), "[]", "{answer}");
        let next = redis_ping_without_a_terminal(&p);
        odek_e2e::assert_refused(&p, &next, "needs operator approval");
    }
}

#[test]
fn without_a_terminal_nothing_is_stored_even_with_the_env_switch() {
    let p = Project::new();
    project_file(
        &p,
        &format!(r#"{{"sandbox_compose_project": "{PROJECT}"}}"#),
    );
    let proxy = FaultProxy::observer();
    let out = run(approve_cmd(&p, &proxy, &["--json"])
        .env("ODEK_APPROVE_PROJECT_SANDBOX", "1")
        .stdin(Stdio::null()));
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("asks at a terminal"), "{err}");
    assert!(err.contains("stores nothing"), "{err}");
    // The way out without a terminal is named.
    assert!(
        err.contains(&format!("odek approve -C {} --yes", p.path().display())),
        "{err}"
    );
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    assert_eq!(v["status"], "no_terminal", "{v}");
    assert!(v["key"].as_str().is_some_and(|k| k.len() == 64), "{v}");
    assert!(!p.home.path().join(STORE).exists(), "a store was written");
    only_reads(&proxy);
    assert!(p.leftovers().is_empty());
}

/// `--yes` without a terminal: the card is printed on stderr, the trust
/// a `t` stores is stored (the same key), nothing is made on the daemon,
/// and a run without a terminal then runs on it.
#[test]
fn yes_without_a_terminal_prints_the_card_and_stores_the_trust() {
    let p = Project::new();
    project_file(
        &p,
        &format!(r#"{{"sandbox_compose_project": "{PROJECT}"}}"#),
    );
    let proxy = FaultProxy::observer();
    // The key a prompt would store: the no-terminal refusal reports it.
    let refused = run(approve_cmd(&p, &proxy, &["--json"]).stdin(Stdio::null()));
    let key = serde_json::from_str::<serde_json::Value>(&stdout(&refused)).expect("JSON")["key"]
        .as_str()
        .expect("key")
        .to_string();
    let out = run(approve_cmd(&p, &proxy, &["--yes", "--json"]).stdin(Stdio::null()));
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&format!("{PROJECT}_backend")),
        "the card: {err}"
    );
    assert!(err.contains("odek.json"), "the card: {err}");
    assert!(err.contains("trusted (--yes); key"), "{err}");
    assert!(
        !err.contains("Trust these settings?"),
        "nobody was asked: {err}"
    );
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    assert_eq!(v["status"], "trusted", "{v}");
    assert_eq!(v["key"], key.as_str(), "{v}");
    only_reads(&proxy);
    assert!(p.leftovers().is_empty(), "odek approve left a container");
    let list = run(&mut p.odek(&["approvals", "list", "--json"]));
    assert!(stdout(&list).contains(&key), "{}", stdout(&list));
    let after = redis_ping_without_a_terminal(&p);
    assert!(after.status.success(), "{}", stderr(&after));
    assert_eq!(stdout(&after).trim(), "PONG");
}

#[test]
fn a_project_that_asks_for_nothing_needs_no_approval() {
    let p = Project::new();
    let out = run(p
        .odek(&["approve", "--sandbox-image", BASE_IMAGE, "--json"])
        .stdin(Stdio::null()));
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("nothing to approve"),
        "{}",
        stderr(&out)
    );
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    assert_eq!(v["status"], "not_needed", "{v}");
    assert!(v["request"].is_null(), "{v}");
    assert!(!p.home.path().join(STORE).exists());
    // --no-sandbox reviews nothing: a usage error, not "nothing to approve".
    project_file(&p, r#"{"sandbox_env": {"X": "1"}}"#);
    let off = run(p.odek(&["approve", "--no-sandbox"]).stdin(Stdio::null()));
    assert_eq!(off.status.code(), Some(2), "{}", stderr(&off));
    assert!(stderr(&off).contains("--no-sandbox"), "{}", stderr(&off));
}
