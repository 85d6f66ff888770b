//! Fuzz target: an HTTP/3 connection (`h3::Connection`) under an arbitrary script of stream
//! data, resets, opened streams, our GOAWAY and streams we stop reading. The checks live in
//! `ampd_http::fuzz::h3_connection`, so `crates/http/tests/fuzz_corpus.rs` replays
//! `fuzz/corpus/h3_connection/` under plain `cargo test`.
//!
//! Run from the repository root: `RUSTC_BOOTSTRAP=1 cargo fuzz run h3_connection --
//! -max_total_time=90`. Copy any crash from `fuzz/artifacts/h3_connection/` into
//! `fuzz/corpus/h3_connection/` so the replay test keeps it fixed.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    ampd_http::fuzz::h3_connection(data);
});
