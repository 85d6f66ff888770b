//! Engines: who owns threads, processes and caches, and who does blocking disk work. Only `main`
//! imports this.
//!
//! Owns: binding listeners, choosing the architecture that runs (falling back from `uring` to
//! `reactor` where io_uring is unavailable), starting it under `ops::Control`, and the steps
//! every engine takes with a new connection (`client.rs`) and its timeouts (`phase_clock.rs`).
//! Must not touch: HTTP or content decisions — every engine runs the same `conn` and `content`
//! code, so a comparison measures the architecture alone (Flash §6).
//! Sources: Flash §3–4 (SPED, AMPED, MT, MP); JAWS §3 (thread pool, thread per connection,
//! asynchronous dispatch); Zeus/nginx worker-per-core for `reactor`.
//!
//! | arch | module |
//! |---|---|
//! | `sped`, `amped`, `reactor` | `event_loop/` (+ `helpers/`, `helper_process.rs`) |
//! | `mt`, `mp` | `blocking.rs` + `waiting_room.rs`, started by `mt.rs` / `mp/` |
//! | `tpc` | `blocking.rs`, started by `tpc.rs` |
//! | `uring` | `uring/` (+ `helpers/`) |

pub mod blocking;
pub mod client;
mod core;
pub mod event_loop;
pub mod helper_process;
pub mod helpers;
pub mod listener;
pub mod mp;
pub mod mt;
pub mod phase_clock;
pub mod slab;
pub mod tpc;
pub mod upstream;
pub mod uring;
pub mod waiting_room;

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ampd_sys::socket;

use crate::config::{Arch, Config, HelperMode, Level, Listen};
use crate::content::budget::CacheBudget;
use crate::content::sink::DiskAccess;
use crate::log::access::LogFile;
use crate::log::error;
use crate::ops::{signals, Control, Role, Shared};
use crate::site::Generation;
use event_loop::{EventLoop, LoopSettings, PagesInFlight};
use helpers::PoolSize;
use listener::{Listener, Speaks};

/// Listen backlog: enough for bursts of thousands of connections (Abyss measured 2,500/s).
const BACKLOG: i32 = 4096;

/// How long the kernel holds a connection that has sent nothing before handing it over anyway.
const DEFER_ACCEPT_SECS: u32 = 1;

/// Listening sockets bound and ready, before any loop runs (so start-up errors are reported
/// before the server says it is serving).
pub struct Bound {
    /// One set per loop or ring (`reactor`, `uring`: each its own `SO_REUSEPORT` sockets), or
    /// one set for the whole engine; a set holds a listener per `listen` entry.
    sets: Vec<Vec<Listener>>,
    /// The architecture that will run: the configured one, or `reactor` for `uring` where
    /// io_uring is unavailable.
    pub arch: Arch,
}

/// Everything the server is started with, made by `main` before any thread exists.
pub struct Start {
    pub generation: Generation,
    /// The file `SIGHUP` reloads (`None` under `ampd serve`).
    pub config_path: Option<PathBuf>,
    pub shared: Shared,
    /// The access log, opened (before privileges were dropped).
    pub log_file: LogFile,
}

/// How many listeners (and event loops or rings) an architecture runs: one per loop with
/// `SO_REUSEPORT` for `reactor` and `uring`, so the kernel spreads connections with no shared
/// accept lock; one shared by every thread or process otherwise.
fn listener_count(arch: Arch, config: &Config) -> usize {
    match arch {
        Arch::Reactor | Arch::Uring => config.thread_count().max(1),
        _ => 1,
    }
}

/// Bind the listeners, after deciding whether `uring` can run here (the one-line reason goes
/// to stderr when it cannot). Sockets passed by systemd (socket activation) or by the process
/// this one upgrades (`ops::upgrade`) arrive in `activated` (main takes them before anything
/// else opens a descriptor) and are used instead, in order, and `config.listen` is ignored:
/// an engine with a listener per loop takes one each (a passed socket is shared by several
/// loops when there are fewer than loops); one with a single listener takes the first.
/// Passed sockets beyond what the engine uses are closed, with a warning: connections
/// waiting in their backlogs are reset (an upgrade that lowers `threads`).
///
/// # Errors
/// The address cannot be bound (in use, no permission, not local), or a passed socket is not
/// a listening socket.
pub fn bind(config: &Config, activated: Vec<OwnedFd>) -> Result<Bound, BindError> {
    let mut arch = config.arch;
    if arch == Arch::Uring {
        if let Err(reason) = uring::probe() {
            eprintln!("ampd: io_uring unavailable ({reason}); serving with reactor instead");
            arch = Arch::Reactor;
        }
    }
    let count = listener_count(arch, config);
    let passed = |error| BindError {
        address: "the passed sockets".to_owned(),
        error,
    };
    let mut sets: Vec<Vec<Listener>> = (0..count).map(|_| Vec::new()).collect();
    if !activated.is_empty() {
        let locals = activated
            .iter()
            .map(|fd| socket::local_addr(fd.as_fd()))
            .collect::<io::Result<Vec<_>>>()
            .map_err(passed)?;
        let speaks = listener::speaks_of_passed(&locals, &config.listen);
        // One group per socket (a predecessor passes a descriptor per loop of each).
        let mut groups: Vec<(std::net::SocketAddr, Speaks, Vec<OwnedFd>)> = Vec::new();
        for ((fd, local), speaks) in activated.into_iter().zip(locals).zip(speaks) {
            match groups.iter_mut().find(|(address, ..)| *address == local) {
                Some((.., fds)) => fds.push(fd),
                None => groups.push((local, speaks, vec![fd])),
            }
        }
        for (_, speaks, fds) in groups {
            for (set, fd) in sets
                .iter_mut()
                .zip(take_passed(fds, count).map_err(passed)?)
            {
                set.push(Listener::new(fd, speaks).map_err(passed)?);
            }
        }
        return Ok(Bound { sets, arch });
    }
    let reuse_port = matches!(arch, Arch::Reactor | Arch::Uring);
    let mut index = 0;
    let mut pair_attempt = 1;
    while let Some(entry) = config.listen.get(index) {
        let mut address = entry.address;
        // The `[::]` half of `:0` takes the port its `0.0.0.0` half (just bound) got.
        let inherited = entry.ipv6_half && address.port() == 0;
        if inherited {
            address.set_port(sets[0].last().map_or(0, |half| half.local.port()));
        }
        let failed = |error| BindError {
            address: address.to_string(),
            error,
        };
        match bind_fresh(address, count, reuse_port) {
            Ok(fds) => {
                for (set, fd) in sets.iter_mut().zip(fds) {
                    set.push(Listener::new(fd, Speaks::of(entry)).map_err(failed)?);
                }
                index += 1;
            }
            // Another socket holds `[::]:P` for the port the IPv4 half was given: that half
            // gives the port back and the pair is bound afresh (as `bind_fresh` retries a
            // port-0 group).
            Err(error)
                if inherited
                    && error.kind() == io::ErrorKind::AddrInUse
                    && pair_attempt < PORT_ZERO_ATTEMPTS =>
            {
                for set in &mut sets {
                    set.pop();
                }
                pair_attempt += 1;
                index -= 1;
            }
            Err(error) if entry.ipv6_half && socket::is_no_ipv6(&error) => {
                error::log(
                    Level::Warn,
                    format_args!(
                        "cannot listen on {address} ({}): no IPv6 here; :{} listens on IPv4 only",
                        crate::config::plain(&error),
                        address.port()
                    ),
                );
                index += 1;
            }
            Err(error) => return Err(failed(error)),
        }
    }
    Ok(Bound { sets, arch })
}

/// A listener cannot be bound: which address, and why.
#[derive(Debug)]
pub struct BindError {
    pub address: String,
    pub error: io::Error,
}

impl std::fmt::Display for BindError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            formatter,
            "cannot listen on {}: {}",
            self.address,
            crate::config::plain(&self.error)
        )
    }
}

impl Bound {
    /// The `listen` entries as bound, in order.
    #[must_use]
    pub fn listening(&self) -> Vec<Listen> {
        self.sets[0]
            .iter()
            .map(|listener| Listen {
                address: listener.local,
                tls: listener.tls,
                h2c: listener.h2c,
                ipv6_half: false,
            })
            .collect()
    }

    /// Every listener's URL, in `listen` order (the ready line).
    #[must_use]
    pub fn urls(&self) -> String {
        self.sets[0]
            .iter()
            .map(Listener::url)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// How many times a port-0 group is bound afresh when another process takes the port between
/// the probe and the group's bind (see `bind_fresh`).
const PORT_ZERO_ATTEMPTS: usize = 3;

/// Bind `count` new listeners on `addr`: one socket, or with `reuse_port` one `SO_REUSEPORT`
/// socket per loop or ring, after checking that no other socket holds the address.
///
/// `SO_REUSEPORT` lets any process of the same user join a port's group, so without the check a
/// second server would start on a port the first holds and the kernel would split connections
/// between two different sites. The probe (`socket::probe_bind_tcp`) binds the address once
/// WITHOUT `SO_REUSEPORT`, which fails with `EADDRINUSE` while any other socket listens there,
/// as nginx's and Caddy's plain binds do. Sockets that arrive already bound (systemd's, or a
/// predecessor's handed over in a binary upgrade) are ours by definition and must not be
/// probed: this function is only for sockets this process creates.
///
/// Remaining race: the probe is closed before the group binds (a bound probe without
/// `SO_REUSEPORT` would make the group's own binds fail), so a reuse-port listener that another
/// process of the same user (the kernel keeps a group to one user) binds in that window of a
/// few microseconds still shares the port with this group. Closing it would need an exclusive
/// group, which the kernel does not offer; two servers started in the same instant on one port
/// is the only case left. A plain listener taking the port in that window makes the group's
/// bind fail with `EADDRINUSE`, which is reported (or, for port 0, retried on a new port).
fn bind_fresh(addr: SocketAddr, count: usize, reuse_port: bool) -> io::Result<Vec<OwnedFd>> {
    if !reuse_port {
        // A plain bind is its own check.
        return Ok(vec![listen(addr, false)?]);
    }
    let mut attempt = 1;
    loop {
        let claimed = socket::probe_bind_tcp(addr)?;
        match (0..count.max(1))
            .map(|_| listen(claimed, true))
            .collect::<io::Result<Vec<_>>>()
        {
            Err(error)
                if addr.port() == 0
                    && attempt < PORT_ZERO_ATTEMPTS
                    && error.kind() == io::ErrorKind::AddrInUse =>
            {
                attempt += 1;
            }
            bound => return bound,
        }
    }
}

/// `count` listeners from the passed sockets, in order (see `bind`).
fn take_passed(mut passed: Vec<OwnedFd>, count: usize) -> io::Result<Vec<OwnedFd>> {
    if passed.len() > count {
        eprintln!(
            "ampd: {} listening sockets passed, {count} used; the others are closed",
            passed.len()
        );
        passed.truncate(count);
    }
    for listener in &passed {
        tune_listener(listener)?;
    }
    let mut index = 0;
    while passed.len() < count {
        passed.push(passed[index].try_clone()?);
        index += 1;
    }
    Ok(passed)
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
///   the server no slot. Measured on the connection-per-request row of docs/research/benchmarks.md.
fn tune_listener(listener: &OwnedFd) -> io::Result<()> {
    socket::set_nodelay(listener.as_fd(), true)?;
    socket::set_defer_accept(listener.as_fd(), DEFER_ACCEPT_SECS)
}

/// The ready line's description of what runs: `arch NAME, ...`.
#[must_use]
pub fn describe(config: &Config, bound: &Bound) -> String {
    let count = config.thread_count();
    let plural = |n: usize, word: &str| match (n, word.ends_with('s')) {
        (1, _) => format!("1 {word}"),
        (_, true) => format!("{n} {word}es"),
        (_, false) => format!("{n} {word}s"),
    };
    let helpers = match config.helper_mode {
        HelperMode::Threads => plural(config.helpers, "helper thread"),
        HelperMode::Processes => plural(config.helpers, "helper process"),
    };
    let what = match bound.arch {
        Arch::Sped => "1 loop, no helpers".to_owned(),
        Arch::Amped => format!("1 loop, {helpers}"),
        Arch::Reactor | Arch::Uring => {
            let unit = if bound.arch == Arch::Uring {
                "ring"
            } else {
                "loop"
            };
            format!("{}, {helpers} per {unit}", plural(bound.sets.len(), unit))
        }
        Arch::Mt => format!("{}, one shared cache", plural(count, "thread")),
        Arch::Tpc => format!("a thread per connection, at most {count}"),
        Arch::Mp => format!("{}, a cache each", plural(count, "worker process")),
    };
    if bound.arch == config.arch {
        format!("arch {}, {what}", bound.arch.name())
    } else {
        format!(
            "arch {}, {what}; {} unavailable",
            bound.arch.name(),
            config.arch.name()
        )
    }
}

/// Serve until a graceful stop has drained every loop, thread or process (or a stop). `mp`
/// forks its workers first and supervises them (`mp::run`); every other engine runs in this
/// process under one `Control`, with the signal thread.
///
/// # Errors
/// The architecture cannot be set up, or fails.
pub fn run(start: Start, bound: Bound) -> io::Result<()> {
    ampd_sys::process::ignore_sigpipe()?;
    let nofile = ampd_sys::process::raise_nofile_limit().ok();
    let processes = match bound.arch {
        Arch::Mp => start.generation.config.thread_count(),
        _ => 1,
    };
    if let Some(nofile) = nofile {
        let config = &start.generation.config;
        let per_connection = config.descriptors_per_connection();
        let cap = start.shared.admission.limit_descriptors(
            nofile,
            processes,
            per_connection,
            &config.admission,
        );
        announce_connection_cap(config, nofile, processes, per_connection, cap);
    }
    announce_cache_sizes(&start.generation.config, &bound);
    if bound.arch == Arch::Mp {
        // Before any thread exists: the master forks, each worker starts its own threads.
        return mp::run(start, bound.sets.into_iter().next().unwrap_or_default());
    }
    let Start {
        generation,
        config_path,
        shared,
        log_file,
    } = start;
    let control = Arc::new(Control::new(
        Arc::new(generation),
        config_path,
        &shared,
        log_file,
        Role::Server,
    )?);
    let Bound { mut sets, arch } = bound;
    // For an upgrade (`SIGUSR2`) to pass on: the very sockets the loops accept from, in
    // `listen` order (see `listener::speaks_of_passed`).
    let mut kept = Vec::new();
    for index in 0..sets[0].len() {
        for set in &sets {
            kept.push(set[index].fd.try_clone()?);
        }
    }
    control.keep_listeners(kept);
    signals::spawn(control.clone())?;
    let served = match arch {
        Arch::Sped | Arch::Amped | Arch::Reactor => run_loops(arch, &control, sets),
        Arch::Uring => uring::run(&control, sets),
        Arch::Mt => mt::run(&control, sets.remove(0)),
        Arch::Tpc => tpc::run(&control, sets.remove(0)),
        Arch::Mp => unreachable!("mp returned above"),
    };
    // Every loop has handed its buffer over; wait for the log thread to write it all.
    control.access_log.sync(Duration::from_secs(10));
    served
}

/// Say at start-up how a memory limit sized the caches (each engine sizes its own the same way).
/// Say at start-up (an info line) that the descriptor limit holds the connection cap below
/// `max_connections`, and why: the refusals that follow name the cap in force, and without
/// this line a `503` under `max_connections = 100000` would be a riddle.
fn announce_connection_cap(
    config: &Config,
    nofile: u64,
    processes: usize,
    per_connection: u64,
    cap: usize,
) {
    let max_connections = config.admission.max_connections;
    if cap >= max_connections {
        return;
    }
    let scope = if processes > 1 {
        format!(" ({} per worker process)", cap / processes)
    } else {
        String::new()
    };
    let each = if per_connection > 1 {
        format!(
            "{per_connection} descriptors each: a location passes requests to another program, \
             whose socket a connection holds as well"
        )
    } else {
        "1 descriptor each".to_owned()
    };
    crate::log::error::log(
        crate::config::Level::Info,
        format_args!(
            "RLIMIT_NOFILE {nofile}: at most {cap} connections at once{scope}, below \
             max_connections = {max_connections} ({each}; half the limit is kept for files \
             and the rest)"
        ),
    );
}

fn announce_cache_sizes(config: &Config, bound: &Bound) {
    let (sets, unit) = match bound.arch {
        Arch::Sped | Arch::Amped => (1, "loop"),
        Arch::Reactor => (bound.sets.len(), "loop"),
        Arch::Uring => (bound.sets.len(), "ring"),
        Arch::Mt | Arch::Tpc => (1, "set shared by the threads"),
        Arch::Mp => (config.thread_count(), "process"),
    };
    CacheBudget::of(config, 1, sets).announce(sets, unit);
}

/// `sped`, `amped`, `reactor`: one epoll loop per listener set, the last on the main thread.
fn run_loops(arch: Arch, control: &Arc<Control>, sets: Vec<Vec<Listener>>) -> io::Result<()> {
    let disk = match arch {
        Arch::Sped => DiskAccess::Inline,
        _ => DiskAccess::Helpers,
    };
    let helpers = PoolSize::of(&control.current().config);
    let pages_in_flight = Arc::new(PagesInFlight::default());
    let loops = sets.len();
    let cache_budget = CacheBudget::of(&control.current().config, loops, loops);
    let mut loops = Vec::new();
    for (index, listeners) in sets.into_iter().enumerate() {
        let settings = LoopSettings {
            name: format!("{}-{index}", arch.name()),
            control: control.clone(),
            disk,
            helpers,
            pages_in_flight: pages_in_flight.clone(),
            cache_budget: cache_budget.clone(),
        };
        loops.push(EventLoop::new(listeners, settings)?);
    }
    let mut handles = Vec::new();
    let mut last = loops.pop().expect("at least one loop");
    for (index, mut event_loop) in loops.into_iter().enumerate() {
        let handle = std::thread::Builder::new()
            .name(format!("{}-loop-{index}", arch.name()))
            .spawn(move || event_loop.run())?;
        handles.push(handle);
    }
    last.run()?;
    for handle in handles {
        handle
            .join()
            .map_err(|_| io::Error::other("an event loop panicked"))??;
    }
    Ok(())
}
