//! The error log: leveled lines to standard error or a file, reopened on `SIGUSR1`.
//!
//! Owns: one process-wide writer (errors are rare and must not be lost or reordered, so they
//! are written at once under a lock, as nginx writes its error log), and `Throttle`: a line
//! that can repeat per request or per accept (descriptors exhausted, a helper that cannot
//! start, a refusal) is written at once the first time, then at most once per
//! `THROTTLE_INTERVAL` with the count of those left out, so a flood of failures costs one line
//! every few seconds instead of megabytes. A throttle with a budget (`Throttle::with_budget`)
//! lets that many lines through per interval: the output of the programs ampd runs.
//! Must not touch: the access log.

use std::fmt;
use std::fs::File;
use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use super::clock::Clock;
use super::file::{is_standard_stream, open};
use crate::config::{Level, LogOptions};

struct ErrorLog {
    level: AtomicU8,
    target: Mutex<Option<(File, PathBuf)>>,
}

static LOG: OnceLock<ErrorLog> = OnceLock::new();

fn log_state() -> &'static ErrorLog {
    LOG.get_or_init(|| ErrorLog {
        level: AtomicU8::new(Level::Info as u8),
        target: Mutex::new(None),
    })
}

/// Apply `log.error` and `log.level` (at start-up and on reload).
///
/// # Errors
/// The file cannot be opened; the previous target stays.
pub fn configure(options: &LogOptions) -> io::Result<()> {
    let state = log_state();
    let target = match &options.error {
        Some(path) => Some((open(path)?, path.clone())),
        None => None,
    };
    *state.target.lock().unwrap_or_else(PoisonError::into_inner) = target;
    state.level.store(options.level as u8, Ordering::Relaxed);
    Ok(())
}

/// Reopen the file (logrotate moved it away).
pub fn reopen() {
    let state = log_state();
    let mut target = state.target.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((file, path)) = target
        .as_mut()
        .filter(|(_, path)| !is_standard_stream(path))
    {
        if let Ok(fresh) = open(path) {
            *file = fresh;
        }
    }
}

/// Whether lines of `level` are written.
#[must_use]
pub fn enabled(level: Level) -> bool {
    level as u8 <= log_state().level.load(Ordering::Relaxed)
}

/// Write `2026-11-23T01:05:09Z [warn] message`.
pub fn log(level: Level, message: fmt::Arguments<'_>) {
    if !enabled(level) {
        return;
    }
    let clock = Clock::default();
    let line = format!(
        "{} [{}] {message}\n",
        String::from_utf8_lossy(clock.iso()),
        level.name()
    );
    let state = log_state();
    let mut target = state.target.lock().unwrap_or_else(PoisonError::into_inner);
    match target.as_mut() {
        Some((file, _)) => {
            let _ = file.write_all(line.as_bytes());
        }
        None => {
            let _ = io::stderr().write_all(line.as_bytes());
        }
    }
}

/// How often a throttled line may be written (nginx writes a repeated `accept()` failure at
/// most once a second per worker; five seconds keeps a flood of many kinds of line short).
pub const THROTTLE_INTERVAL: Duration = Duration::from_secs(5);

/// One place in the code that writes a line that can repeat: a `static` per site.
///
/// ```ignore
/// static EXHAUSTED: Throttle = Throttle::new();
/// EXHAUSTED.log(Level::Warn, format_args!("out of descriptors"));
/// ```
#[derive(Debug)]
pub struct Throttle {
    /// Milliseconds since `epoch()` at which the current interval ends; 0: never written.
    quiet_until: AtomicU64,
    /// Lines the current interval still lets through after its first.
    left: AtomicU64,
    /// Lines per interval.
    budget: u64,
    /// Lines left out since the last one written.
    suppressed: AtomicU64,
}

impl Default for Throttle {
    fn default() -> Self {
        Throttle::new()
    }
}

impl Throttle {
    /// One line per `THROTTLE_INTERVAL`.
    #[must_use]
    pub const fn new() -> Throttle {
        Throttle::with_budget(1)
    }

    /// `lines` lines per `THROTTLE_INTERVAL` (at least one).
    #[must_use]
    pub const fn with_budget(lines: u64) -> Throttle {
        Throttle {
            quiet_until: AtomicU64::new(0),
            left: AtomicU64::new(0),
            budget: if lines == 0 { 1 } else { lines },
            suppressed: AtomicU64::new(0),
        }
    }

    /// Whether one more line may be written now (it is counted against the budget); a caller
    /// that keeps its own count of what it left out uses this rather than `log`.
    pub fn allows(&self) -> bool {
        self.admit(now_millis(), THROTTLE_INTERVAL).is_some()
    }

    /// Write `message` at `level` unless a line from this site went out less than
    /// `THROTTLE_INTERVAL` ago; a line that is written says how many were left out before it.
    pub fn log(&self, level: Level, message: fmt::Arguments<'_>) {
        if !enabled(level) {
            return;
        }
        if let Some(suppressed) = self.admit(now_millis(), THROTTLE_INTERVAL) {
            if suppressed == 0 {
                log(level, message);
            } else {
                log(
                    level,
                    format_args!("{message} ({suppressed} more suppressed)"),
                );
            }
        }
    }

    /// Whether a line may be written at `now` (milliseconds), and how many were suppressed
    /// since the last; `None`: this one is suppressed (and counted). One thread wins the start
    /// of each interval (compare-and-swap) and sets what is left of its budget, which the
    /// others take from, so threads and loops sharing a site share its budget.
    fn admit(&self, now: u64, interval: Duration) -> Option<u64> {
        let interval = u64::try_from(interval.as_millis()).unwrap_or(u64::MAX);
        let until = self.quiet_until.load(Ordering::Relaxed);
        // `now + 1`: a first line at millisecond 0 still marks the site as written.
        let next = now.saturating_add(interval).max(1);
        if (until == 0 || now >= until)
            && self
                .quiet_until
                .compare_exchange(until, next, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            self.left.store(self.budget - 1, Ordering::Relaxed);
            return Some(self.suppressed.swap(0, Ordering::Relaxed));
        }
        if self
            .left
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                left.checked_sub(1)
            })
            .is_ok()
        {
            return Some(self.suppressed.swap(0, Ordering::Relaxed));
        }
        self.suppressed.fetch_add(1, Ordering::Relaxed);
        None
    }
}

/// The time throttles count from (the first throttled line).
fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn now_millis() -> u64 {
    u64::try_from(epoch().elapsed().as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_throttle_writes_the_first_line_then_one_per_interval_with_the_count_left_out() {
        let throttle = Throttle::new();
        let interval = Duration::from_secs(5);
        assert_eq!(
            throttle.admit(0, interval),
            Some(0),
            "the first line goes out at once"
        );
        for now in 1..1000 {
            assert_eq!(throttle.admit(now, interval), None);
        }
        assert_eq!(throttle.admit(4_999, interval), None);
        assert_eq!(
            throttle.admit(5_000, interval),
            Some(1000),
            "the next line counts the 1000 left out"
        );
        assert_eq!(throttle.admit(5_001, interval), None);
        assert_eq!(throttle.admit(60_000, interval), Some(1));
        assert_eq!(throttle.admit(60_000, interval), None);
    }

    #[test]
    fn a_throttle_with_a_budget_lets_that_many_lines_through_per_interval() {
        let throttle = Throttle::with_budget(3);
        let interval = Duration::from_secs(5);
        let admitted: Vec<bool> = (0..10)
            .map(|now| throttle.admit(now, interval).is_some())
            .collect();
        assert_eq!(
            admitted,
            [true, true, true, false, false, false, false, false, false, false]
        );
        // The next interval: three again, the first saying how many were left out.
        assert_eq!(throttle.admit(5_000, interval), Some(7));
        assert_eq!(throttle.admit(5_001, interval), Some(0));
        assert_eq!(throttle.admit(5_002, interval), Some(0));
        assert_eq!(throttle.admit(5_003, interval), None);
    }

    #[test]
    fn threads_sharing_a_throttle_write_one_line_per_interval_between_them() {
        let throttle = std::sync::Arc::new(Throttle::new());
        let written: u64 = (0..4)
            .map(|_| {
                let throttle = throttle.clone();
                std::thread::spawn(move || {
                    (0..10_000)
                        .filter(|_| throttle.admit(10, Duration::from_secs(5)).is_some())
                        .count() as u64
                })
            })
            .map(|thread| thread.join().unwrap())
            .sum();
        assert_eq!(written, 1);
        assert_eq!(throttle.admit(5_010, Duration::from_secs(5)), Some(39_999));
    }
}
