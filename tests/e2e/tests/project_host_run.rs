//! Only the operator may allow a host run (SPEC §6.3): a setting that comes
//! from the project — even `sandbox_image` alone, an image that can never be
//! pulled — makes every setup failure a refusal, whether the settings were
//! approved with the env switch, with `y` at the prompt, or by a stored trust
//! whose image was deleted since. The approval card says so. Each refusal
//! shows the command did not run on the host and no container is left.

use std::process::{Command, Stdio};
use std::time::Duration;

use expectrl::session::OsSession as Session;
use expectrl::Expect;
use odek_e2e::tty::{card, finish};
use odek_e2e::{
    assert_refused, docker, docker_ok, run, stderr, stdout, strs, unique, Project, BASE_IMAGE,
};

/// Nothing listens on loopback port 1: a pull fails at once, locally.
const MISSING_IMAGE: &str = "127.0.0.1:1/odek-missing:1";

fn project_image(p: &Project, image: &str) {
    std::fs::write(
        p.path().join("odek.json"),
        format!(r#"{{"sandbox_image": "{image}"}}"#),
    )
    .expect("write odek.json");
}

/// `odek run -- <marker command>`.
fn run_marker(p: &Project) -> Vec<String> {
    let mut v: Vec<String> = vec!["run".into(), "--".into()];
    v.extend(p.marker_argv());
    v
}

fn spawn_tty(p: &Project, args: &[&str]) -> Session {
    let cmd: Command = p.odek(args);
    odek_e2e::tty::spawn(cmd, Duration::from_secs(60))
}

fn assert_no_fallback(text: &str) {
    assert!(
        !text.contains("NO SANDBOX") && !text.contains("ON THE HOST"),
        "a project setting bought a host run:\n{text}"
    );
}

#[test]
fn a_project_image_that_cannot_be_pulled_is_refused_with_the_env_switch() {
    let p = Project::new();
    project_image(&p, MISSING_IMAGE);
    let out = p.run_odek_env(
        &[("ODEK_APPROVE_PROJECT_SANDBOX", "1")],
        &strs(&run_marker(&p)),
    );
    assert_refused(&p, &out, "cannot be pulled");
    assert!(
        stderr(&out).contains("image-unavailable"),
        "{}",
        stderr(&out)
    );
    assert_no_fallback(&stderr(&out));
    // Control: the same image from the operator (a flag) keeps the loud
    // implicit fallback (SPEC §6.3), so the refusal above is the project's.
    let q = Project::new();
    let mut args: Vec<String> = vec!["run".into(), "--sandbox-image".into(), MISSING_IMAGE.into()];
    args.push("--".into());
    args.extend(q.marker_argv());
    let out = q.run_odek(&strs(&args));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        q.marker().exists(),
        "the operator's fallback ran on the host"
    );
    assert!(stderr(&out).contains("NO SANDBOX"), "{}", stderr(&out));
}

#[test]
fn a_project_image_approved_with_y_is_refused_and_the_card_says_so() {
    let p = Project::new();
    project_image(&p, MISSING_IMAGE);
    let args = run_marker(&p);
    let mut s = spawn_tty(&p, &strs(&args));
    let c = card(&mut s);
    assert!(
        c.contains("if it cannot be pulled: refused, nothing runs"),
        "the card states no outcome for the image:\n{c}"
    );
    assert!(
        c.contains("on failure refused, nothing runs"),
        "the card states no outcome on failure:\n{c}"
    );
    s.send_line("y").expect("answer y");
    let (text, code) = finish(s);
    assert_eq!(code, 125, "approved once, then refused:\n{text}");
    assert!(text.contains("cannot be pulled"), "{text}");
    assert_no_fallback(&text);
    assert!(!p.marker().exists(), "the command ran on the host");
    assert!(p.leftovers().is_empty(), "{:?}", p.leftovers());
}

#[test]
fn a_trusted_project_whose_image_was_deleted_is_refused() {
    let p = Project::new();
    // A local tag on a name only a loopback registry could serve: deleting
    // it makes the next launch pull, and the pull fails on this machine.
    let image = format!("127.0.0.1:1/{}:1", unique("odek-gone-"));
    docker(&["tag", BASE_IMAGE, &image]);
    struct Untag(String);
    impl Drop for Untag {
        fn drop(&mut self) {
            let _ = docker_ok(&["rmi", &self.0]);
        }
    }
    let untag = Untag(image.clone());
    project_image(&p, &image);
    let mut s = spawn_tty(&p, &["run", "--", "true"]);
    card(&mut s);
    s.send_line("t").expect("trust");
    let (text, code) = finish(s);
    assert_eq!(code, 0, "trusted and run:\n{text}");
    assert!(
        p.home
            .path()
            .join("project_sandbox_approvals.json")
            .exists(),
        "the trust was stored"
    );

    // The image's author deletes it; the trust still stands.
    drop(untag);
    assert!(!docker_ok(&["image", "inspect", &image]), "untagged");
    let out = run(p
        .odek(&strs(&run_marker(&p)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped()));
    assert_refused(&p, &out, "cannot be pulled");
    assert_no_fallback(&stderr(&out));
    assert!(stdout(&out).is_empty(), "{}", stdout(&out));
}

#[test]
fn config_view_says_a_project_setting_refuses_on_failure() {
    let p = Project::new();
    project_image(&p, MISSING_IMAGE);
    let out = p.run_odek_env(
        &[("ODEK_APPROVE_PROJECT_SANDBOX", "1")],
        &["config", "view", "--json"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["mode"], "explicit", "{v}");
    assert_eq!(v["fallback_allowed"], false, "{v}");
    assert_eq!(v["sources"]["sandbox"]["kind"], "project", "{v}");
    let text = p.run_odek_env(
        &[("ODEK_APPROVE_PROJECT_SANDBOX", "1")],
        &["config", "view"],
    );
    let t = stdout(&text);
    assert!(
        t.lines()
            .any(|l| l.starts_with("on failure") && l.contains("refused")),
        "{t}"
    );
}
