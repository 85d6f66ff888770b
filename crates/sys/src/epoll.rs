//! epoll(7): the readiness notification behind every event-driven engine.
//!
//! Owns: the epoll instance, interest registration and the event buffer. Must not touch: what a
//! token means (the engine maps tokens to connections, listeners and helper completions).

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use crate::cvt::{cvt, to_usize};

/// An epoll instance.
#[derive(Debug)]
pub struct Epoll(OwnedFd);

/// Which readiness to report for a descriptor, and whether edge-triggered.
///
/// `EPOLLRDHUP` is requested (except with `exclusive`), so a peer's half-close shows up as [`Event::hangup`]
/// without a read that returns zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interest {
    pub readable: bool,
    pub writable: bool,
    pub edge_triggered: bool,
    /// `EPOLLONESHOT`: report once, then stay disarmed until [`Epoll::modify`] re-arms it (one
    /// epoll shared by a pool of threads hands each readiness to exactly one of them).
    pub oneshot: bool,
    /// `EPOLLEXCLUSIVE`: when several epoll instances watch the same descriptor (a listener
    /// shared by pre-forked processes), wake one of them, not all. Only valid with
    /// [`Epoll::add`], and not with `oneshot`.
    pub exclusive: bool,
}

impl Interest {
    pub const READABLE: Interest = Interest {
        readable: true,
        writable: false,
        edge_triggered: false,
        oneshot: false,
        exclusive: false,
    };
    pub const WRITABLE: Interest = Interest {
        readable: false,
        writable: true,
        edge_triggered: false,
        oneshot: false,
        exclusive: false,
    };
    pub const BOTH: Interest = Interest {
        readable: true,
        writable: true,
        edge_triggered: false,
        oneshot: false,
        exclusive: false,
    };

    /// The same interest, edge-triggered (`EPOLLET`).
    #[must_use]
    pub const fn edge(self) -> Interest {
        Interest {
            edge_triggered: true,
            ..self
        }
    }

    /// The same interest, reported once until re-armed (`EPOLLONESHOT`).
    #[must_use]
    pub const fn oneshot(self) -> Interest {
        Interest {
            oneshot: true,
            ..self
        }
    }

    /// The same interest, waking only one of several epoll instances (`EPOLLEXCLUSIVE`).
    #[must_use]
    pub const fn exclusive(self) -> Interest {
        Interest {
            exclusive: true,
            ..self
        }
    }

    fn bits(self) -> u32 {
        // EPOLLEXCLUSIVE refuses EPOLLRDHUP (EINVAL); it is only used on listeners.
        let mut bits = if self.exclusive {
            0
        } else {
            libc::EPOLLRDHUP as u32
        };
        if self.readable {
            bits |= libc::EPOLLIN as u32;
        }
        if self.writable {
            bits |= libc::EPOLLOUT as u32;
        }
        if self.edge_triggered {
            bits |= libc::EPOLLET as u32;
        }
        if self.oneshot {
            bits |= libc::EPOLLONESHOT as u32;
        }
        if self.exclusive {
            bits |= libc::EPOLLEXCLUSIVE as u32;
        }
        bits
    }
}

/// One readiness report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    pub token: u64,
    pub readable: bool,
    pub writable: bool,
    /// `EPOLLHUP` or `EPOLLRDHUP`: the peer closed (at least its sending side).
    pub hangup: bool,
    pub error: bool,
}

impl Event {
    fn from_raw(raw: &libc::epoll_event) -> Event {
        let bits = raw.events;
        let has = |flag: i32| bits & (flag as u32) != 0;
        Event {
            token: raw.u64,
            readable: has(libc::EPOLLIN) || has(libc::EPOLLPRI),
            writable: has(libc::EPOLLOUT),
            hangup: has(libc::EPOLLHUP) || has(libc::EPOLLRDHUP),
            error: has(libc::EPOLLERR),
        }
    }
}

/// The buffer [`Epoll::wait`] fills.
pub struct Events {
    raw: Vec<libc::epoll_event>,
    filled: usize,
}

impl std::fmt::Debug for Events {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_list().entries(self.iter()).finish()
    }
}

impl Events {
    /// Room for `capacity` events per wait (at least one).
    #[must_use]
    pub fn with_capacity(capacity: usize) -> Events {
        let capacity = capacity.clamp(1, i32::MAX as usize);
        Events {
            raw: vec![libc::epoll_event { events: 0, u64: 0 }; capacity],
            filled: 0,
        }
    }

    /// The events reported by the last wait.
    pub fn iter(&self) -> impl Iterator<Item = Event> + '_ {
        self.raw[..self.filled].iter().map(Event::from_raw)
    }

    /// How many events the last wait reported.
    #[must_use]
    pub fn len(&self) -> usize {
        self.filled
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.filled == 0
    }

    #[must_use]
    pub fn capacity(&self) -> usize {
        self.raw.len()
    }
}

impl Epoll {
    /// Creates a close-on-exec epoll instance.
    ///
    /// # Errors
    /// `EMFILE`/`ENFILE`/`ENOMEM` from `epoll_create1`.
    pub fn new() -> io::Result<Epoll> {
        // SAFETY: epoll_create1 takes no pointers; a non-negative result is a new descriptor that
        // nothing else owns, so wrapping it in OwnedFd gives it exactly one owner.
        let fd = cvt(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        // SAFETY: `fd` was just returned by epoll_create1 and is owned by nobody else.
        Ok(Epoll(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Registers `fd`; its events will carry `token`.
    ///
    /// # Errors
    /// `EEXIST` if already registered, `EPERM` for regular files, `ENOMEM`/`ENOSPC`.
    pub fn add(&self, fd: BorrowedFd<'_>, token: u64, interest: Interest) -> io::Result<()> {
        self.control(libc::EPOLL_CTL_ADD, fd, token, interest)
    }

    /// Changes the token or interest of a registered `fd`.
    ///
    /// # Errors
    /// `ENOENT` if `fd` is not registered.
    pub fn modify(&self, fd: BorrowedFd<'_>, token: u64, interest: Interest) -> io::Result<()> {
        self.control(libc::EPOLL_CTL_MOD, fd, token, interest)
    }

    /// Unregisters `fd` (closing a descriptor also unregisters it once no duplicate is open).
    ///
    /// # Errors
    /// `ENOENT` if `fd` is not registered.
    pub fn delete(&self, fd: BorrowedFd<'_>) -> io::Result<()> {
        let mut unused = libc::epoll_event { events: 0, u64: 0 };
        // SAFETY: both descriptors are open for the duration of the call (one owned by self, one
        // borrowed); `unused` is a valid epoll_event that pre-2.6.9 kernels require even for DEL.
        cvt(unsafe {
            libc::epoll_ctl(
                self.0.as_raw_fd(),
                libc::EPOLL_CTL_DEL,
                fd.as_raw_fd(),
                &mut unused,
            )
        })?;
        Ok(())
    }

    fn control(
        &self,
        operation: i32,
        fd: BorrowedFd<'_>,
        token: u64,
        interest: Interest,
    ) -> io::Result<()> {
        let mut event = libc::epoll_event {
            events: interest.bits(),
            u64: token,
        };
        // SAFETY: both descriptors are open for the duration of the call; `event` is a valid,
        // initialised epoll_event the kernel only reads.
        cvt(unsafe { libc::epoll_ctl(self.0.as_raw_fd(), operation, fd.as_raw_fd(), &mut event) })?;
        Ok(())
    }

    /// Waits up to `timeout_ms` (−1 = forever, 0 = poll) and fills `events`.
    ///
    /// Returns the number of events; an interrupted wait (`EINTR`) returns `Ok(0)`.
    ///
    /// # Errors
    /// `EBADF`/`EINVAL` only if the instance is broken.
    pub fn wait(&self, events: &mut Events, timeout_ms: i32) -> io::Result<usize> {
        let capacity = i32::try_from(events.raw.len()).unwrap_or(i32::MAX);
        // SAFETY: `events.raw` is a live, writable buffer of at least `capacity` epoll_event
        // structs, and the kernel writes at most `capacity` of them.
        let result = cvt(unsafe {
            libc::epoll_wait(
                self.0.as_raw_fd(),
                events.raw.as_mut_ptr(),
                capacity,
                timeout_ms,
            )
        });
        match result {
            Ok(count) => {
                events.filled = to_usize(count);
                Ok(events.filled)
            }
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {
                events.filled = 0;
                Ok(0)
            }
            Err(error) => {
                events.filled = 0;
                Err(error)
            }
        }
    }
}

impl AsFd for Epoll {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::unix::net::UnixStream;

    #[test]
    fn reports_readable_with_token_then_nothing_after_delete() {
        let epoll = Epoll::new().unwrap();
        let (mut left, right) = UnixStream::pair().unwrap();
        epoll.add(right.as_fd(), 42, Interest::READABLE).unwrap();
        let mut events = Events::with_capacity(8);
        assert_eq!(epoll.wait(&mut events, 0).unwrap(), 0);
        left.write_all(b"x").unwrap();
        assert_eq!(epoll.wait(&mut events, 1000).unwrap(), 1);
        let event = events.iter().next().unwrap();
        assert_eq!(event.token, 42);
        assert!(event.readable && !event.writable && !event.hangup && !event.error);
        epoll.delete(right.as_fd()).unwrap();
        assert_eq!(epoll.wait(&mut events, 0).unwrap(), 0);
        assert!(events.is_empty());
    }

    #[test]
    fn modify_switches_interest_and_token() {
        let epoll = Epoll::new().unwrap();
        let (_left, right) = UnixStream::pair().unwrap();
        epoll.add(right.as_fd(), 1, Interest::READABLE).unwrap();
        let mut events = Events::with_capacity(4);
        assert_eq!(epoll.wait(&mut events, 0).unwrap(), 0);
        epoll.modify(right.as_fd(), 7, Interest::WRITABLE).unwrap();
        assert_eq!(epoll.wait(&mut events, 1000).unwrap(), 1);
        let event = events.iter().next().unwrap();
        assert_eq!((event.token, event.writable), (7, true));
        assert!(epoll.add(right.as_fd(), 1, Interest::BOTH).is_err());
    }

    #[test]
    fn peer_close_is_a_hangup_and_edge_triggered_fires_once() {
        let epoll = Epoll::new().unwrap();
        let (mut left, mut right) = UnixStream::pair().unwrap();
        epoll
            .add(right.as_fd(), 9, Interest::READABLE.edge())
            .unwrap();
        left.write_all(b"ab").unwrap();
        let mut events = Events::with_capacity(4);
        assert_eq!(epoll.wait(&mut events, 1000).unwrap(), 1);
        // Edge-triggered: no new data, no new event even though bytes remain unread.
        assert_eq!(epoll.wait(&mut events, 0).unwrap(), 0);
        drop(left);
        assert_eq!(epoll.wait(&mut events, 1000).unwrap(), 1);
        assert!(events.iter().next().unwrap().hangup);
        let mut buf = [0u8; 4];
        assert_eq!(right.read(&mut buf).unwrap(), 2);
    }

    #[test]
    fn oneshot_reports_once_until_rearmed() {
        let epoll = Epoll::new().unwrap();
        let (mut left, right) = UnixStream::pair().unwrap();
        epoll
            .add(right.as_fd(), 3, Interest::READABLE.oneshot())
            .unwrap();
        left.write_all(b"x").unwrap();
        let mut events = Events::with_capacity(4);
        assert_eq!(epoll.wait(&mut events, 1000).unwrap(), 1);
        // Level-triggered but one-shot: still readable, yet disarmed.
        assert_eq!(epoll.wait(&mut events, 0).unwrap(), 0);
        epoll
            .modify(right.as_fd(), 4, Interest::READABLE.oneshot())
            .unwrap();
        assert_eq!(epoll.wait(&mut events, 1000).unwrap(), 1);
        assert_eq!(events.iter().next().unwrap().token, 4);
    }

    #[test]
    fn exclusive_registers_with_add() {
        let epoll = Epoll::new().unwrap();
        let (mut left, right) = UnixStream::pair().unwrap();
        epoll
            .add(right.as_fd(), 5, Interest::READABLE.exclusive())
            .unwrap();
        left.write_all(b"x").unwrap();
        let mut events = Events::with_capacity(4);
        assert_eq!(epoll.wait(&mut events, 1000).unwrap(), 1);
        assert_eq!(events.iter().next().unwrap().token, 5);
    }

    #[test]
    fn edge_keeps_direction_bits() {
        let interest = Interest::BOTH.edge();
        assert!(interest.readable && interest.writable && interest.edge_triggered);
        assert_ne!(interest.bits() & libc::EPOLLRDHUP as u32, 0);
    }
}
