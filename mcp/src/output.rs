//! A command's output as progress notifications (docs/MCP.md, `exec`):
//! when the `exec` call carried a progress token, each line the command
//! writes goes to the client as `notifications/progress` while it runs;
//! the tool's result still carries the output at the end.
//!
//! The exec's output sink is synchronous and must not wait, so lines are
//! queued (at most [`QUEUE`]) and a task sends them; a line that finds the
//! queue full is not sent as a notification (it is in the result), and the
//! next notification says how many were skipped.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use odek_core::engine::StreamKind;
use tokio::sync::mpsc;

/// Lines waiting to be sent; past this, lines are skipped (and counted).
pub(crate) const QUEUE: usize = 256;

/// Longest line sent, in bytes of output: a longer one is sent in pieces
/// of this size (each its own notification).
pub(crate) const MAX_LINE: usize = 4096;

/// What a stderr line's message starts with (stdout lines have no prefix).
pub(crate) const STDERR_PREFIX: &str = "stderr | ";

/// Splits a command's output into lines and queues them as messages.
#[derive(Debug)]
pub(crate) struct Lines {
    tx: Mutex<Option<mpsc::Sender<String>>>,
    /// The unfinished line of stdout and of stderr.
    partial: Mutex<(Vec<u8>, Vec<u8>)>,
    skipped: Arc<AtomicU64>,
}

/// The receiving end: what the sending task reads.
#[derive(Debug)]
pub(crate) struct Queued {
    pub(crate) rx: mpsc::Receiver<String>,
    /// Lines skipped since the last note (the queue was full).
    pub(crate) skipped: Arc<AtomicU64>,
}

impl Lines {
    /// A splitter and the queue it fills.
    pub(crate) fn new() -> (Lines, Queued) {
        let (tx, rx) = mpsc::channel(QUEUE);
        let skipped = Arc::new(AtomicU64::new(0));
        (
            Lines {
                tx: Mutex::new(Some(tx)),
                partial: Mutex::new((Vec::new(), Vec::new())),
                skipped: skipped.clone(),
            },
            Queued { rx, skipped },
        )
    }

    /// Adds a chunk of output (the exec's output sink): every line it
    /// completes is queued.
    pub(crate) fn write(&self, kind: StreamKind, bytes: &[u8]) {
        let mut partial = self.partial.lock().unwrap_or_else(PoisonError::into_inner);
        let buf = match kind {
            StreamKind::Stdout => &mut partial.0,
            StreamKind::Stderr => &mut partial.1,
        };
        for piece in bytes.split_inclusive(|b| *b == b'\n') {
            match piece.strip_suffix(b"\n") {
                Some(end) => {
                    buf.extend_from_slice(end);
                    let line = std::mem::take(buf);
                    self.send(kind, &line);
                }
                None => buf.extend_from_slice(piece),
            }
            while buf.len() >= MAX_LINE {
                let rest = buf.split_off(MAX_LINE);
                let line = std::mem::replace(buf, rest);
                self.send(kind, &line);
            }
        }
    }

    /// The command ended: queues the last unfinished lines and closes the
    /// queue, so the sending task ends once it has sent what is queued.
    pub(crate) fn finish(&self) {
        let (out, err) =
            std::mem::take(&mut *self.partial.lock().unwrap_or_else(PoisonError::into_inner));
        if !out.is_empty() {
            self.send(StreamKind::Stdout, &out);
        }
        if !err.is_empty() {
            self.send(StreamKind::Stderr, &err);
        }
        self.tx
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
    }

    fn send(&self, kind: StreamKind, line: &[u8]) {
        let text = String::from_utf8_lossy(line);
        let text = text.strip_suffix('\r').unwrap_or(&text);
        // One line, every control character escaped, as every line this
        // server sends (the result keeps the exact output).
        let shown = odek_core::text::foreign(text);
        let message = match kind {
            StreamKind::Stdout => shown.into_owned(),
            StreamKind::Stderr => format!("{STDERR_PREFIX}{shown}"),
        };
        let tx = self.tx.lock().unwrap_or_else(PoisonError::into_inner);
        let sent = tx.as_ref().is_some_and(|t| t.try_send(message).is_ok());
        if !sent {
            self.skipped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The note sent after `n` lines were skipped.
pub(crate) fn skipped_note(n: u64) -> String {
    format!("[odek: {n} lines of output were not sent as progress (they came faster than the client read them); the result carries the output]")
}

#[cfg(test)]
mod tests {
    use super::*;
    use StreamKind::{Stderr, Stdout};

    fn drain(q: &mut Queued) -> Vec<String> {
        let mut out = vec![];
        while let Ok(m) = q.rx.try_recv() {
            out.push(m);
        }
        out
    }

    #[test]
    fn lines_are_split_across_chunks_and_streams_kept_apart() {
        let (l, mut q) = Lines::new();
        l.write(Stdout, b"a");
        l.write(Stderr, b"oops\r\n");
        l.write(Stdout, b"b\nc\n\nd");
        assert_eq!(drain(&mut q), ["stderr | oops", "ab", "c", ""]);
        l.finish();
        assert_eq!(drain(&mut q), ["d"]);
        // closed: the receiver sees the end
        assert!(matches!(
            q.rx.try_recv(),
            Err(mpsc::error::TryRecvError::Disconnected)
        ));
    }

    #[test]
    fn controls_are_escaped_and_long_lines_cut_in_pieces() {
        let (l, mut q) = Lines::new();
        l.write(Stdout, b"\x1b]0;pwned\x07x\n");
        let long = vec![b'x'; MAX_LINE * 2 + 3];
        l.write(Stdout, &long);
        l.finish();
        let got = drain(&mut q);
        assert_eq!(got[0], "\\x1b]0;pwned\\x07x");
        assert_eq!(got[1].len(), MAX_LINE);
        assert_eq!(got[2].len(), MAX_LINE);
        assert_eq!(got[3], "xxx");
        assert_eq!(got.len(), 4);
    }

    #[test]
    fn a_full_queue_skips_lines_and_counts_them() {
        let (l, mut q) = Lines::new();
        for _ in 0..QUEUE + 5 {
            l.write(Stdout, b"y\n");
        }
        assert_eq!(q.skipped.load(Ordering::Relaxed), 5);
        assert_eq!(drain(&mut q).len(), QUEUE);
    }
}
