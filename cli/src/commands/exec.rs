//! `odek sandbox exec`, and what it shares with `odek run`: the exec
//! request from the flags and the exit status of a command.

use std::process::ExitCode;

use anyhow::Context;
use odek_core::advice::Surface;
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
/// every front end's is (`odek_core::api::ExecRequest::into_core_as`) and
/// checked (`odek_core::exec::ExecRequest::check`: an empty command, NUL
/// bytes, a reserved env key), before any call to the engine. Errors: a
/// usage error (`odek_core::Error`) naming the flag or the command.
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
    let req = req
        .into_core_as(&EXEC_FLAGS)
        .map_err(odek_core::Error::from)?;
    req.check()?;
    Ok(req)
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
        // Checked before the sandbox is attached: a refused request makes
        // no engine call.
        let req = exec_request(flags, cmd)?;
        let sandbox = odek.attach(name, &odek_home()?).await?;
        // SPEC §4.4: containers started since the last command (a Compose
        // `up`) are connected now, and said; the exec's own re-check then
        // finds nothing to do.
        for line in odek
            .relink(&sandbox, &odek_core::approve::NoAsker)
            .await?
            .notes(&sandbox.name)
        {
            errln!("{line}");
        }
        // A signal cancels the command: the signal task fires the token.
        let token = CancellationToken::new();
        let opts = ExecOptions {
            cancel: Some(token.clone()),
            ..ExecOptions::default()
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
        Ok::<_, anyhow::Error>((sandbox, outcome))
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
        Ok((sandbox, o)) => {
            // How a command cut short ended: the core's words.
            if let Some(text) = o.cut_short_text(&sandbox, false, Surface::Cli) {
                errln!("odek: {text}");
            }
            if o.cancelled {
                ExitCode::from(signalled)
            } else {
                exit_of(o.exit_code)
            }
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use odek_core::engine::FakeEngine;

    use super::*;

    /// `odek sandbox exec NAME -- ''` (or a NUL byte in the command, or a
    /// bad `-e`) is refused with 125 before any engine call: nothing is
    /// attached, inspected or run.
    #[tokio::test]
    async fn a_bad_command_is_refused_before_the_sandbox_is_attached() {
        let cases: [(&[&str], &[&str]); 4] = [
            (&[""], &[]),
            (&["", "x"], &[]),
            (&["ls\0"], &[]),
            (&["ls"], &["=x"]),
        ];
        for (cmd, env) in cases {
            let fake = FakeEngine::new();
            let odek = Client::with_engine(Arc::new(fake.clone()));
            let flags = ExecFlags {
                env: env.iter().map(|s| s.to_string()).collect(),
                timeout: None,
            };
            let cmd: Vec<String> = cmd.iter().map(|s| s.to_string()).collect();
            let code = exec_in(
                &odek,
                "odek-e2e",
                &flags,
                &cmd,
                Interactive::default(),
                false,
            )
            .await;
            assert_eq!(code, ExitCode::from(EXIT_REFUSED), "{cmd:?} {env:?}");
            assert!(
                fake.calls().is_empty(),
                "{cmd:?} {env:?}: the engine was called: {:?}",
                fake.calls()
            );
        }
    }

    /// The refusal of an empty command is a usage error, as through the C
    /// ABI and MCP.
    #[test]
    fn an_empty_command_is_a_usage_error() {
        let e = exec_request(&ExecFlags::default(), &["".to_string()])
            .expect_err("an empty command is refused");
        let e = e.downcast_ref::<odek_core::Error>().expect("a core error");
        assert_eq!(e.reported_class(), odek_core::ErrorClass::Usage);
        let e = exec_request(
            &ExecFlags {
                env: vec![],
                timeout: Some(f64::NAN),
            },
            &["ls".to_string()],
        )
        .expect_err("a NaN timeout is refused");
        let e = e.downcast_ref::<odek_core::Error>().expect("a core error");
        assert_eq!(e.reported_class(), odek_core::ErrorClass::Usage);
        assert!(e.to_string().contains("--timeout"), "{e}");
    }
}
