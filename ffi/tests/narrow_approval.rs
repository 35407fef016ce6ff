//! A narrowed plan keeps its parent's approval request through the C ABI
//! (SPEC §7, §8): with a project `odek.json` asking for a Compose project, an
//! image and an env template reading a host variable, `odek_launch` of
//! `odek_narrow(plan, {"pids_limit": 100})` with approval `"null"` is
//! `ODEK_E_APPROVAL_REQUIRED` with no sandbox handle written, exactly as for
//! the parent; the parent's approval launches the child. Called directly as
//! the `extern "C"` functions of the `odek` rlib with a `{"engine":"fake"}`
//! client (image `odek-test/base:1`, Compose project `shop`).
#![allow(unsafe_code)]

use std::ffi::c_char;
use std::ptr::null_mut;

use odek::*;
use serde_json::{json, Value};

mod common;
use common::{cstring, take_error, take_string, TempProject};

/// Calls a function writing one string out-param; the string or the error.
fn string_call(
    f: impl FnOnce(*mut *mut c_char) -> *mut odek_error_t,
) -> Result<String, (i32, String)> {
    let mut out = null_mut();
    match take_error(f(&mut out)) {
        None => Ok(take_string(out)),
        Some(e) => {
            assert!(out.is_null(), "out-param written on failure");
            Err(e)
        }
    }
}

/// Launches; the handle or the error (the out-param must stay NULL then).
fn launch(
    client: *const odek_client_t,
    plan: &str,
    approval: &str,
) -> Result<*mut odek_sandbox_t, (i32, String)> {
    let (plan, approval) = (cstring(plan), cstring(approval));
    let mut sb = null_mut();
    // SAFETY: valid client, NUL-terminated strings, writable out.
    let e = unsafe { odek_launch(client, plan.as_ptr(), approval.as_ptr(), &mut sb) };
    match take_error(e) {
        None => Ok(sb),
        Some(err) => {
            assert!(sb.is_null(), "a sandbox handle was written on failure");
            Err(err)
        }
    }
}

#[test]
fn launching_a_narrowed_plan_needs_the_parents_approval() {
    let p = TempProject::new("narrow-approval");
    let work = p.root.join("work");
    std::fs::write(
        work.join("odek.json"),
        json!({
            "sandbox_compose_project": "shop",
            "sandbox_image": "odek-test/base:1",
            "sandbox_env": {"TOKEN": "${SECRET_TOKEN}"},
        })
        .to_string(),
    )
    .expect("odek.json");
    let opts = cstring(r#"{"engine": "fake"}"#);
    let mut client = null_mut();
    // SAFETY: valid string and out-param.
    let e = unsafe { odek_client_new(opts.as_ptr(), &mut client) };
    assert_eq!(take_error(e), None);
    let request = json!({
        "workdir": work,
        "env": {
            "HOME": p.root.join("home"),
            "ODEK_HOME": p.root.join("home/.odek"),
            "SECRET_TOKEN": "from-the-host",
        },
    })
    .to_string();
    let req = cstring(&request);
    // SAFETY: valid client, string and out-param.
    let plan =
        string_call(|out| unsafe { odek_resolve(client, req.as_ptr(), out) }).expect("resolve");
    let parent: Value = serde_json::from_str(&plan).expect("plan JSON");
    assert!(
        !parent["approval"].is_null(),
        "the project asks for approval"
    );

    // The parent itself is refused without an approval …
    let err = launch(client, &plan, "null").expect_err("parent needs approval");
    assert_eq!(err.0, ODEK_E_APPROVAL_REQUIRED as i32, "{err:?}");

    // … and so is its narrowed child: same request, nothing launched.
    let (cplan, creq) = (cstring(&plan), cstring(r#"{"pids_limit": 100}"#));
    // SAFETY: NUL-terminated strings, writable out.
    let child = string_call(|out| unsafe { odek_narrow(cplan.as_ptr(), creq.as_ptr(), out) })
        .expect("narrow");
    let err = launch(client, &child, "null").expect_err("child needs approval");
    assert_eq!(err.0, ODEK_E_APPROVAL_REQUIRED as i32, "{err:?}");
    assert!(err.1.contains("odek.json"), "{err:?}");
    let child_v: Value = serde_json::from_str(&child).expect("child JSON");
    assert_eq!(child_v["pids_limit"], 100);
    assert_eq!(
        child_v["approval"], parent["approval"],
        "the child carries the parent's approval request"
    );

    // The approval the operator gave for the parent launches the child.
    let once = cstring("once");
    // SAFETY: valid client, NUL-terminated strings, writable out.
    let approval =
        string_call(|out| unsafe { odek_approve(client, cplan.as_ptr(), once.as_ptr(), out) })
            .expect("approve");
    let sb = launch(client, &child, &approval).expect("launch with the parent's approval");
    // SAFETY: valid sandbox handle and out-param.
    let info = string_call(|out| unsafe { odek_sandbox_info(sb, out) }).expect("info");
    let info: Value = serde_json::from_str(&info).expect("info JSON");
    assert_eq!(info["isolation"]["kind"], "container", "{info}");
    assert_eq!(info["plan"]["pids_limit"], 100);
    // SAFETY: a handle from odek_launch, destroyed once.
    assert_eq!(take_error(unsafe { odek_sandbox_destroy(sb) }), None);
    // SAFETY: the client from odek_client_new, freed once.
    assert_eq!(take_error(unsafe { odek_client_free(client) }), None);
}
