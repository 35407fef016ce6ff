//! The MCP server: tools over [`Sandboxes`], the environment block as
//! `instructions`, the short variant in the `exec` tool's description.

use std::sync::Arc;

use odek_core::advice::Surface;
use odek_core::api::{self, ExecMembers};
use odek_core::audit::Call;
use odek_core::describe::{render_prompt, render_tool};
use odek_core::engine::StreamKind;
use odek_core::exec::{Capture, Keep};
use odek_core::{Client, ExecOptions, ExecRequest};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{Implementation, ServerCapabilities, ServerConfig};
use rmcp::service::RequestContext;
use rmcp::{tool, tool_handler, tool_router, Json, RoleServer, ServerHandler};

use crate::caller::Caller;
use crate::limits::Limits;
use crate::planned;
use crate::sandboxes::{Refusal, Sandboxes, Target};
use crate::tools::{
    BackgroundStarted, DescribeResult, DownArgs, DownResult, EditFileArgs, ExecArgs, ExecReply,
    ExecResult, ListDirectoryArgs, ListResult, NarrowArgs, ProcessKillArgs, ProcessOutputArgs,
    ProcessResult, ReadFileArgs, SandboxInfo, SandboxRef, Sandboxed, UpArgs, WriteFileArgs,
    DEFAULT_TIMEOUT_SECS, MAX_OUTPUT_BYTES,
};

/// How to use the tools, before the environment block.
const USAGE: &str = "This server runs commands for you in an odek sandbox: a Docker container that reaches the developer's Docker Compose services by name, never the host. \
Use the `exec` tool to run commands (`command` is run by /bin/sh -c in /workspace). \
`read_file`, `write_file`, `edit_file` and `list_directory` work on files inside the sandbox, as the sandbox's user: paths are absolute or relative to /workspace, which is the developer's live checkout (a change there is a change to their files); they are the way to move large or binary content, which shell arguments cannot carry. \
Every tool takes an optional `sandbox_id`; without one it uses this conversation's sandbox, launched on the first call that needs it. \
`sandbox_up` launches another sandbox and returns its id, `sandbox_narrow` a sub-agent's sandbox limited to part of a parent's networks, `sandbox_down` removes one, `sandbox_list` lists them. \
A refusal (Docker unreachable, a network missing, settings needing approval) is a tool error that says what to fix; nothing then runs anywhere.";

/// What the agent is told of `exec`'s output cap ([`MAX_OUTPUT_BYTES`]),
/// in the instructions and the tool's description.
fn output_cap_text() -> String {
    let kib = MAX_OUTPUT_BYTES / 1024;
    format!(
        "Output cap: an `exec` result carries at most {kib} KiB of stdout and {kib} KiB of stderr — the first and the last {} KiB, the middle cut (`stdout_truncated`/`stderr_truncated` say so). Send long output to a file in /workspace and read the part you need.",
        kib / 2
    )
}

/// The odek MCP server (one per client connection).
#[derive(Clone)]
pub struct OdekMcp {
    sandboxes: Arc<Sandboxes>,
    instructions: String,
    tool_router: ToolRouter<OdekMcp>,
}

impl std::fmt::Debug for OdekMcp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OdekMcp").finish_non_exhaustive()
    }
}

/// `s` with its first letter in lower case (a sentence for the model,
/// shown after "odek: " on stderr).
fn lower_first(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_lowercase().chain(c).collect())
        .unwrap_or_default()
}

fn refusal(r: Refusal) -> String {
    r.0
}

fn info(id: &str, e: &crate::sandboxes::Entry, default: bool) -> SandboxInfo {
    SandboxInfo {
        sandbox_id: id.to_string(),
        container: e.sandbox.name.clone(),
        default,
        parent_id: e.parent.clone(),
        startup_line: e.sandbox.startup_line(),
    }
}

// Every tool returns `Result<Json<T>, String>` (written out: the macro reads
// the output schema from that spelling): structured content, or a tool
// error whose text names the cause and the fix.
#[tool_router(vis = "pub(crate)")]
impl OdekMcp {
    /// A server launching sandboxes from `inputs` (sandbox mode forced on by
    /// the caller; see [`crate::serve_stdio`]), at most
    /// `limits.max_sandboxes` at once. Resolves the plan once to tell the
    /// agent what the sandbox will have; a resolution that fails is
    /// described in the instructions and reported again by every tool.
    pub async fn new(
        odek: Client,
        inputs: odek_core::config::ConfigInputs,
        limits: Limits,
    ) -> OdekMcp {
        let sandboxes = Arc::new(Sandboxes::new(odek, inputs, limits));
        let (block, tool_text) = match sandboxes.resolve().await {
            Ok(plan) => {
                sandboxes.pin(&plan);
                sandboxes.warm(&plan);
                let env = planned::environment(sandboxes.odek(), &plan).await;
                // Whether the first launch can get its image, checked now
                // rather than promised (nothing is pulled or built here).
                // A project's settings not approved yet may name the image:
                // no registry it names is asked before the operator says so.
                let image = match &plan.approval {
                    Some(req) if req.standing().is_none() => format!(
                        "The sandbox image {} is checked once the project's settings are approved (no registry a project names is asked before).",
                        plan.image.reference.create_ref()
                    ),
                    _ => sandboxes.odek().image_check(&plan).await.sentence(),
                };
                errln!("odek: {}", lower_first(&image));
                // Settings that still need the operator's approval are not
                // what the agent gets: say that first (SPEC §7).
                let pending = match &plan.approval {
                    Some(req) if req.standing().is_none() => format!(
                        "NOT APPROVED YET: {} asks for sandbox settings ({}) that the operator has not approved, so every tool call that launches a sandbox asks the user through the MCP client (if it supports elicitation) or is refused until they are approved (the operator runs `{}` in a terminal and answers `t`; or sets {}=1 for this server). If approved, the sandbox will have:\n\n",
                        req.config,
                        req.knobs.join(", "),
                        odek_core::approval::approve_command(&req.project_dir),
                        odek_core::config::APPROVE_ENV
                    ),
                    _ => String::new(),
                };
                (
                    format!(
                        "{pending}{image}\n\nThe sandbox is not running yet; this is what it WILL have when it starts (`describe` gives the live view):\n\n{}",
                        render_prompt(&env)
                    ),
                    render_tool(&env),
                )
            }
            Err(e) => {
                let why = Refusal::from(e).0;
                // The operator sees this (the agent sees the instructions).
                errln!("odek: the sandbox cannot be set up, so every tool call will be refused until this is fixed: {why}");
                (
                    format!("## Execution environment\n\nThe sandbox cannot be set up right now, so no command can run: {why}\nEvery tool call tries again and reports the cause."),
                    "Runs a command in an odek Docker sandbox (currently refused: call it to see why).".to_string(),
                )
            }
        };
        let mut tool_router = for_models(Self::tool_router());
        if let Some(route) = tool_router.map.get_mut("exec") {
            route.attr.description = Some(
                format!(
                    "{tool_text}\nArguments: `command` (run by /bin/sh -c) or `argv`; optional `env`, `timeout_secs` (default {DEFAULT_TIMEOUT_SECS}), `background` (true: return at once with a `process_id` for `process_output`/`process_kill`), `sandbox_id` (default: this conversation's sandbox, launched on first use).\n{}",
                    output_cap_text()
                )
                .into(),
            );
        }
        let block = format!("{block}\n{}\n", output_cap_text());
        OdekMcp {
            sandboxes,
            instructions: format!("{USAGE}\n\n{block}"),
            tool_router,
        }
    }

    /// The `instructions` sent at initialize.
    pub fn instructions(&self) -> &str {
        &self.instructions
    }

    /// Removes every sandbox this server launched; returns lines saying
    /// what could not be removed.
    pub async fn shutdown(&self) -> Vec<String> {
        self.sandboxes.shutdown().await
    }

    #[tool(
        name = "exec",
        description = "Runs a command in an odek Docker sandbox."
    )]
    async fn exec(
        &self,
        Parameters(args): Parameters<ExecArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<ExecReply>, String> {
        let req = exec_request(&args)?;
        let caller = Caller::of(&ctx);
        let Target {
            id,
            sandbox,
            relaunched,
            networks_down,
        } = self
            .sandboxes
            .get(args.sandbox_id.as_deref(), &caller)
            .await
            .map_err(refusal)?;
        if args.background == Some(true) {
            let process = self
                .sandboxes
                .odek()
                .exec_background(&sandbox, &req)
                .await
                .map_err(|e| refusal(with_note(relaunched.as_deref(), Refusal::during_exec(e))))?;
            return Ok(Json(ExecReply::Background(BackgroundStarted {
                sandbox_id: id,
                process_id: process.0,
                relaunched,
                networks_down,
            })));
        }
        let capture = Capture::new(Keep::HeadAndTail, MAX_OUTPUT_BYTES);
        let opts = ExecOptions {
            cancel: Some(ctx.ct.clone()),
            ..ExecOptions::default()
        };
        let (lines, send_lines) = caller.output_progress();
        let sink = |k: StreamKind, b: &[u8]| {
            capture.write(k, b);
            if let Some(l) = &lines {
                l.write(k, b);
            }
        };
        let run = async {
            let out = self
                .sandboxes
                .odek()
                .exec(&sandbox, &req, &opts, &sink)
                .await;
            if let Some(l) = &lines {
                l.finish();
            }
            out
        };
        let (outcome, ()) = tokio::join!(run, send_lines);
        let outcome = outcome
            .map_err(|e| refusal(with_note(relaunched.as_deref(), Refusal::during_exec(e))))?;
        if outcome.cancelled {
            // The core's words for a command cut short, in MCP's terms.
            return Err(outcome
                .cut_short_text(&sandbox, false, odek_core::advice::Surface::Mcp)
                .unwrap_or_default());
        }
        Ok(Json(ExecReply::Ran(ExecResult {
            sandbox_id: id,
            result: api::ExecResult::new(&outcome, capture.finish()),
            relaunched,
            networks_down,
        })))
    }

    #[tool(
        name = "process_output",
        description = "Output of a background process (`exec` with `background`) since `cursor` (default: the oldest byte kept; odek keeps its last 1 MiB), at most 128 KiB a call: pass `next_cursor` back for what follows (`more` says there is more now). `dropped_bytes` counts output lost before `cursor`; `running` is false and `exit_code` set once it ended.",
        annotations(read_only_hint = true)
    )]
    async fn process_output(
        &self,
        Parameters(args): Parameters<ProcessOutputArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<ProcessResult>, String> {
        let Target {
            id,
            sandbox,
            relaunched,
            ..
        } = self.sandbox_for(args.sandbox_id.as_deref(), &ctx).await?;
        let call = Call::start(&sandbox, Surface::Mcp, "process_output").process(&args.process_id);
        let out = self
            .sandboxes
            .odek()
            .process_output(
                &sandbox,
                &odek_core::exec::ProcessId(args.process_id),
                args.cursor,
            )
            .await;
        match &out {
            Ok(o) => call.finish(
                o.exit.as_ref().map(|e| e.exit_code),
                Some(if o.exit.is_some() { "ended" } else { "running" }),
                None,
            ),
            Err(e) => call.finish(None, None, Some(e)),
        }
        let out =
            out.map_err(|e| refusal(with_note(relaunched.as_deref(), Refusal::during_exec(e))))?;
        Ok(Json(ProcessResult::new(id, &out)))
    }

    #[tool(
        name = "process_kill",
        description = "Kills a background process (`exec` with `background`) and everything it started, and returns its status (no output: `process_output` still reads it). `killed` is true only when it killed processes of it and saw every one gone; when the process had ended and nothing it started was left, `killed` is false and `kill_note` says there was nothing to kill.",
        annotations(destructive_hint = true)
    )]
    async fn process_kill(
        &self,
        Parameters(args): Parameters<ProcessKillArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<ProcessResult>, String> {
        let Target {
            id,
            sandbox,
            relaunched,
            ..
        } = self.sandbox_for(args.sandbox_id.as_deref(), &ctx).await?;
        let out = self
            .sandboxes
            .odek()
            .process_kill(&sandbox, &odek_core::exec::ProcessId(args.process_id))
            .await
            .map_err(|e| refusal(with_note(relaunched.as_deref(), Refusal::during_exec(e))))?;
        Ok(Json(ProcessResult::new(id, &out)))
    }

    #[tool(
        name = "read_file",
        annotations(read_only_hint = true),
        description = "Reads a file inside the sandbox, as the sandbox's user with its mounts (never the host's file system; symlinks resolve inside the sandbox). `path` is absolute or relative to /workspace, the developer's live checkout. Returns the text in `content` (or base64 with `encoding: \"base64\"`), with the file's `size` and the piece's `offset` and `length`. At most 4 MiB (`limit`) per call: when `truncated` is true, call again with `offset` = `next_offset` (or pass `offset`/`length` yourself). Files of /proc and /sys are read to their end. As text, a piece holds whole characters: an `offset` inside a UTF-8 character starts at the next one (the result's `offset` says where) and a piece ends before a character it would cut. Bytes that are not UTF-8 are refused as text: read them with `encoding: \"base64\"`."
    )]
    async fn read_file(
        &self,
        Parameters(args): Parameters<ReadFileArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<Sandboxed<api::ReadFileResult>>, String> {
        let req = api::ReadFileRequest {
            schema: None,
            path: args.path,
            encoding: args.encoding.unwrap_or_default(),
            offset: args.offset,
            length: args.length,
        };
        let target = self.sandbox_for(args.sandbox_id.as_deref(), &ctx).await?;
        let result = self
            .sandboxes
            .odek()
            .read_file(&target.sandbox, &req, &file_options(&ctx))
            .await;
        sandboxed(target, result)
    }

    #[tool(
        name = "write_file",
        annotations(destructive_hint = true, idempotent_hint = true),
        description = "Creates or replaces a whole file inside the sandbox, as the sandbox's user with its mounts (never the host's file system; symlinks resolve inside the sandbox). `path` is absolute or relative to /workspace, the developer's live checkout: a write there changes their real files. Missing parent directories are created; a replaced file keeps its permissions. `content` is text, or base64 with `encoding: \"base64\"` (binary files); at most 16 MiB once decoded. One MCP message to this server may be at most 97 MiB (101711872 bytes), which a write of 16 MiB fits in any encoding; a longer message is answered with an error. A read-only workspace refuses the write and says why."
    )]
    async fn write_file(
        &self,
        Parameters(args): Parameters<WriteFileArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<Sandboxed<api::WriteFileResult>>, String> {
        let req = api::WriteFileRequest {
            schema: None,
            path: args.path,
            content: args.content,
            encoding: args.encoding.unwrap_or_default(),
        };
        let target = self.sandbox_for(args.sandbox_id.as_deref(), &ctx).await?;
        let result = self
            .sandboxes
            .odek()
            .write_file(&target.sandbox, &req, &file_options(&ctx))
            .await;
        sandboxed(target, result)
    }

    #[tool(
        name = "edit_file",
        annotations(destructive_hint = true),
        description = "Edits a UTF-8 text file inside the sandbox by exact replacements, as the sandbox's user: `edits` is a list of {oldText, newText} applied in order, each to the text the earlier ones left. Every oldText must match exactly once, whitespace and line endings included; when one is absent or matches more than once, nothing is written and the error says which (include more surrounding lines to make it unique). Returns a unified `diff` of at most 256 KiB (`diff_truncated` says it was cut; the edit is applied in full). `path` is absolute or relative to /workspace, the developer's live checkout. Files up to 16 MiB."
    )]
    async fn edit_file(
        &self,
        Parameters(args): Parameters<EditFileArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<Sandboxed<api::EditFileResult>>, String> {
        let req = api::EditFileRequest {
            schema: None,
            path: args.path,
            edits: args.edits,
        };
        let target = self.sandbox_for(args.sandbox_id.as_deref(), &ctx).await?;
        let result = self
            .sandboxes
            .odek()
            .edit_file(&target.sandbox, &req, &file_options(&ctx))
            .await;
        sandboxed(target, result)
    }

    #[tool(
        name = "list_directory",
        annotations(read_only_hint = true),
        description = "Lists a directory inside the sandbox, as the sandbox's user with its mounts (never the host's file system). `path` is absolute or relative to /workspace, the developer's live checkout (`\".\"` is /workspace). `listing` has one line per entry: `[FILE] name`, `[DIR] name`, `[SYMLINK] name -> target` or `[OTHER] name`; `entries` gives each `name`, `type` (file, dir, symlink, other), a file's `size` and a symlink's `target`. At most 10000 entries, the first by name: when `truncated` is true, `total` says how many the directory holds (list a subdirectory, or use exec with find or ls and a filter)."
    )]
    async fn list_directory(
        &self,
        Parameters(args): Parameters<ListDirectoryArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<Sandboxed<api::ListDirectoryResult>>, String> {
        let req = api::ListDirectoryRequest {
            schema: None,
            path: args.path,
        };
        let target = self.sandbox_for(args.sandbox_id.as_deref(), &ctx).await?;
        let result = self
            .sandboxes
            .odek()
            .list_directory(&target.sandbox, &req, &file_options(&ctx))
            .await;
        sandboxed(target, result)
    }

    #[tool(
        name = "describe",
        annotations(read_only_hint = true),
        description = "Describes a sandbox as it is now: `prompt` is the Execution environment block (network mode, internet, the services reachable by name inside an untrusted-content wrapper), `tool_description` its short variant, `environment` the structured data. Launches the conversation's sandbox when it is not running yet."
    )]
    async fn describe(
        &self,
        Parameters(args): Parameters<SandboxRef>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<DescribeResult>, String> {
        let Target {
            id,
            sandbox,
            relaunched,
            ..
        } = self.sandbox_for(args.sandbox_id.as_deref(), &ctx).await?;
        let call = Call::start(&sandbox, Surface::Mcp, "describe");
        let env = self.sandboxes.odek().describe(&sandbox).await;
        call.result(&env, "described");
        let env =
            env.map_err(|e| refusal(with_note(relaunched.as_deref(), Refusal::during_exec(e))))?;
        let environment = serde_json::to_value(&env)
            .map_err(|e| format!("cannot encode the environment as JSON: {e}"))?;
        Ok(Json(DescribeResult {
            sandbox_id: id,
            prompt: render_prompt(&env),
            tool_description: render_tool(&env),
            environment,
            relaunched,
        }))
    }

    #[tool(
        name = "sandbox_up",
        description = "Launches another sandbox with the server's settings and returns its id (pass it as `sandbox_id`). It is removed by sandbox_down or when the server stops."
    )]
    async fn sandbox_up(
        &self,
        Parameters(_args): Parameters<UpArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<SandboxInfo>, String> {
        let call = Call::begin(Surface::Mcp, "sandbox_up");
        let (id, sandbox) = self
            .sandboxes
            .up(&Caller::of(&ctx))
            .await
            .map_err(refusal)?;
        call.at(&sandbox).finish(None, Some("launched"), None);
        Ok(Json(SandboxInfo {
            sandbox_id: id,
            container: sandbox.name.clone(),
            default: false,
            parent_id: None,
            startup_line: sandbox.startup_line(),
        }))
    }

    #[tool(
        name = "sandbox_down",
        annotations(destructive_hint = true),
        description = "Removes a sandbox this server launched (its container and everything running in it). The result names the files tools on the user's machine run (git hooks, .git/config, Makefile, package.json, …) that changed while it lived: tell the user to review them before running git or make."
    )]
    async fn sandbox_down(
        &self,
        Parameters(args): Parameters<DownArgs>,
    ) -> Result<Json<DownResult>, String> {
        let report = self
            .sandboxes
            .down(&args.sandbox_id)
            .await
            .map_err(refusal)?;
        Ok(Json(DownResult::new(args.sandbox_id, report)))
    }

    #[tool(
        name = "sandbox_list",
        annotations(read_only_hint = true),
        description = "Lists the sandboxes this server launched and has not removed."
    )]
    async fn sandbox_list(&self) -> Result<Json<ListResult>, String> {
        let listed = self.sandboxes.list().await;
        // In the record of each sandbox it showed (none: nothing touched).
        for (_, e, _) in &listed {
            Call::start(&e.sandbox, Surface::Mcp, "sandbox_list").finish(
                None,
                Some("listed"),
                None,
            );
        }
        let sandboxes = listed.iter().map(|(id, e, d)| info(id, e, *d)).collect();
        Ok(Json(ListResult { sandboxes }))
    }

    #[tool(
        name = "sandbox_narrow",
        description = "Launches a sub-agent's sandbox narrowed from a parent's resolved settings: only a subset of the parent's networks (`networks` by name, or `compose_project`); `network_mode` none drops the default bridge and, unless `networks`/`compose_project` name some, every attached network too (no network at all); lower `pids_limit`/`memory`/`cpus`; `readonly` on. Anything wider is refused. Returns the new sandbox's id."
    )]
    async fn sandbox_narrow(
        &self,
        Parameters(args): Parameters<NarrowArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<SandboxInfo>, String> {
        let caller = Caller::of(&ctx);
        let call = Call::begin(Surface::Mcp, "sandbox_narrow");
        let Target {
            id: parent_id,
            sandbox: parent,
            ..
        } = self
            .sandboxes
            .get(args.sandbox_id.as_deref(), &caller)
            .await
            .map_err(refusal)?;
        let call = call.parent(&parent.name);
        args.request
            .check()
            .map_err(|e| refusal(odek_core::Error::from(e).into()))?;
        let place = self.sandboxes.reserve().map_err(refusal)?;
        let plan = odek_core::narrow::narrow(&parent.plan, &args.request)
            .map_err(|e| refusal(odek_core::Error::from(e).into()))?;
        let (id, sandbox) = self
            .sandboxes
            .launch(&plan, Some((&parent_id, &parent.name)), &caller, place)
            .await
            .map_err(refusal)?;
        call.at(&sandbox).finish(None, Some("launched"), None);
        Ok(Json(SandboxInfo {
            sandbox_id: id,
            container: sandbox.name.clone(),
            default: false,
            parent_id: Some(parent_id),
            startup_line: sandbox.startup_line(),
        }))
    }
}

/// A file tool's options: cancelled with the request.
fn file_options(ctx: &RequestContext<RoleServer>) -> ExecOptions {
    ExecOptions {
        cancel: Some(ctx.ct.clone()),
        ..ExecOptions::default()
    }
}

/// A file tool's result tagged with its sandbox's id, or the refusal of a
/// call that failed once the sandbox was there (the one ending of the file
/// tools).
fn sandboxed<R>(
    target: Target,
    result: odek_core::Result<R>,
) -> Result<Json<Sandboxed<R>>, String> {
    let Target { id, relaunched, .. } = target;
    match result {
        Ok(result) => Ok(Json(Sandboxed {
            sandbox_id: id,
            result,
            relaunched,
        })),
        Err(e) => Err(refusal(with_note(
            relaunched.as_deref(),
            Refusal::during_exec(e),
        ))),
    }
}

/// `r`, preceded by the note of a relaunch the same call made (the agent
/// must learn it even when the call then failed).
fn with_note(relaunched: Option<&str>, r: Refusal) -> Refusal {
    match relaunched {
        Some(note) => Refusal(format!("{note}\n{}", r.0)),
        None => r,
    }
}

/// How `exec` names the request's members in a refusal.
const EXEC_ARGS: ExecMembers = ExecMembers {
    argv: "argv",
    shell: "command",
    timeout: "timeout_secs",
};

/// The core's request from the tool's arguments, parsed as every front
/// end's is ([`api::ExecRequest::into_core_as`]) with MCP's default
/// timeout, then checked (the core's checks: its size cap among them), all before any
/// sandbox is launched.
fn exec_request(args: &ExecArgs) -> Result<ExecRequest, String> {
    let req = api::ExecRequest {
        argv: args.argv.clone(),
        shell: args.command.clone(),
        env: args.env.clone().unwrap_or_default(),
        // A background command has no timeout unless one is given.
        timeout_secs: match args.background {
            Some(true) => args.timeout_secs,
            _ => Some(args.timeout_secs.unwrap_or(DEFAULT_TIMEOUT_SECS)),
        },
        ..Default::default()
    }
    .into_core_as(&EXEC_ARGS)
    .map_err(|e| e.0)?;
    req.check().map_err(|e| refusal(Refusal::during_exec(e)))?;
    Ok(req)
}

/// The tools as a model sees them: the JSON Schemas come from core's
/// types, whose docs cite the SPEC's sections for developers; a model has no
/// SPEC, so every " (SPEC §…)" and "SPEC §…" is taken out of the schemas'
/// text (tool descriptions are written without them).
fn for_models(mut router: ToolRouter<OdekMcp>) -> ToolRouter<OdekMcp> {
    for route in router.map.values_mut() {
        let mut input = serde_json::Value::Object((*route.attr.input_schema).clone());
        scrub_spec(&mut input);
        if let serde_json::Value::Object(o) = input {
            route.attr.input_schema = std::sync::Arc::new(o);
        }
        if let Some(out) = &route.attr.output_schema {
            let mut output = serde_json::Value::Object((**out).clone());
            scrub_spec(&mut output);
            if let serde_json::Value::Object(o) = output {
                route.attr.output_schema = Some(std::sync::Arc::new(o));
            }
        }
    }
    router
}

/// How rmcp's text of arguments that do not deserialize begins (serde's
/// message then, which names no parameter for a wrong type).
const BAD_PARAMETERS: &str = "failed to deserialize parameters:";

/// A JSON value's type as JSON Schema names it (`"integer"` for a whole
/// number).
fn json_kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "boolean",
        serde_json::Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        serde_json::Value::Number(_) => "number",
        serde_json::Value::String(_) => "string",
        serde_json::Value::Array(_) => "array",
        serde_json::Value::Object(_) => "object",
    }
}

/// For each argument (`kinds`: name, [`json_kind`]) whose type its
/// property in the tool's input `schema` does not allow: "parameter `X`
/// must be an integer (or null), not a string". Properties whose type the
/// schema gives only through `anyOf`/`$ref` (an enum) are not judged.
fn wrong_types(
    schema: &serde_json::Map<String, serde_json::Value>,
    kinds: &[(String, &'static str)],
) -> Vec<String> {
    let Some(props) = schema.get("properties").and_then(|p| p.as_object()) else {
        return Vec::new();
    };
    let article = |t: &str| {
        if t.starts_with(['a', 'e', 'i', 'o', 'u']) {
            format!("an {t}")
        } else {
            format!("a {t}")
        }
    };
    kinds
        .iter()
        .filter_map(|(name, kind)| {
            let allowed: Vec<&str> = match props.get(name)?.get("type")? {
                serde_json::Value::String(t) => vec![t.as_str()],
                serde_json::Value::Array(ts) => ts.iter().filter_map(|t| t.as_str()).collect(),
                _ => return None,
            };
            let fits = allowed
                .iter()
                .any(|t| *t == *kind || (*t == "number" && *kind == "integer"));
            if fits {
                return None;
            }
            let wanted: Vec<String> = allowed
                .iter()
                .filter(|t| **t != "null")
                .map(|t| article(t))
                .collect();
            let or_null = if allowed.contains(&"null") {
                " (or null)"
            } else {
                ""
            };
            Some(format!(
                "parameter `{}` must be {}{or_null}, not {}",
                odek_core::text::foreign(name),
                wanted.join(" or "),
                if *kind == "null" {
                    "null".to_string()
                } else {
                    article(kind)
                }
            ))
        })
        .collect()
}

/// Removes SPEC citations from every string of `v`: " (SPEC §9.1)" and a
/// bare "SPEC §9.1" (a section number: digits and dots).
fn scrub_spec(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::String(s) if s.contains("SPEC") => *s = without_spec(s),
        serde_json::Value::Array(a) => a.iter_mut().for_each(scrub_spec),
        serde_json::Value::Object(o) => o.values_mut().for_each(scrub_spec),
        _ => {}
    }
}

fn without_spec(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find("SPEC §") {
        let after = &rest[at + "SPEC §".len()..];
        let n = after
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(after.len());
        // A trailing dot ends the sentence, not the section number.
        let n = if after[..n].ends_with('.') { n - 1 } else { n };
        let mut head = &rest[..at];
        let mut tail = &after[n..];
        if head.ends_with('(') && tail.starts_with(')') {
            head = head[..head.len() - 1].trim_end();
            tail = &tail[1..];
        } else if head.ends_with(", ") && tail.starts_with(')') {
            head = &head[..head.len() - 2];
        }
        out.push_str(head);
        rest = tail;
    }
    out.push_str(rest);
    out
}

impl OdekMcp {
    /// The sandbox a tool call names (`sandbox_id`), or the conversation's
    /// default one (launched on first use), with its id; a refusal as the
    /// tool error otherwise.
    async fn sandbox_for(
        &self,
        sandbox_id: Option<&str>,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<Target, String> {
        self.sandboxes
            .get(sandbox_id, &Caller::of(ctx))
            .await
            .map_err(refusal)
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for OdekMcp {
    /// Routes a tool call. Error text rmcp writes — which may quote the
    /// caller's own JSON (serde's `unknown field` names a key verbatim) —
    /// leaves as every other message of this server does (SPEC §9.3): a
    /// protocol error's message as one line through
    /// [`odek_core::text::foreign`], a tool error's text (rmcp turns a bad
    /// argument into one) through [`odek_core::text::terminal`], which
    /// leaves odek's own messages as they are.
    ///
    /// A client on MCP 2026-07-28 or newer with form elicitation is asked
    /// for approval through the call's result (`caller::Round`):
    /// a call that asked ends with that `InputRequiredResult`.
    async fn call_tool(
        &self,
        request: rmcp::model::CallToolRequestParams,
        mut context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CallToolResponse, rmcp::ErrorData> {
        use odek_core::text::{foreign, terminal};
        use std::borrow::Cow;
        let round = crate::caller::Round::of(&request, &context, self.sandboxes.pending());
        if let Some(r) = &round {
            context.extensions.insert(r.clone());
        }
        // Each argument's name and JSON type (not its value: a file's
        // content may be megabytes), to name the one of a wrong type.
        let kinds: Vec<(String, &'static str)> = request
            .arguments
            .iter()
            .flatten()
            .map(|(k, v)| (k.clone(), json_kind(v)))
            .collect();
        let tool = request.name.to_string();
        let call = rmcp::handler::server::tool::ToolCallContext::new(self, request, context);
        let answer = self.tool_router.call(call).await;
        if let Some(question) = round.and_then(|r| r.question()) {
            return Ok(question.into());
        }
        match answer {
            Ok(rmcp::model::CallToolResponse::Complete(mut result))
                if result.is_error == Some(true) =>
            {
                let schema = self
                    .tool_router
                    .map
                    .get(tool.as_str())
                    .map(|r| r.attr.input_schema.clone());
                for block in &mut result.content {
                    if let rmcp::model::ContentBlock::Text(t) = block {
                        if let (true, Some(schema)) = (t.text.starts_with(BAD_PARAMETERS), &schema)
                        {
                            for line in wrong_types(schema, &kinds) {
                                t.text.push_str("; ");
                                t.text.push_str(&line);
                            }
                        }
                        if let Cow::Owned(safe) = terminal(&t.text) {
                            t.text = safe;
                        }
                    }
                }
                Ok(result.into())
            }
            Ok(other) => Ok(other),
            Err(mut e) => {
                if let Cow::Owned(safe) = foreign(&e.message) {
                    e.message = safe.into();
                }
                Err(e)
            }
        }
    }

    /// Answers the stand-in of a message too long to read
    /// ([`crate::stdio::TOO_LARGE_METHOD`]) with an error saying so; any
    /// other unknown method as rmcp does.
    async fn on_custom_request(
        &self,
        request: rmcp::model::CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CustomResult, rmcp::ErrorData> {
        if request.method == crate::stdio::TOO_LARGE_METHOD {
            return Err(crate::stdio::too_large(&request));
        }
        Err(rmcp::ErrorData::new(
            rmcp::model::ErrorCode::METHOD_NOT_FOUND,
            odek_core::text::foreign(&request.method).into_owned(),
            None,
        ))
    }

    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("odek", odek_core::VERSION))
            .with_instructions(self.instructions.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use odek_core::narrow::NarrowRequest;
    use odek_core::Command;

    /// Where the tools' schemas are checked in.
    const TOOL_SCHEMAS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tool-schemas.json");

    /// Every tool's input and output JSON Schema, as clients receive them
    /// in `tools/list`, byte for byte as checked in: they are the contract
    /// agents validate against (add optional fields, never rename). After
    /// an intended change, rewrite the file with
    /// `ODEK_WRITE_TOOL_SCHEMAS=1 cargo test -p odek-mcp tool_schemas`.
    #[test]
    fn tool_schemas_are_the_checked_in_ones() {
        let mut tools = serde_json::Map::new();
        for t in for_models(OdekMcp::tool_router()).list_all() {
            tools.insert(
                t.name.to_string(),
                serde_json::json!({"input": t.input_schema, "output": t.output_schema}),
            );
        }
        let mut text = serde_json::to_string_pretty(&tools).expect("JSON");
        text.push('\n');
        if std::env::var_os("ODEK_WRITE_TOOL_SCHEMAS").is_some() {
            std::fs::write(TOOL_SCHEMAS, &text).expect("write the schemas");
        }
        let want = std::fs::read_to_string(TOOL_SCHEMAS).unwrap_or_default();
        assert!(
            text == want,
            "the MCP tools' schemas differ from {TOOL_SCHEMAS} (if intended: ODEK_WRITE_TOOL_SCHEMAS=1 cargo test -p odek-mcp tool_schemas):\n{text}"
        );
    }

    /// docs/MCP.md's table of tools has a row for every tool the server
    /// lists, naming its annotations as set (or "none") and every member
    /// of its output schema, and no row for a tool that is gone.
    #[test]
    fn the_docs_table_names_every_tool_its_annotations_and_result_fields() {
        let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/MCP.md"))
            .expect("docs/MCP.md");
        let rows: Vec<&str> = doc.lines().filter(|l| l.starts_with("| [`")).collect();
        let tools = for_models(OdekMcp::tool_router()).list_all();
        assert_eq!(rows.len(), tools.len(), "one row per tool: {rows:#?}");
        for t in &tools {
            let row = rows
                .iter()
                .find(|r| r.starts_with(&format!("| [`{}`]", t.name)))
                .unwrap_or_else(|| {
                    panic!("docs/MCP.md's table of tools has no row for {}", t.name)
                });
            let cells: Vec<&str> = row.split(" | ").collect();
            let (annotations, fields) = (cells[2], cells[3]);
            let a = t.annotations.clone().unwrap_or_default();
            let set: Vec<&str> = [
                ("readOnlyHint", a.read_only_hint),
                ("destructiveHint", a.destructive_hint),
                ("idempotentHint", a.idempotent_hint),
                ("openWorldHint", a.open_world_hint),
            ]
            .into_iter()
            .filter_map(|(n, v)| v.map(|_| n))
            .collect();
            for n in [
                "readOnlyHint",
                "destructiveHint",
                "idempotentHint",
                "openWorldHint",
            ] {
                assert_eq!(
                    annotations.contains(n),
                    set.contains(&n),
                    "{}: the docs say {annotations:?}, the tool has {a:?}",
                    t.name
                );
            }
            if set.is_empty() {
                assert!(
                    annotations.starts_with("none"),
                    "{}: {annotations:?}",
                    t.name
                );
            }
            // process_kill's and the narrowed sandbox's rows point at
            // process_output's and sandbox_up's.
            let fields_of = match t.name.as_ref() {
                "process_kill" => "process_output",
                "sandbox_narrow" => "sandbox_up",
                _ => t.name.as_ref(),
            };
            let fields = if fields_of == t.name.as_ref() {
                fields.to_string()
            } else {
                assert!(
                    fields.contains(&format!("`{fields_of}`")),
                    "{}: {fields:?}",
                    t.name
                );
                let row = rows
                    .iter()
                    .find(|r| r.starts_with(&format!("| [`{fields_of}`]")))
                    .expect("the row pointed at");
                row.split(" | ").nth(3).expect("fields").to_string()
            };
            let schema =
                serde_json::to_value(t.output_schema.as_deref().expect("an output schema"))
                    .expect("JSON");
            let mut members: Vec<String> = Vec::new();
            let mut collect = |s: &serde_json::Value| {
                if let Some(p) = s.get("properties").and_then(|p| p.as_object()) {
                    members.extend(p.keys().cloned());
                }
            };
            collect(&schema);
            for alt in schema
                .get("anyOf")
                .and_then(|a| a.as_array())
                .into_iter()
                .flatten()
            {
                collect(alt);
            }
            for m in members {
                assert!(
                    fields.contains(&format!("`{m}`")),
                    "{}: docs/MCP.md's table does not name the result field {m}",
                    t.name
                );
            }
        }
    }

    /// Nothing a model reads cites the SPEC (it has none): the tools'
    /// descriptions and schemas as listed, and the scrub itself.
    #[test]
    fn no_tool_text_cites_the_spec() {
        for t in for_models(OdekMcp::tool_router()).list_all() {
            let text = serde_json::to_string(&t).expect("JSON");
            assert!(!text.contains("SPEC"), "{}: {text}", t.name);
        }
        assert_eq!(
            without_spec("The block (SPEC §9.1);\nthe rest. See SPEC §8. And (x, SPEC §7.4)"),
            "The block;\nthe rest. See . And (x)"
        );
        assert_eq!(without_spec("no citation"), "no citation");
        // The annotations a client shows: read-only and destructive tools.
        let tools = for_models(OdekMcp::tool_router()).list_all();
        let hint = |name: &str| {
            let t = tools.iter().find(|t| t.name == name).expect("the tool");
            let a = t.annotations.clone().unwrap_or_default();
            (a.read_only_hint, a.destructive_hint)
        };
        assert_eq!(hint("describe"), (Some(true), None));
        assert_eq!(hint("sandbox_list"), (Some(true), None));
        assert_eq!(hint("process_output"), (Some(true), None));
        assert_eq!(hint("sandbox_down"), (None, Some(true)));
        assert_eq!(hint("process_kill"), (None, Some(true)));
        assert_eq!(hint("read_file"), (Some(true), None));
        assert_eq!(hint("list_directory"), (Some(true), None));
        assert_eq!(hint("write_file"), (None, Some(true)));
        assert_eq!(hint("edit_file"), (None, Some(true)));
    }

    #[test]
    fn exec_request_needs_exactly_one_command() {
        assert!(exec_request(&ExecArgs::default())
            .expect_err("refused")
            .contains("needs a command"));
        let both = ExecArgs {
            command: Some("true".into()),
            argv: Some(vec!["true".into()]),
            ..Default::default()
        };
        assert!(exec_request(&both)
            .expect_err("refused")
            .contains("not both"));
    }

    #[test]
    fn exec_request_refuses_huge_commands_and_bad_timeouts() {
        let huge = ExecArgs {
            command: Some("x".repeat(odek_core::exec::MAX_COMMAND_BYTES + 1)),
            ..Default::default()
        };
        assert!(exec_request(&huge)
            .expect_err("refused")
            .contains("at most"));
        let neg = ExecArgs {
            command: Some("true".into()),
            timeout_secs: Some(-1.0),
            ..Default::default()
        };
        assert!(exec_request(&neg)
            .expect_err("refused")
            .contains("timeout_secs"));
    }

    /// The tool's arguments are the core's request plus `sandbox_id`: every
    /// member the schema shows reaches the request, parsed by the core.
    #[test]
    fn narrow_args_are_the_cores_request() {
        let props = |s: &serde_json::Value| -> Vec<String> {
            let mut v: Vec<String> = s["properties"]
                .as_object()
                .expect("properties")
                .keys()
                .cloned()
                .collect();
            v.sort();
            v
        };
        let core = serde_json::to_value(schemars::schema_for!(NarrowRequest)).expect("JSON");
        let mut want = props(&core);
        want.retain(|k| k != "schema");
        want.push("sandbox_id".into());
        want.sort();
        let mcp = serde_json::to_value(schemars::schema_for!(NarrowArgs)).expect("JSON");
        assert_eq!(props(&mcp), want);
        let args: NarrowArgs = serde_json::from_value(serde_json::json!({
            "sandbox_id": "sbx-1",
            "networks": ["a", "b"],
            "compose_project": "shop",
            "network_mode": "none",
            "pids_limit": 7,
            "memory": "256m",
            "cpus": "0.5",
            "readonly": false,
            "image": "odek-test/base:1",
        }))
        .expect("args");
        let request: NarrowRequest = serde_json::from_value(serde_json::json!({
            "networks": ["a", "b"],
            "compose_project": "shop",
            "network_mode": "none",
            "pids_limit": 7,
            "memory": "256m",
            "cpus": "0.5",
            "readonly": false,
            "image": "odek-test/base:1",
        }))
        .expect("core request");
        assert_eq!(
            args,
            NarrowArgs {
                sandbox_id: Some("sbx-1".into()),
                request,
            }
        );
        let empty: NarrowArgs =
            serde_json::from_value(serde_json::json!({"sandbox_id": null})).expect("empty");
        assert_eq!(empty, NarrowArgs::default());
        let refused = |v: serde_json::Value| {
            serde_json::from_value::<NarrowArgs>(v)
                .expect_err("refused")
                .to_string()
        };
        // The core's parse of the network mode, and its message, which
        // names the tool's arguments and no command-line flag.
        let e = refused(serde_json::json!({"network_mode": "host"}));
        assert!(e.contains("`networks`"), "{e}");
        assert!(!e.contains("--"), "{e}");
        // The C ABI's schema tag is not an argument of the tool.
        let e = refused(serde_json::json!({"schema": "odek.narrow-request/1"}));
        assert!(
            e.starts_with("unknown field `schema`, expected one of `sandbox_id`, "),
            "{e}"
        );
        let e = refused(serde_json::json!({"sandbox_id": 5}));
        assert!(e.contains("invalid type: integer `5`"), "{e}");
        let e = refused(serde_json::json!({"pids_limit": "7"}));
        assert!(e.contains("invalid type: string"), "{e}");
    }

    /// The result is the core's exec result and `sandbox_id`, exactly the
    /// members its schema shows (a member added to the core's result fails
    /// here until the schema documents it).
    #[test]
    fn exec_result_is_the_cores_with_the_sandbox() {
        let capture = Capture::new(Keep::HeadAndTail, 4);
        capture.write(odek_core::engine::StreamKind::Stdout, b"abcdef");
        let outcome = odek_core::ExecOutcome {
            exit_code: 3,
            timed_out: false,
            cancelled: false,
            killed: false,
            supervised: false,
        };
        let r = ExecResult {
            sandbox_id: "sbx-1".into(),
            result: api::ExecResult::new(&outcome, capture.finish()),
            relaunched: None,
            networks_down: None,
        };
        let value = serde_json::to_value(&r).expect("JSON");
        assert_eq!(
            value,
            serde_json::json!({
                "sandbox_id": "sbx-1",
                "exit_code": 3,
                "stdout": "ab\n[odek: 2 bytes cut here]\nef",
                "stderr": "",
                "stdout_truncated": true,
                "stderr_truncated": false,
                "timed_out": false,
                "killed": false,
            })
        );
        let schema = serde_json::to_value(schemars::schema_for!(ExecResult)).expect("JSON");
        let mut members: Vec<&String> = value.as_object().expect("object").keys().collect();
        members.sort();
        let mut shown: Vec<&String> = schema["properties"]
            .as_object()
            .expect("properties")
            .keys()
            .collect();
        shown.sort();
        // `relaunched` and `networks_down` are optional: shown, never
        // required, absent here.
        for optional in ["relaunched", "networks_down"] {
            assert!(shown.iter().any(|k| k.as_str() == optional), "{optional}");
            shown.retain(|k| k.as_str() != optional);
        }
        assert_eq!(members, shown);
        let mut required: Vec<&str> = schema["required"]
            .as_array()
            .expect("required")
            .iter()
            .filter_map(|v| v.as_str())
            .collect();
        required.sort_unstable();
        assert_eq!(
            required,
            members.iter().map(|m| m.as_str()).collect::<Vec<_>>()
        );
        // With the project down: the note is a member of the result.
        let down = ExecResult {
            networks_down: Some("sandbox odek-x: the networks it reaches are gone".into()),
            ..r
        };
        let value = serde_json::to_value(&down).expect("JSON");
        assert!(
            value["networks_down"]
                .as_str()
                .is_some_and(|s| s.contains("are gone")),
            "{value}"
        );
    }

    #[test]
    fn exec_request_defaults_the_timeout() {
        let r = exec_request(&ExecArgs {
            argv: Some(vec!["true".into()]),
            ..Default::default()
        })
        .expect("valid");
        assert_eq!(
            r.timeout,
            odek_core::exec::timeout_from_secs(DEFAULT_TIMEOUT_SECS)
        );
        assert_eq!(r.command, Command::Argv(vec!["true".into()]));
    }

    /// A wrong type of argument is named: rmcp's text (serde's "invalid
    /// type: string, expected f64") names no parameter, so the tool error
    /// gets "parameter `timeout_secs` must be a number (or null), not a
    /// string"; arguments of the right type, and enums given by `$ref`,
    /// are not named.
    #[test]
    fn a_parameter_of_a_wrong_type_is_named() {
        let router = for_models(OdekMcp::tool_router());
        let schema = |tool: &str| router.map.get(tool).expect(tool).attr.input_schema.clone();
        let exec = schema("exec");
        let said = wrong_types(
            &exec,
            &[
                ("timeout_secs".into(), "string"),
                ("command".into(), "string"),
                ("argv".into(), "string"),
            ],
        );
        assert_eq!(
            said,
            vec![
                "parameter `timeout_secs` must be a number (or null), not a string",
                "parameter `argv` must be an array (or null), not a string",
            ]
        );
        assert!(wrong_types(&exec, &[("timeout_secs".into(), "integer")]).is_empty());
        let read = schema("read_file");
        assert_eq!(
            wrong_types(
                &read,
                &[("offset".into(), "number"), ("encoding".into(), "integer")]
            ),
            vec!["parameter `offset` must be an integer (or null), not a number"]
        );
        assert_eq!(
            wrong_types(&read, &[("path".into(), "null")]),
            vec!["parameter `path` must be a string, not null"]
        );
        assert_eq!(json_kind(&serde_json::json!(5)), "integer");
        assert_eq!(json_kind(&serde_json::json!(5.5)), "number");
    }
}
