//! Signals received synchronously: a master blocks the signals it cares about and takes them one
//! at a time with `sigtimedwait`, so no handler runs at an arbitrary point of its code.
//!
//! Owns: signal masks and the synchronous wait. Must not touch: what a signal means (the engine
//! decides: stop, reap, reload).

use std::io;
use std::mem::MaybeUninit;
use std::time::Duration;

use crate::cvt::cvt;

pub use libc::{SIGCHLD, SIGHUP, SIGINT, SIGKILL, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2};

/// A set of signal numbers.
#[derive(Clone, Copy)]
pub struct SignalSet(libc::sigset_t);

impl std::fmt::Debug for SignalSet {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let members: Vec<i32> = (1..65).filter(|&signal| self.contains(signal)).collect();
        formatter.debug_tuple("SignalSet").field(&members).finish()
    }
}

impl SignalSet {
    /// The set of `signals`; numbers outside 1..=64 are left out.
    #[must_use]
    pub fn of(signals: &[i32]) -> SignalSet {
        let mut set = MaybeUninit::<libc::sigset_t>::uninit();
        // SAFETY: `set` is writable storage for a sigset_t, which sigemptyset initialises.
        unsafe { libc::sigemptyset(set.as_mut_ptr()) };
        // SAFETY: sigemptyset above initialised it.
        let mut set = unsafe { set.assume_init() };
        for &signal in signals {
            // SAFETY: `set` is an initialised sigset_t; an invalid number only returns EINVAL.
            unsafe { libc::sigaddset(&mut set, signal) };
        }
        SignalSet(set)
    }

    #[must_use]
    pub fn contains(&self, signal: i32) -> bool {
        // SAFETY: `self.0` is an initialised sigset_t; an invalid number returns -1.
        unsafe { libc::sigismember(&self.0, signal) == 1 }
    }
}

fn change_mask(how: libc::c_int, set: &SignalSet) -> io::Result<SignalSet> {
    let mut old = MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: `set.0` is an initialised sigset_t the kernel reads; `old` is writable storage it
    // fills on success.
    let code = unsafe { libc::pthread_sigmask(how, &set.0, old.as_mut_ptr()) };
    if code != 0 {
        return Err(io::Error::from_raw_os_error(code));
    }
    // SAFETY: pthread_sigmask succeeded, so it wrote the previous mask into `old`.
    Ok(SignalSet(unsafe { old.assume_init() }))
}

/// Blocks `set` for the calling thread (threads it starts later inherit the mask); returns the
/// mask as it was, for [`set_mask`].
///
/// # Errors
/// None expected.
pub fn block(set: &SignalSet) -> io::Result<SignalSet> {
    change_mask(libc::SIG_BLOCK, set)
}

/// Replaces the calling thread's mask (a forked worker restores its master's original mask).
///
/// # Errors
/// None expected.
pub fn set_mask(set: &SignalSet) -> io::Result<SignalSet> {
    change_mask(libc::SIG_SETMASK, set)
}

/// Takes one pending signal of `set` (which must be blocked), waiting up to `timeout` (`None`:
/// no limit). `Ok(None)` when the time passed, or a signal outside the set interrupted the wait.
///
/// # Errors
/// `EINVAL` for a negative or huge timeout is avoided by clamping; none else expected.
pub fn wait(set: &SignalSet, timeout: Option<Duration>) -> io::Result<Option<i32>> {
    let limit = timeout.map(|duration| libc::timespec {
        tv_sec: libc::time_t::try_from(duration.as_secs()).unwrap_or(libc::time_t::MAX),
        tv_nsec: libc::c_long::from(duration.subsec_nanos()),
    });
    let limit_ptr = limit
        .as_ref()
        .map_or(std::ptr::null(), |limit| limit as *const libc::timespec);
    // SAFETY: `set.0` is an initialised sigset_t; `limit_ptr` is null or points at a live
    // timespec; a null siginfo pointer is allowed.
    let result = cvt(unsafe { libc::sigtimedwait(&set.0, std::ptr::null_mut(), limit_ptr) });
    match result {
        Ok(signal) => Ok(Some(signal)),
        Err(error) if matches!(error.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EINTR)) => {
            Ok(None)
        }
        Err(error) => Err(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocking_and_waiting_times_out_without_a_signal() {
        // On a thread of its own, so the mask change cannot affect other tests. Delivery itself
        // is exercised by the mp engine's tests (SIGTERM, SIGINT, SIGCHLD to the master).
        std::thread::spawn(|| {
            let set = SignalSet::of(&[SIGUSR2]);
            assert!(set.contains(SIGUSR2) && !set.contains(SIGTERM));
            let old = block(&set).unwrap();
            let started = std::time::Instant::now();
            assert_eq!(wait(&set, Some(Duration::from_millis(20))).unwrap(), None);
            assert!(started.elapsed() >= Duration::from_millis(15));
            set_mask(&old).unwrap();
        })
        .join()
        .unwrap();
    }
}
