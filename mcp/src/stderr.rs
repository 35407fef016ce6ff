//! `odek mcp`'s stderr reporter: core's, with each warning printed once.

use std::collections::HashSet;
use std::sync::{Mutex, PoisonError};

use odek_core::{Reporter, Warning};

/// Prints warnings and progress to stderr (MCP clients log a server's
/// stderr) through core's reporter, as the CLI does — but a warning whose
/// text was printed already by this process is not printed again. The
/// server resolves the same settings at startup (the environment its
/// instructions describe) and at each launch, so without this every
/// warning (e.g. "network X is not internal") would repeat per sandbox.
/// Progress lines are printed every time.
#[derive(Clone, Copy, Debug, Default)]
pub struct StderrReporter;

/// The warning texts printed so far by this process.
static SHOWN: Mutex<Option<HashSet<String>>> = Mutex::new(None);

/// Whether `message` is printed for the first time (and records it).
fn first_time(message: &str) -> bool {
    let mut shown = SHOWN.lock().unwrap_or_else(PoisonError::into_inner);
    shown
        .get_or_insert_with(HashSet::new)
        .insert(message.to_string())
}

impl Reporter for StderrReporter {
    fn warning(&self, w: &Warning) {
        if first_time(&w.message) {
            odek_core::stderr::StderrReporter.warning(w);
        }
    }

    fn progress(&self, line: &str) {
        odek_core::stderr::StderrReporter.progress(line);
    }
}

#[cfg(test)]
mod tests {
    use super::first_time;

    #[test]
    fn a_warning_text_is_first_once() {
        let text = "network t_default is not internal (a test of first_time)";
        assert!(first_time(text));
        assert!(!first_time(text));
        assert!(first_time("another text (a test of first_time)"));
    }
}
