//! The re-check right before create (SPEC §7.4): the plan's approval, and
//! the project-requested networks resolved again.

use std::collections::BTreeSet;

use crate::approval::{Approval, ApprovalError, Store};
use crate::config::{Source, Sourced};
use crate::engine::DockerApi;
use crate::network;
use crate::plan::Plan;
use crate::text::display_name;

/// Checks an approval against the plan and re-resolves the project-requested
/// networks (SPEC §7.4). Any difference in the set of IDs refuses the launch.
pub(crate) async fn recheck(
    engine: &dyn DockerApi,
    plan: &Plan,
    approval: Option<&Approval>,
) -> Result<(), crate::Error> {
    let Some(req) = &plan.approval else {
        return Ok(());
    };
    // A stored trust counts only while it is in the store now (not merely
    // when the plan was made): as the standing approval of a launch without
    // an explicit one, and as an explicit approval that came from it
    // (`via: stored`, what every front end's approval decision passes on).
    let revoked = || -> Result<bool, crate::Error> {
        Ok(!Store::new(&plan.odek_home).trusts(&req.key, req.env_binding.as_deref())?)
    };
    let standing = match approval {
        Some(a) if a.via == crate::approval::Via::Stored && revoked()? => {
            return Err(ApprovalError::Required {
                config: req.config.clone(),
                knobs: req.knobs.join(", "),
            }
            .into());
        }
        Some(_) => None,
        None if req.trusted && revoked()? => None,
        None => req.standing(),
    };
    let Some(approval) = approval.or(standing.as_ref()) else {
        return Err(ApprovalError::Required {
            config: req.config.clone(),
            knobs: req.knobs.join(", "),
        }
        .into());
    };
    if approval.key != req.key {
        return Err(ApprovalError::KeyMismatch {
            given: approval.key.clone(),
            wanted: req.key.clone(),
        }
        .into());
    }
    if req.requested_networks.is_empty()
        && req.requested_compose_project.is_none()
        && req.requested_stack.is_none()
    {
        return Ok(());
    }
    let source = Source::Project {
        path: req.config.clone().into(),
    };
    let names = (!req.requested_networks.is_empty())
        .then(|| Sourced::new(req.requested_networks.clone(), source.clone()));
    let compose = req
        .requested_compose_project
        .clone()
        .map(|p| Sourced::new(p, source.clone()));
    let stack = req
        .requested_stack
        .clone()
        .map(|p| Sourced::new(p, source.clone()));
    let now = match network::resolve(engine, names.as_ref(), compose.as_ref(), stack.as_ref()).await
    {
        Ok(n) => n,
        Err(network::NetworkError::Engine(e)) => {
            return Err(crate::Error::engine(
                &engine.endpoint().to_string(),
                crate::Step::Recheck,
                e,
            ))
        }
        Err(e) => {
            return Err(ApprovalError::NetworksChanged {
                difference: e.to_string(),
            }
            .into())
        }
    };
    let approved: BTreeSet<&str> = approval.network_ids.iter().map(String::as_str).collect();
    let current: BTreeSet<&str> = now.iter().map(|n| n.id.as_str()).collect();
    if approved == current {
        return Ok(());
    }
    let name_of = |id: &str| {
        now.iter()
            .find(|n| n.id == id)
            .map(|n| display_name(&n.name))
            .or_else(|| {
                req.networks
                    .iter()
                    .find(|n| n.id == id)
                    .map(|n| n.name.clone())
            })
            .unwrap_or_else(|| "?".into())
    };
    let mut parts = Vec::new();
    for id in current.difference(&approved) {
        parts.push(format!(
            "added {} ({})",
            name_of(id),
            &id[..12.min(id.len())]
        ));
    }
    for id in approved.difference(&current) {
        parts.push(format!(
            "gone {} ({})",
            name_of(id),
            &id[..12.min(id.len())]
        ));
    }
    Err(ApprovalError::NetworksChanged {
        difference: parts.join(", "),
    }
    .into())
}
