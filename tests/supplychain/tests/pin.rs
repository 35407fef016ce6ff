//! The pinned default image has one source of truth (SPEC §5, §12):
//! `core/src/image/default.Dockerfile`, `FROM alpine:3.22@sha256:<64 hex>`,
//! which the core embeds, the Nix flake parses, and Dependabot bumps — and no
//! other file in the repository carries that digest or another alpine digest.

use std::path::Path;

use odek_supplychain::{
    alpine_digests, instructions, is_lower_hex64, lines_with, parse_dependabot, parse_pin, repo,
    repo_files, Pin, DEPENDABOT, DOCKERFILE, PIN_DIRECTORY, PIN_NAME, PIN_TAG,
};

fn read(rel: &str) -> String {
    let path = repo().join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

fn pin() -> Pin {
    parse_pin(&read(DOCKERFILE)).unwrap_or_else(|e| panic!("{DOCKERFILE}: {e}"))
}

#[test]
fn pin_has_the_spec_form() {
    let p = pin();
    assert_eq!(p.name, PIN_NAME, "{DOCKERFILE} pins {}", p.reference);
    assert_eq!(p.tag, PIN_TAG, "{DOCKERFILE} pins {}", p.reference);
    assert!(is_lower_hex64(&p.hex), "{}", p.reference);
    assert_eq!(
        p.reference,
        format!("{PIN_NAME}:{PIN_TAG}@sha256:{}", p.hex)
    );
}

#[test]
fn pin_is_the_only_instruction() {
    let text = read(DOCKERFILE);
    let ins = instructions(&text);
    assert_eq!(
        ins.len(),
        1,
        "{DOCKERFILE} must hold one instruction, has {ins:?}"
    );
    let froms = text
        .lines()
        .filter(|l| l.trim_start().to_ascii_uppercase().starts_with("FROM"))
        .count();
    assert_eq!(froms, 1, "{DOCKERFILE} must hold exactly one FROM");
}

#[test]
fn core_default_image_is_the_pin() {
    let p = pin();
    // The core embeds the very same file…
    assert_eq!(
        odek_core::image::DEFAULT_DOCKERFILE,
        read(DOCKERFILE),
        "the core's embedded default.Dockerfile differs from {DOCKERFILE}"
    );
    // …and its default image is the pin, pulled and created by digest.
    let core = odek_core::image::pinned_default();
    assert_eq!(core.original, p.reference);
    assert_eq!(core.tag.as_deref(), Some(PIN_TAG));
    assert_eq!(core.repository, format!("library/{PIN_NAME}"));
    assert_eq!(
        core.digest.as_deref(),
        Some(format!("sha256:{}", p.hex).as_str())
    );
    assert_eq!(core.create_ref(), format!("{PIN_NAME}@sha256:{}", p.hex));
}

#[test]
fn no_other_file_carries_the_pinned_digest() {
    let root = repo();
    let p = pin();
    let files = repo_files(&root);
    // Positive control: the scan sees the pin itself, so "no copy" below
    // cannot pass because the scan saw nothing.
    assert!(
        files.iter().any(|f| f == Path::new(DOCKERFILE)),
        "the file list lacks {DOCKERFILE} ({} files)",
        files.len()
    );
    let mut copies = Vec::new();
    for f in &files {
        let bytes =
            std::fs::read(root.join(f)).unwrap_or_else(|e| panic!("reading {}: {e}", f.display()));
        let lines = lines_with(&bytes, &p.hex);
        if f == Path::new(DOCKERFILE) {
            assert_eq!(
                lines.len(),
                1,
                "the pin's own line must be found exactly once"
            );
        } else {
            copies.extend(lines.iter().map(|l| format!("{}:{l}", f.display())));
        }
    }
    assert!(
        copies.is_empty(),
        "the pinned digest must live only in {DOCKERFILE} (read it from there, \
         e.g. odek_core::image::pinned_default()); copies at:\n  {}",
        copies.join("\n  ")
    );
}

#[test]
fn no_file_carries_another_alpine_digest() {
    let root = repo();
    let mut others = Vec::new();
    let mut seen_pin = false;
    for f in repo_files(&root) {
        let bytes =
            std::fs::read(root.join(&f)).unwrap_or_else(|e| panic!("reading {}: {e}", f.display()));
        for (line, reference) in alpine_digests(&bytes) {
            if f == Path::new(DOCKERFILE) {
                seen_pin = true;
            } else {
                others.push(format!("{}:{line}: {reference}", f.display()));
            }
        }
    }
    assert!(
        seen_pin,
        "positive control: the scan did not find the pin in {DOCKERFILE}"
    );
    assert!(
        others.is_empty(),
        "alpine pinned by digest outside {DOCKERFILE}:\n  {}",
        others.join("\n  ")
    );
}

#[test]
fn dependabot_bumps_the_pin_directory_only() {
    let (version, updates) = parse_dependabot(&read(DEPENDABOT)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(version, 2, "{DEPENDABOT}: version");
    let of = |eco: &str| {
        updates
            .iter()
            .filter(|u| u.ecosystem == eco)
            .collect::<Vec<_>>()
    };

    let docker = of("docker");
    assert_eq!(
        docker.len(),
        1,
        "{DEPENDABOT}: exactly one docker entry, found {docker:?}"
    );
    assert_eq!(
        docker[0].directories,
        vec![PIN_DIRECTORY.to_string()],
        "{DEPENDABOT}: the docker entry must watch the pin's directory only"
    );
    assert_eq!(
        Path::new(DOCKERFILE).parent(),
        Some(Path::new(PIN_DIRECTORY.trim_start_matches('/')))
    );
    // Dependabot moves the digest within the SPEC's tag, never the tag.
    let alpine = docker[0]
        .ignores
        .iter()
        .find(|(name, _)| name == PIN_NAME)
        .unwrap_or_else(|| {
            panic!("{DEPENDABOT}: the docker entry must ignore {PIN_NAME} minor/major updates")
        });
    for t in ["version-update:semver-major", "version-update:semver-minor"] {
        assert!(
            alpine.1.contains(t),
            "{DEPENDABOT}: {PIN_NAME} must ignore {t}"
        );
    }
    // No other ecosystem that could rewrite image references.
    for eco in ["docker-compose", "devcontainers", "helm"] {
        assert!(of(eco).is_empty(), "{DEPENDABOT}: unexpected {eco} entry");
    }

    for (eco, dir) in [
        ("cargo", "/"),
        ("pip", "/bindings/python"),
        ("gomod", "/bindings/go"),
    ] {
        let e = of(eco);
        assert_eq!(
            e.len(),
            1,
            "{DEPENDABOT}: exactly one {eco} entry, found {e:?}"
        );
        assert_eq!(
            e[0].directories,
            vec![dir.to_string()],
            "{DEPENDABOT}: {eco} directory"
        );
    }
}

#[test]
fn the_pin_directory_holds_no_other_dockerfile() {
    // Dependabot's docker ecosystem updates every Dockerfile-like file in the
    // directory it watches: there must be only the pin there.
    let dir = repo().join(PIN_DIRECTORY.trim_start_matches('/'));
    let dockerfiles: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| {
            e.expect("dir entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|n| {
            n.to_ascii_lowercase().contains("dockerfile")
                || n.ends_with(".yml")
                || n.ends_with(".yaml")
        })
        .collect();
    assert_eq!(
        dockerfiles,
        vec!["default.Dockerfile".to_string()],
        "in {}",
        dir.display()
    );
}

#[test]
fn the_flake_reads_the_pin_from_the_dockerfile() {
    // The flake's pullImage takes name, tag and digest from nix/pinned-image.nix,
    // which parses the Dockerfile (nix/check-offline.sh asserts the values).
    let nix = read("nix/pinned-image.nix");
    assert!(
        nix.contains("../core/src/image/default.Dockerfile") && nix.contains("builtins.readFile"),
        "nix/pinned-image.nix must read {DOCKERFILE}"
    );
    let fetch = read("nix/pinned-image-fetch.nix");
    assert!(
        fetch.contains("imageDigest = pinned.digest;"),
        "nix/pinned-image-fetch.nix must hand the parsed digest to dockerTools.pullImage"
    );
}
