//! Signals as data: the server blocks the signals it handles in every thread and reads them
//! from a `signalfd`, so no handler code ever runs in signal context (nothing to be
//! async-signal-safe about) and one thread decides what each signal means.
//!
//! Owns: the signal mask of the calling thread and the signalfd. Must not touch: what a signal
//! means (that is the server's `ops::signals`).

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::cvt::{cvt, cvt_retry};

pub const SIGHUP: i32 = libc::SIGHUP;
pub const SIGINT: i32 = libc::SIGINT;
pub const SIGQUIT: i32 = libc::SIGQUIT;
pub const SIGTERM: i32 = libc::SIGTERM;
pub const SIGUSR1: i32 = libc::SIGUSR1;
pub const SIGUSR2: i32 = libc::SIGUSR2;

fn set_of(signals: &[i32]) -> io::Result<libc::sigset_t> {
    let mut set = MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: sigemptyset initialises the set it is given, which is live and writable.
    cvt(unsafe { libc::sigemptyset(set.as_mut_ptr()) })?;
    for &signal in signals {
        // SAFETY: the set was initialised above; sigaddset rejects bad numbers with EINVAL.
        cvt(unsafe { libc::sigaddset(set.as_mut_ptr(), signal) })?;
    }
    // SAFETY: initialised by sigemptyset above.
    Ok(unsafe { set.assume_init() })
}

/// Blocks `signals` in the calling thread; threads started afterwards inherit the mask. Call it
/// first thing in `main`, before any thread exists, so the signals can only be read from a
/// [`SignalFd`].
///
/// # Errors
/// `EINVAL` for a bad signal number.
pub fn block(signals: &[i32]) -> io::Result<()> {
    let set = set_of(signals)?;
    // SAFETY: `set` is a live, initialised sigset_t; the old mask is not asked for (null).
    let code = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if code != 0 {
        return Err(io::Error::from_raw_os_error(code));
    }
    Ok(())
}

/// A blocking signalfd for a set of (blocked) signals.
#[derive(Debug)]
pub struct SignalFd(OwnedFd);

impl SignalFd {
    /// # Errors
    /// `EMFILE`/`ENFILE`, `EINVAL` for a bad signal number.
    pub fn new(signals: &[i32]) -> io::Result<SignalFd> {
        let set = set_of(signals)?;
        // SAFETY: `set` is a live, initialised sigset_t; -1 asks for a new descriptor.
        let fd = cvt(unsafe { libc::signalfd(-1, &set, libc::SFD_CLOEXEC) })?;
        // SAFETY: `fd` was just created and is owned by nobody else.
        Ok(SignalFd(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Waits for the next signal and returns its number.
    ///
    /// # Errors
    /// Only if the descriptor were broken.
    pub fn wait(&self) -> io::Result<i32> {
        let mut info = MaybeUninit::<libc::signalfd_siginfo>::uninit();
        let size = std::mem::size_of::<libc::signalfd_siginfo>();
        // SAFETY: `info` is live and writable for `size` bytes; signalfd writes whole records.
        let read = cvt_retry(|| unsafe {
            libc::read(
                self.0.as_raw_fd(),
                info.as_mut_ptr().cast::<libc::c_void>(),
                size,
            )
        })?;
        if usize::try_from(read).ok() != Some(size) {
            return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
        }
        // SAFETY: the kernel filled the whole record (checked above).
        let info = unsafe { info.assume_init() };
        Ok(i32::try_from(info.ssi_signo).unwrap_or(0))
    }
}

/// Sends `signal` to process `pid` (tests and the `ampd` command itself use it).
///
/// # Errors
/// `ESRCH` when there is no such process, `EPERM` when it is not ours.
pub fn kill(pid: u32, signal: i32) -> io::Result<()> {
    let pid = libc::pid_t::try_from(pid).map_err(|_| io::Error::from_raw_os_error(libc::ESRCH))?;
    // SAFETY: kill takes no pointers.
    cvt(unsafe { libc::kill(pid, signal) })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blocked_signal_is_read_from_the_signalfd() {
        std::thread::spawn(|| {
            block(&[SIGUSR2]).unwrap();
            let fd = SignalFd::new(&[SIGUSR2]).unwrap();
            // The signal goes to this thread (which blocks it), not to the process, whose other
            // test threads do not block it.
            // SAFETY: pthread_self names the calling thread, which is alive.
            let code = unsafe { libc::pthread_kill(libc::pthread_self(), SIGUSR2) };
            assert_eq!(code, 0);
            assert_eq!(fd.wait().unwrap(), SIGUSR2);
        })
        .join()
        .unwrap();
    }
}
