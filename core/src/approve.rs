//! The approve verb (SPEC §7.2, §8): [`Client::approve`] grants approval of
//! a plan's project settings; [`refresh_standing`] re-derives, in this
//! process, the standing approval of a plan another process resolved.

use crate::approval::{self, Store};
use crate::client::Client;
use crate::error::Result;
use crate::plan::Plan;
use crate::text::display_text;

impl Client {
    /// Grants approval of the plan's project settings (SPEC §7.2): `Once`
    /// for this launch, `Trust` persisted in the store first (a failed write
    /// is an error and grants nothing).
    pub fn approve(&self, plan: &Plan, decision: approval::Decision) -> Result<approval::Approval> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        Ok(approval::grant(plan, decision, now)?)
    }
}

/// Re-derives the standing approval of a plan this process did not resolve
/// (a running parent's recorded plan, SPEC §8) from this process's
/// environment `env`: whether the key is trusted in the store now and
/// whether `ODEK_APPROVE_PROJECT_SANDBOX` is set now — never what the
/// process that recorded the plan saw. A plan without a request is left as
/// is.
///
/// # Errors
/// Class config: `ODEK_HOME`/`HOME` unusable or `ODEK_HOME` not the store
/// the plan was resolved with (the parent's approvals live there), an
/// invalid `ODEK_APPROVE_PROJECT_SANDBOX`, an unreadable store.
pub fn refresh_standing(
    plan: &mut Plan,
    env: &std::collections::BTreeMap<String, String>,
) -> Result<(), crate::Error> {
    let Some(req) = plan.approval.as_mut() else {
        return Ok(());
    };
    let home = crate::config::odek_home(env)?;
    if home != plan.odek_home {
        return Err(crate::config::ConfigError::InvalidValue {
            origin: "env ODEK_HOME".into(),
            key: "ODEK_HOME".into(),
            reason: format!(
                "is {}, but the plan was resolved with {}, whose approval store holds its approvals; run with ODEK_HOME={}",
                display_text(&home.display().to_string()),
                display_text(&plan.odek_home.display().to_string()),
                display_text(&plan.odek_home.display().to_string()),
            ),
        }
        .into());
    }
    let store = Store::new(&home);
    req.trusted = store.trusts(&req.key, req.env_binding.as_deref())?;
    req.previously_trusted = !req.trusted
        && store
            .meta()
            .values()
            .any(|m| m.project_dir == req.project_dir);
    req.approved_by_env = crate::config::truthy(env, "ODEK_APPROVE_PROJECT_SANDBOX")?;
    req.card = req.render_card();
    Ok(())
}
