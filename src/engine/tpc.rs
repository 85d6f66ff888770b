//! `tpc`: a thread per connection (JAWS's thread-per-connection). An acceptor takes each new
//! connection and starts a thread that serves it with blocking calls until it closes, idle
//! keep-alive time included. At most `--threads` connection threads run at once; past that the
//! acceptor stops accepting and new clients wait in the listen backlog, which is what Apache
//! users expect at MaxRequestWorkers (a `503` would refuse clients that a moment's wait serves).
//!
//! Owns: the acceptor, the count of connection threads and the caches they share. The acceptor
//! admits connections through `ops::Control` and obeys its lifecycle: on a graceful stop it
//! takes what waits in the backlog, stops accepting, and waits for the connection threads,
//! which close idle connections and finish busy ones within the grace period themselves.
//! Must not touch: serving a connection (that is `blocking.rs`).
//! Sources: JAWS §3.2 (thread-per-connection), Apache httpd MaxRequestWorkers.

use std::io;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use ampd_sys::poll::{self, PollFd};

use super::blocking::{self, Accepted, Connection, OnWait, SharedCaches, Worker, TICK};
use super::core::{self, ACCEPT_PAUSE};
use super::listener::Listener;
use crate::content::budget::CacheBudget;
use crate::content::caches::Caches;
use crate::log::stats::LoopStats;
use crate::ops::{Control, RunState, TPC_SLOTS};

/// Stack of a connection thread: serving needs little, and thousands of threads reserve it.
const STACK: usize = 256 << 10;
/// Cache shards shared by the connection threads.
const SHARDS: usize = 64;
/// How long after a stop (or the end of the grace period) connection threads get to notice.
const STOP_MARGIN: Duration = Duration::from_secs(2);

/// Connection threads running, and the signal that one ended.
struct Active {
    count: Mutex<usize>,
    ended: Condvar,
}

impl Active {
    fn lock(&self) -> std::sync::MutexGuard<'_, usize> {
        self.count.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn end(&self) {
        *self.lock() -= 1;
        self.ended.notify_all();
    }

    /// Wait (at most `limit`) until fewer than `cap` threads run.
    fn wait_below(&self, cap: usize, limit: Duration) -> bool {
        let mut count = self.lock();
        if *count >= cap {
            count = self
                .ended
                .wait_timeout(count, limit)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        *count < cap
    }
}

/// The acceptor's state.
struct Acceptor {
    control: Arc<Control>,
    caches: Arc<SharedCaches>,
    slots: Vec<LoopStats>,
    next_slot: usize,
    active: Arc<Active>,
    cap: usize,
}

/// Accept and start connection threads until a graceful stop has drained them (or a stop).
///
/// # Errors
/// Polling the listener fails.
pub fn run(control: &Arc<Control>, listeners: Vec<Listener>) -> io::Result<()> {
    let config = control.current().config.clone();
    let caches = Arc::new(SharedCaches::new(
        Caches::new(&config.caches, SHARDS, &CacheBudget::of(&config, 1, 1)),
        control.stats.add_loop(),
    ));
    let mut acceptor = Acceptor {
        control: control.clone(),
        slots: (0..TPC_SLOTS).map(|_| control.stats.add_loop()).collect(),
        next_slot: 0,
        active: Arc::new(Active {
            count: Mutex::new(0),
            ended: Condvar::new(),
        }),
        cap: config.thread_count(),
        caches,
    };
    // The acceptor's own worker admits connections and publishes the caches' counters.
    let mut front = Worker::new(control.clone(), acceptor.caches.clone(), acceptor.slots[0]);
    loop {
        match front.lifecycle() {
            Ok(false) => {}
            // Take what waits in the backlog (it was sent before the stop), then stop; each
            // connection waits for a thread (until the grace period is over).
            Ok(true) => {
                core::take_backlog(&listeners, |listener| {
                    while !acceptor.active.wait_below(acceptor.cap, TICK) {
                        if front.lifecycle().is_err() {
                            return super::client::Accepted::Empty;
                        }
                    }
                    let accepted = front.accept(listener);
                    accepted.map(|connection| acceptor.start(connection))
                });
                break;
            }
            Err(_) => break,
        }
        front.tick();
        if !acceptor.active.wait_below(acceptor.cap, TICK) {
            continue;
        }
        // Each listener in turn, one connection at a time; all of them empty: wait for any.
        let mut empty = 0;
        for listener in &listeners {
            match front.accept(listener) {
                Accepted::Client(connection) => acceptor.start(connection),
                Accepted::Empty => empty += 1,
                Accepted::Exhausted => std::thread::sleep(ACCEPT_PAUSE),
                Accepted::Skipped => {}
            }
        }
        if empty == listeners.len() {
            let mut fds: Vec<PollFd<'_>> = listeners
                .iter()
                .map(|listener| PollFd::new(listener.as_fd(), true, false))
                .collect();
            fds.push(PollFd::new(control.stopping_fd(), true, false));
            poll::poll(&mut fds, Some(TICK))?;
        }
    }
    drop(listeners);
    acceptor.wait_for_threads();
    blocking::finish(&mut front);
    Ok(())
}

impl Acceptor {
    fn start(&mut self, connection: Box<Connection>) {
        *self.active.lock() += 1;
        let slot = self.slots[self.next_slot % self.slots.len()];
        self.next_slot += 1;
        let mut worker = Worker::new(self.control.clone(), self.caches.clone(), slot);
        let done = self.active.clone();
        let started = std::thread::Builder::new()
            .name("tpc-conn".to_owned())
            .stack_size(STACK)
            .spawn(move || {
                worker.serve(connection, OnWait::Stay);
                blocking::finish(&mut worker);
                done.end();
            });
        if started.is_err() {
            // Out of threads (RLIMIT_NPROC, memory): the connection is dropped; wait a moment.
            self.active.end();
            std::thread::sleep(ACCEPT_PAUSE);
        }
    }

    /// After accepting stopped: the connection threads finish (idle ones close at once, busy
    /// ones within the grace period); bounded, in case one cannot be woken.
    fn wait_for_threads(&self) {
        let limit = match self.control.run_state() {
            RunState::Draining { deadline } => deadline + STOP_MARGIN,
            _ => Instant::now() + STOP_MARGIN,
        };
        while !self.active.wait_below(1, TICK) {
            let limit = match self.control.run_state() {
                RunState::Stopped => limit.min(Instant::now() + STOP_MARGIN),
                _ => limit,
            };
            if Instant::now() >= limit {
                return;
            }
        }
    }
}
