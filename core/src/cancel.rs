//! Cancelling a call in flight (SPEC §10.1): the cancellable forms of
//! resolve, launch, exec, describe and config view that an embedding program
//! (the C ABI's `odek_cancel_t`, a Go context, a Python task) stops through a
//! [`CancellationToken`].
//!
//! A cancelled call ends promptly with [`Error::Cancelled`] and leaves
//! nothing behind: a launch removes the container it created (SPEC §6.1:
//! any failure after create removes the container), waiting for a create
//! request already on its way to answer first; an exec kills the command the
//! way its timeout does ([`Client::exec_until`]). A token cancelled before the
//! call starts makes the call fail at once.

use std::sync::Arc;
use std::time::Duration;

pub use tokio_util::sync::CancellationToken;

use crate::client::Client;
use crate::engine::OutputSink;
use crate::error::{Error, Result};
use crate::exec::{ExecOutcome, ExecRequest};
use crate::launch::{new_sandbox_name, LaunchOptions, LaunchProgress, Stage};
use crate::plan::Plan;
use crate::registry::Reaped;
use crate::resolve::Reporter;
use crate::sandbox::Sandbox;

use crate::registry::CREATE_SETTLE;

/// How long a cancelled launch waits for its image probe's removal before
/// it returns (the removal goes on in the background after that).
const PROBE_SETTLE: Duration = Duration::from_secs(2);

fn cancelled(what: &str) -> Error {
    Error::Cancelled {
        fix: None,
        message: format!("{what} was cancelled by the caller"),
    }
}

/// Runs `work` until it ends or `cancel` fires; a cancelled `work` is
/// dropped and the call is [`Error::Cancelled`] naming `what`. For calls
/// that make nothing (resolve, describe, config view).
pub async fn until<T>(
    cancel: &CancellationToken,
    what: &str,
    work: impl std::future::Future<Output = Result<T>>,
) -> Result<T> {
    if cancel.is_cancelled() {
        return Err(cancelled(what));
    }
    tokio::select! {
        out = work => out,
        () = cancel.cancelled() => Err(cancelled(what)),
    }
}

impl Client {
    /// [`Client::launch`], stopped when `cancel` fires: the launch is dropped
    /// and the container it created (found by name and launch ID, never one
    /// it did not create) is removed before this returns. A create request
    /// on its way is first given up to 10 s to answer.
    ///
    /// Errors: as [`Client::launch`], or [`Error::Cancelled`] saying whether a
    /// container was removed (or could not be, and how to remove it).
    pub async fn launch_cancellable(
        &self,
        plan: &Plan,
        opts: &LaunchOptions,
        reporter: &dyn Reporter,
        cancel: &CancellationToken,
    ) -> Result<Sandbox> {
        if cancel.is_cancelled() {
            return Err(cancelled("the launch"));
        }
        let mut opts = opts.clone();
        let name = opts.name.get_or_insert_with(new_sandbox_name).clone();
        let progress = opts
            .progress
            .get_or_insert_with(|| Arc::new(LaunchProgress::default()))
            .clone();
        // Boxed so that `drop(work)` below really ends the launch before
        // the reap (a stack pin would live on to the end of the scope).
        let mut work = Box::pin(self.launch(plan, &opts, reporter));
        tokio::select! {
            out = &mut work => return out,
            () = cancel.cancelled() => {}
        }
        if progress.get() == Stage::Creating {
            // Drive the launch on only until the create has answered: its
            // answer tells whether a container exists.
            let deadline = tokio::time::sleep(CREATE_SETTLE);
            tokio::pin!(deadline);
            while progress.get() == Stage::Creating {
                tokio::select! {
                    _ = &mut work => break,
                    () = &mut deadline => break,
                    () = tokio::time::sleep(Duration::from_millis(5)) => {}
                }
            }
        }
        drop(work);
        // A probe the launch had made to read its image is removed too: a
        // short wait, so that a probe whose create may still land (looked for
        // by name for up to 10 s) is removed by its task in the background
        // while the caller goes on (a server's cap frees its place now).
        crate::launch::settle_probes(PROBE_SETTLE).await;
        let stage = progress.get();
        let outcome = match stage {
            Stage::Preparing => Reaped::Absent,
            _ => {
                self.reap_named(&name, progress.launch_id(), Duration::ZERO)
                    .await
            }
        };
        let mut fix = None;
        let message = match (stage, outcome) {
            (Stage::Preparing, _) => {
                "the launch was cancelled by the caller before the sandbox was created (a probe of its image, if any, was removed)".to_string()
            }
            (_, Reaped::Removed) | (_, Reaped::Absent) => {
                format!("the launch was cancelled by the caller; sandbox {name} was removed")
            }
            (_, Reaped::NotOurs) => format!(
                "the launch was cancelled by the caller; a container named {name} exists, but this launch did not create it: it was left alone"
            ),
            (_, Reaped::Failed(e)) => {
                fix = Some(crate::advice::Fix::Reap {
                    name: name.clone(),
                    detached: opts.detached,
                });
                format!(
                    "the launch was cancelled by the caller; could not remove sandbox {name} ({e}); "
                )
            }
        };
        Err(Error::Cancelled { message, fix })
    }

    /// [`Client::exec`], stopped when `cancel` fires: the command is killed the
    /// way a timeout kills it ([`Client::exec_until`]).
    ///
    /// Errors: as [`Client::exec`], or [`Error::Cancelled`] saying whether
    /// the kill was confirmed.
    pub async fn exec_cancellable(
        &self,
        sandbox: &Sandbox,
        req: &ExecRequest,
        output: OutputSink<'_>,
        cancel: &CancellationToken,
    ) -> Result<ExecOutcome> {
        if cancel.is_cancelled() {
            return Err(cancelled("the command"));
        }
        let outcome = self
            .exec_until(sandbox, req, output, cancel.cancelled())
            .await?;
        if !outcome.cancelled {
            return Ok(outcome);
        }
        Err(Error::Cancelled {
            fix: None,
            message: if outcome.killed {
                format!(
                    "the command was cancelled by the caller; it was killed in sandbox {}",
                    sandbox.name
                )
            } else {
                format!(
                    "the command was cancelled by the caller; odek could not confirm it was killed in sandbox {} (it ends when the sandbox is destroyed)",
                    sandbox.name
                )
            },
        })
    }
}
