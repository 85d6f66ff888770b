//! The upstream pools' shared state: which server a request goes to, and what the pools have
//! learnt about their servers. Shared by every loop, thread and connection of a generation
//! (of one process: under `mp` each worker learns on its own, as nginx workers do without a
//! shared zone).
//!
//! Owns: `Upstreams` (one `Pool` per `config::UpstreamPool`), choosing a server for a request,
//! passive and active health, their metrics.
//! Must not touch: the proxy's sockets and connections (the engines own those; `conn` asks
//! here which address to connect to and says how the attempt went).
//!
//! Files: `pool` (a pool, `choose`, `report`, `Pick`), `choosing` (the balance methods),
//! `health` (a server's health state machine), `metrics` (their Prometheus text).

mod choosing;
mod health;
mod metrics;
mod pool;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use crate::config::UpstreamPool;

pub use pool::{Pick, Pool};

/// Every pool of a generation, in `Config::upstreams` order.
#[derive(Debug, Default)]
pub struct Upstreams {
    pools: Vec<Arc<Pool>>,
}

impl Upstreams {
    #[must_use]
    pub fn new(pools: &[UpstreamPool]) -> Upstreams {
        Upstreams {
            pools: pools
                .iter()
                .map(|settings| Arc::new(Pool::new(settings.clone())))
                .collect(),
        }
    }

    /// The pool `ProxySettings::pool` names.
    ///
    /// # Panics
    /// `index` is not a pool of this generation (the loader checks every reference).
    #[must_use]
    pub fn pool(&self, index: usize) -> &Arc<Pool> {
        &self.pools[index]
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<Pool>> {
        self.pools.iter()
    }

    /// Append the `ampd_upstream_*` metrics (Prometheus text) of every pool to `out`; nothing
    /// when there are no pools.
    pub fn render_metrics(&self, out: &mut String) {
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
