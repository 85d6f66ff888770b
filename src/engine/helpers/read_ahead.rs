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
//! 5-7 ms (docs/research/architectures.md). `WILLNEED` only queues the reads, so one
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
//! Under a memory limit, reclaim takes the oldest pages on the inactive list first, and pages
//! read ahead are the oldest ones not yet sent: so the bytes read ahead are bounded by a share
//! of the limit (`BUDGET_SHARE`), and while reclaim takes pages before the finisher reaches
//! them, a range sent whole is dropped from the page cache at once (`run`), so that reclaim
//! finds sent pages rather than those about to be sent.
//!
//! Owns: the read-ahead queue (hints wait there, in the order they came, while `MAX_AHEAD`
//! claimed page-ins, or their share of the memory limit, wait for the finisher; without a
//! finisher a hint that finds it full is dropped), the finish queue, their two threads, and
//! whether reclaim is taking pages read ahead (`Reclaiming`).
//! Must not touch: connections, or the helpers' queue except through `Lanes::claim`.

use std::collections::VecDeque;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ampd_sys::file::{fadvise, Advice};

use super::{Place, Token};
use crate::content::file::{FileKey, OpenFile};
use crate::content::job::{self, Job, JobDone};
use crate::sync::lock;

/// Page-ins read ahead and not yet finished, at most: as many reads in flight as a deep-queue
/// device is worth (FUSE's `max_background` is set to 256 by ampd-slowfs; an NVMe queue is
/// deeper, but 64 clients' worth already saturates the server's core in the benchmark).
const MAX_AHEAD: usize = 256;
/// Bytes of page-ins read ahead and not yet finished, at most, as a share of the memory limit
/// of the server's cgroup (an eighth). Reclaim under the limit takes the oldest pages first,
/// and the pages read ahead longest ago are the ones the finisher sends next: on the latency
/// device at 512 clients (64 MiB limit), 256 page-ins of 100 KiB (40 % of the limit) had
/// 1,700-2,900 a second taken before they were sent, each read again by a helper; a quarter
/// with sent ranges dropped (`run`) had 100-400. With sent ranges dropped, p99 at 512 clients
/// is 82-85 ms with an eighth (81 page-ins), 87 with a sixth, 90-107 with a quarter, 117 with
/// half, at the same rate; a twelfth and a sixteenth lengthen the median and lower the rate
/// (docs/research/architectures.md, "The tail at 256 and 512 clients").
const BUDGET_SHARE: u64 = 8;
/// How long after a page-in was given back (its pages reclaimed before the finisher sent
/// them) sent ranges are still dropped (`run`).
const RECLAIM_MEMORY: Duration = Duration::from_secs(1);
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
    /// Noted at every give-back; the helpers run their page-ins with it too (`run`).
    pub reclaiming: Arc<Reclaiming>,
}

/// Whether reclaim is taking pages read ahead before they are sent: when the finisher last
/// gave a page-in back.
pub struct Reclaiming {
    since: Instant,
    /// Milliseconds from `since` to the last give-back, plus one; 0: none yet.
    last: AtomicU64,
}

impl Default for Reclaiming {
    fn default() -> Reclaiming {
        Reclaiming {
            since: Instant::now(),
            last: AtomicU64::new(0),
        }
    }
}

impl Reclaiming {
    fn now(&self) -> u64 {
        u64::try_from(self.since.elapsed().as_millis())
            .unwrap_or(u64::MAX)
            .saturating_add(1)
    }

    /// A page-in was given back: its pages were reclaimed before it was sent.
    pub fn noted(&self) {
        self.last.store(self.now(), Ordering::Relaxed);
    }

    /// Whether a page-in was given back within `RECLAIM_MEMORY`.
    #[must_use]
    pub fn recently(&self) -> bool {
        let last = self.last.load(Ordering::Relaxed);
        let memory = u64::try_from(RECLAIM_MEMORY.as_millis()).unwrap_or(u64::MAX);
        last != 0 && self.now().saturating_sub(last) <= memory
    }
}

/// Do a job on a helper thread or the finisher: as `job::run`, and a page-in that sent its
/// whole range while reclaim is taking pages read ahead (`Reclaiming::recently`) drops that
/// range from the page cache (`POSIX_FADV_DONTNEED`; pages the socket still holds are moved to
/// the end of the inactive list, where reclaim takes them first). Those pages would otherwise
/// sit between reclaim and the pages read ahead for the page-ins that wait: measured on the
/// latency device (188 MiB, 64 MiB limit) in one run, with the read-ahead budget, p99 at 256
/// clients 53 ms against 97 without either, at 512 clients 89 against 191, at 1.08 and 1.22 ×
/// the rate; the drop alone, 129-147 ms at 512 (docs/research/architectures.md, "The tail at 256 and 512
/// clients"). A range sent again soon is read again; under such reclaim it would not have
/// stayed anyway.
#[must_use]
pub fn run(job: Job, reclaiming: &Reclaiming) -> JobDone {
    let range = match &job {
        Job::PageIn {
            file,
            offset,
            len,
            send_to: Some(_),
        } => Some((file.clone(), *offset, *len)),
        _ => None,
    };
    let done = job::run(job);
    if let (Some((file, offset, len)), JobDone::PagedIn { sent, .. }) = (range, &done) {
        if *sent == len && len > 0 && reclaiming.recently() {
            let _ = fadvise(file.file.as_fd(), offset, len, Advice::DontNeed);
        }
    }
    done
}

struct Entry {
    file: Arc<OpenFile>,
    offset: u64,
    len: u64,
    /// The connection whose page-in the finisher may claim once the read is started.
    token: Token,
}

/// A page-in claimed once its read started, waiting for the finisher.
struct ToFinish {
    token: Token,
    job: Job,
    place: Place,
    len: u64,
}

struct Queues {
    to_start: VecDeque<Entry>,
    to_finish: VecDeque<ToFinish>,
    /// The bytes of the page-ins in `to_finish`.
    finishing: u64,
    stopping: bool,
}

impl Queues {
    fn ahead(&self) -> usize {
        self.to_start.len() + self.to_finish.len()
    }

    /// Whether the next hint's read may start: fewer than `MAX_AHEAD` claimed page-ins wait
    /// for the finisher, and its bytes fit in `budget` with theirs (one always may).
    fn room(&self, budget: u64) -> bool {
        let Some(next) = self.to_start.front() else {
            return false;
        };
        self.to_finish.is_empty()
            || (self.to_finish.len() < MAX_AHEAD
                && self.finishing.saturating_add(next.len) <= budget)
    }
}

struct Shared {
    queues: Mutex<Queues>,
    start_ready: Condvar,
    finish_ready: Condvar,
    /// `None`: hints only, no finisher (helper processes).
    lanes: Option<Lanes>,
    /// The bytes claimed page-ins waiting for the finisher may hold (`BUDGET_SHARE`).
    budget: u64,
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
        let budget = memory_limit().map_or(u64::MAX, |limit| limit / BUDGET_SHARE);
        ReadAhead::with_budget(name, lanes, budget)
    }

    /// `start`, with claimed page-ins waiting for the finisher holding at most `budget` bytes.
    fn with_budget(name: &str, lanes: Option<Lanes>, budget: u64) -> std::io::Result<ReadAhead> {
        let shared = Arc::new(Shared {
            queues: Mutex::new(Queues {
                to_start: VecDeque::new(),
                to_finish: VecDeque::new(),
                finishing: 0,
                stopping: false,
            }),
            start_ready: Condvar::new(),
            finish_ready: Condvar::new(),
            lanes,
            budget,
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
    /// 30-50 ms for a page-in read ahead, docs/research/architectures.md). The hints waiting are at most
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
    // for 16 % of the disk-bound rate (docs/research/architectures.md, "Read-ahead for page-ins that
    // wait").
    let _ = ampd_sys::process::lower_thread_priority(READ_AHEAD_NICE);
    loop {
        let Some(entry) = next(shared, &shared.start_ready, |queues| {
            // With a finisher, at most `MAX_AHEAD` claimed page-ins, and `budget` bytes, wait
            // for it.
            if queues.room(shared.budget) {
                queues.to_start.pop_front()
            } else {
                None
            }
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
            let mut queues = lock(&shared.queues);
            queues.finishing = queues.finishing.saturating_add(entry.len);
            queues.to_finish.push_back(ToFinish {
                token: entry.token,
                job,
                place,
                len: entry.len,
            });
            drop(queues);
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

/// The memory limit of the cgroup this process runs in, or of the nearest of its ancestors
/// that has one (cgroup v1 `memory.limit_in_bytes`, v2 `memory.max`): the page cache it adds
/// is charged to that cgroup and reclaimed within that limit.
fn memory_limit() -> Option<u64> {
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    memory_limit_in(&cgroups, |path| std::fs::read_to_string(path).ok())
}

/// `memory_limit` over the text of /proc/self/cgroup, reading files with `read`.
fn memory_limit_in(cgroups: &str, read: impl Fn(&str) -> Option<String>) -> Option<u64> {
    for line in cgroups.lines() {
        let mut fields = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) =
            (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let (root, file) = if controllers.split(',').any(|name| name == "memory") {
            ("/sys/fs/cgroup/memory", "memory.limit_in_bytes")
        } else if controllers.is_empty() {
            ("/sys/fs/cgroup", "memory.max")
        } else {
            continue;
        };
        let mut limit: Option<u64> = None;
        let mut dir = path.trim_end_matches('/');
        loop {
            let found = read(&format!("{root}{dir}/{file}"))
                .and_then(|text| text.trim().parse::<u64>().ok());
            if let Some(found) = found {
                limit = Some(limit.map_or(found, |limit| limit.min(found)));
            }
            match dir.rfind('/') {
                Some(parent) => dir = &dir[..parent],
                None => break,
            }
        }
        if limit.is_some() {
            return limit;
        }
    }
    None
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
        let Some(ToFinish {
            token, job, place, ..
        }) = next(shared, &shared.finish_ready, |queues| {
            let waited = !queues.room(shared.budget);
            let next = queues.to_finish.pop_front()?;
            queues.finishing = queues.finishing.saturating_sub(next.len);
            // Room for the next hint: the read-ahead thread may be waiting for it.
            if waited && queues.room(shared.budget) {
                shared.start_ready.notify_one();
            }
            Some(next)
        })
        else {
            return;
        };
        let whole = match &job {
            Job::PageIn {
                file, offset, len, ..
            } => read_started(file, *offset, *len),
            _ => true,
        };
        if whole {
            (lanes.completed)(token, run(job, &lanes.reclaiming));
        } else {
            lanes.reclaiming.noted();
            (lanes.give_back)(token, job, place);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::io::Write;
    use std::os::fd::OwnedFd;
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
            reclaiming: Arc::default(),
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

    /// Lanes whose queue of page-ins is `queued` (claimed by removing them) and whose finisher
    /// is held in its first report until `release`, so that the queues fill behind it.
    struct HeldFinisher {
        queued: Arc<Mutex<HashMap<Token, Job>>>,
        held: Arc<(Mutex<bool>, Condvar)>,
        completions: mpsc::Receiver<(Token, JobDone)>,
        lanes: Lanes,
    }

    impl HeldFinisher {
        fn new() -> HeldFinisher {
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
                completed: Box::new(move |token, done| {
                    let (holding, released) = &*hold;
                    let mut holding = lock(holding);
                    while *holding {
                        holding = released.wait(holding).unwrap();
                    }
                    lock(&completed).send((token, done)).unwrap();
                }),
                give_back: Box::new(|_, _, _| panic!("nothing is given back")),
                reclaiming: Arc::default(),
            };
            HeldFinisher {
                queued,
                held,
                completions,
                lanes,
            }
        }
    }

    /// Whether this kernel has `cachestat` (Linux 6.5), without which nothing is claimed.
    /// Where it has none, a test of claiming checks that instead (a page-in hinted is left to
    /// the helpers) and says so on stderr, rather than passing without asserting anything.
    fn can_claim(file: &Arc<OpenFile>, test: &str) -> bool {
        if ampd_sys::file::cachestat(file.file.as_fd(), 0, 0).is_ok() {
            return true;
        }
        eprintln!("{test}: no cachestat (Linux < 6.5): checked that nothing is claimed instead");
        let (lanes, harness) = lanes();
        let read_ahead = ReadAhead::start("test", Some(lanes)).unwrap();
        lock(&harness.queued).insert(1, page_in(file, 0, 8192));
        read_ahead.hint(file.clone(), 0, 8192, 1);
        settle(&read_ahead);
        assert!(
            lock(&harness.queued).contains_key(&1),
            "without cachestat a page-in stays the helpers'"
        );
        assert!(harness.completions.try_recv().is_err());
        false
    }

    #[test]
    fn claimed_page_ins_are_finished_in_the_order_their_reads_started() {
        let (path, file) = test_file("claim");
        if !can_claim(
            &file,
            "claimed_page_ins_are_finished_in_the_order_their_reads_started",
        ) {
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
        if !can_claim(&file, "pages_that_are_not_there_are_left_to_the_helpers") {
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
        if !can_claim(
            &file,
            "a_hint_that_finds_the_read_ahead_full_waits_for_room_in_order",
        ) {
            std::fs::remove_file(path).unwrap();
            return;
        }
        let HeldFinisher {
            queued,
            held,
            completions,
            lanes,
        } = HeldFinisher::new();
        let read_ahead = ReadAhead::with_budget("test", Some(lanes), u64::MAX).unwrap();
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

    /// Claimed page-ins waiting for the finisher hold at most the budget's bytes (a share of the
    /// memory limit): reclaim takes the oldest pages first, and those are the pages read ahead
    /// and not yet sent (1,700-2,900 page-ins a second reclaimed before they were sent at 512
    /// clients on the latency device with 256 of 100 KiB in a 64 MiB limit).
    #[test]
    fn page_ins_read_ahead_hold_at_most_the_budget() {
        let (path, file) = test_file("budget");
        if !can_claim(&file, "page_ins_read_ahead_hold_at_most_the_budget") {
            std::fs::remove_file(path).unwrap();
            return;
        }
        let HeldFinisher {
            queued,
            held,
            completions,
            lanes,
        } = HeldFinisher::new();
        // Room for three pages of 4 KiB waiting besides the one the finisher holds.
        let read_ahead = ReadAhead::with_budget("test", Some(lanes), 3 * 4096).unwrap();
        let total = 8u64;
        for token in 0..total {
            let offset = token * 4096;
            lock(&queued).insert(token, page_in(&file, offset, 4096));
            read_ahead.hint(file.clone(), offset, 4096, token);
            if token == 0 {
                let deadline = Instant::now() + Duration::from_secs(5);
                while read_ahead.pending() > 0 && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while lock(&queued).len() > 4 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        // Long enough for a read-ahead thread that ignored the budget to claim another.
        std::thread::sleep(Duration::from_millis(50));
        let unclaimed = lock(&queued).len();
        *lock(&held.0) = false;
        held.1.notify_all();
        assert_eq!(
            unclaimed, 4,
            "one with the finisher, three waiting, four left"
        );
        let tokens: Vec<Token> = (0..total)
            .map_while(|_| completions.recv_timeout(Duration::from_secs(5)).ok())
            .map(|(token, _)| token)
            .collect();
        assert_eq!(tokens, (0..total).collect::<Vec<_>>(), "all, in order");
        drop(read_ahead);
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn the_memory_limit_is_the_nearest_cgroup_s_own_or_an_ancestor_s() {
        let files: HashMap<&str, &str> = [
            (
                "/sys/fs/cgroup/memory/bench/memory.limit_in_bytes",
                "67108864\n",
            ),
            (
                "/sys/fs/cgroup/memory/memory.limit_in_bytes",
                "9223372036854771712\n",
            ),
            ("/sys/fs/cgroup/site/memory.max", "max\n"),
            ("/sys/fs/cgroup/site/web/memory.max", "268435456\n"),
            ("/sys/fs/cgroup/site/web/worker/memory.max", "max\n"),
        ]
        .into_iter()
        .collect();
        let read = |path: &str| files.get(path).map(|text| (*text).to_owned());
        let v1 = "12:cpuacct,cpu:/bench\n7:memory:/bench\n0::/user.slice\n";
        assert_eq!(memory_limit_in(v1, read), Some(64 << 20), "cgroup v1");
        let v2 = "0::/site/web/worker\n";
        assert_eq!(memory_limit_in(v2, read), Some(256 << 20), "v2, a parent's");
        assert_eq!(memory_limit_in("0::/\n", read), None, "v2, no limit");
        assert_eq!(memory_limit_in("", read), None);
    }

    /// While reclaim takes pages read ahead before they are sent, a page-in that sent its
    /// whole range drops it from the page cache, so that reclaim finds those pages rather than
    /// the ones about to be sent; otherwise the range stays cached.
    #[test]
    fn a_range_sent_whole_is_dropped_only_while_reclaim_takes_pages_read_ahead() {
        let (path, file) = test_file("drop");
        let cached = || {
            ampd_sys::file::cachestat(file.file.as_fd(), 0, FILE_SIZE)
                .map(|stat| stat.cached_pages)
                .ok()
        };
        // A file system whose pages cannot be dropped (tmpfs) has nothing to test.
        let _ = fadvise(file.file.as_fd(), 0, FILE_SIZE, Advice::DontNeed);
        if cached() != Some(0) {
            std::fs::remove_file(path).unwrap();
            return;
        }
        // Sent to a file, which copies (a socket would hold the pages until read).
        let out_path = path.with_extension("out");
        let send = |reclaiming: &Reclaiming| {
            let out = std::fs::File::create(&out_path).unwrap();
            let job = Job::PageIn {
                file: file.clone(),
                offset: 0,
                len: FILE_SIZE,
                send_to: Some(OwnedFd::from(out)),
            };
            let JobDone::PagedIn { sent, .. } = run(job, reclaiming) else {
                panic!("a page-in reports PagedIn");
            };
            assert_eq!(sent, FILE_SIZE);
        };
        let reclaiming = Reclaiming::default();
        send(&reclaiming);
        assert_eq!(cached(), Some(FILE_SIZE / 4096), "kept without reclaim");
        reclaiming.noted();
        assert!(reclaiming.recently());
        send(&reclaiming);
        assert_eq!(
            cached(),
            Some(0),
            "dropped while reclaim takes pages read ahead"
        );
        std::fs::remove_file(out_path).unwrap();
        std::fs::remove_file(path).unwrap();
    }
}
