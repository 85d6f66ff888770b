//! Fuzz target: arbitrary bytes as one HTTP/3 stream (the first octet chooses a control or a request stream). The checks live in `ampd_http::fuzz::h3_frames`, so
//! `crates/http/tests/fuzz_corpus.rs` replays `fuzz/corpus/h3_frames/` under plain `cargo test`.
//!
//! Run from the repository root: `RUSTC_BOOTSTRAP=1 cargo fuzz run h3_frames --
//! -max_total_time=90`. Copy any crash from `fuzz/artifacts/h3_frames/` into
//! `fuzz/corpus/h3_frames/` so the replay test keeps it fixed.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    ampd_http::fuzz::h3_frames(data);
});
