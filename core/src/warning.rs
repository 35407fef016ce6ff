//! Warnings: shown on stderr by the CLI and carried in every resolved value
//! (SPEC §4.3), so bindings can show them too.

use serde::{Deserialize, Serialize};

/// What a warning is about. Stable snake_case names in JSON.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WarningKind {
    /// An unknown key in a config file (SPEC §3.2).
    UnknownKey,
    /// A project setting that would loosen the sandbox was ignored (SPEC §3.2).
    ProjectCannotLoosen,
    /// An invalid `sandbox_network` was downgraded to `none` (lenient mode).
    NetworkModeDowngraded,
    /// An attached network is not `Internal`: the internet is reachable (SPEC §4.3).
    AttachedNetworkNotInternal,
    /// `bridge` combined with attached networks (SPEC §4.3).
    BridgeWithAttached,
    /// The default bridge reaches the Docker gateway, host-bound services and
    /// metadata endpoints (SPEC §4.3).
    BridgeReachesHost,
    /// A warning returned by the engine at create.
    Engine,
    /// Commands run on the host without isolation (SPEC §6.3 loud fallback).
    Fallback,
    /// `$ODEK_HOME` lies inside the working directory and is masked (SPEC §7.3).
    OdekHomeMasked,
    /// What the kernel mounted in the sandbox could not be read back (the
    /// daemon's processes are not visible here); the paths were checked
    /// right before create only (SPEC §6.1).
    MountsUnverified,
    /// The Docker socket the operator named (`DOCKER_HOST`, a Docker
    /// context, the embedding program) belongs to another user than the
    /// effective uid or root, or lies where another user can replace it:
    /// that user's daemon receives the sandbox and its environment (SPEC §6.2).
    DockerSocketNotYours,
    /// The Docker endpoint is plain TCP (no TLS) to a host that is not
    /// loopback: the sandbox, its environment and the daemon's control are
    /// open to the network between (SPEC §6.2.1).
    PlainTcp,
    /// Sandboxes run without odek's supervisor (docs/SANDBOXING.md, "The
    /// supervisor"): commands go through the exec API, and the guarantees
    /// that need the supervisor do not hold. Said once per process.
    SupervisorOff,
    /// A container connected from outside odek to `odek-out` (anything
    /// but this user's sandboxes) or to the sandbox's link network (anything
    /// but the sandbox and its attached networks' containers under their
    /// aliases) was disconnected (SPEC §4.4).
    ForeignMember,
    /// A sandbox with no route out whose DNS lookups the engine may forward
    /// to the host's resolver (CVE-2024-29018), odek unable to close the
    /// path (SPEC §4.6).
    DnsForwarding,
    /// Anything else worth telling.
    Other,
}

/// One warning.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Warning {
    /// What it is about.
    pub kind: WarningKind,
    /// One line (the loud fallback warning has several), no trailing newline.
    pub message: String,
}

impl Warning {
    /// Builds a warning.
    pub(crate) fn new(kind: WarningKind, message: impl Into<String>) -> Warning {
        Warning {
            kind,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}
