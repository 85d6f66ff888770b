//! Fuzz target: one HTTP/3 request stream and the QPACK encoder stream, interleaved. The checks live in `ampd_http::fuzz::h3_request_stream`, so
//! `crates/http/tests/fuzz_corpus.rs` replays `fuzz/corpus/h3_request_stream/` under plain `cargo test`.
//!
//! Run from the repository root: `RUSTC_BOOTSTRAP=1 cargo fuzz run h3_request_stream --
//! -max_total_time=90`. Copy any crash from `fuzz/artifacts/h3_request_stream/` into
//! `fuzz/corpus/h3_request_stream/` so the replay test keeps it fixed.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    ampd_http::fuzz::h3_request_stream(data);
});
