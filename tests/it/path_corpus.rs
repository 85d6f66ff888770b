//! Replays the path fuzz corpus (fuzz/corpus/path/*) through the same entry point the fuzz
//! target calls, so every saved input — the traversal encodings and any crash found later — is
//! checked by `cargo test` without cargo-fuzz.

use std::path::Path;

#[test]
fn path_corpus_replays_cleanly() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/path");
    let mut replayed = 0;
    for entry in std::fs::read_dir(&dir).expect("fuzz/corpus/path exists") {
        let path = entry.expect("readable corpus entry").path();
        let data = std::fs::read(&path).expect("readable corpus file");
        ampd::content::path::fuzz_path(&data);
        replayed += 1;
    }
    assert!(replayed >= 40, "only {replayed} corpus inputs in {dir:?}");
}
