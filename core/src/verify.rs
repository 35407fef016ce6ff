//! What a sandbox container runs and how launch checks it (SPEC §6.1,
//! §10.4): the idle process, `/tmp`'s options, the seccomp profile, and
//! `verify`, the check that the settings the engine shows applied are the
//! plan's (also run before `exec`, `describe` and `up --parent` reuse a
//! sandbox).

use crate::config::{names, NetworkMode};
use crate::engine::ContainerInfo;
use crate::network::AttachedNetwork;
use crate::plan::Plan;
use crate::sandbox::Applied;

/// Options of `/tmp` (SPEC §6.1).
pub(crate) const TMP_OPTIONS: &str = "rw,noexec,nosuid";

/// The idle process the container runs; commands run through exec. It
/// reads the container's stdin and ends at its EOF: an owned sandbox's
/// stdin closes when its owner's attachment goes, the idle process exits,
/// docker-init with it, and the engine removes the container (SPEC §6.1
/// owner lifetime). A detached sandbox's stdin stays open.
pub const IDLE_CMD: [&str; 1] = ["cat"];

/// odek's seccomp profile (SPEC §6.1), compact JSON in Docker's format,
/// sent inline as `HostConfig.SecurityOpt` `seccomp=<profile>` with every
/// sandbox and required of it at verify: Docker's default profile, except
/// that no call can put the setuid or setgid bit on a file or make a
/// device node, `openat2` fails with `ENOSYS` and io_uring with `EPERM`.
pub fn seccomp_profile() -> &'static str {
    crate::hardening::seccomp::profile()
}

/// Why a container that is not running cannot be a sandbox: its exit code
/// and Docker's error, and the one cause that fits — Docker's own reason
/// when it gave one; the idle program missing (127) or not executable (126), naming
/// the sandbox_env PATH when one is set; a pids limit below 2 (docker-init
/// and the idle process), with where it came from; else an ENTRYPOINT that
/// exited.
pub(crate) fn not_running(plan: &Plan, exit: Option<&(i64, String)>) -> String {
    let idle = IDLE_CMD.join(" ");
    let program = IDLE_CMD[0];
    let source = |key: &str| {
        plan.sources
            .get(key)
            .map(|s| format!(" from {s}"))
            .unwrap_or_default()
    };
    let path_note = if plan.env.iter().any(|e| e.key == "PATH") {
        format!(
            ", and PATH, set by sandbox_env{}, must reach it",
            source(names::sandbox_env)
        )
    } else {
        String::new()
    };
    match exit {
        Some((code, err)) if !err.is_empty() => format!(
            "the container is not running (exit code {code}: {}): Docker could not start it as planned",
            crate::text::shown(err)
        ),
        Some((127, _)) => format!(
            "the container is not running (exit code 127): its idle process `{idle}` was not found; the image must provide `{program}` on PATH{path_note}"
        ),
        Some((126, _)) => format!(
            "the container is not running (exit code 126): its idle process `{idle}` could not be executed; the image's `{program}` must be executable by the sandbox user{path_note}"
        ),
        Some((code, _)) if plan.pids_limit < 2 => format!(
            "the container is not running (exit code {code}): the pids limit {}{} leaves no room for its idle process `{idle}` beside docker-init; allow 2 processes at least, and more for the commands",
            plan.pids_limit,
            source(names::sandbox_pids_limit)
        ),
        Some((code, _)) => format!(
            "the container is not running (exit code {code}): its idle process `{idle}` ended; an image ENTRYPOINT must run its arguments (`exec \"$@\"`), not exit"
        ),
        None => format!("the container is not running: its idle process `{idle}` is not there"),
    }
}

/// Checks the container against the plan (SPEC §6.1): exactly the planned
/// networks, pids limit, init, `/tmp` options, image ID, limits, masks.
/// Returns what was applied (through `endpoint`, named by its address and,
/// for TCP, how it is secured: `tcp://h:2376 (tls, verified)`, SPEC §6.2.1),
/// or what differs.
pub(crate) fn verify(
    plan: &Plan,
    info: &ContainerInfo,
    image_id: &str,
    endpoint: &crate::engine::Endpoint,
) -> std::result::Result<Applied, String> {
    if !info.running {
        // Nothing else is worth checking (a stopped container shows no
        // network endpoints, for one).
        return Err(not_running(plan, info.exit.as_ref()));
    }
    let mut problems = Vec::new();
    // SPEC §4.4: a sandbox that reaches networks is on its own link
    // network only (one of an earlier release on the networks themselves).
    let link_name = crate::labels::link_name(info.name.trim_start_matches('/'));
    let link = crate::link::uses_link(plan)
        .then(|| {
            info.endpoints
                .iter()
                .find(|e| e.network_name == link_name)
                .map(|e| e.network_id.clone())
        })
        .flatten();
    let out_name = crate::link::OUT_NETWORK;
    let out = link
        .as_ref()
        .and(info.endpoints.iter().find(|e| e.network_name == out_name))
        .map(|e| e.network_id.clone());
    let mut want: Vec<String> = match &link {
        Some(id) => {
            let mut v = vec![id.clone()];
            // Its way out, when the plan reaches the internet without the
            // default bridge.
            if plan.internet && plan.egress.is_none() && plan.network_mode == NetworkMode::None {
                v.push(out.clone().unwrap_or_else(|| format!("(no {out_name})")));
            }
            v
        }
        None => plan.networks.iter().map(|n| n.id.clone()).collect(),
    };
    if plan.network_mode == NetworkMode::Bridge {
        match &plan.bridge_network_id {
            Some(b) => want.push(b.clone()),
            None => problems.push("the default bridge ID is unknown".into()),
        }
    }
    want.sort();
    let mut have: Vec<String> = info
        .endpoints
        .iter()
        .filter(|e| !(want.is_empty() && e.network_name == "none"))
        .map(|e| e.network_id.clone())
        .collect();
    have.sort();
    if have != want {
        let short = |v: &[String]| {
            v.iter()
                .map(|s| s[..12.min(s.len())].to_string())
                .collect::<Vec<_>>()
                .join(",")
        };
        problems.push(format!(
            "networks differ from the plan (planned [{}], attached [{}])",
            short(&want),
            short(&have)
        ));
    }
    if want.is_empty() && info.network_mode != "none" {
        problems.push(format!(
            "network mode is {:?}, planned \"none\"",
            info.network_mode
        ));
    }
    if info.pids_limit != Some(plan.pids_limit) {
        problems.push(format!(
            "PidsLimit is {}, requested {}",
            info.pids_limit
                .filter(|n| *n > 0)
                .map_or("unlimited".to_string(), |n| n.to_string()),
            plan.pids_limit
        ));
    }
    if info.init != Some(true) {
        problems.push("Init is not on".into());
    }
    let tmp = info.tmpfs.get("/tmp").cloned().unwrap_or_default();
    let opts: Vec<&str> = tmp.split(',').collect();
    if !(opts.contains(&"noexec") && opts.contains(&"nosuid")) {
        problems.push(format!("/tmp options are {tmp:?}, need noexec,nosuid"));
    }
    for m in &plan.masks {
        if !info.tmpfs.contains_key(m) {
            problems.push(format!("mask {m} is missing"));
        }
    }
    if let Some(a) = &plan.account {
        match info.tmpfs.get(&a.home) {
            Some(o)
                if o.split(',').any(|x| x == "nosuid") && o.split(',').any(|x| x == "nodev") => {}
            Some(o) => problems.push(format!(
                "{} options are {}, need nosuid,nodev",
                a.home,
                crate::text::quote(o)
            )),
            None => problems.push(format!("the tmpfs HOME {} is missing", a.home)),
        }
    }
    if info.image_id != image_id {
        problems.push(format!(
            "image is {}, the reference resolved to {image_id}",
            info.image_id
        ));
    }
    if info.memory_bytes != plan.memory_bytes.unwrap_or(0) {
        problems.push(format!(
            "Memory is {} bytes, requested {}",
            info.memory_bytes,
            plan.memory_bytes
                .map_or("none (0)".to_string(), |m| m.to_string())
        ));
    }
    if info.nano_cpus != plan.cpus.as_ref().map_or(0, |c| c.nano) {
        problems.push(format!(
            "NanoCpus is {}, requested {}",
            info.nano_cpus,
            plan.cpus.as_ref().map_or(0, |c| c.nano)
        ));
    }
    if !info.cap_drop.iter().any(|c| c.eq_ignore_ascii_case("ALL")) {
        problems.push("capabilities were not all dropped".into());
    }
    if !info
        .security_opt
        .iter()
        .any(|s| s.starts_with("no-new-privileges"))
    {
        problems.push("no-new-privileges is not set".into());
    }
    // SPEC §6.1 "runtime": the runtime asked for is the one the engine
    // runs the container with (a container made by hand, or a daemon whose
    // runtime of that name changed, is refused).
    if let Some(r) = &plan.runtime {
        if info.runtime != *r {
            problems.push(format!(
                "the runtime is {}, requested {}",
                crate::text::quote(&info.runtime),
                crate::text::quote(r)
            ));
        }
    }
    problems.extend(crate::hardening::problems(plan, info));
    if !problems.is_empty() {
        return Err(format!("verification failed: {}", problems.join("; ")));
    }
    let networks = plan
        .networks
        .iter()
        .map(|n| AttachedNetwork {
            name: n.name.clone(),
            id: n.id.clone(),
            internal: n.internal,
            compose_project: n.compose_project.clone(),
        })
        .collect();
    Ok(Applied {
        network_summary: plan.network_summary,
        internet: plan.internet,
        networks,
        pids_limit: info.pids_limit.unwrap_or_default(),
        init: true,
        tmp_options: tmp,
        image_id: info.image_id.clone(),
        runtime: info.runtime.clone(),
        endpoint: format!(
            "{}{}",
            match endpoint.security() {
                Some(how) => format!("{} ({how})", endpoint.address),
                None => endpoint.address.to_string(),
            },
            plan.podman_shown()
        ),
        link_network: link,
        out_network: out,
        dns_forwarding: crate::dns::applied(
            plan.no_route_with_resolver(),
            plan.engine_release(),
            &info.dns,
        ),
        egress_proxy: None,
    })
}
