//! odek under a real pseudo-terminal (the approval prompt, terminal output):
//! spawn, read the approval card, answer, read the rest and the status.

use std::process::Command;
use std::time::Duration;

use expectrl::session::OsSession as Session;
use expectrl::{Eof, Expect};

/// The question after the approval card (SPEC §7.2).
pub const PROMPT: &str = "Approve? [y] yes, once  [t] trust (remember)  [N] no: ";

/// The question of `odek approve` after the card: its only approving
/// answer stores a trust (nothing runs, so there is no "once").
pub const TRUST_PROMPT: &str = "Trust these settings? [t] trust (remember)  [N] no: ";

/// Spawns `cmd` in a pseudo-terminal; each expectation waits up to
/// `timeout`.
pub fn spawn(cmd: Command, timeout: Duration) -> Session {
    let mut s = Session::spawn(cmd).expect("spawn odek in a pty");
    s.set_expect_timeout(Some(timeout));
    s
}

/// The rest of the session's output and the exit status.
///
/// # Panics
/// When the process does not exit normally.
pub fn finish(mut s: Session) -> (String, i32) {
    let rest = s.expect(Eof).expect("odek exits");
    let text = String::from_utf8_lossy(rest.as_bytes()).into_owned();
    let code = match s.get_process().wait().expect("wait") {
        expectrl::process::unix::WaitStatus::Exited(_, c) => c,
        other => panic!("odek did not exit normally: {other:?}"),
    };
    (text, code)
}

/// Waits for the approval card; returns it (the text before [`PROMPT`]).
pub fn card(s: &mut Session) -> String {
    let c = s.expect(PROMPT).expect("the approval prompt");
    String::from_utf8_lossy(c.before()).into_owned()
}

/// Waits for `odek approve`'s card; returns it (the text before
/// [`TRUST_PROMPT`]).
pub fn trust_card(s: &mut Session) -> String {
    let c = s.expect(TRUST_PROMPT).expect("the trust prompt");
    String::from_utf8_lossy(c.before()).into_owned()
}
