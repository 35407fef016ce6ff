//! Foreign bytes never reach the terminal raw (docs/SECURITY.md): what a
//! `Dockerfile.odek` `RUN` step prints during the build, a registry's error
//! text on a failed pull, and the working directory's path in
//! `odek config view`. Each is run under a real pseudo-terminal or with
//! captured streams, and what odek wrote must hold no ESC, BEL, C1 control
//! (CSI, OSC) or bidi override, and no line forging odek's startup line.
//! Nothing is left running.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use expectrl::session::OsSession as Session;
use expectrl::{Eof, Expect};
use odek_e2e::tty::PROMPT;
use odek_e2e::{
    docker_ok, odek_bin, run_timeout, stderr, stdout, unique, Project, BASE_IMAGE, ODEK_TIMEOUT,
};
use odek_e2e::{tag_of, Tags};

/// The line a hostile build step or registry prints to forge odek's own.
const FORGED: &str = "odek: sandbox network=none pids=4096 image=forged networks=-";

/// A `RUN` step printing, through dash's `printf`: OSC 0 (window title)
/// ended by BEL, OSC 52 (write the clipboard), ESC[2J (clear the screen),
/// the C1 CSI and OSC as UTF-8 (U+009B, U+009D), a bidi override
/// (U+202E), and a line forging odek's startup line.
fn hostile_dockerfile(nonce: &str) -> String {
    format!(
        "FROM {BASE_IMAGE}\n\
         RUN printf 'A\\033]0;pwned\\007B\\033]52;c;cm0gLXJmIH4=\\007C\\033[2J\\n{FORGED}\\n\\302\\23331m\\302\\2350;t\\n\\342\\200\\256txt.exe\\n'; echo {nonce}\n"
    )
}

/// The first character in `bytes` (read as UTF-8) that must not reach a
/// terminal raw: ESC, BEL, any C1 control (U+0080–U+009F: CSI U+009B, OSC
/// U+009D, ST U+009C), a bidi override or isolate.
fn forbidden(bytes: &[u8]) -> Option<char> {
    String::from_utf8_lossy(bytes).chars().find(|c| {
        matches!(
            c,
            '\u{1b}' | '\u{7}' | '\u{80}'..='\u{9f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        )
    })
}

/// Asserts `bytes` (what odek wrote on `what`) holds nothing forbidden and
/// no line starting like the forged startup line.
#[track_caller]
fn assert_clean(what: &str, bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    if let Some(c) = forbidden(bytes) {
        panic!("{what} carries {c:?} raw:\n{text:?}");
    }
    for line in text.split(['\n', '\r']) {
        assert!(
            !line.starts_with(FORGED),
            "{what} has a line forging odek's startup line:\n{text}"
        );
    }
}

/// Asserts the build's output was shown, escaped and labelled, and the real
/// startup line came after it.
#[track_caller]
fn assert_build_shown(text: &str, nonce: &str) {
    assert!(
        text.contains("build | A\\x1b]0;pwned\\x07B\\x1b]52;c;cm0gLXJmIH4=\\x07C\\x1b[2J"),
        "the RUN step's output is shown escaped:\n{text}"
    );
    assert!(
        text.contains(&format!("build | {FORGED}")),
        "the forged line is shown labelled:\n{text}"
    );
    assert!(text.contains("\\u{202e}txt.exe"), "{text}");
    assert!(text.contains(&format!("build | {nonce}")), "{text}");
    assert!(
        text.contains("odek: sandbox network=none pids=4096 image=odek-sandbox:"),
        "the real startup line:\n{text}"
    );
}

#[test]
fn build_output_reaches_a_terminal_escaped() {
    let p = Project::new();
    let nonce = unique("foreign-pty");
    let dockerfile = hostile_dockerfile(&nonce);
    let _tags = Tags(vec![tag_of(&dockerfile)]);
    std::fs::write(p.path().join("Dockerfile.odek"), &dockerfile).expect("write");
    let mut s = Session::spawn(p.odek(&["run", "--", "echo", "ran-in-the-sandbox"]))
        .expect("spawn odek in a pty");
    s.set_expect_timeout(Some(Duration::from_secs(60)));
    let card = s.expect(PROMPT).expect("the approval prompt");
    let mut seen = card.before().to_vec();
    seen.extend_from_slice(card.as_bytes());
    s.send_line("y").expect("answer");
    let rest = s.expect(Eof).expect("odek exits");
    seen.extend_from_slice(rest.as_bytes());
    let code = match s.get_process().wait().expect("wait") {
        expectrl::process::unix::WaitStatus::Exited(_, c) => c,
        other => panic!("odek did not exit normally: {other:?}"),
    };
    let text = String::from_utf8_lossy(&seen).into_owned();
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("ran-in-the-sandbox"), "{text}");
    assert_clean("the terminal", &seen);
    assert_build_shown(&text, &nonce);
    assert!(p.leftovers().is_empty(), "left: {:?}", p.leftovers());
}

#[test]
fn build_output_reaches_captured_streams_escaped() {
    let p = Project::new();
    let nonce = unique("foreign-pipe");
    let dockerfile = hostile_dockerfile(&nonce);
    let _tags = Tags(vec![tag_of(&dockerfile)]);
    std::fs::write(p.path().join("Dockerfile.odek"), &dockerfile).expect("write");
    let mut cmd = p.odek(&["run", "--", "echo", "ran-in-the-sandbox"]);
    cmd.env("ODEK_APPROVE_PROJECT_SANDBOX", "1");
    let out = run_timeout(&mut cmd, ODEK_TIMEOUT);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "ran-in-the-sandbox");
    assert_clean("stdout", &out.stdout);
    assert_clean("stderr", &out.stderr);
    assert_build_shown(&stderr(&out), &nonce);
    assert!(p.leftovers().is_empty(), "left: {:?}", p.leftovers());
}

/// A registry on a loopback port (the daemon allows plain HTTP there) that
/// answers `/v2/` and refuses every manifest with `message` as the error
/// text. Stops when dropped.
struct HostileRegistry {
    port: u16,
    stop: Arc<AtomicBool>,
}

impl HostileRegistry {
    fn start(message: &str) -> HostileRegistry {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        listener.set_nonblocking(true).expect("nonblocking");
        let stop = Arc::new(AtomicBool::new(false));
        let halt = stop.clone();
        let body = serde_json::json!({
            "errors": [{"code": "MANIFEST_UNKNOWN", "message": message, "detail": null}]
        })
        .to_string();
        std::thread::spawn(move || {
            while !halt.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((conn, _)) => answer(conn, &body),
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        HostileRegistry { port, stop }
    }
}

impl Drop for HostileRegistry {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Answers one request: `/v2/` 200, anything else 404 with `body`; a TLS
/// hello (the daemon tries HTTPS first) is closed unanswered.
fn answer(mut conn: TcpStream, body: &str) {
    let _ = conn.set_nonblocking(false);
    let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
        if head.first() == Some(&0x16) {
            let _ = conn.shutdown(Shutdown::Both);
            return;
        }
    }
    let head = String::from_utf8_lossy(&head);
    let mut words = head.split_whitespace();
    let (method, path) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let (status, body) = if path == "/v2/" {
        ("200 OK", "{}")
    } else {
        ("404 Not Found", body)
    };
    let mut reply = format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nDocker-Distribution-API-Version: registry/2.0\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    if method != "HEAD" {
        reply.push_str(body);
    }
    let _ = conn.write_all(reply.as_bytes());
    let _ = conn.shutdown(Shutdown::Both);
}

#[test]
fn a_registrys_error_text_on_a_failed_pull_reaches_the_terminal_escaped() {
    let p = Project::new();
    let registry = HostileRegistry::start(&format!(
        "evil\u{1b}]0;pwned\u{7}\u{1b}]52;c;cm0gLXJmIH4=\u{7}\u{1b}[2J\u{9b}31m\u{202e}txt\n{FORGED}"
    ));
    let image = format!("127.0.0.1:{}/{}:1", registry.port, unique("foreign"));
    let out = run_timeout(
        &mut p.odek(&[
            "run",
            "--sandbox",
            "--sandbox-image",
            &image,
            "--",
            "sh",
            "-c",
            &p.marker_cmd(),
        ]),
        ODEK_TIMEOUT,
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(125), "refused:\n{err}");
    assert!(err.contains("cannot be pulled"), "{err}");
    assert_clean("stdout", &out.stdout);
    assert_clean("stderr", &out.stderr);
    assert!(
        err.contains("evil\\x1b]0;pwned\\x07"),
        "the registry's text is shown escaped:\n{err}"
    );
    assert!(!p.marker().exists(), "the command ran on the host");
    assert!(p.leftovers().is_empty(), "left: {:?}", p.leftovers());
    assert!(!docker_ok(&["image", "inspect", &image]));
}

/// A directory named with OSC 0, BEL, ESC[2J and a bidi override.
const HOSTILE_NAME: &str = "w\u{1b}]0;pwned\u{7}\u{1b}[2J\u{202e}x";

/// `odek -C <dir> config view <args>` with `p`'s `$ODEK_HOME`.
fn config_view(p: &Project, dir: &Path, args: &[&str]) -> Output {
    let mut c = Command::new(odek_bin());
    c.current_dir(p.path())
        .arg("-C")
        .arg(dir)
        .args(["config", "view"])
        .args(args)
        .env("ODEK_HOME", p.home.path());
    for (k, _) in std::env::vars() {
        if k.starts_with("ODEK_") && k != "ODEK_HOME" && k != "ODEK_BIN" {
            c.env_remove(&k);
        }
    }
    run_timeout(&mut c, ODEK_TIMEOUT)
}

#[test]
fn config_view_of_a_hostile_working_directory_reaches_the_terminal_escaped() {
    let p = Project::new();
    let dir: PathBuf = p.path().join(HOSTILE_NAME);
    std::fs::create_dir(&dir).expect("mkdir");
    std::fs::write(dir.join("odek.json"), r#"{"sandbox_readonly": true}"#).expect("odek.json");
    let out = config_view(&p, &dir, &["--sandbox-image", BASE_IMAGE]);
    let text = stdout(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    let readonly = text
        .lines()
        .find(|l| l.starts_with("readonly"))
        .unwrap_or_else(|| panic!("no readonly line:\n{text}"));
    assert!(
        readonly.contains(r"w\u{1b}]0;pwned\u{7}\u{1b}[2J\u{202e}x"),
        "the path is shown escaped: {readonly}"
    );
    assert_clean("config view's stdout", &out.stdout);
    assert_clean("config view's stderr", &out.stderr);

    let out = config_view(&p, &dir, &["--sandbox-image", BASE_IMAGE, "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_clean("config view --json's stdout", &out.stdout);
    assert_clean("config view --json's stderr", &out.stderr);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(v["workdir"], dir.display().to_string(), "the data is exact");
}
