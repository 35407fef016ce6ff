//! The cited-test check of `cargo xtask lint`: every test a Markdown document
//! names as proof exists.
//!
//! What counts as a citation, in every tracked `*.md` file outside fenced
//! code blocks:
//!
//! - `FILE::NAME`, where FILE ends in `.rs`, `.py` or `.go`; with more
//!   segments (`FILE::tests::NAME`, `FILE::Class::NAME`) the last one is the
//!   name;
//! - `::NAME` alone continues the last FILE named before it in the same table
//!   row or paragraph (`core/fake_launch.rs::a`, `::b`);
//! - a Go or pytest test name alone in backticks (`` `TestFakeNarrow` ``,
//!   `` `test_exec_streams` ``), looked up in the last `_test.go` or
//!   `test_*.py` file named before it there, else in every such file of the
//!   repository;
//! - a name ending in `*` (`test_file_tools_*`) cites every test with that
//!   prefix, and at least one must exist.
//!
//! FILE is a path from the repository's root or a short path. A short path
//! names the one repository file with that file name whose directories
//! include the cited directories in the same order: `core/fake_resolve.rs`
//! is `core/tests/fake_resolve.rs`, `e2e/hardening.rs` is
//! `tests/e2e/tests/hardening.rs`, `test_fake.py` is
//! `bindings/python/tests/test_fake.py`. No such file, or more than one, is
//! an error. The name must be defined in that file: `fn NAME` in Rust,
//! `def NAME` in Python, `func NAME` in Go.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::checks::repo_files;
use crate::{root, R};

/// One test a document cites.
#[derive(Debug, PartialEq)]
pub(crate) struct Cite {
    /// 1-based line in the document.
    pub(crate) line: usize,
    /// The file as cited; `None` for a Go or pytest test name cited without
    /// a file.
    pub(crate) file: Option<String>,
    /// The test's name (a trailing `*` makes it a prefix).
    pub(crate) name: String,
}

const SOURCE_EXTS: &[&str] = &[".rs", ".py", ".go"];

fn is_path_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '/' | ':' | '*' | '-')
}

fn is_source(token: &str) -> bool {
    SOURCE_EXTS
        .iter()
        .any(|e| token.len() > e.len() && token.ends_with(e))
}

fn is_go_test_name(token: &str) -> bool {
    token.strip_prefix("Test").is_some_and(|rest| {
        rest.starts_with(|c: char| c.is_ascii_uppercase())
            && rest.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

fn is_py_test_name(token: &str) -> bool {
    token.len() > "test_".len() && token.starts_with("test_") && is_name(token)
}

fn is_go_test_file(path: &str) -> bool {
    path.ends_with("_test.go")
}

fn is_py_test_file(path: &str) -> bool {
    let base = path.rsplit('/').next().unwrap_or(path);
    base.starts_with("test_") && base.ends_with(".py")
}

/// A cited name: identifier characters and at most a trailing `*`.
fn is_name(name: &str) -> bool {
    let ident = name.strip_suffix('*').unwrap_or(name);
    !ident.is_empty()
        && ident.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !ident.starts_with(|c: char| c.is_ascii_digit())
}

/// The test citations in a Markdown text.
pub(crate) fn cites(text: &str) -> Vec<Cite> {
    let mut found = Vec::new();
    let mut in_fence = false;
    // The last source file, Go test file and pytest file named in this table
    // row or paragraph.
    let mut last_file: Option<String> = None;
    let mut last_go: Option<String> = None;
    let mut last_py: Option<String> = None;
    for (n, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            continue;
        }
        if trimmed.is_empty() || trimmed.starts_with('|') {
            last_file = None;
            last_go = None;
            last_py = None;
        }
        let chars: Vec<(usize, char)> = line.char_indices().collect();
        let mut i = 0;
        while i < chars.len() {
            if !is_path_char(chars[i].1) {
                i += 1;
                continue;
            }
            let start = i;
            while i < chars.len() && is_path_char(chars[i].1) {
                i += 1;
            }
            let from = chars[start].0;
            let to = chars.get(i).map_or(line.len(), |c| c.0);
            let backticked =
                start > 0 && chars[start - 1].1 == '`' && chars.get(i).map(|c| c.1) == Some('`');
            // Sentence punctuation is not part of the token.
            let token = line[from..to].trim_end_matches(['.', ':', '-']);
            let (head, rest) = token.split_once("::").unwrap_or((token, ""));
            if is_source(head) {
                last_file = Some(head.to_string());
                if is_go_test_file(head) {
                    last_go = Some(head.to_string());
                }
                if is_py_test_file(head) {
                    last_py = Some(head.to_string());
                }
            }
            let cite = |file: Option<String>, name: &str| Cite {
                line: n + 1,
                file,
                name: name.to_string(),
            };
            if token.contains("::") {
                // `FILE::NAME`, or `::NAME` continuing the last FILE; any
                // other `a::b` is a Rust path (`Client::exec_io`).
                let name = rest.rsplit("::").next().unwrap_or(rest);
                if (head.is_empty() || is_source(head)) && is_name(name) {
                    // A continuation with no file before it cites the
                    // empty path, which resolves to nothing.
                    let file = if head.is_empty() {
                        last_file.clone().unwrap_or_default()
                    } else {
                        head.to_string()
                    };
                    found.push(cite(Some(file), name));
                }
            } else if backticked && is_go_test_name(token) {
                found.push(cite(last_go.clone(), token));
            } else if backticked && is_py_test_name(token) {
                found.push(cite(last_py.clone(), token));
            }
        }
    }
    found
}

/// The repository file a citation's path names (see the module's doc).
pub(crate) fn resolve<'a>(cited: &str, files: &'a [PathBuf]) -> Result<&'a Path, String> {
    if cited.is_empty() {
        return Err("`::NAME` with no file named before it in its row or paragraph".into());
    }
    if let Some(exact) = files.iter().find(|f| f.as_path() == Path::new(cited)) {
        return Ok(exact);
    }
    let mut parts: Vec<&str> = cited.split('/').filter(|p| !p.is_empty()).collect();
    let Some(base) = parts.pop() else {
        return Err(format!("`{cited}` names no file"));
    };
    let matches: Vec<&PathBuf> = files
        .iter()
        .filter(|f| {
            if f.file_name().and_then(|n| n.to_str()) != Some(base) {
                return false;
            }
            let dirs = f
                .parent()
                .into_iter()
                .flat_map(|p| p.components())
                .filter_map(|c| c.as_os_str().to_str());
            let mut wanted = parts.iter().peekable();
            for dir in dirs {
                if wanted.peek().is_some_and(|w| **w == dir) {
                    wanted.next();
                }
            }
            wanted.peek().is_none()
        })
        .collect();
    match matches.as_slice() {
        [one] => Ok(one),
        [] => Err(format!("no repository file matches `{cited}`")),
        many => Err(format!(
            "`{cited}` is ambiguous: {}",
            many.iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// The keyword that defines a test in a file of this name.
fn keyword(file: &Path) -> &'static str {
    match file.extension().and_then(|e| e.to_str()) {
        Some("py") => "def",
        Some("go") => "func",
        _ => "fn",
    }
}

/// Whether `source` defines `name` with `keyword` (`fn name(`, `def name(`,
/// `func name(`); a name ending in `*` matches any name with that prefix.
pub(crate) fn defines(source: &str, keyword: &str, name: &str) -> bool {
    let (ident, prefix) = match name.strip_suffix('*') {
        Some(p) => (p, true),
        None => (name, false),
    };
    let needle = format!("{keyword} {ident}");
    let bytes = source.as_bytes();
    let mut from = 0;
    while let Some(at) = source[from..].find(&needle).map(|i| i + from) {
        from = at + 1;
        if at > 0 && !bytes[at - 1].is_ascii_whitespace() {
            continue;
        }
        let mut end = at + needle.len();
        if prefix {
            while bytes
                .get(end)
                .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_')
            {
                end += 1;
            }
        }
        if matches!(bytes.get(end), Some(b'(' | b'<' | b'[')) {
            return true;
        }
    }
    false
}

/// Fails when a Markdown document cites a test that does not exist, listing
/// each such citation with its document and line.
pub(crate) fn check() -> R {
    let files = repo_files()?;
    let mut sources: HashMap<PathBuf, String> = HashMap::new();
    let mut read = |path: &Path| -> String {
        sources
            .entry(path.to_path_buf())
            .or_insert_with(|| std::fs::read_to_string(root().join(path)).unwrap_or_default())
            .clone()
    };
    let mut bad = Vec::new();
    let mut count = 0;
    for doc in files
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "md"))
    {
        let Ok(text) = std::fs::read_to_string(root().join(doc)) else {
            continue;
        };
        for cite in cites(&text) {
            count += 1;
            let at = format!("{}:{}", doc.display(), cite.line);
            let Some(cited) = &cite.file else {
                let (kind, kw): (fn(&str) -> bool, _) = if is_go_test_name(&cite.name) {
                    (is_go_test_file, "func")
                } else {
                    (is_py_test_file, "def")
                };
                let found = files
                    .iter()
                    .filter(|f| f.to_str().is_some_and(kind))
                    .any(|f| defines(&read(f), kw, &cite.name));
                if !found {
                    bad.push(format!(
                        "{at}: `{}`: no `{kw} {}` in any test file named like that",
                        cite.name, cite.name
                    ));
                }
                continue;
            };
            let shown = format!("`{cited}::{}`", cite.name);
            match resolve(cited, &files) {
                Err(why) => bad.push(format!("{at}: {shown}: {why}")),
                Ok(file) => {
                    let kw = keyword(file);
                    if !defines(&read(file), kw, &cite.name) {
                        bad.push(format!(
                            "{at}: {shown}: no `{kw} {}` in {}",
                            cite.name,
                            file.display()
                        ));
                    }
                }
            }
        }
    }
    if bad.is_empty() {
        eprintln!("xtask: the {count} tests the documents cite exist");
        return Ok(());
    }
    Err(format!(
        "{} cited test(s) do not exist; cite the test that proves the claim, or say there is none:\n  {}",
        bad.len(),
        bad.join("\n  ")
    ))
}

#[cfg(test)]
mod tests {
    use super::{cites, defines, resolve, Cite};
    use std::path::PathBuf;

    fn cite(line: usize, file: Option<&str>, name: &str) -> Cite {
        Cite {
            line,
            file: file.map(str::to_string),
            name: name.to_string(),
        }
    }

    #[test]
    fn each_form_of_citation_is_found() {
        let doc = "\
| a | `core/fake_launch.rs::one`, `::two`; `e2e/x.rs::three` (`::four`) |
| b | `core/src/narrow.rs::tests::five`. `test_fake.py::test_six`, `t.py::Class::test_seven` |
| c | `bindings/go/fake_test.go` (`TestEight`), `tests/mcp/test_mcp.py` (`test_nine_*`) |
| d | `TestTen`; `Client::exec_io`, `api::ExecRequest::into_core_as`, `::eleven` |
| e | `bindings/python/tests/test_x.py` (`test_fourteen`), `test_fifteen`; `odek/_stream.py` (`test_sixteen`) |

A paragraph naming `ffi/tests/x.rs::twelve` and, on its next line,
`::thirteen`.

```rust
let x = core::fake::not_a_cite();
```
";
        assert_eq!(
            cites(doc),
            vec![
                cite(1, Some("core/fake_launch.rs"), "one"),
                cite(1, Some("core/fake_launch.rs"), "two"),
                cite(1, Some("e2e/x.rs"), "three"),
                cite(1, Some("e2e/x.rs"), "four"),
                cite(2, Some("core/src/narrow.rs"), "five"),
                cite(2, Some("test_fake.py"), "test_six"),
                cite(2, Some("t.py"), "test_seven"),
                cite(3, Some("bindings/go/fake_test.go"), "TestEight"),
                cite(3, Some("tests/mcp/test_mcp.py"), "test_nine_*"),
                cite(4, None, "TestTen"),
                // A continuation in a row that named no file.
                cite(4, Some(""), "eleven"),
                cite(5, Some("bindings/python/tests/test_x.py"), "test_fourteen"),
                cite(5, Some("bindings/python/tests/test_x.py"), "test_fifteen"),
                // `odek/_stream.py` holds no tests: the last test file stays.
                cite(5, Some("bindings/python/tests/test_x.py"), "test_sixteen"),
                cite(7, Some("ffi/tests/x.rs"), "twelve"),
                cite(8, Some("ffi/tests/x.rs"), "thirteen"),
            ]
        );
    }

    #[test]
    fn short_paths_resolve_to_the_one_file_holding_their_directories_in_order() {
        let files: Vec<PathBuf> = [
            "core/tests/fake_resolve.rs",
            "tests/e2e/tests/hardening.rs",
            "core/src/hardening.rs",
            "bindings/python/tests/test_fake.py",
            "a/x.rs",
            "b/x.rs",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        let ok = |c: &str| resolve(c, &files).map(|p| p.display().to_string());
        assert_eq!(
            ok("core/fake_resolve.rs").expect("resolves"),
            "core/tests/fake_resolve.rs"
        );
        assert_eq!(
            ok("core/tests/fake_resolve.rs").expect("resolves"),
            "core/tests/fake_resolve.rs"
        );
        assert_eq!(
            ok("e2e/hardening.rs").expect("resolves"),
            "tests/e2e/tests/hardening.rs"
        );
        assert_eq!(
            ok("core/hardening.rs").expect("resolves"),
            "core/src/hardening.rs"
        );
        assert_eq!(
            ok("test_fake.py").expect("resolves"),
            "bindings/python/tests/test_fake.py"
        );
        assert!(ok("hardening.rs")
            .expect_err("refused")
            .contains("ambiguous"));
        assert!(ok("x.rs").expect_err("refused").contains("ambiguous"));
        assert!(ok("mcp/fake_resolve.rs")
            .expect_err("refused")
            .contains("no repository file"));
        assert!(ok("tests/core/fake_resolve.rs").is_err(), "order matters");
        assert!(ok("").is_err());
    }

    #[test]
    fn a_name_is_defined_only_by_its_keyword_and_a_call() {
        let rs = "#[test]\nfn a_test() {}\nasync fn b_test<T>() {}\nlet fn_d = d_test();";
        assert!(defines(rs, "fn", "a_test"));
        assert!(defines(rs, "fn", "b_test"));
        assert!(!defines(rs, "fn", "a_tes"), "a prefix is not the name");
        assert!(defines(rs, "fn", "a_tes*"), "unless it says so");
        assert!(!defines(rs, "fn", "d_test"));
        let py = "def test_one(x):\n    pass\nasync def test_two():\n";
        assert!(defines(py, "def", "test_one"));
        assert!(defines(py, "def", "test_two"));
        assert!(!defines(py, "def", "test_three"));
        let go = "func TestFakeNarrow(t *testing.T) {}\n";
        assert!(defines(go, "func", "TestFakeNarrow"));
        assert!(!defines(go, "func", "TestFake"));
    }
}
