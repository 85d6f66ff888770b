//! Fuzz target: arbitrary bytes as the PROXY protocol header a load balancer sends first. The
//! checks live in `ampd_http::fuzz::proxy_header`, so `crates/http/tests/fuzz_corpus.rs`
//! replays `fuzz/corpus/proxy_header/` under plain `cargo test`.
//!
//! Run from the repository root: `RUSTC_BOOTSTRAP=1 cargo fuzz run proxy_header --
//! -max_total_time=90`. Copy any crash from `fuzz/artifacts/proxy_header/` into
//! `fuzz/corpus/proxy_header/` so the replay test keeps it fixed.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    ampd_http::fuzz::proxy_header(data);
});
