//! The claim records of warm pools (docs/SANDBOXING.md, "The warm pool"):
//! one empty file per claimed sandbox under `$ODEK_HOME/pool/claimed/`,
//! named by its container ID. A pooled sandbox keeps its `dev.odek.pool`
//! label once handed over (labels cannot change); the record is what tells
//! a claimed one from a ready one to `odek sandbox ls` and `odek pool down`,
//! from any process of the same user. A leaf: it knows only paths.

use std::path::{Path, PathBuf};

/// `$ODEK_HOME/pool/claimed`.
fn dir(odek_home: &Path) -> PathBuf {
    odek_home.join("pool").join("claimed")
}

/// True for a full container ID's shape (hex digits only), the one name a
/// record may have.
fn is_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 128 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Records the sandbox `name` (container `id`) as claimed. A record that
/// cannot be written is logged: `odek pool down` would then remove that
/// claimed sandbox too.
pub(crate) fn record(odek_home: &Path, id: &str, name: &str) {
    if !is_id(id) {
        return;
    }
    let d = dir(odek_home);
    let wrote = std::fs::create_dir_all(&d).and_then(|()| std::fs::write(d.join(id), b""));
    if let Err(e) = wrote {
        tracing::warn!(sandbox = %name, "the claim of a pooled sandbox could not be recorded: {e}");
    }
}

/// True when the pooled sandbox with container ID `id` was handed over by
/// its owner's pool (a record under `odek_home`).
pub fn claimed(odek_home: &Path, id: &str) -> bool {
    is_id(id) && dir(odek_home).join(id).exists()
}

/// Removes the records of `odek_home` whose container is not among `live`
/// (container IDs): gc and `odek pool down` call it after they listed.
pub(crate) fn prune(odek_home: &Path, live: &[&str]) {
    let Ok(entries) = std::fs::read_dir(dir(odek_home)) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        if !live.iter().any(|id| name == *id) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}
