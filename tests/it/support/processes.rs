//! Looking at and signalling processes the tests did not start themselves (a CGI script, an
//! application ampd keeps): by pid, through /proc and the `kill` command, every wait bounded.
//! Owns: nothing. Must not touch: processes other than the pid it is given.

use std::path::Path;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// True while `pid` exists and is not a zombie (a killed child its parent has not reaped yet is
/// gone for every purpose a test has).
pub fn alive(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // `PID (COMM) STATE ...`: COMM may hold spaces and parentheses, so take the last `)`.
    let state = stat
        .rfind(')')
        .and_then(|end| stat[end + 1..].split_whitespace().next());
    state != Some("Z")
}

/// Waits (bounded) until `pid` is gone; true if it went.
pub fn wait_gone(pid: u32, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if !alive(pid) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(10));
    }
}

/// Waits (bounded) for `path` to exist, then reads the pid written in it.
///
/// # Panics
/// If the file does not appear within `within` or holds no pid.
pub fn wait_pid_file(path: &Path, within: Duration) -> u32 {
    let deadline = Instant::now() + within;
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            return text
                .trim()
                .parse()
                .unwrap_or_else(|_| panic!("{} holds no pid: {text:?}", path.display()));
        }
        assert!(
            Instant::now() < deadline,
            "{} did not appear within {within:?}",
            path.display()
        );
        thread::sleep(Duration::from_millis(10));
    }
}

/// Waits (bounded) until `path` exists; true if it does.
pub fn wait_file(path: &Path, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if path.exists() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(10));
    }
}

/// Sends signal `name` (`KILL`, `TERM`, ...) to `pid`, or to process group `pid` when `group`.
/// Errors (the process is already gone) are ignored.
pub fn signal(name: &str, pid: u32, group: bool) {
    let target = if group {
        format!("-{pid}")
    } else {
        pid.to_string()
    };
    let _ = Command::new("kill")
        .args([format!("-{name}"), "--".to_string(), target])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}
