//! The filesystem: a read-only view of the source directory, where a read of a file whose name
//! starts with `slow` is answered `delay` after it arrived.
//!
//! * Open files are kept in the page cache across opens (`FOPEN_KEEP_CACHE`), as on a disk
//!   filesystem: FUSE otherwise drops a file's cache on every open, and no request would ever
//!   be a cache hit.
//! * Entries and attributes are valid for one second, libfuse's default, so a server's lookups
//!   cost the round trips they cost on a libfuse passthrough.
//! * The kernel may keep 256 reads waiting on the device (it allows 12 unless told), so reads
//!   in flight are the server's choice, not the device's.
//!
//! Owns: inode numbers (one per path looked up, kept for the life of the mount: a benchmark's
//! data set, not an unbounded tree) and the open files.
//! Must not touch: the source (read-only).

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::{File, Metadata};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, UNIX_EPOCH};

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo,
    KernelConfig, LockOwner, OpenAccMode, OpenFlags, ReplyAttr, ReplyData, ReplyDirectory,
    ReplyEmpty, ReplyEntry, ReplyOpen, Request,
};

use crate::counts::Counts;
use crate::delayed::DelayedReplies;
use crate::lock;

/// How long the kernel may trust an entry or attributes (libfuse's default).
const TTL: Duration = Duration::from_secs(1);
/// Reads the kernel may keep waiting on the device at once, and where it starts to hold back
/// read-ahead.
const MAX_BACKGROUND: u16 = 256;
const CONGESTION_THRESHOLD: u16 = 192;

#[derive(Default)]
struct Inodes {
    /// Path relative to the source, by inode number - 1 (inode 1 is the root, "").
    paths: Vec<PathBuf>,
    numbers: HashMap<PathBuf, u64>,
}

impl Inodes {
    fn with_root() -> Inodes {
        let mut inodes = Inodes::default();
        inodes.number(PathBuf::new());
        inodes
    }

    fn number(&mut self, path: PathBuf) -> u64 {
        if let Some(&number) = self.numbers.get(&path) {
            return number;
        }
        self.paths.push(path.clone());
        let number = self.paths.len() as u64;
        self.numbers.insert(path, number);
        number
    }

    fn path(&self, number: INodeNo) -> Option<&Path> {
        let index = u64::from(number).checked_sub(1)?;
        self.paths
            .get(usize::try_from(index).ok()?)
            .map(PathBuf::as_path)
    }
}

struct OpenFile {
    file: File,
    slow: bool,
}

pub struct SlowPassthrough {
    source: PathBuf,
    delay: Duration,
    inodes: Mutex<Inodes>,
    open: Mutex<HashMap<u64, Arc<OpenFile>>>,
    next_handle: AtomicU64,
    replies: DelayedReplies,
    counts: Option<Counts>,
}

fn errno(error: &std::io::Error) -> Errno {
    error.raw_os_error().map_or(Errno::EIO, Errno::from_i32)
}

/// Whether reads of the file at `path` wait: files named `slow*`, as in tests/fixtures/slowfs.py.
fn is_slow(path: &Path) -> bool {
    path.file_name()
        .is_some_and(|name| name.as_encoded_bytes().starts_with(b"slow"))
}

fn kind(metadata: &Metadata) -> FileType {
    let kind = metadata.file_type();
    if kind.is_dir() {
        FileType::Directory
    } else if kind.is_symlink() {
        FileType::Symlink
    } else {
        FileType::RegularFile
    }
}

fn attributes(number: u64, metadata: &Metadata) -> FileAttr {
    let time = |seconds: i64, nanos: i64| {
        UNIX_EPOCH
            + Duration::new(
                u64::try_from(seconds).unwrap_or(0),
                u32::try_from(nanos).unwrap_or(0),
            )
    };
    FileAttr {
        ino: INodeNo(number),
        size: metadata.len(),
        blocks: metadata.blocks(),
        atime: time(metadata.atime(), metadata.atime_nsec()),
        mtime: time(metadata.mtime(), metadata.mtime_nsec()),
        ctime: time(metadata.ctime(), metadata.ctime_nsec()),
        crtime: UNIX_EPOCH,
        kind: kind(metadata),
        perm: (metadata.mode() & 0o7777) as u16,
        nlink: u32::try_from(metadata.nlink()).unwrap_or(u32::MAX),
        uid: metadata.uid(),
        gid: metadata.gid(),
        rdev: u32::try_from(metadata.rdev()).unwrap_or(0),
        flags: 0,
        blksize: u32::try_from(metadata.blksize()).unwrap_or(4096),
    }
}

impl SlowPassthrough {
    pub fn new(source: PathBuf, delay: Duration, counts: Option<Counts>) -> SlowPassthrough {
        SlowPassthrough {
            source,
            delay,
            inodes: Mutex::new(Inodes::with_root()),
            open: Mutex::new(HashMap::new()),
            next_handle: AtomicU64::new(1),
            replies: DelayedReplies::start(),
            counts,
        }
    }

    fn count(&self, operation: &str, request: &Request) {
        if let Some(counts) = &self.counts {
            counts.note(operation, request.pid());
        }
    }

    /// The path (relative to the source) of inode `number`.
    fn relative(&self, number: INodeNo) -> Result<PathBuf, Errno> {
        lock(&self.inodes)
            .path(number)
            .map(Path::to_path_buf)
            .ok_or(Errno::ENOENT)
    }

    fn metadata(&self, relative: &Path) -> Result<Metadata, Errno> {
        std::fs::symlink_metadata(self.source.join(relative)).map_err(|error| errno(&error))
    }
}

impl Filesystem for SlowPassthrough {
    fn init(&mut self, _request: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // The kernel caps these at what it allows; whatever it grants is what the device has.
        let _ = config.set_max_background(MAX_BACKGROUND);
        let _ = config.set_congestion_threshold(CONGESTION_THRESHOLD);
        Ok(())
    }

    fn lookup(&self, request: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        self.count("lookup", request);
        let found = self.relative(parent).and_then(|parent| {
            let relative = parent.join(name);
            let metadata = self.metadata(&relative)?;
            let number = lock(&self.inodes).number(relative);
            Ok(attributes(number, &metadata))
        });
        match found {
            Ok(attributes) => reply.entry(&TTL, &attributes, Generation(0)),
            Err(error) => reply.error(error),
        }
    }

    fn getattr(&self, request: &Request, number: INodeNo, _: Option<FileHandle>, reply: ReplyAttr) {
        self.count("getattr", request);
        match self
            .relative(number)
            .and_then(|relative| self.metadata(&relative))
        {
            Ok(metadata) => reply.attr(&TTL, &attributes(number.into(), &metadata)),
            Err(error) => reply.error(error),
        }
    }

    fn open(&self, request: &Request, number: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        self.count("open", request);
        if flags.acc_mode() != OpenAccMode::O_RDONLY {
            reply.error(Errno::EROFS);
            return;
        }
        let opened = self.relative(number).and_then(|relative| {
            let file = File::open(self.source.join(&relative)).map_err(|error| errno(&error))?;
            Ok(OpenFile {
                file,
                slow: is_slow(&relative),
            })
        });
        match opened {
            Ok(file) => {
                let handle = self.next_handle.fetch_add(1, Ordering::Relaxed);
                lock(&self.open).insert(handle, Arc::new(file));
                reply.opened(FileHandle(handle), FopenFlags::FOPEN_KEEP_CACHE);
            }
            Err(error) => reply.error(error),
        }
    }

    fn read(
        &self,
        request: &Request,
        _: INodeNo,
        handle: FileHandle,
        offset: u64,
        size: u32,
        _: OpenFlags,
        _: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let arrived = Instant::now();
        self.count("read", request);
        let Some(file) = lock(&self.open).get(&u64::from(handle)).cloned() else {
            reply.error(Errno::EBADF);
            return;
        };
        let mut data = vec![0; size as usize];
        let mut filled = 0;
        while filled < data.len() {
            match file
                .file
                .read_at(&mut data[filled..], offset + filled as u64)
            {
                Ok(0) => break,
                Ok(read) => filled += read,
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
                Err(error) => {
                    reply.error(errno(&error));
                    return;
                }
            }
        }
        data.truncate(filled);
        if file.slow {
            // Due from arrival: the source's own read is part of the delay, not added to it.
            self.replies.reply_at(arrived + self.delay, reply, data);
        } else {
            reply.data(&data);
        }
    }

    fn release(
        &self,
        request: &Request,
        _: INodeNo,
        handle: FileHandle,
        _: OpenFlags,
        _: Option<LockOwner>,
        _: bool,
        reply: ReplyEmpty,
    ) {
        self.count("release", request);
        lock(&self.open).remove(&u64::from(handle));
        reply.ok();
    }

    fn readdir(
        &self,
        request: &Request,
        number: INodeNo,
        _: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        self.count("readdir", request);
        let listed = self.relative(number).and_then(|relative| {
            let entries = std::fs::read_dir(self.source.join(&relative))
                .and_then(|entries| entries.collect::<std::io::Result<Vec<_>>>())
                .map_err(|error| errno(&error))?;
            Ok((relative, entries))
        });
        let (relative, entries) = match listed {
            Ok(listed) => listed,
            Err(error) => {
                reply.error(error);
                return;
            }
        };
        let mut listing = vec![
            (u64::from(number), FileType::Directory, ".".into()),
            (u64::from(number), FileType::Directory, "..".into()),
        ];
        for entry in entries {
            let Ok(metadata) = entry.metadata() else {
                continue;
            };
            let name = entry.file_name();
            let child = lock(&self.inodes).number(relative.join(&name));
            listing.push((child, kind(&metadata), name));
        }
        let skip = usize::try_from(offset).unwrap_or(usize::MAX);
        for (index, (child, kind, name)) in listing.into_iter().enumerate().skip(skip) {
            // `add` answers true once the kernel's buffer is full; the next call resumes here.
            if reply.add(INodeNo(child), index as u64 + 1, kind, name) {
                break;
            }
        }
        reply.ok();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inode_numbers_are_stable_and_the_root_is_one() {
        let mut inodes = Inodes::with_root();
        assert_eq!(inodes.path(INodeNo(1)), Some(Path::new("")));
        let first = inodes.number(PathBuf::from("ds/slow-1"));
        assert_eq!(first, 2);
        assert_eq!(inodes.number(PathBuf::from("ds/slow-1")), first);
        assert_eq!(inodes.number(PathBuf::from("hot.bin")), 3);
        assert_eq!(inodes.path(INodeNo(2)), Some(Path::new("ds/slow-1")));
        assert_eq!(inodes.path(INodeNo(0)), None);
        assert_eq!(inodes.path(INodeNo(9)), None);
    }

    #[test]
    fn only_files_named_slow_wait() {
        assert!(is_slow(Path::new("ds/slow-0001")));
        assert!(is_slow(Path::new("slow")));
        assert!(!is_slow(Path::new("slow/hot.bin")));
        assert!(!is_slow(Path::new("ds/notslow")));
        assert!(!is_slow(Path::new("")));
    }
}
