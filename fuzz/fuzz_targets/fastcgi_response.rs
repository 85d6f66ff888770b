//! Fuzz target: arbitrary bytes as the FastCGI records an application answers
//! one request with. The checks live in `ampd_http::fuzz::fastcgi_response`, so
//! `crates/http/tests/fuzz_corpus.rs` replays `fuzz/corpus/fastcgi_response/` under plain `cargo test`.
//!
//! Run from the repository root: `RUSTC_BOOTSTRAP=1 cargo fuzz run fastcgi_response --
//! -max_total_time=90`. Copy any crash from `fuzz/artifacts/fastcgi_response/` into
//! `fuzz/corpus/fastcgi_response/` so the replay test keeps it fixed.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    ampd_http::fuzz::fastcgi_response(data);
});
