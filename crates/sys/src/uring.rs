//! io_uring(7), made safe: a submission ring whose operations own the memory the kernel uses
//! until their last completion, and a ring of provided buffers for receives.
//!
//! Owns: the ring, the in-flight operations (with the iovecs and send buffers they point at),
//! and the provided-buffer ring that multishot receives fill. Every pointer handed to the kernel
//! points into memory this module owns and keeps alive, unmoved, until the kernel says it is done
//! with it (the completion without `IORING_CQE_F_MORE`); dropping a ring with operations in
//! flight cancels them and waits, and leaks the memory rather than free it if the kernel does not
//! let go in time. Must not touch: what an operation is for (the caller's `Tag` says).
//! Sources: io_uring(7), io_uring_enter(2), io_uring_register_buf_ring(3); the `io-uring` crate
//! builds the submission entries.

use std::alloc::{self, Layout};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use io_uring::{cqueue, opcode, squeue, types, IoUring};

/// The caller's name for an operation, handed back with each of its completions.
pub type Tag = u64;

/// One submitted operation, for [`Ring::cancel`]. Carries a generation, so a stale id cannot
/// cancel an unrelated operation that reused the slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpId(u64);

/// `user_data` of cancel requests: their completions are not reported.
const CANCEL_USER_DATA: u64 = u64::MAX;
/// The buffer group of the provided-buffer ring.
const BUFFER_GROUP: u16 = 0;
/// How long dropping a ring waits for cancelled operations to finish.
const DRAIN_LIMIT: Duration = Duration::from_secs(1);

/// Bytes to send: owned, or a shared slice (a cached file body) kept alive until sent.
#[derive(Debug)]
pub enum SendPart {
    Owned(Vec<u8>),
    Shared {
        data: Arc<[u8]>,
        start: usize,
        end: usize,
    },
}

impl SendPart {
    fn bytes(&self) -> &[u8] {
        match self {
            SendPart::Owned(bytes) => bytes,
            SendPart::Shared { data, start, end } => &data[*start..*end],
        }
    }
}

/// Memory an operation lends the kernel.
enum Memory {
    None,
    Send {
        parts: Vec<SendPart>,
        /// Points into `parts`' heap buffers, which do not move when `parts` does. Never read
        /// here: it is kept only because the kernel reads it until the send completes.
        #[allow(dead_code)]
        iovecs: Box<[libc::iovec]>,
    },
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Accept,
    Receive,
    Send,
    Poll,
}

struct Op {
    tag: Tag,
    generation: u32,
    kind: Kind,
    memory: Memory,
}

/// A received chunk waiting in a provided buffer; hand it to [`Ring::take_received`], which
/// gives the buffer back to the kernel.
#[derive(Debug)]
pub struct Received {
    id: u16,
    len: usize,
}

/// One completion.
#[derive(Debug)]
pub struct Completion {
    pub tag: Tag,
    pub op: OpId,
    /// Bytes moved, or `-errno`.
    pub result: i32,
    /// A multishot operation stays armed and will complete again.
    pub more: bool,
    /// A connection taken by a multishot accept (close-on-exec, owned by the caller).
    pub accepted: Option<OwnedFd>,
    /// Data a multishot receive put in a provided buffer.
    pub received: Option<Received>,
    /// A finished send gives its buffers back, for reuse.
    pub parts: Vec<SendPart>,
}

/// What a poll's completion (`Ring::poll_once`) reports ready.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PollEvents {
    pub readable: bool,
    pub writable: bool,
    /// An error or hang-up: the next read, write or `SO_ERROR` says which.
    pub error_or_hangup: bool,
}

/// The events in a poll completion's `result` (a negative result, such as `-ECANCELED`, reports
/// none).
#[must_use]
pub fn poll_events(result: i32) -> PollEvents {
    let Ok(mask) = i16::try_from(result) else {
        return PollEvents::default();
    };
    if result < 0 {
        return PollEvents::default();
    }
    PollEvents {
        readable: mask & libc::POLLIN != 0,
        writable: mask & libc::POLLOUT != 0,
        error_or_hangup: mask & (libc::POLLERR | libc::POLLHUP | libc::POLLRDHUP) != 0,
    }
}

/// The provided-buffer ring (`IORING_REGISTER_PBUF_RING`): `count` buffers of `size` bytes that
/// receives fill without a buffer being committed to each idle connection.
struct ProvidedBuffers {
    entries: *mut types::BufRingEntry,
    entries_layout: Layout,
    data: *mut u8,
    data_layout: Layout,
    count: u16,
    size: usize,
    tail: u16,
    /// Buffers a completion has handed to the caller and not yet given back.
    lent: Vec<bool>,
    /// Set when the kernel might still use the memory: it is then never freed.
    leak: bool,
}

impl ProvidedBuffers {
    fn new(count: u16, size: usize) -> io::Result<ProvidedBuffers> {
        if !count.is_power_of_two() || size == 0 || u32::try_from(size).is_err() {
            return Err(io::ErrorKind::InvalidInput.into());
        }
        let entries_layout = Layout::from_size_align(
            usize::from(count) * std::mem::size_of::<types::BufRingEntry>(),
            4096,
        )
        .map_err(|_| io::ErrorKind::InvalidInput)?;
        let data_layout = Layout::from_size_align(usize::from(count) * size, 4096)
            .map_err(|_| io::ErrorKind::InvalidInput)?;
        // SAFETY: both layouts have a non-zero size (count ≥ 1, size ≥ 1).
        let entries = unsafe { alloc::alloc_zeroed(entries_layout) }.cast::<types::BufRingEntry>();
        // SAFETY: as above.
        let data = unsafe { alloc::alloc_zeroed(data_layout) };
        if entries.is_null() || data.is_null() {
            // SAFETY: each pointer, if non-null, came from alloc_zeroed with its layout.
            unsafe {
                if !entries.is_null() {
                    alloc::dealloc(entries.cast::<u8>(), entries_layout);
                }
                if !data.is_null() {
                    alloc::dealloc(data, data_layout);
                }
            }
            return Err(io::ErrorKind::OutOfMemory.into());
        }
        Ok(ProvidedBuffers {
            entries,
            entries_layout,
            data,
            data_layout,
            count,
            size,
            tail: 0,
            lent: vec![false; usize::from(count)],
            leak: false,
        })
    }

    /// Put buffer `id` at the ring's tail and publish the new tail to the kernel.
    fn provide(&mut self, id: u16) {
        let mask = self.count - 1;
        let index = usize::from(self.tail & mask);
        let offset = usize::from(id) * self.size;
        // SAFETY: `index` < count, so the entry is inside the `entries` allocation; `offset` +
        // size ≤ count × size, inside `data`. The kernel reads only entries between its head and
        // the published tail, and this one is past the published tail until the store below.
        unsafe {
            let entry = &mut *self.entries.add(index);
            entry.set_addr(self.data.add(offset) as u64);
            entry.set_len(self.size as u32);
            entry.set_bid(id);
        }
        self.tail = self.tail.wrapping_add(1);
        // SAFETY: the tail field lives in the first entry of the live `entries` allocation, is
        // 2-byte aligned, and is only ever accessed atomically by the kernel and by this store.
        let tail =
            unsafe { AtomicU16::from_ptr(types::BufRingEntry::tail(self.entries).cast_mut()) };
        tail.store(self.tail, Ordering::Release);
    }
}

impl Drop for ProvidedBuffers {
    fn drop(&mut self) {
        if self.leak {
            return;
        }
        // SAFETY: both pointers came from alloc_zeroed with these layouts and are freed once;
        // `leak` is false, so the ring that used them is gone and no operation is in flight.
        unsafe {
            alloc::dealloc(self.entries.cast::<u8>(), self.entries_layout);
            alloc::dealloc(self.data, self.data_layout);
        }
    }
}

/// An io_uring instance with its operations and provided buffers.
pub struct Ring {
    ring: IoUring,
    ops: Vec<Option<Op>>,
    free: Vec<u32>,
    generation: u32,
    buffers: ProvidedBuffers,
    reaped: Vec<(u64, i32, u32)>,
}

impl std::fmt::Debug for Ring {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Ring")
            .field("in_flight", &self.in_flight())
            .finish_non_exhaustive()
    }
}

impl Ring {
    /// Sets up a ring of `entries` submissions and `buffer_count` provided buffers (a power of
    /// two) of `buffer_size` bytes. This is also the probe for whether io_uring can be used here.
    ///
    /// # Errors
    /// `ENOSYS` (no io_uring in this kernel), `EPERM` (`kernel.io_uring_disabled`, or a seccomp
    /// profile such as Docker's default), `EINVAL` (a kernel too old for provided-buffer rings,
    /// 5.19), `ENOMEM`.
    pub fn new(entries: u32, buffer_count: u16, buffer_size: usize) -> io::Result<Ring> {
        // A single issuer with deferred task work (6.1) batches completions best; older kernels
        // reject the flags with EINVAL, so try again without them.
        let ring = match IoUring::builder()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .build(entries)
        {
            Ok(ring) => ring,
            Err(error) if error.raw_os_error() == Some(libc::EINVAL) => {
                IoUring::builder().build(entries)?
            }
            Err(error) => return Err(error),
        };
        let mut buffers = ProvidedBuffers::new(buffer_count, buffer_size)?;
        // SAFETY: `buffers.entries` is a live, page-aligned allocation of `count` entries that
        // the Ring keeps until after the io_uring is closed (field order and Drop below).
        unsafe {
            ring.submitter().register_buf_ring_with_flags(
                buffers.entries as u64,
                buffer_count,
                BUFFER_GROUP,
                0,
            )?;
        }
        for id in 0..buffer_count {
            buffers.provide(id);
        }
        Ok(Ring {
            ring,
            ops: Vec::new(),
            free: Vec::new(),
            generation: 1,
            buffers,
            reaped: Vec::new(),
        })
    }

    /// Operations submitted and not yet finished.
    #[must_use]
    pub fn in_flight(&self) -> usize {
        self.ops.len() - self.free.len()
    }

    fn insert(&mut self, op: Op) -> u64 {
        let generation = op.generation;
        let index = match self.free.pop() {
            Some(index) => {
                self.ops[index as usize] = Some(op);
                index
            }
            None => {
                self.ops.push(Some(op));
                u32::try_from(self.ops.len() - 1).expect("fewer than 2^32 operations")
            }
        };
        (u64::from(generation) << 32) | u64::from(index)
    }

    fn next_generation(&mut self) -> u32 {
        let generation = self.generation;
        // Generation 0xffff_ffff with index 0xffff_ffff would be CANCEL_USER_DATA: skip it.
        self.generation = self.generation.wrapping_add(1).clamp(1, u32::MAX - 1);
        generation
    }

    /// Queue `entry` for an operation recorded as `op`; returns its id.
    fn start(
        &mut self,
        entry: squeue::Entry,
        tag: Tag,
        kind: Kind,
        memory: Memory,
    ) -> io::Result<OpId> {
        let generation = self.next_generation();
        let user_data = self.insert(Op {
            tag,
            generation,
            kind,
            memory,
        });
        let entry = entry.user_data(user_data);
        if let Err(error) = self.push(&entry) {
            self.remove(user_data);
            return Err(error);
        }
        Ok(OpId(user_data))
    }

    fn push(&mut self, entry: &squeue::Entry) -> io::Result<()> {
        loop {
            // SAFETY: every pointer in `entry` points into memory owned by an `Op` in `self.ops`
            // (iovecs and send buffers) or by `self.buffers`, none of which is freed or moved
            // until the operation's final completion is reaped (or the Ring leaks it on drop).
            let pushed = unsafe { self.ring.submission().push(entry) };
            if pushed.is_ok() {
                return Ok(());
            }
            // The submission queue is full: hand what is queued to the kernel, then retry.
            self.ring.submit()?;
        }
    }

    fn remove(&mut self, user_data: u64) -> Option<Op> {
        let index = (user_data & 0xffff_ffff) as u32;
        let generation = (user_data >> 32) as u32;
        let slot = self.ops.get_mut(index as usize)?;
        if slot.as_ref().is_some_and(|op| op.generation == generation) {
            self.free.push(index);
            return slot.take();
        }
        None
    }

    /// Accept connections on `listener` until cancelled or an error ends it (multishot, 5.19).
    /// Accepted sockets are close-on-exec and nonblocking: the ring's own operations on them
    /// still wait for the socket (the kernel arms a poll: sockets support `NOWAIT`), and a
    /// `sendfile` of the caller's ends when the socket is full instead of holding up its thread.
    ///
    /// # Errors
    /// The submission queue cannot be flushed.
    pub fn accept_multishot(&mut self, listener: BorrowedFd<'_>, tag: Tag) -> io::Result<OpId> {
        let entry = opcode::AcceptMulti::new(types::Fd(listener.as_raw_fd()))
            .flags(libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK)
            .build();
        self.start(entry, tag, Kind::Accept, Memory::None)
    }

    /// Receive from `socket` into provided buffers, one completion per chunk, until end of
    /// stream, an error, running out of buffers (`-ENOBUFS`: arm again), or cancellation (6.0).
    ///
    /// # Errors
    /// The submission queue cannot be flushed.
    pub fn receive_multishot(&mut self, socket: BorrowedFd<'_>, tag: Tag) -> io::Result<OpId> {
        let entry = opcode::RecvMulti::new(types::Fd(socket.as_raw_fd()), BUFFER_GROUP).build();
        self.start(entry, tag, Kind::Receive, Memory::None)
    }

    /// Write `parts` to `socket` in order, as one `writev`; the completion says how many bytes
    /// went and gives the parts back.
    ///
    /// # Errors
    /// `InvalidInput` for no parts or more than `IOV_MAX`; the queue cannot be flushed.
    pub fn send(
        &mut self,
        socket: BorrowedFd<'_>,
        parts: Vec<SendPart>,
        tag: Tag,
    ) -> io::Result<OpId> {
        if parts.is_empty() || parts.len() > crate::io::IOV_MAX {
            return Err(io::ErrorKind::InvalidInput.into());
        }
        let iovecs: Box<[libc::iovec]> = parts
            .iter()
            .map(|part| {
                let bytes = part.bytes();
                libc::iovec {
                    iov_base: bytes.as_ptr().cast_mut().cast::<libc::c_void>(),
                    iov_len: bytes.len(),
                }
            })
            .collect();
        let entry = opcode::Writev::new(
            types::Fd(socket.as_raw_fd()),
            iovecs.as_ptr().cast::<libc::iovec>(),
            iovecs.len() as u32,
        )
        .build();
        self.start(entry, tag, Kind::Send, Memory::Send { parts, iovecs })
    }

    /// Report each time `fd` becomes readable, until cancelled (multishot poll).
    ///
    /// # Errors
    /// The submission queue cannot be flushed.
    pub fn poll_readable(&mut self, fd: BorrowedFd<'_>, tag: Tag) -> io::Result<OpId> {
        let entry = opcode::PollAdd::new(types::Fd(fd.as_raw_fd()), libc::POLLIN as u32)
            .multi(true)
            .build();
        self.start(entry, tag, Kind::Poll, Memory::None)
    }

    /// Report once when `fd` becomes readable (`readable`) or writable (`writable`), or has an
    /// error or hang-up (`IORING_OP_POLL_ADD`, single shot). The completion's `result` is the
    /// ready events, read with [`poll_events`].
    ///
    /// # Errors
    /// The submission queue cannot be flushed.
    pub fn poll_once(
        &mut self,
        fd: BorrowedFd<'_>,
        readable: bool,
        writable: bool,
        tag: Tag,
    ) -> io::Result<OpId> {
        let mut events = 0;
        if readable {
            events |= libc::POLLIN;
        }
        if writable {
            events |= libc::POLLOUT;
        }
        let entry = opcode::PollAdd::new(types::Fd(fd.as_raw_fd()), events as u32).build();
        self.start(entry, tag, Kind::Poll, Memory::None)
    }

    /// Ask the kernel to cancel `op`; its final completion (usually `-ECANCELED`) follows. A
    /// finished operation's id matches nothing.
    ///
    /// # Errors
    /// The submission queue cannot be flushed.
    pub fn cancel(&mut self, op: OpId) -> io::Result<()> {
        let entry = opcode::AsyncCancel::new(op.0)
            .build()
            .user_data(CANCEL_USER_DATA);
        self.push(&entry)
    }

    /// Submit what is queued and wait until at least one completion is ready or `timeout`
    /// passes (`Some(ZERO)`: do not wait).
    ///
    /// # Errors
    /// `EBADF`/`EFAULT` only if the ring is broken.
    pub fn submit_and_wait(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        let result = match timeout {
            Some(Duration::ZERO) => self.ring.submit(),
            Some(timeout) => {
                let timespec = types::Timespec::from(timeout);
                let args = types::SubmitArgs::new().timespec(&timespec);
                self.ring.submitter().submit_with_args(1, &args)
            }
            None => self.ring.submit_and_wait(1),
        };
        match result {
            Ok(_) => Ok(()),
            Err(error)
                if matches!(
                    error.raw_os_error(),
                    Some(libc::ETIME) | Some(libc::EINTR) | Some(libc::EBUSY) | Some(libc::EAGAIN)
                ) =>
            {
                Ok(())
            }
            Err(error) => Err(error),
        }
    }

    /// Move every ready completion into `out`.
    pub fn completions(&mut self, out: &mut Vec<Completion>) {
        let mut reaped = std::mem::take(&mut self.reaped);
        reaped.extend(
            self.ring
                .completion()
                .map(|entry| (entry.user_data(), entry.result(), entry.flags())),
        );
        for (user_data, result, flags) in reaped.drain(..) {
            if user_data == CANCEL_USER_DATA {
                continue;
            }
            let more = cqueue::more(flags);
            let received = cqueue::buffer_select(flags).map(|id| {
                if let Some(lent) = self.buffers.lent.get_mut(usize::from(id)) {
                    *lent = true;
                }
                Received {
                    id,
                    len: usize::try_from(result).unwrap_or(0).min(self.buffers.size),
                }
            });
            let index = (user_data & 0xffff_ffff) as usize;
            let Some(Some(op)) = self.ops.get(index) else {
                continue;
            };
            let (tag, kind) = (op.tag, op.kind);
            let accepted = if kind == Kind::Accept && result >= 0 {
                // SAFETY: a successful accept completion's result is a new descriptor that
                // nothing else owns.
                Some(unsafe { OwnedFd::from_raw_fd(result) })
            } else {
                None
            };
            let mut parts = Vec::new();
            if !more {
                if let Some(Op {
                    memory:
                        Memory::Send {
                            parts: returned, ..
                        },
                    ..
                }) = self.remove(user_data)
                {
                    parts = returned;
                }
            }
            out.push(Completion {
                tag,
                op: OpId(user_data),
                result,
                more,
                accepted,
                received,
                parts,
            });
        }
        self.reaped = reaped;
    }

    /// Hand the received bytes to `sink`, then give the buffer back to the kernel.
    pub fn take_received(&mut self, received: Received, sink: impl FnOnce(&[u8])) {
        let id = received.id;
        let Some(lent) = self.buffers.lent.get_mut(usize::from(id)) else {
            return;
        };
        if !*lent {
            return;
        }
        // SAFETY: buffer `id` was handed out by a completion and not yet provided again, so the
        // kernel is not writing to it; `id` < count and `len` ≤ size keep the slice inside the
        // live `data` allocation.
        let bytes = unsafe {
            std::slice::from_raw_parts(
                self.buffers.data.add(usize::from(id) * self.buffers.size),
                received.len,
            )
        };
        sink(bytes);
        *lent = false;
        self.buffers.provide(id);
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        if self.in_flight() == 0 {
            return;
        }
        // Cancel everything and wait for the kernel to let go of the memory it was lent.
        let entry = opcode::AsyncCancel2::new(types::CancelBuilder::any())
            .build()
            .user_data(CANCEL_USER_DATA);
        let _ = self.push(&entry);
        let deadline = Instant::now() + DRAIN_LIMIT;
        let mut done = Vec::new();
        while self.in_flight() > 0 && Instant::now() < deadline {
            let _ = self.submit_and_wait(Some(Duration::from_millis(50)));
            self.completions(&mut done);
            done.clear();
        }
        if self.in_flight() > 0 {
            // The kernel may still write into the buffers or read the send memory: never free it.
            self.buffers.leak = true;
            std::mem::forget(std::mem::take(&mut self.ops));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::socket::{accept, listen_tcp, local_addr};
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::os::fd::AsFd;

    fn wait_for(ring: &mut Ring, out: &mut Vec<Completion>, tag: Tag) -> Completion {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if let Some(index) = out.iter().position(|completion| completion.tag == tag) {
                return out.remove(index);
            }
            assert!(Instant::now() < deadline, "no completion for tag {tag}");
            ring.submit_and_wait(Some(Duration::from_millis(100)))
                .unwrap();
            ring.completions(out);
        }
    }

    #[test]
    fn accept_receive_send_and_cancel() {
        let mut ring = match Ring::new(64, 8, 4096) {
            Ok(ring) => ring,
            // Kernels or sandboxes without io_uring: nothing to test here (the engine falls back).
            Err(error) => return eprintln!("io_uring unavailable: {error}"),
        };
        let listener = listen_tcp("127.0.0.1:0".parse().unwrap(), false, 16).unwrap();
        crate::socket::set_nonblocking(listener.as_fd(), false).unwrap();
        let addr = local_addr(listener.as_fd()).unwrap();
        let accept_op = ring.accept_multishot(listener.as_fd(), 1).unwrap();
        let mut client = TcpStream::connect(addr).unwrap();
        let mut out = Vec::new();
        let accepted = wait_for(&mut ring, &mut out, 1);
        assert!(accepted.more);
        let socket = accepted.accepted.expect("a connection");

        ring.receive_multishot(socket.as_fd(), 2).unwrap();
        client.write_all(b"hello").unwrap();
        let chunk = wait_for(&mut ring, &mut out, 2);
        assert_eq!(chunk.result, 5);
        let mut got = Vec::new();
        ring.take_received(chunk.received.unwrap(), |bytes| {
            got.extend_from_slice(bytes)
        });
        assert_eq!(got, b"hello");

        let shared: Arc<[u8]> = Arc::from(&b"--shared--"[..]);
        let parts = vec![
            SendPart::Owned(b"head ".to_vec()),
            SendPart::Shared {
                data: shared,
                start: 2,
                end: 8,
            },
        ];
        ring.send(socket.as_fd(), parts, 3).unwrap();
        let sent = wait_for(&mut ring, &mut out, 3);
        assert_eq!(sent.result, 11);
        assert_eq!(sent.parts.len(), 2);
        let mut reply = [0u8; 11];
        client.read_exact(&mut reply).unwrap();
        assert_eq!(&reply, b"head shared");

        // End of stream ends the multishot receive.
        drop(client);
        let end = wait_for(&mut ring, &mut out, 2);
        assert_eq!(end.result, 0);
        assert!(!end.more);

        ring.cancel(accept_op).unwrap();
        let cancelled = wait_for(&mut ring, &mut out, 1);
        assert_eq!(cancelled.result, -libc::ECANCELED);
        assert_eq!(ring.in_flight(), 0);
        // A nonblocking accept on the now idle listener finds nothing.
        crate::socket::set_nonblocking(listener.as_fd(), true).unwrap();
        assert!(accept(listener.as_fd()).is_err());
    }

    #[test]
    fn a_single_poll_reports_writability_then_readability_once_each() {
        let Ok(mut ring) = Ring::new(8, 4, 1024) else {
            return;
        };
        let (left, right) = crate::socket::socket_pair().unwrap();
        let mut out = Vec::new();
        ring.poll_once(left.as_fd(), false, true, 9).unwrap();
        let writable = wait_for(&mut ring, &mut out, 9);
        assert!(!writable.more, "single shot");
        let events = poll_events(writable.result);
        assert!(events.writable && !events.readable);
        ring.poll_once(left.as_fd(), true, false, 10).unwrap();
        ring.submit_and_wait(Some(Duration::from_millis(20)))
            .unwrap();
        ring.completions(&mut out);
        assert!(out.iter().all(|done| done.tag != 10), "nothing to read yet");
        crate::io::write(right.as_fd(), b"x").unwrap();
        let readable = wait_for(&mut ring, &mut out, 10);
        assert!(poll_events(readable.result).readable);
        drop(right);
        ring.poll_once(left.as_fd(), true, false, 11).unwrap();
        let hangup = wait_for(&mut ring, &mut out, 11);
        assert!(poll_events(hangup.result).error_or_hangup);
        assert_eq!(poll_events(-libc::ECANCELED), PollEvents::default());
        assert_eq!(ring.in_flight(), 0);
    }

    #[test]
    fn a_send_to_a_full_accepted_socket_waits_for_room() {
        let Ok(mut ring) = Ring::new(16, 4, 1024) else {
            return;
        };
        let listener = listen_tcp("127.0.0.1:0".parse().unwrap(), false, 16).unwrap();
        crate::socket::set_nonblocking(listener.as_fd(), false).unwrap();
        let addr = local_addr(listener.as_fd()).unwrap();
        ring.accept_multishot(listener.as_fd(), 1).unwrap();
        let mut client = TcpStream::connect(addr).unwrap();
        let mut out = Vec::new();
        let socket = wait_for(&mut ring, &mut out, 1)
            .accepted
            .expect("a connection");
        // Fill the socket: the client reads nothing yet.
        let filler = vec![b'f'; 64 << 10];
        let mut queued = 0;
        while let Ok(sent) = crate::io::send(socket.as_fd(), &filler, libc::MSG_DONTWAIT) {
            queued += sent;
        }
        ring.send(socket.as_fd(), vec![SendPart::Owned(b"tail".to_vec())], 2)
            .unwrap();
        ring.submit_and_wait(Some(Duration::from_millis(50)))
            .unwrap();
        ring.completions(&mut out);
        if let Some(early) = out.iter().find(|done| done.tag == 2) {
            panic!(
                "a send to a full socket completed at once: {}",
                early.result
            );
        }
        let mut drained = vec![0u8; queued];
        client.read_exact(&mut drained).unwrap();
        assert_eq!(wait_for(&mut ring, &mut out, 2).result, 4);
        let mut tail = [0u8; 4];
        client.read_exact(&mut tail).unwrap();
        assert_eq!(&tail, b"tail");
    }

    #[test]
    fn dropping_with_operations_in_flight_cancels_them() {
        let Ok(mut ring) = Ring::new(8, 4, 1024) else {
            return;
        };
        let (left, _right) = crate::socket::socket_pair().unwrap();
        ring.receive_multishot(left.as_fd(), 7).unwrap();
        ring.submit_and_wait(Some(Duration::ZERO)).unwrap();
        assert_eq!(ring.in_flight(), 1);
        drop(ring);
    }
}
