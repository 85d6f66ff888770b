//! Engines: who owns threads and who does blocking disk work. Only `main` imports this.
//!
//! Owns: binding listeners and starting the loops of the chosen architecture.
//! Must not touch: HTTP or content decisions — every engine runs the same `conn` and
//! `content` code, so a comparison measures the architecture alone (Flash §6).
//! Sources: Flash §3–4 (SPED, AMPED); Zeus/nginx worker-per-core for `reactor`.

pub mod event_loop;
pub mod helpers;

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;

use ampd_sys::socket;

use crate::config::{Arch, Config};
use crate::content::serve::DiskAccess;
use crate::ops::Control;
use event_loop::{EventLoop, LoopSettings};

/// Listen backlog: enough for bursts of thousands of connections (Abyss measured 2,500/s).
const BACKLOG: i32 = 4096;

/// How long the kernel holds a connection that has sent nothing before handing it over anyway.
const DEFER_ACCEPT_SECS: u32 = 1;

/// Listening sockets bound and ready, before any loop runs (so start-up errors are reported
/// before the server says it is serving).
pub struct Bound {
    listeners: Vec<OwnedFd>,
    pub local: SocketAddr,
}

/// How many event loops an architecture runs.
#[must_use]
pub fn loop_count(config: &Config) -> usize {
    match config.arch {
        Arch::Sped | Arch::Amped => 1,
        Arch::Reactor => config.threads.max(1),
    }
}

/// Bind the listeners: one for `sped`/`amped`, one per loop with `SO_REUSEPORT` for
/// `reactor`, so the kernel spreads connections across loops with no shared accept lock.
/// Under systemd socket activation, `activated` holds the passed sockets (main takes them
/// before anything else opens a descriptor); the first is used instead, shared by the loops,
/// and `config.listen` is ignored.
///
/// # Errors
/// The address cannot be bound (in use, no permission, not local), or a passed socket is not
/// a listening socket.
pub fn bind(config: &Config, mut activated: Vec<OwnedFd>) -> io::Result<Bound> {
    let count = loop_count(config);
    if !activated.is_empty() {
        let first = activated.swap_remove(0);
        tune_listener(&first)?;
        let local = socket::local_addr(first.as_fd())?;
        let mut listeners = Vec::new();
        for _ in 1..count {
            listeners.push(first.try_clone()?);
        }
        listeners.insert(0, first);
        return Ok(Bound { listeners, local });
    }
    let reuse_port = config.arch == Arch::Reactor;
    let first = listen(config.listen, reuse_port)?;
    let local = socket::local_addr(first.as_fd())?;
    let mut listeners = vec![first];
    for _ in 1..count {
        listeners.push(listen(local, true)?);
    }
    Ok(Bound { listeners, local })
}

fn listen(addr: SocketAddr, reuse_port: bool) -> io::Result<OwnedFd> {
    let listener = socket::listen_tcp(addr, reuse_port, BACKLOG)?;
    tune_listener(&listener)?;
    Ok(listener)
}

/// Set the options every accepted socket inherits (on our own listeners and on those systemd
/// passes):
///
/// * `TCP_NODELAY` once here instead of a `setsockopt` per connection: responses leave in whole
///   writes, so Nagle would only delay them.
/// * `TCP_DEFER_ACCEPT` (as h2o sets by default; nginx's `listen ... deferred`): a connection
///   is accepted once its request has arrived, so one wake-up serves it from accept to response
///   instead of two (listener, then data), and a client that connects and sends nothing costs
///   the server no slot. Measured on the connection-per-request row of docs/benchmarks.md.
fn tune_listener(listener: &OwnedFd) -> io::Result<()> {
    socket::set_nodelay(listener.as_fd(), true)?;
    socket::set_defer_accept(listener.as_fd(), DEFER_ACCEPT_SECS)
}

/// Run the architecture's loops until a graceful stop has drained them (or a stop).
///
/// # Errors
/// A loop cannot be set up, or fails.
pub fn run(control: Arc<Control>, bound: Bound) -> io::Result<()> {
    ampd_sys::process::ignore_sigpipe()?;
    if let Ok(nofile) = ampd_sys::process::raise_nofile_limit() {
        control.admission.limit_descriptors(nofile);
    }
    let config = control.current().config.clone();
    let disk = match config.arch {
        Arch::Sped => DiskAccess::Inline,
        Arch::Amped | Arch::Reactor => DiskAccess::Helpers,
    };
    let mut loops = Vec::new();
    for (index, listener) in bound.listeners.into_iter().enumerate() {
        let settings = LoopSettings {
            name: format!("{}-{index}", config.arch.name()),
            control: control.clone(),
            disk,
            helpers: config.helpers,
        };
        loops.push(EventLoop::new(listener, settings)?);
    }
    let mut handles = Vec::new();
    let last = loops.pop().expect("at least one loop");
    for (index, mut event_loop) in loops.into_iter().enumerate() {
        let handle = std::thread::Builder::new()
            .name(format!("{}-loop-{index}", config.arch.name()))
            .spawn(move || event_loop.run())?;
        handles.push(handle);
    }
    // The last loop runs on the main thread.
    let mut last = last;
    last.run()?;
    for handle in handles {
        handle
            .join()
            .map_err(|_| io::Error::other("an event loop panicked"))??;
    }
    Ok(())
}
