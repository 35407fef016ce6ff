//! The require-sandbox default is decided once, in the resolve request
//! (`odek_core::api::ResolveRequest::allow_host_fallback`): a plain C caller
//! sending `{"workdir": …}` gets a required sandbox (mode `explicit`, the
//! `sandbox` setting from the API layer), as the bindings' users do;
//! `"allow_host_fallback": true` keeps SPEC §6.3's implicit mode; settings
//! saying `"sandbox"` win either way. Unknown settings keys are refused with
//! the key and a suggestion. Called directly as the `extern "C"` functions of
//! the `odek` rlib with a `{"engine":"fake"}` client.
#![allow(unsafe_code)]

use std::ffi::{c_char, CStr, CString};
use std::ptr::null_mut;

use odek::*;
use serde_json::{json, Value};

mod common;
use common::take_error;

fn cstring(s: &str) -> CString {
    CString::new(s).expect("no NUL inside a C string argument")
}

/// Resolves `request` (with `workdir` and `env` filled in) on a fake client.
fn resolve(mut request: Value) -> Result<Value, (i32, String)> {
    let root = tempfile::tempdir().expect("tempdir");
    let root = root.path().canonicalize().expect("canonical");
    std::fs::create_dir_all(root.join("work")).expect("workdir");
    std::fs::create_dir_all(root.join("home")).expect("home");
    request["workdir"] = json!(root.join("work"));
    request["env"] = json!({"HOME": root.join("home")});
    let mut client: *mut odek_client_t = null_mut();
    let opts = cstring(r#"{"engine":"fake"}"#);
    // SAFETY: valid C strings and out-params; the client is freed below.
    unsafe {
        assert!(take_error(odek_client_new(opts.as_ptr(), &mut client)).is_none());
        let req = cstring(&request.to_string());
        let mut out: *mut c_char = null_mut();
        let r = match take_error(odek_resolve(client, req.as_ptr(), &mut out)) {
            Some(e) => Err(e),
            None => {
                let text = CStr::from_ptr(out).to_string_lossy().into_owned();
                odek_string_free(out);
                Ok(serde_json::from_str(&text).expect("a plan"))
            }
        };
        assert!(take_error(odek_client_free(client)).is_none());
        r
    }
}

#[test]
fn a_plain_c_caller_gets_a_required_sandbox() {
    let image = json!({"sandbox_image": "odek-test/base:1"});
    let plan = resolve(json!({"settings": image})).expect("resolves");
    assert_eq!(plan["mode"], "explicit", "{plan}");
    assert_eq!(plan["sources"]["sandbox"]["kind"], "api", "{plan}");

    let plan = resolve(json!({"settings": image, "allow_host_fallback": true})).expect("resolves");
    assert_eq!(plan["mode"], "implicit", "{plan}");

    let plan = resolve(json!({"settings": {"sandbox": false}})).expect("resolves");
    assert_eq!(plan["mode"], "off", "{plan}");

    let e = resolve(json!({"allow_host_fallback": "yes"})).expect_err("a boolean");
    assert_eq!(e.0, ODEK_E_INVALID_ARGUMENT as i32, "{e:?}");
    assert!(
        e.1.contains(
            "request_json has the wrong shape: invalid type: string \"yes\", expected a boolean"
        ),
        "{e:?}"
    );
}

#[test]
fn unknown_settings_keys_are_refused_by_name() {
    let e = resolve(json!({"settings": {"sandbox_pids_limt": 5, "sandbox": true, "zzz": 1}}))
        .expect_err("unknown keys");
    assert_eq!(e.0, ODEK_E_CONFIG as i32, "{e:?}");
    assert!(
        e.1.contains(
            "has unknown keys (refused, not ignored): unknown key \"sandbox_pids_limt\" (did you mean \"sandbox_pids_limit\"?); unknown key \"zzz\""
        ),
        "{e:?}"
    );
    // A type error in a known key is reported first, as in a config file.
    let e = resolve(json!({"settings": {"sandbox": "on", "zzz": 1}})).expect_err("a bool");
    assert!(e.1.contains("must be true or false"), "{e:?}");
    // Not an object: a shape error, as before.
    let e = resolve(json!({"settings": 5})).expect_err("an object");
    assert_eq!(e.0, ODEK_E_INVALID_ARGUMENT as i32, "{e:?}");
    assert!(
        e.1.contains("invalid type: integer `5`, expected a map"),
        "{e:?}"
    );
}
