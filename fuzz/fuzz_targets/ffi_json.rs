//! The C ABI entry points with arbitrary request JSON (SPEC §10.1):
//! `odek_resolve`, `odek_narrow` and `odek_exec` on a `{"engine":"fake"}`
//! client. The first input byte picks the call, the rest is the document.
//!
//! Invariants: never a caught panic (`ODEK_E_PANIC`) nor a crash; an error
//! has a known code whose hundreds digit gives its class, a non-empty
//! message, and leaves the out-param untouched; a success returns JSON with
//! a `"schema"` member.
//!
//! Safety of the run: exec goes to the fake engine's in-memory container —
//! the fixture checks at start-up that the sandbox is a container (never
//! the host), so no fuzzed command can run on this machine.
#![no_main]

use std::ffi::{c_char, CStr, CString};
use std::path::PathBuf;
use std::ptr::{null_mut, NonNull};
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use odek::*;
use serde_json::{json, Value};

/// Handles and documents shared by every run (handles are IDs valid from
/// any thread, SPEC §10.1).
struct Fixture {
    client: usize,
    sandbox: usize,
    plan: CString,
    workdir: PathBuf,
    env: Value,
}

fn take_error(e: *mut odek_error_t) -> Option<(i32, String, String)> {
    let e = NonNull::new(e)?;
    // SAFETY: a live error object from odek, freed once.
    unsafe {
        let code = odek_error_code(e.as_ptr());
        let class = CStr::from_ptr(odek_error_class(e.as_ptr()))
            .to_string_lossy()
            .into_owned();
        let msg = CStr::from_ptr(odek_error_message(e.as_ptr()))
            .to_string_lossy()
            .into_owned();
        odek_error_free(e.as_ptr());
        Some((code, class, msg))
    }
}

fn take_string(s: *mut c_char) -> String {
    // SAFETY: a string returned by odek, freed once.
    unsafe {
        let out = CStr::from_ptr(s).to_string_lossy().into_owned();
        odek_string_free(s);
        out
    }
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        // One fixed directory, reused by every run and worker (only read
        // after it is created), so runs leave nothing else behind.
        let root = std::env::temp_dir().join("odek-fuzz-ffi");
        std::fs::create_dir_all(root.join("work")).expect("workdir");
        std::fs::create_dir_all(root.join("home/.odek")).expect("home");
        let root = root.canonicalize().expect("canonical");
        let workdir = root.join("work");
        let env = json!({"HOME": root.join("home"), "ODEK_HOME": root.join("home/.odek")});
        // SAFETY: valid strings and out-params throughout.
        unsafe {
            let opts = CString::new(r#"{"engine":"fake"}"#).expect("c");
            let mut client = null_mut();
            assert!(take_error(odek_client_new(opts.as_ptr(), &mut client)).is_none());
            let req = CString::new(
                json!({"workdir": workdir, "env": env, "settings": {"sandbox_image": "odek-test/base:1"}})
                    .to_string(),
            )
            .expect("c");
            let mut plan = null_mut();
            assert!(take_error(odek_resolve(client, req.as_ptr(), &mut plan)).is_none());
            let plan = CString::new(take_string(plan)).expect("c");
            let none = CString::new("null").expect("c");
            let mut sandbox = null_mut();
            assert!(take_error(odek_launch(client, plan.as_ptr(), none.as_ptr(), &mut sandbox)).is_none());
            let mut info = null_mut();
            assert!(take_error(odek_sandbox_info(sandbox, &mut info)).is_none());
            let info: Value = serde_json::from_str(&take_string(info)).expect("info");
            // Never fuzz exec against the host.
            assert!(info["container_id"].is_string(), "the fixture sandbox is not a container: {info}");
            Fixture {
                client: client as usize,
                sandbox: sandbox as usize,
                plan,
                workdir,
                env,
            }
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let f = fixture();
    let text: Vec<u8> = rest.iter().copied().take_while(|b| *b != 0).collect();
    let doc = CString::new(text.clone()).expect("no NUL");
    let client = std::ptr::without_provenance::<odek_client_t>(f.client);
    let sandbox = std::ptr::without_provenance::<odek_sandbox_t>(f.sandbox);
    let mut out: *mut c_char = null_mut();
    // SAFETY: live handles; NUL-terminated strings alive for the call.
    let e = unsafe {
        match selector % 4 {
            0 => odek_resolve(client, doc.as_ptr(), &mut out),
            1 => {
                // The document as the `settings` of a fixed request.
                let wrapped = format!(
                    r#"{{"workdir": {}, "env": {}, "settings": {}}}"#,
                    Value::from(f.workdir.display().to_string()),
                    f.env,
                    String::from_utf8_lossy(&text)
                );
                let wrapped = CString::new(wrapped).expect("no NUL");
                odek_resolve(client, wrapped.as_ptr(), &mut out)
            }
            2 => odek_narrow(f.plan.as_ptr(), doc.as_ptr(), &mut out),
            _ => odek_exec(sandbox, doc.as_ptr(), &mut out),
        }
    };
    match take_error(e) {
        Some((code, class, msg)) => {
            assert_ne!(code, ODEK_E_PANIC as i32, "panic caught at the boundary: {msg}");
            assert!(
                (100..=106).contains(&code)
                    || (200..=216).contains(&code)
                    || (300..=304).contains(&code)
                    || (400..=402).contains(&code)
                    || code == 500
                    || (600..=601).contains(&code),
                "code {code}"
            );
            let want = match code / 100 {
                2 | 3 => "config",
                4 => "docker-rejected",
                5 => "image-unavailable",
                6 => "daemon-unreachable",
                _ => "usage",
            };
            assert_eq!(class, want);
            assert!(!msg.is_empty());
            assert!(out.is_null(), "out-param written on failure");
        }
        None => {
            assert!(!out.is_null());
            let v: Value = serde_json::from_str(&take_string(out)).expect("JSON result");
            assert!(v["schema"].is_string(), "{v}");
        }
    }
});
