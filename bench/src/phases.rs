//! The measured phases. Each interleaves its variants (a rotation per
//! iteration), runs unrecorded warm-up iterations first, prints its table and
//! ratios, stores its numbers in the results and registers its targets.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use futures_util::future::join_all;
use futures_util::{stream, StreamExt};
use odek_core::config::ConfigInputs;
use odek_core::engine::{
    Address, BollardEngine, ContainerSpec, DockerApi, FakeEngine, FakeImage, FakeNetwork,
    StreamKind,
};
use odek_core::launch::container_spec;
use odek_core::{
    Client, ExecOptions, ExecRequest, Isolation, LaunchOptions, Plan, Sandbox, Silent,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

use crate::proc::{self, docker, Worker};
use crate::raw;
use crate::stats::{ms, rotation, Samples};
use crate::traced::{breakdown, Traced};
use crate::{Ctx, Results, Target, BENCH_LABEL};

/// Runs the selected phases in order (launch, exec, describe, resolve, rss,
/// conn). The first failure aborts the run (cleanup still happens).
pub async fn run_all(ctx: &Ctx, res: &mut Results) -> Result<()> {
    let compose = ["launch", "exec", "sup", "resolve", "rss", "pool"]
        .iter()
        .any(|p| ctx.phase(p));
    if compose {
        let mut cmd = tokio::process::Command::new("bash");
        cmd.arg(ctx.repo.join("tests/fixtures/compose/up.sh"))
            .arg(&ctx.args.project);
        proc::run_passthrough(&mut cmd, "compose up").await?;
    }
    if ctx.phase("launch") {
        launch(ctx, res).await.context("launch phase")?;
    }
    if ctx.phase("exec") {
        exec(ctx, res).await.context("exec phase")?;
    }
    if ctx.phase("sup") {
        crate::supervised::phase(ctx, res)
            .await
            .context("supervisor phase")?;
    }
    if ctx.phase("describe") {
        describe(ctx, res).await.context("describe phase")?;
    }
    if ctx.phase("resolve") {
        resolution(ctx, res).await.context("resolution phase")?;
    }
    if ctx.phase("rss") {
        rss(ctx, res).await.context("rss phase")?;
    }
    if ctx.phase("conn") {
        conn(ctx, res).await.context("connection phase")?;
    }
    if ctx.phase("pool") {
        crate::pool::phase(ctx, res).await.context("pool phase")?;
    }
    Ok(())
}

pub(crate) fn bench_opts(name: &str) -> LaunchOptions {
    LaunchOptions {
        name: Some(name.to_string()),
        labels: BTreeMap::from([(BENCH_LABEL.0.to_string(), BENCH_LABEL.1.to_string())]),
        ..Default::default()
    }
}

pub(crate) async fn odek_launch(
    odek: &Client,
    inputs: &ConfigInputs,
    opts: &LaunchOptions,
) -> Result<Sandbox> {
    let plan = odek.resolve(inputs, &Silent).await?;
    Ok(odek.launch(&plan, opts, &Silent).await?)
}

pub(crate) fn container_of(sb: &Sandbox) -> Result<String> {
    sb.container_id
        .clone()
        .context("odek launched no container (fallback?)")
}

/// Prints a phase table: one row per variant.
pub(crate) fn table(res: &mut Results, title: &str, s: &Samples, rows: &[(&str, &str)]) {
    res.line(format!("\n== {title}"));
    res.line(format!(
        "{:<40} {:>10} {:>10} {:>10} {:>10} {:>4}",
        "variant", "median ms", "p90 ms", "min ms", "max ms", "n"
    ));
    let small = rows
        .iter()
        .filter_map(|(k, _)| s.summary(k))
        .all(|x| x.median_ms < 1.0);
    let p = if small { 3 } else { 2 };
    for (key, label) in rows {
        if let Some(x) = s.summary(key) {
            res.line(format!(
                "{:<40} {:>10.p$} {:>10.p$} {:>10.p$} {:>10.p$} {:>4}",
                label, x.median_ms, x.p90_ms, x.min_ms, x.max_ms, x.n
            ));
        }
    }
}

/// A ratio of medians (and of p90s) as a line, a JSON value.
pub(crate) fn ratio(
    res: &mut Results,
    label: &str,
    num: (f64, f64),
    den: (f64, f64),
) -> serde_json::Value {
    let (m, p) = (num.0 / den.0, num.1 / den.1);
    res.line(format!("  {label:<50} {m:>7.3}× (p90 {p:.3}×)"));
    serde_json::json!({ "median": m, "p90": p })
}

pub(crate) fn mp(s: &Samples, k: &str) -> (f64, f64) {
    (s.median(k), s.p90(k))
}

// ---------------------------------------------------------------- 1 + 5 ----

/// 1. Launch to ready (two networks) and 5. teardown, on the same containers.
async fn launch(ctx: &Ctx, res: &mut Results) -> Result<()> {
    let inputs = ctx.inputs(None, true);
    let plan = ctx.odek.resolve(&inputs, &Silent).await?;
    if plan.networks.len() < 2 {
        bail!(
            "Compose project {} has {} networks; the fixture has 2",
            ctx.args.project,
            plan.networks.len()
        );
    }
    let first = plan.networks[0].id.clone();
    let more: Vec<String> = plan.networks[1..].iter().map(|n| n.id.clone()).collect();
    // The like-for-like floor (SPEC §4.4): the planned networks by name and
    // the aliases their services have there, found once, outside the
    // timing (odek finds them by one list and an inspect each).
    let planned: Vec<String> = plan.networks.iter().map(|n| n.name.clone()).collect();
    let aliases = raw::member_aliases(&ctx.raw, &planned).await?;
    let image_ref = plan.image.reference.create_ref();
    let template = Sandbox::host(&plan, Isolation::Container, Vec::new());
    let (n, w) = (ctx.args.iterations, ctx.args.warmup);
    let mut variants = vec!["odek", "odek_cold", "raw", "cli", "raw_direct"];
    if ctx.supervisor.is_some() {
        variants.push("odek_sup");
    }
    let removers = ["odek_destroy", "raw_remove", "cli_rm"];
    let mut s = Samples::default();
    let mut td = Samples::default();
    let mut steps = Samples::default();
    let mut seq = 0usize;
    eprintln!(
        "odek-bench: 1. launch ({n} iterations + {w} warm-up, {} variants)",
        variants.len()
    );
    for i in 0..w + n {
        let rec = i >= w;
        // Each container with odek's sandbox when odek launched it: its
        // link network (SPEC §4.4) is released after a raw or CLI removal,
        // outside the timing (those removals know nothing of it), or the
        // daemon's address pools run out after about 30 launches.
        let mut made: Vec<(String, Option<Sandbox>)> = Vec::new();
        // The raw floor's own networks, removed after the teardown timings.
        let mut links: Vec<String> = Vec::new();
        // Supervised sandboxes: held (their owner session) until removed
        // after the teardown timings, which stay those of the others.
        let mut held: Vec<Sandbox> = Vec::new();
        for v in rotation(variants.len(), i) {
            seq += 1;
            let name = format!("odek-bench-l{seq}-{}", variants[v]);
            let opts = bench_opts(&name);
            // The floor gets the exact create request odek sends, built
            // outside its timing: it measures the Engine calls only.
            let spec = container_spec(&plan, &name, &image_ref, &opts, "bench");
            let t = Instant::now();
            if v == 5 {
                let sb = ctx
                    .supervised(odek_launch(&ctx.odek, &inputs, &opts))
                    .await?;
                let took = t.elapsed();
                if sb.owner.session().is_none() {
                    bail!("the supervised launch fell back to the exec API (see odek's warning)");
                }
                if rec {
                    s.push(variants[v], took);
                }
                held.push(sb);
                continue;
            }
            let (id, sb) = match v {
                0 | 1 => {
                    let sb = if v == 0 {
                        odek_launch(&ctx.odek, &inputs, &opts).await?
                    } else {
                        odek_launch(&Client::from_env(), &inputs, &opts).await?
                    };
                    (container_of(&sb)?, Some(sb))
                }
                2 => {
                    let (id, link, st) = raw::launch_linked(
                        &ctx.raw,
                        &spec,
                        &format!("{name}-link"),
                        &planned,
                        &aliases,
                    )
                    .await?;
                    links.push(link);
                    if rec {
                        steps.push("network", st.network);
                        steps.push("create", st.create);
                        steps.push("start", st.start);
                        steps.push("list", st.list);
                        steps.push("connect", st.connect);
                        steps.push("inspect", st.inspect);
                    }
                    (id, None)
                }
                4 => {
                    let (id, st) = raw::launch(&ctx.raw, &spec, &more, false).await?;
                    if rec {
                        steps.push("direct:create", st.create);
                        steps.push("direct:start", st.start);
                        steps.push("direct:connect", st.connect);
                        steps.push("direct:inspect", st.inspect);
                    }
                    (id, None)
                }
                _ => (cli_launch(&spec, &first, &more).await?, None),
            };
            let took = t.elapsed();
            if rec {
                s.push(variants[v], took);
            }
            made.push((id, sb));
        }
        // 5. Teardown: each container goes by another method each iteration.
        for (k, (id, launched)) in made.iter().enumerate() {
            let m = (i + k) % removers.len();
            let t = Instant::now();
            match (m, launched) {
                (0, Some(sb)) => ctx.odek.destroy(sb).await?,
                (0, None) => {
                    let mut sb = template.clone();
                    sb.container_id = Some(id.clone());
                    ctx.odek.destroy(&sb).await?;
                }
                (1, _) => raw::remove(&ctx.raw, id).await?,
                _ => {
                    docker(&["rm", "-f", id]).await?;
                }
            }
            if rec {
                td.push(removers[m], t.elapsed());
            }
            if let (1.., Some(sb)) = (m, launched) {
                ctx.odek.destroy(sb).await?;
            }
        }
        for sb in held {
            ctx.odek.destroy(&sb).await?;
        }
        for link in links {
            raw::remove_linked(&ctx.raw, &link).await?;
        }
    }

    table(
        res,
        &format!("1. launch to ready, Compose fixture's 2 networks (N={n}, interleaved)"),
        &s,
        &[
            ("odek", "odek resolve+launch (warm client)"),
            ("odek_cold", "odek, new client each time"),
            ("raw", "raw API floor, own network (SPEC 4.4)"),
            ("cli", "docker run + network connect + inspect"),
            ("raw_direct", "raw, on the networks directly (old)"),
            ("odek_sup", "odek with the supervisor (warm client)"),
        ],
    );
    let mut ratios = serde_json::Map::new();
    ratios.insert(
        "odek/raw".into(),
        ratio(res, "odek / raw floor", mp(&s, "odek"), mp(&s, "raw")),
    );
    ratios.insert(
        "odek_cold/raw".into(),
        ratio(
            res,
            "odek (new client) / raw floor",
            mp(&s, "odek_cold"),
            mp(&s, "raw"),
        ),
    );
    ratios.insert(
        "odek/cli".into(),
        ratio(res, "odek / docker CLI", mp(&s, "odek"), mp(&s, "cli")),
    );
    ratios.insert(
        "raw/cli".into(),
        ratio(res, "raw floor / docker CLI", mp(&s, "raw"), mp(&s, "cli")),
    );
    ratios.insert(
        "raw_direct/raw".into(),
        ratio(
            res,
            "raw on the networks directly / raw floor",
            mp(&s, "raw_direct"),
            mp(&s, "raw"),
        ),
    );
    for (label, p, calls) in [
        (
            "raw floor",
            "",
            &["network", "create", "start", "list", "connect", "inspect"][..],
        ),
        (
            "on the networks directly",
            "direct:",
            &["create", "start", "connect", "inspect"][..],
        ),
    ] {
        res.line(
            format!("  {label} per call (median ms): ")
                + &calls
                    .iter()
                    .map(|k| format!("{k} {:.2}", steps.median(&format!("{p}{k}"))))
                    .collect::<Vec<_>>()
                    .join(", "),
        );
    }
    if s.summary("odek_sup").is_some() {
        ratios.insert(
            "odek_sup/raw".into(),
            ratio(
                res,
                "odek with the supervisor / raw floor",
                mp(&s, "odek_sup"),
                mp(&s, "raw"),
            ),
        );
        ratios.insert(
            "odek_sup/odek".into(),
            ratio(
                res,
                "odek with the supervisor / odek",
                mp(&s, "odek_sup"),
                mp(&s, "odek"),
            ),
        );
        let r = s.median("odek_sup") / s.median("raw");
        res.target(Target {
            name: "launch: odek + supervisor ≤ 1.10× raw floor".into(),
            measured: format!(
                "{:.1} ms vs {:.1} ms",
                s.median("odek_sup"),
                s.median("raw")
            ),
            limit: "1.10×".into(),
            ratio: r,
            met: r <= 1.10,
        });
    }
    let r = s.median("odek") / s.median("raw");
    res.target(Target {
        name: "launch: odek ≤ 1.10× raw floor".into(),
        measured: format!("{:.1} ms vs {:.1} ms", s.median("odek"), s.median("raw")),
        limit: "1.10×".into(),
        ratio: r,
        met: r <= 1.10,
    });

    table(
        res,
        &format!(
            "5. teardown: remove a running sandbox (n≈{} each, interleaved)",
            n * variants.iter().filter(|v| **v != "odek_sup").count() / removers.len()
        ),
        &td,
        &[
            ("odek_destroy", "odek destroy"),
            ("raw_remove", "raw DELETE ?force=1&v=1"),
            ("cli_rm", "docker rm -f"),
        ],
    );
    let mut tratios = serde_json::Map::new();
    tratios.insert(
        "odek/raw".into(),
        ratio(
            res,
            "odek destroy / raw remove",
            mp(&td, "odek_destroy"),
            mp(&td, "raw_remove"),
        ),
    );
    tratios.insert(
        "cli/raw".into(),
        ratio(
            res,
            "docker rm -f / raw remove",
            mp(&td, "cli_rm"),
            mp(&td, "raw_remove"),
        ),
    );

    let prof = launch_profile(ctx, res, &inputs, &plan, &image_ref).await?;
    res.phases.insert(
        "launch".into(),
        serde_json::json!({
            "variants": s.to_json(),
            "ratios": ratios,
            "raw_steps": steps.to_json(),
            "profile": prof,
        }),
    );
    res.phases.insert(
        "teardown".into(),
        serde_json::json!({ "variants": td.to_json(), "ratios": tratios }),
    );
    Ok(())
}

async fn cli_launch(spec: &ContainerSpec, first: &str, more: &[String]) -> Result<String> {
    let mut a: Vec<String> = vec![
        "run".into(),
        "-d".into(),
        "--name".into(),
        spec.name.clone(),
        "--network".into(),
        first.into(),
    ];
    for (k, v) in &spec.labels {
        a.push("--label".into());
        a.push(format!("{k}={v}"));
    }
    if spec.init {
        a.push("--init".into());
    }
    a.push("--pids-limit".into());
    a.push(spec.pids_limit.to_string());
    for c in &spec.cap_drop {
        a.push("--cap-drop".into());
        a.push(c.clone());
    }
    for o in &spec.security_opt {
        a.push("--security-opt".into());
        // The Engine API takes odek's seccomp profile inline; the docker CLI
        // takes a file's path and sends the file's content.
        match o.strip_prefix("seccomp=") {
            Some(profile) if profile.starts_with('{') => {
                let path = std::env::temp_dir()
                    .join(format!("odek-bench-seccomp-{}.json", std::process::id()));
                std::fs::write(&path, profile)?;
                a.push(format!("seccomp={}", path.display()));
            }
            _ => a.push(o.clone()),
        }
    }
    for t in &spec.tmpfs {
        a.push("--tmpfs".into());
        a.push(format!("{}:{}", t.target, t.options));
    }
    for b in &spec.binds {
        a.push("--mount".into());
        a.push(format!(
            "type=bind,source={},target={}{}",
            b.source,
            b.target,
            if b.read_only { ",readonly" } else { "" }
        ));
    }
    a.push("-w".into());
    a.push(spec.working_dir.clone());
    a.push(spec.image.clone());
    a.extend(spec.cmd.iter().cloned());
    let args: Vec<&str> = a.iter().map(String::as_str).collect();
    let id = docker(&args).await?.trim().to_string();
    for n in more {
        docker(&["network", "connect", n, &id]).await?;
    }
    docker(&["inspect", &id]).await?;
    Ok(id)
}

/// Where odek's launch time goes: every Engine call timed through a
/// [`Traced`] engine (warm client, and a new client per launch), plus the
/// in-process work that runs on the async runtime without I/O to the daemon.
async fn launch_profile(
    ctx: &Ctx,
    res: &mut Results,
    inputs: &ConfigInputs,
    plan: &Plan,
    image_ref: &str,
) -> Result<serde_json::Value> {
    let k = (ctx.args.iterations / 2).max(5);
    let mut warm = Samples::default();
    let mut cold = Samples::default();
    let tr = Arc::new(Traced::new(ctx.endpoint.clone()));
    let todek = Client::with_engine(tr.clone());
    todek.resolve(inputs, &Silent).await?;
    tr.take();
    for j in 0..2 * k {
        let is_cold = j % 2 == 1;
        let (o, t) = if is_cold {
            let t = Arc::new(Traced::new(ctx.endpoint.clone()));
            (Client::with_engine(t.clone()), t)
        } else {
            (todek.clone(), tr.clone())
        };
        let name = format!("odek-bench-lp{j}");
        let t0 = Instant::now();
        let p = o.resolve(inputs, &Silent).await?;
        let t_resolve = t0.elapsed();
        let sb = o.launch(&p, &bench_opts(&name), &Silent).await?;
        let total = t0.elapsed();
        let b = breakdown(&t.take());
        let s = if is_cold { &mut cold } else { &mut warm };
        s.push("total", total);
        s.push("resolve", t_resolve);
        s.push("launch", total - t_resolve);
        s.push_ms("engine_calls", b.engine_union_ms);
        s.push_ms("odek_own_work", ms(total) - b.engine_union_ms);
        for (op, v) in &b.per_op_ms {
            s.push_ms(op, *v);
        }
        // Through odek: its link network (SPEC §4.4) goes with it. Its
        // calls are not the next launch's (the warm client's trace is
        // shared): dropped.
        o.destroy(&sb).await?;
        t.take();
    }
    // In-process work (no daemon I/O), microseconds: the synchronous file
    // reads of config::load and the labels of container_spec (/proc reads,
    // plan JSON) run on the async runtime's worker thread.
    let mut cpu = Samples::default();
    for _ in 0..200 {
        let t = Instant::now();
        let _ = odek_core::config::load(inputs)?;
        cpu.push_ms("config_load_us", t.elapsed().as_secs_f64() * 1e6);
        let t = Instant::now();
        let _ = container_spec(
            plan,
            "odek-bench-x",
            image_ref,
            &bench_opts("odek-bench-x"),
            "bench",
        );
        cpu.push_ms("container_spec_us", t.elapsed().as_secs_f64() * 1e6);
    }
    res.line(format!(
        "  profile of odek launch, {k} traced runs each (median ms per run):"
    ));
    for (label, s) in [("warm client", &warm), ("new client", &cold)] {
        let ops: Vec<String> = s
            .names()
            .iter()
            .filter(|n| {
                ![
                    "total",
                    "resolve",
                    "launch",
                    "engine_calls",
                    "odek_own_work",
                ]
                .contains(&n.as_str())
            })
            .map(|n| format!("{n} {:.2}", s.median(n)))
            .collect();
        res.line(format!(
            "    {label:<11}: total {:.1} = resolve {:.2} + launch {:.1}; engine calls {:.1}, odek's own work {:.2}",
            s.median("total"),
            s.median("resolve"),
            s.median("launch"),
            s.median("engine_calls"),
            s.median("odek_own_work"),
        ));
        res.line(format!("                 calls: {}", ops.join(", ")));
    }
    res.line(format!(
        "    in-process (µs): config::load {:.0}, container_spec {:.0}",
        cpu.median("config_load_us"),
        cpu.median("container_spec_us")
    ));
    Ok(serde_json::json!({
        "warm": warm.to_json(),
        "cold": cold.to_json(),
        "in_process_us": cpu.to_json(),
    }))
}

// ------------------------------------------------------------------- 2 ----

/// 2. Exec round trip of `true` in a running sandbox.
async fn exec(ctx: &Ctx, res: &mut Results) -> Result<()> {
    let inputs = ctx.inputs(None, true);
    let sb = odek_launch(&ctx.odek, &inputs, &bench_opts("odek-bench-exec")).await?;
    let id = container_of(&sb)?;
    let r = exec_in(ctx, res, &sb, &id).await;
    ctx.odek.destroy(&sb).await?;
    r
}

/// The image libodek's fake engine holds (ffi/src/lib.rs `fake_engine`,
/// built with the `testing` feature): the `--engine fake` workers and the
/// in-process fake of phase 2b launch with it. The Docker phases use
/// `--image` (bench/run.sh: this checkout's namespaced
/// `odek-test-<ns>/base:1`), which the fake engine does not hold: given
/// that, a fake launch inspects an image it lacks and is refused "cannot be
/// pulled" (what stopped the first run with the link network).
pub(crate) const FAKE_IMAGE: &str = "odek-test/base:1";

/// Starts the Python and Go workers (each launches its own sandbox through
/// its binding, on `engine` "docker" — with `--image` — or "fake" — with
/// [`FAKE_IMAGE`]); with `supervised`, their environment names the
/// supervisor (`ODEK_SUPERVISOR`) and they are called `python_sup` and
/// `go_sup`.
pub(crate) async fn spawn_workers(
    ctx: &Ctx,
    go_bin: &std::path::Path,
    engine: &str,
    project: &str,
    supervised: bool,
) -> Result<Vec<Worker>> {
    let lib = ctx.release_bin("libodek.so");
    let image = if engine == "fake" {
        FAKE_IMAGE
    } else {
        ctx.args.image.as_str()
    };
    let worker_args = |cmd: &mut tokio::process::Command| {
        cmd.arg("--workdir").arg(&ctx.workdir).args([
            "--project",
            project,
            "--image",
            image,
            "--engine",
            engine,
        ]);
    };
    let mut py = tokio::process::Command::new(&ctx.args.python);
    py.arg(ctx.repo.join("bench/python/exec_bench.py"))
        .env("ODEK_LIB", &lib)
        .env("PYTHONPATH", ctx.repo.join("bindings/python"));
    worker_args(&mut py);
    let mut go = tokio::process::Command::new(go_bin);
    worker_args(&mut go);
    let names = if supervised {
        let bin = ctx
            .supervisor
            .as_ref()
            .context("no supervisor binary for the supervised workers")?;
        for c in [&mut py, &mut go] {
            c.env(odek_core::supervisor::SUPERVISOR_ENV, bin);
        }
        ["python_sup", "go_sup"]
    } else {
        ["python", "go"]
    };
    let mut workers = Vec::new();
    for (name, cmd) in names.into_iter().zip([py, go]) {
        let w = Worker::spawn(name, cmd, Duration::from_secs(120)).await?;
        if engine == "docker" {
            ctx.worker_sandboxes
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(w.sandbox.clone());
        }
        workers.push(w);
    }
    Ok(workers)
}

async fn exec_in(ctx: &Ctx, res: &mut Results, sb: &Sandbox, id: &str) -> Result<()> {
    let mut workers: Vec<Worker> = Vec::new();
    let mut go_bin = None;
    if !ctx.args.skip_bindings {
        let lib = ctx.release_bin("libodek.so");
        if !lib.is_file() {
            bail!(
                "{} is missing: cargo build --release -p odek-ffi --features testing (or pass --skip-bindings)",
                lib.display()
            );
        }
        let bin = proc::build_go_worker(&ctx.repo, &ctx.target, &ctx.out_dir, &ctx.args.go).await?;
        workers = spawn_workers(ctx, &bin, "docker", &ctx.args.project, false).await?;
        go_bin = Some(bin);
    }
    let mut variants: Vec<&str> = vec!["odek", "raw", "cli"];
    variants.extend(workers.iter().map(|w| w.name));
    let req = ExecRequest {
        command: odek_core::Command::Argv(vec!["true".into()]),
        env: Vec::new(),
        timeout: None,
        workdir: None,
    };
    let sink = |_: StreamKind, _: &[u8]| {};
    let n = ctx.args.exec_iterations.unwrap_or(3 * ctx.args.iterations);
    let w = ctx.args.warmup.max(3);
    let mut s = Samples::default();
    let mut steps = Samples::default();
    eprintln!(
        "odek-bench: 2. exec ({n} iterations + {w} warm-up, {} variants)",
        variants.len()
    );
    for i in 0..w + n {
        let rec = i >= w;
        for v in rotation(variants.len(), i) {
            let t = Instant::now();
            let took = match v {
                0 => {
                    let o = ctx
                        .odek
                        .exec(sb, &req, &ExecOptions::default(), &sink)
                        .await?;
                    if o.exit_code != 0 {
                        bail!("odek exec: exit {}", o.exit_code);
                    }
                    t.elapsed()
                }
                1 => {
                    let st = raw::exec_true(&ctx.raw, id).await?;
                    let d = t.elapsed();
                    if rec {
                        steps.push("create", st.create);
                        steps.push("start_attached", st.start_attached);
                        steps.push("inspect", st.inspect);
                    }
                    d
                }
                2 => {
                    docker(&["exec", "-w", "/workspace", id, "true"]).await?;
                    t.elapsed()
                }
                k => workers[k - 3].exec().await?,
            };
            if rec {
                s.push(variants[v], took);
            }
        }
    }
    for w in workers {
        w.quit(Duration::from_secs(30)).await?;
    }
    table(
        res,
        &format!("2. exec round trip of `true` (N={n}, interleaved)"),
        &s,
        &[
            ("odek", "odek exec (core)"),
            ("raw", "raw API floor (create+start+inspect)"),
            ("cli", "docker exec"),
            ("python", "Python binding, in-process"),
            ("go", "Go binding, in-process"),
        ],
    );
    let mut ratios = serde_json::Map::new();
    ratios.insert(
        "odek/raw".into(),
        ratio(res, "odek / raw floor", mp(&s, "odek"), mp(&s, "raw")),
    );
    ratios.insert(
        "cli/raw".into(),
        ratio(res, "docker exec / raw floor", mp(&s, "cli"), mp(&s, "raw")),
    );
    let core1 = (s.median("odek") + 1.0, s.p90("odek") + 1.0);
    for b in ["python", "go"] {
        if s.summary(b).is_some() {
            ratios.insert(
                format!("{b}/(odek+1ms)"),
                ratio(res, &format!("{b} / (odek core + 1 ms)"), mp(&s, b), core1),
            );
            ratios.insert(
                format!("{b}/odek"),
                ratio(res, &format!("{b} / odek core"), mp(&s, b), mp(&s, "odek")),
            );
            let r = s.median(b) / core1.0;
            res.target(Target {
                name: format!("exec: {b} binding ≤ 1.05× (odek core + 1 ms)"),
                measured: format!("{:.2} ms vs {:.2} ms + 1", s.median(b), s.median("odek")),
                limit: "1.05×".into(),
                ratio: r,
                met: r <= 1.05,
            });
        }
    }
    res.line(
        "  raw floor per call (median ms): ".to_string()
            + &["create", "start_attached", "inspect"]
                .iter()
                .map(|k| format!("{k} {:.2}", steps.median(k)))
                .collect::<Vec<_>>()
                .join(", "),
    );
    let fake = match &go_bin {
        Some(bin) => Some(exec_fake(ctx, res, bin, &s).await?),
        None => None,
    };
    let r = s.median("odek") / s.median("raw");
    res.target(Target {
        name: "exec: odek ≤ 1.10× raw floor".into(),
        measured: format!("{:.2} ms vs {:.2} ms", s.median("odek"), s.median("raw")),
        limit: "1.10×".into(),
        ratio: r,
        met: r <= 1.10,
    });
    res.phases.insert(
        "exec".into(),
        serde_json::json!({
            "variants": s.to_json(),
            "ratios": ratios,
            "raw_steps": steps.to_json(),
            "without_daemon": fake,
        }),
    );
    Ok(())
}

/// The cost of odek itself and of each binding per exec, without the
/// daemon's jitter: the same exec against libodek's in-memory fake engine,
/// in-process in Rust and through each binding (interleaved).
async fn exec_fake(
    ctx: &Ctx,
    res: &mut Results,
    go_bin: &std::path::Path,
    real: &Samples,
) -> Result<serde_json::Value> {
    let fake = FakeEngine::new();
    fake.add_image(FakeImage::new(FAKE_IMAGE));
    fake.add_network(FakeNetwork::bridge("shop_default").compose("shop"));
    fake.add_network(
        FakeNetwork::bridge("shop_backend")
            .compose("shop")
            .internal(),
    );
    let fodek = Client::with_engine(Arc::new(fake));
    let mut inputs = ctx.inputs(None, true);
    inputs.flags.sandbox_compose_project = Some("shop".into());
    inputs.flags.sandbox_image = Some(FAKE_IMAGE.into());
    let plan = fodek.resolve(&inputs, &Silent).await?;
    let sb = fodek
        .launch(&plan, &LaunchOptions::default(), &Silent)
        .await?;
    let mut workers = spawn_workers(ctx, go_bin, "fake", "shop", false).await?;
    let req = ExecRequest {
        command: odek_core::Command::Argv(vec!["true".into()]),
        env: Vec::new(),
        timeout: None,
        workdir: None,
    };
    let sink = |_: StreamKind, _: &[u8]| {};
    let n = (ctx.args.iterations * 10).max(200);
    let variants = ["odek", "python", "go"];
    let mut s = Samples::default();
    for i in 0..n + 20 {
        for v in rotation(variants.len(), i) {
            let t = Instant::now();
            let took = match v {
                0 => {
                    fodek
                        .exec(&sb, &req, &ExecOptions::default(), &sink)
                        .await?;
                    t.elapsed()
                }
                k => workers[k - 1].exec().await?,
            };
            if i >= 20 {
                s.push(variants[v], took);
            }
        }
    }
    for w in workers {
        w.quit(Duration::from_secs(30)).await?;
    }
    table(
        res,
        &format!("2b. exec without the daemon: libodek's fake engine (N={n}, interleaved)"),
        &s,
        &[
            ("odek", "odek core exec (fake engine)"),
            ("python", "Python binding (fake engine)"),
            ("go", "Go binding (fake engine)"),
        ],
    );
    let mut out = serde_json::Map::new();
    out.insert("variants".into(), s.to_json());
    for b in ["python", "go"] {
        let over = s.median(b) - s.median("odek");
        let projected = (real.median("odek") + over) / (real.median("odek") + 1.0);
        res.line(format!(
            "  {b}: binding overhead {:.0} µs per exec; (odek real {:.2} ms + overhead) / (odek real + 1 ms) = {projected:.3}×",
            over * 1e3,
            real.median("odek"),
        ));
        out.insert(
            b.into(),
            serde_json::json!({ "overhead_ms": over, "projected_ratio": projected }),
        );
    }
    Ok(serde_json::Value::Object(out))
}

// ------------------------------------------------------------------- 4 ----

/// 4. Describe with networks × peers vs the concurrent-inspect floor.
async fn describe(ctx: &Ctx, res: &mut Results) -> Result<()> {
    let (nn, pp) = (ctx.args.describe_networks, ctx.args.describe_peers);
    eprintln!(
        "odek-bench: 4. describe: creating {nn} networks and {} idle peers",
        nn * pp
    );
    let t = Instant::now();
    // Names unique to this run: a network an earlier run could not remove
    // (see raw::remove_networks) must not make these names ambiguous.
    let prefix = format!("odek-bench-d{}", std::process::id());
    let net_ids = raw::create_networks(&ctx.raw, &prefix, 0..nn, 4, |k| {
        format!("10.{}.{}.0/24", 214 + k / 256, k % 256)
    })
    .await?;
    let net_names: Vec<String> = (0..nn).map(|k| format!("{prefix}-{k}")).collect();
    let jobs: Vec<(usize, usize)> = (0..nn).flat_map(|k| (0..pp).map(move |j| (k, j))).collect();
    let created: Vec<Result<String>> = stream::iter(jobs)
        .map(|(k, j)| {
            let net = &net_ids[k];
            async move {
                raw::create_peer(
                    &ctx.raw,
                    &format!("odek-bench-p{k}-{j}"),
                    net,
                    &format!("svc{k}-{j}"),
                    &ctx.args.image,
                )
                .await
            }
        })
        .buffer_unordered(6)
        .collect()
        .await;
    let peer_ids: Vec<String> = created.into_iter().collect::<Result<_>>()?;
    let setup_s = t.elapsed().as_secs_f64();

    let inputs = ctx.inputs(Some(net_names.clone()), false);
    let sb = odek_launch(&ctx.odek, &inputs, &bench_opts("odek-bench-describe")).await?;
    let me = container_of(&sb)?;
    let env = ctx.odek.describe(&sb).await?;
    let listed_peers: usize = env.networks.iter().map(|n| n.peers.len()).sum();
    if env.networks.len() != nn {
        bail!(
            "describe listed {} networks, {nn} attached",
            env.networks.len()
        );
    }

    // The same describe of a supervised sandbox on the same networks (it
    // and the plain one see each other as one more peer per network).
    let sbs = match ctx.supervisor {
        Some(_) => Some(
            ctx.supervised(odek_launch(
                &ctx.odek,
                &inputs,
                &bench_opts("odek-bench-describe-sup"),
            ))
            .await?,
        ),
        None => None,
    };
    let (n, w) = (ctx.args.iterations, ctx.args.warmup);
    let mut variants = vec!["odek", "floor", "chain"];
    if sbs.is_some() {
        variants.push("odek_sup");
    }
    let mut s = Samples::default();
    eprintln!(
        "odek-bench: 4. describe ({n} iterations + {w} warm-up, {} variants)",
        variants.len()
    );
    for i in 0..w + n {
        let rec = i >= w;
        for v in rotation(variants.len(), i) {
            let t = Instant::now();
            match v {
                0 => {
                    ctx.odek.describe(&sb).await?;
                }
                3 => {
                    if let Some(x) = &sbs {
                        ctx.odek.describe(x).await?;
                    }
                }
                1 => {
                    // The floor: every inspect describe needs, all at once,
                    // with the IDs known in advance.
                    let (nets, peers) = futures_util::future::join(
                        join_all(net_ids.iter().map(|id| raw::inspect_network(&ctx.raw, id))),
                        join_all(
                            peer_ids
                                .iter()
                                .map(|id| raw::inspect_container(&ctx.raw, id)),
                        ),
                    )
                    .await;
                    for r in nets {
                        r?;
                    }
                    for r in peers {
                        r?;
                    }
                }
                _ => {
                    // The dependency chain describe cannot avoid: the
                    // sandbox → its networks → their members, raw.
                    raw::inspect_container(&ctx.raw, &me).await?;
                    let nets =
                        join_all(net_ids.iter().map(|id| raw::inspect_network(&ctx.raw, id))).await;
                    let mut members = BTreeSet::new();
                    for r in nets {
                        members.extend(r?.into_iter().filter(|c| *c != me));
                    }
                    for r in join_all(
                        members
                            .iter()
                            .map(|id| raw::inspect_container(&ctx.raw, id)),
                    )
                    .await
                    {
                        r?;
                    }
                }
            }
            if rec {
                s.push(variants[v], t.elapsed());
            }
        }
    }
    table(
        res,
        &format!(
            "4. describe, {nn} networks × {pp} peers ({} peers; N={n}, interleaved)",
            peer_ids.len()
        ),
        &s,
        &[
            ("odek", "odek describe"),
            ("floor", "floor: all inspects concurrently"),
            ("chain", "raw chain: self → nets → peers"),
            ("odek_sup", "odek describe, supervised sandbox"),
        ],
    );
    let mut ratios = serde_json::Map::new();
    ratios.insert(
        "odek/floor".into(),
        ratio(
            res,
            "odek / concurrent-inspect floor",
            mp(&s, "odek"),
            mp(&s, "floor"),
        ),
    );
    ratios.insert(
        "odek/chain".into(),
        ratio(
            res,
            "odek / raw dependency chain",
            mp(&s, "odek"),
            mp(&s, "chain"),
        ),
    );
    ratios.insert(
        "chain/floor".into(),
        ratio(res, "raw chain / floor", mp(&s, "chain"), mp(&s, "floor")),
    );

    // Profile: the calls describe makes, and their union.
    let tr = Arc::new(Traced::new(ctx.endpoint.clone()));
    let todek = Client::with_engine(tr.clone());
    todek.describe(&sb).await?;
    tr.take();
    let mut prof = Samples::default();
    let mut counts = BTreeMap::new();
    for _ in 0..5 {
        let t = Instant::now();
        todek.describe(&sb).await?;
        let total = t.elapsed();
        let calls = tr.take();
        let b = breakdown(&calls);
        counts = b.per_op_count.clone();
        prof.push("total", total);
        prof.push_ms("engine_calls", b.engine_union_ms);
        prof.push_ms("odek_own_work", ms(total) - b.engine_union_ms);
        // Per wave: the span from the first start to the last end of an op.
        for op in ["inspect_container", "inspect_network"] {
            let of: Vec<_> = calls.iter().filter(|c| c.op == op).collect();
            if let (Some(s0), Some(e1)) = (
                of.iter().map(|c| c.start).min(),
                of.iter().map(|c| c.start + c.took).max(),
            ) {
                prof.push(&format!("span:{op}"), e1 - s0);
            }
        }
    }
    res.line(format!(
        "  profile (median of 5): total {:.1} ms, engine calls {:.1} ms, odek's own work {:.2} ms; calls {:?}",
        prof.median("total"),
        prof.median("engine_calls"),
        prof.median("odek_own_work"),
        counts
    ));
    res.line(format!(
        "  listed: {} networks, {listed_peers} peers, {} names omitted (cap {} names/network)",
        env.networks.len(),
        env.omitted_names,
        odek_core::describe::MAX_NAMES_PER_NETWORK
    ));
    if let Some(x) = &sbs {
        let r = s.median("odek_sup") / s.median("floor");
        ratio(
            res,
            "odek (supervised sandbox) / concurrent floor",
            mp(&s, "odek_sup"),
            mp(&s, "floor"),
        );
        res.target(Target {
            name: format!("describe ({nn}×{pp}), supervised ≤ 1.5× floor"),
            measured: format!(
                "{:.1} ms vs {:.1} ms",
                s.median("odek_sup"),
                s.median("floor")
            ),
            limit: "1.5×".into(),
            ratio: r,
            met: r <= 1.5,
        });
        ctx.odek.destroy(x).await?;
    }
    let r = s.median("odek") / s.median("floor");
    res.target(Target {
        name: format!("describe ({nn}×{pp}): odek ≤ 1.5× concurrent-inspect floor"),
        measured: format!("{:.1} ms vs {:.1} ms", s.median("odek"), s.median("floor")),
        limit: "1.5×".into(),
        ratio: r,
        met: r <= 1.5,
    });

    let t = Instant::now();
    ctx.odek.destroy(&sb).await?;
    let removed: Vec<Result<()>> = stream::iter(peer_ids.iter())
        .map(|id| raw::remove(&ctx.raw, id))
        .buffer_unordered(8)
        .collect()
        .await;
    removed.into_iter().collect::<Result<Vec<()>>>()?;
    raw::remove_networks(&ctx.raw, &net_ids, 4).await?;
    let teardown_s = t.elapsed().as_secs_f64();
    res.phases.insert(
        "describe".into(),
        serde_json::json!({
            "variants": s.to_json(),
            "ratios": ratios,
            "profile": prof.to_json(),
            "calls_per_describe": counts,
            "networks": nn, "peers_per_network": pp, "peers": peer_ids.len(),
            "listed_peers": listed_peers, "omitted_names": env.omitted_names,
            "setup_s": setup_s, "teardown_s": teardown_s,
        }),
    );
    Ok(())
}

// ------------------------------------------------------------------- 3 ----

/// 3. Resolution while the daemon holds many unrelated networks.
async fn resolution(ctx: &Ctx, res: &mut Results) -> Result<()> {
    let inputs = ctx.inputs(None, true);
    let mut levels = ctx.args.network_levels.clone();
    levels.sort_unstable();
    levels.dedup();
    let label = format!("com.docker.compose.project={}", ctx.args.project);
    let (n, w) = (ctx.args.iterations, ctx.args.warmup);
    let mut ids: Vec<String> = Vec::new();
    let mut s = Samples::default();
    let mut prof = Samples::default();
    let mut info = serde_json::Map::new();
    let subnet = |k: usize| {
        format!(
            "10.{}.{}.{}/28",
            215 + k / 4096,
            (k % 4096) / 16,
            (k % 16) * 16
        )
    };
    let variants = [
        "odek",
        "odek_cold",
        "raw_list",
        "raw_inspect_net",
        "raw_via_containers",
        "odek_named",
        "raw_list_names",
        "raw_names_concurrent",
    ];
    let compose_plan = ctx.odek.resolve(&inputs, &Silent).await?;
    let compose_net = compose_plan.networks[0].id.clone();
    // The same networks requested by name (sandbox_networks): odek looks
    // each name up with its own list call.
    let names: Vec<String> = compose_plan
        .networks
        .iter()
        .map(|n| n.name.clone())
        .collect();
    let named_inputs = ctx.inputs(Some(names.clone()), false);
    for &level in &levels {
        let t = Instant::now();
        if ids.len() < level {
            eprintln!(
                "odek-bench: 3. creating unrelated networks {}..{level}",
                ids.len()
            );
            let more =
                raw::create_networks(&ctx.raw, "odek-bench-s", ids.len()..level, 8, subnet).await?;
            ids.extend(more);
        }
        let create_s = t.elapsed().as_secs_f64();
        let on_daemon = ctx
            .raw
            .list_networks(None::<bollard::query_parameters::ListNetworksOptions>)
            .await?
            .len();
        eprintln!(
            "odek-bench: 3. resolve with {level} unrelated networks ({on_daemon} on the daemon)"
        );
        for i in 0..w + n {
            let rec = i >= w;
            for v in rotation(variants.len(), i) {
                let t = Instant::now();
                match v {
                    0 => {
                        ctx.odek.resolve(&inputs, &Silent).await?;
                    }
                    1 => {
                        Client::from_env().resolve(&inputs, &Silent).await?;
                    }
                    2 => {
                        raw::list_networks_label(&ctx.raw, &label).await?;
                    }
                    3 => {
                        raw::inspect_network(&ctx.raw, &compose_net).await?;
                    }
                    5 => {
                        ctx.odek.resolve(&named_inputs, &Silent).await?;
                    }
                    6 => {
                        let found = raw::list_networks_names(&ctx.raw, &names).await?;
                        if found != names.len() {
                            bail!("the name filter found {found} of {} networks", names.len());
                        }
                    }
                    7 => {
                        // One name per list call, as odek does, but concurrently.
                        for r in
                            join_all(names.iter().map(|n| {
                                raw::list_networks_names(&ctx.raw, std::slice::from_ref(n))
                            }))
                            .await
                        {
                            r?;
                        }
                    }
                    _ => {
                        let found =
                            raw::resolve_via_containers(&ctx.raw, &ctx.args.project).await?;
                        if found != 2 {
                            bail!("the containers-first lookup found {found} networks, not 2");
                        }
                    }
                }
                if rec {
                    s.push(&format!("{}@{level}", variants[v]), t.elapsed());
                }
            }
        }
        let tr = Arc::new(Traced::new(ctx.endpoint.clone()));
        let todek = Client::with_engine(tr.clone());
        todek.resolve(&inputs, &Silent).await?;
        tr.take();
        for _ in 0..5 {
            let t = Instant::now();
            todek.resolve(&inputs, &Silent).await?;
            let total = t.elapsed();
            let b = breakdown(&tr.take());
            prof.push(&format!("total@{level}"), total);
            prof.push_ms(&format!("list_networks@{level}"), b.engine_union_ms);
            prof.push_ms(
                &format!("odek_own_work@{level}"),
                ms(total) - b.engine_union_ms,
            );
        }
        info.insert(
            level.to_string(),
            serde_json::json!({ "create_s": create_s, "networks_on_daemon": on_daemon }),
        );
    }
    let t = Instant::now();
    raw::remove_networks(&ctx.raw, &ids, 8).await?;
    let remove_s = t.elapsed().as_secs_f64();

    let rows: Vec<(String, String)> = levels
        .iter()
        .flat_map(|l| {
            [
                (format!("odek@{l}"), format!("odek resolve, {l} networks")),
                (
                    format!("odek_cold@{l}"),
                    format!("  new client, {l} networks"),
                ),
                (
                    format!("raw_list@{l}"),
                    format!("  raw GET /networks?label, {l}"),
                ),
                (
                    format!("raw_inspect_net@{l}"),
                    format!("  raw GET /networks/<id>, {l}"),
                ),
                (
                    format!("odek_named@{l}"),
                    format!("odek, the 2 networks by name, {l}"),
                ),
                (
                    format!("raw_list_names@{l}"),
                    format!("  raw one list, both names, {l}"),
                ),
                (
                    format!("raw_names_concurrent@{l}"),
                    format!("  raw one list per name, concurrent, {l}"),
                ),
                (
                    format!("raw_via_containers@{l}"),
                    format!("  candidate: via containers, {l}"),
                ),
            ]
        })
        .collect();
    let rows_ref: Vec<(&str, &str)> = rows.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    table(
        res,
        &format!("3. resolution of a Compose project vs unrelated networks on the daemon (N={n})"),
        &s,
        &rows_ref,
    );
    let mut ratios = serde_json::Map::new();
    if let (Some(&lo), Some(&hi)) = (levels.first(), levels.last()) {
        for v in variants {
            ratios.insert(
                format!("{v}@{hi}/{v}@{lo}"),
                ratio(
                    res,
                    &format!("{v}: {hi} / {lo} networks"),
                    mp(&s, &format!("{v}@{hi}")),
                    mp(&s, &format!("{v}@{lo}")),
                ),
            );
        }
        let r = s.median(&format!("odek@{hi}")) / s.median(&format!("odek@{lo}"));
        res.target(Target {
            name: format!("resolution: {hi} networks ≤ 2× {lo}"),
            measured: format!(
                "{:.2} ms vs {:.2} ms",
                s.median(&format!("odek@{hi}")),
                s.median(&format!("odek@{lo}"))
            ),
            limit: "2×".into(),
            ratio: r,
            met: r <= 2.0,
        });
    }
    res.line(format!(
        "  profile (median of 5, ms): {}",
        levels
            .iter()
            .map(|l| format!(
                "@{l}: list_networks {:.2} + odek's own work {:.2}",
                prof.median(&format!("list_networks@{l}")),
                prof.median(&format!("odek_own_work@{l}"))
            ))
            .collect::<Vec<_>>()
            .join("; ")
    ));
    res.line(format!(
        "  network setup: {}; removal of {} networks {remove_s:.1} s",
        info.iter()
            .map(|(k, v)| format!("{k}: {:.1} s", v["create_s"].as_f64().unwrap_or(0.0)))
            .collect::<Vec<_>>()
            .join(", "),
        ids.len()
    ));
    res.phases.insert(
        "resolution".into(),
        serde_json::json!({
            "variants": s.to_json(),
            "ratios": ratios,
            "profile": prof.to_json(),
            "levels": info,
            "remove_s": remove_s,
        }),
    );
    Ok(())
}

// ------------------------------------------------------------------- 6 ----

fn time_v_field(stderr: &str, key: &str) -> Option<String> {
    stderr
        .lines()
        .find_map(|l| l.trim().strip_prefix(key).map(|v| v.trim().to_string()))
}

/// "h:mm:ss" or "m:ss.cc" → ms.
fn wall_ms(v: &str) -> Option<f64> {
    let parts: Vec<f64> = v
        .split(':')
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    Some(parts.iter().fold(0.0, |acc, p| acc * 60.0 + p) * 1e3)
}

async fn time_v(program: &std::path::Path, args: &[&str]) -> Result<(f64, f64)> {
    time_v_env(program, args, None).await
}

/// [`time_v`] with `ODEK_SUPERVISOR` set to `supervisor` when given.
async fn time_v_env(
    program: &std::path::Path,
    args: &[&str],
    supervisor: Option<&std::path::Path>,
) -> Result<(f64, f64)> {
    let mut cmd = tokio::process::Command::new("/usr/bin/time");
    if let Some(bin) = supervisor {
        cmd.env(odek_core::supervisor::SUPERVISOR_ENV, bin);
    }
    let out = cmd
        .arg("-v")
        .arg(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .output()
        .await
        .context("running /usr/bin/time -v")?;
    let err = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        bail!(
            "{} failed ({}): {}",
            program.display(),
            out.status,
            err.trim()
        );
    }
    let kib: f64 = time_v_field(&err, "Maximum resident set size (kbytes):")
        .and_then(|v| v.parse().ok())
        .context("no maximum RSS in the output of /usr/bin/time -v")?;
    let wall = time_v_field(&err, "Elapsed (wall clock) time (h:mm:ss or m:ss):")
        .and_then(|v| wall_ms(&v))
        .unwrap_or(f64::NAN);
    Ok((kib, wall))
}

/// 6. Peak RSS of `odek run -- true` (release CLI), via /usr/bin/time -v.
async fn rss(ctx: &Ctx, res: &mut Results) -> Result<()> {
    let odek = ctx.release_bin("odek");
    if !odek.is_file() {
        bail!(
            "{} is missing: cargo build --release -p odek-cli",
            odek.display()
        );
    }
    if !std::path::Path::new("/usr/bin/time").is_file() {
        bail!("/usr/bin/time is missing: apt-get install time");
    }
    let wd = ctx.workdir.to_string_lossy().into_owned();
    let mut s = Samples::default();
    eprintln!(
        "odek-bench: 6. peak RSS of odek run -- true ({} runs)",
        ctx.args.rss_runs
    );
    let backend = ctx
        .odek
        .resolve(&ctx.inputs(None, true), &Silent)
        .await?
        .networks[0]
        .id
        .clone();
    let run_true = [
        "-C",
        &wd,
        "run",
        "--sandbox",
        "--sandbox-image",
        &ctx.args.image,
        "--sandbox-compose",
        &ctx.args.project,
        "--",
        "true",
    ];
    for i in 0..ctx.args.rss_runs.max(1) {
        let (kib, wall) = time_v(&odek, &run_true).await?;
        s.push_ms("odek_rss_mib", kib / 1024.0);
        s.push_ms("odek_wall_ms", wall);
        if let Some(bin) = &ctx.supervisor {
            let (kib, wall) = time_v_env(&odek, &run_true, Some(bin)).await?;
            s.push_ms("odek_sup_rss_mib", kib / 1024.0);
            s.push_ms("odek_sup_wall_ms", wall);
        }
        // For context: the docker CLI's own footprint for a similar run.
        let name = format!("odek-bench-rss-{i}");
        let label = format!("{}={}", BENCH_LABEL.0, BENCH_LABEL.1);
        let (kib, wall) = time_v(
            std::path::Path::new(&which("docker").unwrap_or_else(|| "docker".into())),
            &[
                "run",
                "--rm",
                "--name",
                &name,
                "--label",
                &label,
                "--network",
                &backend,
                &ctx.args.image,
                "true",
            ],
        )
        .await?;
        s.push_ms("docker_rss_mib", kib / 1024.0);
        s.push_ms("docker_wall_ms", wall);
        // Baselines: the binary alone, and a command that talks to the
        // daemon but parses no image reference.
        let (kib, _) = time_v(&odek, &["--version"]).await?;
        s.push_ms("odek_version_rss_mib", kib / 1024.0);
        let (kib, _) = time_v(&odek, &["sandbox", "ls"]).await?;
        s.push_ms("odek_ls_rss_mib", kib / 1024.0);
    }
    let peak = s.summary("odek_rss_mib").map_or(f64::NAN, |x| x.max_ms);
    res.line(format!(
        "\n== 6. peak RSS, {} runs each (MiB; wall ms)",
        ctx.args.rss_runs.max(1)
    ));
    res.line(format!(
        "  odek run --sandbox-compose … -- true : median {:.1} MiB, max {:.1} MiB; wall median {:.0} ms",
        s.median("odek_rss_mib"),
        peak,
        s.median("odek_wall_ms")
    ));
    let sup_peak = s.summary("odek_sup_rss_mib").map(|x| x.max_ms);
    if let Some(p) = sup_peak {
        res.line(format!(
            "  … with the supervisor (ODEK_SUPERVISOR): median {:.1} MiB, max {p:.1} MiB; wall median {:.0} ms",
            s.median("odek_sup_rss_mib"),
            s.median("odek_sup_wall_ms")
        ));
    }
    res.line(format!(
        "  docker run --rm … true (CLI process)   : median {:.1} MiB; wall median {:.0} ms",
        s.median("docker_rss_mib"),
        s.median("docker_wall_ms")
    ));
    res.line(format!(
        "  baselines: odek --version {:.1} MiB, odek sandbox ls {:.1} MiB",
        s.median("odek_version_rss_mib"),
        s.median("odek_ls_rss_mib")
    ));
    res.target(Target {
        name: "peak RSS of odek run -- true ≤ 30 MiB".into(),
        measured: format!("{peak:.1} MiB (max of runs)"),
        limit: "30 MiB".into(),
        ratio: peak / 30.0,
        met: peak <= 30.0,
    });
    if let Some(p) = sup_peak {
        res.target(Target {
            name: "peak RSS of odek run -- true, supervisor ≤ 30 MiB".into(),
            measured: format!("{p:.1} MiB (max of runs)"),
            limit: "30 MiB".into(),
            ratio: p / 30.0,
            met: p <= 30.0,
        });
    }
    // The samples are MiB and ms, stored under the generic *_ms fields.
    res.phases.insert("rss".into(), serde_json::json!({ "units": "odek_rss_mib/docker_rss_mib in MiB, *_wall_ms in ms", "variants": s.to_json() }));
    Ok(())
}

fn which(prog: &str) -> Option<String> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(prog))
            .find(|c| c.is_file())
            .map(|c| c.to_string_lossy().into_owned())
    })
}

// ------------------------------------------------------------- profile ----

/// Reads one HTTP/1.1 response (Content-Length or chunked) from `s`;
/// returns its head.
async fn read_response(s: &mut UnixStream) -> Result<String> {
    let mut buf: Vec<u8> = Vec::with_capacity(1024);
    let mut tmp = [0u8; 1024];
    let head_end = loop {
        let k = s.read(&mut tmp).await?;
        if k == 0 {
            bail!("connection closed mid-response");
        }
        buf.extend_from_slice(&tmp[..k]);
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    let done = |b: &[u8]| -> bool {
        if let Some(cl) = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse::<usize>().ok())
        {
            b.len() >= head_end + cl
        } else {
            b.ends_with(b"0\r\n\r\n")
        }
    };
    while !done(&buf) {
        let k = s.read(&mut tmp).await?;
        if k == 0 {
            bail!("connection closed mid-body");
        }
        buf.extend_from_slice(&tmp[..k]);
    }
    Ok(String::from_utf8_lossy(&buf[..head_end]).into_owned())
}

async fn http_get(s: &mut UnixStream, path: &str) -> Result<String> {
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: docker\r\n\r\n").as_bytes())
        .await?;
    read_response(s).await
}

/// Connection reuse and version negotiation, measured directly: `GET
/// /_ping` on a new Unix connection vs a kept-alive one, bollard's ping
/// (a new connection per request: its pool keeps no idle connections), and
/// odek's per-client negotiation (new BollardEngine + version()).
async fn conn(ctx: &Ctx, res: &mut Results) -> Result<()> {
    let Address::Unix { path } = &ctx.endpoint.address else {
        res.line("\n== connection profile skipped (TCP endpoint)");
        return Ok(());
    };
    let n = (ctx.args.iterations * 10).max(200);
    let mut ka = UnixStream::connect(path).await?;
    let version_path = format!("/v{}/version", ctx.api);
    let variants = [
        "http_new_conn",
        "http_keepalive",
        "http_version_keepalive",
        "bollard_ping",
        "odek_negotiate",
    ];
    let mut s = Samples::default();
    let mut ping_head = String::new();
    for i in 0..n + 10 {
        let rec = i >= 10;
        for v in rotation(variants.len(), i) {
            let t = Instant::now();
            match v {
                0 => {
                    let mut c = UnixStream::connect(path).await?;
                    let head = http_get(&mut c, "/_ping").await?;
                    if i == 0 {
                        ping_head = head;
                    }
                }
                1 => drop(http_get(&mut ka, "/_ping").await?),
                2 => drop(http_get(&mut ka, &version_path).await?),
                3 => {
                    ctx.raw.ping().await?;
                }
                _ => {
                    let e = BollardEngine::new(ctx.endpoint.clone());
                    e.version().await.map_err(|e| anyhow::anyhow!("{e}"))?;
                }
            }
            if rec {
                s.push(variants[v], t.elapsed());
            }
        }
    }
    table(
        res,
        &format!("profile: one request, connection reuse, negotiation (N={n}, interleaved)"),
        &s,
        &[
            ("http_new_conn", "GET /_ping, new unix connection"),
            ("http_keepalive", "GET /_ping, kept-alive connection"),
            (
                "http_version_keepalive",
                "GET /version, kept-alive connection",
            ),
            ("bollard_ping", "bollard ping (no pooling)"),
            ("odek_negotiate", "odek: new engine + version()"),
        ],
    );
    let mut ratios = serde_json::Map::new();
    ratios.insert(
        "new/keepalive".into(),
        ratio(
            res,
            "new connection / kept-alive",
            mp(&s, "http_new_conn"),
            mp(&s, "http_keepalive"),
        ),
    );
    ratios.insert(
        "bollard/keepalive".into(),
        ratio(
            res,
            "bollard ping / kept-alive raw",
            mp(&s, "bollard_ping"),
            mp(&s, "http_keepalive"),
        ),
    );
    // What negotiation needs is in the ping's headers already.
    let header = |name: &str| {
        ping_head
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
            })
            .unwrap_or_default()
    };
    let (api, server) = (header("Api-Version"), header("Server"));
    res.line(format!(
        "  GET /_ping answers Api-Version: {api:?}, Server: {server:?}"
    ));
    ratios.insert(
        "version/ping".into(),
        ratio(
            res,
            "GET /version / GET /_ping (kept-alive)",
            mp(&s, "http_version_keepalive"),
            mp(&s, "http_keepalive"),
        ),
    );
    ratios.insert(
        "negotiate/bollard_ping".into(),
        ratio(
            res,
            "odek negotiation / one bollard request",
            mp(&s, "odek_negotiate"),
            mp(&s, "bollard_ping"),
        ),
    );
    res.phases.insert(
        "connection".into(),
        serde_json::json!({
            "variants": s.to_json(),
            "ratios": ratios,
            "ping_headers": { "api_version": api, "server": server },
        }),
    );
    Ok(())
}

/// Prints the targets.
pub fn print_targets(res: &mut Results) {
    let targets = res.targets.clone();
    res.line("\n== targets".to_string());
    for t in &targets {
        res.line(format!(
            "  [{}] {:<52} {:>8.3}  ({}; limit {})",
            if t.met { "met " } else { "MISS" },
            t.name,
            t.ratio,
            t.measured,
            t.limit
        ));
    }
    let missed = targets.iter().filter(|t| !t.met).count();
    if missed > 0 {
        res.line(format!(
            "  {missed} target(s) missed: read the ratios with the machine's load (above); `--strict` makes a missed timing target exit 1"
        ));
    }
    if !res.errors.is_empty() {
        let errs = res.errors.clone();
        res.line("\n== errors".to_string());
        for e in errs {
            res.line(format!("  {e}"));
        }
    }
}
