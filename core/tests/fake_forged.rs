//! Forged and loosened sandboxes against the fake engine (SPEC §6.1 labels
//! and hardening; docs/SECURITY.md "Forged labels"): labels are data anyone
//! can write, so gc never removes, and attach (exec, describe, down,
//! `--parent`) never trusts, a container whose labels carry no valid MAC
//! under this user's launch key; and a sandbox of this user's whose live
//! settings no longer match SPEC §6.1 and its plan is refused by name.

mod common;

use std::collections::BTreeMap;

use common::*;
use odek_core::engine::{ContainerInfo, ContainerSpec, DockerApi, MountInfo, Op};
use odek_core::inventory::GcOptions;
use odek_core::labels::{self, Owner};
use odek_core::secret::Secret;
use odek_core::{Command, ExecOptions, ExecRequest, FailureClass};

/// Launches a sandbox through a spy and returns it with the create request
/// odek sent (a template for containers made behind odek's back).
async fn launched() -> (
    Setup,
    std::sync::Arc<Spy>,
    odek_core::Sandbox,
    ContainerSpec,
) {
    let (s, spy) = spied();
    let sb = s.up().await.expect("launch");
    let spec = spy.specs().pop().expect("create request");
    (s, spy, sb, spec)
}

/// Creates and starts a container from `spec` renamed `name` with
/// `labels`, behind odek's back. Returns its ID.
async fn forge(
    s: &Setup,
    spec: &ContainerSpec,
    name: &str,
    labels: BTreeMap<String, String>,
) -> String {
    let mut spec = spec.clone();
    spec.name = name.into();
    spec.labels = labels;
    let id = s.fake.create_container(&spec).await.expect("create").id;
    s.fake.start_container(&id).await.expect("start");
    id
}

/// The labels of a sandbox whose owner process does not exist, with
/// `dev.odek.*` claims only (no MAC).
fn dead_claims(spec: &ContainerSpec) -> BTreeMap<String, String> {
    let mut l: BTreeMap<String, String> = spec
        .labels
        .iter()
        .filter(|(k, _)| *k != labels::MAC && *k != labels::SIGNED)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    l.extend(Owner::current().labels());
    // Above any default pid_max: no such process.
    l.insert(labels::OWNER_PID.into(), "4194303".into());
    l
}

fn gc_opts(s: &Setup) -> GcOptions {
    GcOptions::new(&s.odek_home)
}

#[tokio::test]
async fn odek_marks_its_sandboxes_with_a_mac_under_the_users_key() {
    let (s, _spy, sb, spec) = launched().await;
    let key = Secret::load(&s.odek_home)
        .expect("usable key")
        .expect("created at launch");
    let trusted = labels::verified(Some(&key), &sb.name, None, &spec.labels).expect("verifies");
    for k in [
        labels::SANDBOX,
        labels::PLAN,
        labels::WORKDIR,
        labels::OWNER_PID,
        labels::OWNER_PIDNS,
        labels::LAUNCH,
    ] {
        assert!(trusted.contains_key(k), "{k} is not covered by the MAC");
    }
    let listed = s.odek.list(&s.odek_home).await.expect("list");
    assert_eq!(listed.len(), 1);
    assert!(listed[0].verified);
    assert_eq!(listed[0].owner_gone, Some(false), "this process owns it");
    assert!(!listed[0].gc_able(true));
}

#[tokio::test]
async fn gc_never_removes_forged_sandboxes_whose_owner_looks_dead() {
    let (s, _spy, sb, spec) = launched().await;
    let claims = dead_claims(&spec);

    // No MAC at all.
    let no_mac = forge(&s, &spec, "odek-forged-nomac", claims.clone()).await;
    // A MAC that is not one.
    let mut bad = claims.clone();
    bad.insert(labels::SIGNED.into(), labels::OWNER_PID.into());
    bad.insert(labels::MAC.into(), "ab".repeat(32));
    let bad_mac = forge(&s, &spec, "odek-forged-badmac", bad).await;
    // A real MAC, made with another $ODEK_HOME's key.
    let other_home = tempfile::tempdir().expect("tempdir");
    let other = Secret::load_or_create(other_home.path()).expect("key");
    let mut theirs = claims.clone();
    labels::sign(&other, "odek-forged-other", None, &mut theirs);
    let other_mac = forge(&s, &spec, "odek-forged-other", theirs).await;
    // A copy of this user's own MAC onto another container name.
    let copied = forge(&s, &spec, "odek-forged-copy", spec.labels.clone()).await;
    // Control: the same dead owner under this user's key is an orphan.
    let mut ours = claims.clone();
    labels::sign(
        &Secret::load(&s.odek_home).expect("key").expect("key"),
        "odek-orphan",
        None,
        &mut ours,
    );
    let orphan = forge(&s, &spec, "odek-orphan", ours).await;

    let listed = s.odek.list(&s.odek_home).await.expect("list");
    for id in [&no_mac, &bad_mac, &other_mac, &copied] {
        let l = listed.iter().find(|l| &l.id == id).expect("listed");
        assert!(!l.verified, "{} verified", l.name);
        assert_eq!(l.owner_gone, None, "{}", l.name);
        assert!(!l.gc_able(true), "{} called gc-able", l.name);
    }
    let o = listed.iter().find(|l| l.id == orphan).expect("listed");
    assert!(o.verified && o.owner_gone == Some(true));

    // Scoped to the workdir the forged labels claim too, and as a dry run:
    // only the orphan is named, nothing is removed.
    let scoped = GcOptions {
        detached: true,
        dry_run: true,
        workdir: Some(s.workdir.clone()),
        ..gc_opts(&s)
    };
    assert_eq!(
        s.odek.gc(&scoped).await.expect("gc --dry-run"),
        ["odek-orphan"]
    );
    assert_eq!(s.fake.containers().len(), 6, "a dry run removed something");

    let removed = s.odek.gc(&gc_opts(&s)).await.expect("gc");
    assert_eq!(removed, vec!["odek-orphan".to_string()]);
    let detached = GcOptions {
        detached: true,
        ..gc_opts(&s)
    };
    assert!(s.odek.gc(&detached).await.expect("gc").is_empty());
    let left = s.fake.containers();
    for id in [&no_mac, &bad_mac, &other_mac, &copied] {
        assert!(left.contains(id), "a forged container was removed");
    }
    assert!(left.contains(sb.container_id.as_ref().expect("id")));
    assert!(!left.contains(&orphan));
}

#[tokio::test]
async fn gc_with_another_users_home_leaves_this_users_orphans() {
    let (s, _spy, _sb, spec) = launched().await;
    let mut ours = dead_claims(&spec);
    labels::sign(
        &Secret::load(&s.odek_home).expect("key").expect("key"),
        "odek-orphan",
        None,
        &mut ours,
    );
    forge(&s, &spec, "odek-orphan", ours).await;
    let elsewhere = tempfile::tempdir().expect("tempdir");
    let opts = GcOptions {
        detached: true,
        ..GcOptions::new(elsewhere.path())
    };
    assert!(s.odek.gc(&opts).await.expect("gc").is_empty());
    assert_eq!(s.fake.containers().len(), 2);
}

#[tokio::test]
async fn a_forged_sandbox_with_a_copied_plan_is_refused_and_nothing_runs() {
    let (s, spy, _sb, spec) = launched().await;
    // The launch removed its image probe; nothing is removed from here on.
    let removes = s.fake.calls_of(Op::RemoveContainer).len();
    // The plan label of a real sandbox, full capabilities, no MAC.
    let mut loose = spec.clone();
    loose.cap_drop.clear();
    loose.security_opt.clear();
    let forged = forge(&s, &loose, "odek-forged", dead_claims(&spec)).await;
    for name in ["odek-forged", forged.as_str()] {
        let err = s.odek.attach(name, &s.odek_home).await.expect_err("forged");
        assert_eq!(err.class(), FailureClass::Config, "{err}");
        let msg = err.to_string();
        assert!(
            msg.contains("was not created by this user's odek")
                && msg.contains("launch.key")
                && msg.contains("docker rm -f odek-forged"),
            "{msg}"
        );
        let err = s.odek.owned(name, &s.odek_home).await.expect_err("forged");
        assert!(err.to_string().contains("not created by this user's odek"));
    }
    assert!(spy.execs().is_empty());
    assert!(s.fake.calls_of(Op::Exec).is_empty(), "something ran");
    assert_eq!(s.fake.calls_of(Op::RemoveContainer).len(), removes);
}

/// A change made to a container's inspect data.
type Loosen = Box<dyn Fn(&mut ContainerInfo)>;

/// Each loosening of a running sandbox of this user's, and a phrase the
/// refusal must contain.
fn loosenings() -> Vec<(&'static str, Loosen)> {
    vec![
        (
            "PidsLimit is 99999, requested 4096",
            Box::new(|c| c.pids_limit = Some(99999)),
        ),
        (
            "capabilities were not all dropped",
            Box::new(|c| c.cap_drop.clear()),
        ),
        (
            "no-new-privileges is not set",
            Box::new(|c| c.security_opt.clear()),
        ),
        (
            "without odek's seccomp profile",
            Box::new(|c| c.security_opt.retain(|o| !o.starts_with("seccomp="))),
        ),
        (
            "is not odek's",
            Box::new(|c| {
                for o in &mut c.security_opt {
                    if o.starts_with("seccomp=") {
                        *o = o.replace("SCMP_ACT_ERRNO", "SCMP_ACT_ALLOW");
                    }
                }
            }),
        ),
        ("privileged", Box::new(|c| c.hardening.privileged = true)),
        (
            "capabilities were added",
            Box::new(|c| c.hardening.cap_add = vec!["SYS_ADMIN".into()]),
        ),
        (
            "host devices",
            Box::new(|c| c.hardening.devices = vec!["/dev/sda".into()]),
        ),
        (
            "PID namespace mode",
            Box::new(|c| c.hardening.pid_mode = "host".into()),
        ),
        (
            "IPC namespace mode",
            Box::new(|c| c.hardening.ipc_mode = "host".into()),
        ),
        (
            "confinement is switched off",
            Box::new(|c| c.security_opt.push("seccomp=unconfined".into())),
        ),
        ("Init is not on", Box::new(|c| c.init = Some(false))),
        (
            "/tmp options",
            Box::new(|c| {
                c.tmpfs.insert("/tmp".into(), "rw".into());
            }),
        ),
        (
            "Memory is 1073741824 bytes",
            Box::new(|c| c.memory_bytes = 1 << 30),
        ),
        (
            "NanoCpus is 4000000000",
            Box::new(|c| c.nano_cpus = 4_000_000_000),
        ),
        (
            "unplanned \"bind\" mount \"/\"",
            Box::new(|c| {
                c.hardening.mounts.push(MountInfo {
                    kind: "bind".into(),
                    name: String::new(),
                    source: "/".into(),
                    destination: "/host".into(),
                    rw: true,
                })
            }),
        ),
        (
            "the planned mount",
            Box::new(|c| c.hardening.mounts.clear()),
        ),
        (
            // Shaped as a supervised sandbox, its binary from elsewhere.
            "not odek's copy under $ODEK_HOME/supervisor",
            Box::new(|c| {
                c.entrypoint = vec!["/.odek/odek-supervisor".into()];
                c.healthcheck_disabled = true;
                c.user = "0:0".into();
                c.hardening.cap_add = ["SETUID", "SETGID", "KILL", "SETPCAP"]
                    .map(String::from)
                    .to_vec();
                c.hardening.mounts.push(MountInfo {
                    kind: "bind".into(),
                    name: String::new(),
                    source: "/tmp/odek/supervisor/0123".into(),
                    destination: "/.odek".into(),
                    rw: false,
                })
            }),
        ),
        (
            // A bind over the supervisor's binary (or the engine's init),
            // whatever else the container looks like.
            "covers \"/.odek/odek-supervisor\"",
            Box::new(|c| {
                c.hardening.mounts.push(MountInfo {
                    kind: "bind".into(),
                    name: String::new(),
                    source: "/home/dev/app/fake".into(),
                    destination: "/.odek/odek-supervisor".into(),
                    rw: false,
                })
            }),
        ),
        (
            "covers \"/usr/sbin/docker-init\"",
            Box::new(|c| {
                c.hardening.mounts.push(MountInfo {
                    kind: "bind".into(),
                    name: String::new(),
                    source: "/home/dev/app/fake".into(),
                    destination: "/usr/sbin/docker-init".into(),
                    rw: false,
                })
            }),
        ),
        (
            "unplanned \"volume\" mount",
            Box::new(|c| {
                c.hardening.mounts.push(MountInfo {
                    kind: "volume".into(),
                    name: "rootfs".into(),
                    source: "/var/lib/docker/volumes/rootfs/_data".into(),
                    destination: "/data".into(),
                    rw: true,
                })
            }),
        ),
    ]
}

#[tokio::test]
async fn a_sandbox_whose_live_settings_were_loosened_is_refused_naming_the_difference() {
    let (s, spy, sb, _spec) = launched().await;
    // The launch removed its image probe; nothing is removed from here on.
    let removes = s.fake.calls_of(Op::RemoveContainer).len();
    let id = sb.container_id.clone().expect("id");
    let pristine = s.fake.container(&id).expect("exists");
    // Control: as launched, attach accepts it and a command runs.
    let found = s.odek.attach(&sb.name, &s.odek_home).await.expect("attach");
    let req = ExecRequest {
        command: Command::Argv(vec!["true".into()]),
        env: Vec::new(),
        timeout: None,
        workdir: None,
    };
    s.odek
        .exec(&found, &req, &ExecOptions::default(), &|_, _| {})
        .await
        .expect("control exec");
    let execs = spy.execs().len();
    // The image's anonymous volumes (VOLUME lines) are fine.
    s.fake.update_container(&id, |c| {
        c.hardening.mounts.push(MountInfo {
            kind: "volume".into(),
            name: "f".repeat(64),
            source: "/var/lib/docker/volumes/x/_data".into(),
            destination: "/var/cache".into(),
            rw: true,
        })
    });
    s.odek
        .attach(&sb.name, &s.odek_home)
        .await
        .expect("anonymous volume");

    for (needle, loosen) in loosenings() {
        s.fake.update_container(&id, |c| *c = pristine.clone());
        s.fake.update_container(&id, |c| loosen(c));
        let err = s
            .odek
            .attach(&sb.name, &s.odek_home)
            .await
            .expect_err(needle);
        assert_eq!(err.class(), FailureClass::DockerRejected, "{err}");
        let msg = err.to_string();
        assert!(msg.contains(needle), "{needle:?} not in: {msg}");
        assert!(
            msg.contains(&format!("odek sandbox down {}", sb.name)),
            "{msg}"
        );
        assert!(!msg.contains('\u{1b}'));
        // Down still removes it (the MAC says it is this user's).
        s.odek.owned(&sb.name, &s.odek_home).await.expect("owned");
    }
    assert_eq!(
        spy.execs().len(),
        execs,
        "a command ran in a loosened sandbox"
    );
    assert_eq!(s.fake.calls_of(Op::RemoveContainer).len(), removes);
}

#[tokio::test]
async fn a_sandbox_made_without_odeks_seccomp_profile_is_refused_saying_to_recreate_it() {
    // A detached sandbox from a release before the profile (SPEC §6.1): its
    // labels are this user's, its SecurityOpt has no seccomp entry.
    let (s, spy, sb, _spec) = launched().await;
    let id = sb.container_id.clone().expect("id");
    s.fake.update_container(&id, |c| {
        c.security_opt = vec!["no-new-privileges".into()];
    });
    let err = s
        .odek
        .attach(&sb.name, &s.odek_home)
        .await
        .expect_err("refused");
    assert_eq!(err.class(), FailureClass::DockerRejected, "{err}");
    let msg = err.to_string();
    for needle in [
        "without odek's seccomp profile",
        "setuid",
        "made by an earlier odek release",
        &format!(
            "remove it with `odek sandbox down {}` and launch a new one",
            sb.name
        ),
    ] {
        assert!(msg.contains(needle), "{needle:?} not in: {msg}");
    }
    assert!(spy.execs().is_empty(), "a command ran");
    // `odek sandbox down` still removes it.
    let owned = s.odek.owned(&sb.name, &s.odek_home).await.expect("owned");
    s.odek.destroy(&owned).await.expect("down");
    assert!(s.fake.containers().is_empty());
}

#[tokio::test]
async fn describe_reports_the_limits_the_container_has_now() {
    let (s, _spy, sb, _spec) = launched().await;
    let id = sb.container_id.clone().expect("id");
    let before = s.odek.describe(&sb).await.expect("describe");
    assert_eq!(before.pids_limit, Some(4096));
    s.fake.update_container(&id, |c| {
        c.pids_limit = Some(99999);
        c.memory_bytes = 512 << 20;
        c.nano_cpus = 1_500_000_000;
    });
    let env = s.odek.describe(&sb).await.expect("describe");
    assert_eq!(env.pids_limit, Some(99999));
    assert_eq!(env.memory_bytes, Some(512 << 20));
    assert_eq!(env.cpus.as_deref(), Some("1.5"));
    let text = odek_core::describe::render_prompt(&env);
    assert!(text.contains("at most 99999 processes"), "{text}");
    assert!(!text.contains("4096"), "{text}");
}

#[tokio::test]
async fn an_unusable_launch_key_refuses_the_launch_before_create() {
    use std::os::unix::fs::PermissionsExt;
    let s = Setup::new();
    std::fs::set_permissions(&s.odek_home, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    Secret::load_or_create(&s.odek_home).expect("key");
    let key = odek_core::secret::key_path(&s.odek_home);
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let err = s.up().await.expect_err("refused");
    assert_refused_before_create(&s, &err, FailureClass::Config, "chmod 600");
    assert!(err.to_string().contains("launch.key"), "{err}");
    // gc, ls and attach refuse too rather than guess.
    assert!(s.odek.list(&s.odek_home).await.is_err());
    assert!(s.odek.gc(&gc_opts(&s)).await.is_err());
}
