//! Cancelling a call in flight (SPEC §10.1): the cancellable forms of
//! resolve, exec, describe and config view that an embedding program (the C
//! ABI's `odek_cancel_t`, a Go context, a Python task) stops through a
//! [`CancellationToken`]. A launch takes its token as an option
//! ([`crate::LaunchOptions::cancel`]), and its
//! [`LaunchGuard`](crate::launch::LaunchGuard) removes what it created.
//!
//! A cancelled call ends promptly with [`Error::Cancelled`] and leaves
//! nothing behind: an exec kills the command the way its timeout does
//! ([`Client::exec_until`]). A token cancelled before the call starts makes
//! the call fail at once.

pub use tokio_util::sync::CancellationToken;

use crate::client::Client;
use crate::engine::OutputSink;
use crate::error::{Error, Result};
use crate::exec::{ExecOutcome, ExecRequest};
use crate::sandbox::Sandbox;

/// The error of a call cancelled by its caller; `what` names the call.
pub(crate) fn cancelled(what: &str) -> Error {
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
