//! odek's stable C ABI (SPEC §10.1).
//!
//! Thread safety and blocking: every function may be called from any thread,
//! concurrently, including on the same handle. Functions that talk to Docker
//! (resolve, approve, launch, describe, exec, config view, destroy) block the
//! calling thread until done; they run on one process-wide runtime owned by
//! this library. No futures cross the boundary, and one callback does:
//! `odek_exec_stream`'s output callback, called on the calling thread
//! before that call returns (see `stream`).
//!
//! fork() without exec: in a process forked from the one that made
//! libodek's state, every function that takes or makes a handle returns
//! `ODEK_E_FORKED` before touching anything, and the child's copies of the
//! parent's owner links are closed as the fork returns (`fork` module).
//!
//! Conventions: fallible calls return `odek_error_t*` (NULL on success) and
//! write out-params only on success; every returned `char*` is freed with
//! `odek_string_free`; structured data is UTF-8 JSON with a `"schema"` field;
//! handles are opaque and never dereferenced by odek without first being
//! looked up, so a destroyed or unknown handle is an error, not undefined
//! behaviour. No panic crosses the boundary.
#![allow(unsafe_code)]

mod boundary;
mod error;
mod fork;
mod handles;
mod locate;
mod stream;

pub use error::odek_code_t::*;
pub use error::*;
pub use handles::{odek_cancel_t, odek_client_t, odek_sandbox_t, odek_stdin_t};
pub use stream::*;

use std::ffi::c_char;
use std::sync::{Arc, OnceLock};

use odek_core::api::{self, EngineChoice, ResolveRequestError};
use odek_core::approval::{Approval, Decision};
use odek_core::engine::StreamKind;
#[cfg(feature = "testing")]
use odek_core::engine::{FakeEngine, FakeImage, FakeNetwork};
use odek_core::{describe, CancellationToken, ExecOptions, LaunchOptions, Plan, Silent};

use boundary::{c_string, guard, guard_state, json_arg, out_arg, str_arg, write_json};
use error::{Code, Failure};
use handles::{Client, SandboxHandle};

/// The ABI version; bumped on any incompatible change. Bindings check it
/// against `odek_abi_version()` when they load.
pub const ODEK_ABI_VERSION: u32 = 1;

/// Most bytes of stdout or stderr an exec result carries (16 MiB each).
pub const ODEK_EXEC_OUTPUT_LIMIT: usize = 16 << 20;

// Written out for the header (cbindgen reads literals); the limit itself is
// the core's (`api::ExecResult::capture`, which `odek_exec` uses).
const _: () = assert!(ODEK_EXEC_OUTPUT_LIMIT == api::EXEC_OUTPUT_LIMIT);

/// The process-wide runtime. `ODEK_E_FORKED` in a process forked from the
/// one that made libodek's state (the runtime's threads are not there);
/// `ODEK_E_REENTRANT` on a thread running an `odek_exec_stream` output
/// callback (that thread is inside the runtime already: blocking on it
/// again would panic, or wait for itself). Every blocking export asks for
/// the runtime before it changes anything.
fn runtime() -> Result<&'static tokio::runtime::Runtime, Failure> {
    fork::check()?;
    stream::check_not_in_callback()?;
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    Ok(RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("odek-ffi")
            .enable_all()
            .build()
            .expect("the odek runtime starts")
    }))
}

/// The ABI version this library implements (`ODEK_ABI_VERSION`).
#[no_mangle]
pub extern "C" fn odek_abi_version() -> u32 {
    ODEK_ABI_VERSION
}

/// The odek release, e.g. `"0.1.0"`. A static string: do not free.
#[no_mangle]
pub extern "C" fn odek_version() -> *const c_char {
    static V: OnceLock<std::ffi::CString> = OnceLock::new();
    V.get_or_init(|| std::ffi::CString::new(odek_core::VERSION).expect("no NUL in the version"))
        .as_ptr()
}

/// Frees a string returned by odek. NULL is a no-op.
///
/// # Safety
/// `s` is NULL or a string returned by odek, freed at most once.
#[no_mangle]
pub unsafe extern "C" fn odek_string_free(s: *mut c_char) {
    if !s.is_null() {
        // SAFETY: allocated by `CString::into_raw` in this library.
        drop(unsafe { std::ffi::CString::from_raw(s) });
    }
}

#[cfg(feature = "testing")]
fn fake_engine() -> FakeEngine {
    let f = FakeEngine::new();
    f.add_image(FakeImage::new("odek-test/base:1"));
    f.add_network(FakeNetwork::bridge("shop_default").compose("shop"));
    f.add_network(
        FakeNetwork::bridge("shop_backend")
            .compose("shop")
            .internal(),
    );
    f
}

/// A request that parses but cannot be carried out (`ODEK_E_INVALID_ARGUMENT`).
fn invalid(e: api::RequestError) -> Failure {
    Failure::new(Code::ODEK_E_INVALID_ARGUMENT, e.0)
}

/// Creates a client. `options_json` is a JSON object (`"{}"` for defaults):
/// `{"docker_host": "unix:///…"|"tcp://host:port"|"ssh://[user@]host[:port]",
/// "docker_cert_path": "/dir", "engine": "docker"|"fake", "sandbox_pool": 0..8}`.
/// `docker_cert_path` (with a `tcp://` `docker_host` only) is the absolute
/// path of the directory of `ca.pem`, `cert.pem` and `key.pem`: the daemon is reached over TLS
/// and its certificate verified (SPEC §6.2.1). `sandbox_pool` N > 0 gives the client a warm pool:
/// it keeps N sandboxes ready for each plan it launched, `odek_launch`
/// claims one of exactly its plan (re-checked and verified first; see
/// `odek_launch`), and `odek_client_free` removes the ready ones.
/// (`"fake"`: the in-memory test engine, only in test builds — cargo feature
/// `testing`; a release build refuses it with `ODEK_E_INVALID_ARGUMENT`).
/// No connection is made until a call needs the daemon.
///
/// Errors: NULL arguments, invalid JSON/UTF-8, an invalid `docker_host`, or
/// a `docker_cert_path` without a `tcp://` `docker_host` or whose files fail
/// their check (`ODEK_E_ENDPOINT`, naming the file and the fix), `ODEK_E_FORKED` in a process forked from one that
/// used libodek (see "fork() without exec" in the header). Free the client
/// with `odek_client_free`.
///
/// # Safety
/// `options_json` is a NUL-terminated string; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn odek_client_new(
    options_json: *const c_char,
    out: *mut *mut odek_client_t,
) -> *mut odek_error_t {
    guard_state(|| {
        out_arg(out, "out")?;
        locate::tell_core();
        // SAFETY: per the function contract.
        let opts: api::ClientOptions = unsafe { json_arg(options_json, "options_json")? };
        let odek = match (opts.engine().map_err(invalid)?, &opts.docker_host) {
            #[cfg(feature = "testing")]
            (EngineChoice::Fake, _) => odek_core::Client::with_engine(Arc::new(fake_engine())),
            #[cfg(not(feature = "testing"))]
            (EngineChoice::Fake, _) => return Err(Failure::new(
                Code::ODEK_E_INVALID_ARGUMENT,
                "engine \"fake\" (the in-memory test engine) is only in test builds of libodek \
                     (cargo feature `testing`); this is a release build: use \"docker\"",
            )),
            (EngineChoice::Docker, Some(host)) => {
                let ep = match &opts.docker_cert_path {
                    Some(dir) => odek_core::engine::Endpoint::named_tls(
                        host,
                        "docker_host",
                        std::path::Path::new(dir),
                        "docker_cert_path",
                    ),
                    None => odek_core::engine::Endpoint::named(host, "docker_host"),
                }
                .map_err(|e| Failure::from(odek_core::Error::Endpoint(e)))?;
                odek_core::Client::with_engine(Arc::new(odek_core::engine::BollardEngine::new(ep)))
            }
            (EngineChoice::Docker, None) if opts.docker_cert_path.is_some() => {
                return Err(Failure::from(odek_core::Error::Endpoint(
                    odek_core::engine::EndpointError::Tls {
                        endpoint: "(no docker_host)".into(),
                        origin: "docker_cert_path".into(),
                        reason: "docker_cert_path is TLS material for a tcp:// docker_host, and \
                                 no docker_host is given: name the daemon with docker_host \
                                 (\"tcp://host:port\"), or use DOCKER_HOST with \
                                 DOCKER_TLS_VERIFY and DOCKER_CERT_PATH"
                            .into(),
                    },
                )))
            }
            (EngineChoice::Docker, None) => odek_core::Client::from_env(),
        };
        let odek = odek.with_surface(odek_core::advice::Surface::Library);
        let size = opts.pool_size().map_err(invalid)?;
        let pool = (size > 0).then(|| odek_core::pool::Pool::new(odek.clone(), size));
        let h = handles::insert_client(Client { odek, pool })?;
        // SAFETY: checked non-NULL above.
        unsafe { *out = h };
        Ok(())
    })
}

/// Frees a client. NULL is a no-op; an unknown or already freed client is
/// `ODEK_E_INVALID_HANDLE`. Sandboxes launched from it stay usable; the
/// ready sandboxes of its warm pool (`sandbox_pool`) are removed (blocks
/// until they are, and until refills in flight are cancelled).
///
/// # Safety
/// `client` is NULL or a value from `odek_client_new`.
#[no_mangle]
pub unsafe extern "C" fn odek_client_free(client: *mut odek_client_t) -> *mut odek_error_t {
    guard(|| {
        if client.is_null() {
            return Ok(());
        }
        // In a forked child: ODEK_E_FORKED, nothing touched.
        fork::check()?;
        let c = handles::remove_client(client)?;
        if let Some(pool) = &c.pool {
            runtime()?.block_on(pool.drain());
        }
        Ok(())
    })
}

/// Resolves configuration, networks and image into a plan (SPEC §3–§5).
///
/// `request_json`: `{"workdir": "/abs/dir", "settings": {"sandbox_compose_project": "shop", …},
/// "read_user_config": true, "read_project_config": true, "env": {…}|null,
/// "allow_host_fallback": false}` (schema: `ffi/schema/resolve-request.json`).
/// `settings` holds config keys of SPEC §3.1 with the types of `odek.json`;
/// an unknown key is an error (`ODEK_E_CONFIG`). `env`, when given,
/// replaces the whole process environment for this resolve (include `HOME`
/// or `ODEK_HOME`).
///
/// A sandbox is required by default: unless `settings` says `"sandbox"`,
/// `"sandbox": true` is added, so an unreachable daemon or an image that
/// cannot be pulled is an error (6xx, 5xx) instead of a host shell.
/// `"allow_host_fallback": true` keeps SPEC §6.3's implicit mode (loud
/// fallback to the host, `isolation.kind` `"fallback"`). The bindings
/// send the member only when their caller sets it.
/// On success `*plan_json_out` is the plan (`"schema": "odek.plan/1"`); its
/// `"approval"` member is non-null when the operator must approve project
/// settings before launch. Free it with `odek_string_free`.
///
/// Errors: config (2xx), approval store (303), daemon unreachable when no
/// fallback is allowed (6xx), engine refusals (4xx). Blocks.
///
/// # Safety
/// Valid client handle or NULL; NUL-terminated `request_json`; writable out.
#[no_mangle]
pub unsafe extern "C" fn odek_resolve(
    client: *const odek_client_t,
    request_json: *const c_char,
    plan_json_out: *mut *mut c_char,
) -> *mut odek_error_t {
    // SAFETY: forwarded contract; no cancel handle.
    unsafe { odek_resolve_cancellable(client, request_json, std::ptr::null(), plan_json_out) }
}

/// `odek_resolve`, stopped by `cancel` (NULL: not cancellable; see
/// `odek_cancel_new`): `ODEK_E_CANCELLED` once `odek_cancel` was called.
///
/// # Safety
/// As `odek_resolve`; `cancel` is NULL or a live cancel handle.
#[no_mangle]
pub unsafe extern "C" fn odek_resolve_cancellable(
    client: *const odek_client_t,
    request_json: *const c_char,
    cancel: *const odek_cancel_t,
    plan_json_out: *mut *mut c_char,
) -> *mut odek_error_t {
    guard_state(|| {
        out_arg(plan_json_out, "plan_json_out")?;
        let c = handles::client(client)?;
        let cancel = handles::cancel(cancel)?;
        // SAFETY: per the function contract.
        let req: api::ResolveRequest = unsafe { json_arg(request_json, "request_json")? };
        let inputs = req.config_inputs().map_err(|e| match e {
            ResolveRequestError::Request(e) => invalid(e),
            ResolveRequestError::Config(e) => Failure::from(odek_core::Error::Config(e)),
        })?;
        let plan = runtime()?.block_on(cancellable(
            &cancel,
            "the resolve",
            c.odek.resolve(&inputs, &Silent),
        ))?;
        // SAFETY: checked non-NULL.
        unsafe { write_json(plan_json_out, &plan) }
    })
}

/// The approval request of a plan (SPEC §7.2) as JSON
/// (`"schema": "odek.approval-request/1"`), or the JSON `null` when the plan
/// needs no approval. Lists image, network, env keys (with `${…}` host
/// interpolation flagged), volumes and each network's name, full ID,
/// Internal flag and Compose project. Names are terminal-safe. `card` is the
/// plain-text card the `odek` CLI prompts with (lines ending in `\n`), for
/// frameworks that show the operator the same text.
///
/// # Safety
/// NUL-terminated `plan_json`; writable out.
#[no_mangle]
pub unsafe extern "C" fn odek_plan_approval_request(
    plan_json: *const c_char,
    request_json_out: *mut *mut c_char,
) -> *mut odek_error_t {
    guard(|| {
        out_arg(request_json_out, "request_json_out")?;
        // SAFETY: per the function contract.
        let plan: Plan = unsafe { json_arg(plan_json, "plan_json")? };
        // SAFETY: checked non-NULL.
        unsafe { write_json(request_json_out, &plan.approval) }
    })
}

/// Approves a plan's project settings. `decision` is `"once"` (this launch)
/// or `"trust"` (persisted in `$ODEK_HOME/project_sandbox_approvals.json`
/// first — a failed write is `ODEK_E_APPROVAL_STORE` and grants nothing).
/// `*approval_json_out` (`"schema": "odek.approval/1"`) is passed to
/// `odek_launch`. Errors when the plan needs no approval
/// (`ODEK_E_APPROVAL_MISMATCH`).
///
/// # Safety
/// Valid client handle; NUL-terminated strings; writable out.
#[no_mangle]
pub unsafe extern "C" fn odek_approve(
    client: *const odek_client_t,
    plan_json: *const c_char,
    decision: *const c_char,
    approval_json_out: *mut *mut c_char,
) -> *mut odek_error_t {
    guard_state(|| {
        out_arg(approval_json_out, "approval_json_out")?;
        let c = handles::client(client)?;
        // SAFETY: per the function contract.
        let plan: Plan = unsafe { json_arg(plan_json, "plan_json")? };
        // SAFETY: per the function contract.
        let d = match unsafe { str_arg(decision, "decision")? } {
            "once" => Decision::Once,
            "trust" => Decision::Trust,
            other => {
                return Err(Failure::new(
                    Code::ODEK_E_INVALID_ARGUMENT,
                    format!("decision must be \"once\" or \"trust\" (got {other:?})"),
                ))
            }
        };
        let a = c.odek.approve(&plan, d)?;
        // SAFETY: checked non-NULL.
        unsafe { write_json(approval_json_out, &a) }
    })
}

/// Launches a sandbox from a plan (SPEC §6): re-checks approved networks
/// (§7.4), ensures the image, creates, starts, connects, verifies — or
/// refuses leaving no container. `approval_json` is the JSON from
/// `odek_approve`, or `"null"`: then a plan needing approval launches only
/// when its key is still trusted in the store or
/// `ODEK_APPROVE_PROJECT_SANDBOX=1` was set at resolve (else
/// `ODEK_E_APPROVAL_REQUIRED`).
///
/// With the client's warm pool (`sandbox_pool`), a ready sandbox of exactly
/// this plan is handed over instead, after the same re-check (§7.4, against
/// the approval's network IDs) and the inspect-verify a launch does (one
/// that fails them is removed and a fresh one launched), and a replacement
/// starts in the background; a launch approved `"once"` fills nothing ahead.
///
/// On success `*sandbox_out` is a handle; destroy it with
/// `odek_sandbox_destroy` (which removes the container). In fallback or off
/// mode the handle stands for the host (see `odek_sandbox_info`). Blocks.
///
/// # Safety
/// Valid client handle; NUL-terminated strings; writable out.
#[no_mangle]
pub unsafe extern "C" fn odek_launch(
    client: *const odek_client_t,
    plan_json: *const c_char,
    approval_json: *const c_char,
    sandbox_out: *mut *mut odek_sandbox_t,
) -> *mut odek_error_t {
    // SAFETY: forwarded contract; no cancel handle.
    unsafe {
        odek_launch_cancellable(
            client,
            plan_json,
            approval_json,
            std::ptr::null(),
            sandbox_out,
        )
    }
}

/// `odek_launch`, stopped by `cancel` (NULL: not cancellable): once
/// `odek_cancel` is called the launch stops, removes the container it
/// created (a create request on its way is first given a bounded time to
/// answer, the core's `CREATE_SETTLE`) and returns `ODEK_E_CANCELLED`; no
/// handle is written.
///
/// # Safety
/// As `odek_launch`; `cancel` is NULL or a live cancel handle.
#[no_mangle]
pub unsafe extern "C" fn odek_launch_cancellable(
    client: *const odek_client_t,
    plan_json: *const c_char,
    approval_json: *const c_char,
    cancel: *const odek_cancel_t,
    sandbox_out: *mut *mut odek_sandbox_t,
) -> *mut odek_error_t {
    guard_state(|| {
        out_arg(sandbox_out, "sandbox_out")?;
        let c = handles::client(client)?;
        let cancel = handles::cancel(cancel)?;
        // SAFETY: per the function contract.
        let plan: Plan = unsafe { json_arg(plan_json, "plan_json")? };
        // SAFETY: per the function contract.
        let approval: Option<Approval> = unsafe { json_arg(approval_json, "approval_json")? };
        let opts = LaunchOptions {
            approval,
            cancel,
            ..Default::default()
        };
        let sandbox = match &c.pool {
            Some(pool) => {
                runtime()?
                    .block_on(pool.claim(&plan, &opts, &Silent))?
                    .sandbox
            }
            None => runtime()?.block_on(c.odek.launch(&plan, &opts, &Silent))?,
        };
        let h = handles::insert_sandbox(SandboxHandle {
            odek: c.odek.clone(),
            sandbox,
        })?;
        // SAFETY: checked non-NULL.
        unsafe { *sandbox_out = h };
        Ok(())
    })
}

/// The launched sandbox as JSON (`"schema": "odek.sandbox-info/1"`): name,
/// container ID (null on the host), isolation (`{"kind": "container"}`,
/// `{"kind": "fallback", "class": …, "reason": …}` or `{"kind": "off"}`), the
/// startup line of SPEC §6.4, warnings, plan, applied settings.
///
/// # Safety
/// Valid sandbox handle; writable out.
#[no_mangle]
pub unsafe extern "C" fn odek_sandbox_info(
    sandbox: *const odek_sandbox_t,
    info_json_out: *mut *mut c_char,
) -> *mut odek_error_t {
    guard_state(|| {
        out_arg(info_json_out, "info_json_out")?;
        let h = handles::sandbox(sandbox)?;
        let info = api::SandboxInfo::of(&h.sandbox);
        // SAFETY: checked non-NULL.
        unsafe { write_json(info_json_out, &info) }
    })
}

/// Describes the sandbox for the agent (SPEC §9): `*environment_json_out`
/// (`"schema": "odek.environment/1"`), `*prompt_out` (the "Execution
/// environment" block for the system prompt) and `*tool_out` (the short
/// shell-tool description). Each is freed with `odek_string_free`. Blocks.
///
/// # Safety
/// Valid sandbox handle; writable outs.
#[no_mangle]
pub unsafe extern "C" fn odek_describe(
    sandbox: *const odek_sandbox_t,
    environment_json_out: *mut *mut c_char,
    prompt_out: *mut *mut c_char,
    tool_out: *mut *mut c_char,
) -> *mut odek_error_t {
    // SAFETY: forwarded contract; no cancel handle.
    unsafe {
        odek_describe_cancellable(
            sandbox,
            std::ptr::null(),
            environment_json_out,
            prompt_out,
            tool_out,
        )
    }
}

/// `odek_describe`, stopped by `cancel` (NULL: not cancellable):
/// `ODEK_E_CANCELLED` once `odek_cancel` was called.
///
/// # Safety
/// As `odek_describe`; `cancel` is NULL or a live cancel handle.
#[no_mangle]
pub unsafe extern "C" fn odek_describe_cancellable(
    sandbox: *const odek_sandbox_t,
    cancel: *const odek_cancel_t,
    environment_json_out: *mut *mut c_char,
    prompt_out: *mut *mut c_char,
    tool_out: *mut *mut c_char,
) -> *mut odek_error_t {
    guard_state(|| {
        out_arg(environment_json_out, "environment_json_out")?;
        out_arg(prompt_out, "prompt_out")?;
        out_arg(tool_out, "tool_out")?;
        let h = handles::sandbox(sandbox)?;
        let cancel = handles::cancel(cancel)?;
        let env = runtime()?.block_on(cancellable(
            &cancel,
            "the describe",
            h.odek.describe(&h.sandbox),
        ))?;
        let json = serde_json::to_string(&env)
            .map_err(|e| Failure::new(Code::ODEK_E_INTERNAL, e.to_string()))?;
        // SAFETY: all three checked non-NULL; written only on success.
        unsafe {
            *environment_json_out = c_string(json);
            *prompt_out = c_string(describe::render_prompt(&env));
            *tool_out = c_string(describe::render_tool(&env));
        }
        Ok(())
    })
}

/// Runs a command in the sandbox and waits for it (SPEC §10.1 exec).
///
/// `request_json`: `{"argv": ["redis-cli", "-h", "redis", "ping"]}` or
/// `{"shell": "echo $HOME"}` (run by `/bin/sh -c`), plus optional
/// `"env": {"K": "v"}`, `"timeout_secs": 30.0` (after which exit_code is 124
/// and timed_out true; the command and its descendants are then killed with
/// SIGKILL, see SANDBOXING.md "Timeouts"), `"workdir"`.
/// `*result_json_out`: `{"schema": "odek.exec-result/1", "exit_code", "timed_out",
/// "killed", "stdout", "stderr", "stdout_truncated", "stderr_truncated"}` —
/// `killed` is true after a timeout only when odek saw none of the
/// command's tagged processes left (false: the kill failed or could not be
/// confirmed, and a line on stderr says why); output as
/// UTF-8 (invalid bytes replaced), at most `ODEK_EXEC_OUTPUT_LIMIT` bytes each.
/// A non-zero exit is not an error. Blocks.
///
/// # Safety
/// Valid sandbox handle; NUL-terminated `request_json`; writable out.
#[no_mangle]
pub unsafe extern "C" fn odek_exec(
    sandbox: *const odek_sandbox_t,
    request_json: *const c_char,
    result_json_out: *mut *mut c_char,
) -> *mut odek_error_t {
    // SAFETY: forwarded contract; no cancel handle.
    unsafe { odek_exec_cancellable(sandbox, request_json, std::ptr::null(), result_json_out) }
}

/// `odek_exec`, stopped by `cancel` (NULL: not cancellable): once
/// `odek_cancel` is called the command and its descendants are killed as
/// after a timeout and the call returns `ODEK_E_CANCELLED` (its message
/// says whether the kill was confirmed); no result is written.
///
/// # Safety
/// As `odek_exec`; `cancel` is NULL or a live cancel handle.
#[no_mangle]
pub unsafe extern "C" fn odek_exec_cancellable(
    sandbox: *const odek_sandbox_t,
    request_json: *const c_char,
    cancel: *const odek_cancel_t,
    result_json_out: *mut *mut c_char,
) -> *mut odek_error_t {
    guard_state(|| {
        out_arg(result_json_out, "result_json_out")?;
        let h = handles::sandbox(sandbox)?;
        let cancel = handles::cancel(cancel)?;
        // SAFETY: per the function contract.
        let req: api::ExecRequest = unsafe { json_arg(request_json, "request_json")? };
        let request = req.into_core().map_err(invalid)?;
        let capture = api::ExecResult::capture();
        let sink = |kind: StreamKind, bytes: &[u8]| capture.write(kind, bytes);
        let opts = ExecOptions {
            cancel,
            ..ExecOptions::default()
        };
        let outcome = runtime()?
            .block_on(h.odek.exec(&h.sandbox, &request, &opts, &sink))?
            .cancelled_as_error(&h.sandbox)?;
        let result = api::ExecResult::new(&outcome, capture.finish());
        // SAFETY: checked non-NULL.
        unsafe { write_json(result_json_out, &result) }
    })
}

/// Most bytes `odek_read_file` returns in one call (4 MiB, before base64).
pub const ODEK_FILE_READ_LIMIT: u64 = 4 << 20;

/// Most bytes `odek_write_file` writes, and the largest file
/// `odek_edit_file` edits (16 MiB, after base64 decoding).
pub const ODEK_FILE_WRITE_LIMIT: u64 = 16 << 20;

// Written out for the header; the limits themselves are the core's.
const _: () = assert!(ODEK_FILE_READ_LIMIT == api::FILE_READ_LIMIT);
const _: () = assert!(ODEK_FILE_WRITE_LIMIT == api::FILE_WRITE_LIMIT);

/// One file operation: parses `request_json` into `Req`, runs `op` with
/// the sandbox and the cancel token, writes its result.
///
/// # Safety
/// As the file entry points.
unsafe fn file_call<Req, Res, F>(
    sandbox: *const odek_sandbox_t,
    request_json: *const c_char,
    cancel: *const odek_cancel_t,
    result_json_out: *mut *mut c_char,
    op: F,
) -> *mut odek_error_t
where
    Req: serde::de::DeserializeOwned,
    Res: serde::Serialize,
    F: for<'a> FnOnce(
        &'a SandboxHandle,
        &'a Req,
        &'a ExecOptions,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = odek_core::Result<Res>> + Send + 'a>,
    >,
{
    guard_state(|| {
        out_arg(result_json_out, "result_json_out")?;
        let h = handles::sandbox(sandbox)?;
        let cancel = handles::cancel(cancel)?;
        // SAFETY: per the function contract.
        let req: Req = unsafe { json_arg(request_json, "request_json")? };
        let opts = ExecOptions {
            cancel,
            ..ExecOptions::default()
        };
        let result = runtime()?.block_on(op(&h, &req, &opts))?;
        // SAFETY: checked non-NULL.
        unsafe { write_json(result_json_out, &result) }
    })
}

/// Reads (part of) a file inside the sandbox, as its command user with its
/// mounts (never the host's file system; symlinks resolve in the sandbox;
/// docs/SANDBOXING.md "File tools").
///
/// `request_json` (`"odek.read-file-request/1"`): `{"path": "src/main.rs"}`
/// (absolute, or relative to `/workspace`), optional `"encoding": "utf-8"`
/// (default) or `"base64"`, `"offset"` (bytes, default 0), `"length"`
/// (bytes, default and at most `ODEK_FILE_READ_LIMIT`, 4 MiB).
/// `*result_json_out` (`"odek.read-file-result/1"`): `{"schema", "path",
/// "encoding", "content", "size", "offset", "length", "truncated",
/// "next_offset", "limit"}`; `truncated` is true when the file goes on
/// after this piece (read on from `next_offset`). Blocks. `cancel` (NULL:
/// not cancellable) stops the call with `ODEK_E_CANCELLED`.
///
/// Errors: `ODEK_E_FILE` (absent, a directory, not permitted, not UTF-8 as
/// text: use base64; the sandbox has no odek supervisor: nothing ran, the
/// message names `ODEK_SUPERVISOR`); `ODEK_E_INVALID_ARGUMENT` (an empty
/// path, a `length` of 0); `ODEK_E_EXEC`, `ODEK_E_SANDBOX_STOPPED`, the
/// daemon's codes.
///
/// # Safety
/// Valid sandbox handle; NUL-terminated `request_json`; `cancel` NULL or a
/// live cancel handle; writable out.
#[no_mangle]
pub unsafe extern "C" fn odek_read_file(
    sandbox: *const odek_sandbox_t,
    request_json: *const c_char,
    cancel: *const odek_cancel_t,
    result_json_out: *mut *mut c_char,
) -> *mut odek_error_t {
    // SAFETY: forwarded contract.
    unsafe {
        file_call(
            sandbox,
            request_json,
            cancel,
            result_json_out,
            |h, req: &api::ReadFileRequest, opts| Box::pin(h.odek.read_file(&h.sandbox, req, opts)),
        )
    }
}

/// Writes a whole file inside the sandbox, as its command user with its
/// mounts: creates it and its parent directories, or replaces its content
/// (through a temporary file and a rename in its directory, keeping its
/// permission bits; a symlink is followed inside the sandbox). The content
/// goes over the command's stdin, not an argument list.
///
/// `request_json` (`"odek.write-file-request/1"`): `{"path": "out/a.bin",
/// "content": "…", "encoding": "base64"}` (`encoding` default `"utf-8"`);
/// at most `ODEK_FILE_WRITE_LIMIT` (16 MiB) once decoded.
/// `*result_json_out` (`"odek.write-file-result/1"`): `{"schema", "path"
/// (the file written, symlinks resolved in the sandbox), "bytes_written",
/// "created"}`. Blocks; `cancel` as `odek_read_file`.
///
/// Errors: `ODEK_E_FILE` (over the limit; a read-only file system, e.g. a
/// `sandbox_readonly` workspace, which the message names; not permitted;
/// a directory; no supervisor), nothing written; `ODEK_E_INVALID_ARGUMENT`
/// (content that is not base64); as `odek_read_file`.
///
/// # Safety
/// As `odek_read_file`.
#[no_mangle]
pub unsafe extern "C" fn odek_write_file(
    sandbox: *const odek_sandbox_t,
    request_json: *const c_char,
    cancel: *const odek_cancel_t,
    result_json_out: *mut *mut c_char,
) -> *mut odek_error_t {
    // SAFETY: forwarded contract.
    unsafe {
        file_call(
            sandbox,
            request_json,
            cancel,
            result_json_out,
            |h, req: &api::WriteFileRequest, opts| {
                Box::pin(h.odek.write_file(&h.sandbox, req, opts))
            },
        )
    }
}

/// Edits a UTF-8 file inside the sandbox by exact-text replacements, as
/// its command user, and writes it back as `odek_write_file` does.
///
/// `request_json` (`"odek.edit-file-request/1"`): `{"path": "a.py",
/// "edits": [{"oldText": "x = 1", "newText": "x = 2"}]}`, applied in order,
/// each to the text the earlier ones left; every `oldText` must occur
/// exactly once. `*result_json_out` (`"odek.edit-file-result/1"`):
/// `{"schema", "path", "diff" (unified, empty when nothing changed),
/// "edits"}`. Not atomic against a process in the sandbox writing the
/// same file meanwhile. Blocks; `cancel` as `odek_read_file`.
///
/// Errors: `ODEK_E_FILE` when an `oldText` is absent or occurs more than
/// once (nothing written; the message names the edit), the file is over
/// `ODEK_FILE_WRITE_LIMIT` or not UTF-8; `ODEK_E_INVALID_ARGUMENT` (no
/// edits); as `odek_write_file`.
///
/// # Safety
/// As `odek_read_file`.
#[no_mangle]
pub unsafe extern "C" fn odek_edit_file(
    sandbox: *const odek_sandbox_t,
    request_json: *const c_char,
    cancel: *const odek_cancel_t,
    result_json_out: *mut *mut c_char,
) -> *mut odek_error_t {
    // SAFETY: forwarded contract.
    unsafe {
        file_call(
            sandbox,
            request_json,
            cancel,
            result_json_out,
            |h, req: &api::EditFileRequest, opts| Box::pin(h.odek.edit_file(&h.sandbox, req, opts)),
        )
    }
}

/// Lists a directory inside the sandbox, as its command user.
///
/// `request_json` (`"odek.list-directory-request/1"`): `{"path": "."}`
/// (absolute, or relative to `/workspace`). `*result_json_out`
/// (`"odek.list-directory-result/1"`): `{"schema", "path", "entries":
/// [{"name", "type" ("file", "dir", "symlink", "other"; a symlink is not
/// followed), "size" (files), "target" (symlinks)}], "listing"}` sorted by
/// name; `listing` is one line per entry (`[FILE] name`, `[DIR] name`,
/// `[SYMLINK] name -> target`, `[OTHER] name`). Blocks; `cancel` as
/// `odek_read_file`.
///
/// Errors: `ODEK_E_FILE` (absent, not a directory, not permitted, no
/// supervisor); as `odek_read_file`.
///
/// # Safety
/// As `odek_read_file`.
#[no_mangle]
pub unsafe extern "C" fn odek_list_directory(
    sandbox: *const odek_sandbox_t,
    request_json: *const c_char,
    cancel: *const odek_cancel_t,
    result_json_out: *mut *mut c_char,
) -> *mut odek_error_t {
    // SAFETY: forwarded contract.
    unsafe {
        file_call(
            sandbox,
            request_json,
            cancel,
            result_json_out,
            |h, req: &api::ListDirectoryRequest, opts| {
                Box::pin(h.odek.list_directory(&h.sandbox, req, opts))
            },
        )
    }
}

/// Derives a sub-agent's plan from its parent's resolved plan (SPEC §8),
/// never from Docker. `request_json` (`"odek.narrow-request/1"`):
/// `{"networks": [name-or-id…], "compose_project": "p", "network_mode": "none",
/// "pids_limit": n, "memory": "256m", "cpus": "0.5", "readonly": true,
/// "image": "<the parent's>"}`, every member optional. Anything that would
/// widen is `ODEK_E_NARROW`. `"network_mode": "none"` without `networks` or
/// `compose_project` leaves the child no network at all (the parent's
/// attached networks are dropped too); with them, exactly those.
///
/// The child plan keeps the parent's `"approval"` request unchanged (SPEC
/// §7): when the parent needed approval, `odek_launch` of the child needs
/// one too — the parent's approval JSON (same key, same network IDs), one
/// from `odek_approve` on the child, or a standing one (a trust still in the
/// store, `ODEK_APPROVE_PROJECT_SANDBOX=1` at the parent's resolve); else
/// `ODEK_E_APPROVAL_REQUIRED` and nothing is created. The launch re-checks
/// the project's networks as for the parent (§7.4).
///
/// # Safety
/// NUL-terminated strings; writable out.
#[no_mangle]
pub unsafe extern "C" fn odek_narrow(
    parent_plan_json: *const c_char,
    request_json: *const c_char,
    child_plan_json_out: *mut *mut c_char,
) -> *mut odek_error_t {
    guard(|| {
        out_arg(child_plan_json_out, "child_plan_json_out")?;
        // SAFETY: per the function contract.
        let parent: Plan = unsafe { json_arg(parent_plan_json, "parent_plan_json")? };
        // SAFETY: per the function contract.
        let req: api::NarrowRequest = unsafe { json_arg(request_json, "request_json")? };
        req.check().map_err(invalid)?;
        let child = odek_core::narrow::narrow(&parent, &req)
            .map_err(|e| Failure::from(odek_core::Error::Narrow(e)))?;
        // SAFETY: checked non-NULL.
        unsafe { write_json(child_plan_json_out, &child) }
    })
}

/// The settings a plan actually applies, with sources (SPEC §10.4), as JSON
/// (`"schema": "odek.config-view/1"`). Looks the image up locally when the
/// daemon answers. Blocks.
///
/// # Safety
/// Valid client handle; NUL-terminated `plan_json`; writable out.
#[no_mangle]
pub unsafe extern "C" fn odek_config_view(
    client: *const odek_client_t,
    plan_json: *const c_char,
    view_json_out: *mut *mut c_char,
) -> *mut odek_error_t {
    // SAFETY: forwarded contract; no cancel handle.
    unsafe { odek_config_view_cancellable(client, plan_json, std::ptr::null(), view_json_out) }
}

/// `odek_config_view`, stopped by `cancel` (NULL: not cancellable):
/// `ODEK_E_CANCELLED` once `odek_cancel` was called.
///
/// # Safety
/// As `odek_config_view`; `cancel` is NULL or a live cancel handle.
#[no_mangle]
pub unsafe extern "C" fn odek_config_view_cancellable(
    client: *const odek_client_t,
    plan_json: *const c_char,
    cancel: *const odek_cancel_t,
    view_json_out: *mut *mut c_char,
) -> *mut odek_error_t {
    guard_state(|| {
        out_arg(view_json_out, "view_json_out")?;
        let c = handles::client(client)?;
        let cancel = handles::cancel(cancel)?;
        // SAFETY: per the function contract.
        let plan: Plan = unsafe { json_arg(plan_json, "plan_json")? };
        let view = runtime()?.block_on(cancellable(&cancel, "the config view", async {
            Ok(c.odek.config_view(&plan).await)
        }))?;
        // SAFETY: checked non-NULL.
        unsafe { write_json(view_json_out, &view) }
    })
}

/// Removes the sandbox's container (force) and frees the handle. NULL is a
/// no-op. A handle already destroyed (or never returned by odek) is
/// `ODEK_E_INVALID_HANDLE`. The handle is freed even when removal fails (the
/// error says so; `odek sandbox gc` reaps the container later). Blocks.
///
/// In a process forked from the one that launched the sandbox:
/// `ODEK_E_FORKED`, and nothing is done — the container and the handle stay
/// the parent's, which removes it (a binding's finalizer running in a
/// forked child removes nothing).
///
/// # Safety
/// `sandbox` is NULL or a value from `odek_launch`.
#[no_mangle]
pub unsafe extern "C" fn odek_sandbox_destroy(sandbox: *mut odek_sandbox_t) -> *mut odek_error_t {
    guard(|| {
        if sandbox.is_null() {
            return Ok(());
        }
        // In a forked child: ODEK_E_FORKED, nothing touched; inside an
        // output callback ODEK_E_REENTRANT, the handle kept.
        fork::check()?;
        let rt = runtime()?;
        let h = handles::remove_sandbox(sandbox)?;
        rt.block_on(h.odek.destroy(&h.sandbox))?;
        Ok(())
    })
}

/// `odek_sandbox_destroy` that also says what the sandbox changed of the
/// files host tools run — git hooks, `.git/config`, `.envrc`,
/// `.vscode/tasks.json`, Makefiles, `package.json`,
/// `.pre-commit-config.yaml` (docs/SECURITY.md, "Files host tools run"):
/// compared once the container is removed, against what its launch
/// recorded, and written to `*result_json_out` as JSON
/// (`"schema": "odek.close-result/1"`: `changed_host_files`, each
/// `{path, change, kinds}`; `host_files_unchecked`; `message`, one line to
/// show; `copied_back`, for a copied workspace what its copy-back before
/// removal wrote, `written` (relative paths), and left out, `skipped`
/// (`{path, reason}`), null for a bind-mounted one), freed with
/// `odek_string_free`. Removes the container (force) and
/// frees the handle. Blocks.
///
/// NULL `sandbox` is a no-op that sets `*result_json_out` to NULL. A handle
/// already destroyed (or never returned by odek) is `ODEK_E_INVALID_HANDLE`.
/// The handle is freed even when removal fails (the error says so; `odek
/// sandbox gc` reaps the container later); `*result_json_out` is then not
/// written. In a process forked from the one that launched the sandbox:
/// `ODEK_E_FORKED`, and nothing is done.
///
/// # Safety
/// `sandbox` is NULL or a value from `odek_launch`; `result_json_out` is
/// writable.
#[no_mangle]
pub unsafe extern "C" fn odek_sandbox_close(
    sandbox: *mut odek_sandbox_t,
    result_json_out: *mut *mut c_char,
) -> *mut odek_error_t {
    guard(|| {
        if sandbox.is_null() {
            out_arg(result_json_out, "result_json_out")?;
            // SAFETY: checked non-NULL.
            unsafe { *result_json_out = std::ptr::null_mut() };
            return Ok(());
        }
        // As odek_sandbox_destroy: in a forked child ODEK_E_FORKED before
        // anything is read; inside an output callback ODEK_E_REENTRANT.
        fork::check()?;
        out_arg(result_json_out, "result_json_out")?;
        let rt = runtime()?;
        let h = handles::remove_sandbox(sandbox)?;
        let report = rt.block_on(h.odek.close(&h.sandbox))?;
        let result = odek_core::api::CloseResult::new(&h.sandbox.name, report);
        // SAFETY: checked non-NULL.
        unsafe { write_json(result_json_out, &result) }
    })
}

/// Runs `work`, stopped by `cancel` when there is one.
async fn cancellable<T>(
    cancel: &Option<CancellationToken>,
    what: &str,
    work: impl std::future::Future<Output = odek_core::Result<T>>,
) -> odek_core::Result<T> {
    match cancel {
        Some(t) => odek_core::cancel::until(t, what, work).await,
        None => work.await,
    }
}

/// Creates a cancel handle: pass it to the `_cancellable` forms of the
/// blocking calls (`odek_resolve_cancellable`, `odek_launch_cancellable`,
/// `odek_describe_cancellable`, `odek_exec_cancellable`,
/// `odek_config_view_cancellable`, `odek_exec_stream`), and call `odek_cancel` from any thread
/// to stop them. One handle may serve several calls, in flight together or
/// one after another; once cancelled it stays cancelled, and a call given it
/// then fails at once with `ODEK_E_CANCELLED`. Free it with
/// `odek_cancel_free` (a call in flight keeps working with it). NULL only in
/// a process forked from the one that made libodek's state, where no handle
/// can be made (the other calls return `ODEK_E_FORKED` there).
#[no_mangle]
pub extern "C" fn odek_cancel_new() -> *mut odek_cancel_t {
    handles::insert_cancel(CancellationToken::new()).unwrap_or(std::ptr::null_mut())
}

/// Cancels every call that was given `cancel`, now and later: each returns
/// `ODEK_E_CANCELLED` promptly, a launch after removing what it created, an
/// exec after killing its command. Does not block; idempotent. NULL is
/// `ODEK_E_NULL_POINTER`; a freed or unknown handle `ODEK_E_INVALID_HANDLE`.
///
/// # Safety
/// `cancel` is NULL or a value from `odek_cancel_new`.
#[no_mangle]
pub unsafe extern "C" fn odek_cancel(cancel: *const odek_cancel_t) -> *mut odek_error_t {
    guard_state(|| {
        if cancel.is_null() {
            return Err(Failure::new(Code::ODEK_E_NULL_POINTER, "cancel is NULL"));
        }
        if let Some(t) = handles::cancel(cancel)? {
            t.cancel();
        }
        Ok(())
    })
}

/// Frees a cancel handle (without cancelling). NULL is a no-op; a freed or
/// unknown handle is `ODEK_E_INVALID_HANDLE`.
///
/// # Safety
/// `cancel` is NULL or a value from `odek_cancel_new`.
#[no_mangle]
pub unsafe extern "C" fn odek_cancel_free(cancel: *mut odek_cancel_t) -> *mut odek_error_t {
    guard(|| {
        if cancel.is_null() {
            return Ok(());
        }
        // In a forked child: ODEK_E_FORKED, nothing touched.
        fork::check()?;
        handles::remove_cancel(cancel).map(drop)
    })
}

/// Test hook: panics inside the boundary. Returns an `ODEK_E_PANIC` error
/// object and leaves the process running. Only in test builds (cargo
/// feature `testing`, `ODEK_TESTING` in this header); release builds do not
/// export it.
#[cfg(feature = "testing")]
#[no_mangle]
pub extern "C" fn odek_debug_panic() -> *mut odek_error_t {
    guard(|| panic!("odek_debug_panic was called"))
}
