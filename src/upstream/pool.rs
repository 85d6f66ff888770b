//! One pool: its servers' shared state, choosing the server for each attempt of a request, and
//! what the attempts report back.
//!
//! Owns: `Pool`, `Pick`, the order servers are considered in (primaries, then backups, then,
//! when every server is down, one anyway). Must not touch: sockets; the balance methods'
//! arithmetic (`choosing`); health's state machine (`health`).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use super::choosing::Chooser;
use super::fastcgi::AppValues;
use super::health::{Availability, ServerHealth};
use super::probe::ProbeError;
use super::{BalanceKey, Report, ServerId};
use crate::config::{UpstreamAddress, UpstreamPool};

/// One pool: its settings and the state of its servers.
#[derive(Debug)]
pub struct Pool {
    settings: UpstreamPool,
    pub(super) servers: Vec<ServerHealth>,
    chooser: Chooser,
    /// Health times are milliseconds since this instant.
    epoch: Instant,
}

/// The server chosen for one attempt; counts as in flight on it until dropped.
#[derive(Debug)]
pub struct Pick {
    pool: Arc<Pool>,
    pub id: ServerId,
}

impl Pick {
    #[must_use]
    pub fn address(&self) -> &UpstreamAddress {
        &self.pool.settings.servers[self.id].address
    }

    #[must_use]
    pub fn pool(&self) -> &Arc<Pool> {
        &self.pool
    }
}

impl Drop for Pick {
    fn drop(&mut self) {
        self.pool.servers[self.id]
            .in_flight
            .fetch_sub(1, Ordering::Relaxed);
    }
}

/// The servers a request may go to, in the order they are considered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tier {
    Primary,
    /// `backup = true`: only once no primary can take the request.
    Backup,
}

impl Pool {
    pub(super) fn new(settings: UpstreamPool) -> Pool {
        let servers = settings
            .servers
            .iter()
            .map(|_| ServerHealth::default())
            .collect();
        let chooser = Chooser::new(settings.balance, &settings.servers);
        Pool {
            settings,
            servers,
            chooser,
            epoch: Instant::now(),
        }
    }

    #[must_use]
    pub fn settings(&self) -> &UpstreamPool {
        &self.settings
    }

    /// `now` on the health clock.
    pub(super) fn millis(&self, now: Instant) -> u64 {
        u64::try_from(now.saturating_duration_since(self.epoch).as_millis()).unwrap_or(u64::MAX)
    }

    /// The server for the next attempt of a request, skipping those it has `tried`; `None`
    /// when every server has been tried.
    pub fn choose(self: &Arc<Self>, key: BalanceKey<'_>, tried: &[ServerId]) -> Option<Pick> {
        self.choose_at(key, tried, Instant::now())
    }

    /// `choose` at `now`.
    ///
    /// Primaries that are up come first, then backups that are up. When every untried server
    /// is down, one is tried anyway (primaries first), by the same balance method: a server
    /// marked down is a guess from past failures, and a request refused without an attempt
    /// fails for certain, while the attempt may find the servers back (a pool restarted at
    /// once, a check not yet run). nginx answers 502 "no live upstreams" at once instead,
    /// except for a pool of one server, which it always tries; ampd treats every pool like
    /// that one server, and `tries` bounds the cost of the guess.
    pub(super) fn choose_at(
        self: &Arc<Self>,
        key: BalanceKey<'_>,
        tried: &[ServerId],
        now: Instant,
    ) -> Option<Pick> {
        let now_ms = self.millis(now);
        let key_hash = self.chooser.key_hash(key);
        let in_flight = |id: ServerId| self.servers[id].in_flight.load(Ordering::Relaxed);
        let in_tier = |id: ServerId, tier: Tier| {
            let backup = self.settings.servers[id].backup;
            !tried.contains(&id) && backup == (tier == Tier::Backup)
        };
        for tier in [Tier::Primary, Tier::Backup] {
            // A probe another request claimed first (rare): skip that server this time.
            let mut lost_probes: Vec<ServerId> = Vec::new();
            loop {
                let eligible = |id: ServerId| {
                    in_tier(id, tier)
                        && !lost_probes.contains(&id)
                        && self.servers[id].availability(now_ms) != Availability::Down
                };
                let chosen =
                    self.chooser
                        .select(&self.settings.servers, &in_flight, key_hash, &eligible);
                let Some(id) = chosen else { break };
                if self.servers[id].claim(now_ms, &self.settings.passive) {
                    return Some(self.pick(id));
                }
                lost_probes.push(id);
            }
        }
        for tier in [Tier::Primary, Tier::Backup] {
            let eligible = |id: ServerId| in_tier(id, tier);
            if let Some(id) =
                self.chooser
                    .select(&self.settings.servers, &in_flight, key_hash, &eligible)
            {
                return Some(self.pick(id));
            }
        }
        None
    }

    fn pick(self: &Arc<Self>, id: ServerId) -> Pick {
        self.servers[id].in_flight.fetch_add(1, Ordering::Relaxed);
        Pick {
            pool: self.clone(),
            id,
        }
    }

    /// How an attempt on `id` went (passive health).
    pub fn report(&self, id: ServerId, report: Report) {
        self.report_at(id, report, Instant::now());
    }

    /// `report` at `now`.
    pub(super) fn report_at(&self, id: ServerId, report: Report, now: Instant) {
        let server = &self.servers[id];
        let transition = match report {
            Report::Success => server.succeeded(),
            Report::Failure => server.failed(&self.settings.passive, now, self.millis(now)),
        };
        if let Some(transition) = transition {
            transition.log(&self.settings.name, &self.server_name(id));
        }
    }

    /// An active check's verdict on `id`: `Err` says why it failed.
    pub(super) fn record_check(&self, id: ServerId, verdict: Result<(), String>) {
        let Some(check) = &self.settings.active else {
            return;
        };
        if let Some(transition) = self.servers[id].checked(verdict, check.rise, check.fall) {
            transition.log(&self.settings.name, &self.server_name(id));
        }
    }

    /// Idle connections to keep to `id` (per loop, as `keepalive`): the pool's `keepalive`,
    /// lowered to the `FCGI_MAX_CONNS` a FastCGI application said it accepts. php-fpm, for one,
    /// does not say, and then `keepalive` stands.
    #[must_use]
    pub fn keepalive_for(&self, id: ServerId) -> usize {
        let keepalive = self.settings.keepalive;
        match self.servers[id].fastcgi.max_conns() {
            Some(max_conns) => keepalive.min(usize::try_from(max_conns).unwrap_or(usize::MAX)),
            None => keepalive,
        }
    }

    /// What an `FCGI_GET_VALUES` exchange with `id` gave (`checks` calls it for checks and for
    /// learning alike).
    pub(super) fn record_values(&self, id: ServerId, result: &Result<AppValues, ProbeError>) {
        self.servers[id]
            .fastcgi
            .record(result, &self.settings.name, &self.server_name(id));
    }

    /// A server's name in logs and metrics: its address.
    pub(super) fn server_name(&self, id: ServerId) -> String {
        self.settings.servers[id].address.to_string()
    }

    /// Whether `id` serves now, as far as this process knows.
    #[cfg(test)]
    fn is_up(&self, id: ServerId, now: Instant) -> bool {
        self.servers[id].is_up(self.millis(now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Balance, UpstreamServer};
    use std::time::Duration;

    fn server(port: u16, weight: u32) -> UpstreamServer {
        UpstreamServer {
            address: UpstreamAddress::Tcp(([127, 0, 0, 1], port).into()),
            weight,
            backup: false,
        }
    }

    fn backup(port: u16) -> UpstreamServer {
        UpstreamServer {
            backup: true,
            ..server(port, 1)
        }
    }

    fn pool(balance: Balance, servers: Vec<UpstreamServer>) -> Arc<Pool> {
        let mut settings = UpstreamPool::new("app".into(), servers);
        settings.balance = balance;
        settings.passive.max_fails = 1;
        settings.passive.fail_timeout = Duration::from_secs(10);
        Arc::new(Pool::new(settings))
    }

    fn key(uri: &str) -> BalanceKey<'_> {
        BalanceKey {
            client: [10, 0, 0, 1].into(),
            uri,
        }
    }

    fn client(address: [u8; 4]) -> BalanceKey<'static> {
        BalanceKey {
            client: address.into(),
            uri: "/",
        }
    }

    fn counts(pool: &Arc<Pool>, picks: usize) -> Vec<usize> {
        let mut counts = vec![0; pool.servers.len()];
        for _ in 0..picks {
            counts[pool.choose(key("/"), &[]).unwrap().id] += 1;
        }
        counts
    }

    #[test]
    fn round_robin_picks_follow_weights() {
        let pool = pool(
            Balance::RoundRobin,
            vec![server(1, 5), server(2, 1), server(3, 2)],
        );
        assert_eq!(counts(&pool, 800), [500, 100, 200]);
    }

    #[test]
    fn a_retry_goes_to_another_server() {
        let pool = pool(Balance::RoundRobin, vec![server(1, 1), server(2, 1)]);
        for _ in 0..4 {
            let first = pool.choose(key("/"), &[]).unwrap().id;
            let second = pool.choose(key("/"), &[first]).unwrap().id;
            assert_ne!(first, second);
            assert!(pool.choose(key("/"), &[first, second]).is_none());
        }
    }

    #[test]
    fn least_connections_goes_where_fewest_are_in_flight_per_weight() {
        let pool = pool(
            Balance::LeastConnections,
            vec![server(1, 1), server(2, 2), server(3, 1)],
        );
        // With every pick held, the load ends up in proportion to the weights.
        let held: Vec<Pick> = (0..40)
            .map(|_| pool.choose(key("/"), &[]).unwrap())
            .collect();
        let in_flight: Vec<u64> = pool
            .servers
            .iter()
            .map(|server| server.in_flight.load(Ordering::Relaxed))
            .collect();
        assert_eq!(in_flight, [10, 20, 10]);
        // Releasing picks on one server makes it the least loaded.
        let (on_first, others): (Vec<Pick>, Vec<Pick>) =
            held.into_iter().partition(|pick| pick.id == 0);
        drop(on_first);
        assert_eq!(pool.servers[0].in_flight.load(Ordering::Relaxed), 0);
        for _ in 0..10 {
            assert_eq!(pool.choose(key("/"), &[]).unwrap().id, 0);
        }
        drop(others);
    }

    #[test]
    fn least_connections_breaks_ties_round_robin() {
        let pool = pool(
            Balance::LeastConnections,
            vec![server(1, 1), server(2, 1), server(3, 1)],
        );
        // Nothing held: every server is tied at zero, each gets a third.
        assert_eq!(counts(&pool, 300), [100, 100, 100]);
    }

    #[test]
    fn hash_keeps_a_key_on_its_server_and_spreads_keys() {
        let servers = || vec![server(1, 1), server(2, 1), server(3, 1)];
        let by_uri = pool(Balance::Uri, servers());
        let by_client = pool(Balance::ClientAddress, servers());
        let (mut uri_used, mut client_used) = ([false; 3], [false; 3]);
        for n in 0..60u8 {
            let uri = format!("/item/{n}");
            let first = by_uri.choose(key(&uri), &[]).unwrap().id;
            assert_eq!(
                by_uri.choose(key(&uri), &[]).unwrap().id,
                first,
                "{uri} moved"
            );
            uri_used[first] = true;
            let address = [198, 51, 100, n];
            let first = by_client.choose(client(address), &[]).unwrap().id;
            assert_eq!(
                by_client.choose(client(address), &[]).unwrap().id,
                first,
                "{address:?} moved"
            );
            client_used[first] = true;
        }
        assert_eq!((uri_used, client_used), ([true; 3], [true; 3]));
    }

    #[test]
    fn hash_moves_only_the_keys_of_a_server_that_goes_down() {
        let pool = pool(
            Balance::Uri,
            vec![server(1, 1), server(2, 1), server(3, 1), server(4, 1)],
        );
        let uris: Vec<String> = (0..400).map(|n| format!("/{n}")).collect();
        let before: Vec<ServerId> = uris
            .iter()
            .map(|uri| pool.choose(key(uri), &[]).unwrap().id)
            .collect();
        pool.report(1, Report::Failure);
        for (uri, &was) in uris.iter().zip(&before) {
            let now = pool.choose(key(uri), &[]).unwrap().id;
            if was == 1 {
                assert_ne!(now, 1);
            } else {
                assert_eq!(now, was, "{uri} moved though its server stayed up");
            }
        }
        // A retry of a key goes to its second choice, the same every time.
        let retry = pool.choose(key("/7"), &[before[7]]).unwrap().id;
        assert_eq!(pool.choose(key("/7"), &[before[7]]).unwrap().id, retry);
    }

    #[test]
    fn backups_serve_only_while_every_primary_is_down() {
        let pool = pool(
            Balance::RoundRobin,
            vec![server(1, 1), backup(2), server(3, 1)],
        );
        assert_eq!(counts(&pool, 10), [5, 0, 5]);
        pool.report(0, Report::Failure);
        assert_eq!(counts(&pool, 10), [0, 0, 10]);
        pool.report(2, Report::Failure);
        assert_eq!(counts(&pool, 10), [0, 10, 0]);
        // Primaries tried for this request count as unavailable to it.
        let fresh = self::pool(Balance::RoundRobin, vec![server(1, 1), backup(2)]);
        assert_eq!(fresh.choose(key("/"), &[0]).unwrap().id, 1);
        pool.report(0, Report::Success);
        assert_eq!(counts(&pool, 10), [10, 0, 0]);
    }

    #[test]
    fn when_every_server_is_down_one_is_tried_anyway() {
        let pool = pool(
            Balance::RoundRobin,
            vec![server(1, 1), server(2, 1), backup(3)],
        );
        let now = Instant::now();
        for id in 0..3 {
            pool.report_at(id, Report::Failure, now);
        }
        let first = pool.choose_at(key("/"), &[], now).unwrap().id;
        assert_ne!(first, 2, "primaries are tried first");
        let second = pool.choose_at(key("/"), &[first], now).unwrap().id;
        assert_ne!(second, 2);
        assert_eq!(pool.choose_at(key("/"), &[0, 1], now).unwrap().id, 2);
        assert!(pool.choose_at(key("/"), &[0, 1, 2], now).is_none());
    }

    #[test]
    fn a_failed_server_is_skipped_then_probed_after_fail_timeout() {
        let pool = pool(Balance::RoundRobin, vec![server(1, 1), server(2, 1)]);
        let start = Instant::now();
        pool.report_at(0, Report::Failure, start);
        assert!(!pool.is_up(0, start));
        for _ in 0..10 {
            assert_eq!(pool.choose_at(key("/"), &[], start).unwrap().id, 1);
        }
        let later = start + Duration::from_secs(9);
        assert_eq!(pool.choose_at(key("/"), &[], later).unwrap().id, 1);
        // fail_timeout over: one request probes it, the others keep away until it answers.
        let after = start + Duration::from_secs(10);
        let ids: Vec<ServerId> = (0..4)
            .map(|_| pool.choose_at(key("/"), &[], after).unwrap().id)
            .collect();
        assert_eq!(ids.iter().filter(|&&id| id == 0).count(), 1, "{ids:?}");
        pool.report_at(0, Report::Success, after);
        assert!(pool.is_up(0, after));
        assert_eq!(counts(&pool, 10), [5, 5]);
    }

    #[test]
    fn max_fails_counts_within_fail_window() {
        let mut settings = UpstreamPool::new("app".into(), vec![server(1, 1), server(2, 1)]);
        settings.passive.max_fails = 2;
        settings.passive.fail_window = Duration::from_secs(5);
        let pool = Arc::new(Pool::new(settings));
        let start = Instant::now();
        pool.report_at(0, Report::Failure, start);
        pool.report_at(0, Report::Failure, start + Duration::from_secs(6));
        assert!(pool.is_up(0, start + Duration::from_secs(6)));
        pool.report_at(0, Report::Failure, start + Duration::from_secs(7));
        assert!(!pool.is_up(0, start + Duration::from_secs(7)));
    }

    #[test]
    fn keepalive_for_a_server_is_lowered_to_its_fcgi_max_conns() {
        let mut settings = UpstreamPool::new("php".into(), vec![server(1, 1), server(2, 1)]);
        settings.keepalive = 8;
        let pool = Pool::new(settings);
        assert_eq!((pool.keepalive_for(0), pool.keepalive_for(1)), (8, 8));
        let said = |max_conns| {
            Ok(AppValues {
                max_conns: Some(max_conns),
                ..AppValues::default()
            })
        };
        pool.record_values(0, &said(3));
        pool.record_values(1, &said(100));
        assert_eq!((pool.keepalive_for(0), pool.keepalive_for(1)), (3, 8));
        // An answer without FCGI_MAX_CONNS (php-fpm's) leaves the setting.
        pool.record_values(0, &Ok(AppValues::default()));
        assert_eq!(pool.keepalive_for(0), 8);
    }

    #[test]
    fn picks_count_in_flight_until_dropped() {
        let pool = pool(Balance::RoundRobin, vec![server(1, 1)]);
        let pick = pool.choose(key("/"), &[]).unwrap();
        assert_eq!(
            pick.address(),
            &UpstreamAddress::Tcp(([127, 0, 0, 1], 1).into())
        );
        assert_eq!(pool.servers[0].in_flight.load(Ordering::Relaxed), 1);
        drop(pick);
        assert_eq!(pool.servers[0].in_flight.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn threads_choosing_at_once_keep_the_counts_straight() {
        for balance in [
            Balance::RoundRobin,
            Balance::LeastConnections,
            Balance::ClientAddress,
        ] {
            let pool = pool(balance, vec![server(1, 3), server(2, 1), backup(3)]);
            std::thread::scope(|scope| {
                for thread in 0..4u8 {
                    let pool = &pool;
                    scope.spawn(move || {
                        for n in 0..2_000u16 {
                            let [high, low] = n.to_be_bytes();
                            let pick = pool.choose(client([10, thread, high, low]), &[]).unwrap();
                            pool.report(pick.id, Report::Success);
                        }
                    });
                }
            });
            let attempts: u64 = pool
                .servers
                .iter()
                .map(|server| server.successes.load(Ordering::Relaxed))
                .sum();
            assert_eq!(attempts, 8_000, "{balance:?}");
            assert!(pool
                .servers
                .iter()
                .all(|server| server.in_flight.load(Ordering::Relaxed) == 0));
            assert_eq!(pool.servers[2].successes.load(Ordering::Relaxed), 0);
        }
    }
}
