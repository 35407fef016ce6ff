//! The file descriptors of this process's owner links (SPEC §6.1 owner
//! lifetime), for a process that forks without exec.
//!
//! A child made by `fork()` inherits a copy of every descriptor, and an owned
//! sandbox lives as long as any copy of its owner's connection to the
//! container's stdin is open: a child that outlives its parent would keep
//! the parent's sandboxes alive. Close-on-exec does not help (the child does
//! not exec). So every owner link is registered here while it is open, and
//! a `pthread_atfork` child handler (the C ABI installs one) closes the
//! child's copies with [`take_owner_link_fds`], which only loads and swaps
//! atomics: it allocates nothing and takes no lock, as code running in the
//! child of a multi-threaded process must. Closing the child's copy leaves
//! the parent's connection as it was.
//!
//! Registration follows the socket's creation at once, before a byte is
//! sent; a fork made by another thread between the two (a connect in
//! progress) is not covered.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};

use super::{EngineError, EngineErrorKind, Op};

/// Most owner links one process holds open at once: one per owned sandbox
/// (4096).
pub const OWNER_LINK_SLOTS: usize = 4096;

/// The registered descriptors; -1 marks a free slot.
static SLOTS: [AtomicI32; OWNER_LINK_SLOTS] = [const { AtomicI32::new(-1) }; OWNER_LINK_SLOTS];

/// One past the highest slot ever used: [`take_owner_link_fds`] looks no
/// further.
static USED: AtomicUsize = AtomicUsize::new(0);

/// An owner link's descriptor, registered until this value is dropped. Drop
/// it before the descriptor is closed, so that a fork in between cannot
/// close a descriptor that reused the number.
#[derive(Debug)]
pub(crate) struct Registered {
    slot: usize,
    fd: RawFd,
}

impl Registered {
    /// Registers `fd`. Errors ([`EngineErrorKind::Rejected`], no status)
    /// when [`OWNER_LINK_SLOTS`] links are already open in this process.
    pub(crate) fn new(fd: RawFd) -> Result<Registered, EngineError> {
        for (slot, cell) in SLOTS.iter().enumerate() {
            if cell.load(Ordering::Acquire) != -1 {
                continue;
            }
            // Raised before the slot is filled, so that a fork between the
            // two still looks at the slot.
            USED.fetch_max(slot + 1, Ordering::AcqRel);
            if cell
                .compare_exchange(-1, fd, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                return Ok(Registered { slot, fd });
            }
        }
        Err(EngineError::new(
            Op::AttachContainer,
            EngineErrorKind::Rejected,
            format!(
                "this process already holds {OWNER_LINK_SLOTS} owned sandboxes open, the most \
                 one process may; close some sandboxes first"
            ),
        ))
    }

    /// The registered descriptor.
    pub(crate) fn fd(&self) -> RawFd {
        self.fd
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        // Frees the slot only if it still holds this descriptor (a child's
        // handler may have taken it already).
        let _ = SLOTS[self.slot].compare_exchange(self.fd, -1, Ordering::AcqRel, Ordering::Relaxed);
    }
}

/// Takes every registered owner-link descriptor out of the registry and
/// hands each to `close`. For a `pthread_atfork` child handler, which closes
/// them: async-signal-safe as long as `close` is (atomic loads and swaps
/// only; no allocation, no lock). In the parent it would orphan the
/// registrations; call it only in the child.
pub fn take_owner_link_fds(mut close: impl FnMut(RawFd)) {
    let used = USED.load(Ordering::Acquire).min(OWNER_LINK_SLOTS);
    for cell in &SLOTS[..used] {
        let fd = cell.swap(-1, Ordering::AcqRel);
        if fd >= 0 {
            close(fd);
        }
    }
}

/// The registered descriptors now (tests).
#[cfg(test)]
pub(crate) fn registered() -> Vec<RawFd> {
    let used = USED.load(Ordering::Acquire).min(OWNER_LINK_SLOTS);
    SLOTS[..used]
        .iter()
        .map(|c| c.load(Ordering::Acquire))
        .filter(|fd| *fd >= 0)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Registered while held, gone once dropped; a slot is reused.
    #[test]
    fn a_registration_lasts_as_long_as_its_value() {
        // Descriptor numbers no real file has in this test process.
        let a = Registered::new(1_000_001).expect("slot");
        let b = Registered::new(1_000_002).expect("slot");
        assert!(registered().contains(&1_000_001));
        assert!(registered().contains(&1_000_002));
        drop(a);
        assert!(!registered().contains(&1_000_001));
        assert!(registered().contains(&1_000_002));
        assert_eq!(b.fd(), 1_000_002);
        drop(b);
        assert!(!registered().contains(&1_000_002));
    }
}
