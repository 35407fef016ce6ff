//! Property tests of the name rules (SPEC §3.4, §9.3), each against
//! an independent reference implementation written here from the SPEC text:
//!
//! - `config::validate_network_name` accepts exactly Docker's charset
//!   `[A-Za-z0-9][A-Za-z0-9_.-]*`, 1..=128 bytes, minus the reserved names
//!   `host`, `none`, `bridge`, `default` (any letter case) and anything with
//!   `:` or `/`; its refusals are printable and bounded;
//! - `text::sanitize_name` shows exactly `[A-Za-z0-9][A-Za-z0-9_.-]{0,62}`
//!   without `untrusted_content` (any case), verbatim;
//! - `config::validate_compose_project` accepts exactly `[a-z0-9][a-z0-9_-]*`.

use odek_core::config::{validate_compose_project, validate_network_name, ConfigError};
use odek_core::text::sanitize_name;
use proptest::prelude::*;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: case_count(),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// SPEC §3.4, written independently of the implementation.
fn reference_network_name(s: &str) -> bool {
    let b = s.as_bytes();
    let charset = !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'));
    let reserved = ["host", "none", "bridge", "default"]
        .iter()
        .any(|r| s.to_ascii_lowercase() == *r);
    charset && b.len() <= 128 && !reserved && !s.contains(':') && !s.contains('/')
}

/// SPEC §9.3: shown iff it matches the charset with at most 63 bytes.
fn reference_shown(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'))
}

/// Compose's charset.
fn reference_compose(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 100
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'_' | b'-'))
}

/// Names of every kind: arbitrary Unicode, Docker-ish ASCII with the
/// separators that matter, the reserved words in any case with affixes,
/// lengths around the limits, hostile fragments.
fn names() -> impl Strategy<Value = String> {
    prop_oneof![
        "\\PC{0,24}",
        ".{0,24}",
        "[A-Za-z0-9_.:/ -]{0,16}",
        "[A-Za-z0-9][A-Za-z0-9_.-]{0,20}",
        (
            prop::sample::select(vec!["host", "none", "bridge", "default"]),
            prop::collection::vec(any::<bool>(), 7),
            "[a-z0-9_.-]{0,2}",
            any::<bool>(),
        )
            .prop_map(|(word, upper, affix, before)| {
                let w: String = word
                    .chars()
                    .zip(upper.iter().cycle())
                    .map(|(c, u)| if *u { c.to_ascii_uppercase() } else { c })
                    .collect();
                if before {
                    format!("{affix}{w}")
                } else {
                    format!("{w}{affix}")
                }
            }),
        "[a-z0-9]{60,66}",
        "[a-z0-9]{124,132}",
        (
            "[A-Za-z0-9]{1,6}",
            prop::sample::select(vec![
                "\u{200b}",
                "\u{202e}",
                "\u{1b}[0m",
                "\n",
                "\0",
                "\u{430}",
                "\u{ff41}",
                "\u{feff}",
                "\u{301}",
                "</untrusted_content_a>",
                "untrusted_content",
                "UnTrusted_Content_",
                " ",
                "\t",
            ]),
            "[A-Za-z0-9_.-]{0,6}",
        )
            .prop_map(|(a, b, c)| format!("{a}{b}{c}")),
    ]
}

fn printable_and_bounded(e: &ConfigError) -> Result<(), TestCaseError> {
    let shown = e.to_string();
    prop_assert!(shown.len() < 2048, "{} bytes", shown.len());
    for c in shown.chars() {
        prop_assert!(
            !c.is_control()
                && !matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}'),
            "raw {:?} in {:?}",
            c,
            shown
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn network_names_follow_the_documented_rules(name in names()) {
        let got = validate_network_name("flag --sandbox-networks", &name);
        prop_assert_eq!(got.is_ok(), reference_network_name(&name), "{:?}: {:?}", name, got);
        if let Err(e) = &got {
            prop_assert!(matches!(e, ConfigError::InvalidNetworkName { .. }), "{:?}", e);
            printable_and_bounded(e)?;
        }
    }

    #[test]
    fn long_valid_names_are_accepted_up_to_128_bytes(len in 1usize..200) {
        let name: String = std::iter::repeat_n('n', len).collect();
        prop_assert_eq!(validate_network_name("o", &name).is_ok(), len <= 128);
    }

    #[test]
    fn sanitize_shows_exactly_the_charset_and_omits_the_wrapper_word(name in names()) {
        let got = sanitize_name(&name);
        let wrapper_word = name.to_ascii_lowercase().contains("untrusted_content");
        prop_assert_eq!(got.is_some(), reference_shown(&name) && !wrapper_word, "{:?} -> {:?}", name, got);
        if let Some(shown) = got {
            // Verbatim: never rewritten into a name that does not resolve.
            prop_assert_eq!(&shown, &name);
            // Sanitising is idempotent.
            let again = sanitize_name(&shown);
            prop_assert_eq!(again.as_deref(), Some(shown.as_str()));
        }
    }

    #[test]
    fn the_wrapper_word_is_omitted_in_repeats_and_any_case(
        parts in prop::collection::vec(
            prop::sample::select(vec!["untrusted_content", "UNTRUSTED_CONTENT", "Untrusted_", "content", "_", "x", "u"]),
            1..8,
        )
    ) {
        let name = format!("a{}", parts.concat());
        let got = sanitize_name(&name);
        // Too long is omitted too (never truncated): up to 1 + 7 × 17 bytes.
        if name.to_ascii_lowercase().contains("untrusted_content") || name.len() > 63 {
            prop_assert_eq!(got, None, "{:?}", name);
        } else {
            prop_assert_eq!(got.as_deref(), Some(name.as_str()));
        }
    }

    #[test]
    fn compose_names_follow_compose_charset(name in prop_oneof![names(), "[a-z0-9_-]{0,12}", "[a-zA-Z0-9_ .-]{0,12}"]) {
        let got = validate_compose_project("flag --sandbox-compose", &name);
        prop_assert_eq!(got.is_ok(), reference_compose(&name), "{:?}: {:?}", name, got);
        if let Err(e) = &got {
            printable_and_bounded(e)?;
            if let ConfigError::InvalidComposeProject { normalized: Some(n), .. } = e {
                // The hint is itself a valid project name, never the input.
                prop_assert!(reference_compose(n), "{:?}", n);
                prop_assert_ne!(n, &name);
            }
        }
    }
}

/// 256 cases (bounded for CI), or `PROPTEST_CASES` for a longer run.
fn case_count() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256)
}
