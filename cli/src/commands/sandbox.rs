//! `odek sandbox up|down|ls|gc|describe|log` (`exec` is exec.rs's, the
//! launch of `up` is up.rs's).

use anyhow::{bail, Context};
use odek_core::advice::Surface;
use odek_core::audit::Call;
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
            // In the sandbox's record (`odek sandbox log`), as MCP's
            // sandbox_up is.
            let call = Call::begin(Surface::Cli, "sandbox_up");
            let work = sandbox_up(
                cli,
                odek,
                reporter,
                args,
                guard.name(),
                guard.progress().clone(),
            );
            let sandbox = interruptible(odek, guard.clone(), &mut signals, work).await??;
            call.at(&sandbox).finish(None, Some("launched"), None);
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
                        let call = Call::start(&s, Surface::Cli, "sandbox_down");
                        let copied = s.copies_back();
                        let closed = if args.discard && copied {
                            errln!(
                                "odek: {}: --discard: its /workspace is not copied back",
                                s.name
                            );
                            odek.destroy_recorded(&s, Some(call))
                                .await
                                .map(|()| odek_core::host_files::Report::default())
                        } else {
                            odek.close_recorded(&s, Some(call)).await
                        };
                        let report = match closed {
                            Ok(r) => r,
                            Err(e) => {
                                if args.json {
                                    outln!("{}", json_for_terminal(&removed)?);
                                }
                                if copied {
                                    print_error(&e);
                                    errln!(
                                        "odek: {}: it is kept, with its /workspace; `odek sandbox down --discard {}` removes it without copying back (what it wrote there is lost)",
                                        s.name, s.name
                                    );
                                    return Err(super::Reported.into());
                                }
                                return Err(e.into());
                            }
                        };
                        if let Some(copied) = &report.copied_back {
                            copy_back_lines(&s.name, copied);
                        }
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
                // Each refusal was printed above: one error per name.
                return Err(super::Reported.into());
            }
        }
        SandboxCmd::Ls(args) => {
            let list = odek.list(&odek_home()?).await?;
            if args.json {
                outln!("{}", json_for_terminal(&list)?);
            } else {
                let (table, legend) = ls_table(list);
                for line in table {
                    outln!("{line}");
                }
                // On stderr: stdout stays the table.
                for line in legend {
                    errln!("{line}");
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
            let report = odek.gc_report(&opts).await?;
            let removed = report.sandboxes;
            // SPEC §4.4: the link networks it removed, and those it left
            // because this user's odek did not sign them (on stderr: the
            // JSON on stdout stays the list of sandboxes).
            let verb = if args.dry_run {
                "would remove"
            } else {
                "removed"
            };
            for n in &report.networks {
                errln!("odek: {verb} link network {}", odek_core::text::shown(n));
            }
            for n in &report.networks_left {
                errln!(
                    "odek: left network {}: labelled as a sandbox's link network, but not signed by this user's odek (another user's, an earlier release's, or forged); `docker network rm` removes it if it is yours",
                    odek_core::text::shown(n)
                );
            }
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
        SandboxCmd::CopyBack(args) => {
            let s = odek.owned(&args.name, &odek_home()?).await?;
            let copied = odek.copy_back(&s).await?;
            if args.json {
                outln!("{}", json_for_terminal(&copied)?);
            } else {
                copy_back_lines(&s.name, &copied);
            }
        }
        SandboxCmd::Log(args) => sandbox_log(odek, args).await?,
        SandboxCmd::Exec(_) | SandboxCmd::Shell(_) => unreachable!("handled in dispatch"),
    }
    Ok(())
}

/// What a copy-back wrote and left out (docs/SANDBOXING.md "A copied
/// workspace"), on stderr: one line each, names escaped.
pub(crate) fn copy_back_lines(name: &str, copied: &odek_core::workspace_copy::Unpacked) {
    let written: Vec<String> = copied.written.iter().map(odek_core::text::shown).collect();
    errln!(
        "odek: {name}: copied back {} changed file(s) into the working directory{}",
        written.len(),
        if written.is_empty() {
            String::new()
        } else {
            format!(": {}", first_of(&written, ", "))
        }
    );
    if !copied.skipped.is_empty() {
        let list: Vec<String> = copied.skipped.iter().map(|s| s.to_string()).collect();
        errln!("odek: {name}: not copied back: {}", first_of(&list, "; "));
    }
}

/// The first [`LISTED`] of `items` joined by `sep`, and `and N more` when
/// there are more.
fn first_of(items: &[String], sep: &str) -> String {
    let mut out = items
        .iter()
        .take(LISTED)
        .cloned()
        .collect::<Vec<_>>()
        .join(sep);
    if items.len() > LISTED {
        out.push_str(&format!("{sep}and {} more", items.len() - LISTED));
    }
    out
}

/// How many paths a copy-back line names.
const LISTED: usize = 20;

/// What KIND `unverified` means, printed under `odek sandbox ls`'s table
/// (on stderr) when a row has it.
pub(crate) const UNVERIFIED_LEGEND: &str = "unverified: not marked by this user's odek (no valid dev.odek.mac under this $ODEK_HOME's launch key: another user's or another $ODEK_HOME's sandbox, forged labels, or one from before the mark); odek never execs in, describes, gc's or removes it (`docker rm -f NAME` removes it if you mean it)";

/// `odek sandbox ls`'s table (the header, then a row per container, columns
/// as wide as their widest cell) and the legend lines for what needs one
/// ([`UNVERIFIED_LEGEND`] when a row is `unverified`).
fn ls_table(list: Vec<odek_core::inventory::Listing>) -> (Vec<String>, Vec<String>) {
    // Every cell comes from Docker (labels anyone can write): shown
    // terminal-safe.
    let cell = |s: String| {
        if s.is_empty() {
            "-".to_string()
        } else {
            odek_core::text::shown(&s)
        }
    };
    let mut unverified = false;
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
                (false, _, _) => {
                    unverified = true;
                    "unverified"
                }
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
    let head = ["NAME", "STATE", "KIND", "OWNER", "PROJECTS", "WORKDIR"].map(String::from);
    let width = |i: usize| {
        rows.iter()
            .chain(std::iter::once(&head))
            .map(|r| r[i].chars().count())
            .max()
            .unwrap_or(0)
    };
    let (w0, w1, w2, w3, w4) = (width(0), width(1), width(2), width(3), width(4));
    let table = std::iter::once(&head)
        .chain(rows.iter())
        .map(|r| {
            format!(
                "{:<w0$} {:<w1$} {:<w2$} {:<w3$} {:<w4$} {}",
                r[0], r[1], r[2], r[3], r[4], r[5]
            )
        })
        .collect();
    let legend = if unverified {
        vec![UNVERIFIED_LEGEND.to_string()]
    } else {
        Vec::new()
    };
    (table, legend)
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

/// `odek sandbox log NAME|ID [--json]`, `odek sandbox log --clear [NAME|ID]`:
/// prunes the records kept past `sandbox_log_retention` first.
async fn sandbox_log(odek: &Client, args: &crate::LogArgs) -> anyhow::Result<()> {
    use odek_core::audit;
    let home = odek_home()?;
    let env = std::env::vars().collect();
    let retention = odek_core::config::log_retention(&env)?;
    let days = u32::try_from(retention.value).unwrap_or(0);
    odek.prune_records(&home, days).await;
    let name = match &args.name {
        Some(n) => Some(record_name(odek, &home, n, days).await?),
        None => None,
    };
    if args.clear {
        let removed = audit::clear(&home, name.as_deref()).map_err(anyhow::Error::msg)?;
        for n in &removed {
            outln!("{}", odek_core::text::shown(n));
        }
        errln!(
            "odek: removed {} sandbox log(s) from {}",
            removed.len(),
            odek_core::text::shown(home.join(audit::SANDBOXES_DIR))
        );
        return Ok(());
    }
    let Some(name) = name else {
        // Which sandboxes have a record (`odek run`'s name is not shown
        // anywhere else once it is gone).
        // The most recently used last, next to the prompt.
        let mut listed: Vec<LogSummary> = audit::sandboxes(&home)
            .into_iter()
            .map(|name| {
                let records = audit::read(&home, &name)
                    .ok()
                    .flatten()
                    .map(|l| l.records)
                    .unwrap_or_default();
                LogSummary {
                    calls: records.len(),
                    first: records.first().map(|r| r.time.clone()),
                    last: records.last().map(|r| r.time.clone()),
                    name,
                }
            })
            .collect();
        listed.sort_by(|a, b| a.last.cmp(&b.last).then(a.name.cmp(&b.name)));
        if args.json {
            outln!("{}", json_for_terminal(&listed)?);
        } else if !listed.is_empty() {
            let w = listed
                .iter()
                .map(|l| l.name.len())
                .max()
                .unwrap_or(4)
                .max(4);
            outln!(
                "{:w$}  {:>5}  {:24}  LAST (UTC)",
                "NAME",
                "CALLS",
                "FIRST (UTC)"
            );
            for l in &listed {
                let t = |t: &Option<String>| {
                    t.as_deref().map_or("-".to_string(), |t| {
                        odek_core::text::foreign(t).into_owned()
                    })
                };
                outln!(
                    "{:w$}  {:>5}  {:24}  {}",
                    l.name,
                    l.calls,
                    t(&l.first),
                    t(&l.last)
                );
            }
        }
        return Ok(());
    };
    let log = audit::read(&home, &name)
        .map_err(anyhow::Error::msg)?
        .ok_or_else(|| no_record(&home, &name, days))?;
    if log.skipped > 0 {
        errln!(
            "odek: warning: {} line(s) of {} are not records (cut short by a crash or a full disk) and are left out",
            log.skipped,
            odek_core::text::shown(&log.path)
        );
    }
    if args.json {
        outln!("{}", json_for_terminal(&log.records)?);
        return Ok(());
    }
    errln!(
        "odek: the record of sandbox {name} ({}): command lines are kept as they were run; `odek sandbox log --clear {name}` removes it",
        odek_core::text::shown(&log.path)
    );
    for r in &log.records {
        outln!("{}", record_line(r));
    }
    Ok(())
}

/// The sandbox whose record `arg` names: a container name with a record
/// under `home`, else a container ID (or prefix) of an odek sandbox the
/// engine still has. Errors: neither, saying what to pass.
async fn record_name(
    odek: &Client,
    home: &std::path::Path,
    arg: &str,
    days: u32,
) -> anyhow::Result<String> {
    if odek_core::launch::validate_sandbox_name(arg).is_ok() {
        // A name: its record, if any, is under home whether or not the
        // sandbox still exists.
        if odek_core::audit::read(home, arg)
            .map_err(anyhow::Error::msg)?
            .is_some()
        {
            return Ok(arg.to_string());
        }
        return Err(no_record(home, arg, days));
    }
    let hex = !arg.is_empty() && arg.len() <= 64 && arg.bytes().all(|b| b.is_ascii_hexdigit());
    if hex {
        if let Ok(engine) = odek.engine() {
            if let Ok(Some(info)) = engine.inspect_container(arg).await {
                let ours = info
                    .labels
                    .get(odek_core::labels::SANDBOX)
                    .map(String::as_str)
                    == Some("true");
                if ours && odek_core::launch::validate_sandbox_name(&info.name).is_ok() {
                    return Ok(info.name);
                }
            }
        }
    }
    let shown = odek_core::text::quote(arg);
    if arg.starts_with("sbx-") {
        bail!("{shown} is an MCP sandbox_id, known only to the server that made it; pass the sandbox's container name (odek-…), the `container` of MCP's sandbox_list");
    }
    if hex {
        bail!("no sandbox container with ID {shown} is on the daemon now (an ID names a sandbox only while it exists); pass its container name (odek-…), which works after the sandbox is gone: `odek sandbox ls` lists the running ones");
    }
    bail!("{shown} is not a sandbox's container name (odek-…) nor a container ID; `odek sandbox ls` lists the running sandboxes, MCP's sandbox_list shows a sandbox's name as `container`")
}

/// There is no record of sandbox `name`: why that may be, and the fix.
fn no_record(home: &std::path::Path, name: &str, days: u32) -> anyhow::Error {
    anyhow::anyhow!(
        "no record of sandbox {name} in {}: nothing ran in it through odek, or its log was removed (`--clear`, or {days} day(s) after the sandbox ended: sandbox_log_retention), or it was recorded under another ODEK_HOME; `odek sandbox ls` lists the running sandboxes",
        odek_core::text::shown(home.join(odek_core::audit::SANDBOXES_DIR))
    )
}

/// One record as a line: time, surface, tool, result, duration, what.
/// One sandbox with a record, as `odek sandbox log` without NAME lists it.
#[derive(serde::Serialize)]
struct LogSummary {
    /// The container name.
    name: String,
    /// Records kept.
    calls: usize,
    /// When the first kept call began (UTC, RFC 3339), if any.
    first: Option<String>,
    /// When the last call began.
    last: Option<String>,
}

fn record_line(r: &odek_core::audit::Record) -> String {
    let f = |s: &str| odek_core::text::foreign(s).into_owned();
    let result = match (r.exit_code, &r.error, r.outcome.as_deref()) {
        (Some(c), _, Some(o)) if o != "exited" => format!("exit {c} ({o})"),
        (Some(c), _, _) => format!("exit {c}"),
        (None, Some(e), _) => format!("failed: {e}"),
        (None, None, Some(o)) => o.to_string(),
        (None, None, None) => "-".into(),
    };
    let mut what = Vec::new();
    if let Some(c) = &r.command {
        what.push(
            c.iter()
                .map(|a| shell_word(a))
                .collect::<Vec<_>>()
                .join(" "),
        );
    }
    if let Some(p) = &r.path {
        what.push(shell_word(p));
    }
    if let Some(p) = &r.process_id {
        what.push(format!("process {p}"));
    }
    if let Some(p) = &r.parent {
        what.push(format!("from {p}"));
    }
    if !r.env_keys.is_empty() {
        what.push(format!("(env {})", r.env_keys.join(", ")));
    }
    format!(
        "{}  {:<7} {:<14} {:<20} {:>8}  {}",
        f(&r.time),
        f(&r.surface),
        f(&r.tool),
        f(&result),
        format!("{} ms", r.duration_ms),
        f(&what.join(" "))
    )
}

/// `a` as a POSIX shell word: as it is when it needs no quoting, else in
/// single quotes.
fn shell_word(a: &str) -> String {
    let plain = !a.is_empty()
        && a.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_@%+=:,./-".contains(&b));
    if plain {
        a.to_string()
    } else {
        format!("'{}'", a.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A copy-back line names at most 20 paths and says how many more
    /// there are.
    #[test]
    fn a_long_copy_back_list_says_how_many_more() {
        let items: Vec<String> = (0..23).map(|i| format!("f{i}")).collect();
        let line = first_of(&items, ", ");
        assert!(line.starts_with("f0, f1, "), "{line}");
        assert!(line.ends_with(", f19, and 3 more"), "{line}");
        assert_eq!(first_of(&items[..20], "; ").matches("; ").count(), 19);
        assert!(!first_of(&items[..20], "; ").contains("more"));
    }

    fn listing(name: &str, verified: bool) -> odek_core::inventory::Listing {
        serde_json::from_value(serde_json::json!({
            "name": name, "id": "0123", "state": "running", "verified": verified,
            "created": null, "detached": false, "owner_pid": null, "owner_gone": null,
            "workdir": null, "parent": null,
        }))
        .expect("a listing")
    }

    /// `unverified` is explained under the table (what it is and what odek
    /// does with it), only when a row shows it.
    #[test]
    fn ls_explains_unverified_when_a_row_is_unverified() {
        let (table, legend) = ls_table(vec![listing("odek-mine", true), listing("odek-x", false)]);
        assert_eq!(table.len(), 3, "{table:?}");
        assert!(table[2].contains("unverified"), "{table:?}");
        assert_eq!(legend.len(), 1, "{legend:?}");
        let l = &legend[0];
        assert!(l.starts_with("unverified: "), "{l}");
        assert!(
            l.contains("launch key") && l.contains("never execs in"),
            "{l}"
        );
        assert!(l.contains("docker rm -f NAME"), "{l}");
        let (_, none) = ls_table(vec![listing("odek-mine", true)]);
        assert!(none.is_empty(), "no unverified row, no legend: {none:?}");
    }
}
