//! The upstream pools' shared state: which server a request goes to, and what the pools have
//! learnt about their servers. Shared by every loop, thread and connection of a generation
//! (of one process: under `mp` each worker learns on its own, as nginx workers do without a
//! shared zone).
//!
//! Owns: `Upstreams` (one `Pool` per `config::UpstreamPool`), choosing a server for a request,
//! passive and active health, a FastCGI application's limits (`FCGI_GET_VALUES`), their
//! metrics.
//! Must not touch: the proxy's sockets and connections (the engines own those; `conn` asks
//! here which address to connect to and says how the attempt went). The only sockets made
//! here are the active checks' own (`probe`).
//!
//! Files: `pool` (a pool, `choose`, `report`, `Pick`), `choosing` (the balance methods),
//! `health` (a server's health state machine), `probe` (one active check's request),
//! `fastcgi` (the `FCGI_GET_VALUES` exchange and what it learnt), `checks` (the thread that
//! runs checks and FastCGI learning, started per process), `metrics` (their Prometheus text).

mod checks;
mod choosing;
mod fastcgi;
mod health;
mod metrics;
mod pool;
mod probe;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use crate::config::UpstreamPool;
use checks::HealthChecks;

pub use pool::{Pick, Pool};

/// Every pool of a generation, in `Config::upstreams` order.
#[derive(Debug, Default)]
pub struct Upstreams {
    /// Shared with the active checks' thread, which holds it weakly.
    pools: Arc<[Arc<Pool>]>,
    checks: HealthChecks,
}

impl Upstreams {
    /// The pools of one generation. Starts no thread: the active checks start on first use in
    /// the process that serves (`start_health_checks`).
    #[must_use]
    pub fn new(pools: &[UpstreamPool]) -> Upstreams {
        let pools: Arc<[Arc<Pool>]> = pools
            .iter()
            .map(|settings| Arc::new(Pool::new(settings.clone())))
            .collect();
        let checks = HealthChecks::new(&pools);
        Upstreams { pools, checks }
    }

    /// The pool `ProxySettings::pool` names. The first call in a process starts its active
    /// health checks.
    ///
    /// # Panics
    /// `index` is not a pool of this generation (the loader checks every reference).
    #[must_use]
    pub fn pool(&self, index: usize) -> &Arc<Pool> {
        self.checks.ensure(&self.pools);
        &self.pools[index]
    }

    /// Start this process's active health checks now, unless they run already or no pool has
    /// a `health_check` (a serving process may call it once it is set up, so that checks do
    /// not wait for the first proxied request; `pool` and `render_metrics` do it otherwise).
    /// The thread ends when this `Upstreams` is dropped.
    pub fn start_health_checks(&self) {
        self.checks.ensure(&self.pools);
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<Pool>> {
        self.pools.iter()
    }

    /// Append the `ampd_upstream_*` metrics (Prometheus text) of every pool to `out`; nothing
    /// when there are no pools.
    pub fn render_metrics(&self, out: &mut String) {
        self.checks.ensure(&self.pools);
        metrics::render(&self.pools, out, Instant::now());
    }
}

/// A server's place in its pool.
pub type ServerId = usize;

/// What a request is balanced by.
#[derive(Clone, Copy, Debug)]
pub struct BalanceKey<'a> {
    pub client: IpAddr,
    pub uri: &'a str,
}

/// How an attempt on a server went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Report {
    /// A response head arrived.
    Success,
    /// Refused, reset, timed out, or an invalid response.
    Failure,
}
