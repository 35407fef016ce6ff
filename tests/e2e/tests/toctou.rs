//! Time of check to time of use against the real engine (SPEC §3.4, §5,
//! §6.1): a working directory swapped for a symlink while the approval
//! prompt waits (driven through a real pseudo-terminal) or while the start
//! request is on its way, a `Dockerfile.odek` edited at the prompt, and an
//! `odek-sandbox:<hash>` image odek did not build. Each refusal shows that
//! the command did not run and no container is left.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use expectrl::session::OsSession as Session;
use expectrl::Expect;
use odek_e2e::fault_proxy::{Action, FaultProxy, Rule, Then};
use odek_e2e::tty::{finish, PROMPT};
use odek_e2e::{
    docker, docker_ok, odek_bin, run_timeout, stderr, stdout, unique, wait_timeout, Project,
    BASE_IMAGE, ODEK_TIMEOUT, TEST_LABEL,
};
use odek_e2e::{tag_of, Tags};

/// The socket a refused workdir holds; `ls /workspace` would print its name.
const SOCKET_NAME: &str = "agent-socket-toctou";

/// `W/outer/app` (the project, asked for with -C) and `W/sockdir` (holding
/// a listening Unix socket) inside `p`'s directory.
struct Layout {
    app: PathBuf,
    sockdir: PathBuf,
    _listener: std::os::unix::net::UnixListener,
}

impl Layout {
    fn new(p: &Project) -> Layout {
        let w = p.path();
        let app = w.join("outer/app");
        std::fs::create_dir_all(&app).expect("mkdir W/outer/app");
        let sockdir = w.join("sockdir");
        std::fs::create_dir_all(&sockdir).expect("mkdir W/sockdir");
        let listener =
            std::os::unix::net::UnixListener::bind(sockdir.join(SOCKET_NAME)).expect("bind");
        Layout {
            app,
            sockdir,
            _listener: listener,
        }
    }

    /// `mv W/outer/app W/outer/app.real; ln -s W/sockdir W/outer/app`.
    fn swap(&self) {
        std::fs::rename(&self.app, self.app.with_extension("real")).expect("mv");
        std::os::unix::fs::symlink(&self.sockdir, &self.app).expect("ln -s");
    }

    /// Containers labelled with the app's path as their workdir.
    fn leftovers(&self) -> Vec<String> {
        docker(&[
            "ps",
            "-aq",
            "--filter",
            "label=dev.odek.sandbox=true",
            "--filter",
            &format!("label=dev.odek.workdir={}", self.app.display()),
        ])
        .lines()
        .map(str::to_string)
        .collect()
    }
}

impl Drop for Layout {
    fn drop(&mut self) {
        for id in self.leftovers() {
            let _ = docker_ok(&["rm", "-f", &id]);
        }
    }
}

/// `odek -C <dir> <args>` with `p`'s `$ODEK_HOME` and no other `ODEK_*`.
fn odek_in(p: &Project, dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(odek_bin());
    c.current_dir(p.path())
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("ODEK_HOME", p.home.path());
    for (k, _) in std::env::vars() {
        if k.starts_with("ODEK_") && k != "ODEK_HOME" && k != "ODEK_BIN" {
            c.env_remove(&k);
        }
    }
    c
}

/// Spawns `cmd` in a pseudo-terminal.
fn spawn_tty(cmd: Command) -> Session {
    odek_e2e::tty::spawn(cmd, Duration::from_secs(60))
}

#[test]
fn a_workdir_swapped_for_a_symlink_at_the_prompt_is_refused() {
    let p = Project::new();
    let l = Layout::new(&p);
    std::fs::write(
        l.app.join("odek.json"),
        format!(r#"{{"sandbox_image": "{BASE_IMAGE}"}}"#),
    )
    .expect("odek.json");
    let mut s = spawn_tty(odek_in(&p, &l.app, &["run", "--", "ls", "/workspace"]));
    s.expect(PROMPT).expect("the approval prompt");
    l.swap();
    s.send_line("y").expect("answer");
    let (text, code) = finish(s);
    assert_eq!(code, 125, "refused:\n{text}");
    assert!(
        text.contains("changed since it was resolved and approved"),
        "the change is named:\n{text}"
    );
    assert!(text.contains("symbolic link"), "{text}");
    assert!(
        !text.contains(SOCKET_NAME),
        "ls ran on the socket directory:\n{text}"
    );
    assert!(l.leftovers().is_empty(), "left: {:?}", l.leftovers());
}

#[test]
fn a_workdir_swapped_for_a_symlink_before_start_is_caught_by_the_kernel_record() {
    let p = Project::new();
    let l = Layout::new(&p);
    std::fs::write(l.app.join("here"), "").expect("file");
    // Control: the same launch unswapped runs, with the mounts verified
    // from the kernel's record (no warning that it could not be read).
    let out = run_timeout(
        &mut odek_in(
            &p,
            &l.app,
            &[
                "run",
                "--sandbox-image",
                BASE_IMAGE,
                "--",
                "ls",
                "/workspace",
            ],
        ),
        ODEK_TIMEOUT,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("here"), "{}", stdout(&out));
    assert!(
        !stderr(&out).contains("could not be read back"),
        "the kernel record is readable here: {}",
        stderr(&out)
    );
    // Every check before create passes; the start request is held while
    // the path is swapped, so only what the kernel mounted tells.
    let proxy = FaultProxy::start(vec![Rule::new(
        "POST",
        "/containers/*/start",
        1,
        Action::Delay(Duration::from_secs(2)),
        Then::Relay,
    )]);
    let mut cmd = odek_in(
        &p,
        &l.app,
        &[
            "run",
            "--sandbox-image",
            BASE_IMAGE,
            "--",
            "ls",
            "/workspace",
        ],
    );
    cmd.env("DOCKER_HOST", proxy.docker_host())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = cmd.spawn().expect("spawn odek");
    assert!(
        proxy.wait_for("POST", "/containers/*/start", 1, Duration::from_secs(60)),
        "no start request:\n{}",
        proxy.transcript()
    );
    l.swap();
    let out: Output = wait_timeout(child, ODEK_TIMEOUT, "odek run");
    let err = stderr(&out);
    assert_eq!(
        out.status.code(),
        Some(125),
        "refused:\n{err}\n{}",
        stdout(&out)
    );
    assert!(err.contains("the kernel mounted"), "{err}");
    assert!(err.contains("sockdir"), "the real target is named: {err}");
    assert!(
        !stdout(&out).contains(SOCKET_NAME),
        "ls ran on the socket directory: {}",
        stdout(&out)
    );
    assert!(l.leftovers().is_empty(), "left: {:?}", l.leftovers());
}

#[test]
fn a_dockerfile_odek_edited_at_the_prompt_is_not_built() {
    let p = Project::new();
    let approved = format!("FROM {BASE_IMAGE}\n# {}\n", unique("toctou"));
    let tag = tag_of(&approved);
    let _tags = Tags(vec![tag.clone()]);
    std::fs::write(p.path().join("Dockerfile.odek"), &approved).expect("write");
    let mut s = spawn_tty(p.odek(&["run", "--", "sh", "-c", "ls /evil && echo EVIL"]));
    let card = s.expect(PROMPT).expect("the approval prompt");
    assert!(
        String::from_utf8_lossy(card.before()).contains(&tag),
        "the card names the tag"
    );
    std::fs::write(
        p.path().join("Dockerfile.odek"),
        format!("{approved}RUN touch /evil\n"),
    )
    .expect("edit");
    s.send_line("y").expect("answer");
    let (text, code) = finish(s);
    assert_eq!(code, 125, "refused:\n{text}");
    assert!(
        text.contains("Dockerfile.odek changed since it was resolved and approved"),
        "{text}"
    );
    assert!(!text.contains("EVIL"), "{text}");
    assert!(
        !docker_ok(&["image", "inspect", &tag]),
        "an image was tagged with the approved hash"
    );
    assert!(p.leftovers().is_empty(), "left: {:?}", p.leftovers());
}

#[test]
fn an_odek_sandbox_image_odek_did_not_build_is_built_again() {
    let p = Project::new();
    let benign = format!("FROM {BASE_IMAGE}\n# {}\n", unique("toctou"));
    let tag = tag_of(&benign);
    let mut tags = Tags(vec![tag.clone()]);
    // What a repository's Compose file could build and tag in advance.
    let ctx = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        ctx.path().join("Dockerfile"),
        format!("FROM {BASE_IMAGE}\nRUN touch /poisoned\n"),
    )
    .expect("write");
    let poisoned = docker(&[
        "build",
        "-q",
        "--label",
        TEST_LABEL,
        "--label",
        "dev.odek.build-mac=0000",
        "-t",
        &tag,
        &ctx.path().display().to_string(),
    ]);
    // Left untagged once odek builds again: removed by ID.
    tags.0.push(poisoned);
    std::fs::write(p.path().join("Dockerfile.odek"), &benign).expect("write");
    let mut cmd = p.odek(&["run", "--", "sh", "-c", "test ! -e /poisoned && echo CLEAN"]);
    cmd.env("ODEK_APPROVE_PROJECT_SANDBOX", "1");
    let out = run_timeout(&mut cmd, ODEK_TIMEOUT);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("CLEAN"), "the poisoned image ran");
    assert!(
        stderr(&out).contains("not built by this user's odek"),
        "{}",
        stderr(&out)
    );
    // Reused from now on: marked with this user's key.
    let label = docker(&[
        "image",
        "inspect",
        "-f",
        "{{index .Config.Labels \"dev.odek.build-mac\"}}",
        &tag,
    ]);
    assert_eq!(label.len(), 64, "{label}");
    let out = run_timeout(&mut cmd, ODEK_TIMEOUT);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stderr(&out).contains("building"), "{}", stderr(&out));
    assert!(p.leftovers().is_empty(), "left: {:?}", p.leftovers());
}
