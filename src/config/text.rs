//! Reading text values and placing errors: listen addresses, sizes (`"64KiB"`), durations
//! (`"30s"`) and header names (shared with the command line, `src/cli/`), the line, column and
//! dotted key at a byte offset, and the nearest known key for a typo.
//!
//! Owns: these pure functions. Must not touch: the schema or `Config`.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use super::ListenAddress;
use std::time::Duration;

/// The host a bare port listens on: the default's (loopback), so `--listen 9000` exposes
/// nothing more than `ampd serve` does.
const DEFAULT_HOST: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// `127.0.0.1:8080`, `[::1]:8080`, `0.0.0.0:8080` (every IPv4 address), `localhost:8080`
/// (127.0.0.1), `:8080` and `*:8080` (every address, IPv4 and IPv6, as Caddy and Go read
/// `:8080` and nginx `*:8080` with `[::]:8080`), or `8080` (127.0.0.1).
/// Other host names are refused rather than looked up: which address a name gives can change
/// under the server, and a lookup would make loading a file touch the network.
pub fn parse_listen(text: &str) -> Result<ListenAddress, String> {
    if let Ok(address) = text.parse::<SocketAddr>() {
        return Ok(ListenAddress::One(address));
    }
    if let Ok(port) = text.parse::<u16>() {
        return Ok(ListenAddress::One(SocketAddr::new(DEFAULT_HOST, port)));
    }
    let Some((host, port)) = text.rsplit_once(':') else {
        return Err("no port".to_owned());
    };
    let port: u16 = port
        .parse()
        .map_err(|_| format!("'{port}' is not a port"))?;
    match host {
        "" | "*" => Ok(ListenAddress::Every(port)),
        // Not the resolver's answer: /etc/hosts may put ::1 first, and `localhost` should mean
        // the same loopback everywhere.
        "localhost" => Ok(ListenAddress::One(SocketAddr::new(DEFAULT_HOST, port))),
        _ => Err(format!("'{host}' is not an IP address or localhost")),
    }
}

/// What `parse_listen` takes, for hints.
pub const LISTEN_FORMS: &str =
    "127.0.0.1:8080, [::1]:8080, localhost:8080, :8080 (every address) or 8080 (127.0.0.1)";

/// `"64KiB"`, `"1MiB"`, `"512"`, `"2G"`: binary units, as nginx reads `k` and `m`. `KB`, `MB`
/// and `GB` are refused (`size_hint` says what to write): most readers take them for powers of
/// 1000 (SI, Caddy), nginx-minded ones for powers of 1024, and a limit silently 5 % off is a
/// surprise either way.
pub fn parse_size(text: &str) -> Option<u64> {
    let (number, unit) = split_size(text)?;
    let shift = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kib" => 10,
        "m" | "mib" => 20,
        "g" | "gib" => 30,
        _ => return None,
    };
    number.checked_mul(1u64 << shift)
}

/// The hint for a size `parse_size` refused: for `"10MB"`, the binary spelling and the bytes;
/// otherwise the forms there are.
pub fn size_hint(text: &str) -> String {
    let decimal = split_size(text).and_then(|(number, unit)| {
        let (binary, power) = match unit.to_ascii_lowercase().as_str() {
            "kb" => ("KiB", 1),
            "mb" => ("MiB", 2),
            "gb" => ("GiB", 3),
            _ => return None,
        };
        let binary_bytes = number.checked_mul(1u64 << (10 * power))?;
        let decimal_bytes = number.checked_mul(1000u64.pow(power))?;
        Some(format!(
            "units are binary: write \"{number}{binary}\" for {binary_bytes} bytes, or \
             {decimal_bytes} for {decimal_bytes} bytes"
        ))
    });
    decimal.unwrap_or_else(|| {
        "bytes as a number, or text like \"64KiB\", \"1MiB\", \"2GiB\"".to_owned()
    })
}

/// `"10 MiB"` → (10, "MiB").
fn split_size(text: &str) -> Option<(u64, &str)> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    Some((digits.parse().ok()?, unit.trim()))
}

/// `"500ms"`, `"30s"`, `"5m"`, `"1h"`, `"1d"`, or a bare number of seconds.
pub fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let number: u64 = digits.parse().ok()?;
    let millis = match unit.trim() {
        "ms" => 1,
        "" | "s" => 1000,
        "m" | "min" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return None,
    };
    Some(Duration::from_millis(number.checked_mul(millis)?))
}

/// The hint for a certificate, key or CA file named in `config_text` (the configuration file)
/// that does not exist: a file whose comments carry the `openssl` commands that make it (as the
/// TLS examples do) is told to run them; any other, where one such command is.
#[must_use]
pub fn missing_file_hint(config_file: &std::path::Path, config_text: &str) -> String {
    let has_commands = config_text.lines().any(|line| {
        let line = line.trim_start();
        line.starts_with('#') && line.contains("openssl req")
    });
    if has_commands {
        format!(
            "run the openssl commands at the top of {} first, from the directory they say: \
             they make the certificates it names",
            config_file.display()
        )
    } else {
        "make it or correct the path (relative to the configuration file); docs/tls.md, \
         \"A self-signed certificate\", makes one with openssl"
            .to_owned()
    }
}

/// 1-based line and column (in characters) of byte `offset` in `text`.
pub(super) fn position(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |at| at + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

/// The dotted key at byte `offset`: the table header above it plus the key on its line.
pub(super) fn key_at(text: &str, offset: usize) -> String {
    let offset = offset.min(text.len());
    let before = text.get(..offset).unwrap_or("");
    let line_start = before.rfind('\n').map_or(0, |at| at + 1);
    let line_end = text[line_start..]
        .find('\n')
        .map_or(text.len(), |at| line_start + at);
    let line = &text[line_start..line_end];
    let mut table = String::new();
    for previous in text[..line_start].lines() {
        let trimmed = previous.trim();
        if trimmed.starts_with('[') {
            table = trimmed
                .trim_matches(|c| c == '[' || c == ']')
                .trim()
                .to_owned();
        }
    }
    let trimmed = line.trim();
    if trimmed.starts_with('[') {
        return trimmed
            .trim_matches(|c| c == '[' || c == ']')
            .trim()
            .to_owned();
    }
    let key = line
        .split_once('=')
        .map_or(trimmed, |(key, _)| key.trim())
        .trim_matches('"')
        .to_owned();
    match (table.is_empty(), key.is_empty()) {
        (_, true) => table,
        (true, false) => key,
        (false, false) => format!("{table}.{key}"),
    }
}

/// For serde's "unknown field `x`, expected one of `a`, `b`": the closest known key; for the
/// TOML reader's "duplicate key" (a second `[upstream.app]`, say): that it appears once.
pub(super) fn unknown_field_hint(message: &str) -> Option<String> {
    if message.starts_with("duplicate key") {
        return Some("a key or table appears once in a file: merge the two".to_owned());
    }
    let rest = message.strip_prefix("unknown field `")?;
    let (unknown, expected) = rest.split_once('`')?;
    let best = expected
        .split('`')
        .skip(1)
        .step_by(2)
        .map(|candidate| (edit_distance(unknown, candidate), candidate))
        .min()?;
    (best.0 <= 3).then(|| format!("did you mean `{}`?", best.1))
}

pub(super) fn edit_distance(left: &str, right: &str) -> usize {
    let right: Vec<char> = right.chars().collect();
    let mut row: Vec<usize> = (0..=right.len()).collect();
    for (i, a) in left.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, b) in right.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(a != *b));
            diagonal = above;
        }
    }
    row[right.len()]
}

/// An I/O error's message without Rust's "(os error N)" suffix.
#[must_use]
pub fn plain(error: &std::io::Error) -> String {
    let text = error.to_string();
    match text.find(" (os error") {
        Some(at) => text[..at].to_owned(),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::AddressRange;

    #[test]
    fn sizes_and_durations() {
        assert_eq!(parse_size("64KiB"), Some(64 << 10));
        assert_eq!(parse_size("1m"), Some(1 << 20));
        assert_eq!(parse_size("12"), Some(12));
        assert_eq!(parse_size("1 parsec"), None);
        assert_eq!(parse_size("2G"), Some(2 << 30));
        for decimal in ["10MB", "1kb", "2 GB"] {
            assert_eq!(parse_size(decimal), None, "{decimal}");
        }
        assert_eq!(
            size_hint("10MB"),
            "units are binary: write \"10MiB\" for 10485760 bytes, or 10000000 for 10000000 bytes"
        );
        assert!(size_hint("1 parsec").contains("64KiB"));
        assert_eq!(parse_duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Some(Duration::from_secs(120)));
        assert_eq!(parse_duration("soon"), None);
    }

    #[test]
    fn addresses() {
        let parse = |text: &str| {
            parse_listen(text).map(|address| {
                let listeners = address.listeners(false, false);
                let halves: Vec<bool> = listeners.iter().map(|l| l.ipv6_half).collect();
                let shown: Vec<String> = listeners.iter().map(ToString::to_string).collect();
                assert_eq!(halves.iter().filter(|half| **half).count(), shown.len() - 1);
                shown.join(" ")
            })
        };
        assert_eq!(parse("127.0.0.1:8080"), Ok("127.0.0.1:8080".to_owned()));
        assert_eq!(parse("[::1]:8080"), Ok("[::1]:8080".to_owned()));
        assert_eq!(parse("localhost:8080"), Ok("127.0.0.1:8080".to_owned()));
        // Every address: IPv4 and IPv6, as Caddy reads `:8080`.
        assert_eq!(parse(":8080"), Ok("0.0.0.0:8080 [::]:8080".to_owned()));
        assert_eq!(parse("*:8080"), Ok("0.0.0.0:8080 [::]:8080".to_owned()));
        assert_eq!(parse("0.0.0.0:8080"), Ok("0.0.0.0:8080".to_owned()));
        assert_eq!(parse("8080"), Ok("127.0.0.1:8080".to_owned()));
        assert_eq!(parse("[::]:80"), Ok("[::]:80".to_owned()));
        for bad in [
            "",
            "127.0.0.1",
            "localhost:http",
            ":99999",
            "not-an-address",
            "::1:80",
        ] {
            assert!(parse_listen(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn key_and_position_come_from_the_text() {
        let text = "listen = \"x\"\n[limits]\nheader_timeout = 3\n";
        let offset = text.find("header_timeout").unwrap();
        assert_eq!(position(text, offset), (3, 1));
        assert_eq!(key_at(text, offset + 5), "limits.header_timeout");
        assert_eq!(key_at(text, 2), "listen");
    }

    #[test]
    fn typos_get_the_nearest_key() {
        let hint = unknown_field_hint("unknown field `listn`, expected one of `listen`, `arch`");
        assert_eq!(hint.as_deref(), Some("did you mean `listen`?"));
        assert_eq!(
            unknown_field_hint("unknown field `zzzzzzzz`, expected `listen`"),
            None
        );
        assert_eq!(
            unknown_field_hint("duplicate key").as_deref(),
            Some("a key or table appears once in a file: merge the two")
        );
    }

    #[test]
    fn address_ranges_match() {
        let range = AddressRange {
            network: "10.0.0.0".parse().unwrap(),
            prefix: 8,
        };
        assert!(range.contains("10.1.2.3".parse().unwrap()));
        assert!(!range.contains("11.0.0.1".parse().unwrap()));
        assert!(range.contains("::ffff:10.0.0.1".parse().unwrap()));
        let all = AddressRange {
            network: "0.0.0.0".parse().unwrap(),
            prefix: 0,
        };
        assert!(all.contains("192.0.2.1".parse().unwrap()));
    }
}
