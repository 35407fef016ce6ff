//! The engine's DNS forwarding for a sandbox with no route out
//! (CVE-2024-29018, SPEC §4.6).
//!
//! A container on user-defined networks asks Docker's embedded resolver
//! (`127.0.0.11`), which answers the names of the containers on those
//! networks itself and forwards every other name to an upstream server.
//! Docker Engine releases before the fix for CVE-2024-29018 (fixed in
//! 23.0.11, 25.0.5 and 26.0.0) forward those lookups even for a container
//! that is only on `Internal` networks: when the host's resolver listens on
//! a loopback address (systemd-resolved's `127.0.0.53`, a local dnsmasq),
//! the request is made from the host's network namespace, so a name such as
//! `<data>.attacker.example` reaches the attacker's authoritative server
//! although the container has no route out.
//!
//! odek closes that path for a sandbox with no route out on such an engine
//! (and on an engine whose release it cannot tell): the container's
//! upstream DNS server (`HostConfig.Dns`) is [`sink_address`], an address
//! inside the sandbox's own internal link network (SPEC §4.4) that nobody
//! holds. A server named that way is not a loopback address, so every
//! release sends the forwarded request from the container's own network
//! namespace, onto the link network, where nobody answers; the embedded
//! resolver still answers the names of the containers on the sandbox's
//! networks, and the container's `/etc/resolv.conf` still names only
//! `127.0.0.11`.

use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use crate::config::NetworkMode;
use crate::engine::IpamSubnet;

/// How a sandbox with no route out stands with the engine's forwarding of
/// DNS lookups to the host's resolver (CVE-2024-29018).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DnsForwarding {
    /// The engine's release never forwards a lookup of a container that
    /// is only on internal networks (23.0.11+, 25.0.5+, 26.0.0+).
    EngineRefuses,
    /// odek gave the container an upstream DNS server that nobody answers,
    /// inside its own internal network ([`sink_address`]): the engine
    /// forwards lookups there, never to the host's resolver.
    ClosedByOdek,
    /// The engine may forward lookups of names it does not know to the
    /// host's resolver, from where they can leave the machine: odek could
    /// not close the path (a sandbox of an earlier release, or one attached
    /// to the networks directly).
    MayForward,
}

impl DnsForwarding {
    /// One word for the startup line and the config view: `closed` (by
    /// odek), `engine` (the engine's release does not forward), or
    /// `MAY-FORWARD(CVE-2024-29018)`.
    pub fn word(self) -> &'static str {
        match self {
            DnsForwarding::EngineRefuses => "engine",
            DnsForwarding::ClosedByOdek => "closed",
            DnsForwarding::MayForward => "MAY-FORWARD(CVE-2024-29018)",
        }
    }

    /// The internet clause of the environment block's network line for a
    /// sandbox with no route out (SPEC §9.1).
    pub fn internet_text(self) -> &'static str {
        match self {
            DnsForwarding::EngineRefuses | DnsForwarding::ClosedByOdek => {
                "the internet is NOT reachable (no route out; names of outside hosts do not resolve)"
            }
            DnsForwarding::MayForward => {
                "the internet is NOT reachable by route; DNS lookups may be forwarded by this engine to the host's resolver (CVE-2024-29018)"
            }
        }
    }
}

/// Whether Docker Engine release `version` (`20.10.24`, `25.0.5`,
/// `20.10.24+dfsg1`, `26.1.0-rc1`) forwards lookups of a container that is
/// only on internal networks to the host's loopback resolver: `Some(true)`
/// before the fix (below 23.0.11; every 24.x; 25.0.0 to 25.0.4),
/// `Some(false)` from it on, `None` for a version odek cannot read (another
/// engine speaking Docker's API, a fake).
pub fn engine_forwards(version: &str) -> Option<bool> {
    let core = version
        .trim()
        .trim_start_matches('v')
        .split(|c: char| c == '+' || c == '-' || c == '~' || c.is_whitespace())
        .next()?;
    let mut parts = core.split('.');
    let major: u32 = parts.next()?.parse().ok()?;
    let minor: u32 = parts.next()?.parse().ok()?;
    let patch: u32 = match parts.next() {
        Some(p) => p.parse().ok()?,
        None => 0,
    };
    Some(match (major, minor) {
        (m, _) if m < 23 => true,
        (23, 0) => patch < 11,
        (23, _) => false,
        (24, _) => true,
        (25, 0) => patch < 5,
        _ => false,
    })
}

/// True when a sandbox asks Docker's embedded resolver and has no route
/// out: it reaches networks (`attaches`, through its link network, SPEC
/// §4.4), in network mode `none` (no default bridge), and none of them
/// leads out (`internet` false).
pub fn no_route_with_resolver(internet: bool, mode: NetworkMode, attaches: bool) -> bool {
    !internet && mode == NetworkMode::None && attaches
}

/// What a sandbox will have (SPEC §4.6), given whether it has no route out
/// and a resolver ([`no_route_with_resolver`]) and the engine's release:
/// `None` when it has a route out or no resolver to ask; else
/// [`DnsForwarding::EngineRefuses`] on a release known to be fixed, and
/// [`DnsForwarding::ClosedByOdek`] otherwise (an affected or unknown
/// release, or no engine known).
pub fn planned(no_route: bool, version: Option<&str>) -> Option<DnsForwarding> {
    if !no_route {
        return None;
    }
    Some(if version.and_then(engine_forwards) == Some(false) {
        DnsForwarding::EngineRefuses
    } else {
        DnsForwarding::ClosedByOdek
    })
}

/// An IPv4 subnet `a.b.c.d/len`.
fn parse_v4_subnet(s: &str) -> Option<(u32, u32)> {
    let (addr, len) = s.split_once('/')?;
    let addr: Ipv4Addr = addr.parse().ok()?;
    let len: u32 = len.parse().ok()?;
    if len > 32 {
        return None;
    }
    let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
    Some((u32::from(addr) & mask, mask))
}

/// The upstream DNS server odek gives a sandbox with no route out on an
/// engine that may forward (SPEC §4.6): in the first IPv4 subnet of its
/// link network's IPAM configuration, the last host address (the one before
/// the broadcast address), or the one before it when that is the gateway.
/// Docker hands out addresses from the bottom of a subnet, so nobody holds
/// it; were a container ever given it, that container is one the sandbox
/// reaches anyway. `None` when no IPv4 subnet has room (a /31 or /32).
pub fn sink_address(ipam: &[IpamSubnet]) -> Option<Ipv4Addr> {
    for s in ipam {
        let Some((net, mask)) = parse_v4_subnet(&s.subnet) else {
            continue;
        };
        let broadcast = net | !mask;
        // Network, gateway, one container and the sink: at least a /30.
        if broadcast.saturating_sub(net) < 3 {
            continue;
        }
        let gateway: Option<Ipv4Addr> = s.gateway.as_deref().and_then(|g| g.parse().ok());
        for candidate in [broadcast - 1, broadcast - 2] {
            let addr = Ipv4Addr::from(candidate);
            if candidate > net && Some(addr) != gateway {
                return Some(addr);
            }
        }
    }
    None
}

/// The [`sink_address`] of network `network` (the sandbox's link
/// network, full ID) as the engine shows it now; `Ok(None)` when it has no
/// IPv4 subnet with room.
///
/// # Errors
/// The engine's failure to inspect it; a network that is gone is
/// [`EngineErrorKind::NotFound`](crate::engine::EngineErrorKind::NotFound).
pub(crate) async fn sink_of(
    engine: &dyn crate::engine::DockerApi,
    network: &str,
) -> Result<Option<Ipv4Addr>, crate::engine::EngineError> {
    match engine.inspect_network(network).await? {
        Some(info) => Ok(sink_address(&info.ipam)),
        None => Err(crate::engine::EngineError::new(
            crate::engine::Op::InspectNetwork,
            crate::engine::EngineErrorKind::NotFound,
            format!(
                "the sandbox's own network {} vanished",
                &network[..network.len().min(12)]
            ),
        )),
    }
}

/// What a running container has, from `dns` (its `HostConfig.Dns`)
/// without reading its networks (launch and claims, SPEC §6.1 verify):
/// `None` unless it has no route out and a resolver to ask (`no_route`);
/// closed by odek when it names servers and each is a unicast IPv4 address
/// outside loopback, link-local and the unspecified address (odek's
/// [`sink_address`]; [`observed`] is the exact check, against the
/// networks' subnets); else refused by a fixed engine (`version`, the
/// release the plan saw); else it may forward.
pub fn applied(no_route: bool, version: Option<&str>, dns: &[String]) -> Option<DnsForwarding> {
    if !no_route {
        return None;
    }
    let odeks = !dns.is_empty()
        && dns.iter().all(|d| {
            d.parse::<Ipv4Addr>().is_ok_and(|a| {
                !(a.is_loopback()
                    || a.is_link_local()
                    || a.is_unspecified()
                    || a.is_broadcast()
                    || a.is_multicast())
            })
        });
    if odeks {
        return Some(DnsForwarding::ClosedByOdek);
    }
    if version.and_then(engine_forwards) == Some(false) {
        return Some(DnsForwarding::EngineRefuses);
    }
    Some(DnsForwarding::MayForward)
}

/// True when `server` is an address inside one of `subnets` (IPv4) and none
/// of their gateways: a server the embedded resolver can only reach on the
/// sandbox's own internal network.
pub fn inside_internal(server: &str, subnets: &[&IpamSubnet]) -> bool {
    let Ok(addr) = server.parse::<Ipv4Addr>() else {
        return false;
    };
    let a = u32::from(addr);
    subnets.iter().any(|s| {
        let Some((net, mask)) = parse_v4_subnet(&s.subnet) else {
            return false;
        };
        let broadcast = net | !mask;
        a & mask == net
            && a != net
            && a != broadcast
            && s.gateway
                .as_deref()
                .and_then(|g| g.parse::<Ipv4Addr>().ok())
                != Some(addr)
    })
}

/// How a running container with no route out stands (SPEC §4.6, §9.1), from
/// what the engine shows: its release `version`, the container's
/// `HostConfig.Dns` (`dns`) and the IPAM subnets of its internal networks.
/// Closed by odek when every server it names lies inside those networks
/// ([`inside_internal`]) and there is one at least; else refused by a fixed
/// engine; else it may forward.
pub fn observed(version: Option<&str>, dns: &[String], internal: &[&IpamSubnet]) -> DnsForwarding {
    if !dns.is_empty() && dns.iter().all(|d| inside_internal(d, internal)) {
        return DnsForwarding::ClosedByOdek;
    }
    if version.and_then(engine_forwards) == Some(false) {
        return DnsForwarding::EngineRefuses;
    }
    DnsForwarding::MayForward
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subnet(s: &str, g: Option<&str>) -> IpamSubnet {
        IpamSubnet {
            subnet: s.into(),
            gateway: g.map(Into::into),
        }
    }

    #[test]
    fn releases_before_the_fix_forward() {
        for v in [
            "20.10.24",
            "20.10.24+dfsg1",
            "19.03.15",
            "23.0.10",
            "24.0.9",
            "25.0.0",
            "25.0.4",
            "1.13.1",
        ] {
            assert_eq!(engine_forwards(v), Some(true), "{v}");
        }
        for v in [
            "23.0.11",
            "23.0.15",
            "25.0.5",
            "25.0.14",
            "26.0.0",
            "26.1.0-rc1",
            "27.3.1",
            "28.0.4",
        ] {
            assert_eq!(engine_forwards(v), Some(false), "{v}");
        }
        for v in ["", "fake", "x.y", "20"] {
            assert_eq!(engine_forwards(v), None, "{v}");
        }
    }

    #[test]
    fn the_sink_is_the_last_host_address_and_never_the_gateway() {
        assert_eq!(
            sink_address(&[subnet("172.20.0.0/16", Some("172.20.0.1"))]),
            Some(Ipv4Addr::new(172, 20, 255, 254))
        );
        assert_eq!(
            sink_address(&[subnet("10.213.4.0/24", Some("10.213.4.254"))]),
            Some(Ipv4Addr::new(10, 213, 4, 253))
        );
        // IPv6 first, then IPv4.
        assert_eq!(
            sink_address(&[
                subnet("fd00::/64", Some("fd00::1")),
                subnet("192.168.16.0/20", None)
            ]),
            Some(Ipv4Addr::new(192, 168, 31, 254))
        );
        assert_eq!(sink_address(&[subnet("10.0.0.0/31", None)]), None);
        assert_eq!(sink_address(&[]), None);
        assert_eq!(sink_address(&[subnet("garbage", None)]), None);
    }

    #[test]
    fn observed_needs_every_server_inside_an_internal_network() {
        let link = subnet("172.20.0.0/16", Some("172.20.0.1"));
        let inside = [&link];
        let odek = vec!["172.20.255.254".to_string()];
        assert_eq!(
            observed(Some("20.10.24"), &odek, &inside),
            DnsForwarding::ClosedByOdek
        );
        // No server, or one outside, the gateway, or loopback: not odek's.
        for dns in [
            vec![],
            vec!["8.8.8.8".to_string()],
            vec!["172.20.0.1".to_string()],
            vec!["127.0.0.1".to_string()],
            vec!["172.20.255.254".to_string(), "1.1.1.1".to_string()],
        ] {
            assert_eq!(
                observed(Some("20.10.24"), &dns, &inside),
                DnsForwarding::MayForward,
                "{dns:?}"
            );
            assert_eq!(
                observed(Some("26.0.0"), &dns, &inside),
                DnsForwarding::EngineRefuses,
                "{dns:?}"
            );
            assert_eq!(observed(None, &dns, &inside), DnsForwarding::MayForward);
        }
    }
}
