//! `odek run`: resolve → launch → exec → destroy.

use std::process::ExitCode;
use std::sync::Arc;

use odek_core::advice::Surface;
use odek_core::launch::{LaunchGuard, LaunchProgress};
use odek_core::{Client, LaunchOptions};

use crate::approve;
use crate::output::{print_anyhow, print_error, say, sink, Stderr};
use crate::{Cli, EXIT_REFUSED};

use super::exec::{exec_request, exit_after_start, exit_of};
use super::signals::{interruptible, Interrupted, Signals};
use super::terminal::Interactive;
use super::verbose_plan;

/// `odek run`: resolve → launch → exec → destroy; CMD's status, or 125.
pub(super) async fn run(
    cli: &Cli,
    odek: &Client,
    reporter: &Stderr,
    args: &crate::RunArgs,
) -> ExitCode {
    let guard = LaunchGuard::new(None, false);
    let mut signals = match Signals::install() {
        Ok(s) => s,
        Err(e) => {
            errln!("odek: error: cannot install signal handlers: {e}");
            return ExitCode::from(EXIT_REFUSED);
        }
    };
    let flow = run_flow(
        cli,
        odek,
        reporter,
        args,
        guard.name(),
        guard.progress().clone(),
    );
    // Dropping the flow on a signal cancels it (and kills a host command in
    // fallback).
    match interruptible(odek, guard.clone(), &mut signals, flow).await {
        Ok(code) => code,
        Err(Interrupted(code)) => {
            // The sandbox was removed by its name: what its launch recorded
            // of the files host tools run is compared all the same.
            if let Ok(home) = super::odek_home() {
                if let Some(line) =
                    odek_core::host_files::finish(&home, guard.name()).and_then(|r| r.line())
                {
                    errln!("odek: {line}");
                }
            }
            ExitCode::from(code)
        }
    }
}

impl std::error::Error for Interrupted {}

async fn run_flow(
    cli: &Cli,
    odek: &Client,
    reporter: &Stderr,
    args: &crate::RunArgs,
    name: &str,
    progress: Arc<LaunchProgress>,
) -> ExitCode {
    let refuse = |e: &anyhow::Error| {
        print_anyhow(e);
        ExitCode::from(EXIT_REFUSED)
    };
    // The command and its env are checked before any container exists.
    let req = match exec_request(&args.exec, &args.cmd) {
        Ok(r) => r,
        Err(e) => return refuse(&e),
    };
    let io = Interactive {
        stdin: args.io.interactive,
        tty: args.io.tty,
    };
    if let Err(why) = io.check() {
        errln!("odek: error: {why}");
        return ExitCode::from(EXIT_REFUSED);
    }
    let inputs = match args.sandbox.inputs(&cli.workdir) {
        Ok(i) => i,
        Err(e) => return refuse(&e),
    };
    let plan = match odek.resolve(&inputs, reporter).await {
        Ok(p) => p,
        Err(e) => {
            print_error(&e);
            return ExitCode::from(EXIT_REFUSED);
        }
    };
    verbose_plan(cli, odek, &plan);
    let approval = match approve::obtain(odek, &plan).await {
        Ok(a) => a,
        Err(e) => {
            print_error(&e);
            return ExitCode::from(EXIT_REFUSED);
        }
    };
    let opts = LaunchOptions {
        name: Some(name.to_string()),
        approval,
        progress: Some(progress),
        ..Default::default()
    };
    let sandbox = match odek.launch(&plan, &opts, reporter).await {
        Ok(s) => s,
        Err(e) => {
            print_error(&e);
            return ExitCode::from(EXIT_REFUSED);
        }
    };
    // A broken stderr loses odek's own lines, not the command: it still
    // runs and its status passes through. Only a host run whose loud
    // warning (SPEC §6.3) could not be written, or went to /dev/null (a
    // closed stderr included), is refused: nobody was told.
    let said = say(&sandbox.startup_line()) && !crate::output::stderr_is_null();
    if !said && matches!(sandbox.isolation, odek_core::Isolation::Fallback(_)) {
        let _ = odek.destroy(&sandbox).await;
        return ExitCode::from(EXIT_REFUSED);
    }
    let outcome = match io.start() {
        Ok((exec_io, raw)) => {
            let outcome = odek
                .exec_io(
                    &sandbox,
                    &req,
                    &odek_core::ExecOptions {
                        tool: Some("run"),
                        ..Default::default()
                    },
                    exec_io,
                    &sink,
                )
                .await;
            // The terminal as it was, before anything more is said.
            drop(raw);
            outcome
        }
        Err(e) => Err(odek_core::Error::Exec {
            message: format!("cannot put the terminal in raw mode for -it: {e}; nothing ran"),
            fix: None,
            class: odek_core::FailureClass::DockerRejected,
            started: false,
        }),
    };
    // The files host tools run that the sandbox changed, named once it is
    // gone (docs/SECURITY.md, "Files host tools run").
    match odek.close(&sandbox).await {
        Ok(report) => {
            if let Some(copied) = &report.copied_back {
                super::sandbox::copy_back_lines(&sandbox.name, copied);
            }
            if let Some(line) = report.line() {
                errln!("odek: {line}");
            }
        }
        Err(e) => print_error(&e),
    }
    match outcome {
        Ok(o) => {
            // A command cut short (its timeout): the core's words.
            if let Some(text) = o.cut_short_text(&sandbox, true, Surface::Cli) {
                errln!("odek: {text}");
            }
            exit_of(o.exit_code)
        }
        Err(e) => {
            print_error(&e);
            exit_after_start(&e)
        }
    }
}
