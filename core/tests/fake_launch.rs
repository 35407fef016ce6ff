//! Launch against the fake engine (SPEC §5, §6): what every container gets,
//! each Docker call failing in turn (no container left), verification of
//! what the engine applied, create warnings, the image paths (pinned
//! default, pull, digest, fallback) and the startup line.

mod common;

use common::*;
use odek_core::engine::{EngineErrorKind, FakeImage, Fault, Op, Quirks};
use odek_core::error::Removal;
use odek_core::image::pinned_default;
use odek_core::labels;
use odek_core::verify::seccomp_profile;
use odek_core::{Error, FailureClass, Isolation, LaunchOptions, WarningKind};

// ---------------------------------------------------------------------------
// What every launch applies (SPEC §6.1)

#[tokio::test]
async fn launch_applies_the_hardening_defaults() {
    let s = Setup::new();
    let sb = s.up().await.expect("launch");
    let c = s.only_container();
    assert_eq!(Some(c.id.clone()), sb.container_id);
    assert!(c.running, "the container is running");
    assert_eq!(c.init, Some(true), "--init");
    assert_eq!(c.pids_limit, Some(4096), "--pids-limit default");
    assert_eq!(c.cap_drop, vec!["ALL".to_string()], "--cap-drop ALL");
    assert_eq!(
        c.security_opt,
        vec![
            "no-new-privileges".to_string(),
            format!("seccomp={}", seccomp_profile())
        ],
        "no-new-privileges and odek's seccomp profile, inline"
    );
    assert_eq!(
        c.tmpfs.get("/tmp").map(String::as_str),
        Some("rw,noexec,nosuid")
    );
    assert_eq!(
        c.labels.get(labels::SANDBOX).map(String::as_str),
        Some("true")
    );
    assert_eq!(
        c.labels.get(labels::OWNER_PID),
        Some(&std::process::id().to_string()),
        "owner pid label"
    );
    let created: u64 = c
        .labels
        .get(labels::CREATED)
        .expect("created label")
        .parse()
        .expect("created is Unix seconds");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    assert!(
        created <= now && now - created < 300,
        "created={created} now={now}"
    );
    assert!(
        c.labels
            .keys()
            .filter(|k| !k.starts_with("dev.odek."))
            .count()
            == 0,
        "only dev.odek.* labels: {:?}",
        c.labels.keys().collect::<Vec<_>>()
    );
    // Nothing attached: NetworkMode none, no endpoint besides `none`.
    assert_eq!(c.network_mode, "none");
    assert!(
        c.endpoints.iter().all(|e| e.network_name == "none"),
        "{:?}",
        c.endpoints
    );
    assert!(s.fake.calls_of(Op::ConnectNetwork).is_empty());
    assert!(c.name.starts_with("odek-"), "unique name: {}", c.name);
    let applied = sb.applied.as_ref().expect("applied");
    assert_eq!(applied.pids_limit, 4096);
    assert!(applied.init);
    assert!(!applied.internet);
    assert_eq!(
        sb.startup_line(),
        "odek: sandbox network=none pids=4096 image=odek-test/base:1 networks=-".to_string()
            + &default_user_field()
            + " endpoint=unix:///fake/docker.sock runtime=runc supervisor=off (the in-memory test engine runs no supervisor)"
    );
}

#[tokio::test]
async fn pids_limit_flag_is_applied_and_reported() {
    let s = Setup::new().pids(123);
    let sb = s.up().await.expect("launch");
    assert_eq!(s.only_container().pids_limit, Some(123));
    assert!(
        sb.startup_line().contains(" pids=123 "),
        "{}",
        sb.startup_line()
    );
}

#[tokio::test]
async fn two_launches_get_distinct_names() {
    let s = Setup::new();
    let a = s.up().await.expect("first");
    let b = s.up().await.expect("second");
    assert_ne!(a.name, b.name);
    assert_eq!(s.fake.containers().len(), 2);
}

#[tokio::test]
async fn create_request_mounts_the_workspace_and_runs_an_idle_process() {
    let (s, spy) = spied();
    let s = s.memory("512m").cpus("0.5");
    let _sandbox = s.up().await.expect("launch");
    let specs = spy.specs();
    assert_eq!(specs.len(), 1);
    let spec = &specs[0];
    assert_eq!(spec.working_dir, "/workspace");
    let ws = &spec.binds[0];
    assert_eq!(ws.target, "/workspace");
    assert_eq!(ws.source, s.workdir.display().to_string());
    assert!(!ws.read_only, "read-write by default");
    assert!(
        !spec.cmd.is_empty(),
        "an idle command keeps the container up"
    );
    assert_eq!(spec.memory_bytes, Some(512 * 1024 * 1024));
    assert_eq!(spec.nano_cpus, Some(500_000_000));
    let c = s.only_container();
    assert_eq!(c.memory_bytes, 512 * 1024 * 1024);
    assert_eq!(c.nano_cpus, 500_000_000);
}

#[tokio::test]
async fn readonly_mounts_the_workspace_read_only() {
    let (s, spy) = spied();
    let s = s.readonly();
    s.up().await.expect("launch");
    let spec = &spy.specs()[0];
    assert_eq!(spec.binds[0].target, "/workspace");
    assert!(spec.binds[0].read_only, "/workspace is :ro");
}

#[tokio::test]
async fn odek_home_inside_the_workdir_is_masked() {
    let s = Setup::new();
    let inside = s.workdir.join(".odek-home");
    std::fs::create_dir_all(&inside).expect("mkdir");
    let s = s.env("ODEK_HOME", &inside.display().to_string());
    let sb = s.up().await.expect("launch");
    let c = s.only_container();
    let opts = c.tmpfs.get("/workspace/.odek-home").expect("mask tmpfs");
    assert!(opts.split(',').any(|o| o == "ro"), "{opts}");
    assert!(sb
        .warnings
        .iter()
        .any(|w| w.kind == WarningKind::OdekHomeMasked));
}

/// An `odek-out` someone made first with IPv6 on (a Compose file can make
/// one with odek's label and the inter-container switch off, which on
/// Docker 20.10 blocks IPv4 only) is never used: odek makes its own and
/// the sandbox is on that one.
#[tokio::test]
async fn an_odek_out_made_first_with_ipv6_is_not_used() {
    let s = Setup::new().compose(PROJECT).services();
    let mut planted = odek_core::engine::FakeNetwork::bridge(odek_core::link::OUT_NETWORK);
    planted.info.id = format!("0{}", &planted.info.id[1..]);
    planted.info.enable_ipv6 = true;
    planted.info.labels = [
        ("dev.odek.out".to_string(), "true".to_string()),
        ("dev.odek.sandbox".to_string(), "out".to_string()),
    ]
    .into();
    planted.info.options = [(
        "com.docker.network.bridge.enable_icc".to_string(),
        "false".to_string(),
    )]
    .into();
    let planted = s.fake.add_network(planted);
    let _sb = s.up().await.expect("launch");
    let made = s.fake.calls_of(Op::CreateNetwork);
    assert!(
        made.iter().any(|c| c.arg == odek_core::link::OUT_NETWORK),
        "odek made its own odek-out: {made:?}"
    );
    let c = s.only_sandbox();
    assert!(
        !c.endpoints.iter().any(|e| e.network_id == planted),
        "the sandbox is not on the planted IPv6 odek-out: {:?}",
        c.endpoints
    );
    assert!(
        c.endpoints
            .iter()
            .any(|e| e.network_name == odek_core::link::OUT_NETWORK),
        "it is on odek's own: {:?}",
        c.endpoints
    );
}

/// Two launches that find no odek-out at once both make one (the daemon
/// takes a second network of a name): the launch whose network is not
/// the first by ID removes its own and joins the first, so none is left
/// over and racing sandboxes share one.
#[tokio::test]
async fn a_launch_that_raced_another_to_make_odek_out_keeps_one() {
    let s = Setup::new().compose(PROJECT).services();
    s.fake.set_quirks(Quirks {
        twin_network: Some(odek_core::link::OUT_NETWORK.to_string()),
        ..Quirks::default()
    });
    let sb = s.up().await.expect("launch");
    let outs: Vec<String> = s
        .fake
        .calls_of(Op::ListNetworks)
        .iter()
        .map(|c| c.arg.clone())
        .collect();
    let made = s.fake.calls_of(Op::CreateNetwork);
    assert!(
        made.iter().any(|c| c.arg == odek_core::link::OUT_NETWORK),
        "odek-out was made: {made:?} {outs:?}"
    );
    let removed = s.fake.calls_of(Op::RemoveNetwork);
    assert_eq!(removed.len(), 1, "its own twin removed: {removed:?}");
    let left = s
        .fake
        .network_id(odek_core::link::OUT_NETWORK)
        .expect("odek-out");
    assert!(left.starts_with('0'), "the first by ID is kept: {left}");
    let c = s.only_sandbox();
    assert!(
        c.endpoints.iter().any(|e| e.network_id == left),
        "the sandbox is on the odek-out kept: {:?}",
        c.endpoints
    );
    assert_eq!(removed[0].arg.len(), 64);
    assert_ne!(removed[0].arg, left);
    drop(sb);
}

#[tokio::test]
async fn attached_networks_put_the_sandbox_on_its_link_network_with_their_services() {
    let s = Setup::new().compose(PROJECT).services();
    let plan = s.resolve().await.expect("resolve");
    let ids: Vec<String> = plan.networks.iter().map(|n| n.id.clone()).collect();
    assert_eq!(
        ids,
        vec![SHOP_BACKEND_ID.to_string(), SHOP_DEFAULT_ID.to_string()]
    );
    let sb = s.launch(&plan).await.expect("launch");
    // SPEC §4.4: the sandbox's only network is its own; the project's
    // networks hold no endpoint of it, so `compose down` can remove them.
    let link = s.link_id(&sb.name);
    let c = s.only_sandbox();
    assert_eq!(
        c.network_mode, link,
        "NetworkMode is the link network's full ID"
    );
    // shop_default is not internal: its way out is odek-out (shared,
    // inter-container traffic off); the link network is internal, so the
    // services connected to it gain no way out.
    let out = s
        .fake
        .network_id(odek_core::link::OUT_NETWORK)
        .expect("odek-out");
    let mut attached: Vec<&str> = c.endpoints.iter().map(|e| e.network_id.as_str()).collect();
    attached.sort();
    let mut want = vec![link.as_str(), out.as_str()];
    want.sort();
    assert_eq!(attached, want);
    assert!(
        s.fake.network_internal(&link),
        "the link network is internal"
    );
    assert!(!s.fake.network_internal(&out));
    assert_eq!(
        sb.applied
            .as_ref()
            .expect("applied")
            .link_network
            .as_deref(),
        Some(link.as_str())
    );
    // Each service is connected to it under its alias there.
    let connects = s.fake.calls_of(Op::ConnectNetwork);
    let to_link = connects.iter().filter(|c| c.arg == link).count();
    assert_eq!(to_link, 2, "the two services: {connects:?}");
    assert_eq!(
        connects.len(),
        3,
        "and the sandbox to odek-out: {connects:?}"
    );
    for (name, alias) in [("shop-redis-1", "redis"), ("shop-postgres-1", "postgres")] {
        let id = s
            .fake
            .containers()
            .into_iter()
            .find(|id| s.fake.container(id).is_some_and(|c| c.name == name))
            .expect("service");
        let svc = s.fake.container(&id).expect("service");
        let on_link = svc
            .endpoints
            .iter()
            .find(|e| e.network_id == link)
            .unwrap_or_else(|| panic!("{name} is connected to the link: {:?}", svc.endpoints));
        assert_eq!(on_link.aliases, vec![alias.to_string()], "{name}");
    }
    assert_eq!(
        sb.startup_line(),
        "odek: sandbox network=attached pids=4096 image=odek-test/base:1 networks=shop_backend,shop_default".to_string()
            + &default_user_field()
            + " endpoint=unix:///fake/docker.sock runtime=runc supervisor=off (the in-memory test engine runs no supervisor)"
    );
    assert!(
        sb.applied.as_ref().expect("applied").internet,
        "shop_default is not internal"
    );
}

#[tokio::test]
async fn bridge_plus_attached_connects_the_link_network_after_start() {
    let s = Setup::new().network_mode("bridge").compose(PROJECT);
    let sb = s.up().await.expect("launch");
    let link = s.link_id(&sb.name);
    let c = s.only_container();
    assert_eq!(c.network_mode, "bridge");
    let connects: Vec<String> = s
        .fake
        .calls_of(Op::ConnectNetwork)
        .into_iter()
        .map(|c| c.arg)
        .collect();
    assert_eq!(connects, vec![link.clone()]);
    let mut attached: Vec<&str> = c.endpoints.iter().map(|e| e.network_id.as_str()).collect();
    attached.sort();
    let mut want = vec![BRIDGE_ID, link.as_str()];
    want.sort();
    assert_eq!(attached, want);
    assert!(
        sb.startup_line().contains("network=bridge+attached"),
        "{}",
        sb.startup_line()
    );
    let kinds: Vec<WarningKind> = sb.warnings.iter().map(|w| w.kind).collect();
    assert!(
        kinds.contains(&WarningKind::BridgeWithAttached),
        "{kinds:?}"
    );
    assert!(kinds.contains(&WarningKind::BridgeReachesHost), "{kinds:?}");
    assert!(
        kinds.contains(&WarningKind::AttachedNetworkNotInternal),
        "{kinds:?}"
    );
}

#[tokio::test]
async fn bridge_only_uses_the_default_bridge() {
    let s = Setup::new().network_mode("bridge");
    let sb = s.up().await.expect("launch");
    let c = s.only_container();
    assert_eq!(c.network_mode, "bridge");
    assert_eq!(c.endpoints.len(), 1);
    assert_eq!(c.endpoints[0].network_id, BRIDGE_ID);
    assert!(
        sb.startup_line().contains("network=bridge "),
        "{}",
        sb.startup_line()
    );
    assert!(sb.applied.as_ref().expect("applied").internet);
}

#[tokio::test]
async fn from_launch_on_every_network_is_addressed_by_full_id() {
    let s = Setup::new()
        .networks(&[SHOP_DEFAULT])
        .compose(PROJECT)
        .services();
    let plan = s.resolve().await.expect("resolve");
    let after_resolve = s.fake.calls().len();
    let sandbox = s.launch(&plan).await.expect("launch");
    let launch_calls = &s.fake.calls()[after_resolve..];
    for c in launch_calls {
        for raw in [SHOP_DEFAULT, SHOP_BACKEND, PROJECT] {
            assert!(
                !(c.arg == raw || c.arg.contains(&format!("\"{raw}\""))),
                "raw name {raw:?} sent to Docker during launch: {} {}",
                c.op,
                c.arg
            );
        }
        if c.op == Op::ConnectNetwork {
            assert!(is_full_id(&c.arg), "connect by full ID: {}", c.arg);
        }
    }
    let c = s.only_sandbox();
    assert!(
        is_full_id(&c.network_mode),
        "NetworkMode is a full ID: {}",
        c.network_mode
    );
    assert_eq!(c.network_mode, s.link_id(&sandbox.name));
}

// ---------------------------------------------------------------------------
// Each Docker call failing in turn (SPEC §6.1, §6.3, §12)

/// Launches the standard fixture (attached to `shop`, so there is a connect
/// and no fallback) with `fault` injected.
async fn launch_with(fault: Fault) -> (Setup, Error) {
    let s = Setup::new().compose(PROJECT);
    let plan = s.resolve().await.expect("resolve");
    s.fake.fail(fault);
    let err = s.launch(&plan).await.expect_err("the launch must fail");
    (s, err)
}

fn class_of(kind: EngineErrorKind) -> FailureClass {
    match kind {
        EngineErrorKind::Unreachable | EngineErrorKind::Timeout => FailureClass::DaemonUnreachable,
        _ => FailureClass::DockerRejected,
    }
}

/// A failure before create: nothing was changed at all.
async fn fails_before_create(op: Op, kind: EngineErrorKind) {
    let (s, err) = launch_with(Fault::new(op, 1, kind)).await;
    assert_refused_before_create(&s, &err, class_of(kind), "injected");
    assert!(s.fake.calls_of(Op::CreateContainer).is_empty());
}

/// A failure after create: the container was force-removed and the message
/// says so.
async fn fails_after_create(op: Op, nth: usize, kind: EngineErrorKind, s: Setup) {
    let plan = s.resolve().await.expect("resolve");
    s.fake.fail(Fault::new(op, nth, kind));
    let err = s.launch(&plan).await.expect_err("the launch must fail");
    assert_refused(&s, &err, class_of(kind), "injected");
    assert!(
        err.to_string().contains("the container was removed"),
        "the error says the container was removed: {err}"
    );
    if let Error::Rejected { removal, .. } = &err {
        assert_eq!(*removal, Some(Removal::Removed), "removal: {err:?}");
    }
    let removes = s.fake.calls_of(Op::RemoveContainer);
    assert_eq!(removes.len(), 1, "exactly one forced removal");
    assert!(
        is_full_id(&removes[0].arg),
        "removed by ID: {}",
        removes[0].arg
    );
}

#[tokio::test]
async fn inspect_image_rejected_is_docker_rejected_and_changes_nothing() {
    fails_before_create(Op::InspectImage, EngineErrorKind::Rejected).await;
}

#[tokio::test]
async fn inspect_image_unreachable_is_daemon_unreachable_and_changes_nothing() {
    fails_before_create(Op::InspectImage, EngineErrorKind::Unreachable).await;
}

#[tokio::test]
async fn pull_rejected_is_image_unavailable_and_creates_nothing() {
    let s = Setup::with_fake(shop_fake())
        .image("odek-test/pulled:1")
        .compose(PROJECT);
    s.fake
        .add_registry_image(FakeImage::new("odek-test/pulled:1"));
    s.fake
        .fail(Fault::new(Op::PullImage, 1, EngineErrorKind::Rejected));
    let err = s.up().await.expect_err("pull fails");
    assert_refused(&s, &err, FailureClass::ImageUnavailable, "cannot be pulled");
    assert!(err.to_string().contains("odek-test/pulled:1"), "{err}");
    assert!(s.fake.calls_of(Op::CreateContainer).is_empty());
}

#[tokio::test]
async fn pull_unreachable_is_daemon_unreachable() {
    let s = Setup::with_fake(shop_fake())
        .image("odek-test/pulled:1")
        .compose(PROJECT);
    s.fake
        .add_registry_image(FakeImage::new("odek-test/pulled:1"));
    s.fake
        .fail(Fault::new(Op::PullImage, 1, EngineErrorKind::Unreachable));
    let err = s.up().await.expect_err("pull fails");
    assert_refused(&s, &err, FailureClass::DaemonUnreachable, "unreachable");
    assert!(s.fake.calls_of(Op::CreateContainer).is_empty());
}

#[tokio::test]
async fn pull_unreachable_still_fails_closed_and_creates_nothing() {
    // Whatever its class, a pull lost with the daemon is fatal here (networks
    // are attached, so no fallback) and creates nothing.
    let s = Setup::with_fake(shop_fake())
        .image("odek-test/pulled:1")
        .compose(PROJECT);
    s.fake
        .add_registry_image(FakeImage::new("odek-test/pulled:1"));
    s.fake
        .fail(Fault::new(Op::PullImage, 1, EngineErrorKind::Unreachable));
    let err = s.up().await.expect_err("pull fails");
    assert!(err.class().allows_fallback(), "{err}");
    assert!(s.fake.containers().is_empty());
    assert!(s.fake.calls_of(Op::CreateContainer).is_empty());
}

#[tokio::test]
async fn create_rejected_is_docker_rejected_and_leaves_nothing() {
    let (s, err) = launch_with(Fault::new(
        Op::CreateContainer,
        1,
        EngineErrorKind::Rejected,
    ))
    .await;
    assert_refused(&s, &err, FailureClass::DockerRejected, "injected");
    assert!(err.to_string().contains("create"), "{err}");
    assert!(s.fake.calls_of(Op::StartContainer).is_empty());
}

#[tokio::test]
async fn create_unreachable_is_daemon_unreachable_and_removes_by_name() {
    let (s, err) = launch_with(Fault::new(
        Op::CreateContainer,
        1,
        EngineErrorKind::Unreachable,
    ))
    .await;
    assert_refused(&s, &err, FailureClass::DaemonUnreachable, "injected");
    let name = s.fake.calls_of(Op::CreateContainer)[0].arg.clone();
    // Looked up by the pre-chosen name; nothing was there to remove.
    assert!(s
        .fake
        .calls_of(Op::InspectContainer)
        .iter()
        .any(|c| c.arg == name));
    assert!(s.fake.calls_of(Op::RemoveContainer).is_empty());
}

/// A create whose answer is lost: the container exists on the daemon.
fn lost_create(kind: EngineErrorKind) -> Fault {
    Fault {
        after_effect: true,
        ..Fault::new(Op::CreateContainer, 1, kind)
    }
}

#[tokio::test]
async fn create_with_a_lost_answer_is_removed_by_name() {
    let (s, err) = launch_with(lost_create(EngineErrorKind::Unreachable)).await;
    assert_refused(&s, &err, FailureClass::DaemonUnreachable, "injected");
    let name = s.fake.calls_of(Op::CreateContainer)[0].arg.clone();
    assert!(name.starts_with("odek-"), "{name}");
    assert!(s
        .fake
        .calls_of(Op::InspectContainer)
        .iter()
        .any(|c| c.arg == name));
    let removes = s.fake.calls_of(Op::RemoveContainer);
    assert_eq!(removes.len(), 1);
    assert_eq!(
        removes[0].arg.len(),
        64,
        "removed by the ID found: {removes:?}"
    );
    assert!(s.fake.calls_of(Op::StartContainer).is_empty());
}

#[tokio::test]
async fn a_lost_create_answer_leaves_another_launchs_container_of_that_name_alone() {
    // `sandbox up --name X` while a sandbox X runs: the daemon answers 409,
    // the answer is lost, and the removal by name must not take X.
    let s = Setup::new();
    let plan = s.resolve().await.expect("resolve");
    let first = LaunchOptions {
        name: Some("odek-victim".into()),
        ..LaunchOptions::default()
    };
    let victim = s
        .odek
        .launch(&plan, &first, &s.reporter)
        .await
        .expect("first launch");
    s.fake.fail(Fault {
        nth: 2,
        ..lost_create(EngineErrorKind::Unreachable)
    });
    let err = s
        .odek
        .launch(&plan, &first, &s.reporter)
        .await
        .expect_err("refused");
    assert_eq!(err.class(), FailureClass::DaemonUnreachable, "{err}");
    assert!(err.to_string().contains("left alone"), "{err}");
    assert!(s.fake.calls_of(Op::RemoveContainer).is_empty());
    let id = victim.container_id.expect("id");
    assert!(
        s.fake.container(&id).is_some_and(|c| c.running),
        "the other launch's sandbox was removed"
    );
}

#[tokio::test]
async fn create_timing_out_after_the_effect_is_removed_by_name() {
    let (s, err) = launch_with(lost_create(EngineErrorKind::Timeout)).await;
    assert_refused(&s, &err, FailureClass::DaemonUnreachable, "injected");
}

#[tokio::test]
async fn create_with_a_lost_answer_says_the_container_was_removed() {
    let (_s, err) = launch_with(lost_create(EngineErrorKind::Unreachable)).await;
    assert!(
        err.to_string().contains("the container was removed"),
        "the error says the container was removed: {err}"
    );
}

#[tokio::test]
async fn create_with_a_lost_answer_and_the_daemon_gone_says_it_may_be_left() {
    let (s, spy) = spied();
    let s = s.compose(PROJECT);
    let plan = s.resolve().await.expect("resolve");
    s.fake.fail(lost_create(EngineErrorKind::Unreachable));
    spy.vanish_after(Op::CreateContainer);
    let err = s.launch(&plan).await.expect_err("fails");
    assert_eq!(err.class(), FailureClass::DaemonUnreachable);
    let name = &spy.specs()[0].name;
    let msg = err.to_string();
    assert!(
        msg.contains(name.as_str()) && msg.contains("left behind"),
        "{msg}"
    );
}

#[tokio::test]
async fn a_detached_sandbox_that_may_be_left_names_sandbox_down_not_gc() {
    // gc keeps detached sandboxes (`odek sandbox up`): the hint must be the
    // command that removes one.
    let (s, spy) = spied();
    let plan = s.resolve().await.expect("resolve");
    s.fake.fail(lost_create(EngineErrorKind::Unreachable));
    spy.vanish_after(Op::CreateContainer);
    let opts = LaunchOptions {
        detached: true,
        ..LaunchOptions::default()
    };
    let err = s
        .odek
        .launch(&plan, &opts, &s.reporter)
        .await
        .expect_err("fails");
    let name = &spy.specs()[0].name;
    let msg = err.to_string();
    assert!(
        msg.contains(&format!("`odek sandbox down {name}` removes it")),
        "{msg}"
    );
    assert!(!msg.contains("sandbox gc"), "{msg}");
}

#[tokio::test]
async fn start_rejected_removes_the_container() {
    fails_after_create(
        Op::StartContainer,
        1,
        EngineErrorKind::Rejected,
        Setup::new().compose(PROJECT),
    )
    .await;
}

#[tokio::test]
async fn start_unreachable_removes_the_container() {
    fails_after_create(
        Op::StartContainer,
        1,
        EngineErrorKind::Unreachable,
        Setup::new().compose(PROJECT),
    )
    .await;
}

#[tokio::test]
async fn connect_rejected_removes_the_container() {
    fails_after_create(
        Op::ConnectNetwork,
        1,
        EngineErrorKind::Rejected,
        Setup::new().compose(PROJECT).services(),
    )
    .await;
}

#[tokio::test]
async fn connect_unreachable_removes_the_container() {
    fails_after_create(
        Op::ConnectNetwork,
        1,
        EngineErrorKind::Unreachable,
        Setup::new().compose(PROJECT).services(),
    )
    .await;
}

#[tokio::test]
async fn each_connect_failing_in_turn_removes_the_container() {
    // bridge + the link network, then two services: three connects.
    for nth in [1, 2, 3] {
        for kind in [EngineErrorKind::Rejected, EngineErrorKind::Unreachable] {
            let s = Setup::new()
                .network_mode("bridge")
                .compose(PROJECT)
                .services();
            fails_after_create(Op::ConnectNetwork, nth, kind, s).await;
        }
    }
}

#[tokio::test]
async fn inspect_for_verification_rejected_removes_the_container() {
    fails_after_create(
        Op::InspectContainer,
        1,
        EngineErrorKind::Rejected,
        Setup::new().compose(PROJECT),
    )
    .await;
}

#[tokio::test]
async fn inspect_for_verification_unreachable_removes_the_container() {
    fails_after_create(
        Op::InspectContainer,
        1,
        EngineErrorKind::Unreachable,
        Setup::new().compose(PROJECT),
    )
    .await;
}

#[tokio::test]
async fn start_fails_without_networks_removes_the_container() {
    fails_after_create(
        Op::StartContainer,
        1,
        EngineErrorKind::Rejected,
        Setup::new(),
    )
    .await;
}

#[tokio::test]
async fn daemon_gone_after_create_says_the_container_may_be_left_behind() {
    let (s, spy) = spied();
    let plan = s.resolve().await.expect("resolve");
    spy.vanish_after(Op::CreateContainer);
    let err = s.launch(&plan).await.expect_err("start fails");
    assert_eq!(err.class(), FailureClass::DaemonUnreachable, "{err}");
    let name = spy.specs()[0].name.clone();
    let msg = err.to_string();
    assert!(msg.contains(&name), "names the container: {msg}");
    assert!(
        msg.contains("left behind") && msg.contains("odek sandbox gc"),
        "{msg}"
    );
    assert!(!msg.contains("the container was removed"), "{msg}");
}

#[tokio::test]
async fn a_failed_removal_is_not_reported_as_removed() {
    let s = Setup::new();
    let plan = s.resolve().await.expect("resolve");
    s.fake
        .fail(Fault::new(Op::StartContainer, 1, EngineErrorKind::Rejected));
    // Both tries fail (a refused removal is tried once more).
    for nth in [1, 2] {
        s.fake.fail(Fault::new(
            Op::RemoveContainer,
            nth,
            EngineErrorKind::Rejected,
        ));
    }
    let err = s.launch(&plan).await.expect_err("start fails");
    assert_eq!(err.class(), FailureClass::DockerRejected);
    assert!(!err.to_string().contains("was removed"), "{err}");
    assert!(
        matches!(
            err,
            Error::Rejected {
                removal: Some(Removal::Left { .. }),
                ..
            }
        ),
        "{err:?}"
    );
}

// ---------------------------------------------------------------------------
// Verification of what the engine applied (SPEC §6.1)

async fn quirk_fails_verification(q: Quirks, s: Setup, needle: &str) {
    let plan = s.resolve().await.expect("resolve");
    s.fake.set_quirks(q);
    let err = s.launch(&plan).await.expect_err("verification fails");
    assert_refused(&s, &err, FailureClass::DockerRejected, needle);
    assert!(err.to_string().contains("verif"), "{err}");
    assert!(
        err.to_string().contains("the container was removed"),
        "{err}"
    );
    assert_eq!(s.fake.calls_of(Op::RemoveContainer).len(), 1);
}

#[tokio::test]
async fn dropped_pids_limit_fails_verification() {
    let q = Quirks {
        drop_pids_limit: true,
        ..Quirks::default()
    };
    quirk_fails_verification(q, Setup::new(), "PidsLimit").await;
}

#[tokio::test]
async fn ignored_connect_fails_verification() {
    let q = Quirks {
        ignore_connect: true,
        ..Quirks::default()
    };
    // The sandbox's connect to its link network (bridge mode) is ignored.
    quirk_fails_verification(
        q,
        Setup::new().network_mode("bridge").compose(PROJECT),
        "networks differ",
    )
    .await;
}

#[tokio::test]
async fn dropped_init_fails_verification() {
    let q = Quirks {
        drop_init: true,
        ..Quirks::default()
    };
    quirk_fails_verification(q, Setup::new(), "Init").await;
}

#[tokio::test]
async fn a_dropped_seccomp_profile_fails_verification() {
    // SPEC §6.1: without odek's profile, Docker's default lets the sandbox
    // put the setuid bit on files in /workspace.
    let q = Quirks {
        security_opt: Some(vec!["no-new-privileges".into()]),
        ..Quirks::default()
    };
    quirk_fails_verification(q, Setup::new(), "without odek's seccomp profile").await;
}

#[tokio::test]
async fn another_seccomp_profile_fails_verification() {
    let mut other: serde_json::Value =
        serde_json::from_str(seccomp_profile()).expect("the profile is JSON");
    other["defaultAction"] = "SCMP_ACT_ALLOW".into();
    let q = Quirks {
        security_opt: Some(vec!["no-new-privileges".into(), format!("seccomp={other}")]),
        ..Quirks::default()
    };
    quirk_fails_verification(q, Setup::new(), "is not odek's (sha256:").await;
}

#[tokio::test]
async fn an_idle_process_that_cannot_start_fails_verification_with_the_exit_code() {
    // The start succeeds, then docker-init cannot start `sleep` (a pids
    // limit of 1): the process listing finds the container stopped.
    let q = Quirks {
        idle_exits: Some(1),
        ..Quirks::default()
    };
    quirk_fails_verification(
        q,
        Setup::new(),
        "the container is not running (exit code 1)",
    )
    .await;
}

#[tokio::test]
async fn a_connect_refused_because_the_container_stopped_reports_why_it_stopped() {
    // Through the exec API (a remote engine) an owned sandbox whose idle
    // process cannot start is auto-removed while its networks are being
    // connected: Docker refuses the connect ("marked for removal"), and
    // the refusal says why the container stopped.
    let q = Quirks {
        exits_before_connect: Some(1),
        ..Quirks::default()
    };
    let s = Setup::new().compose(PROJECT);
    let plan = s.resolve().await.expect("resolve");
    s.fake.set_quirks(q);
    let err = s.launch(&plan).await.expect_err("refused");
    assert_refused(
        &s,
        &err,
        FailureClass::DockerRejected,
        "marked for removal and cannot be connected or disconnected to the network; the container is not running (exit code 1)",
    );
    assert!(err.to_string().contains("at connect"), "{err}");
}

#[tokio::test(start_paused = true)]
async fn a_container_running_something_else_than_the_idle_process_fails_verification() {
    let s = Setup::new();
    let q = Quirks {
        idle_missing: true,
        ..Quirks::default()
    };
    let started = tokio::time::Instant::now();
    quirk_fails_verification(q, s, "did not start within 5 s").await;
    assert!(
        started.elapsed() >= odek_core::launch::IDLE_START_BUDGET,
        "refused before the budget ran out: {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn the_idle_process_is_looked_for_once_when_it_runs() {
    let s = Setup::new().compose(PROJECT);
    s.up().await.expect("launch");
    assert_eq!(s.fake.calls_of(Op::ListProcesses).len(), 1);
}

#[tokio::test]
async fn a_failed_process_listing_refuses_the_launch_and_removes_the_container() {
    for kind in [EngineErrorKind::Rejected, EngineErrorKind::Unreachable] {
        fails_after_create(Op::ListProcesses, 1, kind, Setup::new()).await;
    }
}

#[tokio::test]
async fn a_listing_refused_because_the_container_is_dying_reports_why_it_stopped() {
    // Docker answers 500 ("runc did not terminate successfully … container
    // does not exist") when the container stops while it is listed: odek
    // asks the inspect and reports the stop, not the listing error.
    let (s, spy) = spied();
    let plan = s.resolve().await.expect("resolve");
    s.fake
        .fail(Fault::new(Op::ListProcesses, 1, EngineErrorKind::Rejected));
    spy.after_call(Op::StartContainer, |fake| {
        for id in fake.containers() {
            fake.stop_container(&id);
        }
    });
    let err = s.launch(&plan).await.expect_err("refused");
    assert_refused(
        &s,
        &err,
        FailureClass::DockerRejected,
        "the container is not running",
    );
    assert!(!err.to_string().contains("injected"), "{err}");
}

#[tokio::test]
async fn a_start_refused_for_a_stopped_process_says_why_it_stopped() {
    // runc: "cannot start a stopped process" when docker-init exited during
    // the start (a pids limit of 1): the exit code is looked up and shown.
    let (s, spy) = spied();
    let plan = s.resolve().await.expect("resolve");
    s.fake
        .fail(Fault::new(Op::StartContainer, 1, EngineErrorKind::Rejected));
    spy.after_call(Op::StartContainer, |fake| {
        for id in fake.containers() {
            fake.exit_container(&id, 1);
        }
    });
    let err = s.launch(&plan).await.expect_err("refused");
    assert_refused(
        &s,
        &err,
        FailureClass::DockerRejected,
        "the container is not running (exit code 1)",
    );
    assert!(
        err.to_string().contains("injected"),
        "the daemon's answer stays: {err}"
    );
}

#[tokio::test]
async fn create_warning_that_drops_the_pids_limit_is_fatal() {
    let s = Setup::new();
    let plan = s.resolve().await.expect("resolve");
    s.fake.set_quirks(Quirks {
        create_warnings: vec![PIDS_DISCARDED.into()],
        ..Quirks::default()
    });
    let err = s.launch(&plan).await.expect_err("fatal");
    assert_refused(
        &s,
        &err,
        FailureClass::DockerRejected,
        "PIDs limit discarded",
    );
    assert!(
        err.to_string().contains("the container was removed"),
        "{err}"
    );
    assert!(
        s.fake.calls_of(Op::StartContainer).is_empty(),
        "never started"
    );
}

#[tokio::test]
async fn a_harmless_create_warning_is_shown_not_fatal() {
    let s = Setup::new();
    let plan = s.resolve().await.expect("resolve");
    s.fake.set_quirks(Quirks {
        create_warnings: vec![
            "The requested image's platform does not match the detected host platform".into(),
        ],
        ..Quirks::default()
    });
    let sb = s.launch(&plan).await.expect("launch");
    let engine: Vec<_> = sb
        .warnings
        .iter()
        .filter(|w| w.kind == WarningKind::Engine)
        .collect();
    assert_eq!(engine.len(), 1, "{:?}", sb.warnings);
    assert!(engine[0].message.contains("platform does not match"));
    assert_eq!(
        s.reporter.of(WarningKind::Engine).len(),
        1,
        "reported as it happens"
    );
}

// ---------------------------------------------------------------------------
// Image (SPEC §5, §6.1, §6.3)

/// The pinned default as a registry image carrying its digest.
fn pinned_image() -> FakeImage {
    let r = pinned_default();
    let mut img = FakeImage::new(&r.create_ref());
    img.info.repo_digests = vec![r.create_ref()];
    img
}

#[tokio::test]
async fn pinned_default_is_pulled_by_digest_never_by_tag() {
    let s = Setup::without_image();
    s.fake.add_registry_image(pinned_image());
    let sb = s.up().await.expect("launch");
    let r = pinned_default();
    let pulls = s.fake.calls_of(Op::PullImage);
    assert_eq!(pulls.len(), 1);
    assert_eq!(pulls[0].arg, r.create_ref());
    assert!(
        pulls[0].arg.contains("@sha256:") && !pulls[0].arg.contains(":3.22"),
        "{}",
        pulls[0].arg
    );
    for c in s.fake.calls_of(Op::CreateContainer) {
        assert!(c.arg.starts_with("odek-"));
    }
    assert_eq!(s.fake.containers().len(), 1);
    assert!(
        sb.startup_line().contains(&format!("image={}", r.original)),
        "{}",
        sb.startup_line()
    );
}

#[tokio::test]
async fn pinned_default_present_locally_is_not_pulled() {
    let s = Setup::without_image();
    s.fake.add_image(pinned_image());
    s.up().await.expect("launch");
    assert!(s.fake.calls_of(Op::PullImage).is_empty());
}

#[tokio::test]
async fn digest_pinned_image_is_pulled_by_digest_and_created_by_its_id() {
    let (s, spy) = {
        let fake = shop_fake();
        let spy = Spy::new(fake.clone());
        (Setup::over(fake, spy.clone()), spy)
    };
    let d = hex_id("4b7c");
    let reference = format!("odek-test/pinned:1@sha256:{d}");
    let by_digest = format!("odek-test/pinned@sha256:{d}");
    let mut img = FakeImage::new(&by_digest);
    img.info.repo_digests = vec![by_digest.clone()];
    let id = img.info.id.clone();
    s.fake.add_registry_image(img);
    let s = s.image(&reference);
    s.up().await.expect("launch");
    assert!(
        s.fake
            .calls_of(Op::PullImage)
            .iter()
            .all(|c| c.arg == by_digest),
        "pulled by digest"
    );
    // Created from the image ID the checks saw: never by tag (SPEC §6.1),
    // so a tag moved after the image was checked changes nothing.
    assert_eq!(spy.specs()[0].image, id, "created by the image ID");
    assert!(
        s.fake.calls().iter().all(|c| !c.arg.contains("pinned:1")),
        "the tag never reaches Docker: {:?}",
        s.fake.calls()
    );
}

#[tokio::test]
async fn digest_missing_from_repo_digests_is_fatal() {
    let s = Setup::without_image().explicit();
    let mut img = pinned_image();
    img.info.repo_digests = vec![format!("alpine@sha256:{}", hex_id("0"))];
    s.fake.add_registry_image(img);
    let err = s.up().await.expect_err("digest mismatch");
    assert_refused(&s, &err, FailureClass::Config, "does not carry that digest");
    assert!(s.fake.calls_of(Op::CreateContainer).is_empty());
}

#[tokio::test]
async fn unpullable_default_falls_back_loudly_in_implicit_mode() {
    let s = Setup::without_image();
    let sb = s.up().await.expect("fallback, not an error");
    match &sb.isolation {
        Isolation::Fallback(fb) => assert_eq!(fb.class, FailureClass::ImageUnavailable),
        other => panic!("expected fallback, got {other:?}"),
    }
    assert_eq!(sb.container_id, None);
    assert!(s.fake.containers().is_empty());
    assert!(s.fake.calls_of(Op::CreateContainer).is_empty());
    let fb = s.reporter.of(WarningKind::Fallback);
    assert_eq!(fb.len(), 1);
    assert!(fb[0].message.contains("ON THE HOST"), "{}", fb[0].message);
    assert!(fb[0].message.lines().count() > 1, "multi-line warning");
    assert!(sb.warnings.iter().any(|w| w.kind == WarningKind::Fallback));
    assert!(
        sb.startup_line().contains("NO SANDBOX"),
        "{}",
        sb.startup_line()
    );
}

#[tokio::test]
async fn unpullable_default_is_fatal_in_explicit_mode() {
    let s = Setup::without_image().explicit();
    let err = s.up().await.expect_err("fatal");
    assert_refused(&s, &err, FailureClass::ImageUnavailable, "cannot be pulled");
    assert!(s.fake.calls_of(Op::CreateContainer).is_empty());
    assert!(s.reporter.of(WarningKind::Fallback).is_empty());
}

#[tokio::test]
async fn unpullable_default_is_fatal_with_networks() {
    let s = Setup::without_image().compose(PROJECT);
    let err = s.up().await.expect_err("fatal");
    assert_refused(&s, &err, FailureClass::ImageUnavailable, "cannot be pulled");
    assert!(s.reporter.of(WarningKind::Fallback).is_empty());
}

#[tokio::test]
async fn unpullable_default_is_fatal_with_require_sandbox() {
    let s = Setup::without_image().env("ODEK_REQUIRE_SANDBOX", "1");
    let err = s.up().await.expect_err("fatal");
    assert_refused(&s, &err, FailureClass::ImageUnavailable, "cannot be pulled");
    assert!(s.reporter.of(WarningKind::Fallback).is_empty());
}

#[tokio::test]
async fn an_unpullable_image_from_the_project_is_fatal_however_approved() {
    // Only the operator may allow a host run (SPEC §6.3): a project's
    // `sandbox_image` alone makes the mode explicit, the card says a failure
    // is refused, and the unpullable image is refused after approval.
    let s = Setup::without_image()
        .project_config(r#"{"sandbox_image": "localhost:1/x/tools:1"}"#)
        .env("ODEK_APPROVE_PROJECT_SANDBOX", "1");
    let plan = s.resolve().await.expect("resolve");
    assert_eq!(plan.mode, odek_core::config::SandboxMode::Explicit);
    let req = plan.approval.clone().expect("needs approval");
    assert!(!req.host_fallback);
    assert!(
        req.card
            .contains("localhost:1/x/tools:1 (if it cannot be pulled: refused, nothing runs)"),
        "{}",
        req.card
    );
    let approval = req.standing().expect("approved by the env switch");
    let opts = odek_core::LaunchOptions {
        approval: Some(approval),
        ..Default::default()
    };
    let err = s
        .odek
        .launch(&plan, &opts, &s.reporter)
        .await
        .expect_err("refused, not a host run");
    assert_refused(&s, &err, FailureClass::ImageUnavailable, "cannot be pulled");
    assert!(s.reporter.of(WarningKind::Fallback).is_empty());
    // A plan that says implicit but carries a project source (a hand-made
    // or older plan) cannot buy a host run either.
    let mut forged = plan.clone();
    forged.mode = odek_core::config::SandboxMode::Implicit;
    let opts = odek_core::LaunchOptions {
        approval: Some(req.standing().expect("approved")),
        ..Default::default()
    };
    let err = s
        .odek
        .launch(&forged, &opts, &s.reporter)
        .await
        .expect_err("refused, not a host run");
    assert_eq!(err.class(), FailureClass::ImageUnavailable);
    assert!(s.reporter.of(WarningKind::Fallback).is_empty());
}

#[tokio::test]
async fn a_dockerfile_odek_makes_the_run_explicit() {
    let s = Setup::without_image();
    std::fs::write(s.workdir.join("Dockerfile.odek"), "FROM odek-test/base:1\n")
        .expect("Dockerfile.odek");
    let plan = s.resolve().await.expect("resolve");
    assert_eq!(plan.mode, odek_core::config::SandboxMode::Explicit);
    assert!(
        plan.sources
            .get("sandbox")
            .is_some_and(|src| src.to_string().contains("Dockerfile.odek")),
        "{:?}",
        plan.sources
    );
}

#[tokio::test]
async fn invalid_image_reference_is_a_config_error_before_docker() {
    let s = Setup::with_fake(shop_fake()).image("Not A/Valid:ref");
    let err = s.up().await.expect_err("invalid");
    assert_refused_before_create(&s, &err, FailureClass::Config, "image reference");
    assert!(s.fake.calls().is_empty(), "{:?}", s.fake.calls());
}

// ---------------------------------------------------------------------------
// Destroy and attach

#[tokio::test]
async fn destroy_removes_the_container_and_is_idempotent() {
    let s = Setup::new().compose(PROJECT);
    let sb = s.up().await.expect("launch");
    s.odek.destroy(&sb).await.expect("destroy");
    assert!(s.fake.containers().is_empty());
    s.odek.destroy(&sb).await.expect("destroying twice is fine");
}

#[tokio::test]
async fn attach_finds_a_sandbox_by_name_with_its_plan() {
    let s = Setup::new().compose(PROJECT);
    let sb = s.up().await.expect("launch");
    let again = s.odek.attach(&sb.name, &s.odek_home).await.expect("attach");
    assert_eq!(again.container_id, sb.container_id);
    assert_eq!(again.plan.networks, sb.plan.networks);
    assert_eq!(again.applied, sb.applied);
    let err = s
        .odek
        .attach("no-such-sandbox", &s.odek_home)
        .await
        .expect_err("absent");
    assert_eq!(err.class(), FailureClass::Config);
}

#[tokio::test]
async fn attach_refuses_a_container_that_is_not_an_odek_sandbox() {
    let s = Setup::new();
    add_peer(&s.fake, "shop-redis-1", Some("redis"), SHOP_DEFAULT_ID, &[]).await;
    let err = s
        .odek
        .attach("shop-redis-1", &s.odek_home)
        .await
        .expect_err("not ours");
    assert!(err.to_string().contains("not an odek sandbox"), "{err}");
}

#[tokio::test]
async fn a_chosen_name_that_could_shadow_a_service_is_refused_before_docker() {
    let s = Setup::new().compose("shop");
    let plan = s.resolve().await.expect("resolve");
    for bad in [
        "postgres",
        "redis",
        "odek-",
        "odek",
        "Odek-x",
        "odek-a b",
        "odek-a/b",
        "odek-\u{1b}[31m",
        "xodek-a",
        &format!("odek-{}", "a".repeat(60)),
    ] {
        let opts = LaunchOptions {
            name: Some(bad.to_string()),
            ..LaunchOptions::default()
        };
        let err = s
            .odek
            .launch(&plan, &opts, &s.reporter)
            .await
            .expect_err(bad);
        assert_refused_before_create(&s, &err, FailureClass::Config, "must start with \"odek-\"");
        assert!(!err.to_string().contains('\u{1b}'), "{err}");
    }
    for good in [
        "odek-a",
        "odek-agent_1.sub-2",
        &format!("odek-{}", "a".repeat(59)),
    ] {
        odek_core::launch::validate_sandbox_name(good).expect(good);
    }
}

#[tokio::test]
async fn launch_options_name_and_labels_are_used() {
    let s = Setup::new();
    let plan = s.resolve().await.expect("resolve");
    let opts = LaunchOptions {
        detached: true,
        name: Some("odek-mine".into()),
        labels: [(labels::PARENT.to_string(), "odek-parent".to_string())].into(),
        ..LaunchOptions::default()
    };
    let sb = s
        .odek
        .launch(&plan, &opts, &s.reporter)
        .await
        .expect("launch");
    assert_eq!(sb.name, "odek-mine");
    let c = s.only_container();
    assert_eq!(c.name, "odek-mine");
    assert_eq!(
        c.labels.get(labels::DETACHED).map(String::as_str),
        Some("true")
    );
    assert!(
        !c.labels.contains_key(labels::OWNER_PID),
        "detached has no owner"
    );
    assert_eq!(
        c.labels.get(labels::PARENT).map(String::as_str),
        Some("odek-parent")
    );
}

// ---------------------------------------------------------------------------
// Dockerfile.odek (SPEC §5)

fn tar_paths(bytes: &[u8]) -> Vec<String> {
    let mut a = tar::Archive::new(bytes);
    a.entries()
        .expect("tar")
        .map(|e| {
            e.expect("entry")
                .path()
                .expect("path")
                .to_string_lossy()
                .trim_start_matches("./")
                .to_string()
        })
        .collect()
}

#[tokio::test]
async fn dockerfile_odek_is_built_once_and_tagged_by_content_hash() {
    use sha2::Digest;
    let s = Setup::without_image();
    // A repository's Dockerfile.odek needs approval (tested in fake_approval).
    let s = s.env("ODEK_APPROVE_PROJECT_SANDBOX", "1");
    let dockerfile = "FROM odek-test/base:1\nRUN true\n";
    std::fs::write(s.workdir.join("Dockerfile.odek"), dockerfile).expect("write");
    let digest = sha2::Sha256::digest(dockerfile.as_bytes());
    let tag = format!("odek-sandbox:{}", hex::encode(&digest[..12]));
    let sb = s.up().await.expect("launch");
    assert_eq!(sb.plan.image.reference.original, tag);
    let builds = s.fake.builds();
    assert_eq!(builds.len(), 1);
    assert_eq!(builds[0].0, tag);
    assert!(s.fake.calls_of(Op::PullImage).is_empty(), "never pulled");
    s.up().await.expect("second launch");
    assert_eq!(s.fake.builds().len(), 1, "built once");
}

#[tokio::test]
async fn dockerfile_odek_context_respects_dockerignore_and_hides_odek_home() {
    let s = Setup::without_image();
    std::fs::write(s.workdir.join("Dockerfile.odek"), "FROM odek-test/base:1\n").expect("write");
    std::fs::write(s.workdir.join(".dockerignore"), "secret.txt\nlogs\n").expect("write");
    std::fs::write(s.workdir.join("secret.txt"), "s3cr3t").expect("write");
    std::fs::write(s.workdir.join("keep.txt"), "k").expect("write");
    std::fs::create_dir_all(s.workdir.join("logs")).expect("mkdir");
    std::fs::write(s.workdir.join("logs/a.log"), "x").expect("write");
    let home = s.workdir.join("odekhome");
    std::fs::create_dir_all(&home).expect("mkdir");
    std::fs::write(home.join("project_sandbox_approvals.json"), "{}").expect("write");
    let s = s
        .env("ODEK_HOME", &home.display().to_string())
        .env("ODEK_APPROVE_PROJECT_SANDBOX", "1");
    s.up().await.expect("launch");
    let paths = tar_paths(&s.fake.builds()[0].1);
    assert!(paths.iter().any(|p| p == "keep.txt"), "{paths:?}");
    assert!(paths.iter().any(|p| p == "Dockerfile.odek"), "{paths:?}");
    for p in &paths {
        assert!(
            !p.starts_with("secret.txt") && !p.starts_with("logs"),
            "ignored file sent: {p}"
        );
        assert!(
            !p.starts_with("odekhome"),
            "$ODEK_HOME sent to the builder: {p}"
        );
    }
}

#[tokio::test]
async fn failed_dockerfile_odek_build_is_a_config_error() {
    let s = Setup::without_image().env("ODEK_APPROVE_PROJECT_SANDBOX", "1");
    std::fs::write(s.workdir.join("Dockerfile.odek"), "FROM nowhere\n").expect("write");
    s.fake
        .fail(Fault::new(Op::BuildImage, 1, EngineErrorKind::Stream));
    let err = s.up().await.expect_err("build fails");
    assert_refused(&s, &err, FailureClass::Config, "Dockerfile.odek");
    assert_eq!(
        s.fake.builds().len() + s.fake.calls_of(Op::BuildImage).len(),
        1,
        "the build was tried"
    );
    assert!(s.fake.calls_of(Op::CreateContainer).is_empty());
    assert!(
        s.reporter.of(WarningKind::Fallback).is_empty(),
        "never a fallback"
    );
}

#[tokio::test]
async fn dockerfile_odek_build_with_the_daemon_gone_is_daemon_unreachable() {
    let s = Setup::without_image()
        .explicit()
        .env("ODEK_APPROVE_PROJECT_SANDBOX", "1");
    std::fs::write(s.workdir.join("Dockerfile.odek"), "FROM x\n").expect("write");
    s.fake
        .fail(Fault::new(Op::BuildImage, 1, EngineErrorKind::Unreachable));
    let err = s.up().await.expect_err("fails");
    assert_refused(&s, &err, FailureClass::DaemonUnreachable, "injected");
}

#[tokio::test]
async fn explicit_image_wins_over_dockerfile_odek() {
    let s = Setup::new();
    std::fs::write(s.workdir.join("Dockerfile.odek"), "FROM x\n").expect("write");
    let sb = s.up().await.expect("launch");
    assert_eq!(sb.plan.image.reference.original, IMAGE);
    assert!(s.fake.builds().is_empty());
}

// ---------------------------------------------------------------------------
// More of SPEC §6.1 / §7.3 found while writing the suite

#[tokio::test]
async fn swap_limit_warning_does_not_make_a_memory_limit_fatal() {
    let s = Setup::new().memory("512m");
    let plan = s.resolve().await.expect("resolve");
    s.fake.set_quirks(Quirks {
        create_warnings: vec![
            "Your kernel does not support swap limit capabilities or the cgroup is not mounted. Memory limited without swap.".into(),
        ],
        ..Quirks::default()
    });
    let sb = s
        .launch(&plan)
        .await
        .expect("the memory limit is applied; only swap is not limited");
    assert!(sb.warnings.iter().any(|w| w.kind == WarningKind::Engine));
    assert_eq!(s.only_container().memory_bytes, 512 * 1024 * 1024);
}

#[tokio::test]
async fn odek_home_reached_through_a_symlink_is_still_masked() {
    let s = Setup::new();
    let inside = s.workdir.join("h");
    std::fs::create_dir_all(&inside).expect("mkdir");
    let link = s.root().join("link-to-work");
    std::os::unix::fs::symlink(&s.workdir, &link).expect("symlink");
    let s = s.env("ODEK_HOME", &link.join("h").display().to_string());
    let _sandbox = s.up().await.expect("launch");
    let c = s.only_container();
    assert!(
        c.tmpfs.contains_key("/workspace/h"),
        "approval store reachable: {:?}",
        c.tmpfs
    );
}

#[tokio::test]
async fn odek_home_with_dot_dot_is_masked_at_its_real_place() {
    let s = Setup::new();
    std::fs::create_dir_all(s.workdir.join("h")).expect("mkdir");
    let odd = s.workdir.join("..").join("work").join("h");
    let s = s.env("ODEK_HOME", &odd.display().to_string());
    let _sandbox = s.up().await.expect("launch");
    let c = s.only_container();
    assert!(c.tmpfs.contains_key("/workspace/h"), "{:?}", c.tmpfs);
}

#[tokio::test]
async fn odek_home_not_yet_created_behind_a_symlink_is_still_masked() {
    let s = Setup::new();
    let link = s.root().join("link-to-work");
    std::os::unix::fs::symlink(&s.workdir, &link).expect("symlink");
    let s = s.env("ODEK_HOME", &link.join("fresh-home").display().to_string());
    let _sandbox = s.up().await.expect("launch");
    let c = s.only_container();
    assert!(
        c.tmpfs.contains_key("/workspace/fresh-home"),
        "approval store reachable: {:?}",
        c.tmpfs
    );
}

#[tokio::test]
async fn odek_home_not_yet_created_with_dot_dot_is_masked_at_its_real_place() {
    let s = Setup::new();
    let odd = s.workdir.join("..").join("work").join("h");
    let s = s.env("ODEK_HOME", &odd.display().to_string());
    let _sandbox = s.up().await.expect("launch");
    let c = s.only_container();
    assert!(c.tmpfs.contains_key("/workspace/h"), "{:?}", c.tmpfs);
}

#[tokio::test]
async fn odek_home_not_yet_created_inside_the_workdir_is_masked() {
    // Positive control for the two tests above: the plain spelling works.
    let s = Setup::new();
    let home = s.workdir.join("h").display().to_string();
    let s = s.env("ODEK_HOME", &home);
    let _sandbox = s.up().await.expect("launch");
    assert!(s.only_container().tmpfs.contains_key("/workspace/h"));
}

/// A removal refused once (the daemon busy with the container's own
/// auto-removal) is tried again, and the container is not reported left.
#[tokio::test]
async fn a_removal_refused_once_is_tried_again() {
    let s = Setup::new();
    let plan = s.resolve().await.expect("resolve");
    s.fake
        .fail(Fault::new(Op::StartContainer, 1, EngineErrorKind::Rejected));
    s.fake.fail(Fault::new(
        Op::RemoveContainer,
        1,
        EngineErrorKind::Rejected,
    ));
    let err = s.launch(&plan).await.expect_err("start fails");
    assert!(
        matches!(
            err,
            Error::Rejected {
                removal: Some(Removal::Removed),
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(s.fake.calls_of(Op::RemoveContainer).len(), 2);
    assert!(s.fake.containers().is_empty(), "{:?}", s.fake.containers());
}

#[tokio::test]
async fn rejected_step_with_a_failed_removal_says_the_container_may_be_left() {
    let s = Setup::new();
    let plan = s.resolve().await.expect("resolve");
    s.fake
        .fail(Fault::new(Op::StartContainer, 1, EngineErrorKind::Rejected));
    // Both tries fail (a refused removal is tried once more).
    for nth in [1, 2] {
        s.fake.fail(Fault::new(
            Op::RemoveContainer,
            nth,
            EngineErrorKind::Rejected,
        ));
    }
    let err = s.launch(&plan).await.expect_err("start fails");
    let name = s.fake.calls_of(Op::CreateContainer)[0].arg.clone();
    let msg = err.to_string();
    assert!(msg.contains(&name) && msg.contains("left behind"), "{msg}");
}

#[tokio::test]
async fn user_config_env_volumes_and_user_reach_the_create_request() {
    let (s, spy) = spied();
    std::fs::create_dir_all(s.workdir.join("cache")).expect("mkdir");
    let s = s.env("SOME_HOST_VAR", "from-host").user_config(
        r#"{"sandbox_env": {"A": "1", "B": "${SOME_HOST_VAR}"},
                "sandbox_volumes": ["./cache:/root/.cache:ro"],
                "sandbox_user": "1000:1000"}"#,
    );
    s.up().await.expect("launch");
    let spec = &spy.specs()[0];
    assert!(spec.env.contains(&"A=1".to_string()), "{:?}", spec.env);
    assert!(
        spec.env.contains(&"B=from-host".to_string()),
        "interpolated"
    );
    assert_eq!(spec.user.as_deref(), Some("1000:1000"));
    let v = spec
        .binds
        .iter()
        .find(|b| b.target == "/root/.cache")
        .expect("volume bind");
    assert_eq!(v.source, s.workdir.join("cache").display().to_string());
    assert!(v.read_only);
}

#[tokio::test]
async fn env_values_never_end_up_in_labels() {
    let (s, spy) = spied();
    let s = s
        .env("SOME_HOST_VAR", "from-host-secret")
        .user_config(r#"{"sandbox_env": {"TOKEN": "${SOME_HOST_VAR}"}}"#);
    s.up().await.expect("launch");
    let spec = &spy.specs()[0];
    assert!(
        spec.env.contains(&"TOKEN=from-host-secret".to_string()),
        "positive control"
    );
    for (k, value) in &spec.labels {
        assert!(
            !value.contains("from-host-secret"),
            "env value leaked into label {k}"
        );
    }
}

#[tokio::test]
async fn volumes_escaping_the_workdir_are_refused_before_docker() {
    for vol in [
        "../outside:/x",
        "/etc:/x",
        "/var/run/docker.sock:/var/run/docker.sock",
    ] {
        let s = Setup::new().user_config(&format!(r#"{{"sandbox_volumes": [{vol:?}]}}"#));
        let err = s.resolve().await.expect_err(vol);
        assert_refused_before_create(&s, &err, FailureClass::Config, "volume");
        assert!(s.fake.calls().is_empty(), "{vol}: {:?}", s.fake.calls());
    }
}

#[tokio::test]
async fn a_symlinked_volume_is_refused() {
    let s = Setup::new();
    std::fs::create_dir_all(s.root().join("elsewhere")).expect("mkdir");
    std::os::unix::fs::symlink(s.root().join("elsewhere"), s.workdir.join("link"))
        .expect("symlink");
    let s = s.user_config(r#"{"sandbox_volumes": ["./link:/x"]}"#);
    let err = s.resolve().await.expect_err("symlink");
    assert_refused_before_create(&s, &err, FailureClass::Config, "volume");
}

// ---------------------------------------------------------------------------
// The image check of a lazily launched sandbox (odek mcp's start-up)

/// Present, pullable, unavailable and built images are told apart without
/// pulling or building anything: no image is added, no container created.
#[tokio::test]
async fn the_image_check_tells_present_pullable_unavailable_and_build_apart() {
    use odek_core::image::ImageCheck;
    let s = Setup::new();
    let plan = s.resolve().await.expect("plan");
    assert_eq!(
        s.odek.image_check(&plan).await,
        ImageCheck::Present {
            reference: IMAGE.into()
        }
    );

    let s = Setup::new().image("odek-test/pulled:1");
    s.fake
        .add_registry_image(FakeImage::new("odek-test/pulled:1"));
    let plan = s.resolve().await.expect("plan");
    let check = s.odek.image_check(&plan).await;
    assert!(
        matches!(&check, ImageCheck::Pullable { reference, digest }
            if reference == "odek-test/pulled:1" && digest.starts_with("sha256:")),
        "{check:?}"
    );
    assert!(check.sentence().contains("first launch pulls it"));
    assert!(s.fake.containers().is_empty());
    assert!(s.fake.calls_of(Op::PullImage).is_empty(), "nothing pulled");

    let s = Setup::new().image("odek-test/nowhere:1");
    let plan = s.resolve().await.expect("plan");
    let check = s.odek.image_check(&plan).await;
    assert!(
        matches!(&check, ImageCheck::Unavailable { why, .. } if why.contains("manifest unknown")),
        "{check:?}"
    );
    assert!(
        check.sentence().contains("NOT AVAILABLE"),
        "{}",
        check.sentence()
    );

    let s = Setup::with_fake(shop_fake());
    std::fs::write(s.workdir.join("Dockerfile.odek"), "FROM scratch\n").expect("dockerfile");
    let plan = s.resolve().await.expect("plan");
    assert!(
        matches!(s.odek.image_check(&plan).await, ImageCheck::Build { .. }),
        "a Dockerfile.odek is built on first launch"
    );
    assert!(s.fake.calls_of(Op::BuildImage).is_empty(), "nothing built");
}
