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
//! NOTE (stdin, not built here): this call has no stdin. When the core's
//! exec takes stdin bytes (and a terminal), the ABI gets them as a further
//! addition — e.g. a stream handle with `odek_exec_stream_write_stdin` /
//! `_close_stdin` made by a separate entry point — never as a change to
//! this function's parameters, which stay as ABI 1 published them.

use std::cell::Cell;
use std::ffi::{c_char, c_void};

use odek_core::api;
use odek_core::engine::StreamKind;
use odek_core::ExecOptions;

use crate::boundary::{guard_state, json_arg, out_arg, write_json};
use crate::error::{odek_error_t, Code, Failure};
use crate::handles::{self, odek_cancel_t, odek_sandbox_t};

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
        let rt = crate::runtime()?;
        let capture = api::ExecResult::capture();
        let user = UserData(user_data);
        let sink = |kind: StreamKind, bytes: &[u8]| {
            capture.write(kind, bytes);
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
        let opts = ExecOptions { cancel };
        let outcome = rt
            .block_on(h.odek.exec(&h.sandbox, &request, &opts, &sink))?
            .cancelled_as_error(&h.sandbox)?;
        let result = api::ExecResult::new(&outcome, capture.finish());
        // SAFETY: checked non-NULL.
        unsafe { write_json(result_json_out, &result) }
    })
}
