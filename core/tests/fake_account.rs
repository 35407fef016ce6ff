//! The sandbox user and its account (SPEC §6.1 "user") against the fake
//! engine: whose uid:gid a sandbox runs as by default, on a local, rootless
//! or remote engine; the account's passwd/group files read once from the
//! image by a probe container (removed again), kept under `$ODEK_HOME` and
//! bind-mounted read-only; an image whose `/etc` is a symlink refused with
//! nothing left.

mod common;

use common::*;
use odek_core::account::{Account, UserChoice};
use odek_core::engine::{EngineSecurity, FakeImage, FakePath, Op};
use odek_core::FailureClass;

/// `--sandbox-user 1000:1000`: an operator's numeric non-root user, which
/// gets an account whatever uid the test runs as.
fn numeric_user(s: Setup) -> Setup {
    s.flag("sandbox_user", "--sandbox-user", |l| {
        l.sandbox_user = Some("1000:1000".into())
    })
}

#[tokio::test]
async fn the_default_user_is_the_operators_own_on_a_local_engine() {
    let s = Setup::new();
    let plan = s.resolve().await.expect("resolve");
    let (uid, gid) = (
        rustix::process::geteuid().as_raw(),
        rustix::process::getegid().as_raw(),
    );
    assert_eq!(plan.user, Some(format!("{uid}:{gid}")));
    assert_eq!(plan.user_choice, Some(UserChoice::OperatorIds));
    assert_eq!(plan.account, Account::for_ids(uid, gid));
    assert_eq!(s.fake.calls_of(Op::Info).len(), 1, "the engine was asked");
    let sb = s.launch(&plan).await.expect("launch");
    assert_eq!(s.only_container().user, format!("{uid}:{gid}"));
    assert!(sb.startup_line().contains(&format!(" user={uid}:{gid} ")));
}

#[tokio::test]
async fn a_rootless_engine_runs_the_sandbox_as_root_which_is_the_operator() {
    let s = Setup::new();
    s.fake.set_security(EngineSecurity {
        rootless: true,
        userns: false,
        ..EngineSecurity::default()
    });
    let plan = s.resolve().await.expect("resolve");
    assert_eq!(plan.user.as_deref(), Some("0:0"));
    assert_eq!(plan.user_choice, Some(UserChoice::RootlessRoot));
    assert_eq!(plan.account, None);
}

#[tokio::test]
async fn a_user_namespace_remapping_engine_is_warned_of() {
    let s = Setup::new();
    s.fake.set_security(EngineSecurity {
        rootless: false,
        userns: true,
        ..EngineSecurity::default()
    });
    let plan = s.resolve().await.expect("resolve");
    assert!(
        plan.warnings
            .iter()
            .any(|w| w.message.contains("userns-remap")),
        "{:?}",
        plan.warnings
    );
}

#[tokio::test]
async fn an_operator_user_is_not_second_guessed() {
    let s = numeric_user(Setup::new());
    let plan = s.resolve().await.expect("resolve");
    assert_eq!(plan.user.as_deref(), Some("1000:1000"));
    assert_eq!(plan.user_choice, Some(UserChoice::Operator));
    // `/info` is asked once, for the runtime (gVisor) and the engine's ID,
    // never for the user.
    assert_eq!(s.fake.calls_of(Op::Info).len(), 1);
    // Even a rootless engine does not change the operator's choice.
    s.fake.set_security(EngineSecurity {
        rootless: true,
        ..EngineSecurity::default()
    });
    let plan = s.resolve().await.expect("resolve");
    assert_eq!(plan.user.as_deref(), Some("1000:1000"));
    assert_eq!(plan.user_choice, Some(UserChoice::Operator));
}

#[tokio::test]
async fn the_account_is_read_once_from_a_probe_and_mounted_read_only() {
    let (s, spy) = spied();
    let s = numeric_user(s);
    let plan = s.resolve().await.expect("resolve");
    let a = plan.account.clone().expect("an account for 1000:1000");
    let sb = s.launch(&plan).await.expect("launch");
    // One probe: created, read, removed, never started.
    let probes = spy.probe_specs();
    assert_eq!(probes.len(), 1);
    assert!(probes[0].binds.is_empty() && probes[0].network_mode == "none");
    assert_eq!(
        s.fake.calls_of(Op::StartContainer).len(),
        1,
        "only the sandbox"
    );
    assert_eq!(s.fake.containers().len(), 1, "the probe is gone");
    // The sandbox: the files bind-mounted read-only, HOME a tmpfs, the env.
    let spec = &spy.specs()[0];
    for (target, must) in [
        (
            "/etc/passwd",
            "odek:x:1000:1000:odek sandbox user:/home/odek:/bin/sh\n",
        ),
        ("/etc/group", "odek:x:1000:\n"),
    ] {
        let b = spec
            .binds
            .iter()
            .find(|b| b.target == target)
            .unwrap_or_else(|| panic!("no bind at {target}: {:?}", spec.binds));
        assert!(b.read_only, "{target} is writable");
        assert!(b.source.starts_with(&s.odek_home.display().to_string()));
        let content = std::fs::read_to_string(&b.source).expect("the generated file");
        assert!(content.contains(must), "{target}: {content}");
        assert!(
            content.starts_with("root:"),
            "{target}: the image's own entries are kept: {content}"
        );
    }
    let home = spec
        .tmpfs
        .iter()
        .find(|t| t.target == a.home)
        .expect("HOME tmpfs");
    assert!(home.options.contains("nosuid") && home.options.contains("nodev"));
    for want in ["HOME=/home/odek", "USER=odek", "LOGNAME=odek"] {
        assert!(spec.env.iter().any(|e| e == want), "{want}: {:?}", spec.env);
    }
    let env = s.odek.describe(&sb).await.expect("describe");
    let block = odek_core::describe::render_prompt(&env);
    assert!(
        block.contains("Commands run as user `odek` (uid 1000, gid 1000)"),
        "{block}"
    );
    s.odek.destroy(&sb).await.expect("destroy");

    // The next launch of the same image reuses the files: no probe.
    let before = s.fake.probe_calls().len();
    assert!(before > 0);
    let sb = s.up().await.expect("second launch");
    assert_eq!(s.fake.probe_calls().len(), before, "probed again");
    s.odek.destroy(&sb).await.expect("destroy");
}

#[tokio::test]
async fn an_image_whose_etc_is_a_symlink_is_refused_and_the_probe_removed() {
    let fake = shop_fake();
    fake.add_image(
        FakeImage::new("odek-test/etc-link:1")
            .file("/etc", Some(FakePath::Symlink("/workspace".into())))
            .file("/etc/passwd", None)
            .file("/etc/group", None),
    );
    let s = numeric_user(Setup::with_fake(fake).image("odek-test/etc-link:1"));
    let err = s.up().await.expect_err("refused");
    assert_refused(&s, &err, FailureClass::DockerRejected, "is a symlink");
    assert!(err.to_string().contains("\"/workspace\""), "{err}");
    assert!(s.fake.calls_of(Op::StartContainer).is_empty());
    assert!(
        !s.odek_home.join("accounts").exists()
            || std::fs::read_dir(s.odek_home.join("accounts"))
                .expect("read")
                .next()
                .is_none(),
        "no account files were kept for a refused image"
    );
}

#[tokio::test]
async fn an_image_without_account_files_gets_only_the_accounts_lines() {
    let fake = shop_fake();
    fake.add_image(
        FakeImage::new("odek-test/bare:1")
            .file("/etc/passwd", None)
            .file("/etc/group", None),
    );
    let (s, spy) = {
        let spy = Spy::new(fake.clone());
        (
            Setup::over(fake, spy.clone()).image("odek-test/bare:1"),
            spy,
        )
    };
    let s = numeric_user(s);
    let sb = s.up().await.expect("launch");
    let spec = &spy.specs()[0];
    let src = |t: &str| {
        spec.binds
            .iter()
            .find(|b| b.target == t)
            .map(|b| std::fs::read_to_string(&b.source).expect("read"))
            .expect("bind")
    };
    assert_eq!(
        src("/etc/passwd"),
        "odek:x:1000:1000:odek sandbox user:/home/odek:/bin/sh\n"
    );
    assert_eq!(src("/etc/group"), "odek:x:1000:\n");
    s.odek.destroy(&sb).await.expect("destroy");
}

#[tokio::test]
async fn a_launch_cancelled_while_it_reads_the_image_leaves_no_probe() {
    let (s, spy) = spied();
    let s = numeric_user(s);
    s.fake.set_quirks(odek_core::engine::Quirks {
        read_delay: Some(std::time::Duration::from_secs(30)),
        ..Default::default()
    });
    let plan = s.resolve().await.expect("resolve");
    let token = odek_core::CancellationToken::new();
    // Cancelled right after the probe's create answered, while it is read.
    let t = token.clone();
    spy.after_probe_call(Op::CreateContainer, move |_| t.cancel());
    let err = s
        .odek
        .launch(
            &plan,
            &odek_core::LaunchOptions {
                cancel: Some(token.clone()),
                ..Default::default()
            },
            &s.reporter,
        )
        .await
        .expect_err("cancelled");
    assert!(matches!(err, odek_core::Error::Cancelled { .. }), "{err:?}");
    assert_eq!(spy.probe_specs().len(), 1, "the probe was created");
    let mut left = s.fake.containers();
    for _ in 0..100 {
        if left.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        left = s.fake.containers();
    }
    assert!(left.is_empty(), "the probe was left: {left:?}");
    assert!(s.fake.calls_of(Op::StartContainer).is_empty());
}

/// A launch cancelled while its image probe's create request is on its
/// way: the create's answer is not lost — the probe it made is removed by
/// its ID as soon as the answer comes — and the cancelled launch ends then,
/// not after the whole create settle time (10 s) spent looking by name for
/// a container the dropped request would never have made. (An MCP server
/// holds the launch's place under its cap until then.)
#[tokio::test]
async fn a_launch_cancelled_while_the_probe_is_created_removes_it_at_once() {
    let (s, spy) = spied();
    let s = numeric_user(s);
    let plan = s.resolve().await.expect("resolve");
    let token = odek_core::CancellationToken::new();
    let t = token.clone();
    spy.slow_probe_create(std::time::Duration::from_millis(300), move || t.cancel());
    let started = std::time::Instant::now();
    let err = s
        .odek
        .launch(
            &plan,
            &odek_core::LaunchOptions {
                cancel: Some(token.clone()),
                ..Default::default()
            },
            &s.reporter,
        )
        .await
        .expect_err("cancelled");
    let took = started.elapsed();
    assert!(matches!(err, odek_core::Error::Cancelled { .. }), "{err:?}");
    assert_eq!(spy.probe_specs().len(), 1, "the probe's create was sent");
    assert!(
        s.fake.containers().is_empty(),
        "the probe was left: {:?}",
        s.fake.containers()
    );
    assert!(
        s.fake
            .probe_calls()
            .iter()
            .filter(|c| c.op == Op::RemoveContainer)
            .count()
            == 1,
        "the probe was removed by its ID: {:?}",
        s.fake.probe_calls()
    );
    assert!(
        took < odek_core::inventory::CREATE_SETTLE / 2,
        "the cancelled launch took {took:?}: it waited for a container by name"
    );
    assert!(s.fake.calls_of(Op::StartContainer).is_empty());
}

/// A fake image `odek-test/trap:1` with `path` set to `what`.
fn trap(path: &str, what: Option<FakePath>) -> Setup {
    let fake = shop_fake();
    fake.add_image(FakeImage::new("odek-test/trap:1").file(path, what));
    Setup::with_fake(fake).image("odek-test/trap:1")
}

#[tokio::test]
async fn an_image_path_that_would_lead_a_mount_into_the_workspace_is_refused_before_create() {
    // The engine follows an image's symlinks while it mounts and creates a
    // missing target: a /tmp, /etc/passwd or /home leading into /workspace
    // would have it create root-owned files in the project (SPEC §6.1).
    for (path, what, account) in [
        ("/tmp", FakePath::Symlink("/workspace/tt".into()), false),
        ("/workspace", FakePath::Symlink("/etc".into()), false),
        (
            "/etc/passwd",
            FakePath::Symlink("/workspace/a/b".into()),
            true,
        ),
        ("/etc/group", FakePath::Symlink("/workspace/x".into()), true),
        ("/home", FakePath::Symlink("/workspace".into()), true),
        ("/etc/passwd", FakePath::Dir, true),
        ("/tmp", FakePath::File(b"x".to_vec()), false),
    ] {
        let s = trap(path, Some(what.clone()));
        let s = if account { numeric_user(s) } else { s };
        let err = s
            .up()
            .await
            .map(|_| format!("{path} {what:?} launched"))
            .expect_err("refused");
        let msg = err.to_string();
        assert_eq!(err.class(), FailureClass::DockerRejected, "{path}: {msg}");
        assert!(msg.contains(path), "{path}: {msg}");
        assert!(
            s.fake.calls_of(Op::CreateContainer).is_empty(),
            "{path}: a sandbox was created"
        );
        assert!(s.fake.containers().is_empty(), "{path}: the probe was left");
        assert!(
            s.fake
                .probe_calls()
                .iter()
                .any(|c| c.op == Op::RemoveContainer),
            "{path}: no probe removal"
        );
    }
    // Control: a regular /etc/passwd and real directories launch.
    let s = numeric_user(trap("/home", Some(FakePath::Dir)));
    let sb = s.up().await.expect("launch");
    s.odek.destroy(&sb).await.expect("destroy");
}

#[tokio::test]
async fn an_image_volume_below_the_workspace_is_refused_before_anything_is_created() {
    let fake = shop_fake();
    fake.add_image(FakeImage::new("odek-test/vol:1").volume("/workspace/vol"));
    let s = Setup::with_fake(fake).image("odek-test/vol:1");
    let err = s.up().await.expect_err("refused");
    assert_refused(
        &s,
        &err,
        FailureClass::DockerRejected,
        "VOLUME \"/workspace/vol\"",
    );
    assert!(s.fake.probe_calls().is_empty() && s.fake.no_mutation());
}

#[tokio::test]
async fn the_probe_is_created_from_the_image_id_never_the_tag() {
    // A tag another process moves between the image check and the probe
    // must not let the probe read another image for this one's ID.
    let (s, spy) = spied();
    let s = numeric_user(s);
    let sb = s.up().await.expect("launch");
    let id = sb.applied.as_ref().expect("applied").image_id.clone();
    let probes = spy.probe_specs();
    assert_eq!(probes.len(), 1);
    assert_eq!(probes[0].image, id);
    s.odek.destroy(&sb).await.expect("destroy");
}

#[tokio::test]
async fn a_plan_that_claims_a_host_run_its_settings_forbid_is_refused() {
    // A plan handed back through the C ABI (or read from a label) that says
    // "fallback" or "off" while its mode, networks or project sources
    // require a sandbox runs nothing on the host (SPEC §6.3).
    let s = Setup::new().project_config(r#"{"sandbox_pids_limit": 100}"#);
    let plan = s.resolve().await.expect("resolve");
    let mut fallback = plan.clone();
    fallback.isolation = odek_core::Isolation::Fallback(odek_core::plan::Fallback {
        class: FailureClass::ImageUnavailable,
        reason: "forged".into(),
    });
    let mut off = plan.clone();
    off.isolation = odek_core::Isolation::Off;
    for forged in [fallback, off] {
        let err = s.launch(&forged).await.expect_err("refused");
        assert!(
            err.to_string().contains("its settings require a sandbox"),
            "{err}"
        );
        assert!(s.fake.no_mutation());
    }
    // Control: a real implicit-mode fallback plan runs on the host.
    let s = Setup::without_image();
    let sb = s.up().await.expect("fallback");
    assert!(matches!(sb.isolation, odek_core::Isolation::Fallback(_)));
}

#[tokio::test]
async fn a_plan_whose_volume_covers_the_supervisor_or_the_init_is_refused_before_create() {
    // The config refuses such a volume; a plan handed back through the C
    // ABI is checked again at launch, before anything is created (and the
    // verify after start would refuse the mount too): the repository's
    // file would run as the sandbox's process.
    let s = Setup::new();
    let plan = s.resolve().await.expect("resolve");
    std::fs::write(s.root().join("fake"), "#!/bin/sh\n").expect("write");
    for target in ["/.odek/odek-supervisor", "/usr/sbin/docker-init", "/.odek"] {
        let mut forged = plan.clone();
        forged.volumes.push(odek_core::config::VolumeMount {
            spec: format!("./fake:{target}:ro"),
            host: s.root().join("fake"),
            container: target.into(),
            read_only: true,
        });
        let err = s.launch(&forged).await.expect_err("refused");
        assert!(
            err.to_string().contains("is not allowed"),
            "{target}: {err}"
        );
        assert!(s.fake.no_mutation(), "{target}: {:?}", s.mutations());
    }
    // Control: the same plan without it launches.
    let sb = s.launch(&plan).await.expect("launch");
    assert!(sb.container_id.is_some());
}

#[tokio::test]
async fn an_engine_that_will_not_say_whether_it_is_rootless_runs_the_operators_uid_with_a_warning()
{
    let s = Setup::new();
    s.fake.fail(odek_core::engine::Fault::new(
        Op::Info,
        1,
        odek_core::engine::EngineErrorKind::Rejected,
    ));
    let plan = s.resolve().await.expect("resolve");
    assert_eq!(plan.user_choice, Some(UserChoice::OperatorIds));
    assert!(
        plan.warnings.iter().any(
            |w| w.message.contains("did not say whether it runs rootless")
                && w.message.contains("did not answer /info")
        ),
        "{:?}",
        plan.warnings
    );
    // Unreachable is not that: the run is refused as daemon-unreachable.
    let s = Setup::new().explicit();
    s.fake.fail(odek_core::engine::Fault::new(
        Op::Info,
        1,
        odek_core::engine::EngineErrorKind::Unreachable,
    ));
    let err = s.resolve().await.expect_err("unreachable");
    assert_eq!(err.class(), FailureClass::DaemonUnreachable);
}

#[tokio::test]
async fn an_image_volume_is_cleaned_and_its_path_probed_like_a_mount_target() {
    // `VOLUME ["//workspace/x"]` is /workspace/x to the engine; `VOLUME
    // /x/y/z` through an image symlink /x -> /workspace lands in the project
    // too (a review left root-owned directories there both ways).
    let fake = shop_fake();
    fake.add_image(FakeImage::new("odek-test/v1:1").volume("//workspace/PWN"));
    fake.add_image(
        FakeImage::new("odek-test/v2:1")
            .volume("/x/PWN/z")
            .file("/x", Some(FakePath::Symlink("/workspace".into()))),
    );
    for (image, needle) in [
        ("odek-test/v1:1", "VOLUME \"/workspace/PWN\""),
        ("odek-test/v2:1", "\"/x\" is a symlink"),
    ] {
        let s = Setup::with_fake(fake.clone()).image(image);
        let err = s.up().await.expect_err("refused");
        assert_eq!(err.class(), FailureClass::DockerRejected, "{image}: {err}");
        assert!(err.to_string().contains(needle), "{image}: {err}");
        assert!(s.fake.calls_of(Op::CreateContainer).is_empty(), "{image}");
        assert!(s.fake.containers().is_empty(), "{image}");
    }
    // Control: a VOLUME outside /workspace on a real path launches.
    let fake = shop_fake();
    fake.add_image(FakeImage::new("odek-test/v3:1").volume("/data"));
    let s = Setup::with_fake(fake).image("odek-test/v3:1");
    let sb = s.up().await.expect("launch");
    s.odek.destroy(&sb).await.expect("destroy");
}

#[tokio::test]
async fn launches_of_one_image_at_once_probe_it_once() {
    let (s, spy) = spied();
    let s = numeric_user(s);
    // Reads that take a while, so the launches overlap.
    s.fake.set_quirks(odek_core::engine::Quirks {
        read_delay: Some(std::time::Duration::from_millis(300)),
        ..Default::default()
    });
    let plan = s.resolve().await.expect("resolve");
    let opts = odek_core::LaunchOptions::default();
    let launches = (0..8).map(|_| s.odek.launch(&plan, &opts, &s.reporter));
    let sandboxes = futures_util::future::join_all(launches).await;
    assert_eq!(spy.probe_specs().len(), 1, "one probe for eight launches");
    assert_eq!(s.fake.calls_of(Op::StartContainer).len(), 8);
    for sb in sandboxes {
        let sb = sb.expect("launch");
        let spec = spy
            .specs()
            .into_iter()
            .find(|c| c.name == sb.name)
            .expect("the sandbox's spec");
        assert!(
            spec.binds.iter().any(|b| b.target == "/etc/passwd"),
            "{:?}",
            spec.binds
        );
        s.odek.destroy(&sb).await.expect("destroy");
    }
}
