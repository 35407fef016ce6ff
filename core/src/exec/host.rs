//! [`Client::exec`](crate::Client::exec) on the host (fallback / off): the
//! command in its own process group, SIGKILLed as a group when it is cut
//! short.

use std::future::Future;
use std::io::ErrorKind;

use tokio::io::AsyncReadExt;

use crate::engine::{OutputSink, StreamKind};
use crate::error::{Error, Result};
use crate::failure::FailureClass;
use crate::sandbox::Sandbox;

use super::outcome::{cut_outcome, cut_short, ExecOutcome};
use super::request::ExecRequest;

/// Fallback / off: runs on the host in the working directory. The one place
/// in odek-core allowed to start a process (core/clippy.toml,
/// core/tests/structure.rs).
#[allow(clippy::disallowed_types, clippy::disallowed_methods)]
pub(super) async fn exec_on_host(
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
            let workdir = req
                .workdir
                .clone()
                .unwrap_or_else(|| sandbox.plan.workdir.display().to_string());
            // A path that exists and still "not found": its interpreter
            // (its #! line's program, its dynamic loader) is missing.
            let exists =
                argv[0].contains('/') && std::path::Path::new(&workdir).join(&argv[0]).exists();
            let why = match e.kind() {
                ErrorKind::NotFound if exists => crate::engine::NotStarted::NoInterpreter,
                ErrorKind::NotFound => crate::engine::NotStarted::NotFound,
                _ => crate::engine::NotStarted::NotExecutable,
            };
            let (code, msg) = super::not_started_line(why, &argv[0], &workdir, "on the host");
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
