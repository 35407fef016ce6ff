//! Property tests of configuration parsing and validation (SPEC
//! §3.1, §3.2, §3.4).
//!
//! - `config::parse_bytes` never panics on arbitrary bytes or JSON-like text;
//! - on generated config objects (every key of §3.1 with well-typed,
//!   ill-typed and out-of-range values) it accepts exactly the documents
//!   whose known keys have the documented JSON types (and no NUL anywhere),
//!   and the layer it yields holds exactly the document's values;
//! - `config::load` of such a document as the user config accepts it exactly
//!   when every value passes the public validators (plus the
//!   networks-without-sandbox rule), and whatever it accepts passes
//!   validation: pids ≥ 1, network `none`/`bridge`, valid network names, …

use std::collections::BTreeMap;
use std::path::Path;

use odek_core::config::{
    self, interpolate, parse_cpus, parse_memory, parse_network_mode, resolve_volume,
    validate_compose_project, validate_env_key, validate_network_name, validate_pids_limit,
    validate_user, ConfigInputs, Layer,
};
use odek_core::image::ImageRef;
use proptest::prelude::*;
use serde_json::{json, Map, Value};

fn cases() -> ProptestConfig {
    ProptestConfig {
        cases: case_count(),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

// ---------------------------------------------------------------------------
// Strategies

fn string() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => "\\PC{0,6}",
        1 => Just("a\0b".to_string()),
    ]
}

/// Any JSON value, a few levels deep.
fn junk() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        string().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 16, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::btree_map(string(), inner, 0..3)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn strs(list: &'static [&'static str]) -> impl Strategy<Value = Value> {
    prop::sample::select(list).prop_map(|s| Value::String(s.to_string()))
}

fn str_re(re: &'static str) -> impl Strategy<Value = Value> {
    re.prop_map(Value::String)
}

/// A value for each key: mostly plausible, sometimes junk.
fn value_for(key: &'static str) -> BoxedStrategy<Value> {
    let plausible: BoxedStrategy<Value> = match key {
        "sandbox" | "sandbox_readonly" => any::<bool>().prop_map(Value::Bool).boxed(),
        "sandbox_image" => prop_oneof![
            strs(&[
                "alpine",
                "alpine:3.22",
                "Alpine",
                "odek-test/base:1",
                "",
                " alpine",
                "a@sha256:00"
            ]),
            str_re("[a-z0-9:/@._-]{0,12}"),
        ]
        .boxed(),
        "sandbox_network" => prop_oneof![
            strs(&[
                "none",
                "bridge",
                "host",
                "HOST",
                " none",
                "none\n",
                "container:x",
                "",
                "Bridge"
            ]),
            str_re("[a-z: ]{0,7}"),
        ]
        .boxed(),
        "sandbox_networks" => prop::collection::vec(
            prop_oneof![
                strs(&[
                    "shop_default",
                    "host",
                    "a:b",
                    "",
                    "x y",
                    "n1",
                    "-x",
                    "Default"
                ]),
                str_re("[A-Za-z0-9_.:/ -]{0,8}"),
            ],
            0..4,
        )
        .prop_map(Value::Array)
        .boxed(),
        "sandbox_compose_project" => prop_oneof![
            strs(&["shop", "Shop", "", "my app", "_x"]),
            str_re("[a-zA-Z0-9_ -]{0,8}"),
        ]
        .boxed(),
        "sandbox_pids_limit" => prop_oneof![
            (-3i64..10).prop_map(|n| json!(n)),
            any::<i64>().prop_map(|n| json!(n)),
            any::<u64>().prop_map(|n| json!(n)),
            Just(json!(4096.0)),
            Just(json!("4096")),
        ]
        .boxed(),
        "sandbox_memory" => prop_oneof![
            str_re("[0-9]{1,5}(\\.[0-9]{1,3})?[bkmgtBKMGTx]{0,2}"),
            any::<u64>().prop_map(|n| json!(n)),
            (-5i64..(64 << 20)).prop_map(|n| json!(n)),
            Just(json!(1.5)),
        ]
        .boxed(),
        "sandbox_cpus" => prop_oneof![
            str_re("-?[0-9]{1,4}(\\.[0-9]{1,11})?"),
            (0.0f64..2000.0).prop_map(|f| json!(f)),
            (-2i64..2000).prop_map(|n| json!(n)),
        ]
        .boxed(),
        "sandbox_user" => str_re("[a-z0-9_:A-Z-]{0,10}").boxed(),
        "sandbox_env" => prop::collection::btree_map(
            "[A-Za-z_0-9$-]{0,5}",
            prop_oneof![
                4 => str_re("[a-zA-Z${}_]{0,8}"),
                1 => junk(),
            ],
            0..4,
        )
        .prop_map(|m| Value::Object(m.into_iter().collect()))
        .boxed(),
        "sandbox_volumes" => prop::collection::vec(
            strs(&[
                "sub:/data",
                "./sub:/data:ro",
                "../x:/x",
                "/etc:/etc",
                "sub:/tmp",
                "missing:/m",
                "sub:/data:rx",
                "sub",
            ]),
            0..3,
        )
        .prop_map(Value::Array)
        .boxed(),
        _ => junk().boxed(),
    };
    prop_oneof![6 => plausible, 1 => junk()].boxed()
}

const KEYS: &[&str] = &[
    "sandbox",
    "sandbox_image",
    "sandbox_network",
    "sandbox_networks",
    "sandbox_compose_project",
    "sandbox_pids_limit",
    "sandbox_readonly",
    "sandbox_memory",
    "sandbox_cpus",
    "sandbox_user",
    "sandbox_env",
    "sandbox_volumes",
];

/// A config object: each known key present or not, plus unknown keys.
fn documents() -> impl Strategy<Value = Map<String, Value>> {
    let known: Vec<BoxedStrategy<Option<Value>>> = KEYS
        .iter()
        .map(|k| prop::option::weighted(0.4, value_for(k)).boxed())
        .collect();
    (
        known,
        prop::collection::btree_map("[a-z_]{1,10}", junk(), 0..2),
    )
        .prop_map(|(values, unknown)| {
            let mut m = Map::new();
            for (k, v) in unknown {
                if !KEYS.contains(&k.as_str()) {
                    m.insert(k, v);
                }
            }
            for (k, v) in KEYS.iter().zip(values) {
                if let Some(v) = v {
                    m.insert(k.to_string(), v);
                }
            }
            m
        })
}

// ---------------------------------------------------------------------------
// The model

fn has_nul(v: &Value) -> bool {
    match v {
        Value::String(s) => s.contains('\0'),
        Value::Array(a) => a.iter().any(has_nul),
        Value::Object(o) => o.iter().any(|(k, v)| k.contains('\0') || has_nul(v)),
        _ => false,
    }
}

/// The layer SPEC §3.1's types give for `doc`, or `None` when a known key
/// has the wrong JSON type.
fn expected_layer(doc: &Map<String, Value>) -> Option<Layer> {
    let mut l = Layer::default();
    let string = |v: &Value| v.as_str().map(str::to_string);
    let strings = |v: &Value| -> Option<Vec<String>> {
        v.as_array()?
            .iter()
            .map(|x| x.as_str().map(str::to_string))
            .collect()
    };
    for (k, v) in doc {
        match k.as_str() {
            "sandbox" => l.sandbox = Some(v.as_bool()?),
            "sandbox_readonly" => l.sandbox_readonly = Some(v.as_bool()?),
            "sandbox_image" => l.sandbox_image = Some(string(v)?),
            "sandbox_network" => l.sandbox_network = Some(string(v)?),
            "sandbox_compose_project" => l.sandbox_compose_project = Some(string(v)?),
            "sandbox_user" => l.sandbox_user = Some(string(v)?),
            "sandbox_networks" => l.sandbox_networks = Some(strings(v)?),
            "sandbox_volumes" => l.sandbox_volumes = Some(strings(v)?),
            "sandbox_pids_limit" => l.sandbox_pids_limit = Some(v.as_i64()?),
            "sandbox_memory" => {
                l.sandbox_memory = Some(match v {
                    Value::String(s) => s.clone(),
                    Value::Number(n) => n.as_u64()?.to_string(),
                    _ => return None,
                })
            }
            "sandbox_cpus" => {
                l.sandbox_cpus = Some(match v {
                    Value::String(s) => s.clone(),
                    // Read back through serde_json's own float parser, as
                    // odek reads it (without `float_roundtrip`, a 17-digit
                    // mantissa may come back one ULP off).
                    Value::Number(n) if n.is_f64() => serde_json::from_str::<f64>(&n.to_string())
                        .ok()?
                        .to_string(),
                    Value::Number(n) => n.to_string(),
                    _ => return None,
                })
            }
            "sandbox_env" => {
                let mut env = BTreeMap::new();
                for (ek, ev) in v.as_object()? {
                    env.insert(ek.clone(), ev.as_str()?.to_string());
                }
                l.sandbox_env = Some(env);
            }
            _ => {}
        }
    }
    Some(l)
}

/// Whether every value of `l` passes the public validators of SPEC §3.4,
/// and the networks-without-sandbox rule of §3.3 holds.
fn passes_validation(l: &Layer, workdir: &Path, host: &BTreeMap<String, String>) -> bool {
    let o = "o";
    let ok = l
        .sandbox_network
        .as_ref()
        .is_none_or(|v| parse_network_mode(o, v).is_ok())
        && l.sandbox_networks
            .iter()
            .flatten()
            .all(|n| validate_network_name(o, n).is_ok())
        && l.sandbox_compose_project
            .as_ref()
            .is_none_or(|p| validate_compose_project(o, p).is_ok())
        && l.sandbox_pids_limit
            .is_none_or(|p| validate_pids_limit(o, p).is_ok())
        && l.sandbox_memory
            .as_ref()
            .is_none_or(|m| parse_memory(o, m).is_ok())
        && l.sandbox_cpus
            .as_ref()
            .is_none_or(|c| parse_cpus(o, c).is_ok())
        && l.sandbox_user
            .as_ref()
            .is_none_or(|u| validate_user(o, u).is_ok())
        && l.sandbox_env
            .iter()
            .flatten()
            .all(|(k, v)| validate_env_key(o, k).is_ok() && interpolate(o, k, v, host).is_ok())
        && l.sandbox_volumes
            .iter()
            .flatten()
            .all(|v| resolve_volume(o, v, workdir).is_ok())
        && l.sandbox_image
            .as_ref()
            .is_none_or(|i| ImageRef::parse(i).is_ok());
    let attaches = l.sandbox_networks.as_ref().is_some_and(|n| !n.is_empty())
        || l.sandbox_compose_project.is_some();
    ok && !(l.sandbox == Some(false) && attaches)
}

// ---------------------------------------------------------------------------
// Properties

proptest! {
    #![proptest_config(cases())]

    #[test]
    fn parse_bytes_never_panics_on_bytes(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = config::parse_bytes(&bytes, Path::new("/cfg/odek.json"));
    }

    #[test]
    fn parse_bytes_never_panics_on_json_like_text(text in "[{}\\[\\]\":,0-9a-z_ \n\\\\.eE+-]{0,200}") {
        if let Err(e) = config::parse_bytes(text.as_bytes(), Path::new("/cfg/odek.json")) {
            prop_assert!(e.to_string().contains("/cfg/odek.json"));
        }
    }

    #[test]
    fn parse_bytes_accepts_exactly_the_documented_types(doc in documents()) {
        let text = Value::Object(doc.clone()).to_string();
        let got = config::parse_bytes(text.as_bytes(), Path::new("/cfg/odek.json"));
        let nul = doc.iter().any(|(k, v)| k.contains('\0') || has_nul(v));
        let want = if nul { None } else { expected_layer(&doc) };
        match (got, want) {
            (Ok((layer, warnings)), Some(want)) => {
                prop_assert_eq!(layer, want);
                let unknown = doc.keys().filter(|k| !KEYS.contains(&k.as_str())).count();
                prop_assert_eq!(warnings.len(), unknown);
            }
            (Err(_), None) => {}
            (got, want) => prop_assert!(false, "{}: parse gave {:?}, model {:?}", text, got, want),
        }
    }

    #[test]
    fn load_accepts_exactly_what_validation_accepts(doc in documents()) {
        let text = Value::Object(doc.clone()).to_string();
        let Ok((layer, _)) = config::parse_bytes(text.as_bytes(), Path::new("/x")) else {
            return Ok(());
        };
        // A group-writable user config is refused (SPEC §7.3), whatever the umask.
        rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o022));
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().canonicalize().expect("canonical");
        let workdir = root.join("work");
        let home = root.join("home/.odek");
        std::fs::create_dir_all(workdir.join("sub")).expect("workdir");
        std::fs::create_dir_all(&home).expect("home");
        std::fs::write(home.join("config.json"), &text).expect("config");
        let env = BTreeMap::from([
            ("HOME".to_string(), root.join("home").display().to_string()),
            ("ODEK_HOME".to_string(), home.display().to_string()),
            ("HOSTVAR".to_string(), "value".to_string()),
        ]);
        let inputs = ConfigInputs {
            workdir: workdir.clone(),
            env: env.clone(),
            read_user_config: true,
            read_project_config: false,
            ..ConfigInputs::default()
        };
        let got = config::load(&inputs);
        let want = passes_validation(&layer, &workdir, &env);
        prop_assert_eq!(got.is_ok(), want, "{}: load gave {:?}", text, got.as_ref().err());
        if let Ok(s) = got {
            // Whatever is applied passes validation.
            prop_assert!(s.pids_limit.value >= 1);
            prop_assert!(s.memory.value >= 6 << 20);
            prop_assert!(s.cpus.as_ref().is_none_or(|c| c.value.nano > 0 && c.value.nano <= 1024 * 1_000_000_000));
            for n in s.networks.iter().flat_map(|n| n.value.iter()) {
                prop_assert!(validate_network_name("o", n).is_ok(), "{:?}", n);
            }
            for e in s.env.iter().flat_map(|e| e.value.iter()) {
                prop_assert!(validate_env_key("o", &e.key).is_ok());
                prop_assert!(!e.value.contains('\0'));
            }
            for v in s.volumes.iter().flat_map(|v| v.value.iter()) {
                prop_assert!(v.host.starts_with(&workdir) && v.host != workdir, "{:?}", v);
            }
            if let Some(n) = &s.network_raw {
                prop_assert!(n.value == "none" || n.value == "bridge", "{:?}", n);
            }
        }
    }
}

/// 256 cases (bounded for CI), or `PROPTEST_CASES` for a longer run.
fn case_count() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256)
}
