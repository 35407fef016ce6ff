//! The approval key (SPEC §7.3): lowercase hex SHA-256 of
//!
//! ```text
//! <absolute project dir> \0 <project image or ""> \0 <project network or "">
//! then for each project env KEY, sorted:                  \0 env:<KEY>
//! then for each project volume string, sorted:            \0 vol:<volume>
//! then for each resolved project network full ID, sorted: \0 net:<ID>
//! ```
//!
//! Without networks this is byte-identical to the key earlier odek releases
//! stored, so existing trusts stay valid.

use std::path::Path;

use sha2::{Digest, Sha256};

/// What the key covers: the project-supplied knobs that need approval.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyInput<'a> {
    /// Absolute project directory.
    pub project_dir: &'a Path,
    /// `sandbox_image` as the project wrote it.
    pub image: Option<&'a str>,
    /// `sandbox_network` as the project wrote it.
    pub network: Option<&'a str>,
    /// `sandbox_env` keys from the project.
    pub env_keys: Vec<&'a str>,
    /// `sandbox_volumes` entries as written.
    pub volumes: Vec<&'a str>,
    /// Full IDs of the networks the project requested (resolved).
    pub network_ids: Vec<&'a str>,
}

/// The key bytes before hashing (exposed for tests and debugging).
pub fn key_bytes(input: &KeyInput<'_>) -> Vec<u8> {
    use std::os::unix::ffi::OsStrExt;
    let mut b = Vec::new();
    b.extend_from_slice(input.project_dir.as_os_str().as_bytes());
    b.push(0);
    b.extend_from_slice(input.image.unwrap_or("").as_bytes());
    b.push(0);
    b.extend_from_slice(input.network.unwrap_or("").as_bytes());
    let mut env = input.env_keys.clone();
    env.sort_unstable();
    for k in env {
        b.extend_from_slice(b"\0env:");
        b.extend_from_slice(k.as_bytes());
    }
    let mut vols = input.volumes.clone();
    vols.sort_unstable();
    for v in vols {
        b.extend_from_slice(b"\0vol:");
        b.extend_from_slice(v.as_bytes());
    }
    let mut ids = input.network_ids.clone();
    ids.sort_unstable();
    for id in ids {
        b.extend_from_slice(b"\0net:");
        b.extend_from_slice(id.as_bytes());
    }
    b
}

/// The approval key: lowercase hex SHA-256 of [`key_bytes`].
pub(crate) fn approval_key(input: &KeyInput<'_>) -> String {
    hex::encode(Sha256::digest(key_bytes(input)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> KeyInput<'static> {
        KeyInput {
            project_dir: Path::new("/home/dev/app"),
            image: None,
            network: None,
            env_keys: Vec::new(),
            volumes: Vec::new(),
            network_ids: Vec::new(),
        }
    }

    #[test]
    fn spec_vector_full() {
        let k = KeyInput {
            image: Some("node:20-alpine"),
            network: Some("bridge"),
            env_keys: vec!["NODE_ENV", "API_TOKEN"],
            volumes: vec!["./cache:/root/.cache"],
            ..base()
        };
        assert_eq!(
            approval_key(&k),
            "3561f8f5e2c0c7a7377c35c1662047b9b8569fe8ffe12dddd68e74b66c6fb00e"
        );
    }

    #[test]
    fn spec_vector_env_only() {
        let k = KeyInput {
            env_keys: vec!["NODE_ENV"],
            ..base()
        };
        assert_eq!(
            approval_key(&k),
            "aca12fd3616bf2f875efb35d2a8ce7ab4dd2ad7b3399001b68b65fd8240c8fa8"
        );
    }

    #[test]
    fn legacy_layout_without_networks_is_byte_for_byte() {
        let k = KeyInput {
            image: Some("img"),
            network: Some("none"),
            env_keys: vec!["B", "A"],
            volumes: vec!["./b:/b", "./a:/a"],
            ..base()
        };
        assert_eq!(
            key_bytes(&k),
            b"/home/dev/app\0img\0none\0env:A\0env:B\0vol:./a:/a\0vol:./b:/b".to_vec()
        );
    }

    #[test]
    fn every_knob_alone_changes_the_key() {
        let id1 = "a".repeat(64);
        let id2 = "b".repeat(64);
        let variants = vec![
            base(),
            KeyInput {
                project_dir: Path::new("/home/dev/other"),
                ..base()
            },
            KeyInput {
                image: Some("x"),
                ..base()
            },
            KeyInput {
                network: Some("bridge"),
                ..base()
            },
            KeyInput {
                env_keys: vec!["K"],
                ..base()
            },
            KeyInput {
                volumes: vec!["./a:/a"],
                ..base()
            },
            KeyInput {
                network_ids: vec![&id1],
                ..base()
            },
            KeyInput {
                network_ids: vec![&id2],
                ..base()
            },
            KeyInput {
                network_ids: vec![&id1, &id2],
                ..base()
            },
        ];
        let keys: std::collections::BTreeSet<String> = variants.iter().map(approval_key).collect();
        assert_eq!(keys.len(), variants.len(), "two inputs share a key");
        // Order of IDs does not matter; the set does.
        assert_eq!(
            approval_key(&KeyInput {
                network_ids: vec![&id2, &id1],
                ..base()
            }),
            approval_key(&KeyInput {
                network_ids: vec![&id1, &id2],
                ..base()
            })
        );
        // An env key and a volume with the same text are distinguished.
        assert_ne!(
            approval_key(&KeyInput {
                env_keys: vec!["X"],
                ..base()
            }),
            approval_key(&KeyInput {
                volumes: vec!["X"],
                ..base()
            })
        );
    }
}
