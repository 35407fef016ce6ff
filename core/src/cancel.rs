//! Cancelling a call in flight (SPEC §10.1) that an embedding program (the C
//! ABI's `odek_cancel_t`, a Go context, a Python task) stops through a
//! [`CancellationToken`]. A launch and an exec take their token as an
//! option ([`crate::LaunchOptions::cancel`], whose
//! [`LaunchGuard`](crate::launch::LaunchGuard) removes what it created;
//! [`crate::exec::ExecOptions::cancel`], which kills the command the way its
//! timeout does); resolve, describe and config view, which make nothing,
//! are wrapped in [`until`].
//!
//! A cancelled call ends promptly and leaves nothing behind. A token
//! cancelled before the call starts makes the call fail at once with
//! [`Error::Cancelled`].

pub use tokio_util::sync::CancellationToken;

use crate::error::{Error, Result};

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
