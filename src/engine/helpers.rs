//! Flash's helpers (§4.2): threads that do the work that can block on disk, so the event loop
//! never does. Jobs go in through a queue; results come back through a completion list and an
//! eventfd that the loop's epoll watches. With `--helpers-mode process` each helper thread hands
//! its jobs to a helper process of its own and waits for the answer (`helper_process.rs`), so
//! the disk work runs in another process while the queue and completions stay the same.
//!
//! Owns: the helper threads, the job queue and the completion list of one event loop.
//! Must not touch: connections (a completion names its connection by token only).

use std::collections::VecDeque;
use std::io;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;

use ampd_sys::eventfd::EventFd;

use super::helper_process::HelperProcess;
use crate::config::HelperMode;
use crate::content::job::{self, Job, JobDone};

/// Identifies the connection (slot and generation) a job belongs to.
pub type Token = u64;

struct Queue {
    jobs: VecDeque<(Token, Job)>,
    stopping: bool,
}

struct Shared {
    queue: Mutex<Queue>,
    ready: Condvar,
    done: Mutex<Vec<(Token, JobDone)>>,
    wake: EventFd,
    busy: std::sync::atomic::AtomicUsize,
}

pub struct Helpers {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

impl Helpers {
    /// Start `count` helper threads (each with a helper process of its own in process mode).
    ///
    /// # Errors
    /// The eventfd, a thread or a helper process cannot be created.
    pub fn start(count: usize, name: &str, mode: HelperMode) -> io::Result<Helpers> {
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue {
                jobs: VecDeque::new(),
                stopping: false,
            }),
            ready: Condvar::new(),
            done: Mutex::new(Vec::new()),
            wake: EventFd::new()?,
            busy: std::sync::atomic::AtomicUsize::new(0),
        });
        let mut threads = Vec::with_capacity(count);
        for index in 0..count.max(1) {
            let shared = shared.clone();
            // Started here, so a server that cannot start its helpers says so at start-up.
            let mut runner = match mode {
                HelperMode::Threads => Runner::InThread,
                HelperMode::Processes => Runner::Process(Some(HelperProcess::spawn()?)),
            };
            let thread = std::thread::Builder::new()
                .name(format!("{name}-helper-{index}"))
                .spawn(move || work(&shared, &mut runner))?;
            threads.push(thread);
        }
        Ok(Helpers { shared, threads })
    }

    /// The descriptor that becomes readable when results are waiting.
    #[must_use]
    pub fn wake_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.shared.wake.as_fd()
    }

    pub fn submit(&self, token: Token, job: Job) {
        let mut queue = self
            .shared
            .queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        queue.jobs.push_back((token, job));
        drop(queue);
        self.shared.ready.notify_one();
    }

    /// Take every finished job.
    pub fn completed(&self, into: &mut Vec<(Token, JobDone)>) {
        self.shared.wake.drain();
        let mut done = self
            .shared
            .done
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        into.append(&mut done);
    }

    /// Helpers running a job now.
    #[must_use]
    pub fn busy(&self) -> usize {
        self.shared.busy.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Jobs waiting for a helper.
    #[must_use]
    pub fn queued(&self) -> usize {
        self.shared
            .queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .jobs
            .len()
    }
}

impl Drop for Helpers {
    fn drop(&mut self) {
        self.shared
            .queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .stopping = true;
        self.shared.ready.notify_all();
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// Where a helper thread's jobs run.
enum Runner {
    InThread,
    /// The helper process; `None` after it failed, until the next job starts another.
    Process(Option<HelperProcess>),
}

impl Runner {
    fn run(&mut self, job: Job) -> JobDone {
        let Runner::Process(process) = self else {
            return job::run(job);
        };

        if process.is_none() {
            match HelperProcess::spawn() {
                Ok(started) => *process = Some(started),
                Err(error) => {
                    eprintln!("ampd: cannot start a helper process: {error}");
                    return HelperProcess::failed(job);
                }
            }
        }
        let Some(helper) = process.as_mut() else {
            return HelperProcess::failed(job);
        };
        match helper.run(&job) {
            Ok(done) => done,
            Err(error) => {
                eprintln!("ampd: helper process failed ({error}); starting another");
                *process = None;
                HelperProcess::failed(job)
            }
        }
    }
}

fn work(shared: &Shared, runner: &mut Runner) {
    loop {
        let (token, job) = {
            let mut queue = shared.queue.lock().unwrap_or_else(PoisonError::into_inner);
            loop {
                if queue.stopping {
                    return;
                }
                if let Some(next) = queue.jobs.pop_front() {
                    break next;
                }
                queue = shared
                    .ready
                    .wait(queue)
                    .unwrap_or_else(PoisonError::into_inner);
            }
        };
        shared
            .busy
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let done = runner.run(job);
        shared
            .busy
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        let mut finished = shared.done.lock().unwrap_or_else(PoisonError::into_inner);
        let was_empty = finished.is_empty();
        finished.push((token, done));
        drop(finished);
        // One wake-up per batch: the loop takes everything that finished when it reads.
        if was_empty {
            shared.wake.notify();
        }
    }
}
