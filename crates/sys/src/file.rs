//! Files and directories: confined opening (openat2), stat, directory listing, page-cache
//! residency (cachestat) and read-ahead hints.
//!
//! Owns: every call that touches the file system by name or by file descriptor, except mapping
//! (`mmap.rs`) and change notification (`inotify.rs`). Must not touch: which paths are allowed
//! (the content layer normalises request paths before they get here); this module only makes
//! sure the kernel cannot be walked out of the directory it was given.
//!
//! All of these may block on disk, so the server calls them from helper threads (Flash §4.2),
//! never from the event loop; `cachestat` is the exception, it only reads page-cache state.

use std::ffi::{CString, OsString};
use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};

use crate::cvt::{cvt, cvt_retry, to_usize};

/// What kind of object a path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileKind {
    Regular,
    Directory,
    Symlink,
    /// FIFOs, sockets, devices: never served.
    Other,
}

impl FileKind {
    fn from_mode(mode: u32) -> FileKind {
        match mode & libc::S_IFMT {
            libc::S_IFREG => FileKind::Regular,
            libc::S_IFDIR => FileKind::Directory,
            libc::S_IFLNK => FileKind::Symlink,
            _ => FileKind::Other,
        }
    }
}

/// The metadata the caches validate against: (dev, ino, size, mtime) identify a version of a
/// file (Flash §5.2's pathname cache is invalidated when they change).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileStat {
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub mtime_secs: i64,
    pub mtime_nanos: u32,
    pub kind: FileKind,
    /// Permission bits and file type, as `st_mode`.
    pub mode: u32,
}

impl FileStat {
    fn from_raw(raw: &libc::stat64) -> FileStat {
        FileStat {
            dev: raw.st_dev,
            ino: raw.st_ino,
            size: u64::try_from(raw.st_size).unwrap_or(0),
            mtime_secs: raw.st_mtime,
            mtime_nanos: u32::try_from(raw.st_mtime_nsec).unwrap_or(0),
            kind: FileKind::from_mode(raw.st_mode),
            mode: raw.st_mode,
        }
    }
}

fn path_to_cstring(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))
}

fn owned(fd: RawFd) -> OwnedFd {
    // SAFETY: every caller passes a descriptor a system call has just returned to this thread,
    // which nothing else owns.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// Metadata of an open file.
///
/// # Errors
/// `EBADF`, `EIO`.
pub fn fstat(fd: BorrowedFd<'_>) -> io::Result<FileStat> {
    // SAFETY: stat64 is plain old data for which all-zero bytes are valid.
    let mut raw: libc::stat64 = unsafe { std::mem::zeroed() };
    // SAFETY: `raw` is a live, writable stat64; the descriptor is open.
    cvt(unsafe { libc::fstat64(fd.as_raw_fd(), &mut raw) })?;
    Ok(FileStat::from_raw(&raw))
}

/// Metadata of `path` relative to `dir` (an empty path means `dir` itself). `follow = false`
/// reports a symlink as [`FileKind::Symlink`] instead of its target.
///
/// This does not confine `path` to `dir`; use it on names that came from [`read_dir`] or on
/// paths already opened with [`open_beneath`].
///
/// # Errors
/// `ENOENT`, `ENOTDIR`, `EACCES`, `ELOOP`, `InvalidInput` for a path with a NUL byte.
pub fn stat_at(dir: BorrowedFd<'_>, path: &Path, follow: bool) -> io::Result<FileStat> {
    let name = path_to_cstring(path)?;
    let mut flags = if follow { 0 } else { libc::AT_SYMLINK_NOFOLLOW };
    if name.as_bytes().is_empty() {
        flags |= libc::AT_EMPTY_PATH;
    }
    // SAFETY: stat64 is plain old data for which all-zero bytes are valid.
    let mut raw: libc::stat64 = unsafe { std::mem::zeroed() };
    // SAFETY: `name` is a NUL-terminated string and `raw` a writable stat64, both live for the
    // call; the descriptor is open.
    cvt(unsafe { libc::fstatat64(dir.as_raw_fd(), name.as_ptr(), &mut raw, flags) })?;
    Ok(FileStat::from_raw(&raw))
}

/// How [`open_beneath`] resolves a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ResolveFlags {
    /// Refuse any resolution that leaves the starting directory (`..` above it, absolute paths,
    /// absolute symlinks, symlinks pointing outside).
    pub beneath: bool,
    /// Refuse every symlink, even one that stays inside.
    pub no_symlinks: bool,
}

impl ResolveFlags {
    /// Confined to the directory, symlinks inside it allowed.
    pub const BENEATH: ResolveFlags = ResolveFlags {
        beneath: true,
        no_symlinks: false,
    };
}

const OPENAT2_UNKNOWN: u8 = 0;
const OPENAT2_YES: u8 = 1;
const OPENAT2_NO: u8 = 2;
static OPENAT2_STATE: AtomicU8 = AtomicU8::new(OPENAT2_UNKNOWN);

/// Flags of every file the server opens to serve: read-only, not inherited by CGI children, never
/// a controlling terminal, and non-blocking so a FIFO in the document root cannot hang a helper.
const SERVE_FLAGS: i32 = libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NOCTTY | libc::O_NONBLOCK;

/// `struct open_how` (openat2(2)); libc's is non-exhaustive, so it cannot be built directly.
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

fn raw_openat2(dir: RawFd, path: &CString, flags: i32, resolve: u64) -> io::Result<OwnedFd> {
    let how = OpenHow {
        flags: u64::try_from(flags).unwrap_or(0),
        mode: 0,
        resolve,
    };
    // SAFETY: `path` is NUL-terminated and `how` is a live open_how whose size is passed
    // alongside; the kernel only reads both. A non-negative result is a new descriptor.
    let fd = cvt_retry(|| unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir,
            path.as_ptr(),
            std::ptr::addr_of!(how),
            size_of::<OpenHow>(),
        )
    })?;
    Ok(owned(RawFd::try_from(fd).unwrap_or(-1)))
}

fn is_unsupported(error: &io::Error) -> bool {
    // ENOSYS: kernel before 5.6. EPERM: a seccomp filter that does not know openat2 (older
    // container runtimes return it instead of ENOSYS).
    matches!(error.raw_os_error(), Some(libc::ENOSYS) | Some(libc::EPERM))
}

/// Whether `openat2(2)` works here (Linux ≥ 5.6 and not filtered); probed once and cached.
#[must_use]
pub fn openat2_supported() -> bool {
    match OPENAT2_STATE.load(Ordering::Relaxed) {
        OPENAT2_YES => true,
        OPENAT2_NO => false,
        _ => {
            let dot = CString::from(c".");
            let supported = match raw_openat2(
                libc::AT_FDCWD,
                &dot,
                libc::O_PATH | libc::O_CLOEXEC,
                libc::RESOLVE_BENEATH,
            ) {
                Ok(_) => true,
                Err(error) => !is_unsupported(&error),
            };
            OPENAT2_STATE.store(
                if supported { OPENAT2_YES } else { OPENAT2_NO },
                Ordering::Relaxed,
            );
            supported
        }
    }
}

/// Opens `path` (relative; empty or `.` means `dir` itself) below `dir` for serving: read-only,
/// close-on-exec, no controlling terminal, non-blocking.
///
/// With `openat2(2)` the kernel enforces the confinement: `RESOLVE_BENEATH` (when
/// `flags.beneath`), always `RESOLVE_NO_MAGICLINKS` (no `/proc/self/fd/…` jumps), and
/// `RESOLVE_NO_SYMLINKS` when `flags.no_symlinks`. Escapes fail with `EXDEV`, refused symlinks
/// with `ELOOP`.
///
/// Without `openat2` (old kernel, seccomp) this falls back to a walk one component at a time
/// with `O_NOFOLLOW`, and that walk is *stricter and weaker* at once: it refuses every `..`
/// component and absolute path (`EXDEV`) and every symlink, inside or not (`ELOOP`), whatever
/// `flags` say, but it cannot stop a directory from being renamed out from under the walk
/// between two steps (openat2 resolves atomically).
///
/// # Errors
/// `ENOENT`, `EACCES`, `EXDEV` (escape), `ELOOP` (refused symlink), `ENOTDIR`, `EMFILE`,
/// `InvalidInput` for a path with a NUL byte.
pub fn open_beneath(dir: BorrowedFd<'_>, path: &Path, flags: ResolveFlags) -> io::Result<OwnedFd> {
    open_beneath_as(dir, path, flags, SERVE_FLAGS)
}

/// `fstat` of `path` below `dir`, found under the same confinement as [`open_beneath`] but
/// without opening the file for reading (`O_PATH`): a network or FUSE filesystem then sees a
/// lookup only, not an open and a release. For checking that a file is still what a cache
/// holds open.
///
/// # Errors
/// As [`open_beneath`].
pub fn stat_beneath(dir: BorrowedFd<'_>, path: &Path, flags: ResolveFlags) -> io::Result<FileStat> {
    let fd = open_beneath_as(dir, path, flags, libc::O_PATH | libc::O_CLOEXEC)?;
    fstat(std::os::fd::AsFd::as_fd(&fd))
}

/// Symbolic links one lookup may pass through before it is a loop (`ELOOP`): the kernel's own
/// limit (`MAXSYMLINKS`).
const MAX_LINKS: usize = 40;

/// [`open_beneath`], where an absolute symbolic link whose target lies below `dir_path` (the
/// path `dir` was opened by, as given or with its links resolved) leads to that place below
/// `dir`, as a relative link to it would: `RESOLVE_BENEATH` refuses every absolute link,
/// though one written as `/srv/www/a` in the root `/srv/www` stays inside.
///
/// # Errors
/// As [`open_beneath`]; `EXDEV` for an absolute link whose target lies elsewhere.
pub fn open_inside(
    dir: BorrowedFd<'_>,
    dir_path: &Path,
    path: &Path,
    flags: ResolveFlags,
) -> io::Result<OwnedFd> {
    through_inner_links(dir, dir_path, path, flags, |path| {
        open_beneath(dir, path, flags)
    })
}

/// [`stat_beneath`] with [`open_inside`]'s rule for absolute links.
///
/// # Errors
/// As [`open_inside`].
pub fn stat_inside(
    dir: BorrowedFd<'_>,
    dir_path: &Path,
    path: &Path,
    flags: ResolveFlags,
) -> io::Result<FileStat> {
    through_inner_links(dir, dir_path, path, flags, |path| {
        stat_beneath(dir, path, flags)
    })
}

/// `lookup(path)`; when it left `dir` (`EXDEV`) under `RESOLVE_BENEATH`, `lookup` of the same
/// path with every link expanded by [`without_links`]. The common case costs nothing more.
fn through_inner_links<T>(
    dir: BorrowedFd<'_>,
    dir_path: &Path,
    path: &Path,
    flags: ResolveFlags,
    lookup: impl Fn(&Path) -> io::Result<T>,
) -> io::Result<T> {
    match lookup(path) {
        Err(error) if flags.beneath && error.raw_os_error() == Some(libc::EXDEV) => {
            let inner = without_links(dir, dir_path, path, flags)?;
            lookup(&inner)
        }
        result => result,
    }
}

/// `path` below `dir` with every symbolic link replaced by its target, one component at a
/// time: a relative target in place of the link, an absolute one below `dir_path` (as given,
/// or canonical) as that path below `dir`. Safe against a tree that changes meanwhile:
/// every step is a lookup beneath `dir` (`read_link_beneath`), and what is returned is
/// looked up beneath it again, so a change can only make the lookup fail, never leave `dir`.
///
/// # Errors
/// `EXDEV` for a `..` above `dir` or an absolute target elsewhere, `ELOOP` past `MAX_LINKS`
/// links, and what [`read_link_beneath`] says.
fn without_links(
    dir: BorrowedFd<'_>,
    dir_path: &Path,
    path: &Path,
    flags: ResolveFlags,
) -> io::Result<PathBuf> {
    let escape = || io::Error::from_raw_os_error(libc::EXDEV);
    let names = [
        Some(dir_path.to_path_buf()),
        std::fs::canonicalize(dir_path).ok(),
    ];
    // Components still to walk, the next one last.
    let mut pending: Vec<OsString> = Vec::new();
    let push = |pending: &mut Vec<OsString>, path: &Path| {
        for component in path.components().rev() {
            match component {
                Component::Normal(name) => pending.push(name.to_os_string()),
                Component::ParentDir => pending.push(OsString::from("..")),
                Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
            }
        }
    };
    push(&mut pending, path);
    // The path walked so far: directories only, no link.
    let mut walked = PathBuf::new();
    let mut links = 0;
    while let Some(name) = pending.pop() {
        if name == ".." {
            if !walked.pop() {
                return Err(escape());
            }
            continue;
        }
        let next = walked.join(&name);
        let Some(target) = read_link_beneath(dir, &next, flags)? else {
            walked = next;
            continue;
        };
        links += 1;
        if links > MAX_LINKS {
            return Err(io::Error::from_raw_os_error(libc::ELOOP));
        }
        if target.is_absolute() {
            let below = names
                .iter()
                .flatten()
                .find_map(|name| target.strip_prefix(name).ok())
                .ok_or_else(escape)?;
            walked = PathBuf::new();
            push(&mut pending, below);
        } else {
            push(&mut pending, &target);
        }
    }
    Ok(walked)
}

/// The target of `path` below `dir` when its last component is a symbolic link, `None` when
/// it is something else. Every component before the last is resolved under the confinement
/// of [`open_beneath`]; the last is not followed, and the link read is the one that lookup
/// found (`readlinkat` on its own descriptor), not whatever the name means a moment later.
///
/// # Errors
/// As [`open_beneath`]; `ENAMETOOLONG` for a target of `PATH_MAX` bytes or more.
pub fn read_link_beneath(
    dir: BorrowedFd<'_>,
    path: &Path,
    flags: ResolveFlags,
) -> io::Result<Option<PathBuf>> {
    let link = open_beneath_as(
        dir,
        path,
        flags,
        libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC,
    )?;
    if fstat(std::os::fd::AsFd::as_fd(&link))?.kind != FileKind::Symlink {
        return Ok(None);
    }
    let mut target = vec![0u8; usize::try_from(libc::PATH_MAX).unwrap_or(4096)];
    // SAFETY: the empty name with an `O_PATH` descriptor of a link reads that link (Linux
    // 2.6.39); `target` is live and writable for target.len() bytes, which is all the kernel
    // writes.
    let length = cvt_retry(|| unsafe {
        libc::readlinkat(
            link.as_raw_fd(),
            c"".as_ptr(),
            target.as_mut_ptr().cast(),
            target.len(),
        )
    })?;
    let length = to_usize(length);
    if length >= target.len() {
        return Err(io::Error::from_raw_os_error(libc::ENAMETOOLONG));
    }
    target.truncate(length);
    Ok(Some(PathBuf::from(OsString::from_vec(target))))
}

fn open_beneath_as(
    dir: BorrowedFd<'_>,
    path: &Path,
    flags: ResolveFlags,
    open_flags: i32,
) -> io::Result<OwnedFd> {
    let path = if path.as_os_str().is_empty() {
        Path::new(".")
    } else {
        path
    };
    if openat2_supported() {
        let name = path_to_cstring(path)?;
        let mut resolve = libc::RESOLVE_NO_MAGICLINKS;
        if flags.beneath {
            resolve |= libc::RESOLVE_BENEATH;
        }
        if flags.no_symlinks {
            resolve |= libc::RESOLVE_NO_SYMLINKS;
        }
        match raw_openat2(dir.as_raw_fd(), &name, open_flags, resolve) {
            Err(error) if error.raw_os_error() == Some(libc::ENOSYS) => {
                OPENAT2_STATE.store(OPENAT2_NO, Ordering::Relaxed);
            }
            result => return result,
        }
    }
    open_by_walking(dir, path, open_flags)
}

fn raw_openat(dir: RawFd, name: &CString, flags: i32) -> io::Result<OwnedFd> {
    // SAFETY: `name` is NUL-terminated and lives for the call; openat does not keep it. A
    // non-negative result is a new descriptor.
    let fd = cvt_retry(|| unsafe { libc::openat(dir, name.as_ptr(), flags, 0) })?;
    Ok(owned(fd))
}

/// The fallback for kernels without openat2; see [`open_beneath`] for its policy.
fn open_by_walking(dir: BorrowedFd<'_>, path: &Path, open_flags: i32) -> io::Result<OwnedFd> {
    let escape = || io::Error::from_raw_os_error(libc::EXDEV);
    let mut names = Vec::new();
    for component in path.components() {
        match component {
            Component::Normal(name) => names.push(name),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                return Err(escape())
            }
        }
    }
    let Some((last, parents)) = names.split_last() else {
        return raw_openat(dir.as_raw_fd(), &CString::from(c"."), open_flags);
    };
    let mut current: Option<OwnedFd> = None;
    for name in parents {
        let at = current.as_ref().map_or(dir.as_raw_fd(), AsRawFd::as_raw_fd);
        let name = path_to_cstring(Path::new(name))?;
        // O_PATH|O_NOFOLLOW opens a symlink itself instead of following it; fstat then tells.
        let next = raw_openat(at, &name, libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC)?;
        let stat = fstat(std::os::fd::AsFd::as_fd(&next))?;
        match stat.kind {
            FileKind::Directory => current = Some(next),
            FileKind::Symlink => return Err(io::Error::from_raw_os_error(libc::ELOOP)),
            _ => return Err(io::Error::from_raw_os_error(libc::ENOTDIR)),
        }
    }
    let at = current.as_ref().map_or(dir.as_raw_fd(), AsRawFd::as_raw_fd);
    raw_openat(
        at,
        &path_to_cstring(Path::new(last))?,
        open_flags | libc::O_NOFOLLOW,
    )
}

/// Opens a directory to serve as the anchor of [`open_beneath`] and [`read_dir`].
///
/// # Errors
/// `ENOENT`, `ENOTDIR`, `EACCES`, `InvalidInput` for a path with a NUL byte.
pub fn open_dir(path: &Path) -> io::Result<OwnedFd> {
    raw_openat(
        libc::AT_FDCWD,
        &path_to_cstring(path)?,
        libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
    )
}

/// One name in a directory, as `getdents64` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirName {
    pub name: OsString,
    /// `None` when the file system does not fill `d_type`; call [`stat_at`] then.
    pub kind: Option<FileKind>,
}

/// The names in directory `dir` (without `.` and `..`), in the order the file system gives.
/// Reads through its own descriptor, so `dir`'s position is left alone.
///
/// # Errors
/// `ENOTDIR`, `EACCES`, `EIO`.
pub fn read_dir(dir: BorrowedFd<'_>) -> io::Result<Vec<DirName>> {
    let own = raw_openat(
        dir.as_raw_fd(),
        &CString::from(c"."),
        libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
    )?;
    let mut buf = vec![0u8; 32 * 1024];
    let mut names = Vec::new();
    loop {
        // SAFETY: `buf` is live and writable for buf.len() bytes; the kernel writes at most that.
        let filled = cvt_retry(|| unsafe {
            libc::syscall(
                libc::SYS_getdents64,
                own.as_raw_fd(),
                buf.as_mut_ptr(),
                buf.len(),
            )
        })?;
        let filled = to_usize(filled);
        if filled == 0 {
            return Ok(names);
        }
        parse_dirents(&buf[..filled.min(buf.len())], &mut names);
    }
}

/// Parses `struct linux_dirent64` records: u64 ino, i64 off, u16 reclen, u8 type, name, NUL.
fn parse_dirents(mut bytes: &[u8], names: &mut Vec<DirName>) {
    const HEADER: usize = 19;
    while bytes.len() >= HEADER {
        let record_len = usize::from(u16::from_ne_bytes([bytes[16], bytes[17]]));
        if record_len < HEADER || record_len > bytes.len() {
            return;
        }
        let kind = match bytes[18] {
            libc::DT_REG => Some(FileKind::Regular),
            libc::DT_DIR => Some(FileKind::Directory),
            libc::DT_LNK => Some(FileKind::Symlink),
            libc::DT_UNKNOWN => None,
            _ => Some(FileKind::Other),
        };
        let name_field = &bytes[HEADER..record_len];
        let name_len = name_field
            .iter()
            .position(|&byte| byte == 0)
            .unwrap_or(name_field.len());
        let name = &name_field[..name_len];
        if name != b"." && name != b".." {
            names.push(DirName {
                name: OsString::from_vec(name.to_vec()),
                kind,
            });
        }
        bytes = &bytes[record_len..];
    }
}

/// Page-cache state of a file range, from `cachestat(2)` (Linux ≥ 6.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CacheStat {
    pub cached_pages: u64,
    pub dirty_pages: u64,
    pub writeback_pages: u64,
    pub evicted_pages: u64,
    pub recently_evicted_pages: u64,
}

/// `cachestat` is 451 in the generic syscall table and on x86_64 alike.
const SYS_CACHESTAT: libc::c_long = 451;

#[repr(C)]
struct CachestatRange {
    offset: u64,
    len: u64,
}

#[repr(C)]
#[derive(Default)]
struct RawCachestat {
    nr_cache: u64,
    nr_dirty: u64,
    nr_writeback: u64,
    nr_evicted: u64,
    nr_recently_evicted: u64,
}

/// How much of `[offset, offset + len)` of `fd` is in the page cache (`len = 0`: to the end).
/// The event loop uses it to decide whether a `sendfile` would block on disk (Flash §5.4 used
/// mincore for this).
///
/// # Errors
/// `ENOSYS` (`ErrorKind::Unsupported`) before Linux 6.5, and where a seccomp filter refuses
/// the call (callers fall back to [`crate::mmap::Mmap::is_resident`]); `EBADF`; `EOPNOTSUPP`
/// for hugetlbfs.
pub fn cachestat(fd: BorrowedFd<'_>, offset: u64, len: u64) -> io::Result<CacheStat> {
    let range = CachestatRange { offset, len };
    let mut raw = RawCachestat::default();
    // SAFETY: `range` is a live struct the kernel reads, `raw` a live, writable struct of the
    // layout `struct cachestat` has; the flags argument must be zero.
    cvt(unsafe {
        libc::syscall(
            SYS_CACHESTAT,
            fd.as_raw_fd(),
            std::ptr::addr_of!(range),
            std::ptr::addr_of_mut!(raw),
            0u32,
        )
    })
    .map_err(|error| match error.raw_os_error() {
        // cachestat itself never fails with EPERM: that is a seccomp filter refusing it
        // (systemd's SystemCallFilter= with SystemCallErrorNumber=EPERM, where systemd's table
        // predates the call), which means the same as a kernel without it.
        Some(libc::EPERM) => io::Error::from_raw_os_error(libc::ENOSYS),
        _ => error,
    })?;
    Ok(CacheStat {
        cached_pages: raw.nr_cache,
        dirty_pages: raw.nr_dirty,
        writeback_pages: raw.nr_writeback,
        evicted_pages: raw.nr_evicted,
        recently_evicted_pages: raw.nr_recently_evicted,
    })
}

/// What `fadvise` tells the kernel about a range of a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Advice {
    /// Start reading the range into the page cache (`POSIX_FADV_WILLNEED`).
    WillNeed,
    /// Drop the range's clean pages from the page cache (`POSIX_FADV_DONTNEED`).
    DontNeed,
}

/// `posix_fadvise` for `[offset, offset + len)` (`len = 0`: to the end); returns at once.
///
/// # Errors
/// `EBADF`, `ESPIPE` for pipes, `EINVAL` when the values do not fit in `off_t`.
pub fn fadvise(fd: BorrowedFd<'_>, offset: u64, len: u64, advice: Advice) -> io::Result<()> {
    let invalid = || io::Error::from_raw_os_error(libc::EINVAL);
    let offset = libc::off64_t::try_from(offset).map_err(|_| invalid())?;
    let len = libc::off64_t::try_from(len).map_err(|_| invalid())?;
    let advice = match advice {
        Advice::WillNeed => libc::POSIX_FADV_WILLNEED,
        Advice::DontNeed => libc::POSIX_FADV_DONTNEED,
    };
    // SAFETY: posix_fadvise64 takes no pointers; the descriptor is open.
    let code = unsafe { libc::posix_fadvise64(fd.as_raw_fd(), offset, len, advice) };
    // posix_fadvise returns the error number instead of setting errno.
    if code == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(code))
    }
}

/// The page size the residency calls count in.
#[must_use]
pub fn page_size() -> usize {
    // SAFETY: sysconf takes no pointers.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size)
        .ok()
        .filter(|&size| size > 0)
        .unwrap_or(4096)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::TempDir;
    use std::fs;
    use std::io::Read;
    use std::os::fd::AsFd;
    use std::os::unix::fs::symlink;

    /// root/{index.html, sub/page.txt, inside -> index.html, abs -> /etc/passwd,
    /// up -> ../outside.txt, subdir_link -> sub}; outside.txt beside root.
    fn tree() -> (TempDir, OwnedFd) {
        let base = TempDir::new("tree");
        let root = base.path().join("root");
        fs::create_dir_all(root.join("sub")).unwrap();
        fs::write(root.join("index.html"), b"<h1>hi</h1>").unwrap();
        fs::write(root.join("sub/page.txt"), b"page").unwrap();
        fs::write(base.path().join("outside.txt"), b"secret").unwrap();
        symlink("index.html", root.join("inside")).unwrap();
        symlink("/etc/passwd", root.join("abs")).unwrap();
        symlink("../outside.txt", root.join("up")).unwrap();
        symlink("sub", root.join("subdir_link")).unwrap();
        let dir = open_dir(&root).unwrap();
        (base, dir)
    }

    fn contents(fd: OwnedFd) -> String {
        let mut text = String::new();
        fs::File::from(fd).read_to_string(&mut text).unwrap();
        text
    }

    #[test]
    fn openat2_is_available_on_this_kernel() {
        assert!(openat2_supported());
    }

    #[test]
    fn opens_files_inside_and_follows_inside_symlinks() {
        let (_base, dir) = tree();
        let flags = ResolveFlags::BENEATH;
        let file = open_beneath(dir.as_fd(), Path::new("sub/page.txt"), flags).unwrap();
        assert_eq!(contents(file), "page");
        let linked = open_beneath(dir.as_fd(), Path::new("inside"), flags).unwrap();
        assert_eq!(contents(linked), "<h1>hi</h1>");
        let via_dir_link =
            open_beneath(dir.as_fd(), Path::new("subdir_link/page.txt"), flags).unwrap();
        assert_eq!(contents(via_dir_link), "page");
        let root_itself = open_beneath(dir.as_fd(), Path::new(""), flags).unwrap();
        assert_eq!(
            fstat(root_itself.as_fd()).unwrap().kind,
            FileKind::Directory
        );
    }

    #[test]
    fn escapes_fail_with_exdev() {
        let (_base, dir) = tree();
        for path in [
            "../outside.txt",
            "sub/../../outside.txt",
            "abs",
            "up",
            "/etc/passwd",
        ] {
            let error =
                open_beneath(dir.as_fd(), Path::new(path), ResolveFlags::BENEATH).expect_err(path);
            assert_eq!(error.raw_os_error(), Some(libc::EXDEV), "{path}: {error}");
        }
        // `..` that stays inside is fine for the kernel (the content layer never sends it).
        let file = open_beneath(
            dir.as_fd(),
            Path::new("sub/../index.html"),
            ResolveFlags::BENEATH,
        )
        .unwrap();
        assert_eq!(contents(file), "<h1>hi</h1>");
    }

    #[test]
    fn read_link_beneath_reads_the_last_link_and_nothing_else() {
        let (_base, dir) = tree();
        let read =
            |path: &str| read_link_beneath(dir.as_fd(), Path::new(path), ResolveFlags::BENEATH);
        assert_eq!(read("abs").unwrap(), Some(PathBuf::from("/etc/passwd")));
        assert_eq!(read("up").unwrap(), Some(PathBuf::from("../outside.txt")));
        assert_eq!(read("inside").unwrap(), Some(PathBuf::from("index.html")));
        assert_eq!(read("sub/page.txt").unwrap(), None);
        assert_eq!(read("sub").unwrap(), None);
        // Links before the last component are followed under the confinement.
        assert_eq!(read("subdir_link/page.txt").unwrap(), None);
        let error = read("up/x").unwrap_err();
        assert_eq!(error.raw_os_error(), Some(libc::EXDEV), "{error}");
        let error = read("missing").unwrap_err();
        assert_eq!(error.raw_os_error(), Some(libc::ENOENT), "{error}");
    }

    #[test]
    fn open_inside_follows_absolute_links_that_name_the_directory() {
        let (base, dir) = tree();
        let root = base.path().join("root");
        let twin = base.path().join("root-twin");
        fs::create_dir_all(&twin).unwrap();
        fs::write(twin.join("x"), b"twin").unwrap();
        symlink(root.join("index.html"), root.join("abs_index")).unwrap();
        symlink(root.join("sub"), root.join("abs_sub")).unwrap();
        symlink(root.join("abs_sub/page.txt"), root.join("sub/abs_via_abs")).unwrap();
        symlink("../abs_sub/page.txt", root.join("sub/rel_via_abs")).unwrap();
        symlink(twin.join("x"), root.join("abs_twin")).unwrap();
        symlink(root.join("../outside.txt"), root.join("abs_dotdot")).unwrap();
        symlink(root.join("loop_b"), root.join("loop_a")).unwrap();
        symlink(root.join("loop_a"), root.join("loop_b")).unwrap();
        // The directory named through a link of its own: a target written with either name
        // is inside.
        let named = base.path().join("named");
        symlink(&root, &named).unwrap();
        let flags = ResolveFlags::BENEATH;
        for dir_path in [&root, &named] {
            let open = |path: &str| open_inside(dir.as_fd(), dir_path, Path::new(path), flags);
            assert_eq!(contents(open("abs_index").unwrap()), "<h1>hi</h1>");
            assert_eq!(contents(open("abs_sub/page.txt").unwrap()), "page");
            assert_eq!(contents(open("sub/abs_via_abs").unwrap()), "page");
            assert_eq!(contents(open("sub/rel_via_abs").unwrap()), "page");
            assert_eq!(contents(open("inside").unwrap()), "<h1>hi</h1>");
            for (path, errno) in [
                ("abs", libc::EXDEV),
                ("abs_twin", libc::EXDEV),
                ("abs_dotdot", libc::EXDEV),
                ("up", libc::EXDEV),
                ("abs_index/x", libc::ENOTDIR),
                ("loop_a", libc::ELOOP),
            ] {
                let error = open(path).expect_err(path);
                assert_eq!(error.raw_os_error(), Some(errno), "{path}: {error}");
            }
            let stat = stat_inside(dir.as_fd(), dir_path, Path::new("abs_sub"), flags).unwrap();
            assert_eq!(stat.kind, FileKind::Directory);
        }
    }

    #[test]
    fn no_symlinks_refuses_even_inside_links() {
        let (_base, dir) = tree();
        let flags = ResolveFlags {
            beneath: true,
            no_symlinks: true,
        };
        let error = open_beneath(dir.as_fd(), Path::new("inside"), flags).unwrap_err();
        assert_eq!(error.raw_os_error(), Some(libc::ELOOP));
        assert!(open_beneath(dir.as_fd(), Path::new("index.html"), flags).is_ok());
    }

    #[test]
    fn fallback_walk_refuses_parent_and_every_symlink() {
        let (_base, dir) = tree();
        let file = open_by_walking(dir.as_fd(), Path::new("./sub/page.txt"), SERVE_FLAGS).unwrap();
        assert_eq!(contents(file), "page");
        let cases = [
            ("../outside.txt", libc::EXDEV),
            ("sub/../index.html", libc::EXDEV),
            ("/etc/passwd", libc::EXDEV),
            ("inside", libc::ELOOP),
            ("abs", libc::ELOOP),
            ("subdir_link/page.txt", libc::ELOOP),
            ("index.html/x", libc::ENOTDIR),
        ];
        for (path, errno) in cases {
            let error = open_by_walking(dir.as_fd(), Path::new(path), SERVE_FLAGS).expect_err(path);
            assert_eq!(error.raw_os_error(), Some(errno), "{path}: {error}");
        }
        let root = open_by_walking(dir.as_fd(), Path::new(""), SERVE_FLAGS).unwrap();
        assert_eq!(fstat(root.as_fd()).unwrap().kind, FileKind::Directory);
    }

    #[test]
    fn stat_beneath_agrees_with_an_open_and_keeps_the_confinement() {
        let (_base, dir) = tree();
        let opened = open_beneath(
            dir.as_fd(),
            Path::new("sub/page.txt"),
            ResolveFlags::BENEATH,
        )
        .unwrap();
        let stat = stat_beneath(
            dir.as_fd(),
            Path::new("sub/page.txt"),
            ResolveFlags::BENEATH,
        )
        .unwrap();
        let expected = fstat(opened.as_fd()).unwrap();
        assert_eq!(
            (stat.dev, stat.ino, stat.size),
            (expected.dev, expected.ino, expected.size)
        );
        assert_eq!(stat.kind, FileKind::Regular);
        let escape = stat_beneath(
            dir.as_fd(),
            Path::new("../outside.txt"),
            ResolveFlags::BENEATH,
        )
        .unwrap_err();
        assert_eq!(escape.raw_os_error(), Some(libc::EXDEV));
        let missing =
            stat_beneath(dir.as_fd(), Path::new("nope"), ResolveFlags::BENEATH).unwrap_err();
        assert_eq!(missing.raw_os_error(), Some(libc::ENOENT));
    }

    #[test]
    fn fifo_opens_without_blocking() {
        let (base, dir) = tree();
        let fifo = base.path().join("root/pipe");
        let name = path_to_cstring(&fifo).unwrap();
        // SAFETY: `name` is a NUL-terminated path that lives for the call.
        cvt(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }).unwrap();
        let fd = open_beneath(dir.as_fd(), Path::new("pipe"), ResolveFlags::BENEATH).unwrap();
        assert_eq!(fstat(fd.as_fd()).unwrap().kind, FileKind::Other);
    }

    #[test]
    fn stat_reports_kind_size_and_symlinks() {
        let (_base, dir) = tree();
        let index = stat_at(dir.as_fd(), Path::new("index.html"), false).unwrap();
        assert_eq!((index.kind, index.size), (FileKind::Regular, 11));
        assert!(index.mtime_secs > 1_600_000_000);
        let link = stat_at(dir.as_fd(), Path::new("inside"), false).unwrap();
        assert_eq!(link.kind, FileKind::Symlink);
        let target = stat_at(dir.as_fd(), Path::new("inside"), true).unwrap();
        assert_eq!((target.dev, target.ino), (index.dev, index.ino));
        let opened =
            open_beneath(dir.as_fd(), Path::new("index.html"), ResolveFlags::BENEATH).unwrap();
        assert_eq!(fstat(opened.as_fd()).unwrap(), index);
        let itself = stat_at(dir.as_fd(), Path::new(""), false).unwrap();
        assert_eq!(itself.kind, FileKind::Directory);
        let missing = stat_at(dir.as_fd(), Path::new("nope"), true).unwrap_err();
        assert_eq!(missing.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn read_dir_lists_names_with_kinds() {
        let (_base, dir) = tree();
        let mut names = read_dir(dir.as_fd()).unwrap();
        names.sort_by(|a, b| a.name.cmp(&b.name));
        let listed: Vec<_> = names
            .iter()
            .map(|entry| (entry.name.to_str().unwrap(), entry.kind))
            .collect();
        let expect_kind = |kind| Some(kind);
        assert_eq!(listed.len(), 6);
        for (name, kind) in listed {
            let expected = match name {
                "index.html" => FileKind::Regular,
                "sub" => FileKind::Directory,
                "inside" | "abs" | "up" | "subdir_link" => FileKind::Symlink,
                other => panic!("unexpected {other}"),
            };
            // d_type may be DT_UNKNOWN on some file systems; then stat_at is the answer.
            if kind.is_some() {
                assert_eq!(kind, expect_kind(expected), "{name}");
            }
        }
    }

    #[test]
    fn parse_dirents_stops_on_a_truncated_record() {
        let mut record = vec![0u8; 24];
        record[16..18].copy_from_slice(&24u16.to_ne_bytes());
        record[18] = libc::DT_REG;
        record[19..22].copy_from_slice(b"abc");
        let mut names = Vec::new();
        parse_dirents(&record, &mut names);
        assert_eq!(names.len(), 1);
        assert_eq!(names[0].name, "abc");
        let mut names = Vec::new();
        parse_dirents(&record[..20], &mut names);
        assert!(names.is_empty());
    }

    #[test]
    fn cachestat_sees_a_fresh_write_as_cached() {
        let dir = TempDir::new("cachestat");
        let path = dir.path().join("fresh");
        fs::write(&path, vec![7u8; 64 * 1024]).unwrap();
        let file = fs::File::open(&path).unwrap();
        fadvise(file.as_fd(), 0, 0, Advice::WillNeed).unwrap();
        let stat = cachestat(file.as_fd(), 0, 0).unwrap();
        let pages = (64 * 1024 / page_size()) as u64;
        assert_eq!(stat.cached_pages, pages, "{stat:?}");
        let partial = cachestat(file.as_fd(), 0, page_size() as u64).unwrap();
        assert_eq!(partial.cached_pages, 1);
    }
}
