//! Static content: path translation, MIME types, directory listings and the three Flash caches.
//!
//! Owns: turning a request path into a file on disk (safely), and the caches of that work.
//! Must not touch: sockets, threads, the clock (callers pass `now`). Anything that can block on
//! disk is done by the caller (engine helpers) through `crate::job`.
//! Sources: Flash (Pai et al. 1999) §5.2–5.4; JAWS §3 (cached virtual filesystem, `~user`).

pub mod autoindex;
pub mod lru;
pub mod mime;
pub mod path;
