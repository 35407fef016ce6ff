//! Resolve against the fake engine (SPEC §3, §6.2, §6.3, §7.1): sandbox
//! modes and the unreachable daemon, the engine's API version, config
//! validation before any Docker call, the project-can-only-tighten rules and
//! the interim refusal of approval-gated project settings.

mod common;

use std::time::Duration;

use common::*;
use odek_core::config::{NetworkMode, SandboxMode, Source};
use odek_core::engine::{ApiVersion, EngineErrorKind, EngineInfo, Fault, Op};
use odek_core::{Error, FailureClass, Isolation, WarningKind};

// ---------------------------------------------------------------------------
// Modes and the daemon (SPEC §3.3, §6.2, §6.3)

#[tokio::test]
async fn implicit_mode_with_a_reachable_daemon_plans_a_container() {
    let s = Setup::new();
    let plan = s.resolve().await.expect("resolve");
    assert_eq!(plan.mode, SandboxMode::Implicit);
    assert_eq!(plan.isolation, Isolation::Container);
    assert_eq!(plan.pids_limit, 4096);
    assert_eq!(plan.network_mode, NetworkMode::None);
    assert!(!plan.internet);
    assert!(plan
        .endpoint
        .as_deref()
        .is_some_and(|e| e.contains("/fake/docker.sock")));
    assert_eq!(
        plan.engine
            .as_ref()
            .map(|e| e.api_version.to_string())
            .as_deref(),
        Some("1.41")
    );
    assert!(
        s.fake.no_mutation(),
        "resolve creates nothing: {:?}",
        s.mutations()
    );
    assert!(matches!(
        plan.sources.get("sandbox_image"),
        Some(Source::Flag { flag }) if flag == "--sandbox-image"
    ));
}

#[tokio::test]
async fn unreachable_daemon_in_implicit_mode_falls_back_loudly() {
    let s = Setup::new();
    s.fake.set_reachable(false);
    let plan = s.resolve().await.expect("fallback plan");
    match &plan.isolation {
        Isolation::Fallback(fb) => {
            assert_eq!(fb.class, FailureClass::DaemonUnreachable);
            assert!(
                fb.reason.contains("unix:///fake/docker.sock"),
                "{}",
                fb.reason
            );
        }
        other => panic!("expected fallback, got {other:?}"),
    }
    let w = s.reporter.of(WarningKind::Fallback);
    assert_eq!(w.len(), 1);
    assert!(
        w[0].message.contains("ON THE HOST WITHOUT ISOLATION"),
        "{}",
        w[0].message
    );
    assert!(
        w[0].message.contains("ODEK_REQUIRE_SANDBOX=1"),
        "says how to make it fatal"
    );
    assert!(plan
        .warnings
        .iter()
        .any(|w| w.kind == WarningKind::Fallback));
    let sb = s.launch(&plan).await.expect("host sandbox");
    assert_eq!(sb.container_id, None);
    assert!(matches!(sb.isolation, Isolation::Fallback(_)));
    assert!(s.fake.containers().is_empty());
    assert!(s.fake.no_mutation(), "{:?}", s.mutations());
    assert_eq!(
        s.fake.calls().len(),
        1,
        "only the ping: {:?}",
        s.fake.calls()
    );
}

#[tokio::test]
async fn unreachable_daemon_in_explicit_mode_is_fatal() {
    let s = Setup::new().explicit();
    s.fake.set_reachable(false);
    let err = s.resolve().await.expect_err("fatal");
    assert_refused_before_create(&s, &err, FailureClass::DaemonUnreachable, "unreachable");
    assert!(
        err.to_string().contains("unix:///fake/docker.sock"),
        "names the endpoint: {err}"
    );
    assert!(s.reporter.of(WarningKind::Fallback).is_empty());
}

#[tokio::test]
async fn unreachable_daemon_with_networks_is_fatal() {
    for s in [
        Setup::new().compose(PROJECT),
        Setup::new().networks(&[SHOP_BACKEND]),
    ] {
        s.fake.set_reachable(false);
        let err = s.resolve().await.expect_err("fatal");
        assert_refused_before_create(&s, &err, FailureClass::DaemonUnreachable, "unreachable");
        assert!(s.reporter.of(WarningKind::Fallback).is_empty());
    }
}

#[tokio::test]
async fn unreachable_daemon_with_require_sandbox_is_fatal() {
    let s = Setup::new().env("ODEK_REQUIRE_SANDBOX", "1");
    s.fake.set_reachable(false);
    let err = s.resolve().await.expect_err("fatal");
    assert_refused_before_create(&s, &err, FailureClass::DaemonUnreachable, "unreachable");
}

#[tokio::test]
async fn switches_and_key_booleans_share_one_spelling_rule() {
    // Accepted the same way by a switch and by a key's variable.
    for v in ["1", "TRUE", "On", "yes"] {
        let s = Setup::new().env("ODEK_REQUIRE_SANDBOX", v);
        s.fake.set_reachable(false);
        let err = s.resolve().await.expect_err("require_sandbox on");
        assert_eq!(err.class(), FailureClass::DaemonUnreachable, "{v:?}: {err}");
        let s = Setup::new().env("ODEK_SANDBOX", v);
        s.fake.set_reachable(false);
        let err = s.resolve().await.expect_err("sandbox=true is explicit");
        assert_eq!(err.class(), FailureClass::DaemonUnreachable, "{v:?}: {err}");
    }
    // Refused the same way, naming the variable, before any Docker call.
    for v in [" 1", "1 ", "maybe", "2", "t"] {
        for var in [
            "ODEK_REQUIRE_SANDBOX",
            "ODEK_SANDBOX",
            "ODEK_SANDBOX_NETWORK_LENIENT",
        ] {
            let s = Setup::new().env(var, v);
            let err = s.resolve().await.expect_err("not a boolean");
            assert_eq!(err.class(), FailureClass::Config, "{var}={v:?}: {err}");
            let msg = err.to_string();
            assert!(msg.contains(var) && msg.contains("1/true/yes/on"), "{msg}");
            assert!(s.fake.calls().is_empty(), "{var}={v:?}: Docker was called");
        }
    }
}

#[tokio::test]
async fn docker_timeout_is_checked_before_any_docker_call() {
    for v in ["0", "-1", "NaN", "inf", "1e6", "5s", " 5"] {
        let s = Setup::new().env("ODEK_DOCKER_TIMEOUT", v);
        let err = s.resolve().await.expect_err("refused");
        assert_eq!(err.class(), FailureClass::Config, "{v:?}: {err}");
        let msg = err.to_string();
        assert!(
            msg.contains("ODEK_DOCKER_TIMEOUT") && msg.contains("positive number of seconds"),
            "{msg}"
        );
        assert!(s.fake.calls().is_empty(), "{v:?}: Docker was called");
    }
    for v in ["0.5", "3", "999999"] {
        let s = Setup::new().env("ODEK_DOCKER_TIMEOUT", v);
        s.resolve().await.unwrap_or_else(|e| panic!("{v:?}: {e}"));
        assert_eq!(
            odek_core::config::parse_docker_timeout(v),
            Ok(Duration::from_secs_f64(v.parse().expect("f64")))
        );
    }
}

#[tokio::test]
async fn ping_timing_out_counts_as_unreachable() {
    let s = Setup::new();
    s.fake
        .fail(Fault::new(Op::Version, 1, EngineErrorKind::Timeout));
    let plan = s.resolve().await.expect("fallback");
    assert!(
        matches!(plan.isolation, Isolation::Fallback(ref f) if f.class == FailureClass::DaemonUnreachable)
    );
}

#[tokio::test]
async fn ping_rejected_is_fatal_even_in_implicit_mode() {
    let s = Setup::new();
    s.fake
        .fail(Fault::new(Op::Version, 1, EngineErrorKind::Rejected));
    let err = s.resolve().await.expect_err("fatal");
    assert_refused_before_create(&s, &err, FailureClass::DockerRejected, "injected");
}

#[tokio::test]
async fn engine_older_than_api_1_40_is_refused_naming_both_versions() {
    let s = Setup::new();
    s.fake.set_api_version(ApiVersion {
        major: 1,
        minor: 39,
    });
    let err = s.resolve().await.expect_err("too old");
    assert_refused_before_create(&s, &err, FailureClass::DockerRejected, "1.39");
    assert!(err.to_string().contains("1.40"), "{err}");
    assert!(
        s.reporter.of(WarningKind::Fallback).is_empty(),
        "never a fallback"
    );
}

#[tokio::test]
async fn engine_at_api_1_40_is_accepted() {
    let s = Setup::new();
    s.fake.set_api_version(ApiVersion {
        major: 1,
        minor: 40,
    });
    s.up().await.expect("1.40 is the minimum");
}

#[tokio::test]
async fn resolve_itself_refuses_an_old_negotiated_version() {
    let fake = shop_fake();
    let spy = Spy::new(fake.clone());
    spy.answer_version(EngineInfo {
        api_version: ApiVersion {
            major: 1,
            minor: 24,
        },
        server_version: "1.12".into(),
    });
    let s = Setup::over(fake, spy).image(IMAGE);
    let err = s.resolve().await.expect_err("too old");
    assert!(
        err.to_string().contains("1.24") && err.to_string().contains("1.40"),
        "{err}"
    );
}

#[tokio::test]
async fn sandbox_off_never_touches_docker() {
    let s = Setup::new().no_sandbox();
    let plan = s.resolve().await.expect("off");
    assert_eq!(plan.isolation, Isolation::Off);
    let sb = s.launch(&plan).await.expect("host");
    assert_eq!(sb.container_id, None);
    assert!(s.fake.calls().is_empty(), "{:?}", s.fake.calls());
    assert!(
        sb.startup_line().contains("sandbox off"),
        "{}",
        sb.startup_line()
    );
}

#[tokio::test]
async fn user_config_false_turns_the_sandbox_off() {
    let s = Setup::new().user_config(r#"{"sandbox": false}"#);
    let plan = s.resolve().await.expect("off");
    assert_eq!(plan.isolation, Isolation::Off);
    assert!(matches!(
        plan.sources.get("sandbox"),
        Some(Source::User { .. })
    ));
}

#[tokio::test]
async fn env_sandbox_true_is_explicit() {
    let s = Setup::new().env("ODEK_SANDBOX", "1");
    s.fake.set_reachable(false);
    let err = s.resolve().await.expect_err("explicit via env is fatal");
    assert_eq!(err.class(), FailureClass::DaemonUnreachable);
}

// ---------------------------------------------------------------------------
// Validation before any Docker call (SPEC §3.4)

async fn config_error(s: &Setup, needle: &str) -> Error {
    let err = s.resolve().await.expect_err("config error");
    assert_refused_before_create(s, &err, FailureClass::Config, needle);
    assert!(
        s.fake.calls().is_empty(),
        "no Docker call at all: {:?}",
        s.fake.calls()
    );
    err
}

#[tokio::test]
async fn sandbox_network_host_container_or_a_name_is_refused_before_docker() {
    for bad in [
        "host",
        "container:x",
        "shop_default",
        "HOST",
        "ns:/proc/1/ns/net",
        "",
    ] {
        let s = Setup::new().network_mode(bad);
        let err = config_error(&s, "sandbox_network must be \"none\" or \"bridge\"").await;
        let msg = err.to_string();
        assert!(
            msg.contains("sandbox_networks") && msg.contains("--sandbox-compose"),
            "points to attaching: {msg}"
        );
        assert!(msg.contains("--sandbox-network"), "names the source: {msg}");
    }
}

#[tokio::test]
async fn lenient_mode_downgrades_an_invalid_network_to_none() {
    let s = Setup::new()
        .network_mode("host")
        .env("ODEK_SANDBOX_NETWORK_LENIENT", "1");
    let plan = s.resolve().await.expect("lenient");
    assert_eq!(plan.network_mode, NetworkMode::None);
    assert!(plan
        .warnings
        .iter()
        .any(|w| w.kind == WarningKind::NetworkModeDowngraded));
    let _sandbox = s.launch(&plan).await.expect("launch");
    assert_eq!(s.only_container().network_mode, "none");
}

#[tokio::test]
async fn memory_lots_is_refused_before_docker() {
    let s = Setup::new().memory("lots");
    let err = config_error(&s, "sandbox_memory").await;
    assert!(err.to_string().contains("\"lots\""), "{err}");
}

#[tokio::test]
async fn pids_limit_zero_or_negative_is_refused() {
    for n in [0, -1] {
        let s = Setup::new().pids(n);
        config_error(&s, "sandbox_pids_limit").await;
    }
}

#[tokio::test]
async fn reserved_or_malformed_network_names_are_refused_before_docker() {
    for bad in [
        "host",
        "none",
        "bridge",
        "default",
        "a:b",
        "a/b",
        "-x",
        "container:abc",
    ] {
        let s = Setup::new().networks(&[bad]);
        config_error(&s, "is not accepted").await;
    }
}

#[tokio::test]
async fn networks_while_the_sandbox_is_off_are_a_config_error() {
    let s = Setup::new().no_sandbox().compose(PROJECT);
    let msg = config_error(&s, "sandbox is off").await.to_string();
    assert!(
        msg.contains("--no-sandbox") && msg.contains("--sandbox-compose"),
        "{msg}"
    );
    let s = Setup::new()
        .networks(&[SHOP_BACKEND])
        .env("ODEK_SANDBOX", "false");
    config_error(&s, "sandbox is off").await;
}

#[tokio::test]
async fn malformed_project_config_names_file_line_and_column() {
    let s = Setup::new().project_config("{\n  \"sandbox_pids_limit\": 10,\n  oops\n}");
    let msg = config_error(&s, "odek.json:3:").await.to_string();
    assert!(msg.contains(&s.workdir.display().to_string()), "{msg}");
}

// ---------------------------------------------------------------------------
// Project config can only tighten (SPEC §3.2) and needs approval (§7.1)

#[tokio::test]
async fn project_settings_that_need_approval_are_not_launched_without_it() {
    for (key, json) in [
        (
            "sandbox_compose_project",
            r#"{"sandbox_compose_project": "shop"}"#,
        ),
        (
            "sandbox_networks",
            r#"{"sandbox_networks": ["shop_backend"]}"#,
        ),
        ("sandbox_image", r#"{"sandbox_image": "alpine:3.22"}"#),
        ("sandbox_env", r#"{"sandbox_env": {"NODE_ENV": "test"}}"#),
        (
            "sandbox_volumes",
            r#"{"sandbox_volumes": ["./cache:/cache"]}"#,
        ),
        ("sandbox_network", r#"{"sandbox_network": "bridge"}"#),
        ("sandbox_network", r#"{"sandbox_network": "none"}"#),
    ] {
        // No image flag when the project sets the image (a flag would win).
        let s = if key == "sandbox_image" {
            Setup::without_image()
        } else {
            Setup::new()
        };
        std::fs::create_dir_all(s.workdir.join("cache")).expect("cache dir");
        let s = s.project_config(json);
        let plan = s.resolve().await.expect(key);
        let req = plan
            .approval
            .as_ref()
            .unwrap_or_else(|| panic!("{key}: an approval request"));
        assert_eq!(req.knobs, vec![key.to_string()], "{json}");
        assert!(
            s.fake.no_mutation(),
            "{key}: resolve changed something: {:?}",
            s.mutations()
        );
        let err = s.launch(&plan).await.expect_err(key);
        assert_refused_before_create(&s, &err, FailureClass::Config, "needs operator approval");
        let msg = err.to_string();
        assert!(msg.contains(key), "names {key}: {msg}");
        assert!(msg.contains("odek.json"), "names the file: {msg}");
        assert!(
            msg.contains("ODEK_APPROVE_PROJECT_SANDBOX=1"),
            "says the way out: {msg}"
        );
    }
}

#[tokio::test]
async fn project_request_overridden_by_an_operator_needs_no_approval() {
    // The flag wins, so the applied value is not the project's.
    let s = Setup::new().project_config(r#"{"sandbox_image": "alpine:3.22"}"#);
    let plan = s.resolve().await.expect("flag wins, no approval needed");
    assert_eq!(plan.image.reference.original, IMAGE);
    assert!(plan.approval.is_none(), "{:?}", plan.approval);
    s.launch(&plan).await.expect("launch without approval");
}

#[tokio::test]
async fn operator_sources_never_need_approval() {
    let s = Setup::new().user_config(r#"{"sandbox_compose_project": "shop"}"#);
    let plan = s
        .resolve()
        .await
        .expect("user config is an operator source");
    assert_eq!(plan.networks.len(), 2);
    assert!(plan.approval.is_none());
    s.launch(&plan).await.expect("launch without approval");
    let s = Setup::new().env("ODEK_SANDBOX_COMPOSE_PROJECT", "shop");
    assert_eq!(s.resolve().await.expect("env").networks.len(), 2);
}

#[tokio::test]
async fn project_pids_limit_lower_than_default_applies() {
    let s = Setup::new().project_config(r#"{"sandbox_pids_limit": 100}"#);
    let plan = s.resolve().await.expect("resolve");
    assert_eq!(plan.pids_limit, 100);
    assert!(matches!(
        plan.sources.get("sandbox_pids_limit"),
        Some(Source::Project { .. })
    ));
    let _sandbox = s.launch(&plan).await.expect("launch");
    assert_eq!(s.only_container().pids_limit, Some(100));
}

#[tokio::test]
async fn project_pids_limit_higher_is_ignored_with_a_warning() {
    let s = Setup::new().project_config(r#"{"sandbox_pids_limit": 100000}"#);
    let plan = s.resolve().await.expect("resolve");
    assert_eq!(plan.pids_limit, 4096);
    let w: Vec<_> = plan
        .warnings
        .iter()
        .filter(|w| w.kind == WarningKind::ProjectCannotLoosen)
        .collect();
    assert_eq!(w.len(), 1, "{:?}", plan.warnings);
    assert!(
        w[0].message.contains("sandbox_pids_limit"),
        "{}",
        w[0].message
    );
    assert!(
        s.reporter.of(WarningKind::ProjectCannotLoosen).len() == 1,
        "reported"
    );
}

/// The ProjectCannotLoosen warnings of a plan.
fn loosen_warnings(plan: &odek_core::Plan) -> Vec<String> {
    plan.warnings
        .iter()
        .filter(|w| w.kind == WarningKind::ProjectCannotLoosen)
        .map(|w| w.message.clone())
        .collect()
}

#[tokio::test]
async fn a_project_cannot_raise_the_users_memory_or_cpu_limit() {
    let s = Setup::new()
        .user_config(r#"{"sandbox_memory": "256m", "sandbox_cpus": "1"}"#)
        .project_config(r#"{"sandbox_memory": "64g", "sandbox_cpus": "2"}"#);
    let plan = s.resolve().await.expect("resolve");
    assert_eq!(
        plan.memory_bytes,
        Some(256 << 20),
        "64g would loosen the user's 256m"
    );
    assert_eq!(plan.cpus.as_ref().map(|c| c.nano), Some(1_000_000_000));
    let w = loosen_warnings(&plan);
    assert_eq!(w.len(), 2, "{w:?}");
    assert!(
        w.iter()
            .any(|m| m.contains("sandbox_memory") && m.contains("64g") && m.contains("256m")),
        "{w:?}"
    );
    assert!(w.iter().any(|m| m.contains("sandbox_cpus")), "{w:?}");
    // Equal is not lower either.
    let s = Setup::new()
        .user_config(r#"{"sandbox_memory": "1g"}"#)
        .project_config(r#"{"sandbox_memory": "1024m"}"#);
    let plan = s.resolve().await.expect("resolve");
    assert_eq!(loosen_warnings(&plan).len(), 1);
}

#[tokio::test]
async fn a_project_may_lower_or_set_memory_and_cpu_limits() {
    let s = Setup::new()
        .user_config(r#"{"sandbox_memory": "1g", "sandbox_cpus": "2"}"#)
        .project_config(r#"{"sandbox_memory": "512m", "sandbox_cpus": "0.5"}"#);
    let plan = s.resolve().await.expect("resolve");
    assert_eq!(plan.memory_bytes, Some(512 << 20));
    assert_eq!(plan.cpus.as_ref().map(|c| c.nano), Some(500_000_000));
    assert!(loosen_warnings(&plan).is_empty());
    // No user limit: any project CPU limit tightens; memory has a default
    // (4g), and only a lower project value applies.
    let s = Setup::new().project_config(r#"{"sandbox_memory": "2g", "sandbox_cpus": "8"}"#);
    let plan = s.resolve().await.expect("resolve");
    assert_eq!(plan.memory_bytes, Some(2 << 30));
    assert_eq!(plan.cpus.as_ref().map(|c| c.nano), Some(8_000_000_000));
    assert!(loosen_warnings(&plan).is_empty());
    // A malformed project value is still refused, not silently dropped.
    let s = Setup::new()
        .user_config(r#"{"sandbox_memory": "1g"}"#)
        .project_config(r#"{"sandbox_memory": "lots"}"#);
    let err = s.resolve().await.expect_err("malformed");
    assert_eq!(err.class(), FailureClass::Config, "{err}");
    assert!(s.fake.calls().is_empty());
}

/// Every sandbox gets a memory limit by default (4 GiB), shown with source
/// `default`; the default does not make the mode explicit (a host fallback
/// stays possible and simply has no limit), a project can only lower it,
/// and the operator may set any value.
#[tokio::test]
async fn every_sandbox_has_a_default_memory_limit_a_project_can_only_lower() {
    let s = Setup::new();
    let plan = s.resolve().await.expect("resolve");
    assert_eq!(
        plan.memory_bytes,
        Some(odek_core::config::DEFAULT_MEMORY_BYTES)
    );
    assert_eq!(plan.memory_bytes, Some(4 << 30));
    assert_eq!(plan.sources.get("sandbox_memory"), Some(&Source::Default));
    assert_eq!(
        plan.mode,
        SandboxMode::Implicit,
        "a default is not a request"
    );
    let view = s.odek.config_view(&plan).await;
    assert!(
        view.render_text()
            .lines()
            .any(|l| l.starts_with("memory") && l.contains("4096 MiB") && l.ends_with("(default)")),
        "{}",
        view.render_text()
    );
    let _sandbox = s.launch(&plan).await.expect("launch");
    assert_eq!(s.only_container().memory_bytes, 4 << 30);

    // Daemon unreachable in implicit mode: still the loud fallback.
    let s = Setup::new();
    s.fake.set_reachable(false);
    let plan = s.resolve().await.expect("fallback");
    assert!(
        matches!(plan.isolation, Isolation::Fallback(_)),
        "{:?}",
        plan.isolation
    );
    assert!(
        !plan
            .warnings
            .iter()
            .any(|w| w.message.contains("sandbox_memory")),
        "{:?}",
        plan.warnings
    );

    // A project may only lower the default.
    let s = Setup::new().project_config(r#"{"sandbox_memory": "8g"}"#);
    let plan = s.resolve().await.expect("resolve");
    assert_eq!(
        plan.memory_bytes,
        Some(4 << 30),
        "8g would loosen the default"
    );
    assert_eq!(plan.sources.get("sandbox_memory"), Some(&Source::Default));
    let w = loosen_warnings(&plan);
    assert!(
        w.len() == 1 && w[0].contains("8g") && w[0].contains("\"4g\""),
        "{w:?}"
    );
    let s = Setup::new().project_config(r#"{"sandbox_memory": "4g"}"#);
    assert_eq!(
        loosen_warnings(&s.resolve().await.expect("resolve")).len(),
        1
    );

    // Operator sources may raise it: the user config, env and flags.
    let s = Setup::new()
        .user_config(r#"{"sandbox_memory": "16g"}"#)
        .project_config(r#"{"sandbox_memory": "8g"}"#);
    let plan = s.resolve().await.expect("resolve");
    assert_eq!(
        plan.memory_bytes,
        Some(8 << 30),
        "lower than the user's 16g"
    );
    assert!(loosen_warnings(&plan).is_empty());
    let s = Setup::new().env("ODEK_SANDBOX_MEMORY", "32g");
    assert_eq!(
        s.resolve().await.expect("resolve").memory_bytes,
        Some(32 << 30)
    );
    let s = Setup::new().memory("1t");
    assert_eq!(
        s.resolve().await.expect("resolve").memory_bytes,
        Some(1 << 40)
    );
}

#[tokio::test]
async fn a_project_cannot_choose_the_sandbox_user() {
    let s = Setup::new()
        .user_config(r#"{"sandbox_user": "1000:1000"}"#)
        .project_config(r#"{"sandbox_user": "2000"}"#);
    let plan = s.resolve().await.expect("resolve");
    assert_eq!(plan.user.as_deref(), Some("1000:1000"));
    let w = loosen_warnings(&plan);
    assert!(
        w.len() == 1 && w[0].contains("sandbox_user") && w[0].contains("1000:1000"),
        "{w:?}"
    );
    // Root, or any other user, from the project: ignored; the operator's
    // own uid:gid applies (SPEC §6.1 "user").
    let me = default_user_field();
    let me = me.trim_start_matches(" user=");
    for user in [
        "0",
        "0:0",
        "root",
        "root:root",
        "00",
        "1000:0",
        "dev:root",
        "1000:1000",
    ] {
        let s = Setup::new().project_config(&format!(r#"{{"sandbox_user": "{user}"}}"#));
        let plan = s.resolve().await.expect("resolve");
        assert_eq!(plan.user.as_deref(), Some(me), "{user}");
        let w = loosen_warnings(&plan);
        assert!(
            w.len() == 1 && w[0].contains("cannot choose the sandbox user"),
            "{user}: {w:?}"
        );
    }
    // Flags still decide over everything.
    let s = Setup::new()
        .user_config(r#"{"sandbox_user": "1000"}"#)
        .flag("sandbox_user", "--sandbox-user", |l| {
            l.sandbox_user = Some("0".into())
        });
    let plan = s.resolve().await.expect("resolve");
    assert_eq!(plan.user.as_deref(), Some("0"));
}

#[tokio::test]
async fn project_pids_limit_is_compared_with_the_user_config() {
    let s = Setup::new()
        .user_config(r#"{"sandbox_pids_limit": 50}"#)
        .project_config(r#"{"sandbox_pids_limit": 100}"#);
    let plan = s.resolve().await.expect("resolve");
    assert_eq!(plan.pids_limit, 50, "100 would loosen the user's 50");
}

#[tokio::test]
async fn flags_still_override_the_project_pids_limit() {
    let s = Setup::new()
        .project_config(r#"{"sandbox_pids_limit": 100}"#)
        .pids(200);
    let plan = s.resolve().await.expect("resolve");
    assert_eq!(plan.pids_limit, 200);
    let s = Setup::new()
        .project_config(r#"{"sandbox_pids_limit": 100}"#)
        .env("ODEK_SANDBOX_PIDS_LIMIT", "300");
    assert_eq!(s.resolve().await.expect("resolve").pids_limit, 300);
}

#[tokio::test]
async fn project_sandbox_false_is_ignored_with_a_warning() {
    let s = Setup::new().project_config(r#"{"sandbox": false}"#);
    let plan = s.resolve().await.expect("resolve");
    assert_eq!(plan.mode, SandboxMode::Implicit);
    assert_eq!(plan.isolation, Isolation::Container);
    assert!(plan
        .warnings
        .iter()
        .any(|w| w.kind == WarningKind::ProjectCannotLoosen && w.message.contains("\"sandbox\"")));
    let _sandbox = s.launch(&plan).await.expect("still sandboxed");
    assert_eq!(s.fake.containers().len(), 1);
}

#[tokio::test]
async fn project_sandbox_true_makes_the_mode_explicit() {
    let s = Setup::new().project_config(r#"{"sandbox": true}"#);
    s.fake.set_reachable(false);
    let err = s
        .resolve()
        .await
        .expect_err("explicit from project is fatal");
    assert_eq!(err.class(), FailureClass::DaemonUnreachable);
}

#[tokio::test]
async fn project_readonly_false_is_ignored_and_true_applies() {
    let s = Setup::new()
        .user_config(r#"{"sandbox_readonly": true}"#)
        .project_config(r#"{"sandbox_readonly": false}"#);
    let plan = s.resolve().await.expect("resolve");
    assert!(plan.readonly);
    assert!(plan
        .warnings
        .iter()
        .any(|w| w.kind == WarningKind::ProjectCannotLoosen));
    let s = Setup::new().project_config(r#"{"sandbox_readonly": true}"#);
    assert!(s.resolve().await.expect("resolve").readonly);
}

#[tokio::test]
async fn unknown_project_keys_warn_but_do_not_stop() {
    let s = Setup::new().project_config(r#"{"sandbox_pids": 5}"#);
    let plan = s.resolve().await.expect("resolve");
    assert!(plan
        .warnings
        .iter()
        .any(|w| w.kind == WarningKind::UnknownKey));
}

// ---------------------------------------------------------------------------
// The working directory is mounted at /workspace (SPEC §3.4, §6.1)

#[tokio::test]
async fn the_home_directory_is_refused_as_workdir_but_fine_with_the_sandbox_off() {
    let mut s = Setup::new();
    s.inputs.workdir = s.root().join("home");
    let err = s.resolve().await.expect_err("home as workdir");
    assert_refused_before_create(&s, &err, FailureClass::Config, "home directory");

    // --no-sandbox mounts nothing: running from $HOME is the user's call.
    let mut s = Setup::new().no_sandbox();
    s.inputs.workdir = s.root().join("home");
    let plan = s.resolve().await.expect("no sandbox from $HOME");
    assert_eq!(plan.isolation, Isolation::Off);
    assert!(s.fake.no_mutation(), "{:?}", s.mutations());
}

#[tokio::test]
async fn the_sandbox_off_warns_about_container_only_settings() {
    let s = Setup::new().no_sandbox().memory("512m");
    let plan = s.resolve().await.expect("resolve");
    assert_eq!(plan.isolation, Isolation::Off);
    let w: Vec<String> = s
        .reporter
        .of(WarningKind::Other)
        .into_iter()
        .map(|w| w.message)
        .collect();
    assert!(
        w.iter()
            .any(|m| m.contains("--sandbox-memory") && m.contains("ignored on the host")),
        "{w:?}"
    );
}

#[cfg(unix)]
#[tokio::test]
async fn a_docker_socket_below_the_workdir_is_refused() {
    let s = Setup::new();
    let deep = s.workdir.join("ops/run");
    std::fs::create_dir_all(&deep).expect("dirs");
    let _listener =
        std::os::unix::net::UnixListener::bind(deep.join("docker.sock")).expect("bind socket");
    let err = s
        .resolve()
        .await
        .expect_err("docker.sock under the workdir");
    assert_refused_before_create(&s, &err, FailureClass::Config, "Docker socket");
    assert!(err.to_string().contains("ops/run/docker.sock"), "{err}");
}

#[cfg(unix)]
#[tokio::test]
async fn any_socket_below_the_workdir_is_refused() {
    // A root-owned tmux socket two levels down: container root could drive
    // the host's tmux (`tmux -S /workspace/.tmux/default send-keys …`).
    let s = Setup::new();
    let deep = s.workdir.join(".tmux/sessions");
    std::fs::create_dir_all(&deep).expect("dirs");
    let _listener =
        std::os::unix::net::UnixListener::bind(deep.join("default")).expect("bind socket");
    let err = s.resolve().await.expect_err("a socket under the workdir");
    assert_refused_before_create(&s, &err, FailureClass::Config, "holds a Unix socket");
    let msg = err.to_string();
    assert!(msg.contains(".tmux/sessions/default"), "{msg}");
    assert!(msg.contains("remove or move the socket"), "{msg}");
}

// ---------------------------------------------------------------------------
// Config view: what a setup failure does (SPEC §6.3, §10.4)

/// The config view of `s`'s plan, and its text's "on failure" line.
async fn on_failure(s: &Setup) -> (odek_core::view::ConfigView, String) {
    let plan = s.resolve().await.expect("resolve");
    let view = s.odek.config_view(&plan).await;
    let text = view.render_text();
    let line = text
        .lines()
        .find(|l| l.starts_with("on failure"))
        .unwrap_or_else(|| panic!("no on-failure line:\n{text}"))
        .to_string();
    (view, line)
}

#[tokio::test]
async fn config_view_with_a_compose_project_says_every_failure_is_a_refusal() {
    let s = Setup::new().compose(PROJECT);
    let (view, line) = on_failure(&s).await;
    assert_eq!(view.mode, SandboxMode::Implicit);
    assert!(!view.fallback_allowed);
    assert!(
        line.contains("every setup failure is a refusal") && line.contains("networks are attached"),
        "{line}"
    );
    assert!(!line.contains("host, with a warning"), "{line}");
}

#[tokio::test]
async fn config_view_in_explicit_mode_or_with_require_sandbox_says_refusal() {
    let (view, line) = on_failure(&Setup::new().explicit()).await;
    assert!(!view.fallback_allowed);
    assert!(line.contains("every setup failure is a refusal"), "{line}");
    assert!(line.contains("explicit mode"), "{line}");
    let s = Setup::new().env("ODEK_REQUIRE_SANDBOX", "1");
    let (view, line) = on_failure(&s).await;
    assert!(!view.fallback_allowed);
    assert!(line.contains("ODEK_REQUIRE_SANDBOX"), "{line}");
}

#[tokio::test]
async fn config_view_in_plain_implicit_mode_names_the_host_fallback() {
    let (view, line) = on_failure(&Setup::new()).await;
    assert!(view.fallback_allowed);
    assert!(
        line.contains("image that cannot be pulled") && line.contains("run on the host"),
        "{line}"
    );
}
