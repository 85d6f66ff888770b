//! The pools of one configuration file as the loader collects them: named pools
//! (`[upstream.NAME]`, then applications) in file order, then one implicit pool per distinct
//! `proxy_pass`/`fastcgi_pass` address and protocol, with what the file said of each until every
//! location has named its pools.
//!
//! Owns: `PoolTable`, `PoolUse`. Must not touch: reading the file's keys or placing errors
//! (`pools.rs` reads `[upstream.NAME]` and the pass keys into this table; `load.rs` holds it).

use std::ops::Range;

use super::upstream::{UpstreamAddress, UpstreamPool, UpstreamProtocol, UpstreamServer};

/// The pools of one file, in the order `ProxySettings::pool` and `FastCgiSettings::pool` index.
#[derive(Debug, Default)]
pub(super) struct PoolTable {
    pub(super) pools: Vec<UpstreamPool>,
    /// What the file says about each pool beyond its settings, parallel to `pools`.
    pub(super) notes: Vec<PoolNotes>,
    /// The first `named` pools are `[upstream.NAME]` tables and applications; the rest are
    /// implicit.
    named: usize,
}

/// What the loader must remember of a pool until every location has named it: its protocol is
/// decided by the locations that use it, and some of its settings depend on the protocol.
#[derive(Debug, Default)]
pub(super) struct PoolNotes {
    /// The first location key that named it (decides the protocol) and where.
    pub(super) used_by: Option<PoolUse>,
    /// `keepalive` was written: a FastCGI pool keeps it, else it defaults to 0.
    pub(super) keepalive_set: bool,
    /// `health_check`'s span and its `path`'s, if it has one.
    pub(super) health_check: Option<(Range<usize>, Option<Range<usize>>)>,
}

/// A key that named a pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct PoolUse {
    pub(super) protocol: UpstreamProtocol,
    /// Byte offset of the naming value (an application's: its table name).
    pub(super) at: usize,
    /// `"proxy_pass"`, `"fastcgi_pass"` or `"application"`.
    pub(super) key: &'static str,
}

impl PoolTable {
    pub(super) fn add_named(&mut self, pool: UpstreamPool, notes: PoolNotes) {
        debug_assert_eq!(self.named, self.pools.len(), "named pools come first");
        self.pools.push(pool);
        self.notes.push(notes);
        self.named += 1;
    }

    /// The pool of an `[application.NAME]` (defined at byte `at`): named, and FastCGI from the
    /// start.
    pub(super) fn add_application(&mut self, mut pool: UpstreamPool, at: usize) {
        pool.protocol = UpstreamProtocol::FastCgi;
        let notes = PoolNotes {
            used_by: Some(PoolUse {
                protocol: UpstreamProtocol::FastCgi,
                at,
                key: "application",
            }),
            ..PoolNotes::default()
        };
        self.add_named(pool, notes);
    }

    /// How many named pools (`[upstream.NAME]`, then applications) there are so far.
    pub(super) fn named_count(&self) -> usize {
        self.named
    }

    /// The named pool `name` (without case: it is the host of `http://NAME`).
    pub(super) fn named(&self, name: &str) -> Option<usize> {
        self.pools[..self.named]
            .iter()
            .position(|pool| pool.name.eq_ignore_ascii_case(name))
    }

    /// The implicit pool of `addresses` speaking `protocol` (made with the defaults the first
    /// time): locations naming the same address the same way share its keep-alive connections
    /// and health.
    pub(super) fn implicit(
        &mut self,
        addresses: Vec<UpstreamAddress>,
        written: &str,
        protocol: UpstreamProtocol,
    ) -> usize {
        let same = |pool: &UpstreamPool| {
            pool.protocol == protocol
                && pool
                    .servers
                    .iter()
                    .map(|server| &server.address)
                    .eq(addresses.iter())
        };
        if let Some(at) = self.pools[self.named..].iter().position(same) {
            return self.named + at;
        }
        let name = match addresses.as_slice() {
            [one] => one.to_string(),
            _ => written.to_owned(),
        };
        let servers = addresses
            .into_iter()
            .map(|address| UpstreamServer {
                address,
                weight: 1,
                backup: false,
            })
            .collect();
        let mut pool = UpstreamPool::new(name, servers);
        pool.protocol = protocol;
        self.pools.push(pool);
        self.notes.push(PoolNotes::default());
        self.pools.len() - 1
    }

    /// Records that `pool` is named by `using`; the first use sets the pool's protocol. A later
    /// use with another protocol is refused with the first one (a pool speaks one protocol).
    pub(super) fn use_pool(&mut self, pool: usize, using: PoolUse) -> Result<(), PoolUse> {
        match self.notes[pool].used_by {
            Some(first) if first.protocol != using.protocol => Err(first),
            Some(_) => Ok(()),
            None => {
                self.notes[pool].used_by = Some(using);
                self.pools[pool].protocol = using.protocol;
                Ok(())
            }
        }
    }

    pub(super) fn pool_name(&self, pool: usize) -> &str {
        &self.pools[pool].name
    }

    #[cfg(test)]
    pub(super) fn into_pools(self) -> Vec<UpstreamPool> {
        self.pools
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn tcp(text: &str) -> UpstreamAddress {
        UpstreamAddress::Tcp(text.parse().unwrap())
    }

    #[test]
    fn implicit_pools_are_shared_by_address_and_come_after_the_named() {
        let mut table = PoolTable::default();
        table.add_named(
            UpstreamPool::new(
                "App".to_owned(),
                vec![UpstreamServer {
                    address: tcp("127.0.0.1:1"),
                    weight: 1,
                    backup: false,
                }],
            ),
            PoolNotes::default(),
        );
        assert_eq!(table.named("app"), Some(0));
        assert_eq!(table.named("APP"), Some(0));
        assert_eq!(table.named("other"), None);
        // An address that a named pool also holds still gets its own implicit pool: a named
        // pool's settings are not the defaults an inline address promises.
        let http = UpstreamProtocol::Http;
        let first = table.implicit(vec![tcp("127.0.0.1:1")], "http://127.0.0.1:1", http);
        assert_eq!(first, 1);
        assert_eq!(table.implicit(vec![tcp("127.0.0.1:1")], "x", http), 1);
        let both = vec![tcp("127.0.0.1:2"), tcp("[::1]:2")];
        assert_eq!(table.implicit(both.clone(), "host:2", http), 2);
        assert_eq!(table.implicit(both, "other:2", http), 2);
        assert_eq!(
            table.named("127.0.0.1:1"),
            None,
            "implicit pools have no name to use"
        );
        // The same address spoken to in FastCGI is another pool.
        let fastcgi = UpstreamProtocol::FastCgi;
        assert_eq!(table.implicit(vec![tcp("127.0.0.1:1")], "x", fastcgi), 3);
        assert_eq!(table.implicit(vec![tcp("127.0.0.1:1")], "y", fastcgi), 3);
        let pools = table.into_pools();
        let names: Vec<&str> = pools.iter().map(|pool| pool.name.as_str()).collect();
        assert_eq!(names, ["App", "127.0.0.1:1", "host:2", "127.0.0.1:1"]);
        assert_eq!(pools[1].protocol, http);
        assert_eq!(pools[3].protocol, fastcgi);
        assert_eq!(pools[2].servers.len(), 2);
        assert_eq!(pools[1].connect_timeout, Duration::from_secs(5));
    }

    #[test]
    fn a_pool_speaks_the_protocol_of_its_first_use_and_only_that() {
        let mut table = PoolTable::default();
        let pool = table.implicit(vec![tcp("127.0.0.1:1")], "x", UpstreamProtocol::Http);
        let using = |protocol, at, key| PoolUse { protocol, at, key };
        table.notes[pool].used_by = None;
        let fastcgi = using(UpstreamProtocol::FastCgi, 10, "fastcgi_pass");
        assert_eq!(table.use_pool(pool, fastcgi), Ok(()));
        assert_eq!(table.pools[pool].protocol, UpstreamProtocol::FastCgi);
        assert_eq!(
            table.use_pool(pool, using(UpstreamProtocol::FastCgi, 20, "fastcgi_pass")),
            Ok(())
        );
        assert_eq!(
            table.use_pool(pool, using(UpstreamProtocol::Http, 30, "proxy_pass")),
            Err(fastcgi),
            "the first use is named"
        );
    }
}
