//! ampd-bench against a deliberately broken server over real sockets: every fault is counted
//! exactly once, as the right kind, and good responses are measured.

mod support;

use std::sync::atomic::Ordering;

use support::{ampd_bench, assert_succeeded, json, log_line, temp_dir, BrokenServer};

#[test]
fn a_run_against_the_broken_server_reports_exactly_its_errors() {
    let server = BrokenServer::start();
    let dir = temp_dir("broken");
    let log = dir.join("access.log");
    let lines = [
        ("/good", 200, 5),
        ("/long", 200, 5),
        ("/good", 200, 5),
        ("/short", 200, 10),
        ("/chunked", 200, 11),
        ("/slow", 200, 5),
        ("/good", 200, 5),
        ("/status", 200, 0),
        ("/header", 200, 0),
        // Logged as served, gone from the server now: a 404.
        ("/missing", 200, 9),
        ("/good", 200, 5),
    ];
    let text: String = lines
        .iter()
        .map(|&(path, status, bytes)| log_line(path, status, bytes))
        .collect();
    std::fs::write(&log, text).unwrap();
    let report = dir.join("report.json");
    let output = ampd_bench(&[
        "replay",
        "--log",
        log.to_str().unwrap(),
        "--target",
        &format!("broken={}", server.url("/")),
        "--clients",
        "1",
        "--warmup",
        "0",
        "--requests",
        "11",
        "--timeout",
        "400ms",
        "--quiet",
        "--json",
        report.to_str().unwrap(),
    ]);
    assert_succeeded(&output);
    let report = json(&report);
    let median = &report["points"][0]["median"];
    let errors = &median["errors"];
    assert_eq!(median["responses"], 5, "{median:#}");
    assert_eq!(errors["wrong_length"], 1, "{errors:#}");
    assert_eq!(errors["truncated"], 1, "{errors:#}");
    assert_eq!(errors["timeout"], 1, "{errors:#}");
    assert_eq!(errors["bad_status_line"], 1, "{errors:#}");
    assert_eq!(errors["bad_header"], 1, "{errors:#}");
    assert_eq!(errors["http_status"], 1, "{errors:#}");
    assert_eq!(median["errors_total"], 6);
    for quiet in ["connect_refused", "connect_failed", "reset", "bad_chunked"] {
        assert_eq!(errors[quiet], 0, "{quiet}");
    }
    // Four /good (5 bytes) and one chunked (11 bytes) verified.
    assert_eq!(median["bytes_verified"], 4 * 5 + 11);
    // The table names each error kind.
    let table = String::from_utf8_lossy(&output.stdout);
    assert!(table.contains("error wrong_length: 1") && table.contains("error timeout: 1"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_slow_first_byte_within_the_timeout_is_measured_not_an_error() {
    let server = BrokenServer::start();
    let dir = temp_dir("late");
    let report = dir.join("late.json");
    let output = ampd_bench(&[
        "file",
        "--target",
        &server.url("/late"),
        "--clients",
        "2",
        "--warmup",
        "0",
        "--requests",
        "4",
        "--quiet",
        "--json",
        report.to_str().unwrap(),
    ]);
    assert_succeeded(&output);
    let median = json(&report)["points"][0]["median"].clone();
    assert_eq!(median["errors_total"], 0);
    assert!(median["responses"].as_u64().unwrap() >= 4);
    let first_byte = median["first_byte_ms"]["p50"].as_f64().unwrap();
    assert!(
        (140.0..1000.0).contains(&first_byte),
        "time to first byte {first_byte} ms"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn connection_per_request_pipelining_and_open_loop() {
    let server = BrokenServer::start();
    let dir = temp_dir("modes");
    let run = |extra: &[&str], name: &str| {
        let report = dir.join(format!("{name}.json"));
        let mut arguments = vec![
            "file",
            "--target",
            "good=",
            "--warmup",
            "0",
            "--quiet",
            "--json",
            report.to_str().unwrap(),
        ];
        let url = format!("good={}", server.url("/good"));
        arguments[2] = &url;
        arguments.extend_from_slice(extra);
        let output = ampd_bench(&arguments);
        assert_succeeded(&output);
        json(&report)["points"][0]["median"].clone()
    };
    // A new connection per request: the server accepts one per response.
    let before = server.accepted.load(Ordering::SeqCst);
    let close = run(&["--close", "--clients", "4", "--requests", "200"], "close");
    let accepted = server.accepted.load(Ordering::SeqCst) - before;
    assert_eq!(close["errors_total"], 0, "{close:#}");
    let responses = close["responses"].as_u64().unwrap();
    assert!(
        responses >= 200 && accepted >= responses,
        "{responses} responses, {accepted} connections"
    );
    // Every response had its own connection (one more may have opened as the run ended).
    let connections = close["connections"].as_u64().unwrap();
    assert!(
        (responses..=responses + 4).contains(&connections),
        "{connections}"
    );
    // Pipelining four requests per write.
    let piped = run(
        &["--pipeline", "4", "--clients", "2", "--requests", "400"],
        "pipelined",
    );
    assert_eq!(piped["errors_total"], 0, "{piped:#}");
    assert!(piped["responses"].as_u64().unwrap() >= 400);
    // Open loop at 200 requests/s for one second: about 200 responses, latency from due time.
    let open = run(
        &["--rate", "200", "--clients", "8", "--duration", "1s"],
        "open",
    );
    assert_eq!(open["errors_total"], 0, "{open:#}");
    let count = open["responses"].as_u64().unwrap();
    assert!(
        (170..=215).contains(&count),
        "{count} responses at 200/s for 1 s"
    );
    // Think time: 2 clients, 100 ms think, 1 s: at most about 20 requests.
    let think = run(
        &["--think", "100ms", "--clients", "2", "--duration", "1s"],
        "think",
    );
    let count = think["responses"].as_u64().unwrap();
    assert!(
        (10..=22).contains(&count),
        "{count} responses with think time"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
