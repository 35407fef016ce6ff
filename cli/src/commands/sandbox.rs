//! `odek sandbox up|down|ls|gc|describe` (`exec` is exec.rs's, the launch
//! of `up` is up.rs's).

use anyhow::{bail, Context};
use odek_core::launch::LaunchGuard;
use odek_core::{Client, Sandbox};

use crate::output::{print_error, print_line, Stderr};
use crate::{Cli, SandboxCmd};

use super::signals::{interruptible, Signals};
use super::up::sandbox_up;
use super::{json_for_terminal, odek_home};

/// The sandbox as JSON for the terminal, env values left out (they may be
/// secrets; `odek config view` shows keys only, too).
fn sandbox_json(s: &Sandbox) -> anyhow::Result<String> {
    let mut s = s.clone();
    for e in &mut s.plan.env {
        e.value = "<redacted>".into();
    }
    json_for_terminal(&s)
}

pub(super) async fn sandbox(
    cli: &Cli,
    odek: &Client,
    reporter: &Stderr,
    cmd: &SandboxCmd,
) -> anyhow::Result<()> {
    if let SandboxCmd::Up(args) = cmd {
        // Before any question or Docker call.
        if let Some(name) = &args.name {
            odek_core::launch::validate_sandbox_name(name)?;
        }
    }
    match cmd {
        SandboxCmd::Up(args) => {
            if args.parent.is_none() && args.sandbox.no_sandbox {
                bail!("`odek sandbox up` launches a container; --no-sandbox makes no sense here (use `odek run --no-sandbox`)");
            }
            // A pre-chosen name and signal handlers: an interrupted launch
            // removes what it created (a detached sandbox outlives gc).
            let guard = LaunchGuard::new(args.name.clone(), true);
            let mut signals = Signals::install().context("cannot install signal handlers")?;
            let work = sandbox_up(
                cli,
                odek,
                reporter,
                args,
                guard.name(),
                guard.progress().clone(),
            );
            let sandbox = interruptible(odek, guard.clone(), &mut signals, work).await??;
            errln!("{}", sandbox.startup_line());
            let shown = if args.json {
                sandbox_json(&sandbox)
            } else {
                Ok(sandbox.name.clone())
            };
            // Whoever started it learns its name on stdout or nobody does:
            // then it is removed rather than left running unnamed.
            if let Err(e) = shown.and_then(|text| Ok(print_line(&text)?)) {
                let fate = match odek.destroy(&sandbox).await {
                    Ok(()) => "it was removed".to_string(),
                    Err(d) => format!(
                        "removing it failed too ({d}); `odek sandbox down {}` removes it",
                        sandbox.name
                    ),
                };
                bail!("cannot print the sandbox's name on stdout ({e:#}), so {fate}; give odek a writable stdout");
            }
        }
        SandboxCmd::Down(args) => {
            let home = odek_home()?;
            let mut failed = false;
            let mut removed = Vec::new();
            for n in &args.names {
                match odek.owned(n, &home).await {
                    Ok(s) => {
                        let report = match odek.close(&s).await {
                            Ok(r) => r,
                            Err(e) => {
                                if args.json {
                                    outln!("{}", json_for_terminal(&removed)?);
                                }
                                return Err(e.into());
                            }
                        };
                        // docs/SECURITY.md, "Files host tools run".
                        if let Some(line) = report.line() {
                            errln!("odek: {}: {line}", s.name);
                        }
                        if !args.json {
                            outln!("{}", s.name);
                        }
                        removed.push(s.name);
                    }
                    Err(e) => {
                        print_error(&e);
                        failed = true;
                    }
                }
            }
            if args.json {
                outln!("{}", json_for_terminal(&removed)?);
            }
            if failed {
                bail!("some sandboxes were not removed");
            }
        }
        SandboxCmd::Ls(args) => {
            let list = odek.list(&odek_home()?).await?;
            if args.json {
                outln!("{}", json_for_terminal(&list)?);
            } else {
                // Columns as wide as their widest cell (names and owners
                // vary). Every cell comes from Docker (labels anyone can
                // write): shown terminal-safe.
                let cell = |s: String| {
                    if s.is_empty() {
                        "-".to_string()
                    } else {
                        odek_core::text::shown(&s)
                    }
                };
                let rows: Vec<[String; 6]> = list
                    .into_iter()
                    .map(|l| {
                        let owner = match (l.verified, l.owner_pid, l.owner_gone) {
                            (false, _, _) => "-".into(),
                            (true, Some(p), Some(true)) => format!("{p}(gone)"),
                            (true, Some(p), None) if !l.detached => format!("{p}(unknown)"),
                            (true, Some(p), _) => p.to_string(),
                            _ => "-".into(),
                        };
                        let kind = match (l.verified, l.detached, l.probe) {
                            (false, _, _) => "unverified",
                            (true, _, true) => "probe",
                            (true, true, false) => "detached",
                            (true, false, false) if l.pool => "pool",
                            (true, false, false) => "run",
                        };
                        [
                            cell(l.name),
                            cell(l.state),
                            kind.to_string(),
                            owner,
                            cell(l.compose_projects.join(",")),
                            cell(l.workdir.unwrap_or_default()),
                        ]
                    })
                    .collect();
                let head =
                    ["NAME", "STATE", "KIND", "OWNER", "PROJECTS", "WORKDIR"].map(String::from);
                let width = |i: usize| {
                    rows.iter()
                        .chain(std::iter::once(&head))
                        .map(|r| r[i].chars().count())
                        .max()
                        .unwrap_or(0)
                };
                let (w0, w1, w2, w3, w4) = (width(0), width(1), width(2), width(3), width(4));
                for r in std::iter::once(&head).chain(rows.iter()) {
                    outln!(
                        "{:<w0$} {:<w1$} {:<w2$} {:<w3$} {:<w4$} {}",
                        r[0],
                        r[1],
                        r[2],
                        r[3],
                        r[4],
                        r[5]
                    );
                }
            }
        }
        SandboxCmd::Gc(args) => {
            let workdir = if args.all {
                None
            } else {
                Some(gc_workdir(&cli.workdir)?)
            };
            let opts = odek_core::inventory::GcOptions {
                detached: args.detached,
                dry_run: args.dry_run,
                workdir,
                ..odek_core::inventory::GcOptions::new(odek_home()?)
            };
            let removed = odek.gc(&opts).await?;
            if args.json {
                outln!("{}", json_for_terminal(&removed)?);
            } else {
                let (line, total) = if args.dry_run {
                    ("would remove ", "would remove")
                } else {
                    ("", "removed")
                };
                for r in &removed {
                    outln!("{line}{}", odek_core::text::shown(r));
                }
                let scope = match &opts.workdir {
                    Some(w) => format!(
                        " of {} (--all for every workdir)",
                        odek_core::text::shown(w)
                    ),
                    None => String::new(),
                };
                errln!("odek: {total} {} sandbox(es){scope}", removed.len());
            }
        }
        SandboxCmd::Describe(args) => {
            let s: Sandbox = odek.attach(&args.name, &odek_home()?).await?;
            let env = odek.describe(&s).await?;
            if args.json {
                outln!("{}", json_for_terminal(&env)?);
            } else if args.tool {
                outln!("{}", odek_core::describe::render_tool(&env));
            } else {
                out!("{}", odek_core::describe::render_prompt(&env));
            }
        }
        SandboxCmd::Exec(_) | SandboxCmd::Shell(_) => unreachable!("handled in dispatch"),
    }
    Ok(())
}

/// The workdir `odek sandbox gc` sweeps by default: `-C DIR` or the current
/// directory, canonical as odek labels a sandbox's workdir.
/// `odek pool down`: removes this user's ready pooled sandboxes.
pub(super) async fn pool_down(odek: &Client, dry_run: bool, json: bool) -> anyhow::Result<()> {
    let removed = odek.pool_down(&odek_home()?, dry_run).await?;
    if json {
        outln!("{}", json_for_terminal(&removed)?);
    } else {
        let (line, total) = if dry_run {
            ("would remove ", "would remove")
        } else {
            ("", "removed")
        };
        for r in &removed {
            outln!("{line}{}", odek_core::text::shown(r));
        }
        errln!("odek: {total} {} ready pooled sandbox(es)", removed.len());
    }
    Ok(())
}

fn gc_workdir(workdir: &Option<std::path::PathBuf>) -> anyhow::Result<std::path::PathBuf> {
    let dir = match workdir {
        Some(d) => d.clone(),
        None => std::env::current_dir()?,
    };
    dir.canonicalize().map_err(|e| {
        anyhow::anyhow!(
            "cannot resolve the workdir {}: {e}; pass an existing project directory with -C DIR, or --all for every workdir",
            odek_core::text::shown(dir)
        )
    })
}
