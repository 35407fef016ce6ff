//! What odek reads of an image before it mounts anything into a container
//! made from it (SPEC §6.1 "user" and "Applied on every launch").
//!
//! The engine resolves a mount's target inside the container, following
//! the image's own symlinks, and creates a missing target: an image whose
//! `/tmp`, `/etc/passwd` or `/home` is a symlink into `/workspace` — which is
//! the operator's project, bind-mounted — would have the engine create
//! root-owned files and directories in the project before odek could check
//! anything, and an image `VOLUME` below `/workspace` does the same. So
//! before create, each component of every mount target outside
//! `/workspace` (and `/workspace` itself) must be absent or a real
//! directory — a file target (`/etc/passwd`, `/etc/group`) absent or a
//! regular file — and no image `VOLUME` may lie below `/workspace`.
//!
//! The image's paths (and, for a sandbox account, its `/etc/passwd` and
//! `/etc/group`) are read from a probe container: created from the image's
//! ID (never a tag another process could move), never started, no mounts,
//! no network, labelled and owned like a sandbox and removed at once; a
//! dropped launch removes it from a task ([`settle`] waits for those), and
//! `odek sandbox gc` reaps one that even this missed. What was read is kept
//! under `$ODEK_HOME/images/<image ID>.json` (an image ID names immutable
//! content), and the account's generated `passwd` and `group` (the image's
//! entries plus the account's line) under
//! `$ODEK_HOME/accounts/<image ID>-<uid>-<gid>/`, bind-mounted read-only:
//! nothing is written into the image or the container's layer, and the
//! host's own account files are never used. The same probe looks for the
//! image's notable tools ([`crate::image_tools`]). The Engine's archive calls cost
//! tens of milliseconds each on some storage drivers: a launch pays them
//! the first time an image is used, not again.

use crate::config::advice::Fix;
use std::collections::BTreeMap;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::account::{binds, files_dir, image_hex, Account, ACCOUNT_FILES, MAX_ACCOUNT_FILE};
use crate::engine::{BindMount, ContainerSpec, DockerApi, EngineErrorKind, ImageInfo};
use crate::error::{Error, Result};
use crate::failure::Step;
use crate::plan::Plan;

/// The largest `images/<ID>.json` odek reads back (bytes).
const MAX_FACTS_FILE: u64 = 1 << 20;

/// A path of an image's filesystem, as the probe saw it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum PathKind {
    Absent,
    Dir,
    File,
    Symlink { target: String },
    Other,
}

/// What odek knows of one image's paths (the cache file's content).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Facts {
    /// Path → kind, for every path a launch has needed.
    #[serde(default)]
    paths: BTreeMap<String, PathKind>,
}

/// Every path of the image whose kind decides whether `plan`'s mounts are
/// safe, with `true` where it may be a regular file (a file target): each
/// component of each target outside `/workspace`, and `/workspace` itself
/// (what lies below it is the operator's directory, checked on the host).
/// The supervisor's directory is among them whether or not this launch is
/// supervised: an image whose `/.odek` leads elsewhere could otherwise turn
/// the supervisor off (its bind then fails or lands in the project).
fn needed_paths(volume_targets: &[String], account: Option<&Account>) -> BTreeMap<String, bool> {
    let mut targets: Vec<(String, bool)> = vec![
        ("/workspace".into(), false),
        ("/tmp".into(), false),
        (crate::supervisor::SUPERVISOR_DIR.into(), false),
    ];
    targets.extend(volume_targets.iter().map(|v| (v.clone(), false)));
    if let Some(a) = account {
        targets.push((a.home.clone(), false));
        targets.extend(ACCOUNT_FILES.iter().map(|(_, t)| (t.to_string(), true)));
    }
    let mut out = BTreeMap::new();
    for (target, file) in targets {
        if target == "/workspace" || !target.starts_with("/workspace/") {
            let mut prefix = String::new();
            let parts: Vec<&str> = target.split('/').filter(|p| !p.is_empty()).collect();
            for (i, part) in parts.iter().enumerate() {
                prefix.push('/');
                prefix.push_str(part);
                let last = i + 1 == parts.len();
                let entry = out.entry(prefix.clone()).or_insert(false);
                *entry = *entry || (last && file);
            }
        }
    }
    out
}

/// Checks `plan`'s mount targets against the image `image_id` (reading it
/// through a probe the first time) and, for a plan with an account, makes
/// sure the account files exist; returns the account's binds.
///
/// Errors (docker-rejected, naming the path and the fix): a target or one
/// of its components is a symlink, or not a directory (a file target: not a
/// regular file); an image `VOLUME` lies below `/workspace`; the image's
/// account files are larger than [`MAX_ACCOUNT_FILE`]. The Engine failing
/// the probe (by class); the cache not writable (config).
pub(crate) async fn prepare(
    engine: &Arc<dyn DockerApi>,
    plan: &Plan,
    image: &ImageInfo,
    secret: &crate::secret::Secret,
) -> Result<Vec<BindMount>> {
    let image_id = image.id.as_str();
    let hex = image_hex(image_id).ok_or_else(|| Error::Rejected {
        fix: None,
        step: Step::Image,
        message: format!(
            "the engine reported the image ID {}, not sha256:<64 hex>",
            crate::text::quote(image_id)
        ),
        removal: None,
    })?;
    let facts_path = plan.odek_home.join("images").join(format!("{hex}.json"));
    let mut facts = read_facts(&facts_path);
    // The image's own VOLUMEs are mount targets too (cleaned as the engine
    // cleans them: `//workspace/x` is `/workspace/x`).
    let image_volumes: Vec<String> = image.volumes.iter().map(|v| clean(v)).collect();
    check_volumes(&image_volumes)?;
    let mut volume_targets: Vec<String> =
        plan.volumes.iter().map(|v| v.container.clone()).collect();
    volume_targets.extend(image_volumes);
    let needed = needed_paths(&volume_targets, plan.account.as_ref());
    let account_dir = plan
        .account
        .as_ref()
        .and_then(|a| files_dir(&plan.odek_home, image_id, a));
    let account_missing = |d: &Option<PathBuf>| {
        d.as_ref()
            .is_some_and(|d| !ACCOUNT_FILES.iter().all(|(n, _)| d.join(n).is_file()))
    };
    // The notable tools are looked for by the same probe (what the agent
    // is told, SPEC §9.1); they decide nothing here.
    let tools = crate::image_tools::paths();
    let unknown = |facts: &Facts| -> Vec<String> {
        needed
            .keys()
            .chain(tools.iter())
            .filter(|p| !facts.paths.contains_key(*p))
            .cloned()
            .collect()
    };
    let mut account_files = None;
    // `_lock` is held until the cache is written and the account published.
    let mut _lock = None;
    if !unknown(&facts).is_empty() || account_missing(&account_dir) {
        // Launches of one image at once (an agent framework's sub-agents)
        // probe it once: the others wait for the first and read its cache.
        _lock = lock_image(&plan.odek_home, hex).await;
        facts = read_facts(&facts_path);
        let (unknown, missing) = (unknown(&facts), account_missing(&account_dir));
        if !unknown.is_empty() || missing {
            let read = probe(engine, plan, image_id, &unknown, missing, secret).await?;
            facts.paths.extend(read.paths);
            account_files = read.account_files;
            // Best effort: a cache that cannot be written costs a probe next time.
            let _ = write_facts(&facts_path, &facts);
        }
    }
    check(&facts, &needed, plan)?;
    if let (Some(a), Some(dir), Some((passwd, group))) =
        (&plan.account, &account_dir, account_files)
    {
        publish(
            dir,
            &[
                ("passwd", a.passwd(passwd.as_deref())),
                ("group", a.group(group.as_deref())),
            ],
        )?;
    }
    Ok(binds(&plan.odek_home, image_id, plan.account.as_ref()))
}

/// The refusal of an image whose layout would have the engine write into
/// the project, or give the account nowhere to go.
fn refuse(why: String) -> Error {
    Error::Rejected {
        fix: None,
        step: Step::Image,
        message: format!(
            "{why}: the engine would follow it while it mounts into the container, and may create files in your project (/workspace) before anything could be checked; use another image"
        ),
        removal: Some(crate::error::Removal::Removed),
    }
}

/// Applies the rules of the module doc to what is known of the image.
fn check(facts: &Facts, needed: &BTreeMap<String, bool>, plan: &Plan) -> Result<()> {
    let q = crate::text::quote;
    for (path, file) in needed {
        match facts.paths.get(path) {
            Some(PathKind::Absent) | None => {}
            Some(PathKind::Dir) if !*file => {}
            Some(PathKind::File) if *file => {}
            Some(PathKind::Symlink { target }) => {
                return Err(refuse(format!(
                    "the image's {} is a symlink (to {})",
                    q(path),
                    q(target)
                )))
            }
            Some(_) => {
                let want = if *file {
                    "a regular file"
                } else {
                    "a directory"
                };
                let why = format!("the image's {} is not {want}", q(path));
                return Err(match &plan.account {
                    Some(a) if *file || path.starts_with(&a.home) => Error::Rejected {
                        fix: Some(Fix::ImageOrUser),
                        step: Step::Image,
                        message: format!(
                            "the sandbox user (uid {}) needs an account in the image's /etc/passwd and a HOME at {}, but {why}; ",
                            a.uid, a.home
                        ),
                        removal: Some(crate::error::Removal::Removed),
                    },
                    _ => refuse(why),
                });
            }
        }
    }
    Ok(())
}

use crate::config::hostpath::clean_container_path as clean;

/// No image `VOLUME` below `/workspace` (the engine would create its mount
/// point in the project); `volumes` are [`clean`].
fn check_volumes(volumes: &[String]) -> Result<()> {
    match volumes.iter().find(|v| v.starts_with("/workspace/")) {
        Some(v) => Err(refuse(format!(
            "the image declares VOLUME {}, below /workspace",
            crate::text::quote(v)
        ))),
        None => Ok(()),
    }
}

/// The image's `/etc/passwd` and `/etc/group` (`None`: absent or not a
/// regular file).
type AccountFiles = (Option<Vec<u8>>, Option<Vec<u8>>);

/// What a probe read.
struct Probed {
    paths: BTreeMap<String, PathKind>,
    /// The image's `/etc/passwd` and `/etc/group`, when asked for.
    account_files: Option<AccountFiles>,
}

/// Reads `paths` (and, with `account`, the image's account files) from a
/// container created from `image_id` and removed again.
async fn probe(
    engine: &Arc<dyn DockerApi>,
    plan: &Plan,
    image_id: &str,
    paths: &[String],
    account: bool,
    secret: &crate::secret::Secret,
) -> Result<Probed> {
    let endpoint = engine.endpoint().to_string();
    let failed = |e| Error::engine(&endpoint, Step::Image, e);
    let name = format!("{}-probe", super::new_sandbox_name());
    let launch_id = super::new_launch_id();
    let mut labels: BTreeMap<String, String> = crate::labels::Owner::current().labels();
    labels.insert(crate::labels::SANDBOX.to_string(), "true".to_string());
    labels.insert(crate::labels::PROBE.to_string(), "image".to_string());
    labels.insert(crate::labels::LAUNCH.to_string(), launch_id.clone());
    // Found with the project's sandboxes (`odek sandbox gc --workdir`).
    labels.insert(
        crate::labels::WORKDIR.to_string(),
        plan.workdir.display().to_string(),
    );
    labels.insert(
        crate::labels::CREATED.to_string(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0)
            .to_string(),
    );
    crate::labels::sign(secret, &name, None, &mut labels);
    // Never started: no seccomp profile, init or limits are needed; no
    // mounts and no network, so reading it touches nothing of the host.
    let spec = ContainerSpec {
        name: name.clone(),
        image: image_id.to_string(),
        cmd: vec!["true".into()],
        entrypoint: None,
        cap_add: Vec::new(),
        log_driver: None,
        no_healthcheck: false,
        env: Vec::new(),
        working_dir: "/".into(),
        user: None,
        labels,
        network_mode: "none".into(),
        init: false,
        pids_limit: 1,
        cap_drop: vec!["ALL".into()],
        security_opt: vec!["no-new-privileges".into()],
        tmpfs: Vec::new(),
        binds: Vec::new(),
        memory_bytes: None,
        nano_cpus: None,
        runtime: None,
        open_stdin: false,
        stdin_once: false,
        auto_remove: false,
        dns: Vec::new(),
        readonly_rootfs: false,
    };
    // The create runs on a task of its own, so that its answer is never
    // lost: a launch dropped from here on (a signal, a cancellation)
    // removes the probe from a task, by the ID that answer gives (or by
    // its name and launch ID when the answer was an error: a lost answer
    // may still have made it), without waiting out a create that was never
    // sent.
    let create = tokio::spawn({
        let (engine, spec) = (engine.clone(), spec.clone());
        async move { engine.create_container(&spec).await }
    });
    let mut guard = ProbeGuard {
        engine: engine.clone(),
        name: name.clone(),
        launch_id: launch_id.clone(),
        create: Some(create),
        id: None,
        done: false,
    };
    let answer = match guard.create.as_mut() {
        Some(create) => create.await,
        None => unreachable!("set just above"),
    };
    guard.create = None;
    let created = match answer {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => {
            guard.done = true;
            // A lost answer may still have made it.
            let _ =
                crate::inventory::reap(engine.as_ref(), &name, &launch_id, Duration::ZERO).await;
            return Err(failed(e));
        }
        Err(join) => {
            // The task panicked or the runtime is shutting down: the guard
            // reaps by name, waiting out a create that may be in flight.
            return Err(Error::Usage(format!(
                "the image probe's create did not finish: {join}"
            )));
        }
    };
    guard.id = Some(created.id.clone());
    let stats =
        futures_util::future::join_all(paths.iter().map(|p| engine.stat_path(&created.id, p)));
    let files = async {
        if account {
            let (p, g) = tokio::join!(
                engine.read_file(&created.id, "/etc/passwd", MAX_ACCOUNT_FILE),
                engine.read_file(&created.id, "/etc/group", MAX_ACCOUNT_FILE),
            );
            Some((p, g))
        } else {
            None
        }
    };
    let (stats, files) = tokio::join!(stats, files);
    let removed = engine.remove_container(&created.id).await;
    guard.done = true;
    let mut kinds = BTreeMap::new();
    for (p, st) in paths.iter().zip(stats) {
        let kind = match st.map_err(failed)? {
            None => PathKind::Absent,
            Some(st) if st.is_symlink => PathKind::Symlink {
                target: st.link_target,
            },
            Some(st) if st.is_dir => PathKind::Dir,
            Some(st) if st.is_regular => PathKind::File,
            Some(_) => PathKind::Other,
        };
        kinds.insert(p.clone(), kind);
    }
    let big = |e: crate::engine::EngineError| match e.kind {
        EngineErrorKind::Rejected if e.status.is_none() => Error::Rejected {
            fix: Some(Fix::ImageOrUser),
            step: Step::Image,
            message: format!(
                "the image's account files are larger than {MAX_ACCOUNT_FILE} bytes; "
            ),
            removal: Some(crate::error::Removal::Removed),
        },
        _ => failed(e),
    };
    let account_files = match files {
        Some((p, g)) => Some((p.map_err(big)?, g.map_err(big)?)),
        None => None,
    };
    removed.map_err(failed)?;
    Ok(Probed {
        paths: kinds,
        account_files,
    })
}

/// How many removals of abandoned probes are still running, for
/// [`settle`]: a count every waiter watches, rather than a list one waiter
/// takes, so that of two launches stopped at once neither returns while
/// the other's probe — or its own — is still being removed.
static PENDING: std::sync::LazyLock<tokio::sync::watch::Sender<usize>> =
    std::sync::LazyLock::new(|| tokio::sync::watch::Sender::new(0));

/// One running removal in [`PENDING`]: counted from its spawn to its end,
/// whichever way it ends (finished, or dropped with its runtime).
struct Pending;

impl Pending {
    fn start() -> Pending {
        PENDING.send_modify(|n| *n += 1);
        Pending
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        PENDING.send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// Waits up to `budget` for the removal of probes whose launch was dropped
/// (a front end calls it before it exits after an interrupt, so none is
/// left for gc; a stopped launch, before it says it ended). Returns how
/// many did not finish in time.
pub async fn settle(budget: Duration) -> usize {
    let mut rx = PENDING.subscribe();
    let drained = tokio::time::timeout(budget, async {
        let _ = rx.wait_for(|n| *n == 0).await;
    })
    .await;
    match drained {
        Ok(()) => 0,
        Err(_) => *PENDING.borrow(),
    }
}

/// Removes a probe container whose launch was abandoned (its future
/// dropped), on a task of the current runtime ([`settle`] waits for it).
struct ProbeGuard {
    engine: Arc<dyn DockerApi>,
    name: String,
    launch_id: String,
    /// The create's task while its answer has not been read.
    create:
        Option<tokio::task::JoinHandle<Result<crate::engine::Created, crate::engine::EngineError>>>,
    id: Option<String>,
    done: bool,
}

impl Drop for ProbeGuard {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let engine = self.engine.clone();
        let (name, launch_id, mut id) = (self.name.clone(), self.launch_id.clone(), self.id.take());
        let create = self.create.take();
        let pending = Pending::start();
        rt.spawn(async move {
            let _pending = pending;
            if let Some(create) = create {
                // The create's own answer, as soon as it comes (at most
                // CREATE_SETTLE): its ID, or no container at all.
                match tokio::time::timeout(crate::inventory::CREATE_SETTLE, create).await {
                    Ok(Ok(Ok(c))) => id = Some(c.id),
                    Ok(Ok(Err(_))) => {
                        // A lost answer may still have made it.
                        let _ = crate::inventory::reap(
                            engine.as_ref(),
                            &name,
                            &launch_id,
                            Duration::ZERO,
                        )
                        .await;
                        return;
                    }
                    Ok(Err(_)) | Err(_) => {}
                }
            }
            match id {
                Some(id) => {
                    let _ = engine.remove_container(&id).await;
                }
                None => {
                    let _ = crate::inventory::reap(
                        engine.as_ref(),
                        &name,
                        &launch_id,
                        crate::inventory::CREATE_SETTLE,
                    )
                    .await;
                }
            }
        });
    }
}

/// How long a launch waits for another process probing the same image
/// before it probes the image itself.
const PROBE_LOCK_WAIT: Duration = Duration::from_secs(30);

/// An exclusive lock on `$ODEK_HOME/images/<hex>.lock`, taken without
/// blocking a thread (polled, so a cancelled launch stops waiting at once).
/// `None` when the lock cannot be had: the file cannot be opened (the
/// launch then probes on its own; the cache is written atomically, so two
/// probes of one image only cost time) or another process held it for
/// [`PROBE_LOCK_WAIT`].
async fn lock_image(odek_home: &Path, hex: &str) -> Option<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let dir = odek_home.join("images");
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .ok()?;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(dir.join(format!("{hex}.lock")))
        .ok()?;
    let deadline = tokio::time::Instant::now() + PROBE_LOCK_WAIT;
    loop {
        match file.try_lock() {
            Ok(()) => return Some(file),
            Err(std::fs::TryLockError::WouldBlock) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            Err(_) => return None,
        }
    }
}

/// The facts cached for an image; empty when there are none or they do
/// not read back (a probe reads them again).
fn read_facts(path: &Path) -> Facts {
    let read = || -> Option<Facts> {
        let meta = std::fs::symlink_metadata(path).ok()?;
        if !meta.is_file() || meta.len() > MAX_FACTS_FILE {
            return None;
        }
        serde_json::from_slice(&std::fs::read(path).ok()?).ok()
    };
    read().unwrap_or_default()
}

/// Writes the facts of an image atomically (temp file + rename) in a
/// private directory.
fn write_facts(path: &Path, facts: &Facts) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(path);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".facts-")
        .tempfile_in(dir)?;
    serde_json::to_writer(&mut tmp, facts)?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// Writes `files` into `dir` all at once: a private temporary directory
/// next to it, renamed into place (a racing launch that published first
/// wins, and its files are the same).
fn publish(dir: &Path, files: &[(&str, Vec<u8>)]) -> Result<()> {
    let fail = |what: &str, e: std::io::Error| {
        Error::Config(crate::config::ConfigError::Unreadable {
            path: dir.to_path_buf(),
            reason: format!(
                "cannot {what} the sandbox account's files: {e}; check that $ODEK_HOME is writable"
            ),
        })
    };
    let parent = dir.parent().unwrap_or(dir);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(parent)
        .map_err(|e| fail("create the directory of", e))?;
    let tmp = tempfile::Builder::new()
        .prefix(".account-")
        .tempdir_in(parent)
        .map_err(|e| fail("create", e))?;
    // The daemon (root, or the rootless daemon's user) reads them.
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755))
        .map_err(|e| fail("create", e))?;
    for (name, content) in files {
        let p = tmp.path().join(name);
        std::fs::write(&p, content).map_err(|e| fail("write", e))?;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644))
            .map_err(|e| fail("write", e))?;
    }
    let tmp = tmp.keep();
    match std::fs::rename(&tmp, dir) {
        Ok(()) => Ok(()),
        Err(_) if ACCOUNT_FILES.iter().all(|(n, _)| dir.join(n).is_file()) => {
            let _ = std::fs::remove_dir_all(&tmp);
            Ok(())
        }
        Err(e) => {
            let _ = std::fs::remove_dir_all(&tmp);
            Err(fail("publish", e))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn volume_paths_are_cleaned_as_the_engine_cleans_them() {
        assert_eq!(clean("//workspace/PWN"), "/workspace/PWN");
        assert_eq!(clean("/x/./y/../z/"), "/x/z");
        assert_eq!(clean("/../workspace/a"), "/workspace/a");
        assert!(check_volumes(&[clean("//workspace/PWN")]).is_err());
        assert!(check_volumes(&[clean("/data")]).is_ok());
    }

    #[test]
    fn needed_paths_are_every_component_outside_the_workspace() {
        let account = Account::for_ids(1000, 1000);
        let n = needed_paths(
            &["/root/.cache".into(), "/workspace/d".into()],
            account.as_ref(),
        );
        let keys: Vec<&str> = n.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "/.odek",
                "/etc",
                "/etc/group",
                "/etc/passwd",
                "/home",
                "/home/odek",
                "/root",
                "/root/.cache",
                "/tmp",
                "/workspace"
            ]
        );
        assert!(n["/etc/passwd"] && n["/etc/group"] && !n["/etc"] && !n["/home/odek"]);
    }
}
