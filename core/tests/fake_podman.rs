//! Podman's API service (SPEC §6.2.3) against the fake engine: an engine
//! that says it is Podman is named with the endpoint; a sandbox that
//! reaches networks is refused before anything is created, naming what
//! Podman lacks, after the network rules of §4.1; a sandbox without
//! networks runs; an approval binds the endpoint, not an ID.

mod common;

use common::*;
use odek_core::engine::EngineSecurity;
use odek_core::FailureClass;

fn podman(s: &Setup) {
    s.fake.set_security(EngineSecurity {
        runtimes: vec!["crun".into(), "runc".into()],
        default_runtime: Some("runc".into()),
        podman: Some("4.3.1".into()),
        ..EngineSecurity::default()
    });
}

#[tokio::test]
async fn a_compose_project_on_podman_is_refused_naming_what_it_lacks() {
    let s = Setup::new().compose(PROJECT);
    podman(&s);
    let e = s.resolve().await.expect_err("refused on Podman");
    assert_refused_before_create(&s, &e, FailureClass::Config, "which is Podman 4.3.1");
    let msg = e.to_string();
    for needle in [
        "sandbox_compose_project",
        "--sandbox-compose",
        "nothing was created",
        "inhibit_ipv4",
        "enable_icc",
    ] {
        assert!(msg.contains(needle), "{needle:?} not in: {msg}");
    }
    // The network rules come first: an unknown project is that refusal.
    let s = Setup::new().compose("nosuch");
    podman(&s);
    let e = s.resolve().await.expect_err("not running");
    assert_refused_before_create(&s, &e, FailureClass::Config, "is not running");
}

#[tokio::test]
async fn without_networks_podman_runs_named_and_bound_by_its_endpoint() {
    let s = Setup::new();
    podman(&s);
    let plan = s.resolve().await.expect("resolve");
    let endpoint = plan.endpoint.clone().expect("endpoint");
    assert!(endpoint.ends_with(" [Podman 4.3.1]"), "{endpoint}");
    let sb = s.launch(&plan).await.expect("launch");
    assert!(
        sb.startup_line().contains("[Podman 4.3.1]"),
        "{}",
        sb.startup_line()
    );
}
