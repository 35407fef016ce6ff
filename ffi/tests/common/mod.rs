//! Helpers shared by the C ABI's Rust tests (each test file is its own crate
//! and uses some of them).
#![allow(dead_code, unsafe_code)]

use std::ffi::{c_char, CStr, CString};
use std::path::PathBuf;

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

/// Takes a string returned by odek, freed.
pub fn take_string(s: *mut c_char) -> String {
    assert!(!s.is_null());
    // SAFETY: a string returned by odek; freed once.
    unsafe {
        let out = CStr::from_ptr(s).to_string_lossy().into_owned();
        odek_string_free(s);
        out
    }
}

/// `s` as a C string argument.
pub fn cstring(s: &str) -> CString {
    CString::new(s).expect("no NUL inside a C string argument")
}

/// A temporary project directory (`work/`) and `$ODEK_HOME`
/// (`home/.odek`), canonical, removed on drop.
pub struct TempProject {
    /// Its root directory.
    pub root: PathBuf,
}

impl TempProject {
    /// A new one whose directory name starts with `odek-<tag>-`.
    pub fn new(tag: &str) -> TempProject {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let root = std::env::temp_dir().join(format!("odek-{tag}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(root.join("work")).expect("workdir");
        std::fs::create_dir_all(root.join("home/.odek")).expect("odek home");
        let root = root.canonicalize().expect("canonical");
        TempProject { root }
    }
}

impl Drop for TempProject {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}
