//! Egress mode against the real engine (docs/SPEC.md §4.5): the sandbox's
//! only way out is odek's proxy, to the hosts of `sandbox_egress`.
//!
//! The "internet" is a stand-in: a container these tests start on a test
//! network of their own (non-internal, labelled), answering plain HTTP on
//! port 80 (busybox httpd) and HTTPS on 443 (`openssl s_server` with a
//! self-signed certificate), under the aliases `allowed.test` and
//! `denied.test`; that network is passed as `sandbox_egress_network`. No
//! test sends a packet or a DNS query anywhere else: every name the proxy
//! looks up is an alias on its own networks, and no test probes the
//! Docker gateway or a metadata address.
//!
//! The proxy binary comes from `ODEK_EGRESS_BIN` (the static build that
//! `cargo xtask e2e` makes); without it these tests fail saying so.

use std::process::Output;
use std::time::{Duration, Instant};

use odek_e2e::*;

/// The static proxy binary the suite's odek mounts.
fn egress_bin() -> String {
    match std::env::var("ODEK_EGRESS_BIN") {
        Ok(b) if !b.is_empty() => b,
        _ => panic!(
            "ODEK_EGRESS_BIN is not set: run these tests through `cargo xtask e2e` (it builds the static odek-egress), or point ODEK_EGRESS_BIN at one"
        ),
    }
}

/// The stand-in "internet": a test network and one host on it.
struct Outside {
    net: TestNetwork,
    host: String,
}

impl Outside {
    fn start() -> Outside {
        fixture();
        egress_bin();
        let net = TestNetwork::create(&unique("odek-e2e-outside-"), &[]);
        let host = unique("odek-e2e-standin-");
        let script = "set -e; mkdir -p /tmp/www; echo stand-in-says-hello > /tmp/www/index.html; \
            cd /tmp; openssl req -x509 -newkey rsa:2048 -nodes -keyout k.pem -out c.pem -days 1 \
            -subj /CN=allowed.test -addext subjectAltName=DNS:allowed.test,DNS:denied.test 2>/dev/null; \
            busybox httpd -p 80 -h /tmp/www; \
            perl -MIO::Socket::INET -e '$s = IO::Socket::INET->new(LocalPort => 5353, Proto => \"udp\") or die; \
              while (1) { $s->recv($m, 100); open(F, \">>/tmp/udp\"); print F $m; close(F) }' & \
            exec openssl s_server -quiet -accept 443 -cert c.pem -key k.pem -www";
        docker(&[
            "run",
            "-d",
            "--name",
            &host,
            "--label",
            TEST_LABEL,
            "--label",
            NS_LABEL,
            "--network",
            &net.name,
            "--network-alias",
            "allowed.test",
            "--network-alias",
            "denied.test",
            BASE_IMAGE,
            "bash",
            "-c",
            script,
        ]);
        let o = Outside { net, host };
        assert!(
            wait_until(Duration::from_secs(20), || docker_ok(&[
                "exec",
                &o.host,
                "sh",
                "-c",
                "ss -ltn | grep -q ':443 ' && ss -ltn | grep -q ':80 '"
            ])),
            "the stand-in did not listen on 80 and 443"
        );
        o
    }

    /// The stand-in's address on the outside network.
    fn ip(&self) -> String {
        docker(&[
            "inspect",
            "-f",
            "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}",
            &self.host,
        ])
    }
}

impl Drop for Outside {
    fn drop(&mut self) {
        let _ = docker_ok(&["rm", "-f", &self.host]);
    }
}

/// A detached sandbox in egress mode, removed on drop.
struct Egress {
    p: Project,
    name: String,
}

impl Egress {
    /// `odek sandbox up` with `allow` as `--sandbox-egress` (one flag per
    /// entry) through `outside`, and the Compose fixture when `compose`.
    fn up(outside: &Outside, allow: &[&str], compose: bool) -> Egress {
        let p = Project::new();
        let mut args = vec![
            "sandbox",
            "up",
            "--sandbox-image",
            BASE_IMAGE,
            "--sandbox-egress-network",
            &outside.net.name,
        ];
        for a in allow {
            args.extend_from_slice(&["--sandbox-egress", a]);
        }
        if compose {
            args.extend_from_slice(&["--sandbox-compose", PROJECT]);
        }
        let out = p.odek_ok(&args);
        let name = stdout(&out).trim().to_string();
        assert!(name.starts_with("odek-"), "no name: {name:?}");
        Egress { p, name }
    }

    /// Runs `script` in the sandbox (bash -c).
    fn sh(&self, script: &str) -> Output {
        self.p
            .run_odek(&["sandbox", "exec", &self.name, "--", "bash", "-c", script])
    }

    fn proxy(&self) -> String {
        format!("{}-egress", self.name)
    }
}

impl Drop for Egress {
    fn drop(&mut self) {
        let _ = self.p.run_odek(&["sandbox", "down", &self.name]);
    }
}

fn both(o: &Output) -> String {
    format!("{}{}", stdout(o), stderr(o))
}

/// A raw request to the proxy over bash's /dev/tcp, printing the answer.
fn raw(request: &str) -> String {
    format!(
        "p=${{http_proxy#http://}}; exec 3<>/dev/tcp/${{p%:*}}/${{p##*:}}; printf '{request}' >&3; timeout 5 cat <&3"
    )
}

#[test]
fn a_listed_host_is_reached_through_the_proxy_by_plain_http_and_by_connect() {
    let outside = Outside::start();
    let e = Egress::up(&outside, &["allowed.test"], false);
    // Plain HTTP: busybox wget honours http_proxy.
    let out = e.sh("busybox wget -q -O- http://allowed.test/");
    assert!(
        stdout(&out).contains("stand-in-says-hello"),
        "plain HTTP through the proxy failed: {}",
        both(&out)
    );
    // CONNECT, then TLS with the CONNECT host as SNI.
    let out = e.sh(
        "p=${https_proxy#http://}; printf 'GET / HTTP/1.0\\r\\n\\r\\n' | timeout 10 openssl s_client -quiet -proxy \"$p\" -connect allowed.test:443 -servername allowed.test 2>/dev/null",
    );
    assert!(
        stdout(&out).contains("200 ok"),
        "HTTPS through CONNECT failed: {}",
        both(&out)
    );
}

#[test]
fn an_unlisted_host_gets_a_403_naming_the_policy_at_once() {
    let outside = Outside::start();
    let e = Egress::up(&outside, &["allowed.test"], false);
    for request in [
        "GET http://denied.test/ HTTP/1.1\\r\\nHost: denied.test\\r\\n\\r\\n",
        "CONNECT denied.test:443 HTTP/1.1\\r\\nHost: denied.test:443\\r\\n\\r\\n",
        // A listed host on a port it does not allow.
        "CONNECT allowed.test:22 HTTP/1.1\\r\\nHost: allowed.test:22\\r\\n\\r\\n",
    ] {
        let started = Instant::now();
        let out = e.sh(&raw(request));
        let took = started.elapsed();
        let text = stdout(&out);
        assert!(
            text.starts_with("HTTP/1.1 403") && text.contains("sandbox_egress"),
            "{request}: not a 403 naming the policy: {}",
            both(&out)
        );
        // The proxy answers and closes (`cat` ends with the connection):
        // far below the 5 s `timeout` a hang would run into.
        assert!(
            took < Duration::from_secs(4),
            "{request}: the refusal took {took:?}"
        );
    }
}

/// A plain request with two `Host` headers (the second naming another
/// host) is refused; the proxy's log is capped (SECURITY.md, review
/// findings L1, L2).
#[test]
fn a_request_with_two_host_headers_is_refused() {
    let outside = Outside::start();
    let e = Egress::up(&outside, &["allowed.test"], false);
    // Control: one Host header, the listed host's page.
    let out = e.sh(&raw(
        "GET http://allowed.test/ HTTP/1.1\\r\\nHost: allowed.test\\r\\nConnection: close\\r\\n\\r\\n",
    ));
    assert!(
        stdout(&out).contains("stand-in-says-hello"),
        "control: {}",
        both(&out)
    );
    let out = e.sh(&raw(
        "GET http://allowed.test/ HTTP/1.1\\r\\nHost: allowed.test\\r\\nHost: denied.test\\r\\nConnection: close\\r\\n\\r\\n",
    ));
    let text = stdout(&out);
    assert!(
        text.starts_with("HTTP/1.1 403") && text.contains("more than one Host header"),
        "two Host headers were not refused: {}",
        both(&out)
    );
    assert!(!text.contains("stand-in-says-hello"), "{text}");
    let log = docker(&[
        "inspect",
        "-f",
        "{{json .HostConfig.LogConfig}}",
        &format!("{}-egress", e.name),
    ]);
    assert!(
        log.contains("\"max-size\":\"1m\"") && log.contains("\"max-file\":\"2\""),
        "the proxy's log is not capped: {log}"
    );
}

#[test]
fn a_connect_whose_tls_sni_names_another_host_is_refused() {
    let outside = Outside::start();
    let e = Egress::up(&outside, &["allowed.test"], false);
    let out = e.sh(
        "p=${https_proxy#http://}; printf 'GET / HTTP/1.0\\r\\n\\r\\n' | timeout 10 openssl s_client -quiet -proxy \"$p\" -connect allowed.test:443 -servername denied.test 2>&1",
    );
    assert!(
        !stdout(&out).contains("200 ok"),
        "a tunnel to allowed.test carried a ClientHello for denied.test: {}",
        both(&out)
    );
    let log = docker(&["logs", &e.proxy()]);
    assert!(
        log.contains(
            "deny allowed.test:443 the TLS ClientHello names another server (denied.test)"
        ),
        "the proxy's log: {log}"
    );
}

#[test]
fn a_listed_name_that_resolves_to_a_private_address_is_refused() {
    let outside = Outside::start();
    // `redis` is listed, and resolves (for the proxy, on the sandbox's
    // link network) to a private address outside the egress network: the
    // proxy refuses it; the sandbox reaches it directly by name.
    let e = Egress::up(&outside, &["allowed.test", "redis:6379"], true);
    let out = e.sh(&raw(
        "GET http://redis:6379/ HTTP/1.1\\r\\nHost: redis:6379\\r\\n\\r\\n",
    ));
    let text = stdout(&out);
    assert!(
        text.starts_with("HTTP/1.1 403")
            && text.contains("a private address, which the egress policy refuses"),
        "redis through the proxy: {}",
        both(&out)
    );
    // A listed name inside the egress network's subnet passes.
    let out = e.sh("busybox wget -q -O- http://allowed.test/");
    assert!(
        stdout(&out).contains("stand-in-says-hello"),
        "{}",
        both(&out)
    );
}

/// Asserts that every IPv4 route of sandbox `e` stays inside its link
/// network's subnet (the only network it is attached to): no route out.
fn assert_routes_stay_on_the_link(e: &Egress) {
    let link = docker(&[
        "network",
        "inspect",
        "-f",
        "{{range .IPAM.Config}}{{.Subnet}} {{.Gateway}}{{end}}",
        &format!("{}-link", e.name),
    ]);
    let (subnet, gateway) = link
        .split_once(' ')
        .expect("the link network's subnet and gateway");
    let out = e.sh("ip -4 route");
    let routes = stdout(&out);
    assert!(out.status.success(), "ip route: {}", both(&out));
    for r in routes.lines() {
        let words: Vec<&str> = r.split_whitespace().collect();
        match words.as_slice() {
            // Engines before 25.0 (moby#46603) install a default route via
            // an internal network's own gateway, whose isolation rules drop
            // what leaves the subnet; later ones install none.
            ["default", "via", gw, ..] => assert!(
                engine_major() < 25 && *gw == gateway,
                "a default route out of the link network:\n{routes}"
            ),
            [dst, ..] => assert_eq!(*dst, subnet, "a route beside the link subnet:\n{routes}"),
            [] => {}
        }
    }
    assert!(
        routes.contains(subnet),
        "no route on the link subnet:\n{routes}"
    );
}

#[test]
fn there_is_no_route_out_but_the_proxy() {
    let outside = Outside::start();
    let e = Egress::up(&outside, &["allowed.test"], true);
    let ip = outside.ip();
    assert_routes_stay_on_the_link(&e);
    // Direct TCP to the stand-in's address fails (no answer: refused or
    // dropped), and a UDP datagram never arrives; the same from the
    // stand-in's own side arrives (positive control).
    let out = e.sh(&format!(
        "timeout 3 bash -c 'exec 3<>/dev/tcp/{ip}/80' 2>&1; echo tcp=$?; bash -c 'echo from-the-sandbox >/dev/udp/{ip}/5353' 2>&1; sleep 1"
    ));
    let text = stdout(&out);
    assert!(
        text.contains("tcp=") && !text.contains("tcp=0"),
        "direct TCP to {ip}: {}",
        both(&out)
    );
    docker(&[
        "exec",
        &outside.host,
        "bash",
        "-c",
        "echo control >/dev/udp/127.0.0.1/5353; sleep 1",
    ]);
    let got = docker(&["exec", &outside.host, "cat", "/tmp/udp"]);
    assert!(
        got.contains("control"),
        "the UDP listener got nothing at all: {got:?}"
    );
    assert!(
        !got.contains("from-the-sandbox"),
        "a UDP datagram left the sandbox without the proxy: {got:?}"
    );
}

#[test]
fn attached_services_answer_by_name_directly() {
    let outside = Outside::start();
    let e = Egress::up(&outside, &["allowed.test"], true);
    let out = e.sh("echo \"$NO_PROXY\"; redis-cli -h redis ping; pg_isready -h postgres");
    let text = stdout(&out);
    assert!(
        text.contains("PONG") && text.contains("accepting connections"),
        "the services by name: {}",
        both(&out)
    );
    let no_proxy = text.lines().next().unwrap_or_default();
    assert!(
        no_proxy.split(',').any(|n| n == "redis") && no_proxy.split(',').any(|n| n == "postgres"),
        "NO_PROXY does not cover the services: {no_proxy:?}"
    );
}

#[test]
fn describe_lists_the_allowlist_and_the_denied_hosts() {
    let outside = Outside::start();
    let e = Egress::up(&outside, &["allowed.test"], false);
    e.sh(&raw(
        "GET http://denied.test/ HTTP/1.1\\r\\nHost: denied.test\\r\\n\\r\\n",
    ));
    let out = e.p.odek_ok(&["sandbox", "describe", &e.name, "--json"]);
    let env: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("describe JSON");
    assert_eq!(
        env["egress"]["allow"],
        serde_json::json!(["allowed.test"]),
        "{env}"
    );
    assert_eq!(
        env["egress"]["denied"],
        serde_json::json!(["denied.test:80"]),
        "{env}"
    );
    assert_eq!(env["internet"], serde_json::json!(false), "{env}");
    assert!(
        env["egress"]["proxy"]
            .as_str()
            .is_some_and(|p| p.starts_with("http://") && p.ends_with(":3128")),
        "{env}"
    );
    let block = stdout(&e.p.odek_ok(&["sandbox", "describe", &e.name]));
    assert!(
        block.contains("the only way out is odek's egress proxy")
            && block.contains("allowed.test")
            && block.contains("refused so far: denied.test:80"),
        "the environment block:\n{block}"
    );
}

#[test]
fn a_proxy_that_cannot_start_refuses_the_launch_and_leaves_nothing() {
    let outside = Outside::start();
    let p = Project::new();
    // A static binary that is not the proxy: it never says it is ready.
    let not_a_proxy = std::env::var("ODEK_SUPERVISOR_BIN").expect(
        "ODEK_SUPERVISOR_BIN (a static binary that is not the proxy): run through cargo xtask e2e",
    );
    let before = docker(&["network", "ls", "-q", "--filter", "label=dev.odek.link"]);
    let out = p.run_odek_env(
        &[("ODEK_EGRESS_BIN", &not_a_proxy)],
        &[
            "run",
            "--sandbox-image",
            BASE_IMAGE,
            "--sandbox-egress",
            "allowed.test",
            "--sandbox-egress-network",
            &outside.net.name,
            "--",
            "sh",
            "-c",
            &p.marker_cmd(),
        ],
    );
    assert_eq!(out.status.code(), Some(125), "{}", both(&out));
    assert!(
        stderr(&out).contains("the egress proxy (sandbox_egress) could not be started"),
        "{}",
        stderr(&out)
    );
    assert!(!p.marker().exists(), "the command ran");
    assert!(
        p.leftovers().is_empty(),
        "sandbox left: {:?}",
        p.leftovers()
    );
    // What other tests running meanwhile made belongs to a sandbox that
    // exists; this launch's would belong to none.
    let orphan = |format: &str, id: &str| {
        // Gone since it was listed (a concurrent test's teardown): not left.
        let Some(of) = docker_try(&["inspect", "-f", format, id]) else {
            return false;
        };
        !docker_ok(&["inspect", "--type", "container", &of])
    };
    // A concurrent test's launch in flight (its network made, its
    // container not yet) or teardown (container gone, network going)
    // looks the same for a moment: only one still there, and still an
    // orphan, after 10 s is this launch's.
    // The same holds for proxies: a concurrent launch starts its proxy
    // before its sandbox exists.
    let mut new: Vec<String> = Vec::new();
    let mut left: Vec<String> = Vec::new();
    for _ in 0..20 {
        let after = docker(&["network", "ls", "-q", "--filter", "label=dev.odek.link"]);
        new = after
            .lines()
            .filter(|l| !before.contains(l) && orphan("{{index .Labels \"dev.odek.link\"}}", l))
            .map(str::to_string)
            .collect();
        let proxies = docker(&["ps", "-aq", "--filter", "label=dev.odek.sandbox=egress"]);
        left = proxies
            .lines()
            .filter(|id| orphan("{{index .Config.Labels \"dev.odek.egress\"}}", id))
            .map(str::to_string)
            .collect();
        if new.is_empty() && left.is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    assert!(new.is_empty(), "link network left: {new:?}");
    assert!(left.is_empty(), "proxy container left: {left:?}");
}

#[test]
fn down_removes_the_sandbox_its_proxy_and_its_network() {
    let outside = Outside::start();
    let e = Egress::up(&outside, &["allowed.test"], false);
    let link = format!("{}-link", e.name);
    assert!(docker_ok(&["inspect", &e.proxy()]), "no proxy container");
    assert!(docker_ok(&["network", "inspect", &link]), "no link network");
    // The proxy runs as nobody, with a read-only root and no capability.
    let shape = docker(&[
        "inspect",
        "-f",
        "{{.Config.User}} {{.HostConfig.ReadonlyRootfs}} {{.HostConfig.CapDrop}}",
        &e.proxy(),
    ]);
    assert_eq!(shape, "65534:65534 true [ALL]");
    e.p.odek_ok(&["sandbox", "down", &e.name]);
    assert!(!docker_ok(&["inspect", &e.name]), "sandbox left");
    assert!(!docker_ok(&["inspect", &e.proxy()]), "proxy left");
    assert!(
        !docker_ok(&["network", "inspect", &link]),
        "link network left"
    );
}

#[test]
fn odek_run_removes_the_proxy_and_its_network_before_it_returns() {
    let outside = Outside::start();
    let p = Project::new();
    let out = p.odek_ok(&[
        "run",
        "--sandbox-image",
        BASE_IMAGE,
        "--sandbox-egress",
        "allowed.test",
        "--sandbox-egress-network",
        &outside.net.name,
        "--",
        "sh",
        "-c",
        "busybox wget -q -O- http://allowed.test/",
    ]);
    assert!(
        stdout(&out).contains("stand-in-says-hello"),
        "{}",
        both(&out)
    );
    let line = startup_line(&out).expect("startup line");
    assert!(
        line.contains(" egress=allowed.test egress-proxy=http://"),
        "{line}"
    );
    // Nothing of this run is left: its proxy was the only container on
    // this test's outside network besides the stand-in.
    let on_outside = docker(&[
        "ps",
        "-a",
        "--format",
        "{{.Names}}",
        "--filter",
        &format!("network={}", outside.net.name),
    ]);
    assert_eq!(
        on_outside.trim(),
        outside.host,
        "left on the egress network: {on_outside}"
    );
    assert!(
        p.leftovers().is_empty(),
        "sandbox left: {:?}",
        p.leftovers()
    );
}

/// Every trace of sandbox `name` the engine still has: containers labelled
/// for it (its proxy: `dev.odek.egress=<name>`), a container of its name,
/// and networks labelled for it (its link network: `dev.odek.link=<name>`).
fn traces_of(name: &str) -> Vec<String> {
    let mut left: Vec<String> = docker(&[
        "ps",
        "-a",
        "--format",
        "container {{.Names}}",
        "--filter",
        &format!("label=dev.odek.egress={name}"),
    ])
    .lines()
    .map(str::to_string)
    .collect();
    if docker_ok(&["container", "inspect", name]) {
        left.push(format!("container {name}"));
    }
    left.extend(
        docker(&[
            "network",
            "ls",
            "--format",
            "network {{.Name}}",
            "--filter",
            &format!("label=dev.odek.link={name}"),
        ])
        .lines()
        .map(str::to_string),
    );
    left
}

/// The proxy container killed mid-run (docs/SPEC.md §4.5): egress fails
/// closed. With the proxy gone the listed host is no longer reachable, by
/// plain HTTP or CONNECT through the proxy's address nor directly; no route
/// appears beside the link network; odek does not start another proxy
/// behind the operator's back. `odek sandbox down` then removes the
/// sandbox, its link network and the dead proxy: nothing labelled for it
/// is left.
#[test]
fn a_killed_proxy_fails_closed_and_down_still_removes_everything() {
    let outside = Outside::start();
    let e = Egress::up(&outside, &["allowed.test"], false);
    let ip = outside.ip();
    let fetch = format!(
        "timeout 10 busybox wget -q -O- http://allowed.test/ 2>&1; echo wget=$?; \
         p=${{https_proxy#http://}}; printf 'GET / HTTP/1.0\\r\\n\\r\\n' | timeout 10 openssl s_client -quiet -proxy \"$p\" -connect allowed.test:443 -servername allowed.test 2>&1; echo tls=$?; \
         timeout 3 bash -c 'exec 3<>/dev/tcp/{ip}/80' 2>&1; echo tcp=$?"
    );
    // Positive control: through the proxy, both ways; directly, never.
    let before = e.sh(&fetch);
    let text = stdout(&before);
    assert!(
        text.contains("stand-in-says-hello") && text.contains("200 ok"),
        "the listed host before the kill: {}",
        both(&before)
    );
    assert!(
        !text.contains("tcp=0"),
        "direct TCP before the kill: {text}"
    );

    docker(&["kill", &e.proxy()]);

    let t0 = Instant::now();
    let after = e.sh(&fetch);
    let text = stdout(&after);
    // What the agent sees, for the log: no proxy answers at its address.
    eprintln!(
        "after the kill ({:?}): {}",
        t0.elapsed(),
        both(&after)
            .lines()
            .filter(|l| !l.starts_with("TLS") && !l.starts_with("SSL"))
            .collect::<Vec<_>>()
            .join(" | ")
    );
    assert!(
        !text.contains("stand-in-says-hello")
            && !text.contains("200 ok")
            && !text.contains("wget=0")
            && text.contains("tcp=")
            && !text.contains("tcp=0"),
        "the listed host after the proxy was killed: {}",
        both(&after)
    );
    assert_routes_stay_on_the_link(&e);
    // The proxy stays dead: odek started no other.
    assert_eq!(
        docker(&[
            "ps",
            "-a",
            "--format",
            "{{.Names}} {{.State}}",
            "--filter",
            &format!("label=dev.odek.egress={}", e.name),
        ]),
        format!("{} exited", e.proxy()),
        "the sandbox's proxies after the kill"
    );

    let out = e.p.run_odek(&["sandbox", "down", &e.name]);
    assert!(out.status.success(), "down: {}", both(&out));
    let left = traces_of(&e.name);
    assert!(left.is_empty(), "left after down: {left:?}");
}

/// A running `odek run` in egress mode; on drop (a failed assertion) it is
/// killed and its orphans collected, so nothing outlives the test.
struct Owner<'a> {
    p: &'a Project,
    child: Option<std::process::Child>,
}

impl Drop for Owner<'_> {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = self.p.run_odek(&["sandbox", "gc"]);
    }
}

/// `odek run` in egress mode through `outside` running `sleep 60`,
/// returned with its sandbox's name once its startup line shows (the
/// proxy and the sandbox are up and the command runs).
fn run_owned<'a>(p: &'a Project, outside: &Outside) -> (Owner<'a>, String) {
    use std::io::{BufRead, BufReader};
    let mut child = p
        .odek(&[
            "run",
            "--sandbox-image",
            BASE_IMAGE,
            "--sandbox-egress",
            "allowed.test",
            "--sandbox-egress-network",
            &outside.net.name,
            "--",
            "sleep",
            "60",
        ])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn odek run");
    let err = child.stderr.take().expect("stderr");
    let owner = Owner {
        p,
        child: Some(child),
    };
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut seen = String::new();
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            let up = line.starts_with("odek: sandbox ");
            seen.push_str(&line);
            seen.push('\n');
            if up {
                let _ = tx.send(Ok(()));
            }
        }
        let _ = tx.send(Err(seen));
    });
    match rx.recv_timeout(Duration::from_secs(120)) {
        Ok(Ok(())) => {}
        Ok(Err(seen)) => panic!("odek run ended before its sandbox was up:\n{seen}"),
        Err(_) => panic!("no startup line within 120 s"),
    }
    let ids = p.sandboxes();
    assert_eq!(ids.len(), 1, "one sandbox runs: {ids:?}");
    let name = docker(&["inspect", "-f", "{{.Name}}", &ids[0]])
        .trim_start_matches('/')
        .to_string();
    (owner, name)
}

/// How long the engine may take to remove a dead owner's sandbox and
/// proxy.
const GONE_WITHIN: Duration = Duration::from_secs(20);

/// SIGKILL of the owner of an egress sandbox (`odek run`): no cleanup runs
/// in the dead process, and (docs/SPEC.md §4.4, §4.5 "Lifetime";
/// docs/SANDBOXING.md, "Egress mode"):
/// - the sandbox container is removed by the engine at once: its stdin
///   (`StdinOnce`) was the owner's attachment, which closed with the
///   process, its idle process ended, and it is `AutoRemove`;
/// - the proxy container `<sandbox>-egress` likewise: the owner was
///   attached to its stdin too, `odek-egress` exits when its stdin ends,
///   and it is `AutoRemove` — both gone within seconds (this test allows
///   [`GONE_WITHIN`]);
/// - the link network `<sandbox>-link` is removed by nobody then: the
///   engine never removes a network. It stays, an orphan, until this
///   user's next launch that uses a link network (attached networks or
///   egress mode; here one more egress run) or `odek sandbox gc` sweeps it:
///   its labels are signed by this user's key, no container of its
///   sandbox's name exists, and its owner's process is provably gone.
#[test]
fn sigkill_of_the_owner_leaves_nothing_once_the_next_launch_sweeps() {
    let outside = Outside::start();
    let p = Project::new();
    let (mut owner, name) = run_owned(&p, &outside);
    let proxy = format!("{name}-egress");
    let link = format!("{name}-link");
    assert!(docker_ok(&["container", "inspect", &proxy]), "no proxy");
    assert!(docker_ok(&["network", "inspect", &link]), "no link network");

    let mut child = owner.child.take().expect("the owner");
    child.kill().expect("SIGKILL"); // std's kill is SIGKILL
    let _ = child.wait();
    let killed = Instant::now();
    let gone = wait_until(GONE_WITHIN, || {
        !docker_ok(&["container", "inspect", &name])
            && !docker_ok(&["container", "inspect", &proxy])
    });
    assert!(
        gone,
        "{} s after SIGKILL of the owner, still there: {:?}",
        GONE_WITHIN.as_secs(),
        traces_of(&name)
    );
    eprintln!(
        "sandbox and proxy removed by the engine {:?} after SIGKILL",
        killed.elapsed()
    );
    // The engine removed the containers, never the network.
    assert_eq!(traces_of(&name), vec![format!("network {link}")]);

    // The next launch that uses a link network sweeps the orphan.
    let out = p.odek_ok(&[
        "run",
        "--sandbox-image",
        BASE_IMAGE,
        "--sandbox-egress",
        "allowed.test",
        "--sandbox-egress-network",
        &outside.net.name,
        "--",
        "true",
    ]);
    assert!(out.status.success(), "the next launch: {}", both(&out));
    let left = traces_of(&name);
    assert!(left.is_empty(), "left after the next launch: {left:?}");
    assert!(p.leftovers().is_empty(), "{:?}", p.leftovers());
}
