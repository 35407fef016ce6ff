//! The one lifecycle of an interrupted launch (SPEC §6.1: any failure after
//! create removes the container), shared by every front end: a launch
//! cancelled through [`LaunchOptions::cancel`] (the C ABI, MCP), and the
//! CLI's signal path.
//!
//! A [`LaunchGuard`] gives the launch a pre-chosen name and a
//! [`LaunchProgress`]; when the launch is stopped, the guard first drives it
//! on while a create request is on its way (up to [`CREATE_SETTLE`]: its
//! answer tells whether a container exists), then waits for the image
//! probes the launch made, then removes the container by name and launch
//! ID (never one another launch made) and says what it found
//! ([`Interrupted`]).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::client::Client;
use crate::config::advice::Fix;
use crate::inventory::{Reaped, CREATE_SETTLE, PROBE_SETTLE};
use crate::launch::{new_sandbox_name, LaunchOptions, LaunchProgress, Stage};

/// The name and progress of one launch, and the cleanup when it is stopped.
#[derive(Clone, Debug)]
pub struct LaunchGuard {
    name: String,
    detached: bool,
    progress: Arc<LaunchProgress>,
}

/// What a stopped launch left after its [`LaunchGuard`] cleaned up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interrupted {
    /// The container name the launch used.
    pub name: String,
    /// A detached launch (`odek sandbox up`).
    pub detached: bool,
    /// How far the launch had got.
    pub stage: Stage,
    /// What the removal found ([`Reaped::Absent`] when nothing was created).
    pub reaped: Reaped,
}

impl LaunchGuard {
    /// A guard for a launch named `name` (default `odek-<12 hex>`) with a
    /// fresh [`LaunchProgress`]; the launch must run with
    /// [`LaunchGuard::name`] and [`LaunchGuard::progress`] in its options.
    pub fn new(name: Option<String>, detached: bool) -> LaunchGuard {
        LaunchGuard {
            name: name.unwrap_or_else(new_sandbox_name),
            detached,
            progress: Arc::new(LaunchProgress::default()),
        }
    }

    /// A guard for the launch `opts` describe: the name and progress they
    /// have, each filled in when missing.
    pub fn for_options(opts: &mut LaunchOptions) -> LaunchGuard {
        let name = opts.name.get_or_insert_with(new_sandbox_name).clone();
        let progress = opts
            .progress
            .get_or_insert_with(|| Arc::new(LaunchProgress::default()))
            .clone();
        LaunchGuard {
            name,
            detached: opts.detached,
            progress,
        }
    }

    /// The container name of the launch.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The launch's progress (give it to [`LaunchOptions::progress`]).
    pub fn progress(&self) -> &Arc<LaunchProgress> {
        &self.progress
    }

    /// The CLI's line (without `odek: `) before [`LaunchGuard::settle`]:
    /// what it waits for and how long.
    pub fn settling_line(&self) -> String {
        format!(
            "interrupted while the container was being created; waiting up to {} for the daemon's answer to remove it (interrupt again to stop waiting)",
            crate::inventory::create_settle_text()
        )
    }

    /// True while the launch's create request is on its way.
    pub fn creating(&self) -> bool {
        self.progress.get() == Stage::Creating
    }

    /// Drives the stopped launch `work` on only while its create request is
    /// on its way, for up to [`CREATE_SETTLE`] or until `stop` fires (a
    /// caller's second interrupt). The caller drops `work` afterwards.
    pub async fn settle<W: Future + Unpin>(&self, work: &mut W, stop: impl Future) {
        let deadline = tokio::time::sleep(CREATE_SETTLE);
        tokio::pin!(deadline);
        tokio::pin!(stop);
        while self.creating() {
            tokio::select! {
                _ = &mut *work => break,
                () = &mut deadline => break,
                _ = &mut stop => break,
                () = tokio::time::sleep(Duration::from_millis(5)) => {}
            }
        }
    }

    /// After the launch was dropped: waits up to [`PROBE_SETTLE`] (or
    /// until `stop` fires) for the removal of an image probe the launch
    /// made, then removes the launch's container if it made one.
    pub async fn reap(self, odek: &Client, stop: impl Future) -> Interrupted {
        tokio::select! {
            _ = crate::launch::settle_probes(PROBE_SETTLE) => {}
            _ = stop => {}
        }
        let stage = self.progress.get();
        let reaped = match stage {
            Stage::Preparing => Reaped::Absent,
            _ => {
                odek.reap_named(&self.name, self.progress.launch_id(), Duration::ZERO)
                    .await
            }
        };
        Interrupted {
            name: self.name,
            detached: self.detached,
            stage,
            reaped,
        }
    }
}

impl Interrupted {
    /// The error of a launch cancelled by its caller
    /// ([`crate::Error::Cancelled`]): what was found, and where a container
    /// could not be removed, the fix ([`Fix::Reap`]) each surface words.
    pub fn cancelled(&self) -> crate::Error {
        let name = &self.name;
        let mut fix = None;
        let message = match (self.stage, &self.reaped) {
            (Stage::Preparing, _) => {
                "the launch was cancelled by the caller before the sandbox was created (a probe of its image, if any, was removed)".to_string()
            }
            (_, Reaped::Removed) => {
                format!("the launch was cancelled by the caller; sandbox {name} was removed")
            }
            // Stopped while creating, and none found: the daemon may still
            // create it.
            (Stage::Creating, Reaped::Absent) => {
                fix = Some(self.reap_fix());
                format!("the launch was cancelled by the caller; no container {name} exists; should the daemon still create it, ")
            }
            (_, Reaped::Absent) => {
                format!("the launch was cancelled by the caller; sandbox {name} is gone")
            }
            (_, Reaped::NotOurs) => format!(
                "the launch was cancelled by the caller; a container named {name} exists, but this launch did not create it: it was left alone"
            ),
            (_, Reaped::Failed(e)) => {
                fix = Some(self.reap_fix());
                format!("the launch was cancelled by the caller; could not remove sandbox {name} ({e}); ")
            }
        };
        crate::Error::Cancelled { message, fix }
    }

    /// What removes the container when odek could not.
    fn reap_fix(&self) -> Fix {
        Fix::Reap {
            name: self.name.clone(),
            detached: self.detached,
        }
    }

    /// The CLI's line (without `odek: `) for a launch stopped by a signal
    /// or a panic; `why` says which ("interrupted", …).
    pub fn stopped_line(&self, why: &str) -> String {
        let name = &self.name;
        let later = self.reap_fix();
        match (self.stage, &self.reaped) {
            (Stage::Preparing, _) if self.detached => {
                format!("{why} before the sandbox was created (a probe of its image, if any, was removed)")
            }
            (Stage::Preparing, _) => format!(
                "{why} before the sandbox was created (a probe of its image, if any, was removed; a command odek had started on the host, if any, was killed with its process group)"
            ),
            (_, Reaped::Removed) => format!("{why}; sandbox {name} removed"),
            (Stage::Creating, Reaped::Absent) => format!(
                "{why}; no container {name} exists (should the daemon still create it, {later})"
            ),
            (_, Reaped::Absent) => format!("{why}; sandbox {name} is gone"),
            (_, Reaped::NotOurs) => format!(
                "{why}; a container named {name} exists, but this launch did not create it: it was left alone"
            ),
            (_, Reaped::Failed(e)) => format!(
                "{why}; could not remove sandbox {name} ({e}); {later} once the daemon answers"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cancelled(stage: Stage, reaped: Reaped) -> String {
        Interrupted {
            name: "odek-x".into(),
            detached: false,
            stage,
            reaped,
        }
        .cancelled()
        .to_string()
    }

    #[test]
    fn a_cancelled_launch_says_what_was_found() {
        let m = cancelled(Stage::Created, Reaped::Removed);
        assert!(m.contains("odek-x was removed"), "{m}");
        // Nothing found while creating: not "removed", and the fix.
        let m = cancelled(Stage::Creating, Reaped::Absent);
        assert!(!m.contains("removed"), "{m}");
        assert!(m.contains("no container odek-x exists"), "{m}");
        assert!(m.contains("gc"), "{m}");
        let m = cancelled(Stage::Created, Reaped::Absent);
        assert!(m.contains("odek-x is gone"), "{m}");
    }
}
