//! The main job (SPEC §12): a sandbox on a real Compose project reaches its
//! services by name.

use odek_e2e::{stderr, stdout, Project, BASE_IMAGE, PROJECT};

#[test]
fn compose_project_services_answer_by_name() {
    let p = Project::new();
    let out = odek_e2e::run(&mut p.odek(&[
        "run",
        "--sandbox-compose",
        PROJECT,
        "--sandbox-image",
        BASE_IMAGE,
        "--",
        "sh",
        "-c",
        "redis-cli -h redis ping && pg_isready -h postgres",
    ]));
    let (o, e) = (stdout(&out), stderr(&out));
    assert!(out.status.success(), "stdout:\n{o}\nstderr:\n{e}");
    assert!(o.contains("PONG"), "{o}");
    assert!(o.contains("accepting connections"), "{o}");
    let line = e
        .lines()
        .find(|l| l.starts_with("odek: sandbox "))
        .unwrap_or_else(|| panic!("no startup line in:\n{e}"));
    assert!(line.contains("network=attached"), "{line}");
    assert!(line.contains("pids=4096"), "{line}");
    assert!(line.contains(&format!("image={BASE_IMAGE}")), "{line}");
    assert!(line.contains(&format!("{PROJECT}_backend")), "{line}");
    assert!(line.contains(&format!("{PROJECT}_default")), "{line}");
    assert!(p.leftovers().is_empty(), "container left behind");
}
