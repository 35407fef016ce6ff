//! Network modes the container really ends up with (SPEC §4): attached
//! networks reach services by name; "no internet" is read from the routing
//! table only, always next to a positive control in the same test.

use odek_e2e::{
    docker, engine_major, network_id, random_hex, startup_line, stderr, stdout, Project,
    TestNetwork, BASE_IMAGE, PROJECT,
};

/// `default` lines of an `ip route` output.
fn default_routes(ip_route: &str) -> Vec<&str> {
    ip_route
        .lines()
        .filter(|l| l.trim_start().starts_with("default"))
        .collect()
}

/// Subnet and gateway of a network's first IPAM config.
fn ipam(name: &str) -> (String, String) {
    let s = docker(&[
        "network",
        "inspect",
        "-f",
        "{{range .IPAM.Config}}{{.Subnet}} {{.Gateway}}{{end}}",
        name,
    ]);
    let mut it = s.split_whitespace();
    (
        it.next().unwrap_or_default().to_string(),
        it.next().unwrap_or_default().to_string(),
    )
}

/// `odek sandbox up <args>`: the IDs of the networks the sandbox reaches
/// (SPEC §4.4: through its link network, [`odek_e2e::reached_network_ids`])
/// and its startup line; the sandbox is taken down again.
fn reached_by_up(p: &Project, args: &[&str]) -> (Vec<String>, String) {
    let mut all = vec!["sandbox", "up", "--sandbox-image", BASE_IMAGE];
    all.extend_from_slice(args);
    let up = p.odek_ok(&all);
    let name = stdout(&up).trim().to_string();
    let line = startup_line(&up).expect("startup line");
    let ids = odek_e2e::reached_network_ids(&name);
    p.odek_ok(&["sandbox", "down", &name]);
    (ids, line)
}

/// True when IPv4 address `ip` lies in `cidr` (`a.b.c.d/len`).
fn in_subnet(ip: &str, cidr: &str) -> bool {
    let parse = |s: &str| -> Option<u32> {
        let o: Vec<u32> = s
            .split('.')
            .map(|x| x.parse().ok())
            .collect::<Option<_>>()?;
        (o.len() == 4).then(|| (o[0] << 24) | (o[1] << 16) | (o[2] << 8) | o[3])
    };
    let Some((net, len)) = cidr.split_once('/') else {
        return false;
    };
    let (Some(ip), Some(net), Ok(len)) = (parse(ip), parse(net), len.parse::<u32>()) else {
        return false;
    };
    let mask = if len == 0 {
        0
    } else {
        u32::MAX << (32 - len.min(32))
    };
    ip & mask == net & mask
}

#[test]
fn internal_backend_reaches_services_by_name_without_a_route_out() {
    let p = Project::new();
    let backend = format!("{PROJECT}_backend");
    let out = p.odek_ok(&[
        "run",
        "--sandbox-networks",
        &backend,
        "--sandbox-image",
        BASE_IMAGE,
        "--",
        "sh",
        "-c",
        "redis-cli -h redis ping; pg_isready -h postgres; echo ---; ip route; echo ---; ls /sys/class/net",
    ]);
    let o = stdout(&out);
    let mut parts = o.split("---\n");
    let (answers, routes, ifaces) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    );
    // positive: both services answer by name on the internal network
    assert!(answers.contains("PONG"), "redis did not answer:\n{o}");
    assert!(
        answers.contains("accepting connections"),
        "postgres did not answer:\n{o}"
    );
    let line = startup_line(&out).expect("startup line");
    assert!(line.contains("network=attached"), "{line}");
    assert!(line.contains(&format!("networks={backend}")), "{line}");
    // SPEC §4.6: the services answered by name with odek's DNS upstream in
    // place on an engine before the CVE-2024-29018 fix.
    let version = docker(&["version", "--format", "{{.Server.Version}}"]);
    let dns = match odek_core::dns::engine_forwards(&version) {
        Some(false) => "dns=engine",
        _ => "dns=closed",
    };
    assert!(line.ends_with(dns), "{line}");
    // a single interface besides lo: no other network was attached
    let ifs: Vec<&str> = ifaces.split_whitespace().filter(|i| *i != "lo").collect();
    assert_eq!(ifs.len(), 1, "expected one interface, got {ifs:?}");
    // negative: no route out
    let defaults = default_routes(routes);
    if engine_major() >= 25 {
        assert!(
            defaults.is_empty(),
            "internal-only sandbox has a default route:\n{routes}"
        );
    } else {
        // Engines before 25.0 (moby#46603) still install a default route via
        // an internal network's own gateway; the daemon's isolation rules
        // drop what leaves the subnet. The sandbox's one network is its own
        // link network (SPEC §4.4), Internal as the plan reaches no
        // internet: every route stays on that one subnet, which is not the
        // backend's (the sandbox holds no endpoint there).
        let subnets: Vec<&str> = routes
            .lines()
            .filter(|l| !l.trim_start().starts_with("default"))
            .filter_map(|l| l.split_whitespace().next())
            .collect();
        assert_eq!(subnets.len(), 1, "one subnet expected:\n{routes}");
        let (backend_subnet, _) = ipam(&backend);
        assert_ne!(
            subnets[0], backend_subnet,
            "the sandbox is on the backend network itself:\n{routes}"
        );
        assert!(
            defaults.iter().all(|d| d
                .split_whitespace()
                .skip_while(|w| *w != "via")
                .nth(1)
                .is_some_and(|gw| in_subnet(gw, subnets[0]))),
            "a default route leaves the link network {}:\n{routes}",
            subnets[0]
        );
    }
    // positive control in the same test: the non-internal network has a
    // default route
    let out = p.odek_ok(&[
        "run",
        "--sandbox-networks",
        &format!("{PROJECT}_default"),
        "--sandbox-image",
        BASE_IMAGE,
        "--",
        "sh",
        "-c",
        "ip route; redis-cli -h redis ping",
    ]);
    let o = stdout(&out);
    assert_eq!(
        default_routes(&o).len(),
        1,
        "no default route on the default network:\n{o}"
    );
    assert!(o.contains("PONG"), "{o}");
    assert!(
        stderr(&out).contains("not internal"),
        "no warning for a non-internal network:\n{}",
        stderr(&out)
    );
    assert!(p.leftovers().is_empty());
}

#[test]
fn bridge_has_a_default_route_and_none_has_no_network() {
    let p = Project::new();
    let bridge = p.odek_ok(&[
        "run",
        "--sandbox-network",
        "bridge",
        "--sandbox-image",
        BASE_IMAGE,
        "--",
        "ip",
        "route",
    ]);
    let o = stdout(&bridge);
    assert_eq!(
        default_routes(&o).len(),
        1,
        "bridge sandbox has no default route:\n{o}"
    );
    let line = startup_line(&bridge).expect("startup line");
    assert!(line.contains("network=bridge"), "{line}");
    assert!(line.contains("networks=-"), "{line}");
    assert!(
        stderr(&bridge).contains("not isolated from the host"),
        "no default-bridge warning:\n{}",
        stderr(&bridge)
    );

    let none = p.odek_ok(&[
        "run",
        "--sandbox-image",
        BASE_IMAGE,
        "--",
        "sh",
        "-c",
        "ip route; echo ---; ls /sys/class/net",
    ]);
    let o = stdout(&none);
    let (routes, ifaces) = o.split_once("---").expect("separator");
    assert!(
        default_routes(routes).is_empty(),
        "mode none has a default route:\n{o}"
    );
    assert!(routes.trim().is_empty(), "mode none has routes:\n{o}");
    assert_eq!(ifaces.split_whitespace().collect::<Vec<_>>(), ["lo"], "{o}");
    let line = startup_line(&none).expect("startup line");
    assert!(line.contains("network=none"), "{line}");
    assert!(line.contains("networks=-"), "{line}");
    assert!(p.leftovers().is_empty());
}

#[test]
fn bridge_plus_attached_networks() {
    let p = Project::new();
    let out = p.odek_ok(&[
        "run",
        "--sandbox-network",
        "bridge",
        "--sandbox-networks",
        &format!("{PROJECT}_backend"),
        "--sandbox-image",
        BASE_IMAGE,
        "--",
        "sh",
        "-c",
        "pg_isready -h postgres; echo ---; ls /sys/class/net",
    ]);
    let o = stdout(&out);
    let (answer, ifaces) = o.split_once("---").expect("separator");
    assert!(answer.contains("accepting connections"), "{o}");
    let ifs: Vec<&str> = ifaces.split_whitespace().filter(|i| *i != "lo").collect();
    assert_eq!(ifs.len(), 2, "expected bridge + backend interfaces: {o}");
    let line = startup_line(&out).expect("startup line");
    assert!(line.contains("network=bridge+attached"), "{line}");
}

#[test]
fn lenient_downgrades_host_to_none_with_a_warning() {
    let p = Project::new();
    let args = [
        "run",
        "--sandbox-network",
        "host",
        "--sandbox-image",
        BASE_IMAGE,
        "--",
        "sh",
        "-c",
        "ip route; echo ---; ls /sys/class/net",
    ];
    let out = p.run_odek_env(&[("ODEK_SANDBOX_NETWORK_LENIENT", "1")], &args);
    let (o, e) = (stdout(&out), stderr(&out));
    assert_eq!(out.status.code(), Some(0), "stdout:\n{o}\nstderr:\n{e}");
    let warning = e
        .lines()
        .find(|l| l.contains("warning") && l.contains("host"))
        .unwrap_or_else(|| panic!("no downgrade warning:\n{e}"));
    assert!(warning.contains("none"), "{warning}");
    assert!(
        warning.contains("ODEK_SANDBOX_NETWORK_LENIENT"),
        "{warning}"
    );
    let line = startup_line(&out).expect("startup line");
    assert!(line.contains("network=none"), "{line}");
    let (routes, ifaces) = o.split_once("---").expect("separator");
    assert!(routes.trim().is_empty(), "host network leaked in:\n{o}");
    assert_eq!(ifaces.split_whitespace().collect::<Vec<_>>(), ["lo"], "{o}");

    // without the switch it is refused
    let p2 = Project::new();
    let mut argv: Vec<String> = args[..5].iter().map(|s| s.to_string()).collect();
    argv.push("--".into());
    argv.extend(p2.marker_argv());
    let out = p2.run_odek(&odek_e2e::strs(&argv));
    odek_e2e::assert_refused(&p2, &out, "sandbox_network must be");
}

#[test]
fn hex_looking_network_name_is_accepted_by_exact_name() {
    let p = Project::new();
    // "beef" + 2 hex chars: looks like an ID prefix, but is a real name.
    let net = (0..8)
        .find_map(|_| {
            let name = format!("beef{}", random_hex(2));
            let out = odek_e2e::run(std::process::Command::new("docker").args([
                "network",
                "create",
                "--label",
                odek_e2e::TEST_LABEL,
                "--label",
                odek_e2e::NS_LABEL,
                &name,
            ]));
            out.status.success().then(|| TestNetwork {
                name,
                id: stdout(&out).trim().to_string(),
            })
        })
        .expect("could not create a beefXX network");
    let (ids, line) = reached_by_up(&p, &["--sandbox-networks", &net.name]);
    assert!(line.contains(&format!("networks={}", net.name)), "{line}");
    assert_eq!(
        ids,
        std::slice::from_ref(&net.id),
        "not reaching {}",
        net.name
    );
    assert!(p.leftovers().is_empty());
}

#[test]
fn name_equal_to_another_networks_id_prefix_selects_the_named_network() {
    let p = Project::new();
    let a = TestNetwork::create(&odek_e2e::unique("odekshadowa"), &["--internal"]);
    // A network literally named like the first 10 hex chars of A's ID.
    let b = TestNetwork::create(&a.id[..10], &["--internal"]);
    assert_eq!(network_id(&b.name), b.id, "docker resolves the name to B");
    let (ids, _) = reached_by_up(&p, &["--sandbox-networks", &b.name]);
    assert_eq!(ids, std::slice::from_ref(&b.id), "not reaching {}", b.name);
    assert!(
        !ids.contains(&a.id),
        "reaching the ID-prefix match {}",
        a.name
    );
    assert!(p.leftovers().is_empty());
}

#[test]
fn union_of_compose_and_names_is_deduplicated_in_request_order() {
    let p = Project::new();
    let default = format!("{PROJECT}_default");
    let (ids, line) = reached_by_up(
        &p,
        &[
            "--sandbox-compose",
            PROJECT,
            "--sandbox-networks",
            &format!("{default},{default}"),
        ],
    );
    let mut want = vec![
        network_id(&default),
        network_id(&format!("{PROJECT}_backend")),
    ];
    want.sort();
    assert_eq!(ids, want, "expected 2 networks reached (deduplicated)");
    assert!(
        line.contains(&format!(" networks={default},{PROJECT}_backend ")),
        "not de-duplicated in request order: {line}"
    );
}

#[test]
fn network_lookup_is_case_sensitive() {
    let p = Project::new();
    let upper = format!("{PROJECT}_backend").to_uppercase();
    let mut argv: Vec<String> = [
        "run",
        "--sandbox-networks",
        &upper,
        "--sandbox-image",
        BASE_IMAGE,
        "--",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    argv.extend(p.marker_argv());
    let out = p.run_odek(&odek_e2e::strs(&argv));
    odek_e2e::assert_refused(&p, &out, "not found");
    // positive control: the exact spelling works
    p.odek_ok(&[
        "run",
        "--sandbox-networks",
        &format!("{PROJECT}_backend"),
        "--sandbox-image",
        BASE_IMAGE,
        "--",
        "true",
    ]);
}
