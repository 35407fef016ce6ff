//! Structural guard (SPEC §6.3): process spawning is confined to
//! `core/src/exec/host.rs`, the module that runs a command on the host for the
//! loud fallback — and `core/src/engine/ssh.rs`, which runs the system's
//! `ssh` for an `ssh://` engine (SPEC §6.2.2) with odek's fixed options and
//! a checked destination. `core/clippy.toml` enforces it at lint time (disallowed
//! `Command` types and constructors); this test checks the sources directly,
//! so it fails even where clippy is not run.

use std::path::{Path, PathBuf};

/// Text that starts or replaces a process, in any spelling the core could use.
const SPAWNERS: &[&str] = &[
    "process::Command",
    "Command::new",
    "CommandExt",
    ".spawn()",
    "fork(",
    "posix_spawn",
    "execve",
    "execvp",
    "libc::exec",
    "nix::unistd",
    "rustix::runtime",
];

/// The one module allowed to spawn a command (its path under `core/src`).
const ALLOWED: &str = "exec/host.rs";

/// The module allowed to spawn `ssh` for an `ssh://` engine, nothing else
/// (SPEC §6.2.2).
const ALLOWED_SSH: &str = "engine/ssh.rs";

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read_dir") {
        let p = entry.expect("entry").path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The file without its `#[cfg(test)]` modules and comments (a test may
/// spawn its own binary; a comment may name what it forbids).
fn production_code(text: &str) -> String {
    let code = text.split("#[cfg(test)]").next().unwrap_or_default();
    code.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `(file, needle)` for every spawn outside the allowed module.
fn violations(root: &Path) -> Vec<(String, &'static str)> {
    let mut files = Vec::new();
    sources(root, &mut files);
    let mut found = Vec::new();
    for f in files {
        if f == root.join(ALLOWED) || f == root.join(ALLOWED_SSH) {
            continue;
        }
        let code = production_code(&std::fs::read_to_string(&f).expect("read"));
        for needle in SPAWNERS {
            if code.contains(needle) {
                found.push((f.display().to_string(), *needle));
            }
        }
    }
    found
}

#[test]
fn only_exec_host_rs_can_spawn_a_process() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let v = violations(&root);
    assert!(
        v.is_empty(),
        "process spawning outside core/src/exec/host.rs: {v:?}"
    );
    // Positive control: the scan does see the spawn that is allowed.
    let exec = production_code(&std::fs::read_to_string(root.join(ALLOWED)).expect("read"));
    assert!(
        exec.contains("process::Command"),
        "the scan no longer finds exec/host.rs's own spawn"
    );
    // The ssh engine spawns only the `ssh` program it found, with its
    // fail-closed options (unit-tested in engine/ssh.rs).
    let ssh = production_code(&std::fs::read_to_string(root.join(ALLOWED_SSH)).expect("read"));
    assert_eq!(
        ssh.matches("Command::new(").count(),
        1,
        "engine/ssh.rs starts exactly one kind of process"
    );
    assert!(
        ssh.contains("Command::new(&program)")
            && ssh.contains("\"StrictHostKeyChecking=yes\"")
            && ssh.contains("\"BatchMode=yes\""),
        "engine/ssh.rs's spawn is ssh with its fail-closed options"
    );
}

#[test]
fn the_guard_catches_a_spawn_in_another_module() {
    let d = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(d.path().join("exec")).expect("mkdir");
    std::fs::write(
        d.path().join(ALLOWED),
        "fn f() { tokio::process::Command::new(\"x\"); }",
    )
    .expect("w");
    std::fs::create_dir(d.path().join("image")).expect("mkdir");
    std::fs::write(
        d.path().join("image/build.rs"),
        "// Command::new in a comment is fine\nfn g() { let _ = std::process::Command::new(\"sh\").spawn(); }\n#[cfg(test)]\nmod t { fn h() { std::process::Command::new(\"x\"); } }",
    )
    .expect("w");
    // exec/host.rs below the root is not the allowed module.
    std::fs::create_dir(d.path().join("image/exec")).expect("mkdir");
    std::fs::write(
        d.path().join("image/exec/host.rs"),
        "fn x() { libc::execve(); }",
    )
    .expect("w");
    let v = violations(d.path());
    let files: Vec<&str> = v
        .iter()
        .map(|(f, _)| f.rsplit('/').next().unwrap_or_default())
        .collect();
    assert!(files.contains(&"build.rs"), "{v:?}");
    assert!(
        files.contains(&"host.rs"),
        "a nested exec/host.rs is not exempt: {v:?}"
    );
    assert!(
        !v.iter()
            .any(|(f, _)| *f == d.path().join(ALLOWED).display().to_string()),
        "{v:?}"
    );
    assert_eq!(
        v.iter().filter(|(f, _)| f.ends_with("build.rs")).count(),
        3,
        "{v:?}"
    );
}

#[test]
fn clippy_forbids_command_outside_exec_host_rs() {
    let toml = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("clippy.toml"))
        .expect("core/clippy.toml");
    for path in [
        "std::process::Command",
        "tokio::process::Command",
        "std::process::Command::new",
    ] {
        assert!(
            toml.contains(&format!("path = \"{path}\"")),
            "clippy.toml lacks {path}"
        );
    }
}

/// Every config key is spelled once, in `core/src/config/keys.rs`: the
/// production code of core, the CLI, `odek mcp` and the C ABI names a key
/// through the table (`keys::names::…`, `KEYS`), never as a string
/// literal, so renaming or adding a key cannot leave a second spelling
/// behind. Tests may spell keys (they check the documented names).
#[test]
fn config_keys_are_spelled_only_in_the_key_table() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let table = repo.join("core/src/config/keys.rs");
    let mut files = Vec::new();
    for dir in ["core/src", "cli/src", "mcp/src", "ffi/src"] {
        sources(&repo.join(dir), &mut files);
    }
    let mut found = Vec::new();
    for f in files {
        if f == table {
            continue;
        }
        let code = production_code(&std::fs::read_to_string(&f).expect("read"));
        for key in odek_core::config::KNOWN_KEYS {
            if code.contains(&format!("\"{key}\"")) {
                found.push(format!("{}: \"{key}\"", f.display()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "config keys spelled outside the key table: {found:#?}"
    );
    // The guard itself sees a literal.
    let planted = production_code("fn f() { pick(&r, \"sandbox_memory\"); }");
    assert!(planted.contains("\"sandbox_memory\""));
}
