//! A sans-I/O driver for `Conn` in unit tests: bytes in, parsed responses and the final `Need`
//! out, with no socket and no engine.
//!
//! Owns: a world for one connection (a generation over a temporary document root, caches,
//! clock, counters, a log that writes nowhere), the engine's loop in miniature (advance, run
//! each job at once with the real `job::run` as `sped` does, collect the output), and a
//! parser of the bytes sent back. Must not touch: `Conn`'s decisions — it drives the same
//! public calls an engine makes, so what the tests see is what an engine would send.

use std::net::{IpAddr, Ipv4Addr};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

use std::net::SocketAddr;

use super::upstream::{Connect, LinkId, Opened, Release};

/// The server a `Need::Connect` asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Connected {
    pub address: UpstreamAddress,
    pub reuse: bool,
}
use super::{Conn, Context, Need};
use crate::config::{
    CertificateFiles, Config, FastCgiSettings, Handler, LogFormat, ProxySettings, UpstreamAddress,
    UpstreamPool, UpstreamProtocol, UpstreamServer,
};
use crate::content::budget::CacheBudget;
use crate::content::caches::Caches;
use crate::content::job::{self, Job, JobDone};
use crate::content::sink::DiskAccess;
use crate::log::access::{AccessLog, LogFile, LogThread};
use crate::log::clock::Clock;
use crate::log::stats::{LoopStats, Stats};
use crate::site::rate::RateLimiter;
use crate::site::Generation;

/// Everything a `Context` borrows, kept apart from the `Conn` so both can be borrowed at once.
struct World {
    root: PathBuf,
    generation: Generation,
    caches: Caches,
    clock: Clock,
    log: AccessLog,
    /// The log's writer: it writes nowhere, or to `access.log` in `root` (`Harness::logging`).
    log_thread: LogThread,
    stats: Stats,
    loop_stats: LoopStats,
    rates: RateLimiter,
    /// A graceful stop is under way (`Context::draining`).
    draining: bool,
}

impl World {
    fn context(&mut self) -> Context<'_> {
        Context {
            config: &self.generation.config,
            sites: &self.generation.sites,
            caches: &self.caches,
            clock: &self.clock,
            disk: DiskAccess::Inline,
            log: &mut self.log,
            stats: &self.loop_stats,
            metrics: &self.stats,
            upstreams: &self.generation.upstreams,
            launcher: &self.generation.launcher,
            rates: &self.rates,
            draining: self.draining,
        }
    }
}

impl Drop for World {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// One response as the client reads it.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    /// `(lower-case name, value)` in order.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    #[must_use]
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }
}

/// One connection under test.
pub struct Harness {
    world: World,
    pub conn: Conn,
    /// Every byte the connection sent, in order.
    sent: Vec<u8>,
}

/// `index.html`'s contents.
pub const INDEX: &[u8] = b"<h1>hello</h1>\n";

impl Harness {
    /// A connection from 127.0.0.1 to a server with default settings changed by `configure`,
    /// serving a fresh directory holding `index.html` (`INDEX`) and `big.bin` (`big_body()`).
    pub fn new(configure: impl FnOnce(&mut Config)) -> Harness {
        use std::sync::atomic::{AtomicU32, Ordering};
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let root = std::env::temp_dir().join(format!(
            "ampd-conn-harness-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join("index.html"), INDEX).unwrap();
        std::fs::write(root.join("big.bin"), big_body()).unwrap();
        let mut config = Config::new(root.clone());
        configure(&mut config);
        let caches = Caches::new(&config.caches, 1, &CacheBudget::of(&config, 1, 1));
        let generation = Generation::build(config, 1).unwrap();
        let log_thread = LogThread::start(LogFile::open(None).unwrap()).unwrap();
        let log = log_thread.handle(None);
        let stats = Stats::new(1).unwrap();
        let loop_stats = stats.add_loop();
        let conn = Conn::new(&generation.config, IpAddr::V4(Ipv4Addr::LOCALHOST));
        Harness {
            world: World {
                root,
                generation,
                caches,
                clock: Clock::at(1_700_000_000),
                log,
                log_thread,
                stats,
                loop_stats,
                rates: RateLimiter::new().unwrap(),
                draining: false,
            },
            conn,
            sent: Vec::new(),
        }
    }

    /// The same connection as admission control turned it away (`Conn::refusing`).
    pub fn refusing(configure: impl FnOnce(&mut Config)) -> Harness {
        let mut harness = Harness::new(configure);
        harness.conn = Conn::refusing(
            &harness.world.generation.config,
            IpAddr::V4(Ipv4Addr::LOCALHOST),
        );
        harness
    }

    /// A new connection to the same world (generation, caches, log), as the next client's.
    pub fn reconnect(&mut self) {
        self.conn = Conn::new(
            &self.world.generation.config,
            IpAddr::V4(Ipv4Addr::LOCALHOST),
        );
        self.sent.clear();
    }

    /// Write the access log in `format` to a file (`access_log` reads it).
    #[must_use]
    pub fn logging(mut self, format: LogFormat) -> Harness {
        let path = self.world.root.join("access.log");
        let thread = LogThread::start(LogFile::open(Some(&path)).unwrap()).unwrap();
        self.world.log = thread.handle(Some(format));
        self.world.log_thread = thread;
        self
    }

    /// The access log's lines so far (`logging`).
    pub fn access_log(&mut self) -> String {
        self.world.log.flush();
        self.world
            .log_thread
            .sync(std::time::Duration::from_secs(10));
        std::fs::read_to_string(self.world.root.join("access.log")).unwrap_or_default()
    }

    /// From now on the engine says a graceful stop is under way.
    pub fn start_draining(&mut self) {
        self.world.draining = true;
    }

    /// The engine's timer for the connection's phase ran out.
    pub fn time_out(&mut self) -> Need {
        self.conn.timed_out(&mut self.world.context());
        self.run()
    }

    /// Hand `bytes` to the connection as one read, then run it until it needs something the
    /// test must give (more input) or ends.
    pub fn feed(&mut self, bytes: &[u8]) -> Need {
        self.conn.receive(bytes);
        self.run()
    }

    /// `feed` whole, or one byte per read when `bytewise` (a state machine must answer the
    /// same however its input is cut).
    pub fn feed_split(&mut self, bytes: &[u8], bytewise: bool) -> Need {
        if bytewise {
            self.feed_bytewise(bytes)
        } else {
            self.feed(bytes)
        }
    }

    /// Feed `bytes` one read per byte (every split point of a head, a body, a chunk size);
    /// returns the last `Need`.
    pub fn feed_bytewise(&mut self, bytes: &[u8]) -> Need {
        let mut need = Need::Read;
        for byte in bytes {
            need = self.feed(std::slice::from_ref(byte));
            if matches!(need, Need::Close(_)) {
                break;
            }
        }
        need
    }

    /// The client closed its sending side.
    pub fn finish(&mut self) -> Need {
        self.conn.peer_finished();
        self.run()
    }

    /// Hand `bytes` over and advance, running jobs, but send nothing: what a client that does
    /// not read leaves the connection with.
    pub fn feed_unread(&mut self, bytes: &[u8]) -> Need {
        self.conn.receive(bytes);
        self.step()
    }

    /// Hand `bytes` over and advance once: the `Need` as the engine would get it, a job not
    /// run (`job_done` gives its result back).
    pub fn feed_once(&mut self, bytes: &[u8]) -> Need {
        self.conn.receive(bytes);
        self.conn.advance(&mut self.world.context())
    }

    /// A job's result, as the engine hands it back.
    pub fn job_done(&mut self, done: JobDone) -> Option<Job> {
        self.conn.job_done(done, &mut self.world.context())
    }

    /// Advance until the connection needs something other than a job; each job runs at once
    /// (as `sped` runs it) and its result goes back.
    fn step(&mut self) -> Need {
        loop {
            match self.conn.advance(&mut self.world.context()) {
                Need::Job(first) => {
                    let mut next = Some(first);
                    while let Some(job) = next {
                        next = self.conn.job_done(job::run(job), &mut self.world.context());
                    }
                }
                need => return need,
            }
        }
    }

    /// The engine's loop: step, and "send" queued output whole (a client that reads everything
    /// at once), until the connection needs input or ends.
    pub fn run(&mut self) -> Need {
        loop {
            let need = self.step();
            self.flush();
            // Backpressure: the client read it all, go on.
            if !matches!(need, Need::Flush) {
                return need;
            }
        }
    }

    /// Move every queued byte to `sent`: memory as it is, file ranges read from the file.
    fn flush(&mut self) {
        let output = &mut self.conn.output;
        while !output.is_empty() {
            let sent = if let Some(range) = output.front_file() {
                let mut bytes = vec![0; usize::try_from(range.end - range.offset).unwrap()];
                range
                    .file
                    .file
                    .read_exact_at(&mut bytes, range.offset)
                    .unwrap();
                self.sent.extend_from_slice(&bytes);
                bytes.len()
            } else {
                let slices = output.memory_slices();
                let before = self.sent.len();
                for slice in &slices {
                    self.sent.extend_from_slice(slice);
                }
                self.sent.len() - before
            };
            output.advance(sent as u64);
        }
    }

    /// The responses sent so far (and not taken before), parsed, interim (1xx) ones included;
    /// `heads_only[i]` says the i-th final response answers a HEAD (its `Content-Length` describes a body that is not sent). Panics on
    /// bytes that do not parse as whole responses: a test must see every byte accounted for.
    pub fn responses(&mut self, heads_only: &[bool]) -> Vec<Response> {
        let bytes = std::mem::take(&mut self.sent);
        parse_responses(&bytes, heads_only)
    }

    /// The responses sent so far, none to a HEAD.
    pub fn take(&mut self) -> Vec<Response> {
        self.responses(&[])
    }

    /// Just the statuses of `take()`.
    pub fn statuses(&mut self) -> Vec<u16> {
        self.take().iter().map(|response| response.status).collect()
    }

    /// The bytes sent so far (and not taken before), unparsed.
    pub fn take_raw(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.sent)
    }
}

/// The engine's part for an upstream socket, played by the test: the connection's `/`
/// location proxies to a pool of `servers` addresses that are never connected to.
impl Harness {
    pub fn proxying(servers: u16, configure: impl FnOnce(&mut Config)) -> Harness {
        Harness::new(|config| {
            let servers = (0..servers)
                .map(|index| UpstreamServer {
                    address: UpstreamAddress::Tcp(SocketAddr::from(([127, 0, 0, 1], 9001 + index))),
                    weight: 1,
                    backup: false,
                })
                .collect();
            config
                .upstreams
                .push(UpstreamPool::new("app".to_owned(), servers));
            let location = config.serve_location();
            location.handler = Handler::Proxy(ProxySettings::new(0));
            configure(config);
        })
    }

    /// The `/` location passes requests to a FastCGI pool of one server (never connected to),
    /// `.php` scripts below `/srv/www`.
    pub fn fastcgi(configure: impl FnOnce(&mut Config)) -> Harness {
        Harness::proxying(1, |config| {
            config.upstreams[0].protocol = UpstreamProtocol::FastCgi;
            config.upstreams[0].keepalive = 0;
            let location = config.serve_location();
            location.handler = Handler::FastCgi(FastCgiSettings {
                pool: 0,
                x_accel_redirect: true,
                x_sendfile_root: None,
                // Nothing below /srv/www: a test that checks scripts turns it on with a root.
                check_script: Some(false),
            });
            location.script.extension = Some(".php".to_owned());
            location.static_files.root = "/srv/www".into();
            configure(config);
        })
    }

    /// Carry out `need`, a `Need::Connect` to a server: a fresh socket whose connect completes
    /// at once.
    pub fn connect(&mut self, need: &Need) -> Connected {
        let Need::Connect(LinkId::FIRST, Connect::Server { address, reuse }) = need else {
            panic!("expected Need::Connect to a server on link 0, got {need:?}");
        };
        self.conn.upstream_opened(LinkId::FIRST, Opened::Fresh);
        self.conn.upstream_connected(LinkId::FIRST);
        Connected {
            address: address.clone(),
            reuse: *reuse,
        }
    }

    /// Everything the connection writes to the upstream until it has nothing more (a socket
    /// that takes every byte), advancing it in between; returns the bytes and the last `Need`.
    pub fn upstream_take(&mut self) -> (Vec<u8>, Need) {
        let mut taken = Vec::new();
        loop {
            let need = self.run();
            let bytes = self.conn.upstream_output(LinkId::FIRST).to_vec();
            if bytes.is_empty() {
                return (taken, need);
            }
            self.conn.upstream_sent(LinkId::FIRST, bytes.len());
            taken.extend_from_slice(&bytes);
        }
    }

    /// The upstream sends `bytes`.
    pub fn upstream_reply(&mut self, bytes: &[u8]) -> Need {
        self.conn.upstream_receive(LinkId::FIRST, bytes);
        self.run()
    }

    /// The upstream closes its side.
    pub fn upstream_close(&mut self) -> Need {
        self.conn.upstream_finished(LinkId::FIRST);
        self.run()
    }

    /// The upstream socket fails with `kind` (refused while connecting, reset later).
    pub fn upstream_fail(&mut self, kind: std::io::ErrorKind) -> Need {
        self.conn
            .upstream_failed(LinkId::FIRST, &std::io::Error::from(kind));
        self.run()
    }

    /// The upstream's timeout ran out.
    pub fn upstream_time_out(&mut self) -> Need {
        self.conn.upstream_timed_out();
        self.run()
    }

    /// What the connection says to do with its upstream socket, once.
    pub fn release(&mut self) -> Option<Release> {
        self.conn
            .take_upstream_release()
            .map(|(_, release)| release)
    }
}

/// A self-signed certificate for `a.test` and its key, made in `dir` with the `openssl` CLI: a
/// generation with a TLS listener needs one to build.
#[must_use]
pub fn certificate(dir: &std::path::Path) -> CertificateFiles {
    let certificate = dir.join("a.test.pem");
    let key = dir.join("a.test.key");
    let status = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
        ])
        .args(["-nodes", "-days", "1", "-subj", "/CN=a.test", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&certificate)
        .stderr(std::process::Stdio::null())
        .status()
        .expect("the openssl CLI (Debian package openssl)");
    assert!(status.success(), "openssl req failed");
    CertificateFiles {
        certificate,
        key,
        ocsp_response: None,
    }
}

/// `big.bin`'s contents: 100 KiB, past the default `sendfile_threshold` (64 KiB), so it goes out
/// as a file range rather than memory; each byte its offset mod 251 (a prime, so a range read from
/// the wrong offset shows).
#[must_use]
pub fn big_body() -> Vec<u8> {
    (0..100 << 10).map(|at: u32| (at % 251) as u8).collect()
}

fn parse_responses(mut bytes: &[u8], heads_only: &[bool]) -> Vec<Response> {
    let mut responses = Vec::new();
    let mut finals = 0;
    while !bytes.is_empty() {
        let end = bytes
            .windows(4)
            .position(|window| window == b"\r\n\r\n")
            .unwrap_or_else(|| panic!("no end of head in {:?}", String::from_utf8_lossy(bytes)));
        let head = std::str::from_utf8(&bytes[..end]).unwrap();
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap();
        let mut parts = status_line.splitn(3, ' ');
        assert_eq!(parts.next(), Some("HTTP/1.1"), "{status_line}");
        let status: u16 = parts.next().unwrap().parse().unwrap();
        let headers: Vec<(String, String)> = lines
            .map(|line| {
                let (name, value) = ampd_http::head::field_line(line.as_bytes()).unwrap();
                let value = String::from_utf8_lossy(value).into_owned();
                (name.to_ascii_lowercase(), value)
            })
            .collect();
        bytes = &bytes[end + 4..];
        let informational = status < 200;
        let head_only = !informational && heads_only.get(finals) == Some(&true);
        let length = headers
            .iter()
            .find(|(name, _)| name == "content-length")
            .map_or(0, |(_, value)| value.parse::<usize>().unwrap());
        assert!(
            !headers.iter().any(|(name, _)| name == "transfer-encoding"),
            "the harness reads Content-Length bodies only"
        );
        let length = if informational || head_only || status == 304 {
            0
        } else {
            length
        };
        assert!(bytes.len() >= length, "short body for {status_line}");
        let body = bytes[..length].to_vec();
        bytes = &bytes[length..];
        if !informational {
            finals += 1;
        }
        responses.push(Response {
            status,
            headers,
            body,
        });
    }
    responses
}

/// The `/` location's proxy settings (a `Harness::proxying` configuration's), to change.
pub fn proxy_settings(config: &mut Config) -> &mut ProxySettings {
    match &mut config.serve_location().handler {
        Handler::Proxy(settings) => settings,
        other => panic!("not a proxy location: {other:?}"),
    }
}

/// The `/` location's FastCGI settings (a `Harness::fastcgi` configuration's), to change.
pub fn fastcgi_settings(config: &mut Config) -> &mut FastCgiSettings {
    match &mut config.serve_location().handler {
        Handler::FastCgi(settings) => settings,
        other => panic!("not a FastCGI location: {other:?}"),
    }
}
