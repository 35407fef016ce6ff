//! CVE-2024-29018 on a real engine (SPEC §4.6): Docker Engine releases
//! before 23.0.11, 25.0.5 and 26.0.0 forward the DNS lookups of a container
//! that is only on internal networks to the host's resolver when that
//! resolver listens on a loopback address — from the host's network
//! namespace, so the lookup leaves although no route does.
//!
//! The "host's resolver" here is the test's own DNS server
//! ([`odek_e2e::dns_stub::DnsStub`]) on a 127.53.x.y address, and the
//! engine is a second `dockerd` of this machine's release
//! ([`odek_e2e::second_daemon::SecondDaemon`]) that reads a
//! `/etc/resolv.conf` naming that server (a bind mount in its own mount
//! namespace; the host's file is untouched). No query leaves the machine:
//! the only resolver anything can forward to is the test's.

use odek_e2e::dns_stub::DnsStub;
use odek_e2e::second_daemon::{DaemonOptions, SecondDaemon};
use odek_e2e::{random_hex, startup_line, stderr, stdout, Project, BUSYBOX_IMAGE, TEST_LABEL};

/// `odek <args>` in `p` against daemon `dd`.
fn odek_on(p: &Project, dd: &SecondDaemon, args: &[&str]) -> std::process::Output {
    p.run_odek_env(&[("DOCKER_HOST", &dd.host())], args)
}

/// The `nameserver` lines of a resolv.conf text.
fn nameservers(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("nameserver"))
        .map(|s| s.trim().to_string())
        .collect()
}

/// On this engine, a lookup from a plain container on an internal network
/// reaches the test's loopback resolver (the positive control: the leak is
/// real here and the test would see it); the same lookup from an odek
/// sandbox that reaches only that internal network does not, while the
/// service there still resolves by its alias, the sandbox's resolv.conf
/// names only Docker's embedded resolver, and the startup line, `describe`
/// and its JSON say the path is closed. On an engine with the fix, neither
/// lookup reaches it and odek says the engine refuses.
#[test]
fn an_internal_only_sandbox_sends_no_lookup_to_the_hosts_loopback_resolver() {
    let ip = DnsStub::address();
    let dd = SecondDaemon::start(DaemonOptions {
        resolv_conf: Some(format!("nameserver {ip}\n")),
        ..DaemonOptions::default()
    });
    // The daemon's own loopback: what it forwards "to the host's resolver"
    // from its namespace lands here.
    let stub = DnsStub::start_in(ip, Some(&dd.netns()));
    let version = dd.docker(&["version", "--format", "{{.Server.Version}}"]);
    let forwards = odek_core::dns::engine_forwards(&version).unwrap_or(true);
    dd.load_image(BUSYBOX_IMAGE);
    let tag = random_hex(12);
    let net = format!("odek-e2e-dns-{tag}");
    dd.docker(&[
        "network",
        "create",
        "--internal",
        "--label",
        TEST_LABEL,
        &net,
    ]);
    let service = dd.docker(&[
        "run",
        "-d",
        "--label",
        TEST_LABEL,
        "--network",
        &net,
        "--network-alias",
        "upstream-svc",
        BUSYBOX_IMAGE,
        "sleep",
        "600",
    ]);

    // Positive control: a plain container on the internal network.
    let control = format!("ctl-{tag}.leak.test");
    let plain = dd.docker_output(&[
        "run",
        "--rm",
        "--network",
        &net,
        BUSYBOX_IMAGE,
        "nslookup",
        &control,
    ]);
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert_eq!(
        stub.saw(&control),
        forwards,
        "engine {version}: a plain container's lookup {} the test's loopback resolver (it saw {:?}); nslookup said:\n{}{}",
        if forwards { "should reach" } else { "should not reach" },
        stub.seen(),
        stdout(&plain),
        stderr(&plain)
    );

    // The odek sandbox on the same network.
    let p = Project::new();
    let up = odek_on(
        &p,
        &dd,
        &[
            "sandbox",
            "up",
            "--sandbox-image",
            BUSYBOX_IMAGE,
            "--sandbox-networks",
            &net,
        ],
    );
    assert!(
        up.status.success(),
        "up failed:\n{}\nlog:\n{}",
        stderr(&up),
        dd.log()
    );
    let name = stdout(&up).trim().to_string();
    let line = startup_line(&up).expect("startup line");

    let leak = format!("odek-{tag}.leak.test");
    let script = format!(
        "cat /etc/resolv.conf; echo ---; nslookup {leak} 2>&1; echo ---; nslookup upstream-svc 2>&1"
    );
    let out = odek_on(
        &p,
        &dd,
        &["sandbox", "exec", &name, "--", "sh", "-c", &script],
    );
    let text = stdout(&out);
    let mut parts = text.split("---\n");
    let (resolv, _leaked, answer) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    );
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert!(
        !stub.saw(&leak),
        "the sandbox's lookup of {leak} reached the test's loopback resolver (it saw {:?})",
        stub.seen()
    );
    let word = if forwards { "dns=closed" } else { "dns=engine" };
    assert!(line.ends_with(word), "{line}");
    assert_eq!(nameservers(resolv), vec!["127.0.0.11"], "{resolv}");
    let service_ip = dd.docker(&[
        "inspect",
        "-f",
        &format!("{{{{(index .NetworkSettings.Networks \"{name}-link\").IPAddress}}}}"),
        &service,
    ]);
    assert!(
        !service_ip.is_empty() && answer.contains(&service_ip),
        "upstream-svc did not resolve to {service_ip:?} on the sandbox's link network:\n{text}{}",
        stderr(&out)
    );

    // What the container has, and what the agent is told.
    let dns = dd.docker(&["inspect", "-f", "{{json .HostConfig.Dns}}", &name]);
    let subnet = dd.docker(&[
        "network",
        "inspect",
        "-f",
        "{{range .IPAM.Config}}{{.Subnet}}{{end}}",
        &format!("{name}-link"),
    ]);
    if forwards {
        let servers: Vec<String> = serde_json::from_str(&dns).expect("HostConfig.Dns JSON");
        assert_eq!(servers.len(), 1, "{dns}");
        let (net, len) = subnet.split_once('/').expect("CIDR");
        let net: std::net::Ipv4Addr = net.parse().expect("subnet");
        let mask = u32::MAX << (32 - len.parse::<u32>().expect("prefix"));
        let sink: std::net::Ipv4Addr = servers[0].parse().expect("an IPv4 upstream");
        assert_eq!(
            u32::from(sink) & mask,
            u32::from(net),
            "odek's upstream {sink} is not inside the link network {subnet}"
        );
    } else {
        assert!(dns == "null" || dns == "[]", "{dns}");
    }
    let block = odek_on(&p, &dd, &["sandbox", "describe", &name]);
    assert!(block.status.success(), "{}", stderr(&block));
    assert!(
        stdout(&block).contains(
            "the internet is NOT reachable (no route out; names of outside hosts do not resolve)"
        ),
        "{}",
        stdout(&block)
    );
    let json = odek_on(&p, &dd, &["sandbox", "describe", "--json", &name]);
    let env: serde_json::Value = serde_json::from_slice(&json.stdout).expect("describe JSON");
    assert_eq!(
        env["dns_forwarding"],
        if forwards {
            "closed_by_odek"
        } else {
            "engine_refuses"
        },
        "{env}"
    );
    assert_eq!(env["internet"], false);
    let down = odek_on(&p, &dd, &["sandbox", "down", &name]);
    assert!(down.status.success(), "{}", stderr(&down));
}

/// The host's network interfaces by name.
fn host_links() -> Vec<String> {
    let out = std::process::Command::new("ip")
        .args(["-o", "link", "show"])
        .output()
        .expect("ip link");
    let mut names: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split(": ").nth(1))
        .map(|n| n.split('@').next().unwrap_or(n).to_string())
        .collect();
    names.sort();
    names
}

/// The harness touches nothing of the host and leaves nothing: while it
/// runs, with a network and a container of its own, the host's interfaces
/// are those it had (the machine daemon's `docker0` among them: a daemon
/// in the host's namespace with `--bridge=none` deletes it); once dropped,
/// the daemon's processes, socket and directory are gone.
#[test]
fn the_second_daemon_leaves_the_host_alone_and_nothing_behind() {
    // Veth ends of other tests' containers come and go meanwhile.
    let stable = |v: Vec<String>| -> Vec<String> {
        v.into_iter().filter(|n| !n.starts_with("veth")).collect()
    };
    let before = stable(host_links());
    let dd = SecondDaemon::start(DaemonOptions::default());
    let dir = dd.dir().to_path_buf();
    dd.load_image(BUSYBOX_IMAGE);
    dd.docker(&[
        "network",
        "create",
        "--label",
        TEST_LABEL,
        "odek-e2e-dd-net",
    ]);
    dd.docker(&[
        "run",
        "-d",
        "--network",
        "odek-e2e-dd-net",
        BUSYBOX_IMAGE,
        "sleep",
        "60",
    ]);
    let during = stable(host_links());
    let added: Vec<&String> = during.iter().filter(|n| !before.contains(n)).collect();
    let removed: Vec<&String> = before.iter().filter(|n| !during.contains(n)).collect();
    // Another test's network may come or go meanwhile, but never the
    // host's docker0, and never a bridge of this daemon's network.
    let theirs = dd.docker(&["network", "inspect", "-f", "{{.Id}}", "odek-e2e-dd-net"]);
    let bridge = format!("br-{}", &theirs[..12]);
    assert!(
        !during.contains(&bridge),
        "its bridge {bridge} is on the host: added {added:?}"
    );
    if before.iter().any(|n| n == "docker0") {
        assert!(
            during.iter().any(|n| n == "docker0"),
            "the host's docker0 is gone: removed {removed:?}"
        );
    }
    drop(dd);
    assert!(!dir.exists(), "{} is left", dir.display());
    let needle = dir.display().to_string();
    for e in std::fs::read_dir("/proc").expect("/proc").flatten() {
        if let Ok(cmd) = std::fs::read(e.path().join("cmdline")) {
            assert!(
                !String::from_utf8_lossy(&cmd).contains(&needle),
                "process {:?} of the second daemon is left: {}",
                e.file_name(),
                String::from_utf8_lossy(&cmd)
            );
        }
    }
}
