//! The approval prompt (SPEC §7.2) and `odek approvals list|revoke`.

use std::io::{BufRead, IsTerminal, Write};

use anyhow::Context;
use odek_core::approval::{Approval, ApprovalError, ApprovalRequest, Decision, Store, Via};
use odek_core::approve::{Asker, Decided};
use odek_core::{Client, Plan};

/// The approval a plan needs, decided by core
/// ([`Client::decide_approval`]): a standing approval (stored trust or
/// `ODEK_APPROVE_PROJECT_SANDBOX=1`), else the prompt on a terminal, else
/// refused. `Ok(None)` when the plan needs none.
pub async fn obtain(odek: &Client, plan: &Plan) -> Result<Option<Approval>, odek_core::Error> {
    let Some(req) = &plan.approval else {
        return Ok(None);
    };
    match odek.decide_approval(plan, &Prompt).await? {
        Decided::Launch(a) => {
            match a.as_ref().map(|a| a.via) {
                Some(Via::Env) => errln!(
                    "odek: project settings of {} approved by {}=1",
                    odek_core::text::shown(&req.config),
                    odek_core::config::APPROVE_ENV
                ),
                Some(Via::Trust) => errln!(
                    "odek: trusted; key {} stored in {}",
                    req.key,
                    odek_core::text::shown(Store::new(&plan.odek_home).path())
                ),
                _ => {}
            }
            Ok(a)
        }
        Decided::Unasked { .. } => Err(ApprovalError::NonInteractive {
            config: req.config.clone(),
            knobs: req.knobs.join(", "),
            project_dir: req.project_dir.clone(),
        }
        .into()),
    }
}

/// The approval prompt (SPEC §7.2) on the terminal: the card on stderr, the
/// answer from stdin. Nobody is asked without a terminal on stdin, or when
/// the card cannot be shown (stderr closed or full): nobody would know what
/// they approve.
struct Prompt;

impl Asker for Prompt {
    type Error = odek_core::Error;

    async fn ask(&self, req: &ApprovalRequest) -> Result<Option<Decision>, odek_core::Error> {
        if !std::io::stdin().is_terminal() {
            if let Some(why) = req.asks_again_because() {
                errln!("odek: note: {why}");
            }
            return Ok(None);
        }
        let Some(answer) = ask_line(
            req.render_card(),
            "Approve? [y] yes, once  [t] trust (remember)  [N] no: ",
        )
        .await
        else {
            return Ok(None);
        };
        match answer.as_deref() {
            Some("y") | Some("yes") => Ok(Some(Decision::Once)),
            Some("t") | Some("trust") => Ok(Some(Decision::Trust)),
            _ => {
                errln!();
                Err(ApprovalError::Denied {
                    config: req.config.clone(),
                }
                .into())
            }
        }
    }
}

/// Shows `card` and `question` on stderr and reads one line from stdin
/// (a terminal): `Some(Some(answer))` trimmed and lower-cased,
/// `Some(None)` at end of input, `None` when the card could not be shown
/// (stderr closed or full: nobody would know what they approve).
async fn ask_line(card: String, question: &'static str) -> Option<Option<String>> {
    tokio::task::spawn_blocking(move || {
        let mut err = std::io::stderr().lock();
        write!(err, "{card}{question}")
            .and_then(|_| err.flush())
            .ok()?;
        let mut line = String::new();
        match std::io::stdin().lock().read_line(&mut line) {
            Ok(0) | Err(_) => Some(None),
            Ok(_) => Some(Some(line.trim().to_ascii_lowercase())),
        }
    })
    .await
    .ok()
    .flatten()
}

/// The question of `odek approve`: its only answer that approves is a
/// stored trust (nothing runs, so there is no "once"), offered as `odek
/// run`'s prompt offers it (`[t] trust (remember)`, README); `y` is taken
/// as `t` (the question is whether to trust).
pub(crate) const TRUST_QUESTION: &str = "Trust these settings? [t] trust (remember)  [N] no: ";

/// The flag of `odek approve` that stores the trust without asking (the
/// card is still printed): for a shell without a terminal.
pub(crate) const YES_FLAG: &str = "--yes";

/// What `odek approve` ended with (its `--json` `status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    /// The project asks for nothing that needs approval.
    NotNeeded,
    /// A trust for these settings was in the store already.
    AlreadyTrusted,
    /// Answered y or t: the trust is stored now.
    Trusted,
    /// Any other answer, or end of input: nothing stored.
    Denied,
    /// No terminal on stdin and no `--yes` (or the card could not be
    /// shown): nobody was asked, nothing stored.
    NoTerminal,
    /// Answered y or t, but the store could not be written: nothing
    /// stored (the old store is left as it was, SPEC §7.3).
    Failed,
}

impl Outcome {
    fn as_str(self) -> &'static str {
        match self {
            Outcome::NotNeeded => "not_needed",
            Outcome::AlreadyTrusted => "already_trusted",
            Outcome::Trusted => "trusted",
            Outcome::Denied => "denied",
            Outcome::NoTerminal => "no_terminal",
            Outcome::Failed => "failed",
        }
    }
}

/// `odek approve [-C DIR] [sandbox flags] [--yes] [--json]`: resolves the
/// project as `odek run` would (the sandbox forced on, as `odek mcp` does),
/// shows the approval card at the terminal and stores the trust on `t` (or
/// `y`), or with `--yes` prints the card and stores it without asking, a
/// terminal or not ([`Client::approve`] with [`Decision::Trust`]: the store
/// and key of `odek run`'s `t`). Nothing is launched, pulled or built:
/// resolve creates nothing. Exit 0 when trusted (now or before) or nothing
/// needs approval; 1 otherwise.
pub async fn approve_project(
    cli: &crate::Cli,
    odek: &Client,
    reporter: &crate::output::Stderr,
    args: &crate::ApproveArgs,
) -> std::process::ExitCode {
    use std::process::ExitCode;
    let failed = |e: &anyhow::Error| {
        crate::output::print_anyhow(e);
        ExitCode::from(crate::exit::FAILED)
    };
    let mut inputs = match args.sandbox.inputs(&cli.workdir) {
        Ok(i) => i,
        Err(e) => return failed(&e),
    };
    if inputs
        .force_sandbox(Some("odek approve (implies --sandbox)"))
        .is_err()
    {
        errln!("odek: error: `odek approve` reviews the settings of a sandbox, and --no-sandbox turns it off; drop --no-sandbox");
        return ExitCode::from(crate::exit::USAGE);
    }
    let plan = match odek.resolve(&inputs, reporter).await {
        Ok(p) => p,
        Err(e) => {
            crate::output::print_error(&e);
            return ExitCode::from(crate::exit::FAILED);
        }
    };
    crate::commands::verbose_plan(cli, odek, &plan);
    let store = Store::new(&plan.odek_home);
    let store_path = odek_core::text::shown(store.path());
    let outcome = match &plan.approval {
        None => {
            errln!(
                "odek: nothing to approve: the project in {} asks for no sandbox setting that needs approval (no odek.json setting of SPEC §7.1, no Dockerfile.odek); `odek run` and `odek mcp` launch it without asking",
                odek_core::text::shown(&plan.workdir)
            );
            Outcome::NotNeeded
        }
        Some(req) if req.trusted => {
            errln!(
                "odek: already trusted: the settings {} asks for (key {}) are trusted in {store_path}; `odek run` and `odek mcp` launch them without asking",
                odek_core::text::shown(&req.config),
                req.key
            );
            Outcome::AlreadyTrusted
        }
        Some(req) => ask_trust(odek, &plan, req, &store_path, args.yes).await,
    };
    if args.json {
        let v = serde_json::json!({
            "schema": "odek.approve-result/1",
            "status": outcome.as_str(),
            "project_dir": plan.workdir.display().to_string(),
            "key": plan.approval.as_ref().map(|r| r.key.clone()),
            "store": store.path().display().to_string(),
            "request": plan.approval,
        });
        match crate::commands::json_for_terminal(&v) {
            Ok(text) => outln!("{text}"),
            Err(e) => return failed(&e),
        }
    }
    match outcome {
        Outcome::NotNeeded | Outcome::AlreadyTrusted | Outcome::Trusted => ExitCode::SUCCESS,
        Outcome::Denied | Outcome::NoTerminal | Outcome::Failed => {
            ExitCode::from(crate::exit::FAILED)
        }
    }
}

/// Asks at the terminal whether to trust `req` and stores the trust on
/// `t` or `y` — with `yes` (`--yes`), prints the card and stores it
/// without asking, a terminal or not; says what happened on stderr.
async fn ask_trust(
    odek: &Client,
    plan: &Plan,
    req: &ApprovalRequest,
    store: &str,
    yes: bool,
) -> Outcome {
    let env_note = if req.approved_by_env {
        format!(
            " ({}=1 is set, but it approves a single run and stores nothing)",
            odek_core::config::APPROVE_ENV
        )
    } else {
        String::new()
    };
    let answer = if yes {
        // The card is shown all the same: what is trusted is on record in
        // the output of whoever ran it.
        if show(&req.render_card()).is_none() {
            return Outcome::NoTerminal;
        }
        Some("t".to_string())
    } else if !std::io::stdin().is_terminal() {
        errln!(
            "{}",
            no_terminal_text(&req.config, &req.knobs, &req.project_dir, &env_note)
        );
        return Outcome::NoTerminal;
    } else {
        match ask_line(req.render_card(), TRUST_QUESTION).await {
            Some(answer) => answer,
            None => return Outcome::NoTerminal,
        }
    };
    match answer.as_deref() {
        Some("y") | Some("yes") | Some("t") | Some("trust") => {
            match odek.approve(plan, Decision::Trust) {
                Ok(_) => {
                    errln!(
                        "odek: trusted{}; key {} stored in {store}; nothing ran. `odek run` and `odek mcp` now launch these settings without asking (`odek approvals revoke {}` undoes it)",
                        if yes { " (--yes)" } else { "" },
                        req.key,
                        req.key
                    );
                    Outcome::Trusted
                }
                Err(e) => {
                    crate::output::print_error(&e);
                    Outcome::Failed
                }
            }
        }
        _ => {
            errln!();
            errln!(
                "odek: not approved: nothing was stored{env_note}; the project's settings still ask at the next run"
            );
            Outcome::Denied
        }
    }
}

/// The refusal of `odek approve` without a terminal on stdin and without
/// [`YES_FLAG`]: names the flag and the terminal way.
fn no_terminal_text(config: &str, knobs: &[String], project_dir: &str, env_note: &str) -> String {
    let cmd = odek_core::approval::approve_command(project_dir);
    format!(
        "odek: error (config): {} asks for project sandbox settings ({}) that need approval, and `odek approve` asks at a terminal: stdin is not one{env_note}. Run `{cmd}` in a terminal and answer `t`, or `{cmd} {YES_FLAG}` to print the card and store the trust without asking. Nothing was stored",
        odek_core::text::shown(config),
        knobs.join(", "),
    )
}

/// Writes `card` on stderr; `None` when it could not be shown (stderr
/// closed or full).
fn show(card: &str) -> Option<()> {
    let mut err = std::io::stderr().lock();
    write!(err, "{card}").and_then(|_| err.flush()).ok()
}

fn store() -> anyhow::Result<Store> {
    let env = std::env::vars().collect();
    let home = odek_core::config::odek_home(&env)?;
    Ok(Store::new(home))
}

/// `odek approvals list`.
pub fn list(json: bool) -> anyhow::Result<()> {
    let s = store()?;
    let keys = s.read()?;
    let meta = s.checked_meta()?;
    if json {
        let rows: Vec<serde_json::Value> = keys
            .iter()
            .filter(|(k, v)| **v && !k.contains(':'))
            .map(|(k, _)| {
                let m = meta.get(k);
                serde_json::json!({
                    "key": k,
                    "project_dir": m.map(|m| m.project_dir.clone()),
                    "granted_at": m.map(|m| m.granted_at),
                    "knobs": m.map(|m| m.knobs.clone()),
                    "engine": m.map(|m| m.engine.clone()).filter(|e| !e.is_empty()),
                })
            })
            .collect();
        outln!("{}", crate::commands::json_for_terminal(&rows)?);
        return Ok(());
    }
    if keys.is_empty() {
        errln!(
            "odek: no trusted project settings in {}",
            odek_core::text::shown(s.path())
        );
    }
    for (k, _) in keys.iter().filter(|(k, v)| **v && !k.contains(':')) {
        match meta.get(k) {
            Some(m) => outln!(
                "{k}  {}  ({})  {}",
                odek_core::text::shown(&m.project_dir),
                m.knobs,
                if m.engine.is_empty() {
                    "engine not recorded".to_string()
                } else {
                    odek_core::text::shown(&m.engine)
                }
            ),
            None => outln!("{k}  (no details recorded)"),
        }
    }
    Ok(())
}

/// `odek approvals revoke`.
pub fn revoke(key: Option<&str>, project: Option<&std::path::Path>) -> anyhow::Result<()> {
    let s = store()?;
    let keys: Vec<String> = match (key, project) {
        (Some(k), None) => vec![k.to_string()],
        (None, Some(dir)) => {
            // The directory may be gone already: then take it as written.
            let dir = match dir.canonicalize() {
                Ok(d) => d,
                Err(_) if dir.is_absolute() => dir.to_path_buf(),
                Err(e) => {
                    return Err(e).with_context(|| {
                        format!(
                            "project directory {} (give it as an absolute path)",
                            odek_core::text::shown(dir)
                        )
                    })
                }
            };
            let dir = dir.display().to_string();
            s.checked_meta()?
                .into_iter()
                .filter(|(_, m)| m.project_dir == dir)
                .map(|(k, _)| k)
                .collect()
        }
        _ => anyhow::bail!("give either a key or --project DIR"),
    };
    let removed = s.revoke(&keys)?;
    if removed.is_empty() {
        anyhow::bail!("nothing to revoke: no such trusted key");
    }
    // The keys on stdout (for scripts), what happened on stderr.
    for k in &removed {
        outln!("{k}");
    }
    errln!(
        "odek: revoked {} trusted approval{} (printed above); the next run of those settings asks again",
        removed.len(),
        if removed.len() == 1 { "" } else { "s" }
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `odek approve`'s question offers what README and docs/MCP.md say to
    /// answer there (`t`, trust), in the words of `odek run`'s prompt, and
    /// docs/CLI.md shows it verbatim.
    #[test]
    fn the_trust_question_agrees_with_readme_and_the_docs() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
        let read = |p: &str| std::fs::read_to_string(format!("{root}/{p}")).expect(p);
        let flat = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
        let readme = flat(&read("README.md"));
        assert!(readme.contains("(`y` once, `t` trust)"), "README's words");
        assert!(
            readme.contains("`odek approve -C DIR` shows the same card and asks only `t` (trust)")
        );
        assert!(
            TRUST_QUESTION.contains("[t] trust (remember)"),
            "`odek run`'s words for t: {TRUST_QUESTION}"
        );
        assert!(
            !TRUST_QUESTION.contains("[y"),
            "y means once at `odek run`; the question must not offer it as trust: {TRUST_QUESTION}"
        );
        assert!(
            flat(&read("docs/MCP.md")).contains("`odek approve -C DIR` in a terminal, answer `t`")
        );
        assert!(read("docs/CLI.md").contains(TRUST_QUESTION.trim_end()));
    }

    /// Without a terminal and without `--yes`, the error names `--yes`
    /// (and the terminal way) and says nothing was stored.
    #[test]
    fn the_no_terminal_error_names_the_yes_flag() {
        let t = no_terminal_text("/p/odek.json", &["sandbox_env".to_string()], "/p", "");
        assert!(t.contains("odek approve -C /p --yes"), "{t}");
        assert!(t.contains("answer `t`"), "{t}");
        assert!(t.contains("Nothing was stored"), "{t}");
    }
}
