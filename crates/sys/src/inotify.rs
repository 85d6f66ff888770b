//! inotify(7): change notification that invalidates the path and file caches early (the caches
//! still validate (dev, ino, size, mtime), so a lost event costs freshness, never correctness).
//!
//! Owns: the inotify descriptor, watches and decoding the event stream. Must not touch: which
//! cache entries an event invalidates.

use std::ffi::{CString, OsString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;

use crate::cvt::{cvt, cvt_retry, to_usize};

pub const IN_MODIFY: u32 = libc::IN_MODIFY;
pub const IN_ATTRIB: u32 = libc::IN_ATTRIB;
pub const IN_CLOSE_WRITE: u32 = libc::IN_CLOSE_WRITE;
pub const IN_MOVED_FROM: u32 = libc::IN_MOVED_FROM;
pub const IN_MOVED_TO: u32 = libc::IN_MOVED_TO;
pub const IN_CREATE: u32 = libc::IN_CREATE;
pub const IN_DELETE: u32 = libc::IN_DELETE;
pub const IN_DELETE_SELF: u32 = libc::IN_DELETE_SELF;
pub const IN_MOVE_SELF: u32 = libc::IN_MOVE_SELF;
pub const IN_Q_OVERFLOW: u32 = libc::IN_Q_OVERFLOW;
pub const IN_IGNORED: u32 = libc::IN_IGNORED;
pub const IN_ONLYDIR: u32 = libc::IN_ONLYDIR;
pub const IN_ISDIR: u32 = libc::IN_ISDIR;
/// Everything that can make a cached file or listing stale.
pub const IN_CONTENT_CHANGES: u32 = IN_MODIFY
    | IN_ATTRIB
    | IN_CLOSE_WRITE
    | IN_MOVED_FROM
    | IN_MOVED_TO
    | IN_CREATE
    | IN_DELETE
    | IN_DELETE_SELF
    | IN_MOVE_SELF;

/// Size of the fixed part of `struct inotify_event`.
const HEADER: usize = 16;

/// One decoded event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InotifyEvent {
    pub wd: i32,
    pub mask: u32,
    /// Pairs `IN_MOVED_FROM` with its `IN_MOVED_TO`.
    pub cookie: u32,
    /// The name inside a watched directory, `None` for events on the watched object itself.
    pub name: Option<OsString>,
}

/// A non-blocking, close-on-exec inotify instance.
#[derive(Debug)]
pub struct Inotify(OwnedFd);

impl Inotify {
    /// # Errors
    /// `EMFILE` (per-user instance limit), `ENOMEM`.
    pub fn new() -> io::Result<Inotify> {
        // SAFETY: inotify_init1 takes no pointers; a non-negative result is a fresh descriptor.
        let fd = cvt(unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) })?;
        // SAFETY: `fd` was just created and is owned by nobody else.
        Ok(Inotify(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Watches `path` for the events in `mask`; returns the watch descriptor the events carry.
    /// Watching the same path again returns the same descriptor with the mask replaced.
    ///
    /// # Errors
    /// `ENOENT`, `EACCES`, `ENOSPC` (the `max_user_watches` limit), `ENOTDIR` with `IN_ONLYDIR`.
    pub fn add_watch(&self, path: &Path, mask: u32) -> io::Result<i32> {
        let name = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))?;
        // SAFETY: `name` is NUL-terminated and lives for the call; the descriptor is open.
        cvt(unsafe { libc::inotify_add_watch(self.0.as_raw_fd(), name.as_ptr(), mask) })
    }

    /// Removes a watch (the kernel then queues `IN_IGNORED` for it).
    ///
    /// # Errors
    /// `EINVAL` for an unknown watch descriptor.
    pub fn remove_watch(&self, wd: i32) -> io::Result<()> {
        // SAFETY: inotify_rm_watch takes no pointers; the descriptor is open.
        cvt(unsafe { libc::inotify_rm_watch(self.0.as_raw_fd(), wd) })?;
        Ok(())
    }

    /// Reads the queued events into `buf` and decodes them; an empty queue gives an empty vector.
    /// `buf` should hold at least `16 + NAME_MAX + 1` bytes, or reads fail with `EINVAL`.
    ///
    /// # Errors
    /// `EINVAL` when `buf` is too small for the next event.
    pub fn read_events(&self, buf: &mut [u8]) -> io::Result<Vec<InotifyEvent>> {
        // SAFETY: `buf` is live and writable for buf.len() bytes.
        let result = cvt_retry(|| unsafe {
            libc::read(
                self.0.as_raw_fd(),
                buf.as_mut_ptr().cast::<libc::c_void>(),
                buf.len(),
            )
        });
        match result {
            Ok(filled) => Ok(decode(&buf[..to_usize(filled).min(buf.len())])),
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => Ok(Vec::new()),
            Err(error) => Err(error),
        }
    }
}

/// Decodes `struct inotify_event` records: i32 wd, u32 mask, u32 cookie, u32 len, name[len].
fn decode(mut bytes: &[u8]) -> Vec<InotifyEvent> {
    let field = |bytes: &[u8], at: usize| {
        u32::from_ne_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
    };
    let mut events = Vec::new();
    while bytes.len() >= HEADER {
        let name_len = field(bytes, 12) as usize;
        let Some(record) = bytes.get(..HEADER + name_len) else {
            break;
        };
        let name_field = &record[HEADER..];
        let name_end = name_field
            .iter()
            .position(|&byte| byte == 0)
            .unwrap_or(name_field.len());
        events.push(InotifyEvent {
            wd: i32::from_ne_bytes(field(bytes, 0).to_ne_bytes()),
            mask: field(bytes, 4),
            cookie: field(bytes, 8),
            name: (name_end > 0).then(|| OsString::from_vec(name_field[..name_end].to_vec())),
        });
        bytes = &bytes[HEADER + name_len..];
    }
    events
}

/// An inotify instance received from another process (`SCM_RIGHTS`): watches added through it
/// belong to the sender's instance, so their watch descriptors mean the same on both sides. A
/// descriptor that is not an inotify instance makes every call fail (`EINVAL`), nothing worse.
impl From<OwnedFd> for Inotify {
    fn from(fd: OwnedFd) -> Inotify {
        Inotify(fd)
    }
}

impl AsFd for Inotify {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::TempDir;
    use std::time::{Duration, Instant};

    fn collect_until(
        inotify: &Inotify,
        done: impl Fn(&[InotifyEvent]) -> bool,
    ) -> Vec<InotifyEvent> {
        let mut buf = vec![0u8; 4096];
        let mut seen = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(5);
        while !done(&seen) {
            assert!(Instant::now() < deadline, "events so far: {seen:?}");
            let batch = inotify.read_events(&mut buf).unwrap();
            if batch.is_empty() {
                std::thread::sleep(Duration::from_millis(5));
            }
            seen.extend(batch);
        }
        seen
    }

    #[test]
    fn sees_a_write_in_a_watched_directory() {
        let dir = TempDir::new("inotify");
        let inotify = Inotify::new().unwrap();
        let mut buf = vec![0u8; 4096];
        assert!(inotify.read_events(&mut buf).unwrap().is_empty());
        let wd = inotify
            .add_watch(dir.path(), IN_CONTENT_CHANGES | IN_ONLYDIR)
            .unwrap();
        std::fs::write(dir.path().join("page.html"), b"v2").unwrap();
        let events = collect_until(&inotify, |seen| {
            seen.iter().any(|event| event.mask & IN_CLOSE_WRITE != 0)
        });
        let write = events
            .iter()
            .find(|event| event.mask & IN_CLOSE_WRITE != 0)
            .unwrap();
        assert_eq!(write.wd, wd);
        assert_eq!(
            write.name.as_deref(),
            Some(std::ffi::OsStr::new("page.html"))
        );

        inotify.remove_watch(wd).unwrap();
        let events = collect_until(&inotify, |seen| {
            seen.iter().any(|event| event.mask & IN_IGNORED != 0)
        });
        assert!(events.iter().all(|event| event.wd == wd));
    }

    #[test]
    fn onlydir_refuses_a_file() {
        let dir = TempDir::new("inotify-file");
        let file = dir.path().join("f");
        std::fs::write(&file, b"x").unwrap();
        let inotify = Inotify::new().unwrap();
        let error = inotify
            .add_watch(&file, IN_MODIFY | IN_ONLYDIR)
            .unwrap_err();
        assert_eq!(error.raw_os_error(), Some(libc::ENOTDIR));
    }

    #[test]
    fn decode_handles_names_padding_and_truncation() {
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&5i32.to_ne_bytes());
        bytes.extend_from_slice(&IN_CREATE.to_ne_bytes());
        bytes.extend_from_slice(&0u32.to_ne_bytes());
        bytes.extend_from_slice(&8u32.to_ne_bytes());
        bytes.extend_from_slice(b"a.txt\0\0\0");
        bytes.extend_from_slice(&5i32.to_ne_bytes());
        bytes.extend_from_slice(&IN_DELETE_SELF.to_ne_bytes());
        bytes.extend_from_slice(&0u32.to_ne_bytes());
        bytes.extend_from_slice(&0u32.to_ne_bytes());
        let events = decode(&bytes);
        assert_eq!(events.len(), 2);
        assert_eq!(
            events[0].name.as_deref(),
            Some(std::ffi::OsStr::new("a.txt"))
        );
        assert_eq!(
            (events[1].mask, events[1].name.clone()),
            (IN_DELETE_SELF, None)
        );
        assert_eq!(decode(&bytes[..20]).len(), 0);
    }
}
