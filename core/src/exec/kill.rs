//! The kill of a command that outlived its timeout or was cancelled, in a
//! sandbox: a second, short exec of [`KILL_SCRIPT`] (`kill.sh`) finds the
//! command's processes by the tag in their environment and SIGKILLs them.

use std::time::Duration;

use rand::Rng;

use crate::engine::{ExecSpec, StreamKind};

use super::EXEC_TAG_ENV;

/// Environment variable set (with a random value) on odek's own kill exec
/// only, so the kill can check that `cat` shows environments truthfully.
pub const KILL_PROBE_ENV: &str = "ODEK_KILL_PROBE";

/// How long the kill of a timed-out or cancelled command may take.
pub(super) const KILL_BUDGET: Duration = Duration::from_secs(5);

/// The script of the kill exec: `$1` is `ODEK_EXEC_ID=<tag>`, `$2` the mode,
/// `$3` `ODEK_KILL_PROBE=<hex>` (set in the script's own environment), `$4`
/// the command's age in whole seconds plus 2.
///
/// Each pass reads every process's parent (`/proc/<pid>/stat`) and
/// environment, and takes as the command's ("ours") every process whose
/// environment holds the tag plus, transitively, their children — so a
/// child that rewrote its environment (a process title, `env -i`) or whose
/// environment cannot be read is still found while its parent is. PID 1
/// (docker-init) and the sandbox's idle process (`cat`,
/// [`crate::verify::IDLE_CMD`]: untagged, docker-init's child, command line
/// exactly `cat`, and the child of docker-init that started first — a copy
/// of a shell the command names `cat` and orphans is a stranger) are never
/// taken: killing it would end the sandbox.
/// "Strangers" are processes without any `ODEK_EXEC_ID` that started
/// within the last `$4` seconds (from `/proc/uptime` and the process's
/// start time at 100 ticks a second) and whose parent is outside the
/// container (PPid 0: an exec's own process) or docker-init (PPid 1: an
/// orphan): a command's process that rewrote its environment and left its
/// parent cannot be told from another program's. A tag that is not 32
/// lowercase hex (`ODEK_EXEC_ID=x`) counts as none. Processes not ours
/// whose environment cannot be read are "unreadable".
///
/// `kill`: up to five passes; each SIGSTOPs a tagged process as soon as
/// it reads it (it can fork no more during the scan) and the rest of ours
/// after the scan, then SIGKILLs them together, so no process of the
/// command runs again once one of them died (a shell woken by its child's
/// death would run its next step); a pass finds children forked during the
/// one before. Exits 0 once a pass finds none, 1 when processes kept
/// appearing.
/// `count`: prints `<ours> <unreadable> <strangers>` — processes still ours,
/// live ones whose environment could not be read, and strangers — and
/// exits 0.
/// `main`: prints `<main> <strangers>`: main is `1` when the command's own
/// process still runs (one of ours with PPid 0), else `0`.
/// Exits 3 without `cat`; 4 when `cat` does not show the probe in the
/// script's own environment (a `cat` the command replaced would make every
/// scan see nothing); a shell that cannot fork (pids limit exhausted) exits 2.
///
/// The script lives in `kill.sh` (checked by shellcheck in `cargo xtask lint`).
const KILL_SCRIPT: &str = include_str!("kill.sh");

/// Why a kill cannot be trusted when `cat` does not show the probe.
const UNTRUSTED_CAT: &str =
    "cat in the sandbox does not show process environments (was it replaced?), so the command's processes cannot be found";

/// Kill rounds (kill, then count) before odek gives up.
const KILL_ROUNDS: usize = 3;

pub(super) fn new_exec_tag() -> String {
    let b: [u8; 16] = rand::rng().random();
    hex::encode(b)
}

/// SIGKILLs every process in the container whose environment holds `tag`
/// (`ODEK_EXEC_ID=<hex>`) and checks that none is left: up to
/// [`KILL_ROUNDS`] rounds of a kill exec, a pause, and a count exec. Errors
/// name why the kill did not happen or could not be confirmed.
pub(super) async fn kill_tagged(
    engine: &dyn crate::engine::DockerApi,
    id: &str,
    tag: &str,
    started: tokio::time::Instant,
) -> std::result::Result<(), String> {
    let mut left = 0;
    for _ in 0..KILL_ROUNDS {
        match run_kill_script(engine, id, tag, "kill", started).await?.0 {
            0 | 1 => {}
            2 => {
                return Err(
                    "the kill could not fork; the sandbox's pids limit may be exhausted".into(),
                )
            }
            3 | 126 | 127 => return Err("the image has no /bin/sh or cat to run the kill".into()),
            4 => return Err(UNTRUSTED_CAT.into()),
            code => return Err(format!("the kill exited with status {code}")),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        let (code, out) = run_kill_script(engine, id, tag, "count", started).await?;
        let counts: Vec<u64> = out
            .split_whitespace()
            .filter_map(|n| n.parse().ok())
            .collect();
        match (code, counts.as_slice()) {
            (0, [0, 0, 0]) => return Ok(()),
            (0, [0, 0, strangers]) => {
                return Err(format!(
                    "{strangers} process(es) started by an exec carry no {EXEC_TAG_ENV} tag, so the kill cannot be confirmed: a command that rewrote its environment (as programs that set their process title do) cannot be told from another program's"
                ))
            }
            (0, [0, unread, _]) => {
                return Err(format!(
                    "{unread} process(es) in the sandbox could not be checked for its tag"
                ))
            }
            (0, [n, _, _]) => left = *n,
            (2, _) => {
                return Err(
                    "the check could not fork; the sandbox's pids limit may be exhausted".into(),
                )
            }
            (3 | 126 | 127, _) => {
                return Err("the image has no /bin/sh or cat to run the kill".into())
            }
            (4, _) => return Err(UNTRUSTED_CAT.into()),
            _ => {
                return Err(format!(
                    "the check exited with status {code} and printed {:?}",
                    out.trim()
                ))
            }
        }
    }
    Err(format!(
        "{left} of its processes still run after {KILL_ROUNDS} kill rounds (it keeps forking)"
    ))
}

/// True only when the check ran and found the command's own process gone
/// and no untagged exec process that could be it (see [`KILL_SCRIPT`]'s
/// `main` mode); any doubt counts as still running.
pub(super) async fn main_has_exited(
    engine: &dyn crate::engine::DockerApi,
    id: &str,
    tag: &str,
    started: tokio::time::Instant,
) -> bool {
    let check = tokio::time::timeout(
        KILL_BUDGET,
        run_kill_script(engine, id, tag, "main", started),
    );
    // "0 0": no process of the command started by the exec, and no exec
    // process without a tag that could be the command under another name.
    matches!(check.await, Ok(Ok((0, out))) if out.split_whitespace().eq(["0", "0"]))
}

/// Runs [`KILL_SCRIPT`] in `mode`; returns its exit code and stdout.
async fn run_kill_script(
    engine: &dyn crate::engine::DockerApi,
    id: &str,
    tag: &str,
    mode: &str,
    started: tokio::time::Instant,
) -> std::result::Result<(i64, String), String> {
    // Whole seconds since the command started, plus slack for the clocks.
    let recent = (started.elapsed().as_secs() + 2).to_string();
    let probe = format!("{KILL_PROBE_ENV}={}", new_exec_tag());
    let spec = ExecSpec {
        cmd: vec![
            "/bin/sh".into(),
            "-c".into(),
            KILL_SCRIPT.into(),
            "odek-kill".into(),
            tag.into(),
            mode.into(),
            probe.clone(),
            recent,
        ],
        env: vec![probe],
        working_dir: Some("/".into()),
        user: None,
    };
    let out = std::sync::Mutex::new(Vec::new());
    let collect = |k: StreamKind, b: &[u8]| {
        if k == StreamKind::Stdout {
            if let Ok(mut o) = out.lock() {
                o.extend_from_slice(b);
            }
        }
    };
    let exit = engine
        .exec(id, &spec, &collect)
        .await
        .map_err(|e| e.to_string())?;
    let text =
        String::from_utf8_lossy(&out.lock().map(|o| o.clone()).unwrap_or_default()).into_owned();
    Ok((exit.code.unwrap_or(-1), text))
}

#[cfg(test)]
mod tests {
    use super::KILL_SCRIPT;
    use crate::verify::IDLE_CMD;

    #[test]
    fn the_kill_script_spares_the_idle_process_by_its_command_line() {
        // `$(cat /proc/<pid>/cmdline)` drops the NUL separators.
        let pattern = format!("in {}) k=c$start ;;", IDLE_CMD.concat());
        assert!(
            KILL_SCRIPT.contains(&pattern),
            "the kill script does not recognize the idle process {IDLE_CMD:?}"
        );
    }
}
