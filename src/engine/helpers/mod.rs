//! Flash's helpers (§4.2): threads that do the work that can block on disk, so the event loop
//! never does. Jobs go in through a queue; results come back through a completion list and an
//! eventfd that the loop's epoll watches. With `--helpers-mode process` each helper thread hands
//! its jobs to a helper process of its own and waits for the answer (`helper_process.rs`), so
//! the disk work runs in another process while the queue and completions stay the same.
//!
//! The pool grows on demand, as Flash's did: a job that finds every helper busy starts another
//! (up to `helpers_max`), and a helper beyond the configured start count that has had nothing
//! to do for `RETIRE_AFTER` ends. On a device whose reads are slow rather than few (a network
//! or FUSE filesystem), throughput is the number of reads in flight, so a fixed handful of
//! helpers would cap it (docs/research/architectures.md); on a cached working set no job waits and the
//! pool stays at its start count.
//!
//! Path translations have a lane of their own, as Flash had "translation helpers" (§5.2)
//! beside the helpers that bring disk blocks into memory (§5.1): a request whose path is not
//! translated yet needs a translation first and may need no read at all (a cached file, a
//! 404), but in the one queue it would wait behind every read that arrived before it. A
//! translation goes to the helpers when one of them is free to take it at once, so where
//! nothing waits the lane costs nothing; otherwise to the lane's own threads (`translators`),
//! started on demand up to `helpers` (the pool's start count) and ended when idle, which take
//! nothing but translations. Measured (an instrumented build, latency device, 512 clients),
//! translations waited 110-170 ms behind page-ins in the one queue, under 1 ms in the lane
//! (docs/research/architectures.md, "Path translations do not wait for reads").
//!
//! Owns: the helper threads, the job queues and the completion list of one event loop.
//! Must not touch: connections (a completion names its connection by token only).

pub mod read_ahead;

use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ampd_sys::eventfd::EventFd;

use super::helper_process::{Failure, HelperProcess};
use crate::config::{Config, HelperMode, Level};
use crate::content::file::FileKey;
use crate::content::job::{self, Job, JobDone};
use crate::log::error::Throttle;
use crate::sync::lock;
use read_ahead::{Lanes, ReadAhead, Reclaiming};

/// Identifies the connection (slot and generation) a job belongs to.
pub type Token = u64;

/// How long a helper beyond the start count waits for a job before it ends.
const RETIRE_AFTER: Duration = Duration::from_secs(30);

/// How many helpers a loop starts with and may grow to.
#[derive(Clone, Copy, Debug)]
pub struct PoolSize {
    pub start: usize,
    pub max: usize,
}

impl PoolSize {
    #[must_use]
    pub fn of(config: &Config) -> PoolSize {
        PoolSize {
            start: config.helpers,
            max: config.helpers_max,
        }
    }
}

/// Where a job arrived in a loop's helpers' queue: a page-in claimed by the finisher carries it,
/// so that one given back returns there (`Shared::enqueue_in_place`).
#[derive(Clone, Copy, Debug)]
pub struct Place(pub(super) u64);

/// A job waiting for a helper, with its place in the order jobs arrived in.
struct Queued {
    token: Token,
    job: Job,
    arrival: u64,
}

struct Queue {
    /// In the order the jobs arrived: helpers take the oldest.
    jobs: VecDeque<Queued>,
    /// The number the next job that arrives gets.
    next_arrival: u64,
    stopping: bool,
    /// Helper threads alive.
    helpers: usize,
    /// Helper threads running a job; the others are waiting for one or about to take one.
    working: usize,
}

impl Queue {
    fn new() -> Queue {
        Queue {
            jobs: VecDeque::new(),
            next_arrival: 0,
            stopping: false,
            helpers: 0,
            working: 0,
        }
    }

    fn push(&mut self, token: Token, job: Job) {
        let arrival = self.next_arrival;
        self.next_arrival += 1;
        self.jobs.push_back(Queued {
            token,
            job,
            arrival,
        });
    }

    /// Where connection `token`'s page-in of `key` at `offset` is in the queue.
    fn position_of(&self, token: Token, key: FileKey, offset: u64) -> Option<usize> {
        self.jobs.iter().position(|queued| {
            queued.token == token
                && matches!(&queued.job, Job::PageIn { file, offset: at, .. } if file.key == key && *at == offset)
        })
    }

    /// Whether a job queued now would wait: every helper not running a job has one queued
    /// for it already.
    fn would_wait(&self) -> bool {
        self.jobs.len() >= self.helpers - self.working
    }
}

/// Where finished jobs wait for the loop, from every pool of its helpers.
struct Completions {
    done: Mutex<Vec<(Token, JobDone)>>,
    wake: EventFd,
}

impl Completions {
    fn complete(&self, token: Token, done: JobDone) {
        let mut finished = lock(&self.done);
        let was_empty = finished.is_empty();
        finished.push((token, done));
        drop(finished);
        // One wake-up per batch: the loop takes everything that finished when it reads.
        if was_empty {
            self.wake.notify();
        }
    }
}

/// One queue and the helper threads that take from it.
struct Shared {
    queue: Mutex<Queue>,
    ready: Condvar,
    completions: Arc<Completions>,
    size: PoolSize,
    retire_after: Duration,
    /// Whether the finisher finds pages read ahead reclaimed (`read_ahead::run`).
    reclaiming: Arc<Reclaiming>,
}

impl Shared {
    fn new(size: PoolSize, retire_after: Duration, completions: Arc<Completions>) -> Shared {
        Shared {
            queue: Mutex::new(Queue::new()),
            ready: Condvar::new(),
            completions,
            size,
            retire_after,
            reclaiming: Arc::default(),
        }
    }

    fn enqueue(&self, token: Token, job: Job) {
        lock(&self.queue).push(token, job);
        self.ready.notify_one();
    }

    /// A page-in the finisher claimed and gives back goes back where it arrived, ahead of
    /// every job that arrived after it, not at the front: when many come back at once (read
    /// ahead reclaimed under a memory limit), page-ins that arrived before them would otherwise
    /// wait behind all of them. Measured at 512 clients on the latency device, with up to 2,900
    /// given back a second: the slowest requests wait 0.6-2.1 s at the front, 0.2-0.34 s in
    /// arrival order (docs/research/architectures.md).
    fn enqueue_in_place(&self, token: Token, job: Job, Place(arrival): Place) {
        let mut queue = lock(&self.queue);
        let index = queue
            .jobs
            .iter()
            .position(|queued| queued.arrival > arrival)
            .unwrap_or(queue.jobs.len());
        queue.jobs.insert(
            index,
            Queued {
                token,
                job,
                arrival,
            },
        );
        drop(queue);
        self.ready.notify_one();
    }

    /// Take connection `token`'s page-in of `key` at `offset` out of the queue, if it is
    /// still there, with its place in it.
    fn claim(&self, token: Token, key: FileKey, offset: u64) -> Option<(Job, Place)> {
        let mut queue = lock(&self.queue);
        let index = queue.position_of(token, key, offset)?;
        let claimed = queue.jobs.remove(index)?;
        Some((claimed.job, Place(claimed.arrival)))
    }

    /// Whether connection `token`'s page-in of `key` at `offset` is still waiting for a helper.
    fn waiting(&self, token: Token, key: FileKey, offset: u64) -> bool {
        lock(&self.queue).position_of(token, key, offset).is_some()
    }

    fn complete(&self, token: Token, done: JobDone) {
        self.completions.complete(token, done);
    }
}

/// Which pool a helper thread takes its jobs from.
#[derive(Clone, Copy)]
enum Lane {
    /// Every job (translations too, when a helper is free for one at once).
    Any,
    /// Path translations that found every helper busy.
    Translations,
}

pub struct Helpers {
    /// The helpers, for every kind of job.
    shared: Arc<Shared>,
    /// The translators: path translations only, so that none waits behind a read.
    translations: Arc<Shared>,
    completions: Arc<Completions>,
    name: String,
    mode: HelperMode,
    /// Every helper thread started (those that retired are joined at the end).
    threads: Mutex<Vec<JoinHandle<()>>>,
    started: AtomicUsize,
    /// Started the first time a page-in finds every helper busy at the cap (`read_ahead.rs`).
    read_ahead: std::sync::OnceLock<Option<ReadAhead>>,
}

impl Helpers {
    /// Start `size.start` helper threads (each with a helper process of its own in process
    /// mode); more start on demand up to `size.max`.
    ///
    /// # Errors
    /// The eventfd, a thread or a helper process cannot be created.
    pub fn start(size: PoolSize, name: &str, mode: HelperMode) -> io::Result<Helpers> {
        Helpers::with_retirement(size, name, mode, RETIRE_AFTER)
    }

    fn with_retirement(
        size: PoolSize,
        name: &str,
        mode: HelperMode,
        retire_after: Duration,
    ) -> io::Result<Helpers> {
        let start = size.start.max(1);
        let completions = Arc::new(Completions {
            done: Mutex::new(Vec::new()),
            wake: EventFd::new()?,
        });
        let shared = Arc::new(Shared::new(
            PoolSize {
                start,
                max: size.max.max(start),
            },
            retire_after,
            completions.clone(),
        ));
        // None from the start (a translation finds a helper free while nothing waits), and as
        // many as the helpers start with at most: on the latency device up to `helpers_max`
        // translators (32) did not lower the tail at 256-512 clients and stayed alive, 32
        // threads more, for 30 s after a new server's first burst of translations.
        let translations = Arc::new(Shared::new(
            PoolSize {
                start: 0,
                max: start,
            },
            retire_after,
            completions.clone(),
        ));
        let helpers = Helpers {
            shared,
            translations,
            completions,
            name: name.to_owned(),
            mode,
            threads: Mutex::new(Vec::with_capacity(start)),
            started: AtomicUsize::new(0),
            read_ahead: std::sync::OnceLock::new(),
        };
        for _ in 0..start {
            // Started here, so a server that cannot start its helpers says so at start-up.
            let runner = match mode {
                HelperMode::Threads => Runner::InThread,
                HelperMode::Processes => {
                    Runner::Process(ProcessSlot::new(Some(HelperProcess::spawn()?)))
                }
            };
            helpers.spawn(Lane::Any, runner)?;
        }
        Ok(helpers)
    }

    fn pool(&self, lane: Lane) -> &Arc<Shared> {
        match lane {
            Lane::Any => &self.shared,
            Lane::Translations => &self.translations,
        }
    }

    fn spawn(&self, lane: Lane, mut runner: Runner) -> io::Result<()> {
        let index = self.started.fetch_add(1, Ordering::Relaxed);
        let pool = self.pool(lane);
        let shared = pool.clone();
        lock(&pool.queue).helpers += 1;
        let kind = match lane {
            Lane::Any => "helper",
            Lane::Translations => "translator",
        };
        let spawned = std::thread::Builder::new()
            .name(format!("{}-{kind}-{index}", self.name))
            .spawn(move || work(&shared, &mut runner));
        match spawned {
            Ok(thread) => {
                let mut threads = lock(&self.threads);
                // Keep the list short: handles of helpers that retired are joined now.
                threads.retain(|thread| !thread.is_finished());
                threads.push(thread);
                Ok(())
            }
            Err(error) => {
                lock(&pool.queue).helpers -= 1;
                Err(error)
            }
        }
    }

    /// Helper threads alive now, translators included.
    #[must_use]
    pub fn count(&self) -> usize {
        lock(&self.shared.queue).helpers + self.translators()
    }

    /// Translators alive now.
    #[must_use]
    pub fn translators(&self) -> usize {
        lock(&self.translations.queue).helpers
    }

    /// The descriptor that becomes readable when results are waiting.
    #[must_use]
    pub fn wake_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.completions.wake.as_fd()
    }

    /// Queue a job; start another helper if every one is busy and the pool may grow. A helper
    /// that cannot be started (out of threads) is not an error: the job waits its turn. A
    /// page-in that finds every helper busy and the pool at its cap has its read started at
    /// once, and with helper threads is finished by the read-ahead threads if no helper has
    /// taken it by then (`read_ahead.rs`).
    pub fn submit(&self, token: Token, job: Job) {
        if job.is_translation() {
            self.translate(token, job);
            return;
        }
        let (waits, grow) = {
            let queue = lock(&self.shared.queue);
            let free = queue.helpers - queue.working;
            // Counting this job: whether it finds every helper busy.
            let waits = queue.jobs.len() >= free;
            (waits, waits && queue.helpers < self.shared.size.max)
        };
        let hint = match &job {
            Job::PageIn {
                file, offset, len, ..
            } if waits && !grow => Some((file.clone(), *offset, *len)),
            _ => None,
        };
        self.shared.enqueue(token, job);
        if let Some((file, offset, len)) = hint {
            let read_ahead = self
                .read_ahead
                .get_or_init(|| ReadAhead::start(&self.name, self.lanes()).ok());
            if let Some(read_ahead) = read_ahead {
                read_ahead.hint(file, offset, len, token);
            }
        }
        if grow {
            self.grow(Lane::Any);
        }
    }

    /// Queue a path translation: with the helpers if one is free to take it at once, otherwise
    /// in the translators' lane, which grows while every translator is busy.
    fn translate(&self, token: Token, job: Job) {
        {
            let mut queue = lock(&self.shared.queue);
            if !queue.would_wait() {
                queue.push(token, job);
                drop(queue);
                self.shared.ready.notify_one();
                return;
            }
        }
        let grow = {
            let mut queue = lock(&self.translations.queue);
            let grow = queue.would_wait() && queue.helpers < self.translations.size.max;
            queue.push(token, job);
            grow
        };
        self.translations.ready.notify_one();
        if grow {
            self.grow(Lane::Translations);
        }
    }

    /// Start one more helper thread in `lane`. One that cannot be started (out of threads) is
    /// not an error: the job waits its turn.
    fn grow(&self, lane: Lane) {
        let runner = match self.mode {
            HelperMode::Threads => Runner::InThread,
            // Its process starts with its first job, on the helper thread, not here on the
            // loop.
            HelperMode::Processes => Runner::Process(ProcessSlot::new(None)),
        };
        let _ = self.spawn(lane, runner);
    }

    /// How the read-ahead threads reach the queue and the loop; none with helper processes,
    /// whose page-ins are only read ahead (`read_ahead.rs`).
    fn lanes(&self) -> Option<Lanes> {
        if self.mode == HelperMode::Processes {
            return None;
        }
        let queue = self.shared.clone();
        let waiting = self.shared.clone();
        let completions = self.shared.clone();
        let given_back = self.shared.clone();
        Some(Lanes {
            waiting: Box::new(move |token, key, offset| waiting.waiting(token, key, offset)),
            claim: Box::new(move |token, key, offset| queue.claim(token, key, offset)),
            completed: Box::new(move |token, done| completions.complete(token, done)),
            give_back: Box::new(move |token, job, place| {
                given_back.enqueue_in_place(token, job, place);
            }),
            reclaiming: self.shared.reclaiming.clone(),
        })
    }

    /// Take every finished job.
    pub fn completed(&self, into: &mut Vec<(Token, JobDone)>) {
        self.completions.wake.drain();
        let mut done = lock(&self.completions.done);
        into.append(&mut done);
    }

    /// Helpers (translators included) running a job now.
    #[must_use]
    pub fn busy(&self) -> usize {
        lock(&self.shared.queue).working + lock(&self.translations.queue).working
    }

    /// Jobs waiting for a helper or a translator.
    #[must_use]
    pub fn queued(&self) -> usize {
        lock(&self.shared.queue).jobs.len() + lock(&self.translations.queue).jobs.len()
    }
}

impl Drop for Helpers {
    fn drop(&mut self) {
        for pool in [&self.shared, &self.translations] {
            lock(&pool.queue).stopping = true;
            pool.ready.notify_all();
        }
        let threads = std::mem::take(&mut *lock(&self.threads));
        for thread in threads {
            let _ = thread.join();
        }
    }
}

/// Where a helper thread's jobs run.
enum Runner {
    InThread,
    Process(ProcessSlot),
}

/// How long a helper thread whose process could not be started waits before it tries again
/// (out of descriptors or processes, a try per job would only make it worse).
const RESTART_PAUSE: Duration = Duration::from_secs(1);

/// A helper thread's process.
struct ProcessSlot {
    /// `None` after it failed or could not be started, until a job starts another.
    helper: Option<HelperProcess>,
    /// No start is tried before this, after one failed.
    restart_at: Option<Instant>,
}

impl ProcessSlot {
    fn new(helper: Option<HelperProcess>) -> ProcessSlot {
        ProcessSlot {
            helper,
            restart_at: None,
        }
    }

    /// The helper process, started if there is none and a start may be tried now.
    fn helper(&mut self) -> Option<&mut HelperProcess> {
        static CANNOT_START: Throttle = Throttle::new();
        if self.helper.is_none() && self.restart_at.is_none_or(|at| Instant::now() >= at) {
            match HelperProcess::spawn() {
                Ok(started) => {
                    self.helper = Some(started);
                    self.restart_at = None;
                }
                Err(error) => {
                    self.restart_at = Some(Instant::now() + RESTART_PAUSE);
                    CANNOT_START.log(
                        Level::Error,
                        format_args!(
                            "cannot start a helper process: {error}; its jobs run in the helper \
                             thread until one starts"
                        ),
                    );
                }
            }
        }
        self.helper.as_mut()
    }
}

impl Runner {
    fn run(&mut self, job: Job, reclaiming: &Reclaiming) -> JobDone {
        static LOST: Throttle = Throttle::new();
        let Runner::Process(slot) = self else {
            return read_ahead::run(job, reclaiming);
        };
        // A job its process died on is done once more (by another process, or by the thread)
        // when that is safe: the request is answered rather than failed.
        let mut attempts = if job.repeatable() { 2 } else { 1 };
        loop {
            // No process (none could be started just now): the thread does the job itself, so
            // requests are still served, only without a process's isolation.
            let Some(helper) = slot.helper() else {
                return job::run(job);
            };
            match helper.run(&job) {
                Ok(done) => return done,
                Err(Failure::OutOfDescriptors) => return HelperProcess::exhausted(job),
                Err(Failure::Lost(error)) => {
                    LOST.log(
                        Level::Error,
                        format_args!("helper process failed ({error}); starting another"),
                    );
                    slot.helper = None;
                    attempts -= 1;
                    if attempts == 0 {
                        return HelperProcess::lost(job);
                    }
                }
            }
        }
    }
}

fn work(shared: &Shared, runner: &mut Runner) {
    loop {
        let (token, job) = {
            let mut queue = lock(&shared.queue);
            loop {
                if queue.stopping {
                    queue.helpers -= 1;
                    return;
                }
                if let Some(next) = queue.jobs.pop_front() {
                    queue.working += 1;
                    break (next.token, next.job);
                }
                let (next, waited) = shared
                    .ready
                    .wait_timeout(queue, shared.retire_after)
                    .unwrap_or_else(PoisonError::into_inner);
                queue = next;
                if waited.timed_out() && queue.jobs.is_empty() && queue.helpers > shared.size.start
                {
                    queue.helpers -= 1;
                    return;
                }
            }
        };
        let done = runner.run(job, &shared.reclaiming);
        lock(&shared.queue).working -= 1;
        shared.complete(token, done);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::time::Instant;

    /// A job that holds its helper until `release` is set (a password check whose "hash" names
    /// which test's flag to watch).
    static RELEASE_GROW: AtomicBool = AtomicBool::new(false);
    static RELEASE_CAP: AtomicBool = AtomicBool::new(false);
    static RELEASE_AHEAD: AtomicBool = AtomicBool::new(false);
    static RELEASE_ORDER: AtomicBool = AtomicBool::new(false);
    static RELEASE_LANE: AtomicBool = AtomicBool::new(false);
    static RELEASE_LANE_PROCESS: AtomicBool = AtomicBool::new(false);
    static RELEASE_RETIRE: AtomicBool = AtomicBool::new(false);
    static RELEASE_LANE_BATCH: AtomicBool = AtomicBool::new(false);

    fn held(_: &[u8], flag: &str) -> bool {
        let release = match flag {
            "grow" => &RELEASE_GROW,
            "ahead" => &RELEASE_AHEAD,
            "order" => &RELEASE_ORDER,
            "lane" => &RELEASE_LANE,
            "lane-process" => &RELEASE_LANE_PROCESS,
            "retire" => &RELEASE_RETIRE,
            "lane-batch" => &RELEASE_LANE_BATCH,
            _ => &RELEASE_CAP,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !release.load(Ordering::Acquire) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        true
    }

    fn job(flag: &str) -> Job {
        Job::Verify {
            password: Box::from(&b""[..]),
            hash: Arc::from(flag),
            verify: held,
        }
    }

    fn wait_until(what: impl Fn() -> bool) -> bool {
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if what() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        false
    }

    fn collect(helpers: &Helpers, expected: usize) -> Vec<(Token, JobDone)> {
        let mut done = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        while done.len() < expected && Instant::now() < deadline {
            helpers.completed(&mut done);
            std::thread::sleep(Duration::from_millis(2));
        }
        done
    }

    #[test]
    fn grows_while_every_helper_is_busy_then_retires_to_the_start_count() {
        let size = PoolSize { start: 1, max: 8 };
        let helpers =
            Helpers::with_retirement(size, "test", HelperMode::Threads, Duration::from_millis(50))
                .unwrap();
        assert_eq!(helpers.count(), 1);
        for token in 0..4 {
            helpers.submit(token, job("grow"));
        }
        // Four jobs in flight at once: the pool grew to run them side by side.
        assert!(
            wait_until(|| helpers.busy() == 4),
            "busy {}",
            helpers.busy()
        );
        assert_eq!(helpers.count(), 4);
        RELEASE_GROW.store(true, Ordering::Release);
        let done = collect(&helpers, 4);
        let mut tokens: Vec<Token> = done.iter().map(|(token, _)| *token).collect();
        tokens.sort_unstable();
        assert_eq!(tokens, [0, 1, 2, 3]);
        assert!(done
            .iter()
            .all(|(_, done)| matches!(done, JobDone::Verified(true))));
        // Idle past the retirement time, the extra helpers end; the first stays.
        assert!(
            wait_until(|| helpers.count() == 1),
            "count {}",
            helpers.count()
        );
    }

    #[test]
    fn never_grows_past_the_maximum() {
        let size = PoolSize { start: 1, max: 2 };
        let helpers = Helpers::start(size, "test", HelperMode::Threads).unwrap();
        for token in 0..5 {
            helpers.submit(token, job("cap"));
        }
        assert!(wait_until(|| helpers.busy() == 2));
        assert_eq!(helpers.count(), 2);
        assert_eq!(helpers.queued(), 3);
        RELEASE_CAP.store(true, Ordering::Release);
        assert_eq!(collect(&helpers, 5).len(), 5);
    }

    /// A 100 KiB file written to disk and dropped from the page cache (where the filesystem
    /// allows: on tmpfs the pages stay, and the residency assertions below hold trivially).
    fn evicted_file(name: &str) -> (std::path::PathBuf, Arc<crate::content::file::OpenFile>) {
        use crate::content::file::{FileKey, OpenFile};
        use std::io::Write;
        use std::os::fd::AsFd;
        let path = std::env::temp_dir().join(format!("ampd-helpers-{name}-{}", std::process::id()));
        let mut file = std::fs::File::create(&path).unwrap();
        file.write_all(&vec![5u8; 100 << 10]).unwrap();
        file.sync_all().unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let stat = ampd_sys::file::fstat(file.as_fd()).unwrap();
        ampd_sys::file::fadvise(file.as_fd(), 0, 0, ampd_sys::file::Advice::DontNeed).unwrap();
        let key = FileKey::of(&stat);
        (path, Arc::new(OpenFile::new(file, key)))
    }

    fn resident_pages(file: &crate::content::file::OpenFile) -> Option<u64> {
        use std::os::fd::AsFd;
        ampd_sys::file::cachestat(file.file.as_fd(), 0, 0)
            .ok()
            .map(|stat| stat.cached_pages)
    }

    #[test]
    fn a_page_in_that_waits_for_a_full_pool_is_read_ahead_and_finished_without_a_helper() {
        let size = PoolSize { start: 1, max: 1 };
        let helpers = Helpers::start(size, "test", HelperMode::Threads).unwrap();
        helpers.submit(0, job("ahead"));
        assert!(wait_until(|| helpers.busy() == 1));
        let (path, file) = evicted_file("ahead");
        helpers.submit(
            1,
            Job::PageIn {
                file: file.clone(),
                offset: 0,
                len: 100 << 10,
                send_to: None,
            },
        );
        let read_ahead = helpers.read_ahead.get().and_then(Option::as_ref);
        assert!(read_ahead.is_some(), "the read-ahead threads started");
        if resident_pages(&file).is_none() {
            // Without cachestat (Linux < 6.5) nothing is claimed: the helper takes it.
            RELEASE_AHEAD.store(true, Ordering::Release);
            assert_eq!(collect(&helpers, 2).len(), 2);
            std::fs::remove_file(path).unwrap();
            return;
        }
        // The only helper is still held, so what reads the range and reports it is the
        // read-ahead thread and the finisher.
        let done = collect(&helpers, 1);
        assert!(
            matches!(done.as_slice(), [(1, JobDone::PagedIn { end, .. })] if *end == 100 << 10),
            "{done:?}"
        );
        assert_eq!(resident_pages(&file), Some(25));
        assert_eq!(helpers.queued(), 0, "claimed from the helpers' queue");
        RELEASE_AHEAD.store(true, Ordering::Release);
        assert_eq!(collect(&helpers, 1).len(), 1);
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn a_page_in_with_a_helper_free_is_not_read_ahead() {
        let size = PoolSize { start: 2, max: 2 };
        let helpers = Helpers::start(size, "test", HelperMode::Threads).unwrap();
        let (path, file) = evicted_file("free");
        helpers.submit(
            7,
            Job::PageIn {
                file,
                offset: 0,
                len: 100 << 10,
                send_to: None,
            },
        );
        assert_eq!(collect(&helpers, 1).len(), 1);
        assert!(helpers.read_ahead.get().is_none(), "no read-ahead thread");
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn a_page_in_given_back_returns_to_where_it_arrived() {
        let size = PoolSize { start: 1, max: 1 };
        let helpers = Helpers::start(size, "test", HelperMode::Threads).unwrap();
        helpers.submit(0, job("order"));
        assert!(wait_until(|| helpers.busy() == 1));
        let (path, file) = evicted_file("order");
        let page_in = |offset: u64| Job::PageIn {
            file: file.clone(),
            offset,
            len: 4096,
            send_to: None,
        };
        // Straight into the queue (no read-ahead hints): the only helper is held.
        for token in 1..=3 {
            helpers.shared.enqueue(token, page_in(token * 4096));
        }
        let (claimed, place) = helpers.shared.claim(2, file.key, 2 * 4096).unwrap();
        assert!(
            helpers.shared.claim(2, file.key, 2 * 4096).is_none(),
            "claimed once"
        );
        helpers.shared.enqueue(4, page_in(4 * 4096));
        helpers.shared.enqueue_in_place(2, claimed, place);
        let order: Vec<Token> = lock(&helpers.shared.queue)
            .jobs
            .iter()
            .map(|queued| queued.token)
            .collect();
        // Behind the page-in that arrived before it, ahead of those that arrived after.
        assert_eq!(order, [1, 2, 3, 4]);
        // A claimed page-in that is finished, not given back, reports through the lanes.
        let (claimed, _) = helpers.shared.claim(3, file.key, 3 * 4096).unwrap();
        let lanes = helpers.lanes().unwrap();
        (lanes.completed)(3, job::run(claimed));
        RELEASE_ORDER.store(true, Ordering::Release);
        let done = collect(&helpers, 5);
        let tokens: Vec<Token> = done.iter().map(|(token, _)| *token).collect();
        assert_eq!(
            tokens,
            [3, 0, 1, 2, 4],
            "the finished one first, then one helper runs the rest in order"
        );
        std::fs::remove_file(path).unwrap();
    }

    /// A document root holding `a.txt`, and a translation of `/a.txt` beneath it.
    fn translation(name: &str) -> (std::path::PathBuf, Job) {
        use crate::config::StaticOptions;
        use crate::content::path::CleanPath;
        use crate::content::resolve::DocRoot;
        let dir = std::env::temp_dir().join(format!("ampd-helpers-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("a.txt"), "a").unwrap();
        let root = DocRoot::open(StaticOptions {
            precompressed: false,
            ..StaticOptions::new(dir.clone())
        })
        .unwrap();
        let job = Job::Resolve {
            root: Arc::new(root),
            path: CleanPath::from_normalized("/a.txt").unwrap(),
            watcher: None,
            previous: None,
        };
        (dir, job)
    }

    /// What finished within `within`.
    fn finished_within(helpers: &Helpers, within: Duration) -> Vec<(Token, JobDone)> {
        let mut done = Vec::new();
        let deadline = Instant::now() + within;
        while done.is_empty() && Instant::now() < deadline {
            helpers.completed(&mut done);
            std::thread::sleep(Duration::from_millis(2));
        }
        done
    }

    /// A request whose path is not translated yet waits for its translation, and then for its
    /// read: a translation queued behind slow reads would make it wait for reads it does not
    /// need (Flash kept path translation and reads apart for this).
    fn a_translation_is_not_held_behind_slow_jobs(mode: HelperMode, flag: &'static str) {
        let release = match flag {
            "lane" => &RELEASE_LANE,
            _ => &RELEASE_LANE_PROCESS,
        };
        let size = PoolSize { start: 1, max: 1 };
        let helpers = Helpers::start(size, "test", mode).unwrap();
        helpers.submit(0, job(flag));
        helpers.submit(1, job(flag));
        assert!(wait_until(|| helpers.busy() == 1));
        let (dir, translate) = translation(flag);
        helpers.submit(2, translate);
        let done = finished_within(&helpers, Duration::from_secs(3));
        // In processes the test binary cannot be a helper process: the translation comes back
        // as failed, from the lane's thread all the same.
        let translated = matches!(
            done.as_slice(),
            [(2, JobDone::Resolved(resolved))] if mode == HelperMode::Processes
                || matches!(resolved.resolution, crate::content::file::Resolution::File(_))
        );
        release.store(true, Ordering::Release);
        assert!(translated, "{done:?}");
        assert_eq!(collect(&helpers, 2).len(), 2, "the slow jobs finish too");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_translation_is_not_held_behind_slow_jobs_in_threads() {
        a_translation_is_not_held_behind_slow_jobs(HelperMode::Threads, "lane");
    }

    #[test]
    fn a_translation_is_not_held_behind_slow_jobs_in_processes() {
        a_translation_is_not_held_behind_slow_jobs(HelperMode::Processes, "lane-process");
    }

    /// An HTTP/2 connection's translations go to a helper as one batch: path translation
    /// still, so the lane takes it.
    #[test]
    fn a_batch_of_translations_is_not_held_behind_slow_jobs() {
        let size = PoolSize { start: 1, max: 1 };
        let helpers = Helpers::start(size, "test", HelperMode::Threads).unwrap();
        helpers.submit(0, job("lane-batch"));
        helpers.submit(1, job("lane-batch"));
        assert!(wait_until(|| helpers.busy() == 1));
        let (dir, translate) = translation("lane-batch");
        let (_, again) = translation("lane-batch");
        helpers.submit(2, Job::Batch(vec![translate, again]));
        let done = finished_within(&helpers, Duration::from_secs(3));
        let translated = matches!(
            done.as_slice(),
            [(2, JobDone::Batch(results))] if results.len() == 2
                && results.iter().all(|result| matches!(result, JobDone::Resolved(_)))
        );
        RELEASE_LANE_BATCH.store(true, Ordering::Release);
        assert!(translated, "{done:?}");
        assert_eq!(collect(&helpers, 2).len(), 2, "the slow jobs finish too");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_translation_that_finds_a_helper_free_starts_no_translator() {
        let size = PoolSize { start: 1, max: 4 };
        let helpers = Helpers::start(size, "test", HelperMode::Threads).unwrap();
        let (dir, translate) = translation("free-helper");
        helpers.submit(0, translate);
        let done = collect(&helpers, 1);
        assert!(
            matches!(done.as_slice(), [(0, JobDone::Resolved(_))]),
            "{done:?}"
        );
        assert_eq!(helpers.translators(), 0);
        assert_eq!(helpers.count(), 1);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn translators_retire_when_idle() {
        let size = PoolSize { start: 1, max: 1 };
        let helpers =
            Helpers::with_retirement(size, "test", HelperMode::Threads, Duration::from_millis(50))
                .unwrap();
        helpers.submit(0, job("retire"));
        assert!(wait_until(|| helpers.busy() == 1));
        let (dir, translate) = translation("retire");
        helpers.submit(1, translate);
        assert!(matches!(
            finished_within(&helpers, Duration::from_secs(3)).as_slice(),
            [(1, JobDone::Resolved(_))]
        ));
        assert_eq!(helpers.translators(), 1);
        assert!(
            wait_until(|| helpers.translators() == 0),
            "translators {}",
            helpers.translators()
        );
        RELEASE_RETIRE.store(true, Ordering::Release);
        assert_eq!(collect(&helpers, 1).len(), 1);
        assert_eq!(helpers.count(), 1);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
