//! The local side of `-i` and `-t` (`odek run`, `odek sandbox exec`,
//! `odek sandbox shell`): odek's stdin as the command's, and the local
//! terminal as the command's terminal — in raw mode while the command runs
//! (restored on every way out: its end, an error, a signal, a panic), its
//! size given at the start and on each SIGWINCH.
//!
//! Stdin is read on a thread of its own, never tokio's blocking pool: a
//! read that never returns (a terminal nobody types in) must not hold the
//! runtime's shutdown.

use std::io::Read;
use std::os::fd::AsFd;
use std::sync::Mutex;

use futures_util::stream::BoxStream;
use futures_util::StreamExt;
use odek_core::{ExecIo, WinSize};
use rustix::termios::{self, OptionalActions, Termios};

/// `-i` and `-t` as a command line gave them.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Interactive {
    /// Forward odek's stdin to the command (`-i`).
    pub(crate) stdin: bool,
    /// Run the command on a pseudo-terminal (`-t`).
    pub(crate) tty: bool,
}

/// The refusal of `-t` when odek's stdin is not a terminal (as Docker's
/// "the input device is not a TTY").
pub(crate) const NOT_A_TTY: &str = "the input device is not a TTY: -t (and `odek sandbox shell`) needs a terminal on stdin; run it from a terminal, or drop -t (-i alone forwards piped input)";

impl Interactive {
    /// Checks what must hold before anything is launched: `-t` needs a
    /// terminal on stdin. Errors: [`NOT_A_TTY`].
    pub(crate) fn check(&self) -> Result<(), &'static str> {
        if self.tty && !termios::isatty(std::io::stdin().as_fd()) {
            return Err(NOT_A_TTY);
        }
        Ok(())
    }

    /// The core's [`ExecIo`] for the command, and the guard that keeps the
    /// local terminal raw until it is dropped (with `-it` only: `-t` alone
    /// forwards no keys, so Ctrl-C stays odek's interrupt, as in Docker).
    /// Call right before the exec and drop the guard right after it.
    ///
    /// Errors: the terminal's settings cannot be read or changed.
    pub(crate) fn start(&self) -> std::io::Result<(ExecIo<'static>, Option<RawMode>)> {
        let mut io = ExecIo::default();
        let mut raw = None;
        if self.tty {
            io.tty = Some(size().unwrap_or(WinSize { cols: 80, rows: 24 }));
            io.resize = resizes();
            if self.stdin {
                raw = Some(RawMode::enter()?);
            }
        }
        if self.stdin {
            io.stdin = Some(stdin_stream());
        }
        Ok((io, raw))
    }
}

/// The local terminal's size (stdin's, else stdout's).
fn size() -> Option<WinSize> {
    let ws = termios::tcgetwinsize(std::io::stdin().as_fd())
        .or_else(|_| termios::tcgetwinsize(std::io::stdout().as_fd()))
        .ok()?;
    (ws.ws_col > 0 && ws.ws_row > 0).then_some(WinSize {
        cols: ws.ws_col,
        rows: ws.ws_row,
    })
}

/// The terminal's size after each SIGWINCH (`None` when the handler
/// cannot be installed: the size then stays the first one).
fn resizes() -> Option<BoxStream<'static, WinSize>> {
    let mut sig =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::window_change()).ok()?;
    Some(
        futures_util::stream::poll_fn(move |cx| sig.poll_recv(cx))
            .filter_map(|()| std::future::ready(size()))
            .boxed(),
    )
}

/// odek's stdin as chunks, read on a thread of its own; the stream ends at
/// end of file or a read error.
fn stdin_stream() -> BoxStream<'static, Vec<u8>> {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<u8>>(16);
    let spawned = std::thread::Builder::new()
        .name("odek-stdin".into())
        .spawn(move || {
            let mut stdin = std::io::stdin();
            let mut buf = vec![0u8; 32 << 10];
            loop {
                match stdin.read(&mut buf) {
                    Ok(0) => return,
                    Ok(n) => {
                        if tx.blocking_send(buf[..n].to_vec()).is_err() {
                            return;
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => return,
                }
            }
        });
    if spawned.is_err() {
        // No thread: the command sees an empty stdin.
        return futures_util::stream::empty().boxed();
    }
    futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx)).boxed()
}

/// The terminal's settings before raw mode, for the panic hook.
static SAVED: Mutex<Option<Termios>> = Mutex::new(None);

/// Restores the settings [`RawMode::enter`] saved, once.
fn restore() {
    let saved = SAVED.lock().unwrap_or_else(|p| p.into_inner()).take();
    if let Some(t) = saved {
        let _ = termios::tcsetattr(std::io::stdin().as_fd(), OptionalActions::Now, &t);
    }
}

/// The local terminal in raw mode (no echo, no line editing, no signals
/// from keys: Ctrl-C is a byte for the command) until this is dropped. A
/// panic restores it before its message is printed.
pub(crate) struct RawMode(());

impl RawMode {
    fn enter() -> std::io::Result<RawMode> {
        static HOOK: std::sync::Once = std::sync::Once::new();
        HOOK.call_once(|| {
            let previous = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                restore();
                previous(info);
            }));
        });
        let fd = std::io::stdin();
        let saved = termios::tcgetattr(fd.as_fd())?;
        let mut raw = saved.clone();
        raw.make_raw();
        *SAVED.lock().unwrap_or_else(|p| p.into_inner()) = Some(saved);
        if let Err(e) = termios::tcsetattr(fd.as_fd(), OptionalActions::Now, &raw) {
            restore();
            return Err(e.into());
        }
        Ok(RawMode(()))
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        restore();
    }
}
