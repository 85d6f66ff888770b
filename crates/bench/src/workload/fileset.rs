//! Creating the files a workload names, with exact sizes, so any server can be measured on the
//! same content (`--create DIR`).
//!
//! Owns: writing files below a chosen directory. Must not touch: anything outside that directory
//! (paths are checked to stay below it). Contents are pseudo-random, hence incompressible, so a
//! server that compresses cannot look faster than it is; an existing file of the right size is
//! kept, so creating twice is cheap.

use std::fs;
use std::io::Write;
use std::path::{Component, Path, PathBuf};

use crate::rng::Rng;

/// One file to create, relative to the document root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileSpec {
    pub relative: PathBuf,
    pub size: u64,
}

/// What [`create`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Created {
    pub written: u64,
    pub kept: u64,
    pub bytes: u64,
}

/// Creates every file below `root` (made if missing).
///
/// # Errors
/// One line naming the file and the reason: a path leaving `root`, a file in the way of a
/// directory, permissions, a full disk.
pub fn create(root: &Path, files: &[FileSpec], seed: u64) -> Result<Created, String> {
    let mut rng = Rng::new(seed);
    let mut created = Created::default();
    let mut buffer = vec![0u8; 64 * 1024];
    for file in files {
        let safe = file
            .relative
            .components()
            .all(|component| matches!(component, Component::Normal(_)));
        if !safe || file.relative.as_os_str().is_empty() {
            return Err(format!(
                "refusing to create '{}': not a plain path below {}",
                file.relative.display(),
                root.display()
            ));
        }
        let path = root.join(&file.relative);
        created.bytes += file.size;
        if fs::metadata(&path).is_ok_and(|meta| meta.is_file() && meta.len() == file.size) {
            created.kept += 1;
            continue;
        }
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent)
                .map_err(|error| format!("cannot create {}: {error}", parent.display()))?;
        }
        let mut output = fs::File::create(&path)
            .map_err(|error| format!("cannot create {}: {error}", path.display()))?;
        let mut left = file.size;
        while left > 0 {
            let take = left.min(buffer.len() as u64) as usize;
            rng.fill(&mut buffer[..take]);
            output
                .write_all(&buffer[..take])
                .map_err(|error| format!("cannot write {}: {error}", path.display()))?;
            left -= take as u64;
        }
        created.written += 1;
    }
    Ok(created)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("ampd-bench-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn creates_exact_sizes_keeps_existing_and_refuses_escapes() {
        let root = temp_dir("fileset");
        let files = [
            FileSpec {
                relative: "a/b/one.bin".into(),
                size: 70_000,
            },
            FileSpec {
                relative: "empty".into(),
                size: 0,
            },
        ];
        let first = create(&root, &files, 1).unwrap();
        assert_eq!((first.written, first.kept, first.bytes), (2, 0, 70_000));
        assert_eq!(
            fs::metadata(root.join("a/b/one.bin")).unwrap().len(),
            70_000
        );
        let second = create(&root, &files, 1).unwrap();
        assert_eq!((second.written, second.kept), (0, 2));
        let escape = FileSpec {
            relative: "../outside".into(),
            size: 1,
        };
        assert!(create(&root, &[escape], 1)
            .unwrap_err()
            .contains("refusing"));
        fs::remove_dir_all(&root).unwrap();
    }
}
