//! `cargo xtask deps [--tests] [--src DIR]`: the module dependency graph of
//! core/src (or of DIR, another tree's core/src).
//!
//! A text scan, no compiler: a module is a top-level module of odek-core
//! (`core/src/NAME.rs` or `core/src/NAME/`, every file below it included),
//! and module A uses module B when a file of A names `crate::B` (in a `use`,
//! a `use crate::{B::…, …}` group, or a path in code), or a name lib.rs
//! re-exports from B (`crate::Client` when lib.rs has `pub use client::Client`).
//! Comments are skipped, and so are `#[cfg(test)]` modules unless `--tests`
//! is given. Prints each module's uses, then the cycles: the strongly
//! connected components of more than one module.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::{root, R};

/// Module → the modules it uses (both sorted).
pub(crate) type Graph = BTreeMap<String, BTreeSet<String>>;

pub(crate) fn deps_cmd(args: &[String]) -> R {
    const USAGE: &str = "usage: cargo xtask deps [--tests] [--src DIR]";
    let mut tests = false;
    let mut src = root().join("core/src");
    let mut args = args.iter();
    while let Some(a) = args.next() {
        match a.as_str() {
            "--tests" => tests = true,
            // Another tree's core/src, e.g. an older commit checked out with
            // `git worktree add /tmp/before REV`.
            "--src" => match args.next() {
                Some(dir) => src = PathBuf::from(dir),
                None => return Err(format!("--src needs a directory; {USAGE}")),
            },
            other => return Err(format!("unknown argument {other:?}; {USAGE}")),
        }
    }
    let graph = scan(&src, tests)?;
    // The report is this recipe's output: stdout, so it can be saved.
    print!("{}", render(&graph, tests));
    Ok(())
}

/// The lint step: core's modules (tests aside) form no cycle, so each
/// layer can be read, tested and changed without the ones above it. A
/// cycle is an error naming its modules and the command that shows the
/// edges.
pub(crate) fn no_cycles() -> R {
    let graph = scan(&root().join("core/src"), false)?;
    let found = cycles(&graph);
    if found.is_empty() {
        println!("xtask: core's module graph has no cycle");
        return Ok(());
    }
    let list: Vec<String> = found.iter().map(|c| c.join(", ")).collect();
    Err(format!(
        "core's modules form a cycle ({}): `cargo xtask deps` shows who uses whom; move the shared item down a layer",
        list.join("; ")
    ))
}

/// Reads core/src into a [`Graph`].
fn scan(src: &Path, tests: bool) -> Result<Graph, String> {
    let read = |p: &Path| std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()));
    let lib = read(&src.join("lib.rs"))?;
    let mut modules = BTreeSet::new();
    for entry in std::fs::read_dir(src).map_err(|e| format!("{}: {e}", src.display()))? {
        let entry = entry.map_err(|e| e.to_string())?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        if path.is_dir() {
            // A directory is a module when it has mod.rs or a NAME.rs beside it.
            if path.join("mod.rs").is_file() || src.join(format!("{name}.rs")).is_file() {
                modules.insert(name);
            }
        } else if let Some(stem) = name.strip_suffix(".rs") {
            if stem != "lib" {
                modules.insert(stem.to_string());
            }
        }
    }
    let reexports = reexports(&lib, &modules);
    let mut graph = Graph::new();
    for module in &modules {
        let mut files = Vec::new();
        let file = src.join(format!("{module}.rs"));
        if file.is_file() {
            files.push(file);
        }
        let dir = src.join(module);
        if dir.is_dir() {
            rs_files(&dir, &mut files)?;
        }
        let mut uses = BTreeSet::new();
        for f in files {
            let text = read(&f)?;
            for name in crate_paths(&code_lines(&text, tests)) {
                let target = if modules.contains(&name) {
                    Some(&name)
                } else {
                    reexports.get(&name)
                };
                if let Some(t) = target.filter(|t| *t != module) {
                    uses.insert(t.clone());
                }
            }
        }
        graph.insert(module.clone(), uses);
    }
    Ok(graph)
}

fn rs_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) -> R {
    for entry in std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))? {
        let path = entry.map_err(|e| e.to_string())?.path();
        if path.is_dir() {
            rs_files(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}

/// Root names lib.rs re-exports from a module: `pub use m::{A, B};` and
/// `pub use m::A;` give A → m, B → m.
fn reexports(lib: &str, modules: &BTreeSet<String>) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    let code = code_lines(lib, false);
    let mut rest = code.as_str();
    while let Some(at) = rest.find("pub use ") {
        rest = &rest[at + "pub use ".len()..];
        let stmt = rest.split(';').next().unwrap_or_default();
        let stmt = stmt.trim().trim_start_matches("crate::");
        let Some((module, items)) = stmt.split_once("::") else {
            continue;
        };
        if !modules.contains(module) {
            continue;
        }
        let items = items.trim().trim_start_matches('{').trim_end_matches('}');
        for item in items.split(',') {
            // `A as B` exports B; only the last segment of a path is the name.
            let name = item.rsplit(" as ").next().unwrap_or_default().trim();
            let name = name.rsplit("::").next().unwrap_or_default().trim();
            if !name.is_empty() && name != "*" && name != "self" {
                map.insert(name.to_string(), module.to_string());
            }
        }
    }
    map
}

/// The text of `src` without `//` comments (doc comments included) and,
/// unless `tests`, without `#[cfg(test)]` modules (brace-matched).
fn code_lines(src: &str, tests: bool) -> String {
    let mut out = String::new();
    let mut lines = src.lines().peekable();
    while let Some(line) = lines.next() {
        let trimmed = line.trim();
        if !tests && trimmed == "#[cfg(test)]" {
            let next = lines.peek().map(|l| l.trim()).unwrap_or_default();
            let is_mod = next.starts_with("mod ") || next.starts_with("pub(crate) mod ");
            if is_mod && next.ends_with('{') {
                // Skip the module: count braces (outside comments) to its end.
                let mut depth = 0i64;
                for l in lines.by_ref() {
                    let code = strip_comment(l);
                    depth += code.matches('{').count() as i64;
                    depth -= code.matches('}').count() as i64;
                    if depth <= 0 {
                        break;
                    }
                }
                continue;
            }
        }
        out.push_str(strip_comment(line));
        out.push('\n');
    }
    out
}

/// `line` up to a `//` comment (a `//` inside a string literal is rare in
/// the paths this scan looks for and only cuts the rest of that line).
fn strip_comment(line: &str) -> &str {
    line.find("//").map_or(line, |i| &line[..i])
}

/// The first segment after each `crate::` in `code`, and each item's first
/// segment in a `crate::{…}` group (nested groups' leading names too).
fn crate_paths(code: &str) -> Vec<String> {
    let ident = |s: &str| -> String {
        s.trim_start()
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut names = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + "crate::".len()..];
        // `odek_core::` or `my_crate::` are other crates' paths.
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        if let Some(group) = rest.trim_start().strip_prefix('{') {
            // The group up to its matching brace; items split at depth 0.
            let mut depth = 0;
            let mut item = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        names.push(ident(&item));
                        item.clear();
                        continue;
                    }
                    _ => {}
                }
                if depth == 0 {
                    item.push(c);
                }
            }
            names.push(ident(&item));
        } else {
            names.push(ident(rest));
        }
    }
    names.retain(|n| !n.is_empty());
    names
}

/// Strongly connected components of more than one module (Tarjan), each
/// sorted, in the order of their smallest member.
pub(crate) fn cycles(graph: &Graph) -> Vec<Vec<String>> {
    struct State<'g> {
        graph: &'g Graph,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        next: usize,
        out: Vec<Vec<String>>,
    }
    fn visit<'g>(s: &mut State<'g>, v: &'g str) {
        s.index.insert(v, s.next);
        s.low.insert(v, s.next);
        s.next += 1;
        s.stack.push(v);
        s.on_stack.insert(v);
        let graph = s.graph;
        for w in graph.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !graph.contains_key(w) {
                continue;
            }
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut scc = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                scc.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if scc.len() > 1 {
                scc.sort();
                s.out.push(scc);
            }
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out.sort();
    s.out
}

fn render(graph: &Graph, tests: bool) -> String {
    let mut out = String::new();
    let edges: usize = graph.values().map(BTreeSet::len).sum();
    out.push_str(&format!(
        "core/src module dependencies ({} modules, {edges} edges; A -> B: a file of A names crate::B; {}):\n",
        graph.len(),
        if tests {
            "test modules included"
        } else {
            "#[cfg(test)] modules skipped"
        }
    ));
    let width = graph.keys().map(String::len).max().unwrap_or(0);
    for (m, uses) in graph {
        let list: Vec<&str> = uses.iter().map(String::as_str).collect();
        out.push_str(&format!("  {m:<width$} -> {}\n", list.join(", ")));
    }
    let cycles = cycles(graph);
    out.push_str(&format!(
        "\ncycles (strongly connected components of more than one module): {}\n",
        cycles.len()
    ));
    for (i, c) in cycles.iter().enumerate() {
        out.push_str(&format!(
            "  {}: {} modules: {}\n",
            i + 1,
            c.len(),
            c.join(", ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(edges: &[(&str, &[&str])]) -> Graph {
        edges
            .iter()
            .map(|(m, uses)| (m.to_string(), uses.iter().map(|u| u.to_string()).collect()))
            .collect()
    }

    #[test]
    fn crate_paths_reads_uses_groups_and_code_paths() {
        let code = "use crate::describe::sanitize_name;\n\
                    use crate::{launch::{Sandbox, verify}, plan::Plan, error};\n\
                    let x = crate::exec::run();\n\
                    use odek_core::crate_like; other_crate::x;\n";
        assert_eq!(
            crate_paths(code),
            ["describe", "launch", "plan", "error", "exec"]
        );
    }

    #[test]
    fn comments_and_test_modules_are_skipped() {
        let src = "use crate::a::X; // crate::b\n\
                   /// [`crate::c`]\n\
                   #[cfg(test)]\n\
                   mod tests {\n    use crate::d;\n    fn f() { crate::e::g(); }\n}\n\
                   fn after() { crate::f::h(); }\n";
        assert_eq!(crate_paths(&code_lines(src, false)), ["a", "f"]);
        assert_eq!(crate_paths(&code_lines(src, true)), ["a", "d", "e", "f"]);
    }

    #[test]
    fn reexports_map_root_names_to_modules() {
        let modules: BTreeSet<String> = ["error", "resolve"].map(String::from).into();
        let lib =
            "pub use error::{Error, Result as R};\npub use resolve::Odek;\npub use other::Z;\n";
        let map = reexports(lib, &modules);
        assert_eq!(map.get("Error").map(String::as_str), Some("error"));
        assert_eq!(map.get("R").map(String::as_str), Some("error"));
        assert_eq!(map.get("Odek").map(String::as_str), Some("resolve"));
        assert_eq!(map.get("Z"), None);
    }

    #[test]
    fn cycles_are_the_components_of_more_than_one_module() {
        let g = graph(&[
            ("a", &["b"]),
            ("b", &["c", "leaf"]),
            ("c", &["a"]),
            ("d", &["e"]),
            ("e", &["d", "a"]),
            ("leaf", &[]),
            ("self", &["self"]),
        ]);
        assert_eq!(cycles(&g), [vec!["a", "b", "c"], vec!["d", "e"]]);
        assert!(cycles(&graph(&[("a", &["b"]), ("b", &[])])).is_empty());
    }
}
