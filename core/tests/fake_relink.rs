//! A sandbox's own network (SPEC §4.4) against the fake engine: a Compose
//! project's `down` removes its networks while a sandbox reaches it, its
//! `up` is connected again before the next call, a network the project's
//! `odek.json` asked for is connected again only with an approval of its
//! new ID, and the link network goes with its sandbox.

mod common;

use common::*;
use odek_core::approval::{Approval, ApprovalError, Decision};
use odek_core::approve::{Asker, NoAsker};
use odek_core::engine::{DockerApi, FakeNetwork, Op};
use odek_core::{Command, Error, ExecOptions, ExecRequest, LaunchOptions};

const SERVICES: [(&str, &str, &str); 2] = [
    ("shop-redis-1", "redis", SHOP_DEFAULT),
    ("shop-postgres-1", "postgres", SHOP_BACKEND),
];

/// `docker compose down`: the services removed, then the project's
/// networks — which the engine refuses while anything holds an endpoint.
async fn compose_down(s: &Setup) {
    for id in s.fake.containers() {
        let c = s.fake.container(&id).expect("container");
        if c.labels
            .get("com.docker.compose.project")
            .map(String::as_str)
            == Some(PROJECT)
        {
            s.fake.remove_service(&id);
        }
    }
    for name in [SHOP_DEFAULT, SHOP_BACKEND] {
        let id = s.fake.network_id(name).expect("the project's network");
        let removed = DockerApi::remove_network(&s.fake, &id)
            .await
            .expect("compose down removes the project's networks");
        assert!(removed);
    }
}

/// `docker compose up` again: new networks (new IDs) of the same names,
/// labelled `project`, and the services on them. Returns the new IDs.
fn compose_up(s: &Setup, project: &str) -> Vec<String> {
    let mut ids = Vec::new();
    for (name, svc, net) in SERVICES {
        let id = match s.fake.network_id(net) {
            Some(id) => id,
            // As the project's Compose file says: shop_backend internal.
            None if net == SHOP_BACKEND => s
                .fake
                .add_network(FakeNetwork::bridge(net).compose(project).internal()),
            None => s
                .fake
                .add_network(FakeNetwork::bridge(net).compose(project)),
        };
        s.fake.add_service(
            name,
            &id,
            &[svc],
            &[
                ("com.docker.compose.project", project),
                ("com.docker.compose.service", svc),
            ],
        );
        ids.push(id);
    }
    ids
}

/// The aliases service `name` has on the link network `link`, if it is
/// connected.
fn on_link(s: &Setup, name: &str, link: &str) -> Option<Vec<String>> {
    s.fake.containers().into_iter().find_map(|id| {
        let c = s.fake.container(&id)?;
        (c.name == name)
            .then(|| {
                c.endpoints
                    .iter()
                    .find(|e| e.network_id == link)
                    .map(|e| e.aliases.clone())
            })
            .flatten()
    })
}

fn true_cmd() -> ExecRequest {
    ExecRequest {
        command: Command::Shell("true".into()),
        env: Vec::new(),
        timeout: None,
        workdir: None,
    }
}

/// Answers every approval question with `once`.
struct Yes;

impl Asker for Yes {
    type Error = Error;

    async fn ask(
        &self,
        _req: &odek_core::approval::ApprovalRequest,
    ) -> Result<Option<Decision>, Error> {
        Ok(Some(Decision::Once))
    }
}

#[tokio::test]
async fn compose_down_and_up_with_a_sandbox_open_reaches_the_new_services() {
    let s = Setup::new().compose(PROJECT).services();
    let sb = s.up().await.expect("launch");
    let link = s.link_id(&sb.name);
    for (name, svc, _) in SERVICES {
        assert_eq!(on_link(&s, name, &link), Some(vec![svc.to_string()]));
    }
    // Nothing to do: one list call, nothing connected.
    let lists = s.fake.calls_of(Op::ListContainers).len();
    let connects = s.fake.calls_of(Op::ConnectNetwork).len();
    let r = s.odek.relink(&sb, &NoAsker).await.expect("relink");
    assert!(r.connected.is_empty() && r.recreated.is_empty(), "{r:?}");
    assert_eq!(s.fake.calls_of(Op::ListContainers).len(), lists + 1);
    assert_eq!(s.fake.calls_of(Op::ConnectNetwork).len(), connects);

    for round in 0..3 {
        compose_down(&s).await;
        let new_ids = compose_up(&s, PROJECT);
        assert!(
            !new_ids.contains(&SHOP_DEFAULT_ID.to_string()),
            "round {round}"
        );
        // The next command connects them first.
        s.odek
            .exec(&sb, &true_cmd(), &ExecOptions::default(), &|_, _| {})
            .await
            .expect("exec");
        for (name, svc, _) in SERVICES {
            assert_eq!(
                on_link(&s, name, &link),
                Some(vec![svc.to_string()]),
                "round {round}: {name} is reachable again"
            );
        }
        let env = s.odek.describe(&sb).await.expect("describe");
        let names: Vec<String> = env
            .networks
            .iter()
            .flat_map(|n| n.peers.iter().flat_map(|p| p.names.clone()))
            .collect();
        assert!(
            names.contains(&"redis".to_string()) && names.contains(&"postgres".to_string()),
            "round {round}: {env:?}"
        );
    }
}

/// While the project is down, a call says that its networks are gone (the
/// project is down) and the command runs anyway (SPEC §4.4: a project may
/// go down while a sandbox works); once it is up, nothing is said. A
/// network with running services costs no extra call.
#[tokio::test]
async fn a_project_that_is_down_is_said_and_the_command_runs_anyway() {
    let s = Setup::new().compose(PROJECT).services();
    let sb = s.up().await.expect("launch");
    let nets = s.fake.calls_of(Op::ListNetworks).len();
    let r = s.odek.relink(&sb, &NoAsker).await.expect("relink");
    assert!(r.down.is_empty(), "{r:?}");
    assert_eq!(
        s.fake.calls_of(Op::ListNetworks).len(),
        nets,
        "services running: no extra call"
    );

    compose_down(&s).await;
    let r = s.odek.relink(&sb, &NoAsker).await.expect("relink");
    let mut down: Vec<&str> = r.down.iter().map(|(n, _)| n.as_str()).collect();
    down.sort_unstable();
    let mut want = [SHOP_DEFAULT, SHOP_BACKEND];
    want.sort_unstable();
    assert_eq!(down, want, "{r:?}");
    assert!(
        r.down.iter().all(|(_, p)| p.as_deref() == Some(PROJECT)),
        "{r:?}"
    );
    let notes = r.notes(&sb.name);
    assert_eq!(notes.len(), 1, "{notes:?}");
    let note = &notes[0];
    assert!(note.contains(&sb.name), "{note}");
    assert!(
        note.contains(SHOP_DEFAULT) && note.contains(SHOP_BACKEND),
        "{note}"
    );
    assert!(
        note.contains(&format!("Compose project {PROJECT} is down")),
        "{note}"
    );
    assert!(note.contains("the command runs anyway"), "{note}");
    // The command runs (its own relink says the same and refuses nothing).
    let out = s
        .odek
        .exec(&sb, &true_cmd(), &ExecOptions::default(), &|_, _| {})
        .await
        .expect("the command runs while the project is down");
    assert_eq!(out.exit_code, 0);

    compose_up(&s, PROJECT);
    let r = s.odek.relink(&sb, &NoAsker).await.expect("relink");
    assert!(r.down.is_empty(), "{r:?}");
    assert!(
        r.notes(&sb.name).iter().all(|n| !n.contains("down")),
        "{r:?}"
    );
}

#[tokio::test]
async fn a_network_recreated_under_another_project_is_not_connected() {
    let s = Setup::new().compose(PROJECT).services();
    let sb = s.up().await.expect("launch");
    let link = s.link_id(&sb.name);
    compose_down(&s).await;
    // Someone else's network of the same names.
    compose_up(&s, "other");
    let r = s.odek.relink(&sb, &NoAsker).await.expect("relink");
    assert!(r.connected.is_empty() && r.recreated.is_empty(), "{r:?}");
    for (name, _, _) in SERVICES {
        assert_eq!(on_link(&s, name, &link), None, "{name}");
    }
}

#[tokio::test]
async fn a_project_network_recreated_is_connected_only_with_an_approval_of_its_new_id() {
    let s = Setup::new()
        .project_config(r#"{"sandbox_compose_project": "shop"}"#)
        .services();
    let plan = s.resolve().await.expect("resolve");
    let approval: Approval = s.odek.approve(&plan, Decision::Once).expect("approve");
    let sb = s
        .odek
        .launch(
            &plan,
            &LaunchOptions {
                approval: Some(approval),
                ..LaunchOptions::default()
            },
            &s.reporter,
        )
        .await
        .expect("launch");
    let link = s.link_id(&sb.name);
    compose_down(&s).await;
    compose_up(&s, PROJECT);
    let execs = s.fake.calls_of(Op::Exec).len();
    let err = s
        .odek
        .exec(&sb, &true_cmd(), &ExecOptions::default(), &|_, _| {})
        .await
        .expect_err("nobody approved the new IDs");
    assert!(
        matches!(&err, Error::Approval(ApprovalError::Recreated { .. })),
        "{err:?}"
    );
    assert!(err.to_string().contains("odek approve -C"), "{err}");
    assert_eq!(s.fake.calls_of(Op::Exec).len(), execs, "nothing ran");
    for (name, _, _) in SERVICES {
        assert_eq!(on_link(&s, name, &link), None, "{name} is not connected");
    }
    // The user approves (MCP elicitation's answer): connected, and
    // remembered for the next calls.
    let r = s.odek.relink(&sb, &Yes).await.expect("approved");
    assert_eq!(r.recreated.len(), 2, "{r:?}");
    for (name, svc, _) in SERVICES {
        assert_eq!(on_link(&s, name, &link), Some(vec![svc.to_string()]));
    }
    s.odek
        .exec(&sb, &true_cmd(), &ExecOptions::default(), &|_, _| {})
        .await
        .expect("accepted IDs stay accepted in this process");
}

#[tokio::test]
async fn the_link_network_goes_with_its_sandbox_and_an_orphan_with_the_next_launch() {
    let s = Setup::new().compose(PROJECT).services();
    let sb = s.up().await.expect("launch");
    s.odek.destroy(&sb).await.expect("destroy");
    assert!(
        s.fake.link_networks().is_empty(),
        "{:?}",
        s.fake.link_networks()
    );
    // Its owner killed: the engine removed the container, nobody the link.
    let sb = s.up().await.expect("launch");
    let link = s.link_id(&sb.name);
    s.fake
        .remove_service(sb.container_id.as_deref().expect("id"));
    assert_eq!(s.fake.link_networks().len(), 1);
    // Its owner still lives (as a launch in flight's does): kept.
    let second = s.up().await.expect("launch");
    assert_eq!(
        s.fake.link_networks().len(),
        2,
        "a live owner's young link is kept"
    );
    s.odek.destroy(&second).await.expect("destroy");
    // Its owner provably gone: collected by the next launch.
    // No process ever has PID pid_max (PIDs stay below it).
    let dead_pid: u64 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .expect("pid_max")
        .trim()
        .parse()
        .expect("a number");
    // Signed again with this user's key, as odek signs a link network
    // (a label changed without the key is never trusted: see
    // `a_forged_link_label_is_never_swept_and_gc_names_it`).
    let key = odek_core::secret::Secret::load(&s.odek_home)
        .expect("key")
        .expect("made at launch");
    s.fake.update_network(&link, |n| {
        n.labels.insert(
            odek_core::labels::OWNER_PID.to_string(),
            dead_pid.to_string(),
        );
        let name = n.name.clone();
        odek_core::labels::sign_network(&key, &name, &mut n.labels);
    });
    let next = s.up().await.expect("launch");
    assert_eq!(
        s.fake.link_networks(),
        vec![odek_core::link::link_name(&next.name)],
        "the orphan is gone, the new one stays"
    );
    assert_eq!(on_link(&s, "shop-redis-1", &link), None);
}

#[tokio::test]
async fn a_stopped_service_is_disconnected_when_the_sandbox_ends() {
    // `docker compose stop`, then the sandbox ends: the stopped service
    // keeps its endpoint settings, and would not start again on a network
    // that is gone.
    let s = Setup::new().compose(PROJECT).services();
    let sb = s.up().await.expect("launch");
    let link = s.link_id(&sb.name);
    let redis = s
        .fake
        .containers()
        .into_iter()
        .find(|id| {
            s.fake
                .container(id)
                .is_some_and(|c| c.name == "shop-redis-1")
        })
        .expect("redis");
    assert!(on_link(&s, "shop-redis-1", &link).is_some());
    s.fake.stop_container(&redis);
    s.odek.destroy(&sb).await.expect("destroy");
    let c = s.fake.container(&redis).expect("redis");
    assert!(
        c.endpoints.iter().all(|e| e.network_id != link),
        "the stopped service still names the removed link: {:?}",
        c.endpoints
    );
    assert!(s.fake.link_networks().is_empty());
}
