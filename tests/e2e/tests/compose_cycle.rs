//! A Compose project goes `down` and `up` while a sandbox reaching it is
//! open (SPEC §4.4): the sandbox holds no endpoint on the project's
//! networks, so `docker-compose down` succeeds (it used to fail with
//! "network … has active endpoints"), and after `up` the next command
//! reaches the new service containers by name. A project whose `odek.json`
//! asked for the networks needs their new IDs approved first; until then
//! the command is refused and nothing runs.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use expectrl::Expect;

use odek_e2e::tty::{finish, spawn, trust_card};
use odek_e2e::{
    docker_ok, repo, run, stderr, stdout, unique, Project, BASE_IMAGE, IMAGE_PREFIX, TEST_NS,
};

/// How many down/up rounds the sandbox must survive (each must pass).
const ROUNDS: usize = 3;

/// A Compose project of the fixture under its own name, taken down (with
/// its volumes) on drop.
struct Compose {
    name: String,
}

impl Compose {
    /// Starts the fixture as project `odekcycle<ns>…` (this checkout's
    /// namespace) and waits until healthy.
    fn up() -> Compose {
        odek_e2e::fixture();
        let c = Compose {
            name: unique(&format!("odekcycle{TEST_NS}")),
        };
        c.start();
        c
    }

    fn script(name: &str) -> PathBuf {
        repo().join("tests/fixtures/compose").join(name)
    }

    /// `up.sh P`: `docker-compose up -d`, then waits for healthy.
    fn start(&self) {
        let out = run(Command::new("bash")
            .arg(Compose::script("up.sh"))
            .arg(&self.name)
            .env("ODEK_TEST_NS", TEST_NS));
        assert!(
            out.status.success(),
            "up.sh {} failed: {}",
            self.name,
            stderr(&out)
        );
    }

    /// `docker-compose -p P -f …/docker-compose.yml down`, as an operator
    /// types it (no `-v`, no `--remove-orphans`).
    fn down(&self) -> Output {
        run(Command::new("docker-compose")
            .args([
                "-p",
                &self.name,
                "-f",
                &Compose::script("docker-compose.yml").display().to_string(),
                "down",
            ])
            .env("ODEK_TEST_NS", TEST_NS)
            .env("ODEK_TEST_IMAGES", IMAGE_PREFIX))
    }
}

impl Drop for Compose {
    fn drop(&mut self) {
        let _ = run(Command::new("bash")
            .arg(Compose::script("down.sh"))
            .arg(&self.name)
            .env("ODEK_TEST_NS", TEST_NS));
    }
}

/// `odek sandbox up` for `p` on project `compose`, with `env`; returns the
/// sandbox's name.
fn sandbox_up(p: &Project, args: &[&str], env: &[(&str, &str)]) -> String {
    let mut all = vec!["sandbox", "up", "--sandbox-image", BASE_IMAGE];
    all.extend_from_slice(args);
    let out = p.run_odek_env(env, &all);
    assert!(
        out.status.success(),
        "sandbox up failed: {}\n{}",
        stderr(&out),
        stdout(&out)
    );
    stdout(&out).trim().to_string()
}

/// Whether sandbox `name` reaches redis and postgres by name now: `None`
/// when it does, else what it saw.
fn reaches_services(p: &Project, name: &str) -> Option<String> {
    let redis = p.run_odek(&[
        "sandbox",
        "exec",
        name,
        "--",
        "redis-cli",
        "-h",
        "redis",
        "ping",
    ]);
    let pg = p.run_odek(&[
        "sandbox",
        "exec",
        name,
        "--",
        "pg_isready",
        "-h",
        "postgres",
    ]);
    if redis.status.success() && stdout(&redis).trim() == "PONG" && pg.status.success() {
        return None;
    }
    Some(format!(
        "redis-cli ({:?}): {}{}\npg_isready ({:?}): {}{}",
        redis.status.code(),
        stdout(&redis),
        stderr(&redis),
        pg.status.code(),
        stdout(&pg),
        stderr(&pg)
    ))
}

/// Asserts the Compose `down` exited 0 and removed its networks: no
/// endpoint of the sandbox held them.
fn assert_down(compose: &Compose, round: usize) {
    let out = compose.down();
    assert!(
        out.status.success() && !stderr(&out).contains("active endpoints"),
        "round {round}: docker-compose down exited {:?} with a sandbox open:\n{}",
        out.status.code(),
        stderr(&out)
    );
    for net in ["default", "backend"] {
        assert!(
            !docker_ok(&["network", "inspect", &format!("{}_{net}", compose.name)]),
            "round {round}: {}_{net} is still there after down",
            compose.name
        );
    }
}

#[test]
fn compose_down_and_up_with_a_sandbox_open_every_round() {
    let compose = Compose::up();
    let p = Project::new();
    let name = sandbox_up(&p, &["--sandbox-compose", &compose.name], &[]);
    let link = format!("{name}-link");
    // Positive control: before any down, it reaches both services through
    // its link network.
    assert_eq!(odek_e2e::reached_network_ids(&name).len(), 2);
    assert_eq!(reaches_services(&p, &name), None, "before any down");

    let mut failed = Vec::new();
    for round in 1..=ROUNDS {
        assert_down(&compose, round);
        compose.start();
        // The first command after `up` connects the new containers and
        // says so on stderr, naming them.
        let first = p.run_odek(&["sandbox", "exec", &name, "--", "true"]);
        let said = stderr(&first);
        if !(said.contains("to the sandbox's network again") && said.contains("redis")) {
            failed.push(format!(
                "round {round}: the first exec after up did not say what it connected: {said}"
            ));
        }
        if let Some(seen) = reaches_services(&p, &name) {
            failed.push(format!("round {round}: {seen}"));
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {ROUNDS} rounds reached redis and postgres:\n{}",
        ROUNDS - failed.len(),
        failed.join("\n")
    );

    assert!(docker_ok(&["network", "inspect", &link]), "{link} exists");
    p.odek_ok(&["sandbox", "down", &name]);
    assert!(
        !docker_ok(&["container", "inspect", &name]),
        "{name} is gone"
    );
    assert!(
        !docker_ok(&["network", "inspect", &link]),
        "{link} is left after `sandbox down`"
    );
}

#[test]
fn recreated_project_networks_need_approval_then_odek_approve_lets_exec_run() {
    let compose = Compose::up();
    let p = Project::new();
    std::fs::write(
        p.path().join("odek.json"),
        format!(r#"{{"sandbox_compose_project": "{}"}}"#, compose.name),
    )
    .expect("write odek.json");
    let name = sandbox_up(&p, &[], &[("ODEK_APPROVE_PROJECT_SANDBOX", "1")]);
    // Positive control: nothing changed, so no approval is needed again.
    assert_eq!(reaches_services(&p, &name), None, "before the down");

    assert_down(&compose, 1);
    compose.start();

    // The new networks are not approved: refused, nothing ran.
    let marker = p.path().join("ran-in-sandbox");
    let touch = "touch /workspace/ran-in-sandbox; redis-cli -h redis ping";
    let refused = run(p
        .odek(&["sandbox", "exec", &name, "--", "sh", "-c", touch])
        .stdin(Stdio::null()));
    assert!(
        !refused.status.success(),
        "exec ran on unapproved recreated networks: {}",
        stdout(&refused)
    );
    assert!(
        stderr(&refused).contains(&format!("odek approve -C {}", p.path().display())),
        "the refusal names `odek approve`: {}",
        stderr(&refused)
    );
    assert!(!marker.exists(), "the refused command ran");

    // The operator approves the new set (a stored trust)...
    let mut s = spawn(
        p.odek(&["approve", "--sandbox-image", BASE_IMAGE]),
        Duration::from_secs(60),
    );
    let card = trust_card(&mut s);
    assert!(
        card.contains(&format!("{}_backend", compose.name)),
        "{card}"
    );
    s.send_line("t").expect("answer t");
    let (out, code) = finish(s);
    assert_eq!(code, 0, "odek approve: {out}");

    // ...and the same exec, still without the variable, runs.
    let ok = run(p
        .odek(&["sandbox", "exec", &name, "--", "sh", "-c", touch])
        .stdin(Stdio::null()));
    assert!(
        ok.status.success() && stdout(&ok).trim() == "PONG",
        "after odek approve ({:?}): {}{}",
        ok.status.code(),
        stdout(&ok),
        stderr(&ok)
    );
    assert!(marker.exists(), "the approved command ran");
    assert_eq!(reaches_services(&p, &name), None, "after odek approve");
    p.odek_ok(&["sandbox", "down", &name]);
}
