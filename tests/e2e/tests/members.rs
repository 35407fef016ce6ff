//! Who is on a sandbox's own networks, with the real engine (SPEC §4.4):
//! a container someone connects to the shared `odek-out` under a service's
//! alias takes that name from the sandbox (Docker's DNS answers with its
//! address first) until odek disconnects it, which it does before the next
//! command, and says; the same for a container connected to the sandbox's
//! link network from outside. A network recreated without the `internal`
//! it had is not accepted by name (nothing runs). A forged `dev.odek.link`
//! label gets no network removed, and `odek sandbox gc` names it.

use odek_e2e::{
    docker, docker_ok, stderr, stdout, unique, Project, TestNetwork, BASE_IMAGE, BUSYBOX_IMAGE,
    NS_LABEL, TEST_LABEL,
};

/// A container started by this test (busybox `sleep`), removed on drop.
struct Stranger {
    name: String,
}

impl Stranger {
    /// `docker run -d --network <network> [--network-alias <alias>]`.
    fn run(network: &str, alias: Option<&str>) -> Stranger {
        let name = unique("e2e-stranger");
        let mut args = vec![
            "run",
            "-d",
            "--label",
            TEST_LABEL,
            "--label",
            NS_LABEL,
            "--name",
            &name,
            "--network",
            network,
        ];
        if let Some(a) = alias {
            args.extend(["--network-alias", a]);
        }
        args.extend([BUSYBOX_IMAGE, "sleep", "600"]);
        docker(&args);
        Stranger { name }
    }

    /// Its IPv4 address on `network`.
    fn ip(&self, network: &str) -> String {
        docker(&[
            "inspect",
            "-f",
            &format!("{{{{(index .NetworkSettings.Networks \"{network}\").IPAddress}}}}"),
            &self.name,
        ])
    }

    /// The names of the networks it is on.
    fn networks(&self) -> String {
        docker(&[
            "inspect",
            "-f",
            "{{range $k, $v := .NetworkSettings.Networks}}{{$k}} {{end}}",
            &self.name,
        ])
    }
}

impl Drop for Stranger {
    fn drop(&mut self) {
        let _ = docker_ok(&["rm", "-f", &self.name]);
    }
}

/// `odek sandbox up <args>`: the sandbox's name.
fn up(p: &Project, args: &[&str]) -> String {
    let mut all = vec!["sandbox", "up", "--sandbox-image", BASE_IMAGE];
    all.extend_from_slice(args);
    stdout(&p.odek_ok(&all)).trim().to_string()
}

#[test]
fn strangers_on_odek_out_and_the_link_network_are_disconnected_before_the_next_command() {
    let p = Project::new();
    // A network that is not internal: the sandbox's way out is odek-out.
    let net = TestNetwork::create(&unique("odekmembers"), &[]);
    let web = Stranger::run(&net.name, Some("web"));
    let name = up(&p, &["--sandbox-networks", &net.name]);
    let link = format!("{name}-link");
    // The service as the sandbox reaches it: on the link network.
    let web_ip = web.ip(&link);
    // Someone with Docker access: a container on odek-out under the
    // service's alias, and one on the link network under it.
    let on_out = Stranger::run("odek-out", Some("web"));
    let other = TestNetwork::create(&unique("odekmembers-other"), &[]);
    let on_link = Stranger::run(&other.name, None);
    assert!(docker_ok(&[
        "network",
        "connect",
        "--alias",
        "web",
        &link,
        &on_link.name
    ]));
    // The premise: Docker's DNS now answers `web` with the strangers too.
    let seen = docker(&["exec", &name, "getent", "ahostsv4", "web"]);
    let (out_ip, link_ip) = (on_out.ip("odek-out"), on_link.ip(&link));
    assert!(
        seen.contains(&out_ip) || seen.contains(&link_ip),
        "the strangers ({out_ip} on odek-out, {link_ip} on the link) do not answer to web (the service is {web_ip}): {seen}"
    );
    let out = p.odek_ok(&["sandbox", "exec", &name, "--", "getent", "ahostsv4", "web"]);
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "disconnected container {} from odek-out",
            on_out.name
        )) && err.contains(&format!(
            "disconnected container {} from {link}",
            on_link.name
        )),
        "{err}"
    );
    let said = stdout(&out);
    let answers: Vec<&str> = said
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(
        !answers.is_empty() && answers.iter().all(|a| *a == web_ip),
        "web answers {answers:?}, the service is {web_ip}"
    );
    assert!(
        !on_out.networks().contains("odek-out"),
        "{}",
        on_out.networks()
    );
    assert!(
        !on_link.networks().contains(&link),
        "{}",
        on_link.networks()
    );
    // Nothing to do now: said once.
    let again = p.odek_ok(&["sandbox", "exec", &name, "--", "true"]);
    assert!(
        !stderr(&again).contains("disconnected"),
        "{}",
        stderr(&again)
    );
    p.odek_ok(&["sandbox", "down", &name]);
    drop((on_out, on_link, web, other, net));
}

#[test]
fn a_network_recreated_without_its_internal_flag_is_refused_and_nothing_runs() {
    let p = Project::new();
    let proj = unique("odekmembersint");
    let label = format!("com.docker.compose.project={proj}");
    let backend = format!("{proj}_backend");
    let net = TestNetwork::create(&backend, &["--internal", "--label", &label]);
    let svc = Stranger::run(&net.name, Some("db"));
    let name = up(&p, &["--sandbox-compose", &proj]);
    // `down` and an `up` of a network of that name and project, not
    // internal any more.
    drop(svc);
    drop(net);
    let widened = TestNetwork::create(&backend, &["--label", &label]);
    let svc = Stranger::run(&widened.name, Some("db"));
    let argv = p.marker_argv();
    let mut args = vec!["sandbox", "exec", &name, "--"];
    args.extend(argv.iter().map(String::as_str));
    let out = p.run_odek(&args);
    assert!(!out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("without `internal`") && stderr(&out).contains(&backend),
        "{}",
        stderr(&out)
    );
    assert!(!p.marker().exists(), "the command ran");
    assert!(
        !svc.networks().contains(&format!("{name}-link")),
        "the widened network's container was connected"
    );
    p.odek_ok(&["sandbox", "down", &name]);
    assert!(p.leftovers().is_empty(), "left: {:?}", p.leftovers());
    drop((svc, widened));
}

#[test]
fn a_forged_link_label_gets_no_network_removed_and_gc_names_it() {
    let p = Project::new();
    let forged = format!("odek-{}-link", odek_e2e::random_hex(12));
    let sandbox = forged.trim_end_matches("-link").to_string();
    let net = TestNetwork::create(
        &forged,
        &[
            "--internal",
            "--label",
            &format!("dev.odek.link={sandbox}"),
            "--label",
            "dev.odek.sandbox=link",
            "--label",
            "dev.odek.created=1",
        ],
    );
    let out = p.odek_ok(&["sandbox", "gc", "--all"]);
    assert!(
        docker_ok(&["network", "inspect", &net.id]),
        "a forged link label got its network removed"
    );
    assert!(
        stderr(&out).contains(&format!("left network {forged}")),
        "{}",
        stderr(&out)
    );
    // A launch sweeps orphans too: it leaves it as well.
    let name = up(&p, &["--sandbox-networks", &net.name]);
    assert!(docker_ok(&["network", "inspect", &net.id]));
    p.odek_ok(&["sandbox", "down", &name]);
    drop(net);
}
