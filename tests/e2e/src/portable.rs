//! What must hold alike on every kind of sandbox: Debian, BusyBox (its ash
//! as `/bin/sh`: the pinned alpine default's shell and tools) and a
//! read-only root. The shell trees a timeout must kill whole, and a server
//! per image that a later command asks, shared by the supervisor's own
//! container tests (`supervisor/tests/docker.rs`, which make the read-only
//! root with `docker run --read-only`; odek has no such setting) and the
//! `odek` command-line tests (`tests/supervisor.rs`).

/// A shell script a timeout must kill whole: every process of it (its
/// shell, a `setsid` session of its own, an orphan) would, if it ran on,
/// create one of `late`.
#[derive(Debug, Clone)]
pub struct Tree {
    /// What the tree is, for a failure message.
    pub name: &'static str,
    /// The `sh -c` script.
    pub script: String,
    /// The files it creates once its `sleep` ended.
    pub late: Vec<String>,
}

/// The trees: each `sleep`s `secs` then touches files named `late-*` in
/// `dir`. `hold` is what a shell that started a detached part does next
/// (under a timeout: longer than it, `sleep 60`; as a positive control:
/// longer than `secs`, so the detached part writes its file first).
///
/// `setsid sh -c '…'` is tried where it is not the command's whole argv:
/// waited for in the foreground, in the background, and orphaned by a
/// double fork. As the whole command it is no timeout's business: the
/// command is a session leader (the supervisor makes it one), so `setsid`
/// forks and its parent exits at once — the call ends with status 0 before
/// any timeout, leaving the child running as a job started on purpose
/// (`nohup server &`), which outlives its call by design.
pub fn timeout_trees(dir: &str, secs: u32, hold: &str) -> Vec<Tree> {
    let f = |n: &str| format!("{dir}/late-{n}");
    vec![
        Tree {
            name: "sh -c 'sleep; touch'",
            script: format!("sleep {secs}; touch {}", f("plain")),
            late: vec![f("plain")],
        },
        Tree {
            name: "setsid sh -c '…' waited for, then a next step",
            script: format!(
                "setsid sh -c 'sleep {secs}; touch {}'; touch {}",
                f("setsid"),
                f("after-setsid")
            ),
            late: vec![f("setsid"), f("after-setsid")],
        },
        Tree {
            name: "setsid sh -c '…' &",
            script: format!("setsid sh -c 'sleep {secs}; touch {}' & {hold}", f("bg")),
            late: vec![f("bg")],
        },
        Tree {
            name: "(setsid sh -c '…' &), an orphan",
            script: format!(
                "(setsid sh -c 'sleep {secs}; touch {}' &); {hold}",
                f("orphan")
            ),
            late: vec![f("orphan")],
        },
    ]
}

/// A `sh -c` script printing every process's command line, one a line
/// (portable: BusyBox has no `pgrep`). Filter it with [`matching`]: the
/// script names no command, so it never lists itself as one.
pub const LIST_PROCESSES: &str =
    "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done";

/// The lines of a [`LIST_PROCESSES`] output that hold `needle`.
pub fn matching(listing: &str, needle: &str) -> Vec<String> {
    listing
        .lines()
        .filter(|l| l.contains(needle))
        .map(str::to_string)
        .collect()
}

/// A server an image offers, started in the background by one command
/// (`start`, a `sh -c` script ending in `&`) and asked by a later one
/// (`ask`), which prints `answer`.
#[derive(Debug, Clone)]
pub struct Server {
    /// Which server.
    pub name: &'static str,
    /// Starts it as a background job of the shell.
    pub start: String,
    /// Asks it (fails while it does not run).
    pub ask: String,
    /// What `ask` prints when it answers.
    pub answer: &'static str,
}

/// Redis (Debian images), on `port`, keeping nothing on disk (a read-only
/// root has no place for it).
pub fn redis(port: u16) -> Server {
    Server {
        name: "redis-server",
        start: format!("redis-server --port {port} --save '' --appendonly no &"),
        ask: format!("redis-cli -p {port} ping"),
        answer: "PONG\n",
    }
}

/// BusyBox's httpd on `port` of loopback serving a page from `dir`, asked
/// with BusyBox's wget (the BusyBox image has neither redis nor curl).
pub fn busybox_httpd(dir: &str, port: u16) -> Server {
    Server {
        name: "busybox httpd",
        start: format!(
            "mkdir -p {dir}/www && echo 'hello from httpd' > {dir}/www/index.html && httpd -f -p 127.0.0.1:{port} -h {dir}/www &"
        ),
        ask: format!("wget -qO- http://127.0.0.1:{port}/index.html"),
        answer: "hello from httpd\n",
    }
}
