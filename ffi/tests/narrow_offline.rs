//! `odek_narrow` with `{"network_mode": "none"}` of a Compose-attached parent
//! gives an offline child through the C ABI (SPEC §8: no narrowing knob is a
//! silent no-op): the child plan has network mode `none`, no network, no
//! internet, and the sandbox launched from it is described the same way —
//! for a parent whose own mode is `none` and one whose mode is `bridge`.
//! Called directly as the `extern "C"` functions of the `odek` rlib with a
//! `{"engine":"fake"}` client (image `odek-test/base:1`, Compose project
//! `shop`).
#![allow(unsafe_code)]

use std::ffi::c_char;
use std::ptr::null_mut;

use odek::*;
use serde_json::{json, Value};

mod common;
use common::{cstring, take_error, take_string, TempProject};

/// Calls a function writing one string out-param; the string, or a panic
/// naming the error.
fn string_call(what: &str, f: impl FnOnce(*mut *mut c_char) -> *mut odek_error_t) -> String {
    let mut out = null_mut();
    if let Some(e) = take_error(f(&mut out)) {
        panic!("{what}: {e:?}");
    }
    take_string(out)
}

#[test]
fn narrow_none_of_a_compose_attached_parent_is_offline() {
    let opts = cstring(r#"{"engine": "fake"}"#);
    let mut client = null_mut();
    // SAFETY: valid string and out-param.
    let e = unsafe { odek_client_new(opts.as_ptr(), &mut client) };
    assert_eq!(take_error(e), None);
    for parent_mode in ["none", "bridge"] {
        let p = TempProject::new("narrow-offline");
        let request = json!({
            "workdir": p.root.join("work"),
            "settings": {
                "sandbox_compose_project": "shop",
                "sandbox_image": "odek-test/base:1",
                "sandbox_network": parent_mode,
            },
            "env": {
                "HOME": p.root.join("home"),
                "ODEK_HOME": p.root.join("home/.odek"),
            },
        })
        .to_string();
        let req = cstring(&request);
        // SAFETY: valid client, string and out-param.
        let plan = string_call("resolve", |out| unsafe {
            odek_resolve(client, req.as_ptr(), out)
        });
        let parent: Value = serde_json::from_str(&plan).expect("plan JSON");
        // The premise: the parent is attached to the Compose networks.
        assert_eq!(parent["network_mode"], parent_mode, "{parent}");
        assert!(
            parent["networks"].as_array().is_some_and(|n| !n.is_empty()),
            "{parent_mode}: the parent has the project's networks: {parent}"
        );

        let (cplan, creq) = (cstring(&plan), cstring(r#"{"network_mode": "none"}"#));
        // SAFETY: NUL-terminated strings, writable out.
        let child = string_call("narrow", |out| unsafe {
            odek_narrow(cplan.as_ptr(), creq.as_ptr(), out)
        });
        let child: Value = serde_json::from_str(&child).expect("child JSON");
        assert_eq!(child["network_mode"], "none", "{parent_mode}: {child}");
        assert_eq!(
            child["networks"],
            json!([]),
            "{parent_mode}: the child keeps none of the parent's networks"
        );
        assert_eq!(child["internet"], false, "{parent_mode}");
        assert!(child["bridge_network_id"].is_null(), "{parent_mode}");

        // The sandbox launched from it: no network in its description.
        let (cplan, approval) = (cstring(&child.to_string()), cstring("null"));
        let mut sb = null_mut();
        // SAFETY: valid client, NUL-terminated strings, writable out.
        let e = unsafe { odek_launch(client, cplan.as_ptr(), approval.as_ptr(), &mut sb) };
        assert_eq!(take_error(e), None, "{parent_mode}: launch the child");
        let (mut env, mut prompt, mut tool) = (null_mut(), null_mut(), null_mut());
        // SAFETY: valid sandbox handle, writable outs.
        let e = unsafe { odek_describe(sb, &mut env, &mut prompt, &mut tool) };
        assert_eq!(take_error(e), None, "{parent_mode}: describe");
        let (env, _, _) = (take_string(env), take_string(prompt), take_string(tool));
        let env: Value = serde_json::from_str(&env).expect("environment JSON");
        assert_eq!(env["networks"], json!([]), "{parent_mode}: {env}");
        assert_eq!(env["internet"], false, "{parent_mode}: {env}");
        // SAFETY: a handle from odek_launch, destroyed once.
        assert_eq!(take_error(unsafe { odek_sandbox_destroy(sb) }), None);
    }
    // SAFETY: the client from odek_client_new, freed once.
    assert_eq!(take_error(unsafe { odek_client_free(client) }), None);
}
