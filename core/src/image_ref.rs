//! Image references (SPEC §5), parsed with `oci-spec`, plus the checks odek
//! adds: no whitespace or control characters, digests only `sha256:` with 64
//! lowercase hex digits.

use std::fmt;

use oci_spec::distribution::Reference;
use serde::{Deserialize, Serialize};

/// Why a reference is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[error("image reference {value} is invalid: {reason}; write it as name[:tag][@sha256:<64 lowercase hex>]")]
pub struct ImageRefError {
    /// The reference, quoted for display.
    pub value: String,
    /// Why.
    pub reason: String,
}

/// A parsed image reference.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ImageRef {
    /// As written.
    pub original: String,
    /// The name part as written (registry and repository, no tag/digest).
    pub name: String,
    /// Tag, when written.
    pub tag: Option<String>,
    /// `sha256:<hex>`, when written.
    pub digest: Option<String>,
    /// Registry after normalisation (`docker.io` for Docker Hub).
    pub registry: String,
    /// Repository after normalisation (`library/alpine`).
    pub repository: String,
}

impl ImageRef {
    /// Parses and checks a reference.
    pub fn parse(value: &str) -> Result<ImageRef, ImageRefError> {
        let err = |reason: &str| ImageRefError {
            value: crate::text::quote(value),
            reason: reason.to_string(),
        };
        if value.is_empty() {
            return Err(err("it is empty"));
        }
        if value.len() > 1024 {
            return Err(err("it is longer than 1024 bytes"));
        }
        if value.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(err("it contains whitespace or control characters"));
        }
        // Docker's grammar is ASCII; oci-spec's `\w` would admit any letter.
        if !value.is_ascii() {
            return Err(err("it contains non-ASCII characters"));
        }
        let parsed = Reference::try_from(value).map_err(|e| err(&e.to_string()))?;
        let digest = parsed.digest().map(str::to_string);
        if let Some(d) = &digest {
            let Some(hex) = d.strip_prefix("sha256:") else {
                return Err(err("only sha256 digests are supported"));
            };
            if hex.len() != 64
                || !hex
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
            {
                return Err(err("a sha256 digest is 64 lowercase hex digits"));
            }
        }
        let before_digest = value.split('@').next().unwrap_or(value);
        // A tag is the part after the last ':' that follows the last '/'.
        let last_slash = before_digest.rfind('/').map_or(0, |i| i + 1);
        let (name, tag) = match before_digest[last_slash..].rfind(':') {
            Some(i) => (
                before_digest[..last_slash + i].to_string(),
                Some(before_digest[last_slash + i + 1..].to_string()),
            ),
            None => (before_digest.to_string(), None),
        };
        Ok(ImageRef {
            original: value.to_string(),
            name,
            tag,
            digest,
            registry: parsed.registry().to_string(),
            repository: parsed.repository().to_string(),
        })
    }

    /// The reference to pull and create from: `name@digest` when a digest is
    /// given (never the tag, SPEC §6.1), else `name:tag` (`latest` implied).
    pub fn create_ref(&self) -> String {
        match (&self.digest, &self.tag) {
            (Some(d), _) => format!("{}@{d}", self.name),
            (None, Some(t)) => format!("{}:{t}", self.name),
            (None, None) => format!("{}:latest", self.name),
        }
    }

    /// True when a `RepoDigests` entry names this repository with this digest.
    pub fn matches_repo_digest(&self, repo_digest: &str) -> bool {
        let Some(want) = &self.digest else {
            return false;
        };
        match Reference::try_from(repo_digest) {
            Ok(r) => {
                r.digest() == Some(want.as_str())
                    && r.registry() == self.registry
                    && r.repository() == self.repository
            }
            Err(_) => false,
        }
    }
}

impl fmt::Display for ImageRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.original)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn accepted_references() {
        let r = ImageRef::parse("alpine").expect("ok");
        assert_eq!(
            (r.name.as_str(), r.tag.as_deref(), r.digest.as_deref()),
            ("alpine", None, None)
        );
        assert_eq!(r.create_ref(), "alpine:latest");
        assert_eq!(r.repository, "library/alpine");
        let r = ImageRef::parse(&format!("alpine:3.22@sha256:{D}")).expect("ok");
        assert_eq!(r.tag.as_deref(), Some("3.22"));
        assert_eq!(r.create_ref(), format!("alpine@sha256:{D}"));
        let r = ImageRef::parse("127.0.0.1:5555/odek-test/base:1").expect("ok");
        assert_eq!(r.name, "127.0.0.1:5555/odek-test/base");
        assert_eq!(r.registry, "127.0.0.1:5555");
        assert_eq!(r.create_ref(), "127.0.0.1:5555/odek-test/base:1");
        let r = ImageRef::parse(&format!("localhost:5000/a/b@sha256:{D}")).expect("ok");
        assert_eq!(r.tag, None);
        assert_eq!(r.create_ref(), format!("localhost:5000/a/b@sha256:{D}"));
    }

    #[test]
    fn refused_references() {
        for bad in [
            String::new(),
            " alpine".into(),
            "alpine ".into(),
            "al pine".into(),
            "alpine\n".into(),
            "-alpine".into(),
            "Alpine".into(),
            "alpine:".into(),
            "alpine@".into(),
            format!("alpine@sha256:{}", &D[..63]),
            format!("alpine@sha256:{D}0"),
            format!("alpine@sha256:{}", D.to_uppercase()),
            format!("alpine@sha512:{D}"),
            format!("alpine@md5:{D}"),
            "alpine:tag:tag".into(),
            "a".repeat(2000),
        ] {
            let e = ImageRef::parse(&bad).expect_err(&bad);
            assert!(e.to_string().contains("image reference"), "{e}");
        }
    }

    #[test]
    fn repo_digest_matching_normalises_docker_hub() {
        let r = ImageRef::parse(&format!("alpine:3.22@sha256:{D}")).expect("ok");
        assert!(r.matches_repo_digest(&format!("alpine@sha256:{D}")));
        assert!(r.matches_repo_digest(&format!("docker.io/library/alpine@sha256:{D}")));
        assert!(!r.matches_repo_digest(&format!("evil/alpine@sha256:{D}")));
        let other = format!("alpine@sha256:{}", "0".repeat(64));
        assert!(!r.matches_repo_digest(&other));
        let untagged = ImageRef::parse("alpine:3.22").expect("ok");
        assert!(!untagged.matches_repo_digest(&format!("alpine@sha256:{D}")));
    }
}
