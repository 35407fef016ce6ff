//! Bounded capture of a command's output: the head and the tail of each
//! stream are kept, the middle is counted and cut.

use std::collections::VecDeque;
use std::sync::Mutex;

use odek_core::engine::StreamKind;

/// One stream's bounded buffer.
#[derive(Debug)]
struct Bounded {
    half: usize,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    dropped: u64,
}

impl Bounded {
    fn new(limit: usize) -> Bounded {
        Bounded {
            half: limit / 2,
            head: Vec::new(),
            tail: VecDeque::new(),
            dropped: 0,
        }
    }

    fn push(&mut self, mut bytes: &[u8]) {
        let room = self.half.saturating_sub(self.head.len());
        let (h, rest) = bytes.split_at(room.min(bytes.len()));
        self.head.extend_from_slice(h);
        bytes = rest;
        if bytes.len() >= self.half {
            self.dropped += (self.tail.len() + bytes.len() - self.half) as u64;
            self.tail.clear();
            self.tail.extend(&bytes[bytes.len() - self.half..]);
            return;
        }
        self.tail.extend(bytes);
        while self.tail.len() > self.half {
            self.tail.pop_front();
            self.dropped += 1;
        }
    }

    fn finish(self) -> (String, bool) {
        let mut out = self.head;
        if self.dropped > 0 {
            out.extend_from_slice(
                format!("\n[odek: {} bytes cut here]\n", self.dropped).as_bytes(),
            );
        }
        out.extend(self.tail);
        (String::from_utf8_lossy(&out).into_owned(), self.dropped > 0)
    }
}

/// Stdout and stderr of one command, each bounded to `limit` bytes.
#[derive(Debug)]
pub(crate) struct Capture {
    streams: Mutex<(Bounded, Bounded)>,
}

impl Capture {
    /// A capture keeping at most `limit` bytes of each stream.
    pub(crate) fn new(limit: usize) -> Capture {
        Capture {
            streams: Mutex::new((Bounded::new(limit), Bounded::new(limit))),
        }
    }

    /// The sink the core's exec writes to.
    pub(crate) fn write(&self, kind: StreamKind, bytes: &[u8]) {
        let mut s = self
            .streams
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match kind {
            StreamKind::Stdout => s.0.push(bytes),
            StreamKind::Stderr => s.1.push(bytes),
        }
    }

    /// `(stdout, stdout_truncated, stderr, stderr_truncated)`.
    pub(crate) fn finish(self) -> (String, bool, String, bool) {
        let (o, e) = self
            .streams
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (o, ot) = o.finish();
        let (e, et) = e.finish();
        (o, ot, e, et)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_output_is_kept_whole() {
        let c = Capture::new(8);
        c.write(StreamKind::Stdout, b"abc");
        c.write(StreamKind::Stderr, b"x");
        assert_eq!(c.finish(), ("abc".into(), false, "x".into(), false));
    }

    #[test]
    fn long_output_keeps_head_and_tail() {
        let c = Capture::new(8);
        for chunk in [&b"0123"[..], b"456", b"789abcdef"] {
            c.write(StreamKind::Stdout, chunk);
        }
        let (o, t, _, _) = c.finish();
        assert!(t);
        assert_eq!(o, "0123\n[odek: 8 bytes cut here]\ncdef");
    }

    #[test]
    fn byte_by_byte_equals_one_chunk() {
        let data: Vec<u8> = (0..100u8).collect();
        let a = Capture::new(10);
        a.write(StreamKind::Stdout, &data);
        let b = Capture::new(10);
        for x in &data {
            b.write(StreamKind::Stdout, std::slice::from_ref(x));
        }
        assert_eq!(a.finish(), b.finish());
    }
}
