//! Docker Swarm stacks (`sandbox_stack`, SPEC §4.1, §7.3, §9.1) against the
//! fake engine: a stack's networks found by `com.docker.stack.namespace`,
//! its overlays accepted only when `Attachable`, every refusal before
//! anything is created, and an approval bound to the overlays' IDs, scope
//! and `Attachable` flag.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::*;
use odek_core::approval::Decision;
use odek_core::config::{ConfigInputs, Layer};
use odek_core::engine::{FakeEngine, FakeNetwork, Op};
use odek_core::network::NetworkOrigin;
use odek_core::{Client, FailureClass, LaunchOptions, Silent};

const STACK: &str = "app";
/// Swarm IDs: 25 characters of [0-9a-z].
const APP_DEFAULT_ID: &str = "5a5a5a5a5a5a5a5a5a5a5a5ax";
const APP_BACKEND_ID: &str = "6b6b6b6b6b6b6b6b6b6b6b6by";

/// The shop fixture plus stack `app`: overlays `app_default` and
/// `app_backend` (internal), both attachable unless `attachable` is false
/// for `app_backend`.
fn stack_fake(backend_attachable: bool) -> FakeEngine {
    let fake = shop_fake();
    fake.add_network(
        FakeNetwork::bridge("app_default")
            .stack(STACK, true)
            .id(APP_DEFAULT_ID),
    );
    fake.add_network(
        FakeNetwork::bridge("app_backend")
            .stack(STACK, backend_attachable)
            .internal()
            .id(APP_BACKEND_ID),
    );
    fake
}

/// The stack's tasks as Swarm runs them on this node: `app_redis.1.<id>`
/// on app_default and `app_postgres.1.<id>` on app_backend, with no alias
/// of their service's name (Swarm answers for that from its own records:
/// inspect shows only the short ID), labelled as Swarm labels them.
fn add_tasks(fake: &FakeEngine) {
    for (name, svc, net) in [
        ("app_redis.1.x7k2", "redis", APP_DEFAULT_ID),
        ("app_postgres.1.q9m4", "postgres", APP_BACKEND_ID),
    ] {
        let full = format!("{STACK}_{svc}");
        fake.add_service(
            name,
            net,
            &[],
            &[
                ("com.docker.stack.namespace", STACK),
                ("com.docker.swarm.service.name", full.as_str()),
                ("com.docker.swarm.task.name", name),
            ],
        );
    }
}

/// `--sandbox-stack <stack>`.
fn with_stack(s: Setup, stack: &str) -> Setup {
    let v = stack.to_string();
    s.flag("sandbox_stack", "--sandbox-stack", |l| {
        l.sandbox_stack = Some(v)
    })
}

/// Resolves and expects a config refusal naming `needle`, with no mutation
/// (nothing created, nothing run, no container or link network left).
async fn refused(s: &Setup, needle: &str) -> String {
    let err = s.resolve().await.expect_err("must be refused");
    assert_refused_before_create(s, &err, FailureClass::Config, needle);
    assert!(s.fake.calls_of(Op::CreateContainer).is_empty());
    assert!(s.fake.calls_of(Op::Exec).is_empty());
    err.to_string()
}

#[tokio::test]
async fn a_stacks_attachable_overlays_resolve_by_label_to_full_ids() {
    let s = with_stack(Setup::with_fake(stack_fake(true)).image(IMAGE), STACK);
    let plan = s.resolve().await.expect("resolve");
    let got: Vec<(&str, &str)> = plan
        .networks
        .iter()
        .map(|n| (n.name.as_str(), n.id.as_str()))
        .collect();
    // Sorted by name; found by the label, never by a guessed name.
    assert_eq!(
        got,
        [
            ("app_backend", APP_BACKEND_ID),
            ("app_default", APP_DEFAULT_ID)
        ]
    );
    for n in &plan.networks {
        assert_eq!(n.driver, "overlay");
        assert_eq!(n.scope, "swarm");
        assert!(n.attachable);
        assert_eq!(n.stack.as_deref(), Some(STACK));
        assert_eq!(
            n.origins,
            [NetworkOrigin::Stack {
                stack: STACK.into(),
                source: n.origins[0].clone().source_of(),
            }]
        );
    }
    // The lookup was the server-side label filter.
    let lists: Vec<String> = s
        .fake
        .calls_of(Op::ListNetworks)
        .into_iter()
        .map(|c| c.arg)
        .collect();
    assert!(
        lists
            .iter()
            .any(|a| a.contains("com.docker.stack.namespace=app")),
        "{lists:?}"
    );
    assert!(plan.internet, "app_default is not internal");
    assert!(s.fake.no_mutation());
}

/// `NetworkOrigin`'s source, for the comparison above.
trait SourceOf {
    fn source_of(self) -> odek_core::config::Source;
}
impl SourceOf for NetworkOrigin {
    fn source_of(self) -> odek_core::config::Source {
        match self {
            NetworkOrigin::Named { source, .. }
            | NetworkOrigin::Compose { source, .. }
            | NetworkOrigin::Stack { source, .. } => source,
        }
    }
}

#[tokio::test]
async fn a_stack_sandbox_reaches_the_tasks_by_service_name_and_is_told_the_services() {
    let s = with_stack(Setup::with_fake(stack_fake(true)).image(IMAGE), STACK);
    add_tasks(&s.fake);
    let sb = s.up().await.expect("launch");
    // SPEC §4.4: the tasks are connected to the sandbox's link network
    // under the service's name in the stack.
    let link = s.link_id(&sb.name);
    let info = odek_core::engine::DockerApi::inspect_network(&s.fake, &link)
        .await
        .expect("inspect")
        .expect("link network");
    let members: Vec<String> = info.containers.values().cloned().collect();
    assert!(
        members.iter().any(|m| m.starts_with("app_redis.1."))
            && members.iter().any(|m| m.starts_with("app_postgres.1.")),
        "{members:?}"
    );
    // Under the service's name in the stack: `redis`, `postgres`.
    for (task, alias) in [("app_redis.1.", "redis"), ("app_postgres.1.", "postgres")] {
        let id = s
            .fake
            .containers()
            .into_iter()
            .find(|id| {
                s.fake
                    .container(id)
                    .is_some_and(|c| c.name.starts_with(task))
            })
            .expect("task");
        let c = s.fake.container(&id).expect("task");
        let ep = c
            .endpoints
            .iter()
            .find(|e| e.network_id == link)
            .expect("on the link network");
        assert!(
            ep.aliases.iter().any(|a| a == alias),
            "{task}: {:?}",
            ep.aliases
        );
    }
    // The member check keeps them (no foreign member disconnected).
    let again = s.odek.relink(&sb, &odek_core::approve::NoAsker).await;
    assert!(again.is_ok(), "{again:?}");
    assert!(
        s.fake.calls_of(Op::DisconnectNetwork).is_empty(),
        "{:?}",
        s.fake.calls_of(Op::DisconnectNetwork)
    );
    let env = s.odek.describe(&sb).await.expect("describe");
    let block = odek_core::describe::render_prompt(&env);
    for n in &env.networks {
        assert_eq!(n.stack.as_deref(), Some(STACK), "{env:#?}");
    }
    let names: Vec<&str> = env
        .networks
        .iter()
        .flat_map(|n| n.peers.iter().map(|p| p.names[0].as_str()))
        .collect();
    assert!(
        names.contains(&"redis") && names.contains(&"postgres"),
        "{names:?}"
    );
    assert!(
        block.contains("Swarm stack app, its services with a task on this engine's node"),
        "{block}"
    );
}

#[tokio::test]
async fn a_non_attachable_stack_network_is_refused_naming_attachable_true() {
    let s = with_stack(Setup::with_fake(stack_fake(false)).image(IMAGE), STACK);
    add_tasks(&s.fake);
    let msg = refused(&s, "attachable: true").await;
    assert!(msg.contains("app_backend"), "{msg}");
    assert!(
        msg.contains("networks: backend:"),
        "names it as in the stack file: {msg}"
    );
    assert!(msg.contains("docker stack deploy"), "{msg}");
}

#[tokio::test]
async fn a_stack_that_is_not_running_is_refused_naming_the_deploy() {
    let s = with_stack(Setup::with_fake(stack_fake(true)).image(IMAGE), "ap");
    let msg = refused(&s, "Swarm stack \"ap\" is not running").await;
    assert!(
        msg.contains("docker stack deploy -c <stack file> ap"),
        "{msg}"
    );
    assert!(msg.contains("--sandbox-stack"), "names the source: {msg}");
    assert!(msg.contains("stacks it lists: app"), "{msg}");
}

#[tokio::test]
async fn an_engine_without_stacks_says_to_check_swarm_mode() {
    let s = with_stack(Setup::new(), STACK);
    let msg = refused(&s, "is not running").await;
    assert!(msg.contains("swarm mode"), "{msg}");
}

#[tokio::test]
async fn a_stack_name_outside_the_charset_is_refused_before_the_engine_is_asked() {
    for bad in ["", "-app", "app stack", "app/x", &"a".repeat(64)] {
        let s = with_stack(Setup::with_fake(stack_fake(true)).image(IMAGE), bad);
        let err = s.resolve().await.expect_err(bad);
        assert_refused_before_create(&s, &err, FailureClass::Config, "sandbox_stack");
        assert!(
            s.fake.calls_of(Op::ListNetworks).is_empty(),
            "{bad:?}: the engine was asked"
        );
    }
}

#[tokio::test]
async fn an_overlay_not_of_the_stack_by_name_stays_refused() {
    // SPEC §4.1: only a stack's attachable overlays are accepted, and only
    // through sandbox_stack; named, an overlay is refused by driver.
    let s = Setup::with_fake(stack_fake(true))
        .image(IMAGE)
        .networks(&["app_default"]);
    refused(&s, "uses driver \"overlay\" with scope \"swarm\"").await;
}

#[tokio::test]
async fn a_stack_network_of_another_driver_is_refused() {
    let fake = stack_fake(true);
    fake.add_network(
        FakeNetwork::bridge("app_mac")
            .stack(STACK, true)
            .driver("macvlan", "swarm"),
    );
    let s = with_stack(Setup::with_fake(fake).image(IMAGE), STACK);
    refused(&s, "uses driver \"macvlan\"").await;
}

#[tokio::test]
async fn a_stack_network_whose_name_another_network_carries_is_ambiguous() {
    let fake = stack_fake(true);
    let dup = fake.add_network(FakeNetwork::bridge("app_default"));
    let s = with_stack(Setup::with_fake(fake).image(IMAGE), STACK);
    let msg = refused(&s, "ambiguous").await;
    assert!(
        msg.contains(&dup[..12]) && msg.contains(&APP_DEFAULT_ID[..12]),
        "{msg}"
    );
}

#[tokio::test]
async fn more_than_eight_networks_with_a_stack_are_refused() {
    let fake = stack_fake(true);
    for i in 0..7 {
        fake.add_network(FakeNetwork::bridge(&format!("app_n{i}")).stack(STACK, true));
    }
    let s = with_stack(Setup::with_fake(fake).image(IMAGE), STACK);
    refused(&s, "at most 8").await;
}

#[tokio::test]
async fn a_stack_with_the_sandbox_off_is_refused() {
    let s = with_stack(Setup::with_fake(stack_fake(true)).image(IMAGE), STACK).no_sandbox();
    let msg = refused(&s, "sandbox_stack from").await;
    assert!(msg.contains("--sandbox-stack"), "{msg}");
}

#[tokio::test]
async fn an_unreachable_daemon_with_a_stack_is_fatal_never_the_host() {
    let s = with_stack(Setup::with_fake(stack_fake(true)).image(IMAGE), STACK);
    s.fake.set_reachable(false);
    let err = s.resolve().await.expect_err("no fallback with networks");
    assert_eq!(err.class(), FailureClass::DaemonUnreachable, "{err}");
    assert!(s.fake.no_mutation());
    assert!(s.fake.containers().is_empty());
}

// --- Approval (SPEC §7.3): the project's stack -------------------------

struct World {
    fake: FakeEngine,
    odek: Client,
    dir: tempfile::TempDir,
    home: tempfile::TempDir,
}

fn world(fake: FakeEngine) -> World {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("odek.json"),
        format!(r#"{{"sandbox_stack": "{STACK}"}}"#),
    )
    .expect("write odek.json");
    World {
        odek: Client::with_engine(Arc::new(fake.clone())),
        fake,
        dir,
        home: tempfile::tempdir().expect("tempdir"),
    }
}

impl World {
    fn inputs(&self) -> ConfigInputs {
        ConfigInputs {
            workdir: self.dir.path().to_path_buf(),
            env: BTreeMap::from([
                (
                    "ODEK_HOME".to_string(),
                    self.home.path().display().to_string(),
                ),
                ("HOME".to_string(), self.home.path().display().to_string()),
            ]),
            flags: Layer {
                sandbox_image: Some(IMAGE.into()),
                ..Default::default()
            },
            flag_names: BTreeMap::new(),
            read_user_config: true,
            read_project_config: true,
        }
    }

    /// Sandbox creates (not image probes).
    fn creates(&self) -> usize {
        self.fake
            .calls_of(Op::CreateContainer)
            .iter()
            .filter(|c| !c.arg.ends_with("-probe"))
            .count()
    }
}

#[tokio::test]
async fn a_projects_stack_needs_approval_and_the_card_shows_scope_and_attachable() {
    let w = world(stack_fake(true));
    let plan = w.odek.resolve(&w.inputs(), &Silent).await.expect("resolve");
    let req = plan.approval.clone().expect("approval needed");
    assert_eq!(req.knobs, ["sandbox_stack"]);
    assert_eq!(req.requested_stack.as_deref(), Some(STACK));
    assert_eq!(req.networks.len(), 2);
    for n in &req.networks {
        assert_eq!(n.stack.as_deref(), Some(STACK));
        assert_eq!(n.scope.as_deref(), Some("swarm"));
        assert!(n.attachable);
    }
    assert!(
        req.card.contains("stack=app  scope=swarm  attachable=yes"),
        "{}",
        req.card
    );
    assert!(req.card.contains("stack"), "{}", req.card);
    // Non-interactive without an approval: refused, nothing created.
    let e = w
        .odek
        .launch(&plan, &LaunchOptions::default(), &Silent)
        .await
        .expect_err("no approval");
    assert_eq!(e.class(), FailureClass::Config);
    assert!(e.to_string().contains("needs operator approval"), "{e}");
    assert!(w.fake.no_mutation());
    // Approved: it launches.
    let approval = w.odek.approve(&plan, Decision::Once).expect("approve");
    let opts = LaunchOptions {
        approval: Some(approval),
        ..Default::default()
    };
    let sb = w.odek.launch(&plan, &opts, &Silent).await.expect("launch");
    assert_eq!(sb.applied.expect("applied").networks.len(), 2);
}

#[tokio::test]
async fn the_key_binds_a_stack_overlays_scope_and_attachable_flag() {
    let w = world(stack_fake(true));
    let plan = w.odek.resolve(&w.inputs(), &Silent).await.expect("resolve");
    let req = plan.approval.clone().expect("approval needed");
    // The same IDs as local networks give another key: scope and the flag
    // are part of it.
    let dir = std::path::PathBuf::from(&req.project_dir);
    let ids: Vec<&str> = req.networks.iter().map(|n| n.id.as_str()).collect();
    let input = odek_core::approval::KeyInput {
        project_dir: &dir,
        image: None,
        network: None,
        env_keys: Vec::new(),
        volumes: Vec::new(),
        network_ids: ids,
        runtime: None,
        egress: None,
        egress_network: None,
        engine: Some(&req.engine),
    };
    let bare = {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(odek_core::approval::key_bytes(&input)))
    };
    assert_ne!(bare, req.key, "the key is the IDs alone");
    let parts: Vec<String> = req
        .networks
        .iter()
        .map(|n| format!("{}\0scope:swarm\0attachable:true", n.id))
        .collect();
    let bound = {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(odek_core::approval::key_bytes(
            &odek_core::approval::KeyInput {
                network_ids: parts.iter().map(String::as_str).collect(),
                ..input.clone()
            },
        )))
    };
    assert_eq!(bound, req.key);
}

#[tokio::test]
async fn an_approval_for_a_stack_is_refused_after_its_network_is_recreated() {
    let w = world(stack_fake(true));
    let plan = w.odek.resolve(&w.inputs(), &Silent).await.expect("resolve");
    // Trusted (persisted), as `odek approve` stores it.
    let approval = w.odek.approve(&plan, Decision::Trust).expect("trust");
    // `docker stack rm app` + `docker stack deploy`: same names, new IDs.
    w.fake.remove_network(APP_DEFAULT_ID);
    let new_id = w
        .fake
        .add_network(FakeNetwork::bridge("app_default").stack(STACK, true));
    assert_ne!(new_id, APP_DEFAULT_ID);
    // The approval given before is refused right before create.
    let opts = LaunchOptions {
        approval: Some(approval),
        ..Default::default()
    };
    let e = w
        .odek
        .launch(&plan, &opts, &Silent)
        .await
        .expect_err("the stack's network was recreated");
    let msg = e.to_string();
    assert!(msg.contains("changed since they were approved"), "{msg}");
    assert!(msg.contains(&new_id[..12]), "{msg}");
    assert_eq!(w.creates(), 0, "no create after a failed re-check");
    assert!(w.fake.containers().is_empty());
    // A new resolve is not covered by the stored trust: asked again.
    let plan = w.odek.resolve(&w.inputs(), &Silent).await.expect("resolve");
    let req = plan.approval.clone().expect("approval needed");
    assert!(!req.trusted, "a trust of the old overlay still holds");
    assert!(req.previously_trusted);
    let e = w
        .odek
        .launch(&plan, &LaunchOptions::default(), &Silent)
        .await
        .expect_err("not trusted");
    assert!(e.to_string().contains("needs operator approval"), "{e}");
    assert_eq!(w.creates(), 0);
}
