//! Fuzz target: arbitrary bytes as what an upstream answers the reverse proxy. The checks live
//! in `ampd_http::fuzz::upstream_response`, so `crates/http/tests/fuzz_corpus.rs` replays
//! `fuzz/corpus/upstream_response/` under plain `cargo test`.
//!
//! Run from the repository root: `RUSTC_BOOTSTRAP=1 cargo fuzz run upstream_response --
//! -max_total_time=90`. Copy any crash from `fuzz/artifacts/upstream_response/` into
//! `fuzz/corpus/upstream_response/` so the replay test keeps it fixed.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    ampd_http::fuzz::upstream_response(data);
});
