//! odek's own lines on stderr, for every front end that writes there (the
//! CLI, `odek mcp`): [`errln!`](crate::errln) and [`StderrReporter`]. Each
//! line passes through [`text::terminal`], the last guard of every front
//! end's writer (foreign text was made one line by [`text::foreign`] where
//! it entered).
//!
//! A line that cannot be written (stderr closed or full: `2>/dev/full`,
//! `2>&1 | head -1`) is dropped and odek goes on, so every exit path still
//! removes what it created; a panic there would skip that (SPEC §6.1).

use std::io::Write;

use crate::resolve::Reporter;
use crate::text;
use crate::warning::Warning;

/// `eprintln!` that never panics on a closed or full stderr: the line (a
/// `format!`) passes through [`text::terminal`] and is dropped when it
/// cannot be written ([`crate::stderr`]). With no argument, an empty line.
#[macro_export]
macro_rules! errln {
    () => {{
        let _ = $crate::stderr::line("");
    }};
    ($($t:tt)*) => {{
        let _ = $crate::stderr::line(&format!($($t)*));
    }};
}

/// Writes `text` and a newline to stderr through [`text::terminal`];
/// false when it could not be written.
pub fn line(text: &str) -> bool {
    writeln!(std::io::stderr().lock(), "{}", text::terminal(text)).is_ok()
}

/// Prints warnings and progress (pulls, builds) to stderr as core renders
/// them for a terminal ([`text::warning_lines`], [`text::progress_line`]:
/// each line prefixed `odek: `, foreign text escaped). MCP clients log a
/// server's stderr; the CLI's user reads it.
#[derive(Clone, Copy, Debug, Default)]
pub struct StderrReporter;

impl Reporter for StderrReporter {
    fn warning(&self, w: &Warning) {
        let mut err = std::io::stderr().lock();
        for l in text::warning_lines(&w.message) {
            let _ = writeln!(err, "{}", text::terminal(&l));
        }
    }

    fn progress(&self, l: &str) {
        line(&text::progress_line(l));
    }
}
