//! Path translation: the blocking half (Flash §5.2). Runs on a helper thread under `amped` and
//! `reactor`, inline under `sped`; never on the event thread of an AMPED loop.
//!
//! Owns: turning a normalised path into a `Resolution` by opening and `fstat`ing beneath the
//! document root (`openat2(RESOLVE_BENEATH)`: a symlink, `..` or magic link cannot lead out of
//! it; an absolute symlink naming a place inside it by the root's path is followed,
//! `file::open_inside`), index files, precompressed siblings, the variants of a path that names
//! no file (`multiviews`), directory listings, and `~user` directories. A path with a trailing '/' names a directory or nothing.
//! Must not touch: the caches (the event loop inserts what this returns).

use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ampd_http::coding::Coding;
use ampd_sys::errno;
use ampd_sys::file::{self, FileKind, ResolveFlags};
use ampd_sys::inotify::{self, Inotify};

use super::autoindex::{self, DirEntry, Listing};
use super::file::{
    FileKey, Negotiated, OpenFile, Representation, Resolution, Resolved, StaticFile, VariantSet,
};
use super::negotiate;
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
    let base = match Base::of(root, clean) {
        Ok(base) => base,
        Err(resolution) => return finish(resolution, None),
    };
    let anchor = base.anchor(root);
    let relative = base.relative.as_str();
    // Watch first, then look: a change between the two is then reported, never lost.
    let watch = watcher.and_then(|w| w.add_watch(&base.watch_dir, WATCH_MASK).ok());
    let flags = resolve_flags(options);
    let fd = match anchor.open(relative, flags) {
        Ok(fd) => fd,
        Err(err) => {
            let resolution = match open_error(&err) {
                // The variants beside it are looked for here, on the helper, and cached with
                // the translation: a negotiated hit reads no directory.
                Resolution::NotFound
                    if options.multiviews && !clean.ends_with_slash() && relative != "." =>
                {
                    variants(anchor, relative, options)
                }
                other => other,
            };
            return finish(resolution, watch);
        }
    };
    let stat = match file::fstat(fd.as_fd()) {
        Ok(stat) => stat,
        Err(_) => return finish(Resolution::Failed, watch),
    };
    let resolution = match stat.kind {
        // A trailing '/' names a directory (POSIX path resolution: `ENOTDIR` otherwise);
        // nginx and Apache answer such a path 404 too. Served, `/file/` would be a second
        // spelling of `/file` that no `exact` location for `/file` sees.
        FileKind::Regular | FileKind::Symlink | FileKind::Other if clean.ends_with_slash() => {
            Resolution::NotFound
        }
        FileKind::Regular => static_file(
            anchor,
            relative,
            File::from(fd),
            FileKey::of(&stat),
            options,
        ),
        FileKind::Directory if !clean.ends_with_slash() && relative != "." => Resolution::AddSlash,
        FileKind::Directory => directory(anchor, relative, fd, options),
        _ => Resolution::Forbidden,
    };
    finish(resolution, watch)
}

/// Where a path is looked up: the directory to start from (the root's, or a `~user`
/// directory opened for this lookup), the path below it, and the directory to watch.
struct Base {
    user_dir: Option<OwnedFd>,
    /// The path of the root or `~user` directory (`Anchor::path`).
    path: PathBuf,
    relative: String,
    watch_dir: PathBuf,
}

impl Base {
    /// `Err`: a `~user` path whose user or directory does not exist (or cannot be opened).
    fn of(root: &DocRoot, clean: &CleanPath) -> Result<Base, Resolution> {
        let userdir = root
            .options
            .userdir
            .as_deref()
            .and_then(|pattern| path::userdir(clean).map(|(user, rest)| (pattern, user, rest)));
        let (user_dir, base_path, relative) = match userdir {
            Some((pattern, user, rest)) => {
                let dir = user_directory(pattern, user).ok_or(Resolution::NotFound)?;
                let fd = file::open_dir(&dir).map_err(|error| open_error(&error))?;
                (Some(fd), dir, rest.trim_start_matches('/').to_owned())
            }
            None => (None, root.path.clone(), clean.relative().to_owned()),
        };
        let relative = if relative.is_empty() {
            ".".to_owned()
        } else {
            relative
        };
        let watch_dir = if clean.ends_with_slash() || relative == "." {
            base_path.join(&relative)
        } else {
            base_path.join(Path::new(&relative).parent().unwrap_or(Path::new(".")))
        };
        Ok(Base {
            user_dir,
            path: base_path,
            relative,
            watch_dir,
        })
    }

    fn anchor<'a>(&'a self, root: &'a DocRoot) -> Anchor<'a> {
        Anchor {
            dir: self.user_dir.as_ref().map_or(root.dir.as_fd(), AsFd::as_fd),
            path: &self.path,
        }
    }
}

/// Where a lookup starts: a directory and the path it was opened by, by which an absolute
/// symbolic link inside it names a file inside it (`file::open_inside`: followed like a
/// relative link to the same file, where `RESOLVE_BENEATH` alone refuses every absolute one).
#[derive(Clone, Copy)]
struct Anchor<'a> {
    dir: std::os::fd::BorrowedFd<'a>,
    path: &'a Path,
}

impl Anchor<'_> {
    fn open(self, relative: &str, flags: ResolveFlags) -> io::Result<OwnedFd> {
        file::open_inside(self.dir, self.path, Path::new(relative), flags)
    }

    fn stat(self, relative: &str, flags: ResolveFlags) -> io::Result<file::FileStat> {
        file::stat_inside(self.dir, self.path, Path::new(relative), flags)
    }
}

fn resolve_flags(options: &StaticOptions) -> ResolveFlags {
    ResolveFlags {
        beneath: !options.follow_symlinks,
        no_symlinks: false,
    }
}

/// Precompressed siblings looked for beside a file, best first.
const SIBLINGS: [(Coding, &str); 2] = [(Coding::Brotli, ".br"), (Coding::Gzip, ".gz")];

/// What a cached translation of a file rests on: the file's identity and, for each
/// precompressed sibling looked for, its identity or its absence. A translation whose basis
/// still holds need not be redone: the descriptors it holds are of the same files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Basis {
    pub file: FileKey,
    /// `StaticFile::directory`.
    pub directory: Option<FileKey>,
    /// In the order of `SIBLINGS` (Brotli, gzip); `None`: absent (or not looked for).
    pub siblings: [Option<FileKey>; 2],
}

impl Basis {
    /// The basis of `resolved` for the request path `clean`, if it is a file named by the path
    /// itself (a directory's index is translated afresh: which index wins may have changed).
    #[must_use]
    pub fn of(resolved: &Resolved, clean: &CleanPath) -> Option<Basis> {
        let Resolution::File(file) = &resolved.resolution else {
            return None;
        };
        if clean.ends_with_slash() || clean.relative().is_empty() {
            return None;
        }
        let sibling = |(coding, _): (Coding, &str)| {
            file.encoded
                .iter()
                .find(|representation| representation.coding == coding)
                .map(|representation| representation.file.key)
        };
        Some(Basis {
            file: file.identity.file.key,
            directory: file.directory,
            siblings: SIBLINGS.map(sibling),
        })
    }
}

/// Whether the translation `basis` describes still holds for `clean`, checked with `stat`s
/// only (no file is opened), after watching the directory as `resolve` does. A cached
/// translation older than `revalidate_after` is checked this way before it is redone: on a
/// network or FUSE filesystem a lookup is one round trip, an open, `fstat` and close three or
/// four, per file (bench/disk_bound.sh's latency device: 0.7 opens per request at the default
/// of one second).
#[must_use]
pub fn revalidate(
    root: &DocRoot,
    clean: &CleanPath,
    watcher: Option<&Inotify>,
    basis: &Basis,
) -> Revalidated {
    let options = &root.options;
    let Ok(base) = Base::of(root, clean) else {
        return Revalidated::Changed;
    };
    let watch = watcher.and_then(|w| w.add_watch(&base.watch_dir, WATCH_MASK).ok());
    let fd = base.anchor(root);
    let relative = base.relative.as_str();
    if options.precompressed {
        // Siblings absent then are absent now while the directory is unchanged (one lookup
        // for every file of the directory, not one per sibling and file).
        let directory = stat_key(fd, parent(relative), options, FileKind::Directory);
        if basis.directory.is_none() || directory != basis.directory {
            return Revalidated::Changed;
        }
    } else if basis.siblings.iter().any(Option::is_some) {
        return Revalidated::Changed;
    }
    if stat_key(fd, relative, options, FileKind::Regular) != Some(basis.file) {
        return Revalidated::Changed;
    }
    for ((_, suffix), known) in SIBLINGS.iter().zip(basis.siblings) {
        if let Some(known) = known {
            let now = stat_key(
                fd,
                &format!("{relative}{suffix}"),
                options,
                FileKind::Regular,
            );
            if now != Some(known) {
                return Revalidated::Changed;
            }
        }
    }
    Revalidated::Unchanged { watch }
}

/// What `revalidate` found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Revalidated {
    /// The same files: keep the translation (with this directory watch).
    Unchanged { watch: Option<i32> },
    /// Something differs, or could not be checked: translate afresh.
    Changed,
}

fn finish(resolution: Resolution, watch: Option<i32>) -> Resolved {
    Resolved {
        resolution,
        watch,
        at: Instant::now(),
    }
}

fn open_error(err: &io::Error) -> Resolution {
    // A path that left the root is answered as if the file did not exist, so the response does
    // not confirm what lies outside.
    if errno::names_nothing(err) || errno::left_the_root(err) {
        Resolution::NotFound
    } else if errno::access_refused(err) {
        Resolution::Forbidden
    } else if errno::out_of_descriptors(err) {
        Resolution::Exhausted
    } else {
        Resolution::Failed
    }
}

fn static_file(
    base: Anchor<'_>,
    relative: &str,
    file: File,
    key: FileKey,
    options: &StaticOptions,
) -> Resolution {
    let content_type = options.types.content_type(relative);
    match open_static(
        base,
        relative,
        OpenFile::new(file, key),
        options,
        content_type,
    ) {
        Ok(file) => Resolution::File(Arc::new(file)),
        Err(resolution) => resolution,
    }
}

/// `file` (found at `relative`) with its precompressed siblings; `Err(Resolution::Exhausted)`
/// when no descriptor was left to look for them.
fn open_static(
    base: Anchor<'_>,
    relative: &str,
    file: OpenFile,
    options: &StaticOptions,
    content_type: &'static str,
) -> Result<StaticFile, Resolution> {
    let identity = Representation::new(Coding::Identity, file);
    let mut encoded = Vec::new();
    let mut directory = None;
    if options.precompressed {
        // Before the siblings are looked for: a sibling added after this changes the
        // directory's time, and the next check sees it.
        directory = stat_key(base, parent(relative), options, FileKind::Directory)
            .filter(|key| settled(key, SystemTime::now()));
        for (coding, suffix) in SIBLINGS {
            match open_regular(base, &format!("{relative}{suffix}"), options) {
                Ok(Some(sibling)) => encoded.push(Representation::new(coding, sibling)),
                Ok(None) => {}
                // Not "absent": a translation without a sibling that exists would be kept
                // while the directory is unchanged.
                Err(exhausted) => return Err(exhausted),
            }
        }
    }
    Ok(StaticFile {
        identity,
        encoded,
        content_type,
        directory,
        negotiated: None,
    })
}

/// The variants of `relative`, a path that names nothing (Apache `MultiViews`): the files
/// `name.*` of its directory that `negotiate::candidates` takes, opened beneath `base` as a
/// request for each would be, with their siblings. `NotFound` when there are none.
fn variants(base: Anchor<'_>, relative: &str, options: &StaticOptions) -> Resolution {
    let (directory, name) = relative.rsplit_once('/').unwrap_or((".", relative));
    let flags = resolve_flags(options);
    let dir = match base.open(directory, flags) {
        Ok(dir) => dir,
        Err(error) => return not_found_unless_exhausted(&error),
    };
    let entries = match entry_names(&dir) {
        Ok(entries) => entries,
        Err(error) => return not_found_unless_exhausted(&error),
    };
    let mut opened = Vec::new();
    for candidate in negotiate::candidates(name, entries, &options.types) {
        // A script another location runs (`doc.pl` beside `extension = ".pl"`) is never a
        // variant: its source would be sent.
        if is_script(&candidate.file_name, options) {
            continue;
        }
        let below = if directory == "." {
            candidate.file_name.clone()
        } else {
            format!("{directory}/{}", candidate.file_name)
        };
        match open_regular(base, &below, options) {
            Ok(Some(file)) => opened.push((candidate, below, file)),
            Ok(None) => {}
            Err(exhausted) => return exhausted,
        }
    }
    if opened.is_empty() {
        return Resolution::NotFound;
    }
    let found: Vec<_> = opened
        .iter()
        .map(|(candidate, ..)| candidate.clone())
        .collect();
    let vary = negotiate::vary_fields(&found, options.strict_negotiation);
    let mut variants = Vec::with_capacity(opened.len());
    for (candidate, below, file) in opened {
        match open_static(base, &below, file, options, candidate.media_type) {
            Ok(mut file) => {
                file.negotiated = Some(Negotiated {
                    vary,
                    language: candidate.language,
                });
                variants.push(Arc::new(file));
            }
            Err(exhausted) => return exhausted,
        }
    }
    Resolution::Variants(Arc::new(VariantSet { variants }))
}

fn not_found_unless_exhausted(error: &io::Error) -> Resolution {
    match open_error(error) {
        Resolution::Exhausted => Resolution::Exhausted,
        _ => Resolution::NotFound,
    }
}

/// The names in a directory, read through its open descriptor (`/proc/self/fd/N`, as `list`
/// does), so they are of the directory that passed the `RESOLVE_BENEATH` check.
fn entry_names(dir: &OwnedFd) -> io::Result<Vec<String>> {
    use std::os::fd::AsRawFd;
    let path = PathBuf::from(format!("/proc/self/fd/{}", dir.as_raw_fd()));
    let mut names = Vec::new();
    for entry in std::fs::read_dir(&path)? {
        if let Ok(name) = entry?.file_name().into_string() {
            names.push(name);
        }
    }
    Ok(names)
}

/// The key of `relative` below `base` if it is of `kind`, found without opening it.
fn stat_key(
    base: Anchor<'_>,
    relative: &str,
    options: &StaticOptions,
    kind: FileKind,
) -> Option<FileKey> {
    base.stat(relative, resolve_flags(options))
        .ok()
        .filter(|stat| stat.kind == kind)
        .map(|stat| FileKey::of(&stat))
}

/// Whether `key`'s modification time is old enough to vouch that nothing changed since: a
/// filesystem's clock ticks coarsely (jiffies, or a server's), so an entry added within the
/// same tick as the `stat` could leave the time as it was. Git's "racy timestamp" rule: a
/// time within `RACY` of now is not trusted (the translation is then redone next time).
fn settled(key: &FileKey, now: SystemTime) -> bool {
    const RACY: Duration = Duration::from_secs(2);
    let Ok(since_epoch) = now.duration_since(UNIX_EPOCH) else {
        return false;
    };
    let mtime = Duration::new(u64::try_from(key.mtime_secs).unwrap_or(0), key.mtime_nanos);
    since_epoch.saturating_sub(mtime) >= RACY
}

/// The directory part of a relative path (`""`, the base itself, for a bare name).
fn parent(relative: &str) -> &str {
    relative
        .rsplit_once('/')
        .map_or("", |(directory, _)| directory)
}

/// The regular file `relative` below `base`, opened; `Ok(None)` when there is none (or it
/// cannot be read); `Err(Resolution::Exhausted)` when no descriptor was left to look.
fn open_regular(
    base: Anchor<'_>,
    relative: &str,
    options: &StaticOptions,
) -> Result<Option<OpenFile>, Resolution> {
    let flags = resolve_flags(options);
    let fd = match base.open(relative, flags) {
        Ok(fd) => fd,
        Err(error) => {
            return match open_error(&error) {
                Resolution::Exhausted => Err(Resolution::Exhausted),
                _ => Ok(None),
            }
        }
    };
    let Ok(stat) = file::fstat(fd.as_fd()) else {
        return Ok(None);
    };
    Ok((stat.kind == FileKind::Regular).then(|| OpenFile::new(File::from(fd), FileKey::of(&stat))))
}

fn directory(
    base: Anchor<'_>,
    relative: &str,
    dir: OwnedFd,
    options: &StaticOptions,
) -> Resolution {
    for index in &options.index {
        let candidate = if relative == "." {
            index.clone()
        } else {
            format!("{relative}/{index}")
        };
        match open_regular(base, &candidate, options) {
            Ok(Some(_)) if is_script(index, options) || options.routed_indexes.contains(index) => {
                return Resolution::Script(index.as_str().into());
            }
            Ok(Some(found)) => {
                let key = found.key;
                return static_file(base, &candidate, found.file, key, options);
            }
            Ok(None) => {}
            // Not a listing or a 403 for want of a descriptor to open the index with.
            Err(exhausted) => return exhausted,
        }
    }
    if options.multiviews {
        // An index named by its variants (`index.html.en`, `index.html.fr`), as Apache's
        // `DirectoryIndex` under `MultiViews`; never one another location answers.
        for index in &options.index {
            if is_script(index, options) || options.routed_indexes.contains(index) {
                continue;
            }
            let candidate = if relative == "." {
                index.clone()
            } else {
                format!("{relative}/{index}")
            };
            match variants(base, &candidate, options) {
                Resolution::NotFound => {}
                found => return found,
            }
        }
    }
    if !options.autoindex {
        return Resolution::DirectoryForbidden;
    }
    match list(base, relative, &dir, options) {
        Ok(entries) => Resolution::Listing(Arc::new(Listing { entries })),
        Err(err) => open_error(&err),
    }
}

/// Whether index file `name` is run by a script location of the site (`index.php` where
/// `.php` goes to FastCGI), so that its source is never sent.
fn is_script(name: &str, options: &StaticOptions) -> bool {
    options
        .script_indexes
        .iter()
        .any(|extension| name.len() > extension.len() && name.ends_with(extension.as_str()))
}

/// Read a directory through its open descriptor (`/proc/self/fd/N`), so the listing is of the
/// directory that passed the `RESOLVE_BENEATH` check, not of whatever the path names now.
///
/// Only what a link can fetch is listed: names the path rules would refuse (`autoindex::
/// is_listable_name`) are left out, and each entry is opened the way a request for it would be
/// (beneath `base`, with the location's symlink rule) and kept only if that gives a regular
/// file or a directory; a FIFO, a dangling symlink or one leading out of the root is not shown.
fn list(
    base: Anchor<'_>,
    relative: &str,
    dir: &OwnedFd,
    options: &StaticOptions,
) -> io::Result<Vec<DirEntry>> {
    use std::os::fd::AsRawFd;
    let path = PathBuf::from(format!("/proc/self/fd/{}", dir.as_raw_fd()));
    let flags = resolve_flags(options);
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(&path)? {
        let entry = entry?;
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        if !autoindex::is_listable_name(&name, options.dotfiles) {
            continue;
        }
        let below = if relative == "." {
            name.clone()
        } else {
            format!("{relative}/{name}")
        };
        let fd = match base.open(&below, flags) {
            Ok(fd) => fd,
            // Out of descriptors or memory: the listing would silently miss entries, so the
            // request fails instead (and can be retried).
            Err(err) if errno::out_of_resources(&err) => return Err(err),
            // Missing since read, refused, escaping, a socket: not fetchable, not listed.
            Err(_) => continue,
        };
        let Ok(stat) = file::fstat(fd.as_fd()) else {
            continue;
        };
        let is_dir = match stat.kind {
            FileKind::Regular => false,
            FileKind::Directory => true,
            _ => continue,
        };
        entries.push(DirEntry {
            name,
            is_dir,
            size: stat.size,
            mtime_secs: stat.mtime_secs,
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, SystemTime};

    struct Dir(PathBuf);

    impl Dir {
        fn new(name: &str) -> Dir {
            let path = std::env::temp_dir().join(format!(
                "ampd-resolve-{name}-{}-{:?}",
                std::process::id(),
                std::thread::current().id()
            ));
            let _ = std::fs::remove_dir_all(&path);
            std::fs::create_dir_all(path.join("docs")).unwrap();
            Dir(path)
        }

        /// Date the directory an hour back, as a directory left alone for a while is (a
        /// directory changed within the last seconds is not trusted: `settled`).
        fn settle(&self) {
            let docs = std::fs::File::open(self.0.join("docs")).unwrap();
            docs.set_modified(SystemTime::now() - Duration::from_secs(3600))
                .unwrap();
        }

        fn root(&self, precompressed: bool) -> DocRoot {
            DocRoot::open(StaticOptions {
                precompressed,
                ..StaticOptions::new(self.0.clone())
            })
            .unwrap()
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn clean(path: &str) -> CleanPath {
        CleanPath::from_normalized(path).unwrap()
    }

    /// Translate `path` and check the translation again at once, with `check` done in between.
    fn check_after(dir: &Dir, root: &DocRoot, path: &str, check: impl FnOnce()) -> Revalidated {
        dir.settle();
        let resolved = resolve(root, &clean(path), None);
        let basis = Basis::of(&resolved, &clean(path)).expect("a file has a basis");
        check();
        revalidate(root, &clean(path), None, &basis)
    }

    #[test]
    fn an_untouched_file_and_its_siblings_still_hold() {
        let dir = Dir::new("untouched");
        std::fs::write(dir.0.join("docs/page.html"), "page").unwrap();
        std::fs::write(dir.0.join("docs/page.html.gz"), "gz").unwrap();
        let root = dir.root(true);
        dir.settle();
        let resolved = resolve(&root, &clean("/docs/page.html"), None);
        let basis = Basis::of(&resolved, &clean("/docs/page.html")).unwrap();
        assert!(basis.siblings[0].is_none(), "no .br");
        assert!(basis.siblings[1].is_some(), ".gz found");
        let checked = revalidate(&root, &clean("/docs/page.html"), None, &basis);
        assert_eq!(checked, Revalidated::Unchanged { watch: None });
        let renewed = resolved.renewed(None);
        match (&renewed.resolution, &resolved.resolution) {
            (Resolution::File(again), Resolution::File(first)) => {
                assert!(Arc::ptr_eq(again, first), "the same open files are kept");
            }
            _ => panic!("a file stays a file"),
        }
    }

    #[test]
    fn any_change_to_the_file_or_its_siblings_is_seen() {
        let dir = Dir::new("changes");
        let page = dir.0.join("docs/page.html");
        std::fs::write(&page, "page").unwrap();
        let root = dir.root(true);
        let path = "/docs/page.html";
        // Same size, different modification time (an in-place edit).
        let edited = check_after(&dir, &root, path, || {
            let file = std::fs::File::options().write(true).open(&page).unwrap();
            file.set_modified(SystemTime::now() - Duration::from_secs(3600))
                .unwrap();
        });
        assert_eq!(edited, Revalidated::Changed);
        let replaced = check_after(&dir, &root, path, || {
            let staging = dir.0.join("docs/staging");
            std::fs::write(&staging, "new!").unwrap();
            std::fs::rename(&staging, &page).unwrap();
        });
        assert_eq!(replaced, Revalidated::Changed, "renamed over");
        let sibling = dir.0.join("docs/page.html.br");
        let appeared = check_after(&dir, &root, path, || {
            std::fs::write(&sibling, "br").unwrap()
        });
        assert_eq!(appeared, Revalidated::Changed, "a sibling appeared");
        let gone = check_after(&dir, &root, path, || {
            std::fs::remove_file(&sibling).unwrap()
        });
        assert_eq!(gone, Revalidated::Changed, "a sibling went away");
        let deleted = check_after(&dir, &root, path, || std::fs::remove_file(&page).unwrap());
        assert_eq!(deleted, Revalidated::Changed, "deleted");
    }

    #[test]
    fn siblings_are_not_looked_for_when_precompressed_is_off() {
        let dir = Dir::new("no-siblings");
        std::fs::write(dir.0.join("docs/page.html"), "page").unwrap();
        let root = dir.root(false);
        let checked = check_after(&dir, &root, "/docs/page.html", || {
            std::fs::write(dir.0.join("docs/page.html.gz"), "gz").unwrap();
        });
        assert_eq!(checked, Revalidated::Unchanged { watch: None });
    }

    #[test]
    fn a_directory_changed_just_now_does_not_vouch_for_absent_siblings() {
        let dir = Dir::new("racy");
        std::fs::write(dir.0.join("docs/page.html"), "page").unwrap();
        let root = dir.root(true);
        // Not settled: the directory was written a moment ago.
        let resolved = resolve(&root, &clean("/docs/page.html"), None);
        let basis = Basis::of(&resolved, &clean("/docs/page.html")).unwrap();
        assert_eq!(basis.directory, None);
        let checked = revalidate(&root, &clean("/docs/page.html"), None, &basis);
        assert_eq!(checked, Revalidated::Changed, "translated afresh instead");
        let key = |secs: i64| FileKey {
            dev: 1,
            ino: 1,
            size: 0,
            mtime_secs: secs,
            mtime_nanos: 0,
        };
        let now = UNIX_EPOCH + Duration::from_secs(1_000_000);
        assert!(settled(&key(999_990), now));
        assert!(!settled(&key(999_999), now));
        assert!(!settled(&key(1_000_005), now), "a time in the future");
    }

    #[test]
    fn an_index_the_site_runs_as_a_script_is_handed_over_not_sent() {
        let dir = Dir::new("script-index");
        std::fs::write(dir.0.join("docs/index.php"), "<?php echo 1;").unwrap();
        std::fs::write(dir.0.join("docs/index.html"), "html").unwrap();
        let root = DocRoot::open(StaticOptions {
            index: vec!["index.php".to_owned(), "index.html".to_owned()],
            script_indexes: vec![".php".to_owned()],
            ..dir.root(false).options
        })
        .unwrap();
        let index = resolve(&root, &clean("/docs/"), None);
        assert!(
            matches!(&index.resolution, Resolution::Script(name) if &**name == "index.php"),
            "{:?}",
            index.resolution
        );
        std::fs::remove_file(dir.0.join("docs/index.php")).unwrap();
        let index = resolve(&root, &clean("/docs/"), None);
        assert!(
            matches!(index.resolution, Resolution::File(_)),
            "the next index"
        );
    }

    #[test]
    fn only_a_file_named_by_the_path_itself_has_a_basis() {
        let dir = Dir::new("basis");
        std::fs::write(dir.0.join("docs/index.html"), "index").unwrap();
        let root = dir.root(true);
        let index = resolve(&root, &clean("/docs/"), None);
        assert!(matches!(index.resolution, Resolution::File(_)));
        assert!(Basis::of(&index, &clean("/docs/")).is_none(), "an index");
        let missing = resolve(&root, &clean("/docs/nope"), None);
        assert!(
            Basis::of(&missing, &clean("/docs/nope")).is_none(),
            "not found"
        );
        let slash = resolve(&root, &clean("/docs"), None);
        assert!(Basis::of(&slash, &clean("/docs")).is_none(), "a redirect");
    }
}
