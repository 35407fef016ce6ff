//! Streaming exec (SPEC §10.1 exec): `odek_exec_stream` hands each chunk
//! of a command's output to a caller's callback as it arrives, then returns
//! the same result as `odek_exec`.
//!
//! The callback runs on the thread that called `odek_exec_stream`, inside
//! the call (the core's output sink is called from the exec's own future,
//! which that thread drives with `block_on`). While it runs, that thread is
//! inside the library's runtime: a blocking call from it would panic or
//! wait for itself, so [`check_not_in_callback`] refuses it with
//! `ODEK_E_REENTRANT` before anything is done.
//!
//! Stdin: `odek_exec_stream` has none (its parameters stay as ABI 1
//! published them); `odek_exec_stream_stdin`, an addition within ABI 1,
//! takes a stdin handle (`odek_stdin_new`) whose bytes the caller writes
//! with `odek_stdin_write` — from another thread, or from the output
//! callback, neither blocks — and ends with `odek_stdin_close`. Stdin is
//! served by odek's supervisor only (as the CLI's `-i`): in a sandbox
//! without it, or on the host, the call is refused before anything runs.

use std::cell::Cell;
use std::ffi::{c_char, c_void};

use odek_core::api;
use odek_core::engine::StreamKind;
use odek_core::ExecOptions;

use crate::boundary::{guard_state, json_arg, out_arg, write_json};
use crate::error::{odek_error_t, Code, Failure};
use crate::handles::{self, odek_cancel_t, odek_sandbox_t, odek_stdin_t};

/// `stream` of an `odek_output_fn` call: the command's standard output.
pub const ODEK_STREAM_STDOUT: i32 = 1;

/// `stream` of an `odek_output_fn` call: the command's standard error
/// (odek's own notes about the command, such as a kill it could not
/// confirm, arrive on this stream too, as in `odek_exec`'s `stderr`).
pub const ODEK_STREAM_STDERR: i32 = 2;

/// Receives one chunk of a command's output during `odek_exec_stream`:
/// `stream` is `ODEK_STREAM_STDOUT` or `ODEK_STREAM_STDERR`, `bytes` the
/// chunk's `len` bytes (raw, not NUL-terminated, `len` > 0), borrowed for
/// the callback only (copy what you keep). `user_data` is the pointer given
/// to `odek_exec_stream`, passed through untouched.
///
/// Called on the thread that called `odek_exec_stream`, before it returns,
/// one chunk at a time, in the order the output arrived (each stream's
/// bytes in order; how the two streams interleave is the order odek read
/// them). Chunks are as odek received them: a line may be split across
/// chunks, a chunk may hold several lines.
///
/// The callback must return, and should return promptly: while it runs
/// odek reads no more output (the command blocks once its pipe is full)
/// and acts on neither the timeout nor a cancel. It must not unwind (no
/// C++ exception, no longjmp) out of the call. It may call the functions
/// that do not block — `odek_cancel` (to stop the command: the call then
/// returns `ODEK_E_CANCELLED`), `odek_cancel_new`, `odek_sandbox_info`,
/// `odek_narrow`, `odek_plan_approval_request`, the string and error
/// functions; a blocking one (resolve, launch, describe, exec, config view,
/// destroy) called from the callback's thread returns `ODEK_E_REENTRANT`
/// and does nothing.
#[allow(non_camel_case_types)]
pub type odek_output_fn =
    Option<unsafe extern "C" fn(user_data: *mut c_void, stream: i32, bytes: *const u8, len: usize)>;

thread_local! {
    /// True on a thread while it runs an output callback.
    static IN_CALLBACK: Cell<bool> = const { Cell::new(false) };
}

/// `ODEK_E_REENTRANT` on a thread running an output callback.
pub(crate) fn check_not_in_callback() -> Result<(), Failure> {
    if IN_CALLBACK.with(Cell::get) {
        return Err(Failure::new(
            Code::ODEK_E_REENTRANT,
            "a blocking odek call was made from inside an odek_exec_stream output callback, \
             on the thread running it, and was not carried out: make it after \
             odek_exec_stream returns, or from another thread (odek_cancel, which does \
             not block, may be called from the callback)",
        ));
    }
    Ok(())
}

/// Marks the current thread as running a callback until dropped (restores
/// the previous state, so the mark survives nothing it should not).
struct InCallback(bool);

impl InCallback {
    fn enter() -> InCallback {
        InCallback(IN_CALLBACK.with(|c| c.replace(true)))
    }
}

impl Drop for InCallback {
    fn drop(&mut self) {
        IN_CALLBACK.with(|c| c.set(self.0));
    }
}

/// The caller's `user_data`, carried into the output sink (which must be
/// `Send + Sync`). odek never dereferences it; the callback gets it back
/// on the caller's own thread.
struct UserData(*mut c_void);

// SAFETY: an opaque pointer odek only hands back to the caller's callback,
// on the caller's thread; odek never reads or writes through it.
unsafe impl Send for UserData {}
// SAFETY: as above.
unsafe impl Sync for UserData {}

impl UserData {
    /// The pointer (a method, so a closure captures the whole wrapper and
    /// not its non-`Sync` field).
    fn get(&self) -> *mut c_void {
        self.0
    }
}

/// Runs a command in the sandbox as `odek_exec_cancellable` does, and
/// hands each chunk of its output to `on_output` as it arrives (see
/// `odek_output_fn`: on the calling thread, before this call returns).
///
/// `request_json` and `*result_json_out` are exactly `odek_exec`'s (schema
/// `odek.exec-request/1` in, `odek.exec-result/1` out): the result carries
/// the output too, its first `ODEK_EXEC_OUTPUT_LIMIT` bytes of each stream,
/// while the callback sees every byte, however much (odek keeps no more
/// than that limit in memory for the result). `cancel` is NULL (not
/// cancellable) or a handle from `odek_cancel_new`: once `odek_cancel` is
/// called — from another thread, or from the callback — the command and its
/// descendants are killed as after a timeout and the call returns
/// `ODEK_E_CANCELLED`; no result is written. A non-zero exit is not an
/// error. Blocks.
///
/// Errors: as `odek_exec_cancellable`; `on_output` NULL is
/// `ODEK_E_NULL_POINTER`; called from inside an output callback,
/// `ODEK_E_REENTRANT`. When this call fails before the command starts
/// (arguments, handle, request), the callback is never called.
///
/// # Safety
/// Valid sandbox handle; NUL-terminated `request_json`; `cancel` NULL or a
/// live cancel handle; `on_output` a function safe to call with
/// `user_data` as documented; writable out.
#[no_mangle]
pub unsafe extern "C" fn odek_exec_stream(
    sandbox: *const odek_sandbox_t,
    request_json: *const c_char,
    cancel: *const odek_cancel_t,
    on_output: odek_output_fn,
    user_data: *mut c_void,
    result_json_out: *mut *mut c_char,
) -> *mut odek_error_t {
    guard_state(|| {
        out_arg(result_json_out, "result_json_out")?;
        let Some(on_output) = on_output else {
            return Err(Failure::new(
                Code::ODEK_E_NULL_POINTER,
                "on_output is NULL: odek_exec_stream needs an output callback \
                 (odek_exec returns the output without one)",
            ));
        };
        let h = handles::sandbox(sandbox)?;
        let cancel = handles::cancel(cancel)?;
        // SAFETY: per the function contract.
        let req: api::ExecRequest = unsafe { json_arg(request_json, "request_json")? };
        let request = req.into_core().map_err(crate::invalid)?;
        // SAFETY: per the function contract.
        unsafe {
            run_and_write(
                &h,
                &request,
                cancel,
                odek_core::ExecIo::default(),
                Some(on_output),
                user_data,
                result_json_out,
            )
        }
    })
}

/// The body both streaming entries share: runs `request` on the sandbox
/// with `io`, hands each non-empty chunk to `on_output` (when given, marked
/// as inside a callback) and to the capture, and writes the result JSON to
/// `result_json_out`. A cancelled command is `ODEK_E_CANCELLED` and writes
/// nothing. `after` runs once the exec has ended, before the result is
/// judged (the stdin entry refuses later writes there).
///
/// # Safety
/// `on_output` safe to call with `user_data`; `result_json_out` writable
/// and non-NULL.
unsafe fn run_and_write(
    h: &handles::SandboxHandle,
    request: &odek_core::ExecRequest,
    cancel: Option<odek_core::CancellationToken>,
    io: odek_core::ExecIo<'_>,
    on_output: odek_output_fn,
    user_data: *mut c_void,
    result_json_out: *mut *mut c_char,
) -> Result<(), Failure> {
    let rt = crate::runtime()?;
    let capture = api::ExecResult::capture();
    let user = UserData(user_data);
    let sink = |kind: StreamKind, bytes: &[u8]| {
        capture.write(kind, bytes);
        let Some(on_output) = on_output else {
            return;
        };
        if bytes.is_empty() {
            return;
        }
        let stream = match kind {
            StreamKind::Stdout => ODEK_STREAM_STDOUT,
            StreamKind::Stderr => ODEK_STREAM_STDERR,
        };
        let _mark = InCallback::enter();
        // SAFETY: the caller's callback with its own user_data and a
        // chunk valid for the call (the function contract).
        unsafe { on_output(user.get(), stream, bytes.as_ptr(), bytes.len()) };
    };
    let opts = ExecOptions {
        cancel,
        ..ExecOptions::default()
    };
    let outcome = rt
        .block_on(h.odek.exec_io(&h.sandbox, request, &opts, io, &sink))?
        .cancelled_as_error(&h.sandbox)?;
    let result = api::ExecResult::new(&outcome, capture.finish());
    // SAFETY: non-NULL (the function contract).
    unsafe { write_json(result_json_out, &result) }
}

/// A new stdin handle for one `odek_exec_stream_stdin` call: bytes written
/// with `odek_stdin_write` (before or during the call) reach the command's
/// stdin in order; `odek_stdin_close` ends it (the command reads
/// end-of-file once it has read the rest). Free it with `odek_stdin_free`
/// after the call (freeing closes it). NULL only in a process forked from
/// the one that made libodek's state.
#[no_mangle]
pub extern "C" fn odek_stdin_new() -> *mut odek_stdin_t {
    handles::insert_stdin().unwrap_or(std::ptr::null_mut())
}

/// Queues `len` bytes of `bytes` (copied; `len` 0 does nothing) for the
/// command's stdin. Does not block (odek holds what the command has not
/// read yet), so it may be called from an output callback.
///
/// Errors: `stdin` NULL, or `bytes` NULL with `len` > 0:
/// `ODEK_E_NULL_POINTER`; an unknown or freed handle:
/// `ODEK_E_INVALID_HANDLE`; after `odek_stdin_close`, or once the exec
/// that took it has ended: `ODEK_E_INVALID_ARGUMENT` (nothing written).
///
/// # Safety
/// `stdin` NULL or from `odek_stdin_new`; `bytes` valid for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn odek_stdin_write(
    stdin: *const odek_stdin_t,
    bytes: *const u8,
    len: usize,
) -> *mut odek_error_t {
    guard_state(|| {
        if stdin.is_null() {
            return Err(Failure::new(Code::ODEK_E_NULL_POINTER, "stdin is NULL"));
        }
        if len > 0 && bytes.is_null() {
            return Err(Failure::new(
                Code::ODEK_E_NULL_POINTER,
                "bytes is NULL with len > 0",
            ));
        }
        let pipe = handles::stdin(stdin)?;
        if len == 0 {
            return Ok(());
        }
        // SAFETY: non-NULL and valid for len bytes (the function contract).
        let chunk = unsafe { std::slice::from_raw_parts(bytes, len) }.to_vec();
        let tx = pipe.tx.lock().unwrap_or_else(|e| e.into_inner());
        let closed = || {
            Failure::new(
                Code::ODEK_E_INVALID_ARGUMENT,
                "the command's stdin is closed (odek_stdin_close was called, or the command ended): nothing was written",
            )
        };
        match tx.as_ref() {
            Some(tx) => tx.send(chunk).map_err(|_| closed()),
            None => Err(closed()),
        }
    })
}

/// Closes the command's stdin after the bytes already written. Does not
/// block; idempotent.
///
/// Errors: `stdin` NULL: `ODEK_E_NULL_POINTER`; an unknown or freed
/// handle: `ODEK_E_INVALID_HANDLE`.
///
/// # Safety
/// `stdin` NULL or from `odek_stdin_new`.
#[no_mangle]
pub unsafe extern "C" fn odek_stdin_close(stdin: *const odek_stdin_t) -> *mut odek_error_t {
    guard_state(|| {
        if stdin.is_null() {
            return Err(Failure::new(Code::ODEK_E_NULL_POINTER, "stdin is NULL"));
        }
        let pipe = handles::stdin(stdin)?;
        pipe.tx.lock().unwrap_or_else(|e| e.into_inner()).take();
        Ok(())
    })
}

/// Frees a stdin handle (closing it). NULL is a no-op; a freed or unknown
/// handle is `ODEK_E_INVALID_HANDLE`.
///
/// # Safety
/// `stdin` NULL or from `odek_stdin_new`.
#[no_mangle]
pub unsafe extern "C" fn odek_stdin_free(stdin: *mut odek_stdin_t) -> *mut odek_error_t {
    crate::boundary::guard(|| {
        if stdin.is_null() {
            return Ok(());
        }
        crate::fork::check()?;
        handles::remove_stdin(stdin)
    })
}

/// `odek_exec_stream` with stdin: the command's stdin is fed from `stdin`
/// (a handle from `odek_stdin_new`, used by this call only) until
/// `odek_stdin_close`; `on_output` may be NULL here (the output is then in
/// the result only). Everything else — the request and result JSON, the
/// callback's thread and rules, `cancel` — is `odek_exec_stream`'s.
///
/// Stdin is served by odek's supervisor (the default in a sandbox): in a
/// sandbox without it, or when the command would run on the host, the call
/// fails before anything runs, naming the fix.
///
/// Errors: as `odek_exec_stream`; `stdin` NULL: `ODEK_E_NULL_POINTER`; a
/// handle another call already took: `ODEK_E_INVALID_ARGUMENT`; no
/// supervisor: `ODEK_E_EXEC` (nothing ran).
///
/// # Safety
/// As `odek_exec_stream`; `stdin` from `odek_stdin_new`.
#[no_mangle]
pub unsafe extern "C" fn odek_exec_stream_stdin(
    sandbox: *const odek_sandbox_t,
    request_json: *const c_char,
    cancel: *const odek_cancel_t,
    stdin: *const odek_stdin_t,
    on_output: odek_output_fn,
    user_data: *mut c_void,
    result_json_out: *mut *mut c_char,
) -> *mut odek_error_t {
    guard_state(|| {
        out_arg(result_json_out, "result_json_out")?;
        if stdin.is_null() {
            return Err(Failure::new(
                Code::ODEK_E_NULL_POINTER,
                "stdin is NULL: odek_exec_stream_stdin needs a handle from odek_stdin_new (odek_exec_stream runs without stdin)",
            ));
        }
        let h = handles::sandbox(sandbox)?;
        let cancel = handles::cancel(cancel)?;
        let pipe = handles::stdin(stdin)?;
        // SAFETY: per the function contract.
        let req: api::ExecRequest = unsafe { json_arg(request_json, "request_json")? };
        let request = req.into_core().map_err(crate::invalid)?;
        let Some(mut rx) = pipe.rx.lock().unwrap_or_else(|e| e.into_inner()).take() else {
            return Err(Failure::new(
                Code::ODEK_E_INVALID_ARGUMENT,
                "this stdin handle was already given to another exec: make one per call with odek_stdin_new",
            ));
        };
        use futures_util::StreamExt;
        let input = futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx)).boxed();
        let io = odek_core::ExecIo {
            stdin: Some(input),
            tty: None,
            resize: None,
        };
        // SAFETY: per the function contract.
        let ran = unsafe {
            run_and_write(
                &h,
                &request,
                cancel,
                io,
                on_output,
                user_data,
                result_json_out,
            )
        };
        // The exec is over: later writes are refused.
        pipe.tx.lock().unwrap_or_else(|e| e.into_inner()).take();
        ran
    })
}
