//! `serve`: the single-threaded `poll(2)` loop over the owner session, the
//! relay listener and sessions, the commands' pipes, and SIGCHLD.

use crate::kill::{self, Tree};
use crate::ring::Ring;
use crate::session::{self, Session, HIGH_WATER};
use crate::spawn;
use crate::sys;
use crate::{confine, log};
use odek_supervisor::proto::{
    self, BackgroundLimits, Exit, Failed, Frame, Kind, Poll, Polled, ProcessRef, Ready, Spawned,
    Start, Started, WinSize, BACKGROUND_BUFFER, MAX_BACKGROUND, OUTPUT_CHUNK,
};
use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

/// The write end of the SIGCHLD self-pipe, for the signal handler.
static CHLD_PIPE: AtomicI32 = AtomicI32::new(-1);

/// SIGCHLD handler: one byte into the self-pipe (errno preserved).
extern "C" fn on_sigchld(_: libc::c_int) {
    // SAFETY: errno location and write(2) are async-signal-safe.
    unsafe {
        let e = *libc::__errno_location();
        let b = 1u8;
        libc::write(
            CHLD_PIPE.load(Ordering::Relaxed),
            (&b as *const u8).cast(),
            1,
        );
        *libc::__errno_location() = e;
    }
}

/// The most bytes read from one command stream once its root has exited
/// (a background writer could otherwise keep the drain going forever).
const DRAIN_LIMIT: usize = 4 << 20;

/// A session's key.
type Sid = u64;

/// The [`Cmd::sid`] of background commands: no session (sessions count
/// from 1), so no session's end or frames reach them.
const BG_SID: Sid = 0;

/// One background process ([`Kind::Background`]), running or ended.
struct Bg {
    /// Its root pid.
    pid: i32,
    /// The root's start time (ticks after boot).
    start: u64,
    /// Its output.
    ring: Ring,
    /// How its root ended, once it has.
    exit: Option<Exit>,
    /// Its pipes once the root ended (read until EOF into `ring`).
    out: Option<OwnedFd>,
    /// See `out`.
    err: Option<OwnedFd>,
    /// Another command was alive at some point since it started (its
    /// root's [`Cmd::overlapped`], then any command started after): a kill
    /// of what is left of its tree then reports the orphans adopted by the
    /// supervisor instead of killing them, as for a running root.
    overlapped: bool,
    /// The pids before its root's fork (its root's [`Cmd::before`], once
    /// the root ended).
    before: Vec<i32>,
}

/// One running command.
struct Cmd {
    /// Its session.
    sid: Sid,
    /// The id the core gave it.
    id: u32,
    /// Its root pid.
    pid: i32,
    /// The root's start time (ticks after boot).
    start: u64,
    /// When its timeout fires.
    deadline: Option<Instant>,
    /// Stdout pipe or terminal master.
    out: Option<OwnedFd>,
    /// Stderr pipe.
    err: Option<OwnedFd>,
    /// Stdin pipe (without a terminal).
    stdin: Option<OwnedFd>,
    /// Runs on a terminal (stdin goes to `out`, the master).
    tty: bool,
    /// Stdin is accepted (Start.stdin) and not closed yet.
    stdin_open: bool,
    /// Stdin bytes not yet written.
    inq: Vec<u8>,
    /// Close stdin once `inq` is written.
    close_after: bool,
    /// Another foreground command was alive since this one started.
    overlapped: bool,
    /// A background command (`sid` is [`BG_SID`], `id` its number).
    bg: bool,
    /// The pids of the namespace just before its fork ([`kill::Tree::before`]).
    before: Vec<i32>,
}

impl Cmd {
    /// The fd stdin bytes go to.
    fn stdin_fd(&self) -> Option<RawFd> {
        if !self.stdin_open {
            return None;
        }
        if self.tty {
            self.out.as_ref().map(|f| f.as_raw_fd())
        } else {
            self.stdin.as_ref().map(|f| f.as_raw_fd())
        }
    }
}

/// What a pollfd entry is for.
#[derive(Clone, Copy)]
enum Tag {
    Chld,
    Listener,
    SessIn(Sid),
    SessOut(Sid),
    Out(Sid, u32, bool),
    In(Sid, u32),
    Drain(usize),
    /// A background process's pipe after its root ended.
    Bg(u32, bool),
}

/// `serve`'s options (see the binary's usage).
#[derive(Clone)]
pub struct Options {
    /// The supervisor's own uid.
    pub uid: u32,
    /// Its gid.
    pub gid: u32,
    /// The relay's abstract socket name.
    pub relay: String,
    /// The only `[uid, gid]` commands may run as, when bound.
    pub commands: Option<[u32; 2]>,
}

/// The supervisor's state.
pub struct Server {
    uid: u32,
    gid: u32,
    commands: Option<[u32; 2]>,
    relay: String,
    me: i32,
    /// A random tag of this server, in its background processes' names, so
    /// that a name from another sandbox (whose server may have the same
    /// pid) or an earlier server is unknown here, never another process.
    tag: String,
    /// The keeper (the server's parent), never a target of a kill.
    keeper: i32,
    cap_last: u32,
    base_env: spawn::Env,
    listener: OwnedFd,
    chld_r: OwnedFd,
    _chld_w: OwnedFd,
    sessions: BTreeMap<Sid, Session>,
    next_sid: Sid,
    cmds: Vec<Cmd>,
    drains: Vec<OwnedFd>,
    reaped: Vec<(i32, i32)>,
    buf: Vec<u8>,
    notices: NoticeBudget,
    /// Background processes by number, oldest first.
    bgs: BTreeMap<u32, Bg>,
    /// The next background process's number.
    next_bg: u32,
}

/// At most [`NOTICE_BURST`] notices per [`NOTICE_WINDOW`]: a command that
/// provokes them in a loop (connecting to the relay socket) cannot flood
/// the owner's stderr or the session's buffer. The first notice of a later
/// window says how many were not shown.
struct NoticeBudget {
    window: Instant,
    sent: u32,
    dropped: u64,
}

/// Notices shown per window.
const NOTICE_BURST: u32 = 5;
/// The notice window.
const NOTICE_WINDOW: Duration = Duration::from_secs(10);

impl NoticeBudget {
    /// What to send now for one more notice `text`: nothing when over
    /// budget, else the text, preceded by a count of the notices dropped.
    fn admit(&mut self, now: Instant, text: &str) -> Option<String> {
        if now.duration_since(self.window) >= NOTICE_WINDOW {
            self.window = now;
            self.sent = 0;
        }
        if self.sent >= NOTICE_BURST {
            self.dropped += 1;
            return None;
        }
        self.sent += 1;
        Some(match std::mem::take(&mut self.dropped) {
            0 => text.to_string(),
            n => format!("({n} more notices not shown) {text}"),
        })
    }
}

/// Serves on fds 0/1 (the keeper's socket, which carries the owner's
/// session) and on `listener` (the relay socket the keeper bound) until
/// the owner session ends (then exits 0). The process is already confined
/// by the keeper ([`crate::keeper`]); a setup failure exits 70.
pub fn serve(options: Options, listener: OwnedFd) -> ! {
    let base_env = std::env::vars_os()
        .map(|(k, v)| {
            use std::os::unix::ffi::OsStringExt;
            (k.into_vec(), v.into_vec())
        })
        .collect();
    let server = match setup(options, listener, base_env) {
        Ok(s) => s,
        Err(e) => {
            log(&format!("odek-supervisor: {e}"));
            std::process::exit(70);
        }
    };
    server.run()
}

/// Everything before the loop.
fn setup(options: Options, listener: OwnedFd, base_env: spawn::Env) -> Result<Server, String> {
    let Options {
        uid,
        gid,
        relay,
        commands,
    } = options;
    let cap_last = confine::cap_last_cap().map_err(|e| format!("cap_last_cap: {e}"))?;
    // Orphans of the commands come to the server (not inherited by fork,
    // so set here): the tree kill sees them and reaps them.
    if confine::prctl(confine::PR_SET_CHILD_SUBREAPER, 1) < 0 {
        return Err(format!(
            "prctl(PR_SET_CHILD_SUBREAPER): {}",
            io::Error::last_os_error()
        ));
    }
    let (chld_r, chld_w) = sys::pipe().map_err(|e| format!("pipe: {e}"))?;
    sys::set_nonblock(chld_r.as_raw_fd()).map_err(|e| format!("pipe: {e}"))?;
    sys::set_nonblock(chld_w.as_raw_fd()).map_err(|e| format!("pipe: {e}"))?;
    CHLD_PIPE.store(chld_w.as_raw_fd(), Ordering::Relaxed);
    // SAFETY: installs a handler that only calls async-signal-safe functions.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_sigchld as *const () as usize;
        sa.sa_flags = libc::SA_RESTART | libc::SA_NOCLDSTOP;
        libc::sigemptyset(&mut sa.sa_mask);
        if libc::sigaction(libc::SIGCHLD, &sa, std::ptr::null_mut()) < 0 {
            return Err(format!("sigaction: {}", io::Error::last_os_error()));
        }
    }
    session::owner_nonblocking().map_err(|e| format!("stdin/stdout: {e}"))?;
    let mut server = Server {
        uid,
        gid,
        commands,
        relay,
        me: std::process::id() as i32,
        tag: random_tag(),
        // SAFETY: getppid has no failure mode.
        keeper: unsafe { libc::getppid() },
        cap_last,
        base_env,
        listener,
        chld_r,
        _chld_w: chld_w,
        sessions: BTreeMap::new(),
        next_sid: 1,
        cmds: vec![],
        drains: vec![],
        reaped: vec![],
        buf: vec![0; OUTPUT_CHUNK],
        notices: NoticeBudget {
            window: Instant::now(),
            sent: 0,
            dropped: 0,
        },
        bgs: BTreeMap::new(),
        next_bg: 1,
    };
    server.add_session(Session::owner());
    Ok(server)
}

/// Binds and listens on the relay's abstract socket `\0name`
/// (non-blocking, close-on-exec): done once by the keeper, so that the
/// name is never free while the sandbox lives (a command could bind it
/// between two servers otherwise).
pub fn relay_listener(name: &str) -> Result<OwnedFd, String> {
    let listener = sys::unix_socket(true).map_err(|e| format!("socket: {e}"))?;
    let (addr, len) = sys::abstract_addr(name).map_err(|e| format!("relay name: {e}"))?;
    // SAFETY: addr is a valid sockaddr_un of length len.
    sys::cvt(unsafe {
        libc::bind(
            listener.as_raw_fd(),
            (&addr as *const libc::sockaddr_un).cast(),
            len,
        )
    })
    .map_err(|e| format!("bind @{name}: {e}"))?;
    // SAFETY: integer arguments only.
    sys::cvt(unsafe { libc::listen(listener.as_raw_fd(), 16) })
        .map_err(|e| format!("listen: {e}"))?;
    Ok(listener)
}

impl Server {
    /// Adds a session and sends its Ready.
    fn add_session(&mut self, mut s: Session) -> Sid {
        let sid = self.next_sid;
        self.next_sid += 1;
        let ready = Ready {
            version: proto::VERSION,
            pid: self.me as u32,
            uid: self.uid,
            gid: self.gid,
            cap_eff: confine::cap_eff(),
            relay: self.relay.clone(),
            commands: self.commands,
            background: Some(BackgroundLimits {
                max_processes: MAX_BACKGROUND as u32,
                buffer_bytes: BACKGROUND_BUFFER as u64,
            }),
        };
        s.send(&Frame::json(Kind::Ready, 0, &ready));
        self.sessions.insert(sid, s);
        sid
    }

    /// Sends `frame` on session `sid` (if it still exists).
    fn send(&mut self, sid: Sid, frame: &Frame) {
        if let Some(s) = self.sessions.get_mut(&sid) {
            s.send(frame);
        }
    }

    /// Sends a Notice on the owner session, within its budget.
    fn notice(&mut self, text: &str) {
        let Some(text) = self.notices.admit(Instant::now(), text) else {
            return;
        };
        let text = text.as_str();
        log(&format!("odek-supervisor: {text}"));
        let f = Frame {
            kind: Kind::Notice,
            id: 0,
            payload: text.as_bytes().to_vec(),
        };
        if let Some(owner) = self.sessions.values_mut().find(|s| s.owner) {
            owner.send(&f);
        }
    }

    /// Tells the keeper (on the owner session, whose stream it reads) that a
    /// command's root started ([`Kind::Tracked`]) or is gone
    /// ([`Kind::Untracked`]): if this server dies, the keeper kills the
    /// trees of the roots it was told of and not told gone.
    fn ledger(&mut self, kind: Kind, pid: i32, start: u64) {
        let f = Frame::json(
            kind,
            0,
            &proto::Tracked {
                pid: pid as u32,
                start,
            },
        );
        if let Some(owner) = self.sessions.values_mut().find(|s| s.owner) {
            owner.send(&f);
        }
    }

    /// The loop; never returns (the owner link's end exits).
    fn run(mut self) -> ! {
        let mut fds: Vec<libc::pollfd> = vec![];
        let mut tags: Vec<Tag> = vec![];
        loop {
            self.after_events();
            fds.clear();
            tags.clear();
            let mut add = |fd: RawFd, events: libc::c_short, tag: Tag| {
                fds.push(libc::pollfd {
                    fd,
                    events,
                    revents: 0,
                });
                tags.push(tag);
            };
            add(self.chld_r.as_raw_fd(), libc::POLLIN, Tag::Chld);
            add(self.listener.as_raw_fd(), libc::POLLIN, Tag::Listener);
            for (&sid, s) in &self.sessions {
                add(s.rfd(), libc::POLLIN, Tag::SessIn(sid));
                if s.pending() > 0 {
                    add(s.wfd(), libc::POLLOUT, Tag::SessOut(sid));
                }
            }
            for c in &self.cmds {
                let throttled = self
                    .sessions
                    .get(&c.sid)
                    .is_some_and(|s| s.pending() > HIGH_WATER);
                if !throttled {
                    if let Some(f) = &c.out {
                        add(f.as_raw_fd(), libc::POLLIN, Tag::Out(c.sid, c.id, false));
                    }
                    if let Some(f) = &c.err {
                        add(f.as_raw_fd(), libc::POLLIN, Tag::Out(c.sid, c.id, true));
                    }
                }
                if let Some(fd) = c.stdin_fd() {
                    if !c.inq.is_empty() {
                        add(fd, libc::POLLOUT, Tag::In(c.sid, c.id));
                    }
                }
            }
            for (i, d) in self.drains.iter().enumerate() {
                add(d.as_raw_fd(), libc::POLLIN, Tag::Drain(i));
            }
            for (&n, b) in &self.bgs {
                if let Some(f) = &b.out {
                    add(f.as_raw_fd(), libc::POLLIN, Tag::Bg(n, false));
                }
                if let Some(f) = &b.err {
                    add(f.as_raw_fd(), libc::POLLIN, Tag::Bg(n, true));
                }
            }
            let timeout = self.poll_timeout();
            // SAFETY: fds is a valid array of fds.len() pollfds.
            let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout) };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    log(&format!("odek-supervisor: poll: {e}"));
                    std::thread::sleep(Duration::from_millis(10));
                }
                continue;
            }
            let mut closed_drains = vec![];
            for (pfd, &tag) in fds.iter().zip(&tags) {
                if pfd.revents == 0 {
                    continue;
                }
                match tag {
                    Tag::Chld => {
                        while matches!(sys::read(self.chld_r.as_raw_fd(), &mut self.buf), Ok(n) if n > 0)
                        {
                        }
                        kill::reap(&mut self.reaped);
                    }
                    Tag::Listener => self.accept(),
                    Tag::SessIn(sid) => self.session_input(sid),
                    Tag::SessOut(sid) => {
                        if let Some(s) = self.sessions.get_mut(&sid) {
                            s.flush();
                        }
                    }
                    Tag::Out(sid, id, is_err) => self.command_output(sid, id, is_err),
                    Tag::In(sid, id) => self.command_input(sid, id),
                    Tag::Bg(n, is_err) => self.bg_output(n, is_err),
                    Tag::Drain(i) => {
                        let fd = self.drains[i].as_raw_fd();
                        match sys::read(fd, &mut self.buf) {
                            Ok(n) if n > 0 => {}
                            Err(e) if sys::would_block(&e) => {}
                            _ => closed_drains.push(i),
                        }
                    }
                }
            }
            closed_drains.sort_unstable();
            for i in closed_drains.into_iter().rev() {
                self.drains.swap_remove(i);
            }
        }
    }

    /// Milliseconds until the nearest deadline (-1: none).
    fn poll_timeout(&self) -> libc::c_int {
        if !self.reaped.is_empty() {
            return 0;
        }
        let now = Instant::now();
        self.cmds
            .iter()
            .filter_map(|c| c.deadline)
            .map(|d| {
                let ms = d.saturating_duration_since(now).as_micros().div_ceil(1000);
                ms.min(60_000) as libc::c_int
            })
            .min()
            .unwrap_or(-1)
    }

    /// Work after each poll: reaped roots, expired deadlines, ended sessions.
    fn after_events(&mut self) {
        kill::reap(&mut self.reaped);
        while !self.reaped.is_empty() {
            let reaped = std::mem::take(&mut self.reaped);
            for (pid, status) in reaped {
                if let Some(i) = self.cmds.iter().position(|c| c.pid == pid) {
                    self.root_exited(i, status);
                }
            }
        }
        let now = Instant::now();
        while let Some(i) = self
            .cmds
            .iter()
            .position(|c| c.deadline.is_some_and(|d| d <= now))
        {
            self.kill_cmd(i, true, true);
        }
        let ended: Vec<Sid> = self
            .sessions
            .iter()
            .filter(|(_, s)| s.ended.is_some())
            .map(|(&sid, _)| sid)
            .collect();
        for sid in ended {
            self.end_session(sid);
        }
    }

    /// A command's root was reaped: drain its output, send Exit, keep
    /// discarding its pipes until EOF.
    fn root_exited(&mut self, i: usize, status: i32) {
        let mut cmd = self.cmds.remove(i);
        if !cmd.bg {
            // A background process stays tracked (its tree is killed if the
            // server dies) until it is killed or evicted.
            self.ledger(Kind::Untracked, cmd.pid, cmd.start);
        }
        for is_err in [false, true] {
            let fd = if is_err { &cmd.err } else { &cmd.out };
            let Some(fd) = fd.as_ref().map(|f| f.as_raw_fd()) else {
                continue;
            };
            let mut total = 0;
            while total < DRAIN_LIMIT {
                match sys::read(fd, &mut self.buf) {
                    Ok(n) if n > 0 => {
                        total += n;
                        if cmd.bg {
                            if let Some(b) = self.bgs.get_mut(&cmd.id) {
                                b.ring.push(is_err, &self.buf[..n]);
                            }
                            continue;
                        }
                        let kind = if is_err { Kind::Stderr } else { Kind::Stdout };
                        let f = Frame {
                            kind,
                            id: cmd.id,
                            payload: self.buf[..n].to_vec(),
                        };
                        self.send(cmd.sid, &f);
                    }
                    _ => break,
                }
            }
        }
        let exit = Exit {
            code: libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)),
            signal: libc::WIFSIGNALED(status).then(|| libc::WTERMSIG(status)),
            ..Exit::default()
        };
        if cmd.bg {
            // Its pipes stay read (into its buffer) until EOF: processes it
            // started may still write.
            if let Some(b) = self.bgs.get_mut(&cmd.id) {
                b.exit = Some(exit);
                b.out = cmd.out.take();
                b.err = cmd.err.take();
                b.overlapped |= cmd.overlapped;
                b.before = std::mem::take(&mut cmd.before);
            }
            self.retire(&mut cmd);
            return;
        }
        self.send(cmd.sid, &Frame::json(Kind::Exit, cmd.id, &exit));
        self.retire(&mut cmd);
    }

    /// Moves a finished command's output fds to the drains; closes stdin.
    fn retire(&mut self, cmd: &mut Cmd) {
        cmd.stdin = None;
        self.drains.extend(cmd.out.take());
        self.drains.extend(cmd.err.take());
    }

    /// Kills command `i`'s tree (timeout or cancel) and, when `report`,
    /// sends its Exit.
    fn kill_cmd(&mut self, i: usize, timed_out: bool, report: bool) {
        let mut cmd = self.cmds.remove(i);
        let tree = Tree {
            root: cmd.pid,
            start: cmd.start,
            me: self.me,
            overlapped: cmd.overlapped,
            before: std::mem::take(&mut cmd.before),
            other_roots: self
                .cmds
                .iter()
                .map(|c| c.pid)
                .chain(std::iter::once(self.keeper))
                .collect::<BTreeSet<_>>(),
        };
        let outcome = kill::kill_tree(&tree, &mut self.reaped);
        self.ledger(Kind::Untracked, cmd.pid, cmd.start);
        self.retire(&mut cmd);
        if let Some(s) = self.sessions.get_mut(&cmd.sid) {
            s.drop_output(cmd.id);
        }
        let exit = Exit {
            code: None,
            signal: Some(libc::SIGKILL),
            timed_out,
            cancelled: !timed_out,
            killed: outcome.confirmed,
            escaped: outcome.escaped,
            nothing_to_kill: false,
        };
        if cmd.bg {
            if let Some(b) = self.bgs.get_mut(&cmd.id) {
                b.exit = Some(exit);
                b.overlapped |= cmd.overlapped;
            }
        } else if report {
            self.send(cmd.sid, &Frame::json(Kind::Exit, cmd.id, &exit));
        }
    }

    /// Ends session `sid`: the owner's end kills everything and exits; a
    /// relay's kills its commands and closes it.
    fn end_session(&mut self, sid: Sid) {
        let Some(s) = self.sessions.get(&sid) else {
            return;
        };
        let why = s.ended.clone().unwrap_or_default();
        if s.owner {
            log(&format!(
                "odek-supervisor: owner session ended ({why}); killing every process"
            ));
            kill::kill_everything(&[self.me, self.keeper], &mut self.reaped);
            std::process::exit(0);
        }
        while let Some(i) = self.cmds.iter().position(|c| c.sid == sid) {
            self.kill_cmd(i, false, false);
        }
        self.sessions.remove(&sid);
    }

    /// Accepts relay connections; only uid S may stay.
    fn accept(&mut self) {
        loop {
            // SAFETY: accept4 with null address pointers.
            let fd = unsafe {
                libc::accept4(
                    self.listener.as_raw_fd(),
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
                )
            };
            if fd < 0 {
                return;
            }
            // SAFETY: fd was just accepted and is owned by nobody else.
            let sock = unsafe { OwnedFd::from_raw_fd(fd) };
            match sys::peer_cred(fd) {
                Ok((_, uid, _)) if uid == self.uid => {
                    self.add_session(Session::relay(sock));
                }
                Ok((pid, uid, gid)) => {
                    drop(sock);
                    self.notice(&format!(
                        "refused a relay connection from pid {pid} (uid {uid}, gid {gid}): only uid {} may connect",
                        self.uid
                    ));
                }
                Err(e) => {
                    drop(sock);
                    self.notice(&format!("refused a relay connection: SO_PEERCRED: {e}"));
                }
            }
        }
    }

    /// Reads and handles frames of session `sid`.
    fn session_input(&mut self, sid: Sid) {
        let Some(s) = self.sessions.get_mut(&sid) else {
            return;
        };
        s.read_some(&mut self.buf);
        loop {
            let Some(s) = self.sessions.get_mut(&sid) else {
                return;
            };
            match s.dec.next_frame() {
                Ok(Some(f)) => {
                    if let Err(e) = self.handle(sid, f) {
                        self.malformed(sid, e);
                        return;
                    }
                }
                Ok(None) => return,
                Err(e) => {
                    self.malformed(sid, e.to_string());
                    return;
                }
            }
        }
    }

    /// A protocol error ends the session.
    fn malformed(&mut self, sid: Sid, why: String) {
        log(&format!("odek-supervisor: malformed frame: {why}"));
        if let Some(s) = self.sessions.get_mut(&sid) {
            s.end(format!("malformed frame: {why}"));
        }
    }

    /// Handles one frame from the core.
    fn handle(&mut self, sid: Sid, f: Frame) -> Result<(), String> {
        let find = |cmds: &[Cmd], id: u32| cmds.iter().position(|c| c.sid == sid && c.id == id);
        match f.kind {
            Kind::Start => {
                let start: Start = f.parse().map_err(|e| e.to_string())?;
                self.start(sid, f.id, start);
            }
            Kind::Background => {
                let start: Start = f.parse().map_err(|e| e.to_string())?;
                self.background(sid, f.id, start);
            }
            Kind::Poll => {
                let poll: Poll = f.parse().map_err(|e| e.to_string())?;
                self.poll_process(sid, f.id, poll);
            }
            Kind::KillProcess => {
                let which: ProcessRef = f.parse().map_err(|e| e.to_string())?;
                self.kill_process(sid, f.id, which);
            }
            Kind::Stdin => {
                if let Some(i) = find(&self.cmds, f.id) {
                    let c = &mut self.cmds[i];
                    if c.stdin_open && !c.close_after {
                        if f.payload.is_empty() {
                            if c.tty {
                                c.inq.push(0x04);
                            } else {
                                c.close_after = true;
                            }
                        } else {
                            c.inq.extend_from_slice(&f.payload);
                        }
                        self.command_input(sid, f.id);
                    }
                }
            }
            Kind::Resize => {
                let ws: WinSize = f.parse().map_err(|e| e.to_string())?;
                if let Some(i) = find(&self.cmds, f.id) {
                    if let (true, Some(m)) = (self.cmds[i].tty, &self.cmds[i].out) {
                        let _ = crate::pty::resize(m.as_raw_fd(), ws);
                    }
                }
            }
            Kind::Kill => {
                if let Some(i) = find(&self.cmds, f.id) {
                    self.kill_cmd(i, false, true);
                }
            }
            Kind::Ping => self.send(
                sid,
                &Frame {
                    kind: Kind::Pong,
                    id: f.id,
                    payload: f.payload,
                },
            ),
            other => return Err(format!("{other:?} is not a frame the core sends")),
        }
        Ok(())
    }

    /// Starts a command, answering Started or Failed.
    fn start(&mut self, sid: Sid, id: u32, start: Start) {
        match self.spawn_cmd(sid, id, &start, false) {
            Ok(pid) => self.send(
                sid,
                &Frame::json(Kind::Started, id, &Started { pid: pid as u32 }),
            ),
            Err(failed) => self.send(sid, &Frame::json(Kind::Failed, id, &failed)),
        }
    }

    /// Checks and spawns a command as `(sid, id)`; its root pid, or why not.
    fn spawn_cmd(&mut self, sid: Sid, id: u32, start: &Start, bg: bool) -> Result<i32, Failed> {
        let refuse = if start.uid == self.uid {
            Some(format!("uid {} is the supervisor's own", start.uid))
        } else if start.gid == self.gid || start.groups.contains(&self.gid) {
            Some(format!("gid {} is the supervisor's own", self.gid))
        } else if let Some(bound) = self
            .commands
            .filter(|&b| b != [start.uid, start.gid] || !start.groups.is_empty())
        {
            Some(format!(
                "commands run as {}:{} without supplementary groups, not {}:{} {:?}",
                bound[0], bound[1], start.uid, start.gid, start.groups
            ))
        } else if start.argv.is_empty() {
            Some("empty argv".to_string())
        } else if self.cmds.iter().any(|c| c.sid == sid && c.id == id) {
            Some(format!("command id {id} is already running"))
        } else {
            None
        };
        if let Some(m) = refuse {
            return Err(Failed::new(m));
        }
        // Before the fork: what predates the command (see `Tree::before`).
        let before = kill::pids();
        let child = spawn::spawn(start, &self.base_env, self.cap_last)?;
        let started_at = Instant::now();
        let overlapped = !self.cmds.is_empty();
        for c in &mut self.cmds {
            c.overlapped = true;
        }
        // An ended background process's orphans can no longer be told from
        // this command's.
        for b in self.bgs.values_mut() {
            b.overlapped = true;
        }
        let start_ticks = kill::stat(child.pid).map_or(0, |p| p.start);
        self.ledger(Kind::Tracked, child.pid, start_ticks);
        self.cmds.push(Cmd {
            sid,
            id,
            pid: child.pid,
            start: start_ticks,
            deadline: start
                .timeout_ms
                .map(|ms| started_at + Duration::from_millis(ms)),
            tty: start.tty.is_some(),
            stdin_open: start.stdin || start.tty.is_some(),
            out: Some(child.stdout),
            err: child.stderr,
            stdin: child.stdin,
            inq: vec![],
            close_after: false,
            overlapped,
            bg,
            before,
        });
        Ok(child.pid)
    }

    /// The name a background process `n` is known by ([`Spawned::process`]):
    /// this server's random tag and `n`.
    fn bg_name(&self, n: u32) -> String {
        format!("{}-{n}", self.tag)
    }

    /// The number of the background process named `process`, when this
    /// server has it.
    fn bg_number(&self, process: &str) -> Option<u32> {
        let (server, n) = process.split_once('-')?;
        if server != self.tag {
            return None;
        }
        let n: u32 = n.parse().ok()?;
        self.bgs.contains_key(&n).then_some(n)
    }

    /// The refusal of an unknown background process.
    fn unknown_bg(&mut self, sid: Sid, id: u32, process: &str) {
        let message = format!(
            "no background process {:?} in this supervisor (not started here, evicted after it ended, or started by a server that has since died)",
            process.chars().take(64).collect::<String>()
        );
        self.send(sid, &Frame::json(Kind::Failed, id, &Failed::new(message)));
    }

    /// Starts a background command, answering Spawned or Failed: at most
    /// [`MAX_BACKGROUND`] are kept (the oldest ended one is evicted to make
    /// room); no stdin, no terminal.
    fn background(&mut self, sid: Sid, id: u32, start: Start) {
        let admitted = if start.stdin || start.tty.is_some() {
            Err("a background command has no stdin and no terminal".to_string())
        } else if self.bgs.len() >= MAX_BACKGROUND {
            match self
                .bgs
                .iter()
                .find(|(_, b)| b.exit.is_some())
                .map(|(&n, b)| (n, b.pid, b.start))
            {
                Some((n, pid, start)) => {
                    self.bgs.remove(&n);
                    self.ledger(Kind::Untracked, pid, start);
                    Ok(())
                }
                None => Err(format!(
                    "{MAX_BACKGROUND} background processes already run in this sandbox (the most it keeps); kill one before starting another"
                )),
            }
        } else {
            Ok(())
        };
        let n = self.next_bg;
        let spawned = admitted
            .map_err(Failed::new)
            .and_then(|()| self.spawn_cmd(BG_SID, n, &start, true));
        match spawned {
            Ok(pid) => {
                self.next_bg += 1;
                let started = self.cmds.last().map_or(0, |c| c.start);
                self.bgs.insert(
                    n,
                    Bg {
                        pid,
                        start: started,
                        ring: Ring::new(BACKGROUND_BUFFER),
                        exit: None,
                        out: None,
                        err: None,
                        overlapped: false,
                        before: vec![],
                    },
                );
                let process = self.bg_name(n);
                self.send(
                    sid,
                    &Frame::json(
                        Kind::Spawned,
                        id,
                        &Spawned {
                            process,
                            pid: pid as u32,
                        },
                    ),
                );
            }
            Err(failed) => self.send(sid, &Frame::json(Kind::Failed, id, &failed)),
        }
    }

    /// Answers a Poll: the output since its cursor as Stdout/Stderr frames,
    /// then Polled.
    fn poll_process(&mut self, sid: Sid, id: u32, poll: Poll) {
        let Some(n) = self.bg_number(&poll.process) else {
            return self.unknown_bg(sid, id, &poll.process);
        };
        let Some(b) = self.bgs.get(&n) else {
            return;
        };
        let read = match b.ring.read(poll.cursor) {
            Ok(r) => r,
            Err(message) => {
                return self.send(sid, &Frame::json(Kind::Failed, id, &Failed::new(message)));
            }
        };
        let mut frames = vec![];
        for (is_err, bytes) in &read.chunks {
            for piece in bytes.chunks(OUTPUT_CHUNK) {
                frames.push(Frame {
                    kind: if *is_err { Kind::Stderr } else { Kind::Stdout },
                    id,
                    payload: piece.to_vec(),
                });
            }
        }
        let polled = Polled {
            process: poll.process,
            pid: b.pid as u32,
            cursor: read.cursor,
            next: read.next,
            dropped: read.dropped,
            exit: b.exit.clone(),
        };
        frames.push(Frame::json(Kind::Polled, id, &polled));
        for f in &frames {
            self.send(sid, f);
        }
    }

    /// Kills a background process's tree (a running root's, or what is
    /// left of an ended one's: its process group, session and
    /// descendants, and the orphans the supervisor adopted unless another
    /// command overlapped it) and answers Polled. Its exit then says this
    /// kill's outcome: `killed` only when it found processes of the tree
    /// and saw every target gone, `escaped` the orphans left running,
    /// `nothing_to_kill` when it found none; a root that had ended by
    /// itself is marked `cancelled` (the kill was asked for).
    fn kill_process(&mut self, sid: Sid, id: u32, which: ProcessRef) {
        let Some(n) = self.bg_number(&which.process) else {
            return self.unknown_bg(sid, id, &which.process);
        };
        if let Some(i) = self.cmds.iter().position(|c| c.bg && c.id == n) {
            self.kill_cmd(i, false, true);
        } else if let Some(b) = self.bgs.get_mut(&n) {
            let (root, start) = (b.pid, b.start);
            self.drains.extend(b.out.take());
            self.drains.extend(b.err.take());
            let tree = Tree {
                root,
                start,
                me: self.me,
                overlapped: b.overlapped,
                before: std::mem::take(&mut b.before),
                other_roots: self
                    .cmds
                    .iter()
                    .map(|c| c.pid)
                    .chain(std::iter::once(self.keeper))
                    .collect::<BTreeSet<_>>(),
            };
            let outcome = kill::kill_tree(&tree, &mut self.reaped);
            self.ledger(Kind::Untracked, root, start);
            if let Some(e) = self.bgs.get_mut(&n).and_then(|b| b.exit.as_mut()) {
                let nothing = outcome.found == 0 && outcome.escaped.is_empty() && outcome.confirmed;
                e.cancelled |= !e.timed_out;
                e.killed = outcome.confirmed && !nothing;
                e.escaped = outcome.escaped;
                e.nothing_to_kill = nothing;
            }
        }
        let Some(b) = self.bgs.get(&n) else {
            return;
        };
        let end = b.ring.end();
        let polled = Polled {
            process: which.process,
            pid: b.pid as u32,
            cursor: end,
            next: end,
            dropped: 0,
            exit: b.exit.clone(),
        };
        self.send(sid, &Frame::json(Kind::Polled, id, &polled));
    }

    /// Reads a background process's pipe after its root ended.
    fn bg_output(&mut self, n: u32, is_err: bool) {
        let Some(b) = self.bgs.get_mut(&n) else {
            return;
        };
        let slot = if is_err { &mut b.err } else { &mut b.out };
        let Some(fd) = slot.as_ref().map(|f| f.as_raw_fd()) else {
            return;
        };
        match sys::read(fd, &mut self.buf) {
            Ok(n) if n > 0 => b.ring.push(is_err, &self.buf[..n]),
            Err(e) if sys::would_block(&e) => {}
            _ => *slot = None,
        }
    }

    /// Reads one chunk of a command's output and forwards it.
    fn command_output(&mut self, sid: Sid, id: u32, is_err: bool) {
        let Some(i) = self.cmds.iter().position(|c| c.sid == sid && c.id == id) else {
            return;
        };
        let c = &mut self.cmds[i];
        let slot = if is_err { &mut c.err } else { &mut c.out };
        let Some(fd) = slot.as_ref().map(|f| f.as_raw_fd()) else {
            return;
        };
        match sys::read(fd, &mut self.buf) {
            Ok(0) => *slot = None,
            Ok(n) if c.bg => {
                if let Some(b) = self.bgs.get_mut(&id) {
                    b.ring.push(is_err, &self.buf[..n]);
                }
            }
            Ok(n) => {
                let kind = if is_err { Kind::Stderr } else { Kind::Stdout };
                let f = Frame {
                    kind,
                    id,
                    payload: self.buf[..n].to_vec(),
                };
                self.send(sid, &f);
            }
            Err(e) if sys::would_block(&e) => {}
            Err(_) => {
                // EIO on a master: no slave is open. Keep it for Resize and
                // stdin only when the root still runs; output is over.
                if c.tty {
                    c.stdin_open = false;
                }
                *slot = None;
            }
        }
    }

    /// Writes queued stdin bytes to a command; closes its stdin when asked.
    fn command_input(&mut self, sid: Sid, id: u32) {
        let Some(i) = self.cmds.iter().position(|c| c.sid == sid && c.id == id) else {
            return;
        };
        let c = &mut self.cmds[i];
        let Some(fd) = c.stdin_fd() else {
            c.inq.clear();
            return;
        };
        while !c.inq.is_empty() {
            match sys::write(fd, &c.inq) {
                Ok(n) => {
                    c.inq.drain(..n);
                }
                Err(e) if sys::would_block(&e) => break,
                Err(_) => {
                    // The command closed its end: drop what is queued.
                    c.inq.clear();
                    c.stdin_open = false;
                    c.stdin = None;
                    break;
                }
            }
        }
        if c.inq.is_empty() && c.close_after {
            c.stdin_open = false;
            c.stdin = None;
        }
    }
}

/// 16 hex digits from the kernel's random source (`getrandom`, else
/// `/dev/urandom`; at worst the pid and the clock, which still differ
/// between servers that run at once).
fn random_tag() -> String {
    let mut b = [0u8; 8];
    // SAFETY: writes at most `b.len()` bytes into `b`.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    if n != b.len() as isize {
        use std::io::Read;
        let read = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut b));
        if read.is_err() {
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0);
            b = (t ^ ((std::process::id() as u64) << 32)).to_le_bytes();
        }
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notices_beyond_the_burst_are_counted_and_said_later() {
        let t0 = Instant::now();
        let mut b = NoticeBudget {
            window: t0,
            sent: 0,
            dropped: 0,
        };
        let shown: Vec<_> = (0..50)
            .filter_map(|i| b.admit(t0, &format!("n{i}")))
            .collect();
        assert_eq!(shown, ["n0", "n1", "n2", "n3", "n4"]);
        assert_eq!(b.admit(t0 + NOTICE_WINDOW / 2, "x"), None);
        let later = b.admit(t0 + NOTICE_WINDOW, "next");
        assert_eq!(later.as_deref(), Some("(46 more notices not shown) next"));
        assert_eq!(
            b.admit(t0 + NOTICE_WINDOW, "again").as_deref(),
            Some("again")
        );
    }
}
