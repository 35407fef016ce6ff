//! The sandbox's own network (SPEC §4.4): a sandbox that reaches networks
//! never holds an endpoint on them, so a project's `docker compose down`
//! removes its networks as if no sandbox were there.
//!
//! At launch odek creates a `bridge` network for the sandbox,
//! `<sandbox name>-link` (always Internal), makes it the sandbox's network
//! (with [`OUT_NETWORK`], shared and without inter-container traffic, when
//! the plan reaches the internet, SPEC §4.2), and connects to it the
//! running containers of the planned networks under the DNS aliases they
//! have there (a Compose service's name among them), so the sandbox
//! reaches each service by name as before and reaches nothing else.
//! Before every command or file call ([`Client::relink`]) one list call
//! tells whether a container of a planned network is missing from the link
//! (a `compose up` after a `down` recreated it) and connects it; a planned
//! network that now has another ID (recreated) is accepted by its name and,
//! for a network the project's `odek.json` asked for, only with an approval
//! of the new IDs ([`crate::approval::ApprovalError::Recreated`]). When the
//! sandbox is removed its link network goes too (`release`); one whose
//! sandbox is gone (its owner was killed) is removed by the next launch or
//! `odek sandbox gc` (`collect`).

use std::collections::{BTreeMap, BTreeSet};

use crate::approve::{Asker, Decided};
use crate::client::Client;
use crate::engine::{ContainerSummary, DockerApi, EngineError, EngineErrorKind, NetworkSpec};
use crate::error::Error;
use crate::failure::Step;
use crate::network::{NetworkOrigin, ResolvedNetwork, COMPOSE_PROJECT_LABEL};
use crate::plan::Plan;
use crate::sandbox::Sandbox;

pub use crate::labels::{link_name, LINK as LINK_LABEL};

/// True when a sandbox of `plan` reaches networks through a link network:
/// it attaches networks at all.
pub(crate) fn uses_link(plan: &Plan) -> bool {
    !plan.networks.is_empty()
}

/// The network that gives sandboxes a way out to the internet when their
/// plan reaches it through attached networks (SPEC §4.4): one per daemon,
/// shared, a `bridge` with inter-container traffic off
/// (`com.docker.network.bridge.enable_icc=false`), so sandboxes on it reach
/// the internet and not each other; nothing but sandboxes is connected to
/// it. The link network itself is always `Internal`: the containers
/// connected to it must not gain a way out through it.
pub const OUT_NETWORK: &str = "odek-out";

/// The label on [`OUT_NETWORK`].
const OUT_LABEL: &str = "dev.odek.out";

/// Docker's bridge option for inter-container traffic.
const ICC_OPTION: &str = "com.docker.network.bridge.enable_icc";

/// The networks a sandbox is put on (SPEC §4.4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Own {
    /// Its link network's full ID.
    pub(crate) link: String,
    /// [`OUT_NETWORK`]'s full ID, when the plan reaches the internet
    /// without the default bridge.
    pub(crate) out: Option<String>,
}

/// Creates sandbox `sandbox`'s link network for `plan` (labelled with
/// `owner`, the owner labels its container gets) and finds or creates
/// [`OUT_NETWORK`] when the plan needs it. A failure removes what it
/// created.
pub(crate) async fn create(
    engine: &dyn DockerApi,
    plan: &Plan,
    sandbox: &str,
    owner: &BTreeMap<String, String>,
) -> std::result::Result<Own, EngineError> {
    let mut labels = owner.clone();
    labels.extend([
        (LINK_LABEL.to_string(), sandbox.to_string()),
        (crate::labels::SANDBOX.to_string(), "link".to_string()),
        (crate::labels::CREATED.to_string(), now_secs().to_string()),
    ]);
    let link = engine
        .create_network(&NetworkSpec {
            name: link_name(sandbox),
            internal: true,
            labels,
            options: BTreeMap::new(),
        })
        .await?;
    let out = if plan.internet && plan.network_mode == crate::config::NetworkMode::None {
        match ensure_out(engine).await {
            Ok(id) => Some(id),
            Err(e) => {
                release(engine, sandbox, Some(&link)).await;
                return Err(e);
            }
        }
    } else {
        None
    };
    Ok(Own { link, out })
}

/// [`OUT_NETWORK`]: the first (by ID) network of that name, labelled, a
/// local bridge, not `Internal`, inter-container traffic off — else made.
/// Two launches that find none at once both make one (the daemon accepts
/// a second network of a name, SECURITY.md "Known gaps"): the one whose
/// network is not the first by ID then removes its own, still empty, and
/// uses the first, so racing launches end on one network and none is
/// left over.
async fn ensure_out(engine: &dyn DockerApi) -> std::result::Result<String, EngineError> {
    if let Some(id) = first_out(engine).await? {
        return Ok(id);
    }
    let made = engine
        .create_network(&NetworkSpec {
            name: OUT_NETWORK.to_string(),
            internal: false,
            labels: BTreeMap::from([
                (OUT_LABEL.to_string(), "true".to_string()),
                (crate::labels::SANDBOX.to_string(), "out".to_string()),
            ]),
            options: BTreeMap::from([(ICC_OPTION.to_string(), "false".to_string())]),
        })
        .await?;
    match first_out(engine).await {
        Ok(Some(first)) if first != made => {
            if engine.remove_network(&made).await.is_ok() {
                return Ok(first);
            }
            Ok(made)
        }
        _ => Ok(made),
    }
}

/// The first (by ID) network that fits [`OUT_NETWORK`], if any: named so,
/// labelled [`OUT_LABEL`], a local bridge, not `Internal`, inter-container
/// traffic off, and without IPv6 — Docker 20.10's inter-container switch
/// blocks IPv4 only, so an `odek-out` someone made first with IPv6 on
/// (a Compose file can) would let sandboxes, and whoever joins it under a
/// service's alias, reach each other over IPv6. One that does not fit is
/// never used; odek makes its own beside it.
async fn first_out(engine: &dyn DockerApi) -> std::result::Result<Option<String>, EngineError> {
    let listed = engine
        .list_networks(&crate::engine::NetworkFilter::Label(OUT_LABEL.to_string()))
        .await?;
    Ok(listed
        .iter()
        .filter(|n| {
            n.name == OUT_NETWORK
                && n.driver == "bridge"
                && n.scope == "local"
                && !n.internal
                && !n.enable_ipv6
                && n.options.get(ICC_OPTION).map(String::as_str) == Some("false")
        })
        .map(|n| n.id.clone())
        .min())
}

/// Removes sandbox `sandbox`'s link network `link` (by name when
/// `None`), also while the sandbox's container is still on it. Best
/// effort: what could not be removed is found by `collect`.
pub(crate) async fn release(engine: &dyn DockerApi, sandbox: &str, link: Option<&str>) {
    release_one(engine, sandbox, &link_name(sandbox), link).await;
}

/// Removes network `id` (else the one named `name`) if it is one of
/// sandbox `sandbox`'s (its name and label say so): every endpoint
/// disconnected (forced) — also those of stopped containers, which keep
/// their endpoint settings and could not start again without the network —
/// then the network.
async fn release_one(engine: &dyn DockerApi, sandbox: &str, name: &str, id: Option<&str>) {
    let Ok(Some(info)) = engine.inspect_network(id.unwrap_or(name)).await else {
        return;
    };
    if info.name != name || info.labels.get(LINK_LABEL).map(String::as_str) != Some(sandbox) {
        return;
    }
    let mut members: BTreeSet<String> = info.containers.keys().cloned().collect();
    // Stopped containers are not listed on the network; the filter over
    // all containers finds them.
    if let Ok(all) = engine
        .list_network_members(std::slice::from_ref(&info.id), true)
        .await
    {
        members.extend(all.into_iter().map(|c| c.id));
    }
    for c in &members {
        let _ = engine.disconnect_network(&info.id, c).await;
    }
    if let Err(e) = engine.remove_network(&info.id).await {
        tracing::debug!(network = %name, "left for the next sweep: {e}");
    }
}

/// Removes the link networks of sandboxes that are gone (their owner was
/// killed, so nothing released them): labelled [`LINK_LABEL`], named after
/// the label, no container of that name exists, and its owner is provably
/// gone (its owner labels, as a sandbox's) or it is older than a launch in
/// flight can be (10 minutes). Best effort; returns the names removed.
pub(crate) async fn collect(engine: &dyn DockerApi) -> Vec<String> {
    let filter = crate::engine::NetworkFilter::Label(LINK_LABEL.to_string());
    let Ok(nets) = engine.list_networks(&filter).await else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for n in nets {
        let Some(sandbox) = n.labels.get(LINK_LABEL) else {
            continue;
        };
        if !crate::labels::is_sandbox_name(sandbox) || n.name != link_name(sandbox) {
            continue;
        }
        if !matches!(engine.inspect_container(sandbox).await, Ok(None)) {
            continue;
        }
        // A launch creates it right before its container: one whose owner
        // may still live and that is younger than any launch takes may be
        // a launch in flight (another process's), not an orphan.
        let created = n
            .labels
            .get(crate::labels::CREATED)
            .and_then(|c| c.parse::<u64>().ok())
            .unwrap_or(0);
        if crate::labels::owner_gone(&n.labels) != Some(true)
            && now_secs().saturating_sub(created) < IN_FLIGHT_SECS
        {
            continue;
        }
        release_one(engine, sandbox, &n.name, Some(&n.id)).await;
        removed.push(n.name);
    }
    removed
}

/// How long an empty link network without its sandbox may be a launch in
/// flight ([`collect`]), in seconds.
const IN_FLIGHT_SECS: u64 = 600;

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// What [`Client::relink`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Relinked {
    /// Names of the containers connected to the sandbox now.
    pub connected: Vec<String>,
    /// Planned networks found with a new ID and accepted: `(name, new ID)`.
    pub recreated: Vec<(String, String)>,
}

impl Relinked {
    /// The lines a front end prints on stderr for sandbox `sandbox` (one
    /// per recreated network, then one naming the containers connected),
    /// foreign names quoted by [`text::shown`](crate::text::shown); none
    /// when no container was connected: a CLI process accepts a recreated
    /// network again at each command (the acceptance lives in the
    /// [`Client`]), and was told once, when its services were connected.
    /// SPEC §4.4.
    pub fn notes(&self, sandbox: &str) -> Vec<String> {
        if self.connected.is_empty() {
            return Vec::new();
        }
        let mut out: Vec<String> = self
            .recreated
            .iter()
            .map(|(name, id)| {
                format!(
                    "odek: sandbox {sandbox}: network {} was recreated (new ID {}) and accepted by its name",
                    crate::text::shown(name),
                    &id[..12.min(id.len())]
                )
            })
            .collect();
        if !self.connected.is_empty() {
            let names: Vec<String> = self
                .connected
                .iter()
                .map(|n| crate::text::shown(n).to_string())
                .collect();
            out.push(format!(
                "odek: sandbox {sandbox}: connected {} to the sandbox's network again (started since the last command): {}",
                if names.len() == 1 { "1 container" } else { "these containers" },
                names.join(", ")
            ));
        }
        out
    }
}

/// True for a container that is an odek sandbox (its own link, or another
/// sandbox on a planned network): never connected.
fn is_sandbox(c: &ContainerSummary) -> bool {
    crate::labels::is_sandbox_name(&c.name) || c.labels.contains_key(crate::labels::SANDBOX)
}

/// Connects `members` missing from `link` (ID) under their aliases on the
/// networks of `accepted` (name → ID); a container that vanished meanwhile
/// is skipped. Returns the names connected.
async fn connect_members(
    engine: &dyn DockerApi,
    link: &str,
    accepted: &BTreeMap<String, String>,
    members: &[ContainerSummary],
) -> std::result::Result<Vec<String>, EngineError> {
    let mut connected = Vec::new();
    for m in members {
        if is_sandbox(m) || m.endpoints.iter().any(|e| e.network_id == link) {
            continue;
        }
        let on: Vec<&str> = m
            .endpoints
            .iter()
            .filter(|e| accepted.get(&e.network_name) == Some(&e.network_id))
            .map(|e| e.network_id.as_str())
            .collect();
        if on.is_empty() {
            continue;
        }
        // The list leaves aliases out on some releases: inspect has them.
        let info = match engine.inspect_container(&m.id).await? {
            Some(i) => i,
            None => continue,
        };
        let mut aliases: BTreeSet<String> = BTreeSet::new();
        for e in info
            .endpoints
            .iter()
            .filter(|e| on.contains(&e.network_id.as_str()))
        {
            aliases.extend(e.aliases.iter().cloned());
        }
        let aliases: Vec<String> = aliases.into_iter().collect();
        match engine.connect_network(link, &m.id, &aliases).await {
            Ok(()) => connected.push(m.name.clone()),
            Err(e) if e.kind == EngineErrorKind::NotFound => {}
            Err(e) if e.message.contains("already exists") => {}
            Err(e) => return Err(e),
        }
    }
    Ok(connected)
}

/// The planned network `planned` as it is now, found by its name: exactly
/// one network of that name, a local bridge, and for a network of a
/// Compose project still that project's. `None` when there is none (the
/// project is down) or it does not qualify.
async fn find_again(
    engine: &dyn DockerApi,
    planned: &ResolvedNetwork,
) -> std::result::Result<Option<crate::engine::NetworkInfo>, EngineError> {
    let listed = engine
        .list_networks(&crate::engine::NetworkFilter::Names(vec![planned
            .name
            .clone()]))
        .await?;
    let exact: Vec<_> = listed
        .into_iter()
        .filter(|n| n.name == planned.name)
        .collect();
    let [n] = exact.as_slice() else {
        return Ok(None);
    };
    let project_ok = planned.origins.iter().all(|o| match o {
        NetworkOrigin::Compose { project, .. } => {
            n.labels.get(COMPOSE_PROJECT_LABEL) == Some(project)
        }
        NetworkOrigin::Named { .. } => true,
    });
    let label_ok = n.labels.get(COMPOSE_PROJECT_LABEL) == planned.compose_project.as_ref();
    Ok((n.driver == "bridge" && n.scope == "local" && project_ok && label_ok).then(|| n.clone()))
}

impl Client {
    /// Keeps sandbox `sandbox` connected to the services of its planned
    /// networks (SPEC §4.4), before a command or file call: one list call
    /// when nothing changed. A container of a planned network that is not
    /// on the sandbox's link network (recreated by `docker compose up`) is
    /// connected under its aliases there. A planned network found with a
    /// new ID (the project went `down` and `up`) is accepted by its name —
    /// a network the project's `odek.json` asked for only with an approval
    /// of the new IDs: a standing one (a stored trust, `odek approve`), or
    /// `asker`'s answer, else the call is refused with
    /// [`crate::approval::ApprovalError::Recreated`] and nothing is
    /// connected. A sandbox without networks, or without a link network
    /// (launched by an earlier release), is left as it is.
    ///
    /// Errors: the engine's (class as the call's); the approval refusal;
    /// the asker's.
    pub async fn relink<A: Asker>(
        &self,
        sandbox: &Sandbox,
        asker: &A,
    ) -> std::result::Result<Relinked, A::Error> {
        let plan = &sandbox.plan;
        let Some(link) = sandbox
            .applied
            .as_ref()
            .and_then(|a| a.link_network.clone())
        else {
            return Ok(Relinked::default());
        };
        if !uses_link(plan) {
            return Ok(Relinked::default());
        }
        let engine = self.engine().map_err(A::Error::from)?.clone();
        let endpoint = engine.endpoint().to_string();
        let fail = |e: EngineError| A::Error::from(Error::engine(&endpoint, Step::Connect, e));
        let mut accepted = self.links.current(&sandbox.name, &plan.networks);
        let names: Vec<String> = accepted.keys().cloned().collect();
        let members = engine
            .list_network_members(&names, false)
            .await
            .map_err(fail)?;
        let members: Vec<ContainerSummary> =
            members.into_iter().filter(|m| !is_sandbox(m)).collect();
        // Planned networks seen with an ID not accepted: recreated.
        let mut changed: BTreeSet<String> = BTreeSet::new();
        for m in &members {
            for e in &m.endpoints {
                if accepted
                    .get(&e.network_name)
                    .is_some_and(|id| *id != e.network_id)
                {
                    changed.insert(e.network_name.clone());
                }
            }
        }
        let missing = members.iter().any(|m| {
            !m.endpoints.iter().any(|e| e.network_id == link)
                && m.endpoints
                    .iter()
                    .any(|e| accepted.get(&e.network_name) == Some(&e.network_id))
        });
        if changed.is_empty() && !missing {
            return Ok(Relinked::default());
        }
        let mut recreated = Vec::new();
        for name in &changed {
            let Some(planned) = plan.networks.iter().find(|n| n.name == *name) else {
                continue;
            };
            if let Some(now) = find_again(engine.as_ref(), planned).await.map_err(fail)? {
                recreated.push((planned.clone(), now));
            }
        }
        // A network the project asked for needs an approval of its new ID.
        let needs_approval: Vec<&(ResolvedNetwork, crate::engine::NetworkInfo)> = recreated
            .iter()
            .filter(|(p, _)| p.origins.iter().any(NetworkOrigin::is_project))
            .collect();
        if !needs_approval.is_empty() {
            if let Some(req) = &plan.approval {
                let networks: Vec<ResolvedNetwork> = plan
                    .networks
                    .iter()
                    .filter(|n| n.origins.iter().any(NetworkOrigin::is_project))
                    .map(|n| {
                        let now = recreated
                            .iter()
                            .find(|(p, _)| p.id == n.id)
                            .map(|(_, now)| now.id.clone())
                            .or_else(|| accepted.get(&n.name).cloned())
                            .unwrap_or_else(|| n.id.clone());
                        ResolvedNetwork {
                            id: now,
                            ..n.clone()
                        }
                    })
                    .collect();
                let request = crate::approve::for_networks(req, plan, &networks)
                    .map_err(|e| A::Error::from(Error::from(e)))?;
                let mut asked = plan.clone();
                asked.approval = Some(request.clone());
                match self.decide_approval(&asked, asker).await? {
                    Decided::Launch(_) => {}
                    Decided::Unasked { .. } => {
                        let difference = needs_approval
                            .iter()
                            .map(|(p, now)| {
                                format!(
                                    "{} is now {}",
                                    p.display_name(),
                                    &now.id[..12.min(now.id.len())]
                                )
                            })
                            .collect::<Vec<_>>()
                            .join(", ");
                        return Err(A::Error::from(Error::from(
                            crate::approval::ApprovalError::Recreated {
                                difference,
                                request: Box::new(request),
                            },
                        )));
                    }
                }
            } else {
                // A project network without the plan's request: never
                // accepted by name.
                recreated.retain(|(p, _)| !p.origins.iter().any(NetworkOrigin::is_project));
            }
        }
        for (p, now) in &recreated {
            self.links.set(&sandbox.name, &p.name, &now.id);
            accepted.insert(p.name.clone(), now.id.clone());
        }
        let connected = connect_members(engine.as_ref(), &link, &accepted, &members)
            .await
            .map_err(fail)?;
        Ok(Relinked {
            connected,
            recreated: recreated
                .into_iter()
                .map(|(p, now)| (p.name, now.id))
                .collect(),
        })
    }
}

/// Connects the running containers of `plan`'s networks to the new link
/// network `link` at launch (SPEC §4.4). Errors: the engine's.
pub(crate) async fn join(
    engine: &dyn DockerApi,
    plan: &Plan,
    link: &str,
) -> std::result::Result<Vec<String>, EngineError> {
    let accepted: BTreeMap<String, String> = plan
        .networks
        .iter()
        .map(|n| (n.name.clone(), n.id.clone()))
        .collect();
    let names: Vec<String> = accepted.keys().cloned().collect();
    let members = engine.list_network_members(&names, false).await?;
    connect_members(engine, link, &accepted, &members).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relinked_notes_name_recreated_networks_and_connected_containers_quoted() {
        assert!(Relinked::default().notes("odek-x").is_empty());
        let r = Relinked {
            connected: vec!["proj-redis-1".into(), "evil\u{1b}[2J".into()],
            recreated: vec![("proj_default".into(), "0123456789abcdef0123".into())],
        };
        let notes = r.notes("odek-x");
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(
            notes[0].contains("proj_default")
                && notes[0].contains("0123456789ab")
                && !notes[0].contains("0123456789abc"),
            "{notes:?}"
        );
        assert!(
            notes[1].contains("proj-redis-1") && notes[1].contains("odek-x"),
            "{notes:?}"
        );
        assert!(
            !notes[1].contains('\u{1b}'),
            "foreign bytes escaped: {notes:?}"
        );
        // Accepted again by a later command, nothing connected: said once.
        let again = Relinked {
            connected: Vec::new(),
            ..r
        };
        assert!(again.notes("odek-x").is_empty());
    }
}
