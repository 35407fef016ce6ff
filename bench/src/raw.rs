//! The floor: the minimal Engine API calls, issued directly with bollard over
//! one client configured once with the negotiated API version.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use bollard::models::{
    ContainerCreateBody, EndpointSettings, ExecConfig, HostConfig, Ipam, IpamConfig,
    NetworkConnectRequest, NetworkCreateRequest, NetworkingConfig,
};
use bollard::query_parameters::{
    CreateContainerOptions, InspectContainerOptions, InspectNetworkOptions, ListContainersOptions,
    ListNetworksOptions, RemoveContainerOptions,
};
use bollard::{ClientVersion, Docker};
use futures_util::{stream, StreamExt};
use odek_core::engine::{Address, ApiVersion, ContainerSpec, Endpoint};

use crate::BENCH_LABEL;

/// A raw client for `endpoint`, speaking `version` (negotiated once, by the
/// caller) on every request.
pub fn connect(endpoint: &Endpoint, version: ApiVersion) -> Result<Docker> {
    let cv = ClientVersion {
        major_version: version.major as usize,
        minor_version: version.minor as usize,
    };
    let d = match &endpoint.address {
        Address::Unix { path } => Docker::connect_with_unix(&path.to_string_lossy(), 120, &cv),
        Address::Tcp { authority } => {
            Docker::connect_with_http(&format!("tcp://{authority}"), 120, &cv)
        }
        Address::Ssh { .. } => bail!(
            "the benchmark's raw floor speaks to a Unix socket or TCP, not {}",
            endpoint.address
        ),
    }
    .context("connecting the raw bollard client")?;
    Ok(d)
}

fn bench_labels() -> HashMap<String, String> {
    HashMap::from([(BENCH_LABEL.0.to_string(), BENCH_LABEL.1.to_string())])
}

fn label_filter() -> HashMap<String, Vec<String>> {
    HashMap::from([(
        "label".to_string(),
        vec![format!("{}={}", BENCH_LABEL.0, BENCH_LABEL.1)],
    )])
}

/// Per-call timings of one raw launch.
#[derive(Debug, Default, Clone)]
pub struct LaunchSteps {
    pub create: Duration,
    pub start: Duration,
    pub connect: Duration,
    pub inspect: Duration,
}

/// The floor of a launch: create with the first network, start, connect the
/// others, inspect. With `connect_first`, the other networks are connected
/// to the created container before it starts (an alternative order, measured
/// as a candidate optimisation). Returns the container ID.
pub async fn launch(
    d: &Docker,
    spec: &ContainerSpec,
    more_networks: &[String],
    connect_first: bool,
) -> Result<(String, LaunchSteps)> {
    let mut steps = LaunchSteps::default();
    let t = Instant::now();
    let created = d
        .create_container(
            Some(CreateContainerOptions {
                name: Some(spec.name.clone()),
                ..Default::default()
            }),
            odek_core::engine::create_body(spec),
        )
        .await
        .context("raw create")?;
    steps.create = t.elapsed();
    let connect = || async {
        let t = Instant::now();
        for n in more_networks {
            d.connect_network(
                n,
                NetworkConnectRequest {
                    container: created.id.clone(),
                    endpoint_config: Some(EndpointSettings::default()),
                },
            )
            .await
            .context("raw connect")?;
        }
        Ok::<_, anyhow::Error>(t.elapsed())
    };
    if connect_first {
        steps.connect = connect().await?;
    }
    let t = Instant::now();
    d.start_container(&created.id, None)
        .await
        .context("raw start")?;
    steps.start = t.elapsed();
    if !connect_first {
        steps.connect = connect().await?;
    }
    let t = Instant::now();
    let info = d
        .inspect_container(&created.id, Some(InspectContainerOptions { size: false }))
        .await
        .context("raw inspect")?;
    steps.inspect = t.elapsed();
    let running = info.state.and_then(|s| s.running).unwrap_or(false);
    let nets = info
        .network_settings
        .and_then(|n| n.networks)
        .map_or(0, |n| n.len());
    if !running || nets != 1 + more_networks.len() {
        bail!("raw launch: running={running}, {nets} networks");
    }
    Ok((created.id, steps))
}

/// Per-call timings of one raw launch on its own network (SPEC §4.4).
#[derive(Debug, Default, Clone)]
pub struct LinkedSteps {
    pub network: Duration,
    pub create: Duration,
    pub start: Duration,
    pub list: Duration,
    pub connect: Duration,
    pub inspect: Duration,
}

/// The floor of a launch as odek launches since SPEC §4.4, like for like:
/// create the sandbox's own network (`link_name`, bridge, Internal,
/// labelled, from the daemon's default pools as odek's), create the
/// container on it (`spec` with that network as its mode), start it, list
/// the running containers of the planned networks (`networks`, names: one
/// `GET /containers/json` with a `network` filter) and connect each to the
/// new network under its aliases there (`aliases`: container ID → aliases,
/// found before the timing; odek inspects each for them), then inspect.
/// Returns (container ID, network ID, steps). The network and its
/// endpoints are removed by [`remove_linked`].
pub async fn launch_linked(
    d: &Docker,
    spec: &ContainerSpec,
    link_name: &str,
    networks: &[String],
    aliases: &HashMap<String, Vec<String>>,
) -> Result<(String, String, LinkedSteps)> {
    let mut steps = LinkedSteps::default();
    let t = Instant::now();
    let link = d
        .create_network(NetworkCreateRequest {
            name: link_name.to_string(),
            driver: Some("bridge".into()),
            internal: Some(true),
            labels: Some(bench_labels()),
            ..Default::default()
        })
        .await
        .context("raw create network")?
        .id;
    steps.network = t.elapsed();
    let mut spec = spec.clone();
    spec.network_mode = link.clone();
    let t = Instant::now();
    let created = d
        .create_container(
            Some(CreateContainerOptions {
                name: Some(spec.name.clone()),
                ..Default::default()
            }),
            odek_core::engine::create_body(&spec),
        )
        .await
        .context("raw create")?;
    steps.create = t.elapsed();
    let t = Instant::now();
    d.start_container(&created.id, None)
        .await
        .context("raw start")?;
    steps.start = t.elapsed();
    let t = Instant::now();
    let members = d
        .list_containers(Some(ListContainersOptions {
            filters: Some(HashMap::from([("network".to_string(), networks.to_vec())])),
            ..Default::default()
        }))
        .await
        .context("raw list members")?;
    steps.list = t.elapsed();
    let t = Instant::now();
    for m in members.iter().filter_map(|m| m.id.as_ref()) {
        if *m == created.id {
            continue;
        }
        d.connect_network(
            &link,
            NetworkConnectRequest {
                container: m.clone(),
                endpoint_config: Some(EndpointSettings {
                    aliases: aliases.get(m).cloned(),
                    ..Default::default()
                }),
            },
        )
        .await
        .context("raw connect")?;
    }
    steps.connect = t.elapsed();
    let t = Instant::now();
    let info = d
        .inspect_container(&created.id, Some(InspectContainerOptions { size: false }))
        .await
        .context("raw inspect")?;
    steps.inspect = t.elapsed();
    let running = info.state.and_then(|s| s.running).unwrap_or(false);
    let nets = info
        .network_settings
        .and_then(|n| n.networks)
        .map_or(0, |n| n.len());
    if !running || nets != 1 {
        bail!("raw linked launch: running={running}, {nets} networks");
    }
    Ok((created.id, link, steps))
}

/// The aliases each running container of `networks` (names) has there,
/// by container ID: what [`launch_linked`] connects them under.
pub async fn member_aliases(
    d: &Docker,
    networks: &[String],
) -> Result<HashMap<String, Vec<String>>> {
    let members = d
        .list_containers(Some(ListContainersOptions {
            filters: Some(HashMap::from([("network".to_string(), networks.to_vec())])),
            ..Default::default()
        }))
        .await
        .context("raw list members")?;
    let mut out = HashMap::new();
    for id in members.iter().filter_map(|m| m.id.clone()) {
        let info = d
            .inspect_container(&id, Some(InspectContainerOptions { size: false }))
            .await
            .context("raw inspect member")?;
        let mut aliases: Vec<String> = info
            .network_settings
            .and_then(|n| n.networks)
            .unwrap_or_default()
            .into_iter()
            .filter(|(name, _)| networks.contains(name))
            .flat_map(|(_, e)| e.aliases.unwrap_or_default())
            .collect();
        aliases.sort();
        aliases.dedup();
        out.insert(id, aliases);
    }
    Ok(out)
}

/// Removes a [`launch_linked`] network after its container: every
/// endpoint disconnected (forced), then the network.
pub async fn remove_linked(d: &Docker, link: &str) -> Result<()> {
    for c in inspect_network(d, link).await? {
        let _ = d
            .disconnect_network(
                link,
                bollard::models::NetworkDisconnectRequest {
                    container: c,
                    force: Some(true),
                },
            )
            .await;
    }
    d.remove_network(link).await.context("raw remove network")
}

/// Per-call timings of one raw exec.
#[derive(Debug, Default, Clone)]
pub struct ExecSteps {
    pub create: Duration,
    pub start_attached: Duration,
    pub inspect: Duration,
}

/// The floor of an exec: create, start attached (drain), inspect.
pub async fn exec_true(d: &Docker, container: &str) -> Result<ExecSteps> {
    let mut steps = ExecSteps::default();
    let t = Instant::now();
    let created = d
        .create_exec(
            container,
            ExecConfig {
                attach_stdout: Some(true),
                attach_stderr: Some(true),
                attach_stdin: Some(false),
                tty: Some(false),
                cmd: Some(vec!["true".to_string()]),
                env: Some(Vec::new()),
                working_dir: Some("/workspace".to_string()),
                ..Default::default()
            },
        )
        .await
        .context("raw exec create")?;
    steps.create = t.elapsed();
    let t = Instant::now();
    if let bollard::exec::StartExecResults::Attached { mut output, .. } = d
        .start_exec(&created.id, None)
        .await
        .context("raw exec start")?
    {
        while let Some(item) = output.next().await {
            item.context("raw exec stream")?;
        }
    }
    steps.start_attached = t.elapsed();
    let t = Instant::now();
    let r = d
        .inspect_exec(&created.id)
        .await
        .context("raw exec inspect")?;
    steps.inspect = t.elapsed();
    if r.exit_code != Some(0) {
        bail!("raw exec: exit {:?}", r.exit_code);
    }
    Ok(steps)
}

/// Force-removes a container (and anonymous volumes); absent is fine.
pub async fn remove(d: &Docker, id: &str) -> Result<()> {
    match d
        .remove_container(
            id,
            Some(RemoveContainerOptions {
                v: true,
                force: true,
                link: false,
            }),
        )
        .await
    {
        Ok(()) => Ok(()),
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => Ok(()),
        // An auto-removed sandbox (its owner let go) already on its way out.
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 409,
            message,
        }) if message.contains("already in progress") => Ok(()),
        Err(e) => Err(e).context("raw remove"),
    }
}

pub async fn inspect_container(d: &Docker, id: &str) -> Result<()> {
    d.inspect_container(id, Some(InspectContainerOptions { size: false }))
        .await
        .map(drop)
        .context("raw inspect container")
}

pub async fn inspect_network(d: &Docker, id: &str) -> Result<Vec<String>> {
    let n = d
        .inspect_network(
            id,
            Some(InspectNetworkOptions {
                verbose: false,
                scope: None,
            }),
        )
        .await
        .context("raw inspect network")?;
    Ok(n.containers.unwrap_or_default().into_keys().collect())
}

/// `GET /networks` with a label filter (what odek's compose resolution sends).
pub async fn list_networks_label(d: &Docker, label: &str) -> Result<usize> {
    let f = HashMap::from([("label".to_string(), vec![label.to_string()])]);
    Ok(
        d.list_networks(Some(ListNetworksOptions { filters: Some(f) }))
            .await
            .context("raw list networks")?
            .len(),
    )
}

/// `GET /networks` with one `name` filter holding every name (the daemon ORs
/// the values; it matches substrings, so callers compare names exactly).
pub async fn list_networks_names(d: &Docker, names: &[String]) -> Result<usize> {
    let f = HashMap::from([("name".to_string(), names.to_vec())]);
    let list = d
        .list_networks(Some(ListNetworksOptions { filters: Some(f) }))
        .await
        .context("raw list networks by name")?;
    Ok(list
        .iter()
        .filter(|n| n.name.as_ref().is_some_and(|x| names.contains(x)))
        .count())
}

/// A bench network: labelled, internal, bridge, with an explicit subnet (the
/// daemon's default pools hold only ~30 networks). Returns its ID.
pub async fn create_network(
    d: &Docker,
    name: &str,
    subnet: &str,
    extra_labels: &[(&str, &str)],
) -> Result<String> {
    let mut labels = bench_labels();
    for (k, v) in extra_labels {
        labels.insert((*k).to_string(), (*v).to_string());
    }
    let r = d
        .create_network(NetworkCreateRequest {
            name: name.to_string(),
            driver: Some("bridge".into()),
            internal: Some(true),
            labels: Some(labels),
            ipam: Some(Ipam {
                driver: Some("default".into()),
                config: Some(vec![IpamConfig {
                    subnet: Some(subnet.to_string()),
                    ..Default::default()
                }]),
                options: None,
            }),
            ..Default::default()
        })
        .await
        .with_context(|| format!("creating network {name} ({subnet})"))?;
    Ok(r.id)
}

/// Creates many bench networks concurrently (at most `concurrency` in
/// flight); subnets from `subnet(i)`. A subnet the daemon refuses as
/// overlapping is retried with the next free index. Returns the IDs.
pub async fn create_networks(
    d: &Docker,
    prefix: &str,
    range: std::ops::Range<usize>,
    concurrency: usize,
    subnet: impl Fn(usize) -> String + Sync,
) -> Result<Vec<String>> {
    let subnet = &subnet;
    let results: Vec<Result<String>> = stream::iter(range.clone())
        .map(|i| async move {
            // On overlap, step through a disjoint set of spare indices.
            let mut k = i;
            for _ in 0..8 {
                match create_network(d, &format!("{prefix}-{i}"), &subnet(k), &[]).await {
                    Ok(id) => return Ok(id),
                    Err(e) if format!("{e:#}").contains("overlap") => k += 4096,
                    Err(e) => return Err(e),
                }
            }
            bail!("no free subnet for network {prefix}-{i}")
        })
        .buffer_unordered(concurrency)
        .collect()
        .await;
    results.into_iter().collect()
}

/// Removes networks concurrently; "not found" is fine. A network Docker
/// 20.10 keeps with a phantom endpoint ("has active endpoints" with no
/// container attached) is tried three times, then left with a warning: only
/// a daemon restart removes it, and the leftover count reports it.
pub async fn remove_networks(d: &Docker, ids: &[String], concurrency: usize) -> Result<()> {
    let results: Vec<Result<()>> = stream::iter(ids.iter())
        .map(|id| async move {
            for attempt in 0..3 {
                match d.remove_network(id).await {
                    Ok(())
                    | Err(bollard::errors::Error::DockerResponseServerError {
                        status_code: 404, ..
                    }) => return Ok(()),
                    Err(bollard::errors::Error::DockerResponseServerError {
                        status_code: 403,
                        message,
                    }) if message.contains("active endpoints") => {
                        if attempt == 2 {
                            eprintln!("odek-bench: warning: network {id} keeps an endpoint no container holds (a Docker 20.10 bug; a daemon restart removes it); left behind");
                            return Ok(());
                        }
                        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
                    }
                    Err(e) => return Err(e).with_context(|| format!("removing network {id}")),
                }
            }
            Ok(())
        })
        .buffer_unordered(concurrency)
        .collect()
        .await;
    results.into_iter().collect()
}

/// IDs of containers (all states) labelled by the bench.
pub async fn bench_containers(d: &Docker) -> Result<Vec<String>> {
    let list = d
        .list_containers(Some(ListContainersOptions {
            all: true,
            filters: Some(label_filter()),
            ..Default::default()
        }))
        .await
        .context("listing bench containers")?;
    Ok(list.into_iter().filter_map(|c| c.id).collect())
}

/// IDs of networks labelled by the bench.
pub async fn bench_networks(d: &Docker) -> Result<Vec<String>> {
    let list = d
        .list_networks(Some(ListNetworksOptions {
            filters: Some(label_filter()),
        }))
        .await
        .context("listing bench networks")?;
    Ok(list.into_iter().filter_map(|n| n.id).collect())
}

/// Removes everything the bench labelled: containers first (force), then
/// networks. Returns (containers, networks) removed.
pub async fn remove_all_labelled(d: &Docker) -> Result<(usize, usize)> {
    let cs = bench_containers(d).await?;
    let results: Vec<Result<()>> = stream::iter(cs.iter())
        .map(|id| remove(d, id))
        .buffer_unordered(8)
        .collect()
        .await;
    results.into_iter().collect::<Result<Vec<()>>>()?;
    let ns = bench_networks(d).await?;
    remove_networks(d, &ns, 8).await?;
    Ok((cs.len(), ns.len()))
}

/// An idle peer container on one network, with a Compose-like service alias
/// and label: `sleep infinity` ignores SIGTERM, so it is only ever removed
/// with force. Returns its ID.
pub async fn create_peer(
    d: &Docker,
    name: &str,
    network_id: &str,
    service: &str,
    image: &str,
) -> Result<String> {
    let mut labels = bench_labels();
    labels.insert("com.docker.compose.service".into(), service.to_string());
    let body = ContainerCreateBody {
        image: Some(image.to_string()),
        cmd: Some(vec!["sleep".into(), "infinity".into()]),
        labels: Some(labels),
        host_config: Some(HostConfig {
            network_mode: Some(network_id.to_string()),
            ..Default::default()
        }),
        networking_config: Some(NetworkingConfig {
            endpoints_config: Some(HashMap::from([(
                network_id.to_string(),
                EndpointSettings {
                    aliases: Some(vec![service.to_string()]),
                    ..Default::default()
                },
            )])),
        }),
        ..Default::default()
    };
    let c = d
        .create_container(
            Some(CreateContainerOptions {
                name: Some(name.to_string()),
                ..Default::default()
            }),
            body,
        )
        .await
        .with_context(|| format!("creating peer {name}"))?;
    d.start_container(&c.id, None)
        .await
        .with_context(|| format!("starting peer {name}"))?;
    Ok(c.id)
}

/// A candidate resolution strategy (not what odek does): find a Compose
/// project's networks through its containers (`GET /containers/json` with
/// the project label, whose cost does not depend on unrelated networks),
/// then inspect each network by ID and keep those carrying the label.
/// Returns the networks found.
pub async fn resolve_via_containers(d: &Docker, project: &str) -> Result<usize> {
    let label = format!("com.docker.compose.project={project}");
    let list = d
        .list_containers(Some(ListContainersOptions {
            all: true,
            filters: Some(HashMap::from([("label".to_string(), vec![label])])),
            ..Default::default()
        }))
        .await
        .context("listing project containers")?;
    let ids: std::collections::BTreeSet<String> = list
        .into_iter()
        .filter_map(|c| c.network_settings.and_then(|n| n.networks))
        .flat_map(|m| m.into_values().filter_map(|e| e.network_id))
        .collect();
    let nets = futures_util::future::join_all(ids.iter().map(|id| {
        d.inspect_network(
            id,
            Some(InspectNetworkOptions {
                verbose: false,
                scope: None,
            }),
        )
    }))
    .await;
    let mut found = 0;
    for n in nets {
        let n = n.context("inspecting a project network")?;
        if n.labels
            .unwrap_or_default()
            .get("com.docker.compose.project")
            .map(String::as_str)
            == Some(project)
        {
            found += 1;
        }
    }
    Ok(found)
}

/// The link networks (SPEC §4.4, label `dev.odek.link=<sandbox>`) of
/// sandboxes `ours` says are this run's, made at or after `since` (Unix
/// seconds, their `dev.odek.created` label), whose sandbox container is
/// gone: what a phase that removed an odek sandbox by the raw API or the
/// CLI left. Removes them unless `dry_run`; returns their names.
pub async fn orphan_links(
    d: &Docker,
    ours: impl Fn(&str) -> bool,
    since: u64,
    dry_run: bool,
) -> Result<Vec<String>> {
    let list = d
        .list_networks(Some(ListNetworksOptions {
            filters: Some(HashMap::from([(
                "label".to_string(),
                vec!["dev.odek.link".to_string()],
            )])),
        }))
        .await
        .context("listing link networks")?;
    let mut found = Vec::new();
    for n in list {
        let labels = n.labels.clone().unwrap_or_default();
        let (Some(sandbox), Some(id), Some(name)) = (labels.get("dev.odek.link"), n.id, n.name)
        else {
            continue;
        };
        let created: u64 = labels
            .get("dev.odek.created")
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        if !ours(sandbox) || created < since || name != format!("{sandbox}-link") {
            continue;
        }
        if d.inspect_container(
            sandbox,
            None::<bollard::query_parameters::InspectContainerOptions>,
        )
        .await
        .is_ok()
        {
            continue;
        }
        if !dry_run {
            // The services odek connected to it (SPEC §4.4) first: the
            // daemon refuses to remove a network with endpoints.
            for c in inspect_network(d, &id).await.unwrap_or_default() {
                let _ = d
                    .disconnect_network(
                        &id,
                        bollard::models::NetworkDisconnectRequest {
                            container: c,
                            force: Some(true),
                        },
                    )
                    .await;
            }
            remove_networks(d, std::slice::from_ref(&id), 1).await?;
        }
        found.push(name);
    }
    Ok(found)
}
