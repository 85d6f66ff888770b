//! What one process has learnt about one server: passive health (failures of real requests),
//! active health (the periodic check's verdict), requests in flight, and the counters the
//! metrics show.
//!
//! Owns: the state machine of a server's health and its transitions (each logged once to the
//! error log). Must not touch: sockets (`probe` makes the check's request), choosing among
//! servers (`choosing`).
//!
//! The choose path only loads atomics (`in_flight`, `down_until`, `active_down`) and, for a
//! server whose passive down period has just ended, makes one compare-and-swap; the failure
//! window is a small mutex taken once per reported attempt, off that path.
//! Sources: nginx `max_fails`/`fail_timeout` (ngx_http_upstream_round_robin.c: after the
//! timeout one request probes the server; a failure takes it out again, a success brings it
//! back); nginx plus `health_check` `passes`/`fails`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::fastcgi::LearnedLimits;
use crate::config::{Level, PassiveHealth};
use crate::log::error;

/// `down_until` of a server that passive health has not taken out.
const NOT_DOWN: u64 = 0;

/// Failures counted towards `max_fails`.
#[derive(Debug, Default)]
struct FailWindow {
    /// When the first failure of the window happened; `None`: no failure since the last
    /// success (or the last mark).
    started: Option<Instant>,
    fails: u32,
}

/// Consecutive results of the active check (only the process's check thread writes them).
#[derive(Debug, Default)]
struct Streak {
    passes: u32,
    fails: u32,
}

/// Whether the choose path may send a request to a server now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Availability {
    Up,
    /// Passive health's down period is over: one request may probe the server (`claim`).
    Probe,
    Down,
}

/// A change of a server's health worth a line in the error log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Transition {
    /// `max_fails` failures within `fail_window`.
    FailedRequests { fails: u32, window: Duration },
    /// A request succeeded on a server passive health had taken out.
    RequestSucceeded,
    /// `fall` checks in a row failed; `cause` is the last one's.
    ChecksFailed { fall: u32, cause: String },
    /// `rise` checks in a row passed.
    ChecksPassed { rise: u32 },
}

impl Transition {
    /// Log it under the pool and server names: once per transition, by whoever made it.
    pub(super) fn log(&self, pool: &str, server: &str) {
        match self {
            Transition::FailedRequests { fails, window } => error::log(
                Level::Warn,
                format_args!(
                    "upstream {pool}: server {server} marked down: failed attempts: {fails} within {}s",
                    window.as_secs_f64()
                ),
            ),
            Transition::RequestSucceeded => error::log(
                Level::Warn,
                format_args!("upstream {pool}: server {server} up again: a request succeeded"),
            ),
            Transition::ChecksFailed { fall, cause } => error::log(
                Level::Warn,
                format_args!(
                    "upstream {pool}: server {server} marked down: {fall} health checks failed in a row ({cause})"
                ),
            ),
            Transition::ChecksPassed { rise } => error::log(
                Level::Warn,
                format_args!(
                    "upstream {pool}: server {server} up again: {rise} health checks passed in a row"
                ),
            ),
        }
    }
}

/// One server's shared state. Times are milliseconds since the pool's `epoch`, so they fit an
/// atomic.
#[derive(Debug, Default)]
pub(super) struct ServerHealth {
    /// Requests on this server now (a `Pick` alive).
    pub(super) in_flight: AtomicU64,
    /// Until when passive health keeps the server out (`NOT_DOWN`: it does not). Once the time
    /// has passed, the first request to claim the server moves it a `fail_timeout` further, so
    /// only one request probes it per period.
    down_until: AtomicU64,
    window: Mutex<FailWindow>,
    /// The active check's verdict (servers start up, as in nginx plus: the first checks run at
    /// once and `fall` of them take a dead server out).
    active_down: AtomicBool,
    streak: Mutex<Streak>,
    pub(super) successes: AtomicU64,
    pub(super) failures: AtomicU64,
    pub(super) marked_down_by_failures: AtomicU64,
    pub(super) marked_down_by_checks: AtomicU64,
    pub(super) checks_passed: AtomicU64,
    pub(super) checks_failed: AtomicU64,
    /// A FastCGI application's limits, as its `FCGI_GET_VALUES` answer gave them.
    pub(super) fastcgi: LearnedLimits,
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

impl ServerHealth {
    pub(super) fn availability(&self, now_ms: u64) -> Availability {
        if self.active_down.load(Ordering::Relaxed) {
            return Availability::Down;
        }
        match self.down_until.load(Ordering::Relaxed) {
            NOT_DOWN => Availability::Up,
            until if now_ms < until => Availability::Down,
            _ => Availability::Probe,
        }
    }

    /// Take the server for one request. `false`: another request claimed its probe first.
    pub(super) fn claim(&self, now_ms: u64, passive: &PassiveHealth) -> bool {
        let until = self.down_until.load(Ordering::Relaxed);
        if until == NOT_DOWN || now_ms < until {
            // Up, or down and chosen anyway (every server is down).
            return true;
        }
        let next = now_ms.saturating_add(millis(passive.fail_timeout)).max(1);
        self.down_until
            .compare_exchange(until, next, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    }

    /// Whether the server serves now, as far as this process knows (the `up` metric).
    pub(super) fn is_up(&self, now_ms: u64) -> bool {
        self.availability(now_ms) == Availability::Up
    }

    /// A request's attempt succeeded: the failure count starts again.
    pub(super) fn succeeded(&self) -> Option<Transition> {
        self.successes.fetch_add(1, Ordering::Relaxed);
        let mut window = self.window.lock().unwrap_or_else(PoisonError::into_inner);
        *window = FailWindow::default();
        let was_down = self.down_until.swap(NOT_DOWN, Ordering::Relaxed) != NOT_DOWN;
        was_down.then_some(Transition::RequestSucceeded)
    }

    /// A request's attempt failed at `now` (`now_ms` on the pool's clock).
    pub(super) fn failed(
        &self,
        passive: &PassiveHealth,
        now: Instant,
        now_ms: u64,
    ) -> Option<Transition> {
        self.failures.fetch_add(1, Ordering::Relaxed);
        if passive.max_fails == 0 {
            return None;
        }
        let mut window = self.window.lock().unwrap_or_else(PoisonError::into_inner);
        let until = now_ms.saturating_add(millis(passive.fail_timeout)).max(1);
        if self.down_until.load(Ordering::Relaxed) != NOT_DOWN {
            // The probe (or an attempt begun before the mark) failed: out for another period,
            // without a second log line.
            self.down_until.store(until, Ordering::Relaxed);
            return None;
        }
        let expired = window
            .started
            .is_none_or(|started| now.saturating_duration_since(started) > passive.fail_window);
        if expired {
            *window = FailWindow {
                started: Some(now),
                fails: 0,
            };
        }
        window.fails += 1;
        if window.fails < passive.max_fails {
            return None;
        }
        *window = FailWindow::default();
        self.down_until.store(until, Ordering::Relaxed);
        self.marked_down_by_failures.fetch_add(1, Ordering::Relaxed);
        Some(Transition::FailedRequests {
            fails: passive.max_fails,
            window: passive.fail_window,
        })
    }

    /// One active check's result; `cause` says why it failed.
    pub(super) fn checked(
        &self,
        result: Result<(), String>,
        rise: u32,
        fall: u32,
    ) -> Option<Transition> {
        let mut streak = self.streak.lock().unwrap_or_else(PoisonError::into_inner);
        let down = self.active_down.load(Ordering::Relaxed);
        match result {
            Ok(()) => {
                self.checks_passed.fetch_add(1, Ordering::Relaxed);
                streak.fails = 0;
                streak.passes = streak.passes.saturating_add(1);
                if down && streak.passes >= rise.max(1) {
                    self.active_down.store(false, Ordering::Relaxed);
                    return Some(Transition::ChecksPassed { rise });
                }
            }
            Err(cause) => {
                self.checks_failed.fetch_add(1, Ordering::Relaxed);
                streak.passes = 0;
                streak.fails = streak.fails.saturating_add(1);
                if !down && streak.fails >= fall.max(1) {
                    self.active_down.store(true, Ordering::Relaxed);
                    self.marked_down_by_checks.fetch_add(1, Ordering::Relaxed);
                    return Some(Transition::ChecksFailed { fall, cause });
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn passive(max_fails: u32) -> PassiveHealth {
        PassiveHealth {
            max_fails,
            fail_window: Duration::from_secs(10),
            fail_timeout: Duration::from_secs(30),
        }
    }

    /// `now_ms` for `now` on a clock that started at `epoch`.
    fn at(epoch: Instant, seconds: u64) -> (Instant, u64) {
        let now = epoch + Duration::from_secs(seconds);
        (now, seconds * 1000)
    }

    #[test]
    fn max_fails_within_the_window_mark_down_once() {
        let health = ServerHealth::default();
        let epoch = Instant::now();
        let settings = passive(3);
        let (now, ms) = at(epoch, 1);
        assert_eq!(health.failed(&settings, now, ms), None);
        assert_eq!(health.failed(&settings, now, ms), None);
        assert_eq!(health.availability(ms), Availability::Up);
        assert_eq!(
            health.failed(&settings, now, ms),
            Some(Transition::FailedRequests {
                fails: 3,
                window: Duration::from_secs(10)
            })
        );
        assert_eq!(health.availability(ms), Availability::Down);
        // Late failures of attempts begun before the mark: no second transition.
        assert_eq!(health.failed(&settings, now, ms), None);
        assert_eq!(health.marked_down_by_failures.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn failures_spread_wider_than_the_window_do_not_mark_down() {
        let health = ServerHealth::default();
        let epoch = Instant::now();
        let settings = passive(2);
        for second in [0, 11, 22, 33] {
            let (now, ms) = at(epoch, second);
            assert_eq!(health.failed(&settings, now, ms), None, "at {second}s");
        }
        assert_eq!(health.availability(33_000), Availability::Up);
    }

    #[test]
    fn a_success_resets_the_count() {
        let health = ServerHealth::default();
        let epoch = Instant::now();
        let settings = passive(2);
        let (now, ms) = at(epoch, 1);
        assert_eq!(health.failed(&settings, now, ms), None);
        assert_eq!(health.succeeded(), None);
        assert_eq!(health.failed(&settings, now, ms), None);
        assert_eq!(health.availability(ms), Availability::Up);
    }

    #[test]
    fn after_fail_timeout_one_request_probes_and_its_result_decides() {
        let health = ServerHealth::default();
        let epoch = Instant::now();
        let settings = passive(1);
        let (now, ms) = at(epoch, 1);
        assert!(health.failed(&settings, now, ms).is_some());
        assert_eq!(health.availability(30_999), Availability::Down);
        assert_eq!(health.availability(31_000), Availability::Probe);
        assert!(health.claim(31_000, &settings));
        // The probe is out: nobody else gets the server until it answers or a period passes.
        assert_eq!(health.availability(31_001), Availability::Down);
        // It fails: out for another period, no new log line.
        let (now, ms) = at(epoch, 32);
        assert_eq!(health.failed(&settings, now, ms), None);
        assert_eq!(health.availability(61_999), Availability::Down);
        assert!(health.claim(62_000, &settings));
        assert_eq!(health.succeeded(), Some(Transition::RequestSucceeded));
        assert_eq!(health.availability(62_001), Availability::Up);
    }

    #[test]
    fn max_fails_zero_switches_passive_health_off() {
        let health = ServerHealth::default();
        let (now, ms) = at(Instant::now(), 1);
        for _ in 0..10 {
            assert_eq!(health.failed(&passive(0), now, ms), None);
        }
        assert_eq!(health.availability(ms), Availability::Up);
        assert_eq!(health.failures.load(Ordering::Relaxed), 10);
    }

    #[test]
    fn checks_fall_and_rise_on_consecutive_results() {
        let health = ServerHealth::default();
        let fail = || Err("status 500".to_string());
        assert_eq!(health.checked(fail(), 2, 3), None);
        assert_eq!(health.checked(fail(), 2, 3), None);
        assert_eq!(health.checked(Ok(()), 2, 3), None);
        assert_eq!(health.checked(fail(), 2, 3), None);
        assert_eq!(health.checked(fail(), 2, 3), None);
        assert_eq!(
            health.checked(fail(), 2, 3),
            Some(Transition::ChecksFailed {
                fall: 3,
                cause: "status 500".into()
            })
        );
        assert_eq!(health.availability(0), Availability::Down);
        assert_eq!(health.checked(fail(), 2, 3), None);
        assert_eq!(health.checked(Ok(()), 2, 3), None);
        assert_eq!(
            health.checked(Ok(()), 2, 3),
            Some(Transition::ChecksPassed { rise: 2 })
        );
        assert_eq!(health.availability(0), Availability::Up);
        assert_eq!(health.checks_failed.load(Ordering::Relaxed), 6);
        assert_eq!(health.checks_passed.load(Ordering::Relaxed), 3);
    }
}
