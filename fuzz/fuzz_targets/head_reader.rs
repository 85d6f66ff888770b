//! Fuzz target: arbitrary bytes as the field lines of an HTTP/1 head, read by the head reader
//! the request, upstream-response and CGI parsers share (`ampd_http::head`). The checks live in
//! `ampd_http::fuzz::head_reader`, so `crates/http/tests/fuzz_corpus.rs` replays
//! `fuzz/corpus/head_reader/` under plain `cargo test`.
//!
//! Run from the repository root: `RUSTC_BOOTSTRAP=1 cargo fuzz run head_reader --
//! -max_total_time=90`. Copy any crash from `fuzz/artifacts/head_reader/` into
//! `fuzz/corpus/head_reader/` so the replay test keeps it fixed.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    ampd_http::fuzz::head_reader(data);
});
