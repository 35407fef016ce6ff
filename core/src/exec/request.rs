//! What to run: the command, its env, timeout and workdir, as every front
//! end hands it to [`Client::exec`](crate::Client::exec), and the checks
//! made before anything runs.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::cancel::CancellationToken;
use crate::error::{Error, Result};

/// What to run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum Command {
    /// An argv, run as is (no shell).
    Argv(Vec<String>),
    /// A string run by `/bin/sh -c`.
    Shell(String),
}

impl Command {
    pub(crate) fn argv(&self) -> Vec<String> {
        match self {
            Command::Argv(v) => v.clone(),
            Command::Shell(s) => vec!["/bin/sh".into(), "-c".into(), s.clone()],
        }
    }
}

/// An exec request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecRequest {
    /// The command.
    pub command: Command,
    /// Extra `KEY=value` pairs for this command (values never logged).
    #[serde(default)]
    pub env: Vec<(String, String)>,
    /// Stop the command after this long: it and its descendants are sent
    /// SIGKILL and the outcome says `timed_out` (exit code 124). Through
    /// odek's supervisor the kill covers the command's process group,
    /// session and descendants and is confirmed from `/proc`
    /// (docs/SANDBOXING.md, "The supervisor"). Without it (the exec API)
    /// the kill needs `/bin/sh` and `cat` in the image and misses processes
    /// that cleared their environment; when it fails, a line on the
    /// command's stderr says so and the process keeps running until the
    /// sandbox is destroyed.
    #[serde(default, with = "opt_secs")]
    pub timeout: Option<Duration>,
    /// Working directory (default `/workspace`, or the host workdir).
    #[serde(default)]
    pub workdir: Option<String>,
}

/// How [`Client::exec`](crate::Client::exec) runs a request: what the
/// caller controls rather than sends, as [`crate::LaunchOptions`] are a
/// launch's.
#[derive(Clone, Debug, Default)]
pub struct ExecOptions {
    /// Stops the command when it fires (SPEC §10.1): the command and its
    /// descendants are killed the way a timeout kills them and the outcome
    /// says `cancelled` (exit code 130;
    /// [`ExecOutcome::cancelled_as_error`](super::ExecOutcome::cancelled_as_error)
    /// turns it into [`Error::Cancelled`] for callers that report a
    /// cancellation as an error). A token already cancelled when the call
    /// starts runs nothing: [`Error::Cancelled`]. `None`: not cancellable.
    pub cancel: Option<CancellationToken>,
    /// What the command is called in the sandbox's record
    /// ([`crate::audit::Record::tool`]): `None` is `"exec"`; `odek run`
    /// says `"run"`.
    pub tool: Option<&'static str>,
}

/// A terminal size in character cells (`cols` × `rows`), as a command's
/// pseudo-terminal gets it ([`ExecIo::tty`], [`ExecIo::resize`]).
pub use odek_supervisor::proto::WinSize;

/// A command's interactive side for
/// [`Client::exec_io`](crate::Client::exec_io): its stdin, and a
/// pseudo-terminal with its size (docs/SANDBOXING.md, "Stdin and a
/// terminal"). `ExecIo::default()` is what
/// [`Client::exec`](crate::Client::exec) uses: stdin `/dev/null`, no
/// terminal.
///
/// Why a separate argument and not members of [`ExecOptions`]: the options
/// are `Clone` and `Default` settings a caller keeps and reuses for many
/// commands, while a stdin stream is consumed by exactly one command (it
/// cannot be cloned, and sharing it behind an `Arc` would let two commands
/// race for the same bytes). One `ExecIo` is built for one call and moved
/// into it.
///
/// Needs odek's supervisor in the sandbox (the owner's session or a
/// relay): commands through the Docker exec API, and commands on the host
/// (fallback, `--no-sandbox`), refuse a non-default `ExecIo` before
/// anything runs.
#[derive(Default)]
pub struct ExecIo<'a> {
    /// The command's stdin: each item is written to it as it arrives; the
    /// stream's end closes it (with a terminal: an end-of-file character,
    /// Ctrl-D, is typed). `None`: stdin is `/dev/null` (with a terminal:
    /// nothing is typed).
    pub stdin: Option<futures_util::stream::BoxStream<'a, Vec<u8>>>,
    /// Run the command on a new pseudo-terminal of this initial size, as
    /// Docker's `-t`: its stdin, stdout and stderr are the terminal, and its
    /// output arrives as one stream,
    /// [`StreamKind::Stdout`](crate::engine::StreamKind::Stdout) (the
    /// terminal turns `\n` into `\r\n`). `None`: pipes.
    pub tty: Option<WinSize>,
    /// New sizes of the terminal while the command runs (ignored without
    /// [`ExecIo::tty`]). The stream may end before the command does.
    pub resize: Option<futures_util::stream::BoxStream<'a, WinSize>>,
}

impl ExecIo<'_> {
    /// True when nothing is asked beyond [`Client::exec`](crate::Client::exec):
    /// no stdin, no terminal, no resizes.
    pub fn is_plain(&self) -> bool {
        self.stdin.is_none() && self.tty.is_none() && self.resize.is_none()
    }
}

impl std::fmt::Debug for ExecIo<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecIo")
            .field("stdin", &self.stdin.is_some())
            .field("tty", &self.tty)
            .field("resize", &self.resize.is_some())
            .finish()
    }
}

/// A timeout given in seconds, as odek accepts it everywhere (CLI
/// `--timeout`, the C ABI's `timeout_secs`, [`ExecRequest`] JSON): finite,
/// positive and below 10^9 s. `None` for anything else.
pub fn timeout_from_secs(secs: f64) -> Option<Duration> {
    (secs.is_finite() && secs > 0.0 && secs < 1e9).then(|| Duration::from_secs_f64(secs))
}

mod opt_secs {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub(crate) fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_some(&d.as_secs_f64()),
            None => s.serialize_none(),
        }
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Duration>, D::Error> {
        let v: Option<f64> = Option::deserialize(d)?;
        match v {
            None => Ok(None),
            Some(s) => super::timeout_from_secs(s).map(Some).ok_or_else(|| {
                serde::de::Error::custom("timeout must be a positive number of seconds below 1e9")
            }),
        }
    }
}

impl ExecRequest {
    /// Checks the request without running anything (what
    /// [`Client::exec`](crate::Client::exec) checks first): a non-empty argv
    /// without NUL bytes, valid env keys (not the reserved
    /// [`EXEC_TAG_ENV`](super::EXEC_TAG_ENV)), values without NUL bytes.
    ///
    /// Errors: [`Error::Usage`] or [`Error::Config`] naming the problem.
    pub fn check(&self) -> Result<()> {
        validate(self)
    }
}

/// Most bytes of a command — its argv (or shell text) plus its env — any
/// front end runs: 256 KiB. Linux refuses one argument over 128 KiB anyway,
/// and more than this fails at the exec as "Argument list too long" (a
/// status 127 that reads as the command's own); a bigger script or data
/// belongs in a file under `/workspace`.
pub const MAX_COMMAND_BYTES: usize = 256 * 1024;

/// Most bytes of one argument (a shell command's text is one, the argument
/// of `sh -c`) or one env entry (`KEY=value`): Linux's `MAX_ARG_STRLEN`
/// (128 KiB, counting the terminating NUL) less that NUL. A longer one
/// fails at the exec with "Argument list too long" (E2BIG), so it is a
/// usage error before anything runs.
pub const MAX_ARG_BYTES: usize = 128 * 1024 - 1;

pub(super) fn validate(req: &ExecRequest) -> Result<()> {
    let size: usize = match &req.command {
        Command::Shell(s) => s.len(),
        Command::Argv(a) => a.iter().map(|x| x.len() + 1).sum(),
    } + req
        .env
        .iter()
        .map(|(k, v)| k.len() + v.len() + 2)
        .sum::<usize>();
    if size > MAX_COMMAND_BYTES {
        return Err(Error::Usage(format!(
            "the command and its env are {size} bytes; exec accepts at most {MAX_COMMAND_BYTES} (the kernel limits one argument to 128 KiB): write the script or data to a file under /workspace and run that instead"
        )));
    }
    let longest_arg = match &req.command {
        Command::Shell(s) => s.len(),
        Command::Argv(a) => a.iter().map(String::len).max().unwrap_or(0),
    };
    let longest_env = req.env.iter().map(|(k, v)| k.len() + v.len() + 1).max();
    if let Some((what, n)) = [("argument", Some(longest_arg)), ("env entry", longest_env)]
        .into_iter()
        .find_map(|(w, n)| n.filter(|n| *n > MAX_ARG_BYTES).map(|n| (w, n)))
    {
        return Err(Error::Usage(format!(
            "one {what} of the command is {n} bytes; the kernel passes at most {MAX_ARG_BYTES} bytes in one argument or env entry (a shell command's text is one): write the script or data to a file under /workspace (the MCP tool write_file) and run that instead"
        )));
    }
    let argv = req.command.argv();
    if argv.is_empty() || argv[0].is_empty() {
        return Err(Error::Usage(
            "exec needs a command (the argv was empty, or its first element was the empty string)"
                .into(),
        ));
    }
    if argv.iter().any(|a| a.contains('\0')) {
        return Err(Error::Usage(
            "exec arguments must not contain NUL bytes".into(),
        ));
    }
    for (k, v) in &req.env {
        // Also refuses the reserved EXEC_TAG_ENV.
        crate::config::validate_env_key_as(
            "the command's env (-e, or env in an exec request)",
            "env",
            k,
        )
        .map_err(Error::Config)?;
        if v.contains('\0') {
            return Err(Error::Usage(format!(
                "the command's env (-e, or env in an exec request): {k} contains a NUL byte"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sized(shell: usize, env: usize) -> ExecRequest {
        ExecRequest {
            command: Command::Shell("x".repeat(shell)),
            env: vec![("A".into(), "y".repeat(env))],
            timeout: None,
            workdir: None,
        }
    }

    /// One size rule for every front end (the CLI, MCP, the C ABI): argv
    /// or shell text plus env over [`MAX_COMMAND_BYTES`] is a usage error
    /// before anything runs — three 100 KB env values as well as one big
    /// script — and just under it passes.
    #[test]
    fn a_command_and_env_over_256_kib_is_a_usage_error() {
        let e = validate(&sized(100, MAX_COMMAND_BYTES)).expect_err("env too big");
        assert_eq!(e.reported_class(), crate::ErrorClass::Usage);
        assert!(e.to_string().contains("at most 262144"), "{e}");
        validate(&sized(MAX_COMMAND_BYTES + 1, 0)).expect_err("script too big");
        let three = ExecRequest {
            command: Command::Argv(vec!["true".into()]),
            env: (0..3)
                .map(|i| (format!("V{i}"), "z".repeat(100_000)))
                .collect(),
            timeout: None,
            workdir: None,
        };
        validate(&three).expect_err("three 100 KB values");
        // Two arguments of 128 KiB less a little, and a short env: exactly
        // the cap passes (each argument plus its separator, "A=" + value).
        let half = (MAX_COMMAND_BYTES - 2 - 3 - 10) / 2;
        let at_cap = ExecRequest {
            command: Command::Argv(vec!["x".repeat(half), "x".repeat(half)]),
            env: vec![("A".into(), "y".repeat(10))],
            timeout: None,
            workdir: None,
        };
        validate(&at_cap).expect("at the cap");
    }

    /// One argument or env entry over the kernel's 128 KiB (MAX_ARG_STRLEN)
    /// is a usage error naming the fix, though the whole is under 256 KiB
    /// (a review's 200 KiB heredoc through MCP came back as exit 127);
    /// exactly at the limit passes.
    #[test]
    fn one_argument_over_128_kib_is_a_usage_error() {
        let e = validate(&sized(MAX_ARG_BYTES + 1, 0)).expect_err("shell text too long");
        assert_eq!(e.reported_class(), crate::ErrorClass::Usage);
        assert!(
            e.to_string().contains("one argument") && e.to_string().contains("write_file"),
            "{e}"
        );
        validate(&sized(MAX_ARG_BYTES, 0)).expect("at the limit");
        let e = validate(&sized(10, MAX_ARG_BYTES)).expect_err("env entry too long");
        assert!(e.to_string().contains("one env entry"), "{e}");
        validate(&sized(10, MAX_ARG_BYTES - 2)).expect("env entry at the limit");
    }
}
