//! Approval of project settings and sub-agent narrowing against the real
//! engine (SPEC §7, §8), the prompt driven through a real pseudo-terminal.

use std::process::Command;
use std::time::Duration;

use expectrl::session::OsSession as Session;
use expectrl::{ControlCode, Expect};
use odek_e2e::tty::{card, finish};
use odek_e2e::{
    docker, docker_ok, run, stderr, stdout, unique, Project, TestNetwork, BASE_IMAGE, PROJECT,
};

/// Spawns `odek <args>` for `p` in a pseudo-terminal.
fn spawn_tty(p: &Project, args: &[&str]) -> Session {
    let cmd: Command = p.odek(args);
    odek_e2e::tty::spawn(cmd, Duration::from_secs(60))
}

fn project_file(p: &Project, json: &str) {
    std::fs::write(p.path().join("odek.json"), json).expect("write odek.json");
}

fn net_id(name: &str) -> String {
    docker(&["network", "inspect", "-f", "{{.Id}}", name])
}

/// Two labelled networks of a fresh Compose "project" (no containers needed).
fn fresh_project() -> (String, TestNetwork, TestNetwork) {
    let proj = unique("odekap");
    let label = format!("com.docker.compose.project={proj}");
    let a = TestNetwork::create(&format!("{proj}_a"), &["--label", &label]);
    let b = TestNetwork::create(&format!("{proj}_b"), &["--internal", "--label", &label]);
    (proj, a, b)
}

#[test]
fn card_lists_each_network_and_y_runs_once() {
    let p = Project::new();
    project_file(
        &p,
        &format!(r#"{{"sandbox_compose_project": "{PROJECT}"}}"#),
    );
    let mut s = spawn_tty(
        &p,
        &[
            "run",
            "--sandbox-image",
            BASE_IMAGE,
            "--",
            "redis-cli",
            "-h",
            "redis",
            "ping",
        ],
    );
    let text = card(&mut s);
    for (name, internal) in [
        (format!("{PROJECT}_default"), "no"),
        (format!("{PROJECT}_backend"), "yes"),
    ] {
        let id = net_id(&name);
        assert!(text.contains(&name), "card lacks {name}:\n{text}");
        assert!(
            text.contains(&format!("id {id}  internal={internal}  compose={PROJECT}")),
            "card lacks the full ID / internal / compose line of {name}:\n{text}"
        );
    }
    assert!(
        text.contains("attached networks only; internet reachable"),
        "{text}"
    );
    s.send_line("y").expect("answer");
    let (out, code) = finish(s);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("PONG"), "{out}");
    let list = run(&mut p.odek(&["approvals", "list", "--json"]));
    assert_eq!(stdout(&list).trim(), "[]", "`y` must not persist a trust");
    assert!(p.leftovers().is_empty());
}

#[test]
fn n_and_eof_deny_and_nothing_runs() {
    for answer in ["N", "eof", "whatever"] {
        let p = Project::new();
        project_file(
            &p,
            &format!(r#"{{"sandbox_compose_project": "{PROJECT}"}}"#),
        );
        let marker = p.marker_cmd();
        let mut s = spawn_tty(
            &p,
            &[
                "run",
                "--sandbox-image",
                BASE_IMAGE,
                "--",
                "sh",
                "-c",
                &marker,
            ],
        );
        card(&mut s);
        if answer == "eof" {
            s.send(ControlCode::EndOfTransmission).expect("send EOF");
        } else {
            s.send_line(answer).expect("answer");
        }
        let (out, code) = finish(s);
        assert_eq!(code, 125, "{answer}: {out}");
        assert!(out.contains("were not approved"), "{answer}: {out}");
        assert!(
            !p.marker().exists(),
            "{answer}: the command ran on the host"
        );
        assert!(p.leftovers().is_empty(), "{answer}: container left");
    }
}

#[test]
fn refused_without_a_terminal_and_runs_with_the_env_switch() {
    let p = Project::new();
    project_file(
        &p,
        &format!(r#"{{"sandbox_compose_project": "{PROJECT}"}}"#),
    );
    let out = run(p
        .odek(&[
            "run",
            "--sandbox-image",
            BASE_IMAGE,
            "--",
            "sh",
            "-c",
            &p.marker_cmd(),
        ])
        .stdin(std::process::Stdio::null()));
    odek_e2e::assert_refused(&p, &out, "ODEK_APPROVE_PROJECT_SANDBOX=1");
    assert!(
        stderr(&out).contains("answer `t`"),
        "both ways out are named"
    );
    let out = run(p
        .odek(&[
            "run",
            "--sandbox-image",
            BASE_IMAGE,
            "--",
            "redis-cli",
            "-h",
            "redis",
            "ping",
        ])
        .env("ODEK_APPROVE_PROJECT_SANDBOX", "1")
        .stdin(std::process::Stdio::null()));
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("PONG"));
}

#[test]
fn trust_survives_a_rerun_and_an_agent_edit_asks_again() {
    let p = Project::new();
    project_file(
        &p,
        &format!(r#"{{"sandbox_compose_project": "{PROJECT}"}}"#),
    );
    let mut s = spawn_tty(&p, &["run", "--sandbox-image", BASE_IMAGE, "--", "true"]);
    card(&mut s);
    s.send_line("t").expect("trust");
    let (out, code) = finish(s);
    assert_eq!(code, 0, "{out}");
    let store = p.home.path().join("project_sandbox_approvals.json");
    let before = std::fs::read(&store).expect("store written");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&store)
        .expect("stat")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);

    // Trusted: a non-interactive re-run needs no prompt and changes nothing.
    let rerun = run(p
        .odek(&[
            "run",
            "--sandbox-image",
            BASE_IMAGE,
            "--",
            "redis-cli",
            "-h",
            "redis",
            "ping",
        ])
        .stdin(std::process::Stdio::null()));
    assert!(rerun.status.success(), "{}", stderr(&rerun));
    assert_eq!(
        std::fs::read(&store).expect("store"),
        before,
        "store unchanged by a re-run"
    );
    let list = run(&mut p.odek(&["approvals", "list", "--json"]));
    assert!(
        stdout(&list).contains(&p.path().display().to_string()),
        "{}",
        stdout(&list)
    );
    // … with the engine it is bound to (this daemon's ID, SPEC §7.3).
    let rows: serde_json::Value = serde_json::from_str(&stdout(&list)).expect("json");
    let daemon_id = odek_e2e::docker(&["info", "--format", "{{.ID}}"]);
    assert_eq!(
        rows[0]["engine"],
        format!("engine:{daemon_id}"),
        "{}",
        stdout(&list)
    );

    // The agent edits /workspace/odek.json from inside the sandbox …
    let edit = run(p
        .odek(&[
            "run",
            "--sandbox-image",
            BASE_IMAGE,
            "--",
            "sh",
            "-c",
            &format!(
                r#"printf '{{"sandbox_compose_project":"{PROJECT}","sandbox_env":{{"X":"${{HOME}}"}}}}' > /workspace/odek.json"#
            ),
        ])
        .stdin(std::process::Stdio::null()));
    assert!(edit.status.success(), "{}", stderr(&edit));
    // … so the next launch asks again (and without a terminal, refuses).
    let next = run(p
        .odek(&[
            "run",
            "--sandbox-image",
            BASE_IMAGE,
            "--",
            "sh",
            "-c",
            &p.marker_cmd(),
        ])
        .stdin(std::process::Stdio::null()));
    odek_e2e::assert_refused(&p, &next, "needs operator approval");
    assert!(stderr(&next).contains("sandbox_env"), "{}", stderr(&next));
    // Without a card, the refusal still says a trust existed for other
    // settings (or network IDs, as after a Compose down/up).
    assert!(
        stderr(&next).contains("trusted before with other settings or network IDs"),
        "{}",
        stderr(&next)
    );
}

#[test]
fn a_network_joining_the_project_at_the_prompt_refuses_the_launch() {
    let p = Project::new();
    let (proj, _a, _b) = fresh_project();
    project_file(&p, &format!(r#"{{"sandbox_compose_project": "{proj}"}}"#));
    let mut s = spawn_tty(
        &p,
        &[
            "run",
            "--sandbox-image",
            BASE_IMAGE,
            "--",
            "sh",
            "-c",
            &p.marker_cmd(),
        ],
    );
    let text = card(&mut s);
    assert!(
        text.contains(&format!("{proj}_a")) && text.contains(&format!("{proj}_b")),
        "{text}"
    );
    // Between approval and launch, a network joins the project.
    let label = format!("com.docker.compose.project={proj}");
    let sneaky = TestNetwork::create(&format!("{proj}_sneaky"), &["--label", &label]);
    s.send_line("y").expect("approve");
    let (out, code) = finish(s);
    assert_eq!(code, 125, "{out}");
    assert!(out.contains("changed since they were approved"), "{out}");
    assert!(out.contains(&format!("added {}", sneaky.name)), "{out}");
    assert!(out.contains(&sneaky.id[..12]), "{out}");
    assert!(!p.marker().exists());
    assert!(p.leftovers().is_empty(), "no create call may have happened");
}

#[test]
fn a_network_recreated_at_the_prompt_refuses_the_launch() {
    let p = Project::new();
    let name = unique("odekrc");
    let first = TestNetwork::create(&name, &[]);
    project_file(&p, &format!(r#"{{"sandbox_networks": ["{name}"]}}"#));
    let mut s = spawn_tty(
        &p,
        &[
            "run",
            "--sandbox-image",
            BASE_IMAGE,
            "--",
            "sh",
            "-c",
            &p.marker_cmd(),
        ],
    );
    let text = card(&mut s);
    assert!(text.contains(&first.id), "{text}");
    let old = first.id.clone();
    drop(first);
    let again = TestNetwork::create(&name, &[]);
    assert_ne!(again.id, old);
    s.send_line("y").expect("approve");
    let (out, code) = finish(s);
    assert_eq!(code, 125, "{out}");
    assert!(
        out.contains(&format!("added {name} ({})", &again.id[..12])),
        "{out}"
    );
    assert!(
        out.contains(&format!("gone {name} ({})", &old[..12])),
        "{out}"
    );
    assert!(!p.marker().exists());
    assert!(p.leftovers().is_empty());
}

#[test]
fn escape_sequences_in_a_compose_label_are_shown_sanitised() {
    let p = Project::new();
    let name = unique("odekevil");
    let evil = "x\u{1b}[2J\u{1b}]0;pwned\u{7}y";
    let _n = TestNetwork::create(
        &name,
        &["--label", &format!("com.docker.compose.project={evil}")],
    );
    project_file(&p, &format!(r#"{{"sandbox_networks": ["{name}"]}}"#));
    let mut s = spawn_tty(&p, &["run", "--sandbox-image", BASE_IMAGE, "--", "true"]);
    let text = card(&mut s);
    assert!(
        !text.contains('\u{1b}') && !text.contains('\u{7}'),
        "raw escapes reached the terminal: {text:?}"
    );
    assert!(
        text.contains(r#"compose="x\u{1b}[2J\u{1b}]0;pwned\u{7}y""#),
        "{text}"
    );
    s.send_line("N").expect("deny");
    let (_, code) = finish(s);
    assert_eq!(code, 125);
}

fn up(p: &Project, args: &[&str]) -> std::process::Output {
    let mut all = vec!["sandbox", "up"];
    all.extend_from_slice(args);
    run(&mut p.odek(&all))
}

fn down(p: &Project, name: &str) {
    let _ = run(&mut p.odek(&["sandbox", "down", name]));
}

/// The networks `container` reaches, sorted (SPEC §4.4: through its link
/// network, [`odek_e2e::reached_network_ids`]).
fn reached_ids(container: &str) -> Vec<String> {
    odek_e2e::reached_network_ids(container)
}

/// The networks the engine lists `container` on, sorted.
fn attached_ids(container: &str) -> Vec<String> {
    let mut v: Vec<String> = docker(&[
        "inspect",
        "-f",
        "{{range .NetworkSettings.Networks}}{{.NetworkID}} {{end}}",
        container,
    ])
    .split_whitespace()
    .map(str::to_string)
    .collect();
    v.sort();
    v
}

#[test]
fn sub_agents_only_narrow() {
    let p = Project::new();
    let (proj, a, b) = fresh_project();
    let other = TestNetwork::create(&unique("odekother"), &[]);
    let parent = up(
        &p,
        &[
            "--sandbox-compose",
            &proj,
            "--sandbox-image",
            BASE_IMAGE,
            "--sandbox-pids-limit",
            "200",
        ],
    );
    assert!(parent.status.success(), "{}", stderr(&parent));
    let parent_name = stdout(&parent).trim().to_string();

    // A network the parent lacks → error, nothing launched.
    let out = up(
        &p,
        &["--parent", &parent_name, "--sandbox-networks", &other.name],
    );
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("not one of the parent's"),
        "{}",
        stderr(&out)
    );

    // The project gains a network after the parent resolved: the child's
    // compose selection never picks it up.
    let label = format!("com.docker.compose.project={proj}");
    let late = TestNetwork::create(&format!("{proj}_late"), &["--label", &label]);
    let child = up(
        &p,
        &[
            "--parent",
            &parent_name,
            "--sandbox-compose",
            &proj,
            "--sandbox-pids-limit",
            "64",
        ],
    );
    assert!(child.status.success(), "{}", stderr(&child));
    let child_name = stdout(&child).trim().to_string();
    let mut want = vec![a.id.clone(), b.id.clone()];
    want.sort();
    assert_eq!(
        reached_ids(&child_name),
        want,
        "child reaches {}",
        late.name
    );
    let pids = run(&mut p.odek(&[
        "sandbox",
        "exec",
        &child_name,
        "--",
        "sh",
        "-c",
        odek_e2e::PIDS_MAX_CMD,
    ]));
    assert_eq!(stdout(&pids).trim(), "64");
    assert_eq!(
        docker(&[
            "inspect",
            "-f",
            "{{index .Config.Labels \"dev.odek.parent\"}}",
            &child_name
        ]),
        parent_name
    );

    // Limits cannot go up; none cannot become bridge.
    let out = up(
        &p,
        &["--parent", &parent_name, "--sandbox-pids-limit", "5000"],
    );
    assert!(
        stderr(&out).contains("may only go down"),
        "{}",
        stderr(&out)
    );
    let out = up(
        &p,
        &["--parent", &parent_name, "--sandbox-network", "bridge"],
    );
    assert!(
        stderr(&out).contains("never from none to bridge"),
        "{}",
        stderr(&out)
    );

    // A directory for the child would be a silent no-op (it works in the
    // parent's workspace): refused, nothing launched.
    let elsewhere = tempfile::tempdir().expect("tempdir");
    let before = p.leftovers();
    let out = run(Command::new(odek_e2e::odek_bin())
        .current_dir(p.path())
        .arg("-C")
        .arg(elsewhere.path())
        .args(["sandbox", "up", "--parent", &parent_name])
        .env("ODEK_HOME", p.home.path()));
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("a sub-agent works in its parent's workspace"),
        "{}",
        stderr(&out)
    );
    assert_eq!(p.leftovers(), before, "a refused child launched");

    down(&p, &child_name);
    down(&p, &parent_name);
    assert!(!docker_ok(&["inspect", &child_name]));
    assert!(p.leftovers().is_empty(), "{:?}", p.leftovers());
}

/// `odek sandbox up --parent P --sandbox-network none` on a Compose-attached
/// parent: the child has no network at all (no interface but `lo`, no
/// route); the parent, attached to both networks, is the positive control.
/// `ODEK_SANDBOX_NETWORK=none` instead of the flag is named in a warning,
/// not silently ignored.
#[test]
fn a_sub_agent_asked_for_none_has_no_network() {
    // The networks first: dropped last, after the project's containers.
    let (proj, a, b) = fresh_project();
    let p = Project::new();
    let parent = up(
        &p,
        &["--sandbox-compose", &proj, "--sandbox-image", BASE_IMAGE],
    );
    assert!(parent.status.success(), "{}", stderr(&parent));
    let parent_name = stdout(&parent).trim().to_string();
    let mut want = vec![a.id.clone(), b.id.clone()];
    want.sort();
    assert_eq!(reached_ids(&parent_name), want, "the parent reaches them");
    let probe = "ls /sys/class/net | tr '\\n' ' '; echo; tail -n +2 /proc/net/route | wc -l";
    let looks = |name: &str| {
        stdout(&run(
            &mut p.odek(&["sandbox", "exec", name, "--", "sh", "-c", probe])
        ))
    };
    let seen = looks(&parent_name);
    assert!(seen.contains("eth0") && !seen.ends_with(" 0\n"), "{seen}");

    let child = up(&p, &["--parent", &parent_name, "--sandbox-network", "none"]);
    assert!(child.status.success(), "{}", stderr(&child));
    let child_name = stdout(&child).trim().to_string();
    assert_eq!(
        docker(&["inspect", "-f", "{{.HostConfig.NetworkMode}}", &child_name]),
        "none"
    );
    assert!(
        !attached_ids(&child_name)
            .iter()
            .any(|id| *id == a.id || *id == b.id),
        "the child kept a network of its parent"
    );
    assert_eq!(looks(&child_name), "lo \n0\n", "the child has a network");
    assert!(
        stderr(&child).contains("network=none ") && stderr(&child).contains("networks=-"),
        "{}",
        stderr(&child)
    );

    let mut c = p.odek(&["sandbox", "up", "--parent", &parent_name]);
    let env_child = run(c.env("ODEK_SANDBOX_NETWORK", "none"));
    assert!(env_child.status.success(), "{}", stderr(&env_child));
    assert!(
        stderr(&env_child).contains("ODEK_SANDBOX_NETWORK is set but not applied to the sub-agent")
            && stderr(&env_child).contains("--sandbox-network"),
        "{}",
        stderr(&env_child)
    );
    down(&p, stdout(&env_child).trim());
    down(&p, &child_name);
    down(&p, &parent_name);
    assert!(p.leftovers().is_empty(), "{:?}", p.leftovers());
}

#[test]
fn a_sub_agent_of_a_parent_that_needed_approval_needs_it_too() {
    // The project asks for a Compose project, an image and an env template
    // reading the host: the parent ran with ODEK_APPROVE_PROJECT_SANDBOX=1.
    // (The project is dropped first: its containers go before the networks.)
    let (proj, _a, _b) = fresh_project();
    let p = Project::new();
    project_file(
        &p,
        &format!(
            r#"{{"sandbox_compose_project": "{proj}", "sandbox_image": "{BASE_IMAGE}", "sandbox_env": {{"TOKEN": "${{HOME}}"}}}}"#
        ),
    );
    let parent = run(p
        .odek(&["sandbox", "up"])
        .env("ODEK_APPROVE_PROJECT_SANDBOX", "1"));
    assert!(parent.status.success(), "{}", stderr(&parent));
    let parent_name = stdout(&parent).trim().to_string();
    assert_eq!(p.leftovers().len(), 1);

    // The child, without a terminal, a trust or the env switch: refused,
    // nothing created — the parent's label does not approve it.
    let child = up(
        &p,
        &["--parent", &parent_name, "--sandbox-pids-limit", "100"],
    );
    assert!(!child.status.success(), "{}", stderr(&child));
    assert!(
        stderr(&child).contains("no terminal to ask on"),
        "{}",
        stderr(&child)
    );
    assert_eq!(p.leftovers().len(), 1, "a child container was created");

    // Approved the way `odek run` is: the env switch of this process.
    let child = run(p
        .odek(&[
            "sandbox",
            "up",
            "--parent",
            &parent_name,
            "--sandbox-pids-limit",
            "100",
        ])
        .env("ODEK_APPROVE_PROJECT_SANDBOX", "1"));
    assert!(child.status.success(), "{}", stderr(&child));
    assert!(
        stderr(&child).contains("approved by ODEK_APPROVE_PROJECT_SANDBOX=1"),
        "{}",
        stderr(&child)
    );
    let child_name = stdout(&child).trim().to_string();
    down(&p, &child_name);
    down(&p, &parent_name);
    assert!(p.leftovers().is_empty(), "{:?}", p.leftovers());
}
