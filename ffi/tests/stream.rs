//! `odek_exec_stream` through the C ABI, without Docker: a `{"engine":"fake"}`
//! client with the sandbox off, so commands run on the host and really
//! print (SPEC §10.1 exec). Chunks reach the callback on the calling thread
//! while the command still runs, stdout and stderr apart; the result is
//! `odek_exec`'s; a blocking call from the callback is `ODEK_E_REENTRANT`
//! and does nothing; `odek_cancel` from the callback stops the command.
#![allow(unsafe_code)]

use std::ffi::{c_char, c_void, CStr, CString};
use std::path::{Path, PathBuf};
use std::ptr::{null, null_mut};

use odek::*;

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

/// A host "sandbox" (sandbox off) over the fake engine, in a fresh workdir.
struct Host {
    _dir: tempfile::TempDir,
    work: PathBuf,
    sandbox: *mut odek_sandbox_t,
}

impl Host {
    fn new() -> Host {
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
                "env": {"HOME": home.display().to_string(), "ODEK_HOME": home.display().to_string(),
                        "PATH": std::env::var("PATH").unwrap_or_default()},
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
        Host {
            _dir: dir,
            work,
            sandbox,
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.work.join(name)
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        // SAFETY: the handle from odek_launch, destroyed once.
        unsafe { take_error(odek_sandbox_destroy(self.sandbox)) };
    }
}

/// What the callback saw, and what it does on a chunk.
#[derive(Default)]
struct Seen {
    chunks: Vec<(i32, Vec<u8>)>,
    thread: Vec<std::thread::ThreadId>,
    /// Created when the first stdout chunk arrives (the command waits for it).
    go_file: Option<PathBuf>,
    /// The sandbox, for the reentrant calls made from the callback.
    sandbox: Option<*mut odek_sandbox_t>,
    reentrant: Vec<Option<(i32, String)>>,
    /// Cancelled from the callback at the first chunk.
    cancel: Option<*const odek_cancel_t>,
}

unsafe extern "C" fn on_output(user: *mut c_void, stream: i32, bytes: *const u8, len: usize) {
    // SAFETY: `user` is the &mut Seen given to odek_exec_stream, on this
    // same thread; `bytes` holds `len` bytes for this call.
    let seen = unsafe { &mut *(user as *mut Seen) };
    let chunk = unsafe { std::slice::from_raw_parts(bytes, len) }.to_vec();
    seen.thread.push(std::thread::current().id());
    seen.chunks.push((stream, chunk));
    if let Some(go) = seen.go_file.take() {
        std::fs::write(go, b"").expect("go file");
    }
    if let Some(s) = seen.sandbox.take() {
        let req = cstring(r#"{"argv":["true"]}"#);
        let mut out: *mut c_char = null_mut();
        // SAFETY: valid arguments; the call must refuse before using them.
        unsafe {
            seen.reentrant
                .push(take_error(odek_exec(s, req.as_ptr(), &mut out)));
            assert!(out.is_null());
            seen.reentrant.push(take_error(odek_sandbox_destroy(s)));
            let mut info: *mut c_char = null_mut();
            // A call that does not block works.
            assert_eq!(take_error(odek_sandbox_info(s, &mut info)), None);
            take_string(info);
        }
    }
    if let Some(k) = seen.cancel.take() {
        // SAFETY: a live cancel handle.
        assert_eq!(take_error(unsafe { odek_cancel(k) }), None);
    }
}

fn stream(
    host: &Host,
    request: &serde_json::Value,
    cancel: *const odek_cancel_t,
    seen: &mut Seen,
) -> Result<serde_json::Value, (i32, String)> {
    let req = cstring(&request.to_string());
    let mut out: *mut c_char = null_mut();
    // SAFETY: valid handle, strings and out-param; `seen` outlives the call.
    let e = unsafe {
        odek_exec_stream(
            host.sandbox,
            req.as_ptr(),
            cancel,
            Some(on_output),
            seen as *mut Seen as *mut c_void,
            &mut out,
        )
    };
    match take_error(e) {
        Some(err) => {
            assert!(out.is_null(), "no result on an error");
            Err(err)
        }
        None => Ok(serde_json::from_str(&take_string(out)).expect("result JSON")),
    }
}

fn text(seen: &Seen, stream: i32) -> String {
    let bytes: Vec<u8> = seen
        .chunks
        .iter()
        .filter(|(s, _)| *s == stream)
        .flat_map(|(_, b)| b.clone())
        .collect();
    String::from_utf8(bytes).expect("UTF-8")
}

#[test]
fn chunks_arrive_on_the_calling_thread_before_the_command_ends() {
    let host = Host::new();
    // The command prints `a`, then waits until the callback has seen it
    // (it creates `go`): were output held until the command ends, the
    // command would time out instead.
    let mut seen = Seen {
        go_file: Some(host.path("go")),
        ..Default::default()
    };
    let result = stream(
        &host,
        &serde_json::json!({
            "shell": "echo a; echo oops >&2; while [ ! -e go ]; do sleep 0.02; done; echo b; exit 3",
            "timeout_secs": 60.0,
        }),
        null(),
        &mut seen,
    )
    .expect("runs");
    assert_eq!(result["schema"], "odek.exec-result/1", "{result}");
    assert_eq!(result["timed_out"], false, "{result}");
    assert_eq!(result["exit_code"], 3, "{result}");
    assert_eq!(text(&seen, ODEK_STREAM_STDOUT), "a\nb\n");
    assert_eq!(text(&seen, ODEK_STREAM_STDERR), "oops\n");
    // The result is odek_exec's: the same output, apart.
    assert_eq!(result["stdout"], "a\nb\n");
    assert_eq!(result["stderr"], "oops\n");
    let me = std::thread::current().id();
    assert!(!seen.thread.is_empty());
    assert!(
        seen.thread.iter().all(|t| *t == me),
        "callback on another thread"
    );
}

#[test]
fn a_blocking_call_from_the_callback_is_reentrant_and_does_nothing() {
    let host = Host::new();
    let mut seen = Seen {
        sandbox: Some(host.sandbox),
        ..Default::default()
    };
    let result = stream(
        &host,
        &serde_json::json!({"shell": "echo a"}),
        null(),
        &mut seen,
    )
    .expect("runs");
    assert_eq!(result["exit_code"], 0);
    assert_eq!(seen.reentrant.len(), 2);
    for e in &seen.reentrant {
        let (code, message) = e.clone().expect("refused");
        assert_eq!(code, ODEK_E_REENTRANT as i32, "{message}");
        assert!(message.contains("odek_exec_stream returns"), "{message}");
    }
    // The destroy made from the callback kept the handle: it still runs.
    let mut again = Seen::default();
    let r = stream(
        &host,
        &serde_json::json!({"argv": ["true"]}),
        null(),
        &mut again,
    );
    assert_eq!(r.expect("the sandbox is still there")["exit_code"], 0);
}

#[test]
fn odek_cancel_from_the_callback_kills_the_command() {
    let host = Host::new();
    let k = odek_cancel_new();
    let mut seen = Seen {
        cancel: Some(k),
        ..Default::default()
    };
    let e = stream(
        &host,
        &serde_json::json!({"shell": "echo a; sleep 30; touch late"}),
        k,
        &mut seen,
    )
    .expect_err("cancelled");
    assert_eq!(e.0, ODEK_E_CANCELLED as i32, "{}", e.1);
    assert_eq!(text(&seen, ODEK_STREAM_STDOUT), "a\n");
    assert!(!host.path("late").exists());
    // SAFETY: the handle from odek_cancel_new, freed once.
    assert_eq!(take_error(unsafe { odek_cancel_free(k) }), None);
}

#[test]
fn refusals_run_nothing_and_never_call_back() {
    let host = Host::new();
    let touch = serde_json::json!({"shell": "touch ran"});
    let req = cstring(&touch.to_string());
    let mut out: *mut c_char = null_mut();
    let mut seen = Seen::default();
    let user = &mut seen as *mut Seen as *mut c_void;
    // SAFETY: each call gets one bad argument and must refuse before use.
    unsafe {
        let e = odek_exec_stream(host.sandbox, req.as_ptr(), null(), None, user, &mut out);
        assert_eq!(take_error(e).map(|e| e.0), Some(ODEK_E_NULL_POINTER as i32));
        let e = odek_exec_stream(
            host.sandbox,
            req.as_ptr(),
            null(),
            Some(on_output),
            user,
            null_mut(),
        );
        assert_eq!(take_error(e).map(|e| e.0), Some(ODEK_E_NULL_POINTER as i32));
        let e = odek_exec_stream(
            null(),
            req.as_ptr(),
            null(),
            Some(on_output),
            user,
            &mut out,
        );
        assert_eq!(take_error(e).map(|e| e.0), Some(ODEK_E_NULL_POINTER as i32));
        let bad = cstring(r#"{"shell": "touch ran", "argv": ["touch", "ran"]}"#);
        let e = odek_exec_stream(
            host.sandbox,
            bad.as_ptr(),
            null(),
            Some(on_output),
            user,
            &mut out,
        );
        assert_eq!(
            take_error(e).map(|e| e.0),
            Some(ODEK_E_INVALID_ARGUMENT as i32)
        );
        let k = odek_cancel_new();
        assert_eq!(take_error(odek_cancel(k)), None);
        let e = odek_exec_stream(
            host.sandbox,
            req.as_ptr(),
            k,
            Some(on_output),
            user,
            &mut out,
        );
        assert_eq!(take_error(e).map(|e| e.0), Some(ODEK_E_CANCELLED as i32));
        assert_eq!(take_error(odek_cancel_free(k)), None);
    }
    assert!(out.is_null());
    assert!(seen.chunks.is_empty());
    assert!(!Path::new(&host.path("ran")).exists(), "nothing ran");
    // Positive control: the same request runs.
    let r = stream(&host, &touch, null(), &mut seen).expect("runs");
    assert_eq!(r["exit_code"], 0);
    assert!(host.path("ran").exists());
}

/// `odek_exec_stream_stdin` on the host: stdin is served by odek's
/// supervisor only, so the call is refused (`ODEK_E_EXEC`) and nothing runs
/// (the marker file is not created); the handle's own rules hold: writes
/// after close are refused, a handle is used by one exec only, NULLs are
/// refused, free is once.
#[test]
fn stdin_on_the_host_is_refused_before_anything_runs_and_the_handle_keeps_its_rules() {
    let host = Host::new();
    // SAFETY: handles from odek_stdin_new; valid byte slices.
    unsafe {
        let h = odek_stdin_new();
        assert!(!h.is_null());
        assert_eq!(take_error(odek_stdin_write(h, b"abc".as_ptr(), 3)), None);
        assert_eq!(take_error(odek_stdin_write(h, null(), 0)), None);
        let req =
            cstring(&serde_json::json!({"shell": "cat > ran", "timeout_secs": 30.0}).to_string());
        let mut out: *mut c_char = null_mut();
        let e = odek_exec_stream_stdin(
            host.sandbox,
            req.as_ptr(),
            null(),
            h,
            None,
            null_mut(),
            &mut out,
        );
        let (code, message) = take_error(e).expect("refused");
        assert_eq!(code, ODEK_E_EXEC as i32, "{message}");
        assert!(message.contains("supervisor"), "{message}");
        assert!(out.is_null());
        assert!(!host.path("ran").exists(), "the command ran");
        // The handle was taken by that call: another exec is refused.
        let e = odek_exec_stream_stdin(
            host.sandbox,
            req.as_ptr(),
            null(),
            h,
            None,
            null_mut(),
            &mut out,
        );
        assert_eq!(
            take_error(e).map(|e| e.0),
            Some(ODEK_E_INVALID_ARGUMENT as i32)
        );
        // After the exec (or a close), writes are refused; close is
        // idempotent.
        let (code, m) = take_error(odek_stdin_write(h, b"x".as_ptr(), 1)).expect("closed");
        assert_eq!(code, ODEK_E_INVALID_ARGUMENT as i32, "{m}");
        assert_eq!(take_error(odek_stdin_close(h)), None);
        assert_eq!(take_error(odek_stdin_close(h)), None);
        // NULLs.
        let e = odek_exec_stream_stdin(
            host.sandbox,
            req.as_ptr(),
            null(),
            null(),
            None,
            null_mut(),
            &mut out,
        );
        assert_eq!(take_error(e).map(|e| e.0), Some(ODEK_E_NULL_POINTER as i32));
        assert_eq!(
            take_error(odek_stdin_write(null(), b"x".as_ptr(), 1)).map(|e| e.0),
            Some(ODEK_E_NULL_POINTER as i32)
        );
        let fresh = odek_stdin_new();
        assert_eq!(
            take_error(odek_stdin_write(fresh, null(), 1)).map(|e| e.0),
            Some(ODEK_E_NULL_POINTER as i32)
        );
        assert_eq!(take_error(odek_stdin_close(fresh)), None);
        assert_eq!(
            take_error(odek_stdin_write(fresh, b"x".as_ptr(), 1)).map(|e| e.0),
            Some(ODEK_E_INVALID_ARGUMENT as i32)
        );
        assert_eq!(take_error(odek_stdin_free(fresh)), None);
        assert_eq!(take_error(odek_stdin_free(h)), None);
        assert_eq!(
            take_error(odek_stdin_free(h)).map(|e| e.0),
            Some(ODEK_E_INVALID_HANDLE as i32)
        );
        assert_eq!(take_error(odek_stdin_free(null_mut())), None);
    }
}
