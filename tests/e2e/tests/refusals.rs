//! Setup errors are fatal in every mode (SPEC §3.4, §4.1, §6.2, §6.3): exit
//! 125, a message naming the cause, nothing run on the host, no container
//! left. Each case asks odek to run a command that would create a marker
//! file if it ran on the host.

use std::process::Output;

use odek_e2e::{
    assert_refused, docker, network_id, stdout, strs, unique, Project, TestNetwork, BASE_IMAGE,
    PROJECT,
};

/// `odek run <flags> --sandbox-image <base> -- sh -c <marker>` with `env`,
/// asserted refused with `needle` in stderr.
fn refused(flags: &[&str], env: &[(&str, &str)], needle: &str) -> String {
    let p = Project::new();
    let mut argv: Vec<String> = vec!["run".into()];
    argv.extend(flags.iter().map(|s| s.to_string()));
    if !flags.contains(&"--sandbox-image") {
        argv.extend(["--sandbox-image".into(), BASE_IMAGE.into()]);
    }
    argv.push("--".into());
    argv.extend(p.marker_argv());
    let out = p.run_odek_env(env, &strs(&argv));
    assert_refused(&p, &out, needle);
    odek_e2e::stderr(&out)
}

#[test]
fn missing_network_is_refused_implicit() {
    let name = unique("odekmissing");
    let err = refused(&["--sandbox-networks", &name], &[], "not found");
    assert!(err.contains(&name), "{err}");
}

#[test]
fn missing_network_is_refused_explicit() {
    let name = unique("odekmissing");
    let err = refused(
        &["--sandbox", "--sandbox-networks", &name],
        &[],
        "not found",
    );
    assert!(err.contains(&name), "{err}");
}

#[test]
fn missing_network_is_refused_from_env() {
    let name = unique("odekmissing");
    refused(&[], &[("ODEK_SANDBOX_NETWORKS", &name)], "not found");
}

#[test]
fn network_mode_host_is_refused() {
    let err = refused(&["--sandbox-network", "host"], &[], "sandbox_network");
    // points to the ways of attaching networks
    assert!(
        err.contains("--sandbox-networks") || err.contains("sandbox_networks"),
        "{err}"
    );
    assert!(
        err.contains("--sandbox-compose") || err.contains("sandbox_compose"),
        "{err}"
    );
}

#[test]
fn network_mode_container_is_refused() {
    refused(
        &["--sandbox-network", "container:abc"],
        &[],
        "sandbox_network",
    );
}

#[test]
fn reserved_name_bridge_in_networks_is_refused() {
    refused(&["--sandbox-networks", "bridge"], &[], "reserved");
}

#[test]
fn reserved_name_host_in_networks_is_refused() {
    refused(&["--sandbox-networks", "host"], &[], "reserved");
}

#[test]
fn container_mode_in_networks_is_refused() {
    refused(&["--sandbox-networks", "container:x"], &[], "container:x");
}

#[test]
fn network_id_prefix_12_is_refused() {
    let id = network_id("bridge");
    refused(&["--sandbox-networks", &id[..12]], &[], "ID-prefix");
}

#[test]
fn network_id_prefix_4_is_refused() {
    let id = network_id("bridge");
    refused(&["--sandbox-networks", &id[..4]], &[], "ID-prefix");
}

#[test]
fn full_network_id_is_refused() {
    // Even a full ID of a real, attachable network is not a name.
    let id = network_id(&format!("{PROJECT}_backend"));
    refused(&["--sandbox-networks", &id], &[], "ID-prefix");
}

#[test]
fn compose_project_not_running_is_refused() {
    let project = unique("notrunning");
    let err = refused(&["--sandbox-compose", &project], &[], "not running");
    assert!(
        err.contains(&format!(
            "docker compose -p {project} -f <compose file> up -d"
        )),
        "no start hint:\n{err}"
    );
}

#[test]
fn compose_project_typo_is_refused_suggesting_the_running_project() {
    // One letter more than the fixture's project: refused, never matched
    // fuzzily, and the running fixture is suggested.
    let typo = format!("{PROJECT}x");
    let err = refused(&["--sandbox-compose", &typo], &[], "not running");
    assert!(
        err.contains(&format!("did you mean \"{PROJECT}\"?")),
        "no suggestion:\n{err}"
    );
    // At most five running projects are named, then a count.
    let listed = err
        .split("running projects: ")
        .nth(1)
        .and_then(|r| r.split(';').next())
        .unwrap_or_else(|| panic!("no running-projects hint:\n{err}"));
    let names: Vec<&str> = listed
        .split(", ")
        .filter(|n| !(n.starts_with("and ") && n.ends_with(" more")))
        .collect();
    assert!(names.len() <= 5, "{listed}");
    assert_eq!(names.first(), Some(&PROJECT), "closest first: {listed}");
}

#[test]
fn invalid_compose_project_name_is_refused() {
    let err = refused(&["--sandbox-compose", "Shop!"], &[], "Shop!");
    assert!(err.contains("not valid"), "{err}");
    // the normalised spelling is a hint, never matched fuzzily
    assert!(err.contains("\"shop\""), "{err}");
}

#[test]
fn uppercase_compose_project_is_not_matched_fuzzily() {
    // "ODEKE2E" normalises to the running fixture project; it must still be refused.
    let err = refused(
        &["--sandbox-compose", &PROJECT.to_uppercase()],
        &[],
        "not valid",
    );
    assert!(err.contains(PROJECT), "no hint naming {PROJECT}:\n{err}");
}

#[test]
fn daemon_unreachable_with_compose_configured_is_refused() {
    // Networks are configured, so the implicit-mode fallback is impossible.
    refused(
        &["--sandbox-compose", PROJECT],
        &[("DOCKER_HOST", "unix:///nonexistent.sock")],
        "unreachable",
    );
}

#[test]
fn daemon_unreachable_with_networks_from_env_is_refused() {
    refused(
        &[],
        &[
            ("DOCKER_HOST", "unix:///nonexistent.sock"),
            ("ODEK_SANDBOX_NETWORKS", "odeke2e_backend"),
        ],
        "unreachable",
    );
}

#[test]
fn an_unreachable_ssh_docker_host_is_refused_under_sandbox_naming_what_ssh_said() {
    // ssh:// is an endpoint now (SPEC §6.2.2): odek runs the system's ssh,
    // so an engine it cannot reach is daemon-unreachable, and `--sandbox`
    // makes that a refusal rather than a host run. Port 1 on loopback is
    // closed: the only traffic is one refused connection on this machine.
    let err = refused(
        &["--sandbox"],
        &[("DOCKER_HOST", "ssh://odek-test@127.0.0.1:1")],
        "daemon-unreachable",
    );
    assert!(
        err.contains("ssh said"),
        "ssh's own message missing:\n{err}"
    );
    assert!(
        err.contains("127.0.0.1"),
        "the endpoint is not named:\n{err}"
    );
}

#[test]
fn docker_host_without_scheme_is_a_config_error() {
    let err = refused(
        &[],
        &[("DOCKER_HOST", "/var/run/docker.sock")],
        "DOCKER_HOST",
    );
    assert!(err.contains("(config)"), "not a config error:\n{err}");
}

#[test]
fn bad_memory_is_refused_in_implicit_mode() {
    refused(&["--sandbox-memory", "lots"], &[], "sandbox_memory");
}

#[test]
fn zero_and_negative_pids_limit_are_refused() {
    refused(&["--sandbox-pids-limit", "0"], &[], "pids");
    refused(&["--sandbox-pids-limit", "-1"], &[], "pids");
}

#[test]
fn invalid_image_reference_is_refused() {
    refused(
        &["--sandbox-image", "Not A Valid//Ref"],
        &[],
        "Not A Valid//Ref",
    );
}

#[test]
fn duplicate_network_names_are_refused_as_ambiguous() {
    let name = unique("odekdup");
    let a = TestNetwork::create_unchecked(&name);
    let b = TestNetwork::create_unchecked(&name);
    assert_ne!(a.id, b.id);
    let listed = docker(&[
        "network",
        "ls",
        "-q",
        "--no-trunc",
        "--filter",
        &format!("name=^{name}$"),
    ]);
    assert_eq!(
        listed.lines().count(),
        2,
        "docker did not make two networks named {name}"
    );
    let err = refused(&["--sandbox-networks", &name], &[], "ambiguous");
    assert!(err.contains(&a.id[..12]), "first short ID missing:\n{err}");
    assert!(err.contains(&b.id[..12]), "second short ID missing:\n{err}");
}

#[test]
fn compose_project_networks_of_one_name_are_refused_before_create() {
    // Docker itself refuses the ambiguous name only when the container
    // starts; odek refuses it at resolve, so nothing is created.
    let project = unique("odekdupc");
    let name = format!("{project}_net");
    let a = TestNetwork::create_unchecked_labelled(
        &name,
        &[("com.docker.compose.project", project.as_str())],
    );
    let b = TestNetwork::create_unchecked_labelled(
        &name,
        &[("com.docker.compose.project", project.as_str())],
    );
    assert_ne!(a.id, b.id);
    let err = refused(&["--sandbox-compose", &project], &[], "ambiguous");
    assert!(
        err.contains("error (config)"),
        "refused at resolve, not by Docker at start:\n{err}"
    );
    assert!(err.contains(&a.id[..12]), "first short ID missing:\n{err}");
    assert!(err.contains(&b.id[..12]), "second short ID missing:\n{err}");
    // No container of any kind joined either network.
    for n in [&a, &b] {
        let members = docker(&["network", "inspect", "-f", "{{len .Containers}}", &n.id]);
        assert_eq!(members.trim(), "0", "a container joined {}", n.id);
    }
}

#[test]
fn more_than_eight_networks_are_refused() {
    let nets: Vec<TestNetwork> = (0..9)
        .map(|_| TestNetwork::create(&unique("odeknine"), &["--internal"]))
        .collect();
    let names: Vec<&str> = nets.iter().map(|n| n.name.as_str()).collect();
    let list = names.join(",");
    refused(&["--sandbox-networks", &list], &[], "at most 8");
    // positive control: 8 of them are accepted
    let p = Project::new();
    let eight = names[..8].join(",");
    // The sandbox reaches all 8 through its link network (SPEC §4.4).
    let up = p.odek_ok(&[
        "sandbox",
        "up",
        "--sandbox-networks",
        &eight,
        "--sandbox-image",
        BASE_IMAGE,
    ]);
    let name = stdout(&up).trim().to_string();
    let mut want: Vec<String> = nets[..8].iter().map(|n| n.id.clone()).collect();
    want.sort();
    assert_eq!(
        odek_e2e::reached_network_ids(&name),
        want,
        "expected 8 networks reached"
    );
    p.odek_ok(&["sandbox", "down", &name]);
    assert!(p.leftovers().is_empty());
    // the limit applies to the union: 2 from the Compose project + 7 named
    let seven = names[..7].join(",");
    refused(
        &["--sandbox-compose", PROJECT, "--sandbox-networks", &seven],
        &[],
        "at most 8",
    );
}

#[test]
fn a_sandbox_whose_idle_process_cannot_start_is_refused_with_the_reason() {
    // With a pids limit of 1, docker-init is the only process the container
    // may have: the idle `cat` cannot start, the container stops at once.
    let err = refused(
        &["--sandbox-pids-limit", "1"],
        &[],
        "the container is not running",
    );
    assert!(err.contains("idle process `cat`"), "{err}");
    assert!(err.contains("exit code"), "{err}");
    assert!(
        err.contains("the pids limit 1 from flag --sandbox-pids-limit"),
        "names the limit and where it came from: {err}"
    );
    assert!(!err.contains("networks differ"), "{err}");
}

#[test]
fn through_the_exec_api_a_sandbox_whose_path_has_no_cat_is_refused_with_the_reason() {
    // The operator's own sandbox_env hides `cat`: docker-init cannot
    // start the idle process (exit 127), whether or not the inspect right
    // after start still finds the container running. (odek's supervisor
    // is started by its absolute path, and needs no PATH.)
    let p = Project::new().exec_api();
    std::fs::write(
        p.home.path().join("config.json"),
        r#"{"sandbox_env": {"PATH": "/nonexistent"}}"#,
    )
    .expect("user config");
    let mut argv = vec![
        "run".to_string(),
        "--sandbox-image".into(),
        BASE_IMAGE.into(),
        "--sandbox-network".into(),
        "none".into(),
        "--".into(),
    ];
    argv.extend(p.marker_argv());
    let out = p.run_odek(&strs(&argv));
    assert_refused(&p, &out, "the container is not running (exit code 127)");
    let err = odek_e2e::stderr(&out);
    assert!(
        err.contains("PATH, set by sandbox_env from user config"),
        "names the PATH setting: {err}"
    );
}

/// An image built from the base whose ENTRYPOINT ignores its arguments,
/// removed again on drop (labelled like every e2e object).
struct ImageIgnoringArgs(String);

impl ImageIgnoringArgs {
    fn build() -> ImageIgnoringArgs {
        let tag = format!(
            "{}/ignores-args:{}",
            odek_e2e::IMAGE_PREFIX,
            odek_e2e::random_hex(8)
        );
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(
            dir.path().join("Dockerfile"),
            format!("FROM {BASE_IMAGE}\nENTRYPOINT [\"sh\", \"-c\", \"exec sleep 3600\"]\n"),
        )
        .expect("Dockerfile");
        docker(&[
            "build",
            "-q",
            "--label",
            odek_e2e::TEST_LABEL,
            "-t",
            &tag,
            &dir.path().display().to_string(),
        ]);
        ImageIgnoringArgs(tag)
    }
}

impl Drop for ImageIgnoringArgs {
    fn drop(&mut self) {
        let _ = odek_e2e::docker_ok(&["rmi", "-f", &self.0]);
    }
}

#[test]
fn through_the_exec_api_an_image_whose_entrypoint_ignores_the_idle_command_is_refused() {
    // The container runs, but not odek's idle process: odek does not hand
    // out a sandbox whose main process it did not choose.
    let image = ImageIgnoringArgs::build();
    let err = refused(
        &["--sandbox-image", &image.0, "--sandbox-network", "none"],
        &[("ODEK_SUPERVISOR", "")],
        "did not start within 5 s",
    );
    assert!(err.contains("sleep 3600"), "names what runs instead: {err}");
}

#[test]
fn through_the_supervisor_an_images_entrypoint_never_runs() {
    // odek's supervisor replaces the image's ENTRYPOINT: the sandbox's
    // main process is odek's own, and the command runs.
    let image = ImageIgnoringArgs::build();
    let p = Project::new();
    let out = p.run_odek(&[
        "run",
        "--sandbox-image",
        &image.0,
        "--sandbox-network",
        "none",
        "--",
        "sh",
        "-c",
        "ps -eo args= | grep -c '^sleep 3600' || true",
    ]);
    let err = odek_e2e::stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(
        odek_e2e::stdout(&out).trim(),
        "0",
        "the image's entrypoint ran: {err}"
    );
    assert!(p.leftovers().is_empty(), "{:?}", p.leftovers());
}

#[test]
fn a_name_that_could_shadow_a_service_is_refused() {
    let p = Project::new();
    let out = p.run_odek(&[
        "sandbox",
        "up",
        "--sandbox-compose",
        PROJECT,
        "--sandbox-image",
        BASE_IMAGE,
        "--name",
        "postgres",
    ]);
    // `odek sandbox …` commands exit 1 on a refusal (125 is `odek run`'s).
    assert_eq!(out.status.code(), Some(1), "{}", odek_e2e::stderr(&out));
    let err = odek_e2e::stderr(&out);
    assert!(err.contains("must start with \"odek-\""), "{err}");
    assert!(p.leftovers().is_empty(), "{:?}", p.leftovers());
    assert!(
        docker(&["ps", "-aq", "--filter", "name=^/postgres$"])
            .trim()
            .is_empty(),
        "a container named postgres exists"
    );
}

/// Unmounts a bind mount when dropped.
struct BindMount(std::path::PathBuf);

impl Drop for BindMount {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn a_socket_bind_mounted_over_a_file_deep_in_the_workdir_is_refused() {
    // The directory listing says "regular file"; only lstat (or the mount
    // table) shows the socket. The socket is the test's own, not Docker's.
    let p = Project::new();
    let deep = p.path().join("a/b/c/d/e");
    std::fs::create_dir_all(&deep).expect("mkdir");
    let target = deep.join("api");
    std::fs::write(&target, "").expect("file");
    let sockdir = tempfile::tempdir().expect("tempdir");
    let sock = sockdir.path().join("s.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&sock).expect("bind");
    let st = std::process::Command::new("mount")
        .arg("--bind")
        .arg(&sock)
        .arg(&target)
        .status()
        .expect("mount");
    assert!(
        st.success(),
        "mount --bind needs root (the e2e suite runs as root)"
    );
    let _mount = BindMount(target.clone());
    let mut argv: Vec<String> = ["run", "--sandbox", "--sandbox-image", BASE_IMAGE, "--"]
        .into_iter()
        .map(String::from)
        .collect();
    argv.extend(p.marker_argv());
    let out = p.run_odek(&strs(&argv));
    assert_refused(&p, &out, "mounted at");
    assert!(odek_e2e::stderr(&out).contains("a/b/c/d/e/api"));
}

/// `odek -C <dir> run --sandbox-image <base> -- <argv>` with `p`'s
/// `$ODEK_HOME` and a clean `ODEK_*` environment, stdin closed.
fn odek_in(p: &Project, dir: &std::path::Path, env: &[(&str, &str)], argv: &[String]) -> Output {
    let mut c = std::process::Command::new(odek_e2e::odek_bin());
    c.current_dir(p.path())
        .arg("-C")
        .arg(dir)
        .args(["run", "--sandbox-image", BASE_IMAGE, "--"])
        .env("ODEK_HOME", p.home.path())
        .args(argv)
        .stdin(std::process::Stdio::null());
    for (k, _) in std::env::vars() {
        if k.starts_with("ODEK_") && k != "ODEK_HOME" && k != "ODEK_BIN" {
            c.env_remove(&k);
        }
    }
    for (k, v) in env {
        c.env(k, v);
    }
    odek_e2e::run_timeout(&mut c, odek_e2e::ODEK_TIMEOUT)
}

/// Containers labelled with `dir` as their working directory.
fn leftovers_of(dir: &std::path::Path) -> Vec<String> {
    docker(&[
        "ps",
        "-aq",
        "--filter",
        "label=dev.odek.sandbox=true",
        "--filter",
        &format!("label=dev.odek.workdir={}", dir.display()),
    ])
    .lines()
    .map(str::to_string)
    .collect()
}

#[test]
fn a_socket_two_levels_down_in_the_workdir_is_refused() {
    // Any socket, not only docker.sock: a root-owned tmux socket there would
    // let the root sandbox run commands on the host.
    let p = Project::new();
    std::fs::create_dir_all(p.path().join("a/b")).expect("mkdir");
    let _listener =
        std::os::unix::net::UnixListener::bind(p.path().join("a/b/sock")).expect("bind");
    let mut argv: Vec<String> = ["run", "--sandbox-image", BASE_IMAGE, "--"]
        .into_iter()
        .map(String::from)
        .collect();
    argv.extend(p.marker_argv());
    let out = p.run_odek(&strs(&argv));
    assert_refused(&p, &out, "holds a Unix socket");
    let err = odek_e2e::stderr(&out);
    assert!(err.contains("a/b/sock"), "{err}");
    assert!(err.contains("remove or move the socket"), "{err}");
}

#[test]
fn tmp_itself_is_refused_as_the_workdir() {
    // /tmp holds other programs' sockets (tmux-0/default, ssh agents).
    let p = Project::new();
    let out = odek_in(&p, std::path::Path::new("/tmp"), &[], &p.marker_argv());
    assert_eq!(out.status.code(), Some(125), "{}", odek_e2e::stderr(&out));
    let err = odek_e2e::stderr(&out);
    assert!(err.contains("shared directory /tmp"), "{err}");
    assert!(!p.marker().exists(), "the command ran on the host");
    assert!(leftovers_of(std::path::Path::new("/tmp")).is_empty());
}

#[test]
fn a_directory_bind_mounted_deep_in_the_workdir_is_refused() {
    // Below the socket scan's depth; with /var/run it would be the Docker
    // socket. The mounted directory is the test's own.
    let p = Project::new();
    let deep = p.path().join("a/b/c/d/e");
    std::fs::create_dir_all(&deep).expect("mkdir");
    let src = tempfile::tempdir().expect("tempdir");
    std::fs::write(src.path().join("inside"), "").expect("file");
    let st = std::process::Command::new("mount")
        .arg("--bind")
        .arg(src.path())
        .arg(&deep)
        .status()
        .expect("mount");
    assert!(
        st.success(),
        "mount --bind needs root (the e2e suite runs as root)"
    );
    let _mount = BindMount(deep.clone());
    let mut argv: Vec<String> = ["run", "--sandbox", "--sandbox-image", BASE_IMAGE, "--"]
        .into_iter()
        .map(String::from)
        .collect();
    argv.extend(p.marker_argv());
    let out = p.run_odek(&strs(&argv));
    assert_refused(&p, &out, "has a file system mounted at");
    let err = odek_e2e::stderr(&out);
    assert!(err.contains("a/b/c/d/e"), "{err}");
    assert!(err.contains("unmount it"), "{err}");
}

/// A directory name that clears the screen and retitles the terminal when
/// printed raw.
const HOSTILE_NAME: &str = "e\u{1b}]0;x\u{7}\u{1b}[2Jx";

/// Asserts that neither stream carries an ESC or BEL byte.
fn assert_no_escapes(out: &Output) {
    for (name, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
        assert!(
            !bytes.iter().any(|b| *b == 0x1b || *b == 0x07),
            "raw ESC/BEL on {name}: {:?}",
            String::from_utf8_lossy(bytes)
        );
    }
}

#[test]
fn a_hostile_workdir_name_never_reaches_the_terminal_raw() {
    let p = Project::new();
    let dir = p.path().join(HOSTILE_NAME);
    std::fs::create_dir(&dir).expect("mkdir");
    // Refused (a socket at its top level): the error names the directory.
    let listener = std::os::unix::net::UnixListener::bind(dir.join("s")).expect("bind");
    let out = odek_in(&p, &dir, &[], &p.marker_argv());
    assert_eq!(out.status.code(), Some(125), "{}", odek_e2e::stderr(&out));
    assert!(odek_e2e::stderr(&out).contains("\\u{1b}]0;x"), "escaped");
    assert_no_escapes(&out);
    assert!(!p.marker().exists(), "the command ran on the host");
    assert!(leftovers_of(&dir).is_empty());
    drop(listener);
    std::fs::remove_file(dir.join("s")).expect("rm socket");
    // Project settings that need approval, no terminal: refused, naming the
    // project config.
    std::fs::write(
        dir.join("odek.json"),
        format!(r#"{{"sandbox_compose_project": "{PROJECT}"}}"#),
    )
    .expect("odek.json");
    let out = odek_in(&p, &dir, &[], &p.marker_argv());
    assert_eq!(out.status.code(), Some(125), "{}", odek_e2e::stderr(&out));
    assert!(
        odek_e2e::stderr(&out).contains("no terminal"),
        "{}",
        odek_e2e::stderr(&out)
    );
    assert_no_escapes(&out);
    assert!(!p.marker().exists(), "the command ran on the host");
    // Approved by the environment: the notice names the project config too.
    let out = odek_in(
        &p,
        &dir,
        &[("ODEK_APPROVE_PROJECT_SANDBOX", "1")],
        &["true".to_string()],
    );
    assert_eq!(out.status.code(), Some(0), "{}", odek_e2e::stderr(&out));
    assert!(
        odek_e2e::stderr(&out).contains("approved by ODEK_APPROVE_PROJECT_SANDBOX=1"),
        "{}",
        odek_e2e::stderr(&out)
    );
    assert_no_escapes(&out);
    assert!(leftovers_of(&dir).is_empty(), "{:?}", leftovers_of(&dir));
}
