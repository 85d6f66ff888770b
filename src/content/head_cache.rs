//! Flash's response header cache (§5.3): the head of a `200` for a file, rendered once.
//!
//! Owns: prebuilt heads — status and every field that depends only on the file (type, length,
//! validators, `Vary`), in shards, each kept twice: serialised as HTTP/1 (copied whole into an
//! HTTP/1 connection's buffer, AFPA's pre-built responses) and as data beside it (an HTTP/2
//! stream's head starts from a copy of its fields, nothing parsed). `Date` (rendered once a
//! second by the engine) and the per-request `Connection` are added by `serve`; how those
//! file-dependent fields are written (`serve`'s `304` and `206` heads write the same).
//! Must not touch: the disk, the clock.

use std::sync::Arc;

use ampd_http::coding::Coding;

use super::file::{FileKey, Negotiated, Representation, StaticFile};
use super::lru::Lru;
use super::sharded::Sharded;
use crate::response::compress::policy::{self, Decision};
use crate::response::compress::Encoding;
use crate::response::Head;

/// What on-the-fly compression made of a file's response (`policy::decide_for_file`): its
/// head differs by it, so heads are cached per outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Coded {
    /// Not a kind the location compresses.
    Untouched,
    /// Compressible, sent plain (this request's `Accept-Encoding`, a range): gains `Vary`.
    Identity,
    /// Compressed with this coding, to a body of this length (the compressed cache's).
    Compressed(Encoding, u64),
}

impl Coded {
    /// The policy's decision this stands for (its level does not show in a head).
    fn decision(self) -> Decision {
        match self {
            Coded::Untouched => Decision::Untouched,
            Coded::Identity => Decision::Identity,
            Coded::Compressed(encoding, _) => Decision::Compress(encoding, 0),
        }
    }
}

/// The file-dependent head of a full `200`, serialised as HTTP/1 (without the blank line) and
/// as data.
#[derive(Debug)]
pub struct CachedHead {
    pub http1: Box<[u8]>,
    pub head: Head,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct HeadKey {
    file: FileKey,
    coding: Coding,
    content_type: &'static str,
    varies: bool,
    negotiated: Option<Negotiated>,
    coded: Coded,
}

#[derive(Debug)]
struct Shard {
    entries: Lru<HeadKey, Arc<CachedHead>>,
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

    /// The head prefix of a full `200` for this representation of `file`, as on-the-fly
    /// compression left it (`coded`).
    pub fn full_response(
        &self,
        file: &StaticFile,
        representation: &Representation,
        coded: Coded,
    ) -> Arc<CachedHead> {
        let key = HeadKey {
            file: representation.file.key,
            coding: representation.coding,
            content_type: file.content_type,
            varies: file.varies(),
            negotiated: file.negotiated.clone(),
            coded,
        };
        let Some(shards) = self.shards.as_ref() else {
            return Arc::new(render(file, representation, coded));
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
        let head = Arc::new(render(file, representation, coded));
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

/// Every field of a `200` that depends on the file alone, in the order nginx sends them.
fn render(file: &StaticFile, representation: &Representation, coded: Coded) -> CachedHead {
    let mut head = Head::new(200);
    head.push("Server", b"ampd");
    head.push("Content-Type", file.content_type.as_bytes());
    let length = match coded {
        Coded::Compressed(_, length) => length,
        Coded::Untouched | Coded::Identity => representation.file.size(),
    };
    head.push_decimal("Content-Length", length);
    validator_fields(&mut head, file, representation, coded);
    if let Coded::Compressed(..) = coded {
        // The policy took the identity length away; the compressed one is known.
        head.push_decimal("Content-Length", length);
    }
    let mut http1 = Vec::with_capacity(head.http1_len());
    head.write_http1(&mut http1);
    CachedHead {
        http1: http1.into_boxed_slice(),
        head,
    }
}

/// The validators and representation fields of a file's head: the same in a `200` from this
/// cache and in the `304` and `206` heads `serve` writes itself; then what on-the-fly
/// compression changes (`Vary`, and for a compressed body its coding and weak `ETag`).
pub(super) fn validator_fields(
    head: &mut Head,
    file: &StaticFile,
    representation: &Representation,
    coded: Coded,
) {
    head.push("Last-Modified", &representation.last_modified_text);
    head.push("ETag", &representation.etag);
    head.push("Accept-Ranges", b"bytes");
    if let Some(vary) = file.vary() {
        head.push("Vary", vary.as_bytes());
    }
    if let Some(language) = file.language() {
        head.push("Content-Language", language.as_bytes());
    }
    match representation.coding {
        Coding::Identity => {}
        Coding::Gzip => head.push("Content-Encoding", b"gzip"),
        Coding::Brotli => head.push("Content-Encoding", b"br"),
    }
    policy::mark(head, coded.decision());
}
