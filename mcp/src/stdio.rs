//! The stdio transport's reader: how long one incoming message may be, and
//! what becomes of a longer one (docs/MCP.md, "Limits").
//!
//! MCP over stdio is one JSON-RPC message a line. rmcp's transport drops a
//! line over its limit and only logs it through `tracing`, so the client
//! would wait forever for the answer. [`Lines`] sits between stdin and the
//! transport: it counts the bytes of each line, and past
//! [`MAX_MESSAGE_BYTES`] it hands the transport no more of that line but
//! its end, says so on stderr, and, when the line was a request whose
//! `id` and `method` it found, hands the transport instead a request of
//! [`TOO_LARGE_METHOD`] with that `id`, which the server answers with an
//! error ([`too_large`]) — the client gets an answer to its request.

use std::pin::Pin;
use std::task::{Context, Poll};

use odek_core::files::FILE_WRITE_LIMIT;
use rmcp::model::{CustomRequest, ErrorCode, ErrorData};
use tokio::io::{AsyncRead, ReadBuf};

/// The longest message `odek mcp` reads, in bytes (97 MiB): the largest
/// `write_file` its limit allows (16 MiB of content) in the widest JSON
/// encoding a client may use for text (every byte a control character
/// written `\u00XX`: 6 bytes each; base64 takes 4 bytes per 3), and 1 MiB
/// for the rest of the message.
pub const MAX_MESSAGE_BYTES: usize = 6 * FILE_WRITE_LIMIT as usize + (1 << 20);

/// The method of the request [`Lines`] puts in place of one over
/// [`MAX_MESSAGE_BYTES`]: `params` are `{"bytes", "limit", "method"}`.
pub const TOO_LARGE_METHOD: &str = "odek/message_too_large";

/// The error answering [`TOO_LARGE_METHOD`], from its `params`.
pub fn too_large(request: &CustomRequest) -> ErrorData {
    let params = request.params.clone().unwrap_or_default();
    let bytes = params.get("bytes").and_then(|v| v.as_u64()).unwrap_or(0);
    let method = params
        .get("method")
        .and_then(|v| v.as_str())
        .unwrap_or("the request");
    ErrorData::new(
        ErrorCode::INVALID_REQUEST,
        format!(
            "{} was not read: it is {bytes} bytes, more than odek mcp reads in one message ({MAX_MESSAGE_BYTES} bytes, enough for write_file's limit of 16 MiB of content in any JSON encoding); nothing was done. Send less in one call: write a large file in parts of at most 16 MiB",
            odek_core::text::foreign(method)
        ),
        Some(serde_json::json!({"bytes": bytes, "limit": MAX_MESSAGE_BYTES})),
    )
}

/// A reader of JSON-RPC lines that cuts every line at `limit` bytes (see
/// the module's docs). The transport must accept lines of `limit + 1`
/// bytes (the line and its newline).
pub struct Lines<R> {
    inner: R,
    limit: usize,
    /// Bytes of the current line so far (its newline not counted).
    line: usize,
    /// The current line's top-level `id` and `method`.
    members: Members,
    /// The current line passed `limit`: its bytes are dropped until its end.
    over: bool,
    /// Bytes read from `inner`, to be looked at.
    scratch: Vec<u8>,
    /// Bytes for the transport, from `at` on.
    ready: Vec<u8>,
    at: usize,
    /// Where a dropped line is said (stderr; a test's buffer).
    say: fn(&str),
}

impl<R> Lines<R> {
    /// `inner`'s lines, each cut at `limit` bytes; a cut one is said with
    /// `say`.
    pub fn new(inner: R, limit: usize, say: fn(&str)) -> Lines<R> {
        Lines {
            inner,
            limit,
            line: 0,
            members: Members::default(),
            over: false,
            scratch: vec![0; 64 * 1024],
            ready: Vec::new(),
            at: 0,
            say,
        }
    }

    /// Looks at `n` bytes of `scratch`, moving what the transport gets to
    /// `ready`.
    fn sift(&mut self, n: usize) {
        self.ready.clear();
        self.at = 0;
        let mut from = 0;
        for i in 0..n {
            let b = self.scratch[i];
            if b == b'\n' {
                if self.over {
                    from = i + 1;
                    self.ended_over();
                } else {
                    self.ready.extend_from_slice(&self.scratch[from..=i]);
                    from = i + 1;
                }
                self.line = 0;
                self.members = Members::default();
                continue;
            }
            self.line += 1;
            self.members.feed(b);
            if !self.over && self.line > self.limit {
                self.ready.extend_from_slice(&self.scratch[from..i]);
                self.over = true;
            }
            if self.over {
                from = i + 1;
            }
        }
        if !self.over {
            self.ready.extend_from_slice(&self.scratch[from..n]);
        }
    }

    /// The end of a line over the limit: its first `limit` bytes, which the
    /// transport holds, end here (an incomplete message, which it ignores),
    /// and a request in its place follows when it was one.
    fn ended_over(&mut self) {
        self.over = false;
        self.ready.push(b'\n');
        let bytes = self.line;
        let members = std::mem::take(&mut self.members);
        let method = members
            .method
            .and_then(|m| serde_json::from_slice::<String>(&m).ok());
        let id = members
            .id
            .and_then(|i| serde_json::from_slice::<serde_json::Value>(&i).ok())
            .filter(|i| i.is_string() || i.is_number());
        let shown = method.as_deref().map_or_else(
            || "a message".to_string(),
            |m| format!("a {} request", odek_core::text::foreign(m)),
        );
        match (id, method) {
            (Some(id), Some(method)) => {
                let request = serde_json::json!({
                    "jsonrpc": "2.0",
                    "id": id,
                    "method": TOO_LARGE_METHOD,
                    "params": {"bytes": bytes, "limit": self.limit, "method": method},
                });
                self.ready.extend_from_slice(request.to_string().as_bytes());
                self.ready.push(b'\n');
                (self.say)(&format!(
                    "odek: {shown} of {bytes} bytes was longer than the {} bytes odek mcp reads in one message and was not read; the client was answered with an error",
                    self.limit
                ));
            }
            _ => (self.say)(&format!(
                "odek: {shown} of {bytes} bytes was longer than the {} bytes odek mcp reads in one message and was dropped (no request id found in it, so no error could be answered)",
                self.limit
            )),
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Lines<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        loop {
            if this.at < this.ready.len() {
                let n = buf.remaining().min(this.ready.len() - this.at);
                buf.put_slice(&this.ready[this.at..this.at + n]);
                this.at += n;
                return Poll::Ready(Ok(()));
            }
            let mut scratch = ReadBuf::new(&mut this.scratch);
            match Pin::new(&mut this.inner).poll_read(cx, &mut scratch) {
                Poll::Ready(Ok(())) => {
                    let n = scratch.filled().len();
                    if n == 0 {
                        return Poll::Ready(Ok(())); // end of the stream
                    }
                    this.sift(n);
                }
                other => return other,
            }
        }
    }
}

/// The top-level `id` and `method` of one JSON object as its bytes come
/// (their raw JSON values; nested members are skipped), without keeping
/// the rest.
#[derive(Debug, Default)]
struct Members {
    /// Nesting depth: 1 inside the top-level object.
    depth: u32,
    in_string: bool,
    escaped: bool,
    /// The string being read is a top-level key.
    in_key: bool,
    /// A top-level key comes next.
    want_key: bool,
    /// The last top-level key (its first bytes).
    key: Vec<u8>,
    /// The raw value of `id` or `method` being read.
    value: Option<Vec<u8>>,
    id: Option<Vec<u8>>,
    method: Option<Vec<u8>>,
}

/// Most bytes of a key or a value [`Members`] keeps.
const MEMBER_MAX: usize = 256;

impl Members {
    fn feed(&mut self, b: u8) {
        if self.in_string {
            if self.in_key {
                if self.key.len() < MEMBER_MAX {
                    self.key.push(b);
                }
            } else if let Some(v) = self.value.as_mut().filter(|v| v.len() < MEMBER_MAX) {
                v.push(b);
            }
            if self.escaped {
                self.escaped = false;
            } else if b == b'\\' {
                self.escaped = true;
            } else if b == b'"' {
                self.in_string = false;
                if self.in_key {
                    self.in_key = false;
                    self.key.pop();
                } else if self.depth == 1 {
                    self.end_value();
                }
            }
            return;
        }
        match b {
            b'"' => {
                self.in_string = true;
                if self.depth == 1 && self.want_key {
                    self.in_key = true;
                    self.want_key = false;
                    self.key.clear();
                } else if let Some(v) = self.value.as_mut().filter(|_| self.depth == 1) {
                    v.push(b);
                }
            }
            b'{' | b'[' => {
                self.depth += 1;
                if self.depth == 1 && b == b'{' {
                    self.want_key = true;
                } else if self.depth == 2 {
                    self.value = None; // not an id or a method
                }
            }
            b'}' | b']' => {
                if self.depth == 1 {
                    self.end_value();
                }
                self.depth = self.depth.saturating_sub(1);
            }
            b':' if self.depth == 1 => {
                if self.key == b"id" || self.key == b"method" {
                    self.value = Some(Vec::new());
                }
            }
            b',' if self.depth == 1 => {
                self.end_value();
                self.want_key = true;
            }
            b' ' | b'\t' | b'\r' => {}
            _ => {
                if let Some(v) = self.value.as_mut().filter(|v| v.len() < MEMBER_MAX) {
                    if self.depth == 1 {
                        v.push(b);
                    }
                }
            }
        }
    }

    fn end_value(&mut self) {
        if let Some(v) = self.value.take() {
            if self.key == b"id" {
                self.id = Some(v);
            } else if self.key == b"method" {
                self.method = Some(v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use tokio::io::AsyncReadExt;

    static SAID: Mutex<Vec<String>> = Mutex::new(Vec::new());

    fn say(line: &str) {
        SAID.lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(line.to_string());
    }

    async fn through(input: &[u8], limit: usize) -> String {
        let mut out = Vec::new();
        // A reader that hands out its bytes in small pieces.
        let (mut w, r) = tokio::io::duplex(7);
        let input = input.to_vec();
        let feed = tokio::spawn(async move {
            tokio::io::AsyncWriteExt::write_all(&mut w, &input)
                .await
                .expect("write");
        });
        Lines::new(r, limit, say)
            .read_to_end(&mut out)
            .await
            .expect("read");
        feed.await.expect("fed");
        String::from_utf8(out).expect("utf-8")
    }

    /// The limit write_file's description states is this one.
    #[test]
    fn the_stated_limit_is_the_one_applied() {
        assert_eq!(MAX_MESSAGE_BYTES, 101_711_872);
        assert_eq!(MAX_MESSAGE_BYTES >> 20, 97);
        let tools = crate::OdekMcp::tool_router().list_all();
        let write = tools
            .iter()
            .find(|t| t.name == "write_file")
            .and_then(|t| t.description.clone())
            .expect("write_file is described");
        assert!(write.contains("97 MiB (101711872 bytes)"), "{write}");
    }

    #[tokio::test]
    async fn short_lines_pass_unchanged() {
        let input = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n\n{\"a\":[1,2]}\n";
        assert_eq!(through(input.as_bytes(), 64).await, input);
    }

    #[tokio::test]
    async fn a_long_request_becomes_one_answered_with_its_id_and_is_said() {
        let big = "x".repeat(500);
        let input = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":\"r-7\",\"method\":\"tools/call\",\"params\":{{\"name\":\"write_file\",\"arguments\":{{\"id\":99,\"content\":\"{big}\"}}}}}}\n{{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}}\n"
        );
        let out = through(input.as_bytes(), 100).await;
        let lines: Vec<&str> = out.split('\n').collect();
        assert_eq!(lines.len(), 4, "{out}");
        assert_eq!(lines[0], &input[..100], "the first 100 bytes, then its end");
        let stand_in: serde_json::Value = serde_json::from_str(lines[1]).expect("JSON");
        assert_eq!(stand_in["id"], "r-7", "the top-level id, not a nested one");
        assert_eq!(stand_in["method"], TOO_LARGE_METHOD);
        assert_eq!(stand_in["params"]["method"], "tools/call");
        assert_eq!(stand_in["params"]["bytes"], input.find('\n').unwrap_or(0));
        assert_eq!(
            lines[2],
            "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}"
        );
        let said = SAID.lock().unwrap_or_else(|p| p.into_inner()).join("\n");
        assert!(
            said.contains("a tools/call request of") && said.contains("100 bytes"),
            "{said}"
        );
        let e = too_large(&CustomRequest::new(
            TOO_LARGE_METHOD,
            Some(stand_in["params"].clone()),
        ));
        assert!(
            e.message.contains("tools/call was not read"),
            "{}",
            e.message
        );
    }

    #[tokio::test]
    async fn an_id_after_the_params_is_found_and_a_response_gets_no_stand_in() {
        let big = "y".repeat(300);
        let input = format!(
            "{{\"method\":\"tools/call\",\"params\":{{\"content\":\"{big}\\\"\"}},\"id\":41,\"jsonrpc\":\"2.0\"}}\n{{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{{\"x\":\"{big}\"}}}}\n"
        );
        let out = through(input.as_bytes(), 100).await;
        let lines: Vec<&str> = out.split('\n').collect();
        assert_eq!(lines.len(), 4, "{out}");
        let stand_in: serde_json::Value = serde_json::from_str(lines[1]).expect("JSON");
        assert_eq!(stand_in["id"], 41);
        // A response (no method): only its first bytes and its end.
        assert_eq!(lines[2].len(), 100);
        assert_eq!(lines[3], "");
    }
}
