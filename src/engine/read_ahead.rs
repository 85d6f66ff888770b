//! Read-ahead for page-ins that find every helper busy: the kernel is asked to start reading
//! their ranges at once (`posix_fadvise(WILLNEED)`), and one thread then finishes those no
//! helper has taken yet, in the order their reads were started, so reads in flight are not
//! capped by helper threads.
//!
//! Why: on a device whose reads are slow rather than few (network storage, FUSE, a deep-queue
//! SSD), the disk-bound rate is the number of reads in flight, and a helper keeps one in flight
//! at a time. When the pool is at `helpers_max`, a page-in that waits for a helper would hold
//! that helper for most of its read even after read-ahead had started it: measured on the
//! latency device at 375 MiB, a queued page-in waits 4.5-6.6 ms for a helper and then holds it
//! 5-7 ms (docs/architectures.md). `WILLNEED` only queues the reads, so one
//! thread can start dozens; and as reads of one device complete in about the order they were
//! started, one thread that waits for them in that order (the *finisher*) waits about as long
//! as the first one and finds the others done, instead of a helper per read.
//!
//! Two threads, not one: `WILLNEED` may wait for a file's block map and its page allocations
//! reclaim under a memory limit (100-200 µs per 100 KiB measured), and the finisher waits for
//! whole reads; neither may delay the other.
//!
//! The page-in stays in the helpers' queue while its read is being started, and is claimed
//! from there (`Lanes::claim`) only once it is: a helper that frees up first takes it as any job,
//! so a read-ahead thread that falls behind (it runs at a low priority) never holds a page-in
//! back. With helper processes (`--helpers-mode process`) there are no `Lanes`, no finisher,
//! and nothing is claimed: Flash ran disk work in other processes for portability, and the
//! finisher would be a thread of the server.
//!
//! Owns: the read-ahead queue (hints wait there, in the order they came, while `MAX_AHEAD`
//! claimed page-ins wait for the finisher; without a finisher a hint that finds it full is
//! dropped), the finish queue, and their two threads.
//! Must not touch: connections, or the helpers' queue except through `Lanes::claim`.

use std::collections::VecDeque;
use std::os::fd::AsFd;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;

use ampd_sys::file::{fadvise, Advice};

use super::helpers::{Place, Token};
use crate::content::file::{FileKey, OpenFile};
use crate::content::job::{self, Job, JobDone};
use crate::sync::lock;

/// Page-ins read ahead and not yet finished, at most: as many reads in flight as a deep-queue
/// device is worth (FUSE's `max_background` is set to 256 by ampd-slowfs; an NVMe queue is
/// deeper, but 64 clients' worth already saturates the server's core in the benchmark).
const MAX_AHEAD: usize = 256;
/// How much lower the read-ahead thread's priority is than the server's (see `start_reads`).
const READ_AHEAD_NICE: i32 = 10;

/// Takes connection `token`'s page-in of a file (by key) at an offset out of the helpers' queue.
pub type Claim = dyn Fn(Token, FileKey, u64) -> Option<(Job, Place)> + Send + Sync;

/// Whether connection `token`'s page-in of a file (by key) at an offset is in the helpers' queue.
pub type Claimed = dyn Fn(Token, FileKey, u64) -> bool + Send + Sync;

/// How this module reaches the helpers' queue and the loop.
pub struct Lanes {
    /// Whether connection `token`'s page-in of `file` at `offset` is still in the helpers'
    /// queue (no helper has taken it).
    pub waiting: Box<Claimed>,
    /// Take the page-in of `file` at `offset` for connection `token` out of the helpers' queue,
    /// if no helper has taken it yet, with its place there.
    pub claim: Box<Claim>,
    /// A finished page-in's result, for the loop.
    pub completed: Box<dyn Fn(Token, JobDone) + Send + Sync>,
    /// A claimed page-in whose pages are no longer all there or on their way (reclaimed under
    /// a memory limit before the finisher reached it): back to the helpers' queue, where it
    /// arrived (ahead of later page-ins, behind earlier ones), so that the finisher never reads
    /// a range alone while the page-ins behind it wait.
    pub give_back: Box<dyn Fn(Token, Job, Place) + Send + Sync>,
}

struct Entry {
    file: Arc<OpenFile>,
    offset: u64,
    len: u64,
    /// The connection whose page-in the finisher may claim once the read is started.
    token: Token,
}

struct Queues {
    to_start: VecDeque<Entry>,
    to_finish: VecDeque<(Token, Job, Place)>,
    stopping: bool,
}

impl Queues {
    fn ahead(&self) -> usize {
        self.to_start.len() + self.to_finish.len()
    }
}

struct Shared {
    queues: Mutex<Queues>,
    start_ready: Condvar,
    finish_ready: Condvar,
    /// `None`: hints only, no finisher (helper processes).
    lanes: Option<Lanes>,
}

pub struct ReadAhead {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

impl ReadAhead {
    /// Start the read-ahead thread and, with `lanes`, the finisher.
    ///
    /// # Errors
    /// A thread cannot be started.
    pub fn start(name: &str, lanes: Option<Lanes>) -> std::io::Result<ReadAhead> {
        let shared = Arc::new(Shared {
            queues: Mutex::new(Queues {
                to_start: VecDeque::new(),
                to_finish: VecDeque::new(),
                stopping: false,
            }),
            start_ready: Condvar::new(),
            finish_ready: Condvar::new(),
            lanes,
        });
        let mut read_ahead = ReadAhead {
            shared: shared.clone(),
            threads: Vec::with_capacity(2),
        };
        let starter = shared.clone();
        read_ahead.threads.push(
            std::thread::Builder::new()
                .name(format!("{name}-read-ahead"))
                .spawn(move || start_reads(&starter))?,
        );
        if shared.lanes.is_none() {
            return Ok(read_ahead);
        }
        read_ahead.threads.push(
            std::thread::Builder::new()
                .name(format!("{name}-finisher"))
                .spawn(move || finish(&shared))?,
        );
        Ok(read_ahead)
    }

    /// Start reading `len` bytes of `file` from `offset` soon; with a finisher, it then takes
    /// connection `token`'s page-in of that range from the helpers' queue if it is still
    /// there, once fewer than `MAX_AHEAD` are on their way: hints wait for room in the order
    /// they came, as the helpers take page-ins, so that a page-in is not overtaken by those
    /// that came after it (a hint dropped for want of room left its page-in to the helpers,
    /// which are slower to reach it: at 512 clients on the latency device, 60-100 ms against
    /// 30-50 ms for a page-in read ahead, docs/architectures.md). The hints waiting are at most
    /// one per connection with a page-in out. Without a finisher (helper processes) nothing
    /// is claimed and a hint only starts a read, so one that finds `MAX_AHEAD` waiting is
    /// dropped: it would be acted on after a helper had read the range anyway.
    pub fn hint(&self, file: Arc<OpenFile>, offset: u64, len: u64, token: Token) {
        let mut queues = lock(&self.shared.queues);
        if self.shared.lanes.is_none() && queues.ahead() >= MAX_AHEAD {
            return;
        }
        queues.to_start.push_back(Entry {
            file,
            offset,
            len,
            token,
        });
        drop(queues);
        self.shared.start_ready.notify_one();
    }

    /// Hints not acted on and page-ins claimed but not finished.
    #[cfg(test)]
    fn pending(&self) -> usize {
        lock(&self.shared.queues).ahead()
    }
}

impl Drop for ReadAhead {
    fn drop(&mut self) {
        lock(&self.shared.queues).stopping = true;
        self.shared.start_ready.notify_all();
        self.shared.finish_ready.notify_all();
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// What `take` finds in the queues, waiting on `ready` until there is something; `None` once
/// stopping.
fn next<T>(shared: &Shared, ready: &Condvar, take: impl Fn(&mut Queues) -> Option<T>) -> Option<T> {
    let mut queues = lock(&shared.queues);
    loop {
        if queues.stopping {
            return None;
        }
        if let Some(found) = take(&mut queues) {
            return Some(found);
        }
        queues = ready.wait(queues).unwrap_or_else(PoisonError::into_inner);
    }
}

/// The read-ahead thread: `WILLNEED` for every entry, in order.
fn start_reads(shared: &Shared) {
    // Speculative work yields the CPU to the event loop. A hint's `WILLNEED` is not free: the
    // pages it adds are charged to the server's memory cgroup, and under a limit the charge
    // reclaims others on this thread. At the default priority this thread is runnable in 71 %
    // of samples beside the loop on its core (bench/thread_states.py) and halves the cached
    // file's rate; at +10 that rate is twice as high (5,131-6,281 against 10,224-12,567 req/s)
    // for 16 % of the disk-bound rate (docs/architectures.md, "Read-ahead for page-ins that
    // wait").
    let _ = ampd_sys::process::lower_thread_priority(READ_AHEAD_NICE);
    loop {
        let Some(entry) = next(shared, &shared.start_ready, |queues| {
            // With a finisher, at most `MAX_AHEAD` claimed page-ins wait for it.
            (queues.to_finish.len() < MAX_AHEAD)
                .then(|| queues.to_start.pop_front())
                .flatten()
        }) else {
            return;
        };
        // A page-in a helper took while its hint waited: its read is the helper's; a `WILLNEED`
        // now would at best repeat it, at worst read again pages sent and reclaimed since.
        if let Some(lanes) = &shared.lanes {
            if !(lanes.waiting)(entry.token, entry.file.key, entry.offset) {
                continue;
            }
        }
        let hinted = fadvise(
            entry.file.file.as_fd(),
            entry.offset,
            entry.len,
            Advice::WillNeed,
        );
        let Some(lanes) = &shared.lanes else {
            continue;
        };
        if hinted.is_err() || !read_started(&entry.file, entry.offset, entry.len) {
            continue;
        }
        if let Some((job, place)) = (lanes.claim)(entry.token, entry.file.key, entry.offset) {
            lock(&shared.queues)
                .to_finish
                .push_back((entry.token, job, place));
            shared.finish_ready.notify_one();
        }
    }
}

/// Whether every page of the range is there or being read: the page cache counts a page from
/// the moment its read starts (`cachestat`). A range that is not (a filesystem that ignores
/// `WILLNEED`, FUSE skipping read-ahead while congested, pages reclaimed again) would have the
/// finisher read it alone while the page-ins behind it wait: measured, a few page-ins then
/// wait 300 ms and the rate falls to 0.55 of `mt`. Without `cachestat` (Linux < 6.5) there is
/// no telling, so nothing is claimed and the helpers take every page-in, as with no finisher.
fn read_started(file: &OpenFile, offset: u64, len: u64) -> bool {
    let first = offset / PAGE;
    let end = offset.saturating_add(len).div_ceil(PAGE);
    ampd_sys::file::cachestat(file.file.as_fd(), offset, len)
        .is_ok_and(|stat| stat.cached_pages >= end - first)
}

/// The page size the range is counted in. With larger pages (some arm64 and ppc64 kernels)
/// `cachestat` counts fewer, nothing is claimed, and the helpers take every page-in.
const PAGE: u64 = 4096;

/// The finisher: each page-in in the order its read was started, sent (or paged in) as soon
/// as its pages are there.
fn finish(shared: &Shared) {
    let Some(lanes) = &shared.lanes else {
        return;
    };
    loop {
        let Some((token, job, place)) = next(shared, &shared.finish_ready, |queues| {
            let next = queues.to_finish.pop_front()?;
            // Room for one more claimed page-in: the read-ahead thread may be waiting for it.
            if queues.to_finish.len() == MAX_AHEAD - 1 {
                shared.start_ready.notify_one();
            }
            Some(next)
        }) else {
            return;
        };
        let whole = match &job {
            Job::PageIn {
                file, offset, len, ..
            } => read_started(file, *offset, *len),
            _ => true,
        };
        if whole {
            (lanes.completed)(token, job::run(job));
        } else {
            (lanes.give_back)(token, job, place);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::io::Write;
    use std::sync::mpsc;
    use std::time::{Duration, Instant};

    const FILE_SIZE: u64 = 64 << 10;

    fn test_file(name: &str) -> (std::path::PathBuf, Arc<OpenFile>) {
        let path =
            std::env::temp_dir().join(format!("ampd-read-ahead-{name}-{}", std::process::id()));
        let mut file = std::fs::File::create(&path).unwrap();
        file.write_all(&vec![1u8; FILE_SIZE as usize]).unwrap();
        file.sync_all().unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let key = FileKey::of(&ampd_sys::file::fstat(file.as_fd()).unwrap());
        (path, Arc::new(OpenFile::new(file, key)))
    }

    fn page_in(file: &Arc<OpenFile>, offset: u64, len: u64) -> Job {
        Job::PageIn {
            file: file.clone(),
            offset,
            len,
            send_to: None,
        }
    }

    /// Lanes over a stand-in for the helpers' queue: what the finisher may claim, what it
    /// reports and what it gives back.
    struct Harness {
        queued: Arc<Mutex<HashMap<Token, Job>>>,
        completions: mpsc::Receiver<(Token, JobDone)>,
        given_back: mpsc::Receiver<Token>,
    }

    fn lanes() -> (Lanes, Harness) {
        let queued: Arc<Mutex<HashMap<Token, Job>>> = Arc::default();
        let (completed, completions) = mpsc::channel();
        let (gave_back, given_back) = mpsc::channel();
        let (completed, gave_back) = (Mutex::new(completed), Mutex::new(gave_back));
        let claimable = queued.clone();
        let waiting = queued.clone();
        let lanes = Lanes {
            waiting: Box::new(move |token, _, _| lock(&waiting).contains_key(&token)),
            claim: Box::new(move |token, _, _| {
                lock(&claimable).remove(&token).map(|job| (job, Place(0)))
            }),
            completed: Box::new(move |token, done| {
                lock(&completed).send((token, done)).unwrap();
            }),
            give_back: Box::new(move |token, _, _| lock(&gave_back).send(token).unwrap()),
        };
        let harness = Harness {
            queued,
            completions,
            given_back,
        };
        (lanes, harness)
    }

    fn settle(read_ahead: &ReadAhead) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while read_ahead.pending() > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(2));
        }
        assert_eq!(read_ahead.pending(), 0);
    }

    #[test]
    fn every_hint_is_acted_on_and_the_threads_stop_on_drop() {
        let (path, file) = test_file("hints");
        let nice_here = ampd_sys::process::thread_nice().unwrap();
        let (lanes, harness) = lanes();
        let read_ahead = ReadAhead::start("test", Some(lanes)).unwrap();
        for offset in (0..16u64).map(|page| page * 4096) {
            // Tokens the stand-in queue does not hold: nothing to claim.
            read_ahead.hint(file.clone(), offset, 4096, 100 + offset);
        }
        settle(&read_ahead);
        drop(read_ahead);
        assert!(harness.completions.try_recv().is_err(), "nothing claimed");
        assert_eq!(
            Arc::strong_count(&file),
            1,
            "the threads let go of every file"
        );
        assert_eq!(
            ampd_sys::process::thread_nice().unwrap(),
            nice_here,
            "only the read-ahead thread is lowered"
        );
        std::fs::remove_file(path).unwrap();
    }

    /// Whether this kernel has `cachestat` (Linux 6.5), without which nothing is claimed.
    fn can_claim(file: &OpenFile) -> bool {
        ampd_sys::file::cachestat(file.file.as_fd(), 0, 0).is_ok()
    }

    #[test]
    fn claimed_page_ins_are_finished_in_the_order_their_reads_started() {
        let (path, file) = test_file("claim");
        if !can_claim(&file) {
            std::fs::remove_file(path).unwrap();
            return;
        }
        let (lanes, harness) = lanes();
        let read_ahead = ReadAhead::start("test", Some(lanes)).unwrap();
        for token in 0..8u64 {
            lock(&harness.queued).insert(token, page_in(&file, token * 8192, 8192));
            read_ahead.hint(file.clone(), token * 8192, 8192, token);
        }
        let tokens: Vec<Token> = (0..8)
            .map(|_| {
                let (token, done) = harness
                    .completions
                    .recv_timeout(Duration::from_secs(5))
                    .unwrap();
                let JobDone::PagedIn { key, end, sent } = done else {
                    panic!("a page-in reports PagedIn, not {done:?}");
                };
                assert_eq!((key, end, sent), (file.key, (token + 1) * 8192, 0));
                token
            })
            .collect();
        assert_eq!(tokens, (0..8).collect::<Vec<_>>());
        assert!(lock(&harness.queued).is_empty(), "every one was claimed");
        assert!(harness.given_back.try_recv().is_err());
        drop(read_ahead);
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn a_page_in_already_taken_by_a_helper_is_left_alone() {
        let (path, file) = test_file("taken");
        let (lanes, harness) = lanes();
        let read_ahead = ReadAhead::start("test", Some(lanes)).unwrap();
        // Token 3 is not in the stand-in queue: a helper took it first.
        read_ahead.hint(file.clone(), 0, 8192, 3);
        settle(&read_ahead);
        assert!(harness.completions.try_recv().is_err());
        drop(read_ahead);
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn pages_that_are_not_there_are_left_to_the_helpers() {
        let (path, file) = test_file("absent");
        if !can_claim(&file) {
            std::fs::remove_file(path).unwrap();
            return;
        }
        let (lanes, harness) = lanes();
        let read_ahead = ReadAhead::start("test", Some(lanes)).unwrap();
        // A range past the end of the file is never in the page cache, like one whose
        // read-ahead the filesystem skipped: the read-ahead thread does not claim it...
        let beyond = FILE_SIZE + (1 << 20);
        lock(&harness.queued).insert(1, page_in(&file, beyond, 8192));
        read_ahead.hint(file.clone(), beyond, 8192, 1);
        settle(&read_ahead);
        assert!(lock(&harness.queued).contains_key(&1), "still the helpers'");
        // ...and a claimed page-in whose own range is not there goes back, not read here.
        lock(&harness.queued).insert(2, page_in(&file, beyond, 8192));
        read_ahead.hint(file.clone(), 0, 8192, 2);
        assert_eq!(
            harness
                .given_back
                .recv_timeout(Duration::from_secs(5))
                .unwrap(),
            2
        );
        assert!(harness.completions.try_recv().is_err());
        drop(read_ahead);
        std::fs::remove_file(path).unwrap();
    }

    /// A page-in that finds `MAX_AHEAD` reads on their way waits for room, in the order it
    /// came, rather than being left to the helpers: those are slower to reach it than the
    /// read-ahead (measured at 512 clients on the latency device, page-ins left to the helpers
    /// waited 60-100 ms for one, those read ahead 30-50 ms in all), so a page-in that came
    /// later would be sent first.
    #[test]
    fn a_hint_that_finds_the_read_ahead_full_waits_for_room_in_order() {
        let (path, file) = test_file("full");
        if !can_claim(&file) {
            std::fs::remove_file(path).unwrap();
            return;
        }
        let queued: Arc<Mutex<HashMap<Token, Job>>> = Arc::default();
        let held = Arc::new((Mutex::new(true), Condvar::new()));
        let (completed, completions) = mpsc::channel();
        let completed = Mutex::new(completed);
        let (claimable, waiting) = (queued.clone(), queued.clone());
        let hold = held.clone();
        let lanes = Lanes {
            waiting: Box::new(move |token, _, _| lock(&waiting).contains_key(&token)),
            claim: Box::new(move |token, _, _| {
                lock(&claimable).remove(&token).map(|job| (job, Place(0)))
            }),
            // The finisher is held in its first report until the test lets it go.
            completed: Box::new(move |token, done| {
                let (holding, released) = &*hold;
                let mut holding = lock(holding);
                while *holding {
                    holding = released.wait(holding).unwrap();
                }
                lock(&completed).send((token, done)).unwrap();
            }),
            give_back: Box::new(|_, _, _| panic!("nothing is given back")),
        };
        let read_ahead = ReadAhead::start("test", Some(lanes)).unwrap();
        let total = MAX_AHEAD as u64 + 2;
        for token in 0..total {
            let offset = token % (FILE_SIZE / 4096) * 4096;
            lock(&queued).insert(token, page_in(&file, offset, 4096));
            read_ahead.hint(file.clone(), offset, 4096, token);
            if token == 0 {
                // The first is with the finisher, which holds it: the rest fill the queues.
                let deadline = Instant::now() + Duration::from_secs(5);
                while read_ahead.pending() > 0 && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while lock(&queued).len() > 1 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        let (unclaimed, pending) = (lock(&queued).len(), read_ahead.pending());
        // Let the finisher go before any assertion, so that a failing one does not leave it
        // held (and the drop waiting for it).
        *lock(&held.0) = false;
        held.1.notify_all();
        assert_eq!(unclaimed, 1, "one waits for room");
        assert_eq!(pending, MAX_AHEAD + 1, "hinted, not dropped");
        let tokens: Vec<Token> = (0..total)
            .map_while(|_| completions.recv_timeout(Duration::from_secs(5)).ok())
            .map(|(token, _)| token)
            .collect();
        assert_eq!(tokens, (0..total).collect::<Vec<_>>());
        drop(read_ahead);
        std::fs::remove_file(path).unwrap();
    }
}
