//! Phase 7, odek's supervisor (docs/SANDBOXING.md, "The supervisor (opt-in)")
//! against the raw exec-API floor, measured in the same run:
//!
//! - the exec round trip of `true` through the supervisor from the core
//!   (the owner session), the Python and Go bindings (their buffered exec on
//!   a sandbox they launched with `ODEK_SUPERVISOR` set) and `odek mcp`
//!   (driven by the official Python MCP SDK client), interleaved with the
//!   raw floor (create + start + inspect) and odek's exec-API path;
//! - N sequential commands (default 1,000), in 10 interleaved blocks;
//! - M concurrent commands on one sandbox (default 16): the wall time of the
//!   batch, i.e. the throughput;
//! - the supervisor's RSS inside the running sandbox (VmRSS and VmHWM of its
//!   host pids, keeper and server summed, after the load above) and its
//!   binary's size, stripped.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use futures_util::future::join_all;
use odek_core::engine::StreamKind;
use odek_core::{ExecOptions, ExecRequest, Sandbox};

use crate::phases::{bench_opts, container_of, mp, odek_launch, ratio, spawn_workers};
use crate::proc::{self, docker, Worker};
use crate::raw;
use crate::stats::{rotation, Samples};
use crate::{Ctx, Results, Target};

fn true_req() -> ExecRequest {
    ExecRequest {
        command: odek_core::Command::Argv(vec!["true".into()]),
        env: Vec::new(),
        timeout: None,
        workdir: None,
    }
}

/// One exec of `true` through odek (supervised or not, as `sb` was
/// launched); an error unless it exits 0.
async fn odek_true(ctx: &Ctx, sb: &Sandbox) -> Result<()> {
    let sink = |_: StreamKind, _: &[u8]| {};
    let o = ctx
        .odek
        .exec(sb, &true_req(), &ExecOptions::default(), &sink)
        .await?;
    if o.exit_code != 0 {
        bail!("odek exec in {}: exit {}", sb.name, o.exit_code);
    }
    Ok(())
}

/// Phase 7. Skipped (and said so) without a supervisor binary.
pub async fn phase(ctx: &Ctx, res: &mut Results) -> Result<()> {
    if ctx.supervisor.is_none() {
        res.line("\n== 7. supervisor: skipped (--skip-supervisor)");
        return Ok(());
    }
    let inputs = ctx.inputs(None, true);
    let plain = odek_launch(&ctx.odek, &inputs, &bench_opts("odek-bench-s-plain")).await?;
    let sup = ctx
        .supervised(odek_launch(
            &ctx.odek,
            &inputs,
            &bench_opts("odek-bench-s-sup"),
        ))
        .await;
    let r = match sup {
        Ok(sup) => {
            let r = measure(ctx, res, &plain, &sup).await;
            ctx.odek.destroy(&sup).await?;
            r
        }
        Err(e) => Err(e),
    };
    ctx.odek.destroy(&plain).await?;
    r
}

/// The `odek mcp` worker (bench/python/mcp_bench.py), when a Python with the
/// MCP SDK is there; `None` said in the table otherwise.
async fn spawn_mcp(ctx: &Ctx, res: &mut Results) -> Result<Option<Worker>> {
    let python = ctx
        .args
        .mcp_python
        .clone()
        .unwrap_or_else(|| ctx.repo.join("target/mcp-venv/bin/python"));
    if !python.is_file() {
        res.line(format!(
            "  (odek mcp variant left out: no {}; bench/run.sh creates it with pip install mcp)",
            python.display()
        ));
        return Ok(None);
    }
    let mut cmd = tokio::process::Command::new(&python);
    cmd.arg(ctx.repo.join("bench/python/mcp_bench.py"))
        .arg("--odek")
        .arg(ctx.release_bin("odek"))
        .arg("--workdir")
        .arg(&ctx.workdir)
        .args(["--project", &ctx.args.project, "--image", &ctx.args.image])
        .env(
            odek_core::supervisor::SUPERVISOR_ENV,
            ctx.supervisor.as_ref().context("no supervisor")?,
        );
    Ok(Some(
        Worker::spawn("mcp_sup", cmd, Duration::from_secs(120)).await?,
    ))
}

/// Fails unless container `name` runs odek's supervisor as its entrypoint
/// (so a row never silently measures the exec-API fallback).
async fn check_supervised(name: &str, who: &str) -> Result<()> {
    let out = docker(&["inspect", "-f", "{{json .Config.Entrypoint}}", name]).await?;
    if !out.contains(odek_core::supervisor::SUPERVISOR_PATH) {
        bail!(
            "the {who} sandbox {name} runs without odek's supervisor (entrypoint {}); odek fell back to the exec API",
            out.trim()
        );
    }
    Ok(())
}

async fn measure(ctx: &Ctx, res: &mut Results, plain: &Sandbox, sup: &Sandbox) -> Result<()> {
    if sup.owner.session().is_none() {
        bail!(
            "sandbox {} was launched with {}={} but holds no supervisor session (odek fell back to the exec API; see its warning)",
            sup.name,
            odek_core::supervisor::SUPERVISOR_ENV,
            ctx.supervisor.as_ref().map_or(String::new(), |p| p.display().to_string())
        );
    }
    let plain_id = container_of(plain)?;
    let sup_id = container_of(sup)?;
    res.line(format!(
        "\n== 7. odek's supervisor ({}) vs the raw exec API, sandboxes of the same plan",
        ctx.supervisor
            .as_ref()
            .map_or(String::new(), |p| p.display().to_string())
    ));
    let rss_idle = supervisor_rss(&sup_id).await?;

    // Workers: Python and Go through their bindings, and odek mcp.
    let mut workers: Vec<Worker> = Vec::new();
    if !ctx.args.skip_bindings {
        let bin = proc::build_go_worker(&ctx.repo, &ctx.target, &ctx.out_dir, &ctx.args.go).await?;
        workers = spawn_workers(ctx, &bin, "docker", &ctx.args.project, true).await?;
    }
    if let Some(w) = spawn_mcp(ctx, res).await? {
        workers.push(w);
    }
    for w in &workers {
        if w.sandbox != "-" {
            check_supervised(&w.sandbox, w.name).await?;
        }
    }

    // 7a. Round trips, interleaved.
    let mut variants: Vec<&str> = vec!["sup", "raw", "api"];
    variants.extend(workers.iter().map(|w| w.name));
    let n = ctx.args.sup_iterations;
    let w = ctx.args.warmup.max(3);
    let mut s = Samples::default();
    eprintln!(
        "odek-bench: 7. supervisor round trips ({n} iterations + {w} warm-up, {} variants)",
        variants.len()
    );
    for i in 0..w + n {
        for v in rotation(variants.len(), i) {
            let t = Instant::now();
            let took = match v {
                0 => {
                    odek_true(ctx, sup).await?;
                    t.elapsed()
                }
                1 => {
                    raw::exec_true(&ctx.raw, &plain_id).await?;
                    t.elapsed()
                }
                2 => {
                    odek_true(ctx, plain).await?;
                    t.elapsed()
                }
                k => workers[k - 3].exec().await?,
            };
            if i >= w {
                s.push(variants[v], took);
            }
        }
    }
    // 7e. The same round trip back to back and after an idle pause, in
    // each process (the core here, each binding in its worker).
    let loops = idle_loops(ctx, sup, &mut workers, n).await?;
    for wk in workers {
        wk.quit(Duration::from_secs(30)).await?;
    }
    table95(
        res,
        &format!("7a. exec round trip of `true` through the supervisor (N={n}, interleaved)"),
        &s,
        &[
            ("sup", "supervisor, core (owner session)"),
            ("python_sup", "supervisor, Python binding"),
            ("go_sup", "supervisor, Go binding"),
            ("mcp_sup", "supervisor, odek mcp (Python MCP SDK)"),
            ("raw", "raw exec-API floor (create+start+inspect)"),
            ("api", "odek exec, exec API (no supervisor)"),
        ],
    );
    let mut ratios = serde_json::Map::new();
    let floor = mp(&s, "raw");
    for (k, label) in [
        ("sup", "core"),
        ("python_sup", "python"),
        ("go_sup", "go"),
        ("mcp_sup", "mcp"),
        ("api", "odek exec API"),
    ] {
        if s.summary(k).is_some() {
            ratios.insert(
                format!("{k}/raw"),
                ratio(res, &format!("{label} / raw floor"), mp(&s, k), floor),
            );
        }
    }
    let core1 = (s.median("sup") + 1.0, s.p90("sup") + 1.0);
    for b in ["python_sup", "go_sup"] {
        if s.summary(b).is_some() {
            ratios.insert(
                format!("{b}/(sup+1ms)"),
                ratio(res, &format!("{b} / (core + 1 ms)"), mp(&s, b), core1),
            );
        }
    }
    let med = |k: &str| s.median(k);
    let r = med("sup") / med("raw");
    res.target(Target {
        name: "supervisor: core exec ≤ 2 ms median".into(),
        measured: format!("{:.3} ms (p95 {:.3})", med("sup"), s.p95("sup")),
        limit: "2 ms".into(),
        ratio: med("sup") / 2.0,
        met: med("sup") <= 2.0,
    });
    res.target(Target {
        name: "supervisor: core exec ≤ 0.08× raw exec floor".into(),
        measured: format!("{:.3} ms vs {:.2} ms", med("sup"), med("raw")),
        limit: "0.08×".into(),
        ratio: r,
        met: r <= 0.08,
    });
    if s.summary("python_sup").is_some() {
        let r = med("python_sup") / med("raw");
        res.target(Target {
            name: "supervisor: Python exec ≤ 2 ms and ≤ 0.08× floor".into(),
            measured: format!("{:.3} ms vs {:.2} ms", med("python_sup"), med("raw")),
            limit: "2 ms, 0.08×".into(),
            ratio: r,
            met: r <= 0.08 && med("python_sup") <= 2.0,
        });
    }
    for b in ["python_sup", "go_sup"] {
        if s.summary(b).is_some() {
            let r = med(b) / core1.0;
            res.target(Target {
                name: format!("supervisor: {b} ≤ 1.05× (core + 1 ms)"),
                measured: format!("{:.3} ms vs {:.3} ms + 1", med(b), med("sup")),
                limit: "1.05×".into(),
                ratio: r,
                met: r <= 1.05,
            });
        }
    }
    if s.summary("mcp_sup").is_some() {
        res.target(Target {
            name: "supervisor: odek mcp exec ≤ 5 ms".into(),
            measured: format!("{:.3} ms (p95 {:.3})", med("mcp_sup"), s.p95("mcp_sup")),
            limit: "5 ms".into(),
            ratio: med("mcp_sup") / 5.0,
            met: med("mcp_sup") <= 5.0,
        });
    }

    report_idle_loops(res, &loops);

    // 7b. Sequential commands, in interleaved blocks.
    let total = ctx.args.sequential.max(10);
    let blocks = 10;
    let per = total / blocks;
    let mut seq = Samples::default();
    eprintln!("odek-bench: 7b. {total} sequential commands per variant ({blocks} blocks)");
    for b in 0..blocks {
        for v in rotation(2, b) {
            let t = Instant::now();
            for _ in 0..per {
                if v == 0 {
                    odek_true(ctx, sup).await?;
                } else {
                    raw::exec_true(&ctx.raw, &plain_id).await?;
                }
            }
            seq.push(["sup", "raw"][v], t.elapsed());
        }
    }
    let (ts, tr) = (seq.total("sup"), seq.total("raw"));
    let n_seq = per * blocks;
    res.line(format!(
        "\n== 7b. {n_seq} sequential `true` ({blocks} interleaved blocks of {per})"
    ));
    res.line(format!(
        "  supervisor (core)  : {:.2} s, {:.3} ms per command",
        ts / 1e3,
        ts / n_seq as f64
    ));
    res.line(format!(
        "  raw exec-API floor : {:.2} s, {:.3} ms per command",
        tr / 1e3,
        tr / n_seq as f64
    ));
    res.line(format!("  raw / supervisor   : {:.1}×", tr / ts));
    res.target(Target {
        name: format!("supervisor: {n_seq} sequential ≥ 20× faster than exec API"),
        measured: format!("{:.2} s vs {:.2} s", ts / 1e3, tr / 1e3),
        limit: "≥ 20×".into(),
        ratio: tr / ts,
        met: tr / ts >= 20.0,
    });

    // 7c. Concurrent commands on one sandbox.
    let m = ctx.args.concurrent.max(1);
    let (cn, cw) = (ctx.args.iterations, ctx.args.warmup);
    let mut conc = Samples::default();
    eprintln!("odek-bench: 7c. {m} concurrent commands ({cn} iterations + {cw} warm-up)");
    for i in 0..cw + cn {
        for v in rotation(2, i) {
            let t = Instant::now();
            if v == 0 {
                for r in join_all((0..m).map(|_| odek_true(ctx, sup))).await {
                    r?;
                }
            } else {
                for r in join_all((0..m).map(|_| raw::exec_true(&ctx.raw, &plain_id))).await {
                    r?;
                }
            }
            if i >= cw {
                conc.push(["sup", "raw"][v], t.elapsed());
            }
        }
    }
    table95(
        res,
        &format!("7c. {m} concurrent `true` on one sandbox: wall time of the batch (N={cn}, interleaved)"),
        &conc,
        &[
            ("sup", "supervisor, core"),
            ("raw", "raw exec-API floor"),
        ],
    );
    let thr = |k: &str| m as f64 / (conc.median(k) / 1e3);
    res.line(format!(
        "  throughput (median batch): supervisor {:.0} commands/s, raw {:.0} commands/s",
        thr("sup"),
        thr("raw")
    ));
    let cr = conc.median("raw") / conc.median("sup");
    res.line(format!("  supervisor / raw throughput      {cr:.1}×"));
    res.target(Target {
        name: format!("supervisor: {m} concurrent, throughput ≥ 10× exec API"),
        measured: format!("{:.0}/s vs {:.0}/s", thr("sup"), thr("raw")),
        limit: "≥ 10×".into(),
        ratio: cr,
        met: cr >= 10.0,
    });

    // 7d. The supervisor's footprint.
    let rss_loaded = supervisor_rss(&sup_id).await?;
    let (size, stripped) = stripped_size(ctx)?;
    res.line("\n== 7d. the supervisor's footprint".to_string());
    res.line(format!(
        "  RSS in the sandbox (keeper + server, keeper's host pid {}): idle after launch VmRSS {:.2} MiB; after 7a–7c VmRSS {:.2} MiB, VmHWM {:.2} MiB",
        rss_loaded.pid,
        rss_idle.rss_kib / 1024.0,
        rss_loaded.rss_kib / 1024.0,
        rss_loaded.hwm_kib / 1024.0
    ));
    res.line(format!(
        "  binary: {:.2} MiB as built, {:.2} MiB stripped",
        size as f64 / (1 << 20) as f64,
        stripped as f64 / (1 << 20) as f64
    ));
    let peak = rss_loaded.hwm_kib.max(rss_loaded.rss_kib) / 1024.0;
    res.target(Target {
        name: "supervisor: RSS ≤ 4 MiB (VmHWM, after load)".into(),
        measured: format!("{peak:.2} MiB"),
        limit: "4 MiB".into(),
        ratio: peak / 4.0,
        met: peak <= 4.0,
    });
    let mib = stripped as f64 / (1 << 20) as f64;
    res.target(Target {
        name: "supervisor: binary ≤ 2 MiB stripped".into(),
        measured: format!("{mib:.2} MiB"),
        limit: "2 MiB".into(),
        ratio: mib / 2.0,
        met: mib <= 2.0,
    });
    res.phases.insert(
        "supervisor".into(),
        serde_json::json!({
            "round_trip": s.to_json(),
            "idle_loops": loops.to_json(),
            "ratios": ratios,
            "sequential": { "per_variant": n_seq, "blocks": seq.to_json(), "sup_ms": ts, "raw_ms": tr },
            "concurrent": { "m": m, "variants": conc.to_json() },
            "rss_kib": { "idle": rss_idle.rss_kib, "loaded": rss_loaded.rss_kib, "hwm": rss_loaded.hwm_kib },
            "binary_bytes": size,
            "stripped_bytes": stripped,
        }),
    );
    Ok(())
}

/// The idle pause of 7e's second mode, in milliseconds: about what a
/// worker of 7a sits idle between two of its calls while the other
/// variants run.
const IDLE_MS: u64 = 50;

/// 7e. `n` round trips per variant (the core, then each binding's worker)
/// and mode — back to back (`@0`) and each after `IDLE_MS` of sleep in the
/// calling process (`@idle`) — in 5 interleaved blocks. 7a times a
/// binding's call after its process sat idle while the other variants ran,
/// and the core's right after the bench's own work: this shows what the
/// idle pause costs each of them.
async fn idle_loops(ctx: &Ctx, sup: &Sandbox, workers: &mut [Worker], n: usize) -> Result<Samples> {
    let blocks = 5;
    let per = n.div_ceil(blocks).max(1);
    let mut s = Samples::default();
    // The bindings' workers (the MCP worker times one call at a time).
    let bindings: Vec<usize> = (0..workers.len())
        .filter(|&i| matches!(workers[i].name, "python_sup" | "go_sup"))
        .collect();
    let variants = 1 + bindings.len();
    eprintln!("odek-bench: 7e. back to back and after {IDLE_MS} ms idle ({per} × {blocks} per variant and mode)");
    for b in 0..blocks {
        for v in rotation(variants * 2, b) {
            let (who, idle) = (
                v / 2,
                Duration::from_millis(if v % 2 == 0 { 0 } else { IDLE_MS }),
            );
            let mode = if idle.is_zero() { "@0" } else { "@idle" };
            let times = if who == 0 {
                let mut t = Vec::with_capacity(per);
                for _ in 0..per {
                    if !idle.is_zero() {
                        tokio::time::sleep(idle).await;
                    }
                    let t0 = Instant::now();
                    odek_true(ctx, sup).await?;
                    t.push(t0.elapsed());
                }
                t
            } else {
                workers[bindings[who - 1]].exec_loop(per, idle).await?
            };
            let name = if who == 0 {
                "sup"
            } else {
                workers[bindings[who - 1]].name
            };
            for d in times {
                s.push(&format!("{name}{mode}"), d);
            }
        }
    }
    Ok(s)
}

/// Prints 7e's table and judges the 2 ms and core + 1 ms targets on the
/// back-to-back calls too (7a's verdicts stand beside them).
fn report_idle_loops(res: &mut Results, s: &Samples) {
    table95(
        res,
        &format!(
            "7e. round trip of `true` in each process: back to back, and after {IDLE_MS} ms idle"
        ),
        s,
        &[
            ("sup@0", "core, back to back"),
            ("python_sup@0", "Python binding, back to back"),
            ("go_sup@0", "Go binding, back to back"),
            ("sup@idle", "core, after idle"),
            ("python_sup@idle", "Python binding, after idle"),
            ("go_sup@idle", "Go binding, after idle"),
        ],
    );
    for (who, label) in [("sup", "core"), ("python_sup", "Python"), ("go_sup", "Go")] {
        let (b2b, idle) = (format!("{who}@0"), format!("{who}@idle"));
        if s.summary(&b2b).is_some() && s.summary(&idle).is_some() {
            res.line(format!(
                "  {label}: after idle / back to back {:.2}× (+{:.3} ms)",
                s.median(&idle) / s.median(&b2b),
                s.median(&idle) - s.median(&b2b)
            ));
        }
    }
    let core = s.median("sup@0");
    for (who, label) in [("python_sup", "Python"), ("go_sup", "Go")] {
        let key = format!("{who}@0");
        if s.summary(&key).is_none() {
            continue;
        }
        let m = s.median(&key);
        res.target(Target {
            name: format!("supervisor: {label} back to back ≤ 2 ms"),
            measured: format!("{m:.3} ms (p95 {:.3})", s.p95(&key)),
            limit: "2 ms".into(),
            ratio: m / 2.0,
            met: m <= 2.0,
        });
        res.target(Target {
            name: format!("supervisor: {label} back to back ≤ 1.05× (core + 1 ms)"),
            measured: format!("{m:.3} ms vs {core:.3} ms + 1"),
            limit: "1.05×".into(),
            ratio: m / (core + 1.0),
            met: m / (core + 1.0) <= 1.05,
        });
    }
}

/// Prints a table with the p95 beside the median (ms, 3 decimals).
fn table95(res: &mut Results, title: &str, s: &Samples, rows: &[(&str, &str)]) {
    res.line(format!("\n== {title}"));
    res.line(format!(
        "{:<44} {:>10} {:>10} {:>10} {:>10} {:>5}",
        "variant", "median ms", "p95 ms", "min ms", "max ms", "n"
    ));
    for (key, label) in rows {
        if let Some(x) = s.summary(key) {
            res.line(format!(
                "{:<44} {:>10.3} {:>10.3} {:>10.3} {:>10.3} {:>5}",
                label, x.median_ms, x.p95_ms, x.min_ms, x.max_ms, x.n
            ));
        }
    }
}

struct Rss {
    pid: u32,
    rss_kib: f64,
    hwm_kib: f64,
}

/// VmRSS and VmHWM of the supervisor's `serve` processes (its keeper and
/// server) in container `id`, summed, found by their host pids (`docker
/// top`); `pid` is the keeper's.
async fn supervisor_rss(id: &str) -> Result<Rss> {
    let top = docker(&["top", id, "-o", "pid,args"]).await?;
    // The keeper and its server (a fork: the same arguments); not
    // docker-init (pid 1), whose arguments name the supervisor too. Their
    // VmRSS and VmHWM are summed, which counts the binary's shared file
    // pages twice: an upper bound.
    let pids: Vec<u32> = top
        .lines()
        .filter(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            w.get(1) == Some(&odek_core::supervisor::SUPERVISOR_PATH) && w.get(2) == Some(&"serve")
        })
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect();
    let Some(&pid) = pids.first() else {
        bail!("no `odek-supervisor serve` in docker top of {id}: {top}");
    };
    let (mut rss_kib, mut hwm_kib) = (0.0, 0.0);
    for p in &pids {
        let status = std::fs::read_to_string(format!("/proc/{p}/status"))
            .with_context(|| format!("reading /proc/{p}/status"))?;
        let field = |k: &str| -> f64 {
            status
                .lines()
                .find_map(|l| l.strip_prefix(k))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse().ok())
                .unwrap_or(f64::NAN)
        };
        rss_kib += field("VmRSS:");
        hwm_kib += field("VmHWM:");
    }
    Ok(Rss {
        pid,
        rss_kib,
        hwm_kib,
    })
}

/// The supervisor binary's size as built and after `strip` (of a copy in
/// target/bench).
fn stripped_size(ctx: &Ctx) -> Result<(u64, u64)> {
    let bin = ctx.supervisor.as_ref().context("no supervisor")?;
    let size = std::fs::metadata(bin)?.len();
    let copy = ctx.out_dir.join("odek-supervisor.stripped");
    std::fs::copy(bin, &copy)?;
    let st = std::process::Command::new("strip")
        .arg(&copy)
        .status()
        .context("running strip (binutils)")?;
    if !st.success() {
        bail!("strip {} failed: {st}", copy.display());
    }
    let stripped = std::fs::metadata(&copy)?.len();
    let _ = std::fs::remove_file(&copy);
    Ok((size, stripped))
}
