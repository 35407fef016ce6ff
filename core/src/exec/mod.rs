//! Running commands in a sandbox (SPEC §10.1 exec): argv or a shell string,
//! extra env, optional timeout; output streamed; the exit code passed through.
//! In fallback/off mode the command runs on the host (the plan says so).
//!
//! A command that outlives its timeout (or whose caller cancels it through
//! [`ExecOptions::cancel`]) is killed, not abandoned. The Engine API cannot
//! signal an exec, so every command odek runs in a sandbox carries a random
//! tag in its environment ([`EXEC_TAG_ENV`]); a second, short exec then
//! SIGKILLs every process in the container whose environment holds the tag —
//! the command and the descendants that kept its environment. On the host the
//! command runs in its own process group, and the group is SIGKILLed.

mod background;
mod capture;
mod host;
mod kill;
mod outcome;
mod request;
mod run;
mod supervised;

pub use background::{
    ProcessExit, ProcessId, ProcessOutput, BACKGROUND_BUFFER, MAX_BACKGROUND, NOTHING_TO_KILL,
};
pub use capture::{Capture, Captured, Keep};
pub use kill::KILL_PROBE_ENV;
pub use outcome::ExecOutcome;
pub(crate) use outcome::{cut_outcome, not_started_line, Cut};
pub use request::{
    timeout_from_secs, Command, ExecIo, ExecOptions, ExecRequest, WinSize, MAX_COMMAND_BYTES,
};

pub use crate::config::EXEC_TAG_ENV;
