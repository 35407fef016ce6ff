//! `odek mcp`: the CLI's glue to the MCP server (`odek_mcp`).

use std::process::ExitCode;

use odek_core::config::names;
use odek_core::Client;

use crate::output::print_anyhow;
use crate::Cli;

/// `odek mcp`: serves until the client disconnects (exit 0) or a signal
/// (128 + its number), after removing every sandbox it launched.
pub(super) async fn mcp(cli: &Cli, odek: Client, args: &crate::McpArgs) -> ExitCode {
    let setup = args.sandbox.inputs(&cli.workdir).and_then(|mut i| {
        odek_mcp::force_sandbox(&mut i).map_err(anyhow::Error::msg)?;
        if let Some(n) = args.sandbox_pool {
            i.flags.sandbox_pool = Some(n);
            i.flag_names
                .insert(names::sandbox_pool.into(), "--sandbox-pool".into());
        }
        let env = std::env::vars().collect();
        let limits = odek_mcp::Limits::from_flag_and_env(args.max_sandboxes, &env)
            .map_err(anyhow::Error::msg)?;
        Ok((i, limits))
    });
    let (inputs, limits) = match setup {
        Ok(s) => s,
        Err(e) => {
            print_anyhow(&e);
            return ExitCode::from(crate::exit::USAGE);
        }
    };
    let code = match odek_mcp::serve_stdio(odek, inputs, limits).await {
        Ok(odek_mcp::Stopped::Disconnected) => 0,
        Ok(odek_mcp::Stopped::Signal(code)) => i32::from(code),
        Err(e) => {
            errln!("odek: error: cannot install signal handlers: {e}");
            i32::from(crate::exit::FAILED)
        }
    };
    // A read of stdin may still be pending on a blocking thread, which would
    // keep the runtime from shutting down: the sandboxes are gone, so exit.
    std::process::exit(code)
}
