//! The build context for `Dockerfile.odek`: the working directory as a tar,
//! minus what `.dockerignore` excludes (Docker's rules: patterns relative to
//! the context root, `*` does not cross `/`, `**` does, `!` re-includes, the
//! last matching pattern wins, an excluded directory excludes its contents).
//! The Dockerfile and `.dockerignore` are always sent, as the Docker CLI does.

use std::path::{Path, PathBuf};

use globset::{GlobBuilder, GlobMatcher};

/// Parsed `.dockerignore` patterns.
pub struct DockerIgnore {
    rules: Vec<(GlobMatcher, bool)>,
}

impl DockerIgnore {
    /// Parses `.dockerignore` text. Errors name the bad pattern.
    pub fn parse(text: &str) -> Result<DockerIgnore, String> {
        let mut rules = Vec::new();
        for line in text.lines() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (negate, pat) = match line.strip_prefix('!') {
                Some(p) => (true, p.trim()),
                None => (false, line),
            };
            let pat = clean(pat);
            if pat.is_empty() {
                continue;
            }
            let pat = pat.replace("[^", "[!");
            let glob = GlobBuilder::new(&pat)
                .literal_separator(true)
                .backslash_escape(true)
                .build()
                .map_err(|e| format!(".dockerignore pattern {line:?}: {e}"))?;
            rules.push((glob.compile_matcher(), negate));
        }
        Ok(DockerIgnore { rules })
    }

    /// True when `rel` (relative, `/`-separated) or one of its parent
    /// directories is excluded.
    pub fn excluded(&self, rel: &str) -> bool {
        let mut excluded = false;
        for (glob, negate) in &self.rules {
            let mut hit = glob.is_match(rel);
            if !hit {
                // A pattern matching a parent directory matches its contents.
                let mut p = rel;
                while let Some(i) = p.rfind('/') {
                    p = &p[..i];
                    if glob.is_match(p) {
                        hit = true;
                        break;
                    }
                }
            }
            if hit {
                excluded = !negate;
            }
        }
        excluded
    }
}

/// `filepath.Clean` for patterns, without a leading `/` or `./`.
fn clean(p: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for c in p.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    parts.join("/")
}

/// Tars `dir` as a build context, honouring `dir/.dockerignore` and leaving
/// out every path in `exclude` (e.g. `$ODEK_HOME` when it lies inside).
/// Symlinks are stored as links, never followed. Errors are messages.
pub fn build_context(dir: &Path, dockerfile: &str, exclude: &[PathBuf]) -> Result<Vec<u8>, String> {
    let ignore = match std::fs::read_to_string(dir.join(".dockerignore")) {
        Ok(t) => DockerIgnore::parse(&t)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => DockerIgnore { rules: Vec::new() },
        Err(e) => return Err(format!("cannot read .dockerignore: {e}")),
    };
    let mut tar = tar::Builder::new(Vec::new());
    tar.follow_symlinks(false);
    let mut stack = vec![PathBuf::new()];
    while let Some(rel_dir) = stack.pop() {
        let abs = dir.join(&rel_dir);
        let mut entries: Vec<_> = std::fs::read_dir(&abs)
            .map_err(|e| format!("cannot read {}: {e}", abs.display()))?
            .collect::<Result<_, _>>()
            .map_err(|e| format!("cannot read {}: {e}", abs.display()))?;
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let rel = rel_dir.join(entry.file_name());
            let rel_s = rel.to_string_lossy().replace('\\', "/");
            let path = entry.path();
            if exclude.iter().any(|x| path.starts_with(x)) {
                continue;
            }
            let always = rel_s == dockerfile || rel_s == ".dockerignore";
            if !always && ignore.excluded(&rel_s) {
                continue;
            }
            let ft = entry
                .file_type()
                .map_err(|e| format!("cannot stat {}: {e}", path.display()))?;
            if ft.is_dir() {
                tar.append_dir(&rel, &path)
                    .map_err(|e| format!("cannot add {}: {e}", path.display()))?;
                stack.push(rel);
            } else if ft.is_file() || ft.is_symlink() {
                tar.append_path_with_name(&path, &rel)
                    .map_err(|e| format!("cannot add {}: {e}", path.display()))?;
            }
        }
    }
    tar.into_inner()
        .map_err(|e| format!("cannot finish the build context: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dockerignore_semantics() {
        let i = DockerIgnore::parse("# c\nnode_modules\n*.log\n!keep.log\n/secret/**\ndocs/*.md\n")
            .expect("valid");
        assert!(i.excluded("node_modules"));
        assert!(i.excluded("node_modules/a/b.js"));
        assert!(i.excluded("x.log"));
        assert!(!i.excluded("keep.log"));
        assert!(!i.excluded("sub/x.log"), "* does not cross /");
        assert!(i.excluded("secret/a/b"));
        assert!(i.excluded("docs/a.md"));
        assert!(!i.excluded("docs/sub/a.md"));
        assert!(!i.excluded("src/main.rs"));
        let i = DockerIgnore::parse("**/*.tmp\n").expect("valid");
        assert!(i.excluded("a/b/c.tmp"));
        assert!(i.excluded("c.tmp"));
    }

    #[test]
    fn context_honours_dockerignore_and_excludes() {
        let d = tempfile::tempdir().expect("tempdir");
        let root = d.path();
        std::fs::write(root.join("Dockerfile.odek"), "FROM scratch\n").expect("w");
        std::fs::write(root.join(".dockerignore"), "*.secret\nDockerfile.odek\n").expect("w");
        std::fs::write(root.join("a.txt"), "a").expect("w");
        std::fs::write(root.join("b.secret"), "b").expect("w");
        std::fs::create_dir(root.join(".odek")).expect("mkdir");
        std::fs::write(root.join(".odek/project_sandbox_approvals.json"), "{}").expect("w");
        let tar = build_context(root, "Dockerfile.odek", &[root.join(".odek")]).expect("tar");
        let mut ar = tar::Archive::new(tar.as_slice());
        let mut names: Vec<String> = ar
            .entries()
            .expect("entries")
            .map(|e| {
                e.expect("entry")
                    .path()
                    .expect("path")
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        names.sort();
        assert_eq!(names, vec![".dockerignore", "Dockerfile.odek", "a.txt"]);
    }
}
