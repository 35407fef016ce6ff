//! The plan re-checked before launch (SPEC §3.4, §4.1, §5): [`Plan::check`].

use crate::plan::{Isolation, Plan, PLAN_SCHEMA};

impl Plan {
    /// Re-checks a plan before launch: plans cross the C ABI as JSON, so one
    /// may have been edited or built by hand. Every value must still pass the
    /// rules it passed at resolve (SPEC §3.4, §4.1, §5); for a container, the
    /// working directory and volumes are checked against the file system
    /// again ([`crate::workdir::check_at_use`]: a symlink planted since
    /// resolve, or another directory at the working directory's path, is
    /// refused). Errors name the field.
    pub(crate) fn check(&self) -> Result<(), crate::Error> {
        use crate::config::{parse_cpus, validate_env_key, validate_pids_limit, validate_user};
        let bad = |reason: String| crate::Error::InvalidPlan { reason };
        if self.schema != PLAN_SCHEMA {
            return Err(bad(format!(
                "schema {:?}, expected {PLAN_SCHEMA:?}",
                self.schema
            )));
        }
        validate_pids_limit("plan", self.pids_limit).map_err(crate::Error::Config)?;
        if let Some(m) = self.memory_bytes {
            if m < 6 << 20 {
                return Err(bad(format!("memory_bytes {m} is below 6 MiB")));
            }
        }
        if let Some(c) = &self.cpus {
            let again = parse_cpus("plan", &c.text).map_err(crate::Error::Config)?;
            if again.nano != c.nano {
                return Err(bad(format!(
                    "cpus {:?} and nano {} disagree",
                    c.text, c.nano
                )));
            }
        }
        if let Some(u) = &self.user {
            validate_user("plan", u).map_err(crate::Error::Config)?;
        }
        if let Some(r) = &self.runtime {
            crate::config::validate_runtime("plan", r).map_err(crate::Error::Config)?;
        }
        // A runtime the project asked for is the one its approval names
        // (the key binds it, SPEC §7.3).
        if let Some(asked) = self.approval.as_ref().and_then(|a| a.runtime.as_ref()) {
            if self.runtime.as_ref() != Some(asked) {
                return Err(bad(format!(
                    "runtime {:?} is not the {asked:?} its approval request names",
                    self.runtime
                )));
            }
        }
        crate::config::validate_log_retention("plan", i64::from(self.log_retention_days))
            .map_err(crate::Error::Config)?;
        let full_id = |id: &str| {
            id.len() == 64
                && id
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        };
        if self.networks.len() > crate::network::MAX_NETWORKS {
            return Err(bad(format!(
                "{} networks, at most {}",
                self.networks.len(),
                crate::network::MAX_NETWORKS
            )));
        }
        // A swarm-scoped network's ID is Swarm's: 25 characters of
        // [0-9a-z] (SPEC §4.1).
        let swarm_id = |id: &str| {
            id.len() == 25
                && id
                    .bytes()
                    .all(|b| b.is_ascii_digit() || b.is_ascii_lowercase())
        };
        for n in &self.networks {
            let ok = if n.scope == "swarm" {
                swarm_id(&n.id)
            } else {
                full_id(&n.id)
            };
            if !ok {
                return Err(bad(format!(
                    "network ID {:?} is not a full ID (64 hex digits; Swarm's: 25 of [0-9a-z])",
                    n.id
                )));
            }
        }
        if self.isolation == Isolation::Container
            && self.network_mode == crate::config::NetworkMode::Bridge
        {
            match &self.bridge_network_id {
                Some(b) if full_id(b) => {}
                _ => {
                    return Err(bad(
                        "bridge mode without the default bridge's full ID".into()
                    ))
                }
            }
        }
        let again = crate::image::ImageRef::parse(&self.image.reference.original)
            .map_err(|e| bad(e.to_string()))?;
        if again != self.image.reference {
            return Err(bad(
                "the image reference does not match its parsed parts".into()
            ));
        }
        for e in &self.env {
            validate_env_key("plan env", &e.key).map_err(crate::Error::Config)?;
            if e.value.contains('\0') {
                return Err(bad(format!("env {} contains a NUL byte", e.key)));
            }
        }
        // The working directory and volumes as the file system holds them
        // now: the full working-directory rules, no symlink, still the
        // directory resolve recorded (a --parent child's plan comes from a
        // label, an ABI plan from JSON).
        if self.isolation == Isolation::Container {
            crate::workdir::check_at_use(self)?;
        }
        for m in &self.masks {
            if !m.starts_with("/workspace/") || m.contains("/../") || m.ends_with("/..") {
                return Err(bad(format!("mask {m:?} is not under /workspace")));
            }
        }
        Ok(())
    }
}
