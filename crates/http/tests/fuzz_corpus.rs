//! Replays every seed and every saved finding in `fuzz/corpus/request_head`,
//! `fuzz/corpus/proxy_header`, `fuzz/corpus/upstream_response`, `fuzz/corpus/fastcgi_response`,
//! `fuzz/corpus/fastcgi_name_value`, `fuzz/corpus/cgi_head`, `fuzz/corpus/head_reader`,
//! `fuzz/corpus/hpack_decode`, `fuzz/corpus/h2_connection`, `fuzz/corpus/h3_frames`,
//! `fuzz/corpus/qpack_decode`, `fuzz/corpus/h3_request_stream`, `fuzz/corpus/h3_connection` and
//! `fuzz/corpus/accept` through the same function the libFuzzer
//! target calls, so fuzz coverage is part of stable `cargo test`.

use std::fs;
use std::path::Path;

/// Runs every file of `fuzz/corpus/NAME` (at least `at_least` of them) through `target`.
fn replay(name: &str, at_least: usize, target: fn(&[u8])) {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(name);
    let mut entries: Vec<_> = fs::read_dir(&corpus)
        .unwrap_or_else(|error| panic!("cannot read {}: {error}", corpus.display()))
        .map(|entry| entry.expect("readable corpus entry").path())
        .filter(|path| path.is_file())
        .collect();
    entries.sort();
    assert!(
        entries.len() >= at_least,
        "expected at least {at_least} seeds in {}, found {}",
        corpus.display(),
        entries.len()
    );
    for path in entries {
        let data = fs::read(&path).expect("readable corpus file");
        let outcome = std::panic::catch_unwind(|| target(&data));
        assert!(outcome.is_ok(), "corpus file {} panicked", path.display());
    }
}

#[test]
fn request_head_corpus_replays_cleanly() {
    replay("request_head", 20, ampd_http::fuzz::request_head);
}

#[test]
fn proxy_header_corpus_replays_cleanly() {
    replay("proxy_header", 15, ampd_http::fuzz::proxy_header);
}

#[test]
fn upstream_response_corpus_replays_cleanly() {
    replay("upstream_response", 20, ampd_http::fuzz::upstream_response);
}

#[test]
fn fastcgi_response_corpus_replays_cleanly() {
    replay("fastcgi_response", 20, ampd_http::fuzz::fastcgi_response);
}

#[test]
fn fastcgi_name_value_corpus_replays_cleanly() {
    replay(
        "fastcgi_name_value",
        10,
        ampd_http::fuzz::fastcgi_name_value,
    );
}

#[test]
fn cgi_head_corpus_replays_cleanly() {
    replay("cgi_head", 20, ampd_http::fuzz::cgi_head);
}

#[test]
fn head_reader_corpus_replays_cleanly() {
    replay("head_reader", 12, ampd_http::fuzz::head_reader);
}

#[test]
fn hpack_decode_corpus_replays_cleanly() {
    replay("hpack_decode", 12, ampd_http::fuzz::hpack_decode);
}

#[test]
fn h2_connection_corpus_replays_cleanly() {
    replay("h2_connection", 20, ampd_http::fuzz::h2_connection);
}

#[test]
fn h3_frames_corpus_replays_cleanly() {
    replay("h3_frames", 7, ampd_http::fuzz::h3_frames);
}

#[test]
fn qpack_decode_corpus_replays_cleanly() {
    replay("qpack_decode", 7, ampd_http::fuzz::qpack_decode);
}

#[test]
fn h3_request_stream_corpus_replays_cleanly() {
    replay("h3_request_stream", 11, ampd_http::fuzz::h3_request_stream);
}

#[test]
fn h3_connection_corpus_replays_cleanly() {
    replay("h3_connection", 27, ampd_http::fuzz::h3_connection);
}

#[test]
fn accept_corpus_replays_cleanly() {
    replay("accept", 12, ampd_http::fuzz::accept);
}
