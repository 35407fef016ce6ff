//! One protocol session: the owner link (stdin/stdout) or a relay socket,
//! with its frame decoder and its queue of bytes to send.

use crate::sys;
use odek_supervisor::proto::{Decoder, Frame, Kind};
use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

/// Above this many queued bytes, the session's commands' output is not read
/// (back-pressure to the commands).
pub const HIGH_WATER: usize = 1 << 20;

/// One encoded frame waiting to be written.
struct Queued {
    /// The command it is about, when it is output (droppable); `None` for
    /// control frames.
    output_of: Option<u32>,
    /// Its wire bytes.
    bytes: Vec<u8>,
}

/// One session.
pub struct Session {
    /// The owner link (its end ends the supervisor).
    pub owner: bool,
    /// The relay socket (`None` for the owner, which uses fds 0 and 1).
    pub sock: Option<OwnedFd>,
    /// Frames read so far.
    pub dec: Decoder,
    /// Encoded frames not yet written.
    out: VecDeque<Queued>,
    /// How much of the first queued frame is written.
    out_pos: usize,
    /// The bytes in `out`, minus `out_pos`.
    out_len: usize,
    /// Why the session ended, once it has.
    pub ended: Option<String>,
}

impl Session {
    /// The owner session on fds 0 and 1.
    pub fn owner() -> Session {
        Session {
            owner: true,
            sock: None,
            dec: Decoder::new(),
            out: VecDeque::new(),
            out_pos: 0,
            out_len: 0,
            ended: None,
        }
    }

    /// A relay session on `sock` (non-blocking).
    pub fn relay(sock: OwnedFd) -> Session {
        Session {
            owner: false,
            sock: Some(sock),
            ..Session::owner()
        }
    }

    /// The fd frames arrive on.
    pub fn rfd(&self) -> RawFd {
        self.sock.as_ref().map_or(0, |s| s.as_raw_fd())
    }

    /// The fd frames leave on.
    pub fn wfd(&self) -> RawFd {
        self.sock.as_ref().map_or(1, |s| s.as_raw_fd())
    }

    /// Bytes queued and not yet written.
    pub fn pending(&self) -> usize {
        self.out_len
    }

    /// Queues `frame` and writes what the fd takes now.
    pub fn send(&mut self, frame: &Frame) {
        if self.ended.is_some() {
            return;
        }
        let output_of = matches!(frame.kind, Kind::Stdout | Kind::Stderr).then_some(frame.id);
        let bytes = frame.encode();
        self.out_len += bytes.len();
        self.out.push_back(Queued { output_of, bytes });
        self.flush();
    }

    /// Drops the queued output frames of command `id` that have not started
    /// to leave (after its kill, its output is discarded).
    pub fn drop_output(&mut self, id: u32) {
        let head_started = self.out_pos > 0;
        let mut i = 0;
        let mut dropped = 0;
        self.out.retain(|q| {
            let keep = (i == 0 && head_started) || q.output_of != Some(id);
            if !keep {
                dropped += q.bytes.len();
            }
            i += 1;
            keep
        });
        self.out_len -= dropped;
    }

    /// Writes queued bytes until the fd would block; a write error ends the
    /// session.
    pub fn flush(&mut self) {
        while self.ended.is_none() {
            let Some(head) = self.out.front() else {
                break;
            };
            match sys::write(self.wfd(), &head.bytes[self.out_pos..]) {
                Ok(n) => {
                    self.out_pos += n;
                    self.out_len -= n;
                    if self.out_pos == head.bytes.len() {
                        self.out.pop_front();
                        self.out_pos = 0;
                    }
                }
                Err(e) if sys::would_block(&e) => break,
                Err(e) => self.end(format!("write: {e}")),
            }
        }
    }

    /// Reads what is available into the decoder; EOF or an error ends the
    /// session.
    pub fn read_some(&mut self, buf: &mut [u8]) {
        match sys::read(self.rfd(), buf) {
            Ok(0) => self.end("end of stream".into()),
            Ok(n) => self.dec.push(&buf[..n]),
            Err(e) if sys::would_block(&e) => {}
            Err(e) => self.end(format!("read: {e}")),
        }
    }

    /// Marks the session ended (the first reason wins).
    pub fn end(&mut self, why: String) {
        if self.ended.is_none() {
            self.ended = Some(why);
        }
    }
}

/// Makes the owner's fds non-blocking.
pub fn owner_nonblocking() -> io::Result<()> {
    sys::set_nonblock(0)?;
    sys::set_nonblock(1)
}
