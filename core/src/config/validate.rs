//! Value checks of SPEC §3.4. Pure functions: no Docker, no environment
//! reads (the host environment for interpolation is passed in); only
//! [`resolve_volume`] looks at the file system.
//!
//! `origin` in every signature is a human description of where the value
//! came from (a file path, `env ODEK_SANDBOX_MEMORY`, `flag --sandbox-memory`),
//! used verbatim in error messages. User values appear in messages only
//! through [`super::quote`]; env values never appear.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use super::{quote, ConfigError, CpuLimit, NetworkMode, VolumeMount};

/// Docker's minimum memory limit (6 MiB).
const MIN_MEMORY_BYTES: u128 = 6 * 1024 * 1024;

/// The most CPUs `sandbox_cpus` may ask for.
const MAX_CPUS: u128 = 1024;

/// Longest network name Docker accepts here.
const MAX_NETWORK_NAME_BYTES: usize = 128;

/// Longest env key.
const MAX_ENV_KEY_BYTES: usize = 256;

/// Largest pids limit: the kernel's `PID_MAX_LIMIT` (2^22); Docker passes
/// larger values on and runc then fails at start.
pub const MAX_PIDS_LIMIT: i64 = 4_194_304;

/// Smallest CPU limit in nano-CPUs (0.01 CPU: a 1 ms CFS quota per 100 ms).
const MIN_NANO_CPUS: u128 = 10_000_000;

/// Longest user or group name.
const MAX_USER_NAME_BYTES: usize = 32;

/// Network names with a meaning of their own to Docker.
const RESERVED_NETWORK_NAMES: &[&str] = &["host", "none", "bridge", "default"];

/// Host directories that are never mounted, nor any ancestor of them.
const SYSTEM_ROOTS: &[&str] = &[
    "/",
    "/etc",
    "/proc",
    "/sys",
    "/dev",
    "/var/run",
    "/run",
    "/root",
    "/home",
    "/Users",
    "/private",
    "/usr",
    "/boot",
    "/var/lib/docker",
];

/// Host directories below which nothing is mounted (kernel interfaces,
/// devices, Docker's own state) — the volume rule of SPEC §3.4.
const NO_MOUNT_BELOW: &[&str] = &["/proc", "/sys", "/dev", "/boot", "/var/lib/docker"];

/// Host directories below which the working directory may not lie either: it
/// is mounted read-write at `/workspace`, and a root container writing into
/// `/etc/cron.d`, `/usr/local/bin` or `/var/spool` would run code on the host.
const NO_WORKDIR_BELOW: &[&str] = &[
    "/proc",
    "/sys",
    "/dev",
    "/boot",
    "/etc",
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/run",
    "/var/run",
    "/var/lib/docker",
    "/var/spool",
    "/var/log",
    "/var/cache",
    "/var/snap",
    // macOS spellings after canonicalisation (untested here).
    "/private/etc",
    "/private/var/run",
    "/private/var/db",
    "/System",
    "/Library",
];

/// Shared directories the working directory may not be, nor an ancestor
/// of: other programs keep their files and sockets there (`/tmp/tmux-0`,
/// ssh agents, `/var/mail`, `/var/backups`), which a root sandbox at
/// `/workspace` could read, replace or connect to. A project below `/tmp`
/// or `/opt` is fine.
const NO_WORKDIR_AT: &[&str] = &[
    "/tmp",
    "/var/tmp",
    "/opt",
    "/srv",
    "/var",
    "/var/mail",
    "/var/local",
    "/var/backups",
    // macOS spellings after canonicalisation (untested here).
    "/private/tmp",
    "/private/var/tmp",
];

/// Where the Docker daemon's socket lives.
const DOCKER_SOCKETS: &[&str] = &["/var/run/docker.sock", "/run/docker.sock"];

/// How far below the working directory [`validate_workdir`] looks for a
/// Unix socket (and below a mounted directory [`resolve_volume`] for a
/// `docker.sock` entry), and how many entries it looks at at most.
const SOCKET_SCAN_DEPTH: usize = 4;
const SOCKET_SCAN_ENTRIES: usize = 50_000;

/// `sandbox_network`: exactly `none` or `bridge` (case-sensitive, no
/// whitespace). Anything else (`host`, `HOST`, `container:…`, `ns:…`, a
/// network name) → [`ConfigError::InvalidNetworkMode`], whose message points
/// to `sandbox_networks` / `--sandbox-compose`.
pub fn parse_network_mode(origin: &str, value: &str) -> Result<NetworkMode, ConfigError> {
    match value {
        "none" => Ok(NetworkMode::None),
        "bridge" => Ok(NetworkMode::Bridge),
        _ => Err(ConfigError::InvalidNetworkMode {
            origin: origin.to_string(),
            value: quote(value),
        }),
    }
}

/// A network name: Docker's charset `[A-Za-z0-9][A-Za-z0-9_.-]*`, 1..=128
/// bytes; reserved `host`, `none`, `bridge`, `default` (in any letter case)
/// and anything with `:` or `/` refused → [`ConfigError::InvalidNetworkName`].
/// Hex-looking names (`cafe`, 12 or 64 hex digits) are valid here; lookups
/// that Docker answers by ID prefix are refused at resolution (SPEC §4.1).
pub fn validate_network_name(origin: &str, value: &str) -> Result<(), ConfigError> {
    let refuse = |reason: String| ConfigError::InvalidNetworkName {
        origin: origin.to_string(),
        value: quote(value),
        reason,
    };
    if value.is_empty() {
        return Err(refuse("it is empty".to_string()));
    }
    if value.len() > MAX_NETWORK_NAME_BYTES {
        return Err(refuse(format!(
            "it is {} bytes long; network names are at most {MAX_NETWORK_NAME_BYTES} bytes",
            value.len()
        )));
    }
    if value.contains(':') || value.contains('/') {
        return Err(refuse(
            "it contains ':' or '/'; network modes such as container:<id> and paths are not \
             network names"
                .to_string(),
        ));
    }
    if RESERVED_NETWORK_NAMES
        .iter()
        .any(|r| r.eq_ignore_ascii_case(value))
    {
        return Err(refuse(
            "host, none, bridge and default are reserved; use sandbox_network for \"none\" or \
             \"bridge\""
                .to_string(),
        ));
    }
    if let Some((at, c)) = value.char_indices().find(|&(i, c)| {
        let ok_first = c.is_ascii_alphanumeric();
        let ok_rest = ok_first || matches!(c, '_' | '.' | '-');
        if i == 0 {
            !ok_first
        } else {
            !ok_rest
        }
    }) {
        return Err(refuse(format!(
            "character {} at byte {at} is outside Docker's network name charset \
             [A-Za-z0-9][A-Za-z0-9_.-]*",
            char_name(c)
        )));
    }
    Ok(())
}

/// A Compose project name: `[a-z0-9][a-z0-9_-]*` → else
/// [`ConfigError::InvalidComposeProject`] with `normalized` set from
/// [`normalize_compose_project`] (when different and non-empty) and
/// `running` left empty (the caller fills it). Never matched fuzzily.
pub fn validate_compose_project(origin: &str, value: &str) -> Result<(), ConfigError> {
    let mut chars = value.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    let rest_ok =
        chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
    if first_ok && rest_ok && value.len() <= MAX_COMPOSE_PROJECT {
        return Ok(());
    }
    Err(ConfigError::InvalidComposeProject {
        origin: origin.to_string(),
        value: quote(value),
        normalized: normalize_compose_project(value).filter(|n| n != value),
        running: Vec::new(),
    })
}

/// Longest Compose project name accepted (its networks are named
/// `<project>_<network>`, and Docker names stop at 128 bytes or so).
pub const MAX_COMPOSE_PROJECT: usize = 100;

/// Compose's normalisation: lowercase, then drop every character outside
/// `[a-z0-9_-]`, then drop leading `_`/`-`. `None` when nothing is left or
/// the result is longer than `MAX_COMPOSE_PROJECT` (100) (it would not be a
/// valid name either, so it is no use as a hint).
pub fn normalize_compose_project(value: &str) -> Option<String> {
    let kept: String = value
        .to_lowercase()
        .chars()
        .filter(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_' || *c == '-')
        .collect();
    let trimmed = kept.trim_start_matches(['_', '-']);
    (!trimmed.is_empty() && trimmed.len() <= MAX_COMPOSE_PROJECT).then(|| trimmed.to_string())
}

/// `sandbox_pids_limit` must be ≥ 1 (0 and -1 mean unlimited to Docker) and
/// at most `MAX_PIDS_LIMIT` (4 194 304) →
/// the value, else [`ConfigError::InvalidValue`].
pub fn validate_pids_limit(origin: &str, value: i64) -> Result<i64, ConfigError> {
    if value > MAX_PIDS_LIMIT {
        return Err(invalid(
            origin,
            "sandbox_pids_limit",
            format!(
                "must be at most {MAX_PIDS_LIMIT}, the kernel's ceiling for process IDs (got {})",
                quote(&value.to_string())
            ),
        ));
    }
    if value >= 1 {
        return Ok(value);
    }
    Err(invalid(
        origin,
        "sandbox_pids_limit",
        format!(
            "must be a positive integer (got {}); 0 and -1 would mean \"unlimited\" to Docker",
            quote(&value.to_string())
        ),
    ))
}

/// `sandbox_memory` in Docker's notation → bytes: a decimal number
/// (`\d+(\.\d+)?`, so `1.5g` works) with an optional unit `b`, `k`/`kb`,
/// `m`/`mb`, `g`/`gb`, `t`/`tb` (case-insensitive, powers of 1024, no
/// space), at least 6 MiB (Docker's minimum), fits i64. Fractional bytes
/// are rounded down, computed exactly (no float rounding). Stricter than
/// Docker: no space before the unit, no `p`, no `kib`-style units, no
/// exponent. Errors are [`ConfigError::InvalidValue`].
pub fn parse_memory(origin: &str, value: &str) -> Result<i64, ConfigError> {
    let key = "sandbox_memory";
    let bad_form = || {
        invalid(
            origin,
            key,
            format!(
                "must be a size like \"512m\" or \"2g\": a number with an optional unit b, k, m, \
                 g or t (powers of 1024, no space) (got {})",
                quote(value)
            ),
        )
    };
    if value.len() > 64 {
        return Err(bad_form());
    }
    let split = value
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(value.len());
    let (number, unit) = value.split_at(split);
    let shift = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" => 10,
        "m" | "mb" => 20,
        "g" | "gb" => 30,
        "t" | "tb" => 40,
        _ => return Err(bad_form()),
    };
    let (int_part, frac_part) = split_decimal(number).ok_or_else(bad_form)?;
    if frac_part.len() > 24 {
        return Err(bad_form());
    }
    let too_large = || {
        invalid(
            origin,
            key,
            format!(
                "is too large: at most {} bytes (got {})",
                i64::MAX,
                quote(value)
            ),
        )
    };
    let int = digits_value(int_part).ok_or_else(too_large)?;
    let mult: u128 = 1 << shift;
    let frac = digits_value(frac_part).ok_or_else(bad_form)?;
    let frac_bytes = frac * mult / 10u128.pow(frac_part.len() as u32);
    let bytes = int
        .checked_mul(mult)
        .and_then(|b| b.checked_add(frac_bytes))
        .ok_or_else(too_large)?;
    let bytes = i64::try_from(bytes).map_err(|_| too_large())?;
    if (bytes as u128) < MIN_MEMORY_BYTES {
        // A bare number is bytes, as in Docker: `512` is 512 bytes.
        let hint = if value.trim().bytes().all(|b| b.is_ascii_digit()) {
            format!(
                "; a number without a unit is bytes: did you mean {}m?",
                value.trim()
            )
        } else {
            String::new()
        };
        return Err(invalid(
            origin,
            key,
            format!(
                "must be at least 6 MiB ({MIN_MEMORY_BYTES} bytes), Docker's minimum (got {}){hint}",
                quote(value)
            ),
        ));
    }
    Ok(bytes)
}

/// `sandbox_cpus`: a positive decimal (`0.5`, `2`, `\d+(\.\d{1,9})?`) →
/// `NanoCpus` (billionths of a CPU); at most 1024 CPUs. Errors are
/// [`ConfigError::InvalidValue`].
pub fn parse_cpus(origin: &str, value: &str) -> Result<CpuLimit, ConfigError> {
    let key = "sandbox_cpus";
    let bad = |why: &str| {
        invalid(
            origin,
            key,
            format!(
                "must be a positive decimal number of CPUs like 0.5 or 2 ({why}) (got {})",
                quote(value)
            ),
        )
    };
    let (int_part, frac_part) = split_decimal(value)
        .ok_or_else(|| bad("digits with an optional fraction, no sign or unit"))?;
    if frac_part.len() > 9 {
        return Err(bad("at most 9 decimal places"));
    }
    let too_many = || bad("at most 1024");
    let int = digits_value(int_part).ok_or_else(too_many)?;
    let frac =
        digits_value(frac_part).ok_or_else(too_many)? * 10u128.pow(9 - frac_part.len() as u32);
    let nano = int
        .checked_mul(1_000_000_000)
        .and_then(|n| n.checked_add(frac))
        .ok_or_else(too_many)?;
    if nano < MIN_NANO_CPUS {
        return Err(bad(
            "at least 0.01, the smallest CPU quota the kernel applies",
        ));
    }
    if nano > MAX_CPUS * 1_000_000_000 {
        return Err(too_many());
    }
    let nano = i64::try_from(nano).map_err(|_| too_many())?;
    Ok(CpuLimit {
        text: value.to_string(),
        nano,
    })
}

/// `sandbox_user`: `uid`, `uid:gid` (decimal, ≤ 2^31 − 1, runc's limit) or a name / `name:group`
/// matching `[a-z_][a-z0-9_-]*` (≤ 32 bytes each part). Each part is
/// checked on its own, so `1000:staff` and `dev:1000` are accepted as Docker
/// accepts them. Errors are [`ConfigError::InvalidValue`].
pub fn validate_user(origin: &str, value: &str) -> Result<(), ConfigError> {
    let mut parts = value.split(':');
    let user = parts.next().unwrap_or_default();
    let group = parts.next();
    let ok = parts.next().is_none() && user_part_ok(user) && group.is_none_or(user_part_ok);
    if ok {
        return Ok(());
    }
    Err(invalid(
        origin,
        "sandbox_user",
        format!(
            "must be uid[:gid] (decimal, at most 2147483647) or name[:group] (matching \
             [a-z_][a-z0-9_-]*, at most {MAX_USER_NAME_BYTES} bytes each) (got {})",
            quote(value)
        ),
    ))
}

/// An env key: `[A-Za-z_][A-Za-z0-9_]*`, ≤ 256 bytes, not the reserved
/// [`crate::exec::EXEC_TAG_ENV`] → else [`ConfigError::InvalidValue`] for
/// key `sandbox_env`.
pub fn validate_env_key(origin: &str, key: &str) -> Result<(), ConfigError> {
    validate_env_key_as(origin, "sandbox_env", key)
}

/// [`validate_env_key`] with the error naming `what` instead of
/// `sandbox_env` (e.g. `env` for a command's own environment).
pub fn validate_env_key_as(origin: &str, what: &str, key: &str) -> Result<(), ConfigError> {
    if key == crate::exec::EXEC_TAG_ENV {
        return Err(invalid(
            origin,
            what,
            format!(
                "{key} is reserved: odek sets it on every command to find the command's processes"
            ),
        ));
    }
    if is_env_name(key) {
        return Ok(());
    }
    Err(invalid(
        origin,
        what,
        format!(
            "names must match [A-Za-z_][A-Za-z0-9_]* and be at most {MAX_ENV_KEY_BYTES} bytes \
             (got {})",
            quote(key)
        ),
    ))
}

/// Interpolates `${NAME}` (NAME an env-key-shaped name) from `host`; `$$`
/// is a literal `$`; any other `$` is kept literally. A referenced variable
/// that is unset, an unterminated `${`, or a `${…}` whose content is not a
/// name, is an error naming the key (and the variable), never the value.
/// Substituted text is not scanned again. Returns the value and whether any
/// `${…}` was used. NUL bytes in the result are an error. Errors are
/// [`ConfigError::InvalidValue`] for key `sandbox_env`.
pub fn interpolate(
    origin: &str,
    key: &str,
    value: &str,
    host: &BTreeMap<String, String>,
) -> Result<(String, bool), ConfigError> {
    let fail = |what: String| {
        invalid(
            origin,
            "sandbox_env",
            format!("value of {} {what}", quote(key)),
        )
    };
    let mut out = String::with_capacity(value.len());
    let mut used = false;
    let mut rest = value;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(tail) = after.strip_prefix('{') {
            let Some(end) = tail.find('}') else {
                return Err(fail(
                    "has an unterminated \"${\" (write $$ for a literal $)".to_string(),
                ));
            };
            let name = &tail[..end];
            if !is_env_name(name) {
                return Err(fail(
                    "has a \"${…}\" whose content is not a variable name matching \
                     [A-Za-z_][A-Za-z0-9_]* (write $$ for a literal $)"
                        .to_string(),
                ));
            }
            let Some(text) = host.get(name) else {
                return Err(fail(format!(
                    "uses ${{{name}}}, but the host variable {} is not set",
                    quote(name)
                )));
            };
            out.push_str(text);
            used = true;
            rest = &tail[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    if out.contains('\0') {
        return Err(fail(
            "contains a NUL character after interpolation".to_string(),
        ));
    }
    Ok((out, used))
}

/// The host variables a `sandbox_env` value reads: each `${NAME}`, skipping
/// `$$` escapes. Names only, in order, without repeats.
pub fn host_refs(value: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut rest = value;
    while let Some(at) = rest.find('$') {
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            rest = tail;
        } else if let Some(tail) = after.strip_prefix('{') {
            match tail.find('}') {
                Some(end) => {
                    let name = tail[..end].to_string();
                    if !out.contains(&name) {
                        out.push(name);
                    }
                    rest = &tail[end + 1..];
                }
                None => break,
            }
        } else {
            rest = after;
        }
    }
    out
}

/// One `sandbox_volumes` entry `host:container[:ro|rw]` (SPEC §3.4): the host
/// path (relative to `workdir` or absolute) must lie inside `workdir` (and
/// not be `workdir` itself, which is already mounted at `/workspace`), with
/// no `..` component, and no symlink at any component between `workdir` and
/// the final path (inclusive); it must exist; it must not be (or contain)
/// the Docker socket — `/var/run/docker.sock`, `/run/docker.sock`, any Unix
/// socket, or a directory with a `docker.sock` entry up to 4 levels down —
/// nor be a system root (`/`, `/etc`, `/proc`, `/sys`, `/dev`, `/var/run`,
/// `/run`, `/root`, `/home`, `/usr`, `/boot`, `/var/lib/docker`), an
/// ancestor of one, or below `/proc`, `/sys`, `/dev`, `/boot` or
/// `/var/lib/docker`, even if `workdir` is one of them. The container path
/// must be absolute, without `..`, and not `/`, `/workspace` itself, `/tmp`,
/// nor `/proc`, `/sys`, `/dev` or below them. Options: only `ro` or `rw`.
/// Control and invisible formatting characters (bidi overrides, zero-width)
/// are refused anywhere in the entry. `workdir` is absolute and canonical
/// (else [`ConfigError::Workdir`]). Returns the canonical host path and the
/// normalised container path; errors are [`ConfigError::InvalidVolume`].
pub fn resolve_volume(
    origin: &str,
    spec: &str,
    workdir: &Path,
) -> Result<VolumeMount, ConfigError> {
    let refuse = |reason: String| ConfigError::InvalidVolume {
        origin: origin.to_string(),
        value: quote(spec),
        reason,
    };
    if let Some(c) = spec.chars().find(|&c| is_hidden_or_control(c)) {
        return Err(refuse(format!(
            "it contains the control or invisible character {}",
            char_name(c)
        )));
    }
    let parts: Vec<&str> = spec.split(':').collect();
    let (host, container, read_only) = match parts.as_slice() {
        [host, container] => (*host, *container, false),
        [host, container, "ro"] => (*host, *container, true),
        [host, container, "rw"] => (*host, *container, false),
        [_, _, option] => {
            return Err(refuse(format!(
                "option {} is not supported; use ro or rw",
                quote(option)
            )))
        }
        _ => {
            return Err(refuse(
                "it must have the form host:container[:ro|rw]".to_string(),
            ))
        }
    };
    if host.is_empty() {
        return Err(refuse("the host path is empty".to_string()));
    }
    if container.is_empty() {
        return Err(refuse("the container path is empty".to_string()));
    }
    let container = container_path(container).map_err(refuse)?;
    check_workdir(workdir)?;
    let host = host_path(host, workdir).map_err(refuse)?;
    Ok(VolumeMount {
        spec: spec.to_string(),
        host,
        container,
        read_only,
    })
}

// ---------------------------------------------------------------------------
// Helpers

fn invalid(origin: &str, key: &str, reason: String) -> ConfigError {
    ConfigError::InvalidValue {
        origin: origin.to_string(),
        key: key.to_string(),
        reason,
    }
}

/// A character for a message: printable ASCII as `'x'`, anything else as
/// `U+XXXX` so nothing invisible or control reaches a terminal.
fn char_name(c: char) -> String {
    if c.is_ascii_graphic() {
        format!("'{c}'")
    } else {
        format!("U+{:04X}", u32::from(c))
    }
}

/// Control characters and invisible formatting characters that can make a
/// displayed value differ from the real one (bidi controls, zero-width).
fn is_hidden_or_control(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061C}'
                | '\u{180E}'
                | '\u{200B}'..='\u{200F}'
                | '\u{2028}'..='\u{202E}'
                | '\u{2060}'..='\u{2064}'
                | '\u{2066}'..='\u{2069}'
                | '\u{FEFF}'
        )
}

/// Splits `\d+(\.\d+)?` into integer and fraction digits.
fn split_decimal(number: &str) -> Option<(&str, &str)> {
    let (int_part, frac_part) = match number.split_once('.') {
        Some((i, f)) if !f.is_empty() => (i, f),
        Some(_) => return None,
        None => (number, ""),
    };
    let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    (!int_part.is_empty() && all_digits(int_part) && all_digits(frac_part))
        .then_some((int_part, frac_part))
}

/// The value of ASCII digits (`""` → 0); `None` when it exceeds 30 digits
/// after leading zeros (far beyond any accepted value) or u128.
fn digits_value(digits: &str) -> Option<u128> {
    let significant = digits.trim_start_matches('0');
    if significant.len() > 30 {
        return None;
    }
    if significant.is_empty() {
        return Some(0);
    }
    significant.parse().ok()
}

fn user_part_ok(part: &str) -> bool {
    if !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()) {
        // runc refuses ids above 2^31 - 1 at start, after the container
        // exists: refuse them here, before.
        return part.parse::<u32>().is_ok_and(|id| id <= i32::MAX as u32);
    }
    let mut chars = part.chars();
    part.len() <= MAX_USER_NAME_BYTES
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    name.len() <= MAX_ENV_KEY_BYTES
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Checks a container path and returns it normalised (no `.`, no empty
/// components, no trailing `/`).
fn container_path(path: &str) -> Result<String, String> {
    if !path.starts_with('/') {
        return Err(format!(
            "the container path {} must be absolute",
            quote(path)
        ));
    }
    let mut parts = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                return Err(format!(
                    "the container path {} must not contain a '..' component",
                    quote(path)
                ))
            }
            _ => parts.push(part),
        }
    }
    let normalized = format!("/{}", parts.join("/"));
    let refused = match parts.as_slice() {
        [] => Some("/ is the container's root"),
        ["workspace"] => Some("/workspace is where the working directory is mounted"),
        ["tmp"] => Some("/tmp is the sandbox's noexec tmpfs"),
        ["proc" | "sys" | "dev", ..] => Some("/proc, /sys and /dev belong to the kernel"),
        _ => None,
    };
    match refused {
        Some(why) => Err(format!(
            "the container path {} is not allowed: {why}",
            quote(&normalized)
        )),
        None => Ok(normalized),
    }
}

/// The working directory is mounted at `/workspace` read-write, and the
/// sandbox runs as root by default: it must not be a system directory (or an
/// ancestor of one), a shared directory such as `/tmp`, `/var/tmp`, `/opt`,
/// `/srv` or `/var` (or an ancestor of one, `NO_WORKDIR_AT`), lie below
/// one the host runs code or state from (`NO_WORKDIR_BELOW`, `/var/lib`
/// except a service user's home there), be a login user's home directory or
/// an ancestor of one, or lie in a hidden directory of one (`~/.ssh`). It
/// must have nothing mounted anywhere below it (`/proc/self/mountinfo`:
/// Docker mounts it recursively, so a bind mount of `/var/run` deep inside
/// would hand the sandbox the Docker socket), and hold no Unix socket (and
/// no entry named `docker.sock`) within 4 levels (`SOCKET_SCAN_DEPTH`) and the
/// first 50 000 entries (`SOCKET_SCAN_ENTRIES`; lstat, no symlink followed): as
/// root, the sandbox could connect to a root-owned tmux or agent socket and
/// run commands on the host. Login homes are `$HOME` and those of root and
/// of users with uid 1000–65533 in `/etc/passwd`. `workdir` is canonical.
/// SPEC §3.4 applied to the mount every sandbox gets.
///
/// # Errors
/// [`ConfigError::Workdir`] naming the rule (and the socket or mount point,
/// quoted) and the fix.
pub fn validate_workdir(workdir: &Path, home: Option<&Path>) -> Result<(), ConfigError> {
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let mut homes = login_homes(&passwd);
    homes.extend(home.and_then(|h| h.canonicalize().ok()));
    homes.push(PathBuf::from("/root"));
    homes.retain(|h| h.parent().is_some());
    let service_homes: Vec<PathBuf> = passwd_entries(&passwd)
        .map(|(_, h)| PathBuf::from(h))
        .collect();
    check_workdir_paths(workdir, &homes, &service_homes)?;
    check_workdir_sockets(workdir)
}

/// `(uid, home)` of each well-formed `/etc/passwd` line.
fn passwd_entries(passwd: &str) -> impl Iterator<Item = (u32, &str)> {
    passwd.lines().filter_map(|line| {
        let f: Vec<&str> = line.split(':').collect();
        let uid = f.get(2)?.parse().ok()?;
        let home = *f.get(5)?;
        home.starts_with('/').then_some((uid, home))
    })
}

/// Homes of root and of login users (uid 1000–65533), canonical, existing.
fn login_homes(passwd: &str) -> Vec<PathBuf> {
    passwd_entries(passwd)
        .filter(|(uid, _)| *uid == 0 || (1000..65534).contains(uid))
        .filter_map(|(_, h)| Path::new(h).canonicalize().ok())
        .collect()
}

/// The path rules of [`validate_workdir`] (no file system access).
fn check_workdir_paths(
    workdir: &Path,
    homes: &[PathBuf],
    service_homes: &[PathBuf],
) -> Result<(), ConfigError> {
    let fail = |reason: String| ConfigError::Workdir {
        path: workdir.to_path_buf(),
        reason: format!("{reason}; run odek from (or pass -C) a project directory"),
    };
    if SYSTEM_ROOTS
        .iter()
        .any(|root| Path::new(root).starts_with(workdir))
    {
        return Err(fail(
            "is (or contains) a system directory and would be mounted at /workspace".into(),
        ));
    }
    if let Some(shared) = NO_WORKDIR_AT
        .iter()
        .find(|dir| Path::new(dir).starts_with(workdir))
    {
        return Err(fail(format!(
            "is (or contains) the shared directory {shared}, where other programs keep files and sockets (tmux, ssh agents) that a sandbox must not reach; a project directory below it is fine"
        )));
    }
    if let Some(root) = NO_WORKDIR_BELOW
        .iter()
        .find(|root| workdir.starts_with(root))
    {
        return Err(fail(format!(
            "lies in the system directory {root}, which a sandbox must not write to"
        )));
    }
    // /var/lib holds the host's package, container and service state; a
    // service user's home there (e.g. /var/lib/jenkins) is a workspace.
    let var_lib = Path::new("/var/lib");
    if workdir.starts_with(var_lib)
        && !service_homes
            .iter()
            .any(|h| h != var_lib && h.starts_with(var_lib) && workdir.starts_with(h))
    {
        return Err(fail(
            "lies in the system directory /var/lib, which a sandbox must not write to".into(),
        ));
    }
    for home in homes {
        let shown = quote(&home.display().to_string());
        if home == workdir {
            return Err(fail(format!(
                "is the home directory {shown} (credentials live there) and would be mounted at /workspace"
            )));
        }
        if home.starts_with(workdir) {
            return Err(fail(format!(
                "contains the home directory {shown} (credentials live there) and would be mounted at /workspace"
            )));
        }
        // `~/.ssh`, `~/.aws`, `~/.config/…`: credentials and configuration
        // the host runs with.
        let hidden = workdir
            .strip_prefix(home)
            .ok()
            .and_then(|rest| rest.components().next())
            .is_some_and(|c| c.as_os_str().to_string_lossy().starts_with('.'));
        if hidden {
            return Err(fail(format!(
                "lies in a hidden directory of the home directory {shown} (credentials and tool configuration live there)"
            )));
        }
    }
    Ok(())
}

/// The socket and mount rules of [`validate_workdir`].
fn check_workdir_sockets(workdir: &Path) -> Result<(), ConfigError> {
    let fail = |reason: String| ConfigError::Workdir {
        path: workdir.to_path_buf(),
        reason,
    };
    // Anything mounted below the workdir, at any depth: Docker binds the
    // working directory recursively, and the scan below neither reaches
    // deep mounts nor sees what a mount hides. A socket bind-mounted over a
    // regular file gets the more specific message.
    let mounts = mount_points_below(workdir);
    if let Some(socket) = mounts
        .iter()
        .find(|m| std::fs::symlink_metadata(m).is_ok_and(|m| is_socket(&m)))
    {
        let shown = quote(&socket.display().to_string());
        return Err(fail(format!(
            "has a Unix socket mounted at {shown} that the sandbox would reach under /workspace; unmount it (umount {shown}) or run odek from (or pass -C) a directory without mounts below it"
        )));
    }
    if let Some(mount) = mounts.first() {
        let shown = quote(&mount.display().to_string());
        return Err(fail(format!(
            "has a file system mounted at {shown}; Docker mounts the working directory with everything mounted below it, so the sandbox would reach it under /workspace (a bind mount of /var/run would hand it the Docker socket); unmount it (umount {shown}) or run odek from (or pass -C) a directory without mounts below it"
        )));
    }
    match find_socket(workdir, true) {
        Some(Socket::Docker(socket)) => Err(fail(format!(
            "holds the Docker socket ({}) that the sandbox would reach under /workspace; remove or move it, or run odek from (or pass -C) a project directory without it",
            quote(&socket.display().to_string())
        ))),
        Some(Socket::Other(socket)) => Err(fail(format!(
            "holds a Unix socket ({}) that the sandbox would reach under /workspace, and a root sandbox could use it against the host (a root-owned tmux socket runs commands there); remove or move the socket, or run odek from (or pass -C) a directory without one (git's fsmonitor daemon, ssh ControlMaster and gpg-agent create sockets)",
            quote(&socket.display().to_string())
        ))),
        None => Ok(()),
    }
}

/// Mount points strictly below `dir`, from `/proc/self/mountinfo` (empty
/// where that file does not exist).
fn mount_points_below(dir: &Path) -> Vec<PathBuf> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    info.lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(|p| PathBuf::from(unescape_mountinfo(p)))
        .filter(|p| p != dir && p.starts_with(dir))
        .collect()
}

/// Undoes mountinfo's octal escapes (`\040` for a space, …);
/// [`crate::mounts::unescape`], as text.
fn unescape_mountinfo(s: &str) -> String {
    crate::mounts::unescape(s).to_string_lossy().into_owned()
}

fn check_workdir(workdir: &Path) -> Result<(), ConfigError> {
    let fail = |reason: String| ConfigError::Workdir {
        path: workdir.to_path_buf(),
        reason,
    };
    if !workdir.is_absolute() {
        return Err(fail("is not an absolute path".to_string()));
    }
    match std::fs::canonicalize(workdir) {
        Ok(canonical) if canonical == workdir => Ok(()),
        Ok(canonical) => Err(fail(format!(
            "is not canonical (it resolves to {})",
            quote(&canonical.display().to_string())
        ))),
        Err(e) => Err(fail(format!("cannot be resolved: {e}"))),
    }
}

/// Resolves and checks the host side; `Err` is the reason.
fn host_path(host: &str, workdir: &Path) -> Result<PathBuf, String> {
    let raw = Path::new(host);
    if raw.components().any(|c| c == Component::ParentDir) {
        return Err("the host path must not contain a '..' component".to_string());
    }
    let joined = if raw.is_absolute() {
        raw.to_path_buf()
    } else {
        workdir.join(raw)
    };
    let normalized: PathBuf = joined
        .components()
        .filter(|c| *c != Component::CurDir)
        .collect();
    let outside = || {
        format!(
            "the host path must be inside the working directory {}",
            quote(&workdir.display().to_string())
        )
    };
    let relative = normalized.strip_prefix(workdir).map_err(|_| outside())?;
    if relative.as_os_str().is_empty() {
        return Err(
            "the host path is the working directory itself, which is already mounted at \
             /workspace"
                .to_string(),
        );
    }

    // Walk down from workdir with lstat: no component may be a symlink.
    let mut current = workdir.to_path_buf();
    let mut last = None;
    for component in relative.components() {
        current.push(component);
        let shown = quote(&current.display().to_string());
        match std::fs::symlink_metadata(&current) {
            Ok(meta) if meta.file_type().is_symlink() => {
                return Err(format!(
                    "{shown} is a symbolic link; symlinks are refused at every component"
                ))
            }
            Ok(meta) => last = Some(meta),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(format!(
                    "{shown} does not exist (host paths are relative to the working directory; \
                     named volumes are not supported)"
                ))
            }
            Err(e) => return Err(format!("cannot inspect {shown}: {e}")),
        }
    }
    let meta = last.ok_or_else(outside)?;

    let canonical = std::fs::canonicalize(&normalized)
        .map_err(|e| format!("cannot resolve the host path: {e}"))?;
    if canonical != normalized || !canonical.starts_with(workdir) {
        return Err(format!(
            "the host path resolves to {}, not to itself (it changed while being checked)",
            quote(&canonical.display().to_string())
        ));
    }

    check_not_sensitive(&canonical, &meta)?;
    Ok(canonical)
}

/// Refuses the Docker socket, sockets in general, system roots and what
/// lies below kernel/device/Docker-state directories.
fn check_not_sensitive(path: &Path, meta: &std::fs::Metadata) -> Result<(), String> {
    let shown = quote(&path.display().to_string());
    if DOCKER_SOCKETS.iter().any(|s| path == Path::new(s)) {
        return Err(format!("{shown} is the Docker socket"));
    }
    if SYSTEM_ROOTS
        .iter()
        .any(|root| Path::new(root).starts_with(path))
    {
        return Err(format!("{shown} is (or contains) a system directory"));
    }
    if NO_MOUNT_BELOW.iter().any(|root| path.starts_with(root)) {
        return Err(format!(
            "{shown} lies in a system directory (/proc, /sys, /dev, /boot, /var/lib/docker)"
        ));
    }
    if path.file_name().is_some_and(|n| n == "docker.sock") {
        return Err(format!("{shown} is named like the Docker socket"));
    }
    if is_socket(meta) {
        return Err(format!(
            "{shown} is a Unix socket; sockets are never mounted (the Docker socket would give \
             the sandbox control of the host)"
        ));
    }
    if meta.is_dir() {
        if let Some(found) = find_docker_socket(path) {
            return Err(format!(
                "it contains the Docker socket or an entry named docker.sock ({})",
                quote(&found.display().to_string())
            ));
        }
    }
    Ok(())
}

fn is_socket(meta: &std::fs::Metadata) -> bool {
    is_socket_type(meta.file_type())
}

#[cfg(unix)]
fn is_socket_type(file_type: std::fs::FileType) -> bool {
    use std::os::unix::fs::FileTypeExt;
    file_type.is_socket()
}

#[cfg(not(unix))]
fn is_socket_type(_file_type: std::fs::FileType) -> bool {
    false
}

/// (device, inode) of the real Docker sockets, to spot hard links to them.
#[cfg(unix)]
fn docker_socket_ids() -> Vec<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    DOCKER_SOCKETS
        .iter()
        .filter_map(|s| std::fs::metadata(s).ok())
        .map(|m| (m.dev(), m.ino()))
        .collect()
}

#[cfg(unix)]
fn is_docker_socket_inode(meta: &std::fs::Metadata, ids: &[(u64, u64)]) -> bool {
    use std::os::unix::fs::MetadataExt;
    ids.contains(&(meta.dev(), meta.ino()))
}

#[cfg(not(unix))]
fn docker_socket_ids() -> Vec<(u64, u64)> {
    Vec::new()
}

#[cfg(not(unix))]
fn is_docker_socket_inode(_meta: &std::fs::Metadata, _ids: &[(u64, u64)]) -> bool {
    false
}

/// A socket [`find_socket`] found.
#[derive(Debug, PartialEq, Eq)]
enum Socket {
    /// An entry named `docker.sock` (of any type) or a hard link to the
    /// Docker socket.
    Docker(PathBuf),
    /// Any other Unix socket.
    Other(PathBuf),
}

/// Looks up to [`SOCKET_SCAN_DEPTH`] levels below `dir`, breadth first
/// (without following symlinks, at most [`SOCKET_SCAN_ENTRIES`] entries,
/// skipping unreadable directories) for an entry named `docker.sock`, a
/// hard link to the Docker socket, or (when `any`) any Unix socket; the
/// first found.
fn find_socket(dir: &Path, any: bool) -> Option<Socket> {
    let ids = docker_socket_ids();
    let mut seen = 0usize;
    let mut queue = std::collections::VecDeque::from([(dir.to_path_buf(), 1usize)]);
    while let Some((current, depth)) = queue.pop_front() {
        let Ok(entries) = std::fs::read_dir(&current) else {
            continue;
        };
        for entry in entries.flatten() {
            seen += 1;
            if seen > SOCKET_SCAN_ENTRIES {
                return None;
            }
            let path = entry.path();
            if entry.file_name() == "docker.sock" {
                return Some(Socket::Docker(path));
            }
            // lstat, not the listing's d_type: a socket bind-mounted over a
            // regular file is listed as a regular file.
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if meta.is_dir() {
                if depth < SOCKET_SCAN_DEPTH {
                    queue.push_back((path, depth + 1));
                }
            } else if is_socket(&meta) {
                if is_docker_socket_inode(&meta, &ids) {
                    return Some(Socket::Docker(path));
                }
                if any {
                    return Some(Socket::Other(path));
                }
            }
        }
    }
    None
}

/// [`find_socket`] for the Docker socket only (by name or inode).
fn find_docker_socket(dir: &Path) -> Option<PathBuf> {
    match find_socket(dir, false) {
        Some(Socket::Docker(p)) => Some(p),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ORIGIN: &str = "/home/dev/app/odek.json";

    fn invalid_value_reason(
        result: Result<impl std::fmt::Debug, ConfigError>,
        key: &str,
    ) -> String {
        match result {
            Err(err @ ConfigError::InvalidValue { .. }) => {
                let shown = err.to_string();
                let ConfigError::InvalidValue {
                    origin,
                    key: k,
                    reason,
                } = err
                else {
                    unreachable!()
                };
                assert_eq!(origin, ORIGIN);
                assert_eq!(k, key);
                assert!(shown.contains(key), "{shown}");
                assert!(!shown.contains('\n'), "raw newline in {shown:?}");
                reason
            }
            other => panic!("expected InvalidValue for {key}, got {other:?}"),
        }
    }

    fn hostile_strings() -> Vec<String> {
        vec![
            String::new(),
            "\0".into(),
            "none\0".into(),
            "\u{feff}none".into(),
            "\u{202e}none".into(),
            "no\u{200b}ne".into(),
            "none\n".into(),
            "\nnone".into(),
            "\u{1b}[31mnone".into(),
            "x".repeat(1 << 20),
        ]
    }

    fn assert_display_safe(err: &ConfigError) {
        let shown = err.to_string();
        assert!(
            shown.len() < 2000,
            "message too long: {} bytes",
            shown.len()
        );
        for c in shown.chars() {
            assert!(
                !c.is_control() && !is_hidden_or_control(c),
                "raw {c:?} in {shown:?}"
            );
        }
    }

    // --- sandbox_network -------------------------------------------------

    #[test]
    fn network_mode_accepts_exactly_none_and_bridge() {
        assert_eq!(
            parse_network_mode(ORIGIN, "none").expect("none"),
            NetworkMode::None
        );
        assert_eq!(
            parse_network_mode(ORIGIN, "bridge").expect("bridge"),
            NetworkMode::Bridge
        );
    }

    #[test]
    fn network_mode_refusals_point_to_networks() {
        let mut cases: Vec<String> = [
            "host",
            "HOST",
            "Host",
            " host",
            "host\n",
            "host ",
            "None",
            "NONE",
            "BRIDGE",
            "Bridge",
            " none",
            "none ",
            "bridge\t",
            "container:x",
            "container:abc123",
            "ns:/proc/1/ns/net",
            "default",
            "mynet",
            "redis_default",
            "private",
            "nat",
            "bridge,none",
            "none:",
            "ｎｏｎｅ",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        cases.extend(hostile_strings());
        for value in &cases {
            match parse_network_mode(ORIGIN, value) {
                Err(err @ ConfigError::InvalidNetworkMode { .. }) => {
                    let shown = err.to_string();
                    assert!(shown.starts_with(ORIGIN), "{shown}");
                    assert!(shown.contains("sandbox_network"), "{shown}");
                    assert!(shown.contains("sandbox_networks"), "{shown}");
                    assert!(shown.contains("--sandbox-compose"), "{shown}");
                    assert_display_safe(&err);
                    let ConfigError::InvalidNetworkMode {
                        value: shown_value, ..
                    } = err
                    else {
                        unreachable!()
                    };
                    assert_eq!(shown_value, quote(value));
                }
                other => panic!("{value:?}: expected InvalidNetworkMode, got {other:?}"),
            }
        }
    }

    // --- network names ---------------------------------------------------

    #[test]
    fn network_names_accepted() {
        let hex64 = "0123456789abcdef".repeat(4);
        let long = "a".repeat(128);
        for name in [
            "a",
            "A",
            "0",
            "redis_default",
            "myapp_backend",
            "my-net.1",
            "Net.Work-1_x",
            "cafe",
            "beef",
            "dead",
            "abcdef012345",
            "ABCDEF012345",
            &hex64,
            &long,
            "Host1",
            "hosts",
            "bridge2",
            "my_default",
            "nonexistent",
            "default_net",
            "1.2.3.4",
        ] {
            validate_network_name(ORIGIN, name).unwrap_or_else(|e| panic!("{name:?}: {e}"));
        }
    }

    #[test]
    fn network_names_refused_with_reason() {
        let long = "a".repeat(129);
        let huge = "n".repeat(1 << 20);
        let cases: &[(&str, &str)] = &[
            ("", "empty"),
            (&long, "128 bytes"),
            (&huge, "128 bytes"),
            ("host", "reserved"),
            ("none", "reserved"),
            ("bridge", "reserved"),
            ("default", "reserved"),
            ("HOST", "reserved"),
            ("Bridge", "reserved"),
            ("NoNe", "reserved"),
            ("a:b", "':' or '/'"),
            ("container:x", "':' or '/'"),
            ("ns:/proc/1/ns/net", "':' or '/'"),
            ("a/b", "':' or '/'"),
            ("/", "':' or '/'"),
            ("_net", "charset"),
            (".net", "charset"),
            ("-net", "charset"),
            ("net work", "charset"),
            (" net", "charset"),
            ("net\n", "charset"),
            ("net\0", "charset"),
            ("né", "U+00E9"),
            ("n\u{202e}et", "U+202E"),
            ("n\u{200b}et", "U+200B"),
            ("\u{feff}net", "U+FEFF"),
            ("ｈost", "charset"),
            ("net$", "'$'"),
            ("net*", "'*'"),
            ("a,b", "charset"),
        ];
        for (name, fragment) in cases {
            match validate_network_name(ORIGIN, name) {
                Err(err @ ConfigError::InvalidNetworkName { .. }) => {
                    assert_display_safe(&err);
                    let shown = err.to_string();
                    assert!(shown.starts_with(ORIGIN), "{shown}");
                    let ConfigError::InvalidNetworkName { reason, value, .. } = err else {
                        unreachable!()
                    };
                    assert_eq!(value, quote(name));
                    assert!(reason.contains(fragment), "{name:?}: {reason}");
                }
                other => panic!("{name:?}: expected InvalidNetworkName, got {other:?}"),
            }
        }
    }

    // --- compose projects ------------------------------------------------

    #[test]
    fn compose_projects_accepted() {
        for name in [
            "myapp", "my-app", "my_app", "0app", "a", "app2", "1", "a-", "a_", "x--y__z",
        ] {
            validate_compose_project(ORIGIN, name).unwrap_or_else(|e| panic!("{name:?}: {e}"));
        }
    }

    #[test]
    fn compose_projects_refused_with_normalized_hint() {
        let cases: &[(&str, Option<&str>)] = &[
            ("", None),
            ("MyApp", Some("myapp")),
            ("my app", Some("myapp")),
            ("_app", Some("app")),
            ("-app", Some("app")),
            ("__-app", Some("app")),
            ("app.x", Some("appx")),
            ("app\n", Some("app")),
            ("app\0", Some("app")),
            ("\u{202e}app", Some("app")),
            ("ÄPP", Some("pp")),
            ("\u{212a}elvin", Some("kelvin")),
            ("___", None),
            ("!!!", None),
            ("-", None),
            ("ｍｙａｐｐ", None),
            ("my/app", Some("myapp")),
            ("my:app", Some("myapp")),
        ];
        for (name, normalized) in cases {
            match validate_compose_project(ORIGIN, name) {
                Err(err @ ConfigError::InvalidComposeProject { .. }) => {
                    assert_display_safe(&err);
                    let shown = err.to_string();
                    assert!(shown.contains("[a-z0-9][a-z0-9_-]*"), "{shown}");
                    let ConfigError::InvalidComposeProject {
                        origin,
                        value,
                        normalized: n,
                        running,
                    } = err
                    else {
                        unreachable!()
                    };
                    assert_eq!(origin, ORIGIN);
                    assert_eq!(value, quote(name));
                    assert_eq!(n.as_deref(), *normalized, "{name:?}");
                    assert!(running.is_empty());
                }
                other => panic!("{name:?}: expected InvalidComposeProject, got {other:?}"),
            }
        }
        let huge = "X".repeat(1 << 20);
        let err = validate_compose_project(ORIGIN, &huge).expect_err("uppercase");
        assert!(matches!(err, ConfigError::InvalidComposeProject { .. }));
    }

    #[test]
    fn compose_normalization() {
        for (input, want) in [
            ("myapp", Some("myapp")),
            ("MyApp", Some("myapp")),
            ("My App 2", Some("myapp2")),
            ("--_x", Some("x")),
            ("x--", Some("x--")),
            ("a.b.c", Some("abc")),
            ("", None),
            ("...", None),
            ("_-_", None),
            ("日本", None),
        ] {
            assert_eq!(
                normalize_compose_project(input).as_deref(),
                want,
                "{input:?}"
            );
        }
        // Too long once normalised: no hint (found by the network_name
        // fuzz target); exactly the limit is fine.
        let long = format!("J{}", "6".repeat(MAX_COMPOSE_PROJECT));
        assert_eq!(normalize_compose_project(&long), None);
        let at_limit = "A".repeat(MAX_COMPOSE_PROJECT);
        assert_eq!(
            normalize_compose_project(&at_limit).map(|n| n.len()),
            Some(MAX_COMPOSE_PROJECT)
        );
    }

    // --- pids --------------------------------------------------------------

    #[test]
    fn pids_limit() {
        for n in [1, 2, 4096, MAX_PIDS_LIMIT] {
            assert_eq!(validate_pids_limit(ORIGIN, n).expect("positive"), n);
        }
        for n in [MAX_PIDS_LIMIT + 1, i64::MAX] {
            let reason = invalid_value_reason(validate_pids_limit(ORIGIN, n), "sandbox_pids_limit");
            assert!(reason.contains("at most 4194304"), "{reason}");
        }
        for n in [0, -1, -2, i64::MIN] {
            let reason = invalid_value_reason(validate_pids_limit(ORIGIN, n), "sandbox_pids_limit");
            assert!(
                reason.starts_with(&format!("must be a positive integer (got \"{n}\")")),
                "{reason}"
            );
        }
    }

    // --- memory -------------------------------------------------------------

    #[test]
    fn memory_accepted() {
        const MIB: i64 = 1 << 20;
        const GIB: i64 = 1 << 30;
        let cases: &[(&str, i64)] = &[
            ("6m", 6 * MIB),
            ("6M", 6 * MIB),
            ("512m", 512 * MIB),
            ("512M", 512 * MIB),
            ("512mb", 512 * MIB),
            ("512MB", 512 * MIB),
            ("512mB", 512 * MIB),
            ("2g", 2 * GIB),
            ("2G", 2 * GIB),
            ("2gb", 2 * GIB),
            ("1.5g", 3 * GIB / 2),
            ("0.5g", GIB / 2),
            ("0.0059g", 6_335_076),
            ("1t", 1 << 40),
            ("1TB", 1 << 40),
            ("6291456", 6 * MIB),
            ("6291456b", 6 * MIB),
            ("6291456B", 6 * MIB),
            ("6144k", 6 * MIB),
            ("6144KB", 6 * MIB),
            ("0512m", 512 * MIB),
            ("8388608.9", 8_388_608),
            ("6.000000000000000000000001m", 6 * MIB),
            ("9223372036854775807", i64::MAX),
            ("8388607.99999999t", 9_223_372_036_854_764_812),
        ];
        for (text, want) in cases {
            assert_eq!(
                parse_memory(ORIGIN, text).unwrap_or_else(|e| panic!("{text}: {e}")),
                *want,
                "{text}"
            );
        }
    }

    #[test]
    fn memory_refused() {
        let huge = "9".repeat(1 << 20);
        let cases: &[(&str, &str)] = &[
            ("", "must be a size"),
            ("lots", "must be a size"),
            ("-1", "must be a size"),
            ("-512m", "must be a size"),
            ("+512m", "must be a size"),
            ("0", "at least 6 MiB"),
            ("512", "did you mean 512m?"),
            ("0m", "at least 6 MiB"),
            ("5m", "at least 6 MiB"),
            ("6291455", "at least 6 MiB"),
            ("1.5", "at least 6 MiB"),
            ("5.99m", "at least 6 MiB"),
            ("512 m", "must be a size"),
            ("512mib", "must be a size"),
            ("512MiB", "must be a size"),
            ("512i", "must be a size"),
            ("1p", "must be a size"),
            ("1pb", "must be a size"),
            ("512mm", "must be a size"),
            ("512bb", "must be a size"),
            ("m", "must be a size"),
            ("1e3", "must be a size"),
            ("1e9", "must be a size"),
            (".5g", "must be a size"),
            ("5.g", "must be a size"),
            ("1..5g", "must be a size"),
            ("1.2.3g", "must be a size"),
            (" 512m", "must be a size"),
            ("512m ", "must be a size"),
            ("512m\n", "must be a size"),
            ("512\0m", "must be a size"),
            ("512\u{200b}m", "must be a size"),
            ("５１２m", "must be a size"),
            ("0x10m", "must be a size"),
            ("1_000m", "must be a size"),
            ("NaN", "must be a size"),
            ("inf", "must be a size"),
            ("8388608t", "too large"),
            ("9223372036854775808", "too large"),
            ("18446744073709551616", "too large"),
            ("99999999999999999999999999999999999m", "too large"),
            ("1.0000000000000000000000001m", "must be a size"),
            (&huge, "must be a size"),
        ];
        for (text, fragment) in cases {
            let reason = invalid_value_reason(parse_memory(ORIGIN, text), "sandbox_memory");
            assert!(reason.contains(fragment), "{text:?}: {reason}");
            assert!(reason.len() < 400);
        }
    }

    // --- cpus -----------------------------------------------------------------

    #[test]
    fn cpus_accepted() {
        for (text, nano) in [
            ("0.5", 500_000_000),
            ("2", 2_000_000_000),
            ("1.5", 1_500_000_000),
            ("0.01", 10_000_000),
            ("01.50", 1_500_000_000),
            ("1024", 1_024_000_000_000),
            ("1024.000000000", 1_024_000_000_000),
            ("0.25", 250_000_000),
        ] {
            let cpu = parse_cpus(ORIGIN, text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(
                cpu,
                CpuLimit {
                    text: text.to_string(),
                    nano
                },
                "{text}"
            );
        }
    }

    #[test]
    fn cpus_refused() {
        let huge = "1".repeat(1 << 20);
        let cases: &[(&str, &str)] = &[
            ("", "digits"),
            ("0", "at least 0.01"),
            ("0.0", "at least 0.01"),
            ("0.000000000", "at least 0.01"),
            ("0.001", "at least 0.01"),
            ("0.009999999", "at least 0.01"),
            ("-1", "digits"),
            ("-0.5", "digits"),
            ("+1", "digits"),
            ("1024.000000001", "at most 1024"),
            ("1025", "at most 1024"),
            ("99999999999999999999999999999999999999999", "at most 1024"),
            (&huge, "at most 1024"),
            ("0.0000000001", "9 decimal places"),
            ("1e3", "digits"),
            (".5", "digits"),
            ("2.", "digits"),
            ("1,5", "digits"),
            (" 1", "digits"),
            ("1 ", "digits"),
            ("1\n", "digits"),
            ("NaN", "digits"),
            ("inf", "digits"),
            ("0x10", "digits"),
            ("1/2", "digits"),
            ("½", "digits"),
            ("2cpus", "digits"),
            ("1\u{202e}", "digits"),
        ];
        for (text, fragment) in cases {
            let reason = invalid_value_reason(parse_cpus(ORIGIN, text), "sandbox_cpus");
            assert!(reason.contains(fragment), "{text:?}: {reason}");
            assert!(reason.len() < 400);
        }
    }

    // --- user -----------------------------------------------------------------

    #[test]
    fn users_accepted() {
        let name32 = "u".repeat(32);
        let pair = format!("{name32}:{name32}");
        for user in [
            "1000",
            "1000:1000",
            "0",
            "0:0",
            "2147483647",
            "2147483647:2147483647",
            "root",
            "dev",
            "_apt",
            "www-data",
            "dev:staff",
            "1000:staff",
            "dev:1000",
            "a1_-",
            &name32,
            &pair,
        ] {
            validate_user(ORIGIN, user).unwrap_or_else(|e| panic!("{user:?}: {e}"));
        }
    }

    #[test]
    fn users_refused() {
        let name33 = "u".repeat(33);
        let huge = "u".repeat(1 << 20);
        for user in [
            "",
            ":",
            "1000:",
            ":1000",
            "4294967296",
            "4294967295",
            "2147483648",
            "1000:2147483648",
            "99999999999999999999",
            "-1",
            "+1000",
            "Root",
            "1abc",
            "dev:",
            "a:b:c",
            "1:2:3",
            "dev name",
            "dev\n",
            "dev\0",
            &name33,
            "dév",
            "de\u{202e}v",
            "-dev",
            "dev:Staff",
            " dev",
            "dev ",
            "$(id)",
            "ｄｅｖ",
            &huge,
        ] {
            let reason = invalid_value_reason(validate_user(ORIGIN, user), "sandbox_user");
            assert!(reason.contains("uid[:gid]"), "{user:?}: {reason}");
            assert!(reason.len() < 400);
        }
    }

    // --- env keys ---------------------------------------------------------------

    #[test]
    fn env_keys() {
        let k256 = "K".repeat(256);
        for key in ["A", "_", "_A1", "PATH", "node_env", "a1", &k256] {
            validate_env_key(ORIGIN, key).unwrap_or_else(|e| panic!("{key:?}: {e}"));
        }
        let k257 = "K".repeat(257);
        for key in [
            "",
            "1A",
            "A-B",
            "A B",
            "A=B",
            "A\n",
            "É",
            "A\0",
            "A.B",
            "A\u{200b}",
            "$A",
            &k257,
        ] {
            let reason = invalid_value_reason(validate_env_key(ORIGIN, key), "sandbox_env");
            assert!(
                reason.contains("[A-Za-z_][A-Za-z0-9_]*"),
                "{key:?}: {reason}"
            );
        }
    }

    // --- interpolation ------------------------------------------------------------

    const SECRET: &str = "s3cr3t-host-value";

    fn host() -> BTreeMap<String, String> {
        [
            ("HOME", "/home/dev"),
            ("TOKEN", SECRET),
            ("EMPTY", ""),
            ("NESTED", "${TOKEN}"),
            ("DOLLAR", "$$"),
            ("_U", "u"),
            ("NUL", "a\0b"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    #[test]
    fn interpolation_accepted() {
        let cases: &[(&str, &str, bool)] = &[
            ("plain", "plain", false),
            ("", "", false),
            ("${HOME}", "/home/dev", true),
            ("a${HOME}b", "a/home/devb", true),
            ("${HOME}${HOME}", "/home/dev/home/dev", true),
            ("${EMPTY}", "", true),
            ("${_U}", "u", true),
            ("$$", "$", false),
            ("$$$$", "$$", false),
            ("$${HOME}", "${HOME}", false),
            ("$$${HOME}", "$/home/dev", true),
            ("$", "$", false),
            ("a$", "a$", false),
            ("$HOME", "$HOME", false),
            ("$ {HOME}", "$ {HOME}", false),
            ("price: 5$", "price: 5$", false),
            ("${NESTED}", "${TOKEN}", true),
            ("${DOLLAR}", "$$", true),
            ("}{$}", "}{$}", false),
            ("héllo ${HOME} ✓", "héllo /home/dev ✓", true),
        ];
        for (value, want, used) in cases {
            let got = interpolate(ORIGIN, "KEY", value, &host())
                .unwrap_or_else(|e| panic!("{value:?}: {e}"));
            assert_eq!(got, (want.to_string(), *used), "{value:?}");
        }
    }

    #[test]
    fn interpolation_refused_without_values() {
        let cases: &[(&str, &str)] = &[
            ("${UNSET}", "host variable \"UNSET\" is not set"),
            ("x${TOKEN}${UNSET}", "\"UNSET\" is not set"),
            ("${home}", "\"home\" is not set"),
            ("${", "unterminated"),
            ("abc ${TOKEN", "unterminated"),
            ("${TOKEN}${", "unterminated"),
            ("${}", "not a variable name"),
            ("${1X}", "not a variable name"),
            ("${TOKEN-default}", "not a variable name"),
            ("${TOKEN:-default}", "not a variable name"),
            ("${ TOKEN}", "not a variable name"),
            ("${TOKEN }", "not a variable name"),
            ("${s3cr3t-host-value}", "not a variable name"),
            ("${${TOKEN}}", "not a variable name"),
            ("a\0b", "NUL"),
            ("${NUL}", "NUL"),
        ];
        for (value, fragment) in cases {
            let result = interpolate(ORIGIN, "API_TOKEN", value, &host());
            let err = result.clone().expect_err(value);
            let shown = err.to_string();
            assert!(!shown.contains(SECRET), "{shown}");
            assert!(!format!("{err:?}").contains(SECRET));
            let reason = invalid_value_reason(result, "sandbox_env");
            assert!(reason.contains("\"API_TOKEN\""), "{value:?}: {reason}");
            assert!(reason.contains(fragment), "{value:?}: {reason}");
        }
    }

    // --- volumes ---------------------------------------------------------------------

    #[cfg(unix)]
    struct Fixture {
        _dir: tempfile::TempDir,
        wd: PathBuf,
        _listeners: Vec<std::os::unix::net::UnixListener>,
    }

    /// A working directory with: cache/, sub/dir/, file.txt, link → cache,
    /// linkdir → sub, sockdir/docker.sock, other.sock, deep/a/b/docker.sock,
    /// toodeep/a/b/c/d/docker.sock, plain-docker/docker.sock (a file).
    #[cfg(unix)]
    fn fixture() -> Fixture {
        let dir = tempfile::tempdir().expect("tempdir");
        let wd = std::fs::canonicalize(dir.path()).expect("canonical tempdir");
        for d in [
            "cache",
            "sub/dir",
            "sockdir",
            "deep/a/b",
            "toodeep/a/b/c/d",
            "plain-docker",
        ] {
            std::fs::create_dir_all(wd.join(d)).expect("mkdir");
        }
        std::fs::write(wd.join("file.txt"), "x").expect("write");
        std::fs::write(wd.join("plain-docker/docker.sock"), "").expect("write");
        std::os::unix::fs::symlink(wd.join("cache"), wd.join("link")).expect("symlink");
        std::os::unix::fs::symlink("sub", wd.join("linkdir")).expect("symlink");
        std::os::unix::fs::symlink("/etc", wd.join("etclink")).expect("symlink");
        let listeners = [
            "sockdir/docker.sock",
            "other.sock",
            "deep/a/b/docker.sock",
            "toodeep/a/b/c/d/docker.sock",
        ]
        .iter()
        .map(|s| std::os::unix::net::UnixListener::bind(wd.join(s)).expect("bind"))
        .collect();
        Fixture {
            _dir: dir,
            wd,
            _listeners: listeners,
        }
    }

    #[cfg(unix)]
    #[test]
    fn volumes_accepted() {
        let f = fixture();
        let wd = &f.wd;
        let abs = format!("{}/cache:/c", wd.display());
        let abs_dot = format!("{}/./cache/.:/c", wd.display());
        let cases: Vec<(&str, PathBuf, &str, bool)> = vec![
            (
                "./cache:/root/.cache",
                wd.join("cache"),
                "/root/.cache",
                false,
            ),
            (
                "cache:/root/.cache",
                wd.join("cache"),
                "/root/.cache",
                false,
            ),
            ("cache:/c:ro", wd.join("cache"), "/c", true),
            ("cache:/c:rw", wd.join("cache"), "/c", false),
            ("cache/:/c/", wd.join("cache"), "/c", false),
            ("./cache/.:/c", wd.join("cache"), "/c", false),
            (&abs, wd.join("cache"), "/c", false),
            (&abs_dot, wd.join("cache"), "/c", false),
            (
                "sub/dir:/data//x/./y",
                wd.join("sub/dir"),
                "/data/x/y",
                false,
            ),
            ("sub:/data", wd.join("sub"), "/data", false),
            (
                "file.txt:/etc/app.conf:ro",
                wd.join("file.txt"),
                "/etc/app.conf",
                true,
            ),
            (
                "cache:/workspace/cache",
                wd.join("cache"),
                "/workspace/cache",
                false,
            ),
            ("cache:/tmp/cache", wd.join("cache"), "/tmp/cache", false),
            ("cache:/procfs", wd.join("cache"), "/procfs", false),
            (
                "cache:/home/node/.npm",
                wd.join("cache"),
                "/home/node/.npm",
                false,
            ),
            // only docker.sock up to 4 levels down is looked for
            ("toodeep:/t", wd.join("toodeep"), "/t", false),
        ];
        for (spec, host, container, read_only) in cases {
            let mount = resolve_volume(ORIGIN, spec, wd).unwrap_or_else(|e| panic!("{spec}: {e}"));
            assert_eq!(
                mount,
                VolumeMount {
                    spec: spec.to_string(),
                    host,
                    container: container.to_string(),
                    read_only,
                },
                "{spec}"
            );
        }
    }

    #[cfg(unix)]
    #[test]
    fn volumes_refused() {
        let f = fixture();
        let wd = &f.wd;
        let abs_outside = format!("{}/../x:/c", wd.display());
        let workdir_abs = format!("{}:/c", wd.display());
        let huge = format!("{}:/c", "a".repeat(1 << 20));
        let cases: Vec<(&str, &str)> = vec![
            ("../x:/c", "'..'"),
            ("cache/../cache:/c", "'..'"),
            (&abs_outside, "'..'"),
            ("/etc:/c", "inside the working directory"),
            ("/:/c", "inside the working directory"),
            ("/tmp:/c", "inside the working directory"),
            (
                "/var/run/docker.sock:/var/run/docker.sock",
                "inside the working directory",
            ),
            (".:/c", "working directory itself"),
            ("./:/c", "working directory itself"),
            (&workdir_abs, "working directory itself"),
            ("link:/c", "symbolic link"),
            ("link/:/c", "symbolic link"),
            ("linkdir/dir:/c", "symbolic link"),
            ("etclink:/c", "symbolic link"),
            ("etclink/passwd:/c", "symbolic link"),
            ("missing:/c", "does not exist"),
            ("myvolume:/data", "named volumes are not supported"),
            ("cache/missing:/c", "does not exist"),
            ("cache", "host:container"),
            ("cache:/c:ro:x", "host:container"),
            ("a:b:c:d", "host:container"),
            ("cache:/c:z", "ro or rw"),
            ("cache:/c:RO", "ro or rw"),
            ("cache:/c:ro,z", "ro or rw"),
            ("cache:/c:", "ro or rw"),
            (":/c", "host path is empty"),
            ("cache:", "container path is empty"),
            ("cache:rel", "must be absolute"),
            ("cache:./c", "must be absolute"),
            ("cache:/", "container's root"),
            ("cache://", "container's root"),
            ("cache:/.", "container's root"),
            ("cache:/workspace", "/workspace"),
            ("cache:/workspace/", "/workspace"),
            ("cache://workspace/.", "/workspace"),
            ("cache:/tmp", "tmpfs"),
            ("cache:/tmp/", "tmpfs"),
            ("cache:/proc", "kernel"),
            ("cache:/proc/sys", "kernel"),
            ("cache:/sys/fs/cgroup", "kernel"),
            ("cache:/dev", "kernel"),
            ("cache:/dev/shm", "kernel"),
            ("cache:/a/../b", "'..'"),
            ("cache:/..", "'..'"),
            ("sockdir:/s", "docker.sock"),
            ("sockdir/docker.sock:/s", "Docker socket"),
            ("plain-docker/docker.sock:/s", "Docker socket"),
            ("plain-docker:/s", "docker.sock"),
            ("deep:/d", "docker.sock"),
            ("deep/a:/d", "docker.sock"),
            ("other.sock:/s", "Unix socket"),
            ("ca\u{202e}che:/c", "U+202E"),
            ("ca\u{200b}che:/c", "U+200B"),
            ("\u{feff}cache:/c", "U+FEFF"),
            ("cache\n:/c", "U+000A"),
            ("cache:/c\0", "U+0000"),
            ("cache:/c\r", "U+000D"),
            (&huge, "cannot inspect"),
        ];
        for (spec, fragment) in cases {
            match resolve_volume(ORIGIN, spec, wd) {
                Err(err @ ConfigError::InvalidVolume { .. }) => {
                    assert_display_safe(&err);
                    let shown = err.to_string();
                    assert!(shown.starts_with(ORIGIN), "{shown}");
                    let ConfigError::InvalidVolume { value, reason, .. } = err else {
                        unreachable!()
                    };
                    assert_eq!(value, quote(spec));
                    assert!(reason.contains(fragment), "{:?}: {reason}", quote(spec));
                }
                other => panic!("{:?}: expected InvalidVolume, got {other:?}", quote(spec)),
            }
        }
    }

    #[cfg(unix)]
    /// System roots are refused even when the working directory is one.
    #[test]
    fn system_roots_refused_even_as_workdir() {
        let root = Path::new("/");
        for spec in [
            "/etc:/c",
            "etc:/c",
            "./etc:/c",
            "/usr:/c",
            "usr:/c:ro",
            "/home:/c",
            "/root:/c",
            "/var:/c",
            "/var/lib:/c",
            "/proc:/c",
            "/proc/1:/c",
            "/proc/self:/c",
            "/sys:/c",
            "/sys/fs:/c",
            "/dev:/c",
            "/dev/null:/c",
            "/run:/c",
            "/var/run:/c",
            "/var/run/docker.sock:/c",
            "/run/docker.sock:/c",
            "/boot:/c",
            "/:/c",
            ".:/c",
        ] {
            match resolve_volume(ORIGIN, spec, root) {
                Err(ConfigError::InvalidVolume { .. }) => {}
                other => panic!("{spec}: expected InvalidVolume, got {other:?}"),
            }
        }
        let err = resolve_volume(ORIGIN, "/etc:/c", root).expect_err("system root");
        assert!(err.to_string().contains("system directory"), "{err}");
        // workdir /etc: /etc itself is refused however it is written
        if std::fs::canonicalize("/etc").is_ok_and(|etc| etc == Path::new("/etc")) {
            for spec in [".:/c", "/etc:/c", "/etc/.:/c"] {
                let err = resolve_volume(ORIGIN, spec, Path::new("/etc")).expect_err(spec);
                assert!(matches!(err, ConfigError::InvalidVolume { .. }), "{spec}");
            }
        }
    }

    #[cfg(unix)]
    #[test]
    fn workdir_must_be_canonical() {
        let f = fixture();
        for wd in [
            f.wd.join("linkdir"),
            f.wd.join("cache/.."),
            PathBuf::from("relative"),
        ] {
            match resolve_volume(ORIGIN, "dir:/c", &wd) {
                Err(ConfigError::Workdir { path, .. }) => assert_eq!(path, wd),
                other => panic!("{wd:?}: expected Workdir, got {other:?}"),
            }
        }
    }

    #[test]
    fn workdirs_a_root_sandbox_could_use_against_the_host_are_refused() {
        let p = PathBuf::from;
        let homes = [p("/home/alice"), p("/srv/bob"), p("/root")];
        let services = [p("/var/lib/jenkins"), p("/nonexistent"), p("/var/lib")];
        for (wd, needle) in [
            ("/", "system directory"),
            ("/etc", "system directory"),
            ("/etc/cron.d", "/etc"),
            ("/etc/systemd/system", "/etc"),
            ("/usr/local/bin", "/usr"),
            ("/var/spool/cron", "/var/spool"),
            ("/var/log/app", "/var/log"),
            ("/run/user", "/run"),
            ("/var/lib/docker/volumes", "/var/lib/docker"),
            ("/var/lib/dpkg", "/var/lib"),
            ("/var/lib/containerd/x", "/var/lib"),
            ("/var/lib", "/var/lib"),
            ("/proc/1", "/proc"),
            ("/home", "system directory"),
            ("/var", "system directory"),
            ("/private/etc", "system directory"),
            ("/home/alice", "is the home directory"),
            ("/srv/bob", "is the home directory"),
            ("/srv", "shared directory /srv"),
            ("/tmp", "shared directory /tmp"),
            ("/var/tmp", "shared directory /var/tmp"),
            ("/opt", "shared directory /opt"),
            ("/var/mail", "shared directory /var/mail"),
            ("/var/local", "shared directory /var/local"),
            ("/var/backups", "shared directory /var/backups"),
            ("/root/.cargo", "hidden directory"),
            ("/home/alice/.ssh", "hidden directory"),
            ("/srv/bob/.config/odek", "hidden directory"),
        ] {
            let err = check_workdir_paths(Path::new(wd), &homes, &services).expect_err(wd);
            assert!(matches!(err, ConfigError::Workdir { .. }), "{wd}: {err:?}");
            let msg = err.to_string();
            assert!(
                msg.contains(needle) && msg.contains("project directory"),
                "{wd}: {msg}"
            );
        }
        // Projects below a home, a hidden directory inside a project, a
        // service user's workspace below /var/lib, /tmp: fine.
        for wd in [
            "/home/alice/project",
            "/home/alice/project/.git",
            "/srv/bob/src/app",
            "/var/lib/jenkins/workspace/app",
            "/tmp/x",
            "/tmp/odek-e2e-1/app",
            "/var/tmp/build",
            "/opt/app",
            "/work/main",
        ] {
            check_workdir_paths(Path::new(wd), &homes, &services)
                .unwrap_or_else(|e| panic!("{wd}: {e}"));
        }
    }

    #[test]
    fn passwd_and_mountinfo_are_parsed() {
        let passwd = "root:x:0:0:root:/root:/bin/bash\n\
                      daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n\
                      broken line\n\
                      alice:x:1000:1000::/home/alice:/bin/sh\n\
                      nobody:x:65534:65534::/nonexistent:/usr/sbin/nologin\n";
        let e: Vec<(u32, &str)> = passwd_entries(passwd).collect();
        assert_eq!(
            e,
            [
                (0, "/root"),
                (1, "/usr/sbin"),
                (1000, "/home/alice"),
                (65534, "/nonexistent")
            ]
        );
        assert_eq!(unescape_mountinfo("/a\\040b/c\\134d"), "/a b/c\\d");
        assert_eq!(unescape_mountinfo("/plain\\04"), "/plain\\04");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_socket_is_found_by_lstat_not_by_the_listing() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let wd = tmp.path().canonicalize().expect("canonical");
        std::fs::create_dir_all(wd.join("a/b")).expect("mkdir");
        let _l = std::os::unix::net::UnixListener::bind(wd.join("a/b/docker.sock")).expect("bind");
        let err = check_workdir_sockets(&wd).expect_err("docker.sock below");
        assert!(err.to_string().contains("a/b/docker.sock"), "{err}");
        let top = tempfile::tempdir().expect("tempdir");
        let top = top.path().canonicalize().expect("canonical");
        let _t = std::os::unix::net::UnixListener::bind(top.join("agent.sock")).expect("bind");
        let err = check_workdir_sockets(&top).expect_err("socket at the top");
        assert!(err.to_string().contains("agent.sock"), "{err}");
        let clean = tempfile::tempdir().expect("tempdir");
        check_workdir_sockets(&clean.path().canonicalize().expect("c")).expect("no socket");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn any_socket_within_the_scan_bounds_is_refused() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let wd = tmp.path().canonicalize().expect("canonical");
        // A root-owned tmux socket would run commands on the host.
        std::fs::create_dir_all(wd.join(".tmux/x")).expect("mkdir");
        std::fs::write(wd.join("README"), "").expect("file");
        let _l = std::os::unix::net::UnixListener::bind(wd.join(".tmux/x/default")).expect("bind");
        let err = check_workdir_sockets(&wd).expect_err("socket two levels down");
        let msg = err.to_string();
        assert!(msg.contains(".tmux/x/default\""), "{msg}");
        assert!(msg.contains("holds a Unix socket"), "{msg}");
        assert!(msg.contains("remove or move the socket"), "{msg}");
        assert!(msg.contains("fsmonitor"), "{msg}");
        // As deep as the scan goes (the directory at level 3, the socket at 4).
        let tmp = tempfile::tempdir().expect("tempdir");
        let wd = tmp.path().canonicalize().expect("canonical");
        std::fs::create_dir_all(wd.join("a/b/c")).expect("mkdir");
        let _d = std::os::unix::net::UnixListener::bind(wd.join("a/b/c/s")).expect("bind");
        check_workdir_sockets(&wd).expect_err("socket at the scan's depth");
        // A symlink to a socket is not followed (nor is a socket behind a
        // symlinked directory).
        let tmp = tempfile::tempdir().expect("tempdir");
        let wd = tmp.path().canonicalize().expect("canonical");
        let other = tempfile::tempdir().expect("tempdir");
        let _o = std::os::unix::net::UnixListener::bind(other.path().join("s")).expect("bind");
        std::os::unix::fs::symlink(other.path(), wd.join("dir")).expect("symlink");
        std::os::unix::fs::symlink(other.path().join("s"), wd.join("s")).expect("symlink");
        check_workdir_sockets(&wd).expect("symlinks are not followed");
    }

    #[test]
    fn helpers() {
        assert_eq!(split_decimal("1.5"), Some(("1", "5")));
        assert_eq!(split_decimal("15"), Some(("15", "")));
        assert_eq!(split_decimal("1."), None);
        assert_eq!(split_decimal(".1"), None);
        assert_eq!(split_decimal(""), None);
        assert_eq!(digits_value(""), Some(0));
        assert_eq!(digits_value("000"), Some(0));
        assert_eq!(digits_value("0042"), Some(42));
        assert_eq!(digits_value(&"9".repeat(31)), None);
        assert_eq!(char_name('a'), "'a'");
        assert_eq!(char_name(' '), "U+0020");
        assert_eq!(char_name('\u{202e}'), "U+202E");
    }
}
