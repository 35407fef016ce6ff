//! The one boundary every export goes through (SPEC §10.1): panics become
//! error objects, NULL pointers, invalid UTF-8 and invalid JSON become error
//! codes, and out-params are written only on success.

use std::ffi::{c_char, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::error::{odek_error_t, Code, Failure};

/// Runs `f` inside the panic boundary; returns NULL on success or an error
/// object the caller frees with `odek_error_free`.
pub fn guard(f: impl FnOnce() -> Result<(), Failure>) -> *mut odek_error_t {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => std::ptr::null_mut(),
        Ok(Err(failure)) => failure.into_raw(),
        Err(payload) => {
            let msg = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            Failure::new(
                Code::ODEK_E_PANIC,
                format!("internal error (panic caught at the C boundary): {msg}"),
            )
            .into_raw()
        }
    }
}

/// [`guard`] for a call that uses libodek's state (a handle, the runtime):
/// in a process forked from the one that made that state, returns
/// `ODEK_E_FORKED` before `f` runs, whatever the arguments.
pub fn guard_state(f: impl FnOnce() -> Result<(), Failure>) -> *mut odek_error_t {
    guard(|| {
        crate::fork::check()?;
        f()
    })
}

/// Reads a required, NUL-terminated UTF-8 string argument.
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string valid for the call.
pub unsafe fn str_arg<'a>(p: *const c_char, name: &str) -> Result<&'a str, Failure> {
    if p.is_null() {
        return Err(Failure::new(
            Code::ODEK_E_NULL_POINTER,
            format!("{name} is NULL"),
        ));
    }
    // SAFETY: non-NULL and NUL-terminated per the contract above.
    let c = unsafe { CStr::from_ptr(p) };
    c.to_str().map_err(|e| {
        Failure::new(
            Code::ODEK_E_INVALID_UTF8,
            format!("{name} is not valid UTF-8: {e}"),
        )
    })
}

/// Parses a required JSON string argument into `T` (one of the documents of
/// `odek_core::api`). Errors: `ODEK_E_INVALID_JSON` when it does not parse
/// as JSON, `ODEK_E_INVALID_ARGUMENT` when it breaks the strict rules of
/// config files (duplicate keys, NUL, nesting) or has the wrong shape.
///
/// # Safety
/// As [`str_arg`].
pub unsafe fn json_arg<T: serde::de::DeserializeOwned>(
    p: *const c_char,
    name: &str,
) -> Result<T, Failure> {
    // SAFETY: forwarded contract.
    let s = unsafe { str_arg(p, name)? };
    // The strict check reads the whole document, so a syntax error anywhere
    // is reported as such (ODEK_E_INVALID_JSON) before any shape error.
    if let Err(e) = odek_core::config::check_strict_json(s) {
        // Which kind of failure, told by serde_json's own parser (and its
        // message) on this error path only.
        return Err(match serde_json::from_str::<serde_json::Value>(s) {
            Err(e) => Failure::new(
                Code::ODEK_E_INVALID_JSON,
                format!(
                    "{name} is not valid JSON: {}",
                    odek_core::text::foreign(&e.to_string())
                ),
            ),
            Ok(_) => Failure::new(
                Code::ODEK_E_INVALID_ARGUMENT,
                format!(
                    "{name} is not accepted: {}",
                    odek_core::text::foreign(&e.to_string())
                ),
            ),
        });
    }
    if s.trim_start().starts_with('[') {
        // serde fills a struct from an array by field position; the ABI's
        // documents are objects (or null where documented).
        return Err(Failure::new(
            Code::ODEK_E_INVALID_ARGUMENT,
            format!("{name} must be a JSON object, not an array"),
        ));
    }
    serde_json::from_str(s).map_err(|e| {
        // The message without serde_json's position suffix: the document is
        // valid JSON, and its shape errors name the member — verbatim from
        // the caller's document, so as one line through `text::foreign`.
        let text = e.to_string();
        let at = format!(" at line {} column {}", e.line(), e.column());
        let msg = text.strip_suffix(&at).unwrap_or(&text);
        Failure::new(
            Code::ODEK_E_INVALID_ARGUMENT,
            format!(
                "{name} has the wrong shape: {}",
                odek_core::text::foreign(msg)
            ),
        )
    })
}

/// Checks that an out-param is not NULL.
pub fn out_arg<T>(p: *mut T, name: &str) -> Result<(), Failure> {
    if p.is_null() {
        Err(Failure::new(
            Code::ODEK_E_NULL_POINTER,
            format!("{name} (out-param) is NULL"),
        ))
    } else {
        Ok(())
    }
}

/// A Rust string as a C string owned by the caller (`odek_string_free`).
/// Interior NUL bytes (never produced by odek's JSON) are replaced.
pub fn c_string(s: String) -> *mut c_char {
    let s = if s.contains('\0') {
        s.replace('\0', "\u{fffd}")
    } else {
        s
    };
    CString::new(s).expect("NUL bytes were replaced").into_raw()
}

/// Writes a JSON document to an out-param.
///
/// # Safety
/// `out` is non-NULL (checked with [`out_arg`]) and writable.
pub unsafe fn write_json<T: serde::Serialize>(
    out: *mut *mut c_char,
    value: &T,
) -> Result<(), Failure> {
    let s = serde_json::to_string(value)
        .map_err(|e| Failure::new(Code::ODEK_E_INTERNAL, format!("cannot encode JSON: {e}")))?;
    // SAFETY: per the contract above.
    unsafe { *out = c_string(s) };
    Ok(())
}
