//! Flash's response header cache (§5.3): the head of a `200` for a file, rendered once.
//!
//! Owns: prebuilt head prefixes — status line and every header that depends only on the file
//! (type, length, validators, `Vary`), in shards. `Date` (rendered once a second by the engine)
//! and the per-request `Connection` are appended by `serve` (AFPA's pre-built responses); how
//! those file-dependent fields are written (`serve`'s `304` and `206` heads write the same).
//! Must not touch: the disk, the clock.

use std::sync::Arc;

use ampd_http::coding::Coding;
use ampd_http::response::{write_content_length, write_header, write_status_line};

use super::file::{FileKey, Negotiated, Representation, StaticFile};
use super::lru::Lru;
use super::sharded::Sharded;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct HeadKey {
    file: FileKey,
    coding: Coding,
    content_type: &'static str,
    varies: bool,
    negotiated: Option<Negotiated>,
}

#[derive(Debug)]
struct Shard {
    entries: Lru<HeadKey, Arc<[u8]>>,
    hits: u64,
    misses: u64,
}

#[derive(Debug)]
pub struct HeadCache {
    shards: Option<Sharded<Shard>>,
}

impl HeadCache {
    /// At most `capacity` heads in all, split evenly over `shards`.
    #[must_use]
    pub fn new(enabled: bool, capacity: u64, shards: usize) -> HeadCache {
        HeadCache {
            shards: enabled.then(|| {
                let per_shard = (capacity / shards.max(1).next_power_of_two() as u64).max(1);
                Sharded::new(shards, || Shard {
                    entries: Lru::new(per_shard),
                    hits: 0,
                    misses: 0,
                })
            }),
        }
    }

    /// Heads held.
    #[must_use]
    pub fn len(&self) -> usize {
        self.shards.as_ref().map_or(0, |shards| {
            shards.sum(|shard| shard.entries.len() as u64) as usize
        })
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The head prefix of a full `200` for this representation of `file`.
    pub fn full_response(&self, file: &StaticFile, representation: &Representation) -> Arc<[u8]> {
        let key = HeadKey {
            file: representation.file.key,
            coding: representation.coding,
            content_type: file.content_type,
            varies: file.varies(),
            negotiated: file.negotiated.clone(),
        };
        let Some(shards) = self.shards.as_ref() else {
            return Arc::from(render(file, representation));
        };
        {
            let mut shard = shards.lock(&key);
            if let Some(head) = shard.entries.get(&key).cloned() {
                shard.hits += 1;
                return head;
            }
            shard.misses += 1;
        }
        // Rendered outside the lock; two threads that miss together both render, harmlessly.
        let head: Arc<[u8]> = Arc::from(render(file, representation));
        let evicted = shards.lock(&key).entries.insert(key, head.clone(), 1);
        drop(evicted);
        head
    }

    pub fn clear(&self) {
        if let Some(shards) = self.shards.as_ref() {
            shards.for_each(|shard| drop(shard.entries.clear()));
        }
    }

    /// Heads answered from the cache, and not.
    #[must_use]
    pub fn hits_and_misses(&self) -> (u64, u64) {
        self.shards.as_ref().map_or((0, 0), |shards| {
            (
                shards.sum(|shard| shard.hits),
                shards.sum(|shard| shard.misses),
            )
        })
    }
}

/// Every header of a `200` that depends on the file alone, in the order nginx sends them.
fn render(file: &StaticFile, representation: &Representation) -> Vec<u8> {
    let mut head = Vec::with_capacity(256);
    write_representation_headers(
        &mut head,
        200,
        file,
        representation,
        representation.file.size(),
    );
    head
}

/// The validators and representation fields of a file's head: the same in a `200` from this
/// cache and in the `304` and `206` heads `serve` writes itself.
pub(super) fn validator_headers(
    out: &mut Vec<u8>,
    file: &StaticFile,
    representation: &Representation,
) {
    write_header(out, "Last-Modified", &representation.last_modified_text);
    write_header(out, "ETag", &representation.etag);
    out.extend_from_slice(b"Accept-Ranges: bytes\r\n");
    if let Some(vary) = file.vary() {
        write_header(out, "Vary", vary.as_bytes());
    }
    if let Some(language) = file.language() {
        write_header(out, "Content-Language", language.as_bytes());
    }
    match representation.coding {
        Coding::Identity => {}
        Coding::Gzip => out.extend_from_slice(b"Content-Encoding: gzip\r\n"),
        Coding::Brotli => out.extend_from_slice(b"Content-Encoding: br\r\n"),
    }
}

/// The file-dependent part of a full `200` head, without `Date`/`Connection` and the final
/// CRLF: what the header cache stores.
pub fn write_representation_headers(
    out: &mut Vec<u8>,
    status: u16,
    file: &StaticFile,
    representation: &Representation,
    content_length: u64,
) {
    write_status_line(out, status);
    out.extend_from_slice(b"Server: ampd\r\n");
    write_header(out, "Content-Type", file.content_type.as_bytes());
    write_content_length(out, content_length);
    validator_headers(out, file, representation);
}
