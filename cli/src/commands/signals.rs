//! The signal path of a launch: SIGINT, SIGTERM, SIGHUP and SIGQUIT (or a
//! panic) stop the work and the launch's container is removed before odek
//! exits with the signal's status.

use odek_core::launch::LaunchGuard;
use odek_core::Client;

/// Exit status after a panic in odek's own code (Rust's usual one), once
/// the sandbox is removed.
use crate::exit::PANIC as EXIT_PANIC;

/// Runs `work` (a launch, perhaps followed by a command) until it ends,
/// panics, or SIGINT/SIGTERM/SIGHUP/SIGQUIT arrives. On a signal or a panic
/// the work is dropped and the launch's container is removed by `guard`
/// (SPEC §6.1: any failure after create removes the container); on a signal
/// a create call in flight is first given up to
/// [`CREATE_SETTLE`](odek_core::inventory::CREATE_SETTLE) to answer (a
/// second signal stops the wait). What happened is said on stderr, with how to
/// remove a container odek could not: `odek sandbox gc` for an ephemeral
/// one, `odek sandbox down` for a `detached` one (gc keeps those). Errors:
/// [`Interrupted`] with the exit status the signal calls for (130, 143,
/// 129, 131), or [`EXIT_PANIC`].
pub(super) async fn interruptible<T>(
    odek: &Client,
    guard: LaunchGuard,
    signals: &mut Signals,
    work: impl std::future::Future<Output = T>,
) -> Result<T, Interrupted> {
    let mut work = CatchUnwind(Box::pin(work));
    let (status, why, panicked) = tokio::select! {
        out = &mut work => match out {
            Ok(out) => return Ok(out),
            Err(Panicked) => (EXIT_PANIC, "stopped by an internal error (a bug; see the panic above)", true),
        },
        n = signals.next() => (n, "interrupted", false),
    };
    // A panicked future cannot be driven on; a create it had in flight is
    // looked for once, below.
    if !panicked && guard.creating() {
        errln!("odek: {}", guard.settling_line());
        guard.settle(&mut work, signals.next()).await;
    }
    drop(work);
    // A probe the launch had made to read its image is removed too (on a
    // task the dropped launch left): wait for it before exiting.
    let ended = guard.reap(odek, signals.next()).await;
    errln!("odek: {}", ended.stopped_line(why));
    Err(Interrupted(status))
}

/// A future that panicked (the panic message was printed by the hook).
struct Panicked;

/// Polls a future, turning a panic inside it into `Err(Panicked)` so that
/// the caller can still remove what the future created.
struct CatchUnwind<F>(std::pin::Pin<Box<F>>);

impl<F: std::future::Future> std::future::Future for CatchUnwind<F> {
    type Output = Result<F::Output, Panicked>;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        use std::task::Poll;
        let fut = self.get_mut().0.as_mut();
        // The future is never polled again after a panic, only dropped.
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| fut.poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(out)) => Poll::Ready(Ok(out)),
            Err(_) => Poll::Ready(Err(Panicked)),
        }
    }
}

/// A command interrupted by a signal (or stopped by a panic), after its
/// cleanup was done and said: carries the exit status (128 + the signal's
/// number, or [`EXIT_PANIC`]).
#[derive(Debug)]
pub struct Interrupted(pub u8);

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "interrupted (exit status {})", self.0)
    }
}

/// SIGINT, SIGTERM, SIGHUP and SIGQUIT, caught so that odek can clean up
/// before it exits with 128 + the signal's number: the core's one table,
/// which `odek mcp` catches too.
pub(super) use odek_core::signals::Signals;

#[cfg(test)]
mod tests {
    use super::*;
    use odek_core::config::{ConfigInputs, Layer};
    use odek_core::engine::{FakeEngine, FakeImage};
    use odek_core::LaunchOptions;
    use std::sync::Arc;

    /// A panic in the flow after create (a bug, or a write that panicked
    /// before stdout/stderr writes stopped panicking) still removes the
    /// container, by name and launch ID, and exits 101 (SPEC §6.1).
    #[tokio::test]
    async fn a_panic_after_create_removes_the_sandbox() {
        let fake = FakeEngine::new();
        fake.add_image(FakeImage::new("odek-test/base:1"));
        let odek = Client::with_engine(Arc::new(fake.clone()));
        let dir = tempfile::tempdir().expect("tempdir");
        let workdir = dir.path().join("work");
        std::fs::create_dir(&workdir).expect("mkdir");
        let inputs = ConfigInputs {
            workdir,
            env: [(
                "ODEK_HOME".to_string(),
                dir.path().join("home").display().to_string(),
            )]
            .into(),
            flags: Layer {
                sandbox_image: Some("odek-test/base:1".into()),
                ..Layer::default()
            },
            ..ConfigInputs::default()
        };
        let plan = odek
            .resolve(&inputs, &odek_core::Silent)
            .await
            .expect("resolve");
        let guard = LaunchGuard::new(None, false);
        let mut signals = Signals::install().expect("signal handlers");
        let work = async {
            let opts = LaunchOptions {
                name: Some(guard.name().to_string()),
                progress: Some(guard.progress().clone()),
                ..Default::default()
            };
            odek.launch(&plan, &opts, &odek_core::Silent)
                .await
                .expect("launch");
            assert_eq!(fake.containers().len(), 1, "the sandbox exists");
            panic!("a bug after create");
        };
        let out: Result<(), Interrupted> =
            interruptible(&odek, guard.clone(), &mut signals, work).await;
        assert!(matches!(out, Err(Interrupted(EXIT_PANIC))), "{out:?}");
        assert!(
            fake.containers().is_empty(),
            "the sandbox was left: {:?}",
            fake.containers()
        );
    }
}
