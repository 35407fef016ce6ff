//! The C ABI in a process forked from the one that uses it (SPEC §10.1): a
//! child made by `fork()` (no exec) gets `ODEK_E_FORKED` (class `usage`) at
//! once from every call that would use libodek's state, the parent's
//! handles stay as they were, and the parent's next calls work. The calls
//! that use no state (narrow, error objects, strings) still work in the
//! child. On a `{"engine":"fake"}` client; the owner links a child closes
//! are shown against real Docker (bindings/python/tests/test_fork.py).
#![allow(unsafe_code)]

use std::ffi::{c_char, CStr, CString};
use std::ptr::null_mut;
use std::time::{Duration, Instant};

use odek::*;

mod common;
use common::take_error_with_class;

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

/// What the child saw of one call: its code (0: success), whether the
/// class was `usage` and whether the message named the parent's pid and
/// the fix.
fn outcome(e: *mut odek_error_t, parent: u32) -> [i32; 2] {
    match take_error_with_class(e) {
        None => [0, 1],
        Some((code, class, message)) => {
            let good = class == "usage"
                && message.contains(&format!("forked from process {parent}"))
                && message.contains("'spawn'")
                && message.contains("Nothing was done");
            [code, i32::from(good)]
        }
    }
}

/// Reads the child's report: `n` pairs of `i32`, within `deadline`; kills
/// the child and fails when it has not finished by then.
fn read_report(fd: i32, pid: i32, n: usize, deadline: Duration) -> Vec<[i32; 2]> {
    let mut bytes = Vec::new();
    let end = Instant::now() + deadline;
    loop {
        let left = end.saturating_duration_since(Instant::now());
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let ready = unsafe { libc::poll(&mut p, 1, left.as_millis() as i32) };
        if ready <= 0 {
            // SAFETY: our own child.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, null_mut(), 0);
            }
            panic!(
                "the forked child did not finish its calls within {deadline:?} ({} of {n} reported)",
                bytes.len() / 8
            );
        }
        let mut buf = [0u8; 256];
        // SAFETY: reading into a local buffer.
        let got = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if got <= 0 {
            break;
        }
        bytes.extend_from_slice(&buf[..got as usize]);
    }
    let mut status = 0;
    // SAFETY: our own child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "child status {status}"
    );
    let words: Vec<i32> = bytes
        .chunks_exact(4)
        .map(|c| i32::from_ne_bytes(c.try_into().expect("4 bytes")))
        .collect();
    assert_eq!(words.len(), 2 * n, "the child reported {words:?}");
    words.chunks_exact(2).map(|c| [c[0], c[1]]).collect()
}

#[test]
fn a_forked_child_is_refused_and_the_parent_keeps_working() {
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
    let exec = cstring(r#"{"argv":["true"]}"#);
    let null_json = cstring("null");
    let narrow_req = cstring(r#"{"schema":"odek.narrow-request/1","pids_limit":16}"#);
    let parent = std::process::id();
    let mut client: *mut odek_client_t = null_mut();
    // SAFETY: valid C strings and out-params throughout; handles from odek;
    // the child makes only odek calls, allocations and raw writes, then
    // _exits.
    unsafe {
        assert_eq!(
            take_error_with_class(odek_client_new(opts.as_ptr(), &mut client)),
            None
        );
        let mut plan: *mut c_char = null_mut();
        let e = odek_resolve(client, req.as_ptr(), &mut plan);
        assert_eq!(take_error_with_class(e), None);
        let plan = cstring(&take_string(plan));
        let mut sb: *mut odek_sandbox_t = null_mut();
        let e = odek_launch(client, plan.as_ptr(), null_json.as_ptr(), &mut sb);
        assert_eq!(take_error_with_class(e), None);
        let token = odek_cancel_new();
        assert!(!token.is_null());
        let mut out: *mut c_char = null_mut();
        assert_eq!(
            take_error_with_class(odek_exec(sb, exec.as_ptr(), &mut out)),
            None
        );
        take_string(out);

        let mut fds = [0i32; 2];
        assert_eq!(libc::pipe(fds.as_mut_ptr()), 0);
        let pid = libc::fork();
        assert!(pid >= 0, "fork");
        if pid == 0 {
            libc::close(fds[0]);
            let mut out: *mut c_char = null_mut();
            let mut c2: *mut odek_client_t = null_mut();
            let mut sb2: *mut odek_sandbox_t = null_mut();
            let (mut e1, mut e2, mut e3) = (null_mut(), null_mut(), null_mut());
            let mut report = vec![
                outcome(odek_exec(sb, exec.as_ptr(), &mut out), parent),
                outcome(
                    odek_exec_cancellable(sb, exec.as_ptr(), token, &mut out),
                    parent,
                ),
                outcome(odek_describe(sb, &mut e1, &mut e2, &mut e3), parent),
                outcome(odek_sandbox_info(sb, &mut out), parent),
                outcome(odek_resolve(client, req.as_ptr(), &mut out), parent),
                outcome(odek_config_view(client, plan.as_ptr(), &mut out), parent),
                outcome(
                    odek_approve(client, plan.as_ptr(), c"once".as_ptr(), &mut out),
                    parent,
                ),
                outcome(
                    odek_launch(client, plan.as_ptr(), null_json.as_ptr(), &mut sb2),
                    parent,
                ),
                outcome(odek_client_new(opts.as_ptr(), &mut c2), parent),
                outcome(odek_cancel(token), parent),
                outcome(odek_cancel_free(token), parent),
                outcome(odek_sandbox_destroy(sb), parent),
                outcome(odek_client_free(client), parent),
            ];
            // No handle was written; a cancel handle cannot be made.
            let unwritten = out.is_null() && c2.is_null() && sb2.is_null() && e1.is_null();
            report.push([i32::from(unwritten), i32::from(odek_cancel_new().is_null())]);
            // The calls that use no state work: narrow, NULL frees.
            let e = odek_narrow(plan.as_ptr(), narrow_req.as_ptr(), &mut out);
            let narrowed = e.is_null() && !out.is_null();
            odek_error_free(e);
            odek_string_free(out);
            report.push([i32::from(narrowed), 1]);
            report.push(outcome(odek_sandbox_destroy(null_mut()), parent));
            let bytes: Vec<u8> = report
                .iter()
                .flatten()
                .flat_map(|w| w.to_ne_bytes())
                .collect();
            libc::write(fds[1], bytes.as_ptr().cast(), bytes.len());
            libc::_exit(0);
        }
        libc::close(fds[1]);
        let report = read_report(fds[0], pid, 16, Duration::from_secs(10));
        libc::close(fds[0]);
        let forked = ODEK_E_FORKED as i32;
        for (i, [code, good]) in report[..13].iter().enumerate() {
            assert_eq!(
                (*code, *good),
                (forked, 1),
                "call {i} in the child: {report:?}"
            );
        }
        assert_eq!(
            report[13],
            [1, 1],
            "handles written or a cancel handle made in the child"
        );
        assert_eq!(report[14], [1, 1], "narrow failed in the child");
        assert_eq!(report[15], [0, 1], "NULL destroy is a no-op in the child");

        // The parent's handles are untouched, and its calls work.
        let e = odek_exec_cancellable(sb, exec.as_ptr(), token, &mut out);
        assert_eq!(take_error_with_class(e), None);
        take_string(out);
        assert_eq!(take_error_with_class(odek_cancel_free(token)), None);
        assert_eq!(take_error_with_class(odek_sandbox_destroy(sb)), None);
        assert_eq!(take_error_with_class(odek_client_free(client)), None);
        let e = odek_exec(sb, exec.as_ptr(), &mut out);
        assert_eq!(
            take_error_with_class(e).map(|e| e.0),
            Some(ODEK_E_INVALID_HANDLE as i32)
        );
    }
}
