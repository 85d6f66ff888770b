//! The waiting room of `mt` and `mp`: an epoll set holding the listener and every idle
//! keep-alive connection, from which a worker takes the next connection that has something to
//! do. A worker serves one connection at a time with blocking calls; between requests the
//! connection waits here instead of holding a thread or a process, as in Apache's event MPM.
//! Without it, a pool of N workers would stall as soon as N clients kept idle connections open.
//!
//! Owns: the epoll set, the idle connections (in shards, by token), accept pauses when
//! descriptors run out, the keep-alive sweep, and the room's part of a graceful stop: the
//! connections already waiting in the listen backlog are taken (they were sent before the
//! stop, and a busy pool may not have got to them yet), then accepting stops, and parked
//! connections are handed out to be closed (or answered, if a request raced the stop).
//! Must not touch: serving (see `blocking.rs`).
//! Sources: JAWS §3.2 (thread pool), Apache httpd event MPM (idle connections off the workers).

use std::collections::{HashMap, VecDeque};
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

use ampd_sys::epoll::{Epoll, Events, Interest};
use ampd_sys::poll::{self, PollFd};

use super::blocking::{self, Accepted, Connection, OnWait, Served, Worker, TICK};
use super::core::{self, AcceptPause};
use super::listener::Listener;
use crate::config::Limits;
use crate::conn::Phase;
use crate::content::sharded::Sharded;
use crate::sync::lock;

const STOPPING: u64 = 1;
/// The first listener's token; the next ones count down from it (parked connections' tokens
/// count up from `STOPPING`).
const LISTENER: u64 = u64::MAX;
/// A process holding an idle connection that sees new work for its waiting room gives idle
/// processes this long to take it before it parks its connection and takes the work itself.
const HEAD_START: Duration = Duration::from_millis(2);

/// How the workers that share a listener avoid all waking for one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListenerWake {
    /// Threads sharing one epoll set: the listener is one-shot, re-armed right after each
    /// accept, so each new connection wakes exactly one thread.
    OneShot,
    /// Processes with an epoll set each: `EPOLLEXCLUSIVE` wakes one of them per connection.
    Exclusive,
}

struct Parked {
    connection: Box<Connection>,
    since: Instant,
}

/// What an idle connection does between requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Between {
    /// Park it at once: any thread of the pool may serve its next request (`mt`).
    Park,
    /// Keep it while this process has nothing else to do; park it when new work waits here
    /// (`mp`: a parked connection can only be served by the process that accepted it, so it
    /// parks only when it must).
    Hold,
}

/// What a worker gets from the waiting room.
pub enum Ready {
    Connection(Box<Connection>),
    /// Nothing this time (a timeout, a spurious wake, a connection already swept).
    Nothing,
    /// Draining, and nothing is left here: the worker may end.
    Drained,
}

pub struct WaitingRoom {
    epoll: Epoll,
    /// Closed (`None`) once a drain has taken the backlog, so the port refuses new connections
    /// (a balancer retries elsewhere) instead of queueing them where nobody accepts. Workers
    /// accept under the read lock, so it is never closed under an `accept`.
    listeners: RwLock<Vec<Listener>>,
    wake: ListenerWake,
    parked: Sharded<HashMap<u64, Parked>>,
    next_token: AtomicU64,
    /// Accepting paused after running out of descriptors.
    accept_pause: Mutex<AcceptPause>,
    last_sweep: Mutex<Instant>,
    /// Since when a held connection's worker has seen new clients waiting (see `hold`).
    clients_waiting_since: Mutex<Option<Instant>>,
    /// Parked connections past their phase's limit, for the next worker to answer (`408`) or
    /// close.
    due: Mutex<VecDeque<Box<Connection>>>,
    /// A graceful stop began here (the stop descriptor is no longer watched).
    draining: AtomicBool,
    /// Still taking connections from the listener (false once a drain has taken the backlog).
    accepting: AtomicBool,
    /// Held by the worker taking the backlog when a drain begins.
    taking_backlog: Mutex<()>,
}

impl WaitingRoom {
    /// `stopping`: `Control::stopping_fd`, watched so a graceful stop wakes waiting workers.
    ///
    /// # Errors
    /// epoll cannot be created, or a listener cannot be registered.
    pub fn new(
        listeners: Vec<Listener>,
        wake: ListenerWake,
        shards: usize,
        stopping: BorrowedFd<'_>,
    ) -> io::Result<WaitingRoom> {
        let epoll = Epoll::new()?;
        for (which, listener) in listeners.iter().enumerate() {
            epoll.add(listener.as_fd(), token_of(which), listener_interest(wake))?;
        }
        epoll.add(stopping, STOPPING, Interest::READABLE)?;
        Ok(WaitingRoom {
            epoll,
            listeners: RwLock::new(listeners),
            wake,
            parked: Sharded::new(shards, HashMap::new),
            next_token: AtomicU64::new(STOPPING + 1),
            accept_pause: Mutex::new(AcceptPause::default()),
            last_sweep: Mutex::new(Instant::now()),
            clients_waiting_since: Mutex::new(None),
            due: Mutex::new(VecDeque::new()),
            draining: AtomicBool::new(false),
            accepting: AtomicBool::new(true),
            taking_backlog: Mutex::new(()),
        })
    }

    /// Wait (at most one tick) for a new connection, a parked one that woke up, or one past
    /// its limit.
    ///
    /// # Errors
    /// `epoll_wait` fails for a reason other than a signal.
    pub fn next(&self, events: &mut Events, worker: &mut Worker) -> io::Result<Ready> {
        if self.draining.load(Ordering::Acquire) {
            if let Some(ready) = self.next_draining(worker) {
                return Ok(ready);
            }
        }
        if let Some(connection) = lock(&self.due).pop_front() {
            return Ok(Ready::Connection(connection));
        }
        let timeout = i32::try_from(TICK.as_millis()).unwrap_or(250);
        self.epoll.wait(events, timeout)?;
        self.maybe_sweep(worker.limits());
        let Some(event) = events.iter().next() else {
            return Ok(Ready::Nothing);
        };
        match event.token {
            token if self.listener_of(token).is_some() => {
                Ok(self.accept(worker, self.listener_of(token).unwrap_or(0)))
            }
            // The worker's lifecycle check sees the stop and calls `begin_drain`.
            STOPPING => Ok(Ready::Nothing),
            token => {
                let parked = self
                    .parked
                    .lock(&token)
                    .remove(&token)
                    .map(|parked| parked.connection);
                Ok(parked.map_or(Ready::Nothing, Ready::Connection))
            }
        }
    }

    /// A graceful stop began: stop watching the stop descriptor (`Control::stopping_fd`, which
    /// stays readable from now on).
    pub fn begin_drain(&self, stopping: BorrowedFd<'_>) {
        if !self.draining.swap(true, Ordering::AcqRel) {
            let _ = self.epoll.delete(stopping);
        }
    }

    /// While draining: the backlog first (taken into `due` at once), then the idle parked
    /// connections (to be closed); `Drained` once nothing is parked or due; `None` to wait for
    /// parked connections whose request is still arriving.
    fn next_draining(&self, worker: &mut Worker) -> Option<Ready> {
        if self.accepting.load(Ordering::Acquire) {
            // One worker takes the backlog (`core::take_backlog`, the rule of every engine) into
            // `due`, where every worker serves it from; the others wait for it rather than find
            // the room empty and end.
            let _taking = lock(&self.taking_backlog);
            if self.accepting.load(Ordering::Acquire) {
                {
                    let listeners = self
                        .listeners
                        .read()
                        .unwrap_or_else(PoisonError::into_inner);
                    core::take_backlog(&listeners, |listener| {
                        let accepted = worker.accept(listener);
                        accepted.map(|connection| lock(&self.due).push_back(connection))
                    });
                }
                self.accepting.store(false, Ordering::Release);
                self.close_listener();
            }
        }
        let mut idle = None;
        let mut waiting = 0;
        self.parked.for_each(|shard| {
            if idle.is_none() {
                let token = shard
                    .iter()
                    .find(|(_, parked)| parked.connection.phase() == Phase::Idle)
                    .map(|(token, _)| *token);
                idle = token.and_then(|token| shard.remove(&token));
            }
            waiting += shard.len();
        });
        if let Some(parked) = idle {
            return Some(Ready::Connection(parked.connection));
        }
        if waiting == 0 && lock(&self.due).is_empty() {
            return Some(Ready::Drained);
        }
        None
    }

    /// Which listener `token` stands for, if it is a listener's.
    fn listener_of(&self, token: u64) -> Option<usize> {
        let which = usize::try_from(LISTENER - token).ok()?;
        let count = self
            .listeners
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .len();
        (which < count).then_some(which)
    }

    fn accept(&self, worker: &mut Worker, which: usize) -> Ready {
        let Some(accepted) = self.with_listener(which, |listener| worker.accept(listener)) else {
            // Closed by the drain since this wake-up.
            return Ready::Nothing;
        };
        let ready = match accepted {
            Accepted::Client(connection) => Ready::Connection(connection),
            // Out of descriptors or memory: stop listening for a moment (the sweep resumes
            // it) rather than wake on a listener that stays ready.
            Accepted::Exhausted => {
                lock(&self.accept_pause).begin(Instant::now());
                if self.wake == ListenerWake::Exclusive {
                    for listener in self
                        .listeners
                        .read()
                        .unwrap_or_else(PoisonError::into_inner)
                        .iter()
                    {
                        let _ = self.epoll.delete(listener.as_fd());
                    }
                }
                return Ready::Nothing;
            }
            // Another worker took it, or the client gave up between SYN and accept, or
            // admission control dropped it.
            Accepted::Empty | Accepted::Skipped => Ready::Nothing,
        };
        if self.wake == ListenerWake::OneShot {
            self.with_listener(which, |listener| {
                self.epoll.modify(
                    listener.as_fd(),
                    token_of(which),
                    listener_interest(self.wake),
                )
            });
        }
        ready
    }

    /// Run `with` on listener `which`, unless the drain has closed the listeners.
    fn with_listener<R>(&self, which: usize, with: impl FnOnce(&Listener) -> R) -> Option<R> {
        let listeners = self
            .listeners
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        listeners.get(which).map(with)
    }

    /// Stop watching the listeners and close them (the drain has taken the backlog, or, under
    /// `mp`, this process's only worker is busy and other processes take it).
    pub fn close_listener(&self) {
        let mut listeners = self
            .listeners
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        for listener in listeners.drain(..) {
            let _ = self.epoll.delete(listener.as_fd());
        }
    }

    /// Keep a connection that waits for its client until the client sends or its phase's
    /// limit runs out (keep-alive between requests; header or body time inside one).
    pub fn park(&self, mut connection: Box<Connection>) {
        let token = self.next_token.fetch_add(1, Ordering::Relaxed);
        let interest = Interest::READABLE.oneshot();
        // Armed under the shard's lock: a worker that gets the event at once waits for the lock
        // and then finds the connection.
        let mut shard = self.parked.lock(&token);
        let armed = if connection.registered {
            self.epoll
                .modify(connection.client.fd.as_fd(), token, interest)
        } else {
            self.epoll
                .add(connection.client.fd.as_fd(), token, interest)
        };
        if armed.is_err() {
            return;
        }
        connection.registered = true;
        shard.insert(
            token,
            Parked {
                connection,
                since: Instant::now(),
            },
        );
    }

    /// Wait on a connection that waits for its client while nothing else needs this worker
    /// (see `Between::Hold`). Returns the connection to serve next: this one (its client sent
    /// again, its limit ran out, or a stop began), or another that needs this worker (it then
    /// parks this one).
    fn hold(
        &self,
        mut connection: Box<Connection>,
        events: &mut Events,
        worker: &mut Worker,
    ) -> Option<Box<Connection>> {
        // Past its phase's limit it is served once more, to be answered `408` or closed.
        let deadline = connection
            .deadline(worker.limits())
            .unwrap_or_else(|| Instant::now() + TICK);
        let mut shed = false;
        loop {
            let now = Instant::now();
            if now >= deadline {
                return Some(connection);
            }
            if self.draining.load(Ordering::Acquire) {
                return Some(connection);
            }
            let mut fds = [
                PollFd::new(connection.client.fd.as_fd(), true, false),
                PollFd::new(self.epoll.as_fd(), true, false),
            ];
            if poll::poll(&mut fds, Some((deadline - now).min(TICK))).is_err() {
                return None;
            }
            // Parked connections of this process past their limit need this process too, even
            // while its held client keeps it busy.
            worker.tick();
            self.maybe_sweep(worker.limits());
            let due = lock(&self.due).pop_front();
            if let Some(due) = due {
                self.park(connection);
                return Some(due);
            }
            if fds[0].ready() {
                return Some(connection);
            }
            if !fds[1].ready() {
                if !shed {
                    // Idle past one wait: give its buffers back, as the event loop does.
                    connection.client.conn.shed_buffers();
                    shed = true;
                }
                continue;
            }
            if self.epoll.wait(events, 0).is_err() {
                return None;
            }
            match events.iter().next().map(|event| event.token) {
                // Nothing after all (another process took the new client).
                None => *lock(&self.clients_waiting_since) = None,
                // A stop began: this idle connection is served once more, to be closed.
                Some(STOPPING) => return Some(connection),
                // A parked connection of this process woke: only this process can serve it.
                Some(token) if self.listener_of(token).is_none() => {
                    let woken = self.parked.lock(&token).remove(&token);
                    self.park(connection);
                    return woken.map(|parked| parked.connection);
                }
                // New clients: idle processes (waiting in epoll_wait) get them first. Take one
                // only once they have waited a head start, so a busy process does not grab a
                // client (which may need the slow disk) while its own idle clients wait on it.
                Some(token) => {
                    let which = self.listener_of(token).unwrap_or(0);
                    let since = *lock(&self.clients_waiting_since).get_or_insert(now);
                    let waited = now.saturating_duration_since(since);
                    if waited >= HEAD_START {
                        *lock(&self.clients_waiting_since) = None;
                        self.park(connection);
                        return match self.accept(worker, which) {
                            Ready::Connection(accepted) => Some(accepted),
                            Ready::Nothing | Ready::Drained => None,
                        };
                    }
                    let rest = HEAD_START - waited;
                    if let Ok(Some(_)) =
                        poll::poll_one(connection.client.fd.as_fd(), true, false, Some(rest))
                    {
                        return Some(connection);
                    }
                }
            }
        }
    }

    /// Hand connections past their phase's limit to the next worker (`due`), give back the
    /// buffers of the idle ones, and resume accepting after a pause. One worker sweeps at a
    /// time.
    fn maybe_sweep(&self, limits: &Limits) {
        let now = Instant::now();
        {
            let Ok(mut last) = self.last_sweep.try_lock() else {
                return;
            };
            if now.saturating_duration_since(*last) < TICK {
                return;
            }
            *last = now;
        }
        let mut expired: Vec<Box<Connection>> = Vec::new();
        self.parked.for_each(|shard| {
            let tokens: Vec<u64> = shard
                .iter_mut()
                .filter_map(|(token, parked)| {
                    if now.saturating_duration_since(parked.since) >= TICK {
                        parked.connection.client.conn.shed_buffers();
                    }
                    let deadline = parked.connection.deadline(limits);
                    deadline
                        .is_some_and(|deadline| now >= deadline)
                        .then_some(*token)
                })
                .collect();
            expired.extend(
                tokens
                    .iter()
                    .filter_map(|token| shard.remove(token))
                    .map(|parked| parked.connection),
            );
        });
        lock(&self.due).extend(expired);
        let mut pause = lock(&self.accept_pause);
        if pause.until().is_some() && pause.over(now) && self.accepting.load(Ordering::Acquire) {
            let interest = listener_interest(self.wake);
            let listeners = self
                .listeners
                .read()
                .unwrap_or_else(PoisonError::into_inner);
            for (which, listener) in listeners.iter().enumerate() {
                let _ = match self.wake {
                    ListenerWake::OneShot => {
                        self.epoll
                            .modify(listener.as_fd(), token_of(which), interest)
                    }
                    ListenerWake::Exclusive => {
                        self.epoll.add(listener.as_fd(), token_of(which), interest)
                    }
                };
            }
        }
    }
}

/// The epoll token of listener `which`.
fn token_of(which: usize) -> u64 {
    LISTENER - which as u64
}

fn listener_interest(wake: ListenerWake) -> Interest {
    match wake {
        ListenerWake::OneShot => Interest::READABLE.oneshot(),
        ListenerWake::Exclusive => Interest::READABLE.exclusive(),
    }
}

/// A worker's life: take the next connection with something to do, serve it until it is idle
/// or closed, keep or park it if idle (`between`), repeat — until a graceful stop has emptied
/// the room (or its grace period ran out), or a stop.
///
/// # Errors
/// The waiting room's epoll fails.
pub fn serve(room: &WaitingRoom, worker: &mut Worker, between: Between) -> io::Result<()> {
    let mut events = Events::with_capacity(1);
    let mut next = None;
    loop {
        match worker.lifecycle() {
            Ok(false) => {}
            Ok(true) => {
                // Free: this worker takes the backlog, then the room closes the listener.
                worker.forget_drain_hook();
                room.begin_drain(worker.control().stopping_fd());
            }
            // Stopped, or the grace period is over: what is left is cut as it is dropped.
            Err(_) => break,
        }
        let connection = match next.take() {
            Some(connection) => connection,
            None => match room.next(&mut events, worker)? {
                Ready::Connection(connection) => connection,
                Ready::Nothing => {
                    worker.tick();
                    continue;
                }
                Ready::Drained => break,
            },
        };
        if let Served::Waiting(waiting) = worker.serve(connection, OnWait::Return) {
            match between {
                Between::Park => room.park(waiting),
                Between::Hold => next = room.hold(waiting, &mut events, worker),
            }
        }
    }
    blocking::finish(worker);
    Ok(())
}
