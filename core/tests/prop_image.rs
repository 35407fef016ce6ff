//! Property tests of image references (SPEC §5, §6.1):
//! `ImageRef::parse` round-trips — parse, then format `name[:tag][@digest]`,
//! gives back the input; the create reference (by digest when pinned, never
//! by tag) parses to the same repository and digest — and arbitrary input
//! never panics and is either refused or satisfies those invariants.

use odek_core::image::ImageRef;
use proptest::prelude::*;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: case_count(),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// The parts of a valid reference, as written.
#[derive(Clone, Debug)]
struct Parts {
    name: String,
    tag: Option<String>,
    digest: Option<String>,
}

impl Parts {
    fn text(&self) -> String {
        let mut s = self.name.clone();
        if let Some(t) = &self.tag {
            s.push(':');
            s.push_str(t);
        }
        if let Some(d) = &self.digest {
            s.push('@');
            s.push_str(d);
        }
        s
    }
}

/// Valid references by Docker's grammar: optional registry (domain or
/// `localhost`, optional port), 1–3 path components with separators, an
/// optional tag and an optional sha256 digest.
fn valid() -> impl Strategy<Value = Parts> {
    let component = "[a-z0-9]{1,5}((\\.|_|__|-{1,3})[a-z0-9]{1,5}){0,2}";
    let registry = prop_oneof![
        Just(None),
        (
            "[a-z0-9]{1,8}(\\.[a-z0-9]{1,8}){1,2}",
            prop::option::of(1u16..)
        )
            .prop_map(|(h, p)| Some(match p {
                Some(p) => format!("{h}:{p}"),
                None => h,
            })),
        prop::option::of(1u16..).prop_map(|p| Some(match p {
            Some(p) => format!("localhost:{p}"),
            None => "localhost".to_string(),
        })),
    ];
    (
        registry,
        prop::collection::vec(component, 1..4),
        prop::option::of("[A-Za-z0-9_][A-Za-z0-9_.-]{0,30}"),
        prop::option::of("[0-9a-f]{64}"),
    )
        .prop_map(|(registry, path, tag, digest)| {
            let path = path.join("/");
            Parts {
                name: match registry {
                    Some(r) => format!("{r}/{path}"),
                    None => path,
                },
                tag,
                digest: digest.map(|d| format!("sha256:{d}")),
            }
        })
}

/// Arbitrary text around the reference grammar.
fn arbitrary() -> impl Strategy<Value = String> {
    prop_oneof![
        "\\PC{0,40}",
        "[a-zA-Z0-9:/@._ -]{0,40}",
        (valid(), "[:@/.A-Z \\-]{0,3}", 0usize..80).prop_map(|(p, junk, at)| {
            let mut s = p.text();
            let at = s.char_indices().map(|(i, _)| i).nth(at).unwrap_or(s.len());
            s.insert_str(at, &junk);
            s
        }),
        (
            "[a-z]{1,8}",
            "[0-9a-fA-Fg]{30,70}",
            prop::sample::select(vec!["sha256", "sha512", "SHA256", "md5", "sha384"])
        )
            .prop_map(|(n, h, alg)| format!("{n}@{alg}:{h}")),
    ]
}

fn check_parsed(input: &str, r: &ImageRef) -> Result<(), TestCaseError> {
    let rebuilt = Parts {
        name: r.name.clone(),
        tag: r.tag.clone(),
        digest: r.digest.clone(),
    }
    .text();
    prop_assert_eq!(&rebuilt, input);
    prop_assert_eq!(&r.original, input);
    prop_assert_eq!(r.to_string(), input);
    prop_assert!(input.len() <= 1024);
    prop_assert!(
        !input.chars().any(|c| c.is_whitespace() || c.is_control()),
        "{:?}",
        input
    );
    if let Some(d) = &r.digest {
        let hex = d.strip_prefix("sha256:").expect("sha256 only");
        prop_assert!(
            hex.len() == 64
                && hex
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
            "{:?}",
            d
        );
        // A pinned reference is created by digest, never by tag.
        prop_assert_eq!(r.create_ref(), format!("{}@{d}", r.name));
        prop_assert!(r.matches_repo_digest(&r.create_ref()));
    }
    let created =
        ImageRef::parse(&r.create_ref()).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(&created.registry, &r.registry);
    prop_assert_eq!(&created.repository, &r.repository);
    prop_assert_eq!(&created.digest, &r.digest);
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn valid_references_round_trip(p in valid()) {
        let text = p.text();
        let r = ImageRef::parse(&text).map_err(|e| TestCaseError::fail(format!("{text}: {e}")))?;
        prop_assert_eq!(&r.name, &p.name);
        prop_assert_eq!(&r.tag, &p.tag);
        prop_assert_eq!(&r.digest, &p.digest);
        check_parsed(&text, &r)?;
        if p.digest.is_none() {
            prop_assert_eq!(r.create_ref(), format!("{}:{}", p.name, p.tag.as_deref().unwrap_or("latest")));
        }
    }

    #[test]
    fn arbitrary_text_is_refused_or_round_trips(s in arbitrary()) {
        match ImageRef::parse(&s) {
            Ok(r) => check_parsed(&s, &r)?,
            Err(e) => {
                let shown = e.to_string();
                prop_assert!(shown.contains("image reference"), "{}", shown);
                prop_assert!(shown.len() < 1024, "{} bytes", shown.len());
                prop_assert!(!shown.chars().any(char::is_control), "{:?}", shown);
            }
        }
    }
}

proptest! {
    #![proptest_config(config())]

    /// No tag outside Docker's ASCII grammar is accepted (oci-spec's regex
    /// uses Unicode `\w`; odek checks the ASCII grammar itself; see also
    /// `bad_input_images::non_ascii_tags_are_refused`).
    #[test]
    fn accepted_references_are_ascii(tag in "[a-z]{0,3}[\\p{L}\\p{M}\\u{200c}\\u{200d}][a-z0-9]{0,3}") {
        let s = format!("alpine:{tag}");
        if let Ok(r) = ImageRef::parse(&s) {
            prop_assert!(r.original.is_ascii(), "accepted {:?} with tag {:?}", s, r.tag);
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
