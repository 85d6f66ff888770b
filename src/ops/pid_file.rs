//! Where a running server's pid is found, and telling it what to do by it: `ampd reload`,
//! `ampd stop`, `ampd reopen` (nginx's `-s`).
//!
//! A server started with a configuration file writes its pid to `pid_file`, or, without one,
//! to a default path keyed by the file: `/run/ampd/NAME-HASH.pid` as root,
//! `$XDG_RUNTIME_DIR/ampd/NAME-HASH.pid` otherwise, where `NAME` is the file's stem and `HASH`
//! the FNV-1a hash of its canonical path. Two servers of two files on one machine (or the test
//! suite's hundreds) never share a pid file, and `ampd reload -c FILE` finds FILE's server
//! with no setting at all.
//!
//! Owns: the default path, which pid file this process wrote (so that every way out removes
//! it), reading a pid file, checking that the pid is an ampd, sending the signal. Must not
//! touch: what a signal does (`signals.rs`), the file's format (`process.rs`).

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use ampd_sys::signal::{SIGHUP, SIGTERM, SIGUSR1};

/// What the command asks the server to do, and the signal that says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// `HUP`: read the configuration file again.
    Reload,
    /// `TERM`: graceful stop.
    Stop,
    /// `USR1`: reopen the logs.
    Reopen,
}

impl Order {
    #[must_use]
    pub fn signal(self) -> i32 {
        match self {
            Order::Reload => SIGHUP,
            Order::Stop => SIGTERM,
            Order::Reopen => SIGUSR1,
        }
    }

    #[must_use]
    pub fn signal_name(self) -> &'static str {
        match self {
            Order::Reload => "HUP",
            Order::Stop => "TERM",
            Order::Reopen => "USR1",
        }
    }

    /// What the server does on it, for the line the command prints.
    #[must_use]
    pub fn effect(self) -> &'static str {
        match self {
            Order::Reload => "reloads its configuration",
            Order::Stop => "stops gracefully",
            Order::Reopen => "reopens its logs",
        }
    }
}

/// The directory default pid files go in: `/run/ampd` as root, `$XDG_RUNTIME_DIR/ampd`
/// otherwise; `None` for a user without a runtime directory (no world-writable fallback such
/// as /tmp, where another user could plant the file).
#[must_use]
pub fn default_dir() -> Option<PathBuf> {
    if ampd_sys::process::effective_uid() == 0 {
        return Some(PathBuf::from("/run/ampd"));
    }
    let runtime = std::env::var_os("XDG_RUNTIME_DIR")?;
    let runtime = PathBuf::from(runtime);
    runtime.is_absolute().then(|| runtime.join("ampd"))
}

/// The default pid file of a server started with `config_file`: see the module's comment.
#[must_use]
pub fn default_path(config_file: &Path) -> Option<PathBuf> {
    Some(default_dir()?.join(default_name(config_file)))
}

/// `NAME-HASH.pid` for `config_file` (made canonical when it exists, so that `./a.toml` and
/// `/etc/../etc/a.toml` name one server).
fn default_name(config_file: &Path) -> String {
    let canonical = std::fs::canonicalize(config_file).unwrap_or_else(|_| absolute(config_file));
    let stem = canonical
        .file_stem()
        .map(|stem| stem.to_string_lossy().into_owned())
        .filter(|stem| !stem.is_empty())
        .unwrap_or_else(|| "ampd".to_owned());
    let stem: String = stem
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    format!(
        "{stem}-{:016x}.pid",
        fnv1a(canonical.as_os_str().as_encoded_bytes())
    )
}

fn absolute(path: &Path) -> PathBuf {
    if path.is_absolute() {
        return path.to_path_buf();
    }
    std::env::current_dir().map_or_else(|_| path.to_path_buf(), |dir| dir.join(path))
}

/// FNV-1a, 64 bits: stable across builds and Rust versions (std's hasher is not), so a newer
/// ampd finds the pid file an older one wrote.
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &byte in bytes {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// The pid file this process wrote, for the ways out that do not return to `main` (`QUIT`).
static WRITTEN: OnceLock<PathBuf> = OnceLock::new();

/// Note that this process wrote `path` (once, after writing it).
pub fn remember(path: &Path) {
    let _ = WRITTEN.set(path.to_path_buf());
}

/// Remove the pid file this process wrote, if it still names this process (not a successor's,
/// not a forked worker's parent's).
pub fn remove_written() {
    if let Some(path) = WRITTEN.get() {
        super::process::remove_pid_file(path);
    }
}

/// Write our pid to `path`, making its directory (0755) when it is missing. Default pid files
/// of servers that are gone are removed first: a server that switched to `user` cannot remove
/// its own from a directory only root may write.
///
/// # Errors
/// The directory or the file cannot be made.
pub fn write_default(path: &Path) -> io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
        remove_stale(dir);
    }
    super::process::write_pid_file(path)
}

/// Remove the default pid files in `dir` (`NAME-HASH.pid`) whose process is not running.
fn remove_stale(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(hash) = name
            .to_str()
            .and_then(|name| name.strip_suffix(".pid"))
            .and_then(|stem| stem.rsplit_once('-'))
            .map(|(_, hash)| hash)
        else {
            continue;
        };
        if hash.len() != 16 || !hash.bytes().all(|byte| byte.is_ascii_hexdigit()) {
            continue;
        }
        let gone = std::fs::read_to_string(entry.path())
            .ok()
            .and_then(|text| text.trim().parse::<u32>().ok())
            .is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists());
        if gone {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Why the server could not be told.
#[derive(Debug)]
pub enum OrderError {
    /// No pid file at the path (the server is not running, or was started otherwise).
    NoPidFile { path: PathBuf, hint: String },
    /// The file cannot be read, or holds no pid.
    Unreadable { path: PathBuf, reason: String },
    /// The pid names no running process: the server ended without removing the file.
    Stale { path: PathBuf, pid: u32 },
    /// The pid is some other program's now.
    NotAmpd {
        path: PathBuf,
        pid: u32,
        command: String,
    },
    /// `kill` refused (another user's process).
    Signal { pid: u32, error: io::Error },
    /// No pid file could be named: no configuration file's, no `--pid-file`, no runtime
    /// directory.
    NoPath(String),
}

impl fmt::Display for OrderError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OrderError::NoPidFile { path, hint } => write!(
                formatter,
                "no pid file at {}: is the server running? (hint: {hint})",
                path.display()
            ),
            OrderError::Unreadable { path, reason } => {
                write!(formatter, "pid file {}: {reason}", path.display())
            }
            OrderError::Stale { path, pid } => write!(
                formatter,
                "pid file {} names process {pid}, which is not running (hint: the server \
                 ended without removing it; remove the file)",
                path.display()
            ),
            OrderError::NotAmpd { path, pid, command } => write!(
                formatter,
                "pid file {} names process {pid}, which is {command}, not ampd (hint: the \
                 server ended without removing it; remove the file)",
                path.display()
            ),
            OrderError::Signal { pid, error } => write!(
                formatter,
                "cannot signal process {pid}: {} (hint: run as the user that started it, or \
                 as root)",
                crate::config::plain(error)
            ),
            OrderError::NoPath(reason) => formatter.write_str(reason),
        }
    }
}

impl std::error::Error for OrderError {}

/// Send `order` to the ampd whose pid `pid_file` holds; its pid.
///
/// # Errors
/// See `OrderError`; `hint` goes with a missing file.
pub fn send(order: Order, pid_file: &Path, hint: &str) -> Result<u32, OrderError> {
    let text = match std::fs::read_to_string(pid_file) {
        Ok(text) => text,
        Err(error) if error.kind() == io::ErrorKind::NotFound => {
            return Err(OrderError::NoPidFile {
                path: pid_file.to_path_buf(),
                hint: hint.to_owned(),
            })
        }
        Err(error) => {
            return Err(OrderError::Unreadable {
                path: pid_file.to_path_buf(),
                reason: crate::config::plain(&error),
            })
        }
    };
    let pid: u32 = text
        .trim()
        .parse()
        .ok()
        .filter(|pid| *pid > 0)
        .ok_or_else(|| OrderError::Unreadable {
            path: pid_file.to_path_buf(),
            reason: format!("{:?} is not a pid", text.trim()),
        })?;
    let command = match std::fs::read_to_string(format!("/proc/{pid}/comm")) {
        Ok(command) => command.trim().to_owned(),
        Err(_) => {
            return Err(OrderError::Stale {
                path: pid_file.to_path_buf(),
                pid,
            })
        }
    };
    if !is_ampd(pid, &command) {
        return Err(OrderError::NotAmpd {
            path: pid_file.to_path_buf(),
            pid,
            command,
        });
    }
    let target = ampd_sys::child::Pid::try_from(pid).map_err(|_| OrderError::Stale {
        path: pid_file.to_path_buf(),
        pid,
    })?;
    ampd_sys::child::kill(target, order.signal())
        .map_err(|error| OrderError::Signal { pid, error })?;
    Ok(pid)
}

/// Whether process `pid` (whose command name is `command`) runs ampd: the same binary as this
/// one, or a program named ampd (an upgrade replaced the file on disk, or it runs from another
/// path). A pid reused by another program is neither.
fn is_ampd(pid: u32, command: &str) -> bool {
    if command == "ampd" {
        return true;
    }
    let ours = std::fs::metadata("/proc/self/exe");
    let theirs = std::fs::metadata(format!("/proc/{pid}/exe"));
    match (ours, theirs) {
        (Ok(ours), Ok(theirs)) => {
            use std::os::unix::fs::MetadataExt;
            ours.dev() == theirs.dev() && ours.ino() == theirs.ino()
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_names_are_keyed_by_the_file() {
        let a = default_name(Path::new("/etc/ampd/ampd.toml"));
        let b = default_name(Path::new("/srv/site/ampd.toml"));
        assert!(a.starts_with("ampd-") && a.ends_with(".pid"), "{a}");
        assert_ne!(a, b, "two files, two pid files");
        assert_eq!(a, default_name(Path::new("/etc/ampd/ampd.toml")), "stable");
        assert_eq!(a.len(), "ampd-".len() + 16 + ".pid".len());
        let odd = default_name(Path::new("/tmp/my site (1).toml"));
        assert!(odd.starts_with("my_site__1_-"), "{odd}");
    }

    #[test]
    fn the_hash_is_fnv1a() {
        // The reference values of FNV-1a 64 (draft-eastlake-fnv).
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn writing_a_default_pid_file_removes_those_of_servers_that_are_gone() {
        let dir = std::env::temp_dir().join(format!("ampd-pid-sweep-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let gone = dir.join("a-0123456789abcdef.pid");
        let running = dir.join("b-fedcba9876543210.pid");
        let other = dir.join("other.pid");
        std::fs::write(&gone, "4194305\n").unwrap();
        std::fs::write(&running, format!("{}\n", std::process::id())).unwrap();
        std::fs::write(&other, "4194305\n").unwrap();
        let ours = dir.join("c-00000000000000ff.pid");
        write_default(&ours).unwrap();
        assert!(!gone.exists(), "a dead server's default pid file goes");
        assert!(
            running.exists() && other.exists(),
            "a live one's and a foreign file stay"
        );
        assert_eq!(
            std::fs::read_to_string(&ours).unwrap().trim(),
            std::process::id().to_string()
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_missing_or_stale_pid_file_is_a_clear_error() {
        let dir = std::env::temp_dir().join(format!("ampd-pid-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("x.pid");
        let _ = std::fs::remove_file(&path);
        let missing = send(Order::Reload, &path, "start it").unwrap_err();
        assert!(matches!(missing, OrderError::NoPidFile { .. }), "{missing}");
        assert!(missing.to_string().contains("hint: start it"), "{missing}");
        std::fs::write(&path, "not a pid\n").unwrap();
        let unreadable = send(Order::Reload, &path, "").unwrap_err();
        assert!(
            matches!(unreadable, OrderError::Unreadable { .. }),
            "{unreadable}"
        );
        // Above /proc/sys/kernel/pid_max (at most 2^22): no such process.
        std::fs::write(&path, "4194305\n").unwrap();
        let stale = send(Order::Stop, &path, "").unwrap_err();
        assert!(
            matches!(stale, OrderError::Stale { pid: 4_194_305, .. }),
            "{stale}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
