//! A fault-injecting proxy in front of the real Docker socket, for the
//! `faults_*` e2e suites (docs/RELIABILITY.md).
//!
//! The proxy listens on a Unix socket in a fresh temp directory; odek is
//! pointed at it with `DOCKER_HOST=unix://<path>` (see
//! [`FaultProxy::docker_host`]). It relays at the HTTP/1.1 request level:
//! it reads each request head and body from the client (`Content-Length` or
//! chunked), records its method and path, decides what to do with it, and
//! forwards it to the daemon (`/var/run/docker.sock`, or the socket of
//! `DOCKER_HOST`). Responses are streamed back as they arrive (chunked,
//! `Content-Length` or until close). A hijacked connection (`101 Switching
//! Protocols`, or `Content-Type: application/vnd.docker.raw-stream`, as for
//! `exec` start) switches to a raw copy in both directions. Keep-alive
//! connections carry any number of requests (bollard opens one connection
//! per request today, but the proxy does not rely on that).
//!
//! A [`Rule`] fires on the K-th request matching a method and a path
//! pattern (the `/v1.NN` prefix stripped, the query ignored, `*` matching
//! one path segment): it drops the connection or stalls it (keeps it open,
//! forwarding nothing), before or after the daemon saw the request. After a
//! rule fired, [`Then`] says what happens to every later request: relayed
//! normally (the daemon "came back"), refused (every connection closed at
//! once: the daemon "truly vanished"), or stalled (the daemon "stopped
//! answering").
//!
//! Dropping the proxy stops accepting, releases stalled connections and
//! removes its socket; connections being relayed end when their peers close.

use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What a rule does to the request that fires it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Close both sides without forwarding: the daemon never sees the request.
    Drop,
    /// Forward the request, wait for the daemon's answer to begin (so the
    /// operation happened), then close both sides: the answer is lost.
    DropAfterForward,
    /// Forward nothing, answer nothing, keep the connection open.
    Stall,
    /// Forward the request, swallow the daemon's answer, keep the client's
    /// connection open: the operation happened but no answer ever comes.
    StallAfterForward,
    /// Hold the request this long, then forward it and relay the answer
    /// (to a client that may have given up): a daemon that is slow, not gone.
    Delay(Duration),
}

/// What happens to every request after a rule fired.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Then {
    /// Relay normally (the daemon is back).
    Relay,
    /// Close every connection as soon as it is accepted or sends a request
    /// (the daemon vanished; nothing can be cleaned up through the proxy).
    Refuse,
    /// Accept and read, answer nothing (the daemon stopped answering).
    Stall,
}

/// Fires `action` on the `nth` (1-based) request matching `method` and
/// `path`, then switches the proxy to `then`.
#[derive(Clone, Debug)]
pub struct Rule {
    /// HTTP method (`POST`), or `*` for any.
    pub method: String,
    /// Path pattern without the API version prefix and query, e.g.
    /// `/containers/create`, `/containers/*/start`, `/networks/*/connect`.
    /// `*` matches exactly one segment; a trailing `/**` matches the rest.
    pub path: String,
    /// Which matching request fires (1 = the first).
    pub nth: usize,
    /// What to do with it.
    pub action: Action,
    /// What to do with everything after it.
    pub then: Then,
}

impl Rule {
    /// A rule firing on the `nth` match of `method path`.
    pub fn new(method: &str, path: &str, nth: usize, action: Action, then: Then) -> Rule {
        assert!(nth >= 1, "nth is 1-based");
        Rule {
            method: method.to_string(),
            path: path.to_string(),
            nth,
            action,
            then,
        }
    }
}

/// One request the proxy saw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seen {
    /// Sequence number over all connections (0-based).
    pub seq: u64,
    /// Connection number (0-based, in accept order).
    pub conn: u64,
    /// Method.
    pub method: String,
    /// Path as sent (with version prefix and query).
    pub raw_path: String,
    /// Path without version prefix and query.
    pub path: String,
    /// What the proxy did with it.
    pub fate: Fate,
}

/// What the proxy did with a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    /// Relayed.
    Relayed,
    /// A rule fired on it with this action.
    Fired(Action),
    /// Refused (after a [`Then::Refuse`]).
    Refused,
    /// Stalled (after a [`Then::Stall`]).
    Stalled,
}

#[derive(Debug)]
struct RuleState {
    rule: Rule,
    matched: usize,
    fired: bool,
}

struct Shared {
    upstream: PathBuf,
    rules: Mutex<Vec<RuleState>>,
    /// Set once a rule fired with `Then::Refuse` / `Then::Stall`.
    after: Mutex<Option<Then>>,
    log: Mutex<Vec<Seen>>,
    log_changed: Condvar,
    stop: AtomicBool,
    next_conn: AtomicU64,
    next_seq: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Shared {
    fn record(&self, conn: u64, method: &str, raw_path: &str, fate: Fate) {
        let seq = self.next_seq.fetch_add(1, Ordering::SeqCst);
        lock(&self.log).push(Seen {
            seq,
            conn,
            method: method.to_string(),
            raw_path: raw_path.to_string(),
            path: normalize(raw_path),
            fate,
        });
        self.log_changed.notify_all();
    }

    /// Decides the fate of a request (and counts it against the rules).
    fn decide(&self, method: &str, path: &str) -> Fate {
        if let Some(t) = *lock(&self.after) {
            return match t {
                Then::Relay => Fate::Relayed,
                Then::Refuse => Fate::Refused,
                Then::Stall => Fate::Stalled,
            };
        }
        let mut rules = lock(&self.rules);
        let mut fate = Fate::Relayed;
        for r in rules.iter_mut().filter(|r| !r.fired) {
            if (r.rule.method == "*" || r.rule.method.eq_ignore_ascii_case(method))
                && path_matches(&r.rule.path, path)
            {
                r.matched += 1;
                if r.matched == r.rule.nth && fate == Fate::Relayed {
                    r.fired = true;
                    fate = Fate::Fired(r.rule.action);
                    if r.rule.then != Then::Relay {
                        *lock(&self.after) = Some(r.rule.then);
                    }
                }
            }
        }
        fate
    }

    fn refusing(&self) -> bool {
        *lock(&self.after) == Some(Then::Refuse)
    }
}

/// The proxy; see the module docs.
pub struct FaultProxy {
    dir: tempfile::TempDir,
    path: PathBuf,
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
}

impl FaultProxy {
    /// Starts a proxy in front of the daemon's socket with these rules.
    pub fn start(rules: Vec<Rule>) -> FaultProxy {
        Self::start_to(Path::new(&crate::docker_socket()), rules)
    }

    /// Starts a proxy in front of `upstream` with these rules.
    pub fn start_to(upstream: &Path, rules: Vec<Rule>) -> FaultProxy {
        let dir = tempfile::Builder::new()
            .prefix("odek-fault-proxy-")
            .tempdir()
            .expect("tempdir for the proxy socket");
        let path = dir.path().join("docker.sock");
        let listener = UnixListener::bind(&path)
            .unwrap_or_else(|e| panic!("cannot bind {}: {e}", path.display()));
        let shared = Arc::new(Shared {
            upstream: upstream.to_path_buf(),
            rules: Mutex::new(
                rules
                    .into_iter()
                    .map(|rule| RuleState {
                        rule,
                        matched: 0,
                        fired: false,
                    })
                    .collect(),
            ),
            after: Mutex::new(None),
            log: Mutex::new(Vec::new()),
            log_changed: Condvar::new(),
            stop: AtomicBool::new(false),
            next_conn: AtomicU64::new(0),
            next_seq: AtomicU64::new(0),
        });
        let sh = shared.clone();
        let acceptor = std::thread::Builder::new()
            .name("fault-proxy-accept".into())
            .spawn(move || accept_loop(listener, sh))
            .expect("spawn the proxy's accept thread");
        FaultProxy {
            dir,
            path,
            shared,
            acceptor: Some(acceptor),
        }
    }

    /// A relay-only proxy (no rules): counts and logs requests.
    pub fn observer() -> FaultProxy {
        Self::start(Vec::new())
    }

    /// The proxy's socket path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `unix://<path>`, for `DOCKER_HOST`.
    pub fn docker_host(&self) -> String {
        format!("unix://{}", self.path.display())
    }

    /// Every request seen so far, in order.
    pub fn seen(&self) -> Vec<Seen> {
        lock(&self.shared.log).clone()
    }

    /// The requests seen so far as `METHOD path` lines (for messages).
    pub fn transcript(&self) -> String {
        self.seen()
            .iter()
            .map(|s| {
                format!(
                    "#{} conn{} {} {} [{:?}]",
                    s.seq, s.conn, s.method, s.raw_path, s.fate
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// How many requests matching `method` and the path pattern were seen.
    pub fn count(&self, method: &str, path: &str) -> usize {
        lock(&self.shared.log)
            .iter()
            .filter(|s| {
                (method == "*" || s.method.eq_ignore_ascii_case(method))
                    && path_matches(path, &s.path)
            })
            .count()
    }

    /// True once any rule fired.
    pub fn fired(&self) -> bool {
        lock(&self.shared.log)
            .iter()
            .any(|s| matches!(s.fate, Fate::Fired(_)))
    }

    /// Waits until at least `n` requests matching `method path` were seen.
    pub fn wait_for(&self, method: &str, path: &str, n: usize, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        let mut log = lock(&self.shared.log);
        loop {
            let have = log
                .iter()
                .filter(|s| {
                    (method == "*" || s.method.eq_ignore_ascii_case(method))
                        && path_matches(path, &s.path)
                })
                .count();
            if have >= n {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            log = self
                .shared
                .log_changed
                .wait_timeout(log, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// Waits until a rule fired.
    pub fn wait_fired(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        let mut log = lock(&self.shared.log);
        loop {
            if log.iter().any(|s| matches!(s.fate, Fate::Fired(_))) {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            log = self
                .shared
                .log_changed
                .wait_timeout(log, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop.
        let _ = UnixStream::connect(&self.path);
        if let Some(h) = self.acceptor.take() {
            let _ = h.join();
        }
        let _ = std::fs::remove_file(&self.path);
        let _ = &self.dir;
    }
}

fn accept_loop(listener: UnixListener, sh: Arc<Shared>) {
    for conn in listener.incoming() {
        if sh.stop.load(Ordering::SeqCst) {
            break;
        }
        let Ok(client) = conn else { continue };
        let id = sh.next_conn.fetch_add(1, Ordering::SeqCst);
        if sh.refusing() {
            let _ = client.shutdown(Shutdown::Both);
            continue;
        }
        let sh2 = sh.clone();
        let _ = std::thread::Builder::new()
            .name(format!("fault-proxy-conn{id}"))
            .spawn(move || {
                let _ = serve(client, id, &sh2);
            });
    }
}

/// `/v1.41/containers/x/json?size=0` → `/containers/x/json`.
pub fn normalize(raw: &str) -> String {
    let path = raw.split('?').next().unwrap_or(raw);
    let mut segs = path.split('/').skip(1).peekable();
    let mut out = String::new();
    if let Some(first) = segs.peek() {
        let is_version = first.len() > 1
            && first.starts_with('v')
            && first[1..].chars().all(|c| c.is_ascii_digit() || c == '.');
        if is_version {
            segs.next();
        }
    }
    for s in segs {
        out.push('/');
        out.push_str(s);
    }
    if out.is_empty() {
        out.push('/');
    }
    out
}

/// `*` matches one segment, `<id>` one full (64 hex) ID, never a name; a
/// trailing `**` matches any rest.
pub fn path_matches(pattern: &str, path: &str) -> bool {
    let p: Vec<&str> = pattern.split('/').collect();
    let s: Vec<&str> = path.split('/').collect();
    for (i, seg) in p.iter().enumerate() {
        if *seg == "**" && i == p.len() - 1 {
            return s.len() >= i;
        }
        match s.get(i) {
            None => return false,
            Some(v) if *seg == "*" && !v.is_empty() => {}
            Some(v)
                if *seg == "<id>" && v.len() == 64 && v.bytes().all(|b| b.is_ascii_hexdigit()) => {}
            Some(v) if v == seg => {}
            Some(_) => return false,
        }
    }
    p.len() == s.len()
}

/// A socket with a read buffer.
struct Conn {
    s: UnixStream,
    buf: Vec<u8>,
}

impl Conn {
    fn new(s: UnixStream) -> Conn {
        Conn { s, buf: Vec::new() }
    }

    /// Reads more bytes; false on EOF.
    fn fill(&mut self) -> io::Result<bool> {
        let mut tmp = [0u8; 16 * 1024];
        let n = self.s.read(&mut tmp)?;
        self.buf.extend_from_slice(&tmp[..n]);
        Ok(n > 0)
    }

    /// A head up to and including CRLFCRLF; `None` on a clean EOF before
    /// any byte.
    fn read_head(&mut self) -> io::Result<Option<Vec<u8>>> {
        loop {
            if let Some(i) = find(&self.buf, b"\r\n\r\n") {
                let head: Vec<u8> = self.buf.drain(..i + 4).collect();
                return Ok(Some(head));
            }
            if self.buf.len() > 1 << 20 {
                return Err(io::Error::other("header too large"));
            }
            if !self.fill()? {
                if self.buf.is_empty() {
                    return Ok(None);
                }
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
        }
    }

    /// A line including CRLF.
    fn read_line(&mut self) -> io::Result<Vec<u8>> {
        loop {
            if let Some(i) = find(&self.buf, b"\r\n") {
                return Ok(self.buf.drain(..i + 2).collect());
            }
            if !self.fill()? {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
        }
    }

    /// Up to `n` buffered-or-fresh bytes (at least 1 unless EOF).
    fn read_some(&mut self, n: usize) -> io::Result<Vec<u8>> {
        if self.buf.is_empty() && !self.fill()? {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let k = n.min(self.buf.len());
        Ok(self.buf.drain(..k).collect())
    }
}

fn find(h: &[u8], n: &[u8]) -> Option<usize> {
    h.windows(n.len()).position(|w| w == n)
}

/// Parsed head: first line and headers (lowercased names).
struct Head {
    first: String,
    headers: Vec<(String, String)>,
}

impl Head {
    fn parse(raw: &[u8]) -> Head {
        let text = String::from_utf8_lossy(raw);
        let mut lines = text.split("\r\n");
        let first = lines.next().unwrap_or_default().to_string();
        let headers = lines
            .filter(|l| !l.is_empty())
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        Head { first, headers }
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    fn chunked(&self) -> bool {
        self.get("transfer-encoding")
            .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"))
    }

    fn content_length(&self) -> Option<usize> {
        self.get("content-length").and_then(|v| v.parse().ok())
    }

    fn connection_close(&self) -> bool {
        self.get("connection")
            .is_some_and(|v| v.to_ascii_lowercase().contains("close"))
    }
}

/// Holds a connection open, forwarding nothing, until the client closes it
/// or the proxy stops.
fn stall(client: &mut Conn, sh: &Shared) {
    let mut tmp = [0u8; 4096];
    let _ = client.s.set_read_timeout(Some(Duration::from_millis(200)));
    loop {
        if sh.stop.load(Ordering::SeqCst) {
            return;
        }
        match client.s.read(&mut tmp) {
            Ok(0) => return,
            Ok(_) => {} // swallow whatever else arrives
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return,
        }
    }
}

fn close(a: &UnixStream, b: Option<&UnixStream>) {
    let _ = a.shutdown(Shutdown::Both);
    if let Some(b) = b {
        let _ = b.shutdown(Shutdown::Both);
    }
}

/// Serves one client connection, request by request.
fn serve(client: UnixStream, id: u64, sh: &Shared) -> io::Result<()> {
    let mut client = Conn::new(client);
    let mut upstream: Option<Conn> = None;
    loop {
        let Some(raw_head) = client.read_head()? else {
            if let Some(u) = &upstream {
                close(&u.s, None);
            }
            return Ok(());
        };
        let head = Head::parse(&raw_head);
        let mut parts = head.first.split_whitespace();
        let method = parts.next().unwrap_or_default().to_string();
        let raw_path = parts.next().unwrap_or_default().to_string();
        // The request body (kept, to forward it whole).
        let mut body = Vec::new();
        copy_body(&head, &mut client, &mut body, false)?;
        let fate = sh.decide(&method, &normalize(&raw_path));
        sh.record(id, &method, &raw_path, fate);
        let action = match fate {
            Fate::Refused => {
                close(&client.s, upstream.as_ref().map(|u| &u.s));
                return Ok(());
            }
            Fate::Stalled => {
                stall(&mut client, sh);
                close(&client.s, upstream.as_ref().map(|u| &u.s));
                return Ok(());
            }
            Fate::Fired(a) => Some(a),
            Fate::Relayed => None,
        };
        match action {
            Some(Action::Drop) => {
                close(&client.s, upstream.as_ref().map(|u| &u.s));
                return Ok(());
            }
            Some(Action::Stall) => {
                stall(&mut client, sh);
                close(&client.s, upstream.as_ref().map(|u| &u.s));
                return Ok(());
            }
            Some(Action::Delay(d)) => std::thread::sleep(d),
            _ => {}
        }
        // Forward the request.
        if upstream.is_none() {
            upstream = Some(Conn::new(UnixStream::connect(&sh.upstream)?));
        }
        let up = upstream.as_mut().expect("connected above");
        up.s.write_all(&raw_head)?;
        up.s.write_all(&body)?;
        // The response head (skipping interim 100 Continue).
        let (resp_raw, resp) = loop {
            let Some(r) = up.read_head()? else {
                close(&client.s, Some(&up.s));
                return Ok(());
            };
            let h = Head::parse(&r);
            let status = status_of(&h);
            if (100..200).contains(&status) && status != 101 {
                client.s.write_all(&r)?;
                continue;
            }
            break (r, h);
        };
        let status = status_of(&resp);
        match action {
            Some(Action::DropAfterForward) => {
                close(&client.s, Some(&up.s));
                return Ok(());
            }
            Some(Action::StallAfterForward) => {
                // Swallow the answer (the operation happened), answer nothing.
                let _ = copy_body(&resp, up, &mut io::sink(), false);
                stall(&mut client, sh);
                close(&client.s, Some(&up.s));
                return Ok(());
            }
            _ => {}
        }
        client.s.write_all(&resp_raw)?;
        let raw_stream = resp
            .get("content-type")
            .is_some_and(|c| c.contains("application/vnd.docker.raw-stream"));
        let hijacked = status == 101
            || (raw_stream && status == 200 && resp.content_length().is_none() && !resp.chunked());
        if hijacked {
            return raw_copy(client, upstream.take().expect("upstream"));
        }
        let no_body = method.eq_ignore_ascii_case("HEAD") || status == 204 || status == 304;
        let until_eof = resp.content_length().is_none() && !resp.chunked();
        if !no_body {
            copy_body(&resp, up, &mut client.s, until_eof)?;
        }
        if (!no_body && until_eof) || resp.connection_close() || head.connection_close() {
            close(&client.s, Some(&up.s));
            return Ok(());
        }
    }
}

/// Copies one body framed by `head` (chunked, `Content-Length`, or — when
/// `until_eof` — everything until the peer closes) from `from` to `to`,
/// as it arrives.
fn copy_body(head: &Head, from: &mut Conn, to: &mut dyn Write, until_eof: bool) -> io::Result<()> {
    if head.chunked() {
        loop {
            let line = from.read_line()?;
            to.write_all(&line)?;
            let text = String::from_utf8_lossy(&line);
            let size_hex = text.trim().split(';').next().unwrap_or("").trim();
            let size = usize::from_str_radix(size_hex, 16)
                .map_err(|_| io::Error::other(format!("bad chunk size {size_hex:?}")))?;
            if size == 0 {
                // Trailers until an empty line.
                loop {
                    let t = from.read_line()?;
                    to.write_all(&t)?;
                    if t == b"\r\n" {
                        return Ok(());
                    }
                }
            }
            let mut left = size + 2; // data + CRLF
            while left > 0 {
                let part = from.read_some(left)?;
                left -= part.len();
                to.write_all(&part)?;
            }
            to.flush()?;
        }
    } else if let Some(mut left) = head.content_length() {
        while left > 0 {
            let part = from.read_some(left)?;
            left -= part.len();
            to.write_all(&part)?;
        }
        Ok(())
    } else if until_eof {
        if !from.buf.is_empty() {
            to.write_all(&std::mem::take(&mut from.buf))?;
        }
        let mut tmp = [0u8; 16 * 1024];
        loop {
            let n = from.s.read(&mut tmp)?;
            if n == 0 {
                return Ok(());
            }
            to.write_all(&tmp[..n])?;
        }
    } else {
        Ok(())
    }
}

fn status_of(h: &Head) -> u16 {
    h.first
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// After a hijack: bytes both ways until either side closes.
fn raw_copy(mut client: Conn, mut up: Conn) -> io::Result<()> {
    // Bytes already read past the heads.
    if !up.buf.is_empty() {
        client.s.write_all(&std::mem::take(&mut up.buf))?;
    }
    if !client.buf.is_empty() {
        up.s.write_all(&std::mem::take(&mut client.buf))?;
    }
    let mut c_read = client.s.try_clone()?;
    let mut u_write = up.s.try_clone()?;
    let c_for_close = client.s.try_clone()?;
    let u_for_close = up.s.try_clone()?;
    let to_daemon = std::thread::spawn(move || {
        let _ = io::copy(&mut c_read, &mut u_write);
        let _ = u_write.shutdown(Shutdown::Write);
    });
    let _ = io::copy(&mut up.s, &mut client.s);
    close(&c_for_close, Some(&u_for_close));
    let _ = to_daemon.join();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_normalised_and_matched() {
        assert_eq!(
            normalize("/v1.41/containers/create?name=x"),
            "/containers/create"
        );
        assert_eq!(normalize("/version"), "/version");
        assert_eq!(normalize("/v1.40/version"), "/version");
        assert_eq!(normalize("/_ping"), "/_ping");
        assert!(path_matches("/containers/create", "/containers/create"));
        assert!(path_matches("/containers/*/start", "/containers/abc/start"));
        assert!(!path_matches("/containers/*/start", "/containers/abc/stop"));
        assert!(!path_matches("/containers/*/json", "/containers/json"));
        assert!(path_matches(
            "/networks/*/connect",
            "/networks/0123/connect"
        ));
        assert!(path_matches("/exec/**", "/exec/abc/start"));
        assert!(!path_matches("/containers/*", "/containers/a/b"));
    }
}
