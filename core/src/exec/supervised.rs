//! Commands through odek's supervisor (docs/SANDBOXING.md, "The
//! supervisor"): over the owner's session, or a relay for a process that
//! does not own the sandbox.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use odek_supervisor::proto;

use crate::engine::{OutputSink, StreamKind};
use crate::supervisor::{
    relay_name, Ended, Session, READY_BUDGET, SUPERVISOR_PATH, SUPERVISOR_UID,
};

/// Runs `req` in `sandbox` through its owner `session` (or a relay), with
/// `io`'s stdin, terminal and resizes: the command runs as the plan's
/// account, its timeout and a cancel kill its
/// whole tree, and the supervisor confirms the kill from the kernel.
///
/// Errors: the command could not start (its program missing, the
/// directory absent) is an exit as through the exec API (127, or 126 for
/// a program that is not executable), odek's one line on stderr
/// ([`crate::exec::not_started_line`]); the session ending before the command's report
/// is [`crate::Error::Exec`] with `started: true` saying its status is
/// unknown (never a success), as is a command whose supervisor's server
/// died and was restarted while it ran ([`Ended::Restarted`]); the next
/// command runs on the new server, and when no result said the restart,
/// the next command's stderr says it once.
/// The [`proto::Start`] of `req` in `sandbox` — its argv, env, working
/// directory (`/workspace` by default), timeout, and the plan's command
/// account, which the supervisor must be bound to — for a foreground
/// command (`tty`, `stdin`) or a background one (neither). One place for
/// both, so they run as the same user in the same place.
///
/// Errors: a plan naming no account, or a supervisor bound to another
/// ([`crate::Error::Exec`], `started: false`: nothing ran).
pub(crate) fn start_for(
    session: &Session,
    sandbox: &crate::sandbox::Sandbox,
    req: &crate::exec::ExecRequest,
    tty: Option<proto::WinSize>,
    stdin: bool,
) -> crate::Result<proto::Start> {
    let refused = |message: String| crate::Error::Exec {
        fix: None,
        message,
        class: crate::failure::FailureClass::DockerRejected,
        started: false,
    };
    let Some((uid, gid)) = crate::supervisor::command_ids(&sandbox.plan) else {
        return Err(refused(format!(
            "sandbox {} has a supervisor but its plan names no account",
            sandbox.name
        )));
    };
    // The supervisor must be bound to this account (`serve --commands`).
    session
        .check_bound(uid, gid)
        .map_err(|why| refused(format!("sandbox {}: {why}; nothing ran", sandbox.name)))?;
    Ok(proto::Start {
        argv: req.command.argv(),
        env: req.env.clone(),
        cwd: req.workdir.clone().unwrap_or_else(|| "/workspace".into()),
        uid,
        gid,
        groups: vec![],
        tty,
        stdin,
        timeout_ms: req
            .timeout
            .map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX)),
    })
}

pub(crate) async fn exec(
    session: &Session,
    engine: Option<&dyn crate::engine::DockerApi>,
    sandbox: &crate::sandbox::Sandbox,
    req: &crate::exec::ExecRequest,
    io: crate::exec::ExecIo<'_>,
    output: OutputSink<'_>,
    cancel: impl Future<Output = ()>,
) -> crate::Result<crate::exec::ExecOutcome> {
    use crate::exec::{cut_outcome, Cut, ExecOutcome};
    let start = start_for(session, sandbox, req, io.tty, io.stdin.is_some())?;
    // odek's own watchdog: the supervisor kills at the timeout; if it has
    // not reported a little later, odek asks again and then gives up.
    let deadline = req.timeout.map(|t| t + Duration::from_secs(5));
    let resize = if io.tty.is_some() { io.resize } else { None };
    if let Some(r) = session.take_unsaid_restart() {
        let note = format!(
            "odek: odek's supervisor in sandbox {} restarted its server since the last command ({}); commands run as before\n",
            sandbox.name,
            crate::text::foreign(&r.reason)
        );
        output(StreamKind::Stderr, note.as_bytes());
    }
    let ended = session
        .run_io(&start, output, cancel, io.stdin, resize, deadline)
        .await;
    // A lost session: the container's own state tells a stopped sandbox
    // (docker kill, out of memory) from a supervisor that ended.
    let running = match (&ended, engine, sandbox.container_id.as_deref()) {
        (Ended::Lost, Some(engine), Some(id)) => {
            let mut running = true;
            for _ in 0..4 {
                running = matches!(engine.inspect_container(id).await, Ok(Some(i)) if i.running);
                if !running {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            running
        }
        _ => true,
    };
    match ended {
        Ended::Exit(e) => {
            let cut = if e.timed_out {
                Some(Cut::Timeout)
            } else if e.cancelled {
                Some(Cut::Cancelled)
            } else {
                None
            };
            let Some(cut) = cut else {
                let code = match (e.code, e.signal) {
                    (Some(c), _) => i64::from(c),
                    (None, Some(sig)) => 128 + i64::from(sig),
                    (None, None) => {
                        return Err(crate::Error::Exec {
                            fix: None,
                            message: format!(
                                "the command in sandbox {} ended without an exit code",
                                sandbox.name
                            ),
                            class: crate::failure::FailureClass::DockerRejected,
                            started: true,
                        })
                    }
                };
                return Ok(ExecOutcome::exited(code).through_supervisor());
            };
            if let Some(why) = kill_note(&sandbox.name, e.killed, &e.escaped) {
                output(StreamKind::Stderr, format!("odek: {why}\n").as_bytes());
            }
            Ok(cut_outcome(cut, e.killed && e.escaped.is_empty()).through_supervisor())
        }
        Ended::Failed(failed) => {
            let (code, note) = match failed.not_started {
                Some(why) => crate::exec::not_started_line(
                    why,
                    start.argv.first().map_or("", String::as_str),
                    &start.cwd,
                    &format!("in sandbox {}", sandbox.name),
                ),
                None => (
                    127,
                    format!("odek: {}\n", crate::text::foreign(&failed.message)),
                ),
            };
            output(StreamKind::Stderr, note.as_bytes());
            Ok(ExecOutcome::exited(code).through_supervisor())
        }
        Ended::Lost if !running => Err(crate::Error::SandboxStopped {
            fix: None,
            message: format!(
                "sandbox {} stopped while the command ran (killed or out of memory); the command may have partly run and was not retried",
                sandbox.name
            ),
        }),
        Ended::Restarted(r) => Err(crate::Error::Exec {
            fix: None,
            message: format!(
                "odek's supervisor in sandbox {} restarted while the command ran (its server {}): the command's status is unknown (it may have partly run; {}); the next command runs on the new server",
                sandbox.name,
                crate::text::foreign(&r.reason),
                if r.killed {
                    "its processes were killed"
                } else {
                    "odek could not confirm that all its processes were killed"
                }
            ),
            class: crate::failure::FailureClass::DockerRejected,
            started: true,
        }),
        // The container runs: the server that served this session died (a
        // relay's stream ends with it; the keeper starts another).
        Ended::Lost => Err(crate::Error::Exec {
            fix: None,
            message: format!(
                "odek's supervisor in sandbox {} ended this command's session while it ran (its server died; the next command starts a new session): the command's status is unknown (it may have partly run)",
                sandbox.name
            ),
            class: crate::failure::FailureClass::DockerRejected,
            started: true,
        }),
    }
}

impl crate::Client {
    /// A session with the supervisor of `sandbox` (container `id`) when it
    /// has one: a live relay this client opened before, else a new one
    /// (`docker exec --user` [`SUPERVISOR_UID`] of `odek-supervisor relay`),
    /// checked as a launch checks the owner's. `None` for a container
    /// without a supervisor ([`crate::hardening::supervised`]).
    ///
    /// Errors: the container has a supervisor that cannot be reached
    /// ([`crate::Error::Exec`]): nothing runs, as the exec API would run
    /// commands with the container's user (root) and the supervisor's
    /// capabilities.
    pub(crate) async fn relay(
        &self,
        engine: &dyn crate::engine::DockerApi,
        name: &str,
        id: &str,
    ) -> crate::Result<Option<Arc<Session>>> {
        let mut relays = self.relays.lock().await;
        if let Some(s) = relays.get(id) {
            if s.is_alive() {
                return Ok(Some(Arc::clone(s)));
            }
            relays.remove(id);
        }
        let endpoint = engine.endpoint().to_string();
        let step = crate::failure::Step::Exec;
        let info = engine
            .inspect_container(id)
            .await
            .map_err(|e| crate::Error::engine(&endpoint, step, e))?;
        if !info.as_ref().is_some_and(crate::hardening::supervised) {
            return Ok(None);
        }
        let unreachable = |why: String| crate::Error::Exec {
            fix: Some(crate::config::advice::Fix::Replace {
                name: name.to_string(),
            }),
            message: format!(
                "odek's supervisor in sandbox {name} could not be reached ({why}); nothing ran"
            ),
            class: crate::failure::FailureClass::DockerRejected,
            started: false,
        };
        let spec = crate::engine::ExecSpec {
            cmd: vec![SUPERVISOR_PATH.into(), "relay".into(), relay_name(name)],
            env: vec![],
            working_dir: Some("/".into()),
            user: Some(format!("{SUPERVISOR_UID}:{SUPERVISOR_UID}")),
        };
        let link = engine
            .exec_session(id, &spec)
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        let session = Arc::new(
            Session::open(link, READY_BUDGET)
                .await
                .map_err(unreachable)?,
        );
        relays.insert(id.to_string(), Arc::clone(&session));
        Ok(Some(session))
    }
}

/// What a kill that was not confirmed leaves behind, for people (the
/// foreground exec's stderr note and a background process's
/// `ProcessExit::note`): `None` when `confirmed` (every process of the
/// tree seen gone from `/proc`) and nothing `escaped`, else why not:
/// the orphans left running (pids in the sandbox) or an unconfirmed kill.
pub(crate) fn kill_note(sandbox: &str, confirmed: bool, escaped: &[u32]) -> Option<String> {
    if confirmed && escaped.is_empty() {
        return None;
    }
    let why = if confirmed {
        format!(
            "processes {escaped:?} it may have started were left running (started while another command ran)"
        )
    } else if escaped.is_empty() {
        "the supervisor could not confirm every process of it gone".to_string()
    } else {
        format!(
            "the supervisor could not confirm every process of it gone, and processes {escaped:?} it may have started were left running (started while another command ran)"
        )
    };
    Some(format!(
        "could not kill the whole command in sandbox {sandbox} ({why}); they keep running until the sandbox is destroyed"
    ))
}
