//! Checks shared by the tests that run odek against a second daemon
//! ([`SecondDaemon`]) attached to an app's networks — a Swarm stack
//! (`swarm_stack.rs`), a Compose project reached over TLS and over ssh
//! (`remote_compose.rs`): how odek reaches that daemon ([`Reach`]), the
//! Compose scenario of SPEC §12 ([`scenario_script`], [`check_scenario`]),
//! "no route out" ([`assert_no_route_out`]) and a refusal of SPEC §6.3
//! with nothing run on the host and nothing left ([`Reach::refused`]).

use std::process::{Command, Output, Stdio};

use crate::second_daemon::SecondDaemon;
use crate::sshd::{SshClient, SSH_PORT};
use crate::{run_timeout, stderr, stdout, Project, ODEK_TIMEOUT, PIDS_MAX_CMD};

/// How odek reaches a [`SecondDaemon`]: its environment (`DOCKER_HOST`
/// and what goes with it) and whether it runs in the daemon's network
/// namespace (a TCP endpoint on that namespace's loopback: TLS, ssh).
#[derive(Clone, Debug)]
pub struct Reach {
    env: Vec<(String, String)>,
    in_netns: bool,
}

impl Reach {
    /// Its unix socket (`DOCKER_HOST=unix://…`), from the host's namespace.
    pub fn socket(dd: &SecondDaemon) -> Reach {
        Reach {
            env: vec![("DOCKER_HOST".into(), dd.host())],
            in_netns: false,
        }
    }

    /// Verified TLS on the daemon namespace's `127.0.0.1:port`, the client
    /// material in `cert_dir` (`ca.pem`, `cert.pem`, `key.pem`).
    pub fn tls(port: u16, cert_dir: &std::path::Path) -> Reach {
        Reach {
            env: vec![
                ("DOCKER_HOST".into(), format!("tcp://127.0.0.1:{port}")),
                ("DOCKER_TLS_VERIFY".into(), "1".into()),
                ("DOCKER_CERT_PATH".into(), cert_dir.display().to_string()),
            ],
            in_netns: true,
        }
    }

    /// ssh to root on the daemon namespace's `127.0.0.1:SSH_PORT` with
    /// `client`'s key, `known_hosts` and `ssh` wrapper first on `PATH`.
    pub fn ssh(client: &SshClient) -> Reach {
        Reach {
            env: vec![
                (
                    "DOCKER_HOST".into(),
                    format!("ssh://root@127.0.0.1:{SSH_PORT}"),
                ),
                ("PATH".into(), client.path_env()),
            ],
            in_netns: true,
        }
    }

    /// The same reach with `key` set to `value` (e.g. another
    /// `DOCKER_HOST`: an endpoint where nothing answers).
    pub fn with(mut self, key: &str, value: &str) -> Reach {
        self.env.retain(|(k, _)| k != key);
        self.env.push((key.into(), value.into()));
        self
    }

    /// `odek <args>` of project `p` reaching `dd`, stdin closed, no other
    /// Docker client setting of the suite's environment in the way.
    pub fn command(&self, dd: &SecondDaemon, p: &Project, args: &[&str]) -> Command {
        let mut c = p.odek(args);
        for k in [
            "DOCKER_HOST",
            "DOCKER_CONTEXT",
            "DOCKER_TLS_VERIFY",
            "DOCKER_TLS",
            "DOCKER_CERT_PATH",
            "DOCKER_CONFIG",
        ] {
            c.env_remove(k);
        }
        for (k, v) in &self.env {
            c.env(k, v);
        }
        c.stdin(Stdio::null());
        if self.in_netns {
            let mut c = dd.in_netns(&c);
            c.stdin(Stdio::null());
            c
        } else {
            c
        }
    }

    /// [`Reach::command`] run (with [`ODEK_TIMEOUT`]).
    pub fn odek(&self, dd: &SecondDaemon, p: &Project, args: &[&str]) -> Output {
        run_timeout(&mut self.command(dd, p, args), ODEK_TIMEOUT)
    }

    /// [`Reach::odek`], which must succeed.
    pub fn odek_ok(&self, dd: &SecondDaemon, p: &Project, args: &[&str]) -> Output {
        let out = self.odek(dd, p, args);
        assert!(
            out.status.success(),
            "odek {args:?} failed ({:?}):\n{}\n{}",
            out.status.code(),
            stderr(&out),
            stdout(&out)
        );
        out
    }

    /// `odek run <args> -- <marker>`: refused (125) naming `needle`, no
    /// fallback, the marker not made on the host, nothing left on `dd` or
    /// on the machine's daemon ([`assert_nothing_left`]); stderr.
    pub fn refused(&self, dd: &SecondDaemon, p: &Project, args: &[&str], needle: &str) -> String {
        let mut argv = vec!["run"];
        argv.extend_from_slice(args);
        argv.push("--");
        let marker = p.marker_argv();
        argv.extend(marker.iter().map(String::as_str));
        let out = self.odek(dd, p, &argv);
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
        assert_nothing_left(dd, p, &format!("{args:?}"));
        err
    }
}

/// No odek sandbox, egress proxy or link network is left on `dd`, and no
/// sandbox of project `p` on the machine's own daemon.
pub fn assert_nothing_left(dd: &SecondDaemon, p: &Project, why: &str) {
    let left = dd.docker(&["ps", "-aq", "--filter", "label=dev.odek.sandbox"]);
    assert_eq!(left, "", "{why}: an odek container was left");
    let links = dd.docker(&["network", "ls", "-q", "--filter", "label=dev.odek.link"]);
    assert_eq!(links, "", "{why}: a link network was left");
    assert_eq!(
        p.leftovers(),
        Vec::<String>::new(),
        "{why}: a sandbox on the machine's daemon"
    );
}

/// The scenario's command: redis and postgres by name, then (`---`
/// between) pids.max, PID 1's name, the `/tmp` mount, `ip route`.
pub fn scenario_script() -> String {
    format!(
        "redis-cli -h redis ping; pg_isready -h postgres; echo ---; {PIDS_MAX_CMD}; echo ---; \
         cat /proc/1/comm; echo ---; grep ' /tmp ' /proc/mounts; echo ---; ip route"
    )
}

/// Checks the output of [`scenario_script`]: redis answered PONG and
/// postgres by name, pids.max is `pids`, PID 1 is Docker's init, `/tmp` is
/// a `nosuid,noexec` tmpfs, and exactly one default route (the app's
/// network that is not internal: the positive control of
/// [`assert_no_route_out`]). `what` names the case in messages.
pub fn check_scenario(out: &Output, pids: &str, what: &str) {
    let o = stdout(out);
    let parts: Vec<&str> = o.split("---\n").collect();
    assert_eq!(parts.len(), 5, "{what}: {o}\n{}", stderr(out));
    assert!(
        parts[0].contains("PONG"),
        "{what}: redis did not answer:\n{o}"
    );
    assert!(
        parts[0].contains("postgres:5432 - accepting connections"),
        "{what}: postgres did not answer by name:\n{o}"
    );
    assert_eq!(parts[1].trim(), pids, "{what}: pids limit:\n{o}");
    let init = parts[2].trim();
    assert!(
        init == "docker-init" || init == "tini",
        "{what}: PID 1 is {init:?}"
    );
    let tmp = parts[3].split_whitespace().nth(3).unwrap_or_default();
    assert!(
        parts[3].starts_with("tmpfs ") && tmp.contains("nosuid") && tmp.contains("noexec"),
        "{what}: /tmp: {}",
        parts[3]
    );
    assert_eq!(
        default_routes(parts[4]).len(),
        1,
        "{what}: the app's non-internal network gives one default route (positive control):\n{o}"
    );
}

/// `default` lines of an `ip route` output.
pub fn default_routes(ip_route: &str) -> Vec<&str> {
    ip_route
        .lines()
        .filter(|l| l.trim_start().starts_with("default"))
        .collect()
}

/// `routes` (a sandbox's `ip route` on internal networks only) has no
/// route out: no default route (Docker 25+), or — Docker before 25.0
/// (moby#46603) adds a default route by an internal network's own gateway
/// — one subnet only (the sandbox's link network, odek's own, Internal
/// here) and every default route through a gateway on it.
pub fn assert_no_route_out(routes: &str, what: &str) {
    let defaults = default_routes(routes);
    if defaults.is_empty() {
        return;
    }
    let subnets: Vec<&str> = routes
        .lines()
        .filter(|l| !l.trim_start().starts_with("default"))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(subnets.len(), 1, "{what}: one subnet expected:\n{routes}");
    let gw_prefix = subnets[0].rsplit_once('.').map(|(a, _)| a).unwrap_or("");
    assert!(
        !gw_prefix.is_empty()
            && defaults
                .iter()
                .all(|d| d.contains(&format!("via {gw_prefix}."))),
        "{what}: a default route leaves the link network:\n{routes}"
    );
}

/// Creates a bridge network `name` on `dd` through its Engine API with
/// `CheckDuplicate: false` (the docker CLI refuses a second network of an
/// existing name), labelled `dev.odek.test=true` and with `labels`; its ID.
pub fn create_network_unchecked(dd: &SecondDaemon, name: &str, labels: &[(&str, &str)]) -> String {
    let mut all = serde_json::Map::new();
    all.insert("dev.odek.test".into(), "true".into());
    for (k, v) in labels {
        all.insert((*k).to_string(), (*v).to_string().into());
    }
    let body = serde_json::json!({
        "Name": name,
        "CheckDuplicate": false,
        "Driver": "bridge",
        "Labels": all,
    })
    .to_string();
    let socket = dd.host().trim_start_matches("unix://").to_string();
    let out = crate::run(Command::new("curl").args([
        "-sS",
        "--fail-with-body",
        "--max-time",
        "20",
        "--unix-socket",
        &socket,
        "-H",
        "Content-Type: application/json",
        "-X",
        "POST",
        "http://localhost/networks/create",
        "-d",
        &body,
    ]));
    assert!(
        out.status.success(),
        "creating network {name} through the API failed: {}{}",
        stdout(&out),
        stderr(&out)
    );
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("JSON from POST /networks/create");
    v["Id"]
        .as_str()
        .unwrap_or_else(|| panic!("no Id in {v}"))
        .to_string()
}
