//! Bad configuration values (SPEC §3.2, §3.4, §6.3).
//!
//! Every row is one config document. It goes through `config::parse_bytes`
//! (the pure parser: it must refuse the row, or accept it when the refusal
//! belongs to validation), and then through `Client::resolve` twice — once as
//! the user config `$ODEK_HOME/config.json` and once as the project config
//! `./odek.json` — against the fake engine. A refusal must be class `config`,
//! of the expected `ConfigError` variant, with a message that names the file
//! and contains the row's cause; it must be made before any state-changing
//! Docker call (`fake.no_mutation()`), leave no container, and show no raw
//! control or invisible character.

mod common;

use std::path::Path;

use common::*;
use odek_core::config::{self, ConfigError};
use odek_core::{Error, FailureClass};

/// The `ConfigError` variant a row must produce.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    /// `ConfigError::Malformed` (syntax, BOM, NUL, UTF-8, size, depth, duplicates).
    Malformed,
    /// `ConfigError::InvalidValue` for this key.
    Value(&'static str),
    /// `ConfigError::InvalidNetworkMode`.
    NetworkMode,
    /// `ConfigError::InvalidNetworkName`.
    NetworkName,
    /// `ConfigError::InvalidComposeProject`.
    Compose,
    /// `ConfigError::InvalidVolume`.
    Volume,
    /// `ConfigError::NetworksWithoutSandbox`.
    NoSandbox,
}

/// What one stage must say about a row.
#[derive(Clone, Debug)]
enum Want {
    /// Accepted without a refusal.
    Ok,
    /// Accepted, with a warning containing the text.
    Warned(&'static str),
    /// Refused with this variant and a message containing the text.
    Err(Kind, &'static str),
}

struct Row {
    what: String,
    doc: Vec<u8>,
    parse: Want,
    user: Want,
    project: Want,
}

impl Row {
    /// A document the parser itself refuses (so both files are refused too).
    fn parse_err(
        what: impl Into<String>,
        doc: impl Into<Vec<u8>>,
        kind: Kind,
        needle: &'static str,
    ) -> Row {
        Row {
            what: what.into(),
            doc: doc.into(),
            parse: Want::Err(kind, needle),
            user: Want::Err(kind, needle),
            project: Want::Err(kind, needle),
        }
    }

    /// A syntax-level refusal (`Malformed`).
    fn syntax(what: impl Into<String>, doc: impl Into<Vec<u8>>, needle: &'static str) -> Row {
        Row::parse_err(what, doc, Kind::Malformed, needle)
    }

    /// `{"<key>": <value>}` with a value of the wrong JSON type.
    fn typed(key: &'static str, value: &str, needle: &'static str) -> Row {
        Row::parse_err(
            format!("{key} = {value}"),
            format!(r#"{{"{key}": {value}}}"#),
            Kind::Value(key),
            needle,
        )
    }

    /// A document that type-checks but fails validation in both files.
    fn invalid(
        what: impl Into<String>,
        doc: impl Into<Vec<u8>>,
        kind: Kind,
        needle: &'static str,
    ) -> Row {
        Row {
            what: what.into(),
            doc: doc.into(),
            parse: Want::Ok,
            user: Want::Err(kind, needle),
            project: Want::Err(kind, needle),
        }
    }

    /// `{"<key>": <value>}` that type-checks but fails validation.
    fn value(key: &'static str, value: &str, kind: Kind, needle: &'static str) -> Row {
        Row::invalid(
            format!("{key} = {value}"),
            format!(r#"{{"{key}": {value}}}"#),
            kind,
            needle,
        )
    }

    /// Overrides what the project config must give (SPEC §3.2 tightening).
    fn project(mut self, want: Want) -> Row {
        self.project = want;
        self
    }
}

fn nested(levels: usize) -> String {
    format!(r#"{{"x": {}{}}}"#, "[".repeat(levels), "]".repeat(levels))
}

fn rows() -> Vec<Row> {
    use Kind::*;
    let d64 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
    let mut big_string = br#"{"sandbox_image": ""#.to_vec();
    big_string.extend(std::iter::repeat_n(b'a', config::MAX_CONFIG_BYTES));
    big_string.extend(br#""}"#);
    let mut big_spaces = vec![b' '; config::MAX_CONFIG_BYTES];
    big_spaces.extend(b"{}");
    let mut big_nested = String::from(r#"{"x": "#);
    big_nested.push_str(&"[".repeat(600_000));
    big_nested.push_str(&"]".repeat(600_000));
    big_nested.push('}');

    vec![
        // --- syntax, encoding, size (SPEC §3.2: never silently ignored) ---
        Row::syntax("empty file", "", "EOF"),
        Row::syntax("only whitespace", " \n\t\n", "EOF"),
        Row::syntax("top level null", "null", "top level must be a JSON object"),
        Row::syntax("top level array", "[]", "top level must be a JSON object"),
        Row::syntax(
            "top level string",
            r#""sandbox""#,
            "top level must be a JSON object",
        ),
        Row::syntax("top level number", "42", "top level must be a JSON object"),
        Row::syntax("top level bool", "true", "top level must be a JSON object"),
        Row::syntax("trailing comma", r#"{"sandbox": true,}"#, "trailing comma"),
        Row::syntax(
            "two documents",
            r#"{"sandbox": true} {}"#,
            "trailing characters",
        ),
        Row::syntax(
            "trailing garbage",
            r#"{"sandbox": true}x"#,
            "trailing characters",
        ),
        Row::syntax("unquoted key", "{sandbox: true}", "key must be a string"),
        Row::syntax("single quotes", "{'sandbox': true}", "key must be a string"),
        Row::syntax("Python True", r#"{"sandbox": True}"#, "expected value"),
        Row::syntax("truncated literal", r#"{"sandbox": tru}"#, "expected ident"),
        Row::syntax("unterminated string", r#"{"sandbox_image": "alp"#, "EOF"),
        Row::syntax("unterminated object", r#"{"sandbox": true"#, "EOF"),
        Row::syntax("comment", "// odek\n{}", "expected value"),
        Row::syntax(
            "raw newline in a string",
            "{\"sandbox_image\": \"a\nb\"}",
            "control character",
        ),
        Row::syntax(
            "invalid escape",
            r#"{"sandbox_image": "\q"}"#,
            "invalid escape",
        ),
        Row::syntax("NaN", r#"{"sandbox_cpus": NaN}"#, "expected value"),
        Row::syntax(
            "Infinity",
            r#"{"sandbox_cpus": Infinity}"#,
            "expected value",
        ),
        Row::syntax(
            "leading zero",
            r#"{"sandbox_pids_limit": 0100}"#,
            "invalid number",
        ),
        Row::syntax(
            "plus sign",
            r#"{"sandbox_pids_limit": +5}"#,
            "expected value",
        ),
        Row::syntax(
            "number out of f64 range",
            r#"{"sandbox_pids_limit": 1e400}"#,
            "out of range",
        ),
        Row::syntax(
            "duplicate key",
            r#"{"sandbox": true, "sandbox": true}"#,
            "duplicate key \"sandbox\"",
        ),
        Row::syntax(
            "duplicate key, second value loosens",
            r#"{"sandbox_pids_limit": 100, "sandbox_pids_limit": 0}"#,
            "duplicate key \"sandbox_pids_limit\"",
        ),
        Row::syntax(
            "duplicate network mode",
            r#"{"sandbox_network": "none", "sandbox_network": "host"}"#,
            "duplicate key \"sandbox_network\"",
        ),
        Row::syntax(
            "duplicate env key",
            r#"{"sandbox_env": {"A": "1", "A": "2"}}"#,
            "duplicate key \"A\"",
        ),
        Row::syntax(
            "duplicate unknown key",
            r#"{"x": 1, "x": 2}"#,
            "duplicate key \"x\"",
        ),
        Row::syntax(
            "duplicate key nested in unknown",
            r#"{"x": {"y": [{"z": 1, "z": 1}]}}"#,
            "duplicate key \"z\"",
        ),
        Row::syntax("UTF-8 BOM", b"\xEF\xBB\xBF{}".to_vec(), "byte-order mark"),
        Row::syntax(
            "UTF-8 BOM before a valid config",
            b"\xEF\xBB\xBF{\"sandbox\": true}".to_vec(),
            "byte-order mark",
        ),
        Row::syntax(
            "UTF-16LE BOM",
            b"\xFF\xFE{\x00}\x00".to_vec(),
            "not valid UTF-8",
        ),
        Row::syntax(
            "raw NUL byte",
            b"{\"sandbox\":\x00 true}".to_vec(),
            "NUL byte",
        ),
        Row::syntax("trailing NUL byte", b"{}\x00".to_vec(), "NUL byte"),
        Row::syntax(
            "escaped NUL in a value",
            r#"{"sandbox_image": "alpine\u0000"}"#,
            "NUL character",
        ),
        Row::syntax(
            "escaped NUL in a key",
            r#"{"sand\u0000box": true}"#,
            "NUL character",
        ),
        Row::syntax(
            "invalid UTF-8 byte",
            b"{\"sandbox_image\": \"\xff\"}".to_vec(),
            "not valid UTF-8",
        ),
        Row::syntax(
            "overlong UTF-8",
            b"{\"sandbox_image\": \"\xc0\xaf\"}".to_vec(),
            "not valid UTF-8",
        ),
        Row::syntax(
            "UTF-8 encoded surrogate",
            b"{\"sandbox_image\": \"\xed\xa0\x80\"}".to_vec(),
            "not valid UTF-8",
        ),
        Row::syntax(
            "truncated UTF-8 sequence",
            b"{\"x\": \"\xe2\x82\"}".to_vec(),
            "not valid UTF-8",
        ),
        Row::syntax(
            "lone surrogate escape",
            r#"{"sandbox_image": "\ud800"}"#,
            "unexpected end of hex escape",
        ),
        Row::syntax(
            "lone trailing surrogate escape",
            r#"{"sandbox_image": "\udc00"}"#,
            "lone leading surrogate",
        ),
        Row::syntax("nesting 33 levels", nested(32), "deeper than 32"),
        Row::syntax("nesting 600k levels", big_nested, "larger than"),
        Row::syntax("nesting 200 levels", nested(200), "deeper than 32"),
        Row::syntax(
            "1 MiB of spaces before {}",
            big_spaces,
            "larger than the 1048576-byte limit",
        ),
        Row::syntax(
            "1 MiB string value",
            big_string,
            "larger than the 1048576-byte limit",
        ),
        // --- wrong JSON types (InvalidValue naming the key) ---
        Row::typed("sandbox", r#""true""#, "must be true or false"),
        Row::typed("sandbox", "1", "must be true or false"),
        Row::typed("sandbox", "null", "must not be null"),
        Row::typed("sandbox", "[]", "must be true or false"),
        Row::typed("sandbox_readonly", r#""yes""#, "must be true or false"),
        Row::typed("sandbox_image", "42", "must be a string"),
        Row::typed("sandbox_image", r#"["alpine"]"#, "must be a string"),
        Row::typed("sandbox_image", "null", "must not be null"),
        Row::typed("sandbox_network", "false", "must be a string"),
        Row::typed("sandbox_network", "null", "must not be null"),
        Row::typed("sandbox_network", r#"{"mode": "none"}"#, "must be a string"),
        Row::typed(
            "sandbox_networks",
            r#""shop_default,shop_backend""#,
            "must be an array of strings",
        ),
        Row::typed("sandbox_networks", "[1]", "item 1 is an integer"),
        Row::typed("sandbox_networks", r#"["a", ["b"]]"#, "item 2 is an array"),
        Row::typed("sandbox_networks", r#"["a", null]"#, "item 2 is null"),
        Row::typed(
            "sandbox_networks",
            r#"{"a": 1}"#,
            "must be an array of strings",
        ),
        Row::typed("sandbox_compose_project", r#"["shop"]"#, "must be a string"),
        Row::typed("sandbox_pids_limit", r#""4096""#, "not a string"),
        Row::typed(
            "sandbox_pids_limit",
            "4096.0",
            "without a fraction or exponent",
        ),
        Row::typed(
            "sandbox_pids_limit",
            "1e3",
            "without a fraction or exponent",
        ),
        Row::typed(
            "sandbox_pids_limit",
            "0.5",
            "without a fraction or exponent",
        ),
        Row::typed(
            "sandbox_pids_limit",
            "99999999999999999999",
            "fits in 64 bits",
        ),
        Row::typed(
            "sandbox_pids_limit",
            "18446744073709551615",
            "fits in 64 bits",
        ),
        Row::typed(
            "sandbox_pids_limit",
            "9223372036854775808",
            "fits in 64 bits",
        ),
        Row::typed(
            "sandbox_pids_limit",
            "-9223372036854775809",
            "fits in 64 bits",
        ),
        Row::typed("sandbox_pids_limit", "true", "must be a JSON integer"),
        Row::typed("sandbox_pids_limit", "null", "must not be null"),
        Row::typed("sandbox_pids_limit", "[4096]", "must be a JSON integer"),
        Row::typed("sandbox_memory", "-1", "non-negative integer"),
        Row::typed("sandbox_memory", "1.5", "non-negative integer"),
        Row::typed("sandbox_memory", r#"["512m"]"#, "non-negative integer"),
        Row::typed("sandbox_cpus", "true", "must be a number"),
        Row::typed("sandbox_cpus", "[0.5]", "must be a number"),
        Row::typed("sandbox_user", "1000", "must be a string"),
        Row::typed("sandbox_env", "[]", "must be an object"),
        Row::typed("sandbox_env", r#""A=1""#, "must be an object"),
        Row::typed(
            "sandbox_env",
            r#"{"A": 1}"#,
            "must map each name to a string",
        ),
        Row::typed(
            "sandbox_env",
            r#"{"A": null}"#,
            "must map each name to a string",
        ),
        Row::typed(
            "sandbox_volumes",
            r#""./a:/a""#,
            "must be an array of strings",
        ),
        Row::typed(
            "sandbox_volumes",
            r#"[{"host": "a"}]"#,
            "item 1 is an object",
        ),
        // --- values that type-check but fail validation (SPEC §3.4) ---
        Row::value(
            "sandbox_pids_limit",
            "0",
            Value("sandbox_pids_limit"),
            "must be a positive integer",
        ),
        Row::value(
            "sandbox_pids_limit",
            "-1",
            Value("sandbox_pids_limit"),
            "must be a positive integer",
        ),
        Row::value(
            "sandbox_pids_limit",
            "-9223372036854775808",
            Value("sandbox_pids_limit"),
            "must be a positive integer",
        ),
        // Above the kernel's PID_MAX_LIMIT: runc would fail at start.
        // (from the project: ignored, it can only lower the limit)
        Row::value(
            "sandbox_pids_limit",
            "9223372036854775807",
            Value("sandbox_pids_limit"),
            "at most 4194304",
        )
        .project(Want::Warned("can only lower the limit")),
        // (from the project: ignored, it can only lower the limit)
        Row::value(
            "sandbox_pids_limit",
            "4194305",
            Value("sandbox_pids_limit"),
            "at most 4194304",
        )
        .project(Want::Warned("can only lower the limit")),
        // A huge but valid limit: fine from the operator, ignored (can only
        // tighten) from the project.
        Row {
            what: "sandbox_pids_limit = 4194304".into(),
            doc: br#"{"sandbox_pids_limit": 4194304}"#.to_vec(),
            parse: Want::Ok,
            user: Want::Ok,
            project: Want::Warned("can only lower the limit"),
        },
        // sandbox_user: any valid form from the operator; from the project
        // only numeric uid:gid, both non-zero — the image maps a name or a
        // bare uid, possibly to root or group 0 (`4242` with no passwd entry
        // runs as gid 0).
        Row {
            what: "sandbox_user = a name".into(),
            doc: br#"{"sandbox_user": "dev"}"#.to_vec(),
            parse: Want::Ok,
            user: Want::Ok,
            project: Want::Warned("cannot choose the sandbox user"),
        },
        Row {
            what: "sandbox_user = a bare uid".into(),
            doc: br#"{"sandbox_user": "4242"}"#.to_vec(),
            parse: Want::Ok,
            user: Want::Ok,
            project: Want::Warned("cannot choose the sandbox user"),
        },
        Row {
            what: "sandbox_user = name:gid".into(),
            doc: br#"{"sandbox_user": "dev:1000"}"#.to_vec(),
            parse: Want::Ok,
            user: Want::Ok,
            project: Want::Warned("cannot choose the sandbox user"),
        },
        Row {
            what: "sandbox_user = uid:group-name".into(),
            doc: br#"{"sandbox_user": "1000:staff"}"#.to_vec(),
            parse: Want::Ok,
            user: Want::Ok,
            project: Want::Warned("cannot choose the sandbox user"),
        },
        Row {
            what: "sandbox_user = root".into(),
            doc: br#"{"sandbox_user": "0:0"}"#.to_vec(),
            parse: Want::Ok,
            user: Want::Ok,
            project: Want::Warned("cannot choose the sandbox user"),
        },
        Row::value(
            "sandbox_network",
            r#""host""#,
            NetworkMode,
            "must be \"none\" or \"bridge\"",
        ),
        Row::value(
            "sandbox_network",
            r#""HOST""#,
            NetworkMode,
            "(got \"HOST\")",
        ),
        Row::value(
            "sandbox_network",
            r#"" host""#,
            NetworkMode,
            "(got \" host\")",
        ),
        Row::value(
            "sandbox_network",
            r#""host\n""#,
            NetworkMode,
            r#"(got "host\n")"#,
        ),
        Row::value(
            "sandbox_network",
            r#""none ""#,
            NetworkMode,
            "(got \"none \")",
        ),
        Row::value(
            "sandbox_network",
            r#""Bridge""#,
            NetworkMode,
            "(got \"Bridge\")",
        ),
        Row::value("sandbox_network", r#""""#, NetworkMode, "(got \"\")"),
        Row::value(
            "sandbox_network",
            r#""container:x""#,
            NetworkMode,
            "(got \"container:x\")",
        ),
        Row::value(
            "sandbox_network",
            r#""ns:/proc/1/ns/net""#,
            NetworkMode,
            "(got \"ns:/proc/1/ns/net\")",
        ),
        Row::value(
            "sandbox_network",
            r#""shop_default""#,
            NetworkMode,
            "sandbox_networks",
        ),
        Row::value(
            "sandbox_network",
            r#""none\u200b""#,
            NetworkMode,
            r#"(got "none\u{200b}")"#,
        ),
        Row::value(
            "sandbox_network",
            r#""\u202enone""#,
            NetworkMode,
            r#"(got "\u{202e}none")"#,
        ),
        Row::value(
            "sandbox_network",
            r#""\u001b[31mnone""#,
            NetworkMode,
            r#"(got "\u{1b}[31mnone")"#,
        ),
        Row::value(
            "sandbox_network",
            r#""ｎｏｎｅ""#,
            NetworkMode,
            "must be \"none\" or \"bridge\"",
        ),
        Row::value("sandbox_networks", r#"["host"]"#, NetworkName, "reserved"),
        Row::value(
            "sandbox_networks",
            r#"["shop_default", "container:x"]"#,
            NetworkName,
            "':' or '/'",
        ),
        Row::value("sandbox_networks", r#"[""]"#, NetworkName, "it is empty"),
        Row::value(
            "sandbox_compose_project",
            r#""Shop""#,
            Compose,
            "did you mean \"shop\"?",
        ),
        Row::value("sandbox_compose_project", r#""""#, Compose, "is not valid"),
        Row::value(
            "sandbox_memory",
            r#""lots""#,
            Value("sandbox_memory"),
            "must be a size like",
        ),
        Row::value(
            "sandbox_memory",
            r#""5m""#,
            Value("sandbox_memory"),
            "at least 6 MiB",
        ),
        Row::value(
            "sandbox_memory",
            "0",
            Value("sandbox_memory"),
            "at least 6 MiB",
        ),
        Row::value(
            "sandbox_memory",
            r#""1 g""#,
            Value("sandbox_memory"),
            "must be a size like",
        ),
        Row::value(
            "sandbox_memory",
            r#""-512m""#,
            Value("sandbox_memory"),
            "must be a size like",
        ),
        Row::value(
            "sandbox_memory",
            r#""1e9""#,
            Value("sandbox_memory"),
            "must be a size like",
        ),
        Row::value(
            "sandbox_memory",
            r#""99999999999999t""#,
            Value("sandbox_memory"),
            "too large",
        ),
        Row::value(
            "sandbox_memory",
            "18446744073709551615",
            Value("sandbox_memory"),
            "too large",
        ),
        Row::value(
            "sandbox_cpus",
            r#""0""#,
            Value("sandbox_cpus"),
            "at least 0.01",
        ),
        Row::value("sandbox_cpus", "0", Value("sandbox_cpus"), "at least 0.01"),
        Row::value(
            "sandbox_cpus",
            r#""0.001""#,
            Value("sandbox_cpus"),
            "at least 0.01",
        ),
        Row::value(
            "sandbox_cpus",
            r#""-1""#,
            Value("sandbox_cpus"),
            "no sign or unit",
        ),
        Row::value(
            "sandbox_cpus",
            "-1",
            Value("sandbox_cpus"),
            "no sign or unit",
        ),
        Row::value(
            "sandbox_cpus",
            r#""1025""#,
            Value("sandbox_cpus"),
            "at most 1024",
        ),
        Row::value(
            "sandbox_cpus",
            "1e300",
            Value("sandbox_cpus"),
            "at most 1024",
        ),
        Row::value(
            "sandbox_cpus",
            "1e-10",
            Value("sandbox_cpus"),
            "at most 9 decimal places",
        ),
        Row::value(
            "sandbox_cpus",
            r#""2 cpus""#,
            Value("sandbox_cpus"),
            "no sign or unit",
        ),
        Row::value(
            "sandbox_user",
            r#""root:root:root""#,
            Value("sandbox_user"),
            "must be uid[:gid]",
        ),
        Row::value(
            "sandbox_user",
            r#""4294967296""#,
            Value("sandbox_user"),
            "at most 2147483647",
        ),
        Row::value(
            "sandbox_user",
            r#""Root""#,
            Value("sandbox_user"),
            "must be uid[:gid]",
        ),
        Row::value(
            "sandbox_user",
            r#""""#,
            Value("sandbox_user"),
            "must be uid[:gid]",
        ),
        Row::value(
            "sandbox_user",
            r#""0:""#,
            Value("sandbox_user"),
            "must be uid[:gid]",
        ),
        Row::value(
            "sandbox_env",
            r#"{"A-B": "x"}"#,
            Value("sandbox_env"),
            "names must match",
        ),
        Row::value("sandbox_volumes", r#"["../x:/x"]"#, Volume, "'..'"),
        Row::value(
            "sandbox_volumes",
            r#"["/etc:/etc"]"#,
            Volume,
            "inside the working directory",
        ),
        Row::value(
            "sandbox_volumes",
            r#"["/var/run/docker.sock:/var/run/docker.sock"]"#,
            Volume,
            "inside the working directory",
        ),
        Row::value(
            "sandbox_volumes",
            r#"["x"]"#,
            Volume,
            "host:container[:ro|rw]",
        ),
        Row::value(
            "sandbox_volumes",
            r#"["./fake:/.odek/odek-supervisor:ro"]"#,
            Volume,
            "odek's supervisor",
        ),
        Row::value(
            "sandbox_volumes",
            r#"["./fake:/usr/sbin/docker-init:ro"]"#,
            Volume,
            "the engine's init",
        ),
        Row::value(
            "sandbox_volumes",
            r#"["./fake:/etc/passwd:ro"]"#,
            Volume,
            "account's /etc/passwd",
        ),
        Row::value(
            "sandbox_image",
            r#""Alpine""#,
            Value("sandbox_image"),
            "image reference",
        ),
        Row::value(
            "sandbox_image",
            &format!(r#""alpine@sha256:{}""#, &d64[..63]),
            Value("sandbox_image"),
            "digest length",
        ),
        // Networks with the sandbox off: the user config can turn it off and
        // is refused (SPEC §3.3); the project cannot turn it off at all.
        Row::invalid(
            "sandbox off with networks",
            r#"{"sandbox": false, "sandbox_networks": ["shop_default"]}"#,
            NoSandbox,
            "cannot be honoured on the host",
        )
        .project(Want::Warned("cannot turn the sandbox off")),
        Row::invalid(
            "sandbox off with a compose project",
            r#"{"sandbox": false, "sandbox_compose_project": "shop"}"#,
            NoSandbox,
            "cannot be honoured on the host",
        )
        .project(Want::Warned("cannot turn the sandbox off")),
        // Unknown keys are warned about, not fatal (SPEC §3.2).
        Row {
            what: "misspelt key".into(),
            doc: br#"{"sandbox_netwrok": "host"}"#.to_vec(),
            parse: Want::Warned("did you mean \"sandbox_network\""),
            user: Want::Warned("did you mean \"sandbox_network\""),
            project: Want::Warned("did you mean \"sandbox_network\""),
        },
    ]
}

/// `Err` unless `msg` is safe to print: no control or invisible formatting
/// characters, and bounded.
fn display_safe(what: &str, msg: &str) -> Result<(), String> {
    if msg.len() >= 4096 {
        return Err(format!("{what}: message of {} bytes", msg.len()));
    }
    if let Some(c) = raw_unsafe_char(msg) {
        return Err(format!("{what}: raw {c:?} in {msg:?}"));
    }
    Ok(())
}

fn kind_of(e: &ConfigError) -> Option<Kind> {
    Some(match e {
        ConfigError::Malformed { .. } => Kind::Malformed,
        ConfigError::InvalidImage { .. } => Kind::Value("sandbox_image"),
        ConfigError::InvalidValue { key, .. } => Kind::Value(match key.as_str() {
            "sandbox" => "sandbox",
            "sandbox_image" => "sandbox_image",
            "sandbox_network" => "sandbox_network",
            "sandbox_networks" => "sandbox_networks",
            "sandbox_compose_project" => "sandbox_compose_project",
            "sandbox_pids_limit" => "sandbox_pids_limit",
            "sandbox_readonly" => "sandbox_readonly",
            "sandbox_memory" => "sandbox_memory",
            "sandbox_cpus" => "sandbox_cpus",
            "sandbox_user" => "sandbox_user",
            "sandbox_env" => "sandbox_env",
            "sandbox_volumes" => "sandbox_volumes",
            _ => "?",
        }),
        ConfigError::InvalidNetworkMode { .. } => Kind::NetworkMode,
        ConfigError::InvalidNetworkName { .. } => Kind::NetworkName,
        ConfigError::InvalidComposeProject { .. } => Kind::Compose,
        ConfigError::InvalidVolume { .. } => Kind::Volume,
        ConfigError::NetworksWithoutSandbox { .. } => Kind::NoSandbox,
        _ => return None,
    })
}

/// Checks a refusal against `kind` and `needle`; `file` must be named.
fn check_refusal(
    what: &str,
    e: &ConfigError,
    kind: Kind,
    needle: &str,
    file: &str,
) -> Result<(), String> {
    let msg = e.to_string();
    if kind_of(e) != Some(kind) {
        return Err(format!("{what}: wanted {kind:?}, got {e:?}"));
    }
    if !msg.contains(needle) {
        return Err(format!("{what}: message lacks {needle:?}: {msg}"));
    }
    if !msg.contains(file) {
        return Err(format!("{what}: message does not name {file}: {msg}"));
    }
    display_safe(what, &msg)?;
    if kind == Kind::NetworkMode
        && !(msg.contains("sandbox_networks") && msg.contains("--sandbox-compose"))
    {
        return Err(format!(
            "{what}: no pointer to sandbox_networks / --sandbox-compose: {msg}"
        ));
    }
    if let ConfigError::Malformed { line, column, .. } = e {
        // The position is known unless the file is refused for its size alone.
        if !msg.contains("larger than") && (*line == 0 || *column == 0) {
            return Err(format!("{what}: no line/column: {msg}"));
        }
    }
    Ok(())
}

/// Panics listing every failed row.
#[track_caller]
fn assert_no_failures(failures: &[String]) {
    assert!(
        failures.is_empty(),
        "{} rows failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

fn parse_row(row: &Row) -> Result<(), String> {
    let what = &row.what;
    let got = config::parse_bytes(&row.doc, Path::new("/cfg/odek.json"));
    match (&row.parse, got) {
        (Want::Ok, Ok(_)) => Ok(()),
        (Want::Warned(needle), Ok((_, warnings))) => {
            if warnings.iter().any(|w| w.message.contains(needle)) {
                Ok(())
            } else {
                Err(format!("{what}: no warning with {needle:?}: {warnings:?}"))
            }
        }
        (Want::Err(kind, needle), Err(e)) => check_refusal(what, &e, *kind, needle, "odek.json"),
        (want, got) => Err(format!("{what}: wanted {want:?}, got {got:?}")),
    }
}

#[test]
fn parse_bytes_refuses_every_bad_document() {
    let rows = rows();
    assert!(rows.len() >= 60, "only {} rows", rows.len());
    let failures: Vec<String> = rows.iter().filter_map(|r| parse_row(r).err()).collect();
    assert_no_failures(&failures);
}

async fn resolve_row(row: &Row, project: bool) -> Result<(), String> {
    let file = if project { "odek.json" } else { "config.json" };
    let what = format!("{} (as {file})", row.what);
    let s = Setup::new();
    let target = if project {
        s.workdir.join(file)
    } else {
        s.odek_home.join(file)
    };
    std::fs::write(&target, &row.doc).expect("write config");
    let want = if project { &row.project } else { &row.user };
    let got = s.resolve().await;
    if !s.fake.no_mutation() {
        return Err(format!("{what}: mutating calls: {:?}", s.mutations()));
    }
    if !s.fake.containers().is_empty() {
        return Err(format!("{what}: a container exists"));
    }
    match (want, got) {
        (Want::Ok, Ok(_)) => Ok(()),
        (Want::Warned(needle), Ok(plan)) => {
            if plan.warnings.iter().any(|w| w.message.contains(needle)) {
                Ok(())
            } else {
                Err(format!(
                    "{what}: no warning with {needle:?}: {:?}",
                    plan.warnings
                ))
            }
        }
        (Want::Err(kind, needle), Err(err)) => {
            if err.class() != FailureClass::Config {
                return Err(format!("{what}: class {} for {err}", err.class()));
            }
            let Error::Config(e) = &err else {
                return Err(format!("{what}: not a config error: {err:?}"));
            };
            check_refusal(&what, e, *kind, needle, file)?;
            // Refused before Docker is asked anything — except, for a bad
            // Compose project name, the running projects as a hint.
            if *kind != Kind::Compose && !s.fake.calls().is_empty() {
                return Err(format!("{what}: Docker was asked: {:?}", s.fake.calls()));
            }
            Ok(())
        }
        (want, got) => Err(format!("{what}: wanted {want:?}, got {got:?}")),
    }
}

#[tokio::test]
async fn resolve_refuses_every_bad_user_config() {
    let mut failures = Vec::new();
    for row in &rows() {
        if let Err(f) = resolve_row(row, false).await {
            failures.push(f);
        }
    }
    assert_no_failures(&failures);
}

#[tokio::test]
async fn resolve_refuses_every_bad_project_config() {
    let mut failures = Vec::new();
    for row in &rows() {
        if let Err(f) = resolve_row(row, true).await {
            failures.push(f);
        }
    }
    assert_no_failures(&failures);
}

#[tokio::test]
async fn a_config_file_larger_than_the_limit_is_refused_without_reading_it_all() {
    // 8 MiB of a valid-looking document: refused by size (line/column 0).
    let s = Setup::new();
    let mut doc = br#"{"sandbox_image": ""#.to_vec();
    doc.extend(std::iter::repeat_n(b'a', 8 << 20));
    doc.extend(br#""}"#);
    std::fs::write(s.workdir.join("odek.json"), &doc).expect("write");
    let err = s.resolve().await.expect_err("too large");
    assert_refused_before_create(&s, &err, FailureClass::Config, "larger than");
    match err {
        Error::Config(ConfigError::Malformed { line, column, .. }) => {
            assert_eq!((line, column), (0, 0))
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_project_sandbox_user_is_ignored_and_the_operators_own_user_applies() {
    // Whose user the sandbox runs as is the operator's choice (SPEC §6.1
    // "user"): a project's `sandbox_user`, even a numeric non-root
    // `uid:gid`, is ignored with a warning, and the default — the
    // operator's own uid:gid on a local engine — applies.
    let me = format!(
        "{}:{}",
        rustix::process::geteuid().as_raw(),
        rustix::process::getegid().as_raw()
    );
    for user in [
        "dev",
        "dev:dev",
        "4242",
        "1000",
        "dev:1000",
        "1000:staff",
        "1000:0",
        "1000:1000",
        "0:0",
        "root",
    ] {
        let s = Setup::new().project_config(&format!(r#"{{"sandbox_user": "{user}"}}"#));
        let plan = s.resolve().await.expect("resolve");
        assert_eq!(
            plan.user.as_deref(),
            Some(me.as_str()),
            "{user} from the project applied"
        );
        assert_eq!(
            plan.user_choice,
            Some(odek_core::account::UserChoice::OperatorIds)
        );
        assert!(
            plan.warnings
                .iter()
                .any(|w| w.message.contains("sandbox_user")
                    && w.message.contains(user)
                    && w.message.contains("cannot choose the sandbox user")),
            "{user}: {:?}",
            plan.warnings
        );
        assert!(s.fake.no_mutation());
    }
    // Operator sources stay free: a name from the user config, env or a flag.
    let s = Setup::new().user_config(r#"{"sandbox_user": "dev"}"#);
    assert_eq!(
        s.resolve().await.expect("resolve").user.as_deref(),
        Some("dev")
    );
    let s = Setup::new().env("ODEK_SANDBOX_USER", "dev:staff");
    assert_eq!(
        s.resolve().await.expect("resolve").user.as_deref(),
        Some("dev:staff")
    );
    let s = Setup::new().flag("sandbox_user", "--sandbox-user", |l| {
        l.sandbox_user = Some("4242".into())
    });
    let plan = s.resolve().await.expect("resolve");
    assert_eq!(plan.user.as_deref(), Some("4242"));
    assert_eq!(
        plan.user_choice,
        Some(odek_core::account::UserChoice::Operator)
    );
}
