//! The authority of a request: `host [":" port]` as an absolute-form target carries it and as
//! `Host` sends it (RFC 9112 §3.2.2, RFC 9110 §4.2.1 and §7.2, RFC 3986 §3.2.2-§3.2.3).
//!
//! Owns that grammar. Must not know about sites or routing: a value that passes here is only
//! well-formed; which site it names is the server's business.
//!
//! Why strict: the authority chooses a site (and, with a proxy, an upstream), so `h:80x`,
//! `h:80:80` or `4713::abcd:8001` must not be read one way here and another way by a front
//! proxy; nginx answers `400` to each.

use std::net::Ipv6Addr;

/// Whether `authority` is `host [":" port]`: host a reg-name (an IPv4 address is one), or an
/// IP-literal in brackets (IPv6 or IPvFuture); port decimal digits up to 65535 (empty is allowed,
/// RFC 3986 §3.2.3); no userinfo (`@` is not a reg-name character). An empty host is refused
/// unless `allow_empty` and the whole value is empty (an empty `Host`, RFC 9110 §7.2; an `http`
/// URI with an empty host is invalid, RFC 9110 §4.2.1).
#[must_use]
pub fn is_valid_authority(authority: &[u8], allow_empty: bool) -> bool {
    if authority.is_empty() {
        return allow_empty;
    }
    let (host, port) = if authority.first() == Some(&b'[') {
        let Some(close) = authority.iter().position(|&b| b == b']') else {
            return false;
        };
        if !is_ip_literal(&authority[1..close]) {
            return false;
        }
        match &authority[close + 1..] {
            [] => return true,
            [b':', port @ ..] => (&authority[..=close], Some(port)),
            _ => return false,
        }
    } else {
        match authority.iter().position(|&b| b == b':') {
            Some(colon) => (&authority[..colon], Some(&authority[colon + 1..])),
            None => (authority, None),
        }
    };
    !host.is_empty() && (host[0] == b'[' || is_reg_name(host)) && port.is_none_or(is_port)
}

/// `*DIGIT` whose value fits a TCP port.
fn is_port(port: &[u8]) -> bool {
    port.iter().all(u8::is_ascii_digit)
        && port
            .iter()
            .try_fold(0u32, |value, &b| {
                let value = value * 10 + u32::from(b - b'0');
                (value <= u32::from(u16::MAX)).then_some(value)
            })
            .is_some()
}

/// `IPv6address / IPvFuture` (the inside of `[...]`); a zone identifier is not allowed in a URI
/// (RFC 6874 is not part of HTTP).
fn is_ip_literal(inside: &[u8]) -> bool {
    if let [b'v' | b'V', rest @ ..] = inside {
        let Some(dot) = rest.iter().position(|&b| b == b'.') else {
            return false;
        };
        let (version, tail) = (&rest[..dot], &rest[dot + 1..]);
        return !version.is_empty()
            && version.iter().all(u8::is_ascii_hexdigit)
            && !tail.is_empty()
            && tail
                .iter()
                .all(|&b| is_unreserved(b) || is_sub_delim(b) || b == b':');
    }
    std::str::from_utf8(inside)
        .ok()
        .and_then(|text| text.parse::<Ipv6Addr>().ok())
        .is_some()
}

/// `reg-name = *( unreserved / pct-encoded / sub-delims )`.
fn is_reg_name(name: &[u8]) -> bool {
    let mut at = 0;
    while at < name.len() {
        let b = name[at];
        if b == b'%' {
            match name.get(at + 1..at + 3) {
                Some([high, low]) if high.is_ascii_hexdigit() && low.is_ascii_hexdigit() => {
                    at += 3;
                    continue;
                }
                _ => return false,
            }
        }
        if !is_unreserved(b) && !is_sub_delim(b) {
            return false;
        }
        at += 1;
    }
    true
}

fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

fn is_sub_delim(b: u8) -> bool {
    matches!(
        b,
        b'!' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*' | b'+' | b',' | b';' | b'='
    )
}

#[cfg(test)]
mod tests {
    use super::is_valid_authority;

    #[test]
    fn hosts_and_ports() {
        for good in [
            &b"example.com"[..],
            b"example.com:8080",
            b"[::1]:80",
            b"[::1]",
            b"[v1.fe80::a+b]",
            b"xn--bcher-kva.de",
            b"h%2Dx",
            b"h:",
            b"h:0",
            b"h:65535",
            b"256.1.1.1",
        ] {
            assert!(is_valid_authority(good, false), "{good:?}");
        }
        for bad in [
            &b""[..],
            b"a b",
            b"a/b",
            b"user@host",
            b"a\\b",
            b"\x80",
            b"h:80x",
            b"h:80:80",
            b"h::80",
            b"4713::abcd:8001",
            b"h:65536",
            b"h:99999999999",
            b"[::1",
            b"[::1]80",
            b"[fe80::1%25eth0]",
            b"[v.x]",
            b":80",
            b"h%2",
            b"h%zz",
        ] {
            assert!(!is_valid_authority(bad, false), "{bad:?}");
        }
        assert!(is_valid_authority(b"", true));
        assert!(!is_valid_authority(b":80", true));
    }
}
