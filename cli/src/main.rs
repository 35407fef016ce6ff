//! `odek`: run commands in a Docker sandbox that reaches your Compose
//! services by name (SPEC §10.3).

/// `println!` that never panics on a closed pipe (`odek sandbox ls | head`).
/// What it writes passes through `odek_core::text::terminal`: no control,
/// escape or bidirectional character reaches the terminal raw, whatever
/// foreign text (a path, a label, a daemon's message) the line holds.
/// JSON is written with `json_for_terminal`, which leaves nothing for it.
macro_rules! outln {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let text = format!($($t)*);
        let _ = writeln!(std::io::stdout(), "{}", odek_core::text::terminal(&text));
    }};
}

/// `print!` that never panics on a closed pipe; as `outln!`.
macro_rules! out {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let text = format!($($t)*);
        let _ = write!(std::io::stdout(), "{}", odek_core::text::terminal(&text));
    }};
}

/// `eprintln!` that never panics on a closed or full stderr (`2>/dev/full`,
/// `2>&1 | head -1`): core's (`odek_core::stderr`), every line through
/// `odek_core::text::terminal`. Where losing the line matters (the loud host
/// fallback, SPEC §6.3), use `output::say`, which reports whether it was
/// written.
#[macro_use]
extern crate odek_core;

mod approve;
mod commands;
#[cfg(test)]
mod docs_sync;
mod exit;
mod flags;
mod output;
mod shellgen;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use flags::SandboxFlags;

/// Exit status for odek's own refusals in `odek run` (as `docker run`).
pub use exit::REFUSED as EXIT_REFUSED;

/// Docker sandboxes for AI coding agents that reach the services you run
/// with Docker Compose by service name. Every setup decision fails closed and
/// is visible.
#[derive(Parser, Debug)]
#[command(name = "odek", version, propagate_version = true, max_term_width = 100)]
#[command(
    after_help = format!("Example:\n  docker compose -p shop -f docker-compose.yml up -d     (or docker-compose)\n  odek run --sandbox-compose shop --sandbox-image my-tools:1 -- sh -c 'redis-cli -h redis ping'\n\n{}\n\n\"SPEC §n\" in help texts and messages is a section of docs/SPEC.md in odek's source repository; docs/CLI.md documents every command.", exit::help("Exit status of `odek run` and `odek sandbox exec`"))
)]
pub(crate) struct Cli {
    /// Project directory (mounted at /workspace; holds odek.json). Default: the current directory.
    #[arg(short = 'C', long, global = true, value_name = "DIR")]
    pub(crate) workdir: Option<PathBuf>,
    /// Print the endpoint, API version and each decision on stderr.
    #[arg(short, long, global = true)]
    pub(crate) verbose: bool,
    #[command(subcommand)]
    pub(crate) command: Cmd,
}

/// Top-level commands.
#[derive(Subcommand, Debug)]
pub(crate) enum Cmd {
    /// Run a command in a fresh sandbox and remove it afterwards.
    Run(RunArgs),
    /// Manage long-lived sandboxes (up, exec, shell, down, ls, log, gc, describe).
    #[command(subcommand)]
    Sandbox(SandboxCmd),
    /// Show configuration.
    #[command(subcommand)]
    Config(ConfigCmd),
    /// Review the project's sandbox settings that need approval and trust
    /// them, without running anything (SPEC §7).
    Approve(ApproveArgs),
    /// Trusted project settings (SPEC §7.3).
    #[command(subcommand)]
    Approvals(ApprovalsCmd),
    /// Print a shell completion script (bash, zsh, fish) on stdout.
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: shellgen::Shell,
    },
    /// Write the man pages (odek.1, odek-run.1, …) into DIR (for packagers).
    #[command(hide = true)]
    Manpage {
        /// The directory (created when missing).
        dir: PathBuf,
    },
    /// Serve the sandbox as MCP tools over stdio for an AI agent (docs/MCP.md).
    Mcp(McpArgs),
    /// Warm pools of ready sandboxes (kept by `odek mcp --sandbox-pool`).
    #[command(subcommand)]
    Pool(PoolCmd),
}

/// `odek pool …`.
#[derive(Subcommand, Debug)]
pub(crate) enum PoolCmd {
    /// Remove this user's ready pooled sandboxes (never a claimed one, never another user's).
    Down {
        /// Print what would be removed; remove nothing.
        #[arg(long)]
        dry_run: bool,
        /// Print JSON (the names).
        #[arg(long)]
        json: bool,
    },
}

/// `odek mcp`.
#[derive(Args, Debug)]
#[command(
    mut_arg("no-sandbox", |a| a.hide(true)),
    after_help = format!("Speaks the Model Context Protocol on stdin/stdout; logs go to stderr. Tools: exec, process_output, process_kill, read_file, write_file, edit_file, list_directory, describe, sandbox_up, sandbox_down, sandbox_list, sandbox_narrow (docs/MCP.md).\nThe sandbox is always on: an unreachable daemon or a missing network is a tool error, never a command on the host. Project settings needing approval are asked through the client (MCP elicitation) or refused, unless trusted (`odek approve -C DIR` in a terminal stores the trust without running anything; `odek approvals`) or {}=1 is set.\nEvery sandbox the server launched is removed when the client disconnects or on SIGINT/SIGTERM/SIGHUP/SIGQUIT; after a SIGKILL of the server the engine removes them by itself once the server's connections to them are gone (they are owned by the server: docs/SANDBOXING.md, owner lifetime), and `odek sandbox gc` in the server's workdir (or --all) stays the backstop.\n\nExample (Claude Code):\n  claude mcp add odek -- odek mcp --sandbox-compose shop --sandbox-image my-tools:1", odek_core::config::APPROVE_ENV)
)]
pub(crate) struct McpArgs {
    #[command(flatten)]
    pub(crate) sandbox: SandboxFlags,
    /// Most sandboxes the server keeps at once (default 16, or
    /// ODEK_MCP_MAX_SANDBOXES), the conversation's and narrowed ones and
    /// launches in flight included; a launch past it is a tool error (the
    /// agent frees one with sandbox_down).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) max_sandboxes: Option<u32>,
    /// Ready sandboxes kept per plan, 0 (off) to 8 (the sandbox_pool setting;
    /// ODEK_SANDBOX_POOL): a launch claims one (re-checked and verified first)
    /// and a replacement starts in the background (docs/MCP.md).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(i64).range(0..=8))]
    pub(crate) sandbox_pool: Option<i64>,
}

/// `odek approve`.
#[derive(Args, Debug)]
#[command(
    mut_arg("no-sandbox", |a| a.hide(true)),
    after_help = format!("Resolves the project in DIR (-C; default the current directory) with these sandbox flags, as `odek run` and `odek mcp` would, and shows the approval card of what its odek.json or Dockerfile.odek asks for. Answering t (trust; y is taken as t) at the terminal stores the trust that answering t at `odek run` stores (`odek approvals list`); later runs and `odek mcp` servers with the same settings and networks launch without asking. Nothing is run, built, pulled or created.\nAsks at a terminal on stdin; without one it stores nothing unless --yes is given, which prints the card and stores the trust without asking. {}=1 approves a single run and stores nothing, so it does not answer here.\nSays so, and exits 0, when nothing needs approval or a trust is stored already.\n\nExit status: 0 trusted (now or before) or nothing to approve; 1 not approved (an answer other than t or y, no terminal without --yes, or an error); 2 usage.", odek_core::config::APPROVE_ENV)
)]
pub(crate) struct ApproveArgs {
    #[command(flatten)]
    pub(crate) sandbox: SandboxFlags,
    /// Store the trust without asking (a terminal or not): the card is
    /// printed on stderr all the same, and the trust stored is the one a
    /// `t` at the prompt stores.
    #[arg(long, short = 'y')]
    pub(crate) yes: bool,
    /// Print the outcome as JSON on stdout: `status` (`trusted`,
    /// `already_trusted`, `not_needed`, `denied`, `no_terminal`, `failed`), `key`,
    /// `store`, `project_dir` and the approval `request` (null when none).
    #[arg(long)]
    pub(crate) json: bool,
}

/// `odek approvals …`.
#[derive(Subcommand, Debug)]
pub(crate) enum ApprovalsCmd {
    /// List trusted approval keys (with project directory when recorded).
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Revoke a trusted key, or every key recorded for a project directory.
    #[command(
        override_usage = "odek approvals revoke <KEY>\n       odek approvals revoke --project <DIR>"
    )]
    Revoke {
        /// The key (64 hex).
        #[arg(required_unless_present = "project", conflicts_with = "project")]
        key: Option<String>,
        /// Revoke every key recorded for this project directory.
        #[arg(long, value_name = "DIR")]
        project: Option<PathBuf>,
    },
}

/// `odek run`.
#[derive(Args, Debug)]
#[command(
    after_help = format!("Without -i, stdin is not forwarded: the command reads an empty input. -i and -t need odek's supervisor in the sandbox (ODEK_SUPERVISOR; docs/SANDBOXING.md).\n{}", exit::help("Exit status"))
)]
pub(crate) struct RunArgs {
    #[command(flatten)]
    pub(crate) sandbox: SandboxFlags,
    #[command(flatten)]
    pub(crate) exec: ExecFlags,
    #[command(flatten)]
    pub(crate) io: IoFlags,
    /// The command and its arguments (after `--`).
    #[arg(last = true, required = true, value_name = "CMD")]
    pub(crate) cmd: Vec<String>,
}

/// Options of a command run in a sandbox.
#[derive(Args, Debug, Clone, Default)]
pub(crate) struct ExecFlags {
    /// Extra environment for the command (KEY=VALUE; repeatable).
    #[arg(short = 'e', long = "env", value_name = "KEY=VALUE")]
    pub(crate) env: Vec<String>,
    /// Kill the command after this many seconds (exit status 124).
    #[arg(long, value_name = "SECS", allow_negative_numbers = true)]
    pub(crate) timeout: Option<f64>,
}

/// `-i` and `-t` of a command run in a sandbox.
#[derive(Args, Debug, Clone, Copy, Default)]
pub(crate) struct IoFlags {
    /// Forward odek's stdin to the command (its end closes the command's
    /// stdin).
    #[arg(short = 'i', long)]
    pub(crate) interactive: bool,
    /// Run the command on a pseudo-terminal of the local terminal's size
    /// (stdout and stderr are then one stream). Needs a terminal on stdin.
    /// With -i (-it) the local terminal is in raw mode and every key, Ctrl-C
    /// included, goes to the command; -t alone forwards no keys and Ctrl-C
    /// interrupts odek.
    #[arg(short = 't', long)]
    pub(crate) tty: bool,
}

/// `odek sandbox …`.
#[derive(Subcommand, Debug)]
pub(crate) enum SandboxCmd {
    /// Launch a sandbox that stays up until `odek sandbox down`; prints its name.
    Up(UpArgs),
    /// Run a command in a running sandbox.
    Exec(ExecArgs),
    /// Open an interactive shell in a running sandbox (bash when the image
    /// has it, else sh).
    Shell(ShellArgs),
    /// Remove sandboxes (a copied workspace is copied back first).
    Down(DownArgs),
    /// Copy a copied workspace (--sandbox-workspace copy) back into the
    /// working directory; the sandbox keeps running.
    CopyBack(CopyBackArgs),
    /// List odek sandboxes on the daemon.
    Ls(LsArgs),
    /// Remove sandboxes whose owner process is gone.
    Gc(GcArgs),
    /// Show what an agent in the sandbox is told (SPEC §9).
    Describe(DescribeArgs),
    /// Print a sandbox's record: every command and file operation odek ran
    /// in it (also after the sandbox is gone).
    Log(LogArgs),
}

/// `odek sandbox up`.
#[derive(Args, Debug)]
#[command(mut_arg("no-sandbox", |a| a.hide(true)))]
pub(crate) struct UpArgs {
    #[command(flatten)]
    pub(crate) sandbox: SandboxFlags,
    /// Launch a sub-agent sandbox narrowed from this running sandbox's
    /// recorded resolution (SPEC §8): the sandbox flags may then only narrow.
    #[arg(long, value_name = "NAME")]
    pub(crate) parent: Option<String>,
    /// Container name: odek- followed by letters, digits, '_', '.' or '-'
    /// (default odek-<random>). The prefix keeps a sandbox from shadowing a
    /// service name on the networks it joins.
    #[arg(long)]
    pub(crate) name: Option<String>,
    /// Print the sandbox as JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

/// `odek sandbox exec`.
#[derive(Args, Debug)]
#[command(after_help = format!("-i and -t need odek's supervisor in the sandbox (ODEK_SUPERVISOR when it was launched; docs/SANDBOXING.md).\n{}", exit::help("Exit status")))]
pub(crate) struct ExecArgs {
    /// Sandbox name (see `odek sandbox ls`).
    pub(crate) name: String,
    #[command(flatten)]
    pub(crate) exec: ExecFlags,
    #[command(flatten)]
    pub(crate) io: IoFlags,
    /// Capture the command's output and print one JSON result on stdout
    /// (as the bindings' exec result: exit_code, timed_out, killed, stdout,
    /// stderr, stdout_truncated, stderr_truncated); the exit status is the
    /// same as without it.
    #[arg(long, conflicts_with = "tty")]
    pub(crate) json: bool,
    /// The command and its arguments (after `--`).
    #[arg(last = true, required = true, value_name = "CMD")]
    pub(crate) cmd: Vec<String>,
}

/// `odek sandbox shell`.
#[derive(Args, Debug)]
#[command(after_help = format!("Runs `/bin/sh -c 'command -v bash >/dev/null 2>&1 && exec bash; exec sh'` as `odek sandbox exec -it NAME` would: the local terminal is the shell's (raw mode, its size followed), every key goes to the shell, and odek exits with the shell's status. Needs a terminal on stdin and odek's supervisor in the sandbox (ODEK_SUPERVISOR when it was launched).\n{}", exit::help("Exit status")))]
pub(crate) struct ShellArgs {
    /// Sandbox name (see `odek sandbox ls`).
    pub(crate) name: String,
    #[command(flatten)]
    pub(crate) exec: ExecFlags,
}

/// `odek sandbox down`.
#[derive(Args, Debug)]
pub(crate) struct DownArgs {
    /// Sandbox names.
    #[arg(required = true)]
    pub(crate) names: Vec<String>,
    /// Print the names removed as a JSON array.
    #[arg(long)]
    pub(crate) json: bool,
    /// For a copied workspace (`--sandbox-workspace copy`): remove the
    /// sandbox without copying its /workspace back; what it wrote there is
    /// lost. For when the copy-back keeps failing.
    #[arg(long)]
    pub(crate) discard: bool,
}

/// `odek sandbox copy-back`.
#[derive(Args, Debug)]
pub(crate) struct CopyBackArgs {
    /// Sandbox name (see `odek sandbox ls`).
    pub(crate) name: String,
    /// Print what was written and what was left out as JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

/// `odek sandbox ls`.
#[derive(Args, Debug)]
pub(crate) struct LsArgs {
    /// Print JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

/// `odek sandbox gc`.
#[derive(Args, Debug)]
pub(crate) struct GcArgs {
    /// Also remove detached sandboxes (from `odek sandbox up`).
    #[arg(long)]
    pub(crate) detached: bool,
    /// Every workdir, not only the project directory (-C DIR or the current
    /// directory). Still only this user's sandboxes (marked with this
    /// $ODEK_HOME's launch key): another user's or another $ODEK_HOME's
    /// sandbox carries another key and cannot be told from a forged one, so
    /// a daemon-wide sweep is never done.
    #[arg(long)]
    pub(crate) all: bool,
    /// Remove nothing; print what would be removed ("would remove NAME").
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// Print JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

/// `odek sandbox describe`.
#[derive(Args, Debug)]
pub(crate) struct DescribeArgs {
    /// Sandbox name.
    pub(crate) name: String,
    /// Print the structured environment as JSON.
    #[arg(long, conflicts_with = "tool")]
    pub(crate) json: bool,
    /// Print the short shell-tool description instead of the prompt block.
    #[arg(long)]
    pub(crate) tool: bool,
}

/// `odek sandbox log`.
#[derive(Args, Debug)]
#[command(
    after_help = "Every command of `odek run`, `odek sandbox exec`, a binding (Python, Go, C) and `odek mcp` in a sandbox is recorded in $ODEK_HOME/sandboxes/NAME/log.jsonl, and so are the file tools, the MCP server's other tool calls and `odek sandbox up` and `down`: the time it began, the surface (cli, library, mcp), the tool, the command line or path, the names of the env variables given, the exit code, the duration and a short outcome. Never env values, stdin, output or file contents. Commands on the host (fallback, --no-sandbox) are not recorded.\nCommand lines are kept as they were run: a secret typed on a command line (a token in `curl -H ...`, a password argument) is in the log. Pass secrets with -e/--env (only the name is kept). The log files are mode 0600 in directories of mode 0700; --clear removes them.\nA log is kept sandbox_log_retention days (default 7; ODEK_SANDBOX_LOG_RETENTION or the user config, never a project's odek.json; 0 = removed when the sandbox ends) after its sandbox ended, then removed at a later launch or `odek sandbox log`."
)]
pub(crate) struct LogArgs {
    /// The sandbox's container name (as `odek sandbox ls` and MCP's
    /// sandbox_list show it; works after the sandbox is gone), or the
    /// container ID (or a prefix of it) while the container exists.
    /// Without it: the names of the sandboxes that have a record, one a
    /// line.
    #[arg(value_name = "NAME|ID")]
    pub(crate) name: Option<String>,
    /// Print the records as a JSON array (one object per call, as stored);
    /// without NAME, the names as a JSON array.
    #[arg(long, conflicts_with = "clear")]
    pub(crate) json: bool,
    /// Remove the log of NAME, or without NAME the logs of every sandbox,
    /// instead of printing it.
    #[arg(long)]
    pub(crate) clear: bool,
}

/// `odek config …`.
#[derive(Subcommand, Debug)]
pub(crate) enum ConfigCmd {
    /// Show the settings actually applied, with their sources (SPEC §10.4).
    View(ViewArgs),
}

/// `odek config view`.
#[derive(Args, Debug)]
pub(crate) struct ViewArgs {
    #[command(flatten)]
    pub(crate) sandbox: SandboxFlags,
    /// Print JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

/// The subcommand word, skipping global flags (`-C DIR`, `--workdir[=]DIR`,
/// `-v`), so usage errors of `odek -C dir run …` also exit 125.
fn first_command(mut args: impl Iterator<Item = String>) -> Option<String> {
    while let Some(a) = args.next() {
        match a.as_str() {
            "-C" | "--workdir" => {
                args.next();
            }
            "-v" | "--verbose" => {}
            s if s.starts_with("--workdir=") || (s.starts_with("-C") && s.len() > 2) => {}
            s if s.starts_with('-') && s.chars().skip(1).all(|c| c == 'v') => {}
            _ => return Some(a),
        }
    }
    None
}

fn main() -> ExitCode {
    let is_run = first_command(std::env::args().skip(1)).as_deref() == Some("run");
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = e.exit_code();
            let _ = e.print();
            // `odek run --sandbox-compose shop redis-cli ping`: the command
            // must follow `--` (clap calls its first word unexpected).
            let takes_cmd = is_run || std::env::args().any(|a| a == "exec");
            if e.kind() == clap::error::ErrorKind::UnknownArgument && takes_cmd {
                errln!("odek: hint: put the command after `--`, e.g. `odek run [sandbox flags] -- redis-cli -h redis ping` or `odek sandbox exec NAME -- CMD …`");
            }
            return if code == 0 {
                ExitCode::SUCCESS
            } else if is_run {
                ExitCode::from(EXIT_REFUSED)
            } else {
                ExitCode::from(exit::USAGE)
            };
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            errln!("odek: error: cannot start the runtime: {e}");
            return ExitCode::from(EXIT_REFUSED);
        }
    };
    rt.block_on(commands::dispatch(cli))
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    fn help(cmd: &str) -> String {
        let mut odek = crate::Cli::command();
        odek.build();
        odek.find_subcommand_mut(cmd)
            .expect("the subcommand")
            .render_long_help()
            .to_string()
    }

    /// `odek mcp` forces the sandbox on: its help offers no way off (the
    /// flag stays hidden so that it is refused with a reason), and says what
    /// docs/MCP.md says of a SIGKILL — the engine removes the sandboxes by
    /// itself, gc is the backstop.
    #[test]
    fn mcp_help_hides_no_sandbox_and_agrees_with_mcp_md_on_sigkill() {
        let mcp = help("mcp");
        assert!(!mcp.contains("--no-sandbox"), "{mcp}");
        assert!(
            help("run").contains("--no-sandbox"),
            "control: run keeps it"
        );
        let flat = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
        let mcp = flat(&mcp);
        assert!(
            mcp.contains("after a SIGKILL of the server the engine removes them by itself"),
            "{mcp}"
        );
        assert!(
            mcp.contains("`odek sandbox gc` in the server's workdir (or --all) stays the backstop"),
            "{mcp}"
        );
        let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/MCP.md"))
            .expect("docs/MCP.md");
        let doc = flat(&doc);
        assert!(
            doc.contains("After a SIGKILL of the server the engine removes them by itself"),
            "docs/MCP.md no longer says what --help says"
        );
        assert!(doc.contains("`odek sandbox gc` in its workdir (or `--all`) stays the backstop"));
        // Hidden, not gone: it parses, and `odek mcp` refuses it.
        assert!(
            <crate::Cli as clap::Parser>::try_parse_from(["odek", "mcp", "--no-sandbox"]).is_ok()
        );
    }

    /// `odek sandbox up` and `odek approve` always mean a sandbox: their
    /// help does not offer `--no-sandbox` (hidden, so that it is still
    /// refused with a reason); `odek run` and `odek config view` keep it.
    #[test]
    fn up_and_approve_help_hide_no_sandbox() {
        let mut odek = crate::Cli::command();
        odek.build();
        let up = odek
            .find_subcommand_mut("sandbox")
            .and_then(|s| s.find_subcommand_mut("up"))
            .expect("sandbox up")
            .render_long_help()
            .to_string();
        assert!(!up.contains("--no-sandbox"), "{up}");
        assert!(
            up.contains("--sandbox-image"),
            "control: the other flags stay"
        );
        let approve = help("approve");
        assert!(!approve.contains("--no-sandbox"), "{approve}");
        assert!(
            help("run").contains("--no-sandbox"),
            "control: run keeps it"
        );
        for argv in [
            &["odek", "sandbox", "up", "--no-sandbox"][..],
            &["odek", "approve", "--no-sandbox"],
        ] {
            assert!(
                <crate::Cli as clap::Parser>::try_parse_from(argv).is_ok(),
                "{argv:?} must parse (and be refused with a reason)"
            );
        }
    }

    /// `odek approve --yes` parses and its help says what it does.
    #[test]
    fn approve_has_a_yes_flag() {
        let approve = help("approve");
        assert!(approve.contains("--yes"), "{approve}");
        let cli = <crate::Cli as clap::Parser>::try_parse_from(["odek", "approve", "--yes"])
            .expect("parses");
        match cli.command {
            crate::Cmd::Approve(a) => assert!(a.yes),
            other => panic!("{other:?}"),
        }
    }
}
