//! The signals that stop a front end — SIGINT, SIGTERM, SIGHUP, SIGQUIT —
//! and the exit status each calls for (128 + its number): one table
//! ([`STOP_SIGNALS`]) that the CLI (`odek run`, `odek sandbox exec`, `up`)
//! and `odek mcp` both catch through [`Signals`], cleaning up before they
//! exit with the status.

use tokio::signal::unix::{signal, Signal, SignalKind};

/// One signal that stops odek: its name and the exit status after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StopSignal {
    /// The signal's name, e.g. `"SIGINT"`.
    pub name: &'static str,
    /// The signal's number (Linux).
    pub number: i32,
}

impl StopSignal {
    /// The exit status after it: 128 + its number (130 for SIGINT).
    pub const fn status(self) -> u8 {
        128 + self.number as u8
    }
}

/// Every signal odek catches to clean up before exiting, in the order
/// [`Signals::next`] polls them.
pub const STOP_SIGNALS: [StopSignal; 4] = [
    StopSignal {
        name: "SIGINT",
        number: 2,
    },
    StopSignal {
        name: "SIGTERM",
        number: 15,
    },
    StopSignal {
        name: "SIGHUP",
        number: 1,
    },
    StopSignal {
        name: "SIGQUIT",
        number: 3,
    },
];

/// [`STOP_SIGNALS`], caught: while this lives, none of them ends the
/// process; [`Signals::next`] says which arrived.
pub struct Signals {
    caught: Vec<(Signal, StopSignal)>,
}

impl Signals {
    /// Catches every signal of [`STOP_SIGNALS`]. Errors: a handler cannot
    /// be installed (no signal driver, out of resources).
    pub fn install() -> std::io::Result<Signals> {
        let caught = STOP_SIGNALS
            .iter()
            .map(|s| Ok((signal(SignalKind::from_raw(s.number))?, *s)))
            .collect::<std::io::Result<_>>()?;
        Ok(Signals { caught })
    }

    /// Waits for the next of them; returns the exit status it calls for
    /// (130, 143, 129 or 131).
    pub async fn next(&mut self) -> u8 {
        std::future::poll_fn(|cx| {
            for (sig, which) in &mut self.caught {
                if sig.poll_recv(cx).is_ready() {
                    return std::task::Poll::Ready(which.status());
                }
            }
            std::task::Poll::Pending
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The statuses are the documented ones (cli/src/exit.rs's table).
    #[test]
    fn statuses_are_128_plus_the_number() {
        let statuses: Vec<u8> = STOP_SIGNALS.iter().map(|s| s.status()).collect();
        assert_eq!(statuses, [130, 143, 129, 131]);
    }

    /// A caught signal is reported with its status, and does not end the
    /// process.
    #[tokio::test]
    async fn sigquit_is_caught_with_131() {
        let mut s = Signals::install().expect("handlers");
        rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::QUIT)
            .expect("kill");
        assert_eq!(s.next().await, 131);
    }
}
