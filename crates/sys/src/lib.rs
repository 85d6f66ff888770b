//! ampd-sys: the system-call layer of ampd, and the only crate in the workspace with `unsafe`.
//!
//! Owns: every call into libc or the kernel that the server, its tests and the load generator
//! make. Must not touch: HTTP, configuration, policy. Each function here wraps one system call
//! (or one small, fixed sequence of them) and knows nothing about who calls it.
//!
//! # The contract
//!
//! * Every public function is safe to call with any argument its types allow. The `unsafe` needed
//!   to reach the kernel is inside, one block per call, each with a `// SAFETY:` comment directly
//!   above it that says why the pointers, lengths and descriptors handed over are valid.
//! * Descriptors are owned by [`std::os::fd::OwnedFd`] (closed exactly once, on drop) and lent as
//!   [`std::os::fd::BorrowedFd`], so no function here can act on a closed or reused descriptor.
//!   Every descriptor this crate creates is close-on-exec; sockets, eventfds and inotify
//!   descriptors are non-blocking.
//! * Failures are [`std::io::Error`] built from `errno`, so callers match `kind()` or
//!   `raw_os_error()` (`EAGAIN`, `EMFILE`, `EXDEV`, `ENOSYS`…) to decide what to do.
//! * Calls that can be interrupted by a signal are retried on `EINTR`, except
//!   [`epoll::Epoll::wait`], which reports an interrupted wait as zero events so the caller's
//!   loop can look at its timers and signal flags.
//! * Nothing here hands out a Rust reference into memory the kernel or another process may change
//!   under it: [`mmap::Mmap`] has no safe byte view (a truncated file turns a read into `SIGBUS`).

pub mod child;
pub mod epoll;
pub mod errno;
pub mod eventfd;
pub mod file;
pub mod inotify;
pub mod io;
pub mod mmap;
pub mod poll;
pub mod process;
pub mod seccomp;
pub mod shared;
pub mod signal;
pub mod socket;
pub mod spawn;
pub mod unix;
pub mod uring;

mod cvt;

#[cfg(test)]
mod test_support;
