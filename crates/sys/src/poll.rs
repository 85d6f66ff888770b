//! poll(2): waiting on a few descriptors with a timeout, for engines whose threads block on one
//! connection at a time (`mt`, `tpc`, `mp`) and for the helper-process courier.
//!
//! Owns: the wait. Must not touch: what the caller does once a descriptor is ready.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::time::Duration;

use crate::cvt::{cvt, to_usize};

/// What to wait for on one descriptor, and (after [`poll`]) what it reported.
#[derive(Debug, Clone, Copy)]
pub struct PollFd<'fd> {
    pub fd: BorrowedFd<'fd>,
    pub want_read: bool,
    pub want_write: bool,
    /// Set by [`poll`]: data (or end of stream) can be read without blocking.
    pub readable: bool,
    /// Set by [`poll`]: a write would make progress.
    pub writable: bool,
    /// Set by [`poll`]: `POLLHUP`/`POLLRDHUP`/`POLLERR` — the peer is gone or the socket failed.
    pub hangup: bool,
}

impl<'fd> PollFd<'fd> {
    #[must_use]
    pub fn new(fd: BorrowedFd<'fd>, want_read: bool, want_write: bool) -> PollFd<'fd> {
        PollFd {
            fd,
            want_read,
            want_write,
            readable: false,
            writable: false,
            hangup: false,
        }
    }

    /// Whether anything at all was reported.
    #[must_use]
    pub fn ready(&self) -> bool {
        self.readable || self.writable || self.hangup
    }
}

fn timeout_ms(timeout: Option<Duration>) -> libc::c_int {
    match timeout {
        None => -1,
        // Round up, so a wait for 0.4 ms does not become a busy poll with timeout 0.
        Some(duration) => {
            let millis = duration.as_micros().div_ceil(1000);
            libc::c_int::try_from(millis).unwrap_or(libc::c_int::MAX)
        }
    }
}

/// Waits until one of `fds` is ready or `timeout` passes (`None`: no limit). Returns how many are
/// ready; `0` means the timeout passed or a signal interrupted the wait (the caller re-checks its
/// clock, as with `epoll::Epoll::wait`).
///
/// # Errors
/// `EINVAL` for more descriptors than `RLIMIT_NOFILE`, `ENOMEM`.
pub fn poll(fds: &mut [PollFd<'_>], timeout: Option<Duration>) -> io::Result<usize> {
    let mut raw: Vec<libc::pollfd> = fds
        .iter()
        .map(|entry| {
            let mut events = 0;
            if entry.want_read {
                events |= libc::POLLIN | libc::POLLRDHUP;
            }
            if entry.want_write {
                events |= libc::POLLOUT;
            }
            libc::pollfd {
                fd: entry.fd.as_raw_fd(),
                events,
                revents: 0,
            }
        })
        .collect();
    let count = libc::nfds_t::try_from(raw.len()).unwrap_or(libc::nfds_t::MAX);
    // SAFETY: `raw` is a live, writable array of `count` pollfd structs whose descriptors are
    // borrowed (open) for the duration of the call.
    let result = cvt(unsafe { libc::poll(raw.as_mut_ptr(), count, timeout_ms(timeout)) });
    let ready = match result {
        Ok(ready) => to_usize(ready),
        Err(error) if error.kind() == io::ErrorKind::Interrupted => 0,
        Err(error) => return Err(error),
    };
    for (entry, raw) in fds.iter_mut().zip(&raw) {
        let has = |flag: libc::c_short| raw.revents & flag != 0;
        entry.readable = has(libc::POLLIN) || has(libc::POLLPRI);
        entry.writable = has(libc::POLLOUT);
        entry.hangup = has(libc::POLLHUP) || has(libc::POLLRDHUP) || has(libc::POLLERR);
    }
    Ok(ready)
}

/// [`poll`] on one descriptor: `Ok(None)` when the timeout passed (or a signal came).
///
/// # Errors
/// As [`poll`].
pub fn poll_one(
    fd: BorrowedFd<'_>,
    want_read: bool,
    want_write: bool,
    timeout: Option<Duration>,
) -> io::Result<Option<PollFd<'_>>> {
    let mut fds = [PollFd::new(fd, want_read, want_write)];
    match poll(&mut fds, timeout)? {
        0 => Ok(None),
        _ => Ok(Some(fds[0])),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsFd;
    use std::os::unix::net::UnixStream;
    use std::time::Instant;

    #[test]
    fn times_out_then_reports_readable_and_hangup() {
        let (mut left, right) = UnixStream::pair().unwrap();
        let started = Instant::now();
        let none = poll_one(right.as_fd(), true, false, Some(Duration::from_millis(30))).unwrap();
        assert!(none.is_none());
        assert!(started.elapsed() >= Duration::from_millis(25));
        left.write_all(b"x").unwrap();
        let ready = poll_one(right.as_fd(), true, false, Some(Duration::from_secs(5)))
            .unwrap()
            .unwrap();
        assert!(ready.readable && !ready.hangup);
        drop(left);
        let ready = poll_one(right.as_fd(), true, false, None).unwrap().unwrap();
        assert!(ready.hangup);
    }

    #[test]
    fn many_descriptors_report_each() {
        let (mut a_left, a_right) = UnixStream::pair().unwrap();
        let (_b_left, b_right) = UnixStream::pair().unwrap();
        a_left.write_all(b"x").unwrap();
        let mut fds = [
            PollFd::new(a_right.as_fd(), true, false),
            PollFd::new(b_right.as_fd(), true, true),
        ];
        assert_eq!(poll(&mut fds, Some(Duration::from_secs(5))).unwrap(), 2);
        assert!(fds[0].readable && !fds[0].writable);
        assert!(!fds[1].readable && fds[1].writable);
    }
}
