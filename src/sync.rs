//! Locking that survives a panic elsewhere: a thread that panicked while holding a lock (a bug,
//! already reported by the panic) must not take every later request down with it, so a poisoned
//! lock is taken as it stands. The data behind ampd's locks (queues, counters, cache shards) is
//! valid between any two statements, so nothing is left half-updated.
//!
//! Owns: `lock`. Must not touch: what the locks guard.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `mutex`, poisoned or not.
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
