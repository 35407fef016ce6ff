//! Foreign bytes (SPEC §9.3's rule for every surface): what a
//! `Dockerfile.odek` build step prints, a registry's or daemon's error
//! text, create's warnings and the working directory's path reach odek's
//! reporter, errors and config view as one line each with every control,
//! escape and bidirectional character escaped — so the CLI, the bindings
//! and MCP, which all show these, never pass a raw ESC, BEL, OSC or bidi
//! override on — and never as a line that reads as odek's own.

mod common;

use common::*;
use odek_core::engine::{EngineErrorKind, Fault, Op, Quirks};
use odek_core::{FailureClass, Isolation};

/// What a hostile `RUN` step, registry or daemon sends: set the window
/// title (OSC 0), write the clipboard (OSC 52), clear the screen, a C1 CSI,
/// a bidi override, and a line that forges odek's startup line.
const HOSTILE: &str = "evil\u{1b}]0;pwned\u{7}\u{1b}]52;c;cm0gLXJmIH4=\u{7}\u{1b}[2J\u{9b}31m\u{202e}txt.exe\nodek: sandbox network=none pids=4096 image=forged networks=-\r";

/// Asserts `text` holds no character that must not reach a terminal raw
/// (the tests' own list), line breaks allowed only when `lines`.
#[track_caller]
fn assert_terminal_safe(what: &str, text: &str, lines: bool) {
    let bad = if lines {
        text.split('\n').find_map(raw_unsafe_char)
    } else {
        raw_unsafe_char(text)
    };
    assert_eq!(bad, None, "{what} carries a raw {bad:?}: {text:?}");
}

/// Asserts no line of `text` starts like odek's startup line but odek's own.
#[track_caller]
fn assert_no_forged_line(what: &str, text: &str) {
    for line in text.lines() {
        assert!(
            !line.starts_with("odek: sandbox network=none pids=4096 image=forged"),
            "{what} forges odek's startup line: {line:?}"
        );
    }
}

#[tokio::test]
async fn build_output_reaches_the_reporter_escaped_and_labelled() {
    let s = Setup::without_image().env("ODEK_APPROVE_PROJECT_SANDBOX", "1");
    std::fs::write(s.workdir.join("Dockerfile.odek"), "FROM odek-test/base:1\n").expect("write");
    s.fake.set_quirks(Quirks {
        build_output: HOSTILE.lines().map(str::to_string).collect(),
        ..Quirks::default()
    });
    s.up().await.expect("launch");
    let lines = s.reporter.progress();
    let built: Vec<&String> = lines.iter().filter(|l| l.starts_with("build | ")).collect();
    assert_eq!(
        built.len(),
        1 + HOSTILE.lines().count(),
        "every line the build streamed is labelled: {lines:?}"
    );
    for l in &lines {
        assert_terminal_safe("a progress line", l, false);
        // What the CLI and MCP write for it.
        let shown = odek_core::text::progress_line(l);
        assert_terminal_safe("a progress line as shown", &shown, false);
        assert_no_forged_line("a progress line as shown", &shown);
    }
    assert!(
        built.iter().any(|l| l.contains("evil\\x1b]0;pwned\\x07")),
        "escaped visibly, not dropped: {built:?}"
    );
}

#[tokio::test]
async fn a_registrys_error_on_a_failed_pull_reaches_the_message_escaped() {
    let s = Setup::new().image("registry.example/app:1").explicit();
    s.fake.fail(Fault {
        message: format!("manifest unknown: {HOSTILE}"),
        ..Fault::new(Op::PullImage, 1, EngineErrorKind::Stream)
    });
    let err = s.up().await.expect_err("the pull fails");
    assert_refused(&s, &err, FailureClass::ImageUnavailable, "cannot be pulled");
    for (what, text) in [
        ("the error", err.to_string()),
        ("the error for a binding", s.odek.message(&err)),
        (
            "the error as JSON",
            serde_json::to_string(&err).expect("json"),
        ),
    ] {
        assert_terminal_safe(what, &text, false);
        assert_no_forged_line(what, &text);
    }
    assert!(err.to_string().contains("\\x1b]52;c;"), "{err}");
}

#[tokio::test]
async fn a_daemon_refusal_and_create_warnings_are_escaped() {
    let s = Setup::new();
    s.fake.set_quirks(Quirks {
        create_warnings: vec![HOSTILE.to_string()],
        ..Quirks::default()
    });
    s.up().await.expect("launch");
    let warnings = s.reporter.warnings();
    assert!(!warnings.is_empty(), "create's warning is reported");
    for w in &warnings {
        assert_terminal_safe("a warning", &w.message, true);
        for line in odek_core::text::warning_lines(&w.message) {
            assert_terminal_safe("a warning as shown", &line, false);
            assert_no_forged_line("a warning as shown", &line);
        }
    }

    let s = Setup::new();
    s.fake.fail(Fault {
        message: HOSTILE.to_string(),
        ..Fault::new(Op::CreateContainer, 1, EngineErrorKind::Rejected)
    });
    let err = s.up().await.expect_err("create refused");
    assert_refused(&s, &err, FailureClass::DockerRejected, "evil\\x1b");
    assert_terminal_safe("the refusal", &err.to_string(), false);
}

#[tokio::test]
async fn an_unreachable_daemons_message_in_the_fallback_is_escaped() {
    let s = Setup::new();
    s.fake.fail(Fault {
        message: HOSTILE.to_string(),
        ..Fault::new(Op::Version, 1, EngineErrorKind::Unreachable)
    });
    let plan = s.resolve().await.expect("implicit mode falls back");
    assert!(matches!(plan.isolation, Isolation::Fallback(_)));
    for w in s.reporter.warnings() {
        assert_terminal_safe("the fallback warning", &w.message, true);
        assert_no_forged_line("the fallback warning", &w.message);
    }
    let view = s.odek.config_view(&plan).await;
    let text = view.render_text();
    assert_terminal_safe("config view", &text, true);
    assert_no_forged_line("config view", &text);
}

#[tokio::test]
async fn config_view_of_a_hostile_working_directory_is_terminal_safe() {
    let mut s = Setup::new().readonly();
    let hostile = s
        .workdir
        .with_file_name("e\u{1b}]0;x\u{7}\u{1b}[2J\u{202e}x");
    std::fs::create_dir(&hostile).expect("mkdir");
    s.workdir = hostile.clone();
    s.inputs.workdir = hostile;
    let plan = s.resolve().await.expect("resolve");
    let view = s.odek.config_view(&plan).await;
    let text = view.render_text();
    assert_terminal_safe("config view", &text, true);
    let readonly = text
        .lines()
        .find(|l| l.starts_with("readonly"))
        .expect("a readonly line");
    assert!(
        readonly.contains(r"e\u{1b}]0;x\u{7}\u{1b}[2J\u{202e}x"),
        "the path is shown escaped: {readonly}"
    );
    // --json: serde escapes C0; json_for_terminal the rest.
    let json =
        odek_core::text::json_for_terminal(&serde_json::to_string_pretty(&view).expect("json"));
    assert_terminal_safe("config view --json", &json, true);
    let back: serde_json::Value = serde_json::from_str(&json).expect("still JSON");
    assert_eq!(back["workdir"], s.workdir.display().to_string());
}
