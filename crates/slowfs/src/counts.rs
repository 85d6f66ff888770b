//! COUNTS_FILE: the operations served, by type (`read`, `lookup`, `getattr`, `open`, ...) and,
//! as `TYPE:THREAD`, by the name of the thread that asked (`amped-0-helper-`, `nginx`, ...),
//! written as JSON every half second. Two snapshots around a measurement divided by its requests
//! give the FUSE round trips per request, which shows a server that reopens files another keeps
//! open (docs/research/architectures.md).
//!
//! Owns: the counters and the thread that writes them.
//! Must not touch: anything the filesystem serves.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::lock;

#[derive(Clone, Default)]
pub struct Counts {
    counts: Arc<Mutex<BTreeMap<String, u64>>>,
}

impl Counts {
    /// Count one `operation` asked for by the thread `tid`.
    pub fn note(&self, operation: &str, tid: u32) {
        let caller = thread_name(tid);
        let mut counts = lock(&self.counts);
        *counts.entry(operation.to_owned()).or_default() += 1;
        *counts.entry(format!("{operation}:{caller}")).or_default() += 1;
    }

    fn snapshot(&self) -> String {
        let counts = lock(&self.counts);
        serde_json::to_string(&*counts).unwrap_or_default()
    }

    /// Start the thread that writes the counts to `path` every half second, through a
    /// `.partial` file and a rename, so that readers never see half a file.
    pub fn write_every_half_second(&self, path: PathBuf) {
        let counts = self.clone();
        let mut partial = path.clone().into_os_string();
        partial.push(".partial");
        let spawned = std::thread::Builder::new()
            .name("slowfs-counts".to_owned())
            .spawn(move || loop {
                std::thread::sleep(Duration::from_millis(500));
                let written = std::fs::write(&partial, counts.snapshot())
                    .and_then(|()| std::fs::rename(&partial, &path));
                if let Err(error) = written {
                    eprintln!("ampd-slowfs: writing {}: {error}", path.display());
                }
            });
        if let Err(error) = spawned {
            eprintln!("ampd-slowfs: cannot start the counting thread: {error}");
        }
    }
}

/// The name of thread `tid` (the kernel tells which thread made a request), or `?` once it is
/// gone.
fn thread_name(tid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{tid}/comm"))
        .map_or_else(|_| "?".to_owned(), |name| name.trim_end().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_type_and_by_caller() {
        let counts = Counts::default();
        let me = std::process::id();
        counts.note("read", me);
        counts.note("read", me);
        counts.note("open", u32::MAX);
        let snapshot: BTreeMap<String, u64> = serde_json::from_str(&counts.snapshot()).unwrap();
        assert_eq!(snapshot["read"], 2);
        assert_eq!(snapshot["open"], 1);
        assert_eq!(snapshot["open:?"], 1, "a thread that is gone is '?'");
        let mine = thread_name(me);
        assert!(!mine.is_empty());
        assert_eq!(snapshot[&format!("read:{mine}")], 2);
    }
}
