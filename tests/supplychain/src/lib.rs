//! Helpers for odek's supply-chain tests (SPEC §5, §12): the pinned default
//! image lives in exactly one file, `core/src/image/default.Dockerfile`,
//! which Dependabot bumps and everything else reads.
//!
//! Standard library only (plus `odek-core` in the tests): the repository's
//! files come from `git ls-files` in a git work tree, or from walking the tree
//! where there is no `.git` (the Nix build sandbox, whose source is the
//! flake's tracked files).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The pin's file, relative to the repository root.
pub const DOCKERFILE: &str = "core/src/image/default.Dockerfile";

/// The Dependabot configuration, relative to the repository root.
pub const DEPENDABOT: &str = ".github/dependabot.yml";

/// The directory Dependabot's docker entry watches: the pin's directory.
pub const PIN_DIRECTORY: &str = "/core/src/image";

/// Image repository of the pinned default (SPEC §5).
pub const PIN_NAME: &str = "alpine";

/// Tag of the pinned default (SPEC §5). Dependabot only moves the digest
/// within it (`ignore` of minor and major updates in dependabot.yml); moving
/// to another alpine release is a deliberate change of SPEC §5 and this line.
pub const PIN_TAG: &str = "3.22";

/// The workspace root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("tests/supplychain is two levels below the root")
        .to_path_buf()
}

/// The parsed `FROM` of the pin's Dockerfile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pin {
    /// The whole reference, e.g. `alpine:3.22@sha256:…`.
    pub reference: String,
    /// Repository name as written (`alpine`).
    pub name: String,
    /// Tag as written (`3.22`).
    pub tag: String,
    /// The 64 lowercase hex digits after `@sha256:`.
    pub hex: String,
}

/// True for exactly 64 lowercase hex digits.
pub fn is_lower_hex64(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Instructions of a Dockerfile: trimmed lines that are neither blank nor
/// comments.
pub fn instructions(dockerfile: &str) -> Vec<&str> {
    dockerfile
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect()
}

/// Parses a Dockerfile whose only instruction must be
/// `FROM <name>:<tag>@sha256:<64 lowercase hex>`. Errors say what is wrong.
pub fn parse_pin(dockerfile: &str) -> Result<Pin, String> {
    let ins = instructions(dockerfile);
    let [only] = ins.as_slice() else {
        return Err(format!(
            "expected exactly one instruction, found {}: {ins:?}",
            ins.len()
        ));
    };
    let words: Vec<&str> = only.split_whitespace().collect();
    let [kw, reference] = words.as_slice() else {
        return Err(format!("expected `FROM <reference>`, found {only:?}"));
    };
    if !kw.eq_ignore_ascii_case("FROM") {
        return Err(format!("the instruction is not FROM: {only:?}"));
    }
    let (name_tag, digest) = reference
        .split_once('@')
        .ok_or_else(|| format!("{reference} has no digest"))?;
    let hex = digest
        .strip_prefix("sha256:")
        .ok_or_else(|| format!("{reference}: the digest is not sha256:…"))?;
    if !is_lower_hex64(hex) {
        return Err(format!(
            "{reference}: the digest is not 64 lowercase hex digits"
        ));
    }
    let (name, tag) = name_tag
        .rsplit_once(':')
        .filter(|(_, t)| !t.contains('/'))
        .ok_or_else(|| format!("{reference} has no tag"))?;
    Ok(Pin {
        reference: (*reference).to_string(),
        name: name.to_string(),
        tag: tag.to_string(),
        hex: hex.to_string(),
    })
}

/// The repository's files, relative to `root`: `git ls-files --cached
/// --others --exclude-standard` (tracked plus new, not ignored) when `root`
/// is a git work tree, else every file below `root` except `.git`, `target`,
/// `result*` and caches. Deleted-but-tracked files are left out.
pub fn repo_files(root: &Path) -> Vec<PathBuf> {
    let mut files = if root.join(".git").exists() {
        let out = Command::new("git")
            .arg("-C")
            .arg(root)
            .args([
                "ls-files",
                "-z",
                "--cached",
                "--others",
                "--exclude-standard",
            ])
            .output()
            .unwrap_or_else(|e| {
                panic!(
                    "{} is a git work tree but git cannot run: {e}",
                    root.display()
                )
            });
        assert!(
            out.status.success(),
            "git ls-files failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
            .split(|b| *b == 0)
            .filter(|p| !p.is_empty())
            .map(|p| PathBuf::from(String::from_utf8_lossy(p).into_owned()))
            .filter(|p| root.join(p).is_file())
            .collect()
    } else {
        let mut v = Vec::new();
        walk(root, Path::new(""), &mut v);
        v
    };
    files.sort();
    files.dedup();
    files
}

fn walk(root: &Path, rel: &Path, out: &mut Vec<PathBuf>) {
    let dir = root.join(rel);
    let entries =
        std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()));
    for entry in entries {
        let entry = entry.unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()));
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = rel.join(&name);
        let top = rel.as_os_str().is_empty();
        let skip = matches!(
            name.as_str(),
            ".git" | "target" | "__pycache__" | ".pytest_cache" | "node_modules"
        ) || (top && (name == "result" || name.starts_with("result-")));
        let ty = entry
            .file_type()
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        if skip {
            continue;
        } else if ty.is_dir() {
            walk(root, &path, out);
        } else if ty.is_file() {
            out.push(path);
        }
    }
}

/// 1-based numbers of the lines of `text` that contain `hex`, ignoring ASCII
/// case (an upper-case copy is still a copy).
pub fn lines_with(text: &[u8], hex: &str) -> Vec<usize> {
    let needle = hex.to_ascii_lowercase().into_bytes();
    text.split(|b| *b == b'\n')
        .enumerate()
        .filter(|(_, line)| {
            let line = line.to_ascii_lowercase();
            line.windows(needle.len()).any(|w| w == needle.as_slice())
        })
        .map(|(i, _)| i + 1)
        .collect()
}

/// Image references pinned by digest to an `alpine` repository in `text`:
/// every `<ref>@sha256:<64 hex>` whose repository's last path component is
/// `alpine` (`alpine:3.21@…`, `docker.io/library/alpine@…`; not
/// `node:20-alpine@…`, whose repository is `node`). Returns (line, reference).
pub fn alpine_digests(text: &[u8]) -> Vec<(usize, String)> {
    let text = String::from_utf8_lossy(text);
    let mut found = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let mut rest = line;
        while let Some(at) = rest.find("@sha256:") {
            let hex: String = rest[at + 8..].chars().take(64).collect();
            let token_start = rest[..at]
                .rfind(|c: char| !(c.is_ascii_alphanumeric() || "._-/:".contains(c)))
                .map_or(0, |p| p + 1);
            let name_tag = &rest[token_start..at];
            let last = name_tag.rsplit('/').next().unwrap_or(name_tag);
            let repo = last.split(':').next().unwrap_or(last);
            if hex.len() == 64
                && hex.chars().all(|c| c.is_ascii_hexdigit())
                && repo.eq_ignore_ascii_case(PIN_NAME)
            {
                found.push((i + 1, format!("{name_tag}@sha256:{hex}")));
            }
            rest = &rest[at + 8..];
        }
    }
    found
}

/// One `updates:` entry of dependabot.yml.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Update {
    /// `package-ecosystem`.
    pub ecosystem: String,
    /// `directory`, or each of `directories`.
    pub directories: Vec<String>,
    /// `dependency-name`s under `ignore:` (with their `update-types`, joined).
    pub ignores: Vec<(String, String)>,
}

fn unquote(s: &str) -> String {
    let s = s.split(" #").next().unwrap_or(s).trim();
    s.trim_matches(|c| c == '"' || c == '\'').to_string()
}

/// Reads the `updates:` entries of a dependabot.yml written in the block
/// style this repository uses (`- package-ecosystem:` items with
/// `directory:` or a `directories:` list, optional `ignore:` items). Not a
/// general YAML parser: an unexpected shape is an error, so the test fails
/// loudly instead of reading the file wrongly.
pub fn parse_dependabot(text: &str) -> Result<(u32, Vec<Update>), String> {
    let mut version = None;
    let mut updates: Vec<Update> = Vec::new();
    let mut in_updates = false;
    let mut list: Option<&'static str> = None;
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim_end();
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let indent = line.len() - trimmed.len();
        let err = |what: &str| format!("{DEPENDABOT}:{}: {what}: {raw:?}", n + 1);
        if indent == 0 {
            in_updates = false;
            list = None;
            if let Some(v) = trimmed.strip_prefix("version:") {
                version = Some(
                    unquote(v)
                        .parse::<u32>()
                        .map_err(|_| err("version is not a number"))?,
                );
            } else if trimmed == "updates:" {
                in_updates = true;
            } else if !trimmed.contains(':') {
                return Err(err("unexpected top-level line"));
            }
            continue;
        }
        if !in_updates {
            continue;
        }
        if let Some(item) = trimmed.strip_prefix("- package-ecosystem:") {
            updates.push(Update {
                ecosystem: unquote(item),
                ..Update::default()
            });
            list = None;
            continue;
        }
        let current = updates
            .last_mut()
            .ok_or_else(|| err("an entry before any package-ecosystem"))?;
        if let Some(d) = trimmed.strip_prefix("directory:") {
            current.directories.push(unquote(d));
            list = None;
        } else if trimmed == "directories:" {
            list = Some("directories");
        } else if trimmed == "ignore:" {
            list = Some("ignore");
        } else if let Some(item) = trimmed.strip_prefix("- ") {
            match list {
                Some("directories") => current.directories.push(unquote(item)),
                Some("ignore") => {
                    let name = item
                        .strip_prefix("dependency-name:")
                        .ok_or_else(|| err("an ignore item must start with dependency-name"))?;
                    current.ignores.push((unquote(name), String::new()));
                }
                _ => {}
            }
        } else if let Some(types) = trimmed.strip_prefix("update-types:") {
            if let (Some("ignore"), Some(last)) = (list, current.ignores.last_mut()) {
                last.1 = types.trim().to_string();
            }
        } else if trimmed.ends_with(':') && indent <= 4 {
            list = None;
        }
    }
    let version = version.ok_or("dependabot.yml has no version")?;
    Ok((version, updates))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(byte: &str) -> String {
        byte.repeat(32)
    }

    #[test]
    fn parse_pin_accepts_the_form_and_refuses_the_rest() {
        let ok = format!("# pinned\n\nFROM alpine:3.22@sha256:{}\n", hex("ab"));
        let pin = parse_pin(&ok).expect("valid");
        assert_eq!((pin.name.as_str(), pin.tag.as_str()), ("alpine", "3.22"));
        assert_eq!(pin.hex, hex("ab"));
        for bad in [
            String::new(),
            "FROM alpine:3.22\n".to_string(),
            format!("FROM alpine@sha256:{}\n", hex("ab")),
            format!("FROM alpine:3.22@sha256:{}\n", hex("AB")),
            format!("FROM alpine:3.22@sha256:{}\n", &hex("ab")[..63]),
            format!("FROM alpine:3.22@sha512:{}\n", hex("ab")),
            format!("FROM alpine:3.22@sha256:{} AS base\n", hex("ab")),
            format!("FROM alpine:3.22@sha256:{}\nRUN true\n", hex("ab")),
            format!("RUN alpine:3.22@sha256:{}\n", hex("ab")),
        ] {
            assert!(parse_pin(&bad).is_err(), "accepted {bad:?}");
        }
    }

    #[test]
    fn lines_with_finds_copies_in_any_case() {
        let h = hex("c0");
        let text = format!("a\n{h}\nb {}\nc\n", h.to_uppercase());
        assert_eq!(lines_with(text.as_bytes(), &h), vec![2, 3]);
        assert!(lines_with(b"nothing here", &h).is_empty());
    }

    #[test]
    fn alpine_digests_finds_alpine_pins_only() {
        let h = hex("0f");
        let text = format!(
            "FROM alpine:3.21@sha256:{h}\nimage: docker.io/library/alpine@sha256:{h}\n\
             FROM node:20-alpine@sha256:{h}\nFROM alpine:3.22\n\"alpine@sha256:{h}\"\n"
        );
        let found: Vec<usize> = alpine_digests(text.as_bytes())
            .iter()
            .map(|(l, _)| *l)
            .collect();
        assert_eq!(found, vec![1, 2, 5]);
    }

    #[test]
    fn parse_dependabot_reads_directories_and_ignores() {
        let yml = "version: 2\nupdates:\n  - package-ecosystem: \"docker\"\n    directory: \"/core/src/image\"\n\
                   \x20   schedule:\n      interval: \"weekly\"\n    ignore:\n      - dependency-name: \"alpine\"\n\
                   \x20       update-types: [\"version-update:semver-minor\"]\n  - package-ecosystem: gomod\n\
                   \x20   directories:\n      - \"/bindings/go\"\n";
        let (v, u) = parse_dependabot(yml).expect("parses");
        assert_eq!(v, 2);
        assert_eq!(u.len(), 2);
        assert_eq!(u[0].ecosystem, "docker");
        assert_eq!(u[0].directories, vec!["/core/src/image"]);
        assert_eq!(u[0].ignores[0].0, "alpine");
        assert!(u[0].ignores[0].1.contains("semver-minor"));
        assert_eq!(u[1].directories, vec!["/bindings/go"]);
    }
}
