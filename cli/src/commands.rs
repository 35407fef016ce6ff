//! The commands of SPEC §10.3.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use odek_core::launch::{new_sandbox_name, LaunchProgress, Stage};
use odek_core::registry::Reaped;
use odek_core::{Command, ExecRequest, LaunchOptions, Odek, Sandbox};
use std::sync::Arc;
use tokio::signal::unix::{signal, SignalKind};

use crate::approve;
use crate::output::{print_anyhow, print_error, sink, Stderr};
use crate::{ApprovalsCmd, Cli, Cmd, ConfigCmd, ExecFlags, SandboxCmd, EXIT_REFUSED};

/// Runs the parsed command line.
pub async fn dispatch(cli: Cli) -> ExitCode {
    let reporter = Stderr;
    let odek = Odek::from_env();
    let result = match &cli.command {
        Cmd::Run(args) => return run(&cli, &odek, &reporter, args).await,
        Cmd::Sandbox(SandboxCmd::Exec(args)) => return sandbox_exec(&odek, args).await,
        Cmd::Sandbox(cmd) => sandbox(&cli, &odek, &reporter, cmd).await,
        Cmd::Config(ConfigCmd::View(args)) => config_view(&cli, &odek, &reporter, args).await,
        Cmd::Approvals(ApprovalsCmd::List { json }) => approve::list(*json),
        Cmd::Approvals(ApprovalsCmd::Revoke { key, project }) => {
            approve::revoke(key.as_deref(), project.as_deref())
        }
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
                ExitCode::FAILURE
            }
        },
    }
}

/// The sandbox as JSON for the terminal, env values left out (they may be
/// secrets; `odek config view` shows keys only, too).
fn sandbox_json(s: &Sandbox) -> anyhow::Result<String> {
    let mut s = s.clone();
    for e in &mut s.plan.env {
        e.value = "<redacted>".into();
    }
    Ok(serde_json::to_string_pretty(&s)?)
}

/// Exit code from a command status (0..=255).
fn exit_of(code: i64) -> ExitCode {
    ExitCode::from(u8::try_from(code.clamp(0, 255)).unwrap_or(255))
}

fn exec_request(flags: &ExecFlags, cmd: &[String]) -> anyhow::Result<ExecRequest> {
    let mut env = Vec::new();
    for kv in &flags.env {
        let (k, v) = kv
            .split_once('=')
            .with_context(|| format!("-e {kv:?}: write KEY=VALUE"))?;
        env.push((k.to_string(), v.to_string()));
    }
    let timeout = match flags.timeout {
        None => None,
        Some(t) => match odek_core::exec::timeout_from_secs(t) {
            Some(d) => Some(d),
            None => {
                bail!("--timeout must be a positive number of seconds below 1000000000 (got {t})")
            }
        },
    };
    Ok(ExecRequest {
        command: Command::Argv(cmd.to_vec()),
        env,
        timeout,
        workdir: None,
    })
}

fn verbose_plan(cli: &Cli, odek: &Odek, plan: &odek_core::Plan) {
    if !cli.verbose {
        return;
    }
    eprintln!(
        "odek: endpoint {}",
        plan.endpoint
            .clone()
            .unwrap_or_else(|| odek.endpoint_display())
    );
    if let Some(e) = &plan.engine {
        eprintln!("odek: engine {} (API {})", e.server_version, e.api_version);
    }
    eprintln!(
        "odek: mode {}, image {}, network {}, {} attached network(s)",
        format!("{:?}", plan.mode).to_lowercase(),
        plan.image.reference,
        plan.network_summary,
        plan.networks.len()
    );
}

/// `odek run`: resolve → launch → exec → destroy; CMD's status, or 125.
async fn run(cli: &Cli, odek: &Odek, reporter: &Stderr, args: &crate::RunArgs) -> ExitCode {
    let name = new_sandbox_name();
    let mut signals = match Signals::install() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("odek: error: cannot install signal handlers: {e}");
            return ExitCode::from(EXIT_REFUSED);
        }
    };
    let progress = Arc::new(LaunchProgress::default());
    let flow = run_flow(cli, odek, reporter, args, &name, progress.clone());
    // Dropping the flow on a signal cancels it (and kills a host command in
    // fallback).
    match interruptible(odek, &name, false, &progress, &mut signals, flow).await {
        Ok(code) => code,
        Err(Interrupted(code)) => ExitCode::from(code),
    }
}

/// How long an interrupted launch waits for the answer to a create call
/// already on its way, so that it knows whether a container exists.
const CREATE_SETTLE: Duration = Duration::from_secs(10);

/// Runs `work` (a launch, perhaps followed by a command) until it ends or
/// SIGINT/SIGTERM/SIGHUP/SIGQUIT arrives. On a signal the work is dropped
/// and the container named `name` is removed (SPEC §6.1: any failure after
/// create removes the container); a create call in flight is first given up
/// to [`CREATE_SETTLE`] to answer (a second signal stops the wait). What
/// happened is said on stderr, with how to remove a container odek could
/// not: `odek sandbox gc` for an ephemeral one, `odek sandbox down` for a
/// `detached` one (gc keeps those). Errors: [`Interrupted`] with the exit
/// status the signal calls for (130, 143, 129, 131).
async fn interruptible<T>(
    odek: &Odek,
    name: &str,
    detached: bool,
    progress: &LaunchProgress,
    signals: &mut Signals,
    work: impl std::future::Future<Output = T>,
) -> Result<T, Interrupted> {
    let mut work = Box::pin(work);
    let signalled = tokio::select! {
        out = &mut work => return Ok(out),
        n = signals.next() => n,
    };
    if progress.get() == Stage::Creating {
        eprintln!(
            "odek: interrupted while the container was being created; waiting up to {} s for the daemon's answer to remove it (interrupt again to stop waiting)",
            CREATE_SETTLE.as_secs()
        );
        // Keep driving the work only until the create has answered: its
        // answer, not a blind wait, tells whether a container exists.
        let deadline = tokio::time::sleep(CREATE_SETTLE);
        tokio::pin!(deadline);
        while progress.get() == Stage::Creating {
            tokio::select! {
                _ = &mut work => break,
                _ = &mut deadline => break,
                _ = signals.next() => break,
                _ = tokio::time::sleep(Duration::from_millis(5)) => {}
            }
        }
    }
    drop(work);
    let stage = progress.get();
    let outcome = match stage {
        Stage::Preparing => Reaped::Absent,
        _ => {
            odek.reap_named(name, progress.launch_id(), Duration::ZERO)
                .await
        }
    };
    let later = odek_core::launch::removal_hint(detached, name);
    match (stage, outcome) {
        (Stage::Preparing, _) if detached => {
            eprintln!("odek: interrupted before any container was created")
        }
        (Stage::Preparing, _) => eprintln!(
            "odek: interrupted before any container was created (a command odek had started on the host, if any, was killed with its process group)"
        ),
        (_, Reaped::Removed) => eprintln!("odek: interrupted; sandbox {name} removed"),
        (Stage::Creating, Reaped::Absent) => eprintln!(
            "odek: interrupted; no container {name} exists (should the daemon still create it, {later})"
        ),
        (_, Reaped::Absent) => eprintln!("odek: interrupted; sandbox {name} is gone"),
        (_, Reaped::NotOurs) => eprintln!(
            "odek: interrupted; a container named {name} exists, but this launch did not create it: it was left alone"
        ),
        (_, Reaped::Failed(why)) => eprintln!(
            "odek: interrupted; could not remove sandbox {name} ({why}); {later} once the daemon answers"
        ),
    }
    Err(Interrupted(signalled))
}

/// A command interrupted by a signal, after its cleanup was done and said:
/// carries the exit status (128 + the signal's number).
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
    odek: &Odek,
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
    eprintln!("{}", sandbox.startup_line());
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
                eprintln!("odek: the command did not finish within the timeout; {then}");
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
        E::SandboxStopped { .. } => ExitCode::from(137),
        E::Exec { started: false, .. } => ExitCode::from(EXIT_REFUSED),
        E::Exec { started: true, .. } => ExitCode::from(255),
        E::Unreachable {
            step: odek_core::Step::Exec,
            ..
        } => ExitCode::from(255),
        _ => ExitCode::from(EXIT_REFUSED),
    }
}

async fn sandbox_exec(odek: &Odek, args: &crate::ExecArgs) -> ExitCode {
    let mut signals = match Signals::install() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("odek: error: cannot install signal handlers: {e}");
            return ExitCode::from(EXIT_REFUSED);
        }
    };
    let mut signalled = 0u8;
    let result = async {
        let req = exec_request(&args.exec, &args.cmd)?;
        let sandbox = odek.attach(&args.name).await?;
        let cancel = async { signalled = signals.next().await };
        let outcome = odek.exec_until(&sandbox, &req, &sink, cancel).await?;
        Ok::<_, anyhow::Error>((sandbox.name, outcome))
    }
    .await;
    match result {
        Ok((name, o)) if o.cancelled => {
            if o.killed {
                eprintln!(
                    "odek: interrupted; the command was killed (every process carrying its ODEK_EXEC_ID tag, and their children); sandbox {name} keeps running"
                );
            } else {
                eprintln!("odek: interrupted; the command could not be killed (see above); `odek sandbox down {name}` stops it");
            }
            ExitCode::from(signalled)
        }
        Ok((name, o)) => {
            if o.timed_out && o.killed {
                eprintln!("odek: the command did not finish within the timeout and was killed (every process carrying its ODEK_EXEC_ID tag, and their children)");
            } else if o.timed_out {
                eprintln!("odek: the command did not finish within the timeout and could not be killed (see above); `odek sandbox down {name}` stops it");
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
    odek: &Odek,
    reporter: &Stderr,
    args: &crate::UpArgs,
    name: &str,
    progress: Arc<LaunchProgress>,
) -> anyhow::Result<Sandbox> {
    if let Some(parent_name) = &args.parent {
        let parent = odek.attach(parent_name).await?;
        let req = args.sandbox.narrow_request()?;
        let plan = odek_core::narrow::narrow(&parent.plan, &req)?;
        for w in &plan.warnings {
            odek_core::Reporter::warning(reporter, w);
        }
        let opts = LaunchOptions {
            detached: true,
            name: Some(name.to_string()),
            labels: [(odek_core::labels::PARENT.to_string(), parent.name.clone())].into(),
            progress: Some(progress),
            ..Default::default()
        };
        return Ok(odek.launch(&plan, &opts, reporter).await?);
    }
    let mut inputs = args.sandbox.inputs(&cli.workdir)?;
    // A detached sandbox needs a container: never fall back to the host.
    if inputs.flags.sandbox.is_none() {
        inputs.flags.sandbox = Some(true);
        inputs.flag_names.insert(
            "sandbox".into(),
            "odek sandbox up (implies --sandbox)".into(),
        );
    }
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
    odek: &Odek,
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
            let name = args.name.clone().unwrap_or_else(new_sandbox_name);
            let progress = Arc::new(LaunchProgress::default());
            let mut signals = Signals::install().context("cannot install signal handlers")?;
            let work = sandbox_up(cli, odek, reporter, args, &name, progress.clone());
            let sandbox = interruptible(odek, &name, true, &progress, &mut signals, work).await??;
            eprintln!("{}", sandbox.startup_line());
            if args.json {
                outln!("{}", sandbox_json(&sandbox)?);
            } else {
                outln!("{}", sandbox.name);
            }
        }
        SandboxCmd::Down(args) => {
            let mut failed = false;
            for n in &args.names {
                match odek.attach(n).await {
                    Ok(s) => {
                        odek.destroy(&s).await?;
                        outln!("{}", s.name);
                    }
                    Err(e) => {
                        print_error(&e);
                        failed = true;
                    }
                }
            }
            if failed {
                bail!("some sandboxes were not removed");
            }
        }
        SandboxCmd::Ls(args) => {
            let list = odek.list().await?;
            if args.json {
                outln!("{}", serde_json::to_string_pretty(&list)?);
            } else {
                // Columns as wide as their widest cell (names and owners vary).
                let rows: Vec<[String; 5]> = list
                    .into_iter()
                    .map(|l| {
                        let owner = match (l.owner_pid, l.owner_gone) {
                            (Some(p), Some(true)) => format!("{p}(gone)"),
                            (Some(p), _) => p.to_string(),
                            _ => "-".into(),
                        };
                        let kind = if l.detached { "detached" } else { "run" };
                        [
                            l.name,
                            l.state,
                            kind.to_string(),
                            owner,
                            l.workdir.unwrap_or_default(),
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
            let removed = odek.gc(args.detached).await?;
            if args.json {
                outln!("{}", serde_json::to_string_pretty(&removed)?);
            } else {
                for r in &removed {
                    outln!("{r}");
                }
                eprintln!("odek: removed {} sandbox(es)", removed.len());
            }
        }
        SandboxCmd::Describe(args) => {
            let s: Sandbox = odek.attach(&args.name).await?;
            let env = odek.describe(&s).await?;
            if args.json {
                outln!("{}", serde_json::to_string_pretty(&env)?);
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

async fn config_view(
    cli: &Cli,
    odek: &Odek,
    reporter: &Stderr,
    args: &crate::ViewArgs,
) -> anyhow::Result<()> {
    let inputs = args.sandbox.inputs(&cli.workdir)?;
    let plan = odek.resolve(&inputs, reporter).await?;
    let view = odek.config_view(&plan).await;
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&view)?);
    } else {
        out!("{}", view.render_text());
    }
    Ok(())
}
