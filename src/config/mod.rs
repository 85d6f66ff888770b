//! The server's settings: one typed struct that every engine reads.
//!
//! Owns: `Config` and its defaults. The command line (`main.rs`) fills it today; the TOML file
//! of the operations issue will fill the same struct, so nothing downstream changes.
//! Must not touch: sockets, files, threads.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

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
    /// Units of concurrency of the architecture: event loops (`reactor`, `uring`), pool threads
    /// (`mt`), the cap on connection threads (`tpc`), worker processes (`mp`). `None`: the
    /// architecture's default (`Arch::default_threads`). `sped` and `amped` run one loop.
    pub threads: Option<usize>,
    /// Helpers per event loop (`amped`, `reactor`, `uring`).
    pub helpers: usize,
    /// Helpers as threads (default) or as processes.
    pub helper_mode: HelperMode,
    pub static_files: StaticOptions,
    pub caches: CacheOptions,
    pub send: SendOptions,
    pub limits: Limits,
}

impl Config {
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

    /// The defaults for serving `root`.
    #[must_use]
    pub fn new(root: PathBuf) -> Config {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            arch: Arch::Reactor,
            threads: None,
            helpers: 4,
            helper_mode: HelperMode::Threads,
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
