//! The limits of one `odek mcp` server: at most N sandboxes at once, the
//! conversation's default and narrowed ones included, launches still in
//! flight counted as well. A long-lived server hands its tools to an agent
//! that may call `sandbox_up` in a loop (or 30 times at once); each sandbox
//! already has the core's pids and memory limits, and this cap bounds how
//! many of them there are.
//!
//! The count lives here and nowhere else: a launch takes a [`Slot`] before
//! anything is resolved, asked or created, and the slot goes back when the
//! launch fails or is cancelled, or when its sandbox leaves the server's
//! table (`sandbox_down`, shutdown). The C ABI has no server and no cap:
//! the embedding program owns its sandboxes' number.

use std::sync::{Arc, Mutex, PoisonError};

/// Default of `--max-sandboxes`.
pub const DEFAULT_MAX_SANDBOXES: u32 = 16;

/// The flag that sets the cap.
pub const MAX_SANDBOXES_FLAG: &str = "--max-sandboxes";

/// The environment variable that sets the cap (the flag wins).
pub const MAX_SANDBOXES_ENV: &str = "ODEK_MCP_MAX_SANDBOXES";

/// What an `odek mcp` server allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Most sandboxes at once (running or being launched), ≥ 1.
    pub max_sandboxes: u32,
}

impl Limits {
    /// The limits of `odek mcp`: `--max-sandboxes` when given, else a
    /// non-empty `ODEK_MCP_MAX_SANDBOXES` from `env` (empty counts as
    /// unset, as for every `ODEK_*` variable), else the default.
    ///
    /// Errors: the variable is not a whole number from 1 to 4294967295
    /// (the message names it).
    pub fn from_flag_and_env(
        flag: Option<u32>,
        env: &std::collections::BTreeMap<String, String>,
    ) -> Result<Limits, String> {
        let max_sandboxes = match (flag, env.get(MAX_SANDBOXES_ENV).filter(|v| !v.is_empty())) {
            (Some(n), _) => n,
            (None, Some(v)) => v.parse::<u32>().ok().filter(|n| *n >= 1).ok_or_else(|| {
                format!(
                    "env {MAX_SANDBOXES_ENV} must be a whole number of sandboxes from 1 to {} (got {}); unset it for the default {DEFAULT_MAX_SANDBOXES}",
                    u32::MAX,
                    odek_core::text::quote(v)
                )
            })?,
            (None, None) => DEFAULT_MAX_SANDBOXES,
        };
        Ok(Limits { max_sandboxes })
    }
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_sandboxes: DEFAULT_MAX_SANDBOXES,
        }
    }
}

/// The count of sandboxes a server holds.
#[derive(Debug)]
pub(crate) struct Slots {
    max: u32,
    used: Arc<Mutex<u32>>,
}

/// One sandbox's place under the cap: given back when dropped.
#[derive(Debug)]
pub(crate) struct Slot {
    used: Arc<Mutex<u32>>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut used = self.used.lock().unwrap_or_else(PoisonError::into_inner);
        *used = used.saturating_sub(1);
    }
}

impl Slots {
    /// Slots for at most `limits.max_sandboxes` sandboxes (at least one).
    pub(crate) fn new(limits: Limits) -> Slots {
        Slots {
            max: limits.max_sandboxes.max(1),
            used: Arc::new(Mutex::new(0)),
        }
    }

    /// Takes a slot, or says why not: the cap is reached. Atomic, so any
    /// number of concurrent calls get at most `max` slots between them.
    pub(crate) fn take(&self) -> Result<Slot, String> {
        let mut used = self.used.lock().unwrap_or_else(PoisonError::into_inner);
        if *used >= self.max {
            return Err(format!(
                "this odek MCP server already has {} sandboxes (running or being launched), the most it allows: {MAX_SANDBOXES_FLAG} {} (env {MAX_SANDBOXES_ENV}; default {DEFAULT_MAX_SANDBOXES}). Nothing was launched and no container was created. Remove a sandbox you no longer need with sandbox_down (sandbox_list shows them) and try again, or have the operator restart the server with a higher {MAX_SANDBOXES_FLAG}.",
                *used, self.max
            ));
        }
        *used += 1;
        Ok(Slot {
            used: self.used.clone(),
        })
    }

    /// Slots taken now.
    #[cfg(test)]
    fn used(&self) -> u32 {
        *self.used.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_most_max_slots_and_dropped_ones_come_back() {
        let slots = Slots::new(Limits { max_sandboxes: 2 });
        let a = slots.take().expect("first");
        let b = slots.take().expect("second");
        let e = slots.take().expect_err("third");
        assert!(
            e.contains("--max-sandboxes 2")
                && e.contains("ODEK_MCP_MAX_SANDBOXES")
                && e.contains("sandbox_down"),
            "{e}"
        );
        drop(a);
        let c = slots.take().expect("one came back");
        assert_eq!(slots.used(), 2);
        drop((b, c));
        assert_eq!(slots.used(), 0);
    }

    #[test]
    fn concurrent_takers_get_at_most_max() {
        let slots = Arc::new(Slots::new(Limits { max_sandboxes: 3 }));
        let got: Vec<Option<Slot>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..30)
                .map(|_| {
                    let slots = slots.clone();
                    s.spawn(move || slots.take().ok())
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("thread"))
                .collect()
        });
        assert_eq!(got.iter().flatten().count(), 3);
        drop(got);
        assert_eq!(slots.used(), 0);
    }

    #[test]
    fn the_flag_wins_then_the_env_then_the_default() {
        let env = |v: &str| {
            std::collections::BTreeMap::from([(MAX_SANDBOXES_ENV.to_string(), v.to_string())])
        };
        let max = |flag, e: &std::collections::BTreeMap<String, String>| {
            Limits::from_flag_and_env(flag, e).map(|l| l.max_sandboxes)
        };
        assert_eq!(max(None, &Default::default()), Ok(16));
        assert_eq!(max(None, &env("")), Ok(16), "empty is unset");
        assert_eq!(max(None, &env("3")), Ok(3));
        assert_eq!(max(Some(5), &env("3")), Ok(5));
        assert_eq!(max(Some(5), &env("junk")), Ok(5), "the flag wins");
        for bad in ["0", "-1", "x", " 3", "4294967296"] {
            let e = max(None, &env(bad)).expect_err(bad);
            assert!(e.contains(MAX_SANDBOXES_ENV), "{e}");
        }
    }

    #[test]
    fn zero_is_one() {
        let slots = Slots::new(Limits { max_sandboxes: 0 });
        let _a = slots.take().expect("one");
        assert!(slots.take().is_err());
    }
}
