//! Network-name validation and `sanitize_name` (SPEC §3.4, §9.3) against
//! the independent reference rules in common.rs, plus Compose project names.
#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use odek_core::config::{
    normalize_compose_project, validate_compose_project, validate_network_name,
};
use odek_core::text::sanitize_name;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    // Network names: exactly the documented rules.
    let got = validate_network_name("fuzz", s);
    assert_eq!(got.is_ok(), common::reference_network_name(s), "{s:?}");
    if let Err(e) = &got {
        assert!(common::display_safe(&e.to_string()), "{e}");
    }

    // Shown names: exactly the §9.3 charset, verbatim except the
    // neutralised wrapper word, idempotent.
    match sanitize_name(s) {
        Some(out) => {
            assert!(common::reference_shown(s), "{s:?}");
            assert_eq!(out.len(), s.len());
            assert!(!out.to_ascii_lowercase().contains("untrusted_content"));
            for (a, b) in s.bytes().zip(out.bytes()) {
                assert!(a == b || (a == b'_' && b == b'-'), "{s:?} -> {out:?}");
            }
            if !s.to_ascii_lowercase().contains("untrusted_content") {
                assert_eq!(out, s);
            }
            assert_eq!(sanitize_name(&out).as_deref(), Some(out.as_str()));
        }
        None => assert!(!common::reference_shown(s), "{s:?}"),
    }

    // Compose project names: Compose's charset; the hint is a valid name.
    let got = validate_compose_project("fuzz", s);
    assert_eq!(got.is_ok(), common::reference_compose(s), "{s:?}");
    if let Some(n) = normalize_compose_project(s) {
        assert!(common::reference_compose(&n), "{s:?} -> {n:?}");
    }
});
