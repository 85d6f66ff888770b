//! The balance methods: given which servers may take a request, which one does.
//!
//! Owns: smooth weighted round-robin, weighted least-connections, weighted rendezvous hashing
//! and the hash of a balance key. Must not touch: health (the caller says which servers are
//! eligible), `Pick`s and in-flight counting (`pool`).
//! Sources: nginx ngx_http_upstream_round_robin.c (smooth weighted round-robin) and
//! ngx_http_upstream_least_conn_module.c; Thaler & Ravishankar, "Using name-based mappings to
//! increase hit rates" (1998) for rendezvous (highest random weight) hashing, and its weighted
//! form (score = weight / -ln(hash in (0,1))).

use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use super::BalanceKey;
use crate::config::{Balance, UpstreamServer};

/// The state a pool's balance method keeps between requests.
#[derive(Debug)]
pub(super) enum Chooser {
    /// nginx's smooth weighted round-robin: each server's current weight, under a small mutex
    /// (each pick adds every eligible server's weight and takes the pool's total from the
    /// winner, so the whole vector changes at once; the lock is held for one pass over it).
    RoundRobin { current: Mutex<Vec<i64>> },
    /// Where the scan for the least loaded server starts: it moves one server per request,
    /// so ties go round-robin.
    LeastConnections { rotation: AtomicUsize },
    /// Rendezvous hashing of the client address or the URI; each server's seed is a hash of
    /// its address, so a key keeps its server across reloads and re-ordered lists.
    Hash { by: HashBy, seeds: Vec<u64> },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum HashBy {
    ClientAddress,
    Uri,
}

impl Chooser {
    pub(super) fn new(balance: Balance, servers: &[UpstreamServer]) -> Chooser {
        let hash = |by| Chooser::Hash {
            by,
            seeds: server_seeds(servers),
        };
        match balance {
            Balance::RoundRobin => Chooser::RoundRobin {
                current: Mutex::new(vec![0; servers.len()]),
            },
            Balance::LeastConnections => Chooser::LeastConnections {
                rotation: AtomicUsize::new(0),
            },
            Balance::ClientAddress => hash(HashBy::ClientAddress),
            Balance::Uri => hash(HashBy::Uri),
        }
    }

    /// The hash of what this method balances by (`0` when it balances by nothing), computed
    /// once per `choose`.
    pub(super) fn key_hash(&self, key: BalanceKey<'_>) -> u64 {
        match self {
            Chooser::Hash {
                by: HashBy::ClientAddress,
                ..
            } => address_hash(key.client),
            Chooser::Hash {
                by: HashBy::Uri, ..
            } => bytes_hash(key.uri.as_bytes()),
            _ => 0,
        }
    }

    /// The server among those `eligible` says may take the request; `None` if none may.
    pub(super) fn select(
        &self,
        servers: &[UpstreamServer],
        in_flight: &dyn Fn(usize) -> u64,
        key_hash: u64,
        eligible: &dyn Fn(usize) -> bool,
    ) -> Option<usize> {
        match self {
            Chooser::RoundRobin { current } => {
                let mut current = current.lock().unwrap_or_else(PoisonError::into_inner);
                smooth_weighted(&mut current, servers, eligible)
            }
            Chooser::LeastConnections { rotation } => {
                let start = rotation.fetch_add(1, Ordering::Relaxed);
                least_loaded(servers, in_flight, start, eligible)
            }
            Chooser::Hash { seeds, .. } => rendezvous(servers, seeds, key_hash, eligible),
        }
    }
}

fn weight(server: &UpstreamServer) -> u32 {
    server.weight.max(1)
}

/// nginx's smooth weighted round-robin: every eligible server's current weight grows by its
/// weight, the largest wins and drops by the total. Weights 5, 1, 1 give `a a b a c a a`, not
/// `a a a a a b c`: the heavy server's turns are spread out. Servers that are not eligible
/// (down, already tried) neither gain nor lose, as in nginx.
fn smooth_weighted(
    current: &mut [i64],
    servers: &[UpstreamServer],
    eligible: &dyn Fn(usize) -> bool,
) -> Option<usize> {
    let mut total = 0;
    let mut best: Option<usize> = None;
    for (id, server) in servers.iter().enumerate() {
        if !eligible(id) {
            continue;
        }
        let weight = i64::from(weight(server));
        current[id] += weight;
        total += weight;
        if best.is_none_or(|best| current[id] > current[best]) {
            best = Some(id);
        }
    }
    let best = best?;
    current[best] -= total;
    Some(best)
}

/// The eligible server with the fewest requests in flight per unit of weight; among equals,
/// the first at or after `start` (which moves every request).
fn least_loaded(
    servers: &[UpstreamServer],
    in_flight: &dyn Fn(usize) -> u64,
    start: usize,
    eligible: &dyn Fn(usize) -> bool,
) -> Option<usize> {
    let count = servers.len();
    let mut best: Option<(usize, u64)> = None;
    for offset in 0..count {
        let id = (start + offset) % count;
        if !eligible(id) {
            continue;
        }
        let load = in_flight(id);
        let lighter = best.is_none_or(|(best, best_load)| {
            // load / weight < best_load / best_weight, without division.
            u128::from(load) * u128::from(weight(&servers[best]))
                < u128::from(best_load) * u128::from(weight(&servers[id]))
        });
        if lighter {
            best = Some((id, load));
        }
    }
    best.map(|(id, _)| id)
}

/// Weighted rendezvous hashing: each eligible server scores the key, the highest score wins.
/// A server that goes down (or is removed) loses only the keys it won; every other key's
/// winner is unchanged. The weighted score `weight / -ln(u)` (u uniform in (0,1)) gives each
/// server a share of keys proportional to its weight.
fn rendezvous(
    servers: &[UpstreamServer],
    seeds: &[u64],
    key_hash: u64,
    eligible: &dyn Fn(usize) -> bool,
) -> Option<usize> {
    let mut best: Option<(usize, f64)> = None;
    for (id, server) in servers.iter().enumerate() {
        if !eligible(id) {
            continue;
        }
        let score = rendezvous_score(key_hash, seeds[id], weight(server));
        if best.is_none_or(|(_, best_score)| score > best_score) {
            best = Some((id, score));
        }
    }
    best.map(|(id, _)| id)
}

fn rendezvous_score(key_hash: u64, seed: u64, weight: u32) -> f64 {
    let mixed = mix(key_hash ^ seed);
    // The top 53 bits as a float strictly inside (0, 1).
    #[allow(clippy::cast_precision_loss)]
    let unit = ((mixed >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
    f64::from(weight) / -unit.ln()
}

/// Each server's seed: a hash of its address, and of how many servers before it have the same
/// address (a server listed twice then counts twice, as nginx treats it).
fn server_seeds(servers: &[UpstreamServer]) -> Vec<u64> {
    servers
        .iter()
        .enumerate()
        .map(|(id, server)| {
            let name = server.address.to_string();
            let repeats = servers[..id]
                .iter()
                .filter(|earlier| earlier.address == server.address)
                .count();
            mix(bytes_hash(name.as_bytes()) ^ repeats as u64)
        })
        .collect()
}

/// The client address's hash. The whole address is hashed, IPv4 included, not its /24 as
/// nginx's `ip_hash` does: grouping by /24 sends a whole office NAT, a front balancer's
/// subnet or every loopback client to one server, and the case it serves (a client whose
/// address changes within its provider's /24) is rare today; nginx itself hashes whole IPv6
/// addresses. An IPv4-mapped IPv6 address (a dual-stack listener) hashes as its IPv4 address.
fn address_hash(client: IpAddr) -> u64 {
    match client.to_canonical() {
        IpAddr::V4(address) => bytes_hash(&address.octets()),
        IpAddr::V6(address) => bytes_hash(&address.octets()),
    }
}

/// FNV-1a over the bytes, then a 64-bit finaliser so every output bit depends on every input
/// bit (FNV alone mixes the last bytes poorly). Fixed, so every process, restart and build
/// agrees (`std`'s hasher may change between Rust releases).
fn bytes_hash(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &byte in bytes {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    mix(hash)
}

/// splitmix64's finaliser (Steele, Lea & Flood, 2014).
fn mix(mut value: u64) -> u64 {
    value = (value ^ (value >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    value = (value ^ (value >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    value ^ (value >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::UpstreamAddress;

    fn servers(weights: &[u32]) -> Vec<UpstreamServer> {
        weights
            .iter()
            .enumerate()
            .map(|(index, &weight)| UpstreamServer {
                address: UpstreamAddress::Tcp(([127, 0, 0, 1], 9001 + index as u16).into()),
                weight,
                backup: false,
            })
            .collect()
    }

    #[test]
    fn smooth_weighted_spreads_the_heavy_servers_turns() {
        let servers = servers(&[5, 1, 1]);
        let mut current = vec![0; 3];
        let order: Vec<usize> = (0..7)
            .map(|_| smooth_weighted(&mut current, &servers, &|_| true).unwrap())
            .collect();
        // nginx's documented sequence for weights 5, 1, 1.
        assert_eq!(order, [0, 0, 1, 0, 2, 0, 0]);
    }

    #[test]
    fn smooth_weighted_shares_among_the_eligible_only() {
        let servers = servers(&[3, 1, 2]);
        let mut current = vec![0; 3];
        let mut counts = [0; 3];
        for _ in 0..400 {
            counts[smooth_weighted(&mut current, &servers, &|id| id != 2).unwrap()] += 1;
        }
        assert_eq!(counts, [300, 100, 0]);
        assert_eq!(smooth_weighted(&mut current, &servers, &|_| false), None);
    }

    #[test]
    fn least_loaded_weighs_in_flight_by_weight() {
        let servers = servers(&[1, 2]);
        let mut loads = [2, 3];
        // 3/2 < 2/1.
        assert_eq!(
            least_loaded(&servers, &|id| loads[id], 0, &|_| true),
            Some(1)
        );
        loads[1] = 4;
        // 4/2 == 2/1: the tie goes to the first from `start`.
        assert_eq!(
            least_loaded(&servers, &|id| loads[id], 0, &|_| true),
            Some(0)
        );
        assert_eq!(
            least_loaded(&servers, &|id| loads[id], 1, &|_| true),
            Some(1)
        );
        assert_eq!(
            least_loaded(&servers, &|id| loads[id], 0, &|id| id == 1),
            Some(1)
        );
    }

    #[test]
    fn rendezvous_shares_keys_by_weight() {
        let servers = servers(&[1, 2, 1]);
        let seeds = server_seeds(&servers);
        let mut counts = [0u32; 3];
        for key in 0..40_000u32 {
            let hash = bytes_hash(&key.to_be_bytes());
            counts[rendezvous(&servers, &seeds, hash, &|_| true).unwrap()] += 1;
        }
        // Expected 10k, 20k, 10k; 3% slack is about six standard deviations.
        for (count, expected) in counts.iter().zip([10_000, 20_000, 10_000]) {
            assert!(count.abs_diff(expected) < 600, "{counts:?}");
        }
    }

    #[test]
    fn a_server_leaving_moves_only_its_own_keys() {
        let servers = servers(&[1, 1, 1, 1]);
        let seeds = server_seeds(&servers);
        let mut moved_elsewhere = 0;
        for key in 0..10_000u32 {
            let hash = bytes_hash(&key.to_be_bytes());
            let before = rendezvous(&servers, &seeds, hash, &|_| true).unwrap();
            let after = rendezvous(&servers, &seeds, hash, &|id| id != 2).unwrap();
            if before == 2 {
                moved_elsewhere += 1;
            } else {
                assert_eq!(before, after, "key {key} moved though its server stayed");
            }
        }
        assert!(
            (2_000..3_000).contains(&moved_elsewhere),
            "{moved_elsewhere}"
        );
    }

    #[test]
    fn seeds_follow_addresses_not_positions() {
        let listed = servers(&[1, 1, 1]);
        let mut reordered = listed.clone();
        reordered.reverse();
        let (seeds, reseeded) = (server_seeds(&listed), server_seeds(&reordered));
        for key in 0..1_000u32 {
            let hash = bytes_hash(&key.to_be_bytes());
            let first = rendezvous(&listed, &seeds, hash, &|_| true).unwrap();
            let second = rendezvous(&reordered, &reseeded, hash, &|_| true).unwrap();
            assert_eq!(listed[first].address, reordered[second].address);
        }
    }

    #[test]
    fn client_addresses_hash_whole_and_mapped_ipv4_as_ipv4() {
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let b: IpAddr = "192.0.2.2".parse().unwrap();
        let mapped: IpAddr = "::ffff:192.0.2.1".parse().unwrap();
        assert_ne!(address_hash(a), address_hash(b));
        assert_eq!(address_hash(a), address_hash(mapped));
    }
}
