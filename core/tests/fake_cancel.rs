//! Cancelling calls in flight (SPEC §10.1; `odek_core::cancel`): a launch
//! cancelled after its container exists removes it; an exec cancelled
//! mid-command kills the command; a token cancelled before the call makes it
//! fail at once. Fake engine, no Docker.

mod common;

use std::time::Duration;

use common::*;
use odek_core::engine::{Quirks, StreamKind};
use odek_core::{CancellationToken, Command, Error, ExecOptions, ExecRequest, LaunchOptions};

fn cancel_after(t: &CancellationToken, d: Duration) {
    let t = t.clone();
    tokio::spawn(async move {
        tokio::time::sleep(d).await;
        t.cancel();
    });
}

#[tokio::test]
async fn a_launch_cancelled_after_create_removes_its_container() {
    let s = Setup::new();
    s.fake.set_quirks(Quirks {
        start_delay: Some(Duration::from_secs(30)),
        ..Quirks::default()
    });
    let plan = s.resolve().await.expect("resolve");
    let token = CancellationToken::new();
    cancel_after(&token, Duration::from_millis(100));
    let started = std::time::Instant::now();
    let err = s
        .odek
        .launch(
            &plan,
            &LaunchOptions {
                cancel: Some(token.clone()),
                ..Default::default()
            },
            &s.reporter,
        )
        .await
        .expect_err("cancelled");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "prompt: {:?}",
        started.elapsed()
    );
    let Error::Cancelled { message, .. } = &err else {
        panic!("not Cancelled: {err:?}")
    };
    assert!(message.contains("was removed"), "{message}");
    assert!(
        s.fake.containers().is_empty(),
        "no container left: {:?}",
        s.fake.containers()
    );
}

/// The daemon may refuse the removal of a cancelled launch's container
/// while it removes it itself (its owner's attachment closed when the
/// launch was dropped): one more try settles it, and the sandbox's link
/// network (SPEC §4.4) goes with it. A Go test saw the container still
/// there right after such a cancel under load.
#[tokio::test]
async fn a_cancelled_launch_whose_first_removal_is_refused_removes_it_and_its_link() {
    let s = Setup::new().compose(PROJECT).services();
    s.fake.set_quirks(Quirks {
        start_delay: Some(Duration::from_secs(30)),
        ..Quirks::default()
    });
    s.fake.fail(odek_core::engine::Fault::new(
        odek_core::engine::Op::RemoveContainer,
        1,
        odek_core::engine::EngineErrorKind::Rejected,
    ));
    let plan = s.resolve().await.expect("resolve");
    let token = CancellationToken::new();
    cancel_after(&token, Duration::from_millis(100));
    let err = s
        .odek
        .launch(
            &plan,
            &LaunchOptions {
                cancel: Some(token.clone()),
                ..Default::default()
            },
            &s.reporter,
        )
        .await
        .expect_err("cancelled");
    let Error::Cancelled { message, .. } = &err else {
        panic!("not Cancelled: {err:?}")
    };
    assert!(message.contains("was removed"), "{message}");
    let left: Vec<String> = s
        .fake
        .containers()
        .into_iter()
        .filter(|id| {
            s.fake
                .container(id)
                .is_some_and(|c| c.name.starts_with("odek-"))
        })
        .collect();
    assert!(left.is_empty(), "no sandbox left: {left:?}");
    assert!(
        s.fake.link_networks().is_empty(),
        "no link network left: {:?}",
        s.fake.link_networks()
    );
}

#[tokio::test]
async fn a_token_cancelled_before_the_launch_creates_nothing() {
    let s = Setup::new();
    let plan = s.resolve().await.expect("resolve");
    let token = CancellationToken::new();
    token.cancel();
    let err = s
        .odek
        .launch(
            &plan,
            &LaunchOptions {
                cancel: Some(token.clone()),
                ..Default::default()
            },
            &s.reporter,
        )
        .await
        .expect_err("cancelled");
    assert!(matches!(err, Error::Cancelled { .. }), "{err:?}");
    assert!(s.fake.containers().is_empty());
}

#[tokio::test]
async fn an_exec_cancelled_mid_command_is_killed() {
    let s = Setup::new();
    let sb = s.up().await.expect("launch");
    s.fake.set_quirks(Quirks {
        exec_hangs: Some("sleep".into()),
        ..Quirks::default()
    });
    let req = ExecRequest {
        command: Command::Argv(vec!["sleep".into(), "300".into()]),
        env: Vec::new(),
        timeout: None,
        workdir: None,
    };
    let token = CancellationToken::new();
    cancel_after(&token, Duration::from_millis(50));
    let sink = |_: StreamKind, _: &[u8]| {};
    let opts = ExecOptions {
        cancel: Some(token.clone()),
        ..ExecOptions::default()
    };
    let outcome = s
        .odek
        .exec(&sb, &req, &opts, &sink)
        .await
        .expect("a cancelled outcome");
    assert!(outcome.cancelled && outcome.killed, "{outcome:?}");
    let err = outcome.cancelled_as_error(&sb).expect_err("cancelled");
    let Error::Cancelled { message, .. } = &err else {
        panic!("not Cancelled: {err:?}")
    };
    assert!(message.contains("it was killed"), "{message}");
    // the kill exec ran: it names the command's tag
    let execs = s.fake.calls_of(odek_core::engine::Op::Exec);
    assert!(
        execs.len() >= 2,
        "a kill exec follows the command: {execs:?}"
    );
}

#[tokio::test]
async fn a_token_cancelled_before_the_exec_runs_nothing() {
    let s = Setup::new();
    let sb = s.up().await.expect("launch");
    let before = s.fake.calls_of(odek_core::engine::Op::Exec).len();
    let req = ExecRequest {
        command: Command::Argv(vec!["true".into()]),
        env: Vec::new(),
        timeout: None,
        workdir: None,
    };
    let token = CancellationToken::new();
    token.cancel();
    let opts = ExecOptions {
        cancel: Some(token),
        ..ExecOptions::default()
    };
    let sink = |_: StreamKind, _: &[u8]| {};
    let err = s
        .odek
        .exec(&sb, &req, &opts, &sink)
        .await
        .expect_err("cancelled");
    let Error::Cancelled { message, .. } = &err else {
        panic!("not Cancelled: {err:?}")
    };
    assert_eq!(message, "the command was cancelled by the caller");
    assert_eq!(
        s.fake.calls_of(odek_core::engine::Op::Exec).len(),
        before,
        "no exec ran"
    );
}

/// How a command cut short ended is worded once, in the core
/// (`ExecOutcome::cut_short_text`), for each surface: the CLI's lines as
/// `odek sandbox exec` and `odek run` print them; MCP and a library are
/// never told a command-line command, and the C ABI's cancelled error is
/// the library's words.
#[tokio::test]
async fn a_command_cut_short_is_worded_by_the_core_for_each_surface() {
    use odek_core::advice::Surface;
    use odek_core::ExecOutcome;
    let s = Setup::new();
    let sb = s.up().await.expect("launch");
    let name = &sb.name;
    let outcome = |timed_out, cancelled, killed, supervised| ExecOutcome {
        exit_code: if timed_out { 124 } else { 130 },
        timed_out,
        cancelled,
        killed,
        supervised,
    };
    let cli = |o: ExecOutcome, removed| {
        o.cut_short_text(&sb, removed, Surface::Cli)
            .expect("a text")
    };
    assert_eq!(
        cli(outcome(true, false, true, true), false),
        "the command did not finish within the timeout and was killed (its process group, session and descendants; odek's supervisor saw none left)"
    );
    assert_eq!(
        cli(outcome(true, false, false, false), false),
        format!("the command did not finish within the timeout and could not be killed (see above); `odek sandbox down {name}` stops it")
    );
    assert_eq!(
        cli(outcome(false, true, true, false), false),
        format!("interrupted; the command was killed (every process carrying its ODEK_EXEC_ID tag, and their children); sandbox {name} keeps running")
    );
    assert_eq!(
        cli(outcome(true, false, true, true), true),
        "the command did not finish within the timeout and was killed (its process group, session and descendants; odek's supervisor saw none left); the sandbox was removed"
    );
    assert_eq!(
        outcome(false, false, false, false).cut_short_text(&sb, false, Surface::Cli),
        None
    );
    for o in [
        outcome(true, false, false, false),
        outcome(false, true, false, true),
        outcome(false, true, true, true),
    ] {
        for surface in [Surface::Mcp, Surface::Library] {
            let t = o.cut_short_text(&sb, false, surface).expect("a text");
            assert!(!t.contains("odek sandbox"), "{surface:?}: {t}");
            assert!(!t.contains("see above"), "{surface:?}: {t}");
        }
    }
    assert!(outcome(false, true, false, true)
        .cut_short_text(&sb, false, Surface::Mcp)
        .expect("a text")
        .starts_with("the client cancelled the command; it could not be killed"));
    // The C ABI's error: the library's words, the fix a field.
    let err = outcome(false, true, false, true)
        .cancelled_as_error(&sb)
        .expect_err("cancelled");
    assert_eq!(
        err.render(Surface::Library),
        outcome(false, true, false, true)
            .cut_short_text(&sb, false, Surface::Library)
            .expect("a text")
    );
    assert!(matches!(
        err,
        Error::Cancelled {
            fix: Some(odek_core::advice::Fix::Stop { .. }),
            ..
        }
    ));
}
