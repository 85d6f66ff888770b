//! The wall clock, rendered once a second: the `Date` header (RFC 9110 §5.6.7), the Common Log
//! Format time and the ISO 8601 time of JSON log lines.
//!
//! Owns: `Clock`. Each loop keeps its own and ticks it once per wake-up; formatting happens
//! only when the second changes (nginx `ngx_times.c`). The monotonic instant of the tick is
//! kept too: what a turn does for its requests (when a request started, how old a cached
//! path translation is) reads it rather than the system clock per request.
//! Must not touch: anything else.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use ampd_http::date::format_http_date;

#[derive(Clone, Debug)]
pub struct Clock {
    /// When the clock was last ticked.
    now: Instant,
    unix: u64,
    date: [u8; 29],
    /// `10/Oct/2000:13:55:36 +0000`
    log_time: [u8; 26],
    /// `2000-10-10T13:55:36Z`
    iso: [u8; 20],
}

impl Default for Clock {
    fn default() -> Self {
        Clock::at(unix_now())
    }
}

impl Clock {
    #[must_use]
    pub fn at(unix: u64) -> Clock {
        let mut clock = Clock {
            now: Instant::now(),
            unix,
            date: [b' '; 29],
            log_time: [b' '; 26],
            iso: [b' '; 20],
        };
        clock.render();
        clock
    }

    /// Read the system clock; re-render when the second changed.
    pub fn tick(&mut self) {
        self.now = Instant::now();
        let now = unix_now();
        if now != self.unix {
            self.unix = now;
            self.render();
        }
    }

    /// The monotonic time of the last tick (this turn's "now").
    #[must_use]
    pub fn now(&self) -> Instant {
        self.now
    }

    #[must_use]
    pub fn unix(&self) -> u64 {
        self.unix
    }

    #[must_use]
    pub fn date(&self) -> &[u8; 29] {
        &self.date
    }

    #[must_use]
    pub fn log_time(&self) -> &[u8; 26] {
        &self.log_time
    }

    #[must_use]
    pub fn iso(&self) -> &[u8; 20] {
        &self.iso
    }

    fn render(&mut self) {
        self.date = format_http_date(self.unix);
        let (year, month, day, hour, minute, second) = civil(self.unix);
        const MONTHS: [&str; 12] = [
            "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
        ];
        let log = format!(
            "{day:02}/{}/{year:04}:{hour:02}:{minute:02}:{second:02} +0000",
            MONTHS[(month - 1) as usize]
        );
        self.log_time.copy_from_slice(&log.as_bytes()[..26]);
        let iso = format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}Z");
        self.iso.copy_from_slice(&iso.as_bytes()[..20]);
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs())
}

/// (year, month, day, hour, minute, second) in UTC, for years 1970..=9999.
fn civil(unix: u64) -> (u64, u64, u64, u64, u64, u64) {
    let unix = unix.min(ampd_http::date::MAX_HTTP_DATE);
    let seconds = unix % 86_400;
    let days = i64::try_from(unix / 86_400).unwrap_or(0);
    let (year, month, day) = ampd_http::date::civil_from_days(days);
    (
        u64::try_from(year).unwrap_or(0),
        u64::from(month),
        u64::from(day),
        seconds / 3600,
        seconds % 3600 / 60,
        seconds % 60,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_all_three_forms() {
        // 2000-10-10T13:55:36Z, the example in Apache's log documentation.
        let clock = Clock::at(971_186_136);
        assert_eq!(&clock.date()[..], b"Tue, 10 Oct 2000 13:55:36 GMT");
        assert_eq!(&clock.log_time()[..], b"10/Oct/2000:13:55:36 +0000");
        assert_eq!(&clock.iso()[..], b"2000-10-10T13:55:36Z");
        assert_eq!(&Clock::at(951_782_400).iso()[..], b"2000-02-29T00:00:00Z");
    }
}
