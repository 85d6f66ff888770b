//! Fuzz target: arbitrary bytes as QPACK input: chunks of encoder stream data (odd lengths) and field sections (even lengths). The checks live in `ampd_http::fuzz::qpack_decode`, so
//! `crates/http/tests/fuzz_corpus.rs` replays `fuzz/corpus/qpack_decode/` under plain `cargo test`.
//!
//! Run from the repository root: `RUSTC_BOOTSTRAP=1 cargo fuzz run qpack_decode --
//! -max_total_time=90`. Copy any crash from `fuzz/artifacts/qpack_decode/` into
//! `fuzz/corpus/qpack_decode/` so the replay test keeps it fixed.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    ampd_http::fuzz::qpack_decode(data);
});
