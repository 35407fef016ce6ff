//! The core's side of odek's supervisor (docs/SANDBOXING.md, "The
//! supervisor"): a [`Session`] speaks the framed protocol of
//! [`odek_supervisor::proto`] over a byte stream to the sandbox's
//! `odek-supervisor` — the owner's attachment to the container (the owner
//! link itself) or a relay exec for any other process.
//!
//! One task per session reads frames and routes them to the command they
//! are about; commands overlap. When the stream ends, every command still
//! running learns that its status is unknown ([`Ended::Lost`]); never a
//! success. When the supervisor's server died and its keeper started a new
//! one ([`Kind::Restarted`], on the owner's stream), every command of the
//! old server learns the same ([`Ended::Restarted`]), and the session goes
//! on with the new server once odek answered [`Kind::Resume`].

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::stream::BoxStream;
use futures_util::StreamExt;
use odek_supervisor::proto::{self, Decoder, Frame, Kind};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

use crate::engine::{Link, OutputSink, StreamKind};

/// The directory mounted read-only in every supervised sandbox (a mount
/// point, so no command can rename or replace it): it holds only
/// [`SUPERVISOR_PATH`].
pub const SUPERVISOR_DIR: &str = "/.odek";

/// Where the supervisor binary is in every sandbox that has one.
pub const SUPERVISOR_PATH: &str = "/.odek/odek-supervisor";

/// The uid and gid the supervisor runs as, which no command is ever given
/// (a plan whose user is this uid runs without a supervisor).
pub const SUPERVISOR_UID: u32 = 65533;

/// The capabilities the supervisor keeps and no command has: SETUID and
/// SETGID (to become the command's user), KILL (to kill a command's tree of
/// another uid), SETPCAP (to empty each command's bounding set).
pub const SUPERVISOR_CAPS: [&str; 4] = ["SETUID", "SETGID", "KILL", "SETPCAP"];

/// How long a launch waits for the supervisor's first frame.
pub const READY_BUDGET: Duration = Duration::from_secs(5);

pub use crate::config::SUPERVISOR_ENV;

/// How a command ended as far as the session knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// The supervisor's report.
    Exit(proto::Exit),
    /// It did not start (the supervisor's reason).
    Failed(proto::Failed),
    /// The session ended first: the command's status is unknown.
    Lost,
    /// The supervisor's server died while the command ran and a new one
    /// serves the session: the command's status is unknown (its tree was
    /// killed by the keeper when `killed`).
    Restarted(proto::Restarted),
}

type Routes = Arc<Mutex<HashMap<u32, mpsc::Sender<Frame>>>>;

/// What a session knows of its supervisor's restarts.
#[derive(Debug, Default)]
struct RestartNews {
    /// The last [`Kind::Restarted`].
    last: Option<proto::Restarted>,
    /// No command was running when it came, so no result said it: the next
    /// command's note says it ([`Session::take_unsaid_restart`]).
    unsaid: bool,
}

type Writer = Arc<tokio::sync::Mutex<Box<dyn AsyncWrite + Send + Unpin>>>;

/// Writes `frame`; false (and the session marked dead) on failure.
async fn write_frame(
    w: &mut (dyn AsyncWrite + Send + Unpin),
    frame: &Frame,
    alive: &AtomicBool,
) -> bool {
    let bytes = frame.encode();
    let ok = w.write_all(&bytes).await.is_ok() && w.flush().await.is_ok();
    if !ok {
        alive.store(false, Ordering::Release);
    }
    ok
}

/// Frames queued per command before the session's reader waits (a slow
/// output sink slows the stream instead of growing memory).
const ROUTE_QUEUE: usize = 64;

/// How long a command may take to report its end after odek asked for its
/// kill (its timeout, a cancel, or [`Session::run`]'s own deadline).
pub const KILL_WAIT: Duration = Duration::from_secs(10);

/// One session with a sandbox's supervisor.
pub struct Session {
    writer: Writer,
    routes: Routes,
    /// Restarts seen so far (a command started in an earlier generation and
    /// without a report is [`Ended::Restarted`]).
    generation: Arc<AtomicU32>,
    /// The last restart, and whether nobody was told of it yet.
    news: Arc<Mutex<RestartNews>>,
    next_id: AtomicU32,
    alive: Arc<AtomicBool>,
    ready: proto::Ready,
    reader: tokio::task::JoinHandle<()>,
    _keep: Option<Box<dyn Send + Sync>>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("ready", &self.ready)
            .field("alive", &self.is_alive())
            .finish()
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl Session {
    /// Opens a session on `link`: waits up to `budget` for the supervisor's
    /// [`Kind::Ready`], then routes frames on a task of the current runtime.
    ///
    /// Errors: a reason for people (no Ready in time, the stream ended, a
    /// protocol error, another protocol version, a supervisor not confined
    /// to [`SUPERVISOR_UID`]).
    pub async fn open(link: Link, budget: Duration) -> Result<Session, String> {
        let Link {
            mut output,
            input,
            keep,
        } = link;
        let mut decoder = Decoder::new();
        let first = async {
            loop {
                match decoder.next_frame() {
                    Ok(Some(f)) => return Ok(f),
                    Ok(None) => {}
                    Err(e) => return Err(format!("the supervisor's first frame is invalid: {e}")),
                }
                match output.next().await {
                    Some(Ok(bytes)) => decoder.push(&bytes),
                    Some(Err(e)) => return Err(format!("reading the supervisor failed: {e}")),
                    None => return Err("the supervisor ended before it was ready".into()),
                }
            }
        };
        let frame = tokio::time::timeout(budget, first).await.map_err(|_| {
            format!(
                "the supervisor was not ready within {} s",
                budget.as_secs_f64()
            )
        })??;
        if frame.kind != Kind::Ready {
            return Err(format!(
                "the supervisor's first frame is {:?}, not Ready",
                frame.kind
            ));
        }
        let ready: proto::Ready = frame.parse().map_err(|e| e.to_string())?;
        if ready.version != proto::VERSION {
            return Err(format!(
                "the supervisor speaks protocol {}, odek {}",
                ready.version,
                proto::VERSION
            ));
        }
        if ready.uid != SUPERVISOR_UID {
            return Err(format!(
                "the supervisor runs as uid {}, not {SUPERVISOR_UID}",
                ready.uid
            ));
        }
        let routes: Routes = Arc::default();
        let alive = Arc::new(AtomicBool::new(true));
        let writer: Writer = Arc::new(tokio::sync::Mutex::new(input));
        let generation = Arc::new(AtomicU32::new(0));
        let news = Arc::new(Mutex::new(RestartNews::default()));
        let reader = tokio::spawn(read_frames(
            output,
            decoder,
            Shared {
                routes: Arc::clone(&routes),
                alive: Arc::clone(&alive),
                writer: Arc::clone(&writer),
                generation: Arc::clone(&generation),
                news: Arc::clone(&news),
            },
        ));
        Ok(Session {
            writer,
            routes,
            generation,
            news,
            next_id: AtomicU32::new(1),
            alive,
            ready,
            reader,
            _keep: keep,
        })
    }

    /// What the supervisor said when the session opened.
    pub fn ready(&self) -> &proto::Ready {
        &self.ready
    }

    /// Ok when the supervisor is bound to run commands only as
    /// `uid`:`gid` (`serve --commands`, which odek always passes); the
    /// reason otherwise: a supervisor that is not was not started by odek
    /// for this plan, and nothing is sent to it.
    pub fn check_bound(&self, uid: u32, gid: u32) -> Result<(), String> {
        match self.ready.commands {
            Some(ids) if ids == [uid, gid] => Ok(()),
            Some([u, g]) => Err(format!(
                "its supervisor runs commands as {u}:{g}, not the plan's {uid}:{gid}"
            )),
            None => Err(format!(
                "its supervisor is not bound to the plan's account {uid}:{gid}"
            )),
        }
    }

    /// False once the stream ended.
    pub fn is_alive(&self) -> bool {
        self.alive.load(Ordering::Acquire)
    }

    async fn send(&self, frame: &Frame) -> bool {
        let mut w = self.writer.lock().await;
        write_frame(&mut **w, frame, &self.alive).await
    }

    /// The last restart of the supervisor's server, when no command's
    /// result has said it yet (taken: said once). For the note of the next
    /// command.
    pub fn take_unsaid_restart(&self) -> Option<proto::Restarted> {
        let mut news = lock(&self.news);
        if std::mem::take(&mut news.unsaid) {
            news.last.clone()
        } else {
            None
        }
    }

    /// Runs one command: sends `start`, streams its output to `output`,
    /// and returns how it ended. When `cancel` completes first, the
    /// supervisor is told to kill the command's tree and its report is
    /// awaited (it says `cancelled`). `stdin` (when `start.stdin`) feeds the
    /// command; its end closes the command's stdin.
    ///
    /// A command whose session ends before its report is [`Ended::Lost`];
    /// so is one that outlives `deadline` (odek's own watchdog, beyond the
    /// supervisor's timeout) by [`KILL_WAIT`] after its kill was asked
    /// for, or a cancel by as much.
    pub async fn run(
        &self,
        start: &proto::Start,
        output: OutputSink<'_>,
        cancel: impl Future<Output = ()>,
        stdin: Option<BoxStream<'_, Vec<u8>>>,
        deadline: Option<Duration>,
    ) -> Ended {
        self.run_io(start, output, cancel, stdin, None, deadline)
            .await
    }

    /// [`Session::run`] with terminal resizes: each size `resize` yields is
    /// sent as a [`Kind::Resize`] frame while the command runs (the
    /// supervisor applies it to the command's terminal when `start.tty`
    /// asked for one, and ignores it otherwise). Stdin chunks and resizes
    /// go out in the order they arrive.
    pub async fn run_io(
        &self,
        start: &proto::Start,
        output: OutputSink<'_>,
        cancel: impl Future<Output = ()>,
        stdin: Option<BoxStream<'_, Vec<u8>>>,
        resize: Option<BoxStream<'_, proto::WinSize>>,
        deadline: Option<Duration>,
    ) -> Ended {
        let Some((id, mut rx, generation, _route)) = self.open_route(Kind::Start, start).await
        else {
            return Ended::Lost;
        };
        // The end of the route: the session ended, or the server restarted
        // since the Start.
        let unknown = || {
            let last = lock(&self.news).last.clone();
            match last {
                Some(r) if self.generation.load(Ordering::Acquire) != generation => {
                    Ended::Restarted(r)
                }
                _ => Ended::Lost,
            }
        };
        // The one writer of this command's stdin and resize frames, polled
        // beside everything below (never blocked behind it, nor it behind a
        // frame sent while it is suspended: see the kill below).
        let feed = async {
            let mut stdin = stdin;
            let mut resize = resize;
            while stdin.is_some() || resize.is_some() {
                let next_in = async {
                    match stdin.as_mut() {
                        Some(s) => s.next().await,
                        None => std::future::pending().await,
                    }
                };
                let next_size = async {
                    match resize.as_mut() {
                        Some(s) => s.next().await,
                        None => std::future::pending().await,
                    }
                };
                let frames: Vec<Frame> = tokio::select! {
                    chunk = next_in => match chunk {
                        Some(chunk) => chunk
                            .chunks(proto::OUTPUT_CHUNK)
                            .map(|piece| Frame {
                                kind: Kind::Stdin,
                                id,
                                payload: piece.to_vec(),
                            })
                            .collect(),
                        None => {
                            // Its end closes the command's stdin.
                            stdin = None;
                            vec![Frame {
                                kind: Kind::Stdin,
                                id,
                                payload: vec![],
                            }]
                        }
                    },
                    size = next_size => match size {
                        Some(ws) => vec![Frame::json(Kind::Resize, id, &ws)],
                        None => {
                            resize = None;
                            vec![]
                        }
                    },
                };
                for f in &frames {
                    if !self.send(f).await {
                        return std::future::pending::<()>().await;
                    }
                }
            }
            std::future::pending::<()>().await
        };
        tokio::pin!(feed);
        tokio::pin!(cancel);
        let watchdog = async {
            match deadline {
                Some(d) => tokio::time::sleep(d).await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(watchdog);
        // Set once odek asked for the kill: the report must come by then.
        let mut killed_by: Option<tokio::time::Instant> = None;
        loop {
            let give_up = async {
                match killed_by {
                    Some(t) => tokio::time::sleep_until(t).await,
                    None => std::future::pending().await,
                }
            };
            let ask_kill = tokio::select! {
                f = rx.recv() => {
                    let Some(frame) = f else {
                        return unknown();
                    };
                    match frame.kind {
                        Kind::Stdout => output(StreamKind::Stdout, &frame.payload),
                        Kind::Stderr => output(StreamKind::Stderr, &frame.payload),
                        Kind::Exit => {
                            return match frame.parse::<proto::Exit>() {
                                Ok(e) => Ended::Exit(e),
                                Err(_) => Ended::Lost,
                            }
                        }
                        Kind::Failed => {
                            return Ended::Failed(
                                frame
                                    .parse::<proto::Failed>()
                                    .unwrap_or_else(|e| proto::Failed::new(e.to_string())),
                            )
                        }
                        _ => {}
                    }
                    false
                }
                () = &mut feed => false,
                () = &mut cancel, if killed_by.is_none() => true,
                () = &mut watchdog, if killed_by.is_none() => true,
                () = give_up => {
                    tracing::warn!("the supervisor did not report a killed command within {} s", KILL_WAIT.as_secs());
                    return Ended::Lost;
                }
            };
            if ask_kill {
                killed_by = Some(tokio::time::Instant::now() + KILL_WAIT);
                let kill = Frame {
                    kind: Kind::Kill,
                    id,
                    payload: vec![],
                };
                // The feed may hold the writer, suspended mid-frame: keep
                // polling it until the kill is written (it never ends).
                let sent = tokio::select! {
                    sent = self.send(&kill) => sent,
                    () = &mut feed => false,
                };
                if !sent {
                    return Ended::Lost;
                }
            }
        }
    }
}

/// What a request ([`Session::request`]) got back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// The supervisor's answer (`frame`: [`Kind::Spawned`] or
    /// [`Kind::Polled`]) and the output frames that came before it, in
    /// order.
    Reply {
        /// `(stream, bytes)` as sent.
        output: Vec<(StreamKind, Vec<u8>)>,
        /// The closing frame.
        frame: Frame,
    },
    /// The supervisor refused (its reason).
    Failed(proto::Failed),
    /// The session ended first, or no answer came within the budget.
    Lost,
    /// The server died and a new one serves since the request was sent.
    Restarted(proto::Restarted),
    /// More output came before the answer than a supervisor sends for one
    /// ([`proto::BACKGROUND_BUFFER`]): odek read no more of it.
    TooMuch,
}

impl Session {
    /// True when the supervisor serves background processes
    /// ([`proto::Ready::background`]); an older one would end the session
    /// on their frames, so nothing is sent to it.
    pub fn serves_background(&self) -> bool {
        self.ready.background.is_some()
    }

    /// The last restart of the supervisor's server this session saw.
    pub fn last_restart(&self) -> Option<proto::Restarted> {
        lock(&self.news).last.clone()
    }

    /// Sends one request frame (`kind`: [`Kind::Background`],
    /// [`Kind::Poll`] or [`Kind::KillProcess`], with `payload` as JSON)
    /// and waits up to `budget` for its answer.
    pub async fn request<T: serde::Serialize>(
        &self,
        kind: Kind,
        payload: &T,
        budget: Duration,
    ) -> Answer {
        let Some((_, mut rx, generation, _route)) = self.open_route(kind, payload).await else {
            return Answer::Lost;
        };
        let mut output = vec![];
        // A process's whole buffer at most: no more is held, whatever
        // answers in the supervisor's place.
        let mut left = proto::BACKGROUND_BUFFER;
        let answer = async {
            while let Some(frame) = rx.recv().await {
                if matches!(frame.kind, Kind::Stdout | Kind::Stderr) {
                    let Some(rest) = left.checked_sub(frame.payload.len()) else {
                        return Some(Answer::TooMuch);
                    };
                    left = rest;
                }
                match frame.kind {
                    Kind::Stdout => output.push((StreamKind::Stdout, frame.payload)),
                    Kind::Stderr => output.push((StreamKind::Stderr, frame.payload)),
                    Kind::Failed => {
                        return Some(Answer::Failed(
                            frame
                                .parse::<proto::Failed>()
                                .unwrap_or_else(|e| proto::Failed::new(e.to_string())),
                        ))
                    }
                    Kind::Spawned | Kind::Polled => {
                        return Some(Answer::Reply {
                            output: std::mem::take(&mut output),
                            frame,
                        })
                    }
                    _ => {}
                }
            }
            None
        };
        match tokio::time::timeout(budget, answer).await {
            Ok(Some(a)) => a,
            Ok(None) => match self.last_restart() {
                Some(r) if self.generation.load(Ordering::Acquire) != generation => {
                    Answer::Restarted(r)
                }
                _ => Answer::Lost,
            },
            Err(_) => Answer::Lost,
        }
    }
}

/// A request's route: its id, the frames the reader routes to it, the
/// server generation it was sent to, and the guard that removes it.
type Route<'a> = (u32, mpsc::Receiver<Frame>, u32, RouteGuard<'a>);

impl Session {
    /// Registers a route for a new request id and writes the request's
    /// first frame (`kind`, `payload` as JSON) — the route, the generation
    /// and the frame under the writer's lock, which the reader holds while
    /// it handles a restart: a frame written before odek's Resume (which
    /// the keeper drops) belongs to the old generation and its route ends
    /// Restarted, never waits forever. `None`: the session is gone and
    /// nothing was sent.
    async fn open_route<T: serde::Serialize>(&self, kind: Kind, payload: &T) -> Option<Route<'_>> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::channel(ROUTE_QUEUE);
        let mut w = self.writer.lock().await;
        let generation = self.generation.load(Ordering::Acquire);
        lock(&self.routes).insert(id, tx);
        if !self.is_alive()
            || !write_frame(&mut **w, &Frame::json(kind, id, payload), &self.alive).await
        {
            lock(&self.routes).remove(&id);
            return None;
        }
        drop(w);
        let guard = RouteGuard {
            routes: &self.routes,
            id,
        };
        Some((id, rx, generation, guard))
    }
}

struct RouteGuard<'a> {
    routes: &'a Routes,
    id: u32,
}

impl Drop for RouteGuard<'_> {
    fn drop(&mut self) {
        lock(self.routes).remove(&self.id);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// What the reader shares with its [`Session`].
struct Shared {
    routes: Routes,
    alive: Arc<AtomicBool>,
    writer: Writer,
    generation: Arc<AtomicU32>,
    news: Arc<Mutex<RestartNews>>,
}

/// The session's reader: routes each frame to its command; session frames
/// (id 0: notices) are logged. At the stream's end every route is dropped,
/// so each waiting command sees [`Ended::Lost`]. A [`Kind::Restarted`]
/// drops every route too (each waiting command sees
/// [`Ended::Restarted`]) and is answered by [`Kind::Resume`], all under
/// the writer's lock ([`Session::run_io`] registers a route and writes its
/// Start under it).
async fn read_frames(
    mut output: BoxStream<'static, std::io::Result<Vec<u8>>>,
    mut decoder: Decoder,
    shared: Shared,
) {
    let Shared {
        routes,
        alive,
        writer,
        generation,
        news,
    } = shared;
    'stream: loop {
        loop {
            match decoder.next_frame() {
                Ok(Some(frame)) => {
                    if frame.id == 0 && frame.kind == Kind::Restarted {
                        let Ok(r) = frame.parse::<proto::Restarted>() else {
                            tracing::warn!("the supervisor's Restarted frame is invalid");
                            break 'stream;
                        };
                        tracing::warn!(
                            "odek's supervisor restarted its server ({}); {} command(s) it ran have an unknown status",
                            crate::text::foreign(&r.reason),
                            r.commands
                        );
                        let mut w = writer.lock().await;
                        generation.fetch_add(1, Ordering::AcqRel);
                        {
                            let mut routes = lock(&routes);
                            let mut news = lock(&news);
                            news.unsaid = routes.is_empty();
                            news.last = Some(r);
                            routes.clear();
                        }
                        let resume = Frame {
                            kind: Kind::Resume,
                            id: 0,
                            payload: vec![],
                        };
                        if !write_frame(&mut **w, &resume, &alive).await {
                            break 'stream;
                        }
                        continue;
                    }
                    if frame.id == 0 {
                        if frame.kind == Kind::Notice {
                            tracing::warn!(
                                "supervisor: {}",
                                crate::text::foreign(&String::from_utf8_lossy(&frame.payload))
                            );
                        }
                        continue;
                    }
                    let tx = lock(&routes).get(&frame.id).cloned();
                    if let Some(tx) = tx {
                        // Waits while the command's queue is full; a command
                        // gone meanwhile drops the frame.
                        let _ = tx.send(frame).await;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!("the supervisor's stream is invalid: {e}");
                    break 'stream;
                }
            }
        }
        match output.next().await {
            Some(Ok(bytes)) => decoder.push(&bytes),
            _ => break,
        }
    }
    alive.store(false, Ordering::Release);
    lock(&routes).clear();
}

/// The installed binary's file name, looked for beside odek
/// ([`host_binary`]).
pub const BINARY_NAME: &str = "odek-supervisor";

/// The directory of the library odek runs in (libodek), set once by the C
/// ABI when it loads; `None` in the CLI and `odek mcp`, which look beside
/// their own executable.
static LIBRARY_DIR: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();

/// Tells the core where the library it is linked into lives (libodek's
/// own file's directory): [`host_binary`] then looks for the supervisor
/// there (`<dir>/odek-supervisor`, then `<dir>/../libexec/odek/odek-supervisor`)
/// instead of beside the running executable (a Python or Go program's
/// interpreter). Process-wide; the first call wins, later ones are
/// ignored. Called once by the C ABI (`ffi/`) when it loads.
pub fn set_library_dir(dir: std::path::PathBuf) {
    let _ = LIBRARY_DIR.set(dir);
}

/// Where [`host_binary`] looks when [`SUPERVISOR_ENV`] is unset, in order:
/// `<dir>/odek-supervisor` and `<dir>/../libexec/odek/odek-supervisor`,
/// `<dir>` being the library's directory ([`set_library_dir`]) or else the
/// running executable's.
pub fn candidates() -> Vec<std::path::PathBuf> {
    let dir = match LIBRARY_DIR.get() {
        Some(d) => Some(d.clone()),
        None => std::env::current_exe()
            .ok()
            .and_then(|e| e.parent().map(std::path::Path::to_path_buf)),
    };
    match dir {
        Some(d) => vec![
            d.join(BINARY_NAME),
            d.join("../libexec/odek").join(BINARY_NAME),
        ],
        None => Vec::new(),
    }
}

/// The first of `looked` that exists (as a link too), or why there is
/// none, naming the places, README's "Installing" and `env`: how odek
/// finds its own static binaries (`name`: this one, the egress proxy's)
/// when `env` does not name one. `place` says where to install it.
pub(crate) fn first_installed(
    looked: &[std::path::PathBuf],
    name: &str,
    env: &str,
    place: &str,
) -> Result<std::path::PathBuf, String> {
    looked
        .iter()
        .find(|p| p.symlink_metadata().is_ok())
        .cloned()
        .ok_or_else(|| {
            let shown: Vec<String> = looked.iter().map(crate::text::shown).collect();
            format!(
                "no {name} installed (looked for {}; install the static one {place} as README's \"Installing\" shows, or name one with {env})",
                if shown.is_empty() {
                    "odek's own directory, which is unknown".to_string()
                } else {
                    shown.join(" and ")
                }
            )
        })
}

/// The supervisor binary on this host (docs/CONFIG.md, `ODEK_SUPERVISOR`):
/// [`SUPERVISOR_ENV`] when set and not empty; set but empty turns the
/// supervisor off; unset, the first of [`candidates`] that exists.
///
/// Errors: why there is none, for people ("turned off by
/// ODEK_SUPERVISOR=", "no odek-supervisor beside …"). Sandboxes then run
/// commands through the exec API.
pub fn host_binary() -> Result<std::path::PathBuf, String> {
    match std::env::var_os(SUPERVISOR_ENV) {
        Some(v) if v.is_empty() => Err(format!("turned off by {SUPERVISOR_ENV}=")),
        Some(v) => Ok(std::path::PathBuf::from(v)),
        None => first_installed(&candidates(), BINARY_NAME, SUPERVISOR_ENV, "there"),
    }
}

/// Whether a sandbox has odek's supervisor, and if not why, with what then
/// does not hold (docs/SANDBOXING.md, "The supervisor"). In the sandbox
/// JSON, the environment (`odek.environment/1`) and the config view
/// (`odek.config-view/1`) as `"supervisor": {"on": true, "reason": null,
/// "not_held": []}`.
#[derive(
    Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct SupervisorState {
    /// True when commands run through odek's supervisor.
    pub on: bool,
    /// Why it is off (`None` when on).
    pub reason: Option<String>,
    /// The guarantees that need the supervisor and so do not hold while it
    /// is off ([`NOT_HELD_WITHOUT`]); empty when on.
    pub not_held: Vec<String>,
}

/// What does not hold in a sandbox without odek's supervisor (the exec
/// API's path): docs/SECURITY.md, "Known gaps".
pub const NOT_HELD_WITHOUT: [&str; 2] = [
    "owner link held from inside: a command can hold the idle process's stdin open or stop it, and the sandbox outlives its owner until gc",
    "kill that trusts the image's shell: a timeout's kill runs the image's /bin/sh, which a root command can replace, so processes reported killed may run on",
];

impl SupervisorState {
    /// The supervisor is on.
    pub fn on() -> SupervisorState {
        SupervisorState {
            on: true,
            reason: None,
            not_held: Vec::new(),
        }
    }

    /// It is off for `reason`.
    pub fn off(reason: impl Into<String>) -> SupervisorState {
        SupervisorState {
            on: false,
            reason: Some(reason.into()),
            not_held: NOT_HELD_WITHOUT.iter().map(|s| s.to_string()).collect(),
        }
    }

    /// `on`, or `off (<reason>)` (the startup line's and config view's
    /// words; the reason escaped, [`crate::text::foreign`]).
    pub fn shown(&self) -> String {
        match (&self.on, &self.reason) {
            (true, _) => "on".into(),
            (false, Some(r)) => format!("off ({})", crate::text::foreign(r)),
            (false, None) => "off".into(),
        }
    }
}

/// Set once this process said that its sandboxes run without the
/// supervisor.
static SAID_OFF: AtomicBool = AtomicBool::new(false);

/// The once-per-process warning that sandboxes run without the supervisor
/// (`None` after the first call): the exec API's path, a performance
/// fallback, with what then does not hold. Also logged (tracing, warn).
pub(crate) fn off_warning_once(state: &SupervisorState) -> Option<crate::warning::Warning> {
    if state.on || SAID_OFF.swap(true, Ordering::AcqRel) {
        return None;
    }
    let text = format!(
        "odek's supervisor is {}: commands run through Docker's exec API (slower), and these do not hold: {}",
        state.shown(),
        state.not_held.join("; ")
    );
    tracing::warn!("{text}");
    Some(crate::warning::Warning::new(
        crate::warning::WarningKind::SupervisorOff,
        text,
    ))
}

/// A launch's supervisor: odek's private copy of the host binary, whose
/// directory is bind-mounted read-only at [`SUPERVISOR_DIR`], and the user
/// its commands run as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Supervision {
    /// The directory of odek's copy of the binary
    /// (`$ODEK_HOME/supervisor/<sha256 prefix>/`).
    pub dir: std::path::PathBuf,
    /// The commands' uid (the plan's account).
    pub uid: u32,
    /// The commands' gid.
    pub gid: u32,
}

impl Supervision {
    /// The supervisor for `plan`'s sandbox on the engine at `address`.
    /// The binary ([`host_binary`]) is read once, through one descriptor,
    /// checked to be a static executable and copied into `$ODEK_HOME`
    /// (private to the operator): what the engine mounts is that copy,
    /// never the path named later again.
    ///
    /// Errors: why the sandbox runs without one (commands through the exec
    /// API, as before), for people: no binary or one turned off
    /// ([`host_binary`]), one that cannot be read or is not a static
    /// executable, or cannot be copied; an engine that cannot see this
    /// host's files (not a Unix socket); a plan without a numeric user, or
    /// with the supervisor's own uid.
    pub fn for_plan(
        plan: &crate::plan::Plan,
        engine: &dyn crate::engine::DockerApi,
    ) -> Result<Supervision, String> {
        let (binary, bytes, uid, gid) = usable(plan, engine)?;
        match private_copy(&bytes, &plan.odek_home) {
            Ok(dir) => Ok(Supervision { dir, uid, gid }),
            Err(e) => Err(format!(
                "{} cannot be copied into ODEK_HOME ({e})",
                crate::text::shown(&binary)
            )),
        }
    }

    /// Whether a launch of `plan` on `engine` would have the supervisor
    /// ([`Supervision::for_plan`] without the copy): for `odek config
    /// view` and the environment's forecast.
    pub fn state_for(
        plan: &crate::plan::Plan,
        engine: &dyn crate::engine::DockerApi,
    ) -> SupervisorState {
        match usable(plan, engine) {
            Ok(_) => SupervisorState::on(),
            Err(why) => SupervisorState::off(why),
        }
    }

    /// Makes `spec` (SPEC §6.1's create request) start the supervisor: the
    /// image's entrypoint replaced by the binary (nothing of the image runs
    /// before it), the container's user root so that it can confine itself
    /// to [`SUPERVISOR_UID`] keeping [`SUPERVISOR_CAPS`], which are added
    /// (every other capability stays dropped).
    pub fn apply(&self, spec: &mut crate::engine::ContainerSpec) {
        let id = SUPERVISOR_UID.to_string();
        spec.entrypoint = Some(vec![SUPERVISOR_PATH.to_string()]);
        spec.cmd = vec![
            "serve".into(),
            "--uid".into(),
            id.clone(),
            "--gid".into(),
            id,
            "--relay".into(),
            relay_name(&spec.name),
            "--commands".into(),
            format!("{}:{}", self.uid, self.gid),
        ];
        spec.user = Some("0:0".into());
        spec.cap_add = SUPERVISOR_CAPS.iter().map(|c| c.to_string()).collect();
        spec.log_driver = Some("none".into());
        spec.binds.push(crate::engine::BindMount {
            source: self.dir.display().to_string(),
            target: SUPERVISOR_DIR.into(),
            read_only: true,
        });
        spec.no_healthcheck = true;
    }

    /// The [`proto::Start`] of a command in this sandbox.
    pub fn start(
        &self,
        argv: Vec<String>,
        env: Vec<(String, String)>,
        cwd: String,
        timeout: Option<Duration>,
    ) -> proto::Start {
        proto::Start {
            argv,
            env,
            cwd,
            uid: self.uid,
            gid: self.gid,
            groups: vec![],
            tty: None,
            stdin: false,
            timeout_ms: timeout.map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX)),
        }
    }
}

/// The binary's path and bytes and the commands' uid and gid when `plan`
/// on `engine` can have the supervisor; why not otherwise.
fn usable(
    plan: &crate::plan::Plan,
    engine: &dyn crate::engine::DockerApi,
) -> Result<(std::path::PathBuf, Vec<u8>, u32, u32), String> {
    if let Some(why) = engine.no_supervisor() {
        return Err(why.into());
    }
    if !matches!(
        engine.endpoint().address,
        crate::engine::Address::Unix { .. }
    ) {
        return Err(NOT_LOCAL.into());
    }
    let Some((uid, gid)) = command_ids(plan) else {
        return Err(format!(
            "the sandbox user {} is not numeric (the supervisor starts commands by uid and gid)",
            crate::text::shown(plan.user.as_deref().unwrap_or("(the image's own)"))
        ));
    };
    if uid == SUPERVISOR_UID || gid == SUPERVISOR_UID {
        return Err(format!(
            "the sandbox user is uid or gid {SUPERVISOR_UID}, the supervisor's own"
        ));
    }
    let binary = host_binary()?;
    let bytes = read_binary(&binary)
        .map_err(|e| format!("{} cannot be read ({e})", crate::text::shown(&binary)))?;
    if !is_static_elf(&bytes) {
        return Err(format!(
            "{} is not a static executable",
            crate::text::shown(&binary)
        ));
    }
    Ok((binary, bytes, uid, gid))
}

/// The uid and gid `plan`'s commands run as: its account's, or its user
/// when that is numeric (`uid[:gid]`, gid defaulting to the uid) or `root`.
/// `None` for a user only the image can name.
pub fn command_ids(plan: &crate::plan::Plan) -> Option<(u32, u32)> {
    if let Some(a) = &plan.account {
        return Some((a.uid, a.gid));
    }
    let user = plan.user.as_deref()?;
    if user == "root" {
        return Some((0, 0));
    }
    let (u, g) = user.split_once(':').unwrap_or((user, user));
    Some((u.parse().ok()?, g.parse().ok()?))
}

/// Relay sessions by container ID ([`crate::Client`]'s).
pub(crate) type Relays = Arc<tokio::sync::Mutex<HashMap<String, Arc<Session>>>>;

/// The abstract socket name a relay of sandbox `name` connects to.
pub fn relay_name(name: &str) -> String {
    format!("odek-supervisor.{name}")
}

/// The largest supervisor binary odek reads (16 MiB).
const MAX_BINARY: u64 = 16 << 20;

/// `path`'s bytes, read through one descriptor (a regular file of at most
/// [`MAX_BINARY`]).
pub(crate) fn read_binary(path: &std::path::Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let f = std::fs::File::open(path)?;
    let meta = f.metadata()?;
    if !meta.is_file() || meta.len() > MAX_BINARY {
        return Err(std::io::Error::other(
            "not a regular file of at most 16 MiB",
        ));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    f.take(MAX_BINARY + 1).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Writes `bytes` as `<home>/supervisor/<sha256 prefix>/odek-supervisor`
/// (mode 0755 in a 0755 directory, made whole before it is renamed into
/// place) unless that copy exists with the same content; returns its
/// directory.
fn private_copy(bytes: &[u8], home: &std::path::Path) -> std::io::Result<std::path::PathBuf> {
    private_copy_as(bytes, home, "supervisor", BINARY_NAME)
}

/// [`private_copy`] of another binary: `<home>/<kind>/<sha256
/// prefix>/<name>` (the egress proxy's, [`crate::egress`]).
pub(crate) fn private_copy_as(
    bytes: &[u8],
    home: &std::path::Path,
    kind: &str,
    name: &str,
) -> std::io::Result<std::path::PathBuf> {
    use sha2::Digest;
    use std::os::unix::fs::PermissionsExt;
    let digest = hex::encode(sha2::Sha256::digest(bytes));
    let root = home.join(kind);
    let dir = root.join(&digest[..32]);
    let file = dir.join(name);
    if let Ok(existing) = read_binary(&file) {
        if existing == bytes {
            return Ok(dir);
        }
    }
    std::fs::create_dir_all(&root)?;
    let tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}-"))
        .tempdir_in(&root)?;
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755))?;
    let staged = tmp.path().join(name);
    std::fs::write(&staged, bytes)?;
    std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(0o755))?;
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::rename(tmp.keep(), &dir)?;
    Ok(dir)
}

/// True when `bytes` are an ELF executable without an interpreter (a
/// static binary runs unchanged on glibc, musl and busybox images). Only
/// 64-bit little-endian ELF is accepted.
pub fn is_static_elf(bytes: &[u8]) -> bool {
    let Some(h) = bytes.get(..64) else {
        return false;
    };
    if &h[..4] != b"\x7fELF" || h[4] != 2 || h[5] != 1 {
        return false;
    }
    let u16_at = |o: usize| usize::from(u16::from_le_bytes([h[o], h[o + 1]]));
    let e_type = u16_at(16);
    let phoff = u64::from_le_bytes(h[32..40].try_into().unwrap_or_default()) as usize;
    let (phentsize, phnum) = (u16_at(54), u16_at(56));
    if !(e_type == 2 || e_type == 3) || phentsize < 4 {
        return false;
    }
    (0..phnum).all(|i| {
        let at = phoff.saturating_add(i.saturating_mul(phentsize));
        match bytes.get(at..at.saturating_add(4)) {
            // PT_INTERP (3): needs the image's dynamic loader.
            Some(t) => u32::from_le_bytes([t[0], t[1], t[2], t[3]]) != 3,
            None => false,
        }
    })
}

/// Why a sandbox on an engine not reached by a local Unix socket has no
/// supervisor (a remote engine cannot mount this host's binary).
pub(crate) const NOT_LOCAL: &str =
    "the engine is not reached by a local Unix socket, so it cannot mount this host's binary";

/// What gets a sandbox whose supervisor is off (`why`) one: on a remote
/// engine nothing can, so the advice names a local engine; otherwise
/// the binary's path through [`SUPERVISOR_ENV`] and a new sandbox.
pub(crate) fn how_to_get_one(why: &str) -> String {
    if why == NOT_LOCAL {
        "On a remote engine the supervisor is never there: use a local engine (a Unix socket) for this".to_string()
    } else {
        format!(
            "Set {SUPERVISOR_ENV}=<path of the static odek-supervisor binary> and launch a new sandbox"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_way_to_a_supervisor_is_never_an_env_var_on_a_remote_engine() {
        assert!(how_to_get_one(NOT_LOCAL).contains("use a local engine"));
        assert!(!how_to_get_one(NOT_LOCAL).contains(SUPERVISOR_ENV));
        let local = how_to_get_one("turned off by ODEK_SUPERVISOR=");
        assert!(
            local.starts_with(&format!("Set {SUPERVISOR_ENV}=")),
            "{local}"
        );
    }

    #[test]
    fn a_dynamic_executable_is_not_static() {
        let sh = read_binary(std::path::Path::new("/bin/sh")).expect("readable");
        assert!(sh.starts_with(b"\x7fELF"));
        assert!(!is_static_elf(&sh));
        assert!(!is_static_elf(b"#!/bin/sh\n"));
        // The same header with its PT_INTERP entry renamed is static.
        let mut patched = sh.clone();
        let phoff = u64::from_le_bytes(sh[32..40].try_into().expect("8 bytes")) as usize;
        let (size, num) = (
            usize::from(u16::from_le_bytes([sh[54], sh[55]])),
            usize::from(u16::from_le_bytes([sh[56], sh[57]])),
        );
        for i in 0..num {
            let at = phoff + i * size;
            if patched[at..at + 4] == 3u32.to_le_bytes() {
                patched[at..at + 4].copy_from_slice(&1u32.to_le_bytes());
            }
        }
        assert!(is_static_elf(&patched));
    }

    #[test]
    fn the_library_directory_decides_where_the_binary_is_looked_for() {
        set_library_dir("/opt/odek/lib".into());
        // The first call wins.
        set_library_dir("/elsewhere".into());
        assert_eq!(
            candidates(),
            vec![
                std::path::PathBuf::from("/opt/odek/lib/odek-supervisor"),
                std::path::PathBuf::from("/opt/odek/lib/../libexec/odek/odek-supervisor"),
            ]
        );
    }

    #[test]
    fn an_off_state_names_its_reason_and_what_does_not_hold() {
        let off = SupervisorState::off("turned off by ODEK_SUPERVISOR=");
        assert_eq!(off.shown(), "off (turned off by ODEK_SUPERVISOR=)");
        assert_eq!(off.not_held.len(), NOT_HELD_WITHOUT.len());
        assert!(off.not_held[0].starts_with("owner link held from inside"));
        assert!(off.not_held[1].starts_with("kill that trusts the image's shell"));
        let on = SupervisorState::on();
        assert_eq!(on.shown(), "on");
        assert!(on.not_held.is_empty());
        assert_eq!(
            serde_json::to_value(&on).expect("json"),
            serde_json::json!({"on": true, "reason": null, "not_held": []})
        );
        // Said once per process, and never for "on".
        assert!(off_warning_once(&on).is_none());
        let first = off_warning_once(&off).expect("the first time");
        assert_eq!(first.kind, crate::warning::WarningKind::SupervisorOff);
        assert!(first.message.contains("owner link held from inside"));
        assert!(off_warning_once(&off).is_none());
    }

    #[test]
    fn the_private_copy_is_made_once_and_replaced_when_changed() {
        let home = tempfile::tempdir().expect("tempdir");
        let a = private_copy(b"one", home.path()).expect("copy");
        assert_eq!(
            std::fs::read(a.join("odek-supervisor")).expect("read"),
            b"one"
        );
        assert_eq!(private_copy(b"one", home.path()).expect("again"), a);
        std::fs::write(a.join("odek-supervisor"), b"tampered").expect("write");
        let b = private_copy(b"one", home.path()).expect("repaired");
        assert_eq!(a, b);
        assert_eq!(
            std::fs::read(b.join("odek-supervisor")).expect("read"),
            b"one"
        );
    }

    fn link_from(frames: Vec<Frame>) -> (Link, tokio::io::DuplexStream) {
        let wire: Vec<u8> = frames.iter().flat_map(|f| f.encode()).collect();
        let (ours, theirs) = tokio::io::duplex(1 << 16);
        let output = futures_util::stream::iter(vec![Ok(wire)])
            .chain(futures_util::stream::pending())
            .boxed();
        (
            Link {
                output,
                input: Box::new(ours),
                keep: None,
            },
            theirs,
        )
    }

    fn ready(uid: u32) -> Frame {
        Frame::json(
            Kind::Ready,
            0,
            &proto::Ready {
                version: proto::VERSION,
                pid: 7,
                uid,
                gid: uid,
                cap_eff: "0".into(),
                relay: "r".into(),
                commands: Some([1000, 1000]),
                background: Some(proto::BackgroundLimits {
                    max_processes: proto::MAX_BACKGROUND as u32,
                    buffer_bytes: proto::BACKGROUND_BUFFER as u64,
                }),
            },
        )
    }

    #[tokio::test]
    async fn a_background_request_gets_its_output_and_answer() {
        let polled = proto::Polled {
            process: "7-1".into(),
            pid: 40,
            cursor: 3,
            next: 9,
            dropped: 3,
            exit: None,
        };
        let (link, _peer) = link_from(vec![
            ready(SUPERVISOR_UID),
            Frame {
                kind: Kind::Stdout,
                id: 1,
                payload: b"abc".to_vec(),
            },
            Frame {
                kind: Kind::Stderr,
                id: 1,
                payload: b"def".to_vec(),
            },
            Frame::json(Kind::Polled, 1, &polled),
        ]);
        let s = Session::open(link, Duration::from_secs(1))
            .await
            .expect("ready");
        assert!(s.serves_background());
        let poll = proto::Poll {
            process: "7-1".into(),
            cursor: Some(0),
        };
        let Answer::Reply { output, frame } =
            s.request(Kind::Poll, &poll, Duration::from_secs(5)).await
        else {
            panic!("no reply");
        };
        assert_eq!(
            output,
            vec![
                (StreamKind::Stdout, b"abc".to_vec()),
                (StreamKind::Stderr, b"def".to_vec())
            ]
        );
        assert_eq!(frame.parse::<proto::Polled>().expect("Polled"), polled);
        // Nothing more comes: no answer within the budget is Lost.
        assert_eq!(
            s.request(Kind::Poll, &poll, Duration::from_millis(50))
                .await,
            Answer::Lost
        );
        let (link, _peer) = link_from(vec![
            ready(SUPERVISOR_UID),
            Frame::json(Kind::Failed, 1, &proto::Failed::new("no such process")),
        ]);
        let s = Session::open(link, Duration::from_secs(1))
            .await
            .expect("ready");
        assert_eq!(
            s.request(Kind::Poll, &poll, Duration::from_secs(5)).await,
            Answer::Failed(proto::Failed::new("no such process"))
        );
    }

    /// More output before an answer than a process's whole buffer is not
    /// held: whatever answers in the supervisor's place, odek stops there.
    #[tokio::test]
    async fn a_request_drowned_in_output_is_refused_not_held() {
        let polled = proto::Polled {
            process: "7-1".into(),
            pid: 40,
            cursor: 0,
            next: 0,
            dropped: 0,
            exit: None,
        };
        let full = |n: usize| Frame {
            kind: Kind::Stdout,
            id: 1,
            payload: vec![b'x'; n],
        };
        let poll = proto::Poll {
            process: "7-1".into(),
            cursor: None,
        };
        let (link, _peer) = link_from(vec![
            ready(SUPERVISOR_UID),
            full(proto::BACKGROUND_BUFFER),
            Frame::json(Kind::Polled, 1, &polled),
        ]);
        let s = Session::open(link, Duration::from_secs(1))
            .await
            .expect("ready");
        assert!(matches!(
            s.request(Kind::Poll, &poll, Duration::from_secs(5)).await,
            Answer::Reply { .. }
        ));
        let (link, _peer) = link_from(vec![
            ready(SUPERVISOR_UID),
            full(proto::BACKGROUND_BUFFER),
            full(1),
            Frame::json(Kind::Polled, 1, &polled),
        ]);
        let s = Session::open(link, Duration::from_secs(1))
            .await
            .expect("ready");
        assert_eq!(
            s.request(Kind::Poll, &poll, Duration::from_secs(5)).await,
            Answer::TooMuch
        );
    }

    #[tokio::test]
    async fn an_older_supervisor_serves_no_background_processes() {
        let mut old: proto::Ready = ready(SUPERVISOR_UID).parse().expect("a Ready");
        old.background = None;
        let (link, _peer) = link_from(vec![Frame::json(Kind::Ready, 0, &old)]);
        let s = Session::open(link, Duration::from_secs(1))
            .await
            .expect("ready");
        assert!(!s.serves_background());
    }

    #[tokio::test]
    async fn only_a_supervisor_bound_to_the_plans_account_is_used() {
        let (link, _peer) = link_from(vec![ready(SUPERVISOR_UID)]);
        let s = Session::open(link, Duration::from_secs(1))
            .await
            .expect("ready");
        assert_eq!(s.check_bound(1000, 1000), Ok(()));
        let err = s.check_bound(0, 0).expect_err("0:0 is not bound");
        assert!(err.contains("1000:1000") && err.contains("0:0"), "{err}");
        let mut unbound: proto::Ready = ready(SUPERVISOR_UID).parse().expect("a Ready");
        unbound.commands = None;
        let (link, _peer) = link_from(vec![Frame::json(Kind::Ready, 0, &unbound)]);
        let s = Session::open(link, Duration::from_secs(1))
            .await
            .expect("ready");
        let err = s.check_bound(1000, 1000).expect_err("unbound");
        assert!(err.contains("not bound"), "{err}");
    }

    #[tokio::test]
    async fn a_supervisor_under_another_uid_is_refused() {
        let (link, _peer) = link_from(vec![ready(0)]);
        let err = Session::open(link, Duration::from_secs(1))
            .await
            .expect_err("uid 0 is not the supervisor's");
        assert!(err.contains("uid 0"), "{err}");
    }

    #[tokio::test]
    async fn output_and_exit_reach_the_command() {
        let (link, _peer) = link_from(vec![
            ready(SUPERVISOR_UID),
            Frame {
                kind: Kind::Stdout,
                id: 1,
                payload: b"hi".to_vec(),
            },
            Frame::json(
                Kind::Exit,
                1,
                &proto::Exit {
                    code: Some(3),
                    ..Default::default()
                },
            ),
        ]);
        let s = Session::open(link, Duration::from_secs(1))
            .await
            .expect("ready");
        let seen = Mutex::new(Vec::new());
        let sink = |_: StreamKind, b: &[u8]| lock(&seen).extend_from_slice(b);
        let start = proto::Start {
            argv: vec!["true".into()],
            env: vec![],
            cwd: "/".into(),
            uid: 1000,
            gid: 1000,
            groups: vec![],
            tty: None,
            stdin: false,
            timeout_ms: None,
        };
        let ended = s
            .run(&start, &sink, std::future::pending(), None, None)
            .await;
        assert_eq!(
            ended,
            Ended::Exit(proto::Exit {
                code: Some(3),
                ..Default::default()
            })
        );
        assert_eq!(*lock(&seen), b"hi");
    }

    #[tokio::test]
    async fn a_session_that_ends_mid_command_reports_lost() {
        let wire: Vec<u8> = ready(SUPERVISOR_UID).encode();
        let (ours, _theirs) = tokio::io::duplex(1 << 16);
        let (tx, rx) = mpsc::unbounded_channel::<std::io::Result<Vec<u8>>>();
        tx.send(Ok(wire)).expect("send");
        let output = tokio_stream_from(rx);
        let s = Session::open(
            Link {
                output,
                input: Box::new(ours),
                keep: None,
            },
            Duration::from_secs(1),
        )
        .await
        .expect("ready");
        let start = proto::Start {
            argv: vec!["sleep".into(), "9".into()],
            env: vec![],
            cwd: "/".into(),
            uid: 1000,
            gid: 1000,
            groups: vec![],
            tty: None,
            stdin: false,
            timeout_ms: None,
        };
        let sink = |_: StreamKind, _: &[u8]| {};
        let run = s.run(&start, &sink, std::future::pending(), None, None);
        let end = async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            drop(tx);
        };
        let (ended, ()) = tokio::join!(run, end);
        assert_eq!(ended, Ended::Lost);
        assert!(!s.is_alive());
    }

    #[tokio::test(start_paused = true)]
    async fn a_command_past_odeks_deadline_is_killed_then_given_up_on() {
        let (link, mut peer) = link_from(vec![ready(SUPERVISOR_UID)]);
        let s = Session::open(link, Duration::from_secs(1))
            .await
            .expect("ready");
        let start = proto::Start {
            argv: vec!["sleep".into(), "99".into()],
            env: vec![],
            cwd: "/".into(),
            uid: 1000,
            gid: 1000,
            groups: vec![],
            tty: None,
            stdin: false,
            timeout_ms: None,
        };
        let sink = |_: StreamKind, _: &[u8]| {};
        let t0 = tokio::time::Instant::now();
        let ended = s
            .run(
                &start,
                &sink,
                std::future::pending(),
                None,
                Some(Duration::from_secs(3)),
            )
            .await;
        assert_eq!(ended, Ended::Lost);
        assert!(t0.elapsed() >= Duration::from_secs(3) + KILL_WAIT);
        // What odek sent: the Start, then the Kill of the same command.
        let mut wire = vec![0u8; 4096];
        let n = tokio::io::AsyncReadExt::read(&mut peer, &mut wire)
            .await
            .expect("read");
        let mut d = Decoder::new();
        d.push(&wire[..n]);
        let first = d.next_frame().expect("valid").expect("a frame");
        let second = d.next_frame().expect("valid").expect("a frame");
        assert_eq!((first.kind, second.kind), (Kind::Start, Kind::Kill));
        assert_eq!(first.id, second.id);
    }

    /// A scripted supervisor: reads odek's frames from `peer`, records
    /// them, and reports command 1's exit (as `cancelled` after a Kill)
    /// once its stdin was closed (and, with `want_resize`, a Resize seen:
    /// the two streams are independent) or its kill asked for.
    fn fake_supervisor(
        mut peer: tokio::io::DuplexStream,
        out: mpsc::UnboundedSender<std::io::Result<Vec<u8>>>,
        want_resize: bool,
    ) -> tokio::task::JoinHandle<Vec<Frame>> {
        tokio::spawn(async move {
            let mut seen: Vec<Frame> = Vec::new();
            let mut d = Decoder::new();
            let mut buf = vec![0u8; 4096];
            loop {
                while let Some(f) = d.next_frame().expect("valid frames") {
                    let closed = seen
                        .iter()
                        .chain(std::iter::once(&f))
                        .any(|f| f.kind == Kind::Stdin && f.payload.is_empty());
                    let resized = !want_resize
                        || seen
                            .iter()
                            .chain(std::iter::once(&f))
                            .any(|f| f.kind == Kind::Resize);
                    let end = match f.kind {
                        Kind::Kill => Some(true),
                        _ if closed && resized => Some(false),
                        _ => None,
                    };
                    seen.push(f);
                    if let Some(cancelled) = end {
                        let exit = proto::Exit {
                            code: Some(0),
                            cancelled,
                            killed: cancelled,
                            ..Default::default()
                        };
                        out.send(Ok(Frame::json(Kind::Exit, 1, &exit).encode()))
                            .expect("odek listens");
                        return seen;
                    }
                }
                let n = tokio::io::AsyncReadExt::read(&mut peer, &mut buf)
                    .await
                    .expect("read");
                assert!(n > 0, "odek closed the stream early");
                d.push(&buf[..n]);
            }
        })
    }

    fn open_with_peer(
        capacity: usize,
    ) -> (
        Link,
        tokio::io::DuplexStream,
        mpsc::UnboundedSender<std::io::Result<Vec<u8>>>,
    ) {
        let (ours, theirs) = tokio::io::duplex(capacity);
        let (tx, rx) = mpsc::unbounded_channel();
        tx.send(Ok(ready(SUPERVISOR_UID).encode())).expect("send");
        let link = Link {
            output: tokio_stream_from(rx),
            input: Box::new(ours),
            keep: None,
        };
        (link, theirs, tx)
    }

    fn tty_start() -> proto::Start {
        proto::Start {
            argv: vec!["cat".into()],
            env: vec![],
            cwd: "/".into(),
            uid: 1000,
            gid: 1000,
            groups: vec![],
            tty: Some(proto::WinSize { cols: 80, rows: 24 }),
            stdin: true,
            timeout_ms: None,
        }
    }

    #[tokio::test]
    async fn stdin_chunks_resizes_and_the_close_reach_the_supervisor() {
        let (link, peer, tx) = open_with_peer(1 << 16);
        let s = Session::open(link, Duration::from_secs(1))
            .await
            .expect("ready");
        let sup = fake_supervisor(peer, tx, true);
        let stdin = futures_util::stream::iter(vec![b"abc".to_vec(), b"def".to_vec()]).boxed();
        let resize = futures_util::stream::iter(vec![proto::WinSize {
            cols: 100,
            rows: 30,
        }])
        .boxed();
        let sink = |_: StreamKind, _: &[u8]| {};
        let ended = s
            .run_io(
                &tty_start(),
                &sink,
                std::future::pending(),
                Some(stdin),
                Some(resize),
                None,
            )
            .await;
        assert!(
            matches!(ended, Ended::Exit(ref e) if !e.cancelled),
            "{ended:?}"
        );
        let seen = sup.await.expect("the fake supervisor");
        assert_eq!(seen[0].kind, Kind::Start);
        let start: proto::Start = seen[0].parse().expect("a Start");
        assert_eq!(start, tty_start());
        let stdin: Vec<&[u8]> = seen
            .iter()
            .filter(|f| f.kind == Kind::Stdin)
            .map(|f| f.payload.as_slice())
            .collect();
        assert_eq!(stdin, [&b"abc"[..], b"def", b""]);
        let sizes: Vec<proto::WinSize> = seen
            .iter()
            .filter(|f| f.kind == Kind::Resize)
            .map(|f| f.parse().expect("a WinSize"))
            .collect();
        assert_eq!(
            sizes,
            [proto::WinSize {
                cols: 100,
                rows: 30
            }]
        );
        assert!(seen.iter().all(|f| f.id == seen[0].id));
    }

    /// A cancel while the stdin feed is suspended mid-frame (the stream to
    /// the supervisor is full) still gets its Kill written: the feed is
    /// driven while the Kill waits for the writer.
    #[tokio::test(start_paused = true)]
    async fn a_cancel_during_a_blocked_stdin_write_still_kills() {
        let (link, peer, tx) = open_with_peer(1024);
        let s = Session::open(link, Duration::from_secs(1))
            .await
            .expect("ready");
        let (cancel_tx, cancel_rx) = tokio::sync::oneshot::channel::<()>();
        // One chunk far larger than the stream's buffer, then stdin stays
        // open: the feed blocks in its write, holding the writer.
        let stdin = futures_util::stream::iter(vec![vec![b'x'; 256 << 10]])
            .chain(futures_util::stream::pending())
            .boxed();
        let cancel = async {
            let _ = cancel_rx.await;
        };
        let sink = |_: StreamKind, _: &[u8]| {};
        let start = tty_start();
        let run = s.run_io(&start, &sink, cancel, Some(stdin), None, None);
        let drive = async {
            // Let the feed fill the stream and block, then cancel, then
            // start reading as the supervisor would.
            for _ in 0..50 {
                tokio::task::yield_now().await;
            }
            cancel_tx.send(()).expect("cancel");
            for _ in 0..50 {
                tokio::task::yield_now().await;
            }
            fake_supervisor(peer, tx, false)
                .await
                .expect("the fake supervisor")
        };
        let (ended, seen) =
            tokio::time::timeout(Duration::from_secs(30), async { tokio::join!(run, drive) })
                .await
                .expect("no deadlock between the stdin feed and the kill");
        assert!(
            matches!(ended, Ended::Exit(ref e) if e.cancelled),
            "{ended:?}"
        );
        assert_eq!(seen.last().map(|f| f.kind), Some(Kind::Kill));
    }

    /// Reads odek's frames from `peer` until `n` have come.
    async fn frames_from(
        peer: &mut tokio::io::DuplexStream,
        d: &mut Decoder,
        n: usize,
    ) -> Vec<Frame> {
        let mut got = Vec::new();
        let mut buf = vec![0u8; 4096];
        while got.len() < n {
            while let Some(f) = d.next_frame().expect("valid frames") {
                got.push(f);
            }
            if got.len() >= n {
                break;
            }
            let k = tokio::io::AsyncReadExt::read(peer, &mut buf)
                .await
                .expect("read");
            assert!(k > 0, "odek closed the stream");
            d.push(&buf[..k]);
        }
        got
    }

    fn restarted(generation: u32, commands: u32) -> Frame {
        Frame::json(
            Kind::Restarted,
            0,
            &proto::Restarted {
                generation,
                pid: 99,
                reason: "killed by signal 9".into(),
                commands,
                killed: true,
            },
        )
    }

    fn sleep_start() -> proto::Start {
        proto::Start {
            argv: vec!["sleep".into(), "30".into()],
            env: vec![],
            cwd: "/".into(),
            uid: 1000,
            gid: 1000,
            groups: vec![],
            tty: None,
            stdin: false,
            timeout_ms: None,
        }
    }

    /// A restart of the server mid-command: that command's status is
    /// unknown (never an exit, never a success), odek answers Resume after
    /// the Start it sent, and the next command runs on the session.
    #[tokio::test]
    async fn a_restart_mid_command_is_unknown_and_the_next_command_runs() {
        let (link, mut peer, tx) = open_with_peer(1 << 16);
        let s = Session::open(link, Duration::from_secs(1))
            .await
            .expect("ready");
        let sink = |_: StreamKind, _: &[u8]| {};
        let start = sleep_start();
        let run = s.run(&start, &sink, std::future::pending(), None, None);
        let script = async {
            let mut d = Decoder::new();
            let first = frames_from(&mut peer, &mut d, 1).await;
            assert_eq!(first[0].kind, Kind::Start);
            // A late Exit of the old command after the restart must not
            // count: it is sent after Restarted and ignored.
            tx.send(Ok(restarted(1, 1).encode())).expect("send");
            tx.send(Ok(Frame::json(
                Kind::Exit,
                first[0].id,
                &proto::Exit {
                    code: Some(0),
                    ..Default::default()
                },
            )
            .encode()))
                .expect("send");
            let resume = frames_from(&mut peer, &mut d, 1).await;
            assert_eq!(resume[0].kind, Kind::Resume);
            (d, first[0].id)
        };
        let (ended, (mut d, old_id)) = tokio::join!(run, script);
        match &ended {
            Ended::Restarted(r) => assert_eq!((r.generation, r.commands), (1, 1)),
            other => panic!("{other:?}"),
        }
        assert!(s.is_alive());
        // Said by that command's result: no note for the next one.
        assert_eq!(s.take_unsaid_restart(), None);
        let run = s.run(&start, &sink, std::future::pending(), None, None);
        let script = async {
            let f = frames_from(&mut peer, &mut d, 1).await;
            assert_eq!(f[0].kind, Kind::Start);
            assert_ne!(f[0].id, old_id);
            tx.send(Ok(Frame::json(
                Kind::Exit,
                f[0].id,
                &proto::Exit {
                    code: Some(3),
                    ..Default::default()
                },
            )
            .encode()))
                .expect("send");
        };
        let (ended, ()) = tokio::join!(run, script);
        assert_eq!(
            ended,
            Ended::Exit(proto::Exit {
                code: Some(3),
                ..Default::default()
            })
        );
    }

    /// A restart while no command runs is said once, by the next command.
    #[tokio::test]
    async fn a_restart_between_commands_is_said_once() {
        let (link, mut peer, tx) = open_with_peer(1 << 16);
        let s = Session::open(link, Duration::from_secs(1))
            .await
            .expect("ready");
        tx.send(Ok(restarted(1, 0).encode())).expect("send");
        let mut d = Decoder::new();
        let f = frames_from(&mut peer, &mut d, 1).await;
        assert_eq!(f[0].kind, Kind::Resume);
        let said = s.take_unsaid_restart().expect("not said yet");
        assert_eq!(said.reason, "killed by signal 9");
        assert_eq!(s.take_unsaid_restart(), None, "said twice");
    }

    fn tokio_stream_from(
        mut rx: mpsc::UnboundedReceiver<std::io::Result<Vec<u8>>>,
    ) -> BoxStream<'static, std::io::Result<Vec<u8>>> {
        futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx)).boxed()
    }
}
