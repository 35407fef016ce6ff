//! One protocol session: the owner link (stdin/stdout) or a relay socket,
//! with its frame decoder and its queue of bytes to send.

use crate::sys;
use odek_supervisor::proto::{Decoder, Frame};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

/// Above this many queued bytes, the session's commands' output is not read
/// (back-pressure to the commands).
pub const HIGH_WATER: usize = 4 << 20;

/// One session.
pub struct Session {
    /// The owner link (its end ends the supervisor).
    pub owner: bool,
    /// The relay socket (`None` for the owner, which uses fds 0 and 1).
    pub sock: Option<OwnedFd>,
    /// Frames read so far.
    pub dec: Decoder,
    /// Encoded frames not yet written.
    out: Vec<u8>,
    /// How much of `out` is written.
    out_pos: usize,
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
            out: vec![],
            out_pos: 0,
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
        self.out.len() - self.out_pos
    }

    /// Queues `frame` and writes what the fd takes now.
    pub fn send(&mut self, frame: &Frame) {
        if self.ended.is_some() {
            return;
        }
        frame.encode_into(&mut self.out);
        self.flush();
    }

    /// Writes queued bytes until the fd would block; a write error ends the
    /// session.
    pub fn flush(&mut self) {
        while self.pending() > 0 && self.ended.is_none() {
            match sys::write(self.wfd(), &self.out[self.out_pos..]) {
                Ok(n) => self.out_pos += n,
                Err(e) if sys::would_block(&e) => break,
                Err(e) => self.end(format!("write: {e}")),
            }
        }
        if self.out_pos == self.out.len() {
            self.out.clear();
            self.out_pos = 0;
        } else if self.out_pos > (1 << 20) {
            self.out.drain(..self.out_pos);
            self.out_pos = 0;
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
