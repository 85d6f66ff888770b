//! The live progress line of a run, shown only when stderr is a terminal.
//!
//! Owns: formatting and pacing the line. Must not touch: the figures (it only reads them).

use std::io::{self, IsTerminal, Write};
use std::time::{Duration, Instant};

use crate::stats::Recorder;

/// The live progress line: once a second on a terminal, overwritten in place.
pub(super) struct Progress {
    label: Option<String>,
    measure_from: Instant,
    pub(super) next: Instant,
    last_count: u64,
    shown: bool,
}

impl Progress {
    pub(super) fn new(label: Option<String>, measure_from: Instant) -> Progress {
        let label = label.filter(|_| io::stderr().is_terminal());
        Progress {
            label,
            measure_from,
            next: Instant::now() + Duration::from_secs(1),
            last_count: 0,
            shown: false,
        }
    }

    pub(super) fn tick(&mut self, now: Instant, recorder: &Recorder) {
        if now < self.next {
            return;
        }
        self.next = now + Duration::from_secs(1);
        let Some(label) = &self.label else { return };
        let (phase, elapsed) = if now < self.measure_from {
            ("warm-up", 0.0)
        } else {
            ("", (now - self.measure_from).as_secs_f64())
        };
        let rate = recorder.responses - self.last_count;
        self.last_count = recorder.responses;
        let mut err = io::stderr().lock();
        let _ = write!(
            err,
            "\r\x1b[K{label}: {phase}{elapsed:6.1}s {:>10} responses {rate:>9} req/s {:>6} errors",
            recorder.responses,
            recorder.errors.total()
        );
        let _ = err.flush();
        self.shown = true;
    }

    pub(super) fn finish(&self) {
        if self.shown {
            let _ = write!(io::stderr(), "\r\x1b[K");
        }
    }
}
