//! A narrowed plan needs its parent's approval (SPEC §7, §8): narrowing keeps
//! the parent's approval request, so a child of a plan whose `odek.json`
//! asks for a Compose project, an image and an env template is refused
//! without an approval (nothing created), launches with the parent's, and
//! runs the §7.4 re-check of the project's networks.

mod common;

use common::*;
use odek_core::approval::{ApprovalError, Decision, Store};
use odek_core::approve::refresh_standing;
use odek_core::engine::{FakeNetwork, Op};
use odek_core::narrow::{narrow, NarrowRequest};
use odek_core::{Error, FailureClass, LaunchOptions, Plan};

/// The issue's repository: a Compose project, an image and an env template
/// reading a host variable, all from `odek.json`.
fn project() -> Setup {
    Setup::without_image()
        .env("SECRET_TOKEN", "host-secret")
        .project_config(&format!(
            r#"{{"sandbox_compose_project": "{PROJECT}", "sandbox_image": "{IMAGE}", "sandbox_env": {{"TOKEN": "${{SECRET_TOKEN}}"}}}}"#
        ))
}

fn pids_100() -> NarrowRequest {
    NarrowRequest {
        pids_limit: Some(100),
        ..NarrowRequest::default()
    }
}

async fn parent_and_child(s: &Setup) -> (Plan, Plan) {
    let parent = s.resolve().await.expect("resolve");
    assert!(parent.approval.is_some(), "the project asks for approval");
    let child = narrow(&parent, &pids_100()).expect("narrow");
    (parent, child)
}

#[tokio::test]
async fn narrowed_child_without_approval_is_refused_before_create() {
    let s = project();
    let (parent, child) = parent_and_child(&s).await;
    let err = s.launch(&child).await.expect_err("no approval");
    assert_eq!(
        child.approval, parent.approval,
        "the child keeps the parent's request"
    );
    assert!(
        matches!(err, Error::Approval(ApprovalError::Required { .. })),
        "{err:?}"
    );
    assert_refused_before_create(&s, &err, FailureClass::Config, "needs operator approval");
    assert!(s.fake.calls_of(Op::CreateContainer).is_empty());
    assert!(
        s.fake.calls_of(Op::InspectImage).is_empty(),
        "refused before the image step"
    );
}

#[tokio::test]
async fn the_parents_approval_launches_the_child_after_the_recheck() {
    let s = project();
    let (parent, child) = parent_and_child(&s).await;
    let approval = s.odek.approve(&parent, Decision::Once).expect("approve");
    assert_eq!(
        s.odek
            .approve(&child, Decision::Once)
            .expect("approve child"),
        approval,
        "approving the child is approving the parent's request"
    );
    let opts = LaunchOptions {
        approval: Some(approval.clone()),
        ..LaunchOptions::default()
    };
    let before = s.fake.calls_of(Op::ListNetworks).len();
    let sb = s
        .odek
        .launch(&child, &opts, &s.reporter)
        .await
        .expect("launch");
    assert!(
        s.fake.calls_of(Op::ListNetworks).len() > before,
        "the §7.4 re-check asked Docker for the project's networks"
    );
    assert_eq!(sb.plan.pids_limit, 100);
    assert_eq!(s.only_container().network_mode, s.link_id(&sb.name));
    s.odek.destroy(&sb).await.expect("destroy");

    // The re-check is real: a network joining the project after the
    // approval refuses the child, and nothing is created.
    s.fake.add_network(
        FakeNetwork::bridge("shop_extra")
            .compose(PROJECT)
            .id(&hex_id("e1")),
    );
    let creates = s.fake.calls_of(Op::CreateContainer).len();
    let err = s
        .odek
        .launch(&child, &opts, &s.reporter)
        .await
        .expect_err("networks changed");
    assert!(
        matches!(err, Error::Approval(ApprovalError::NetworksChanged { .. })),
        "{err:?}"
    );
    assert!(err.to_string().contains("shop_extra"), "{err}");
    assert_eq!(s.fake.calls_of(Op::CreateContainer).len(), creates);
    assert!(s.fake.containers().is_empty());
}

#[tokio::test]
async fn a_stored_trust_of_the_parent_counts_while_it_is_in_the_store() {
    let s = project();
    let parent = s.resolve().await.expect("resolve");
    s.odek.approve(&parent, Decision::Trust).expect("trust");
    let trusted = s.resolve().await.expect("resolve again");
    let child = narrow(&trusted, &pids_100()).expect("narrow");
    let sb = s.launch(&child).await.expect("standing trust");
    s.odek.destroy(&sb).await.expect("destroy");
    let key = child.approval.as_ref().expect("request").key.clone();
    Store::new(&s.odek_home).revoke(&[key]).expect("revoke");
    let creates = s.fake.calls_of(Op::CreateContainer).len();
    let err = s.launch(&child).await.expect_err("trust revoked");
    assert!(
        matches!(err, Error::Approval(ApprovalError::Required { .. })),
        "{err:?}"
    );
    assert_eq!(s.fake.calls_of(Op::CreateContainer).len(), creates);
    assert!(s.fake.containers().is_empty());
}

#[tokio::test]
async fn an_approval_passed_on_from_a_stored_trust_ends_with_the_trust() {
    // What odek mcp's sandbox_narrow did: the approval decided from the
    // parent's standing trust, passed to launch after the trust was revoked.
    let s = project();
    let parent = s.resolve().await.expect("resolve");
    s.odek.approve(&parent, Decision::Trust).expect("trust");
    let trusted = s.resolve().await.expect("resolve again");
    let child = narrow(&trusted, &pids_100()).expect("narrow");
    let stored = child
        .approval
        .as_ref()
        .and_then(|r| r.standing())
        .expect("standing");
    assert_eq!(stored.via, odek_core::approval::Via::Stored);
    let opts = LaunchOptions {
        approval: Some(stored),
        ..LaunchOptions::default()
    };
    // Control: while the trust is stored, the approval launches.
    let sb = s
        .odek
        .launch(&child, &opts, &s.reporter)
        .await
        .expect("trusted");
    s.odek.destroy(&sb).await.expect("destroy");
    let key = child.approval.as_ref().expect("request").key.clone();
    Store::new(&s.odek_home).revoke(&[key]).expect("revoke");
    let creates = s.fake.calls_of(Op::CreateContainer).len();
    let err = s
        .odek
        .launch(&child, &opts, &s.reporter)
        .await
        .expect_err("trust revoked");
    assert!(
        matches!(err, Error::Approval(ApprovalError::Required { .. })),
        "{err:?}"
    );
    assert_eq!(s.fake.calls_of(Op::CreateContainer).len(), creates);
    assert!(s.fake.containers().is_empty());
}

#[tokio::test]
async fn a_recorded_plan_gets_its_standing_from_this_environment() {
    let s = project();
    let parent = s.resolve().await.expect("resolve");
    s.odek.approve(&parent, Decision::Trust).expect("trust");
    // What a parent's label could say: trusted and approved by env.
    let mut recorded = narrow(&parent, &pids_100()).expect("narrow");
    {
        let req = recorded.approval.as_mut().expect("request");
        req.trusted = false;
        req.approved_by_env = true;
    }
    let key = recorded.approval.as_ref().expect("request").key.clone();
    Store::new(&s.odek_home).revoke(&[key]).expect("revoke");

    let mut child = recorded.clone();
    refresh_standing(&mut child, &s.inputs.env).expect("refresh");
    let req = child.approval.as_ref().expect("request");
    assert!(!req.approved_by_env, "the env switch is not set here");
    assert!(!req.trusted && req.standing().is_none());
    let err = s.launch(&child).await.expect_err("no standing approval");
    assert_refused_before_create(&s, &err, FailureClass::Config, "needs operator approval");

    let mut env = s.inputs.env.clone();
    env.insert("ODEK_APPROVE_PROJECT_SANDBOX".into(), "1".into());
    let mut child = recorded.clone();
    refresh_standing(&mut child, &env).expect("refresh");
    assert_eq!(
        child
            .approval
            .as_ref()
            .and_then(|r| r.standing())
            .map(|a| a.via),
        Some(odek_core::approval::Via::Env)
    );

    // The parent's approvals live in its store: another ODEK_HOME is refused.
    let mut env = s.inputs.env.clone();
    env.insert(
        "ODEK_HOME".into(),
        s.root().join("elsewhere").display().to_string(),
    );
    let mut child = recorded.clone();
    let err = refresh_standing(&mut child, &env).expect_err("other home");
    assert_eq!(err.class(), FailureClass::Config);
    assert!(err.to_string().contains("ODEK_HOME="), "{err}");

    // A plan that needs no approval is left alone.
    let plain = Setup::new().resolve().await.expect("resolve");
    let mut same = plain.clone();
    refresh_standing(&mut same, &std::collections::BTreeMap::new()).expect("nothing to do");
    assert_eq!(same, plain);
}

/// A sub-agent asked to be offline is offline: `network_mode: none` on a
/// Compose-attached parent gives a child with no network at all — created
/// with `NetworkMode=none`, no network connected, described as `none` with
/// no internet — not one that keeps the parent's networks. The parent's
/// attached networks are the positive control.
#[tokio::test]
async fn none_on_a_compose_attached_parent_leaves_the_child_offline() {
    for parent_mode in ["none", "bridge"] {
        let s = Setup::new().compose(PROJECT).network_mode(parent_mode);
        let parent = s.resolve().await.expect("resolve");
        let p = s.launch(&parent).await.expect("parent");
        let pc = s.only_container();
        let link = s.link_id(&p.name);
        assert!(
            pc.endpoints.iter().any(|e| e.network_id == link),
            "{parent_mode}: the parent is attached (through its link network)"
        );
        s.odek.destroy(&p).await.expect("destroy parent");

        let req = NarrowRequest {
            network_mode: Some(odek_core::config::NetworkMode::None),
            ..NarrowRequest::default()
        };
        let child = narrow(&parent, &req).expect("narrow");
        let connects = s.fake.calls_of(Op::ConnectNetwork).len();
        let sb = s.launch(&child).await.expect("child");
        let c = s.only_container();
        assert_eq!(c.network_mode, "none", "{parent_mode}");
        assert!(
            c.endpoints.iter().all(|e| e.network_id == NONE_ID),
            "{parent_mode}: {:?}",
            c.endpoints
        );
        assert_eq!(s.fake.calls_of(Op::ConnectNetwork).len(), connects);
        let env = s.odek.describe(&sb).await.expect("describe");
        assert_eq!(env.network, Some(odek_core::network::NetworkSummary::None));
        assert!(!env.internet && env.networks.is_empty(), "{env:?}");
        assert!(
            sb.startup_line().contains("network=none ")
                && sb.startup_line().contains(" networks=- "),
            "{}",
            sb.startup_line()
        );
        s.odek.destroy(&sb).await.expect("destroy");
    }
}
