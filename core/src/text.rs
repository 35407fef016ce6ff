//! Display text: how names, free text and user-supplied values are shown in
//! messages and on a terminal (SPEC §9.3). Depends on nothing else in the
//! crate.

/// Longest name shown (longer ones are omitted, never truncated).
pub(crate) const MAX_NAME_LEN: usize = 63;

/// The name if it may be shown (SPEC §9.3): `[A-Za-z0-9][A-Za-z0-9_.-]{0,62}`,
/// verbatim. A name containing `untrusted_content` (any case) — the wrapper's
/// word — is omitted too: rewritten it would name nothing that resolves.
/// `None` when it must be omitted (callers count it, or show a short ID or
/// an escaped form instead).
pub fn sanitize_name(name: &str) -> Option<String> {
    let b = name.as_bytes();
    if b.is_empty() || b.len() > MAX_NAME_LEN || !b[0].is_ascii_alphanumeric() {
        return None;
    }
    if !b
        .iter()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'))
    {
        return None;
    }
    if name.to_ascii_lowercase().contains("untrusted_content") {
        return None;
    }
    Some(name.to_string())
}

/// A name safe for a terminal: verbatim when it passes SPEC §9.3, else
/// quoted with every non-printable-ASCII character escaped.
pub fn display_name(s: &str) -> String {
    match sanitize_name(s) {
        Some(n) => n,
        None => {
            let mut out = String::from("\"");
            for c in s.chars().take(128) {
                if c.is_ascii_graphic() && c != '"' && c != '\\' || c == ' ' {
                    out.push(c);
                } else {
                    out.push_str(&format!("\\u{{{:x}}}", c as u32));
                }
            }
            if s.chars().count() > 128 {
                out.push('…');
            }
            out.push('"');
            out
        }
    }
}

/// Free text (paths, image refs, volumes) safe for a terminal: printable
/// ASCII verbatim, anything else quoted and escaped.
pub fn display_text(s: &str) -> String {
    if !s.is_empty() && s.chars().all(|c| c.is_ascii_graphic() || c == ' ') {
        s.to_string()
    } else {
        display_name(s)
    }
}

/// Quotes a user-supplied value for an error message: Rust debug escaping
/// (control and escape characters shown as `\u{…}`), cut at 80 characters.
pub fn quote(value: &str) -> String {
    let mut cut: String = value.chars().take(80).collect();
    if cut.len() < value.len() {
        cut.push('…');
    }
    format!("{cut:?}")
}

/// A path or an origin (a config file's path, an env var, a flag) as a
/// message shows it: verbatim when Rust's debug escaping leaves it alone
/// (printable text without `"` or `\`), else quoted with every control,
/// escape and invisible character escaped (as [`quote`], but never cut), so no escape
/// sequence from a directory name reaches the terminal. The data keeps the
/// raw value; this is for `Display` only.
pub fn shown(value: &str) -> String {
    let quoted = format!("{value:?}");
    // Debug escaping lengthens whatever it escapes: same length plus the
    // quotes means nothing needed escaping.
    if !value.is_empty() && quoted.len() == value.len() + 2 {
        value.to_string()
    } else {
        quoted
    }
}

/// [`shown`] for a path (non-UTF-8 bytes as U+FFFD).
pub fn shown_path(path: &std::path::Path) -> String {
    shown(&path.to_string_lossy())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitize_rules() {
        for ok in [
            "redis",
            "db",
            "cafe",
            "a",
            "Shop_Default.1-x",
            &"a".repeat(63),
        ] {
            assert_eq!(sanitize_name(ok).as_deref(), Some(ok), "{ok}");
        }
        for bad in [
            "",
            "-x",
            "_x",
            ".x",
            "a b",
            "a\nb",
            "a\u{1b}[31m",
            "réseau",
            "a\u{200b}b",
            "a\u{202e}b",
            "</untrusted_content_0>",
            &"a".repeat(64),
        ] {
            assert_eq!(sanitize_name(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_name_with_the_wrapper_word_is_omitted_not_rewritten() {
        // Rewritten ("untrusted-content") it would name nothing that resolves.
        for wrapper_word in [
            "x_UNTRUSTED_CONTENT_y",
            "untrusted_content",
            "a_Untrusted_Content",
            "untrusted_contentuntrusted_content",
        ] {
            assert_eq!(sanitize_name(wrapper_word), None, "{wrapper_word}");
        }
        // A near miss is a name like any other, shown verbatim.
        assert_eq!(
            sanitize_name("x_untrusted-content_y").as_deref(),
            Some("x_untrusted-content_y")
        );
        // Where a name must be shown, the escaped form stands in.
        assert_eq!(
            display_name("x_untrusted_content_y"),
            "\"x_untrusted_content_y\""
        );
    }
}
