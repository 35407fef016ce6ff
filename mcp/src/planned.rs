//! The environment a sandbox WILL have, from a resolved plan (SPEC §9.1 for
//! a sandbox that is launched lazily): the network mode and internet from
//! the plan, and for each planned network the names the containers there
//! answer to, read from the engine now. Rendered with the core's
//! [`odek_core::describe::render_prompt`] / [`render_tool`](odek_core::describe::render_tool),
//! so the untrusted-name rules of SPEC §9.3 apply unchanged.
//!
//! The peer-name rule is the core's ([`odek_core::describe::peer_names`]);
//! `describe` on a launched sandbox gives the live view.

use std::collections::BTreeSet;

use odek_core::describe::{
    lists_as_service, peer_names, EnvNetwork, Environment, Peer, Workspace, ENVIRONMENT_SCHEMA,
    MAX_LISTED_NETWORKS, MAX_NAMES_PER_NETWORK,
};
use odek_core::engine::ContainerInfo;
use odek_core::text::sanitize_name;
use odek_core::{Client, Plan};

const COMPOSE_SERVICE_LABEL: &str = "com.docker.compose.service";

/// The sandbox name shown while none is launched.
pub(crate) const NOT_YET: &str = "started on the first exec";

/// The environment the plan will give a sandbox, with the peers the
/// planned networks have now. A network or peer that cannot be inspected
/// is left out (the block is a forecast; `describe` is authoritative).
pub(crate) async fn environment(odek: &Client, plan: &Plan) -> Environment {
    let listed = &plan.networks[..plan.networks.len().min(MAX_LISTED_NETWORKS)];
    let mut networks = Vec::new();
    let mut omitted_names = 0;
    let engine = odek.engine().ok();
    for n in listed {
        let name = sanitize_name(&n.name);
        if name.is_none() {
            omitted_names += 1;
        }
        let peers = match engine {
            Some(e) => peers_of(e.as_ref(), &n.id, &mut omitted_names).await,
            None => Vec::new(),
        };
        networks.push(EnvNetwork {
            name,
            internal: n.internal,
            peers,
        });
    }
    Environment {
        schema: ENVIRONMENT_SCHEMA.into(),
        isolation: "container".into(),
        fallback_reason: None,
        sandbox: NOT_YET.into(),
        workspace: Workspace {
            path: "/workspace".into(),
            readonly: plan.readonly,
        },
        network: Some(plan.network_summary),
        internet: plan.internet,
        networks,
        omitted_networks: plan.networks.len() - listed.len(),
        omitted_names,
        pids_limit: Some(plan.pids_limit),
        memory_bytes: plan.memory_bytes,
        cpus: plan.cpus.as_ref().map(|c| c.text.clone()),
        user: plan.user.clone(),
        account: plan.account.clone(),
    }
}

async fn peers_of(
    engine: &dyn odek_core::engine::DockerApi,
    network_id: &str,
    omitted: &mut usize,
) -> Vec<Peer> {
    let Ok(Some(info)) = engine.inspect_network(network_id).await else {
        return Vec::new();
    };
    let ids: BTreeSet<&String> = info.containers.keys().collect();
    let mut members: Vec<ContainerInfo> = Vec::new();
    for id in ids {
        if let Ok(Some(c)) = engine.inspect_container(id).await {
            if lists_as_service(&c) {
                members.push(c);
            }
        }
    }
    members.sort_by_key(|c| {
        (
            c.labels
                .get(COMPOSE_SERVICE_LABEL)
                .cloned()
                .unwrap_or_else(|| c.name.clone()),
            c.id.clone(),
        )
    });
    let mut listed = 0;
    let mut out = Vec::new();
    for c in &members {
        let mut shown = Vec::new();
        for raw in peer_names(c, network_id) {
            match sanitize_name(&raw) {
                Some(s) if listed < MAX_NAMES_PER_NETWORK => {
                    listed += 1;
                    shown.push(s);
                }
                _ => *omitted += 1,
            }
        }
        if !shown.is_empty() {
            out.push(Peer { names: shown });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use odek_core::engine::EndpointInfo;
    use std::collections::BTreeMap;

    #[test]
    fn service_alias_first_and_short_id_dropped() {
        let c = ContainerInfo {
            id: "0123456789abcdef".into(),
            name: "shop_redis_1".into(),
            labels: BTreeMap::from([(COMPOSE_SERVICE_LABEL.to_string(), "redis".to_string())]),
            endpoints: vec![EndpointInfo {
                network_name: "shop_default".into(),
                network_id: "n1".into(),
                aliases: vec!["0123456789ab".into(), "cache".into(), "redis".into()],
            }],
            ..Default::default()
        };
        assert_eq!(peer_names(&c, "n1"), ["redis", "cache", "shop_redis_1"]);
        assert_eq!(peer_names(&c, "other"), ["shop_redis_1"]);
    }
}
