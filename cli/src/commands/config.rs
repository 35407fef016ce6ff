//! `odek config view`.

use odek_core::Client;

use crate::output::Stderr;
use crate::Cli;

use super::json_for_terminal;

pub(super) async fn config_view(
    cli: &Cli,
    odek: &Client,
    reporter: &Stderr,
    args: &crate::ViewArgs,
) -> anyhow::Result<()> {
    let inputs = args.sandbox.inputs(&cli.workdir)?;
    let plan = odek.resolve(&inputs, reporter).await?;
    let view = odek.config_view(&plan).await;
    if args.json {
        outln!("{}", json_for_terminal(&view)?);
    } else {
        out!("{}", view.render_text());
    }
    Ok(())
}
