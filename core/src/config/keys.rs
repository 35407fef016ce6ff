//! The config keys of SPEC §3.1, declared once.
//!
//! Each row of [`config_keys!`] below gives a key's field in [`Layer`], how
//! its value is written ([`Kind`]), its env var, its CLI flag, whether a
//! project config needs approval for it (§7.1), whether only a container
//! can honour it (§6.3), and whether the project may only tighten it
//! (§3.2). From the rows come [`Layer`], [`KEYS`], [`KNOWN_KEYS`], the JSON
//! type check of config files, the `ODEK_*` reading, [`env_var_of`], the
//! container-only check of the merge, the approval knobs, the CLI's sandbox
//! flags and the docs checks. Adding a key is one row here plus its value
//! rule (validation in `merge::validate_layer`, the applied value in
//! [`super::Settings`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::parse::{kind, Ctx, ValueKind};
use super::ConfigError;

/// How a key's value is written (SPEC §3.1): decides the JSON type check,
/// the reading of its env var and the shape of its flag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// JSON `true`/`false`; env `1/true/yes/on`, `0/false/no/off`; a flag
    /// without a value that sets `true`.
    Bool,
    /// A string, taken verbatim (checked by validation).
    Text,
    /// An array of strings; env and flag: a comma-separated list.
    List,
    /// An integer that fits i64 (not a float, not a string); env: decimal.
    Integer,
    /// A string like `512m`, or a non-negative integer of bytes.
    Memory,
    /// A string like `0.5`, or a JSON number.
    Cpus,
    /// An object of `NAME: "value"` strings.
    Map,
}

/// A key's CLI flag (shared by `run`, `sandbox up`, `config view`, `mcp`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flag {
    /// The long flag, e.g. `--sandbox-memory`.
    pub long: &'static str,
    /// The value's placeholder in `--help` (`""` for a [`Kind::Bool`] switch).
    pub value_name: &'static str,
    /// The `--help` line.
    pub help: &'static str,
    /// For [`Kind::Bool`]: the flag that sets `false` and its `--help` line.
    pub off: Option<(&'static str, &'static str)>,
}

/// One config key (SPEC §3.1): a row of the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Key {
    /// The key as written in config files, e.g. `sandbox_memory`.
    pub name: &'static str,
    /// How its value is written.
    pub kind: Kind,
    /// Its `ODEK_*` variable; `None` for keys only files can set.
    pub env: Option<&'static str>,
    /// Its CLI flag; `None` for keys only files and env can set.
    pub flag: Option<Flag>,
    /// `Some(n)` when a value from the project config needs approval
    /// (SPEC §7.1); `n` orders the knobs in the approval request.
    pub approval: Option<u8>,
    /// `Some(n)` when only a container can honour the setting (asking for
    /// it turns the sandbox on explicitly, SPEC §6.3); `n` orders which key
    /// a message names when one source sets several (lowest first).
    pub container_only: Option<u8>,
    /// A project config may only tighten it (SPEC §3.2; the rule itself is
    /// `merge::tighten`, and a test checks that it narrows exactly the rows
    /// marked here).
    pub tighten: bool,
    /// `config view` shows it even when no source sets it (a default).
    pub always_shown: bool,
}

/// The table. Each row: doc lines, `field: type = kind { … }`; the field is
/// the key's name and its [`Layer`] field, `type` what the kind yields.
macro_rules! config_keys {
    ($(
        $(#[doc = $doc:literal])*
        $field:ident: $ty:ty = $kind:ident {
            env: $env:expr,
            flag: $flag:expr,
            approval: $approval:expr,
            container_only: $co:expr,
            tighten: $tighten:expr,
            always_shown: $shown:expr $(,)?
        }
    ),* $(,)?) => {
        /// The settings one source gives, type-checked but not yet validated
        /// (SPEC §3.1). `None` = the source does not set the key.
        #[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
        pub struct Layer {
            $( $(#[doc = $doc])* pub $field: Option<$ty>, )*
        }

        /// Every config key, in the order of CONFIG.md's table.
        pub const KEYS: &[Key] = &[$(
            Key {
                name: stringify!($field),
                kind: <kind::$kind as ValueKind>::KIND,
                env: $env,
                flag: $flag,
                approval: $approval,
                container_only: $co,
                tighten: $tighten,
                always_shown: $shown,
            },
        )*];

        /// The keys of SPEC §3.1 that a config file may set, in the order
        /// of CONFIG.md's table.
        pub const KNOWN_KEYS: &[&str] = &[$( stringify!($field) ),*];

        /// Each key's name as a constant named like the key
        /// (`names::sandbox_memory == "sandbox_memory"`): code outside this
        /// file names a key only through these (a test scans the sources).
        #[allow(non_upper_case_globals)]
        pub mod names {
            $( #[doc = concat!("`", stringify!($field), "`.")] pub const $field: &str = stringify!($field); )*
        }

        impl Layer {
            /// Type-checks a config file's JSON value for `key` and sets it.
            /// `Ok(false)`: not a key.
            pub(super) fn set_json(
                &mut self,
                key: &str,
                ctx: &Ctx<'_>,
                value: serde_json::Value,
            ) -> Result<bool, ConfigError> {
                match key {
                    $( stringify!($field) => {
                        self.$field = Some(<kind::$kind as ValueKind>::json(ctx, value)?);
                    } )*
                    _ => return Ok(false),
                }
                Ok(true)
            }

            /// Sets `key` from the (non-empty) text of its env var or flag,
            /// read by the env rules of CONFIG.md: booleans
            /// `1/true/yes/on`, `0/false/no/off`; lists comma-separated
            /// (items trimmed, none empty); integers decimal (optional `-`,
            /// fits i64); other text verbatim. Unknown keys are ignored.
            /// Errors: [`ConfigError::InvalidValue`] with `origin`, e.g.
            /// `env ODEK_SANDBOX` or `flag --sandbox-pids-limit`.
            pub fn set_text(&mut self, key: &str, origin: &str, text: &str) -> Result<(), ConfigError> {
                let ctx = &Ctx { origin, key };
                match key {
                    $( stringify!($field) => {
                        self.$field = Some(<kind::$kind as ValueKind>::text(ctx, text)?);
                    } )*
                    _ => {}
                }
                Ok(())
            }

            /// True when this layer sets `key`.
            pub(crate) fn sets(&self, key: &str) -> bool {
                match key {
                    $( stringify!($field) => self.$field.is_some(), )*
                    _ => false,
                }
            }

            /// True when this layer sets `key` to a value that asks for a
            /// container: set, and `true` for a boolean.
            pub(super) fn asks_for(&self, key: &str) -> bool {
                match key {
                    $( stringify!($field) => self
                        .$field
                        .as_ref()
                        .is_some_and(<kind::$kind as ValueKind>::asks),
                    )*
                    _ => false,
                }
            }
        }
    };
}

const fn flag(long: &'static str, value_name: &'static str, help: &'static str) -> Option<Flag> {
    Some(Flag {
        long,
        value_name,
        help,
        off: None,
    })
}

config_keys! {
    /// `sandbox`.
    sandbox: bool = Bool {
        env: Some("ODEK_SANDBOX"),
        flag: Some(Flag {
            long: "--sandbox",
            value_name: "",
            help: "Require the sandbox: an unreachable daemon or unpullable image is fatal instead of falling back to the host",
            off: Some(("--no-sandbox", "Run on the host without a sandbox (networks cannot be attached then)")),
        }),
        approval: None,
        container_only: None,
        tighten: true,
        always_shown: true,
    },
    /// `sandbox_image`: an image reference.
    sandbox_image: String = Text {
        env: Some("ODEK_SANDBOX_IMAGE"),
        flag: flag("--sandbox-image", "REF", "Image reference to run (default: Dockerfile.odek, else the pinned alpine)"),
        approval: Some(1),
        container_only: None,
        tighten: false,
        always_shown: true,
    },
    /// `sandbox_network`: raw text, checked by [`super::parse_network_mode`].
    sandbox_network: String = Text {
        env: Some("ODEK_SANDBOX_NETWORK"),
        flag: flag("--sandbox-network", "none|bridge", "Network mode: `none` (default) or `bridge`. To attach Docker networks use --sandbox-networks or --sandbox-compose"),
        approval: Some(2),
        container_only: Some(8),
        tighten: false,
        always_shown: true,
    },
    /// `sandbox_networks`: network names.
    sandbox_networks: Vec<String> = List {
        env: Some("ODEK_SANDBOX_NETWORKS"),
        flag: flag("--sandbox-networks", "A,B", "Docker networks to attach, by exact name (comma-separated)"),
        approval: Some(5),
        container_only: None,
        tighten: false,
        always_shown: false,
    },
    /// `sandbox_compose_project`.
    sandbox_compose_project: String = Text {
        env: Some("ODEK_SANDBOX_COMPOSE_PROJECT"),
        flag: flag("--sandbox-compose", "PROJECT", "Attach every network of this running Compose project"),
        approval: Some(6),
        container_only: None,
        tighten: false,
        always_shown: false,
    },
    /// `sandbox_stack`: a running Docker Swarm stack whose networks
    /// (label `com.docker.stack.namespace`) the sandbox reaches (SPEC §4.1).
    sandbox_stack: String = Text {
        env: Some("ODEK_SANDBOX_STACK"),
        flag: flag("--sandbox-stack", "STACK", "Attach every network of this running Docker Swarm stack (its overlays must be attachable)"),
        approval: Some(7),
        container_only: None,
        tighten: false,
        always_shown: false,
    },
    /// `sandbox_egress`: egress mode (SPEC §4.5) when set, even empty: the
    /// sandbox's only way out is odek's proxy, to these host patterns
    /// (`pypi.org`, `*.githubusercontent.com`, `host:port`; a bare host
    /// allows ports 80 and 443). Empty: no way out at all.
    sandbox_egress: Vec<String> = List {
        env: Some("ODEK_SANDBOX_EGRESS"),
        flag: flag("--sandbox-egress", "HOST[,HOST...]", "Egress mode: the only way out is odek's proxy, to these hosts (pypi.org, *.example.com, host:port; a bare host allows 80 and 443); repeatable"),
        approval: Some(8),
        container_only: Some(9),
        tighten: false,
        always_shown: false,
    },
    /// `sandbox_egress_network`: the network through which the egress
    /// proxy reaches out (SPEC §4.5); default the engine's default bridge.
    sandbox_egress_network: String = Text {
        env: Some("ODEK_SANDBOX_EGRESS_NETWORK"),
        flag: flag("--sandbox-egress-network", "NETWORK", "The network through which the egress proxy reaches out (default: the engine's default bridge)"),
        approval: Some(9),
        container_only: Some(10),
        tighten: false,
        always_shown: false,
    },
    /// `sandbox_pids_limit` (any integer here; must be ≥ 1 to pass validation).
    sandbox_pids_limit: i64 = Integer {
        env: Some("ODEK_SANDBOX_PIDS_LIMIT"),
        flag: flag("--sandbox-pids-limit", "N", "Maximum number of processes (default 4096)"),
        approval: None,
        container_only: Some(5),
        tighten: true,
        always_shown: true,
    },
    /// `sandbox_readonly`.
    sandbox_readonly: bool = Bool {
        env: Some("ODEK_SANDBOX_READONLY"),
        flag: flag("--sandbox-readonly", "", "Mount /workspace read-only"),
        approval: None,
        container_only: Some(1),
        tighten: true,
        always_shown: true,
    },
    /// `sandbox_memory`, e.g. `512m` (a JSON integer is taken as bytes).
    sandbox_memory: String = Memory {
        env: Some("ODEK_SANDBOX_MEMORY"),
        flag: flag("--sandbox-memory", "SIZE", "Memory limit, e.g. 512m, 2g (default 4g)"),
        approval: None,
        container_only: Some(2),
        tighten: true,
        always_shown: true,
    },
    /// `sandbox_cpus`, e.g. `0.5`.
    sandbox_cpus: String = Cpus {
        env: Some("ODEK_SANDBOX_CPUS"),
        flag: flag("--sandbox-cpus", "CPUS", "CPU limit, e.g. 0.5, 2"),
        approval: None,
        container_only: Some(3),
        tighten: true,
        always_shown: false,
    },
    /// `sandbox_user`: `uid[:gid]` or a name.
    sandbox_user: String = Text {
        env: Some("ODEK_SANDBOX_USER"),
        flag: flag("--sandbox-user", "USER", "User in the container: uid[:gid] or a name"),
        approval: None,
        container_only: Some(4),
        tighten: true,
        always_shown: false,
    },
    /// `sandbox_runtime`: the OCI runtime the engine runs the sandbox with
    /// (`HostConfig.Runtime`), one of the runtimes the engine reports
    /// (`GET /info` `Runtimes`); unset: the engine's default runtime.
    sandbox_runtime: String = Text {
        env: Some("ODEK_SANDBOX_RUNTIME"),
        flag: flag("--sandbox-runtime", "NAME", "OCI runtime the engine runs the sandbox with, one the engine has registered (e.g. runc, crun, kata-runtime; gVisor's runsc is refused); default: the engine's default runtime"),
        approval: Some(10),
        container_only: Some(11),
        tighten: false,
        always_shown: false,
    },
    /// `sandbox_workspace`: how the working directory reaches the
    /// sandbox's `/workspace` (SPEC §6.1 "workspace"): `bind` (mounted, the
    /// default) or `copy` (uploaded at launch, copied back on request and
    /// at `down`), checked by [`super::parse_workspace_mode`]. Only the
    /// operator sets it: a project value is ignored with a warning.
    sandbox_workspace: String = Text {
        env: Some("ODEK_SANDBOX_WORKSPACE"),
        flag: flag("--sandbox-workspace", "bind|copy", "How /workspace reaches the sandbox: `bind` mounts the working directory (default); `copy` uploads it at launch and copies changes back at `odek sandbox down`, at the end of `odek run` and on `odek sandbox copy-back` (for an engine on another machine)"),
        approval: None,
        container_only: None,
        tighten: true,
        always_shown: true,
    },
    /// `sandbox_env`: KEY → value (values may use `${HOST_VAR}`).
    sandbox_env: BTreeMap<String, String> = Map {
        env: None,
        flag: None,
        approval: Some(3),
        container_only: Some(6),
        tighten: false,
        always_shown: false,
    },
    /// `sandbox_volumes`: `host:container[:ro|rw]`.
    sandbox_volumes: Vec<String> = List {
        env: None,
        flag: None,
        approval: Some(4),
        container_only: Some(7),
        tighten: false,
        always_shown: false,
    },
    /// `sandbox_pool`: how many ready sandboxes a long-lived owner (`odek
    /// mcp`, a library client) keeps per plan, 0 (off) to
    /// [`super::MAX_POOL`]. The flag is `odek mcp`'s own (`run` is
    /// one-shot: a pool there would serve nobody).
    sandbox_pool: i64 = Integer {
        env: Some("ODEK_SANDBOX_POOL"),
        flag: None,
        approval: None,
        container_only: None,
        tighten: true,
        always_shown: false,
    },
    /// `sandbox_log_retention`: days a sandbox's record (its log under
    /// `$ODEK_HOME/sandboxes/<name>/`, [`crate::audit`]) is kept after the
    /// sandbox ended, 0 (removed when it ends) to
    /// [`super::MAX_LOG_RETENTION`]. Only the operator sets it: a project
    /// value is ignored with a warning.
    sandbox_log_retention: i64 = Integer {
        env: Some("ODEK_SANDBOX_LOG_RETENTION"),
        flag: None,
        approval: None,
        container_only: None,
        tighten: true,
        always_shown: false,
    },
}

/// The row of `name`, if it is a key.
pub fn key(name: &str) -> Option<&'static Key> {
    KEYS.iter().find(|k| k.name == name)
}

/// The env var behind a config key (SPEC §3.1): `Some("ODEK_SANDBOX_IMAGE")`
/// for `"sandbox_image"`; `None` for keys only files can set
/// (`sandbox_env`, `sandbox_volumes`) and for unknown keys.
pub fn env_var_of(key_name: &str) -> Option<&'static str> {
    key(key_name).and_then(|k| k.env)
}

/// The keys whose project value needs approval (SPEC §7.1), in the order
/// the approval request lists them.
pub(crate) fn approval_keys() -> Vec<&'static Key> {
    let mut keys: Vec<&Key> = KEYS.iter().filter(|k| k.approval.is_some()).collect();
    keys.sort_by_key(|k| k.approval);
    keys
}

/// The keys only a container can honour (SPEC §6.3), in the order a
/// message prefers to name them.
pub(crate) fn container_only_keys() -> Vec<&'static Key> {
    let mut keys: Vec<&Key> = KEYS.iter().filter(|k| k.container_only.is_some()).collect();
    keys.sort_by_key(|k| k.container_only);
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_consistent() {
        assert_eq!(KEYS.len(), KNOWN_KEYS.len());
        for (k, name) in KEYS.iter().zip(KNOWN_KEYS) {
            assert_eq!(k.name, *name);
            if let Some(var) = k.env {
                assert_eq!(var, format!("ODEK_{}", k.name.to_ascii_uppercase()));
            }
            if let Some(f) = k.flag {
                assert!(f.long.starts_with("--sandbox"), "{f:?}");
                assert_eq!(f.value_name.is_empty(), k.kind == Kind::Bool, "{f:?}");
                assert!(f.off.is_none() || k.kind == Kind::Bool, "{f:?}");
                assert!(!f.help.ends_with('.'), "clap shows help without a period");
            }
        }
        // The orders are permutations: no two rows share a rank.
        for ranks in [
            approval_keys()
                .iter()
                .map(|k| k.approval)
                .collect::<Vec<_>>(),
            container_only_keys()
                .iter()
                .map(|k| k.container_only)
                .collect(),
        ] {
            let want: Vec<Option<u8>> = (1..=ranks.len() as u8).map(Some).collect();
            assert_eq!(ranks, want);
        }
    }

    #[test]
    fn the_memory_default_is_one_value() {
        let help = key("sandbox_memory")
            .and_then(|k| k.flag)
            .expect("flag")
            .help;
        assert!(
            help.contains(&format!("default {}", super::super::DEFAULT_MEMORY)),
            "{help}"
        );
        assert_eq!(
            super::super::parse_memory("", super::super::DEFAULT_MEMORY),
            Ok(super::super::DEFAULT_MEMORY_BYTES)
        );
    }

    /// No non-test code outside this file spells a key as a string literal
    /// (`"sandbox_memory"`): it uses [`names`], so a renamed or removed key
    /// fails to compile wherever it is used.
    #[test]
    fn keys_are_named_only_through_the_table() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("workspace root")
            .to_path_buf();
        let mut found = Vec::new();
        let mut dirs: Vec<std::path::PathBuf> = ["core/src", "cli/src", "mcp/src", "ffi/src"]
            .iter()
            .map(|d| root.join(d))
            .collect();
        let mut files = 0;
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).expect("read_dir") {
                let path = entry.expect("entry").path();
                if path.is_dir() {
                    dirs.push(path);
                    continue;
                }
                if path.extension().is_none_or(|e| e != "rs") || path.ends_with("config/keys.rs") {
                    continue;
                }
                files += 1;
                let text = std::fs::read_to_string(&path).expect("read");
                // Non-test code: up to the first `#[cfg(test)]`.
                let code = text.split("#[cfg(test)]").next().unwrap_or("");
                for (n, line) in code.lines().enumerate() {
                    if line.trim_start().starts_with("//") {
                        continue;
                    }
                    for k in KNOWN_KEYS {
                        if line.contains(&format!("\"{k}\"")) {
                            found.push(format!("{}:{}: {k}", path.display(), n + 1));
                        }
                    }
                }
            }
        }
        assert!(files > 50, "scanned only {files} files");
        assert!(
            found.is_empty(),
            "use config::keys::names:\n{}",
            found.join("\n")
        );
    }

    #[test]
    fn layer_accessors_follow_the_rows() {
        let mut l = Layer::default();
        assert!(KEYS.iter().all(|k| !l.sets(k.name) && !l.asks_for(k.name)));
        l.sandbox_readonly = Some(false);
        l.sandbox_volumes = Some(vec![]);
        assert!(l.sets("sandbox_readonly") && !l.asks_for("sandbox_readonly"));
        assert!(l.sets("sandbox_volumes") && l.asks_for("sandbox_volumes"));
        assert!(!l.sets("sandbox_env") && !l.sets("nope"));
        assert_eq!(env_var_of("sandbox_cpus"), Some("ODEK_SANDBOX_CPUS"));
        assert_eq!(env_var_of("sandbox_env"), None);
        assert_eq!(env_var_of("nope"), None);
    }
}
