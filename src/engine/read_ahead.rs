//! Read-ahead for page-ins that wait for a helper: one thread that asks the kernel to start
//! reading their ranges (`posix_fadvise(WILLNEED)`), so the device works on them while every
//! helper is busy.
//!
//! Why: on a device whose reads are slow rather than few (network storage, FUSE, a deep-queue
//! SSD), the disk-bound rate is the number of reads in flight, and a helper keeps one in flight
//! at a time. When the pool is at `helpers_max` and page-ins queue behind it, this thread starts
//! the queued reads at once; the helper that takes the job later finds its pages arriving or
//! there. `WILLNEED` only queues the reads (it may wait for a file's block map, which is why it
//! runs here and not on the event loop).
//!
//! Owns: the hint queue (bounded: the oldest hints are dropped when it is full, as a hint that
//! old is served by its helper soon anyway) and its thread.
//! Must not touch: the helpers' job queue or completions.

use std::collections::VecDeque;
use std::os::fd::AsFd;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;

use ampd_sys::file::{fadvise, Advice};

use crate::content::file::OpenFile;
use crate::sync::lock;

/// Hints kept waiting at most.
const MAX_HINTS: usize = 256;
/// How much lower this thread's priority is than the server's (see `run`).
const READ_AHEAD_NICE: i32 = 10;

struct Hints {
    ranges: VecDeque<(Arc<OpenFile>, u64, u64)>,
    stopping: bool,
}

struct Shared {
    hints: Mutex<Hints>,
    ready: Condvar,
}

pub struct ReadAhead {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl ReadAhead {
    /// # Errors
    /// The thread cannot be started.
    pub fn start(name: &str) -> std::io::Result<ReadAhead> {
        let shared = Arc::new(Shared {
            hints: Mutex::new(Hints {
                ranges: VecDeque::new(),
                stopping: false,
            }),
            ready: Condvar::new(),
        });
        let worker = shared.clone();
        let thread = std::thread::Builder::new()
            .name(format!("{name}-read-ahead"))
            .spawn(move || run(&worker))?;
        Ok(ReadAhead {
            shared,
            thread: Some(thread),
        })
    }

    /// Start reading `len` bytes of `file` from `offset` soon.
    pub fn hint(&self, file: Arc<OpenFile>, offset: u64, len: u64) {
        let mut hints = lock(&self.shared.hints);
        if hints.ranges.len() == MAX_HINTS {
            hints.ranges.pop_front();
        }
        hints.ranges.push_back((file, offset, len));
        drop(hints);
        self.shared.ready.notify_one();
    }

    /// Hints not yet acted on.
    #[cfg(test)]
    fn pending(&self) -> usize {
        lock(&self.shared.hints).ranges.len()
    }
}

impl Drop for ReadAhead {
    fn drop(&mut self) {
        lock(&self.shared.hints).stopping = true;
        self.shared.ready.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn run(shared: &Shared) {
    // Speculative work yields the CPU to the event loop. A hint's `WILLNEED` is not free: the
    // pages it adds are charged to the server's memory cgroup, and under a limit the charge
    // reclaims others on this thread. At the default priority this thread was runnable in 71 %
    // of samples beside the loop on its core (bench/thread_states.py) and halved the cached
    // file's rate; at +10 that rate doubled back (5,131-6,281 → 10,224-12,567 req/s) for 16 %
    // of the disk-bound rate (docs/architectures.md, "Read-ahead").
    let _ = ampd_sys::process::lower_thread_priority(READ_AHEAD_NICE);
    loop {
        let (file, offset, len) = {
            let mut hints = lock(&shared.hints);
            loop {
                if hints.stopping {
                    return;
                }
                if let Some(next) = hints.ranges.pop_front() {
                    break next;
                }
                hints = shared
                    .ready
                    .wait(hints)
                    .unwrap_or_else(PoisonError::into_inner);
            }
        };
        // A hint that fails (a pipe, a filesystem without read-ahead) costs nothing more: the
        // helper reads the range as before.
        let _ = fadvise(file.file.as_fd(), offset, len, Advice::WillNeed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::content::file::FileKey;
    use std::io::Write;
    use std::time::{Duration, Instant};

    #[test]
    fn every_hint_is_acted_on_and_the_thread_stops_on_drop() {
        let path = std::env::temp_dir().join(format!("ampd-read-ahead-{}", std::process::id()));
        let mut file = std::fs::File::create(&path).unwrap();
        file.write_all(&vec![1u8; 64 << 10]).unwrap();
        file.sync_all().unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let key = FileKey::of(&ampd_sys::file::fstat(file.as_fd()).unwrap());
        let file = Arc::new(OpenFile { file, key });
        let nice_here = ampd_sys::process::thread_nice().unwrap();
        let read_ahead = ReadAhead::start("test").unwrap();
        for offset in (0..16u64).map(|page| page * 4096) {
            read_ahead.hint(file.clone(), offset, 4096);
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while read_ahead.pending() > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(2));
        }
        assert_eq!(read_ahead.pending(), 0);
        drop(read_ahead);
        assert_eq!(
            Arc::strong_count(&file),
            1,
            "the thread let go of every file"
        );
        assert_eq!(
            ampd_sys::process::thread_nice().unwrap(),
            nice_here,
            "only the read-ahead thread is lowered"
        );
        std::fs::remove_file(path).unwrap();
    }
}
