//! Resolve (SPEC §1): merge and validate the configuration, reach the daemon,
//! resolve networks and image into a [`Plan`]. Nothing is created.

use crate::config::names;
use std::collections::BTreeMap;

use crate::client::Client;
use crate::config::{self, ConfigError, ConfigInputs, SandboxMode, Settings, Source};
use crate::engine::{DockerApi, EndpointError};
use crate::error::{Error, Result};
use crate::failure::{FailureClass, Step};
use crate::image::{ImagePlan, ImageSource};
use crate::network::{self, NetworkSummary};
use crate::plan::{Fallback, Isolation, Plan, PLAN_SCHEMA};
use crate::warning::{Warning, WarningKind};

/// Receives warnings and progress as they happen (the CLI prints them to
/// stderr; bindings may collect them). Results carry the warnings too.
pub trait Reporter: Send + Sync {
    /// A warning (SPEC §4.3, §6.3).
    fn warning(&self, _w: &Warning) {}
    /// A progress line of a slow step (pull, build).
    fn progress(&self, _line: &str) {}
}

/// A reporter that drops everything.
pub struct Silent;

impl Reporter for Silent {}

impl Client {
    /// Resolves configuration, networks and image into a plan (SPEC §3–§5).
    ///
    /// Errors: config (class config); the daemon unreachable when fallback is
    /// not allowed (daemon-unreachable); the engine refusing a lookup
    /// (docker-rejected). When the daemon is unreachable and fallback is
    /// allowed the plan's isolation is [`Isolation::Fallback`] and a loud
    /// warning is reported.
    pub async fn resolve(&self, inputs: &ConfigInputs, reporter: &dyn Reporter) -> Result<Plan> {
        let mut settings = match config::load(inputs) {
            Ok(s) => s,
            Err(e @ ConfigError::InvalidComposeProject { .. }) => {
                return Err(match &self.engine {
                    Ok(engine) => network::with_running_projects(engine.as_ref(), e).await,
                    Err(_) => e,
                }
                .into())
            }
            Err(e) => return Err(e.into()),
        };
        let image = ImagePlan::choose(&settings)?;
        // A repository's Dockerfile.odek is a project setting like its
        // odek.json: only the operator may allow a host fallback (SPEC §6.3).
        if let (ImageSource::Dockerfile { path, .. }, SandboxMode::Implicit) =
            (&image.source, settings.mode.value)
        {
            settings.mode = config::Sourced::new(
                SandboxMode::Explicit,
                Source::Project { path: path.clone() },
            );
        }
        let mut plan = base_plan(&settings, image);
        for w in &plan.warnings {
            reporter.warning(w);
        }
        if settings.mode.value == SandboxMode::Off {
            plan.isolation = Isolation::Off;
            return Ok(plan);
        }
        // The plan's rule, asked of what the settings request (the
        // networks are not resolved yet).
        let fallback_ok = plan.fallback_allowed_attaching(settings.attaches_networks());
        let engine = match &self.engine {
            Ok(e) => e.clone(),
            Err(e @ EndpointError::NoSocket { .. }) => {
                let err = Error::Endpoint(e.clone());
                return fallback_or(plan, err, fallback_ok, reporter);
            }
            Err(e) => return Err(Error::Endpoint(e.clone())),
        };
        plan.endpoint = Some(engine.endpoint().to_string());
        let (owner, not_yours) = engine.endpoint().ownership();
        plan.endpoint_owner = owner;
        for w in not_yours
            .into_iter()
            .chain(engine.endpoint().transport_warning())
        {
            reporter.warning(&w);
            plan.warnings.push(w);
        }
        // SPEC §6.1 "workspace": a bind mount names a path on the engine's
        // machine; on another machine that is not the operator's working
        // directory, so nothing is created (before the engine is asked
        // anything more).
        if let Some(e) = engine
            .endpoint()
            .remote_bind_refusal(&settings.workspace, &plan.workdir)
        {
            return Err(e.into());
        }
        if let Some(v) = &settings.volumes {
            if let Some(e) = engine
                .endpoint()
                .remote_volumes_refusal(&v.value, &v.source)
            {
                return Err(e.into());
            }
        }
        match engine.version().await {
            Ok(info) if info.api_version < crate::engine::MIN_API_VERSION => {
                return Err(Error::Rejected {
                    fix: None,
                    step: Step::Ping,
                    message: format!(
                        "the engine speaks API {} at most; odek needs API {} or newer (Docker 19.03+)",
                        info.api_version,
                        crate::engine::MIN_API_VERSION
                    ),
                    removal: None,
                })
            }
            Ok(info) => plan.engine = Some(info),
            Err(e) => {
                let err = Error::engine(&engine.endpoint().to_string(), Step::Ping, e);
                if err.class() == FailureClass::DaemonUnreachable {
                    return fallback_or(plan, err, fallback_ok, reporter);
                }
                return Err(err);
            }
        }
        // Whose user the sandbox runs as (SPEC §6.1 "user"), whether the
        // engine has the runtime asked for and whether it (or the default)
        // is gVisor (SPEC §6.1 "runtime"), and the engine's ID an approval
        // binds (SPEC §7.3): `/info`, asked while the networks are looked
        // up, on every resolve.
        let defaulted = settings.user.is_none();
        let asks_runtime = settings.runtime.is_some();
        let (networks, security) = tokio::join!(
            network::resolve(
                engine.as_ref(),
                settings.networks.as_ref(),
                settings.compose_project.as_ref(),
                settings.stack.as_ref(),
            ),
            async { Some(engine.security().await) }
        );
        let networks = networks?;
        let mut engine_id = None;
        if let Some(security) = security {
            let security = match security {
                // A runtime was asked for and the engine will not say which
                // it has: refused, as an unknown one is.
                Err(e) if asks_runtime && !e.is_unreachable() => {
                    return Err(
                        unknown_runtime(&settings, engine.as_ref(), None, Some(&e.message)).into(),
                    )
                }
                Ok(s) => s,
                // A daemon that answers but will not say (a socket proxy
                // that forbids /info): the sandbox runs as the operator's
                // uid, never root — if the engine is rootless, the sandbox
                // may not be able to write /workspace, which it says.
                Err(e)
                    if e.kind == crate::engine::EngineErrorKind::Rejected
                        || e.kind == crate::engine::EngineErrorKind::NotFound =>
                {
                    let user = if defaulted {
                        "it did not say whether it runs rootless: the sandbox runs as your uid:gid; on a rootless engine set sandbox_user to root; "
                    } else {
                        ""
                    };
                    let w = Warning::new(
                        WarningKind::Other,
                        format!(
                            "the engine did not answer /info ({}): {user}odek cannot tell whether its default runtime is gVisor before create (the check after start still refuses one it sees), and an approval binds its address instead of its ID",
                            e.message
                        ),
                    );
                    reporter.warning(&w);
                    plan.warnings.push(w);
                    crate::engine::EngineSecurity::default()
                }
                Err(e) => return Err(Error::engine(&engine.endpoint().to_string(), Step::Ping, e)),
            };
            plan.engine_default_runtime = security.default_runtime.clone();
            engine_id = security.id.clone();
            // Podman's API service (SPEC §6.2.3): said on the startup line
            // and in `config view`, with the endpoint.
            if let (Some(release), Some(endpoint)) = (&security.podman, plan.endpoint.as_mut()) {
                endpoint.push_str(&format!(" [Podman {}]", crate::text::shown(release)));
            }
            if let Some(r) = &settings.runtime {
                // `runsc` the engine has not registered: registering it
                // would only meet the gVisor refusal below, so say that
                // one rather than how to register it.
                if !security.runtimes.contains(&r.value) && r.value == "runsc" {
                    return Err(ConfigError::InvalidValue {
                        origin: r.source.to_string(),
                        key: names::sandbox_runtime.into(),
                        reason: format!(
                            "\"runsc\" is gVisor, which odek refuses on any engine (the engine at {} has not registered it either), so nothing was created: {}",
                            crate::text::shown(engine.endpoint().to_string()),
                            crate::engine::GVISOR_UNSUPPORTED
                        ),
                    }
                    .into());
                }
                if !security.runtimes.contains(&r.value) {
                    return Err(
                        unknown_runtime(&settings, engine.as_ref(), Some(&security), None).into(),
                    );
                }
            }
            // gVisor, asked for or the engine's default: refused before
            // anything is created (SPEC §6.1 "runtime").
            let effective = settings
                .runtime
                .as_ref()
                .map(|r| r.value.clone())
                .or_else(|| security.default_runtime.clone());
            if let Some(r) = effective.filter(|r| security.gvisor.contains(r)) {
                let origin = settings
                    .runtime
                    .as_ref()
                    .map(|r| r.source.to_string())
                    .unwrap_or_else(|| "the engine's DefaultRuntime".into());
                return Err(ConfigError::InvalidValue {
                    origin,
                    key: names::sandbox_runtime.into(),
                    reason: format!(
                        "{} is gVisor (registered with a path to runsc) on the engine at {}, so nothing was created: {}",
                        crate::text::quote(&r),
                        crate::text::shown(engine.endpoint().to_string()),
                        crate::engine::GVISOR_UNSUPPORTED
                    ),
                }
                .into());
            }
            // Podman (SPEC §6.2.3): a sandbox that reaches networks needs a
            // link network without an address of the host and a way out
            // without inter-container traffic, which Podman cannot give.
            if let Some(release) = &security.podman {
                let asked = [
                    (
                        names::sandbox_compose_project,
                        settings
                            .compose_project
                            .as_ref()
                            .map(|s| s.source.to_string()),
                    ),
                    (
                        names::sandbox_networks,
                        settings.networks.as_ref().map(|s| s.source.to_string()),
                    ),
                    (
                        names::sandbox_stack,
                        settings.stack.as_ref().map(|s| s.source.to_string()),
                    ),
                    (
                        names::sandbox_egress,
                        settings.egress.as_ref().map(|s| s.source.to_string()),
                    ),
                ]
                .into_iter()
                .find_map(|(key, source)| source.map(|s| (key, s)));
                if let Some((key, origin)) = asked {
                    return Err(ConfigError::InvalidValue {
                        origin,
                        key: key.into(),
                        reason: format!(
                            "cannot be had on the engine at {}, which is Podman {}, so nothing was created: {}",
                            crate::text::shown(engine.endpoint().to_string()),
                            crate::text::shown(release),
                            crate::engine::PODMAN_LACKS_NETWORKS
                        ),
                    }
                    .into());
                }
                // Podman reads odek's seccomp profile from a file: one a
                // sandbox could write (its directory inside the working
                // directory or a volume) could be swapped while Podman
                // reads it.
                let dir = crate::engine::podman_seccomp_dir();
                let exposed = (settings.workspace.value == config::WorkspaceMode::Bind
                    && dir.starts_with(&plan.workdir))
                    || plan.volumes.iter().any(|v| dir.starts_with(&v.host));
                if exposed {
                    return Err(Error::Usage(format!(
                        "on Podman odek hands its seccomp profile over as a file in {}, which this sandbox could write (it lies in the working directory {} or a volume), so nothing was created; run odek from another directory, or set XDG_RUNTIME_DIR to your own private runtime directory",
                        crate::text::shown(&dir),
                        crate::text::shown(&plan.workdir)
                    )));
                }
            }
            // The operator named no user: the default of SPEC §6.1 "user".
            if defaulted {
                let (euid, egid) = crate::ownership::operator_ids();
                let (user, account, choice) = crate::account::default_user(
                    engine.endpoint().is_local(),
                    security.rootless,
                    euid,
                    egid,
                );
                if security.userns && user.is_some() {
                    let w = Warning::new(
                        WarningKind::Other,
                        "the engine remaps user namespaces (userns-remap): the sandbox's uids are other uids on the host, so it may not be able to write /workspace; set sandbox_user to the uid the remapping gives your user".to_string(),
                    );
                    reporter.warning(&w);
                    plan.warnings.push(w);
                }
                plan.user = user;
                plan.account = account;
                plan.user_choice = Some(choice);
            }
        }
        // SPEC §6.1 "user", §6.2.2: the account's /etc/passwd and
        // /etc/group are bind-mounted from $ODEK_HOME, a path on this
        // machine; a remote engine would mount whatever is at that path on
        // its own. The operator's uid:gid still applies, without an account.
        if plan.account.is_some() && !engine.endpoint().is_local() {
            plan.account = None;
            let w = Warning::new(
                WarningKind::Other,
                format!(
                    "sandbox_user {} gets no account (no passwd line, HOME or USER) on the engine at {}: its files are bind-mounted from this machine, which a remote engine cannot see; set sandbox_user to a user the image has to get one",
                    plan.user_shown(),
                    crate::text::shown(engine.endpoint().to_string())
                ),
            );
            reporter.warning(&w);
            plan.warnings.push(w);
        }
        let mode = settings.network.value;
        if mode == config::NetworkMode::Bridge {
            plan.bridge_network_id = Some(default_bridge_id(engine.as_ref()).await?);
        }
        plan.network_summary = NetworkSummary::of(mode, networks.len());
        plan.internet = network::internet_reachable(mode, &networks);
        for w in network::warnings(mode, &networks) {
            // In egress mode the sandbox reaches no attached network's
            // route out: its only network is its internal link network
            // (SPEC §4.5), so "can reach the internet" would be false.
            if settings.egress.is_some() && w.kind == crate::WarningKind::AttachedNetworkNotInternal
            {
                continue;
            }
            reporter.warning(&w);
            plan.warnings.push(w);
        }
        if let Some(w) = root_owned_warning(&settings, &plan) {
            reporter.warning(&w);
            plan.warnings.push(w);
        }
        plan.networks = networks;
        // SPEC §4.5: egress mode's only way out is the proxy.
        if let Some(allow) = &settings.egress {
            plan.egress = Some(
                crate::egress::resolve(engine.as_ref(), allow, settings.egress_network.as_ref())
                    .await?,
            );
            plan.internet = false;
        }
        plan.dns_forwarding = plan.planned_dns_forwarding();
        let binding = engine.endpoint().approval_binding(engine_id.as_deref());
        plan.approval = crate::approve::request(&settings, &plan, &binding)?;
        Ok(plan)
    }
}

/// The refusal of a `sandbox_runtime` the engine does not have (SPEC §6.1
/// "runtime"), before anything is created: class config, naming the
/// runtimes the engine has (`security`, when it said), the engine's own
/// words when it would not say (`why`), and how a runtime is registered.
pub(crate) fn unknown_runtime(
    settings: &Settings,
    engine: &dyn DockerApi,
    security: Option<&crate::engine::EngineSecurity>,
    why: Option<&str>,
) -> ConfigError {
    let asked = settings
        .runtime
        .as_ref()
        .map(|r| r.value.as_str())
        .unwrap_or_default();
    let origin = settings
        .runtime
        .as_ref()
        .map(|r| r.source.to_string())
        .unwrap_or_else(|| "plan".into());
    runtime_refusal(
        &origin,
        asked,
        &engine.endpoint().to_string(),
        security,
        why,
    )
}

/// [`unknown_runtime`]'s message for `asked` from `origin`, on the engine at
/// `endpoint`.
pub(crate) fn runtime_refusal(
    origin: &str,
    asked: &str,
    endpoint: &str,
    security: Option<&crate::engine::EngineSecurity>,
    why: Option<&str>,
) -> ConfigError {
    let has = match security {
        Some(s) if !s.runtimes.is_empty() => {
            let names: Vec<String> = s
                .runtimes
                .iter()
                .map(|r| {
                    let shown = crate::text::display_name(r);
                    match &s.default_runtime {
                        Some(d) if d == r => format!("{shown} (default)"),
                        _ => shown,
                    }
                })
                .collect();
            format!("it has {}", names.join(", "))
        }
        Some(_) => "it reports no runtimes".to_string(),
        None => format!(
            "it would not say which it has ({})",
            crate::text::shown(why.unwrap_or("no answer"))
        ),
    };
    ConfigError::InvalidValue {
        origin: origin.to_string(),
        key: names::sandbox_runtime.into(),
        reason: format!(
            "{} is not a runtime the engine at {} has registered ({has}), so nothing was created; choose one of those, or register it with the engine: add it under \"runtimes\" in the daemon's /etc/docker/daemon.json (e.g. \"crun\": {{\"path\": \"/usr/bin/crun\"}}) and restart or reload the daemon",
            crate::text::quote(asked),
            crate::text::shown(endpoint),
        ),
    }
}

/// A warning when the sandbox runs as a non-root user and the working
/// directory holds entries only root can change (an earlier sandbox that ran
/// as root may have left them): commands will fail on them with
/// "Permission denied", so the fix is named before they run.
fn root_owned_warning(settings: &Settings, plan: &Plan) -> Option<Warning> {
    let uid = plan
        .user
        .as_deref()?
        .split(':')
        .next()?
        .parse::<u32>()
        .ok()?;
    let found = &settings.root_owned;
    if uid == 0 || found.count == 0 {
        return None;
    }
    let gid = plan
        .user
        .as_deref()
        .and_then(|u| u.split_once(':'))
        .map_or(String::new(), |(_, g)| format!(":{g}"));
    let example = found
        .example
        .as_deref()
        .map(crate::text::shown)
        .unwrap_or_default();
    Some(Warning::new(
        WarningKind::Other,
        format!(
            "{} {} in the working directory belong{} to root and only root can change {} (e.g. {example}; an earlier sandbox that ran as root may have left them): the sandbox runs as uid {uid} and will get \"Permission denied\" there; fix: sudo chown -R {uid}{gid} {}",
            found.count,
            if found.count == 1 { "entry" } else { "entries" },
            if found.count == 1 { "s" } else { "" },
            if found.count == 1 { "it" } else { "them" },
            crate::text::shown(&settings.workdir),
        ),
    ))
}

/// The default bridge network's full ID.
async fn default_bridge_id(engine: &dyn DockerApi) -> Result<String> {
    let n = engine
        .inspect_network("bridge")
        .await
        .map_err(|e| Error::engine(&engine.endpoint().to_string(), Step::Ping, e))?;
    match n {
        Some(n)
            if n.name == "bridge"
                && n.options
                    .get("com.docker.network.bridge.default_bridge")
                    .map(String::as_str)
                    == Some("true") =>
        {
            Ok(n.id)
        }
        _ => Err(Error::Rejected {
            fix: None,
            step: Step::Ping,
            message: "the daemon has no default bridge network; use sandbox_network=none".into(),
            removal: None,
        }),
    }
}

/// Returns a fallback plan (with the loud warning) or the error.
fn fallback_or(mut plan: Plan, err: Error, allowed: bool, reporter: &dyn Reporter) -> Result<Plan> {
    if !allowed {
        return Err(err);
    }
    let fb = Fallback {
        class: err.class(),
        reason: err.to_string(),
    };
    let w = fallback_warning(&fb);
    reporter.warning(&w);
    plan.warnings.push(w);
    plan.isolation = Isolation::Fallback(fb);
    Ok(plan)
}

/// The multi-line warning of SPEC §6.3's loud fallback.
pub(crate) fn fallback_warning(fb: &Fallback) -> Warning {
    Warning::new(
        WarningKind::Fallback,
        format!(
            "!!! NO SANDBOX: commands will run ON THE HOST WITHOUT ISOLATION !!!\n\
             cause ({}): {}\n\
             to make this fatal: pass --sandbox or set ODEK_REQUIRE_SANDBOX=1; to run on the host knowingly: --no-sandbox",
            fb.class, fb.reason
        ),
    )
}

/// The plan fields that come straight from the settings.
fn base_plan(s: &Settings, image: ImagePlan) -> Plan {
    // Each key's winning source; keys with a default are shown even unset.
    let mut sources: BTreeMap<String, Source> = crate::config::KEYS
        .iter()
        .filter_map(|k| match s.sources.get(k.name) {
            Some(src) => Some((k.name.to_string(), src.clone())),
            None => k
                .always_shown
                .then(|| (k.name.to_string(), Source::Default)),
        })
        .collect();
    // The mode may come from a container-only setting (SPEC §6.3); the
    // image from the image plan (a Dockerfile.odek or the default).
    sources.insert(names::sandbox.to_string(), s.mode.source.clone());
    sources.insert(
        names::sandbox_image.into(),
        match &image.source {
            ImageSource::Explicit { source } => source.clone(),
            _ => Source::Default,
        },
    );
    let mut masks = Vec::new();
    let mut warnings = s.warnings.clone();
    // Nothing is mounted with the sandbox off.
    let mounted = s.mode.value != crate::config::SandboxMode::Off;
    if let (true, Ok(rel)) = (mounted, s.odek_home.strip_prefix(&s.workdir)) {
        let target = std::path::Path::new("/workspace").join(rel);
        masks.push(target.to_string_lossy().into_owned());
        warnings.push(Warning::new(
            WarningKind::OdekHomeMasked,
            format!(
                "$ODEK_HOME ({}) lies inside the working directory; the sandbox sees an empty read-only {} instead",
                crate::text::shown(&s.odek_home),
                crate::text::shown(&target)
            ),
        ));
    }
    Plan {
        schema: PLAN_SCHEMA.into(),
        mode: s.mode.value,
        isolation: Isolation::Container,
        workdir: s.workdir.clone(),
        workdir_id: s.workdir_id,
        odek_home: s.odek_home.clone(),
        endpoint: None,
        endpoint_owner: None,
        engine: None,
        image,
        network_mode: s.network.value,
        networks: Vec::new(),
        bridge_network_id: None,
        network_summary: NetworkSummary::of(s.network.value, 0),
        internet: s.network.value == config::NetworkMode::Bridge,
        dns_forwarding: None,
        egress: None,
        pids_limit: s.pids_limit.value,
        workspace: s.workspace.value,
        readonly: s.readonly.value,
        memory_bytes: Some(s.memory.value),
        cpus: s.cpus.as_ref().map(|c| c.value.clone()),
        user: s.user.as_ref().map(|u| u.value.clone()),
        user_choice: s
            .user
            .as_ref()
            .map(|_| crate::account::UserChoice::Operator),
        account: s
            .user
            .as_ref()
            .and_then(|u| crate::account::Account::for_user(&u.value)),
        runtime: s.runtime.as_ref().map(|r| r.value.clone()),
        engine_default_runtime: None,
        env: s.env.as_ref().map(|e| e.value.clone()).unwrap_or_default(),
        volumes: s
            .volumes
            .as_ref()
            .map(|v| v.value.clone())
            .unwrap_or_default(),
        masks,
        require_sandbox: s.require_sandbox,
        sources,
        warnings,
        approval: None,
        log_retention_days: u32::try_from(s.log_retention.value)
            .unwrap_or(crate::config::DEFAULT_LOG_RETENTION as u32),
    }
}
