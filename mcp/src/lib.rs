//! `odek mcp`: odek's sandbox as Model Context Protocol tools, over stdio,
//! for any MCP-speaking agent (Claude Code, Codex CLI, Cursor, Gemini CLI,
//! agent frameworks). Built on the official Rust SDK, `rmcp`.
//!
//! - Tools (docs/MCP.md): `exec`, `describe`, `sandbox_up`, `sandbox_down`,
//!   `sandbox_list`, `sandbox_narrow` (SPEC §8). Their argument and result
//!   types live in [`tools`]; the JSON Schemas are derived from them.
//! - What the agent is told (SPEC §9): the server's `instructions` carry the
//!   environment block the sandbox will have; the `exec` tool's description
//!   its short variant; `describe` the live block.
//! - Fail-closed always: the sandbox mode is forced on, nothing ever runs on
//!   the host, and every refusal is a tool error naming cause and fix while
//!   the server keeps serving.
//! - Approval (SPEC §7): project settings needing approval are refused
//!   unless a trust is stored or `ODEK_APPROVE_PROJECT_SANDBOX=1` is set,
//!   or the user approves them when asked through MCP elicitation (clients
//!   that declare it): the same card, answered once/trust/deny. The
//!   refusal carries the card.
//! - Progress: a launch whose tool call carries a progress token reports
//!   its start, every pull/build line and a tick each second; an `exec`
//!   whose call carries one sends each line of the command's output as it
//!   comes (stderr lines prefixed `stderr | `), then returns the whole
//!   result as without a token.
//! - Limits: at most `--max-sandboxes` (default 16) sandboxes at once,
//!   launches in flight included; the one past it is a tool error naming
//!   the setting. A client's `notifications/cancelled` for a call that
//!   launches a sandbox undoes the launch (the core's cancellable launch).
//! - Lifecycle: every sandbox the server launched is removed when the
//!   client disconnects (stdin EOF) and on SIGINT/SIGTERM/SIGHUP/SIGQUIT. After
//!   SIGKILL its sandboxes carry this process as their owner, so
//!   `odek sandbox gc` removes them.

/// `eprintln!` that never panics on a closed or full stderr: the server's
/// log lines are informational, and a panic would skip the removal of the
/// sandboxes it launched (SPEC §6.1). Core's (`odek_core::stderr`), as the
/// CLI's: every line through `odek_core::text::terminal`, since an MCP
/// client may show the server's stderr on a terminal.
#[macro_use]
extern crate odek_core;

mod caller;
mod limits;
mod output;
mod planned;
mod sandboxes;
mod server;
mod stderr;
pub mod stdio;
pub mod tools;

use odek_core::config::ConfigInputs;
use odek_core::Client;
use rmcp::ServiceExt;

pub use limits::{Limits, DEFAULT_MAX_SANDBOXES, MAX_SANDBOXES_ENV, MAX_SANDBOXES_FLAG};
pub use sandboxes::MCP_ID_LABEL;
pub use server::OdekMcp;

pub use stderr::StderrReporter;

/// Why [`serve_stdio`] returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stopped {
    /// The client closed stdin (or the session ended).
    Disconnected,
    /// A signal; carries the exit status it calls for (130 SIGINT, 143
    /// SIGTERM, 129 SIGHUP, 131 SIGQUIT: `odek_core::signals`).
    Signal(u8),
}

/// Forces the sandbox on (MCP mode never runs commands on the host), like
/// `odek sandbox up`. Errors: the operator turned it off explicitly with a
/// flag (`--no-sandbox`), which cannot be honoured.
pub fn force_sandbox(inputs: &mut ConfigInputs) -> Result<(), String> {
    inputs
        .force_sandbox(Some("odek mcp (implies --sandbox)"))
        .map_err(|_| "odek mcp runs commands only in a sandbox; --no-sandbox cannot be combined with it (drop the flag)".into())
}

/// Serves MCP on stdin/stdout until the client disconnects or a signal
/// arrives, then removes every sandbox this server launched. What could not
/// be removed is said on stderr.
///
/// `inputs` must have passed [`force_sandbox`]; `limits` bound how many
/// sandboxes the server keeps at once. Errors: the signal handlers cannot
/// be installed.
pub async fn serve_stdio(
    odek: Client,
    inputs: ConfigInputs,
    limits: Limits,
) -> std::io::Result<Stopped> {
    // SIGINT, SIGTERM, SIGHUP and SIGQUIT: the core's table, as the CLI's.
    let mut signals = odek_core::signals::Signals::install()?;
    let odek = odek.with_surface(odek_core::advice::Surface::Mcp);
    let server = OdekMcp::new(odek, inputs, limits).await;
    let keeper = server.clone();
    errln!(
        "odek: MCP server {} on stdio; the sandboxes it launches are removed when the client disconnects",
        odek_core::VERSION
    );
    // Each message is a line of at most stdio::MAX_MESSAGE_BYTES: a longer
    // one is said on stderr and answered with an error (stdio::Lines), never
    // dropped in silence as rmcp's own limit (16 MiB) would.
    let (reader, writer) = rmcp::transport::stdio_pipes();
    let reader = stdio::Lines::new(reader, stdio::MAX_MESSAGE_BYTES, |line| errln!("{line}"));
    let transport = rmcp::transport::async_rw::AsyncRwTransport::new_server(reader, writer)
        .with_max_line_length(stdio::MAX_MESSAGE_BYTES + 2);
    let serving = async move {
        match server.serve(transport).await {
            Ok(running) => {
                let _ = running.waiting().await;
            }
            Err(e) => errln!("odek: the MCP session ended before it began: {e}"),
        }
    };
    let stopped = tokio::select! {
        _ = serving => Stopped::Disconnected,
        status = signals.next() => Stopped::Signal(status),
    };
    for line in keeper.shutdown().await {
        errln!("odek: {line}");
    }
    Ok(stopped)
}
