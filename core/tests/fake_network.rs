//! Network resolution against the fake engine (SPEC §4.1–§4.3): exact-name
//! lookups, ID-prefix refusal, ambiguity, drivers and scopes, Compose
//! projects by label, the cap of 8, union order and de-duplication.

mod common;

use common::*;
use odek_core::engine::{EngineErrorKind, FakeNetwork, Fault, Op};
use odek_core::network::{NetworkOrigin, NetworkSummary};
use odek_core::{FailureClass, WarningKind};

/// Resolves and expects a config refusal naming `needle`, with no mutation.
async fn refused(s: &Setup, needle: &str) -> String {
    let err = s.resolve().await.expect_err("must be refused");
    assert_refused_before_create(s, &err, FailureClass::Config, needle);
    err.to_string()
}

#[tokio::test]
async fn named_network_is_looked_up_by_exact_name() {
    let s = Setup::new().networks(&[SHOP_BACKEND]);
    let plan = s.resolve().await.expect("resolve");
    assert_eq!(plan.networks.len(), 1);
    let n = &plan.networks[0];
    assert_eq!(n.name, SHOP_BACKEND);
    assert_eq!(n.id, SHOP_BACKEND_ID);
    assert!(n.internal);
    assert_eq!(n.compose_project.as_deref(), Some(PROJECT));
    assert_eq!(plan.network_summary, NetworkSummary::Attached);
    assert!(!plan.internet, "only an internal network is attached");
    assert!(plan.warnings.is_empty(), "{:?}", plan.warnings);
    // The lookup was a name list, not an inspect (which would match ID prefixes).
    assert!(
        s.fake.calls_of(Op::InspectNetwork).is_empty(),
        "{:?}",
        s.fake.calls()
    );
    assert!(s.fake.no_mutation());
}

#[tokio::test]
async fn name_that_is_a_substring_of_another_is_not_matched() {
    // Docker's name filter is a substring match: "shop" lists both shop_*.
    let s = Setup::new().networks(&["shop"]);
    let msg = refused(&s, "not found").await;
    assert!(msg.contains("\"shop\""), "{msg}");
}

#[tokio::test]
async fn unknown_network_is_refused_naming_it_and_its_source() {
    let s = Setup::new().networks(&["nope"]);
    let msg = refused(&s, "network \"nope\" not found").await;
    assert!(
        msg.contains("--sandbox-networks"),
        "names the source: {msg}"
    );
}

#[tokio::test]
async fn four_hex_id_prefix_is_refused() {
    let s = Setup::new().networks(&[&SHOP_DEFAULT_ID[..4]]);
    let msg = refused(&s, "ID-prefix lookups are refused").await;
    assert!(msg.contains("\"abcd\""), "{msg}");
    assert!(
        msg.contains(SHOP_DEFAULT),
        "names what Docker matched: {msg}"
    );
}

#[tokio::test]
async fn twelve_hex_id_prefix_is_refused() {
    let s = Setup::new().networks(&[&SHOP_BACKEND_ID[..12]]);
    refused(&s, "ID-prefix lookups are refused").await;
}

#[tokio::test]
async fn another_networks_full_id_used_as_a_name_is_refused() {
    let s = Setup::new().networks(&[SHOP_BACKEND_ID]);
    refused(&s, "ID-prefix lookups are refused").await;
}

#[tokio::test]
async fn network_really_named_like_hex_is_accepted() {
    let s = Setup::new().networks(&["cafe"]);
    let id = s
        .fake
        .add_network(FakeNetwork::bridge("cafe").internal().id(&hex_id("f00d")));
    let plan = s.resolve().await.expect("a network named cafe is fine");
    assert_eq!(plan.networks.len(), 1);
    assert_eq!(plan.networks[0].id, id);
    assert_eq!(plan.networks[0].name, "cafe");
}

#[tokio::test]
async fn exact_name_wins_over_another_networks_id_prefix() {
    let s = Setup::new().networks(&["cafe"]);
    let named = s
        .fake
        .add_network(FakeNetwork::bridge("cafe").internal().id(&hex_id("f00d")));
    s.fake
        .add_network(FakeNetwork::bridge("other").internal().id(&hex_id("cafe1")));
    let plan = s.resolve().await.expect("resolve");
    assert_eq!(plan.networks[0].id, named);
}

#[tokio::test]
async fn duplicate_names_are_ambiguous_with_both_short_ids() {
    let s = Setup::new().networks(&["dup"]);
    let a = s
        .fake
        .add_network(FakeNetwork::bridge("dup").id(&hex_id("aa11")));
    let b = s
        .fake
        .add_network(FakeNetwork::bridge("dup").id(&hex_id("bb22")));
    let msg = refused(&s, "ambiguous").await;
    assert!(msg.contains(&a[..12]) && msg.contains(&b[..12]), "{msg}");
    assert!(!msg.contains(&a[..13]), "short IDs only: {msg}");
}

#[tokio::test]
async fn compose_networks_of_one_name_are_refused_at_resolve_with_both_short_ids() {
    // Docker refuses an ambiguous name only when the container starts,
    // after create; resolve refuses it first.
    let s = Setup::new().compose(PROJECT);
    let a = s.fake.add_network(
        FakeNetwork::bridge("shop_dup")
            .compose(PROJECT)
            .id(&hex_id("aa11")),
    );
    let b = s.fake.add_network(
        FakeNetwork::bridge("shop_dup")
            .compose(PROJECT)
            .internal()
            .id(&hex_id("bb22")),
    );
    let msg = refused(&s, "network name \"shop_dup\" is ambiguous").await;
    assert!(msg.contains(&a[..12]) && msg.contains(&b[..12]), "{msg}");
    assert!(!msg.contains(&a[..13]), "short IDs only: {msg}");
    let err = s.up().await.expect_err("launch refused too");
    assert_refused_before_create(&s, &err, FailureClass::Config, "ambiguous");
    assert!(s.fake.calls_of(Op::CreateContainer).is_empty());
}

#[tokio::test]
async fn compose_network_whose_name_another_network_carries_is_refused() {
    let s = Setup::new().compose(PROJECT);
    let other = s
        .fake
        .add_network(FakeNetwork::bridge(SHOP_DEFAULT).id(&hex_id("cc33")));
    let msg = refused(&s, "network name \"shop_default\" is ambiguous").await;
    assert!(
        msg.contains(&other[..12]) && msg.contains(&SHOP_DEFAULT_ID[..12]),
        "{msg}"
    );
}

#[tokio::test]
async fn non_bridge_drivers_and_swarm_scope_are_refused_naming_the_driver() {
    for (driver, scope) in [
        ("overlay", "swarm"),
        ("macvlan", "local"),
        ("ipvlan", "local"),
        ("host", "local"),
        ("null", "local"),
        ("bridge", "swarm"),
        ("overlay", "local"),
    ] {
        let name = format!("net-{driver}-{scope}");
        let s = Setup::new().networks(&[&name]);
        s.fake.add_network(
            FakeNetwork::bridge(&name)
                .driver(driver, scope)
                .id(&hex_id("e1")),
        );
        let msg = refused(&s, &format!("driver \"{driver}\"")).await;
        assert!(msg.contains(&name), "names the network: {msg}");
        assert!(msg.contains(&format!("scope \"{scope}\"")), "{msg}");
    }
}

#[tokio::test]
async fn compose_project_with_an_overlay_network_is_refused() {
    let s = Setup::new().compose("swarmy");
    s.fake.add_network(
        FakeNetwork::bridge("swarmy_default")
            .compose("swarmy")
            .id(&hex_id("51")),
    );
    s.fake.add_network(
        FakeNetwork::bridge("swarmy_mesh")
            .compose("swarmy")
            .driver("overlay", "swarm")
            .id(&hex_id("52")),
    );
    refused(&s, "driver \"overlay\"").await;
}

#[tokio::test]
async fn compose_project_is_found_by_label_never_by_guessed_name() {
    let s = Setup::new().compose(PROJECT);
    let plan = s.resolve().await.expect("resolve");
    let names: Vec<&str> = plan.networks.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, vec![SHOP_BACKEND, SHOP_DEFAULT], "sorted by name");
    let lists: Vec<String> = s
        .fake
        .calls_of(Op::ListNetworks)
        .into_iter()
        .map(|c| c.arg)
        .collect();
    assert!(
        lists
            .iter()
            .any(|a| a == "Label(\"com.docker.compose.project=shop\")"),
        "server-side label filter: {lists:?}"
    );
    // Found by label; the one name lookup after it checks that the names
    // the label returned are unique (a guessed name is never looked up).
    let calls = s.fake.calls();
    let label_at = calls
        .iter()
        .position(|c| c.op == Op::ListNetworks && c.arg.starts_with("Label("))
        .expect("label lookup");
    let uniqueness = format!("Names({:?})", [SHOP_BACKEND, SHOP_DEFAULT]);
    for (i, c) in calls.iter().enumerate() {
        if c.arg.contains("shop_default") || c.arg.contains("Name(") {
            assert!(
                i > label_at && c.op == Op::ListNetworks && c.arg == uniqueness,
                "<project>_default must never be looked up by name: {} {}",
                c.op,
                c.arg
            );
        }
    }
    for n in &plan.networks {
        assert!(
            matches!(&n.origins[..], [NetworkOrigin::Compose { project, .. }] if project == PROJECT)
        );
    }
    assert!(plan.internet, "shop_default is not internal");
    assert_eq!(plan.network_summary, NetworkSummary::Attached);
}

#[tokio::test]
async fn compose_project_ignores_a_default_network_without_the_label() {
    // An unlabelled `other_default` is never guessed into project `other`.
    let s = Setup::new().compose("other");
    s.fake
        .add_network(FakeNetwork::bridge("other_default").id(&hex_id("0e")));
    let msg = refused(&s, "is not running").await;
    assert!(
        msg.contains("docker compose -p other -f <compose file> up -d"),
        "{msg}"
    );
}

#[tokio::test]
async fn compose_project_not_running_gives_the_up_hint() {
    let s = Setup::new().compose("ghost");
    let msg = refused(&s, "docker compose -p ghost -f <compose file> up -d").await;
    assert!(msg.contains("not running"), "{msg}");
    assert!(msg.contains("--sandbox-compose"), "names the source: {msg}");
}

#[tokio::test]
async fn compose_project_typo_suggests_the_closest_running_project() {
    let s = Setup::new().compose("shopp");
    let msg = refused(&s, "Compose project \"shopp\" is not running").await;
    assert!(msg.contains("did you mean \"shop\"?"), "{msg}");
    assert!(msg.contains("running projects: shop;"), "{msg}");
    assert!(msg.contains("docker compose -p shopp"), "{msg}");
    // Never matched fuzzily: `shop`'s networks are not attached.
    assert!(s.fake.no_mutation());
}

#[tokio::test]
async fn compose_project_far_from_every_running_one_suggests_none() {
    let s = Setup::new().compose("ghost");
    let msg = refused(&s, "is not running").await;
    assert!(!msg.contains("did you mean"), "{msg}");
    assert!(msg.contains("running projects: shop;"), "{msg}");
}

/// Adds eight running projects of other owners (one network each).
fn add_unrelated_projects(s: &Setup) {
    for (i, p) in [
        "alpha", "billing", "crm", "docs", "etl", "forum", "gateway", "shoe",
    ]
    .iter()
    .enumerate()
    {
        s.fake.add_network(
            FakeNetwork::bridge(&format!("{p}_default"))
                .compose(p)
                .id(&hex_id(&format!("{:02x}", 0x40 + i))),
        );
    }
}

#[tokio::test]
async fn compose_project_hint_names_at_most_five_projects_closest_first() {
    let s = Setup::new().compose("shopp");
    add_unrelated_projects(&s);
    let msg = refused(&s, "is not running").await;
    assert!(msg.contains("did you mean \"shop\"?"), "{msg}");
    // shop (1 edit), shoe (2), then the nearest of the rest by distance and name.
    let listed = msg
        .split("running projects: ")
        .nth(1)
        .and_then(|r| r.split(';').next())
        .expect("a running-projects hint");
    let names: Vec<&str> = listed.split(", ").collect();
    assert_eq!(names.len(), 6, "five names and the count: {listed}");
    assert_eq!(&names[..2], ["shop", "shoe"], "{listed}");
    assert_eq!(names[5], "and 4 more", "{listed}");
}

#[tokio::test]
async fn invalid_compose_project_name_hint_is_capped_too() {
    let s = Setup::new().compose("Shop");
    add_unrelated_projects(&s);
    let err = s.resolve().await.expect_err("invalid project name");
    let msg = err.to_string();
    assert!(
        msg.contains("running projects: shop, shoe, ") && msg.ends_with(", and 4 more"),
        "{msg}"
    );
}

#[tokio::test]
async fn invalid_compose_project_name_hints_normalised_and_running_projects() {
    let s = Setup::new().compose("Shop");
    let err = s.resolve().await.expect_err("invalid project name");
    assert_refused_before_create(
        &s,
        &err,
        FailureClass::Config,
        "Compose project name \"Shop\" is not valid",
    );
    let msg = err.to_string();
    assert!(msg.contains("did you mean \"shop\"?"), "{msg}");
    assert!(msg.contains("running projects: shop"), "{msg}");
    // Never matched fuzzily: no lookup of the normalised spelling's networks.
    assert!(
        s.fake
            .calls_of(Op::ListNetworks)
            .iter()
            .all(|c| !c.arg.contains("project=shop")),
        "{:?}",
        s.fake.calls()
    );
}

#[tokio::test]
async fn invalid_compose_project_name_without_running_projects_says_so() {
    let s = Setup::with_fake(bare_fake()).image(IMAGE).compose("my.app");
    let msg = refused(&s, "is not valid").await;
    assert!(msg.contains("did you mean \"myapp\"?"), "{msg}");
    assert!(msg.contains("no Compose project is running"), "{msg}");
}

#[tokio::test]
async fn more_than_eight_networks_is_an_error() {
    let s = Setup::new().compose("big");
    for i in 0..9 {
        s.fake.add_network(
            FakeNetwork::bridge(&format!("big_n{i}"))
                .compose("big")
                .internal()
                .id(&hex_id(&format!("9{i}"))),
        );
    }
    let msg = refused(&s, "9 networks would be attached").await;
    assert!(msg.contains("at most 8"), "{msg}");
}

#[tokio::test]
async fn exactly_eight_networks_are_fine() {
    let s = Setup::new().compose("big");
    for i in 0..8 {
        s.fake.add_network(
            FakeNetwork::bridge(&format!("big_n{i}"))
                .compose("big")
                .internal()
                .id(&hex_id(&format!("8{i}"))),
        );
    }
    let plan = s.resolve().await.expect("8 is the limit");
    assert_eq!(plan.networks.len(), 8);
    let sb = s.launch(&plan).await.expect("launch with 8");
    // SPEC §4.4: the sandbox is on its link network only (created on it,
    // no connect of its own); the eight are what it reaches.
    assert!(s.fake.calls_of(Op::ConnectNetwork).is_empty());
    assert_eq!(s.only_container().network_mode, s.link_id(&sb.name));
    assert_eq!(sb.applied.as_ref().expect("applied").networks.len(), 8);
}

#[tokio::test]
async fn more_than_eight_counts_after_de_duplication() {
    // 7 named + the 2 shop networks of which one is also named = 8 unique.
    let s = Setup::new();
    let mut names = Vec::new();
    for i in 0..6 {
        let n = format!("extra{i}");
        s.fake.add_network(
            FakeNetwork::bridge(&n)
                .internal()
                .id(&hex_id(&format!("7{i}"))),
        );
        names.push(n);
    }
    names.push(SHOP_DEFAULT.to_string());
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let s = s.networks(&refs).compose(PROJECT);
    let plan = s.resolve().await.expect("8 unique networks");
    assert_eq!(plan.networks.len(), 8);
}

#[tokio::test]
async fn union_is_de_duplicated_by_id_in_request_order_then_name() {
    let s = Setup::new()
        .networks(&["zeta", SHOP_DEFAULT])
        .compose(PROJECT);
    s.fake
        .add_network(FakeNetwork::bridge("zeta").internal().id(&hex_id("2e7a")));
    let plan = s.resolve().await.expect("resolve");
    let names: Vec<&str> = plan.networks.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, vec!["zeta", SHOP_DEFAULT, SHOP_BACKEND]);
    let shop_default = &plan.networks[1];
    assert_eq!(
        shop_default.origins.len(),
        2,
        "both sources recorded: {:?}",
        shop_default.origins
    );
    assert!(matches!(
        shop_default.origins[0],
        NetworkOrigin::Named { .. }
    ));
    assert!(matches!(
        shop_default.origins[1],
        NetworkOrigin::Compose { .. }
    ));
    // Deterministic: the same order every time.
    let again = s.resolve().await.expect("resolve again");
    assert_eq!(again.networks, plan.networks);
}

#[tokio::test]
async fn the_same_name_twice_is_attached_once() {
    let s = Setup::new().networks(&[SHOP_BACKEND, SHOP_BACKEND]);
    let plan = s.resolve().await.expect("resolve");
    assert_eq!(plan.networks.len(), 1);
}

#[tokio::test]
async fn every_resolved_network_has_a_full_id() {
    let s = Setup::new().networks(&[SHOP_DEFAULT]).compose(PROJECT);
    let plan = s.resolve().await.expect("resolve");
    for n in &plan.networks {
        assert!(is_full_id(&n.id), "{n:?}");
    }
}

#[tokio::test]
async fn not_internal_attached_network_warns_about_the_internet() {
    let s = Setup::new().networks(&[SHOP_DEFAULT]);
    let plan = s.resolve().await.expect("resolve");
    let w: Vec<_> = plan
        .warnings
        .iter()
        .filter(|w| w.kind == WarningKind::AttachedNetworkNotInternal)
        .collect();
    assert_eq!(w.len(), 1, "{:?}", plan.warnings);
    assert!(w[0].message.contains(SHOP_DEFAULT));
    assert_eq!(
        s.reporter.of(WarningKind::AttachedNetworkNotInternal).len(),
        1
    );
    assert!(plan.internet);
}

#[tokio::test]
async fn bridge_mode_warns_it_reaches_the_host() {
    let s = Setup::new().network_mode("bridge");
    let plan = s.resolve().await.expect("resolve");
    assert_eq!(plan.bridge_network_id.as_deref(), Some(BRIDGE_ID));
    assert!(plan
        .warnings
        .iter()
        .any(|w| w.kind == WarningKind::BridgeReachesHost));
    assert!(!plan
        .warnings
        .iter()
        .any(|w| w.kind == WarningKind::BridgeWithAttached));
    assert_eq!(plan.network_summary, NetworkSummary::Bridge);
}

#[tokio::test]
async fn network_lookup_failing_has_the_engine_class() {
    let s = Setup::new().compose(PROJECT);
    s.fake
        .fail(Fault::new(Op::ListNetworks, 1, EngineErrorKind::Rejected));
    let err = s.resolve().await.expect_err("fails");
    assert_refused_before_create(&s, &err, FailureClass::DockerRejected, "injected");

    let s = Setup::new().networks(&[SHOP_DEFAULT]);
    s.fake.fail(Fault::new(
        Op::ListNetworks,
        1,
        EngineErrorKind::Unreachable,
    ));
    let err = s.resolve().await.expect_err("fails");
    assert_refused_before_create(&s, &err, FailureClass::DaemonUnreachable, "injected");
}

#[tokio::test]
async fn hostile_network_name_is_not_echoed() {
    // A Compose file may choose any name; messages never echo an unsafe one.
    let s = Setup::new().compose("evil");
    let bad = "evil_\u{1b}[31mred";
    s.fake.add_network(
        FakeNetwork::bridge(bad)
            .compose("evil")
            .driver("macvlan", "local")
            .id(&hex_id("e71")),
    );
    let msg = refused(&s, "driver \"macvlan\"").await;
    assert!(!msg.contains('\u{1b}'), "{msg:?}");
    assert!(
        msg.contains(&hex_id("e71")[..12]),
        "short ID instead: {msg}"
    );
}
