//! An HTTP/2 connection, server side: `Conn` in `State::Http2` hands its input and output to a
//! `Session`.
//!
//! Owns: the streams of one connection, each served by an inner `Conn` (`stream.rs`) so that
//! every handler — static files with their caches, ranges and conditionals, status, health,
//! the proxy, FastCGI and CGI — answers HTTP/2 as it answers HTTP/1; arbitration of what the
//! engine does for the streams: one job at a time (a batch of every stream's disk work), and an
//! upstream link per stream that talks to an upstream, up to `[http2] max_upstream_streams` at
//! once (the streams past it wait their turn in the order they asked); pacing (requests that
//! arrive together are started a few at a time, so the first responses leave while the rest
//! are served); the order responses go in (the most urgent first, RFC 9218; round-robin within
//! an urgency, one share per stream per pass, so one large download does not starve the
//! others); the connection's phase for the engine's timeouts; GOAWAY on a graceful stop.
//! Must not touch: the protocol (`ampd_http::h2::Connection` owns frames, HPACK, windows and
//! stream states), sockets and threads (the engine drives `Conn` exactly as for HTTP/1).

mod stream;

use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;

use ampd_http::h2::{Connection, ErrorCode, Event, Priority, StreamId};
use ampd_http::request::{BodyFraming, RequestHead};

use super::output::Output;
use super::upstream::{LinkId, Release};
use super::{Context, Ending, Need, Phase, State};
use crate::conn::Conn;
use crate::content::job::{Job, JobDone};
use crate::response::{Head, Persistence};
use crate::tls::TlsInfo;
use stream::{BodyFeed, Framing, Queued, Stream};

/// Body bytes one stream may have framed per pass over the streams: one full DATA frame at the
/// default frame size.
const QUANTUM: u32 = 16 << 10;

/// Framing stops while this much is queued for the socket (the engine writes, then asks
/// again): enough for a TLS batch of full records, small enough that a stream opened now is
/// answered before a large download's next share.
const FRAMED_HIGH_WATER: u64 = 128 << 10;

/// Requests without a body that arrived together are started this many at a time, and no more
/// are started while `FIRST_WRITE` bytes wait for the socket: a browser's page sends its
/// dozens of requests in one packet, and serving all of them before writing anything held the
/// first response back by the time of all the others (a page of 120: about half a
/// millisecond), while the client had nothing to do. Started in batches, the first responses
/// leave at once and the rest are served while the client reads them.
const OPEN_BATCH: usize = 8;

/// See `OPEN_BATCH`: two full TLS records, half the default connection window.
const FIRST_WRITE: u64 = 32 << 10;

/// Inner `Conn`s of ended streams kept for the next streams (`Conn::renew`): a client that
/// keeps several requests in flight reuses them rather than allocating a `Conn` and its
/// buffers per request. Bounded so an idle connection keeps only a few kilobytes.
const SPARE_CONNS: usize = 8;

/// A spare's output buffer larger than this is freed rather than kept (a proxied response
/// may have grown it).
const SPARE_BUFFER_MAX: usize = 16 << 10;

/// What every stream's inner `Conn` inherits from the connection.
#[derive(Debug, Clone)]
struct Origin {
    peer: IpAddr,
    peer_port: u16,
    local: SocketAddr,
    secure: bool,
    tls: Option<Arc<TlsInfo>>,
}

#[derive(Debug)]
pub(super) struct Session {
    connection: Connection,
    streams: Vec<Stream>,
    /// Requests without a body received but not started yet (`OPEN_BATCH`), in arrival order.
    deferred: VecDeque<(StreamId, RequestHead)>,
    origin: Origin,
    /// The response head being encoded (reused for every response).
    head: Head,
    /// The streams whose jobs are out, in the order of the job handed (the engine runs one
    /// per connection: a single job, or a `Job::Batch` of every stream that needed one).
    job_owners: Vec<StreamId>,
    /// The stream each upstream link is attached to, by `LinkId` (at most
    /// `max_upstream_streams`).
    links: Vec<Option<StreamId>>,
    /// `[http2] max_upstream_streams`.
    max_links: usize,
    /// Upstream sockets reset or finished streams let go of, for `take_upstream_release`.
    releases: Vec<(LinkId, Release)>,
    /// Where the next framing pass starts (round-robin).
    cursor: usize,
    /// GOAWAY NO_ERROR was sent for a graceful stop.
    announced_stop: bool,
    /// Requests started on this connection.
    served: u32,
    /// Inner `Conn`s of ended streams, for the next ones: boxed, because the box is what a
    /// stream holds and what is reused.
    #[allow(clippy::vec_box)]
    spare: Vec<Box<Conn>>,
}

impl Session {
    /// A session for `conn`, which has just agreed on HTTP/2 (ALPN `h2`, or the preface on an
    /// `h2c` listener); its queued SETTINGS go out with the first output.
    pub(super) fn new(conn: &Conn, context: &Context<'_>) -> Session {
        Session {
            connection: Connection::new(&context.config.http2.limits),
            streams: Vec::new(),
            deferred: VecDeque::new(),
            origin: Origin {
                peer: conn.peer,
                peer_port: conn.peer_port,
                local: conn.local,
                secure: conn.secure,
                tls: conn.tls.clone(),
            },
            head: Head::default(),
            job_owners: Vec::new(),
            links: Vec::new(),
            max_links: context
                .config
                .http2
                .max_upstream_streams
                .clamp(1, LinkId::LIMIT),
            releases: Vec::new(),
            cursor: 0,
            announced_stop: false,
            served: 0,
            spare: Vec::new(),
        }
    }

    /// Inner `Conn`s kept for later streams.
    #[cfg(test)]
    pub(super) fn spare_conns(&self) -> usize {
        self.spare.len()
    }

    /// Requests received and not started yet.
    #[cfg(test)]
    pub(super) fn waiting_to_start(&self) -> usize {
        self.deferred.len()
    }

    pub(super) fn served(&self) -> u32 {
        self.served
    }

    /// Read what `input` holds, serve the streams, frame their responses into `output`.
    /// Returns the input bytes used and what the connection needs next.
    pub(super) fn advance(
        &mut self,
        input: &[u8],
        output: &mut Output,
        peer_finished: bool,
        context: &mut Context<'_>,
    ) -> (usize, Need) {
        let mut events = Vec::new();
        let used = self.connection.receive(input, Instant::now(), &mut events);
        for event in events {
            self.on_event(event, context);
        }
        if context.draining && !self.announced_stop {
            self.announced_stop = true;
            self.connection.go_away(ErrorCode::NoError);
        }
        use crate::content::sink::Sink as _;
        let (handed, more) = loop {
            self.open_deferred(context);
            let handed = self.serve_streams(context);
            self.connection.write_control(output.bytes());
            let more = self.frame(output);
            self.settle_ended();
            self.connection.write_control(output.bytes());
            if handed.is_some() || self.deferred.is_empty() || output.pending() >= FIRST_WRITE {
                break (handed, more || !self.deferred.is_empty());
            }
        };

        if self.connection.is_closing() {
            self.drop_streams();
            return (used, Need::Close(Ending::Linger));
        }
        if let Some(need) = handed {
            return (used, need);
        }
        let finished_reading = peer_finished && used == input.len();
        if finished_reading {
            self.abandon_unfinished_requests();
        }
        // A client's GOAWAY alone does not end the connection: it may still send frames
        // (a PING is answered, RFC 9113 §6.8); it closes, or the idle timeout does.
        if (self.connection.is_going_away() || finished_reading)
            && self.streams.is_empty()
            && self.deferred.is_empty()
        {
            return (used, Need::Close(Ending::Close));
        }
        if more {
            return (used, Need::Flush);
        }
        (used, Need::Read)
    }

    fn on_event(&mut self, event: Event<'_>, context: &mut Context<'_>) {
        match event {
            // A request without a body waits its turn (`OPEN_BATCH`); one with a body starts
            // at once, so that its DATA frames have a stream to go to.
            Event::Request {
                stream,
                head,
                end_stream: true,
            } => self.deferred.push_back((stream, head)),
            Event::Request {
                stream,
                head,
                end_stream: false,
            } => self.open(stream, head, false, context),
            Event::Refused { stream, status } => {
                let mut conn = self.inner_conn(context);
                conn.reply_to(None, status, Persistence::Close, &[], context);
                conn.state = State::Closing(Ending::Close);
                let mut refused = Stream::new(stream, conn, BodyFeed::Plain, true);
                refused.answered = true;
                self.streams.push(refused);
            }
            Event::Data {
                stream,
                data,
                end_stream,
            } => match self.streams.iter_mut().find(|entry| entry.id == stream) {
                Some(entry) if !entry.answered => entry.receive_body(data, end_stream),
                // Answered already (a refused body): the bytes are dropped, their credit given
                // back so the connection's window does not shrink.
                _ => self.connection.release_body(stream, data.len()),
            },
            Event::Reset { stream, .. } => self.forget(stream),
            Event::WindowOpened | Event::GoAway { .. } => {}
        }
    }

    /// A new stream: its inner `Conn` starts on the request at once.
    fn open(
        &mut self,
        id: StreamId,
        mut head: RequestHead,
        end_stream: bool,
        context: &mut Context<'_>,
    ) {
        self.served += 1;
        // One exchange per inner `Conn`: it answers, then ends (the stream's end is its close).
        head.keep_alive = false;
        let feed = match head.body {
            BodyFraming::Chunked => BodyFeed::Chunked,
            BodyFraming::None | BodyFraming::Length(_) => BodyFeed::Plain,
        };
        // Without a `priority` field a response shares its level (see `frame`).
        let priority = {
            let mut fields = head.headers_named("priority").peekable();
            if fields.peek().is_some() {
                Priority::of(fields)
            } else {
                Priority {
                    incremental: true,
                    ..Priority::default()
                }
            }
        };
        let mut conn = self.inner_conn(context);
        let job = conn.on_request(head, context);
        let mut stream = Stream::new(id, conn, feed, end_stream);
        stream.priority = priority;
        if let Some(job) = job {
            stream.queued = Queued::Job(job);
        }
        self.streams.push(stream);
    }

    /// Start up to `OPEN_BATCH` of the requests waiting.
    fn open_deferred(&mut self, context: &mut Context<'_>) {
        for _ in 0..OPEN_BATCH {
            let Some((id, head)) = self.deferred.pop_front() else {
                return;
            };
            self.open(id, head, true, context);
        }
    }

    fn inner_conn(&mut self, context: &Context<'_>) -> Box<Conn> {
        let mut conn = match self.spare.pop() {
            Some(mut spare) => {
                spare.renew(context.config, self.origin.peer);
                spare
            }
            None => Box::new(Conn::new(context.config, self.origin.peer)),
        };
        // The PROXY protocol header, if any, was the connection's, read before the preface.
        conn.state = State::ReadingHead;
        // The stream encodes the response head as HPACK fields, straight from the data.
        conn.output.set_structured_heads(true);
        conn.peer_port = self.origin.peer_port;
        conn.local = self.origin.local;
        conn.secure = self.origin.secure;
        conn.tls.clone_from(&self.origin.tls);
        conn
    }

    /// The client (or the protocol) reset `id`: its work is dropped.
    fn forget(&mut self, id: StreamId) {
        self.deferred.retain(|(deferred, _)| *deferred != id);
        let Some(at) = self.streams.iter().position(|entry| entry.id == id) else {
            return;
        };
        // Its upstream socket closes; the other streams' links go on.
        self.unlink(at);
        if self.job_owners.contains(&id) {
            // The engine still runs its job: the stream stays until `job_done`.
            self.streams[at].cancelled = true;
            return;
        }
        let stream = self.streams.remove(at);
        if stream.unreleased > 0 {
            self.connection.release_body(id, stream.unreleased);
        }
    }

    /// Advance every stream's inner `Conn`; then hand the engine a job if a stream needs one
    /// and none is out, or an upstream link for the first stream (in the order they opened)
    /// that needs one: its own again (a retry on another server), or a free one while fewer
    /// than `max_links` are held. A link let go of in the first pass can be handed on in the
    /// second: every engine takes the releases (`take_upstream_release`) before it carries
    /// out the next `Need::Connect`.
    fn serve_streams(&mut self, context: &mut Context<'_>) -> Option<Need> {
        for stream in &mut self.streams {
            if stream.cancelled || stream.answered {
                continue;
            }
            if matches!(stream.queued, Queued::Nothing) {
                match stream.conn.advance(context) {
                    Need::Job(job) => stream.queued = Queued::Job(job),
                    Need::Connect(_, connect) => stream.queued = Queued::Connect(connect),
                    Need::Close(_) => stream.answered = true,
                    Need::Read | Need::Flush | Need::Wait => {}
                }
            }
            let credit = stream.take_credit();
            if credit > 0 {
                self.connection.release_body(stream.id, credit);
            }
        }
        self.settle_links();
        if let Some(job) = self.take_jobs() {
            return Some(Need::Job(job));
        }
        self.take_connect()
    }

    /// The first `Need::Connect` a link is there for (see `serve_streams`).
    fn take_connect(&mut self) -> Option<Need> {
        let free = self.free_link();
        for stream in &mut self.streams {
            if !matches!(stream.queued, Queued::Connect(_)) {
                continue;
            }
            let held = self
                .links
                .iter()
                .position(|owner| *owner == Some(stream.id));
            let Some(index) = held.or(free) else {
                // Every link is held: it waits, and so do the streams after it that have
                // none (a retry on a link held already may still go).
                continue;
            };
            let (Some(link), Queued::Connect(connect)) = (
                LinkId::from_index(index),
                std::mem::replace(&mut stream.queued, Queued::Nothing),
            ) else {
                continue;
            };
            if index == self.links.len() {
                self.links.push(None);
            }
            self.links[index] = Some(stream.id);
            return Some(Need::Connect(link, connect));
        }
        None
    }

    /// The lowest link no stream holds, if fewer than `max_links` are held.
    fn free_link(&self) -> Option<usize> {
        match self.links.iter().position(Option::is_none) {
            Some(index) => Some(index),
            None if self.links.len() < self.max_links => Some(self.links.len()),
            None => None,
        }
    }

    /// Every stream's queued job, as one job (a `Job::Batch` when several wait), if none is
    /// out.
    fn take_jobs(&mut self) -> Option<Job> {
        if !self.job_owners.is_empty() {
            return None;
        }
        let mut jobs = Vec::new();
        for stream in &mut self.streams {
            if !matches!(stream.queued, Queued::Job(_)) {
                continue;
            }
            if let Queued::Job(job) = std::mem::replace(&mut stream.queued, Queued::Nothing) {
                self.job_owners.push(stream.id);
                jobs.push(job);
            }
        }
        match jobs.len() {
            0 => None,
            1 => jobs.pop(),
            _ => Some(Job::Batch(jobs)),
        }
    }

    /// Frame responses until the queue reaches its high water, the most urgent first (RFC 9218
    /// §10): a pass frames the most urgent level that has something to move, and the levels
    /// after it wait. Within a level, a response whose `priority` field asked for it whole (no
    /// `i`) goes first, one at a time in stream order; the others share the pass round-robin,
    /// a quantum each. A stream without the field is one of those others (not the RFC's
    /// default): one large download must not hold back the small responses beside it.
    /// Returns whether more could be framed at once.
    fn frame(&mut self, output: &mut Output) -> bool {
        let count = self.streams.len();
        if count == 0 {
            return false;
        }
        loop {
            let levels = self
                .streams
                .iter()
                .filter(|stream| !stream.cancelled)
                .fold(0u8, |levels, stream| levels | 1 << stream.priority.urgency);
            let mut moved = 0;
            for urgency in (0..8).filter(|urgency| levels & 1 << urgency != 0) {
                if self.frame_level(urgency, output, &mut moved) {
                    return true;
                }
                if moved > 0 {
                    break;
                }
            }
            self.cursor = (self.cursor + 1) % count;
            if moved == 0 {
                return false;
            }
        }
    }

    /// One pass over the streams of `urgency` (see `frame`), adding the bytes framed to
    /// `moved`. Returns true when the queue reached its high water.
    fn frame_level(&mut self, urgency: u8, output: &mut Output, moved: &mut u64) -> bool {
        let count = self.streams.len();
        let at_level = |stream: &Stream| !stream.cancelled && stream.priority.urgency == urgency;
        // Streams are kept in the order they opened, which is stream-id order.
        for stream in &mut self.streams {
            if !at_level(stream) || stream.priority.incremental {
                continue;
            }
            loop {
                if output.pending() >= FRAMED_HIGH_WATER {
                    return true;
                }
                let framed = stream.frame(&mut self.connection, &mut self.head, output, QUANTUM);
                *moved += framed;
                if framed == 0 {
                    break;
                }
            }
            if *moved > 0 {
                return false;
            }
        }
        for turn in 0..count {
            if output.pending() >= FRAMED_HIGH_WATER {
                self.cursor = (self.cursor + turn) % count;
                return true;
            }
            let stream = &mut self.streams[(self.cursor + turn) % count];
            if at_level(stream) {
                *moved += stream.frame(&mut self.connection, &mut self.head, output, QUANTUM);
            }
        }
        false
    }

    /// Streams whose response has ended are done: a client still sending a body we will not
    /// read is told to stop (RST_STREAM NO_ERROR, RFC 9113 §8.1).
    fn settle_ended(&mut self) {
        let mut at = 0;
        while at < self.streams.len() {
            let stream = &self.streams[at];
            if stream.framing != Framing::Ended || self.job_owners.contains(&stream.id) {
                at += 1;
                continue;
            }
            // Its exchange is over, and let its link go (`settle_links`); a socket still
            // attached now would have nothing to serve.
            self.unlink(at);
            let stream = self.streams.remove(at);
            if stream.unreleased > 0 {
                self.connection.release_body(stream.id, stream.unreleased);
            }
            if !stream.client_ended {
                self.connection.reset_stream(stream.id, ErrorCode::NoError);
            }
            keep_spare(&mut self.spare, stream.conn);
        }
    }

    /// The client hung up: a stream whose request body it never finished cannot be answered
    /// (its inner `Conn` would wait for the body timeout), and one still waiting for its
    /// upstream's answer (or for a link) is given up as an HTTP/1 client's FIN gives up a
    /// proxied request: its upstream link closes now, not when the upstream answers or times
    /// out. Streams whose answer has begun go on (a half-closed client may still read).
    fn abandon_unfinished_requests(&mut self) {
        let links = &self.links;
        let unfinished: Vec<StreamId> = self
            .streams
            .iter()
            .filter(|stream| {
                let awaits_upstream = (links.contains(&Some(stream.id))
                    || matches!(stream.queued, Queued::Connect(_)))
                    && stream.framing == Framing::Head
                    && stream.conn.output.is_empty();
                !stream.cancelled && (!stream.client_ended || awaits_upstream)
            })
            .map(|stream| stream.id)
            .collect();
        for id in unfinished {
            self.forget(id);
        }
    }

    fn drop_streams(&mut self) {
        self.deferred.clear();
        for at in 0..self.streams.len() {
            self.unlink(at);
        }
        let job_owners = &self.job_owners;
        self.streams
            .retain(|stream| job_owners.contains(&stream.id));
        for stream in &mut self.streams {
            stream.cancelled = true;
        }
    }

    /// The job out finished: each result goes to the stream that asked for it. A stream's
    /// next job (a translation's file data to load) waits in its queue, and the engine, which
    /// drives the connection next, gets every queued job in one (`serve_streams`), after the
    /// answers this job made possible are framed.
    pub(super) fn job_done(&mut self, done: JobDone, context: &mut Context<'_>) -> Option<Job> {
        let owners = std::mem::take(&mut self.job_owners);
        match done {
            JobDone::Batch(dones) => {
                for (owner, done) in owners.into_iter().zip(dones) {
                    self.finish_job(owner, done, context);
                }
            }
            done => {
                if let Some(&owner) = owners.first() {
                    self.finish_job(owner, done, context);
                }
            }
        }
        None
    }

    fn finish_job(&mut self, owner: StreamId, done: JobDone, context: &mut Context<'_>) {
        let Some(at) = self.streams.iter().position(|entry| entry.id == owner) else {
            return;
        };
        if self.streams[at].cancelled {
            self.streams.remove(at);
            return;
        }
        if let Some(next) = self.streams[at].conn.job_done(done, context) {
            self.streams[at].queued = Queued::Job(next);
        }
    }

    /// The connection timed out in its phase, or a stop closes it: GOAWAY, then close.
    pub(super) fn timed_out(&mut self, output: &mut Output) {
        self.connection.go_away(ErrorCode::NoError);
        self.drop_streams();
        use crate::content::sink::Sink as _;
        self.connection.write_control(output.bytes());
    }

    pub(super) fn phase(&self, buffered_input: usize) -> Phase {
        if self
            .streams
            .iter()
            .any(|stream| stream.blocked(&self.connection))
        {
            return Phase::Sending;
        }
        if self
            .linked_conns()
            .any(|conn| conn.phase() == Phase::Upstream)
        {
            return Phase::Upstream;
        }
        if !self.deferred.is_empty() || self.streams.iter().any(|stream| !stream.cancelled) {
            return Phase::Busy;
        }
        if self.connection.awaiting_preface() || buffered_input > 0 {
            return Phase::Head;
        }
        Phase::Idle
    }

    /// The inner `Conn` of the stream upstream link `link` belongs to.
    pub(super) fn linked(&self, link: LinkId) -> Option<&Conn> {
        let owner = (*self.links.get(link.index())?)?;
        self.streams
            .iter()
            .find(|entry| entry.id == owner)
            .map(|entry| &*entry.conn)
    }

    pub(super) fn linked_mut(&mut self, link: LinkId) -> Option<&mut Conn> {
        let owner = (*self.links.get(link.index())?)?;
        self.streams
            .iter_mut()
            .find(|entry| entry.id == owner)
            .map(|entry| &mut *entry.conn)
    }

    /// The inner `Conn`s that hold an upstream link.
    fn linked_conns(&self) -> impl Iterator<Item = &Conn> {
        self.streams
            .iter()
            .filter(|stream| self.links.contains(&Some(stream.id)))
            .map(|stream| &*stream.conn)
    }

    /// The earliest deadline of the streams' exchanges (`Conn::upstream_deadline`).
    pub(super) fn upstream_deadline(&self) -> Option<Instant> {
        self.linked_conns()
            .filter_map(Conn::exchange_deadline)
            .min()
    }

    /// The exchanges whose deadline has passed at `now` time out; the others go on.
    pub(super) fn upstream_timed_out(&mut self, now: Instant) {
        let links = &self.links;
        for stream in &mut self.streams {
            if !links.contains(&Some(stream.id)) {
                continue;
            }
            if stream
                .conn
                .exchange_deadline()
                .is_some_and(|deadline| now >= deadline)
            {
                stream.conn.exchange_timed_out();
            }
        }
    }

    /// Whether any stream has an upstream socket attached.
    pub(super) fn has_upstream(&self) -> bool {
        self.linked_conns().any(Conn::has_upstream)
    }

    /// An upstream socket to hand back: one a reset or finished stream let go of, or one a
    /// linked stream's exchange is done with.
    pub(super) fn take_release(&mut self) -> Option<(LinkId, Release)> {
        self.settle_links();
        self.releases.pop()
    }

    /// The linked streams' exchanges that let their upstream socket go: keep each release for
    /// the engine, and free the link for the next stream once its socket is detached (a
    /// stream that retries on another server keeps its link: `awaiting_link`).
    fn settle_links(&mut self) {
        for (index, owner) in self.links.iter_mut().enumerate() {
            let Some(id) = *owner else {
                continue;
            };
            let Some(link) = LinkId::from_index(index) else {
                continue;
            };
            let Some(stream) = self.streams.iter_mut().find(|entry| entry.id == id) else {
                *owner = None;
                continue;
            };
            let conn = &mut stream.conn;
            if let Some(release) = conn.release.take() {
                self.releases.push((link, release));
            }
            if !conn.has_upstream() && conn.awaiting_link.is_none() {
                *owner = None;
            }
        }
    }

    /// The stream at `at` lets go of its upstream link, if it holds one: its socket, if any,
    /// is closed (`Release::Close` for the engine).
    fn unlink(&mut self, at: usize) {
        let id = self.streams[at].id;
        let Some(index) = self.links.iter().position(|owner| *owner == Some(id)) else {
            return;
        };
        self.links[index] = None;
        let conn = &mut self.streams[at].conn;
        if conn.release.is_none() {
            conn.drop_link(Release::Close);
        }
        if let (Some(release), Some(link)) = (conn.release.take(), LinkId::from_index(index)) {
            self.releases.push((link, release));
        }
    }
}

/// Keep an ended stream's inner `Conn` for a later stream, if it holds no upstream link and
/// there is room.
#[allow(clippy::vec_box)]
fn keep_spare(spare: &mut Vec<Box<Conn>>, mut conn: Box<Conn>) {
    if spare.len() >= SPARE_CONNS || conn.has_upstream() || conn.release.is_some() {
        return;
    }
    if conn.output.buffer_capacity() > SPARE_BUFFER_MAX {
        conn.output = Output::default();
    }
    spare.push(conn);
}
