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
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ampd_sys::{io as sysio, poll};

use super::client::{self, Client, Door};
use super::core::Serving;
use super::listener::Listener;
use super::phase_clock::Expired;
use super::upstream::{self, IdlePool};
use crate::config::Limits;
use crate::conn::{Context, Ending, Need, Phase};
use crate::content::caches::Caches;
use crate::content::job;
use crate::content::sink::DiskAccess;
use crate::log::clock::Clock;
use crate::log::stats::LoopStats;
use crate::ops::{Control, RunState, ThreadLink};
use crate::sync::lock;

mod client_io;
mod upstream_wait;

/// Input read per call.
const READ_CHUNK: usize = 16 << 10;
/// Input read before the connection decides (a request larger than this is read in turns).
const READ_TURN: usize = 4 * READ_CHUNK;
/// The longest single wait while sending or draining, so the minimum send rate, the drain
/// deadline and a second stop signal are looked at this often; and how often the access-log
/// buffer and cache counters are handed on.
pub const TICK: Duration = Duration::from_millis(250);

/// A client connection as a blocking worker holds it (its upstream sockets attached, it never
/// waits in a waiting room).
#[derive(Debug)]
pub struct Connection {
    pub client: Client,
    /// Registered with a waiting room's epoll before (re-arm instead of adding).
    pub registered: bool,
    /// The slot its scoreboard state is counted in (the accepting thread's).
    stats: LoopStats,
}

impl Connection {
    /// Its scoreboard phase (`Idle` between requests).
    #[must_use]
    pub fn phase(&self) -> Phase {
        self.client.clock.phase()
    }

    /// When the limit of its phase runs out, or its unfinished handshake's.
    #[must_use]
    pub fn deadline(&self, limits: &Limits) -> Option<Instant> {
        self.client
            .clock
            .deadline(limits, false)
            .into_iter()
            .chain(self.client.handshake_due())
            .min()
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.client.clock.closed(&self.stats);
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
pub type Accepted = client::Accepted<Box<Connection>>;

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
    serving: Serving,
    link: ThreadLink,
    caches: Arc<SharedCaches>,
    clock: Clock,
    scratch: Box<[u8]>,
    last_flush: Instant,
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
            serving: Serving::new(control),
            link,
            caches,
            clock: Clock::default(),
            scratch: vec![0u8; READ_CHUNK].into_boxed_slice(),
            last_flush: Instant::now(),
            drain_hook: None,
        }
    }

    #[must_use]
    pub fn control(&self) -> &Arc<Control> {
        &self.serving.control
    }

    /// The limits of the generation this worker serves under.
    #[must_use]
    pub fn limits(&self) -> &Limits {
        &self.serving.generation.config.limits
    }

    /// Take up a reload (new requests use the new generation), and the lifecycle: `Ok(false)`
    /// running, `Ok(true)` draining, `Err` when connections must be cut (a stop, or the grace
    /// period is over).
    ///
    /// # Errors
    /// The server stops, or the drain deadline passed.
    pub fn lifecycle(&mut self) -> Result<bool, Reset> {
        self.take_up_reload();
        match self.serving.run_state() {
            // Still accepting when announcing: idle connections stay, responses say the stop
            // is coming.
            RunState::Running | RunState::Announcing { .. } => Ok(false),
            RunState::Draining { deadline } if Instant::now() < deadline => Ok(true),
            _ => Err(Reset),
        }
    }

    /// Serve under the newest generation from here on.
    fn take_up_reload(&mut self) {
        if let Some(epoch) = self.serving.refresh(&mut self.link.log) {
            self.caches.forget_translations(epoch);
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

    /// One turn of a wait that began `was_draining`: the lifecycle (`Err`: the connection is
    /// cut), and `None` once a drain began meanwhile (the wait ends), else whether draining.
    fn wait_turn(&mut self, was_draining: bool) -> Result<Option<bool>, Reset> {
        let draining = self.lifecycle()?;
        if draining && !was_draining {
            self.drain_began_while_busy();
            return Ok(None);
        }
        Ok(Some(draining))
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
            control: &self.serving.control,
            generation: &self.serving.generation,
            stats: &stats,
            caches: &self.caches.caches,
        };
        door.accept(listener).map(|client| {
            Box::new(Connection {
                client: *client,
                registered: false,
                stats,
            })
        })
    }

    /// Serve `connection` until it closes, or (under `OnWait::Return`) until it waits for its
    /// client with nothing to send. A connection past its phase's limit is answered `408` (a
    /// request had begun) or closed.
    pub fn serve(&mut self, mut connection: Box<Connection>, on_wait: OnWait) -> Served {
        let served = match self.serve_until_waiting(&mut connection, on_wait) {
            Ok(Step::Waiting) => Served::Waiting(connection),
            Ok(Step::Closed) => Served::Closed,
            Err(Reset) => {
                connection.client.reset_on_close();
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
        if connection.client.lingering {
            return Ok(self.linger(connection, on_wait));
        }
        loop {
            let draining = self.lifecycle()?;
            if draining {
                self.drain_began_while_busy();
            }
            let (read_any, drained) = self.read_input(connection)?;
            if connection
                .client
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
            let need = self.advance(connection, draining);
            connection.client.clock.note(
                connection.client.conn.phase(),
                read_any || pumped,
                Instant::now(),
                &connection.stats,
            );
            let wrote = self.flush(connection)?;
            connection.client.clock.note(
                connection.client.conn.phase(),
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
                Need::Wait if connection.client.upstreams.is_empty() => return Err(Reset),
                Need::Read if read_any && !drained => continue,
                Need::Read | Need::Wait => {}
            }
            // With upstreams attached the connection waits here on all its sockets, never in
            // a waiting room (which watches only the client).
            if !connection.client.upstreams.is_empty() {
                if pumped
                    || upstream::any_can_move(&connection.client.upstreams, &connection.client.conn)
                {
                    continue;
                }
                match self.wait_upstream(connection)? {
                    Waited::Ready | Waited::DrainBegan => continue,
                    Waited::Expired(why) => return self.expired(connection, why, on_wait),
                }
            }
            let phase = connection.client.clock.phase();
            // Output is empty after a flush and the state is not closing: nothing else, but for
            // HTTP/2 streams held back by the client's flow-control window (sending, with
            // nothing queued): the WINDOW_UPDATE that frees them is read next.
            let held_by_window =
                phase == Phase::Sending && connection.client.conn.output.is_empty();
            if phase == Phase::Closing || (phase == Phase::Sending && !held_by_window) {
                return Err(Reset);
            }
            // Draining: an idle connection (anything it had sent was read above and answered)
            // closes, FIN first, as the event loop closes its idle ones.
            if phase == Phase::Idle && draining {
                return Ok(self.linger_close(connection, on_wait));
            }
            let limits = &self.serving.generation.config.limits;
            let now = Instant::now();
            if let Some(why) = connection.client.clock.check(now, limits, false) {
                return self.expired(connection, why, on_wait);
            }
            if connection
                .client
                .handshake_due()
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
            Expired::Quietly if connection.client.conn.speaks_http2() => {
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
        let link = (&mut self.link.log, &self.link.stats);
        let context = self.serving.context(
            &self.caches.caches,
            &self.clock,
            DiskAccess::Inline,
            link,
            draining,
        );
        (context, &self.caches.upstream_pool)
    }

    /// Let the connection decide on what it has read; run any jobs it asks for in place.
    /// An upstream socket `Conn` is done with is taken back after every decision
    /// (`settle_upstream`); `Need::Connect` is carried out in place, like a job.
    fn advance(&mut self, connection: &mut Connection, draining: bool) -> Need {
        self.clock.tick();
        let (mut context, pool) = self.context(draining);
        loop {
            let need = connection.client.conn.advance(&mut context);
            settle_upstream(connection, pool);
            match need {
                Need::Job(first) => {
                    let mut next = Some(first);
                    while let Some(job) = next {
                        next = connection.client.conn.job_done(job::run(job), &mut context);
                        settle_upstream(connection, pool);
                    }
                }
                Need::Connect(link, connect) => {
                    upstream::detach(&mut connection.client.upstreams, link);
                    let opened = upstream::open(
                        &connect,
                        link,
                        &mut connection.client.conn,
                        &mut lock(pool),
                    );
                    if let Some(socket) = opened {
                        upstream::attach(&mut connection.client.upstreams, socket);
                    }
                }
                need => return need,
            }
        }
    }

    /// The head or body did not arrive in time: `Conn::timed_out` (a `408`), written once
    /// without waiting; out entirely, the close lingers, else the connection closes (the rule
    /// of every engine: `core::Driver::answer_timeout`).
    fn answer_timeout(&mut self, connection: &mut Connection, on_wait: OnWait) -> Step {
        let draining = self.serving.run_state() != RunState::Running;
        let (mut context, pool) = self.context(draining);
        connection.client.conn.timed_out(&mut context);
        settle_upstream(connection, pool);
        if connection.client.write_now(&mut self.scratch) {
            return self.linger_close(connection, on_wait);
        }
        Step::Closed
    }

    /// The last response is out: a plain close (its FIN follows the response) when the client
    /// asked for it and its socket holds nothing unread (one more read says so: the response
    /// may have taken a while to write); otherwise the close lingers.
    fn end(&mut self, connection: &mut Connection, ending: Ending, on_wait: OnWait) -> Step {
        if ending == Ending::Close {
            match sysio::read(connection.client.fd.as_fd(), &mut self.scratch) {
                Ok(0) => return Step::Closed,
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => return Step::Closed,
                _ => {}
            }
        }
        self.linger_close(connection, on_wait)
    }

    /// `Client::shut` (`close_notify`, FIN after the response), then the lingering close.
    /// Under `OnWait::Return` the wait for the client happens in the waiting room, not in
    /// this worker.
    fn linger_close(&mut self, connection: &mut Connection, on_wait: OnWait) -> Step {
        if !connection.client.shut(Instant::now(), &connection.stats) {
            return Step::Closed;
        }
        self.linger(connection, on_wait)
    }

    fn linger(&mut self, connection: &mut Connection, on_wait: OnWait) -> Step {
        loop {
            if connection.client.linger_read(&mut self.scratch) {
                return Step::Closed;
            }
            let now = Instant::now();
            let limits = &self.serving.generation.config.limits;
            let Some(deadline) = connection.client.clock.deadline(limits, false) else {
                return Step::Closed;
            };
            if now >= deadline || self.serving.control.run_state() == RunState::Stopped {
                return Step::Closed;
            }
            if on_wait == OnWait::Return {
                return Step::Waiting;
            }
            let left = (deadline - now).min(TICK);
            if poll::poll_one(connection.client.fd.as_fd(), true, false, Some(left)).is_err() {
                return Step::Closed;
            }
        }
    }
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
    if connection.client.upstreams.is_empty() {
        // Nothing to pool or close (the common case: no lock taken).
        while connection.client.conn.take_upstream_release().is_some() {}
        return;
    }
    upstream::release(
        &mut connection.client.conn,
        &mut connection.client.upstreams,
        &mut lock(pool),
        |_| {},
    );
}
