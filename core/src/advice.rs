//! Advice in messages, in the caller's terms (SPEC §10.1, §10.3): the core
//! words a fix as a CLI user would type it ("pass -C DIR", "--sandbox-image",
//! "`odek sandbox down NAME`"); a binding's user sets `workdir`, the
//! `sandbox_image` setting, or closes the sandbox. [`Surface::render`] turns
//! the CLI's wording into the library's; the CLI's text is never changed.

use std::borrow::Cow;

/// Who reads odek's messages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Surface {
    /// The `odek` command line: flags, `-C DIR`, `odek sandbox …` commands.
    #[default]
    Cli,
    /// A program using libodek through the C ABI or a binding (Python, Go):
    /// settings keys (`sandbox_image`), the `workdir` argument, closing the
    /// sandbox handle.
    Library,
}

/// One piece of CLI advice and how a library caller is told the same.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Advice {
    /// The CLI's words, exactly as core messages carry them.
    pub cli: &'static str,
    /// The library's words.
    pub library: &'static str,
}

/// Every piece of CLI advice core messages give, longest first where one
/// contains another. A `cli` text ending in "`odek sandbox down " takes the
/// sandbox name up to the closing backquote with it.
pub const ADVICE: &[Advice] = &[
    Advice {
        cli: "run odek from (or pass -C) a",
        library: "resolve with `workdir` set to a",
    },
    Advice {
        cli: " with -C DIR (or run odek from inside it)",
        library: " as `workdir`",
    },
    Advice {
        cli: " with -C DIR",
        library: " as `workdir`",
    },
    Advice {
        cli: "with --sandbox-image",
        library: "with the `sandbox_image` setting",
    },
    Advice {
        cli: "with --sandbox-user,",
        library: "with the `sandbox_user` setting,",
    },
    Advice {
        cli: "(--sandbox-networks a,b)",
        library: "(a list of network names)",
    },
    Advice {
        cli: "(--sandbox-compose <project>)",
        library: "(a Compose project name)",
    },
    Advice {
        cli: "remove it with `odek sandbox down ",
        library: "remove it by closing the sandbox (Python `close()`, Go `Close()`, C `odek_sandbox_destroy`)",
    },
    Advice {
        cli: "`odek sandbox down ",
        library: "closing the sandbox (Python `close()`, Go `Close()`, C `odek_sandbox_destroy`)",
    },
    Advice {
        cli: "`odek sandbox gc` removes it",
        library: "`odek sandbox gc` (odek's command line) removes it",
    },
];

impl Surface {
    /// `message` in this surface's terms: unchanged for [`Surface::Cli`];
    /// for [`Surface::Library`] each piece of [`ADVICE`] replaced by its
    /// library wording.
    pub fn render(self, message: &str) -> Cow<'_, str> {
        if self == Surface::Cli || !ADVICE.iter().any(|a| message.contains(a.cli)) {
            return Cow::Borrowed(message);
        }
        let mut out = message.to_string();
        for a in ADVICE {
            out = replace_advice(&out, a);
        }
        Cow::Owned(out)
    }
}

/// Replaces every occurrence of `a.cli` in `text`; a CLI command left open
/// by a backquote (`` `odek sandbox down `` + name) is taken up to and with
/// its closing backquote.
fn replace_advice(text: &str, a: &Advice) -> String {
    let open_command = a.cli.matches('`').count() % 2 == 1;
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(a.cli) {
        out.push_str(&rest[..at]);
        out.push_str(a.library);
        let after = &rest[at + a.cli.len()..];
        rest = match (open_command, after.find('`')) {
            (true, Some(end)) => &after[end + 1..],
            _ => after,
        };
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cli_text_is_unchanged() {
        let m = "image x cannot be pulled: y; choose another with --sandbox-image";
        assert_eq!(Surface::Cli.render(m), m);
    }

    #[test]
    fn library_text_names_settings_and_the_workdir() {
        let m = "image x cannot be pulled: y; pull it (`docker pull x`), or choose another with --sandbox-image";
        assert_eq!(
            Surface::Library.render(m),
            "image x cannot be pulled: y; pull it (`docker pull x`), or choose another with the `sandbox_image` setting"
        );
        let m = "working directory /: the file system root; run odek from (or pass -C) a project directory";
        assert_eq!(
            Surface::Library.render(m),
            "working directory /: the file system root; resolve with `workdir` set to a project directory"
        );
        let m = "not a directory; pass the project directory with -C DIR";
        assert_eq!(
            Surface::Library.render(m),
            "not a directory; pass the project directory as `workdir`"
        );
    }

    #[test]
    fn a_cli_command_is_replaced_with_its_argument() {
        let m = "sandbox odek-1 is stopped: remove it with `odek sandbox down odek-1` and launch a new one";
        let r = Surface::Library.render(m);
        assert!(!r.contains("odek sandbox down"), "{r}");
        assert!(
            r.ends_with("`odek_sandbox_destroy`) and launch a new one"),
            "{r}"
        );
        let m = "removing failed; `odek sandbox down odek-2` removes it";
        let r = Surface::Library.render(m);
        assert!(!r.contains("odek sandbox down"), "{r}");
        assert!(r.contains("closing the sandbox"), "{r}");
    }

    #[test]
    fn every_advice_is_rewritten_away() {
        for a in ADVICE {
            let m = format!("x {}odek-1` y", a.cli);
            let r = Surface::Library.render(&m);
            assert!(!r.contains(a.cli), "{r}");
            assert!(r.contains(a.library), "{r}");
        }
    }
}
