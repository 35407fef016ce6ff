//! Docker Swarm stacks (`--sandbox-stack`, SPEC §4.1, §4.4, §7.3, §9.1) on
//! a second daemon ([`SecondDaemon`]) put in swarm mode (`docker swarm
//! init --advertise-addr 127.0.0.1` on its own socket): the developer's own
//! engine is never put into swarm mode.
//!
//! The test images are copied in (`docker save`/`load`; nothing is pulled)
//! and stacks are deployed from Compose v3 files with `docker stack
//! deploy`: `app` (redis on `default` and `backend`, postgres on `backend`
//! only: the Compose fixture's shape), `inner` (redis on one internal
//! network: no route out) — their overlays `attachable: true` — and
//! `closed`, whose overlay is not attachable. Every service uses
//! `endpoint_mode: dnsrr`: this machine's kernel has no IPVS, so a
//! service's virtual IP would not answer. postgres starts with `chmod 755
//! /` first: on this daemon's `vfs` storage a container's root directory is
//! 0700, and postgres runs as its own user.
//!
//! odek runs as root here, as in runtime_runsc.rs and remote_tls.rs (a
//! second daemon needs root for its namespaces).
//!
//! A second node: another `dockerd` in a network namespace of its own,
//! joined as a worker over a veth pair between the two namespaces
//! ([`on_a_two_node_swarm_each_node_reaches_its_own_tasks`]).

use std::process::Output;

use expectrl::Expect;
use std::sync::Mutex;
use std::time::Duration;

use odek_e2e::remote::{assert_no_route_out, check_scenario, scenario_script, Reach};
use odek_e2e::second_daemon::{DaemonOptions, SecondDaemon};
use odek_e2e::{
    run_timeout, stderr, stdout, wait_until, Project, BASE_IMAGE, IMAGE_PREFIX, ODEK_TIMEOUT,
};

/// One swarm daemon at a time: each holds three image copies on `vfs`.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// A second daemon in swarm mode with the test images loaded; leaves the
/// swarm (removing its stacks' services) before the daemon is stopped.
struct Swarm {
    dd: SecondDaemon,
    files: tempfile::TempDir,
}

impl Drop for Swarm {
    fn drop(&mut self) {
        let _ = self.dd.docker_output(&["swarm", "leave", "--force"]);
    }
}

fn image(name: &str) -> String {
    format!("{IMAGE_PREFIX}/{name}:1")
}

/// The `app` stack: the Compose fixture's shape as a v3 stack file.
fn app_stack() -> String {
    format!(
        r#"version: "3.8"
services:
  redis:
    image: {redis}
    networks: [default, backend]
    deploy:
      endpoint_mode: dnsrr
  postgres:
    image: {postgres}
    command: ["sh", "-c", "chmod 755 / && exec odek-test-postgres"]
    networks: [backend]
    deploy:
      endpoint_mode: dnsrr
networks:
  default:
    attachable: true
  backend:
    attachable: true
    internal: true
"#,
        redis = image("redis"),
        postgres = image("postgres")
    )
}

/// The `inner` stack: redis on one internal overlay.
fn inner_stack() -> String {
    format!(
        r#"version: "3.8"
services:
  redis:
    image: {redis}
    networks: [backend]
    deploy:
      endpoint_mode: dnsrr
networks:
  backend:
    attachable: true
    internal: true
"#,
        redis = image("redis")
    )
}

/// The `closed` stack: its overlay is not attachable.
fn closed_stack() -> String {
    format!(
        r#"version: "3.8"
services:
  redis:
    image: {redis}
    networks: [shut]
    deploy:
      endpoint_mode: dnsrr
networks:
  shut: {{}}
"#,
        redis = image("redis")
    )
}

impl Swarm {
    fn start() -> Swarm {
        let dd = SecondDaemon::start(DaemonOptions::default());
        dd.docker(&["swarm", "init", "--advertise-addr", "127.0.0.1"]);
        for i in [BASE_IMAGE.to_string(), image("redis"), image("postgres")] {
            dd.load_image(&i);
        }
        Swarm {
            dd,
            files: tempfile::tempdir().expect("tempdir"),
        }
    }

    /// `docker stack deploy -c <file> <stack>`.
    fn deploy(&self, stack: &str, yml: &str) {
        let file = self.files.path().join(format!("{stack}.yml"));
        std::fs::write(&file, yml).expect("stack file");
        self.dd
            .docker(&["stack", "deploy", "-c", &file.display().to_string(), stack]);
    }

    /// Waits (up to 180 s) until stack `stack` has a running task of each
    /// of `services`, answering its own health check: redis `PING`,
    /// postgres `pg_isready`.
    fn wait_ready(&self, stack: &str, services: &[&str]) {
        let ok = wait_until(Duration::from_secs(180), || {
            services.iter().all(|svc| {
                let id = self.task(stack, svc);
                !id.is_empty() && {
                    let probe: &[&str] = match *svc {
                        "postgres" => &["pg_isready", "-h", "127.0.0.1"],
                        _ => &["redis-cli", "ping"],
                    };
                    let mut args = vec!["exec", id.as_str()];
                    args.extend_from_slice(probe);
                    self.dd.docker_output(&args).status.success()
                }
            })
        });
        assert!(
            ok,
            "stack {stack} did not come up: {}\n{}",
            self.dd.docker(&["stack", "ps", "--no-trunc", stack]),
            self.dd.log()
        );
    }

    /// The running task container of `stack`'s service `svc` (ID), or "".
    fn task(&self, stack: &str, svc: &str) -> String {
        self.dd
            .docker(&[
                "ps",
                "-q",
                "--filter",
                &format!("label=com.docker.swarm.service.name={stack}_{svc}"),
                "--filter",
                "status=running",
            ])
            .lines()
            .next()
            .unwrap_or_default()
            .to_string()
    }

    /// `docker stack rm <stack>` and waits until its networks are gone.
    fn remove(&self, stack: &str) {
        self.dd.docker(&["stack", "rm", stack]);
        let gone = wait_until(Duration::from_secs(90), || {
            self.dd
                .docker(&[
                    "network",
                    "ls",
                    "-q",
                    "--filter",
                    &format!("label=com.docker.stack.namespace={stack}"),
                ])
                .is_empty()
        });
        assert!(gone, "stack {stack}'s networks were not removed");
    }

    /// The ID of network `name` on this daemon.
    fn network_id(&self, name: &str) -> String {
        self.dd
            .docker(&["network", "inspect", "-f", "{{.Id}}", name])
    }

    /// `odek <args>` of project `p` against this daemon (its unix
    /// socket), stdin closed, which must succeed.
    fn odek_ok(&self, p: &Project, args: &[&str]) -> Output {
        Reach::socket(&self.dd).odek_ok(&self.dd, p, args)
    }

    /// No odek sandbox, egress proxy or link network is left on this
    /// daemon (nor a sandbox of `p` on the machine's).
    fn assert_nothing_left(&self, p: &Project, why: &str) {
        odek_e2e::remote::assert_nothing_left(&self.dd, p, why);
    }

    /// `odek run <args> -- <marker>`: refused (125) naming `needle`, the
    /// marker not made on the host, nothing left on the daemon; stderr.
    fn refused(&self, p: &Project, args: &[&str], needle: &str) -> String {
        Reach::socket(&self.dd).refused(&self.dd, p, args, needle)
    }
}

/// The Compose scenario against stack `app`: redis answers PONG and
/// postgres by name through the overlays (the tasks reached by their
/// service's name), the pids limit, the init as PID 1, `/tmp`
/// `nosuid,noexec`, a route out through the non-internal overlay; stack
/// `inner` (one internal overlay): redis by name and no route out; the
/// environment block lists the stack's services. Then every refusal of
/// SPEC §6.3 that a stack can meet, nothing run on the host and no
/// container left.
#[test]
fn a_stacks_services_answer_by_name_and_every_refusal_leaves_nothing() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let sw = Swarm::start();
    sw.deploy("app", &app_stack());
    sw.deploy("inner", &inner_stack());
    sw.deploy("closed", &closed_stack());
    sw.wait_ready("app", &["redis", "postgres"]);
    sw.wait_ready("inner", &["redis"]);
    // The premise: the overlays are swarm-scoped, attachable or not as the
    // files say.
    for (net, attachable) in [
        ("app_default", "true"),
        ("app_backend", "true"),
        ("inner_backend", "true"),
        ("closed_shut", "false"),
    ] {
        assert_eq!(
            sw.dd.docker(&[
                "network",
                "inspect",
                "-f",
                "{{.Driver}} {{.Scope}} {{.Attachable}}",
                net
            ]),
            format!("overlay swarm {attachable}"),
            "{net}"
        );
    }

    let p = Project::for_second_daemon();
    let script = scenario_script();
    let out = sw.odek_ok(
        &p,
        &[
            "run",
            "--sandbox-stack",
            "app",
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
    check_scenario(&out, "77", "stack app");
    let line = odek_e2e::startup_line(&out).expect("startup line");
    assert!(line.contains("networks=app_backend,app_default"), "{line}");
    sw.assert_nothing_left(&p, "after run");

    // One internal overlay: redis by name, no route out.
    let out = sw.odek_ok(
        &p,
        &[
            "run",
            "--sandbox-stack",
            "inner",
            "--sandbox-image",
            BASE_IMAGE,
            "--",
            "sh",
            "-c",
            "redis-cli -h redis ping; echo ---; ip route",
        ],
    );
    let o = stdout(&out);
    let (answers, routes) = o.split_once("---\n").expect("separator");
    assert!(answers.contains("PONG"), "{o}");
    // No route out (Docker before 25.0, moby#46603: a default route by
    // the sandbox's own link network's gateway only).
    assert_no_route_out(routes, "stack inner");

    // The environment block lists the stack's services.
    let up = sw.odek_ok(
        &p,
        &[
            "sandbox",
            "up",
            "--sandbox-stack",
            "app",
            "--sandbox-image",
            BASE_IMAGE,
        ],
    );
    let name = stdout(&up).trim().to_string();
    let described = sw.odek_ok(&p, &["sandbox", "describe", &name]);
    let block = stdout(&described);
    assert!(
        block.contains("Swarm stack app, its services with a task on this engine's node"),
        "{block}"
    );
    assert!(
        block.contains("redis") && block.contains("postgres"),
        "{block}"
    );
    sw.odek_ok(&p, &["sandbox", "down", &name]);
    sw.assert_nothing_left(&p, "after sandbox down");

    // SPEC §6.3 refusals with a stack.
    let img = ["--sandbox-image", BASE_IMAGE];
    let with = |extra: &[&'static str]| -> Vec<&str> {
        let mut v: Vec<&str> = extra.to_vec();
        v.extend_from_slice(&img);
        v
    };
    let err = sw.refused(
        &p,
        &with(&["--sandbox-stack", "closed"]),
        "attachable: true",
    );
    assert!(
        err.contains("closed_shut") && err.contains("networks: shut:"),
        "{err}"
    );
    let err = sw.refused(&p, &with(&["--sandbox-stack", "nosuch"]), "is not running");
    assert!(
        err.contains("docker stack deploy -c <stack file> nosuch"),
        "{err}"
    );
    sw.refused(&p, &with(&["--sandbox-stack", "no such"]), "sandbox_stack");
    sw.refused(
        &p,
        &with(&["--sandbox-stack", "app", "--no-sandbox"]),
        "sandbox_stack from flag --sandbox-stack",
    );
    // Explicit or not, an image that cannot be had is fatal with a network.
    sw.refused(
        &p,
        &[
            "--sandbox-stack",
            "app",
            "--sandbox-image",
            "odek-e2e-absent/none:1",
        ],
        "odek-e2e-absent/none:1",
    );
    // Overlays named one by one stay refused: only a stack attaches them.
    sw.refused(
        &p,
        &with(&["--sandbox-networks", "app_default"]),
        "uses driver \"overlay\" with scope \"swarm\"",
    );
    // (Ambiguity is left to the fake engine's tests: this daemon refuses
    // a local network named like a swarm one at create, "network with name
    // app_default already exists".)
    // More than 8: the stack's two and seven local networks.
    let many: Vec<String> = (0..7).map(|i| format!("odek-e2e-many{i}")).collect();
    for n in &many {
        sw.dd
            .docker(&["network", "create", "--label", "dev.odek.test=true", n]);
    }
    let list = many.join(",");
    sw.refused(
        &p,
        &[
            "--sandbox-stack",
            "app",
            "--sandbox-networks",
            &list,
            "--sandbox-image",
            BASE_IMAGE,
        ],
        "at most 8",
    );
    for n in &many {
        sw.dd.docker(&["network", "rm", n]);
    }
    // The daemon unreachable: fatal, never the host.
    let marker = p.marker_argv();
    let mut argv = vec![
        "run",
        "--sandbox-stack",
        "app",
        "--sandbox-image",
        BASE_IMAGE,
        "--",
    ];
    argv.extend(marker.iter().map(String::as_str));
    let mut c = p.odek(&argv);
    c.env(
        "DOCKER_HOST",
        format!("unix://{}/absent.sock", sw.files.path().display()),
    )
    .stdin(std::process::Stdio::null());
    let out = run_timeout(&mut c, ODEK_TIMEOUT);
    assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
    assert!(!p.marker().exists(), "ran on the host: {}", stderr(&out));
    assert!(!stderr(&out).contains("NO SANDBOX"), "{}", stderr(&out));
    sw.assert_nothing_left(&p, "daemon unreachable");
}

/// A project's `odek.json` asking for stack `app` needs approval; a trust
/// stored at a terminal (`odek approve`, the card naming the stack, scope
/// `swarm` and `attachable=yes`) runs without one; after `docker stack rm`
/// and a new deploy (the same names, new overlay IDs) the trust no longer
/// holds: without a terminal the run is refused, nothing run, nothing left.
#[test]
fn an_approval_for_a_stack_is_refused_after_its_networks_are_recreated() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let sw = Swarm::start();
    sw.deploy("app", &app_stack());
    sw.wait_ready("app", &["redis", "postgres"]);
    let p = Project::for_second_daemon();
    std::fs::write(p.path().join("odek.json"), r#"{"sandbox_stack": "app"}"#).expect("odek.json");

    // Non-interactive, untrusted: refused.
    let err = sw.refused(
        &p,
        &["--sandbox-image", BASE_IMAGE],
        "needs operator approval",
    );
    assert!(err.contains("sandbox_stack"), "{err}");

    // A trust at a terminal: the card names the stack and what binds it.
    let mut cmd = p.odek(&["approve", "--sandbox-image", BASE_IMAGE]);
    cmd.env("DOCKER_HOST", sw.dd.host())
        .env_remove("DOCKER_CONTEXT");
    let mut s = odek_e2e::tty::spawn(cmd, Duration::from_secs(60));
    let card = odek_e2e::tty::trust_card(&mut s);
    let default_id = sw.network_id("app_default");
    assert!(card.contains(&default_id), "{card}");
    assert!(
        card.contains("stack=app  scope=swarm  attachable=yes"),
        "{card}"
    );
    s.send_line("t").expect("trust");
    let (rest, code) = odek_e2e::tty::finish(s);
    assert_eq!(code, 0, "{card}{rest}");
    sw.assert_nothing_left(&p, "odek approve");

    // Trusted: runs without a terminal, services by name.
    let out = sw.odek_ok(
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
    assert!(stdout(&out).contains("PONG"), "{}", stderr(&out));

    // The stack is removed and deployed again: new overlay IDs.
    sw.remove("app");
    sw.deploy("app", &app_stack());
    sw.wait_ready("app", &["redis", "postgres"]);
    let now = sw.network_id("app_default");
    assert_ne!(now, default_id, "the premise: a new overlay");
    let err = sw.refused(
        &p,
        &["--sandbox-image", BASE_IMAGE],
        "needs operator approval",
    );
    assert!(
        err.contains("trusted before with other settings or network IDs"),
        "{err}"
    );
}

/// Two nodes on this machine: the second daemon as manager and another
/// `dockerd` in a network namespace of its own joined as a worker, the two
/// namespaces linked by a veth pair (10.231.0.1 ↔ 10.231.0.2; nothing of
/// the host's networking is touched). Stack `app` with redis placed on the
/// worker and postgres on the manager: odek on either node reaches the
/// tasks running on that node only (a task on another node is on no local
/// network odek can connect, SPEC §4.1) — on the manager postgres answers
/// and redis does not resolve; on the worker (which lists the stack's
/// overlays as one of its tasks uses them) redis answers and postgres does
/// not.
#[test]
fn on_a_two_node_swarm_each_node_reaches_its_own_tasks() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let manager = SecondDaemon::start(DaemonOptions::default());
    let worker = SecondDaemon::start(DaemonOptions::default());
    let pid_of = |d: &SecondDaemon| -> String {
        d.netns()
            .components()
            .nth(2)
            .and_then(|c| c.as_os_str().to_str().map(str::to_string))
            .expect("/proc/<pid>/ns/net")
    };
    let ip = |d: &SecondDaemon, args: &str| {
        let mut c = std::process::Command::new("sh");
        c.args(["-c", args]);
        let out = d.in_netns(&c).output().expect("nsenter");
        assert!(
            out.status.success(),
            "{args}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    ip(
        &manager,
        &format!(
            "ip link add odeksw0 type veth peer name odeksw1 netns {} && ip addr add 10.231.0.1/24 dev odeksw0 && ip link set odeksw0 up",
            pid_of(&worker)
        ),
    );
    ip(
        &worker,
        "ip addr add 10.231.0.2/24 dev odeksw1 && ip link set odeksw1 up",
    );
    manager.docker(&["swarm", "init", "--advertise-addr", "10.231.0.1"]);
    let token = manager.docker(&["swarm", "join-token", "-q", "worker"]);
    worker.docker(&[
        "swarm",
        "join",
        "--token",
        &token,
        "--advertise-addr",
        "10.231.0.2",
        "10.231.0.1:2377",
    ]);
    for d in [&manager, &worker] {
        d.load_image(BASE_IMAGE);
    }
    manager.load_image(&image("postgres"));
    worker.load_image(&image("redis"));
    let files = tempfile::tempdir().expect("tempdir");
    let yml = app_stack()
        .replace(
            "    networks: [default, backend]\n    deploy:\n      endpoint_mode: dnsrr\n",
            "    networks: [default, backend]\n    deploy:\n      endpoint_mode: dnsrr\n      placement:\n        constraints: [node.role == worker]\n",
        )
        .replace(
            "    networks: [backend]\n    deploy:\n      endpoint_mode: dnsrr\n",
            "    networks: [backend]\n    deploy:\n      endpoint_mode: dnsrr\n      placement:\n        constraints: [node.role == manager]\n",
        );
    assert!(yml.contains("node.role == worker") && yml.contains("node.role == manager"));
    let file = files.path().join("app.yml");
    std::fs::write(&file, &yml).expect("stack file");
    manager.docker(&["stack", "deploy", "-c", &file.display().to_string(), "app"]);
    let answers = |d: &SecondDaemon, svc: &str, probe: &[&str]| {
        let id = d.docker(&[
            "ps",
            "-q",
            "--filter",
            &format!("label=com.docker.swarm.service.name=app_{svc}"),
            "--filter",
            "status=running",
        ]);
        let Some(id) = id.lines().next() else {
            return false;
        };
        let mut args = vec!["exec", id];
        args.extend_from_slice(probe);
        d.docker_output(&args).status.success()
    };
    assert!(
        wait_until(Duration::from_secs(180), || answers(
            &manager,
            "postgres",
            &["pg_isready", "-h", "127.0.0.1"]
        ) && answers(
            &worker,
            "redis",
            &["redis-cli", "ping"]
        )),
        "the stack did not come up: {}",
        manager.docker(&["stack", "ps", "--no-trunc", "app"])
    );
    let p = Project::for_second_daemon();
    // A name no node-local task answers to is asked of the engine's DNS,
    // which forwards it to a resolver this namespace cannot reach: each
    // lookup is cut short.
    let ask =
        "timeout 8 redis-cli -h redis ping 2>&1 | head -n 1; timeout 8 pg_isready -h postgres; echo end";
    let on = |d: &SecondDaemon| {
        let mut c = p.odek(&[
            "run",
            "--sandbox-stack",
            "app",
            "--sandbox-image",
            BASE_IMAGE,
            "--",
            "sh",
            "-c",
            ask,
        ]);
        c.env("DOCKER_HOST", d.host())
            .env_remove("DOCKER_CONTEXT")
            .stdin(std::process::Stdio::null());
        let out = run_timeout(&mut c, ODEK_TIMEOUT);
        assert!(out.status.success(), "{}", stderr(&out));
        stdout(&out)
    };
    let m = on(&manager);
    assert!(m.contains("postgres:5432 - accepting connections"), "{m}");
    assert!(!m.contains("PONG"), "redis runs on the worker only: {m}");
    let w = on(&worker);
    assert!(w.contains("PONG"), "{w}");
    assert!(
        !w.contains("accepting connections"),
        "postgres runs on the manager only: {w}"
    );
    let _ = worker.docker_output(&["swarm", "leave", "--force"]);
    let _ = manager.docker_output(&["swarm", "leave", "--force"]);
}
