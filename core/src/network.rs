//! Network resolution (SPEC §4.1): exact-name lookups, Compose projects and
//! Swarm stacks by server-side label filter, local bridges (and a stack's
//! attachable overlays) only, at most 8, full IDs from here on; and the
//! warnings of §4.3.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::config::advice::{Surface, MCP_PROJECTS_HINT};
use crate::config::{ConfigError, NetworkMode, Source, Sourced};
use crate::engine::{DockerApi, EngineError, NetworkFilter, NetworkInfo};
use crate::text::{quote, sanitize_name};
use crate::warning::{Warning, WarningKind};

/// Most networks a sandbox may attach (SPEC §4.1).
pub const MAX_NETWORKS: usize = 8;

/// The Compose project label.
pub(crate) const COMPOSE_PROJECT_LABEL: &str = "com.docker.compose.project";

/// The Swarm stack label `docker stack deploy` puts on a stack's networks
/// and services (SPEC §4.1).
pub(crate) const STACK_NAMESPACE_LABEL: &str = "com.docker.stack.namespace";

/// The label naming a Swarm task's service (`<stack>_<service>` for a
/// stack's; SPEC §4.4, §9.1).
pub const SWARM_SERVICE_LABEL: &str = "com.docker.swarm.service.name";

/// The name a Docker Swarm stack's task answers to on a sandbox's link
/// network besides its aliases (SPEC §4.4): its service's name in the stack —
/// the label `com.docker.swarm.service.name` without the `<stack>_` prefix
/// of the label `com.docker.stack.namespace` (`redis` for `app_redis`).
/// Swarm resolves a service's name on an overlay by its own records, not
/// by an endpoint alias, so inspect shows none to copy.
pub(crate) fn stack_service_alias(labels: &BTreeMap<String, String>) -> Option<String> {
    let ns = labels.get(STACK_NAMESPACE_LABEL)?;
    let full = labels.get(SWARM_SERVICE_LABEL)?;
    full.strip_prefix(&format!("{ns}_"))
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// Why a network was attached.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum NetworkOrigin {
    /// Named in `sandbox_networks`.
    Named {
        /// The name as requested.
        name: String,
        /// Which source named it.
        source: Source,
    },
    /// Carries the label of `sandbox_compose_project`.
    Compose {
        /// The project.
        project: String,
        /// Which source asked for the project.
        source: Source,
    },
    /// Carries the label of `sandbox_stack` (SPEC §4.1).
    Stack {
        /// The stack.
        stack: String,
        /// Which source asked for the stack.
        source: Source,
    },
}

impl NetworkOrigin {
    /// True when the project config asked for this network.
    pub(crate) fn is_project(&self) -> bool {
        match self {
            NetworkOrigin::Named { source, .. }
            | NetworkOrigin::Compose { source, .. }
            | NetworkOrigin::Stack { source, .. } => source.is_project(),
        }
    }
}

/// One network the container is attached to.
// Its JSON Schema keeps the name it had in launch.rs (ffi/schema, SPEC §10.4).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(rename = "AppliedNetwork")]
pub struct AttachedNetwork {
    /// Name.
    pub name: String,
    /// Full ID.
    pub id: String,
    /// `Internal`.
    pub internal: bool,
    /// Compose project label.
    pub compose_project: Option<String>,
}

/// A resolved network: from here on handled by its full ID (SPEC §4.1).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ResolvedNetwork {
    /// Name (for display only; may be any string a Compose file chose).
    pub name: String,
    /// Full ID: 64 hex digits; a swarm-scoped network's is Swarm's, 25
    /// characters of `[0-9a-z]`.
    pub id: String,
    /// `Internal`.
    pub internal: bool,
    /// Driver: `bridge`, or `overlay` for a Swarm stack's network.
    pub driver: String,
    /// The `com.docker.compose.project` label, if any.
    pub compose_project: Option<String>,
    /// Why it is attached (one or more sources).
    pub origins: Vec<NetworkOrigin>,
    /// Scope: `local`, or `swarm` for a stack's overlay (SPEC §4.1; part of
    /// what an approval binds, §7.3).
    #[serde(default = "local_scope")]
    pub scope: String,
    /// `Attachable` (always true for a swarm-scoped network once accepted;
    /// part of what an approval binds, §7.3).
    #[serde(default)]
    pub attachable: bool,
    /// The `com.docker.stack.namespace` label, if any (SPEC §4.1).
    #[serde(default)]
    pub stack: Option<String>,
}

fn local_scope() -> String {
    "local".into()
}

impl ResolvedNetwork {
    fn from_info(n: &NetworkInfo, origin: NetworkOrigin) -> ResolvedNetwork {
        ResolvedNetwork {
            name: n.name.clone(),
            id: n.id.clone(),
            internal: n.internal,
            driver: n.driver.clone(),
            compose_project: n.labels.get(COMPOSE_PROJECT_LABEL).cloned(),
            origins: vec![origin],
            scope: n.scope.clone(),
            attachable: n.attachable,
            stack: n.labels.get(STACK_NAMESPACE_LABEL).cloned(),
        }
    }

    /// What an approval key binds of this network (SPEC §7.3): its full ID,
    /// and for a network that is not local its scope and `Attachable` flag
    /// (`<ID>\0scope:swarm\0attachable:true`); a local network's part is its
    /// ID alone, as in earlier releases.
    pub(crate) fn key_part(&self) -> String {
        if self.scope == "local" {
            self.id.clone()
        } else {
            format!(
                "{}\0scope:{}\0attachable:{}",
                self.id, self.scope, self.attachable
            )
        }
    }

    /// The first 12 characters of the ID.
    pub(crate) fn short_id(&self) -> &str {
        short(&self.id)
    }

    /// The name for a message: [`sanitize_name`]'s result, or the short ID
    /// when the name is not safe to show (SPEC §9.3).
    pub(crate) fn display_name(&self) -> String {
        sanitize_name(&self.name).unwrap_or_else(|| self.short_id().to_string())
    }
}

fn short(id: &str) -> &str {
    &id[..id.len().min(12)]
}

/// Network resolution errors: all class `config` except engine failures.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum NetworkError {
    /// Docker matched the request by ID or ID prefix, not by name.
    #[error("network {requested} matched network {matched} by ID, not by name; ID-prefix lookups are refused; name the network (see `docker network ls`)")]
    IdPrefix {
        /// The request, quoted.
        requested: String,
        /// The network Docker matched, sanitised.
        matched: String,
    },
    /// No network has that name.
    #[error("network {name} not found ({}); create it, start the Compose project that defines it, or fix the name (see `docker network ls`)", crate::text::shown(.origin))]
    NotFound {
        /// The request, quoted.
        name: String,
        /// Where it was requested.
        origin: String,
    },
    /// Several networks carry the same exact name.
    #[error("network name {name} is ambiguous: {count} networks carry it (IDs {ids}); remove the duplicates (`docker network rm <id>`) so the name is unique")]
    Ambiguous {
        /// The name, quoted.
        name: String,
        /// How many.
        count: usize,
        /// Their short IDs.
        ids: String,
    },
    /// A driver or scope odek does not attach.
    #[error("network {name} uses driver {driver:?} with scope {scope:?}; only local bridge networks can be attached")]
    Unsupported {
        /// The name, sanitised.
        name: String,
        /// Driver.
        driver: String,
        /// Scope.
        scope: String,
    },
    /// A stack's swarm-scoped network that standalone containers may not
    /// join (SPEC §4.1).
    #[error("network {name} of Swarm stack {stack:?} is not attachable: only a stack network created with `attachable: true` can be reached by a sandbox; set `attachable: true` under `networks: {short}:` in the stack file and redeploy (`docker stack rm {stack}`, then `docker stack deploy -c <stack file> {stack}`: an existing overlay keeps its flags)")]
    NotAttachable {
        /// The network's name, sanitised.
        name: String,
        /// Its name in the stack file (the stack prefix removed), sanitised.
        short: String,
        /// The stack.
        stack: String,
    },
    /// No network carries the stack label.
    #[error("Swarm stack {stack:?} is not running on this engine: no network carries the label {STACK_NAMESPACE_LABEL}={stack} ({}){}; deploy it with `docker stack deploy -c <stack file> {stack}` on a manager of the swarm this engine belongs to (`docker stack ls` lists the stacks; a worker lists a stack's overlay only while it runs one of its tasks)", crate::text::shown(.origin), stack_hint(.running))]
    StackNotRunning {
        /// The stack.
        stack: String,
        /// Where it was requested.
        origin: String,
        /// The stacks whose networks this engine lists, as hints
        /// (sanitised, at most [`MAX_PROJECT_HINTS`] then `and N more`).
        running: Vec<String>,
    },
    /// No network carries the project label.
    #[error("Compose project {project:?} is not running: no network carries the label {COMPOSE_PROJECT_LABEL}={project} ({}){}; start it with `docker compose -p {project} -f <compose file> up -d` (or `docker-compose …`)", crate::text::shown(.origin), not_running_hint(.closest, .running))]
    ComposeNotRunning {
        /// The project.
        project: String,
        /// Where it was requested.
        origin: String,
        /// The running project whose name is nearest the request (a typo or
        /// a case difference), sanitised; none when nothing is near.
        closest: Option<String>,
        /// The running projects as hints (sanitised): at most
        /// [`MAX_PROJECT_HINTS`], closest first, then `and N more` when cut
        /// (see `project_hints`).
        running: Vec<String>,
    },
    /// More than [`MAX_NETWORKS`].
    #[error("{count} networks would be attached ({names}); at most {MAX_NETWORKS} are allowed: name fewer networks")]
    TooMany {
        /// How many.
        count: usize,
        /// Their names, sanitised.
        names: String,
    },
    /// The engine failed.
    #[error(transparent)]
    Engine(EngineError),
}

/// Looks names up by exact name (SPEC §4.1) with one list call for all of
/// them; returns one network per name, in order.
async fn lookup_names(
    engine: &dyn DockerApi,
    names: &[String],
    origin: &Source,
) -> Result<Vec<NetworkInfo>, NetworkError> {
    if names.is_empty() {
        return Ok(Vec::new());
    }
    let listed = engine
        .list_networks(&NetworkFilter::Names(names.to_vec()))
        .await
        .map_err(NetworkError::Engine)?;
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        let exact: Vec<&NetworkInfo> = listed.iter().filter(|n| n.name == *name).collect();
        match exact.len() {
            1 => out.push(exact[0].clone()),
            0 => {
                // Would Docker have answered by ID or ID prefix? Say so plainly.
                match engine
                    .inspect_network(name)
                    .await
                    .map_err(NetworkError::Engine)?
                {
                    Some(n) if n.name != *name => {
                        return Err(NetworkError::IdPrefix {
                            requested: quote(name),
                            matched: sanitize_name(&n.name)
                                .unwrap_or_else(|| short(&n.id).to_string()),
                        })
                    }
                    Some(n) => out.push(n),
                    None => {
                        return Err(NetworkError::NotFound {
                            name: quote(name),
                            origin: origin.to_string(),
                        })
                    }
                }
            }
            count => {
                return Err(NetworkError::Ambiguous {
                    name: quote(name),
                    count,
                    ids: exact
                        .iter()
                        .map(|n| short(&n.id))
                        .collect::<Vec<_>>()
                        .join(", "),
                })
            }
        }
    }
    Ok(out)
}

/// Refuses a project network whose name another network also carries (in
/// the project or not), naming every ID: Docker looks an attached network
/// up by name again when the container starts and refuses an ambiguous name
/// only then, after create. One list call for all names.
async fn unique_names(engine: &dyn DockerApi, listed: &[NetworkInfo]) -> Result<(), NetworkError> {
    let mut names: Vec<String> = listed.iter().map(|n| n.name.clone()).collect();
    names.sort();
    names.dedup();
    let same = engine
        .list_networks(&NetworkFilter::Names(names.clone()))
        .await
        .map_err(NetworkError::Engine)?;
    for name in &names {
        let mut ids: Vec<&str> = listed
            .iter()
            .chain(&same)
            .filter(|n| n.name == *name)
            .map(|n| n.id.as_str())
            .collect();
        ids.sort_unstable();
        ids.dedup();
        if ids.len() > 1 {
            return Err(NetworkError::Ambiguous {
                name: quote(name),
                count: ids.len(),
                ids: ids
                    .iter()
                    .map(|id| short(id))
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
    }
    Ok(())
}

fn check_driver(n: &NetworkInfo) -> Result<(), NetworkError> {
    if n.driver == "bridge" && n.scope == "local" {
        Ok(())
    } else {
        Err(NetworkError::Unsupported {
            name: sanitize_name(&n.name).unwrap_or_else(|| short(&n.id).to_string()),
            driver: n.driver.clone(),
            scope: n.scope.clone(),
        })
    }
}

/// A network of Swarm stack `stack`: a local bridge as any other, or a
/// swarm-scoped overlay that is `Attachable` (SPEC §4.1).
fn check_stack_network(n: &NetworkInfo, stack: &str) -> Result<(), NetworkError> {
    if n.driver == "overlay" && n.scope == "swarm" {
        if n.attachable {
            return Ok(());
        }
        let name = sanitize_name(&n.name).unwrap_or_else(|| short(&n.id).to_string());
        let prefix = format!("{stack}_");
        let short_name = n
            .name
            .strip_prefix(&prefix)
            .and_then(sanitize_name)
            .unwrap_or_else(|| name.clone());
        return Err(NetworkError::NotAttachable {
            name,
            short: short_name,
            stack: stack.to_string(),
        });
    }
    check_driver(n)
}

/// Every network carrying `label=value` (server-side filter, then the
/// label compared exactly), sorted by name then ID.
async fn labelled(
    engine: &dyn DockerApi,
    label: &str,
    value: &str,
) -> Result<Vec<NetworkInfo>, NetworkError> {
    let mut listed = engine
        .list_networks(&NetworkFilter::Label(format!("{label}={value}")))
        .await
        .map_err(NetworkError::Engine)?;
    // Trust the daemon's filter, but never a network whose label differs.
    listed.retain(|n| n.labels.get(label).map(String::as_str) == Some(value));
    listed.sort_by(|a, b| a.name.cmp(&b.name).then(a.id.cmp(&b.id)));
    Ok(listed)
}

/// Resolves `sandbox_networks`, `sandbox_compose_project` and
/// `sandbox_stack` to networks by full ID: union, de-duplicated by ID, in
/// request order then by name; at most [`MAX_NETWORKS`] (SPEC §4.1).
pub(crate) async fn resolve(
    engine: &dyn DockerApi,
    names: Option<&Sourced<Vec<String>>>,
    compose: Option<&Sourced<String>>,
    stack: Option<&Sourced<String>>,
) -> Result<Vec<ResolvedNetwork>, NetworkError> {
    let mut out: Vec<ResolvedNetwork> = Vec::new();
    let mut add = |n: &NetworkInfo, origin: NetworkOrigin| {
        if let Some(existing) = out.iter_mut().find(|r| r.id == n.id) {
            if !existing.origins.contains(&origin) {
                existing.origins.push(origin);
            }
        } else {
            out.push(ResolvedNetwork::from_info(n, origin));
        }
    };
    if let Some(names) = names {
        let found = lookup_names(engine, &names.value, &names.source).await?;
        for (name, n) in names.value.iter().zip(&found) {
            check_driver(n)?;
            add(
                n,
                NetworkOrigin::Named {
                    name: name.clone(),
                    source: names.source.clone(),
                },
            );
        }
    }
    if let Some(project) = compose {
        let mut listed = engine
            .list_networks(&NetworkFilter::Label(format!(
                "{COMPOSE_PROJECT_LABEL}={}",
                project.value
            )))
            .await
            .map_err(NetworkError::Engine)?;
        // Trust the daemon's filter, but never a network whose label differs.
        listed.retain(|n| n.labels.get(COMPOSE_PROJECT_LABEL) == Some(&project.value));
        if listed.is_empty() {
            let running = running_projects(engine).await;
            return Err(NetworkError::ComposeNotRunning {
                project: project.value.clone(),
                origin: project.source.to_string(),
                closest: closest_project(&project.value, &running),
                running: project_hints(&project.value, running),
            });
        }
        listed.sort_by(|a, b| a.name.cmp(&b.name).then(a.id.cmp(&b.id)));
        unique_names(engine, &listed).await?;
        for n in &listed {
            check_driver(n)?;
            add(
                n,
                NetworkOrigin::Compose {
                    project: project.value.clone(),
                    source: project.source.clone(),
                },
            );
        }
    }
    if let Some(stack) = stack {
        let listed = labelled(engine, STACK_NAMESPACE_LABEL, &stack.value).await?;
        if listed.is_empty() {
            let running = running_stacks(engine).await;
            return Err(NetworkError::StackNotRunning {
                stack: stack.value.clone(),
                origin: stack.source.to_string(),
                running: project_hints(&stack.value, running),
            });
        }
        unique_names(engine, &listed).await?;
        for n in &listed {
            check_stack_network(n, &stack.value)?;
            add(
                n,
                NetworkOrigin::Stack {
                    stack: stack.value.clone(),
                    source: stack.source.clone(),
                },
            );
        }
    }
    if out.len() > MAX_NETWORKS {
        return Err(NetworkError::TooMany {
            count: out.len(),
            names: out
                .iter()
                .map(ResolvedNetwork::display_name)
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    Ok(out)
}

/// The running Compose projects (label values, sanitised) as hints for a
/// misspelt project name. Best effort: empty when the engine fails.
pub(crate) async fn running_projects(engine: &dyn DockerApi) -> Vec<String> {
    let Ok(list) = engine
        .list_networks(&NetworkFilter::Label(COMPOSE_PROJECT_LABEL.into()))
        .await
    else {
        return Vec::new();
    };
    let mut v: Vec<String> = list
        .iter()
        .filter_map(|n| n.labels.get(COMPOSE_PROJECT_LABEL))
        .filter_map(|p| sanitize_name(p))
        .collect();
    v.sort();
    v.dedup();
    v
}

/// The stacks whose networks the engine lists (label values, sanitised) as
/// hints for a misspelt stack. Best effort: empty when the engine fails.
async fn running_stacks(engine: &dyn DockerApi) -> Vec<String> {
    let Ok(list) = engine
        .list_networks(&NetworkFilter::Label(STACK_NAMESPACE_LABEL.into()))
        .await
    else {
        return Vec::new();
    };
    let mut v: Vec<String> = list
        .iter()
        .filter_map(|n| n.labels.get(STACK_NAMESPACE_LABEL))
        .filter_map(|p| sanitize_name(p))
        .collect();
    v.sort();
    v.dedup();
    v
}

/// The "stacks it lists" part of [`NetworkError::StackNotRunning`]'s message.
fn stack_hint(running: &[String]) -> String {
    if running.is_empty() {
        "; this engine lists no stack network (is it in swarm mode? `docker info --format {{.Swarm.LocalNodeState}}`)".into()
    } else {
        format!("; stacks it lists: {}", running.join(", "))
    }
}

/// Most running Compose projects a hint names: the daemon may hold other
/// users' unrelated projects, so a hint names the nearest few and counts the
/// rest.
pub const MAX_PROJECT_HINTS: usize = 5;

/// Edit distance (Damerau–Levenshtein) between a requested project and a
/// running one, case-insensitive.
fn project_distance(wanted: &str, running: &str) -> usize {
    strsim::damerau_levenshtein(&wanted.to_lowercase(), &running.to_lowercase())
}

/// The running projects (sorted, de-duplicated, as [`running_projects`]
/// returns them) as hints for `wanted`: nearest first (ties by name), at most
/// [`MAX_PROJECT_HINTS`] names, then one last entry `and N more` when more
/// are running.
pub(crate) fn project_hints(wanted: &str, mut running: Vec<String>) -> Vec<String> {
    running.sort_by_cached_key(|p| (project_distance(wanted, p), p.clone()));
    let more = running.len().saturating_sub(MAX_PROJECT_HINTS);
    running.truncate(MAX_PROJECT_HINTS);
    if more > 0 {
        running.push(format!("and {more} more"));
    }
    running
}

/// The running project nearest `wanted`, when it is near enough to be a
/// typo: at most one edit for names up to four characters, two beyond, or
/// a difference of case only. Never `wanted` itself. Only a hint: a project
/// is never matched fuzzily.
pub(crate) fn closest_project(wanted: &str, running: &[String]) -> Option<String> {
    let limit = if wanted.chars().count() <= 4 { 1 } else { 2 };
    running
        .iter()
        .filter(|p| p.as_str() != wanted)
        .map(|p| (project_distance(wanted, p), p))
        .filter(|(d, _)| *d <= limit)
        .min()
        .map(|(_, p)| p.clone())
}

impl NetworkError {
    /// The message in `surface`'s words: `odek mcp` names no other Compose
    /// project on the daemon (no "did you mean", no running projects), so a
    /// model learns nothing of projects it was not given.
    pub fn render(&self, surface: Surface) -> String {
        match self {
            NetworkError::ComposeNotRunning {
                project, origin, ..
            } if surface == Surface::Mcp => {
                format!(
                    "Compose project {project:?} is not running: no network carries the label {COMPOSE_PROJECT_LABEL}={project} ({}); {MCP_PROJECTS_HINT}; start it with `docker compose -p {project} -f <compose file> up -d` (or `docker-compose …`)",
                    crate::text::shown(origin)
                )
            }
            other => other.to_string(),
        }
    }
}

/// The ", did you mean" and "running projects" part of
/// [`NetworkError::ComposeNotRunning`]'s message.
fn not_running_hint(closest: &Option<String>, running: &[String]) -> String {
    let mut s = String::new();
    if let Some(c) = closest {
        s.push_str(&format!("; did you mean {c:?}?"));
    }
    if running.is_empty() {
        s.push_str("; no Compose project is running");
    } else {
        s.push_str(&format!("; running projects: {}", running.join(", ")));
    }
    s
}

/// Adds the running projects to an invalid-project-name error: nearest the
/// normalised spelling first, at most [`MAX_PROJECT_HINTS`] (see
/// [`project_hints`]).
pub(crate) async fn with_running_projects(engine: &dyn DockerApi, e: ConfigError) -> ConfigError {
    match e {
        ConfigError::InvalidComposeProject {
            origin,
            value,
            normalized,
            ..
        } => {
            let near = normalized
                .clone()
                .unwrap_or_else(|| value.trim_matches('"').to_lowercase());
            ConfigError::InvalidComposeProject {
                origin,
                value,
                normalized,
                running: project_hints(&near, running_projects(engine).await),
            }
        }
        other => other,
    }
}

/// How the container is networked (SPEC §4.2 names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum NetworkSummary {
    /// `NetworkMode=none`, nothing attached.
    None,
    /// The default bridge only.
    Bridge,
    /// Attached networks only.
    Attached,
    /// The default bridge plus attached networks.
    BridgeAttached,
}

impl NetworkSummary {
    /// From the mode and the attached networks.
    pub(crate) fn of(mode: NetworkMode, attached: usize) -> NetworkSummary {
        match (mode, attached) {
            (NetworkMode::None, 0) => NetworkSummary::None,
            (NetworkMode::Bridge, 0) => NetworkSummary::Bridge,
            (NetworkMode::None, _) => NetworkSummary::Attached,
            (NetworkMode::Bridge, _) => NetworkSummary::BridgeAttached,
        }
    }

    /// The startup-line word (SPEC §6.4).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            NetworkSummary::None => "none",
            NetworkSummary::Bridge => "bridge",
            NetworkSummary::Attached => "attached",
            NetworkSummary::BridgeAttached => "bridge+attached",
        }
    }

    /// The §4.2 table's name.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            NetworkSummary::None => "no network",
            NetworkSummary::Bridge => "the default bridge network",
            NetworkSummary::Attached => "attached networks only",
            NetworkSummary::BridgeAttached => "the default bridge plus attached networks",
        }
    }
}

impl std::fmt::Display for NetworkSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether the internet is reachable (SPEC §4.2).
pub(crate) fn internet_reachable(mode: NetworkMode, attached: &[ResolvedNetwork]) -> bool {
    mode == NetworkMode::Bridge || attached.iter().any(|n| !n.internal)
}

/// The warnings of SPEC §4.3 for a network decision.
pub(crate) fn warnings(mode: NetworkMode, attached: &[ResolvedNetwork]) -> Vec<Warning> {
    let mut w = Vec::new();
    for n in attached.iter().filter(|n| !n.internal) {
        w.push(Warning::new(
            WarningKind::AttachedNetworkNotInternal,
            format!(
                "network {} is not internal: the sandbox can reach the internet through it",
                n.display_name()
            ),
        ));
    }
    if mode == NetworkMode::Bridge {
        if !attached.is_empty() {
            w.push(Warning::new(
                WarningKind::BridgeWithAttached,
                "sandbox_network=bridge is combined with attached networks: the sandbox has the default bridge as well",
            ));
        }
        w.push(Warning::new(
            WarningKind::BridgeReachesHost,
            "the default bridge is not isolated from the host: it reaches the Docker gateway, services bound on the host and cloud metadata endpoints",
        ));
    }
    w
}

/// The IDs this process accepted for planned networks recreated since
/// launch, by sandbox name and network name (`Client::relink`, SPEC §4.4).
#[derive(Clone, Debug, Default)]
pub(crate) struct AcceptedNetworks(Arc<Mutex<BTreeMap<String, BTreeMap<String, String>>>>);

impl AcceptedNetworks {
    pub(crate) fn get(&self, sandbox: &str) -> BTreeMap<String, String> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(sandbox)
            .cloned()
            .unwrap_or_default()
    }

    /// The planned networks `planned` of sandbox `sandbox` by name, with
    /// the IDs this process accepted since launch.
    pub(crate) fn current(
        &self,
        sandbox: &str,
        planned: &[ResolvedNetwork],
    ) -> BTreeMap<String, String> {
        let mut m: BTreeMap<String, String> = planned
            .iter()
            .map(|n| (n.name.clone(), n.id.clone()))
            .collect();
        m.extend(self.get(sandbox));
        m
    }

    pub(crate) fn set(&self, sandbox: &str, name: &str, id: &str) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(sandbox.to_string())
            .or_default()
            .insert(name.to_string(), id.to_string());
    }
}

/// The link-network endpoints (by `EndpointID`, new at every connect)
/// whose aliases a process has checked: an endpoint keeps its aliases for
/// its life, so each is inspected once per process (`crate::link`'s
/// member check, SPEC §4.4).
#[derive(Clone, Debug, Default)]
pub(crate) struct Checked(std::sync::Arc<std::sync::Mutex<std::collections::BTreeSet<String>>>);

impl Checked {
    pub(crate) fn has(&self, endpoint: &str) -> bool {
        !endpoint.is_empty()
            && self
                .0
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .contains(endpoint)
    }

    pub(crate) fn add(&self, endpoint: &str) {
        if !endpoint.is_empty() {
            self.0
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(endpoint.to_string());
        }
    }
}
