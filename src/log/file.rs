//! Opening a log: a file by its path (appending), or, for `/dev/stdout` and `/dev/stderr`, a
//! duplicate of the descriptor ampd inherited.
//!
//! Opening `/dev/stdout` by path makes a new open file of whatever descriptor 1 is: that fails
//! when it is a socket (systemd's journal: ENXIO), and when standard output and error are one
//! file (`>out 2>&1`), the new open file's own offset lets each stream overwrite the other's
//! lines. A duplicate shares the inherited open file, as a shell's redirection meant, and is
//! never reopened: `SIGUSR1` (logrotate) leaves it alone, as Caddy and static-web-server do.
//!
//! Owns: these two rules. Must not touch: what is written.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The path spellings of the inherited standard streams.
const STDOUT: &str = "/dev/stdout";
const STDERR: &str = "/dev/stderr";

/// Whether `path` names an inherited stream (kept open as it is, never reopened).
#[must_use]
pub fn is_standard_stream(path: &Path) -> bool {
    path == Path::new(STDOUT) || path == Path::new(STDERR)
}

/// `path` opened for appending (created 0644), or the inherited stream it names.
///
/// # Errors
/// The file cannot be opened, or the stream is closed (`EBADF`).
pub fn open(path: &Path) -> io::Result<File> {
    if path == Path::new(STDOUT) {
        return Ok(File::from(io::stdout().as_fd().try_clone_to_owned()?));
    }
    if path == Path::new(STDERR) {
        return Ok(File::from(io::stderr().as_fd().try_clone_to_owned()?));
    }
    OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o644)
        .open(path)
}
