//! Background processes (docs/SANDBOXING.md, "Background processes"):
//! commands odek's supervisor keeps running with no attached caller.
//! [`Client::exec_background`] returns at once with a [`ProcessId`];
//! [`Client::process_output`] reads what the process wrote since a cursor
//! and its status; [`Client::process_kill`] kills its whole tree. They end
//! with the sandbox, never with the call or the session that started them,
//! nor with another command's timeout.
//!
//! Only the supervisor serves them: a sandbox without one (its commands go
//! through the Docker exec API) or a run on the host is refused before
//! anything runs, naming the fix (launch a new sandbox with the supervisor
//! on). The exec API cannot keep a process's output without a second,
//! unbounded mechanism, which is what the supervisor replaced.

use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

use odek_supervisor::proto::{self, Kind};
use serde::{Deserialize, Serialize};

use crate::client::Client;
use crate::engine::StreamKind;
use crate::error::{Error, Result};
use crate::failure::FailureClass;
use crate::sandbox::Sandbox;
use crate::supervisor::{Answer, Session};

use super::request::{validate, ExecRequest};

pub use proto::{BACKGROUND_BUFFER, MAX_BACKGROUND};

/// How long a background request (start, output, kill) may take to be
/// answered; a kill waits up to 2 s for the tree to be gone.
const ANSWER_BUDGET: Duration = Duration::from_secs(15);

/// A background process's name, as the supervisor gave it (`<server
/// pid>-<n>`: never reused in the sandbox, and unknown once the server that
/// started it died).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ProcessId(pub String);

impl std::fmt::Display for ProcessId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// How a background process's root ended, and the outcome of the last
/// kill of its tree (its timeout's or [`Client::process_kill`]'s).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessExit {
    /// Its exit code, or 128 + the signal that ended it (137 after a kill).
    pub exit_code: i64,
    /// The signal that ended it, when one did.
    pub signal: Option<i32>,
    /// The last kill of its tree (its timeout's or
    /// [`Client::process_kill`]'s) killed processes of it and was
    /// confirmed: every process of the tree was seen gone (from `/proc`)
    /// and none that may be its was left running. False when no kill ran,
    /// when the kill found nothing left to kill (its root had ended by
    /// itself and nothing it started ran on: `note` says so), or when it
    /// could not be confirmed or left processes running (`escaped`,
    /// `note`) — never claimed for a kill odek did not see.
    pub killed: bool,
    /// Ended by the timeout its request gave.
    pub timed_out: bool,
    /// [`Client::process_kill`] was asked for it (it ended its root, or
    /// what was left of its tree after the root ended by itself).
    pub cancelled: bool,
    /// Pids (in the sandbox) of processes that may belong to it and were
    /// left running by the last kill: orphans it started in their own
    /// session (`setsid`) while another command ran, which odek cannot
    /// tell from that command's (docs/SANDBOXING.md, "Timeout and
    /// cancellation"). Empty when no kill ran or it left none.
    pub escaped: Vec<u32>,
    /// When a kill ran and `killed` is false: why, for people (the same
    /// words as a foreground command's note on its stderr, or
    /// [`NOTHING_TO_KILL`]).
    pub note: Option<String>,
}

/// What [`Client::process_output`] and [`Client::process_kill`] return.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessOutput {
    /// The process.
    pub process_id: ProcessId,
    /// Its root's pid in the sandbox.
    pub pid: u32,
    /// The offset of the first byte returned (stdout and stderr bytes
    /// together since the process started).
    pub cursor: u64,
    /// The cursor to pass next time: the offset after the last byte
    /// returned.
    pub next_cursor: u64,
    /// Bytes between the cursor asked for and `cursor` that were dropped
    /// (the buffer keeps the last [`BACKGROUND_BUFFER`] bytes).
    pub dropped_bytes: u64,
    /// Output in the order written: `(stream, bytes)`.
    pub chunks: Vec<(StreamKind, Vec<u8>)>,
    /// How its root ended; `None` while it runs. Output may still come
    /// after that while a process it started holds its stdout or stderr.
    pub exit: Option<ProcessExit>,
}

impl ProcessOutput {
    /// The stdout bytes of [`ProcessOutput::chunks`].
    pub fn stdout(&self) -> Vec<u8> {
        self.stream(StreamKind::Stdout)
    }

    /// The stderr bytes of [`ProcessOutput::chunks`].
    pub fn stderr(&self) -> Vec<u8> {
        self.stream(StreamKind::Stderr)
    }

    fn stream(&self, kind: StreamKind) -> Vec<u8> {
        self.chunks
            .iter()
            .filter(|(k, _)| *k == kind)
            .flat_map(|(_, b)| b.iter().copied())
            .collect()
    }

    fn from_polled(
        sandbox: &str,
        polled: proto::Polled,
        output: Vec<(StreamKind, Vec<u8>)>,
    ) -> ProcessOutput {
        ProcessOutput {
            process_id: ProcessId(polled.process),
            pid: polled.pid,
            cursor: polled.cursor,
            next_cursor: polled.next,
            dropped_bytes: polled.dropped,
            chunks: output,
            exit: polled.exit.map(|e| exit_of(sandbox, e)),
        }
    }
}

/// [`ProcessExit::note`] of a kill that found nothing of the process left.
pub const NOTHING_TO_KILL: &str =
    "nothing to kill: it had already ended, and no process it started was left running";

/// The core's view of a background process's [`proto::Exit`] (the
/// supervisor's): `killed` only for a kill that ran and was confirmed with
/// nothing left running, as for a foreground command.
fn exit_of(sandbox: &str, e: proto::Exit) -> ProcessExit {
    let kill_ran = (e.cancelled || e.timed_out) && !e.nothing_to_kill;
    let note = if e.nothing_to_kill {
        Some(NOTHING_TO_KILL.to_string())
    } else if kill_ran {
        super::supervised::kill_note(sandbox, e.killed, &e.escaped)
    } else {
        None
    };
    ProcessExit {
        exit_code: match (e.code, e.signal) {
            (Some(c), _) => i64::from(c),
            (None, Some(s)) => 128 + i64::from(s),
            (None, None) => -1,
        },
        signal: e.signal,
        killed: kill_ran && e.killed && e.escaped.is_empty(),
        timed_out: e.timed_out,
        cancelled: e.cancelled,
        escaped: if kill_ran { e.escaped } else { Vec::new() },
        note,
    }
}

/// The session a background request goes through.
enum Through<'a> {
    Owner(&'a Session),
    Relay(Arc<Session>),
}

impl Deref for Through<'_> {
    type Target = Session;
    fn deref(&self) -> &Session {
        match self {
            Through::Owner(s) => s,
            Through::Relay(s) => s,
        }
    }
}

/// The refusal of a background request in a sandbox without odek's
/// supervisor (`why`): nothing ran.
fn needs_supervisor(sandbox: &Sandbox, why: &str, id: Option<&ProcessId>) -> Error {
    let message = match id {
        // Reading or killing one: there is none to read or kill.
        Some(id) => format!(
            "sandbox {} has no background process {}: background processes need odek's supervisor in the sandbox, and it has none ({why}); nothing was done",
            sandbox.name,
            crate::text::quote(&id.0)
        ),
        None => format!(
            "background processes need odek's supervisor in the sandbox, and sandbox {} has none ({why}); nothing ran. {}, or run the command in the foreground",
            sandbox.name,
            crate::supervisor::how_to_get_one(why)
        ),
    };
    Error::Exec {
        fix: None,
        message,
        class: FailureClass::DockerRejected,
        started: false,
    }
}

impl Client {
    /// The supervisor session for a background request in `sandbox`
    /// (`process`: a request about that process, else a start).
    async fn background_session<'a>(
        &self,
        sandbox: &'a Sandbox,
        process: Option<&ProcessId>,
    ) -> Result<Through<'a>> {
        let Some(id) = &sandbox.container_id else {
            return Err(needs_supervisor(sandbox, "it runs on the host", process));
        };
        let through = match sandbox.owner.session() {
            Some(s) => Through::Owner(s),
            None => {
                let engine = self.engine()?;
                match self.relay(engine.as_ref(), &sandbox.name, id).await? {
                    Some(s) => Through::Relay(s),
                    None => {
                        return Err(needs_supervisor(
                            sandbox,
                            "its commands run through the Docker exec API",
                            process,
                        ))
                    }
                }
            }
        };
        if !through.serves_background() {
            return Err(needs_supervisor(
                sandbox,
                "its supervisor is an older one without background processes",
                process,
            ));
        }
        Ok(through)
    }

    /// Starts `req` in `sandbox` as a background process and returns at
    /// once with its id. It runs as the plan's account in `/workspace` (or
    /// `req.workdir`), with stdin `/dev/null` and no terminal, in its own
    /// process group; its output goes into a buffer of the last
    /// [`BACKGROUND_BUFFER`] bytes; it ends with the sandbox, on
    /// [`Client::process_kill`], or after `req.timeout` when one is given
    /// (no default), never with this call.
    ///
    /// Errors: those of [`ExecRequest`]'s checks (config); no supervisor in
    /// the sandbox, or one without background processes, or a run on the
    /// host ([`Error::Exec`], `started: false`, naming the fix); the
    /// supervisor's refusal, e.g. [`MAX_BACKGROUND`] processes already
    /// running, or the program missing ([`Error::Exec`], `started:
    /// false`); the session lost before the answer ([`Error::Exec`],
    /// `started: true`: it may run).
    ///
    /// Recorded in the sandbox's log as `exec_background` with its command
    /// line and process id ([`crate::audit`]).
    pub async fn exec_background(&self, sandbox: &Sandbox, req: &ExecRequest) -> Result<ProcessId> {
        let call = crate::audit::Call::start(sandbox, self.surface(), "exec_background")
            .command(&req.command.argv(), &req.env);
        let out = self.exec_background_unrecorded(sandbox, req).await;
        match &out {
            Ok(id) => call.process(&id.0).finish(None, Some("started"), None),
            Err(e) => call.finish(None, None, Some(e)),
        }
        out
    }

    async fn exec_background_unrecorded(
        &self,
        sandbox: &Sandbox,
        req: &ExecRequest,
    ) -> Result<ProcessId> {
        validate(req)?;
        // SPEC §4.4, as every command: the services connected first.
        self.relink(sandbox, &crate::approve::NoAsker).await?;
        let session = self.background_session(sandbox, None).await?;
        let start = super::supervised::start_for(&session, sandbox, req, None, false)?;
        match session
            .request(Kind::Background, &start, ANSWER_BUDGET)
            .await
        {
            Answer::Reply { frame, .. } => frame
                .parse::<proto::Spawned>()
                .map(|s| ProcessId(s.process))
                .map_err(|e| lost(sandbox, "the background command", &e.to_string())),
            Answer::Failed(failed) => Err(Error::Exec {
                fix: None,
                message: match failed.not_started {
                    // The words of a foreground command's (without `odek: `).
                    Some(why) => {
                        let (_, line) = super::not_started_line(
                            why,
                            start.argv.first().map_or("", String::as_str),
                            &start.cwd,
                            &format!("in sandbox {}", sandbox.name),
                        );
                        format!(
                            "the background command did not start: {}",
                            line.trim_end().trim_start_matches("odek: ")
                        )
                    }
                    None => format!(
                        "the background command did not start in sandbox {}: {}",
                        sandbox.name,
                        crate::text::foreign(&failed.message)
                    ),
                },
                class: FailureClass::DockerRejected,
                started: false,
            }),
            Answer::Lost | Answer::Restarted(_) => Err(lost(
                sandbox,
                "the background command",
                "no answer from odek's supervisor",
            )),
            Answer::TooMuch => Err(lost(sandbox, "the background command", TOO_MUCH)),
        }
    }

    /// What background process `id` wrote since `cursor` (`None`: from the
    /// oldest byte kept), the cursor for the next call, how many bytes
    /// were dropped before what is returned, and its status.
    ///
    /// Errors: no supervisor (as [`Client::exec_background`]); an unknown
    /// process — never started in this sandbox, evicted (the supervisor
    /// keeps [`MAX_BACKGROUND`], evicting the oldest ended one), or started
    /// by a supervisor server that has since died, whose processes were
    /// killed — or a cursor beyond the output's end ([`Error::Usage`]);
    /// the session lost ([`Error::Exec`]).
    pub async fn process_output(
        &self,
        sandbox: &Sandbox,
        id: &ProcessId,
        cursor: Option<u64>,
    ) -> Result<ProcessOutput> {
        let session = self.background_session(sandbox, Some(id)).await?;
        let poll = proto::Poll {
            process: id.0.clone(),
            cursor,
        };
        let answer = session.request(Kind::Poll, &poll, ANSWER_BUDGET).await;
        polled(sandbox, &session, id, answer, "its output")
    }

    /// Kills background process `id`'s whole tree (for one whose root
    /// ended, what is left of its process group and session) and returns
    /// its status after the kill (no output: read it with
    /// [`Client::process_output`], which still knows the process).
    ///
    /// Errors: those of [`Client::process_output`].
    ///
    /// Recorded in the sandbox's log as `process_kill` with the process id
    /// and its exit code ([`crate::audit`]).
    pub async fn process_kill(&self, sandbox: &Sandbox, id: &ProcessId) -> Result<ProcessOutput> {
        let call =
            crate::audit::Call::start(sandbox, self.surface(), "process_kill").process(&id.0);
        let out = self.process_kill_unrecorded(sandbox, id).await;
        match &out {
            Ok(o) => call.finish(
                o.exit.as_ref().map(|e| e.exit_code),
                Some(if o.exit.as_ref().is_some_and(|e| e.killed) {
                    "killed"
                } else {
                    "kill not confirmed"
                }),
                None,
            ),
            Err(e) => call.finish(None, None, Some(e)),
        }
        out
    }

    async fn process_kill_unrecorded(
        &self,
        sandbox: &Sandbox,
        id: &ProcessId,
    ) -> Result<ProcessOutput> {
        let session = self.background_session(sandbox, Some(id)).await?;
        let which = proto::ProcessRef {
            process: id.0.clone(),
        };
        let answer = session
            .request(Kind::KillProcess, &which, ANSWER_BUDGET)
            .await;
        polled(sandbox, &session, id, answer, "its kill")
    }
}

/// A Poll's or KillProcess's answer as a result.
fn polled(
    sandbox: &Sandbox,
    session: &Session,
    id: &ProcessId,
    answer: Answer,
    what: &str,
) -> Result<ProcessOutput> {
    match answer {
        Answer::Reply { output, frame } => frame
            .parse::<proto::Polled>()
            .map(|p| ProcessOutput::from_polled(&sandbox.name, p, output))
            .map_err(|e| lost(sandbox, what, &e.to_string())),
        Answer::Failed(proto::Failed { message: why, .. }) => {
            let restarted = session.last_restart().map_or(String::new(), |r| {
                format!(
                    "; odek's supervisor restarted its server in this sandbox ({}), which killed the background processes of the one before",
                    crate::text::foreign(&r.reason)
                )
            });
            Err(Error::Usage(format!(
                "background process {} in sandbox {}: {}{restarted}",
                crate::text::quote(&id.0),
                sandbox.name,
                crate::text::foreign(&why)
            )))
        }
        Answer::Lost | Answer::Restarted(_) => Err(lost(
            sandbox,
            what,
            "the supervisor's session ended or did not answer",
        )),
        Answer::TooMuch => Err(lost(sandbox, what, TOO_MUCH)),
    }
}

/// Why an [`Answer::TooMuch`] is refused.
const TOO_MUCH: &str = "the answer came with more output than odek's supervisor sends for one (odek read no more of it: is it of another odek version?)";

/// A request whose answer never came.
fn lost(sandbox: &Sandbox, what: &str, why: &str) -> Error {
    Error::Exec {
        fix: None,
        message: format!(
            "{what} in sandbox {}: {why}; its status is unknown",
            sandbox.name
        ),
        class: FailureClass::DockerRejected,
        started: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exit(timed_out: bool, cancelled: bool, killed: bool, escaped: Vec<u32>) -> proto::Exit {
        proto::Exit {
            code: None,
            signal: Some(9),
            timed_out,
            cancelled,
            killed,
            escaped,
            nothing_to_kill: false,
        }
    }

    #[test]
    fn a_kill_is_claimed_only_when_confirmed_with_nothing_left_running() {
        let e = exit_of("sb", exit(true, false, true, vec![]));
        assert!(e.killed && e.timed_out && e.note.is_none(), "{e:?}");
        // Every target gone, but orphans left running: not killed, named.
        let e = exit_of("sb", exit(true, false, true, vec![41, 42]));
        assert!(!e.killed, "{e:?}");
        assert_eq!(e.escaped, [41, 42]);
        let note = e.note.expect("a note");
        assert!(
            note.contains("[41, 42]") && note.contains("sandbox sb"),
            "{note}"
        );
        // The targets not seen gone.
        let e = exit_of("sb", exit(false, true, false, vec![]));
        assert!(!e.killed && e.cancelled, "{e:?}");
        assert!(e.note.expect("a note").contains("could not confirm"));
        // No kill ran: nothing claimed, nothing said.
        let mut natural = exit(false, false, false, vec![]);
        natural.code = Some(0);
        natural.signal = None;
        let e = exit_of("sb", natural);
        assert!(!e.killed && e.note.is_none() && e.exit_code == 0, "{e:?}");
    }

    #[test]
    fn a_kill_that_found_nothing_left_says_so_and_claims_nothing() {
        let mut ended = exit(false, true, false, vec![]);
        ended.code = Some(0);
        ended.signal = None;
        ended.nothing_to_kill = true;
        let e = exit_of("sb", ended);
        assert!(!e.killed && e.escaped.is_empty(), "{e:?}");
        assert_eq!(e.note.as_deref(), Some(NOTHING_TO_KILL));
        assert_eq!(e.exit_code, 0, "its own status stands");
    }
}
