//! `config::parse_bytes` on arbitrary bytes (SPEC §3.2, §3.4).
//!
//! Invariants: never panics; accepts only valid UTF-8 without BOM or NUL that
//! serde_json also accepts; every value it yields can be run through the
//! validators without panicking; error messages name the file, are
//! printable and bounded, and never show a `sandbox_env` value the way odek
//! shows user text (`text::quote`), unless the same text is also a key or
//! another value of the document.
#![no_main]

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use libfuzzer_sys::fuzz_target;
use odek_core::config::{
    interpolate, parse_bytes, parse_cpus, parse_memory, parse_network_mode,
    validate_compose_project, validate_env_key, validate_network_name, validate_pids_limit,
    validate_user,
};
use odek_core::image::ImageRef;
use odek_core::text::quote;
use serde_json::Value;

const PATH: &str = "/fuzz/odek.json";

/// Strings of `v` outside `sandbox_env` values (keys included), and the
/// `sandbox_env` string values.
fn strings(v: &Value, in_env: bool, other: &mut Vec<String>, env: &mut Vec<String>) {
    match v {
        Value::String(s) if in_env => env.push(s.clone()),
        Value::String(s) => other.push(s.clone()),
        Value::Array(a) => a.iter().for_each(|x| strings(x, false, other, env)),
        Value::Object(o) => {
            for (k, x) in o {
                other.push(k.clone());
                strings(x, false, other, env);
            }
        }
        _ => {}
    }
}

fuzz_target!(|data: &[u8]| {
    let path = Path::new(PATH);
    match parse_bytes(data, path) {
        Ok((layer, warnings)) => {
            assert!(std::str::from_utf8(data).is_ok());
            assert!(!data.contains(&0));
            assert!(!data.starts_with(b"\xEF\xBB\xBF"));
            assert!(serde_json::from_slice::<Value>(data).is_ok());
            for w in &warnings {
                assert!(common::display_safe(&w.message), "{:?}", w.message);
            }
            let o = "fuzz";
            let host = BTreeMap::from([("HOME".to_string(), "/home/fuzz".to_string())]);
            if let Some(v) = &layer.sandbox_network {
                let _ = parse_network_mode(o, v);
            }
            for n in layer.sandbox_networks.iter().flatten() {
                let _ = validate_network_name(o, n);
            }
            if let Some(p) = &layer.sandbox_compose_project {
                let _ = validate_compose_project(o, p);
            }
            if let Some(p) = layer.sandbox_pids_limit {
                let _ = validate_pids_limit(o, p);
            }
            if let Some(m) = &layer.sandbox_memory {
                let _ = parse_memory(o, m);
            }
            if let Some(c) = &layer.sandbox_cpus {
                let _ = parse_cpus(o, c);
            }
            if let Some(u) = &layer.sandbox_user {
                let _ = validate_user(o, u);
            }
            for (k, v) in layer.sandbox_env.iter().flatten() {
                let _ = validate_env_key(o, k);
                if let Err(e) = interpolate(o, k, v, &host) {
                    let msg = e.to_string();
                    assert!(common::display_safe(&msg), "{msg:?}");
                    if v.len() >= 8 && !k.contains(v.as_str()) {
                        assert!(!msg.contains(&quote(v)), "env value shown: {msg}");
                    }
                }
            }
            if let Some(i) = &layer.sandbox_image {
                let _ = ImageRef::parse(i);
            }
        }
        Err(e) => {
            let msg = e.to_string();
            assert!(msg.contains(PATH), "{msg}");
            assert!(common::display_safe(&msg), "{msg:?}");
            // No env value is shown (unless the same text is also a key or
            // another value of the document, which may be).
            if let Ok(doc) = serde_json::from_slice::<Value>(data) {
                let (mut other, mut env) = (Vec::new(), Vec::new());
                if let Value::Object(o) = &doc {
                    for (k, v) in o {
                        other.push(k.clone());
                        if k == "sandbox_env" {
                            if let Value::Object(env_obj) = v {
                                for (ek, ev) in env_obj {
                                    other.push(ek.clone());
                                    strings(ev, true, &mut other, &mut env);
                                }
                            }
                        } else {
                            strings(v, false, &mut other, &mut env);
                        }
                    }
                }
                for v in env.iter().filter(|v| v.chars().count() >= 8) {
                    if !other.iter().any(|o| o.contains(v.as_str())) {
                        assert!(!msg.contains(&quote(v)), "env value shown: {msg}");
                    }
                }
            }
        }
    }
});
