//! `--sandbox-runtime` against the real daemon (SPEC §6.1 "runtime"): a
//! runtime the engine has (`runc`, which every Docker registers) is sent as
//! `HostConfig.Runtime` and reported; one it has not is refused before
//! anything is created, naming the runtimes it has and daemon.json's
//! `runtimes`, with nothing run on the host and no container left.
//!
//! gVisor (`runsc`) is not registered with the developer's daemon, and these
//! tests never reconfigure or restart it: a daemon of the tests' own is
//! needed for that (docs/SANDBOXING.md, "The OCI runtime", says what is and
//! is not verified here).

use odek_e2e::{
    assert_refused, docker, startup_line, stderr, stdout, Project, BASE_IMAGE, PIDS_MAX_CMD,
};

/// Unix seconds now.
fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs()
}

/// IDs of the containers created for `p`'s working directory (a sandbox or
/// an image probe: both carry `dev.odek.workdir`) from `since` to now, as
/// the daemon's event log has them.
fn created_since(p: &Project, since: u64) -> Vec<String> {
    docker(&[
        "events",
        "--since",
        &since.to_string(),
        "--until",
        &(now() + 1).to_string(),
        "--filter",
        "type=container",
        "--filter",
        "event=create",
        "--filter",
        &format!("label=dev.odek.workdir={}", p.path().display()),
        "--format",
        "{{.Actor.ID}}",
    ])
    .lines()
    .map(str::to_string)
    .collect()
}

/// `odek sandbox up --sandbox-runtime <runtime>`, then the daemon's
/// `HostConfig.Runtime` of it, its described environment (text and JSON);
/// the sandbox is removed again.
fn up_and_inspect(p: &Project, runtime: &str) -> (String, String, serde_json::Value) {
    let up = p.odek_ok(&[
        "sandbox",
        "up",
        "--sandbox-runtime",
        runtime,
        "--sandbox-image",
        BASE_IMAGE,
    ]);
    let name = stdout(&up).trim().to_string();
    assert!(name.starts_with("odek-"), "{name:?}");
    let line = startup_line(&up).expect("startup line");
    let inspected = docker(&["inspect", "--format", "{{.HostConfig.Runtime}}", &name]);
    let described = stdout(&p.odek_ok(&["sandbox", "describe", &name]));
    let json = stdout(&p.odek_ok(&["sandbox", "describe", &name, "--json"]));
    p.odek_ok(&["sandbox", "down", &name]);
    assert!(line.contains(&format!(" runtime={runtime} ")), "{line}");
    (
        inspected.trim().to_string(),
        described,
        serde_json::from_str(&json).expect("JSON"),
    )
}

#[test]
fn runc_is_passed_as_host_config_runtime_and_reported() {
    let p = Project::new();
    // A one-shot run: the command runs, and the startup line names runc.
    let out = p.odek_ok(&[
        "run",
        "--sandbox-runtime",
        "runc",
        "--sandbox-image",
        BASE_IMAGE,
        "--",
        "sh",
        "-c",
        PIDS_MAX_CMD,
    ]);
    assert_eq!(stdout(&out).trim(), "4096", "the hardening still holds");
    let line = startup_line(&out).expect("startup line");
    assert!(line.contains(" runtime=runc supervisor="), "{line}");

    // A detached one, inspected by the daemon itself.
    let (runtime, described, json) = up_and_inspect(&p, "runc");
    assert_eq!(runtime, "runc");
    assert!(described.contains("- OCI runtime: `runc`."), "{described}");
    assert_eq!(json["runtime"], "runc", "{json}");

    // runc is also the daemon's default, which fills in HostConfig.Runtime
    // when create names none: containerd's name for it, which Docker
    // registers too and is no default, shows the value is passed through.
    let (runtime, described, json) = up_and_inspect(&p, "io.containerd.runc.v2");
    assert_eq!(runtime, "io.containerd.runc.v2");
    assert!(
        described.contains("- OCI runtime: `io.containerd.runc.v2`."),
        "{described}"
    );
    assert_eq!(json["runtime"], "io.containerd.runc.v2", "{json}");

    // The config view names it with its source.
    let view = stdout(&p.odek_ok(&[
        "config",
        "view",
        "--sandbox-runtime",
        "runc",
        "--sandbox-image",
        BASE_IMAGE,
    ]));
    assert!(
        view.lines().any(|l| l.starts_with("runtime ")
            && l.contains("runc")
            && l.contains("flag --sandbox-runtime")),
        "{view}"
    );
    assert!(p.leftovers().is_empty(), "{:?}", p.leftovers());
}

#[test]
fn an_unknown_runtime_is_refused_before_create_and_nothing_runs() {
    let p = Project::new();
    let since = now().saturating_sub(1);
    let mut argv = vec![
        "run",
        "--sandbox-runtime",
        "odek-no-such-runtime",
        "--sandbox-image",
        BASE_IMAGE,
        "--",
    ];
    let marker = p.marker_argv();
    argv.extend(marker.iter().map(String::as_str));
    let out = p.run_odek(&argv);
    assert_refused(
        &p,
        &out,
        "\"odek-no-such-runtime\" is not a runtime the engine",
    );
    let err = stderr(&out);
    for needle in [
        "flag --sandbox-runtime",
        "runc (default)",
        "nothing was created",
        "\"runtimes\" in the daemon's /etc/docker/daemon.json",
    ] {
        assert!(err.contains(needle), "{needle:?} not in:\n{err}");
    }
    // Before create: not even the image probe was made.
    assert_eq!(created_since(&p, since), Vec::<String>::new(), "{err}");

    // From the environment, and with `sandbox up`: the same refusal.
    let out = p.run_odek_env(
        &[("ODEK_SANDBOX_RUNTIME", "odek-no-such-runtime")],
        &["sandbox", "up", "--sandbox-image", BASE_IMAGE],
    );
    // (`sandbox up` refuses with status 1: it runs no command.)
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("env ODEK_SANDBOX_RUNTIME: sandbox_runtime \"odek-no-such-runtime\""),
        "{}",
        stderr(&out)
    );
    assert_eq!(stdout(&out), "", "no sandbox name");
    assert!(p.leftovers().is_empty(), "{:?}", p.leftovers());
    assert_eq!(created_since(&p, since), Vec::<String>::new());
}
