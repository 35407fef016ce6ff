//! `relay NAME`: connects a `docker exec` stream to the supervisor's
//! abstract socket, after checking that the socket's owner is our own uid
//! (a command could squat the name if the supervisor died).

use crate::sys;
use std::os::fd::AsRawFd;

/// Copies stdin → socket and socket → stdout until the socket closes.
/// Returns the exit status.
pub fn relay(name: &str) -> i32 {
    match run(name) {
        Ok(()) => 0,
        Err(e) => {
            crate::log(&format!("odek-supervisor relay: {e}"));
            1
        }
    }
}

/// The relay proper.
fn run(name: &str) -> Result<(), String> {
    let sock = sys::unix_socket(false).map_err(|e| format!("socket: {e}"))?;
    let (addr, len) = sys::abstract_addr(name).map_err(|e| format!("socket name: {e}"))?;
    // SAFETY: addr is a valid sockaddr_un of length len.
    sys::cvt(unsafe {
        libc::connect(
            sock.as_raw_fd(),
            (&addr as *const libc::sockaddr_un).cast(),
            len,
        )
    })
    .map_err(|e| format!("connect @{name}: {e}"))?;
    let (pid, uid, _) =
        sys::peer_cred(sock.as_raw_fd()).map_err(|e| format!("SO_PEERCRED: {e}"))?;
    // SAFETY: getuid has no failure mode.
    let me = unsafe { libc::getuid() };
    if uid != me {
        return Err(format!(
            "@{name} is held by pid {pid} as uid {uid}, not by the supervisor (uid {me}); refusing it"
        ));
    }
    // SAFETY: ignoring SIGPIPE so a closed stdout is an error, not death.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    let s = sock.as_raw_fd();
    let mut buf = vec![0u8; 64 * 1024];
    let mut stdin_open = true;
    loop {
        let mut fds = [
            libc::pollfd {
                fd: s,
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: if stdin_open { 0 } else { -1 },
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: fds is a valid array of two pollfds.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(format!("poll: {e}"));
        }
        if fds[0].revents != 0 {
            match sys::read(s, &mut buf) {
                Ok(0) => return Ok(()),
                Ok(n) => sys::write_all(1, &buf[..n]).map_err(|e| format!("stdout: {e}"))?,
                Err(e) => return Err(format!("socket: {e}")),
            }
        }
        if fds[1].revents != 0 {
            match sys::read(0, &mut buf) {
                Ok(n) if n > 0 => {
                    sys::write_all(s, &buf[..n]).map_err(|e| format!("socket: {e}"))?
                }
                _ => {
                    stdin_open = false;
                    // SAFETY: integer arguments only.
                    unsafe { libc::shutdown(s, libc::SHUT_WR) };
                }
            }
        }
    }
}
