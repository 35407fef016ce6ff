//! The approve verb (SPEC §7.2, §8): `request` builds a plan's approval
//! request at resolve, [`Client::approve`] grants approval of
//! a plan's project settings; [`Client::decide_approval`] is the one
//! decision of every front end — a standing approval, else ask (an
//! [`Asker`]: the CLI's prompt, MCP's elicitation, [`NoAsker`]), else
//! refuse; [`refresh_standing`] re-derives, in this process, the standing
//! approval of a plan another process resolved.

use crate::approval::{
    self, approval_key, project_knobs, Approval, ApprovalError, ApprovalRequest, Decision,
    EnvKeyView, KeyInput, Meta, NetworkCard, Store, Via, APPROVAL_REQUEST_SCHEMA,
};
use crate::client::Client;
use crate::config::{Settings, Sourced};
use crate::error::Result;
use crate::network::ResolvedNetwork;
use crate::plan::Plan;
use crate::text::{display_name, shown};

/// Who is asked to approve a plan's project settings when no standing
/// approval covers them: the CLI's terminal prompt, MCP's elicitation, or
/// nobody ([`NoAsker`]).
pub trait Asker {
    /// The asker's refusals; core's errors (a store that cannot be written
    /// on trust) convert into it.
    type Error: From<crate::Error>;

    /// Whether `ODEK_APPROVE_PROJECT_SANDBOX=1` approves `req` (default
    /// yes). `odek mcp` accepts it only for the request it started with:
    /// the agent can rewrite `./odek.json`.
    fn accepts_env(&self, _req: &ApprovalRequest) -> bool {
        true
    }

    /// Asks whether to approve `req`: `Ok(Some(_))` the answer (once or
    /// trust), `Ok(None)` when nobody can be asked. Errors: the question
    /// was answered no, or failed.
    fn ask(
        &self,
        req: &ApprovalRequest,
    ) -> impl std::future::Future<Output = std::result::Result<Option<Decision>, Self::Error>>;
}

/// Asks nobody: a plan without a standing approval is refused.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoAsker;

impl Asker for NoAsker {
    type Error = crate::Error;

    async fn ask(&self, _req: &ApprovalRequest) -> Result<Option<Decision>> {
        Ok(None)
    }
}

/// What [`Client::decide_approval`] decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decided {
    /// Launch with this approval (`None`: the plan needs none). Its
    /// [`Approval::via`] says how it was obtained.
    Launch(Option<Approval>),
    /// Refused: no standing approval and nobody could be asked.
    /// `env_refused`: `ODEK_APPROVE_PROJECT_SANDBOX=1` is set but the asker
    /// does not accept it for this request ([`Asker::accepts_env`]).
    Unasked {
        /// The environment's approval was set and not accepted.
        env_refused: bool,
    },
}

impl Client {
    /// The approval decision of every front end (SPEC §7.2): a plan that
    /// needs none launches without; a standing approval (stored trust, or
    /// `ODEK_APPROVE_PROJECT_SANDBOX=1` where `asker` accepts it) approves;
    /// else `asker` is asked and its answer granted ([`Client::approve`]);
    /// else the launch is refused ([`Decided::Unasked`]).
    ///
    /// Errors: the asker's (denied, failed), or granting a trust failed.
    pub async fn decide_approval<A: Asker>(
        &self,
        plan: &Plan,
        asker: &A,
    ) -> std::result::Result<Decided, A::Error> {
        let Some(req) = &plan.approval else {
            return Ok(Decided::Launch(None));
        };
        let standing = req.standing();
        let env_refused = standing
            .as_ref()
            .is_some_and(|a| a.via == Via::Env && !asker.accepts_env(req));
        if let Some(a) = standing.filter(|_| !env_refused) {
            return Ok(Decided::Launch(Some(a)));
        }
        match asker.ask(req).await? {
            Some(decision) => Ok(Decided::Launch(Some(self.approve(plan, decision)?))),
            None => Ok(Decided::Unasked { env_refused }),
        }
    }

    /// Grants approval of the plan's project settings (SPEC §7.2): `Once`
    /// for this launch, `Trust` persisted in the store first (a failed write
    /// is an error and grants nothing).
    pub fn approve(&self, plan: &Plan, decision: approval::Decision) -> Result<approval::Approval> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        Ok(grant(plan, decision, now)?)
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
                shown(home),
                shown(&plan.odek_home),
                shown(&plan.odek_home),
            ),
        }
        .into());
    }
    let store = Store::new(&home);
    req.trusted = store.trusts(&req.key, req.env_binding.as_deref())?;
    req.trusted_before_engine_binding &= !req.trusted;
    req.previously_trusted = !req.trusted
        && store
            .meta()
            .values()
            .any(|m| m.project_dir == req.project_dir);
    req.approved_by_env = crate::config::truthy(env, crate::config::APPROVE_ENV)?;
    req.standing = req.standing().map(|a| a.via);
    req.card = req.render_card();
    Ok(())
}

/// A resolved network as the approval card shows it (names terminal-safe).
fn card_of(n: &ResolvedNetwork) -> NetworkCard {
    NetworkCard {
        name: display_name(&n.name),
        id: n.id.clone(),
        internal: n.internal,
        compose_project: n
            .compose_project
            .as_deref()
            .map(display_name)
            .unwrap_or_else(|| "-".into()),
        stack: n.stack.as_deref().map(display_name),
        scope: (n.scope != "local").then(|| n.scope.clone()),
        attachable: n.attachable,
    }
}

/// The project's raw string for a key, as written in `odek.json`.
fn project_value<T: Clone>(v: &Option<Sourced<T>>) -> Option<T> {
    v.as_ref()
        .filter(|v| v.source.is_project())
        .map(|v| v.value.clone())
}

/// Builds the approval request for a resolved plan, or `None` when the
/// project asks for nothing that needs approval. Reads the store to see
/// whether the key is already trusted (a corrupt store is an error).
pub(crate) fn request(
    settings: &Settings,
    plan: &Plan,
    engine: &str,
) -> Result<Option<ApprovalRequest>, ApprovalError> {
    let mut knobs = project_knobs(settings);
    // The file that asks: odek.json, or Dockerfile.odek when that is all.
    let config = if knobs.is_empty() {
        settings.workdir.join(crate::image::DOCKERFILE_ODEK)
    } else {
        settings.workdir.join("odek.json")
    };
    // A repository's Dockerfile.odek is project input too: building it runs
    // its RUN steps (with network access) before any sandbox exists.
    let dockerfile = match &plan.image.source {
        crate::image::ImageSource::Dockerfile { sha256, .. } => Some(sha256.clone()),
        _ => None,
    };
    if dockerfile.is_some() {
        knobs.push(crate::image::DOCKERFILE_ODEK);
    }
    if knobs.is_empty() {
        return Ok(None);
    }
    let project_nets: Vec<&ResolvedNetwork> = plan
        .networks
        .iter()
        .filter(|n| n.origins.iter().any(|o| o.is_project()))
        .collect();
    // For Dockerfile.odek the key's image is the content-addressed tag, so an
    // edited Dockerfile asks again.
    let image = project_value(&settings.image).or_else(|| {
        dockerfile
            .as_ref()
            .map(|_| plan.image.reference.original.clone())
    });
    let env = project_value(&settings.env).unwrap_or_default();
    let env_binding = env
        .iter()
        .any(|e| e.interpolates_host)
        .then(|| settings.env_template_sha256.clone())
        .flatten();
    let volumes: Vec<String> = project_value(&settings.volumes)
        .unwrap_or_default()
        .into_iter()
        .map(|v| v.spec)
        .collect();
    let network = project_value(&settings.network_raw);
    let runtime = project_value(&settings.runtime);
    // A project list that only narrows the operator's needs no approval
    // and is no part of the key.
    let egress = project_value(&settings.egress).filter(|_| !settings.egress_narrows);
    let egress_network = project_value(&settings.egress_network);
    // A stack's overlay binds its scope and `Attachable` flag too (§7.3).
    let parts: Vec<String> = project_nets.iter().map(|n| n.key_part()).collect();
    let ids: Vec<&str> = parts.iter().map(String::as_str).collect();
    let input = KeyInput {
        project_dir: &settings.workdir,
        image: image.as_deref(),
        network: network.as_deref(),
        env_keys: env.iter().map(|e| e.key.as_str()).collect(),
        volumes: volumes.iter().map(String::as_str).collect(),
        network_ids: ids,
        runtime: runtime.as_deref(),
        egress: egress
            .as_ref()
            .map(|e| e.iter().map(String::as_str).collect()),
        egress_network: egress_network.as_deref(),
        engine: Some(engine),
    };
    let key = approval_key(&input);
    let store = Store::new(&settings.odek_home);
    let trusted = store.trusts(&key, env_binding.as_deref())?;
    // A trust of earlier releases (no engine bound) is asked once more,
    // saying why (SPEC §7.3).
    let trusted_before_engine_binding = !trusted
        && store.trusts(
            &approval_key(&KeyInput {
                engine: None,
                ..input.clone()
            }),
            env_binding.as_deref(),
        )?;
    let dir = settings.workdir.display().to_string();
    let previously_trusted = !trusted && store.meta().values().any(|m| m.project_dir == dir);
    let mut req = ApprovalRequest {
        schema: APPROVAL_REQUEST_SCHEMA.into(),
        key,
        project_dir: settings.workdir.display().to_string(),
        config: config.display().to_string(),
        knobs: knobs.iter().map(|k| k.to_string()).collect(),
        image,
        network,
        env: env
            .iter()
            .map(|e| EnvKeyView {
                key: e.key.clone(),
                interpolates_host: e.interpolates_host,
                reads: e.reads.clone(),
            })
            .collect(),
        volumes,
        requested_networks: project_value(&settings.networks).unwrap_or_default(),
        requested_compose_project: project_value(&settings.compose_project),
        requested_stack: project_value(&settings.stack),
        runtime,
        networks: project_nets.iter().map(|n| card_of(n)).collect(),
        network_summary: plan.network_summary,
        internet: plan.internet,
        trusted,
        previously_trusted,
        env_binding,
        dockerfile_sha256: dockerfile,
        egress,
        egress_network,
        approved_by_env: settings.approve_project,
        standing: None,
        host_fallback: plan.fallback_allowed(),
        card: String::new(),
        engine: engine.to_string(),
        trusted_before_engine_binding,
    };
    req.standing = req.standing().map(|a| a.via);
    req.card = req.render_card();
    Ok(Some(req))
}

/// The approval request `req` of `plan` for the project networks
/// `networks` (the same networks with new IDs: a Compose project recreated
/// while a sandbox reached it, SPEC §4.4): the key recomputed from the
/// request's own values and the new IDs, whether the store trusts it now,
/// `ODEK_APPROVE_PROJECT_SANDBOX` as this process sees it now, and the
/// card. Errors: an unreadable store or an invalid variable.
pub(crate) fn for_networks(
    req: &ApprovalRequest,
    plan: &Plan,
    networks: &[ResolvedNetwork],
) -> Result<ApprovalRequest, ApprovalError> {
    let project_dir = std::path::PathBuf::from(&req.project_dir);
    let parts: Vec<String> = networks.iter().map(|n| n.key_part()).collect();
    let key = approval_key(&KeyInput {
        project_dir: &project_dir,
        image: req.image.as_deref(),
        network: req.network.as_deref(),
        env_keys: req.env.iter().map(|e| e.key.as_str()).collect(),
        volumes: req.volumes.iter().map(String::as_str).collect(),
        network_ids: parts.iter().map(String::as_str).collect(),
        runtime: req.runtime.as_deref(),
        egress: req
            .egress
            .as_ref()
            .map(|e| e.iter().map(String::as_str).collect()),
        egress_network: req.egress_network.as_deref(),
        engine: (!req.engine.is_empty()).then_some(req.engine.as_str()),
    });
    let store = Store::new(&plan.odek_home);
    let trusted = store.trusts(&key, req.env_binding.as_deref())?;
    let env: std::collections::BTreeMap<String, String> = std::env::vars().collect();
    let mut out = ApprovalRequest {
        key,
        networks: networks.iter().map(card_of).collect(),
        trusted,
        previously_trusted: !trusted,
        trusted_before_engine_binding: false,
        approved_by_env: crate::config::truthy(&env, crate::config::APPROVE_ENV).unwrap_or(false),
        card: String::new(),
        ..req.clone()
    };
    out.standing = out.standing().map(|a| a.via);
    out.card = out.render_card();
    Ok(out)
}

/// Grants an approval for the plan's request; `Trust` persists the key first
/// (a failed write means no approval).
pub(crate) fn grant(plan: &Plan, decision: Decision, now: u64) -> Result<Approval, ApprovalError> {
    let Some(req) = &plan.approval else {
        return Err(ApprovalError::NotNeeded);
    };
    match decision {
        Decision::Once => Ok(req.approval(Via::Once)),
        Decision::Trust => {
            Store::new(&plan.odek_home).trust(
                &req.key,
                req.env_binding.as_deref(),
                Meta {
                    project_dir: req.project_dir.clone(),
                    granted_at: now,
                    knobs: req.knobs.join(", "),
                    engine: req.engine.clone(),
                },
            )?;
            Ok(req.approval(Via::Trust))
        }
    }
}
