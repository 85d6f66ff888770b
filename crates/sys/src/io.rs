//! Moving bytes: read, write, writev, send and sendfile on borrowed descriptors.
//!
//! Owns: the data-transfer calls, each retried on `EINTR` and clamped to what the kernel accepts
//! in one call. Must not touch: buffering policy (the connection decides what to send and when).

use std::io::{self, IoSlice};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use crate::cvt::{cvt_retry, to_usize};

/// Linux's `UIO_MAXIOV`: more slices than this in one `writev` fail with `EINVAL`.
pub const IOV_MAX: usize = 1024;

/// The most one `read`/`write`/`sendfile` moves on Linux (`MAX_RW_COUNT`); asking for more is
/// silently clamped by the kernel, clamping here keeps the arithmetic honest.
pub const MAX_RW_COUNT: usize = 0x7fff_f000;

/// Reads up to `buf.len()` bytes; `Ok(0)` is end of stream.
///
/// # Errors
/// `WouldBlock` on an empty non-blocking descriptor, `ECONNRESET`, `EBADF`…
pub fn read(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
    let len = buf.len().min(MAX_RW_COUNT);
    // SAFETY: `buf` is live and writable for `len` ≤ buf.len() bytes.
    let count = cvt_retry(|| unsafe {
        libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast::<libc::c_void>(), len)
    })?;
    Ok(to_usize(count))
}

/// Writes up to `buf.len()` bytes; returns how many were taken.
///
/// On a socket whose peer has gone this raises `SIGPIPE` unless it is ignored
/// (`process::ignore_sigpipe`); prefer [`send`] with [`MSG_NOSIGNAL`] on sockets.
///
/// # Errors
/// `WouldBlock` when the descriptor is full, `EPIPE`, `ECONNRESET`…
pub fn write(fd: BorrowedFd<'_>, buf: &[u8]) -> io::Result<usize> {
    let len = buf.len().min(MAX_RW_COUNT);
    // SAFETY: `buf` is live and readable for `len` ≤ buf.len() bytes.
    let count = cvt_retry(|| unsafe {
        libc::write(fd.as_raw_fd(), buf.as_ptr().cast::<libc::c_void>(), len)
    })?;
    Ok(to_usize(count))
}

/// Writes the slices in order as one call (a response head and a small body in one segment);
/// at most [`IOV_MAX`] slices are sent, the caller resumes with the rest.
///
/// # Errors
/// As [`write`].
pub fn writev(fd: BorrowedFd<'_>, slices: &[IoSlice<'_>]) -> io::Result<usize> {
    let slices = &slices[..slices.len().min(IOV_MAX)];
    // IoSlice is guaranteed ABI-compatible with `struct iovec` on Unix.
    let count = libc::c_int::try_from(slices.len()).unwrap_or(libc::c_int::MAX);
    // SAFETY: `slices` is a live array of `count` iovec-compatible IoSlices whose buffers are
    // borrowed for the duration of the call; the kernel only reads them.
    let written = cvt_retry(|| unsafe {
        libc::writev(fd.as_raw_fd(), slices.as_ptr().cast::<libc::iovec>(), count)
    })?;
    Ok(to_usize(written))
}

/// `MSG_NOSIGNAL`: a send to a closed peer returns `EPIPE` instead of raising `SIGPIPE`.
pub const MSG_NOSIGNAL: i32 = libc::MSG_NOSIGNAL;
/// `MSG_MORE`: more data follows (as `TCP_CORK` for one call).
pub const MSG_MORE: i32 = libc::MSG_MORE;
/// `MSG_DONTWAIT`: this send does not block, even on a blocking socket.
pub const MSG_DONTWAIT: i32 = libc::MSG_DONTWAIT;

/// Sends on a socket with `flags` (`MSG_NOSIGNAL`, `MSG_MORE`…).
///
/// # Errors
/// As [`write`]; `ENOTSOCK` for non-sockets.
pub fn send(fd: BorrowedFd<'_>, buf: &[u8], flags: i32) -> io::Result<usize> {
    let len = buf.len().min(MAX_RW_COUNT);
    // SAFETY: `buf` is live and readable for `len` ≤ buf.len() bytes.
    let count = cvt_retry(|| unsafe {
        libc::send(
            fd.as_raw_fd(),
            buf.as_ptr().cast::<libc::c_void>(),
            len,
            flags,
        )
    })?;
    Ok(to_usize(count))
}

/// Sends the slices in order as one call with `flags` (`MSG_MORE` when a file body follows a
/// head, so the two leave in full segments, as `TCP_CORK` would without its two extra calls).
///
/// # Errors
/// As [`writev`]; `ENOTSOCK` for non-sockets.
pub fn send_vectored(fd: BorrowedFd<'_>, slices: &[IoSlice<'_>], flags: i32) -> io::Result<usize> {
    let slices = &slices[..slices.len().min(IOV_MAX)];
    // SAFETY: an all-zero msghdr is valid (no name, no control data).
    let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
    // IoSlice is guaranteed ABI-compatible with `struct iovec` on Unix; the kernel only reads
    // through this pointer although msghdr's field is `*mut`.
    message.msg_iov = slices.as_ptr().cast::<libc::iovec>().cast_mut();
    message.msg_iovlen = slices.len();
    // SAFETY: `message` points at `slices.len()` live iovecs borrowed for the call.
    let sent = cvt_retry(|| unsafe { libc::sendmsg(fd.as_raw_fd(), &message, flags) })?;
    Ok(to_usize(sent))
}

/// Copies up to `count` bytes of `in_file` starting at `*offset` to `out` inside the kernel
/// (Flash §5.5's zero-copy path); advances `*offset` by the amount sent.
///
/// Offsets are 64-bit, so files over 4 GiB work. `Ok(0)` with `count > 0` means `*offset` is at
/// or past the end of the file (it was truncated under us).
///
/// # Errors
/// `WouldBlock` when the socket is full; `EINVAL` when `*offset` does not fit in `off_t`; `EIO`.
pub fn sendfile(
    out: BorrowedFd<'_>,
    in_file: BorrowedFd<'_>,
    offset: &mut u64,
    count: usize,
) -> io::Result<usize> {
    let mut kernel_offset =
        libc::off64_t::try_from(*offset).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let count = count.min(MAX_RW_COUNT);
    // SAFETY: `kernel_offset` is a live, writable off64_t the kernel reads and advances; both
    // descriptors are open for the duration of the call.
    let sent = cvt_retry(|| unsafe {
        libc::sendfile64(
            out.as_raw_fd(),
            in_file.as_raw_fd(),
            &mut kernel_offset,
            count,
        )
    })?;
    *offset = u64::try_from(kernel_offset).unwrap_or(*offset);
    Ok(to_usize(sent))
}

/// Reads at `offset` without moving the file position (helper threads reading small files).
///
/// # Errors
/// `EINVAL` when `offset` does not fit in `off_t`, `EIO`.
pub fn pread(fd: BorrowedFd<'_>, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let offset =
        libc::off64_t::try_from(offset).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let len = buf.len().min(MAX_RW_COUNT);
    // SAFETY: `buf` is live and writable for `len` ≤ buf.len() bytes.
    let count = cvt_retry(|| unsafe {
        libc::pread64(
            fd.as_raw_fd(),
            buf.as_mut_ptr().cast::<libc::c_void>(),
            len,
            offset,
        )
    })?;
    Ok(to_usize(count))
}

/// Reads at `offset` only if the data is already in the page cache (`preadv2` with
/// `RWF_NOWAIT`): the event loop can copy a small cached file without risking a disk wait, and
/// hand the read to a helper when this says `WouldBlock`.
///
/// # Errors
/// `WouldBlock` when any of the range would need disk I/O (a short count means a partial hit);
/// `EOPNOTSUPP` on file systems without support (before Linux 4.14, or some FUSE mounts);
/// `EINVAL` when `offset` does not fit in `off_t`.
pub fn pread_nowait(fd: BorrowedFd<'_>, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let offset =
        libc::off64_t::try_from(offset).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let slice = libc::iovec {
        iov_base: buf.as_mut_ptr().cast::<libc::c_void>(),
        iov_len: buf.len().min(MAX_RW_COUNT),
    };
    // SAFETY: `slice` describes `buf`, live and writable for iov_len ≤ buf.len() bytes; one
    // iovec is passed.
    let count = cvt_retry(|| unsafe {
        libc::preadv2(fd.as_raw_fd(), &slice, 1, offset, libc::RWF_NOWAIT)
    })?;
    Ok(to_usize(count))
}

/// A close-on-exec pipe `(read end, write end)`, blocking: the `uring` engine splices file data
/// through it to a socket (`splice` needs a pipe on one side), and only the ring does I/O on it.
///
/// # Errors
/// Descriptor exhaustion.
pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` is writable storage for the two descriptors pipe2 returns.
    crate::cvt::cvt(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    // SAFETY: pipe2 succeeded; both descriptors are new and owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Sets a pipe's capacity (`F_SETPIPE_SZ`); returns the capacity the kernel chose (a power of two
/// pages, at least `bytes`, capped by `/proc/sys/fs/pipe-max-size` for unprivileged users).
///
/// # Errors
/// `EPERM` above the unprivileged limit, `EBUSY` if data would not fit.
pub fn set_pipe_size(pipe: BorrowedFd<'_>, bytes: usize) -> io::Result<usize> {
    let bytes = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    // SAFETY: F_SETPIPE_SZ takes an integer argument and no pointers.
    let size =
        crate::cvt::cvt(unsafe { libc::fcntl(pipe.as_raw_fd(), libc::F_SETPIPE_SZ, bytes) })?;
    Ok(to_usize(size))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::socket::socket_pair;
    use crate::test_support::TempDir;
    use std::fs::File;
    use std::io::Write;
    use std::os::fd::AsFd;
    use std::os::unix::fs::FileExt;

    fn read_all_available(fd: BorrowedFd<'_>, want: usize) -> Vec<u8> {
        let mut collected = Vec::new();
        let mut buf = [0u8; 4096];
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while collected.len() < want {
            match read(fd, &mut buf) {
                Ok(0) => break,
                Ok(n) => collected.extend_from_slice(&buf[..n]),
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                    assert!(std::time::Instant::now() < deadline, "timed out");
                    std::thread::yield_now();
                }
                Err(error) => panic!("{error}"),
            }
        }
        collected
    }

    #[test]
    fn write_read_and_would_block() {
        let (left, right) = socket_pair().unwrap();
        let mut buf = [0u8; 8];
        let empty = read(right.as_fd(), &mut buf).unwrap_err();
        assert_eq!(empty.kind(), io::ErrorKind::WouldBlock);
        assert_eq!(write(left.as_fd(), b"abc").unwrap(), 3);
        assert_eq!(read(right.as_fd(), &mut buf).unwrap(), 3);
        assert_eq!(&buf[..3], b"abc");
        drop(left);
        assert_eq!(read(right.as_fd(), &mut buf).unwrap(), 0);
    }

    #[test]
    fn writev_sends_slices_in_order_and_clamps_to_iov_max() {
        let (left, right) = socket_pair().unwrap();
        let parts = [
            IoSlice::new(b"HTTP/1.1 200 OK\r\n\r\n"),
            IoSlice::new(b"body"),
        ];
        assert_eq!(writev(left.as_fd(), &parts).unwrap(), 23);
        assert_eq!(
            read_all_available(right.as_fd(), 23),
            b"HTTP/1.1 200 OK\r\n\r\nbody"
        );
        let byte = [b'x'];
        let many = vec![IoSlice::new(&byte); IOV_MAX + 10];
        assert_eq!(writev(left.as_fd(), &many).unwrap(), IOV_MAX);
    }

    #[test]
    fn send_to_closed_peer_is_epipe_not_a_signal() {
        let (left, right) = socket_pair().unwrap();
        drop(right);
        let error = send(left.as_fd(), b"x", MSG_NOSIGNAL).unwrap_err();
        assert_eq!(error.raw_os_error(), Some(libc::EPIPE));
    }

    #[test]
    fn sendfile_advances_offset_and_reports_end_of_file() {
        let dir = TempDir::new("sendfile");
        let path = dir.path().join("data");
        File::create(&path)
            .unwrap()
            .write_all(b"0123456789")
            .unwrap();
        let file = File::open(&path).unwrap();
        let (left, right) = socket_pair().unwrap();
        let mut offset = 3;
        assert_eq!(
            sendfile(left.as_fd(), file.as_fd(), &mut offset, 4).unwrap(),
            4
        );
        assert_eq!(offset, 7);
        assert_eq!(read_all_available(right.as_fd(), 4), b"3456");
        let mut past_end = 10;
        assert_eq!(
            sendfile(left.as_fd(), file.as_fd(), &mut past_end, 4).unwrap(),
            0
        );
        assert_eq!(past_end, 10);
    }

    #[test]
    fn pread_nowait_reads_cached_data() {
        let dir = TempDir::new("nowait");
        let path = dir.path().join("cached");
        std::fs::write(&path, b"hot bytes").unwrap();
        let file = File::open(&path).unwrap();
        let mut buf = [0u8; 16];
        match pread_nowait(file.as_fd(), &mut buf, 4) {
            Ok(count) => assert_eq!(&buf[..count], b"bytes"),
            // Some file systems refuse RWF_NOWAIT outright; that is the documented fallback.
            Err(error) => assert_eq!(error.raw_os_error(), Some(libc::EOPNOTSUPP)),
        }
    }

    #[test]
    fn sendfile_and_pread_work_past_four_gibibytes_on_a_sparse_file() {
        let dir = TempDir::new("sendfile-big");
        let path = dir.path().join("sparse");
        let file = File::create(&path).unwrap();
        let far: u64 = (5 << 30) + 123;
        file.write_all_at(b"far away", far).unwrap();
        drop(file);
        let file = File::open(&path).unwrap();
        let (left, right) = socket_pair().unwrap();
        let mut offset = far;
        assert_eq!(
            sendfile(left.as_fd(), file.as_fd(), &mut offset, 100).unwrap(),
            8
        );
        assert_eq!(offset, far + 8);
        assert_eq!(read_all_available(right.as_fd(), 8), b"far away");
        let mut buf = [0u8; 3];
        assert_eq!(pread(file.as_fd(), &mut buf, far + 4).unwrap(), 3);
        assert_eq!(&buf, b"awa");
        let mut huge = u64::MAX;
        let error = sendfile(left.as_fd(), file.as_fd(), &mut huge, 1).unwrap_err();
        assert_eq!(error.raw_os_error(), Some(libc::EINVAL));
    }
}
