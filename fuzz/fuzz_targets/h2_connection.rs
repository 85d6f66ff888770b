//! Fuzz target: arbitrary bytes from an HTTP/2 client after the preface and its SETTINGS,
//! fed to `h2::Connection` in cuts the input chooses, with a server answering every request.
//! The checks live in `ampd_http::fuzz::h2_connection`, so `crates/http/tests/fuzz_corpus.rs`
//! replays `fuzz/corpus/h2_connection/` under plain `cargo test`.
//!
//! Run from the repository root: `RUSTC_BOOTSTRAP=1 cargo fuzz run h2_connection --
//! -max_total_time=90`. Copy any crash from `fuzz/artifacts/h2_connection/` into
//! `fuzz/corpus/h2_connection/` so the replay test keeps it fixed.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    ampd_http::fuzz::h2_connection(data);
});
