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
use crate::network::{
    NetworkOrigin, ResolvedNetwork, COMPOSE_PROJECT_LABEL, STACK_NAMESPACE_LABEL,
};
use crate::plan::Plan;
use crate::sandbox::Sandbox;
use crate::secret::Secret;

pub use crate::labels::{link_name, LINK as LINK_LABEL};

/// True when a sandbox of `plan` is put on a link network: it attaches
/// networks at all, or is in egress mode (SPEC §4.5: its only network is
/// then the link network, shared with its egress proxy).
pub(crate) fn uses_link(plan: &Plan) -> bool {
    !plan.networks.is_empty() || plan.egress.is_some()
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

/// Docker's bridge option that leaves the bridge without an IPv4 address
/// of the host's. A link network sets it: an `Internal` network's
/// isolation rules are forwarding rules, so a packet to the bridge's own
/// address (the network's gateway) reaches the host itself and every host
/// service bound to a wildcard address (SECURITY.md "Known gaps"); with
/// no address there, nobody holds the gateway and the members still
/// reach each other (one layer-2 segment, the embedded resolver inside
/// each container).
pub const INHIBIT_IPV4_OPTION: &str = "com.docker.network.bridge.inhibit_ipv4";

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
/// `owner`, the owner labels its container gets, and signed with `secret`,
/// this user's launch key: [`crate::labels::sign_network`]) and finds or creates
/// [`OUT_NETWORK`] when the plan needs it. A failure removes what it
/// created.
pub(crate) async fn create(
    engine: &dyn DockerApi,
    plan: &Plan,
    sandbox: &str,
    owner: &BTreeMap<String, String>,
    secret: &Secret,
) -> std::result::Result<Own, EngineError> {
    let mut labels = owner.clone();
    labels.extend([
        (LINK_LABEL.to_string(), sandbox.to_string()),
        (crate::labels::SANDBOX.to_string(), "link".to_string()),
        (crate::labels::CREATED.to_string(), now_secs().to_string()),
    ]);
    // Signed as a sandbox's labels are: only a link network this user's
    // odek made is ever swept as an orphan (`collect`).
    crate::labels::sign_network(secret, &link_name(sandbox), &mut labels);
    let link = engine
        .create_network(&NetworkSpec {
            name: link_name(sandbox),
            internal: true,
            labels,
            options: BTreeMap::from([(INHIBIT_IPV4_OPTION.to_string(), "true".to_string())]),
        })
        .await?;
    // Never in egress mode (SPEC §4.5), whatever the plan says of the
    // internet: its only way out is the proxy.
    let out = if plan.internet
        && plan.egress.is_none()
        && plan.network_mode == crate::config::NetworkMode::None
    {
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
/// effort: what could not be removed is found by `collect`. True when it
/// was removed.
pub(crate) async fn release(engine: &dyn DockerApi, sandbox: &str, link: Option<&str>) -> bool {
    release_one(engine, sandbox, &link_name(sandbox), link).await
}

/// Removes network `id` (else the one named `name`) if it is one of
/// sandbox `sandbox`'s (its name and label say so): every endpoint
/// disconnected (forced) — also those of stopped containers, which keep
/// their endpoint settings and could not start again without the network —
/// then the network.
async fn release_one(engine: &dyn DockerApi, sandbox: &str, name: &str, id: Option<&str>) -> bool {
    // Its egress proxy (SPEC §4.5) first, which is on it.
    crate::egress::remove(engine, sandbox).await;
    let Ok(Some(info)) = engine.inspect_network(id.unwrap_or(name)).await else {
        return false;
    };
    if info.name != name || info.labels.get(LINK_LABEL).map(String::as_str) != Some(sandbox) {
        return false;
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
    match engine.remove_network(&info.id).await {
        Ok(_) => true,
        Err(e) => {
            tracing::debug!(network = %name, "left for the next sweep: {e}");
            false
        }
    }
}

/// What the sweep of link networks whose sandbox is gone did (`collect`,
/// by a launch and [`Client::gc_report`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Swept {
    /// Names of the networks removed (with `dry_run`: those it would remove).
    pub removed: Vec<String>,
    /// Names of networks labelled [`LINK_LABEL`] whose labels do not verify
    /// under this user's launch key ([`crate::labels::verified_network`]):
    /// another user's, an earlier release's (unsigned), or forged. Left
    /// alone, whether their sandbox exists or not.
    pub unverified: Vec<String>,
}

/// Removes the link networks of sandboxes that are gone (their owner was
/// killed, so nothing released them): labelled [`LINK_LABEL`], signed
/// under `secret` (this user's launch key: a forged or another user's
/// label is never trusted, SPEC §4.4), named after the label, no container
/// of that name exists, and its owner is provably gone (its owner labels,
/// as a sandbox's) or it is older than a launch in flight can be (10
/// minutes). Best effort; with `dry_run` nothing is removed.
pub(crate) async fn collect(
    engine: &dyn DockerApi,
    secret: Option<&Secret>,
    dry_run: bool,
) -> Swept {
    let filter = crate::engine::NetworkFilter::Label(LINK_LABEL.to_string());
    let mut swept = Swept::default();
    let Ok(nets) = engine.list_networks(&filter).await else {
        return swept;
    };
    for n in nets {
        let Ok(labels) = crate::labels::verified_network(secret, &n.name, &n.labels) else {
            swept.unverified.push(n.name);
            continue;
        };
        let Some(sandbox) = labels.get(LINK_LABEL) else {
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
        let created = labels
            .get(crate::labels::CREATED)
            .and_then(|c| c.parse::<u64>().ok())
            .unwrap_or(0);
        if crate::labels::owner_gone(&labels) != Some(true)
            && now_secs().saturating_sub(created) < IN_FLIGHT_SECS
        {
            continue;
        }
        if dry_run || release_one(engine, sandbox, &n.name, Some(&n.id)).await {
            swept.removed.push(n.name);
        }
    }
    swept
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
    /// Planned networks that are gone — no network of that name: its
    /// Compose project is down (`docker compose down`) — as `(name,
    /// Compose project or None)`. The call goes on (SPEC §4.4: a project
    /// may go down while a sandbox works); the sandbox reaches none of
    /// their services until they are back.
    pub down: Vec<(String, Option<String>)>,
    /// Containers someone else connected to [`OUT_NETWORK`] or to the
    /// sandbox's link network, disconnected now (SPEC §4.4).
    pub disconnected: Vec<Intruder>,
}

/// A container connected to a sandbox's [`OUT_NETWORK`] or link network
/// that does not belong there (SPEC §4.4): on [`OUT_NETWORK`] anything but
/// a sandbox whose labels verify under this user's launch key; on the link
/// network anything but the sandbox itself and the running containers of
/// its attached networks under the aliases they have there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Intruder {
    /// Its container name, as the engine gave it (untrusted text).
    pub name: String,
    /// The network it was disconnected from: [`OUT_NETWORK`] or the link
    /// network's name.
    pub network: String,
    /// Why it does not belong there.
    pub why: String,
}

impl Intruder {
    /// The line said for it on stderr (foreign names quoted by
    /// [`text::shown`](crate::text::shown)).
    pub fn note(&self, sandbox: &str) -> String {
        format!(
            "odek: sandbox {sandbox}: disconnected container {} from {}: {} (connected from outside odek; it could take a service's name from the sandbox)",
            crate::text::shown(&self.name),
            crate::text::shown(&self.network),
            self.why
        )
    }
}

impl Relinked {
    /// The lines a front end prints on stderr for sandbox `sandbox`: one
    /// per container disconnected ([`Intruder::note`]), always; then the
    /// networks that are gone ([`Relinked::down`], in one line), at every
    /// call, so that a command that then fails to resolve a service's name
    /// is explained; then, when containers were connected, one per
    /// recreated network and one naming the containers connected, foreign
    /// names quoted by [`text::shown`](crate::text::shown); none of these
    /// last when no container was connected: a CLI process accepts a
    /// recreated network again at each command (the acceptance lives in
    /// the [`Client`]), and was told once, when its services were
    /// connected. SPEC §4.4.
    pub fn notes(&self, sandbox: &str) -> Vec<String> {
        let mut out: Vec<String> = self.disconnected.iter().map(|i| i.note(sandbox)).collect();
        out.extend(self.down_note(sandbox));
        if self.connected.is_empty() {
            return out;
        }
        out.extend(self.recreated.iter().map(|(name, id)| {
            format!(
                "odek: sandbox {sandbox}: network {} was recreated (new ID {}) and accepted by its name",
                crate::text::shown(name),
                &id[..12.min(id.len())]
            )
        }));
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
        out
    }

    /// The line saying which planned networks are gone (their Compose
    /// project is down) and that the call went on without them; `None`
    /// when none is. SPEC §4.4.
    pub fn down_note(&self, sandbox: &str) -> Option<String> {
        if self.down.is_empty() {
            return None;
        }
        let projects: BTreeSet<String> = self
            .down
            .iter()
            .filter_map(|(_, p)| p.as_deref().map(|p| crate::text::shown(p).to_string()))
            .collect();
        let networks: Vec<String> = self
            .down
            .iter()
            .map(|(n, _)| crate::text::shown(n).to_string())
            .collect();
        let whose = match projects.len() {
            0 => "their Compose project is down or they were removed".to_string(),
            1 => format!(
                "Compose project {} is down (`docker compose down`)",
                projects.iter().next().map_or("", String::as_str)
            ),
            _ => format!(
                "Compose projects {} are down (`docker compose down`)",
                projects.into_iter().collect::<Vec<_>>().join(", ")
            ),
        };
        Some(format!(
            "odek: sandbox {sandbox}: the networks it reaches are gone ({}): {whose}; the command runs anyway, without their services (their names do not resolve); once the project is up again the next command connects them",
            networks.join(", ")
        ))
    }
}

/// A sandbox's own networks as [`guard`] checks them.
pub(crate) struct Watch<'a> {
    /// The sandbox's container ID.
    pub(crate) me: &'a str,
    /// Its name (the link network's is [`link_name`] of it).
    pub(crate) name: &'a str,
    /// Its link network's full ID.
    pub(crate) link: &'a str,
    /// [`OUT_NETWORK`]'s full ID, when it is on it.
    pub(crate) out: Option<&'a str>,
    /// `$ODEK_HOME`, whose launch key tells this user's sandboxes.
    pub(crate) odek_home: &'a std::path::Path,
    /// The sandbox's egress proxy's URL (`http://<ip>:3128`, SPEC §4.5),
    /// in egress mode: the container named after the sandbox
    /// ([`crate::egress::proxy_name`]), labelled for it, at that address
    /// on the link network belongs there.
    pub(crate) proxy: Option<&'a str>,
    /// True when the sandbox's plan is in egress mode (SPEC §4.5): only
    /// then does a proxy belong on its link network. A container named
    /// and labelled as a proxy (the label is not signed) on the link
    /// network of any other sandbox is a stranger.
    pub(crate) egress: bool,
}

/// Whether `c` is the sandbox's own egress proxy (SPEC §4.5): its name
/// (unique on the engine while the proxy lives), its label, and — when
/// this process knows the sandbox's proxy URL (`proxy`; a sandbox found by
/// name may not) — its address on the link network `link` (ID) the one
/// that URL names.
fn is_own_proxy(c: &ContainerSummary, sandbox: &str, link: &str, proxy: Option<&str>) -> bool {
    let named = c.name.trim_start_matches('/') == crate::egress::proxy_name(sandbox)
        && c.labels
            .get(crate::egress::EGRESS_LABEL)
            .map(String::as_str)
            == Some(sandbox);
    let Some(url) = proxy else {
        return named;
    };
    let host = url
        .strip_prefix("http://")
        .and_then(|r| r.rsplit_once(':'))
        .map(|(h, _)| h);
    named
        && c.endpoints
            .iter()
            .any(|e| e.network_id == link && Some(e.ip.as_str()) == host && !e.ip.is_empty())
}

/// The member check of SPEC §4.4 over `listed` — one list call's answer
/// for the attached networks (`accepted`, name → ID), the link network and
/// [`OUT_NETWORK`]: every container on [`OUT_NETWORK`] but sandboxes whose
/// labels verify under this user's key, and every container on the link
/// network but the sandbox and the running containers of the attached
/// networks under the aliases they have there, is disconnected (forced).
/// The aliases of a link endpoint are read (one inspect) the first time
/// this process sees it (`checked`). `listed` loses the endpoints removed,
/// so that a container of an attached network disconnected for its
/// aliases is connected again as a missing one. No call when nothing is
/// wrong and every endpoint was checked before.
///
/// Errors: a disconnect or inspect the engine refuses (the caller then
/// refuses its call: nothing runs).
pub(crate) async fn guard(
    engine: &dyn DockerApi,
    own: &Watch<'_>,
    accepted: &BTreeMap<String, String>,
    listed: &mut [ContainerSummary],
    checked: &crate::network::Checked,
) -> std::result::Result<Vec<Intruder>, EngineError> {
    let link_net = link_name(own.name);
    let mut found: Vec<(usize, String, String, String)> = Vec::new();
    let mut foreign: Vec<usize> = Vec::new();
    // odek-out: sandboxes only (this user's verified; another's shaped as
    // one and answering to its own name only).
    if let Some(out) = own.out {
        let mut secret: Option<Option<Secret>> = None;
        for (i, c) in listed.iter().enumerate() {
            if c.id == own.me || !c.endpoints.iter().any(|e| e.network_id == out) {
                continue;
            }
            let key = secret.get_or_insert_with(|| Secret::load(own.odek_home).ok().flatten());
            let ok = crate::labels::verified(
                key.as_ref(),
                &c.name,
                link_of(&c.name, &c.endpoints),
                &c.labels,
            )
            .is_ok_and(|l| l.get(crate::labels::SANDBOX).map(String::as_str) == Some("true"));
            if ok {
                continue;
            }
            // Another user's (another $ODEK_HOME's) sandbox: its labels
            // cannot verify under this key, yet it belongs there. It takes
            // no name from a sandbox as long as it answers to nothing but
            // its own name and ID (read once per endpoint).
            let shaped = crate::labels::is_sandbox_name(c.name.trim_start_matches('/'))
                && c.labels.get(crate::labels::SANDBOX).map(String::as_str) == Some("true");
            let ep = c.endpoints.iter().find(|e| e.network_id == out);
            match ep {
                Some(ep) if shaped && checked.has(&ep.endpoint_id) => {}
                Some(_) if shaped => foreign.push(i),
                _ => found.push((
                    i,
                    out.to_string(),
                    OUT_NETWORK.to_string(),
                    "it is not a sandbox of this user's odek".into(),
                )),
            }
        }
    }
    let inspected = futures_util::future::join_all(
        foreign
            .iter()
            .map(|i| engine.inspect_container(&listed[*i].id)),
    )
    .await;
    for (i, info) in foreign.into_iter().zip(inspected) {
        let Some(info) = info? else { continue };
        let Some(out) = own.out else { break };
        let Some(ep) = info.endpoints.iter().find(|e| e.network_id == out) else {
            continue;
        };
        let name = info.name.trim_start_matches('/');
        let extra: Vec<String> = ep
            .aliases
            .iter()
            .filter(|a| a.as_str() != name && a.as_str() != &info.id[..12.min(info.id.len())])
            .map(|a| crate::text::shown(a).to_string())
            .collect();
        if extra.is_empty() {
            checked.add(&ep.endpoint_id);
        } else {
            found.push((
                i,
                out.to_string(),
                OUT_NETWORK.to_string(),
                format!(
                    "it is not a sandbox of this user's odek and answers there to other names ({})",
                    extra.join(", ")
                ),
            ));
        }
    }
    // The link network: the sandbox, and its networks' running containers.
    let mut to_inspect: Vec<(usize, Vec<String>)> = Vec::new();
    for (i, c) in listed.iter().enumerate() {
        let Some(ep) = c.endpoints.iter().find(|e| e.network_id == own.link) else {
            continue;
        };
        if c.id == own.me || (own.egress && is_own_proxy(c, own.name, own.link, own.proxy)) {
            continue;
        }
        let on: Vec<String> = c
            .endpoints
            .iter()
            .filter(|e| accepted.get(&e.network_name) == Some(&e.network_id))
            .map(|e| e.network_id.clone())
            .collect();
        let why = if is_sandbox(c) {
            Some("it is another sandbox")
        } else if c.state != "running" {
            Some("it is not running")
        } else if on.is_empty() {
            Some("it is on none of the sandbox's networks")
        } else {
            None
        };
        match why {
            Some(why) => found.push((i, own.link.to_string(), link_net.clone(), why.into())),
            None if checked.has(&ep.endpoint_id) => {}
            None => to_inspect.push((i, on)),
        }
    }
    // Their aliases (the list leaves them out): read once per endpoint.
    let inspected = futures_util::future::join_all(
        to_inspect
            .iter()
            .map(|(i, _)| engine.inspect_container(&listed[*i].id)),
    )
    .await;
    for ((i, on), info) in to_inspect.into_iter().zip(inspected) {
        let Some(info) = info? else { continue };
        let Some(ep) = info.endpoints.iter().find(|e| e.network_id == own.link) else {
            continue;
        };
        let mut allowed: BTreeSet<&str> = BTreeSet::new();
        allowed.insert(&info.id[..12.min(info.id.len())]);
        allowed.insert(info.name.as_str());
        for e in info.endpoints.iter().filter(|e| on.contains(&e.network_id)) {
            allowed.extend(e.aliases.iter().map(String::as_str));
        }
        let service = crate::network::stack_service_alias(&info.labels);
        allowed.extend(service.as_deref());
        let extra: Vec<String> = ep
            .aliases
            .iter()
            .filter(|a| !allowed.contains(a.as_str()))
            .map(|a| crate::text::shown(a).to_string())
            .collect();
        if extra.is_empty() {
            checked.add(&ep.endpoint_id);
        } else {
            found.push((
                i,
                own.link.to_string(),
                link_net.clone(),
                format!(
                    "it answers there to names it does not have on the sandbox's networks ({})",
                    extra.join(", ")
                ),
            ));
        }
    }
    let mut out = Vec::new();
    for (i, network_id, network, why) in found {
        let c = &mut listed[i];
        match engine.disconnect_network(&network_id, &c.id).await {
            Ok(()) => {}
            Err(e) if e.kind == EngineErrorKind::NotFound => {}
            // Being removed: it leaves the network with its removal.
            Err(e) if e.message.contains("marked for removal") => {}
            Err(mut e) => {
                e.message = format!(
                    "container {} is connected to {} from outside odek ({why}) and could not be disconnected: {}",
                    crate::text::shown(&c.name),
                    crate::text::shown(&network),
                    e.message
                );
                return Err(e);
            }
        }
        c.endpoints.retain(|e| e.network_id != network_id);
        tracing::warn!(container = %crate::text::shown(&c.name), network = %crate::text::shown(&network), "disconnected a container connected from outside odek: {why}");
        out.push(Intruder {
            name: c.name.clone(),
            network,
            why,
        });
    }
    Ok(out)
}

/// The full ID of the link network a container named `name` is on (the
/// endpoint of the network named [`link_name`]`(name)`), if any: what
/// [`crate::labels::verified`] binds a sandbox's MAC to.
pub fn link_of<'a>(name: &str, endpoints: &'a [crate::engine::EndpointInfo]) -> Option<&'a str> {
    let want = link_name(name.trim_start_matches('/'));
    endpoints
        .iter()
        .find(|e| e.network_name == want && !e.network_id.is_empty())
        .map(|e| e.network_id.as_str())
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
        aliases.extend(crate::network::stack_service_alias(&info.labels));
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
/// one network of that name, a local bridge (or, for a Swarm stack's, an
/// attachable overlay), and for a network of a Compose project or stack
/// still that project's or stack's. `None` when there is none (the
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
        NetworkOrigin::Stack { stack, .. } => n.labels.get(STACK_NAMESPACE_LABEL) == Some(stack),
        NetworkOrigin::Named { .. } => true,
    });
    let label_ok = n.labels.get(COMPOSE_PROJECT_LABEL) == planned.compose_project.as_ref()
        && n.labels.get(STACK_NAMESPACE_LABEL) == planned.stack.as_ref();
    // A stack's overlay stays an attachable overlay of the same scope.
    let kind_ok = (n.driver == "bridge" && n.scope == "local")
        || (n.driver == "overlay"
            && n.scope == "swarm"
            && n.attachable
            && planned.driver == n.driver
            && planned.scope == n.scope);
    Ok((kind_ok && project_ok && label_ok).then(|| n.clone()))
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
        // Egress mode without networks: nothing to keep connected.
        if plan.networks.is_empty() {
            return Ok(Relinked::default());
        }
        let engine = self.engine().map_err(A::Error::from)?.clone();
        let endpoint = engine.endpoint().to_string();
        let fail = |e: EngineError| A::Error::from(Error::engine(&endpoint, Step::Connect, e));
        let mut accepted = self.links.current(&sandbox.name, &plan.networks);
        let out = sandbox.applied.as_ref().and_then(|a| a.out_network.clone());
        // One list call: the attached networks' containers, and who is on
        // the link network and odek-out (SPEC §4.4 member check).
        let mut names: Vec<String> = accepted.keys().cloned().collect();
        names.push(link.clone());
        names.extend(out.clone());
        let mut listed = engine
            .list_network_members(&names, false)
            .await
            .map_err(fail)?;
        let members: Vec<ContainerSummary> =
            listed.iter().filter(|m| !is_sandbox(m)).cloned().collect();
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
        // A planned network no running container is on: is it gone (the
        // project is down)? One more list call, only then.
        let empty: Vec<String> = accepted
            .keys()
            .filter(|name| {
                !members
                    .iter()
                    .any(|m| m.endpoints.iter().any(|e| e.network_name == **name))
            })
            .cloned()
            .collect();
        let down = if empty.is_empty() {
            Vec::new()
        } else {
            let listed = engine
                .list_networks(&crate::engine::NetworkFilter::Names(empty.clone()))
                .await
                .map_err(fail)?;
            empty
                .into_iter()
                .filter(|name| !listed.iter().any(|n| n.name == *name))
                .map(|name| {
                    let project = plan
                        .networks
                        .iter()
                        .find(|n| n.name == name)
                        .and_then(|n| n.compose_project.clone());
                    (name, project)
                })
                .collect()
        };
        let mut recreated = Vec::new();
        for name in &changed {
            let Some(planned) = plan.networks.iter().find(|n| n.name == *name) else {
                continue;
            };
            if let Some(now) = find_again(engine.as_ref(), planned).await.map_err(fail)? {
                // Internal when the sandbox was launched, not now: it would
                // widen what the sandbox reaches through its services, so
                // it is never accepted by name.
                if planned.internal && !now.internal {
                    return Err(A::Error::from(Error::Rejected {
                        fix: None,
                        step: Step::Connect,
                        message: format!(
                            "network {} was recreated (new ID {}) without `internal`, which it had when sandbox {} was launched: it is not accepted by its name, and nothing ran. Launch a new sandbox to reach it as it is now (its networks are resolved, warned about and approved as at any launch)",
                            planned.display_name(),
                            &now.id[..12.min(now.id.len())],
                            sandbox.name
                        ),
                        removal: None,
                    }));
                }
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
        // SPEC §4.4: who else is on the link network and odek-out.
        let watch = Watch {
            me: sandbox.container_id.as_deref().unwrap_or_default(),
            name: &sandbox.name,
            link: &link,
            out: out.as_deref(),
            odek_home: &plan.odek_home,
            proxy: sandbox
                .applied
                .as_ref()
                .and_then(|a| a.egress_proxy.as_deref()),
            egress: plan.egress.is_some(),
        };
        let disconnected = guard(
            engine.as_ref(),
            &watch,
            &accepted,
            &mut listed,
            &self.checked,
        )
        .await
        .map_err(fail)?;
        let members: Vec<ContainerSummary> =
            listed.into_iter().filter(|m| !is_sandbox(m)).collect();
        let missing = members.iter().any(|m| {
            !m.endpoints.iter().any(|e| e.network_id == link)
                && m.endpoints
                    .iter()
                    .any(|e| accepted.get(&e.network_name) == Some(&e.network_id))
        });
        let connected = if missing {
            connect_members(engine.as_ref(), &link, &accepted, &members)
                .await
                .map_err(fail)?
        } else {
            Vec::new()
        };
        Ok(Relinked {
            connected,
            recreated: recreated
                .into_iter()
                .map(|(p, now)| (p.name, now.id))
                .collect(),
            down,
            disconnected,
        })
    }
}

/// Connects the running containers of `plan`'s networks to the new link
/// network `own.link` at launch (SPEC §4.4), after the member check of
/// its link network and odek-out ([`guard`], the same list call). Returns
/// the names connected and the containers disconnected. Errors: the
/// engine's.
pub(crate) async fn join(
    engine: &dyn DockerApi,
    plan: &Plan,
    own: &Watch<'_>,
    checked: &crate::network::Checked,
) -> std::result::Result<(Vec<String>, Vec<Intruder>), EngineError> {
    let accepted: BTreeMap<String, String> = plan
        .networks
        .iter()
        .map(|n| (n.name.clone(), n.id.clone()))
        .collect();
    let mut names: Vec<String> = accepted.keys().cloned().collect();
    names.push(own.link.to_string());
    names.extend(own.out.map(str::to_string));
    let mut listed = engine.list_network_members(&names, false).await?;
    let disconnected = guard(engine, own, &accepted, &mut listed, checked).await?;
    let connected = connect_members(engine, own.link, &accepted, &listed).await?;
    Ok((connected, disconnected))
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
            down: Vec::new(),
            disconnected: Vec::new(),
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
        // A container disconnected is said every time, quoted.
        let evil = Relinked {
            disconnected: vec![Intruder {
                name: "evil\u{1b}[2J".into(),
                network: OUT_NETWORK.into(),
                why: "it is not a sandbox of this user's odek".into(),
            }],
            ..Relinked::default()
        };
        let notes = evil.notes("odek-x");
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            notes[0].contains("odek-out")
                && notes[0].contains("evil")
                && !notes[0].contains('\u{1b}'),
            "{notes:?}"
        );
    }
}
