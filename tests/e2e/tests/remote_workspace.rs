//! The workspace on an engine on another machine (SPEC §6.1 "workspace"):
//! a bind mount there would name that machine's path, so it is refused
//! before anything is created; `--sandbox-workspace copy` uploads the
//! working directory at launch and copies it back at `down`.
//!
//! "Another machine" without one: a second `dockerd` ([`SecondDaemon`]) in
//! a network namespace of its own, whose `lo` also has `192.0.2.1`
//! (TEST-NET-1, not loopback to odek's rule), serving verified TLS there
//! with a server certificate for that IP; odek runs in that namespace
//! (`nsenter --net`) with `DOCKER_HOST=tcp://192.0.2.1:2376`. The
//! namespace has no route out: nothing leaves the machine. Root only, as
//! `remote_tls`: the second daemon needs namespaces of its own.

use std::process::Output;

use odek_e2e::second_daemon::{DaemonOptions, SecondDaemon};
use odek_e2e::tls_certs::TlsCerts;
use odek_e2e::{run_timeout, stderr, stdout, Project, BUSYBOX_IMAGE, ODEK_TIMEOUT};

const ADDR: &str = "192.0.2.1";
const PORT: u16 = 2376;

/// `odek <args>` of project `p` in `dd`'s network namespace, over TLS to
/// `ADDR` with the client material in `certs`.
fn odek_in(p: &Project, dd: &SecondDaemon, certs: &std::path::Path, args: &[&str]) -> Output {
    let mut c = p.odek(args);
    c.env_remove("DOCKER_CONTEXT")
        .env_remove("DOCKER_TLS")
        .env_remove("DOCKER_CONFIG")
        .env("DOCKER_HOST", format!("tcp://{ADDR}:{PORT}"))
        .env("DOCKER_TLS_VERIFY", "1")
        .env("DOCKER_CERT_PATH", certs);
    run_timeout(&mut dd.in_netns(&c), ODEK_TIMEOUT)
}

#[test]
fn a_remote_engine_refuses_a_bind_mount_and_a_copied_workspace_round_trips_a_file() {
    let certs = TlsCerts::make_for(ADDR);
    let dd = SecondDaemon::start(DaemonOptions {
        extra_args: certs.daemon_args_on(ADDR, PORT),
        extra_address: Some(format!("{ADDR}/32")),
        ..DaemonOptions::default()
    });
    dd.load_image(BUSYBOX_IMAGE);
    let p = Project::new().exec_api();
    let client = certs.client_dir("client", "ca.pem");
    let containers = || dd.docker(&["ps", "-aq"]);
    let up_copy = || {
        odek_in(
            &p,
            &dd,
            &client,
            &[
                "sandbox",
                "up",
                "--sandbox-image",
                BUSYBOX_IMAGE,
                "--sandbox-workspace",
                "copy",
            ],
        )
    };

    // The default (bind): refused, exit 125, nothing run, nothing left.
    let out = odek_in(
        &p,
        &dd,
        &client,
        &[
            "run",
            "--sandbox-image",
            BUSYBOX_IMAGE,
            "--",
            "sh",
            "-c",
            &p.marker_cmd(),
        ],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(125), "{err}");
    assert!(
        err.contains(&format!(
            "the engine at tcp://{ADDR}:{PORT} (tls, verified; from DOCKER_HOST) runs on another machine"
        )) && err.contains("run odek on the engine's machine")
            && err.contains("--sandbox-workspace copy"),
        "{err}"
    );
    assert!(
        !err.contains("NO SANDBOX"),
        "no fallback to the host: {err}"
    );
    assert!(!p.marker().exists(), "nothing ran on the host");
    assert_eq!(containers(), "", "no container left");

    // sandbox_volumes name host paths: refused there even with a copied
    // workspace, exit 125, nothing run, nothing left.
    std::fs::create_dir_all(p.path().join("cache")).expect("mkdir");
    std::fs::write(
        p.home.path().join("config.json"),
        r#"{"sandbox_volumes": ["./cache:/cache:ro"]}"#,
    )
    .expect("user config");
    let out = odek_in(
        &p,
        &dd,
        &client,
        &[
            "run",
            "--sandbox-image",
            BUSYBOX_IMAGE,
            "--sandbox-workspace",
            "copy",
            "--",
            "sh",
            "-c",
            &p.marker_cmd(),
        ],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(125), "{err}");
    assert!(
        err.contains("sandbox_volumes mounts \"./cache:/cache:ro\"")
            && err.contains("runs on another machine"),
        "{err}"
    );
    assert!(!p.marker().exists(), "nothing ran on the host");
    assert_eq!(containers(), "", "no container left");
    std::fs::remove_file(p.home.path().join("config.json")).expect("rm user config");

    // Copy: a file written on the host before launch is read in the
    // sandbox, changed there, and comes back at down.
    std::fs::write(p.path().join("hello.txt"), "from the host\n").expect("write");
    let up = up_copy();
    assert!(
        up.status.success(),
        "up with a copied workspace:\n{}\nlog:\n{}",
        stderr(&up),
        dd.log()
    );
    let name = stdout(&up).trim().to_string();
    let binds = dd.docker(&["inspect", "-f", "{{json .HostConfig.Binds}}", &name]);
    assert!(
        !binds.contains(&p.path().display().to_string()),
        "the working directory is not bind-mounted: {binds}"
    );
    let read = odek_in(
        &p,
        &dd,
        &client,
        &[
            "sandbox",
            "exec",
            &name,
            "--",
            "cat",
            "/workspace/hello.txt",
        ],
    );
    assert_eq!(stdout(&read), "from the host\n", "{}", stderr(&read));
    let write = odek_in(
        &p,
        &dd,
        &client,
        &[
            "sandbox",
            "exec",
            &name,
            "--",
            "sh",
            "-c",
            "echo changed in the sandbox > /workspace/hello.txt",
        ],
    );
    assert!(write.status.success(), "{}", stderr(&write));
    assert_eq!(
        std::fs::read_to_string(p.path().join("hello.txt")).expect("read"),
        "from the host\n",
        "the host's file is the host's until copied back"
    );
    let down = odek_in(&p, &dd, &client, &["sandbox", "down", &name]);
    assert!(down.status.success(), "down: {}", stderr(&down));
    assert!(
        stderr(&down)
            .contains("copied back 1 changed file(s) into the working directory: hello.txt"),
        "{}",
        stderr(&down)
    );
    assert_eq!(
        std::fs::read_to_string(p.path().join("hello.txt")).expect("read"),
        "changed in the sandbox\n"
    );
    assert_eq!(containers(), "", "down removed the sandbox");

    // A copy-back that fails keeps the sandbox and names `--discard`,
    // which removes it without copying back.
    let up = up_copy();
    assert!(up.status.success(), "{}", stderr(&up));
    let name = stdout(&up).trim().to_string();
    let gone = odek_in(
        &p,
        &dd,
        &client,
        &["sandbox", "exec", &name, "--", "rm", "-rf", "/workspace"],
    );
    assert!(gone.status.success(), "{}", stderr(&gone));
    let down = odek_in(&p, &dd, &client, &["sandbox", "down", &name]);
    let err = stderr(&down);
    assert!(!down.status.success(), "{err}");
    assert!(
        err.contains("has no /workspace to copy back")
            && err.contains(&format!("odek sandbox down --discard {name}")),
        "{err}"
    );
    assert_ne!(containers(), "", "the sandbox is kept");
    let down = odek_in(&p, &dd, &client, &["sandbox", "down", "--discard", &name]);
    assert!(down.status.success(), "{}", stderr(&down));
    assert_eq!(containers(), "", "--discard removed it");
}
