//! The connection state machine, sans-I/O: bytes in, response segments and `Need`s out.
//!
//! Owns: one client connection's HTTP/1.1 flow — head parsing, persistence (RFC 9112 §9),
//! pipelining (responses queued in order behind each other), discarding unused request bodies
//! (§6.3), method dispatch, and routing a request to the static-file handler (AFPA's
//! "derive request → cached / uncached response"). It says what it needs next and never blocks.
//! Must not touch: sockets, threads, the clock (the engine passes `Context`), the disk (a
//! `Job` goes back to the engine).

pub mod output;

use std::sync::Arc;

use ampd_http::chunked::ChunkedDecoder;
use ampd_http::request::{
    split_target, BodyFraming, HeadParser, Limits as ParseLimits, Method, Parse, RequestHead,
    Version,
};

use crate::config::Config;
use crate::content::caches::Caches;
use crate::content::file::{Resolution, Resolved};
use crate::content::job::{Job, JobDone};
use crate::content::path::{self, CleanPath, PathOptions};
use crate::content::resolve::DocRoot;
use crate::content::serve::{self, DiskAccess, Persistence, ResponseContext, Served, Sink};
use crate::content::status_page;
use output::Output;

/// Methods a static resource allows (RFC 9110 §10.2.1 `Allow`).
const ALLOW: &[u8] = b"GET, HEAD, OPTIONS";

/// Stop parsing pipelined requests while this much output is queued, so a client that sends
/// faster than it reads cannot make the server buffer without bound.
const OUTPUT_HIGH_WATER: u64 = 256 << 10;

/// Everything a connection reads from its loop: settings, caches, and the time.
pub struct Context<'a> {
    pub config: &'a Config,
    pub root: &'a Arc<DocRoot>,
    pub caches: &'a Caches,
    /// `Date` value for this second.
    pub date: &'a [u8; 29],
    pub disk: DiskAccess,
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

/// Where the connection is in its request cycle, for timeouts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Between requests on a persistent connection (keep-alive timeout).
    Idle,
    /// Part of a request head has arrived (header timeout, from the first byte).
    Head,
    /// Reading or discarding a request body, or waiting for a job.
    Busy,
    /// Output is queued (send timeout, reset by progress).
    Sending,
    /// Finished: flushing and closing.
    Closing,
}

/// A request held while a job runs for it.
#[derive(Debug)]
struct Pending {
    head: RequestHead,
    path: CleanPath,
    redirect: RedirectBase,
    persistence: Persistence,
    /// The translation being served, once known (the job is then a data load).
    resolved: Option<Arc<Resolved>>,
}

/// A request held while its body is read.
#[derive(Debug)]
struct Held {
    head: RequestHead,
    persistence: Persistence,
}

/// The request body left to read and throw away.
#[derive(Debug)]
enum BodyLeft {
    Length(u64),
    Chunked { decoder: ChunkedDecoder, seen: u64 },
}

#[derive(Debug)]
enum State {
    /// Waiting for (the rest of) a request head.
    ReadingHead,
    /// Discarding a request body the handler does not use (RFC 9112 §6.3: it must be read
    /// before the next request); the request is answered once it is read, so that a body past
    /// the limit gets its `413`.
    DiscardingBody { left: BodyLeft, request: Box<Held> },
    /// A job is out for this request.
    Waiting(Box<Pending>),
    /// No more requests: send what is queued, then end as `Ending` says.
    Closing(Ending),
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
}

impl Conn {
    #[must_use]
    pub fn new(config: &Config) -> Conn {
        let limits = ParseLimits {
            max_request_line: config.limits.max_request_line,
            max_head_bytes: config.limits.max_head_bytes,
            max_headers: config.limits.max_headers,
        };
        Conn {
            state: State::ReadingHead,
            parser: HeadParser::new(limits),
            input: Vec::new(),
            consumed: 0,
            output: Output::default(),
            peer_finished: false,
            served: 0,
        }
    }

    /// Bytes read from the socket. The engine reads into one buffer per loop and hands the
    /// bytes over, so an idle connection holds no read buffer of its own: memory per idle
    /// keep-alive connection stays below nginx's (see docs/benchmarks.md).
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

    /// Give back buffer memory while the connection is idle, so that thousands of idle
    /// keep-alive connections cost little more than their bookkeeping (nginx frees its header
    /// buffers of idle connections the same way).
    pub fn shed_buffers(&mut self) {
        if self.consumed == self.input.len() {
            self.input = Vec::new();
            self.consumed = 0;
        }
        self.output.shed();
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
            State::ReadingHead | State::DiscardingBody { .. } => !self.peer_finished,
            State::Waiting(_) | State::Closing(_) => false,
        }
    }

    #[must_use]
    pub fn phase(&self) -> Phase {
        match self.state {
            State::Closing(_) => Phase::Closing,
            _ if !self.output.is_empty() => Phase::Sending,
            State::ReadingHead if self.consumed == self.input.len() => Phase::Idle,
            State::ReadingHead => Phase::Head,
            State::DiscardingBody { .. } | State::Waiting(_) => Phase::Busy,
        }
    }

    /// The head timeout expired: answer `408` if a request had begun, then close.
    pub fn timed_out(&mut self, context: &Context<'_>) {
        if self.phase() == Phase::Head {
            self.refuse(408, context);
        } else {
            self.state = State::Closing(Ending::Linger);
        }
    }

    /// Answer a request that cannot be read to its end (broken head, refused body, timeout) and
    /// close: what the client sends after it is never read, so the close must linger.
    fn refuse(&mut self, status: u16, context: &Context<'_>) {
        let response = response_context(context, Persistence::Close);
        status_page::write(self.output.bytes(), status, &response, &[], true);
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
                State::Waiting(_) => return Need::Wait,
                State::DiscardingBody { left, .. } => {
                    match discard(
                        left,
                        &self.input[self.consumed..],
                        context.config.limits.max_body,
                    ) {
                        Discard::Consumed { used, done } => {
                            self.consumed += used;
                            if done {
                                let State::DiscardingBody { request, .. } =
                                    std::mem::replace(&mut self.state, State::ReadingHead)
                                else {
                                    unreachable!("matched above")
                                };
                                if let Some(job) =
                                    self.route(request.head, request.persistence, context)
                                {
                                    return Need::Job(job);
                                }
                            } else if self.peer_finished {
                                self.state = State::Closing(Ending::Close);
                            } else {
                                return Need::Read;
                            }
                        }
                        Discard::Refused(status) => self.refuse(status, context),
                    }
                }
                State::ReadingHead => {
                    if self.output.pending() > OUTPUT_HIGH_WATER {
                        return Need::Flush;
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
                        Err(error) => self.refuse(error.status(), context),
                    }
                }
            }
        }
    }

    /// A job this connection asked for finished. Returns the next job when serving needs one
    /// more (a path resolved to a small file whose data must now be loaded).
    pub fn job_done(&mut self, done: JobDone, context: &mut Context<'_>) -> Option<Job> {
        let State::Waiting(pending) = std::mem::replace(&mut self.state, State::ReadingHead) else {
            return None;
        };
        let outcome = match done {
            JobDone::Resolved(resolved) => {
                let resolved = Arc::new(resolved);
                context.caches.remember(pending.path.as_str(), &resolved);
                let disk = context.disk;
                self.respond(*pending, resolved, context, disk)
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
            // Page-ins are the engine's business (they serve output already queued).
            JobDone::PagedIn => {
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
        }
    }

    /// Route one parsed request. The phases read top to bottom: persistence, body framing,
    /// method, target, path, translation (cached or by a job), response.
    fn on_request(&mut self, head: RequestHead, context: &mut Context<'_>) -> Option<Job> {
        self.served += 1;
        let limits = &context.config.limits;
        let persistence = if !head.keep_alive || self.served >= limits.max_requests_per_connection {
            Persistence::Close
        } else if head.version == Version::Http10 {
            Persistence::KeepAlive
        } else {
            Persistence::Implicit
        };
        let head_only = head.method == Method::Head;

        let body = match head.body {
            BodyFraming::None | BodyFraming::Length(0) => None,
            BodyFraming::Length(length) if length > limits.max_body => {
                self.reply(413, Persistence::Close, head_only, &[], context);
                // The client may be sending the body we refused.
                self.state = State::Closing(Ending::Linger);
                return None;
            }
            BodyFraming::Length(length) => Some(BodyLeft::Length(length)),
            BodyFraming::Chunked => Some(BodyLeft::Chunked {
                decoder: ChunkedDecoder::new(),
                seen: 0,
            }),
        };
        // A client waiting for `100 Continue` sends the body only after it (RFC 9110 §10.1.1):
        // invite it, then read and discard the body as for any other request, so the
        // connection stays usable (nginx does the same when it discards a body).
        if body.is_some() && head.expect_continue {
            self.output
                .bytes()
                .extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
        }

        match body {
            Some(left) => {
                self.state = State::DiscardingBody {
                    left,
                    request: Box::new(Held { head, persistence }),
                };
                None
            }
            None => self.route(head, persistence, context),
        }
    }

    /// Answer a request whose body (if any) has been read.
    fn route(
        &mut self,
        head: RequestHead,
        persistence: Persistence,
        context: &mut Context<'_>,
    ) -> Option<Job> {
        let head_only = head.method == Method::Head;
        match head.method {
            Method::Get | Method::Head => {}
            Method::Options => {
                return self.reply(204, persistence, true, &[("Allow", ALLOW)], context)
            }
            Method::Other(_) => return self.reply(501, persistence, head_only, &[], context),
            _ => return self.reply(405, persistence, head_only, &[("Allow", ALLOW)], context),
        }

        let Some((_, raw_path, query)) = split_target(&head.target) else {
            return self.reply(400, Persistence::Close, head_only, &[], context);
        };
        if !raw_path.starts_with('/') {
            return self.reply(400, Persistence::Close, head_only, &[], context);
        }
        let options = &context.root.options;
        let path_options = PathOptions {
            allow_dotfiles: options.dotfiles,
            userdir: options.userdir.is_some(),
        };
        let clean = match path::normalize(raw_path, &path_options) {
            Ok(clean) => clean,
            Err(error) => return self.reply(error.status(), persistence, head_only, &[], context),
        };
        let redirect = RedirectBase {
            path: raw_path.to_owned(),
            query: query.map(str::to_owned),
        };
        let pending = Pending {
            head,
            path: clean,
            redirect,
            persistence,
            resolved: None,
        };

        let outcome = match context
            .caches
            .paths
            .lookup(pending.path.as_str(), std::time::Instant::now())
        {
            Some(resolved) => {
                let disk = context.disk;
                self.respond(pending, resolved, context, disk)
            }
            None => {
                let job = Job::Resolve {
                    root: context.root.clone(),
                    path: pending.path.clone(),
                    watcher: context.caches.watcher.clone(),
                };
                Outcome::NeedJob(job, Box::new(pending))
            }
        };
        self.settle(outcome)
    }

    /// Answer with a status page, keeping the connection per `persistence`.
    fn reply(
        &mut self,
        status: u16,
        persistence: Persistence,
        head_only: bool,
        extra: &[(&str, &[u8])],
        context: &Context<'_>,
    ) -> Option<Job> {
        let response = response_context(context, persistence);
        status_page::write(self.output.bytes(), status, &response, extra, !head_only);
        self.settle(Outcome::Responded(persistence))
    }

    /// Respond to `pending` from its translation.
    fn respond(
        &mut self,
        pending: Pending,
        resolved: Arc<Resolved>,
        context: &mut Context<'_>,
        disk: DiskAccess,
    ) -> Outcome {
        let mut response = response_context(context, pending.persistence);
        response.disk = disk;
        let head_only = pending.head.method == Method::Head;
        let out = &mut self.output;
        match &resolved.resolution {
            Resolution::File(file) => {
                match serve::serve_file(
                    &pending.head,
                    file,
                    resolved.watch,
                    context.caches,
                    &response,
                    out,
                ) {
                    Served::Sent { .. } => {}
                    Served::NeedData(job) => {
                        let pending = Pending {
                            resolved: Some(resolved.clone()),
                            ..pending
                        };
                        return Outcome::NeedJob(job, Box::new(pending));
                    }
                }
            }
            Resolution::AddSlash => {
                let mut location = pending.redirect.path.clone();
                location.push('/');
                if let Some(query) = &pending.redirect.query {
                    location.push('?');
                    location.push_str(query);
                }
                status_page::write(
                    out.bytes(),
                    301,
                    &response,
                    &[("Location", location.as_bytes())],
                    !head_only,
                );
            }
            Resolution::Listing(html) => {
                let bytes = out.bytes();
                ampd_http::response::write_status_line(bytes, 200);
                serve::common_headers(bytes, &response);
                bytes.extend_from_slice(b"Content-Type: text/html; charset=utf-8\r\n");
                ampd_http::response::write_content_length(bytes, html.len() as u64);
                bytes.extend_from_slice(b"\r\n");
                if !head_only {
                    out.shared(html.clone(), 0, html.len());
                }
            }
            Resolution::DirectoryForbidden | Resolution::Forbidden => {
                status_page::write(out.bytes(), 403, &response, &[], !head_only);
            }
            Resolution::NotFound => {
                status_page::write(out.bytes(), 404, &response, &[], !head_only)
            }
            Resolution::Failed => status_page::write(out.bytes(), 500, &response, &[], !head_only),
        }
        Outcome::Responded(pending.persistence)
    }
}

enum Outcome {
    Responded(Persistence),
    NeedJob(Job, Box<Pending>),
}

/// The request's path as sent (still percent-encoded) and query, for a `301` to `path/`.
#[derive(Debug)]
struct RedirectBase {
    path: String,
    query: Option<String>,
}

fn response_context<'a>(context: &Context<'a>, persistence: Persistence) -> ResponseContext<'a> {
    ResponseContext {
        date: context.date,
        persistence,
        disk: context.disk,
        sendfile_threshold: context.config.send.sendfile_threshold,
        max_ranges: context.config.limits.max_ranges,
    }
}

enum Discard {
    Consumed {
        used: usize,
        done: bool,
    },
    /// The body cannot be accepted: `413` past the limit, `400` when its framing is broken.
    Refused(u16),
}

/// Throw away body bytes from `input`; a chunked body past `max_body` ends the connection.
fn discard(left: &mut BodyLeft, input: &[u8], max_body: u64) -> Discard {
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
        BodyLeft::Chunked { decoder, seen } => {
            let mut total = *seen;
            let result = decoder.feed(input, &mut |data: &[u8]| total += data.len() as u64);
            *seen = total;
            match result {
                Ok(_) if total > max_body => Discard::Refused(413),
                Ok(progress) => Discard::Consumed {
                    used: progress.consumed,
                    done: progress.done,
                },
                Err(_) => Discard::Refused(400),
            }
        }
    }
}
