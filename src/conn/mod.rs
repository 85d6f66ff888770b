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

mod answer_as;
mod buffers;
mod error_pages;
mod h2;
#[cfg(test)]
mod h2_tests;
mod handler;
#[cfg(test)]
mod harness;
mod https;
pub mod output;
mod path_templates;
mod peer;
mod preface;
pub mod proxy_header;
mod reply;
mod request;
mod route;
#[cfg(test)]
mod tests;
mod tls_seam;
#[cfg(test)]
mod tls_tests;
pub mod upstream;
mod waiting;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use ampd_http::chunked::ChunkedDecoder;
use ampd_http::request::{HeadParser, Limits as ParseLimits, Parse, RequestHead};

use crate::config::{Config, ProxyProtocol};
use crate::content::caches::Caches;
use crate::content::file::Resolved;
use crate::content::job::Job;
use crate::content::path::CleanPath;
use crate::content::resolve::DocRoot;
use crate::content::sink::DiskAccess;
use crate::log::access::AccessLog;
use crate::log::clock::Clock;
use crate::log::stats::{LoopStats, Stats};
use crate::programs::cgi::Launcher;
use crate::response::Persistence;
use crate::site::rate::RateLimiter;
use crate::site::{Route, Sites};
use crate::tls::TlsInfo;
use crate::upstream::Upstreams;
pub use buffers::Spare;
use output::Output;
use preface::Preface;
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
    /// Finished, the last byte out: closing (the lingering close's linger timeout).
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
    /// Error pages it was routed to (`error_pages.rs`; 0: the client's own request).
    detours: u8,
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
    /// Where a static request is in its location's `try_files`.
    trying: handler::Trying,
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
    /// A handler holds the request (a job is out for it).
    Handling(Box<dyn handler::Waiting>),
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
    /// A request's body was left unread: the connection ends lingering after its answer.
    linger: bool,
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
            linger: false,
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
            State::Handling(ref handler) => handler.wants_input(),
            State::Closing(_) => false,
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
            // The last response still going out is sending (send timeout, reset by progress;
            // minimum send rate), not closing: the linger timeout never restarts, and would cut
            // such a response (a `Connection: close` download, one cut short by its upstream)
            // however fast it moves.
            _ if !self.output.is_empty() => Phase::Sending,
            State::Closing(_) => Phase::Closing,
            State::Http2Agreed => Phase::Head,
            State::Http2(ref session) => session.phase(self.input.len() - self.consumed),
            // The header is due at once: the header timeout runs from the accept.
            State::ReadingProxyHeader => Phase::Head,
            State::ReadingHead if self.consumed == self.input.len() => Phase::Idle,
            State::ReadingHead => Phase::Head,
            State::Handling(ref handler) => handler.phase(),
            State::DiscardingBody { .. } => Phase::Busy,
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
            State::Handling(handler) => handler.timed_out(&mut self.parts(), context),
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
        if !self.linger && (self.peer_finished || self.consumed == self.input.len()) {
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
                State::Handling(_) => return Need::Wait,
                State::Proxying(_) => {
                    if let Some(need) = self.advance_proxy(context) {
                        return need;
                    }
                }
                State::DiscardingBody { .. } => {
                    if let Some(need) = self.discard_body(context) {
                        return need;
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
}

/// Where a connection goes after a handler (or a phase) has done its part (`Conn::settle`).
#[derive(Debug)]
enum Outcome {
    Responded(Persistence),
    /// The handler holds the request while this job runs.
    NeedJob(Job, Box<dyn handler::Waiting>),
    /// Answered with the request's body left unread: close, lingering.
    RespondedUnread,
    /// A job came back that was not the holding handler's: it goes on waiting.
    Wait(Box<dyn handler::Waiting>),
    /// Access control let the request in after its password was checked: on to the phases
    /// after access (redirect, handler).
    Admitted(handler::Routed),
    /// Route the request again under `target` (a directory's script index, a `fallback`).
    RouteAgain {
        exchange: Exchange,
        route: Arc<Route>,
        target: String,
    },
    /// A FastCGI script's translation is known (`Conn::script_checked` goes on).
    ScriptChecked(Box<Pending>, Arc<Resolved>),
    /// The request was routed again (a script index, a fallback); the state is set and this
    /// job, if any, is what it needs.
    Routed(Option<Job>),
    /// Answered by an error page: its request is routed (`error_pages.rs`).
    ErrorPage(Box<error_pages::Detour>),
}

/// The request's path as sent (still percent-encoded) and query, for a `301` to `path/`.
#[derive(Debug)]
struct RedirectBase {
    path: String,
    query: Option<String>,
    /// A rewrite changed the path the request is routed by.
    rewritten: bool,
}
