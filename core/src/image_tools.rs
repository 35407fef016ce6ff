//! The notable tools an image has, for what the agent is told (SPEC §9.1):
//! each of [`NOTABLE_TOOLS`] looked for in the usual `PATH` directories
//! ([`TOOL_DIRS`]) by the image probe that reads the image before its first
//! launch (SPEC §6.1, `launch/image_facts.rs`: one stat per path, all at
//! once, on a container that is never started), and kept with that probe's
//! facts under `$ODEK_HOME/images/<image ID>.json`. An image ID names
//! immutable content, so a launch pays for it once per image; `describe`
//! only reads the file.

use std::path::Path;

/// The tools looked for: the clients and runtimes an agent most often
/// reaches for, in the order they are listed.
pub const NOTABLE_TOOLS: &[&str] = &[
    "bash",
    "git",
    "curl",
    "wget",
    "jq",
    "python3",
    "pip3",
    "node",
    "npm",
    "go",
    "cargo",
    "java",
    "make",
    "gcc",
    "psql",
    "mysql",
    "redis-cli",
    "sqlite3",
];

/// Where each tool is looked for: the `PATH` of Debian, Alpine and most
/// images, without the `sbin` directories.
pub const TOOL_DIRS: &[&str] = &["/usr/local/bin", "/usr/bin", "/bin"];

/// The largest facts file read back (bytes), as the probe's own reader.
const MAX_FACTS_FILE: u64 = 1 << 20;

/// Every path the probe stats for the tools.
pub(crate) fn paths() -> Vec<String> {
    NOTABLE_TOOLS
        .iter()
        .flat_map(|t| TOOL_DIRS.iter().map(move |d| format!("{d}/{t}")))
        .collect()
}

/// The tools of `image_id` (`sha256:<64 hex>`) as the probe found them and
/// `$ODEK_HOME` (`odek_home`) keeps them, in [`NOTABLE_TOOLS`]' order: a
/// tool is there when any of its paths exists (a file, or a symlink such
/// as `/usr/bin/python3`). `None` when not known: no probe of this image
/// looked for them yet, or the file cannot be read.
pub fn cached(odek_home: &Path, image_id: &str) -> Option<Vec<String>> {
    let hex = crate::account::image_hex(image_id)?;
    let path = odek_home.join("images").join(format!("{hex}.json"));
    let meta = std::fs::symlink_metadata(&path).ok()?;
    if !meta.is_file() || meta.len() > MAX_FACTS_FILE {
        return None;
    }
    let facts: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).ok()?).ok()?;
    let seen = facts.get("paths")?.as_object()?;
    let mut found = Vec::new();
    for tool in NOTABLE_TOOLS {
        let mut present = false;
        for dir in TOOL_DIRS {
            let kind = seen.get(&format!("{dir}/{tool}"))?.get("kind")?.as_str()?;
            present |= kind != "absent";
        }
        if present {
            found.push((*tool).to_string());
        }
    }
    Some(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_is_there_when_any_of_its_paths_is_and_unknown_until_all_were_looked_at() {
        let home = tempfile::tempdir().expect("tempdir");
        let id = format!("sha256:{}", "a".repeat(64));
        assert_eq!(cached(home.path(), &id), None, "no file yet");
        let mut paths = serde_json::Map::new();
        for p in super::paths() {
            let kind = if p == "/usr/bin/git" {
                serde_json::json!({"kind": "file"})
            } else if p == "/usr/local/bin/python3" {
                serde_json::json!({"kind": "symlink", "target": "python3.12"})
            } else {
                serde_json::json!({"kind": "absent"})
            };
            paths.insert(p, kind);
        }
        let dir = home.path().join("images");
        std::fs::create_dir_all(&dir).expect("mkdir");
        let file = dir.join(format!("{}.json", "a".repeat(64)));
        let mut facts = serde_json::json!({ "paths": paths });
        std::fs::write(&file, facts.to_string()).expect("write");
        assert_eq!(
            cached(home.path(), &id),
            Some(vec!["git".to_string(), "python3".to_string()])
        );
        // One path not looked at: not known (an older probe's file).
        facts["paths"]
            .as_object_mut()
            .expect("paths")
            .remove("/bin/jq");
        std::fs::write(&file, facts.to_string()).expect("write");
        assert_eq!(cached(home.path(), &id), None);
        assert_eq!(cached(home.path(), "not-an-id"), None);
    }
}
