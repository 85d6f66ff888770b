//! Fuzz target: arbitrary bytes as a CGI script's output (its response head,
//! RFC 3875 §6). The checks live in `ampd_http::fuzz::cgi_head`, so
//! `crates/http/tests/fuzz_corpus.rs` replays `fuzz/corpus/cgi_head/` under plain `cargo test`.
//!
//! Run from the repository root: `RUSTC_BOOTSTRAP=1 cargo fuzz run cgi_head --
//! -max_total_time=90`. Copy any crash from `fuzz/artifacts/cgi_head/` into
//! `fuzz/corpus/cgi_head/` so the replay test keeps it fixed.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    ampd_http::fuzz::cgi_head(data);
});
