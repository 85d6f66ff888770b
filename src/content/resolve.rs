//! Path translation: the blocking half (Flash §5.2). Runs on a helper thread under `amped` and
//! `reactor`, inline under `sped`; never on the event thread of an AMPED loop.
//!
//! Owns: turning a normalised path into a `Resolution` by opening and `fstat`ing beneath the
//! document root (`openat2(RESOLVE_BENEATH)`: a symlink, `..` or magic link cannot lead out of
//! it), index files, precompressed siblings, directory listings, and `~user` directories.
//! Must not touch: the caches (the event loop inserts what this returns).

use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use ampd_http::coding::Coding;
use ampd_sys::file::{self, FileKind, ResolveFlags};
use ampd_sys::inotify::{self, Inotify};

use super::autoindex::{self, DirEntry};
use super::file::{FileKey, OpenFile, Representation, Resolution, Resolved, StaticFile};
use super::mime;
use super::path::{self, CleanPath};
use crate::config::StaticOptions;

/// The document root, opened once at start-up; shared by a loop and its helpers.
#[derive(Debug)]
pub struct DocRoot {
    /// Unique in the process: caches key translations by (root id, path), so roots opened by
    /// different locations or configuration generations never share entries.
    pub id: u64,
    pub dir: OwnedFd,
    pub path: PathBuf,
    pub options: StaticOptions,
}

impl DocRoot {
    /// # Errors
    /// The root cannot be opened as a directory.
    pub fn open(options: StaticOptions) -> io::Result<DocRoot> {
        static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let dir = file::open_dir(&options.root)?;
        Ok(DocRoot {
            id: NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            dir,
            path: options.root.clone(),
            options,
        })
    }
}

/// Events on a watched directory that can change what a path in it resolves to.
const WATCH_MASK: u32 = inotify::IN_MODIFY
    | inotify::IN_ATTRIB
    | inotify::IN_CLOSE_WRITE
    | inotify::IN_MOVED_FROM
    | inotify::IN_MOVED_TO
    | inotify::IN_CREATE
    | inotify::IN_DELETE
    | inotify::IN_DELETE_SELF
    | inotify::IN_MOVE_SELF
    | inotify::IN_ONLYDIR;

/// Translate `clean` beneath `root`. Blocks on disk: call only where blocking is allowed.
#[must_use]
pub fn resolve(root: &DocRoot, clean: &CleanPath, watcher: Option<&Inotify>) -> Resolved {
    let options = &root.options;
    let user_base;
    let (base_fd, base_path, relative) = match options
        .userdir
        .as_deref()
        .and_then(|p| path::userdir(clean).map(|(user, rest)| (p, user, rest)))
    {
        Some((pattern, user, rest)) => match user_directory(pattern, user) {
            Some(dir) => match file::open_dir(&dir) {
                Ok(fd) => {
                    user_base = fd;
                    (
                        user_base.as_fd(),
                        dir,
                        rest.trim_start_matches('/').to_owned(),
                    )
                }
                Err(_) => return finish(Resolution::NotFound, None),
            },
            None => return finish(Resolution::NotFound, None),
        },
        None => (
            root.dir.as_fd(),
            root.path.clone(),
            clean.relative().to_owned(),
        ),
    };
    let relative = if relative.is_empty() {
        ".".to_owned()
    } else {
        relative
    };

    // Watch first, then look: a change between the two is then reported, never lost.
    let watch_dir = if clean.ends_with_slash() || relative == "." {
        base_path.join(&relative)
    } else {
        base_path.join(Path::new(&relative).parent().unwrap_or(Path::new(".")))
    };
    let watch = watcher.and_then(|w| w.add_watch(&watch_dir, WATCH_MASK).ok());

    let flags = ResolveFlags {
        beneath: !options.follow_symlinks,
        no_symlinks: false,
    };
    let fd = match file::open_beneath(base_fd, Path::new(&relative), flags) {
        Ok(fd) => fd,
        Err(err) => return finish(open_error(&err), watch),
    };
    let stat = match file::fstat(fd.as_fd()) {
        Ok(stat) => stat,
        Err(_) => return finish(Resolution::Failed, watch),
    };
    let resolution = match stat.kind {
        FileKind::Regular => {
            let name = relative.as_str();
            static_file(base_fd, name, File::from(fd), FileKey::of(&stat), options)
        }
        FileKind::Directory if !clean.ends_with_slash() && relative != "." => Resolution::AddSlash,
        FileKind::Directory => directory(base_fd, &relative, fd, clean, options),
        _ => Resolution::Forbidden,
    };
    finish(resolution, watch)
}

fn finish(resolution: Resolution, watch: Option<i32>) -> Resolved {
    Resolved {
        resolution,
        watch,
        at: Instant::now(),
    }
}

fn open_error(err: &io::Error) -> Resolution {
    match err.raw_os_error() {
        Some(libc_errno::ENOENT | libc_errno::ENOTDIR | libc_errno::ENAMETOOLONG) => {
            Resolution::NotFound
        }
        // EXDEV/ELOOP: the path tried to leave the root (RESOLVE_BENEATH). Answer as if the
        // file did not exist, so the response does not confirm what lies outside.
        Some(libc_errno::EXDEV | libc_errno::ELOOP) => Resolution::NotFound,
        Some(libc_errno::EACCES | libc_errno::EPERM) => Resolution::Forbidden,
        _ => Resolution::Failed,
    }
}

/// errno values, named here so this module needs no `libc` dependency.
mod libc_errno {
    pub const EPERM: i32 = 1;
    pub const ENOENT: i32 = 2;
    pub const EACCES: i32 = 13;
    pub const EXDEV: i32 = 18;
    pub const ENOTDIR: i32 = 20;
    pub const ENAMETOOLONG: i32 = 36;
    pub const ELOOP: i32 = 40;
}

fn static_file(
    base: std::os::fd::BorrowedFd<'_>,
    relative: &str,
    file: File,
    key: FileKey,
    options: &StaticOptions,
) -> Resolution {
    let identity = Representation::new(Coding::Identity, OpenFile { file, key });
    let mut encoded = Vec::new();
    if options.precompressed {
        for (coding, suffix) in [(Coding::Brotli, ".br"), (Coding::Gzip, ".gz")] {
            if let Some(sibling) = open_regular(base, &format!("{relative}{suffix}"), options) {
                encoded.push(Representation::new(coding, sibling));
            }
        }
    }
    let content_type = mime::content_type(relative);
    Resolution::File(Arc::new(StaticFile {
        identity,
        encoded,
        content_type,
    }))
}

fn open_regular(
    base: std::os::fd::BorrowedFd<'_>,
    relative: &str,
    options: &StaticOptions,
) -> Option<OpenFile> {
    let flags = ResolveFlags {
        beneath: !options.follow_symlinks,
        no_symlinks: false,
    };
    let fd = file::open_beneath(base, Path::new(relative), flags).ok()?;
    let stat = file::fstat(fd.as_fd()).ok()?;
    (stat.kind == FileKind::Regular).then(|| OpenFile {
        file: File::from(fd),
        key: FileKey::of(&stat),
    })
}

fn directory(
    base: std::os::fd::BorrowedFd<'_>,
    relative: &str,
    dir: OwnedFd,
    clean: &CleanPath,
    options: &StaticOptions,
) -> Resolution {
    for index in &options.index {
        let candidate = if relative == "." {
            index.clone()
        } else {
            format!("{relative}/{index}")
        };
        if let Some(found) = open_regular(base, &candidate, options) {
            let key = found.key;
            return static_file(base, &candidate, found.file, key, options);
        }
    }
    if !options.autoindex {
        return Resolution::DirectoryForbidden;
    }
    match list(&dir, options.dotfiles) {
        Ok(mut entries) => {
            let html = autoindex::render(clean.as_str(), &mut entries, options.dotfiles);
            Resolution::Listing(Arc::from(html.into_bytes()))
        }
        Err(err) => open_error(&err),
    }
}

/// Read a directory through its open descriptor (`/proc/self/fd/N`), so the listing is of the
/// directory that passed the `RESOLVE_BENEATH` check, not of whatever the path names now.
fn list(dir: &OwnedFd, show_hidden: bool) -> io::Result<Vec<DirEntry>> {
    use std::os::fd::AsRawFd;
    let path = PathBuf::from(format!("/proc/self/fd/{}", dir.as_raw_fd()));
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(&path)? {
        let entry = entry?;
        let name = entry.file_name();
        if !show_hidden && name.as_bytes().first() == Some(&b'.') {
            continue;
        }
        let Some(name) = name.to_str().map(str::to_owned) else {
            continue;
        };
        // A dangling symlink still gets listed, with its own metadata.
        let meta = match std::fs::metadata(entry.path()) {
            Ok(meta) => meta,
            Err(_) => match entry.metadata() {
                Ok(meta) => meta,
                Err(_) => continue,
            },
        };
        use std::os::unix::fs::MetadataExt;
        entries.push(DirEntry {
            name,
            is_dir: meta.is_dir(),
            size: meta.len(),
            mtime_secs: meta.mtime(),
        });
    }
    Ok(entries)
}

/// Apache `UserDir`: a relative pattern is joined to the user's home directory; an absolute one
/// has `*` replaced by the user name.
fn user_directory(pattern: &str, user: &str) -> Option<PathBuf> {
    if pattern.starts_with('/') {
        return Some(PathBuf::from(pattern.replace('*', user)));
    }
    let home = ampd_sys::process::user_home_dir(user).ok()??;
    Some(home.join(OsStr::new(pattern)))
}
