//! The engine's DNS forwarding for a sandbox with no route out (SPEC §4.6,
//! CVE-2024-29018) against the fake engine: which sandboxes get odek's
//! upstream DNS server and which do not, that it lies inside the sandbox's
//! own link network and never on its gateway, that a container the engine
//! created without it is refused, and what the startup line, config view
//! and environment block say in each case. The real engine's forwarding is
//! shown by tests/e2e/tests/dns_forwarding.rs.

mod common;

use common::*;
use odek_core::describe::{render_prompt, render_tool};
use odek_core::dns::DnsForwarding;
use odek_core::engine::{DockerApi, Quirks};
use odek_core::FailureClass;

/// A setup whose engine reports release `version`.
fn on_engine(version: &str) -> Setup {
    let s = Setup::new();
    s.fake.set_quirks(Quirks {
        server_version: Some(version.into()),
        ..Quirks::default()
    });
    s
}

/// The IPAM subnet and gateway of network `id`.
async fn ipam(s: &Setup, id: &str) -> (String, Option<String>) {
    let n = s
        .fake
        .inspect_network(id)
        .await
        .expect("inspect")
        .expect("network exists");
    let first = n.ipam.first().expect("an IPAM subnet").clone();
    (first.subnet, first.gateway)
}

/// On an engine before the fix (this machine's 20.10), a sandbox that
/// reaches only internal networks gets one upstream DNS server: the last
/// host address of its own link network's subnet, not its gateway; the
/// plan, the applied settings, the startup line, the config view and the
/// environment block all say the path is closed, and the block still says
/// the internet is not reachable.
#[tokio::test]
async fn an_internal_only_sandbox_on_an_affected_engine_gets_odeks_upstream() {
    let s = on_engine("20.10.24+dfsg1")
        .networks(&[SHOP_BACKEND])
        .services();
    let plan = s.resolve().await.expect("resolve");
    assert!(!plan.internet);
    assert_eq!(plan.dns_forwarding, Some(DnsForwarding::ClosedByOdek));
    let sb = s.launch(&plan).await.expect("launch");
    let me = s.only_sandbox();
    let link = s.link_id(&sb.name);
    let (subnet, gateway) = ipam(&s, &link).await;
    assert_eq!(me.dns.len(), 1, "one upstream: {:?}", me.dns);
    let sink: std::net::Ipv4Addr = me.dns[0].parse().expect("an IPv4 address");
    let (net, len) = subnet.split_once('/').expect("CIDR");
    let net: std::net::Ipv4Addr = net.parse().expect("subnet address");
    let len: u32 = len.parse().expect("prefix");
    let mask = u32::MAX << (32 - len);
    assert_eq!(u32::from(sink) & mask, u32::from(net), "{sink} in {subnet}");
    assert_eq!(u32::from(sink), (u32::from(net) | !mask) - 1, "last host");
    assert_ne!(Some(sink.to_string()), gateway, "never the gateway");
    let applied = sb.applied.as_ref().expect("applied");
    assert_eq!(applied.dns_forwarding, Some(DnsForwarding::ClosedByOdek));
    assert!(
        sb.startup_line().ends_with(" dns=closed"),
        "{}",
        sb.startup_line()
    );
    let view = s.odek.config_view(&plan).await;
    assert_eq!(view.dns_forwarding, Some(DnsForwarding::ClosedByOdek));
    let text = view.render_text();
    assert!(
        text.contains("odek gives the sandbox an upstream DNS server nobody answers"),
        "{text}"
    );
    let env = s.odek.describe(&sb).await.expect("describe");
    assert!(!env.internet);
    assert_eq!(env.dns_forwarding, Some(DnsForwarding::ClosedByOdek));
    for text in [render_prompt(&env), render_tool(&env)] {
        assert!(
            text.contains("the internet is NOT reachable (no route out; names of outside hosts do not resolve)"),
            "{text}"
        );
        assert!(!text.contains("CVE-2024-29018"), "{text}");
    }
    // The forecast of a lazily launched sandbox says the same.
    let forecast = s.odek.forecast(&plan, "odek-later").await;
    assert_eq!(forecast.dns_forwarding, Some(DnsForwarding::ClosedByOdek));
}

/// On a release with the fix (and on one odek cannot read, as the fake's
/// default), the engine's own refusal and odek's upstream respectively.
#[tokio::test]
async fn a_fixed_engine_needs_no_upstream_and_an_unknown_one_gets_it() {
    let s = on_engine("26.0.0").networks(&[SHOP_BACKEND]);
    let plan = s.resolve().await.expect("resolve");
    assert_eq!(plan.dns_forwarding, Some(DnsForwarding::EngineRefuses));
    let sb = s.launch(&plan).await.expect("launch");
    assert!(s.only_sandbox().dns.is_empty(), "the engine's own upstream");
    assert!(
        sb.startup_line().ends_with(" dns=engine"),
        "{}",
        sb.startup_line()
    );
    let env = s.odek.describe(&sb).await.expect("describe");
    assert_eq!(env.dns_forwarding, Some(DnsForwarding::EngineRefuses));
    assert!(render_prompt(&env).contains("names of outside hosts do not resolve"));

    let s = Setup::new().networks(&[SHOP_BACKEND]);
    let plan = s.resolve().await.expect("resolve");
    assert_eq!(plan.dns_forwarding, Some(DnsForwarding::ClosedByOdek));
    let _sb = s.launch(&plan).await.expect("launch");
    assert_eq!(s.only_sandbox().dns.len(), 1, "unknown release: closed");
}

/// A sandbox with a way out, or without any network, has nothing to close:
/// no upstream is set and nothing is said about DNS.
#[tokio::test]
async fn sandboxes_with_a_route_out_or_no_network_are_left_alone() {
    for s in [
        on_engine("20.10.24").networks(&[SHOP_DEFAULT, SHOP_BACKEND]),
        on_engine("20.10.24")
            .networks(&[SHOP_BACKEND])
            .network_mode("bridge"),
        on_engine("20.10.24"),
    ] {
        let plan = s.resolve().await.expect("resolve");
        assert_eq!(plan.dns_forwarding, None, "{:?}", plan.network_summary);
        let sb = s.launch(&plan).await.expect("launch");
        assert!(s.only_sandbox().dns.is_empty());
        assert!(
            !sb.startup_line().contains(" dns="),
            "{}",
            sb.startup_line()
        );
        let env = s.odek.describe(&sb).await.expect("describe");
        assert_eq!(env.dns_forwarding, None);
        assert!(!render_prompt(&env).contains("CVE-2024-29018"));
    }
}

/// An engine that created the container without the upstream odek asked
/// for: the launch is refused and nothing is left (no container, no link
/// network), rather than claiming a closed path.
#[tokio::test]
async fn a_container_without_odeks_upstream_is_refused() {
    let s = Setup::new().networks(&[SHOP_BACKEND]);
    s.fake.set_quirks(Quirks {
        server_version: Some("20.10.24".into()),
        drop_dns: true,
        ..Quirks::default()
    });
    let err = s.up().await.expect_err("refused");
    assert_refused(&s, &err, FailureClass::DockerRejected, "HostConfig.Dns");
    assert!(s.fake.link_networks().is_empty(), "link network removed");
}

/// What odek says when it cannot guarantee it (SPEC §9.1): a sandbox whose
/// container has no upstream of odek's (launched on a fixed engine here,
/// described once the engine reports a release before the fix, as after a
/// downgrade; or made by an earlier release) is described as "NOT
/// reachable by route; DNS lookups may be forwarded", everywhere the
/// agent reads it.
#[tokio::test]
async fn a_sandbox_without_the_upstream_on_an_affected_engine_says_dns_may_leave() {
    let s = on_engine("26.0.0").networks(&[SHOP_BACKEND]);
    let sb = s.up().await.expect("launch");
    s.fake.set_quirks(Quirks {
        server_version: Some("25.0.4".into()),
        ..Quirks::default()
    });
    let env = s.odek.describe(&sb).await.expect("describe");
    assert!(!env.internet);
    assert_eq!(env.dns_forwarding, Some(DnsForwarding::MayForward));
    for text in [render_prompt(&env), render_tool(&env)] {
        assert!(
            text.contains("the internet is NOT reachable by route; DNS lookups may be forwarded by this engine to the host's resolver (CVE-2024-29018)"),
            "{text}"
        );
    }
    // An upstream outside the sandbox's own network is not odek's: the
    // host's resolver named by hand, or the link network's gateway.
    let id = s.only_sandbox().id;
    let link = s.link_id(&sb.name);
    let (_, gateway) = ipam(&s, &link).await;
    for dns in [
        vec!["127.0.0.53".to_string()],
        vec![gateway.expect("gateway")],
    ] {
        s.fake.update_container(&id, |c| c.dns = dns.clone());
        let env = s.odek.describe(&sb).await.expect("describe");
        assert_eq!(
            env.dns_forwarding,
            Some(DnsForwarding::MayForward),
            "{dns:?}"
        );
    }
}

/// A sub-agent narrowed to no network has no resolver to ask; one that
/// keeps an internal network gets odek's upstream like its parent.
#[tokio::test]
async fn narrowed_children_follow_their_own_networks() {
    let s = on_engine("20.10.24").networks(&[SHOP_BACKEND]);
    let parent = s.resolve().await.expect("resolve");
    let none = odek_core::narrow::narrow(
        &parent,
        &odek_core::narrow::NarrowRequest {
            network_mode: Some(odek_core::config::NetworkMode::None),
            ..Default::default()
        },
    )
    .expect("narrow");
    assert_eq!(none.dns_forwarding, None);
    let same = odek_core::narrow::narrow(&parent, &Default::default()).expect("narrow");
    assert_eq!(same.dns_forwarding, Some(DnsForwarding::ClosedByOdek));
    let _sb = s.launch(&same).await.expect("launch");
    assert_eq!(s.only_sandbox().dns.len(), 1);
}
