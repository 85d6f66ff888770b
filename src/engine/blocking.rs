//! Serving one connection with blocking calls: the driver shared by `mt`, `tpc` and `mp`
//! (Flash-MT/MP, JAWS thread-per-connection). The thread that serves a connection reads a
//! request, runs whatever disk work it needs inline (blocking only itself), and writes the whole
//! response before it looks at anything else.
//!
//! Owns: carrying out a `Conn`'s `Need`s synchronously — reads, `sendmsg` (with `MSG_MORE`
//! before a file), `sendfile`, jobs run in place — and a thread's share of `ops::Control`:
//! admission of the connections it accepts, the generation it serves under, the drain, its
//! scoreboard slot and access-log buffer. Sockets stay non-blocking underneath and every wait is
//! a `poll` bounded by the connection's phase limit (`phase_clock.rs`: header, body, idle, send,
//! minimum send rate, linger), so a slowloris or slow reader holds a worker no longer than an
//! event loop would hold a slot; the poll also watches `Control::stopping_fd`, so a graceful
//! stop wakes every waiting thread.
//! Must not touch: HTTP (that is `conn`'s), which connection runs next (the engine's).
//! Sources: Flash §3.1–3.2 (MP, MT), JAWS §3.2 (concurrency strategies).

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ampd_sys::{io as sysio, poll, socket};

use super::client::{self, Client, Door};
use super::listener::Listener;
use super::phase_clock::{Expired, PhaseClock};
use super::upstream::{self, IdlePool, Upstream};
use crate::config::Limits;
use crate::conn::{Conn, Context, Ending, Need, Phase};
use crate::content::caches::Caches;
use crate::content::job;
use crate::content::serve::DiskAccess;
use crate::log::clock::Clock;
use crate::log::stats::LoopStats;
use crate::ops::admission::Ticket;
use crate::ops::{self, Control, RunState, ThreadLink};
use crate::site::Generation;
use crate::sync::lock;
use crate::tls::session::Received;
use crate::tls::TlsSession;

mod upstream_wait;

/// Input read per call.
const READ_CHUNK: usize = 16 << 10;
/// Input read before the connection decides (a request larger than this is read in turns).
const READ_TURN: usize = 4 * READ_CHUNK;
/// The longest single wait while sending or draining, so the minimum send rate, the drain
/// deadline and a second stop signal are looked at this often; and how often the access-log
/// buffer and cache counters are handed on.
pub const TICK: Duration = Duration::from_millis(250);

/// A client connection, its state machine and its place in the counts.
#[derive(Debug)]
pub struct Connection {
    pub fd: OwnedFd,
    pub conn: Conn,
    /// Registered with a waiting room's epoll before (re-arm instead of adding).
    pub registered: bool,
    /// Our side is shut; the client's input is read and discarded until it closes.
    lingering: bool,
    clock: PhaseClock,
    /// The upstream sockets it drives besides its client socket (`Need::Connect`), one per
    /// link; a connection with one attached never waits in a waiting room.
    upstreams: Vec<Upstream>,
    /// The slot its scoreboard state is counted in (the accepting thread's).
    stats: LoopStats,
    _ticket: Ticket,
    /// Its TLS, on a TLS listener (`tls::session`).
    tls: Option<Box<TlsSession>>,
    /// When an unfinished handshake is cut (`[tls] handshake_timeout`).
    handshake_deadline: Option<Instant>,
}

impl Connection {
    /// Its scoreboard phase (`Idle` between requests).
    #[must_use]
    pub fn phase(&self) -> Phase {
        self.clock.phase()
    }

    /// When the limit of its phase runs out, or its unfinished handshake's.
    #[must_use]
    pub fn deadline(&self, limits: &Limits) -> Option<Instant> {
        self.clock
            .deadline(limits, false)
            .into_iter()
            .chain(self.handshake_deadline())
            .min()
    }

    /// When its handshake is cut, while one is under way.
    fn handshake_deadline(&self) -> Option<Instant> {
        self.handshake_deadline
            .filter(|_| self.tls.as_ref().is_some_and(|tls| tls.is_handshaking()))
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.clock.closed(&self.stats);
    }
}

/// What the thread does when its connection waits for the client: between requests, or in the
/// middle of a request head or body that is still arriving.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnWait {
    /// Give the connection back (to a waiting room that watches waiting connections and their
    /// deadlines), so this thread or process serves another one meanwhile: a slowloris client
    /// then holds no worker, only a slot in the room.
    Return,
    /// Keep waiting on it, up to its phase's timeout (thread per connection).
    Stay,
}

/// How serving ended.
#[derive(Debug)]
pub enum Served {
    /// Waiting for the client, nothing to send: handed back under `OnWait::Return`.
    Waiting(Box<Connection>),
    Closed,
}

/// The outcome of one `accept`.
pub enum Accepted {
    Connection(Box<Connection>),
    /// The backlog is empty.
    Empty,
    /// Nothing to serve this time (refused far over a cap, or the client gave up).
    Skipped,
    /// Out of descriptors or memory: pause accepting.
    Exhausted,
}

/// The caches a group of threads (`mt`, `tpc`) or one process (`mp`) uses, and the scoreboard
/// slot their counters are published to (by whichever thread comes by when it is time).
pub struct SharedCaches {
    pub caches: Caches,
    slot: LoopStats,
    last_publish: Mutex<Instant>,
    /// The reload epoch the path cache was last cleared for: once per reload, not once per
    /// thread (a thread that comes late would drop entries made under the new generation).
    cleared_epoch: AtomicU64,
    /// Idle keep-alive connections to upstream servers, shared like the caches (a thread
    /// group's, or one `mp` process's).
    upstream_pool: Mutex<IdlePool>,
}

impl SharedCaches {
    #[must_use]
    pub fn new(caches: Caches, slot: LoopStats) -> SharedCaches {
        SharedCaches {
            caches,
            slot,
            last_publish: Mutex::new(Instant::now()),
            cleared_epoch: AtomicU64::new(0),
            upstream_pool: Mutex::new(IdlePool::default()),
        }
    }

    /// Translations are keyed by the old generation's roots: after a reload they can never hit
    /// again, and they hold descriptors open.
    fn forget_translations(&self, epoch: u64) {
        let cleared = self.cleared_epoch.load(Ordering::Acquire);
        if epoch > cleared
            && self
                .cleared_epoch
                .compare_exchange(cleared, epoch, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            self.caches.paths.clear();
        }
    }

    fn publish_if_due(&self) {
        let Ok(mut last) = self.last_publish.try_lock() else {
            return;
        };
        if last.elapsed() >= TICK {
            *last = Instant::now();
            self.caches.publish(&self.slot);
            lock(&self.upstream_pool).sweep(*last);
        }
    }
}

/// The connection is to be reset without more ado: the peer went away, a write failed, a send
/// stalled, or the server stops.
pub struct Reset;

impl From<io::Error> for Reset {
    fn from(_: io::Error) -> Reset {
        Reset
    }
}

enum Step {
    Waiting,
    Closed,
}

enum Waited {
    Ready,
    Expired(Expired),
    /// A graceful stop began during the wait.
    DrainBegan,
}

/// One thread's (or process's) means to serve: its share of `Control`, the caches it uses (its
/// own, or shared with the other threads), a clock and a read buffer.
pub struct Worker {
    control: Arc<Control>,
    generation: Arc<Generation>,
    epoch: u64,
    link: ThreadLink,
    caches: Arc<SharedCaches>,
    clock: Clock,
    scratch: Box<[u8]>,
    last_flush: Instant,
    /// A graceful stop is announced (`drain_delay`): still accepting, answering as draining.
    announcing: bool,
    /// Run once if the drain begins while this worker serves a connection (`mp`: give up this
    /// process's copy of the listening socket, which the busy worker cannot drain).
    drain_hook: Option<Box<dyn FnOnce() + Send>>,
}

impl Worker {
    /// A worker counting into `stats`.
    #[must_use]
    pub fn new(control: Arc<Control>, caches: Arc<SharedCaches>, stats: LoopStats) -> Worker {
        let link = control.join_thread(stats);
        Worker {
            generation: control.current(),
            epoch: 0,
            link,
            caches,
            clock: Clock::default(),
            scratch: vec![0u8; READ_CHUNK].into_boxed_slice(),
            last_flush: Instant::now(),
            announcing: false,
            drain_hook: None,
            control,
        }
    }

    #[must_use]
    pub fn control(&self) -> &Arc<Control> {
        &self.control
    }

    /// The limits of the generation this worker serves under.
    #[must_use]
    pub fn limits(&self) -> &Limits {
        &self.generation.config.limits
    }

    /// Take up a reload (new requests use the new generation), and the lifecycle: `Ok(false)`
    /// running, `Ok(true)` draining, `Err` when connections must be cut (a stop, or the grace
    /// period is over).
    ///
    /// # Errors
    /// The server stops, or the drain deadline passed.
    pub fn lifecycle(&mut self) -> Result<bool, Reset> {
        self.take_up_reload();
        match self.control.run_state() {
            RunState::Running => Ok(false),
            // Still accepting: idle connections stay, responses say the stop is coming.
            RunState::Announcing { .. } => {
                self.announcing = true;
                Ok(false)
            }
            RunState::Draining { deadline } if Instant::now() < deadline => Ok(true),
            _ => Err(Reset),
        }
    }

    /// Serve under the newest generation from here on.
    fn take_up_reload(&mut self) {
        if self.control.refresh(&mut self.epoch, &mut self.generation) {
            self.link.log.set_format(ops::log_format(&self.generation));
            self.caches.forget_translations(self.epoch);
        }
    }

    /// Run `hook` if a drain begins while this worker serves a connection.
    pub fn on_drain_while_busy(&mut self, hook: Box<dyn FnOnce() + Send>) {
        self.drain_hook = Some(hook);
    }

    /// The drain began while this worker was free to take part in it: no hook.
    pub fn forget_drain_hook(&mut self) {
        self.drain_hook = None;
    }

    fn drain_began_while_busy(&mut self) {
        if let Some(hook) = self.drain_hook.take() {
            hook();
        }
    }

    /// Hand the access-log buffer on and publish cache counters, if a tick has passed.
    pub fn tick(&mut self) {
        if self.last_flush.elapsed() >= TICK {
            self.flush_log();
        }
        self.caches.publish_if_due();
    }

    fn flush_log(&mut self) {
        self.last_flush = Instant::now();
        self.link.log.flush();
    }

    /// Accept one connection from `listener` and admit it (`client::Door`).
    pub fn accept(&mut self, listener: &Listener) -> Accepted {
        // A worker may have slept in the waiting room across a reload: the connection it
        // accepts is admitted, and its TLS handshake answered, under the new generation.
        self.take_up_reload();
        let stats = self.link.stats;
        let door = Door {
            control: &self.control,
            generation: &self.generation,
            stats: &stats,
            caches: &self.caches.caches,
        };
        match door.accept(listener) {
            client::Accepted::Client(admitted) => {
                let Client {
                    fd,
                    conn,
                    clock,
                    ticket,
                    tls,
                    handshake_deadline,
                    ..
                } = *admitted;
                Accepted::Connection(Box::new(Connection {
                    fd,
                    conn,
                    registered: false,
                    lingering: false,
                    clock,
                    upstreams: Vec::new(),
                    stats,
                    _ticket: ticket,
                    tls,
                    handshake_deadline,
                }))
            }
            client::Accepted::Empty => Accepted::Empty,
            client::Accepted::Skipped => Accepted::Skipped,
            client::Accepted::Exhausted => Accepted::Exhausted,
        }
    }

    /// Serve `connection` until it closes, or (under `OnWait::Return`) until it waits for its
    /// client with nothing to send. A connection past its phase's limit is answered `408` (a
    /// request had begun) or closed.
    pub fn serve(&mut self, mut connection: Box<Connection>, on_wait: OnWait) -> Served {
        let served = match self.serve_until_waiting(&mut connection, on_wait) {
            Ok(Step::Waiting) => Served::Waiting(connection),
            Ok(Step::Closed) => Served::Closed,
            Err(Reset) => {
                abort(&connection.fd);
                Served::Closed
            }
        };
        self.tick();
        served
    }

    fn serve_until_waiting(
        &mut self,
        connection: &mut Connection,
        on_wait: OnWait,
    ) -> Result<Step, Reset> {
        if connection.lingering {
            return Ok(self.linger(connection, on_wait));
        }
        loop {
            let draining = self.lifecycle()?;
            if draining {
                self.drain_began_while_busy();
            }
            let (read_any, drained) = self.read_input(connection)?;
            if connection
                .tls
                .as_ref()
                .is_some_and(|tls| tls.ending().is_some())
            {
                // An alert, the plain-HTTP answer or the end of an ACME validation: out, then
                // the connection ends.
                self.flush(connection)?;
                return Ok(self.linger_close(connection, on_wait));
            }
            if read_any {
                // A request that arrived after a change on disk must see it (docs/architecture.md).
                self.caches.caches.on_change();
            }
            let pumped = self.pump_upstream(connection);
            let need = self.advance(connection, draining || self.announcing);
            connection.clock.note(
                connection.conn.phase(),
                read_any || pumped,
                Instant::now(),
                &connection.stats,
            );
            let wrote = self.flush(connection)?;
            connection.clock.note(
                connection.conn.phase(),
                wrote,
                Instant::now(),
                &connection.stats,
            );
            match need {
                Need::Close(ending) => return Ok(self.end(connection, ending, on_wait)),
                // The output drained (flush blocks until it does): decide again.
                Need::Flush => continue,
                // Jobs and connects are carried out inline here, so nothing can be outstanding
                // but the upstream.
                Need::Job(_) | Need::Connect(..) => return Err(Reset),
                Need::Wait if connection.upstreams.is_empty() => return Err(Reset),
                Need::Read if read_any && !drained => continue,
                Need::Read | Need::Wait => {}
            }
            // With upstreams attached the connection waits here on all its sockets, never in
            // a waiting room (which watches only the client).
            if !connection.upstreams.is_empty() {
                if pumped || upstream::any_can_move(&connection.upstreams, &connection.conn) {
                    continue;
                }
                match self.wait_upstream(connection)? {
                    Waited::Ready | Waited::DrainBegan => continue,
                    Waited::Expired(why) => return self.expired(connection, why, on_wait),
                }
            }
            let phase = connection.clock.phase();
            // Output is empty after a flush and the state is not closing: nothing else, but for
            // HTTP/2 streams held back by the client's flow-control window (sending, with
            // nothing queued): the WINDOW_UPDATE that frees them is read next.
            let held_by_window = phase == Phase::Sending && connection.conn.output.is_empty();
            if phase == Phase::Closing || (phase == Phase::Sending && !held_by_window) {
                return Err(Reset);
            }
            // Draining: an idle connection (anything it had sent was read above and answered)
            // closes, FIN first, as the event loop closes its idle ones.
            if phase == Phase::Idle && draining {
                return Ok(self.linger_close(connection, on_wait));
            }
            let limits = &self.generation.config.limits;
            let now = Instant::now();
            if let Some(why) = connection.clock.check(now, limits, false) {
                return self.expired(connection, why, on_wait);
            }
            if connection
                .handshake_deadline()
                .is_some_and(|deadline| now >= deadline)
            {
                return Ok(Step::Closed);
            }
            if on_wait == OnWait::Return {
                return Ok(Step::Waiting);
            }
            if phase == Phase::Idle && !self.link.log.is_empty() {
                // Nothing more goes into the buffer while this thread waits.
                self.flush_log();
            }
            match self.wait(connection, false)? {
                Waited::Ready | Waited::DrainBegan => {}
                Waited::Expired(why) => return self.expired(connection, why, on_wait),
            }
        }
    }

    /// A connection past a limit: `408` (a request had begun), a plain close (idle), or reset.
    fn expired(
        &mut self,
        connection: &mut Connection,
        why: Expired,
        on_wait: OnWait,
    ) -> Result<Step, Reset> {
        match why {
            Expired::Request => Ok(self.answer_timeout(connection, on_wait)),
            // An idle HTTP/2 connection says GOAWAY before it closes (RFC 9113 §6.8).
            Expired::Quietly if connection.conn.speaks_http2() => {
                Ok(self.answer_timeout(connection, on_wait))
            }
            Expired::Quietly => Ok(Step::Closed),
            Expired::Sending => Err(Reset),
        }
    }

    /// The `Context` a connection decides in, and the idle upstream pool beside it (borrowed
    /// from the same worker without cloning the shared `Arc`, whose count every thread of
    /// the group would otherwise write on every request).
    fn context(&mut self, draining: bool) -> (Context<'_>, &Mutex<IdlePool>) {
        let context = Context {
            config: &self.generation.config,
            sites: &self.generation.sites,
            caches: &self.caches.caches,
            clock: &self.clock,
            disk: DiskAccess::Inline,
            log: &mut self.link.log,
            stats: &self.link.stats,
            metrics: &self.control.stats,
            upstreams: &self.generation.upstreams,
            launcher: &self.generation.launcher,
            rates: &self.control.rates,
            draining,
        };
        (context, &self.caches.upstream_pool)
    }

    /// Let the connection decide on what it has read; run any jobs it asks for in place.
    /// An upstream socket `Conn` is done with is taken back after every decision
    /// (`settle_upstream`); `Need::Connect` is carried out in place, like a job.
    fn advance(&mut self, connection: &mut Connection, draining: bool) -> Need {
        self.clock.tick();
        let (mut context, pool) = self.context(draining);
        loop {
            let need = connection.conn.advance(&mut context);
            settle_upstream(connection, pool);
            match need {
                Need::Job(first) => {
                    let mut next = Some(first);
                    while let Some(job) = next {
                        next = connection.conn.job_done(job::run(job), &mut context);
                        settle_upstream(connection, pool);
                    }
                }
                Need::Connect(link, connect) => {
                    upstream::detach(&mut connection.upstreams, link);
                    let opened =
                        upstream::open(&connect, link, &mut connection.conn, &mut lock(pool));
                    if let Some(socket) = opened {
                        upstream::attach(&mut connection.upstreams, socket);
                    }
                }
                need => return need,
            }
        }
    }

    /// Read what the socket has, up to a turn's worth. Returns (anything changed, socket
    /// drained).
    fn read_input(&mut self, connection: &mut Connection) -> Result<(bool, bool), Reset> {
        let mut total = 0;
        let mut changed = false;
        while connection.conn.wants_input() && total < READ_TURN {
            match sysio::read(connection.fd.as_fd(), &mut self.scratch) {
                Ok(0) => {
                    connection.conn.peer_finished();
                    return Ok((true, true));
                }
                Ok(count) => {
                    match connection.tls.as_mut() {
                        Some(tls) => {
                            if let Received::Ending(_) =
                                tls.receive(&self.scratch[..count], &mut connection.conn)
                            {
                                return Ok((true, true));
                            }
                        }
                        None => connection.conn.receive(&self.scratch[..count]),
                    }
                    total += count;
                    changed = true;
                    if count < self.scratch.len() {
                        return Ok((true, true));
                    }
                }
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                    return Ok((changed, true))
                }
                Err(_) => return Err(Reset),
            }
        }
        Ok((changed, total < READ_TURN))
    }

    /// Write everything queued, waiting for the socket as needed, under the send timeout and
    /// the minimum send rate. Returns whether any byte went out.
    fn flush(&mut self, connection: &mut Connection) -> Result<bool, Reset> {
        if connection.tls.is_some() {
            return self.flush_tls(connection);
        }
        let mut wrote = false;
        while !connection.conn.output.is_empty() {
            let fd = connection.fd.as_fd();
            let result = match connection.conn.output.front_file() {
                Some(range) => {
                    let mut offset = range.offset;
                    let count = usize::try_from(range.end - range.offset)
                        .unwrap_or(usize::MAX)
                        .min(sysio::MAX_RW_COUNT);
                    match sysio::sendfile(fd, range.file.file.as_fd(), &mut offset, count) {
                        // The file shrank under the response: it cannot be completed.
                        Ok(0) => return Err(Reset),
                        other => other,
                    }
                }
                None => {
                    // A head followed by a file body: MSG_MORE lets them leave in full segments.
                    let more = if connection.conn.output.file_follows_memory() {
                        sysio::MSG_MORE
                    } else {
                        0
                    };
                    let slices = connection.conn.output.memory_slices();
                    sysio::send_vectored(fd, &slices, sysio::MSG_NOSIGNAL | more)
                }
            };
            if let Some(sent) = self.sent_or_wait(connection, result)? {
                connection.conn.output.advance(sent as u64);
                wrote = true;
            }
        }
        Ok(wrote)
    }

    /// What one write to the client came to: `Some(bytes)` counted against the send timeout
    /// and rate, or `None` after waiting for the full socket to take more (under the send
    /// timeout).
    fn sent_or_wait(
        &mut self,
        connection: &mut Connection,
        result: io::Result<usize>,
    ) -> Result<Option<usize>, Reset> {
        match result {
            Ok(sent) => {
                connection.clock.sent(sent as u64);
                connection
                    .clock
                    .note(Phase::Sending, true, Instant::now(), &connection.stats);
                Ok(Some(sent))
            }
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                match self.wait(connection, true)? {
                    Waited::Ready | Waited::DrainBegan => Ok(None),
                    Waited::Expired(_) => Err(Reset),
                }
            }
            Err(_) => Err(Reset),
        }
    }

    /// `flush` over TLS: seal the output into records (files read with `pread`, no
    /// `sendfile` over userspace TLS) and write them, waiting for the socket as needed.
    fn flush_tls(&mut self, connection: &mut Connection) -> Result<bool, Reset> {
        let mut wrote = false;
        loop {
            let Some(tls) = connection.tls.as_mut() else {
                return Ok(wrote);
            };
            if tls.wants_write() {
                let result = tls.write_to(connection.fd.as_fd());
                if self.sent_or_wait(connection, result)?.is_some() {
                    wrote = true;
                }
                continue;
            }
            if connection.conn.output.is_empty() {
                return Ok(wrote);
            }
            match tls.seal(&mut connection.conn.output, &mut self.scratch) {
                // Still handshaking: the output waits for it.
                Ok(0) => return Ok(wrote),
                Ok(_) => {}
                Err(_) => return Err(Reset),
            }
        }
    }

    /// Wait until the connection can be read (or, `write`, written), its phase's limit runs
    /// out, or a graceful stop begins.
    fn wait(&mut self, connection: &mut Connection, write: bool) -> Result<Waited, Reset> {
        let was_draining = self.lifecycle()?;
        loop {
            let draining = self.lifecycle()?;
            if draining && !was_draining {
                self.drain_began_while_busy();
                return Ok(Waited::DrainBegan);
            }
            let now = Instant::now();
            let limits = &self.generation.config.limits;
            if let Some(why) = connection.clock.check(now, limits, false) {
                return Ok(Waited::Expired(why));
            }
            if connection
                .handshake_deadline()
                .is_some_and(|deadline| now >= deadline)
            {
                return Ok(Waited::Expired(Expired::Quietly));
            }
            let mut left = connection
                .deadline(limits)
                .map_or(TICK, |deadline| deadline.saturating_duration_since(now));
            if draining || write {
                left = left.min(TICK);
            }
            let mut fds = [
                poll::PollFd::new(connection.fd.as_fd(), !write, write),
                poll::PollFd::new(self.control.stopping_fd(), true, false),
            ];
            // While draining the stop descriptor stays readable: it is not watched again.
            let watched = if draining { 1 } else { 2 };
            poll::poll(&mut fds[..watched], Some(left))?;
            if fds[0].ready() {
                return Ok(Waited::Ready);
            }
        }
    }

    /// The head or body did not arrive in time: `408` if it can go out at once, then close.
    fn answer_timeout(&mut self, connection: &mut Connection, on_wait: OnWait) -> Step {
        let draining = self.control.run_state() != RunState::Running;
        let (mut context, pool) = self.context(draining);
        connection.conn.timed_out(&mut context);
        settle_upstream(connection, pool);
        if let Some(tls) = connection.tls.as_mut() {
            // Sealed and written once, without waiting: a client this slow gets what fits.
            let _ = tls.seal(&mut connection.conn.output, &mut self.scratch);
            let _ = tls.write_to(connection.fd.as_fd());
            if tls.wants_write() {
                return Step::Closed;
            }
            return self.linger_close(connection, on_wait);
        }
        let slices = connection.conn.output.memory_slices();
        let pending: usize = slices.iter().map(|slice| slice.len()).sum();
        match sysio::writev(connection.fd.as_fd(), &slices) {
            Ok(sent) if sent == pending => self.linger_close(connection, on_wait),
            _ => Step::Closed,
        }
    }

    /// The last response is out: a client that has sent nothing more gets a plain close (its
    /// FIN follows the response); otherwise the close lingers.
    fn end(&mut self, connection: &mut Connection, ending: Ending, on_wait: OnWait) -> Step {
        if ending == Ending::Close {
            match sysio::read(connection.fd.as_fd(), &mut self.scratch) {
                Ok(0) => return Step::Closed,
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => return Step::Closed,
                _ => {}
            }
        }
        self.linger_close(connection, on_wait)
    }

    /// Send a FIN after the response, then read and discard until the client closes (or the
    /// linger timeout passes), so unread request bytes do not turn the close into a reset that
    /// destroys the response in flight. Under `OnWait::Return` the wait for the client happens
    /// in the waiting room, not in this worker.
    fn linger_close(&mut self, connection: &mut Connection, on_wait: OnWait) -> Step {
        // The exchanges are over or abandoned: upstream sockets still attached are closed.
        connection.upstreams.clear();
        if let Some(tls) = connection.tls.as_mut() {
            // close_notify after the last response (best effort: a client that stopped reading
            // does not get it).
            tls.close();
            let _ = tls.write_to(connection.fd.as_fd());
        }
        if socket::shutdown_write(connection.fd.as_fd()).is_err() {
            return Step::Closed;
        }
        connection.lingering = true;
        connection
            .clock
            .note(Phase::Closing, false, Instant::now(), &connection.stats);
        self.linger(connection, on_wait)
    }

    fn linger(&mut self, connection: &mut Connection, on_wait: OnWait) -> Step {
        loop {
            match sysio::read(connection.fd.as_fd(), &mut self.scratch) {
                Ok(0) => return Step::Closed,
                Ok(_) => continue,
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
                Err(_) => return Step::Closed,
            }
            let now = Instant::now();
            let limits = &self.generation.config.limits;
            let Some(deadline) = connection.clock.deadline(limits, false) else {
                return Step::Closed;
            };
            if now >= deadline || self.control.run_state() == RunState::Stopped {
                return Step::Closed;
            }
            if on_wait == OnWait::Return {
                return Step::Waiting;
            }
            let left = (deadline - now).min(TICK);
            if poll::poll_one(connection.fd.as_fd(), true, false, Some(left)).is_err() {
                return Step::Closed;
            }
        }
    }
}

/// Close with a reset (`SO_LINGER` 0): what is still queued for the client is discarded.
pub fn abort(fd: &OwnedFd) {
    let _ = socket::set_linger(fd.as_fd(), Some(Duration::ZERO));
}

/// Cache shards for `threads` threads sharing one set of caches: enough that two threads rarely
/// want the same lock for different keys (the same hot key still shares one; its critical
/// section is a lookup), at most 64 (past that, more shards only cost memory).
#[must_use]
pub fn shards_for(threads: usize) -> usize {
    (threads * 2).clamp(1, 64)
}

/// Give back what a thread still holds of the access log and caches before it exits.
pub fn finish(worker: &mut Worker) {
    worker.flush_log();
    worker.caches.caches.publish(&worker.caches.slot);
}

/// After a decision: the upstream socket `Conn` is done with goes to the shared idle pool or
/// is closed.
fn settle_upstream(connection: &mut Connection, pool: &Mutex<IdlePool>) {
    if connection.upstreams.is_empty() {
        // Nothing to pool or close (the common case: no lock taken).
        while connection.conn.take_upstream_release().is_some() {}
        return;
    }
    upstream::release(
        &mut connection.conn,
        &mut connection.upstreams,
        &mut lock(pool),
        |_| {},
    );
}
