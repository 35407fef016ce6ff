//! Whose user the sandbox runs as (SPEC §6.1 "user", as amended): by default
//! the operator's own uid:gid on a local engine, so that what the agent
//! writes under `/workspace` is the operator's and the sandbox can write the
//! operator's files without any capability; root only when the operator
//! asks (`sandbox_user: root`; a project config never can).
//!
//! A uid the image does not know has no name, no home and no writable
//! `HOME`. So for a non-root numeric `uid:gid`, odek gives the sandbox an
//! [`Account`]: a line in the container's `/etc/passwd` (and `/etc/group`
//! when the gid is missing) written into the container's own layer before
//! it starts — the image's entries plus that one line, never the host's
//! files — an empty per-sandbox `HOME` (a tmpfs, `nosuid,nodev`), and
//! `HOME`, `USER`, `LOGNAME` in its environment.
//!
//! The image's `/etc/passwd` and `/etc/group` are foreign bytes: they are
//! read with a size cap ([`MAX_ACCOUNT_FILE`]) and only split into lines;
//! odek never interprets more than the uid, gid and name fields.

use std::path::{Path, PathBuf};

use crate::engine::BindMount;
use serde::{Deserialize, Serialize};

/// The sandbox account's login name.
pub const ACCOUNT_NAME: &str = "odek";
/// The sandbox account's home directory: an empty tmpfs, per sandbox.
pub const ACCOUNT_HOME: &str = "/home/odek";
/// The largest `/etc/passwd` or `/etc/group` odek reads from an image
/// (bytes); a larger one refuses the launch.
pub const MAX_ACCOUNT_FILE: usize = 1 << 20;

/// The account odek gives a sandbox whose user is a non-root numeric
/// `uid:gid` (SPEC §6.1 "user").
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Account {
    /// Login name ([`ACCOUNT_NAME`]).
    pub name: String,
    /// uid (never 0).
    pub uid: u32,
    /// Primary gid.
    pub gid: u32,
    /// `HOME` ([`ACCOUNT_HOME`]): an empty tmpfs, `nosuid,nodev`.
    pub home: String,
}

impl Account {
    /// The account for `uid:gid`; `None` for uid 0 (root has its own).
    pub fn for_ids(uid: u32, gid: u32) -> Option<Account> {
        (uid != 0).then(|| Account {
            name: ACCOUNT_NAME.into(),
            uid,
            gid,
            home: ACCOUNT_HOME.into(),
        })
    }

    /// The account for a `sandbox_user` value: only `uid:gid`, both decimal,
    /// uid not 0. A name or a bare uid is the image's to map (Docker gives a
    /// bare uid the image's primary group, or 0), so odek adds nothing.
    pub fn for_user(user: &str) -> Option<Account> {
        let (u, g) = user.split_once(':')?;
        let num = |s: &str| {
            (!s.is_empty() && s.len() <= 10 && s.bytes().all(|b| b.is_ascii_digit()))
                .then(|| s.parse::<u32>().ok())
                .flatten()
        };
        Account::for_ids(num(u)?, num(g)?)
    }

    /// Options of the `HOME` tmpfs: writable and executable by the account
    /// only (`mode=0700`, its uid and gid), never setuid or device files.
    /// `exec` because agents install tools there (`pip install --user`,
    /// `npm --prefix ~`, `cargo install`) and run them; `/workspace` is
    /// writable and executable already, so `noexec` here would stop nobody.
    pub fn home_tmpfs_options(&self) -> String {
        format!(
            "rw,nosuid,nodev,exec,mode=0700,uid={},gid={}",
            self.uid, self.gid
        )
    }

    /// `HOME`, `USER` and `LOGNAME` for the container's environment.
    pub fn env(&self) -> [(&'static str, String); 3] {
        [
            ("HOME", self.home.clone()),
            ("USER", self.name.clone()),
            ("LOGNAME", self.name.clone()),
        ]
    }

    /// The account's `/etc/passwd` line.
    fn passwd_line(&self) -> String {
        format!(
            "{}:x:{}:{}:odek sandbox user:{}:/bin/sh\n",
            self.name, self.uid, self.gid, self.home
        )
    }

    /// The account's `/etc/group` line.
    fn group_line(&self) -> String {
        format!("{}:x:{}:\n", self.name, self.gid)
    }

    /// The container's `/etc/passwd`: the image's lines (`None`: it has
    /// none) plus the account's line, placed before the first entry with
    /// the same uid or name so that `getpwuid` and `getpwnam` find it.
    pub fn passwd(&self, image: Option<&[u8]>) -> Vec<u8> {
        insert_entry(
            image.unwrap_or_default(),
            self.passwd_line().as_bytes(),
            |fields| {
                fields.first() == Some(&self.name.as_bytes())
                    || fields.get(2) == Some(&self.uid.to_string().as_bytes())
            },
        )
    }

    /// The container's `/etc/group`: the image's lines, plus the account's
    /// group at the end when no group has its gid (an image's group with
    /// that gid stays what `getgrgid` finds).
    pub fn group(&self, image: Option<&[u8]>) -> Vec<u8> {
        let image = image.unwrap_or_default();
        let gid = self.gid.to_string();
        let known = lines(image).any(|l| fields(l).get(2) == Some(&gid.as_bytes()));
        if known {
            return image.to_vec();
        }
        insert_entry(image, self.group_line().as_bytes(), |_| false)
    }
}

/// Why the sandbox runs as the user it does when the operator named none
/// (SPEC §6.1 "user"): shown by `config view` and the environment block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum UserChoice {
    /// The operator set `sandbox_user` (flag, env, user config, API).
    Operator,
    /// The operator's own uid:gid: a local engine.
    OperatorIds,
    /// Root in the container, which a rootless engine maps to the
    /// operator's own uid on the host.
    RootlessRoot,
    /// The image's user: a remote engine, where the operator's uid means
    /// nothing.
    Image,
}

impl UserChoice {
    /// A phrase for views: why this user.
    pub fn describe(self) -> &'static str {
        match self {
            UserChoice::Operator => "set by the operator",
            UserChoice::OperatorIds => "your own uid:gid (a local engine)",
            UserChoice::RootlessRoot => {
                "root in the sandbox, which the rootless engine maps to your uid on the host"
            }
            UserChoice::Image => "the image's user (a remote engine: your uid means nothing there)",
        }
    }
}

/// The user a sandbox runs as when the operator set none: the operator's
/// `euid:egid` on a `local` engine (with an [`Account`] when not root), root
/// on a rootless one (container root is the operator there), the image's
/// own on a remote one. Returns the `sandbox_user` value to apply (`None`:
/// the image's), the account, and why.
pub(crate) fn default_user(
    local: bool,
    rootless: bool,
    euid: u32,
    egid: u32,
) -> (Option<String>, Option<Account>, UserChoice) {
    match (local, rootless) {
        (true, false) => (
            Some(format!("{euid}:{egid}")),
            Account::for_ids(euid, egid),
            UserChoice::OperatorIds,
        ),
        (true, true) => (Some("0:0".into()), None, UserChoice::RootlessRoot),
        (false, _) => (None, None, UserChoice::Image),
    }
}

/// The lines of a colon-separated account file (without their `\n`).
fn lines(file: &[u8]) -> impl Iterator<Item = &[u8]> {
    file.split(|b| *b == b'\n').filter(|l| !l.is_empty())
}

/// The colon-separated fields of one line.
fn fields(line: &[u8]) -> Vec<&[u8]> {
    line.split(|b| *b == b':').collect()
}

/// `file` with `entry` (one line ending in `\n`) inserted before the first
/// line whose fields `collides`, else appended; the file keeps its bytes
/// otherwise and ends with a newline.
fn insert_entry(file: &[u8], entry: &[u8], collides: impl Fn(&[&[u8]]) -> bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(file.len() + entry.len() + 1);
    let mut placed = false;
    for line in file.split_inclusive(|b| *b == b'\n') {
        let bare = line.strip_suffix(b"\n").unwrap_or(line);
        if !placed && !bare.is_empty() && collides(&fields(bare)) {
            out.extend_from_slice(entry);
            placed = true;
        }
        out.extend_from_slice(line);
        if !line.ends_with(b"\n") {
            out.push(b'\n');
        }
    }
    if !placed {
        out.extend_from_slice(entry);
    }
    out
}

/// The account files: name in the cache directory → path in the container.
pub(crate) const ACCOUNT_FILES: [(&str, &str); 2] =
    [("passwd", "/etc/passwd"), ("group", "/etc/group")];

/// The hex of `sha256:<64 hex>`; `None` for anything else (never made
/// into a path).
pub(crate) fn image_hex(image_id: &str) -> Option<&str> {
    let hex = image_id.strip_prefix("sha256:")?;
    (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit())).then_some(hex)
}

/// Where the generated account files for `image_id` and `account` live.
pub(crate) fn files_dir(odek_home: &Path, image_id: &str, account: &Account) -> Option<PathBuf> {
    image_hex(image_id).map(|hex| {
        odek_home
            .join("accounts")
            .join(format!("{hex}-{}-{}", account.uid, account.gid))
    })
}

/// The read-only bind mounts of the account files (sources under
/// [`files_dir`]); empty for a plan without an account.
pub(crate) fn binds(odek_home: &Path, image_id: &str, account: Option<&Account>) -> Vec<BindMount> {
    let Some(dir) = account.and_then(|a| files_dir(odek_home, image_id, a)) else {
        return Vec::new();
    };
    ACCOUNT_FILES
        .iter()
        .map(|(name, target)| BindMount {
            source: dir.join(name).display().to_string(),
            target: (*target).to_string(),
            read_only: true,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acct() -> Account {
        Account::for_ids(1000, 1000).expect("non-root")
    }

    #[test]
    fn root_has_no_account_and_only_numeric_uid_gid_get_one() {
        assert_eq!(Account::for_ids(0, 0), None);
        assert_eq!(Account::for_user("0:0"), None);
        assert_eq!(Account::for_user("root"), None);
        assert_eq!(Account::for_user("1000"), None);
        assert_eq!(Account::for_user("dev:1000"), None);
        assert_eq!(Account::for_user("1000:"), None);
        assert_eq!(Account::for_user("99999999999:1"), None);
        assert_eq!(Account::for_user("1000:1000"), Some(acct()));
        assert_eq!(Account::for_user("1000:0").map(|a| a.gid), Some(0));
    }

    #[test]
    fn passwd_keeps_the_image_lines_and_adds_one() {
        let image = b"root:x:0:0:root:/root:/bin/bash\nbin:x:2:2::/bin:/usr/sbin/nologin\n";
        let out = acct().passwd(Some(image));
        let text = String::from_utf8(out).expect("utf-8");
        assert_eq!(
            text,
            "root:x:0:0:root:/root:/bin/bash\nbin:x:2:2::/bin:/usr/sbin/nologin\nodek:x:1000:1000:odek sandbox user:/home/odek:/bin/sh\n"
        );
    }

    #[test]
    fn passwd_puts_the_account_before_an_image_user_with_its_uid_or_name() {
        let image = b"root:x:0:0::/root:/bin/sh\nnode:x:1000:1000::/home/node:/bin/sh\nodek:x:5:5::/:/bin/sh";
        let text = String::from_utf8(acct().passwd(Some(image))).expect("utf-8");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert!(lines[1].starts_with("odek:x:1000:1000:"), "{text}");
        assert!(lines[2].starts_with("node:"), "{text}");
        assert!(text.ends_with('\n'), "a missing final newline is added");
    }

    #[test]
    fn passwd_of_an_image_without_one_is_the_account_alone() {
        let text = String::from_utf8(acct().passwd(None)).expect("utf-8");
        assert_eq!(
            text,
            "odek:x:1000:1000:odek sandbox user:/home/odek:/bin/sh\n"
        );
    }

    #[test]
    fn group_is_added_only_when_the_gid_is_missing() {
        let with = b"root:x:0:\nusers:x:1000:\n";
        assert_eq!(acct().group(Some(with)), with.to_vec());
        let without = b"root:x:0:\n";
        assert_eq!(
            String::from_utf8(acct().group(Some(without))).expect("utf-8"),
            "root:x:0:\nodek:x:1000:\n"
        );
    }

    #[test]
    fn foreign_bytes_in_the_image_files_pass_through_untouched() {
        let image = b"r\x1b[2J:x:0:0::/:/bin/sh\n\xff\xfe:x:7:7::/:/x\n";
        let out = acct().passwd(Some(image));
        assert!(
            out.starts_with(image),
            "the image's bytes are kept as they are"
        );
    }

    #[test]
    fn home_tmpfs_is_private_and_never_setuid() {
        let o = acct().home_tmpfs_options();
        for want in ["nosuid", "nodev", "mode=0700", "uid=1000", "gid=1000"] {
            assert!(o.split(',').any(|x| x == want), "{want} in {o}");
        }
    }
}
