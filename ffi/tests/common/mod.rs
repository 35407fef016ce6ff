//! Helpers shared by the C ABI's Rust tests (each test file is its own crate
//! and uses some of them).
#![allow(dead_code, unsafe_code)]

use std::ffi::CStr;

use odek::*;

/// Takes an error object: (code, class, message), freed; `None` for NULL.
pub fn take_error_with_class(e: *mut odek_error_t) -> Option<(i32, String, String)> {
    if e.is_null() {
        return None;
    }
    // SAFETY: a live error object returned by odek; freed once below.
    unsafe {
        let code = odek_error_code(e);
        let class = CStr::from_ptr(odek_error_class(e))
            .to_string_lossy()
            .into_owned();
        let message = CStr::from_ptr(odek_error_message(e))
            .to_string_lossy()
            .into_owned();
        odek_error_free(e);
        Some((code, class, message))
    }
}

/// Takes an error object: (code, message), freed; `None` for NULL.
pub fn take_error(e: *mut odek_error_t) -> Option<(i32, String)> {
    take_error_with_class(e).map(|(code, _, message)| (code, message))
}
