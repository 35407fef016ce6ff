//! Approval flows against the shared fake fixture (SPEC §7), complementing
//! `fake_approval.rs`: what the request shows, `once` and env approvals
//! launching, trust bound to network IDs, and the §7.4 re-check for a
//! project that stopped and for a named project network recreated.

mod common;

use common::*;
use odek_core::approval::{Approval, Decision, Store};
use odek_core::engine::{FakeNetwork, Op};
use odek_core::{FailureClass, LaunchOptions};

fn with(approval: Approval) -> LaunchOptions {
    LaunchOptions {
        approval: Some(approval),
        ..LaunchOptions::default()
    }
}

fn project_compose() -> Setup {
    Setup::new().project_config(r#"{"sandbox_compose_project": "shop"}"#)
}

#[tokio::test]
async fn request_lists_each_network_with_full_id_internal_flag_and_project() {
    let s = project_compose();
    let plan = s.resolve().await.expect("resolve");
    let req = plan.approval.as_ref().expect("request");
    assert_eq!(req.knobs, vec!["sandbox_compose_project".to_string()]);
    assert_eq!(req.requested_compose_project.as_deref(), Some(PROJECT));
    let ids: Vec<&str> = req.networks.iter().map(|n| n.id.as_str()).collect();
    assert_eq!(ids, vec![SHOP_BACKEND_ID, SHOP_DEFAULT_ID]);
    assert!(req.networks[0].internal && !req.networks[1].internal);
    assert!(req.networks.iter().all(|n| n.compose_project == PROJECT));
    assert!(!req.trusted && !req.approved_by_env);
    assert!(req.standing().is_none());
    let card = req.render_card();
    for needle in [
        SHOP_BACKEND,
        SHOP_DEFAULT,
        SHOP_BACKEND_ID,
        SHOP_DEFAULT_ID,
        "internal=yes",
        "internal=no",
        "compose=shop",
        "attached networks only",
    ] {
        assert!(card.contains(needle), "card lacks {needle}:\n{card}");
    }
    assert!(s.fake.no_mutation());
}

#[tokio::test]
async fn hostile_names_on_the_card_are_escaped() {
    let s = project_compose();
    s.fake.add_network(
        FakeNetwork::bridge("shop_\u{1b}]0;pwned\u{7}")
            .compose(PROJECT)
            .internal()
            .id(&hex_id("e5c")),
    );
    let plan = s.resolve().await.expect("resolve");
    let card = plan.approval.as_ref().expect("request").render_card();
    assert!(
        !card.contains('\u{1b}') && !card.contains('\u{7}'),
        "{card:?}"
    );
    assert!(
        card.contains(&hex_id("e5c")),
        "the full ID is shown: {card}"
    );
}

#[tokio::test]
async fn approved_once_launches_with_the_project_networks() {
    let s = project_compose();
    let plan = s.resolve().await.expect("resolve");
    let approval = s.odek.approve(&plan, Decision::Once).expect("approve");
    assert_eq!(
        approval.network_ids,
        vec![SHOP_BACKEND_ID.to_string(), SHOP_DEFAULT_ID.to_string()]
    );
    let sb = s
        .odek
        .launch(&plan, &with(approval), &s.reporter)
        .await
        .expect("launch");
    assert!(
        sb.startup_line()
            .contains("networks=shop_backend,shop_default"),
        "{}",
        sb.startup_line()
    );
    // SPEC §4.4: the sandbox is on its own network only, never on the
    // project's (whose `compose down` it would block).
    let link = s
        .fake
        .network_id(&odek_core::link::link_name(&sb.name))
        .expect("the sandbox's link network");
    let c = s.only_container();
    assert_eq!(c.network_mode, link);
    let out = s.fake.network_id(odek_core::link::OUT_NETWORK);
    assert!(
        c.endpoints
            .iter()
            .all(|e| e.network_id == link || Some(&e.network_id) == out.as_ref()),
        "{:?}",
        c.endpoints
    );
    assert!(
        !Store::new(&s.odek_home).path().exists(),
        "`once` persists nothing"
    );
}

#[tokio::test]
async fn project_stopped_after_approval_refuses_the_launch() {
    let s = project_compose();
    let plan = s.resolve().await.expect("resolve");
    let approval = s.odek.approve(&plan, Decision::Once).expect("approve");
    s.fake.remove_network(SHOP_DEFAULT_ID);
    s.fake.remove_network(SHOP_BACKEND_ID);
    let err = s
        .odek
        .launch(&plan, &with(approval), &s.reporter)
        .await
        .expect_err("project gone");
    assert_refused_before_create(&s, &err, FailureClass::Config, "not running");
    assert!(
        s.fake.calls_of(Op::InspectImage).is_empty(),
        "refused before the image step"
    );
}

#[tokio::test]
async fn named_project_network_recreated_after_approval_refuses_the_launch() {
    let s = Setup::new().project_config(r#"{"sandbox_networks": ["shop_backend"]}"#);
    let plan = s.resolve().await.expect("resolve");
    let approval = s.odek.approve(&plan, Decision::Once).expect("approve");
    s.fake.remove_network(SHOP_BACKEND_ID);
    let new_id = hex_id("9e");
    s.fake
        .add_network(FakeNetwork::bridge(SHOP_BACKEND).internal().id(&new_id));
    let err = s
        .odek
        .launch(&plan, &with(approval), &s.reporter)
        .await
        .expect_err("recreated");
    assert_refused_before_create(
        &s,
        &err,
        FailureClass::Config,
        "changed since they were approved",
    );
    let msg = err.to_string();
    assert!(
        msg.contains(&new_id[..12]) && msg.contains(&SHOP_BACKEND_ID[..12]),
        "{msg}"
    );
}

#[tokio::test]
async fn env_approval_is_a_standing_approval() {
    let s = project_compose().env("ODEK_APPROVE_PROJECT_SANDBOX", "1");
    let plan = s.resolve().await.expect("resolve");
    let req = plan.approval.as_ref().expect("request");
    assert!(req.approved_by_env);
    let standing = req.standing().expect("standing");
    assert_eq!(standing.via, odek_core::approval::Via::Env);
    let _sandbox = s
        .odek
        .launch(&plan, &with(standing), &s.reporter)
        .await
        .expect("launch");
    assert_eq!(s.fake.containers().len(), 1);
    assert!(
        !Store::new(&s.odek_home).path().exists(),
        "env approval persists nothing"
    );
}

#[tokio::test]
async fn trust_is_bound_to_the_network_ids() {
    let s = project_compose();
    let plan = s.resolve().await.expect("resolve");
    s.odek.approve(&plan, Decision::Trust).expect("trust");
    let key = plan.approval.as_ref().expect("request").key.clone();
    assert!(Store::new(&s.odek_home).contains(&key).expect("store"));

    let again = s.resolve().await.expect("resolve again");
    let req = again.approval.as_ref().expect("request");
    assert!(req.trusted, "the same settings are trusted");
    let standing = req.standing().expect("standing");
    assert_eq!(standing.via, odek_core::approval::Via::Stored);
    let _sandbox = s
        .odek
        .launch(&again, &with(standing), &s.reporter)
        .await
        .expect("launch");

    // The project recreated a network: a new ID, a new key, asked again.
    s.fake.remove_network(SHOP_DEFAULT_ID);
    s.fake.add_network(
        FakeNetwork::bridge(SHOP_DEFAULT)
            .compose(PROJECT)
            .id(&hex_id("de7")),
    );
    let changed = s.resolve().await.expect("resolve");
    let req = changed.approval.as_ref().expect("request");
    assert_ne!(req.key, key);
    assert!(!req.trusted);
    assert!(req.standing().is_none());
    let err = s.launch(&changed).await.expect_err("asked again");
    assert_eq!(err.class(), FailureClass::Config);
    assert_eq!(s.fake.containers().len(), 1, "only the earlier sandbox");
}

#[tokio::test]
async fn recheck_lookup_failing_has_the_engine_class_and_creates_nothing() {
    use odek_core::engine::{EngineErrorKind, Fault};
    let s = project_compose();
    let plan = s.resolve().await.expect("resolve");
    let approval = s.odek.approve(&plan, Decision::Once).expect("approve");
    let lists = s.fake.calls_of(Op::ListNetworks).len();
    s.fake.fail(Fault::new(
        Op::ListNetworks,
        lists + 1,
        EngineErrorKind::Unreachable,
    ));
    let err = s
        .odek
        .launch(&plan, &with(approval), &s.reporter)
        .await
        .expect_err("daemon gone at re-check");
    assert_refused_before_create(
        &s,
        &err,
        FailureClass::DaemonUnreachable,
        "network re-check",
    );
}

/// The one approval decision (`Client::decide_approval`): nobody to ask is a
/// refusal; an asker's answer is granted; a standing approval needs no
/// question; the environment's approval only where the asker accepts it.
#[tokio::test]
async fn decide_approval_standing_else_ask_else_refuse() {
    use odek_core::approval::{ApprovalRequest, Via};
    use odek_core::approve::{Asker, Decided, NoAsker};

    struct Answers(Option<Decision>, bool);
    impl Asker for Answers {
        type Error = odek_core::Error;
        fn accepts_env(&self, _req: &ApprovalRequest) -> bool {
            self.1
        }
        async fn ask(&self, _req: &ApprovalRequest) -> Result<Option<Decision>, odek_core::Error> {
            Ok(self.0)
        }
    }

    let s = project_compose();
    let plan = s.resolve().await.expect("resolve");
    let decided = s
        .odek
        .decide_approval(&plan, &NoAsker)
        .await
        .expect("decide");
    assert_eq!(decided, Decided::Unasked { env_refused: false });
    let decided = s
        .odek
        .decide_approval(&plan, &Answers(Some(Decision::Once), true))
        .await
        .expect("decide");
    let Decided::Launch(Some(a)) = decided else {
        panic!("{decided:?}")
    };
    assert_eq!(a.via, Via::Once);

    let mut env_plan = plan.clone();
    env_plan.approval.as_mut().expect("request").approved_by_env = true;
    let decided = s
        .odek
        .decide_approval(&env_plan, &NoAsker)
        .await
        .expect("decide");
    assert!(
        matches!(decided, Decided::Launch(Some(ref a)) if a.via == Via::Env),
        "{decided:?}"
    );
    let decided = s
        .odek
        .decide_approval(&env_plan, &Answers(None, false))
        .await
        .expect("decide");
    assert_eq!(decided, Decided::Unasked { env_refused: true });
    assert!(s.fake.no_mutation());
}
