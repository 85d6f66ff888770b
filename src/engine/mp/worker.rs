//! An `mp` worker's life, from the moment `fork` returns in the child: tie itself to the master,
//! start its own threads (access log, commands), join `ops::Control` with its own slot of the
//! shared scoreboard and table of the admission counts, and serve from its own waiting room and
//! caches until a graceful stop has drained it.
//!
//! Owns: the worker's start-up and exit status. Must not touch: serving (`blocking.rs`,
//! `waiting_room.rs`), the master (`mod.rs`).

use std::io;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::Duration;

use ampd_sys::child;
use ampd_sys::signal::SIGKILL;

use super::Master;
use crate::config::Level;
use crate::content::budget::CacheBudget;
use crate::content::caches::Caches;
use crate::engine::blocking::{SharedCaches, Worker};
use crate::engine::listener::Listener;
use crate::engine::waiting_room::{self, Between, ListenerWake, WaitingRoom};
use crate::log::error;
use crate::ops::{signals, Control, Role, Shared};

/// The worker's exit status: 0 after a graceful stop, 1 if it could not start.
pub(super) fn main(
    master: &Master,
    index: usize,
    commands: OwnedFd,
    listeners: Vec<Listener>,
) -> i32 {
    let parent = child::parent_pid();
    // Die with the master even if it is killed with SIGKILL and cannot stop us (the handled
    // signals stay blocked here, so only SIGKILL is sure to arrive).
    if child::set_parent_death_signal(SIGKILL).is_err() || child::parent_pid() != parent {
        return 1;
    }
    if listeners.is_empty() {
        return 1;
    }
    match serve(master, index, commands, listeners) {
        Ok(()) => 0,
        Err(failure) => {
            error::log(
                Level::Error,
                format_args!("mp worker {}: {failure}", child::pid()),
            );
            1
        }
    }
}

fn serve(
    master: &Master,
    index: usize,
    commands: OwnedFd,
    listeners: Vec<Listener>,
) -> io::Result<()> {
    let shared = Shared {
        stats: master.shared.stats.clone(),
        admission: Arc::new(master.shared.admission.for_process(index)),
        rates: master.shared.rates.clone(),
    };
    let slot = shared.stats.claim(index);
    let control = Arc::new(Control::new(
        master.generation.clone(),
        master.config_path.clone(),
        &shared,
        master.log_file.try_clone()?,
        Role::Worker { slot },
    )?);
    signals::spawn_commands(control.clone(), commands)?;
    let config = &master.generation.config;
    let room = Arc::new(WaitingRoom::new(
        listeners,
        ListenerWake::Exclusive,
        1,
        control.stopping_fd(),
    )?);
    // Its own descriptor limit; memory shared with every worker (one cgroup).
    let budget = CacheBudget::of(config, 1, config.thread_count());
    let caches = Arc::new(SharedCaches::new(
        Caches::new(&config.caches, 1, &budget),
        slot,
    ));
    let mut worker = Worker::new(control.clone(), caches, slot);
    // A worker busy with a response when the drain begins cannot take the backlog (idle
    // processes do): it closes its copy of the socket at once, so the port refuses once every
    // process has closed its copy instead of when the longest response ends.
    let busy_room = room.clone();
    worker.on_drain_while_busy(Box::new(move || busy_room.close_listener()));
    let served = waiting_room::serve(&room, &mut worker, Between::Hold);
    drop(worker);
    control.access_log.sync(Duration::from_secs(10));
    served
}
