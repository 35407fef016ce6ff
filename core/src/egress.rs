//! Egress mode (SPEC §4.5): with `sandbox_egress` set, the sandbox has no
//! route out; its only network is its own internal link network (§4.4),
//! which it shares with the attached services' containers and with one
//! egress proxy, `<sandbox>-egress`, the only member also on the egress
//! network (`sandbox_egress_network`, default the engine's default
//! bridge). The proxy is odek's static `odek-egress` binary (located like
//! the supervisor: [`EGRESS_ENV`], else beside odek or libodek), copied
//! into `$ODEK_HOME/egress/<sha256 prefix>/` and bind-mounted read-only
//! into a container of an empty image odek builds `FROM scratch`
//! ([`ROOT_IMAGE`]: no file, no environment of the sandbox's image reaches
//! it), run as a non-root user
//! with every capability dropped, a read-only root, no-new-privileges and
//! odek's seccomp profile. Its policy ([`odek_egress::policy`]) is its
//! argument; it echoes the policy's SHA-256 on its ready line, and a proxy
//! that does not (it did not start, or says another hash) refuses the
//! launch: odek never falls back to open egress.
//!
//! The proxy is owned like the sandbox (its stdin is its owner's
//! attachment, so it ends with the owner, SIGKILL included) and removed
//! with the sandbox's link network ([`crate::link`]'s release, by close,
//! `down`, gc, and the sweep of orphans). Its log holds each refusal
//! (`odek-egress deny host:port reason`), which `describe` lists.

use std::collections::BTreeMap;
use std::time::Duration;

use odek_egress::policy::{self, Policy, PROXY_PORT};

use crate::config::{Source, Sourced};
use crate::engine::{BindMount, ContainerSpec, DockerApi, EngineError, NetworkFilter, StdinHold};
use crate::error::{Error, Result};
use crate::failure::Step;
pub use crate::plan::EgressPlan;
use crate::plan::Plan;

/// The process-level variable naming the proxy binary (docs/CONFIG.md):
/// set and not empty, that file; unset, `odek-egress` beside odek (or
/// libodek), then `../libexec/odek/odek-egress`.
pub use crate::config::EGRESS_ENV;

/// The binary's file name.
pub const BINARY_NAME: &str = "odek-egress";

/// Where the binary's directory is mounted in the proxy's container.
pub const PROXY_DIR: &str = "/.odek";

/// The binary's path in the proxy's container.
pub const PROXY_PATH: &str = "/.odek/odek-egress";

/// The uid:gid the proxy runs as (`nobody` on most images; numeric, so
/// the image needs no account).
pub const PROXY_USER: &str = "65534:65534";

/// How long a launch waits for the proxy's ready line.
pub const READY_BUDGET: Duration = Duration::from_secs(10);

/// The most bytes of the proxy's log odek reads (its end).
pub const MAX_LOG: usize = 256 * 1024;

/// The label on the proxy's container: the sandbox's name.
pub const EGRESS_LABEL: &str = "dev.odek.egress";

/// The tag of the image the proxy runs from (SPEC §4.5): built by odek
/// `FROM scratch`, so it holds no file, no layer and no environment —
/// nothing of the sandbox's image (its `ENV`, `/etc/nsswitch.conf`, NSS
/// modules) reaches the proxy, whose only file is its bind-mounted binary.
pub const ROOT_IMAGE: &str = "odek-egress-root:1";

/// The label on [`ROOT_IMAGE`].
pub const ROOT_LABEL: &str = "dev.odek.egress-root";

/// Why image `info` may not be the proxy's root: it has a layer (files),
/// or an environment beyond `PATH`. `None` when it is empty. Who made or
/// tagged it does not matter: an image with no layer and no environment
/// gives a process nothing but what the container's own spec sets.
pub fn root_problem(info: &crate::engine::ImageInfo) -> Option<String> {
    if info.layers != 0 {
        return Some(format!("it has {} filesystem layer(s)", info.layers));
    }
    if let Some(v) = info.env.iter().find(|v| !v.starts_with("PATH=")) {
        let key = v.split('=').next().unwrap_or_default();
        return Some(format!(
            "it sets the environment variable {}",
            crate::text::quote(key)
        ));
    }
    None
}

/// The ID of the proxy's root image: [`ROOT_IMAGE`] when it is present
/// and empty ([`root_problem`]), else built now (`FROM scratch`, no
/// context, no pull: works offline, about a second) and checked again.
/// Errors: the reason, for the launch's refusal.
async fn root_image(engine: &dyn DockerApi) -> std::result::Result<String, String> {
    let found = engine
        .inspect_image(ROOT_IMAGE)
        .await
        .map_err(|e| format!("its image {ROOT_IMAGE}: {}", e.message))?;
    if let Some(info) = found.filter(|i| root_problem(i).is_none()) {
        return Ok(info.id);
    }
    let mut tar = tar::Builder::new(Vec::new());
    let dockerfile = b"FROM scratch\n";
    let mut h = tar::Header::new_gnu();
    h.set_size(dockerfile.len() as u64);
    h.set_mode(0o644);
    h.set_cksum();
    tar.append_data(&mut h, "Dockerfile", &dockerfile[..])
        .map_err(|e| format!("its image's build context: {e}"))?;
    let context = tar
        .into_inner()
        .map_err(|e| format!("its image's build context: {e}"))?;
    let labels = BTreeMap::from([(ROOT_LABEL.to_string(), "true".to_string())]);
    let id = engine
        .build_image(context, "Dockerfile", ROOT_IMAGE, &labels, &|_| {})
        .await
        .map_err(|e| format!("building its image {ROOT_IMAGE}: {}", e.message))?;
    let info = engine
        .inspect_image(&id)
        .await
        .map_err(|e| format!("its image {ROOT_IMAGE}: {}", e.message))?
        .ok_or_else(|| format!("its image {ROOT_IMAGE} vanished after its build"))?;
    match root_problem(&info) {
        None => Ok(info.id),
        Some(why) => Err(format!(
            "its image {ROOT_IMAGE} as built is not empty: {why}"
        )),
    }
}

/// The proxy container's name for sandbox `sandbox`.
pub fn proxy_name(sandbox: &str) -> String {
    format!("{sandbox}-egress")
}

/// Resolves egress mode's settings (SPEC §4.5): the allowlist, and the
/// egress network by exact name (`bridge`, the default: the engine's
/// default bridge), which must be a local, non-internal bridge.
///
/// Errors (class config): a network that is not there, ambiguous, not a
/// local bridge, or internal; the engine's failures by class.
pub(crate) async fn resolve(
    engine: &dyn DockerApi,
    allow: &Sourced<Vec<String>>,
    network: Option<&Sourced<String>>,
) -> Result<EgressPlan> {
    let ep = engine.endpoint().to_string();
    // The proxy is odek's own binary, bind-mounted from $ODEK_HOME on this
    // machine (SPEC §4.5, §6.2.2): an engine on another machine would mount
    // whatever is at that path there.
    if !engine.endpoint().is_local() {
        return Err(Error::Config(crate::config::ConfigError::InvalidValue {
            origin: allow.source.to_string(),
            key: crate::config::names::sandbox_egress.into(),
            reason: format!(
                "needs odek's egress proxy, whose binary is bind-mounted from this machine, but the engine at {} runs on another machine, so nothing was created; use sandbox_network none or an internal network there, or run odek on the engine's machine",
                crate::text::shown(&ep)
            ),
        }));
    }
    let rules = policy::parse_rules(&allow.value).map_err(|reason| {
        Error::Config(crate::config::ConfigError::InvalidValue {
            origin: allow.source.to_string(),
            key: crate::config::names::sandbox_egress.into(),
            reason: format!("has the entry {reason}"),
        })
    })?;
    let name = network.map_or("bridge", |n| n.value.as_str()).to_string();
    let origin = network.map_or(Source::Default, |n| n.source.clone());
    let refuse = |reason: String| {
        Error::Config(crate::config::ConfigError::InvalidValue {
            origin: origin.to_string(),
            key: crate::config::names::sandbox_egress_network.into(),
            reason,
        })
    };
    let found = if name == "bridge" {
        let n = engine
            .inspect_network("bridge")
            .await
            .map_err(|e| Error::engine(&ep, Step::Ping, e))?;
        n.filter(|n| {
            n.name == "bridge"
                && n.options
                    .get("com.docker.network.bridge.default_bridge")
                    .map(String::as_str)
                    == Some("true")
        })
        .ok_or_else(|| {
            refuse(
                "names the default bridge, which this engine does not have; name a network".into(),
            )
        })?
    } else {
        let listed = engine
            .list_networks(&NetworkFilter::Names(vec![name.clone()]))
            .await
            .map_err(|e| Error::engine(&ep, Step::Ping, e))?;
        let exact: Vec<_> = listed.into_iter().filter(|n| n.name == name).collect();
        let id = match exact.as_slice() {
            [one] => one.id.clone(),
            [] => {
                return Err(refuse(format!(
                    "names {}, which does not exist",
                    crate::text::quote(&name)
                )))
            }
            _ => {
                return Err(refuse(format!(
                    "names {}, which {} networks are called",
                    crate::text::quote(&name),
                    exact.len()
                )))
            }
        };
        engine
            .inspect_network(&id)
            .await
            .map_err(|e| Error::engine(&ep, Step::Ping, e))?
            .ok_or_else(|| {
                refuse(format!(
                    "names {}, which vanished",
                    crate::text::quote(&name)
                ))
            })?
    };
    if found.driver != "bridge" || found.scope != "local" {
        return Err(refuse(format!(
            "names {}, a {} network of scope {}; only local bridges are used",
            crate::text::quote(&name),
            crate::text::quote(&found.driver),
            crate::text::quote(&found.scope)
        )));
    }
    if found.internal {
        return Err(refuse(format!(
            "names {}, which is internal: the proxy could reach nothing through it",
            crate::text::quote(&name)
        )));
    }
    Ok(EgressPlan {
        allow: rules.iter().map(ToString::to_string).collect(),
        network: name,
        network_id: found.id,
        subnets: found.ipam.iter().map(|s| s.subnet.clone()).collect(),
        gateways: found
            .ipam
            .iter()
            .filter_map(|s| s.gateway.clone())
            .filter(|g| !g.is_empty())
            .collect(),
    })
}

/// Where [`host_binary`] looks when [`EGRESS_ENV`] is unset: the
/// supervisor's places ([`crate::supervisor::candidates`]) with this
/// binary's name.
pub fn candidates() -> Vec<std::path::PathBuf> {
    crate::supervisor::candidates()
        .into_iter()
        .map(|p| p.with_file_name(BINARY_NAME))
        .collect()
}

/// The proxy binary on this host: [`EGRESS_ENV`] when set and not empty,
/// else the first of [`candidates`] that exists.
///
/// Errors: why there is none, for people.
pub fn host_binary() -> std::result::Result<std::path::PathBuf, String> {
    if let Some(v) = std::env::var_os(EGRESS_ENV).filter(|v| !v.is_empty()) {
        return Ok(v.into());
    }
    crate::supervisor::first_installed(&candidates(), BINARY_NAME, EGRESS_ENV, "beside odek")
}

/// The proxy binary as the config view shows it: `odek-egress sha256:<hex>
/// (<path>)`, or `none: <why>` (a launch in egress mode is then refused).
pub fn binary_identity() -> String {
    use sha2::Digest;
    let found = host_binary().and_then(|b| {
        crate::supervisor::read_binary(&b)
            .map(|bytes| (b, bytes))
            .map_err(|e| e.to_string())
    });
    match found {
        Ok((b, bytes)) if crate::supervisor::is_static_elf(&bytes) => format!(
            "{BINARY_NAME} sha256:{} ({})",
            hex::encode(sha2::Sha256::digest(&bytes)),
            crate::text::shown(&b)
        ),
        Ok((b, _)) => format!(
            "none: {} is not a static executable",
            crate::text::shown(&b)
        ),
        Err(why) => format!("none: {why}"),
    }
}

/// The binary's private copy's directory and the binary's SHA-256.
fn binary_copy(
    home: &std::path::Path,
) -> std::result::Result<(std::path::PathBuf, String), String> {
    use sha2::Digest;
    let binary = host_binary()?;
    let bytes = crate::supervisor::read_binary(&binary)
        .map_err(|e| format!("{} cannot be read ({e})", crate::text::shown(&binary)))?;
    if !crate::supervisor::is_static_elf(&bytes) {
        return Err(format!(
            "{} is not a static executable",
            crate::text::shown(&binary)
        ));
    }
    let digest = hex::encode(sha2::Sha256::digest(&bytes));
    let dir =
        crate::supervisor::private_copy_as(&bytes, home, "egress", BINARY_NAME).map_err(|e| {
            format!(
                "{} cannot be copied into ODEK_HOME ({e})",
                crate::text::shown(&binary)
            )
        })?;
    Ok((dir, digest))
}

/// A started, verified proxy.
pub(crate) struct Proxy {
    /// Its container's full ID.
    pub(crate) id: String,
    /// Its address on the sandbox's link network.
    pub(crate) ip: String,
    /// Its owner's attachment to its stdin (an owned sandbox's).
    pub(crate) hold: Option<StdinHold>,
}

impl Proxy {
    /// `http://<ip>:3128`, what the sandbox's proxy variables name.
    pub(crate) fn url(&self) -> String {
        format!("http://{}:{PROXY_PORT}", self.ip)
    }
}

/// What [`start`] needs of the launch.
pub(crate) struct StartSpec<'a> {
    /// The plan (its egress and hardening).
    pub(crate) plan: &'a Plan,
    /// The plan's egress.
    pub(crate) egress: &'a EgressPlan,
    /// The sandbox's name.
    pub(crate) sandbox: &'a str,
    /// The sandbox's link network's full ID.
    pub(crate) link: &'a str,
    /// The sandbox's owner labels (or its detached label).
    pub(crate) labels: BTreeMap<String, String>,
    /// A detached sandbox's proxy lives until `down`.
    pub(crate) detached: bool,
}

/// Starts sandbox `sandbox`'s proxy (SPEC §4.5): create on the link
/// network, connect the egress network, attach its stdin (owned), start,
/// wait for its ready line and compare the policy hash, read its address
/// back. Any failure removes the container.
///
/// Errors (class docker-rejected): no usable binary, the engine's
/// refusals, no ready line within [`READY_BUDGET`], another policy hash,
/// a proxy on other networks than the two planned.
pub(crate) async fn start(engine: &dyn DockerApi, s: &StartSpec<'_>) -> Result<Proxy> {
    let refused = |step: Step, message: String| {
        Error::Rejected {
        step,
        message: format!("the egress proxy (sandbox_egress) could not be started: {message}; nothing ran, and odek never falls back to open egress"),
        fix: None,
        removal: None,
    }
    };
    let (dir, digest) = binary_copy(&s.plan.odek_home).map_err(|why| refused(Step::Create, why))?;
    let root = root_image(engine)
        .await
        .map_err(|why| refused(Step::Create, why))?;
    let policy = s.egress.policy();
    let mut labels = s.labels.clone();
    labels.insert(crate::labels::SANDBOX.into(), "egress".into());
    labels.insert(EGRESS_LABEL.into(), s.sandbox.into());
    labels.insert("dev.odek.egress-sha256".into(), digest);
    let spec = ContainerSpec {
        name: proxy_name(s.sandbox),
        image: root,
        cmd: vec!["serve".into(), "--policy".into(), policy.to_json()],
        entrypoint: Some(vec![PROXY_PATH.into()]),
        cap_add: Vec::new(),
        log_driver: Some("json-file".into()),
        no_healthcheck: true,
        env: Vec::new(),
        working_dir: "/".into(),
        user: Some(PROXY_USER.into()),
        labels,
        network_mode: s.link.to_string(),
        init: false,
        pids_limit: 64,
        cap_drop: vec!["ALL".into()],
        security_opt: vec![
            "no-new-privileges".into(),
            crate::hardening::seccomp::security_opt(),
        ],
        tmpfs: Vec::new(),
        binds: vec![BindMount {
            source: dir.display().to_string(),
            target: PROXY_DIR.into(),
            read_only: true,
        }],
        memory_bytes: Some(256 << 20),
        nano_cpus: None,
        open_stdin: true,
        stdin_once: !s.detached,
        auto_remove: !s.detached,
        readonly_rootfs: true,
        // The proxy is odek's own binary: the engine's default runtime;
        // and the engine's upstream DNS servers, which resolve the hosts
        // it allows (SPEC §4.6 concerns the sandbox).
        runtime: None,
        dns: Vec::new(),
    };
    let ep = engine.endpoint().to_string();
    let created = engine
        .create_container(&spec)
        .await
        .map_err(|e| with_step(&ep, Step::Create, e))?;
    let id = created.id;
    let started = async {
        engine
            .connect_network(&s.egress.network_id, &id, &[])
            .await
            .map_err(|e| with_step(&ep, Step::Connect, e))?;
        let hold = if s.detached {
            None
        } else {
            Some(
                engine
                    .attach_stdin(&id)
                    .await
                    .map_err(|e| with_step(&ep, Step::Start, e))?,
            )
        };
        engine
            .start_container(&id)
            .await
            .map_err(|e| with_step(&ep, Step::Start, e))?;
        wait_ready(engine, &id, &policy)
            .await
            .map_err(|why| refused(Step::Verify, why))?;
        let info = engine
            .inspect_container(&id)
            .await
            .map_err(|e| with_step(&ep, Step::Verify, e))?
            .ok_or_else(|| refused(Step::Verify, "its container vanished".into()))?;
        let mut nets: Vec<&str> = info
            .endpoints
            .iter()
            .map(|e| e.network_id.as_str())
            .collect();
        nets.sort_unstable();
        let mut want = vec![s.link, s.egress.network_id.as_str()];
        want.sort_unstable();
        if nets != want || !info.running || info.user != PROXY_USER {
            return Err(refused(
                Step::Verify,
                "its container is not as created (networks, user or state differ)".into(),
            ));
        }
        // Its environment is the engine's default PATH and nothing else:
        // no variable steers its resolver (LOCALDOMAIN, RES_OPTIONS, …).
        if let Some(v) = info.env.iter().find(|v| !v.starts_with("PATH=")) {
            let key = v.split('=').next().unwrap_or_default();
            return Err(refused(
                Step::Verify,
                format!(
                    "its container has the environment variable {}, which odek did not set",
                    crate::text::quote(key)
                ),
            ));
        }
        let ip = info
            .endpoints
            .iter()
            .find(|e| e.network_id == s.link)
            .map(|e| e.ip.clone())
            .filter(|ip| ip.parse::<std::net::IpAddr>().is_ok())
            .ok_or_else(|| {
                refused(
                    Step::Verify,
                    "it has no address on the sandbox's network".into(),
                )
            })?;
        Ok::<_, Error>(Proxy {
            id: id.clone(),
            ip,
            hold,
        })
    };
    match started.await {
        Ok(p) => Ok(p),
        Err(e) => {
            let _ = engine.remove_container(&id).await;
            Err(e)
        }
    }
}

fn with_step(ep: &str, step: Step, mut e: EngineError) -> Error {
    e.message = format!("the egress proxy: {}", e.message);
    Error::engine(ep, step, e)
}

/// Waits for the proxy's ready line; the reason when it does not come,
/// says another hash, or the proxy ended.
async fn wait_ready(
    engine: &dyn DockerApi,
    id: &str,
    policy: &Policy,
) -> std::result::Result<(), String> {
    let want = policy.hash();
    let deadline = tokio::time::Instant::now() + READY_BUDGET;
    loop {
        let log = engine
            .container_logs(id, MAX_LOG)
            .await
            .map_err(|e| format!("its log cannot be read ({})", e.message))?;
        let Some(log) = log else {
            return Err("its container ended before it was ready".into());
        };
        if let Some(hash) = policy::ready_hash(&log) {
            if hash == want {
                return Ok(());
            }
            return Err(format!(
                "it reports policy {hash}, not the one odek wrote ({want})"
            ));
        }
        if let Ok(Some(info)) = engine.inspect_container(id).await {
            if !info.running && info.exit.is_some() {
                return Err(format!(
                    "it exited ({}) before it was ready: {}",
                    info.exit.map(|(c, _)| c).unwrap_or_default(),
                    crate::text::foreign(log.trim())
                ));
            }
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(format!("no ready line within {} s", READY_BUDGET.as_secs()));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The environment a sandbox in egress mode gets: `HTTP_PROXY`,
/// `HTTPS_PROXY` and their lower-case forms naming the proxy, and
/// `NO_PROXY`/`no_proxy` covering `localhost` and `services` (the attached
/// services' names, reached directly). A variable `plan`'s `sandbox_env`
/// sets itself (`own`) is left to it.
pub(crate) fn env(own: &[crate::config::EnvVar], url: &str, services: &[String]) -> Vec<String> {
    let mut no_proxy = vec!["localhost".to_string(), "127.0.0.1".into(), "::1".into()];
    no_proxy.extend(services.iter().cloned());
    let no_proxy = no_proxy.join(",");
    [
        ("HTTP_PROXY", url),
        ("HTTPS_PROXY", url),
        ("http_proxy", url),
        ("https_proxy", url),
        ("NO_PROXY", no_proxy.as_str()),
        ("no_proxy", no_proxy.as_str()),
    ]
    .into_iter()
    .filter(|(k, _)| !own.iter().any(|e| e.key == *k))
    .map(|(k, v)| format!("{k}={v}"))
    .collect()
}

/// The names the running containers of `plan`'s networks answer to there
/// (aliases and container names that pass SPEC §9.3), sorted: what
/// `NO_PROXY` lists. Best effort: a failed lookup lists fewer.
pub(crate) async fn service_names(engine: &dyn DockerApi, plan: &Plan) -> Vec<String> {
    let names: Vec<String> = plan.networks.iter().map(|n| n.name.clone()).collect();
    if names.is_empty() {
        return Vec::new();
    }
    let ids: Vec<&str> = plan.networks.iter().map(|n| n.id.as_str()).collect();
    let Ok(members) = engine.list_network_members(&names, false).await else {
        return Vec::new();
    };
    let mut out = std::collections::BTreeSet::new();
    for m in members {
        if m.labels.contains_key(crate::labels::SANDBOX) {
            continue;
        }
        let Ok(Some(info)) = engine.inspect_container(&m.id).await else {
            continue;
        };
        for e in info
            .endpoints
            .iter()
            .filter(|e| ids.contains(&e.network_id.as_str()))
        {
            out.extend(
                e.aliases
                    .iter()
                    .filter_map(|a| crate::text::sanitize_name(a)),
            );
        }
        if let Some(n) = crate::text::sanitize_name(&info.name) {
            out.insert(n);
        }
    }
    out.into_iter().collect()
}

/// Removes sandbox `sandbox`'s proxy when there is one (its name and
/// label say so). Best effort.
pub(crate) async fn remove(engine: &dyn DockerApi, sandbox: &str) {
    let name = proxy_name(sandbox);
    if let Ok(Some(info)) = engine.inspect_container(&name).await {
        if info.labels.get(EGRESS_LABEL).map(String::as_str) == Some(sandbox) {
            let _ = engine.remove_container(&info.id).await;
        }
    }
}

/// The `host:port` targets sandbox `sandbox`'s proxy refused so far, in
/// order, once each (at most 64); `None` when it has no proxy or its log
/// cannot be read.
pub(crate) async fn denied(engine: &dyn DockerApi, sandbox: &str) -> Option<Vec<String>> {
    let name = proxy_name(sandbox);
    let info = engine.inspect_container(&name).await.ok()??;
    if info.labels.get(EGRESS_LABEL).map(String::as_str) != Some(sandbox) {
        return None;
    }
    let log = engine.container_logs(&info.id, MAX_LOG).await.ok()??;
    let mut d = policy::denied_in_log(&log);
    d.truncate(64);
    Some(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_proxy_variables_cover_both_cases_and_leave_the_services_direct() {
        let own = vec![crate::config::EnvVar {
            key: "NO_PROXY".into(),
            value: "mine".into(),
            interpolates_host: false,
            reads: vec![],
        }];
        let env = env(
            &own,
            "http://10.0.0.2:3128",
            &["redis".into(), "postgres".into()],
        );
        assert!(env.contains(&"HTTP_PROXY=http://10.0.0.2:3128".to_string()));
        assert!(env.contains(&"https_proxy=http://10.0.0.2:3128".to_string()));
        assert!(env.contains(&"no_proxy=localhost,127.0.0.1,::1,redis,postgres".to_string()));
        // The plan's own NO_PROXY wins.
        assert!(!env.iter().any(|e| e.starts_with("NO_PROXY=")));
        assert_eq!(proxy_name("odek-abc"), "odek-abc-egress");
    }

    #[test]
    fn the_plan_writes_the_policy_back() {
        let e = EgressPlan {
            allow: vec!["allowed.test".into(), "x.test:8443".into()],
            network: "outside".into(),
            network_id: "n".into(),
            subnets: vec!["172.30.0.0/16".into()],
            gateways: vec!["172.30.0.1".into()],
        };
        let p = e.policy();
        assert_eq!(p.allowed_text(), "allowed.test, x.test:8443");
        assert_eq!(p.check_name("allowed.test", 443), Ok(()));
        assert_eq!(e.allow_shown(), "allowed.test,x.test:8443");
        assert_eq!(EgressPlan { allow: vec![], ..e }.allow_shown(), "-");
    }
}
