//! The commands of SPEC §10.3: dispatch here, each command in its file —
//! `odek run` (run.rs), `odek sandbox exec` and `odek sandbox shell` and
//! the exec request and exit statuses they share with run (exec.rs), the
//! local terminal of `-i`/`-t` (terminal.rs), `odek sandbox up` (up.rs), the
//! other `odek sandbox` commands (sandbox.rs), `odek config view`
//! (config.rs), `odek mcp` (mcp.rs), and the signal path that removes what
//! an interrupted launch created (signals.rs).

use std::process::ExitCode;

use odek_core::Client;

use crate::approve;
use crate::output::print_anyhow;
use crate::output::Stderr;
use crate::{ApprovalsCmd, Cli, Cmd, ConfigCmd, PoolCmd, SandboxCmd};

mod config;
mod exec;
mod mcp;
mod run;
mod sandbox;
mod signals;
mod terminal;
mod up;

use config::config_view;
use exec::{sandbox_exec, sandbox_shell};
use mcp::mcp;
use run::run;
use sandbox::sandbox;
pub use signals::Interrupted;

/// Runs the parsed command line.
pub async fn dispatch(cli: Cli) -> ExitCode {
    let reporter = Stderr;
    if cli.verbose {
        // E.g. an empty DOCKER_HOST, which counts as unset (SPEC §6.2).
        for note in odek_core::engine::EndpointEnv::from_process().notes() {
            errln!("odek: {note}");
        }
    }
    let odek = Client::from_env();
    let result = match &cli.command {
        Cmd::Run(args) => return run(&cli, &odek, &reporter, args).await,
        Cmd::Sandbox(SandboxCmd::Exec(args)) => return sandbox_exec(&odek, args).await,
        Cmd::Sandbox(SandboxCmd::Shell(args)) => return sandbox_shell(&odek, args).await,
        Cmd::Sandbox(cmd) => sandbox(&cli, &odek, &reporter, cmd).await,
        Cmd::Config(ConfigCmd::View(args)) => config_view(&cli, &odek, &reporter, args).await,
        Cmd::Approve(args) => return approve::approve_project(&cli, &odek, &reporter, args).await,
        Cmd::Approvals(ApprovalsCmd::List { json }) => approve::list(*json),
        Cmd::Approvals(ApprovalsCmd::Revoke { key, project }) => {
            approve::revoke(key.as_deref(), project.as_deref())
        }
        Cmd::Mcp(args) => return mcp(&cli, odek, args).await,
        Cmd::Pool(PoolCmd::Down { dry_run, json }) => {
            sandbox::pool_down(&odek, *dry_run, *json).await
        }
        Cmd::Completions { shell } => crate::shellgen::completions(*shell),
        Cmd::Manpage { dir } => crate::shellgen::manpage(dir),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => match e.downcast_ref::<Interrupted>() {
            // Already said what was cleaned up.
            Some(Interrupted(code)) => ExitCode::from(*code),
            // Already said, once for each failure.
            None if e.is::<Reported>() => ExitCode::from(crate::exit::FAILED),
            None => {
                print_anyhow(&e);
                ExitCode::from(crate::exit::FAILED)
            }
        },
    }
}

/// A command that failed after printing each of its errors itself (e.g.
/// `odek sandbox down A B` with one name refused): exit 1, nothing more
/// printed.
#[derive(Debug)]
pub(crate) struct Reported;

impl std::fmt::Display for Reported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("failed (said above)")
    }
}

impl std::error::Error for Reported {}

/// `$ODEK_HOME` of this process (SPEC §3.1), its real path when it exists:
/// its launch key tells this user's sandboxes from others.
pub(super) fn odek_home() -> anyhow::Result<std::path::PathBuf> {
    let env = std::env::vars().collect();
    let home = odek_core::config::odek_home(&env)?;
    Ok(std::fs::canonicalize(&home).unwrap_or(home))
}

/// Pretty JSON with no terminal control character in it
/// (`odek_core::text::json_for_terminal`): serde_json escapes U+0000–U+001F;
/// DEL, the C1 controls (U+007F–U+009F, which a terminal may read as ESC
/// sequences) and the bidirectional controls are escaped too. Every
/// `--json` output passes through this.
pub(crate) fn json_for_terminal<T: serde::Serialize>(v: &T) -> anyhow::Result<String> {
    Ok(odek_core::text::json_for_terminal(
        &serde_json::to_string_pretty(v)?,
    ))
}

pub(crate) fn verbose_plan(cli: &Cli, odek: &Client, plan: &odek_core::Plan) {
    if !cli.verbose {
        return;
    }
    errln!(
        "odek: endpoint {}",
        plan.endpoint
            .clone()
            .unwrap_or_else(|| odek.endpoint_display())
    );
    if let Some(e) = &plan.engine {
        errln!("odek: engine {} (API {})", e.server_version, e.api_version);
    }
    errln!(
        "odek: mode {}, image {}, network {}, {} attached network(s)",
        format!("{:?}", plan.mode).to_lowercase(),
        plan.image.reference,
        plan.network_summary,
        plan.networks.len()
    );
}
