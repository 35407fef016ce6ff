//! How an exec ended: exited, timed out or cancelled.

use std::future::Future;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::config::advice::{fix_text, Fix, Surface};
use crate::error::{Error, Result};
use crate::sandbox::Sandbox;

/// The outcome of an exec.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecOutcome {
    /// The command's exit code (124 after a timeout; 128+N when killed by
    /// signal N on the host; 130 after a cancellation).
    pub exit_code: i64,
    /// True when the timeout elapsed first.
    pub timed_out: bool,
    /// True when the caller cancelled the command
    /// ([`ExecOptions::cancel`](super::ExecOptions::cancel)).
    #[serde(default)]
    pub cancelled: bool,
    /// After a timeout or cancellation: true when odek killed the command
    /// and saw none of its processes left; false when the kill failed or
    /// could not be confirmed (a line on the command's stderr says why).
    /// False when the command ended by itself.
    #[serde(default)]
    pub killed: bool,
    /// True when the command ran through odek's supervisor (its timeout or
    /// cancel kills its process group and tree, confirmed from the kernel);
    /// false through the exec API (the kill finds the processes carrying
    /// the command's [`EXEC_TAG_ENV`](crate::exec::EXEC_TAG_ENV) tag) or on
    /// the host.
    #[serde(default)]
    pub supervised: bool,
}

impl ExecOutcome {
    pub(crate) fn exited(code: i64) -> ExecOutcome {
        ExecOutcome {
            exit_code: code,
            timed_out: false,
            cancelled: false,
            killed: false,
            supervised: false,
        }
    }

    /// The same outcome, marked as the supervisor's.
    pub(crate) fn through_supervisor(self) -> ExecOutcome {
        ExecOutcome {
            supervised: true,
            ..self
        }
    }

    /// The outcome, or for a command its caller cancelled
    /// ([`ExecOptions::cancel`](super::ExecOptions::cancel))
    /// [`Error::Cancelled`] saying whether it was killed in `sandbox`
    /// ([`ExecOutcome::cut_short_text`]'s words, with the fix a field): for
    /// callers that report a cancellation as an error (the C ABI's
    /// `odek_exec_cancellable`).
    ///
    /// Errors: [`Error::Cancelled`] when `self.cancelled`.
    pub fn cancelled_as_error(self, sandbox: &Sandbox) -> Result<ExecOutcome> {
        if !self.cancelled {
            return Ok(self);
        }
        let (message, fix) = self
            .cut_short(sandbox, false, Surface::Library)
            .unwrap_or_default();
        Err(Error::Cancelled { message, fix })
    }

    /// What a front end says of a command its timeout or its caller cut
    /// short, in `surface`'s words; `None` when it ran to its end. The
    /// one text of the CLI (`odek run`, `odek sandbox exec`; without
    /// `odek: `), MCP's `exec` and the C ABI's cancelled exec: who cut it
    /// (the timeout; a signal on the CLI, the client on MCP, the caller in
    /// a library), whether it was killed and what the kill reached, and
    /// what became of `sandbox` — `removed` (`odek run` removes it after
    /// the command), else it keeps running, with what stops the command
    /// when it could not be killed ([`Fix::Stop`]).
    pub fn cut_short_text(
        &self,
        sandbox: &Sandbox,
        removed: bool,
        surface: Surface,
    ) -> Option<String> {
        self.cut_short(sandbox, removed, surface)
            .map(|(message, fix)| format!("{message}{}", fix_text(&fix, surface)))
    }

    /// [`ExecOutcome::cut_short_text`] up to its fix, and the fix.
    fn cut_short(
        &self,
        sandbox: &Sandbox,
        removed: bool,
        surface: Surface,
    ) -> Option<(String, Option<Fix>)> {
        let subject = if self.timed_out {
            "the command did not finish within the timeout and"
        } else if self.cancelled {
            match surface {
                Surface::Cli => "interrupted; the command",
                Surface::Mcp => "the client cancelled the command; it",
                Surface::Library => "the command was cancelled by the caller; it",
            }
        } else {
            return None;
        };
        let host = sandbox.container_id.is_none();
        let what = if host {
            "its process group on the host".to_string()
        } else if self.supervised {
            "its process group, session and descendants; odek's supervisor saw none left".into()
        } else {
            format!(
                "every process carrying its {} tag, and their children",
                crate::exec::EXEC_TAG_ENV
            )
        };
        let see = match surface {
            Surface::Cli => "see above",
            Surface::Library | Surface::Mcp => "its stderr says why",
        };
        let mut message = if self.killed {
            format!("{subject} was killed ({what})")
        } else {
            format!("{subject} could not be killed ({see})")
        };
        let name = &sandbox.name;
        let mut fix = None;
        if removed && !host {
            message.push_str("; the sandbox was removed");
        } else if !host && !self.killed {
            message.push_str("; ");
            fix = Some(Fix::Stop { name: name.clone() });
        } else if !host && self.cancelled {
            message.push_str(&format!("; sandbox {name} keeps running"));
        }
        Some((message, fix))
    }
}

/// Exit code reported after a timeout (as `timeout(1)`).
const TIMEOUT_EXIT: i64 = 124;

/// How a command ended early.
#[derive(Clone, Copy)]
pub(crate) enum Cut {
    Timeout,
    Cancelled,
}

/// Runs `work` until it ends, the timeout elapses or `cancel` completes.
pub(super) async fn cut_short<T>(
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
        supervised: false,
    }
}

/// What odek says, and the status the command gets, when a command's
/// program did not start (`why`): the one message of every exec path —
/// through odek's supervisor, through the Docker exec API and on the host
/// — on the command's stderr, with `odek: ` before it, and no text of the
/// engine's or the supervisor's own. `argv0` is the program as given,
/// `workdir` the working directory it was to run in, `place` where it ran
/// (`"in sandbox odek-…"`, `"on the host"`). The status is a shell's:
/// 126 for a program that is not executable, else 127.
pub(crate) fn not_started_line(
    why: crate::engine::NotStarted,
    argv0: &str,
    workdir: &str,
    place: &str,
) -> (i64, String) {
    use crate::engine::NotStarted as N;
    let program = crate::text::foreign(argv0);
    let (code, reason) = match why {
        N::NotFound => (127, "command not found".to_string()),
        N::NotExecutable => (
            126,
            "not executable (no execute permission, or not a program)".to_string(),
        ),
        N::NoWorkdir => (
            127,
            format!(
                "its working directory {} does not exist",
                crate::text::shown(workdir)
            ),
        ),
        N::NoInterpreter => (
            127,
            "its interpreter (the program its #! line names, or its dynamic loader) was not found"
                .to_string(),
        ),
    };
    (
        code,
        format!("odek: cannot run `{program}` {place}: {reason}; nothing ran\n"),
    )
}

#[cfg(test)]
mod not_started_tests {
    use super::not_started_line;
    use crate::engine::NotStarted as N;

    #[test]
    fn one_line_with_the_status_a_shell_gives() {
        let (code, line) = not_started_line(
            N::NotFound,
            "no-such-tool",
            "/workspace",
            "in sandbox odek-1",
        );
        assert_eq!(code, 127);
        assert_eq!(
            line,
            "odek: cannot run `no-such-tool` in sandbox odek-1: command not found; nothing ran\n"
        );
        let (code, line) =
            not_started_line(N::NotExecutable, "/etc/passwd", "/workspace", "on the host");
        assert_eq!(code, 126);
        assert!(line.contains("not executable"), "{line}");
        let (code, line) = not_started_line(N::NoWorkdir, "ls", "/nope", "in sandbox odek-1");
        assert_eq!(code, 127);
        assert!(line.contains("/nope does not exist"), "{line}");
        let (code, line) = not_started_line(
            N::NoInterpreter,
            "./s.sh",
            "/workspace",
            "in sandbox odek-1",
        );
        assert_eq!(code, 127);
        assert_eq!(
            line,
            "odek: cannot run `./s.sh` in sandbox odek-1: its interpreter (the program its #! line names, or its dynamic loader) was not found; nothing ran\n"
        );
        // A hostile program name stays on one line, escaped.
        let (_, line) =
            not_started_line(N::NotFound, "x\n\u{1b}[2Jodek: fake", "/w", "on the host");
        assert_eq!(line.matches('\n').count(), 1, "{line:?}");
        assert!(!line.contains('\u{1b}'), "{line:?}");
    }
}
