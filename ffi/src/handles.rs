//! Opaque handles. A handle is a never-reused integer cast to a pointer and
//! looked up in a process-wide table before use, so a destroyed or foreign
//! handle is detected (`ODEK_E_INVALID_HANDLE`) instead of dereferenced.

use odek_core::config::names;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use odek_core::{CancellationToken, Sandbox};

use crate::error::{Code, Failure};

/// Opaque client handle (never dereferenced: an ID in disguise).
#[allow(non_camel_case_types)]
pub struct odek_client_t {
    _private: (),
}

/// Opaque sandbox handle (never dereferenced: an ID in disguise).
#[allow(non_camel_case_types)]
pub struct odek_sandbox_t {
    _private: (),
}

/// Opaque cancel handle (never dereferenced: an ID in disguise).
#[allow(non_camel_case_types)]
pub struct odek_cancel_t {
    _private: (),
}

/// Opaque stdin handle (never dereferenced: an ID in disguise).
#[allow(non_camel_case_types)]
pub struct odek_stdin_t {
    _private: (),
}

/// What a stdin handle stands for: the bytes written and not yet taken
/// by the command, and whether it is closed. One exec takes the receiving
/// end; writes go to it while it runs.
pub struct StdinPipe {
    /// The writing end; `None` once closed.
    pub tx: Mutex<Option<tokio::sync::mpsc::UnboundedSender<Vec<u8>>>>,
    /// The reading end, until an exec takes it.
    pub rx: Mutex<Option<tokio::sync::mpsc::UnboundedReceiver<Vec<u8>>>>,
}

/// What a client handle stands for.
pub struct Client {
    /// The core client.
    pub odek: odek_core::Client,
    /// Its warm pool (the `sandbox_pool` client option), when it keeps one.
    pub pool: Option<odek_core::pool::Pool>,
}

/// What a sandbox handle stands for.
pub struct SandboxHandle {
    /// The client it was launched with.
    pub odek: odek_core::Client,
    /// The sandbox.
    pub sandbox: Sandbox,
}

enum Entry {
    Client(Arc<Client>),
    Sandbox(Arc<SandboxHandle>),
    Cancel(CancellationToken),
    Stdin(Arc<StdinPipe>),
}

/// The table, locked. `ODEK_E_FORKED` in a process forked from the one
/// that made it (before its lock is touched: the fork may have copied it
/// held by a thread that did not come along).
fn table() -> Result<MutexGuard<'static, HashMap<usize, Entry>>, Failure> {
    crate::fork::check()?;
    static T: OnceLock<Mutex<HashMap<usize, Entry>>> = OnceLock::new();
    Ok(T.get_or_init(|| Mutex::new(HashMap::new()))
        .lock()
        .unwrap_or_else(|p| p.into_inner()))
}

/// IDs start high and step by 16 so they never look like small integers or
/// share a value with each other.
fn next_id() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0x0dec_0000);
    NEXT.fetch_add(16, Ordering::Relaxed)
}

fn invalid(kind: &str) -> Failure {
    Failure::new(
        Code::ODEK_E_INVALID_HANDLE,
        format!("the {kind} handle is unknown or was already destroyed"),
    )
}

fn null(kind: &str) -> Failure {
    Failure::new(Code::ODEK_E_NULL_POINTER, format!("{kind} is NULL"))
}

/// Registers a client; returns its handle.
pub fn insert_client(c: Client) -> Result<*mut odek_client_t, Failure> {
    let id = next_id();
    table()?.insert(id, Entry::Client(Arc::new(c)));
    Ok(std::ptr::without_provenance_mut(id))
}

/// Registers a sandbox; returns its handle.
pub fn insert_sandbox(s: SandboxHandle) -> Result<*mut odek_sandbox_t, Failure> {
    let id = next_id();
    table()?.insert(id, Entry::Sandbox(Arc::new(s)));
    Ok(std::ptr::without_provenance_mut(id))
}

/// Looks a client up.
pub fn client(h: *const odek_client_t) -> Result<Arc<Client>, Failure> {
    if h.is_null() {
        return Err(null("client"));
    }
    match table()?.get(&h.addr()) {
        Some(Entry::Client(c)) => Ok(c.clone()),
        _ => Err(invalid("client")),
    }
}

/// Looks a sandbox up.
pub fn sandbox(h: *const odek_sandbox_t) -> Result<Arc<SandboxHandle>, Failure> {
    if h.is_null() {
        return Err(null(names::sandbox));
    }
    match table()?.get(&h.addr()) {
        Some(Entry::Sandbox(s)) => Ok(s.clone()),
        _ => Err(invalid(names::sandbox)),
    }
}

/// Unregisters a client.
pub fn remove_client(h: *mut odek_client_t) -> Result<Arc<Client>, Failure> {
    let mut t = table()?;
    match t.get(&h.addr()) {
        Some(Entry::Client(_)) => match t.remove(&h.addr()) {
            Some(Entry::Client(c)) => Ok(c),
            _ => Err(invalid("client")),
        },
        _ => Err(invalid("client")),
    }
}

/// Unregisters a sandbox.
pub fn remove_sandbox(h: *mut odek_sandbox_t) -> Result<Arc<SandboxHandle>, Failure> {
    let mut t = table()?;
    match t.get(&h.addr()) {
        Some(Entry::Sandbox(_)) => match t.remove(&h.addr()) {
            Some(Entry::Sandbox(s)) => Ok(s),
            _ => Err(invalid(names::sandbox)),
        },
        _ => Err(invalid(names::sandbox)),
    }
}

/// Registers a cancel token; returns its handle.
pub fn insert_cancel(c: CancellationToken) -> Result<*mut odek_cancel_t, Failure> {
    let id = next_id();
    table()?.insert(id, Entry::Cancel(c));
    Ok(std::ptr::without_provenance_mut(id))
}

/// Looks a cancel token up; NULL is `None` (the call is not cancellable).
/// The token is a clone: a call keeps it after the handle is freed.
pub fn cancel(h: *const odek_cancel_t) -> Result<Option<CancellationToken>, Failure> {
    if h.is_null() {
        return Ok(None);
    }
    match table()?.get(&h.addr()) {
        Some(Entry::Cancel(c)) => Ok(Some(c.clone())),
        _ => Err(invalid("cancel")),
    }
}

/// Unregisters a cancel token.
pub fn remove_cancel(h: *mut odek_cancel_t) -> Result<CancellationToken, Failure> {
    let mut t = table()?;
    match t.get(&h.addr()) {
        Some(Entry::Cancel(_)) => match t.remove(&h.addr()) {
            Some(Entry::Cancel(c)) => Ok(c),
            _ => Err(invalid("cancel")),
        },
        _ => Err(invalid("cancel")),
    }
}

/// Registers a stdin pipe; returns its handle.
pub fn insert_stdin() -> Result<*mut odek_stdin_t, Failure> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let pipe = StdinPipe {
        tx: Mutex::new(Some(tx)),
        rx: Mutex::new(Some(rx)),
    };
    let id = next_id();
    table()?.insert(id, Entry::Stdin(Arc::new(pipe)));
    Ok(std::ptr::without_provenance_mut(id))
}

/// Looks a stdin pipe up (NULL or unknown: `ODEK_E_INVALID_HANDLE`).
pub fn stdin(h: *const odek_stdin_t) -> Result<Arc<StdinPipe>, Failure> {
    match table()?.get(&h.addr()) {
        Some(Entry::Stdin(p)) => Ok(Arc::clone(p)),
        _ => Err(invalid("stdin")),
    }
}

/// Unregisters a stdin pipe (closing it: the command's stdin ends once
/// what was written is read).
pub fn remove_stdin(h: *mut odek_stdin_t) -> Result<(), Failure> {
    let mut t = table()?;
    match t.get(&h.addr()) {
        Some(Entry::Stdin(_)) => match t.remove(&h.addr()) {
            Some(Entry::Stdin(p)) => {
                p.tx.lock().unwrap_or_else(|e| e.into_inner()).take();
                Ok(())
            }
            _ => Err(invalid("stdin")),
        },
        _ => Err(invalid("stdin")),
    }
}
