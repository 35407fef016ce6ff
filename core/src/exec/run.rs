//! [`Client::exec`] in a container: the exec, its timeout or cancellation,
//! the kill that follows ([`super::kill`]), and how a failed exec is told
//! apart from a sandbox that stopped under it.

use std::time::Duration;

use crate::client::Client;
use crate::engine::{ExecSpec, OutputSink, StreamKind};
use crate::error::{Error, Result};
use crate::failure::{FailureClass, Step};
use crate::sandbox::Sandbox;

use super::host::exec_on_host;
use super::kill::{kill_tagged, main_has_exited, new_exec_tag, KILL_BUDGET};
use super::outcome::{cut_outcome, cut_short, Cut, ExecOutcome};
use super::request::{validate, ExecIo, ExecOptions, ExecRequest};
use super::EXEC_TAG_ENV;

/// How long odek waits, after a timeout, for the output stream of a command
/// that has already exited (Docker keeps it open while a background child
/// holds the command's stdout or stderr, for about 2 s).
const STREAM_GRACE: Duration = Duration::from_secs(5);

impl Client {
    /// Runs a command in the sandbox, streaming output to `output`.
    ///
    /// Errors: an empty command or NUL bytes (config); the container gone or
    /// stopped during the command (docker-rejected); the daemon lost
    /// (daemon-unreachable); a token in `opts.cancel` already cancelled
    /// ([`Error::Cancelled`], nothing ran). A non-zero exit is not an error.
    /// After `req.timeout` the command is killed (see
    /// [`ExecRequest::timeout`]) and the outcome is `{exit_code: 124,
    /// timed_out: true}`; when `opts.cancel` fires first it is killed the
    /// same way and the outcome says `cancelled` (exit code 130; the CLI
    /// cancels on SIGINT/SIGTERM during `odek sandbox exec` and exits with
    /// the signal's own status; [`ExecOutcome::cancelled_as_error`] makes it
    /// an error).
    pub async fn exec(
        &self,
        sandbox: &Sandbox,
        req: &ExecRequest,
        opts: &ExecOptions,
        output: OutputSink<'_>,
    ) -> Result<ExecOutcome> {
        self.exec_io(sandbox, req, opts, ExecIo::default(), output)
            .await
    }

    /// [`Client::exec`] with the command's stdin and, when asked, a
    /// pseudo-terminal ([`ExecIo`]): stdin bytes are written as the stream
    /// yields them and its end closes the command's stdin; with
    /// [`ExecIo::tty`] the output is one stream (stdout) and
    /// [`ExecIo::resize`] resizes the terminal. A timeout or a cancel kills
    /// the command's whole tree as in [`Client::exec`].
    ///
    /// Errors: those of [`Client::exec`], and, for an `io` that is not
    /// [`ExecIo::is_plain`], [`Error::Exec`] (not started, nothing ran)
    /// when the sandbox has no odek supervisor (its commands go through the
    /// Docker exec API, which odek does not use for stdin or a terminal) or
    /// the command would run on the host (fallback, `--no-sandbox`); the
    /// message names the fix: relaunch the sandbox with `ODEK_SUPERVISOR`
    /// naming the static `odek-supervisor` binary.
    ///
    /// Every call in a container is recorded in the sandbox's log
    /// ([`crate::audit`]: the command line as run and the names of its env
    /// variables, never their values), whatever its outcome; a failure to
    /// record never fails the command.
    pub async fn exec_io(
        &self,
        sandbox: &Sandbox,
        req: &ExecRequest,
        opts: &ExecOptions,
        io: ExecIo<'_>,
        output: OutputSink<'_>,
    ) -> Result<ExecOutcome> {
        let call = crate::audit::Call::start(sandbox, self.surface(), opts.tool.unwrap_or("exec"))
            .command(&req.command.argv(), &req.env);
        let out = self
            .exec_io_unrecorded(sandbox, req, opts, io, output)
            .await;
        match &out {
            Ok(o) => call.finish(Some(o.exit_code), Some(outcome_words(o)), None),
            Err(e) => call.finish(None, None, Some(e)),
        }
        out
    }

    /// [`Client::exec_io`] without a record: for core's own commands that
    /// are recorded as what they do (the file tools of [`crate::files`]).
    pub(crate) async fn exec_io_unrecorded(
        &self,
        sandbox: &Sandbox,
        req: &ExecRequest,
        opts: &ExecOptions,
        io: ExecIo<'_>,
        output: OutputSink<'_>,
    ) -> Result<ExecOutcome> {
        if opts.cancel.as_ref().is_some_and(|t| t.is_cancelled()) {
            return Err(crate::cancel::cancelled("the command"));
        }
        validate(req)?;
        let cancel = async {
            match &opts.cancel {
                Some(t) => t.cancelled().await,
                None => std::future::pending().await,
            }
        };
        let Some(id) = &sandbox.container_id else {
            if !io.is_plain() {
                return Err(io_needs_supervisor(sandbox, "it runs on the host"));
            }
            return exec_on_host(sandbox, req, output, cancel).await;
        };
        // SPEC §4.4: the services of its networks connected (a Compose
        // `up` since the last call), or the call refused.
        self.relink(sandbox, &crate::approve::NoAsker).await?;
        // through the sandbox's supervisor when this process
        // holds its owner session.
        if let Some(session) = sandbox.owner.session() {
            let engine = self.engine().ok();
            let engine = engine.as_ref().map(|e| e.as_ref());
            return super::supervised::exec(session, engine, sandbox, req, io, output, cancel)
                .await;
        }
        let engine = self.engine()?;
        // A supervised sandbox this process does not own: through a relay
        // to its supervisor, never the exec API (whose commands would get
        // the container's user, root, and the supervisor's capabilities).
        if let Some(session) = self.relay(engine.as_ref(), &sandbox.name, id).await? {
            return super::supervised::exec(
                &session,
                Some(engine.as_ref()),
                sandbox,
                req,
                io,
                output,
                cancel,
            )
            .await;
        }
        // Stdin and a terminal are served by the supervisor only: through
        // the exec API they would need a second attached-exec path (create
        // with stdin and a TTY, a hijacked stream, resize, and a kill that
        // still finds the tree by its tag) for sandboxes that are the
        // fallback of the supervised ones.
        if !io.is_plain() {
            return Err(io_needs_supervisor(
                sandbox,
                "its commands run through the Docker exec API",
            ));
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
        if let Some(why) = exit.not_started {
            let (code, line) = super::not_started_line(
                why,
                spec.cmd.first().map_or("", String::as_str),
                spec.working_dir.as_deref().unwrap_or("/workspace"),
                &format!("in sandbox {}", sandbox.name),
            );
            output(StreamKind::Stderr, line.as_bytes());
            return Ok(ExecOutcome::exited(code));
        }
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

/// How a command ended, in a record's words.
fn outcome_words(o: &ExecOutcome) -> &'static str {
    if o.timed_out {
        "timed out"
    } else if o.cancelled {
        "cancelled"
    } else {
        "exited"
    }
}

/// The refusal of stdin or a terminal for a command that would not run
/// through odek's supervisor (`why`): nothing ran.
fn io_needs_supervisor(sandbox: &Sandbox, why: &str) -> Error {
    Error::Exec {
        fix: None,
        message: format!(
            "stdin and a terminal (-i, -t) need odek's supervisor in the sandbox, and sandbox {} has none ({why}); nothing ran. {}, or run the command without -i/-t",
            sandbox.name,
            crate::supervisor::how_to_get_one(why)
        ),
        class: FailureClass::DockerRejected,
        started: false,
    }
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
