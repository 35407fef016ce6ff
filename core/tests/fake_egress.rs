//! Egress mode (SPEC §4.5) against the fake engine: the proxy's launch and
//! its refusals, and which project egress settings need approval.
//!
//! The launch: odek starts `<sandbox>-egress` on the sandbox's link network
//! and the egress network before the sandbox exists, and goes on only when
//! the proxy's log says `odek-egress ready policy=<the hash of the policy
//! odek wrote>` within 10 s and the proxy is on exactly those two
//! networks. Otherwise the launch is refused (docker-rejected), nothing
//! runs, and the proxy and the link network are removed. The fake prints
//! the true ready line unless [`Quirks::egress_ready`] says otherwise.
//!
//! Approval (SPEC §4.5 "Precedence", §7): a project's `sandbox_egress`
//! needs none when every entry is covered by the user config's list (it
//! only narrows); one that widens it, or sets `sandbox_egress_network`,
//! needs approval.
//!
//! The proxy's binary comes from `ODEK_EGRESS_BIN`, which these tests
//! point at a minimal static ELF header (the fake runs nothing).

mod common;

use std::sync::OnceLock;

use common::*;
use odek_core::engine::{EndpointInfo, FakeEngine, Op, Quirks};
use odek_core::{FailureClass, LaunchOptions, Sandbox};

/// Points `ODEK_EGRESS_BIN` at a file odek accepts as a static executable
/// (an ELF header without program headers), once per test process.
fn egress_bin() {
    static BIN: OnceLock<tempfile::TempDir> = OnceLock::new();
    let dir = BIN.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut elf = vec![0u8; 64];
        elf[..4].copy_from_slice(b"\x7fELF");
        elf[4] = 2; // 64-bit
        elf[5] = 1; // little-endian
        elf[6] = 1; // ELF version
        elf[16] = 2; // ET_EXEC
        elf[54] = 56; // e_phentsize; e_phnum 0: no PT_INTERP
        std::fs::write(dir.path().join("odek-egress"), &elf).expect("write the fake binary");
        // Every test of this process sets the same value.
        std::env::set_var("ODEK_EGRESS_BIN", dir.path().join("odek-egress"));
        dir
    });
    assert!(dir.path().join("odek-egress").exists());
}

/// `--sandbox-egress` with `allow` on `s`.
fn egress(s: Setup, allow: &[&str]) -> Setup {
    egress_bin();
    let v: Vec<String> = allow.iter().map(|a| a.to_string()).collect();
    s.flag("sandbox_egress", "--sandbox-egress", |l| {
        l.sandbox_egress = Some(v)
    })
}

/// The proxy containers that exist now (labelled `dev.odek.egress`).
fn proxies(fake: &FakeEngine) -> Vec<String> {
    fake.containers()
        .into_iter()
        .filter(|id| {
            fake.container(id)
                .is_some_and(|c| c.labels.contains_key(odek_core::egress::EGRESS_LABEL))
        })
        .collect()
}

/// Names of the containers created (image probes left out), in order.
fn created(fake: &FakeEngine) -> Vec<String> {
    fake.calls_of(Op::CreateContainer)
        .into_iter()
        .map(|c| c.arg)
        .collect()
}

/// Asserts the refusal of an egress launch: docker-rejected, naming the
/// proxy and `why`; the only container ever created was the proxy (the
/// sandbox never existed, no exec ran), and no container (proxy included)
/// nor link network is left.
#[track_caller]
fn assert_proxy_refused(s: &Setup, err: &odek_core::Error, why: &str) {
    assert_refused(
        s,
        err,
        FailureClass::DockerRejected,
        "the egress proxy (sandbox_egress) could not be started",
    );
    let msg = err.to_string();
    assert!(msg.contains(why), "the refusal does not say {why:?}: {msg}");
    assert!(msg.contains("never falls back to open egress"), "{msg}");
    let made = created(&s.fake);
    assert_eq!(made.len(), 1, "only the proxy is created: {made:?}");
    assert!(made[0].ends_with("-egress"), "{made:?}");
    assert!(s.fake.calls_of(Op::Exec).is_empty(), "something ran");
    assert!(proxies(&s.fake).is_empty(), "the proxy is left");
    assert!(
        s.fake.containers().is_empty(),
        "left: {:?}",
        s.fake.containers()
    );
    assert!(
        s.fake.link_networks().is_empty(),
        "the link network is left"
    );
}

/// A setup in egress mode whose proxy prints `ready` instead of its ready
/// line.
fn proxy_says(ready: &str) -> Setup {
    let s = egress(Setup::new(), &["allowed.test"]);
    s.fake.set_quirks(Quirks {
        egress_ready: Some(ready.into()),
        ..Quirks::default()
    });
    s
}

/// Positive control for the refusals below: a proxy that says the hash of
/// its policy, on the link and egress networks, lets the launch go; the
/// sandbox is on its link network only and its proxy variables name the
/// proxy's address there; closing the sandbox removes the proxy and the
/// link network.
#[tokio::test]
async fn a_proxy_that_proves_its_policy_lets_the_launch_go() {
    let s = egress(Setup::new(), &["allowed.test"]);
    let plan = s.resolve().await.expect("resolve");
    assert!(plan.egress.is_some());
    let sb: Sandbox = s.launch(&plan).await.expect("launch");
    let link = s.link_id(&sb.name);
    let [proxy] = proxies(&s.fake).try_into().expect("one proxy");
    let p = s.fake.container(&proxy).expect("the proxy");
    assert_eq!(p.name, format!("{}-egress", sb.name));
    let mut nets: Vec<&str> = p.endpoints.iter().map(|e| e.network_id.as_str()).collect();
    nets.sort_unstable();
    let bridge = s.fake.network_id("bridge").expect("the default bridge");
    let mut want = vec![link.as_str(), bridge.as_str()];
    want.sort_unstable();
    assert_eq!(nets, want, "the proxy's networks");
    let me = s
        .fake
        .container(&sb.container_id.clone().expect("container"))
        .expect("the sandbox");
    let sandbox_nets: Vec<&str> = me.endpoints.iter().map(|e| e.network_id.as_str()).collect();
    assert_eq!(sandbox_nets, vec![link.as_str()], "the sandbox's networks");
    let ip = &p
        .endpoints
        .iter()
        .find(|e| e.network_id == link)
        .expect("on the link")
        .ip;
    assert!(
        me.env.contains(&format!("https_proxy=http://{ip}:3128")),
        "{:?}",
        me.env
    );
    s.odek.close(&sb).await.expect("close");
    assert!(proxies(&s.fake).is_empty(), "the proxy is left");
    assert!(
        s.fake.link_networks().is_empty(),
        "the link network is left"
    );
}

/// A proxy that never prints its ready line: refused after the 10 s
/// budget.
#[tokio::test]
async fn a_proxy_without_a_ready_line_is_refused_and_removed() {
    let s = proxy_says("odek-egress starting\n");
    let started = std::time::Instant::now();
    let err = s.up().await.expect_err("refused");
    assert!(
        started.elapsed() >= odek_core::egress::READY_BUDGET,
        "refused before the budget: {:?}",
        started.elapsed()
    );
    assert_proxy_refused(&s, &err, "no ready line within 10 s");
}

/// A proxy that says it serves another policy (another hash): refused at
/// once.
#[tokio::test]
async fn a_proxy_reporting_another_policy_hash_is_refused_and_removed() {
    let other = "0".repeat(64);
    let s = proxy_says(&format!("odek-egress ready policy={other} port=3128\n"));
    let err = s.up().await.expect_err("refused");
    assert_proxy_refused(
        &s,
        &err,
        &format!("it reports policy {other}, not the one odek wrote"),
    );
}

/// A proxy that ends before it is ready (an owned one is auto-removed as
/// it ends): refused.
#[tokio::test]
async fn a_proxy_that_exits_before_it_is_ready_is_refused_and_removed() {
    let (s, spy) = spied();
    let s = egress(s, &["allowed.test"]);
    s.fake.set_quirks(Quirks {
        egress_ready: Some(String::new()),
        ..Quirks::default()
    });
    // The first start is the proxy's (the sandbox is created after it).
    spy.after_call(Op::StartContainer, |fake| {
        for id in proxies(fake) {
            fake.exit_container(&id, 3);
        }
    });
    let err = s.up().await.expect_err("refused");
    assert_proxy_refused(&s, &err, "its container ended before it was ready");
}

/// A proxy the engine left off the egress network (connect answered OK,
/// nothing joined): on one network, not the two planned. Refused.
#[tokio::test]
async fn a_proxy_missing_the_egress_network_is_refused_and_removed() {
    let s = egress(Setup::new(), &["allowed.test"]);
    s.fake.set_quirks(Quirks {
        ignore_connect: true,
        ..Quirks::default()
    });
    let err = s.up().await.expect_err("refused");
    assert_proxy_refused(&s, &err, "its container is not as created");
}

/// A proxy on a third network besides the two planned (connected behind
/// odek's back while it started): refused.
#[tokio::test]
async fn a_proxy_on_a_third_network_is_refused_and_removed() {
    let (s, spy) = spied();
    let s = egress(s, &["allowed.test"]);
    // The first connect is the proxy's to the egress network; right after
    // it, the proxy shows one more network.
    spy.after_call(Op::ConnectNetwork, |fake| {
        for id in proxies(fake) {
            fake.update_container(&id, |c| {
                c.endpoints.push(EndpointInfo {
                    network_name: SHOP_DEFAULT.into(),
                    network_id: SHOP_DEFAULT_ID.into(),
                    aliases: Vec::new(),
                    endpoint_id: hex_id("3d"),
                    ip: "10.99.0.5".into(),
                })
            });
        }
    });
    let err = s.up().await.expect_err("refused");
    assert_proxy_refused(&s, &err, "its container is not as created");
}

// ---- Approval of a project's egress settings (SPEC §4.5 "Precedence") ----

/// The user's list: what a project may narrow without approval.
const USER: &str =
    r#"{"sandbox_egress": ["pypi.org", "*.githubusercontent.com", "example.test:8443"]}"#;

/// The knobs the project needs approval for (empty: none).
async fn knobs(s: &Setup) -> Vec<String> {
    let plan = s.resolve().await.expect("resolve");
    plan.approval
        .map(|a| a.knobs.iter().map(|k| k.to_string()).collect())
        .unwrap_or_default()
}

/// A project list whose every entry a user entry covers needs no
/// approval, and the launch goes with the project's (narrower) list.
#[tokio::test]
async fn a_project_list_that_only_narrows_the_users_needs_no_approval() {
    egress_bin();
    for project in [
        r#"["pypi.org"]"#,
        r#"["pypi.org:443"]"#,
        r#"["raw.githubusercontent.com", "a.b.githubusercontent.com:443"]"#,
        r#"["example.test:8443"]"#,
        r#"[]"#,
    ] {
        let s = Setup::new()
            .user_config(USER)
            .project_config(&format!(r#"{{"sandbox_egress": {project}}}"#));
        assert_eq!(knobs(&s).await, Vec::<String>::new(), "{project}");
        let plan = s.resolve().await.expect("resolve");
        let egress = plan.egress.clone().expect("egress mode");
        let want: Vec<String> = serde_json::from_str::<Vec<String>>(project)
            .expect("list")
            .into_iter()
            .collect();
        assert_eq!(egress.allow, want, "the project's list applies");
        s.launch(&plan)
            .await
            .unwrap_or_else(|e| panic!("{project}: a narrowing list launches unapproved: {e}"));
    }
}

/// An empty project list while the operator has none (egress mode off)
/// only takes the way out away: it needs no approval and the launch goes
/// in egress mode with nothing allowed.
#[tokio::test]
async fn an_empty_project_list_without_a_users_needs_no_approval() {
    egress_bin();
    let s = Setup::new().project_config(r#"{"sandbox_egress": []}"#);
    assert_eq!(knobs(&s).await, Vec::<String>::new());
    let plan = s.resolve().await.expect("resolve");
    assert!(plan.approval.is_none(), "{:?}", plan.approval);
    let egress = plan.egress.clone().expect("egress mode");
    assert!(egress.allow.is_empty(), "{:?}", egress.allow);
    s.launch(&plan)
        .await
        .unwrap_or_else(|e| panic!("an empty list launches unapproved: {e}"));
}

/// A project list with any entry the user's does not cover needs
/// approval, as does one when the user has no list at all; without it the
/// launch is refused before the engine is touched.
#[tokio::test]
async fn a_project_list_that_widens_the_users_needs_approval() {
    egress_bin();
    for (user, project) in [
        (Some(USER), r#"["pypi.org", "evil.test"]"#),
        // Another port of a listed host.
        (Some(USER), r#"["pypi.org:8080"]"#),
        // The parent of a wildcard is not below it.
        (Some(USER), r#"["githubusercontent.com"]"#),
        // A wildcard wider than a listed host.
        (
            Some(r#"{"sandbox_egress": ["raw.githubusercontent.com"]}"#),
            r#"["*.githubusercontent.com"]"#,
        ),
        // No user list: nothing to narrow.
        (None, r#"["pypi.org"]"#),
    ] {
        let mut s = Setup::new();
        if let Some(u) = user {
            s = s.user_config(u);
        }
        let s = s.project_config(&format!(r#"{{"sandbox_egress": {project}}}"#));
        assert_eq!(
            knobs(&s).await,
            vec!["sandbox_egress".to_string()],
            "{user:?} / {project}"
        );
        let plan = s.resolve().await.expect("resolve");
        let req = plan.approval.clone().expect("approval needed");
        assert!(req.egress.is_some(), "the card lists the project's egress");
        let err = s
            .odek
            .launch(&plan, &LaunchOptions::default(), &s.reporter)
            .await
            .expect_err("an unapproved widening launches");
        assert_eq!(err.class(), FailureClass::Config, "{err}");
        assert!(err.to_string().contains("needs operator approval"), "{err}");
        assert!(s.fake.no_mutation(), "{:?}", s.mutations());
    }
}

/// A project's `sandbox_egress_network` needs approval, even with a list
/// that only narrows (the list itself then needs none).
#[tokio::test]
async fn a_project_egress_network_always_needs_approval() {
    egress_bin();
    let s = Setup::new()
        .user_config(USER)
        .project_config(r#"{"sandbox_egress": ["pypi.org"], "sandbox_egress_network": "bridge"}"#);
    assert_eq!(knobs(&s).await, vec!["sandbox_egress_network".to_string()]);
    let plan = s.resolve().await.expect("resolve");
    let req = plan.approval.clone().expect("approval needed");
    assert_eq!(req.egress, None, "the narrowing list is not asked about");
    assert_eq!(req.egress_network.as_deref(), Some("bridge"));
    // The same network from the user's config needs nothing.
    let s = Setup::new()
        .user_config(r#"{"sandbox_egress": ["pypi.org"], "sandbox_egress_network": "bridge"}"#)
        .project_config(r#"{"sandbox_egress": ["pypi.org"]}"#);
    assert_eq!(knobs(&s).await, Vec::<String>::new());
}
