//! The approval key (SPEC §7.3): lowercase hex SHA-256 of
//!
//! ```text
//! <absolute project dir> \0 <project image or ""> \0 <project network or "">
//! then for each project env KEY, sorted:                  \0 env:<KEY>
//! then for each project volume string, sorted:            \0 vol:<volume>
//! then for each resolved project network full ID, sorted: \0 net:<ID>
//! then, when the project asks for an OCI runtime:         \0 runtime:<name>
//! then egress (SPEC §4.5), then the engine:  \0 engine:<ID> or \0 endpoint:<endpoint>
//! ```
//!
//! Without networks, a runtime and the engine this is byte-identical to
//! the key earlier odek releases stored; since the engine is bound (network
//! IDs are unique only per engine), a trust stored before asks once more.

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
    /// `sandbox_runtime` as the project wrote it.
    pub runtime: Option<&'a str>,
    /// `sandbox_egress` entries from the project, when they need approval
    /// (SPEC §4.5); `None`: the project sets none that does.
    pub egress: Option<Vec<&'a str>>,
    /// `sandbox_egress_network` from the project.
    pub egress_network: Option<&'a str>,
    /// The engine the approval holds on ([`engine_binding`]);
    /// `None` only for the layout of earlier releases.
    pub engine: Option<&'a str>,
}

pub use crate::engine::engine_binding;

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
    if let Some(r) = input.runtime {
        b.extend_from_slice(b"\0runtime:");
        b.extend_from_slice(r.as_bytes());
    }
    // Egress mode (SPEC §4.5): absent unless the project asks, so keys
    // without it are those of earlier releases. An empty list still says
    // egress mode.
    if let Some(egress) = &input.egress {
        b.extend_from_slice(b"\0egress");
        let mut rules = egress.clone();
        rules.sort_unstable();
        for r in rules {
            b.extend_from_slice(b"\0egress:");
            b.extend_from_slice(r.as_bytes());
        }
    }
    if let Some(n) = input.egress_network {
        b.extend_from_slice(b"\0egress-net:");
        b.extend_from_slice(n.as_bytes());
    }
    if let Some(e) = input.engine {
        b.push(0);
        b.extend_from_slice(e.as_bytes());
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
            runtime: None,
            egress: None,
            egress_network: None,
            engine: None,
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
    fn an_engine_without_an_id_is_bound_by_its_endpoint() {
        assert_eq!(engine_binding(Some("AAAA"), "unix:///x"), "engine:AAAA");
        assert_eq!(engine_binding(None, "unix:///x"), "endpoint:unix:///x");
        assert_eq!(
            engine_binding(Some(" "), "tcp://h:2376"),
            "endpoint:tcp://h:2376"
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
            KeyInput {
                runtime: Some("runsc"),
                ..base()
            },
            KeyInput {
                runtime: Some("runc"),
                ..base()
            },
            KeyInput {
                engine: Some("engine:AAAA"),
                ..base()
            },
            KeyInput {
                engine: Some("engine:BBBB"),
                ..base()
            },
            KeyInput {
                engine: Some("endpoint:unix:///var/run/docker.sock"),
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
        // The runtime is bound after everything else, only when asked for.
        assert_eq!(
            key_bytes(&KeyInput {
                network_ids: vec![&id1],
                runtime: Some("runsc"),
                ..base()
            }),
            [
                format!("/home/dev/app\0\0\0net:{id1}").as_bytes(),
                b"\0runtime:runsc"
            ]
            .concat()
        );
        // The engine is bound last.
        assert_eq!(
            key_bytes(&KeyInput {
                runtime: Some("runsc"),
                engine: Some(&engine_binding(Some("AAAA"), "unix:///x")),
                ..base()
            }),
            b"/home/dev/app\0\0\0runtime:runsc\0engine:AAAA".to_vec()
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
