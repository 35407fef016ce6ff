//! The warm pool with the real engine (docs/SANDBOXING.md, "The warm
//! pool"), through its owner `odek mcp --sandbox-pool N` spoken to as a raw
//! MCP client: a claim after the Compose project gained a network gets a
//! sandbox launched for the new plan (attached to it), never a ready one; a
//! claim after a ready sandbox was `docker kill`ed gets a fresh one; two
//! concurrent claims never get the same sandbox; `odek pool down` removes the
//! ready ones (not a claimed one), also while claims race it (a sandbox is
//! removed or handed over, never both), and a SIGKILL of the owner leaves
//! nothing.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use odek_e2e::{docker, docker_ok, stdout, unique, wait_until, Project, TestNetwork, BASE_IMAGE};
use serde_json::{json, Value};

/// How long a pool may take to have its sandboxes ready.
const READY_WITHIN: Duration = Duration::from_secs(120);
/// How long the engine may take to remove a dead owner's sandboxes.
const GONE_WITHIN: Duration = Duration::from_secs(20);

/// `odek mcp` spoken to as a raw JSON-RPC client over its stdio.
struct Mcp {
    child: Child,
    stdin: Option<ChildStdin>,
    messages: Receiver<Value>,
    /// Responses read while waiting for another.
    early: Vec<Value>,
    stderr: Arc<Mutex<String>>,
    next: u64,
}

impl Mcp {
    /// Starts `odek mcp --sandbox-image BASE_IMAGE <args>` in `p` and
    /// initializes the session.
    fn start(p: &Project, args: &[&str]) -> Mcp {
        let mut all = vec!["mcp", "--sandbox-image", BASE_IMAGE];
        all.extend_from_slice(args);
        let mut child = p
            .odek(&all)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn odek mcp");
        let out = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if let Ok(v) = serde_json::from_str::<Value>(&line) {
                    if tx.send(v).is_err() {
                        return;
                    }
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let err = child.stderr.take().expect("stderr");
        let keep = stderr.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                let mut s = keep.lock().expect("lock");
                s.push_str(&line);
                s.push('\n');
            }
        });
        let mut m = Mcp {
            stdin: child.stdin.take(),
            child,
            messages: rx,
            early: Vec::new(),
            stderr,
            next: 0,
        };
        let id = m.send_request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "pool-e2e", "version": "1"}}),
        );
        let r = m.response(id);
        assert!(r.get("result").is_some(), "initialize: {r}");
        m.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        m
    }

    fn send(&mut self, v: &Value) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{v}").expect("write to odek mcp");
        stdin.flush().expect("flush");
    }

    fn send_request(&mut self, method: &str, params: Value) -> u64 {
        self.next += 1;
        let id = self.next;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    /// Sends a `tools/call` without waiting for its answer.
    fn call_async(&mut self, tool: &str, args: Value) -> u64 {
        self.send_request("tools/call", json!({"name": tool, "arguments": args}))
    }

    fn response(&mut self, id: u64) -> Value {
        if let Some(i) = self.early.iter().position(|v| v["id"] == id) {
            return self.early.remove(i);
        }
        let deadline = Instant::now() + Duration::from_secs(180);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.messages.recv_timeout(left) {
                Ok(v) if v["id"] == id => return v,
                Ok(v) if v.get("id").is_some() && v.get("method").is_none() => self.early.push(v),
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout) => {
                    panic!("no answer to request {id}; stderr:\n{}", self.stderr())
                }
                Err(RecvTimeoutError::Disconnected) => {
                    panic!("odek mcp closed stdout; stderr:\n{}", self.stderr())
                }
            }
        }
    }

    /// A tool's structured result; panics on a tool error.
    fn result(&mut self, id: u64) -> Value {
        let r = self.response(id);
        let result = &r["result"];
        assert_ne!(
            result["isError"],
            json!(true),
            "tool error: {r}\nstderr:\n{}",
            self.stderr()
        );
        result["structuredContent"].clone()
    }

    /// `sandbox_up`: the new sandbox's container name.
    fn up(&mut self) -> String {
        let id = self.call_async("sandbox_up", json!({}));
        self.container_of(id)
    }

    fn container_of(&mut self, id: u64) -> String {
        let r = self.result(id);
        r["container"]
            .as_str()
            .unwrap_or_else(|| panic!("no container in {r}"))
            .to_string()
    }

    fn stderr(&self) -> String {
        self.stderr.lock().expect("lock").clone()
    }

    /// Closes stdin (the client disconnects) and waits for the exit.
    fn close(mut self) {
        self.stdin = None;
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if let Ok(Some(st)) = self.child.try_wait() {
                assert!(st.success(), "odek mcp exited {st}: {}", self.stderr());
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        panic!(
            "odek mcp did not exit after the client left: {}",
            self.stderr()
        );
    }
}

/// Names of the running ready-or-claimed pooled sandboxes of `p` (the
/// `dev.odek.pool` label).
fn pooled(p: &Project) -> Vec<String> {
    let mut v: Vec<String> = docker(&[
        "ps",
        "--format",
        "{{.Names}}",
        "--filter",
        "label=dev.odek.pool",
        "--filter",
        &format!("label=dev.odek.workdir={}", p.path().display()),
    ])
    .lines()
    .map(str::to_string)
    .collect();
    v.sort();
    v
}

/// Waits until the owner said `total` sandboxes became ready (its
/// `warm pool: sandbox NAME ready` lines) and returns those of them still
/// running and not in `claimed` (expected: `n`).
fn ready(p: &Project, n: usize, total: usize, claimed: &[String], m: &Mcp) -> Vec<String> {
    let said = || -> Vec<String> {
        m.stderr()
            .lines()
            .filter_map(|l| l.strip_prefix("odek: warm pool: sandbox "))
            .filter_map(|l| l.strip_suffix(" ready"))
            .map(str::to_string)
            .collect()
    };
    let ok = wait_until(READY_WITHIN, || said().len() >= total);
    assert!(
        ok,
        "{total} ready sandboxes expected; stderr:\n{}",
        m.stderr()
    );
    let running = pooled(p);
    let mut ready: Vec<String> = said()
        .into_iter()
        .filter(|c| running.contains(c) && !claimed.contains(c))
        .collect();
    ready.sort();
    assert_eq!(ready.len(), n, "ready: {ready:?}; running: {running:?}");
    ready
}

/// The networks `container` reaches, space separated (SPEC §4.4: through
/// its link network, [`odek_e2e::reached_network_ids`]).
fn networks_of(container: &str) -> String {
    odek_e2e::reached_network_ids(container).join(" ")
}

#[test]
fn a_claim_after_the_compose_project_gained_a_network_gets_a_sandbox_attached_to_it() {
    let p = Project::new();
    let proj = unique("odekpool");
    let label = format!("com.docker.compose.project={proj}");
    let a = TestNetwork::create(&format!("{proj}_a"), &["--label", &label]);
    let b = TestNetwork::create(&format!("{proj}_b"), &["--internal", "--label", &label]);
    let mut m = Mcp::start(&p, &["--sandbox-pool", "1", "--sandbox-compose", &proj]);
    let first = ready(&p, 1, 1, &[], &m);
    // Positive control: before the change, a claim gets the ready one.
    let got = m.up();
    assert_eq!(
        vec![got.clone()],
        first,
        "the ready sandbox was handed over"
    );
    let again = ready(&p, 1, 2, std::slice::from_ref(&got), &m);
    let c = TestNetwork::create(&format!("{proj}_c"), &["--label", &label]);
    let fresh = m.up();
    assert!(
        !again.contains(&fresh),
        "a ready sandbox of the old plan was handed over: {fresh}"
    );
    assert_ne!(fresh, got);
    let nets = networks_of(&fresh);
    for n in [&a, &b, &c] {
        assert!(
            nets.contains(&n.id),
            "{fresh} lacks network {}: {nets}",
            n.name
        );
    }
    assert!(
        !networks_of(&again[0]).contains(&c.id),
        "the old ready one was not changed"
    );
    m.close();
    assert!(
        wait_until(GONE_WITHIN, || p.leftovers().is_empty()),
        "left: {:?}",
        p.leftovers()
    );
    drop((a, b, c));
}

#[test]
fn a_claim_after_a_ready_sandbox_was_killed_gets_a_fresh_one() {
    let p = Project::new();
    let mut m = Mcp::start(&p, &["--sandbox-pool", "1"]);
    let r = ready(&p, 1, 1, &[], &m);
    assert!(docker_ok(&["kill", &r[0]]), "docker kill {}", r[0]);
    let got = m.up();
    assert_ne!(got, r[0], "the killed sandbox was handed over");
    assert!(!m.stderr().contains("from the warm pool"), "{}", m.stderr());
    // It works: a command runs in it.
    let list = m.call_async("sandbox_list", json!({}));
    let list = m.result(list);
    let sid = list["sandboxes"]
        .as_array()
        .and_then(|a| a.iter().find(|s| s["container"] == got.as_str()))
        .and_then(|s| s["sandbox_id"].as_str())
        .unwrap_or_else(|| panic!("{got} not listed: {list}"))
        .to_string();
    let ex = m.call_async(
        "exec",
        json!({"command": "echo pool-ok", "sandbox_id": sid}),
    );
    let ex = m.result(ex);
    assert_eq!(ex["exit_code"], 0, "{ex}");
    assert!(
        ex["stdout"].as_str().unwrap_or("").contains("pool-ok"),
        "{ex}"
    );
    m.close();
    assert!(
        wait_until(GONE_WITHIN, || p.leftovers().is_empty()),
        "left: {:?}",
        p.leftovers()
    );
}

#[test]
fn two_concurrent_claims_never_get_the_same_sandbox() {
    let p = Project::new();
    let mut m = Mcp::start(&p, &["--sandbox-pool", "2"]);
    let r = ready(&p, 2, 2, &[], &m);
    let one = m.call_async("sandbox_up", json!({}));
    let two = m.call_async("sandbox_up", json!({}));
    let (one, two) = (m.container_of(one), m.container_of(two));
    assert_ne!(one, two, "two claims got the same sandbox");
    for c in [&one, &two] {
        assert!(r.contains(c), "{c} was not a ready one: {r:?}");
    }
    // The server's stderr is read as it comes: the second line may follow
    // the second answer by a moment.
    assert!(
        wait_until(GONE_WITHIN, || m
            .stderr()
            .matches("from the warm pool")
            .count()
            == 2),
        "{}",
        m.stderr()
    );
    m.close();
    assert!(
        wait_until(GONE_WITHIN, || p.leftovers().is_empty()),
        "left: {:?}",
        p.leftovers()
    );
}

#[test]
fn pool_down_removes_the_ready_ones_and_a_sigkilled_owner_leaves_nothing() {
    let p = Project::new();
    let mut m = Mcp::start(&p, &["--sandbox-pool", "2"]);
    ready(&p, 2, 2, &[], &m);
    let claimed = m.up();
    let r = ready(&p, 2, 3, std::slice::from_ref(&claimed), &m);
    // `sandbox ls` tells ready from claimed.
    let ls: Value =
        serde_json::from_str(&stdout(&p.odek_ok(&["sandbox", "ls", "--json"]))).expect("ls JSON");
    let kinds: Vec<(String, bool)> = ls
        .as_array()
        .expect("array")
        .iter()
        .map(|l| {
            (
                l["name"].as_str().unwrap_or("").to_string(),
                l["pool"] == true,
            )
        })
        .collect();
    for name in &r {
        assert!(
            kinds.contains(&(name.clone(), true)),
            "{name} not a ready one: {kinds:?}"
        );
    }
    assert!(kinds.contains(&(claimed.clone(), false)), "{kinds:?}");

    // Nothing runs in a ready one before its owner hands it out; a claimed
    // one is the claimant's, as any sandbox.
    let refused = p.run_odek(&["sandbox", "exec", &r[0], "--", "true"]);
    assert_eq!(
        refused.status.code(),
        Some(125),
        "{}",
        odek_e2e::stderr(&refused)
    );
    assert!(
        odek_e2e::stderr(&refused).contains("warm pool"),
        "{}",
        odek_e2e::stderr(&refused)
    );
    p.odek_ok(&["sandbox", "exec", &claimed, "--", "true"]);

    let down = p.odek_ok(&["pool", "down", "--json"]);
    let mut removed: Vec<String> = serde_json::from_str(&stdout(&down)).expect("JSON");
    removed.sort();
    assert_eq!(removed, r, "pool down removes exactly the ready ones");
    assert!(
        wait_until(GONE_WITHIN, || pooled(&p) == vec![claimed.clone()]),
        "after pool down: {:?}",
        pooled(&p)
    );
    // The owner launches afresh at the next claim, and refills.
    let fresh = m.up();
    assert!(!r.contains(&fresh));
    ready(&p, 2, 5, &[claimed.clone(), fresh.clone()], &m);
    assert_eq!(p.leftovers().len(), 4, "{:?}", p.leftovers());

    let mut child = m.child;
    child.kill().expect("SIGKILL odek mcp"); // std's kill is SIGKILL
    let _ = child.wait();
    assert!(
        wait_until(GONE_WITHIN, || p.leftovers().is_empty()),
        "left after SIGKILL of the owner: {:?}",
        p.leftovers()
    );
}

/// `odek pool down` started 800 ms after to 100 ms before 8 concurrent claims,
/// with 8 ready sandboxes, a few times: each claim gets a sandbox that
/// still exists and runs a command afterwards (a sandbox handed over
/// between pool down's listing and its removal was removed under its
/// claimant: "No such container"), and none of them is among those pool
/// down says it removed.
#[test]
fn pool_down_racing_claims_never_removes_a_claimed_sandbox() {
    let p = Project::new();
    let mut from_pool = 0;
    // Offsets of pool down against the claims, in ms: negative, the claims
    // are sent first (a claim resolves its plan before it takes a ready
    // sandbox, so some win the race); positive, pool down starts first
    // (it takes the records at once and removes for a while after).
    for offset in [-800i64, -400, -150, 0, 100] {
        let delay = offset;
        // A server of its own each round: after `odek pool down` a pool
        // refills only as its claims find the removed ones (SANDBOXING.md,
        // "The warm pool"), so a server of the last round would not be
        // full again.
        let mut m = Mcp::start(&p, &["--sandbox-pool", "8"]);
        // Ready in the server's pool (its "ready" lines), not only listed:
        // `odek sandbox ls` shows a pooled sandbox from its create, before
        // its launch is verified and queued.
        ready(&p, 8, 8, &[], &m);
        let before = m.stderr().matches("from the warm pool").count();
        let spawn_down = || {
            p.odek(&["pool", "down", "--json"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn odek pool down")
        };
        let mut down = None;
        if offset >= 0 {
            down = Some(spawn_down());
            std::thread::sleep(Duration::from_millis(offset.unsigned_abs()));
        }
        let calls: Vec<u64> = (0..8)
            .map(|_| m.call_async("sandbox_up", json!({})))
            .collect();
        if offset < 0 {
            std::thread::sleep(Duration::from_millis(offset.unsigned_abs()));
            down = Some(spawn_down());
        }
        let down = down.expect("pool down spawned");
        let ups: Vec<Value> = calls.into_iter().map(|id| m.result(id)).collect();
        let down = down.wait_with_output().expect("odek pool down");
        assert!(down.status.success(), "{}", odek_e2e::stderr(&down));
        let removed: Vec<String> = serde_json::from_str(&stdout(&down)).expect("JSON");
        from_pool += m.stderr().matches("from the warm pool").count() - before;
        for up in &ups {
            let (sid, container) = (
                up["sandbox_id"].as_str().expect("sandbox_id").to_string(),
                up["container"].as_str().expect("container").to_string(),
            );
            assert!(
                !removed.contains(&container),
                "pool down removed claimed {container} ({delay} ms): {removed:?}"
            );
            let ex = m.call_async("exec", json!({"command": "echo alive", "sandbox_id": sid}));
            let ex = m.result(ex);
            assert_eq!(
                (ex["exit_code"].as_i64(), ex["stdout"].as_str()),
                (Some(0), Some("alive\n")),
                "claimed {container} ({delay} ms) after pool down: {ex}"
            );
        }
        for up in &ups {
            let d = m.call_async("sandbox_down", json!({"sandbox_id": up["sandbox_id"]}));
            m.result(d);
        }
        m.close();
        assert!(
            wait_until(GONE_WITHIN, || p.leftovers().is_empty()),
            "left ({delay} ms): {:?}",
            p.leftovers()
        );
    }
    // Positive control: the claims did race pool down for ready ones.
    assert!(from_pool > 0, "no claim took a ready sandbox");
}

#[test]
fn a_ready_sandbox_changed_with_docker_exec_is_not_handed_over() {
    let p = Project::new();
    let mut m = Mcp::start(&p, &["--sandbox-pool", "1"]);
    // An exec still running in it, then a process left by an exec that
    // has ended (the engine forgets the exec, `top` still shows the
    // process): each time the claim gets a fresh sandbox and the changed
    // one is removed.
    let touches: [&[&str]; 2] = [
        &["exec", "-d", "CONTAINER", "sleep", "600"],
        &[
            "exec",
            "CONTAINER",
            "sh",
            "-c",
            "sleep 600 >/dev/null 2>&1 </dev/null &",
        ],
    ];
    let mut claimed = Vec::new();
    for (i, touch) in touches.iter().enumerate() {
        let r = ready(&p, 1, i + 1, &claimed, &m);
        let args: Vec<&str> = touch
            .iter()
            .map(|a| if *a == "CONTAINER" { r[0].as_str() } else { a })
            .collect();
        assert!(docker_ok(&args), "docker {args:?}");
        let got = m.up();
        assert_ne!(got, r[0], "the changed sandbox was handed over ({touch:?})");
        assert!(
            wait_until(GONE_WITHIN, || !docker_ok(&["inspect", &r[0]])),
            "the changed sandbox {} was left",
            r[0]
        );
        claimed.push(got);
        claimed.push(r[0].clone());
    }
    m.close();
    assert!(
        wait_until(GONE_WITHIN, || p.leftovers().is_empty()),
        "left: {:?}",
        p.leftovers()
    );
}
