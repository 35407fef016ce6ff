//! `sandbox_runtime` (SPEC §6.1 "runtime") against the fake engine: an OCI
//! runtime the engine has not registered is refused before anything is
//! created, naming the runtimes it has and how to register one; a known one
//! is sent as `HostConfig.Runtime` and shown where the sandbox is shown; a
//! project's asks for approval, bound to the name; a child keeps its
//! parent's; the pool key tells plans apart by it.

mod common;

use common::*;
use odek_core::approval::Decision;
use odek_core::config::names;
use odek_core::engine::EngineSecurity;
use odek_core::narrow::{narrow, NarrowRequest};
use odek_core::{FailureClass, LaunchOptions};

/// An engine with gVisor registered beside Docker's own runtimes, as
/// `"runtimes": {"runsc": {"path": "/usr/bin/runsc"}}` in daemon.json gives.
fn with_runsc(s: &Setup) {
    s.fake.set_security(EngineSecurity {
        runtimes: vec![
            "io.containerd.runc.v2".into(),
            "runc".into(),
            "runsc".into(),
        ],
        default_runtime: Some("runc".into()),
        ..EngineSecurity::default()
    });
}

/// `--sandbox-runtime <name>`.
fn runtime_flag(s: Setup, name: &str) -> Setup {
    let n = name.to_string();
    s.flag(names::sandbox_runtime, "--sandbox-runtime", |l| {
        l.sandbox_runtime = Some(n)
    })
}

#[tokio::test]
async fn an_unknown_runtime_is_refused_before_anything_is_created() {
    // The fake engine has Docker's runtimes only: runc (the default) and
    // containerd's names for it.
    let s = runtime_flag(Setup::new(), "crun");
    let e = s.resolve().await.expect_err("crun is not registered");
    assert_refused_before_create(&s, &e, FailureClass::Config, "\"crun\"");
    let msg = e.to_string();
    for needle in [
        "flag --sandbox-runtime",
        "sandbox_runtime",
        "is not a runtime the engine at unix:///fake/docker.sock has registered",
        "it has io.containerd.runc.v2, io.containerd.runtime.v1.linux, runc (default)",
        "nothing was created",
        "\"runtimes\" in the daemon's /etc/docker/daemon.json",
        "restart or reload the daemon",
    ] {
        assert!(msg.contains(needle), "{needle:?} not in: {msg}");
    }
    assert!(
        s.fake
            .calls_of(odek_core::engine::Op::CreateContainer)
            .is_empty(),
        "create was asked"
    );

    // runsc, not registered: registering it would only meet the gVisor
    // refusal, so that is what is said (not how to register it).
    let s = runtime_flag(Setup::new(), "runsc");
    let e = s.resolve().await.expect_err("runsc");
    assert_refused_before_create(
        &s,
        &e,
        FailureClass::Config,
        "is gVisor, which odek refuses",
    );
    assert!(!e.to_string().contains("daemon.json"), "{e}");

    // From the environment, the message names the variable.
    let s = Setup::new().env("ODEK_SANDBOX_RUNTIME", "kata");
    let e = s.resolve().await.expect_err("kata is not registered");
    assert_refused_before_create(&s, &e, FailureClass::Config, "env ODEK_SANDBOX_RUNTIME");

    // A name no engine registers is refused before the engine is asked.
    let s = runtime_flag(Setup::new(), "run sc");
    let e = s.resolve().await.expect_err("not a runtime name");
    assert_refused_before_create(&s, &e, FailureClass::Config, "[A-Za-z0-9][A-Za-z0-9_.+-]*");
    assert!(s.fake.calls().is_empty(), "{:?}", s.fake.calls());
}

/// gVisor (a runtime registered with a path to `runsc`), asked for or the
/// engine's default, is refused at resolve with the reasons, before create;
/// a runtime named `runsc` with another path is not gVisor to odek here
/// (the verify's process check stands behind that: e2e/runtime_runsc.rs).
#[tokio::test]
async fn gvisor_asked_for_or_the_default_is_refused_before_create() {
    let gvisor = |default: &str| EngineSecurity {
        runtimes: vec!["runc".into(), "runsc".into()],
        default_runtime: Some(default.into()),
        gvisor: vec!["runsc".into()],
        ..EngineSecurity::default()
    };
    let s = runtime_flag(Setup::new(), "runsc");
    s.fake.set_security(gvisor("runc"));
    let e = s.resolve().await.expect_err("gVisor is refused");
    assert_refused_before_create(&s, &e, FailureClass::Config, "flag --sandbox-runtime");
    let msg = e.to_string();
    for needle in [
        "sandbox_runtime \"runsc\" is gVisor (registered with a path to runsc)",
        "so nothing was created",
        "its seccomp mode 2 is gVisor's own filter, not odek's profile",
        "docker top",
    ] {
        assert!(msg.contains(needle), "{needle:?} not in: {msg}");
    }

    // Unset, on an engine whose default is gVisor: the same refusal.
    let s = Setup::new();
    s.fake.set_security(gvisor("runsc"));
    let e = s
        .resolve()
        .await
        .expect_err("the default gVisor is refused");
    assert_refused_before_create(&s, &e, FailureClass::Config, "the engine's DefaultRuntime");

    // runc beside it is not refused.
    let s = runtime_flag(Setup::new(), "runc");
    s.fake.set_security(gvisor("runsc"));
    s.resolve()
        .await
        .expect("runc on an engine that also has gVisor");
}

#[tokio::test]
async fn a_runtime_the_engine_dropped_since_resolve_is_refused_at_launch_before_create() {
    let s = runtime_flag(Setup::new(), "runsc");
    with_runsc(&s);
    let plan = s.resolve().await.expect("resolve");
    assert_eq!(plan.runtime.as_deref(), Some("runsc"));
    // The daemon is reconfigured without it (or the plan came through the
    // C ABI from another engine's resolve).
    s.fake.set_security(EngineSecurity {
        runtimes: vec!["runc".into()],
        default_runtime: Some("runc".into()),
        ..EngineSecurity::default()
    });
    let e = s.launch(&plan).await.expect_err("runsc is gone");
    assert_refused_before_create(&s, &e, FailureClass::Config, "it has runc (default)");
}

#[tokio::test]
async fn a_known_runtime_is_sent_as_host_config_runtime_and_shown() {
    let (s, spy) = spied();
    let s = runtime_flag(s, "runsc");
    with_runsc(&s);
    let plan = s.resolve().await.expect("resolve");
    assert_eq!(plan.runtime.as_deref(), Some("runsc"));
    assert!(plan.approval.is_none(), "an operator's runtime needs none");
    let view = s.odek.config_view(&plan).await;
    assert_eq!(view.runtime.as_deref(), Some("runsc"));
    let text = view.render_text();
    assert!(
        text.lines().any(|l| l.starts_with("runtime ")
            && l.contains("runsc")
            && l.contains("(flag --sandbox-runtime)")),
        "{text}"
    );

    let sb = s.launch(&plan).await.expect("launch");
    let sandbox_specs: Vec<_> = spy
        .specs()
        .into_iter()
        .filter(|c| !c.name.ends_with("-probe"))
        .collect();
    assert_eq!(sandbox_specs.len(), 1, "{sandbox_specs:?}");
    assert_eq!(sandbox_specs[0].runtime.as_deref(), Some("runsc"));
    assert_eq!(s.only_container().runtime, "runsc");
    assert_eq!(sb.applied.as_ref().expect("applied").runtime, "runsc");
    assert!(
        sb.startup_line().contains(" runtime=runsc supervisor="),
        "{}",
        sb.startup_line()
    );
    let env = s.odek.describe(&sb).await.expect("describe");
    assert_eq!(env.runtime.as_deref(), Some("runsc"));
    let block = odek_core::describe::render_prompt(&env);
    assert!(block.contains("- OCI runtime: `runsc` (gVisor)"), "{block}");
    assert!(!block.contains("SPEC"), "{block}");
}

#[tokio::test]
async fn without_a_runtime_the_engine_default_is_used_and_shown() {
    let (s, spy) = spied();
    let plan = s.resolve().await.expect("resolve");
    assert_eq!(plan.runtime, None);
    assert_eq!(plan.engine_default_runtime.as_deref(), Some("runc"));
    let text = s.odek.config_view(&plan).await.render_text();
    assert!(
        text.lines()
            .any(|l| l.starts_with("runtime ") && l.contains("runc (the engine's default)")),
        "{text}"
    );
    let sb = s.launch(&plan).await.expect("launch");
    assert!(spy.specs().iter().all(|c| c.runtime.is_none()));
    assert!(
        sb.startup_line().contains(" runtime=runc "),
        "{}",
        sb.startup_line()
    );
    let env = s.odek.describe(&sb).await.expect("describe");
    assert_eq!(env.runtime.as_deref(), Some("runc"));
    assert!(odek_core::describe::render_prompt(&env).contains("- OCI runtime: `runc`.\n"));
}

#[tokio::test]
async fn a_project_runtime_needs_approval_bound_to_its_name() {
    let s = Setup::new().project_config(r#"{"sandbox_runtime": "runsc"}"#);
    with_runsc(&s);
    let plan = s.resolve().await.expect("resolve");
    let req = plan.approval.clone().expect("a project's runtime asks");
    assert_eq!(req.knobs, ["sandbox_runtime"]);
    assert_eq!(req.runtime.as_deref(), Some("runsc"));
    assert!(
        req.card
            .lines()
            .any(|l| l.trim_start().starts_with("runtime") && l.contains("runsc")),
        "{}",
        req.card
    );
    // Unapproved: nothing is created.
    let e = s.launch(&plan).await.expect_err("no approval");
    assert_refused_before_create(&s, &e, FailureClass::Config, "needs operator approval");

    // Trusted: it launches on runsc.
    let approval = s.odek.approve(&plan, Decision::Trust).expect("approve");
    let opts = LaunchOptions {
        approval: Some(approval),
        ..Default::default()
    };
    let sb = s
        .odek
        .launch(&plan, &opts, &s.reporter)
        .await
        .expect("launch");
    assert_eq!(s.only_container().runtime, "runsc");
    s.odek.destroy(&sb).await.expect("destroy");

    // The trust is bound to the name: another runtime asks again, and a
    // plan edited to another runtime than its request's is refused.
    std::fs::write(
        s.workdir.join("odek.json"),
        r#"{"sandbox_runtime": "runc"}"#,
    )
    .expect("rewrite odek.json");
    let again = s.resolve().await.expect("resolve");
    let req2 = again.approval.clone().expect("asks again");
    assert_ne!(req2.key, req.key);
    assert!(!req2.trusted && req2.previously_trusted, "{req2:?}");
    let mut edited = plan.clone();
    edited.runtime = Some("runc".into());
    let e = s.launch(&edited).await.expect_err("edited plan");
    assert!(e.to_string().contains("approval request names"), "{e}");
}

#[tokio::test]
async fn a_project_cannot_override_the_operators_runtime() {
    // The operator's flag outranks the project's file (SPEC §3.2): nothing
    // of the project's applies, so nothing needs approval.
    let s = runtime_flag(Setup::new(), "runc").project_config(r#"{"sandbox_runtime": "runsc"}"#);
    with_runsc(&s);
    let plan = s.resolve().await.expect("resolve");
    assert_eq!(plan.runtime.as_deref(), Some("runc"));
    assert!(plan.approval.is_none(), "{:?}", plan.approval);
}

#[tokio::test]
async fn a_child_keeps_its_parents_runtime_and_pools_tell_runtimes_apart() {
    let s = runtime_flag(Setup::new(), "runsc");
    with_runsc(&s);
    let parent = s.resolve().await.expect("resolve");
    let child = narrow(
        &parent,
        &NarrowRequest {
            pids_limit: Some(100),
            ..NarrowRequest::default()
        },
    )
    .expect("narrow");
    assert_eq!(child.runtime.as_deref(), Some("runsc"));
    let same = narrow(
        &parent,
        &NarrowRequest {
            runtime: Some("runsc".into()),
            ..NarrowRequest::default()
        },
    )
    .expect("the same runtime");
    assert_eq!(same.runtime.as_deref(), Some("runsc"));
    let e = narrow(
        &parent,
        &NarrowRequest {
            runtime: Some("runc".into()),
            ..NarrowRequest::default()
        },
    )
    .expect_err("another runtime");
    assert!(e.to_string().contains("stays the parent's (runsc)"), "{e}");
    let _child = s.launch(&child).await.expect("child");
    assert_eq!(s.only_container().runtime, "runsc");

    // The warm pool's key covers the runtime: a plan on runc never claims
    // a sandbox made for runsc.
    let plain = Setup::new();
    with_runsc(&plain);
    let on_runc = plain.resolve().await.expect("resolve");
    let mut on_runsc = on_runc.clone();
    on_runsc.runtime = Some("runsc".into());
    assert_ne!(on_runc.pool_key(), on_runsc.pool_key());
}

/// An engine whose default runtime is gVisor, registered with a path to
/// `runsc` (what `GET /info` says: `Runtimes.runsc.path=/usr/bin/runsc`,
/// `DefaultRuntime=runsc`).
fn gvisor_default() -> EngineSecurity {
    EngineSecurity {
        runtimes: vec!["runc".into(), "runsc".into()],
        default_runtime: Some("runsc".into()),
        gvisor: vec!["runsc".into()],
        ..EngineSecurity::default()
    }
}

/// The operator names the sandbox's user and the project asks for nothing
/// that needs approval: resolve still asks `/info`, so the engine's gVisor
/// default is refused before create (it was not: found by a review).
#[tokio::test]
async fn gvisor_by_default_is_refused_when_the_operator_names_the_user() {
    // Control: with the user defaulted the default gVisor is refused.
    let s = Setup::new();
    s.fake.set_security(gvisor_default());
    let e = s.resolve().await.expect_err("control: refused");
    assert_eq!(e.class(), FailureClass::Config, "{e}");
    assert!(e.to_string().contains("the engine's DefaultRuntime"), "{e}");

    let s = Setup::new().env("ODEK_SANDBOX_USER", "1000:1000");
    s.fake.set_security(gvisor_default());
    match s.resolve().await {
        Err(e) => {
            assert_eq!(e.class(), FailureClass::Config, "{e}");
            assert!(e.to_string().contains("gVisor"), "{e}");
            assert!(s.fake.no_mutation(), "{:?}", s.mutations());
        }
        Ok(plan) => panic!(
            "resolved on an engine whose default is gVisor (engine_default_runtime {:?})",
            plan.engine_default_runtime
        ),
    }
}

/// A runtime the plan names that is gVisor at launch (registered again
/// with a path to runsc since resolve) is refused before create.
#[tokio::test]
async fn a_named_runtime_that_is_gvisor_at_launch_is_refused_before_create() {
    let s = runtime_flag(Setup::new(), "gv");
    s.fake.set_security(EngineSecurity {
        runtimes: vec!["gv".into(), "runc".into()],
        default_runtime: Some("runc".into()),
        ..EngineSecurity::default()
    });
    let plan = s.resolve().await.expect("resolve while gv is runc");
    s.fake.set_security(EngineSecurity {
        runtimes: vec!["gv".into(), "runc".into()],
        default_runtime: Some("runc".into()),
        gvisor: vec!["gv".into()],
        ..EngineSecurity::default()
    });
    let e = s.launch(&plan).await.expect_err("launched under gVisor");
    assert!(e.to_string().contains("is gVisor"), "{e}");
    assert!(
        s.fake
            .calls_of(odek_core::engine::Op::CreateContainer)
            .is_empty(),
        "create was asked"
    );
}
