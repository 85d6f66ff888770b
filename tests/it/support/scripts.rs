//! Puts the gateway fixtures into a test's document root: the CGI scripts of tests/fixtures/cgi
//! (Python and Perl, made executable, as a cgi-bin directory needs) and the PHP scripts of
//! tests/fixtures/php.
//! Owns: the copies under the test root. Must not touch: the fixtures themselves.

use std::path::{Path, PathBuf};

use super::root::TempRoot;

fn fixtures(kind: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(kind)
}

/// Copies every file of tests/fixtures/`kind` into `dir` (created), with `mode`; returns `dir`.
fn install(kind: &str, dir: &Path, mode: u32) -> PathBuf {
    std::fs::create_dir_all(dir).expect("create script directory");
    let entries = std::fs::read_dir(fixtures(kind)).expect("read tests/fixtures");
    for entry in entries.flatten() {
        let target = dir.join(entry.file_name());
        super::install_file(&entry.path(), &target, mode);
    }
    dir.to_path_buf()
}

/// The CGI scripts, executable, in `relative` under the root (e.g. `cgi-bin`).
pub fn install_cgi(root: &TempRoot, relative: &str) -> PathBuf {
    install("cgi", &root.path().join(relative), 0o755)
}

/// The PHP scripts in `relative` under the root (`""`: the root itself).
pub fn install_php(root: &TempRoot, relative: &str) -> PathBuf {
    install("php", &root.path().join(relative), 0o644)
}
