//! The server's processes as the operating system sees them, read from `/proc`: CPU time,
//! resident memory, open descriptors, the descriptor limit and the start time, for the
//! `process_*` metrics (the Prometheus client libraries' names and meanings).
//!
//! "The server" is the process that started it (the one that made the scoreboard, `mp`'s
//! master) and every process below it: `mp` workers and helper processes
//! (`--helpers-mode process`). CPU time, memory and descriptors are summed over them, so one
//! scrape of any worker describes the whole server; the limit is per process (each has its own
//! descriptor table, and all inherit the same limit). Memory is resident set size, summed
//! (pages shared between a master and its forked workers count in each).
//!
//! Owns: reading `/proc`. Must not touch: anything it reads (it only reads).

use std::collections::HashMap;
use std::fs;

/// One reading of the whole server.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Figures {
    /// User and system CPU seconds of every process, plus those of its children that ended
    /// (a replaced `mp` worker's time stays counted).
    pub cpu_seconds: f64,
    pub resident_bytes: u64,
    pub open_fds: u64,
    /// The soft `RLIMIT_NOFILE` of the reading process.
    pub max_fds: u64,
    /// When the first process started, in seconds since the Unix epoch.
    pub start_time_seconds: f64,
    /// How many processes the sums cover.
    pub processes: u64,
}

/// What `/proc/PID/stat` says of one process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stat {
    parent: u32,
    /// utime + stime + cutime + cstime, in clock ticks.
    cpu_ticks: u64,
    /// Clock ticks after boot.
    start_ticks: u64,
    resident_pages: u64,
}

/// Read the figures of `server` (the first process's id) and the processes below it.
#[must_use]
pub fn read(server: u32) -> Figures {
    let ticks = ampd_sys::process::clock_ticks_per_second() as f64;
    let page = ampd_sys::file::page_size() as u64;
    let mut figures = Figures {
        max_fds: ampd_sys::process::nofile_limit().map_or(0, |(soft, _)| soft),
        ..Figures::default()
    };
    let Some(root) = stat_of(server) else {
        return figures;
    };
    figures.start_time_seconds = boot_time().unwrap_or(0.0) + root.start_ticks as f64 / ticks;
    for (pid, stat) in tree(server, root) {
        figures.processes += 1;
        figures.cpu_seconds += stat.cpu_ticks as f64 / ticks;
        figures.resident_bytes += stat.resident_pages * page;
        // Another process's descriptors are readable when it runs as the same user (and has
        // not been made undumpable); one that is not is left out of the sum.
        if let Ok(entries) = fs::read_dir(format!("/proc/{pid}/fd")) {
            figures.open_fds += entries.count() as u64;
        }
    }
    figures
}

/// `server` and every live process below it, with their stat.
fn tree(server: u32, root: Stat) -> Vec<(u32, Stat)> {
    let mut found = vec![(server, root)];
    // Every process's parent, from one pass over /proc (`/proc/PID/task/TID/children` is
    // cheaper but needs CONFIG_PROC_CHILDREN, which many kernels lack).
    let mut children: HashMap<u32, Vec<(u32, Stat)>> = HashMap::new();
    let Ok(entries) = fs::read_dir("/proc") else {
        return found;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|name| name.parse().ok())
        else {
            continue;
        };
        if pid == server {
            continue;
        }
        if let Some(stat) = stat_of(pid) {
            children.entry(stat.parent).or_default().push((pid, stat));
        }
    }
    let mut next = 0;
    while next < found.len() {
        if let Some(below) = children.remove(&found[next].0) {
            found.extend(below);
        }
        next += 1;
    }
    found
}

fn stat_of(pid: u32) -> Option<Stat> {
    parse_stat(&fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// `/proc/PID/stat` (proc(5)): the name in parentheses may hold spaces and `)`, so fields are
/// counted from after the last `)`; there, field 3 (`state`) is index 0.
fn parse_stat(text: &str) -> Option<Stat> {
    let fields: Vec<&str> = text
        .get(text.rfind(')')? + 1..)?
        .split_whitespace()
        .collect();
    let field = |number: usize| -> Option<u64> { fields.get(number - 3)?.parse().ok() };
    Some(Stat {
        parent: u32::try_from(field(4)?).ok()?,
        cpu_ticks: field(14)? + field(15)? + field(16)? + field(17)?,
        start_ticks: field(22)?,
        resident_pages: field(24)?,
    })
}

/// The boot time in seconds since the epoch (`btime` of `/proc/stat`).
fn boot_time() -> Option<f64> {
    let text = fs::read_to_string("/proc/stat").ok()?;
    let seconds: u64 = text
        .lines()
        .find_map(|line| line.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    Some(seconds as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_the_name() {
        // A name with a space and a parenthesis, as a process may choose.
        let text = "4242 (a b) c) S 17 4242 4242 0 -1 4194560 500 0 0 0 \
                    30 12 5 3 20 0 3 0 123456 45056000 2500 18446744073709551615 \
                    1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n";
        assert_eq!(
            parse_stat(text),
            Some(Stat {
                parent: 17,
                cpu_ticks: 30 + 12 + 5 + 3,
                start_ticks: 123_456,
                resident_pages: 2500,
            })
        );
        assert_eq!(parse_stat("4242 (short) S 1"), None);
    }

    #[test]
    fn this_process_is_read() {
        let figures = read(std::process::id());
        assert!(figures.processes >= 1);
        assert!(figures.open_fds >= 3 && figures.open_fds <= figures.max_fds);
        assert!(figures.resident_bytes > 1 << 20);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        assert!(
            figures.start_time_seconds > now - 3600.0 && figures.start_time_seconds <= now + 1.0
        );
    }

    #[test]
    fn a_child_is_counted_with_its_parent() {
        let me = std::process::id();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let found = tree(me, stat_of(me).unwrap());
        let _ = child.kill();
        let _ = child.wait();
        assert!(found.iter().any(|(pid, _)| *pid == child.id()), "{found:?}");
    }

    #[test]
    fn a_missing_process_reads_as_nothing() {
        // Above the largest pid Linux hands out (pid_max ≤ 2^22).
        let figures = read(u32::MAX - 1);
        assert_eq!(figures.processes, 0);
        assert!(figures.max_fds > 0);
    }
}
