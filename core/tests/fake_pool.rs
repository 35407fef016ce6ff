//! The warm pool against the fake engine (docs/SANDBOXING.md, "The warm
//! pool"): a claim hands over a ready sandbox of exactly its plan once and
//! starts a replacement; two claims never share one; a ready sandbox that
//! stopped is removed and a fresh one launched; a network change since the
//! approval refuses the claim and removes the plan's ready sandboxes;
//! drain removes everything; the `sandbox_pool` setting and the plan's key.

mod common;

use std::time::Duration;

use common::*;
use odek_core::engine::FakeNetwork;
use odek_core::pool::{ClaimedFrom, Pool, MAX_POOL};
use odek_core::{FailureClass, LaunchOptions, Plan};

/// Waits (up to 10 s) until `pool` has `n` ready sandboxes of `plan`.
async fn ready(pool: &Pool, plan: &Plan, n: usize) {
    for _ in 0..1000 {
        if pool.ready(plan) == n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the pool has {} ready, not {n}", pool.ready(plan));
}

fn pool_label(s: &Setup, id: &str) -> Option<String> {
    s.fake
        .container(id)
        .and_then(|c| c.labels.get(odek_core::labels::POOL).cloned())
}

#[tokio::test]
async fn a_claim_hands_over_a_ready_sandbox_once_and_starts_a_replacement() {
    let s = Setup::new();
    let plan = s.resolve().await.expect("resolve");
    let pool = Pool::new(s.odek.clone(), 2);
    pool.fill(&plan, None);
    ready(&pool, &plan, 2).await;
    let before = s.fake.containers();
    assert_eq!(before.len(), 2, "{before:?}");
    for id in &before {
        assert_eq!(pool_label(&s, id), Some(plan.pool_label()), "labelled");
        assert!(
            s.fake.stdin_holds(id) == 1,
            "owned: the pool holds the link"
        );
    }
    let claimed = pool
        .claim(&plan, &LaunchOptions::default(), &s.reporter)
        .await
        .expect("claim");
    assert_eq!(claimed.from, ClaimedFrom::Pool);
    // The launch's own warnings (the fake's mounts cannot be read back)
    // reach the claimant, as a launch's would.
    let launched: Vec<_> = claimed
        .sandbox
        .warnings
        .iter()
        .filter(|w| !plan.warnings.contains(w))
        .cloned()
        .collect();
    assert!(!launched.is_empty(), "{:?}", claimed.sandbox.warnings);
    for w in &launched {
        assert!(s.reporter.warnings().contains(w), "{w:?} not reported");
    }
    let id = claimed.sandbox.container_id.clone().expect("container");
    assert!(before.contains(&id), "a ready one was handed over");
    assert!(
        claimed.sandbox.owner.is_held(),
        "the owner link moved with it"
    );
    // The replacement: two ready again, none of them the claimed one.
    ready(&pool, &plan, 2).await;
    assert_eq!(s.fake.containers().len(), 3);
    let again = pool
        .claim(&plan, &LaunchOptions::default(), &s.reporter)
        .await
        .expect("claim");
    assert_ne!(
        again.sandbox.container_id,
        Some(id),
        "never handed out twice"
    );
    assert!(odek_core::pool::claimed(
        &s.odek_home,
        again.sandbox.container_id.as_deref().expect("id")
    ));
    ready(&pool, &plan, 2).await;
    let listed = s.odek.list(&s.odek_home).await.expect("list");
    assert_eq!(listed.len(), 4, "{listed:?}");
    assert_eq!(
        listed.iter().filter(|l| l.pool).count(),
        2,
        "the claimed ones are not listed as ready: {listed:?}"
    );
    pool.drain().await;
}

#[tokio::test]
async fn two_concurrent_claims_never_get_the_same_sandbox() {
    let s = Setup::new();
    let plan = s.resolve().await.expect("resolve");
    let pool = Pool::new(s.odek.clone(), 2);
    pool.fill(&plan, None);
    ready(&pool, &plan, 2).await;
    let opts = LaunchOptions::default();
    let (a, b) = tokio::join!(
        pool.claim(&plan, &opts, &s.reporter),
        pool.claim(&plan, &opts, &s.reporter)
    );
    let (a, b) = (a.expect("claim a"), b.expect("claim b"));
    assert_eq!((&a.from, &b.from), (&ClaimedFrom::Pool, &ClaimedFrom::Pool));
    assert_ne!(a.sandbox.container_id, b.sandbox.container_id);
    assert_ne!(a.sandbox.name, b.sandbox.name);
    pool.drain().await;
}

#[tokio::test]
async fn a_stopped_ready_sandbox_is_removed_and_a_fresh_one_launched() {
    let s = Setup::new();
    let plan = s.resolve().await.expect("resolve");
    let pool = Pool::new(s.odek.clone(), 1);
    pool.fill(&plan, None);
    ready(&pool, &plan, 1).await;
    let dead = s.fake.containers()[0].clone();
    s.fake.stop_container(&dead);
    let claimed = pool
        .claim(&plan, &LaunchOptions::default(), &s.reporter)
        .await
        .expect("claim");
    match &claimed.from {
        ClaimedFrom::Fresh { discarded } => {
            assert_eq!(discarded.len(), 1, "{discarded:?}");
            assert!(discarded[0].contains("no longer running"), "{discarded:?}");
        }
        other => panic!("the stopped one was handed over: {other:?}"),
    }
    assert_ne!(claimed.sandbox.container_id.as_deref(), Some(dead.as_str()));
    assert!(
        s.fake.container(&dead).is_none(),
        "the stopped one was removed"
    );
    pool.drain().await;
}

#[tokio::test]
async fn a_changed_setting_seen_at_claim_discards_the_ready_sandbox() {
    let s = Setup::new();
    let plan = s.resolve().await.expect("resolve");
    let pool = Pool::new(s.odek.clone(), 1);
    pool.fill(&plan, None);
    ready(&pool, &plan, 1).await;
    let changed = s.fake.containers()[0].clone();
    s.fake
        .update_container(&changed, |c| c.pids_limit = Some(1_000_000));
    let claimed = pool
        .claim(&plan, &LaunchOptions::default(), &s.reporter)
        .await
        .expect("claim");
    assert!(matches!(claimed.from, ClaimedFrom::Fresh { ref discarded } if discarded.len() == 1));
    assert!(s.fake.container(&changed).is_none(), "removed");
    pool.drain().await;
}

#[tokio::test]
async fn a_network_added_since_the_approval_refuses_the_claim_and_leaves_nothing() {
    let s = Setup::new()
        .project_config(r#"{"sandbox_compose_project": "shop"}"#)
        .env("ODEK_APPROVE_PROJECT_SANDBOX", "1");
    let plan = s.resolve().await.expect("resolve");
    assert!(
        plan.approval.is_some(),
        "the project's networks need approval"
    );
    let pool = Pool::new(s.odek.clone(), 2);
    pool.fill(&plan, None);
    ready(&pool, &plan, 2).await;
    s.fake
        .add_network(FakeNetwork::bridge("shop_extra").compose(PROJECT));
    let err = pool
        .claim(&plan, &LaunchOptions::default(), &s.reporter)
        .await
        .expect_err("refused");
    assert_eq!(err.class(), FailureClass::Config, "{err}");
    assert!(err.to_string().contains("shop_extra"), "{err}");
    assert_eq!(pool.ready(&plan), 0, "the plan's ready sandboxes are gone");
    assert!(s.fake.containers().is_empty(), "{:?}", s.fake.containers());
    pool.drain().await;
}

#[tokio::test]
async fn another_plan_never_takes_a_ready_sandbox() {
    let s = Setup::new();
    let plan = s.resolve().await.expect("resolve");
    let pool = Pool::new(s.odek.clone(), 1);
    pool.fill(&plan, None);
    ready(&pool, &plan, 1).await;
    let ready_id = s.fake.containers()[0].clone();
    let mut other = plan.clone();
    other.pids_limit = 100;
    assert_ne!(other.pool_key(), plan.pool_key());
    let claimed = pool
        .claim(&other, &LaunchOptions::default(), &s.reporter)
        .await
        .expect("claim");
    assert!(matches!(claimed.from, ClaimedFrom::Fresh { .. }));
    assert_ne!(
        claimed.sandbox.container_id.as_deref(),
        Some(ready_id.as_str())
    );
    assert_eq!(pool.ready(&plan), 1, "the other plan's sandbox stays ready");
    pool.drain().await;
}

#[tokio::test]
async fn drain_removes_every_ready_sandbox_and_a_pool_of_zero_keeps_none() {
    let s = Setup::new();
    let plan = s.resolve().await.expect("resolve");
    let pool = Pool::new(s.odek.clone(), 3);
    pool.fill(&plan, None);
    ready(&pool, &plan, 3).await;
    assert!(pool.drain().await.is_empty());
    assert!(s.fake.containers().is_empty(), "{:?}", s.fake.containers());
    pool.fill(&plan, None);
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(
        s.fake.containers().is_empty(),
        "a drained pool fills nothing"
    );

    let off = Pool::new(s.odek.clone(), 0);
    off.fill(&plan, None);
    let c = off
        .claim(&plan, &LaunchOptions::default(), &s.reporter)
        .await
        .expect("claim");
    assert!(matches!(c.from, ClaimedFrom::Fresh { .. }));
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(s.fake.containers().len(), 1, "only the claimed one");
    assert_eq!(Pool::new(s.odek.clone(), 100).size(), MAX_POOL, "capped");
}

#[tokio::test]
async fn pool_down_removes_ready_sandboxes_but_not_claimed_ones() {
    let s = Setup::new();
    let plan = s.resolve().await.expect("resolve");
    let pool = Pool::new(s.odek.clone(), 2);
    pool.fill(&plan, None);
    ready(&pool, &plan, 2).await;
    let claimed = pool
        .claim(&plan, &LaunchOptions::default(), &s.reporter)
        .await
        .expect("claim");
    ready(&pool, &plan, 2).await;
    let removed = s
        .odek
        .pool_down(&s.odek_home, false)
        .await
        .expect("pool down");
    assert_eq!(removed.len(), 2, "{removed:?}");
    assert!(!removed.contains(&claimed.sandbox.name));
    assert_eq!(
        s.fake.containers(),
        vec![claimed.sandbox.container_id.clone().expect("id")]
    );
    // The owner's next claim finds its ready sandboxes gone: a fresh one.
    let next = pool
        .claim(&plan, &LaunchOptions::default(), &s.reporter)
        .await
        .expect("claim");
    assert!(matches!(next.from, ClaimedFrom::Fresh { ref discarded } if !discarded.is_empty()));
    pool.drain().await;
}

/// `odek pool down` lists the ready sandboxes, then removes them one by one
/// (each removal slow here); claims made meanwhile take sandboxes it listed
/// as ready. Each is either removed by pool down or handed to a claim,
/// never both: every claimed sandbox still exists afterwards and is not
/// among those pool down says it removed.
#[tokio::test]
async fn pool_down_racing_claims_never_removes_a_claimed_sandbox() {
    let s = Setup::new();
    let plan = s.resolve().await.expect("resolve");
    let pool = Pool::new(s.odek.clone(), 6);
    pool.fill(&plan, None);
    ready(&pool, &plan, 6).await;
    s.fake.set_quirks(odek_core::engine::Quirks {
        remove_delay: Some(Duration::from_millis(40)),
        ..Default::default()
    });
    let down = {
        let odek = s.odek.clone();
        let home = s.odek_home.clone();
        tokio::spawn(async move { odek.pool_down(&home, false).await })
    };
    // Pool down has listed and is removing the first one.
    tokio::time::sleep(Duration::from_millis(20)).await;
    let mut claims = Vec::new();
    for _ in 0..4 {
        let pool = pool.clone();
        let plan = plan.clone();
        claims.push(tokio::spawn(async move {
            pool.claim(&plan, &LaunchOptions::default(), &Collect::default())
                .await
        }));
    }
    let mut claimed = Vec::new();
    for c in claims {
        claimed.push(c.await.expect("join").expect("claim"));
    }
    let removed = down.await.expect("join").expect("pool down");
    let live = s.fake.containers();
    for c in &claimed {
        let id = c.sandbox.container_id.clone().expect("id");
        assert!(
            live.contains(&id),
            "claimed {} ({:?}) was removed; pool down removed {removed:?}",
            c.sandbox.name,
            c.from
        );
        assert!(!removed.contains(&c.sandbox.name), "{removed:?}");
        assert!(odek_core::pool::claimed(&s.odek_home, &id));
    }
    assert!(
        claimed.iter().any(|c| c.from == ClaimedFrom::Pool),
        "the race was not run: no claim took a listed ready sandbox"
    );
    s.fake.set_quirks(odek_core::engine::Quirks::default());
    pool.drain().await;
}

#[tokio::test]
async fn the_pool_key_covers_the_whole_plan() {
    let s = Setup::new();
    let plan = s.resolve().await.expect("resolve");
    assert_eq!(plan.pool_key(), plan.clone().pool_key());
    assert_eq!(plan.pool_key().len(), 64);
    let mut changes: Vec<Plan> = Vec::new();
    let mut p = plan.clone();
    p.user = Some("1234:1234".into());
    changes.push(p);
    let mut p = plan.clone();
    p.memory_bytes = Some(1 << 20);
    changes.push(p);
    let mut p = plan.clone();
    p.workdir = "/elsewhere".into();
    changes.push(p);
    let mut p = plan.clone();
    p.networks.clear();
    p.network_summary = odek_core::network::NetworkSummary::None;
    p.bridge_network_id = Some("x".into());
    changes.push(p);
    let mut p = plan.clone();
    p.env.push(odek_core::config::EnvVar {
        key: "A".into(),
        value: "secret".into(),
        interpolates_host: false,
        reads: Vec::new(),
    });
    let label_before = p.pool_label();
    changes.push(p.clone());
    for c in &changes {
        assert_ne!(c.pool_key(), plan.pool_key(), "{c:?}");
    }
    // The label never depends on an env value.
    p.env[0].value = "other".into();
    assert_eq!(p.pool_label(), label_before);
    assert_ne!(p.pool_key(), changes[4].pool_key());
}

#[tokio::test]
async fn the_project_may_lower_the_pool_but_never_raise_it() {
    let s = Setup::new()
        .user_config(r#"{"sandbox_pool": 3}"#)
        .project_config(r#"{"sandbox_pool": 5}"#);
    let set = odek_core::config::load(&s.inputs).expect("load");
    assert_eq!(set.pool.value, 3);
    let s = Setup::new()
        .user_config(r#"{"sandbox_pool": 3}"#)
        .project_config(r#"{"sandbox_pool": 1}"#);
    assert_eq!(
        odek_core::config::load(&s.inputs).expect("load").pool.value,
        1
    );
    let s = Setup::new().project_config(r#"{"sandbox_pool": 2}"#);
    assert_eq!(
        odek_core::config::load(&s.inputs).expect("load").pool.value,
        0
    );
    let s = Setup::new().env("ODEK_SANDBOX_POOL", "9");
    let err = odek_core::config::load(&s.inputs).expect_err("too large");
    assert!(err.to_string().contains("sandbox_pool"), "{err}");
}

#[tokio::test]
async fn an_approval_for_one_launch_fills_nothing_ahead() {
    let s = Setup::new()
        .project_config(r#"{"sandbox_compose_project": "shop"}"#)
        .env("ODEK_APPROVE_PROJECT_SANDBOX", "1");
    let plan = s.resolve().await.expect("resolve");
    let req = plan.approval.as_ref().expect("request");
    let mut once = req.standing().expect("standing");
    once.via = odek_core::approval::Via::Once;
    let pool = Pool::new(s.odek.clone(), 2);
    let opts = LaunchOptions {
        approval: Some(once.clone()),
        ..LaunchOptions::default()
    };
    let c = pool.claim(&plan, &opts, &s.reporter).await.expect("claim");
    assert!(matches!(c.from, ClaimedFrom::Fresh { .. }));
    pool.fill(&plan, Some(&once));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(s.fake.containers().len(), 1, "only the claimed one");
    // Positive control: the environment's approval stands and fills.
    pool.fill(&plan, req.standing().as_ref());
    ready(&pool, &plan, 2).await;
    pool.drain().await;
}

#[tokio::test]
async fn nothing_attaches_to_a_ready_sandbox_before_its_claim() {
    let s = Setup::new();
    let plan = s.resolve().await.expect("resolve");
    let pool = Pool::new(s.odek.clone(), 1);
    pool.fill(&plan, None);
    ready(&pool, &plan, 1).await;
    let name = s.only_container().name;
    let err = s
        .odek
        .attach(&name, &s.odek_home)
        .await
        .expect_err("a ready sandbox is refused");
    assert_eq!(err.class(), FailureClass::DockerRejected, "{err}");
    assert!(err.to_string().contains("warm pool"), "{err}");
    // Removing it stays possible (`odek sandbox down`).
    s.odek.owned(&name, &s.odek_home).await.expect("owned");
    let claimed = pool
        .claim(&plan, &LaunchOptions::default(), &s.reporter)
        .await
        .expect("claim");
    assert_eq!(claimed.sandbox.name, name);
    s.odek
        .attach(&name, &s.odek_home)
        .await
        .expect("a claimed one attaches");
    pool.drain().await;
}

#[tokio::test]
async fn at_the_cap_the_least_recently_used_plan_makes_room() {
    let s = Setup::new();
    let plan = s.resolve().await.expect("resolve");
    let pool = Pool::new(s.odek.clone(), MAX_POOL);
    pool.fill(&plan, None);
    ready(&pool, &plan, MAX_POOL).await;
    let mut other = plan.clone();
    other.pids_limit = 100;
    pool.fill(&other, None);
    ready(&pool, &other, MAX_POOL).await;
    ready(&pool, &plan, 0).await;
    // The removed ones are gone: never more than the cap at once (plus
    // the removals still on their way, none once they are done).
    for _ in 0..100 {
        if s.fake.containers().len() == MAX_POOL {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(s.fake.containers().len(), MAX_POOL);
    pool.drain().await;
    assert!(s.fake.containers().is_empty());
}

#[tokio::test]
async fn a_ready_sandbox_changed_from_outside_is_discarded_and_a_fresh_one_launched() {
    use odek_core::engine::Op;
    // An exec still running (`docker exec -d`), and a process an exec that
    // has ended left behind (`docker exec … sh -c 'sleep 1000 &'`: no
    // `ExecIDs` any more, only the process): either is found at the claim.
    // (Files are not diffed: see `untouched` in launch.rs.)
    type Touch = fn(&Setup, &str);
    let touches: [(&str, Touch); 2] = [
        ("an exec running", |s, id| {
            s.fake.exec_from_outside(id, "sleep 1000")
        }),
        ("a process an ended exec left", |s, id| {
            s.fake.exec_from_outside(id, "sleep 1000");
            s.fake.update_container(id, |info| info.exec_ids.clear());
        }),
    ];
    for (what, touch) in touches {
        let s = Setup::new();
        let plan = s.resolve().await.expect("resolve");
        let pool = Pool::new(s.odek.clone(), 1);
        pool.fill(&plan, None);
        ready(&pool, &plan, 1).await;
        let touched = s.fake.containers().pop().expect("the ready one");
        touch(&s, &touched);
        let claimed = pool
            .claim(&plan, &LaunchOptions::default(), &s.reporter)
            .await
            .expect("claim");
        let ClaimedFrom::Fresh { discarded } = &claimed.from else {
            panic!("{what}: the changed sandbox was handed over");
        };
        assert!(
            discarded.len() == 1 && discarded[0].contains("changed from outside"),
            "{what}: {discarded:?}"
        );
        assert_ne!(
            claimed.sandbox.container_id.as_deref(),
            Some(touched.as_str())
        );
        assert!(
            !s.fake.containers().contains(&touched),
            "{what}: the changed sandbox was left"
        );
        assert!(
            s.fake.calls_of(Op::Exec).is_empty(),
            "{what}: something ran"
        );
        pool.drain().await;
    }
}
