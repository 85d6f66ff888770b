//! `tpc`: a thread per connection (JAWS's thread-per-connection). An acceptor takes each new
//! connection and starts a thread that serves it with blocking calls until it closes, idle
//! keep-alive time included. At most `--threads` connection threads run at once; past that the
//! acceptor stops accepting and new clients wait in the listen backlog, which is what Apache
//! users expect at MaxRequestWorkers (a `503` would refuse clients that a moment's wait serves).
//!
//! Owns: the acceptor, the count of connection threads and the caches they share.
//! Must not touch: serving a connection (that is `blocking.rs`).
//! Sources: JAWS §3.2 (thread-per-connection), Apache httpd MaxRequestWorkers.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

use ampd_sys::{poll, socket};

use super::blocking::{Connection, WhenIdle, Worker};
use crate::config::Config;
use crate::content::caches::Caches;
use crate::content::resolve::DocRoot;

/// Stack of a connection thread: serving needs little, and thousands of threads reserve it.
const STACK: usize = 256 << 10;
/// How long accepting pauses when descriptors or threads run out.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);
/// The acceptor wakes this often even with nothing to do (where a stop check will go).
const TICK: Duration = Duration::from_millis(250);
/// Cache shards shared by the connection threads.
const SHARDS: usize = 64;

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
        self.ended.notify_one();
    }
}

/// Accept and start connection threads until the process ends.
///
/// # Errors
/// Polling the listener fails.
pub fn run(config: Arc<Config>, root: Arc<DocRoot>, listener: OwnedFd) -> io::Result<()> {
    let cap = config.thread_count();
    let caches = Arc::new(Caches::new(&config.caches, SHARDS));
    let active = Arc::new(Active {
        count: Mutex::new(0),
        ended: Condvar::new(),
    });
    loop {
        // The one place a stop or drain check belongs: the acceptor stops accepting here.
        {
            let mut count = active.lock();
            while *count >= cap {
                count = active
                    .ended
                    .wait_timeout(count, TICK)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
            }
        }
        let fd = match socket::accept(listener.as_fd()) {
            Ok((fd, _peer)) => fd,
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                poll::poll_one(listener.as_fd(), true, false, Some(TICK))?;
                continue;
            }
            Err(error) if matches!(error.raw_os_error(), Some(23 | 24 | 105 | 12)) => {
                std::thread::sleep(ACCEPT_PAUSE);
                continue;
            }
            Err(_) => continue,
        };
        *active.lock() += 1;
        let mut worker = Worker::new(config.clone(), root.clone(), caches.clone());
        let done = active.clone();
        let started = std::thread::Builder::new()
            .name("tpc-conn".to_owned())
            .stack_size(STACK)
            .spawn(move || {
                let connection = Connection::new(fd, worker.config());
                worker.serve(connection, WhenIdle::Wait);
                done.end();
            });
        if started.is_err() {
            // Out of threads (RLIMIT_NPROC, memory): the connection is dropped; wait a moment.
            active.end();
            std::thread::sleep(ACCEPT_PAUSE);
        }
    }
}
