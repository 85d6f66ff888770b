//! `ampd-bench rates`: one open-loop run per offered rate (httperf's `--rate`, as the Abyss
//! paper measured), against the test server over real sockets.

mod support;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use support::{ampd_bench, assert_succeeded, json, temp_dir, BrokenServer};

#[test]
fn each_offered_rate_is_one_point_served_on_a_new_connection_per_request() {
    let server = BrokenServer::start();
    let dir = temp_dir("rates");
    let report = dir.join("rates.json");
    let target = format!("s={}", server.url("/good"));
    let output = ampd_bench(&[
        "rates",
        "--rates",
        "40,160",
        "--target",
        &target,
        "--close",
        "--duration",
        "1s",
        "--warmup",
        "0",
        "--json",
        report.to_str().unwrap(),
    ]);
    assert_succeeded(&output);
    let results = json(&report);
    assert_eq!(results["workload"], "rates (file)");
    assert_eq!(results["swept"], "offered request rate (requests/s)");
    let points = results["points"].as_array().unwrap();
    assert_eq!(points.len(), 2);
    for (point, rate) in points.iter().zip([40.0, 160.0]) {
        assert_eq!(point["x"].as_f64(), Some(rate));
        let replies = point["median"]["requests_per_second"].as_f64().unwrap();
        // Open loop: the server keeps up, so replies/s is the offered rate.
        assert!(
            replies > rate * 0.75 && replies < rate * 1.1,
            "{rate}/s offered, {replies}/s replied"
        );
        assert_eq!(point["median"]["errors_total"], 0);
        // The requests due in the measured second, counted by the client.
        let offered = point["median"]["offered"].as_f64().unwrap();
        assert!(
            (offered - rate).abs() <= 1.0,
            "{offered} offered at {rate}/s"
        );
    }
    // --close: a connection per request (40 + 160 in the measured seconds).
    assert!(server.accepted.load(Ordering::SeqCst) >= 150);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A server that answers after 1.5 s and records the most connections open at once, counted at
/// each accept from the kernel's view: an earlier connection whose client has closed it
/// (`POLLRDHUP`) no longer counts, whether or not its thread has run since. (Counted by the
/// threads, a close the client had made stayed open until that thread's read saw it, which a
/// busy machine delays: 4 were seen with 2 clients.)
fn slow_counting_server() -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let most = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&most);
    thread::spawn(move || {
        let mut open: Vec<TcpStream> = Vec::new();
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            open.retain(|earlier| !closed_by_client(earlier));
            seen.fetch_max(open.len() + 1, Ordering::SeqCst);
            if let Ok(copy) = stream.try_clone() {
                open.push(copy);
            }
            thread::spawn(move || {
                let mut buffer = [0u8; 1024];
                stream
                    .set_read_timeout(Some(Duration::from_millis(1500)))
                    .ok();
                loop {
                    match stream.read(&mut buffer) {
                        Ok(0) => break,
                        Ok(_) => {}
                        Err(_) => {
                            let _ = stream
                                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello");
                            break;
                        }
                    }
                }
            });
        }
    });
    (port, most)
}

/// Whether the client has closed `stream` (its FIN has arrived), without reading from it.
fn closed_by_client(stream: &TcpStream) -> bool {
    ampd_sys::poll::poll_one(stream.as_fd(), true, false, Some(Duration::ZERO))
        .ok()
        .flatten()
        .is_some_and(|ready| ready.hangup)
}

#[test]
fn past_saturation_requests_time_out_as_errors_and_the_run_ends_on_time() {
    // Every request takes 1.5 s; at most 2 connections are open at once; a request not answered
    // 200 ms after it was due is a timeout, whether it waited for a connection or on one.
    let (port, most_open) = slow_counting_server();
    let dir = temp_dir("rates-saturated");
    let report = dir.join("rates.json");
    let target = format!("s=http://127.0.0.1:{port}/slow");
    let started = Instant::now();
    let output = ampd_bench(&[
        "rates",
        "--rates",
        "100",
        "--target",
        &target,
        "--clients",
        "2",
        "--timeout",
        "200ms",
        "--duration",
        "1s",
        "--warmup",
        "0",
        "--json",
        report.to_str().unwrap(),
    ]);
    assert_succeeded(&output);
    assert!(started.elapsed().as_secs_f64() < 5.0);
    let results = json(&report);
    let median = &results["points"][0]["median"];
    assert_eq!(median["responses"], 0);
    // About 100 requests were due in the second; those due in its last 200 ms end after it.
    let timeouts = median["errors"]["timeout"].as_u64().unwrap();
    assert!((60..=101).contains(&timeouts), "{timeouts} timeouts");
    assert_eq!(median["errors_total"].as_u64().unwrap(), timeouts);
    // Every request due in the second is answered, failed, or still waiting at its end.
    let offered = median["offered"].as_u64().unwrap();
    assert!(
        (99..=101).contains(&offered) && timeouts <= offered,
        "{offered} offered"
    );
    // Never more than the 2 connections (one more if the kernel handles a client's close after
    // its next connection: the two can be processed on different CPUs).
    let most = most_open.load(Ordering::SeqCst);
    assert!((1..=3).contains(&most), "{most} connections open at once");
    std::fs::remove_dir_all(&dir).unwrap();
}
