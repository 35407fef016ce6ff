//! Approval (SPEC §7) against the fake engine: the gate, the key bound to
//! network IDs, the store, and the re-check right before create.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use odek_core::approval::{Decision, Store};
use odek_core::config::{ConfigInputs, Layer};
use odek_core::engine::{FakeEngine, FakeImage, FakeNetwork, Op, FAKE_ENGINE_ID};
use odek_core::{Client, Error, FailureClass, LaunchOptions, Silent};

struct World {
    fake: FakeEngine,
    odek: Client,
    dir: tempfile::TempDir,
    home: tempfile::TempDir,
}

fn world(project_json: &str) -> World {
    let fake = FakeEngine::new();
    fake.add_image(FakeImage::new("odek-test/base:1"));
    fake.add_network(FakeNetwork::bridge("shop_default").compose("shop"));
    fake.add_network(
        FakeNetwork::bridge("shop_backend")
            .compose("shop")
            .internal(),
    );
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("odek.json"), project_json).expect("write odek.json");
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
                ("SECRET".to_string(), "s3cr3t".to_string()),
            ]),
            flags: Layer {
                sandbox_image: Some("odek-test/base:1".into()),
                ..Default::default()
            },
            flag_names: BTreeMap::new(),
            read_user_config: true,
            read_project_config: true,
        }
    }

    /// Sandbox creates (not the probe that reads an image's paths: its
    /// name ends in `-probe`).
    fn creates(&self) -> usize {
        self.fake
            .calls_of(Op::CreateContainer)
            .iter()
            .filter(|c| !c.arg.ends_with("-probe"))
            .count()
    }

    /// Launches `plan` with `approval`, expecting a refusal (`why` names
    /// the case in the panic); returns the error.
    async fn launch_refused(
        &self,
        plan: &odek_core::Plan,
        approval: odek_core::approval::Approval,
        why: &str,
    ) -> Error {
        let opts = LaunchOptions {
            approval: Some(approval),
            ..Default::default()
        };
        self.odek.launch(plan, &opts, &Silent).await.expect_err(why)
    }
}

const COMPOSE: &str = r#"{"sandbox_compose_project": "shop"}"#;

#[tokio::test]
async fn project_networks_need_approval_and_the_card_lists_ids() {
    let w = world(COMPOSE);
    let plan = w.odek.resolve(&w.inputs(), &Silent).await.expect("resolve");
    let req = plan.approval.clone().expect("approval needed");
    assert_eq!(req.knobs, ["sandbox_compose_project"]);
    assert!(!req.trusted);
    assert_eq!(req.networks.len(), 2);
    for n in &req.networks {
        assert_eq!(n.id.len(), 64);
        assert_eq!(Some(n.id.clone()), w.fake.network_id(&n.name));
        assert_eq!(n.compose_project, "shop");
    }
    let card = req.render_card();
    for n in &req.networks {
        assert!(card.contains(&n.id), "card lacks full ID:\n{card}");
    }
    assert!(
        card.contains("internal=yes") && card.contains("internal=no"),
        "{card}"
    );

    let e = w
        .odek
        .launch(&plan, &LaunchOptions::default(), &Silent)
        .await
        .expect_err("no approval");
    assert_eq!(e.class(), FailureClass::Config);
    assert!(e.to_string().contains("needs operator approval"), "{e}");
    assert!(w.fake.no_mutation(), "a refused launch changed the engine");

    let approval = w.odek.approve(&plan, Decision::Once).expect("approve");
    let opts = LaunchOptions {
        approval: Some(approval),
        ..Default::default()
    };
    let sb = w.odek.launch(&plan, &opts, &Silent).await.expect("launch");
    assert_eq!(sb.applied.expect("applied").networks.len(), 2);
    assert!(
        !Store::new(w.home.path()).contains(&req.key).expect("store"),
        "once is not persisted"
    );
}

#[tokio::test]
async fn operator_sources_never_need_approval() {
    let w = world("{}");
    let mut inputs = w.inputs();
    inputs.flags.sandbox_compose_project = Some("shop".into());
    inputs.flags.sandbox_env = Some(BTreeMap::from([("A".into(), "${SECRET}".into())]));
    let plan = w.odek.resolve(&inputs, &Silent).await.expect("resolve");
    assert!(plan.approval.is_none());
    w.odek
        .launch(&plan, &LaunchOptions::default(), &Silent)
        .await
        .expect("launch without approval");
}

#[tokio::test]
async fn a_network_joining_the_project_after_approval_refuses_the_launch() {
    let w = world(COMPOSE);
    let plan = w.odek.resolve(&w.inputs(), &Silent).await.expect("resolve");
    let approval = w.odek.approve(&plan, Decision::Once).expect("approve");
    let joined = w
        .fake
        .add_network(FakeNetwork::bridge("shop_sneaky").compose("shop"));
    let e = w.launch_refused(&plan, approval, "changed").await;
    let msg = e.to_string();
    assert!(msg.contains("changed since they were approved"), "{msg}");
    assert!(msg.contains("added shop_sneaky"), "{msg}");
    assert!(msg.contains(&joined[..12]), "{msg}");
    assert_eq!(w.creates(), 0, "no create call after a failed re-check");
    assert!(w.fake.containers().is_empty());
}

#[tokio::test]
async fn a_network_joining_the_project_while_the_image_is_checked_refuses_the_launch() {
    // The first re-check passes; the network joins during the image step
    // (a pull or build can take minutes); the re-check right before create
    // catches it.
    let mut w = world(COMPOSE);
    let spy = common::Spy::new(w.fake.clone());
    w.odek = Client::with_engine(spy.clone());
    let plan = w.odek.resolve(&w.inputs(), &Silent).await.expect("resolve");
    let approval = w.odek.approve(&plan, Decision::Once).expect("approve");
    spy.after_call(Op::InspectImage, |fake| {
        fake.add_network(FakeNetwork::bridge("shop_late").compose("shop"));
    });
    let e = w
        .launch_refused(&plan, approval, "changed during the image step")
        .await;
    let msg = e.to_string();
    assert!(msg.contains("added shop_late"), "{msg}");
    assert!(
        !w.fake.calls_of(Op::InspectImage).is_empty(),
        "the change came after the first re-check"
    );
    assert_eq!(w.creates(), 0, "no create call after a failed re-check");
    assert!(w.fake.containers().is_empty());
}

#[tokio::test]
async fn the_key_odek_builds_without_networks_is_the_legacy_layout_then_the_engine() {
    // SPEC §7.3's first vector, through resolve → request (not key_bytes
    // alone): the bytes are written out here by hand, as earlier releases
    // hashed them, then the engine's ID is bound after them.
    let w = world(
        r#"{"sandbox_image": "node:20-alpine", "sandbox_network": "bridge",
            "sandbox_env": {"NODE_ENV": "production", "API_TOKEN": "t"},
            "sandbox_volumes": ["./cache:/root/.cache"]}"#,
    );
    std::fs::create_dir(w.dir.path().join("cache")).expect("mkdir");
    w.fake.add_image(FakeImage::new("node:20-alpine"));
    let mut inputs = w.inputs();
    inputs.flags = Layer::default();
    let plan = w.odek.resolve(&inputs, &Silent).await.expect("resolve");
    let req = plan
        .approval
        .as_ref()
        .expect("the project asks for approval");
    let dir = req.project_dir.clone();
    assert!(dir.starts_with('/'), "{dir}");
    let mut bytes = Vec::new();
    for part in [
        dir.as_str(),
        "node:20-alpine",
        "bridge",
        "env:API_TOKEN",
        "env:NODE_ENV",
        "vol:./cache:/root/.cache",
    ] {
        if !bytes.is_empty() {
            bytes.push(0);
        }
        bytes.extend_from_slice(part.as_bytes());
    }
    use sha2::Digest;
    let legacy = hex::encode(sha2::Sha256::digest(&bytes));
    bytes.push(0);
    bytes.extend_from_slice(format!("engine:{FAKE_ENGINE_ID}").as_bytes());
    let bound = hex::encode(sha2::Sha256::digest(&bytes));
    assert_eq!(req.engine, format!("engine:{FAKE_ENGINE_ID}"));
    assert_eq!(
        req.key, bound,
        "the key is not the legacy layout followed by the engine"
    );
    assert_ne!(req.key, legacy);
    assert!(!req.trusted_before_engine_binding);
}

/// The project of `world(COMPOSE)` trusted on one engine asks again on
/// another (network IDs are unique only per engine), and a trust stored by
/// an earlier release (no engine in its key) asks once more, saying why.
#[tokio::test]
async fn an_approval_holds_on_the_engine_it_was_given_on_only() {
    let w = world(COMPOSE);
    // A trust as earlier releases stored it: the key without the engine.
    let plan = w.odek.resolve(&w.inputs(), &Silent).await.expect("resolve");
    let req = plan.approval.clone().expect("approval needed");
    let legacy = {
        let ids: Vec<&str> = req.networks.iter().map(|n| n.id.as_str()).collect();
        let dir = std::path::PathBuf::from(&req.project_dir);
        let input = odek_core::approval::KeyInput {
            project_dir: &dir,
            image: req.image.as_deref(),
            network: req.network.as_deref(),
            env_keys: req.env.iter().map(|e| e.key.as_str()).collect(),
            volumes: req.volumes.iter().map(String::as_str).collect(),
            network_ids: ids,
            runtime: req.runtime.as_deref(),
            egress: None,
            egress_network: None,
            engine: None,
        };
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(odek_core::approval::key_bytes(&input)))
    };
    let store = Store::new(w.home.path());
    {
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = std::fs::OpenOptions::new()
            .create_new(true)
            .write(true)
            .mode(0o600)
            .open(store.path())
            .expect("store");
        std::io::Write::write_all(&mut f, format!("{{\"{legacy}\": true}}").as_bytes())
            .expect("write");
    }
    let plan = w.odek.resolve(&w.inputs(), &Silent).await.expect("resolve");
    let req = plan.approval.clone().expect("approval needed");
    assert!(!req.trusted, "a trust without the engine still holds");
    assert!(req.trusted_before_engine_binding);
    assert_eq!(
        req.asks_again_because(),
        Some(odek_core::approval::ENGINE_NOW_BOUND)
    );
    assert!(
        req.card.contains("bound approvals to the engine"),
        "{}",
        req.card
    );
    assert!(req.card.contains(FAKE_ENGINE_ID), "{}", req.card);
    let err = w
        .odek
        .launch(&plan, &LaunchOptions::default(), &Silent)
        .await
        .expect_err("launched on a trust of another layout");
    assert_eq!(err.class(), FailureClass::Config, "{err}");
    assert_eq!(w.creates(), 0);
    // Trusted now, on this engine: it holds here, and `odek approvals
    // list` can say on which engine.
    w.odek.approve(&plan, Decision::Trust).expect("trust");
    let meta = odek_core::approval::Store::new(&plan.odek_home).meta();
    assert_eq!(
        meta.get(&req.key).map(|m| m.engine.as_str()),
        Some(format!("engine:{FAKE_ENGINE_ID}").as_str()),
        "{meta:?}"
    );
    let plan = w.odek.resolve(&w.inputs(), &Silent).await.expect("resolve");
    let here = plan.approval.clone().expect("approval needed");
    assert!(here.trusted && !here.trusted_before_engine_binding);
    // Another engine with networks of the same IDs: asked again.
    w.fake.set_security(odek_core::engine::EngineSecurity {
        id: Some("OTHR:ENGN:0000:0000:0000:0000:0000:0000:0000:0000:0000:0002".into()),
        runtimes: vec!["runc".into()],
        default_runtime: Some("runc".into()),
        ..Default::default()
    });
    let plan = w.odek.resolve(&w.inputs(), &Silent).await.expect("resolve");
    let there = plan.approval.clone().expect("approval needed");
    assert_ne!(there.key, here.key);
    assert!(!there.trusted, "a trust of one engine holds on another");
    assert!(there.engine.contains("OTHR:ENGN"), "{}", there.engine);
    // An engine that reports no ID: its endpoint stands in.
    w.fake.set_security(odek_core::engine::EngineSecurity {
        runtimes: vec!["runc".into()],
        ..Default::default()
    });
    let plan = w.odek.resolve(&w.inputs(), &Silent).await.expect("resolve");
    let no_id = plan.approval.clone().expect("approval needed");
    assert!(no_id.engine.starts_with("endpoint:"), "{}", no_id.engine);
    assert!(!no_id.trusted);
    assert_eq!(w.creates(), 0);
}

#[tokio::test]
async fn a_network_recreated_under_the_same_name_refuses_the_launch() {
    let w = world(COMPOSE);
    let plan = w.odek.resolve(&w.inputs(), &Silent).await.expect("resolve");
    let approval = w.odek.approve(&plan, Decision::Once).expect("approve");
    let old = w.fake.network_id("shop_backend").expect("exists");
    w.fake.remove_network(&old);
    let new = w
        .fake
        .add_network(FakeNetwork::bridge("shop_backend").compose("shop"));
    let e = w.launch_refused(&plan, approval, "recreated").await;
    let msg = e.to_string();
    assert!(
        msg.contains(&format!("added shop_backend ({})", &new[..12])),
        "{msg}"
    );
    assert!(
        msg.contains(&format!("gone shop_backend ({})", &old[..12])),
        "{msg}"
    );
    assert_eq!(w.creates(), 0);
}

#[tokio::test]
async fn a_removed_network_refuses_the_launch() {
    let w = world(r#"{"sandbox_networks": ["shop_backend"]}"#);
    let plan = w.odek.resolve(&w.inputs(), &Silent).await.expect("resolve");
    let approval = w.odek.approve(&plan, Decision::Once).expect("approve");
    w.fake
        .remove_network(&w.fake.network_id("shop_backend").expect("exists"));
    let e = w.launch_refused(&plan, approval, "gone").await;
    assert!(e.to_string().contains("not found"), "{e}");
    assert_eq!(w.creates(), 0);
}

#[tokio::test]
async fn trust_persists_and_an_edit_asks_again() {
    let w = world(COMPOSE);
    let plan = w.odek.resolve(&w.inputs(), &Silent).await.expect("resolve");
    let a = w.odek.approve(&plan, Decision::Trust).expect("trust");
    assert_eq!(a.via, odek_core::approval::Via::Trust);
    let again = w.odek.resolve(&w.inputs(), &Silent).await.expect("resolve");
    let req = again.approval.expect("still gated");
    assert!(req.trusted, "trust survives a re-run");
    assert_eq!(req.key, a.key, "same key for the same settings and IDs");
    assert_eq!(
        req.standing().expect("standing").via,
        odek_core::approval::Via::Stored
    );

    // The agent edits ./odek.json: the key changes, so odek asks again.
    std::fs::write(
        w.dir.path().join("odek.json"),
        r#"{"sandbox_compose_project": "shop", "sandbox_env": {"X": "${SECRET}"}}"#,
    )
    .expect("edit");
    let edited = w.odek.resolve(&w.inputs(), &Silent).await.expect("resolve");
    let req = edited.approval.expect("gated");
    assert!(!req.trusted);
    assert_ne!(req.key, a.key);
    assert!(req.env.iter().any(|e| e.key == "X" && e.interpolates_host));
    assert!(req.render_card().contains("X (reads host $SECRET)"));
    assert!(
        !req.render_card().contains("s3cr3t"),
        "env values never on the card"
    );
}

#[tokio::test]
async fn an_approval_for_other_settings_is_refused() {
    let w = world(COMPOSE);
    let plan = w.odek.resolve(&w.inputs(), &Silent).await.expect("resolve");
    let mut approval = w.odek.approve(&plan, Decision::Once).expect("approve");
    approval.key = "0".repeat(64);
    let e = w.launch_refused(&plan, approval, "mismatch").await;
    assert!(matches!(e, Error::Approval(_)), "{e:?}");
    assert!(w.fake.no_mutation());
}

#[tokio::test]
async fn odek_home_two_levels_inside_the_workdir_is_refused() {
    // The mask covers $ODEK_HOME's own path, but the agent can rename a
    // directory on the way to it (`mv .cache .c2`) and make its own
    // `.cache/odek` with a `config.json` of `{"sandbox": false}`: the next
    // run read it as the operator's (a review ran commands on the host
    // so). Directly in the workdir the masked path cannot be renamed.
    let w = world("{}");
    let home = w.dir.path().join(".cache/odek");
    std::fs::create_dir_all(&home).expect("mkdir");
    let mut inputs = w.inputs();
    inputs
        .env
        .insert("ODEK_HOME".into(), home.display().to_string());
    let err = w.odek.resolve(&inputs, &Silent).await.expect_err("refused");
    assert_eq!(err.class(), FailureClass::Config, "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("2 levels inside the working directory") && msg.contains("/.odek"),
        "{msg}"
    );
    assert!(w.fake.no_mutation());
    // With the sandbox off nothing is mounted: no refusal.
    let mut off = inputs.clone();
    off.env.insert("ODEK_SANDBOX".into(), "false".into());
    w.odek.resolve(&off, &Silent).await.expect("sandbox off");
}

#[tokio::test]
async fn odek_home_inside_the_workdir_is_masked() {
    let w = world("{}");
    let home = w.dir.path().join(".odek");
    let mut inputs = w.inputs();
    inputs
        .env
        .insert("ODEK_HOME".into(), home.display().to_string());
    let plan = w.odek.resolve(&inputs, &Silent).await.expect("resolve");
    assert_eq!(plan.masks, ["/workspace/.odek"]);
    let sb = w
        .odek
        .launch(&plan, &LaunchOptions::default(), &Silent)
        .await
        .expect("launch");
    let c = w
        .fake
        .container(sb.container_id.as_deref().expect("id"))
        .expect("container");
    let opts = c
        .tmpfs
        .get("/workspace/.odek")
        .expect("masked with a tmpfs");
    assert!(opts.split(',').any(|o| o == "ro"), "{opts}");
}

#[tokio::test]
async fn a_corrupt_store_is_an_error_not_an_empty_store() {
    let w = world(COMPOSE);
    std::fs::write(
        w.home.path().join("project_sandbox_approvals.json"),
        "{not json",
    )
    .expect("w");
    let e = w
        .odek
        .resolve(&w.inputs(), &Silent)
        .await
        .expect_err("corrupt");
    assert!(e.to_string().contains("corrupt"), "{e}");
    assert!(w.fake.no_mutation());
}

#[tokio::test]
async fn a_trust_is_bound_to_env_templates_that_read_host_variables() {
    let w = world(r#"{"sandbox_compose_project": "shop", "sandbox_env": {"FOO": "${HOME}"}}"#);
    let plan = w.odek.resolve(&w.inputs(), &Silent).await.expect("resolve");
    let req = plan.approval.clone().expect("gated");
    assert!(req.env_binding.is_some());
    assert!(
        req.render_card().contains("FOO (reads host $HOME)"),
        "{}",
        req.render_card()
    );
    w.odek.approve(&plan, Decision::Trust).expect("trust");
    let again = w.odek.resolve(&w.inputs(), &Silent).await.expect("resolve");
    assert!(again.approval.expect("gated").trusted);

    // Same key (env names only), other template: the trust does not apply.
    std::fs::write(
        w.dir.path().join("odek.json"),
        r#"{"sandbox_compose_project": "shop", "sandbox_env": {"FOO": "${SECRET}"}}"#,
    )
    .expect("edit");
    let edited = w.odek.resolve(&w.inputs(), &Silent).await.expect("resolve");
    let req2 = edited.approval.clone().expect("gated");
    assert_eq!(req2.key, req.key, "SPEC §7.3 keys cover env names only");
    assert!(!req2.trusted, "a changed template must ask again");
    assert!(req2.previously_trusted);
    assert!(req2.render_card().contains("reads host $SECRET"));
    assert!(req2.render_card().contains("trusted before"));
    let e = w
        .odek
        .launch(&edited, &LaunchOptions::default(), &Silent)
        .await
        .expect_err("not approved");
    assert!(e.to_string().contains("needs operator approval"), "{e}");
    assert!(w.fake.no_mutation());
}

#[tokio::test]
async fn a_dockerfile_odek_needs_approval_before_it_is_built() {
    let w = world("{}");
    std::fs::write(
        w.dir.path().join("Dockerfile.odek"),
        "FROM odek-test/base:1\nRUN true\n",
    )
    .expect("w");
    let mut inputs = w.inputs();
    inputs.flags.sandbox_image = None;
    let plan = w.odek.resolve(&inputs, &Silent).await.expect("resolve");
    let req = plan
        .approval
        .clone()
        .expect("a Dockerfile.odek is project input");
    assert!(
        req.knobs.iter().any(|k| k == "Dockerfile.odek"),
        "{:?}",
        req.knobs
    );
    assert!(req.render_card().contains("built from Dockerfile.odek"));
    // The file that asks is the Dockerfile (odek.json asks for nothing), and
    // the card names the tag the build gets.
    assert!(req.config.ends_with("/Dockerfile.odek"), "{}", req.config);
    let tag = plan.image.reference.original.clone();
    assert!(tag.starts_with("odek-sandbox:"), "{tag}");
    assert!(req.render_card().contains(&tag), "{}", req.render_card());
    let e = w
        .odek
        .launch(&plan, &LaunchOptions::default(), &Silent)
        .await
        .expect_err("no approval");
    assert!(e.to_string().contains("needs operator approval"), "{e}");
    assert!(w.fake.builds().is_empty(), "built before approval");
    let a = w.odek.approve(&plan, Decision::Once).expect("approve");
    let opts = LaunchOptions {
        approval: Some(a),
        ..Default::default()
    };
    w.odek.launch(&plan, &opts, &Silent).await.expect("launch");
    assert_eq!(w.fake.builds().len(), 1);
    // An edited Dockerfile changes the key.
    std::fs::write(
        w.dir.path().join("Dockerfile.odek"),
        "FROM odek-test/base:1\nRUN curl evil\n",
    )
    .expect("w");
    let edited = w.odek.resolve(&inputs, &Silent).await.expect("resolve");
    assert_ne!(edited.approval.expect("gated").key, req.key);
}

#[cfg(unix)]
#[tokio::test]
async fn a_symlinked_dockerfile_odek_is_refused_before_approval() {
    let w = world("{}");
    let outside = tempfile::tempdir().expect("tempdir");
    let target = outside.path().join("Dockerfile");
    std::fs::write(&target, "FROM odek-test/base:1\n").expect("w");
    std::os::unix::fs::symlink(&target, w.dir.path().join("Dockerfile.odek")).expect("symlink");
    let mut inputs = w.inputs();
    inputs.flags.sandbox_image = None;
    let e = w
        .odek
        .resolve(&inputs, &Silent)
        .await
        .expect_err("a symlinked Dockerfile.odek");
    assert!(e.to_string().contains("regular file"), "{e}");
    assert_eq!(e.class(), FailureClass::Config);
    assert!(w.fake.no_mutation());
    assert!(w.fake.builds().is_empty());
    // With the sandbox off nothing is built, so the file does not matter.
    inputs.flags.sandbox = Some(false);
    let plan = w.odek.resolve(&inputs, &Silent).await.expect("sandbox off");
    assert_eq!(plan.isolation, odek_core::Isolation::Off);
}
