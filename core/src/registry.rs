//! Finding sandboxes again: attach by name, list, and reap the ones whose
//! owner process is gone (`odek sandbox gc`).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::engine::{DockerApi, EngineErrorKind};
use crate::error::{Error, Result, Step};
use crate::labels;
use crate::launch::{verify, Sandbox, SANDBOX_SCHEMA};
use crate::plan::{Isolation, Plan};
use crate::resolve::Odek;

/// What [`Odek::reap_named`] found.
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

/// Removes the container named `name` if the launch `launch_id` created it
/// (its [`labels::LAUNCH`] label), looking again every 250 ms for up to
/// `wait` while no container has the name (a create still in flight).
/// Removal is by the ID found, so a container that takes the name later is
/// never touched.
pub async fn reap(engine: &dyn DockerApi, name: &str, launch_id: &str, wait: Duration) -> Reaped {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        match engine.inspect_container(name).await {
            Ok(Some(c)) if c.labels.get(labels::LAUNCH).map(String::as_str) == Some(launch_id) => {
                return match engine.remove_container(&c.id).await {
                    Ok(_) => Reaped::Removed,
                    Err(e) => Reaped::Failed(e.to_string()),
                }
            }
            Ok(Some(_)) => return Reaped::NotOurs,
            Ok(None) if tokio::time::Instant::now() >= deadline => return Reaped::Absent,
            Ok(None) => tokio::time::sleep(Duration::from_millis(250)).await,
            Err(e) => return Reaped::Failed(e.to_string()),
        }
    }
}

/// One odek container as `odek sandbox ls` shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Listing {
    /// Container name.
    pub name: String,
    /// Full container ID.
    pub id: String,
    /// Engine state (`running`, `exited`, …).
    pub state: String,
    /// Creation time, Unix seconds.
    pub created: Option<u64>,
    /// Started by `odek sandbox up` (outlives its creator).
    pub detached: bool,
    /// Owner PID of an ephemeral sandbox.
    pub owner_pid: Option<u32>,
    /// `Some(true)` when the owner is known to be gone (gc removes it).
    pub owner_gone: Option<bool>,
    /// Working directory mounted at `/workspace`.
    pub workdir: Option<String>,
    /// Parent sandbox of a narrowed child.
    pub parent: Option<String>,
}

fn listing(id: String, name: String, state: String, l: &BTreeMap<String, String>) -> Listing {
    let detached = l.get(labels::DETACHED).map(String::as_str) == Some("true");
    Listing {
        name,
        id,
        state,
        created: l.get(labels::CREATED).and_then(|c| c.parse().ok()),
        detached,
        owner_pid: l.get(labels::OWNER_PID).and_then(|p| p.parse().ok()),
        owner_gone: if detached {
            None
        } else {
            labels::owner_gone(l)
        },
        workdir: l.get(labels::WORKDIR).cloned(),
        parent: l.get(labels::PARENT).cloned(),
    }
}

impl Odek {
    /// Every odek sandbox container on the daemon (label `dev.odek.sandbox=true`).
    pub async fn list(&self) -> Result<Vec<Listing>> {
        let engine = self.engine()?;
        let ep = engine.endpoint().to_string();
        let mut v: Vec<Listing> = engine
            .list_containers(&format!("{}=true", labels::SANDBOX))
            .await
            .map_err(|e| Error::engine(&ep, Step::Verify, e, false))?
            .into_iter()
            .map(|c| listing(c.id, c.name, c.state, &c.labels))
            .collect();
        v.sort_by(|a, b| a.created.cmp(&b.created).then(a.name.cmp(&b.name)));
        Ok(v)
    }

    /// Removes sandboxes whose owner process is gone; with `detached` also
    /// the detached ones (`odek sandbox up`). Returns the names removed.
    pub async fn gc(&self, detached: bool) -> Result<Vec<String>> {
        let engine = self.engine()?;
        let ep = engine.endpoint().to_string();
        let mut removed = Vec::new();
        for l in self.list().await? {
            if l.owner_gone == Some(true) || (detached && l.detached) {
                engine
                    .remove_container(&l.id)
                    .await
                    .map_err(|e| Error::engine(&ep, Step::Remove, e, false))?;
                removed.push(l.name);
            }
        }
        Ok(removed)
    }

    /// A running sandbox by container name or ID, with the plan it was
    /// launched from (env values restored from the container's `Config.Env`).
    /// Errors when the
    /// container does not exist or is not an odek sandbox.
    pub async fn attach(&self, name: &str) -> Result<Sandbox> {
        let engine = self.engine()?;
        let ep = engine.endpoint().to_string();
        let info = engine
            .inspect_container(name)
            .await
            .map_err(|e| match e.kind {
                EngineErrorKind::NotFound => Error::Usage(format!("no sandbox named {name:?}")),
                _ => Error::engine(&ep, Step::Verify, e, false),
            })?
            .ok_or_else(|| {
                Error::Usage(format!(
                    "no sandbox named {}; see `odek sandbox ls`",
                    crate::config::quote(name)
                ))
            })?;
        if info.labels.get(labels::SANDBOX).map(String::as_str) != Some("true") {
            return Err(Error::Usage(format!(
                "container {} is not an odek sandbox (no {}=true label)",
                crate::config::quote(name),
                labels::SANDBOX
            )));
        }
        let plan: Plan = info
            .labels
            .get(labels::PLAN)
            .and_then(|p| serde_json::from_str(p).ok())
            .ok_or_else(|| {
                Error::Usage(format!(
                    "sandbox {} carries no readable {} label (made by another odek version?)",
                    crate::config::quote(name),
                    labels::PLAN
                ))
            })?;
        let mut plan = plan;
        // Env values are not in the label; the container's environment has them.
        for e in &mut plan.env {
            let prefix = format!("{}=", e.key);
            if let Some(kv) = info.env.iter().rev().find(|kv| kv.starts_with(&prefix)) {
                e.value = kv[prefix.len()..].to_string();
            }
        }
        let applied = verify(&plan, &info, &info.image_id).ok();
        Ok(Sandbox {
            schema: SANDBOX_SCHEMA.into(),
            name: info.name.clone(),
            container_id: Some(info.id.clone()),
            isolation: Isolation::Container,
            warnings: plan.warnings.clone(),
            plan,
            applied,
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
