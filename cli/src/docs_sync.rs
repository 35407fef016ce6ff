//! The reference docs match the code (issue: "a test fails when a flag or
//! config key exists in code but not in CLI.md/CONFIG.md, or the other way
//! round"): every command and flag of the clap tree is in docs/CLI.md and
//! every `--flag` there is real; every config key, its env var and the
//! process-level switches are in docs/CONFIG.md's table and text, and every
//! `ODEK_*` name there is one odek reads; odek's own source reads no `ODEK_*`
//! variable that the docs do not name.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use clap::CommandFactory;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

fn doc(name: &str) -> String {
    let p = repo().join("docs").join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Every command path (`"sandbox up"`) with its long and short flags.
fn commands() -> Vec<(String, Vec<String>, Vec<char>)> {
    fn walk(cmd: &clap::Command, path: &str, out: &mut Vec<(String, Vec<String>, Vec<char>)>) {
        let args: Vec<&clap::Arg> = cmd.get_arguments().filter(|a| !a.is_hide_set()).collect();
        let longs = args
            .iter()
            .filter_map(|a| a.get_long())
            .map(|l| format!("--{l}"))
            .collect();
        let shorts = args.iter().filter_map(|a| a.get_short()).collect();
        out.push((path.trim().to_string(), longs, shorts));
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            walk(sub, &format!("{path} {}", sub.get_name()), out);
        }
    }
    let mut cmd = crate::Cli::command();
    cmd.build();
    let mut out = Vec::new();
    walk(&cmd, "", &mut out);
    out
}

/// The `--long-flag` tokens of a text (a `--` alone is not one).
fn flag_tokens(text: &str) -> BTreeSet<String> {
    let b = text.as_bytes();
    let mut out = BTreeSet::new();
    let mut i = 0;
    while i + 2 < b.len() {
        let starts = b[i] == b'-'
            && b[i + 1] == b'-'
            && b[i + 2].is_ascii_lowercase()
            && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'-'));
        if starts {
            let end = (i + 2..b.len())
                .find(|&j| !(b[j].is_ascii_lowercase() || b[j].is_ascii_digit() || b[j] == b'-'))
                .unwrap_or(b.len());
            out.insert(text[i..end].trim_end_matches('-').to_string());
            i = end;
        } else {
            i += 1;
        }
    }
    out
}

/// The `ODEK_NAME` tokens of a text (the bare prefix `ODEK_` is not one).
fn env_tokens(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (i, _) in text.match_indices("ODEK_") {
        let rest = &text[i..];
        let end = rest
            .find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
            .unwrap_or(rest.len());
        let name = rest[..end].trim_end_matches('_');
        if name.len() > "ODEK_".len() - 1 && name != "ODEK" {
            out.insert(name.to_string());
        }
    }
    out
}

/// The env vars odek reads that users may set (the config keys', the
/// process-level switches and `odek mcp`'s own).
fn documented_env() -> BTreeSet<String> {
    odek_core::config::KNOWN_KEYS
        .iter()
        .filter_map(|k| odek_core::config::env_var_of(k))
        .chain(odek_core::config::PROCESS_ENV_VARS.iter().copied())
        .chain([odek_mcp::MAX_SANDBOXES_ENV])
        .map(String::from)
        .collect()
}

#[test]
fn every_command_and_flag_is_in_cli_md_and_every_documented_flag_exists() {
    let md = doc("CLI.md");
    let in_md = flag_tokens(&md);
    let mut in_code: BTreeSet<String> = ["--help".to_string(), "--version".to_string()].into();
    let mut missing = BTreeSet::new();
    for (path, longs, shorts) in commands() {
        if path.split(' ').any(|w| w == "help") {
            continue; // clap's own `help` subcommands
        }
        let last = path.rsplit(' ').next().unwrap_or_default();
        let named = md.contains(&format!("odek {path}"))
            || md.contains(&format!("`{last} "))
            || md.contains(&format!("`{last}`"));
        if !path.is_empty() && !named {
            missing.insert(format!("command `odek {path}`"));
        }
        for l in longs {
            if !in_md.contains(&l) {
                missing.insert(format!("flag {l}"));
            }
            in_code.insert(l);
        }
        for s in shorts {
            let shown = [" ", "`", ",", " /"]
                .iter()
                .any(|end| md.contains(&format!("`-{s}{end}")));
            if !shown {
                missing.insert(format!("short flag -{s}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "in the code but not in docs/CLI.md: {missing:#?}"
    );
    let stale: Vec<&String> = in_md.difference(&in_code).collect();
    assert!(
        stale.is_empty(),
        "in docs/CLI.md but not a flag of odek: {stale:?}"
    );
}

#[test]
fn every_config_key_and_env_var_is_in_config_md_and_back() {
    let md = doc("CONFIG.md");
    let table: Vec<Vec<String>> = md
        .split("## Keys")
        .nth(1)
        .expect("CONFIG.md has a ## Keys section")
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2)
        .map(|l| {
            l.trim_matches('|')
                .split(" | ")
                .map(|c| c.trim().to_string())
                .collect()
        })
        .collect();
    let keys: Vec<String> = table
        .iter()
        .map(|r| r[0].trim_matches('`').to_string())
        .collect();
    let known: Vec<String> = odek_core::config::KNOWN_KEYS
        .iter()
        .map(|k| k.to_string())
        .collect();
    assert_eq!(
        keys, known,
        "CONFIG.md's key table and the keys the parser knows differ"
    );
    let flags: BTreeSet<String> = commands().into_iter().flat_map(|(_, l, _)| l).collect();
    for row in &table {
        let key = row[0].trim_matches('`');
        match odek_core::config::env_var_of(key) {
            Some(var) => assert!(
                row[1].starts_with(&format!("`{var}`")),
                "CONFIG.md: `{key}` should name {var}, says {:?}",
                row[1]
            ),
            None => assert_eq!(row[1], "—", "CONFIG.md: `{key}` has no env var"),
        }
        for f in flag_tokens(&row[2]) {
            assert!(
                flags.contains(&f),
                "CONFIG.md: `{key}` names {f}, which odek does not have"
            );
        }
        // The flags column names exactly the key table's flags.
        let table_flags: BTreeSet<String> = odek_core::config::key(key)
            .and_then(|k| k.flag)
            .map(|f| [Some(f.long), f.off.map(|(off, _)| off)])
            .into_iter()
            .flatten()
            .flatten()
            .map(String::from)
            .collect();
        assert_eq!(
            flag_tokens(&row[2]),
            table_flags,
            "CONFIG.md: `{key}`'s flags differ from the key table's"
        );
    }
    let documented = documented_env();
    let in_md = env_tokens(&md);
    let missing: Vec<&String> = documented.difference(&in_md).collect();
    assert!(
        missing.is_empty(),
        "read by odek but not in docs/CONFIG.md: {missing:?}"
    );
    let stale: Vec<&String> = in_md.difference(&documented).collect();
    assert!(
        stale.is_empty(),
        "in docs/CONFIG.md but odek does not read it: {stale:?}"
    );
    // CLI.md may name what odek sets on commands (exit 124's row).
    let cli_stale: Vec<String> = env_tokens(&doc("CLI.md"))
        .difference(&documented)
        .filter(|v| !SET_ONLY.contains(&v.as_str()))
        .cloned()
        .collect();
    assert!(
        cli_stale.is_empty(),
        "in docs/CLI.md but odek does not read it: {cli_stale:?}"
    );
}

/// Env vars odek sets on commands and on its own kill exec, never reads
/// (SANDBOXING.md, "Timeouts and signals").
const SET_ONLY: [&str; 2] = [
    odek_core::exec::EXEC_TAG_ENV,
    odek_core::exec::KILL_PROBE_ENV,
];

/// `"ODEK_…"` string literals in the non-test part of a crate's sources.
fn env_literals(dir: &Path, out: &mut BTreeSet<String>) {
    for entry in std::fs::read_dir(dir).expect("read_dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            env_literals(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path).expect("read");
            let code = text.split("#[cfg(test)]").next().unwrap_or_default();
            for (i, _) in code.match_indices("\"ODEK_") {
                out.extend(env_tokens(&code[i + 1..]).into_iter().take(1));
            }
        }
    }
}

#[test]
fn odek_reads_no_env_var_the_docs_do_not_name() {
    let mut literals = BTreeSet::new();
    env_literals(&repo().join("core/src"), &mut literals);
    env_literals(&repo().join("cli/src"), &mut literals);
    env_literals(&repo().join("mcp/src"), &mut literals);
    assert!(
        literals.contains("ODEK_HOME"),
        "the scan found nothing: {literals:?}"
    );
    for set_only in SET_ONLY {
        assert!(doc("SANDBOXING.md").contains(set_only), "{set_only}");
        literals.remove(set_only);
    }
    let documented = documented_env();
    let undocumented: Vec<&String> = literals.difference(&documented).collect();
    assert!(
        undocumented.is_empty(),
        "odek's source names env vars the docs do not: {undocumented:?}"
    );
}

#[test]
fn the_token_scanners_find_what_they_should() {
    assert_eq!(
        flag_tokens("`--sandbox-networks a,b`, x--y, --, -- CMD, --json."),
        ["--json".to_string(), "--sandbox-networks".to_string()].into()
    );
    assert_eq!(
        env_tokens("`ODEK_*` and ODEK_HOME, `ODEK_SANDBOX_PIDS_LIMIT`"),
        [
            "ODEK_HOME".to_string(),
            "ODEK_SANDBOX_PIDS_LIMIT".to_string()
        ]
        .into()
    );
}
