//! eventfd(2): how helper threads wake the event loop when a disk job completes (Flash §4.2's
//! pipe between helpers and the server, in one descriptor).
//!
//! Owns: the counter descriptor. Must not touch: the completion queue it signals.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use crate::cvt::{cvt, cvt_retry};

/// A non-blocking, close-on-exec eventfd counter. `Sync`: any thread may `notify`.
#[derive(Debug)]
pub struct EventFd(OwnedFd);

impl EventFd {
    /// # Errors
    /// `EMFILE`/`ENFILE`/`ENOMEM`.
    pub fn new() -> io::Result<EventFd> {
        // SAFETY: eventfd takes no pointers; a non-negative result is a fresh descriptor.
        let fd = cvt(unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) })?;
        // SAFETY: `fd` was just created and is owned by nobody else.
        Ok(EventFd(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Adds one to the counter, making the descriptor readable.
    ///
    /// A full counter (`EAGAIN`, after 2^64−2 unread notifications) already means "readable",
    /// so it is not an error.
    pub fn notify(&self) {
        let one: u64 = 1;
        // SAFETY: `one` is a live 8-byte value and eventfd writes must be exactly 8 bytes.
        let result = cvt_retry(|| unsafe {
            libc::write(
                self.0.as_raw_fd(),
                std::ptr::addr_of!(one).cast::<libc::c_void>(),
                8,
            )
        });
        // Only EAGAIN is possible on a valid eventfd with an 8-byte write; nothing to report.
        let _ = result;
    }

    /// Reads and resets the counter: how many notifications arrived since the last drain
    /// (0 if none).
    pub fn drain(&self) -> u64 {
        let mut count: u64 = 0;
        // SAFETY: `count` is a live, writable 8-byte buffer; eventfd reads are exactly 8 bytes.
        let result = cvt_retry(|| unsafe {
            libc::read(
                self.0.as_raw_fd(),
                std::ptr::addr_of_mut!(count).cast::<libc::c_void>(),
                8,
            )
        });
        match result {
            Ok(8) => count,
            _ => 0,
        }
    }
}

impl AsFd for EventFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::epoll::{Epoll, Events, Interest};
    use std::sync::Arc;

    #[test]
    fn notifications_from_threads_add_up_and_drain_resets() {
        let eventfd = Arc::new(EventFd::new().unwrap());
        assert_eq!(eventfd.drain(), 0);
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let eventfd = Arc::clone(&eventfd);
                std::thread::spawn(move || {
                    for _ in 0..10 {
                        eventfd.notify();
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        assert_eq!(eventfd.drain(), 40);
        assert_eq!(eventfd.drain(), 0);
    }

    #[test]
    fn notify_wakes_epoll() {
        let epoll = Epoll::new().unwrap();
        let eventfd = EventFd::new().unwrap();
        epoll.add(eventfd.as_fd(), 3, Interest::READABLE).unwrap();
        let mut events = Events::with_capacity(2);
        assert_eq!(epoll.wait(&mut events, 0).unwrap(), 0);
        eventfd.notify();
        assert_eq!(epoll.wait(&mut events, 1000).unwrap(), 1);
        assert_eq!(events.iter().next().unwrap().token, 3);
        eventfd.drain();
        assert_eq!(epoll.wait(&mut events, 0).unwrap(), 0);
    }
}
