//! Security review findings, as fake-engine tests that fail while the
//! finding stands (branch `attack`).

mod common;

use common::*;
use odek_core::dns::DnsForwarding;
use odek_core::engine::{DockerApi, Quirks};

/// A file `is_static_elf` accepts (an ELF64 executable header without
/// program headers, so no PT_INTERP): enough for odek to copy and mount
/// it as the egress proxy; the fake engine prints the ready line itself.
fn fake_static_elf(dir: &std::path::Path) -> std::path::PathBuf {
    let mut h = vec![0u8; 128];
    h[..4].copy_from_slice(b"\x7fELF");
    h[4] = 2; // 64-bit
    h[5] = 1; // little endian
    h[6] = 1;
    h[16] = 2; // ET_EXEC
    h[18] = 0x3e; // x86-64
    h[20] = 1;
    h[32..40].copy_from_slice(&64u64.to_le_bytes()); // e_phoff
    h[52] = 64; // e_ehsize
    h[54] = 56; // e_phentsize
    h[56] = 0; // e_phnum
    let p = dir.join("odek-egress");
    std::fs::write(&p, h).expect("write fake proxy binary");
    p
}

/// The fake proxy binary, made once for every test of this file (each
/// reads `ODEK_EGRESS_BIN`, so all must name the same, lasting file).
fn egress_bin() {
    static BIN: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tmp").keep();
        let bin = fake_static_elf(&dir);
        std::env::set_var("ODEK_EGRESS_BIN", &bin);
        bin
    });
}

/// Finding H1: the proxy ran from the sandbox's image, whose `ENV`
/// (`LOCALDOMAIN`, `RES_OPTIONS`) and NSS modules then steered or ran in
/// it. It runs from odek's empty image (`FROM scratch`); an image someone
/// tagged `odek-egress-root:1` that has files or an environment is not
/// used: odek builds the empty one again.
#[tokio::test]
async fn the_egress_proxy_runs_from_an_empty_image_never_a_retagged_one() {
    use odek_core::engine::{FakeImage, Op};
    egress_bin();
    let s = Setup::new().networks(&[SHOP_BACKEND]).services();
    let mut planted = FakeImage::new(odek_core::egress::ROOT_IMAGE);
    planted.info.env.push("LOCALDOMAIN=evil".into());
    assert!(
        odek_core::egress::root_problem(&planted.info).is_some(),
        "control: the planted image is refused as a root"
    );
    let planted = s.fake.add_image(planted);
    let s = s.flag("sandbox_egress", "--sandbox-egress", |l| {
        l.sandbox_egress = Some(vec!["allowed.test".into()])
    });
    let sb = s.up().await.expect("launch");
    let proxy = s
        .fake
        .containers()
        .into_iter()
        .filter_map(|id| s.fake.container(&id))
        .find(|c| c.name == format!("{}-egress", sb.name))
        .expect("the proxy's container");
    assert_ne!(proxy.image_id, planted, "the planted image was used");
    let image = s
        .fake
        .inspect_image(&proxy.image_id)
        .await
        .expect("inspect")
        .expect("the proxy's image");
    assert_eq!(image.layers, 0, "the proxy's image has files: {image:?}");
    assert!(
        image.env.iter().all(|v| v.starts_with("PATH=")),
        "the proxy's image has an environment: {image:?}"
    );
    assert!(
        s.fake
            .calls_of(Op::BuildImage)
            .iter()
            .any(|c| c.arg == odek_core::egress::ROOT_IMAGE),
        "odek built its empty image"
    );
}

/// Finding M1: a link network's bridge had the host's address (its
/// gateway), which a sandbox with no route out reached, and through it
/// every host service on a wildcard address. The link network is made
/// with `inhibit_ipv4`.
#[tokio::test]
async fn the_link_network_gives_the_host_no_address_on_it() {
    let s = Setup::new().networks(&[SHOP_BACKEND]).services();
    let sb = s.up().await.expect("launch");
    let link = s.link_id(&sb.name);
    let info = s
        .fake
        .inspect_network(&link)
        .await
        .expect("inspect")
        .expect("the link network");
    assert_eq!(
        info.options
            .get(odek_core::link::INHIBIT_IPV4_OPTION)
            .map(String::as_str),
        Some("true"),
        "{info:?}"
    );
}

/// SPEC §4.6 says a sandbox with no route out and a resolver to ask must
/// not have its lookups forwarded by an affected engine (CVE-2024-29018).
/// A sandbox in egress mode WITHOUT attached networks has exactly that:
/// its only network is its `Internal` link network (so it asks Docker's
/// embedded resolver, 127.0.0.11) and no route out. But
/// `Plan::no_route_with_resolver` requires attached networks, so the plan
/// says `dns_forwarding: None`, no `HostConfig.Dns` sink is set, and on
/// Docker 20.10/24.x/25.0.0-4 every lookup (e.g. `<secret>.attacker.example`)
/// is forwarded from the host's namespace: DNS exfiltration from a
/// sandbox whose allowlist may even be empty.
#[tokio::test]
async fn egress_mode_without_attached_networks_closes_dns_forwarding_too() {
    let s = Setup::new();
    s.fake.set_quirks(Quirks {
        server_version: Some("20.10.24+dfsg1".into()),
        ..Quirks::default()
    });
    egress_bin();
    let s = s.flag("sandbox_egress", "--sandbox-egress", |l| {
        l.sandbox_egress = Some(vec!["allowed.test".into()])
    });
    let plan = s.resolve().await.expect("resolve");
    assert!(plan.egress.is_some(), "egress mode");
    assert!(!plan.internet, "no route out");
    assert!(plan.networks.is_empty(), "no attached networks");
    // launch.rs sets `HostConfig.Dns` (odek's sink upstream) only for a
    // plan whose `dns_forwarding` is `ClosedByOdek`; this plan's is None,
    // while its sandbox's only network is the internal link network
    // (link::uses_link: egress mode), which asks 127.0.0.11.
    assert_eq!(
        plan.dns_forwarding,
        Some(DnsForwarding::ClosedByOdek),
        "an egress-mode sandbox (no route out, on its internal link network only) on an affected engine is not planned to close DNS forwarding (CVE-2024-29018)"
    );
}

/// SPEC §4.4's member check disconnects from the link network everything
/// but the sandbox and its attached networks' running containers. The
/// exemption for the sandbox's egress proxy (`is_own_proxy`) trusts a
/// name and an unsigned label when the process does not know the proxy's
/// URL — and for a sandbox NOT in egress mode it never does. So anyone
/// with Docker access (another local user, SPEC's "forged labels") can
/// put a container named `<sandbox>-egress`, labelled
/// `dev.odek.egress=<sandbox>`, on the sandbox's link network — e.g. one
/// also on the default bridge, running a relay — and it is never
/// disconnected: the internal-only sandbox gains a route out (and a
/// stranger that can talk to it and answer under any alias it likes).
#[tokio::test]
async fn a_forged_egress_proxy_on_the_link_network_of_a_non_egress_sandbox_is_disconnected() {
    use odek_core::approve::NoAsker;
    let s = Setup::new().networks(&[SHOP_BACKEND]).services();
    let sb = s.up().await.expect("launch");
    assert!(sb.plan.egress.is_none(), "not in egress mode");
    let link = s.link_id(&sb.name);
    // Control: a stranger without the forged name/label is disconnected.
    let control = s.fake.add_service("stranger", BRIDGE_ID, &[], &[]);
    s.fake
        .connect_network(&link, &control, &[])
        .await
        .expect("connect");
    // The forgery: the proxy's name and unsigned label, on the default
    // bridge (a way out) and on the sandbox's link network.
    let forged_name = format!("{}-egress", sb.name);
    let forged = s.fake.add_service(
        &forged_name,
        BRIDGE_ID,
        &[],
        &[
            ("dev.odek.sandbox", "egress"),
            ("dev.odek.egress", sb.name.as_str()),
        ],
    );
    s.fake
        .connect_network(&link, &forged, &["postgres".to_string()])
        .await
        .expect("connect");
    let r = s.odek.relink(&sb, &NoAsker).await.expect("relink");
    let names: Vec<&str> = r.disconnected.iter().map(|i| i.name.as_str()).collect();
    assert!(names.contains(&"stranger"), "control: {r:?}");
    let still = s
        .fake
        .container(&forged)
        .is_some_and(|c| c.endpoints.iter().any(|e| e.network_id == link));
    assert!(
        !still,
        "a container with a forged proxy name and label stays on the link network of a sandbox that has no proxy: {r:?}"
    );
}

/// New-user finding: in egress mode odek still warned that a Compose
/// network that is not internal lets the sandbox reach the internet,
/// while the sandbox's only network is its internal link network. The
/// warning is left out in egress mode (control: without it, it is given).
#[tokio::test]
async fn egress_mode_does_not_warn_that_an_attached_network_reaches_the_internet() {
    use odek_core::WarningKind;
    let has = |plan: &odek_core::Plan| {
        plan.warnings
            .iter()
            .any(|w| w.kind == WarningKind::AttachedNetworkNotInternal)
    };
    let plain = Setup::new().compose(PROJECT).services();
    let plan = plain.resolve().await.expect("resolve");
    assert!(has(&plan), "control: {:?}", plan.warnings);
    let s =
        Setup::new()
            .compose(PROJECT)
            .services()
            .flag("sandbox_egress", "--sandbox-egress", |l| {
                l.sandbox_egress = Some(vec!["allowed.test".into()])
            });
    let plan = s.resolve().await.expect("resolve");
    assert!(plan.egress.is_some() && !plan.internet, "egress mode");
    assert!(!has(&plan), "{:?}", plan.warnings);
}
