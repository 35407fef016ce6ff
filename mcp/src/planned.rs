//! The environment a sandbox WILL have, from a resolved plan (SPEC §9.1 for
//! a sandbox that is launched lazily): the network mode and internet from
//! the plan, and for each planned network the names the containers there
//! answer to, read from the engine now. Rendered with the core's
//! [`odek_core::describe::render_prompt`] / [`render_tool`](odek_core::describe::render_tool),
//! so the untrusted-name rules of SPEC §9.3 apply unchanged.
//!
//! The peer-name rule is the core's ([`odek_core::describe::peer_names`]);
//! `describe` on a launched sandbox gives the live view.

use odek_core::describe::Environment;
use odek_core::{Client, Plan};

/// The sandbox name shown while none is launched.
pub(crate) const NOT_YET: &str = "started on the first exec";

/// The environment the plan will give the conversation's sandbox, with the
/// peers the planned networks have now (core's [`Client::forecast`]).
pub(crate) async fn environment(odek: &Client, plan: &Plan) -> Environment {
    odek.forecast(plan, NOT_YET).await
}

#[cfg(test)]
mod tests {
    use odek_core::describe::{peer_names, COMPOSE_SERVICE_LABEL};
    use odek_core::engine::{ContainerInfo, EndpointInfo};
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
                endpoint_id: String::new(),
                ip: String::new(),
            }],
            ..Default::default()
        };
        assert_eq!(peer_names(&c, "n1"), ["redis", "cache", "shop_redis_1"]);
        assert_eq!(peer_names(&c, "other"), ["shop_redis_1"]);
    }
}
