//! The record of each sandbox (docs/SECURITY.md, "The record of what
//! ran"): `odek run` and `odek sandbox exec` appear in `odek sandbox log`,
//! with the names of the env variables given with `-e`/`--env` and never
//! their values; the record outlives `odek sandbox down`; `--clear` removes
//! it; `ODEK_SANDBOX_LOG_RETENTION=0` removes it when the sandbox ends.

use std::os::unix::fs::PermissionsExt;

use odek_e2e::{stderr, stdout, Project, BASE_IMAGE};

/// The names of the sandboxes with a record under the project's
/// `$ODEK_HOME`, as `odek sandbox log` (no NAME) prints them.
fn recorded(p: &Project) -> Vec<String> {
    let out = p.odek_ok(&["sandbox", "log", "--json"]);
    let listed: Vec<serde_json::Value> =
        serde_json::from_str(&stdout(&out)).expect("a JSON array of sandboxes");
    listed
        .iter()
        .map(|l| {
            assert!(l["calls"].as_u64().is_some(), "{l}");
            l["name"].as_str().expect("name").to_string()
        })
        .collect()
}

/// `odek sandbox log NAME --json` as parsed records, with the raw text.
fn records(p: &Project, name: &str) -> (Vec<serde_json::Value>, String) {
    let out = p.odek_ok(&["sandbox", "log", name, "--json"]);
    let text = stdout(&out);
    (
        serde_json::from_str(&text).expect("a JSON array of records"),
        text,
    )
}

#[test]
fn run_and_sandbox_exec_are_recorded_without_env_values_and_outlive_the_sandbox() {
    let p = Project::new();
    // `odek run` with a value given by -e: the command sees it (the
    // control), the record keeps only its name.
    let run = p.run_odek(&[
        "run",
        "--sandbox-image",
        BASE_IMAGE,
        "-e",
        "AUDIT_TOKEN=tok-run-5e1f",
        "--",
        "sh",
        "-c",
        "printenv AUDIT_TOKEN; exit 3",
    ]);
    assert_eq!(run.status.code(), Some(3), "{}", stderr(&run));
    assert_eq!(
        stdout(&run).trim(),
        "tok-run-5e1f",
        "the value reached the command"
    );
    let names = recorded(&p);
    assert_eq!(names.len(), 1, "one sandbox recorded: {names:?}");
    let ran = names[0].clone();
    let (recs, text) = records(&p, &ran);
    assert!(!text.contains("tok-run-5e1f"), "{text}");
    assert_eq!(recs.len(), 1, "{text}");
    assert_eq!(recs[0]["tool"], "run");
    assert_eq!(recs[0]["surface"], "cli");
    assert_eq!(
        recs[0]["command"],
        serde_json::json!(["sh", "-c", "printenv AUDIT_TOKEN; exit 3"])
    );
    assert_eq!(recs[0]["env_keys"], serde_json::json!(["AUDIT_TOKEN"]));
    assert_eq!(recs[0]["exit_code"], 3);
    assert!(recs[0]["duration_ms"].is_u64(), "{text}");
    assert!(recs[0]["time"].as_str().is_some_and(|t| t.ends_with('Z')));

    // A detached sandbox and `odek sandbox exec --env`.
    let up = p.odek_ok(&["sandbox", "up", "--sandbox-image", BASE_IMAGE]);
    let name = stdout(&up).trim().to_string();
    let exec = p.odek_ok(&[
        "sandbox",
        "exec",
        "--env",
        "AUDIT_TOKEN=tok-exec-77c2",
        &name,
        "--",
        "printenv",
        "AUDIT_TOKEN",
    ]);
    assert_eq!(
        stdout(&exec).trim(),
        "tok-exec-77c2",
        "the value reached the command"
    );
    let (all, text) = records(&p, &name);
    assert!(!text.contains("tok-exec-77c2"), "{text}");
    // `odek sandbox up` is recorded (as MCP's sandbox_up), then the exec.
    assert_eq!(all.len(), 2, "{text}");
    assert_eq!(all[0]["tool"], "sandbox_up", "{text}");
    assert_eq!(all[0]["surface"], "cli", "{text}");
    assert_eq!(all[0]["outcome"], "launched", "{text}");
    let recs = all[1..].to_vec();
    assert_eq!(recs[0]["tool"], "exec");
    assert_eq!(
        recs[0]["command"],
        serde_json::json!(["printenv", "AUDIT_TOKEN"])
    );
    assert_eq!(recs[0]["env_keys"], serde_json::json!(["AUDIT_TOKEN"]));
    assert_eq!(recs[0]["exit_code"], 0);
    // The file itself: private, and without the values either.
    let dir = p.home.path().join("sandboxes").join(&name);
    let file = dir.join("log.jsonl");
    let mode =
        |f: &std::path::Path| std::fs::metadata(f).expect("stat").permissions().mode() & 0o777;
    assert_eq!(mode(&file), 0o600);
    assert_eq!(mode(&dir), 0o700);
    let raw = std::fs::read_to_string(&file).expect("read the log");
    assert!(
        !raw.contains("tok-exec-77c2") && raw.contains("printenv"),
        "{raw}"
    );

    // An ID prefix names the sandbox while it exists.
    let id = odek_e2e::docker(&["inspect", "--format", "{{.Id}}", &name]);
    let by_id = p.odek_ok(&["sandbox", "log", &id[..12]]);
    assert!(
        stdout(&by_id).contains("printenv AUDIT_TOKEN")
            && stdout(&by_id).contains("(env AUDIT_TOKEN)"),
        "{}",
        stdout(&by_id)
    );
    assert!(
        stderr(&by_id).contains("command lines are kept as they were run"),
        "{}",
        stderr(&by_id)
    );

    // Gone: the name still works.
    p.odek_ok(&["sandbox", "down", &name]);
    let (after, text) = records(&p, &name);
    assert_eq!(after[..2], all[..], "the record outlives the sandbox");
    // `odek sandbox down` is recorded too, last.
    assert_eq!(after.len(), 3, "{text}");
    assert_eq!(after[2]["tool"], "sandbox_down", "{text}");
    assert_eq!(after[2]["outcome"], "removed", "{text}");
    let mut both = recorded(&p);
    both.sort();
    let mut want = vec![ran.clone(), name.clone()];
    want.sort();
    assert_eq!(both, want);

    // --clear NAME removes that log; the other stays.
    let cleared = p.odek_ok(&["sandbox", "log", "--clear", &name]);
    assert_eq!(stdout(&cleared).trim(), name);
    let gone = p.run_odek(&["sandbox", "log", &name]);
    assert_eq!(gone.status.code(), Some(1));
    assert!(
        stderr(&gone).contains("no record of sandbox"),
        "{}",
        stderr(&gone)
    );
    assert_eq!(recorded(&p), std::slice::from_ref(&ran));
    // --clear alone removes every log.
    let cleared = p.odek_ok(&["sandbox", "log", "--clear"]);
    assert_eq!(stdout(&cleared).trim(), ran);
    assert!(recorded(&p).is_empty());

    // A retention of 0 days: removed as the sandbox ends.
    let run = p.run_odek_env(
        &[("ODEK_SANDBOX_LOG_RETENTION", "0")],
        &["run", "--sandbox-image", BASE_IMAGE, "--", "true"],
    );
    assert!(run.status.success(), "{}", stderr(&run));
    // Looked at before any `odek sandbox log`, which would prune it too.
    let left: Vec<_> = std::fs::read_dir(p.home.path().join("sandboxes"))
        .expect("the sandboxes directory")
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "removed at the sandbox's end: {left:?}");
    assert!(p.leftovers().is_empty());
}
