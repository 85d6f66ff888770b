//! Logging and counting: the access log (written by a log thread from double buffers, so a
//! loop never waits on disk), the error log, the wall clock rendered once a second, and the
//! scoreboard counters that the metrics location renders.
//!
//! Owns: everything the server writes about itself. Must not touch: sockets, HTTP decisions.
//! Sources: Abyss §4 (double-buffered logging, the scoreboard); NCSA Common Log Format;
//! Prometheus text exposition format 0.0.4.

pub mod access;
pub mod build_info;
pub mod clock;
pub mod error;
pub mod file;
pub mod metrics;
pub mod process;
pub mod stats;
