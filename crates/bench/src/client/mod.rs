//! One event loop simulating many HTTP clients, as the Flash paper's client did: each client is
//! an explicit state machine; one epoll instance drives them all from one thread.
//!
//! Owns: connecting, sending requests, reading responses through the strict parser, timeouts,
//! think times, open-loop arrivals, and the measurement window (warm-up excluded).
//! Must not touch: what to request (asks the `Workload`), how results are shown (`report.rs`).
//!
//! Cost per request is what wrk pays: one `send`, one `read` and a share of an `epoll_wait`.
//! Sockets are registered once, edge-triggered for both directions; a short read means the
//! socket is drained (TCP), so no extra `read` is spent to see `EAGAIN`.
//!
//! Sources: Flash §6 (an event-driven client; closed loop: the next request as soon as the last
//! response ends); httperf's `--rate` (open loop: arrivals at fixed intervals whatever the
//! server does, so overload shows up as latency and errors, as in Abyss §5). In open loop,
//! latency is counted from when a request was due, not when a free connection sent it, so
//! queueing in the client is not hidden ("coordinated omission").

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::time::{Duration, Instant};

use ampd_sys::epoll::{Epoll, Events, Interest};
use ampd_sys::{io as sysio, socket};

mod progress;
mod timers;

use progress::Progress;

use crate::response::{ParseError, Response, ResponseParser};
use crate::rng::Rng;
use crate::stats::{ErrorKind, Recorder};
use crate::target::Target;
use crate::workload::Workload;

/// When clients send.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Arrival {
    /// Each client sends its next request when its last response ends, after `think`.
    Closed { think: Duration },
    /// Requests are due `rate` times per second, on whichever connection is free.
    Open { rate: f64 },
}

/// How long a run lasts after its warm-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Length {
    Time(Duration),
    Requests(u64),
}

/// The settings of one run against one target.
#[derive(Debug, Clone)]
pub struct RunConfig {
    pub clients: usize,
    pub arrival: Arrival,
    pub keep_alive: bool,
    /// Requests written at once on a connection before reading their responses.
    pub pipeline: usize,
    pub length: Length,
    pub warmup: Duration,
    pub timeout: Duration,
    pub seed: u64,
    /// A label for the live progress line (shown only on a terminal).
    pub progress: Option<String>,
}

/// What a run measured.
#[derive(Debug)]
pub struct Outcome {
    pub recorder: Recorder,
    pub elapsed: Duration,
}

struct InFlight {
    request: usize,
    /// When the request was sent, or in open loop when it was due.
    sent: Instant,
    first_byte: Option<Instant>,
}

struct Connection {
    socket: OwnedFd,
    parser: ResponseParser,
    in_flight: VecDeque<InFlight>,
    output: Vec<u8>,
    written: usize,
    /// Whether the socket is registered for writability too (only while a send is unfinished).
    watching_writes: bool,
}

/// A simulated client. Every variant owns what the client holds in that state.
enum State {
    /// No connection and nothing to send.
    Idle,
    Connecting {
        socket: OwnedFd,
        started: Instant,
        /// Open loop: when the request this connection is for was due.
        due: Option<Instant>,
    },
    /// Requests not yet fully written (the socket buffer was full).
    Sending(Connection),
    ReadingHead(Connection),
    ReadingBody(Connection),
    /// Closed loop: waiting out the think time, keeping the connection if persistent.
    Thinking {
        connection: Option<Connection>,
        until: Instant,
    },
    /// Open loop: a persistent connection waiting for the next due request.
    Waiting(Connection),
}

struct Client {
    /// Bumped for every new socket, so events for a closed one are recognised as stale.
    generation: u32,
    state: State,
}

/// What an epoll event said about a client's socket.
#[derive(Debug, Clone, Copy, Default)]
struct Readiness {
    readable: bool,
    /// The peer closed or the socket has an error: read to the end of stream.
    hangup: bool,
}

/// What reading from a connection led to.
enum Next {
    /// Keep the connection in the state its parser and queue say.
    Continue(Connection),
    /// Every request sent on it has its response.
    BatchDone {
        connection: Connection,
        reusable: bool,
    },
    /// The connection is finished (error or close); the client starts over.
    Closed,
}

struct OpenLoop {
    interval: Duration,
    next_due: Instant,
    backlog: VecDeque<Instant>,
    waiting: Vec<usize>,
    idle: Vec<usize>,
}

/// Runs the workload against `target` and returns what was measured after the warm-up.
///
/// # Errors
/// Only failures of the machinery itself (epoll); connection problems are counted as errors.
pub fn run(target: &Target, workload: Workload, config: &RunConfig) -> io::Result<Outcome> {
    let mut driver = Driver::new(target, workload, config)?;
    driver.run()?;
    let elapsed = driver
        .measure_end
        .unwrap_or_else(Instant::now)
        .saturating_duration_since(driver.measure_from);
    Ok(Outcome {
        recorder: driver.recorder,
        elapsed,
    })
}

struct Driver<'a> {
    target: &'a Target,
    config: &'a RunConfig,
    epoll: Epoll,
    workload: Workload,
    rng: Rng,
    requests: Vec<Box<[u8]>>,
    clients: Vec<Client>,
    buffer: Vec<u8>,
    recorder: Recorder,
    measure_from: Instant,
    measure_end: Option<Instant>,
    thinking: BinaryHeap<Reverse<(Instant, usize)>>,
    open: Option<OpenLoop>,
}

impl<'a> Driver<'a> {
    fn new(target: &'a Target, workload: Workload, config: &'a RunConfig) -> io::Result<Self> {
        let connection = if config.keep_alive {
            ""
        } else {
            "Connection: close\r\n"
        };
        let requests = workload
            .resources
            .iter()
            .map(|resource| {
                format!(
                    "GET {} HTTP/1.1\r\nHost: {}\r\n{connection}\r\n",
                    resource.path, target.host
                )
                .into_bytes()
                .into_boxed_slice()
            })
            .collect();
        let clients = (0..config.clients.max(1))
            .map(|_| Client {
                generation: 0,
                state: State::Idle,
            })
            .collect();
        let now = Instant::now();
        Ok(Driver {
            target,
            config,
            epoll: Epoll::new()?,
            workload,
            rng: Rng::new(config.seed),
            requests,
            clients,
            buffer: vec![0; 256 * 1024],
            recorder: Recorder::default(),
            measure_from: now + config.warmup,
            measure_end: None,
            thinking: BinaryHeap::new(),
            open: None,
        })
    }

    fn run(&mut self) -> io::Result<()> {
        let start = Instant::now();
        self.measure_from = start + self.config.warmup;
        let deadline = match self.config.length {
            Length::Time(duration) => Some(self.measure_from + duration),
            Length::Requests(_) => None,
        };
        match self.config.arrival {
            Arrival::Closed { .. } => {
                for index in 0..self.clients.len() {
                    self.connect(index, None, start);
                }
            }
            Arrival::Open { rate } => {
                self.open = Some(OpenLoop {
                    interval: Duration::from_secs_f64(1.0 / rate.max(1e-3)),
                    next_due: start,
                    backlog: VecDeque::new(),
                    waiting: Vec::new(),
                    idle: (0..self.clients.len()).rev().collect(),
                });
            }
        }
        let mut progress = Progress::new(self.config.progress.clone(), self.measure_from);
        let mut events = Events::with_capacity(1024);
        let mut next_sweep = start;
        loop {
            let now = Instant::now();
            if deadline.is_some_and(|end| now >= end) {
                self.measure_end = deadline;
                break;
            }
            if let Length::Requests(count) = self.config.length {
                if now >= self.measure_from && self.recorder.finished() >= count {
                    self.measure_end = Some(now);
                    break;
                }
            }
            self.release_due(now);
            self.wake_thinkers(now);
            if now >= next_sweep {
                self.sweep_timeouts(now);
                next_sweep = now + Duration::from_millis(20);
            }
            progress.tick(now, &self.recorder);
            let mut wake = next_sweep.min(progress.next);
            if let Some(end) = deadline {
                wake = wake.min(end);
            }
            if let Some(Reverse((until, _))) = self.thinking.peek() {
                wake = wake.min(*until);
            }
            if let Some(open) = &self.open {
                wake = wake.min(open.next_due);
            }
            let wait = wake.saturating_duration_since(Instant::now());
            let timeout_ms = i32::try_from(wait.as_micros().div_ceil(1000)).unwrap_or(i32::MAX);
            self.epoll.wait(&mut events, timeout_ms)?;
            let now = Instant::now();
            if deadline.is_some_and(|end| now >= end) {
                // Responses that complete after the end are not part of the measured window.
                self.measure_end = deadline;
                break;
            }
            for event in events.iter() {
                let index = (event.token & 0xffff_ffff) as usize;
                let generation = (event.token >> 32) as u32;
                if index < self.clients.len() && self.clients[index].generation == generation {
                    let readiness = Readiness {
                        readable: event.readable || event.hangup || event.error,
                        hangup: event.hangup || event.error,
                    };
                    self.on_event(index, readiness, now);
                }
            }
        }
        progress.finish();
        Ok(())
    }

    fn measured(&self, since: Instant) -> bool {
        since >= self.measure_from
    }

    fn fail(&mut self, kind: ErrorKind, since: Instant) {
        if self.measured(since) {
            self.recorder.error(kind);
        }
    }

    /// Starts a connection for client `index`.
    fn connect(&mut self, index: usize, due: Option<Instant>, now: Instant) {
        let client = &mut self.clients[index];
        client.generation = client.generation.wrapping_add(1);
        let token = self.token(index);
        // TCP_NODELAY, as wrk sets it: a pipelined batch or a request after a partial write
        // must not wait for the ACK of the previous segment.
        let attempt = socket::connect_tcp_nonblocking(self.target.address).and_then(|socket| {
            socket::set_nodelay(socket.as_fd(), true)?;
            self.epoll
                .add(socket.as_fd(), token, Interest::BOTH.edge())
                .map(|()| socket)
        });
        match attempt {
            Ok(socket) => {
                self.clients[index].state = State::Connecting {
                    socket,
                    started: now,
                    due,
                };
            }
            Err(error) => {
                self.fail(connect_error_kind(&error), due.unwrap_or(now));
                self.start_over(index, now);
            }
        }
    }

    /// After a failed or finished connection: try again on the next turn of the loop (never
    /// recursively, so a refusing server costs one attempt per client per turn).
    fn start_over(&mut self, index: usize, now: Instant) {
        match &mut self.open {
            None => {
                self.clients[index].state = State::Thinking {
                    connection: None,
                    until: now,
                };
                self.thinking.push(Reverse((now, index)));
            }
            Some(open) => {
                self.clients[index].state = State::Idle;
                open.idle.push(index);
            }
        }
    }

    fn on_event(&mut self, index: usize, readiness: Readiness, now: Instant) {
        let readable = readiness.readable;
        let state = std::mem::replace(&mut self.clients[index].state, State::Idle);
        self.clients[index].state = match state {
            State::Connecting {
                socket,
                started,
                due,
            } => return self.on_connecting(index, socket, started, due, now),
            State::Sending(connection)
            | State::ReadingHead(connection)
            | State::ReadingBody(connection) => {
                return self.on_transfer(index, connection, readiness, now)
            }
            State::Thinking {
                connection: Some(connection),
                until,
            } if readable => State::Thinking {
                connection: self.on_idle_readable(connection, now),
                until,
            },
            State::Waiting(connection) if readable => {
                match self.on_idle_readable(connection, now) {
                    Some(connection) => State::Waiting(connection),
                    None => return self.start_over(index, now),
                }
            }
            other => other,
        };
    }

    fn on_connecting(
        &mut self,
        index: usize,
        socket: OwnedFd,
        started: Instant,
        due: Option<Instant>,
        now: Instant,
    ) {
        match socket::take_socket_error(socket.as_fd()) {
            Ok(None) => {}
            Ok(Some(error)) | Err(error) => {
                self.fail(connect_error_kind(&error), due.unwrap_or(started));
                return self.start_over(index, now);
            }
        }
        if self.measured(started) {
            self.recorder.connected(now - started);
        }
        let mut connection = Connection {
            socket,
            parser: ResponseParser::new(),
            in_flight: VecDeque::new(),
            output: Vec::new(),
            written: 0,
            watching_writes: true,
        };
        // Connected: from now on only reads wake this client. Left registered for writes, every
        // ACK of a request would queue a useless event (and cost the server's CPU, which runs
        // loopback delivery). A send that cannot finish registers for writes again.
        if self.watch_writes(index, &mut connection, false).is_err() {
            self.fail_all(&connection, ErrorKind::Reset);
            return self.start_over(index, now);
        }
        self.send_batch(index, connection, due, now);
    }

    fn token(&self, index: usize) -> u64 {
        u64::from(self.clients[index].generation) << 32 | index as u64
    }

    /// Registers the connection for reads only, or for reads and writes.
    fn watch_writes(
        &self,
        index: usize,
        connection: &mut Connection,
        writes: bool,
    ) -> io::Result<()> {
        let interest = if writes {
            Interest::BOTH
        } else {
            Interest::READABLE
        };
        self.epoll.modify(
            connection.socket.as_fd(),
            self.token(index),
            interest.edge(),
        )?;
        connection.watching_writes = writes;
        Ok(())
    }

    /// Queues the next request(s) on `connection` and writes them.
    fn send_batch(
        &mut self,
        index: usize,
        mut connection: Connection,
        due: Option<Instant>,
        now: Instant,
    ) {
        let depth = if due.is_some() {
            1
        } else {
            self.config.pipeline.max(1)
        };
        connection.output.clear();
        connection.written = 0;
        for _ in 0..depth {
            let request = self.workload.draw(&mut self.rng);
            connection.output.extend_from_slice(&self.requests[request]);
            connection.in_flight.push_back(InFlight {
                request,
                sent: due.unwrap_or(now),
                first_byte: None,
            });
        }
        self.on_transfer(index, connection, Readiness::default(), now);
    }

    /// Writes what is pending, reads what arrived, and moves the client on.
    fn on_transfer(
        &mut self,
        index: usize,
        mut connection: Connection,
        readiness: Readiness,
        now: Instant,
    ) {
        if connection.written < connection.output.len() {
            match sysio::send(
                connection.socket.as_fd(),
                &connection.output[connection.written..],
                sysio::MSG_NOSIGNAL,
            ) {
                Ok(sent) => connection.written += sent,
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
                Err(_) => {
                    self.fail_all(&connection, ErrorKind::Reset);
                    return self.start_over(index, now);
                }
            }
            let unfinished = connection.written < connection.output.len();
            if unfinished != connection.watching_writes
                && self
                    .watch_writes(index, &mut connection, unfinished)
                    .is_err()
            {
                self.fail_all(&connection, ErrorKind::Reset);
                return self.start_over(index, now);
            }
        }
        // A request just written has no response yet; only read when told there is data.
        let next = if readiness.readable {
            self.read_responses(connection, readiness.hangup, now)
        } else {
            Next::Continue(connection)
        };
        match next {
            Next::Continue(connection) => {
                self.clients[index].state = if connection.written < connection.output.len() {
                    State::Sending(connection)
                } else if connection.parser.in_head() {
                    State::ReadingHead(connection)
                } else {
                    State::ReadingBody(connection)
                };
            }
            Next::BatchDone {
                connection,
                reusable,
            } => self.after_batch(index, connection, reusable, now),
            Next::Closed => self.start_over(index, now),
        }
    }

    /// Reads until the socket is drained: a short read drains it (a new edge comes with new
    /// data), except when the peer also closed, whose end of stream must still be read.
    fn read_responses(&mut self, mut connection: Connection, hangup: bool, now: Instant) -> Next {
        let mut buffer = std::mem::take(&mut self.buffer);
        let next = loop {
            match sysio::read(connection.socket.as_fd(), &mut buffer) {
                Ok(0) => break self.on_end_of_stream(connection, now),
                Ok(count) => match self.on_bytes(connection, &buffer[..count], now) {
                    Next::Continue(same) if count == buffer.len() || hangup => connection = same,
                    other => break other,
                },
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                    break Next::Continue(connection)
                }
                Err(_) => {
                    self.fail_all(&connection, ErrorKind::Reset);
                    break Next::Closed;
                }
            }
        };
        self.buffer = buffer;
        next
    }

    fn on_bytes(&mut self, mut connection: Connection, mut bytes: &[u8], now: Instant) -> Next {
        let mut reusable = true;
        while !bytes.is_empty() {
            let Some(front) = connection.in_flight.front_mut() else {
                // Bytes nobody asked for: the last response was longer than it said.
                self.fail(ErrorKind::WrongLength, now);
                return Next::Closed;
            };
            front.first_byte.get_or_insert(now);
            match connection.parser.feed(bytes) {
                Err(error) => {
                    self.fail_all(&connection, parse_error_kind(error));
                    return Next::Closed;
                }
                Ok((used, None)) => bytes = &bytes[used..],
                Ok((used, Some(response))) => {
                    bytes = &bytes[used..];
                    let Some(done) = connection.in_flight.pop_front() else {
                        return Next::Closed;
                    };
                    if !bytes.is_empty() && connection.in_flight.is_empty() {
                        // Extra bytes in the same read after the last expected response.
                        self.fail(ErrorKind::WrongLength, done.sent);
                        return Next::Closed;
                    }
                    self.record(&done, response, now);
                    if !response.keep_alive {
                        reusable = false;
                        break;
                    }
                }
            }
        }
        if connection.in_flight.is_empty() || !reusable {
            return Next::BatchDone {
                connection,
                reusable: reusable && self.config.keep_alive,
            };
        }
        Next::Continue(connection)
    }

    fn record(&mut self, done: &InFlight, response: Response, now: Instant) {
        if !self.measured(done.sent) {
            return;
        }
        let expected = self.workload.resources[done.request].size;
        if response.status >= 400 {
            self.recorder.error(ErrorKind::HttpStatus);
        } else if response.status == 200 && expected.is_some_and(|size| size != response.body_len) {
            self.recorder.error(ErrorKind::WrongLength);
        } else {
            let first_byte = done.first_byte.unwrap_or(now) - done.sent;
            let body = response.body_len;
            self.recorder
                .response(first_byte, now - done.sent, response.wire_len, body);
        }
    }

    fn on_end_of_stream(&mut self, mut connection: Connection, now: Instant) -> Next {
        match connection.parser.finish() {
            Ok(Some(response)) => {
                if let Some(done) = connection.in_flight.pop_front() {
                    self.record(&done, response, now);
                }
                // Pipelined requests after a response that ended with the connection are
                // lost with it: count them as truncated.
                self.fail_all(&connection, ErrorKind::Truncated);
            }
            Ok(None) | Err(ParseError::Truncated) => {
                self.fail_all(&connection, ErrorKind::Truncated);
            }
            Err(error) => self.fail_all(&connection, parse_error_kind(error)),
        }
        Next::Closed
    }

    /// Data or a close on a connection with nothing in flight.
    fn on_idle_readable(&mut self, connection: Connection, now: Instant) -> Option<Connection> {
        let mut probe = [0u8; 512];
        match sysio::read(connection.socket.as_fd(), &mut probe) {
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => Some(connection),
            // The server closed an idle persistent connection: allowed, not an error.
            Ok(0) | Err(_) => None,
            Ok(_) => {
                // Bytes after a complete response: it was longer than its framing said.
                self.fail(ErrorKind::WrongLength, now);
                None
            }
        }
    }

    fn fail_all(&mut self, connection: &Connection, kind: ErrorKind) {
        for request in &connection.in_flight {
            self.fail(kind, request.sent);
        }
    }

    fn after_batch(&mut self, index: usize, connection: Connection, reusable: bool, now: Instant) {
        let connection = reusable.then_some(connection);
        if let Some(open) = &mut self.open {
            match (open.backlog.pop_front(), connection) {
                (Some(due), Some(connection)) => self.send_batch(index, connection, Some(due), now),
                (Some(due), None) => self.connect(index, Some(due), now),
                (None, Some(connection)) => {
                    open.waiting.push(index);
                    self.clients[index].state = State::Waiting(connection);
                }
                (None, None) => {
                    open.idle.push(index);
                    self.clients[index].state = State::Idle;
                }
            }
            return;
        }
        let Arrival::Closed { think } = self.config.arrival else {
            return;
        };
        if think.is_zero() {
            match connection {
                Some(connection) => self.send_batch(index, connection, None, now),
                None => self.connect(index, None, now),
            }
        } else {
            let until = now + think;
            self.clients[index].state = State::Thinking { connection, until };
            self.thinking.push(Reverse((until, index)));
        }
    }
}

fn connect_error_kind(error: &io::Error) -> ErrorKind {
    match error.kind() {
        io::ErrorKind::ConnectionRefused => ErrorKind::ConnectRefused,
        io::ErrorKind::TimedOut => ErrorKind::Timeout,
        _ => ErrorKind::ConnectFailed,
    }
}

fn parse_error_kind(error: ParseError) -> ErrorKind {
    match error {
        ParseError::BadStatusLine => ErrorKind::BadStatusLine,
        ParseError::BadHeader(_) => ErrorKind::BadHeader,
        ParseError::BadChunked(_) => ErrorKind::BadChunked,
        ParseError::Truncated => ErrorKind::Truncated,
    }
}
