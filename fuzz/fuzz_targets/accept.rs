//! Fuzz target: arbitrary bytes as `Accept-Encoding`, `Accept` and `Accept-Language` values
//! (separated by LF). The checks live in `ampd_http::fuzz::accept`, so
//! `crates/http/tests/fuzz_corpus.rs` replays `fuzz/corpus/accept/` under plain `cargo test`.
//!
//! Run from the repository root: `RUSTC_BOOTSTRAP=1 cargo fuzz run accept --
//! -max_total_time=90`. Copy any crash from `fuzz/artifacts/accept/` into
//! `fuzz/corpus/accept/` so the replay test keeps it fixed.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    ampd_http::fuzz::accept(data);
});
