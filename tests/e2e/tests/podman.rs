//! odek on Podman (SPEC §6.2.3): Podman's Docker-compatible API service,
//! started by the test on its own socket in namespaces of its own
//! ([`Podman`]), with the Compose fixture brought up by `podman-compose`
//! and odek pointed at it with `DOCKER_HOST=unix://…/podman.sock`.
//!
//! odek runs as root here, as Podman's service does (rootful Podman; the
//! service's network namespace needs root).

use std::process::Output;
use std::time::Instant;

use odek_e2e::podman::Podman;
use odek_e2e::{
    run_timeout, stderr, stdout, Project, BASE_IMAGE, IMAGE_PREFIX, ODEK_TIMEOUT, PIDS_MAX_CMD,
};

/// The podman-compose project of the fixture.
const PROJECT: &str = "odekpod";

fn image(name: &str) -> String {
    format!("{IMAGE_PREFIX}/{name}:1")
}

/// `odek <args>` of project `p` against `pm`, stdin closed.
fn odek(pm: &Podman, p: &Project, args: &[&str]) -> Output {
    let mut c = p.odek(args);
    c.env("DOCKER_HOST", pm.host())
        .env_remove("DOCKER_CONTEXT")
        .env_remove("DOCKER_TLS_VERIFY")
        .env_remove("DOCKER_CERT_PATH")
        .stdin(std::process::Stdio::null());
    run_timeout(&mut c, ODEK_TIMEOUT)
}

fn odek_ok(pm: &Podman, p: &Project, args: &[&str]) -> Output {
    let out = odek(pm, p, args);
    assert!(
        out.status.success(),
        "odek {args:?} failed ({:?}):\n{}\n{}\n{}",
        out.status.code(),
        stderr(&out),
        stdout(&out),
        pm.log()
    );
    out
}

/// No odek sandbox, egress proxy or link network is left on the service.
fn assert_nothing_left(pm: &Podman, why: &str) {
    let left = pm.podman(&["ps", "-aq", "--filter", "label=dev.odek.sandbox"]);
    assert_eq!(left, "", "{why}: an odek container was left");
    let links = pm.podman(&["network", "ls", "-q", "--filter", "label=dev.odek.link"]);
    assert_eq!(links, "", "{why}: a link network was left");
}

/// `odek run <args> -- <marker>`: refused (125) naming `needle`, the marker
/// not made on the host, nothing left on the service; stderr.
fn refused(pm: &Podman, p: &Project, args: &[&str], needle: &str) -> String {
    let mut argv = vec!["run"];
    argv.extend_from_slice(args);
    argv.push("--");
    let marker = p.marker_argv();
    argv.extend(marker.iter().map(String::as_str));
    let out = odek(pm, p, &argv);
    let err = stderr(&out);
    assert_eq!(
        out.status.code(),
        Some(125),
        "{args:?}: expected a refusal (125):\n{err}\n{}",
        stdout(&out)
    );
    assert!(err.contains(needle), "{args:?}: {needle:?} not in:\n{err}");
    assert!(
        !p.marker().exists(),
        "{args:?}: the command ran on the host:\n{err}"
    );
    assert!(!err.contains("NO SANDBOX"), "{args:?}: a fallback:\n{err}");
    assert_nothing_left(pm, &format!("{args:?}"));
    err
}

/// IPv4 `a.b.c.d/len` → (network, mask).
fn v4_net(s: &str) -> Option<(u32, u32)> {
    let (a, len) = s.split_once('/')?;
    let a: std::net::Ipv4Addr = a.parse().ok()?;
    let len: u32 = len.parse().ok()?;
    let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
    Some((u32::from(a) & mask, mask))
}

/// Every route of `ip route` (the sandbox's) stays inside `subnets`: a
/// destination within one of them, a gateway (`via`) within one of them.
fn routes_stay_inside(ip_route: &str, subnets: &[String]) -> Result<(), String> {
    let nets: Vec<(u32, u32)> = subnets.iter().filter_map(|s| v4_net(s)).collect();
    let inside = |addr: &str| {
        let a: Option<std::net::Ipv4Addr> = addr.parse().ok();
        a.is_some_and(|a| nets.iter().any(|(n, m)| u32::from(a) & m == *n))
    };
    for line in ip_route.lines().filter(|l| !l.trim().is_empty()) {
        let mut w = line.split_whitespace();
        let dest = w.next().unwrap_or_default();
        if dest == "default" {
            let via = line.split_whitespace().skip_while(|x| *x != "via").nth(1);
            if !via.is_some_and(inside) {
                return Err(format!(
                    "a default route leaves the attached subnets: {line}"
                ));
            }
            continue;
        }
        let ok = v4_net(dest)
            .is_some_and(|(n, m)| nets.iter().any(|(sn, sm)| m >= *sm && n & sm == *sn));
        if !ok {
            return Err(format!("a route outside the attached subnets: {line}"));
        }
    }
    Ok(())
}

/// odek on Podman: the fixture brought up with podman-compose (its networks
/// labelled `com.docker.compose.project` only, `backend` internal). What
/// holds: a sandbox (`sandbox_network` none) has the pids limit, an init as
/// PID 1 (Podman's catatonit, mounted as `podman-init`), `/tmp`
/// `nosuid,noexec`, odek's seccomp profile on (given to Podman as a file)
/// and no capability, no route at all; the startup line names Podman; the
/// container goes with its owner (odek killed). What Podman lacks: the
/// project's networks cannot be attached (no `inhibit_ipv4`, no
/// `enable_icc` on its bridges) — refused naming both. Then every refusal
/// of SPEC §6.3 with exit 125, nothing run on the host, no container left.
#[test]
fn on_podman_what_holds_holds_and_what_it_lacks_is_refused() {
    let started = Instant::now();
    let pm = Podman::start();
    pm.load_images(&[BASE_IMAGE, &image("redis"), &image("postgres")]);
    pm.compose_up(PROJECT);
    // The premise: podman-compose labels its networks with the project but
    // not with com.docker.compose.network, and backend is internal.
    let labels = pm.podman(&[
        "network",
        "inspect",
        "-f",
        "{{index .Labels \"com.docker.compose.project\"}} {{index .Labels \"com.docker.compose.network\"}} {{.Internal}}",
        &format!("{PROJECT}_backend"),
        &format!("{PROJECT}_default"),
    ]);
    assert_eq!(
        labels,
        format!("{PROJECT}  true\n{PROJECT}  false"),
        "podman-compose's networks"
    );
    eprintln!("podman up: {:.1} s", started.elapsed().as_secs_f64());

    let p = Project::for_second_daemon();
    let script = format!(
        "{PIDS_MAX_CMD}; echo ---; cat /proc/1/comm; echo ---; grep ' /tmp ' /proc/mounts; \
         echo ---; grep -E '^(Seccomp|CapBnd):' /proc/self/status; echo ---; ip route"
    );
    let out = odek_ok(
        &pm,
        &p,
        &[
            "run",
            "--sandbox-pids-limit",
            "77",
            "--sandbox-image",
            BASE_IMAGE,
            "--",
            "sh",
            "-c",
            &script,
        ],
    );
    let o = stdout(&out);
    let e = stderr(&out);
    let parts: Vec<&str> = o.split("---\n").collect();
    assert_eq!(parts.len(), 5, "{o}\n{e}");
    assert_eq!(parts[0].trim(), "77", "pids limit:\n{o}");
    assert_eq!(parts[1].trim(), "podman-init", "PID 1:\n{o}");
    let tmp = parts[2].split_whitespace().nth(3).unwrap_or_default();
    assert!(
        parts[2].starts_with("tmpfs ") && tmp.contains("nosuid") && tmp.contains("noexec"),
        "/tmp: {}",
        parts[2]
    );
    assert!(
        parts[3].contains("Seccomp:\t2") && parts[3].contains("CapBnd:\t0000000000000000"),
        "seccomp and capabilities:\n{}",
        parts[3]
    );
    // No network at all: every route (there are none) stays inside the
    // attached subnets (there are none).
    if let Err(why) = routes_stay_inside(parts[4], &[]) {
        panic!("{why}");
    }
    let line = odek_e2e::startup_line(&out).expect("startup line");
    assert!(line.contains("[Podman "), "the engine is not named: {line}");
    assert!(line.contains("network=none"), "{line}");
    assert_nothing_left(&pm, "after run");

    // The owner killed: the engine removes its sandbox.
    let mut c = p.odek(&["run", "--sandbox-image", BASE_IMAGE, "--", "sleep", "60"]);
    c.env("DOCKER_HOST", pm.host())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut owner = c.spawn().expect("odek run");
    let up = odek_e2e::wait_until(std::time::Duration::from_secs(30), || {
        !pm.podman(&["ps", "-q", "--filter", "label=dev.odek.sandbox"])
            .is_empty()
    });
    assert!(up, "the sandbox did not start");
    owner.kill().expect("kill odek");
    let _ = owner.wait();
    let gone = odek_e2e::wait_until(std::time::Duration::from_secs(30), || {
        pm.podman(&["ps", "-aq", "--filter", "label=dev.odek.sandbox"])
            .is_empty()
    });
    assert!(gone, "the sandbox outlived its owner");

    // What Podman lacks: the project's networks are not attached.
    let err = refused(
        &pm,
        &p,
        &["--sandbox-compose", PROJECT, "--sandbox-image", BASE_IMAGE],
        "which is Podman",
    );
    assert!(
        err.contains("inhibit_ipv4") && err.contains("enable_icc"),
        "{err}"
    );
    let backend = format!("{PROJECT}_backend");
    for args in [
        ["--sandbox-networks", backend.as_str()],
        ["--sandbox-egress", "example.org"],
    ] {
        let mut a: Vec<&str> = args.to_vec();
        a.extend(["--sandbox-image", BASE_IMAGE]);
        refused(&pm, &p, &a, "which is Podman");
    }
    // Nor is Docker's default bridge there.
    refused(
        &pm,
        &p,
        &["--sandbox-network", "bridge", "--sandbox-image", BASE_IMAGE],
        "no default bridge",
    );

    // SPEC §6.3 refusals with a podman-compose project.
    let img = ["--sandbox-image", BASE_IMAGE];
    let with = |extra: &[&'static str]| -> Vec<&str> {
        let mut v: Vec<&str> = extra.to_vec();
        v.extend_from_slice(&img);
        v
    };
    let err = refused(
        &pm,
        &p,
        &with(&["--sandbox-compose", "nosuch"]),
        "is not running",
    );
    assert!(
        err.contains(&format!("running projects: {PROJECT}")),
        "{err}"
    );
    refused(
        &pm,
        &p,
        &with(&["--sandbox-compose", "no such"]),
        "Compose project name \"no such\" is not valid",
    );
    // A prefix of the project's name is not the project.
    refused(
        &pm,
        &p,
        &with(&["--sandbox-compose", "odekpo"]),
        "is not running",
    );
    refused(
        &pm,
        &p,
        &with(&["--sandbox-compose", PROJECT, "--no-sandbox"]),
        "--sandbox-compose",
    );
    refused(
        &pm,
        &p,
        &[
            "--sandbox-compose",
            PROJECT,
            "--sandbox-image",
            "odek-e2e-absent/none:1",
        ],
        // Refused for the networks before the image is looked for.
        "which is Podman",
    );
    refused(
        &pm,
        &p,
        // `--sandbox`: fatal, not the fallback (the pull cannot leave the
        // service's network namespace).
        &["--sandbox", "--sandbox-image", "odek-e2e-absent/none:1"],
        "odek-e2e-absent/none:1",
    );
    refused(
        &pm,
        &p,
        &with(&["--sandbox-networks", "nosuchnet"]),
        "nosuchnet",
    );
    // More than 8: the project's two and seven more.
    let many: Vec<String> = (0..7).map(|i| format!("odek-e2e-many{i}")).collect();
    for n in &many {
        pm.podman(&["network", "create", "--label", "dev.odek.test=true", n]);
    }
    let list = many.join(",");
    refused(
        &pm,
        &p,
        &[
            "--sandbox-compose",
            PROJECT,
            "--sandbox-networks",
            &list,
            "--sandbox-image",
            BASE_IMAGE,
        ],
        "at most 8",
    );
    for n in &many {
        pm.podman(&["network", "rm", n]);
    }
    // The service unreachable: fatal, never the host.
    let marker = p.marker_argv();
    let mut argv = vec![
        "run",
        "--sandbox-compose",
        PROJECT,
        "--sandbox-image",
        BASE_IMAGE,
        "--",
    ];
    argv.extend(marker.iter().map(String::as_str));
    let mut c = p.odek(&argv);
    c.env(
        "DOCKER_HOST",
        format!("unix://{}/absent.sock", pm.dir().display()),
    )
    .stdin(std::process::Stdio::null());
    let out = run_timeout(&mut c, ODEK_TIMEOUT);
    assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
    assert!(!p.marker().exists(), "ran on the host: {}", stderr(&out));
    assert!(!stderr(&out).contains("NO SANDBOX"), "{}", stderr(&out));
    assert_nothing_left(&pm, "service unreachable");
    eprintln!("podman scenario: {:.1} s", started.elapsed().as_secs_f64());
}
