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
use std::path::{Component, Path};
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
