//! A Docker daemon reached over TLS (SPEC §6.2.1), as the Docker CLI
//! reaches it: `DOCKER_HOST=tcp://127.0.0.1:2376`, `DOCKER_TLS_VERIFY=1`,
//! `DOCKER_CERT_PATH` with `ca.pem`, `cert.pem`, `key.pem`.
//!
//! The daemon is a second `dockerd` ([`SecondDaemon`]) in a network
//! namespace of its own, listening with `--tlsverify` on its namespace's
//! `127.0.0.1:2376`; odek runs in that namespace (`nsenter --net`), with
//! the host's files. The certificates are made by the test with `openssl`
//! ([`TlsCerts`]); the image is copied in with `docker save`/`load`.
//! Nothing is pulled and no traffic leaves the namespace.

use std::process::Output;

use odek_e2e::second_daemon::{DaemonOptions, SecondDaemon};
use odek_e2e::tls_certs::TlsCerts;
use odek_e2e::{run_timeout, startup_line, stderr, stdout, Project, BUSYBOX_IMAGE, ODEK_TIMEOUT};

const PORT: u16 = 2376;

/// `odek <args>` of project `p` in `dd`'s network namespace, with `env`.
fn odek_in(p: &Project, dd: &SecondDaemon, env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut c = p.odek(args);
    c.env_remove("DOCKER_CONTEXT")
        .env_remove("DOCKER_TLS")
        .env_remove("DOCKER_CONFIG");
    for (k, v) in env {
        c.env(k, v);
    }
    run_timeout(&mut dd.in_netns(&c), ODEK_TIMEOUT)
}

fn tls_env(dir: &std::path::Path) -> Vec<(&'static str, String)> {
    vec![
        ("DOCKER_HOST", format!("tcp://127.0.0.1:{PORT}")),
        ("DOCKER_TLS_VERIFY", "1".into()),
        ("DOCKER_CERT_PATH", dir.display().to_string()),
    ]
}

fn pairs<'a>(v: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    v.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

/// The daemon's containers (all states).
fn containers(dd: &SecondDaemon) -> String {
    dd.docker(&["ps", "-aq"])
}

/// Over verified TLS a sandbox comes up, runs a command and goes; the
/// startup line and `config view` name the endpoint and `tls, verified`.
/// With another CA in `ca.pem`, the daemon's certificate is refused naming
/// the fix, and with no `cert.pem` odek refuses before it connects, naming
/// the file and the fix; neither leaves a container or runs anything on
/// the host.
#[test]
fn a_daemon_over_verified_tls_is_used_and_a_wrong_ca_or_missing_client_cert_refused() {
    let certs = TlsCerts::make();
    let dd = SecondDaemon::start(DaemonOptions {
        extra_args: certs.daemon_args(PORT),
        ..DaemonOptions::default()
    });
    dd.load_image(BUSYBOX_IMAGE);
    let p = Project::new().exec_api();
    let good = certs.client_dir("good", "ca.pem");
    let env = tls_env(&good);

    // Positive: a sandbox over TLS.
    let up = odek_in(
        &p,
        &dd,
        &pairs(&env),
        &["sandbox", "up", "--sandbox-image", BUSYBOX_IMAGE],
    );
    assert!(
        up.status.success(),
        "up over TLS failed:\n{}\nlog:\n{}",
        stderr(&up),
        dd.log()
    );
    let name = stdout(&up).trim().to_string();
    let line = startup_line(&up).expect("startup line");
    assert!(
        line.contains(&format!(
            " endpoint=tcp://127.0.0.1:{PORT} (tls, verified) runtime="
        )),
        "{line}"
    );
    assert!(
        !stderr(&up).contains("PLAIN TCP"),
        "no plain-TCP warning over TLS: {}",
        stderr(&up)
    );
    let id = dd.docker(&["ps", "-q", "--filter", &format!("name={name}")]);
    assert!(!id.is_empty(), "the sandbox runs on the TLS daemon");
    let out = odek_in(
        &p,
        &dd,
        &pairs(&env),
        &["sandbox", "exec", &name, "--", "echo", "over-tls"],
    );
    assert!(
        out.status.success() && stdout(&out).trim() == "over-tls",
        "exec over TLS: {}\n{}",
        stdout(&out),
        stderr(&out)
    );
    let view = odek_in(&p, &dd, &pairs(&env), &["config", "view"]);
    assert!(
        stdout(&view).contains(&format!(
            "tcp://127.0.0.1:{PORT} (tls, verified; from DOCKER_HOST)"
        )),
        "config view:\n{}\n{}",
        stdout(&view),
        stderr(&view)
    );
    let down = odek_in(&p, &dd, &pairs(&env), &["sandbox", "down", &name]);
    assert!(down.status.success(), "down: {}", stderr(&down));
    assert_eq!(containers(&dd), "", "down removed the sandbox");

    // A wrong CA: the daemon's certificate is refused, naming the fix.
    let wrong = certs.client_dir("wrong-ca", "wrongca.pem");
    let out = odek_in(
        &p,
        &dd,
        &pairs(&tls_env(&wrong)),
        &["run", "--", "sh", "-c", &p.marker_cmd()],
    );
    let err = stderr(&out);
    assert!(!out.status.success(), "a wrong CA must refuse: {err}");
    assert!(
        err.contains("the daemon's certificate was refused")
            && err.contains("put the CA that signed the daemon's certificate there")
            && err.contains(&wrong.join("ca.pem").display().to_string()),
        "{err}"
    );
    assert!(
        !err.contains("NO SANDBOX"),
        "no fallback to the host: {err}"
    );
    assert!(!p.marker().exists(), "nothing ran on the host");
    assert_eq!(containers(&dd), "", "no container left");

    // A missing client certificate: refused before connecting.
    let nocert = certs.client_dir("no-cert", "ca.pem");
    std::fs::remove_file(nocert.join("cert.pem")).expect("rm cert.pem");
    let out = odek_in(
        &p,
        &dd,
        &pairs(&tls_env(&nocert)),
        &["run", "--", "sh", "-c", &p.marker_cmd()],
    );
    let err = stderr(&out);
    assert!(!out.status.success(), "a missing cert must refuse: {err}");
    assert!(
        err.contains(&format!(
            "{} does not exist",
            nocert.join("cert.pem").display()
        )) && err.contains("as ca.pem, cert.pem and key.pem"),
        "{err}"
    );
    assert!(!p.marker().exists(), "nothing ran on the host");
    assert_eq!(containers(&dd), "", "no container left");

    // A client certificate the daemon's CA did not sign: the daemon
    // refuses it, and odek says so.
    let foreign = certs.client_dir("foreign-client", "ca.pem");
    std::fs::copy(certs.file("wrongca.pem"), foreign.join("cert.pem")).expect("cert");
    std::fs::copy(certs.file("wrongca-key.pem"), foreign.join("key.pem")).expect("key");
    let out = odek_in(
        &p,
        &dd,
        &pairs(&tls_env(&foreign)),
        &["run", "--", "sh", "-c", &p.marker_cmd()],
    );
    let err = stderr(&out);
    assert!(
        !out.status.success(),
        "a foreign client cert must refuse: {err}"
    );
    assert!(
        err.contains("the daemon refused odek's client certificate"),
        "{err}"
    );
    assert!(!p.marker().exists(), "nothing ran on the host");
    assert_eq!(containers(&dd), "", "no container left");
}

/// Set in the child that [`the_c_abi_reaches_a_daemon_over_verified_tls`]
/// runs in the daemon's network namespace: the directory of the client's
/// certificates.
const ABI_INNER: &str = "ODEK_E2E_TLS_ABI_CERTS";

/// The C ABI's `docker_host` with `docker_cert_path` (SPEC §6.2.1): a
/// program embedding libodek reaches the TLS daemon, launches a sandbox
/// there, runs a command in it and removes it. The calls run in a child of
/// this test inside the daemon's network namespace (this test binary again,
/// `nsenter --net`), since libodek's own threads make the connections; the
/// parent checks the child passed and the daemon holds no container after.
#[test]
fn the_c_abi_reaches_a_daemon_over_verified_tls() {
    if let Some(dir) = std::env::var_os(ABI_INNER) {
        abi_inner(std::path::Path::new(&dir));
        return;
    }
    let certs = TlsCerts::make();
    let dd = SecondDaemon::start(DaemonOptions {
        extra_args: certs.daemon_args(PORT),
        ..DaemonOptions::default()
    });
    dd.load_image(BUSYBOX_IMAGE);
    let good = certs.client_dir("good", "ca.pem");
    let mut me = std::process::Command::new(std::env::current_exe().expect("test binary"));
    me.args([
        "--exact",
        "the_c_abi_reaches_a_daemon_over_verified_tls",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(ABI_INNER, &good)
    .env_remove("DOCKER_HOST")
    .env_remove("DOCKER_CONTEXT");
    let out = run_timeout(&mut dd.in_netns(&me), ODEK_TIMEOUT);
    assert!(
        out.status.success() && stdout(&out).contains("abi-over-tls: ok"),
        "the C ABI over TLS failed:\n{}\n{}\nlog:\n{}",
        stdout(&out),
        stderr(&out),
        dd.log()
    );
    assert_eq!(containers(&dd), "", "the sandbox was removed");
}

/// The child's part: `odek_client_new` with `docker_host` and
/// `docker_cert_path`, then resolve, launch, exec and destroy.
#[allow(unsafe_code)]
fn abi_inner(certs: &std::path::Path) {
    use odek::*;
    use std::ffi::{c_char, CStr, CString};
    use std::ptr::null_mut;

    fn check(e: *mut odek_error_t, what: &str) {
        if e.is_null() {
            return;
        }
        // SAFETY: a live error object returned by odek; freed once.
        let msg = unsafe {
            let m = CStr::from_ptr(odek_error_message(e))
                .to_string_lossy()
                .into_owned();
            odek_error_free(e);
            m
        };
        panic!("{what}: {msg}");
    }
    fn take(s: *mut c_char) -> String {
        assert!(!s.is_null());
        // SAFETY: a string returned by odek; freed once.
        unsafe {
            let out = CStr::from_ptr(s).to_string_lossy().into_owned();
            odek_string_free(s);
            out
        }
    }
    let c = |s: &str| CString::new(s).expect("no NUL");
    let home = tempfile::tempdir().expect("home");
    let work = tempfile::tempdir().expect("work");
    let opts = c(&serde_json::json!({
        "docker_host": format!("tcp://127.0.0.1:{PORT}"),
        "docker_cert_path": certs,
    })
    .to_string());
    let req = c(&serde_json::json!({
        "workdir": work.path(),
        "settings": {"sandbox_image": BUSYBOX_IMAGE},
        "read_user_config": false,
        "env": {"HOME": home.path(), "ODEK_HOME": home.path().join(".odek"), "ODEK_SUPERVISOR": ""},
    })
    .to_string());
    let exec = c(r#"{"argv": ["echo", "abi-over-tls"]}"#);
    let null_json = c("null");
    // SAFETY: valid C strings and writable out-params; handles from odek,
    // each freed once.
    unsafe {
        let mut client = null_mut();
        check(odek_client_new(opts.as_ptr(), &mut client), "client");
        let mut plan = null_mut();
        check(odek_resolve(client, req.as_ptr(), &mut plan), "resolve");
        let plan = take(plan);
        assert!(
            plan.contains(&format!("tcp://127.0.0.1:{PORT} (tls, verified)")),
            "the plan names the TLS endpoint: {plan}"
        );
        let plan = c(&plan);
        let mut sandbox = null_mut();
        check(
            odek_launch(client, plan.as_ptr(), null_json.as_ptr(), &mut sandbox),
            "launch",
        );
        let mut result = null_mut();
        check(odek_exec(sandbox, exec.as_ptr(), &mut result), "exec");
        let result: serde_json::Value = serde_json::from_str(&take(result)).expect("exec result");
        assert_eq!(result["exit_code"], 0, "{result}");
        assert_eq!(result["stdout"], "abi-over-tls\n", "{result}");
        check(odek_sandbox_destroy(sandbox), "destroy");
        check(odek_client_free(client), "client free");
    }
    println!("abi-over-tls: ok");
}
