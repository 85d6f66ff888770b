//! The waiting room of `mt` and `mp`: an epoll set holding the listener and every idle
//! keep-alive connection, from which a worker takes the next connection that has something to
//! do. A worker serves one connection at a time with blocking calls; between requests the
//! connection waits here instead of holding a thread or a process, as in Apache's event MPM.
//! Without it, a pool of N workers would stall as soon as N clients kept idle connections open.
//!
//! Owns: the epoll set, the idle connections (in shards, by token), accept pauses when
//! descriptors run out, and the keep-alive sweep. Must not touch: serving (see `blocking.rs`).
//! Sources: JAWS §3.2 (thread pool), Apache httpd event MPM (idle connections off the workers).

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use ampd_sys::epoll::{Epoll, Events, Interest};
use ampd_sys::poll::{self, PollFd};
use ampd_sys::socket;

use super::blocking::{Connection, Served, WhenIdle, Worker};
use crate::content::sharded::Sharded;

const LISTENER: u64 = 0;
/// How often idle connections are checked against the keep-alive timeout.
const SWEEP: Duration = Duration::from_millis(250);
/// How long accepting pauses when descriptors run out (`EMFILE`); clients wait in the backlog.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);
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
}

pub struct WaitingRoom {
    epoll: Epoll,
    listener: OwnedFd,
    wake: ListenerWake,
    parked: Sharded<HashMap<u64, Parked>>,
    next_token: AtomicU64,
    keepalive: Duration,
    /// When accepting may resume after running out of descriptors.
    accept_paused_until: Mutex<Option<Instant>>,
    last_sweep: Mutex<Instant>,
    /// Since when a held connection's worker has seen new clients waiting (see `hold`).
    clients_waiting_since: Mutex<Option<Instant>>,
}

impl WaitingRoom {
    /// # Errors
    /// epoll cannot be created, or the listener cannot be registered.
    pub fn new(
        listener: OwnedFd,
        wake: ListenerWake,
        shards: usize,
        keepalive: Duration,
    ) -> io::Result<WaitingRoom> {
        let epoll = Epoll::new()?;
        epoll.add(listener.as_fd(), LISTENER, listener_interest(wake))?;
        Ok(WaitingRoom {
            epoll,
            listener,
            wake,
            parked: Sharded::new(shards, HashMap::new),
            next_token: AtomicU64::new(LISTENER + 1),
            keepalive,
            accept_paused_until: Mutex::new(None),
            last_sweep: Mutex::new(Instant::now()),
            clients_waiting_since: Mutex::new(None),
        })
    }

    /// Wait (at most one sweep interval) for a new connection or an idle one that woke up.
    ///
    /// # Errors
    /// `epoll_wait` fails for a reason other than a signal.
    pub fn next(&self, events: &mut Events, worker: &Worker) -> io::Result<Ready> {
        let timeout = i32::try_from(SWEEP.as_millis()).unwrap_or(250);
        self.epoll.wait(events, timeout)?;
        self.maybe_sweep();
        let Some(event) = events.iter().next() else {
            return Ok(Ready::Nothing);
        };
        if event.token == LISTENER {
            return Ok(self.accept(worker));
        }
        let parked = self
            .parked
            .lock(&event.token)
            .remove(&event.token)
            .map(|parked| parked.connection);
        Ok(parked.map_or(Ready::Nothing, Ready::Connection))
    }

    fn accept(&self, worker: &Worker) -> Ready {
        let accepted = socket::accept(self.listener.as_fd());
        let ready = match accepted {
            Ok((fd, _peer)) => Ready::Connection(Connection::new(fd, worker.config())),
            // Out of descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM): stop listening for
            // a moment (the sweep resumes it) rather than wake on a listener that stays ready.
            Err(error) if matches!(error.raw_os_error(), Some(23 | 24 | 105 | 12)) => {
                *lock(&self.accept_paused_until) = Some(Instant::now() + ACCEPT_PAUSE);
                if self.wake == ListenerWake::Exclusive {
                    let _ = self.epoll.delete(self.listener.as_fd());
                }
                return Ready::Nothing;
            }
            // Another worker took it, or the client gave up between SYN and accept.
            Err(_) => Ready::Nothing,
        };
        if self.wake == ListenerWake::OneShot {
            let _ = self.epoll.modify(
                self.listener.as_fd(),
                LISTENER,
                listener_interest(self.wake),
            );
        }
        ready
    }

    /// Keep an idle connection until its client sends again or the keep-alive timeout passes.
    pub fn park(&self, mut connection: Box<Connection>) {
        let token = self.next_token.fetch_add(1, Ordering::Relaxed);
        let interest = Interest::READABLE.oneshot();
        // Armed under the shard's lock: a worker that gets the event at once waits for the lock
        // and then finds the connection.
        let mut shard = self.parked.lock(&token);
        let armed = if connection.registered {
            self.epoll.modify(connection.fd.as_fd(), token, interest)
        } else {
            self.epoll.add(connection.fd.as_fd(), token, interest)
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

    /// Wait on an idle connection while nothing else needs this worker (see `Between::Hold`).
    /// Returns the connection to serve next: this one (its client sent again), or another that
    /// needs this worker (it then parks this one); `None` when this one timed out (closed).
    fn hold(
        &self,
        mut connection: Box<Connection>,
        events: &mut Events,
        worker: &Worker,
    ) -> Option<Box<Connection>> {
        let deadline = Instant::now() + self.keepalive;
        let mut shed = false;
        loop {
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            let mut fds = [
                PollFd::new(connection.fd.as_fd(), true, false),
                PollFd::new(self.epoll.as_fd(), true, false),
            ];
            if poll::poll(&mut fds, Some((deadline - now).min(SWEEP))).is_err() {
                return None;
            }
            if fds[0].ready() {
                return Some(connection);
            }
            if !fds[1].ready() {
                if !shed {
                    // Idle past one wait: give its buffers back, as the event loop does.
                    connection.conn.shed_buffers();
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
                // A parked connection of this process woke: only this process can serve it.
                Some(token) if token != LISTENER => {
                    let woken = self.parked.lock(&token).remove(&token);
                    self.park(connection);
                    return woken.map(|parked| parked.connection);
                }
                // New clients: idle processes (waiting in epoll_wait) get them first. Take one
                // only once they have waited a head start, so a busy process does not grab a
                // client (which may need the slow disk) while its own idle clients wait on it.
                Some(_) => {
                    let since = *lock(&self.clients_waiting_since).get_or_insert(now);
                    let waited = now.saturating_duration_since(since);
                    if waited >= HEAD_START {
                        *lock(&self.clients_waiting_since) = None;
                        self.park(connection);
                        return match self.accept(worker) {
                            Ready::Connection(accepted) => Some(accepted),
                            Ready::Nothing => None,
                        };
                    }
                    let rest = HEAD_START - waited;
                    if let Ok(Some(_)) =
                        poll::poll_one(connection.fd.as_fd(), true, false, Some(rest))
                    {
                        return Some(connection);
                    }
                }
            }
        }
    }

    /// Close connections idle past the keep-alive timeout, give back the buffers of the others,
    /// and resume accepting after a pause. One worker sweeps at a time.
    fn maybe_sweep(&self) {
        let now = Instant::now();
        {
            let Ok(mut last) = self.last_sweep.try_lock() else {
                return;
            };
            if now.saturating_duration_since(*last) < SWEEP {
                return;
            }
            *last = now;
        }
        let mut expired: Vec<Parked> = Vec::new();
        self.parked.for_each(|shard| {
            let tokens: Vec<u64> = shard
                .iter_mut()
                .filter_map(|(token, parked)| {
                    let idle = now.saturating_duration_since(parked.since);
                    if idle >= SWEEP {
                        parked.connection.conn.shed_buffers();
                    }
                    (idle >= self.keepalive).then_some(*token)
                })
                .collect();
            expired.extend(tokens.iter().filter_map(|token| shard.remove(token)));
        });
        // Closed outside the shard locks.
        drop(expired);
        let mut paused = lock(&self.accept_paused_until);
        if paused.is_some_and(|until| now >= until) {
            *paused = None;
            let interest = listener_interest(self.wake);
            let _ = match self.wake {
                ListenerWake::OneShot => {
                    self.epoll.modify(self.listener.as_fd(), LISTENER, interest)
                }
                ListenerWake::Exclusive => {
                    self.epoll.add(self.listener.as_fd(), LISTENER, interest)
                }
            };
        }
    }
}

fn listener_interest(wake: ListenerWake) -> Interest {
    match wake {
        ListenerWake::OneShot => Interest::READABLE.oneshot(),
        ListenerWake::Exclusive => Interest::READABLE.exclusive(),
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A worker's life: take the next connection with something to do, serve it until it is idle
/// or closed, keep or park it if idle (`between`), repeat.
///
/// # Errors
/// The waiting room's epoll fails.
pub fn serve_forever(room: &WaitingRoom, worker: &mut Worker, between: Between) -> io::Result<()> {
    let mut events = Events::with_capacity(1);
    let mut next = None;
    loop {
        // The one place a stop or drain check belongs: a worker stops taking connections here.
        let connection = match next.take() {
            Some(connection) => connection,
            None => match room.next(&mut events, worker)? {
                Ready::Connection(connection) => connection,
                Ready::Nothing => continue,
            },
        };
        if let Served::Idle(idle) = worker.serve(connection, WhenIdle::Return) {
            match between {
                Between::Park => room.park(idle),
                Between::Hold => next = room.hold(idle, &mut events, worker),
            }
        }
    }
}
