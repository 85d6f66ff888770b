//! Fuzz target: arbitrary bytes as FastCGI name-value pairs (a GET_VALUES_RESULT's or a
//! PARAMS record's content). The checks live in `ampd_http::fuzz::fastcgi_name_value`, so
//! `crates/http/tests/fuzz_corpus.rs` replays `fuzz/corpus/fastcgi_name_value/` under plain `cargo test`.
//!
//! Run from the repository root: `RUSTC_BOOTSTRAP=1 cargo fuzz run fastcgi_name_value --
//! -max_total_time=90`. Copy any crash from `fuzz/artifacts/fastcgi_name_value/` into
//! `fuzz/corpus/fastcgi_name_value/` so the replay test keeps it fixed.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    ampd_http::fuzz::fastcgi_name_value(data);
});
