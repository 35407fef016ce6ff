//! Phase 9, the warm pool (docs/SANDBOXING.md, "The warm pool"): a claim
//! from a full pool (the approval re-check, the path checks and the
//! inspect-verify included) against a fresh launch of the same plan (the
//! Compose fixture's two networks), interleaved in one run. Before each
//! measured call the pool is full again (its refills are not timed, and
//! never run during a measurement).

use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use odek_core::pool::{ClaimedFrom, Pool};
use odek_core::{LaunchOptions, Plan, Silent};

use crate::phases::{mp, ratio, table};
use crate::stats::{rotation, Samples};
use crate::{Ctx, Results, Target};

/// Ready sandboxes the measured pool keeps.
const POOL_SIZE: usize = 2;

/// Waits until `pool` holds [`POOL_SIZE`] ready sandboxes of `plan`.
async fn full(pool: &Pool, plan: &Plan) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(120);
    while pool.ready(plan) < POOL_SIZE {
        if Instant::now() > deadline {
            bail!("the pool did not fill within 120 s");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

/// The phase; runs supervised when the run has a supervisor (the refills
/// read `ODEK_SUPERVISOR` as they launch, so it stays set for the phase).
pub(crate) async fn phase(ctx: &Ctx, res: &mut Results) -> Result<()> {
    ctx.supervised(measure(ctx, res)).await
}

async fn measure(ctx: &Ctx, res: &mut Results) -> Result<()> {
    eprintln!("odek-bench: 9. warm pool: claim vs fresh launch");
    let inputs = ctx.inputs(None, true);
    let plan = ctx.odek.resolve(&inputs, &Silent).await?;
    if plan.networks.len() < 2 {
        bail!("the Compose fixture has fewer than two networks");
    }
    let pool = Pool::new(ctx.odek.clone(), POOL_SIZE);
    pool.fill(&plan, None);
    let opts = LaunchOptions::default();
    let mut s = Samples::default();
    let variants = ["claim", "fresh"];
    let total = ctx.args.warmup + ctx.args.iterations;
    let mut result = Ok(());
    'iter: for i in 0..total {
        for v in rotation(variants.len(), i) {
            if let Err(e) = full(&pool, &plan).await {
                result = Err(e);
                break 'iter;
            }
            let t = Instant::now();
            let (sandbox, took) = match variants[v] {
                "claim" => match pool.claim(&plan, &opts, &Silent).await {
                    Ok(c) => {
                        let took = t.elapsed();
                        if c.from != ClaimedFrom::Pool {
                            result = Err(anyhow::anyhow!(
                                "a claim from a full pool launched afresh: {:?}",
                                c.from
                            ));
                            break 'iter;
                        }
                        (c.sandbox, took)
                    }
                    Err(e) => {
                        result = Err(e.into());
                        break 'iter;
                    }
                },
                _ => match ctx.odek.launch(&plan, &opts, &Silent).await {
                    Ok(sb) => (sb, t.elapsed()),
                    Err(e) => {
                        result = Err(e.into());
                        break 'iter;
                    }
                },
            };
            if i >= ctx.args.warmup {
                s.push(variants[v], took);
            }
            let _ = ctx.odek.destroy(&sandbox).await;
        }
    }
    let left = pool.drain().await;
    if !left.is_empty() {
        res.errors
            .push(format!("pool phase: could not remove {left:?}"));
    }
    result?;
    table(
        res,
        "9. warm pool: ready sandbox (claim incl. re-check + verify) vs fresh launch, two networks",
        &s,
        &[
            ("claim", "odek pool claim"),
            ("fresh", "odek launch (fresh)"),
        ],
    );
    let r = ratio(
        res,
        "fresh launch / claim",
        mp(&s, "fresh"),
        mp(&s, "claim"),
    );
    let (claim, fresh) = (s.median("claim"), s.median("fresh"));
    res.target(Target {
        name: "pool: claim ≤ 20 ms median".into(),
        measured: format!("{claim:.2} ms"),
        limit: "20 ms".into(),
        ratio: claim / 20.0,
        met: claim <= 20.0,
    });
    res.target(Target {
        name: "pool: fresh launch ≥ 20× claim".into(),
        measured: format!("{fresh:.1} ms vs {claim:.2} ms"),
        limit: "≥ 20×".into(),
        ratio: fresh / claim,
        met: fresh / claim >= 20.0,
    });
    res.phases.insert(
        "pool".into(),
        serde_json::json!({ "variants": s.to_json(), "ratio": r, "pool_size": POOL_SIZE }),
    );
    Ok(())
}
