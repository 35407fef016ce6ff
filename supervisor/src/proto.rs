//! The supervisor's wire protocol (protocol version [`VERSION`]).
//!
//! Both directions carry frames on one byte stream: the container's attached
//! stdin/stdout for the owner's session (the owner link), or a relay's
//! exec stream for any other process (docs/SANDBOXING.md, "The supervisor").
//!
//! A frame is `len: u32 BE | kind: u8 | id: u32 BE | payload`, where `len`
//! counts the bytes after itself (`5 + payload.len()`) and the payload is at
//! most [`MAX_PAYLOAD`] bytes. `id` names the command a frame is about
//! (chosen by the core, unique per session; 0 for frames about the session).
//! Control payloads are JSON objects ([`Start`], [`Ready`], [`Exit`], …);
//! output and stdin payloads are raw bytes.
//!
//! A session, in order: the supervisor sends [`Kind::Ready`]; the core sends
//! [`Kind::Start`] per command; the supervisor answers [`Kind::Started`] or
//! [`Kind::Failed`], then streams [`Kind::Stdout`]/[`Kind::Stderr`], then one
//! [`Kind::Exit`]. Commands overlap freely. The end of the stream that
//! carries the owner's session kills every process in the sandbox and ends
//! the supervisor (and so the container).
//!
//! The owner's stream is held by the supervisor's *keeper* (the container's
//! process), which relays whole frames to and from a *server* it forked.
//! When the server dies, the keeper kills the process trees of the
//! commands it was running, starts a new one and sends [`Kind::Restarted`]
//! (never a partial frame: the keeper decodes both directions). From then
//! on it drops every frame of the core until the core answers
//! [`Kind::Resume`]: a command the core started before it read
//! `Restarted` never runs, and every command it had in flight has an
//! unknown status. A relay's stream ends with the server that served it.

use serde::{Deserialize, Serialize};

/// The protocol version this crate speaks; [`Ready::version`] carries the
/// supervisor's.
pub const VERSION: u32 = 2;

/// The largest payload of one frame, in bytes (1 MiB). A longer frame is a
/// protocol error that ends the session.
pub const MAX_PAYLOAD: usize = 1 << 20;

/// The largest output payload the supervisor sends in one frame (64 KiB).
pub const OUTPUT_CHUNK: usize = 64 * 1024;

/// Server deaths the keeper restarts from within [`RESTART_WINDOW_SECS`];
/// one more ends the sandbox (a [`Kind::Notice`] says so, then the keeper
/// exits 71 after killing every process), so that a broken server does
/// not spin.
pub const MAX_RESTARTS: usize = 3;

/// The window of [`MAX_RESTARTS`], in seconds.
pub const RESTART_WINDOW_SECS: u64 = 60;

/// Bytes before a frame's payload: the length, kind and id.
pub const HEADER_LEN: usize = 9;

/// Background processes one server keeps at once, running or ended
/// ([`Kind::Background`]): a new one evicts the oldest ended one; when all
/// of them run, the new one is refused ([`Kind::Failed`]).
pub const MAX_BACKGROUND: usize = 32;

/// Output bytes kept per background process (1 MiB, stdout and stderr
/// together): older bytes are dropped first, and a [`Polled`] from a
/// cursor before what is kept says how many were lost.
pub const BACKGROUND_BUFFER: usize = 1 << 20;

/// Most entries `odek-supervisor fs list` returns (the first ones by
/// name); its line then says `"truncated":true` and the directory's
/// `"total"`.
pub const FS_LIST_MAX_ENTRIES: usize = 10_000;

/// Most bytes of the entries of `odek-supervisor fs list`'s line (4 MiB,
/// as JSON): the entries that would pass it are cut as
/// [`FS_LIST_MAX_ENTRIES`] cuts them.
pub const FS_LIST_MAX_BYTES: usize = 4 << 20;

/// Most bytes of any other line an `odek-supervisor fs` operation writes
/// (a read's head line, a write's result, a listing's line without its
/// entries): the core reads no more of them.
pub const FS_LINE_MAX: usize = 64 * 1024;

/// What a frame carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// Core → supervisor: run a command ([`Start`] JSON).
    Start = 0x01,
    /// Core → supervisor: bytes for the command's stdin; an empty payload
    /// closes it.
    Stdin = 0x02,
    /// Core → supervisor: a new terminal size ([`WinSize`] JSON) for a
    /// command started with a terminal.
    Resize = 0x03,
    /// Core → supervisor: cancel the command (its tree is killed as a
    /// timeout kills it; the [`Exit`] says `cancelled`).
    Kill = 0x04,
    /// Core → supervisor: answered by [`Kind::Pong`] with the same payload.
    Ping = 0x05,
    /// Core → keeper, id 0, on the owner's stream: the answer to
    /// [`Kind::Restarted`]; the keeper forwards the core's frames to the
    /// new server again from here on.
    Resume = 0x06,
    /// Core → supervisor: start a background command ([`Start`] JSON,
    /// without `stdin` or `tty`): it runs with no attached caller, its
    /// output goes into a buffer of [`BACKGROUND_BUFFER`] bytes, and it
    /// ends with the sandbox, on [`Kind::KillProcess`] or at its own
    /// `timeout_ms`, never with the session that started it. Answered by
    /// [`Kind::Spawned`] or [`Kind::Failed`]. Only sent to a supervisor
    /// whose [`Ready::background`] is set.
    Background = 0x07,
    /// Core → supervisor: a background process's output since a cursor
    /// ([`Poll`] JSON). Answered by [`Kind::Stdout`] / [`Kind::Stderr`]
    /// frames with the request's id (the output, in the order written),
    /// then [`Kind::Polled`]; or by [`Kind::Failed`] (unknown process,
    /// cursor beyond the end).
    Poll = 0x08,
    /// Core → supervisor: kill a background process's tree ([`ProcessRef`]
    /// JSON; also what is left of an ended one's session). Answered by
    /// [`Kind::Polled`] (no output, its status after the kill) or
    /// [`Kind::Failed`].
    KillProcess = 0x09,
    /// Supervisor → core, id 0, first frame of a session ([`Ready`] JSON).
    Ready = 0x81,
    /// Supervisor → core: the command runs ([`Started`] JSON).
    Started = 0x82,
    /// Supervisor → core: bytes the command wrote to stdout (or to its
    /// terminal).
    Stdout = 0x83,
    /// Supervisor → core: bytes the command wrote to stderr.
    Stderr = 0x84,
    /// Supervisor → core: the command ended ([`Exit`] JSON); the last frame
    /// about that id.
    Exit = 0x85,
    /// Supervisor → core: the command could not start, or the request was
    /// refused ([`Failed`] JSON); the last frame about that id.
    Failed = 0x86,
    /// Supervisor → core: the answer to [`Kind::Ping`].
    Pong = 0x87,
    /// Supervisor → core, id 0: something the operator should know about the
    /// session (UTF-8 text), e.g. a refused relay connection.
    Notice = 0x88,
    /// Keeper → core, id 0, on the owner's stream: the server died and a new
    /// one serves ([`Restarted`] JSON); every command of the old one has an
    /// unknown status. The core answers [`Kind::Resume`].
    Restarted = 0x89,
    /// Supervisor → core: a background command runs ([`Spawned`] JSON).
    Spawned = 0x8a,
    /// Supervisor → core: the end of a [`Kind::Poll`] or
    /// [`Kind::KillProcess`] answer ([`Polled`] JSON).
    Polled = 0x8b,
    /// Server → keeper only (never reaches the core): a command's root
    /// started ([`Tracked`] JSON), so that the keeper can kill its tree
    /// if the server dies.
    Tracked = 0x90,
    /// Server → keeper only: the command's root with this pid ([`Tracked`]
    /// JSON) was reaped or killed.
    Untracked = 0x91,
}

impl Kind {
    /// The kind for a wire byte; `None` for an unknown one.
    pub fn from_byte(b: u8) -> Option<Kind> {
        Some(match b {
            0x01 => Kind::Start,
            0x02 => Kind::Stdin,
            0x03 => Kind::Resize,
            0x04 => Kind::Kill,
            0x05 => Kind::Ping,
            0x06 => Kind::Resume,
            0x07 => Kind::Background,
            0x08 => Kind::Poll,
            0x09 => Kind::KillProcess,
            0x81 => Kind::Ready,
            0x82 => Kind::Started,
            0x83 => Kind::Stdout,
            0x84 => Kind::Stderr,
            0x85 => Kind::Exit,
            0x86 => Kind::Failed,
            0x87 => Kind::Pong,
            0x88 => Kind::Notice,
            0x89 => Kind::Restarted,
            0x8a => Kind::Spawned,
            0x8b => Kind::Polled,
            0x90 => Kind::Tracked,
            0x91 => Kind::Untracked,
            _ => return None,
        })
    }
}

/// One frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// What it carries.
    pub kind: Kind,
    /// The command it is about (0: the session).
    pub id: u32,
    /// JSON for control kinds, raw bytes for output and stdin.
    pub payload: Vec<u8>,
}

impl Frame {
    /// A frame whose payload is `msg` as JSON.
    pub fn json<T: Serialize>(kind: Kind, id: u32, msg: &T) -> Frame {
        // Serializing these plain structs cannot fail.
        let payload = serde_json::to_vec(msg).unwrap_or_default();
        Frame { kind, id, payload }
    }

    /// The payload read as JSON `T`.
    ///
    /// Errors: [`ProtoError::BadPayload`] naming the kind.
    pub fn parse<T: for<'de> Deserialize<'de>>(&self) -> Result<T, ProtoError> {
        serde_json::from_slice(&self.payload).map_err(|e| ProtoError::BadPayload {
            kind: self.kind,
            reason: e.to_string(),
        })
    }

    /// Appends the frame's wire bytes to `out`.
    ///
    /// Panics never; a payload over [`MAX_PAYLOAD`] is the caller's bug and
    /// is refused by the reading side.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        let len = (5 + self.payload.len()) as u32;
        out.extend_from_slice(&len.to_be_bytes());
        out.push(self.kind as u8);
        out.extend_from_slice(&self.id.to_be_bytes());
        out.extend_from_slice(&self.payload);
    }

    /// The frame's wire bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_LEN + self.payload.len());
        self.encode_into(&mut out);
        out
    }
}

/// Why a byte stream is not a valid frame sequence. Any of these ends the
/// session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProtoError {
    /// A length field below 5 or over `5 + MAX_PAYLOAD`.
    BadLength(u32),
    /// An unknown kind byte.
    UnknownKind(u8),
    /// A control payload that is not the JSON its kind needs.
    BadPayload {
        /// The frame's kind.
        kind: Kind,
        /// The JSON parser's message.
        reason: String,
    },
}

impl std::fmt::Display for ProtoError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProtoError::BadLength(n) => write!(f, "frame length {n} out of range"),
            ProtoError::UnknownKind(k) => write!(f, "unknown frame kind 0x{k:02x}"),
            ProtoError::BadPayload { kind, reason } => {
                write!(f, "bad {kind:?} payload: {reason}")
            }
        }
    }
}

impl std::error::Error for ProtoError {}

/// Reassembles frames from a byte stream cut anywhere (Docker's attach
/// stream splits and joins writes freely).
#[derive(Debug, Default)]
pub struct Decoder {
    buf: Vec<u8>,
    start: usize,
}

impl Decoder {
    /// An empty decoder.
    pub fn new() -> Decoder {
        Decoder::default()
    }

    /// Adds bytes read from the stream.
    pub fn push(&mut self, bytes: &[u8]) {
        if self.start > 0 && self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// The next whole frame, `Ok(None)` when more bytes are needed.
    ///
    /// Errors: [`ProtoError::BadLength`], [`ProtoError::UnknownKind`]; the
    /// decoder is then unusable (the session ends).
    pub fn next_frame(&mut self) -> Result<Option<Frame>, ProtoError> {
        let avail = &self.buf[self.start..];
        if avail.len() < 4 {
            return Ok(None);
        }
        let len = u32::from_be_bytes([avail[0], avail[1], avail[2], avail[3]]);
        if len < 5 || len as usize > 5 + MAX_PAYLOAD {
            return Err(ProtoError::BadLength(len));
        }
        let total = 4 + len as usize;
        if avail.len() < total {
            return Ok(None);
        }
        let kind = Kind::from_byte(avail[4]).ok_or(ProtoError::UnknownKind(avail[4]))?;
        let id = u32::from_be_bytes([avail[5], avail[6], avail[7], avail[8]]);
        let payload = avail[HEADER_LEN..total].to_vec();
        self.start += total;
        if self.start > 64 * 1024 && self.start * 2 > self.buf.len() {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        Ok(Some(Frame { kind, id, payload }))
    }
}

/// A terminal size in character cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WinSize {
    /// Columns.
    pub cols: u16,
    /// Rows.
    pub rows: u16,
}

/// [`Kind::Start`]: one command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Start {
    /// The program and its arguments; `argv[0]` is looked up in `PATH` (the
    /// command's `PATH`) when it has no `/`. A shell command arrives as
    /// `["/bin/sh", "-c", script]`.
    pub argv: Vec<String>,
    /// Variables set over the supervisor's own environment (the container's:
    /// the image's `ENV` and the plan's), later pairs winning.
    #[serde(default)]
    pub env: Vec<(String, String)>,
    /// The working directory (absolute, inside the sandbox).
    pub cwd: String,
    /// The user the command runs as. Never the supervisor's own uid (a
    /// `Failed` refusal).
    pub uid: u32,
    /// Its primary group.
    pub gid: u32,
    /// Its supplementary groups (default none).
    #[serde(default)]
    pub groups: Vec<u32>,
    /// Run on a new terminal of this size (stdout and stderr are then one
    /// stream, sent as [`Kind::Stdout`]); `None`: pipes.
    #[serde(default)]
    pub tty: Option<WinSize>,
    /// The command's stdin is fed by [`Kind::Stdin`] frames; `false`:
    /// `/dev/null`.
    #[serde(default)]
    pub stdin: bool,
    /// Kill the command's tree after this many milliseconds (the [`Exit`]
    /// says `timed_out`).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

/// [`Kind::Ready`]: the supervisor is up and confined.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ready {
    /// Its protocol version ([`VERSION`]).
    pub version: u32,
    /// Its process ID in the sandbox's PID namespace.
    pub pid: u32,
    /// Its real, effective and saved uid (all equal), which no command gets.
    pub uid: u32,
    /// Its gid.
    pub gid: u32,
    /// Its effective capabilities as `/proc/self/status` shows them (hex).
    pub cap_eff: String,
    /// The abstract socket a relay connects to (without the leading NUL).
    pub relay: String,
    /// `[uid, gid]`: the only account its commands may run as (`serve
    /// --commands UID:GID`, which odek always passes), without
    /// supplementary groups; every other `Start` is refused. `None`: not
    /// bound (the supervisor's own tests only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commands: Option<[u32; 2]>,
    /// The supervisor serves background processes ([`Kind::Background`],
    /// [`Kind::Poll`], [`Kind::KillProcess`]) within these limits; `None`
    /// (a supervisor before them, same [`VERSION`]): it does not, and
    /// those frames must not be sent (it would end the session on them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub background: Option<BackgroundLimits>,
}

/// [`Ready::background`]: what a server keeps of background processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackgroundLimits {
    /// At most this many at once ([`MAX_BACKGROUND`]).
    pub max_processes: u32,
    /// Output bytes kept per process ([`BACKGROUND_BUFFER`]).
    pub buffer_bytes: u64,
}

/// [`Kind::Spawned`]: a background command runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spawned {
    /// Its name for [`Kind::Poll`] and [`Kind::KillProcess`]: `<tag>-<n>`,
    /// the tag 16 hex digits the server drew at random when it started;
    /// never reused by this server, and unknown to a server restarted after
    /// it and to any other sandbox's.
    pub process: String,
    /// Its root's process ID in the sandbox (also its process group and
    /// session ID).
    pub pid: u32,
}

/// [`Kind::Poll`]: which output to read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Poll {
    /// The process ([`Spawned::process`]).
    pub process: String,
    /// Output offset to read from (bytes of stdout and stderr together since
    /// the process started); `None`: from the oldest byte kept.
    #[serde(default)]
    pub cursor: Option<u64>,
}

/// [`Kind::KillProcess`]: which process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProcessRef {
    /// The process ([`Spawned::process`]).
    pub process: String,
}

/// [`Kind::Polled`]: where the output sent before it starts and ends, and
/// the process's status.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Polled {
    /// The process.
    pub process: String,
    /// Its root's pid.
    pub pid: u32,
    /// The offset of the first byte sent (the cursor asked for, or the
    /// oldest byte kept when that was dropped).
    pub cursor: u64,
    /// The cursor for the next poll: the offset after the last byte sent.
    pub next: u64,
    /// Bytes between the cursor asked for and [`Polled::cursor`] that the
    /// buffer no longer held (dropped to stay within [`BACKGROUND_BUFFER`]).
    pub dropped: u64,
    /// How it ended; `None` while its root runs. Its output may still grow
    /// after that while a process it started keeps the pipes open.
    #[serde(default)]
    pub exit: Option<Exit>,
}

/// [`Kind::Restarted`]: the keeper started a new server after the last
/// one died.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Restarted {
    /// How many servers died in this sandbox so far (1 after the first).
    pub generation: u32,
    /// The new server's process ID.
    pub pid: u32,
    /// How the old one ended (`killed by signal 9`, `exited with status 70`,
    /// `sent an invalid frame: …`).
    pub reason: String,
    /// The commands it was running (their trees killed by the keeper).
    pub commands: u32,
    /// Every process of those trees was seen gone (from `/proc`).
    pub killed: bool,
}

/// [`Kind::Tracked`] / [`Kind::Untracked`]: a command's root process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tracked {
    /// Its pid in the sandbox's PID namespace.
    pub pid: u32,
    /// Its start time in clock ticks after boot (`/proc/<pid>/stat` field
    /// 22), which tells it from a later process with the same pid: the
    /// keeper drops a [`Kind::Untracked`] whose start is not the tracked
    /// one's (a reused pid).
    pub start: u64,
}

/// [`Kind::Started`]: the command runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Started {
    /// Its process ID in the sandbox's PID namespace (also its process group
    /// and session ID).
    pub pid: u32,
}

/// [`Kind::Exit`]: how the command ended.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exit {
    /// Its exit status when it exited.
    pub code: Option<i32>,
    /// The signal that ended it, when one did.
    pub signal: Option<i32>,
    /// Its timeout fired.
    #[serde(default)]
    pub timed_out: bool,
    /// A [`Kind::Kill`] (or the end of its session) stopped it.
    #[serde(default)]
    pub cancelled: bool,
    /// After a timeout or cancel: every process of its tree was seen gone by
    /// the supervisor (from `/proc`, not from any program of the image).
    #[serde(default)]
    pub killed: bool,
    /// After a timeout or cancel: processes that may belong to the command but
    /// were left running (see docs/SANDBOXING.md for when).
    #[serde(default)]
    pub escaped: Vec<u32>,
    /// A kill of a background process whose root had already ended found
    /// no process of its tree left: nothing was killed (`killed` is then
    /// false). Absent (false) from a supervisor older than the field.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub nothing_to_kill: bool,
}

/// [`Kind::Failed`]: the command did not start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failed {
    /// Why, for people (the command's argv is not repeated).
    pub message: String,
    /// Why, for the core, when its program could not be started in the
    /// usual ways a shell reports (absent: any other refusal, or a
    /// supervisor older than the field). The core words it — the same
    /// words as for a command through the exec API — and picks the exit
    /// status (127 or 126).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_started: Option<NotStarted>,
}

impl Failed {
    /// A refusal with no [`NotStarted`] reason.
    pub fn new(message: impl Into<String>) -> Failed {
        Failed {
            message: message.into(),
            not_started: None,
        }
    }
}

impl From<String> for Failed {
    fn from(message: String) -> Failed {
        Failed::new(message)
    }
}

impl From<&str> for Failed {
    fn from(message: &str) -> Failed {
        Failed::new(message)
    }
}

/// Why a command's program did not start ([`Failed::not_started`]);
/// serialized as `not_found`, `not_executable`, `no_workdir`,
/// `no_interpreter`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NotStarted {
    /// No such program: not on the command's `PATH`, or the path named does
    /// not exist (`ENOENT`).
    NotFound,
    /// The program exists but cannot be executed: no execute permission, or
    /// not a format the kernel runs (`EACCES`, `ENOEXEC`).
    NotExecutable,
    /// The command's working directory does not exist (`ENOENT`/`ENOTDIR`
    /// on `chdir`).
    NoWorkdir,
    /// The program exists but its interpreter does not: the program its
    /// `#!` line names, or an ELF's dynamic loader (`ENOENT` from exec of
    /// a file that exists).
    NoInterpreter,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_survive_any_split() {
        let frames = vec![
            Frame::json(Kind::Started, 7, &Started { pid: 42 }),
            Frame {
                kind: Kind::Stdout,
                id: 7,
                payload: b"hello\n".to_vec(),
            },
            Frame {
                kind: Kind::Stdin,
                id: 7,
                payload: vec![],
            },
        ];
        let wire: Vec<u8> = frames.iter().flat_map(|f| f.encode()).collect();
        for cut in 1..wire.len() {
            let mut d = Decoder::new();
            let mut got = vec![];
            for chunk in wire.chunks(cut) {
                d.push(chunk);
                while let Some(f) = d.next_frame().expect("valid stream") {
                    got.push(f);
                }
            }
            assert_eq!(got, frames, "split every {cut} bytes");
        }
    }

    #[test]
    fn bad_lengths_and_kinds_are_errors() {
        let mut d = Decoder::new();
        d.push(&[0, 0, 0, 4, 1]);
        assert_eq!(d.next_frame(), Err(ProtoError::BadLength(4)));
        let mut d = Decoder::new();
        d.push(&((6 + MAX_PAYLOAD) as u32).to_be_bytes());
        assert!(matches!(d.next_frame(), Err(ProtoError::BadLength(_))));
        let mut d = Decoder::new();
        d.push(&[0, 0, 0, 5, 0x7f, 0, 0, 0, 1]);
        assert_eq!(d.next_frame(), Err(ProtoError::UnknownKind(0x7f)));
    }

    #[test]
    fn start_refuses_unknown_members() {
        let f = Frame {
            kind: Kind::Start,
            id: 1,
            payload: br#"{"argv":["true"],"cwd":"/","uid":1,"gid":1,"privileged":true}"#.to_vec(),
        };
        assert!(f.parse::<Start>().is_err());
    }
}
