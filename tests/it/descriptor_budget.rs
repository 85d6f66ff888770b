//! The caches hold open files, and every one is a descriptor: they must stay within a share of
//! `RLIMIT_NOFILE` kept apart from what connections need, so that no number of distinct files
//! requested can leave the server unable to open the next one (issue 15, finding 1) or kill its
//! helper processes (finding 2).

use crate::support;

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};
use support::http::build_request;
use support::*;

/// `count` small files `many/0.txt` … below `root`, and `/hello.txt`.
fn distinct_files(root: &TempRoot, count: usize) {
    root.file("hello.txt", "hello\n");
    root.dir("many");
    for index in 0..count {
        root.file(&format!("many/{index}.txt"), format!("file {index}\n"));
    }
}

/// How many responses had each status.
fn tally(statuses: impl IntoIterator<Item = u16>) -> BTreeMap<u16, usize> {
    let mut counts = BTreeMap::new();
    for status in statuses {
        *counts.entry(status).or_insert(0) += 1;
    }
    counts
}

/// Child processes of `pid` (helper processes).
fn helper_processes(pid: u32) -> usize {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .filter_map(Result::ok)
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .map(|children| children.split_whitespace().count())
        .sum()
}

/// The lowest descriptor number the process does not use.
fn lowest_free_descriptor(pid: u32) -> usize {
    let used: std::collections::BTreeSet<usize> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("read /proc/PID/fd")
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    (0..).find(|number| !used.contains(number)).unwrap_or(0)
}

/// Descriptors the process holds now.
fn open_descriptors(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(Iterator::count)
        .unwrap_or(0)
}

// The reproduction: `(ulimit -n 256; exec ampd serve DIR)`, each of 500 files on its
// own connection, then a file requested before: every answer is 200.
for_each_arch!(fn a_small_descriptor_limit_serves_every_file(arch) {
    let root = TempRoot::new();
    distinct_files(&root, 500);
    let server = Server::start(
        Options::new(root.path(), arch).wrapped(["prlimit", "--nofile=256:256", "--"]),
    );
    assert_eq!(get(server.addr(), "/hello.txt").status, 200);
    let statuses = tally((0..500).map(|index| get(server.addr(), &format!("/many/{index}.txt")).status));
    assert_eq!(statuses, BTreeMap::from([(200, 500)]), "{arch}: 500 distinct files under a limit of 256");
    let again = get(server.addr(), "/hello.txt");
    assert_eq!(again.status, 200, "{arch}: a file served before");
    assert_eq!(again.body_text(), "hello\n");
    // And twice over, so the files evicted first are opened again.
    let statuses = tally((0..500).map(|index| get(server.addr(), &format!("/many/{index}.txt")).status));
    assert_eq!(statuses, BTreeMap::from([(200, 500)]), "{arch}: the same files again");
    assert!(
        open_descriptors(server.pid()) < 256,
        "{arch}: {} descriptors open",
        open_descriptors(server.pid())
    );
});

/// The Lua script that makes wrk ask for `count` distinct files in turn.
fn wrk_script(root: &TempRoot, count: usize) -> std::path::PathBuf {
    let script = root.outside_file(
        "distinct.lua",
        format!(
            "local index = 0\n\
             request = function()\n\
             \x20 index = (index + 1) % {count}\n\
             \x20 return wrk.format(nil, \"/many/\" .. index .. \".txt\")\n\
             end\n"
        ),
    );
    script
}

/// wrk's figures for one run: requests, responses that were not 2xx/3xx, socket errors.
#[derive(Debug, Default)]
struct WrkRun {
    requests: u64,
    not_ok: u64,
    socket_errors: u64,
}

fn parse_wrk(output: &str) -> WrkRun {
    let mut run = WrkRun::default();
    for line in output.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("Non-2xx or 3xx responses:") {
            run.not_ok = rest.trim().parse().unwrap_or(u64::MAX);
        } else if let Some(rest) = line.strip_prefix("Socket errors:") {
            run.socket_errors = rest
                .split(',')
                .filter_map(|part| part.split_whitespace().last()?.parse::<u64>().ok())
                .sum();
        } else if line.contains("requests in") {
            run.requests = line
                .split_whitespace()
                .next()
                .and_then(|count| count.parse().ok())
                .unwrap_or(0);
        }
    }
    run
}

/// 20,000 distinct files under wrk at the machine's own descriptor limit, for `seconds`: no
/// response other than 200, no socket error, the descriptors held stay below the limit, and a
/// new connection is served at once afterwards.
fn distinct_files_under_load(arch: &str, seconds: u32) {
    const FILES: usize = 20_000;
    let root = TempRoot::new();
    distinct_files(&root, FILES);
    let script = wrk_script(&root, FILES);
    let server = Server::start(Options::new(root.path(), arch));
    let limit: usize = std::fs::read_to_string(format!("/proc/{}/limits", server.pid()))
        .expect("read /proc/PID/limits")
        .lines()
        .find(|line| line.starts_with("Max open files"))
        .and_then(|line| line.split_whitespace().nth(3)?.parse().ok())
        .expect("Max open files");
    let output = Command::new("wrk")
        .args([
            "-t",
            "2",
            "-c",
            "64",
            "-d",
            &format!("{seconds}s"),
            "--timeout",
            "5s",
            "-s",
        ])
        .arg(&script)
        .arg(format!("http://{}/", server.addr()))
        .output()
        .expect("run wrk (Debian package wrk; scripts/test.sh installs it)");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "wrk failed: {text}");
    let run = parse_wrk(&text);
    let held = open_descriptors(server.pid());
    assert!(
        run.requests > 1000,
        "{arch}: too few requests to tell: {text}"
    );
    assert_eq!(
        run.not_ok,
        0,
        "{arch}: responses other than 2xx/3xx\n{text}\n{}",
        server.stderr()
    );
    assert_eq!(run.socket_errors, 0, "{arch}: socket errors\n{text}");
    assert!(held < limit, "{arch}: {held} descriptors open of {limit}");
    // New connections are taken at once, and an earlier file is still served.
    let started = Instant::now();
    let response = get(server.addr(), "/hello.txt");
    assert_eq!(response.status, 200);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{arch}: a new connection waited"
    );
    let log = server.stderr();
    let lines = log.lines().count();
    assert!(lines < 50, "{arch}: {lines} lines in the error log:\n{log}");
    if arch.contains("process") {
        assert!(!log.contains("helper process failed"), "{arch}:\n{log}");
        assert!(
            helper_processes(server.pid()) > 0,
            "{arch}: no helper process left"
        );
    }
}

#[test]
fn distinct_files_under_wrk_at_the_default_limit() {
    distinct_files_under_load("reactor", 8);
}

#[test]
fn distinct_files_under_wrk_with_helper_processes() {
    distinct_files_under_load("reactor --helpers-mode process", 8);
}

// A limit lowered under a running server (as `prlimit --pid` does) leaves the caches holding
// more than the process may: opening then fails with EMFILE, and the caches let go of files
// and the translation is tried again. Every file is served, and the error log says so once,
// not once per request.
for_each_arch!(fn running_out_of_descriptors_evicts_and_retries(arch) {
    let root = TempRoot::new();
    distinct_files(&root, 300);
    let server = Server::start(Options::new(root.path(), arch));
    // Served once: the loops are running and their caches sized for the limit they started
    // with (the ready line comes before them).
    assert_eq!(get(server.addr(), "/hello.txt").status, 200);
    let limit = Command::new("prlimit")
        .args(["--pid", &server.pid().to_string(), "--nofile=96:96"])
        .status()
        .expect("run prlimit (util-linux)");
    assert!(limit.success(), "prlimit failed");
    let statuses = tally((0..300).map(|index| get(server.addr(), &format!("/many/{index}.txt")).status));
    assert_eq!(statuses, BTreeMap::from([(200, 300)]), "{arch}: 300 files with 96 descriptors");
    assert_eq!(get(server.addr(), "/hello.txt").status, 200);
    // mp's workers are other processes, whose limit stayed as it was.
    if arch != "mp" {
        assert!(
            server.wait_for_stderr("out of file descriptors", Duration::from_secs(5)),
            "{arch}: exhaustion not logged:\n{}",
            server.stderr()
        );
    }
    let log = server.stderr();
    let reports = log.matches("out of file descriptors").count();
    if arch.contains("process") {
        // Helper processes survive: their answers' files were cut off, not their lives.
        assert!(!log.contains("helper process failed"), "{arch}:\n{log}");
        assert!(helper_processes(server.pid()) > 0, "{arch}: no helper process left");
    }
    assert!(reports <= 3, "{arch}: exhaustion logged {reports} times:\n{log}");
});

// The cache holds most of the descriptors when the limit drops under the server: `accept`
// fails with EMFILE, and the caches let go of files so that the waiting client is taken
// (without that, it waits in the backlog for as long as the cache holds its files).
for_each_arch!(fn a_full_cache_does_not_keep_new_connections_waiting(arch) {
    let root = TempRoot::new();
    distinct_files(&root, 120);
    let server = Server::start(Options::new(root.path(), arch));
    // One connection for every request, held open: the cached files take the numbers after
    // its socket's, with no free number left among them.
    let mut first = Conn::open(server.addr());
    for index in 0..120 {
        assert_eq!(first.get(&format!("/many/{index}.txt"), &[]).status, 200);
    }
    // A new descriptor takes the lowest free number, and fails with EMFILE unless that is
    // below the limit: with the limit at the lowest free number, nothing more can be opened
    // or accepted until the caches close files (which hold numbers below it).
    let limit = lowest_free_descriptor(server.pid());
    let limit = Command::new("prlimit")
        .args(["--pid", &server.pid().to_string(), &format!("--nofile={limit}:{limit}")])
        .status()
        .expect("run prlimit (util-linux)");
    assert!(limit.success(), "prlimit failed");
    let started = Instant::now();
    let mut conn = Conn::open(server.addr());
    conn.set_read_timeout(Duration::from_secs(5));
    conn.send(build_request("GET", "/many/0.txt", &[]));
    let response = conn.try_read_response("GET");
    assert!(
        matches!(&response, Ok(response) if response.status == 200),
        "{arch}: a new connection at the limit: {response:?} after {:?}",
        started.elapsed()
    );
    drop(first);
});

// Helper processes under descriptor pressure (finding 2): with every descriptor number below
// the limit in use, the helper processes are killed. Replacing them may fail (no descriptor
// for the socket pair): their threads then do the jobs themselves and try again a second
// later, so every request is answered, the error log gets a few lines rather than one per
// job, and helper processes are running again once the caches have let go of files.
#[test]
fn helper_processes_come_back_after_descriptor_pressure() {
    let arch = "amped --helpers-mode process";
    let root = TempRoot::new();
    distinct_files(&root, 320);
    let server = Server::start(Options::new(root.path(), arch));
    let mut first = Conn::open(server.addr());
    for index in 0..120 {
        assert_eq!(first.get(&format!("/many/{index}.txt"), &[]).status, 200);
    }
    let limit = lowest_free_descriptor(server.pid());
    let limited = Command::new("prlimit")
        .args([
            "--pid",
            &server.pid().to_string(),
            &format!("--nofile={limit}:{limit}"),
        ])
        .status()
        .expect("run prlimit (util-linux)");
    assert!(limited.success(), "prlimit failed");
    for helper in helper_pids(server.pid()) {
        let killed = Command::new("kill")
            .args(["-KILL", &helper.to_string()])
            .status();
        assert!(
            killed.is_ok_and(|status| status.success()),
            "kill helper {helper}"
        );
    }
    let statuses =
        tally((120..320).map(|index| first.get(&format!("/many/{index}.txt"), &[]).status));
    assert_eq!(
        statuses,
        BTreeMap::from([(200, 200)]),
        "{}",
        server.stderr()
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while helper_pids(server.pid()).is_empty() {
        assert!(
            Instant::now() < deadline,
            "no helper process came back:\n{}",
            server.stderr()
        );
        assert_eq!(first.get("/hello.txt", &[]).status, 200);
        std::thread::sleep(Duration::from_millis(50));
    }
    let log = server.stderr();
    let lines = log
        .lines()
        .filter(|line| line.contains("helper process"))
        .count();
    assert!(lines <= 6, "{lines} lines about helper processes:\n{log}");
}

/// The helper processes of `pid` (its children).
fn helper_pids(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .filter_map(Result::ok)
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|children| {
            children
                .split_whitespace()
                .filter_map(|child| child.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

/// What became of one client of `proxied_load_under_a_small_descriptor_limit`.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Outcome {
    Status(u16),
    /// `503` without `Retry-After`.
    Unavailable503WithoutRetryAfter,
    /// Closed without an answer: admission drops what is far past its cap.
    Closed,
}

// Issue 35, item 19: `ulimit -n 256` and 200 clients at once, each proxied (the upstream holds
// every answer 200 ms, so all are in flight together; `mt`, whose threads serve one connection
// at a time, takes 200 x 200 ms / 8 threads). A proxied connection holds two descriptors, its
// client's and its upstream's: the connection cap counts both, and says so at start; a client
// past it gets `503` with `Retry-After` (or, far past it, a close), never a `502` because the
// upstream socket could not be made.
for_each_arch!(fn proxied_load_under_a_small_descriptor_limit(arch) {
    use support::proxy::{location, pool};
    use support::upstream::{RawUpstream, Reply};
    const CLIENTS: usize = 200;
    let root = TempRoot::new();
    let upstream = RawUpstream::start(|_| {
        Reply::Delay(Duration::from_millis(200), Box::new(Reply::ok("app", "ok")))
    });
    let config = write_config(
        &root,
        arch,
        &format!(
            "{}\n[[site]]\nroot = \"www\"\n\n{}",
            pool("app", &[upstream.addr()], "max_fails = 0\ntries = 1"),
            location("/", "app", "")
        ),
    );
    let server = Server::start(
        Options::config_file(&config).wrapped(["prlimit", "--nofile=256:256", "--"]),
    );
    let mut clients: Vec<std::net::TcpStream> = (0..CLIENTS)
        .map(|index| {
            let mut stream = std::net::TcpStream::connect(server.addr()).expect("connect");
            stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            // A refused or dropped client may be gone before its request is written.
            let _ = std::io::Write::write_all(&mut stream, &build_request("GET", &format!("/{index}"), &[("Connection", "close")]));
            stream
        })
        .collect();
    let outcomes = tally_outcomes(clients.iter_mut().map(|stream| {
        let mut wire = Vec::new();
        let _ = std::io::Read::read_to_end(stream, &mut wire);
        let text = String::from_utf8_lossy(&wire);
        match text.split_whitespace().nth(1).and_then(|code| code.parse().ok()) {
            None => Outcome::Closed,
            Some(503) if !text.to_ascii_lowercase().contains("\r\nretry-after:") => {
                Outcome::Unavailable503WithoutRetryAfter
            }
            Some(status) => Outcome::Status(status),
        }
    }));
    let log = server.stderr();
    assert!(
        outcomes.keys().all(|outcome| matches!(outcome, Outcome::Status(200 | 503) | Outcome::Closed)),
        "{arch}: {outcomes:?}\n{log}"
    );
    assert!(outcomes.contains_key(&Outcome::Status(200)), "{arch}: {outcomes:?}\n{log}");
    assert!(
        log.contains("2 descriptors each"),
        "{arch}: the effective cap is not logged at start:\n{log}"
    );
    assert_eq!(get(server.addr(), "/after").status, 200, "{arch}: still serving");
});

fn tally_outcomes(outcomes: impl IntoIterator<Item = Outcome>) -> BTreeMap<Outcome, usize> {
    let mut counts = BTreeMap::new();
    for outcome in outcomes {
        *counts.entry(outcome).or_insert(0) += 1;
    }
    counts
}
