//! The per-checkout test namespace: one rule for every name the tests and the
//! demo give the Docker daemon, so that two checkouts (two branches, a clone
//! next to CI) sharing a daemon never overwrite each other's images or Compose
//! projects. `cargo xtask` exports it to every step as `ODEK_TEST_NS`; from it:
//!
//! - images:   `odek-test-<ns>/base:1`, `…/redis:1`, `…/postgres:1`, `…/busybox:1`
//! - projects: `odeke2e<ns>` (the e2e fixture), `shop<ns>` (`cargo xtask demo`)
//! - label:    `dev.odek.test.ns=<ns>` on the images and networks, for cleanup
//!
//! The default is the first 8 hex digits of the SHA-256 of the canonical
//! checkout root path (its UTF-8 bytes, no newline). The same rule, for runs
//! outside xtask: tests/ns.sh (shell), the e2e crate's build script (which
//! includes this file), bindings/python/tests/conftest.py,
//! tests/mcp/test_mcp.py and bindings/go/helpers_test.go.

use std::path::Path;

/// The environment variable carrying the namespace to child steps.
pub const VAR: &str = "ODEK_TEST_NS";

/// `ODEK_TEST_NS` when set and non-empty (checked by [`check`]), else the
/// hash of `root`'s canonical path.
pub fn namespace(root: &Path) -> Result<String, String> {
    match std::env::var(VAR) {
        Ok(ns) if !ns.is_empty() => check(&ns).map(|()| ns),
        _ => Ok(hashed(root)),
    }
}

/// The first 8 hex digits of SHA-256 of `root`'s canonical path.
pub fn hashed(root: &Path) -> String {
    use sha2::{Digest, Sha256};
    let canon = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    let digest = Sha256::digest(canon.as_os_str().as_encoded_bytes());
    digest[..4].iter().map(|b| format!("{b:02x}")).collect()
}

/// A namespace must keep the names it is part of valid: lower-case ASCII
/// letters and digits only (image repositories and Compose project names).
pub fn check(ns: &str) -> Result<(), String> {
    if ns.len() <= 32
        && ns
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    {
        Ok(())
    } else {
        Err(format!(
            "{VAR}={ns:?}: use 1 to 32 lower-case letters and digits"
        ))
    }
}
