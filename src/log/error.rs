//! The error log: leveled lines to standard error or a file, reopened on `SIGUSR1`.
//!
//! Owns: one process-wide writer (errors are rare and must not be lost or reordered, so they
//! are written at once under a lock, as nginx writes its error log).
//! Must not touch: the access log.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

use super::clock::Clock;
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

fn open(path: &PathBuf) -> io::Result<File> {
    OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o644)
        .open(path)
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
    if let Some((file, path)) = target.as_mut() {
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
