//! Fuzz target: arbitrary bytes as a connection's HPACK header blocks (each a length octet then
//! the block). The checks live in `ampd_http::fuzz::hpack_decode`, so
//! `crates/http/tests/fuzz_corpus.rs` replays `fuzz/corpus/hpack_decode/` under plain
//! `cargo test`.
//!
//! Run from the repository root: `RUSTC_BOOTSTRAP=1 cargo fuzz run hpack_decode --
//! -max_total_time=90`. Copy any crash from `fuzz/artifacts/hpack_decode/` into
//! `fuzz/corpus/hpack_decode/` so the replay test keeps it fixed.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    ampd_http::fuzz::hpack_decode(data);
});
