//! For the unit tests of `programs`: temporary directories, executable scripts, and the error
//! log captured in a file the tests read back.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::config::{Level, LogFormat, LogOptions};
use crate::log::error;

/// A directory removed (with what it holds) when dropped.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        static COUNT: AtomicUsize = AtomicUsize::new(0);
        let path = std::env::temp_dir().join(format!(
            "ampd-programs-{}-{name}-{}",
            std::process::id(),
            COUNT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Write an executable file. The file is written by another process (`install`): a file this
/// process held open for writing could be inherited, for an instant, by a child another test
/// thread forks, and executing it would then fail with `ETXTBSY` (rust-lang/rust#114554).
pub fn script(path: &Path, text: &str) {
    let draft = path.with_extension("draft");
    std::fs::write(&draft, text).unwrap();
    let status = std::process::Command::new("install")
        .args(["-m", "755"])
        .arg(&draft)
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success(), "install {}", path.display());
    std::fs::remove_file(&draft).unwrap();
}

/// Send the process's error log to a file (once; every test shares it and looks for lines
/// only it writes).
fn log_file() -> &'static Path {
    static FILE: OnceLock<PathBuf> = OnceLock::new();
    FILE.get_or_init(|| {
        let path = std::env::temp_dir().join(format!("ampd-programs-{}.log", std::process::id()));
        error::configure(&LogOptions {
            access: None,
            format: LogFormat::Common,
            error: Some(path.clone()),
            level: Level::Debug,
        })
        .unwrap();
        path
    })
}

/// Start capturing the error log (call before the code under test logs).
pub fn capture_log() {
    log_file();
}

/// The error-log lines that contain every one of `needles`, once there is at least one (waits
/// up to `within`).
pub fn log_lines(needles: &[&str], within: Duration) -> Vec<String> {
    let deadline = Instant::now() + within;
    loop {
        let text = std::fs::read_to_string(log_file()).unwrap_or_default();
        let lines: Vec<String> = text
            .lines()
            .filter(|line| needles.iter().all(|needle| line.contains(needle)))
            .map(str::to_owned)
            .collect();
        if !lines.is_empty() || Instant::now() >= deadline {
            return lines;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Wait (up to `within`) until `done` holds; whether it did.
pub fn eventually(within: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    while !done() {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}
