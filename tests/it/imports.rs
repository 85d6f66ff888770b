//! Dependencies point one way (docs/architecture.md): a module under `src/` may only name the
//! modules to its left in `config → log → programs → response → content → upstream → tls → site →
//! conn → ops → engine → cli`. In particular `tls` never imports `conn` (a TLS session is a byte
//! interface the connection side drives), `conn` never imports `ops` or `engine`, and `ops`
//! never imports `engine`. `cli` is the binary's (`src/main.rs`), which names the library's
//! modules as `ampd::`, so both spellings are checked.

use std::path::Path;

const ORDER: [&str; 12] = [
    "config", "log", "programs", "response", "content", "upstream", "tls", "site", "conn", "ops",
    "engine", "cli",
];

fn rust_files(dir: &Path, into: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, into);
        } else if path.extension().is_some_and(|extension| extension == "rs") {
            into.push(path);
        }
    }
}

#[test]
fn modules_only_import_to_their_left() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut checked = 0;
    for (position, module) in ORDER.iter().enumerate() {
        let mut files = Vec::new();
        rust_files(&src.join(module), &mut files);
        assert!(!files.is_empty(), "src/{module}/ has no files");
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            for higher in &ORDER[position + 1..] {
                for pattern in [
                    format!("crate::{higher}::"),
                    format!("crate::{higher}}}"),
                    format!("crate::{higher};"),
                    format!("ampd::{higher}::"),
                ] {
                    assert!(
                        !text.contains(&pattern),
                        "{} names `{pattern}`: {module} may not depend on {higher}",
                        file.display()
                    );
                }
            }
            checked += 1;
        }
    }
    assert!(checked > 20, "only {checked} files checked");
}
