//! The proxy's server: HTTP/1 from hyper, one task per connection. A
//! CONNECT is checked by its host and port, the name resolved once and the
//! addresses checked, the checked address dialled (never resolved again),
//! and the tunnel's first TLS record must be a ClientHello whose SNI is the
//! CONNECT host; a plain `http://` request is checked the same way by its
//! URI's host (its Host header must agree) and forwarded in origin form.
//! Everything else is refused at once: an HTTP 403 naming the policy, or
//! for a tunnel whose ClientHello does not match, the tunnel closed.

use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, HOST};
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use odek_egress::policy::{self, Denial, Policy, LOG_PREFIX};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

type Body = BoxBody<Bytes, hyper::Error>;

/// How long a name lookup, a dial, or a tunnel's ClientHello may take.
const STEP: Duration = Duration::from_secs(10);

/// The largest first TLS record read (a record is at most 16 KiB plus
/// 2 KiB of expansion).
const MAX_RECORD: usize = 16384 + 2048;

/// Listens on the policy's port and serves until the process ends.
pub async fn serve(policy: Policy) -> std::io::Result<()> {
    let listener = TcpListener::bind(("0.0.0.0", policy.port)).await?;
    say(&policy::ready_line(&policy));
    let policy = Arc::new(policy);
    loop {
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let policy = Arc::clone(&policy);
        tokio::spawn(async move {
            let svc = service_fn(move |req| handle(Arc::clone(&policy), req));
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc)
                .with_upgrades()
                .await;
        });
    }
}

/// One line on stdout, at once (odek reads it from the container's log).
fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn full(text: String) -> Body {
    Full::new(Bytes::from(text))
        .map_err(|never| match never {})
        .boxed()
}

fn empty() -> Body {
    Empty::<Bytes>::new()
        .map_err(|never| match never {})
        .boxed()
}

fn plain(status: StatusCode, text: String) -> Response<Body> {
    let mut r = Response::new(full(text));
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(
        "content-type",
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    h.insert("connection", HeaderValue::from_static("close"));
    r
}

/// The refusal of `host:port`: logged, and a 403 that names the policy.
fn deny(policy: &Policy, host: &str, port: u16, why: &Denial) -> Response<Body> {
    say(&policy::deny_line(host, port, why));
    let mut r = plain(
        StatusCode::FORBIDDEN,
        format!(
            "odek egress policy (sandbox_egress) refused {}:{port}: {why}. Allowed: {}. Only the operator can widen sandbox_egress.\n",
            policy::shown_host(host),
            policy.allowed_text()
        ),
    );
    r.headers_mut()
        .insert("x-odek-egress", HeaderValue::from_static("denied"));
    r
}

/// A listed, checked destination that could not be reached.
fn unreachable(host: &str, port: u16, ip: IpAddr, e: &str) -> Response<Body> {
    say(&format!(
        "{LOG_PREFIX} unreachable {}:{port} {ip} {e}",
        policy::shown_host(host)
    ));
    plain(
        StatusCode::BAD_GATEWAY,
        format!(
            "odek egress proxy: {}:{port} ({ip}) is allowed but could not be reached: {e}\n",
            policy::shown_host(host)
        ),
    )
}

async fn handle(
    policy: Arc<Policy>,
    req: Request<Incoming>,
) -> Result<Response<Body>, hyper::Error> {
    if req.method() == Method::CONNECT {
        Ok(connect(policy, req).await)
    } else {
        forward(policy, req).await
    }
}

/// Looks `host` up once and picks the first address the policy allows.
async fn resolve(policy: &Policy, host: &str, port: u16) -> Result<IpAddr, Denial> {
    let looked = tokio::time::timeout(STEP, tokio::net::lookup_host((host, port))).await;
    let addrs: Vec<IpAddr> = match looked {
        Ok(Ok(it)) => it.map(|a| a.ip()).collect(),
        _ => return Err(Denial::Unresolved),
    };
    policy.pick_address(&addrs)
}

async fn dial(ip: IpAddr, port: u16) -> Result<TcpStream, String> {
    match tokio::time::timeout(STEP, TcpStream::connect(SocketAddr::new(ip, port))).await {
        Ok(Ok(s)) => Ok(s),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer within {} s", STEP.as_secs())),
    }
}

/// Name check, lookup and address check, dial: the connection, or the
/// response that refuses.
async fn open(policy: &Policy, host: &str, port: u16) -> Result<TcpStream, Response<Body>> {
    if let Err(d) = policy.check_name(host, port) {
        return Err(deny(policy, host, port, &d));
    }
    let ip = resolve(policy, host, port)
        .await
        .map_err(|d| deny(policy, host, port, &d))?;
    dial(ip, port)
        .await
        .map_err(|e| unreachable(host, port, ip, &e))
}

async fn connect(policy: Arc<Policy>, req: Request<Incoming>) -> Response<Body> {
    let Some((host, port)) = req
        .uri()
        .authority()
        .and_then(|a| Some((a.host().to_string(), a.port_u16()?)))
    else {
        return deny(
            &policy,
            "",
            0,
            &Denial::Unsupported("a CONNECT request names host:port".into()),
        );
    };
    let upstream = match open(&policy, &host, port).await {
        Ok(s) => s,
        Err(refusal) => return refusal,
    };
    tokio::spawn(async move {
        if let Ok(upgraded) = hyper::upgrade::on(req).await {
            tunnel(&policy, TokioIo::new(upgraded), upstream, &host, port).await;
        }
    });
    Response::new(empty())
}

/// The tunnel of an allowed CONNECT: the client's first TLS record must be
/// a ClientHello naming `host`; then bytes flow both ways.
async fn tunnel<C>(policy: &Policy, mut client: C, mut upstream: TcpStream, host: &str, port: u16)
where
    C: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let first = tokio::time::timeout(STEP, first_record(&mut client)).await;
    let (record, sni) = match first {
        Ok(Ok(found)) => found,
        Ok(Err(d)) => {
            say(&policy::deny_line(host, port, &d));
            return;
        }
        Err(_) => {
            say(&policy::deny_line(host, port, &Denial::NotTls));
            return;
        }
    };
    if policy::normalize(&sni) != policy::normalize(host) {
        say(&policy::deny_line(host, port, &Denial::SniMismatch(sni)));
        return;
    }
    let _ = policy;
    say(&format!(
        "{LOG_PREFIX} allow {}:{port} tls",
        policy::shown_host(host)
    ));
    if upstream.write_all(&record).await.is_err() {
        return;
    }
    let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
}

/// Reads the first TLS record and the server name of the ClientHello in it.
async fn first_record<C>(client: &mut C) -> Result<(Vec<u8>, String), Denial>
where
    C: tokio::io::AsyncRead + Unpin,
{
    let mut head = [0u8; 5];
    client
        .read_exact(&mut head)
        .await
        .map_err(|_| Denial::NotTls)?;
    // Handshake records only.
    if head[0] != 0x16 {
        return Err(Denial::NotTls);
    }
    let len = usize::from(u16::from_be_bytes([head[3], head[4]]));
    if len == 0 || len > MAX_RECORD {
        return Err(Denial::NotTls);
    }
    let mut record = head.to_vec();
    record.resize(5 + len, 0);
    client
        .read_exact(&mut record[5..])
        .await
        .map_err(|_| Denial::NotTls)?;
    let sni = server_name(&record)?;
    Ok((record, sni))
}

/// The SNI host name of the ClientHello in one TLS record (tls-parser).
fn server_name(record: &[u8]) -> Result<String, Denial> {
    use tls_parser::{
        parse_tls_extensions, parse_tls_plaintext, SNIType, TlsExtension, TlsMessage,
        TlsMessageHandshake,
    };
    let (_, plaintext) = parse_tls_plaintext(record).map_err(|_| Denial::NotTls)?;
    for msg in &plaintext.msg {
        let TlsMessage::Handshake(TlsMessageHandshake::ClientHello(hello)) = msg else {
            continue;
        };
        let Some(ext) = hello.ext else {
            return Err(Denial::NoSni);
        };
        let (_, exts) = parse_tls_extensions(ext).map_err(|_| Denial::NotTls)?;
        for e in exts {
            if let TlsExtension::SNI(names) = e {
                for (kind, name) in names {
                    if kind == SNIType::HostName {
                        return std::str::from_utf8(name)
                            .map(str::to_string)
                            .map_err(|_| Denial::SniMismatch("(not UTF-8)".into()));
                    }
                }
            }
        }
        return Err(Denial::NoSni);
    }
    Err(Denial::NotTls)
}

/// A plain HTTP request: `GET http://host[:port]/path`, forwarded in origin
/// form over a connection to the checked address.
async fn forward(
    policy: Arc<Policy>,
    mut req: Request<Incoming>,
) -> Result<Response<Body>, hyper::Error> {
    let uri = req.uri().clone();
    let target = uri
        .authority()
        .filter(|_| uri.scheme_str() == Some("http"))
        .map(|a| (a.host().to_string(), a.port_u16().unwrap_or(80)));
    let Some((host, port)) = target else {
        return Ok(deny(
            &policy,
            "",
            0,
            &Denial::Unsupported(
                "odek's egress proxy forwards CONNECT (for https) and absolute http:// requests only"
                    .into(),
            ),
        ));
    };
    if req.headers().get_all(HOST).iter().count() > 1 {
        return Ok(deny(
            &policy,
            &host,
            port,
            &Denial::Unsupported("the request has more than one Host header".into()),
        ));
    }
    if let Some(h) = req.headers().get(HOST) {
        let text = h.to_str().unwrap_or_default();
        let named = match text.rsplit_once(':') {
            Some((h, p)) if p.parse::<u16>().is_ok() => h,
            _ => text,
        };
        if policy::normalize(named) != policy::normalize(&host) {
            return Ok(deny(
                &policy,
                &host,
                port,
                &Denial::Unsupported(
                    "the Host header names another host than the request's URI".into(),
                ),
            ));
        }
    }
    let stream = match open(&policy, &host, port).await {
        Ok(s) => s,
        Err(refusal) => return Ok(refusal),
    };
    let (mut sender, conn) = match hyper::client::conn::http1::handshake(TokioIo::new(stream)).await
    {
        Ok(x) => x,
        Err(e) => {
            return Ok(plain(
                StatusCode::BAD_GATEWAY,
                format!("odek egress proxy: {e}\n"),
            ))
        }
    };
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let origin = uri.path_and_query().map_or("/", |p| p.as_str());
    *req.uri_mut() = origin.parse().unwrap_or_default();
    let headers = req.headers_mut();
    headers.remove("proxy-connection");
    headers.remove("proxy-authorization");
    // The upstream sees the checked host only, whatever the client wrote.
    let value = if port == 80 {
        host.clone()
    } else {
        format!("{host}:{port}")
    };
    match HeaderValue::from_str(&value) {
        Ok(v) => {
            headers.insert(HOST, v);
        }
        Err(_) => {
            headers.remove(HOST);
        }
    }
    say(&format!(
        "{LOG_PREFIX} allow {}:{port} http",
        policy::shown_host(&host)
    ));
    match sender.send_request(req).await {
        Ok(resp) => Ok(resp.map(BodyExt::boxed)),
        Err(e) => Ok(plain(
            StatusCode::BAD_GATEWAY,
            format!("odek egress proxy: {e}\n"),
        )),
    }
}
