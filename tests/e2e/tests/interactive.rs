//! Stdin and a terminal through odek's supervisor (docs/CLI.md `-i`, `-t`,
//! `odek sandbox shell`; docs/SANDBOXING.md "Stdin and a terminal"): piped
//! stdin reaches the command and its end closes it; `-t` gives the command
//! a terminal of the local size that follows a resize; Ctrl-C in `-it` is
//! the command's; exit codes pass through; `-t` without a terminal and
//! `-i` without the supervisor are refused before anything runs; `odek
//! sandbox shell` runs what is typed into it. On the Debian and the
//! BusyBox test images.
//!
//! As tests/supervisor.rs: `cargo xtask e2e` names the static supervisor
//! in `ODEK_SUPERVISOR_BIN`; run without it, these tests fail saying so.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use expectrl::{Expect, Regex};
use odek_e2e::{stderr, stdout, tty, Project, BASE_IMAGE, BUSYBOX_IMAGE};

const IMAGES: [&str; 2] = [BASE_IMAGE, BUSYBOX_IMAGE];

/// The supervisor binary the suite uses; a failure names how to get one.
fn supervisor_bin() -> String {
    match std::env::var("ODEK_SUPERVISOR_BIN") {
        Ok(p) if !p.is_empty() => p,
        _ => panic!(
            "ODEK_SUPERVISOR_BIN is not set: run these tests through `cargo xtask e2e` (it builds the static odek-supervisor), or point ODEK_SUPERVISOR_BIN at one"
        ),
    }
}

/// `odek <args>` in `p` with the supervisor on.
fn sup(p: &Project, args: &[&str]) -> Command {
    let mut c = p.odek(args);
    c.env("ODEK_SUPERVISOR", supervisor_bin());
    c
}

/// Runs `c` with `input` on its stdin (a pipe).
fn with_stdin(mut c: Command, input: &[u8]) -> std::process::Output {
    c.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn().expect("spawn odek");
    let mut pipe = child.stdin.take().expect("stdin");
    pipe.write_all(input).expect("write stdin");
    drop(pipe);
    odek_e2e::wait_timeout(child, Duration::from_secs(120), "odek with piped stdin")
}

/// `c` in a new pseudo-terminal of 101 columns × 33 rows (set before
/// odek starts: the pty crate sets 80 × 24 from its side once the child
/// has started, so the child waits for a line before it sets the size).
fn in_terminal(c: &Command) -> expectrl::session::OsSession {
    in_terminal_then(c, "exec \"$0\" \"$@\"")
}

/// As [`in_terminal`], the shell running `then` (odek is `"$0" "$@"`).
fn in_terminal_then(c: &Command, then: &str) -> expectrl::session::OsSession {
    let mut sh = Command::new("sh");
    sh.arg("-c")
        .arg(format!("read _ && stty rows 33 cols 101 && {then}"))
        .arg(c.get_program())
        .args(c.get_args());
    if let Some(dir) = c.get_current_dir() {
        sh.current_dir(dir);
    }
    for (k, v) in c.get_envs() {
        match v {
            Some(v) => sh.env(k, v),
            None => sh.env_remove(k),
        };
    }
    let mut s = tty::spawn(sh, Duration::from_secs(60));
    s.send_line("").expect("start odek");
    s
}

fn ctx(out: &std::process::Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        stdout(out),
        stderr(out)
    )
}

#[test]
fn piped_stdin_reaches_the_command_and_its_end_closes_it() {
    let p = Project::new();
    for image in IMAGES {
        let out = with_stdin(
            sup(&p, &["run", "-i", "--sandbox-image", image, "--", "cat"]),
            b"hello\nworld\n",
        );
        assert_eq!(out.status.code(), Some(0), "{image}: {}", ctx(&out));
        assert_eq!(stdout(&out), "hello\nworld\n", "{image}: {}", ctx(&out));
        // Read, then the command's own status.
        let out = with_stdin(
            sup(
                &p,
                &[
                    "run",
                    "-i",
                    "--sandbox-image",
                    image,
                    "--",
                    "sh",
                    "-c",
                    "read x; echo \"got:$x\"; exit 7",
                ],
            ),
            b"line\n",
        );
        assert_eq!(out.status.code(), Some(7), "{image}: {}", ctx(&out));
        assert_eq!(stdout(&out), "got:line\n", "{image}: {}", ctx(&out));
        // Without -i the command reads an empty stdin (the control).
        let out = with_stdin(
            sup(&p, &["run", "--sandbox-image", image, "--", "cat"]),
            b"hello\n",
        );
        assert_eq!(out.status.code(), Some(0), "{image}: {}", ctx(&out));
        assert_eq!(stdout(&out), "", "{image}: {}", ctx(&out));
    }
    assert!(p.leftovers().is_empty(), "{:?}", p.leftovers());
}

#[test]
fn a_terminal_has_the_local_size_follows_a_resize_and_passes_the_status() {
    let p = Project::new();
    for image in IMAGES {
        let script = "tty; stty size; while read x; do stty size; [ \"$x\" = q ] && exit 7; done";
        let mut s = in_terminal(&sup(
            &p,
            &[
                "run",
                "-it",
                "--sandbox-image",
                image,
                "--",
                "sh",
                "-c",
                script,
            ],
        ));
        let pts = s
            .expect(Regex("/dev/pts/[0-9]+"))
            .unwrap_or_else(|e| panic!("{image}: `tty` names a terminal: {e}"));
        let pts = String::from_utf8_lossy(pts.before()).into_owned();
        let size = s
            .expect(Regex("[0-9]+ [0-9]+"))
            .unwrap_or_else(|e| panic!("{image}: no size: {e}"));
        let size = String::from_utf8_lossy(size.get(0).unwrap_or_default()).into_owned();
        assert_eq!(size, "33 101", "{image}: the initial size; {pts:?}");
        s.get_process_mut()
            .set_window_size(120, 40)
            .expect("resize the local terminal");
        // The resize and the typed line travel apart: type until the
        // command sees the new size.
        let mut seen = false;
        for _ in 0..20 {
            s.send_line("").expect("type");
            s.set_expect_timeout(Some(Duration::from_millis(500)));
            if s.expect("40 120").is_ok() {
                seen = true;
                break;
            }
        }
        assert!(seen, "{image}: the command never saw the resize");
        s.set_expect_timeout(Some(Duration::from_secs(60)));
        s.send_line("q").expect("type");
        let (rest, code) = tty::finish(s);
        assert_eq!(code, 7, "{image}: {rest}");
    }
    assert!(p.leftovers().is_empty(), "{:?}", p.leftovers());
}

#[test]
fn ctrl_c_in_it_mode_goes_to_the_command_not_to_odek() {
    let p = Project::new();
    for image in IMAGES {
        let script = "trap 'echo GOT-INT; exit 3' INT; echo ready; while :; do sleep 1; done";
        let mut s = in_terminal(&sup(
            &p,
            &[
                "run",
                "-it",
                "--sandbox-image",
                image,
                "--",
                "sh",
                "-c",
                script,
            ],
        ));
        s.expect("ready")
            .unwrap_or_else(|e| panic!("{image}: the command started: {e}"));
        s.send([3u8]).expect("Ctrl-C");
        s.expect("GOT-INT")
            .unwrap_or_else(|e| panic!("{image}: the command's trap ran: {e}"));
        // Its own status (an interrupt of odek would be 130).
        let (rest, code) = tty::finish(s);
        assert_eq!(code, 3, "{image}: {rest}");
    }
    assert!(p.leftovers().is_empty(), "{:?}", p.leftovers());
}

#[test]
fn t_mode_alone_gives_a_terminal_and_ctrl_c_stays_odeks() {
    let p = Project::new();
    let mut s = in_terminal(&sup(
        &p,
        &[
            "run",
            "-t",
            "--sandbox-image",
            BUSYBOX_IMAGE,
            "--",
            "sh",
            "-c",
            "tty; stty size; sleep 1; stty size; echo ready; sleep 60",
        ],
    ));
    let pts = s.expect(Regex("/dev/pts/[0-9]+")).expect("a terminal");
    let pts = String::from_utf8_lossy(pts.before()).into_owned();
    let seen = s.expect("ready").expect("started");
    let seen = pts + &String::from_utf8_lossy(seen.before());
    assert!(seen.contains("33 101"), "the initial size: {seen:?}");
    // -t alone forwards no keys: Ctrl-C is odek's SIGINT (130, the
    // sandbox removed).
    s.send([3u8]).expect("Ctrl-C");
    let (rest, code) = tty::finish(s);
    assert_eq!(code, 130, "{rest}");
    assert!(p.leftovers().is_empty(), "{:?}", p.leftovers());
}

#[test]
fn t_without_a_terminal_is_refused_before_anything_runs() {
    let p = Project::new();
    let touch = "touch /workspace/ran";
    for flags in [&["-t"][..], &["-it"], &["-i", "-t"]] {
        let mut args = vec!["run"];
        args.extend_from_slice(flags);
        args.extend_from_slice(&["--sandbox-image", BUSYBOX_IMAGE, "--", "sh", "-c", touch]);
        let out = with_stdin(sup(&p, &args), b"");
        assert_eq!(out.status.code(), Some(125), "{flags:?}: {}", ctx(&out));
        assert!(
            stderr(&out).contains("the input device is not a TTY"),
            "{flags:?}: {}",
            ctx(&out)
        );
        assert!(!p.path().join("ran").exists(), "{flags:?}: the command ran");
        assert!(p.leftovers().is_empty(), "{flags:?}: {:?}", p.leftovers());
    }
    // The same command with -i alone runs (the control).
    let out = with_stdin(
        sup(
            &p,
            &[
                "run",
                "-i",
                "--sandbox-image",
                BUSYBOX_IMAGE,
                "--",
                "sh",
                "-c",
                touch,
            ],
        ),
        b"",
    );
    assert_eq!(out.status.code(), Some(0), "{}", ctx(&out));
    assert!(p.path().join("ran").exists(), "the control did not run");
}

#[test]
fn without_the_supervisor_i_and_t_are_refused_naming_the_fix() {
    let p = Project::new();
    let touch = "touch /workspace/ran";
    let mut off = p.odek(&[
        "run",
        "-i",
        "--sandbox-image",
        BASE_IMAGE,
        "--",
        "sh",
        "-c",
        touch,
    ]);
    off.env("ODEK_SUPERVISOR", "");
    let out = with_stdin(off, b"x\n");
    assert_eq!(out.status.code(), Some(125), "{}", ctx(&out));
    assert!(stderr(&out).contains("ODEK_SUPERVISOR"), "{}", ctx(&out));
    assert!(stderr(&out).contains("nothing ran"), "{}", ctx(&out));
    assert!(!p.path().join("ran").exists(), "the command ran");
    assert!(p.leftovers().is_empty(), "{:?}", p.leftovers());
}

/// A detached sandbox (`odek sandbox up`): `sandbox exec -i` and `sandbox
/// shell` reach its supervisor through a relay (another process).
#[test]
fn sandbox_exec_i_and_sandbox_shell_on_a_detached_sandbox() {
    let p = Project::new();
    for (image, shell) in [(BASE_IMAGE, "bash"), (BUSYBOX_IMAGE, "sh")] {
        let up = sup(&p, &["sandbox", "up", "--sandbox-image", image])
            .output()
            .expect("sandbox up");
        assert!(up.status.success(), "{image}: {}", ctx(&up));
        let name = stdout(&up).trim().to_string();
        let exec = with_stdin(
            p.odek(&["sandbox", "exec", "-i", &name, "--", "cat"]),
            b"through the relay\n",
        );
        let mut s = in_terminal(&p.odek(&["sandbox", "shell", &name]));
        let typed = s
            .send_line("echo \"$((6*7))-$(basename \"$0\")-$(tty)\"")
            .and_then(|()| s.expect(Regex("42-[a-z]+-/dev/pts/[0-9]+")));
        let seen = typed
            .as_ref()
            .map(|c| String::from_utf8_lossy(c.get(0).unwrap_or_default()).into_owned());
        let _ = s.send_line("exit 5");
        let (rest, code) = tty::finish(s);
        let down = p.odek(&["sandbox", "down", &name]).output().expect("down");
        assert_eq!(exec.status.code(), Some(0), "{image}: {}", ctx(&exec));
        assert_eq!(stdout(&exec), "through the relay\n", "{image}");
        let seen = seen.unwrap_or_else(|e| panic!("{image}: the shell ran nothing: {e}\n{rest}"));
        assert!(
            seen.starts_with(&format!("42-{shell}-/dev/pts/")),
            "{image}: {seen}"
        );
        assert_eq!(code, 5, "{image}: the shell's status: {rest}");
        assert!(down.status.success(), "{image}: {}", ctx(&down));
    }
    assert!(p.leftovers().is_empty(), "{:?}", p.leftovers());
}

/// The local terminal leaves raw mode however `-it` ends: the command's
/// exit, a timeout, SIGTERM to odek (the terminal's settings are read
/// after odek exited: line editing and key signals back on).
#[test]
fn the_local_terminal_is_restored_on_every_way_out() {
    let p = Project::new();
    let cases: [(&[&str], bool, i32); 3] = [
        (&["--", "sh", "-c", "echo in; exit 4"], false, 4),
        (
            &["--timeout", "2", "--", "sh", "-c", "echo in; sleep 60"],
            false,
            124,
        ),
        (&["--", "sh", "-c", "echo in; sleep 60"], true, 143),
    ];
    // odek runs as a job of the terminal's shell (its stdin the terminal,
    // given explicitly), so that the shell reads the terminal's settings
    // after it; a watcher sends SIGTERM once told to.
    let script = r#"exec 3<&0; "$0" "$@" <&3 3<&- & pid=$!; if [ -n "$TEST_KILL" ]; then ( while ! [ -e "$TEST_GO" ]; do sleep 0.1; done; kill -TERM $pid ) & fi; wait $pid; echo "status=$?"; stty -a"#;
    for (args, kill, code) in cases {
        let mut argv = vec!["run", "-it", "--sandbox-image", BUSYBOX_IMAGE];
        argv.extend_from_slice(args);
        let mut c = sup(&p, &argv);
        let go = p.home.path().join("go");
        c.env("TEST_GO", &go);
        if kill {
            c.env("TEST_KILL", "1");
        }
        let mut s = in_terminal_then(&c, script);
        s.expect("in").expect("the command started");
        std::fs::write(&go, "").expect("go");
        let seen = s.expect(Regex("status=[0-9]+")).expect("odek ended");
        let status = String::from_utf8_lossy(seen.get(0).unwrap_or_default()).into_owned();
        let (rest, _) = tty::finish(s);
        let _ = std::fs::remove_file(&go);
        assert_eq!(status, format!("status={code}"), "{args:?}: {rest}");
        let words: Vec<&str> = rest.split_whitespace().collect();
        for setting in ["icanon", "isig", "icrnl", "opost"] {
            assert!(
                words.contains(&setting),
                "{args:?}: {setting} not restored: {rest}"
            );
        }
    }
    assert!(p.leftovers().is_empty(), "{:?}", p.leftovers());
}
