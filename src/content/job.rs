//! The work that can block on disk (or burn CPU for long: password hashes), as plain data: what
//! Flash's helpers did (§4.2, §5).
//!
//! Owns: `Job` (what to do), `JobDone` (what came of it) and `run`, the blocking work itself
//! (and compressing a static file, CPU work an event loop must not do either).
//! Must not touch: threads or queues — engines decide who runs a job and where (inline under
//! `sped`, on a helper thread under `amped` and `reactor`).

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::sync::{Arc, OnceLock};

use ampd_sys::inotify::Inotify;
use ampd_sys::io as sysio;

use super::compressed::{self, Compressed};
use super::file::{FileKey, OpenFile, Resolved};
use super::path::CleanPath;
use super::resolve::{self, Basis, DocRoot, Revalidated};
use crate::response::compress::Encoding;

#[derive(Debug)]
pub enum Job {
    /// Path translation on a path-cache miss: open, fstat, index files, siblings. With the
    /// translation that aged out of the cache (`previous`), first a check by `stat` that it
    /// still holds (`resolve::revalidate`).
    Resolve {
        root: Arc<DocRoot>,
        path: CleanPath,
        watcher: Option<Arc<Inotify>>,
        previous: Option<Arc<Resolved>>,
    },
    /// Read a small file into memory for the file cache.
    Load { file: Arc<OpenFile> },
    /// Compress a static file for the compressed cache: read it whole (unless the file cache
    /// had it: `plain`) and compress it, milliseconds of CPU per 100 KiB, which an event loop
    /// never spends itself.
    Compress {
        file: Arc<OpenFile>,
        plain: Option<Arc<[u8]>>,
        encoding: Encoding,
        level: u32,
    },
    /// Bring a range of a large file into the page cache so that the event loop's `sendfile`
    /// will not block (Flash §5.4: the helper touches the pages, the loop sends). With
    /// `send_to` (the connection's socket, non-blocking), the helper sends the range itself
    /// and pages in only what the socket did not take (`send_or_touch`).
    PageIn {
        file: Arc<OpenFile>,
        offset: u64,
        len: u64,
        send_to: Option<OwnedFd>,
    },
    /// Check a password against a bcrypt or argon2 hash: milliseconds of CPU by design, so it
    /// is work for a helper, like a disk read. `verify` is supplied by the caller (`site`), so
    /// this module stays free of password schemes.
    Verify {
        password: Box<[u8]>,
        hash: Arc<str>,
        verify: fn(&[u8], &str) -> bool,
    },
    /// Jobs of several streams of one HTTP/2 connection, done one after another by one helper
    /// and answered together (`JobDone::Batch`, in the same order). An engine has one job out
    /// per connection; a page's requests often need work together (their translations
    /// re-checked once a second), and one at a time each would wait for the others' round
    /// trips through the helper queue. Never holds a page-in (the engine's own, per
    /// connection) or another batch.
    Batch(Vec<Job>),
}

impl Job {
    /// Whether the job is path translation only (a translation, or a batch of them): work for
    /// the translators' lane, never queued behind reads (`engine::helpers`).
    #[must_use]
    pub fn is_translation(&self) -> bool {
        match self {
            Job::Resolve { .. } => true,
            Job::Batch(jobs) => jobs.iter().all(Job::is_translation),
            _ => false,
        }
    }

    /// Whether doing the job again, after an attempt that may have been cut short, is safe: all
    /// but a page-in that sends on the connection (part of its range may have gone out).
    #[must_use]
    pub fn repeatable(&self) -> bool {
        match self {
            Job::PageIn {
                send_to: Some(_), ..
            } => false,
            Job::Batch(jobs) => jobs.iter().all(Job::repeatable),
            _ => true,
        }
    }
}

#[derive(Debug)]
pub enum JobDone {
    Resolved(Resolved),
    Loaded {
        file: Arc<OpenFile>,
        data: io::Result<Arc<[u8]>>,
    },
    /// The range of the file `key` names is resident up to `end` (unless evicted since), and
    /// its first `sent` bytes went out on the connection's socket.
    PagedIn {
        key: FileKey,
        end: u64,
        sent: u64,
    },
    /// Whether the password matched.
    Verified(bool),
    Compressed(Compressed),
    /// A `Job::Batch`'s results, in its order.
    Batch(Vec<JobDone>),
}

impl JobDone {
    /// What a page-in of `len` bytes of `file` from `offset` reports, `sent` of them sent.
    #[must_use]
    pub fn paged_in(file: &OpenFile, offset: u64, len: u64, sent: u64) -> JobDone {
        JobDone::PagedIn {
            key: file.key,
            end: offset.saturating_add(len),
            sent,
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
            previous,
        } => {
            let watcher = watcher.as_deref();
            let kept = previous.as_deref().and_then(|previous| {
                let basis = Basis::of(previous, &path)?;
                match resolve::revalidate(&root, &path, watcher, &basis) {
                    Revalidated::Unchanged { watch } => Some(previous.renewed(watch)),
                    Revalidated::Changed => None,
                }
            });
            JobDone::Resolved(kept.unwrap_or_else(|| resolve::resolve(&root, &path, watcher)))
        }
        Job::Load { file } => {
            let data = read_whole(&file);
            JobDone::Loaded { file, data }
        }
        Job::Compress {
            file,
            plain,
            encoding,
            level,
        } => JobDone::Compressed(compress_file(&file, plain, encoding, level)),
        Job::PageIn {
            file,
            offset,
            len,
            send_to,
        } => {
            let sent = page_in(&file.file, offset, len, send_to.as_ref());
            JobDone::paged_in(&file, offset, len, sent)
        }
        Job::Verify {
            password,
            hash,
            verify,
        } => JobDone::Verified(verify(&password, &hash)),
        Job::Batch(jobs) => JobDone::Batch(jobs.into_iter().map(run).collect()),
    }
}

/// `file` (or `plain`, its bytes already in memory) compressed with `encoding` at `level`; no
/// body when it could not be read whole or compressed (the response then goes out plain).
#[must_use]
pub fn compress_file(
    file: &OpenFile,
    plain: Option<Arc<[u8]>>,
    encoding: Encoding,
    level: u32,
) -> Compressed {
    let plain = plain.map_or_else(|| read_whole(file), Ok);
    let data = plain
        .and_then(|plain| compressed::compress(&plain, encoding, level))
        .ok();
    Compressed {
        file: file.key,
        encoding,
        level,
        data,
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

/// Bring `len` bytes of `file` from `offset` into the page cache, waiting for the reads (Flash
/// §5.4: the helper touches the pages, the loop sends them), up to the end of the file. A read
/// error is not reported: the `sendfile` that follows meets it and ends the connection.
///
/// The range goes by `sendfile` to /dev/null: the kernel reads the pages in (and waits for
/// them) without copying the data anywhere, so a helper needs no buffer and spends no CPU on a
/// copy (a 64 KiB read buffer per helper would stay in each thread's malloc arena;
/// docs/research/architectures.md, "The loop does not wait for reads in flight").
/// Where the file or /dev/null cannot do that, a plain read into a buffer does the same.
pub fn touch(file: &File, offset: u64, len: u64) {
    let end = offset.saturating_add(len);
    let mut position = offset;
    if let Some(null) = dev_null() {
        match send_until(null.as_fd(), file, &mut position, end) {
            // EINVAL: this pair of descriptors cannot splice; read instead.
            Some(error) if error.kind() == io::ErrorKind::InvalidInput => {}
            _ => return,
        }
    }
    let mut scratch = vec![0u8; 64 << 10];
    while position < end {
        let want =
            usize::try_from((end - position).min(scratch.len() as u64)).unwrap_or(scratch.len());
        match file.read_at(&mut scratch[..want], position) {
            Ok(0) | Err(_) => return,
            Ok(n) => position += n as u64,
        }
    }
}

/// `sendfile` from `file` to `out` from `*position` until `end`, the end of the file, or an
/// error, which it returns; `*position` ends where the sending stopped.
fn send_until(
    out: std::os::fd::BorrowedFd<'_>,
    file: &File,
    position: &mut u64,
    end: u64,
) -> Option<io::Error> {
    while *position < end {
        let want = usize::try_from(end - *position).unwrap_or(usize::MAX);
        match sysio::sendfile(out, file.as_fd(), position, want) {
            Ok(0) => return None,
            Ok(_) => {}
            Err(error) => return Some(error),
        }
    }
    None
}

/// A page-in job's work, in a helper thread or a helper process: send the range on the
/// connection's socket when there is one (`send_or_touch`), else touch it. Returns the bytes
/// sent.
pub fn page_in(file: &File, offset: u64, len: u64, send_to: Option<&OwnedFd>) -> u64 {
    match send_to {
        Some(socket) => send_or_touch(socket, file, offset, len),
        None => {
            touch(file, offset, len);
            0
        }
    }
}

/// Send `len` bytes of `file` from `offset` on the non-blocking `socket` as far as it takes
/// them, the reads waited for here (sendfile blocks on the disk, never on the socket); then
/// page in what the socket did not take, for the loop to send. Returns the bytes sent.
///
/// Why the helper sends: a page-in followed by the loop's send reads every page twice, and
/// the second access moves it to the active list (`folio_mark_accessed`), so under memory
/// pressure reclaim scans twice the pages (pgactivate 25 per 100 KiB request against 5 for
/// `mt`, docs/research/architectures.md "Helper threads send what they read"). nginx does the same with
/// `aio threads`: its `sendfile` runs in the thread pool.
///
/// An error or a file shorter than its head said stops it: the loop's own `sendfile` meets
/// the same condition and ends the connection.
pub fn send_or_touch(socket: &OwnedFd, file: &File, offset: u64, len: u64) -> u64 {
    let end = offset.saturating_add(len);
    let mut position = offset;
    if let Some(error) = send_until(socket.as_fd(), file, &mut position, end) {
        if error.kind() == io::ErrorKind::WouldBlock {
            touch(file, position, end - position);
        }
    }
    position - offset
}

/// /dev/null, opened once per process; `None` where it cannot be opened (a chroot without it).
fn dev_null() -> Option<&'static File> {
    static NULL: OnceLock<Option<File>> = OnceLock::new();
    NULL.get_or_init(|| File::options().write(true).open("/dev/null").ok())
        .as_ref()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn temp_file(bytes: usize) -> (std::path::PathBuf, File) {
        let path = std::env::temp_dir().join(format!(
            "ampd-touch-{}-{bytes}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let mut file = File::create(&path).unwrap();
        file.write_all(&vec![7u8; bytes]).unwrap();
        file.sync_all().unwrap();
        drop(file);
        (path.clone(), File::open(&path).unwrap())
    }

    #[test]
    fn a_batch_is_done_job_by_job_and_answered_in_its_order() {
        fn matches_open(password: &[u8], hash: &str) -> bool {
            password == hash.as_bytes()
        }
        let verify = |password: &str| Job::Verify {
            password: password.as_bytes().into(),
            hash: "open".into(),
            verify: matches_open,
        };
        let batch = Job::Batch(vec![verify("open"), verify("shut"), verify("open")]);
        assert!(batch.repeatable());
        let JobDone::Batch(dones) = run(batch) else {
            panic!("a batch is answered by a batch");
        };
        let matched: Vec<bool> = dones
            .iter()
            .map(|done| matches!(done, JobDone::Verified(true)))
            .collect();
        assert_eq!(matched, [true, false, true]);
    }

    #[test]
    fn touch_ends_at_the_end_of_the_file() {
        use ampd_sys::file::{cachestat, fadvise, Advice};
        let (path, file) = temp_file(100 << 10);
        let pages = (100 << 10) / ampd_sys::file::page_size() as u64;
        let cached = |file: &File| cachestat(file.as_fd(), 0, 0).map(|stat| stat.cached_pages);
        // Written back, then dropped from the page cache (a no-op on tmpfs, where the pages are
        // the file: the assertions below hold there too).
        fadvise(file.as_fd(), 0, 0, Advice::DontNeed).unwrap();
        touch(&file, 4096, 8192);
        if let Ok(count) = cached(&file) {
            assert!(count >= 2, "the range touched is resident: {count} pages");
        }
        // The rest of the file, with a range reaching past its end, and one wholly past it.
        touch(&file, 0, 1 << 20);
        touch(&file, 1 << 20, 4096);
        if let Ok(count) = cached(&file) {
            assert_eq!(count, pages, "every page is resident");
        }
        std::fs::remove_file(path).unwrap();
    }

    /// A non-blocking socket pair: its buffers (a few hundred KiB) fill long before 8 MiB.
    fn small_socket_pair() -> (OwnedFd, std::os::unix::net::UnixStream) {
        let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        ours.set_nonblocking(true).unwrap();
        (OwnedFd::from(ours), theirs)
    }

    fn received(peer: &mut std::os::unix::net::UnixStream) -> Vec<u8> {
        use std::io::Read;
        peer.set_nonblocking(true).unwrap();
        let mut bytes = Vec::new();
        let mut chunk = [0u8; 64 << 10];
        loop {
            match peer.read(&mut chunk) {
                Ok(0) => return bytes,
                Ok(count) => bytes.extend_from_slice(&chunk[..count]),
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => return bytes,
                Err(error) => panic!("read: {error}"),
            }
        }
    }

    #[test]
    fn send_or_touch_sends_a_range_the_socket_takes() {
        let (path, file) = temp_file(100 << 10);
        let (socket, mut peer) = small_socket_pair();
        let sent = send_or_touch(&socket, &file, 1000, 20_000);
        assert_eq!(sent, 20_000);
        assert_eq!(received(&mut peer), vec![7u8; 20_000]);
        // A range past the end of the file sends what there is, and stops.
        let sent = send_or_touch(&socket, &file, (100 << 10) - 10, 4096);
        assert_eq!(sent, 10);
        assert_eq!(received(&mut peer).len(), 10);
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn send_or_touch_pages_in_what_a_full_socket_did_not_take() {
        use ampd_sys::file::{cachestat, fadvise, Advice};
        let size = 8 << 20;
        let (path, file) = temp_file(size);
        fadvise(file.as_fd(), 0, 0, Advice::DontNeed).unwrap();
        let (socket, mut peer) = small_socket_pair();
        let sent = send_or_touch(&socket, &file, 0, size as u64);
        assert!(sent > 0 && sent < size as u64, "the socket filled: {sent}");
        if let Ok(stat) = cachestat(file.as_fd(), sent, 0) {
            let pages = (size as u64 - sent) / ampd_sys::file::page_size() as u64;
            assert!(stat.cached_pages >= pages, "the rest is resident: {stat:?}");
        }
        // The bytes that went out are the file's first `sent`, and the socket still works.
        let bytes = received(&mut peer);
        assert_eq!(bytes.len() as u64, sent);
        assert!(bytes.iter().all(|&byte| byte == 7));
        // A peer that is gone ends it without sending (EPIPE), and without a signal. Shut
        // down, not only dropped: a child another test forks at this moment holds the peer's
        // descriptor until it execs, and the socket stays open while any descriptor does.
        peer.shutdown(std::net::Shutdown::Both).unwrap();
        drop(peer);
        assert_eq!(send_or_touch(&socket, &file, sent, 4096), 0);
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn touch_falls_back_to_reading_where_sendfile_cannot_splice() {
        // A pipe is not seekable: sendfile with an offset fails at once, and so does the
        // fallback read; what matters is that neither spins.
        let (reader, writer) = std::io::pipe().unwrap();
        drop(writer);
        let file = File::from(std::os::fd::OwnedFd::from(reader));
        touch(&file, 0, 1 << 20);
    }
}
