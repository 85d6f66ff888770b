//! `mt`: a pool of threads, each serving one connection at a time with blocking calls, all
//! sharing one set of caches (Flash-MT, JAWS's thread pool). A thread blocked on the disk holds
//! up only its own connection; the others go on serving.
//!
//! Owns: the pool's threads and the caches they share. Idle keep-alive connections wait in the
//! shared waiting room rather than hold a thread (see `waiting_room.rs`).
//! Must not touch: serving a connection (that is `blocking.rs`).
//! Sources: Flash §3.2 (MT), JAWS §3.2 (thread pool).

use std::io;
use std::os::fd::OwnedFd;
use std::sync::Arc;

use super::blocking::Worker;
use super::waiting_room::{self, Between, ListenerWake, WaitingRoom};
use crate::config::Config;
use crate::content::caches::Caches;
use crate::content::resolve::DocRoot;

/// Cache shards per pool thread: enough that two threads rarely want the same lock for
/// different keys (the same hot key still shares one; its critical section is a lookup).
const SHARDS_PER_THREAD: usize = 2;
/// Most shards: past this, more shards only cost memory.
const MAX_SHARDS: usize = 64;

/// Run the pool until the process ends.
///
/// # Errors
/// The waiting room or a thread cannot be set up.
pub fn run(config: Arc<Config>, root: Arc<DocRoot>, listener: OwnedFd) -> io::Result<()> {
    let threads = config.thread_count();
    let shards = (threads * SHARDS_PER_THREAD).min(MAX_SHARDS);
    let caches = Arc::new(Caches::new(&config.caches, shards));
    let room = Arc::new(WaitingRoom::new(
        listener,
        ListenerWake::OneShot,
        shards,
        config.limits.keepalive_timeout,
    )?);
    let mut handles = Vec::with_capacity(threads);
    for index in 1..threads {
        let mut worker = Worker::new(config.clone(), root.clone(), caches.clone());
        let room = room.clone();
        handles.push(
            std::thread::Builder::new()
                .name(format!("mt-{index}"))
                .spawn(move || waiting_room::serve_forever(&room, &mut worker, Between::Park))?,
        );
    }
    // The main thread is the pool's first thread.
    let mut worker = Worker::new(config, root, caches);
    waiting_room::serve_forever(&room, &mut worker, Between::Park)?;
    for handle in handles {
        handle
            .join()
            .map_err(|_| io::Error::other("an mt thread panicked"))??;
    }
    Ok(())
}
