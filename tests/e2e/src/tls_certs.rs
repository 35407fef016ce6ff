//! Certificates for a daemon reached over TLS (SPEC §6.2.1), made by the
//! test with the machine's `openssl`: a CA, a server certificate for
//! `127.0.0.1` and a client certificate it signed, and a second, unrelated
//! CA (the "wrong CA"). EC P-256 keys, valid for two days; nothing is
//! fetched.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A directory of certificates; removed on drop.
pub struct TlsCerts {
    dir: tempfile::TempDir,
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run openssl (Debian: apt-get install openssl): {e}"));
    assert!(
        out.status.success(),
        "openssl {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl TlsCerts {
    /// Makes `ca.pem`, `server.pem`/`server-key.pem` (for IP 127.0.0.1),
    /// `client.pem`/`client-key.pem` (signed by the CA) and `wrongca.pem`.
    pub fn make() -> TlsCerts {
        TlsCerts::make_for("127.0.0.1")
    }

    /// [`TlsCerts::make`] with the server certificate for IP `ip` (e.g.
    /// `192.0.2.1`, an address that is not loopback).
    pub fn make_for(ip: &str) -> TlsCerts {
        let dir = tempfile::Builder::new()
            .prefix("odek-e2e-tls-")
            .tempdir()
            .expect("tempdir");
        let d = dir.path();
        let key = |name: &str| {
            openssl(
                d,
                &[
                    "genpkey",
                    "-algorithm",
                    "EC",
                    "-pkeyopt",
                    "ec_paramgen_curve:P-256",
                    "-out",
                    &format!("{name}-key.pem"),
                ],
            )
        };
        for ca in ["ca", "wrongca"] {
            key(ca);
            openssl(
                d,
                &[
                    "req",
                    "-x509",
                    "-new",
                    "-key",
                    &format!("{ca}-key.pem"),
                    "-subj",
                    &format!("/CN=odek e2e {ca}"),
                    "-days",
                    "2",
                    "-out",
                    &format!("{ca}.pem"),
                ],
            );
        }
        let server_ext = format!(
            "subjectAltName=IP:{ip}\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n"
        );
        for (leaf, ext) in [
            ("server", server_ext.as_str()),
            (
                "client",
                "extendedKeyUsage=clientAuth\nbasicConstraints=CA:FALSE\n",
            ),
        ] {
            key(leaf);
            std::fs::write(d.join(format!("{leaf}.ext")), ext).expect("ext");
            openssl(
                d,
                &[
                    "req",
                    "-new",
                    "-key",
                    &format!("{leaf}-key.pem"),
                    "-subj",
                    &format!("/CN=odek e2e {leaf}"),
                    "-out",
                    &format!("{leaf}.csr"),
                ],
            );
            openssl(
                d,
                &[
                    "x509",
                    "-req",
                    "-in",
                    &format!("{leaf}.csr"),
                    "-CA",
                    "ca.pem",
                    "-CAkey",
                    "ca-key.pem",
                    "-CAcreateserial",
                    "-days",
                    "2",
                    "-extfile",
                    &format!("{leaf}.ext"),
                    "-out",
                    &format!("{leaf}.pem"),
                ],
            );
        }
        TlsCerts { dir }
    }

    /// A file of the set (`ca.pem`, `server.pem`, `client-key.pem`, …).
    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The `dockerd` arguments that serve TLS on `127.0.0.1:port` and ask
    /// every client for a certificate signed by the CA.
    pub fn daemon_args(&self, port: u16) -> Vec<String> {
        self.daemon_args_on("127.0.0.1", port)
    }

    /// [`TlsCerts::daemon_args`] serving on `ip:port`.
    pub fn daemon_args_on(&self, ip: &str, port: u16) -> Vec<String> {
        vec![
            "--tlsverify".into(),
            "--tlscacert".into(),
            self.file("ca.pem").display().to_string(),
            "--tlscert".into(),
            self.file("server.pem").display().to_string(),
            "--tlskey".into(),
            self.file("server-key.pem").display().to_string(),
            "-H".into(),
            format!("tcp://{ip}:{port}"),
        ]
    }

    /// A `DOCKER_CERT_PATH` directory (new each call, under this one) with
    /// `ca.pem` from `ca` (a file of the set) and the client's `cert.pem`
    /// and `key.pem` (0600), as the Docker CLI expects them.
    pub fn client_dir(&self, name: &str, ca: &str) -> PathBuf {
        let d = self.dir.path().join(name);
        std::fs::create_dir_all(&d).expect("mkdir");
        std::fs::copy(self.file(ca), d.join("ca.pem")).expect("ca");
        std::fs::copy(self.file("client.pem"), d.join("cert.pem")).expect("cert");
        std::fs::copy(self.file("client-key.pem"), d.join("key.pem")).expect("key");
        std::fs::set_permissions(
            d.join("key.pem"),
            std::os::unix::fs::PermissionsExt::from_mode(0o600),
        )
        .expect("chmod key");
        d
    }
}
