//! `ImageRef::parse` on arbitrary text (SPEC §5, §6.1).
//!
//! Invariants: never panics; an accepted reference formats back to its input
//! (`name[:tag][@digest]`), has no whitespace or control characters, a digest
//! only as `sha256:<64 lowercase hex>`, and a create reference (by digest
//! when pinned) that parses to the same repository and digest; refusals are
//! printable and bounded, and an accepted reference is ASCII (Docker's
//! grammar; oci-spec alone would accept Unicode tags).
#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use odek_core::image::ImageRef;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    match ImageRef::parse(s) {
        Ok(r) => {
            let mut rebuilt = r.name.clone();
            if let Some(t) = &r.tag {
                rebuilt.push(':');
                rebuilt.push_str(t);
            }
            if let Some(d) = &r.digest {
                rebuilt.push('@');
                rebuilt.push_str(d);
            }
            assert_eq!(rebuilt, s);
            assert_eq!(r.to_string(), s);
            assert!(s.len() <= 1024);
            assert!(!s.chars().any(|c| c.is_whitespace() || c.is_control()));
            if let Some(d) = &r.digest {
                let hex = d.strip_prefix("sha256:").expect("sha256 only");
                assert!(
                    hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
                );
                assert_eq!(r.create_ref(), format!("{}@{d}", r.name));
                assert!(r.matches_repo_digest(&r.create_ref()));
            }
            let created = ImageRef::parse(&r.create_ref()).expect("create ref parses");
            assert_eq!(created.registry, r.registry);
            assert_eq!(created.repository, r.repository);
            assert_eq!(created.digest, r.digest);
            assert!(s.is_ascii(), "non-ASCII reference accepted: {s:?}");
        }
        Err(e) => {
            let msg = e.to_string();
            assert!(msg.contains("image reference"));
            assert!(common::display_safe(&msg), "{msg:?}");
        }
    }
});
