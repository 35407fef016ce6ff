//! The exit statuses of `odek run` and `odek sandbox exec` (SPEC §6.1,
//! docs/CLI.md "Exit status"): one table, from which the commands'
//! `--help`, README's table and docs/CLI.md's table are all generated (a
//! test fails when a document's generated block differs; run it with
//! `UPDATE_DOCS=1` to rewrite the blocks).

/// `--timeout` elapsed (core's exec outcome carries it; listed here for
/// the table's test).
#[cfg_attr(not(test), allow(dead_code))]
pub const TIMEOUT: u8 = 124;
/// odek refused (nothing ran), and usage errors of `odek run`.
pub const REFUSED: u8 = 125;
/// odek itself failed (a panic); the sandbox was removed first.
pub const PANIC: u8 = 101;
/// The sandbox was killed or stopped under the command.
pub const KILLED: u8 = 137;
/// The daemon, or odek's supervisor's server, was lost after the command
/// started: its status is unknown.
pub const LOST: u8 = 255;
/// A usage error of every command but `odek run`.
pub const USAGE: u8 = 2;
/// Any other command's failure.
pub const FAILED: u8 = 1;

/// One row of the table (the markdown columns are read by the documents'
/// test, which writes and checks README's and docs/CLI.md's blocks).
#[cfg_attr(not(test), allow(dead_code))]
pub struct Row {
    /// The status column: `"124"`, `"129 / 130 / 131 / 143"`.
    pub status: &'static str,
    /// The phrase in `--help` (with the status in it).
    pub help: &'static str,
    /// README's meaning column (markdown).
    pub short: &'static str,
    /// docs/CLI.md's meaning column (markdown); `{CREATE_SETTLE}` stands
    /// for the core's constant (`odek_core::inventory::create_settle_text`).
    pub long: &'static str,
}

/// Every status `odek run` and `odek sandbox exec` end with, in the order
/// the documents list them.
pub const TABLE: &[Row] = &[
    Row {
        status: "the command's own",
        help: "the command's own status",
        short: "the sandbox ran the command (0–255 passed through; a command not found gives 127 and one not executable 126, as in a shell, with odek's one line on stderr)",
        long: "it ran to the end (0–255 passed through, a 137 of its own too)",
    },
    Row {
        status: "124",
        help: "124 after --timeout",
        short: "`--timeout` elapsed",
        long: "`--timeout` elapsed: the command is killed with its whole tree — through odek's supervisor its process group, session and descendants, confirmed from the kernel; without it every process carrying the command's `ODEK_EXEC_ID` tag (the command and the descendants that kept it), stopped, then killed with SIGKILL — and odek says \"was killed\" only once none is left ([SANDBOXING.md](SANDBOXING.md#timeouts-and-signals)); `run` then removes the sandbox",
    },
    Row {
        status: "125",
        help: "125 when odek refused (nothing ran)",
        short: "odek refused to set the sandbox up (config, approval, Docker refused, daemon unreachable in explicit mode, …): nothing ran",
        long: "odek refused: bad `-e` or `--timeout`, `-t` without a terminal on stdin, `-i`/`-t` in a sandbox without odek's supervisor, config, approval missing or denied, Docker refused the setup, daemon unreachable where no fallback is allowed, no such sandbox … — **nothing ran**",
    },
    Row {
        status: "129 / 130 / 131 / 143",
        help: "130/143/129/131 after SIGINT/SIGTERM/SIGHUP/SIGQUIT (`run` removes the sandbox, `sandbox exec` kills the command and leaves the sandbox up)",
        short: "interrupted by SIGHUP / SIGINT / SIGQUIT / SIGTERM; the sandbox was removed",
        long: "odek got SIGHUP / SIGINT / SIGQUIT / SIGTERM. `odek run` removes the sandbox first (a create still in flight is waited for up to {CREATE_SETTLE}; what is left is for `odek sandbox gc`); `odek sandbox exec` kills the command as a timeout does and leaves the sandbox up; a command on the host (fallback, `--no-sandbox`) is killed with its process group",
    },
    Row {
        status: "101",
        help: "101 when odek itself failed (a bug; the sandbox is removed)",
        short: "odek itself failed (a bug); the sandbox was removed",
        long: "odek itself failed (a bug; the panic message is on stderr, please report it): the sandbox is removed as after a signal, and the command may have partly run",
    },
    Row {
        status: "137",
        help: "137 when the sandbox was killed under the command",
        short: "the sandbox was killed or stopped while the command ran (e.g. `docker kill`)",
        long: "the sandbox was killed or stopped while the command ran (`docker kill`, `docker stop`, out of memory); stderr says so. The command may have partly run and is not retried",
    },
    Row {
        status: "255",
        help: "255 when the daemon or odek's supervisor was lost while it ran (it may have partly run)",
        short: "the Docker daemon, or the sandbox's supervisor, was lost after the command started: its status is unknown",
        long: "the Docker daemon was lost after the command started, or odek's supervisor in the sandbox restarted while it ran ([SANDBOXING.md](SANDBOXING.md#a-server-that-dies): the command's processes are killed and the next command runs): it may have partly run, its status is unknown. Both commands map exec failures the same way: Docker refusing the exec is 125 (nothing ran); an exec that ended without a status is 255. A command that does not start exits as in a shell — 127 when its program is not found (or its working directory does not exist, or it is a script whose `#!` interpreter is missing), 126 when it is not executable — with one line from odek on stderr, the same whether it runs through odek's supervisor, through Docker's exec API or on the host (fallback, `--no-sandbox`): ``odek: cannot run `no-such-tool` in sandbox odek-…: command not found; nothing ran`` (the runtime's own `OCI runtime exec failed …` text is not passed on)",
    },
];

/// The `--help` sentence: `"{lead}: the command's own status; 124 after
/// --timeout; …."`.
pub fn help(lead: &str) -> String {
    let rows: Vec<&str> = TABLE.iter().map(|r| r.help).collect();
    format!("{lead}: {}.", rows.join("; "))
}

#[cfg_attr(not(test), allow(dead_code))]
/// A markdown table of the statuses with README's (`long == false`) or
/// docs/CLI.md's meanings.
pub fn markdown(long: bool) -> String {
    let mut out = String::from("| status | meaning |\n|---|---|\n");
    for r in TABLE {
        let meaning = if long {
            r.long.replace(
                "{CREATE_SETTLE}",
                &odek_core::inventory::create_settle_text(),
            )
        } else {
            r.short.to_string()
        };
        out.push_str(&format!("| {} | {meaning} |\n", r.status));
    }
    if long {
        out.push_str(&format!(
            "\nA usage error (an unknown flag, `--sandbox --no-sandbox`) exits {REFUSED} for\n`odek run` and {USAGE} for every other command; other commands exit 0 on success and\n{FAILED} on failure.\n"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEGIN: &str = "<!-- BEGIN exit-status: generated from cli/src/exit.rs -->\n";
    const END: &str = "<!-- END exit-status -->";

    /// The statuses in the table are the constants the code exits with.
    #[test]
    fn the_table_names_every_status_the_code_uses() {
        let statuses: String = TABLE.iter().map(|r| format!("{} ", r.status)).collect();
        for code in [TIMEOUT, REFUSED, PANIC, KILLED, LOST, 129, 130, 131, 143] {
            assert!(
                statuses.split([' ', '/']).any(|s| s == code.to_string()),
                "{code} is not in the table"
            );
        }
    }

    /// README and docs/CLI.md carry the generated tables, byte for byte.
    #[test]
    fn the_documents_carry_the_generated_table() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("workspace root")
            .to_path_buf();
        for (file, long) in [("README.md", false), ("docs/CLI.md", true)] {
            let path = root.join(file);
            let text = std::fs::read_to_string(&path).expect("read");
            let (head, rest) = text
                .split_once(BEGIN)
                .unwrap_or_else(|| panic!("{file}: no {BEGIN:?}"));
            let (block, tail) = rest
                .split_once(END)
                .unwrap_or_else(|| panic!("{file}: no {END:?}"));
            let want = markdown(long);
            if block != want {
                if std::env::var_os("UPDATE_DOCS").is_some() {
                    std::fs::write(&path, format!("{head}{BEGIN}{want}{END}{tail}"))
                        .expect("write");
                } else {
                    panic!("{file}: the exit-status table differs from cli/src/exit.rs; run `UPDATE_DOCS=1 cargo test -p odek-cli exit` to rewrite it");
                }
            }
        }
    }
}
