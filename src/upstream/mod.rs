//! The upstream pools' shared state: which server a request goes to, and what the pools have
//! learnt about their servers. Shared by every loop, thread and connection of a generation.
//!
//! Owns: `Upstreams` (one `Pool` per `config::UpstreamPool`) and choosing a server for a
//! request.
//! Must not touch: sockets and connections (the engines own those; `conn` asks here which
//! address to connect to and says how the attempt went).

use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use crate::config::{UpstreamAddress, UpstreamPool};

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

/// One pool: its settings and the state of its servers.
#[derive(Debug)]
pub struct Pool {
    settings: UpstreamPool,
    servers: Vec<Server>,
    next: AtomicUsize,
}

#[derive(Debug, Default)]
struct Server {
    /// Requests on this server now.
    in_flight: AtomicU64,
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
}

impl Drop for Pick {
    fn drop(&mut self) {
        self.pool.servers[self.id]
            .in_flight
            .fetch_sub(1, Ordering::Relaxed);
    }
}

impl Pool {
    fn new(settings: UpstreamPool) -> Pool {
        let servers = settings.servers.iter().map(|_| Server::default()).collect();
        Pool {
            settings,
            servers,
            next: AtomicUsize::new(0),
        }
    }

    #[must_use]
    pub fn settings(&self) -> &UpstreamPool {
        &self.settings
    }

    /// The server for the next attempt of a request, skipping those it has `tried`; `None`
    /// when every server has been tried.
    pub fn choose(self: &Arc<Self>, _key: BalanceKey<'_>, tried: &[ServerId]) -> Option<Pick> {
        let count = self.servers.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let id = (0..count)
            .map(|offset| (start + offset) % count)
            .find(|id| !tried.contains(id))?;
        self.servers[id].in_flight.fetch_add(1, Ordering::Relaxed);
        Some(Pick {
            pool: self.clone(),
            id,
        })
    }

    /// How an attempt on `id` went (passive health).
    pub fn report(&self, _id: ServerId, _report: Report) {}
}
