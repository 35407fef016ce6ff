//! Reading the config sources of SPEC §3.2: JSON files (strict) and `ODEK_*`
//! environment variables.
//!
//! JSON is read in two steps: a strict syntax pass (serde_json driven by a
//! private visitor that refuses duplicate keys, NUL characters and nesting
//! deeper than [`MAX_DEPTH`] with the position serde_json reports), then a
//! type check of each known key into a [`Layer`]. Range and format checks
//! (pids ≥ 1, memory notation, network names, …) are not done here: they
//! belong to `validate`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::Path;

use serde::de::{DeserializeSeed, Deserializer, Error as _, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

use super::keys::{Kind, KEYS, KNOWN_KEYS};
use super::{quote, ConfigError, Layer};
use crate::warning::{Warning, WarningKind};

/// Config files larger than this are refused (1 MiB).
pub const MAX_CONFIG_BYTES: usize = 1 << 20;

/// Deepest nesting of arrays/objects a config file may have; the top-level
/// object is level 1.
const MAX_DEPTH: usize = 32;

/// 2^63: the smallest magnitude a JSON integer read as f64 cannot fit i64.
const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;

/// The UTF-8 byte-order mark.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Reads and parses the user config at `path` (SPEC §3.2), following a
/// symlink (the operator's own file; dotfile managers link them) but with
/// the other rules of [`crate::safe_open`]: a FIFO or device is refused at
/// once, never waited on. `Ok(None)` when it does not exist.
/// Errors: unreadable (permissions, a directory, not a regular file, a
/// symlink to nothing) → [`ConfigError::Unreadable`]; larger than
/// [`MAX_CONFIG_BYTES`] → [`ConfigError::Malformed`] (line and column 0);
/// or anything [`parse_bytes`] refuses.
pub(crate) fn parse_file(path: &Path) -> Result<Option<(Layer, Vec<Warning>)>, ConfigError> {
    let bytes = crate::safe_open::read_following(path, MAX_CONFIG_BYTES as u64)
        .map_err(|e| refused(path, e, false))?;
    bytes.map(|b| parse_bytes(&b, path)).transpose()
}

/// Reads and parses the project config `name` (`odek.json`) in the project
/// directory `dir` (absolute, canonical) through one descriptor
/// ([`crate::safe_open`]): never through a symlink, never waiting on a
/// FIFO, `fstat` says regular, at most [`MAX_CONFIG_BYTES`]. `Ok(None)`
/// when it does not exist.
/// Errors: as [`parse_file`], and a symlink (the file or a directory on
/// the way) → [`ConfigError::Unreadable`] saying a project config must be
/// a regular file in the project directory.
pub(crate) fn parse_project_file(
    dir: &Path,
    name: &str,
) -> Result<Option<(Layer, Vec<Warning>)>, ConfigError> {
    let path = dir.join(name);
    let bytes = crate::safe_open::read_in(dir, name, MAX_CONFIG_BYTES as u64)
        .map_err(|e| refused(&path, e, true))?;
    bytes.map(|b| parse_bytes(&b, &path)).transpose()
}

/// A config file [`crate::safe_open`] refused, as a [`ConfigError`].
fn refused(path: &Path, e: crate::safe_open::Refused, project: bool) -> ConfigError {
    use crate::safe_open::Refused;
    let reason = match e {
        Refused::TooLarge { size, .. } => return too_large(path, size),
        Refused::Symlink if project => {
            "is a symlink; a project config must be a regular file in the project directory"
                .to_string()
        }
        e => e.to_string(),
    };
    ConfigError::Unreadable {
        path: path.to_path_buf(),
        reason,
    }
}

/// Parses config JSON strictly (SPEC §3.2): a top-level object; duplicate
/// keys at any depth, a UTF-8 BOM, NUL bytes (raw or as `\u0000` in a
/// string), invalid UTF-8, trailing data, nesting deeper than 32, and more
/// than [`MAX_CONFIG_BYTES`] are [`ConfigError::Malformed`] (1-based line
/// and column where known, 0 otherwise); values of the wrong JSON type are
/// [`ConfigError::InvalidValue`] naming the key and the expected type.
/// Types: `sandbox`, `sandbox_readonly` bool; `sandbox_image`,
/// `sandbox_network`, `sandbox_compose_project`, `sandbox_user` string;
/// `sandbox_networks`, `sandbox_volumes` array of strings;
/// `sandbox_pids_limit` integer that fits i64 (not a float such as `4096.0`
/// or `1e3`, not a string; its range is checked by validation);
/// `sandbox_memory` string, or a non-negative integer taken as bytes
/// (converted to its decimal string); `sandbox_cpus` string or number
/// (converted to its decimal text); `sandbox_env` object of string values.
/// `null` for any key is an error. Unknown keys give a
/// [`crate::warning::WarningKind::UnknownKey`] warning (key shown quoted and
/// escaped), not an error. Error messages never contain `sandbox_env` values.
pub fn parse_bytes(bytes: &[u8], path: &Path) -> Result<(Layer, Vec<Warning>), ConfigError> {
    if bytes.len() > MAX_CONFIG_BYTES {
        return Err(too_large(path, bytes.len() as u64));
    }
    if bytes.starts_with(BOM) {
        return Err(malformed(
            path,
            1,
            1,
            "starts with a UTF-8 byte-order mark; save it without BOM",
        ));
    }
    let text = match std::str::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => {
            let (line, column) = line_column(bytes, e.valid_up_to());
            return Err(malformed(path, line, column, "is not valid UTF-8"));
        }
    };
    if let Some(at) = bytes.iter().position(|&b| b == 0) {
        let (line, column) = line_column(bytes, at);
        return Err(malformed(path, line, column, "contains a NUL byte"));
    }

    let mut de = serde_json::Deserializer::from_str(text);
    let doc = TopSeed
        .deserialize(&mut de)
        .map_err(|e| from_serde(path, &e))?;
    de.end().map_err(|e| from_serde(path, &e))?;

    let entries = match doc {
        Top::Object(entries) => entries,
        Top::Other(other) => {
            let at = bytes
                .iter()
                .position(|b| !b.is_ascii_whitespace())
                .unwrap_or(0);
            let (line, column) = line_column(bytes, at);
            return Err(malformed(
                path,
                line,
                column,
                &format!(
                    "the top level must be a JSON object {{…}} (got {})",
                    type_name(&other)
                ),
            ));
        }
    };
    build_layer(entries, path)
}

/// Checks any JSON document with the strict rules of config files: no
/// duplicate keys at any depth, no NUL in strings, nesting at most 32 deep,
/// nothing after the value. Used by the C ABI on every document it is given
/// (a duplicate key there would otherwise silently win or lose). Errors are
/// messages with the position.
pub fn check_strict_json(text: &str) -> Result<(), String> {
    let mut de = serde_json::Deserializer::from_str(text);
    TopSeed
        .deserialize(&mut de)
        .and_then(|_| de.end())
        .map_err(|e| e.to_string())
}

/// A boolean env var (CONFIG.md), the one rule for the keys' variables and
/// the process-level switches: `1/true/yes/on` → `Some(true)`,
/// `0/false/no/off` → `Some(false)` (ASCII case-insensitive, no surrounding
/// whitespace); unset or empty → `None`. Errors: the reason, naming the
/// accepted spellings and the (quoted) value.
pub(crate) fn env_bool(value: Option<&str>) -> Result<Option<bool>, String> {
    let Some(v) = value.filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    match v.to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(Some(true)),
        "0" | "false" | "no" | "off" => Ok(Some(false)),
        _ => Err(format!(
            "must be a boolean: 1/true/yes/on or 0/false/no/off (got {})",
            quote(v)
        )),
    }
}

/// The `ODEK_*` variables of SPEC §3.1 as a layer, read from `env` (not
/// from the process environment); an empty value = unset. String values are
/// taken verbatim (checked later by validation). Booleans accept
/// `1/true/yes/on` and `0/false/no/off` (case-insensitive, no surrounding
/// whitespace); `ODEK_SANDBOX_NETWORKS` is a comma list (items trimmed; an
/// empty item is an error); `ODEK_SANDBOX_PIDS_LIMIT` a decimal integer
/// (optional `-`, no `+`, fits i64). Other variables are ignored. Errors are
/// [`ConfigError::InvalidValue`] with origin `env <VAR>`.
pub(crate) fn layer_from_env(env: &BTreeMap<String, String>) -> Result<Layer, ConfigError> {
    let mut layer = Layer::default();
    for key in KEYS {
        let Some(var) = key.env else { continue };
        if let Some(text) = env.get(var).filter(|v| !v.is_empty()) {
            layer.set_text(key.name, &format!("env {var}"), text)?;
        }
    }
    Ok(layer)
}

// ---------------------------------------------------------------------------
// Errors and positions

fn malformed(path: &Path, line: usize, column: usize, reason: &str) -> ConfigError {
    ConfigError::Malformed {
        path: path.to_path_buf(),
        line,
        column,
        reason: reason.to_string(),
    }
}

fn too_large(path: &Path, size: u64) -> ConfigError {
    malformed(
        path,
        0,
        0,
        &format!("is {size} bytes, larger than the {MAX_CONFIG_BYTES}-byte limit for config files"),
    )
}

/// 1-based line and column (in bytes, like serde_json) of byte `at`.
fn line_column(bytes: &[u8], at: usize) -> (usize, usize) {
    let before = &bytes[..at.min(bytes.len())];
    let line = 1 + before.iter().filter(|&&b| b == b'\n').count();
    let line_start = before
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    (line, at - line_start + 1)
}

/// A serde_json error as [`ConfigError::Malformed`], the position moved out
/// of the message into the fields. serde_json's messages carry no input
/// text, and the private visitor's messages only keys, so no value leaks.
fn from_serde(path: &Path, e: &serde_json::Error) -> ConfigError {
    let (line, column) = (e.line(), e.column());
    let text = e.to_string();
    let suffix = format!(" at line {line} column {column}");
    let message = text.strip_suffix(&suffix).unwrap_or(&text);
    let reason = match e.classify() {
        serde_json::error::Category::Data => message.to_string(),
        _ => format!("invalid JSON: {message}"),
    };
    // serde_json says column 0 at the start of a line (e.g. empty input).
    let column = if line > 0 { column.max(1) } else { column };
    malformed(path, line, column, &reason)
}

// ---------------------------------------------------------------------------
// Strict JSON: serde_json's `Value`, read by a visitor that refuses what
// `Value`'s own reader accepts (a duplicate key keeps the last value there)

/// What a description of a value's JSON type reads like in messages.
fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_f64() => "a number with a fraction or exponent",
        Value::Number(_) => "an integer",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A whole document: the top-level object's entries in document order (for
/// the unknown-key warnings and the first error), or another value.
enum Top {
    Object(Vec<(String, Value)>),
    Other(Value),
}

/// Deserializes a [`Top`] (the top level is nesting level 1).
struct TopSeed;

impl<'de> DeserializeSeed<'de> for TopSeed {
    type Value = Top;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Top, D::Error> {
        deserializer.deserialize_any(TopVisitor)
    }
}

struct TopVisitor;

impl<'de> Visitor<'de> for TopVisitor {
    type Value = Top;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Top, E> {
        StrictVisitor { depth: 1 }.visit_bool(v).map(Top::Other)
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Top, E> {
        StrictVisitor { depth: 1 }.visit_i64(v).map(Top::Other)
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Top, E> {
        StrictVisitor { depth: 1 }.visit_u64(v).map(Top::Other)
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Top, E> {
        StrictVisitor { depth: 1 }.visit_f64(v).map(Top::Other)
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Top, E> {
        StrictVisitor { depth: 1 }.visit_str(v).map(Top::Other)
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Top, E> {
        Ok(Top::Other(Value::Null))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Top, A::Error> {
        StrictVisitor { depth: 1 }.visit_seq(seq).map(Top::Other)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Top, A::Error> {
        entries(map, 1).map(Top::Object)
    }
}

/// Deserializes one [`Value`] at nesting level `depth` (containers count;
/// the top level is 1).
struct StrictSeed {
    depth: usize,
}

impl<'de> DeserializeSeed<'de> for StrictSeed {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(StrictVisitor { depth: self.depth })
    }
}

struct StrictVisitor {
    depth: usize,
}

/// Refuses a container at a level deeper than [`MAX_DEPTH`].
fn enter<E: serde::de::Error>(depth: usize) -> Result<(), E> {
    if depth > MAX_DEPTH {
        return Err(E::custom(format!(
            "nesting is deeper than {MAX_DEPTH} levels"
        )));
    }
    Ok(())
}

fn no_nul<E: serde::de::Error>(s: &str) -> Result<(), E> {
    if s.contains('\0') {
        return Err(E::custom(
            "a string contains the NUL character (\\u0000), which is not allowed",
        ));
    }
    Ok(())
}

/// An object's entries in document order, refusing a duplicate key.
fn entries<'de, A: MapAccess<'de>>(
    mut map: A,
    depth: usize,
) -> Result<Vec<(String, Value)>, A::Error> {
    enter(depth)?;
    let mut seen = BTreeSet::new();
    let mut entries = Vec::new();
    while let Some(key) = map.next_key::<String>()? {
        no_nul(&key)?;
        if !seen.insert(key.clone()) {
            return Err(A::Error::custom(format!("duplicate key {}", quote(&key))));
        }
        let value = map.next_value_seed(StrictSeed { depth: depth + 1 })?;
        entries.push((key, value));
    }
    Ok(entries)
}

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Value, E> {
        // serde_json's reader refuses what is not finite before this.
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Value, E> {
        no_nul(v)?;
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Value, E> {
        no_nul(&v)?;
        Ok(Value::String(v))
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E: serde::de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        enter(self.depth)?;
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(StrictSeed {
            depth: self.depth + 1,
        })? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Value, A::Error> {
        let entries = entries(map, self.depth)?;
        Ok(Value::Object(entries.into_iter().collect::<Map<_, _>>()))
    }
}

// ---------------------------------------------------------------------------
// Type check into a Layer

fn build_layer(
    entries: Vec<(String, Value)>,
    path: &Path,
) -> Result<(Layer, Vec<Warning>), ConfigError> {
    let origin = path.display().to_string();
    let mut layer = Layer::default();
    let mut warnings = Vec::new();
    for (key, value) in entries {
        let ctx = Ctx {
            origin: &origin,
            key: &key,
        };
        if value.is_null() && KNOWN_KEYS.contains(&key.as_str()) {
            return Err(
                ctx.invalid("must not be null (remove the key to leave it unset)".to_string())
            );
        }
        if !layer.set_json(&key, &ctx, value)? {
            warnings.push(unknown_key(&origin, &key));
        }
    }
    Ok((layer, warnings))
}

fn unknown_key(origin: &str, key: &str) -> Warning {
    let hint = suggest(key)
        .map(|k| format!(" (did you mean {k:?}?)"))
        .unwrap_or_default();
    Warning::new(
        WarningKind::UnknownKey,
        format!("{origin}: unknown key {} ignored{hint}", quote(key)),
    )
}

/// The known key closest to `key` (case-insensitive equal, or at most two
/// edits away), for the unknown-key warning and the ABI's refusal.
pub(crate) fn suggest(key: &str) -> Option<&'static str> {
    if key.len() > 64 {
        return None;
    }
    let lower = key.to_ascii_lowercase();
    KNOWN_KEYS
        .iter()
        .map(|k| (strsim::levenshtein(&lower, k), *k))
        .filter(|(d, _)| *d <= 2)
        .min()
        .map(|(_, k)| k)
}

/// Where a value is being type-checked: its origin (a file, `env VAR`,
/// `flag --x`) and key.
pub(super) struct Ctx<'a> {
    pub(super) origin: &'a str,
    pub(super) key: &'a str,
}

impl Ctx<'_> {
    fn invalid(&self, reason: String) -> ConfigError {
        ConfigError::invalid_value(self.origin.to_string(), self.key, reason)
    }
}

/// How one [`Kind`] of value is read: from config-file JSON and from the
/// text of an env var or flag (non-empty). Errors are
/// [`ConfigError::InvalidValue`] naming the key and the expected type.
pub(super) trait ValueKind {
    /// What the kind yields (the [`Layer`] field's type).
    type Out;
    /// The kind.
    const KIND: Kind;
    /// Type-checks a config file's value.
    fn json(ctx: &Ctx<'_>, value: Value) -> Result<Self::Out, ConfigError>;
    /// Reads the text of an env var or flag.
    fn text(ctx: &Ctx<'_>, text: &str) -> Result<Self::Out, ConfigError>;
    /// Whether a set value asks for a container (SPEC §6.3): a boolean
    /// only when `true`.
    fn asks(_value: &Self::Out) -> bool {
        true
    }
}

/// The marker types of each [`Kind`].
pub(super) mod kind {
    /// [`super::Kind::Bool`].
    pub(in crate::config) struct Bool;
    /// [`super::Kind::Text`].
    pub(in crate::config) struct Text;
    /// [`super::Kind::List`].
    pub(in crate::config) struct List;
    /// [`super::Kind::Integer`].
    pub(in crate::config) struct Integer;
    /// [`super::Kind::Memory`].
    pub(in crate::config) struct Memory;
    /// [`super::Kind::Cpus`].
    pub(in crate::config) struct Cpus;
    /// [`super::Kind::Map`].
    pub(in crate::config) struct Map;
}

impl ValueKind for kind::Bool {
    type Out = bool;
    const KIND: Kind = Kind::Bool;

    fn json(ctx: &Ctx<'_>, value: Value) -> Result<bool, ConfigError> {
        match value {
            Value::Bool(b) => Ok(b),
            other => Err(ctx.invalid(format!("must be true or false (got {})", type_name(&other)))),
        }
    }

    fn text(ctx: &Ctx<'_>, text: &str) -> Result<bool, ConfigError> {
        env_bool(Some(text))
            .map_err(|reason| ctx.invalid(reason))
            .map(|b| b.unwrap_or(false))
    }

    fn asks(value: &bool) -> bool {
        *value
    }
}

impl ValueKind for kind::Text {
    type Out = String;
    const KIND: Kind = Kind::Text;

    fn json(ctx: &Ctx<'_>, value: Value) -> Result<String, ConfigError> {
        match value {
            Value::String(s) => Ok(s),
            other => Err(ctx.invalid(format!("must be a string (got {})", type_name(&other)))),
        }
    }

    fn text(_ctx: &Ctx<'_>, text: &str) -> Result<String, ConfigError> {
        Ok(text.to_string())
    }
}

impl ValueKind for kind::List {
    type Out = Vec<String>;
    const KIND: Kind = Kind::List;

    fn json(ctx: &Ctx<'_>, value: Value) -> Result<Vec<String>, ConfigError> {
        let Value::Array(items) = value else {
            return Err(ctx.invalid(format!(
                "must be an array of strings (got {})",
                type_name(&value)
            )));
        };
        items
            .into_iter()
            .enumerate()
            .map(|(i, item)| match item {
                Value::String(s) => Ok(s),
                other => Err(ctx.invalid(format!(
                    "must be an array of strings (item {} is {})",
                    i + 1,
                    type_name(&other)
                ))),
            })
            .collect()
    }

    /// A comma list, items trimmed; an empty item is an error.
    fn text(ctx: &Ctx<'_>, text: &str) -> Result<Vec<String>, ConfigError> {
        let mut names = Vec::new();
        for (i, item) in text.split(',').enumerate() {
            let item = item.trim();
            if item.is_empty() {
                return Err(ctx.invalid(format!(
                    "must be a comma-separated list of network names (item {} is empty)",
                    i + 1
                )));
            }
            names.push(item.to_string());
        }
        Ok(names)
    }
}

impl ValueKind for kind::Integer {
    type Out = i64;
    const KIND: Kind = Kind::Integer;

    fn json(ctx: &Ctx<'_>, value: Value) -> Result<i64, ConfigError> {
        match value {
            Value::Number(n) => {
                if let Some(n) = n.as_i64() {
                    Ok(n)
                } else if let Some(n) = n.as_u64() {
                    Err(ctx.invalid(format!("must be an integer that fits in 64 bits (got {n})")))
                } else {
                    let f = n.as_f64().unwrap_or(f64::NAN);
                    if f.is_finite() && f.fract() == 0.0 && f.abs() >= TWO_POW_63 {
                        Err(ctx.invalid(format!(
                            "must be an integer that fits in 64 bits (got {f:e})"
                        )))
                    } else {
                        Err(ctx.invalid(format!(
                            "must be a JSON integer like 4096, without a fraction or exponent (got {f:?})"
                        )))
                    }
                }
            }
            Value::String(s) => Err(ctx.invalid(format!(
                "must be a JSON integer like 4096, not a string (got {})",
                quote(&s)
            ))),
            other => Err(ctx.invalid(format!(
                "must be a JSON integer like 4096 (got {})",
                type_name(&other)
            ))),
        }
    }

    /// A decimal integer: optional `-`, no `+`, fits i64.
    fn text(ctx: &Ctx<'_>, text: &str) -> Result<i64, ConfigError> {
        let digits = text.strip_prefix('-').unwrap_or(text);
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(ctx.invalid(format!(
                "must be a decimal integer like 4096 (got {})",
                quote(text)
            )));
        }
        text.parse::<i64>().map_err(|_| {
            ctx.invalid(format!(
                "must be an integer that fits in 64 bits (got {})",
                quote(text)
            ))
        })
    }
}

impl ValueKind for kind::Memory {
    type Out = String;
    const KIND: Kind = Kind::Memory;

    fn json(ctx: &Ctx<'_>, value: Value) -> Result<String, ConfigError> {
        let wrong = |got: String| {
            ctx.invalid(format!(
                "must be a string like \"512m\" or a non-negative integer number of bytes (got {got})"
            ))
        };
        match value {
            Value::String(s) => Ok(s),
            Value::Number(n) if n.is_u64() => Ok(n.to_string()),
            Value::Number(n) if n.is_i64() => Err(wrong(n.to_string())),
            other => Err(wrong(type_name(&other).to_string())),
        }
    }

    fn text(_ctx: &Ctx<'_>, text: &str) -> Result<String, ConfigError> {
        Ok(text.to_string())
    }
}

impl ValueKind for kind::Cpus {
    type Out = String;
    const KIND: Kind = Kind::Cpus;

    fn json(ctx: &Ctx<'_>, value: Value) -> Result<String, ConfigError> {
        match value {
            Value::String(s) => Ok(s),
            // `Display` for f64 is plain decimal (no exponent), shortest
            // round-trip: 0.5 → "0.5", 2.0 → "2".
            Value::Number(n) => Ok(match n.as_f64() {
                Some(f) if n.is_f64() => f.to_string(),
                _ => n.to_string(),
            }),
            other => Err(ctx.invalid(format!(
                "must be a number like 0.5 or a string like \"0.5\" (got {})",
                type_name(&other)
            ))),
        }
    }

    fn text(_ctx: &Ctx<'_>, text: &str) -> Result<String, ConfigError> {
        Ok(text.to_string())
    }
}

impl ValueKind for kind::Map {
    type Out = BTreeMap<String, String>;
    const KIND: Kind = Kind::Map;

    fn json(ctx: &Ctx<'_>, value: Value) -> Result<BTreeMap<String, String>, ConfigError> {
        let Value::Object(entries) = value else {
            return Err(ctx.invalid(format!(
                "must be an object of NAME: \"value\" strings (got {})",
                type_name(&value)
            )));
        };
        let mut env = BTreeMap::new();
        for (name, value) in entries {
            match value {
                Value::String(s) => {
                    env.insert(name, s);
                }
                // Only the type is named, never the value (env values are user data).
                other => {
                    return Err(ctx.invalid(format!(
                        "must map each name to a string (the value of {} is {})",
                        quote(&name),
                        type_name(&other)
                    )))
                }
            }
        }
        Ok(env)
    }

    /// No env var or flag sets a map.
    fn text(ctx: &Ctx<'_>, _text: &str) -> Result<BTreeMap<String, String>, ConfigError> {
        Err(ctx.invalid(
            "can only be set in a config file (an object of NAME: \"value\" strings)".to_string(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::names;
    use crate::config::parse_network_mode;

    const SECRET: &str = "s3cr3t-value";

    fn path() -> &'static Path {
        Path::new("/home/dev/app/odek.json")
    }

    fn parse(text: &str) -> Result<(Layer, Vec<Warning>), ConfigError> {
        parse_bytes(text.as_bytes(), path())
    }

    /// Asserts `Malformed`, returns (line, column, reason).
    fn malformed_of(result: Result<(Layer, Vec<Warning>), ConfigError>) -> (usize, usize, String) {
        match result {
            Err(ConfigError::Malformed {
                path: p,
                line,
                column,
                reason,
            }) => {
                assert_eq!(p, path());
                (line, column, reason)
            }
            other => panic!("expected Malformed, got {other:?}"),
        }
    }

    fn nested(open: &str, close: &str, levels: usize) -> String {
        format!("{}{}", open.repeat(levels), close.repeat(levels))
    }

    #[test]
    fn accepts_every_key() {
        let text = r#"{
            "sandbox": true,
            "sandbox_image": "node:20-alpine",
            "sandbox_network": "bridge",
            "sandbox_networks": ["redis_default", "backend"],
            "sandbox_compose_project": "myapp",
            "sandbox_pids_limit": 512,
            "sandbox_readonly": false,
            "sandbox_memory": "512m",
            "sandbox_cpus": 0.5,
            "sandbox_user": "1000:1000",
            "sandbox_runtime": "runsc",
            "sandbox_env": {"NODE_ENV": "production", "API_TOKEN": "${TOKEN}"},
            "sandbox_volumes": ["./cache:/root/.cache"],
            "sandbox_pool": 2,
            "sandbox_log_retention": 14
        }"#;
        let (layer, warnings) = parse(text).expect("valid config");
        assert!(warnings.is_empty(), "{warnings:?}");
        let env: BTreeMap<String, String> = [("NODE_ENV", "production"), ("API_TOKEN", "${TOKEN}")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(
            layer,
            Layer {
                sandbox: Some(true),
                sandbox_image: Some("node:20-alpine".into()),
                sandbox_network: Some("bridge".into()),
                sandbox_networks: Some(vec!["redis_default".into(), "backend".into()]),
                sandbox_compose_project: Some("myapp".into()),
                sandbox_stack: None,
                sandbox_pids_limit: Some(512),
                sandbox_readonly: Some(false),
                sandbox_memory: Some("512m".into()),
                sandbox_cpus: Some("0.5".into()),
                sandbox_user: Some("1000:1000".into()),
                sandbox_runtime: Some("runsc".into()),
                sandbox_workspace: None,
                sandbox_env: Some(env),
                sandbox_volumes: Some(vec!["./cache:/root/.cache".into()]),
                sandbox_egress: None,
                sandbox_egress_network: None,
                sandbox_pool: Some(2),
                sandbox_log_retention: Some(14),
            }
        );
    }

    #[test]
    fn empty_object_sets_nothing() {
        for text in ["{}", " \n\t{ }\r\n", "{\n}\n"] {
            let (layer, warnings) = parse(text).expect("empty object");
            assert_eq!(layer, Layer::default(), "{text:?}");
            assert!(warnings.is_empty());
        }
    }

    #[test]
    fn empty_collections_are_set_not_unset() {
        let (layer, _) =
            parse(r#"{"sandbox_networks": [], "sandbox_volumes": [], "sandbox_env": {}}"#)
                .expect("valid");
        assert_eq!(layer.sandbox_networks, Some(vec![]));
        assert_eq!(layer.sandbox_volumes, Some(vec![]));
        assert_eq!(layer.sandbox_env, Some(BTreeMap::new()));
    }

    #[test]
    fn number_conversions() {
        // parse only type-checks: the range of pids is validate_pids_limit's job
        for (text, want) in [
            ("4096", 4096),
            ("0", 0),
            ("-1", -1),
            ("9223372036854775807", i64::MAX),
            ("-9223372036854775808", i64::MIN),
        ] {
            let json = format!(r#"{{"sandbox_pids_limit": {text}}}"#);
            let (layer, _) = parse(&json).unwrap_or_else(|e| panic!("{json}: {e}"));
            assert_eq!(layer.sandbox_pids_limit, Some(want), "{json}");
        }
        for (text, want) in [
            ("536870912", "536870912"),
            ("0", "0"),
            ("18446744073709551615", "18446744073709551615"),
            (r#""1.5g""#, "1.5g"),
            (r#""lots""#, "lots"),
        ] {
            let json = format!(r#"{{"sandbox_memory": {text}}}"#);
            let (layer, _) = parse(&json).unwrap_or_else(|e| panic!("{json}: {e}"));
            assert_eq!(layer.sandbox_memory.as_deref(), Some(want), "{json}");
        }
        for (text, want) in [
            ("2", "2"),
            ("2.0", "2"),
            ("0.25", "0.25"),
            ("1e-3", "0.001"),
            ("-1", "-1"),
            ("18446744073709551615", "18446744073709551615"),
            (r#""1.5""#, "1.5"),
        ] {
            let json = format!(r#"{{"sandbox_cpus": {text}}}"#);
            let (layer, _) = parse(&json).unwrap_or_else(|e| panic!("{json}: {e}"));
            assert_eq!(layer.sandbox_cpus.as_deref(), Some(want), "{json}");
        }
    }

    #[test]
    fn unknown_keys_warn_with_quoted_key() {
        let (layer, warnings) = parse(
            r#"{"sandbox": false, "sandbox_pid_limit": 5, "colour": null, "x\u202ey": 1, "": [], "deep": {"a": [1, {"b": null}]}}"#,
        )
        .expect("unknown keys are not fatal");
        assert_eq!(layer.sandbox, Some(false));
        assert_eq!(warnings.len(), 5, "{warnings:?}");
        assert!(warnings.iter().all(|w| w.kind == WarningKind::UnknownKey));
        assert!(warnings[0].message.contains("\"sandbox_pid_limit\""));
        assert!(warnings[0]
            .message
            .contains("did you mean \"sandbox_pids_limit\"?"));
        assert!(warnings[0].message.contains("odek.json"));
        assert!(warnings[1].message.contains("\"colour\""));
        assert!(!warnings[1].message.contains("did you mean"));
        // the bidi override is escaped, never shown raw
        assert!(warnings[2].message.contains("\\u{202e}"));
        assert!(!warnings[2].message.contains('\u{202e}'));
        assert!(warnings[3].message.contains("\"\""));
        assert!(warnings[4].message.contains("\"deep\""));
    }

    #[test]
    fn unknown_key_case_typo_suggests() {
        let (_, warnings) = parse(r#"{"Sandbox_Image": "x"}"#).expect("valid");
        assert!(warnings[0]
            .message
            .contains("did you mean \"sandbox_image\"?"));
        let long = format!(r#"{{"{}": 1}}"#, "k".repeat(5000));
        let (_, warnings) = parse(&long).expect("valid");
        assert!(
            warnings[0].message.len() < 400,
            "key is truncated in the warning"
        );
    }

    #[test]
    fn malformed_json_is_refused_with_position() {
        // (input, expected line, expected column (0 = don't check), reason fragment)
        #[rustfmt::skip]
        let cases: &[(&str, usize, usize, &str)] = &[
            ("", 1, 1, "EOF"),
            ("   ", 1, 0, "EOF"),
            ("{", 1, 0, "EOF"),
            ("{\n", 2, 1, "EOF"),
            ("{}x", 1, 3, "trailing characters"),
            ("{} {}", 1, 4, "trailing characters"),
            ("{}\n[]", 2, 1, "trailing characters"),
            ("{,}", 1, 2, "invalid JSON"),
            (r#"{"a": 1,}"#, 1, 0, "trailing comma"),
            (r#"{"a" 1}"#, 1, 0, "expected `:`"),
            (r#"{'a': 1}"#, 1, 0, "key must be a string"),
            ("{\"a\": 1 // comment\n}", 1, 0, "invalid JSON"),
            ("{\"a\": /* c */ 1}", 1, 0, "invalid JSON"),
            (r#"{"a": NaN}"#, 1, 0, "invalid JSON"),
            (r#"{"a": Infinity}"#, 1, 0, "invalid JSON"),
            (r#"{"a": 0x10}"#, 1, 0, "invalid JSON"),
            (r#"{"a": 01}"#, 1, 0, "invalid JSON"),
            (r#"{"a": .5}"#, 1, 0, "invalid JSON"),
            (r#"{"a": +1}"#, 1, 0, "invalid JSON"),
            (r#"{"a": "x\qy"}"#, 1, 0, "invalid escape"),
            (r#"{"a": "\ud800"}"#, 1, 0, "escape"),
            ("{\"a\": \"line\nbreak\"}", 2, 0, "control character"),
            ("{\"a\": \"tab\there\"}", 1, 0, "control character"),
            (r#"{"a": "unterminated}"#, 1, 0, "EOF"),
            ("{\n  \"sandbox\": true,\n  \"sandbox\": false\n}", 3, 0, "duplicate key \"sandbox\""),
            (r#"{"sandbox_env": {"A": "1", "A": "2"}}"#, 1, 0, "duplicate key \"A\""),
            (r#"{"x": {"y": [{"z": 1, "z": 2}]}}"#, 1, 0, "duplicate key \"z\""),
            (r#"{"a": 1, "\u0061": 2}"#, 1, 0, "duplicate key \"a\""),
            (r#"{"sandbox_env": {"A\u0000": "1"}}"#, 1, 0, "NUL"),
            (r#"{"sandbox_image": "a\u0000b"}"#, 1, 0, "NUL"),
            (r#"{"x": ["\u0000"]}"#, 1, 0, "NUL"),
            ("[]", 1, 1, "top level must be a JSON object {…} (got an array)"),
            ("  \"str\"", 1, 3, "top level must be a JSON object {…} (got a string)"),
            ("1", 1, 1, "top level must be a JSON object {…} (got an integer)"),
            ("null", 1, 1, "top level must be a JSON object {…} (got null)"),
            ("\n\ntrue", 3, 1, "top level must be a JSON object {…} (got a boolean)"),
        ];
        for (text, line, column, fragment) in cases {
            let (l, c, reason) = malformed_of(parse(text));
            assert!(
                reason.contains(fragment),
                "{text:?}: reason {reason:?} lacks {fragment:?}"
            );
            assert_eq!(l, *line, "{text:?}: line ({reason})");
            if *column != 0 {
                assert_eq!(c, *column, "{text:?}: column ({reason})");
            }
            assert!(c >= 1, "{text:?}: column is 1-based ({reason})");
            let shown = ConfigError::Malformed {
                path: path().into(),
                line: l,
                column: c,
                reason,
            }
            .to_string();
            assert!(shown.starts_with("/home/dev/app/odek.json:"), "{shown}");
        }
    }

    #[test]
    fn byte_level_hostile_input() {
        let mut bom = BOM.to_vec();
        bom.extend_from_slice(b"{}");
        let (l, c, reason) = malformed_of(parse_bytes(&bom, path()));
        assert_eq!((l, c), (1, 1));
        assert_eq!(
            reason,
            "starts with a UTF-8 byte-order mark; save it without BOM"
        );

        let (l, c, reason) = malformed_of(parse_bytes(b"{\n \"a\": \x00}", path()));
        assert_eq!((l, c), (2, 7));
        assert!(reason.contains("NUL byte"), "{reason}");

        let (_, _, reason) = malformed_of(parse_bytes(b"{\"a\": \"x\x00y\"}", path()));
        assert!(reason.contains("NUL"), "{reason}");

        for bad in [
            &b"{\"a\": \"\xff\"}"[..],
            b"{\"a\": \"\xc3\"}",
            b"{\"\xed\xa0\x80\": 1}",
            b"\xfe\xff{}",
        ] {
            let (l, c, reason) = malformed_of(parse_bytes(bad, path()));
            assert!(reason.contains("not valid UTF-8"), "{reason}");
            assert_eq!(l, 1);
            assert!(c >= 1);
        }
        let (l, c, _) = malformed_of(parse_bytes(b"{\n\n  \"\xff\": 1}", path()));
        assert_eq!((l, c), (3, 4));

        // UTF-16 with BOM is neither UTF-8 nor accepted
        let utf16: Vec<u8> = "\u{feff}{}"
            .encode_utf16()
            .flat_map(u16::to_le_bytes)
            .collect();
        malformed_of(parse_bytes(&utf16, path()));
    }

    #[test]
    fn nesting_limit() {
        // the top-level object is level 1: 31 more levels are fine, 32 are not
        let ok = format!(r#"{{"x": {}}}"#, nested("[", "]", MAX_DEPTH - 1));
        parse(&ok).expect("32 levels are allowed");
        let ok = format!(
            r#"{{"x": {}1{}}}"#,
            r#"{"a":"#.repeat(MAX_DEPTH - 1),
            "}".repeat(MAX_DEPTH - 1)
        );
        parse(&ok).expect("32 levels of objects are allowed");

        let too_deep = format!(r#"{{"x": {}}}"#, nested("[", "]", MAX_DEPTH));
        let (l, c, reason) = malformed_of(parse(&too_deep));
        assert!(
            reason.contains("nesting is deeper than 32 levels"),
            "{reason}"
        );
        assert_eq!(l, 1);
        assert!(c > 32);
    }

    #[test]
    fn very_deep_input_is_an_error_not_a_crash() {
        for text in [
            format!(r#"{{"x": {}}}"#, nested("[", "]", 100_000)),
            format!(r#"{{"x": {}"#, "[".repeat(200_000)),
            format!("{}1{}", r#"{"a":"#.repeat(100_000), "}".repeat(100_000)),
            "[".repeat(500_000),
            format!(r#"{{"sandbox_env": {}}}"#, r#"{"a":"#.repeat(100_000)),
        ] {
            let (_, _, reason) = malformed_of(parse(&text));
            assert!(
                reason.contains("nesting") || reason.contains("top level"),
                "{reason}"
            );
        }
    }

    #[test]
    fn size_limit() {
        // exactly MAX_CONFIG_BYTES is fine
        let filler = MAX_CONFIG_BYTES - r#"{"x": ""}"#.len();
        let at_limit = format!(r#"{{"x": "{}"}}"#, "a".repeat(filler));
        assert_eq!(at_limit.len(), MAX_CONFIG_BYTES);
        parse(&at_limit).expect("1 MiB is allowed");

        let over = format!(r#"{{"x": "{}"}}"#, "a".repeat(filler + 1));
        let (l, c, reason) = malformed_of(parse(&over));
        assert_eq!((l, c), (0, 0));
        assert!(reason.contains("larger than"), "{reason}");
    }

    #[test]
    fn large_values_parse_and_messages_stay_short() {
        let big = "n".repeat(MAX_CONFIG_BYTES - 100);
        let (layer, _) = parse(&format!(r#"{{"sandbox_network": "{big}"}}"#)).expect("valid JSON");
        let network = layer.sandbox_network.expect("set");
        let err = parse_network_mode("odek.json", &network).expect_err("not none/bridge");
        assert!(err.to_string().len() < 1000);
    }

    /// Every wrong JSON type for every key: InvalidValue naming the key.
    #[test]
    fn wrong_types_for_every_key() {
        #[rustfmt::skip]
        let cases: &[(&str, &[&str], &str)] = &[
            ("sandbox", &["\"true\"", "1", "0", "null", "[]", "{}", "[true]"], "true or false"),
            ("sandbox_readonly", &["\"false\"", "0", "null", "[]", "{}"], "true or false"),
            ("sandbox_image", &["1", "true", "null", "[]", "[\"a\"]", "{}"], "must be a string"),
            ("sandbox_network", &["1", "false", "null", "[\"none\"]", "{\"none\": 1}"], "must be a string"),
            ("sandbox_compose_project", &["1", "true", "null", "[]", "{}"], "must be a string"),
            ("sandbox_user", &["1000", "true", "null", "[1000]", "{}"], "must be a string"),
            ("sandbox_networks", &["\"a,b\"", "1", "true", "null", "{}", "[1]", "[\"a\", null]", "[[\"a\"]]", "[{}]"], "array of strings"),
            ("sandbox_volumes", &["\"./a:/a\"", "1", "null", "{}", "[true]", "[\"a:/a\", 2]"], "array of strings"),
            ("sandbox_pids_limit", &["\"4096\"", "4096.0", "1e3", "1E3", "4.5", "-0.0", "true", "null", "[]", "{}", "[4096]"], "integer"),
            ("sandbox_pids_limit", &["99999999999999999999", "18446744073709551615", "9223372036854775808", "-9223372036854775809", "1e300"], "fits in 64 bits"),
            ("sandbox_memory", &["-1", "1.5", "1e9", "true", "null", "[]", "{}", "[\"512m\"]"], "non-negative integer"),
            ("sandbox_cpus", &["true", "null", "[]", "{}", "[0.5]"], "must be a number"),
            ("sandbox_env", &["[]", "\"A=1\"", "1", "true", "null", "[[\"A\", \"1\"]]"], "must be an object"),
            ("sandbox_env", &["{\"A\": 1}", "{\"A\": null}", "{\"A\": true}", "{\"A\": [\"x\"]}", "{\"A\": {\"B\": \"x\"}}", "{\"OK\": \"x\", \"A\": 1.5}"], "must map each name to a string"),
        ];
        for (key, values, fragment) in cases {
            for value in *values {
                let text = format!(r#"{{"{key}": {value}}}"#);
                match parse(&text) {
                    Err(
                        err @ (ConfigError::InvalidValue { .. } | ConfigError::InvalidImage { .. }),
                    ) => {
                        let (origin, k, reason) = match &err {
                            ConfigError::InvalidValue {
                                origin,
                                key: k,
                                reason,
                            } => (origin, k.as_str(), reason),
                            ConfigError::InvalidImage { origin, reason } => {
                                (origin, names::sandbox_image, reason)
                            }
                            _ => unreachable!(),
                        };
                        assert_eq!(k, *key, "{text}");
                        assert_eq!(origin, "/home/dev/app/odek.json");
                        let shown = err.to_string();
                        assert!(shown.contains(key), "{shown}");
                        if *value == "null" {
                            assert!(reason.contains("must not be null"), "{text}: {reason}");
                        } else {
                            assert!(reason.contains(fragment), "{text}: {reason}");
                        }
                    }
                    other => panic!("{text}: expected InvalidValue, got {other:?}"),
                }
            }
        }
    }

    #[test]
    fn pids_limit_messages_are_specific() {
        let reason = |text: &str| match parse(text) {
            Err(ConfigError::InvalidValue { reason, .. }) => reason,
            other => panic!("{text}: {other:?}"),
        };
        assert!(reason(r#"{"sandbox_pids_limit": "4096"}"#).contains("not a string (got \"4096\")"));
        assert!(reason(r#"{"sandbox_pids_limit": 4096.0}"#)
            .contains("without a fraction or exponent (got 4096.0)"));
        assert!(reason(r#"{"sandbox_pids_limit": 1e3}"#).contains("(got 1000.0)"));
        assert!(
            reason(r#"{"sandbox_pids_limit": 99999999999999999999}"#).contains("fits in 64 bits")
        );
    }

    #[test]
    fn env_values_never_appear_in_errors() {
        let cases = [
            format!(r#"{{"sandbox_env": {{"A": "{SECRET}", "A": "{SECRET}"}}}}"#),
            format!(r#"{{"sandbox_env": {{"A": "{SECRET}", "B": 1}}}}"#),
            format!(r#"{{"sandbox_env": {{"A": "{SECRET}\u0000"}}}}"#),
            format!(r#"{{"sandbox_env": {{"A": "{SECRET}\q"}}}}"#),
            format!("{{\"sandbox_env\": {{\"A\": \"{SECRET}\n\"}}}}"),
            format!(r#"{{"sandbox_env": {{"A": "{SECRET}"}}, "sandbox": 1}}"#),
            format!(r#"{{"sandbox_env": {{"A": "{SECRET}"}}}} trailing"#),
        ];
        for text in &cases {
            let err = parse(text).expect_err("refused");
            let shown = err.to_string();
            assert!(!shown.contains(SECRET), "{shown}");
            assert!(!format!("{err:?}").contains(SECRET), "{err:?}");
        }
    }

    /// SPEC §3.4 values for sandbox_network parse as strings and are then
    /// refused by validation.
    #[test]
    fn hostile_network_strings_parse_then_fail_validation() {
        for value in [
            r#""HOST""#,
            r#""host""#,
            r#"" host""#,
            r#""host\n""#,
            r#""container:x""#,
            r#""ns:/proc/1/ns/net""#,
            r#""none\u200b""#,
            r#""\u202enone""#,
            r#""""#,
        ] {
            let (layer, _) =
                parse(&format!(r#"{{"sandbox_network": {value}}}"#)).expect("a string");
            let network = layer.sandbox_network.expect("set");
            let err = parse_network_mode("/home/dev/app/odek.json", &network).expect_err(value);
            assert!(
                matches!(err, ConfigError::InvalidNetworkMode { .. }),
                "{value}"
            );
            let shown = err.to_string();
            assert!(
                !shown.contains('\n') && !shown.contains('\u{202e}'),
                "{shown}"
            );
        }
    }

    #[test]
    fn parse_file_reads_and_classifies() {
        let dir = tempfile::tempdir().expect("tempdir");
        let missing = dir.path().join("odek.json");
        assert_eq!(parse_file(&missing).expect("missing is fine"), None);

        std::fs::write(&missing, r#"{"sandbox_pids_limit": 100, "extra": 1}"#).expect("write");
        let (layer, warnings) = parse_file(&missing).expect("readable").expect("exists");
        assert_eq!(layer.sandbox_pids_limit, Some(100));
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].message.contains(&missing.display().to_string()));

        std::fs::write(&missing, "{\n\"a\": 1,\n}").expect("write");
        match parse_file(&missing) {
            Err(ConfigError::Malformed { path: p, line, .. }) => {
                assert_eq!(p, missing);
                assert_eq!(line, 3);
            }
            other => panic!("{other:?}"),
        }

        let big = dir.path().join("big.json");
        std::fs::write(&big, vec![b' '; MAX_CONFIG_BYTES + 1]).expect("write");
        match parse_file(&big) {
            Err(ConfigError::Malformed { reason, .. }) => assert!(reason.contains("larger than")),
            other => panic!("{other:?}"),
        }

        let sub = dir.path().join("sub.json");
        std::fs::create_dir(&sub).expect("mkdir");
        match parse_file(&sub) {
            Err(ConfigError::Unreadable { path: p, reason }) => {
                assert_eq!(p, sub);
                assert!(reason.contains("directory"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[cfg(unix)]
    #[test]
    fn parse_file_refuses_dangling_symlink_and_special_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        let link = dir.path().join("odek.json");
        std::os::unix::fs::symlink(dir.path().join("nowhere"), &link).expect("symlink");
        match parse_file(&link) {
            Err(ConfigError::Unreadable { reason, .. }) => {
                assert!(reason.contains("symbolic link"))
            }
            other => panic!("{other:?}"),
        }
        let sock = dir.path().join("sock.json");
        let _listener = std::os::unix::net::UnixListener::bind(&sock).expect("bind");
        match parse_file(&sock) {
            Err(ConfigError::Unreadable { reason, .. }) => assert!(reason.contains("regular file")),
            other => panic!("{other:?}"),
        }
        // a symlink to a valid file is followed (dotfile managers use them)
        let real = dir.path().join("real.json");
        std::fs::write(&real, "{}").expect("write");
        let good = dir.path().join("good.json");
        std::os::unix::fs::symlink(&real, &good).expect("symlink");
        assert!(parse_file(&good).expect("ok").is_some());
    }

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn env_layer_reads_only_the_map() {
        assert_eq!(
            layer_from_env(&BTreeMap::new()).expect("empty"),
            Layer::default()
        );
        let layer = layer_from_env(&env(&[
            ("ODEK_SANDBOX", "1"),
            ("ODEK_SANDBOX_IMAGE", "alpine:3.22"),
            ("ODEK_SANDBOX_NETWORK", "bridge"),
            ("ODEK_SANDBOX_NETWORKS", " redis_default , backend "),
            ("ODEK_SANDBOX_COMPOSE_PROJECT", "myapp"),
            ("ODEK_SANDBOX_PIDS_LIMIT", "256"),
            ("ODEK_SANDBOX_READONLY", "off"),
            ("ODEK_SANDBOX_MEMORY", "1g"),
            ("ODEK_SANDBOX_CPUS", "1.5"),
            ("ODEK_SANDBOX_USER", "1000:1000"),
            ("ODEK_SANDBOX_RUNTIME", "runc"),
            ("ODEK_SANDBOX_POOL", "3"),
            ("ODEK_SANDBOX_LOG_RETENTION", "30"),
            ("ODEK_HOME", "/x"),
            ("ODEK_REQUIRE_SANDBOX", "maybe"),
            ("ODEK_SANDBOX_ENV", "ignored"),
            ("PATH", "/bin"),
        ]))
        .expect("valid");
        assert_eq!(
            layer,
            Layer {
                sandbox: Some(true),
                sandbox_image: Some("alpine:3.22".into()),
                sandbox_network: Some("bridge".into()),
                sandbox_networks: Some(vec!["redis_default".into(), "backend".into()]),
                sandbox_compose_project: Some("myapp".into()),
                sandbox_stack: None,
                sandbox_pids_limit: Some(256),
                sandbox_readonly: Some(false),
                sandbox_memory: Some("1g".into()),
                sandbox_cpus: Some("1.5".into()),
                sandbox_user: Some("1000:1000".into()),
                sandbox_runtime: Some("runc".into()),
                sandbox_workspace: None,
                sandbox_env: None,
                sandbox_volumes: None,
                sandbox_egress: None,
                sandbox_egress_network: None,
                sandbox_pool: Some(3),
                sandbox_log_retention: Some(30),
            }
        );
    }

    #[test]
    fn env_empty_values_are_unset() {
        let vars = [
            "ODEK_SANDBOX",
            "ODEK_SANDBOX_IMAGE",
            "ODEK_SANDBOX_NETWORK",
            "ODEK_SANDBOX_NETWORKS",
            "ODEK_SANDBOX_COMPOSE_PROJECT",
            "ODEK_SANDBOX_PIDS_LIMIT",
            "ODEK_SANDBOX_READONLY",
            "ODEK_SANDBOX_MEMORY",
            "ODEK_SANDBOX_CPUS",
            "ODEK_SANDBOX_USER",
        ];
        let map: BTreeMap<String, String> = vars
            .iter()
            .map(|v| (v.to_string(), String::new()))
            .collect();
        assert_eq!(layer_from_env(&map).expect("all unset"), Layer::default());
    }

    #[test]
    fn env_booleans() {
        for (text, want) in [
            ("1", true),
            ("true", true),
            ("TRUE", true),
            ("Yes", true),
            ("on", true),
            ("ON", true),
            ("0", false),
            ("false", false),
            ("False", false),
            ("no", false),
            ("NO", false),
            ("off", false),
        ] {
            let layer = layer_from_env(&env(&[
                ("ODEK_SANDBOX", text),
                ("ODEK_SANDBOX_READONLY", text),
            ]))
            .unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(layer.sandbox, Some(want), "{text}");
            assert_eq!(layer.sandbox_readonly, Some(want), "{text}");
        }
    }

    #[test]
    fn env_refusals_name_the_variable() {
        #[rustfmt::skip]
        let cases: &[(&str, &str, &str, &str)] = &[
            ("ODEK_SANDBOX", "2", "sandbox", "must be a boolean"),
            ("ODEK_SANDBOX", "y", "sandbox", "must be a boolean"),
            ("ODEK_SANDBOX", " true", "sandbox", "must be a boolean"),
            ("ODEK_SANDBOX", "true\n", "sandbox", "must be a boolean"),
            ("ODEK_SANDBOX", "enabled", "sandbox", "must be a boolean"),
            ("ODEK_SANDBOX_READONLY", "ro", "sandbox_readonly", "must be a boolean"),
            ("ODEK_SANDBOX_NETWORKS", "a,,b", "sandbox_networks", "item 2 is empty"),
            ("ODEK_SANDBOX_NETWORKS", "a,", "sandbox_networks", "item 2 is empty"),
            ("ODEK_SANDBOX_NETWORKS", ",a", "sandbox_networks", "item 1 is empty"),
            ("ODEK_SANDBOX_NETWORKS", ",", "sandbox_networks", "is empty"),
            ("ODEK_SANDBOX_NETWORKS", " ", "sandbox_networks", "item 1 is empty"),
            ("ODEK_SANDBOX_NETWORKS", "a, ,b", "sandbox_networks", "item 2 is empty"),
            ("ODEK_SANDBOX_PIDS_LIMIT", "lots", "sandbox_pids_limit", "decimal integer"),
            ("ODEK_SANDBOX_PIDS_LIMIT", "+5", "sandbox_pids_limit", "decimal integer"),
            ("ODEK_SANDBOX_PIDS_LIMIT", "4096.0", "sandbox_pids_limit", "decimal integer"),
            ("ODEK_SANDBOX_PIDS_LIMIT", "1e3", "sandbox_pids_limit", "decimal integer"),
            ("ODEK_SANDBOX_PIDS_LIMIT", "0x10", "sandbox_pids_limit", "decimal integer"),
            ("ODEK_SANDBOX_PIDS_LIMIT", " 4096", "sandbox_pids_limit", "decimal integer"),
            ("ODEK_SANDBOX_PIDS_LIMIT", "4096\n", "sandbox_pids_limit", "decimal integer"),
            ("ODEK_SANDBOX_PIDS_LIMIT", "-", "sandbox_pids_limit", "decimal integer"),
            ("ODEK_SANDBOX_PIDS_LIMIT", "٤٠٩٦", "sandbox_pids_limit", "decimal integer"),
            ("ODEK_SANDBOX_PIDS_LIMIT", "99999999999999999999", "sandbox_pids_limit", "fits in 64 bits"),
            ("ODEK_SANDBOX_PIDS_LIMIT", "-9223372036854775809", "sandbox_pids_limit", "fits in 64 bits"),
        ];
        for (var, value, key, fragment) in cases {
            match layer_from_env(&env(&[(var, value)])) {
                Err(err @ ConfigError::InvalidValue { .. }) => {
                    let shown = err.to_string();
                    assert!(shown.starts_with(&format!("env {var}: {key} ")), "{shown}");
                    assert!(shown.contains(fragment), "{var}={value:?}: {shown}");
                    assert!(!shown.contains('\n'), "{shown}");
                }
                other => panic!("{var}={value:?}: expected InvalidValue, got {other:?}"),
            }
        }
    }

    #[test]
    fn env_pids_limit_accepts_any_i64_for_validation_later() {
        for (text, want) in [
            ("4096", 4096),
            ("0", 0),
            ("-1", -1),
            ("007", 7),
            ("9223372036854775807", i64::MAX),
        ] {
            let layer = layer_from_env(&env(&[("ODEK_SANDBOX_PIDS_LIMIT", text)])).expect(text);
            assert_eq!(layer.sandbox_pids_limit, Some(want));
        }
    }

    #[test]
    fn env_strings_are_verbatim() {
        for value in [
            "host",
            "HOST",
            " host",
            "host\n",
            "container:x",
            "ns:/proc/1/ns/net",
            "\u{202e}x",
        ] {
            let layer = layer_from_env(&env(&[
                ("ODEK_SANDBOX_NETWORK", value),
                ("ODEK_SANDBOX_USER", value),
            ]))
            .expect("strings are not checked here");
            assert_eq!(layer.sandbox_network.as_deref(), Some(value));
            assert_eq!(layer.sandbox_user.as_deref(), Some(value));
        }
    }

    #[test]
    fn line_column_is_one_based() {
        assert_eq!(line_column(b"", 0), (1, 1));
        assert_eq!(line_column(b"abc", 2), (1, 3));
        assert_eq!(line_column(b"a\nbc", 2), (2, 1));
        assert_eq!(line_column(b"a\nbc", 3), (2, 2));
    }

    #[test]
    fn edit_distance_basics() {
        assert_eq!(strsim::levenshtein("", "abc"), 3);
        assert_eq!(strsim::levenshtein("kitten", "sitting"), 3);
        assert_eq!(strsim::levenshtein("sandbox_user", "sandbox_user"), 0);
        assert_eq!(suggest("sandbox_volume"), Some("sandbox_volumes"));
        assert_eq!(suggest("totally_else"), None);
    }
}
