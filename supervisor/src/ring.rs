//! The bounded output buffer of one background process: stdout and stderr
//! in the order written, addressed by a byte offset (the cursor) that
//! counts every byte the process wrote; the oldest bytes are dropped
//! beyond the cap.

use std::collections::VecDeque;

/// One stretch of output.
struct Chunk {
    /// Stderr (else stdout).
    is_err: bool,
    /// Its bytes.
    bytes: Vec<u8>,
}

/// The buffer.
pub struct Ring {
    /// Most bytes kept.
    cap: usize,
    /// The offset of the oldest byte kept.
    base: u64,
    /// Bytes kept.
    len: usize,
    /// The chunks kept, oldest first.
    chunks: VecDeque<Chunk>,
}

/// What [`Ring::read`] found.
pub struct Read<'a> {
    /// The offset of the first byte returned.
    pub cursor: u64,
    /// The offset after the last byte returned.
    pub next: u64,
    /// Bytes asked for that were dropped.
    pub dropped: u64,
    /// `(is_err, bytes)` in the order written.
    pub chunks: Vec<(bool, &'a [u8])>,
}

impl Ring {
    /// An empty buffer keeping at most `cap` bytes.
    pub fn new(cap: usize) -> Ring {
        Ring {
            cap,
            base: 0,
            len: 0,
            chunks: VecDeque::new(),
        }
    }

    /// The offset after the newest byte.
    pub fn end(&self) -> u64 {
        self.base + self.len as u64
    }

    /// Appends output, dropping the oldest bytes beyond the cap.
    pub fn push(&mut self, is_err: bool, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        match self.chunks.back_mut() {
            Some(last) if last.is_err == is_err && last.bytes.len() < 64 * 1024 => {
                last.bytes.extend_from_slice(bytes)
            }
            _ => self.chunks.push_back(Chunk {
                is_err,
                bytes: bytes.to_vec(),
            }),
        }
        self.len += bytes.len();
        while self.len > self.cap {
            let excess = self.len - self.cap;
            let Some(front) = self.chunks.front_mut() else {
                break;
            };
            if front.bytes.len() <= excess {
                let n = front.bytes.len();
                self.chunks.pop_front();
                self.len -= n;
                self.base += n as u64;
            } else {
                front.bytes.drain(..excess);
                self.len -= excess;
                self.base += excess as u64;
            }
        }
    }

    /// Everything kept from `cursor` on (`None`: from the oldest byte
    /// kept). Errors: a cursor beyond [`Ring::end`].
    pub fn read(&self, cursor: Option<u64>) -> Result<Read<'_>, String> {
        let want = cursor.unwrap_or(self.base);
        if want > self.end() {
            return Err(format!(
                "cursor {want} is beyond the output's end ({})",
                self.end()
            ));
        }
        let from = want.max(self.base);
        let dropped = from - want;
        let mut skip = (from - self.base) as usize;
        let mut chunks = vec![];
        for c in &self.chunks {
            if skip >= c.bytes.len() {
                skip -= c.bytes.len();
                continue;
            }
            chunks.push((c.is_err, &c.bytes[skip..]));
            skip = 0;
        }
        Ok(Read {
            cursor: from,
            next: self.end(),
            dropped,
            chunks,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(r: &Read<'_>) -> String {
        r.chunks
            .iter()
            .map(|(e, b)| {
                format!(
                    "{}{}",
                    if *e { "E:" } else { "O:" },
                    String::from_utf8_lossy(b)
                )
            })
            .collect::<Vec<_>>()
            .join("|")
    }

    #[test]
    fn reads_from_a_cursor_in_order() {
        let mut r = Ring::new(100);
        r.push(false, b"ab");
        r.push(true, b"cd");
        r.push(false, b"ef");
        let all = r.read(None).expect("reads");
        assert_eq!((all.cursor, all.next, all.dropped), (0, 6, 0));
        assert_eq!(text(&all), "O:ab|E:cd|O:ef");
        let tail = r.read(Some(3)).expect("reads");
        assert_eq!((tail.cursor, tail.next, tail.dropped), (3, 6, 0));
        assert_eq!(text(&tail), "E:d|O:ef");
        let none = r.read(Some(6)).expect("reads");
        assert!(none.chunks.is_empty());
        assert!(r.read(Some(7)).is_err());
    }

    #[test]
    fn drops_the_oldest_bytes_and_says_how_many() {
        let mut r = Ring::new(4);
        r.push(false, b"abc");
        r.push(true, b"def");
        assert_eq!(r.end(), 6);
        let got = r.read(Some(0)).expect("reads");
        assert_eq!((got.cursor, got.next, got.dropped), (2, 6, 2));
        assert_eq!(text(&got), "O:c|E:def");
        r.push(false, b"0123456789");
        let got = r.read(Some(6)).expect("reads");
        assert_eq!((got.cursor, got.next, got.dropped), (12, 16, 6));
        assert_eq!(text(&got), "O:6789");
    }
}
