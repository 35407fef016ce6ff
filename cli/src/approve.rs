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
            if req.previously_trusted {
                errln!("odek: note: {}", odek_core::approval::PREVIOUSLY_TRUSTED);
            }
            return Ok(None);
        }
        let card = req.render_card();
        let answer = tokio::task::spawn_blocking(move || {
            let mut err = std::io::stderr().lock();
            write!(
                err,
                "{card}Approve? [y] yes, once  [t] trust (remember)  [N] no: "
            )
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
        .flatten();
        let Some(answer) = answer else {
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
                "{k}  {}  ({})",
                odek_core::text::shown(&m.project_dir),
                m.knobs
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
