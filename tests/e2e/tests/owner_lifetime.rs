//! Owner lifetime (SPEC §6.1) with the real engine: a sandbox launched by
//! `odek run` is removed by the engine itself when its owner dies by
//! SIGKILL — no gc, no cleanup in the dead process — while a detached one
//! (`odek sandbox up`) outlives its creator until `odek sandbox down`.

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::time::Duration;

use odek_e2e::{docker, docker_ok, stdout, Project, BASE_IMAGE};

/// How long the engine may take to remove a dead owner's sandbox.
const GONE_WITHIN: Duration = Duration::from_secs(10);

/// `odek run -- sleep 300` in `p`, returned once its startup line shows
/// (the sandbox is up and the command runs in it).
fn run_long(p: &Project) -> Child {
    let mut child = p
        .odek(&["run", "--sandbox-image", BASE_IMAGE, "--", "sleep", "300"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn odek run");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut seen = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let up = line.starts_with("odek: sandbox ");
            seen.push_str(&line);
            seen.push('\n');
            if up {
                let _ = tx.send(Ok(()));
            }
        }
        let _ = tx.send(Err(seen));
    });
    match rx.recv_timeout(Duration::from_secs(120)) {
        Ok(Ok(())) => child,
        Ok(Err(seen)) => panic!("odek run ended before its sandbox was up:\n{seen}"),
        Err(_) => {
            let _ = child.kill();
            panic!("no startup line within 120 s")
        }
    }
}

/// SIGKILLs `child` and reaps it.
fn sigkill(mut child: Child) {
    child.kill().expect("SIGKILL"); // std's kill is SIGKILL
    let _ = child.wait();
}

#[test]
fn sigkill_of_odek_run_leaves_no_sandbox_without_gc() {
    let p = Project::new();
    let child = run_long(&p);
    let ids = p.leftovers();
    assert_eq!(ids.len(), 1, "one sandbox runs: {ids:?}");
    sigkill(child);
    let gone = odek_e2e::wait_until(GONE_WITHIN, || p.leftovers().is_empty());
    assert!(
        gone,
        "{} s after SIGKILL of `odek run`, its sandbox {:?} is still there (no gc was run)",
        GONE_WITHIN.as_secs(),
        p.leftovers()
    );
}

#[test]
fn a_detached_sandbox_outlives_its_creator_and_an_owned_one_does_not() {
    let p = Project::new();
    let name = odek_e2e::unique("odek-owner");
    p.odek_ok(&[
        "sandbox",
        "up",
        "--sandbox-image",
        BASE_IMAGE,
        "--name",
        &name,
    ]);
    // The creator has exited; an owned sandbox next to it loses its owner.
    let owned = run_long(&p);
    assert_eq!(p.leftovers().len(), 2, "{:?}", p.leftovers());
    sigkill(owned);
    let only_detached = odek_e2e::wait_until(GONE_WITHIN, || p.sandboxes().len() == 1);
    assert!(
        only_detached,
        "the owned sandbox outlived its owner: {:?}",
        p.leftovers()
    );
    // A few more seconds: the detached one keeps running, and works.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        docker(&["inspect", "-f", "{{.State.Running}}", &name]),
        "true",
        "the detached sandbox stopped"
    );
    let out = p.odek_ok(&["sandbox", "exec", &name, "--", "echo", "still here"]);
    assert_eq!(stdout(&out).trim(), "still here");
    p.odek_ok(&["sandbox", "down", &name]);
    assert!(
        !docker_ok(&["container", "inspect", &name]),
        "{name} still exists after `sandbox down`"
    );
    assert!(p.leftovers().is_empty(), "{:?}", p.leftovers());
}
