//! The warm pool (docs/SANDBOXING.md, "The warm pool"): sandboxes launched
//! ahead of need for a plan, each handed over once.
//!
//! A [`Pool`] belongs to the process that launched its sandboxes (the
//! owner: `odek mcp`, a library client). They are ordinary owned sandboxes
//! (SPEC §6.1 owner lifetime: they die with the owner) with one more label,
//! [`labels::POOL`]. Ready sandboxes are kept per [`Plan::pool_key`], so a
//! claim only ever gets a sandbox launched from exactly its plan.
//! [`Pool::claim`] takes one under a mutex (two claims never get the same
//! one), re-runs what a launch guarantees on it (the approval re-check of
//! SPEC §7.4 against the approved network IDs, the path checks and the
//! inspect-verify of SPEC §6.1: `Client::recheck_ready`, the launch's own
//! functions), removes it and launches afresh on any mismatch, and starts a
//! replacement in the background. A claimed sandbox is never returned.

use std::collections::{BTreeMap, VecDeque};

use std::sync::{Arc, Mutex};

use crate::approval::{Approval, Via};
use crate::cancel::CancellationToken;
use crate::client::Client;
use crate::error::Result;
use crate::labels;
use crate::launch::LaunchOptions;
use crate::plan::{Isolation, Plan};
use crate::resolve::{Reporter, Silent};
use crate::sandbox::Sandbox;

pub use crate::claims::claimed;
pub use crate::config::MAX_POOL;

/// Where a claimed sandbox came from ([`Claimed::from`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClaimedFrom {
    /// A ready sandbox that passed the re-check and verify.
    Pool,
    /// A launch made for this claim: the pool had none ready for the plan
    /// (or is off), or each one it had failed the re-check or verify and
    /// was removed (`discarded`: why, one line each).
    Fresh {
        /// Why ready sandboxes were discarded, one line each.
        discarded: Vec<String>,
    },
}

/// A sandbox handed over by [`Pool::claim`].
#[derive(Debug)]
pub struct Claimed {
    /// The sandbox, now the claimant's (its owner link moved with it).
    pub sandbox: Sandbox,
    /// Whether it was ready or launched for the claim.
    pub from: ClaimedFrom,
}

/// The ready sandboxes of one process ([`Pool::new`]). Cheap to clone: the
/// clones share the pool.
#[derive(Clone)]
pub struct Pool {
    inner: Arc<Inner>,
}

struct Inner {
    client: Client,
    size: usize,
    state: Mutex<State>,
    /// Fired by [`Pool::drain`]: cancels the launches of refills.
    closing: CancellationToken,
    /// Refill launches in flight.
    inflight: tokio::sync::watch::Sender<usize>,
    /// Told of each sandbox that became ready ([`Pool::on_ready`]).
    on_ready: Option<ReadyHook>,
}

/// What [`Pool::on_ready`] calls.
type ReadyHook = Box<dyn Fn(&Sandbox) + Send + Sync>;

#[derive(Default)]
struct State {
    /// Ready sandboxes by [`Plan::pool_key`], oldest first.
    ready: BTreeMap<String, VecDeque<Sandbox>>,
    /// Refill launches in flight by key.
    filling: BTreeMap<String, usize>,
    /// When each key was last filled for (a claim or [`Pool::fill`]), as a
    /// tick of `tick`: the least recently used plan's ready sandboxes make
    /// room for another plan's when the pool is at [`MAX_POOL`].
    used: BTreeMap<String, u64>,
    tick: u64,
    closed: bool,
    /// The earlier pools' orphans were swept (once, at the first fill).
    swept_orphans: bool,
}

impl State {
    fn held(&self) -> usize {
        self.ready.values().map(VecDeque::len).sum::<usize>() + self.filling.values().sum::<usize>()
    }
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("size", &self.inner.size)
            .finish_non_exhaustive()
    }
}

impl Pool {
    /// A pool keeping `size` ready sandboxes per plan (the `sandbox_pool`
    /// setting, capped at [`MAX_POOL`]); 0 keeps none: every claim is a
    /// launch. Nothing is launched until [`Pool::fill`] or a claim.
    pub fn new(client: Client, size: usize) -> Pool {
        Pool {
            inner: Arc::new(Inner {
                client,
                size: size.min(MAX_POOL),
                state: Mutex::new(State::default()),
                closing: CancellationToken::new(),
                inflight: tokio::sync::watch::Sender::new(0),
                on_ready: None,
            }),
        }
    }

    /// [`Pool::new`] that calls `hook` with each sandbox once it is ready
    /// (launched, verified and queued), e.g. to log it.
    pub fn on_ready(
        client: Client,
        size: usize,
        hook: impl Fn(&Sandbox) + Send + Sync + 'static,
    ) -> Pool {
        let mut pool = Pool::new(client, size);
        if let Some(inner) = Arc::get_mut(&mut pool.inner) {
            inner.on_ready = Some(Box::new(hook));
        }
        pool
    }

    /// Ready sandboxes kept per plan.
    pub fn size(&self) -> usize {
        self.inner.size
    }

    /// The ready sandboxes of `plan` now (launches in flight not counted).
    pub fn ready(&self, plan: &Plan) -> usize {
        self.state()
            .ready
            .get(&plan.pool_key())
            .map_or(0, VecDeque::len)
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.inner
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Starts launching ready sandboxes for `plan`, approved by `approval`
    /// (as [`LaunchOptions::approval`] of a launch; each launch re-checks
    /// it), up to the pool's size, in the background. Needs a tokio
    /// runtime. A plan that is no container, a pool of size 0 or a drained
    /// pool launches nothing. A refill launch that fails is said by
    /// `tracing` and not retried: the next claim launches afresh and tries
    /// again.
    ///
    /// At most [`MAX_POOL`] sandboxes are ready or launching in all: at
    /// the cap, the ready sandboxes of the plans least recently filled for
    /// are removed to make room.
    ///
    /// An approval given for one launch only ([`Via::Once`]: the user
    /// answered `y`) launches nothing ahead: it approved that launch, not
    /// the next ones; a trust, a stored trust or the environment's approval
    /// stand, and each later claim is approved again by its caller anyway.
    pub fn fill(&self, plan: &Plan, approval: Option<&Approval>) {
        if self.inner.size == 0
            || plan.isolation != Isolation::Container
            || approval.is_some_and(|a| a.via == Via::Once)
        {
            return;
        }
        let key = plan.pool_key();
        let (need, evicted, sweep) = {
            let mut st = self.state();
            if st.closed {
                return;
            }
            let sweep = !std::mem::replace(&mut st.swept_orphans, true);
            st.tick += 1;
            let now = st.tick;
            st.used.insert(key.clone(), now);
            let have = st.ready.get(&key).map_or(0, VecDeque::len)
                + st.filling.get(&key).copied().unwrap_or(0);
            let want = self.inner.size.saturating_sub(have);
            // At the cap: the least recently used other plans' ready
            // sandboxes go (a plan resolved again after a change, say,
            // leaves the old plan's behind).
            let mut evicted = Vec::new();
            while MAX_POOL.saturating_sub(st.held()) < want {
                let oldest = st
                    .ready
                    .iter()
                    .filter(|(k, q)| **k != key && !q.is_empty())
                    .min_by_key(|(k, _)| st.used.get(*k).copied().unwrap_or(0))
                    .map(|(k, _)| k.clone());
                let Some(k) = oldest else { break };
                if let Some(sb) = st.ready.get_mut(&k).and_then(VecDeque::pop_back) {
                    evicted.push(sb);
                }
            }
            st.ready.retain(|_, q| !q.is_empty());
            let need = want.min(MAX_POOL.saturating_sub(st.held()));
            if need > 0 {
                *st.filling.entry(key.clone()).or_default() += need;
            }
            (need, evicted, sweep)
        };
        if sweep {
            // A pool's owner killed while one of its launches was between
            // the create and the attach leaves a created, never-started
            // container that no owner link will remove (docs/SECURITY.md,
            // "Known gaps"): a pool launches in the background all the
            // time, so the next pool of this user sweeps them, as `odek
            // sandbox gc` would (only orphans whose owner is proven gone;
            // detached sandboxes are kept).
            let client = self.inner.client.clone();
            let odek_home = plan.odek_home.clone();
            tokio::spawn(async move {
                let opts = crate::inventory::GcOptions {
                    odek_home,
                    detached: false,
                    workdir: None,
                    dry_run: false,
                };
                match client.gc(&opts).await {
                    Ok(removed) if !removed.is_empty() => {
                        tracing::info!(?removed, "pool: removed orphaned sandboxes of dead owners")
                    }
                    Ok(_) => {}
                    Err(e) => tracing::debug!("pool: orphan sweep: {e}"),
                }
            });
        }
        if !evicted.is_empty() {
            let client = self.inner.client.clone();
            tokio::spawn(async move {
                for sb in evicted {
                    let _ = client.destroy(&sb).await;
                }
            });
        }
        for _ in 0..need {
            let pool = self.clone();
            let plan = plan.clone();
            let key = key.clone();
            let approval = approval.cloned();
            self.inner.inflight.send_modify(|n| *n += 1);
            tokio::spawn(async move {
                pool.refill_one(&key, &plan, approval).await;
                pool.inner.inflight.send_modify(|n| *n -= 1);
            });
        }
    }

    async fn refill_one(&self, key: &str, plan: &Plan, approval: Option<Approval>) {
        let opts = LaunchOptions {
            labels: BTreeMap::from([(labels::POOL.to_string(), plan.pool_label())]),
            approval,
            cancel: Some(self.inner.closing.child_token()),
            ..LaunchOptions::default()
        };
        let launched = self.inner.client.launch(plan, &opts, &Silent).await;
        let leftover = {
            let mut st = self.state();
            if let Some(n) = st.filling.get_mut(key) {
                *n = n.saturating_sub(1);
            }
            match launched {
                Ok(sb) if sb.container_id.is_some() && !st.closed => {
                    if let Some(hook) = &self.inner.on_ready {
                        hook(&sb);
                    }
                    st.ready.entry(key.to_string()).or_default().push_back(sb);
                    None
                }
                Ok(sb) => Some(sb),
                Err(e) => {
                    tracing::warn!("a warm pool's launch failed: {e}");
                    None
                }
            }
        };
        if let Some(sb) = leftover {
            let _ = self.inner.client.destroy(&sb).await;
        }
    }

    /// A sandbox for `plan` (SPEC §6.1), launched with `opts` and reported
    /// to `reporter` when none is ready: a ready one of exactly this plan
    /// ([`Plan::pool_key`]) is taken under the pool's lock, so two claims
    /// never get the same one, and before it is handed over the launch's
    /// guarantees are checked again (`Client::recheck_ready`: the re-check
    /// of SPEC §7.4 against `opts.approval`'s network IDs, the working
    /// directory, the inspect-verify); a sandbox that fails them is removed,
    /// and the claim launches afresh. Either way a replacement starts in
    /// the background ([`Pool::fill`]) once the plan's approval held. A
    /// claimed sandbox is recorded as claimed (`odek pool down` leaves it
    /// alone) and is never returned to the pool.
    ///
    /// Options a ready sandbox cannot have been launched with — `detached`,
    /// a chosen `name` — skip the pool; extra `labels` (a parent's name, an
    /// MCP id) are not on a ready sandbox (docs/SANDBOXING.md says so).
    ///
    /// Errors: as [`Client::launch`]; a refusal of the re-check (networks
    /// changed, approval revoked) refuses the claim when the fresh launch's
    /// own re-check refuses too, which it does for the same cause.
    pub async fn claim(
        &self,
        plan: &Plan,
        opts: &LaunchOptions,
        reporter: &dyn Reporter,
    ) -> Result<Claimed> {
        let client = &self.inner.client;
        let poolable = self.inner.size > 0
            && plan.isolation == Isolation::Container
            && !opts.detached
            && opts.name.is_none();
        if !poolable {
            let sandbox = client.launch(plan, opts, reporter).await?;
            return Ok(Claimed {
                sandbox,
                from: ClaimedFrom::Fresh {
                    discarded: Vec::new(),
                },
            });
        }
        let key = plan.pool_key();
        let mut discarded = Vec::new();
        // Taken under the lock (the guard ends with the statement): no
        // other claim of this pool can take the same one. Then its record,
        // before the re-check: `odek pool down` (maybe another process)
        // removes only a sandbox whose record it created, so one it took
        // first is never handed over, and one taken here it leaves alone.
        let taken = loop {
            let next = self
                .state()
                .ready
                .get_mut(&key)
                .and_then(VecDeque::pop_front);
            let Some(sandbox) = next else { break None };
            let lost = sandbox.container_id.as_deref().is_some_and(|id| {
                crate::claims::take(&plan.odek_home, id, &sandbox.name)
                    == crate::claims::Taken::Lost
            });
            if !lost {
                break Some(sandbox);
            }
            tracing::info!(sandbox = %sandbox.name, "a ready sandbox is being removed by odek pool down; not handed over");
            discarded.push(format!("{}: removed by odek pool down", sandbox.name));
            let _ = client.destroy(&sandbox).await;
        };
        if let Some(mut sandbox) = taken {
            match client
                .recheck_ready(&sandbox, plan, opts.approval.as_ref())
                .await
            {
                Ok(()) => {
                    // The files host tools run, recorded again now: the
                    // agent gets the sandbox from here on, and the
                    // developer may have changed them since it was
                    // launched (docs/SECURITY.md "Files host tools run").
                    if let Some(w) = crate::launch::record_host_files(plan, &sandbox.name).await {
                        reporter.warning(&w);
                        sandbox.warnings.push(w);
                    }
                    // What its launch found (an engine's warning, the
                    // supervisor off, mounts unverified) was said to nobody
                    // then: the claimant hears it now, as from a launch.
                    for w in sandbox
                        .warnings
                        .iter()
                        .filter(|w| !plan.warnings.contains(w))
                    {
                        reporter.warning(w);
                    }
                    self.fill(plan, opts.approval.as_ref());
                    return Ok(Claimed {
                        sandbox,
                        from: ClaimedFrom::Pool,
                    });
                }
                Err(e) => {
                    tracing::info!(sandbox = %sandbox.name, "a ready sandbox failed its re-check ({e}); removed");
                    discarded.push(format!("{}: {e}", sandbox.name));
                    let _ = client.destroy(&sandbox).await;
                    // The re-check of the plan itself failed (not this
                    // sandbox): the others of the plan fail it too.
                    if e.class() != crate::FailureClass::DockerRejected {
                        for other in self.take_plan(&key) {
                            let _ = client.destroy(&other).await;
                        }
                    }
                }
            }
        }
        let sandbox = client.launch(plan, opts, reporter).await?;
        if discarded.is_empty() {
            self.fill(plan, opts.approval.as_ref());
        } else {
            // One ready sandbox failed: check the plan's others now, in the
            // background, so that the refill counts only good ones.
            let pool = self.clone();
            let plan = plan.clone();
            let approval = opts.approval.clone();
            tokio::spawn(async move { pool.sweep(&key, &plan, approval.as_ref()).await });
        }
        Ok(Claimed {
            sandbox,
            from: ClaimedFrom::Fresh { discarded },
        })
    }

    /// Re-checks every ready sandbox of `plan` (`key`), removes those that
    /// fail, puts the others back, then refills ([`Pool::fill`]).
    async fn sweep(&self, key: &str, plan: &Plan, approval: Option<&Approval>) {
        let client = &self.inner.client;
        let mut good = Vec::new();
        for sb in self.take_plan(key) {
            match client.recheck_ready(&sb, plan, approval).await {
                Ok(()) => good.push(sb),
                Err(e) => {
                    tracing::info!(sandbox = %sb.name, "a ready sandbox failed its re-check ({e}); removed");
                    let _ = client.destroy(&sb).await;
                }
            }
        }
        let leftover = {
            let mut st = self.state();
            if st.closed {
                good
            } else {
                let q = st.ready.entry(key.to_string()).or_default();
                for sb in good.into_iter().rev() {
                    q.push_front(sb);
                }
                Vec::new()
            }
        };
        for sb in leftover {
            let _ = client.destroy(&sb).await;
        }
        self.fill(plan, approval);
    }

    fn take_plan(&self, key: &str) -> Vec<Sandbox> {
        self.state()
            .ready
            .remove(key)
            .map(Vec::from)
            .unwrap_or_default()
    }

    /// Stops the pool: refill launches are cancelled (each removes what it
    /// created) and waited for, up to [`crate::inventory::CREATE_SETTLE`]
    /// and a call, and every ready sandbox is removed. Later claims launch
    /// afresh; later fills do nothing. Returns the names of the sandboxes
    /// whose removal failed (the engine's auto-removal still takes them
    /// once this process lets go of them, and `odek sandbox gc` once it
    /// exits).
    pub async fn drain(&self) -> Vec<String> {
        let ready: Vec<Sandbox> = {
            let mut st = self.state();
            st.closed = true;
            std::mem::take(&mut st.ready)
                .into_values()
                .flatten()
                .collect()
        };
        self.inner.closing.cancel();
        let mut failed = Vec::new();
        for sb in ready {
            if self.inner.client.destroy(&sb).await.is_err() {
                failed.push(sb.name.clone());
            }
        }
        let mut inflight = self.inner.inflight.subscribe();
        let settle = crate::inventory::CREATE_SETTLE + std::time::Duration::from_secs(20);
        let _ = tokio::time::timeout(settle, inflight.wait_for(|n| *n == 0)).await;
        failed
    }
}
