//! The core's file tools against real Docker (docs/MCP.md, "File tools";
//! docs/SANDBOXING.md, "File tools"): `Client::read_file`, `write_file`,
//! `edit_file` and `list_directory` run inside the sandbox as its command
//! user (here uid 1000, not the suite's root), through the supervisor's
//! `fs` mode: a write is the command user's on the host, a symlink planted
//! in the workspace resolves inside the sandbox only, a read-only
//! workspace refuses a write saying why, a refused edit leaves the file
//! as it was.
//!
//! As tests/supervisor.rs: `cargo xtask e2e` names the static supervisor
//! in `ODEK_SUPERVISOR_BIN` (and `ODEK_SUPERVISOR`); run without it, these
//! tests fail saying so. The refusal without a supervisor is in
//! tests/files_exec_api.rs (its own process: `ODEK_SUPERVISOR=`).

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use odek_core::api::{
    self, EditFileRequest, FileEdit, FileEncoding, ListDirectoryRequest, ReadFileRequest,
    WriteFileRequest,
};
use odek_core::error::FileErrorKind;
use odek_core::{Client, Error, ExecOptions, LaunchOptions, Sandbox, Silent};
use odek_e2e::{Project, BASE_IMAGE, BUSYBOX_IMAGE};

/// The command user of these sandboxes (not the suite's own uid, root).
const USER: u32 = 1000;

/// A sandbox of `p` (workdir writable by [`USER`]) with `extra` settings.
async fn launch(p: &Project, extra: serde_json::Value) -> (Client, Sandbox) {
    let sup = std::env::var("ODEK_SUPERVISOR_BIN").unwrap_or_default();
    assert!(
        !sup.is_empty(),
        "ODEK_SUPERVISOR_BIN is not set: run these tests through `cargo xtask e2e` (it builds the static odek-supervisor), or point ODEK_SUPERVISOR_BIN at one"
    );
    assert_eq!(
        std::env::var("ODEK_SUPERVISOR").ok().as_deref(),
        Some(sup.as_str()),
        "ODEK_SUPERVISOR must name the supervisor ({sup}) for these tests"
    );
    std::fs::set_permissions(
        p.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .expect("chmod the workdir");
    let mut settings = serde_json::json!({
        "sandbox": true,
        "sandbox_image": BASE_IMAGE,
        "sandbox_user": format!("{USER}:{USER}"),
    });
    if let (Some(s), Some(e)) = (settings.as_object_mut(), extra.as_object()) {
        s.extend(e.clone());
    }
    let req: api::ResolveRequest = serde_json::from_value(serde_json::json!({
        "workdir": p.path(),
        "settings": settings,
        "read_user_config": false,
        "read_project_config": false,
        "env": {
            "HOME": p.home.path(),
            "ODEK_HOME": p.home.path(),
            "PATH": std::env::var("PATH").unwrap_or_default(),
        },
    }))
    .expect("a resolve request");
    let client = Client::from_env();
    let inputs = req.config_inputs().expect("inputs");
    let plan = client.resolve(&inputs, &Silent).await.expect("resolve");
    let sandbox = client
        .launch(&plan, &LaunchOptions::default(), &Silent)
        .await
        .expect("launch");
    assert!(
        sandbox.supervisor.as_ref().is_some_and(|s| s.on),
        "the supervisor is off: {:?}",
        sandbox.supervisor
    );
    (client, sandbox)
}

fn kind(e: &Error) -> FileErrorKind {
    match e {
        Error::File(f) => f.kind,
        other => panic!("not a file error: {other:?}"),
    }
}

fn read(path: &str) -> ReadFileRequest {
    ReadFileRequest {
        path: path.into(),
        ..Default::default()
    }
}

fn write(path: &str, content: &str) -> WriteFileRequest {
    WriteFileRequest {
        path: path.into(),
        content: content.into(),
        ..Default::default()
    }
}

/// 300 KiB of text through stdin and back, pieces by offset, the parent
/// directories made, the file the command user's on the host; binary
/// bytes in base64, refused as text; a listing with types.
#[tokio::test(flavor = "multi_thread")]
async fn files_round_trip_as_the_command_user() {
    let p = Project::new();
    let (odek, sandbox) = launch(&p, serde_json::json!({})).await;
    let opts = ExecOptions::default();
    let text: String = (0..6000)
        .map(|i| format!("{i:08} the quick brown fox jumps over the lazy dog é\n"))
        .collect::<String>();
    assert!(text.len() > 300 * 1024, "{}", text.len());
    let w = odek
        .write_file(&sandbox, &write("deep/er/big.txt", &text), &opts)
        .await
        .expect("write 300 KiB");
    assert_eq!(w.path, "/workspace/deep/er/big.txt");
    assert_eq!(w.bytes_written, text.len() as u64);
    assert!(w.created);
    let host = p.path().join("deep/er/big.txt");
    assert_eq!(std::fs::read_to_string(&host).expect("on the host"), text);
    let meta = std::fs::metadata(&host).expect("stat");
    assert_eq!(
        (meta.uid(), meta.gid()),
        (USER, USER),
        "owned by the command user"
    );
    let r = odek
        .read_file(&sandbox, &read("deep/er/big.txt"), &opts)
        .await
        .expect("read");
    assert_eq!(r.content, text);
    assert_eq!(
        (r.size, r.offset, r.truncated),
        (text.len() as u64, 0, false)
    );
    // A piece: ends before a character it would cut, says where to go on.
    let at = text.find('é').expect("an é");
    let r = odek
        .read_file(
            &sandbox,
            &ReadFileRequest {
                path: "/workspace/deep/er/big.txt".into(),
                offset: Some(10),
                length: Some((at - 9) as u64),
                ..Default::default()
            },
            &opts,
        )
        .await
        .expect("a piece");
    assert_eq!(r.content, &text[10..at]);
    assert!(r.truncated);
    assert_eq!(r.next_offset, Some(at as u64));
    // Replacing keeps the mode, and the file stays the user's.
    std::fs::set_permissions(&host, std::os::unix::fs::PermissionsExt::from_mode(0o640))
        .expect("chmod");
    let w = odek
        .write_file(&sandbox, &write("deep/er/big.txt", "short\n"), &opts)
        .await
        .expect("replace");
    assert!(!w.created);
    let meta = std::fs::metadata(&host).expect("stat");
    assert_eq!(meta.mode() & 0o777, 0o640);
    assert_eq!(std::fs::read_to_string(&host).expect("read"), "short\n");

    // Binary, in base64.
    let bytes: Vec<u8> = (0..=255u8).cycle().take(70_000).collect();
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD.encode(&bytes);
    odek.write_file(
        &sandbox,
        &WriteFileRequest {
            path: "bin/blob".into(),
            content: b64.clone(),
            encoding: FileEncoding::Base64,
            ..Default::default()
        },
        &opts,
    )
    .await
    .expect("write binary");
    assert_eq!(
        std::fs::read(p.path().join("bin/blob")).expect("host"),
        bytes
    );
    let r = odek
        .read_file(
            &sandbox,
            &ReadFileRequest {
                path: "bin/blob".into(),
                encoding: FileEncoding::Base64,
                ..Default::default()
            },
            &opts,
        )
        .await
        .expect("read binary");
    assert_eq!(r.content, b64);
    let e = odek
        .read_file(&sandbox, &read("bin/blob"), &opts)
        .await
        .expect_err("not text");
    assert_eq!(kind(&e), FileErrorKind::NotUtf8);
    assert!(e.to_string().contains("base64"), "{e}");

    // A listing.
    std::os::unix::fs::symlink("deep", p.path().join("link")).expect("symlink");
    let l = odek
        .list_directory(
            &sandbox,
            &ListDirectoryRequest {
                path: ".".into(),
                ..Default::default()
            },
            &opts,
        )
        .await
        .expect("list");
    assert_eq!(l.path, "/workspace");
    assert_eq!(l.listing, "[DIR] bin\n[DIR] deep\n[SYMLINK] link -> deep");
    let e = odek
        .read_file(&sandbox, &read("nope.txt"), &opts)
        .await
        .expect_err("absent");
    assert_eq!(kind(&e), FileErrorKind::NotFound);
    let e = odek
        .read_file(&sandbox, &read("deep"), &opts)
        .await
        .expect_err("a directory");
    assert_eq!(kind(&e), FileErrorKind::IsADirectory);
    odek.destroy(&sandbox).await.expect("destroy");
}

/// An ambiguous or absent old text refuses the whole edit and leaves the
/// file byte for byte (and its mtime); a good one returns the diff. On the
/// Debian and the BusyBox test images alike: nothing of the image is used.
#[tokio::test(flavor = "multi_thread")]
async fn a_refused_edit_writes_nothing() {
    for image in [BASE_IMAGE, BUSYBOX_IMAGE] {
        refused_edit_on(image).await;
    }
}

async fn refused_edit_on(image: &str) {
    let p = Project::new();
    let (odek, sandbox) = launch(&p, serde_json::json!({"sandbox_image": image})).await;
    let opts = ExecOptions::default();
    let host = p.path().join("a.py");
    let before = "x = 1\ny = 2\nx = 1\n";
    std::fs::write(&host, before).expect("write");
    let mtime = std::fs::metadata(&host).expect("stat").mtime_nsec();
    let edit = |edits: Vec<(&str, &str)>| EditFileRequest {
        path: "a.py".into(),
        edits: edits
            .into_iter()
            .map(|(o, n)| FileEdit {
                old_text: o.into(),
                new_text: n.into(),
            })
            .collect(),
        ..Default::default()
    };
    let e = odek
        .edit_file(
            &sandbox,
            &edit(vec![("y = 2", "y = 3"), ("x = 1", "x = 9")]),
            &opts,
        )
        .await
        .expect_err("ambiguous");
    assert_eq!(kind(&e), FileErrorKind::EditAmbiguous);
    assert!(e.to_string().contains("edit 2 of 2"), "{e}");
    let e = odek
        .edit_file(&sandbox, &edit(vec![("z = 0", "z = 1")]), &opts)
        .await
        .expect_err("absent");
    assert_eq!(kind(&e), FileErrorKind::EditNotFound);
    assert_eq!(std::fs::read_to_string(&host).expect("read"), before);
    assert_eq!(std::fs::metadata(&host).expect("stat").mtime_nsec(), mtime);
    let r = odek
        .edit_file(&sandbox, &edit(vec![("y = 2", "y = 3")]), &opts)
        .await
        .expect("applies");
    assert_eq!(
        r.diff,
        "--- a/workspace/a.py\n+++ b/workspace/a.py\n@@ -1,3 +1,3 @@\n x = 1\n-y = 2\n+y = 3\n x = 1\n"
    );
    assert_eq!(
        std::fs::read_to_string(&host).expect("read"),
        "x = 1\ny = 3\nx = 1\n"
    );
    odek.destroy(&sandbox).await.expect("destroy");
}

/// A symlink planted in the workspace that names a host path outside it
/// resolves inside the sandbox: reading it reads the sandbox's file, a
/// write through it lands in the sandbox, and the host's file is neither
/// read nor changed.
#[tokio::test(flavor = "multi_thread")]
async fn a_planted_symlink_resolves_inside_the_sandbox_only() {
    let p = Project::new();
    // A host file outside the workdir, directly in the host's /tmp (the
    // sandbox's /tmp is its own tmpfs, so the link's directory exists there).
    let host_file = tempfile::Builder::new()
        .prefix("odek-files-canary-")
        .tempfile_in("/tmp")
        .expect("tempfile");
    let canary = host_file.path().to_path_buf();
    std::fs::write(&canary, "HOST SECRET\n").expect("canary");
    std::fs::set_permissions(&canary, std::os::unix::fs::PermissionsExt::from_mode(0o666))
        .expect("chmod");
    let before = std::fs::metadata(&canary).expect("stat");
    let (odek, sandbox) = launch(&p, serde_json::json!({})).await;
    let opts = ExecOptions::default();
    std::os::unix::fs::symlink(&canary, p.path().join("to-host")).expect("symlink");
    std::os::unix::fs::symlink("/etc/hostname", p.path().join("hostname")).expect("symlink");

    let e = odek
        .read_file(&sandbox, &read("to-host"), &opts)
        .await
        .expect_err("the host path is not in the sandbox");
    assert_eq!(kind(&e), FileErrorKind::NotFound, "{e}");
    let r = odek
        .read_file(&sandbox, &read("hostname"), &opts)
        .await
        .expect("the sandbox's /etc/hostname");
    let host_hostname = std::fs::read_to_string("/etc/hostname").unwrap_or_default();
    assert_ne!(r.content, host_hostname, "read the host's /etc/hostname");
    let id = sandbox.container_id.clone().expect("a container");
    assert!(id.starts_with(r.content.trim()), "{} vs {id}", r.content);

    // A write through the link creates the file the link names, in the sandbox.
    let w = odek
        .write_file(&sandbox, &write("to-host", "through the link\n"), &opts)
        .await
        .expect("write through the link");
    assert_eq!(w.path, canary.display().to_string());
    let r = odek
        .read_file(&sandbox, &read(&canary.display().to_string()), &opts)
        .await
        .expect("the sandbox's copy");
    assert_eq!(r.content, "through the link\n");
    let after = std::fs::metadata(&canary).expect("stat");
    assert_eq!(
        (
            after.ino(),
            after.mtime(),
            after.mtime_nsec(),
            after.atime()
        ),
        (
            before.ino(),
            before.mtime(),
            before.mtime_nsec(),
            before.atime()
        ),
        "the host's file was touched"
    );
    assert_eq!(
        std::fs::read_to_string(&canary).expect("host"),
        "HOST SECRET\n"
    );
    assert!(std::fs::symlink_metadata(p.path().join("to-host"))
        .expect("the link")
        .file_type()
        .is_symlink());
    odek.destroy(&sandbox).await.expect("destroy");
}

/// A read-only workspace refuses a write with the reason, and nothing
/// appears on the host; /tmp stays writable.
#[tokio::test(flavor = "multi_thread")]
async fn a_read_only_workspace_refuses_writes_saying_why() {
    let p = Project::new();
    std::fs::write(p.path().join("keep.txt"), "as it was\n").expect("write");
    let (odek, sandbox) = launch(&p, serde_json::json!({"sandbox_readonly": true})).await;
    let opts = ExecOptions::default();
    for path in ["new.txt", "keep.txt"] {
        let e = odek
            .write_file(&sandbox, &write(path, "x"), &opts)
            .await
            .expect_err("read-only");
        assert_eq!(kind(&e), FileErrorKind::ReadOnly, "{e}");
        let m = e.to_string();
        assert!(m.contains("sandbox_readonly") && m.contains("EROFS"), "{m}");
    }
    assert!(!p.path().join("new.txt").exists());
    assert_eq!(
        std::fs::read_to_string(p.path().join("keep.txt")).expect("read"),
        "as it was\n"
    );
    let e = odek
        .edit_file(
            &sandbox,
            &EditFileRequest {
                path: "keep.txt".into(),
                edits: vec![FileEdit {
                    old_text: "as it was".into(),
                    new_text: "changed".into(),
                }],
                ..Default::default()
            },
            &opts,
        )
        .await
        .expect_err("read-only");
    assert_eq!(kind(&e), FileErrorKind::ReadOnly, "{e}");
    let w = odek
        .write_file(&sandbox, &write("/tmp/scratch/a.txt", "ok"), &opts)
        .await
        .expect("/tmp is writable");
    assert!(w.created);
    let r = odek
        .read_file(&sandbox, &read("keep.txt"), &opts)
        .await
        .expect("reads still work");
    assert_eq!(r.content, "as it was\n");
    assert!(Path::new(&p.path()).join("keep.txt").exists());
    odek.destroy(&sandbox).await.expect("destroy");
}

/// A directory of more entries than a listing holds (an agent can make
/// millions): the first 10000 by name, `truncated`, the directory's
/// `total`, and a last line of `listing` saying how many were left out —
/// never the whole directory in odek's memory.
#[tokio::test(flavor = "multi_thread")]
async fn a_huge_directory_lists_its_first_entries_and_says_how_many() {
    let p = Project::new();
    let (odek, sandbox) = launch(&p, serde_json::json!({})).await;
    let opts = ExecOptions::default();
    let dir = p.path().join("many");
    std::fs::create_dir(&dir).expect("mkdir");
    let long = "x".repeat(150);
    for i in (0..25_000).rev() {
        std::fs::File::create(dir.join(format!("f{i:06}-{long}"))).expect("create");
    }
    let list = |path: &str| ListDirectoryRequest {
        path: path.into(),
        ..Default::default()
    };
    let l = odek
        .list_directory(&sandbox, &list("many"), &opts)
        .await
        .expect("list");
    assert_eq!(
        (l.entries.len(), l.total, l.truncated),
        (10_000, 25_000, true)
    );
    assert_eq!(l.entries[0].name, format!("f000000-{long}"));
    assert_eq!(l.entries[9_999].name, format!("f009999-{long}"));
    let lines: Vec<&str> = l.listing.lines().collect();
    assert_eq!(lines.len(), 10_001);
    assert!(
        lines[10_000].starts_with("(15000 more entries not shown: the directory holds 25000"),
        "{}",
        lines[10_000]
    );
    // A small one: all of it, not truncated.
    let l = odek
        .list_directory(&sandbox, &list("."), &opts)
        .await
        .expect("list");
    assert_eq!((l.entries.len(), l.total, l.truncated), (1, 1, false));
    assert_eq!(l.listing, "[DIR] many");
    odek.destroy(&sandbox).await.expect("destroy");
}

/// A `/proc` file (whose size the kernel reports as 0) is read to its
/// end, a `/sys` file shorter than its reported size has the size of what
/// it holds; a text piece whose offset falls inside a character starts at
/// the next one and says so; an edit of a file over 16 MiB is refused on
/// its size.
#[tokio::test(flavor = "multi_thread")]
async fn proc_files_pieces_inside_a_character_and_an_edit_too_large() {
    let p = Project::new();
    let (odek, sandbox) = launch(&p, serde_json::json!({})).await;
    let opts = ExecOptions::default();
    let r = odek
        .read_file(&sandbox, &read("/proc/version"), &opts)
        .await
        .expect("read /proc/version");
    assert!(r.content.starts_with("Linux version"), "{r:?}");
    assert_eq!((r.size, r.truncated), (r.content.len() as u64, false));
    let r = odek
        .read_file(
            &sandbox,
            &ReadFileRequest {
                path: "/proc/self/status".into(),
                length: Some(4),
                ..Default::default()
            },
            &opts,
        )
        .await
        .expect("a piece of /proc/self/status");
    assert_eq!(r.content, "Name");
    assert_eq!((r.truncated, r.next_offset), (true, Some(4)));
    let r = odek
        .read_file(&sandbox, &read("/sys/class/net/lo/mtu"), &opts)
        .await
        .expect("read a /sys file");
    assert_eq!(r.content, "65536\n");
    assert_eq!((r.size, r.truncated), (6, false));

    std::fs::write(p.path().join("u.txt"), "h\u{e9}llo w\u{f6}rld\n").expect("write");
    let r = odek
        .read_file(
            &sandbox,
            &ReadFileRequest {
                path: "u.txt".into(),
                offset: Some(2),
                length: Some(5),
                ..Default::default()
            },
            &opts,
        )
        .await
        .expect("a piece from inside é");
    assert_eq!(r.content, "llo ");
    assert_eq!((r.offset, r.length, r.next_offset), (3, 4, Some(7)));

    let big = std::fs::File::create(p.path().join("big.log")).expect("create");
    big.set_len(20 << 20).expect("20 MiB");
    let e = odek
        .edit_file(
            &sandbox,
            &EditFileRequest {
                path: "big.log".into(),
                edits: vec![FileEdit {
                    old_text: "a".into(),
                    new_text: "b".into(),
                }],
                ..Default::default()
            },
            &opts,
        )
        .await
        .expect_err("too large");
    assert_eq!(kind(&e), FileErrorKind::TooLarge);
    assert!(
        e.to_string()
            .contains("20971520 bytes, more than edit_file's limit"),
        "{e}"
    );
    odek.destroy(&sandbox).await.expect("destroy");
}
