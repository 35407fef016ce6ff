//! Attacks on the copy-back of a copied workspace (`workspace_copy::unpack`):
//! the archive is the sandbox's, so a hostile agent writes every byte of
//! it. Each test states what the copy-back must never do; each fails on the
//! code it was written against (a proof of the finding it names).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use odek_core::workspace_copy::{pack, unpack};

/// An archive entry written as the bytes say.
fn raw(
    b: &mut tar::Builder<Vec<u8>>,
    kind: tar::EntryType,
    path: &str,
    link: &str,
    mode: u32,
    data: &[u8],
) {
    let mut h = tar::Header::new_old();
    h.as_old_mut().name[..path.len()].copy_from_slice(path.as_bytes());
    h.as_old_mut().linkname[..link.len()].copy_from_slice(link.as_bytes());
    h.set_entry_type(kind);
    h.set_mode(mode);
    h.set_size(data.len() as u64);
    h.set_cksum();
    b.append(&h, data).expect("append");
}

fn mkdir_private(p: &Path) {
    std::fs::create_dir(p).expect("mkdir");
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o700)).expect("chmod");
}

/// `$ODEK_HOME` directly in the working directory (`DIR/.odek`) is allowed
/// (config::merge::odek_home_depth) and left out of the upload, but the
/// copy-back writes the sandbox's `.odek/…` into it: a new
/// `$ODEK_HOME/config.json` (the operator's own, fully trusted user config)
/// made by the agent turns the next run's sandbox off, or mounts anything.
/// The manifest does not stop it: the file is new on both sides.
#[test]
fn copy_back_never_writes_into_odek_home_inside_the_workdir() {
    let d = tempfile::tempdir().expect("tempdir");
    let w = d.path().canonicalize().expect("canonical").join("proj");
    std::fs::create_dir(&w).expect("mkdir");
    std::fs::write(w.join("main.rs"), b"fn main() {}").expect("write");
    let home = w.join(".odek");
    mkdir_private(&home);
    std::fs::write(home.join("launch.key"), [7u8; 32]).expect("key");
    std::fs::set_permissions(
        home.join("launch.key"),
        std::fs::Permissions::from_mode(0o600),
    )
    .expect("chmod");

    // Launch: `.odek` stays behind.
    let packed = pack(&w, Some(&home), 1000, 1000).expect("pack");
    assert!(packed.skipped.iter().any(|s| s.path == ".odek"));

    // The agent, in the sandbox: `mkdir /workspace/.odek` and a config.
    let mut b = tar::Builder::new(Vec::new());
    use tar::EntryType as T;
    raw(&mut b, T::Directory, "workspace/", "", 0o755, b"");
    raw(&mut b, T::Directory, "workspace/.odek", "", 0o700, b"");
    raw(
        &mut b,
        T::Regular,
        "workspace/.odek/config.json",
        "",
        0o600,
        br#"{"sandbox": false}"#,
    );
    raw(
        &mut b,
        T::Regular,
        "workspace/.odek/project_sandbox_approvals.json",
        "",
        0o600,
        b"{}",
    );
    let got = unpack(
        &b.into_inner().expect("tar"),
        &w,
        Some(&packed.manifest),
        Some(&home),
    )
    .expect("unpack");

    // The operator's next run in that directory.
    let mut env = std::collections::BTreeMap::new();
    env.insert("ODEK_HOME".to_string(), home.to_string_lossy().into_owned());
    env.insert("HOME".to_string(), d.path().to_string_lossy().into_owned());
    let inputs = odek_core::config::ConfigInputs {
        workdir: w.clone(),
        env,
        flags: Default::default(),
        flag_names: Default::default(),
        read_user_config: true,
        read_project_config: true,
    };
    let mode = odek_core::config::load(&inputs).map(|s| format!("{:?}", s.mode.value));
    assert!(
        !home.join("config.json").exists() && !got.written.iter().any(|p| p.starts_with(".odek")),
        "the sandbox wrote into $ODEK_HOME: written {:?}; the next run's sandbox mode is {mode:?}",
        got.written
    );
}

/// The copy-back gives a file the archive's permission bits as they are
/// (fchmod, no umask): the agent makes any file of the operator's
/// workspace (a Makefile, a script, `.git/hooks/*`) writable by every
/// local user, who can then put their own commands in it.
#[test]
fn copy_back_never_makes_a_file_group_or_world_writable() {
    let d = tempfile::tempdir().expect("tempdir");
    let w = d.path();
    std::fs::write(w.join("Makefile"), b"all:\n\techo hi\n").expect("write");
    std::fs::set_permissions(w.join("Makefile"), std::fs::Permissions::from_mode(0o644))
        .expect("chmod");
    let packed = pack(w, None, 1000, 1000).expect("pack");
    let mut b = tar::Builder::new(Vec::new());
    use tar::EntryType as T;
    raw(
        &mut b,
        T::Regular,
        "workspace/Makefile",
        "",
        0o666,
        b"all:\n\techo hi \n",
    );
    raw(
        &mut b,
        T::Regular,
        "workspace/run.sh",
        "",
        0o777,
        b"#!/bin/sh\n",
    );
    let got = unpack(
        &b.into_inner().expect("tar"),
        w,
        Some(&packed.manifest),
        None,
    )
    .expect("unpack");
    assert_eq!(got.written, ["Makefile", "run.sh"]);
    let mode = |n: &str| {
        std::fs::metadata(w.join(n))
            .expect("meta")
            .permissions()
            .mode()
            & 0o7777
    };
    assert!(
        mode("Makefile") & 0o022 == 0 && mode("run.sh") & 0o022 == 0,
        "group/other-writable after copy-back: Makefile {:04o}, run.sh {:04o}",
        mode("Makefile"),
        mode("run.sh")
    );
}

/// "Symlinks come back only when they stay inside the workspace": the check
/// is lexical, so a chain of two symlinks that each look inside
/// (`d/up` → `..`, `esc` → `d/up/..`) leaves a symlink in the operator's
/// working directory that resolves to its parent directory.
#[test]
fn copy_back_symlinks_never_resolve_outside_the_workspace() {
    let d = tempfile::tempdir().expect("tempdir");
    let base = d.path().canonicalize().expect("canonical");
    let w = base.join("proj");
    std::fs::create_dir(&w).expect("mkdir");
    std::fs::write(base.join("secret"), b"outside").expect("write");
    let mut b = tar::Builder::new(Vec::new());
    use tar::EntryType as T;
    raw(&mut b, T::Directory, "workspace/d", "", 0o755, b"");
    raw(&mut b, T::Symlink, "workspace/d/up", "..", 0o777, b"");
    raw(&mut b, T::Symlink, "workspace/esc", "d/up/..", 0o777, b"");
    let got = unpack(&b.into_inner().expect("tar"), &w, None, None).expect("unpack");
    let resolved = std::fs::canonicalize(w.join("esc")).ok();
    assert!(
        resolved.as_ref().is_none_or(|r| r.starts_with(&w)),
        "written {:?}: proj/esc resolves to {resolved:?}, outside; proj/esc/secret reads {:?}",
        got.written,
        std::fs::read_to_string(w.join("esc/secret")).ok()
    );
}

/// The C ABI's `docker_cert_path` (Python: `docker_cert_path=""` is sent
/// as is) is used as given: an empty or relative directory is the embedding
/// process's current directory — often a project checkout, whose files
/// are the operator's and pass the ownership rule. A repository that ships
/// `ca.pem`, `cert.pem`, `key.pem` chooses which daemon odek trusts.
#[test]
fn docker_cert_path_is_never_relative_to_the_current_directory() {
    const CERT: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
    const KEY: &str = "-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----\n";
    let d = tempfile::tempdir().expect("tempdir");
    // The malicious checkout, the embedding program's current directory.
    for (f, text) in [("ca.pem", CERT), ("cert.pem", CERT), ("key.pem", KEY)] {
        std::fs::write(d.path().join(f), text).expect("write");
        std::fs::set_permissions(d.path().join(f), std::fs::Permissions::from_mode(0o644))
            .expect("chmod");
    }
    std::env::set_current_dir(d.path()).expect("cd");
    for dir in ["", "."] {
        let got = odek_core::engine::Endpoint::named_tls(
            "tcp://10.1.2.3:2376",
            "docker_host",
            Path::new(dir),
            "docker_cert_path",
        );
        assert!(
            got.is_err(),
            "docker_cert_path {dir:?} accepted: the CA trusted is {:?} (the current directory's)",
            got.ok().and_then(|e| e.tls).map(|t| t.ca)
        );
    }
}
