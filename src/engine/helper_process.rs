//! Helpers as processes (`--helpers-mode process`), as Flash ran them: the server starts copies
//! of itself (`ampd __helper`) and hands each the disk work a helper thread would do, one job at
//! a time, over a Unix socket.
//!
//! A descriptor opened in one process means nothing in another, so: a path translation's files
//! are opened in the helper and passed back with `SCM_RIGHTS` (the translation is not redone);
//! the files of a load or page-in go to the helper the same way. File data itself comes back
//! through the page cache, which processes share (Flash's helpers likewise only made pages
//! resident): after a helper has read a small file, the server's own read of it cannot block.
//! The cost over threads is a `sendmsg`/`recvmsg` pair and descriptor duplication per job,
//! paid on cache misses only.
//!
//! Owns: starting and stopping helper processes, the wire format, and the helper's own loop.
//! Must not touch: what a job does (`content::job`), the queue in front of helpers (`helpers`).

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ampd_http::coding::Coding;
use ampd_sys::inotify::Inotify;
use ampd_sys::{child, socket, unix};

use crate::config::StaticOptions;
use crate::content::compressed::Compressed;
use crate::content::file::{
    FileKey, Negotiated, OpenFile, Representation, Resolution, Resolved, StaticFile, VariantSet,
    VaryFields,
};
use crate::content::job::{self, Job, JobDone};
use crate::content::path::CleanPath;
use crate::content::resolve::{self, Basis, DocRoot, Revalidated};
use crate::mime::{self, TypeOptions, TypeTable};

/// The hidden subcommand a helper process runs.
pub const SUBCOMMAND: &str = "__helper";
/// Largest frame either side accepts (a directory listing is the biggest payload).
const MAX_FRAME: usize = 64 << 20;
/// How long a helper that was told to stop may take before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(1);

/// Why a helper process did not answer a job.
#[derive(Debug)]
pub enum Failure {
    /// It died or answered nonsense: it is replaced.
    Lost(io::Error),
    /// This process had no descriptor left for the files it passed back (`MSG_CTRUNC`): the
    /// helper is fine and stays.
    OutOfDescriptors,
}

/// The server's end of one helper process.
pub struct HelperProcess {
    child: Child,
    socket: OwnedFd,
    /// The id of the type table this process was last sent (0: the empty one it starts with):
    /// a configuration's table crosses once, then only its id.
    sent_types: u64,
}

impl HelperProcess {
    /// Start `ampd __helper` with one end of a socket pair as its standard input.
    ///
    /// # Errors
    /// The socket pair, or the process, cannot be created.
    pub fn spawn() -> io::Result<HelperProcess> {
        let (ours, theirs) = socket::socket_pair()?;
        socket::set_nonblocking(ours.as_fd(), false)?;
        socket::set_nonblocking(theirs.as_fd(), false)?;
        let mut command = Command::new(std::env::current_exe()?);
        child::reset_signals(&mut command, crate::ops::signals::handled());
        let child = command
            .arg(SUBCOMMAND)
            .stdin(Stdio::from(theirs))
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()?;
        Ok(HelperProcess {
            child,
            socket: ours,
            sent_types: 0,
        })
    }

    /// Have the helper process do `job`; blocks the calling (helper) thread until it answers.
    ///
    /// # Errors
    /// `Failure::Lost`: the helper died or answered nonsense; the caller replaces it.
    /// `Failure::OutOfDescriptors`: its answer's files could not be received.
    pub fn run(&mut self, job: &Job) -> Result<JobDone, Failure> {
        // A password check is CPU work whose checking function cannot cross to another
        // process: it is done here, by the helper thread.
        if let Job::Verify {
            password,
            hash,
            verify,
        } = job
        {
            return Ok(JobDone::Verified(verify(password, hash)));
        }
        // Compression is CPU work too, and its answer is bytes, not descriptors: the helper
        // thread does it, reading the file through the descriptor the job holds.
        if let Job::Compress {
            file,
            plain,
            encoding,
            level,
        } = job
        {
            return Ok(JobDone::Compressed(job::compress_file(
                file,
                plain.clone(),
                *encoding,
                *level,
            )));
        }
        // Each job of a batch crosses on its own: the wire format stays one job per frame.
        if let Job::Batch(jobs) = job {
            return jobs
                .iter()
                .map(|job| self.run(job))
                .collect::<Result<_, _>>()
                .map(JobDone::Batch);
        }
        let mut frame = Vec::with_capacity(256);
        let fds = encode_job(job, &mut frame, &mut self.sent_types);
        send_frame(self.socket.as_fd(), &frame, &fds).map_err(Failure::Lost)?;
        let mut received = Vec::new();
        let reply = receive_frame(self.socket.as_fd(), &mut received)
            .map_err(Failure::Lost)?
            .ok_or_else(|| {
                Failure::Lost(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "helper process exited",
                ))
            })?;
        if reply.cut_off {
            // This process is out of descriptors; the helper is fine and in step.
            return Err(Failure::OutOfDescriptors);
        }
        decode_reply(job, &reply.payload, received).ok_or_else(|| {
            Failure::Lost(io::Error::new(
                io::ErrorKind::InvalidData,
                "malformed helper reply",
            ))
        })
    }

    /// The answer a job gets when this process had no descriptor left for what the helper
    /// passed back (or to start a helper): a translation is `Exhausted` (tried again after the
    /// caches let go of files, then `503`); other jobs as `failed`.
    #[must_use]
    pub fn exhausted(job: Job) -> JobDone {
        match job {
            Job::Resolve { .. } => JobDone::Resolved(Resolved {
                resolution: Resolution::Exhausted,
                watch: None,
                at: Instant::now(),
            }),
            Job::Batch(jobs) => {
                JobDone::Batch(jobs.into_iter().map(HelperProcess::exhausted).collect())
            }
            other => HelperProcess::failed(other),
        }
    }

    /// The answer a job gets when its helper process could not take it: the request is
    /// answered `500` (resolve), from the descriptor (load), or by the loop's `sendfile`, which
    /// may block (page-in).
    #[must_use]
    pub fn failed(job: Job) -> JobDone {
        match job {
            Job::Resolve { .. } => JobDone::Resolved(Resolved {
                resolution: Resolution::Failed,
                watch: None,
                at: Instant::now(),
            }),
            Job::Load { file } => JobDone::Loaded {
                file,
                data: Err(io::Error::other("helper process failed")),
            },
            Job::PageIn {
                file, offset, len, ..
            } => JobDone::paged_in(&file, offset, len, 0),
            // Never sent to a helper process (see `helpers::Runner::run`).
            Job::Verify { .. } => JobDone::Verified(false),
            Job::Compress {
                file,
                encoding,
                level,
                ..
            } => JobDone::Compressed(Compressed {
                file: file.key,
                encoding,
                level,
                data: None,
            }),
            Job::Batch(jobs) => {
                JobDone::Batch(jobs.into_iter().map(HelperProcess::failed).collect())
            }
        }
    }
}

impl HelperProcess {
    /// The answer a job gets when its helper process died or garbled the answer while it had
    /// the job: as `failed`, except that a page-in's connection ends. Some of its range may
    /// have gone out, so the loop cannot know where the body stands; its write side is shut,
    /// and the loop's next send fails and closes it.
    #[must_use]
    pub fn lost(job: Job) -> JobDone {
        if let Job::PageIn {
            send_to: Some(socket),
            ..
        } = &job
        {
            let _ = socket::shutdown_write(socket.as_fd());
        }
        HelperProcess::failed(job)
    }
}

impl Drop for HelperProcess {
    fn drop(&mut self) {
        // End of input tells the helper to exit; a helper stuck on the disk is killed.
        let _ = socket::shutdown_write(self.socket.as_fd());
        let deadline = Instant::now() + STOP_GRACE;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The helper process's life: read a job from standard input, do it, answer, until end of input.
///
/// # Errors
/// Standard input is not the socket the server set up, or answering fails.
pub fn serve_parent() -> io::Result<()> {
    let parent = child::parent_pid();
    // If the server dies without closing our socket (it cannot, but be sure), go with it.
    let _ = child::set_parent_death_signal(ampd_sys::signal::SIGKILL);
    if child::parent_pid() != parent {
        return Ok(());
    }
    let stdin = io::stdin();
    let socket = stdin.as_fd();
    let mut types = HelperTypes::default();
    loop {
        let mut fds = Vec::new();
        let Some(frame) = receive_frame(socket, &mut fds)? else {
            return Ok(());
        };
        if frame.cut_off {
            // Out of descriptors here: the job's files did not arrive. Answer in kind and
            // stay: a translation is `Exhausted`, a load or page-in did nothing (the loop
            // then reads or sends itself).
            let mut reply = Vec::with_capacity(16);
            if frame.payload.first() == Some(&JOB_RESOLVE) {
                // A type table sent with it is kept all the same: the server counts it sent.
                let _ = types.decode(&mut Reader(&frame.payload[1..]));
                let exhausted = Resolved {
                    resolution: Resolution::Exhausted,
                    watch: None,
                    at: Instant::now(),
                };
                encode_resolved(&exhausted, &mut reply);
            } else {
                reply.push(REPLY_DONE);
                Writer(&mut reply).u64(0);
            }
            send_frame(socket, &reply, &[])?;
            continue;
        }
        let job = decode_job(&frame.payload, fds, &mut types)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "malformed job"))?;
        let mut reply = Vec::with_capacity(256);
        match job {
            ReceivedJob::Resolve {
                root,
                path,
                watcher,
                basis,
            } => {
                let checked =
                    basis.map(|basis| resolve::revalidate(&root, &path, watcher.as_ref(), &basis));
                if let Some(Revalidated::Unchanged { watch }) = checked {
                    reply.push(REPLY_UNCHANGED);
                    Writer(&mut reply).watch(watch);
                    send_frame(socket, &reply, &[])?;
                    continue;
                }
                let resolved = resolve::resolve(&root, &path, watcher.as_ref());
                let files = encode_resolved(&resolved, &mut reply);
                let borrowed: Vec<BorrowedFd<'_>> = files.iter().map(|file| file.as_fd()).collect();
                send_frame(socket, &reply, &borrowed)?;
            }
            ReceivedJob::Read {
                file,
                offset,
                len,
                send_to,
            } => {
                let sent = job::page_in(&file, offset, len, send_to.as_ref());
                reply.push(REPLY_DONE);
                Writer(&mut reply).u64(sent);
                send_frame(socket, &reply, &[])?;
            }
        }
    }
}

// ---- frames: [u32 length, little-endian][payload]; descriptors ride with the first byte ----

fn send_frame(socket: BorrowedFd<'_>, payload: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<()> {
    let mut frame = Vec::with_capacity(4 + payload.len());
    frame.extend_from_slice(
        &u32::try_from(payload.len())
            .unwrap_or(u32::MAX)
            .to_le_bytes(),
    );
    frame.extend_from_slice(payload);
    let mut sent = unix::send_with_fds(socket, &frame, fds)?;
    while sent < frame.len() {
        sent += unix::send_with_fds(socket, &frame[sent..], &[])?;
    }
    Ok(())
}

/// A frame received whole.
struct Frame {
    payload: Vec<u8>,
    /// The descriptors sent with it were cut off (this process was out of descriptors): the
    /// bytes are all here, so the stream is still in step, but the answer cannot be used.
    cut_off: bool,
}

/// One frame, or `None` at end of stream before its first byte.
fn receive_frame(socket: BorrowedFd<'_>, fds: &mut Vec<OwnedFd>) -> io::Result<Option<Frame>> {
    let mut header = [0u8; 4];
    let mut have = 0;
    let mut cut_off = false;
    while have < 4 {
        let received = unix::recv_with_fds(socket, &mut header[have..], fds)?;
        cut_off |= received.cut_off;
        match received.bytes {
            0 if have == 0 => return Ok(None),
            0 => return Err(io::ErrorKind::UnexpectedEof.into()),
            read => have += read,
        }
    }
    let len = u32::from_le_bytes(header) as usize;
    if len > MAX_FRAME {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "frame too large",
        ));
    }
    let mut payload = vec![0u8; len];
    let mut have = 0;
    while have < len {
        let received = unix::recv_with_fds(socket, &mut payload[have..], fds)?;
        cut_off |= received.cut_off;
        match received.bytes {
            0 => return Err(io::ErrorKind::UnexpectedEof.into()),
            read => have += read,
        }
    }
    Ok(Some(Frame { payload, cut_off }))
}

// ---- the wire format ----

const JOB_RESOLVE: u8 = 1;
const JOB_READ: u8 = 2;
const REPLY_DONE: u8 = 10;
const REPLY_RESOLVED: u8 = 11;
/// The translation checked (`Job::Resolve`'s `previous`) still holds.
const REPLY_UNCHANGED: u8 = 12;

struct Writer<'a>(&'a mut Vec<u8>);

impl Writer<'_> {
    fn u8(&mut self, value: u8) {
        self.0.push(value);
    }
    fn u32(&mut self, value: u32) {
        self.0.extend_from_slice(&value.to_le_bytes());
    }
    fn u64(&mut self, value: u64) {
        self.0.extend_from_slice(&value.to_le_bytes());
    }
    fn bool(&mut self, value: bool) {
        self.u8(u8::from(value));
    }
    fn bytes(&mut self, value: &[u8]) {
        self.u32(u32::try_from(value.len()).unwrap_or(u32::MAX));
        self.0.extend_from_slice(value);
    }
    fn text(&mut self, value: &str) {
        self.bytes(value.as_bytes());
    }
    fn optional_text(&mut self, value: Option<&str>) {
        self.bool(value.is_some());
        if let Some(value) = value {
            self.text(value);
        }
    }
    fn key(&mut self, key: &FileKey) {
        self.u64(key.dev);
        self.u64(key.ino);
        self.u64(key.size);
        self.u64(key.mtime_secs as u64);
        self.u32(key.mtime_nanos);
    }
    fn optional_key(&mut self, key: Option<&FileKey>) {
        self.bool(key.is_some());
        if let Some(key) = key {
            self.key(key);
        }
    }
    /// An inotify watch descriptor, or none.
    fn watch(&mut self, watch: Option<i32>) {
        self.bool(watch.is_some());
        self.u32(watch.unwrap_or(0) as u32);
    }
    fn basis(&mut self, basis: &Basis) {
        self.key(&basis.file);
        self.optional_key(basis.directory.as_ref());
        for sibling in &basis.siblings {
            self.optional_key(sibling.as_ref());
        }
    }
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take(&mut self, count: usize) -> Option<&[u8]> {
        if self.0.len() < count {
            return None;
        }
        let (head, rest) = self.0.split_at(count);
        self.0 = rest;
        Some(head)
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn bool(&mut self) -> Option<bool> {
        Some(self.u8()? != 0)
    }
    fn bytes(&mut self) -> Option<&[u8]> {
        let len = self.u32()? as usize;
        self.take(len)
    }
    fn text(&mut self) -> Option<String> {
        String::from_utf8(self.bytes()?.to_vec()).ok()
    }
    fn key(&mut self) -> Option<FileKey> {
        Some(FileKey {
            dev: self.u64()?,
            ino: self.u64()?,
            size: self.u64()?,
            mtime_secs: self.u64()? as i64,
            mtime_nanos: self.u32()?,
        })
    }
    fn optional_key(&mut self) -> Option<Option<FileKey>> {
        if self.bool()? {
            Some(Some(self.key()?))
        } else {
            Some(None)
        }
    }
    fn watch(&mut self) -> Option<Option<i32>> {
        let has_watch = self.bool()?;
        let watch = self.u32()? as i32;
        Some(has_watch.then_some(watch))
    }
    fn basis(&mut self) -> Option<Basis> {
        Some(Basis {
            file: self.key()?,
            directory: self.optional_key()?,
            siblings: [self.optional_key()?, self.optional_key()?],
        })
    }
    fn optional_text(&mut self) -> Option<Option<String>> {
        if self.bool()? {
            Some(Some(self.text()?))
        } else {
            Some(None)
        }
    }
}

/// Encode `job`; returns the descriptors that go with it.
fn encode_job<'a>(job: &'a Job, out: &mut Vec<u8>, sent_types: &mut u64) -> Vec<BorrowedFd<'a>> {
    let mut writer = Writer(out);
    match job {
        Job::Resolve {
            root,
            path,
            watcher,
            previous,
        } => {
            writer.u8(JOB_RESOLVE);
            let options = &root.options;
            // First, so that a helper that cannot take the job's files still reads it.
            let table = options.types.table();
            writer.u64(table.id());
            let send_table = table.id() != *sent_types;
            writer.bool(send_table);
            if send_table {
                writer.u32(u32::try_from(table.len()).unwrap_or(0));
                for (extension, value) in table.entries() {
                    writer.text(extension);
                    writer.text(value);
                }
                *sent_types = table.id();
            }
            writer.text(options.types.default_type());
            writer.optional_text(options.types.charset());
            writer.text(path.as_str());
            writer.bytes(root.path.as_os_str().as_bytes());
            writer.u32(u32::try_from(options.index.len()).unwrap_or(0));
            for name in &options.index {
                writer.text(name);
            }
            writer.bool(options.autoindex);
            writer.bool(options.dotfiles);
            writer.bool(options.follow_symlinks);
            writer.optional_text(options.userdir.as_deref());
            writer.bool(options.precompressed);
            writer.bool(options.multiviews);
            writer.bool(options.strict_negotiation);
            writer.u32(u32::try_from(options.script_indexes.len()).unwrap_or(0));
            for extension in &options.script_indexes {
                writer.text(extension);
            }
            writer.u32(u32::try_from(options.routed_indexes.len()).unwrap_or(0));
            for name in &options.routed_indexes {
                writer.text(name);
            }
            writer.bool(watcher.is_some());
            let basis = previous
                .as_deref()
                .and_then(|previous| Basis::of(previous, path));
            writer.bool(basis.is_some());
            if let Some(basis) = &basis {
                writer.basis(basis);
            }
            let mut fds = vec![root.dir.as_fd()];
            if let Some(watcher) = watcher {
                fds.push(watcher.as_fd());
            }
            fds
        }
        Job::Load { file } => {
            writer.u8(JOB_READ);
            writer.u64(0);
            writer.u64(file.size());
            writer.bool(false);
            vec![file.file.as_fd()]
        }
        // The socket goes too: the process sends what it reads, as a helper thread does.
        Job::PageIn {
            file,
            offset,
            len,
            send_to,
        } => {
            writer.u8(JOB_READ);
            writer.u64(*offset);
            writer.u64(*len);
            writer.bool(send_to.is_some());
            std::iter::once(file.file.as_fd())
                .chain(send_to.as_ref().map(AsFd::as_fd))
                .collect()
        }
        // Answered by `HelperProcess::run` itself, never encoded.
        Job::Verify { .. } | Job::Compress { .. } | Job::Batch(_) => Vec::new(),
    }
}

enum ReceivedJob {
    Resolve {
        root: Box<DocRoot>,
        path: CleanPath,
        watcher: Option<Inotify>,
        basis: Option<Box<Basis>>,
    },
    Read {
        file: std::fs::File,
        offset: u64,
        len: u64,
        send_to: Option<OwnedFd>,
    },
}

/// A helper process's type table (the last one sent) and the options last made over it.
#[derive(Default)]
struct HelperTypes {
    table: Option<Arc<TypeTable>>,
    options: Option<TypeOptions>,
}

impl HelperTypes {
    /// Reads a job's type section: the table's id, the table if it is new, the location's
    /// default type and charset. `None` for a table id this process was never sent.
    fn decode(&mut self, reader: &mut Reader<'_>) -> Option<TypeOptions> {
        let id = reader.u64()?;
        if reader.bool()? {
            let count = reader.u32()?;
            let mut entries = Vec::new();
            for _ in 0..count {
                entries.push((reader.text()?, reader.text()?));
            }
            self.table = Some(Arc::new(TypeTable::with_id(id, entries)));
            self.options = None;
        }
        let default_type = reader.text()?;
        let charset = reader.optional_text()?;
        let table = match &self.table {
            Some(table) if table.id() == id => table.clone(),
            None if id == 0 => Arc::new(TypeTable::with_id(0, [])),
            _ => return None,
        };
        if let Some(options) = &self.options {
            if options.table().id() == id
                && options.default_type() == default_type
                && options.charset() == charset.as_deref()
            {
                return Some(options.clone());
            }
        }
        let options = TypeOptions::new(table, &default_type, charset.as_deref());
        self.options = Some(options.clone());
        Some(options)
    }
}

fn decode_job(frame: &[u8], fds: Vec<OwnedFd>, types: &mut HelperTypes) -> Option<ReceivedJob> {
    let mut reader = Reader(frame);
    let mut fds = fds.into_iter();
    match reader.u8()? {
        JOB_RESOLVE => {
            let types = types.decode(&mut reader)?;
            let path = CleanPath::from_normalized(&reader.text()?)?;
            let root_path = PathBuf::from(OsStr::from_bytes(reader.bytes()?));
            let count = reader.u32()?;
            let mut index = Vec::new();
            for _ in 0..count {
                index.push(reader.text()?);
            }
            let options = StaticOptions {
                root: root_path.clone(),
                index,
                autoindex: reader.bool()?,
                dotfiles: reader.bool()?,
                follow_symlinks: reader.bool()?,
                userdir: reader.optional_text()?,
                precompressed: reader.bool()?,
                multiviews: reader.bool()?,
                strict_negotiation: reader.bool()?,
                script_indexes: {
                    let count = reader.u32()?;
                    let mut extensions = Vec::new();
                    for _ in 0..count {
                        extensions.push(reader.text()?);
                    }
                    extensions
                },
                routed_indexes: {
                    let count = reader.u32()?;
                    let mut names = Vec::new();
                    for _ in 0..count {
                        names.push(reader.text()?);
                    }
                    names
                },
                types,
            };
            let has_watcher = reader.bool()?;
            let basis = if reader.bool()? {
                Some(Box::new(reader.basis()?))
            } else {
                None
            };
            let root = Box::new(DocRoot {
                // Only the server's caches key by root id; the helper resolves and forgets.
                id: 0,
                dir: fds.next()?,
                path: root_path,
                options,
            });
            let watcher = if has_watcher {
                Some(Inotify::from(fds.next()?))
            } else {
                None
            };
            Some(ReceivedJob::Resolve {
                root,
                path,
                watcher,
                basis,
            })
        }
        JOB_READ => {
            let offset = reader.u64()?;
            let len = reader.u64()?;
            let sends = reader.bool()?;
            let file = std::fs::File::from(fds.next()?);
            let send_to = if sends { Some(fds.next()?) } else { None };
            Some(ReceivedJob::Read {
                file,
                offset,
                len,
                send_to,
            })
        }
        _ => None,
    }
}

fn coding_byte(coding: Coding) -> u8 {
    match coding {
        Coding::Identity => 0,
        Coding::Gzip => 1,
        Coding::Brotli => 2,
    }
}

fn coding_of(byte: u8) -> Option<Coding> {
    match byte {
        0 => Some(Coding::Identity),
        1 => Some(Coding::Gzip),
        2 => Some(Coding::Brotli),
        _ => None,
    }
}

/// Encode a translation; returns the files that go with it (identity first, then siblings).
fn encode_resolved<'a>(resolved: &'a Resolved, out: &mut Vec<u8>) -> Vec<&'a std::fs::File> {
    let mut writer = Writer(out);
    writer.u8(REPLY_RESOLVED);
    writer.watch(resolved.watch);
    let mut files = Vec::new();
    match &resolved.resolution {
        Resolution::File(file) => {
            writer.u8(0);
            encode_file(file, &mut writer, &mut files);
        }
        Resolution::Variants(set) => {
            writer.u8(9);
            writer.u32(set.variants.len() as u32);
            for file in &set.variants {
                encode_file(file, &mut writer, &mut files);
            }
        }
        Resolution::AddSlash => writer.u8(1),
        Resolution::Listing(listing) => {
            writer.u8(2);
            let mut bytes = Vec::new();
            listing.encode(&mut bytes);
            writer.bytes(&bytes);
        }
        Resolution::DirectoryForbidden => writer.u8(3),
        Resolution::NotFound => writer.u8(4),
        Resolution::Forbidden => writer.u8(5),
        Resolution::Failed => writer.u8(6),
        Resolution::Exhausted => writer.u8(7),
        Resolution::Script(name) => {
            writer.u8(8);
            writer.text(name);
        }
    }
    files
}

/// A static file: its type, directory key, negotiation and representations (identity first);
/// their descriptors go into `files` in the same order.
fn encode_file<'a>(
    file: &'a StaticFile,
    writer: &mut Writer<'_>,
    files: &mut Vec<&'a std::fs::File>,
) {
    writer.text(file.content_type);
    writer.optional_key(file.directory.as_ref());
    match &file.negotiated {
        None => writer.u8(0),
        Some(negotiated) => {
            writer.u8(1
                | u8::from(negotiated.vary.accept) << 1
                | u8::from(negotiated.vary.accept_language) << 2
                | u8::from(negotiated.language.is_some()) << 3);
            if let Some(language) = &negotiated.language {
                writer.text(language);
            }
        }
    }
    let representations: Vec<&Representation> = std::iter::once(&file.identity)
        .chain(&file.encoded)
        .collect();
    writer.u32(representations.len() as u32);
    for representation in representations {
        let key = representation.file.key;
        writer.u8(coding_byte(representation.coding));
        writer.key(&key);
        files.push(&representation.file.file);
    }
}

/// What `encode_file` wrote, its descriptors taken from `fds` in order.
fn decode_file(
    reader: &mut Reader<'_>,
    fds: &mut impl Iterator<Item = OwnedFd>,
) -> Option<StaticFile> {
    let content_type = mime::known(&reader.text()?)?;
    let directory = reader.optional_key()?;
    let flags = reader.u8()?;
    let negotiated = if flags & 1 == 0 {
        None
    } else {
        let language = if flags & 8 == 0 {
            None
        } else {
            Some(Arc::from(reader.text()?))
        };
        Some(Negotiated {
            vary: VaryFields {
                accept: flags & 2 != 0,
                accept_language: flags & 4 != 0,
            },
            language,
        })
    };
    let count = reader.u32()?;
    let mut representations = Vec::new();
    for _ in 0..count {
        let coding = coding_of(reader.u8()?)?;
        let key = reader.key()?;
        let file = OpenFile::new(std::fs::File::from(fds.next()?), key);
        representations.push(Representation::new(coding, file));
    }
    let mut representations = representations.into_iter();
    let identity = representations.next()?;
    Some(StaticFile {
        identity,
        encoded: representations.collect(),
        content_type,
        directory,
        negotiated,
    })
}

fn decode_reply(job: &Job, frame: &[u8], fds: Vec<OwnedFd>) -> Option<JobDone> {
    let mut reader = Reader(frame);
    match (reader.u8()?, job) {
        (REPLY_DONE, Job::Load { file }) => {
            // The helper made the file resident; this read comes from memory.
            let data = job::read_whole(file);
            Some(JobDone::Loaded {
                file: file.clone(),
                data,
            })
        }
        (
            REPLY_DONE,
            Job::PageIn {
                file, offset, len, ..
            },
        ) => Some(JobDone::paged_in(file, *offset, *len, reader.u64()?)),
        (
            REPLY_UNCHANGED,
            Job::Resolve {
                previous: Some(previous),
                ..
            },
        ) => Some(JobDone::Resolved(previous.renewed(reader.watch()?))),
        (REPLY_RESOLVED, Job::Resolve { .. }) => {
            let watch = reader.watch()?;
            let resolution = match reader.u8()? {
                0 => Resolution::File(Arc::new(decode_file(&mut reader, &mut fds.into_iter())?)),
                1 => Resolution::AddSlash,
                2 => Resolution::Listing(Arc::new(crate::content::autoindex::Listing::decode(
                    reader.bytes()?,
                )?)),
                3 => Resolution::DirectoryForbidden,
                4 => Resolution::NotFound,
                5 => Resolution::Forbidden,
                6 => Resolution::Failed,
                7 => Resolution::Exhausted,
                8 => Resolution::Script(reader.text()?.into()),
                9 => {
                    let count = reader.u32()?;
                    let mut fds = fds.into_iter();
                    let mut variants = Vec::new();
                    for _ in 0..count {
                        variants.push(Arc::new(decode_file(&mut reader, &mut fds)?));
                    }
                    Resolution::Variants(Arc::new(VariantSet { variants }))
                }
                _ => return None,
            };
            Some(JobDone::Resolved(Resolved {
                resolution,
                watch,
                at: Instant::now(),
            }))
        }
        _ => None,
    }
}
