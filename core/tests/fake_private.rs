//! Who may have written `$ODEK_HOME`, the approval store, its sidecar and
//! the user config (SPEC §7.3): the current user or root, and neither group
//! nor others may write them. A trust or setting in a file another user owns
//! is refused before any Docker call, and a plan resolved while trusted does
//! not launch once the store is given away. The Docker socket follows the
//! same rule (SPEC §6.2): one the operator names is used, with a warning
//! naming its owner when it is another user's.
//!
//! Giving a file to another uid needs root (as the test suites run); as
//! another user the ownership cases return early and only the mode cases run.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use common::*;
use odek_core::approval::{Decision, Store};
use odek_core::config::ConfigError;
use odek_core::{Error, FailureClass};

const NOBODY: u32 = 65534;

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

fn give_away(p: &Path) {
    rustix::fs::chown(p, Some(rustix::fs::Uid::from_raw(NOBODY)), None)
        .unwrap_or_else(|e| panic!("chown {}: {e}", p.display()));
}

fn chmod(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

fn project_compose() -> Setup {
    Setup::new().project_config(r#"{"sandbox_compose_project": "shop"}"#)
}

#[track_caller]
fn assert_not_private(s: &Setup, err: &Error, needle: &str) {
    assert_refused_before_create(s, err, FailureClass::Config, needle);
}

#[tokio::test]
async fn a_user_config_another_user_owns_is_refused() {
    if !is_root() {
        return;
    }
    let s = Setup::new().user_config(r#"{"sandbox_pids_limit": 77}"#);
    let plan = s.resolve().await.expect("control: own config is read");
    assert_eq!(plan.pids_limit, 77);
    let cfg = s.odek_home.join("config.json");
    give_away(&cfg);
    let err = s.resolve().await.expect_err("another user's config");
    assert!(
        matches!(&err, Error::Config(ConfigError::NotPrivate { what, .. }) if what == "user config"),
        "{err:?}"
    );
    assert_not_private(&s, &err, &format!("user config {}", cfg.display()));
    assert!(err.to_string().contains("belongs to uid 65534"), "{err}");
}

#[tokio::test]
async fn a_group_writable_user_config_or_home_is_refused() {
    let s = Setup::new().user_config(r#"{"sandbox_pids_limit": 77}"#);
    let cfg = s.odek_home.join("config.json");
    chmod(&cfg, 0o664);
    let err = s.resolve().await.expect_err("group-writable config");
    assert_not_private(&s, &err, "has mode 0664");
    chmod(&cfg, 0o644);
    s.resolve()
        .await
        .expect("0644 is readable, not writable by others");
    chmod(&s.odek_home, 0o775);
    let err = s.resolve().await.expect_err("group-writable home");
    assert_not_private(&s, &err, &format!("$ODEK_HOME {}", s.odek_home.display()));
    assert!(err.to_string().contains("has mode 0775"), "{err}");
}

#[tokio::test]
async fn a_trust_in_a_home_and_store_another_user_owns_is_not_honoured() {
    if !is_root() {
        return;
    }
    let s = project_compose();
    let plan = s.resolve().await.expect("resolve");
    s.odek.approve(&plan, Decision::Trust).expect("trust");
    let trusted = s.resolve().await.expect("control: the trust is honoured");
    assert!(trusted.approval.as_ref().expect("request").trusted);

    // The store alone given away (0644, as the defect was found).
    let store = Store::new(&s.odek_home);
    chmod(&store.path(), 0o644);
    give_away(&store.path());
    let err = s.resolve().await.expect_err("store of uid 65534");
    assert_not_private(&s, &err, "belongs to uid 65534");
    assert!(
        err.to_string()
            .contains(&store.path().display().to_string()),
        "{err}"
    );
    // The plan made while it was trusted does not launch on it either.
    let err = s
        .launch(&trusted)
        .await
        .expect_err("launch on a forged trust");
    assert_not_private(&s, &err, "belongs to uid 65534");

    // Home and store both another user's (0755 / 0644).
    chmod(&s.odek_home, 0o755);
    give_away(&s.odek_home);
    let err = s.resolve().await.expect_err("home of uid 65534");
    assert_not_private(&s, &err, &format!("$ODEK_HOME {}", s.odek_home.display()));
}

#[tokio::test]
async fn a_sidecar_another_user_owns_is_refused_and_never_written_through() {
    if !is_root() {
        return;
    }
    let s = project_compose();
    let plan = s.resolve().await.expect("resolve");
    s.odek.approve(&plan, Decision::Trust).expect("trust");
    let store = Store::new(&s.odek_home);
    let meta = s.odek_home.join(odek_core::approval::META_FILE);
    assert!(!store.checked_meta().expect("own sidecar").is_empty());
    give_away(&meta);
    let e = store.checked_meta().expect_err("sidecar of uid 65534");
    assert!(e.to_string().contains("belongs to uid 65534"), "{e}");
    assert!(store.meta().is_empty(), "best effort reads it as empty");
    let before = std::fs::read(store.path()).expect("read store");
    assert!(store.revoke(&["k".into()]).is_err(), "a write went through");
    assert_eq!(std::fs::read(store.path()).expect("read store"), before);

    // A home of another user is never written into.
    let other = tempfile::tempdir().expect("tempdir");
    chmod(other.path(), 0o755);
    give_away(other.path());
    let e = Store::new(other.path())
        .revoke(&["k".into()])
        .expect_err("home of uid 65534");
    assert!(e.to_string().contains("belongs to uid 65534"), "{e}");
    assert_eq!(
        std::fs::metadata(other.path())
            .expect("stat")
            .permissions()
            .mode()
            & 0o777,
        0o755,
        "another user's directory was changed"
    );
    assert!(std::fs::read_dir(other.path())
        .expect("ls")
        .next()
        .is_none());
}

// ---------------------------------------------------------------------------
// Whose Docker socket (SPEC §6.2): one the operator names is used, and the
// plan, the config view and the startup line say whose it is.

#[tokio::test]
async fn a_named_docker_socket_another_user_owns_is_warned_of_in_the_plan_and_the_view() {
    if !is_root() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let sock = dir.path().join("docker.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&sock).expect("bind");
    give_away(&sock);
    let uri = format!("unix://{}", sock.display());
    let endpoint = odek_core::engine::Endpoint::named(&uri, "docker_host").expect("valid");
    let s = Setup::with_fake(shop_fake().with_endpoint(endpoint)).image(IMAGE);
    let plan = s.resolve().await.expect("resolve: a named socket is used");
    let warned = s.reporter.of(odek_core::WarningKind::DockerSocketNotYours);
    assert_eq!(warned.len(), 1, "{:?}", s.reporter.warnings());
    assert!(
        warned[0]
            .message
            .starts_with(&format!("the Docker socket {uri} belongs to uid {NOBODY}"))
            && warned[0]
                .message
                .ends_with("not you: that user's daemon receives this sandbox and its environment"),
        "{}",
        warned[0].message
    );
    assert_eq!(plan.warnings.iter().filter(|w| **w == warned[0]).count(), 1);
    assert_eq!(plan.endpoint_owner.as_ref().map(|o| o.uid), Some(NOBODY));
    let view = s.odek.config_view(&plan).await;
    let owner = view
        .endpoint_owner
        .clone()
        .expect("the view names the owner");
    assert!(owner.starts_with(&format!("uid {NOBODY}")), "{owner}");
    assert!(
        view.render_text()
            .lines()
            .any(|l| l.starts_with("  owner") && l.contains(&owner)),
        "{}",
        view.render_text()
    );
    let sb = s.launch(&plan).await.expect("launch");
    assert!(
        sb.startup_line()
            .contains(&format!(" endpoint={uri} runtime=runc supervisor=")),
        "{}",
        sb.startup_line()
    );
    // Control: the same socket given back to root is not warned of.
    rustix::fs::chown(&sock, Some(rustix::fs::Uid::ROOT), None).expect("chown");
    let again = Setup::with_fake(
        shop_fake()
            .with_endpoint(odek_core::engine::Endpoint::named(&uri, "docker_host").expect("valid")),
    )
    .image(IMAGE);
    let plan = again.resolve().await.expect("resolve");
    assert!(
        again
            .reporter
            .of(odek_core::WarningKind::DockerSocketNotYours)
            .is_empty(),
        "{:?}",
        again.reporter.warnings()
    );
    assert_eq!(
        plan.endpoint_owner.map(|o| o.to_string()).as_deref(),
        Some("uid 0 (root)")
    );
}

// ---------------------------------------------------------------------------
// Plain TCP to a remote engine (SPEC §6.2.1): used, with a loud warning in
// the plan and on the reporter, and the startup line and the view say how
// the endpoint is secured. The engine is the fake: nothing connects.

#[tokio::test]
async fn plain_tcp_to_a_remote_engine_is_warned_of_and_shown_as_plain() {
    let endpoint =
        odek_core::engine::Endpoint::named("tcp://10.0.0.5:2375", "docker_host").expect("valid");
    // Remote: the workspace is copied (a bind mount is refused, SPEC §6.1
    // "workspace").
    let s = Setup::with_fake(shop_fake().with_endpoint(endpoint))
        .image(IMAGE)
        .flag("sandbox_workspace", "--sandbox-workspace", |l| {
            l.sandbox_workspace = Some("copy".into())
        });
    let plan = s.resolve().await.expect("resolve: plain TCP is used");
    let warned = s.reporter.of(odek_core::WarningKind::PlainTcp);
    assert_eq!(warned.len(), 1, "{:?}", s.reporter.warnings());
    assert!(
        warned[0].message.starts_with(
            "PLAIN TCP to a remote Docker daemon: tcp://10.0.0.5:2375 (plain TCP, not encrypted) is neither TLS nor loopback"
        ),
        "{}",
        warned[0].message
    );
    assert_eq!(plan.warnings.iter().filter(|w| **w == warned[0]).count(), 1);
    let view = s.odek.config_view(&plan).await;
    assert!(
        view.render_text().lines().any(|l| l.starts_with("endpoint")
            && l.contains("tcp://10.0.0.5:2375 (plain TCP, not encrypted)")),
        "{}",
        view.render_text()
    );
    let sb = s.launch(&plan).await.expect("launch");
    assert!(
        sb.startup_line()
            .contains(" endpoint=tcp://10.0.0.5:2375 (plain TCP, not encrypted) runtime="),
        "{}",
        sb.startup_line()
    );
    // Control: plain TCP on loopback is not warned of.
    let local = Setup::with_fake(shop_fake().with_endpoint(
        odek_core::engine::Endpoint::named("tcp://127.0.0.1:2375", "docker_host").expect("valid"),
    ))
    .image(IMAGE);
    local.resolve().await.expect("resolve");
    assert!(
        local
            .reporter
            .of(odek_core::WarningKind::PlainTcp)
            .is_empty(),
        "{:?}",
        local.reporter.warnings()
    );
}
