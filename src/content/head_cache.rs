//! Flash's response header cache (§5.3): the head of a `200` for a file, rendered once.
//!
//! Owns: prebuilt head prefixes — status line and every header that depends only on the file
//! (type, length, validators, `Vary`). `Date` (rendered once a second by the engine) and the
//! per-request `Connection` are appended by `serve` (AFPA's pre-built responses).
//! Must not touch: the disk, the clock.

use std::sync::Arc;

use ampd_http::coding::Coding;

use super::file::{FileKey, Representation, StaticFile};
use super::lru::Lru;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct HeadKey {
    file: FileKey,
    coding: Coding,
    content_type: &'static str,
    varies: bool,
}

#[derive(Debug)]
pub struct HeadCache {
    entries: Option<Lru<HeadKey, Arc<[u8]>>>,
    pub hits: u64,
    pub misses: u64,
}

impl HeadCache {
    #[must_use]
    pub fn new(enabled: bool, capacity: u64) -> HeadCache {
        HeadCache {
            entries: enabled.then(|| Lru::new(capacity)),
            hits: 0,
            misses: 0,
        }
    }

    /// Heads held.
    #[must_use]
    pub fn len(&self) -> usize {
        self.entries.as_ref().map_or(0, Lru::len)
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The head prefix of a full `200` for this representation of `file`.
    pub fn full_response(
        &mut self,
        file: &StaticFile,
        representation: &Representation,
    ) -> Arc<[u8]> {
        let key = HeadKey {
            file: representation.file.key,
            coding: representation.coding,
            content_type: file.content_type,
            varies: file.varies(),
        };
        let Some(entries) = self.entries.as_mut() else {
            self.misses += 1;
            return Arc::from(render(file, representation));
        };
        if let Some(head) = entries.get(&key) {
            self.hits += 1;
            return head.clone();
        }
        self.misses += 1;
        let head: Arc<[u8]> = Arc::from(render(file, representation));
        entries.insert(key, head.clone(), 1);
        head
    }

    pub fn clear(&mut self) {
        if let Some(entries) = self.entries.as_mut() {
            entries.clear();
        }
    }
}

/// Every header of a `200` that depends on the file alone, in the order nginx sends them.
fn render(file: &StaticFile, representation: &Representation) -> Vec<u8> {
    let mut head = Vec::with_capacity(256);
    super::serve::write_representation_headers(
        &mut head,
        200,
        file,
        representation,
        representation.file.size(),
    );
    head
}
