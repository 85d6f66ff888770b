//! The readiness driver shared by `sped`, `amped` and `reactor`: one epoll loop that accepts,
//! reads, lets each `Conn` decide, and writes — and never blocks unless told it may (`sped`).
//!
//! Owns: sockets, the connection slab, timeouts, the `Date` clock, and carrying out `Need`s:
//! `writev` for memory, `sendfile` for files (after a residency test under AMPED, Flash §5.4),
//! jobs inline or on helpers. Epoll is edge-triggered: each socket is registered once for both
//! directions, and the loop remembers what it may still read or write.
//! Must not touch: HTTP (that is `conn`'s), what a job does (that is `content::job`'s).

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ampd_http::date::format_http_date;
use ampd_sys::epoll::{Epoll, Events, Interest};
use ampd_sys::{io as sysio, socket};

use super::helpers::{Helpers, Token};
use crate::config::Config;
use crate::conn::{Conn, Context, Ending, Need, Phase};
use crate::content::caches::Caches;
use crate::content::job::{self, Job, JobDone};
use crate::content::resolve::DocRoot;
use crate::content::serve::{self, DiskAccess};

const LISTENER: u64 = u64::MAX;
const HELPERS: u64 = u64::MAX - 1;
const INOTIFY: u64 = u64::MAX - 2;

/// Connections accepted per wake-up before others get a turn.
const ACCEPT_BATCH: usize = 64;
/// How long accepting pauses when descriptors run out (`EMFILE`), instead of spinning on a
/// listener that stays readable. Pending connections wait in the backlog meanwhile.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);
/// Input read per connection per turn.
const READ_CHUNK: usize = 16 << 10;
/// Passes through one connection's read–decide–write cycle before others get a turn.
const TURNS: usize = 8;
/// How often timeouts are checked.
const SWEEP: Duration = Duration::from_millis(250);

/// What one loop is told at start-up.
pub struct LoopSettings {
    pub name: String,
    pub config: Arc<Config>,
    pub root: Arc<DocRoot>,
    pub disk: DiskAccess,
    pub helpers: usize,
}

struct Slot {
    fd: OwnedFd,
    conn: Conn,
    generation: u32,
    can_read: bool,
    can_write: bool,
    /// Registered for writability (see `admit`).
    watching_writes: bool,
    /// A job (or page-in) is out for this connection.
    job_out: bool,
    phase: Phase,
    phase_since: Instant,
    /// Write side shut; draining input until the client closes (lingering close).
    lingering: bool,
}

pub struct EventLoop {
    settings: LoopSettings,
    epoll: Epoll,
    listener: OwnedFd,
    /// Boxed, so the slab's spare capacity costs a pointer per slot, not a whole connection.
    slots: Vec<Option<Box<Slot>>>,
    free: Vec<usize>,
    next_generation: u32,
    helpers: Option<Helpers>,
    caches: Caches,
    date: [u8; 29],
    date_secs: u64,
    /// Connections with work they could do now without a new epoll event.
    ready: VecDeque<usize>,
    accept_more: bool,
    accept_paused_until: Option<Instant>,
    last_sweep: Instant,
    completions: Vec<(Token, JobDone)>,
    /// The one read buffer of this loop (see `read_input`).
    scratch: Box<[u8]>,
}

impl EventLoop {
    /// # Errors
    /// epoll, helper threads or inotify cannot be set up.
    pub fn new(listener: OwnedFd, settings: LoopSettings) -> io::Result<EventLoop> {
        let epoll = Epoll::new()?;
        epoll.add(listener.as_fd(), LISTENER, Interest::READABLE.edge())?;
        let helpers = if settings.disk == DiskAccess::Helpers {
            let helpers = Helpers::start(
                settings.helpers,
                &settings.name,
                settings.config.helper_mode,
            )?;
            epoll.add(helpers.wake_fd(), HELPERS, Interest::READABLE.edge())?;
            Some(helpers)
        } else {
            None
        };
        let caches = Caches::new(&settings.config.caches, 1);
        if let Some(watcher) = &caches.watcher {
            epoll.add(watcher.as_fd(), INOTIFY, Interest::READABLE.edge())?;
        }
        let now = unix_now();
        Ok(EventLoop {
            settings,
            epoll,
            listener,
            slots: Vec::new(),
            free: Vec::new(),
            next_generation: 1,
            helpers,
            caches,
            date: format_http_date(now),
            date_secs: now,
            ready: VecDeque::new(),
            accept_more: false,
            accept_paused_until: None,
            last_sweep: Instant::now(),
            completions: Vec::new(),
            scratch: vec![0u8; READ_CHUNK].into_boxed_slice(),
        })
    }

    /// Serve until the process ends.
    ///
    /// # Errors
    /// `epoll_wait` fails for a reason other than a signal.
    pub fn run(&mut self) -> io::Result<()> {
        let mut events = Events::with_capacity(256);
        loop {
            let timeout = self.wait_timeout();
            self.epoll.wait(&mut events, timeout)?;
            let now = Instant::now();
            self.tick_date();
            // Changes on disk first: a request that arrived after a change must see it.
            if events.iter().any(|event| event.token == INOTIFY) {
                self.caches.on_change();
            }
            for event in events.iter() {
                match event.token {
                    LISTENER => self.accept_more = true,
                    HELPERS => self.take_completions(),
                    INOTIFY => {}
                    token => {
                        let Some(index) = self.slot_of(token) else {
                            continue;
                        };
                        if let Some(slot) = self.slots[index].as_mut() {
                            slot.can_read |= event.readable || event.hangup || event.error;
                            slot.can_write |= event.writable || event.error;
                        }
                        self.drive(index);
                    }
                }
            }
            if self.accept_more && self.accept_paused_until.is_none_or(|until| now >= until) {
                self.accept_paused_until = None;
                self.accept_batch();
            }
            for _ in 0..self.ready.len() {
                if let Some(index) = self.ready.pop_front() {
                    self.drive(index);
                }
            }
            if now.duration_since(self.last_sweep) >= SWEEP {
                self.last_sweep = now;
                self.sweep(now);
            }
        }
    }

    /// How long `epoll_wait` may sleep: not at all while work is ready, until the end of an
    /// accept pause (never a busy loop while descriptors are exhausted), else one sweep.
    fn wait_timeout(&self) -> i32 {
        if !self.ready.is_empty() {
            return 0;
        }
        if self.accept_more {
            return match self.accept_paused_until {
                Some(until) => {
                    let left = until.saturating_duration_since(Instant::now()).min(SWEEP);
                    i32::try_from(left.as_millis()).unwrap_or(0).max(1)
                }
                None => 0,
            };
        }
        i32::try_from(SWEEP.as_millis()).unwrap_or(250)
    }

    fn tick_date(&mut self) {
        let now = unix_now();
        if now != self.date_secs {
            self.date_secs = now;
            self.date = format_http_date(now);
        }
    }

    fn slot_of(&self, token: u64) -> Option<usize> {
        let index = usize::try_from(token & 0xffff_ffff).ok()?;
        let generation = (token >> 32) as u32;
        match self.slots.get(index) {
            Some(Some(slot)) if slot.generation == generation => Some(index),
            _ => None,
        }
    }

    fn token(&self, index: usize) -> u64 {
        let generation = self.slots[index].as_ref().map_or(0, |slot| slot.generation);
        (u64::from(generation) << 32) | index as u64
    }

    fn accept_batch(&mut self) {
        for _ in 0..ACCEPT_BATCH {
            match socket::accept(self.listener.as_fd()) {
                Ok((fd, _peer)) => {
                    if let Err(error) = self.admit(fd) {
                        eprintln!(
                            "ampd: {}: cannot register connection: {error}",
                            self.settings.name
                        );
                    }
                }
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                    self.accept_more = false;
                    return;
                }
                // Out of descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM): pause (the
                // listener stays registered and the backlog keeps the clients) rather than spin
                // on a listener that stays readable. Other errors (the client gave up between
                // SYN and accept, a signal) just move on to the next connection.
                Err(error) => {
                    if let Some(23 | 24 | 105 | 12) = error.raw_os_error() {
                        self.accept_paused_until = Some(Instant::now() + ACCEPT_PAUSE);
                        return;
                    }
                }
            }
        }
        // A full batch: more may be waiting; the flag brings us back after others had a turn.
        self.accept_more = true;
    }

    /// Take a new connection into the slab and serve it right after this accept batch: with
    /// `TCP_DEFER_ACCEPT` on the listener its request is already here, so reading it now saves
    /// a trip through `epoll_wait`. The socket is watched for input only; writability is
    /// watched from the first write that fills it (`watch_writes`), because registering for it
    /// at once reports every new socket writable, one more wake-up per connection for nothing
    /// (docs/benchmarks.md, row b).
    fn admit(&mut self, fd: OwnedFd) -> io::Result<()> {
        let index = self.free.pop().unwrap_or_else(|| {
            self.slots.push(None);
            self.slots.len() - 1
        });
        let generation = self.next_generation;
        self.next_generation = self.next_generation.wrapping_add(1).max(1);
        let token = (u64::from(generation) << 32) | index as u64;
        if let Err(error) = self.epoll.add(fd.as_fd(), token, Interest::READABLE.edge()) {
            self.free.push(index);
            return Err(error);
        }
        self.slots[index] = Some(Box::new(Slot {
            fd,
            conn: Conn::new(&self.settings.config),
            generation,
            can_read: true,
            can_write: true,
            watching_writes: false,
            job_out: false,
            phase: Phase::Idle,
            phase_since: Instant::now(),
            lingering: false,
        }));
        self.ready.push_back(index);
        Ok(())
    }

    fn take_completions(&mut self) {
        let Some(helpers) = self.helpers.as_ref() else {
            return;
        };
        let mut completions = std::mem::take(&mut self.completions);
        helpers.completed(&mut completions);
        for (token, done) in completions.drain(..) {
            let Some(index) = self.slot_of(token) else {
                // The connection went away; a translation is still worth keeping.
                continue;
            };
            let next = {
                let slot = self.slots[index].as_mut().expect("slot_of checked it");
                slot.job_out = false;
                if let JobDone::PagedIn = done {
                    self.drive(index);
                    continue;
                }
                let mut context = Context {
                    config: &self.settings.config,
                    root: &self.settings.root,
                    caches: &self.caches,
                    date: &self.date,
                    disk: self.settings.disk,
                };
                slot.conn.job_done(done, &mut context)
            };
            match next {
                Some(job) => self.submit(index, job),
                None => self.drive(index),
            }
        }
        self.completions = completions;
    }

    fn submit(&mut self, index: usize, job: Job) {
        let token = self.token(index);
        if let Some(slot) = self.slots[index].as_mut() {
            slot.job_out = true;
        }
        match &self.helpers {
            Some(helpers) => helpers.submit(token, job),
            // SPED: the loop itself blocks on the disk, which is the point of comparison.
            None => {
                let done = job::run(job);
                let next = {
                    let Some(slot) = self.slots[index].as_mut() else {
                        return;
                    };
                    slot.job_out = false;
                    let mut context = Context {
                        config: &self.settings.config,
                        root: &self.settings.root,
                        caches: &self.caches,
                        date: &self.date,
                        disk: self.settings.disk,
                    };
                    slot.conn.job_done(done, &mut context)
                };
                if let Some(job) = next {
                    self.submit(index, job);
                }
            }
        }
    }

    /// Run one connection's read → decide → write cycle as far as it goes without blocking.
    fn drive(&mut self, index: usize) {
        for _ in 0..TURNS {
            let Some(slot) = self.slots[index].as_mut() else {
                return;
            };
            if slot.job_out {
                return;
            }
            if slot.lingering {
                self.linger(index);
                return;
            }
            let read = match read_input(slot, &mut self.scratch) {
                Ok(read) => read,
                Err(_) => return self.close(index),
            };
            let need = {
                let mut context = Context {
                    config: &self.settings.config,
                    root: &self.settings.root,
                    caches: &self.caches,
                    date: &self.date,
                    disk: self.settings.disk,
                };
                slot.conn.advance(&mut context)
            };
            if let Need::Job(job) = need {
                self.submit(index, job);
                // SPED ran it already; AMPED resumes on completion.
                let Some(slot) = self.slots[index].as_mut() else {
                    return;
                };
                if slot.job_out {
                    self.flush_and_note(index);
                    return;
                }
                continue;
            }
            let wrote = match self.flush(index) {
                Ok(wrote) => wrote,
                Err(_) => return self.close(index),
            };
            self.note_phase(index, read || wrote);
            let Some(slot) = self.slots[index].as_ref() else {
                return;
            };
            if let Need::Close(ending) = need {
                if slot.conn.output.is_empty() {
                    return self.end(index, ending);
                }
            }
            if !read && !wrote {
                return;
            }
        }
        // Still busy after its turns: others go first, then it continues.
        self.ready.push_back(index);
    }

    fn flush_and_note(&mut self, index: usize) {
        match self.flush(index) {
            Ok(wrote) => self.note_phase(index, wrote),
            Err(_) => self.close(index),
        }
    }

    fn note_phase(&mut self, index: usize, progressed: bool) {
        let Some(slot) = self.slots[index].as_mut() else {
            return;
        };
        let phase = slot.conn.phase();
        // Progress restarts the idle and send clocks; the head clock runs from the first byte
        // of the head however slowly the rest trickles in (slowloris).
        if phase != slot.phase || (progressed && matches!(phase, Phase::Sending | Phase::Idle)) {
            slot.phase = phase;
            slot.phase_since = Instant::now();
        }
    }

    /// Write queued output until the socket is full, the output is empty, this turn's budget
    /// is spent, or a file range must first be paged in by a helper. Returns whether any byte
    /// went out.
    fn flush(&mut self, index: usize) -> io::Result<bool> {
        let token = self.token(index);
        let send_chunk = self.settings.config.send.send_chunk as u64;
        let mut budget = send_chunk;
        let mut wrote = false;
        let disk = self.settings.disk;
        loop {
            let Some(slot) = self.slots[index].as_mut() else {
                return Ok(wrote);
            };
            if !slot.can_write || slot.conn.output.is_empty() || budget == 0 {
                if budget == 0 && !slot.conn.output.is_empty() && slot.can_write {
                    self.ready.push_back(index);
                }
                return Ok(wrote);
            }
            if let Some(range) = slot.conn.output.front_file() {
                let len = (range.end - range.offset).min(budget);
                if disk == DiskAccess::Helpers
                    && !serve::range_resident(range.file, range.offset, len)
                {
                    let job = Job::PageIn {
                        file: range.file.clone(),
                        offset: range.offset,
                        len,
                    };
                    self.submit(index, job);
                    return Ok(wrote);
                }
                let mut offset = range.offset;
                let count = usize::try_from(len).unwrap_or(usize::MAX);
                match sysio::sendfile(slot.fd.as_fd(), range.file.file.as_fd(), &mut offset, count)
                {
                    // The file is shorter than when its head was sent: the response cannot be
                    // completed, so the connection must end (the client sees a short body).
                    Ok(0) => return Err(io::Error::from(io::ErrorKind::UnexpectedEof)),
                    Ok(sent) => {
                        slot.conn.output.advance(sent as u64);
                        budget = budget.saturating_sub(sent as u64);
                        wrote = true;
                    }
                    Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                        watch_writes(&self.epoll, slot, token)?;
                    }
                    Err(error) => return Err(error),
                }
            } else {
                let more = if slot.conn.output.file_follows_memory() {
                    sysio::MSG_MORE
                } else {
                    0
                };
                let slices = slot.conn.output.memory_slices();
                match sysio::send_vectored(slot.fd.as_fd(), &slices, sysio::MSG_NOSIGNAL | more) {
                    Ok(sent) => {
                        slot.conn.output.advance(sent as u64);
                        budget = budget.saturating_sub(sent as u64);
                        wrote = true;
                    }
                    Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                        watch_writes(&self.epoll, slot, token)?;
                    }
                    Err(error) => return Err(error),
                }
            }
        }
    }

    /// The last response is out. A client that has sent nothing more gets a plain close (its
    /// FIN follows the response); otherwise the close lingers.
    fn end(&mut self, index: usize, ending: Ending) {
        let Some(slot) = self.slots[index].as_mut() else {
            return;
        };
        if ending == Ending::Close && !slot.can_read {
            return self.close(index);
        }
        self.begin_close(index);
    }

    /// The response is out and the connection must end: shut down our side so the client gets
    /// a FIN after the data, then drain its input until it closes, so unread request bytes do
    /// not turn our close into a reset that destroys the response in flight (lingering close).
    fn begin_close(&mut self, index: usize) {
        let Some(slot) = self.slots[index].as_mut() else {
            return;
        };
        if socket::shutdown_write(slot.fd.as_fd()).is_err() {
            return self.close(index);
        }
        slot.lingering = true;
        slot.phase = Phase::Closing;
        slot.phase_since = Instant::now();
        self.linger(index);
    }

    fn linger(&mut self, index: usize) {
        let Some(slot) = self.slots[index].as_mut() else {
            return;
        };
        let mut scratch = [0u8; 4096];
        loop {
            match sysio::read(slot.fd.as_fd(), &mut scratch) {
                Ok(0) => return self.close(index),
                Ok(_) => {}
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => return,
                Err(_) => return self.close(index),
            }
        }
    }

    fn close(&mut self, index: usize) {
        if let Some(slot) = self.slots[index].take() {
            // Closing the descriptor removes it from the epoll set.
            drop(slot);
            self.free.push(index);
        }
    }

    /// Apply the timeouts of each connection's phase.
    fn sweep(&mut self, now: Instant) {
        let limits = &self.settings.config.limits;
        let mut expired = Vec::new();
        for (index, slot) in self.slots.iter_mut().enumerate() {
            let Some(slot) = slot else { continue };
            if slot.phase == Phase::Idle && now.saturating_duration_since(slot.phase_since) >= SWEEP
            {
                slot.conn.shed_buffers();
            }
            let limit = match slot.phase {
                Phase::Idle => limits.keepalive_timeout,
                Phase::Head | Phase::Busy if !slot.job_out => limits.header_timeout,
                Phase::Head | Phase::Busy => continue,
                Phase::Sending => limits.send_timeout,
                Phase::Closing => limits.linger_timeout,
            };
            if now.saturating_duration_since(slot.phase_since) >= limit {
                expired.push((index, slot.phase));
            }
        }
        for (index, phase) in expired {
            match phase {
                Phase::Head => {
                    if let Some(slot) = self.slots[index].as_mut() {
                        let context = Context {
                            config: &self.settings.config,
                            root: &self.settings.root,
                            caches: &self.caches,
                            date: &self.date,
                            disk: self.settings.disk,
                        };
                        slot.conn.timed_out(&context);
                        slot.can_read = false;
                    }
                    self.drive(index);
                    // If the 408 could not go out at once, the client is not reading: end it.
                    if let Some(slot) = self.slots[index].as_ref() {
                        if !slot.lingering {
                            self.close(index);
                        }
                    }
                }
                _ => self.close(index),
            }
        }
    }
}

/// The socket is full: wait for writability, registering for it the first time (the epoll
/// modification reports it at once if the socket drained in between, so no wake-up is lost).
fn watch_writes(epoll: &Epoll, slot: &mut Slot, token: u64) -> io::Result<()> {
    slot.can_write = false;
    if !slot.watching_writes {
        epoll.modify(slot.fd.as_fd(), token, Interest::BOTH.edge())?;
        slot.watching_writes = true;
    }
    Ok(())
}

/// Read what the socket has (up to a turn's worth) into the connection, through the loop's
/// one read buffer. Returns whether anything changed (bytes or end of input).
fn read_input(slot: &mut Slot, scratch: &mut [u8]) -> io::Result<bool> {
    let mut changed = false;
    let mut total = 0;
    while slot.can_read && slot.conn.wants_input() && total < 4 * READ_CHUNK {
        match sysio::read(slot.fd.as_fd(), scratch) {
            Ok(0) => {
                slot.conn.peer_finished();
                slot.can_read = false;
                return Ok(true);
            }
            Ok(count) => {
                slot.conn.receive(&scratch[..count]);
                total += count;
                changed = true;
                if count < scratch.len() {
                    // A short read means the socket is drained (stream sockets): skip the
                    // read that would only say EAGAIN; edge-triggered epoll reports new data.
                    slot.can_read = false;
                }
            }
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => slot.can_read = false,
            Err(error) => return Err(error),
        }
    }
    Ok(changed)
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs())
}
