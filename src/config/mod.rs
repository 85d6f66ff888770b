//! The server's settings: one typed struct that every engine reads.
//!
//! Owns: `Config` and its defaults. The command line (`main.rs`) fills it today; the TOML file
//! of the operations issue will fill the same struct, so nothing downstream changes.
//! Must not touch: sockets, files, threads.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Which concurrency architecture serves connections (Flash §3, JAWS §3). Every variant runs the
/// same `conn` and `content` code; only who owns threads and who does blocking disk work differs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    /// One thread, one epoll loop; disk work is done inline and blocks the loop (Flash-SPED).
    Sped,
    /// One epoll loop plus helper threads for everything that can block on disk (Flash-AMPED).
    Amped,
    /// One AMPED loop per core, each with its own `SO_REUSEPORT` listener and caches.
    Reactor,
}

impl Arch {
    pub const ALL: [Arch; 3] = [Arch::Sped, Arch::Amped, Arch::Reactor];

    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Arch::Sped => "sped",
            Arch::Amped => "amped",
            Arch::Reactor => "reactor",
        }
    }

    #[must_use]
    pub fn describe(self) -> &'static str {
        match self {
            Arch::Sped => "one event loop, disk work inline (blocks on a page-cache miss)",
            Arch::Amped => "one event loop + helper threads for open/stat and paging data in",
            Arch::Reactor => "one amped loop per core, each with its own SO_REUSEPORT listener",
        }
    }

    #[must_use]
    pub fn from_name(name: &str) -> Option<Arch> {
        Arch::ALL.into_iter().find(|arch| arch.name() == name)
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
}

/// The three Flash caches (§5.2–5.4), each of which can be switched off to reproduce Flash's
/// optimisation breakdown (figure 11).
#[derive(Clone, Debug)]
pub struct CacheOptions {
    pub path_cache: bool,
    pub header_cache: bool,
    pub file_cache: bool,
    /// Path-translation entries per event loop.
    pub path_cache_entries: u64,
    /// Response heads kept per event loop.
    pub header_cache_entries: u64,
    /// Bytes of file data held in memory per event loop.
    pub file_cache_bytes: u64,
    /// Upper bound on how long a cached translation is trusted without a fresh `stat`, for
    /// changes that inotify cannot report (watch limit reached, network filesystems).
    pub revalidate_after: Duration,
}

/// The adaptive send path (JAWS §4.3): small bodies from memory by `writev`, larger by `sendfile`.
#[derive(Clone, Debug)]
pub struct SendOptions {
    /// Files up to this size are held in the file cache and written with the head in one
    /// `writev`; larger ones go by `sendfile`. Measured default: see docs/benchmarks.md.
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
}

#[derive(Clone, Debug)]
pub struct Config {
    pub listen: SocketAddr,
    pub arch: Arch,
    /// Event loops for `reactor` (default: one per core). `sped` and `amped` run one.
    pub threads: usize,
    /// Helper threads per event loop (`amped`, `reactor`).
    pub helpers: usize,
    pub static_files: StaticOptions,
    pub caches: CacheOptions,
    pub send: SendOptions,
    pub limits: Limits,
}

impl Config {
    /// The defaults for serving `root`.
    #[must_use]
    pub fn new(root: PathBuf) -> Config {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            arch: Arch::Reactor,
            threads: std::thread::available_parallelism().map_or(1, usize::from),
            helpers: 4,
            static_files: StaticOptions {
                root,
                index: vec!["index.html".to_owned()],
                autoindex: false,
                dotfiles: false,
                follow_symlinks: false,
                userdir: None,
                precompressed: true,
            },
            caches: CacheOptions {
                path_cache: true,
                header_cache: true,
                file_cache: true,
                path_cache_entries: 10_000,
                header_cache_entries: 10_000,
                file_cache_bytes: 64 << 20,
                revalidate_after: Duration::from_secs(1),
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
            },
        }
    }
}
