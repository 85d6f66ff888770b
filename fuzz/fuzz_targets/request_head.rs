//! Fuzz target: arbitrary bytes as a request head. The checks live in
//! `ampd_http::fuzz::request_head` so `crates/http/tests/fuzz_corpus.rs` replays the corpus
//! under plain `cargo test`.
//!
//! Run from the repository root (cargo-fuzz finds `fuzz/` there):
//! `RUSTC_BOOTSTRAP=1 cargo fuzz run request_head -- -max_total_time=90`
//! or from `fuzz/` with `--fuzz-dir .`. Copy any crash from `fuzz/artifacts/request_head/`
//! into `fuzz/corpus/request_head/` so the replay test keeps it fixed.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    ampd_http::fuzz::request_head(data);
});
