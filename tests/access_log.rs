//! The access log over real traffic: after a run under load with a `SIGUSR1` rotation in the
//! middle (logrotate's rename-then-signal), the old and new files together hold exactly one
//! line per response sent; the three formats; and the error log going to a file.

mod support;

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

for_each_arch!(fn json_lines_parse_and_errors_go_to_their_file(arch) {
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
