//! Attacks on the copied workspace of a remote engine (SPEC §6.1
//! "workspace", docs/SANDBOXING.md "A copied workspace"): what `pack`
//! uploads to an engine on another machine and what `unpack` writes back
//! from it. Each test states what must never happen; each fails on the code
//! it was written against (a proof of the finding it names).

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use odek_core::engine::Endpoint;
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

/// Every path in a tar with the entry's bytes.
fn entries(archive: &[u8]) -> Vec<(String, Vec<u8>)> {
    use std::io::Read;
    let mut ar = tar::Archive::new(archive);
    let mut out = Vec::new();
    for e in ar.entries().expect("entries") {
        let mut e = e.expect("entry");
        let p = String::from_utf8_lossy(&e.path_bytes()).into_owned();
        let mut bytes = Vec::new();
        e.read_to_end(&mut bytes).expect("read");
        out.push((p, bytes));
    }
    out
}

/// `$ODEK_HOME` may be the working directory itself: config::load accepts
/// it (`odek_home_depth` refuses only a home two or more levels inside;
/// `strip_prefix` gives an empty path, 0 components), resolve's mask is
/// then `/workspace` itself for a bind mount, but the copied workspace has
/// no such guard: `pack` compares the excluded path with each entry's
/// (never the working directory itself), so the whole of `$ODEK_HOME` —
/// `launch.key` (the MAC key of every label), `config.json`, approvals —
/// is uploaded to the remote engine; and `unpack`'s `home_inside` returns
/// `None` for an empty relative path, so the sandbox's `config.json` is
/// written as the operator's user config (`"sandbox": false` for the next
/// run).
#[test]
fn odek_home_that_is_the_workdir_is_neither_uploaded_nor_written_back() {
    let d = tempfile::tempdir().expect("tempdir");
    let w = d.path().canonicalize().expect("canonical").join("proj");
    std::fs::create_dir(&w).expect("mkdir");
    std::fs::set_permissions(&w, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    std::fs::write(w.join("main.rs"), b"fn main() {}").expect("write");
    let key = [0x5a_u8; 32];
    std::fs::write(w.join("launch.key"), key).expect("key");
    std::fs::set_permissions(w.join("launch.key"), std::fs::Permissions::from_mode(0o600))
        .expect("chmod");

    // The operator's run with ODEK_HOME set to the project directory.
    let mut env = std::collections::BTreeMap::new();
    env.insert("ODEK_HOME".to_string(), w.to_string_lossy().into_owned());
    env.insert("HOME".to_string(), d.path().to_string_lossy().into_owned());
    env.insert("ODEK_SANDBOX_WORKSPACE".to_string(), "copy".to_string());
    let inputs = odek_core::config::ConfigInputs {
        workdir: w.clone(),
        env,
        flags: Default::default(),
        flag_names: Default::default(),
        read_user_config: true,
        read_project_config: true,
    };
    let loaded = odek_core::config::load(&inputs);
    if loaded.is_err() {
        // Refusing the combination outright is a fix too.
        return;
    }
    let home = loaded.expect("loaded").odek_home.clone();
    assert_eq!(
        home, w,
        "the test's premise: $ODEK_HOME is the working directory"
    );

    // Launch: what travels to the remote engine.
    let packed = match pack(&w, Some(&home), 1000, 1000) {
        Ok(p) => p,
        // Refusing to copy such a working directory is a fix too.
        Err(_) => return,
    };
    let uploaded: Vec<String> = entries(&packed.archive)
        .into_iter()
        .filter(|(_, bytes)| bytes.as_slice() == key)
        .map(|(p, _)| p)
        .collect();

    // Copy-back: the engine (or the agent) hands back a user config.
    let mut b = tar::Builder::new(Vec::new());
    use tar::EntryType as T;
    raw(&mut b, T::Directory, "workspace/", "", 0o755, b"");
    raw(
        &mut b,
        T::Regular,
        "workspace/config.json",
        "",
        0o600,
        br#"{"sandbox": false}"#,
    );
    let got = unpack(
        &b.into_inner().expect("tar"),
        &w,
        Some(&packed.manifest),
        Some(&home),
    )
    .expect("unpack");
    assert!(
        uploaded.is_empty() && !w.join("config.json").exists(),
        "$ODEK_HOME is the working directory: its launch key went to the engine as {uploaded:?}; the copy-back wrote {:?} into it",
        got.written
    );
}

/// `pack` walks the working directory by path: it lstat()s an entry, sees
/// a directory, and later `read_dir`s and opens (`O_NOFOLLOW` on the last
/// component only) paths through it. A directory swapped for a symlink in
/// between (by anything that writes the working directory while odek
/// packs: a bind-mounted sandbox of the same project, a parent's agent, a
/// build) is followed, and the files it leads to — `~/.ssh`, `~/.aws`,
/// another project — are uploaded to the remote engine as the workspace's.
/// The race is run for up to 10 s; on the code this was written against
/// it is won within a few hundred packs.
#[test]
fn pack_never_follows_a_directory_swapped_for_a_symlink() {
    let d = tempfile::tempdir().expect("tempdir");
    let base = d.path().canonicalize().expect("canonical");
    let w = base.join("proj");
    let outside = base.join("secrets");
    std::fs::create_dir_all(w.join("sub")).expect("mkdir");
    std::fs::create_dir(&outside).expect("mkdir");
    // Many entries in the directory widen the window between its lstat
    // and the reads through it.
    for i in 0..64 {
        std::fs::write(w.join("sub").join(format!("f{i:02}")), b"benign").expect("write");
        std::fs::write(outside.join(format!("f{i:02}")), b"SECRET-OUTSIDE").expect("write");
    }
    std::os::unix::fs::symlink(&outside, w.join("swap")).expect("symlink");

    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (w, stop) = (w.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let _ = rustix::fs::renameat_with(
                    rustix::fs::CWD,
                    w.join("sub"),
                    rustix::fs::CWD,
                    w.join("swap"),
                    rustix::fs::RenameFlags::EXCHANGE,
                );
            }
        })
    };
    let until = Instant::now() + Duration::from_secs(10);
    let mut leaked = None;
    let mut packs = 0;
    while Instant::now() < until && leaked.is_none() {
        packs += 1;
        let Ok(packed) = pack(&w, None, 1000, 1000) else {
            continue;
        };
        leaked = entries(&packed.archive)
            .into_iter()
            .find(|(_, bytes)| bytes.as_slice() == b"SECRET-OUTSIDE")
            .map(|(p, _)| p);
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().expect("swapper");
    assert!(
        leaked.is_none(),
        "pack {packs} followed a directory swapped for a symlink out of the working directory and uploaded {leaked:?} (a file of {})",
        Path::new(&outside).display()
    );
}

const PEM_CERT: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
const PEM_KEY: &str = "-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----\n";

fn chmod(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// `meta.json` of Docker context `name` in the Docker config directory
/// `cfg`, with `host`, and no TLS material.
fn context_meta(cfg: &Path, name: &str, host: &str) -> std::path::PathBuf {
    use sha2::Digest;
    let id = hex::encode(sha2::Sha256::digest(name.as_bytes()));
    let meta = cfg.join("contexts/meta").join(id);
    std::fs::create_dir_all(&meta).expect("mkdir");
    let file = meta.join("meta.json");
    std::fs::write(
        &file,
        format!(r#"{{"Name":"{name}","Endpoints":{{"docker":{{"Host":"{host}","SkipTLSVerify":false}}}}}}"#),
    )
    .expect("write");
    file
}

/// The TLS files are held to the ownership rule (SPEC §7.3: "whoever can
/// write `ca.pem` chooses which daemon odek trusts"), but the context's
/// `meta.json`, which chooses the daemon itself, is read with no check at
/// all: whoever can write it (mode 0666 here; a shared `DOCKER_CONFIG`, a
/// `contexts/meta` others can write) points odek at their own daemon —
/// `tcp://` with no TLS directory is plain TCP with a warning only, and a
/// copied workspace is then uploaded to them. The same holds for
/// `config.json`'s `currentContext`.
#[test]
fn a_docker_context_others_can_write_is_not_trusted() {
    let d = tempfile::tempdir().expect("tempdir");
    let cfg = d.path().join("docker");
    // Loopback and never connected to: resolve only reads files.
    let meta = context_meta(&cfg, "work", "tcp://127.0.0.1:2375");
    let env = odek_core::engine::EndpointEnv {
        docker_config: Some(cfg.clone()),
        docker_context: Some("work".into()),
        ..Default::default()
    };
    // The premise: the operator's own 0644 meta.json is used.
    chmod(&meta, 0o644);
    Endpoint::resolve(&env).expect("the operator's own context is used");
    // Writable by others.
    chmod(&meta, 0o666);
    let got = Endpoint::resolve(&env).map(|e| e.to_string());
    assert!(
        got.is_err(),
        "a Docker context whose meta.json others can write chose the engine: {got:?}"
    );
}

/// Each TLS file is checked (owner, mode), not the directory that holds
/// it: in a `DOCKER_CERT_PATH` others can write, another user replaces the
/// operator's `ca.pem` with a symlink to a root-owned file of their choice
/// — the system CA bundle here, which passes the owner rule — and odek
/// then trusts every public CA for the daemon, instead of the daemon's own
/// CA alone (SPEC §6.2.1). The socket rule already passes over a socket in
/// a directory others can write; the certificate directory has no such
/// rule.
#[test]
fn tls_material_in_a_directory_others_can_write_is_not_trusted() {
    let bundle = Path::new("/etc/ssl/certs/ca-certificates.crt");
    let d = tempfile::tempdir().expect("tempdir");
    let certs = d.path().join("certs");
    std::fs::create_dir(&certs).expect("mkdir");
    for (f, text, mode) in [
        ("ca.pem", PEM_CERT, 0o644),
        ("cert.pem", PEM_CERT, 0o644),
        ("key.pem", PEM_KEY, 0o600),
    ] {
        std::fs::write(certs.join(f), text).expect("write");
        chmod(&certs.join(f), mode);
    }
    let env = odek_core::engine::EndpointEnv {
        docker_host: Some("tcp://127.0.0.1:2376".into()),
        docker_tls_verify: true,
        docker_cert_path: Some(certs.clone()),
        home: Some(d.path().to_path_buf()),
        ..Default::default()
    };
    // The premise: the operator's own directory is used.
    Endpoint::resolve(&env).expect("the operator's own certificates are used");
    // Others can write the directory; one of them swaps ca.pem.
    chmod(&certs, 0o777);
    if bundle.exists() {
        std::fs::remove_file(certs.join("ca.pem")).expect("rm");
        std::os::unix::fs::symlink(bundle, certs.join("ca.pem")).expect("symlink");
    }
    let got = Endpoint::resolve(&env).map(|e| {
        let ca = e.tls.as_ref().map(|t| t.ca.clone());
        (e.to_string(), ca)
    });
    assert!(
        got.is_err(),
        "TLS material in a directory others can write was trusted: {got:?}"
    );
}

/// The other half of `$ODEK_HOME` and the working directory: a working
/// directory inside `$ODEK_HOME` (here its `sandboxes/`, where each
/// sandbox's records live: the copy-back's manifest, the record of the
/// files host tools run, the audit log) is accepted by config::load —
/// `odek_home_depth` only looks at a home inside the working directory and
/// `validate_workdir` knows nothing of `$ODEK_HOME` (it refuses a hidden
/// directory of a login home, so this is a `$ODEK_HOME` outside the
/// default `~/.odek`). A copied workspace uploads those records and its
/// copy-back rewrites them, as a bind mount would let the agent do live:
/// another sandbox's manifest (its conflict check) or baseline (what
/// `odek sandbox down` reports as changed) becomes the agent's.
#[test]
fn a_workdir_inside_odek_home_is_refused() {
    let d = tempfile::tempdir().expect("tempdir");
    let base = d.path().canonicalize().expect("canonical");
    let home = base.join("odek-state");
    let w = home.join("sandboxes");
    let other = w.join("odek-other");
    std::fs::create_dir_all(&other).expect("mkdir");
    for p in [&home, &w, &other] {
        chmod(p, 0o700);
    }
    std::fs::write(home.join("launch.key"), [0x5a_u8; 32]).expect("key");
    chmod(&home.join("launch.key"), 0o600);
    std::fs::write(other.join("workspace-copy.json"), br#"{"a.rs":"f:00"}"#).expect("write");
    chmod(&other.join("workspace-copy.json"), 0o600);

    let mut env = std::collections::BTreeMap::new();
    env.insert("ODEK_HOME".to_string(), home.to_string_lossy().into_owned());
    env.insert("HOME".to_string(), base.to_string_lossy().into_owned());
    env.insert("ODEK_SANDBOX_WORKSPACE".to_string(), "copy".to_string());
    let inputs = odek_core::config::ConfigInputs {
        workdir: w.clone(),
        env,
        flags: Default::default(),
        flag_names: Default::default(),
        read_user_config: true,
        read_project_config: true,
    };
    let loaded = odek_core::config::load(&inputs);
    let Ok(settings) = loaded else {
        return;
    };
    assert!(settings.odek_home.starts_with(&home) && w.starts_with(&settings.odek_home));
    // What the copy-back then does with another sandbox's record.
    let packed = pack(&w, Some(&settings.odek_home), 1000, 1000).expect("pack");
    let mut b = tar::Builder::new(Vec::new());
    raw(
        &mut b,
        tar::EntryType::Regular,
        "workspace/odek-other/workspace-copy.json",
        "",
        0o600,
        b"{}",
    );
    let got = unpack(
        &b.into_inner().expect("tar"),
        &w,
        Some(&packed.manifest),
        Some(&settings.odek_home),
    )
    .expect("unpack");
    panic!(
        "a working directory inside $ODEK_HOME ({}) was accepted; its copy-back wrote {:?} over another sandbox's record",
        w.display(),
        got.written
    );
}

/// Points `ODEK_EGRESS_BIN` at a file odek accepts as a static executable
/// (an ELF header without program headers), once per test process.
fn egress_bin() {
    static BIN: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    let dir = BIN.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut elf = vec![0u8; 64];
        elf[..4].copy_from_slice(b"\x7fELF");
        elf[4] = 2;
        elf[5] = 1;
        elf[6] = 1;
        elf[16] = 2;
        elf[54] = 56;
        std::fs::write(dir.path().join("odek-egress"), &elf).expect("write the fake binary");
        std::env::set_var("ODEK_EGRESS_BIN", dir.path().join("odek-egress"));
        dir
    });
    assert!(dir.path().join("odek-egress").exists());
}

/// Egress mode is refused on a remote engine at resolve only
/// (`egress::resolve`): launch asks the rule of the copied workspace, the
/// volumes and the account again of the engine it talks to (a plan crosses
/// the C ABI as JSON), never egress. A plan resolved against a local engine
/// and launched by a client whose engine is on another machine starts the
/// proxy there with odek's binary bind-mounted by a path of THIS machine:
/// the remote machine runs whatever is at that path as the one gate of the
/// sandbox's egress (or a proxy of someone else's there answers `ready`).
#[tokio::test]
async fn an_egress_plan_launched_on_a_remote_engine_is_refused_at_launch() {
    use common::*;
    egress_bin();
    let copy = |s: Setup| {
        s.flag("sandbox_workspace", "--sandbox-workspace", |l| {
            l.sandbox_workspace = Some("copy".into())
        })
        .flag("sandbox_egress", "--sandbox-egress", |l| {
            l.sandbox_egress = Some(vec!["example.com".into()])
        })
    };
    let local = copy(Setup::new());
    let plan = local.resolve().await.expect("resolve on a local engine");
    assert!(plan.egress.is_some(), "the premise: an egress plan");
    let endpoint =
        odek_core::engine::Endpoint::named("tcp://10.0.0.5:2375", "docker_host").expect("valid");
    let remote = copy(Setup::with_fake(shop_fake().with_endpoint(endpoint)).image(IMAGE));
    let got = remote.launch(&plan).await;
    let created: Vec<String> = remote
        .fake
        .calls_of(odek_core::engine::Op::CreateContainer)
        .into_iter()
        .map(|c| c.arg)
        .collect();
    assert!(
        got.is_err() && created.is_empty(),
        "an egress plan was launched on an engine on another machine: created {created:?}, {:?}",
        got.as_ref()
            .map(|s| s.name.clone())
            .map_err(|e| e.to_string())
    );
}

/// `ssh://…@localhost` counts as an engine on this machine
/// (`SshTarget::is_loopback`, `Endpoint::is_local`): the workspace is
/// bind-mounted, `sandbox_volumes`, the account and egress mode are
/// allowed. But `ssh` reads the operator's `~/.ssh/config` (SPEC §6.2.2:
/// "otherwise the operator's (keys, ProxyJump)"), where a `Host localhost`
/// or `Host *` block with `HostName` or `ProxyJump` (a common corporate
/// `Host * ProxyJump bastion`) takes the connection to another machine,
/// whose engine then mounts ITS paths of the same names. The command line
/// odek builds does not pin the loopback host. Checked with `ssh -G` (it
/// prints the configuration it would use; it connects nowhere), the
/// operator's config given with `-F`.
#[test]
// `ssh -G` only prints the configuration it would use.
#[allow(clippy::disallowed_methods, clippy::disallowed_types)]
fn a_loopback_ssh_endpoint_stays_on_this_machine() {
    // No ssh on PATH: nothing to check.
    let Ok(ssh) = which_ssh() else { return };
    let d = tempfile::tempdir().expect("tempdir");
    let cfg = d.path().join("config");
    std::fs::write(
        &cfg,
        "Host localhost 127.0.0.1\n  HostName build.example.invalid\n  ProxyJump bastion.example.invalid\n",
    )
    .expect("write");
    let target = odek_core::engine::SshTarget::parse("me@localhost").expect("valid");
    assert!(target.is_loopback(), "the premise: odek counts it as local");
    let mut args = target.ssh_args(Duration::from_secs(1));
    // Without the remote command (`docker system dial-stdio`).
    assert_eq!(args[args.len() - 3..], ["docker", "system", "dial-stdio"]);
    args.truncate(args.len() - 3);
    let out = std::process::Command::new(ssh)
        .arg("-G")
        .arg("-F")
        .arg(&cfg)
        .args(&args)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("ssh -G");
    let text = String::from_utf8_lossy(&out.stdout);
    let pick = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{key} ")))
            .map(str::to_string)
    };
    let (host, jump, command) = (pick("hostname"), pick("proxyjump"), pick("proxycommand"));
    assert!(
        out.status.success()
            && matches!(host.as_deref(), Some("localhost" | "127.0.0.1" | "::1"))
            && jump.is_none()
            && command.is_none(),
        "an engine odek counts as on this machine is reached at hostname {host:?} via proxyjump {jump:?} / proxycommand {command:?} (ssh {args:?})"
    );
}

/// `ssh` in an absolute entry of `PATH`.
fn which_ssh() -> Result<std::path::PathBuf, ()> {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .filter(|p| p.is_absolute())
        .map(|p| p.join("ssh"))
        .find(|p| p.is_file())
        .ok_or(())
}
