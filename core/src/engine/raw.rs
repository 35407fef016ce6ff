//! The Engine requests odek writes by hand, over a connection of their
//! own, where bollard cannot do what odek needs: `GET /_ping` (the
//! engine's API version from its header, before negotiation), `POST
//! /containers/{id}/wait?condition=removed` (registered before a start
//! can outrun it) and the owner link's `POST /containers/{id}/attach`
//! (its socket's descriptor must be reachable for forks, SPEC §6.1). The
//! rest of the Engine API goes through bollard (`bollard_engine.rs`).
//! Over a `tcp://` endpoint secured with TLS (SPEC §6.2.1) each of them
//! speaks TLS too ([`Dial`]), with the client configuration bollard's
//! requests use ([`tls_config`]). Over an `ssh://` endpoint (SPEC §6.2.2)
//! each is a connection through an `ssh` child of its own
//! ([`super::ssh::SshStream`]).

use std::sync::Arc;
use std::time::Duration;

use super::endpoint::Address;
use super::ssh::SshStream;
use super::tls::Tls;
use super::{ApiVersion, EngineError, EngineErrorKind, ExitWait, Op, StdinHold};

/// `GET /_ping` over a fresh connection: the engine's `Api-Version` and
/// release (from `Server: Docker/<release> (…)`). `Ok(None)` when the engine
/// answers without the header. Transport failures are `Unreachable`.
pub(super) async fn ping(
    dial: &Dial,
    budget: Duration,
) -> Result<Option<(ApiVersion, String)>, EngineError> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    if dial.tls.is_some() || matches!(dial.address, Address::Ssh { .. }) {
        // Over TLS or ssh the handshake is most of the cost: `/version`
        // through bollard (which reports a refused certificate or host
        // key) answers as well.
        return Ok(None);
    }
    let address = &dial.address;
    let unreachable = |e: std::io::Error| {
        EngineError::new(Op::Version, EngineErrorKind::Unreachable, e.to_string())
    };
    let request =
        b"GET /_ping HTTP/1.1\r\nHost: docker\r\nUser-Agent: odek\r\nConnection: close\r\n\r\n";
    let exchange = async {
        let mut head = Vec::with_capacity(1024);
        let mut buf = [0u8; 1024];
        macro_rules! talk {
            ($stream:expr) => {{
                let mut s = $stream;
                s.write_all(request).await.map_err(unreachable)?;
                while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
                    let n = s.read(&mut buf).await.map_err(unreachable)?;
                    if n == 0 {
                        break;
                    }
                    head.extend_from_slice(&buf[..n]);
                }
            }};
        }
        match address {
            Address::Unix { path } => talk!(tokio::net::UnixStream::connect(path)
                .await
                .map_err(unreachable)?),
            Address::Tcp { authority } => talk!(tokio::net::TcpStream::connect(authority.as_str())
                .await
                .map_err(unreachable)?),
            Address::Ssh { .. } => {}
        }
        Ok::<Vec<u8>, EngineError>(head)
    };
    let head = match tokio::time::timeout(budget, exchange).await {
        Ok(r) => r?,
        Err(_) => {
            return Err(EngineError::new(
                Op::Version,
                EngineErrorKind::Timeout,
                format!("no answer within {:.1} s", budget.as_secs_f64()),
            ))
        }
    };
    let text = String::from_utf8_lossy(&head);
    let mut lines = text.split("\r\n");
    let ok = lines.next().is_some_and(|status| {
        status.starts_with("HTTP/1.") && status.split(' ').nth(1) == Some("200")
    });
    if !ok {
        return Ok(None);
    }
    let mut api = None;
    let mut release = String::new();
    for line in lines.take_while(|l| !l.is_empty()) {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let v = v.trim();
        if k.eq_ignore_ascii_case("api-version") {
            api = ApiVersion::parse(v);
        } else if k.eq_ignore_ascii_case("server") {
            release = v
                .strip_prefix("Docker/")
                .and_then(|r| r.split_whitespace().next())
                .unwrap_or(v)
                .to_string();
        }
    }
    Ok(api.map(|a| (a, release)))
}

/// A byte stream to the daemon (Unix socket or TCP).
pub(super) trait Conn: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Conn for T {}

/// Writes `request` on `conn` and reads the answer up to the end of its
/// head (at most 16 KiB): the bytes read and where the body starts. Errors
/// (for `op`): the connection failing or closing (`Unreachable`), a head
/// too long (`Protocol`, naming the `what` answer).
async fn send_and_read_head(
    conn: &mut dyn Conn,
    request: &str,
    op: Op,
    what: &str,
) -> Result<(Vec<u8>, usize), EngineError> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let err = |kind, message: String| EngineError::new(op, kind, message);
    let unreachable = |e: std::io::Error| err(EngineErrorKind::Unreachable, e.to_string());
    conn.write_all(request.as_bytes())
        .await
        .map_err(unreachable)?;
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    loop {
        if let Some(p) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            return Ok((head, p + 4));
        }
        if head.len() > 16 * 1024 {
            return Err(err(
                EngineErrorKind::Protocol,
                format!("the {what} answer's head is too long"),
            ));
        }
        let n = conn.read(&mut buf).await.map_err(unreachable)?;
        if n == 0 {
            return Err(err(
                EngineErrorKind::Unreachable,
                "the daemon closed the connection".into(),
            ));
        }
        head.extend_from_slice(&buf[..n]);
    }
}

/// `POST /containers/{id}/wait?condition=removed` on a fresh connection.
/// The daemon registers the wait before it sends the response head, so
/// once the head (200) is read, a start that follows cannot outrun it; the
/// body (`{"StatusCode":…}`) is read on a task until the container is gone.
/// bollard's wait sends its request only when first polled, and says
/// nothing when its head arrives, hence this one request by hand.
pub(super) async fn wait_removed(
    dial: &Dial,
    v: ApiVersion,
    id: &str,
    budget: Duration,
) -> Result<ExitWait, EngineError> {
    use tokio::io::AsyncReadExt;
    let err = |kind, message: String| EngineError::new(Op::WaitContainer, kind, message);
    let unreachable = |e: std::io::Error| err(EngineErrorKind::Unreachable, e.to_string());
    path_id(Op::WaitContainer, id)?;
    let request = format!(
        "POST /v{v}/containers/{id}/wait?condition=removed HTTP/1.1\r\nHost: docker\r\nUser-Agent: odek\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
    let exchange = async {
        let mut conn: Box<dyn Conn> = match &dial.address {
            Address::Unix { path } => Box::new(
                tokio::net::UnixStream::connect(path)
                    .await
                    .map_err(unreachable)?,
            ),
            Address::Tcp { authority } => {
                let tcp = tokio::net::TcpStream::connect(authority.as_str())
                    .await
                    .map_err(unreachable)?;
                match dial.secure(tcp, Op::WaitContainer).await? {
                    Secured::Plain(t) => Box::new(t),
                    Secured::Tls(t) => Box::new(t),
                }
            }
            Address::Ssh { target } => {
                let stream =
                    SshStream::spawn(target, dial.connect_timeout, Op::WaitContainer).await?;
                let diagnostics = stream.diagnostics.clone();
                let mut conn: Box<dyn Conn> = Box::new(stream);
                return match send_and_read_head(&mut *conn, &request, Op::WaitContainer, "wait")
                    .await
                {
                    Ok((head, _)) => Ok((conn, head)),
                    Err(e) => Err(diagnostics
                        .explain(target, Op::WaitContainer, &e.message)
                        .await),
                };
            }
        };
        let (head, _) = send_and_read_head(&mut *conn, &request, Op::WaitContainer, "wait").await?;
        Ok::<_, EngineError>((conn, head))
    };
    let (conn, head) = match tokio::time::timeout(budget, exchange).await {
        Ok(r) => r?,
        Err(_) => {
            return Err(err(
                EngineErrorKind::Timeout,
                format!("no answer within {:.1} s", budget.as_secs_f64()),
            ))
        }
    };
    let status: u16 = String::from_utf8_lossy(&head)
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let read_rest = |mut conn: Box<dyn Conn>, mut body: Vec<u8>| async move {
        let mut buf = [0u8; 1024];
        loop {
            match conn.read(&mut buf).await {
                Ok(0) | Err(_) => return body,
                Ok(n) => body.extend_from_slice(&buf[..n]),
            }
            if body.len() > 64 * 1024 {
                return body;
            }
        }
    };
    let split = head
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(head.len(), |p| p + 4);
    let early = head[split..].to_vec();
    if status != 200 {
        let body = tokio::time::timeout(budget, read_rest(conn, early))
            .await
            .unwrap_or_default();
        let message = wait_json(&body)
            .and_then(|j| j.get("message").and_then(|m| m.as_str()).map(String::from))
            .unwrap_or_else(|| format!("the daemon answered {status}"));
        return Err(EngineError {
            op: Op::WaitContainer,
            kind: if status == 404 {
                EngineErrorKind::NotFound
            } else {
                EngineErrorKind::Rejected
            },
            status: Some(status),
            message,
        });
    }
    Ok(ExitWait::spawn(async move {
        let body = read_rest(conn, early).await;
        wait_json(&body)
            .and_then(|j| j.get("StatusCode").and_then(serde_json::Value::as_i64))
            .ok_or_else(|| {
                err(
                    EngineErrorKind::Protocol,
                    format!(
                        "the wait ended without a status code ({} bytes)",
                        body.len()
                    ),
                )
            })
    }))
}

/// Checks that `id` is a container ID or an odek-checked name, which go
/// into a request path unescaped.
pub(super) fn path_id(op: Op, id: &str) -> Result<(), EngineError> {
    if id.is_empty()
        || !id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
    {
        return Err(EngineError::new(
            op,
            EngineErrorKind::Protocol,
            format!("not a container ID or name: {id:?}"),
        ));
    }
    Ok(())
}

/// `POST /containers/{id}/attach?stream=1&stdin=1`, upgraded to a raw
/// stream (SPEC §6.1 owner lifetime), on a connection of its own whose
/// descriptor is registered for forks the moment the socket exists
/// ([`super::take_owner_link_fds`]). The answer head (101, or 200 from an
/// engine that hijacks without upgrading) is read, then the socket leaves
/// the runtime and is only held: nothing is written to it, and no output
/// was asked for. bollard's attach keeps its socket inside hyper, where
/// its descriptor cannot be reached, hence this one request by hand.
pub(super) async fn attach_stdin(
    dial: &Dial,
    v: ApiVersion,
    id: &str,
    budget: Duration,
) -> Result<StdinHold, EngineError> {
    use std::os::fd::{AsRawFd, OwnedFd};
    path_id(Op::AttachContainer, id)?;
    let unreachable = |e: std::io::Error| {
        EngineError::new(
            Op::AttachContainer,
            EngineErrorKind::Unreachable,
            e.to_string(),
        )
    };
    let request = format!(
        "POST /v{v}/containers/{id}/attach?stream=1&stdin=1 HTTP/1.1\r\nHost: docker\r\nUser-Agent: odek\r\nContent-Length: 0\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n"
    );
    let exchange = async {
        // Each socket is registered before the request goes out; on an
        // error the registration (declared later) is dropped first.
        match &dial.address {
            Address::Unix { path } => {
                let mut conn = tokio::net::UnixStream::connect(path)
                    .await
                    .map_err(unreachable)?;
                let registered = super::owner_fds::Registered::new(conn.as_raw_fd())?;
                upgrade(&mut conn, &request, budget).await?;
                let fd = OwnedFd::from(conn.into_std().map_err(unreachable)?);
                Ok(StdinHold::with_fd(fd, registered))
            }
            Address::Tcp { authority } => {
                let conn = tokio::net::TcpStream::connect(authority.as_str())
                    .await
                    .map_err(unreachable)?;
                let registered = super::owner_fds::Registered::new(conn.as_raw_fd())?;
                // Only held from here on, nothing written: over TLS the
                // session is dropped and the TCP socket kept, whose close
                // ends the attach as it does in plain TCP.
                let conn = match dial.secure(conn, Op::AttachContainer).await? {
                    Secured::Plain(mut t) => {
                        upgrade(&mut t, &request, budget).await?;
                        t
                    }
                    Secured::Tls(mut t) => {
                        upgrade(&mut t, &request, budget).await?;
                        t.into_inner().0
                    }
                };
                let fd = OwnedFd::from(conn.into_std().map_err(unreachable)?);
                Ok(StdinHold::with_fd(fd, registered))
            }
            Address::Ssh { target } => {
                // The pipe to ssh's stdin is the link: while it is open the
                // remote connection is; the child dies with the hold.
                let mut conn =
                    SshStream::spawn(target, dial.connect_timeout, Op::AttachContainer).await?;
                let registered = super::owner_fds::Registered::new(conn.stdin_fd())?;
                let diagnostics = conn.diagnostics.clone();
                if let Err(e) = upgrade(&mut conn, &request, budget).await {
                    return Err(ssh_explained(e, &diagnostics, target).await);
                }
                Ok(StdinHold::with_conn(Box::new(conn), registered))
            }
        }
    };
    match tokio::time::timeout(budget, exchange).await {
        Ok(r) => r,
        Err(_) => Err(EngineError::new(
            Op::AttachContainer,
            EngineErrorKind::Timeout,
            format!("no answer within {:.1} s", budget.as_secs_f64()),
        )),
    }
}

/// `POST /containers/{id}/attach?stream=1&stdin=1&stdout=1&stderr=1`: the
/// owner link of a sandbox whose process is odek's supervisor, used both
/// ways. As [`attach_stdin`], the connection's descriptor is
/// registered for forks the moment the socket exists, and the registration
/// lives as long as the returned link's `keep`. The output is Docker's
/// multiplexed stream, split by [`demux`].
pub(super) async fn attach_session(
    dial: &Dial,
    v: ApiVersion,
    id: &str,
    budget: Duration,
) -> Result<super::Link, EngineError> {
    use std::os::fd::AsRawFd;
    path_id(Op::AttachContainer, id)?;
    let unreachable = |e: std::io::Error| {
        EngineError::new(
            Op::AttachContainer,
            EngineErrorKind::Unreachable,
            e.to_string(),
        )
    };
    let request = format!(
        "POST /v{v}/containers/{id}/attach?stream=1&stdin=1&stdout=1&stderr=1 HTTP/1.1\r\nHost: docker\r\nUser-Agent: odek\r\nContent-Length: 0\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n"
    );
    fn link(
        conn: impl Conn + 'static,
        leftover: Vec<u8>,
        registered: super::owner_fds::Registered,
    ) -> super::Link {
        let (read, write) = tokio::io::split(conn);
        super::Link {
            output: demux(read, leftover),
            input: Box::new(write),
            keep: Some(Box::new(registered)),
        }
    }
    let exchange = async {
        match &dial.address {
            Address::Unix { path } => {
                let mut conn = tokio::net::UnixStream::connect(path)
                    .await
                    .map_err(unreachable)?;
                let registered = super::owner_fds::Registered::new(conn.as_raw_fd())?;
                let leftover = upgrade(&mut conn, &request, budget).await?;
                Ok(link(conn, leftover, registered))
            }
            Address::Tcp { authority } => {
                let conn = tokio::net::TcpStream::connect(authority.as_str())
                    .await
                    .map_err(unreachable)?;
                let registered = super::owner_fds::Registered::new(conn.as_raw_fd())?;
                match dial.secure(conn, Op::AttachContainer).await? {
                    Secured::Plain(mut t) => {
                        let leftover = upgrade(&mut t, &request, budget).await?;
                        Ok(link(t, leftover, registered))
                    }
                    Secured::Tls(mut t) => {
                        let leftover = upgrade(&mut t, &request, budget).await?;
                        Ok(link(t, leftover, registered))
                    }
                }
            }
            Address::Ssh { target } => {
                let mut conn =
                    SshStream::spawn(target, dial.connect_timeout, Op::AttachContainer).await?;
                let registered = super::owner_fds::Registered::new(conn.stdin_fd())?;
                let diagnostics = conn.diagnostics.clone();
                match upgrade(&mut conn, &request, budget).await {
                    Ok(leftover) => Ok(link(conn, leftover, registered)),
                    Err(e) => Err(ssh_explained(e, &diagnostics, target).await),
                }
            }
        }
    };
    match tokio::time::timeout(budget, exchange).await {
        Ok(r) => r,
        Err(_) => Err(EngineError::new(
            Op::AttachContainer,
            EngineErrorKind::Timeout,
            format!("no answer within {:.1} s", budget.as_secs_f64()),
        )),
    }
}

/// Sends the attach `request` on `conn` and reads the answer's head: Ok
/// (with the stream's bytes read past the head) once the engine switched
/// the connection to a raw stream (101, or 200);
/// an error status is the engine's message (404 [`EngineErrorKind::NotFound`],
/// others `Rejected`), its body read as far as its length or its JSON goes.
pub(super) async fn upgrade(
    conn: &mut dyn Conn,
    request: &str,
    budget: Duration,
) -> Result<Vec<u8>, EngineError> {
    use tokio::io::AsyncReadExt;
    let err = |kind, message: String| EngineError::new(Op::AttachContainer, kind, message);
    let mut buf = [0u8; 1024];
    let (head, split) = send_and_read_head(conn, request, Op::AttachContainer, "attach").await?;
    let text = String::from_utf8_lossy(&head[..split]).into_owned();
    let mut lines = text.split("\r\n");
    let status: u16 = lines
        .next()
        .filter(|l| l.starts_with("HTTP/1."))
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| {
            err(
                EngineErrorKind::Protocol,
                "the attach answer is not HTTP/1.x".into(),
            )
        })?;
    if status == 101 || status == 200 {
        return Ok(head[split..].to_vec());
    }
    let length: Option<usize> = lines
        .take_while(|l| !l.is_empty())
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse().ok());
    let mut body = head[split..].to_vec();
    let rest = async {
        loop {
            let complete = match length {
                Some(n) => body.len() >= n,
                None => wait_json(&body).is_some(),
            };
            if complete || body.len() > 64 * 1024 {
                return;
            }
            match conn.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => body.extend_from_slice(&buf[..n]),
            }
        }
    };
    let _ = tokio::time::timeout(budget, rest).await;
    let message = wait_json(&body)
        .and_then(|j| j.get("message").and_then(|m| m.as_str()).map(String::from))
        .unwrap_or_else(|| format!("the daemon answered {status}"));
    Err(EngineError {
        op: Op::AttachContainer,
        kind: if status == 404 {
            EngineErrorKind::NotFound
        } else {
            EngineErrorKind::Rejected
        },
        status: Some(status),
        message,
    })
}

/// An attach over ssh that failed: the daemon's own answer (it has a
/// status) as it is, else what `ssh` said, explained
/// ([`super::ssh::Diagnostics::explain`]).
async fn ssh_explained(
    e: EngineError,
    diagnostics: &super::ssh::Diagnostics,
    target: &super::SshTarget,
) -> EngineError {
    if e.status.is_some() {
        return e;
    }
    diagnostics.explain(target, e.op, &e.message).await
}

/// The JSON object in a (possibly chunked) answer body: from its first `{`
/// to its last `}`.
pub(super) fn wait_json(body: &[u8]) -> Option<serde_json::Value> {
    let start = body.iter().position(|&b| b == b'{')?;
    let end = body.iter().rposition(|&b| b == b'}')?;
    serde_json::from_slice(body.get(start..=end)?).ok()
}

/// Splits Docker's multiplexed stream (a non-TTY attach or exec: 8-byte
/// headers `[stream, 0, 0, 0, len: u32 BE]`) into the stdout bytes; stderr
/// chunks go to the log (the supervisor's own diagnostics).
pub(super) fn demux(
    read: impl tokio::io::AsyncRead + Send + Unpin + 'static,
    leftover: Vec<u8>,
) -> futures_util::stream::BoxStream<'static, std::io::Result<Vec<u8>>> {
    use tokio::io::AsyncReadExt;
    struct St<R> {
        read: R,
        buf: Vec<u8>,
        done: bool,
    }
    let st = St {
        read,
        buf: leftover,
        done: false,
    };
    use futures_util::StreamExt;
    futures_util::stream::unfold(st, |mut st| async move {
        loop {
            if st.buf.len() >= 8 {
                let len = u32::from_be_bytes([st.buf[4], st.buf[5], st.buf[6], st.buf[7]]) as usize;
                if st.buf.len() >= 8 + len {
                    let kind = st.buf[0];
                    let payload: Vec<u8> = st.buf[8..8 + len].to_vec();
                    st.buf.drain(..8 + len);
                    match kind {
                        1 => return Some((Ok(payload), st)),
                        _ => {
                            tracing::debug!(
                                "supervisor stderr: {}",
                                crate::text::foreign(&String::from_utf8_lossy(&payload))
                            );
                            continue;
                        }
                    }
                }
            }
            if st.done {
                return None;
            }
            let mut chunk = vec![0u8; 64 * 1024];
            match st.read.read(&mut chunk).await {
                Ok(0) => return None,
                Ok(n) => st.buf.extend_from_slice(&chunk[..n]),
                Err(e) => {
                    st.done = true;
                    return Some((Err(e), st));
                }
            }
        }
    })
    .boxed()
}

#[cfg(test)]
mod demux_tests {
    use super::demux;
    use futures_util::StreamExt;

    fn muxed(stream: u8, payload: &[u8]) -> Vec<u8> {
        let mut v = vec![stream, 0, 0, 0];
        v.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        v.extend_from_slice(payload);
        v
    }

    #[tokio::test]
    async fn demux_keeps_stdout_and_drops_stderr() {
        let mut wire = muxed(1, b"ab");
        wire.extend(muxed(2, b"diag"));
        wire.extend(muxed(1, b"cd"));
        let (a, b) = wire.split_at(5);
        let s = demux(std::io::Cursor::new(b.to_vec()), a.to_vec());
        let got: Vec<Vec<u8>> = s.map(|r| r.expect("read")).collect().await;
        assert_eq!(got.concat(), b"abcd");
    }
}

/// How to reach the daemon for a request written by hand: its address and,
/// for a `tcp://` endpoint secured with TLS, the client configuration
/// ([`tls_config`]) with the material it came from.
#[derive(Clone)]
pub(super) struct Dial {
    /// The daemon's address.
    pub(super) address: Address,
    /// The TLS client configuration, or why it could not be built.
    pub(super) tls: Option<(Result<Arc<rustls::ClientConfig>, String>, Tls)>,
    /// `ssh`'s ConnectTimeout for an `ssh://` endpoint (SPEC §6.2.2).
    pub(super) connect_timeout: Duration,
}

/// A TCP connection as [`Dial::secure`] left it.
pub(super) enum Secured {
    /// Plain TCP.
    Plain(tokio::net::TcpStream),
    /// TLS over it, the daemon's certificate verified.
    Tls(Box<tokio_rustls::client::TlsStream<tokio::net::TcpStream>>),
}

impl Dial {
    /// `tcp` as it is, or with TLS on it (the handshake done) when the
    /// endpoint is secured. Errors (for `op`): the configuration could not
    /// be built, or the handshake failed — a refused certificate is
    /// `Rejected` with the fix ([`tls_failure`]), anything else
    /// `Unreachable`.
    pub(super) async fn secure(
        &self,
        tcp: tokio::net::TcpStream,
        op: Op,
    ) -> Result<Secured, EngineError> {
        let Some((config, tls)) = &self.tls else {
            return Ok(Secured::Plain(tcp));
        };
        let config = config
            .clone()
            .map_err(|e| EngineError::new(op, EngineErrorKind::Rejected, e))?;
        let Address::Tcp { authority } = &self.address else {
            return Ok(Secured::Plain(tcp));
        };
        let name = server_name(authority)
            .map_err(|e| EngineError::new(op, EngineErrorKind::Rejected, e))?;
        tokio_rustls::TlsConnector::from(config)
            .connect(name, tcp)
            .await
            .map(|t| Secured::Tls(Box::new(t)))
            .map_err(|e| {
                let (refused, message) = tls_failure(&e, &self.address, tls);
                let kind = if refused {
                    EngineErrorKind::Rejected
                } else {
                    EngineErrorKind::Unreachable
                };
                EngineError::new(op, kind, message)
            })
    }
}

/// The name the daemon's certificate must be for: the host of
/// `host:port` (an IP address or a DNS name).
pub(super) fn server_name(
    authority: &str,
) -> Result<rustls_pki_types::ServerName<'static>, String> {
    let host = authority
        .rsplit_once(':')
        .map_or(authority, |(h, _)| h)
        .trim_start_matches('[')
        .trim_end_matches(']');
    rustls_pki_types::ServerName::try_from(host.to_string())
        .map_err(|e| format!("{host:?} cannot be checked against a TLS certificate ({e})"))
}

/// The TLS client configuration for `tls` (SPEC §6.2.1): the daemon's
/// certificate must chain to `ca.pem` alone (no system roots, as the
/// Docker CLI's `ExclusiveRootPools`), and odek presents `cert.pem` with
/// `key.pem`; TLS 1.2 or 1.3 with ring's algorithms. Errors: why the
/// material does not make a configuration, naming the files.
pub(super) fn tls_config(tls: &Tls) -> Result<Arc<rustls::ClientConfig>, String> {
    use rustls_pki_types::pem::PemObject;
    let shown = crate::text::shown;
    let mut roots = rustls::RootCertStore::empty();
    for c in super::tls::certificates(&tls.pem.ca) {
        roots.add(c).map_err(|e| {
            format!(
                "{} holds a CA certificate odek cannot use ({e})",
                shown(&tls.ca)
            )
        })?;
    }
    let certs = super::tls::certificates(&tls.pem.cert);
    let key = rustls_pki_types::PrivateKeyDer::from_pem_slice(&tls.pem.key)
        .map_err(|e| format!("{} holds no usable private key ({e})", shown(&tls.key)))?;
    // ring: builds offline with a C compiler (aws-lc-rs, rustls's other
    // provider, brings post-quantum key exchange but needs more to build).
    #[allow(deprecated)]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_client_auth_cert(certs, key)
        .map_err(|e| {
            format!(
                "{} and {} are not a certificate and its key ({e}); give the client certificate and the key it was made for",
                shown(&tls.cert),
                shown(&tls.key)
            )
        })?;
    Ok(Arc::new(config))
}

/// What a failed TLS connection to `address` means, and the fix: `(true,
/// …)` when a certificate was refused — the daemon's by odek (not signed
/// by `ca.pem`, not for this host, expired) or odek's by the daemon (not
/// signed by a CA the daemon trusts) — so the endpoint is refused rather
/// than taken as down; `(false, …)` for anything else (the text of every
/// cause).
pub(super) fn tls_failure(
    e: &(dyn std::error::Error + 'static),
    address: &Address,
    tls: &Tls,
) -> (bool, String) {
    let mut chain = Vec::new();
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    let mut rustls_error = None;
    while let Some(c) = cur {
        let text = c.to_string();
        if chain.last() != Some(&text) {
            chain.push(text);
        }
        if let Some(r) = c.downcast_ref::<rustls::Error>() {
            rustls_error = Some(r.clone());
        }
        // An I/O error's `source` skips what it wraps (hyper-rustls wraps
        // rustls's I/O error in another): follow what it wraps instead.
        cur = match c.downcast_ref::<std::io::Error>() {
            Some(io) => io
                .get_ref()
                .map(|i| i as &(dyn std::error::Error + 'static)),
            None => c.source(),
        };
    }
    let cause = chain.join(": ");
    let shown = crate::text::shown;
    let fix = match &rustls_error {
        Some(rustls::Error::InvalidCertificate(rustls::CertificateError::NotValidForName))
        | Some(rustls::Error::InvalidCertificate(
            rustls::CertificateError::NotValidForNameContext { .. },
        )) => Some(format!(
            "the daemon's certificate is not made out for the host of {address}: connect by a name or address the certificate lists, or give the daemon a certificate for it"
        )),
        Some(rustls::Error::InvalidCertificate(_)) => Some(format!(
            "the daemon's certificate was refused: it must be signed by the CA in {} (and be in date); put the CA that signed the daemon's certificate there",
            shown(&tls.ca)
        )),
        Some(rustls::Error::AlertReceived(_)) => Some(format!(
            "the daemon refused odek's client certificate {}: give a certificate signed by the CA the daemon trusts (its --tlscacert), with its key in {}",
            shown(&tls.cert),
            shown(&tls.key)
        )),
        _ => None,
    };
    match fix {
        Some(fix) => (true, format!("TLS with {address} failed ({cause}): {fix}")),
        None => (false, format!("TLS with {address} failed: {cause}")),
    }
}
