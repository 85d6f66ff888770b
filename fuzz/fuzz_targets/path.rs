//! Fuzz target: request-path normalisation must never panic, never yield a path with `..`, NUL
//! or backslash, and be idempotent on its (re-encoded) output. The checks live in
//! `ampd::content::path::fuzz_path`, which tests/it/path_corpus.rs also replays over the corpus.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    ampd::content::path::fuzz_path(data);
});
