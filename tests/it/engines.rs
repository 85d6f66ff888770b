//! What only some engines have: `mp`'s master (a killed worker is replaced, SIGTERM/SIGINT stop
//! every worker, it checks a reload once for all workers, the workers share one scoreboard),
//! `uring`'s fallback to `reactor` where the kernel refuses io_uring, helper processes, `tpc`'s
//! cap, pools that serve more connections than they have workers, and the engine keys of the
//! configuration file.
//! Processes are found through /proc; every wait is bounded.

use crate::support;

use std::process::Command;
use std::time::{Duration, Instant};
use support::*;

/// Children of `pid` (from /proc/PID/task/*/children).
fn children(pid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return found;
    };
    for task in tasks.flatten() {
        let list = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        found.extend(
            list.split_whitespace()
                .filter_map(|pid| pid.parse::<u32>().ok()),
        );
    }
    found.sort_unstable();
    found
}

/// Waits (bounded) until `pid` has `count` children; returns them.
fn wait_for_children(pid: u32, count: usize) -> Vec<u32> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let found = children(pid);
        if found.len() == count {
            return found;
        }
        assert!(
            Instant::now() < deadline,
            "expected {count} children of {pid}, found {found:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A process that exists and is not a zombie.
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|stat| {
            let state = stat[stat.rfind(')').unwrap_or(0) + 2..].chars().next();
            !matches!(state, Some('Z') | Some('X'))
        })
        .unwrap_or(false)
}

fn signal(pid: u32, name: &str) {
    let status = Command::new("kill")
        .args([&format!("-{name}"), &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -{name} {pid}");
}

fn cmdline(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|bytes| String::from_utf8_lossy(&bytes).replace('\0', " "))
        .unwrap_or_default()
}

#[test]
fn mp_replaces_a_killed_worker_and_keeps_serving() {
    let root = TempRoot::new();
    root.file("ok.txt", "ok");
    let server = Server::start(Options::new(root.path(), "mp").args(["--threads", "3"]));
    let workers = wait_for_children(server.pid(), 3);
    signal(workers[0], "KILL");
    // Every request is answered, whichever worker takes it, while the master replaces the dead one.
    for _ in 0..20 {
        assert_eq!(get(server.addr(), "/ok.txt").body, b"ok");
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let now = children(server.pid());
        if now.len() == 3 && !now.contains(&workers[0]) {
            break;
        }
        assert!(Instant::now() < deadline, "worker not replaced: {now:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        server
            .stderr()
            .contains(&format!("mp worker {} was killed by signal 9", workers[0])),
        "{}",
        server.stderr()
    );
    assert_eq!(get(server.addr(), "/ok.txt").body, b"ok");
}

fn mp_stops_every_worker_on(signal_name: &str) {
    let root = TempRoot::new();
    root.file("ok.txt", "ok");
    let mut server = Server::start(Options::new(root.path(), "mp").args(["--threads", "3"]));
    let workers = wait_for_children(server.pid(), 3);
    // A keep-alive connection held open must not keep a worker alive.
    let mut held = Conn::open(server.addr());
    assert_eq!(held.get("/ok.txt", &[]).body, b"ok");
    signal(server.pid(), signal_name);
    let deadline = Instant::now() + Duration::from_secs(8);
    while server.is_running() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        !server.is_running(),
        "master still running after SIG{signal_name}"
    );
    for worker in workers {
        assert!(
            !alive(worker),
            "worker {worker} outlived its master (SIG{signal_name})"
        );
    }
}

#[test]
fn mp_sigterm_stops_every_worker() {
    mp_stops_every_worker_on("TERM");
}

#[test]
fn mp_sigint_stops_every_worker() {
    mp_stops_every_worker_on("INT");
}

fn uring_falls_back(errno: &str) {
    let root = TempRoot::new();
    root.file("ok.txt", "ok");
    let server =
        Server::start(Options::new(root.path(), "uring").env("AMPD_TEST_DENY_IO_URING", errno));
    // stderr is collected by a thread of the harness: wait (bounded) for the line to arrive.
    let deadline = Instant::now() + Duration::from_secs(5);
    let stderr = loop {
        let stderr = server.stderr();
        if stderr.contains("reactor instead\n") || Instant::now() > deadline {
            break stderr;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let line = stderr
        .lines()
        .find(|line| line.contains("io_uring unavailable"))
        .unwrap_or_else(|| panic!("no fallback line on stderr: {stderr:?}"));
    assert!(
        line.starts_with(&format!("ampd: io_uring unavailable ({errno}")),
        "{line}"
    );
    assert!(line.ends_with("serving with reactor instead"), "{line}");
    assert!(
        server.ready_line().contains("arch reactor"),
        "{}",
        server.ready_line()
    );
    assert!(
        server.ready_line().contains("uring unavailable"),
        "{}",
        server.ready_line()
    );
    assert_eq!(get(server.addr(), "/ok.txt").body, b"ok");
}

#[test]
fn uring_falls_back_to_reactor_when_the_kernel_says_eperm() {
    uring_falls_back("EPERM");
}

#[test]
fn uring_falls_back_to_reactor_when_the_kernel_says_enosys() {
    uring_falls_back("ENOSYS");
}

#[test]
fn uring_runs_where_io_uring_works() {
    let root = TempRoot::new();
    root.file("ok.txt", "ok");
    let server = Server::start(Options::new(root.path(), "uring"));
    let disabled = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled")
        .map(|text| text.trim() != "0")
        .unwrap_or(false);
    if disabled || server.ready_line().contains("uring unavailable") {
        println!("io_uring unavailable here: {}", server.ready_line());
        assert!(server.ready_line().contains("arch reactor"));
    } else {
        assert!(
            server.ready_line().contains("arch uring"),
            "{}",
            server.ready_line()
        );
    }
    assert_eq!(get(server.addr(), "/ok.txt").body, b"ok");
}

#[test]
fn helper_processes_do_the_disk_work_and_are_replaced() {
    let root = TempRoot::new();
    for index in 0..20 {
        root.file(&format!("f{index}.txt"), format!("file {index}"));
    }
    let big = support::root::pattern_bytes(3 << 20, 5);
    root.file("big.bin", &big);
    let server = Server::start(Options::new(root.path(), "amped").args([
        "--helpers",
        "2",
        "--helpers-mode",
        "process",
    ]));
    assert!(
        server.ready_line().contains("2 helper processes"),
        "{}",
        server.ready_line()
    );
    let helpers = wait_for_children(server.pid(), 2);
    for helper in &helpers {
        // A child shows its own command line once it has run exec (bounded wait).
        let deadline = Instant::now() + Duration::from_secs(5);
        while !cmdline(*helper).contains("__helper") && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(
            cmdline(*helper).contains("__helper"),
            "{}",
            cmdline(*helper)
        );
    }
    let mut conn = Conn::open(server.addr());
    for index in 0..10 {
        assert_eq!(
            conn.get(&format!("/f{index}.txt"), &[]).body_text(),
            format!("file {index}")
        );
    }
    assert!(conn.get("/big.bin", &[]).body == big);
    assert_eq!(conn.get("/missing", &[]).status, 404);
    // A helper that dies costs at most the job it had; the next job starts another.
    signal(helpers[0], "KILL");
    for index in 10..20 {
        let response = conn.get(&format!("/f{index}.txt"), &[]);
        assert!(
            response.body_text() == format!("file {index}") || response.status == 500,
            "{response:?}"
        );
    }
    for index in 10..20 {
        assert_eq!(
            get(server.addr(), &format!("/f{index}.txt")).body_text(),
            format!("file {index}")
        );
    }
    let now = children(server.pid());
    assert_eq!(now.len(), 2, "{now:?}");
    assert!(!now.contains(&helpers[0]));
}

/// A helper process sends the ranges it reads (`job::send_or_touch`, over a socket passed
/// with `SCM_RIGHTS`). Killed in the middle of one, it may have sent any part of it: the
/// connection must end with what went out (a prefix of the body), never continue from a guess,
/// and the server goes on serving.
#[test]
fn a_helper_process_killed_while_sending_ends_only_its_connection() {
    let root = TempRoot::new();
    root.file("ok.txt", "ok");
    let source = root.outside_dir().join("slow-source");
    std::fs::create_dir_all(&source).unwrap();
    let data = support::root::pattern_bytes(4 << 20, 31);
    // slowfs delays files whose names start with "slow".
    std::fs::write(source.join("slow-big.bin"), &data).unwrap();
    let mountpoint = root.dir("fuse");
    // Each 128 KiB read takes 0.3 s: the 4 MiB body takes seconds, the kill lands in it.
    let Some(slowfs) = slowfs::mount_or_skip(&source, &mountpoint, "0.3") else {
        return;
    };
    let server = Server::start(Options::new(root.path(), "amped").args([
        "--helpers",
        "1",
        "--helpers-max",
        "1",
        "--helpers-mode",
        "process",
    ]));
    let helpers = wait_for_children(server.pid(), 1);
    let mut conn = Conn::open(server.addr());
    conn.set_read_timeout(Duration::from_secs(30));
    conn.send(support::http::build_request(
        "GET",
        "/fuse/slow-big.bin",
        &[],
    ));
    // Wait for the head and some of the body: the helper is then sending.
    let mut received = Vec::new();
    let mut chunk = [0u8; 16 << 10];
    let body_start = loop {
        let count = support::read_some(&mut conn.stream(), &mut chunk).expect("read");
        assert!(count > 0, "closed before any body");
        received.extend_from_slice(&chunk[..count]);
        if let Some(end) = support::http::find(&received, b"\r\n\r\n") {
            if received.len() > end + 4 {
                break end + 4;
            }
        }
    };
    assert!(received.starts_with(b"HTTP/1.1 200"));
    signal(helpers[0], "KILL");
    received.extend(conn.read_to_end().expect("read to the close"));
    let body = &received[body_start..];
    assert!(
        body.len() < data.len() && data.starts_with(body),
        "the body must stop at what was sent: {} of {} bytes, a prefix: {}",
        body.len(),
        data.len(),
        data.starts_with(body)
    );
    // Everyone else is served, disk work by a new helper process.
    assert_eq!(get(server.addr(), "/ok.txt").body, b"ok");
    let tail = request(
        server.addr(),
        "GET",
        "/fuse/slow-big.bin",
        &[("Range", "bytes=-100000")],
    );
    assert_eq!(tail.status, 206);
    assert!(tail.body == data[data.len() - 100_000..]);
    drop(server);
    drop(slowfs);
}

#[test]
fn tpc_cap_holds_new_connections_in_the_backlog() {
    let root = TempRoot::new();
    root.file("ok.txt", "ok");
    let server = Server::start(Options::new(root.path(), "tpc").args(["--threads", "2"]));
    let mut first = Conn::open(server.addr());
    let mut second = Conn::open(server.addr());
    assert_eq!(first.get("/ok.txt", &[]).body, b"ok");
    assert_eq!(second.get("/ok.txt", &[]).body, b"ok");
    // Both threads hold idle keep-alive connections: a third client is connected (backlog) but
    // not answered...
    let mut third = Conn::open(server.addr());
    third.send(support::http::build_request("GET", "/ok.txt", &[]));
    third.set_read_timeout(Duration::from_millis(500));
    assert!(
        third.try_read_response("GET").is_err(),
        "answered past the cap"
    );
    // ...until a thread is free.
    drop(first);
    third.set_read_timeout(Duration::from_secs(10));
    assert_eq!(third.read_response("GET").body, b"ok");
    assert_eq!(second.get("/ok.txt", &[]).body, b"ok");
}

for_each_arch!(fn more_connections_than_workers(arch) {
    // Two workers (threads, processes, loops), fifty clients that keep their connections open.
    let root = TempRoot::new();
    root.file("ok.txt", "ok");
    let threads = if arch == "tpc" { "64" } else { "2" };
    let server = Server::start(Options::new(root.path(), arch).args(["--threads", threads]));
    let mut conns: Vec<Conn> = (0..50).map(|_| Conn::open(server.addr())).collect();
    for round in 0..3 {
        for (index, conn) in conns.iter_mut().enumerate() {
            assert_eq!(conn.get("/ok.txt", &[]).body, b"ok", "round {round}, connection {index}");
        }
    }
});

/// Waits (bounded) until none of `pids` is alive.
fn all_gone_within(pids: &[u32], within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if pids.iter().all(|pid| !alive(*pid)) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[test]
fn workers_and_helper_processes_die_with_a_killed_server() {
    let root = TempRoot::new();
    root.file("ok.txt", "ok");
    let mut mp = Server::start(Options::new(root.path(), "mp").args(["--threads", "2"]));
    let mut amped = Server::start(Options::new(root.path(), "amped").args([
        "--helpers",
        "2",
        "--helpers-mode",
        "process",
    ]));
    let workers = wait_for_children(mp.pid(), 2);
    let helpers = wait_for_children(amped.pid(), 2);
    signal(mp.pid(), "KILL");
    signal(amped.pid(), "KILL");
    let deadline = Instant::now() + Duration::from_secs(5);
    while (mp.is_running() || amped.is_running()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    // Workers and helpers get SIGKILL from PR_SET_PDEATHSIG (they keep the server's signals
    // blocked); helpers also see their socket close.
    assert!(
        all_gone_within(&workers, Duration::from_secs(5)),
        "mp workers outlived a SIGKILLed master"
    );
    assert!(
        all_gone_within(&helpers, Duration::from_secs(5)),
        "helper processes outlived their server"
    );
}

/// `ampd run -c` with `head` (server-wide keys) and a site serving `www` with a status location.
fn run_with(root: &TempRoot, head: &str) -> Server {
    let path = root.outside_dir().join("ampd.toml");
    std::fs::write(
        &path,
        format!(
            "listen = \"127.0.0.1:0\"\n{head}\n[[site]]\nroot = \"www\"\n\n  [[site.location]]\n  path = \"/status\"\n  exact = true\n  handler = \"status\"\n"
        ),
    )
    .unwrap();
    Server::start(Options::config_file(&path))
}

#[test]
fn engine_keys_come_from_the_file() {
    let root = TempRoot::new();
    root.file("ok.txt", "ok");
    let cases = [
        (
            "arch = \"mp\"\nthreads = 3",
            "(arch mp, 3 worker processes, a cache each)",
        ),
        (
            "arch = \"mt\"\nthreads = 5",
            "(arch mt, 5 threads, one shared cache)",
        ),
        (
            "arch = \"tpc\"\nthreads = 7",
            "(arch tpc, a thread per connection, at most 7)",
        ),
        (
            "arch = \"amped\"\nhelpers = 2\nhelpers_mode = \"process\"",
            "(arch amped, 1 loop, 2 helper processes)",
        ),
    ];
    for (head, described) in cases {
        let server = run_with(&root, head);
        assert!(
            server.ready_line().ends_with(described),
            "{head}: {}",
            server.ready_line()
        );
        assert_eq!(get(server.addr(), "/ok.txt").body, b"ok");
        if head.starts_with("arch = \"mp\"") {
            wait_for_children(server.pid(), 3);
        }
        if head.contains("process") {
            let helpers = wait_for_children(server.pid(), 2);
            assert!(helpers.iter().all(|pid| cmdline(*pid).contains("__helper")));
        }
    }
}

/// The Prometheus sample `name` in `text`.
fn sample(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in:\n{text}"))
}

#[test]
fn mp_workers_share_one_scoreboard() {
    // Clients on three connections at once keep three workers busy; whichever worker answers
    // the status location counts every response of every worker.
    let root = TempRoot::new();
    root.file("ok.txt", "ok");
    let server = run_with(&root, "arch = \"mp\"\nthreads = 3");
    let addr = server.addr();
    let clients: Vec<_> = (0..3)
        .map(|_| {
            std::thread::spawn(move || {
                let mut conn = Conn::open(addr);
                for _ in 0..30 {
                    assert_eq!(conn.get("/ok.txt", &[]).body, b"ok");
                }
            })
        })
        .collect();
    for client in clients {
        client.join().unwrap();
    }
    for scrape in 0..5 {
        let text = get(addr, "/status").body_text();
        // 90 files, and the status responses before this one.
        let ok = sample(&text, "ampd_requests_total{class=\"2xx\"}");
        assert!(
            ok >= 90.0 + f64::from(scrape),
            "scrape {scrape}: {ok}\n{text}"
        );
        assert!(sample(&text, "ampd_connections_accepted_total") >= 3.0 + f64::from(scrape));
    }
}

#[test]
fn mp_master_checks_a_reload_once_for_all_workers() {
    let root = TempRoot::new();
    root.file("ok.txt", "one");
    let server = run_with(&root, "arch = \"mp\"\nthreads = 3");
    let path = root.outside_dir().join("ampd.toml");
    let good = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, good.replace("threads = 3", "threads = 3\nbogus = 1")).unwrap();
    signal(server.pid(), "HUP");
    assert!(server.wait_for_stderr("reload rejected", Duration::from_secs(5)));
    assert_eq!(get(server.addr(), "/ok.txt").body, b"one");
    // A good file reaches every worker: new connections, whichever worker takes them, see it.
    root.file("two/ok.txt", "two");
    std::fs::write(&path, good.replace("root = \"www\"", "root = \"www/two\"")).unwrap();
    signal(server.pid(), "HUP");
    assert!(server.wait_for_stderr("configuration reloaded", Duration::from_secs(5)));
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut seen = 0;
    while seen < 20 && Instant::now() < deadline {
        let conns: Vec<Conn> = (0..3).map(|_| Conn::open(server.addr())).collect();
        for mut conn in conns {
            if conn.get("/ok.txt", &[]).body == b"two" {
                seen += 1;
            } else {
                seen = 0;
            }
        }
    }
    assert!(seen >= 20, "not every worker took the reload");
    let stderr = server.stderr();
    assert_eq!(stderr.matches("reload rejected").count(), 1, "{stderr}");
    assert_eq!(
        stderr.matches("configuration reloaded").count(),
        1,
        "{stderr}"
    );
}
