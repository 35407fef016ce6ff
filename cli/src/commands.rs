//! The commands of SPEC §10.3.

use std::process::ExitCode;

use anyhow::{bail, Context};
use odek_core::launch::{LaunchGuard, LaunchProgress};
use odek_core::{Client, ExecRequest, LaunchOptions, Sandbox};
use std::sync::Arc;
use tokio::signal::unix::{signal, SignalKind};

use crate::approve;
use crate::output::{print_anyhow, print_error, print_line, say, sink, Stderr};
use crate::{ApprovalsCmd, Cli, Cmd, ConfigCmd, ExecFlags, SandboxCmd, EXIT_REFUSED};

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
        Cmd::Sandbox(cmd) => sandbox(&cli, &odek, &reporter, cmd).await,
        Cmd::Config(ConfigCmd::View(args)) => config_view(&cli, &odek, &reporter, args).await,
        Cmd::Approvals(ApprovalsCmd::List { json }) => approve::list(*json),
        Cmd::Approvals(ApprovalsCmd::Revoke { key, project }) => {
            approve::revoke(key.as_deref(), project.as_deref())
        }
        Cmd::Mcp(args) => return mcp(&cli, odek, args).await,
        Cmd::Completions { shell } => crate::shellgen::completions(*shell),
        Cmd::Manpage { dir } => crate::shellgen::manpage(dir),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => match e.downcast_ref::<Interrupted>() {
            // Already said what was cleaned up.
            Some(Interrupted(code)) => ExitCode::from(*code),
            None => {
                print_anyhow(&e);
                ExitCode::from(crate::exit::FAILED)
            }
        },
    }
}

/// `$ODEK_HOME` of this process (SPEC §3.1), its real path when it exists:
/// its launch key tells this user's sandboxes from others.
fn odek_home() -> anyhow::Result<std::path::PathBuf> {
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

/// The sandbox as JSON for the terminal, env values left out (they may be
/// secrets; `odek config view` shows keys only, too).
fn sandbox_json(s: &Sandbox) -> anyhow::Result<String> {
    let mut s = s.clone();
    for e in &mut s.plan.env {
        e.value = "<redacted>".into();
    }
    json_for_terminal(&s)
}

/// Exit code from a command status (0..=255).
fn exit_of(code: i64) -> ExitCode {
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
fn exec_request(flags: &ExecFlags, cmd: &[String]) -> anyhow::Result<ExecRequest> {
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

fn verbose_plan(cli: &Cli, odek: &Client, plan: &odek_core::Plan) {
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

/// `odek run`: resolve → launch → exec → destroy; CMD's status, or 125.
async fn run(cli: &Cli, odek: &Client, reporter: &Stderr, args: &crate::RunArgs) -> ExitCode {
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
        Err(Interrupted(code)) => ExitCode::from(code),
    }
}

use odek_core::inventory::CREATE_SETTLE;

/// Exit status after a panic in odek's own code (Rust's usual one), once
/// the sandbox is removed.
use crate::exit::PANIC as EXIT_PANIC;

/// Runs `work` (a launch, perhaps followed by a command) until it ends,
/// panics, or SIGINT/SIGTERM/SIGHUP/SIGQUIT arrives. On a signal or a panic
/// the work is dropped and the launch's container is removed by `guard`
/// (SPEC §6.1: any failure after create removes the container); on a signal
/// a create call in flight is first given up to 10 s to answer (a second
/// signal stops the wait). What happened is said on stderr, with how to
/// remove a container odek could not: `odek sandbox gc` for an ephemeral
/// one, `odek sandbox down` for a `detached` one (gc keeps those). Errors:
/// [`Interrupted`] with the exit status the signal calls for (130, 143,
/// 129, 131), or [`EXIT_PANIC`].
async fn interruptible<T>(
    odek: &Client,
    guard: LaunchGuard,
    signals: &mut Signals,
    work: impl std::future::Future<Output = T>,
) -> Result<T, Interrupted> {
    let mut work = CatchUnwind(Box::pin(work));
    let (status, why, panicked) = tokio::select! {
        out = &mut work => match out {
            Ok(out) => return Ok(out),
            Err(Panicked) => (EXIT_PANIC, "stopped by an internal error (a bug; see the panic above)", true),
        },
        n = signals.next() => (n, "interrupted", false),
    };
    // A panicked future cannot be driven on; a create it had in flight is
    // looked for once, below.
    if !panicked && guard.creating() {
        errln!("odek: {}", guard.settling_line());
        guard.settle(&mut work, signals.next()).await;
    }
    drop(work);
    // A probe the launch had made to read its image is removed too (on a
    // task the dropped launch left): wait for it before exiting.
    let ended = guard.reap(odek, CREATE_SETTLE, signals.next()).await;
    errln!("odek: {}", ended.stopped_line(why));
    Err(Interrupted(status))
}

/// A future that panicked (the panic message was printed by the hook).
struct Panicked;

/// Polls a future, turning a panic inside it into `Err(Panicked)` so that
/// the caller can still remove what the future created.
struct CatchUnwind<F>(std::pin::Pin<Box<F>>);

impl<F: std::future::Future> std::future::Future for CatchUnwind<F> {
    type Output = Result<F::Output, Panicked>;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        use std::task::Poll;
        let fut = self.get_mut().0.as_mut();
        // The future is never polled again after a panic, only dropped.
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| fut.poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(out)) => Poll::Ready(Ok(out)),
            Err(_) => Poll::Ready(Err(Panicked)),
        }
    }
}

/// A command interrupted by a signal (or stopped by a panic), after its
/// cleanup was done and said: carries the exit status (128 + the signal's
/// number, or [`EXIT_PANIC`]).
#[derive(Debug)]
pub struct Interrupted(pub u8);

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "interrupted (exit status {})", self.0)
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
    let req = match exec_request(&args.exec, &args.cmd) {
        Ok(r) => r,
        Err(e) => return refuse(&e),
    };
    // Check the command and its env before any container exists.
    if let Err(e) = req.check() {
        print_error(&e);
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
    let outcome = odek.exec(&sandbox, &req, &sink).await;
    let removed = odek.destroy(&sandbox).await;
    if let Err(e) = &removed {
        print_error(e);
    }
    match outcome {
        Ok(o) => {
            if o.timed_out {
                let then = match (&sandbox.container_id, o.killed) {
                    (Some(_), _) => "the sandbox was removed",
                    (None, true) => "it was killed with its process group on the host",
                    (None, false) => "odek could not kill its process group on the host",
                };
                errln!("odek: the command did not finish within the timeout; {then}");
            }
            exit_of(o.exit_code)
        }
        Err(e) => {
            print_error(&e);
            exit_after_start(&e)
        }
    }
}

/// Exit status when a command could not finish in a sandbox that is up
/// (`odek run` after launch, `odek sandbox exec`): 137 when the sandbox was
/// killed under it; 125 when nothing ran (odek refused, Docker refused the
/// exec, the sandbox could not be found); 255 when the command may have
/// partly run and its status is unknown (daemon lost mid-exec).
fn exit_after_start(e: &odek_core::Error) -> ExitCode {
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

async fn sandbox_exec(odek: &Client, args: &crate::ExecArgs) -> ExitCode {
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
        let req = exec_request(&args.exec, &args.cmd)?;
        let sandbox = odek.attach(&args.name, &odek_home()?).await?;
        let cancel = async { signalled = signals.next().await };
        let outcome = if args.json {
            odek.exec_until(&sandbox, &req, &|k, b| capture.write(k, b), cancel)
                .await?
        } else {
            odek.exec_until(&sandbox, &req, &sink, cancel).await?
        };
        Ok::<_, anyhow::Error>((sandbox.name, outcome))
    }
    .await;
    if args.json {
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
                    "odek: interrupted; the command was killed (every process carrying its ODEK_EXEC_ID tag, and their children); sandbox {name} keeps running"
                );
            } else {
                errln!("odek: interrupted; the command could not be killed (see above); `odek sandbox down {name}` stops it");
            }
            ExitCode::from(signalled)
        }
        Ok((name, o)) => {
            if o.timed_out && o.killed {
                errln!("odek: the command did not finish within the timeout and was killed (every process carrying its ODEK_EXEC_ID tag, and their children)");
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

/// SIGINT, SIGTERM, SIGHUP and SIGQUIT, caught so that odek can clean up
/// before it exits with 128 + the signal's number.
struct Signals {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
    quit: tokio::signal::unix::Signal,
}

impl Signals {
    fn install() -> std::io::Result<Signals> {
        Ok(Signals {
            int: signal(SignalKind::interrupt())?,
            term: signal(SignalKind::terminate())?,
            hup: signal(SignalKind::hangup())?,
            quit: signal(SignalKind::quit())?,
        })
    }

    /// Waits for the next of them; returns the exit status it calls for
    /// (130, 143, 129 or 131).
    async fn next(&mut self) -> u8 {
        tokio::select! {
            _ = self.int.recv() => 130,
            _ = self.term.recv() => 143,
            _ = self.hup.recv() => 129,
            _ = self.quit.recv() => 131,
        }
    }
}

/// `odek sandbox up` up to a running detached sandbox named `name`: from a
/// parent's recorded plan narrowed (SPEC §8) with `--parent`, else resolved,
/// approved and launched like `odek run`'s, never falling back to the host.
async fn sandbox_up(
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

async fn sandbox(
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
                        if let Err(e) = odek.destroy(&s).await {
                            if args.json {
                                outln!("{}", json_for_terminal(&removed)?);
                            }
                            return Err(e.into());
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
                let rows: Vec<[String; 5]> = list
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
                            (true, false, false) => "run",
                        };
                        [
                            cell(l.name),
                            cell(l.state),
                            kind.to_string(),
                            owner,
                            cell(l.workdir.unwrap_or_default()),
                        ]
                    })
                    .collect();
                let head = ["NAME", "STATE", "KIND", "OWNER", "WORKDIR"].map(String::from);
                let width = |i: usize| {
                    rows.iter()
                        .chain(std::iter::once(&head))
                        .map(|r| r[i].chars().count())
                        .max()
                        .unwrap_or(0)
                };
                let (w0, w1, w2, w3) = (width(0), width(1), width(2), width(3));
                for r in std::iter::once(&head).chain(rows.iter()) {
                    outln!(
                        "{:<w0$} {:<w1$} {:<w2$} {:<w3$} {}",
                        r[0],
                        r[1],
                        r[2],
                        r[3],
                        r[4]
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
        SandboxCmd::Exec(_) => unreachable!("handled in dispatch"),
    }
    Ok(())
}

/// The workdir `odek sandbox gc` sweeps by default: `-C DIR` or the current
/// directory, canonical as odek labels a sandbox's workdir.
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

async fn config_view(
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

/// `odek mcp`: serves until the client disconnects (exit 0) or a signal
/// (128 + its number), after removing every sandbox it launched.
async fn mcp(cli: &Cli, odek: Client, args: &crate::McpArgs) -> ExitCode {
    let setup = args.sandbox.inputs(&cli.workdir).and_then(|mut i| {
        odek_mcp::force_sandbox(&mut i).map_err(anyhow::Error::msg)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use odek_core::config::{ConfigInputs, Layer};
    use odek_core::engine::{FakeEngine, FakeImage};

    /// A panic in the flow after create (a bug, or a write that panicked
    /// before stdout/stderr writes stopped panicking) still removes the
    /// container, by name and launch ID, and exits 101 (SPEC §6.1).
    #[tokio::test]
    async fn a_panic_after_create_removes_the_sandbox() {
        let fake = FakeEngine::new();
        fake.add_image(FakeImage::new("odek-test/base:1"));
        let odek = Client::with_engine(Arc::new(fake.clone()));
        let dir = tempfile::tempdir().expect("tempdir");
        let workdir = dir.path().join("work");
        std::fs::create_dir(&workdir).expect("mkdir");
        let inputs = ConfigInputs {
            workdir,
            env: [(
                "ODEK_HOME".to_string(),
                dir.path().join("home").display().to_string(),
            )]
            .into(),
            flags: Layer {
                sandbox_image: Some("odek-test/base:1".into()),
                ..Layer::default()
            },
            ..ConfigInputs::default()
        };
        let plan = odek
            .resolve(&inputs, &odek_core::Silent)
            .await
            .expect("resolve");
        let guard = LaunchGuard::new(None, false);
        let mut signals = Signals::install().expect("signal handlers");
        let work = async {
            let opts = LaunchOptions {
                name: Some(guard.name().to_string()),
                progress: Some(guard.progress().clone()),
                ..Default::default()
            };
            odek.launch(&plan, &opts, &odek_core::Silent)
                .await
                .expect("launch");
            assert_eq!(fake.containers().len(), 1, "the sandbox exists");
            panic!("a bug after create");
        };
        let out: Result<(), Interrupted> =
            interruptible(&odek, guard.clone(), &mut signals, work).await;
        assert!(matches!(out, Err(Interrupted(EXIT_PANIC))), "{out:?}");
        assert!(
            fake.containers().is_empty(),
            "the sandbox was left: {:?}",
            fake.containers()
        );
    }
}
