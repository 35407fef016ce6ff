//! Terminal output: warnings, progress and errors on stderr.

use std::io::Write;

use odek_core::engine::StreamKind;
use odek_core::{text, Error};

/// Prints warnings and progress (pulls, builds) to stderr: core's
/// reporter, as `odek mcp`'s.
pub use odek_core::stderr::StderrReporter as Stderr;

/// Prints an odek error as one paragraph with its failure class.
pub fn print_error(e: &Error) {
    errln!("odek: error ({}): {e}", e.reported_class());
}

/// Prints any other error.
pub fn print_anyhow(e: &anyhow::Error) {
    match e.downcast_ref::<Error>() {
        Some(oe) => print_error(oe),
        None => errln!("odek: error: {e:#}"),
    }
}

/// True when what odek writes to stderr reaches nobody: stderr is a
/// character device that is not a terminal — `/dev/null` (redirected
/// there, or closed when odek started: the Rust runtime reopens a closed
/// standard stream as `/dev/null`), `/dev/zero`, `/dev/random`, … — which
/// takes every write and shows it to no one. A terminal, a file, a pipe or
/// a socket has a reader (or keeps the text).
pub fn stderr_is_null() -> bool {
    use std::io::IsTerminal;
    use std::os::unix::fs::FileTypeExt;
    let Ok(err) = std::fs::metadata("/proc/self/fd/2") else {
        return false;
    };
    err.file_type().is_char_device() && !std::io::stderr().is_terminal()
}

/// Writes `line` and a newline to stderr (through
/// `odek_core::text::terminal`, as `errln!`); false when it could not be
/// written (stderr closed or full), for lines that must be seen before
/// odek goes on.
pub fn say(line: &str) -> bool {
    odek_core::stderr::line(line)
}

/// Writes `line` and a newline to stdout (through
/// `odek_core::text::terminal`) and flushes it. Errors: stdout closed or
/// full — the reader did not get it.
pub fn print_line(line: &str) -> std::io::Result<()> {
    let mut o = std::io::stdout().lock();
    writeln!(o, "{}", text::terminal(line))?;
    o.flush()
}

/// Writes exec output straight through: the command's own bytes, as
/// `docker run` passes them (odek did not write them and does not speak
/// for them; nothing odek says goes this way).
pub fn sink(kind: StreamKind, bytes: &[u8]) {
    match kind {
        StreamKind::Stdout => {
            let mut o = std::io::stdout().lock();
            let _ = o.write_all(bytes);
            let _ = o.flush();
        }
        StreamKind::Stderr => {
            let mut e = std::io::stderr().lock();
            let _ = e.write_all(bytes);
            let _ = e.flush();
        }
    }
}
