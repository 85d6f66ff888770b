//! The command line end to end: a usage mistake is clap's message and exit status 2, a failure
//! (a target that is not there, an unreadable log) one clear line and exit status 1; file sets
//! are created; a replay sends the logged paths in order; targets interleave; plot and compare
//! read the JSON back.

mod support;

use support::{ampd_bench, assert_succeeded, json, log_line, temp_dir, BrokenServer};

/// Runs ampd-bench expecting a usage mistake: exit 2 and clap's message; returns stderr.
fn usage_mistake(arguments: &[&str]) -> String {
    let output = ampd_bench(arguments);
    assert_eq!(output.status.code(), Some(2), "{arguments:?}");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(stderr.contains("Usage: ampd-bench"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    stderr
}

/// Runs ampd-bench expecting failure; returns its one line of stderr.
fn fails(arguments: &[&str]) -> String {
    let output = ampd_bench(arguments);
    assert_eq!(output.status.code(), Some(1), "{arguments:?}");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(stderr.lines().count(), 1, "{arguments:?}: {stderr}");
    assert!(stderr.starts_with("ampd-bench: "), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    stderr
}

#[test]
fn bad_input_is_one_line_and_a_non_zero_exit() {
    let dir = temp_dir("bad-input");
    let malformed = dir.join("malformed.log");
    std::fs::write(
        &malformed,
        format!("{}not a log line at all\n", log_line("/a", 200, 1)),
    )
    .unwrap();
    let server = BrokenServer::start();
    let url = server.url("/");
    let closed_port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let unreachable = format!("gone=http://127.0.0.1:{closed_port}/");
    let mistakes: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["dance", "--target", &url],
            "unrecognized subcommand 'dance'",
        ),
        (
            vec!["file", "--target", &url, "--frobnicate"],
            "unexpected argument '--frobnicate'",
        ),
        (vec![], "Commands:"),
    ];
    for (arguments, expected) in mistakes {
        let stderr = usage_mistake(&arguments);
        assert!(stderr.contains(expected), "{arguments:?}: {stderr}");
    }
    // `--version` is clap's (it was taken for an unknown workload).
    let output = ampd_bench(&["--version"]);
    assert!(output.status.success());
    assert!(String::from_utf8_lossy(&output.stdout).starts_with("ampd-bench 0.1.0"));
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["file", "--target", &unreachable],
            "target gone (127.0.0.1:",
        ),
        (
            vec![
                "replay",
                "--target",
                &url,
                "--log",
                "/nonexistent/access.log",
            ],
            "cannot read log /nonexistent/access.log",
        ),
        (
            vec!["replay", "--target", &url, "--log", dir.to_str().unwrap()],
            "cannot read log",
        ),
        (
            vec![
                "replay",
                "--target",
                &url,
                "--log",
                malformed.to_str().unwrap(),
            ],
            "log line 2 is not Common or Combined Log Format",
        ),
        (
            vec!["file", "--target", "ftp://127.0.0.1/"],
            "only http:// URLs",
        ),
        (
            vec!["plot", malformed.to_str().unwrap()],
            "is not an ampd-bench JSON report",
        ),
    ];
    for (arguments, expected) in cases {
        let line = fails(&arguments);
        assert!(line.contains(expected), "{arguments:?}: {line}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn create_writes_each_workloads_file_set() {
    let dir = temp_dir("create");
    let root = dir.join("www");
    let log = dir.join("access.log");
    std::fs::write(
        &log,
        log_line("/pages/a.html", 200, 1234) + &log_line("/b/", 200, 99),
    )
    .unwrap();
    for arguments in [
        vec!["specweb96", "--dirs", "1"],
        vec!["webstone"],
        vec!["sweep", "--sizes", "64,1k"],
        vec!["replay", "--log", log.to_str().unwrap()],
    ] {
        let mut arguments = arguments.clone();
        arguments.extend(["--create", root.to_str().unwrap()]);
        let output = ampd_bench(&arguments);
        assert_succeeded(&output);
    }
    let size = |path: &str| std::fs::metadata(root.join(path)).unwrap().len();
    assert_eq!(size("specweb/dir00000/class3_8"), 921_600);
    assert_eq!(size("webstone/file5m.bin"), 5 << 20);
    assert_eq!(size("f1k.bin"), 1024);
    assert_eq!(size("pages/a.html"), 1234);
    assert_eq!(size("b/index.html"), 99);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_replay_sends_the_logged_paths_in_order_over_the_wire() {
    let server = BrokenServer::start();
    let dir = temp_dir("replay-order");
    let log = dir.join("access.log");
    let logged = [
        "/good",
        "/chunked",
        "/good?x=1",
        "/chunked",
        "/good",
        "/good?y=2",
    ];
    let mut text = String::new();
    for (index, path) in logged.iter().enumerate() {
        text += &log_line(path, 200, if path.contains("chunked") { 11 } else { 5 });
        // Lines that are not GET are skipped.
        if index == 2 {
            text += "127.0.0.1 - - [23/Nov/2026:00:00:00 +0000] \"POST /form HTTP/1.1\" 200 5\n";
        }
    }
    std::fs::write(&log, text).unwrap();
    let output = ampd_bench(&[
        "replay",
        "--log",
        log.to_str().unwrap(),
        "--target",
        &server.url("/"),
        "--clients",
        "1",
        "--warmup",
        "0",
        "--requests",
        "12",
        "--quiet",
    ]);
    assert_succeeded(&output);
    let seen = server.paths.lock().unwrap().clone();
    // Twice round the log; one more request may have left as the run stopped.
    assert!((12..=13).contains(&seen.len()), "{seen:?}");
    let expected: Vec<&str> = logged.iter().chain(logged.iter()).copied().collect();
    assert_eq!(seen[..12], expected[..]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn targets_interleave_and_plot_and_compare_read_the_results() {
    let server = BrokenServer::start();
    let dir = temp_dir("interleave");
    let report = dir.join("clients.json");
    let csv = dir.join("clients.csv");
    let a = format!("a={}", server.url("/good"));
    let b = format!("b={}", server.url("/good"));
    let output = ampd_bench(&[
        "clients",
        "--counts",
        "1,2",
        "--of",
        "file",
        "--target",
        &a,
        "--target",
        &b,
        "--repeat",
        "2",
        "--requests",
        "20",
        "--warmup",
        "0",
        "--json",
        report.to_str().unwrap(),
        "--csv",
        csv.to_str().unwrap(),
    ]);
    assert_succeeded(&output);
    let order: Vec<String> = String::from_utf8_lossy(&output.stderr)
        .lines()
        .filter_map(|line| line.split(':').next())
        .map(str::to_owned)
        .collect();
    assert_eq!(
        order,
        [
            "[1/8] 1 on a",
            "[2/8] 1 on b",
            "[3/8] 1 on a",
            "[4/8] 1 on b",
            "[5/8] 2 on a",
            "[6/8] 2 on b",
            "[7/8] 2 on a",
            "[8/8] 2 on b",
        ]
    );
    let results = json(&report);
    assert_eq!(results["swept"], "simultaneous clients");
    assert_eq!(results["points"].as_array().unwrap().len(), 4);
    assert_eq!(results["points"][2]["runs"].as_array().unwrap().len(), 2);
    assert_eq!(std::fs::read_to_string(&csv).unwrap().lines().count(), 5);
    let svg = dir.join("clients.svg");
    let output = ampd_bench(&[
        "plot",
        report.to_str().unwrap(),
        "-o",
        svg.to_str().unwrap(),
        "--title",
        "Adding clients",
    ]);
    assert_succeeded(&output);
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(svg.contains("Adding clients") && svg.contains("simultaneous clients"));
    assert_eq!(svg.matches("<polyline").count(), 2);
    let output = ampd_bench(&["compare", report.to_str().unwrap(), "--base", "a"]);
    assert!(output.status.success());
    let table = String::from_utf8_lossy(&output.stdout);
    assert!(table.starts_with("| point | a | b | a/b |"), "{table}");
    assert_eq!(table.lines().count(), 4);
    std::fs::remove_dir_all(&dir).unwrap();
}
