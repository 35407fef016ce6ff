//! The sandbox flags of SPEC §3.1, shared by `run`, `sandbox up` and
//! `config view`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use clap::Args;
use odek_core::config::{ConfigInputs, Layer};

/// Sandbox settings given on the command line (highest precedence, SPEC §3.2).
#[derive(Args, Debug, Clone, Default)]
pub(crate) struct SandboxFlags {
    /// Require the sandbox: an unreachable daemon or unpullable image is fatal
    /// instead of falling back to the host.
    #[arg(long, conflicts_with = "no_sandbox", help_heading = "Sandbox")]
    pub(crate) sandbox: bool,
    /// Run on the host without a sandbox (networks cannot be attached then).
    #[arg(long, help_heading = "Sandbox")]
    pub(crate) no_sandbox: bool,
    /// Image reference to run (default: Dockerfile.odek, else the pinned alpine).
    #[arg(long, value_name = "REF", help_heading = "Sandbox")]
    pub(crate) sandbox_image: Option<String>,
    /// Network mode: `none` (default) or `bridge`. To attach Docker networks
    /// use --sandbox-networks or --sandbox-compose.
    #[arg(long, value_name = "none|bridge", help_heading = "Sandbox")]
    pub(crate) sandbox_network: Option<String>,
    /// Docker networks to attach, by exact name (comma-separated).
    #[arg(long, value_name = "A,B", help_heading = "Sandbox")]
    pub(crate) sandbox_networks: Option<String>,
    /// Attach every network of this running Compose project.
    #[arg(
        long = "sandbox-compose",
        value_name = "PROJECT",
        help_heading = "Sandbox"
    )]
    pub(crate) sandbox_compose: Option<String>,
    /// Maximum number of processes (default 4096).
    #[arg(
        long,
        value_name = "N",
        allow_negative_numbers = true,
        help_heading = "Sandbox"
    )]
    pub(crate) sandbox_pids_limit: Option<i64>,
    /// Mount /workspace read-only.
    #[arg(long, help_heading = "Sandbox")]
    pub(crate) sandbox_readonly: bool,
    /// Memory limit, e.g. 512m, 2g.
    #[arg(long, value_name = "SIZE", help_heading = "Sandbox")]
    pub(crate) sandbox_memory: Option<String>,
    /// CPU limit, e.g. 0.5, 2.
    #[arg(
        long,
        value_name = "CPUS",
        allow_hyphen_values = true,
        help_heading = "Sandbox"
    )]
    pub(crate) sandbox_cpus: Option<String>,
    /// User in the container: uid[:gid] or a name.
    #[arg(long, value_name = "USER", help_heading = "Sandbox")]
    pub(crate) sandbox_user: Option<String>,
}

impl SandboxFlags {
    /// The flags as a config layer plus each key's flag name.
    pub fn layer(&self) -> anyhow::Result<(Layer, BTreeMap<String, String>)> {
        let mut names = BTreeMap::new();
        let mut l = Layer::default();
        let mut set = |key: &str, flag: &str| {
            names.insert(key.to_string(), flag.to_string());
        };
        if self.sandbox {
            l.sandbox = Some(true);
            set("sandbox", "--sandbox");
        } else if self.no_sandbox {
            l.sandbox = Some(false);
            set("sandbox", "--no-sandbox");
        }
        if let Some(v) = &self.sandbox_image {
            l.sandbox_image = Some(v.clone());
            set("sandbox_image", "--sandbox-image");
        }
        if let Some(v) = &self.sandbox_network {
            l.sandbox_network = Some(v.clone());
            set("sandbox_network", "--sandbox-network");
        }
        if let Some(v) = &self.sandbox_networks {
            let items: Vec<String> = v.split(',').map(|s| s.trim().to_string()).collect();
            if items.iter().any(String::is_empty) {
                anyhow::bail!(
                    "flag --sandbox-networks has an empty item ({v:?}); write names separated by commas, e.g. --sandbox-networks a,b"
                );
            }
            l.sandbox_networks = Some(items);
            set("sandbox_networks", "--sandbox-networks");
        }
        if let Some(v) = &self.sandbox_compose {
            l.sandbox_compose_project = Some(v.clone());
            set("sandbox_compose_project", "--sandbox-compose");
        }
        if let Some(v) = self.sandbox_pids_limit {
            l.sandbox_pids_limit = Some(v);
            set("sandbox_pids_limit", "--sandbox-pids-limit");
        }
        if self.sandbox_readonly {
            l.sandbox_readonly = Some(true);
            set("sandbox_readonly", "--sandbox-readonly");
        }
        if let Some(v) = &self.sandbox_memory {
            l.sandbox_memory = Some(v.clone());
            set("sandbox_memory", "--sandbox-memory");
        }
        if let Some(v) = &self.sandbox_cpus {
            l.sandbox_cpus = Some(v.clone());
            set("sandbox_cpus", "--sandbox-cpus");
        }
        if let Some(v) = &self.sandbox_user {
            l.sandbox_user = Some(v.clone());
            set("sandbox_user", "--sandbox-user");
        }
        Ok((l, names))
    }

    /// Config inputs for `workdir` with the process environment.
    pub fn inputs(&self, workdir: &Option<PathBuf>) -> anyhow::Result<ConfigInputs> {
        let dir = match workdir {
            Some(d) => d.clone(),
            None => std::env::current_dir()?,
        };
        let mut inputs = ConfigInputs::from_process(dir);
        let (layer, names) = self.layer()?;
        inputs.flags = layer;
        inputs.flag_names = names;
        Ok(inputs)
    }

    /// The flags as a narrowing request for a sub-agent (SPEC §8). Flags that
    /// cannot narrow (`--no-sandbox`, `--sandbox-user`) are refused.
    pub(crate) fn narrow_request(&self) -> anyhow::Result<odek_core::narrow::NarrowRequest> {
        if self.no_sandbox {
            anyhow::bail!(
                "--no-sandbox cannot be combined with --parent: a sub-agent runs in a sandbox"
            );
        }
        if self.sandbox_user.is_some() {
            anyhow::bail!(
                "--sandbox-user cannot be set for a sub-agent: it keeps the parent's user"
            );
        }
        let network_mode = match self.sandbox_network.as_deref() {
            None => None,
            Some(v) => Some(odek_core::config::parse_network_mode(
                "flag --sandbox-network",
                v,
            )?),
        };
        let networks = self
            .sandbox_networks
            .as_ref()
            .map(|v| v.split(',').map(|s| s.trim().to_string()).collect());
        Ok(odek_core::narrow::NarrowRequest {
            schema: None,
            networks,
            compose_project: self.sandbox_compose.clone(),
            network_mode,
            pids_limit: self.sandbox_pids_limit,
            memory: self.sandbox_memory.clone(),
            cpus: self.sandbox_cpus.clone(),
            readonly: self.sandbox_readonly.then_some(true),
            image: self.sandbox_image.clone(),
        })
    }
}
