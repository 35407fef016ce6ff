//! Long-lived sandboxes (SPEC §9, §10.3): `odek sandbox up`, `describe`
//! (text, `--json`, `--tool`), `exec`, `ls` and `down` against the real
//! Compose fixture.

use odek_e2e::{docker_ok, startup_line, stdout, Project, BASE_IMAGE, PROJECT};

/// The text between `<untrusted_content_<nonce> source="docker">` and its
/// closing tag, plus the nonce; panics when the wrapper is missing or broken.
fn untrusted_block(text: &str) -> (String, String) {
    let open = "<untrusted_content_";
    let start = text
        .find(open)
        .unwrap_or_else(|| panic!("no <untrusted_content_…> wrapper in:\n{text}"));
    let rest = &text[start + open.len()..];
    let nonce: String = rest
        .chars()
        .take_while(char::is_ascii_alphanumeric)
        .collect();
    assert!(
        nonce.len() >= 16,
        "nonce {nonce:?} is shorter than 64 bits of hex:\n{text}"
    );
    let head_end = rest
        .find('>')
        .unwrap_or_else(|| panic!("unterminated opening tag:\n{text}"));
    assert!(
        rest[..head_end].contains("source=\"docker\""),
        "opening tag lacks source=\"docker\":\n{text}"
    );
    let close = format!("</untrusted_content_{nonce}>");
    let body_start = head_end + 1;
    let body_len = rest[body_start..]
        .find(&close)
        .unwrap_or_else(|| panic!("no closing tag {close} in:\n{text}"));
    (nonce, rest[body_start..body_start + body_len].to_string())
}

#[test]
fn compose_sandbox_up_describe_exec_ls_down() {
    let p = Project::new();
    let up = p.odek_ok(&[
        "sandbox",
        "up",
        "--sandbox-compose",
        PROJECT,
        "--sandbox-image",
        BASE_IMAGE,
    ]);
    let name = stdout(&up).trim().to_string();
    assert!(
        name.starts_with("odek-"),
        "unexpected sandbox name {name:?}"
    );
    assert!(
        docker_ok(&["container", "inspect", &name]),
        "`sandbox up` printed {name} but no such container exists"
    );
    let line = startup_line(&up).expect("startup line of `sandbox up`");
    assert!(line.contains("network=attached"), "{line}");

    // What Docker reports for the container (SPEC §4.1, §6.1).
    let inspect: serde_json::Value =
        serde_json::from_str(&odek_e2e::docker(&["inspect", &name])).expect("docker inspect JSON");
    let c = &inspect[0];
    let short_id = &c["Id"].as_str().expect("Id")[..12];
    let mode = c["HostConfig"]["NetworkMode"].as_str().unwrap_or_default();
    let mut ids = [
        odek_e2e::network_id(&format!("{PROJECT}_backend")),
        odek_e2e::network_id(&format!("{PROJECT}_default")),
    ];
    ids.sort();
    // SPEC §4.4: the sandbox is on its own link network only (by full ID),
    // the project's services are connected to that link.
    assert_eq!(
        mode,
        odek_e2e::network_id(&format!("{name}-link")),
        "NetworkMode {mode:?} is not the link network's full ID (the raw name was sent?)"
    );
    assert_eq!(
        odek_e2e::reached_network_ids(&name),
        ids,
        "reached networks"
    );
    let nets = c["NetworkSettings"]["Networks"]
        .as_object()
        .expect("networks");
    for (n, v) in nets {
        let aliases: Vec<&str> = v["Aliases"]
            .as_array()
            .map(|a| a.iter().filter_map(|x| x.as_str()).collect())
            .unwrap_or_default();
        assert!(
            aliases.iter().all(|a| *a == short_id),
            "odek added a network alias on {n}: {aliases:?}"
        );
    }
    let hc = &c["HostConfig"];
    assert_eq!(hc["Init"], true, "Init");
    assert_eq!(hc["PidsLimit"], 4096, "PidsLimit");
    assert_eq!(hc["CapDrop"], serde_json::json!(["ALL"]), "CapDrop");
    assert!(
        hc["SecurityOpt"].to_string().contains("no-new-privileges"),
        "SecurityOpt {}",
        hc["SecurityOpt"]
    );
    assert_eq!(c["Config"]["WorkingDir"], "/workspace", "WorkingDir");
    assert_eq!(c["Config"]["Labels"]["dev.odek.sandbox"], "true", "label");

    // describe, prompt block
    let text = stdout(&p.odek_ok(&["sandbox", "describe", &name]));
    assert!(text.contains("attached networks only"), "{text}");
    assert!(text.contains("internet is reachable"), "{text}");
    assert!(!text.contains("NOT reachable"), "{text}");
    assert!(text.contains("/workspace"), "{text}");
    // What the agent must know to work there (SPEC §9.1): edits land on
    // the host at once, /tmp is noexec, who it runs as, and what the test
    // image has (bash, psql, redis-cli: probed once per image ID) and not.
    assert!(
        text.contains("`/workspace` is the developer's live checkout"),
        "{text}"
    );
    assert!(
        text.contains("lands on the developer's machine at once"),
        "{text}"
    );
    assert!(
        text.contains("`/tmp` is a private scratch space mounted `noexec`"),
        "{text}"
    );
    assert!(text.contains("- Commands run as "), "{text}");
    assert!(
        text.contains("the image has: bash, psql, redis-cli; not there: git, curl"),
        "{text}"
    );
    let (nonce1, body) = untrusted_block(&text);
    assert!(
        body.contains("postgres"),
        "postgres not listed inside the wrapper:\n{text}"
    );
    assert!(
        body.contains("redis"),
        "redis not listed inside the wrapper:\n{text}"
    );
    assert!(body.contains(&format!("{PROJECT}_backend")), "{body}");
    assert!(body.contains(&format!("{PROJECT}_default")), "{body}");
    // The service names must not leak outside the wrapper as claims.
    let outside = text.replace(&body, "");
    assert!(
        !outside.contains("postgres"),
        "postgres outside the wrapper:\n{text}"
    );
    // A fresh nonce per render.
    let text2 = stdout(&p.odek_ok(&["sandbox", "describe", &name]));
    let (nonce2, _) = untrusted_block(&text2);
    assert_ne!(nonce1, nonce2, "the nonce is reused across renders");

    // describe --json
    let json = stdout(&p.odek_ok(&["sandbox", "describe", &name, "--json"]));
    let v: serde_json::Value = serde_json::from_str(&json).expect("describe --json is JSON");
    assert_eq!(v["network"], "attached", "{json}");
    assert_eq!(v["internet"], true, "{json}");
    assert_eq!(
        v["tools"],
        serde_json::json!(["bash", "psql", "redis-cli"]),
        "{json}"
    );
    let nets = v["networks"].as_array().expect("networks array");
    let backend = nets
        .iter()
        .find(|n| n["name"] == format!("{PROJECT}_backend"))
        .unwrap_or_else(|| panic!("no backend network in {json}"));
    assert_eq!(backend["internal"], true, "{json}");
    let peer_names: Vec<String> = backend["peers"]
        .as_array()
        .expect("peers")
        .iter()
        .flat_map(|p| p["names"].as_array().cloned().unwrap_or_default())
        .filter_map(|n| n.as_str().map(str::to_string))
        .collect();
    assert!(peer_names.iter().any(|n| n == "postgres"), "{json}");
    assert!(peer_names.iter().any(|n| n == "redis"), "{json}");
    // No alias that is a container's 12-hex short ID.
    for n in &peer_names {
        assert!(
            !(n.len() == 12 && n.chars().all(|c| c.is_ascii_hexdigit())),
            "short-ID alias {n} listed: {json}"
        );
    }

    // describe --tool
    let tool = stdout(&p.odek_ok(&["sandbox", "describe", &name, "--tool"]));
    assert!(tool.contains("attached networks only"), "{tool}");
    assert!(tool.contains("internet is reachable"), "{tool}");
    assert!(
        tool.contains("live checkout") && tool.contains("/tmp is noexec"),
        "{tool}"
    );
    assert!(
        tool.contains("the image has: bash, psql, redis-cli"),
        "{tool}"
    );
    let (_, tbody) = untrusted_block(&tool);
    assert!(
        tbody.contains("postgres") && tbody.contains("redis"),
        "{tool}"
    );
    assert!(tool.len() < text.len(), "--tool is not the shorter variant");

    // exec: output and exit status pass through
    let ping = p.odek_ok(&[
        "sandbox",
        "exec",
        &name,
        "--",
        "redis-cli",
        "-h",
        "redis",
        "ping",
    ]);
    assert_eq!(stdout(&ping).trim(), "PONG");
    let seven = p.run_odek(&["sandbox", "exec", &name, "--", "sh", "-c", "exit 7"]);
    assert_eq!(
        seven.status.code(),
        Some(7),
        "exit status not passed through"
    );
    let pg = p.odek_ok(&[
        "sandbox",
        "exec",
        &name,
        "--",
        "pg_isready",
        "-h",
        "postgres",
    ]);
    assert!(
        stdout(&pg).contains("accepting connections"),
        "{}",
        stdout(&pg)
    );

    // ls --json lists it, detached, for this workdir
    let ls = stdout(&p.odek_ok(&["sandbox", "ls", "--json"]));
    let list: serde_json::Value = serde_json::from_str(&ls).expect("ls --json is JSON");
    let entry = list
        .as_array()
        .expect("ls --json is an array")
        .iter()
        .find(|e| e["name"] == name.as_str())
        .unwrap_or_else(|| panic!("{name} not in ls --json:\n{ls}"));
    assert_eq!(entry["detached"], true, "{entry}");
    assert_eq!(entry["state"], "running", "{entry}");
    assert_eq!(
        entry["workdir"].as_str(),
        Some(p.path().to_str().expect("utf-8 path")),
        "{entry}"
    );
    // It holds the Compose project's networks, and says so (the reason
    // `docker compose down` of the project fails while it runs).
    assert_eq!(
        entry["compose_projects"],
        serde_json::json!([PROJECT]),
        "{entry}"
    );
    let nets = entry["networks"].as_array().expect("networks");
    assert!(
        nets.iter()
            .any(|n| n.as_str() == Some(&format!("{PROJECT}_backend"))),
        "{entry}"
    );
    let table = stdout(&p.odek_ok(&["sandbox", "ls"]));
    let row = table
        .lines()
        .find(|l| l.starts_with(&name))
        .unwrap_or_else(|| panic!("{name} not in ls:\n{table}"));
    assert!(
        table
            .lines()
            .next()
            .is_some_and(|h| h.contains(" PROJECTS ")),
        "{table}"
    );
    assert!(row.split_whitespace().any(|c| c == PROJECT), "{table}");

    // down removes it
    let down = p.odek_ok(&["sandbox", "down", &name]);
    assert!(stdout(&down).contains(&name), "{}", stdout(&down));
    assert!(
        !docker_ok(&["container", "inspect", &name]),
        "{name} still exists after `sandbox down`"
    );
    assert!(p.leftovers().is_empty(), "left: {:?}", p.leftovers());
    let ls = stdout(&p.odek_ok(&["sandbox", "ls", "--json"]));
    assert!(!ls.contains(&name), "{name} still listed after down:\n{ls}");
    // exec on a removed sandbox is refused
    let gone = p.run_odek(&["sandbox", "exec", &name, "--", "true"]);
    assert_eq!(gone.status.code(), Some(125), "exec on a removed sandbox");
}

#[test]
fn internal_only_sandbox_is_described_without_internet() {
    let p = Project::new();
    let backend = format!("{PROJECT}_backend");
    let up = p.odek_ok(&[
        "sandbox",
        "up",
        "--sandbox-networks",
        &backend,
        "--sandbox-image",
        BASE_IMAGE,
    ]);
    let name = stdout(&up).trim().to_string();
    let text = stdout(&p.odek_ok(&["sandbox", "describe", &name]));
    assert!(text.contains("attached networks only"), "{text}");
    assert!(text.contains("internet is NOT reachable"), "{text}");
    let json = stdout(&p.odek_ok(&["sandbox", "describe", &name, "--json"]));
    let v: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    assert_eq!(v["network"], "attached", "{json}");
    assert_eq!(v["internet"], false, "{json}");
    // positive control: the services on that network answer by name
    let ping = p.odek_ok(&[
        "sandbox",
        "exec",
        &name,
        "--",
        "redis-cli",
        "-h",
        "redis",
        "ping",
    ]);
    assert_eq!(stdout(&ping).trim(), "PONG");
    p.odek_ok(&["sandbox", "down", &name]);
    assert!(p.leftovers().is_empty());
}

/// A second `odek sandbox down NAME` (or a name never used): exit 1 with
/// one error, the one naming the sandbox, and no summary line after it.
#[test]
fn down_of_an_unknown_sandbox_fails() {
    let p = Project::new();
    let out = p.run_odek(&["sandbox", "down", &odek_e2e::unique("odek-nosuch")]);
    assert_eq!(out.status.code(), Some(1), "{}", odek_e2e::stderr(&out));
    let err = odek_e2e::stderr(&out);
    assert!(err.contains("no sandbox named"), "{err}");
    let errors = err.lines().filter(|l| l.contains("error")).count();
    assert_eq!(errors, 1, "one error, not {errors}:\n{err}");
    // Two unknown names: one error each, still nothing more.
    let out = p.run_odek(&[
        "sandbox",
        "down",
        &odek_e2e::unique("odek-nosuch"),
        &odek_e2e::unique("odek-nosuch"),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", odek_e2e::stderr(&out));
    let err = odek_e2e::stderr(&out);
    let errors = err.lines().filter(|l| l.contains("error")).count();
    assert_eq!(errors, 2, "one error per name:\n{err}");
}

/// Removes a container on drop.
struct ContainerGuard(String);

impl Drop for ContainerGuard {
    fn drop(&mut self) {
        let _ = docker_ok(&["rm", "-f", &self.0]);
    }
}

#[test]
fn describe_keeps_real_short_names_and_drops_short_ids_and_bad_names() {
    let p = Project::new();
    let net = odek_e2e::TestNetwork::create(&odek_e2e::unique("odekalias"), &["--internal"]);
    let long = "a".repeat(70);
    let peer_id = odek_e2e::docker(&[
        "run",
        "-d",
        "--label",
        odek_e2e::TEST_LABEL,
        "--network",
        &net.name,
        "--network-alias",
        "cafe",
        "--network-alias",
        "db",
        "--network-alias",
        "Svc.Name_1",
        "--network-alias",
        "untrusted_content_x",
        "--network-alias",
        &long,
        "--network-alias",
        "bad name",
        BASE_IMAGE,
    ]);
    let _peer = ContainerGuard(peer_id.clone());
    let up = p.odek_ok(&[
        "sandbox",
        "up",
        "--sandbox-networks",
        &net.name,
        "--sandbox-image",
        BASE_IMAGE,
    ]);
    let name = stdout(&up).trim().to_string();
    let text = stdout(&p.odek_ok(&["sandbox", "describe", &name]));
    let (nonce, body) = untrusted_block(&text);
    for kept in ["cafe", "db", "Svc.Name_1"] {
        assert!(body.contains(kept), "{kept} dropped:\n{text}");
    }
    assert!(
        !body.contains(&peer_id[..12]),
        "the short-ID alias is listed:\n{text}"
    );
    assert!(!body.contains(&long), "a 70-char name is listed:\n{text}");
    assert!(
        !body.contains("bad name"),
        "a name with a space is listed:\n{text}"
    );
    // a 70-char name, a name with a space, and an alias holding the wrapper
    // word (dropped and counted, never shown rewritten: SPEC §9.3)
    assert!(
        body.contains("3 names omitted"),
        "omitted names not counted:\n{text}"
    );
    // the only literal untrusted_content left is the wrapper itself
    assert_eq!(
        text.matches("untrusted_content").count(),
        2,
        "a literal untrusted_content was not neutralised:\n{text}"
    );
    assert!(text.contains(&format!("</untrusted_content_{nonce}>")));
    // the kept names really answer
    let out = p.odek_ok(&["sandbox", "exec", &name, "--", "getent", "hosts", "cafe"]);
    assert!(!stdout(&out).trim().is_empty(), "cafe does not resolve");
    let json = stdout(&p.odek_ok(&["sandbox", "describe", &name, "--json"]));
    let v: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    assert_eq!(v["omitted_names"], 3, "{json}");
    assert_eq!(v["internet"], false, "{json}");
    p.odek_ok(&["sandbox", "down", &name]);
}

#[test]
fn exec_and_down_print_json() {
    let p = Project::new();
    let up = p.odek_ok(&[
        "sandbox",
        "up",
        "--sandbox-network",
        "none",
        "--sandbox-image",
        BASE_IMAGE,
    ]);
    let name = stdout(&up).trim().to_string();
    let _guard = ContainerGuard(name.clone());

    // The command's output is captured into the result; its status passes through.
    let out = p.run_odek(&[
        "sandbox",
        "exec",
        &name,
        "--json",
        "--",
        "sh",
        "-c",
        "echo out; echo err >&2; exit 3",
    ]);
    assert_eq!(out.status.code(), Some(3), "{}", odek_e2e::stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out))
        .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}", stdout(&out)));
    assert_eq!(v["schema"], "odek.exec-result/1", "{v}");
    assert_eq!(v["exit_code"], 3, "{v}");
    assert_eq!(v["stdout"], "out\n", "{v}");
    assert_eq!(v["stderr"], "err\n", "{v}");
    assert_eq!(v["timed_out"], false, "{v}");
    assert_eq!(v["killed"], false, "{v}");
    assert_eq!(v["stdout_truncated"], false, "{v}");
    assert!(
        !odek_e2e::stderr(&out).contains("err"),
        "the command's stderr is in the JSON, not on odek's stderr: {}",
        odek_e2e::stderr(&out)
    );

    // A timeout: killed, exit 124, output so far kept.
    let out = p.run_odek(&[
        "sandbox",
        "exec",
        &name,
        "--json",
        "--timeout",
        "1",
        "--",
        "sh",
        "-c",
        "echo started; sleep 60",
    ]);
    assert_eq!(out.status.code(), Some(124), "{}", odek_e2e::stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out))
        .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}", stdout(&out)));
    assert_eq!(v["exit_code"], 124, "{v}");
    assert_eq!(v["timed_out"], true, "{v}");
    assert_eq!(v["killed"], true, "{v}");
    assert_eq!(v["stdout"], "started\n", "{v}");

    // down --json: the names removed, also when another name is refused.
    let unknown = odek_e2e::unique("odek-nosuch");
    let out = p.run_odek(&["sandbox", "down", "--json", &name, &unknown]);
    assert_eq!(out.status.code(), Some(1), "{}", odek_e2e::stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out))
        .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}", stdout(&out)));
    assert_eq!(v, serde_json::json!([name]), "{v}");
    assert!(odek_e2e::stderr(&out).contains("no sandbox named"));
    assert!(p.leftovers().is_empty());
}
