//! Where libodek is: the directory of the shared object (or executable)
//! that holds this code, for the core's supervisor discovery
//! ([`odek_core::supervisor::set_library_dir`]): a Python or Go program's
//! own executable is the interpreter or the program, not odek.

use std::ffi::CStr;
use std::path::PathBuf;

/// The directory of the file this function's code was loaded from
/// (`libodek.so`, or the executable libodek.a was linked into), canonical;
/// `None` when the dynamic loader does not say.
pub(crate) fn library_dir() -> Option<PathBuf> {
    let mut info = std::mem::MaybeUninit::<libc::Dl_info>::zeroed();
    let addr = library_dir as *const () as *const libc::c_void;
    // SAFETY: `addr` is an address in this object's code; `info` is
    // writable and dladdr fills it (or returns 0).
    let found = unsafe { libc::dladdr(addr, info.as_mut_ptr()) };
    if found == 0 {
        return None;
    }
    // SAFETY: dladdr returned non-zero, so it initialised `info`.
    let info = unsafe { info.assume_init() };
    if info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dli_fname is a NUL-terminated path the loader owns for as
    // long as the object stays loaded (copied at once).
    let name = unsafe { CStr::from_ptr(info.dli_fname) };
    let path = PathBuf::from(
        <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(name.to_bytes()),
    );
    // The main program's name is its argv[0], which may be a bare name
    // found on PATH: the kernel's record says where it is.
    let path = if name.to_bytes().contains(&b'/') {
        path.canonicalize().ok()?
    } else {
        std::env::current_exe().ok()?.canonicalize().ok()?
    };
    path.parent().map(std::path::Path::to_path_buf)
}

/// Tells the core, once per process, where libodek is.
pub(crate) fn tell_core() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if let Some(dir) = library_dir() {
            odek_core::supervisor::set_library_dir(dir);
        }
    });
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_library_is_found_where_its_code_is() {
        let dir = super::library_dir().expect("dladdr names this test's binary");
        let exe = std::env::current_exe()
            .expect("exe")
            .canonicalize()
            .expect("canonical");
        assert_eq!(Some(dir.as_path()), exe.parent());
    }
}
