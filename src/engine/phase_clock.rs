//! One connection's place on the scoreboard and its timeouts, the same under every engine: the
//! phase it is in (`conn::Phase`), since when, and how fast its response has moved. Engines
//! differ only in when they look (a sweep every 250 ms, or a wait bounded by `deadline`).
//!
//! Owns: the rules. Header time runs from the head's first byte however slowly the rest
//! trickles in (slowloris); body time from the body's start; idle and send time restart with
//! progress; the minimum send rate is judged per `SEND_RATE_WINDOW`, so kernel buffers filled at
//! the start cannot carry a reader that stalls later (slow read).
//! Must not touch: sockets (the engine ends the connection as `Expired` says), HTTP.

use std::time::{Duration, Instant};

use crate::config::Limits;
use crate::conn::Phase;
use crate::log::stats::LoopStats;

/// The window over which `limits.min_send_rate` is judged: a response must move at least
/// rate × window bytes per window.
pub const SEND_RATE_WINDOW: Duration = Duration::from_secs(2);

/// What a connection past one of its limits gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expired {
    /// A request head or body had begun: answer `408`, then close.
    Request,
    /// A response stalled or moved too slowly: reset, so what the kernel still holds for the
    /// client is dropped instead of trickling out after the close.
    Sending,
    /// Idle too long, or a lingering close that the client never finished: close.
    Quietly,
}

/// While a graceful stop drains, how long a connection that has not sent its first request yet
/// may still send it. A client writes its request as soon as the connect completes, so a
/// connection accepted just before the stop usually has it on the way: closing it at once
/// fails that request (in a binary upgrade, one the successor would have served). One quiet
/// this long is a speculative pre-connect, and is closed.
pub const FIRST_REQUEST_GRACE: Duration = Duration::from_secs(1);

#[derive(Debug)]
pub struct PhaseClock {
    phase: Phase,
    since: Instant,
    rate_window: Instant,
    rate_sent: u64,
}

impl PhaseClock {
    /// A new connection: counted as accepted and idle.
    #[must_use]
    pub fn opened(stats: &LoopStats, now: Instant) -> PhaseClock {
        stats.accepted();
        stats.connection_moved(None, Some(Phase::Idle.index()));
        PhaseClock {
            phase: Phase::Idle,
            since: now,
            rate_window: now,
            rate_sent: 0,
        }
    }

    #[must_use]
    pub fn phase(&self) -> Phase {
        self.phase
    }

    #[must_use]
    pub fn since(&self) -> Instant {
        self.since
    }

    /// Whether a graceful drain may close an idle connection (`Phase::Idle`, nothing in
    /// flight) now: it is between requests (`answered`: a response has gone out), or it has
    /// been quiet since it was accepted for `FIRST_REQUEST_GRACE`.
    #[must_use]
    pub fn drain_may_close(&self, answered: bool, now: Instant) -> bool {
        answered || now.saturating_duration_since(self.since) >= FIRST_REQUEST_GRACE
    }

    /// The connection is in `phase` at `now`; `progressed`: bytes moved since the last note.
    /// An event loop passes its turn's time (read once per wake-up, as nginx caches its time):
    /// a clock read per note was a measurable share of a small request's CPU.
    pub fn note(&mut self, phase: Phase, progressed: bool, now: Instant, stats: &LoopStats) {
        if phase == self.phase && !(progressed && matches!(phase, Phase::Sending | Phase::Idle)) {
            return;
        }
        if phase != self.phase {
            stats.connection_moved(Some(self.phase.index()), Some(phase.index()));
            if phase == Phase::Sending {
                self.rate_window = now;
                self.rate_sent = 0;
            }
        }
        self.phase = phase;
        self.since = now;
    }

    /// `bytes` of a response went out.
    pub fn sent(&mut self, bytes: u64) {
        self.rate_sent += bytes;
    }

    /// The connection closes.
    pub fn closed(&self, stats: &LoopStats) {
        stats.connection_moved(Some(self.phase.index()), None);
    }

    /// When the current phase's limit runs out (`None`: no limit now, as while a job is out).
    #[must_use]
    pub fn deadline(&self, limits: &Limits, job_out: bool) -> Option<Instant> {
        let limit = match self.phase {
            Phase::Idle => limits.keepalive_timeout,
            Phase::Head => limits.header_timeout,
            Phase::Busy if job_out => return None,
            Phase::Busy => limits.body_timeout,
            // The exchange's upstream timeouts govern (`Conn::upstream_deadline`).
            Phase::Upstream => return None,
            Phase::Sending => limits.send_timeout,
            Phase::Closing => limits.linger_timeout,
        };
        Some(self.since + limit)
    }

    /// Whether the connection is past a limit at `now`: its phase's timeout, or (sending) the
    /// minimum send rate over the window that just ended.
    pub fn check(&mut self, now: Instant, limits: &Limits, job_out: bool) -> Option<Expired> {
        if self
            .deadline(limits, job_out)
            .is_some_and(|deadline| now >= deadline)
        {
            return Some(match self.phase {
                Phase::Head | Phase::Busy => Expired::Request,
                Phase::Sending => Expired::Sending,
                Phase::Idle | Phase::Closing | Phase::Upstream => Expired::Quietly,
            });
        }
        let min_rate = limits.min_send_rate;
        if self.phase == Phase::Sending && min_rate > 0 && !job_out {
            let window = now.saturating_duration_since(self.rate_window);
            if window >= SEND_RATE_WINDOW {
                let floor = (min_rate as f64 * window.as_secs_f64()) as u64;
                if self.rate_sent < floor {
                    return Some(Expired::Sending);
                }
                self.rate_window = now;
                self.rate_sent = 0;
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::log::stats::Stats;

    #[test]
    fn a_drain_closes_a_connection_between_requests_at_once_and_a_new_one_after_a_grace() {
        let stats = Stats::new(1).unwrap().add_loop();
        let accepted = Instant::now();
        let clock = PhaseClock::opened(&stats, accepted);
        // Accepted, its first request not yet received (uring: the receive is still out).
        assert!(!clock.drain_may_close(false, accepted));
        assert!(!clock.drain_may_close(false, accepted + FIRST_REQUEST_GRACE / 2));
        // Quiet since the accept for the whole grace: a pre-connect, closed.
        assert!(clock.drain_may_close(false, accepted + FIRST_REQUEST_GRACE));
        // Idle after a response: closed at once.
        assert!(clock.drain_may_close(true, accepted));
    }

    #[test]
    fn a_connection_waiting_on_its_upstream_has_no_client_deadline() {
        let stats = Stats::new(1).unwrap().add_loop();
        let limits = Config::new("/".into()).limits;
        let mut clock = PhaseClock::opened(&stats, Instant::now());
        clock.note(Phase::Upstream, false, Instant::now(), &stats);
        assert_eq!(stats.connections(Phase::Upstream.index()), 1);
        assert_eq!(clock.deadline(&limits, false), None);
        let much_later = clock.since() + Duration::from_secs(24 * 3600);
        assert_eq!(clock.check(much_later, &limits, false), None);
        clock.closed(&stats);
        assert_eq!(stats.connections(Phase::Upstream.index()), 0);
    }

    #[test]
    fn phases_time_out_and_a_slow_reader_is_caught() {
        let stats = Stats::new(1).unwrap().add_loop();
        let mut limits = Config::new("/".into()).limits;
        limits.min_send_rate = 1000;
        let start = Instant::now();
        let mut clock = PhaseClock::opened(&stats, start);
        assert_eq!(stats.connections(Phase::Idle.index()), 1);
        assert_eq!(clock.check(start, &limits, false), None);
        clock.note(Phase::Head, true, Instant::now(), &stats);
        let late = clock.since() + limits.header_timeout;
        assert_eq!(clock.check(late, &limits, false), Some(Expired::Request));
        clock.note(Phase::Sending, true, Instant::now(), &stats);
        clock.sent(100);
        let window_end = clock.since() + SEND_RATE_WINDOW;
        assert_eq!(
            clock.check(window_end, &limits, false),
            Some(Expired::Sending)
        );
        clock.note(Phase::Busy, false, Instant::now(), &stats);
        assert_eq!(clock.deadline(&limits, true), None);

        clock.closed(&stats);
        assert!((0..5).all(|index| stats.connections(index) == 0));
    }
}
