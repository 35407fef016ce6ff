//! Value rules of SPEC §3.4: pure functions of the value (no Docker, no
//! file system, no environment reads: the host environment for
//! interpolation is passed in). The checks that look at host paths — the
//! working directory and `sandbox_volumes` — are in `hostpath`.
//!
//! `origin` in every signature is a human description of where the value
//! came from (a file path, `env ODEK_SANDBOX_MEMORY`, `flag --sandbox-memory`),
//! used verbatim in error messages. User values appear in messages only
//! through [`super::quote`]; env values never appear.

use crate::config::names;
use std::collections::BTreeMap;

use super::{quote, ConfigError, CpuLimit, NetworkMode};

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
pub(crate) const MAX_PIDS_LIMIT: i64 = 4_194_304;

/// Smallest CPU limit in nano-CPUs (0.01 CPU: a 1 ms CFS quota per 100 ms).
const MIN_NANO_CPUS: u128 = 10_000_000;

/// Longest user or group name.
const MAX_USER_NAME_BYTES: usize = 32;

/// Network names with a meaning of their own to Docker.
const RESERVED_NETWORK_NAMES: &[&str] = &["host", "none", "bridge", "default"];

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

/// A Docker Swarm stack name (SPEC §4.1): `[A-Za-z0-9][A-Za-z0-9_.-]*`,
/// at most 63 bytes (`MAX_STACK`; Swarm names a stack's services and
/// networks `<stack>_<name>`, and a service name stops at 63) → else
/// [`ConfigError::InvalidValue`]. Matched exactly, never fuzzily.
pub fn validate_stack(origin: &str, value: &str) -> Result<(), ConfigError> {
    let mut chars = value.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphanumeric());
    let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
    if first_ok && rest_ok && value.len() <= MAX_STACK {
        return Ok(());
    }
    Err(ConfigError::InvalidValue {
        origin: origin.to_string(),
        key: super::names::sandbox_stack.into(),
        reason: format!(
            "is {}, not a Swarm stack name: [A-Za-z0-9][A-Za-z0-9_.-]*, at most {MAX_STACK} bytes; name the stack as `docker stack ls` shows it",
            quote(value)
        ),
    })
}

/// Longest Swarm stack name accepted.
pub(crate) const MAX_STACK: usize = 63;

/// Longest Compose project name accepted (its networks are named
/// `<project>_<network>`, and Docker names stop at 128 bytes or so).
pub(crate) const MAX_COMPOSE_PROJECT: usize = 100;

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

/// The largest `sandbox_pool`: ready sandboxes per plan, and the most
/// ready or launching sandboxes one warm pool holds for all its plans
/// together (`crate::pool`).
pub const MAX_POOL: usize = 8;

/// `sandbox_pool` must be 0 (off) to [`MAX_POOL`] → the value, else
/// [`ConfigError::InvalidValue`].
pub fn validate_pool(origin: &str, value: i64) -> Result<i64, ConfigError> {
    let max = MAX_POOL as i64;
    if (0..=max).contains(&value) {
        return Ok(value);
    }
    Err(invalid(
        origin,
        names::sandbox_pool,
        format!(
            "must be an integer from 0 (no pool) to {max} (got {})",
            quote(&value.to_string())
        ),
    ))
}

/// The longest `sandbox_log_retention`, in days (ten years).
pub const MAX_LOG_RETENTION: i64 = 3650;

/// The default `sandbox_log_retention`, in days.
pub const DEFAULT_LOG_RETENTION: i64 = 7;

/// `sandbox_log_retention` must be 0 (the record is removed when its
/// sandbox ends) to [`MAX_LOG_RETENTION`] days → the value, else
/// [`ConfigError::InvalidValue`].
pub fn validate_log_retention(origin: &str, value: i64) -> Result<i64, ConfigError> {
    if (0..=MAX_LOG_RETENTION).contains(&value) {
        return Ok(value);
    }
    Err(invalid(
        origin,
        names::sandbox_log_retention,
        format!(
            "must be a number of days from 0 (removed when the sandbox ends) to {MAX_LOG_RETENTION} (got {})",
            quote(&value.to_string())
        ),
    ))
}

/// `sandbox_pids_limit` must be ≥ 1 (0 and -1 mean unlimited to Docker) and
/// at most `MAX_PIDS_LIMIT` (4 194 304) →
/// the value, else [`ConfigError::InvalidValue`].
pub fn validate_pids_limit(origin: &str, value: i64) -> Result<i64, ConfigError> {
    if value > MAX_PIDS_LIMIT {
        return Err(invalid(
            origin,
            names::sandbox_pids_limit,
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
        names::sandbox_pids_limit,
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
    let key = names::sandbox_memory;
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
    let key = names::sandbox_cpus;
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
        names::sandbox_user,
        format!(
            "must be uid[:gid] (decimal, at most 2147483647) or name[:group] (matching \
             [a-z_][a-z0-9_-]*, at most {MAX_USER_NAME_BYTES} bytes each) (got {})",
            quote(value)
        ),
    ))
}

/// Most bytes of a `sandbox_runtime` name.
pub const MAX_RUNTIME_NAME_BYTES: usize = 128;

/// `sandbox_runtime`: a runtime's name as an engine registers it
/// (daemon.json `runtimes`, e.g. `runc`, `runsc`, `io.containerd.runc.v2`):
/// `[A-Za-z0-9][A-Za-z0-9_.+-]*`, at most [`MAX_RUNTIME_NAME_BYTES`] bytes.
/// Whether the engine has it is asked of the engine at resolve (SPEC §6.1
/// "runtime"). Errors are [`ConfigError::InvalidValue`].
pub fn validate_runtime(origin: &str, value: &str) -> Result<(), ConfigError> {
    let ok = !value.is_empty()
        && value.len() <= MAX_RUNTIME_NAME_BYTES
        && value.as_bytes()[0].is_ascii_alphanumeric()
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.+-".contains(&b));
    if ok {
        return Ok(());
    }
    Err(invalid(
        origin,
        names::sandbox_runtime,
        format!(
            "must be the name of a runtime the engine has registered, matching \
             [A-Za-z0-9][A-Za-z0-9_.+-]*, at most {MAX_RUNTIME_NAME_BYTES} bytes (got {})",
            quote(value)
        ),
    ))
}

/// Environment variable set on every command odek runs in a sandbox: a
/// random 128-bit tag in hex, `ODEK_EXEC_ID=<32 hex>`, unique per exec. It
/// lets odek find the command's processes to kill them after a timeout or a
/// cancellation (the Engine API has no call to signal an exec).
pub const EXEC_TAG_ENV: &str = "ODEK_EXEC_ID";

/// The environment variable naming the static `odek-supervisor` binary on
/// the host (`cargo xtask dist` installs it as
/// `libexec/odek/odek-supervisor`). Unset or empty, sandboxes run commands
/// through the exec API: the supervisor is opt-in until the whole test
/// suite runs with it.
pub const SUPERVISOR_ENV: &str = "ODEK_SUPERVISOR";

/// The process-level variable naming the egress proxy binary (docs/CONFIG.md,
/// SPEC §4.5): set and not empty, that file; unset, `odek-egress` beside
/// odek (or libodek), then `../libexec/odek/odek-egress`.
pub const EGRESS_ENV: &str = "ODEK_EGRESS_BIN";

/// An env key: `[A-Za-z_][A-Za-z0-9_]*`, ≤ 256 bytes, not the reserved
/// [`EXEC_TAG_ENV`] → else [`ConfigError::InvalidValue`] for
/// key `sandbox_env`.
pub fn validate_env_key(origin: &str, key: &str) -> Result<(), ConfigError> {
    validate_env_key_as(origin, names::sandbox_env, key)
}

/// [`validate_env_key`] with the error naming `what` instead of
/// `sandbox_env` (e.g. `env` for a command's own environment).
pub(crate) fn validate_env_key_as(origin: &str, what: &str, key: &str) -> Result<(), ConfigError> {
    if key == EXEC_TAG_ENV {
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
            names::sandbox_env,
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
pub(crate) fn host_refs(value: &str) -> Vec<String> {
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

// ---------------------------------------------------------------------------
// Helpers

fn invalid(origin: &str, key: &str, reason: String) -> ConfigError {
    ConfigError::invalid_value(origin.to_string(), key, reason)
}

/// A character for a message: printable ASCII as `'x'`, anything else as
/// `U+XXXX` so nothing invisible or control reaches a terminal.
pub(super) fn char_name(c: char) -> String {
    if c.is_ascii_graphic() {
        format!("'{c}'")
    } else {
        format!("U+{:04X}", u32::from(c))
    }
}

/// Control characters and invisible formatting characters that can make a
/// displayed value differ from the real one (bidi controls, zero-width).
pub(super) fn is_hidden_or_control(c: char) -> bool {
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

#[cfg(test)]
pub(super) mod tests {
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

    /// A refusal's message is short and carries no raw control or hidden
    /// character (also used by hostpath.rs's tests).
    pub(in crate::config) fn assert_display_safe(err: &ConfigError) {
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
