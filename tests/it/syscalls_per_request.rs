//! The system calls a cached file costs on the event loops (AFPA's shortest path): asked for
//! again and again on one keep-alive connection, each response takes a read of the request, one
//! send of the head (with the body when it comes from the file cache), a `sendfile` when the
//! body comes from the page cache, and the loop's wait; nothing else per request. Counted with
//! `strace -c` attached to the running server (every thread: helpers and the log writer too).
//! `uring` sends such a body from its ring thread as well: io_uring's worker threads, which a
//! `splice` through them costs (measured 2.8 × `reactor`'s CPU per 100 KiB response), never
//! appear.

use crate::support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use support::*;

const REQUESTS: u64 = 200;
const SMALL: usize = 1 << 10;
const LARGE: usize = 300 << 10;

/// What one request may cost, per system call: the request's read, the send of the response,
/// the `sendfile` of a large body and the loop's wait for the next request.
const PER_REQUEST: &[&str] = &[
    "read",
    "recvfrom",
    "sendmsg",
    "sendto",
    "writev",
    "write",
    "sendfile",
    "epoll_wait",
    "epoll_pwait",
];

/// Calls outside `PER_REQUEST` allowed over the whole run (timers, a helper's wake-up, the
/// residency test of the large file once per `RESIDENCY_TRUST`): far fewer than one a request.
const OTHERS_ALLOWED: u64 = REQUESTS / 10;

/// `strace -f -c` attached to every thread of `pid`, ready once the kernel shows each thread
/// traced.
struct Tracer {
    child: Child,
    summary: std::path::PathBuf,
}

impl Tracer {
    fn attach(pid: u32, summary: &Path) -> Tracer {
        let mut child = Command::new("strace")
            .args(["-f", "-qq", "-c", "-U", "name,calls", "-o"])
            .arg(summary)
            .args(["-p", &pid.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("strace (scripts/test.sh installs it)");
        let deadline = Instant::now() + Duration::from_secs(10);
        while !all_threads_traced(pid) {
            if let Ok(Some(status)) = child.try_wait() {
                let mut said = String::new();
                if let Some(mut stderr) = child.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut stderr, &mut said);
                }
                panic!("strace could not attach to {pid} ({status}): {said}");
            }
            assert!(Instant::now() < deadline, "strace did not attach to {pid}");
            thread::sleep(Duration::from_millis(10));
        }
        Tracer {
            child,
            summary: summary.to_path_buf(),
        }
    }

    /// Detaches and returns the calls per system call name.
    fn finish(mut self) -> BTreeMap<String, u64> {
        let status = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success());
        self.child.wait().expect("strace exits");
        let text = std::fs::read_to_string(&self.summary).expect("strace's summary");
        text.lines()
            .filter_map(|line| {
                let mut words = line.split_whitespace();
                let name = words.next()?;
                let calls = words.next()?.parse::<u64>().ok()?;
                (name != "total").then(|| (name.to_string(), calls))
            })
            .collect()
    }
}

fn all_threads_traced(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.filter_map(Result::ok).all(|task| {
        std::fs::read_to_string(task.path().join("status"))
            .ok()
            .and_then(|status| {
                status
                    .lines()
                    .find_map(|line| line.strip_prefix("TracerPid:"))
                    .map(|value| value.trim() != "0")
            })
            .unwrap_or(false)
    })
}

/// Counts the server's system calls over `REQUESTS` requests for files it has cached.
fn calls_for_cached_files(arch: &str) -> BTreeMap<String, u64> {
    let root = TempRoot::new();
    let small = vec![b's'; SMALL];
    let large = vec![b'l'; LARGE];
    root.file("small.bin", &small);
    root.file("large.bin", &large);
    let server = Server::start(Options::new(root.path(), arch));
    let mut conn = Conn::open(server.addr());
    for _ in 0..3 {
        assert_eq!(conn.get("/small.bin", &[]).body, small);
        assert_eq!(conn.get("/large.bin", &[]).body, large);
    }
    let tracer = Tracer::attach(server.pid(), &root.outside_dir().join("strace.txt"));
    for _ in 0..REQUESTS / 2 {
        assert_eq!(conn.get("/small.bin", &[]).body, small);
        assert_eq!(conn.get("/large.bin", &[]).body, large);
    }
    tracer.finish()
}

#[test]
fn a_cached_file_costs_the_event_loops_a_read_a_send_and_a_wait() {
    for arch in ["amped", "reactor", "sped"] {
        let calls = calls_for_cached_files(arch);
        let others: u64 = calls
            .iter()
            .filter(|(name, _)| !PER_REQUEST.contains(&name.as_str()))
            .map(|(_, count)| count)
            .sum();
        assert!(
            others <= OTHERS_ALLOWED,
            "{arch}: {others} calls beside the per-request ones over {REQUESTS} requests: {calls:?}"
        );
        for name in PER_REQUEST {
            let count = calls.get(*name).copied().unwrap_or(0);
            assert!(
                count <= REQUESTS + OTHERS_ALLOWED,
                "{arch}: {count} × {name} over {REQUESTS} requests: {calls:?}"
            );
        }
    }
}

/// io_uring's worker threads of `pid` (`iou-wrk-*` in its task list: `strace` cannot see their
/// calls, the task list can).
fn io_workers(pid: u32) -> Vec<String> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .filter_map(Result::ok)
        .filter_map(|task| std::fs::read_to_string(task.path().join("comm")).ok())
        .map(|name| name.trim().to_string())
        .filter(|name| name.starts_with("iou-wrk"))
        .collect()
}

#[test]
fn uring_sends_a_resident_file_without_io_urings_workers() {
    let root = TempRoot::new();
    let large = vec![b'l'; LARGE];
    root.file("large.bin", &large);
    let server = Server::start(Options::new(root.path(), "uring"));
    if server.ready_line().contains("uring unavailable") {
        println!("io_uring unavailable here: {}", server.ready_line());
        return;
    }
    let mut conn = Conn::open(server.addr());
    // An idle worker lives for seconds after its last job, so looking every few requests sees
    // any that one of them started.
    let mut seen = Vec::new();
    for request in 0..REQUESTS {
        assert_eq!(conn.get("/large.bin", &[]).body, large);
        if request % 10 == 9 {
            seen.extend(io_workers(server.pid()));
        }
    }
    seen.sort();
    seen.dedup();
    assert!(
        seen.is_empty(),
        "{REQUESTS} responses of a resident file went through io_uring's workers: {seen:?}"
    );
}
