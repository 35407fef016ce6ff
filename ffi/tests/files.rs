//! The file entry points through the C ABI, without Docker
//! (`{"engine":"fake"}`, the sandbox off): a sandbox whose commands run on
//! the host has no supervisor to act as its command user, so every file
//! call is `ODEK_E_FILE` (class `config`), naming why, and nothing is
//! written; a request of the wrong shape is `ODEK_E_INVALID_ARGUMENT`; a
//! NULL out-param is `ODEK_E_NULL_POINTER`. The real-Docker behaviour is
//! tested through the bindings (Python, Go) and tests/e2e/tests/files.rs.
#![allow(unsafe_code)]

use std::ffi::{c_char, CStr, CString};
use std::ptr::{null, null_mut};

use odek::*;

mod common;
use common::{take_error, take_error_with_class};

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

type FileCall = unsafe extern "C" fn(
    *const odek_sandbox_t,
    *const c_char,
    *const odek_cancel_t,
    *mut *mut c_char,
) -> *mut odek_error_t;

#[test]
fn file_calls_on_a_host_sandbox_are_refused_and_write_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).expect("workdir");
    let work = work.canonicalize().expect("canonical");
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).expect("home");
    let req = cstring(
        &serde_json::json!({
            "workdir": work,
            "settings": {"sandbox": false},
            "read_user_config": false,
            "env": {"HOME": home.display().to_string(), "ODEK_HOME": home.display().to_string()},
        })
        .to_string(),
    );
    let opts = cstring(r#"{"engine":"fake"}"#);
    let mut client: *mut odek_client_t = null_mut();
    let mut sandbox: *mut odek_sandbox_t = null_mut();
    // SAFETY: valid C strings and out-params; handles from odek.
    unsafe {
        assert_eq!(
            take_error(odek_client_new(opts.as_ptr(), &mut client)),
            None
        );
        let mut plan: *mut c_char = null_mut();
        assert_eq!(
            take_error(odek_resolve(client, req.as_ptr(), &mut plan)),
            None
        );
        let plan = cstring(&take_string(plan));
        let null_json = cstring("null");
        let e = odek_launch(client, plan.as_ptr(), null_json.as_ptr(), &mut sandbox);
        assert_eq!(take_error(e), None);
        assert_eq!(take_error(odek_client_free(client)), None);
    }
    std::fs::write(work.join("there.txt"), "x").expect("write");
    let calls: [(&str, FileCall, serde_json::Value); 4] = [
        (
            "read",
            odek_read_file,
            serde_json::json!({"path": "there.txt"}),
        ),
        (
            "write",
            odek_write_file,
            serde_json::json!({"schema": "odek.write-file-request/1", "path": "made.txt", "content": "x"}),
        ),
        (
            "edit",
            odek_edit_file,
            serde_json::json!({"path": "there.txt", "edits": [{"oldText": "x", "newText": "y"}]}),
        ),
        (
            "list",
            odek_list_directory,
            serde_json::json!({"path": "."}),
        ),
    ];
    for (name, call, request) in calls {
        let request = cstring(&request.to_string());
        let mut out: *mut c_char = null_mut();
        // SAFETY: a live sandbox handle, a C string, a writable out-param.
        let e = unsafe { call(sandbox, request.as_ptr(), null(), &mut out) };
        let (code, class, message) = take_error_with_class(e).expect("refused");
        assert_eq!(code, ODEK_E_FILE as i32, "{name}: {message}");
        assert_eq!(class, "config", "{name}");
        assert!(message.contains("on the host"), "{name}: {message}");
        assert!(out.is_null(), "{name}: a result was written");
        // A request of the wrong shape, and a NULL out-param.
        let bad = cstring(r#"{"path": "a", "nope": 1}"#);
        // SAFETY: as above.
        let e = unsafe { call(sandbox, bad.as_ptr(), null(), &mut out) };
        assert_eq!(
            take_error(e).map(|(c, _)| c),
            Some(ODEK_E_INVALID_ARGUMENT as i32),
            "{name}"
        );
        // SAFETY: as above; the out-param is NULL on purpose.
        let e = unsafe { call(sandbox, request.as_ptr(), null(), null_mut()) };
        assert_eq!(
            take_error(e).map(|(c, _)| c),
            Some(ODEK_E_NULL_POINTER as i32),
            "{name}"
        );
    }
    assert!(!work.join("made.txt").exists());
    assert_eq!(
        std::fs::read_to_string(work.join("there.txt")).expect("read"),
        "x"
    );
    // SAFETY: the handle from odek_launch, destroyed once.
    unsafe { assert_eq!(take_error(odek_sandbox_destroy(sandbox)), None) };
}
