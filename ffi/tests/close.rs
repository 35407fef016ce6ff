//! `odek_sandbox_close` through the C ABI with the fake engine: the
//! `odek.close-result/1` document names a hook written into the working
//! directory while the sandbox lived and nothing for `src/main.py`
//! (docs/SECURITY.md, "Files host tools run"); NULL is a no-op that writes
//! NULL; a NULL out-param leaves the handle alive; a closed handle is
//! `ODEK_E_INVALID_HANDLE`. Real Docker: the Python binding's e2e tier.
#![allow(unsafe_code)]

use std::ffi::{c_char, CStr, CString};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::ptr::null_mut;

use odek::*;
use serde_json::{json, Value};

mod common;
use common::take_error;

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

/// A fake client and a sandbox launched for `work` (ODEK_HOME in `home`).
fn launch(work: &Path, home: &Path) -> (*mut odek_client_t, *mut odek_sandbox_t) {
    let opts = cstring(r#"{"engine":"fake"}"#);
    let req = cstring(
        &json!({
            "workdir": work,
            "settings": {"sandbox_image": "odek-test/base:1"},
            "read_user_config": false,
            "env": {"HOME": home, "ODEK_HOME": home.join(".odek")},
        })
        .to_string(),
    );
    let mut client = null_mut();
    let mut sandbox = null_mut();
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
    }
    (client, sandbox)
}

fn close(sandbox: *mut odek_sandbox_t) -> Value {
    let mut out: *mut c_char = null_mut();
    // SAFETY: a live handle and a writable out-param.
    let e = unsafe { odek_sandbox_close(sandbox, &mut out) };
    assert_eq!(take_error(e), None);
    serde_json::from_str(&take_string(out)).expect("close result JSON")
}

#[test]
fn close_names_the_hook_written_while_the_sandbox_lived() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().canonicalize().expect("canonical");
    let work = root.join("work");
    std::fs::create_dir_all(work.join(".git/hooks")).expect("mkdir");
    std::fs::create_dir_all(work.join("src")).expect("mkdir");
    std::fs::write(work.join("src/main.py"), "print(1)\n").expect("write");
    let home = root.join("home");
    std::fs::create_dir_all(&home).expect("home");
    let (client, sandbox) = launch(&work, &home);

    let hook = work.join(".git/hooks/pre-commit");
    std::fs::write(&hook, "x").expect("write");
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::write(work.join("src/main.py"), "print(2)\n").expect("write");
    let result = close(sandbox);
    assert_eq!(result["schema"], "odek.close-result/1", "{result}");
    assert_eq!(
        result["changed_host_files"],
        json!([{"path": ".git/hooks/pre-commit", "change": "created, executable", "kinds": ["created"]}]),
        "{result}"
    );
    assert_eq!(result["host_files_unchecked"], Value::Null);
    assert_eq!(
        result["message"],
        "the sandbox changed files that host tools run: .git/hooks/pre-commit (created, executable) — review them before running git or make"
    );
    // The handle is gone.
    let mut out: *mut c_char = null_mut();
    // SAFETY: a closed handle is detected, not used.
    let e = unsafe { odek_sandbox_close(sandbox, &mut out) };
    assert_eq!(
        take_error(e).map(|e| e.0),
        Some(ODEK_E_INVALID_HANDLE as i32)
    );
    assert!(out.is_null());

    // Only src/main.py changed: an empty list, no message.
    let (client2, sandbox) = launch(&work, &home);
    std::fs::write(work.join("src/main.py"), "print(3)\n").expect("write");
    let result = close(sandbox);
    assert_eq!(result["changed_host_files"], json!([]), "{result}");
    assert_eq!(result["message"], Value::Null);

    // NULL sandbox: a no-op writing NULL; a NULL out-param: refused, the
    // handle kept (destroy still works).
    let mut out: *mut c_char = std::ptr::dangling_mut::<c_char>();
    // SAFETY: NULL handle, writable out-param.
    assert_eq!(
        take_error(unsafe { odek_sandbox_close(null_mut(), &mut out) }),
        None
    );
    assert!(out.is_null());
    let (client3, sandbox) = launch(&work, &home);
    // SAFETY: a live handle and a NULL out-param, which is refused.
    let e = unsafe { odek_sandbox_close(sandbox, null_mut()) };
    assert_eq!(take_error(e).map(|e| e.0), Some(ODEK_E_NULL_POINTER as i32));
    // SAFETY: the handle is still live; clients freed once.
    unsafe {
        assert_eq!(take_error(odek_sandbox_destroy(sandbox)), None);
        for c in [client, client2, client3] {
            assert_eq!(take_error(odek_client_free(c)), None);
        }
    }
}
