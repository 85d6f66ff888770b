//! The small text forms a listing is made of: HTML escaping, relative links, human sizes and
//! UTC times.
//!
//! Owns: how one value is written. Must not touch: page layout (`html.rs`), ordering (`mod.rs`).

use ampd_http::date::civil_from_days;

use crate::content::path::encode_path;

/// Escapes text for HTML element content and double- or single-quoted attributes.
pub(super) fn push_html_escaped(out: &mut String, text: &str) {
    for character in text.chars() {
        match character {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            other => out.push(other),
        }
    }
}

/// A relative link to `name`: percent-encoded, and with ':' encoded too, so a file named
/// `javascript:alert(1)` cannot be read as a URL scheme (RFC 3986 §4.2).
pub(super) fn href(name: &str, is_dir: bool) -> String {
    let mut link = encode_path(name).replace(':', "%3A");
    if is_dir {
        link.push('/');
    }
    link
}

/// A size as people read it: bytes below 1 KiB, then binary units with one decimal below 10
/// (`1.5 KiB`, `12 MiB`), as `ls -lh` and Caddy do.
pub(super) fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    // A u64 fits in f64 closely enough for one shown decimal.
    #[allow(clippy::cast_precision_loss)]
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1023.95 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if value < 9.95 {
        format!("{value:.1} {}", UNITS[unit])
    } else {
        format!("{value:.0} {}", UNITS[unit])
    }
}

/// Unix seconds as an RFC 3339 UTC time, `2023-11-14T22:13:20Z`.
pub(super) fn rfc3339(secs: i64) -> String {
    let (year, month, day) = civil_from_days(secs.div_euclid(86_400));
    let of_day = secs.rem_euclid(86_400);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        of_day / 3600,
        of_day % 3600 / 60,
        of_day % 60
    )
}

/// The same time for people: `2023-11-14 22:13:20 UTC`.
pub(super) fn readable_time(secs: i64) -> String {
    rfc3339(secs).replace('T', " ").replace('Z', " UTC")
}
