//! Bad `sandbox_env` keys and values (SPEC §3.1, §3.4, §7.2; env values
//! are user data and never appear in messages).
//!
//! Every row goes through the pure checks (`config::validate_env_key`,
//! `config::interpolate`) and through `Client::resolve` three ways: from
//! `$ODEK_HOME/config.json`, from `./odek.json`, and as an operator value
//! given through the API (the flags layer). Each is refused as class
//! `config` naming `sandbox_env` and the cause, before any Docker call —
//! and no error text (`Display` or `Debug`) contains any env value: every
//! value of every row carries the marker `S3CRET`.

mod common;

use std::collections::BTreeMap;

use common::*;
use odek_core::config::{interpolate, validate_env_key, ConfigError};
use odek_core::{Error, FailureClass};

/// In every value: must never be shown.
const MARK: &str = "S3CRET";

/// A host variable whose value is a secret too.
const HOST_SECRET: &str = "host-S3CRET-value";

#[derive(Clone, Debug)]
enum Want {
    /// Accepted.
    Ok,
    /// `InvalidValue` for key `sandbox_env` with a message containing this.
    Env(&'static str),
    /// `Malformed` (config files only) containing this.
    Malformed(&'static str),
}

struct Row {
    what: String,
    /// The env object; `raw` replaces it in config files when set.
    env: Vec<(String, String)>,
    /// A raw `sandbox_env` member text for config files (duplicates, types).
    raw: Option<String>,
    /// What config files give.
    file: Want,
    /// What the API (flags layer) gives; `None` = not applicable.
    api: Option<Want>,
}

fn secret(i: usize) -> String {
    format!("v-{MARK}-{i}")
}

/// A row with a bad key (and a secret value).
fn key(k: impl Into<String>, needle: &'static str) -> Row {
    let k = k.into();
    Row {
        what: format!("key {k:?}"),
        env: vec![(k, secret(0))],
        raw: None,
        file: Want::Env(needle),
        api: Some(Want::Env(needle)),
    }
}

/// A row with a bad value under key `V` (the value carries the marker).
fn value(v: impl Into<String>, needle: &'static str) -> Row {
    let v = v.into();
    Row {
        what: format!("value {v:?}"),
        env: vec![("OK".into(), secret(1)), ("V".into(), format!("{MARK}{v}"))],
        raw: None,
        file: Want::Env(needle),
        api: Some(Want::Env(needle)),
    }
}

/// A raw `sandbox_env` member for config files only.
fn raw(what: &str, member: String, want: Want) -> Row {
    Row {
        what: what.into(),
        env: Vec::new(),
        raw: Some(member),
        file: want,
        api: None,
    }
}

const NAMES: &str = "names must match [A-Za-z_][A-Za-z0-9_]*";
const UNTERMINATED: &str = "has an unterminated \"${\"";
const NOT_A_NAME: &str = "whose content is not a variable name";

fn rows() -> Vec<Row> {
    let mut big = "x".repeat(1 << 20);
    big.push_str("${UNSET_VAR}");
    let s = |i| secret(i);
    vec![
        // --- keys ---
        key("", NAMES),
        key("1A", NAMES),
        key("A-B", NAMES),
        key("A B", NAMES),
        key("A=B", NAMES),
        key("PATH=/evil", NAMES),
        key("A.B", NAMES),
        key("\u{c9}", NAMES),
        key("A\n", NAMES),
        key("A\t", NAMES),
        key("LD_PRELOAD ", NAMES),
        key("\u{200b}A", NAMES),
        key("A\u{202e}", NAMES),
        key("\u{410}PI", NAMES),
        key("a".repeat(257), "at most 256 bytes"),
        key("${X}", NAMES),
        key("$A", NAMES),
        key("-A", NAMES),
        key("A;B", NAMES),
        // A NUL in a key: refused by the file parser; through the API by
        // the key rule.
        Row {
            file: Want::Malformed("NUL character"),
            ..key("A\0", NAMES)
        },
        // --- values ---
        value("${UNSET_VAR}", "the host variable \"UNSET_VAR\" is not set"),
        value(
            "${UNSET_VAR}tail",
            "the host variable \"UNSET_VAR\" is not set",
        ),
        value("${", UNTERMINATED),
        value("prefix-${", UNTERMINATED),
        value("${HOSTVAR", UNTERMINATED),
        value("${}", NOT_A_NAME),
        value("${1X}", NOT_A_NAME),
        value("${A B}", NOT_A_NAME),
        value("${A:-default}", NOT_A_NAME),
        value("${A-x}", NOT_A_NAME),
        value("${${HOSTVAR}}", NOT_A_NAME),
        value("${\u{202e}}", NOT_A_NAME),
        value("${NULVAR}", "NUL character after interpolation"),
        Row {
            file: Want::Malformed("1048576-byte limit"),
            ..value(big, "the host variable \"UNSET_VAR\" is not set")
        },
        Row {
            file: Want::Malformed("NUL character"),
            ..value("a\0b", "NUL character after interpolation")
        },
        // --- wrong shapes (config files) ---
        raw(
            "value of the wrong type next to a secret",
            format!(r#"{{"A": "{}", "B": 1}}"#, s(2)),
            Want::Env("the value of \"B\" is an integer"),
        ),
        raw(
            "object value",
            format!(r#"{{"A": {{"nested": "{}"}}}}"#, s(3)),
            Want::Env("the value of \"A\" is an object"),
        ),
        raw(
            "array value",
            format!(r#"{{"A": ["{}"]}}"#, s(4)),
            Want::Env("the value of \"A\" is an array"),
        ),
        raw(
            "duplicate key with secret values",
            format!(r#"{{"A": "{}", "A": "{}"}}"#, s(5), s(6)),
            Want::Malformed("duplicate key \"A\""),
        ),
        raw(
            "invalid escape after a secret",
            format!(r#"{{"A": "{}\q"}}"#, s(7)),
            Want::Malformed("invalid escape"),
        ),
        raw(
            "raw newline after a secret",
            format!("{{\"A\": \"{}\n\"}}", s(8)),
            Want::Malformed("control character"),
        ),
        raw(
            "unterminated after a secret",
            format!(r#"{{"A": "{}"#, s(9)),
            Want::Malformed("EOF"),
        ),
        // --- accepted, for contrast: $$ is a literal $ ---
        Row {
            what: "escaped dollar".into(),
            env: vec![("A".into(), format!("{MARK}$${{UNSET_VAR}}"))],
            raw: None,
            file: Want::Ok,
            api: Some(Want::Ok),
        },
    ]
}

fn host_env() -> BTreeMap<String, String> {
    BTreeMap::from([
        ("HOSTVAR".to_string(), HOST_SECRET.to_string()),
        ("NULVAR".to_string(), format!("{MARK}\0")),
    ])
}

/// `Err` when any text of the error shows a value or is unsafe to print.
fn no_value_shown(what: &str, e: &dyn std::fmt::Debug, shown: &str) -> Result<(), String> {
    let debug = format!("{e:?}");
    for text in [shown, debug.as_str()] {
        if text.contains(MARK) || text.contains("host-S3CRET") {
            return Err(format!("{what}: an env value is shown: {text}"));
        }
    }
    if shown.len() >= 4096 {
        return Err(format!("{what}: message of {} bytes", shown.len()));
    }
    if let Some(c) = shown
        .chars()
        .find(|c| c.is_control() || matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}'))
    {
        return Err(format!("{what}: raw {c:?} in {shown:?}"));
    }
    Ok(())
}

fn check_pure(r: &Row) -> Result<(), String> {
    let Some(want) = &r.api else { return Ok(()) };
    let host = host_env();
    let mut first_err = None;
    for (k, v) in &r.env {
        let res =
            validate_env_key("api", k).and_then(|()| interpolate("api", k, v, &host).map(drop));
        if let Err(e) = res {
            first_err = Some(e);
            break;
        }
    }
    match (want, first_err) {
        (Want::Ok, None) => Ok(()),
        (Want::Env(needle), Some(e @ ConfigError::InvalidValue { .. })) => {
            let msg = e.to_string();
            if !msg.contains(needle) || !msg.contains("sandbox_env") {
                return Err(format!("{}: pure message lacks {needle:?}: {msg}", r.what));
            }
            no_value_shown(&r.what, &e, &msg)
        }
        (want, got) => Err(format!("{}: pure: wanted {want:?}, got {got:?}", r.what)),
    }
}

#[derive(Clone, Copy, Debug)]
enum Via {
    User,
    Project,
    Api,
}

async fn check_resolve(r: &Row, via: Via) -> Result<(), String> {
    let what = format!("{} via {via:?}", r.what);
    let want = match via {
        Via::Api => match &r.api {
            Some(w) => w,
            None => return Ok(()),
        },
        _ => &r.file,
    };
    let mut s = Setup::new()
        .env("HOSTVAR", HOST_SECRET)
        .env("NULVAR", &format!("{MARK}\0"));
    let member = match &r.raw {
        Some(raw) => raw.clone(),
        None => {
            let map: serde_json::Map<String, serde_json::Value> = r
                .env
                .iter()
                .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
                .collect();
            serde_json::Value::Object(map).to_string()
        }
    };
    let doc = format!(r#"{{"sandbox_env": {member}}}"#);
    match via {
        Via::User => std::fs::write(s.odek_home.join("config.json"), doc).expect("write"),
        Via::Project => std::fs::write(s.workdir.join("odek.json"), doc).expect("write"),
        Via::Api => s.inputs.flags.sandbox_env = Some(r.env.iter().cloned().collect()),
    }
    let got = s.resolve().await;
    if !s.fake.no_mutation() || !s.fake.containers().is_empty() {
        return Err(format!("{what}: mutating calls: {:?}", s.mutations()));
    }
    match (want, got) {
        (Want::Ok, Ok(_)) => Ok(()),
        (Want::Env(needle) | Want::Malformed(needle), Err(err)) => {
            let msg = err.to_string();
            no_value_shown(&what, &err, &msg)?;
            if err.class() != FailureClass::Config {
                return Err(format!("{what}: class {}: {msg}", err.class()));
            }
            let ok = match (want, &err) {
                (Want::Env(_), Error::Config(ConfigError::InvalidValue { key, .. })) => {
                    key == "sandbox_env"
                }
                (Want::Malformed(_), Error::Config(ConfigError::Malformed { .. })) => true,
                _ => false,
            };
            if !ok {
                return Err(format!("{what}: wanted {want:?}, got {msg}"));
            }
            if !msg.contains(needle) {
                return Err(format!("{what}: message lacks {needle:?}: {msg}"));
            }
            if !s.fake.calls().is_empty() {
                return Err(format!("{what}: Docker was asked: {:?}", s.fake.calls()));
            }
            Ok(())
        }
        (want, Ok(_)) => Err(format!("{what}: wanted {want:?}, accepted")),
        (Want::Ok, Err(e)) => Err(format!("{what}: refused: {e}")),
    }
}

#[tokio::test]
async fn bad_env_keys_and_values_are_refused_without_showing_a_value() {
    let rows = rows();
    let bad = rows.iter().filter(|r| !matches!(r.file, Want::Ok)).count();
    assert!(bad >= 30, "only {bad} bad rows");
    let mut failures = Vec::new();
    for r in &rows {
        if let Err(f) = check_pure(r) {
            failures.push(f);
        }
        for via in [Via::User, Via::Project, Via::Api] {
            if let Err(f) = check_resolve(r, via).await {
                failures.push(f);
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The plan's `Debug` (logged at trace level by embedders) never shows a
/// value either, while the container still receives it.
#[tokio::test]
async fn accepted_values_are_redacted_in_debug_output() {
    let s = Setup::new()
        .env("HOSTVAR", HOST_SECRET)
        .project_config(r#"{"sandbox_env": {"TOKEN": "${HOSTVAR}", "PLAIN": "S3CRET-plain"}}"#);
    let plan = s.resolve().await.expect("resolve");
    let debug = format!("{plan:?}");
    assert!(!debug.contains(MARK), "{debug}");
    let values: Vec<&str> = plan.env.iter().map(|e| e.value.as_str()).collect();
    assert_eq!(values, vec!["S3CRET-plain", HOST_SECRET]);
    let card = plan.approval.expect("project env needs approval");
    assert!(!format!("{card:?}").contains(MARK));
}
