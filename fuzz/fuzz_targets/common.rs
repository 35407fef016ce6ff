//! Helpers shared by the fuzz targets: the independent reference rules of
//! SPEC §3.4 / §9.3 and the wrapper check of §9.3 (the same as the proptests
//! in core/tests/prop_*.rs).

#![allow(dead_code)]

/// True when `msg` can be printed safely: no control or invisible
/// formatting character, and bounded.
pub fn display_safe(msg: &str) -> bool {
    msg.len() < 4096
        && !msg.chars().any(|c| {
            c.is_control()
                || matches!(
                    c,
                    '\u{061C}'
                        | '\u{200B}'..='\u{200F}'
                        | '\u{2028}'..='\u{202E}'
                        | '\u{2060}'..='\u{2064}'
                        | '\u{2066}'..='\u{2069}'
                        | '\u{FEFF}'
                )
        })
}

fn docker_charset(b: &[u8]) -> bool {
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'))
}

/// SPEC §3.4 network names.
pub fn reference_network_name(s: &str) -> bool {
    let reserved = ["host", "none", "bridge", "default"]
        .iter()
        .any(|r| s.to_ascii_lowercase() == *r);
    docker_charset(s.as_bytes()) && s.len() <= 128 && !reserved
}

/// SPEC §9.3 names that may be shown.
pub fn reference_shown(s: &str) -> bool {
    docker_charset(s.as_bytes()) && s.len() <= 63
}

/// Compose's project charset.
pub fn reference_compose(s: &str) -> bool {
    let b = s.as_bytes();
    // At most 100 bytes: odek's own cap (its networks are named
    // `<project>_<network>`), on top of Compose's charset.
    !b.is_empty()
        && b.len() <= 100
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'_' | b'-'))
}

/// The single wrapper of a render: (text outside with the wrapper replaced
/// by `<W>`, text inside, nonce). `Ok(None)` when there is no wrapper;
/// `Err` when `untrusted_content` occurs anywhere but in one well-formed
/// pair of tags carrying one ≥ 64-bit lowercase-hex nonce.
pub fn unwrap(text: &str) -> Result<Option<(String, String, String)>, String> {
    let lower = text.to_ascii_lowercase();
    let hits: Vec<usize> = lower
        .match_indices("untrusted_content")
        .map(|(i, _)| i)
        .collect();
    if hits.is_empty() {
        return Ok(None);
    }
    if hits.len() != 2 {
        return Err(format!("untrusted_content occurs {} times", hits.len()));
    }
    let open = hits[0]
        .checked_sub(1)
        .filter(|&i| &text[i..hits[0]] == "<")
        .ok_or("first occurrence is not an opening tag")?;
    let after = &text[hits[0] + "untrusted_content_".len()..];
    let nonce: String = after
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric())
        .collect();
    if nonce.len() < 16
        || !nonce
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return Err(format!("bad nonce {nonce:?}"));
    }
    let open_tag = format!("<untrusted_content_{nonce} source=\"docker\">\n");
    if !text[open..].starts_with(&open_tag) {
        return Err("malformed opening tag".into());
    }
    let close_tag = format!("</untrusted_content_{nonce}>\n");
    let close = hits[1]
        .checked_sub(2)
        .filter(|&i| text[i..].starts_with(&close_tag))
        .ok_or("second occurrence is not this render's closing tag")?;
    if text.matches(&close_tag).count() != 1 {
        return Err("closing tag occurs more than once".into());
    }
    Ok(Some((
        format!("{}<W>{}", &text[..open], &text[close + close_tag.len()..]),
        text[open + open_tag.len()..close].to_string(),
        nonce,
    )))
}
