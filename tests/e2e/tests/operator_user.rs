//! Whose user the sandbox runs as (SPEC §6.1 "user"): the operator's own
//! uid:gid on a local engine — root for a root operator, the operator's
//! uid for a normal user in the `docker` group — with an account the image
//! did not have (a passwd line, an empty private tmpfs `HOME`, `HOME`,
//! `USER`, `LOGNAME`); root only when the operator asks. Every case runs as
//! root and as a non-root operator ([`odek_e2e::operators`]).

use std::os::unix::fs::MetadataExt;

use odek_e2e::{
    assert_refused, operators, run, startup_line, stderr, stdout, unique, Operator, Project, Tags,
    BASE_IMAGE, BUSYBOX_IMAGE, TEST_LABEL,
};

/// Prints uid, gid, name, HOME/USER/LOGNAME and the passwd entry of the
/// sandbox user, after writing `/workspace/notes.txt` and `$HOME/x`.
const PROBE: &str = r#"set -e; touch /workspace/notes.txt; touch "$HOME/x"; echo "uid=$(id -u) gid=$(id -g) name=$(id -un) home=$HOME user=$USER logname=$LOGNAME"; grep "^$(id -un):" /etc/passwd"#;

fn field<'a>(out: &'a str, key: &str) -> &'a str {
    out.split_whitespace()
        .find_map(|w| w.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("no {key}= in {out:?}"))
}

#[test]
fn the_operators_own_user_writes_the_workspace_and_has_a_home() {
    for op in operators() {
        let p = Project::as_operator(op);
        let out = p.run_odek(&[
            "run",
            "--sandbox-image",
            BASE_IMAGE,
            "--",
            "sh",
            "-c",
            PROBE,
        ]);
        let (o, e) = (stdout(&out), stderr(&out));
        assert_eq!(out.status.code(), Some(0), "{op:?}:\n{o}\n{e}");
        let (uid, gid) = (op.uid(), op.gid());
        assert_eq!(field(&o, "uid"), uid.to_string(), "{op:?}: {o}");
        assert_eq!(field(&o, "gid"), gid.to_string(), "{op:?}: {o}");
        let meta = std::fs::metadata(p.path().join("notes.txt")).expect("notes.txt on the host");
        assert_eq!(
            (meta.uid(), meta.gid()),
            (uid, gid),
            "{op:?}: the file the sandbox wrote is not the operator's"
        );
        match op {
            Operator::Root => {
                assert_eq!(field(&o, "name"), "root", "{o}");
                assert_eq!(field(&o, "home"), "/root", "{o}");
            }
            Operator::User => {
                assert_eq!(field(&o, "name"), "odek", "{o}");
                assert_eq!(field(&o, "home"), "/home/odek", "{o}");
                assert_eq!(field(&o, "user"), "odek", "{o}");
                assert_eq!(field(&o, "logname"), "odek", "{o}");
                assert!(
                    o.contains(&format!("odek:x:{uid}:{gid}:")),
                    "getpwuid does not resolve the sandbox user: {o}"
                );
            }
        }
        let line = startup_line(&out).unwrap_or_else(|| panic!("no startup line: {e}"));
        assert!(
            line.contains(&format!(" user={uid}:{gid} ")),
            "{op:?}: the startup line does not show the user: {line}"
        );
        assert!(p.leftovers().is_empty(), "{:?}", p.leftovers());
    }
}

#[test]
fn the_home_is_private_per_sandbox_and_the_image_is_untouched() {
    let op = Operator::User;
    for image in [BASE_IMAGE, BUSYBOX_IMAGE] {
        let p = Project::as_operator(op);
        let script = r#"touch "$HOME/left-here"; grep " $HOME " /proc/self/mounts; getent group "$(id -g)" 2>/dev/null || grep ":$(id -g):" /etc/group"#;
        let out = p.run_odek(&["run", "--sandbox-image", image, "--", "sh", "-c", script]);
        let o = stdout(&out);
        assert_eq!(out.status.code(), Some(0), "{image}: {o}{}", stderr(&out));
        let mount = o
            .lines()
            .find(|l| l.contains(" /home/odek "))
            .unwrap_or_else(|| panic!("{image}: HOME is not a mount: {o}"));
        let opts = mount.split_whitespace().nth(3).unwrap_or_default();
        assert!(
            mount.starts_with("tmpfs ")
                && opts.split(',').any(|x| x == "nosuid")
                && opts.split(',').any(|x| x == "nodev")
                && opts.split(',').any(|x| x == "mode=700"),
            "{image}: HOME is not a private nosuid,nodev tmpfs: {mount}"
        );
        assert!(
            o.lines().any(|l| l.contains(&format!(":{}:", op.gid()))),
            "{image}: the gid has no group entry: {o}"
        );
        // A second sandbox starts with an empty HOME.
        let again = p.run_odek(&[
            "run",
            "--sandbox-image",
            image,
            "--",
            "sh",
            "-c",
            r#"test ! -e "$HOME/left-here" && echo empty"#,
        ]);
        assert_eq!(stdout(&again).trim(), "empty", "{}", stderr(&again));
        // The image's own account files are as they were.
        let passwd = run(std::process::Command::new("docker").args([
            "run",
            "--rm",
            "--label",
            TEST_LABEL,
            "--entrypoint",
            "cat",
            image,
            "/etc/passwd",
        ]));
        assert!(
            !stdout(&passwd).contains("odek:"),
            "{image}: odek wrote into the image: {}",
            stdout(&passwd)
        );
        assert!(p.leftovers().is_empty(), "{:?}", p.leftovers());
    }
}

#[test]
fn root_only_when_the_operator_asks_never_when_the_project_does() {
    for op in operators() {
        let p = Project::as_operator(op);
        let out = p.run_odek(&[
            "run",
            "--sandbox-user",
            "root",
            "--sandbox-image",
            BASE_IMAGE,
            "--",
            "id",
            "-u",
        ]);
        assert_eq!(stdout(&out).trim(), "0", "{op:?}: {}", stderr(&out));
        std::fs::write(p.path().join("odek.json"), r#"{"sandbox_user": "0:0"}"#)
            .expect("odek.json");
        let out = p.run_odek(&["run", "--sandbox-image", BASE_IMAGE, "--", "id", "-u"]);
        assert_eq!(
            stdout(&out).trim(),
            op.uid().to_string(),
            "{op:?}: the project chose the user: {}",
            stderr(&out)
        );
        assert!(
            stderr(&out).contains("cannot choose the sandbox user"),
            "{}",
            stderr(&out)
        );
    }
}

#[test]
fn config_view_and_the_environment_block_show_the_user() {
    for op in operators() {
        let p = Project::as_operator(op);
        let (uid, gid) = (op.uid(), op.gid());
        let out = p.run_odek(&["config", "view", "--sandbox-image", BASE_IMAGE]);
        let t = stdout(&out);
        let user_line = t
            .lines()
            .find(|l| l.starts_with("user"))
            .unwrap_or_else(|| panic!("no user line: {t}{}", stderr(&out)));
        assert!(
            user_line.contains(&format!("{uid}:{gid}")) && user_line.contains("your own uid:gid"),
            "{op:?}: {user_line}"
        );
        let out = p.run_odek(&["config", "view", "--json", "--sandbox-image", BASE_IMAGE]);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
        assert_eq!(v["user"], format!("{uid}:{gid}"), "{v}");
        assert_eq!(v["user_choice"], "operator_ids", "{v}");
        assert_eq!(v["account"].is_null(), op == Operator::Root, "{v}");

        let up = p.run_odek(&["sandbox", "up", "--sandbox-image", BASE_IMAGE]);
        assert!(up.status.success(), "{}", stderr(&up));
        let name = stdout(&up).trim().to_string();
        let block = p.run_odek(&["sandbox", "describe", &name]);
        let b = stdout(&block);
        // The JSON names the commands' user, not the supervised
        // container's own (root, so that the supervisor can confine
        // itself), and the command says the same.
        let json = p.run_odek(&["sandbox", "describe", "--json", &name]);
        let id = p.run_odek(&["sandbox", "exec", &name, "--", "id", "-u"]);
        let _ = p.run_odek(&["sandbox", "down", &name]);
        let v: serde_json::Value = serde_json::from_slice(&json.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", stderr(&json)));
        assert_eq!(v["user"], format!("{uid}:{gid}"), "{op:?}: {v}");
        assert_eq!(
            stdout(&id).trim(),
            uid.to_string(),
            "{op:?}: {}",
            stderr(&id)
        );
        match op {
            Operator::Root => assert!(b.contains("Commands run as root"), "{b}"),
            Operator::User => assert!(
                b.contains(&format!(
                    "Commands run as user `odek` (uid {uid}, gid {gid}), not root"
                )) && b.contains("`HOME` is /home/odek"),
                "{b}"
            ),
        }
    }
}

#[test]
fn files_only_root_can_change_are_named_with_the_fix() {
    if odek_e2e::operator::euid() != 0 {
        eprintln!("note: needs root to leave root-owned files; CI runs it as root");
        return;
    }
    let op = Operator::User;
    let p = Project::as_operator(op);
    let build = p.path().join("build");
    std::fs::create_dir(&build).expect("mkdir build");
    std::fs::write(build.join("out.o"), "x").expect("write");
    let out = p.run_odek(&[
        "run",
        "--sandbox-image",
        BASE_IMAGE,
        "--",
        "sh",
        "-c",
        "echo y >> /workspace/build/out.o",
    ]);
    let e = stderr(&out);
    assert_ne!(out.status.code(), Some(0), "root's file was writable: {e}");
    assert!(e.contains("belong to root"), "no warning: {e}");
    assert!(e.contains("Permission denied"), "{e}");
    assert!(
        e.contains(&format!("sudo chown -R {}:{}", op.uid(), op.gid())),
        "the fix is not named: {e}"
    );
    // Control: without root's leftovers, no such warning.
    let q = Project::as_operator(op);
    let out = q.run_odek(&["run", "--sandbox-image", BASE_IMAGE, "--", "true"]);
    assert!(!stderr(&out).contains("belong to root"), "{}", stderr(&out));
}

/// An image built from [`BASE_IMAGE`] with these Dockerfile lines,
/// labelled for the suite: its tag, and the guard that removes it.
fn trap_image(lines: &str) -> (String, Tags) {
    let image = format!("odek-e2e-trap:{}", unique("t"));
    let ctx = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        ctx.path().join("Dockerfile"),
        format!("FROM {BASE_IMAGE}\nLABEL {TEST_LABEL}\n{lines}\n"),
    )
    .expect("Dockerfile");
    let out = run(std::process::Command::new("docker")
        .args(["build", "-q", "-t", &image])
        .arg(ctx.path()));
    assert!(out.status.success(), "{lines}: {}", stderr(&out));
    (image.clone(), Tags(vec![image]))
}

#[test]
fn an_image_that_would_lead_a_mount_into_the_project_is_refused_and_nothing_is_written() {
    // The engine follows an image's symlinks while it mounts, and creates a
    // missing target: without odek's check these left root-owned files and
    // directories in the project (a review found them), some of which a
    // non-root operator cannot remove.
    let cases = [
        (
            "RUN ln -sf /workspace/a/b/c /etc/passwd",
            true,
            "/etc/passwd",
        ),
        ("RUN ln -sf /workspace/x /etc/group", true, "/etc/group"),
        ("RUN rm -rf /home && ln -s /workspace /home", true, "/home"),
        ("RUN rm -rf /tmp && ln -s /workspace/tt /tmp", false, "/tmp"),
        ("VOLUME /workspace/vol", false, "VOLUME"),
        ("VOLUME [\"//workspace/PWN_vol1\"]", false, "VOLUME"),
        (
            "RUN ln -s /workspace /x\nVOLUME /x/PWN_repo/z",
            false,
            "is a symlink",
        ),
    ];
    for (lines, account_only, needle) in cases {
        let (image, _rmi) = trap_image(lines);
        for op in operators() {
            if account_only && op == Operator::Root {
                continue; // root has no account: nothing is mounted there
            }
            let p = Project::as_operator(op);
            let mut args: Vec<String> = vec!["run".into(), "--sandbox-image".into(), image.clone()];
            args.push("--".into());
            args.extend(p.marker_argv());
            let out = p.run_odek(&args.iter().map(String::as_str).collect::<Vec<_>>());
            assert_refused(&p, &out, needle);
            let entries: Vec<_> = std::fs::read_dir(p.path())
                .expect("read the project")
                .flatten()
                .map(|e| e.file_name())
                .collect();
            assert!(
                entries.is_empty(),
                "{lines} ({op:?}): something was written into the project: {entries:?}"
            );
        }
    }
}

#[test]
fn an_image_whose_etc_is_a_symlink_into_the_workspace_gets_nothing_written_there() {
    let image = format!("odek-e2e-etc-link:{}", unique("t"));
    // A RUN step cannot remove /etc (the engine mounts hosts, hostname and
    // resolv.conf there): the image is the BusyBox one with /etc swapped
    // for a symlink to /workspace, exported and imported again.
    let ctx = tempfile::tempdir().expect("tempdir");
    let script = format!(
        r#"set -e
cid=$(docker create --label {TEST_LABEL} {BUSYBOX_IMAGE} true)
trap 'docker rm -f "$cid" >/dev/null' EXIT
mkdir "$1/root"
docker export "$cid" | tar -x -C "$1/root"
rm -rf "$1/root/etc"
ln -s /workspace "$1/root/etc"
tar -C "$1/root" -c . | docker import --change 'LABEL {TEST_LABEL}' - {image} >/dev/null"#
    );
    let built = run(std::process::Command::new("bash")
        .args(["-c", &script, "build"])
        .arg(ctx.path()));
    assert!(built.status.success(), "{}", stderr(&built));
    let _rmi = Tags(vec![image.clone()]);
    let p = Project::as_operator(Operator::User);
    let out = p.run_odek(&["run", "--sandbox-image", &image, "--", "id", "-un"]);
    let e = stderr(&out);
    // Docker's init layer makes /etc a directory again (for hosts and
    // resolv.conf), so the launch may go on with the account mounted
    // there; an engine that keeps the symlink is refused by odek's check.
    match out.status.code() {
        Some(0) => assert_eq!(stdout(&out).trim(), "odek", "{e}"),
        Some(125) => assert!(e.contains("is a symlink"), "{e}"),
        other => panic!("{other:?}: {e}"),
    }
    let entries: Vec<_> = std::fs::read_dir(p.path())
        .expect("read the project")
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(
        entries.is_empty(),
        "something was written into the project: {entries:?}"
    );
    assert!(p.leftovers().is_empty(), "{:?}", p.leftovers());
}
