//! The work that can block on disk (or burn CPU for long: password hashes), as plain data: what
//! Flash's helpers did (§4.2, §5).
//!
//! Owns: `Job` (what to do), `JobDone` (what came of it) and `run`, the blocking work itself.
//! Must not touch: threads or queues — engines decide who runs a job and where (inline under
//! `sped`, on a helper thread under `amped` and `reactor`).

use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use ampd_sys::inotify::Inotify;

use super::file::{FileKey, OpenFile, Resolved};
use super::path::CleanPath;
use super::resolve::{self, DocRoot};

#[derive(Debug)]
pub enum Job {
    /// Path translation on a path-cache miss: open, fstat, index files, siblings.
    Resolve {
        root: Arc<DocRoot>,
        path: CleanPath,
        watcher: Option<Arc<Inotify>>,
    },
    /// Read a small file into memory for the file cache.
    Load { file: Arc<OpenFile> },
    /// Bring a range of a large file into the page cache so that the event loop's `sendfile`
    /// will not block (Flash §5.4: the helper touches the pages, the loop sends).
    PageIn {
        file: Arc<OpenFile>,
        offset: u64,
        len: u64,
    },
    /// Check a password against a bcrypt or argon2 hash: milliseconds of CPU by design, so it
    /// is work for a helper, like a disk read. `verify` is supplied by the caller (`site`), so
    /// this module stays free of password schemes.
    Verify {
        password: Box<[u8]>,
        hash: Arc<str>,
        verify: fn(&[u8], &str) -> bool,
    },
}

#[derive(Debug)]
pub enum JobDone {
    Resolved(Resolved),
    Loaded {
        file: Arc<OpenFile>,
        data: io::Result<Arc<[u8]>>,
    },
    /// The range of the file `key` names is resident up to `end` (unless evicted since).
    PagedIn {
        key: FileKey,
        end: u64,
    },
    /// Whether the password matched.
    Verified(bool),
}

impl JobDone {
    /// What a page-in of `len` bytes of `file` from `offset` reports.
    #[must_use]
    pub fn paged_in(file: &OpenFile, offset: u64, len: u64) -> JobDone {
        JobDone::PagedIn {
            key: file.key,
            end: offset.saturating_add(len),
        }
    }
}

/// Do the job, blocking as long as the disk takes.
#[must_use]
pub fn run(job: Job) -> JobDone {
    match job {
        Job::Resolve {
            root,
            path,
            watcher,
        } => JobDone::Resolved(resolve::resolve(&root, &path, watcher.as_deref())),
        Job::Load { file } => {
            let data = read_whole(&file);
            JobDone::Loaded { file, data }
        }
        Job::PageIn { file, offset, len } => {
            page_in(&file, offset, len);
            JobDone::paged_in(&file, offset, len)
        }
        Job::Verify {
            password,
            hash,
            verify,
        } => JobDone::Verified(verify(&password, &hash)),
    }
}

/// Read exactly the size recorded at open time. A file that shrank since is an error (the
/// caller then answers from disk afresh rather than caching a torn copy).
///
/// # Errors
/// I/O errors, or `UnexpectedEof` when the file is shorter than its recorded size.
pub fn read_whole(file: &OpenFile) -> io::Result<Arc<[u8]>> {
    let size =
        usize::try_from(file.size()).map_err(|_| io::Error::from(io::ErrorKind::OutOfMemory))?;
    let mut data = vec![0u8; size];
    file.file.read_exact_at(&mut data, 0)?;
    Ok(Arc::from(data))
}

fn page_in(file: &OpenFile, offset: u64, len: u64) {
    // Reading the range is what guarantees residency; the data itself is thrown away. A read
    // error is not reported here: the following sendfile meets it and closes the connection.
    let mut scratch = vec![0u8; 64 << 10];
    let end = offset.saturating_add(len).min(file.size());
    let mut position = offset;
    while position < end {
        let want =
            usize::try_from((end - position).min(scratch.len() as u64)).unwrap_or(scratch.len());
        match file.file.read_at(&mut scratch[..want], position) {
            Ok(0) | Err(_) => break,
            Ok(n) => position += n as u64,
        }
    }
}
