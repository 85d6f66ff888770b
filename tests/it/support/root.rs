//! Throw-away document roots: `BASE/www` is served, `BASE/` itself holds files that must stay
//! outside the root (e.g. `secret.txt`). Removed on Drop.
//! Owns: files under its own temp directory. Must not touch: anything else on disk.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

static NEXT_ID: AtomicU64 = AtomicU64::new(0);

pub struct TempRoot {
    base: PathBuf,
    www: PathBuf,
}

impl TempRoot {
    /// Creates `$TMPDIR/ampd-test-PID-N-NANOS/www`.
    pub fn new() -> TempRoot {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|elapsed| elapsed.subsec_nanos())
            .unwrap_or(0);
        let base = std::env::temp_dir().join(format!(
            "ampd-test-{}-{}-{nanos}",
            std::process::id(),
            NEXT_ID.fetch_add(1, Ordering::Relaxed)
        ));
        let www = base.join("www");
        fs::create_dir_all(&www).expect("create temp document root");
        // Canonical so that comparisons with what the server prints are exact.
        let base = base.canonicalize().expect("canonical temp dir");
        let www = base.join("www");
        TempRoot { base, www }
    }

    /// The document root to serve.
    pub fn path(&self) -> &Path {
        &self.www
    }

    /// The directory that contains the root (not served).
    pub fn outside_dir(&self) -> &Path {
        &self.base
    }

    /// Writes a file under the root, creating parent dirs. Returns its absolute path.
    pub fn file(&self, relative: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        write_creating_parents(&self.www.join(relative), contents.as_ref())
    }

    /// Writes a file next to (outside) the root.
    pub fn outside_file(&self, relative: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        write_creating_parents(&self.base.join(relative), contents.as_ref())
    }

    /// Sets a file's modification time (e.g. an hour back, so its Last-Modified is a strong
    /// validator per RFC 9110 §8.8.2.2).
    pub fn set_mtime(&self, relative: &str, when: std::time::SystemTime) {
        let file = fs::OpenOptions::new()
            .write(true)
            .open(self.www.join(relative))
            .expect("open for set_mtime");
        file.set_modified(when).expect("set mtime");
    }

    pub fn dir(&self, relative: &str) -> PathBuf {
        let path = self.www.join(relative);
        fs::create_dir_all(&path).expect("create dir");
        path
    }

    /// Creates symlink `relative` (under the root) pointing at `target` (used verbatim).
    pub fn symlink(&self, target: impl AsRef<Path>, relative: &str) -> PathBuf {
        let link = self.www.join(relative);
        if let Some(parent) = link.parent() {
            fs::create_dir_all(parent).expect("create symlink parent");
        }
        std::os::unix::fs::symlink(target, &link).expect("create symlink");
        link
    }
}

impl Default for TempRoot {
    fn default() -> Self {
        TempRoot::new()
    }
}

impl Drop for TempRoot {
    fn drop(&mut self) {
        // Restore permissions a test may have removed so the tree can be deleted.
        restore_permissions(&self.base);
        let _ = fs::remove_dir_all(&self.base);
    }
}

fn write_creating_parents(path: &Path, contents: &[u8]) -> PathBuf {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).expect("create parent dirs");
    }
    fs::write(path, contents).unwrap_or_else(|error| panic!("write {}: {error}", path.display()));
    path.to_path_buf()
}

fn restore_permissions(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_symlink() {
            continue;
        }
        let mode = if kind.is_dir() { 0o755 } else { 0o644 };
        let _ = fs::set_permissions(entry.path(), fs::Permissions::from_mode(mode));
        if kind.is_dir() {
            restore_permissions(&entry.path());
        }
    }
}

/// Deterministic pseudo-random bytes (xorshift), so large bodies can be compared exactly without
/// storing them twice in the test.
pub fn pattern_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed | 1;
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        out.extend_from_slice(&state.to_le_bytes());
    }
    out.truncate(len);
    out
}
