//! The cancel handle through the C ABI (SPEC §10.1): `odek_cancel_new`,
//! `odek_cancel`, `odek_cancel_free` and the `_cancellable` entry points on a
//! `{"engine":"fake"}` client. A cancelled handle makes a call fail with
//! `ODEK_E_CANCELLED` (class `cancelled`) and write no out-param; a freed or
//! foreign handle is `ODEK_E_INVALID_HANDLE`; NULL means "not cancellable".
#![allow(unsafe_code)]

use std::ffi::{c_char, CStr, CString};
use std::ptr::{null, null_mut};

use odek::*;

mod common;
use common::take_error_with_class as take_error;

fn cstring(s: &str) -> CString {
    CString::new(s).expect("no NUL")
}

fn take_string(s: *mut c_char) -> String {
    assert!(!s.is_null());
    // SAFETY: a string returned by odek; freed once.
    unsafe {
        let out = CStr::from_ptr(s).to_string_lossy().into_owned();
        odek_string_free(s);
        out
    }
}

#[test]
fn a_cancelled_handle_stops_calls_and_a_null_one_does_not() {
    let dir = tempfile::tempdir().expect("tempdir");
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).expect("workdir");
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).expect("home");
    let req = cstring(
        &serde_json::json!({
            "workdir": work.canonicalize().expect("canonical"),
            "settings": {"sandbox_image": "odek-test/base:1", "sandbox_network": "none"},
            "read_user_config": false,
            "env": {"HOME": home.display().to_string(), "ODEK_HOME": home.display().to_string()},
        })
        .to_string(),
    );
    let opts = cstring(r#"{"engine":"fake"}"#);
    let mut client: *mut odek_client_t = null_mut();
    // SAFETY: valid C strings and out-params throughout; handles from odek.
    unsafe {
        assert_eq!(
            take_error(odek_client_new(opts.as_ptr(), &mut client)),
            None
        );
        let token = odek_cancel_new();
        assert!(!token.is_null());

        // Not cancelled yet: the call runs.
        let mut plan: *mut c_char = null_mut();
        let e = odek_resolve_cancellable(client, req.as_ptr(), token, &mut plan);
        assert_eq!(take_error(e), None);
        let plan = cstring(&take_string(plan));

        // Cancelled: every call given it fails at once, nothing written.
        assert_eq!(take_error(odek_cancel(token)), None);
        assert_eq!(take_error(odek_cancel(token)), None, "idempotent");
        let mut sb: *mut odek_sandbox_t = null_mut();
        let null_json = cstring("null");
        let e = odek_launch_cancellable(client, plan.as_ptr(), null_json.as_ptr(), token, &mut sb);
        let (code, class, message) = take_error(e).expect("cancelled");
        assert_eq!(code, ODEK_E_CANCELLED as i32, "{message}");
        assert_eq!(class, "cancelled");
        assert!(message.contains("cancelled by the caller"), "{message}");
        assert!(sb.is_null(), "no handle written");
        let mut out: *mut c_char = null_mut();
        let e = odek_resolve_cancellable(client, req.as_ptr(), token, &mut out);
        assert_eq!(take_error(e).map(|e| e.0), Some(ODEK_E_CANCELLED as i32));
        assert!(out.is_null());

        // NULL: not cancellable; the plain form is the same call.
        let e = odek_launch_cancellable(client, plan.as_ptr(), null_json.as_ptr(), null(), &mut sb);
        assert_eq!(take_error(e), None);
        let exec = cstring(r#"{"argv":["true"]}"#);
        let e = odek_exec_cancellable(sb, exec.as_ptr(), token, &mut out);
        assert_eq!(take_error(e).map(|e| e.0), Some(ODEK_E_CANCELLED as i32));
        let e = odek_exec_cancellable(sb, exec.as_ptr(), null(), &mut out);
        assert_eq!(take_error(e), None);
        take_string(out);
        assert_eq!(take_error(odek_sandbox_destroy(sb)), None);

        // Freed: unknown from then on; NULL free is a no-op.
        assert_eq!(take_error(odek_cancel_free(token)), None);
        let e = odek_cancel(token);
        assert_eq!(
            take_error(e).map(|e| e.0),
            Some(ODEK_E_INVALID_HANDLE as i32)
        );
        let e = odek_cancel_free(token);
        assert_eq!(
            take_error(e).map(|e| e.0),
            Some(ODEK_E_INVALID_HANDLE as i32)
        );
        let e = odek_resolve_cancellable(client, req.as_ptr(), token, &mut out);
        assert_eq!(
            take_error(e).map(|e| e.0),
            Some(ODEK_E_INVALID_HANDLE as i32)
        );
        assert_eq!(take_error(odek_cancel_free(null_mut())), None);
        let e = odek_cancel(null());
        assert_eq!(take_error(e).map(|e| e.0), Some(ODEK_E_NULL_POINTER as i32));
        // A client handle is not a cancel handle.
        let e = odek_cancel(client.cast());
        assert_eq!(
            take_error(e).map(|e| e.0),
            Some(ODEK_E_INVALID_HANDLE as i32)
        );
        assert_eq!(take_error(odek_client_free(client)), None);
    }
}
