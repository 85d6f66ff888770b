//! The reverse proxy's settings: `[upstream.NAME]` pools of servers and what a proxy location
//! adds to its `LocationSettings`.
//!
//! Owns: the typed settings and their defaults (nginx's `upstream` block and `proxy_*`
//! directives are the model; their defaults where ampd has no reason to differ).
//! Must not touch: sockets, the state of servers (`crate::upstream` keeps that).

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::AddressRange;

/// Where an upstream server listens.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum UpstreamAddress {
    /// Resolved once, when the configuration is loaded (no resolver on the loops).
    Tcp(SocketAddr),
    /// A unix stream socket (`unix:/run/app.sock`).
    Unix(PathBuf),
}

impl fmt::Display for UpstreamAddress {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UpstreamAddress::Tcp(address) => write!(formatter, "{address}"),
            UpstreamAddress::Unix(path) => write!(formatter, "unix:{}", path.display()),
        }
    }
}

/// One server of a pool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpstreamServer {
    pub address: UpstreamAddress,
    /// Its share of requests relative to the others (round-robin and least-connections).
    pub weight: u32,
    /// Used only while every non-backup server is down.
    pub backup: bool,
}

/// How a pool chooses the server for a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Balance {
    /// Smooth weighted round-robin (nginx's default).
    RoundRobin,
    /// The server with the fewest requests in flight relative to its weight.
    LeastConnections,
    /// A hash of the client address: one client keeps its server while the pool is unchanged.
    ClientAddress,
    /// A hash of the request target: one URI keeps its server (upstream caches).
    Uri,
}

/// Passive health: failures of real requests take a server out for a while.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PassiveHealth {
    /// Failures within `fail_window` that mark a server down; 0 switches passive health off.
    pub max_fails: u32,
    pub fail_window: Duration,
    /// How long a server marked down is skipped before it gets a request again.
    pub fail_timeout: Duration,
}

/// Active health: a periodic request to every server, whatever the traffic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActiveHealth {
    /// Path requested with `GET`.
    pub path: String,
    pub interval: Duration,
    /// For the whole check: connect, send, and the response head.
    pub timeout: Duration,
    /// The status a healthy server answers.
    pub expect: u16,
    /// Consecutive passes that bring a down server back.
    pub rise: u32,
    /// Consecutive failures that take a server down.
    pub fall: u32,
}

/// What a pool's servers speak; set by the locations that use it (one protocol per pool).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpstreamProtocol {
    /// HTTP/1.1 (`proxy_pass`).
    Http,
    /// FastCGI (`fastcgi_pass`): connections carry one request at a time, `FCGI_KEEP_CONN`
    /// when `keepalive` is above 0; active health checks ask `FCGI_GET_VALUES`.
    FastCgi,
}

/// `[upstream.NAME]`: servers and how requests are spread over them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpstreamPool {
    /// The table's name, or for a pool implied by `proxy_pass = "http://ADDRESS"`, the address.
    pub name: String,
    /// At least one.
    pub servers: Vec<UpstreamServer>,
    pub protocol: UpstreamProtocol,
    pub balance: Balance,
    /// Idle keep-alive connections kept per loop and server address (0: a connection per request).
    pub keepalive: usize,
    /// An idle pooled connection older than this is closed.
    pub keepalive_timeout: Duration,
    pub connect_timeout: Duration,
    /// Longest the upstream may take no request bytes while some are waiting.
    pub send_timeout: Duration,
    /// Longest the upstream may send no response bytes while the exchange waits for them (also
    /// the idle limit of a WebSocket tunnel).
    pub read_timeout: Duration,
    /// Servers tried for one request: a retry goes to the next server when the request is
    /// idempotent and nothing has been sent to the client yet.
    pub tries: u32,
    pub passive: PassiveHealth,
    pub active: Option<ActiveHealth>,
}

impl UpstreamPool {
    /// A pool of `servers` with the defaults (those of nginx's `proxy_*` directives, keep-alive
    /// on).
    #[must_use]
    pub fn new(name: String, servers: Vec<UpstreamServer>) -> UpstreamPool {
        UpstreamPool {
            name,
            servers,
            protocol: UpstreamProtocol::Http,
            balance: Balance::RoundRobin,
            keepalive: 32,
            keepalive_timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(5),
            send_timeout: Duration::from_secs(60),
            read_timeout: Duration::from_secs(60),
            tries: 2,
            passive: PassiveHealth {
                max_fails: 1,
                fail_window: Duration::from_secs(10),
                fail_timeout: Duration::from_secs(10),
            },
            active: None,
        }
    }
}

/// The `Host` header sent to the upstream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProxyHost {
    /// The client's `Host` (what an application behind a proxy usually wants).
    Client,
    /// The chosen server's address (`127.0.0.1:9001`; `localhost` for a unix socket).
    Upstream,
    Literal(String),
}

/// What a `handler = "proxy"` location does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProxySettings {
    /// Index into `Config::upstreams`.
    pub pool: usize,
    /// The path part of `proxy_pass`: replaces the location's prefix in the target sent
    /// upstream (nginx's `proxy_pass http://host/prefix/`). `None`: the target as the client
    /// sent it.
    pub path: Option<String>,
    pub host: ProxyHost,
    /// Tunnel `Upgrade: websocket` after the upstream's `101` (otherwise `Upgrade` is dropped).
    pub websocket: bool,
    /// Honour `X-Accel-Redirect` (serve an internal location instead of the upstream's body).
    pub x_accel_redirect: bool,
    /// Honour `X-Sendfile`, for files below this directory only; `None`: off.
    pub x_sendfile_root: Option<PathBuf>,
    /// Clients whose `X-Forwarded-For` / `Forwarded` chain is kept and appended to; from anyone
    /// else the chain is replaced (a client could claim any address).
    pub forwarded_trust: Vec<AddressRange>,
    /// Pass request fields whose names hold `_` (`underscores_in_headers`, nginx's directive of
    /// that name); off, they stay behind.
    pub underscores: bool,
}

impl ProxySettings {
    /// A location proxying to pool `pool` with the defaults.
    #[must_use]
    pub fn new(pool: usize) -> ProxySettings {
        ProxySettings {
            pool,
            path: None,
            host: ProxyHost::Client,
            websocket: false,
            x_accel_redirect: true,
            x_sendfile_root: None,
            forwarded_trust: Vec::new(),
            underscores: false,
        }
    }
}
