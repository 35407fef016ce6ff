//! `odek config view --json` (SPEC §10.4): the settings actually applied,
//! resolved against the real daemon, with each value's source (§3.2).

use odek_e2e::{network_id, stderr, stdout, Project, BASE_IMAGE, PROJECT};
use serde_json::Value;

fn view(p: &Project, env: &[(&str, &str)], flags: &[&str]) -> Value {
    let mut args = vec!["config", "view", "--json"];
    args.extend_from_slice(flags);
    let out = p.run_odek_env(env, &args);
    assert!(
        out.status.success(),
        "config view failed:\n{}{}",
        stdout(&out),
        stderr(&out)
    );
    serde_json::from_str(&stdout(&out))
        .unwrap_or_else(|e| panic!("config view --json is not JSON ({e}):\n{}", stdout(&out)))
}

fn is_full_id(s: &str) -> bool {
    s.len() == 64 && s.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f'))
}

#[test]
fn compose_project_view_shows_networks_ids_limits_and_sources() {
    let p = Project::new();
    let v = view(
        &p,
        &[],
        &["--sandbox-compose", PROJECT, "--sandbox-image", BASE_IMAGE],
    );
    let s = v.to_string();
    let nets = v["networks"]
        .as_array()
        .unwrap_or_else(|| panic!("no networks: {s}"));
    assert_eq!(nets.len(), 2, "{s}");
    for (suffix, internal) in [("backend", true), ("default", false)] {
        let name = format!("{PROJECT}_{suffix}");
        let n = nets
            .iter()
            .find(|n| n["name"] == name.as_str())
            .unwrap_or_else(|| panic!("{name} missing: {s}"));
        let id = n["id"].as_str().unwrap_or_default();
        assert!(is_full_id(id), "{name}: id {id:?} is not 64 hex");
        assert_eq!(id, network_id(&name), "{name}: wrong ID");
        assert_eq!(n["internal"], internal, "{name}: {n}");
        assert_eq!(n["compose_project"], PROJECT, "{name}: {n}");
    }
    assert_eq!(v["network"], "attached", "{s}");
    assert_eq!(v["internet"], true, "{s}");
    assert_eq!(v["pids_limit"], 4096, "{s}");
    assert_eq!(v["init"], true, "{s}");
    assert_eq!(v["tmpfs"], "rw,noexec,nosuid", "{s}");
    assert_eq!(v["image"]["reference"], BASE_IMAGE, "{s}");
    assert_eq!(v["mode"], "implicit", "{s}");
    let src = &v["sources"];
    assert_eq!(src["sandbox_compose_project"]["kind"], "flag", "{s}");
    assert_eq!(
        src["sandbox_compose_project"]["flag"], "--sandbox-compose",
        "{s}"
    );
    assert_eq!(src["sandbox_image"]["flag"], "--sandbox-image", "{s}");
    assert_eq!(src["sandbox_pids_limit"]["kind"], "default", "{s}");
    assert!(
        v["warnings"].as_array().is_some_and(|w| w
            .iter()
            .any(|w| w.to_string().contains(&format!("{PROJECT}_default")))),
        "no warning about the non-internal network: {s}"
    );
    // config view launches nothing
    assert!(p.leftovers().is_empty());
}

#[test]
fn compose_project_view_says_plainly_that_a_failure_is_a_refusal() {
    let p = Project::new();
    let flags = ["--sandbox-compose", PROJECT, "--sandbox-image", BASE_IMAGE];
    let v = view(&p, &[], &flags);
    assert_eq!(v["mode"], "implicit", "{v}");
    assert_eq!(v["fallback_allowed"], false, "{v}");
    let mut args = vec!["config", "view"];
    args.extend_from_slice(&flags);
    let text = stdout(&p.odek_ok(&args));
    let line = text
        .lines()
        .find(|l| l.starts_with("on failure"))
        .unwrap_or_else(|| panic!("no on-failure line:\n{text}"));
    assert!(
        line.contains("every setup failure is a refusal") && line.contains("networks are attached"),
        "{text}"
    );
    assert!(p.leftovers().is_empty());
}

#[test]
fn project_pids_limit_applies_and_env_overrides_it() {
    let p = Project::new();
    std::fs::write(p.path().join("odek.json"), r#"{"sandbox_pids_limit": 100}"#)
        .expect("write odek.json");
    let v = view(&p, &[], &["--sandbox-image", BASE_IMAGE]);
    assert_eq!(v["pids_limit"], 100, "{v}");
    let src = &v["sources"]["sandbox_pids_limit"];
    assert_eq!(src["kind"], "project", "{v}");
    assert!(
        src["path"]
            .as_str()
            .is_some_and(|path| path.ends_with("odek.json")),
        "{src}"
    );

    let v = view(
        &p,
        &[("ODEK_SANDBOX_PIDS_LIMIT", "50")],
        &["--sandbox-image", BASE_IMAGE],
    );
    assert_eq!(v["pids_limit"], 50, "{v}");
    let src = &v["sources"]["sandbox_pids_limit"];
    assert_eq!(src["kind"], "env", "{v}");
    assert_eq!(src["var"], "ODEK_SANDBOX_PIDS_LIMIT", "{v}");

    // the flag beats env
    let v = view(
        &p,
        &[("ODEK_SANDBOX_PIDS_LIMIT", "50")],
        &["--sandbox-image", BASE_IMAGE, "--sandbox-pids-limit", "30"],
    );
    assert_eq!(v["pids_limit"], 30, "{v}");
    assert_eq!(v["sources"]["sandbox_pids_limit"]["kind"], "flag", "{v}");

    // and the applied value reaches the container
    let out = p.odek_ok(&[
        "run",
        "--sandbox-image",
        BASE_IMAGE,
        "--",
        "sh",
        "-c",
        odek_e2e::PIDS_MAX_CMD,
    ]);
    assert_eq!(stdout(&out).trim(), "100");
}

#[test]
fn project_cannot_loosen_pids_limit() {
    let p = Project::new();
    std::fs::write(
        p.path().join("odek.json"),
        r#"{"sandbox_pids_limit": 100000}"#,
    )
    .expect("write odek.json");
    let out = p.run_odek(&["config", "view", "--json", "--sandbox-image", BASE_IMAGE]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    assert_eq!(v["pids_limit"], 4096, "a project raised the limit: {v}");
    assert!(
        stderr(&out).contains("warning") || v["warnings"].as_array().is_some_and(|w| !w.is_empty()),
        "the ignored project value was not warned about"
    );
}

#[test]
fn malformed_project_config_is_an_error_naming_the_file() {
    let p = Project::new();
    std::fs::write(
        p.path().join("odek.json"),
        "{\n  \"sandbox_pids_limit\": ,\n}\n",
    )
    .expect("write odek.json");
    let mut argv = vec![
        "run".to_string(),
        "--sandbox-image".into(),
        BASE_IMAGE.into(),
        "--".into(),
    ];
    argv.extend(p.marker_argv());
    let out = p.run_odek(&odek_e2e::strs(&argv));
    odek_e2e::assert_refused(&p, &out, "odek.json");
    assert!(
        stderr(&out).contains("odek.json:2:"),
        "no line:column:\n{}",
        stderr(&out)
    );
}

#[test]
fn project_cannot_turn_the_sandbox_off_or_workspace_writable() {
    let p = Project::new();
    std::fs::write(
        p.home.path().join("config.json"),
        r#"{"sandbox_readonly": true}"#,
    )
    .expect("write user config");
    std::fs::write(
        p.path().join("odek.json"),
        r#"{"sandbox": false, "sandbox_readonly": false}"#,
    )
    .expect("write odek.json");
    let out = p.odek_ok(&[
        "run",
        "--sandbox-image",
        BASE_IMAGE,
        "--",
        "sh",
        "-c",
        "cat /proc/1/comm; touch /workspace/w 2>/dev/null; echo touch=$?",
    ]);
    let o = stdout(&out);
    let e = stderr(&out);
    assert!(
        o.starts_with("docker-init") || o.starts_with("tini"),
        "not in a container:\n{o}\n{e}"
    );
    assert!(o.contains("touch=1"), "/workspace is writable:\n{o}");
    assert!(
        !p.path().join("w").exists(),
        "the sandbox wrote into the project"
    );
    assert!(
        e.lines()
            .filter(|l| l.contains("warning") && l.contains("ignored"))
            .count()
            >= 2,
        "the two ignored project values were not warned about:\n{e}"
    );
    // positive control: an operator flag can turn it off
    let v = view(&p, &[], &["--no-sandbox"]);
    assert_eq!(v["mode"], "off", "{v}");
}
