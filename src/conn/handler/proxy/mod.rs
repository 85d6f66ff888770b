//! The exchange with an upstream: one client request answered by another program (AFPA's
//! "remote response"), sans-I/O. Three kinds of upstream share it (`Backend`): an HTTP server
//! (the reverse proxy), a FastCGI application (`fastcgi.rs`) and a CGI script started for the
//! request (`cgi.rs`); the last two answer in CGI's response format (RFC 3875 §6).
//!
//! For the reverse proxy: The request head is re-serialised for the upstream (never the
//! client's bytes), the body streamed across with one framing, the response head validated and
//! rewritten, and its body streamed back; a failed attempt is retried on the next server while
//! that is safe (an idempotent request, nothing sent to the client yet, the request small enough
//! to send again).
//!
//! Owns: the exchange's stages and decisions (which server, when to retry, `502`/`504`, whether
//! the upstream connection may be pooled). Bodies move in `relay.rs`; heads are made in
//! `head.rs`; failures are answered in `failure.rs`; what differs for FastCGI and CGI is in
//! `fastcgi.rs`, `cgi.rs` and `gateway.rs` (their common response side).
//! Must not touch: sockets (the engine moves the bytes, `conn/upstream.rs`), the pools' state
//! (`crate::upstream`: asked to choose, told how it went).

mod cgi;
mod deferred;
mod failure;
mod fastcgi;
mod gateway;
mod head;
mod intercept;
mod relay;
mod tunnel;

use std::sync::Arc;
use std::time::Instant;

use ampd_http::cgi::{CgiParse, CgiParser};
use ampd_http::request::{Method, Version};
use ampd_http::upstream::{response_body, ResponseBody, ResponseParse, ResponseParser};

use super::{Methods, Routed};
use crate::config::{CgiSettings, FastCgiSettings, ProxySettings};
use crate::conn::output::Output;
use crate::conn::upstream::{Connect, Failure, Link, LinkId, Release, Timeouts};
use crate::conn::{
    Conn, Context, Ending, Exchange, Job, Need, Outcome, Pending, RedirectBase, State,
};
use crate::content::file::Resolution;
use crate::content::path::{self, CleanPath};
use crate::content::path_cache::Lookup;
use crate::content::sink::Sink;
use crate::response::body_stage::{BodyStage, Facts};
use crate::response::{Http1Framing, Persistence};
use crate::site::Route;
use crate::upstream::{BalanceKey, Pick, Pool, Report, ServerId};
use relay::{BodyEncoding, BodyRefused, RequestRelay, ResponseRelay};

/// Bytes queued towards either side past which the other side is not read: the bound on what
/// one proxied connection buffers in each direction.
pub(in crate::conn) const HIGH_WATER: usize = 64 << 10;

/// Interim (1xx) responses one attempt takes before its final head: `100 Continue` and a few
/// `103 Early Hints` are one or two, `102 Processing` one per some seconds of work. Past
/// this the response is invalid (`502`), so an upstream cannot keep a request parsing heads
/// for ever; `read_timeout` bounds the time they take (`proxy_read_deadline`).
const MAX_INTERIM: usize = 32;

/// A FastCGI request held while its script is looked up (`Conn::serve_fastcgi`).
#[derive(Debug)]
pub(in crate::conn) struct ScriptCheck(Box<fastcgi::Application>);

/// One proxied request.
#[derive(Debug)]
pub(in crate::conn) struct Proxy {
    pub exchange: Exchange,
    pub route: Arc<Route>,
    backend: Backend,
    request: RequestRelay,
    tried: Vec<ServerId>,
    /// The server of the current attempt (counted in flight on it while held).
    pick: Option<Pick>,
    /// The next connection may come from the idle pool (not after a pooled one failed).
    reuse: bool,
    /// GET, HEAD, PUT, DELETE, OPTIONS, TRACE (RFC 9110 §9.2.2): safe to send again.
    idempotent: bool,
    /// Interim responses the current attempt's upstream sent (`MAX_INTERIM`).
    interim: usize,
    /// The client asked for a WebSocket and the location allows it.
    websocket: bool,
    stage: Stage,
}

/// Who answers, and what the exchange keeps for that kind of upstream.
#[derive(Debug)]
enum Backend {
    /// An HTTP server of a pool.
    Http {
        settings: Box<ProxySettings>,
        pool: Arc<Pool>,
        /// The path and query requested upstream.
        target: String,
    },
    /// A FastCGI application, a server of a pool.
    FastCgi(Box<fastcgi::Application>),
    /// A CGI script started for this request.
    Cgi(Box<cgi::Script>),
}

/// What reads the response head.
#[derive(Debug)]
enum HeadParser {
    /// An HTTP/1.1 status line and fields.
    Http(ResponseParser),
    /// A CGI response's fields (FastCGI's standard output, a script's).
    Cgi(CgiParser),
}

#[derive(Debug)]
enum Stage {
    /// Choose a server and ask the engine for a connection to it.
    Connect,
    /// `Need::Connect` is out.
    Opening,
    /// The request is going out; the response head has not arrived (whole).
    Head(HeadParser),
    /// The response head went to the client; its body follows.
    Body {
        relay: ResponseRelay,
        status: u16,
        /// The upstream's head allows another request on its connection.
        keep_alive: bool,
        /// Bytes of the head sent to the client (for the access log).
        head_bytes: u64,
    },
    /// `101 Switching Protocols`: bytes pass both ways untouched.
    Tunnel {
        head_bytes: u64,
        /// Bytes passed from the upstream to the client.
        down: u64,
    },
}

/// A response relayed whole: what the access log and the upstream connection's reuse need.
struct Complete {
    status: u16,
    head_bytes: u64,
    body_bytes: u64,
    /// An HTTP upstream's head allowed another request and its body was delimited.
    http_delimited: bool,
}

/// What a step of the exchange leaves the connection to do.
pub(in crate::conn) enum Step {
    /// Go on with the exchange (its stage changed).
    Again(Box<Proxy>),
    /// Return this to the engine, the exchange still in progress.
    Wait(Box<Proxy>, Need),
    /// The exchange is over; the connection's state says what follows.
    Over,
    /// The exchange is over and handed to the static path, which needs this job run.
    Job(Job),
}

/// What a proxy location answers `405` with.
const PROXY_ALLOW: &[u8] = b"GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS";

/// A proxy location passes every method to its upstream (which decides, `OPTIONS` included),
/// except tunnels to arbitrary hosts and request echoes, which are not a reverse proxy's to
/// pass on (nginx answers them the same way).
pub(super) fn methods(method: &Method) -> Methods {
    match method {
        Method::Connect | Method::Trace => Methods::NotAllowed(PROXY_ALLOW),
        _ => Methods::Take,
    }
}

impl Conn {
    /// The proxy handler.
    pub(super) fn serve_proxy(
        &mut self,
        routed: Routed,
        settings: ProxySettings,
        context: &mut Context<'_>,
    ) -> Option<Job> {
        let target = proxy_target(&routed.route, &settings, &routed.clean, &routed.redirect);
        let websocket = settings.websocket && wants_websocket(&routed.exchange);
        let backend = Backend::Http {
            pool: context.upstreams.pool(settings.pool).clone(),
            settings: Box::new(settings),
            target,
        };
        self.start_exchange(routed.exchange, routed.route, backend, websocket);
        None
    }

    /// The FastCGI handler: where the location checks scripts (`Route::script_root`), the
    /// script is looked up first, through the path cache or a translation job as a static
    /// file is (never a `stat` on the event loop), and a request for one that is not there is
    /// answered `404` here: nginx's `try_files $fastcgi_script_name =404`, without which
    /// `/uploads/x.jpg/a.php` reaches php-fpm, whose `cgi.fix_pathinfo` walks back to the
    /// upload and runs it unless `security.limit_extensions` stops it.
    pub(super) fn serve_fastcgi(
        &mut self,
        routed: Routed,
        settings: &FastCgiSettings,
        context: &mut Context<'_>,
    ) -> Option<Job> {
        let Some(application) = fastcgi::Application::new(&routed, settings, context) else {
            return self.answer(&routed.exchange, Some(&routed.route), 404, &[], context);
        };
        let Some(root) = routed.route.script_root.clone() else {
            let backend = Backend::FastCgi(Box::new(application));
            self.start_exchange(routed.exchange, routed.route, backend, false);
            return None;
        };
        let Some(path) = application.script_below(&routed.route) else {
            return self.answer(&routed.exchange, Some(&routed.route), 404, &[], context);
        };
        let Routed {
            exchange,
            route,
            redirect,
            ..
        } = routed;
        let pending = Pending {
            exchange,
            route,
            path,
            redirect,
            resolved: None,
            retried: false,
            script: Some(ScriptCheck(Box::new(application))),
            trying: super::Trying::default(),
        };
        let previous =
            match context
                .caches
                .lookup(root.id, pending.path.as_str(), context.clock.now())
            {
                Lookup::Fresh(resolved) => {
                    let outcome = self.script_checked(pending, &resolved.resolution, context);
                    return self.settle(outcome, context);
                }
                Lookup::Stale(previous) => Some(previous),
                Lookup::Missing => None,
            };
        let job = Job::Resolve {
            root,
            path: pending.path.clone(),
            watcher: context.caches.watcher.clone(),
            previous,
        };
        self.settle(Outcome::NeedJob(job, Box::new(pending)), context)
    }

    /// The script of `pending` (a FastCGI request, `serve_fastcgi`) was looked up: run it if
    /// it is a file (one ampd may not read is still the application's to judge), else answer.
    pub(in crate::conn) fn script_checked(
        &mut self,
        pending: Pending,
        resolution: &Resolution,
        context: &mut Context<'_>,
    ) -> Outcome {
        let Pending {
            exchange,
            route,
            script,
            ..
        } = pending;
        let status = match resolution {
            Resolution::File(_) | Resolution::Forbidden => {
                if let Some(ScriptCheck(application)) = script {
                    self.start_exchange(exchange, route, Backend::FastCgi(application), false);
                    return Outcome::Routed(None);
                }
                500
            }
            Resolution::Failed => 500,
            Resolution::Exhausted => 503,
            Resolution::NotFound
            | Resolution::Variants(_)
            | Resolution::AddSlash
            | Resolution::Listing(_)
            | Resolution::DirectoryForbidden
            | Resolution::Script(_) => 404,
        };
        let retry = context
            .config
            .admission
            .retry_after
            .as_secs()
            .max(1)
            .to_string();
        let extra: &[(&str, &[u8])] = if status == 503 {
            &[("Retry-After", retry.as_bytes())]
        } else {
            &[]
        };
        Outcome::Routed(self.answer(&exchange, Some(&route), status, extra, context))
    }

    /// The CGI handler.
    pub(super) fn serve_cgi(&mut self, routed: Routed, settings: CgiSettings) -> Option<Job> {
        let script = cgi::Script::new(&routed, settings);
        self.start_exchange(
            routed.exchange,
            routed.route,
            Backend::Cgi(Box::new(script)),
            false,
        );
        None
    }

    /// Begin the exchange of `exchange` (its body, if any, still unread) with `backend`.
    fn start_exchange(
        &mut self,
        exchange: Exchange,
        route: Arc<Route>,
        backend: Backend,
        websocket: bool,
    ) {
        let mut exchange = exchange;
        let body = exchange.body.take();
        if body.is_some() && exchange.head.expect_continue {
            // The client waits for this before it sends the body (RFC 9110 §10.1.1); the
            // upstream's own `100` is not passed on.
            self.output.begin_head(100);
            self.output.end_head(crate::response::Http1Framing::INTERIM);
        }
        let encoding = match backend {
            Backend::Http { .. } => BodyEncoding::Http,
            Backend::FastCgi(_) => BodyEncoding::FastCgi,
            Backend::Cgi(_) => BodyEncoding::Raw,
        };
        let request = RequestRelay::new(body, encoding);
        let idempotent = matches!(
            exchange.head.method,
            Method::Get
                | Method::Head
                | Method::Put
                | Method::Delete
                | Method::Options
                | Method::Trace
        );
        let proxy = Proxy {
            exchange,
            route,
            backend,
            request,
            tried: Vec::new(),
            pick: None,
            reuse: true,
            idempotent,
            interim: 0,
            websocket,
            stage: Stage::Connect,
        };
        self.state = State::Proxying(Box::new(proxy));
    }

    /// Take the exchange as far as it goes; `None` when it is over (the state says what next).
    pub(in crate::conn) fn advance_proxy(&mut self, context: &mut Context<'_>) -> Option<Need> {
        let State::Proxying(mut proxy) = std::mem::replace(&mut self.state, State::ReadingHead)
        else {
            return None;
        };
        // The link failed and the bytes it left could not be used: its failure is acted on.
        let mut stuck = false;
        loop {
            // What the upstream sent before it failed is used first: a reset often comes in
            // the same wake-up as the bytes before it (a FastCGI application killed after
            // writing its head, with the rest of the request unread), and a head among them
            // must reach the client and then be cut short, not be taken for no answer at all
            // (a `502` on a kept-alive connection, or a retry of a request already answered).
            let step = match self.failure() {
                Some(failure) if stuck || !self.upstream_bytes_left(&proxy) => {
                    self.proxy_failed(proxy, failure, context)
                }
                _ => self.proxy_step(proxy, context),
            };
            stuck = false;
            match step {
                Step::Again(next) => proxy = next,
                Step::Wait(next, need) => {
                    let failed = self
                        .link
                        .as_ref()
                        .is_some_and(|link| link.failure.is_some());
                    if failed && self.upstream_bytes_left(&next) && self.output_full() {
                        // They wait for room towards the client (`relay_body`, `tunnel`); no
                        // socket event will come for them, so the connection asks to be
                        // advanced again once its output has drained.
                        self.state = State::Proxying(next);
                        return Some(Need::Flush);
                    }
                    if failed {
                        stuck = true;
                        proxy = next;
                        continue;
                    }
                    self.state = State::Proxying(next);
                    return Some(need);
                }
                Step::Over => return None,
                Step::Job(job) => return Some(Need::Job(job)),
            }
        }
    }

    /// A failure of the attempt in progress, taken (it is acted on once).
    fn failure(&mut self) -> Option<Failure> {
        if let Some(failure) = self.open_failure.take() {
            return Some(failure);
        }
        let link = self.link.as_mut()?;
        if let Some(failure) = link.failure {
            return Some(failure);
        }
        None
    }

    fn proxy_step(&mut self, mut proxy: Box<Proxy>, context: &mut Context<'_>) -> Step {
        match proxy.stage {
            Stage::Connect if proxy.request.spooling() => self.spool_body(proxy, context),
            Stage::Connect => match &mut proxy.backend {
                Backend::Cgi(script) => {
                    let start = script.start();
                    self.start_script(proxy, start, context)
                }
                Backend::Http { pool, .. } => {
                    let pool = pool.clone();
                    self.choose_server(proxy, &pool, context)
                }
                Backend::FastCgi(application) => {
                    let pool = application.pool().clone();
                    self.choose_server(proxy, &pool, context)
                }
            },
            Stage::Opening => {
                let variables = match &proxy.backend {
                    Backend::FastCgi(application) if self.link.is_some() => self.gateway_variables(
                        &proxy,
                        application.clean(),
                        Some(application.script()),
                        context,
                    ),
                    _ => Vec::new(),
                };
                let secure = self.is_secure();
                let Some(link) = self.link.as_mut() else {
                    // The engine answers `Need::Connect` before advancing again.
                    return Step::Wait(proxy, Need::Wait);
                };
                let out = link.queue();
                let parser = match &proxy.backend {
                    Backend::Http {
                        settings,
                        pool,
                        target,
                    } => {
                        let Some(pick) = &proxy.pick else {
                            unreachable!("a server was chosen for a proxy location")
                        };
                        head::forward(
                            &head::Forward {
                                exchange: &proxy.exchange,
                                settings,
                                target,
                                client: self.peer,
                                secure,
                                body: proxy.request.forward_body(),
                                websocket: proxy.websocket,
                                keep_alive: pool.settings().keepalive > 0,
                                server: pick.address(),
                            },
                            out,
                        );
                        HeadParser::Http(ResponseParser::new(head::response_limits(context.config)))
                    }
                    Backend::FastCgi(application) => {
                        application.write_request(&variables, proxy.request.done(), out);
                        HeadParser::Cgi(CgiParser::new(head::response_limits(context.config)))
                    }
                    Backend::Cgi(_) => {
                        HeadParser::Cgi(CgiParser::new(head::response_limits(context.config)))
                    }
                };
                if let Some(kept) = proxy.request.kept() {
                    out.extend_from_slice(kept);
                }
                if matches!(proxy.backend, Backend::Cgi(_)) && proxy.request.done() {
                    link.output_ended = true;
                }
                proxy.interim = 0;
                proxy.stage = Stage::Head(parser);
                Step::Again(proxy)
            }
            Stage::Head(_) | Stage::Body { .. } => self.exchange_data(proxy, context),
            Stage::Tunnel { head_bytes, down } => self.tunnel(proxy, head_bytes, down, context),
        }
    }

    /// Once the request is out: move the client's body on, take the upstream's records apart,
    /// then read the response head or relay the body, as the stage holds a parser or a relay.
    fn exchange_data(&mut self, mut proxy: Box<Proxy>, context: &mut Context<'_>) -> Step {
        if let Err(refused) = self.forward_body(&mut proxy) {
            return self.body_refused(proxy, refused, context);
        }
        if let Err(why) = self.demultiplex(&mut proxy) {
            return if matches!(proxy.stage, Stage::Body { .. }) {
                self.cut_short(proxy, &why, context)
            } else {
                self.invalid_response(proxy, &why, context)
            };
        }
        let Some(link) = self.link.as_mut() else {
            return Step::Wait(proxy, Need::Wait);
        };
        let link_finished = link.finished;
        let Proxy { backend, stage, .. } = &mut *proxy;
        match stage {
            Stage::Head(HeadParser::Http(parser)) => {
                let parsed = parser.parse(&link.input);
                match &parsed {
                    Ok(ResponseParse::Partial) if link_finished => {
                        link.failure = Some(Failure::Closed);
                        return Step::Again(proxy);
                    }
                    Ok(ResponseParse::Complete { len, .. }) => {
                        link.input.drain(..*len);
                        parser.reset();
                    }
                    _ => {}
                }
                self.read_response_head(proxy, parsed, context)
            }
            Stage::Head(HeadParser::Cgi(parser)) => {
                if let Backend::FastCgi(application) = backend {
                    if let Some(status) = application.refusal() {
                        let why = format!("refused the request ({status})");
                        return self.proxy_error(proxy, 503, &why, context);
                    }
                }
                let (output, ended) = response_stream(link, backend);
                let parsed = parser.parse(output);
                let empty = output.is_empty();
                if let Ok(CgiParse::Complete { len, .. }) = &parsed {
                    output.drain(..*len);
                }
                let ended = gateway::Ended {
                    output: ended,
                    link: link_finished,
                    empty,
                };
                self.read_gateway_head(proxy, parsed, ended, context)
            }
            Stage::Body {
                relay,
                status,
                keep_alive,
                head_bytes,
            } => {
                let next = relay_body(&mut self.output, link, backend, relay);
                let complete = Complete {
                    status: *status,
                    head_bytes: *head_bytes,
                    body_bytes: relay.body_bytes,
                    http_delimited: *keep_alive && relay.delimited(),
                };
                match next {
                    BodyNext::Wait => Step::Wait(proxy, Need::Read),
                    BodyNext::Complete => self.finish(proxy, &complete, context),
                    BodyNext::CutShort(why) => self.cut_short(proxy, why, context),
                }
            }
            // The other stages are `proxy_step`'s.
            Stage::Connect | Stage::Opening | Stage::Tunnel { .. } => Step::Again(proxy),
        }
    }

    /// Read a chunked body whole before the upstream is asked for (`RequestRelay::spool`).
    fn spool_body(&mut self, mut proxy: Box<Proxy>, context: &mut Context<'_>) -> Step {
        match proxy.request.spool(&self.input[self.consumed..]) {
            Ok(used) => self.consumed += used,
            Err(refused) => return self.body_refused(proxy, refused, context),
        }
        if !proxy.request.spooling() {
            return Step::Again(proxy);
        }
        if self.peer_finished && self.consumed == self.input.len() {
            return self.client_gone(proxy, context);
        }
        Step::Wait(proxy, Need::Read)
    }

    fn choose_server(
        &mut self,
        mut proxy: Box<Proxy>,
        pool: &Arc<Pool>,
        context: &mut Context<'_>,
    ) -> Step {
        let key = BalanceKey {
            client: self.peer,
            uri: &proxy.exchange.head.target,
        };
        let Some(pick) = pool.choose(key, &proxy.tried) else {
            return self.proxy_error(proxy, 502, "no server is available", context);
        };
        proxy.tried.push(pick.id);
        let settings = pool.settings();
        self.awaiting_link = Some(Timeouts {
            connect: settings.connect_timeout,
            send: settings.send_timeout,
            read: settings.read_timeout,
        });
        let keepalive = proxy.keepalive_for(&pick);
        if let Backend::FastCgi(application) = &mut proxy.backend {
            application.begin(keepalive > 0);
        }
        let connect = Connect::Server {
            address: pick.address().clone(),
            reuse: proxy.reuse && keepalive > 0,
        };
        proxy.pick = Some(pick);
        proxy.stage = Stage::Opening;
        Step::Wait(proxy, Need::Connect(LinkId::FIRST, connect))
    }

    /// Move the client's body towards the upstream, as far as the upstream's queue has room.
    fn forward_body(&mut self, proxy: &mut Proxy) -> Result<(), BodyRefused> {
        if proxy.request.done() {
            return Ok(());
        }
        let Some(link) = self.link.as_mut() else {
            return Ok(());
        };
        let room = HIGH_WATER.saturating_sub(link.pending());
        if room == 0 {
            return Ok(());
        }
        let input = &self.input[self.consumed..];
        let used = proxy.request.relay(input, link.queue(), room)?;
        self.consumed += used;
        if matches!(proxy.backend, Backend::Cgi(_)) && proxy.request.done() {
            // The script's standard input ends with the body.
            link.output_ended = true;
        }
        Ok(())
    }

    /// Act on the upstream's response head, or wait for the rest: `parsed` is what the parser
    /// made of the upstream's input (`exchange_data`, which takes a complete head off it and
    /// handles a partial one from an upstream that closed).
    fn read_response_head(
        &mut self,
        mut proxy: Box<Proxy>,
        parsed: Result<ResponseParse, ampd_http::upstream::UpstreamError>,
        context: &mut Context<'_>,
    ) -> Step {
        match parsed {
            Ok(ResponseParse::Partial) => {
                if self.peer_finished && !proxy.request.done() {
                    return self.client_gone(proxy, context);
                }
                if self.peer_finished && self.consumed == self.input.len() {
                    return self.client_gave_up(proxy, context);
                }
                Step::Wait(proxy, Need::Read)
            }
            Ok(ResponseParse::Complete { head, .. }) => {
                match head.status {
                    101 if proxy.websocket && head.upgrades_to("websocket") => {
                        self.begin_tunnel(proxy, &head, context)
                    }
                    // Interim responses: ours went out already (`start_proxy`); others are
                    // not passed on.
                    100..=199 if head.status != 101 => {
                        proxy.interim += 1;
                        if proxy.interim > MAX_INTERIM {
                            let why = format!("more than {MAX_INTERIM} interim responses");
                            return self.invalid_response(proxy, &why, context);
                        }
                        Step::Again(proxy)
                    }
                    _ => {
                        let body = if head.status == 101 {
                            // A switch the client did not ask for (or may not have here).
                            Err(None)
                        } else {
                            response_body(&head, &proxy.exchange.head.method).map_err(Some)
                        };
                        match body {
                            Ok(body) => match self.deferred(proxy, &head, &body, context) {
                                Ok(step) => step,
                                Err(proxy) => self.begin_response(proxy, &head, &body, context),
                            },
                            Err(error) => {
                                let why = error.map_or_else(
                                    || {
                                        "a 101 Switching Protocols that was not asked for"
                                            .to_owned()
                                    },
                                    |error| error.to_string(),
                                );
                                self.invalid_response(proxy, &why, context)
                            }
                        }
                    }
                }
            }
            Err(error) => self.invalid_response(proxy, &error.to_string(), context),
        }
    }

    /// A valid response head: report the server healthy, send the head to the client, and
    /// start relaying its body.
    fn begin_response(
        &mut self,
        mut proxy: Box<Proxy>,
        head: &ampd_http::upstream::ResponseHead,
        body: &ResponseBody,
        context: &mut Context<'_>,
    ) -> Step {
        proxy.report(Report::Success);
        let client_http11 = proxy.exchange.head.version == Version::Http11;
        let mut relay = ResponseRelay::new(body, client_http11);
        if !proxy.request.done() {
            // The upstream answered before the whole body arrived: the rest of it would have to
            // be read on the client's connection before another request; close instead.
            proxy.exchange.persistence = Persistence::Close;
        }
        let response = crate::conn::reply::response_context(
            context,
            proxy.exchange.persistence,
            Some(&proxy.route),
            self.is_secure(),
        );
        let mark = self.output.mark();
        let fields = self.output.begin_head(head.status);
        let framing = head::response_head(
            fields,
            head,
            &proxy.exchange.head,
            relay.framing,
            &response.head,
        );
        let facts = Facts {
            location: &proxy.route.settings,
            request: &proxy.exchange.head,
        };
        // The response stage: the body filters choose on the head as it goes out (after the
        // header rules); one that transforms the body changes its framing.
        self.output.end_head_shaped(|fields| {
            let stage = BodyStage::select(&facts, fields, head.content_length());
            relay.transform(stage, client_http11);
            let close = relay.framing == relay::ClientFraming::Close;
            Http1Framing {
                persistence: if close {
                    Persistence::Close
                } else {
                    framing.persistence
                },
                chunked: relay.framing == relay::ClientFraming::Chunked,
            }
        });
        if relay.framing == relay::ClientFraming::Close {
            proxy.exchange.persistence = Persistence::Close;
        }
        let (head_bytes, _) = self.output.written_since(mark);
        proxy.stage = Stage::Body {
            relay,
            status: head.status,
            keep_alive: head.keep_alive,
            head_bytes,
        };
        Step::Again(proxy)
    }

    /// The response is complete: log it, pool or close the upstream connection, and go on
    /// with the client's connection as its persistence says.
    fn finish(
        &mut self,
        proxy: Box<Proxy>,
        complete: &Complete,
        context: &mut Context<'_>,
    ) -> Step {
        let delimited = match &proxy.backend {
            Backend::Http { .. } => complete.http_delimited,
            Backend::FastCgi(application) => application.reusable(),
            Backend::Cgi(_) => false,
        };
        let reusable = delimited
            && proxy.request.done()
            && self
                .link
                .as_ref()
                .is_some_and(|link| !link.finished && link.input.is_empty() && link.pending() == 0);
        self.drop_link(proxy.release(reusable));
        self.record_sizes(
            Some(&proxy.exchange),
            complete.status,
            complete.head_bytes,
            complete.body_bytes,
            context,
        );
        let persistence = proxy.exchange.persistence;
        self.settle(crate::conn::Outcome::Responded(persistence), context);
        if !proxy.request.done() {
            self.state = State::Closing(Ending::Linger);
        }
        Step::Over
    }

    /// Hand the upstream socket back to the engine.
    pub(in crate::conn) fn drop_link(&mut self, release: Release) {
        self.awaiting_link = None;
        self.open_failure = None;
        if let Some(link) = self.link.take() {
            self.link_buffers = link.into_buffers();
            self.release = Some(release);
        }
    }

    /// Whether the upstream's bytes are not all used yet: read and not taken apart, or (FastCGI)
    /// standard output not yet passed on.
    fn upstream_bytes_left(&self, proxy: &Proxy) -> bool {
        let Some(link) = &self.link else {
            return false;
        };
        !link.input.is_empty()
            || matches!(&proxy.backend, Backend::FastCgi(application) if application.buffered() > 0)
    }

    /// Whether the client's output has no room for more of the upstream's bytes (`HIGH_WATER`).
    fn output_full(&self) -> bool {
        self.output.pending() >= HIGH_WATER as u64
    }

    /// Whether reading from the upstream is useful now.
    pub(in crate::conn) fn proxy_reads_upstream(&self) -> bool {
        let State::Proxying(proxy) = &self.state else {
            return false;
        };
        let Some(link) = &self.link else {
            return false;
        };
        if link.failure.is_some() || link.finished {
            return false;
        }
        let output = match &proxy.backend {
            Backend::FastCgi(application) if application.ended() => return false,
            Backend::FastCgi(application) => application.buffered(),
            _ => 0,
        };
        match proxy.stage {
            Stage::Head(_) => true,
            Stage::Body { .. } | Stage::Tunnel { .. } => {
                self.output.pending() < HIGH_WATER as u64
                    && link.input.len() < HIGH_WATER
                    && output < HIGH_WATER
            }
            Stage::Connect | Stage::Opening => false,
        }
    }

    /// When the upstream has waited too long to send (`upstream_deadline`, while it is read):
    /// `read_timeout` after bytes last moved, except for an HTTP upstream's response head once
    /// the whole request has gone out, which is due `read_timeout` after that, whatever comes
    /// before it (interim responses, a head dribbled a byte at a time): otherwise an upstream
    /// sending `102 Processing` every few seconds holds the request for ever.
    pub(in crate::conn) fn proxy_read_deadline(&self, link: &Link) -> Instant {
        let awaiting_head = matches!(
            &self.state,
            State::Proxying(proxy)
                if matches!(proxy.stage, Stage::Head(HeadParser::Http(_))) && proxy.request.done()
        );
        if awaiting_head && link.pending() == 0 {
            link.drained + link.timeouts.read
        } else {
            link.moved + link.timeouts.read
        }
    }

    /// Whether reading from the client is useful now (its body, or a tunnel's bytes).
    pub(in crate::conn) fn proxy_reads_client(&self) -> bool {
        let State::Proxying(proxy) = &self.state else {
            return false;
        };
        let waiting = self.input.len() - self.consumed;
        match proxy.stage {
            Stage::Tunnel { .. } => self
                .link
                .as_ref()
                .is_some_and(|link| link.pending() + waiting < HIGH_WATER),
            // While the response is awaited the client is read (bounded, pipelined requests
            // wait in the buffer), so that a client that gives up is noticed and its exchange
            // abandoned (`client_gave_up`); not while the body streams, when writing to it
            // shows whether it is still there.
            Stage::Head(_) if proxy.request.done() => waiting < HIGH_WATER,
            _ if proxy.request.done() => false,
            _ => match &self.link {
                Some(link) => link.pending() + waiting < HIGH_WATER,
                // Before the upstream connection, read no further than one buffer's worth.
                None => waiting < HIGH_WATER,
            },
        }
    }

    /// Whether the exchange is still reading the client's body (the body timeout applies).
    pub(in crate::conn) fn proxy_reading_body(&self) -> bool {
        matches!(&self.state, State::Proxying(proxy) if !proxy.request.done())
    }
}

impl Proxy {
    /// The pool the upstream server comes from (none for a CGI script).
    fn pool(&self) -> Option<&Arc<Pool>> {
        match &self.backend {
            Backend::Http { pool, .. } => Some(pool),
            Backend::FastCgi(application) => Some(application.pool()),
            Backend::Cgi(_) => None,
        }
    }

    /// Tell the pool how the current attempt went.
    fn report(&self, report: Report) {
        if let (Some(pool), Some(pick)) = (self.pool(), &self.pick) {
            pool.report(pick.id, report);
        }
    }

    /// Idle connections to `pick`'s server kept per loop.
    fn keepalive_for(&self, pick: &Pick) -> usize {
        match &self.backend {
            // Capped by what the application said it takes (`FCGI_MAX_CONNS`).
            Backend::FastCgi(application) => application.pool().keepalive_for(pick.id),
            _ => self.pool().map_or(0, |pool| pool.settings().keepalive),
        }
    }

    /// What to do with the upstream connection once the exchange is over: keep it when it is
    /// `reusable` and its pool keeps connections.
    fn release(&self, reusable: bool) -> Release {
        let (Some(pool), Some(pick)) = (self.pool(), &self.pick) else {
            return Release::Close;
        };
        let keepalive = self.keepalive_for(pick);
        if reusable && keepalive > 0 {
            Release::Keep {
                keepalive,
                timeout: pool.settings().keepalive_timeout,
            }
        } else {
            Release::Close
        }
    }

    /// What the error log calls the upstream: its pool, or the script.
    fn upstream_name(&self) -> String {
        match &self.backend {
            Backend::Cgi(script) => format!("cgi {}", script.describe()),
            Backend::FastCgi(application) => {
                format!("fastcgi {}", application.pool().settings().name)
            }
            Backend::Http { pool, .. } => pool.settings().name.clone(),
        }
    }

    /// Whether the upstream may hand the response back to the static path, and below which
    /// directory `X-Sendfile` may name files.
    fn handback(&self) -> (bool, Option<&std::path::PathBuf>) {
        self.route.settings.handler.handback()
    }
}

/// What relaying a response body's bytes leaves the exchange to do.
enum BodyNext {
    /// Read more from the upstream.
    Wait,
    /// The body is complete: finish the exchange.
    Complete,
    /// The body cannot be completed (why, for the error log).
    CutShort(&'static str),
}

/// Relay what the upstream sent of the response body to `output`, as far as `HIGH_WATER`
/// allows.
fn relay_body(
    output: &mut Output,
    link: &mut Link,
    backend: &mut Backend,
    relay: &mut ResponseRelay,
) -> BodyNext {
    let (input, ended) = response_stream(link, backend);
    let room = HIGH_WATER.saturating_sub(usize::try_from(output.pending()).unwrap_or(usize::MAX));
    if room > 0 && !input.is_empty() {
        match relay.relay(input, output.bytes(), room) {
            Ok(used) => {
                input.drain(..used);
            }
            Err(relay::BrokenBody(why)) => return BodyNext::CutShort(why),
        }
    }
    if relay.complete() {
        if let Err(relay::BrokenBody(why)) = relay.end(output.bytes()) {
            return BodyNext::CutShort(why);
        }
        if let Backend::FastCgi(application) = backend {
            // Output past the announced length is not passed on; the connection is
            // reusable only after the application's `FCGI_END_REQUEST`.
            application.discard_output();
            if !application.ended() && !link.finished {
                return BodyNext::Wait;
            }
        }
        return BodyNext::Complete;
    }
    if ended && input.is_empty() {
        return match relay.upstream_closed(output.bytes()) {
            Ok(true) => BodyNext::Complete,
            Ok(false) => BodyNext::CutShort("closed before the end of the body"),
            Err(relay::BrokenBody(why)) => BodyNext::CutShort(why),
        };
    }
    if link.finished && link.input.is_empty() {
        // A FastCGI application that closed without ending its request.
        return BodyNext::CutShort("closed without FCGI_END_REQUEST");
    }
    if output.pending() < HIGH_WATER as u64 {
        // Not held back by the client: the exchange waits for the upstream, which has paused
        // (everything it sent is used), so the body filters give up what they hold of it.
        if let Err(relay::BrokenBody(why)) = relay.upstream_paused(output.bytes()) {
            return BodyNext::CutShort(why);
        }
    }
    BodyNext::Wait
}

/// The bytes the response is read from, and whether they have ended: FastCGI's standard output
/// once taken out of its records, otherwise what the socket brought.
fn response_stream<'a>(link: &'a mut Link, backend: &'a mut Backend) -> (&'a mut Vec<u8>, bool) {
    match backend {
        Backend::FastCgi(application) => {
            let ended = application.ended();
            (application.output(), ended)
        }
        _ => (&mut link.input, link.finished),
    }
}

/// Whether the request asks to switch to WebSocket (RFC 6455 §4.1: a GET with `Upgrade:
/// websocket` and `Connection: upgrade`).
fn wants_websocket(exchange: &Exchange) -> bool {
    let head = &exchange.head;
    head.method == Method::Get
        && head
            .header("upgrade")
            .is_some_and(|value| value.eq_ignore_ascii_case(b"websocket"))
        && head.headers_named("connection").any(|value| {
            value
                .split(|&byte| byte == b',')
                .any(|token| token.trim_ascii().eq_ignore_ascii_case(b"upgrade"))
        })
}

#[cfg(test)]
mod tests;

/// The path and query a proxy location requests upstream: with a path in `proxy_pass`, it
/// replaces the location's prefix (the rest re-encoded from the normalised path); without one,
/// the target as the client sent it, or as a rewrite made it (nginx `proxy_pass` semantics).
fn proxy_target(
    route: &Route,
    settings: &ProxySettings,
    clean: &CleanPath,
    redirect: &RedirectBase,
) -> String {
    let mut target = match settings.path.as_deref() {
        Some(prefix) => {
            let rest = route.rest(clean.as_str());
            let mut target = prefix.to_owned();
            if target.ends_with('/') && rest.starts_with('/') {
                target.pop();
            }
            target.push_str(&path::encode_path(rest));
            target
        }
        None if redirect.rewritten => path::encode_path(clean.as_str()),
        None => redirect.path.clone(),
    };
    if let Some(query) = &redirect.query {
        target.push('?');
        target.push_str(query);
    }
    target
}

#[cfg(test)]
mod fastcgi_tests;
