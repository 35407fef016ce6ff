//! `odek sandbox exec`, and what it shares with `odek run`: the exec
//! request from the flags and the exit status of a command.

use std::process::ExitCode;

use anyhow::Context;
use odek_core::{CancellationToken, Client, ExecOptions, ExecRequest};

use crate::output::{print_anyhow, sink};
use crate::{ExecFlags, EXIT_REFUSED};

use super::signals::Signals;
use super::terminal::Interactive;
use super::{json_for_terminal, odek_home};

/// Exit code from a command status (0..=255).
pub(super) fn exit_of(code: i64) -> ExitCode {
    ExitCode::from(u8::try_from(code.clamp(0, 255)).unwrap_or(255))
}

/// How the CLI names an exec request's members in a refusal.
const EXEC_FLAGS: odek_core::api::ExecMembers = odek_core::api::ExecMembers {
    argv: "COMMAND",
    shell: "COMMAND",
    timeout: "--timeout",
};

/// The core's request from `-e`, `--timeout` and the command, parsed as
/// every front end's is (`odek_core::api::ExecRequest::into_core_as`).
pub(super) fn exec_request(flags: &ExecFlags, cmd: &[String]) -> anyhow::Result<ExecRequest> {
    let mut env = std::collections::BTreeMap::new();
    for kv in &flags.env {
        let (k, v) = kv
            .split_once('=')
            .with_context(|| format!("-e {kv:?}: write KEY=VALUE"))?;
        env.insert(k.to_string(), v.to_string());
    }
    let req = odek_core::api::ExecRequest {
        argv: Some(cmd.to_vec()),
        env,
        timeout_secs: flags.timeout,
        ..Default::default()
    };
    Ok(req.into_core_as(&EXEC_FLAGS)?)
}

/// Exit status when a command could not finish in a sandbox that is up
/// (`odek run` after launch, `odek sandbox exec`): 137 when the sandbox was
/// killed under it; 125 when nothing ran (odek refused, Docker refused the
/// exec, the sandbox could not be found); 255 when the command may have
/// partly run and its status is unknown (daemon lost mid-exec).
pub(super) fn exit_after_start(e: &odek_core::Error) -> ExitCode {
    use odek_core::Error as E;
    match e {
        E::SandboxStopped { .. } => ExitCode::from(crate::exit::KILLED),
        E::Exec { started: false, .. } => ExitCode::from(EXIT_REFUSED),
        E::Exec { started: true, .. } => ExitCode::from(crate::exit::LOST),
        E::Unreachable {
            step: odek_core::Step::Exec,
            ..
        } => ExitCode::from(crate::exit::LOST),
        _ => ExitCode::from(EXIT_REFUSED),
    }
}

pub(super) async fn sandbox_exec(odek: &Client, args: &crate::ExecArgs) -> ExitCode {
    let io = Interactive {
        stdin: args.io.interactive,
        tty: args.io.tty,
    };
    exec_in(odek, &args.name, &args.exec, &args.cmd, io, args.json).await
}

/// What `odek sandbox shell` runs: bash when the image has it, else sh.
pub(super) const SHELL: &str = "command -v bash >/dev/null 2>&1 && exec bash; exec sh";

/// `odek sandbox shell NAME`: `odek sandbox exec -it NAME` of [`SHELL`].
pub(super) async fn sandbox_shell(odek: &Client, args: &crate::ShellArgs) -> ExitCode {
    let cmd = ["/bin/sh".to_string(), "-c".into(), SHELL.into()];
    let io = Interactive {
        stdin: true,
        tty: true,
    };
    exec_in(odek, &args.name, &args.exec, &cmd, io, false).await
}

/// A command in running sandbox `name`, with `io`'s stdin and terminal;
/// `json`: its captured result on stdout.
async fn exec_in(
    odek: &Client,
    name: &str,
    flags: &ExecFlags,
    cmd: &[String],
    io: Interactive,
    json: bool,
) -> ExitCode {
    if let Err(why) = io.check() {
        errln!("odek: error: {why}");
        return ExitCode::from(EXIT_REFUSED);
    }
    let mut signals = match Signals::install() {
        Ok(s) => s,
        Err(e) => {
            errln!("odek: error: cannot install signal handlers: {e}");
            return ExitCode::from(EXIT_REFUSED);
        }
    };
    let mut signalled = 0u8;
    // As the bindings' exec result keeps it.
    let capture = odek_core::api::ExecResult::capture();
    let result = async {
        let req = exec_request(flags, cmd)?;
        let sandbox = odek.attach(name, &odek_home()?).await?;
        // A signal cancels the command: the signal task fires the token.
        let token = CancellationToken::new();
        let opts = ExecOptions {
            cancel: Some(token.clone()),
        };
        let on_signal = async {
            signalled = signals.next().await;
            token.cancel();
            std::future::pending::<std::convert::Infallible>().await
        };
        let (exec_io, raw) = io.start()?;
        let exec = async {
            if json {
                odek.exec_io(&sandbox, &req, &opts, exec_io, &|k, b| capture.write(k, b))
                    .await
            } else {
                odek.exec_io(&sandbox, &req, &opts, exec_io, &sink).await
            }
        };
        // The exec is polled first, so it has started before a signal that
        // is already pending cancels it: killed, as one arriving mid-command.
        let outcome = tokio::select! {
            biased;
            outcome = exec => outcome,
            never = on_signal => match never {},
        };
        // The terminal as it was, before anything more is said.
        drop(raw);
        let outcome = outcome?;
        Ok::<_, anyhow::Error>((sandbox.name, outcome))
    }
    .await;
    if json {
        if let Ok((_, o)) = &result {
            match json_for_terminal(&odek_core::api::ExecResult::new(o, capture.finish())) {
                Ok(text) => outln!("{text}"),
                Err(e) => print_anyhow(&e),
            }
        }
    }
    match result {
        Ok((name, o)) if o.cancelled => {
            if o.killed {
                errln!(
                    "odek: interrupted; the command was killed ({}); sandbox {name} keeps running",
                    killed_what(&o)
                );
            } else {
                errln!("odek: interrupted; the command could not be killed (see above); `odek sandbox down {name}` stops it");
            }
            ExitCode::from(signalled)
        }
        Ok((name, o)) => {
            if o.timed_out && o.killed {
                errln!(
                    "odek: the command did not finish within the timeout and was killed ({})",
                    killed_what(&o)
                );
            } else if o.timed_out {
                errln!("odek: the command did not finish within the timeout and could not be killed (see above); `odek sandbox down {name}` stops it");
            }
            exit_of(o.exit_code)
        }
        Err(e) => {
            print_anyhow(&e);
            match e.downcast_ref::<odek_core::Error>() {
                Some(oe) => exit_after_start(oe),
                None => ExitCode::from(EXIT_REFUSED),
            }
        }
    }
}

/// What a confirmed kill of `o`'s command reached, by the path it ran:
/// the supervisor kills the command's process group, session and
/// descendants and confirms from the kernel; the exec API's kill finds
/// every process carrying the command's `ODEK_EXEC_ID` tag.
fn killed_what(o: &odek_core::ExecOutcome) -> String {
    if o.supervised {
        "its process group, session and descendants; odek's supervisor saw none left".into()
    } else {
        format!(
            "every process carrying its {} tag, and their children",
            odek_core::exec::EXEC_TAG_ENV
        )
    }
}
