//! A DNS server of the test's own on a loopback address: it answers every
//! query with NXDOMAIN and records the names it was asked, so a test can
//! tell whether a lookup made in a container reached "the host's resolver"
//! — this server, named in the `/etc/resolv.conf` a
//! [`crate::second_daemon::SecondDaemon`] sees, and serving in that
//! daemon's own network namespace — without any query leaving the machine.
//!
//! It binds UDP port 53 (the port Docker's embedded resolver forwards to)
//! of an address in 127.53.0.0/16; root only (port 53, and joining another
//! network namespace).

use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// The running server; stopped on drop.
pub struct DnsStub {
    ip: Ipv4Addr,
    seen: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl DnsStub {
    /// A random address in 127.53.0.0/16, for the resolv.conf a daemon
    /// reads before the server starts in its namespace.
    pub fn address() -> Ipv4Addr {
        let n = u64::from(std::process::id())
            ^ std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| u64::from(d.subsec_nanos()))
                .unwrap_or(0);
        Ipv4Addr::new(127, 53, (n % 250) as u8 + 1, ((n / 250) % 250) as u8 + 1)
    }

    /// Serves on `ip`, port 53, from a thread that first joins the network
    /// namespace `netns` (`/proc/<pid>/ns/net`; `None`: the test's own).
    /// Panics when it cannot join or bind.
    pub fn start_in(ip: Ipv4Addr, netns: Option<&Path>) -> DnsStub {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (ready, bound) = std::sync::mpsc::channel::<Result<(), String>>();
        let netns = netns.map(Path::to_path_buf);
        let thread = {
            let (seen, stop) = (seen.clone(), stop.clone());
            std::thread::spawn(move || {
                let sock = match bind(ip, netns.as_deref()) {
                    Ok(s) => {
                        let _ = ready.send(Ok(()));
                        s
                    }
                    Err(e) => {
                        let _ = ready.send(Err(e));
                        return;
                    }
                };
                let mut buf = [0u8; 1500];
                while !stop.load(Ordering::SeqCst) {
                    let Ok((n, from)) = sock.recv_from(&mut buf) else {
                        continue;
                    };
                    let q = &buf[..n];
                    let Some((name, end)) = question(q) else {
                        continue;
                    };
                    seen.lock().expect("seen").push(name);
                    let _ = sock.send_to(&nxdomain(q, end), from);
                }
            })
        };
        match bound.recv() {
            Ok(Ok(())) => DnsStub {
                ip,
                seen,
                stop,
                thread: Some(thread),
            },
            Ok(Err(e)) => panic!("the test's DNS server: {e}"),
            Err(_) => panic!("the test's DNS server thread ended"),
        }
    }

    /// The address it listens on (port 53).
    pub fn ip(&self) -> Ipv4Addr {
        self.ip
    }

    /// The names asked so far (lower case, without the final dot), in order.
    pub fn seen(&self) -> Vec<String> {
        self.seen.lock().expect("seen").clone()
    }

    /// True when a name containing `needle` (lower case) was asked.
    pub fn saw(&self, needle: &str) -> bool {
        let needle = needle.to_ascii_lowercase();
        self.seen().iter().any(|n| n.contains(&needle))
    }
}

/// Joins `netns` (this thread only), then binds `ip:53` with a short read
/// time-out (so the loop sees a stop).
fn bind(ip: Ipv4Addr, netns: Option<&Path>) -> Result<UdpSocket, String> {
    if let Some(ns) = netns {
        let f = std::fs::File::open(ns).map_err(|e| format!("open {}: {e}", ns.display()))?;
        rustix::thread::move_into_link_name_space(
            std::os::fd::AsFd::as_fd(&f),
            Some(rustix::thread::LinkNameSpaceType::Network),
        )
        .map_err(|e| format!("join {}: {e}", ns.display()))?;
    }
    let sock = UdpSocket::bind(SocketAddr::from((ip, 53)))
        .map_err(|e| format!("bind {ip}:53 (root only): {e}"))?;
    sock.set_read_timeout(Some(Duration::from_millis(100)))
        .map_err(|e| e.to_string())?;
    Ok(sock)
}

impl Drop for DnsStub {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The question's name of a DNS query and the offset right after its
/// question section (name, type, class); `None` for anything else.
fn question(q: &[u8]) -> Option<(String, usize)> {
    // Header: 12 bytes; QDCOUNT ≥ 1; not a response.
    if q.len() < 12 || q[2] & 0x80 != 0 || u16::from_be_bytes([q[4], q[5]]) == 0 {
        return None;
    }
    let mut i = 12;
    let mut labels = Vec::new();
    loop {
        let len = usize::from(*q.get(i)?);
        if len == 0 {
            i += 1;
            break;
        }
        if len > 63 {
            return None;
        }
        let label = q.get(i + 1..i + 1 + len)?;
        labels.push(String::from_utf8_lossy(label).to_ascii_lowercase());
        i += 1 + len;
    }
    let end = i + 4;
    (end <= q.len()).then(|| (labels.join("."), end))
}

/// An NXDOMAIN answer to query `q` whose question ends at `end`: its ID
/// and question, QR and RA set, RD copied, no records.
fn nxdomain(q: &[u8], end: usize) -> Vec<u8> {
    let mut r = Vec::with_capacity(end);
    r.extend_from_slice(&q[..2]);
    r.push(0x80 | (q[2] & 0x01));
    r.push(0x80 | 0x03);
    r.extend_from_slice(&[0, 1, 0, 0, 0, 0, 0, 0]);
    r.extend_from_slice(&q[12..end]);
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_question_and_answers_nxdomain() {
        // ID 0x1234, RD, one question: leak.example. A IN
        let mut q = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
        q.extend_from_slice(b"\x04LEAK\x07example\x00\x00\x01\x00\x01");
        let (name, end) = question(&q).expect("question");
        assert_eq!(name, "leak.example");
        assert_eq!(end, q.len());
        let r = nxdomain(&q, end);
        assert_eq!(&r[..2], &[0x12, 0x34]);
        assert_eq!(r[2], 0x81);
        assert_eq!(r[3] & 0x0f, 3, "NXDOMAIN");
        assert_eq!(&r[12..], &q[12..]);
        assert!(question(&r).is_none(), "a response is no question");
    }
}
