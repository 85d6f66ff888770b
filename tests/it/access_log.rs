//! The access log over real traffic: after a run under load with a `SIGUSR1` rotation in the
//! middle (logrotate's rename-then-signal), the old and new files together hold exactly one
//! line per response sent; the three formats; and the error log going to a file.

use crate::support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};
use support::*;

fn count_lines(path: &std::path::Path) -> usize {
    std::fs::read_to_string(path).map_or(0, |text| text.lines().count())
}

for_each_arch!(fn one_line_per_response_across_a_rotation(arch) {
    let root = TempRoot::new();
    root.file("a.txt", "a");
    root.file("big.bin", support::root::pattern_bytes(200 << 10, 1));
    let log = root.outside_dir().join("access.log");
    let rotated = root.outside_dir().join("access.log.1");
    let config = write_config(&root, arch, "[log]\naccess = \"access.log\"\nformat = \"combined\"\n[[site]]\nroot = \"www\"\n");
    let mut server = Server::start(Options::config_file(&config));
    let addr = server.addr();
    let responses = Arc::new(AtomicUsize::new(0));
    let run_clients = |rounds: usize| {
        let clients: Vec<_> = (0..4)
            .map(|client| {
                let responses = responses.clone();
                thread::spawn(move || {
                    let mut conn = Conn::open(addr);
                    for round in 0..rounds {
                        let path = match (client + round) % 5 {
                            0 => "/big.bin",
                            1 => "/missing",
                            _ => "/a.txt",
                        };
                        let response = conn.get(path, &[("User-Agent", "test \"agent\"")]);
                        assert!(response.status == 200 || response.status == 404);
                        responses.fetch_add(1, Ordering::Relaxed);
                        if response.connection_has("close") {
                            conn = Conn::open(addr);
                        }
                    }
                    // A response the server sends without a request: a malformed one.
                    let raw = send_raw(addr, "GARBAGE\r\n\r\n");
                    assert!(raw.starts_with(b"HTTP/1.1 400"));
                    responses.fetch_add(1, Ordering::Relaxed);
                })
            })
            .collect();
        for client in clients {
            client.join().unwrap();
        }
    };
    run_clients(150);
    // Loops hand their lines to the log thread a few times a second; wait until some reached
    // the file, so that the rotation really splits the log.
    let deadline = Instant::now() + Duration::from_secs(5);
    while count_lines(&log) == 0 && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(10));
    }
    // logrotate: rename, then USR1; lines buffered before the signal may land in either file.
    std::fs::rename(&log, &rotated).unwrap();
    server.signal("USR1");
    assert!(server.wait_for_stderr("logs reopened", Duration::from_secs(5)));
    run_clients(150);
    server.signal("TERM");
    assert_eq!(server.wait_exit(Duration::from_secs(10)), Some(0));
    let total = responses.load(Ordering::Relaxed);
    assert_eq!(total, 2 * 4 * 151);
    let (old, new) = (count_lines(&rotated), count_lines(&log));
    assert_eq!(old + new, total, "old file {old} + new file {new} lines");
    assert!(new > 0 && old > 0, "both files written: {old} / {new}");
    let text = std::fs::read_to_string(&log).unwrap();
    let line = text.lines().find(|line| line.contains("/a.txt")).unwrap();
    assert!(line.starts_with("127.0.0.1 - - ["), "{line}");
    assert!(line.ends_with("\"GET /a.txt HTTP/1.1\" 200 1 \"-\" \"test \\\"agent\\\"\""), "{line}");
    assert!(text.contains("\"-\" 400 "), "the malformed request is logged");
});

default_arch!(fn json_lines_parse_and_errors_go_to_their_file(arch) {
    let root = TempRoot::new();
    root.file("a.txt", "abc");
    let log = root.outside_dir().join("access.json");
    let errors = root.outside_dir().join("error.log");
    let config = write_config(
        &root,
        arch,
        "[log]\naccess = \"access.json\"\nformat = \"json\"\nerror = \"error.log\"\nlevel = \"info\"\n[[site]]\nroot = \"www\"\n",
    );
    let mut server = Server::start(Options::config_file(&config));
    let addr = server.addr();
    get(addr, "/a.txt");
    request(addr, "HEAD", "/a.txt", &[("Referer", "http://r/\"q\"\\")]);
    let missing = get(addr, "/nope").body.len();
    server.signal("TERM");
    assert_eq!(server.wait_exit(Duration::from_secs(10)), Some(0));
    let check = std::process::Command::new("python3")
        .args([
            "-c",
            // Sorted: each loop, thread or process writes its own lines in order, and
            // different ones' lines meet in the file in the order they were handed over.
            "import json,sys\nrows=[json.loads(l) for l in open(sys.argv[1])]\nprint(';'.join(sorted(f\"{r['method']} {r['uri']} {r['status']} {r['bytes']} {r['referer']!r}\" for r in rows)))",
            &log.display().to_string(),
        ])
        .output()
        .expect("python3");
    let out = String::from_utf8_lossy(&check.stdout);
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
    assert_eq!(
        out.trim(),
        format!("GET /a.txt 200 3 None;GET /nope 404 {missing} None;HEAD /a.txt 200 0 'http://r/\"q\"\\\\'")
    );
    let error_text = std::fs::read_to_string(&errors).unwrap();
    assert!(error_text.contains("[info] graceful stop"), "{error_text}");
    assert!(
        !server.stderr().contains("graceful stop"),
        "errors go to the file, not stderr"
    );
});

for_each_arch!(fn logging_off_writes_nothing_and_reload_turns_it_on(arch) {
    let root = TempRoot::new();
    root.file("a.txt", "a");
    let log = root.outside_dir().join("later.log");
    let config = write_config(&root, arch, "[[site]]\nroot = \"www\"\n");
    let mut server = Server::start(Options::config_file(&config));
    get(server.addr(), "/a.txt");
    write_config(
        &root,
        arch,
        "[log]\naccess = \"later.log\"\nformat = \"common\"\n[[site]]\nroot = \"www\"\n",
    );
    server.signal("HUP");
    assert!(server.wait_for_stderr("access log on", Duration::from_secs(5)));
    let started = Instant::now();
    for _ in 0..3 {
        get(server.addr(), "/a.txt");
    }
    server.signal("TERM");
    assert_eq!(server.wait_exit(Duration::from_secs(10)), Some(0));
    assert_eq!(
        count_lines(&log),
        3,
        "only requests after the reload ({:?})",
        started.elapsed()
    );
});

/// Starts `ampd ARGS` with `stdout` and `stderr` as given; returns the child.
fn spawn_with_streams(
    args: &[&str],
    stdout: std::process::Stdio,
    stderr: std::process::Stdio,
) -> std::process::Child {
    std::process::Command::new(support::server::binary())
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        .spawn()
        .expect("spawn ampd")
}

/// Reads lines from `reader` (bounded by `within`) until one contains `needle`; every line read.
fn lines_until(
    reader: &mut impl std::io::BufRead,
    needle: &str,
    within: Duration,
) -> Result<Vec<String>, Vec<String>> {
    let deadline = Instant::now() + within;
    let mut seen = Vec::new();
    while Instant::now() < deadline {
        let mut line = String::new();
        match reader.read_line(&mut line) {
            Ok(0) => return Err(seen),
            Ok(_) => {
                let found = line.contains(needle);
                seen.push(line);
                if found {
                    return Ok(seen);
                }
            }
            Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {
                thread::sleep(Duration::from_millis(10));
            }
            Err(error) if error.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => return Err(seen),
        }
    }
    Err(seen)
}

/// systemd hands a service a socket to the journal as its standard output: `access =
/// "/dev/stdout"` writes to that descriptor (it cannot be opened again by path: ENXIO), and
/// `SIGUSR1` leaves it as it is.
#[test]
fn dev_stdout_is_the_inherited_descriptor_even_when_it_is_a_socket() {
    use std::os::unix::net::UnixStream;
    let root = TempRoot::new();
    root.file("a.txt", "alpha");
    let config = write_config(
        &root,
        "reactor",
        "[log]\naccess = \"/dev/stdout\"\nformat = \"common\"\n[[site]]\nroot = \"www\"\n",
    );
    let (ours, theirs) = UnixStream::pair().expect("a socket pair");
    ours.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut child = spawn_with_streams(
        &["run", "-c", &config.display().to_string()],
        std::process::Stdio::from(std::os::fd::OwnedFd::from(theirs)),
        std::process::Stdio::piped(),
    );
    let mut reader = std::io::BufReader::new(ours);
    let ready = match lines_until(&mut reader, "serving", Duration::from_secs(10)) {
        Ok(lines) => lines.last().cloned().unwrap_or_default(),
        Err(lines) => {
            let _ = child.kill();
            let output = child.wait_with_output().expect("collect ampd's stderr");
            panic!(
                "no ready line on the socket: {lines:?}; stderr: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
    };
    let addr = support::server::parse_ready_line(ready.trim()).expect(&ready);
    assert_eq!(get(addr, "/a.txt").status, 200);
    let first = lines_until(
        &mut reader,
        "\"GET /a.txt HTTP/1.1\" 200 5",
        Duration::from_secs(5),
    );
    assert!(first.is_ok(), "no access line on the socket: {first:?}");
    support::processes::signal("USR1", child.id(), false);
    assert_eq!(get(addr, "/a.txt?after").status, 200);
    let after = lines_until(
        &mut reader,
        "\"GET /a.txt?after HTTP/1.1\" 200",
        Duration::from_secs(5),
    );
    support::processes::signal("TERM", child.id(), false);
    let _ = child.wait();
    assert!(after.is_ok(), "no access line after SIGUSR1: {after:?}");
}

/// `ampd serve --access-log - >out 2>&1`: standard output and error share one open file (one
/// offset); access lines written through the inherited descriptor interleave with the error
/// log's lines instead of overwriting them.
#[test]
fn access_log_dash_shares_the_file_with_standard_error() {
    let root = TempRoot::new();
    root.file("a.txt", "alpha");
    let out_path = root.outside_dir().join("out.log");
    let out = std::fs::File::create(&out_path).expect("create out.log");
    let dir = root.path().display().to_string();
    let mut child = spawn_with_streams(
        &[
            "serve",
            &dir,
            "--listen",
            "127.0.0.1:0",
            "--access-log",
            "-",
            "--log-format",
            "common",
        ],
        std::process::Stdio::from(out.try_clone().unwrap()),
        std::process::Stdio::from(out),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    let addr = loop {
        let text = std::fs::read_to_string(&out_path).unwrap_or_default();
        if let Some(addr) = text.lines().find_map(support::server::parse_ready_line) {
            break addr;
        }
        assert!(
            Instant::now() < deadline,
            "no ready line in out.log: {text}"
        );
        thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(get(addr, "/a.txt").status, 200);
    assert_eq!(get(addr, "/missing").status, 404);
    let deadline = Instant::now() + Duration::from_secs(5);
    while !std::fs::read_to_string(&out_path)
        .unwrap_or_default()
        .contains("/missing")
    {
        assert!(Instant::now() < deadline, "the access lines never came");
        thread::sleep(Duration::from_millis(10));
    }
    support::processes::signal("TERM", child.id(), false);
    let status = child.wait().expect("wait for ampd");
    assert!(status.success(), "{status:?}");
    let text = std::fs::read_to_string(&out_path).unwrap();
    for needle in [
        "serving",
        "\"GET /a.txt HTTP/1.1\" 200 5",
        "\"GET /missing HTTP/1.1\" 404",
        "graceful stop",
        "[info] stopped",
    ] {
        assert!(
            text.contains(needle),
            "{needle:?} missing from out.log:\n{text}"
        );
    }
}
