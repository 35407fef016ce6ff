//! `odek sandbox up`: a detached sandbox, resolved or narrowed from a parent.

use std::sync::Arc;

use anyhow::bail;
use odek_core::launch::LaunchProgress;
use odek_core::{Client, LaunchOptions, Sandbox};

use crate::approve;
use crate::output::Stderr;
use crate::Cli;

use super::{odek_home, verbose_plan};

/// `odek sandbox up` up to a running detached sandbox named `name`: from a
/// parent's recorded plan narrowed (SPEC §8) with `--parent`, else resolved,
/// approved and launched like `odek run`'s, never falling back to the host.
pub(super) async fn sandbox_up(
    cli: &Cli,
    odek: &Client,
    reporter: &Stderr,
    args: &crate::UpArgs,
    name: &str,
    progress: Arc<LaunchProgress>,
) -> anyhow::Result<Sandbox> {
    if let Some(parent_name) = &args.parent {
        let parent = odek.attach(parent_name, &odek_home()?).await?;
        if let Some(dir) = &cli.workdir {
            // The child works in its parent's workspace (SPEC §8): another
            // directory named here would be a silent no-op.
            if std::fs::canonicalize(dir).ok().as_ref() != Some(&parent.plan.workdir) {
                bail!(
                    "-C/--workdir {} is not the workspace of {} ({}): a sub-agent works in its parent's workspace; drop -C, or launch a separate sandbox for that directory without --parent",
                    odek_core::text::shown(dir),
                    parent.name,
                    odek_core::text::shown(&parent.plan.workdir)
                );
            }
        }
        let req = args.sandbox.narrow_request()?;
        let env = std::env::vars().collect();
        for w in crate::flags::SandboxFlags::env_not_narrowing(&env) {
            odek_core::Reporter::warning(reporter, &w);
        }
        let mut plan = odek_core::narrow::narrow(&parent.plan, &req)?;
        for w in &plan.warnings {
            odek_core::Reporter::warning(reporter, w);
        }
        // The child keeps the parent's approval request (SPEC §7, §8); its
        // approval is obtained as `odek run`'s is — stored trust, env switch
        // or prompt — from this process's store and environment, never from
        // what the parent's label recorded.
        odek_core::approve::refresh_standing(&mut plan, &env)?;
        let mut opts = LaunchOptions {
            detached: true,
            name: Some(name.to_string()),
            labels: [(odek_core::labels::PARENT.to_string(), parent.name.clone())].into(),
            progress: Some(progress),
            ..Default::default()
        };
        opts.approval = approve::obtain(odek, &plan).await?;
        return Ok(odek.launch(&plan, &opts, reporter).await?);
    }
    let mut inputs = args.sandbox.inputs(&cli.workdir)?;
    // A detached sandbox needs a container: never fall back to the host.
    // `--no-sandbox` was refused above.
    let _ = inputs.force_sandbox(Some("odek sandbox up (implies --sandbox)"));
    let plan = odek.resolve(&inputs, reporter).await?;
    verbose_plan(cli, odek, &plan);
    let approval = approve::obtain(odek, &plan).await?;
    if plan.isolation != odek_core::Isolation::Container {
        bail!("`odek sandbox up` needs a container, but the sandbox is {}; fix the cause above or use `odek run`",
            if plan.isolation == odek_core::Isolation::Off { "off" } else { "unavailable (fallback)" });
    }
    let opts = LaunchOptions {
        detached: true,
        name: Some(name.to_string()),
        approval,
        progress: Some(progress),
        ..Default::default()
    };
    let sandbox = odek.launch(&plan, &opts, reporter).await?;
    if sandbox.container_id.is_none() {
        bail!("the image could not be pulled and `odek sandbox up` does not fall back to the host");
    }
    Ok(sandbox)
}
