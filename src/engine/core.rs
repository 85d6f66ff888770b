//! The connection core under the engines that keep their connections in a slab (the epoll loop
//! of `sped`, `amped` and `reactor`; the io_uring proactor): what such an engine shares with
//! every connection (`Core`: the generation served, caches, clock, scoreboard link, control,
//! upstream pool and drain state), kept apart from its slab so a connection can decide in a
//! `Context` borrowed from the core while its slot is borrowed from the slab; and the policy
//! every such engine follows (`Driver`'s provided methods: taking up a reload and the run
//! state, job completion, begin-close with TLS `close_notify`, abort, the `408` on a timeout,
//! the sweep, the drain and the end), written once. Each engine states its real difference as
//! the `Driver` methods it implements: how a slot is removed, how a shut connection lingers,
//! where a job goes, whether it may write now. The blocking engine follows the same rules on
//! its one `Client` (`client.rs`: `shut`, `write_now`, `linger_read`). It implements no `Driver`:
//! a worker waits inside each step on one connection it holds, with no slab, events or turns.
//! Also owns: the pause after `accept` runs out of descriptors (`AcceptPause`) and the drain's
//! taking of the listen backlog (`take_backlog`), for every engine (the loop, the proactor,
//! `tpc` and the waiting room of `mt` and `mp`).
//!
//! Must not touch: HTTP (`conn`), how an engine waits or moves bytes (its own module).

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::client::{Accepted, Client, Door, Verdict};
use super::listener::Listener;
use super::slab::Slab;
use super::upstream::{self, IdlePool};
use crate::conn::{Context, Ending};
use crate::content::caches::Caches;
use crate::content::job::{Job, JobDone};
use crate::content::sink::DiskAccess;
use crate::log::access::AccessLog;
use crate::log::clock::Clock;
use crate::log::stats::LoopStats;
use crate::ops::{self, Control, LoopLink, RunState};
use crate::site::Generation;

/// How long accepting pauses when descriptors or memory run out (`EMFILE`), instead of spinning
/// on a listener that stays readable. Pending connections wait in the backlog meanwhile.
pub const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// Accept batches a graceful stop takes from the backlog (they were sent before the stop),
/// bounded: under a flood the backlog refills as fast as it is taken.
const DRAIN_ACCEPT_BATCHES: usize = 16;
/// Connections in one of those batches.
pub const ACCEPT_BATCH: usize = 64;

/// The read buffer of a slab engine (client input in the loop, upstream input in both).
const SCRATCH: usize = 16 << 10;

/// Whether accepting is paused after running out of descriptors, and until when.
#[derive(Debug, Default, Clone, Copy)]
pub struct AcceptPause {
    until: Option<Instant>,
}

impl AcceptPause {
    /// `accept` ran out of descriptors or memory: pause.
    pub fn begin(&mut self, now: Instant) {
        self.until = Some(now + ACCEPT_PAUSE);
    }

    /// Whether accepting may go on at `now` (a pause that is over ends here).
    pub fn over(&mut self, now: Instant) -> bool {
        if self.until.is_some_and(|until| now < until) {
            return false;
        }
        self.until = None;
        true
    }

    /// When the pause ends, if one is on.
    #[must_use]
    pub fn until(&self) -> Option<Instant> {
        self.until
    }
}

/// A graceful stop began: take what waits in the listen backlog (it was sent before the stop),
/// from each listener in turn until it is empty (or accepting runs out of descriptors), at
/// most `DRAIN_ACCEPT_BATCHES` batches of `ACCEPT_BATCH` from each. `take` accepts one
/// connection from a listener and serves it (`Accepted::Client(())`).
pub fn take_backlog(listeners: &[Listener], mut take: impl FnMut(&Listener) -> Accepted<()>) {
    for listener in listeners {
        for _ in 0..DRAIN_ACCEPT_BATCHES * ACCEPT_BATCH {
            match take(listener) {
                Accepted::Client(()) | Accepted::Skipped => {}
                Accepted::Empty | Accepted::Exhausted => break,
            }
        }
    }
}

/// What every engine thread (a loop, a ring, a blocking worker) serves under: the server's
/// `Control`, and the configuration generation new requests are served under.
pub struct Serving {
    pub control: Arc<Control>,
    pub generation: Arc<Generation>,
    /// The reload epoch seen.
    epoch: u64,
    /// A graceful stop is announced (`drain_delay`): still accepting, answering as draining.
    pub announcing: bool,
}

impl Serving {
    #[must_use]
    pub fn new(control: Arc<Control>) -> Serving {
        Serving {
            generation: control.current(),
            control,
            epoch: 0,
            announcing: false,
        }
    }

    /// Take up a reload (new requests use the new generation; the access log takes its
    /// format): the new epoch, after which the caller forgets its path translations (they are
    /// keyed by the old generation's roots, can never hit again and hold descriptors open).
    pub fn refresh(&mut self, log: &mut AccessLog) -> Option<u64> {
        if !self.control.refresh(&mut self.epoch, &mut self.generation) {
            return None;
        }
        log.set_format(ops::log_format(&self.generation));
        Some(self.epoch)
    }

    /// The run state, noting an announced stop (responses then say the stop is coming).
    pub fn run_state(&mut self) -> RunState {
        let state = self.control.run_state();
        if matches!(state, RunState::Announcing { .. }) {
            self.announcing = true;
        }
        state
    }

    /// The `Context` a connection decides in, from the engine's caches, clock and link.
    pub fn context<'a>(
        &'a self,
        caches: &'a Caches,
        clock: &'a Clock,
        disk: DiskAccess,
        (log, stats): (&'a mut AccessLog, &'a LoopStats),
        draining: bool,
    ) -> Context<'a> {
        Context {
            config: &self.generation.config,
            sites: &self.generation.sites,
            caches,
            clock,
            disk,
            log,
            stats,
            metrics: &self.control.stats,
            upstreams: &self.generation.upstreams,
            launcher: &self.generation.launcher,
            rates: &self.control.rates,
            draining: draining || self.announcing,
        }
    }
}

/// What a slab engine shares with all its connections.
pub struct Core {
    pub serving: Serving,
    pub link: LoopLink,
    pub caches: Caches,
    pub clock: Clock,
    pub disk: DiskAccess,
    /// Idle keep-alive connections to upstream servers, this engine's own.
    pub upstream_pool: IdlePool,
    /// A graceful stop is under way: no more accepting, idle connections close.
    pub draining: bool,
    pub accept_pause: AcceptPause,
    last_sweep: Instant,
    pub scratch: Box<[u8]>,
}

/// What the run state asks of a slab engine this turn (`Core::follow`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Follow {
    Serve,
    /// Draining until `deadline`; `began`: this turn, so the engine begins its drain.
    Drain {
        began: bool,
        deadline: Instant,
    },
    /// Stopped: cut what is left.
    End,
}

impl Core {
    #[must_use]
    pub fn new(control: Arc<Control>, link: LoopLink, caches: Caches, disk: DiskAccess) -> Core {
        Core {
            serving: Serving::new(control),
            link,
            caches,
            clock: Clock::default(),
            disk,
            upstream_pool: IdlePool::default(),
            draining: false,
            accept_pause: AcceptPause::default(),
            last_sweep: Instant::now(),
            scratch: vec![0u8; SCRATCH].into_boxed_slice(),
        }
    }

    /// The `Context` a connection decides in.
    pub fn context(&mut self) -> Context<'_> {
        let link = (&mut self.link.log, &self.link.stats);
        self.serving
            .context(&self.caches, &self.clock, self.disk, link, self.draining)
    }

    /// What admits a new connection under the current generation.
    #[must_use]
    pub fn door(&self) -> Door<'_> {
        Door {
            control: &self.serving.control,
            generation: &self.serving.generation,
            stats: &self.link.stats,
            caches: &self.caches,
        }
    }

    /// Take up a reload (new requests use the new generation), then the run state. Called at
    /// the start of each turn, before its events, so that a request read after the stop
    /// signal is answered as draining (`Connection: close`, health 503).
    pub fn follow(&mut self) -> Follow {
        if self.serving.refresh(&mut self.link.log).is_some() {
            self.caches.paths.clear();
        }
        match self.serving.run_state() {
            RunState::Running | RunState::Announcing { .. } => Follow::Serve,
            RunState::Draining { deadline } => {
                let began = !self.draining;
                self.draining = true;
                Follow::Drain { began, deadline }
            }
            RunState::Stopped => Follow::End,
        }
    }

    /// Whether the periodic sweep is due at `now` (it is then counted as done).
    pub fn sweep_due(&mut self, now: Instant, every: Duration) -> bool {
        if now.duration_since(self.last_sweep) < every {
            return false;
        }
        self.last_sweep = now;
        true
    }

    /// After `advance`, `job_done` or `timed_out`: the upstream sockets `Conn` is done with go
    /// to the idle pool or are closed.
    pub fn settle(&mut self, client: &mut Client) {
        upstream::release(
            &mut client.conn,
            &mut client.upstreams,
            &mut self.upstream_pool,
            |_| {},
        );
    }

    /// Move what can move between a connection's upstream sockets and its `Conn`; whether
    /// anything did.
    pub fn pump(&mut self, client: &mut Client) -> bool {
        upstream::pump_all(&mut client.upstreams, &mut client.conn, &mut self.scratch)
    }
}

/// A connection in a slab engine: its client, and what the engine keeps beside it (`S`).
pub(crate) struct Slot<S> {
    pub client: Client,
    pub io: S,
}

/// A slab engine: what differs between them (required methods), and the policy they share
/// (provided methods, written once).
pub(crate) trait Driver {
    /// What the engine keeps beside each connection's `Client`.
    type Io;
    /// The core and the slab, borrowed apart.
    fn parts(&mut self) -> (&mut Core, &mut Slab<Slot<Self::Io>>);
    /// The engine still moves bytes for this connection (a send in flight, input not yet
    /// parsed): a drain must not close it yet. An engine that moves bytes only while it
    /// drives a connection (the loop) has nothing in flight between turns.
    fn busy(_slot: &Slot<Self::Io>) -> bool {
        false
    }
    /// Run the connection's cycle as far as it goes now.
    fn drive(&mut self, index: usize);
    /// Take the slot out of the slab, with what the engine has in flight for it.
    fn remove(&mut self, index: usize) -> Option<Slot<Self::Io>>;
    /// Our side is shut: read and discard what the client still sends until it closes.
    fn linger(&mut self, index: usize);
    /// Whether the client socket is known to hold no unread input (a plain close then sends
    /// no reset).
    fn input_drained(&self, index: usize) -> bool;
    /// Copy what only this engine can read (caches, helpers) to its scoreboard slot.
    fn publish(&self);

    /// After a decision: the upstream sockets `Conn` is done with go to the idle pool or
    /// close (an engine that watches them stops watching those too).
    fn settle_upstream(&mut self, index: usize) {
        if let Some((core, client)) = self.slot_mut(index) {
            core.settle(client);
        }
    }

    /// The connection's upstream sockets close (an engine that watches them stops watching).
    fn drop_upstreams(&mut self, index: usize) {
        if let Some((_, client)) = self.slot_mut(index) {
            client.upstreams.clear();
        }
    }

    /// Whether the engine may write to the client now: yes, unless it has a send of its own
    /// in flight.
    fn may_write_now(&self, _index: usize) -> bool {
        true
    }

    fn slot_mut(&mut self, index: usize) -> Option<(&mut Core, &mut Client)> {
        let (core, slots) = self.parts();
        let slot = slots.get_mut(index)?;
        Some((core, &mut slot.client))
    }

    /// Drop the connection.
    fn close(&mut self, index: usize) {
        if let Some(slot) = self.remove(index) {
            let (core, _) = self.parts();
            slot.client.clock.closed(&core.link.stats);
        }
    }

    /// Close with a reset (`SO_LINGER` 0): what is still queued for the client is discarded.
    fn abort(&mut self, index: usize) {
        if let Some((_, client)) = self.slot_mut(index) {
            client.reset_on_close();
        }
        self.close(index);
    }

    /// The response is out and the connection must end (`Client::shut`: `close_notify`, FIN
    /// after the data), then its input is drained until it closes (lingering close), unless it
    /// ended its stream already.
    fn begin_close(&mut self, index: usize) {
        self.drop_upstreams(index);
        let Some((core, client)) = self.slot_mut(index) else {
            return;
        };
        if client.shut(core.clock.now(), &core.link.stats) {
            self.linger(index);
        } else {
            self.close(index);
        }
    }

    /// The last response is out: a plain close (its FIN follows the response) when the client
    /// asked for it and the socket holds nothing unread; otherwise the close lingers.
    fn end(&mut self, index: usize, ending: Ending) {
        if ending == Ending::Close && self.input_drained(index) {
            self.close(index);
        } else {
            self.begin_close(index);
        }
    }

    /// A job is done: `Conn` takes its result; the next job it asks for, if any.
    fn job_done(&mut self, index: usize, done: JobDone) -> Option<Job> {
        let (core, client) = self.slot_mut(index)?;
        client.job_out = false;
        let mut context = core.context();
        let next = client.conn.job_done(done, &mut context);
        self.settle_upstream(index);
        next
    }

    /// A request had begun and its time ran out: `Conn::timed_out` (a `408`, or GOAWAY), written
    /// once without waiting; out entirely, the close lingers (the client may still be sending
    /// the request, and a plain close would reset the answer away); otherwise the client is not
    /// reading and the connection closes. A send of its own in flight means the same.
    fn answer_timeout(&mut self, index: usize) {
        if !self.may_write_now(index) {
            return self.abort(index);
        }
        let Some((core, client)) = self.slot_mut(index) else {
            return;
        };
        let mut context = core.context();
        client.conn.timed_out(&mut context);
        self.settle_upstream(index);
        let Some((core, client)) = self.slot_mut(index) else {
            return;
        };
        if client.write_now(&mut core.scratch) {
            self.begin_close(index);
        } else {
            self.close(index);
        }
    }

    /// The exchange's upstream timeout ran out: `Conn` decides (a `504`, or another server).
    fn upstream_timed_out(&mut self, index: usize) {
        if let Some((_, client)) = self.slot_mut(index) {
            client.conn.upstream_timed_out();
        }
        self.drive(index);
    }

    /// Apply each connection's limits at `now`; while draining, close what has become idle;
    /// the upstream pool's idle sockets age; counters are published and the access-log buffer
    /// handed to its thread.
    fn sweep(&mut self, now: Instant) {
        let (core, slots) = self.parts();
        let limits = &core.serving.generation.config.limits;
        let expired: Vec<(usize, Verdict)> = slots
            .iter_mut()
            .filter_map(|(index, slot)| Some((index, slot.client.verdict(now, limits)?)))
            .collect();
        for (index, verdict) in expired {
            match verdict {
                Verdict::AnswerTimeout => self.answer_timeout(index),
                Verdict::Reset => self.abort(index),
                Verdict::Close => self.close(index),
                Verdict::UpstreamTimedOut => self.upstream_timed_out(index),
            }
        }
        // Connections that were still to send their first request when the drain began.
        self.close_drained();
        let (core, _) = self.parts();
        core.upstream_pool.sweep(now);
        self.publish();
        self.parts().0.link.log.flush();
    }

    /// Whether connection `index` is done with while draining: idle, nothing in flight.
    fn drained(&mut self, index: usize) -> bool {
        let (core, slots) = self.parts();
        core.draining
            && slots.get(index).is_some_and(|slot| {
                slot.client
                    .drain_may_close(Self::busy(slot), Instant::now())
            })
    }

    /// While draining, a connection with nothing left to do closes at once, FIN after its last
    /// byte: an idle one when the drain begins, and one whose response, begun before the stop
    /// and so without `Connection: close`, has just gone out. Without this such a connection
    /// stayed open, idle, until the grace period ended and reset it.
    fn close_if_drained(&mut self, index: usize) {
        if self.drained(index) {
            self.begin_close(index);
        }
    }

    /// `close_if_drained` for every connection.
    fn close_drained(&mut self) {
        if !self.parts().0.draining {
            return;
        }
        for index in 0..self.parts().1.bound() {
            self.close_if_drained(index);
        }
    }

    /// The engine ends: cut what is left (the grace period is over, or a stop), publish
    /// counters, hand the access-log buffer over.
    fn finish(&mut self) {
        for index in 0..self.parts().1.bound() {
            self.abort(index);
        }
        self.publish();
        self.parts().0.link.log.flush();
    }
}
