//! CGI/1.1 scripts (RFC 3875), one process per request, started by one launcher thread per
//! server process, so that no serving loop ever waits for a `fork`, an `exec`, a directory walk
//! or a child's end.
//!
//! The engine makes a socket pair for a request, keeps one end as the request's upstream socket
//! and gives the other to `Launch::start`, which only queues. The launcher thread finds the
//! script (`search.rs`), spawns it with that socket as its stdin and stdout and a pipe as its
//! stderr, and watches it (`run.rs`): stderr lines go to the error log under the script's path,
//! the whole process group is killed at the timeout, the child is reaped and its `Slot` freed.
//! A request for which no script runs learns why from `Launch::failure`, set before the
//! launcher drops its end of the socket (the engine sees end of stream, then reads the reason).
//!
//! Owns: the cap on scripts running at once (`Launcher::reserve`), the search, the spawn, the
//! watch. Must not touch: the request and response bytes (the exchange over the socket is
//! `conn`'s), the meta-variables' values (`conn` builds them; only the four that depend on the
//! script found are added here).
//! Sources: RFC 3875 §4.1 (meta-variables), §7.2 (the script's current directory); Apache
//! mod_cgi and `ScriptAlias`; lighttpd mod_cgi.

mod run;
mod search;

use std::fmt;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::config::CgiLimits;

/// One per server process (clones share it): the cap on scripts running at once and the
/// launcher thread, started by the first `Launch::start`.
#[derive(Clone)]
pub struct Launcher {
    shared: Arc<Shared>,
}

struct Shared {
    max_scripts: usize,
    running: AtomicUsize,
    /// The launcher thread's queue, made on first use (or why it could not be).
    queue: OnceLock<Result<run::Queue, String>>,
}

impl fmt::Debug for Launcher {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("Launcher")
            .field("max_scripts", &self.shared.max_scripts)
            .field("running", &self.running())
            .finish_non_exhaustive()
    }
}

impl Launcher {
    /// The launcher of `limits`; its thread starts on first use.
    #[must_use]
    pub fn new(limits: &CgiLimits) -> Launcher {
        Launcher {
            shared: Arc::new(Shared {
                max_scripts: limits.max_scripts,
                running: AtomicUsize::new(0),
                queue: OnceLock::new(),
            }),
        }
    }

    /// The server process's launcher: the same one for every configuration generation while
    /// `max_scripts` stays the same (a reload does not start another thread, and scripts still
    /// running count against the cap); a new one when it changes. Under `mp` each worker
    /// process has its own (the thread starts on first use, after the fork).
    #[must_use]
    pub fn process(limits: &CgiLimits) -> Launcher {
        static PROCESS: std::sync::Mutex<Option<Launcher>> = std::sync::Mutex::new(None);
        let mut current = PROCESS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match &*current {
            Some(launcher) if launcher.shared.max_scripts == limits.max_scripts => launcher.clone(),
            _ => current.insert(Launcher::new(limits)).clone(),
        }
    }

    /// A place for one more script, or `None` when `max_scripts` are running (the request gets
    /// `503` with `Retry-After`). Reserve before the socket pair is made, so a refused request
    /// costs nothing.
    #[must_use]
    pub fn reserve(&self) -> Option<Slot> {
        let max = self.shared.max_scripts;
        self.shared
            .running
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |running| {
                (running < max).then_some(running + 1)
            })
            .ok()
            .map(|_| Slot {
                shared: self.shared.clone(),
            })
    }

    /// Append `ampd_cgi_scripts` and `ampd_cgi_scripts_max` (Prometheus text): this process's
    /// scripts running and its cap.
    pub fn render_metrics(&self, out: &mut String) {
        use std::fmt::Write as _;
        let _ = write!(
            out,
            "# HELP ampd_cgi_scripts CGI scripts running (this server process).\n\
             # TYPE ampd_cgi_scripts gauge\n\
             ampd_cgi_scripts {}\n\
             # HELP ampd_cgi_scripts_max Scripts allowed to run at once (cgi.max_scripts).\n\
             # TYPE ampd_cgi_scripts_max gauge\n\
             ampd_cgi_scripts_max {}\n",
            self.running(),
            self.shared.max_scripts
        );
    }

    /// Scripts running (and places reserved for ones about to), for metrics.
    #[must_use]
    pub fn running(&self) -> usize {
        self.shared.running.load(Ordering::Acquire)
    }
}

/// A place among `max_scripts`: freed when its script has been reaped, or when it is dropped
/// unused.
pub struct Slot {
    shared: Arc<Shared>,
}

impl fmt::Debug for Slot {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("Slot")
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.shared.running.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Which script a request runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Script {
    /// Search like Apache's `ScriptAlias`: the first segment of `rest` naming a regular file
    /// below `directory` is the script; `url_base` + the segments up to it are `SCRIPT_NAME`,
    /// what follows is `PATH_INFO`. `/cgi-bin/env.py/x` with `url_base = "/cgi-bin"` and
    /// `rest = "/env.py/x"` runs `directory/env.py` with `PATH_INFO = /x`.
    Search {
        directory: PathBuf,
        url_base: String,
        rest: String,
    },
    /// Already split (extension or `script` locations).
    Fixed {
        filename: PathBuf,
        script_name: String,
        path_info: String,
    },
}

/// Why no script runs for a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LaunchFailure {
    /// `404`: nothing there, or a symbolic link leading out of the script directory.
    NotFound,
    /// `403`: a directory, or a file that is not executable.
    Forbidden,
    /// `502`: the script could not be executed (logged).
    Spawn,
}

/// One request's script, handed to the launcher thread.
#[derive(Debug)]
pub struct Launch {
    pub slot: Slot,
    pub script: Script,
    /// For `PATH_TRANSLATED`.
    pub document_root: PathBuf,
    /// Every meta-variable except `SCRIPT_NAME`, `SCRIPT_FILENAME`, `PATH_INFO` and
    /// `PATH_TRANSLATED`, which the launcher adds once the script is found. The script's
    /// environment is exactly these (ampd's own is not passed on).
    pub env: Vec<(Vec<u8>, Vec<u8>)>,
    /// Then the script's process group is killed (`SIGKILL`).
    pub timeout: Duration,
    /// Set before the launcher drops its end of the socket when no script runs.
    pub failure: Arc<OnceLock<LaunchFailure>>,
}

impl Launch {
    /// Queue the script to the launcher thread with `stdio`, the script's end of the socket
    /// pair (its stdin and stdout). Never blocks; the launcher thread starts on first use.
    pub fn start(self, stdio: OwnedFd) {
        let shared = self.slot.shared.clone();
        let queue = shared.queue.get_or_init(run::Queue::start);
        match queue {
            Ok(queue) => queue.push(self, stdio),
            Err(failure) => run::refuse(&self, failure),
        }
    }
}

#[cfg(test)]
mod tests;
