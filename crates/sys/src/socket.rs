//! TCP sockets: listening, accepting, connecting and the options a web server tunes.
//!
//! Owns: socket creation and socket options, address conversion to and from `sockaddr`.
//! Must not touch: reading and writing (see `io.rs`), readiness (see `epoll.rs`).

use std::io;
use std::mem::{size_of, MaybeUninit};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::time::Duration;

use crate::cvt::{cvt, cvt_retry};

/// A socket address in the kernel's layout, with its length.
struct RawAddr {
    storage: libc::sockaddr_storage,
    len: libc::socklen_t,
}

impl RawAddr {
    fn from_std(addr: SocketAddr) -> RawAddr {
        // SAFETY: sockaddr_storage is plain old data for which all-zero bytes are valid.
        let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let len = match addr {
            SocketAddr::V4(v4) => {
                let raw = libc::sockaddr_in {
                    sin_family: libc::AF_INET as libc::sa_family_t,
                    sin_port: v4.port().to_be(),
                    sin_addr: libc::in_addr {
                        s_addr: u32::from_ne_bytes(v4.ip().octets()),
                    },
                    sin_zero: [0; 8],
                };
                // SAFETY: sockaddr_storage is larger than and suitably aligned for sockaddr_in.
                unsafe {
                    std::ptr::write(
                        std::ptr::addr_of_mut!(storage).cast::<libc::sockaddr_in>(),
                        raw,
                    );
                }
                size_of::<libc::sockaddr_in>()
            }
            SocketAddr::V6(v6) => {
                let raw = libc::sockaddr_in6 {
                    sin6_family: libc::AF_INET6 as libc::sa_family_t,
                    sin6_port: v6.port().to_be(),
                    sin6_flowinfo: v6.flowinfo().to_be(),
                    sin6_addr: libc::in6_addr {
                        s6_addr: v6.ip().octets(),
                    },
                    sin6_scope_id: v6.scope_id(),
                };
                // SAFETY: sockaddr_storage is larger than and suitably aligned for sockaddr_in6.
                unsafe {
                    std::ptr::write(
                        std::ptr::addr_of_mut!(storage).cast::<libc::sockaddr_in6>(),
                        raw,
                    );
                }
                size_of::<libc::sockaddr_in6>()
            }
        };
        RawAddr {
            storage,
            len: len as libc::socklen_t,
        }
    }

    fn empty() -> RawAddr {
        RawAddr {
            // SAFETY: sockaddr_storage is plain old data for which all-zero bytes are valid.
            storage: unsafe { std::mem::zeroed() },
            len: size_of::<libc::sockaddr_storage>() as libc::socklen_t,
        }
    }

    fn as_ptr(&self) -> *const libc::sockaddr {
        std::ptr::addr_of!(self.storage).cast()
    }

    fn as_mut_ptr(&mut self) -> *mut libc::sockaddr {
        std::ptr::addr_of_mut!(self.storage).cast()
    }

    fn to_std(&self) -> io::Result<SocketAddr> {
        match i32::from(self.storage.ss_family) {
            libc::AF_INET if self.len as usize >= size_of::<libc::sockaddr_in>() => {
                // SAFETY: the family says the storage holds a sockaddr_in, the kernel wrote at
                // least that many bytes, and sockaddr_storage is aligned for it.
                let raw = unsafe { &*std::ptr::addr_of!(self.storage).cast::<libc::sockaddr_in>() };
                let ip = Ipv4Addr::from(raw.sin_addr.s_addr.to_ne_bytes());
                Ok(SocketAddr::V4(SocketAddrV4::new(
                    ip,
                    u16::from_be(raw.sin_port),
                )))
            }
            libc::AF_INET6 if self.len as usize >= size_of::<libc::sockaddr_in6>() => {
                // SAFETY: as above, for sockaddr_in6.
                let raw =
                    unsafe { &*std::ptr::addr_of!(self.storage).cast::<libc::sockaddr_in6>() };
                Ok(SocketAddr::V6(SocketAddrV6::new(
                    Ipv6Addr::from(raw.sin6_addr.s6_addr),
                    u16::from_be(raw.sin6_port),
                    u32::from_be(raw.sin6_flowinfo),
                    raw.sin6_scope_id,
                )))
            }
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "socket address is neither IPv4 nor IPv6",
            )),
        }
    }
}

fn family(addr: &SocketAddr) -> i32 {
    match addr {
        SocketAddr::V4(_) => libc::AF_INET,
        SocketAddr::V6(_) => libc::AF_INET6,
    }
}

fn new_tcp_socket(addr: &SocketAddr) -> io::Result<OwnedFd> {
    // SAFETY: socket takes no pointers; a non-negative result is a fresh descriptor.
    let fd = cvt(unsafe {
        libc::socket(
            family(addr),
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    })?;
    // SAFETY: `fd` was just created and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn set_option<T: Copy>(fd: BorrowedFd<'_>, level: i32, name: i32, value: T) -> io::Result<()> {
    // SAFETY: `value` is a live T and the length passed is exactly its size; the kernel copies
    // it in and keeps no pointer.
    cvt(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            std::ptr::addr_of!(value).cast::<libc::c_void>(),
            size_of::<T>() as libc::socklen_t,
        )
    })?;
    Ok(())
}

fn get_int_option(fd: BorrowedFd<'_>, level: i32, name: i32) -> io::Result<i32> {
    let mut value: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `value` and `len` are live and writable, and `len` holds the size of `value`.
    cvt(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            name,
            std::ptr::addr_of_mut!(value).cast::<libc::c_void>(),
            &mut len,
        )
    })?;
    Ok(value)
}

fn flag(on: bool) -> libc::c_int {
    libc::c_int::from(on)
}

/// A non-blocking, close-on-exec TCP listener bound to `addr` with `SO_REUSEADDR`.
///
/// `reuse_port` sets `SO_REUSEPORT` so several processes or threads can each own a listener on
/// the same port and let the kernel spread connections. IPv6 listeners are `IPV6_V6ONLY`, so
/// `[::]` and `0.0.0.0` can be bound side by side.
///
/// # Errors
/// `EADDRINUSE`, `EACCES` (privileged port), `EADDRNOTAVAIL`, descriptor exhaustion.
pub fn listen_tcp(addr: SocketAddr, reuse_port: bool, backlog: i32) -> io::Result<OwnedFd> {
    let socket = new_tcp_socket(&addr)?;
    let fd = socket.as_fd();
    set_option(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, flag(true))?;
    if reuse_port {
        set_option(fd, libc::SOL_SOCKET, libc::SO_REUSEPORT, flag(true))?;
    }
    if addr.is_ipv6() {
        set_option(fd, libc::IPPROTO_IPV6, libc::IPV6_V6ONLY, flag(true))?;
    }
    let raw = RawAddr::from_std(addr);
    // SAFETY: `raw` holds a valid sockaddr of `raw.len` bytes; the socket is open.
    cvt(unsafe { libc::bind(fd.as_raw_fd(), raw.as_ptr(), raw.len) })?;
    // SAFETY: listen takes no pointers; the socket is open.
    cvt(unsafe { libc::listen(fd.as_raw_fd(), backlog) })?;
    Ok(socket)
}

/// Whether `error`, from binding an IPv6 socket, means the machine has no IPv6 (the protocol
/// is not built in or is switched off: `EAFNOSUPPORT`, `EADDRNOTAVAIL` for `[::]`), rather than
/// a fault in the address asked for.
#[must_use]
pub fn is_no_ipv6(error: &io::Error) -> bool {
    matches!(
        error.raw_os_error(),
        Some(libc::EAFNOSUPPORT | libc::EADDRNOTAVAIL | libc::EPROTONOSUPPORT)
    )
}

/// Binds a TCP socket to `addr` WITHOUT `SO_REUSEPORT` (but with `SO_REUSEADDR`, so connections
/// of an earlier run still in `TIME_WAIT` do not count), reads the address it got, and closes it.
///
/// This answers "does another socket hold this port?" for a server about to bind a
/// `SO_REUSEPORT` group: a listener of another process, with or without `SO_REUSEPORT`, makes
/// this bind fail with `EADDRINUSE`, where a second reuse-port listener would silently join its
/// group and share its connections. For port 0 the address returned carries the port the kernel
/// chose, which the group then binds.
///
/// # Errors
/// `EADDRINUSE` (another socket listens there), `EACCES`, `EADDRNOTAVAIL`, descriptor exhaustion.
pub fn probe_bind_tcp(addr: SocketAddr) -> io::Result<SocketAddr> {
    let socket = new_tcp_socket(&addr)?;
    let fd = socket.as_fd();
    set_option(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, flag(true))?;
    if addr.is_ipv6() {
        set_option(fd, libc::IPPROTO_IPV6, libc::IPV6_V6ONLY, flag(true))?;
    }
    let raw = RawAddr::from_std(addr);
    // SAFETY: `raw` holds a valid sockaddr of `raw.len` bytes; the socket is open.
    cvt(unsafe { libc::bind(fd.as_raw_fd(), raw.as_ptr(), raw.len) })?;
    local_addr(fd)
}

/// The listening sockets systemd passed to this process (socket activation, `sd_listen_fds`):
/// descriptors 3 .. 3 + `LISTEN_FDS` when `LISTEN_PID` names this process; none otherwise.
/// Each is checked to be a listening socket and made non-blocking and close-on-exec. The
/// variables are removed so children do not inherit them, and a second call returns nothing:
/// the descriptors are owned exactly once.
///
/// # Errors
/// A passed descriptor is not open (`EBADF`), not a socket, or not listening (`InvalidInput`).
pub fn take_activated_listeners() -> io::Result<Vec<OwnedFd>> {
    use std::sync::atomic::{AtomicBool, Ordering};
    static TAKEN: AtomicBool = AtomicBool::new(false);
    let for_us = std::env::var("LISTEN_PID")
        .ok()
        .and_then(|pid| pid.parse::<u32>().ok())
        == Some(std::process::id());
    let count = std::env::var("LISTEN_FDS")
        .ok()
        .and_then(|count| count.parse::<i32>().ok())
        .unwrap_or(0);
    if !for_us || count <= 0 || TAKEN.swap(true, Ordering::SeqCst) {
        return Ok(Vec::new());
    }
    std::env::remove_var("LISTEN_PID");
    std::env::remove_var("LISTEN_FDS");
    std::env::remove_var("LISTEN_FDNAMES");
    let mut listeners = Vec::new();
    for fd in 3..3 + count.min(64) {
        // SAFETY: F_GETFD takes no pointers; it only tells whether `fd` is open.
        cvt(unsafe { libc::fcntl(fd, libc::F_GETFD) })?;
        // SAFETY: `fd` is open (checked above) and was passed to this process by its parent
        // under the socket-activation protocol (LISTEN_PID is ours); TAKEN makes sure this
        // happens once, so nothing else owns it.
        let socket = unsafe { OwnedFd::from_raw_fd(fd) };
        let listening = get_int_option(socket.as_fd(), libc::SOL_SOCKET, libc::SO_ACCEPTCONN)?;
        if listening == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("inherited descriptor {fd} is not a listening socket"),
            ));
        }
        // SAFETY: F_SETFD takes an integer flag, no pointers.
        cvt(unsafe { libc::fcntl(socket.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) })?;
        set_nonblocking(socket.as_fd(), true)?;
        listeners.push(socket);
    }
    Ok(listeners)
}

/// The address a socket is bound to (the real port after binding port 0).
///
/// # Errors
/// `ENOTSOCK`, or `InvalidData` for a non-IP socket.
pub fn local_addr(fd: BorrowedFd<'_>) -> io::Result<SocketAddr> {
    let mut raw = RawAddr::empty();
    // SAFETY: `raw.storage` is writable for `raw.len` bytes and the kernel updates `raw.len`.
    cvt(unsafe { libc::getsockname(fd.as_raw_fd(), raw.as_mut_ptr(), &mut raw.len) })?;
    raw.to_std()
}

/// The address of the connected peer.
///
/// # Errors
/// `ENOTCONN`, `ENOTSOCK`.
pub fn peer_addr(fd: BorrowedFd<'_>) -> io::Result<SocketAddr> {
    let mut raw = RawAddr::empty();
    // SAFETY: `raw.storage` is writable for `raw.len` bytes and the kernel updates `raw.len`.
    cvt(unsafe { libc::getpeername(fd.as_raw_fd(), raw.as_mut_ptr(), &mut raw.len) })?;
    raw.to_std()
}

/// Accepts one connection as a non-blocking, close-on-exec socket.
///
/// # Errors
/// `WouldBlock` when the queue is empty; `EMFILE`/`ENFILE` when out of descriptors (callers
/// match `raw_os_error()` to pause accepting); `ECONNABORTED` for a connection reset while
/// queued.
pub fn accept(listener: BorrowedFd<'_>) -> io::Result<(OwnedFd, SocketAddr)> {
    let mut raw = RawAddr::empty();
    // SAFETY: `raw.storage` is writable for `raw.len` bytes and the kernel updates `raw.len`.
    let fd = cvt_retry(|| unsafe {
        libc::accept4(
            listener.as_raw_fd(),
            raw.as_mut_ptr(),
            &mut raw.len,
            libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
        )
    })?;
    // SAFETY: `fd` was just returned by accept4 and is owned by nobody else.
    let socket = unsafe { OwnedFd::from_raw_fd(fd) };
    Ok((socket, raw.to_std()?))
}

/// Starts a non-blocking connect; returns once the kernel has it in progress.
///
/// Wait for writability, then call [`take_socket_error`] to learn whether it succeeded.
///
/// # Errors
/// Immediate failures such as `ECONNREFUSED` (possible on loopback) or `ENETUNREACH`.
pub fn connect_tcp_nonblocking(addr: SocketAddr) -> io::Result<OwnedFd> {
    let socket = new_tcp_socket(&addr)?;
    let raw = RawAddr::from_std(addr);
    // SAFETY: `raw` holds a valid sockaddr of `raw.len` bytes; the socket is open.
    let result = cvt(unsafe { libc::connect(socket.as_raw_fd(), raw.as_ptr(), raw.len) });
    match result {
        Ok(_) => Ok(socket),
        // EINTR on a non-blocking connect also leaves it in progress (connect(2)).
        Err(error)
            if matches!(
                error.raw_os_error(),
                Some(libc::EINPROGRESS) | Some(libc::EINTR)
            ) =>
        {
            Ok(socket)
        }
        Err(error) => Err(error),
    }
}

/// Starts a non-blocking connect to the unix stream socket at `path` (close-on-exec).
///
/// A unix stream connect completes at once or fails: there is no connect in progress.
///
/// # Errors
/// `ENOENT` (no socket there), `ECONNREFUSED` (nobody listens), `EAGAIN` (its backlog is full:
/// reported as an error, as nginx does, since nothing will say when to try again),
/// `EACCES`, `ENAMETOOLONG` for a path longer than `sun_path`, descriptor exhaustion.
pub fn connect_unix_nonblocking(path: &std::path::Path) -> io::Result<OwnedFd> {
    use std::os::unix::ffi::OsStrExt;
    let bytes = path.as_os_str().as_bytes();
    // SAFETY: sockaddr_un is plain old data for which all-zero bytes are valid.
    let mut raw: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    // One byte stays zero: the path is NUL-terminated.
    if bytes.len() >= raw.sun_path.len() || bytes.contains(&0) {
        return Err(io::Error::from_raw_os_error(libc::ENAMETOOLONG));
    }
    raw.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (to, from) in raw.sun_path.iter_mut().zip(bytes) {
        *to = *from as libc::c_char;
    }
    let len = std::mem::offset_of!(libc::sockaddr_un, sun_path) + bytes.len() + 1;
    // SAFETY: socket takes no pointers; a non-negative result is a fresh descriptor.
    let fd = cvt(unsafe {
        libc::socket(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    })?;
    // SAFETY: `fd` was just created and is owned by nobody else.
    let socket = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: `raw` is a valid sockaddr_un of at least `len` bytes; the socket is open.
    cvt_retry(|| unsafe {
        libc::connect(
            socket.as_raw_fd(),
            std::ptr::addr_of!(raw).cast::<libc::sockaddr>(),
            len as libc::socklen_t,
        )
    })?;
    Ok(socket)
}

/// Whether a non-blocking `connect` has completed: `Ok(true)` connected, `Ok(false)` still
/// under way, `Err` the connect's own error (`ECONNREFUSED`, `ETIMEDOUT`, ...), taken from
/// `SO_ERROR`. Reliable whatever readiness was reported: a pending error is checked first,
/// then whether the socket has a peer.
///
/// # Errors
/// The connect failed.
pub fn connect_finished(fd: BorrowedFd<'_>) -> io::Result<bool> {
    if let Some(error) = take_socket_error(fd)? {
        return Err(error);
    }
    let mut raw = RawAddr::empty();
    // SAFETY: `raw.storage` is writable for `raw.len` bytes and the kernel updates `raw.len`.
    match cvt(unsafe { libc::getpeername(fd.as_raw_fd(), raw.as_mut_ptr(), &mut raw.len) }) {
        Ok(_) => Ok(true),
        Err(error) if error.raw_os_error() == Some(libc::ENOTCONN) => {
            // Not connected: under way, unless it failed between the two calls.
            match take_socket_error(fd)? {
                Some(error) => Err(error),
                None => Ok(false),
            }
        }
        Err(error) => Err(error),
    }
}

/// What an idle keep-alive connection holds, looked at without taking anything.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdlePeek {
    /// Nothing to read (`EAGAIN`): open and quiet, fit for reuse.
    Quiet,
    /// End of stream: the peer closed it.
    Closed,
    /// Bytes nobody asked for are waiting.
    Unexpected,
}

/// `recv(MSG_PEEK | MSG_DONTWAIT)` of one byte on an idle connection.
///
/// # Errors
/// The connection was reset, or another error is pending on it.
pub fn peek_idle(fd: BorrowedFd<'_>) -> io::Result<IdlePeek> {
    let mut byte = [0u8; 1];
    // SAFETY: `byte` is writable for its one byte; MSG_PEEK leaves the data in the socket.
    let result = cvt_retry(|| unsafe {
        libc::recv(
            fd.as_raw_fd(),
            byte.as_mut_ptr().cast::<libc::c_void>(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        ) as libc::c_int
    });
    match result {
        Ok(0) => Ok(IdlePeek::Closed),
        Ok(_) => Ok(IdlePeek::Unexpected),
        Err(error) if error.kind() == io::ErrorKind::WouldBlock => Ok(IdlePeek::Quiet),
        Err(error) => Err(error),
    }
}

/// Reads and clears `SO_ERROR`: `None` when the socket has no pending error.
///
/// # Errors
/// Only if `fd` is not a socket.
pub fn take_socket_error(fd: BorrowedFd<'_>) -> io::Result<Option<io::Error>> {
    let code = get_int_option(fd, libc::SOL_SOCKET, libc::SO_ERROR)?;
    Ok((code != 0).then(|| io::Error::from_raw_os_error(code)))
}

/// `TCP_NODELAY`: send small segments at once instead of waiting (Nagle).
///
/// # Errors
/// `ENOTSOCK`, `EOPNOTSUPP` for non-TCP sockets.
pub fn set_nodelay(fd: BorrowedFd<'_>, on: bool) -> io::Result<()> {
    set_option(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, flag(on))
}

/// Whether `TCP_NODELAY` is set.
///
/// # Errors
/// `ENOTSOCK`, `EOPNOTSUPP` for non-TCP sockets.
pub fn nodelay(fd: BorrowedFd<'_>) -> io::Result<bool> {
    Ok(get_int_option(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY)? != 0)
}

/// `TCP_DEFER_ACCEPT` on a listener: the kernel completes `accept` only once the client's first
/// bytes have arrived (or after about `seconds`), so a new connection's request can be read at
/// once instead of after one more trip through `epoll_wait`.
///
/// # Errors
/// `ENOTSOCK`, `EOPNOTSUPP` for non-TCP sockets.
pub fn set_defer_accept(fd: BorrowedFd<'_>, seconds: u32) -> io::Result<()> {
    set_option(
        fd,
        libc::IPPROTO_TCP,
        libc::TCP_DEFER_ACCEPT,
        libc::c_int::try_from(seconds).unwrap_or(libc::c_int::MAX),
    )
}

/// `TCP_CORK`: hold partial frames so a header and a `sendfile` body leave in full segments;
/// clearing it flushes.
///
/// # Errors
/// `ENOTSOCK`, `EOPNOTSUPP` for non-TCP sockets.
pub fn set_cork(fd: BorrowedFd<'_>, on: bool) -> io::Result<()> {
    set_option(fd, libc::IPPROTO_TCP, libc::TCP_CORK, flag(on))
}

/// `SO_LINGER`: `None` restores the default (close returns at once, the kernel finishes
/// sending); `Some(ZERO)` makes close send a reset.
///
/// # Errors
/// `ENOTSOCK`.
pub fn set_linger(fd: BorrowedFd<'_>, linger: Option<Duration>) -> io::Result<()> {
    let value = libc::linger {
        l_onoff: flag(linger.is_some()),
        l_linger: linger.map_or(0, |duration| {
            libc::c_int::try_from(duration.as_secs()).unwrap_or(libc::c_int::MAX)
        }),
    };
    set_option(fd, libc::SOL_SOCKET, libc::SO_LINGER, value)
}

/// Half-closes the sending side (a FIN), as lingering close needs (RFC 9112 §9.6).
///
/// # Errors
/// `ENOTCONN`, `ENOTSOCK`.
pub fn shutdown_write(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: shutdown takes no pointers; the descriptor is open.
    cvt(unsafe { libc::shutdown(fd.as_raw_fd(), libc::SHUT_WR) })?;
    Ok(())
}

/// `shutdown(SHUT_RDWR)`: ends the connection in both directions at once, whoever else still
/// holds the socket, and wakes any thread (or io_uring worker) blocked sending on it.
///
/// # Errors
/// `ENOTCONN`, `ENOTSOCK`.
pub fn shutdown_both(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: shutdown takes no pointers; the descriptor is open.
    cvt(unsafe { libc::shutdown(fd.as_raw_fd(), libc::SHUT_RDWR) })?;
    Ok(())
}

/// `SO_RCVBUF` (the kernel doubles the value for bookkeeping).
///
/// # Errors
/// `ENOTSOCK`.
pub fn set_recv_buffer(fd: BorrowedFd<'_>, bytes: usize) -> io::Result<()> {
    let size = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    set_option(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, size)
}

/// `SO_SNDBUF` (the kernel doubles the value for bookkeeping).
///
/// # Errors
/// `ENOTSOCK`.
pub fn set_send_buffer(fd: BorrowedFd<'_>, bytes: usize) -> io::Result<()> {
    let size = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    set_option(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, size)
}

/// The current `SO_SNDBUF` size in bytes.
///
/// # Errors
/// `ENOTSOCK`.
pub fn send_buffer(fd: BorrowedFd<'_>) -> io::Result<usize> {
    let size = get_int_option(fd, libc::SOL_SOCKET, libc::SO_SNDBUF)?;
    Ok(usize::try_from(size).unwrap_or(0))
}

/// Sets or clears `O_NONBLOCK` on any descriptor.
///
/// # Errors
/// `EBADF`.
pub fn set_nonblocking(fd: BorrowedFd<'_>, on: bool) -> io::Result<()> {
    // SAFETY: F_GETFL takes no pointer argument; the descriptor is open.
    let flags = cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) })?;
    let wanted = if on {
        flags | libc::O_NONBLOCK
    } else {
        flags & !libc::O_NONBLOCK
    };
    if wanted != flags {
        // SAFETY: F_SETFL takes an int argument; the descriptor is open.
        cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, wanted) })?;
    }
    Ok(())
}

/// Whether `O_NONBLOCK` is set.
///
/// # Errors
/// `EBADF`.
pub fn is_nonblocking(fd: BorrowedFd<'_>) -> io::Result<bool> {
    // SAFETY: F_GETFL takes no pointer argument; the descriptor is open.
    let flags = cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) })?;
    Ok(flags & libc::O_NONBLOCK != 0)
}

/// A connected pair of Unix stream sockets (non-blocking, close-on-exec): for tests and for
/// wiring helper processes.
///
/// # Errors
/// Descriptor exhaustion.
pub fn socket_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = MaybeUninit::<[libc::c_int; 2]>::uninit();
    // SAFETY: `fds` is writable storage for the two descriptors socketpair returns.
    cvt(unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr().cast::<libc::c_int>(),
        )
    })?;
    // SAFETY: socketpair succeeded, so both entries are initialised.
    let [left, right] = unsafe { fds.assume_init() };
    // SAFETY: both descriptors were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(left), OwnedFd::from_raw_fd(right)) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::epoll::{Epoll, Events, Interest};
    use crate::io::{read, write};
    use std::os::fd::AsFd;
    use std::time::Instant;

    fn loopback() -> SocketAddr {
        "127.0.0.1:0".parse().unwrap()
    }

    fn wait_for(epoll: &Epoll, fd: BorrowedFd<'_>, interest: Interest) {
        epoll.add(fd, 0, interest).unwrap();
        let mut events = Events::with_capacity(1);
        assert_eq!(epoll.wait(&mut events, 5000).unwrap(), 1);
        epoll.delete(fd).unwrap();
    }

    /// The server sets `TCP_NODELAY` once on its listener instead of once per connection: that
    /// only works because Linux copies the listener's options into each accepted socket.
    #[test]
    fn accepted_sockets_inherit_nodelay_and_defer_accept_delivers_data() {
        let listener = listen_tcp(loopback(), false, 16).unwrap();
        set_nodelay(listener.as_fd(), true).unwrap();
        set_defer_accept(listener.as_fd(), 1).unwrap();
        let client = connect_tcp_nonblocking(local_addr(listener.as_fd()).unwrap()).unwrap();
        let epoll = Epoll::new().unwrap();
        wait_for(&epoll, client.as_fd(), Interest::WRITABLE);
        write(client.as_fd(), b"GET").unwrap();
        wait_for(&epoll, listener.as_fd(), Interest::READABLE);
        let (server, _) = accept(listener.as_fd()).unwrap();
        assert!(nodelay(server.as_fd()).unwrap());
        let mut buf = [0u8; 8];
        assert_eq!(read(server.as_fd(), &mut buf).unwrap(), 3);
    }

    #[test]
    fn listen_connect_accept_exchange_bytes() {
        let listener = listen_tcp(loopback(), false, 16).unwrap();
        let bound = local_addr(listener.as_fd()).unwrap();
        assert_ne!(bound.port(), 0);
        assert!(is_nonblocking(listener.as_fd()).unwrap());
        let would_block = accept(listener.as_fd()).unwrap_err();
        assert_eq!(would_block.kind(), io::ErrorKind::WouldBlock);

        let client = connect_tcp_nonblocking(bound).unwrap();
        let epoll = Epoll::new().unwrap();
        wait_for(&epoll, client.as_fd(), Interest::WRITABLE);
        assert!(take_socket_error(client.as_fd()).unwrap().is_none());
        wait_for(&epoll, listener.as_fd(), Interest::READABLE);
        let (server, peer) = accept(listener.as_fd()).unwrap();
        assert_eq!(peer, local_addr(client.as_fd()).unwrap());
        assert_eq!(peer_addr(server.as_fd()).unwrap(), peer);
        assert!(is_nonblocking(server.as_fd()).unwrap());

        set_nodelay(server.as_fd(), true).unwrap();
        set_cork(server.as_fd(), true).unwrap();
        set_cork(server.as_fd(), false).unwrap();
        set_linger(server.as_fd(), Some(Duration::from_secs(1))).unwrap();
        set_linger(server.as_fd(), None).unwrap();
        set_send_buffer(server.as_fd(), 64 * 1024).unwrap();
        set_recv_buffer(server.as_fd(), 64 * 1024).unwrap();
        assert!(send_buffer(server.as_fd()).unwrap() >= 64 * 1024);

        assert_eq!(write(server.as_fd(), b"hello").unwrap(), 5);
        shutdown_write(server.as_fd()).unwrap();
        wait_for(&epoll, client.as_fd(), Interest::READABLE);
        let mut buf = [0u8; 16];
        assert_eq!(read(client.as_fd(), &mut buf).unwrap(), 5);
        assert_eq!(&buf[..5], b"hello");
        // After the FIN, reads return 0 (end of stream).
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match read(client.as_fd(), &mut buf) {
                Ok(0) => break,
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                    assert!(Instant::now() < deadline, "no end of stream");
                    std::thread::sleep(Duration::from_millis(5));
                }
                other => panic!("unexpected {other:?}"),
            }
        }
    }

    #[test]
    fn refused_connect_shows_up_as_socket_error() {
        // Bind a port, then close it, so nothing listens there.
        let port = {
            let listener = listen_tcp(loopback(), false, 1).unwrap();
            local_addr(listener.as_fd()).unwrap().port()
        };
        let target = SocketAddr::from(([127, 0, 0, 1], port));
        match connect_tcp_nonblocking(target) {
            Err(error) => assert_eq!(error.raw_os_error(), Some(libc::ECONNREFUSED)),
            Ok(client) => {
                let epoll = Epoll::new().unwrap();
                wait_for(&epoll, client.as_fd(), Interest::WRITABLE);
                let pending = take_socket_error(client.as_fd()).unwrap().unwrap();
                assert_eq!(pending.raw_os_error(), Some(libc::ECONNREFUSED));
            }
        }
    }

    #[test]
    fn a_connect_in_progress_completes_and_an_idle_peer_is_quiet_then_closed() {
        let listener = listen_tcp(loopback(), false, 16).unwrap();
        let client = connect_tcp_nonblocking(local_addr(listener.as_fd()).unwrap()).unwrap();
        let epoll = Epoll::new().unwrap();
        wait_for(&epoll, client.as_fd(), Interest::WRITABLE);
        assert!(connect_finished(client.as_fd()).unwrap());
        wait_for(&epoll, listener.as_fd(), Interest::READABLE);
        let (server, _) = accept(listener.as_fd()).unwrap();
        assert_eq!(peek_idle(client.as_fd()).unwrap(), IdlePeek::Quiet);
        write(server.as_fd(), b"x").unwrap();
        wait_for(&epoll, client.as_fd(), Interest::READABLE);
        assert_eq!(peek_idle(client.as_fd()).unwrap(), IdlePeek::Unexpected);
        let mut buf = [0u8; 1];
        assert_eq!(
            read(client.as_fd(), &mut buf).unwrap(),
            1,
            "the peek took nothing"
        );
        drop(server);
        wait_for(&epoll, client.as_fd(), Interest::READABLE);
        assert_eq!(peek_idle(client.as_fd()).unwrap(), IdlePeek::Closed);
    }

    #[test]
    fn a_refused_connect_is_reported_by_connect_finished() {
        let port = {
            let listener = listen_tcp(loopback(), false, 1).unwrap();
            local_addr(listener.as_fd()).unwrap().port()
        };
        let target = SocketAddr::from(([127, 0, 0, 1], port));
        if let Ok(client) = connect_tcp_nonblocking(target) {
            let epoll = Epoll::new().unwrap();
            wait_for(&epoll, client.as_fd(), Interest::WRITABLE);
            let error = connect_finished(client.as_fd()).unwrap_err();
            assert_eq!(error.raw_os_error(), Some(libc::ECONNREFUSED));
        }
    }

    #[test]
    fn unix_connects_complete_at_once_or_name_what_is_missing() {
        let dir = std::env::temp_dir().join(format!("ampd-sys-unix-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("up.sock");
        let _ = std::fs::remove_file(&path);
        let missing = connect_unix_nonblocking(&path).unwrap_err();
        assert_eq!(missing.raw_os_error(), Some(libc::ENOENT));
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let client = connect_unix_nonblocking(&path).unwrap();
        assert!(connect_finished(client.as_fd()).unwrap());
        assert!(is_nonblocking(client.as_fd()).unwrap());
        let (mut theirs, _) = listener.accept().unwrap();
        use std::io::Write;
        theirs.write_all(b"ok").unwrap();
        let epoll = Epoll::new().unwrap();
        wait_for(&epoll, client.as_fd(), Interest::READABLE);
        let mut buf = [0u8; 4];
        assert_eq!(read(client.as_fd(), &mut buf).unwrap(), 2);
        let long = dir.join("x".repeat(200));
        let too_long = connect_unix_nonblocking(&long).unwrap_err();
        assert_eq!(too_long.raw_os_error(), Some(libc::ENAMETOOLONG));
        drop(listener);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn reuse_port_allows_two_listeners_and_plain_bind_does_not() {
        let first = listen_tcp(loopback(), true, 4).unwrap();
        let addr = local_addr(first.as_fd()).unwrap();
        let second = listen_tcp(addr, true, 4).unwrap();
        assert_eq!(local_addr(second.as_fd()).unwrap(), addr);
        let clash = listen_tcp(addr, false, 4).unwrap_err();
        assert_eq!(clash.raw_os_error(), Some(libc::EADDRINUSE));
    }

    #[test]
    fn probe_bind_sees_a_reuse_port_listener_and_takes_a_port_for_port_zero() {
        let probed = probe_bind_tcp(loopback()).unwrap();
        assert_ne!(probed.port(), 0, "port 0 gets a real port");
        let group = listen_tcp(probed, true, 4).unwrap();
        assert_eq!(local_addr(group.as_fd()).unwrap(), probed);
        let clash = probe_bind_tcp(probed).unwrap_err();
        assert_eq!(clash.raw_os_error(), Some(libc::EADDRINUSE));
        drop(group);
        assert_eq!(
            probe_bind_tcp(probed).unwrap(),
            probed,
            "free again once closed"
        );
    }

    #[test]
    fn ipv6_loopback_round_trips_the_address() {
        // Some sandboxes have no IPv6; only check the conversion when binding works.
        let Ok(listener) = listen_tcp("[::1]:0".parse().unwrap(), false, 4) else {
            return;
        };
        let addr = local_addr(listener.as_fd()).unwrap();
        assert!(addr.is_ipv6());
        assert_eq!(addr.ip(), "::1".parse::<std::net::IpAddr>().unwrap());
    }

    #[test]
    fn set_nonblocking_toggles_the_flag() {
        let (left, _right) = socket_pair().unwrap();
        set_nonblocking(left.as_fd(), false).unwrap();
        assert!(!is_nonblocking(left.as_fd()).unwrap());
        set_nonblocking(left.as_fd(), true).unwrap();
        assert!(is_nonblocking(left.as_fd()).unwrap());
    }
}
