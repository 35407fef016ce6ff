//! Bad arguments through the C ABI (SPEC §10.1): NULL pointers,
//! invalid UTF-8, lone surrogates, huge numbers, trailing bytes, wrong
//! top-level types, unknown fields, wrong field types and refused values —
//! for `odek_client_new`, `odek_resolve`, `odek_plan_approval_request`,
//! `odek_approve`, `odek_launch`, `odek_exec`, `odek_narrow` and
//! `odek_config_view`, called directly as the `extern "C"` functions of the
//! `odek` rlib with a `{"engine":"fake"}` client.
//!
//! Every row must return a non-NULL error object with the expected stable
//! code, the class that code implies, a message naming the cause, and the
//! out-param left untouched (NULL); everything is freed. A property test
//! adds arbitrary documents: never a caught panic (`ODEK_E_PANIC`), never a
//! crash.
#![allow(unsafe_code)]

use std::ffi::{c_char, CStr, CString};
use std::path::PathBuf;
use std::ptr::{null, null_mut};

use odek::*;
use proptest::prelude::*;
use serde_json::{json, Value};

// ---------------------------------------------------------------------------
// Plumbing

mod common;
use common::take_error_with_class as take_error;

/// Takes a string returned by odek, freed.
fn take_string(s: *mut c_char) -> String {
    assert!(!s.is_null());
    // SAFETY: a string returned by odek; freed once.
    unsafe {
        let out = CStr::from_ptr(s).to_string_lossy().into_owned();
        odek_string_free(s);
        out
    }
}

fn cstring(bytes: impl Into<Vec<u8>>) -> CString {
    CString::new(bytes).expect("no NUL inside a C string argument")
}

/// A C string argument or NULL.
type Arg = Option<CString>;

fn ptr(a: &Arg) -> *const c_char {
    a.as_ref().map_or(null(), |c| c.as_ptr())
}

fn arg(s: impl Into<Vec<u8>>) -> Arg {
    Some(cstring(s))
}

/// The class a code implies (SPEC §6.3, plus `usage`).
fn class_of(code: i32) -> &'static str {
    match code / 100 {
        2 | 3 => "config",
        4 => "docker-rejected",
        5 => "image-unavailable",
        6 => "daemon-unreachable",
        _ => "usage",
    }
}

/// A temporary project: working directory and `$ODEK_HOME`, removed on drop.
struct TempProject {
    root: PathBuf,
}

impl TempProject {
    fn new(tag: &str) -> TempProject {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let root = std::env::temp_dir().join(format!(
            "odek-bad-json-{tag}-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(root.join("work")).expect("workdir");
        std::fs::create_dir_all(root.join("home/.odek")).expect("odek home");
        // Private whatever the umask: a group-writable $ODEK_HOME is refused (SPEC §7.3).
        std::fs::set_permissions(
            root.join("home/.odek"),
            std::os::unix::fs::PermissionsExt::from_mode(0o700),
        )
        .expect("chmod odek home");
        let root = root.canonicalize().expect("canonical");
        TempProject { root }
    }

    fn workdir(&self) -> PathBuf {
        self.root.join("work")
    }

    fn env(&self) -> Value {
        json!({
            "HOME": self.root.join("home"),
            "ODEK_HOME": self.root.join("home/.odek"),
        })
    }

    /// A resolve request for this project with these operator settings.
    fn request(&self, settings: Value) -> String {
        json!({"workdir": self.workdir(), "env": self.env(), "settings": settings}).to_string()
    }
}

impl Drop for TempProject {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

fn client_new(options: &str) -> *mut odek_client_t {
    let opts = cstring(options);
    let mut c = null_mut();
    // SAFETY: valid NUL-terminated string and out-param.
    let e = unsafe { odek_client_new(opts.as_ptr(), &mut c) };
    if let Some(err) = take_error(e) {
        panic!("client: {err:?}");
    }
    c
}

fn resolve(client: *const odek_client_t, request: &str) -> Result<String, (i32, String, String)> {
    let req = cstring(request);
    let mut out = null_mut();
    // SAFETY: valid handle, string and out-param.
    let e = unsafe { odek_resolve(client, req.as_ptr(), &mut out) };
    match take_error(e) {
        Some(err) => Err(err),
        None => Ok(take_string(out)),
    }
}

/// The fixture every row runs against.
struct World {
    client: *mut odek_client_t,
    freed_client: *mut odek_client_t,
    sandbox: *mut odek_sandbox_t,
    /// A plan that needs no approval (operator settings only).
    plan: String,
    /// A plan whose project config asks for the Compose project `shop`.
    gated_plan: String,
    /// A once-approval of `gated_plan` with its key replaced.
    wrong_key_approval: String,
    project: TempProject,
    _gated: TempProject,
}

impl World {
    fn new() -> World {
        let client = client_new(r#"{"engine":"fake"}"#);
        let freed_client = client_new(r#"{"engine":"fake"}"#);
        // SAFETY: a live client, freed once; its value is kept only as a
        // stale handle that odek must recognise as unknown.
        assert!(take_error(unsafe { odek_client_free(freed_client) }).is_none());

        let project = TempProject::new("plain");
        let plan = resolve(
            client,
            &project.request(json!({"sandbox_image": "odek-test/base:1"})),
        )
        .expect("plain plan");

        let gated = TempProject::new("gated");
        std::fs::write(
            gated.workdir().join("odek.json"),
            r#"{"sandbox_compose_project": "shop"}"#,
        )
        .expect("odek.json");
        let gated_plan = resolve(
            client,
            &gated.request(json!({"sandbox_image": "odek-test/base:1"})),
        )
        .expect("gated plan");
        let gp: Value = serde_json::from_str(&gated_plan).expect("plan JSON");
        assert!(!gp["approval"].is_null(), "the gated plan needs approval");

        let plan_c = cstring(gated_plan.as_str());
        let once = cstring("once");
        let mut approval = null_mut();
        // SAFETY: valid handle, strings and out-param.
        let e = unsafe { odek_approve(client, plan_c.as_ptr(), once.as_ptr(), &mut approval) };
        assert!(take_error(e).is_none(), "approve once");
        let mut a: Value = serde_json::from_str(&take_string(approval)).expect("approval JSON");
        a["key"] = json!("0".repeat(64));
        let wrong_key_approval = a.to_string();

        let plan_c = cstring(plan.as_str());
        let null_approval = cstring("null");
        let mut sandbox = null_mut();
        // SAFETY: valid handle, strings and out-param.
        let e = unsafe {
            odek_launch(
                client,
                plan_c.as_ptr(),
                null_approval.as_ptr(),
                &mut sandbox,
            )
        };
        if let Some(err) = take_error(e) {
            panic!("launch: {err:?}");
        }
        World {
            client,
            freed_client,
            sandbox,
            plan,
            gated_plan,
            wrong_key_approval,
            project,
            _gated: gated,
        }
    }

    /// The plain plan with one member replaced.
    fn plan_with(&self, key: &str, value: Value) -> String {
        let mut p: Value = serde_json::from_str(&self.plan).expect("plan JSON");
        p[key] = value;
        p.to_string()
    }

    /// A resolve request for the plain project.
    fn request(&self, settings: Value) -> String {
        self.project.request(settings)
    }
}

impl Drop for World {
    fn drop(&mut self) {
        // SAFETY: live handles, destroyed/freed once.
        unsafe {
            assert!(take_error(odek_sandbox_destroy(self.sandbox)).is_none());
            assert!(take_error(odek_client_free(self.client)).is_none());
        }
    }
}

// ---------------------------------------------------------------------------
// Rows

/// Which handle a row passes.
#[derive(Clone, Copy, Debug)]
enum Handle {
    /// The world's live handle.
    Live,
    /// NULL.
    Null,
    /// A value odek never returned.
    Bogus,
    /// A client already freed.
    Freed,
}

#[derive(Clone, Copy, Debug)]
enum F {
    ClientNew,
    Resolve,
    ApprovalRequest,
    Approve,
    Launch,
    Exec,
    Narrow,
    ConfigView,
}

struct Row {
    what: String,
    f: F,
    args: Vec<Arg>,
    handle: Handle,
    null_out: bool,
    code: i32,
    needle: &'static str,
}

fn row(what: impl Into<String>, f: F, args: Vec<Arg>, code: i32, needle: &'static str) -> Row {
    Row {
        what: what.into(),
        f,
        args,
        handle: Handle::Live,
        null_out: false,
        code,
        needle,
    }
}

impl Row {
    fn handle(mut self, h: Handle) -> Row {
        self.handle = h;
        self
    }

    fn null_out(mut self) -> Row {
        self.null_out = true;
        self
    }
}

/// `{"x": [[…[1]…]]}` with `levels` arrays.
fn nested_settings(levels: usize) -> Value {
    let mut v = json!(1);
    for _ in 0..levels {
        v = Value::Array(vec![v]);
    }
    json!({ "x": v })
}

const NULL: i32 = ODEK_E_NULL_POINTER as i32;
const UTF8: i32 = ODEK_E_INVALID_UTF8 as i32;
const JSON: i32 = ODEK_E_INVALID_JSON as i32;
const HANDLE: i32 = ODEK_E_INVALID_HANDLE as i32;
const ARG: i32 = ODEK_E_INVALID_ARGUMENT as i32;

fn rows(w: &World) -> Vec<Row> {
    use F::*;
    let plan = || arg(w.plan.as_str());
    let gated = || arg(w.gated_plan.as_str());
    let req = |settings: Value| arg(w.request(settings));
    let exec = |doc: &str| vec![arg(doc)];
    let narrow = |doc: &str| vec![plan(), arg(doc)];
    let workdir = w.project.workdir();
    let wd = workdir.display().to_string();
    let env = w.project.env();
    let truncated = &w.plan[..w.plan.len() - 1];
    vec![
        // --- odek_client_new(options_json) ---
        row(
            "client: NULL options",
            ClientNew,
            vec![None],
            NULL,
            "options_json is NULL",
        ),
        row(
            "client: invalid UTF-8",
            ClientNew,
            vec![arg(&b"{\"engine\":\"\xff\"}"[..])],
            UTF8,
            "not valid UTF-8",
        ),
        row("client: empty", ClientNew, vec![arg("")], JSON, "EOF"),
        row(
            "client: unterminated",
            ClientNew,
            vec![arg("{")],
            JSON,
            "EOF",
        ),
        row(
            "client: string",
            ClientNew,
            vec![arg(r#""fake""#)],
            ARG,
            "invalid type: string",
        ),
        row(
            "client: null",
            ClientNew,
            vec![arg("null")],
            ARG,
            "invalid type: null",
        ),
        row(
            "client: unknown field",
            ClientNew,
            vec![arg(r#"{"engine":"fake","bogus":1}"#)],
            ARG,
            "unknown field `bogus`",
        ),
        row(
            "client: engine is a number",
            ClientNew,
            vec![arg(r#"{"engine":1}"#)],
            ARG,
            "invalid type: integer",
        ),
        row(
            "client: unknown engine",
            ClientNew,
            vec![arg(r#"{"engine":"podman"}"#)],
            ARG,
            "engine must be \"docker\" or \"fake\"",
        ),
        row(
            "client: trailing bytes",
            ClientNew,
            vec![arg(r#"{"engine":"fake"} x"#)],
            JSON,
            "trailing characters",
        ),
        row(
            "client: lone surrogate",
            ClientNew,
            vec![arg(r#"{"engine":"\ud800"}"#)],
            JSON,
            "hex escape",
        ),
        row(
            "client: bad schema",
            ClientNew,
            vec![arg(r#"{"schema":"other/1","engine":"fake"}"#)],
            ARG,
            "unknown schema",
        ),
        row(
            "client: ftp docker_host",
            ClientNew,
            vec![arg(r#"{"docker_host":"ftp://x"}"#)],
            ODEK_E_ENDPOINT as i32,
            "docker_host",
        ),
        row(
            "client: docker_cert_path without docker_host",
            ClientNew,
            vec![arg(r#"{"docker_cert_path":"/nonexistent"}"#)],
            ODEK_E_ENDPOINT as i32,
            "no docker_host is given",
        ),
        row(
            "client: docker_cert_path with a unix docker_host",
            ClientNew,
            vec![arg(
                r#"{"docker_host":"unix:///run/x.sock","docker_cert_path":"/nonexistent"}"#,
            )],
            ODEK_E_ENDPOINT as i32,
            "remove docker_cert_path",
        ),
        row(
            "client: docker_cert_path without the files",
            ClientNew,
            vec![arg(
                r#"{"docker_host":"tcp://10.1.2.3:2376","docker_cert_path":"/nonexistent"}"#,
            )],
            ODEK_E_ENDPOINT as i32,
            "/nonexistent/ca.pem does not exist",
        ),
        row(
            "client: empty docker_host",
            ClientNew,
            vec![arg(r#"{"docker_host":""}"#)],
            ODEK_E_ENDPOINT as i32,
            "docker_host",
        ),
        row(
            "client: NULL out",
            ClientNew,
            vec![arg(r#"{"engine":"fake"}"#)],
            NULL,
            "(out-param) is NULL",
        )
        .null_out(),
        row(
            "client: array",
            ClientNew,
            vec![arg("[]")],
            ARG,
            "must be a JSON object",
        ),
        row(
            "client: positional array",
            ClientNew,
            vec![arg(r#"[null, null, "fake"]"#)],
            ARG,
            "must be a JSON object",
        ),
        // --- odek_resolve(client, request_json) ---
        row(
            "resolve: NULL request",
            Resolve,
            vec![None],
            NULL,
            "request_json is NULL",
        ),
        row(
            "resolve: NULL client",
            Resolve,
            vec![req(json!({}))],
            NULL,
            "client is NULL",
        )
        .handle(Handle::Null),
        row(
            "resolve: bogus client",
            Resolve,
            vec![req(json!({}))],
            HANDLE,
            "unknown or was already destroyed",
        )
        .handle(Handle::Bogus),
        row(
            "resolve: freed client",
            Resolve,
            vec![req(json!({}))],
            HANDLE,
            "unknown or was already destroyed",
        )
        .handle(Handle::Freed),
        row(
            "resolve: NULL out",
            Resolve,
            vec![req(json!({}))],
            NULL,
            "plan_json_out (out-param) is NULL",
        )
        .null_out(),
        row(
            "resolve: invalid UTF-8",
            Resolve,
            vec![arg(&b"{\"workdir\": \"/tmp/\xc0\xaf\"}"[..])],
            UTF8,
            "not valid UTF-8",
        ),
        row("resolve: empty", Resolve, vec![arg("")], JSON, "EOF"),
        row(
            "resolve: trailing bytes",
            Resolve,
            vec![arg(format!("{} {{}}", w.request(json!({}))))],
            JSON,
            "trailing characters",
        ),
        row(
            "resolve: lone surrogate",
            Resolve,
            vec![arg(r#"{"workdir": "\udc00"}"#)],
            JSON,
            "hex escape",
        ),
        row(
            "resolve: number beyond f64",
            Resolve,
            vec![arg(format!(
                r#"{{"workdir": {wd:?}, "settings": {{"sandbox_pids_limit": 1e400}}}}"#
            ))],
            JSON,
            "number out of range",
        ),
        row(
            "resolve: no workdir",
            Resolve,
            vec![arg("{}")],
            ARG,
            "missing field `workdir`",
        ),
        row(
            "resolve: array",
            Resolve,
            vec![arg("[]")],
            ARG,
            "must be a JSON object, not an array",
        ),
        row(
            "resolve: string",
            Resolve,
            vec![arg(r#""workdir""#)],
            ARG,
            "invalid type: string",
        ),
        row(
            "resolve: workdir is a number",
            Resolve,
            vec![arg(r#"{"workdir": 1}"#)],
            ARG,
            "invalid type: integer",
        ),
        row(
            "resolve: unknown field",
            Resolve,
            vec![arg(
                json!({"workdir": wd, "env": env, "extra": 1}).to_string()
            )],
            ARG,
            "unknown field `extra`",
        ),
        row(
            "resolve: settings is an array",
            Resolve,
            vec![arg(json!({"workdir": wd, "settings": []}).to_string())],
            ARG,
            "invalid type: sequence",
        ),
        row(
            "resolve: env value is a number",
            Resolve,
            vec![arg(json!({"workdir": wd, "env": {"A": 1}}).to_string())],
            ARG,
            "invalid type: integer",
        ),
        row(
            "resolve: flag is a string",
            Resolve,
            vec![arg(
                json!({"workdir": wd, "read_user_config": "yes"}).to_string()
            )],
            ARG,
            "invalid type: string",
        ),
        row(
            "resolve: wrong schema",
            Resolve,
            vec![arg(
                json!({"workdir": wd, "env": env, "schema": "odek.plan/1"}).to_string(),
            )],
            ARG,
            "unknown schema",
        ),
        row(
            "resolve: missing workdir dir",
            Resolve,
            vec![arg(
                json!({"workdir": "/nonexistent/odek/bad-json", "env": env}).to_string(),
            )],
            ODEK_E_CONFIG as i32,
            "nonexistent",
        ),
        row(
            "resolve: no HOME nor ODEK_HOME",
            Resolve,
            vec![arg(json!({"workdir": wd, "env": {}}).to_string())],
            ODEK_E_CONFIG as i32,
            "ODEK_HOME",
        ),
        row(
            "resolve: pids 0",
            Resolve,
            vec![req(json!({"sandbox_pids_limit": 0}))],
            ODEK_E_CONFIG as i32,
            "must be a positive integer",
        ),
        row(
            "resolve: pids -1",
            Resolve,
            vec![req(json!({"sandbox_pids_limit": -1}))],
            ODEK_E_CONFIG as i32,
            "must be a positive integer",
        ),
        row(
            "resolve: pids beyond i64",
            Resolve,
            vec![req(
                json!({"sandbox_pids_limit": 99_999_999_999_999_999_999.0_f64}),
            )],
            ODEK_E_CONFIG as i32,
            "fits in 64 bits",
        ),
        row(
            "resolve: pids as a string",
            Resolve,
            vec![req(json!({"sandbox_pids_limit": "4096"}))],
            ODEK_E_CONFIG as i32,
            "not a string",
        ),
        row(
            "resolve: pids with a fraction",
            Resolve,
            vec![req(json!({"sandbox_pids_limit": 1.5}))],
            ODEK_E_CONFIG as i32,
            "without a fraction",
        ),
        row(
            "resolve: sandbox is a string",
            Resolve,
            vec![req(json!({"sandbox": "true"}))],
            ODEK_E_CONFIG as i32,
            "must be true or false",
        ),
        row(
            "resolve: null setting",
            Resolve,
            vec![req(json!({"sandbox_user": null}))],
            ODEK_E_CONFIG as i32,
            "must not be null",
        ),
        row(
            "resolve: unknown setting",
            Resolve,
            vec![req(json!({"sandbox_netwrok": "none"}))],
            ODEK_E_CONFIG as i32,
            "has unknown keys",
        ),
        row(
            "resolve: network host",
            Resolve,
            vec![req(json!({"sandbox_network": "host"}))],
            ODEK_E_NETWORK_MODE as i32,
            "must be \"none\" or \"bridge\"",
        ),
        row(
            "resolve: network container:x",
            Resolve,
            vec![req(json!({"sandbox_network": "container:x"}))],
            ODEK_E_NETWORK_MODE as i32,
            "sandbox_networks",
        ),
        row(
            "resolve: reserved network name",
            Resolve,
            vec![req(json!({"sandbox_networks": ["host"]}))],
            ODEK_E_NETWORK_NAME as i32,
            "reserved",
        ),
        row(
            "resolve: network name with ESC",
            Resolve,
            vec![req(json!({"sandbox_networks": ["a\u{1b}[2J"]}))],
            ODEK_E_NETWORK_NAME as i32,
            "U+001B",
        ),
        row(
            "resolve: unknown network",
            Resolve,
            vec![req(json!({"sandbox_networks": ["nope"]}))],
            ODEK_E_NETWORK_NOT_FOUND as i32,
            "not found",
        ),
        row(
            "resolve: bad compose name",
            Resolve,
            vec![req(json!({"sandbox_compose_project": "Shop"}))],
            ODEK_E_COMPOSE_NAME as i32,
            "did you mean \"shop\"?",
        ),
        row(
            "resolve: compose not running",
            Resolve,
            vec![req(json!({"sandbox_compose_project": "nope"}))],
            ODEK_E_COMPOSE_NOT_RUNNING as i32,
            "docker compose -p nope -f <compose file> up -d",
        ),
        row(
            "resolve: bad image",
            Resolve,
            vec![req(json!({"sandbox_image": "Alpine"}))],
            ODEK_E_IMAGE_REFERENCE as i32,
            "image reference",
        ),
        row(
            "resolve: volume outside",
            Resolve,
            vec![req(json!({"sandbox_volumes": ["../x:/x"]}))],
            ODEK_E_VOLUME as i32,
            "'..'",
        ),
        row(
            "resolve: env value not a string",
            Resolve,
            vec![req(json!({"sandbox_env": {"A": 1}}))],
            ODEK_E_CONFIG as i32,
            "must map each name to a string",
        ),
        row(
            "resolve: env key invalid",
            Resolve,
            vec![req(json!({"sandbox_env": {"A-B": "x"}}))],
            ODEK_E_CONFIG as i32,
            "names must match",
        ),
        row(
            "resolve: env unset variable",
            Resolve,
            vec![req(json!({"sandbox_env": {"A": "${ODEK_BAD_JSON_UNSET}"}}))],
            ODEK_E_CONFIG as i32,
            "is not set",
        ),
        row(
            "resolve: memory lots",
            Resolve,
            vec![req(json!({"sandbox_memory": "lots"}))],
            ODEK_E_CONFIG as i32,
            "must be a size like",
        ),
        row(
            "resolve: cpus 0",
            Resolve,
            vec![req(json!({"sandbox_cpus": 0}))],
            ODEK_E_CONFIG as i32,
            "at least 0.01",
        ),
        row(
            "resolve: user",
            Resolve,
            vec![req(json!({"sandbox_user": "a:b:c"}))],
            ODEK_E_CONFIG as i32,
            "must be uid[:gid]",
        ),
        row(
            "resolve: nesting",
            Resolve,
            vec![req(nested_settings(33))],
            ARG,
            "deeper than 32",
        ),
        row(
            "resolve: positional array",
            Resolve,
            vec![arg(format!("[null, {wd:?}, null, false, false]"))],
            ARG,
            "must be a JSON object",
        ),
        // --- odek_plan_approval_request(plan_json) ---
        row(
            "approval request: NULL plan",
            ApprovalRequest,
            vec![None],
            NULL,
            "plan_json is NULL",
        ),
        row(
            "approval request: NULL out",
            ApprovalRequest,
            vec![plan()],
            NULL,
            "(out-param) is NULL",
        )
        .null_out(),
        row(
            "approval request: invalid UTF-8",
            ApprovalRequest,
            vec![arg(&b"\xfe\xff"[..])],
            UTF8,
            "not valid UTF-8",
        ),
        row(
            "approval request: empty object",
            ApprovalRequest,
            vec![arg("{}")],
            ARG,
            "missing field",
        ),
        row(
            "approval request: null",
            ApprovalRequest,
            vec![arg("null")],
            ARG,
            "invalid type: null",
        ),
        row(
            "approval request: truncated plan",
            ApprovalRequest,
            vec![arg(truncated)],
            JSON,
            "EOF",
        ),
        row(
            "approval request: trailing bytes",
            ApprovalRequest,
            vec![arg(format!("{}x", w.plan))],
            JSON,
            "trailing characters",
        ),
        row(
            "approval request: pids as a string",
            ApprovalRequest,
            vec![arg(w.plan_with("pids_limit", json!("4096")))],
            ARG,
            "invalid type: string",
        ),
        row(
            "approval request: pids beyond i64",
            ApprovalRequest,
            vec![arg(w.plan.replace(
                "\"pids_limit\":4096",
                "\"pids_limit\":9223372036854775808",
            ))],
            ARG,
            "invalid value",
        ),
        row(
            "approval request: lone surrogate",
            ApprovalRequest,
            vec![arg(w.plan.replace(
                "\"schema\":\"odek.plan/1\"",
                r#""schema":"\ud800""#,
            ))],
            JSON,
            "hex escape",
        ),
        // --- odek_approve(client, plan_json, decision) ---
        row(
            "approve: NULL plan",
            Approve,
            vec![None, arg("once")],
            NULL,
            "plan_json is NULL",
        ),
        row(
            "approve: NULL decision",
            Approve,
            vec![gated(), None],
            NULL,
            "decision is NULL",
        ),
        row(
            "approve: NULL out",
            Approve,
            vec![gated(), arg("once")],
            NULL,
            "(out-param) is NULL",
        )
        .null_out(),
        row(
            "approve: NULL client",
            Approve,
            vec![gated(), arg("once")],
            NULL,
            "client is NULL",
        )
        .handle(Handle::Null),
        row(
            "approve: decision maybe",
            Approve,
            vec![gated(), arg("maybe")],
            ARG,
            "decision must be \"once\" or \"trust\"",
        ),
        row(
            "approve: decision ONCE",
            Approve,
            vec![gated(), arg("ONCE")],
            ARG,
            "decision must be",
        ),
        row(
            "approve: decision empty",
            Approve,
            vec![gated(), arg("")],
            ARG,
            "decision must be",
        ),
        row(
            "approve: decision invalid UTF-8",
            Approve,
            vec![gated(), arg(&b"onc\xe9"[..])],
            UTF8,
            "decision is not valid UTF-8",
        ),
        row(
            "approve: plan is an array",
            Approve,
            vec![arg("[]"), arg("once")],
            ARG,
            "must be a JSON object, not an array",
        ),
        row(
            "approve: plan needs none",
            Approve,
            vec![plan(), arg("once")],
            ODEK_E_APPROVAL_MISMATCH as i32,
            "needs no approval",
        ),
        // --- odek_launch(client, plan_json, approval_json) ---
        row(
            "launch: NULL plan",
            Launch,
            vec![None, arg("null")],
            NULL,
            "plan_json is NULL",
        ),
        row(
            "launch: NULL approval",
            Launch,
            vec![plan(), None],
            NULL,
            "approval_json is NULL",
        ),
        row(
            "launch: NULL out",
            Launch,
            vec![plan(), arg("null")],
            NULL,
            "(out-param) is NULL",
        )
        .null_out(),
        row(
            "launch: bogus client",
            Launch,
            vec![plan(), arg("null")],
            HANDLE,
            "unknown or was already destroyed",
        )
        .handle(Handle::Bogus),
        row(
            "launch: empty approval",
            Launch,
            vec![plan(), arg("")],
            JSON,
            "EOF",
        ),
        row(
            "launch: approval key is a number",
            Launch,
            vec![gated(), arg(r#"{"key": 1}"#)],
            ARG,
            "invalid type: integer",
        ),
        row(
            "launch: approval is the string null",
            Launch,
            vec![gated(), arg(r#""null""#)],
            ARG,
            "invalid type: string",
        ),
        row(
            "launch: approval required",
            Launch,
            vec![gated(), arg("null")],
            ODEK_E_APPROVAL_REQUIRED as i32,
            "needs operator approval",
        ),
        row(
            "launch: approval for other settings",
            Launch,
            vec![gated(), arg(w.wrong_key_approval.as_str())],
            ODEK_E_APPROVAL_MISMATCH as i32,
            "does not match the plan",
        ),
        row(
            "launch: unknown isolation",
            Launch,
            vec![
                arg(w.plan_with("isolation", json!({"kind": "vm"}))),
                arg("null"),
            ],
            ARG,
            "unknown variant `vm`",
        ),
        row(
            "launch: unknown network mode",
            Launch,
            vec![arg(w.plan_with("network_mode", json!("host"))), arg("null")],
            ARG,
            "unknown variant `host`",
        ),
        row(
            "launch: plan is a number",
            Launch,
            vec![arg("42"), arg("null")],
            ARG,
            "invalid type: integer",
        ),
        // --- odek_exec(sandbox, request_json) ---
        row(
            "exec: wrong schema",
            Exec,
            exec(r#"{"schema": "odek.resolve-request/1", "argv": ["true"]}"#),
            ARG,
            "unknown schema",
        ),
        row(
            "exec: NULL request",
            Exec,
            vec![None],
            NULL,
            "request_json is NULL",
        ),
        row(
            "exec: NULL out",
            Exec,
            exec(r#"{"argv": ["true"]}"#),
            NULL,
            "(out-param) is NULL",
        )
        .null_out(),
        row(
            "exec: NULL sandbox",
            Exec,
            exec(r#"{"argv": ["true"]}"#),
            NULL,
            "sandbox is NULL",
        )
        .handle(Handle::Null),
        row(
            "exec: bogus sandbox",
            Exec,
            exec(r#"{"argv": ["true"]}"#),
            HANDLE,
            "sandbox handle is unknown",
        )
        .handle(Handle::Bogus),
        row(
            "exec: client handle as a sandbox",
            Exec,
            exec(r#"{"argv": ["true"]}"#),
            HANDLE,
            "sandbox handle is unknown",
        )
        .handle(Handle::Freed),
        row(
            "exec: invalid UTF-8",
            Exec,
            vec![arg(&b"{\"shell\": \"\x80\"}"[..])],
            UTF8,
            "not valid UTF-8",
        ),
        row("exec: empty", Exec, exec(""), JSON, "EOF"),
        row(
            "exec: trailing bytes",
            Exec,
            exec(r#"{"shell": "true"} {}"#),
            JSON,
            "trailing characters",
        ),
        row(
            "exec: lone surrogate",
            Exec,
            exec(r#"{"shell": "\ud800"}"#),
            JSON,
            "hex escape",
        ),
        row(
            "exec: timeout beyond f64",
            Exec,
            exec(r#"{"shell": "true", "timeout_secs": 1e400}"#),
            JSON,
            "number out of range",
        ),
        row(
            "exec: neither argv nor shell",
            Exec,
            exec("{}"),
            ARG,
            "exactly one of",
        ),
        row(
            "exec: both argv and shell",
            Exec,
            exec(r#"{"argv": ["true"], "shell": "true"}"#),
            ARG,
            "exactly one of",
        ),
        row(
            "exec: empty argv",
            Exec,
            exec(r#"{"argv": []}"#),
            ARG,
            "needs a command",
        ),
        row(
            "exec: empty program",
            Exec,
            exec(r#"{"argv": [""]}"#),
            ARG,
            "needs a command",
        ),
        row(
            "exec: argv is a string",
            Exec,
            exec(r#"{"argv": "ls -l"}"#),
            ARG,
            "invalid type: string",
        ),
        row(
            "exec: argv of numbers",
            Exec,
            exec(r#"{"argv": [1]}"#),
            ARG,
            "invalid type: integer",
        ),
        row(
            "exec: NUL in an argument",
            Exec,
            exec(r#"{"argv": ["echo", "a\u0000b"]}"#),
            ARG,
            "NUL character",
        ),
        row(
            "exec: NUL in a shell string",
            Exec,
            exec(r#"{"shell": "echo a\u0000b"}"#),
            ARG,
            "NUL character",
        ),
        row(
            "exec: negative timeout",
            Exec,
            exec(r#"{"shell": "true", "timeout_secs": -1}"#),
            ARG,
            "positive number",
        ),
        row(
            "exec: zero timeout",
            Exec,
            exec(r#"{"shell": "true", "timeout_secs": 0}"#),
            ARG,
            "positive number",
        ),
        row(
            "exec: huge timeout",
            Exec,
            exec(r#"{"shell": "true", "timeout_secs": 1e9}"#),
            ARG,
            "positive number",
        ),
        row(
            "exec: timeout as a string",
            Exec,
            exec(r#"{"shell": "true", "timeout_secs": "5"}"#),
            ARG,
            "invalid type: string",
        ),
        row(
            "exec: env key invalid",
            Exec,
            exec(r#"{"shell": "true", "env": {"A-B": "v"}}"#),
            ODEK_E_CONFIG as i32,
            "names must match",
        ),
        row(
            "exec: env value with NUL",
            Exec,
            exec(r#"{"shell": "true", "env": {"A": "v\u0000"}}"#),
            ARG,
            "NUL character",
        ),
        row(
            "exec: env value a number",
            Exec,
            exec(r#"{"shell": "true", "env": {"A": 1}}"#),
            ARG,
            "invalid type: integer",
        ),
        row(
            "exec: unknown field",
            Exec,
            exec(r#"{"shell": "true", "user": "root"}"#),
            ARG,
            "unknown field `user`",
        ),
        // --- odek_narrow(parent_plan_json, request_json) ---
        row(
            "narrow: wrong schema",
            Narrow,
            narrow(r#"{"schema": "odek.exec-request/1"}"#),
            ARG,
            "unknown schema",
        ),
        row(
            "narrow: NULL parent",
            Narrow,
            vec![None, arg("{}")],
            NULL,
            "parent_plan_json is NULL",
        ),
        row(
            "narrow: NULL request",
            Narrow,
            vec![plan(), None],
            NULL,
            "request_json is NULL",
        ),
        row(
            "narrow: NULL out",
            Narrow,
            narrow("{}"),
            NULL,
            "(out-param) is NULL",
        )
        .null_out(),
        row(
            "narrow: parent is empty",
            Narrow,
            vec![arg("{}"), arg("{}")],
            ARG,
            "missing field",
        ),
        row(
            "narrow: parent truncated",
            Narrow,
            vec![arg(truncated), arg("{}")],
            JSON,
            "EOF",
        ),
        row(
            "narrow: request invalid UTF-8",
            Narrow,
            vec![plan(), arg(&b"{\"memory\": \"\xff\"}"[..])],
            UTF8,
            "not valid UTF-8",
        ),
        row(
            "narrow: request lone surrogate",
            Narrow,
            narrow(r#"{"memory": "\ud800"}"#),
            JSON,
            "hex escape",
        ),
        row(
            "narrow: request is a number",
            Narrow,
            narrow("7"),
            ARG,
            "invalid type: integer",
        ),
        row(
            "narrow: unknown field",
            Narrow,
            narrow(r#"{"bogus": 1}"#),
            ARG,
            "unknown field `bogus`",
        ),
        row(
            "narrow: pids 0",
            Narrow,
            narrow(r#"{"pids_limit": 0}"#),
            ODEK_E_NARROW as i32,
            "positive integer",
        ),
        row(
            "narrow: pids up",
            Narrow,
            narrow(r#"{"pids_limit": 999999}"#),
            ODEK_E_NARROW as i32,
            "may only go down",
        ),
        row(
            "narrow: pids as a string",
            Narrow,
            narrow(r#"{"pids_limit": "1"}"#),
            ARG,
            "invalid type: string",
        ),
        row(
            "narrow: pids beyond i64",
            Narrow,
            narrow(r#"{"pids_limit": 9223372036854775808}"#),
            ARG,
            "invalid value",
        ),
        row(
            "narrow: foreign network",
            Narrow,
            narrow(r#"{"networks": ["nope"]}"#),
            ODEK_E_NARROW as i32,
            "not one of the parent's",
        ),
        row(
            "narrow: an empty network name",
            Narrow,
            narrow(r#"{"networks": ["shop_default", ""]}"#),
            ARG,
            "networks has an empty item",
        ),
        row(
            "narrow: network mode host",
            Narrow,
            narrow(r#"{"network_mode": "host"}"#),
            ARG,
            "network_mode must be \"none\" or \"bridge\" (got \"host\"); to keep some of the parent's Docker networks ask for `networks`",
        ),
        row(
            "narrow: none to bridge",
            Narrow,
            narrow(r#"{"network_mode": "bridge"}"#),
            ODEK_E_NARROW as i32,
            "never from none to bridge",
        ),
        row(
            "narrow: memory lots",
            Narrow,
            narrow(r#"{"memory": "lots"}"#),
            ODEK_E_NARROW as i32,
            "must be a size like",
        ),
        row(
            "narrow: cpus 0",
            Narrow,
            narrow(r#"{"cpus": "0"}"#),
            ODEK_E_NARROW as i32,
            "at least 0.01",
        ),
        row(
            "narrow: another image",
            Narrow,
            narrow(r#"{"image": "alpine"}"#),
            ODEK_E_NARROW as i32,
            "image stays the parent's",
        ),
        row(
            "narrow: foreign compose project",
            Narrow,
            narrow(r#"{"compose_project": "nope"}"#),
            ODEK_E_NARROW as i32,
            "no network of Compose project",
        ),
        row(
            "narrow: request array",
            Narrow,
            narrow("[]"),
            ARG,
            "must be a JSON object",
        ),
        row(
            "narrow: positional array",
            Narrow,
            narrow("[null, []]"),
            ARG,
            "must be a JSON object",
        ),
        // --- odek_config_view(client, plan_json) ---
        row(
            "config view: NULL plan",
            ConfigView,
            vec![None],
            NULL,
            "plan_json is NULL",
        ),
        row(
            "config view: NULL out",
            ConfigView,
            vec![plan()],
            NULL,
            "(out-param) is NULL",
        )
        .null_out(),
        row(
            "config view: NULL client",
            ConfigView,
            vec![plan()],
            NULL,
            "client is NULL",
        )
        .handle(Handle::Null),
        row(
            "config view: freed client",
            ConfigView,
            vec![plan()],
            HANDLE,
            "unknown or was already destroyed",
        )
        .handle(Handle::Freed),
        row("config view: empty", ConfigView, vec![arg("")], JSON, "EOF"),
        row(
            "config view: array",
            ConfigView,
            vec![arg("[]")],
            ARG,
            "must be a JSON object, not an array",
        ),
        row(
            "config view: invalid UTF-8",
            ConfigView,
            vec![arg(&b"{\xff}"[..])],
            UTF8,
            "not valid UTF-8",
        ),
        row(
            "config view: wrong mode",
            ConfigView,
            vec![arg(w.plan_with("mode", json!("paranoid")))],
            ARG,
            "unknown variant `paranoid`",
        ),
    ]
}

/// Runs one row; returns the error (or `None`) and whether every out-param
/// was left untouched.
fn run(w: &World, r: &Row) -> (Option<(i32, String, String)>, bool) {
    let a = |i: usize| ptr(&r.args[i]);
    let client: *const odek_client_t = match r.handle {
        Handle::Live => w.client,
        Handle::Null => null(),
        Handle::Bogus => std::ptr::without_provenance(0x0dec_0008),
        Handle::Freed => w.freed_client,
    };
    let sandbox: *const odek_sandbox_t = match r.handle {
        Handle::Live => w.sandbox,
        Handle::Null => null(),
        Handle::Bogus => std::ptr::without_provenance(0x0dec_0008),
        Handle::Freed => w.client.cast(),
    };
    let mut s: *mut c_char = null_mut();
    let out = if r.null_out {
        null_mut()
    } else {
        &mut s as *mut _
    };
    // SAFETY: every pointer is NULL, a live handle, a stale/bogus handle odek
    // looks up before use, or a NUL-terminated string that outlives the call.
    let e = unsafe {
        match r.f {
            F::ClientNew => {
                let mut c: *mut odek_client_t = null_mut();
                let o = if r.null_out {
                    null_mut()
                } else {
                    &mut c as *mut _
                };
                let e = odek_client_new(a(0), o);
                if !c.is_null() {
                    let _ = take_error(odek_client_free(c));
                    return (take_error(e), false);
                }
                e
            }
            F::Resolve => odek_resolve(client, a(0), out),
            F::ApprovalRequest => odek_plan_approval_request(a(0), out),
            F::Approve => odek_approve(client, a(0), a(1), out),
            F::Launch => {
                let mut sb: *mut odek_sandbox_t = null_mut();
                let o = if r.null_out {
                    null_mut()
                } else {
                    &mut sb as *mut _
                };
                let e = odek_launch(client, a(0), a(1), o);
                if !sb.is_null() {
                    let _ = take_error(odek_sandbox_destroy(sb));
                    return (take_error(e), false);
                }
                e
            }
            F::Exec => odek_exec(sandbox, a(0), out),
            F::Narrow => odek_narrow(a(0), a(1), out),
            F::ConfigView => odek_config_view(client, a(0), out),
        }
    };
    let untouched = s.is_null();
    if !s.is_null() {
        take_string(s);
    }
    (take_error(e), untouched)
}

fn check(w: &World, r: &Row) -> Result<(), String> {
    let what = &r.what;
    let (err, untouched) = run(w, r);
    let Some((code, class, message)) = err else {
        return Err(format!("{what}: succeeded, wanted code {}", r.code));
    };
    if code != r.code {
        return Err(format!("{what}: code {code}, wanted {}: {message}", r.code));
    }
    if class != class_of(code) {
        return Err(format!("{what}: class {class:?} for code {code}"));
    }
    if !message.contains(r.needle) {
        return Err(format!("{what}: message lacks {:?}: {message}", r.needle));
    }
    if !untouched {
        return Err(format!("{what}: an out-param was written on failure"));
    }
    Ok(())
}

#[test]
fn bad_json_through_the_c_abi_gives_coded_errors() {
    let w = World::new();
    let rows = rows(&w);
    assert!(rows.len() >= 50, "only {} rows", rows.len());
    let failures: Vec<String> = rows.iter().filter_map(|r| check(&w, r).err()).collect();
    assert!(
        failures.is_empty(),
        "{} of {} rows failed:\n{}",
        failures.len(),
        rows.len(),
        failures.join("\n")
    );
}

/// BUG: duplicate keys in a JSON argument of the C ABI are silently
/// resolved last-wins — at the top level (`{"workdir": "/a", "workdir":
/// "/b"}`, `{"engine": …, "engine": …}`) since `json_arg` goes through
/// `serde_json::Value`, and inside `settings` / `env` of a resolve request —
/// while the same document as `odek.json` is refused as malformed (SPEC
/// §3.2). A program that appends an override can loosen a setting it meant
/// to tighten (`sandbox_readonly`, `sandbox_pids_limit`), unseen.
/// Expected: `ODEK_E_INVALID_JSON`/`ODEK_E_INVALID_ARGUMENT` or a 2xx config
/// error naming the duplicate key.
#[test]
fn duplicate_keys_in_abi_json_are_refused() {
    let w = World::new();
    let wd = w.project.workdir().display().to_string();
    let home = w.project.root.join("home/.odek").display().to_string();
    let docs = [
        format!(
            r#"{{"workdir": {wd:?}, "env": {{"ODEK_HOME": {home:?}}}, "settings": {{"sandbox_readonly": true, "sandbox_readonly": false}}}}"#
        ),
        format!(
            r#"{{"workdir": {wd:?}, "env": {{"ODEK_HOME": {home:?}}}, "settings": {{"sandbox_pids_limit": 64, "sandbox_pids_limit": 4096}}}}"#
        ),
        format!(
            r#"{{"workdir": {wd:?}, "env": {{"ODEK_HOME": "/nonexistent", "ODEK_HOME": {home:?}}}}}"#
        ),
    ];
    let mut accepted = Vec::new();
    let mut refused = |what: &str, err: Option<(i32, String, String)>| match err {
        Some((code, _, msg)) if msg.contains("duplicate") && code != ODEK_E_PANIC as i32 => {}
        other => accepted.push(format!("{what}: {other:?}")),
    };
    for doc in &docs {
        refused(doc, resolve(w.client, doc).err());
    }
    let top = format!(
        r#"{{"workdir": "/nonexistent", "workdir": {wd:?}, "env": {{"ODEK_HOME": {home:?}}}}}"#
    );
    refused(&top, resolve(w.client, &top).err());
    let r = row(
        "client",
        F::ClientNew,
        vec![arg(r#"{"engine":"docker","engine":"fake"}"#)],
        0,
        "",
    );
    refused("client options", run(&w, &r).0);
    assert!(accepted.is_empty(), "accepted:\n{}", accepted.join("\n"));
}

/// BUG: `odek_launch` trusts the plan JSON it is given: a plan edited to
/// `"pids_limit": 0` (or -1) launches a container whose PIDs limit Docker
/// reads as "unlimited" — the very values SPEC §3.4 refuses — and the
/// post-start verification passes because it compares with the same value.
/// Expected: refused before create (a config error), like resolve refuses
/// `sandbox_pids_limit: 0`.
#[test]
fn launch_refuses_a_plan_with_an_unlimited_pids_limit() {
    let w = World::new();
    let mut launched = Vec::new();
    for pids in [0, -1] {
        let plan = cstring(w.plan_with("pids_limit", json!(pids)));
        let approval = cstring("null");
        let mut sb = null_mut();
        // SAFETY: live handle, valid strings and out-param.
        let e = unsafe { odek_launch(w.client, plan.as_ptr(), approval.as_ptr(), &mut sb) };
        match take_error(e) {
            Some((code, _, _)) if code / 100 == 2 => {}
            Some(other) => launched.push(format!("pids {pids}: {other:?}")),
            None => {
                let mut info = null_mut();
                // SAFETY: live sandbox handle; destroyed once.
                unsafe {
                    assert!(take_error(odek_sandbox_info(sb, &mut info)).is_none());
                    let info: Value = serde_json::from_str(&take_string(info)).expect("info");
                    launched.push(format!(
                        "pids {pids}: launched, applied pids_limit {}",
                        info["applied"]["pids_limit"]
                    ));
                    assert!(take_error(odek_sandbox_destroy(sb)).is_none());
                }
            }
        }
    }
    assert!(launched.is_empty(), "{}", launched.join("\n"));
}

// ---------------------------------------------------------------------------
// Property: arbitrary documents never panic and never write out-params on
// failure.

/// Arbitrary JSON values, a few levels deep, biased to the request members.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        ".{0,12}".prop_map(Value::String),
        prop::sample::select(vec![
            "none",
            "bridge",
            "host",
            "shop",
            "shop_default",
            "once",
            "true",
            "256m",
            "0.5",
        ])
        .prop_map(|s| Value::String(s.to_string())),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((key(), inner), 0..4)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "argv",
            "shell",
            "env",
            "timeout_secs",
            "workdir",
            "networks",
            "compose_project",
            "network_mode",
            "pids_limit",
            "memory",
            "cpus",
            "readonly",
            "image",
            "schema",
            "sandbox_network",
            "sandbox_networks",
            "sandbox_pids_limit",
            "sandbox_env",
            "sandbox_image",
        ])
        .prop_map(str::to_string),
        "[a-z_]{1,8}",
    ]
}

fn assert_no_panic(what: &str, err: Option<(i32, String, String)>, untouched: bool) {
    if let Some((code, class, message)) = err {
        assert_ne!(code, ODEK_E_PANIC as i32, "{what}: panic: {message}");
        assert!((100..700).contains(&code), "{what}: unexpected code {code}");
        assert_eq!(class, class_of(code), "{what}");
        assert!(!message.is_empty(), "{what}: empty message");
        assert!(untouched, "{what}: out-param written on failure");
    }
}

#[test]
fn arbitrary_documents_never_panic() {
    use proptest::test_runner::{Config, TestRunner};
    let w = World::new();
    let mut runner = TestRunner::new(Config {
        cases: case_count(),
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = (
        json_value(),
        json_value(),
        json_value(),
        prop::collection::vec(any::<u8>(), 0..64),
    );
    runner
        .run(&strategy, |(narrow_req, exec_req, settings, raw)| {
            let raw: Vec<u8> = raw.into_iter().filter(|b| *b != 0).collect();
            let cases = [
                (
                    format!("narrow {narrow_req}"),
                    F::Narrow,
                    vec![arg(w.plan.as_str()), arg(narrow_req.to_string())],
                ),
                (
                    format!("exec {exec_req}"),
                    F::Exec,
                    vec![arg(exec_req.to_string())],
                ),
                (
                    format!("resolve {settings}"),
                    F::Resolve,
                    vec![arg(w.request(settings))],
                ),
                (
                    "raw narrow".into(),
                    F::Narrow,
                    vec![arg(w.plan.as_str()), arg(raw.clone())],
                ),
                ("raw exec".into(), F::Exec, vec![arg(raw.clone())]),
                ("raw resolve".into(), F::Resolve, vec![arg(raw)]),
            ];
            for (what, f, args) in cases {
                let r = row(what, f, args, 0, "");
                let (err, untouched) = run(&w, &r);
                assert_no_panic(&r.what, err, untouched);
            }
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
}

/// 256 cases (bounded for CI), or `PROPTEST_CASES` for a longer run.
fn case_count() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256)
}

/// A key of the caller's own document that serde quotes in its shape error
/// (`unknown field …`) reaches the message as one line with every control,
/// escape and bidirectional character escaped visibly (SPEC §9.3): a host
/// program that prints the error prints no escape sequence it did not
/// write. The document's other errors keep their code.
#[test]
fn a_hostile_key_in_a_request_is_quoted_safely_in_the_error() {
    let w = World::new();
    let wd = w.project.workdir().display().to_string();
    let hostile = "k\u{1b}]0;pwned\u{7}\u{1b}[2J\u{9b}31m\u{202e}";
    let doc = serde_json::json!({ "workdir": wd, hostile: 1 }).to_string();
    let (code, _, msg) = resolve(w.client, &doc).expect_err("an unknown key is refused");
    assert_eq!(code, ODEK_E_INVALID_ARGUMENT as i32, "{msg}");
    assert!(msg.contains("\\x1b]0;pwned\\x07"), "{msg}");
    assert!(
        !msg.chars().any(odek_core::text::is_unsafe_char),
        "raw control in {msg:?}"
    );
}
