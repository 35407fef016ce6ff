//! TLS material for a `tcp://` daemon endpoint (SPEC §6.2.1).
//!
//! Read as the Docker CLI reads it: `DOCKER_TLS_VERIFY` (non-empty) with
//! `DOCKER_CERT_PATH` (default the Docker config directory, `~/.docker`)
//! holding `ca.pem`, `cert.pem`, `key.pem`; or a Docker context's
//! `contexts/tls/<sha256 of name>/docker/{ca,cert,key}.pem`. Unlike the
//! Docker CLI, odek is fail-closed: the daemon's certificate is always
//! verified, against `ca.pem` alone (no system roots), and all three files
//! must be there. Each file must pass the ownership rule of odek's own files
//! (SPEC §7.3): it belongs to the effective uid or root, and neither group
//! nor others can write it — whoever can write `ca.pem` chooses which
//! daemon odek trusts. The files are read once, when the endpoint is
//! resolved, from the same open file that was checked.

use std::fmt;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use serde::{Deserialize, Serialize};

/// The TLS material of a `tcp://` endpoint: the daemon's certificate must be
/// signed by `ca` (the only root trusted), and odek presents `cert` with
/// `key`. Built when the endpoint is resolved, which checks and reads all
/// three ([`Endpoint::resolve`](super::Endpoint::resolve)).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tls {
    /// The CA certificate(s) (`ca.pem`).
    pub ca: PathBuf,
    /// The client certificate (`cert.pem`).
    pub cert: PathBuf,
    /// The client's private key (`key.pem`).
    pub key: PathBuf,
    /// The three files' PEM text as read and checked (not serialized).
    #[serde(skip)]
    pub(crate) pem: Pem,
}

/// The PEM text of `ca.pem`, `cert.pem`, `key.pem`.
#[derive(Clone, Default, PartialEq, Eq)]
pub(crate) struct Pem {
    pub(crate) ca: Vec<u8>,
    pub(crate) cert: Vec<u8>,
    pub(crate) key: Vec<u8>,
}

impl fmt::Debug for Tls {
    /// The paths only: never the key.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tls")
            .field("ca", &self.ca)
            .field("cert", &self.cert)
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

/// Where the TLS material was named, for the fix in a refusal.
#[derive(Clone, Copy, Debug)]
pub(crate) enum TlsOrigin<'a> {
    /// `DOCKER_TLS_VERIFY` with `DOCKER_CERT_PATH` (or its default).
    Env {
        /// Whether `DOCKER_CERT_PATH` named the directory.
        cert_path_set: bool,
    },
    /// A Docker context's `tls/` directory.
    Context {
        /// The context's name.
        name: &'a str,
    },
    /// A directory the embedding program names (the C ABI's
    /// `docker_cert_path`, SPEC §6.2.1).
    Named {
        /// The option that named it, e.g. `docker_cert_path`.
        option: &'a str,
    },
}

impl TlsOrigin<'_> {
    fn fix(&self, dir: &Path) -> String {
        match self {
            TlsOrigin::Env { cert_path_set } => format!(
                "put the daemon's CA certificate, your client certificate and its key in {} as ca.pem, cert.pem and key.pem{}, or unset DOCKER_TLS_VERIFY for a daemon without TLS",
                crate::text::shown(dir),
                if *cert_path_set {
                    ""
                } else {
                    " (or set DOCKER_CERT_PATH to the directory that holds them)"
                }
            ),
            TlsOrigin::Context { name } => format!(
                "give the context all three with `docker context update {n} --docker \"host=…,ca=CA.pem,cert=CERT.pem,key=KEY.pem\"` (they are kept in {d})",
                n = crate::text::shown(name),
                d = crate::text::shown(dir)
            ),
            TlsOrigin::Named { option } => format!(
                "put the daemon's CA certificate, your client certificate and its key in {} as ca.pem, cert.pem and key.pem, or point {option} at the directory that holds them",
                crate::text::shown(dir)
            ),
        }
    }
}

impl Tls {
    /// Checks and reads `ca.pem`, `cert.pem` and `key.pem` in `dir`.
    ///
    /// Errors: a sentence naming the file, what is wrong with it (absent,
    /// unreadable, another user's or writable by group or others, no
    /// certificate or not exactly one private key in it) and the fix.
    pub(crate) fn load(dir: &Path, origin: TlsOrigin<'_>) -> Result<Tls, String> {
        // Whoever can write the directory can swap a file in it (ca.pem
        // for a symlink to a bundle of their choice) after the file passed.
        check_dir(dir)
            .map_err(|why| format!("{} {why}; {}", crate::text::shown(dir), origin.fix(dir)))?;
        let read = |file: &str| -> Result<(PathBuf, Vec<u8>), String> {
            let path = dir.join(file);
            read_checked(&path)
                .map(|b| (path.clone(), b))
                .map_err(|why| format!("{} {why}; {}", crate::text::shown(&path), origin.fix(dir)))
        };
        let (ca, ca_pem) = read("ca.pem")?;
        let (cert, cert_pem) = read("cert.pem")?;
        let (key, key_pem) = read("key.pem")?;
        let bad = |path: &Path, what: &str| {
            format!("{} {what}; {}", crate::text::shown(path), origin.fix(dir))
        };
        if certificates(&ca_pem).is_empty() {
            return Err(bad(&ca, "holds no PEM certificate"));
        }
        if certificates(&cert_pem).is_empty() {
            return Err(bad(&cert, "holds no PEM certificate"));
        }
        if PrivateKeyDer::from_pem_slice(&key_pem).is_err() {
            return Err(bad(&key, "holds no PEM private key"));
        }
        Ok(Tls {
            ca,
            cert,
            key,
            pem: Pem {
                ca: ca_pem,
                cert: cert_pem,
                key: key_pem,
            },
        })
    }
}

/// The certificates in a PEM text (none when it holds none or is malformed).
pub(crate) fn certificates(pem: &[u8]) -> Vec<CertificateDer<'static>> {
    CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .unwrap_or_default()
}

/// The ownership rule (SPEC §7.3) for a directory that holds what chooses
/// or authenticates the engine (TLS material, a Docker context): it
/// belongs to the effective uid or root and neither group nor others can
/// write it, so nobody else can replace a file in it. `dir` is followed if
/// it is a symlink; an absent one passes (what is read from it is then
/// named as absent). Errors: what is wrong and the fix, as a phrase that
/// follows the directory's name.
pub(crate) fn check_dir(dir: &Path) -> Result<(), String> {
    let meta = match std::fs::metadata(dir) {
        Ok(m) => m,
        // Absent: the files in it are named as absent (the clearer fix).
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("cannot be inspected ({e})")),
    };
    if !meta.is_dir() {
        return Err("is not a directory".into());
    }
    let owner = meta.uid();
    if !crate::ownership::is_trusted_owner(owner) {
        return Err(format!(
            "belongs to uid {owner}, not to you (uid {me}) or root: another user could replace the files in it, so it is not trusted (if it is yours, check it and `chown {me} {p}`)",
            me = crate::ownership::euid(),
            p = crate::text::shown(dir)
        ));
    }
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Err(format!(
            "has mode {mode:04o}: group or others can replace the files in it, so it is not trusted (check them, then `chmod go-w {}`)",
            crate::text::shown(dir)
        ));
    }
    Ok(())
}

/// Opens `path`, checks the open file against the ownership rule (SPEC
/// §7.3) and reads it: the text that was checked is the text used.
/// Errors: a phrase that follows the file's name (`does not exist`, …).
pub(crate) fn read_checked(path: &Path) -> Result<Vec<u8>, String> {
    use std::io::ErrorKind;
    let f = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == ErrorKind::NotFound => return Err("does not exist".into()),
        Err(e) if e.kind() == ErrorKind::PermissionDenied => {
            return Err("cannot be read by you (permission denied)".into())
        }
        Err(e) => return Err(format!("cannot be opened ({e})")),
    };
    let meta = f
        .metadata()
        .map_err(|e| format!("cannot be inspected ({e})"))?;
    if !meta.is_file() {
        return Err("is not a regular file".into());
    }
    let owner = meta.uid();
    if !crate::ownership::is_trusted_owner(owner) {
        return Err(format!(
            "belongs to uid {owner}, not to you (uid {me}) or root: another user could have written it, so it is not trusted (if it is yours, check it and `chown {me} {p}`)",
            me = crate::ownership::euid(),
            p = crate::text::shown(path)
        ));
    }
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Err(format!(
            "has mode {mode:04o}: group or others can write it, so it is not trusted (check it, then `chmod go-w {}`)",
            crate::text::shown(path)
        ));
    }
    let mut bytes = Vec::new();
    f.take(1 << 20)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot be read ({e})"))?;
    Ok(bytes)
}
