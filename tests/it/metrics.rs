//! The status location: Prometheus text exposition format (read by our strict parser and by
//! the Prometheus project's Python parser, python3-prometheus-client), and counters that match
//! the requests sent; the health location.

use crate::support;

use std::collections::HashMap;
use support::*;

/// Parses exposition format 0.0.4 strictly enough for a test: `# HELP`/`# TYPE` lines, and
/// samples `name{label="value",...} number` whose family was declared by a `# TYPE` before.
fn parse(text: &str) -> HashMap<String, f64> {
    let mut families: HashMap<String, String> = HashMap::new();
    let mut samples = HashMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# ") {
            let mut parts = rest.splitn(3, ' ');
            let (kind, name, value) = (
                parts.next().unwrap(),
                parts.next().unwrap(),
                parts.next().unwrap_or(""),
            );
            assert!(kind == "HELP" || kind == "TYPE", "{line}");
            if kind == "TYPE" {
                assert!(["counter", "gauge", "histogram"].contains(&value), "{line}");
                families.insert(name.to_owned(), value.to_owned());
            }
            continue;
        }
        let (series, value) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("no value: {line}"));
        let value: f64 = value
            .parse()
            .unwrap_or_else(|_| panic!("bad value: {line}"));
        let name = series.split('{').next().unwrap();
        assert!(
            name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'),
            "{line}"
        );
        if let Some(labels) = series.strip_prefix(name) {
            if !labels.is_empty() {
                let inner = labels
                    .strip_prefix('{')
                    .and_then(|l| l.strip_suffix('}'))
                    .expect(line);
                for pair in inner.split(',') {
                    let (key, quoted) = pair.split_once('=').expect(line);
                    assert!(
                        key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'),
                        "{line}"
                    );
                    assert!(quoted.starts_with('"') && quoted.ends_with('"'), "{line}");
                }
            }
        }
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|suffix| {
                name.strip_suffix(suffix)
                    .filter(|base| families.get(*base).map(String::as_str) == Some("histogram"))
            })
            .unwrap_or(name);
        assert!(
            families.contains_key(family),
            "sample before its # TYPE: {line}"
        );
        samples.insert(series.to_owned(), value);
    }
    samples
}

fn scrape(server: &Server) -> HashMap<String, f64> {
    let response = get(server.addr(), "/status");
    assert_eq!(response.status, 200);
    assert_eq!(
        response.header("content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    parse(&response.body_text())
}

/// The sample count that the Prometheus project's own Python parser (Debian's
/// python3-prometheus-client) reads from `text`; it raises on malformed input.
fn official_parser_samples(text: &[u8]) -> usize {
    use std::io::Write;
    let program = "import sys\nfrom prometheus_client.parser import text_string_to_metric_families as parse\nprint(sum(len(family.samples) for family in parse(sys.stdin.read())))";
    let mut child = std::process::Command::new("/usr/bin/python3")
        .args(["-c", program])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("/usr/bin/python3 (Debian's python3)");
    child.stdin.take().unwrap().write_all(text).unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "prometheus_client rejects the text: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .trim()
        .parse()
        .unwrap()
}

for_each_arch!(fn counters_match_the_requests_sent(arch) {
    let root = TempRoot::new();
    root.file("a.txt", "0123456789");
    let config = write_config(
        &root,
        arch,
        "[[site]]\nroot = \"www\"\n\n  [[site.location]]\n  path = \"/status\"\n  exact = true\n  handler = \"status\"\n\n  [[site.location]]\n  path = \"/health\"\n  exact = true\n  handler = \"health\"\n",
    );
    let server = Server::start(Options::config_file(&config));
    let before = scrape(&server);
    assert_eq!(before["ampd_requests_total{class=\"2xx\"}"], 0.0, "the first scrape counts nothing yet");
    let mut conn = Conn::open(server.addr());
    for _ in 0..7 {
        assert_eq!(conn.get("/a.txt", &[]).status, 200);
    }
    for _ in 0..3 {
        assert_eq!(conn.get("/missing", &[]).status, 404);
    }
    assert_eq!(conn.get("/health", &[]).body_text(), "ok\n");
    let after = scrape(&server);
    // 7 files + 1 health + the first scrape; the second scrape counts itself only afterwards.
    assert_eq!(after["ampd_requests_total{class=\"2xx\"}"], 9.0);
    assert_eq!(after["ampd_requests_total{class=\"4xx\"}"], 3.0);
    assert_eq!(after["ampd_requests_total{class=\"5xx\"}"], 0.0);
    assert_eq!(after["ampd_request_duration_seconds_count"], 12.0);
    assert_eq!(after["ampd_request_duration_seconds_bucket{le=\"+Inf\"}"], 12.0);
    assert!(after["ampd_sent_bytes_total"] >= 7.0 * 10.0);
    assert!(after["ampd_connections_accepted_total"] >= 3.0);
    // The keep-alive connection above is open: the scoreboard has it in some state.
    let open: f64 = ["idle", "reading", "busy", "sending", "closing"]
        .iter()
        .map(|state| after[&format!("ampd_connections{{state=\"{state}\"}}")])
        .sum();
    assert!(open >= 1.0, "{after:?}");
    assert_eq!(after["ampd_reloads_total{result=\"ok\"}"], 0.0);
    assert_eq!(after["ampd_config_generation"], 1.0);
    assert_eq!(after["ampd_draining"], 0.0);
    // Histogram buckets are cumulative: never decreasing with the bound, ending at the count.
    let bounds = ["0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "1", "+Inf"];
    let buckets: Vec<f64> = bounds
        .iter()
        .map(|bound| after[&format!("ampd_request_duration_seconds_bucket{{le=\"{bound}\"}}")])
        .collect();
    assert!(buckets.windows(2).all(|pair| pair[0] <= pair[1]), "{buckets:?}");
    // The Prometheus project's parser reads every sample of the text too.
    let text = get(server.addr(), "/status").body;
    assert_eq!(official_parser_samples(&text), parse(&String::from_utf8_lossy(&text)).len());
});

for_each_arch!(fn cache_and_reload_counters(arch) {
    let root = TempRoot::new();
    root.file("a.txt", "cached");
    let config = write_config(
        &root,
        arch,
        "[[site]]\nroot = \"www\"\n\n  [[site.location]]\n  path = \"/status\"\n  exact = true\n  handler = \"status\"\n",
    );
    let mut server = Server::start(Options::config_file(&config));
    // One connection, so that every engine serves the five from one cache (a reactor loop's,
    // an mp process's, the mt pool's).
    let mut conn = Conn::open(server.addr());
    for _ in 0..5 {
        assert_eq!(conn.get("/a.txt", &[]).status, 200);
    }
    server.signal("HUP");
    assert!(server.wait_for_stderr("configuration reloaded", std::time::Duration::from_secs(5)));
    // The reload dropped the translations made under the old roots; this one is new.
    get(server.addr(), "/a.txt");
    // Cache counters are published by the loop a few times a second.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
    let metrics = loop {
        let metrics = scrape(&server);
        let settled = metrics["ampd_cache_hits_total{cache=\"path\"}"] >= 4.0
            && metrics["ampd_cache_misses_total{cache=\"path\"}"] >= 2.0
            && metrics["ampd_cache_entries{cache=\"path\"}"] >= 1.0;
        if settled || std::time::Instant::now() > deadline
        {
            break metrics;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(
        metrics["ampd_cache_hits_total{cache=\"path\"}"] >= 4.0,
        "{metrics:?}"
    );
    assert!(
        metrics["ampd_cache_misses_total{cache=\"path\"}"] >= 2.0,
        "one per generation"
    );
    assert!(metrics["ampd_cache_entries{cache=\"path\"}"] >= 1.0);
    assert_eq!(metrics["ampd_reloads_total{result=\"ok\"}"], 1.0);
    assert_eq!(metrics["ampd_config_generation"], 2.0);
    server.signal("TERM");
    assert_eq!(
        server.wait_exit(std::time::Duration::from_secs(10)),
        Some(0)
    );
});

/// The process figures of one scrape are plausible for a server started moments ago.
fn assert_process_figures(arch: &str, metrics: &HashMap<String, f64>, text: &str) {
    let value = |name: &str| {
        *metrics
            .get(name)
            .unwrap_or_else(|| panic!("{arch}: no {name} in\n{text}"))
    };
    let open = value("process_open_fds");
    let max = value("process_max_fds");
    assert!(open >= 3.0 && open <= max, "{arch}: {open} open of {max}");
    assert!(
        value("process_resident_memory_bytes") > f64::from(1 << 20),
        "{arch}"
    );
    let cpu = value("process_cpu_seconds_total");
    assert!((0.0..600.0).contains(&cpu), "{arch}: {cpu}");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let started = value("process_start_time_seconds");
    assert!(
        started > now - 300.0 && started <= now + 1.0,
        "{arch}: {started} vs {now}"
    );
    assert!(value("ampd_processes") >= 1.0, "{arch}");
    let info = metrics
        .keys()
        .find(|series| series.starts_with("ampd_build_info{"))
        .unwrap_or_else(|| panic!("{arch}: no ampd_build_info in\n{text}"));
    assert_eq!(metrics[info], 1.0);
    for label in ["version=\"0.1.0\"", "commit=\"", "rustc=\"1."] {
        assert!(info.contains(label), "{arch}: {label} not in {info}");
    }
}

/// The processes the figures cover: the master and its workers under mp, the server and its
/// helper processes with `--helpers-mode process`, one process otherwise. Workers and helpers
/// start just after the ready line, so this scrapes until they are all counted (bounded).
fn assert_whole_server_counted(arch: &str, server: &Server) {
    let expected = if arch.starts_with("mp") || arch.contains("process") {
        5.0
    } else {
        1.0
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let processes = loop {
        let processes = scrape(server)["ampd_processes"];
        if processes >= expected || std::time::Instant::now() > deadline {
            break processes;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(
        processes >= expected && (expected > 1.0 || processes == 1.0),
        "{arch}: {processes} processes"
    );
}

for_each_arch!(fn process_figures_and_build_info(arch) {
    // Config mode: a `handler = "status"` location.
    let root = TempRoot::new();
    let config = write_config(
        &root,
        arch,
        "[[site]]\nroot = \"www\"\n\n  [[site.location]]\n  path = \"/status\"\n  exact = true\n  handler = \"status\"\n",
    );
    let server = Server::start(Options::config_file(&config));
    assert_whole_server_counted(arch, &server);
    let text = get(server.addr(), "/status").body_text();
    assert_process_figures(arch, &scrape(&server), &text);
    assert_eq!(
        official_parser_samples(text.as_bytes()),
        parse(&text).len(),
        "the Prometheus parser reads every sample"
    );
    drop(server);
    // Serve mode: `--status PATH`.
    let mut options = Options::new(root.path(), arch).args(["--status", "/status"]);
    options = match arch.split_whitespace().next() {
        Some("mp") => options.args(["--threads", "4"]),
        _ => options,
    };
    let server = Server::start(options);
    assert_whole_server_counted(arch, &server);
    let text = get(server.addr(), "/status").body_text();
    assert_process_figures(arch, &scrape(&server), &text);
});
