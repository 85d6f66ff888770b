//! The connection state machine, sans-I/O: bytes in, response segments and `Need`s out.
//!
//! Owns: one client connection's HTTP/1.1 flow — head parsing, persistence (RFC 9112 §9),
//! pipelining (responses queued in order behind each other), discarding unused request bodies
//! (§6.3), method dispatch, and routing a request to the static-file handler (AFPA's
//! "derive request → cached / uncached response"). It says what it needs next and never blocks.
//! The routing phases (rewrite, rate, access, redirect, handler) are in `route.rs`; writing and
//! logging a response in `reply.rs`.
//! Must not touch: sockets, threads, the disk (a `Job` goes back to the engine), `ops` (the
//! engine passes what lifecycle and admission decided: `draining`, a refused connection).

mod h2;
#[cfg(test)]
mod h2_tests;
mod handler;
#[cfg(test)]
mod harness;
mod https;
pub mod output;
pub mod proxy_header;
mod reply;
mod route;
#[cfg(test)]
mod tests;
mod tls_seam;
#[cfg(test)]
mod tls_tests;
pub mod upstream;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use ampd_http::chunked::ChunkedDecoder;
use ampd_http::request::{
    BodyFraming, HeadParser, Limits as ParseLimits, Parse, RequestHead, Version,
};

use crate::config::{Config, Handler, ProxyProtocol};
use crate::content::caches::Caches;
use crate::content::file::{Resolution, Resolved};
use crate::content::job::{Job, JobDone};
use crate::content::path::CleanPath;
use crate::content::resolve::DocRoot;
use crate::content::sink::{DiskAccess, Sink};
use crate::log::access::AccessLog;
use crate::log::clock::Clock;
use crate::log::stats::{LoopStats, Stats};
use crate::programs::cgi::Launcher;
use crate::response::Persistence;
use crate::site::rate::RateLimiter;
use crate::site::{Route, Sites};
use crate::tls::TlsInfo;
use crate::upstream::Upstreams;
use output::Output;
pub use upstream::{Connect, LinkId, Opened, ProgramStart, Release};

/// Stop parsing pipelined requests while this much output is queued, so a client that sends
/// faster than it reads cannot make the server buffer without bound.
const OUTPUT_HIGH_WATER: u64 = 256 << 10;

/// Everything a connection reads from its loop: the configuration generation, caches, the
/// clock, the log and counters, and what the lifecycle decided.
pub struct Context<'a> {
    pub config: &'a Config,
    pub sites: &'a Sites,
    /// Shared by the threads of `mt` and `tpc`; every method takes `&self`.
    pub caches: &'a Caches,
    /// `Date` and log times for this second.
    pub clock: &'a Clock,
    pub disk: DiskAccess,
    pub log: &'a mut AccessLog,
    /// This loop's counters.
    pub stats: &'a LoopStats,
    /// All loops' counters (the status handler renders them).
    pub metrics: &'a Stats,
    /// The proxy's pools (the generation's).
    pub upstreams: &'a Upstreams,
    /// Starts CGI scripts (the process's).
    pub launcher: &'a Launcher,
    /// Request-rate state per client address, shared by all loops (and `mp` processes).
    pub rates: &'a RateLimiter,
    /// A graceful stop is under way: answer with `Connection: close`, health says `503`.
    pub draining: bool,
}

/// What the connection needs from the engine next.
#[derive(Debug)]
pub enum Need {
    /// More input.
    Read,
    /// Nothing until the queued output drains (backpressure).
    Flush,
    /// Run this job and call `job_done` with its result.
    Job(Job),
    /// A job is out; nothing to do until it completes.
    Wait,
    /// Send what is queued, then end the connection as `Ending` says.
    Close(Ending),
    /// Open a connection to an upstream server (from the loop's idle pool when `reuse`
    /// allows) as the connection's link `LinkId`, then call `upstream_opened`, or
    /// `upstream_failed` if no socket could be made; then `advance` again (`upstream.rs` has
    /// the whole contract).
    Connect(LinkId, Connect),
}

/// How a finished connection ends (RFC 9112 §9.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// Everything the client sent has been read: close at once, the FIN follows the response.
    Close,
    /// The client may still be sending (a refused body, a broken request, requests pipelined
    /// behind a `Connection: close`): shut down our side and read until the client closes, so
    /// its late bytes do not turn our close into a reset that destroys the response in flight
    /// (lingering close). nginx and Apache linger in the same cases; a plain close is the fast
    /// path for `Connection: close` clients (one request per connection).
    Linger,
}

/// Where the connection is in its request cycle, for timeouts and the scoreboard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Between requests on a persistent connection (keep-alive timeout).
    Idle,
    /// Part of a request head has arrived (header timeout, from the first byte).
    Head,
    /// Reading or discarding a request body (body timeout), or waiting for a job.
    Busy,
    /// Output is queued (send timeout, reset by progress; minimum send rate).
    Sending,
    /// Finished: flushing and closing.
    Closing,
    /// Waiting on an upstream server (its own timeouts govern: `Conn::upstream_deadline`).
    Upstream,
}

impl Phase {
    /// The scoreboard slot (`log::stats::STATES`).
    #[must_use]
    pub fn index(self) -> usize {
        match self {
            Phase::Idle => 0,
            Phase::Head => 1,
            Phase::Busy => 2,
            Phase::Sending => 3,
            Phase::Closing => 4,
            Phase::Upstream => 5,
        }
    }
}

/// A request being served: what routing decided and what the access log will say.
#[derive(Debug)]
struct Exchange {
    head: RequestHead,
    persistence: Persistence,
    /// When its head was parsed (latency is measured from here).
    started: Instant,
    /// The user Basic authentication let in.
    user: Option<String>,
    /// The request body still to be read, for a handler that uses it (a proxy location's);
    /// other handlers' bodies are read and discarded before they are routed.
    body: Option<BodyLeft>,
    /// Routed again inside ampd by an upstream's `X-Accel-Redirect`: `internal` locations
    /// answer it.
    internal: bool,
    /// The target the client sent, once a hand-back replaced `head.target` (`REQUEST_URI`).
    requested: Option<Box<str>>,
    /// Times an upstream handed the request back to be routed again (`X-Accel-Redirect`, a
    /// CGI local `Location`): past `MAX_HANDOFFS` it is a loop.
    handoffs: u8,
}

/// Hand-backs one request may go through before it is a loop (`500`), as nginx allows ten
/// internal redirects.
const MAX_HANDOFFS: u8 = 10;

/// A request held while a job runs for it.
#[derive(Debug)]
struct Pending {
    exchange: Exchange,
    route: Arc<Route>,
    /// The path looked up below the route's root.
    path: CleanPath,
    redirect: RedirectBase,
    /// The translation being served, once known (the job is then a data load).
    resolved: Option<Arc<Resolved>>,
    /// The translation was tried again after the process ran out of descriptors (once).
    retried: bool,
    /// A FastCGI request whose script `path` is looked up below `route.script_root` before
    /// the application hears of it (`handler::proxy`); `None`: a static file's translation.
    script: Option<handler::proxy::ScriptCheck>,
}

impl Pending {
    /// The root `path` is looked up below.
    fn root(&self) -> Option<&Arc<DocRoot>> {
        if self.script.is_some() {
            self.route.script_root.as_ref()
        } else {
            self.route.root.as_ref()
        }
    }
}

/// A request held while a helper checks its password.
#[derive(Debug)]
struct Authenticating {
    exchange: Exchange,
    route: Arc<Route>,
    /// The routed path.
    path: CleanPath,
    redirect: RedirectBase,
    user: String,
    /// `WWW-Authenticate` for a wrong password.
    challenge: Box<[u8]>,
}

/// The request body left to read and throw away.
#[derive(Debug)]
enum BodyLeft {
    Length(u64),
    /// The decoder holds the body limit: a chunk past it is refused as its size is read.
    Chunked(ChunkedDecoder),
}

#[derive(Debug)]
enum State {
    /// Waiting for (the rest of) the PROXY protocol header that must come before the first
    /// request when `proxy_protocol` is on (`proxy_header.rs`).
    ReadingProxyHeader,
    /// Waiting for (the rest of) a request head.
    ReadingHead,
    /// Discarding a request body the handler does not use (RFC 9112 §6.3: it must be read
    /// before the next request); the request is answered once it is read, so that a body past
    /// the limit gets its `413`.
    DiscardingBody {
        left: BodyLeft,
        exchange: Box<Exchange>,
    },
    /// A job is out for this request.
    Waiting(Box<Pending>),
    /// A helper checks the request's password (`Job::Verify`).
    Authenticating(Box<Authenticating>),
    /// An upstream server answers the request (`proxy/`).
    Proxying(Box<handler::proxy::Proxy>),
    /// No more requests: send what is queued, then end as `Ending` says.
    Closing(Ending),
    /// ALPN agreed on `h2`, or an `h2c` listener read the HTTP/2 preface: the session starts
    /// at the next `advance` (it needs the configuration's limits).
    Http2Agreed,
    /// The connection speaks HTTP/2 (`h2/`).
    Http2(Box<h2::Session>),
}

/// Input and output buffers an event loop lends to each connection it drives, for the turn.
///
/// Thousands of idle keep-alive connections then cost their bookkeeping and nothing more (nginx
/// frees the header buffers of idle connections for the same reason), and a request answered
/// within one turn allocates no buffer: the same two are lent turn after turn. Only a connection
/// that must keep bytes across turns (a partial request, output the socket did not take) keeps
/// buffers of its own until they empty.
#[derive(Debug, Default)]
pub struct Spare {
    input: Vec<u8>,
    output: Output,
    /// An upstream link's buffers (`upstream::Buffers`).
    link: upstream::Buffers,
}

#[derive(Debug)]
pub struct Conn {
    state: State,
    parser: HeadParser,
    input: Vec<u8>,
    /// `input[..consumed]` has been parsed or discarded.
    consumed: usize,
    pub output: Output,
    /// The client shut down its sending side: no more requests will come.
    peer_finished: bool,
    served: u32,
    peer: IpAddr,
    /// The client's port (0 until the engine says: `set_peer_port`), for `REMOTE_PORT`.
    peer_port: u16,
    /// The listener that accepted it, as bound (`set_listener`): `SERVER_ADDR`/`SERVER_PORT`,
    /// the port of an HTTPS redirect.
    local: std::net::SocketAddr,
    /// Accepted on a TLS listener.
    secure: bool,
    /// What the handshake settled (`set_tls`), before the first request's bytes arrive;
    /// shared with the inner `Conn` of every HTTP/2 stream (a reference count, not a copy).
    tls: Option<Arc<TlsInfo>>,
    /// Admitted over a connection cap: the first request is answered `503` + `Retry-After`
    /// and the connection closed (a reply the client can read, rather than a reset).
    refused: bool,
    /// `Need::Connect` is out: the engine is to attach an upstream socket with these timeouts.
    awaiting_link: Option<upstream::Timeouts>,
    /// The upstream socket attached, seen from this side.
    link: Option<upstream::Link>,
    /// The buffers of the last link, for the next.
    link_buffers: upstream::Buffers,
    /// No upstream socket could be made after `Need::Connect`.
    open_failure: Option<upstream::Failure>,
    /// An upstream socket to hand back to the engine (`take_upstream_release`).
    release: Option<Release>,
    /// The upstream sockets an ended HTTP/2 session's streams still held, to hand back.
    ended_links: Vec<(upstream::LinkId, Release)>,
    /// The listener takes cleartext HTTP/2 with prior knowledge (`"ADDR h2c"`).
    prior_knowledge: bool,
}

impl Conn {
    #[must_use]
    pub fn new(config: &Config, peer: IpAddr) -> Conn {
        let limits = ParseLimits {
            max_request_line: config.limits.max_request_line,
            max_head_bytes: config.limits.max_head_bytes,
            max_headers: config.limits.max_headers,
        };
        let state = match config.proxy_protocol {
            ProxyProtocol::Off => State::ReadingHead,
            ProxyProtocol::Required { .. } => State::ReadingProxyHeader,
        };
        Conn {
            state,
            parser: HeadParser::new(limits),
            input: Vec::new(),
            consumed: 0,
            output: Output::default(),
            peer_finished: false,
            served: 0,
            peer,
            peer_port: 0,
            local: std::net::SocketAddr::from(([0, 0, 0, 0], 0)),
            secure: false,
            tls: None,
            refused: false,
            awaiting_link: None,
            link: None,
            link_buffers: upstream::Buffers::default(),
            open_failure: None,
            release: None,
            ended_links: Vec::new(),
            prior_knowledge: false,
        }
    }

    /// Make this `Conn` what `Conn::new` would, keeping the memory of its input and output
    /// buffers: an HTTP/2 session serves a new stream with the inner `Conn` of one that ended,
    /// saving the allocations of a fresh one per request. Only for a `Conn` with no upstream
    /// link (what it held is dropped).
    pub(super) fn renew(&mut self, config: &Config, peer: IpAddr) {
        let mut input = std::mem::take(&mut self.input);
        let mut output = std::mem::take(&mut self.output);
        input.clear();
        output.clear();
        *self = Conn::new(config, peer);
        self.input = input;
        self.output = output;
    }

    /// A connection admission control turned away: it answers its first request `503`.
    #[must_use]
    pub fn refusing(config: &Config, peer: IpAddr) -> Conn {
        Conn {
            refused: true,
            ..Conn::new(config, peer)
        }
    }

    /// The client's port, which the engine knows from `accept`.
    pub fn set_peer_port(&mut self, port: u16) {
        self.peer_port = port;
    }

    /// The listener that accepted the connection (its address as bound) and whether it is a
    /// TLS one; the engine says at accept.
    pub fn set_listener(&mut self, local: std::net::SocketAddr, secure: bool) {
        self.local = local;
        self.secure = secure;
    }

    /// The handshake is done: what it settled, for the log, `HTTPS`/`SSL_*` and HSTS; an
    /// agreed `h2` makes this an HTTP/2 connection.
    pub fn set_tls(&mut self, info: TlsInfo) {
        if info.alpn.as_deref() == Some(ampd_http::h2::ALPN_H2) {
            self.state = State::Http2Agreed;
        }
        self.tls = Some(Arc::new(info));
    }

    /// The listener takes HTTP/2 with prior knowledge beside HTTP/1.1 (RFC 9113 §3.3): a
    /// connection that opens with the preface speaks HTTP/2.
    pub fn accept_prior_knowledge(&mut self) {
        self.prior_knowledge = true;
    }

    /// Whether the connection speaks HTTP/2: a timeout, even an idle one, is then answered
    /// (GOAWAY, `timed_out`) before the close, where an idle HTTP/1 connection just closes.
    #[must_use]
    pub fn speaks_http2(&self) -> bool {
        matches!(self.state, State::Http2Agreed | State::Http2(_))
    }

    /// The listener's address, as bound.
    #[must_use]
    pub fn local_address(&self) -> std::net::SocketAddr {
        self.local
    }

    /// Whether the connection came in on a TLS listener.
    #[must_use]
    pub fn is_secure(&self) -> bool {
        self.secure
    }

    /// What the handshake settled (`None` on a plain listener).
    #[must_use]
    pub fn tls(&self) -> Option<&TlsInfo> {
        self.tls.as_deref()
    }

    /// The client's address and port (the PROXY protocol's source, when one is used).
    #[must_use]
    pub fn peer_address(&self) -> std::net::SocketAddr {
        std::net::SocketAddr::new(self.peer, self.peer_port)
    }

    /// The client: the connection's peer, or once a PROXY protocol header has been read, the
    /// client address it carried (what the log, access rules and rate limits use).
    #[must_use]
    pub fn peer(&self) -> IpAddr {
        self.peer
    }

    /// Bytes read from the socket (the engine reads into one buffer per loop and hands them
    /// over).
    pub fn receive(&mut self, bytes: &[u8]) {
        if self.consumed == self.input.len() {
            self.input.clear();
            self.consumed = 0;
        } else if self.consumed > 0 && self.consumed >= self.input.len() / 2 {
            self.input.drain(..self.consumed);
            self.consumed = 0;
        }
        self.input.extend_from_slice(bytes);
    }

    /// Use the loop's spare buffers for this turn where ours hold nothing (see `Spare`).
    pub fn borrow_buffers(&mut self, spare: &mut Spare) {
        if self.consumed == self.input.len() && self.input.capacity() == 0 {
            std::mem::swap(&mut self.input, &mut spare.input);
            self.input.clear();
            self.consumed = 0;
        }
        if self.output.is_empty() && !self.output.holds_memory() {
            std::mem::swap(&mut self.output, &mut spare.output);
        }
        if self.link_buffers.is_empty() {
            std::mem::swap(&mut self.link_buffers, &mut spare.link);
        }
    }

    /// End of a turn: buffers that hold nothing go back to the loop (or are freed if the loop
    /// already has its spare), so a connection between requests owns no buffer memory.
    pub fn return_buffers(&mut self, spare: &mut Spare) {
        if self.consumed == self.input.len() {
            self.input.clear();
            self.consumed = 0;
            if spare.input.capacity() == 0 {
                std::mem::swap(&mut self.input, &mut spare.input);
            } else {
                self.input = Vec::new();
            }
        }
        if self.output.is_empty() {
            if spare.output.holds_memory() {
                self.output.shed();
            } else {
                std::mem::swap(&mut self.output, &mut spare.output);
            }
        }
        if spare.link.is_empty() {
            std::mem::swap(&mut self.link_buffers, &mut spare.link);
        }
        self.link_buffers = upstream::Buffers::default();
    }

    /// Free buffers that hold nothing, for engines that keep idle connections without a loop
    /// to lend buffers (the blocking engines' waiting room, the proactor): an idle keep-alive
    /// connection then costs little more than its bookkeeping.
    pub fn shed_buffers(&mut self) {
        if self.consumed == self.input.len() {
            self.input = Vec::new();
            self.consumed = 0;
        }
        self.output.shed();
        self.link_buffers = upstream::Buffers::default();
    }

    /// The client closed its sending side.
    pub fn peer_finished(&mut self) {
        self.peer_finished = true;
    }

    /// Input received and not yet parsed or discarded (a proactor that receives without being
    /// asked bounds it).
    #[must_use]
    pub fn buffered_input(&self) -> usize {
        self.input.len() - self.consumed
    }

    /// Whether reading more input is useful now.
    #[must_use]
    pub fn wants_input(&self) -> bool {
        match self.state {
            State::ReadingProxyHeader | State::ReadingHead | State::DiscardingBody { .. } => {
                !self.peer_finished
            }
            State::Proxying(_) => !self.peer_finished && self.proxy_reads_client(),
            State::Http2Agreed | State::Http2(_) => !self.peer_finished,
            State::Waiting(_) | State::Authenticating(_) | State::Closing(_) => false,
        }
    }

    /// Whether a response has gone out on this connection: one that has answered nothing yet
    /// is waiting for the request its client is about to send, not idle between requests.
    #[must_use]
    pub fn has_answered(&self) -> bool {
        match &self.state {
            State::Http2(session) => session.served() > 0,
            _ => self.served > 0,
        }
    }

    #[must_use]
    pub fn phase(&self) -> Phase {
        match self.state {
            State::Closing(_) => Phase::Closing,
            _ if !self.output.is_empty() => Phase::Sending,
            State::Http2Agreed => Phase::Head,
            State::Http2(ref session) => session.phase(self.input.len() - self.consumed),
            // The header is due at once: the header timeout runs from the accept.
            State::ReadingProxyHeader => Phase::Head,
            State::ReadingHead if self.consumed == self.input.len() => Phase::Idle,
            State::ReadingHead => Phase::Head,
            State::DiscardingBody { .. } | State::Waiting(_) | State::Authenticating(_) => {
                Phase::Busy
            }
            State::Proxying(_) if self.proxy_reading_body() => Phase::Busy,
            State::Proxying(_) => Phase::Upstream,
        }
    }

    /// The connection must end now (its phase timed out, or a graceful stop closes it while
    /// idle): answer `408` if a request head or body had begun, then close.
    pub fn timed_out(&mut self, context: &mut Context<'_>) {
        let phase = self.phase();
        match std::mem::replace(&mut self.state, State::Closing(Ending::Linger)) {
            State::DiscardingBody { exchange, .. } => {
                self.reply_to(Some(&exchange), 408, Persistence::Close, &[], context);
            }
            State::Proxying(proxy) => {
                self.drop_link(Release::Close);
                if phase == Phase::Busy && self.output.is_empty() {
                    self.reply_to(Some(&proxy.exchange), 408, Persistence::Close, &[], context);
                }
            }
            // No HTTP has been spoken yet: close without a response.
            State::ReadingProxyHeader => self.proxy_header_timed_out(context.stats),
            State::Http2(mut session) => {
                session.timed_out(&mut self.output);
                self.ended_links
                    .extend(std::iter::from_fn(|| session.take_release()));
            }
            _ if phase == Phase::Head => {
                self.reply_to(None, 408, Persistence::Close, &[], context);
            }
            _ => {}
        }
        // What the client sends after this is never read.
        self.state = State::Closing(Ending::Linger);
    }

    /// How to end after the last response: at once when every byte the client sent was used.
    fn ending(&self) -> Ending {
        if self.peer_finished || self.consumed == self.input.len() {
            Ending::Close
        } else {
            Ending::Linger
        }
    }

    /// Make as much progress as possible on buffered input.
    pub fn advance(&mut self, context: &mut Context<'_>) -> Need {
        loop {
            match &mut self.state {
                State::Closing(ending) => return Need::Close(*ending),
                State::Http2Agreed => {
                    let session = h2::Session::new(self, context);
                    self.state = State::Http2(Box::new(session));
                }
                State::Http2(session) => {
                    let (used, need) = session.advance(
                        &self.input[self.consumed..],
                        &mut self.output,
                        self.peer_finished,
                        context,
                    );
                    self.consumed += used;
                    if let Need::Close(ending) = need {
                        self.ended_links
                            .extend(std::iter::from_fn(|| session.take_release()));
                        self.state = State::Closing(ending);
                    }
                    return need;
                }
                State::ReadingProxyHeader => {
                    if let Some(need) = self.read_proxy_header(context) {
                        return need;
                    }
                }
                State::Waiting(_) | State::Authenticating(_) => return Need::Wait,
                State::Proxying(_) => {
                    if let Some(need) = self.advance_proxy(context) {
                        return need;
                    }
                }
                State::DiscardingBody { left, .. } => {
                    match discard(left, &self.input[self.consumed..]) {
                        Discard::Consumed { used, done } => {
                            self.consumed += used;
                            if done {
                                let State::DiscardingBody { exchange, .. } =
                                    std::mem::replace(&mut self.state, State::ReadingHead)
                                else {
                                    unreachable!("matched above")
                                };
                                if let Some(job) = self.route(*exchange, context) {
                                    return Need::Job(job);
                                }
                            } else if self.peer_finished {
                                self.state = State::Closing(Ending::Close);
                            } else {
                                return Need::Read;
                            }
                        }
                        Discard::Refused(status) => {
                            let State::DiscardingBody { exchange, .. } =
                                std::mem::replace(&mut self.state, State::Closing(Ending::Linger))
                            else {
                                unreachable!("matched above")
                            };
                            self.reply_to(
                                Some(&exchange),
                                status,
                                Persistence::Close,
                                &[],
                                context,
                            );
                            // The rest of the refused body is never read.
                            self.state = State::Closing(Ending::Linger);
                        }
                    }
                }
                State::ReadingHead => {
                    if self.output.pending() > OUTPUT_HIGH_WATER {
                        return Need::Flush;
                    }
                    if self.prior_knowledge && self.served == 0 {
                        match self.preface(context.config.limits.max_request_line) {
                            Preface::Complete | Preface::Broken => {
                                self.state = State::Http2Agreed;
                                continue;
                            }
                            Preface::Partial if !self.peer_finished => return Need::Read,
                            Preface::Partial | Preface::Absent => {}
                        }
                    }
                    if self.consumed == self.input.len() {
                        if self.peer_finished {
                            self.state = State::Closing(Ending::Close);
                            continue;
                        }
                        return Need::Read;
                    }
                    match self.parser.parse(&self.input[self.consumed..]) {
                        Ok(Parse::Partial) if self.peer_finished => {
                            self.state = State::Closing(Ending::Close);
                        }
                        Ok(Parse::Partial) => return Need::Read,
                        Ok(Parse::Complete { head, len }) => {
                            self.consumed += len;
                            self.parser.reset();
                            if let Some(job) = self.on_request(head, context) {
                                return Need::Job(job);
                            }
                        }
                        Err(error) => {
                            self.reply_to(None, error.status(), Persistence::Close, &[], context);
                            // A broken request: what follows it is never read.
                            self.state = State::Closing(Ending::Linger);
                        }
                    }
                }
            }
        }
    }

    /// A job this connection asked for finished. Returns the next job when serving needs one
    /// more (a path resolved to a small file whose data must now be loaded).
    pub fn job_done(&mut self, done: JobDone, context: &mut Context<'_>) -> Option<Job> {
        if let State::Http2(session) = &mut self.state {
            return session.job_done(done, context);
        }
        let pending = match std::mem::replace(&mut self.state, State::ReadingHead) {
            State::Waiting(pending) => pending,
            State::Authenticating(request) => {
                let JobDone::Verified(matched) = done else {
                    self.state = State::Authenticating(request);
                    return None;
                };
                return self.authenticated(*request, matched, context);
            }
            other => {
                self.state = other;
                return None;
            }
        };
        let outcome = match done {
            JobDone::Resolved(resolved) => {
                if matches!(resolved.resolution, Resolution::Exhausted) {
                    // Out of descriptors: close cached files and translate once more before
                    // answering 503.
                    context.caches.relieve("open");
                    if let (false, Some(root)) = (pending.retried, pending.root().cloned()) {
                        let job = Job::Resolve {
                            root,
                            path: pending.path.clone(),
                            watcher: context.caches.watcher.clone(),
                            previous: None,
                        };
                        let pending = Pending {
                            retried: true,
                            ..*pending
                        };
                        return self.settle(Outcome::NeedJob(job, Box::new(pending)));
                    }
                }
                let resolved = Arc::new(resolved);
                if let Some(root) = pending.root() {
                    context
                        .caches
                        .remember(root.id, pending.path.as_str(), &resolved);
                }
                if pending.script.is_some() {
                    self.script_checked(*pending, &resolved.resolution, context)
                } else {
                    let disk = context.disk;
                    self.respond(*pending, resolved, context, disk)
                }
            }
            JobDone::Loaded { file, data } => {
                let resolved = pending.resolved.clone()?;
                if let Ok(data) = data {
                    context.caches.remember_data(file.key, data, resolved.watch);
                }
                // The data was just read, so its pages are resident: serving inline now cannot
                // block for long, and cannot ask for the same load again.
                self.respond(*pending, resolved, context, DiskAccess::Inline)
            }
            // Page-ins are the engine's business (they serve output already queued); a
            // verification belongs to `Authenticating`; batches are an HTTP/2 session's.
            JobDone::PagedIn { .. } | JobDone::Verified(_) | JobDone::Batch(_) => {
                self.state = State::Waiting(pending);
                return None;
            }
        };
        self.settle(outcome)
    }

    fn settle(&mut self, outcome: Outcome) -> Option<Job> {
        match outcome {
            Outcome::Responded(Persistence::Close) => {
                self.state = State::Closing(self.ending());
                None
            }
            Outcome::Responded(_) => {
                self.state = State::ReadingHead;
                None
            }
            Outcome::NeedJob(job, pending) => {
                self.state = State::Waiting(pending);
                Some(job)
            }
            Outcome::Routed(job) => job,
        }
    }

    /// A parsed request: persistence, body framing, then routing once the body is read.
    fn on_request(&mut self, head: RequestHead, context: &mut Context<'_>) -> Option<Job> {
        self.served += 1;
        let limits = &context.config.limits;
        let persistence = if !head.keep_alive
            || self.served >= limits.max_requests_per_connection
            || context.draining
            || self.refused
        {
            Persistence::Close
        } else if head.version == Version::Http10 {
            Persistence::KeepAlive
        } else {
            Persistence::Implicit
        };
        // A request with a body is located first: its location may forward the body (a proxy)
        // and sets how large it may be.
        let has_body = !matches!(head.body, BodyFraming::None | BodyFraming::Length(0));
        let located = if has_body {
            self.locate(&head, context).ok()
        } else {
            None
        };
        let max_body = located
            .as_ref()
            .and_then(|located| located.route.settings.max_body)
            .unwrap_or(limits.max_body);
        let body = match head.body {
            BodyFraming::None | BodyFraming::Length(0) => None,
            BodyFraming::Length(length) if length > max_body => {
                let exchange = Exchange {
                    head,
                    persistence: Persistence::Close,
                    started: context.clock.now(),
                    user: None,
                    body: None,
                    internal: false,
                    handoffs: 0,
                    requested: None,
                };
                self.answer(&exchange, None, 413, &[], context);
                // The client may be sending the body we refused.
                self.state = State::Closing(Ending::Linger);
                return None;
            }
            BodyFraming::Length(length) => Some(BodyLeft::Length(length)),
            BodyFraming::Chunked => Some(BodyLeft::Chunked(
                ChunkedDecoder::new().with_max_body(max_body),
            )),
        };
        if let Some(located) = located {
            let streams_body = matches!(
                located.route.settings.handler,
                Handler::Proxy | Handler::FastCgi | Handler::Cgi
            );
            // A request redirected to its location's path with a '/' is answered, not
            // forwarded: its body is read and discarded below, as for any other answer.
            if streams_body && !located.add_slash && !self.refused {
                // The body goes to the upstream as it arrives (`proxy/`), after the location's
                // phases let the request through.
                let exchange = Exchange {
                    head,
                    persistence,
                    started: context.clock.now(),
                    user: None,
                    body,
                    internal: false,
                    handoffs: 0,
                    requested: None,
                };
                if let Some(answered) = self.redirect_to_https(&exchange, &located, context) {
                    return answered;
                }
                if let Some(answered) = self.refuse_without_client_certificate(&exchange, context) {
                    return answered;
                }
                return self.phases(exchange, located, context);
            }
        }
        // A client waiting for `100 Continue` sends the body only after it (RFC 9110 §10.1.1).
        // When the head alone decides the answer (a refused connection or method), that final
        // status goes out instead, and the connection closes, lingering: the client may send
        // the body anyway. Otherwise invite it, then read and discard the body as for any other
        // request, so the connection stays usable (nginx does the same when it discards a body).
        if body.is_some() && head.expect_continue {
            if self.refuses_from_head(&head.method) {
                let exchange = Exchange {
                    head,
                    persistence: Persistence::Close,
                    started: context.clock.now(),
                    user: None,
                    body: None,
                    internal: false,
                    handoffs: 0,
                    requested: None,
                };
                let job = self.route(exchange, context);
                debug_assert!(job.is_none(), "a refusal needs no job");
                self.state = State::Closing(Ending::Linger);
                return None;
            }
            self.output
                .bytes()
                .extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
        }
        let exchange = Exchange {
            head,
            persistence,
            started: context.clock.now(),
            user: None,
            body: None,
            internal: false,
            handoffs: 0,
            requested: None,
        };
        match body {
            Some(left) => {
                self.state = State::DiscardingBody {
                    left,
                    exchange: Box::new(exchange),
                };
                None
            }
            None => self.route(exchange, context),
        }
    }
}

/// What the input of an `h2c` listener's connection opens with.
enum Preface {
    /// The whole HTTP/2 client preface.
    Complete,
    /// The beginning of it, or of a first line not yet ended: more input decides.
    Partial,
    /// An HTTP/1 request (or what the HTTP/1 parser is to refuse).
    Absent,
    /// HTTP/2 that breaks the preface: it began with the preface's request line and then
    /// diverged, or its first line cannot be HTTP/1's. The session answers GOAWAY
    /// PROTOCOL_ERROR and closes (RFC 9113 §3.4): an HTTP/1 answer would be read by an
    /// HTTP/2 client as frames.
    Broken,
}

/// The preface's request line: no HTTP/1 request begins with it (RFC 9113 §3.4 chose it so).
const PREFACE_LINE: &[u8] = b"PRI * HTTP/2.0";

impl Conn {
    /// `max_line`: past this many bytes without a line end, the HTTP/1 parser answers (`414`).
    fn preface(&self, max_line: usize) -> Preface {
        let input = &self.input[self.consumed..];
        let preface = ampd_http::h2::PREFACE;
        if input.starts_with(preface) {
            return Preface::Complete;
        }
        if preface.starts_with(input) {
            return Preface::Partial;
        }
        if input.starts_with(PREFACE_LINE) {
            return Preface::Broken;
        }
        // Empty lines before the request line are skipped, as the HTTP/1 parser does (RFC
        // 9112 §2.2).
        let start = input
            .iter()
            .position(|&byte| byte != b'\r' && byte != b'\n')
            .unwrap_or(input.len());
        match memchr::memchr(b'\n', &input[start..]) {
            Some(end) if ends_with_http1_version(&input[start..start + end]) => Preface::Absent,
            Some(_) => Preface::Broken,
            None if input.len() <= max_line => Preface::Partial,
            None => Preface::Absent,
        }
    }
}

/// Whether a request line (its CR, if any, still on) ends with ` HTTP/x.y`: HTTP/1's form
/// (RFC 9112 §2.3), whatever the version (`HTTP/3.0` is HTTP/1's parser's `505`).
fn ends_with_http1_version(line: &[u8]) -> bool {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    match line.len().checked_sub(9).map(|at| &line[at..]) {
        Some([b' ', b'H', b'T', b'T', b'P', b'/', major, b'.', minor]) => {
            major.is_ascii_digit() && minor.is_ascii_digit()
        }
        _ => false,
    }
}

enum Outcome {
    Responded(Persistence),
    NeedJob(Job, Box<Pending>),
    /// The request was routed again (a script index, a fallback); the state is set and this
    /// job, if any, is what it needs.
    Routed(Option<Job>),
}

/// The request's path as sent (still percent-encoded) and query, for a `301` to `path/`.
#[derive(Debug)]
struct RedirectBase {
    path: String,
    query: Option<String>,
    /// A rewrite changed the path the request is routed by.
    rewritten: bool,
}

enum Discard {
    Consumed {
        used: usize,
        done: bool,
    },
    /// The body cannot be accepted: `413` past the limit, `400` when its framing is broken.
    Refused(u16),
}

/// Throw away body bytes from `input`; a chunked body past its limit ends the connection.
fn discard(left: &mut BodyLeft, input: &[u8]) -> Discard {
    match left {
        BodyLeft::Length(remaining) => {
            let used = usize::try_from(*remaining)
                .unwrap_or(usize::MAX)
                .min(input.len());
            *remaining -= used as u64;
            Discard::Consumed {
                used,
                done: *remaining == 0,
            }
        }
        BodyLeft::Chunked(decoder) => match decoder.feed(input, &mut |_| {}) {
            Ok(progress) => Discard::Consumed {
                used: progress.consumed,
                done: progress.done,
            },
            // `413` past the limit, `400` for broken framing.
            Err(error) => Discard::Refused(error.status()),
        },
    }
}
