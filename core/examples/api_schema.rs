//! Writes or checks the JSON Schemas of the C ABI's messages
//! (`odek_core::api::schema_files`); run by `cargo xtask schema` and
//! `cargo xtask header-check`.
//!
//! `api_schema write DIR` writes every file; `api_schema check DIR` exits 1
//! naming the first file that differs from a fresh one (or is missing), and
//! any `*.json` in DIR that no message has.

use std::path::Path;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mode, dir) = match args.as_slice() {
        [m, d] if m == "write" || m == "check" => (m.as_str(), Path::new(d)),
        _ => {
            report("usage: api_schema write|check DIR");
            return ExitCode::from(2);
        }
    };
    let files = odek_core::api::schema_files();
    let mut ok = true;
    for (name, text) in &files {
        let path = dir.join(name);
        if mode == "write" {
            if let Err(e) = std::fs::write(&path, text) {
                report(&format!("{}: {e}", path.display()));
                return ExitCode::FAILURE;
            }
            continue;
        }
        let current = std::fs::read_to_string(&path).unwrap_or_default();
        if &current != text {
            let line = text
                .lines()
                .zip(current.lines())
                .position(|(a, b)| a != b)
                .map_or_else(|| "its length".to_string(), |i| format!("line {}", i + 1));
            report(&format!(
                "{} differs from the generated schema (first difference at {line}); run `cargo xtask schema` and commit it",
                path.display()
            ));
            ok = false;
        }
    }
    if mode == "check" {
        let entries = std::fs::read_dir(dir).map(|d| d.flatten().collect::<Vec<_>>());
        for e in entries.unwrap_or_default() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.ends_with(".json") && !files.iter().any(|(n, _)| *n == name) {
                report(&format!(
                    "{} is no message's schema any more; run `cargo xtask schema` and remove it",
                    e.path().display()
                ));
                ok = false;
            }
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// One line on stderr (the example's only output).
fn report(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "api_schema: {line}");
}
