//! libodek in a process forked from the one that uses it (SPEC §10.1, §6.1).
//!
//! `fork()` copies the calling thread only: in the child, the runtime's
//! worker threads are gone, its locks may be held forever, and its sockets
//! and epoll instance are shared with the parent, so a call that touched
//! them would hang the child or disturb the parent's calls in flight.
//!
//! So the process that first makes libodek's state (the runtime, the handle
//! table) is recorded, and every call that would use that state first
//! checks that it runs there ([`check`]); in a forked child it returns
//! `ODEK_E_FORKED` before it touches any lock, the runtime or a socket.
//! Error objects, strings and the calls that use no state (narrow, the
//! approval request of a plan, the versions) work in the child.
//!
//! The child must not keep its parent's sandboxes alive either: a
//! `pthread_atfork` child handler, installed when the state is made, closes
//! the child's copies of the owner links (SPEC §6.1 owner lifetime,
//! `odek_core::engine::take_owner_link_fds`) and marks the process as
//! forked — with async-signal-safe operations only (atomics, `close`).

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use crate::error::{Code, Failure};

/// The process that made libodek's state; 0 until then.
static OWNER: AtomicU32 = AtomicU32::new(0);

/// Set by the fork handler in a child of the owner.
static FORKED: AtomicBool = AtomicBool::new(false);

/// Ok in the process that made libodek's state (or makes it now: the first
/// call records the process and installs the fork handler);
/// `ODEK_E_FORKED` in a process forked from it. Touches nothing but two
/// atomics (and, the first time, `pthread_atfork`).
pub fn check() -> Result<(), Failure> {
    let me = std::process::id();
    let owner = match OWNER.load(Ordering::Acquire) {
        0 => match OWNER.compare_exchange(0, me, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => {
                install();
                me
            }
            Err(owner) => owner,
        },
        owner => owner,
    };
    if owner == me && !FORKED.load(Ordering::Acquire) {
        return Ok(());
    }
    Err(Failure::new(
        Code::ODEK_E_FORKED,
        format!(
            "this process (pid {me}) was forked from process {owner}, which uses libodek, and a \
             forked child cannot use its parent's libodek: the runtime's threads did not come \
             along, and its connections and handles are the parent's. Nothing was done; the \
             parent's sandboxes are left to the parent (the child closed its copies of their \
             owner links). Start the child with exec instead (Python multiprocessing: the \
             'spawn' or 'forkserver' start method, e.g. multiprocessing.set_start_method('spawn')), \
             or use libodek only in the child, with no libodek call in the parent before the fork"
        ),
    ))
}

/// Installs the fork handler (once, by the caller that recorded the owner).
fn install() {
    // SAFETY: registers a handler with no preconditions; `child_after_fork`
    // is async-signal-safe (below).
    let rc = unsafe { libc::pthread_atfork(None, None, Some(child_after_fork)) };
    // ENOMEM is the only failure: the check's pid comparison still refuses
    // a child's calls; only its copies of the owner links stay open.
    debug_assert_eq!(rc, 0, "pthread_atfork");
}

/// Runs in the child of a `fork()` (of any thread of this process), before
/// `fork()` returns there: marks the process and closes its copies of the
/// owner links. Only atomics and `close`, both async-signal-safe, as the
/// child of a multi-threaded process requires; the parent's descriptors are
/// not affected.
extern "C" fn child_after_fork() {
    FORKED.store(true, Ordering::Release);
    odek_core::engine::take_owner_link_fds(|fd| {
        // SAFETY: closes this process's copy of a descriptor registered as
        // an owner link; nothing in the child uses it afterwards (every
        // call that could is refused, and a hold dropped here closes nothing).
        unsafe { libc::close(fd) };
    });
}
