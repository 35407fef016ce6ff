//! Pseudo-terminals from `/dev/ptmx` (no libutil: the binary is static).

use crate::sys::cvt;
use odek_supervisor::proto::WinSize;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// A new terminal of size `ws`: (master, slave), both close-on-exec, the
/// master non-blocking.
pub fn open(ws: WinSize) -> io::Result<(OwnedFd, OwnedFd)> {
    // SAFETY: a constant NUL-terminated path; no other memory is passed.
    let m = cvt(unsafe {
        libc::open(
            c"/dev/ptmx".as_ptr(),
            libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC | libc::O_NONBLOCK,
        )
    })?;
    // SAFETY: m was just opened and is owned by nobody else.
    let master = unsafe { OwnedFd::from_raw_fd(m) };
    let unlock: libc::c_int = 0;
    // SAFETY: TIOCSPTLCK reads one int we own.
    cvt(unsafe { libc::ioctl(m, libc::TIOCSPTLCK, &unlock) })?;
    let mut n: libc::c_uint = 0;
    // SAFETY: TIOCGPTN writes one uint we own.
    cvt(unsafe { libc::ioctl(m, libc::TIOCGPTN, &mut n) })?;
    let path = CString::new(format!("/dev/pts/{n}")).map_err(io::Error::other)?;
    // SAFETY: path is a valid C string.
    let s = cvt(unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
        )
    })?;
    // SAFETY: s was just opened and is owned by nobody else.
    let slave = unsafe { OwnedFd::from_raw_fd(s) };
    resize(master.as_raw_fd(), ws)?;
    Ok((master, slave))
}

/// Sets the terminal size on a master (`TIOCSWINSZ`).
pub fn resize(master: RawFd, ws: WinSize) -> io::Result<()> {
    let w = libc::winsize {
        ws_row: ws.rows,
        ws_col: ws.cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCSWINSZ reads one winsize we own.
    cvt(unsafe { libc::ioctl(master, libc::TIOCSWINSZ, &w) })?;
    Ok(())
}
