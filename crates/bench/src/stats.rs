//! What one run measured: latency histograms, counts, bytes and errors by kind.
//!
//! Owns: recording (cheap, on the hot path) and summarising (percentiles, rates). Must not
//! touch: sockets, formatting for people (see `report.rs`).
//! Sources: HdrHistogram (Gil Tene) for percentiles without sampling; Abyss §5 (errors under
//! load as a figure of merit); httperf's error classes (refused, reset, timeout).

use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Why a request did not produce a good response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The server refused the connection (`ECONNREFUSED`).
    ConnectRefused,
    /// Any other connect failure (`ETIMEDOUT`, `EADDRNOTAVAIL`, …).
    ConnectFailed,
    /// The connection was reset or broke while sending or receiving.
    Reset,
    /// No complete response within `--timeout` (connect included).
    Timeout,
    BadStatusLine,
    BadHeader,
    BadChunked,
    /// More bytes than the framing announced, or a body whose length differs from the file's.
    WrongLength,
    /// The server closed before the response was complete.
    Truncated,
    /// A well-formed response with a 4xx or 5xx status.
    HttpStatus,
}

/// Error counts by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorCounts {
    pub connect_refused: u64,
    pub connect_failed: u64,
    pub reset: u64,
    pub timeout: u64,
    pub bad_status_line: u64,
    pub bad_header: u64,
    pub bad_chunked: u64,
    pub wrong_length: u64,
    pub truncated: u64,
    pub http_status: u64,
}

impl ErrorCounts {
    pub fn add(&mut self, kind: ErrorKind) {
        *self.slot(kind) += 1;
    }

    fn slot(&mut self, kind: ErrorKind) -> &mut u64 {
        match kind {
            ErrorKind::ConnectRefused => &mut self.connect_refused,
            ErrorKind::ConnectFailed => &mut self.connect_failed,
            ErrorKind::Reset => &mut self.reset,
            ErrorKind::Timeout => &mut self.timeout,
            ErrorKind::BadStatusLine => &mut self.bad_status_line,
            ErrorKind::BadHeader => &mut self.bad_header,
            ErrorKind::BadChunked => &mut self.bad_chunked,
            ErrorKind::WrongLength => &mut self.wrong_length,
            ErrorKind::Truncated => &mut self.truncated,
            ErrorKind::HttpStatus => &mut self.http_status,
        }
    }

    /// Responses that were not well-formed HTTP (the "bad response" column).
    #[must_use]
    pub fn bad_response(&self) -> u64 {
        self.bad_status_line
            + self.bad_header
            + self.bad_chunked
            + self.wrong_length
            + self.truncated
    }

    #[must_use]
    pub fn total(&self) -> u64 {
        self.connect_refused
            + self.connect_failed
            + self.reset
            + self.timeout
            + self.http_status
            + self.bad_response()
    }

    /// (name, count) for every kind with a non-zero count.
    #[must_use]
    pub fn nonzero(&self) -> Vec<(&'static str, u64)> {
        [
            ("connect_refused", self.connect_refused),
            ("connect_failed", self.connect_failed),
            ("reset", self.reset),
            ("timeout", self.timeout),
            ("bad_status_line", self.bad_status_line),
            ("bad_header", self.bad_header),
            ("bad_chunked", self.bad_chunked),
            ("wrong_length", self.wrong_length),
            ("truncated", self.truncated),
            ("http_status", self.http_status),
        ]
        .into_iter()
        .filter(|&(_, count)| count > 0)
        .collect()
    }
}

/// Latency histograms in microseconds, from 1 µs to one hour, 3 significant digits.
fn histogram() -> Histogram<u64> {
    // Constant, valid bounds (low ≥ 1, high ≥ 2 × low, 3 significant figures ≤ 5): cannot fail.
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("constant histogram bounds are valid")
}

fn micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros())
        .unwrap_or(u64::MAX)
        .max(1)
}

/// Everything recorded during the measured part of one run.
#[derive(Debug, Clone)]
pub struct Recorder {
    /// Request sent (or, in open loop, due) to last byte of the response.
    pub latency: Histogram<u64>,
    /// Request sent (or due) to first byte of the response.
    pub first_byte: Histogram<u64>,
    pub connect: Histogram<u64>,
    pub responses: u64,
    /// Response bytes on the wire (heads and bodies) of good responses.
    pub bytes: u64,
    /// Body bytes of good responses whose length matched the framing and the expected size.
    pub verified: u64,
    pub errors: ErrorCounts,
    /// Open loop: requests that came due in the measured window (answered, failed, or still
    /// waiting when it ended).
    pub offered: u64,
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder {
            latency: histogram(),
            first_byte: histogram(),
            connect: histogram(),
            responses: 0,
            bytes: 0,
            verified: 0,
            errors: ErrorCounts::default(),
            offered: 0,
        }
    }
}

impl Recorder {
    pub fn response(&mut self, first_byte: Duration, latency: Duration, wire: u64, body: u64) {
        self.first_byte.saturating_record(micros(first_byte));
        self.latency.saturating_record(micros(latency));
        self.responses += 1;
        self.bytes += wire;
        self.verified += body;
    }

    pub fn connected(&mut self, took: Duration) {
        self.connect.saturating_record(micros(took));
    }

    pub fn error(&mut self, kind: ErrorKind) {
        self.errors.add(kind);
    }

    /// Responses and errors: every request that finished one way or the other.
    #[must_use]
    pub fn finished(&self) -> u64 {
        self.responses + self.errors.total()
    }
}

/// Percentiles of one histogram, in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p99_9: f64,
    pub max: f64,
    pub mean: f64,
}

impl Percentiles {
    #[must_use]
    pub fn of(histogram: &Histogram<u64>) -> Percentiles {
        if histogram.is_empty() {
            return Percentiles::default();
        }
        let ms = |micros: u64| micros as f64 / 1000.0;
        Percentiles {
            p50: ms(histogram.value_at_quantile(0.50)),
            p90: ms(histogram.value_at_quantile(0.90)),
            p99: ms(histogram.value_at_quantile(0.99)),
            p99_9: ms(histogram.value_at_quantile(0.999)),
            max: ms(histogram.max()),
            mean: histogram.mean() / 1000.0,
        }
    }
}

/// The figures of one run, as reported and written to JSON.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub seconds: f64,
    pub responses: u64,
    pub requests_per_second: f64,
    /// Megabits (10^6) per second of response bytes, heads included.
    pub mbit_per_second: f64,
    pub bytes_received: u64,
    pub bytes_verified: u64,
    pub latency_ms: Percentiles,
    pub first_byte_ms: Percentiles,
    pub connect_ms: Percentiles,
    pub connections: u64,
    pub errors: ErrorCounts,
    pub errors_total: u64,
    /// Open loop: requests due in the measured window; 0 in closed loop. Those neither answered
    /// nor failed were still waiting (for a connection or a response) when the window ended.
    #[serde(default)]
    pub offered: u64,
}

impl Summary {
    #[must_use]
    pub fn of(recorder: &Recorder, elapsed: Duration) -> Summary {
        let seconds = elapsed.as_secs_f64().max(1e-9);
        Summary {
            seconds,
            responses: recorder.responses,
            requests_per_second: recorder.responses as f64 / seconds,
            mbit_per_second: recorder.bytes as f64 * 8.0 / seconds / 1e6,
            bytes_received: recorder.bytes,
            bytes_verified: recorder.verified,
            latency_ms: Percentiles::of(&recorder.latency),
            first_byte_ms: Percentiles::of(&recorder.first_byte),
            connect_ms: Percentiles::of(&recorder.connect),
            connections: recorder.connect.len(),
            errors: recorder.errors,
            errors_total: recorder.errors.total(),
            offered: recorder.offered,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_rates_percentiles_and_error_totals() {
        let mut recorder = Recorder::default();
        for millis in 1..=100 {
            recorder.response(
                Duration::from_micros(500),
                Duration::from_millis(millis),
                1000,
                900,
            );
        }
        recorder.error(ErrorKind::Truncated);
        recorder.error(ErrorKind::Timeout);
        recorder.error(ErrorKind::Timeout);
        let summary = Summary::of(&recorder, Duration::from_secs(2));
        assert_eq!(summary.responses, 100);
        assert!((summary.requests_per_second - 50.0).abs() < 1e-9);
        assert!((summary.mbit_per_second - 0.4).abs() < 1e-9);
        assert_eq!(summary.bytes_verified, 90_000);
        assert!((summary.latency_ms.p50 - 50.0).abs() < 0.1);
        assert!((summary.latency_ms.p99 - 99.0).abs() < 0.1);
        assert!((summary.latency_ms.max - 100.0).abs() < 0.1);
        assert_eq!(summary.errors.bad_response(), 1);
        assert_eq!(summary.errors_total, 3);
        assert_eq!(recorder.finished(), 103);
        assert_eq!(summary.errors.nonzero(), [("timeout", 2), ("truncated", 1)]);
    }
}
