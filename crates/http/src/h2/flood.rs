//! The flood budgets (RFC 9113 §10.5): how many of each costly-but-cheap-to-send frame a
//! client may send per window before the connection ends with ENHANCE_YOUR_CALM.
//!
//! Owns: counting per window. Must not touch: frames (`connection/receive.rs` and
//! `connection/control.rs` say what to count).

use std::time::{Duration, Instant};

/// One budget: at most `limit` events per `window`, counted in fixed windows that start at
/// the first event after the previous window ended.
#[derive(Debug, Clone)]
pub(crate) struct Budget {
    limit: u32,
    window: Duration,
    started: Option<Instant>,
    spent: u32,
}

impl Budget {
    pub(crate) fn new(limit: u32, window: Duration) -> Budget {
        Budget {
            limit,
            window,
            started: None,
            spent: 0,
        }
    }

    /// Count one event at `now`. False once the window's budget is exceeded: the caller ends
    /// the connection with ENHANCE_YOUR_CALM.
    pub(crate) fn spend(&mut self, now: Instant) -> bool {
        match self.started {
            Some(start) if now.saturating_duration_since(start) < self.window => {}
            _ => {
                self.started = Some(now);
                self.spent = 0;
            }
        }
        self.spent = self.spent.saturating_add(1);
        self.spent <= self.limit
    }
}

/// WINDOW_UPDATE frames received against DATA frames sent (the window-update flood: each
/// update wakes the streams blocked on flow control). A client has reason to send about one
/// per DATA frame it receives for each scope (the stream and the connection), and perhaps one
/// as it opens a stream; a margin of ten per DATA frame or stream and a hundred to start with
/// (Envoy's rule) never troubles a real client.
#[derive(Debug, Clone, Default)]
pub(crate) struct WindowUpdates {
    received: u64,
    /// DATA frames we sent plus streams the client opened.
    earned: u64,
}

impl WindowUpdates {
    const BASE: u64 = 100;
    const PER_DATA_FRAME: u64 = 10;

    /// A DATA frame sent, or a stream opened: ten more updates are allowed.
    pub(crate) fn earn(&mut self) {
        self.earned += 1;
    }

    /// Count one WINDOW_UPDATE received; false once past the allowance.
    pub(crate) fn received(&mut self) -> bool {
        self.received += 1;
        self.received <= Self::BASE + Self::PER_DATA_FRAME * self.earned
    }
}

/// The budgets a connection keeps (see `Limits`).
#[derive(Debug, Clone)]
pub(crate) struct Budgets {
    /// RST_STREAM received plus streams refused (rapid reset, CVE-2023-44487).
    pub(crate) resets: Budget,
    /// SETTINGS frames received (each costs an ACK and possibly a walk over every stream).
    pub(crate) settings: Budget,
    /// PING frames received (each costs an ACK).
    pub(crate) pings: Budget,
    /// Frames that carry nothing (empty DATA, empty CONTINUATION, PRIORITY, unknown types,
    /// WINDOW_UPDATE on closed streams): cheap to send, never useful in bulk (CVE-2019-9518).
    pub(crate) empty_frames: Budget,
    /// WINDOW_UPDATEs against the DATA frames we sent.
    pub(crate) window_updates: WindowUpdates,
}

impl Budgets {
    pub(crate) fn new(limits: &super::Limits) -> Budgets {
        let window = limits.budget_window;
        Budgets {
            resets: Budget::new(limits.max_resets, window),
            settings: Budget::new(limits.max_settings, window),
            pings: Budget::new(limits.max_pings, window),
            empty_frames: Budget::new(limits.max_empty_frames, window),
            window_updates: WindowUpdates::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_allows_its_limit_per_window_and_starts_over_in_the_next() {
        let start = Instant::now();
        let mut budget = Budget::new(3, Duration::from_secs(10));
        assert!((0..3).all(|_| budget.spend(start)));
        assert!(!budget.spend(start + Duration::from_secs(9)));
        // A new window: the count starts over.
        assert!(budget.spend(start + Duration::from_secs(10)));
        assert!(budget.spend(start + Duration::from_secs(11)));
        assert!(budget.spend(start + Duration::from_secs(12)));
        assert!(!budget.spend(start + Duration::from_secs(13)));
    }

    #[test]
    fn a_steady_rate_under_the_limit_is_never_cut() {
        let start = Instant::now();
        let mut budget = Budget::new(100, Duration::from_secs(10));
        // 5 per second for a minute: 50 per window.
        for tick in 0..300u64 {
            assert!(budget.spend(start + Duration::from_millis(tick * 200)));
        }
    }

    #[test]
    fn window_updates_are_allowed_in_proportion_to_data_sent() {
        let mut updates = WindowUpdates::default();
        assert!((0..100).all(|_| updates.received()));
        assert!(!updates.received());
        let mut updates = WindowUpdates::default();
        for _ in 0..1_000 {
            updates.earn();
            assert!(updates.received() && updates.received());
        }
    }

    #[test]
    fn a_clock_that_steps_back_does_not_panic() {
        let start = Instant::now() + Duration::from_secs(5);
        let mut budget = Budget::new(1, Duration::from_secs(10));
        assert!(budget.spend(start));
        assert!(!budget.spend(start - Duration::from_secs(5)));
    }
}
