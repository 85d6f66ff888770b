//! What a resolved request path is: an open file with its metadata and representations.
//!
//! Owns: `OpenFile` (with its `ResidencyMemo`), `StaticFile`, `Representation`, `Resolution`,
//! `FileKey`.
//! Must not touch: the disk (these are built by `resolve`, which runs on a helper thread).

use std::fs::File;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use ampd_http::coding::Coding;
use ampd_http::date::format_http_date;
use ampd_sys::file::FileStat;

/// Identity and version of a file's contents: a cache entry keyed by it can only be stale if the
/// file changed without its size or nanosecond mtime changing, which inotify reports (see
/// `watch.rs`) — the two together are the freshness guarantee documented in docs/architecture.md.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FileKey {
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub mtime_secs: i64,
    pub mtime_nanos: u32,
}

impl FileKey {
    #[must_use]
    pub fn of(stat: &FileStat) -> FileKey {
        FileKey {
            dev: stat.dev,
            ino: stat.ino,
            size: stat.size,
            mtime_secs: stat.mtime_secs,
            mtime_nanos: stat.mtime_nanos,
        }
    }
}

/// A regular file held open, so that a rename or delete on disk cannot change what an in-flight
/// response sends (the bytes come from this inode, by `sendfile` or from the file cache).
#[derive(Debug)]
pub struct OpenFile {
    pub file: File,
    pub key: FileKey,
    /// What the residency test last found of this file (`serve::range_resident`).
    pub residency: ResidencyMemo,
}

impl OpenFile {
    #[must_use]
    pub fn new(file: File, key: FileKey) -> OpenFile {
        OpenFile {
            file,
            key,
            residency: ResidencyMemo::default(),
        }
    }

    #[must_use]
    pub fn size(&self) -> u64 {
        self.key.size
    }
}

/// How long a residency test that found a file's first bytes in the page cache vouches for
/// them. A hot file is sent thousands of times a second and its pages are the last the kernel
/// evicts, so one `cachestat` per moment does for all of its responses (a test per response
/// was 2.5 % of the server's CPU on 100 KiB keep-alive requests, docs/research/benchmarks.md); a page
/// evicted within the moment costs one `sendfile` that waits for the disk.
pub const RESIDENCY_TRUST: Duration = Duration::from_millis(50);

/// The last positive residency test of a file's first `through` bytes, and when it was made
/// (milliseconds since the process's first test, plus one: zero is "never"). Shared by every
/// connection sending the file; a race between two updates can only mix two findings that
/// were both positive.
#[derive(Debug, Default)]
pub struct ResidencyMemo {
    through: AtomicU64,
    at: AtomicU64,
}

impl ResidencyMemo {
    /// Whether `[offset, end)` is resident: yes if a test made less than `RESIDENCY_TRUST` ago
    /// found the first `end` bytes so, otherwise what `test` says, remembered when the range
    /// starts at the file's start (what a whole response sends). One clock read either way.
    pub fn resident(&self, offset: u64, end: u64, test: impl FnOnce() -> bool) -> bool {
        let now = memo_clock();
        if self.vouches_at(end, now) {
            return true;
        }
        let resident = test();
        if resident && offset == 0 {
            self.found_at(end, now);
        }
        resident
    }

    fn vouches_at(&self, end: u64, now: u64) -> bool {
        let at = self.at.load(Ordering::Relaxed);
        let trust = u64::try_from(RESIDENCY_TRUST.as_millis()).unwrap_or(u64::MAX);
        at != 0 && now.saturating_sub(at) < trust && end <= self.through.load(Ordering::Relaxed)
    }

    fn found_at(&self, through: u64, now: u64) {
        self.through.store(through, Ordering::Relaxed);
        self.at.store(now, Ordering::Relaxed);
    }
}

/// Milliseconds since the first call, plus one.
fn memo_clock() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    let start = START.get_or_init(Instant::now);
    u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX - 1) + 1
}

/// One encoding of a resource: the file itself, or a precompressed `.gz`/`.br` sibling.
#[derive(Debug)]
pub struct Representation {
    pub coding: Coding,
    pub file: Arc<OpenFile>,
    /// Strong validator, quoted: `"<mtime secs hex>.<mtime nanos hex>-<size hex>[-gz|-br]"`.
    /// nginx's shape uses whole seconds, which gives two versions written in one second the
    /// same tag; the nanoseconds make it strong in fact (RFC 9110 §8.8.3), and the coding
    /// suffix keeps representations apart.
    pub etag: Box<[u8]>,
    pub last_modified: u64,
    pub last_modified_text: [u8; 29],
}

impl Representation {
    #[must_use]
    pub fn new(coding: Coding, file: OpenFile) -> Representation {
        let mtime = u64::try_from(file.key.mtime_secs).unwrap_or(0);
        let suffix = match coding {
            Coding::Identity => "",
            Coding::Gzip => "-gz",
            Coding::Brotli => "-br",
        };
        let etag = format!(
            "\"{:x}.{:x}-{:x}{suffix}\"",
            mtime, file.key.mtime_nanos, file.key.size
        )
        .into_bytes()
        .into_boxed_slice();
        Representation {
            coding,
            file: Arc::new(file),
            etag,
            last_modified: mtime,
            last_modified_text: format_http_date(mtime),
        }
    }
}

/// A static file with everything a response needs that does not depend on the request.
#[derive(Debug)]
pub struct StaticFile {
    pub identity: Representation,
    /// Precompressed siblings, best first (Brotli, then gzip).
    pub encoded: Vec<Representation>,
    pub content_type: &'static str,
    /// The directory holding the file, as it was before its siblings were looked for: while
    /// this key (with its modification time) is unchanged, no entry was added to or removed
    /// from it, so siblings that were absent still are (`resolve::revalidate`). `None` when
    /// siblings are not looked for, or the directory could not be examined.
    pub directory: Option<FileKey>,
    /// Set when the file is a variant content negotiation chose among (`VariantSet`): what its
    /// head says beyond the file itself.
    pub negotiated: Option<Negotiated>,
}

impl StaticFile {
    /// Whether responses for this file depend on `Accept-Encoding` (and so carry `Vary`).
    #[must_use]
    pub fn varies(&self) -> bool {
        !self.encoded.is_empty()
    }

    /// The `Vary` value of this file's responses: the request fields that chose it among its
    /// variants and among its codings (RFC 9110 §12.5.5), `None` when no field did.
    #[must_use]
    pub fn vary(&self) -> Option<&'static str> {
        let fields = self.negotiated.as_ref().map(|n| n.vary).unwrap_or_default();
        match (fields.accept, fields.accept_language, self.varies()) {
            (false, false, false) => None,
            (false, false, true) => Some("Accept-Encoding"),
            (true, false, false) => Some("Accept"),
            (true, false, true) => Some("Accept, Accept-Encoding"),
            (false, true, false) => Some("Accept-Language"),
            (false, true, true) => Some("Accept-Language, Accept-Encoding"),
            (true, true, false) => Some("Accept, Accept-Language"),
            (true, true, true) => Some("Accept, Accept-Language, Accept-Encoding"),
        }
    }

    /// The `Content-Language` of a negotiated variant named with a language (`doc.fr.html`).
    #[must_use]
    pub fn language(&self) -> Option<&str> {
        self.negotiated.as_ref()?.language.as_deref()
    }

    /// The codings this file can be served in, for `ampd_http::coding::negotiate`.
    #[must_use]
    pub fn codings(&self) -> Vec<Coding> {
        let mut codings: Vec<Coding> = self.encoded.iter().map(|r| r.coding).collect();
        codings.push(Coding::Identity);
        codings
    }

    #[must_use]
    pub fn representation(&self, coding: Coding) -> &Representation {
        self.encoded
            .iter()
            .find(|r| r.coding == coding)
            .unwrap_or(&self.identity)
    }
}

/// Which request fields content negotiation consulted to choose among a resource's variants:
/// those the variants differ in, or both where a location answers `406` (RFC 9110 §12.5.5).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct VaryFields {
    pub accept: bool,
    pub accept_language: bool,
}

/// What a file reached by content negotiation carries beyond the file itself.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Negotiated {
    pub vary: VaryFields,
    /// Its language tag, from its name (`fr` of `doc.fr.html`): `Content-Language`.
    pub language: Option<Arc<str>>,
}

/// The variants of a path that names no file (Apache `MultiViews`): the files `name.*` beside
/// it whose extensions all name a type or a language, in the server's order of preference
/// (`content::negotiate`), each with its precompressed siblings. Never empty.
#[derive(Debug)]
pub struct VariantSet {
    pub variants: Vec<Arc<StaticFile>>,
}

/// What a request path translates to. Cached by `PathCache` (negative answers too).
#[derive(Clone, Debug)]
pub enum Resolution {
    File(Arc<StaticFile>),
    /// No such file, but variants of it to choose among by the request's `Accept` and
    /// `Accept-Language` (a location with `multiviews`).
    Variants(Arc<VariantSet>),
    /// A directory named without its trailing slash: `301` to the same path plus `/`.
    AddSlash,
    /// A directory without an index file, listed (autoindex on): its entries, rendered per
    /// request (the query chooses order and format). Never cached: it is cheap to rebuild and a
    /// listing that lags the directory would confuse.
    Listing(Arc<super::listing::Listing>),
    /// A directory without an index file, autoindex off.
    DirectoryForbidden,
    NotFound,
    /// A directory whose index file (this name) another location may answer: a script
    /// (`StaticOptions::script_indexes`), or a file a location of its own names
    /// (`routed_indexes`). The request is routed again with the name appended.
    Script(Box<str>),
    /// The file exists but may not be read (permissions, or not a regular file).
    Forbidden,
    /// The translation failed for a reason that is ours, not the client's.
    Failed,
    /// No descriptor was left to open the file (`EMFILE`/`ENFILE`): a passing condition,
    /// answered `503` with `Retry-After` once relieving the caches and one retry did not help.
    Exhausted,
}

/// A resolution plus what the cache needs to keep it honest.
#[derive(Debug)]
pub struct Resolved {
    pub resolution: Resolution,
    /// The inotify watch on the directory whose changes invalidate this resolution.
    pub watch: Option<i32>,
    pub at: Instant,
}

impl Resolved {
    /// The same translation, found still true now (`resolve::revalidate`).
    #[must_use]
    pub fn renewed(&self, watch: Option<i32>) -> Resolved {
        Resolved {
            resolution: self.resolution.clone(),
            watch,
            at: Instant::now(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_residency_memo_vouches_for_what_it_found_and_only_for_a_moment() {
        let memo = ResidencyMemo::default();
        assert!(!memo.vouches_at(1, 5), "nothing found yet");
        memo.found_at(100 << 10, 1000);
        assert!(memo.vouches_at(100 << 10, 1000));
        assert!(
            memo.vouches_at(4096, 1000 + 49),
            "a prefix of what was found"
        );
        assert!(
            !memo.vouches_at((100 << 10) + 1, 1000),
            "past what was found"
        );
        let trust = u64::try_from(RESIDENCY_TRUST.as_millis()).unwrap();
        assert!(!memo.vouches_at(4096, 1000 + trust), "the moment is over");
        memo.found_at(4096, 2000);
        assert!(
            !memo.vouches_at(8192, 2000),
            "a later, shorter finding replaces the longer"
        );
    }
}
