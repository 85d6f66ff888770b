//! Replies that wait until they are due: one timer thread and a heap ordered by due time.
//!
//! Why a timer and not a sleeping thread per read: the device must hold any number of reads at
//! once for no CPU, as a disk's queue does; the Python device before it slept a thread per read.
//!
//! Owns: the waiting replies and the thread that sends them.
//! Must not touch: the filesystem's state (a reply carries its data already read).

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Instant;

use fuser::ReplyData;

use crate::lock;

struct Waiting {
    due: Instant,
    /// Arrival order, so replies due at the same instant go out first come, first served.
    sequence: u64,
    reply: ReplyData,
    data: Vec<u8>,
}

impl PartialEq for Waiting {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Waiting {}

impl PartialOrd for Waiting {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Waiting {
    /// Reversed: `BinaryHeap` is a max-heap, and the earliest due must come out first.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.due, other.sequence).cmp(&(self.due, self.sequence))
    }
}

#[derive(Default)]
struct Queue {
    waiting: BinaryHeap<Waiting>,
    next_sequence: u64,
    stopping: bool,
}

#[derive(Default)]
struct Shared {
    queue: Mutex<Queue>,
    changed: Condvar,
}

pub struct DelayedReplies {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl DelayedReplies {
    /// # Panics
    /// The timer thread cannot be started (the process is out of threads at start-up).
    #[must_use]
    pub fn start() -> DelayedReplies {
        let shared = Arc::new(Shared::default());
        let timer = shared.clone();
        let thread = std::thread::Builder::new()
            .name("slowfs-timer".to_owned())
            .spawn(move || run(&timer))
            .expect("ampd-slowfs: cannot start the timer thread");
        DelayedReplies {
            shared,
            thread: Some(thread),
        }
    }

    /// Send `data` as the answer to `reply` at `due` (at once if that has passed).
    pub fn reply_at(&self, due: Instant, reply: ReplyData, data: Vec<u8>) {
        let mut queue = lock(&self.shared.queue);
        let sequence = queue.next_sequence;
        queue.next_sequence += 1;
        let earliest = queue.waiting.peek().is_none_or(|first| due < first.due);
        queue.waiting.push(Waiting {
            due,
            sequence,
            reply,
            data,
        });
        drop(queue);
        // The timer sleeps until the earliest due; only a new earliest changes that.
        if earliest {
            self.shared.changed.notify_one();
        }
    }
}

impl Drop for DelayedReplies {
    fn drop(&mut self) {
        lock(&self.shared.queue).stopping = true;
        self.shared.changed.notify_one();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn run(shared: &Shared) {
    let mut queue = lock(&shared.queue);
    loop {
        let now = Instant::now();
        let mut due = Vec::new();
        while queue.waiting.peek().is_some_and(|first| first.due <= now) {
            due.extend(queue.waiting.pop());
        }
        if !due.is_empty() {
            drop(queue);
            for waiting in due {
                waiting.reply.data(&waiting.data);
            }
            queue = lock(&shared.queue);
            continue;
        }
        if queue.stopping {
            // What still waits is answered now: the mount is going away.
            for waiting in std::mem::take(&mut queue.waiting) {
                waiting.reply.data(&waiting.data);
            }
            return;
        }
        queue = match queue.waiting.peek().map(|first| first.due - now) {
            Some(wait) => {
                shared
                    .changed
                    .wait_timeout(queue, wait)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0
            }
            None => shared
                .changed
                .wait(queue)
                .unwrap_or_else(PoisonError::into_inner),
        };
    }
}
