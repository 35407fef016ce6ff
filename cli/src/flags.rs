//! The sandbox flags of SPEC §3.1, shared by `run`, `sandbox up` and
//! `config view`.

use odek_core::config::names;
use std::collections::BTreeMap;
use std::path::PathBuf;

use clap::{Arg, ArgAction, ArgMatches, Command};
use odek_core::config::{ConfigInputs, Kind, Layer, KEYS};

/// Sandbox settings given on the command line (highest precedence, SPEC
/// §3.2): one flag per config key that has one in the key table
/// ([`odek_core::config::KEYS`]), plus the off switch of a boolean key.
#[derive(Debug, Clone, Default)]
pub(crate) struct SandboxFlags {
    /// `--no-sandbox` was given.
    pub(crate) no_sandbox: bool,
    /// Each given flag by config key: the flag as written and its value
    /// (`true`/`false` for a switch).
    given: BTreeMap<&'static str, (&'static str, String)>,
}

/// A flag's clap id: the flag without its dashes.
fn id(long: &'static str) -> &'static str {
    long.trim_start_matches('-')
}

impl clap::Args for SandboxFlags {
    fn augment_args(mut cmd: Command) -> Command {
        for key in KEYS {
            let Some(flag) = key.flag else { continue };
            let arg = Arg::new(id(flag.long))
                .long(id(flag.long))
                .help(flag.help)
                .help_heading("Sandbox");
            cmd = cmd.arg(match key.kind {
                Kind::Bool => {
                    let arg = arg.action(ArgAction::SetTrue);
                    match flag.off {
                        Some((off, _)) => arg.conflicts_with(id(off)),
                        None => arg,
                    }
                }
                Kind::Integer => arg
                    .value_name(flag.value_name)
                    .value_parser(clap::value_parser!(i64))
                    .allow_negative_numbers(true),
                Kind::Cpus => arg.value_name(flag.value_name).allow_hyphen_values(true),
                // A list flag may be given again: its values add up.
                Kind::List => arg.value_name(flag.value_name).action(ArgAction::Append),
                _ => arg.value_name(flag.value_name),
            });
            if let Some((off, help)) = flag.off {
                cmd = cmd.arg(
                    Arg::new(id(off))
                        .long(id(off))
                        .help(help)
                        .help_heading("Sandbox")
                        .action(ArgAction::SetTrue),
                );
            }
        }
        cmd
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

impl clap::FromArgMatches for SandboxFlags {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let mut flags = SandboxFlags::default();
        flags.update_from_arg_matches(m)?;
        Ok(flags)
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        for key in KEYS {
            let Some(flag) = key.flag else { continue };
            let value = match key.kind {
                Kind::Bool => match flag.off {
                    _ if m.get_flag(id(flag.long)) => Some((flag.long, "true".to_string())),
                    Some((off, _)) if m.get_flag(id(off)) => {
                        self.no_sandbox = true;
                        Some((off, "false".to_string()))
                    }
                    _ => None,
                },
                Kind::Integer => m
                    .get_one::<i64>(id(flag.long))
                    .map(|n| (flag.long, n.to_string())),
                Kind::List => m
                    .get_many::<String>(id(flag.long))
                    .map(|v| (flag.long, v.cloned().collect::<Vec<_>>().join(","))),
                _ => m
                    .get_one::<String>(id(flag.long))
                    .map(|v| (flag.long, v.clone())),
            };
            if let Some(value) = value {
                self.given.insert(key.name, value);
            }
        }
        Ok(())
    }
}

impl SandboxFlags {
    /// The value given for a config key's flag, as written.
    fn value(&self, key: &str) -> Option<&str> {
        self.given.get(key).map(|(_, v)| v.as_str())
    }

    /// The flags as a config layer plus each key's flag name.
    pub fn layer(&self) -> anyhow::Result<(Layer, BTreeMap<String, String>)> {
        let mut names = BTreeMap::new();
        let mut l = Layer::default();
        for (key, (flag, v)) in &self.given {
            let is_list = odek_core::config::key(key).is_some_and(|k| k.kind == Kind::List);
            if is_list && v.split(',').any(|s| s.trim().is_empty()) {
                anyhow::bail!(
                    "flag {flag} has an empty item ({v:?}); write names separated by commas, e.g. {flag} a,b"
                );
            }
            l.set_text(key, &format!("flag {flag}"), v)?;
            names.insert(key.to_string(), flag.to_string());
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

    /// Warnings for the `ODEK_*` variables of sandbox settings set in `env`
    /// (non-empty): `--parent` narrows the parent's recorded plan with the
    /// flags only, so none of them reaches the child, and saying nothing
    /// would make, e.g., `ODEK_SANDBOX_NETWORK=none` a silent no-op (SPEC
    /// §8). `ODEK_SANDBOX` is left out: a child is always a sandbox.
    pub(crate) fn env_not_narrowing(env: &BTreeMap<String, String>) -> Vec<odek_core::Warning> {
        KEYS.iter()
            .filter(|k| k.name != names::sandbox && k.name != names::sandbox_pool)
            .filter_map(|k| {
                let var = k.env?;
                env.get(var).filter(|v| !v.is_empty())?;
                let instead = match k.flag {
                    Some(f) if k.name != names::sandbox_user && k.name != names::sandbox_runtime => {
                        format!("pass {} to narrow it", f.long)
                    }
                    _ => "the child keeps the parent's value".to_string(),
                };
                Some(odek_core::Warning {
                    kind: odek_core::WarningKind::Other,
                    message: format!(
                        "{var} is set but not applied to the sub-agent: --parent narrows the parent's recorded settings with flags only; {instead}"
                    ),
                })
            })
            .collect()
    }

    /// The flags as a narrowing request for a sub-agent (SPEC §8). Flags that
    /// cannot narrow (`--no-sandbox`, `--sandbox-user`) are refused.
    pub(crate) fn narrow_request(&self) -> anyhow::Result<odek_core::narrow::NarrowRequest> {
        if self.no_sandbox {
            anyhow::bail!(
                "--no-sandbox cannot be combined with --parent: a sub-agent runs in a sandbox"
            );
        }
        if self.value(names::sandbox_user).is_some() {
            anyhow::bail!(
                "--sandbox-user cannot be set for a sub-agent: it keeps the parent's user"
            );
        }
        if self.value(names::sandbox_stack).is_some() {
            anyhow::bail!(
                "--sandbox-stack cannot be set for a sub-agent: it keeps a subset of the parent's networks; name the stack's networks the child may reach with --sandbox-networks (SPEC §8)"
            );
        }
        // The core's parse of settings into a request, with its checks (an
        // empty item is refused as through the C ABI and MCP).
        Ok(odek_core::narrow::NarrowRequest::from_settings(|key| {
            self.given
                .get(key)
                .map(|(flag, v)| (format!("flag {flag}"), v.clone()))
        })?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_settings_are_named_when_a_child_ignores_them() {
        let env: BTreeMap<String, String> = [
            ("ODEK_SANDBOX_NETWORK", "none"),
            ("ODEK_SANDBOX_MEMORY", "256m"),
            ("ODEK_SANDBOX_USER", "1000:1000"),
            ("ODEK_SANDBOX", "1"),
            ("ODEK_SANDBOX_CPUS", ""),
            ("ODEK_HOME", "/h"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let w: Vec<String> = SandboxFlags::env_not_narrowing(&env)
            .into_iter()
            .map(|w| w.message)
            .collect();
        assert_eq!(w.len(), 3, "{w:#?}");
        assert!(w.iter().any(
            |m| m.starts_with("ODEK_SANDBOX_NETWORK ") && m.contains("pass --sandbox-network")
        ));
        assert!(w
            .iter()
            .any(|m| m.starts_with("ODEK_SANDBOX_MEMORY ") && m.contains("pass --sandbox-memory")));
        assert!(
            w.iter()
                .any(|m| m.starts_with("ODEK_SANDBOX_USER ")
                    && m.contains("keeps the parent's value"))
        );
        assert!(SandboxFlags::env_not_narrowing(&BTreeMap::new()).is_empty());
    }
}
