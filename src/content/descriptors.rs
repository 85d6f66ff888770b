//! How many descriptors the caches may hold open: a share of `RLIMIT_NOFILE` kept apart from
//! what connections need.
//!
//! Owns: the arithmetic of the split. A cached translation of a file keeps the file open (and
//! each precompressed sibling), so a cache bounded only by entries lets any client that asks
//! for enough distinct files take every descriptor the process has, after which nothing can be
//! opened or accepted. The split, per process (each `mp` worker has its own limit):
//! * connections: what admission lets in before it drops (`ops::admission`: the cap, lowered
//!   so that its connections' descriptors fit in half the limit, plus its eighth and 16
//!   answered with `503`). A connection holds its socket, and where a location passes requests
//!   to another program (proxy, FastCGI, CGI) the socket to it as well
//!   (`Config::descriptors_per_connection`): counted once, a server at `ulimit -n 256` let in
//!   128 proxied connections, whose upstream sockets then failed with `EMFILE`;
//! * of the rest, half for the caches (divided between the loops or rings that own one), half
//!   left for everything else: listeners, epoll and event descriptors, inotify, logs, helper
//!   processes' sockets, files being translated, and cached files that were evicted while a
//!   response still sends them.
//!
//! Must not touch: the caches themselves (`path_cache.rs` enforces the share).

/// The descriptors of one process, divided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DescriptorShare {
    /// `RLIMIT_NOFILE` (the soft limit, which the engine raises to the hard one first).
    pub limit: u64,
    /// Kept for connections.
    pub connections: u64,
    /// For the caches' open files, in all.
    pub caches: u64,
}

/// The fewest descriptors the caches get however small the limit: a handful of hot files
/// still saves their opens, and opening on `EMFILE` relieves the cache first.
const CACHES_AT_LEAST: u64 = 8;

/// The most connections one process with `limit` descriptors admits when each holds
/// `per_connection` of them (`Config::descriptors_per_connection`): their descriptors fit in
/// half the limit (at least 16 connections), the other half left for the caches and the rest.
#[must_use]
pub fn connection_cap(limit: u64, per_connection: u64) -> u64 {
    (limit / 2 / per_connection.max(1)).max(16)
}

impl DescriptorShare {
    /// The split of `limit` descriptors with admission's connection cap `max_connections`,
    /// each connection holding `per_connection` descriptors.
    #[must_use]
    pub fn of(limit: u64, max_connections: usize, per_connection: u64) -> DescriptorShare {
        // ops::admission::limit_descriptors: the cap is `connection_cap` at most, and
        // connections are dropped, not answered, only beyond cap + cap/8 + 16; those answered
        // `503` hold no second descriptor.
        let cap = u64::try_from(max_connections)
            .unwrap_or(u64::MAX)
            .min(connection_cap(limit, per_connection));
        let connections = cap
            .saturating_mul(per_connection.max(1))
            .saturating_add(cap / 8)
            .saturating_add(16)
            .min(limit);
        let caches = (limit.saturating_sub(connections) / 2).max(CACHES_AT_LEAST);
        DescriptorShare {
            limit,
            connections,
            caches,
        }
    }

    /// This process's split, from its current `RLIMIT_NOFILE`; `None` when it cannot be read
    /// or is unlimited (`RLIM_INFINITY`).
    #[must_use]
    pub fn current(max_connections: usize, per_connection: u64) -> Option<DescriptorShare> {
        let (soft, _) = ampd_sys::process::nofile_limit().ok()?;
        (soft < u64::MAX / 2).then(|| DescriptorShare::of(soft, max_connections, per_connection))
    }

    /// The caches' share of one of `owners` loops, rings or shared sets.
    #[must_use]
    pub fn per_cache(&self, owners: usize) -> u64 {
        (self.caches / owners.max(1) as u64).max(1)
    }
}

/// The descriptors one of `owners` sets of caches may hold, under this process's limit (no
/// bound when the limit cannot be read).
#[must_use]
pub fn cache_descriptors(max_connections: usize, per_connection: u64, owners: usize) -> u64 {
    DescriptorShare::current(max_connections, per_connection)
        .map_or(u64::MAX, |share| share.per_cache(owners))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_limit_keeps_room_for_connections_and_everything_else() {
        let share = DescriptorShare::of(256, 100_000, 1);
        assert_eq!(share.connections, 128 + 16 + 16);
        assert_eq!(share.caches, 48);
        assert_eq!(share.per_cache(2), 24);
        assert!(share.connections + share.caches < share.limit);
    }

    #[test]
    fn the_default_limit_of_this_kind_of_machine() {
        let share = DescriptorShare::of(20_000, 100_000, 1);
        assert_eq!(share.connections, 10_000 + 1_250 + 16);
        assert_eq!(share.caches, (20_000 - 11_266) / 2);
        // Spread over two loops; the path cache's 10,000 entries per loop no longer decide.
        assert_eq!(share.per_cache(2), 2_183);
    }

    #[test]
    fn a_lower_connection_cap_leaves_more_for_the_caches() {
        let share = DescriptorShare::of(1024, 100, 1);
        assert_eq!(share.connections, 100 + 12 + 16);
        assert_eq!(share.caches, (1024 - 128) / 2);
    }

    /// Issue 35, item 19: at `ulimit -n 256` a proxied connection's two descriptors halve the
    /// cap (128 client sockets and their 128 upstream sockets were the whole limit).
    #[test]
    fn a_proxied_connection_counts_twice() {
        assert_eq!(connection_cap(256, 2), 64);
        let share = DescriptorShare::of(256, 100_000, 2);
        assert_eq!(share.connections, 64 * 2 + 8 + 16);
        assert_eq!(share.caches, (256 - 152) / 2);
        assert!(share.connections + share.caches < share.limit);
        assert_eq!(
            DescriptorShare::of(1024, 100, 2).connections,
            100 * 2 + 12 + 16,
            "a lower max_connections still decides"
        );
        assert_eq!(connection_cap(20, 2), 16, "at least 16");
    }

    #[test]
    fn a_tiny_limit_still_caches_a_handful() {
        let share = DescriptorShare::of(32, 100_000, 1);
        assert_eq!(share.caches, CACHES_AT_LEAST);
        assert_eq!(share.per_cache(16), 1);
    }
}
