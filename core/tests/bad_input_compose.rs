//! Bad Compose project names and hostile Compose labels (SPEC §3.4,
//! §4.1, §7.4, §9.3).
//!
//! Invalid project names are refused by the pure
//! `config::validate_compose_project` and by `Client::resolve` (from the flag
//! and from `./odek.json`) as class `config`, with Compose's normalised
//! spelling as the hint and the running projects' labels — sanitised — as
//! further hints; never matched fuzzily. Valid names that no network carries
//! are "not running". Network labels and names chosen by a Compose file that
//! carry escape, control or invisible characters never reach any error
//! message raw.

mod common;

use common::*;
use odek_core::approval::Decision;
use odek_core::config::{normalize_compose_project, validate_compose_project, ConfigError};
use odek_core::engine::{FakeEngine, FakeNetwork};
use odek_core::network::NetworkError;
use odek_core::{Error, FailureClass, LaunchOptions};

/// Compose labels (project names) a hostile Compose file could set, each on
/// its own network. Only `Ok_Upper` passes SPEC §9.3 and may be shown.
const HOSTILE_LABELS: &[&str] = &[
    "evil\u{1b}[31m",
    "bidi\u{202e}cod.exe",
    "nl\nproject",
    "</untrusted_content_x>",
    "zw\u{200b}sp",
    "bell\u{7}",
    "Ok_Upper",
];

/// Marker text of the hostile labels and names that must never be echoed.
const NEVER: &[&str] = &[
    "\u{1b}",
    "\u{202e}",
    "\u{200b}",
    "\u{7}",
    "\n",
    "</untrusted_content",
];

fn fixture() -> FakeEngine {
    let fake = shop_fake();
    for (i, label) in HOSTILE_LABELS.iter().enumerate() {
        fake.add_network(
            FakeNetwork::bridge(&format!("lbl_{i}"))
                .compose(label)
                .id(&hex_id(&format!("5{i}"))),
        );
    }
    fake
}

/// `Err` unless `msg` is safe to print and echoes no hostile text.
fn display_safe(what: &str, msg: &str) -> Result<(), String> {
    if msg.len() >= 4096 {
        return Err(format!("{what}: message of {} bytes", msg.len()));
    }
    for bad in NEVER {
        if msg.contains(bad) {
            return Err(format!("{what}: {bad:?} echoed raw in {msg:?}"));
        }
    }
    if let Some(c) = raw_unsafe_char(msg) {
        return Err(format!("{what}: raw {c:?} in {msg:?}"));
    }
    Ok(())
}

#[derive(Clone, Debug)]
enum Want {
    /// Invalid name: refused with this normalised spelling as the hint.
    Invalid(Option<&'static str>),
    /// Valid name that no network carries.
    NotRunning,
}

struct Row {
    name: String,
    want: Want,
}

fn invalid(name: impl Into<String>, normalized: Option<&'static str>) -> Row {
    Row {
        name: name.into(),
        want: Want::Invalid(normalized),
    }
}

fn not_running(name: impl Into<String>) -> Row {
    Row {
        name: name.into(),
        want: Want::NotRunning,
    }
}

fn rows() -> Vec<Row> {
    vec![
        invalid("Shop", Some("shop")),
        invalid("SHOP", Some("shop")),
        invalid("my app", Some("myapp")),
        invalid("my.app", Some("myapp")),
        invalid("shop.default", Some("shopdefault")),
        invalid("_shop", Some("shop")),
        invalid("-shop", Some("shop")),
        invalid("shop!", Some("shop")),
        invalid("", None),
        invalid("-", None),
        invalid("__", None),
        invalid("\u{ff33}\u{ff28}\u{ff2f}\u{ff30}", None),
        invalid("sh\u{f6}p", Some("shp")),
        invalid("\u{455}hop", Some("hop")),
        invalid("shop\n", Some("shop")),
        invalid("shop ", Some("shop")),
        invalid(" shop", Some("shop")),
        invalid("shop\0", Some("shop")),
        invalid("sh\u{200b}op", Some("shop")),
        invalid("\u{202e}shop", Some("shop")),
        invalid("shop\u{1b}[31m", Some("shop31m")),
        invalid("shop/default", Some("shopdefault")),
        invalid("shop:1", Some("shop1")),
        invalid("KAFKA_Cluster", Some("kafka_cluster")),
        invalid("\u{130}stanbul", Some("istanbul")),
        invalid("Ok_Upper", Some("ok_upper")),
        invalid("A".repeat(100), None),
        // Valid spelling, nothing carries the label: never matched fuzzily
        // (not to `shop`, not to a label that differs by an escape).
        not_running("shop2"),
        not_running("sho"),
        not_running("evil"),
        not_running("bidi"),
        not_running("ok_upper"),
        not_running("shop_default"),
    ]
}

fn check_pure(r: &Row) -> Result<(), String> {
    let what = format!("{:?}", r.name);
    match (
        &r.want,
        validate_compose_project("flag --sandbox-compose", &r.name),
    ) {
        (Want::NotRunning, Ok(())) => Ok(()),
        (Want::Invalid(norm), Err(e @ ConfigError::InvalidComposeProject { .. })) => {
            let ConfigError::InvalidComposeProject { normalized, .. } = &e else {
                unreachable!()
            };
            let want = match norm {
                Some(n) => Some(n.to_string()),
                // The A*100 row: its normalisation is the lowercase spelling.
                None if r.name.starts_with('A') => Some("a".repeat(100)),
                None => None,
            };
            if *normalized != want {
                return Err(format!(
                    "{what}: normalised {normalized:?}, wanted {want:?}"
                ));
            }
            if normalize_compose_project(&r.name).filter(|n| *n != r.name) != want {
                return Err(format!("{what}: normalize_compose_project disagrees"));
            }
            display_safe(&what, &e.to_string())
        }
        (want, got) => Err(format!("{what}: wanted {want:?}, got {got:?}")),
    }
}

async fn check_resolve(r: &Row, from_project: bool) -> Result<(), String> {
    let what = format!(
        "{:?} (from {})",
        r.name,
        if from_project { "odek.json" } else { "flag" }
    );
    let s = if from_project {
        let doc = serde_json::json!({ "sandbox_compose_project": r.name }).to_string();
        Setup::with_fake(fixture())
            .image(IMAGE)
            .project_config(&doc)
    } else {
        Setup::with_fake(fixture()).image(IMAGE).compose(&r.name)
    };
    let got = s.resolve().await;
    if !s.fake.no_mutation() || !s.fake.containers().is_empty() {
        return Err(format!("{what}: mutating calls: {:?}", s.mutations()));
    }
    let err = match got {
        Ok(plan) => {
            return Err(format!(
                "{what}: accepted with networks {:?}",
                plan.networks.iter().map(|n| &n.name).collect::<Vec<_>>()
            ))
        }
        Err(e) => e,
    };
    let msg = err.to_string();
    if err.class() != FailureClass::Config {
        return Err(format!("{what}: class {}: {msg}", err.class()));
    }
    display_safe(&what, &msg)?;
    if from_project && r.name.contains('\0') {
        // A NUL in a config file is refused by the parser, before validation.
        return match err {
            Error::Config(ConfigError::Malformed { .. }) if msg.contains("NUL") => Ok(()),
            other => Err(format!("{what}: wanted Malformed, got {other:?}")),
        };
    }
    match (&r.want, &err) {
        (
            Want::Invalid(norm),
            Error::Config(ConfigError::InvalidComposeProject { running, .. }),
        ) => {
            if let Some(n) = norm {
                let hint = format!("did you mean \"{n}\"?");
                if !msg.contains(&hint) {
                    return Err(format!("{what}: no hint {hint:?}: {msg}"));
                }
            }
            // The running projects, sanitised: only the labels that pass §9.3
            // (nearest the normalised spelling first, so compare as a set).
            let mut sorted = running.clone();
            sorted.sort();
            if sorted != ["Ok_Upper".to_string(), "shop".to_string()] {
                return Err(format!("{what}: running projects {running:?}"));
            }
            if !msg.contains(&format!("running projects: {}", running.join(", "))) {
                return Err(format!("{what}: no running-projects hint: {msg}"));
            }
            Ok(())
        }
        (Want::NotRunning, Error::Network(NetworkError::ComposeNotRunning { .. })) => {
            let hint = format!("docker compose -p {} -f <compose file> up -d", r.name);
            if msg.contains(&hint) {
                Ok(())
            } else {
                Err(format!("{what}: no hint {hint:?}: {msg}"))
            }
        }
        (want, _) => Err(format!("{what}: wanted {want:?}, got {err:?}")),
    }
}

#[tokio::test]
async fn bad_compose_project_names_are_refused_with_a_normalised_hint() {
    let rows = rows();
    assert!(rows.len() >= 25, "only {} rows", rows.len());
    let mut failures = Vec::new();
    for r in &rows {
        if let Err(f) = check_pure(r) {
            failures.push(f);
        }
        for from_project in [false, true] {
            if let Err(f) = check_resolve(r, from_project).await {
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

/// A network of a running project whose name carries escapes, refused for
/// its driver: the message names it by short ID.
#[tokio::test]
async fn a_hostile_network_name_in_a_project_is_not_echoed_when_refused() {
    let fake = shop_fake();
    fake.add_network(
        FakeNetwork::bridge("ovl\u{1b}]0;owned\u{7}\n")
            .compose("ovl")
            .driver("overlay", "swarm")
            .id(&hex_id("6e")),
    );
    let s = Setup::with_fake(fake).image(IMAGE).compose("ovl");
    let err = s.resolve().await.expect_err("overlay refused");
    assert_refused_before_create(&s, &err, FailureClass::Config, "6e6e6e6e6e6e");
    display_safe("overlay", &err.to_string()).unwrap_or_else(|e| panic!("{e}"));
    assert!(!err.to_string().contains("owned"), "{err}");
}

/// SPEC §7.4 with a hostile newcomer: after approval, a network with an
/// escape-laden name joins the project. The launch is refused; the message
/// lists the difference without echoing the name raw.
#[tokio::test]
async fn networks_changed_message_does_not_echo_a_hostile_name() {
    let s = Setup::with_fake(fixture())
        .image(IMAGE)
        .project_config(r#"{"sandbox_compose_project": "shop"}"#);
    let plan = s.resolve().await.expect("resolve");
    let approval = s.odek.approve(&plan, Decision::Once).expect("approve once");
    s.fake.add_network(
        FakeNetwork::bridge("joined\u{1b}[2J\u{202e}\n")
            .compose("shop")
            .id(&hex_id("7e")),
    );
    let opts = LaunchOptions {
        approval: Some(approval),
        ..Default::default()
    };
    let err = s
        .odek
        .launch(&plan, &opts, &s.reporter)
        .await
        .expect_err("networks changed");
    assert_refused_before_create(&s, &err, FailureClass::Config, "7e7e7e7e7e7e");
    assert!(err.to_string().contains("added"), "{err}");
    display_safe("networks changed", &err.to_string()).unwrap_or_else(|e| panic!("{e}"));
}

/// The approval card built from hostile labels is terminal-safe too (SPEC
/// §7.2): a project config asking for a project whose network carries a
/// hostile name.
#[tokio::test]
async fn approval_card_of_a_hostile_project_is_terminal_safe() {
    let fake = shop_fake();
    fake.add_network(
        FakeNetwork::bridge("card\u{1b}[31m\u{202e}x")
            .compose("card")
            .internal()
            .id(&hex_id("8e")),
    );
    let s = Setup::with_fake(fake)
        .image(IMAGE)
        .project_config(r#"{"sandbox_compose_project": "card"}"#);
    let plan = s.resolve().await.expect("resolve");
    let req = plan.approval.expect("needs approval");
    for n in &req.networks {
        display_safe("card network", &n.name).unwrap_or_else(|e| panic!("{e}"));
        display_safe("card project", &n.compose_project).unwrap_or_else(|e| panic!("{e}"));
    }
    assert_eq!(req.networks.len(), 1);
    assert!(
        req.networks[0].name.contains("\\u{1b}"),
        "{}",
        req.networks[0].name
    );
}

/// Error messages stay one bounded paragraph however long the user's value
/// is: the value itself is cut at 80 characters by `text::quote`, but the
/// normalised-spelling hint and the "not running" message repeat the whole
/// name.
#[tokio::test]
async fn long_project_names_give_bounded_messages() {
    let mut sizes = Vec::new();
    for name in ["A".repeat(1 << 20), "a".repeat(1 << 20)] {
        let s = Setup::with_fake(fixture()).image(IMAGE).compose(&name);
        let err = s.resolve().await.expect_err("refused");
        assert_refused_before_create(&s, &err, FailureClass::Config, "");
        sizes.push(err.to_string().len());
    }
    assert!(sizes.iter().all(|n| *n < 4096), "message sizes {sizes:?}");
}
