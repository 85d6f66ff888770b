//! The static-file response: representation, preconditions, ranges, head and body.
//!
//! Owns: the decisions RFC 9110 makes for a `GET`/`HEAD` of a file — content negotiation of
//! precompressed siblings (§12.5.3), preconditions in §13.2.2 order, ranges (§14), and the
//! choice of body source: file cache + `writev` for small files, `sendfile` for large ones
//! (JAWS §4.3). Writes the head into the caller's buffer and names the body segments.
//! `Served` is here, not with the vocabulary in `sink.rs`: it carries a `Job`, and `sink.rs` sits
//! below the jobs (`autoindex`, which a job reads a directory for, writes into a `Sink`).
//! Must not touch: sockets; the disk except a residency test and reads of resident pages.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;

use ampd_http::coding::{self, Coding};
use ampd_http::conditional::{self, Precondition, Validators};
use ampd_http::multipart::Multipart;
use ampd_http::range::{self, ByteRange, RangeOutcome};
use ampd_http::request::{Method, RequestHead};
use ampd_http::response::write_decimal;

use super::caches::Caches;
use super::compressed::Compressed;
use super::file::{OpenFile, Representation, StaticFile};
use super::head_cache::{validator_fields, Coded};
use super::job::{self, Job};
use super::sink::{DiskAccess, ResponseContext, Sink};
use crate::config::compression::{Compression, Encoding};
use crate::response::compress::policy::{self, Decision, Wanted};
use crate::response::{
    cache_fields, cache_headers, common_fields, date_and_added_fields, date_and_persistence,
    Http1Framing, StatusAnswer,
};

/// The outcome of `serve_file`.
#[derive(Debug)]
pub enum Served {
    /// The response was written to the sink.
    Sent { status: u16 },
    /// The answer is a status page, which the caller writes (`Conn::answer_status`, the one
    /// place every status page passes through).
    Status(StatusAnswer),
    /// The body must come into memory first: run the job, store its result with
    /// `Caches::remember_data` (a `Job::Load`) or `Caches::remember_compressed` (a
    /// `Job::Compress`), then call `serve_file` again (with the compression as `fresh`).
    NeedData(Job),
}

/// Write the response to `request` for `file` into `sink`. `compression`: the location's
/// on-the-fly compression; `fresh`: a compression just done for this request (in case the
/// compressed cache did not keep it).
#[allow(clippy::too_many_arguments)]
pub fn serve_file(
    request: &RequestHead,
    file: &StaticFile,
    watch: Option<i32>,
    caches: &Caches,
    context: &ResponseContext<'_>,
    compression: &Compression,
    fresh: Option<&Compressed>,
    sink: &mut dyn Sink,
) -> Served {
    let accept_encoding = request.header("accept-encoding");
    let coding = if file.varies() {
        coding::negotiate(accept_encoding, &file.codings())
    } else {
        Coding::Identity
    };
    let representation = file.representation(coding);
    // A precompressed sibling the client takes wins: it costs no CPU. Otherwise the file may
    // be compressed on the fly, once per coding (the compressed cache).
    // The location's own `Cache-Control` is added after the decision (`cache_fields`, its
    // `headers`): a `no-transform` there is honoured here.
    let no_transform = context
        .head
        .cache_control
        .is_some_and(|value| policy::no_transform(value.as_bytes()))
        || policy::fields_forbid_transform(context.head.extra_headers);
    let mut decision = match coding {
        Coding::Identity if !no_transform => {
            let wanted = Wanted {
                accept_encoding,
                range: request.header("range").is_some(),
            };
            let size = representation.file.size();
            policy::decide_for_file(compression, wanted, file.content_type, size)
        }
        Coding::Identity | Coding::Gzip | Coding::Brotli => Decision::Untouched,
    };
    if matches!(decision, Decision::Compress(..))
        && !caches.compressed.takes(representation.file.size())
    {
        decision = Decision::Identity;
    }
    // A compressed body's validator is weak (RFC 9110 §8.8.1): `If-None-Match` compares
    // weakly and matches it, `If-Match` strongly and does not.
    let weak_etag = matches!(decision, Decision::Compress(..)).then(|| {
        let mut weak = b"W/".to_vec();
        weak.extend_from_slice(&representation.etag);
        weak
    });
    let validators = Validators {
        etag: Some(weak_etag.as_deref().unwrap_or(&representation.etag)),
        last_modified: Some(representation.last_modified),
    };
    let framing = Http1Framing::delimited(context.head.persistence);
    match conditional::evaluate(request, &validators) {
        Precondition::Proceed => {}
        Precondition::NotModified => {
            let head = sink.begin_head(304);
            common_fields(head, &context.head);
            cache_fields(head, &context.head);
            let coded = match decision {
                Decision::Untouched => Coded::Untouched,
                Decision::Identity => Coded::Identity,
                Decision::Compress(encoding, _) => Coded::Compressed(encoding, 0),
            };
            validator_fields(head, file, representation, coded);
            // A 304 carries the validator and `Vary`, not the representation's other metadata
            // (RFC 9110 §15.4.5); a precompressed sibling's coding stays as it always was.
            if coded != Coded::Untouched && coding == Coding::Identity {
                head.remove("content-encoding");
            }
            sink.end_head(framing);
            return Served::Sent { status: 304 };
        }
        Precondition::Failed => return Served::Status(StatusAnswer::new(412)),
    }

    let head_only = request.method == Method::Head;
    if let Decision::Compress(encoding, level) = decision {
        match compressed_body(file, encoding, level, fresh, watch, caches, context) {
            Ok(Some(data)) => {
                let coded = Coded::Compressed(encoding, data.len() as u64);
                write_full_head(file, representation, coded, caches, context, sink);
                if !head_only && !data.is_empty() {
                    let end = data.len();
                    sink.shared(data, 0, end);
                }
                return Served::Sent { status: 200 };
            }
            // Could not be read or compressed: plain, as a client that took none.
            Ok(None) => decision = Decision::Identity,
            Err(job) => return Served::NeedData(job),
        }
    }
    let coded = match decision {
        Decision::Untouched => Coded::Untouched,
        Decision::Identity | Decision::Compress(..) => Coded::Identity,
    };

    let size = representation.file.size();
    let ranges = match request.header("range") {
        Some(value) if conditional::if_range_allows_partial(request, &validators) => {
            range::parse_range(value, size, context.max_ranges)
        }
        _ => RangeOutcome::Full,
    };
    if let RangeOutcome::Unsatisfiable = ranges {
        let content_range = format!("bytes */{size}");
        return Served::Status(StatusAnswer::with_field(
            416,
            "Content-Range",
            content_range.into_bytes(),
        ));
    }

    let body = if head_only {
        Body::None
    } else {
        match body_source(representation, watch, caches, context) {
            Ok(body) => body,
            Err(job) => return Served::NeedData(job),
        }
    };

    match ranges {
        RangeOutcome::Partial(ranges) if ranges.len() == 1 => {
            let range = ranges[0];
            let head = sink.begin_head(206);
            common_fields(head, &context.head);
            head.push("Content-Type", file.content_type.as_bytes());
            head.push_decimal("Content-Length", range.len());
            head.push_with("Content-Range", |value| {
                value.extend_from_slice(b"bytes ");
                write_decimal(value, range.start);
                value.push(b'-');
                write_decimal(value, range.end);
                value.push(b'/');
                write_decimal(value, size);
            });
            cache_fields(head, &context.head);
            validator_fields(head, file, representation, coded);
            sink.end_head(framing);
            body.push(sink, range);
            Served::Sent { status: 206 }
        }
        RangeOutcome::Partial(ranges) => {
            let multipart = Multipart::new(boundary(), file.content_type, &ranges, size);
            let head = sink.begin_head(206);
            common_fields(head, &context.head);
            head.push("Content-Type", multipart.content_type_value().as_bytes());
            head.push_decimal("Content-Length", multipart.body_len());
            cache_fields(head, &context.head);
            validator_fields(head, file, representation, coded);
            sink.end_head(framing);
            if !head_only {
                for (index, range) in ranges.iter().enumerate() {
                    sink.bytes().extend_from_slice(&multipart.part_head(index));
                    body.push(sink, *range);
                }
                sink.bytes().extend_from_slice(&multipart.trailer());
            }
            Served::Sent { status: 206 }
        }
        _ => {
            write_full_head(file, representation, coded, caches, context, sink);
            if size > 0 {
                body.push(
                    sink,
                    ByteRange {
                        start: 0,
                        end: size - 1,
                    },
                );
            }
            Served::Sent { status: 200 }
        }
    }
}

/// The head of a full `200` from the header cache.
fn write_full_head(
    file: &StaticFile,
    representation: &Representation,
    coded: Coded,
    caches: &Caches,
    context: &ResponseContext<'_>,
    sink: &mut dyn Sink,
) {
    let cached = caches.heads.full_response(file, representation, coded);
    if let Some(out) = sink.http1_head() {
        // The fast path: the cached bytes whole, then what varies per request.
        out.extend_from_slice(&cached.http1);
        date_and_persistence(out, &context.head);
        cache_headers(out, &context.head);
        out.extend_from_slice(b"\r\n");
        sink.end_http1_head();
    } else {
        let head = sink.begin_head(200);
        head.extend(&cached.head);
        date_and_added_fields(head, &context.head);
        cache_fields(head, &context.head);
        sink.end_head(Http1Framing::delimited(context.head.persistence));
    }
}

/// The body of `file` compressed with `encoding` at `level`: from the compressed cache, from
/// `fresh` (the job just done for this request), or made here where the thread may block
/// (`sped`, the blocking engines); else a job for a helper (`Err`). `Ok(None)`: it could not
/// be read or compressed.
fn compressed_body(
    file: &StaticFile,
    encoding: Encoding,
    level: u32,
    fresh: Option<&Compressed>,
    watch: Option<i32>,
    caches: &Caches,
    context: &ResponseContext<'_>,
) -> Result<Option<Arc<[u8]>>, Job> {
    let identity = &file.identity.file;
    let key = identity.key;
    // Before the cache: the request whose job just filled it counted its miss already.
    if let Some(fresh) = fresh
        .filter(|fresh| fresh.file == key && fresh.encoding == encoding && fresh.level == level)
    {
        return Ok(fresh.data.clone());
    }
    if let Some(data) = caches.compressed.get(&key, encoding, level) {
        return Ok(Some(data));
    }
    // The file cache holds small files; the compression then reads no disk.
    let plain = if identity.size() <= context.sendfile_threshold {
        caches.files.get(&key)
    } else {
        None
    };
    if context.disk == DiskAccess::Helpers {
        return Err(Job::Compress {
            file: identity.clone(),
            plain,
            encoding,
            level,
        });
    }
    let done = job::compress_file(identity, plain, encoding, level);
    if let Some(data) = &done.data {
        caches.remember_compressed(key, encoding, level, data.clone(), watch);
    }
    Ok(done.data)
}

/// Where the body bytes come from.
enum Body {
    None,
    Memory(Arc<[u8]>),
    File(Arc<OpenFile>),
}

impl Body {
    fn push(&self, sink: &mut dyn Sink, range: ByteRange) {
        match self {
            Body::None => {}
            Body::Memory(data) => {
                // Range ends are within the representation, which is exactly `data`.
                let start = usize::try_from(range.start)
                    .unwrap_or(usize::MAX)
                    .min(data.len());
                let end = usize::try_from(range.end + 1)
                    .unwrap_or(usize::MAX)
                    .min(data.len());
                sink.shared(data.clone(), start, end);
            }
            Body::File(file) => sink.file(file.clone(), range.start, range.end + 1),
        }
    }
}

/// Small files come from the file cache (loaded on a miss: inline when the pages are resident
/// or blocking is allowed, else by a helper); large ones, or all when the file cache is off,
/// by `sendfile` from the open descriptor.
fn body_source(
    representation: &Representation,
    watch: Option<i32>,
    caches: &Caches,
    context: &ResponseContext<'_>,
) -> Result<Body, Job> {
    let file = &representation.file;
    if file.size() == 0 || file.size() > context.sendfile_threshold || !caches.files.enabled() {
        return Ok(Body::File(file.clone()));
    }
    if let Some(data) = caches.files.get(&file.key) {
        return Ok(Body::Memory(data));
    }
    if !may_read_here(context.disk, context.residency_test, file) {
        return Err(Job::Load { file: file.clone() });
    }
    match job::read_whole(file) {
        Ok(data) => {
            caches.remember_data(file.key, data.clone(), watch);
            Ok(Body::Memory(data))
        }
        // The file shrank or failed to read: send from the descriptor, which will fall short
        // and close the connection rather than send a torn copy under a full-length head.
        Err(_) => Ok(Body::File(file.clone())),
    }
}

/// Whether the thread deciding may read all of `file` itself. An event loop (`Helpers`) may
/// only when the residency test says the read cannot block; without the test it cannot know,
/// so every read goes to a helper (Flash §5.7: a system without `mincore`).
fn may_read_here(disk: DiskAccess, residency_test: bool, file: &OpenFile) -> bool {
    match disk {
        DiskAccess::Inline => true,
        DiskAccess::Helpers => residency_test && resident(file),
    }
}

/// Whether an event loop must hand the send of `[offset, offset + len)` of `file` to a helper
/// rather than `sendfile` it itself (the loop never waits on the disk). `trusted`: this
/// connection's own last page-in covers the range; `reading`: a page-in of the file is in
/// flight (its pages count as cached before they are read: `engine::event_loop::page_ins`).
/// Without the residency test only the connection's own page-in vouches for a range, and the
/// caller forgets it once used, so that every send of file data follows a page-in.
#[must_use]
pub fn page_in_needed(
    file: &OpenFile,
    (offset, len): (u64, u64),
    trusted: bool,
    reading: bool,
    residency_test: bool,
) -> bool {
    if !residency_test {
        return !trusted;
    }
    (!trusted && reading) || !range_resident(file, offset, len)
}

/// Whether all of a file is in the page cache, so reading it cannot block (Flash's `mincore`
/// test, done with `cachestat` where the kernel has it).
#[must_use]
pub fn resident(file: &OpenFile) -> bool {
    range_resident(file, 0, file.size())
}

/// Whether `[offset, offset + len)` of the file is in the page cache.
#[must_use]
pub fn range_resident(file: &OpenFile, offset: u64, len: u64) -> bool {
    file.residency
        .resident(offset, offset.saturating_add(len), || {
            test_range_resident(file, offset, len)
        })
}

fn test_range_resident(file: &OpenFile, offset: u64, len: u64) -> bool {
    use std::os::fd::AsFd;
    match ampd_sys::file::cachestat(file.file.as_fd(), offset, len) {
        Ok(stat) => stat.cached_pages >= pages(offset, len),
        // Before Linux 6.5: Flash's own test, `mincore` on a mapping of the range. Mapping
        // costs more than `cachestat`, but answering "not resident" every time would send every
        // chunk through a helper.
        Err(error) if error.kind() == std::io::ErrorKind::Unsupported => {
            mapped_range_resident(file, offset, len)
        }
        Err(_) => false,
    }
}

fn mapped_range_resident(file: &OpenFile, offset: u64, len: u64) -> bool {
    use std::os::fd::AsFd;
    let page = ampd_sys::file::page_size() as u64;
    let start = offset - offset % page;
    let Ok(length) = usize::try_from(offset + len - start) else {
        return false;
    };
    match ampd_sys::mmap::Mmap::map(file.file.as_fd(), start, length) {
        Ok(mapping) => mapping.is_resident(0, length).unwrap_or(false),
        Err(_) => false,
    }
}

fn pages(offset: u64, len: u64) -> u64 {
    const PAGE: u64 = 4096;
    if len == 0 {
        return 0;
    }
    let first = offset / PAGE;
    let last = (offset + len - 1) / PAGE;
    last - first + 1
}

fn boundary() -> String {
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(0x616d_7064);
    format!("{:016x}", hasher.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsFd;

    fn open_file(bytes: &[u8]) -> (std::path::PathBuf, OpenFile) {
        let path = std::env::temp_dir().join(format!(
            "ampd-resident-{}-{}",
            std::process::id(),
            bytes.len()
        ));
        let mut file = std::fs::File::create(&path).unwrap();
        file.write_all(bytes).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let stat = ampd_sys::file::fstat(file.as_fd()).unwrap();
        let key = crate::content::file::FileKey::of(&stat);
        (path, OpenFile::new(file, key))
    }

    /// The `mincore` fallback (kernels before `cachestat`) agrees with `cachestat` on a file
    /// just written, whose pages are all in the page cache, at aligned and unaligned offsets.
    #[test]
    fn mapped_residency_test_agrees_with_cachestat() {
        let (path, file) = open_file(&vec![7u8; 3 * 4096 + 100]);
        for (offset, len) in [(0, file.size()), (5000, 4000), (4096, 1), (12_000, 388)] {
            assert!(mapped_range_resident(&file, offset, len), "{offset}+{len}");
            assert!(range_resident(&file, offset, len), "{offset}+{len}");
        }
        std::fs::remove_file(path).unwrap();
    }

    /// With the residency test off, an event loop reads nothing itself, even a file whose
    /// pages are all cached: the read goes to a helper. `sped` and the blocking engines
    /// (`Inline`) read where they are either way.
    #[test]
    fn without_the_residency_test_the_loop_hands_every_read_to_a_helper() {
        let (path, file) = open_file(&vec![3u8; 2 * 4096 + 17]);
        assert!(resident(&file), "a file just written is in the page cache");
        assert!(may_read_here(DiskAccess::Helpers, true, &file));
        assert!(!may_read_here(DiskAccess::Helpers, false, &file));
        assert!(may_read_here(DiskAccess::Inline, false, &file));
        assert!(may_read_here(DiskAccess::Inline, true, &file));

        let range = (0, file.size());
        assert!(!page_in_needed(&file, range, false, false, true));
        assert!(
            page_in_needed(&file, range, false, true, true),
            "a page-in in flight"
        );
        assert!(page_in_needed(&file, range, false, false, false));
        assert!(
            !page_in_needed(&file, range, true, false, false),
            "the connection's own page-in made the range resident"
        );
        std::fs::remove_file(path).unwrap();
    }
}
