//! `mt`: a pool of threads, each serving one connection at a time with blocking calls, all
//! sharing one set of caches (Flash-MT, JAWS's thread pool). A thread blocked on the disk holds
//! up only its own connection; the others go on serving.
//!
//! Owns: the pool's threads and the caches they share. Idle keep-alive connections wait in the
//! shared waiting room rather than hold a thread (see `waiting_room.rs`). Each thread joins
//! `ops::Control` (a scoreboard slot and an access-log buffer of its own); the pool ends when
//! a graceful stop has emptied the room and every thread has finished its connection.
//! Must not touch: serving a connection (that is `blocking.rs`).
//! Sources: Flash §3.2 (MT), JAWS §3.2 (thread pool).

use std::io;
use std::sync::Arc;

use super::blocking::{self, SharedCaches, Worker};
use super::listener::Listener;
use super::waiting_room::{self, Between, ListenerWake, WaitingRoom};
use crate::content::budget::CacheBudget;
use crate::content::caches::Caches;
use crate::ops::Control;

/// Run the pool until a graceful stop has drained it (or a stop).
///
/// # Errors
/// The waiting room or a thread cannot be set up.
pub fn run(control: &Arc<Control>, listeners: Vec<Listener>) -> io::Result<()> {
    let config = control.current().config.clone();
    let threads = config.thread_count();
    let shards = blocking::shards_for(threads);
    // One more scoreboard slot than threads: the shared caches publish to it.
    let caches = Arc::new(SharedCaches::new(
        Caches::new(&config.caches, shards, &CacheBudget::of(&config, 1, 1)),
        control.stats.add_loop(),
    ));
    let room = Arc::new(WaitingRoom::new(
        listeners,
        ListenerWake::OneShot,
        shards,
        control.stopping_fd(),
    )?);
    let mut handles = Vec::with_capacity(threads);
    for index in 1..threads {
        let mut worker = Worker::new(control.clone(), caches.clone(), control.stats.add_loop());
        let room = room.clone();
        handles.push(
            std::thread::Builder::new()
                .name(format!("mt-{index}"))
                .spawn(move || waiting_room::serve(&room, &mut worker, Between::Park))?,
        );
    }
    // The main thread is the pool's first thread.
    let mut worker = Worker::new(control.clone(), caches, control.stats.add_loop());
    let served = waiting_room::serve(&room, &mut worker, Between::Park);
    for handle in handles {
        handle
            .join()
            .map_err(|_| io::Error::other("an mt thread panicked"))??;
    }
    served
}
