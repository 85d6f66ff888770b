//! `[upstream.NAME]` tables and `proxy_pass` targets: the pools of `Config::upstreams`, with
//! their errors (empty or duplicate pools, bad addresses, names that do not resolve, weights,
//! backups a hash balance cannot use, health checks).
//!
//! Owns: reading the pools into the loader's `PoolTable` (`pool_table.rs`), finishing them
//! once every location has named its pools, and resolving server names, once, at load.
//! Must not touch: the state of servers (`crate::upstream`), the other keys of a location
//! (`blocks.rs`, `proxy_keys.rs`).

use std::collections::BTreeMap;
use std::net::ToSocketAddrs;
use std::ops::Range;
use std::time::Duration;

use toml::Spanned;

use super::load::{ConfigError, Loaded, Loader};
use super::pool_table::{PoolNotes, PoolUse};
use super::raw::{Quantity, RawHealthCheck, RawServer, RawUpstream};
use super::targets::{
    is_pool_name, parse_address, parse_proxy_pass, AddressText, PassError, PassTarget,
    PROXY_PASS_FORMS, SERVER_FORMS,
};
use super::text::{plain, position};
use super::upstream::{
    ActiveHealth, Balance, UpstreamAddress, UpstreamPool, UpstreamProtocol, UpstreamServer,
};

/// A location's `proxy_pass`: its pool and the path part.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct ProxyPass {
    pub(super) pool: usize,
    pub(super) path: Option<String>,
}

type RawUpstreams = BTreeMap<Spanned<String>, Spanned<RawUpstream>>;

impl Loader<'_> {
    /// Every `[upstream.NAME]`, in file order, into the pool table.
    pub(super) fn upstreams(&self, raw: Option<RawUpstreams>) -> Loaded<()> {
        let mut tables: Vec<_> = raw.unwrap_or_default().into_iter().collect();
        tables.sort_by_key(|(name, _)| name.span().start);
        let mut seen: Vec<(String, usize)> = Vec::new();
        for (name, table) in &tables {
            let key = format!("upstream.{}", name.get_ref());
            if !is_pool_name(name.get_ref()) {
                return Err(self.hinted(
                    name.span(),
                    &key,
                    format!("'{}' is not a pool name", name.get_ref()),
                    "letters, digits, '-', '_' and '.': proxy_pass = \"http://NAME\" names it",
                ));
            }
            let lower = name.get_ref().to_ascii_lowercase();
            if let Some((_, first)) = seen.iter().find(|(seen, _)| *seen == lower) {
                let (line, _) = position(self.text(), *first);
                return Err(self.hinted(
                    name.span(),
                    &key,
                    format!(
                        "'{}' is already the name of an upstream (line {line})",
                        name.get_ref()
                    ),
                    "names are compared without case, as the host of http://NAME is",
                ));
            }
            seen.push((lower, name.span().start));
            let raw = table.get_ref();
            let pool = self.pool(name, raw)?;
            let notes = PoolNotes {
                used_by: None,
                keepalive_set: raw.keepalive.is_some(),
                health_check: raw.health_check.as_ref().map(|check| {
                    (
                        check.span(),
                        check.get_ref().path.as_ref().map(Spanned::span),
                    )
                }),
            };
            self.pools.borrow_mut().add_named(pool, notes);
        }
        Ok(())
    }

    fn pool(&self, name: &Spanned<String>, raw: &RawUpstream) -> Loaded<UpstreamPool> {
        let key = |field: &str| format!("upstream.{}.{field}", name.get_ref());
        let mut pool = UpstreamPool::new(name.get_ref().clone(), Vec::new());
        if let Some(balance) = &raw.balance {
            pool.balance = match balance.get_ref().as_str() {
                "round_robin" => Balance::RoundRobin,
                "least_connections" => Balance::LeastConnections,
                "client_address" => Balance::ClientAddress,
                "uri" => Balance::Uri,
                other => {
                    return Err(self.hinted(
                        balance.span(),
                        &key("balance"),
                        format!("unknown balance '{other}'"),
                        "round_robin, least_connections, client_address or uri",
                    ))
                }
            };
        }
        pool.servers = self.servers(name, raw, pool.balance)?;
        if let Some(value) = &raw.keepalive {
            pool.keepalive = self.count(value, &key("keepalive"), 0)?;
        }
        for (value, field, target) in [
            (
                &raw.keepalive_timeout,
                "keepalive_timeout",
                &mut pool.keepalive_timeout,
            ),
            (
                &raw.connect_timeout,
                "connect_timeout",
                &mut pool.connect_timeout,
            ),
            (&raw.send_timeout, "send_timeout", &mut pool.send_timeout),
            (&raw.read_timeout, "read_timeout", &mut pool.read_timeout),
            (
                &raw.fail_window,
                "fail_window",
                &mut pool.passive.fail_window,
            ),
            (
                &raw.fail_timeout,
                "fail_timeout",
                &mut pool.passive.fail_timeout,
            ),
        ] {
            if let Some(value) = value {
                *target = self.duration(value, &key(field), false)?;
            }
        }
        if let Some(value) = &raw.tries {
            pool.tries = self.count_u32(value, &key("tries"), 1)?;
        }
        if let Some(value) = &raw.max_fails {
            pool.passive.max_fails = self.count_u32(value, &key("max_fails"), 0)?;
        }
        if let Some(check) = &raw.health_check {
            pool.active = Some(self.health_check(check.get_ref(), &key("health_check"))?);
        }
        Ok(pool)
    }

    fn servers(
        &self,
        name: &Spanned<String>,
        raw: &RawUpstream,
        balance: Balance,
    ) -> Loaded<Vec<UpstreamServer>> {
        let key = format!("upstream.{}.servers", name.get_ref());
        let no_servers = |span: Range<usize>| {
            self.hinted(
                span,
                &key,
                "no servers",
                "servers = [\"127.0.0.1:9001\", { address = \"127.0.0.1:9002\", weight = 2 }]",
            )
        };
        let Some(list) = &raw.servers else {
            return Err(no_servers(name.span()));
        };
        if list.get_ref().is_empty() {
            return Err(no_servers(list.span()));
        }
        let mut servers: Vec<UpstreamServer> = Vec::new();
        for entry in list.get_ref() {
            let (text, span, address_key, weight, backup) = match entry.get_ref() {
                RawServer::Address(text) => (text, entry.span(), key.clone(), None, None),
                RawServer::Table(table) => (
                    table.address.get_ref(),
                    table.address.span(),
                    format!("{key}.address"),
                    table.weight.as_ref(),
                    table.backup.as_ref(),
                ),
            };
            let weight = match weight {
                Some(weight) => self.count_u32(weight, &format!("{key}.weight"), 1)?,
                None => 1,
            };
            let backup = match backup {
                Some(backup) if *backup.get_ref() => {
                    if let Some(name) = hash_name(balance) {
                        return Err(self.hinted(
                            backup.span(),
                            &format!("{key}.backup"),
                            format!("a backup server does not work with balance = \"{name}\""),
                            "a hash sends each key to one server and, when it is down, to another of the pool, so a backup would never be chosen (nginx refuses it too): use round_robin or least_connections",
                        ));
                    }
                    true
                }
                _ => false,
            };
            for address in self.server_addresses(text, span.clone(), &address_key)? {
                if servers.iter().any(|server| server.address == address) {
                    return Err(self.hinted(
                        span,
                        &address_key,
                        format!("{address} is already a server of this pool"),
                        "list a server once; weight gives it a larger share",
                    ));
                }
                servers.push(UpstreamServer {
                    address,
                    weight,
                    backup,
                });
            }
        }
        if servers.iter().all(|server| server.backup) {
            return Err(self.hinted(
                list.span(),
                &key,
                "every server is a backup",
                "backups stand in while every other server is down: at least one must not be a backup",
            ));
        }
        Ok(servers)
    }

    /// The addresses `text` stands for: one, or every address a host name resolves to (as
    /// nginx's `server` does); unix socket paths made absolute.
    fn server_addresses(
        &self,
        text: &str,
        span: Range<usize>,
        key: &str,
    ) -> Loaded<Vec<UpstreamAddress>> {
        let address = parse_address(text).map_err(|reason| {
            self.hinted(
                span.clone(),
                key,
                format!("'{text}' is not a server address ({reason})"),
                SERVER_FORMS,
            )
        })?;
        self.resolve(&address, span, key)
    }

    pub(super) fn resolve(
        &self,
        address: &AddressText<'_>,
        span: Range<usize>,
        key: &str,
    ) -> Loaded<Vec<UpstreamAddress>> {
        match *address {
            AddressText::Ip(address) => Ok(vec![UpstreamAddress::Tcp(address)]),
            AddressText::Unix(path) => Ok(vec![UpstreamAddress::Unix(self.path(path))]),
            AddressText::Name { host, port } => {
                let unresolved = |reason: String| {
                    self.hinted(
                        span.clone(),
                        key,
                        format!("cannot resolve '{host}': {reason}"),
                        "names are resolved once, when the file is loaded; use an address, or a name this machine resolves",
                    )
                };
                let found = (host, port)
                    .to_socket_addrs()
                    .map_err(|error| unresolved(plain(&error)))?;
                let mut addresses = Vec::new();
                for address in found.map(UpstreamAddress::Tcp) {
                    if !addresses.contains(&address) {
                        addresses.push(address);
                    }
                }
                if addresses.is_empty() {
                    return Err(unresolved("no address".to_owned()));
                }
                Ok(addresses)
            }
        }
    }

    fn health_check(&self, raw: &RawHealthCheck, key: &str) -> Loaded<ActiveHealth> {
        // Whether a path is needed depends on the pool's protocol, known once the locations are
        // read (`finish_pools`): an empty one stands for "none" meanwhile.
        let path = match &raw.path {
            Some(path) => self.health_check_path(path, key)?,
            None => String::new(),
        };
        let duration = |value: &Option<Spanned<Quantity>>, field: &str, default: u64| {
            value
                .as_ref()
                .map_or(Ok(Duration::from_secs(default)), |value| {
                    self.duration(value, &format!("{key}.{field}"), false)
                })
        };
        let count = |value: &Option<Spanned<i64>>, field: &str| {
            value.as_ref().map_or(Ok(2), |value| {
                self.count_u32(value, &format!("{key}.{field}"), 1)
            })
        };
        let expect = match &raw.expect {
            Some(expect) => {
                let status = *expect.get_ref();
                u16::try_from(status)
                    .ok()
                    .filter(|status| (100..=599).contains(status))
                    .ok_or_else(|| {
                        self.error(
                            expect.span(),
                            &format!("{key}.expect"),
                            format!("{status} is not a status (100-599)"),
                        )
                    })?
            }
            None => 200,
        };
        Ok(ActiveHealth {
            path,
            interval: duration(&raw.interval, "interval", 5)?,
            timeout: duration(&raw.timeout, "timeout", 2)?,
            expect,
            rise: count(&raw.rise, "rise")?,
            fall: count(&raw.fall, "fall")?,
        })
    }

    fn health_check_path(&self, path: &Spanned<String>, key: &str) -> Loaded<String> {
        let text = path.get_ref();
        if !text.starts_with('/') {
            return Err(self.hinted(
                path.span(),
                &format!("{key}.path"),
                format!("'{text}' does not start with '/'"),
                "the path requested with GET, like \"/health\"",
            ));
        }
        if text.bytes().any(|byte| byte <= b' ' || byte >= 0x7f) {
            return Err(self.hinted(
                path.span(),
                &format!("{key}.path"),
                format!("'{text}' has a space, a control or a non-ASCII character"),
                "percent-encode it (%20)",
            ));
        }
        Ok(text.clone())
    }

    /// Once every location has named its pools: the settings that depend on a pool's protocol.
    /// A FastCGI pool's `keepalive` defaults to 0 (nginx's `fastcgi_keep_conn off`: a kept
    /// connection holds one of the application's workers while idle), and its health check asks
    /// `FCGI_GET_VALUES`, so a `path` is refused; an HTTP pool's check needs one.
    pub(super) fn finish_pools(&self) -> Loaded<Vec<UpstreamPool>> {
        let table = self.pools.take();
        let mut pools = table.pools;
        for (pool, notes) in pools.iter_mut().zip(&table.notes) {
            let key = format!("upstream.{}.health_check", pool.name);
            match (pool.protocol, &notes.health_check) {
                (UpstreamProtocol::FastCgi, Some((_, Some(path)))) => {
                    let (line, _) = notes
                        .used_by
                        .map_or((0, 0), |using| position(self.text(), using.at));
                    return Err(self.hinted(
                        path.clone(),
                        &format!("{key}.path"),
                        format!(
                            "a FastCGI pool (fastcgi_pass, line {line}) is checked without a path"
                        ),
                        "its health check asks the application FCGI_GET_VALUES: remove path",
                    ));
                }
                (UpstreamProtocol::Http, Some((check, None))) => {
                    return Err(self.hinted(
                        check.clone(),
                        &format!("{key}.path"),
                        "an HTTP pool's health check needs a path",
                        "health_check = { path = \"/health\" } (a FastCGI pool, named by fastcgi_pass, needs none)",
                    ));
                }
                _ => {}
            }
            if pool.protocol == UpstreamProtocol::FastCgi && !notes.keepalive_set {
                pool.keepalive = 0;
            }
        }
        Ok(pools)
    }

    /// A `proxy_pass`: a named pool, or the implicit pool of an address.
    pub(super) fn proxy_pass(&self, value: &Spanned<String>, key: &str) -> Loaded<ProxyPass> {
        let text = value.get_ref();
        let refused = |message: String| self.hinted(value.span(), key, message, PROXY_PASS_FORMS);
        let pass = parse_proxy_pass(text).map_err(|error| match error {
            PassError::Tls => self.hinted(
                value.span(),
                key,
                "TLS to upstreams is not available yet",
                "proxy over http:// to an upstream on a trusted network, or over a unix socket",
            ),
            PassError::NotATarget => refused(format!("'{text}' is not a proxy target")),
            PassError::Query => refused(format!(
                "'{text}' has a query or fragment: the query sent upstream is the client's"
            )),
            PassError::UserInfo => refused(format!(
                "'{text}' has user information: ampd sends no credentials of its own upstream"
            )),
            PassError::BadPath => refused(format!(
                "'{text}' has a space or control character in its path"
            )),
            PassError::Address(reason) => {
                refused(format!("'{text}' is not a proxy target ({reason})"))
            }
        })?;
        let pool = match pass.target {
            PassTarget::Pool(name) => self.pools.borrow().named(name).ok_or_else(|| {
                self.hinted(
                    value.span(),
                    key,
                    format!("no [upstream.{name}] pool"),
                    format!("define [upstream.{name}], or give an address with its port: http://127.0.0.1:9001"),
                )
            })?,
            PassTarget::Address(address) => {
                let addresses = self
                    .resolve(&address, value.span(), key)
                    .map_err(|error| self.pool_with_a_port(error, &address, pass.path))?;
                self.pools
                    .borrow_mut()
                    .implicit(addresses, text, UpstreamProtocol::Http)
            }
        };
        self.use_pool(
            pool,
            PoolUse {
                protocol: UpstreamProtocol::Http,
                at: value.span().start,
                key: "proxy_pass",
            },
            value.span(),
            key,
        )?;
        Ok(ProxyPass {
            pool,
            path: pass.path.map(str::to_owned),
        })
    }

    /// Marks `pool` as named by `using` (written at `span`, under `key`); refused when an earlier
    /// key named it for the other protocol.
    pub(super) fn use_pool(
        &self,
        pool: usize,
        using: PoolUse,
        span: Range<usize>,
        key: &str,
    ) -> Loaded<()> {
        let first = match self.pools.borrow_mut().use_pool(pool, using) {
            Ok(()) => return Ok(()),
            Err(first) => first,
        };
        let name = self.pools.borrow().pool_name(pool).to_owned();
        let (line, _) = position(self.text(), first.at);
        let (message, hint) = match first.key {
            "application" => (
                format!("'{name}' is an application (line {line}), which speaks FastCGI"),
                "name it with fastcgi_pass".to_owned(),
            ),
            other => (
                format!("the pool '{name}' is already named by {other} (line {line})"),
                format!(
                    "a pool speaks one protocol: give the {} servers a pool of their own",
                    if using.protocol == UpstreamProtocol::FastCgi {
                        "FastCGI"
                    } else {
                        "HTTP"
                    }
                ),
            ),
        };
        Err(self.hinted(span, key, message, hint))
    }

    /// `http://app:80` meant for `[upstream.app]`: when the name does not resolve, the hint
    /// says how a pool is named.
    fn pool_with_a_port(
        &self,
        error: ConfigError,
        address: &AddressText<'_>,
        path: Option<&str>,
    ) -> ConfigError {
        match *address {
            AddressText::Name { host, .. } if self.pools.borrow().named(host).is_some() => {
                ConfigError {
                    hint: Some(format!(
                        "a pool is named without a port: http://{host}{}",
                        path.unwrap_or_default()
                    )),
                    ..error
                }
            }
            _ => error,
        }
    }

    pub(super) fn count_u32(&self, value: &Spanned<i64>, key: &str, min: i64) -> Loaded<u32> {
        let count = self.count(value, key, min)?;
        u32::try_from(count)
            .map_err(|_| self.error(value.span(), key, format!("{count} is too large")))
    }
}

/// The name of `balance` when it is a hash (which cannot fall back to backups).
fn hash_name(balance: Balance) -> Option<&'static str> {
    match balance {
        Balance::ClientAddress => Some("client_address"),
        Balance::Uri => Some("uri"),
        Balance::RoundRobin | Balance::LeastConnections => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tcp(text: &str) -> UpstreamAddress {
        UpstreamAddress::Tcp(text.parse().unwrap())
    }

    fn load(text: &str) -> Result<super::super::Config, super::super::ConfigError> {
        super::super::load::load_str(
            &format!("{text}[[site]]\nroot = \"/tmp\"\n"),
            std::path::Path::new("/etc/ampd/ampd.toml"),
        )
    }

    #[test]
    fn a_health_check_with_a_path_only_takes_the_defaults() {
        let config = load(
            "[upstream.app]\nservers = [\"127.0.0.1:1\"]\nhealth_check = { path = \"/up\" }\n",
        )
        .unwrap();
        assert_eq!(
            config.upstreams[0].active,
            Some(ActiveHealth {
                path: "/up".to_owned(),
                interval: Duration::from_secs(5),
                timeout: Duration::from_secs(2),
                expect: 200,
                rise: 2,
                fall: 2,
            })
        );
    }

    #[test]
    fn servers_take_weights_backups_and_paths_relative_to_the_file() {
        let config = load(
            "[upstream.app]\nservers = [{ address = \"127.0.0.1:1\", weight = 5 }, { address = \"unix:run/app.sock\", backup = true }]\n",
        )
        .unwrap();
        assert_eq!(
            config.upstreams[0].servers,
            [
                UpstreamServer {
                    address: tcp("127.0.0.1:1"),
                    weight: 5,
                    backup: false
                },
                UpstreamServer {
                    address: UpstreamAddress::Unix("/etc/ampd/run/app.sock".into()),
                    weight: 1,
                    backup: true
                },
            ]
        );
        // A pool no location names is still a pool (its health checks run, its metrics show).
        assert_eq!(config.upstreams.len(), 1);
        let error =
            load("[upstream.app]\nservers = [\"127.0.0.1:1\"]\nmax_fails = -1\n").unwrap_err();
        assert_eq!(
            (error.line, error.key.as_str(), error.message.as_str()),
            (3, "upstream.app.max_fails", "-1 is less than 0")
        );
    }

    #[test]
    fn only_hashes_refuse_backups() {
        assert_eq!(hash_name(Balance::ClientAddress), Some("client_address"));
        assert_eq!(hash_name(Balance::Uri), Some("uri"));
        assert_eq!(hash_name(Balance::RoundRobin), None);
        assert_eq!(hash_name(Balance::LeastConnections), None);
    }
}
