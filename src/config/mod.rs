//! The server's settings: one typed struct that every engine reads.
//!
//! Owns: `Config` and its defaults. Two things fill it: the command line (`ampd serve DIR`,
//! `src/cli/serve.rs`) and the TOML file (`ampd run -c FILE`, `load.rs`, with site → location
//! inheritance in `merge.rs`). Nothing downstream knows which one did.
//! Must not touch: sockets, threads. (`load` reads the file, checks that roots exist and
//! resolves upstream host names once, `pools.rs`; nothing else here touches the disk or the
//! network.)
//! Sources: Abyss §3 (per-server and per-directory sections); nginx `merge_loc_conf`.

mod applications;
mod blocks;
pub mod compression;
mod compression_keys;
mod error_page_keys;
pub mod error_pages;
pub mod gateway;
mod gateway_keys;
mod header_keys;
pub mod header_rules;
pub mod http2;
mod http2_keys;
pub mod load;
mod merge;
mod negotiation_keys;
mod pool_table;
mod pools;
mod proxy_keys;
mod proxy_protocol;
mod raw;
pub mod routing;
mod routing_keys;
mod targets;
mod text;
pub mod tls;
mod tls_keys;
mod types_keys;
pub mod upstream;
mod warnings;

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub use gateway::{Application, CgiLimits, CgiSettings, FastCgiSettings, ScriptSettings};
pub use load::{check_file, load_file, pid_file_setting, ConfigError};
pub use routing::{Return, ReturnBody, TryFiles, TryLast};
pub use text::{
    missing_file_hint, parse_duration, parse_listen, parse_size, plain, size_hint, LISTEN_FORMS,
};
pub use tls::{
    AcmeChallenge, AcmeSettings, CertificateFiles, CertificateSource, ClientCertificates, Hsts,
    Listen, ListenAddress, MinVersion, SiteTls, TlsServer,
};
pub use upstream::{
    ActiveHealth, Balance, PassiveHealth, ProxyHost, ProxySettings, UpstreamAddress, UpstreamPool,
    UpstreamProtocol, UpstreamServer,
};
pub use warnings::warnings;

/// Which concurrency architecture serves connections (Flash §3, JAWS §3). Every variant runs the
/// same `conn` and `content` code; only who owns threads, processes and caches differs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    /// One thread, one epoll loop; disk work is done inline and blocks the loop (Flash-SPED).
    Sped,
    /// One epoll loop plus helpers for everything that can block on disk (Flash-AMPED).
    Amped,
    /// A pool of threads, each serving one connection at a time with blocking calls, sharing
    /// one set of caches (Flash-MT, JAWS thread pool).
    Mt,
    /// A thread per connection, up to a cap (JAWS thread-per-connection, Apache worker limits).
    Tpc,
    /// Pre-forked processes, each serving one connection at a time with its own caches, under a
    /// master that restarts them (Flash-MP, Apache prefork).
    Mp,
    /// A proactor on io_uring: batched submissions and completions (JAWS asynchronous dispatch,
    /// AFPA's batching). Falls back to `reactor` where io_uring is unavailable.
    Uring,
    /// One AMPED loop per core, each with its own `SO_REUSEPORT` listener and caches.
    Reactor,
}

impl Arch {
    pub const ALL: [Arch; 7] = [
        Arch::Sped,
        Arch::Amped,
        Arch::Mt,
        Arch::Tpc,
        Arch::Mp,
        Arch::Uring,
        Arch::Reactor,
    ];

    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Arch::Sped => "sped",
            Arch::Amped => "amped",
            Arch::Mt => "mt",
            Arch::Tpc => "tpc",
            Arch::Mp => "mp",
            Arch::Uring => "uring",
            Arch::Reactor => "reactor",
        }
    }

    /// One line for `ampd serve --help`.
    #[must_use]
    pub fn describe(self) -> &'static str {
        match self {
            Arch::Sped => "one event loop, disk work inline (blocks on a page-cache miss)",
            Arch::Amped => "one event loop + helpers for open/stat and paging data in",
            Arch::Mt => {
                "pool of --threads threads (64), blocking, one connection each; shared cache"
            }
            Arch::Tpc => {
                "a thread per connection, at most --threads (2048); the rest wait in backlog"
            }
            Arch::Mp => "--threads pre-forked processes (8), blocking, own caches; master restarts",
            Arch::Uring => "io_uring proactor per core; falls back to reactor where unavailable",
            Arch::Reactor => "one amped loop per core, each with its own SO_REUSEPORT listener",
        }
    }

    #[must_use]
    pub fn from_name(name: &str) -> Option<Arch> {
        Arch::ALL.into_iter().find(|arch| arch.name() == name)
    }

    /// What `threads` means when not set: event loops for `reactor` and `uring` (one per core),
    /// pool threads for `mt`, the most connection threads at once for `tpc`, worker processes
    /// for `mp`; `sped` and `amped` always run one loop.
    #[must_use]
    pub fn default_threads(self, cores: usize) -> usize {
        match self {
            Arch::Sped | Arch::Amped => 1,
            Arch::Reactor | Arch::Uring => cores.max(1),
            // Enough threads that disk-bound requests overlap (nginx's thread pool has 32).
            Arch::Mt => 64,
            // More than the 1,000 concurrent keep-alive clients the test suite opens; past the
            // cap, connections wait in the listen backlog as under Apache's MaxRequestWorkers.
            Arch::Tpc => 2048,
            Arch::Mp => 8,
        }
    }

    /// Whether the architecture's disk work runs on helpers (and so `--helpers` matters).
    #[must_use]
    pub fn uses_helpers(self) -> bool {
        matches!(self, Arch::Amped | Arch::Reactor | Arch::Uring)
    }
}

/// Whether helpers are threads of the server or processes of their own (Flash used processes,
/// for portability to systems without kernel threads).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HelperMode {
    Threads,
    Processes,
}

impl HelperMode {
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            HelperMode::Threads => "threads",
            HelperMode::Processes => "process",
        }
    }

    #[must_use]
    pub fn from_name(name: &str) -> Option<HelperMode> {
        match name {
            "threads" | "thread" => Some(HelperMode::Threads),
            "process" | "processes" => Some(HelperMode::Processes),
            _ => None,
        }
    }
}

/// How static files are found and presented.
#[derive(Clone, Debug)]
pub struct StaticOptions {
    /// The document root, absolute.
    pub root: PathBuf,
    /// Index files tried, in order, for a request ending in `/`.
    pub index: Vec<String>,
    /// Render a listing for a directory without an index file (else `403`).
    pub autoindex: bool,
    /// Serve names starting with `.` (else they look absent: `404`). `/.well-known/` always is.
    pub dotfiles: bool,
    /// Follow symlinks that leave the document root (else refused by `openat2(RESOLVE_BENEATH)`).
    pub follow_symlinks: bool,
    /// `~user` expansion: `None` off; a relative pattern is joined to the user's home directory
    /// (`public_html`), an absolute one has `*` replaced by the user name (Apache's `UserDir`).
    pub userdir: Option<String>,
    /// Serve `.br`/`.gz` siblings chosen by `Accept-Encoding`.
    pub precompressed: bool,
    /// Content negotiation (Apache `MultiViews`): a path that names no file is answered with
    /// the best of its variants beside it (`doc.en.html`, `doc.fr.html` for `/doc`).
    pub multiviews: bool,
    /// With `multiviews`: `406` when no variant is acceptable, rather than the server's
    /// default variant (`negotiation = "strict"`).
    pub strict_negotiation: bool,
    /// Index files ending in one of these are scripts the site runs (its `extension`
    /// locations' suffixes, filled in when the site is built): such an index is routed to its
    /// location, never sent as a file.
    pub script_indexes: Vec<String>,
    /// Index files another location of the site may answer under a directory of this one
    /// (filled in when the site is built, `site::claimed_indexes`): such an index is routed
    /// as `path + name`, so that it is served under the rules of the location its own path
    /// names, never under the directory's.
    pub routed_indexes: Vec<String>,
    /// Extension → `Content-Type` (`[types]`, `types_file`, the built-in table), the
    /// location's `default_type` and `charset`.
    pub types: crate::mime::TypeOptions,
}

impl StaticOptions {
    /// A static location's defaults for `root`: `index.html`, precompressed siblings served,
    /// nothing else turned on.
    #[must_use]
    pub fn new(root: PathBuf) -> StaticOptions {
        StaticOptions {
            root,
            index: vec!["index.html".to_owned()],
            autoindex: false,
            dotfiles: false,
            follow_symlinks: false,
            userdir: None,
            precompressed: true,
            multiviews: false,
            strict_negotiation: false,
            script_indexes: Vec::new(),
            routed_indexes: Vec::new(),
            types: crate::mime::TypeOptions::default(),
        }
    }
}

/// The three Flash caches (§5.2–5.4) and the residency test (§5.7), each of which can be
/// switched off to reproduce Flash's optimisation breakdown (figure 11).
#[derive(Clone, Debug)]
pub struct CacheOptions {
    pub path_cache: bool,
    pub header_cache: bool,
    pub file_cache: bool,
    /// Ask the page cache (`cachestat`, or `mincore`) before an event loop reads or sends file
    /// data itself. Off: every read that is not served from the file cache goes to a helper,
    /// the safe course for Flash's design on a system without `mincore` (§5.7). Only `amped`,
    /// `reactor` and `uring` test; `sped` and the blocking engines read where they are.
    pub residency_test: bool,
    /// Path-translation entries per event loop.
    pub path_cache_entries: u64,
    /// Response heads kept per event loop.
    pub header_cache_entries: u64,
    /// Bytes of file data held in memory per event loop; `None`: 64 MiB, or less to fit under
    /// the process's memory limit (`content::memory`).
    pub file_cache_bytes: Option<u64>,
    /// Upper bound on how long a cached translation is trusted without a fresh `stat`, for
    /// changes that inotify cannot report (watch limit reached, network filesystems).
    pub revalidate_after: Duration,
    /// Bytes of static files compressed on the fly kept per event loop (`content::compressed`);
    /// 0: none kept, each response compresses afresh.
    pub compressed_size: u64,
    /// Static files larger than this are sent plain rather than compressed on the fly: one
    /// compression of a file occupies a helper (or a blocking engine's thread) for its whole
    /// length (lighttpd's `deflate.max-compress-size`).
    pub compressed_max_file: u64,
}

/// The adaptive send path (JAWS §4.3): small bodies from memory by `writev`, larger by `sendfile`.
#[derive(Clone, Debug)]
pub struct SendOptions {
    /// Files up to this size are held in the file cache and written with the head in one
    /// `writev`; larger ones go by `sendfile`. Measured default: see docs/research/benchmarks.md.
    pub sendfile_threshold: u64,
    /// Most bytes one connection may send per turn, so that a fast client of a large file cannot
    /// monopolise its loop.
    pub send_chunk: usize,
}

/// Per-connection limits and timeouts.
#[derive(Clone, Debug)]
pub struct Limits {
    pub max_request_line: usize,
    pub max_head_bytes: usize,
    pub max_headers: usize,
    /// Largest request body read (and discarded) on a static request; past it `413`.
    pub max_body: u64,
    /// More ranges than this in one `Range` header: the header is ignored (CVE-2011-3192).
    pub max_ranges: usize,
    /// Requests served on one connection before it is closed (nginx `keepalive_requests`).
    pub max_requests_per_connection: u32,
    /// Time to receive a whole request head once its first byte arrived.
    pub header_timeout: Duration,
    /// Time an idle persistent connection is kept.
    pub keepalive_timeout: Duration,
    /// Time a response may make no progress before the connection is dropped.
    pub send_timeout: Duration,
    /// How long a closing connection drains input so the client sees the response (lingering close).
    pub linger_timeout: Duration,
    /// Time to receive a request body once its head is in (slow POST defence).
    pub body_timeout: Duration,
    /// Slowest a client may read a response, in bytes per second judged per 2-second window
    /// (slow-read defence; `engine/phase_clock.rs`); 0 switches the check off.
    pub min_send_rate: u64,
}

/// Admission control (Abyss's future work; Caddy #7913): caps, rate limits and shedding.
#[derive(Clone, Debug)]
pub struct Admission {
    /// Open connections across all loops; past it new connections get `503` and are closed.
    /// The engine lowers it to fit the descriptor limit, so the server sheds load before
    /// `accept` fails with `EMFILE`.
    pub max_connections: usize,
    /// Open connections from one client address; past it `503`. 0 is no limit.
    pub max_connections_per_address: usize,
    /// Requests per second one client address may make (token bucket); 0 is no limit.
    pub requests_per_second: f64,
    /// Requests a client may make at once above the rate (the bucket's size).
    pub burst: u32,
    /// `Retry-After` sent with `503` and `429`.
    pub retry_after: Duration,
}

/// Access log formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    /// NCSA Common Log Format.
    Common,
    /// Common plus `Referer` and `User-Agent` (Apache's "combined").
    Combined,
    /// One JSON object per line.
    Json,
}

/// Error log levels, most severe first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Error,
    Warn,
    Info,
    Debug,
}

impl Level {
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Level::Error => "error",
            Level::Warn => "warn",
            Level::Info => "info",
            Level::Debug => "debug",
        }
    }
}

/// Where logs go.
#[derive(Clone, Debug)]
pub struct LogOptions {
    /// Access log file; `None` is off.
    pub access: Option<PathBuf>,
    pub format: LogFormat,
    /// Error log file; `None` is standard error.
    pub error: Option<PathBuf>,
    pub level: Level,
}

/// The process around the server: identity, pid file, how long a graceful stop may take.
#[derive(Clone, Debug, Default)]
pub struct ProcessOptions {
    /// Switch to this user after binding (needs to start as root).
    pub user: Option<String>,
    /// Switch to this group (default: the user's primary group).
    pub group: Option<String>,
    pub pid_file: Option<PathBuf>,
    /// On `SIGTERM`/`SIGINT`, how long in-flight requests may take before the rest are cut.
    pub grace_period: Duration,
    /// On `SIGTERM`/`SIGINT`, how long health answers `503` while new connections are still
    /// served, before the listeners close: a load balancer's checks must see the `503` and
    /// take the instance out before its port refuses (zero: close at once).
    pub drain_delay: Duration,
}

/// A `Host` the site answers to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostName {
    /// `example.com`, compared without case and without a port.
    Exact(String),
    /// `*.example.com`: any name ending in `.example.com` (the suffix is stored, with its dot).
    Suffix(String),
}

/// A block of client addresses, `10.0.0.0/8`, `::1/128`, or `all`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AddressRange {
    pub network: IpAddr,
    pub prefix: u8,
}

impl AddressRange {
    /// Whether `address` lies in the block (IPv4-mapped IPv6 addresses count as IPv4).
    #[must_use]
    pub fn contains(&self, address: IpAddr) -> bool {
        let address = match address {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(address, IpAddr::V4),
            v4 => v4,
        };
        match (self.network, address) {
            (IpAddr::V4(network), IpAddr::V4(address)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(network) & mask == u32::from(address) & mask
            }
            (IpAddr::V6(network), IpAddr::V6(address)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(network) & mask == u128::from(address) & mask
            }
            _ => false,
        }
    }
}

/// The PROXY protocol (haproxy's v1 and v2) on `listen`: a load balancer in front says which
/// client each connection carries, and that address stands for the client everywhere (access
/// log, `allow`/`deny`, rate limits).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ProxyProtocol {
    /// Connections are clients themselves.
    #[default]
    Off,
    /// Every connection must begin with a header, and only these sources (the balancers) may
    /// connect at all: anyone else could claim any address. Never empty.
    Required { from: Vec<AddressRange> },
}

impl ProxyProtocol {
    /// Whether a connection from `peer` may be served: always when off; when required, only
    /// from a trusted balancer.
    #[must_use]
    pub fn admits(&self, peer: IpAddr) -> bool {
        match self {
            ProxyProtocol::Off => true,
            ProxyProtocol::Required { from } => from.iter().any(|range| range.contains(peer)),
        }
    }
}

/// Who may see a location.
#[derive(Clone, Debug, Default)]
pub struct Access {
    /// When not empty, only these addresses pass.
    pub allow: Vec<AddressRange>,
    /// These never pass (deny wins over allow).
    pub deny: Vec<AddressRange>,
    pub basic_auth: Option<BasicAuth>,
}

/// HTTP Basic authentication (RFC 7617) against bcrypt or argon2 hashes.
#[derive(Clone, Debug)]
pub struct BasicAuth {
    pub realm: String,
    /// (user, PHC or bcrypt hash string).
    pub users: Vec<(String, String)>,
}

/// Which handler a `handler = "..."` key (or a `proxy_pass`, a `fastcgi_pass`) names, before
/// the location's settings are known: what the loader checks keys against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HandlerKind {
    Static,
    Status,
    Health,
    Proxy,
    FastCgi,
    Cgi,
}

/// What answers a location's requests, with the settings only that handler has: built by the
/// loader (`merge.rs`), so a proxy location always has its upstream and nothing else does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Handler {
    /// Files below the location's root (`LocationSettings::static_files`, which CGI and
    /// FastCGI locations use too, to find their scripts).
    Static,
    /// Prometheus text: the scoreboard and counters.
    Status,
    /// `200` while serving, `503` while draining (for load balancers).
    Health,
    /// Another server answers.
    Proxy(ProxySettings),
    /// A FastCGI application answers.
    FastCgi(FastCgiSettings),
    /// A CGI script answers, started for the request.
    Cgi(CgiSettings),
}

impl Handler {
    #[must_use]
    pub fn kind(&self) -> HandlerKind {
        match self {
            Handler::Static => HandlerKind::Static,
            Handler::Status => HandlerKind::Status,
            Handler::Health => HandlerKind::Health,
            Handler::Proxy(_) => HandlerKind::Proxy,
            Handler::FastCgi(_) => HandlerKind::FastCgi,
            Handler::Cgi(_) => HandlerKind::Cgi,
        }
    }

    /// A handler of `kind` with the loader's defaults, to the first pool (for tests that route
    /// without loading a file).
    #[cfg(test)]
    pub(crate) fn with_defaults(kind: HandlerKind) -> Handler {
        match kind {
            HandlerKind::Static => Handler::Static,
            HandlerKind::Status => Handler::Status,
            HandlerKind::Health => Handler::Health,
            HandlerKind::Proxy => Handler::Proxy(ProxySettings::new(0)),
            HandlerKind::FastCgi => Handler::FastCgi(FastCgiSettings {
                pool: 0,
                x_accel_redirect: true,
                x_sendfile_root: None,
                check_script: None,
            }),
            HandlerKind::Cgi => Handler::Cgi(CgiSettings::default()),
        }
    }

    /// A proxy location's settings.
    #[must_use]
    pub fn proxy(&self) -> Option<&ProxySettings> {
        match self {
            Handler::Proxy(proxy) => Some(proxy),
            _ => None,
        }
    }

    /// A FastCGI location's settings.
    #[must_use]
    pub fn fastcgi(&self) -> Option<&FastCgiSettings> {
        match self {
            Handler::FastCgi(fastcgi) => Some(fastcgi),
            _ => None,
        }
    }

    /// A CGI location's settings.
    #[must_use]
    pub fn cgi(&self) -> Option<&CgiSettings> {
        match self {
            Handler::Cgi(cgi) => Some(cgi),
            _ => None,
        }
    }

    /// Another program answers (proxy, FastCGI, CGI): the request body streams to it and the
    /// connection holds a second descriptor while it does.
    #[must_use]
    pub fn passes_to_program(&self) -> bool {
        matches!(
            self,
            Handler::Proxy(_) | Handler::FastCgi(_) | Handler::Cgi(_)
        )
    }

    /// Whether the program's response may hand the request back to ampd (`X-Accel-Redirect`),
    /// and below which directory `X-Sendfile` may name files; `(false, None)` for handlers
    /// ampd answers itself.
    #[must_use]
    pub fn handback(&self) -> (bool, Option<&PathBuf>) {
        match self {
            Handler::Proxy(proxy) => (proxy.x_accel_redirect, proxy.x_sendfile_root.as_ref()),
            Handler::FastCgi(fastcgi) => {
                (fastcgi.x_accel_redirect, fastcgi.x_sendfile_root.as_ref())
            }
            Handler::Cgi(cgi) => (cgi.x_accel_redirect, cgi.x_sendfile_root.as_ref()),
            Handler::Static | Handler::Status | Handler::Health => (false, None),
        }
    }
}

/// A redirect answered without touching the disk.
#[derive(Clone, Debug)]
pub struct Redirect {
    /// Target; `{rest}` is replaced by the path after the location's prefix, `{uri}` by the
    /// whole request path and query.
    pub to: String,
    pub status: u16,
}

/// Everything a location decides, after inheritance from its site (`merge.rs`).
#[derive(Clone, Debug)]
pub struct LocationSettings {
    /// Root (or alias target) and how files are found there.
    pub static_files: StaticOptions,
    /// `alias`: the location's prefix is replaced by the directory (nginx `alias`); otherwise
    /// the whole path is looked up below `root`.
    pub alias: bool,
    /// Added to every response of the location.
    pub headers: Vec<(String, String)>,
    /// `headers_remove` and `headers_set`, applied to every final head the location answers.
    pub header_rules: header_rules::HeaderRules,
    /// On-the-fly compression (`compress` and the `compress_*` keys).
    pub compression: Arc<compression::Compression>,
    /// `Cache-Control` value for successful responses.
    pub cache_control: Option<String>,
    /// `Expires` = now + this, and `Cache-Control: max-age` unless `cache_control` is set.
    pub expires: Option<Duration>,
    pub redirect: Option<Redirect>,
    /// Internal rewrite: the request is routed again under this path (`{rest}` as in
    /// redirects).
    pub rewrite: Option<String>,
    /// `return`: answered here, after access control, without a handler.
    pub answer: Option<Return>,
    pub access: Access,
    pub handler: Handler,
    /// Whether `admission.requests_per_second` applies here.
    pub rate_limit: bool,
    /// How CGI and FastCGI locations name the script and its meta-variables.
    pub script: ScriptSettings,
    /// `try_files`, or `fallback = "/index.php"` (`TryFiles::fallback`): what a static
    /// location looks up for a request, in order, and where a request that finds nothing goes;
    /// `None`: the path asked for, else `404`.
    pub try_files: Option<TryFiles>,
    /// Reachable only by an upstream's `X-Accel-Redirect`; a client asking gets `404`.
    pub internal: bool,
    /// Largest request body this location reads; `None`: `limits.max_body`. Past it `413`.
    pub max_body: Option<u64>,
    /// `error_pages`: the local URIs that answer the statuses they list (`conn::error_pages`).
    pub error_pages: Option<std::sync::Arc<error_pages::ErrorPages>>,
    /// `intercept_errors`: an upstream's response with a status `error_pages` lists is replaced
    /// by the page (nginx `proxy_intercept_errors`); off by default.
    pub intercept_errors: bool,
}

/// A `[[site.location]]`: a path prefix (or exact path, or a regex) and its settings.
#[derive(Clone, Debug)]
pub struct Location {
    /// `/` for a regex location (it has no prefix: `{rest}` is the path after its `/`).
    pub path: String,
    pub exact: bool,
    /// `regex`: matched against the decoded, normalised path after the exact locations and
    /// before the prefixes, in file order with the `extension` locations (nginx `location ~`).
    pub regex: Option<regex::Regex>,
    pub settings: LocationSettings,
}

/// A virtual host: the names it answers to and its locations (always one for `/`).
#[derive(Clone, Debug)]
pub struct Site {
    pub names: Vec<HostName>,
    /// Chosen when no site's names match the request's `Host`.
    pub default: bool,
    pub locations: Vec<Location>,
    pub tls: SiteTls,
}

#[derive(Clone, Debug)]
pub struct Config {
    /// Where to listen, plain and TLS side by side; at least one.
    pub listen: Vec<Listen>,
    /// The server-wide `[tls]` table.
    pub tls: TlsServer,
    /// The `[http2]` table.
    pub http2: http2::Http2,
    pub arch: Arch,
    /// Units of concurrency of the architecture: event loops (`reactor`, `uring`), pool threads
    /// (`mt`), the cap on connection threads (`tpc`), worker processes (`mp`). `None`: the
    /// architecture's default (`Arch::default_threads`). `sped` and `amped` run one loop.
    pub threads: Option<usize>,
    /// Helpers per event loop (`amped`, `reactor`, `uring`) started with it.
    pub helpers: usize,
    /// The most helpers a loop grows to when every helper is busy and jobs wait (Flash started
    /// helpers on demand): disk requests in flight at once are what a latency-bound device's
    /// throughput scales with (docs/research/architectures.md). At least `helpers`.
    pub helpers_max: usize,
    /// Helpers as threads (default) or as processes.
    pub helper_mode: HelperMode,
    pub caches: CacheOptions,
    pub send: SendOptions,
    pub limits: Limits,
    pub admission: Admission,
    /// Whether connections on `listen` begin with a PROXY protocol header.
    pub proxy_protocol: ProxyProtocol,
    pub logs: LogOptions,
    pub process: ProcessOptions,
    /// At least one; the first default site (or else the first site) answers unknown hosts.
    pub sites: Vec<Site>,
    /// `[upstream.NAME]` pools and those implied by `proxy_pass` and `fastcgi_pass` addresses
    /// and by applications, in the order `ProxySettings::pool` and `FastCgiSettings::pool`
    /// index.
    pub upstreams: Vec<UpstreamPool>,
    /// `[cgi]`.
    pub cgi: CgiLimits,
    /// `[application.NAME]`, in the file's order.
    pub applications: Vec<Application>,
}

impl LocationSettings {
    /// The defaults of a static location serving `root`.
    #[must_use]
    pub fn new(root: PathBuf) -> LocationSettings {
        LocationSettings {
            static_files: StaticOptions::new(root),
            alias: false,
            headers: Vec::new(),
            header_rules: header_rules::HeaderRules::default(),
            compression: Arc::new(compression::Compression::new(true)),
            cache_control: None,
            expires: None,
            redirect: None,
            rewrite: None,
            answer: None,
            access: Access::default(),
            handler: Handler::Static,
            rate_limit: true,
            script: ScriptSettings::default(),
            try_files: None,
            internal: false,
            max_body: None,
            error_pages: None,
            intercept_errors: false,
        }
    }
}

impl Config {
    /// Descriptors one connection may hold at once: its socket, and where some location passes
    /// requests to another program (proxy, FastCGI, CGI) the socket to that program as well.
    /// The connection cap under `RLIMIT_NOFILE` counts them (`content::descriptors`).
    #[must_use]
    pub fn descriptors_per_connection(&self) -> u64 {
        let relays = self
            .sites
            .iter()
            .flat_map(|site| &site.locations)
            .any(|location| location.settings.handler.passes_to_program());
        if relays {
            2
        } else {
            1
        }
    }

    /// The number `threads` stands for under the chosen architecture (see `Config::threads`).
    #[must_use]
    pub fn thread_count(&self) -> usize {
        match self.arch {
            Arch::Sped | Arch::Amped => 1,
            arch => self.threads.unwrap_or_else(|| {
                arch.default_threads(std::thread::available_parallelism().map_or(1, usize::from))
            }),
        }
    }

    /// The settings of the one site `ampd serve` runs: its `/` location, which the
    /// command-line flags change.
    ///
    /// # Panics
    /// Never for a `Config` made by `new` (it has one site with one location).
    pub fn serve_location(&mut self) -> &mut LocationSettings {
        &mut self.sites[0].locations[0].settings
    }

    /// The defaults for serving `root`.
    #[must_use]
    pub fn new(root: PathBuf) -> Config {
        Config {
            listen: vec![Listen::plain(SocketAddr::from(([127, 0, 0, 1], 8080)))],
            tls: TlsServer::default(),
            http2: http2::Http2::default(),
            arch: Arch::Reactor,
            threads: None,
            helpers: 4,
            helpers_max: 32,
            helper_mode: HelperMode::Threads,
            caches: CacheOptions {
                path_cache: true,
                header_cache: true,
                file_cache: true,
                residency_test: true,
                path_cache_entries: 10_000,
                header_cache_entries: 10_000,
                file_cache_bytes: None,
                revalidate_after: Duration::from_secs(1),
                compressed_size: 32 << 20,
                compressed_max_file: 4 << 20,
            },
            send: SendOptions {
                sendfile_threshold: 64 << 10,
                send_chunk: 512 << 10,
            },
            limits: Limits {
                max_request_line: 8192,
                max_head_bytes: 32 << 10,
                max_headers: 100,
                max_body: 1 << 20,
                max_ranges: 100,
                max_requests_per_connection: 10_000,
                header_timeout: Duration::from_secs(20),
                keepalive_timeout: Duration::from_secs(75),
                send_timeout: Duration::from_secs(60),
                linger_timeout: Duration::from_secs(2),
                body_timeout: Duration::from_secs(20),
                // 1 KiB/s, as examples/ampd.toml: off, a slow-read client (slowhttptest -X)
                // held its connection for the whole 60 s send timeout and cut a normal client
                // to 0.41-0.68 of its rate; at 1 KiB/s it is cut in 4-6 s, and no real client
                // reads that slowly.
                min_send_rate: 1 << 10,
            },
            admission: Admission {
                max_connections: 100_000,
                max_connections_per_address: 0,
                requests_per_second: 0.0,
                burst: 100,
                retry_after: Duration::from_secs(1),
            },
            proxy_protocol: ProxyProtocol::Off,
            logs: LogOptions {
                access: None,
                format: LogFormat::Combined,
                error: None,
                level: Level::Info,
            },
            process: ProcessOptions {
                grace_period: Duration::from_secs(30),
                ..ProcessOptions::default()
            },
            sites: vec![Site {
                names: Vec::new(),
                default: true,
                locations: vec![Location {
                    path: "/".to_owned(),
                    exact: false,
                    regex: None,
                    settings: LocationSettings::new(root),
                }],
                tls: SiteTls::default(),
            }],
            upstreams: Vec::new(),
            cgi: CgiLimits::default(),
            applications: Vec::new(),
        }
    }
}
