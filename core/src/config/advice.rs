//! Advice in messages, in the caller's terms (SPEC §10.1, §10.3). A fix an
//! error names is a value ([`Fix`]) and each surface words it: the command
//! line as a flag, `-C DIR` or an `odek sandbox …` command; a program using
//! libodek (the C ABI, Python, Go) as a setting, the `workdir` argument or
//! closing the sandbox; an MCP client (`odek mcp`) as a setting or a
//! tool (`sandbox_down`). [`crate::Error::render`] shows an error on a
//! surface; its `Display` is the command line's words, which only the
//! command line shows.

use serde::{Deserialize, Serialize};

use crate::config::names;

/// Who reads odek's messages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Surface {
    /// The `odek` command line (and the MCP server it starts): flags,
    /// `-C DIR`, `odek sandbox …` commands.
    #[default]
    Cli,
    /// A program using libodek through the C ABI or a binding (Python, Go):
    /// settings keys (`sandbox_image`), the `workdir` argument, closing the
    /// sandbox handle.
    Library,
    /// An agent talking to `odek mcp`: settings keys (the server's
    /// settings), its tools (`sandbox_down`); never a flag or `-C`.
    Mcp,
}

/// How a library caller removes a sandbox (the CLI's `odek sandbox down`).
const CLOSE: &str =
    "closing the sandbox (Python `close()`, Go `Close()`, C `odek_sandbox_destroy`)";

/// A fix an error names, worded by the surface that shows it
/// ([`Fix::render`]). Each renders as the end of a sentence (the text the
/// error puts before it ends with its own joiner, such as `"; "`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "fix", rename_all = "snake_case")]
pub enum Fix {
    /// Choose another working directory: "pass `dir` with -C DIR" (library:
    /// "pass `dir` as `workdir`").
    PassWorkdir {
        /// The directory to pass, e.g. "the project directory".
        dir: String,
    },
    /// As [`Fix::PassWorkdir`]; the CLI adds "(or run odek from inside it)".
    PassOrEnterWorkdir {
        /// The directory to pass.
        dir: String,
    },
    /// "run odek from (or pass -C) `dir`" (library: "resolve with `workdir`
    /// set to `dir`").
    RunFrom {
        /// The directory, e.g. "a project directory".
        dir: String,
    },
    /// Another image, or a sandbox user the image defines: the
    /// `sandbox_user` setting (`--sandbox-user`), `ODEK_SANDBOX_USER` or
    /// the user config.
    ImageOrUser,
    /// Remove the sandbox (`odek sandbox down NAME`; library: closing it)
    /// and launch a new one.
    Replace {
        /// The sandbox's name.
        name: String,
    },
    /// What removes a container left behind: `odek sandbox down NAME` for a
    /// detached one (library: closing the sandbox), else `odek sandbox gc`.
    Reap {
        /// The container's name.
        name: String,
        /// A detached launch (`odek sandbox up`): gc keeps it.
        detached: bool,
    },
    /// Run without odek's supervisor: `ODEK_SUPERVISOR=` (empty)
    /// in the environment of the process that launches.
    NoSupervisor,
    /// The daemon's address pools are used up (every sandbox that reaches
    /// networks takes one for its own network, SPEC §4.4): the operator
    /// removes unused networks or gives the daemon more pools. The same
    /// words on every surface (it is the operator's action).
    AddressPools,
    /// What stops a command odek could not kill: removing its sandbox
    /// (`odek sandbox down NAME`; library: closing it; MCP: `sandbox_down`).
    Stop {
        /// The sandbox's name.
        name: String,
    },
}

/// What a model is told instead of the daemon's other Compose projects
/// (`odek mcp`): the names are the operator's to see, not the agent's.
pub(crate) const MCP_PROJECTS_HINT: &str =
    "the operator can list the running Compose projects with `docker compose ls`";

impl Fix {
    /// The fix in `surface`'s words.
    pub fn render(&self, surface: Surface) -> String {
        let lib = surface != Surface::Cli;
        let mcp = surface == Surface::Mcp;
        match self {
            Fix::PassWorkdir { dir } | Fix::PassOrEnterWorkdir { dir } if mcp => {
                format!("start the MCP server in {dir}")
            }
            Fix::PassWorkdir { dir } if lib => format!("pass {dir} as `workdir`"),
            Fix::PassWorkdir { dir } => format!("pass {dir} with -C DIR"),
            Fix::PassOrEnterWorkdir { dir } if lib => format!("pass {dir} as `workdir`"),
            Fix::PassOrEnterWorkdir { dir } => {
                format!("pass {dir} with -C DIR (or run odek from inside it)")
            }
            Fix::RunFrom { dir } if mcp => format!("start the MCP server in {dir}"),
            Fix::RunFrom { dir } if lib => format!("resolve with `workdir` set to {dir}"),
            Fix::RunFrom { dir } => format!("run odek from (or pass -C) {dir}"),
            Fix::ImageOrUser => format!(
                "use another image, or set a user the image defines (or root) with {}, ODEK_SANDBOX_USER or the user config",
                surface.setting(names::sandbox_user)
            ),
            Fix::Replace { .. } if mcp => {
                "remove it with the `sandbox_down` tool and launch a new one".to_string()
            }
            Fix::Replace { .. } if lib => format!("remove it by {CLOSE} and launch a new one"),
            Fix::Replace { name } => {
                format!("remove it with `odek sandbox down {name}` and launch a new one")
            }
            Fix::Reap { detached: true, .. } if mcp => {
                "the `sandbox_down` tool removes it".to_string()
            }
            Fix::Reap { detached: true, .. } if lib => format!("{CLOSE} removes it"),
            Fix::Reap {
                name,
                detached: true,
            } => format!("`odek sandbox down {name}` removes it"),
            Fix::Reap { .. } if lib => {
                "`odek sandbox gc` (odek's command line) removes it".to_string()
            }
            Fix::Reap { .. } => "`odek sandbox gc` removes it".to_string(),
            Fix::NoSupervisor => format!(
                "set {}= (empty) in the environment to run sandboxes without odek's supervisor",
                crate::config::SUPERVISOR_ENV
            ),
            Fix::AddressPools => "Docker's default address pools are used up (each sandbox that reaches networks takes one for a network of its own, as each Compose network does): the operator can remove unused networks (`docker network prune`) or give the daemon more (`default-address-pools` in /etc/docker/daemon.json)".to_string(),
            Fix::Stop { .. } if mcp => "the `sandbox_down` tool stops it".to_string(),
            Fix::Stop { .. } if lib => format!("{CLOSE} stops it"),
            Fix::Stop { name } => format!("`odek sandbox down {name}` stops it"),
        }
    }
}

/// The command line's words.
impl std::fmt::Display for Fix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.render(Surface::Cli))
    }
}

/// A fix that may be absent, as the error shows it (nothing when absent).
pub(crate) fn fix_text(fix: &Option<Fix>, surface: Surface) -> String {
    fix.as_ref().map(|f| f.render(surface)).unwrap_or_default()
}

/// Example values ([`Surface::value`]): the key, the CLI's example after
/// the flag, the library's description.
const EXAMPLES: &[(&str, &str, &str)] = &[
    (names::sandbox_networks, "a,b", "a list of network names"),
    (
        names::sandbox_compose_project,
        "<project>",
        "a Compose project name",
    ),
];

impl Surface {
    /// How this surface names the config key `key`: the CLI by its flag
    /// (`--sandbox-image`), a library and MCP as "the `sandbox_image`
    /// setting".
    pub fn setting(self, key: &str) -> String {
        match (self, crate::config::key(key).and_then(|k| k.flag)) {
            (Surface::Cli, Some(flag)) => flag.long.to_string(),
            _ => format!("the `{key}` setting"),
        }
    }

    /// How this surface shows a value for `key`: the CLI as its flag with
    /// an example (`--sandbox-networks a,b`), a library and MCP in words
    /// ("a list of network names").
    pub fn value(self, key: &str) -> String {
        let (cli, library) = EXAMPLES
            .iter()
            .find(|(k, ..)| *k == key)
            .map_or(("VALUE", "a value"), |(_, c, l)| (*c, *l));
        match self {
            Surface::Cli => format!("{} {cli}", self.setting(key)),
            Surface::Library | Surface::Mcp => library.to_string(),
        }
    }
}

#[cfg(test)]
/// One of each fix (tests here and in `error.rs`).
pub(crate) fn every_fix() -> Vec<Fix> {
    vec![
        Fix::PassWorkdir {
            dir: "the project directory".into(),
        },
        Fix::PassOrEnterWorkdir {
            dir: "an existing project directory".into(),
        },
        Fix::RunFrom {
            dir: "a project directory".into(),
        },
        Fix::ImageOrUser,
        Fix::Replace {
            name: "odek-1".into(),
        },
        Fix::Reap {
            name: "odek-1".into(),
            detached: true,
        },
        Fix::Reap {
            name: "odek-1".into(),
            detached: false,
        },
        Fix::NoSupervisor,
        Fix::AddressPools,
        Fix::Stop {
            name: "odek-1".into(),
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cli_words_are_the_display() {
        for fix in every_fix() {
            assert_eq!(fix.to_string(), fix.render(Surface::Cli));
        }
    }

    /// A library caller and an MCP client are never told a flag, `-C` or
    /// an `odek sandbox down` command they cannot type.
    #[test]
    fn a_library_caller_is_told_settings_and_arguments() {
        for fix in every_fix() {
            let cli = fix.render(Surface::Cli);
            for surface in [Surface::Library, Surface::Mcp] {
                let other = fix.render(surface);
                if !matches!(fix, Fix::NoSupervisor | Fix::AddressPools) {
                    assert_ne!(cli, other, "{fix:?}");
                }
                for cli_only in ["-C", "--sandbox", "odek sandbox down", "--"] {
                    assert!(!other.contains(cli_only), "{surface:?} {fix:?}: {other}");
                }
            }
        }
    }

    #[test]
    fn fixes_in_each_surface_s_words() {
        let f = Fix::Replace {
            name: "odek-1".into(),
        };
        assert_eq!(
            f.render(Surface::Cli),
            "remove it with `odek sandbox down odek-1` and launch a new one"
        );
        assert_eq!(
            f.render(Surface::Library),
            "remove it by closing the sandbox (Python `close()`, Go `Close()`, C `odek_sandbox_destroy`) and launch a new one"
        );
        assert_eq!(
            Fix::RunFrom {
                dir: "a project directory".into()
            }
            .render(Surface::Library),
            "resolve with `workdir` set to a project directory"
        );
        assert_eq!(Surface::Cli.setting("sandbox_image"), "--sandbox-image");
        assert_eq!(
            Surface::Library.setting("sandbox_image"),
            "the `sandbox_image` setting"
        );
        assert_eq!(
            Surface::Cli.value("sandbox_compose_project"),
            "--sandbox-compose <project>"
        );
        assert_eq!(
            Surface::Library.value("sandbox_networks"),
            "a list of network names"
        );
    }
}
