//! Static content: path translation, directory listings, the three Flash caches and the cache
//! of static files compressed on the fly.
//!
//! Owns: turning a request path into a file on disk (safely), the caches of that work, and the
//! static-file response (`serve`).
//! Must not touch: sockets, threads, the clock (callers pass `now`). Anything that can block on
//! disk is a `job::Job`, which the engine runs inline (`sped`) or on a helper (`amped`).
//! Sources: Flash (Pai et al. 1999) §5.2–5.4; JAWS §3 (cached virtual filesystem, `~user`).

pub mod autoindex;
pub mod budget;
pub mod caches;
pub mod compressed;
pub mod descriptors;
pub mod file;
pub mod file_cache;
pub mod head_cache;
pub mod job;
pub mod listing;
pub mod lru;
pub mod memory;
pub mod negotiate;
pub mod path;
pub mod path_cache;
pub mod resolve;
pub mod serve;
pub mod sharded;
pub mod sink;
