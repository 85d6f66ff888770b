//! Targets: `--target name=http://host:port/path`, resolved once before any run.
//!
//! Owns: parsing target URLs and checking that each answers a TCP connect before the runs
//! start, so an unreachable server is one clear line instead of a run full of errors.
//! Must not touch: HTTP (only `http://` URLs; TLS is out of scope).

use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

/// One server under test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The name in reports and charts (`nginx`, `ampd`).
    pub name: String,
    pub url: String,
    pub address: SocketAddr,
    /// The `Host` header: the URL's authority.
    pub host: String,
    /// The URL's path (`/` when absent).
    pub path: String,
}

impl Target {
    /// Parses `[name=]http://host[:port][/path]`; the name defaults to `host:port`.
    ///
    /// # Errors
    /// One line naming the bad argument: not `http://`, no host, a bad port, a name that does
    /// not resolve.
    pub fn parse(argument: &str) -> Result<Target, String> {
        let (name, url) = match argument.split_once('=') {
            Some((name, url)) if !name.contains('/') && !name.contains(':') => (Some(name), url),
            _ => (None, argument),
        };
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| format!("target '{url}': only http:// URLs are supported"))?;
        let (authority, path) = match rest.find('/') {
            Some(slash) => (&rest[..slash], &rest[slash..]),
            None => (rest, "/"),
        };
        if authority.is_empty() {
            return Err(format!("target '{url}': no host"));
        }
        let with_port = if authority.starts_with('[') {
            if authority.contains("]:") {
                authority.to_owned()
            } else {
                format!("{authority}:80")
            }
        } else if authority.contains(':') {
            authority.to_owned()
        } else {
            format!("{authority}:80")
        };
        let address = with_port
            .to_socket_addrs()
            .map_err(|error| format!("target '{url}': {error}"))?
            .next()
            .ok_or_else(|| format!("target '{url}': host has no address"))?;
        let name = name.map_or_else(|| authority.to_owned(), str::to_owned);
        if name.is_empty() {
            return Err(format!("target '{argument}': empty name before '='"));
        }
        Ok(Target {
            name,
            url: url.to_owned(),
            address,
            host: authority.to_owned(),
            path: path.to_owned(),
        })
    }

    /// Checks that the target accepts a TCP connection within two seconds.
    ///
    /// # Errors
    /// One line naming the target and the reason.
    pub fn check_reachable(&self) -> Result<(), String> {
        TcpStream::connect_timeout(&self.address, Duration::from_secs(2))
            .map(drop)
            .map_err(|error| {
                format!(
                    "target {} ({}) is unreachable: {error}",
                    self.name, self.address
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names_ports_and_paths() {
        let target = Target::parse("nginx=http://127.0.0.1:8080/f1k.bin").unwrap();
        assert_eq!(target.name, "nginx");
        assert_eq!(target.address, "127.0.0.1:8080".parse().unwrap());
        assert_eq!(
            (target.host.as_str(), target.path.as_str()),
            ("127.0.0.1:8080", "/f1k.bin")
        );
        let bare = Target::parse("http://127.0.0.1:9").unwrap();
        assert_eq!(
            (bare.name.as_str(), bare.path.as_str()),
            ("127.0.0.1:9", "/")
        );
        let default_port = Target::parse("http://127.0.0.1/x").unwrap();
        assert_eq!(default_port.address.port(), 80);
        assert!(Target::parse("https://127.0.0.1/")
            .unwrap_err()
            .contains("only http://"));
        assert!(Target::parse("http://127.0.0.1:99999/").is_err());
        assert!(Target::parse("http:///x").unwrap_err().contains("no host"));
    }

    #[test]
    fn unreachable_target_is_one_line() {
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().port()
        };
        let target = Target::parse(&format!("gone=http://127.0.0.1:{port}/")).unwrap();
        let message = target.check_reachable().unwrap_err();
        assert!(message.starts_with("target gone (127.0.0.1:"), "{message}");
        assert!(!message.contains('\n'));
    }
}
