//! Finding sandboxes again: attach by name, list, and reap the ones whose
//! owner process is gone (`odek sandbox gc`).
//!
//! Only containers whose labels carry a valid MAC under this user's launch
//! key ([`labels::verified`]) count as this user's sandboxes: the others are
//! listed as unverified, never removed by gc, and refused by attach.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::client::Client;
use crate::engine::{DockerApi, EngineErrorKind, NetworkFilter};
use crate::error::{Error, NotASandbox, NotFound, Result};
use crate::failure::Step;
use crate::labels;
use crate::plan::{Isolation, Plan};
use crate::sandbox::{Sandbox, SANDBOX_SCHEMA};
use crate::verify::verify;

/// What [`Client::reap_named`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reaped {
    /// The container existed and was removed.
    Removed,
    /// No such container appeared within the wait.
    Absent,
    /// A container of that name exists, but another launch created it (its
    /// [`labels::LAUNCH`] differs): it was left alone.
    NotOurs,
    /// The daemon could not be asked (the message says why): the container
    /// may exist; `odek sandbox gc` reaps it once the owner is gone.
    Failed(String),
}

/// How long an interrupted or cancelled launch waits for the answer to a
/// create request already on its way, so that it knows whether a container
/// exists (the CLI's signal path, cancellation, an abandoned image probe).
pub const CREATE_SETTLE: std::time::Duration = std::time::Duration::from_secs(10);

/// How long a stopped launch (the CLI's signal path, a cancelled launch of
/// the C ABI or MCP) waits for the removal of an image probe it had made
/// before it returns: as long as the probe's own removal may look for a
/// create still on its way ([`CREATE_SETTLE`]), so that nothing is left
/// when the process exits right after; the wait ends as soon as the
/// removal does.
pub const PROBE_SETTLE: std::time::Duration = CREATE_SETTLE;

/// [`CREATE_SETTLE`] as documents say it: `"10 s"`.
pub fn create_settle_text() -> String {
    format!("{} s", CREATE_SETTLE.as_secs())
}

/// Removes the container named `name` if the launch `launch_id` created it
/// (its [`labels::LAUNCH`] label), looking again every 250 ms for up to
/// `wait` while no container has the name (a create still in flight).
/// Removal is by the ID found, so a container that takes the name later is
/// never touched.
pub(crate) async fn reap(
    engine: &dyn DockerApi,
    name: &str,
    launch_id: &str,
    wait: Duration,
) -> Reaped {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        match engine.inspect_container(name).await {
            Ok(Some(c)) if c.labels.get(labels::LAUNCH).map(String::as_str) == Some(launch_id) => {
                let reaped = match engine.remove_container(&c.id).await {
                    Ok(_) => Reaped::Removed,
                    Err(e) if e.is_unreachable() => Reaped::Failed(e.to_string()),
                    // Refused mid-way: the daemon is removing it itself
                    // (its owner's attachment closed when the launch was
                    // dropped, and AutoRemove runs). One more try, then a
                    // container gone within a moment counts as removed —
                    // the caller is told only once it is.
                    Err(e) => {
                        tokio::time::sleep(Duration::from_millis(250)).await;
                        if engine.remove_container(&c.id).await.is_ok()
                            || gone_within(engine, &c.id, Duration::from_secs(2)).await
                        {
                            Reaped::Removed
                        } else {
                            Reaped::Failed(e.to_string())
                        }
                    }
                };
                if reaped == Reaped::Removed {
                    // SPEC §4.4: its link network goes with it.
                    crate::link::release(engine, name, None).await;
                }
                return reaped;
            }
            Ok(Some(_)) => return Reaped::NotOurs,
            Ok(None) if tokio::time::Instant::now() >= deadline => return Reaped::Absent,
            Ok(None) => tokio::time::sleep(Duration::from_millis(250)).await,
            Err(e) => return Reaped::Failed(e.to_string()),
        }
    }
}

/// True once container `id` is gone, looking every 100 ms for up to `wait`.
async fn gone_within(engine: &dyn DockerApi, id: &str, wait: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        if matches!(engine.inspect_container(id).await, Ok(None)) {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One odek container as `odek sandbox ls` shows it. Every string is as
/// the engine gave it: untrusted, to be made terminal-safe before printing
/// ([`crate::text::shown`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Listing {
    /// Container name.
    pub name: String,
    /// Full container ID.
    pub id: String,
    /// Engine state (`running`, `exited`, …).
    pub state: String,
    /// True when its labels carry a valid MAC under this user's launch key
    /// ([`labels::verified`]): only then is it this user's sandbox, and the
    /// fields below come from labels odek wrote. When false they are shown
    /// as found, `owner_gone` is `None`, and gc never removes it.
    pub verified: bool,
    /// Creation time, Unix seconds.
    pub created: Option<u64>,
    /// Started by `odek sandbox up` (outlives its creator).
    pub detached: bool,
    /// Owner PID of an ephemeral sandbox.
    pub owner_pid: Option<u32>,
    /// `Some(true)` when the owner is proven gone (gc removes it),
    /// `Some(false)` when it is seen alive, `None` when this process cannot
    /// tell (another host or PID namespace, unverified) — gc keeps it.
    pub owner_gone: Option<bool>,
    /// Working directory mounted at `/workspace`.
    pub workdir: Option<String>,
    /// Parent sandbox of a narrowed child.
    pub parent: Option<String>,
    /// A probe odek made to read an image (never started; removed at once
    /// by its launch, or by gc once its owner is gone), SPEC §6.1. Only from
    /// a verified label.
    #[serde(default)]
    pub probe: bool,
    /// A ready sandbox of a warm pool (`odek_core::pool::Pool`): its verified
    /// [`labels::POOL`] label, and no claim recorded for it under this
    /// `$ODEK_HOME` (`odek_core::pool::claimed`). `odek pool down` removes it.
    #[serde(default)]
    pub pool: bool,
    /// Names of the networks it reaches, sorted: for a sandbox on its own
    /// link network (SPEC §4.4) the networks its plan attached, whose
    /// containers are connected to it; else the networks the engine lists
    /// it on (names anyone can choose; shown terminal-safe).
    #[serde(default)]
    pub networks: Vec<String>,
    /// The Compose projects (`com.docker.compose.project`) of those
    /// networks, sorted. A sandbox of an earlier release, attached to a
    /// project's networks themselves, keeps `docker compose down` from
    /// removing them ("network … has active endpoints"); one on its link
    /// network does not.
    #[serde(default)]
    pub compose_projects: Vec<String>,
    /// [`Listing::networks`] come from the plan (a link network's sandbox).
    #[serde(skip)]
    planned: bool,
}

impl Listing {
    /// True when `odek sandbox gc` removes it (with `detached`: `--detached`).
    pub fn gc_able(&self, detached: bool) -> bool {
        self.verified && (self.owner_gone == Some(true) || (detached && self.detached))
    }
}

fn listing(
    id: String,
    name: String,
    state: String,
    l: &BTreeMap<String, String>,
    verified: bool,
    odek_home: &Path,
) -> Listing {
    let detached = l.get(labels::DETACHED).map(String::as_str) == Some("true");
    Listing {
        verified,
        created: l.get(labels::CREATED).and_then(|c| c.parse().ok()),
        detached,
        owner_pid: l.get(labels::OWNER_PID).and_then(|p| p.parse().ok()),
        owner_gone: if detached || !verified {
            None
        } else {
            labels::owner_gone(l)
        },
        workdir: l.get(labels::WORKDIR).cloned(),
        parent: l.get(labels::PARENT).cloned(),
        probe: verified && l.contains_key(labels::PROBE),
        pool: verified && l.contains_key(labels::POOL) && !crate::claims::claimed(odek_home, &id),
        name,
        id,
        state,
        networks: Vec::new(),
        compose_projects: Vec::new(),
        planned: false,
    }
}

impl Listing {
    /// This listing with the networks the engine lists it on, or, for a
    /// sandbox on its link network whose (verified) labels hold its plan,
    /// the plan's networks and their Compose projects (SPEC §4.4).
    fn with_networks(
        mut self,
        networks: Vec<String>,
        labels: Option<&BTreeMap<String, String>>,
    ) -> Listing {
        let link = crate::labels::link_name(&self.name);
        let plan: Option<Plan> = labels
            .filter(|_| networks.contains(&link))
            .and_then(|l| l.get(labels::PLAN))
            .and_then(|p| serde_json::from_str(p).ok());
        match plan {
            Some(p) => {
                let mut names: Vec<String> = p.networks.iter().map(|n| n.name.clone()).collect();
                names.sort();
                let mut projects: Vec<String> = p
                    .networks
                    .iter()
                    .filter_map(|n| n.compose_project.clone())
                    .collect();
                projects.sort();
                projects.dedup();
                self.networks = names;
                self.compose_projects = projects;
                self.planned = true;
            }
            None => self.networks = networks,
        }
        self
    }
}

/// What `odek sandbox gc` removes. Build with [`GcOptions::new`] and set
/// fields (more may come).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GcOptions {
    /// `$ODEK_HOME` whose launch key marks this user's sandboxes.
    pub odek_home: PathBuf,
    /// Also remove detached sandboxes (`odek sandbox up`) — this user's only.
    pub detached: bool,
    /// Only sandboxes whose (MAC-verified) `dev.odek.workdir` label is this
    /// directory (canonical, as odek labels it); `None` = every workdir.
    /// Never widens the sweep beyond this user's sandboxes.
    pub workdir: Option<PathBuf>,
    /// Remove nothing: return what would be removed.
    pub dry_run: bool,
}

impl GcOptions {
    /// True when gc with these options removes `l`: [`Listing::gc_able`] and, with a
    /// `workdir`, labelled with it.
    pub(crate) fn selects(&self, l: &Listing) -> bool {
        l.gc_able(self.detached)
            && self
                .workdir
                .as_ref()
                .is_none_or(|w| l.workdir.as_deref() == Some(w.display().to_string().as_str()))
    }

    /// Ephemeral sandboxes of `odek_home` whose owner is proven gone, in
    /// every workdir, removed.
    pub fn new(odek_home: impl Into<PathBuf>) -> GcOptions {
        GcOptions {
            odek_home: odek_home.into(),
            ..GcOptions::default()
        }
    }
}

/// What [`Client::gc_report`] removed (with [`GcOptions::dry_run`]: would
/// remove). Names are as the engine gave them: untrusted, to be made
/// terminal-safe before printing ([`crate::text::shown`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GcReport {
    /// The sandboxes removed.
    pub sandboxes: Vec<String>,
    /// The link networks removed (SPEC §4.4): those of the sandboxes
    /// removed, and those whose sandbox is gone — signed by this user's
    /// odek, named after their sandbox, owner gone (with a dry run only
    /// the latter are named).
    pub networks: Vec<String>,
    /// Networks labelled as a link network (`dev.odek.link`) whose labels
    /// this user's launch key did not sign (another user's, an earlier
    /// release's, or forged): left alone.
    pub networks_left: Vec<String>,
}

/// How a sandbox found by name is checked ([`Client::attach`], [`Client::owned`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Check {
    /// The MAC only: enough to remove it.
    Mac,
    /// The MAC and, when it runs, its live settings against SPEC §6.1 and
    /// its plan: before anything runs in it or is said about it.
    Live,
}

impl Client {
    /// Prunes the sandbox records under `odek_home` kept past
    /// `retention_days` ([`crate::audit::prune`]), with the engine's
    /// containers (every one labelled `dev.odek.sandbox=true`) when it
    /// answers, else only those of sandboxes odek marked as ended. Returns
    /// the names pruned.
    pub async fn prune_records(&self, odek_home: &Path, retention_days: u32) -> Vec<String> {
        let at = std::time::SystemTime::now();
        let listed = match self.engine() {
            Ok(engine) => engine
                .list_containers(&format!("{}=true", crate::labels::SANDBOX))
                .await
                .ok()
                .map(|list| crate::audit::Listed {
                    names: list.into_iter().map(|c| c.name).collect(),
                    at,
                }),
            Err(_) => None,
        };
        crate::audit::prune(
            odek_home,
            retention_days,
            listed.as_ref(),
            std::time::SystemTime::now(),
        )
    }
}

impl Client {
    /// Every container labelled `dev.odek.sandbox=true` on the daemon, each
    /// marked verified or not under the launch key of `odek_home`.
    ///
    /// Errors: the key exists but cannot be used (class config, naming the
    /// fix); the engine's failures.
    pub async fn list(&self, odek_home: &Path) -> Result<Vec<Listing>> {
        let secret = crate::secret::Secret::load(odek_home)?;
        let engine = self.engine()?;
        let ep = engine.endpoint().to_string();
        let listed = engine
            .list_containers(&format!("{}=true", labels::SANDBOX))
            .await
            .map_err(|e| Error::engine(&ep, Step::Verify, e))?;
        let links = link_networks_if(
            engine.as_ref(),
            &ep,
            listed.iter().any(|c| unstarted_link(&c.name, &c.endpoints)),
        )
        .await?;
        let mut v: Vec<Listing> = listed
            .into_iter()
            .map(|c| {
                match verified_sandbox(secret.as_ref(), &c.name, &c.endpoints, &c.labels, &links) {
                    Ok(trusted) => listing(c.id, c.name, c.state, &trusted, true, odek_home)
                        .with_networks(c.networks, Some(&trusted)),
                    Err(_) => listing(c.id, c.name, c.state, &c.labels, false, odek_home)
                        .with_networks(c.networks, None),
                }
            })
            .collect();
        // Which Compose project each network belongs to (one call; a
        // listing without it still lists the sandboxes).
        if v.iter().any(|l| !l.planned && !l.networks.is_empty()) {
            let filter = NetworkFilter::Label(crate::network::COMPOSE_PROJECT_LABEL.to_string());
            if let Ok(nets) = engine.list_networks(&filter).await {
                let project: BTreeMap<&str, &str> = nets
                    .iter()
                    .filter_map(|n| {
                        n.labels
                            .get(crate::network::COMPOSE_PROJECT_LABEL)
                            .map(|p| (n.name.as_str(), p.as_str()))
                    })
                    .collect();
                for l in v.iter_mut().filter(|l| !l.planned) {
                    let mut p: Vec<String> = l
                        .networks
                        .iter()
                        .filter_map(|n| project.get(n.as_str()).map(|p| p.to_string()))
                        .collect();
                    p.sort();
                    p.dedup();
                    l.compose_projects = p;
                }
            }
        }
        v.sort_by(|a, b| a.created.cmp(&b.created).then(a.name.cmp(&b.name)));
        Ok(v)
    }

    /// Removes this user's sandboxes ([`Listing::verified`] under
    /// `opts.odek_home`) whose owner is proven gone (`labels::owner_gone`);
    /// with `opts.detached` also this user's detached ones; with
    /// `opts.workdir` only those labelled with that workdir. A container it
    /// cannot prove to be an orphan of this user's is never touched. Returns
    /// the names removed — with `opts.dry_run` the names it would remove,
    /// removing nothing. [`Client::gc_report`] says which link networks
    /// went too.
    ///
    /// Errors: as [`Client::list`]; a removal the engine refuses.
    pub async fn gc(&self, opts: &GcOptions) -> Result<Vec<String>> {
        Ok(self.gc_report(opts).await?.sandboxes)
    }

    /// [`Client::gc`], with what it did to link networks (SPEC §4.4): those
    /// of the sandboxes it removed, and those whose sandbox is gone, signed
    /// by this user's odek ([`GcReport::networks`]); a network labelled as
    /// a link network whose labels do not verify under this user's key is
    /// left alone and named ([`GcReport::networks_left`]).
    ///
    /// Errors: as [`Client::gc`].
    pub async fn gc_report(&self, opts: &GcOptions) -> Result<GcReport> {
        let engine = self.engine()?;
        let ep = engine.endpoint().to_string();
        let mut removed = Vec::new();
        let mut networks = Vec::new();
        let listed = std::time::SystemTime::now();
        let all = self.list(&opts.odek_home).await?;
        if !opts.dry_run {
            let live: Vec<&str> = all.iter().map(|l| l.id.as_str()).collect();
            crate::claims::prune(&opts.odek_home, &live, listed);
            let names: Vec<&str> = all.iter().map(|l| l.name.trim_start_matches('/')).collect();
            crate::host_files::prune(&opts.odek_home, &names, listed);
        }
        for l in all {
            if !opts.selects(&l) {
                continue;
            }
            if !opts.dry_run {
                engine
                    .remove_container(&l.id)
                    .await
                    .map_err(|e| Error::engine(&ep, Step::Remove, e))?;
                if crate::link::release(engine.as_ref(), &l.name, None).await {
                    networks.push(crate::labels::link_name(&l.name));
                }
                // Its record, if any, is kept from now on for as long as
                // the operator keeps records (`odek sandbox log` prunes).
                crate::audit::sandbox_gone(&opts.odek_home, &l.name);
            }
            removed.push(l.name);
        }
        // SPEC §4.4: link networks whose sandbox is gone, signed by this
        // user's odek; the others are named, never removed.
        let secret = crate::secret::Secret::load(&opts.odek_home)?;
        let swept = crate::link::collect(engine.as_ref(), secret.as_ref(), opts.dry_run).await;
        networks.extend(swept.removed);
        Ok(GcReport {
            sandboxes: removed,
            networks,
            networks_left: swept.unverified,
        })
    }

    /// Removes this user's ready pooled sandboxes ([`Listing::pool`] under
    /// `odek_home`: verified, labelled [`labels::POOL`], not claimed),
    /// whoever's pool they are in, and the claim records of containers that
    /// are gone. A claimed sandbox, or another user's, is never touched:
    /// right before each removal pool down takes the sandbox's claim record
    /// itself (created only if there is none, atomically, across
    /// processes), and a claim takes the same record before its re-check,
    /// so a sandbox handed over between the listing and the removal is
    /// left alone, and one removed is never handed over (the claim
    /// launches afresh or takes another). The owning process notices at its
    /// next claim and launches afresh. Returns the names removed; with
    /// `dry_run` those it would remove, removing nothing.
    ///
    /// Errors: as [`Client::list`]; a removal the engine refuses (not one
    /// of a container already gone).
    pub async fn pool_down(&self, odek_home: &Path, dry_run: bool) -> Result<Vec<String>> {
        let engine = self.engine()?;
        let ep = engine.endpoint().to_string();
        let listed = std::time::SystemTime::now();
        let all = self.list(odek_home).await?;
        let mut removed = Vec::new();
        let mut gone: Vec<&str> = Vec::new();
        for l in all.iter().filter(|l| l.pool) {
            if !dry_run {
                if crate::claims::take_down(odek_home, &l.id) != crate::claims::Taken::Won {
                    // Claimed since the listing (or another pool down's):
                    // not ours to remove.
                    continue;
                }
                gone.push(l.id.as_str());
                match engine.remove_container(&l.id).await {
                    Ok(_) => {}
                    Err(e) if e.kind == EngineErrorKind::NotFound => {}
                    Err(e) => return Err(Error::engine(&ep, Step::Remove, e)),
                }
                crate::link::release(engine.as_ref(), &l.name, None).await;
                crate::claims::forget(odek_home, &l.id);
            }
            removed.push(l.name.clone());
        }
        if !dry_run {
            // Records of containers that are gone: those removed here and
            // those not listed. A sandbox claimed since the listing keeps
            // its record.
            let live: Vec<&str> = all
                .iter()
                .map(|l| l.id.as_str())
                .filter(|id| !gone.contains(id))
                .collect();
            crate::claims::prune(odek_home, &live, listed);
        }
        Ok(removed)
    }

    /// A sandbox of this user's by container name or ID, with the plan it
    /// was launched from (env values restored from the container's
    /// `Config.Env`), to run commands in, describe or narrow.
    ///
    /// Errors: no such container ([`Error::NotFound`]); not an odek sandbox,
    /// not created by this user's odek (no valid MAC under the key of
    /// `odek_home`), or its plan label unreadable ([`Error::NotASandbox`]);
    /// the key unusable ([`Error::Secret`]); and,
    /// when it runs, [`Error::Rejected`] at verify naming each live setting
    /// that differs from SPEC §6.1 or its plan (`crate::verify::verify`),
    /// or that is a warm pool's ready sandbox, not yet handed over
    /// (`odek_core::pool`).
    /// A stopped sandbox is returned with `applied: None` (exec and describe
    /// then say it is stopped).
    pub async fn attach(&self, name: &str, odek_home: &Path) -> Result<Sandbox> {
        self.find(name, odek_home, Check::Live).await
    }

    /// As [`Client::attach`], without the live settings check: a sandbox of
    /// this user's as it is, to remove it (`odek sandbox down`).
    ///
    /// Errors: as [`Client::attach`] but the verify refusal.
    pub async fn owned(&self, name: &str, odek_home: &Path) -> Result<Sandbox> {
        self.find(name, odek_home, Check::Mac).await
    }

    async fn find(&self, name: &str, odek_home: &Path, check: Check) -> Result<Sandbox> {
        let engine = self.engine()?;
        let ep = engine.endpoint().to_string();
        let info = engine
            .inspect_container(name)
            .await
            .map_err(|mut e| match e.kind {
                EngineErrorKind::NotFound => NotFound::Unknown {
                    name: name.to_string(),
                }
                .into(),
                _ => {
                    // The daemon's message may echo the name as typed.
                    e.message = crate::text::shown(&e.message);
                    Error::engine(&ep, Step::Verify, e)
                }
            })?
            .ok_or_else(|| NotFound::Unlisted {
                name: name.to_string(),
            })?;
        if info.labels.get(labels::SANDBOX).map(String::as_str) != Some("true") {
            return Err(NotASandbox::Unlabelled {
                name: name.to_string(),
            }
            .into());
        }
        let secret = crate::secret::Secret::load(odek_home)?;
        let links = link_networks_if(
            engine.as_ref(),
            &ep,
            unstarted_link(&info.name, &info.endpoints),
        )
        .await?;
        let trusted = verified_sandbox(
            secret.as_ref(),
            &info.name,
            &info.endpoints,
            &info.labels,
            &links,
        )
        .map_err(|why| NotASandbox::Unverified {
            name: name.to_string(),
            why: why.reason(odek_home),
            container: info.name.clone(),
        })?;
        // A warm pool's ready sandbox is its owner's to hand over once
        // (docs/SANDBOXING.md, "The warm pool"): nothing runs in it before.
        if check == Check::Live
            && trusted.contains_key(labels::POOL)
            && !crate::claims::claimed(odek_home, &info.id)
        {
            return Err(Error::Rejected {
                fix: None,
                step: Step::Verify,
                message: format!(
                    "sandbox {} is a ready sandbox of a warm pool: its owner hands it over once, and nothing runs in it before (`odek pool down` removes it)",
                    crate::text::shown(&info.name)
                ),
                removal: None,
            });
        }
        let plan: Plan = trusted
            .get(labels::PLAN)
            .and_then(|p| serde_json::from_str(p).ok())
            .ok_or_else(|| NotASandbox::NoPlan {
                name: name.to_string(),
            })?;
        let mut plan = plan;
        // Env values are not in the label; the container's environment has them.
        for e in &mut plan.env {
            let prefix = format!("{}=", e.key);
            if let Some(kv) = info.env.iter().rev().find(|kv| kv.starts_with(&prefix)) {
                e.value = kv[prefix.len()..].to_string();
            }
        }
        let applied = match (check, info.running) {
            (Check::Live, true) => Some(verify(&plan, &info, &info.image_id, engine.endpoint()).map_err(|problems| {
                Error::Rejected {
                    fix: Some(crate::config::advice::Fix::Replace {
                        name: info.name.clone(),
                    }),
                    step: Step::Verify,
                    message: format!(
                        "sandbox {} no longer has the settings it was launched with ({problems}), so nothing runs in it and nothing is said about it; ",
                        info.name
                    ),
                    removal: None,
                }
            })?),
            _ => verify(&plan, &info, &info.image_id, engine.endpoint()).ok(),
        };
        Ok(Sandbox {
            schema: SANDBOX_SCHEMA.into(),
            name: info.name.clone(),
            container_id: Some(info.id.clone()),
            isolation: Isolation::Container,
            warnings: plan.warnings.clone(),
            supervisor: Some(if crate::hardening::supervised(&info) {
                crate::supervisor::SupervisorState::on()
            } else {
                crate::supervisor::SupervisorState::off("the sandbox was launched without it")
            }),
            plan,
            applied,
            // Found by name: its owner, if any, is another process.
            owner: crate::sandbox::OwnerLink::default(),
        })
    }

    /// Force-removes the container with this name, whatever state it is in,
    /// if the launch `launch_id` created it ([`crate::launch::LaunchProgress::launch_id`];
    /// used when a launch is interrupted or a create answer was lost, so the
    /// ID may be unknown). When no such container exists yet, tries again
    /// every 250 ms for up to `wait` — a create still in flight at the daemon
    /// may land later. Never takes much longer than `wait` plus two calls.
    /// A container of that name from another launch is left alone
    /// ([`Reaped::NotOurs`]).
    pub async fn reap_named(&self, name: &str, launch_id: &str, wait: Duration) -> Reaped {
        let engine = match self.engine() {
            Ok(e) => e.clone(),
            Err(e) => return Reaped::Failed(e.to_string()),
        };
        reap(engine.as_ref(), name, launch_id, wait).await
    }
}

/// The engine's link networks (one list call) when `needed` (some
/// sandbox was never started: [`unstarted_link`]), else none.
async fn link_networks_if(
    engine: &dyn crate::engine::DockerApi,
    ep: &str,
    needed: bool,
) -> Result<Vec<crate::engine::NetworkInfo>> {
    if !needed {
        return Ok(Vec::new());
    }
    engine
        .list_networks(&NetworkFilter::Label(crate::link::LINK_LABEL.to_string()))
        .await
        .map_err(|e| Error::engine(ep, Step::Verify, e))
}

/// True when container `name` names its link network among `endpoints`
/// without the network's ID: a container created and never started (the
/// engine gives an endpoint its network's ID at start), such as the orphan
/// of a launch whose daemon stopped answering after create.
fn unstarted_link(name: &str, endpoints: &[crate::engine::EndpointInfo]) -> bool {
    let want = crate::link::link_name(name.trim_start_matches('/'));
    endpoints
        .iter()
        .any(|e| e.network_name == want && e.network_id.is_empty())
}

/// The labels of sandbox `name` that its MAC covers ([`labels::verified`]),
/// the MAC binding its link network's ID: the one its endpoint names, or,
/// for a container never started ([`unstarted_link`]), that of a network
/// of `links` named `<name>-link` whose own MAC verifies under `secret`
/// (this user's odek made it for this sandbox).
fn verified_sandbox(
    secret: Option<&crate::secret::Secret>,
    name: &str,
    endpoints: &[crate::engine::EndpointInfo],
    labels: &std::collections::BTreeMap<String, String>,
    links: &[crate::engine::NetworkInfo],
) -> std::result::Result<std::collections::BTreeMap<String, String>, labels::Unverified> {
    let why = match labels::verified(secret, name, crate::link::link_of(name, endpoints), labels) {
        Err(why) if unstarted_link(name, endpoints) => why,
        other => return other,
    };
    let want = crate::link::link_name(name.trim_start_matches('/'));
    links
        .iter()
        .filter(|n| n.name == want && labels::verified_network(secret, &n.name, &n.labels).is_ok())
        .find_map(|n| labels::verified(secret, name, Some(&n.id), labels).ok())
        .ok_or(why)
}
