//! Bad network names (SPEC §3.4, §4.1, §9.3).
//!
//! Every row is a `--sandbox-networks` list resolved against a fake engine
//! whose networks all have IDs fixed here. Rows refused for their spelling
//! must also be refused by the pure `config::validate_network_name`, and
//! Docker must not be asked anything; rows refused at lookup (ID prefixes,
//! another network's full ID, ambiguity, driver, the cap of 8) must pass that
//! validator and be refused by resolution. Either way: class `config`, the
//! expected variant, a message naming the cause, no state-changing Docker
//! call, no container, and no raw control or invisible character — in
//! particular no byte of a hostile network name the fake holds.

mod common;

use common::*;
use odek_core::config::{validate_network_name, ConfigError};
use odek_core::engine::{FakeEngine, FakeNetwork};
use odek_core::network::NetworkError;
use odek_core::{Error, FailureClass};

/// Network named with escape sequences (a Compose file can choose any name).
const EVIL_NAME: &str = "evil\u{1b}]0;pwned\u{7}\u{1b}[2J\n";
/// Its ID.
const EVIL_SEED: &str = "9e";

/// The standard fixture plus networks whose IDs and names the rows rely on.
fn fixture() -> FakeEngine {
    let fake = shop_fake();
    fake.add_network(FakeNetwork::bridge("cafe").id(&hex_id("cafe")));
    fake.add_network(FakeNetwork::bridge("dup").id(&hex_id("e1")));
    fake.add_network(FakeNetwork::bridge("dup").id(&hex_id("e2")));
    fake.add_network(
        FakeNetwork::bridge("ovl")
            .driver("overlay", "swarm")
            .id(&hex_id("0e")),
    );
    fake.add_network(
        FakeNetwork::bridge("mvl")
            .driver("macvlan", "local")
            .id(&hex_id("7a")),
    );
    fake.add_network(
        FakeNetwork::bridge("glb")
            .driver("bridge", "global")
            .id(&hex_id("6b")),
    );
    fake.add_network(FakeNetwork::bridge("pfx_a").id(&hex_id("f0f0")));
    fake.add_network(FakeNetwork::bridge("pfx_b").id(&hex_id("f0f1")));
    fake.add_network(FakeNetwork::bridge(EVIL_NAME).id(&hex_id(EVIL_SEED)));
    for i in 1..=9 {
        fake.add_network(FakeNetwork::bridge(&format!("n{i}")).id(&hex_id(&format!("3{i}"))));
    }
    fake
}

/// What a row must give.
#[derive(Clone, Debug)]
enum Want {
    /// Refused by the name rules: `ConfigError::InvalidNetworkName`.
    Name(&'static str),
    /// `NetworkError::IdPrefix`.
    IdPrefix(&'static str),
    /// `NetworkError::NotFound`.
    NotFound,
    /// `NetworkError::Ambiguous`.
    Ambiguous(&'static str),
    /// `NetworkError::Unsupported`.
    Unsupported(&'static str),
    /// `NetworkError::TooMany`.
    TooMany,
    /// Accepted: these full IDs are planned, in order.
    Ok(Vec<String>),
}

struct Row {
    what: String,
    names: Vec<String>,
    want: Want,
}

fn row(what: impl Into<String>, name: impl Into<String>, want: Want) -> Row {
    Row {
        what: what.into(),
        names: vec![name.into()],
        want,
    }
}

/// A name refused by the charset rule at `byte` for character `shown`.
fn charset(what: &str, name: impl Into<String>, shown: &'static str) -> Row {
    row(what, name, Want::Name(shown))
}

fn rows() -> Vec<Row> {
    use Want::*;
    let bytes_long_129 = "it is 129 bytes long";
    vec![
        // --- refused for their spelling (SPEC §3.4) ---
        row("empty", "", Name("it is empty")),
        row("reserved host", "host", Name("reserved")),
        row("reserved none", "none", Name("reserved")),
        row("reserved bridge", "bridge", Name("reserved")),
        row("reserved default", "default", Name("reserved")),
        row("reserved HOST", "HOST", Name("reserved")),
        row("reserved Default", "Default", Name("reserved")),
        row("reserved bRiDgE", "bRiDgE", Name("reserved")),
        row("129 bytes", "a".repeat(129), Name(bytes_long_129)),
        row(
            "1 MiB",
            "n".repeat(1 << 20),
            Name("it is 1048576 bytes long"),
        ),
        row("container mode", "container:x", Name("':' or '/'")),
        row("namespace path", "ns:/proc/1/ns/net", Name("':' or '/'")),
        row("slash", "a/b", Name("':' or '/'")),
        row("parent dir", "../x", Name("':' or '/'")),
        row("colon only", ":", Name("':' or '/'")),
        row(
            "wrapper-closing text",
            "</untrusted_content_x>",
            Name("':' or '/'"),
        ),
        charset("trailing space", "shop_default ", "U+0020 at byte 12"),
        charset("leading space", " shop_default", "U+0020 at byte 0"),
        charset("trailing tab", "shop_default\t", "U+0009"),
        charset("trailing newline", "shop_default\n", "U+000A"),
        charset("trailing CRLF", "shop_default\r\n", "U+000D"),
        charset("NUL inside", "shop\0default", "U+0000"),
        charset("Cyrillic a", "shop_def\u{430}ult", "U+0430 at byte 8"),
        charset("Cyrillic dze", "\u{455}hop_default", "U+0455 at byte 0"),
        charset("zero-width space", "shop_default\u{200b}", "U+200B"),
        charset("zero-width joiner", "shop\u{200d}_default", "U+200D"),
        charset("bidi override", "\u{202e}tluafed_pohs", "U+202E"),
        charset("bidi isolate", "shop_default\u{2066}", "U+2066"),
        charset("BOM", "\u{feff}shop_default", "U+FEFF"),
        charset("ANSI escape", "shop_default\u{1b}[0m", "U+001B"),
        charset("NEL", "shop_default\u{85}", "U+0085"),
        charset("line separator", "shop_default\u{2028}", "U+2028"),
        charset("fullwidth s", "\u{ff53}hop_default", "U+FF53"),
        charset("combining accent", "shop_default\u{301}", "U+0301"),
        charset("emoji", "shop\u{1f642}", "U+1F642"),
        charset("e acute", "r\u{e9}seau", "U+00E9"),
        charset("leading underscore", "_shop", "'_' at byte 0"),
        charset("leading dot", ".shop", "'.' at byte 0"),
        charset("leading dash (flag injection)", "-shop", "'-' at byte 0"),
        charset("comma list in one item", "shop,backend", "','"),
        charset("semicolon", "shop;id", "';'"),
        charset("command substitution", "$(id)", "'$'"),
        charset("backticks", "`id`", "'`'"),
        charset("glob", "shop*", "'*'"),
        charset("quote", "shop_default\"", "'\"'"),
        charset("angle bracket", "shop<x", "'<'"),
        // --- valid spelling, refused at lookup (SPEC §4.1) ---
        row(
            "4-hex prefix of shop_default's ID",
            &SHOP_DEFAULT_ID[..4],
            IdPrefix("matched network shop_default by ID"),
        ),
        row(
            "12-hex prefix of shop_default's ID",
            &SHOP_DEFAULT_ID[..12],
            IdPrefix("matched network shop_default by ID"),
        ),
        row(
            "12-hex prefix of shop_backend's ID",
            &SHOP_BACKEND_ID[..12],
            IdPrefix("matched network shop_backend by ID"),
        ),
        row(
            "shop_backend's full ID as a name",
            SHOP_BACKEND_ID,
            IdPrefix("matched network shop_backend by ID"),
        ),
        row(
            "prefix of the default bridge's ID",
            &BRIDGE_ID[..4],
            IdPrefix("matched network bridge by ID"),
        ),
        row(
            "prefix of the host network's ID",
            &HOST_ID[..12],
            IdPrefix("matched network host by ID"),
        ),
        row(
            "prefix of a network with an escape-laden name",
            &hex_id(EVIL_SEED)[..4],
            IdPrefix("matched network 9e9e9e9e9e9e by ID"),
        ),
        row("uppercase ID prefix", "ABCD", NotFound),
        row("ambiguous ID prefix", "f0f", NotFound),
        row("substring of two names", "shop", NotFound),
        row("wrapper tag name", "untrusted_content_x", NotFound),
        row("128 bytes, no such network", "a".repeat(128), NotFound),
        row(
            "two networks with the name",
            "dup",
            Ambiguous("e1e1e1e1e1e1, e2e2e2e2e2e2"),
        ),
        row(
            "overlay",
            "ovl",
            Unsupported("\"overlay\" with scope \"swarm\""),
        ),
        row("macvlan", "mvl", Unsupported("\"macvlan\"")),
        row(
            "global scope bridge",
            "glb",
            Unsupported("scope \"global\""),
        ),
        Row {
            what: "nine networks".into(),
            names: (1..=9).map(|i| format!("n{i}")).collect(),
            want: TooMany,
        },
        // --- accepted, for contrast ---
        row(
            "a network really named like hex",
            "cafe",
            Ok(vec![hex_id("cafe")]),
        ),
        Row {
            what: "the same name twice".into(),
            names: vec![SHOP_DEFAULT.into(), SHOP_DEFAULT.into()],
            want: Ok(vec![SHOP_DEFAULT_ID.into()]),
        },
    ]
}

/// `Err` unless `msg` is safe to print: no control or invisible formatting
/// characters, bounded, and nothing of the hostile name the fake holds.
fn display_safe(what: &str, msg: &str) -> Result<(), String> {
    if msg.len() >= 4096 {
        return Err(format!("{what}: message of {} bytes", msg.len()));
    }
    if msg.contains("pwned") {
        return Err(format!(
            "{what}: the hostile network name is echoed: {msg:?}"
        ));
    }
    if let Some(c) = raw_unsafe_char(msg) {
        return Err(format!("{what}: raw {c:?} in {msg:?}"));
    }
    Ok(())
}

fn check_pure(r: &Row) -> Result<(), String> {
    let what = &r.what;
    for name in &r.names {
        let got = validate_network_name("flag --sandbox-networks", name);
        match (&r.want, got) {
            (Want::Name(needle), Err(e @ ConfigError::InvalidNetworkName { .. })) => {
                let msg = e.to_string();
                if !msg.contains(needle) {
                    return Err(format!("{what}: validator message lacks {needle:?}: {msg}"));
                }
                display_safe(what, &msg)?;
            }
            (Want::Name(_), other) => {
                return Err(format!(
                    "{what}: validator wanted InvalidNetworkName, got {other:?}"
                ))
            }
            (_, Ok(())) => {}
            (_, Err(e)) => return Err(format!("{what}: validator refused a valid name: {e}")),
        }
    }
    Ok(())
}

async fn check_resolve(r: &Row) -> Result<(), String> {
    let what = &r.what;
    let names: Vec<&str> = r.names.iter().map(String::as_str).collect();
    let s = Setup::with_fake(fixture()).image(IMAGE).networks(&names);
    let got = s.resolve().await;
    if !s.fake.no_mutation() {
        return Err(format!("{what}: mutating calls: {:?}", s.mutations()));
    }
    if !s.fake.containers().is_empty() {
        return Err(format!("{what}: a container exists"));
    }
    let err = match (&r.want, got) {
        (Want::Ok(ids), Ok(plan)) => {
            let got: Vec<&str> = plan.networks.iter().map(|n| n.id.as_str()).collect();
            return if got == ids.iter().map(String::as_str).collect::<Vec<_>>() {
                Ok(())
            } else {
                Err(format!("{what}: planned {got:?}, wanted {ids:?}"))
            };
        }
        (Want::Ok(_), Err(e)) => return Err(format!("{what}: refused: {e}")),
        (_, Ok(plan)) => {
            return Err(format!(
                "{what}: accepted, networks {:?}",
                plan.networks.iter().map(|n| &n.name).collect::<Vec<_>>()
            ))
        }
        (_, Err(e)) => e,
    };
    let msg = err.to_string();
    if err.class() != FailureClass::Config {
        return Err(format!("{what}: class {} for {msg}", err.class()));
    }
    display_safe(what, &msg)?;
    let needle = match (&r.want, &err) {
        (Want::Name(n), Error::Config(ConfigError::InvalidNetworkName { .. })) => {
            if !s.fake.calls().is_empty() {
                return Err(format!("{what}: Docker was asked: {:?}", s.fake.calls()));
            }
            *n
        }
        (Want::IdPrefix(n), Error::Network(NetworkError::IdPrefix { .. })) => {
            if !msg.contains("ID-prefix lookups are refused; name the network") {
                return Err(format!("{what}: no fix in {msg}"));
            }
            *n
        }
        (Want::NotFound, Error::Network(NetworkError::NotFound { .. })) => "not found",
        (Want::Ambiguous(n), Error::Network(NetworkError::Ambiguous { .. })) => *n,
        (Want::Unsupported(n), Error::Network(NetworkError::Unsupported { .. })) => *n,
        (Want::TooMany, Error::Network(NetworkError::TooMany { .. })) => "at most 8",
        (want, _) => return Err(format!("{what}: wanted {want:?}, got {err:?}")),
    };
    if !msg.contains(needle) {
        return Err(format!("{what}: message lacks {needle:?}: {msg}"));
    }
    Ok(())
}

#[tokio::test]
async fn bad_network_names_are_refused_before_anything_is_created() {
    let rows = rows();
    let refused = rows
        .iter()
        .filter(|r| !matches!(r.want, Want::Ok(_)))
        .count();
    assert!(refused >= 45, "only {refused} bad names");
    let mut failures = Vec::new();
    for r in &rows {
        if let Err(f) = check_pure(r) {
            failures.push(f);
        }
        if let Err(f) = check_resolve(r).await {
            failures.push(f);
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The hostile name the fake holds never reaches a message, whichever way
/// the network is reached: as one of too many networks, or refused for its
/// driver.
#[tokio::test]
async fn a_hostile_network_name_is_never_echoed() {
    // Nine networks of one Compose project, one of them with the hostile
    // name: TooMany lists names, sanitised.
    let fake = shop_fake();
    fake.add_network(
        FakeNetwork::bridge(EVIL_NAME)
            .compose("evil")
            .id(&hex_id(EVIL_SEED)),
    );
    for i in 1..=8 {
        fake.add_network(
            FakeNetwork::bridge(&format!("evil_{i}"))
                .compose("evil")
                .id(&hex_id(&format!("4{i}"))),
        );
    }
    let s = Setup::with_fake(fake).image(IMAGE).compose("evil");
    let err = s.resolve().await.expect_err("too many");
    assert_refused_before_create(&s, &err, FailureClass::Config, "at most 8");
    display_safe("too many", &err.to_string()).unwrap_or_else(|e| panic!("{e}"));

    // An overlay network with the hostile name in a Compose project.
    let fake = shop_fake();
    fake.add_network(
        FakeNetwork::bridge(EVIL_NAME)
            .compose("evil")
            .driver("overlay", "swarm")
            .id(&hex_id(EVIL_SEED)),
    );
    let s = Setup::with_fake(fake).image(IMAGE).compose("evil");
    let err = s.resolve().await.expect_err("overlay");
    assert_refused_before_create(&s, &err, FailureClass::Config, "9e9e9e9e9e9e");
    display_safe("unsupported", &err.to_string()).unwrap_or_else(|e| panic!("{e}"));
}
