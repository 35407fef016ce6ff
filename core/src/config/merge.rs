//! Merging the sources of SPEC §3.2 into the settings actually applied.
//!
//! Precedence, lowest first: defaults < user config < project config < env <
//! flags (or values given through the API, which rank as flags). For each key
//! the highest source that sets it wins as a whole (objects and lists are not
//! merged across sources). The project can only tighten: `sandbox: false` and
//! `sandbox_readonly: false` from the project are ignored with a warning, and
//! its `sandbox_pids_limit` and `sandbox_memory` apply only when lower than
//! defaults + user.

use crate::config::names;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{
    env_var_of, interpolate, parse_cpus, parse_file, parse_memory, parse_network_mode,
    parse_project_file, resolve_volume, validate_compose_project, validate_env_key,
    validate_network_name, validate_pids_limit, validate_stack, validate_user, ConfigError,
    CpuLimit, EnvVar, Layer, NetworkMode, SandboxMode, Source, Sourced, VolumeMount,
};
use crate::warning::{Warning, WarningKind};

/// Default `sandbox_pids_limit` (SPEC §3.1).
pub(crate) const DEFAULT_PIDS_LIMIT: i64 = 4096;

/// Default `sandbox_memory` as written in docs and messages: every sandbox
/// gets a memory limit, so one agent cannot take the host's memory. The
/// operator may set any other size; a project may only lower it.
pub const DEFAULT_MEMORY: &str = "4g";

/// [`DEFAULT_MEMORY`] in bytes (4 GiB).
pub const DEFAULT_MEMORY_BYTES: i64 = 4 << 30;

/// What [`load`] reads. The environment is a snapshot so the result does not
/// depend on when it is called and tests need no process-wide state.
#[derive(Clone, Debug, Default)]
pub struct ConfigInputs {
    /// The working directory (mounted at `/workspace`; holds `odek.json`).
    pub workdir: PathBuf,
    /// The process environment (`ODEK_*`, `HOME`, and host variables for
    /// `${…}` interpolation in `sandbox_env`).
    pub env: BTreeMap<String, String>,
    /// Operator settings from flags (or the API), highest precedence.
    pub flags: Layer,
    /// The flag name of each key set in `flags` (for source display), e.g.
    /// `sandbox_pids_limit` → `--sandbox-pids-limit`. Keys missing here are
    /// shown as [`Source::Api`].
    pub flag_names: BTreeMap<String, String>,
    /// Read `$ODEK_HOME/config.json`.
    pub read_user_config: bool,
    /// Read `./odek.json`.
    pub read_project_config: bool,
}

impl ConfigInputs {
    /// Inputs for `workdir` with the process environment, both config files,
    /// and no flags.
    pub fn from_process(workdir: impl Into<PathBuf>) -> ConfigInputs {
        ConfigInputs {
            workdir: workdir.into(),
            env: std::env::vars().collect(),
            flags: Layer::default(),
            flag_names: BTreeMap::new(),
            read_user_config: true,
            read_project_config: true,
        }
    }

    /// Forces the sandbox on for a front end that never runs commands on
    /// the host (SPEC §6.3: the mode becomes explicit, so no fallback):
    /// `odek sandbox up`, `odek mcp`, a library request that does not allow
    /// the fallback. A flag that already decides stays as given: an
    /// explicit `--sandbox` keeps its name, and an explicit off is kept and
    /// reported as [`SandboxTurnedOff`], for the caller to refuse or honour.
    /// `by` names who forced it where the setting's source is shown (e.g.
    /// `odek mcp (implies --sandbox)`); `None` shows it as set by the API.
    ///
    /// # Errors
    /// [`SandboxTurnedOff`]: the flags turned the sandbox off explicitly.
    pub fn force_sandbox(&mut self, by: Option<&str>) -> Result<(), SandboxTurnedOff> {
        match self.flags.sandbox {
            Some(false) => Err(SandboxTurnedOff),
            Some(true) => Ok(()),
            None => {
                self.flags.sandbox = Some(true);
                if let Some(by) = by {
                    self.flag_names.insert(names::sandbox.into(), by.into());
                }
                Ok(())
            }
        }
    }
}

/// The flags turned the sandbox off explicitly where a front end forces it
/// on ([`ConfigInputs::force_sandbox`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SandboxTurnedOff;

/// The merged, validated settings (before any Docker lookup).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Settings {
    /// Absolute, canonical working directory.
    pub workdir: PathBuf,
    /// Its identity when it was validated (`None` with the sandbox off:
    /// nothing is mounted then).
    pub workdir_id: Option<super::FileId>,
    /// `$ODEK_HOME` (user config and approvals).
    pub odek_home: PathBuf,
    /// Sandbox mode (SPEC §3.3).
    pub mode: Sourced<SandboxMode>,
    /// `sandbox_image`.
    pub image: Option<Sourced<String>>,
    /// `sandbox_network` after lenient downgrade.
    pub network: Sourced<NetworkMode>,
    /// `sandbox_network` as written by the winning source (approval key, §7.3).
    pub network_raw: Option<Sourced<String>>,
    /// `sandbox_networks` (validated names).
    pub networks: Option<Sourced<Vec<String>>>,
    /// `sandbox_compose_project`.
    pub compose_project: Option<Sourced<String>>,
    /// `sandbox_stack`: a Docker Swarm stack (SPEC §4.1).
    #[serde(default)]
    pub stack: Option<Sourced<String>>,
    /// `sandbox_pids_limit` (≥ 1).
    pub pids_limit: Sourced<i64>,
    /// `sandbox_readonly`.
    pub readonly: Sourced<bool>,
    /// `sandbox_memory` in bytes ([`DEFAULT_MEMORY`] when no source sets it).
    pub memory: Sourced<i64>,
    /// `sandbox_cpus`.
    pub cpus: Option<Sourced<CpuLimit>>,
    /// `sandbox_user`.
    pub user: Option<Sourced<String>>,
    /// `sandbox_runtime`: the OCI runtime asked for (`None`: the engine's
    /// default). Whether the engine has it is checked at resolve.
    #[serde(default)]
    pub runtime: Option<Sourced<String>>,
    /// `sandbox_env`, sorted by key.
    pub env: Option<Sourced<Vec<EnvVar>>>,
    /// `sandbox_volumes`.
    pub volumes: Option<Sourced<Vec<VolumeMount>>>,
    /// `sandbox_egress` (each entry checked by
    /// [`odek_egress::policy::Rule::parse`]): egress mode when set, even
    /// empty (SPEC §4.5).
    #[serde(default)]
    pub egress: Option<Sourced<Vec<String>>>,
    /// True when the applied `sandbox_egress` is the project's and only
    /// narrows the user config's (every entry covered by one of the
    /// operator's), or is empty while the user config has none (egress
    /// mode off: the empty list only takes the way out away): then it
    /// needs no approval (SPEC §3.2).
    #[serde(default)]
    pub egress_narrows: bool,
    /// `sandbox_egress_network`: the network through which the proxy
    /// reaches out (`bridge`: the engine's default bridge, the default).
    #[serde(default)]
    pub egress_network: Option<Sourced<String>>,
    /// `sandbox_pool`: ready sandboxes kept per plan (0 = off, at most
    /// [`super::MAX_POOL`]); not part of the plan, so the pool's size
    /// never changes which pool a plan claims from.
    #[serde(default = "no_pool")]
    pub pool: Sourced<i64>,
    /// `sandbox_log_retention`: days a sandbox's record is kept after it
    /// ended (0 = removed when it ends; [`super::DEFAULT_LOG_RETENTION`]
    /// when no source sets it). Only the operator's sources count: a
    /// project's value is ignored with a warning.
    #[serde(default = "default_log_retention")]
    pub log_retention: Sourced<i64>,
    /// `sandbox_workspace` (SPEC §6.1 "workspace"): bind (the default) or
    /// copy. Only the operator's sources count: a project's value is
    /// ignored with a warning.
    #[serde(default = "default_workspace")]
    pub workspace: Sourced<super::WorkspaceMode>,
    /// SHA-256 of the applied `sandbox_env` as written (`KEY\0template\0`…,
    /// sorted), before interpolation: binds a trust to the templates, so a
    /// changed value asks again (SPEC §7.3 keys cover env names only).
    pub env_template_sha256: Option<String>,
    /// The source of each key some source sets, by key: the
    /// highest-precedence one (after the project-can-only-tighten rules).
    #[serde(default)]
    pub sources: BTreeMap<String, Source>,
    /// `ODEK_REQUIRE_SANDBOX=1`: both fallback classes are fatal.
    pub require_sandbox: bool,
    /// `ODEK_APPROVE_PROJECT_SANDBOX=1`: approve project settings without asking.
    pub approve_project: bool,
    /// Warnings raised while merging.
    pub warnings: Vec<Warning>,
    /// What in the working directory belongs to root and only root can
    /// change (seen by the working-directory scan; empty with the sandbox
    /// off).
    #[serde(default)]
    pub root_owned: super::RootOwned,
}

impl Settings {
    /// True when any network is to be attached (by any source): fallback to
    /// the host is then impossible (SPEC §6.3).
    pub(crate) fn attaches_networks(&self) -> bool {
        self.networks.as_ref().is_some_and(|n| !n.value.is_empty())
            || self.compose_project.is_some()
            || self.stack.is_some()
            || self.egress.is_some()
    }
}

/// A process-level switch ([`super::parse::env_bool`]); unset or empty is
/// false.
pub(crate) fn truthy(env: &BTreeMap<String, String>, var: &str) -> Result<bool, ConfigError> {
    super::parse::env_bool(env.get(var).map(String::as_str))
        .map(|b| b.unwrap_or(false))
        .map_err(|reason| ConfigError::InvalidValue {
            origin: format!("env {var}"),
            key: var.to_string(),
            reason,
        })
}

/// `ODEK_APPROVE_PROJECT_SANDBOX`: when true (`1`), project settings that
/// need approval are approved for this run without asking (SPEC §7).
pub const APPROVE_ENV: &str = "ODEK_APPROVE_PROJECT_SANDBOX";

/// The process-level switches odek reads from the environment besides the
/// per-key variables of [`env_var_of`] (SPEC §3.1, CONFIG.md).
pub const PROCESS_ENV_VARS: &[&str] = &[
    "ODEK_REQUIRE_SANDBOX",
    "ODEK_SANDBOX_NETWORK_LENIENT",
    APPROVE_ENV,
    "ODEK_HOME",
    "ODEK_DOCKER_TIMEOUT",
    super::validate::SUPERVISOR_ENV,
    super::validate::EGRESS_ENV,
];

/// One source's layer with its [`Source`] per key.
struct Ranked {
    layer: Layer,
    /// Source for a key of this layer.
    source: Box<dyn Fn(&str) -> Source>,
}

/// Picks the highest-precedence value of one key.
fn pick<T: Clone>(
    ranked: &[Ranked],
    key: &str,
    get: impl Fn(&Layer) -> Option<T>,
) -> Option<Sourced<T>> {
    ranked
        .iter()
        .rev()
        .find_map(|r| get(&r.layer).map(|v| Sourced::new(v, (r.source)(key))))
}

/// The source of the highest-precedence setting that only a container can
/// honour, if any.
fn container_only_setting(ranked: &[Ranked]) -> Option<Source> {
    let keys = super::container_only_keys();
    ranked.iter().rev().find_map(|r| {
        keys.iter()
            .find(|k| r.layer.asks_for(k.name))
            .map(|k| (r.source)(k.name))
    })
}

/// The project config's source when it sets any key (after the
/// project-can-only-tighten rules dropped what it may not set).
fn project_setting(ranked: &[Ranked]) -> Option<Source> {
    ranked.iter().find_map(|r| {
        super::KEYS
            .iter()
            .find(|k| r.layer.sets(k.name))
            .map(|k| (r.source)(k.name))
            .filter(Source::is_project)
    })
}

/// Where a source's values are described in messages.
fn origin(src: &Source) -> String {
    src.to_string()
}

/// Loads, merges and validates the configuration (SPEC §3).
///
/// Errors ([`ConfigError`], class `config`): unreadable or malformed config
/// files (naming file, line, column), invalid values of any source, networks
/// configured while the sandbox is off. Nothing touches Docker.
pub fn load(inputs: &ConfigInputs) -> Result<Settings, ConfigError> {
    let workdir = canonical_workdir(&inputs.workdir)?;
    let env = &inputs.env;
    // Compare real paths: $ODEK_HOME may sit behind a symlink into the
    // workdir, or not exist yet.
    let odek_home = real_path(&odek_home(env)?);
    let mut warnings = Vec::new();
    let ranked = ranked_layers(inputs, &workdir, &odek_home, &mut warnings)?;

    // Validate every value any source gives, not only the winner: a broken
    // value anywhere is a misconfiguration the user should hear about.
    let lenient = truthy(env, "ODEK_SANDBOX_NETWORK_LENIENT")?;
    for r in &ranked {
        validate_layer(r, &workdir, lenient)?;
    }

    let mut workdir_id = None;
    let mut root_owned = super::RootOwned::default();
    let mode = sandbox_mode(&ranked);
    if mode.value == SandboxMode::Off {
        // Nothing is mounted on the host; say what cannot be honoured there.
        if let Some(source) = container_only_setting(&ranked) {
            warnings.push(Warning::new(
                WarningKind::Other,
                format!(
                    "the sandbox is off ({}): {source} applies only inside a container and is ignored on the host",
                    mode.source
                ),
            ));
        }
    } else {
        // The workdir is mounted at /workspace: it must be a project directory.
        // Its identity is recorded around the validation, which reads it by
        // path, so launch can tell it is still the directory checked here.
        let id = super::identify(&workdir)?;
        root_owned = super::validate_workdir(&workdir, env.get("HOME").map(Path::new))?;
        super::still(&workdir, id)?;
        odek_home_depth(&odek_home, &workdir)?;
        workdir_id = Some(id);
    }

    let network_raw = pick(&ranked, names::sandbox_network, |l| {
        l.sandbox_network.clone()
    });
    let network = network_setting(network_raw.clone(), &mut warnings);
    let pids_limit = pick(&ranked, names::sandbox_pids_limit, |l| l.sandbox_pids_limit)
        .unwrap_or_else(|| Sourced::new(DEFAULT_PIDS_LIMIT, Source::Default));
    let readonly = pick(&ranked, names::sandbox_readonly, |l| l.sandbox_readonly)
        .unwrap_or_else(|| Sourced::new(false, Source::Default));
    // The default is not a setting anyone asked for: it does not make the
    // mode explicit (container_only_setting reads the sources only) and is
    // simply not applied on the host.
    let memory = pick(&ranked, names::sandbox_memory, |l| l.sandbox_memory.clone())
        .map(|s| {
            parse_memory(&origin(&s.source), &s.value).map(|b| Sourced::new(b, s.source.clone()))
        })
        .transpose()?
        .unwrap_or_else(|| Sourced::new(DEFAULT_MEMORY_BYTES, Source::Default));
    let cpus = pick(&ranked, names::sandbox_cpus, |l| l.sandbox_cpus.clone())
        .map(|s| {
            parse_cpus(&origin(&s.source), &s.value).map(|c| Sourced::new(c, s.source.clone()))
        })
        .transpose()?;
    let (env_vars, env_template_sha256) = env_setting(&ranked, env)?;
    let volumes = volumes_setting(&ranked, &workdir, &odek_home)?;

    let egress = pick(&ranked, names::sandbox_egress, |l| l.sandbox_egress.clone());
    let egress_narrows = egress.as_ref().is_some_and(|e| {
        e.source.is_project()
            && ranked
                .iter()
                .filter(|r| (r.source)(names::sandbox_egress).is_user())
                .find_map(|r| r.layer.sandbox_egress.clone())
                .map_or_else(
                    // Without a list of the operator's, egress mode is off:
                    // only an empty project list (no way out at all)
                    // narrows that; a host would add the proxy's way out
                    // to a sandbox whose networks may all be internal.
                    || odek_egress::policy::parse_rules(&e.value).is_ok_and(|r| r.is_empty()),
                    |user| match (
                        odek_egress::policy::parse_rules(&user),
                        odek_egress::policy::parse_rules(&e.value),
                    ) {
                        (Ok(wide), Ok(narrow)) => odek_egress::policy::narrows(&wide, &narrow),
                        _ => false,
                    },
                )
    });
    let sources = super::KEYS
        .iter()
        .filter_map(|k| {
            let r = ranked.iter().rev().find(|r| r.layer.sets(k.name))?;
            Some((k.name.to_string(), (r.source)(k.name)))
        })
        .collect();
    let settings = Settings {
        sources,
        workdir,
        workdir_id,
        odek_home,
        mode,
        image: pick(&ranked, names::sandbox_image, |l| l.sandbox_image.clone()),
        network,
        network_raw,
        env_template_sha256,
        networks: pick(&ranked, names::sandbox_networks, |l| {
            l.sandbox_networks.clone()
        }),
        compose_project: pick(&ranked, names::sandbox_compose_project, |l| {
            l.sandbox_compose_project.clone()
        }),
        stack: pick(&ranked, names::sandbox_stack, |l| l.sandbox_stack.clone()),
        pids_limit,
        readonly,
        memory,
        cpus,
        user: pick(&ranked, names::sandbox_user, |l| l.sandbox_user.clone()),
        runtime: pick(&ranked, names::sandbox_runtime, |l| {
            l.sandbox_runtime.clone()
        }),
        env: env_vars,
        volumes,
        egress,
        egress_narrows,
        egress_network: pick(&ranked, names::sandbox_egress_network, |l| {
            l.sandbox_egress_network.clone()
        }),
        pool: pick(&ranked, names::sandbox_pool, |l| l.sandbox_pool).unwrap_or_else(no_pool),
        log_retention: pick(&ranked, names::sandbox_log_retention, |l| {
            l.sandbox_log_retention
        })
        .unwrap_or_else(default_log_retention),
        workspace: pick(&ranked, names::sandbox_workspace, |l| {
            l.sandbox_workspace.clone()
        })
        .map(|s| {
            super::parse_workspace_mode(&origin(&s.source), &s.value)
                .map(|m| Sourced::new(m, s.source.clone()))
        })
        .transpose()?
        .unwrap_or_else(default_workspace),
        require_sandbox: truthy(env, "ODEK_REQUIRE_SANDBOX")?,
        approve_project: truthy(env, APPROVE_ENV)?,
        warnings,
        root_owned,
    };
    no_networks_without_sandbox(&settings)?;
    no_bridge_with_egress(&settings)?;
    Ok(settings)
}

/// The default `sandbox_workspace`: bind.
fn default_workspace() -> Sourced<super::WorkspaceMode> {
    Sourced::new(super::WorkspaceMode::Bind, Source::Default)
}

/// The default `sandbox_pool`: off.
fn no_pool() -> Sourced<i64> {
    Sourced::new(0, Source::Default)
}

/// The default `sandbox_log_retention` ([`super::DEFAULT_LOG_RETENTION`] days).
fn default_log_retention() -> Sourced<i64> {
    Sourced::new(super::DEFAULT_LOG_RETENTION, Source::Default)
}

/// `sandbox_log_retention` from the operator's sources alone — the user
/// config `$ODEK_HOME/config.json` and `ODEK_SANDBOX_LOG_RETENTION` in
/// `env` (a project's value never counts) — for a command that prunes
/// sandbox records without resolving a project (`odek sandbox log`).
/// Nothing else is read or validated.
///
/// Errors ([`ConfigError`]): `$ODEK_HOME` or its `config.json` not
/// private to the user, a malformed user config, a value of the wrong type
/// or out of range.
pub fn log_retention(env: &BTreeMap<String, String>) -> Result<Sourced<i64>, ConfigError> {
    let odek_home = real_path(&odek_home(env)?);
    let inputs = ConfigInputs {
        env: env.clone(),
        read_user_config: true,
        read_project_config: false,
        ..ConfigInputs::default()
    };
    let ranked = ranked_layers(&inputs, Path::new("/"), &odek_home, &mut Vec::new())?;
    let picked = pick(&ranked, names::sandbox_log_retention, |l| {
        l.sandbox_log_retention
    });
    match picked {
        Some(s) => {
            super::validate_log_retention(&origin(&s.source), s.value)?;
            Ok(s)
        }
        None => Ok(default_log_retention()),
    }
}

/// The working directory made real (`canonicalize`); errors: it does not
/// exist or is not a directory ([`ConfigError::Workdir`], with the fix).
fn canonical_workdir(dir: &Path) -> Result<PathBuf, ConfigError> {
    let workdir = dir.canonicalize().map_err(|e| ConfigError::Workdir {
        path: dir.to_path_buf(),
        reason: format!("{e}; "),
        fix: Some(crate::config::advice::Fix::PassOrEnterWorkdir {
            dir: "an existing project directory".into(),
        }),
    })?;
    if !workdir.is_dir() {
        return Err(ConfigError::Workdir {
            path: workdir,
            reason: "not a directory; ".into(),
            fix: Some(crate::config::advice::Fix::PassWorkdir {
                dir: "the project directory".into(),
            }),
        });
    }
    Ok(workdir)
}

/// The sources in rising precedence (SPEC §3.3): the user config (its
/// `$ODEK_HOME` and file private), the project's `odek.json` (tightened),
/// the `ODEK_*` variables, the flags. Also refuses an invalid
/// `ODEK_DOCKER_TIMEOUT` here, before any Engine call.
fn ranked_layers(
    inputs: &ConfigInputs,
    workdir: &Path,
    odek_home: &Path,
    warnings: &mut Vec<Warning>,
) -> Result<Vec<Ranked>, ConfigError> {
    let env = &inputs.env;
    let mut ranked: Vec<Ranked> = Vec::new();
    let mut user_layer = Layer::default();
    if inputs.read_user_config {
        let path = odek_home.join("config.json");
        for (what, p) in [("$ODEK_HOME", odek_home), ("user config", &path)] {
            crate::ownership::check_private(p).map_err(|reason| ConfigError::NotPrivate {
                what: what.into(),
                path: p.to_path_buf(),
                reason,
            })?;
        }
        if let Some((layer, w)) = parse_file(&path)? {
            warnings.extend(w);
            user_layer = layer.clone();
            let p = path.clone();
            ranked.push(Ranked {
                layer,
                source: Box::new(move |_| Source::User { path: p.clone() }),
            });
        }
    }
    if let Some(t) = env.get("ODEK_DOCKER_TIMEOUT").filter(|t| !t.is_empty()) {
        if let Err(reason) = super::parse_docker_timeout(t) {
            return Err(ConfigError::InvalidValue {
                origin: "env ODEK_DOCKER_TIMEOUT".into(),
                key: "ODEK_DOCKER_TIMEOUT".into(),
                reason,
            });
        }
    }
    if inputs.read_project_config {
        let path = workdir.join("odek.json");
        // The project directory is the agent's: odek.json is read through
        // one descriptor, never through a symlink that could point
        // anywhere, never waiting on a FIFO (volumes refuse symlinks too).
        if let Some((mut layer, w)) = parse_project_file(workdir, "odek.json")? {
            warnings.extend(w);
            tighten(&mut layer, &user_layer, &path, warnings);
            let p = path.clone();
            ranked.push(Ranked {
                layer,
                source: Box::new(move |_| Source::Project { path: p.clone() }),
            });
        }
    }
    let env_layer = super::layer_from_env(env)?;
    ranked.push(Ranked {
        layer: env_layer,
        source: Box::new(|key| Source::Env {
            var: env_var_of(key).unwrap_or("?").to_string(),
        }),
    });
    let flag_names = inputs.flag_names.clone();
    ranked.push(Ranked {
        layer: inputs.flags.clone(),
        source: Box::new(move |key| match flag_names.get(key) {
            Some(f) => Source::Flag { flag: f.clone() },
            None => Source::Api,
        }),
    });
    Ok(ranked)
}

/// The sandbox mode (SPEC §6.3): `sandbox` from the highest source that
/// sets it; else explicit when any setting asks for a container or comes
/// from the project; else implicit.
fn sandbox_mode(ranked: &[Ranked]) -> Sourced<SandboxMode> {
    match pick(ranked, names::sandbox, |l| l.sandbox) {
        Some(Sourced {
            value: true,
            source,
        }) => Sourced::new(SandboxMode::Explicit, source),
        Some(Sourced {
            value: false,
            source,
        }) => Sourced::new(SandboxMode::Off, source),
        // A setting that only a container can honour (read-only workspace,
        // limits, user, env, volumes, network mode) says "I want a sandbox":
        // silently dropping it on the host would be a surprise. And only the
        // operator may allow a host fallback: any setting the project gives
        // (even `sandbox_image` alone, an image that may never pull) makes
        // every failure a refusal. Only an operator's `sandbox_image` keeps
        // the implicit fallback (SPEC §6.3).
        None => match container_only_setting(ranked).or_else(|| project_setting(ranked)) {
            Some(source) => Sourced::new(SandboxMode::Explicit, source),
            None => Sourced::new(SandboxMode::Implicit, Source::Default),
        },
    }
}

/// The network mode from `sandbox_network`'s winning text (default
/// `none`); text that is neither `none` nor `bridge` only gets here in
/// lenient mode, and becomes `none` with a warning.
fn network_setting(
    raw: Option<Sourced<String>>,
    warnings: &mut Vec<Warning>,
) -> Sourced<NetworkMode> {
    match raw {
        None => Sourced::new(NetworkMode::None, Source::Default),
        Some(s) => match parse_network_mode(&origin(&s.source), &s.value) {
            Ok(m) => Sourced::new(m, s.source),
            Err(_) => {
                // Only reachable in lenient mode: validate_layer refused it otherwise.
                warnings.push(Warning::new(
                    WarningKind::NetworkModeDowngraded,
                    format!(
                        "{}: sandbox_network {} is not \"none\" or \"bridge\"; using \"none\" because ODEK_SANDBOX_NETWORK_LENIENT=1",
                        origin(&s.source),
                        super::quote(&s.value)
                    ),
                ));
                Sourced::new(NetworkMode::None, s.source)
            }
        },
    }
}

/// The winning `sandbox_env`, its `${HOST_VAR}`s read from `env`, and the
/// digest of its templates (what a trust that reads host variables binds).
#[allow(clippy::type_complexity)]
fn env_setting(
    ranked: &[Ranked],
    env: &BTreeMap<String, String>,
) -> Result<(Option<Sourced<Vec<EnvVar>>>, Option<String>), ConfigError> {
    let Some(s) = pick(ranked, names::sandbox_env, |l| l.sandbox_env.clone()) else {
        return Ok((None, None));
    };
    let o = origin(&s.source);
    let mut vars = Vec::new();
    for (key, raw) in &s.value {
        let (value, interpolates_host) = interpolate(&o, key, raw, env)?;
        vars.push(EnvVar {
            key: key.clone(),
            value,
            interpolates_host,
            reads: super::host_refs(raw),
        });
    }
    let digest = template_digest(&s.value);
    Ok((Some(Sourced::new(vars, s.source)), Some(digest)))
}

/// The winning `sandbox_volumes`, resolved against the workdir; none may
/// expose `$ODEK_HOME`, where approvals live (SPEC §7.3).
fn volumes_setting(
    ranked: &[Ranked],
    workdir: &Path,
    odek_home: &Path,
) -> Result<Option<Sourced<Vec<VolumeMount>>>, ConfigError> {
    let volumes = pick(ranked, names::sandbox_volumes, |l| {
        l.sandbox_volumes.clone()
    })
    .map(|s| {
        let o = origin(&s.source);
        s.value
            .iter()
            .map(|v| resolve_volume(&o, v, workdir))
            .collect::<Result<Vec<_>, _>>()
            .map(|v| Sourced::new(v, s.source.clone()))
    })
    .transpose()?;
    if let Some(vols) = &volumes {
        for v in &vols.value {
            if odek_home.starts_with(&v.host) || v.host.starts_with(odek_home) {
                return Err(ConfigError::InvalidVolume {
                    origin: origin(&vols.source),
                    value: super::quote(&v.spec),
                    reason: format!(
                        "it would expose $ODEK_HOME ({}), where approvals live",
                        super::shown(odek_home)
                    ),
                });
            }
        }
    }
    Ok(volumes)
}

/// Networks or a Compose project configured while the sandbox is off are
/// refused ([`ConfigError::NetworksWithoutSandbox`], naming each source).
fn no_networks_without_sandbox(settings: &Settings) -> Result<(), ConfigError> {
    if settings.mode.value == SandboxMode::Off && settings.attaches_networks() {
        let mut what = Vec::new();
        if let Some(n) = &settings.networks {
            what.push(format!("sandbox_networks from {}", n.source));
        }
        if let Some(c) = &settings.compose_project {
            what.push(format!("sandbox_compose_project from {}", c.source));
        }
        if let Some(c) = &settings.stack {
            what.push(format!("sandbox_stack from {}", c.source));
        }
        if let Some(e) = &settings.egress {
            what.push(format!("sandbox_egress from {}", e.source));
        }
        return Err(ConfigError::NetworksWithoutSandbox {
            what: what.join(", "),
            origin: settings.mode.source.to_string(),
        });
    }
    Ok(())
}

/// Egress mode (SPEC §4.5) takes the sandbox off every network with a way
/// out: `sandbox_network=bridge` with it is refused
/// ([`ConfigError::InvalidValue`] naming both sources).
fn no_bridge_with_egress(settings: &Settings) -> Result<(), ConfigError> {
    match &settings.egress {
        Some(e) if settings.network.value == NetworkMode::Bridge => Err(ConfigError::InvalidValue {
            origin: settings.network.source.to_string(),
            key: names::sandbox_network.into(),
            reason: format!(
                "is \"bridge\" while sandbox_egress ({}) asks for egress mode, whose only way out is odek's proxy; drop one of them",
                e.source
            ),
        }),
        _ => Ok(()),
    }
}

/// `$ODEK_HOME` inside the working directory is masked in the sandbox (an
/// empty read-only tmpfs over its path, SPEC §7.3), but the agent can still
/// rename a directory on the way to it and make a new one in its place,
/// which the next run would read as the operator's config and approvals.
/// Only directly in the working directory (`DIR/.odek`) is the mask's own
/// path what the agent cannot rename (a mount point): deeper is refused.
fn odek_home_depth(odek_home: &Path, workdir: &Path) -> Result<(), ConfigError> {
    // The working directory at or below $ODEK_HOME: the sandbox would get
    // odek's own state (the launch key, approvals, other sandboxes'
    // records) through /workspace.
    if workdir.starts_with(odek_home) {
        return Err(ConfigError::InvalidValue {
            origin: "env ODEK_HOME".into(),
            key: "ODEK_HOME".into(),
            reason: format!(
                "{} holds the working directory {}: the sandbox would be given odek's own state (its launch key, approvals and other sandboxes' records) through /workspace; run odek from a project directory outside it, or point ODEK_HOME elsewhere",
                super::shown(odek_home),
                super::shown(workdir)
            ),
        });
    }
    match odek_home.strip_prefix(workdir) {
        Ok(rel) if rel.components().count() > 1 => Err(ConfigError::InvalidValue {
            origin: "env ODEK_HOME".into(),
            key: "ODEK_HOME".into(),
            reason: format!(
                "{} lies {} levels inside the working directory: the sandbox could rename a directory on the way to it and put its own config and approvals in its place; use a directory outside the project, or one directly in it ({})",
                super::shown(odek_home),
                rel.components().count(),
                super::shown(workdir.join(".odek"))
            ),
        }),
        _ => Ok(()),
    }
}

/// The real location of `p` even when it does not exist yet: the longest
/// existing ancestor canonicalised, the rest appended with `.`/`..` resolved.
pub(crate) fn real_path(p: &Path) -> PathBuf {
    let mut existing = p.to_path_buf();
    let mut rest = Vec::new();
    while existing.canonicalize().is_err() {
        match (
            existing.file_name().map(|n| n.to_os_string()),
            existing.parent(),
        ) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                existing = parent.to_path_buf();
            }
            // `..` as the last component, or the root: stop here.
            _ => match existing.parent() {
                Some(parent) if existing.ends_with("..") => {
                    rest.push("..".into());
                    existing = parent.to_path_buf();
                }
                _ => break,
            },
        }
    }
    let mut out = existing.canonicalize().unwrap_or(existing);
    for c in rest.iter().rev() {
        if c == ".." {
            out.pop();
        } else if c != "." {
            out.push(c);
        }
    }
    out
}

fn template_digest(env: &BTreeMap<String, String>) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for (k, v) in env {
        h.update(k.as_bytes());
        h.update([0]);
        h.update(v.as_bytes());
        h.update([0]);
    }
    hex::encode(h.finalize())
}

/// `$ODEK_HOME` (absolute), else `$HOME/.odek` (SPEC §3.1).
pub fn odek_home(env: &BTreeMap<String, String>) -> Result<PathBuf, ConfigError> {
    if let Some(h) = env.get("ODEK_HOME").filter(|h| !h.is_empty()) {
        let p = PathBuf::from(h);
        if !p.is_absolute() {
            return Err(ConfigError::InvalidValue {
                origin: "env ODEK_HOME".into(),
                key: "ODEK_HOME".into(),
                reason: format!("must be an absolute path (got {})", super::quote(h)),
            });
        }
        return Ok(p);
    }
    match env.get("HOME").filter(|h| !h.is_empty()) {
        Some(h) => Ok(Path::new(h).join(".odek")),
        None => Err(ConfigError::InvalidValue {
            origin: "env".into(),
            key: "ODEK_HOME".into(),
            reason: "is unset and so is HOME; set ODEK_HOME to an absolute directory".into(),
        }),
    }
}

/// Applies the project-can-only-tighten rules to the project layer.
fn tighten(project: &mut Layer, user: &Layer, path: &Path, warnings: &mut Vec<Warning>) {
    let at = super::shown(path);
    if project.sandbox == Some(false) {
        project.sandbox = None;
        warnings.push(Warning::new(
            WarningKind::ProjectCannotLoosen,
            format!(
                "{at}: \"sandbox\": false is ignored; a project config cannot turn the sandbox off"
            ),
        ));
    }
    if project.sandbox_readonly == Some(false) {
        project.sandbox_readonly = None;
        warnings.push(Warning::new(
            WarningKind::ProjectCannotLoosen,
            format!("{at}: \"sandbox_readonly\": false is ignored; a project config cannot make /workspace writable"),
        ));
    }
    if let Some(p) = project.sandbox_pids_limit {
        let base = user.sandbox_pids_limit.unwrap_or(DEFAULT_PIDS_LIMIT);
        if p >= base {
            project.sandbox_pids_limit = None;
            warnings.push(Warning::new(
                WarningKind::ProjectCannotLoosen,
                format!("{at}: \"sandbox_pids_limit\": {p} is ignored; a project config can only lower the limit (now {base})"),
            ));
        }
    }
    // A pool keeps sandboxes running on the operator's machine: only the
    // operator sets one; a project may only make it smaller.
    if let Some(p) = project.sandbox_pool {
        let base = user.sandbox_pool.unwrap_or(0);
        if p >= base {
            project.sandbox_pool = None;
            if p > base {
                warnings.push(Warning::new(
                    WarningKind::ProjectCannotLoosen,
                    format!("{at}: \"sandbox_pool\": {p} is ignored; a project config can only lower the pool (now {base})"),
                ));
            }
        }
    }
    // Memory: a project limit applies only when lower than the user
    // config's, or than the default when the user config sets none. CPUs
    // have no default: a project limit applies when there is none yet (any
    // limit tightens) or when it is lower than the user config's. A value
    // that does not parse is left for validation to refuse.
    let ignore = |key: &str, value: &str, base: &str, warnings: &mut Vec<Warning>| {
        warnings.push(Warning::new(
            WarningKind::ProjectCannotLoosen,
            format!("{at}: \"{key}\": {} is ignored; a project config can only lower the limit (now {})", super::quote(value), super::quote(base)),
        ));
    };
    if let Some(p) = &project.sandbox_memory {
        let base = user.sandbox_memory.as_deref().unwrap_or(DEFAULT_MEMORY);
        let lower = match (parse_memory("", p), parse_memory("", base)) {
            (Ok(p), Ok(b)) => Some(p < b),
            _ => None,
        };
        if lower == Some(false) {
            ignore(names::sandbox_memory, p, base, warnings);
            project.sandbox_memory = None;
        }
    }
    if let (Some(p), Some(u)) = (&project.sandbox_cpus, &user.sandbox_cpus) {
        let lower = match (parse_cpus("", p), parse_cpus("", u)) {
            (Ok(p), Ok(u)) => Some(p.nano < u.nano),
            _ => None,
        };
        if lower == Some(false) {
            ignore(names::sandbox_cpus, p, u, warnings);
            project.sandbox_cpus = None;
        }
    }
    // The record of what ran in a sandbox is the operator's: the agent can
    // write odek.json, so a project that shortened it (0: removed when the
    // sandbox ends) could erase its own trail, and one that lengthened it
    // would keep command lines (which may hold secrets) longer than the
    // operator chose. A project's value is ignored either way.
    if let Some(p) = project.sandbox_log_retention.take() {
        warnings.push(Warning::new(
            WarningKind::ProjectCannotLoosen,
            format!(
                "{at}: \"sandbox_log_retention\": {p} is ignored; a project config cannot change how long sandbox records are kept (now {} days: set it with ODEK_SANDBOX_LOG_RETENTION or the user config)",
                user.sandbox_log_retention.unwrap_or(super::DEFAULT_LOG_RETENTION)
            ),
        ));
    }
    // Whether the sandbox's writes reach the host at once (bind) or only
    // when copied back (copy) is the operator's to choose (SPEC §6.1
    // "workspace"): it follows from where the engine runs, which the
    // project does not know, and a project that chose copy would keep
    // what the agent writes from the operator's files until `down`.
    if let Some(p) = project.sandbox_workspace.take() {
        warnings.push(Warning::new(
            WarningKind::ProjectCannotLoosen,
            format!(
                "{at}: \"sandbox_workspace\": {} is ignored; a project config cannot choose how the working directory reaches the sandbox (set it with --sandbox-workspace, ODEK_SANDBOX_WORKSPACE or the user config)",
                super::quote(&p)
            ),
        ));
    }
    // The user the commands run as is the operator's to choose (SPEC §6.1
    // "user"): by default the operator's own uid:gid, so that what the
    // agent writes is the operator's; a project's user would hand the
    // workspace to another uid (or to root), so it is ignored.
    // A malformed user is left for validation to refuse.
    if let Some(p) = project
        .sandbox_user
        .take_if(|p| validate_user("", p).is_ok())
    {
        let why = match &user.sandbox_user {
            Some(u) => format!("the user config sets {}", super::quote(u)),
            None => "the sandbox runs as your own user unless you set another with --sandbox-user, ODEK_SANDBOX_USER or the user config".to_string(),
        };
        warnings.push(Warning::new(
            WarningKind::ProjectCannotLoosen,
            format!(
                "{at}: \"sandbox_user\": {} is ignored; a project config cannot choose the sandbox user: {why}",
                super::quote(&p)
            ),
        ));
    }
}

/// Validates every value a layer sets (SPEC §3.4).
fn validate_layer(r: &Ranked, workdir: &Path, lenient: bool) -> Result<(), ConfigError> {
    let l = &r.layer;
    let o = |key: &str| origin(&(r.source)(key));
    if let Some(v) = &l.sandbox_network {
        if let Err(e) = parse_network_mode(&o(names::sandbox_network), v) {
            if !lenient {
                return Err(e);
            }
        }
    }
    if let Some(names) = &l.sandbox_networks {
        for n in names {
            validate_network_name(&o(names::sandbox_networks), n)?;
        }
    }
    if let Some(p) = &l.sandbox_compose_project {
        validate_compose_project(&o(names::sandbox_compose_project), p)?;
    }
    if let Some(p) = &l.sandbox_stack {
        validate_stack(&o(names::sandbox_stack), p)?;
    }
    if let Some(rules) = &l.sandbox_egress {
        odek_egress::policy::parse_rules(rules).map_err(|reason| ConfigError::InvalidValue {
            origin: o(names::sandbox_egress),
            key: names::sandbox_egress.into(),
            reason: format!("has the entry {reason}"),
        })?;
    }
    if let Some(n) = &l.sandbox_egress_network {
        // `bridge` names the engine's default bridge, the default.
        if n != "bridge" {
            validate_network_name(&o(names::sandbox_egress_network), n)?;
        }
    }
    if let Some(p) = l.sandbox_pids_limit {
        validate_pids_limit(&o(names::sandbox_pids_limit), p)?;
    }
    if let Some(n) = l.sandbox_pool {
        super::validate_pool(&o(names::sandbox_pool), n)?;
    }
    if let Some(n) = l.sandbox_log_retention {
        super::validate_log_retention(&o(names::sandbox_log_retention), n)?;
    }
    if let Some(m) = &l.sandbox_memory {
        parse_memory(&o(names::sandbox_memory), m)?;
    }
    if let Some(c) = &l.sandbox_cpus {
        parse_cpus(&o(names::sandbox_cpus), c)?;
    }
    if let Some(w) = &l.sandbox_workspace {
        super::parse_workspace_mode(&o(names::sandbox_workspace), w)?;
    }
    if let Some(u) = &l.sandbox_user {
        validate_user(&o(names::sandbox_user), u)?;
    }
    if let Some(r) = &l.sandbox_runtime {
        super::validate_runtime(&o(names::sandbox_runtime), r)?;
    }
    if let Some(env) = &l.sandbox_env {
        for k in env.keys() {
            validate_env_key(&o(names::sandbox_env), k)?;
        }
    }
    if let Some(vols) = &l.sandbox_volumes {
        for v in vols {
            resolve_volume(&o(names::sandbox_volumes), v, workdir)?;
        }
    }
    if let Some(image) = &l.sandbox_image {
        crate::image_ref::ImageRef::parse(image).map_err(|e| ConfigError::InvalidImage {
            origin: o(names::sandbox_image),
            reason: e.to_string(),
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::keys::KEYS;
    use super::super::parse::Ctx;
    use super::*;

    /// The widest value a project could ask for, per key: every key of the
    /// table must have one here, so a new key is considered.
    fn widest(key: &str) -> serde_json::Value {
        use serde_json::json;
        match key {
            "sandbox" => json!(false),
            "sandbox_image" => json!("example.org/any:1"),
            "sandbox_network" => json!("bridge"),
            "sandbox_networks" => json!(["outside"]),
            "sandbox_compose_project" => json!("other"),
            "sandbox_stack" => json!("other"),
            "sandbox_pids_limit" => json!(1_000_000_000),
            "sandbox_readonly" => json!(false),
            "sandbox_memory" => json!("1000g"),
            "sandbox_cpus" => json!("64"),
            "sandbox_user" => json!("0:0"),
            "sandbox_runtime" => json!("runc"),
            "sandbox_env" => json!({"TOKEN": "${HOME}"}),
            "sandbox_volumes" => json!(["/:/host"]),
            "sandbox_egress" => json!(["*.com"]),
            "sandbox_egress_network" => json!("outside"),
            "sandbox_pool" => json!(8),
            "sandbox_log_retention" => json!(3650),
            "sandbox_workspace" => json!("copy"),
            other => panic!("no widest value for the key {other}: add one"),
        }
    }

    /// The keys `tighten` narrows are exactly the rows marked `tighten`
    /// (the others need approval instead, SPEC §3.2 and §7.1).
    #[test]
    fn tighten_touches_exactly_the_keys_the_table_marks() {
        let mut project = Layer::default();
        for k in KEYS {
            let ctx = Ctx {
                origin: "test",
                key: k.name,
            };
            assert!(project
                .set_json(k.name, &ctx, widest(k.name))
                .expect("a valid value"));
        }
        let user = Layer {
            sandbox_cpus: Some("1".into()),
            ..Layer::default()
        };
        let mut warnings = Vec::new();
        tighten(&mut project, &user, Path::new("odek.json"), &mut warnings);
        for k in KEYS {
            assert_eq!(
                project.sets(k.name),
                !k.tighten,
                "{}: the table says tighten = {}",
                k.name,
                k.tighten
            );
        }
        assert_eq!(warnings.len(), KEYS.iter().filter(|k| k.tighten).count());
    }
}
