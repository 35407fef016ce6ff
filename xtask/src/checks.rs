//! The checks of `cargo xtask lint` beyond fmt and clippy:
//!
//! - shellcheck over the repository's shell scripts (every `*.sh` and
//!   `.ci/run`), the in-container kill script `core/src/exec/kill.sh`
//!   included;
//! - comments cite docs/SPEC.md sections or nothing: no citation of a
//!   numbered convention or issue (which exist nowhere in the repository);
//! - every test a document cites exists (`cited_tests.rs`);
//! - `cargo doc --workspace --no-deps` with `RUSTDOCFLAGS=-D warnings`, and no
//!   cargo warning either (an output filename collision is one).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{cargo, install, root, sh, R};

/// The repository's files (relative paths): tracked and untracked-but-not-
/// ignored files from git, or, outside a git checkout, a walk of the tree
/// that skips build output and hidden directories (except `.ci`, `.cargo`).
pub(crate) fn repo_files() -> Result<Vec<PathBuf>, String> {
    let git = Command::new("git")
        .current_dir(root())
        .args([
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
        ])
        .output();
    if let Ok(out) = git {
        if out.status.success() {
            return Ok(out
                .stdout
                .split(|b| *b == 0)
                .filter(|p| !p.is_empty())
                .map(|p| PathBuf::from(String::from_utf8_lossy(p).into_owned()))
                // A deleted file not yet committed is still listed by git.
                .filter(|p| root().join(p).is_file())
                .collect());
        }
    }
    let mut files = Vec::new();
    walk(&root(), Path::new(""), &mut files)?;
    Ok(files)
}

fn walk(root: &Path, rel: &Path, out: &mut Vec<PathBuf>) -> R {
    let dir = root.join(rel);
    let entries = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for entry in entries {
        let entry = entry.map_err(|e| format!("{}: {e}", dir.display()))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = rel.join(&name);
        let kind = entry.file_type().map_err(|e| e.to_string())?;
        if kind.is_dir() {
            let skip = ["target", "node_modules", "__pycache__", "result"].contains(&name.as_str())
                || (name.starts_with('.') && name != ".ci" && name != ".cargo");
            if !skip {
                walk(root, &path, out)?;
            }
        } else if kind.is_file() {
            out.push(path);
        }
    }
    Ok(())
}

/// The shell scripts shellcheck checks: every `*.sh` and `.ci/run`.
fn shell_scripts(files: &[PathBuf]) -> Vec<PathBuf> {
    let mut scripts: Vec<PathBuf> = files
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "sh") || *p == Path::new(".ci/run"))
        .cloned()
        .collect();
    scripts.sort();
    scripts
}

pub(crate) fn shellcheck() -> R {
    install(&[("shellcheck", "shellcheck")], false)?;
    let scripts = shell_scripts(&repo_files()?);
    if scripts.is_empty() {
        return Err("no shell scripts found (is this the odek checkout?)".into());
    }
    eprintln!("xtask: shellcheck over {} scripts", scripts.len());
    sh(Command::new("shellcheck").args(&scripts))
}

/// This file: its docs and tests name what the check looks for.
const CHECKER: &str = "xtask/src/checks.rs";

/// Source and documentation files whose comments the citation check reads.
const CITATION_EXTS: &[&str] = &["rs", "py", "go", "sh", "md", "toml", "nix", "c", "h"];

/// The position (byte offset) of the first citation of a numbered convention
/// ("CONVENTIONS 20") or issue ("issue 6", "Issue 7", "issues 6", "issue #6")
/// in `line`, if any. Case-insensitive for "issue", exact for the upper-case
/// conventions document's name; "issue" must start a word ("tissue 5" is
/// not one) and the number must follow a space or `#`.
pub(crate) fn citation(line: &str) -> Option<usize> {
    let lower = line.to_ascii_lowercase();
    let bytes = lower.as_bytes();
    let numbered = |mut i: usize| -> bool {
        // " 6", " #6", "#6"
        if bytes.get(i) == Some(&b' ') {
            i += 1;
        }
        if bytes.get(i) == Some(&b'#') {
            i += 1;
        }
        bytes.get(i).is_some_and(u8::is_ascii_digit)
    };
    let word_start = |i: usize| i == 0 || !bytes[i - 1].is_ascii_alphanumeric();
    let mut from = 0;
    while let Some(at) = lower[from..].find("issue").map(|i| i + from) {
        let mut end = at + "issue".len();
        if bytes.get(end) == Some(&b's') {
            end += 1;
        }
        let gap = matches!(bytes.get(end), Some(b' ' | b'#'));
        if word_start(at) && gap && numbered(end) {
            return Some(at);
        }
        from = at + 1;
    }
    let name = "CONVENTIONS";
    let mut from = 0;
    while let Some(at) = line[from..].find(name).map(|i| i + from) {
        let end = at + name.len();
        if word_start(at) && bytes.get(end) == Some(&b' ') && numbered(end) {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

/// Fails when a source or documentation file cites a numbered convention or
/// issue: comments cite docs/SPEC.md sections ("SPEC §6.1") or nothing.
pub(crate) fn citations() -> R {
    let mut found = Vec::new();
    for rel in repo_files()? {
        let wanted = rel
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| CITATION_EXTS.contains(&e))
            || rel == Path::new(".ci/run");
        if !wanted || rel == Path::new(CHECKER) {
            continue;
        }
        // Binary or non-UTF-8 files hold no comments to check.
        let Ok(text) = std::fs::read_to_string(root().join(&rel)) else {
            continue;
        };
        for (n, line) in text.lines().enumerate() {
            if citation(line).is_some() {
                found.push(format!("{}:{}: {}", rel.display(), n + 1, line.trim()));
            }
        }
    }
    if found.is_empty() {
        eprintln!("xtask: no comment cites a numbered convention or issue");
        return Ok(());
    }
    Err(format!(
        "{} line(s) cite a numbered convention or issue, which the repository does not hold; cite the docs/SPEC.md section (\"SPEC §6.1\") or nothing:\n  {}",
        found.len(),
        found.join("\n  ")
    ))
}

/// `cargo doc --workspace --no-deps` with rustdoc's warnings denied; cargo's
/// own warnings (an output filename collision) fail it too.
pub(crate) fn doc() -> R {
    let mut flags = std::env::var("RUSTDOCFLAGS").unwrap_or_default();
    if !flags.is_empty() {
        flags.push(' ');
    }
    flags.push_str("-D warnings");
    let mut cmd = cargo();
    cmd.current_dir(root())
        .args(["doc", "--workspace", "--no-deps"])
        .env("RUSTDOCFLAGS", flags);
    eprintln!("xtask> {cmd:?}");
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprint!("{stderr}");
    if !out.status.success() {
        return Err(format!("{cmd:?} failed with {}", out.status));
    }
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("warning"))
        .collect();
    if !warnings.is_empty() {
        return Err(format!(
            "cargo doc printed {} warning(s):\n  {}",
            warnings.len(),
            warnings.join("\n  ")
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::citation;

    #[test]
    fn citations_of_conventions_and_issues_are_found() {
        let name = "CONVENTIONS";
        for line in [
            format!("//! The Docker API port (SPEC §2, {name} 2)."),
            format!("// ({name} 6–7)"),
            "//! Bad image references (issue 6; SPEC §5).".into(),
            "\"\"\"End-to-end tests (Issue 13).".into(),
            "# see issues 6 and 7".into(),
            "// fixed in issue #12".into(),
            "// issue 6".into(),
        ] {
            assert!(citation(&line).is_some(), "not found in {line:?}");
        }
    }

    #[test]
    fn other_uses_of_the_words_are_not_citations() {
        let name = "CONVENTIONS";
        for line in [
            "//! The Docker API port (SPEC §2).".to_string(),
            "Issues refer to it by section (`SPEC §4.2`).".into(),
            "// tissue 5 and reissue 3".into(),
            "let issue_7 = 1;".into(),
            format!("see /work/shared/{name}.md"),
            "Type conventions (mirroring the header's ownership rules):".into(),
            "// an issue with 3 causes".into(),
        ] {
            assert_eq!(citation(&line), None, "false positive in {line:?}");
        }
    }
}
