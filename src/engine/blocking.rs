//! Serving one connection with blocking calls: the driver shared by `mt`, `tpc` and `mp`
//! (Flash-MT/MP, JAWS thread-per-connection). The thread that serves a connection reads a
//! request, runs whatever disk work it needs inline (blocking only itself), and writes the whole
//! response before it looks at anything else.
//!
//! Owns: carrying out a `Conn`'s `Need`s synchronously — reads, `writev`, `sendfile`, jobs run in
//! place — and the timeouts while doing so (header, send, linger, and the keep-alive wait when
//! the caller keeps the connection). Sockets stay non-blocking underneath and waits are `poll`
//! calls, so every wait is bounded by the timeout of the phase the connection is in.
//! Must not touch: HTTP (that is `conn`'s), which connection runs next (the engine's).
//! Sources: Flash §3.1–3.2 (MP, MT), JAWS §3.2 (concurrency strategies).

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ampd_http::date::format_http_date;
use ampd_sys::{io as sysio, poll, socket};

use crate::config::Config;
use crate::conn::{Conn, Context, Ending, Need, Phase};
use crate::content::caches::Caches;
use crate::content::job;
use crate::content::resolve::DocRoot;
use crate::content::serve::DiskAccess;

/// Input read per call.
const READ_CHUNK: usize = 16 << 10;
/// Input read before the connection decides (a request larger than this is read in turns).
const READ_TURN: usize = 4 * READ_CHUNK;
/// After this long idle, a waiting connection gives its buffers back (as the event loop does).
const SHED_AFTER: Duration = Duration::from_millis(250);

/// A client connection and its state machine.
#[derive(Debug)]
pub struct Connection {
    pub fd: OwnedFd,
    pub conn: Conn,
    /// Registered with a waiting room's epoll before (re-arm instead of adding).
    pub registered: bool,
}

impl Connection {
    #[must_use]
    pub fn new(fd: OwnedFd, config: &Config) -> Box<Connection> {
        // TCP_NODELAY comes from the listener (see `engine::bind`).
        Box::new(Connection {
            fd,
            conn: Conn::new(config),
            registered: false,
        })
    }
}

/// What the thread does when its connection has answered every request and waits for another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WhenIdle {
    /// Give the connection back (to a waiting room that watches idle connections), so this
    /// thread or process can serve another one meanwhile.
    Return,
    /// Keep waiting on it, up to the keep-alive timeout (thread per connection).
    Wait,
}

/// How serving ended.
#[derive(Debug)]
pub enum Served {
    /// Idle between requests, nothing buffered: handed back under `WhenIdle::Return`.
    Idle(Box<Connection>),
    Closed,
}

/// The `Date` header value, rendered once a second.
#[derive(Debug)]
pub struct DateClock {
    secs: u64,
    text: [u8; 29],
}

impl DateClock {
    #[must_use]
    pub fn new() -> DateClock {
        let secs = unix_now();
        DateClock {
            secs,
            text: format_http_date(secs),
        }
    }

    pub fn tick(&mut self) -> &[u8; 29] {
        let now = unix_now();
        if now != self.secs {
            self.secs = now;
            self.text = format_http_date(now);
        }
        &self.text
    }
}

impl Default for DateClock {
    fn default() -> DateClock {
        DateClock::new()
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs())
}

/// One thread's (or process's) means to serve: settings, the caches it uses (its own, or shared
/// with the other threads), a clock and a read buffer.
pub struct Worker {
    config: Arc<Config>,
    root: Arc<DocRoot>,
    caches: Arc<Caches>,
    date: DateClock,
    scratch: Box<[u8]>,
}

/// The connection is to be dropped without more ado: the peer went away, a write failed, or a
/// send timed out.
struct Dropped;

impl From<io::Error> for Dropped {
    fn from(_: io::Error) -> Dropped {
        Dropped
    }
}

impl Worker {
    #[must_use]
    pub fn new(config: Arc<Config>, root: Arc<DocRoot>, caches: Arc<Caches>) -> Worker {
        Worker {
            config,
            root,
            caches,
            date: DateClock::new(),
            scratch: vec![0u8; READ_CHUNK].into_boxed_slice(),
        }
    }

    #[must_use]
    pub fn config(&self) -> &Arc<Config> {
        &self.config
    }

    /// Serve `connection` until it closes, or (under `WhenIdle::Return`) until it is idle
    /// between requests with nothing buffered.
    pub fn serve(&mut self, mut connection: Box<Connection>, when_idle: WhenIdle) -> Served {
        match self.serve_until_idle(&mut connection, when_idle) {
            Ok(true) => Served::Idle(connection),
            Ok(false) | Err(Dropped) => Served::Closed,
        }
    }

    /// `Ok(true)`: idle, hand it back; `Ok(false)`: closed properly.
    fn serve_until_idle(
        &mut self,
        connection: &mut Connection,
        when_idle: WhenIdle,
    ) -> Result<bool, Dropped> {
        let limits = self.config.limits.clone();
        let mut phase = connection.conn.phase();
        let mut phase_since = Instant::now();
        loop {
            let (read_any, drained) = self.read_input(connection)?;
            if read_any {
                // A request that arrived after a change on disk must see it (docs/architecture.md).
                self.caches.on_change();
            }
            let need = self.advance(connection);
            self.flush(connection)?;
            let now_phase = connection.conn.phase();
            if now_phase != phase || (read_any && now_phase == Phase::Idle) {
                phase = now_phase;
                phase_since = Instant::now();
            }
            match need {
                Need::Close(ending) => {
                    end(connection, ending, limits.linger_timeout, &mut self.scratch);
                    return Ok(false);
                }
                // The output drained (flush blocks until it does): decide again.
                Need::Flush => continue,
                // Jobs run inline here, so nothing can be outstanding.
                Need::Job(_) | Need::Wait => return Err(Dropped),
                Need::Read if read_any && !drained => continue,
                Need::Read => {}
            }
            match phase {
                Phase::Idle if when_idle == WhenIdle::Return => return Ok(true),
                Phase::Idle => {
                    let deadline = phase_since + limits.keepalive_timeout;
                    if !wait_readable(connection, deadline, true)? {
                        return Ok(false);
                    }
                }
                Phase::Head | Phase::Busy => {
                    let deadline = phase_since + limits.header_timeout;
                    if !wait_readable(connection, deadline, false)? {
                        if phase == Phase::Head {
                            self.answer_timeout(connection, limits.linger_timeout);
                        }
                        return Ok(false);
                    }
                }
                // Output is empty after a flush and the state is not closing; nothing else.
                Phase::Sending | Phase::Closing => return Err(Dropped),
            }
        }
    }

    /// Let the connection decide on what it has read; run any jobs it asks for in place.
    fn advance(&mut self, connection: &mut Connection) -> Need {
        let mut context = Context {
            config: &self.config,
            root: &self.root,
            caches: &self.caches,
            date: self.date.tick(),
            disk: DiskAccess::Inline,
        };
        loop {
            match connection.conn.advance(&mut context) {
                Need::Job(first) => {
                    let mut next = Some(first);
                    while let Some(job) = next {
                        next = connection.conn.job_done(job::run(job), &mut context);
                    }
                }
                need => return need,
            }
        }
    }

    /// Read what the socket has, up to a turn's worth. Returns (anything changed, socket
    /// drained).
    fn read_input(&mut self, connection: &mut Connection) -> Result<(bool, bool), Dropped> {
        let mut total = 0;
        let mut changed = false;
        while connection.conn.wants_input() && total < READ_TURN {
            match sysio::read(connection.fd.as_fd(), &mut self.scratch) {
                Ok(0) => {
                    connection.conn.peer_finished();
                    return Ok((true, true));
                }
                Ok(count) => {
                    connection.conn.receive(&self.scratch[..count]);
                    total += count;
                    changed = true;
                    if count < self.scratch.len() {
                        return Ok((true, true));
                    }
                }
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                    return Ok((changed, true))
                }
                Err(_) => return Err(Dropped),
            }
        }
        Ok((changed, total < READ_TURN))
    }

    /// Write everything queued, waiting for the socket as needed; a response that makes no
    /// progress for the send timeout ends the connection.
    fn flush(&mut self, connection: &mut Connection) -> Result<(), Dropped> {
        let send_timeout = self.config.limits.send_timeout;
        let mut last_progress = Instant::now();
        while !connection.conn.output.is_empty() {
            let fd = connection.fd.as_fd();
            let result = match connection.conn.output.front_file() {
                Some(range) => {
                    let mut offset = range.offset;
                    let count = usize::try_from(range.end - range.offset)
                        .unwrap_or(usize::MAX)
                        .min(sysio::MAX_RW_COUNT);
                    match sysio::sendfile(fd, range.file.file.as_fd(), &mut offset, count) {
                        // The file shrank under the response: it cannot be completed.
                        Ok(0) => return Err(Dropped),
                        other => other,
                    }
                }
                None => {
                    // A head followed by a file body: MSG_MORE lets them leave in full segments.
                    let more = if connection.conn.output.file_follows_memory() {
                        sysio::MSG_MORE
                    } else {
                        0
                    };
                    let slices = connection.conn.output.memory_slices();
                    sysio::send_vectored(fd, &slices, sysio::MSG_NOSIGNAL | more)
                }
            };
            match result {
                Ok(sent) => {
                    connection.conn.output.advance(sent as u64);
                    last_progress = Instant::now();
                }
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                    let left =
                        (last_progress + send_timeout).saturating_duration_since(Instant::now());
                    match poll::poll_one(connection.fd.as_fd(), false, true, Some(left))? {
                        Some(ready) if ready.writable => {}
                        Some(_) => return Err(Dropped),
                        None if Instant::now() >= last_progress + send_timeout => {
                            return Err(Dropped)
                        }
                        None => {}
                    }
                }
                Err(_) => return Err(Dropped),
            }
        }
        Ok(())
    }

    /// The head did not arrive in time: `408` if it can go out at once, then close.
    fn answer_timeout(&mut self, connection: &mut Connection, linger: Duration) {
        let context = Context {
            config: &self.config,
            root: &self.root,
            caches: &self.caches,
            date: self.date.tick(),
            disk: DiskAccess::Inline,
        };
        connection.conn.timed_out(&context);
        let slices = connection.conn.output.memory_slices();
        let pending: usize = slices.iter().map(|slice| slice.len()).sum();
        if let Ok(sent) = sysio::writev(connection.fd.as_fd(), &slices) {
            if sent == pending {
                linger_close(&connection.fd, linger);
            }
        }
    }
}

/// Wait until the connection is readable or `deadline` passes; `Ok(false)` at the deadline.
/// While idle (`shed`), buffers are given back once the wait passes `SHED_AFTER`.
fn wait_readable(
    connection: &mut Connection,
    deadline: Instant,
    shed: bool,
) -> Result<bool, Dropped> {
    let mut shed_pending = shed;
    loop {
        let now = Instant::now();
        if now >= deadline {
            return Ok(false);
        }
        let mut left = deadline - now;
        if shed_pending {
            left = left.min(SHED_AFTER);
        }
        match poll::poll_one(connection.fd.as_fd(), true, false, Some(left))? {
            Some(_) => return Ok(true),
            None if shed_pending => {
                connection.conn.shed_buffers();
                shed_pending = false;
            }
            None => {}
        }
    }
}

/// The last response is out: a client that has sent nothing more gets a plain close (its FIN
/// follows the response); otherwise the close lingers.
fn end(connection: &Connection, ending: Ending, linger: Duration, scratch: &mut [u8]) {
    if ending == Ending::Close {
        match sysio::read(connection.fd.as_fd(), scratch) {
            Ok(0) => return,
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => return,
            _ => {}
        }
    }
    linger_close(&connection.fd, linger);
}

/// Send a FIN after the response, then read and discard until the client closes (or the linger
/// timeout passes), so unread request bytes do not turn the close into a reset that destroys the
/// response in flight.
pub fn linger_close(fd: &OwnedFd, linger: Duration) {
    if socket::shutdown_write(fd.as_fd()).is_err() {
        return;
    }
    let deadline = Instant::now() + linger;
    let mut scratch = [0u8; 4096];
    loop {
        match sysio::read(fd.as_fd(), &mut scratch) {
            Ok(0) => return,
            Ok(_) => continue,
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
            Err(_) => return,
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        match poll::poll_one(fd.as_fd(), true, false, Some(left)) {
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => return,
        }
    }
}
