//! Sub-agents only narrow (SPEC §8): a child's plan is derived from the
//! parent's **resolved** plan, never from Docker — so a child can never pick
//! up a network the parent did not have, not even one its Compose project
//! gained after the parent resolved.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::config::{parse_cpus, parse_memory, NetworkMode};
use crate::network::{self, NetworkSummary, ResolvedNetwork};
use crate::plan::{Isolation, Plan};

/// Schema tag of [`NarrowRequest`].
pub const NARROW_REQUEST_SCHEMA: &str = "odek.narrow-request/1";

/// What a sub-agent asks for (`"odek.narrow-request/1"`, `odek_narrow`;
/// SPEC §8). Every field is optional: unset inherits the parent; anything
/// that would widen is refused.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "odek.narrow-request/1")]
pub struct NarrowRequest {
    /// Optional schema tag, `"odek.narrow-request/1"`.
    #[serde(default)]
    pub schema: Option<String>,
    /// A subset of the parent's networks, each by name or full ID.
    #[serde(default)]
    pub networks: Option<Vec<String>>,
    /// Only the parent's networks that carried this Compose project when the
    /// parent resolved.
    #[serde(default)]
    pub compose_project: Option<String>,
    /// `none`: no default bridge. Without `networks` or `compose_project`
    /// it also drops every attached network — the child has no network at
    /// all (SPEC §4.2 `none`); with them, exactly those networks are
    /// attached ("attached networks only"). `bridge` only when the parent
    /// has it — never `bridge` from `none`.
    // Parsed by the rule of `sandbox_network` (SPEC §3.4,
    // `config::parse_network_mode`): anything else is refused with its
    // message. (A comment, not doc: the doc is the ABI schema's text.)
    #[serde(default, deserialize_with = "network_mode")]
    #[schemars(with = "Option<crate::config::NetworkMode>")]
    pub network_mode: Option<crate::config::NetworkMode>,
    /// Lower or equal pids limit (processes).
    #[serde(default)]
    pub pids_limit: Option<i64>,
    /// Lower or equal memory limit, e.g. `256m`.
    #[serde(default)]
    pub memory: Option<String>,
    /// Lower or equal CPU limit, e.g. `0.5`.
    #[serde(default)]
    pub cpus: Option<String>,
    /// `true` only (read-only may only go on).
    #[serde(default)]
    pub readonly: Option<bool>,
    /// Must equal the parent's image reference when given.
    #[serde(default)]
    pub image: Option<String>,
    /// Must name the parent's OCI runtime when given (the one it asked
    /// for, or the engine's default when it asked for none): a sub-agent
    /// keeps its parent's runtime.
    #[serde(default)]
    pub runtime: Option<String>,
}

impl NarrowRequest {
    /// The members that ask for something — every member but the `schema`
    /// tag — in declaration order. MCP's `sandbox_narrow` takes exactly
    /// these and its `sandbox_id`. A test checks them against the members
    /// serde derives for the struct.
    pub const MEMBERS: &'static [&'static str] = &[
        "networks",
        "compose_project",
        "network_mode",
        "pids_limit",
        "memory",
        "cpus",
        "readonly",
        "image",
        "runtime",
    ];

    /// Checks the request before it is applied, as every surface gets it
    /// (the C ABI's and MCP's JSON, the CLI's flags through
    /// [`NarrowRequest::from_settings`]): its schema tag, and no empty item
    /// — a network name, Compose project, memory, CPU limit or image that
    /// is the empty string (or only spaces) asks for nothing a caller
    /// meant. Errors: a usage error ([`crate::error::RequestError`]) naming
    /// the member.
    pub fn check(&self) -> Result<(), crate::error::RequestError> {
        self.check_schema()?;
        let blank = |s: &String| s.trim().is_empty();
        let empty = [
            ("networks", self.networks.iter().flatten().any(blank)),
            (
                "compose_project",
                self.compose_project.as_ref().is_some_and(blank),
            ),
            ("memory", self.memory.as_ref().is_some_and(blank)),
            ("cpus", self.cpus.as_ref().is_some_and(blank)),
            ("image", self.image.as_ref().is_some_and(blank)),
            ("runtime", self.runtime.as_ref().is_some_and(blank)),
        ];
        match empty.iter().find(|(_, e)| *e) {
            Some((member, _)) => Err(crate::error::RequestError(format!(
                "{member} has an empty item: leave the member out to keep the parent's, or name what the sub-agent keeps"
            ))),
            None => Ok(()),
        }
    }

    /// A request from settings given as text by config key, as a command
    /// line gives them (`odek sandbox up --parent`'s `--sandbox-*` flags):
    /// `value(key)` is the origin to name in a refusal (`"flag
    /// --sandbox-networks"`) and the text. A list (`sandbox_networks`) is
    /// split at commas; `sandbox_network` is parsed by the config rule,
    /// `sandbox_pids_limit` as a number, `sandbox_readonly` as `true` (on)
    /// or `false` (unset). The request is checked ([`NarrowRequest::check`]).
    ///
    /// Errors: an empty item or a value that does not parse (usage, naming
    /// the origin); a network mode other than none/bridge (config).
    pub fn from_settings(
        value: impl Fn(&str) -> Option<(String, String)>,
    ) -> Result<NarrowRequest, crate::Error> {
        use crate::config::names;
        let usage = |origin: &str, why: String| crate::Error::Usage(format!("{origin}: {why}"));
        let text = |key: &str| value(key).map(|(_, v)| v);
        let networks = match value(names::sandbox_networks) {
            None => None,
            Some((origin, v)) => {
                let items: Vec<String> = v.split(',').map(|s| s.trim().to_string()).collect();
                if items.iter().any(String::is_empty) {
                    return Err(usage(
                        &origin,
                        format!(
                            "has an empty item ({}); write names separated by commas",
                            crate::text::quote(&v)
                        ),
                    ));
                }
                Some(items)
            }
        };
        let network_mode = match value(names::sandbox_network) {
            None => None,
            Some((origin, v)) => Some(crate::config::parse_network_mode(&origin, &v)?),
        };
        let pids_limit = match value(names::sandbox_pids_limit) {
            None => None,
            Some((origin, v)) => Some(v.trim().parse::<i64>().map_err(|_| {
                usage(
                    &origin,
                    format!(
                        "must be a whole number of processes (got {})",
                        crate::text::quote(&v)
                    ),
                )
            })?),
        };
        let readonly = match value(names::sandbox_readonly) {
            None => None,
            Some((_, v)) if v == "true" => Some(true),
            Some((_, v)) if v == "false" => None,
            Some((origin, v)) => {
                return Err(usage(
                    &origin,
                    format!("must be true or false (got {})", crate::text::quote(&v)),
                ))
            }
        };
        let req = NarrowRequest {
            schema: None,
            networks,
            compose_project: text(names::sandbox_compose_project),
            network_mode,
            pids_limit,
            memory: text(names::sandbox_memory),
            cpus: text(names::sandbox_cpus),
            readonly,
            image: text(names::sandbox_image),
            runtime: text(names::sandbox_runtime),
        };
        req.check()?;
        Ok(req)
    }
}

/// [`NarrowRequest::network_mode`] from its text, for every front end that
/// deserializes a request (the C ABI, MCP's `sandbox_narrow`): the config
/// rule's parse, not serde's "unknown variant"; its refusal names the
/// request's own members ([`network_mode_refusal`]), which are the same
/// on both, never a command-line flag.
fn network_mode<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<NetworkMode>, D::Error> {
    Option::<String>::deserialize(d)?
        .map(|text| {
            crate::config::parse_network_mode("network_mode", &text)
                .map_err(|_| serde::de::Error::custom(network_mode_refusal(&text)))
        })
        .transpose()
}

/// Why a narrowing request's `network_mode` of `text` is refused.
fn network_mode_refusal(text: &str) -> String {
    format!(
        "network_mode must be \"none\" or \"bridge\" (got {}); to keep some of the parent's Docker networks ask for `networks` or `compose_project`",
        crate::text::quote(text)
    )
}

pub use crate::error::NarrowError;

fn refuse<T>(reason: impl Into<String>) -> Result<T, NarrowError> {
    Err(NarrowError {
        reason: reason.into(),
    })
}

/// Derives the child's plan from the parent's resolved plan (SPEC §8).
///
/// Every knob of the request either takes effect or is refused; none is
/// silently dropped. A value equal to the parent's is accepted and changes
/// nothing; anything wider is a [`NarrowError`]. In particular
/// `network_mode: none` without `networks`/`compose_project` leaves the
/// child with no network at all, not with the parent's attached networks.
///
/// The child carries the parent's `approval` request as it is (SPEC §7): a
/// child of a plan that needs approval launches only with an approval of
/// that request (the parent's fits: same key, same network IDs) or a
/// standing one, and launch re-checks the project's networks (§7.4).
///
/// # Errors
/// [`NarrowError`] naming what would widen.
pub fn narrow(parent: &Plan, req: &NarrowRequest) -> Result<Plan, NarrowError> {
    if parent.isolation != Isolation::Container {
        return refuse("the parent runs without a sandbox, so there is nothing to narrow");
    }
    // The child keeps the parent's approval request unchanged (same key,
    // same approved network IDs): a plan that needed approval still does,
    // the parent's approval fits it, and launch runs the SPEC §7.4 re-check.
    let mut child = parent.clone();
    child.warnings = Vec::new();

    if let Some(image) = &req.image {
        if *image != parent.image.reference.original {
            return refuse(format!(
                "the image stays the parent's ({}), not {}",
                parent.image.reference,
                crate::text::quote(image)
            ));
        }
    }

    // The runtime stays the parent's: the one it asked for, or (when it
    // asked for none) the engine's default it was resolved with.
    if let Some(runtime) = &req.runtime {
        let parents = parent
            .runtime
            .as_ref()
            .or(parent.engine_default_runtime.as_ref());
        if parents != Some(runtime) {
            return refuse(format!(
                "the OCI runtime stays the parent's ({}), not {}",
                parents.map_or_else(
                    || "the engine's default".to_string(),
                    |r| crate::text::display_name(r)
                ),
                crate::text::quote(runtime)
            ));
        }
    }

    let names_networks = req.networks.is_some() || req.compose_project.is_some();
    if names_networks {
        let mut chosen: Vec<ResolvedNetwork> = Vec::new();
        let mut add = |n: &ResolvedNetwork| {
            if !chosen.iter().any(|c| c.id == n.id) {
                chosen.push(n.clone());
            }
        };
        for want in req.networks.iter().flatten() {
            match parent
                .networks
                .iter()
                .find(|n| n.name == *want || n.id == *want)
            {
                Some(n) => add(n),
                None => {
                    return refuse(format!(
                        "network {} is not one of the parent's ({})",
                        crate::text::quote(want),
                        parent
                            .networks
                            .iter()
                            .map(|n| crate::text::display_name(&n.name))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ))
                }
            }
        }
        if let Some(p) = &req.compose_project {
            let of_project: Vec<&ResolvedNetwork> = parent
                .networks
                .iter()
                .filter(|n| n.compose_project.as_deref() == Some(p.as_str()))
                .collect();
            if of_project.is_empty() {
                return refuse(format!(
                    "the parent has no network of Compose project {}",
                    crate::text::quote(p)
                ));
            }
            for n in of_project {
                add(n);
            }
        }
        // Keep the parent's order.
        chosen.sort_by_key(|c| parent.networks.iter().position(|n| n.id == c.id));
        child.networks = chosen;
    }

    if let Some(mode) = req.network_mode {
        if mode == NetworkMode::Bridge && parent.network_mode == NetworkMode::None {
            return refuse("network mode may go from bridge to none, never from none to bridge");
        }
        child.network_mode = mode;
        if mode == NetworkMode::None {
            child.bridge_network_id = None;
            // Offline means offline: `none` alone keeps no attached network
            // either (a Compose-attached parent would otherwise hand its
            // networks down under the name "none").
            if !names_networks {
                child.networks = Vec::new();
            }
        }
    }

    if let Some(p) = req.pids_limit {
        if p < 1 {
            return refuse(format!("pids limit must be a positive integer (got {p})"));
        }
        if p > parent.pids_limit {
            return refuse(format!(
                "pids limit may only go down (parent {}, asked {p})",
                parent.pids_limit
            ));
        }
        child.pids_limit = p;
    }
    if let Some(m) = &req.memory {
        let bytes = parse_memory("narrow request", m).map_err(|e| NarrowError {
            reason: e.to_string(),
        })?;
        if parent.memory_bytes.is_some_and(|pm| bytes > pm) {
            return refuse(format!(
                "memory may only go down (parent {} bytes, asked {bytes})",
                parent.memory_bytes.unwrap_or(0)
            ));
        }
        child.memory_bytes = Some(bytes);
    }
    if let Some(c) = &req.cpus {
        let cpus = parse_cpus("narrow request", c).map_err(|e| NarrowError {
            reason: e.to_string(),
        })?;
        if parent.cpus.as_ref().is_some_and(|pc| cpus.nano > pc.nano) {
            return refuse(format!(
                "cpus may only go down (parent {}, asked {})",
                parent.cpus.as_ref().map(|c| c.text.as_str()).unwrap_or("?"),
                cpus.text
            ));
        }
        child.cpus = Some(cpus);
    }
    if let Some(ro) = req.readonly {
        if !ro && parent.readonly {
            return refuse("read-only may only go on");
        }
        child.readonly = ro || parent.readonly;
    }

    child.network_summary = NetworkSummary::of(child.network_mode, child.networks.len());
    // A child of a parent in egress mode keeps it (SPEC §4.5): its only
    // way out is its own proxy, with the parent's allowlist.
    child.internet =
        child.egress.is_none() && network::internet_reachable(child.network_mode, &child.networks);
    child.dns_forwarding = child.planned_dns_forwarding();
    child.warnings = network::warnings(child.network_mode, &child.networks);
    Ok(child)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{CpuLimit, Source};
    use crate::image::{pinned_default, ImagePlan, ImageSource};
    use crate::network::NetworkOrigin;

    /// `MEMBERS` are serde's members of the struct, in its order, without
    /// the schema tag: serde names them all when it refuses an unknown one.
    #[test]
    fn members_are_the_structs() {
        let e = serde_json::from_str::<NarrowRequest>(r#"{"no_such_member": 1}"#)
            .expect_err("unknown member")
            .to_string();
        let expected = std::iter::once(&"schema")
            .chain(NarrowRequest::MEMBERS)
            .map(|m| format!("`{m}`"))
            .collect::<Vec<_>>()
            .join(", ");
        assert!(
            e.starts_with(&format!(
                "unknown field `no_such_member`, expected one of {expected} at"
            )),
            "{e}"
        );
    }

    /// An empty item is a usage refusal, from JSON (the C ABI, MCP) and
    /// from a command line's settings alike.
    #[test]
    fn an_empty_item_is_refused_on_every_surface() {
        for json in [
            r#"{"networks": [""]}"#,
            r#"{"networks": ["a", " "]}"#,
            r#"{"compose_project": ""}"#,
            r#"{"memory": ""}"#,
            r#"{"cpus": ""}"#,
            r#"{"image": ""}"#,
        ] {
            let req: NarrowRequest = serde_json::from_str(json).expect(json);
            let e = crate::Error::from(req.check().expect_err(json));
            assert_eq!(e.reported_class(), crate::ErrorClass::Usage, "{json}");
        }
        let flags = |pairs: &'static [(&'static str, &'static str)]| {
            NarrowRequest::from_settings(move |key| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == key)
                    .map(|(k, v)| (format!("flag for {k}"), v.to_string()))
            })
        };
        for bad in [
            &[("sandbox_networks", "")][..],
            &[("sandbox_networks", "a,,b")],
            &[("sandbox_networks", "a, ")],
            &[("sandbox_compose_project", "")],
            &[("sandbox_memory", " ")],
            &[("sandbox_pids_limit", "lots")],
        ] {
            let e = flags(bad).expect_err("refused");
            assert_eq!(e.reported_class(), crate::ErrorClass::Usage, "{bad:?}: {e}");
        }
        let req = flags(&[
            ("sandbox_networks", "a, b"),
            ("sandbox_network", "none"),
            ("sandbox_pids_limit", "64"),
            ("sandbox_readonly", "true"),
        ])
        .expect("valid");
        assert_eq!(req.networks, Some(vec!["a".to_string(), "b".to_string()]));
        assert_eq!(req.network_mode, Some(NetworkMode::None));
        assert_eq!(req.pids_limit, Some(64));
        assert_eq!(req.readonly, Some(true));
        assert!(flags(&[("sandbox_network", "host")]).is_err());
    }

    /// Every front end that deserializes a request gets the config rule's
    /// parse of `network_mode` and its refusal.
    #[test]
    fn network_mode_is_parsed_by_the_config_rule() {
        let parse = |v: serde_json::Value| {
            serde_json::from_value::<NarrowRequest>(serde_json::json!({ "network_mode": v }))
        };
        let mode = |v: serde_json::Value| parse(v).expect("valid").network_mode;
        assert_eq!(mode("none".into()), Some(NetworkMode::None));
        assert_eq!(mode("bridge".into()), Some(NetworkMode::Bridge));
        assert_eq!(mode(serde_json::Value::Null), None);
        let absent: NarrowRequest = serde_json::from_str("{}").expect("empty");
        assert_eq!(absent.network_mode, None);
        for bad in ["host", "None", " none", "container:x"] {
            let e = parse(bad.into()).expect_err(bad).to_string();
            assert!(crate::config::parse_network_mode("network_mode", bad).is_err());
            assert_eq!(e, network_mode_refusal(bad));
            // The request's members, never a CLI flag (the C ABI and MCP
            // show this text).
            assert!(e.contains("`networks`"), "{e}");
            assert!(!e.contains("--"), "{e}");
        }
        assert!(parse(5.into())
            .expect_err("a number")
            .to_string()
            .contains("invalid type: integer `5`, expected a string"));
    }

    fn net(name: &str, id: char, project: Option<&str>, internal: bool) -> ResolvedNetwork {
        ResolvedNetwork {
            name: name.into(),
            id: id.to_string().repeat(64),
            internal,
            driver: "bridge".into(),
            compose_project: project.map(str::to_string),
            origins: vec![NetworkOrigin::Compose {
                project: project.unwrap_or("x").into(),
                source: Source::Api,
            }],
            scope: "local".into(),
            attachable: false,
            stack: None,
        }
    }

    fn parent() -> Plan {
        let networks = vec![
            net("shop_backend", 'a', Some("shop"), true),
            net("shop_default", 'b', Some("shop"), false),
            net("metrics", 'c', None, true),
        ];
        Plan {
            schema: crate::plan::PLAN_SCHEMA.into(),
            mode: crate::config::SandboxMode::Implicit,
            isolation: Isolation::Container,
            workdir: "/w".into(),
            workdir_id: None,
            odek_home: "/h".into(),
            endpoint: None,
            endpoint_owner: None,
            engine: None,
            image: ImagePlan {
                reference: pinned_default(),
                source: ImageSource::PinnedDefault,
            },
            network_mode: NetworkMode::Bridge,
            bridge_network_id: Some("d".repeat(64)),
            network_summary: NetworkSummary::BridgeAttached,
            internet: true,
            dns_forwarding: None,
            egress: None,
            networks,
            pids_limit: 1000,
            readonly: false,
            workspace: crate::config::WorkspaceMode::Bind,
            memory_bytes: Some(1 << 30),
            cpus: Some(CpuLimit {
                text: "2".into(),
                nano: 2_000_000_000,
            }),
            user: None,
            user_choice: None,
            account: None,
            runtime: None,
            engine_default_runtime: None,
            env: Vec::new(),
            volumes: Vec::new(),
            masks: Vec::new(),
            require_sandbox: false,
            sources: Default::default(),
            warnings: Vec::new(),
            approval: None,
            log_retention_days: 7,
        }
    }

    #[test]
    fn unset_request_inherits_everything() {
        let p = parent();
        let c = narrow(&p, &NarrowRequest::default()).expect("narrow");
        assert_eq!(c.networks, p.networks);
        assert_eq!(c.pids_limit, 1000);
        assert_eq!(c.network_mode, NetworkMode::Bridge);
    }

    #[test]
    fn subset_by_name_or_id_only() {
        let p = parent();
        let c = narrow(
            &p,
            &NarrowRequest {
                networks: Some(vec!["metrics".into(), "a".repeat(64)]),
                network_mode: Some(NetworkMode::None),
                ..Default::default()
            },
        )
        .expect("subset");
        let names: Vec<_> = c.networks.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["shop_backend", "metrics"], "parent order kept");
        assert_eq!(c.network_summary, NetworkSummary::Attached);
        assert!(!c.internet, "both chosen networks are internal");
        for bad in ["shop_frontend", "aaaa", "bridge"] {
            let e = narrow(
                &p,
                &NarrowRequest {
                    networks: Some(vec![bad.into()]),
                    ..Default::default()
                },
            )
            .expect_err(bad);
            assert!(e.to_string().contains("not one of the parent's"), "{e}");
        }
    }

    #[test]
    fn compose_project_uses_the_parents_snapshot() {
        let p = parent();
        // Even if "shop" gained a network in Docker after the parent resolved,
        // narrowing never asks Docker: only a and b can be chosen.
        let c = narrow(
            &p,
            &NarrowRequest {
                compose_project: Some("shop".into()),
                ..Default::default()
            },
        )
        .expect("compose");
        let ids: Vec<_> = c.networks.iter().map(|n| &n.id[..1]).collect();
        assert_eq!(ids, ["a", "b"]);
        assert!(narrow(
            &p,
            &NarrowRequest {
                compose_project: Some("other".into()),
                ..Default::default()
            }
        )
        .is_err());
    }

    #[test]
    fn mode_limits_readonly_and_image_only_narrow() {
        let mut p = parent();
        p.network_mode = NetworkMode::None;
        let e = narrow(
            &p,
            &NarrowRequest {
                network_mode: Some(NetworkMode::Bridge),
                ..Default::default()
            },
        )
        .expect_err("none → bridge");
        assert!(e.to_string().contains("never from none to bridge"));
        let p = parent();
        let cases = [
            NarrowRequest {
                pids_limit: Some(1001),
                ..Default::default()
            },
            NarrowRequest {
                pids_limit: Some(0),
                ..Default::default()
            },
            NarrowRequest {
                memory: Some("2g".into()),
                ..Default::default()
            },
            NarrowRequest {
                cpus: Some("2.5".into()),
                ..Default::default()
            },
            NarrowRequest {
                image: Some("ubuntu:24.04".into()),
                ..Default::default()
            },
        ];
        for r in &cases {
            assert!(narrow(&p, r).is_err(), "{r:?} widened");
        }
        let mut ro = parent();
        ro.readonly = true;
        assert!(narrow(
            &ro,
            &NarrowRequest {
                readonly: Some(false),
                ..Default::default()
            }
        )
        .is_err());
        let c = narrow(
            &p,
            &NarrowRequest {
                pids_limit: Some(10),
                memory: Some("512m".into()),
                cpus: Some("0.5".into()),
                readonly: Some(true),
                image: Some(p.image.reference.original.clone()),
                ..Default::default()
            },
        )
        .expect("down is fine");
        assert_eq!(
            (c.pids_limit, c.memory_bytes, c.readonly),
            (10, Some(512 << 20), true)
        );
        assert_eq!(c.cpus.map(|c| c.nano), Some(500_000_000));
        let mut fb = parent();
        fb.isolation = Isolation::Off;
        assert!(narrow(&fb, &NarrowRequest::default()).is_err());
    }

    /// No knob is a silent no-op: each takes effect, equals the parent's,
    /// or is refused naming what would widen.
    #[test]
    fn each_knob_takes_effect_equals_the_parent_or_is_refused() {
        let p = parent();
        let ok =
            |p: &Plan, r: NarrowRequest| narrow(p, &r).unwrap_or_else(|e| panic!("{r:?}: {e}"));
        let no = |p: &Plan, r: NarrowRequest, needle: &str| {
            let e = narrow(p, &r).expect_err(&format!("{r:?} accepted"));
            assert!(e.to_string().contains(needle), "{r:?}: {e}");
        };
        let names = |c: &Plan| {
            c.networks
                .iter()
                .map(|n| n.name.clone())
                .collect::<Vec<_>>()
        };
        let none = || NarrowRequest {
            network_mode: Some(NetworkMode::None),
            ..Default::default()
        };

        // `none` alone: no bridge and no attached network — offline.
        for parent_mode in [NetworkMode::Bridge, NetworkMode::None] {
            let mut q = parent();
            q.network_mode = parent_mode;
            let c = ok(&q, none());
            assert_eq!(c.network_mode, NetworkMode::None);
            assert!(c.networks.is_empty(), "{parent_mode:?}: {:?}", names(&c));
            assert_eq!(c.bridge_network_id, None);
            assert_eq!(c.network_summary, NetworkSummary::None);
            assert!(!c.internet);
        }
        // `none` with networks: exactly those, attached only.
        let c = ok(
            &p,
            NarrowRequest {
                networks: Some(vec!["shop_default".into()]),
                ..none()
            },
        );
        assert_eq!(names(&c), ["shop_default"]);
        assert_eq!(
            (c.network_summary, c.bridge_network_id.as_deref()),
            (NetworkSummary::Attached, None)
        );
        assert!(c.internet, "shop_default is not internal");
        let c = ok(
            &p,
            NarrowRequest {
                compose_project: Some("shop".into()),
                ..none()
            },
        );
        assert_eq!(names(&c), ["shop_backend", "shop_default"]);
        assert_eq!(c.network_summary, NetworkSummary::Attached);
        let c = ok(
            &p,
            NarrowRequest {
                networks: Some(vec![]),
                ..none()
            },
        );
        assert_eq!(
            (c.networks.len(), c.network_summary),
            (0, NetworkSummary::None)
        );
        // An empty list alone drops the attached networks, keeps the bridge.
        let c = ok(
            &p,
            NarrowRequest {
                networks: Some(vec![]),
                ..Default::default()
            },
        );
        assert_eq!(
            (c.networks.len(), c.network_summary),
            (0, NetworkSummary::Bridge)
        );
        // `bridge` equal to the parent's: nothing changes; from none: refused.
        let c = ok(
            &p,
            NarrowRequest {
                network_mode: Some(NetworkMode::Bridge),
                ..Default::default()
            },
        );
        assert_eq!(
            (c.networks, c.network_summary),
            (p.networks.clone(), p.network_summary)
        );
        let mut offline = parent();
        offline.network_mode = NetworkMode::None;
        no(
            &offline,
            NarrowRequest {
                network_mode: Some(NetworkMode::Bridge),
                networks: Some(vec!["metrics".into()]),
                ..Default::default()
            },
            "never from none to bridge",
        );
        for project in ["other", ""] {
            no(
                &p,
                NarrowRequest {
                    compose_project: Some(project.into()),
                    ..Default::default()
                },
                "no network of Compose project",
            );
        }

        // Limits: equal is the parent's value, lower applies, higher refused.
        let pids = |n| NarrowRequest {
            pids_limit: Some(n),
            ..Default::default()
        };
        assert_eq!(ok(&p, pids(1000)).pids_limit, 1000);
        assert_eq!(ok(&p, pids(999)).pids_limit, 999);
        no(&p, pids(1001), "may only go down");
        no(&p, pids(0), "positive integer");
        let mem = |m: &str| NarrowRequest {
            memory: Some(m.into()),
            ..Default::default()
        };
        assert_eq!(ok(&p, mem("1g")).memory_bytes, Some(1 << 30));
        assert_eq!(ok(&p, mem("512m")).memory_bytes, Some(512 << 20));
        no(&p, mem("1025m"), "may only go down");
        no(&p, mem("lots"), "sandbox_memory");
        let cpus = |c: &str| NarrowRequest {
            cpus: Some(c.into()),
            ..Default::default()
        };
        assert_eq!(ok(&p, cpus("2")).cpus.map(|c| c.nano), Some(2_000_000_000));
        assert_eq!(ok(&p, cpus("1")).cpus.map(|c| c.nano), Some(1_000_000_000));
        no(&p, cpus("2.001"), "may only go down");
        // A parent without a limit (a plan of an earlier release): any
        // limit tightens and applies.
        let mut unlimited = parent();
        unlimited.memory_bytes = None;
        unlimited.cpus = None;
        assert_eq!(ok(&unlimited, mem("8g")).memory_bytes, Some(8 << 30));
        assert!(ok(&unlimited, cpus("64")).cpus.is_some());

        // Read-only: on applies, off equal to the parent's is nothing, off
        // from a read-only parent is refused.
        let ro = |b| NarrowRequest {
            readonly: Some(b),
            ..Default::default()
        };
        assert!(ok(&p, ro(true)).readonly);
        assert!(!ok(&p, ro(false)).readonly);
        let mut rop = parent();
        rop.readonly = true;
        assert!(ok(&rop, ro(true)).readonly);
        no(&rop, ro(false), "read-only may only go on");

        // The image: the parent's is accepted, any other refused.
        let img = |i: &str| NarrowRequest {
            image: Some(i.into()),
            ..Default::default()
        };
        assert_eq!(ok(&p, img(&p.image.reference.original)).image, p.image);
        no(&p, img("odek-test/base:1"), "the image stays the parent's");

        // The runtime: the parent's is accepted (and kept), any other
        // refused; a parent on the engine's default keeps that one.
        let rt = |r: &str| NarrowRequest {
            runtime: Some(r.into()),
            ..Default::default()
        };
        let mut gv = parent();
        gv.runtime = Some("runsc".into());
        gv.engine_default_runtime = Some("runc".into());
        assert_eq!(ok(&gv, rt("runsc")).runtime.as_deref(), Some("runsc"));
        assert_eq!(ok(&gv, pids(1)).runtime.as_deref(), Some("runsc"));
        no(
            &gv,
            rt("runc"),
            "the OCI runtime stays the parent's (runsc)",
        );
        let mut dflt = parent();
        dflt.engine_default_runtime = Some("runc".into());
        assert_eq!(ok(&dflt, rt("runc")).runtime, None);
        no(
            &dflt,
            rt("runsc"),
            "the OCI runtime stays the parent's (runc)",
        );
        no(
            &p,
            rt("runc"),
            "the OCI runtime stays the parent's (the engine's default)",
        );
    }
}
