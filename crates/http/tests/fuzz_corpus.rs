//! Replays every seed and every saved finding in `fuzz/corpus/request_head` and
//! `fuzz/corpus/proxy_header` through the same
//! function the libFuzzer target calls, so fuzz coverage is part of stable `cargo test`.

use std::fs;
use std::path::Path;

#[test]
fn request_head_corpus_replays_cleanly() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/request_head");
    let mut entries: Vec<_> = fs::read_dir(&corpus)
        .unwrap_or_else(|error| panic!("cannot read {}: {error}", corpus.display()))
        .map(|entry| entry.expect("readable corpus entry").path())
        .filter(|path| path.is_file())
        .collect();
    entries.sort();
    assert!(
        entries.len() >= 20,
        "expected at least 20 seeds in {}, found {}",
        corpus.display(),
        entries.len()
    );
    for path in entries {
        let data = fs::read(&path).expect("readable corpus file");
        let outcome = std::panic::catch_unwind(|| ampd_http::fuzz::request_head(&data));
        assert!(outcome.is_ok(), "corpus file {} panicked", path.display());
    }
}

#[test]
fn proxy_header_corpus_replays_cleanly() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/proxy_header");
    let mut entries: Vec<_> = fs::read_dir(&corpus)
        .unwrap_or_else(|error| panic!("cannot read {}: {error}", corpus.display()))
        .map(|entry| entry.expect("readable corpus entry").path())
        .filter(|path| path.is_file())
        .collect();
    entries.sort();
    assert!(
        entries.len() >= 15,
        "expected at least 15 seeds in {}, found {}",
        corpus.display(),
        entries.len()
    );
    for path in entries {
        let data = fs::read(&path).expect("readable corpus file");
        let outcome = std::panic::catch_unwind(|| ampd_http::fuzz::proxy_header(&data));
        assert!(outcome.is_ok(), "corpus file {} panicked", path.display());
    }
}
