//! ampd-slowfs: the latency device of bench/disk_bound.sh. A read-only FUSE passthrough of a
//! source directory whose reads of files named `slow*` are answered DELAY seconds after they
//! arrive, with any number of them waiting at once: a device whose reads are slow rather than
//! few (an SSD's deep queue, network storage), as Flash's disk-bound experiments need.
//!
//! ```text
//! ampd-slowfs SOURCE_DIR MOUNTPOINT DELAY_SECONDS [COUNTS_FILE]
//! ```
//!
//! Why Rust and a timer rather than a Python passthrough (tests/fixtures/slowfs.py, kept for
//! the root package's tests): that one sleeps a thread per read and spends about 190 µs of CPU
//! per read under the GIL, 87 % of a core at 4,500 reads/s, a third of it on the server's core,
//! so the device would take CPU from the server it measures. Here a read costs a `pread` and a
//! reply, and the wait is a timer, not a thread.
//!
//! Layout:
//!
//! ```text
//! main.rs         arguments, mount, run until unmounted
//! passthrough.rs  the filesystem: inodes, open files, which reads wait
//! delayed.rs      the timer thread that sends waiting replies when they are due
//! counts.rs       COUNTS_FILE: operations served, by type and by the thread that asked
//! ```
//!
//! Runs in the foreground until the mount goes away (`fusermount -u` or `umount`).

mod counts;
mod delayed;
mod passthrough;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use fuser::{Config, MountOption, SessionACL};

/// A mutex's guard, poisoned or not: a panicking thread leaves counters and queues usable, and
/// the device must go on answering the kernel.
fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

const USAGE: &str = "usage: ampd-slowfs SOURCE_DIR MOUNTPOINT DELAY_SECONDS [COUNTS_FILE]\n";

/// Threads that take requests from the kernel. A read's wait is a timer, so these only block on
/// the source's `pread`, which after `drop_caches` reads the real disk; a few let one such read
/// overlap the others.
const REQUEST_THREADS: usize = 4;

#[derive(Debug)]
struct Arguments {
    source: PathBuf,
    mountpoint: PathBuf,
    delay: Duration,
    counts: Option<PathBuf>,
}

fn parse(arguments: &[String]) -> Result<Arguments, String> {
    let [source, mountpoint, delay, rest @ ..] = arguments else {
        return Err(format!("expected at least 3 arguments\n{USAGE}"));
    };
    if rest.len() > 1 {
        return Err(format!("expected at most 4 arguments\n{USAGE}"));
    }
    let seconds: f64 = delay
        .parse()
        .map_err(|_| format!("DELAY_SECONDS '{delay}' is not a number of seconds"))?;
    let delay = Duration::try_from_secs_f64(seconds)
        .map_err(|_| format!("DELAY_SECONDS '{delay}' must be zero or more seconds"))?;
    let source =
        std::fs::canonicalize(source).map_err(|error| format!("SOURCE_DIR '{source}': {error}"))?;
    if !source.is_dir() {
        return Err(format!(
            "SOURCE_DIR '{}' is not a directory",
            source.display()
        ));
    }
    Ok(Arguments {
        source,
        mountpoint: PathBuf::from(mountpoint),
        delay,
        counts: rest.first().map(PathBuf::from),
    })
}

fn main() -> ExitCode {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    if arguments
        .first()
        .is_some_and(|first| first == "-h" || first == "--help")
    {
        print!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let arguments = match parse(&arguments) {
        Ok(arguments) => arguments,
        Err(message) => {
            eprintln!("ampd-slowfs: {message}");
            return ExitCode::from(2);
        }
    };
    let counts = arguments.counts.as_ref().map(|path| {
        let counts = counts::Counts::default();
        counts.write_every_half_second(path.clone());
        counts
    });
    let filesystem = passthrough::SlowPassthrough::new(arguments.source, arguments.delay, counts);
    let mut config = Config::default();
    config.mount_options = vec![
        MountOption::RO,
        MountOption::FSName("ampd-slowfs".to_owned()),
        // Permissions are the source's, checked by the kernel: nginx's worker (www-data) may
        // read what the source lets it read.
        MountOption::DefaultPermissions,
    ];
    // allow_other: nginx's worker runs as www-data, not as the root who mounts.
    config.acl = SessionACL::All;
    config.n_threads = Some(REQUEST_THREADS);
    config.clone_fd = true;
    match fuser::mount(filesystem, &arguments.mountpoint, &config) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!(
                "ampd-slowfs: mounting on '{}': {error}",
                arguments.mountpoint.display()
            );
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(words: &[&str]) -> Vec<String> {
        words.iter().map(|word| (*word).to_owned()).collect()
    }

    #[test]
    fn arguments_are_checked_before_mounting() {
        let source = std::env::temp_dir();
        let source = source.to_str().unwrap();
        let parsed = parse(&strings(&[source, "/mnt/x", "0.01", "/tmp/counts.json"])).unwrap();
        assert_eq!(parsed.delay, Duration::from_millis(10));
        assert_eq!(parsed.counts, Some(PathBuf::from("/tmp/counts.json")));
        assert!(parse(&strings(&[source, "/mnt/x"])).is_err());
        assert!(parse(&strings(&[source, "/mnt/x", "soon"]))
            .unwrap_err()
            .contains("'soon'"));
        assert!(parse(&strings(&[source, "/mnt/x", "-1"])).is_err());
        assert!(parse(&strings(&["/no/such/dir", "/mnt/x", "1"]))
            .unwrap_err()
            .contains("/no/such/dir"));
        assert!(parse(&strings(&[source, "/mnt/x", "1", "a", "b"])).is_err());
    }
}
