//! Signals as data, never as handlers: the server blocks the signals it handles in every thread
//! (first thing in `main`, so every thread and every forked process inherits the mask) and takes
//! them synchronously — from a `signalfd` on the signal thread of a threaded process, or with
//! `sigtimedwait` in the loop of the single-threaded `mp` master. No code ever runs in signal
//! context, so nothing has to be async-signal-safe, and one place decides what a signal means.
//!
//! A program the server starts must not begin with the server's signal state: the mask and
//! ignored signals survive `exec` (a blocked `SIGTERM` never reaches an application, which is
//! then killed at its `stop_timeout`), so [`reset_in_child`] puts them back between `fork` and
//! `exec` (`child::reset_signals`, `spawn::spawn_passing`).
//!
//! Owns: signal sets, the calling thread's mask, the signalfd, the timed wait and a child's reset
//! before `exec`. Must not touch: what a signal means (the server's `ops::signals` and the `mp`
//! master decide), sending signals to processes (`child::kill`).

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::time::Duration;

use crate::cvt::{cvt, cvt_retry};

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

    /// No signal: the mask a program that is not ampd starts with.
    #[must_use]
    pub fn empty() -> SignalSet {
        SignalSet::of(&[])
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

/// Blocks `set` for the calling thread (threads it starts later, and processes it forks,
/// inherit the mask); returns the mask as it was, for [`set_mask`]. Call it before any thread
/// exists, so that the signals can only be taken from a [`SignalFd`] or with [`wait`].
///
/// # Errors
/// None expected.
pub fn block(set: &SignalSet) -> io::Result<SignalSet> {
    change_mask(libc::SIG_BLOCK, set)
}

/// Replaces the calling thread's mask.
///
/// # Errors
/// None expected.
pub fn set_mask(set: &SignalSet) -> io::Result<SignalSet> {
    change_mask(libc::SIG_SETMASK, set)
}

/// Linux's signals are 1..=64 (`_NSIG` is 65).
const LAST_SIGNAL: i32 = 64;

/// In a child between `fork` and `exec` only (it would undo the caller's own handling): every
/// signal back to its default action, then `blocked` as the mask. `exec` resets caught signals
/// but keeps ignored ones (Rust's runtime ignores `SIGPIPE`; a parent may have ignored
/// `SIGHUP` or `SIGINT`) and the mask (the server blocks the signals it reads from a signalfd;
/// some threads block nearly all). Dispositions first, so that nothing the parent caught is
/// delivered to its handler in the child once unblocked. Makes only `rt_sigaction` and
/// `sigprocmask` calls (async-signal-safe) on memory on its own stack.
///
/// # Errors
/// None expected (`sigprocmask` fails only for a bad `how`).
pub(crate) fn reset_in_child(blocked: &SignalSet) -> io::Result<()> {
    // The kernel's struct sigaction with every field zero: handler SIG_DFL, no flags, empty
    // mask, whatever the architecture's field order. Four words cover its largest layout.
    let default = [0u64; 4];
    let mask_size = std::mem::size_of::<u64>();
    for signal in 1..=LAST_SIGNAL {
        if signal == libc::SIGKILL || signal == libc::SIGSTOP {
            continue;
        }
        // SAFETY: rt_sigaction reads a struct sigaction from `default`, which is large enough
        // and all zero; a null old action is allowed; the sigset size is the kernel's (64
        // signals). The raw call, not glibc's sigaction, because glibc refuses its two
        // internal signals (32, 33), which a parent may have left ignored all the same.
        unsafe {
            libc::syscall(
                libc::SYS_rt_sigaction,
                libc::c_long::from(signal),
                default.as_ptr(),
                std::ptr::null_mut::<u64>(),
                mask_size,
            )
        };
    }
    // SAFETY: `blocked.0` is an initialised sigset_t the kernel reads; a null old mask is
    // allowed.
    cvt(unsafe { libc::sigprocmask(libc::SIG_SETMASK, &blocked.0, std::ptr::null_mut()) })?;
    Ok(())
}

/// Takes one pending signal of `set` (which must be blocked), waiting up to `timeout` (`None`:
/// no limit). `Ok(None)` when the time passed, or a signal outside the set interrupted the wait.
/// For a single-threaded process (the `mp` master), which needs no signal thread.
///
/// # Errors
/// None expected (the timeout is clamped, so it cannot be `EINVAL`).
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

/// A blocking signalfd for a set of (blocked) signals: the signal thread of a threaded process
/// reads them one at a time.
#[derive(Debug)]
pub struct SignalFd(OwnedFd);

impl SignalFd {
    /// # Errors
    /// `EMFILE`/`ENFILE`.
    pub fn new(set: &SignalSet) -> io::Result<SignalFd> {
        // SAFETY: `set.0` is a live, initialised sigset_t; -1 asks for a new descriptor.
        let fd = cvt(unsafe { libc::signalfd(-1, &set.0, libc::SFD_CLOEXEC) })?;
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

impl AsFd for SignalFd {
    /// For a poll beside other descriptors: readable while a signal of its set is pending.
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Each test runs on a thread of its own and sends to that thread only, so the mask change
    // and the signal cannot affect the harness's other test threads.

    #[test]
    fn a_blocked_signal_is_read_from_the_signalfd() {
        std::thread::spawn(|| {
            let set = SignalSet::of(&[SIGUSR2]);
            block(&set).unwrap();
            let fd = SignalFd::new(&set).unwrap();
            // SAFETY: pthread_self names the calling thread, which is alive.
            let code = unsafe { libc::pthread_kill(libc::pthread_self(), SIGUSR2) };
            assert_eq!(code, 0);
            assert_eq!(fd.wait().unwrap(), SIGUSR2);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_timed_wait_takes_a_pending_signal_or_times_out() {
        std::thread::spawn(|| {
            let set = SignalSet::of(&[SIGUSR1]);
            assert!(set.contains(SIGUSR1) && !set.contains(SIGTERM));
            let old = block(&set).unwrap();
            let started = std::time::Instant::now();
            assert_eq!(wait(&set, Some(Duration::from_millis(20))).unwrap(), None);
            assert!(started.elapsed() >= Duration::from_millis(15));
            // SAFETY: pthread_self names the calling thread, which is alive.
            let code = unsafe { libc::pthread_kill(libc::pthread_self(), SIGUSR1) };
            assert_eq!(code, 0);
            assert_eq!(
                wait(&set, Some(Duration::from_secs(5))).unwrap(),
                Some(SIGUSR1)
            );
            set_mask(&old).unwrap();
        })
        .join()
        .unwrap();
    }
}
