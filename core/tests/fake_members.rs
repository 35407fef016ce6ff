//! Who is on a sandbox's own networks (SPEC §4.4) against the fake engine:
//! a container someone connects to the shared `odek-out` (anything but a
//! sandbox of this user's odek) or to the sandbox's link network (anything
//! but the sandbox and its attached networks' running containers under the
//! aliases they have there) is disconnected before the next command and at
//! launch, and said; one that cannot be disconnected refuses the call and
//! nothing runs. A network recreated without the `internal` it had is not
//! accepted by name. Link networks are signed: a forged `dev.odek.link`
//! label gets no network removed. A sandbox's MAC binds its link network:
//! a container with a sandbox's labels copied does not verify.

mod common;

use std::collections::BTreeMap;

use common::*;
use odek_core::approve::NoAsker;
use odek_core::engine::{DockerApi, EngineErrorKind, FakeNetwork, Fault, Op};
use odek_core::inventory::GcOptions;
use odek_core::{Command, Error, ExecOptions, ExecRequest, FailureClass, WarningKind};

fn true_cmd() -> ExecRequest {
    ExecRequest {
        command: Command::Shell("true".into()),
        env: Vec::new(),
        timeout: None,
        workdir: None,
    }
}

/// The ID of the container named `name`.
fn id_of(s: &Setup, name: &str) -> String {
    s.fake
        .containers()
        .into_iter()
        .find(|id| s.fake.container(id).is_some_and(|c| c.name == name))
        .unwrap_or_else(|| panic!("no container {name}"))
}

/// True when container `id` has an endpoint on network `net`.
fn on(s: &Setup, id: &str, net: &str) -> bool {
    s.fake
        .container(id)
        .is_some_and(|c| c.endpoints.iter().any(|e| e.network_id == net))
}

/// The aliases container `id` has on network `net`.
fn aliases(s: &Setup, id: &str, net: &str) -> Option<Vec<String>> {
    s.fake.container(id).and_then(|c| {
        c.endpoints
            .iter()
            .find(|e| e.network_id == net)
            .map(|e| e.aliases.clone())
    })
}

/// A sandbox of the shop project that reaches the internet through
/// `odek-out` (shop_default is not internal, no default bridge).
async fn internet_sandbox(s: &Setup) -> odek_core::Sandbox {
    let sb = s.up().await.expect("launch");
    let out = sb
        .applied
        .as_ref()
        .and_then(|a| a.out_network.clone())
        .expect("on odek-out");
    assert_eq!(s.fake.network_id("odek-out").as_deref(), Some(out.as_str()));
    sb
}

fn out_id(s: &Setup) -> String {
    s.fake.network_id("odek-out").expect("odek-out exists")
}

#[tokio::test]
async fn a_container_connected_to_odek_out_under_a_services_alias_is_disconnected_before_the_next_command(
) {
    let s = Setup::new().compose(PROJECT).services();
    let sb = internet_sandbox(&s).await;
    // Another sandbox of this user's, on odek-out as well: it stays.
    let other = internet_sandbox(&s).await;
    let other_id = other.container_id.clone().expect("id");
    let out = out_id(&s);
    // Someone with Docker access: `docker network connect --alias postgres
    // odek-out evil`, and a container with a sandbox's labels copied.
    let evil = s.fake.add_service("evil", &out, &["postgres"], &[]);
    let copy_labels: Vec<(String, String)> = s
        .fake
        .container(&other_id)
        .expect("other")
        .labels
        .into_iter()
        .collect();
    let copy_refs: Vec<(&str, &str)> = copy_labels
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let copy = s
        .fake
        .add_service("odek-copy", &out, &["postgres"], &copy_refs);
    // Shaped as a sandbox of another $ODEK_HOME's (labels that cannot
    // verify here), answering to its own name only: another user's
    // sandbox belongs on odek-out and takes no service's name.
    let foreign = s.fake.add_service("odek-foreign", &out, &[], &copy_refs);

    let r = s.odek.relink(&sb, &NoAsker).await.expect("relink");
    let names: Vec<&str> = r.disconnected.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names.len(), 2, "{r:?}");
    assert!(
        names.contains(&"evil") && names.contains(&"odek-copy"),
        "{r:?}"
    );
    assert!(r.disconnected.iter().all(|i| i.network == "odek-out"));
    assert!(!on(&s, &evil, &out), "evil is still on odek-out");
    assert!(!on(&s, &copy, &out), "the copy is still on odek-out");
    assert!(
        on(&s, &foreign, &out),
        "another user's sandbox, answering to its own name only, was disconnected"
    );
    assert!(
        on(&s, &other_id, &out),
        "a sandbox of this user's was disconnected"
    );
    assert!(on(&s, sb.container_id.as_deref().expect("id"), &out));
    let notes = r.notes(&sb.name);
    assert!(
        notes
            .iter()
            .any(|n| n.contains("evil") && n.contains("odek-out")),
        "{notes:?}"
    );

    // Through a command: connected again, disconnected again, and the
    // command runs.
    s.fake
        .connect_network(&out, &evil, &["postgres".to_string()])
        .await
        .expect("connect");
    let execs = s.fake.calls_of(Op::Exec).len();
    s.odek
        .exec(&sb, &true_cmd(), &ExecOptions::default(), &|_, _| {})
        .await
        .expect("exec");
    assert!(!on(&s, &evil, &out));
    assert_eq!(s.fake.calls_of(Op::Exec).len(), execs + 1);
}

#[tokio::test]
async fn nothing_runs_when_a_container_on_odek_out_cannot_be_disconnected() {
    let s = Setup::new().compose(PROJECT).services();
    let sb = internet_sandbox(&s).await;
    let out = out_id(&s);
    let evil = s.fake.add_service("evil", &out, &["postgres"], &[]);
    let before = s.fake.containers();
    let execs = s.fake.calls_of(Op::Exec).len();
    s.fake.fail(Fault::new(
        Op::DisconnectNetwork,
        1,
        EngineErrorKind::Rejected,
    ));
    let err = s
        .odek
        .exec(&sb, &true_cmd(), &ExecOptions::default(), &|_, _| {})
        .await
        .expect_err("refused");
    assert_eq!(err.class(), FailureClass::DockerRejected, "{err}");
    assert!(
        err.to_string().contains("evil") && err.to_string().contains("could not be disconnected"),
        "{err}"
    );
    assert_eq!(s.fake.calls_of(Op::Exec).len(), execs, "nothing ran");
    assert_eq!(s.fake.containers(), before, "no container made or left");
    assert!(on(&s, &evil, &out));
}

#[tokio::test]
async fn a_container_connected_to_the_link_network_from_outside_is_disconnected() {
    let s = Setup::new().compose(PROJECT).services();
    let sb = s.up().await.expect("launch");
    let link = s.link_id(&sb.name);
    // A container on none of the sandbox's networks, with a service's alias.
    let lone = s.fake.add_network(FakeNetwork::bridge("elsewhere"));
    let evil = s.fake.add_service("evil", &lone, &[], &[]);
    s.fake
        .connect_network(&link, &evil, &["postgres".to_string()])
        .await
        .expect("connect");
    // A service of the project reconnected to the link with a name it
    // does not have on its network.
    let redis = id_of(&s, "shop-redis-1");
    s.fake
        .disconnect_network(&link, &redis)
        .await
        .expect("disconnect");
    s.fake
        .connect_network(
            &link,
            &redis,
            &["redis".to_string(), "postgres".to_string()],
        )
        .await
        .expect("connect");
    // Another sandbox on this one's link.
    let other = s.up().await.expect("launch");
    let other_id = other.container_id.clone().expect("id");
    s.fake
        .connect_network(&link, &other_id, &[])
        .await
        .expect("connect");

    let r = s.odek.relink(&sb, &NoAsker).await.expect("relink");
    let mut names: Vec<&str> = r.disconnected.iter().map(|i| i.name.as_str()).collect();
    names.sort();
    let mut want = vec!["evil", other.name.as_str(), "shop-redis-1"];
    want.sort();
    assert_eq!(names, want, "{r:?}");
    assert!(!on(&s, &evil, &link));
    assert!(!on(&s, &other_id, &link));
    // The service is connected again under its own aliases only.
    assert_eq!(aliases(&s, &redis, &link), Some(vec!["redis".to_string()]));
    assert_eq!(r.connected, ["shop-redis-1"], "{r:?}");
    let postgres = id_of(&s, "shop-postgres-1");
    assert_eq!(
        aliases(&s, &postgres, &link),
        Some(vec!["postgres".to_string()]),
        "the real postgres stays"
    );

    // Nothing changed since: the endpoint odek made for redis is checked
    // once (one inspect), then each call costs one list call, no inspect.
    let r = s.odek.relink(&sb, &NoAsker).await.expect("relink");
    assert_eq!(r, odek_core::link::Relinked::default());
    let calls = s.fake.calls().len();
    let r = s.odek.relink(&sb, &NoAsker).await.expect("relink");
    assert_eq!(r, odek_core::link::Relinked::default());
    let since: Vec<Op> = s.fake.calls()[calls..].iter().map(|c| c.op).collect();
    assert_eq!(since, [Op::ListContainers], "the check costs one list call");
}

#[tokio::test]
async fn a_launch_disconnects_a_container_that_waits_on_odek_out_and_says_so() {
    let s = Setup::new().compose(PROJECT).services();
    // odek-out exists (a first sandbox made it), and someone waits on it.
    let first = internet_sandbox(&s).await;
    let out = out_id(&s);
    let evil = s.fake.add_service("evil", &out, &["redis"], &[]);
    let sb = internet_sandbox(&s).await;
    assert!(!on(&s, &evil, &out));
    assert!(on(&s, first.container_id.as_deref().expect("id"), &out));
    let w = s.reporter.of(WarningKind::ForeignMember);
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].message.contains("evil") && w[0].message.contains(&sb.name),
        "{w:?}"
    );
    assert!(sb
        .warnings
        .iter()
        .any(|x| x.kind == WarningKind::ForeignMember));
}

#[tokio::test]
async fn a_launch_that_cannot_disconnect_a_stranger_on_odek_out_fails_and_leaves_nothing() {
    let s = Setup::new().compose(PROJECT).services();
    let first = internet_sandbox(&s).await;
    let out = out_id(&s);
    s.fake.add_service("evil", &out, &["redis"], &[]);
    let before = s.fake.containers();
    let links = s.fake.link_networks();
    s.fake.fail(Fault::new(
        Op::DisconnectNetwork,
        1,
        EngineErrorKind::Rejected,
    ));
    let err = s.up().await.expect_err("refused");
    assert_eq!(err.class(), FailureClass::DockerRejected, "{err}");
    assert!(err.to_string().contains("evil"), "{err}");
    assert_eq!(s.fake.containers(), before, "the new sandbox was removed");
    assert_eq!(s.fake.link_networks(), links, "its link network too");
    assert!(s.fake.calls_of(Op::Exec).is_empty(), "nothing ran");
    drop(first);
}

#[tokio::test]
async fn a_network_recreated_without_its_internal_flag_is_refused_and_nothing_runs() {
    // The operator's --sandbox-compose: accepted by name when recreated,
    // but not when it lost `internal`.
    let s = Setup::new().compose(PROJECT).services();
    let sb = s.up().await.expect("launch");
    for id in s.fake.containers() {
        if s.fake
            .container(&id)
            .is_some_and(|c| c.name.starts_with("shop-"))
        {
            s.fake.remove_service(&id);
        }
    }
    s.fake.remove_network(SHOP_BACKEND_ID);
    let forged = s
        .fake
        .add_network(FakeNetwork::bridge(SHOP_BACKEND).compose(PROJECT));
    s.fake.add_service(
        "shop-postgres-1",
        &forged,
        &["postgres"],
        &[("com.docker.compose.project", PROJECT)],
    );
    let before = s.fake.containers();
    let execs = s.fake.calls_of(Op::Exec).len();
    let err = s
        .odek
        .exec(&sb, &true_cmd(), &ExecOptions::default(), &|_, _| {})
        .await
        .expect_err("refused");
    assert!(matches!(err, Error::Rejected { .. }), "{err:?}");
    assert!(
        err.to_string().contains("shop_backend") && err.to_string().contains("internal"),
        "{err}"
    );
    assert_eq!(s.fake.calls_of(Op::Exec).len(), execs, "nothing ran");
    assert_eq!(s.fake.containers(), before, "no container made or left");
    let link = s.link_id(&sb.name);
    assert!(
        !on(&s, &id_of(&s, "shop-postgres-1"), &link),
        "the recreated network's container was connected"
    );
}

#[tokio::test]
async fn a_forged_link_label_gets_no_network_removed_and_gc_names_it() {
    let s = Setup::new().compose(PROJECT).services();
    // A network made by someone else, labelled as the link network of a
    // sandbox that does not exist, with an owner long gone.
    let mut forged = FakeNetwork::bridge("odek-0123456789ab-link").internal();
    forged.info.labels = BTreeMap::from([
        (
            odek_core::labels::LINK.to_string(),
            "odek-0123456789ab".to_string(),
        ),
        (odek_core::labels::SANDBOX.to_string(), "link".to_string()),
        (odek_core::labels::CREATED.to_string(), "1".to_string()),
        (
            odek_core::labels::OWNER_PID.to_string(),
            "4194303".to_string(),
        ),
    ]);
    let forged_id = s.fake.add_network(forged);
    // A launch sweeps orphans first; gc too.
    let sb = s.up().await.expect("launch");
    let report = s
        .odek
        .gc_report(&GcOptions::new(&s.odek_home))
        .await
        .expect("gc");
    assert!(
        s.fake.network_id("odek-0123456789ab-link").as_deref() == Some(forged_id.as_str()),
        "a forged link label got its network removed"
    );
    assert_eq!(
        report.networks_left,
        ["odek-0123456789ab-link"],
        "{report:?}"
    );
    assert!(report.networks.is_empty(), "{report:?}");
    // This user's own orphan (signed, owner gone) is removed and named.
    let link = s.link_id(&sb.name);
    s.fake
        .remove_service(sb.container_id.as_deref().expect("id"));
    let key = odek_core::secret::Secret::load(&s.odek_home)
        .expect("key")
        .expect("made at launch");
    s.fake.update_network(&link, |n| {
        n.labels
            .insert(odek_core::labels::OWNER_PID.into(), "4194303".into());
        let name = n.name.clone();
        odek_core::labels::sign_network(&key, &name, &mut n.labels);
    });
    let report = s
        .odek
        .gc_report(&GcOptions::new(&s.odek_home))
        .await
        .expect("gc");
    assert_eq!(
        report.networks,
        [odek_core::link::link_name(&sb.name)],
        "{report:?}"
    );
    assert!(s
        .fake
        .network_id(&odek_core::link::link_name(&sb.name))
        .is_none());
}

#[tokio::test]
async fn a_container_with_a_sandboxs_labels_copied_under_its_name_does_not_verify() {
    let (s, spy) = spied();
    let s = s.compose(PROJECT).services();
    let sb = s.up().await.expect("launch");
    let spec = spy.specs().pop().expect("create request");
    assert!(s.odek.attach(&sb.name, &s.odek_home).await.is_ok());
    // The sandbox goes (its link network with it); a copy takes its name
    // and labels, on a network named like its link network.
    s.odek.destroy(&sb).await.expect("destroy");
    let relinked = s
        .fake
        .add_network(FakeNetwork::bridge(&odek_core::link::link_name(&sb.name)).internal());
    let mut copy = spec.clone();
    copy.network_mode = relinked;
    let id = s.fake.create_container(&copy).await.expect("create").id;
    s.fake.start_container(&id).await.expect("start");
    let execs = s.fake.calls_of(Op::Exec).len();
    let err = s
        .odek
        .attach(&sb.name, &s.odek_home)
        .await
        .expect_err("a copy is not the sandbox");
    assert!(
        err.to_string()
            .contains("not on the network it was made on"),
        "{err}"
    );
    let listed = s.odek.list(&s.odek_home).await.expect("list");
    assert!(listed.iter().all(|l| !l.verified), "{listed:?}");
    assert_eq!(s.fake.calls_of(Op::Exec).len(), execs, "nothing ran");
}
