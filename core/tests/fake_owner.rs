//! Owner lifetime against the fake engine (SPEC §6.1): an owned sandbox is
//! created auto-removed with a stdin that closes when its owner's
//! attachment goes, the attachment is made before start and held by the
//! sandbox value; a detached sandbox has neither; a refused launch leaves
//! no container and no attachment behind.

mod common;

use common::*;
use odek_core::engine::{EngineErrorKind, Fault, Op, Quirks};
use odek_core::verify::IDLE_CMD;
use odek_core::{FailureClass, LaunchOptions};

/// The operations of a launch that matter here, in call order.
fn lifecycle(s: &Setup) -> Vec<Op> {
    s.fake
        .calls()
        .into_iter()
        .map(|c| c.op)
        .filter(|op| {
            matches!(
                op,
                Op::CreateContainer | Op::WaitContainer | Op::AttachContainer | Op::StartContainer
            )
        })
        .collect()
}

#[tokio::test]
async fn an_owned_launch_attaches_to_stdin_before_start_and_holds_it() {
    let (s, spy) = spied();
    let sb = s.up().await.expect("launch");
    assert_eq!(
        lifecycle(&s),
        vec![
            Op::CreateContainer,
            Op::WaitContainer,
            Op::AttachContainer,
            Op::StartContainer
        ],
        "the removal wait and the attachment come before start"
    );
    let spec = &spy.specs()[0];
    assert!(spec.open_stdin, "OpenStdin");
    assert!(spec.stdin_once, "StdinOnce");
    assert!(spec.auto_remove, "AutoRemove");
    assert_eq!(spec.cmd, IDLE_CMD.map(String::from).to_vec());
    let id = sb.container_id.clone().expect("container");
    assert_eq!(s.fake.stdin_holds(&id), 1, "the owner holds one attachment");
    assert!(sb.owner.is_held());
    assert!(s.fake.released().is_empty(), "{:?}", s.fake.released());
}

#[tokio::test]
async fn a_detached_launch_neither_attaches_nor_auto_removes() {
    let (s, spy) = spied();
    let plan = s.resolve().await.expect("resolve");
    let opts = LaunchOptions {
        detached: true,
        ..LaunchOptions::default()
    };
    let sb = s
        .odek
        .launch(&plan, &opts, &s.reporter)
        .await
        .expect("launch");
    assert_eq!(
        lifecycle(&s),
        vec![Op::CreateContainer, Op::StartContainer],
        "no wait, no attachment"
    );
    let spec = &spy.specs()[0];
    assert!(spec.open_stdin, "the idle process reads an open stdin");
    assert!(!spec.stdin_once, "no client's going closes it");
    assert!(!spec.auto_remove, "`odek sandbox down` removes it");
    assert!(!sb.owner.is_held());
    let id = sb.container_id.clone().expect("container");
    drop(sb);
    assert_eq!(s.fake.containers(), vec![id], "it outlives its value");
}

#[tokio::test]
async fn dropping_the_last_clone_of_an_owned_sandbox_releases_it() {
    let s = Setup::new();
    let sb = s.up().await.expect("launch");
    let id = sb.container_id.clone().expect("container");
    let clone = sb.clone();
    drop(sb);
    assert!(
        s.fake.released().is_empty(),
        "a clone still holds the attachment"
    );
    assert_eq!(s.fake.containers(), vec![id.clone()]);
    drop(clone);
    assert_eq!(s.fake.released(), vec![id.clone()]);
    assert!(s.fake.containers().is_empty(), "{:?}", s.fake.containers());
    assert!(s.fake.auto_removed(&id), "the engine removed it by itself");
    assert!(
        s.fake.calls_of(Op::RemoveContainer).is_empty(),
        "odek removed nothing itself"
    );
}

#[tokio::test]
async fn release_lets_go_of_the_attachment() {
    let s = Setup::new();
    let mut sb = s.up().await.expect("launch");
    let id = sb.container_id.clone().expect("container");
    sb.owner.release();
    assert!(!sb.owner.is_held());
    assert_eq!(s.fake.released(), vec![id]);
    assert!(s.fake.containers().is_empty());
}

#[tokio::test]
async fn an_idle_process_that_exits_reports_its_code_though_the_container_is_gone() {
    // docker-init cannot run `cat` (exit 127): the engine removes the
    // container at once, and only the removal wait still knows the code.
    let s = Setup::new();
    let plan = s.resolve().await.expect("resolve");
    s.fake.set_quirks(Quirks {
        idle_exits: Some(127),
        ..Quirks::default()
    });
    let err = s.launch(&plan).await.expect_err("refused");
    assert_refused(
        &s,
        &err,
        FailureClass::DockerRejected,
        "the container is not running (exit code 127)",
    );
    let msg = err.to_string();
    assert!(
        msg.contains(&format!("idle process `{}`", IDLE_CMD.join(" "))),
        "{msg}"
    );
    assert!(msg.contains("provide `cat` on PATH"), "{msg}");
    let id = s.fake.calls_of(Op::StartContainer)[0].arg.clone();
    assert!(s.fake.auto_removed(&id));
    assert!(s.fake.containers().is_empty());
}

#[tokio::test]
async fn a_refused_attachment_leaves_nothing_and_never_starts() {
    let s = Setup::new();
    let plan = s.resolve().await.expect("resolve");
    s.fake.fail(Fault::new(
        Op::AttachContainer,
        1,
        EngineErrorKind::Rejected,
    ));
    let err = s.launch(&plan).await.expect_err("refused");
    assert_refused(&s, &err, FailureClass::DockerRejected, "injected");
    assert!(
        s.fake.calls_of(Op::StartContainer).is_empty(),
        "an owned sandbox never runs without its owner's attachment"
    );
    assert!(s.fake.containers().is_empty(), "{:?}", s.fake.containers());
}

#[tokio::test]
async fn a_refused_launch_after_attach_drops_the_attachment_and_the_container() {
    let s = Setup::new().compose(PROJECT).services();
    let plan = s.resolve().await.expect("resolve");
    s.fake
        .fail(Fault::new(Op::ConnectNetwork, 1, EngineErrorKind::Rejected));
    let err = s.launch(&plan).await.expect_err("refused");
    assert_refused(&s, &err, FailureClass::DockerRejected, "injected");
    let attached = s.fake.calls_of(Op::AttachContainer);
    assert_eq!(attached.len(), 1, "attached before the failure");
    assert_eq!(s.fake.released(), vec![attached[0].arg.clone()]);
}

#[tokio::test]
async fn a_refused_removal_wait_does_not_stop_a_launch() {
    let s = Setup::new();
    let plan = s.resolve().await.expect("resolve");
    s.fake
        .fail(Fault::new(Op::WaitContainer, 1, EngineErrorKind::Rejected));
    let sb = s.launch(&plan).await.expect("launch");
    assert!(sb.owner.is_held());
    assert_eq!(s.fake.containers().len(), 1);
}
