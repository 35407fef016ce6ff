//! Shell completions (`odek completions SHELL`, clap_complete) and man pages
//! (`odek manpage DIR`, clap_mangen, hidden: `cargo xtask dist` and the Nix
//! package call it), both derived from the one clap tree in `main.rs`.

use std::path::Path;

use anyhow::Context;
use clap::{CommandFactory, ValueEnum};

/// The shells `odek completions` writes a script for.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Shell {
    /// bash (install as `share/bash-completion/completions/odek`).
    Bash,
    /// zsh (install as `share/zsh/site-functions/_odek`).
    Zsh,
    /// fish (install as `share/fish/vendor_completions.d/odek.fish`).
    Fish,
}

/// Writes the completion script for `shell` to stdout.
pub(crate) fn completions(shell: Shell) -> anyhow::Result<()> {
    use clap_complete::Shell as S;
    let s = match shell {
        Shell::Bash => S::Bash,
        Shell::Zsh => S::Zsh,
        Shell::Fish => S::Fish,
    };
    let mut cmd = crate::Cli::command();
    let mut buf = Vec::new();
    clap_complete::generate(s, &mut cmd, "odek", &mut buf);
    write_stdout(&buf)
}

/// Writes `odek.1` and one page per subcommand (`odek-sandbox-up.1`, …) into
/// `dir`, creating it.
pub(crate) fn manpage(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    clap_mangen::generate_to(crate::Cli::command(), dir)
        .with_context(|| format!("cannot write the man pages into {}", dir.display()))
}

fn write_stdout(buf: &[u8]) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    match out.write_all(buf).and_then(|()| out.flush()) {
        // `odek completions bash | head` is not an error.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r.context("cannot write to stdout"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shell_gets_a_script_naming_odek_and_its_commands() {
        for (shell, marker) in [
            (clap_complete::Shell::Bash, "complete -F"),
            (clap_complete::Shell::Zsh, "#compdef odek"),
            (clap_complete::Shell::Fish, "complete -c odek"),
        ] {
            let mut buf = Vec::new();
            clap_complete::generate(shell, &mut crate::Cli::command(), "odek", &mut buf);
            let text = String::from_utf8(buf).expect("completion scripts are UTF-8");
            assert!(text.contains(marker), "{shell}: no {marker:?}");
            for word in ["run", "sandbox", "completions", "--sandbox-compose"] {
                assert!(text.contains(word), "{shell}: {word} missing");
            }
        }
    }

    #[test]
    fn man_pages_cover_the_top_level_and_subcommands() {
        let dir = tempfile::tempdir().expect("tempdir");
        manpage(dir.path()).expect("man pages");
        let top = std::fs::read_to_string(dir.path().join("odek.1")).expect("odek.1");
        assert!(
            top.starts_with(".ie") || top.contains(".TH odek 1"),
            "{}",
            &top[..200]
        );
        assert!(top.contains("sandbox"));
        assert!(dir.path().join("odek-sandbox-up.1").is_file());
        assert!(dir.path().join("odek-run.1").is_file());
    }
}
