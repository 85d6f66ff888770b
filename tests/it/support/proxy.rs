//! Configurations for the reverse-proxy tests: an `[upstream.NAME]` pool of given servers and a
//! server started with it, in the documented syntax (docs/config.md, `[upstream.NAME]` and the
//! proxy keys of a location).
//! Owns: the text of those configurations. Must not touch: the upstreams themselves.

use std::net::SocketAddr;

use super::root::TempRoot;
use super::server::{Options, Server};

/// `[upstream.NAME]` with these servers, then `extra` lines (balance, timeouts, health, ...).
pub fn pool(name: &str, servers: &[SocketAddr], extra: &str) -> String {
    let list: Vec<String> = servers.iter().map(|addr| format!("\"{addr}\"")).collect();
    format!(
        "[upstream.{name}]\nservers = [{}]\n{extra}\n",
        list.join(", ")
    )
}

/// Starts ampd under `arch` with `pools` (from `pool`) and one default site whose root is the
/// test root and whose locations are `locations` (`[[site.location]]` blocks).
pub fn start(root: &TempRoot, arch: &str, pools: &str, locations: &str) -> Server {
    let body = format!("{pools}\n[[site]]\nroot = \"www\"\n\n{locations}\n");
    let config = super::write_config(root, arch, &body);
    Server::start(Options::config_file(&config))
}

/// A `[[site.location]]` at `path` passing everything to pool `name`, plus `extra` keys.
pub fn location(path: &str, name: &str, extra: &str) -> String {
    format!("[[site.location]]\npath = \"{path}\"\nproxy_pass = \"http://{name}\"\n{extra}\n")
}

/// An address nothing listens on: connecting is refused. Port 1 (tcpmux), not a port bound and
/// released: that one is back in the ephemeral range, where a test running beside this one
/// could be given it and answer (tests/proxy_log saw a `/gone/` request answered once).
pub fn refusing_address() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 1))
}
