//! The C ABI's messages (SPEC §10.1): every JSON document a caller of
//! libodek sends or receives, as one typed definition each.
//!
//! The ABI parses each request straight into its type here and serialises
//! each result from its type here; the bindings (Python, Go) mirror these
//! shapes, and the JSON Schemas derived from them ([`schema_files`], checked
//! in under `ffi/schema/`) are what the bindings' type tests compare
//! against.
//!
//! Requests (caller → odek; each takes an optional `"schema"` tag of its
//! family, see [`check_schema_tag`]):
//!
//! | document | type | ABI call |
//! | --- | --- | --- |
//! | `odek.client-options/1` | [`ClientOptions`] | `odek_client_new` |
//! | `odek.resolve-request/1` | [`ResolveRequest`] | `odek_resolve` |
//! | `odek.approval/1` | [`Approval`] (or `null`) | `odek_launch` |
//! | `odek.exec-request/1` | [`ExecRequest`] | `odek_exec` |
//! | `odek.narrow-request/1` | [`NarrowRequest`] | `odek_narrow` |
//! | `odek.read-file-request/1` | [`ReadFileRequest`] | `odek_read_file` |
//! | `odek.write-file-request/1` | [`WriteFileRequest`] | `odek_write_file` |
//! | `odek.edit-file-request/1` | [`EditFileRequest`] | `odek_edit_file` |
//! | `odek.list-directory-request/1` | [`ListDirectoryRequest`] | `odek_list_directory` |
//! | `odek.plan/1` | [`Plan`] (as odek produced it) | approve, launch, narrow, config view |
//!
//! Results (odek → caller; each carries its `"schema"` tag):
//!
//! | document | type | ABI call |
//! | --- | --- | --- |
//! | `odek.plan/1` | [`Plan`] | `odek_resolve`, `odek_narrow` |
//! | `odek.approval-request/1` | [`ApprovalRequest`] (or `null`) | `odek_plan_approval_request` |
//! | `odek.approval/1` | [`Approval`] | `odek_approve` |
//! | `odek.sandbox-info/1` | [`SandboxInfo`] | `odek_sandbox_info` |
//! | `odek.environment/1` | [`Environment`] | `odek_describe` |
//! | `odek.exec-result/1` | [`ExecResult`] | `odek_exec` |
//! | `odek.config-view/1` | [`ConfigView`] | `odek_config_view` |
//! | `odek.read-file-result/1` | [`ReadFileResult`] | `odek_read_file` |
//! | `odek.write-file-result/1` | [`WriteFileResult`] | `odek_write_file` |
//! | `odek.edit-file-result/1` | [`EditFileResult`] | `odek_edit_file` |
//! | `odek.list-directory-result/1` | [`ListDirectoryResult`] | `odek_list_directory` |

use std::collections::BTreeMap;
use std::path::Path;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

pub use crate::approval::{Approval, ApprovalRequest};
pub use crate::describe::Environment;
pub use crate::files::{
    DirEntry, EditFileRequest, EditFileResult, EntryType, FileEdit, FileEncoding,
    ListDirectoryRequest, ListDirectoryResult, ReadFileRequest, ReadFileResult, WriteFileRequest,
    WriteFileResult, FILE_READ_LIMIT, FILE_WRITE_LIMIT,
};
pub use crate::narrow::{NarrowRequest, NARROW_REQUEST_SCHEMA};
pub use crate::plan::Plan;
pub use crate::view::ConfigView;

use crate::config::{ConfigError, ConfigInputs, Layer};
use crate::exec::{Capture, Captured, ExecOutcome, Keep};
use crate::warning::{Warning, WarningKind};

/// Schema tag of [`ClientOptions`].
pub const CLIENT_OPTIONS_SCHEMA: &str = "odek.client-options/1";
/// Schema tag of [`ResolveRequest`].
pub const RESOLVE_REQUEST_SCHEMA: &str = "odek.resolve-request/1";
/// Schema tag of [`ExecRequest`].
pub const EXEC_REQUEST_SCHEMA: &str = "odek.exec-request/1";
/// Schema tag of [`SandboxInfo`].
pub const SANDBOX_INFO_SCHEMA: &str = "odek.sandbox-info/1";
/// Schema tag of [`ExecResult`].
pub const EXEC_RESULT_SCHEMA: &str = "odek.exec-result/1";
/// Schema name of [`CloseResult`].
pub const CLOSE_RESULT_SCHEMA: &str = "odek.close-result/1";

/// Most bytes of stdout and of stderr (each) an [`ExecResult`] carries, the
/// first ones kept ([`crate::exec::Keep::Head`]): 16 MiB. The C ABI's
/// `ODEK_EXEC_OUTPUT_LIMIT` and `odek sandbox exec --json`.
pub const EXEC_OUTPUT_LIMIT: usize = 16 << 20;

pub use crate::error::RequestError;

pub use crate::error::check_schema_tag;

/// The engine a client talks to ([`ClientOptions::engine`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EngineChoice {
    /// The Docker daemon (SPEC §6.2).
    Docker,
    /// The in-memory fake engine, for tests.
    Fake,
}

/// Client options (`"odek.client-options/1"`, `odek_client_new`): `"{}"`
/// for the defaults.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "odek.client-options/1")]
pub struct ClientOptions {
    /// Optional schema tag, `"odek.client-options/1"`.
    #[serde(default)]
    pub schema: Option<String>,
    /// `unix:///path` or `tcp://host:port`; absent: the rules of SPEC §6.2
    /// (`DOCKER_HOST`, the current context, the default socket).
    #[serde(default)]
    pub docker_host: Option<String>,
    /// The absolute path of the directory of `ca.pem`, `cert.pem` and
    /// `key.pem` (a relative or empty one is refused) for a `tcp://`
    /// `docker_host` (SPEC §6.2.1): the daemon is reached over TLS, its
    /// certificate verified against `ca.pem`, odek identified by
    /// `cert.pem`/`key.pem`; each file is checked as `DOCKER_CERT_PATH`'s
    /// are. Absent: a `tcp://` `docker_host` is plain TCP. Only with a
    /// `tcp://` `docker_host` (else `ODEK_E_ENDPOINT`).
    #[serde(default)]
    pub docker_cert_path: Option<String>,
    /// `"docker"` (default) or `"fake"`: an in-memory engine for tests with
    /// image `odek-test/base:1` and a Compose project `shop`
    /// (`shop_default`, internal `shop_backend`).
    #[serde(default)]
    pub engine: Option<String>,
    /// The client's warm pool (docs/SANDBOXING.md, "The warm pool"): how
    /// many ready sandboxes it keeps per plan it launches, 0 (default: no
    /// pool) to 8. With a pool, a launch claims a ready sandbox of exactly
    /// its plan (after the approval re-check and the inspect-verify a
    /// launch does; a failing one is removed and a fresh one launched) and
    /// a replacement starts in the background; freeing the client removes
    /// the ready ones.
    #[serde(default)]
    pub sandbox_pool: Option<u8>,
}

impl ClientOptions {
    /// The warm pool's size ([`ClientOptions::sandbox_pool`]). Errors: more
    /// than [`crate::config::MAX_POOL`].
    pub fn pool_size(&self) -> Result<usize, RequestError> {
        let n = usize::from(self.sandbox_pool.unwrap_or(0));
        if n > crate::config::MAX_POOL {
            return Err(RequestError(format!(
                "sandbox_pool must be 0 (no pool) to {} (got {n})",
                crate::config::MAX_POOL
            )));
        }
        Ok(n)
    }

    /// Checks the schema tag and the engine name. Errors: an unknown tag, an
    /// engine other than `docker`/`fake`.
    pub fn engine(&self) -> Result<EngineChoice, RequestError> {
        check_schema_tag(self.schema.as_deref(), "odek.client-options/")?;
        match self.engine.as_deref() {
            None | Some("docker") => Ok(EngineChoice::Docker),
            Some("fake") => Ok(EngineChoice::Fake),
            Some(other) => Err(RequestError(format!(
                "engine must be \"docker\" or \"fake\" (got {other:?})"
            ))),
        }
    }
}

fn yes() -> bool {
    true
}

/// A resolve request (`"odek.resolve-request/1"`, `odek_resolve`; SPEC
/// §3–§5).
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "odek.resolve-request/1")]
pub struct ResolveRequest {
    /// Optional schema tag, `"odek.resolve-request/1"`.
    #[serde(default)]
    pub schema: Option<String>,
    /// Project directory (absolute, or relative to the process's working
    /// directory); mounted at `/workspace`.
    pub workdir: String,
    /// Operator settings with the highest precedence: config keys of SPEC
    /// §3.1 with the types of `odek.json`, e.g.
    /// `{"sandbox_compose_project": "shop", "sandbox_pids_limit": 256}`.
    /// An unknown key is refused (`ODEK_E_CONFIG`), not ignored.
    #[serde(default)]
    pub settings: Option<Settings>,
    /// Read `$ODEK_HOME/config.json` (default true).
    #[serde(default = "yes")]
    pub read_user_config: bool,
    /// Read `<workdir>/odek.json` (default true).
    #[serde(default = "yes")]
    pub read_project_config: bool,
    /// Environment to use instead of the process's (for `ODEK_*`, `HOME`,
    /// `${…}`): it replaces the whole environment, so include `HOME` or
    /// `ODEK_HOME`.
    #[serde(default)]
    pub env: Option<BTreeMap<String, String>>,
    /// Keep SPEC §6.3's implicit mode: with `settings` not saying
    /// `"sandbox"`, an unreachable daemon or an image that cannot be pulled
    /// falls back to running commands on the host. Default false: a sandbox
    /// is required — `"sandbox": true` is added to `settings` unless they
    /// say `"sandbox"` themselves — so those failures are errors instead of
    /// a host shell for the agent. The one place this default is decided
    /// for every caller of the ABI (C, Python, Go).
    #[serde(default)]
    pub allow_host_fallback: bool,
}

impl ResolveRequest {
    /// The config inputs this request stands for: the process's (or the
    /// given) environment, the config files asked for, and `settings` as
    /// the operator layer, with `sandbox: true` added unless
    /// `allow_host_fallback` or the settings say `"sandbox"`.
    ///
    /// Errors: an unknown schema tag ([`RequestError`]); a setting of the
    /// wrong type or an unknown key ([`ConfigError`], see
    /// [`Settings::parse`]).
    pub fn config_inputs(self) -> Result<ConfigInputs, ResolveRequestError> {
        check_schema_tag(self.schema.as_deref(), "odek.resolve-request/")?;
        let mut inputs = ConfigInputs::from_process(&self.workdir);
        if let Some(env) = self.env {
            inputs.env = env;
        }
        inputs.read_user_config = self.read_user_config;
        inputs.read_project_config = self.read_project_config;
        if let Some(settings) = &self.settings {
            let parsed = settings.parse()?;
            parsed.refuse_unknown_keys()?;
            inputs.flags = parsed.layer;
        }
        if !self.allow_host_fallback {
            // A request that turns the sandbox off explicitly is honoured.
            let _ = inputs.force_sandbox(None);
        }
        Ok(inputs)
    }
}

/// Why a [`ResolveRequest`] cannot be resolved before any lookup.
#[derive(Debug, thiserror::Error)]
pub enum ResolveRequestError {
    /// The request itself (`ODEK_E_INVALID_ARGUMENT`).
    #[error(transparent)]
    Request(#[from] RequestError),
    /// A setting (`ODEK_E_CONFIG` and its kin).
    #[error(transparent)]
    Config(#[from] ConfigError),
}

/// The `settings` object of a [`ResolveRequest`]: config keys (SPEC §3.1)
/// to their JSON values, kept as the caller wrote them until
/// [`Settings::parse`] type-checks them with the rules of `odek.json`.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct Settings(
    #[schemars(with = "BTreeMap<String, serde_json::Value>")] pub BTreeMap<String, Box<RawValue>>,
);

/// [`Settings`] type-checked into a config layer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ParsedSettings {
    /// The operator layer.
    pub layer: Layer,
    /// Keys that are not config keys of SPEC §3.1, sorted. A config file
    /// ignores them with a warning; the ABI refuses them
    /// ([`ParsedSettings::refuse_unknown_keys`]).
    pub unknown_keys: Vec<String>,
    /// The parser's warnings (one per unknown key).
    pub warnings: Vec<Warning>,
}

/// The origin named in errors about a request's settings.
const SETTINGS_ORIGIN: &str = "<api settings>";

impl Settings {
    /// Type-checks the settings with the rules of `odek.json` (SPEC §3.2).
    /// Errors: [`ConfigError`] naming the key (`<api settings>` as origin).
    pub fn parse(&self) -> Result<ParsedSettings, ConfigError> {
        // The config parser takes one object: the members as the caller
        // wrote them, in key order.
        let mut text = String::from("{");
        for (i, (key, value)) in self.0.iter().enumerate() {
            if i > 0 {
                text.push(',');
            }
            text.push_str(&serde_json::to_string(key).unwrap_or_default());
            text.push(':');
            text.push_str(value.get());
        }
        text.push('}');
        let (layer, warnings) =
            crate::config::parse_bytes(text.as_bytes(), Path::new(SETTINGS_ORIGIN))?;
        let unknown_keys = self
            .0
            .keys()
            .filter(|k| !crate::config::KNOWN_KEYS.contains(&k.as_str()))
            .cloned()
            .collect();
        Ok(ParsedSettings {
            layer,
            unknown_keys,
            warnings: warnings
                .into_iter()
                .filter(|w| w.kind != WarningKind::UnknownKey)
                .collect(),
        })
    }
}

impl ParsedSettings {
    /// Refuses unknown keys: a typo in a program's settings must not
    /// silently drop a setting. Error: [`ConfigError::InvalidValue`] on key
    /// `settings`, listing each key (quoted) with the closest known key.
    pub fn refuse_unknown_keys(&self) -> Result<(), ConfigError> {
        if self.unknown_keys.is_empty() {
            return Ok(());
        }
        let listed: Vec<String> = self
            .unknown_keys
            .iter()
            .map(|k| {
                let hint = crate::config::suggest_key(k)
                    .map(|s| format!(" (did you mean {s:?}?)"))
                    .unwrap_or_default();
                format!("unknown key {}{hint}", crate::text::quote(k))
            })
            .collect();
        Err(ConfigError::InvalidValue {
            origin: "api settings".into(),
            key: "settings".into(),
            reason: format!(
                "has unknown keys (refused, not ignored): {}",
                listed.join("; ")
            ),
        })
    }
}

/// An exec request (`"odek.exec-request/1"`, `odek_exec`; SPEC §10.1):
/// exactly one of `argv` and `shell`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "odek.exec-request/1")]
pub struct ExecRequest {
    /// Optional schema tag, `"odek.exec-request/1"`.
    #[serde(default)]
    pub schema: Option<String>,
    /// The command and its arguments, e.g. `["redis-cli", "-h", "redis", "ping"]`.
    #[serde(default)]
    pub argv: Option<Vec<String>>,
    /// A shell command line, run by `/bin/sh -c`.
    #[serde(default)]
    pub shell: Option<String>,
    /// Extra environment for this command (values are never logged).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Seconds (finite, > 0, < 10^9) after which the command and its
    /// descendants are killed (SIGKILL) and the result says `timed_out`
    /// with exit code 124.
    #[serde(default)]
    pub timeout_secs: Option<f64>,
    /// Working directory (default `/workspace`, or the host workdir).
    #[serde(default)]
    pub workdir: Option<String>,
}

/// How a front end names the members of an exec request, so that a
/// refusal of [`ExecRequest::into_core_as`] names what its caller wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExecMembers {
    /// The argv (an array of strings run without a shell): `argv`.
    pub argv: &'static str,
    /// The shell command line: `shell` in the C ABI, `command` in MCP.
    pub shell: &'static str,
    /// The timeout in seconds: `timeout_secs`, the CLI's `--timeout`.
    pub timeout: &'static str,
}

impl ExecMembers {
    /// The names of [`ExecRequest`]'s own JSON members (the C ABI).
    pub const ABI: ExecMembers = ExecMembers {
        argv: "argv",
        shell: "shell",
        timeout: "timeout_secs",
    };
}

impl ExecRequest {
    /// The core's request, with the C ABI's member names in refusals
    /// ([`ExecRequest::into_core_as`]).
    pub fn into_core(self) -> Result<crate::exec::ExecRequest, RequestError> {
        self.into_core_as(&ExecMembers::ABI)
    }

    /// The core's request: every front end's exec request (the C ABI's
    /// JSON, MCP's `exec` arguments, the CLI's `-e`/`--timeout` and
    /// command) is parsed here, once. Does not run [`crate::exec::ExecRequest::check`].
    ///
    /// Errors ([`RequestError`], worded with `names`): an unknown schema
    /// tag; neither or both of `argv`/`shell`; a timeout that is not a
    /// finite number of seconds above 0 and below 10^9
    /// ([`crate::exec::timeout_from_secs`]).
    pub fn into_core_as(
        self,
        names: &ExecMembers,
    ) -> Result<crate::exec::ExecRequest, RequestError> {
        check_schema_tag(self.schema.as_deref(), "odek.exec-request/")?;
        let ExecMembers {
            argv,
            shell,
            timeout,
        } = names;
        let command = match (self.argv, self.shell) {
            (Some(a), None) => crate::exec::Command::Argv(a),
            (None, Some(s)) => crate::exec::Command::Shell(s),
            (None, None) => {
                return Err(RequestError(format!(
                    "exec needs a command: pass exactly one of `{shell}` (run by /bin/sh -c), e.g. {{\"{shell}\": \"ls -la\"}}, or `{argv}`, e.g. {{\"{argv}\": [\"ls\", \"-la\"]}}"
                )))
            }
            (Some(_), Some(_)) => {
                return Err(RequestError(format!(
                    "exec takes exactly one of `{shell}` (a shell string) or `{argv}` (a list), not both; pass one of them"
                )))
            }
        };
        let timeout = match self.timeout_secs {
            None => None,
            Some(t) => Some(crate::exec::timeout_from_secs(t).ok_or_else(|| {
                RequestError(format!(
                    "{timeout} must be a positive number of seconds below 1000000000 (got {t})"
                ))
            })?),
        };
        Ok(crate::exec::ExecRequest {
            command,
            env: self.env.into_iter().collect(),
            timeout,
            workdir: self.workdir,
        })
    }
}

impl NarrowRequest {
    /// Checks the schema tag (part of [`NarrowRequest::check`]). Error: an
    /// unknown tag.
    pub fn check_schema(&self) -> Result<(), RequestError> {
        check_schema_tag(self.schema.as_deref(), "odek.narrow-request/")
    }
}

/// A launched sandbox as the ABI shows it (`"odek.sandbox-info/1"`,
/// `odek_sandbox_info`).
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(title = "odek.sandbox-info/1")]
pub struct SandboxInfo<'a> {
    /// Always [`SANDBOX_INFO_SCHEMA`].
    pub schema: &'static str,
    /// The sandbox name (`odek-<12 hex>`).
    pub name: &'a str,
    /// The container ID; null on the host (fallback, off).
    pub container_id: Option<&'a str>,
    /// `{"kind": "container"}`, `{"kind": "fallback", "class": …, "reason":
    /// …}` or `{"kind": "off"}`.
    pub isolation: &'a crate::plan::Isolation,
    /// The startup line of SPEC §6.4.
    pub startup_line: String,
    /// Warnings of the plan and the launch.
    pub warnings: &'a [Warning],
    /// The plan it was launched from.
    pub plan: &'a Plan,
    /// The settings the container was created with (null on the host).
    pub applied: &'a Option<crate::sandbox::Applied>,
    /// Whether commands run through odek's supervisor, and if not why and
    /// what then does not hold (docs/SANDBOXING.md, "The supervisor");
    /// null on the host.
    pub supervisor: &'a Option<crate::supervisor::SupervisorState>,
}

impl<'a> SandboxInfo<'a> {
    /// The info of a launched sandbox.
    pub fn of(s: &'a crate::sandbox::Sandbox) -> SandboxInfo<'a> {
        SandboxInfo {
            schema: SANDBOX_INFO_SCHEMA,
            name: &s.name,
            container_id: s.container_id.as_deref(),
            isolation: &s.isolation,
            startup_line: s.startup_line(),
            warnings: &s.warnings,
            plan: &s.plan,
            applied: &s.applied,
            supervisor: &s.supervisor,
        }
    }
}

/// What a command run with `odek_exec` did (`"odek.exec-result/1"`; SPEC
/// §10.1). A non-zero exit is a result, not an error.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(title = "odek.exec-result/1")]
pub struct ExecResult {
    /// Always [`EXEC_RESULT_SCHEMA`].
    pub schema: String,
    /// The exit code; 124 after a timeout.
    pub exit_code: i64,
    /// The timeout struck.
    pub timed_out: bool,
    /// After a timeout: odek saw none of the command's tagged processes left
    /// (false: the kill failed or could not be confirmed, and a line on
    /// stderr says why).
    pub killed: bool,
    /// Standard output as UTF-8 (invalid bytes replaced), at most the ABI's
    /// output limit (16 MiB).
    pub stdout: String,
    /// Standard error, as `stdout`.
    pub stderr: String,
    /// `stdout` was cut at the limit.
    pub stdout_truncated: bool,
    /// `stderr` was cut at the limit.
    pub stderr_truncated: bool,
}

impl ExecResult {
    /// The capture of the output an [`ExecResult`] carries: the first
    /// [`EXEC_OUTPUT_LIMIT`] bytes of each stream
    /// ([`crate::exec::Keep::Head`]). The C ABI's `odek_exec` and
    /// `odek sandbox exec --json` capture with it.
    pub fn capture() -> Capture {
        Capture::new(Keep::Head, EXEC_OUTPUT_LIMIT)
    }

    /// The result of a command that ended with `outcome`, its output as a
    /// [`crate::exec::Capture`] kept it ([`crate::exec::Capture::finish`]).
    /// A surface that adds members of its own wraps this value (MCP's
    /// `exec` adds `sandbox_id`).
    pub fn new(outcome: &ExecOutcome, output: Captured) -> ExecResult {
        ExecResult {
            schema: EXEC_RESULT_SCHEMA.into(),
            exit_code: outcome.exit_code,
            timed_out: outcome.timed_out,
            killed: outcome.killed,
            stdout: output.stdout,
            stderr: output.stderr,
            stdout_truncated: output.stdout_truncated,
            stderr_truncated: output.stderr_truncated,
        }
    }
}

/// What closing a sandbox found (`"odek.close-result/1"`; SPEC §10.1,
/// `odek_sandbox_close`): the files host tools run that changed while it
/// lived (docs/SECURITY.md, "Files host tools run"), compared once its
/// container was removed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(title = "odek.close-result/1")]
pub struct CloseResult {
    /// Always [`CLOSE_RESULT_SCHEMA`].
    pub schema: String,
    /// The sandbox name (`odek-<12 hex>`, or `host`).
    pub name: String,
    /// Each listed path (`.git/hooks/*`, `.git/config`, `.envrc`,
    /// `.vscode/tasks.json`, `Makefile`, `package.json`, …) that changed,
    /// by path; empty when none did, on the host and for a read-only
    /// workspace.
    pub changed_host_files: Vec<crate::host_files::HostFileChange>,
    /// Why they could not be compared (no record from the launch, the
    /// working directory gone); null when they were, or needed no
    /// comparison.
    pub host_files_unchecked: Option<String>,
    /// The report as one line to show (names escaped), ending with the
    /// hint to review them before running git or make; null when there is
    /// nothing to say.
    pub message: Option<String>,
    /// A copied workspace's copy-back at close (SPEC §6.1 "workspace",
    /// docs/SANDBOXING.md "A copied workspace"): `written`, the files and
    /// symlinks written into the working directory (relative paths, in
    /// archive order), and `skipped`, each entry left out with its
    /// `{path, reason}`; null for a bind-mounted or read-only workspace.
    pub copied_back: Option<crate::workspace_copy::Unpacked>,
}

impl CloseResult {
    /// The result of closing the sandbox `name`, with `report`.
    pub fn new(name: &str, report: crate::host_files::Report) -> CloseResult {
        CloseResult {
            schema: CLOSE_RESULT_SCHEMA.into(),
            name: name.to_string(),
            message: report.line(),
            changed_host_files: report.changed,
            host_files_unchecked: report.unchecked,
            copied_back: report.copied_back,
        }
    }
}

/// The JSON Schema of every ABI message, as checked in under `ffi/schema/`:
/// `(file name, pretty-printed JSON with a final newline)`. Requests are
/// described as odek accepts them (a member with a default is optional),
/// results as odek writes them (every member is present; `null` where the
/// type allows it).
pub fn schema_files() -> Vec<(&'static str, String)> {
    use schemars::generate::SchemaSettings;
    fn request<T: JsonSchema>() -> schemars::Schema {
        SchemaSettings::draft2020_12()
            .for_deserialize()
            .into_generator()
            .into_root_schema_for::<T>()
    }
    fn result<T: JsonSchema>() -> schemars::Schema {
        SchemaSettings::draft2020_12()
            .for_serialize()
            .into_generator()
            .into_root_schema_for::<T>()
    }
    let all = [
        ("client-options.json", request::<ClientOptions>()),
        ("resolve-request.json", request::<ResolveRequest>()),
        ("exec-request.json", request::<ExecRequest>()),
        ("narrow-request.json", request::<NarrowRequest>()),
        ("plan.json", result::<Plan>()),
        ("approval-request.json", result::<ApprovalRequest>()),
        ("approval.json", result::<Approval>()),
        ("sandbox-info.json", result::<SandboxInfo<'static>>()),
        ("environment.json", result::<Environment>()),
        ("exec-result.json", result::<ExecResult>()),
        ("close-result.json", result::<CloseResult>()),
        ("config-view.json", result::<ConfigView>()),
        ("read-file-request.json", request::<ReadFileRequest>()),
        ("read-file-result.json", result::<ReadFileResult>()),
        ("write-file-request.json", request::<WriteFileRequest>()),
        ("write-file-result.json", result::<WriteFileResult>()),
        ("edit-file-request.json", request::<EditFileRequest>()),
        ("edit-file-result.json", result::<EditFileResult>()),
        (
            "list-directory-request.json",
            request::<ListDirectoryRequest>(),
        ),
        (
            "list-directory-result.json",
            result::<ListDirectoryResult>(),
        ),
    ];
    all.into_iter()
        .map(|(name, schema)| {
            let mut text = serde_json::to_string_pretty(&schema).unwrap_or_default();
            text.push('\n');
            (name, text)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_keys_are_data_not_text() {
        let s: Settings = serde_json::from_str(
            r#"{"sandbox_netwrok": "none", "sandbox": true, "zz ignored": 1}"#,
        )
        .expect("an object");
        let p = s.parse().expect("types are fine");
        assert_eq!(p.layer.sandbox, Some(true));
        assert_eq!(p.unknown_keys, vec!["sandbox_netwrok", "zz ignored"]);
        let e = p.refuse_unknown_keys().expect_err("refused").to_string();
        assert!(
            e.contains(
                "has unknown keys (refused, not ignored): unknown key \"sandbox_netwrok\" (did you mean \"sandbox_network\"?); unknown key \"zz ignored\""
            ),
            "{e}"
        );
    }

    #[test]
    fn a_sandbox_is_required_unless_the_request_allows_the_fallback() {
        let req = |j: &str| -> ResolveRequest { serde_json::from_str(j).expect("a request") };
        let flags = |r: ResolveRequest| r.config_inputs().expect("inputs").flags.sandbox;
        assert_eq!(flags(req(r#"{"workdir": "/w"}"#)), Some(true));
        assert_eq!(
            flags(req(r#"{"workdir": "/w", "allow_host_fallback": true}"#)),
            None
        );
        assert_eq!(
            flags(req(r#"{"workdir": "/w", "settings": {"sandbox": false}}"#)),
            Some(false)
        );
        assert_eq!(
            flags(req(
                r#"{"workdir": "/w", "allow_host_fallback": true, "settings": {"sandbox": true}}"#
            )),
            Some(true)
        );
    }

    #[test]
    fn exec_requests_need_one_command() {
        let e = ExecRequest::default().into_core().expect_err("no command");
        assert_eq!(
            e.0,
            r#"exec needs a command: pass exactly one of `shell` (run by /bin/sh -c), e.g. {"shell": "ls -la"}, or `argv`, e.g. {"argv": ["ls", "-la"]}"#
        );
        let both = ExecRequest {
            argv: Some(vec!["true".into()]),
            shell: Some("true".into()),
            ..Default::default()
        };
        let e = both.into_core().expect_err("both");
        assert_eq!(
            e.0,
            "exec takes exactly one of `shell` (a shell string) or `argv` (a list), not both; pass one of them"
        );
        let e = ExecRequest {
            shell: Some("true".into()),
            timeout_secs: Some(-1.0),
            ..Default::default()
        }
        .into_core()
        .expect_err("negative timeout");
        assert_eq!(
            e.0,
            "timeout_secs must be a positive number of seconds below 1000000000 (got -1)"
        );
    }

    /// A front end's own member names reach its refusals; the request
    /// itself is parsed the same for all.
    #[test]
    fn exec_refusals_name_the_front_ends_members() {
        let mcp = ExecMembers {
            argv: "argv",
            shell: "command",
            timeout: "timeout_secs",
        };
        let e = ExecRequest::default().into_core_as(&mcp).expect_err("none");
        assert!(e.0.contains(r#"{"command": "ls -la"}"#), "{e}");
        let cli = ExecMembers {
            timeout: "--timeout",
            ..ExecMembers::ABI
        };
        for t in [0.0, 1e9, f64::NAN, f64::INFINITY] {
            let e = ExecRequest {
                argv: Some(vec!["true".into()]),
                timeout_secs: Some(t),
                ..Default::default()
            }
            .into_core_as(&cli)
            .expect_err("bad timeout");
            assert_eq!(
                e.0,
                format!(
                    "--timeout must be a positive number of seconds below 1000000000 (got {t})"
                )
            );
        }
        let req = ExecRequest {
            argv: Some(vec!["env".into()]),
            env: [("B".into(), "2".into()), ("A".into(), "1".into())].into(),
            timeout_secs: Some(1.5),
            workdir: Some("/tmp".into()),
            ..Default::default()
        }
        .into_core_as(&cli)
        .expect("valid");
        assert_eq!(
            req,
            crate::exec::ExecRequest {
                command: crate::exec::Command::Argv(vec!["env".into()]),
                env: vec![("A".into(), "1".into()), ("B".into(), "2".into())],
                timeout: Some(std::time::Duration::from_millis(1500)),
                workdir: Some("/tmp".into()),
            }
        );
    }

    #[test]
    fn an_exec_result_is_the_outcome_and_the_capture() {
        let outcome = ExecOutcome {
            exit_code: 124,
            timed_out: true,
            cancelled: false,
            killed: true,
            supervised: false,
        };
        let capture = crate::exec::Capture::new(crate::exec::Keep::Head, 2);
        capture.write(crate::engine::StreamKind::Stdout, b"abc");
        capture.write(crate::engine::StreamKind::Stderr, b"e");
        let r = ExecResult::new(&outcome, capture.finish());
        assert_eq!(
            serde_json::to_value(&r).expect("JSON"),
            serde_json::json!({
                "schema": "odek.exec-result/1",
                "exit_code": 124,
                "timed_out": true,
                "killed": true,
                "stdout": "ab",
                "stderr": "e",
                "stdout_truncated": true,
                "stderr_truncated": false,
            })
        );
    }

    #[test]
    fn every_message_has_a_schema_with_its_members() {
        let files = schema_files();
        assert_eq!(files.len(), 20);
        let get = |name: &str| -> serde_json::Value {
            let (_, text) = files.iter().find(|(n, _)| *n == name).expect(name);
            serde_json::from_str(text).expect("JSON")
        };
        let resolve = get("resolve-request.json");
        assert_eq!(resolve["required"], serde_json::json!(["workdir"]));
        assert!(resolve["properties"]["allow_host_fallback"].is_object());
        let exec = get("exec-result.json");
        let required = exec["required"].as_array().expect("required");
        assert_eq!(required.len(), 8, "{exec}");
        let plan = get("plan.json");
        assert!(plan["properties"]["approval"].is_object(), "{plan}");
        let close = get("close-result.json");
        assert_eq!(
            close["required"],
            serde_json::json!([
                "schema",
                "name",
                "changed_host_files",
                "host_files_unchecked",
                "message",
                "copied_back"
            ]),
            "{close}"
        );
    }
}
