//! The text forms of upstream servers (`"127.0.0.1:9001"`, `"[::1]:9001"`,
//! `"app.internal:9001"`, `"unix:/run/app.sock"`) and of `proxy_pass` targets
//! (`"http://NAME/path"`, `"http://host:port/path"`, `"unix:/path.sock"`).
//!
//! Owns: these pure functions and the reasons they refuse a text.
//! Must not touch: the resolver, the file system, `Config` (`pools.rs` resolves names and
//! makes paths absolute).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// The forms a server address takes, for hints.
pub(super) const SERVER_FORMS: &str =
    "like 127.0.0.1:9001, [::1]:9001, app.internal:9001 or unix:/run/app.sock";

/// The forms `proxy_pass` takes, for hints.
pub(super) const PROXY_PASS_FORMS: &str =
    "http://NAME/path for an [upstream.NAME], http://127.0.0.1:9001/path, or unix:/run/app.sock";

/// The forms `fastcgi_pass` takes, for hints.
pub(super) const FASTCGI_PASS_FORMS: &str =
    "unix:/run/php/php8.2-fpm.sock, 127.0.0.1:9000, or NAME for an [upstream.NAME] or [application.NAME]";

/// A server address as written, before any name is resolved.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum AddressText<'a> {
    /// An IP address with its port (`localhost` is read as `127.0.0.1`).
    Ip(SocketAddr),
    /// A host name and port, resolved once when the file is loaded.
    Name { host: &'a str, port: u16 },
    /// A unix stream socket; relative paths are relative to the file's directory.
    Unix(&'a str),
}

/// Reads `host:port`, `[v6]:port` or `unix:/path`; the error is the reason, to follow
/// "'TEXT' is not a server address".
pub(super) fn parse_address(text: &str) -> Result<AddressText<'_>, String> {
    if let Some(path) = text.strip_prefix("unix:") {
        if path.is_empty() {
            return Err("no socket path".to_owned());
        }
        return Ok(AddressText::Unix(path));
    }
    if text.contains("://") {
        return Err("a server is an address, not a URL".to_owned());
    }
    if let Ok(address) = text.parse::<SocketAddr>() {
        return if address.port() == 0 {
            Err("port 0".to_owned())
        } else {
            Ok(AddressText::Ip(address))
        };
    }
    if text.starts_with('[') {
        return Err("an IPv6 address is written [::1]:9001".to_owned());
    }
    let Some((host, port)) = text.rsplit_once(':') else {
        return Err("no port".to_owned());
    };
    if host.contains(':') {
        return Err("an IPv6 address goes in brackets: [::1]:9001".to_owned());
    }
    let port = match port.parse::<u16>() {
        Ok(0) => return Err("port 0".to_owned()),
        Ok(port) => port,
        Err(_) => return Err(format!("'{port}' is not a port")),
    };
    if !is_host_name(host) {
        return Err(format!("'{host}' is not a host name"));
    }
    // As `listen` reads it: `/etc/hosts` may put `::1` first, and an upstream that listens on
    // `localhost:PORT` (another ampd, most development servers) listens on 127.0.0.1.
    if host.eq_ignore_ascii_case("localhost") {
        return Ok(AddressText::Ip(SocketAddr::new(
            IpAddr::V4(Ipv4Addr::LOCALHOST),
            port,
        )));
    }
    Ok(AddressText::Name { host, port })
}

/// Letters, digits, `-` and `.`, not starting or ending with a dot (RFC 1123 names).
fn is_host_name(host: &str) -> bool {
    !host.is_empty()
        && host.len() <= 253
        && host
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'.')
        && !host.starts_with('.')
        && !host.ends_with('.')
}

/// What a `proxy_pass` names.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum PassTarget<'a> {
    /// `http://NAME`: an `[upstream.NAME]` (no port: a pool, never a name to resolve).
    Pool(&'a str),
    /// `http://host:port` or `unix:/path`: an implicit pool of this address.
    Address(AddressText<'a>),
}

/// A `proxy_pass` as written.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct PassText<'a> {
    pub(super) target: PassTarget<'a>,
    /// The path part (from its `/`), if any: it replaces the location's prefix.
    pub(super) path: Option<&'a str>,
}

/// Why a `proxy_pass` text is refused.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum PassError {
    /// `https://`: ampd speaks plain HTTP/1.1 to upstreams.
    Tls,
    /// No `http://` or `unix:`, or nothing after it.
    NotATarget,
    /// A `?` or `#`: `proxy_pass` takes a path, the query is the client's.
    Query,
    /// `user@`: ampd sends no credentials of its own upstream.
    UserInfo,
    /// A space or control character in the path.
    BadPath,
    /// The address part, with the reason (`parse_address`).
    Address(String),
}

/// Reads `http://NAME[/path]`, `http://host:port[/path]` or `unix:/path.sock`.
pub(super) fn parse_proxy_pass(text: &str) -> Result<PassText<'_>, PassError> {
    if text.starts_with("unix:") {
        let address = parse_address(text).map_err(PassError::Address)?;
        return Ok(PassText {
            target: PassTarget::Address(address),
            path: None,
        });
    }
    let scheme_end = text.find("://").ok_or(PassError::NotATarget)?;
    let scheme = &text[..scheme_end];
    if scheme.eq_ignore_ascii_case("https") {
        return Err(PassError::Tls);
    }
    if !scheme.eq_ignore_ascii_case("http") {
        return Err(PassError::NotATarget);
    }
    let rest = &text[scheme_end + 3..];
    if rest.contains(['?', '#']) {
        return Err(PassError::Query);
    }
    let (authority, path) = match rest.find('/') {
        Some(at) => (&rest[..at], Some(&rest[at..])),
        None => (rest, None),
    };
    if authority.is_empty() {
        return Err(PassError::NotATarget);
    }
    if authority.contains('@') {
        return Err(PassError::UserInfo);
    }
    if path.is_some_and(|path| path.bytes().any(|byte| byte <= b' ' || byte == 0x7f)) {
        return Err(PassError::BadPath);
    }
    let target = if authority.contains(':') || authority.starts_with('[') {
        PassTarget::Address(parse_address(authority).map_err(PassError::Address)?)
    } else if is_pool_name(authority) {
        PassTarget::Pool(authority)
    } else {
        return Err(PassError::NotATarget);
    };
    Ok(PassText { target, path })
}

/// What a `fastcgi_pass` names.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum FastCgiTarget<'a> {
    /// `NAME`: an `[upstream.NAME]` or `[application.NAME]`.
    Pool(&'a str),
    /// `unix:/path`, `host:port`: an implicit FastCGI pool of this address.
    Address(AddressText<'a>),
}

/// Reads `unix:/path.sock`, `host:port` or `NAME` (FastCGI has no URL: no scheme, no path); the
/// error is the reason, to follow "'TEXT' is not a FastCGI address".
pub(super) fn parse_fastcgi_pass(text: &str) -> Result<FastCgiTarget<'_>, String> {
    if text.contains("://") {
        return Err("FastCGI is not reached by URL".to_owned());
    }
    if text.starts_with("unix:") || text.contains(':') {
        return parse_address(text).map(FastCgiTarget::Address);
    }
    if text.parse::<IpAddr>().is_ok() {
        return Err("no port".to_owned());
    }
    if is_pool_name(text) {
        return Ok(FastCgiTarget::Pool(text));
    }
    Err("neither an address with its port nor a pool name".to_owned())
}

/// What an `[upstream.NAME]` may be called: it must read as the host of `http://NAME`.
pub(super) fn is_pool_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || b"-_.".contains(&byte))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> AddressText<'static> {
        AddressText::Ip(text.parse().unwrap())
    }

    #[test]
    fn server_addresses() {
        assert_eq!(parse_address("127.0.0.1:9001"), Ok(ip("127.0.0.1:9001")));
        assert_eq!(parse_address("[::1]:9001"), Ok(ip("[::1]:9001")));
        assert_eq!(parse_address("LocalHost:80"), Ok(ip("127.0.0.1:80")));
        assert_eq!(
            parse_address("app.internal:8080"),
            Ok(AddressText::Name {
                host: "app.internal",
                port: 8080
            })
        );
        assert_eq!(
            parse_address("unix:/run/app.sock"),
            Ok(AddressText::Unix("/run/app.sock"))
        );
        assert_eq!(
            parse_address("unix:app.sock"),
            Ok(AddressText::Unix("app.sock"))
        );
        for (bad, reason) in [
            ("127.0.0.1", "no port"),
            ("app", "no port"),
            ("127.0.0.1:0", "port 0"),
            ("app:http", "'http' is not a port"),
            ("app:70000", "'70000' is not a port"),
            ("::1:80", "an IPv6 address goes in brackets: [::1]:9001"),
            ("[::1:80", "an IPv6 address is written [::1]:9001"),
            ("unix:", "no socket path"),
            ("http://app:80", "a server is an address, not a URL"),
            ("a_b:80", "'a_b' is not a host name"),
            (":80", "'' is not a host name"),
            (".app:80", "'.app' is not a host name"),
        ] {
            assert_eq!(parse_address(bad), Err(reason.to_owned()), "{bad}");
        }
    }

    #[test]
    fn proxy_pass_targets() {
        let pass = |text| parse_proxy_pass(text);
        assert_eq!(
            pass("http://app"),
            Ok(PassText {
                target: PassTarget::Pool("app"),
                path: None
            })
        );
        assert_eq!(
            pass("HTTP://app/v1/"),
            Ok(PassText {
                target: PassTarget::Pool("app"),
                path: Some("/v1/")
            })
        );
        assert_eq!(
            pass("http://127.0.0.1:9001/"),
            Ok(PassText {
                target: PassTarget::Address(ip("127.0.0.1:9001")),
                path: Some("/")
            })
        );
        assert_eq!(
            pass("http://[::1]:9001"),
            Ok(PassText {
                target: PassTarget::Address(ip("[::1]:9001")),
                path: None
            })
        );
        assert_eq!(
            pass("unix:/run/app.sock"),
            Ok(PassText {
                target: PassTarget::Address(AddressText::Unix("/run/app.sock")),
                path: None
            })
        );
        assert_eq!(pass("https://app/"), Err(PassError::Tls));
        assert_eq!(pass("ftp://app/"), Err(PassError::NotATarget));
        assert_eq!(pass("app"), Err(PassError::NotATarget));
        assert_eq!(pass("http:///x"), Err(PassError::NotATarget));
        assert_eq!(pass("http://a b/"), Err(PassError::NotATarget));
        assert_eq!(pass("http://app/x?y"), Err(PassError::Query));
        assert_eq!(pass("http://app#top"), Err(PassError::Query));
        assert_eq!(pass("http://u:p@app/"), Err(PassError::UserInfo));
        assert_eq!(pass("http://app/a b"), Err(PassError::BadPath));
        assert_eq!(
            pass("http://app:x/"),
            Err(PassError::Address("'x' is not a port".to_owned()))
        );
        assert_eq!(
            pass("unix:"),
            Err(PassError::Address("no socket path".to_owned()))
        );
    }

    #[test]
    fn fastcgi_pass_targets() {
        assert_eq!(
            parse_fastcgi_pass("unix:/run/php/php8.2-fpm.sock"),
            Ok(FastCgiTarget::Address(AddressText::Unix(
                "/run/php/php8.2-fpm.sock"
            )))
        );
        assert_eq!(
            parse_fastcgi_pass("127.0.0.1:9000"),
            Ok(FastCgiTarget::Address(ip("127.0.0.1:9000")))
        );
        assert_eq!(
            parse_fastcgi_pass("php.internal:9000"),
            Ok(FastCgiTarget::Address(AddressText::Name {
                host: "php.internal",
                port: 9000
            }))
        );
        assert_eq!(parse_fastcgi_pass("php"), Ok(FastCgiTarget::Pool("php")));
        assert_eq!(
            parse_fastcgi_pass("flask_app-2"),
            Ok(FastCgiTarget::Pool("flask_app-2"))
        );
        for (bad, reason) in [
            ("http://127.0.0.1:9000", "FastCGI is not reached by URL"),
            ("unix:", "no socket path"),
            ("127.0.0.1", "no port"),
            ("", "neither an address with its port nor a pool name"),
            (
                "php/fpm",
                "neither an address with its port nor a pool name",
            ),
            ("127.0.0.1:0", "port 0"),
            ("php:fpm", "'fpm' is not a port"),
        ] {
            assert_eq!(parse_fastcgi_pass(bad), Err(reason.to_owned()), "{bad}");
        }
    }

    #[test]
    fn pool_names_read_as_hosts() {
        assert!(is_pool_name("app"));
        assert!(is_pool_name("app_v2.internal-1"));
        assert!(!is_pool_name(""));
        assert!(!is_pool_name("a:b"));
        assert!(!is_pool_name("a/b"));
        assert!(!is_pool_name("a b"));
    }
}
