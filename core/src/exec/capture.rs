//! Bounded capture of a command's output (SPEC §10.1 exec), for the front
//! ends that return it whole once the command ends instead of streaming it:
//! the C ABI's `odek_exec`, `odek sandbox exec --json` and MCP's `exec`.
//! Each keeps a bounded part of stdout and of stderr under one policy
//! ([`Keep`]) and says when bytes were dropped; [`crate::api::ExecResult::new`]
//! turns the capture and the [`super::ExecOutcome`] into the result.

use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};

use crate::engine::StreamKind;

/// Which bytes of a stream longer than its limit a [`Capture`] keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keep {
    /// The first `limit` bytes. The rest is dropped without a note in the
    /// text; the stream is marked truncated. The C ABI's exec result and
    /// `odek sandbox exec --json` ([`crate::api::EXEC_OUTPUT_LIMIT`]).
    Head,
    /// The first and the last `limit / 2` bytes (a program's last lines
    /// say how it ended). When bytes were dropped, the line
    /// `\n[odek: N bytes cut here]\n` stands between the two, N the number
    /// of bytes dropped, and the stream is marked truncated. MCP's `exec`.
    HeadAndTail,
}

/// The note put where [`Keep::HeadAndTail`] dropped `dropped` bytes.
fn cut_note(dropped: u64) -> String {
    format!("\n[odek: {dropped} bytes cut here]\n")
}

/// One stream's kept bytes.
#[derive(Debug, Default)]
struct Stream {
    head: Vec<u8>,
    /// Only under [`Keep::HeadAndTail`]: the last bytes seen after the head.
    tail: VecDeque<u8>,
    dropped: u64,
}

impl Stream {
    fn push(&mut self, keep: Keep, limit: usize, bytes: &[u8]) {
        let head_room = match keep {
            Keep::Head => limit,
            Keep::HeadAndTail => limit / 2,
        };
        let room = head_room.saturating_sub(self.head.len());
        let (head, rest) = bytes.split_at(room.min(bytes.len()));
        self.head.extend_from_slice(head);
        match keep {
            Keep::Head => self.dropped += rest.len() as u64,
            Keep::HeadAndTail => {
                let half = limit / 2;
                if rest.len() >= half {
                    // The chunk alone fills the tail.
                    self.dropped += (self.tail.len() + rest.len() - half) as u64;
                    self.tail.clear();
                    self.tail.extend(&rest[rest.len() - half..]);
                } else {
                    self.tail.extend(rest);
                    let over = self.tail.len().saturating_sub(half);
                    self.tail.drain(..over);
                    self.dropped += over as u64;
                }
            }
        }
    }

    /// The kept text (UTF-8, invalid bytes replaced) and whether bytes were
    /// dropped.
    fn finish(self, keep: Keep) -> (String, bool) {
        let mut bytes = self.head;
        if keep == Keep::HeadAndTail && self.dropped > 0 {
            bytes.extend_from_slice(cut_note(self.dropped).as_bytes());
        }
        bytes.extend(self.tail);
        (
            String::from_utf8_lossy(&bytes).into_owned(),
            self.dropped > 0,
        )
    }
}

/// Stdout and stderr of one command, each kept under the same policy and
/// limit. [`Capture::write`] is the exec's output sink:
/// `client.exec(&sandbox, &req, &opts, &|kind, bytes| capture.write(kind, bytes))`.
#[derive(Debug)]
pub struct Capture {
    keep: Keep,
    limit: usize,
    /// Stdout, stderr.
    streams: Mutex<(Stream, Stream)>,
}

/// What a [`Capture`] kept, as text: UTF-8 with invalid bytes replaced
/// (U+FFFD), the truncation note of [`Keep::HeadAndTail`] included.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Captured {
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
    /// Bytes of stdout were dropped.
    pub stdout_truncated: bool,
    /// Bytes of stderr were dropped.
    pub stderr_truncated: bool,
}

impl Capture {
    /// A capture keeping at most `limit` bytes of each stream (plus, under
    /// [`Keep::HeadAndTail`], the note), chosen by `keep`.
    pub fn new(keep: Keep, limit: usize) -> Capture {
        Capture {
            keep,
            limit,
            streams: Mutex::new((Stream::default(), Stream::default())),
        }
    }

    /// Adds a chunk of the command's output (an exec's
    /// [`crate::engine::OutputSink`]).
    pub fn write(&self, kind: StreamKind, bytes: &[u8]) {
        let mut s = self.streams.lock().unwrap_or_else(PoisonError::into_inner);
        let stream = match kind {
            StreamKind::Stdout => &mut s.0,
            StreamKind::Stderr => &mut s.1,
        };
        stream.push(self.keep, self.limit, bytes);
    }

    /// What was kept of both streams.
    pub fn finish(self) -> Captured {
        let (o, e) = self
            .streams
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        let (stdout, stdout_truncated) = o.finish(self.keep);
        let (stderr, stderr_truncated) = e.finish(self.keep);
        Captured {
            stdout,
            stderr,
            stdout_truncated,
            stderr_truncated,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use StreamKind::{Stderr, Stdout};

    fn captured(keep: Keep, limit: usize, chunks: &[&[u8]]) -> (String, bool) {
        let c = Capture::new(keep, limit);
        for chunk in chunks {
            c.write(Stdout, chunk);
        }
        let out = c.finish();
        (out.stdout, out.stdout_truncated)
    }

    #[test]
    fn output_within_the_limit_is_kept_whole_under_both_policies() {
        for keep in [Keep::Head, Keep::HeadAndTail] {
            let c = Capture::new(keep, 8);
            c.write(Stdout, b"abc");
            c.write(Stderr, b"x");
            c.write(Stdout, b"de");
            assert_eq!(
                c.finish(),
                Captured {
                    stdout: "abcde".into(),
                    stderr: "x".into(),
                    stdout_truncated: false,
                    stderr_truncated: false,
                },
                "{keep:?}"
            );
            // Exactly the limit: nothing dropped, no note.
            assert_eq!(
                captured(keep, 8, &[b"0123", b"4567"]),
                ("01234567".into(), false),
                "{keep:?}"
            );
        }
    }

    #[test]
    fn head_keeps_the_first_limit_bytes_and_says_nothing_in_the_text() {
        assert_eq!(
            captured(Keep::Head, 8, &[b"0123", b"456", b"789abcdef"]),
            ("01234567".into(), true)
        );
        // One byte over is truncated; an empty write after the limit is not.
        assert_eq!(
            captured(Keep::Head, 4, &[b"0123", b""]),
            ("0123".into(), false)
        );
        assert_eq!(
            captured(Keep::Head, 4, &[b"0123", b"4"]),
            ("0123".into(), true)
        );
        assert_eq!(captured(Keep::Head, 0, &[b"x"]), (String::new(), true));
    }

    #[test]
    fn head_and_tail_keep_both_halves_with_the_exact_note() {
        assert_eq!(
            captured(Keep::HeadAndTail, 8, &[b"0123", b"456", b"789abcdef"]),
            ("0123\n[odek: 8 bytes cut here]\ncdef".into(), true)
        );
        // One byte over the limit.
        assert_eq!(
            captured(Keep::HeadAndTail, 8, &[b"012345678"]),
            ("0123\n[odek: 1 bytes cut here]\n5678".into(), true)
        );
        // An odd limit keeps twice its half.
        assert_eq!(
            captured(Keep::HeadAndTail, 5, &[b"abcde"]),
            ("ab\n[odek: 1 bytes cut here]\nde".into(), true)
        );
    }

    #[test]
    fn head_and_tail_give_the_same_text_whatever_the_chunks() {
        let data: Vec<u8> = (0..100u8).collect();
        let whole = captured(Keep::HeadAndTail, 10, &[&data]);
        let bytes: Vec<&[u8]> = data.iter().map(std::slice::from_ref).collect();
        assert_eq!(captured(Keep::HeadAndTail, 10, &bytes), whole);
        let (a, b) = data.split_at(97);
        assert_eq!(captured(Keep::HeadAndTail, 10, &[a, b]), whole);
        let mut want = vec![0, 1, 2, 3, 4];
        want.extend_from_slice(b"\n[odek: 90 bytes cut here]\n");
        want.extend_from_slice(&[95, 96, 97, 98, 99]);
        assert_eq!(whole, (String::from_utf8(want).expect("ASCII"), true));
    }

    #[test]
    fn the_streams_are_capped_apart() {
        let c = Capture::new(Keep::Head, 2);
        c.write(Stderr, b"eee");
        c.write(Stdout, b"oo");
        let out = c.finish();
        assert_eq!((out.stdout.as_str(), out.stdout_truncated), ("oo", false));
        assert_eq!((out.stderr.as_str(), out.stderr_truncated), ("ee", true));
    }

    #[test]
    fn invalid_utf8_is_replaced() {
        assert_eq!(
            captured(Keep::Head, 8, &[b"a\xffb"]),
            ("a\u{fffd}b".into(), false)
        );
        // A character cut at the limit is replaced, not dropped silently.
        assert_eq!(
            captured(Keep::Head, 2, &["aé".as_bytes()]),
            ("a\u{fffd}".into(), true)
        );
    }
}
