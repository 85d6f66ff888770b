//! Passing descriptors between processes over a Unix socket (`SCM_RIGHTS`): how a helper process
//! hands the files it opened back to the event loop that serves them (Flash's helpers were
//! processes; a descriptor opened in one process means nothing in another unless passed).
//!
//! Owns: `sendmsg`/`recvmsg` with descriptors attached. Must not touch: the framing of the bytes
//! (the engine's wire format does that).

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use crate::cvt::{cvt_retry, to_usize};

/// Most descriptors one message carries here (the kernel allows 253).
pub const MAX_FDS: usize = 32;

/// Control-message space for `MAX_FDS` descriptors, aligned for `cmsghdr`.
#[repr(C, align(8))]
struct ControlBuffer([u8; 256]);

const _: () = assert!(MAX_FDS * std::mem::size_of::<RawFd>() + 64 <= 256);

fn control_len(fds: usize) -> usize {
    let payload = u32::try_from(fds * std::mem::size_of::<RawFd>()).unwrap_or(u32::MAX);
    // SAFETY: CMSG_SPACE is arithmetic on its argument.
    to_usize(unsafe { libc::CMSG_SPACE(payload) })
}

/// Sends `bytes` with `fds` attached (duplicated into the receiver when it reads the first byte).
/// Returns how many bytes went; on a stream socket a short send carries the descriptors with its
/// first byte, so the rest is sent with plain writes.
///
/// # Errors
/// `InvalidInput` for more than [`MAX_FDS`] descriptors; `WouldBlock`, `EPIPE`, `ETOOMANYREFS`.
pub fn send_with_fds(
    socket: BorrowedFd<'_>,
    bytes: &[u8],
    fds: &[BorrowedFd<'_>],
) -> io::Result<usize> {
    if fds.len() > MAX_FDS {
        return Err(io::ErrorKind::InvalidInput.into());
    }
    let mut iov = libc::iovec {
        iov_base: bytes.as_ptr().cast_mut().cast::<libc::c_void>(),
        iov_len: bytes.len(),
    };
    let mut control = ControlBuffer([0u8; 256]);
    // SAFETY: msghdr is plain old data for which all-zero bytes are valid (null pointers).
    let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
    message.msg_iov = &mut iov;
    message.msg_iovlen = 1;
    if !fds.is_empty() {
        let payload = fds.len() * std::mem::size_of::<RawFd>();
        message.msg_control = control.0.as_mut_ptr().cast::<libc::c_void>();
        message.msg_controllen = control_len(fds.len());
        // SAFETY: `message` has a control buffer of `msg_controllen` ≥ CMSG_SPACE(payload) bytes,
        // so CMSG_FIRSTHDR returns a pointer inside it, valid for a cmsghdr plus `payload`.
        unsafe {
            let header = libc::CMSG_FIRSTHDR(&message);
            (*header).cmsg_level = libc::SOL_SOCKET;
            (*header).cmsg_type = libc::SCM_RIGHTS;
            (*header).cmsg_len = libc::CMSG_LEN(payload as u32) as usize;
            let data = libc::CMSG_DATA(header).cast::<RawFd>();
            for (index, fd) in fds.iter().enumerate() {
                data.add(index).write_unaligned(fd.as_raw_fd());
            }
        }
    }
    // SAFETY: `message` points at `iov` (describing `bytes`, live and only read) and at
    // `control` (live), both outliving the call; the descriptors are borrowed, hence open.
    let sent =
        cvt_retry(|| unsafe { libc::sendmsg(socket.as_raw_fd(), &message, libc::MSG_NOSIGNAL) })?;
    Ok(to_usize(sent))
}

/// What one `recv_with_fds` took in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Received {
    /// Bytes received; 0 is end of stream.
    pub bytes: usize,
    /// Descriptors that came with them were cut off (`MSG_CTRUNC`: more than the buffer holds,
    /// or this process was out of descriptors, `EMFILE`) and closed by the kernel. The bytes
    /// arrived all the same, so a stream stays in step.
    pub cut_off: bool,
}

/// Receives bytes into `buf`, appending any descriptors that came with them to `fds` (as
/// close-on-exec descriptors owned by the caller).
///
/// # Errors
/// `WouldBlock`, `ECONNRESET`.
pub fn recv_with_fds(
    socket: BorrowedFd<'_>,
    buf: &mut [u8],
    fds: &mut Vec<OwnedFd>,
) -> io::Result<Received> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast::<libc::c_void>(),
        iov_len: buf.len(),
    };
    let mut control = MaybeUninit::<ControlBuffer>::zeroed();
    // SAFETY: msghdr is plain old data for which all-zero bytes are valid (null pointers).
    let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
    message.msg_iov = &mut iov;
    message.msg_iovlen = 1;
    message.msg_control = control.as_mut_ptr().cast::<libc::c_void>();
    message.msg_controllen = std::mem::size_of::<ControlBuffer>();
    // SAFETY: `iov` describes `buf`, live and writable; the control buffer is live and writable
    // for `msg_controllen` bytes; both outlive the call.
    let received = cvt_retry(|| unsafe {
        libc::recvmsg(socket.as_raw_fd(), &mut message, libc::MSG_CMSG_CLOEXEC)
    })?;
    // SAFETY: after a successful recvmsg the kernel has set msg_controllen to the bytes of
    // control messages it wrote into the buffer; CMSG_FIRSTHDR/NXTHDR stay inside that length,
    // and each SCM_RIGHTS payload holds cmsg_len - CMSG_LEN(0) bytes of new descriptors that
    // this process now owns exactly once.
    unsafe {
        let mut header = libc::CMSG_FIRSTHDR(&message);
        while !header.is_null() {
            if (*header).cmsg_level == libc::SOL_SOCKET && (*header).cmsg_type == libc::SCM_RIGHTS {
                let bytes = (*header).cmsg_len - libc::CMSG_LEN(0) as usize;
                let count = bytes / std::mem::size_of::<RawFd>();
                let data = libc::CMSG_DATA(header).cast::<RawFd>();
                for index in 0..count {
                    fds.push(OwnedFd::from_raw_fd(data.add(index).read_unaligned()));
                }
            }
            header = libc::CMSG_NXTHDR(&message, header);
        }
    }
    Ok(Received {
        bytes: to_usize(received),
        cut_off: message.msg_flags & libc::MSG_CTRUNC != 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{read, write};
    use crate::socket::socket_pair;
    use std::os::fd::AsFd;

    #[test]
    fn a_passed_descriptor_reaches_the_same_open_file() {
        let (left, right) = socket_pair().unwrap();
        let (pipe_left, pipe_right) = socket_pair().unwrap();
        assert_eq!(
            send_with_fds(left.as_fd(), b"hi", &[pipe_right.as_fd()]).unwrap(),
            2
        );
        drop(pipe_right);
        let mut buf = [0u8; 16];
        let mut fds = Vec::new();
        let received = recv_with_fds(right.as_fd(), &mut buf, &mut fds).unwrap();
        assert_eq!(
            received,
            Received {
                bytes: 2,
                cut_off: false
            }
        );
        assert_eq!(&buf[..2], b"hi");
        assert_eq!(fds.len(), 1);
        // The received descriptor is the other end of `pipe_left`'s pair.
        write(fds[0].as_fd(), b"x").unwrap();
        let mut got = [0u8; 1];
        assert_eq!(read(pipe_left.as_fd(), &mut got).unwrap(), 1);
        // Plain bytes come without descriptors; end of stream is 0.
        send_with_fds(left.as_fd(), b"z", &[]).unwrap();
        let mut none = Vec::new();
        assert_eq!(
            recv_with_fds(right.as_fd(), &mut buf, &mut none)
                .unwrap()
                .bytes,
            1
        );
        assert!(none.is_empty());
        drop(left);
        // Another test of this binary may fork meanwhile (child.rs, spawn.rs): its child holds
        // a copy of `left` until it execs or exits, so the end of stream can come a moment
        // later than the drop.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let at_end = loop {
            match recv_with_fds(right.as_fd(), &mut buf, &mut none) {
                Err(error)
                    if error.kind() == io::ErrorKind::WouldBlock
                        && std::time::Instant::now() < deadline =>
                {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                received => break received.unwrap().bytes,
            }
        };
        assert_eq!(at_end, 0);
        let too_many: Vec<BorrowedFd<'_>> = (0..=MAX_FDS).map(|_| pipe_left.as_fd()).collect();
        assert!(send_with_fds(right.as_fd(), b"x", &too_many).is_err());
    }
}
