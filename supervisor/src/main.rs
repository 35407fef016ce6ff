//! `odek-supervisor`: the long-lived process of every sandbox (see the
//! library's docs and docs/SANDBOXING.md, "The supervisor").
//!
//! - `odek-supervisor serve --uid S --gid S --relay NAME [--commands U:G]`:
//!   confine itself to uid/gid S with only SETUID, SETGID, KILL and
//!   SETPCAP, listen on the abstract socket `\0NAME`, and serve the
//!   protocol ([`odek_supervisor::proto`]) on stdin/stdout (the owner link)
//!   and on each relay connection from uid S. The process stays the
//!   *keeper* of the owner link and forks the *server* that runs commands
//!   (`keeper.rs`), restarting it when it dies. With `--commands`, every
//!   command runs as uid U, gid G and no supplementary group: a `Start`
//!   naming another account is refused (odek always passes it).
//! - `odek-supervisor relay NAME`: copy stdin/stdout to and from `\0NAME`
//!   (what `docker exec --user S` runs to get a session).
//! - `odek-supervisor fs read|write|list PATH …`: one file operation
//!   (`fs.rs`), which the core runs as an ordinary command of the sandbox
//!   (as the command user, with its mounts) for its file tools.
//!
//! Single-threaded, keeper and server alike (fork is safe); every unsafe
//! block is a system call.
#![allow(unsafe_code)]

mod confine;
mod fs;
mod keeper;
mod kill;
mod pty;
mod relay;
mod ring;
mod server;
mod session;
mod spawn;
mod sys;

use std::io::Write;

/// Writes one line to stderr, ignoring errors (stderr may be non-blocking
/// or closed).
pub(crate) fn log(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// The usage text.
const USAGE: &str = "usage: odek-supervisor serve --uid S --gid S --relay NAME [--commands U:G]\n       odek-supervisor relay NAME\n       odek-supervisor fs read PATH OFFSET LENGTH | fs write PATH MAX | fs list PATH";

/// Parsed `serve` options.
fn serve_args(args: &[String]) -> Result<server::Options, String> {
    let (mut uid, mut gid, mut relay, mut commands) = (None, None, None, None);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || it.next().cloned().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--uid" => uid = Some(val()?.parse::<u32>().map_err(|e| format!("--uid: {e}"))?),
            "--gid" => gid = Some(val()?.parse::<u32>().map_err(|e| format!("--gid: {e}"))?),
            "--relay" => relay = Some(val()?),
            "--commands" => {
                let v = val()?;
                let ids = v
                    .split_once(':')
                    .and_then(|(u, g)| Some([u.parse::<u32>().ok()?, g.parse::<u32>().ok()?]))
                    .ok_or(format!("--commands {v:?}: want UID:GID"))?;
                commands = Some(ids);
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    let uid = uid.ok_or("--uid is required")?;
    let gid = gid.ok_or("--gid is required")?;
    if uid == 0 {
        return Err("--uid 0 would leave the supervisor root".into());
    }
    if let Some([u, g]) = commands {
        if u == uid || g == gid {
            return Err(format!(
                "--commands {u}:{g} shares the supervisor's own uid or gid"
            ));
        }
    }
    Ok(server::Options {
        uid,
        gid,
        relay: relay.ok_or("--relay is required")?,
        commands,
    })
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("serve") => match serve_args(&args[1..]) {
            Ok(options) => keeper::run(options),
            Err(e) => {
                log(&format!("odek-supervisor: {e}\n{USAGE}"));
                std::process::exit(70);
            }
        },
        Some("relay") if args.len() == 2 => std::process::exit(relay::relay(&args[1])),
        Some("fs") => std::process::exit(fs::main(&args[1..])),
        Some("--version") => println!("odek-supervisor {}", env!("CARGO_PKG_VERSION")),
        _ => {
            log(USAGE);
            std::process::exit(2);
        }
    }
}
