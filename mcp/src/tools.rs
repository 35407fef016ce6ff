//! Arguments and results of the MCP tools (docs/MCP.md lists them). The
//! JSON Schemas clients see are derived from these types (written out for
//! the two that wrap the core's: [`ExecResult`], [`NarrowArgs`]), so the
//! names and shapes here are the stable contract: add optional fields,
//! never rename. `mcp/tool-schemas.json` holds every tool's schemas; a test
//! compares them byte for byte.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::LazyLock;

use odek_core::api;
use odek_core::narrow::NarrowRequest;
use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Default timeout of `exec` when the caller gives none, in seconds.
pub const DEFAULT_TIMEOUT_SECS: f64 = 300.0;

/// Bytes of each output stream returned: the first half and the last half
/// of this are kept, the middle is cut (and the `*_truncated` flag set):
/// [`odek_core::exec::Keep::HeadAndTail`].
pub const MAX_OUTPUT_BYTES: usize = 128 * 1024;

/// `exec` arguments.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecArgs {
    /// A shell command line, run by `/bin/sh -c` in `/workspace`. Give
    /// either `command` or `argv`.
    #[serde(default)]
    pub command: Option<String>,
    /// The program and its arguments, run without a shell. Give either
    /// `command` or `argv`.
    #[serde(default)]
    pub argv: Option<Vec<String>>,
    /// Extra environment variables for this command only.
    #[serde(default)]
    pub env: Option<BTreeMap<String, String>>,
    /// Kill the command (and its children) after this many seconds;
    /// default 300. The result then says `timed_out`.
    #[serde(default)]
    pub timeout_secs: Option<f64>,
    /// The sandbox to run in (an id from `sandbox_up`, `sandbox_narrow` or
    /// `sandbox_list`); default: this conversation's sandbox, launched on
    /// first use.
    #[serde(default)]
    pub sandbox_id: Option<String>,
    /// Start the command in the background and return at once with its
    /// `process_id` (read its output with `process_output`, end it with
    /// `process_kill`; it ends with the sandbox). No timeout unless
    /// `timeout_secs` is given.
    #[serde(default)]
    pub background: Option<bool>,
}

/// `exec` result: a command that ran ([`ExecResult`]) or one started in
/// the background ([`BackgroundStarted`]).
#[derive(Clone, Debug)]
pub enum ExecReply {
    /// It ran to its end (or its timeout).
    Ran(ExecResult),
    /// It runs in the background.
    Background(BackgroundStarted),
}

impl Serialize for ExecReply {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            ExecReply::Ran(r) => r.serialize(s),
            ExecReply::Background(b) => b.serialize(s),
        }
    }
}

impl JsonSchema for ExecReply {
    fn schema_name() -> Cow<'static, str> {
        "ExecResult".into()
    }

    /// [`ExecResult`]'s schema with `process_id` added and its `required`
    /// list moved into an `anyOf`: either a finished command's members or
    /// a background start's (`sandbox_id`, `process_id`).
    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let mut schema = ExecResult::json_schema(generator);
        let obj = schema.ensure_object();
        let required = obj.remove("required").unwrap_or_default();
        if let Some(serde_json::Value::Object(props)) = obj.get_mut("properties") {
            props.insert(
                "process_id".into(),
                serde_json::json!({
                    "description": "With `background`: the process's id for `process_output` and `process_kill` (then only it and `sandbox_id` are returned).",
                    "type": "string"
                }),
            );
        }
        obj.insert(
            "anyOf".into(),
            serde_json::json!([
                { "required": required },
                { "required": ["sandbox_id", "process_id"] }
            ]),
        );
        schema
    }
}

/// `exec` with `background`: the process started.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct BackgroundStarted {
    /// The sandbox it runs in.
    pub sandbox_id: String,
    /// Its id for `process_output` and `process_kill`.
    pub process_id: String,
    /// Set when this call relaunched the conversation's sandbox because the
    /// old one was gone: what was lost, in one paragraph.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub relaunched: Option<String>,
    /// Set when networks the sandbox reaches are gone because their
    /// Compose project is down: names them; the process started anyway,
    /// without their services.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub networks_down: Option<String>,
}

/// `process_output` arguments.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProcessOutputArgs {
    /// The id `exec` with `background` returned.
    pub process_id: String,
    /// Return output from this offset on (the `next_cursor` of the last
    /// call); default: from the oldest byte kept.
    #[serde(default)]
    pub cursor: Option<u64>,
    /// The sandbox it runs in; default: this conversation's sandbox.
    #[serde(default)]
    pub sandbox_id: Option<String>,
}

/// `process_kill` arguments.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProcessKillArgs {
    /// The id `exec` with `background` returned.
    pub process_id: String,
    /// The sandbox it runs in; default: this conversation's sandbox.
    #[serde(default)]
    pub sandbox_id: Option<String>,
}

/// `process_output` and `process_kill` result.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct ProcessResult {
    /// The sandbox it runs in.
    pub sandbox_id: String,
    /// The process.
    pub process_id: String,
    /// Its root process's pid in the sandbox.
    pub pid: u32,
    /// The offset (bytes of stdout and stderr together) of the first byte
    /// returned.
    pub cursor: u64,
    /// Pass this as `cursor` next time for the output that follows.
    pub next_cursor: u64,
    /// Bytes before `cursor` that were dropped: odek keeps the last 1 MiB
    /// of each background process's output.
    pub dropped_bytes: u64,
    /// True when more output is kept after `next_cursor` (this call
    /// returned at most 128 KiB): call again.
    pub more: bool,
    /// Standard output since `cursor` (UTF-8, invalid bytes replaced).
    pub stdout: String,
    /// Standard error since `cursor` (UTF-8, invalid bytes replaced).
    pub stderr: String,
    /// True while its main process runs.
    pub running: bool,
    /// Its exit code once it ended (128 + N when signal N ended it; 137
    /// after `process_kill`).
    pub exit_code: Option<i64>,
    /// True when the last kill (`process_kill`'s or its timeout's) killed
    /// processes of its tree and odek saw every process of it gone. False
    /// when no kill ran; when there was nothing to kill (it had ended by
    /// itself and nothing it started ran on: `kill_note` says so); or when
    /// the kill could not be confirmed or left processes running
    /// (`left_running` and `kill_note` say which): they keep running.
    pub killed: bool,
    /// True when its timeout ended it.
    pub timed_out: bool,
    /// After a kill: pids (in the sandbox) of processes that may belong to
    /// it and were left running (started in their own session while another
    /// command ran, so odek cannot tell them from that command's).
    pub left_running: Vec<u32>,
    /// After a kill that is not `killed`: why, in one line (`nothing to
    /// kill: …` when it found nothing of the process left).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kill_note: Option<String>,
}

impl ProcessResult {
    /// The tool's result from the core's, with at most [`MAX_OUTPUT_BYTES`]
    /// of output from `out.cursor` (`more` says when there is more).
    pub fn new(sandbox_id: String, out: &odek_core::exec::ProcessOutput) -> ProcessResult {
        use odek_core::engine::StreamKind;
        let mut left = MAX_OUTPUT_BYTES;
        let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
        let mut taken = 0u64;
        for (kind, bytes) in &out.chunks {
            let n = bytes.len().min(left);
            let dest = if *kind == StreamKind::Stderr {
                &mut stderr
            } else {
                &mut stdout
            };
            dest.extend_from_slice(&bytes[..n]);
            left -= n;
            taken += n as u64;
            if left == 0 {
                break;
            }
        }
        let next_cursor = out.cursor + taken;
        ProcessResult {
            sandbox_id,
            process_id: out.process_id.0.clone(),
            pid: out.pid,
            cursor: out.cursor,
            next_cursor,
            dropped_bytes: out.dropped_bytes,
            more: next_cursor < out.next_cursor,
            stdout: String::from_utf8_lossy(&stdout).into_owned(),
            stderr: String::from_utf8_lossy(&stderr).into_owned(),
            running: out.exit.is_none(),
            exit_code: out.exit.as_ref().map(|e| e.exit_code),
            killed: out.exit.as_ref().is_some_and(|e| e.killed),
            timed_out: out.exit.as_ref().is_some_and(|e| e.timed_out),
            left_running: out
                .exit
                .as_ref()
                .map_or_else(Vec::new, |e| e.escaped.clone()),
            kill_note: out.exit.as_ref().and_then(|e| e.note.clone()),
        }
    }
}

/// `exec` result: the core's exec result ([`api::ExecResult`], the one
/// every front end returns) and the sandbox the command ran in. As JSON its
/// members and `sandbox_id`, without the ABI's `schema` tag.
#[derive(Clone, Debug)]
pub struct ExecResult {
    /// The sandbox the command ran in.
    pub sandbox_id: String,
    /// What the command did; its output kept as [`MAX_OUTPUT_BYTES`] says.
    pub result: api::ExecResult,
    /// Set when this call relaunched the conversation's sandbox because the
    /// old one was gone ([`RELAUNCHED`]).
    pub relaunched: Option<String>,
    /// Set when networks the sandbox reaches are gone — their Compose
    /// project is down — and the command ran without their services
    /// ([`NETWORKS_DOWN`]).
    pub networks_down: Option<String>,
}

impl Serialize for ExecResult {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut value = serde_json::to_value(&self.result).map_err(serde::ser::Error::custom)?;
        if let serde_json::Value::Object(members) = &mut value {
            members.remove("schema");
            members.insert("sandbox_id".into(), self.sandbox_id.clone().into());
            if let Some(r) = &self.relaunched {
                members.insert("relaunched".into(), r.clone().into());
            }
            if let Some(d) = &self.networks_down {
                members.insert("networks_down".into(), d.clone().into());
            }
        }
        value.serialize(s)
    }
}

/// The `relaunched` member of a result (exec, the file tools, describe):
/// present only when the call relaunched the conversation's sandbox.
pub const RELAUNCHED: &str = "Present only when this call relaunched the conversation's sandbox because the old one was gone (removed outside odek, or the Docker daemon restarted): says what was lost (background processes, installed packages, files outside /workspace).";

/// The `networks_down` member of `exec`'s result: present only when
/// networks the sandbox reaches are gone (SPEC §4.4).
pub const NETWORKS_DOWN: &str = "Present only when networks the sandbox reaches are gone because their Compose project is down (`docker compose down`): names them; the command ran anyway, without their services (their names do not resolve). Once the project is up again, the next call connects them.";

/// Adds the optional `relaunched` property to an object schema.
fn with_relaunched(schema: &mut Schema) {
    if let Some(serde_json::Value::Object(props)) =
        schema.as_object_mut().and_then(|o| o.get_mut("properties"))
    {
        props.insert(
            "relaunched".into(),
            serde_json::json!({ "description": RELAUNCHED, "type": "string" }),
        );
    }
}

impl JsonSchema for ExecResult {
    fn schema_name() -> Cow<'static, str> {
        "ExecResult".into()
    }

    /// The output schema clients see (mcp/tool-schemas.json): written out
    /// because its wording is MCP's (the output policy of [`MAX_OUTPUT_BYTES`]).
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let mut schema = json_schema!({
            "type": "object",
            "properties": {
                "sandbox_id": {
                    "description": "The sandbox the command ran in.",
                    "type": "string"
                },
                "exit_code": {
                    "description": "The command's exit code (124 after a timeout).",
                    "format": "int64",
                    "type": "integer"
                },
                "stdout": {
                    "description": "Standard output (UTF-8, invalid bytes replaced).",
                    "type": "string"
                },
                "stderr": {
                    "description": "Standard error (UTF-8, invalid bytes replaced).",
                    "type": "string"
                },
                "stdout_truncated": {
                    "description": "True when the middle of stdout was cut (more than 128 KiB).",
                    "type": "boolean"
                },
                "stderr_truncated": {
                    "description": "True when the middle of stderr was cut (more than 128 KiB).",
                    "type": "boolean"
                },
                "timed_out": {
                    "description": "True when the timeout elapsed before the command ended.",
                    "type": "boolean"
                },
                "killed": {
                    "description": "After a timeout: true when odek killed the command and saw none of\nits processes left; false when the kill could not be confirmed\n(stderr says why) or the command ended by itself.",
                    "type": "boolean"
                }
            },
            "required": [
                "sandbox_id",
                "exit_code",
                "stdout",
                "stderr",
                "stdout_truncated",
                "stderr_truncated",
                "timed_out",
                "killed"
            ]
        });
        with_relaunched(&mut schema);
        if let Some(serde_json::Value::Object(props)) =
            schema.as_object_mut().and_then(|o| o.get_mut("properties"))
        {
            props.insert(
                "networks_down".into(),
                serde_json::json!({ "description": NETWORKS_DOWN, "type": "string" }),
            );
        }
        schema
    }
}

/// Arguments naming one sandbox, default the conversation's.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SandboxRef {
    /// The sandbox (an id this server returned); default: this
    /// conversation's sandbox, launched on first use.
    #[serde(default)]
    pub sandbox_id: Option<String>,
}

/// `describe` result.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct DescribeResult {
    /// The sandbox described.
    pub sandbox_id: String,
    /// The "Execution environment" block for a system prompt (SPEC §9.1);
    /// the service names sit inside an `<untrusted_content_…>` wrapper.
    pub prompt: String,
    /// The short variant for a shell tool's description (SPEC §9.2).
    pub tool_description: String,
    /// The structured environment (`odek.environment/1`, see docs/MCP.md).
    pub environment: serde_json::Value,
    /// Set when this call relaunched the conversation's sandbox because the
    /// old one was gone: what was lost, in one paragraph.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub relaunched: Option<String>,
}

/// `sandbox_up` arguments (none yet; the server's sandbox flags apply).
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpArgs {}

/// A sandbox this server launched.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct SandboxInfo {
    /// The id to pass as `sandbox_id`. Known only to this server process.
    pub sandbox_id: String,
    /// The container's name (for `docker`/`odek sandbox ls`; tools do not
    /// accept it as an id).
    pub container: String,
    /// True for the conversation's default sandbox.
    pub default: bool,
    /// The sandbox it was narrowed from (`sandbox_narrow`).
    pub parent_id: Option<String>,
    /// What was applied: `odek: sandbox network=… pids=… image=… networks=… endpoint=…`.
    pub startup_line: String,
}

/// `sandbox_down` arguments.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DownArgs {
    /// The sandbox to remove (the default one too: the next `exec` without
    /// an id then launches a fresh one).
    pub sandbox_id: String,
}

/// `sandbox_down` result.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct DownResult {
    /// The sandbox removed.
    pub sandbox_id: String,
    /// Always true (a failure is a tool error).
    pub removed: bool,
    /// The files that tools on the user's machine run (git hooks,
    /// `.git/config`, `.envrc`, `.vscode/tasks.json`, Makefiles,
    /// `package.json`, `.pre-commit-config.yaml`) that changed while the
    /// sandbox lived, each with what changed; empty when none did.
    pub changed_host_files: Vec<odek_core::host_files::HostFileChange>,
    /// Why the files above could not be compared, when they could not.
    pub host_files_unchecked: Option<String>,
    /// What to tell the user about them, when there is something to tell.
    pub note: Option<String>,
    /// A copied workspace's copy-back before removal (the sandbox ran on
    /// an engine on another machine): `written`, the files written into
    /// the user's working directory, and `skipped`, each entry left out
    /// with `{path, reason}`; absent for a bind-mounted workspace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub copied_back: Option<odek_core::workspace_copy::Unpacked>,
}

impl DownResult {
    /// The result of removing `sandbox_id`, with `report`'s files.
    pub fn new(sandbox_id: String, report: odek_core::host_files::Report) -> DownResult {
        let note = report.line().map(|line| {
            format!(
                "{line}. Tell the user: these files run on their machine, outside any sandbox, when they use git, make, npm, direnv or their editor there."
            )
        });
        DownResult {
            sandbox_id,
            removed: true,
            changed_host_files: report.changed,
            host_files_unchecked: report.unchecked,
            note,
            copied_back: report.copied_back,
        }
    }
}

/// `sandbox_list` result.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct ListResult {
    /// Every sandbox this server launched and has not removed.
    pub sandboxes: Vec<SandboxInfo>,
}

/// `sandbox_narrow` arguments (SPEC §8): the parent and the core's
/// narrowing request, the C ABI's `odek.narrow-request/1` without its
/// `schema` tag, deserialized straight into it (so `network_mode` is parsed
/// where the core parses it). Every field may only narrow the parent's
/// resolved settings; unset inherits.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NarrowArgs {
    /// The parent sandbox; default: this conversation's sandbox.
    pub sandbox_id: Option<String>,
    /// What the child asks for.
    pub request: NarrowRequest,
}

/// The members `sandbox_narrow` takes: `sandbox_id` and the core request's
/// ([`NarrowRequest::MEMBERS`]: all but its `schema` tag).
static NARROW_MEMBERS: LazyLock<Vec<&'static str>> =
    LazyLock::new(|| [&["sandbox_id"], NarrowRequest::MEMBERS].concat());

impl<'de> Deserialize<'de> for NarrowArgs {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<NarrowArgs, D::Error> {
        use serde::de::Error;
        let mut members = serde_json::Map::<String, serde_json::Value>::deserialize(d)?;
        let expected: &'static [&'static str] = NARROW_MEMBERS.as_slice();
        // `schema` too: the tag belongs to the C ABI's document.
        if let Some(k) = members.keys().find(|k| !expected.contains(&k.as_str())) {
            return Err(D::Error::unknown_field(k, expected));
        }
        let sandbox_id = match members.remove("sandbox_id") {
            None => None,
            Some(v) => Option::<String>::deserialize(v).map_err(D::Error::custom)?,
        };
        let request = NarrowRequest::deserialize(serde_json::Value::Object(members))
            .map_err(D::Error::custom)?;
        Ok(NarrowArgs {
            sandbox_id,
            request,
        })
    }
}

impl JsonSchema for NarrowArgs {
    fn schema_name() -> Cow<'static, str> {
        "NarrowArgs".into()
    }

    /// The input schema clients see (mcp/tool-schemas.json): written out
    /// because its wording is MCP's and `network_mode` is shown as the
    /// string it is given as.
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "object",
            "properties": {
                "sandbox_id": {
                    "default": null,
                    "description": "The parent sandbox; default: this conversation's sandbox.",
                    "type": ["string", "null"]
                },
                "networks": {
                    "default": null,
                    "description": "A subset of the parent's networks, by name or full ID.",
                    "items": { "type": "string" },
                    "type": ["array", "null"]
                },
                "compose_project": {
                    "default": null,
                    "description": "Only the parent's networks of this Compose project.",
                    "type": ["string", "null"]
                },
                "network_mode": {
                    "default": null,
                    "description": "`none`: no default bridge, and without `networks` or\n`compose_project` no attached network either (no network at all);\nwith them, exactly those. Never `bridge` from `none`.",
                    "type": ["string", "null"]
                },
                "pids_limit": {
                    "default": null,
                    "description": "A lower or equal process limit.",
                    "format": "int64",
                    "type": ["integer", "null"]
                },
                "memory": {
                    "default": null,
                    "description": "A lower or equal memory limit, e.g. `256m`.",
                    "type": ["string", "null"]
                },
                "cpus": {
                    "default": null,
                    "description": "A lower or equal CPU limit, e.g. `0.5`.",
                    "type": ["string", "null"]
                },
                "readonly": {
                    "default": null,
                    "description": "`true` mounts `/workspace` read-only (it may only go on).",
                    "type": ["boolean", "null"]
                },
                "image": {
                    "default": null,
                    "description": "The parent's image reference (the image cannot change); any other\nis refused.",
                    "type": ["string", "null"]
                },
                "runtime": {
                    "default": null,
                    "description": "The parent's OCI runtime (the runtime cannot change); any other\nis refused.",
                    "type": ["string", "null"]
                }
            },
            "additionalProperties": false
        })
    }
}

/// `read_file` arguments.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadFileArgs {
    /// The file, inside the sandbox: absolute, or relative to `/workspace`.
    pub path: String,
    /// `"utf-8"` (default: text; bytes that are not UTF-8 are refused) or
    /// `"base64"` (any bytes).
    #[serde(default)]
    pub encoding: Option<api::FileEncoding>,
    /// The first byte to read (default 0).
    #[serde(default)]
    pub offset: Option<u64>,
    /// Most bytes to read (default and maximum 4 MiB, 4194304).
    #[serde(default)]
    pub length: Option<u64>,
    /// The sandbox (an id this server returned); default: this
    /// conversation's sandbox, launched on first use.
    #[serde(default)]
    pub sandbox_id: Option<String>,
}

/// `write_file` arguments.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteFileArgs {
    /// The file, inside the sandbox: absolute, or relative to `/workspace`.
    /// Missing parent directories are created.
    pub path: String,
    /// The whole new content, at most 16 MiB (16777216 bytes) once decoded.
    pub content: String,
    /// `"utf-8"` (default) or `"base64"` (for binary content).
    #[serde(default)]
    pub encoding: Option<api::FileEncoding>,
    /// The sandbox (an id this server returned); default: this
    /// conversation's sandbox, launched on first use.
    #[serde(default)]
    pub sandbox_id: Option<String>,
}

/// `edit_file` arguments.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditFileArgs {
    /// The file, inside the sandbox: absolute, or relative to `/workspace`.
    pub path: String,
    /// Exact-text replacements, applied in order; each `oldText` must occur
    /// exactly once, or nothing is written.
    pub edits: Vec<api::FileEdit>,
    /// The sandbox (an id this server returned); default: this
    /// conversation's sandbox, launched on first use.
    #[serde(default)]
    pub sandbox_id: Option<String>,
}

/// `list_directory` arguments.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListDirectoryArgs {
    /// The directory, inside the sandbox: absolute, or relative to
    /// `/workspace` (`"."` is `/workspace`).
    pub path: String,
    /// The sandbox (an id this server returned); default: this
    /// conversation's sandbox, launched on first use.
    #[serde(default)]
    pub sandbox_id: Option<String>,
}

/// A file tool's result: the core's (the C ABI's document without its
/// `schema` tag) and the sandbox it acted in, as one object.
#[derive(Clone, Debug)]
pub struct Sandboxed<T> {
    /// The sandbox the tool acted in.
    pub sandbox_id: String,
    /// The core's result.
    pub result: T,
    /// Set when this call relaunched the conversation's sandbox because the
    /// old one was gone ([`RELAUNCHED`]).
    pub relaunched: Option<String>,
}

impl<T: Serialize> Serialize for Sandboxed<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut value = serde_json::to_value(&self.result).map_err(serde::ser::Error::custom)?;
        if let serde_json::Value::Object(members) = &mut value {
            members.remove("schema");
            members.insert("sandbox_id".into(), self.sandbox_id.clone().into());
            if let Some(r) = &self.relaunched {
                members.insert("relaunched".into(), r.clone().into());
            }
        }
        value.serialize(s)
    }
}

impl<T: JsonSchema> JsonSchema for Sandboxed<T> {
    fn schema_name() -> Cow<'static, str> {
        format!("{}InSandbox", T::schema_name()).into()
    }

    /// The core result's schema without its `schema` member and title,
    /// with `sandbox_id`.
    fn json_schema(g: &mut SchemaGenerator) -> Schema {
        let mut s = T::json_schema(g);
        if let Some(o) = s.as_object_mut() {
            o.remove("title");
            // The core's doc of the ABI document, not the tool's words.
            o.remove("description");
            if let Some(serde_json::Value::Object(props)) = o.get_mut("properties") {
                props.remove("schema");
                props.insert(
                    "sandbox_id".into(),
                    serde_json::json!({
                        "description": "The sandbox the tool acted in.",
                        "type": "string"
                    }),
                );
            }
            if let Some(serde_json::Value::Array(req)) = o.get_mut("required") {
                req.retain(|v| v != "schema");
                req.push("sandbox_id".into());
            }
        }
        with_relaunched(&mut s);
        s
    }
}
