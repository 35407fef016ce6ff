//! Running commands in a sandbox (SPEC §10.1 exec): argv or a shell string,
//! extra env, optional timeout; output streamed; the exit code passed through.
//! In fallback/off mode the command runs on the host (the plan says so).
//!
//! A command that outlives its timeout (or whose caller cancels it through
//! [`Client::exec_until`]) is killed, not abandoned. The Engine API cannot
//! signal an exec, so every command odek runs in a sandbox carries a random
//! tag in its environment ([`EXEC_TAG_ENV`]); a second, short exec then
//! SIGKILLs every process in the container whose environment holds the tag —
//! the command and the descendants that kept its environment. On the host the
//! command runs in its own process group, and the group is SIGKILLed.

use std::future::Future;
use std::io::ErrorKind;
use std::time::Duration;

use rand::Rng;
use serde::{Deserialize, Serialize};
use tokio::io::AsyncReadExt;

mod capture;

pub use capture::{Capture, Captured, Keep};

use crate::client::Client;
use crate::engine::{ExecSpec, OutputSink, StreamKind};
use crate::error::{Error, Result};
use crate::failure::{FailureClass, Step};
use crate::sandbox::Sandbox;

/// What to run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum Command {
    /// An argv, run as is (no shell).
    Argv(Vec<String>),
    /// A string run by `/bin/sh -c`.
    Shell(String),
}

impl Command {
    pub(crate) fn argv(&self) -> Vec<String> {
        match self {
            Command::Argv(v) => v.clone(),
            Command::Shell(s) => vec!["/bin/sh".into(), "-c".into(), s.clone()],
        }
    }
}

/// An exec request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecRequest {
    /// The command.
    pub command: Command,
    /// Extra `KEY=value` pairs for this command (values never logged).
    #[serde(default)]
    pub env: Vec<(String, String)>,
    /// Stop the command after this long: it and its descendants are sent
    /// SIGKILL and the outcome says `timed_out` (exit code 124). In a sandbox
    /// the kill needs `/bin/sh` and `cat` in the image and misses processes
    /// that cleared their environment; when it fails, a line on the command's
    /// stderr says so and the process keeps running until the sandbox is
    /// destroyed.
    #[serde(default, with = "opt_secs")]
    pub timeout: Option<Duration>,
    /// Working directory (default `/workspace`, or the host workdir).
    #[serde(default)]
    pub workdir: Option<String>,
}

/// A timeout given in seconds, as odek accepts it everywhere (CLI
/// `--timeout`, the C ABI's `timeout_secs`, [`ExecRequest`] JSON): finite,
/// positive and below 10^9 s. `None` for anything else.
pub fn timeout_from_secs(secs: f64) -> Option<Duration> {
    (secs.is_finite() && secs > 0.0 && secs < 1e9).then(|| Duration::from_secs_f64(secs))
}

mod opt_secs {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub(crate) fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_some(&d.as_secs_f64()),
            None => s.serialize_none(),
        }
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Duration>, D::Error> {
        let v: Option<f64> = Option::deserialize(d)?;
        match v {
            None => Ok(None),
            Some(s) => super::timeout_from_secs(s).map(Some).ok_or_else(|| {
                serde::de::Error::custom("timeout must be a positive number of seconds below 1e9")
            }),
        }
    }
}

/// The outcome of an exec.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecOutcome {
    /// The command's exit code (124 after a timeout; 128+N when killed by
    /// signal N on the host; 130 after a cancellation).
    pub exit_code: i64,
    /// True when the timeout elapsed first.
    pub timed_out: bool,
    /// True when the caller cancelled the command ([`Client::exec_until`]).
    #[serde(default)]
    pub cancelled: bool,
    /// After a timeout or cancellation: true when odek killed the command
    /// and saw none of its processes left; false when the kill failed or
    /// could not be confirmed (a line on the command's stderr says why).
    /// False when the command ended by itself.
    #[serde(default)]
    pub killed: bool,
}

impl ExecOutcome {
    pub(crate) fn exited(code: i64) -> ExecOutcome {
        ExecOutcome {
            exit_code: code,
            timed_out: false,
            cancelled: false,
            killed: false,
        }
    }
}

/// Exit code reported after a timeout (as `timeout(1)`).
pub(crate) const TIMEOUT_EXIT: i64 = 124;

pub use crate::config::EXEC_TAG_ENV;

/// Environment variable set (with a random value) on odek's own kill exec
/// only, so the kill can check that `cat` shows environments truthfully.
pub const KILL_PROBE_ENV: &str = "ODEK_KILL_PROBE";

/// How long the kill of a timed-out or cancelled command may take.
const KILL_BUDGET: Duration = Duration::from_secs(5);

/// The script of the kill exec: `$1` is `ODEK_EXEC_ID=<tag>`, `$2` the mode,
/// `$3` `ODEK_KILL_PROBE=<hex>` (set in the script's own environment), `$4`
/// the command's age in whole seconds plus 2.
///
/// Each pass reads every process's parent (`/proc/<pid>/stat`) and
/// environment, and takes as the command's ("ours") every process whose
/// environment holds the tag plus, transitively, their children — so a
/// child that rewrote its environment (a process title, `env -i`) or whose
/// environment cannot be read is still found while its parent is. PID 1
/// (docker-init) and the sandbox's idle process (`cat`,
/// [`crate::verify::IDLE_CMD`]: untagged, docker-init's child, command line
/// exactly `cat`, and the child of docker-init that started first — a copy
/// of a shell the command names `cat` and orphans is a stranger) are never
/// taken: killing it would end the sandbox.
/// "Strangers" are processes without any `ODEK_EXEC_ID` that started
/// within the last `$4` seconds (from `/proc/uptime` and the process's
/// start time at 100 ticks a second) and whose parent is outside the
/// container (PPid 0: an exec's own process) or docker-init (PPid 1: an
/// orphan): a command's process that rewrote its environment and left its
/// parent cannot be told from another program's. A tag that is not 32
/// lowercase hex (`ODEK_EXEC_ID=x`) counts as none. Processes not ours
/// whose environment cannot be read are "unreadable".
///
/// `kill`: up to five passes; each SIGSTOPs a tagged process as soon as
/// it reads it (it can fork no more during the scan) and the rest of ours
/// after the scan, then SIGKILLs them together, so no process of the
/// command runs again once one of them died (a shell woken by its child's
/// death would run its next step); a pass finds children forked during the
/// one before. Exits 0 once a pass finds none, 1 when processes kept
/// appearing.
/// `count`: prints `<ours> <unreadable> <strangers>` — processes still ours,
/// live ones whose environment could not be read, and strangers — and
/// exits 0.
/// `main`: prints `<main> <strangers>`: main is `1` when the command's own
/// process still runs (one of ours with PPid 0), else `0`.
/// Exits 3 without `cat`; 4 when `cat` does not show the probe in the
/// script's own environment (a `cat` the command replaced would make every
/// scan see nothing); a shell that cannot fork (pids limit exhausted) exits 2.
///
/// The script lives in `exec/kill.sh` (checked by shellcheck in `cargo xtask lint`).
const KILL_SCRIPT: &str = include_str!("exec/kill.sh");

/// How long odek waits, after a timeout, for the output stream of a command
/// that has already exited (Docker keeps it open while a background child
/// holds the command's stdout or stderr, for about 2 s).
const STREAM_GRACE: Duration = Duration::from_secs(5);

/// Why a kill cannot be trusted when `cat` does not show the probe.
const UNTRUSTED_CAT: &str =
    "cat in the sandbox does not show process environments (was it replaced?), so the command's processes cannot be found";

/// Kill rounds (kill, then count) before odek gives up.
const KILL_ROUNDS: usize = 3;

fn new_exec_tag() -> String {
    let b: [u8; 16] = rand::rng().random();
    hex::encode(b)
}

/// How a command ended early.
#[derive(Clone, Copy)]
pub(crate) enum Cut {
    Timeout,
    Cancelled,
}

impl ExecRequest {
    /// Checks the request without running anything (what [`Client::exec`]
    /// checks first): a non-empty argv without NUL bytes, valid env keys
    /// (not the reserved [`EXEC_TAG_ENV`]), values without NUL bytes.
    ///
    /// Errors: [`Error::Usage`] or [`Error::Config`] naming the problem.
    pub fn check(&self) -> Result<()> {
        validate(self)
    }
}

fn validate(req: &ExecRequest) -> Result<()> {
    let argv = req.command.argv();
    if argv.is_empty() || argv[0].is_empty() {
        return Err(Error::Usage(
            "exec needs a command (the argv was empty, or its first element was the empty string)"
                .into(),
        ));
    }
    if argv.iter().any(|a| a.contains('\0')) {
        return Err(Error::Usage(
            "exec arguments must not contain NUL bytes".into(),
        ));
    }
    for (k, v) in &req.env {
        // Also refuses the reserved EXEC_TAG_ENV.
        crate::config::validate_env_key_as(
            "the command's env (-e, or env in an exec request)",
            "env",
            k,
        )
        .map_err(Error::Config)?;
        if v.contains('\0') {
            return Err(Error::Usage(format!(
                "the command's env (-e, or env in an exec request): {k} contains a NUL byte"
            )));
        }
    }
    Ok(())
}

impl Client {
    /// Runs a command in the sandbox, streaming output to `output`.
    ///
    /// Errors: an empty command or NUL bytes (config); the container gone or
    /// stopped during the command (docker-rejected); the daemon lost
    /// (daemon-unreachable). A non-zero exit is not an error. After
    /// `req.timeout` the command is killed (see [`ExecRequest::timeout`]) and
    /// the outcome is `{exit_code: 124, timed_out: true}`.
    pub async fn exec(
        &self,
        sandbox: &Sandbox,
        req: &ExecRequest,
        output: OutputSink<'_>,
    ) -> Result<ExecOutcome> {
        let never = std::future::pending::<()>();
        self.exec_until(sandbox, req, output, never).await
    }

    /// As [`Client::exec`], but when `cancel` completes first the command is
    /// killed the way a timeout kills it and the outcome says `cancelled`
    /// (exit code 130; the CLI uses this for SIGINT/SIGTERM during
    /// `odek sandbox exec` and exits with the signal's own status).
    ///
    /// Errors: as [`Client::exec`].
    pub async fn exec_until(
        &self,
        sandbox: &Sandbox,
        req: &ExecRequest,
        output: OutputSink<'_>,
        cancel: impl Future<Output = ()>,
    ) -> Result<ExecOutcome> {
        validate(req)?;
        let Some(id) = &sandbox.container_id else {
            return exec_on_host(sandbox, req, output, cancel).await;
        };
        // Issue 21: through the sandbox's supervisor when this process
        // holds its owner session.
        if let Some(session) = sandbox.owner.session() {
            let engine = self.engine().ok();
            let engine = engine.as_ref().map(|e| e.as_ref());
            return crate::supervisor::exec(session, engine, sandbox, req, output, cancel).await;
        }
        let engine = self.engine()?;
        // A supervised sandbox this process does not own: through a relay
        // to its supervisor, never the exec API (whose commands would get
        // the container's user, root, and the supervisor's capabilities).
        if let Some(session) = self.relay(engine.as_ref(), &sandbox.name, id).await? {
            return crate::supervisor::exec(
                &session,
                Some(engine.as_ref()),
                sandbox,
                req,
                output,
                cancel,
            )
            .await;
        }
        let endpoint = engine.endpoint().to_string();
        let tag = format!("{EXEC_TAG_ENV}={}", new_exec_tag());
        let mut env: Vec<String> = req.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        env.sort();
        env.push(tag.clone());
        let spec = ExecSpec {
            cmd: req.command.argv(),
            env,
            working_dir: Some(req.workdir.clone().unwrap_or_else(|| "/workspace".into())),
            user: None,
        };
        let started = tokio::time::Instant::now();
        let work = engine.exec(id, &spec, output);
        tokio::pin!(work);
        let mut first = cut_short(&mut work, req.timeout, cancel).await;
        if matches!(first, Err(Cut::Timeout))
            && main_has_exited(engine.as_ref(), id, &tag, started).await
        {
            // The command itself ended; only its output stream is still
            // open (a background child holds it). Its own status stands.
            if let Ok(r) = tokio::time::timeout(STREAM_GRACE, &mut work).await {
                first = Ok(r);
            }
        }
        let exit = match first {
            Ok(r) => r,
            Err(cut) => {
                let budget = tokio::time::timeout(
                    KILL_BUDGET,
                    kill_tagged(engine.as_ref(), id, &tag, started),
                );
                let killed = match budget.await.unwrap_or_else(|_| {
                    Err(format!(
                        "the kill did not finish within {} s",
                        KILL_BUDGET.as_secs()
                    ))
                }) {
                    Ok(()) => true,
                    Err(why) => {
                        tracing::warn!(sandbox = %sandbox.name, "could not kill the command: {why}");
                        let note = format!(
                            "odek: could not kill the command in sandbox {} ({why}); it keeps running until the sandbox is destroyed\n",
                            sandbox.name
                        );
                        output(StreamKind::Stderr, note.as_bytes());
                        false
                    }
                };
                return Ok(cut_outcome(cut, killed));
            }
        };
        let exit = exit.map_err(|e| match Error::engine(&endpoint, Step::Exec, e) {
            Error::Rejected { message, .. } => {
                let stopped = message.contains("is not running");
                Error::Exec {
                    fix: stopped.then(|| crate::config::advice::Fix::Replace {
                        name: sandbox.name.clone(),
                    }),
                    message: format!(
                        "the command could not run in sandbox {}: {message}{}",
                        sandbox.name,
                        if stopped {
                            "; the sandbox is stopped: "
                        } else {
                            ""
                        }
                    ),
                    class: FailureClass::DockerRejected,
                    started: false,
                }
            }
            other => other,
        })?;
        match exit.code {
            // 137 = SIGKILL: maybe the whole sandbox was killed (docker kill,
            // OOM). Tell the two apart; the engine may report the container's
            // exit a moment after the exec's, so look a few times.
            Some(137) if !still_running(engine.as_ref(), id).await => Err(Error::SandboxStopped {
                fix: None,
                message: format!(
                    "sandbox {} stopped while the command ran (killed or out of memory; the command exited 137); the command may have partly run and was not retried",
                    sandbox.name
                ),
            }),
            Some(code) => Ok(ExecOutcome::exited(code)),
            None => {
                let running = container_running(engine.as_ref(), id).await;
                if running {
                    Err(Error::Exec {
                        fix: None,
                        message: format!(
                            "the command in sandbox {} ended without an exit code",
                            sandbox.name
                        ),
                        class: FailureClass::DockerRejected,
                        started: true,
                    })
                } else {
                    Err(Error::SandboxStopped {
                        fix: None,
                        message: format!(
                            "sandbox {} stopped while the command ran (killed or out of memory); the command may have partly run and was not retried",
                            sandbox.name
                        ),
                    })
                }
            }
        }
    }
}

/// Runs `work` until it ends, the timeout elapses or `cancel` completes.
async fn cut_short<T>(
    work: impl Future<Output = T>,
    timeout: Option<Duration>,
    cancel: impl Future<Output = ()>,
) -> std::result::Result<T, Cut> {
    let deadline = async {
        match timeout {
            Some(t) => tokio::time::sleep(t).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        r = work => Ok(r),
        () = deadline => Err(Cut::Timeout),
        () = cancel => Err(Cut::Cancelled),
    }
}

pub(crate) fn cut_outcome(cut: Cut, killed: bool) -> ExecOutcome {
    ExecOutcome {
        exit_code: match cut {
            Cut::Timeout => TIMEOUT_EXIT,
            Cut::Cancelled => 130,
        },
        timed_out: matches!(cut, Cut::Timeout),
        cancelled: matches!(cut, Cut::Cancelled),
        killed,
    }
}

/// SIGKILLs every process in the container whose environment holds `tag`
/// (`ODEK_EXEC_ID=<hex>`) and checks that none is left: up to
/// [`KILL_ROUNDS`] rounds of a kill exec, a pause, and a count exec. Errors
/// name why the kill did not happen or could not be confirmed.
async fn kill_tagged(
    engine: &dyn crate::engine::DockerApi,
    id: &str,
    tag: &str,
    started: tokio::time::Instant,
) -> std::result::Result<(), String> {
    let mut left = 0;
    for _ in 0..KILL_ROUNDS {
        match run_kill_script(engine, id, tag, "kill", started).await?.0 {
            0 | 1 => {}
            2 => {
                return Err(
                    "the kill could not fork; the sandbox's pids limit may be exhausted".into(),
                )
            }
            3 | 126 | 127 => return Err("the image has no /bin/sh or cat to run the kill".into()),
            4 => return Err(UNTRUSTED_CAT.into()),
            code => return Err(format!("the kill exited with status {code}")),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        let (code, out) = run_kill_script(engine, id, tag, "count", started).await?;
        let counts: Vec<u64> = out
            .split_whitespace()
            .filter_map(|n| n.parse().ok())
            .collect();
        match (code, counts.as_slice()) {
            (0, [0, 0, 0]) => return Ok(()),
            (0, [0, 0, strangers]) => {
                return Err(format!(
                    "{strangers} process(es) started by an exec carry no {EXEC_TAG_ENV} tag, so the kill cannot be confirmed: a command that rewrote its environment (as programs that set their process title do) cannot be told from another program's"
                ))
            }
            (0, [0, unread, _]) => {
                return Err(format!(
                    "{unread} process(es) in the sandbox could not be checked for its tag"
                ))
            }
            (0, [n, _, _]) => left = *n,
            (2, _) => {
                return Err(
                    "the check could not fork; the sandbox's pids limit may be exhausted".into(),
                )
            }
            (3 | 126 | 127, _) => {
                return Err("the image has no /bin/sh or cat to run the kill".into())
            }
            (4, _) => return Err(UNTRUSTED_CAT.into()),
            _ => {
                return Err(format!(
                    "the check exited with status {code} and printed {:?}",
                    out.trim()
                ))
            }
        }
    }
    Err(format!(
        "{left} of its processes still run after {KILL_ROUNDS} kill rounds (it keeps forking)"
    ))
}

/// True only when the check ran and found the command's own process gone
/// and no untagged exec process that could be it (see [`KILL_SCRIPT`]'s
/// `main` mode); any doubt counts as still running.
async fn main_has_exited(
    engine: &dyn crate::engine::DockerApi,
    id: &str,
    tag: &str,
    started: tokio::time::Instant,
) -> bool {
    let check = tokio::time::timeout(
        KILL_BUDGET,
        run_kill_script(engine, id, tag, "main", started),
    );
    // "0 0": no process of the command started by the exec, and no exec
    // process without a tag that could be the command under another name.
    matches!(check.await, Ok(Ok((0, out))) if out.split_whitespace().eq(["0", "0"]))
}

/// Runs [`KILL_SCRIPT`] in `mode`; returns its exit code and stdout.
async fn run_kill_script(
    engine: &dyn crate::engine::DockerApi,
    id: &str,
    tag: &str,
    mode: &str,
    started: tokio::time::Instant,
) -> std::result::Result<(i64, String), String> {
    // Whole seconds since the command started, plus slack for the clocks.
    let recent = (started.elapsed().as_secs() + 2).to_string();
    let probe = format!("{KILL_PROBE_ENV}={}", new_exec_tag());
    let spec = ExecSpec {
        cmd: vec![
            "/bin/sh".into(),
            "-c".into(),
            KILL_SCRIPT.into(),
            "odek-kill".into(),
            tag.into(),
            mode.into(),
            probe.clone(),
            recent,
        ],
        env: vec![probe],
        working_dir: Some("/".into()),
        user: None,
    };
    let out = std::sync::Mutex::new(Vec::new());
    let collect = |k: StreamKind, b: &[u8]| {
        if k == StreamKind::Stdout {
            if let Ok(mut o) = out.lock() {
                o.extend_from_slice(b);
            }
        }
    };
    let exit = engine
        .exec(id, &spec, &collect)
        .await
        .map_err(|e| e.to_string())?;
    let text =
        String::from_utf8_lossy(&out.lock().map(|o| o.clone()).unwrap_or_default()).into_owned();
    Ok((exit.code.unwrap_or(-1), text))
}

/// True when the container still runs 200 ms after a SIGKILLed command.
async fn still_running(engine: &dyn crate::engine::DockerApi, id: &str) -> bool {
    for _ in 0..4 {
        if !container_running(engine, id).await {
            return false;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    container_running(engine, id).await
}

/// True when the container still runs (false when gone or unreadable).
async fn container_running(engine: &dyn crate::engine::DockerApi, id: &str) -> bool {
    engine
        .inspect_container(id)
        .await
        .ok()
        .flatten()
        .is_some_and(|c| c.running)
}

/// Fallback / off: runs on the host in the working directory. The one place
/// in odek-core allowed to start a process (core/clippy.toml,
/// core/tests/structure.rs).
#[allow(clippy::disallowed_types, clippy::disallowed_methods)]
async fn exec_on_host(
    sandbox: &Sandbox,
    req: &ExecRequest,
    output: OutputSink<'_>,
    cancel: impl Future<Output = ()>,
) -> Result<ExecOutcome> {
    let argv = req.command.argv();
    let mut cmd = tokio::process::Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .current_dir(
            req.workdir
                .clone()
                .map(std::path::PathBuf::from)
                .unwrap_or_else(|| sandbox.plan.workdir.clone()),
        )
        .envs(req.env.iter().map(|(k, v)| (k.clone(), v.clone())))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        // Its own process group, so that a timeout, a cancellation or odek
        // going away (the future dropped) kills its descendants too.
        .process_group(0)
        .kill_on_drop(true);
    let mut child = match cmd.spawn() {
        Ok(child) => child,
        // As a shell would: 127 for a command that does not exist, 126 for
        // one that cannot be executed (and `docker exec` does the same).
        // ENOEXEC (8): not a format the kernel can execute.
        Err(e)
            if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::PermissionDenied)
                || e.raw_os_error() == Some(8) =>
        {
            let code = if e.kind() == ErrorKind::NotFound {
                127
            } else {
                126
            };
            let msg = format!("odek: cannot run {:?} on the host: {e}\n", argv[0]);
            output(StreamKind::Stderr, msg.as_bytes());
            return Ok(ExecOutcome::exited(code));
        }
        Err(e) => {
            return Err(Error::Exec {
                fix: None,
                message: format!("cannot run {:?} on the host: {e}", argv[0]),
                class: FailureClass::Config,
                started: false,
            })
        }
    };
    let mut group = GroupKill(child.id());
    let mut out = child.stdout.take();
    let mut err = child.stderr.take();
    let pump = async {
        let mut b1 = vec![0u8; 8192];
        let mut b2 = vec![0u8; 8192];
        loop {
            tokio::select! {
                n = async { match out.as_mut() { Some(o) => o.read(&mut b1).await, None => std::future::pending().await } } => {
                    match n { Ok(0) | Err(_) => out = None, Ok(n) => output(StreamKind::Stdout, &b1[..n]) }
                }
                n = async { match err.as_mut() { Some(e) => e.read(&mut b2).await, None => std::future::pending().await } } => {
                    match n { Ok(0) | Err(_) => err = None, Ok(n) => output(StreamKind::Stderr, &b2[..n]) }
                }
                else => break,
            }
            if out.is_none() && err.is_none() {
                break;
            }
        }
        child.wait().await
    };
    let status = match cut_short(pump, req.timeout, cancel).await {
        // The leader was reaped: its ID may be reused, never signal it now.
        Ok(s) => {
            group.0 = None;
            s
        }
        Err(cut) => {
            let killed = group.kill();
            return Ok(cut_outcome(cut, killed));
        }
    };
    let status = status.map_err(|e| Error::Exec {
        fix: None,
        message: format!("waiting for the host command failed: {e}"),
        class: FailureClass::Config,
        started: true,
    })?;
    use std::os::unix::process::ExitStatusExt;
    let code = status
        .code()
        .map(i64::from)
        .or_else(|| status.signal().map(|s| 128 + i64::from(s)))
        .unwrap_or(1);
    Ok(ExecOutcome::exited(code))
}

/// SIGKILLs a host command's process group when dropped while armed (a
/// timeout, a cancellation, the exec future dropped). Disarmed (`None`) once
/// the leader was reaped, as its ID may then be reused.
struct GroupKill(Option<u32>);

impl GroupKill {
    /// SIGKILLs the group (once) and disarms; true when the signal was
    /// delivered or the group is already gone.
    fn kill(&mut self) -> bool {
        let pgid = self
            .0
            .take()
            .and_then(|p| i32::try_from(p).ok())
            .and_then(rustix::process::Pid::from_raw);
        match pgid {
            Some(pgid) => matches!(
                rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL),
                Ok(()) | Err(rustix::io::Errno::SRCH)
            ),
            None => false,
        }
    }
}

impl Drop for GroupKill {
    fn drop(&mut self) {
        self.kill();
    }
}

#[cfg(test)]
mod tests {
    use super::KILL_SCRIPT;
    use crate::verify::IDLE_CMD;

    #[test]
    fn the_kill_script_spares_the_idle_process_by_its_command_line() {
        // `$(cat /proc/<pid>/cmdline)` drops the NUL separators.
        let pattern = format!("in {}) k=c$start ;;", IDLE_CMD.concat());
        assert!(
            KILL_SCRIPT.contains(&pattern),
            "the kill script does not recognize the idle process {IDLE_CMD:?}"
        );
    }
}
