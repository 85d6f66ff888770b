//! bench/disk_bound_report.py, the tables and charts of bench/disk_bound.sh, checked on a
//! results directory laid out as the script lays it out. The runs are real `ampd-bench` reports
//! (one run against the test server), with their request rates then set per server and round,
//! so that the medians and ratios the tables must show are known.

mod support;

use std::path::Path;
use std::process::Command;

use support::{ampd_bench, assert_succeeded, json, temp_dir, BrokenServer};

/// One round's figures: requests/s, p50 latency (ms; p99 is twice it), threads, CPU time (ns)
/// over the run.
struct Round {
    rate: f64,
    p50: f64,
    threads: u32,
    cpu_ns: u64,
}

const fn round(rate: f64, p50: f64, threads: u32, cpu_ns: u64) -> Round {
    Round {
        rate,
        p50,
        threads,
        cpu_ns,
    }
}

/// `template` with every summary (the median and each run) set to `figures`.
fn report_with(template: &serde_json::Value, figures: &Round) -> serde_json::Value {
    let mut report = template.clone();
    let point = &mut report["points"][0];
    let set = |summary: &mut serde_json::Value| {
        summary["requests_per_second"] = figures.rate.into();
        summary["mbit_per_second"] = (figures.rate * 0.8).into();
        // Four seconds of responses, as the script measures.
        summary["responses"] = ((figures.rate * 4.0) as u64).into();
        summary["latency_ms"]["p50"] = figures.p50.into();
        summary["latency_ms"]["p99"] = (figures.p50 * 2.0).into();
        summary["errors_total"] = 0.into();
    };
    set(&mut point["median"]);
    for run in point["runs"].as_array_mut().unwrap() {
        set(run);
    }
    report
}

fn write_round(
    results: &Path,
    count: u32,
    server: &str,
    number: usize,
    template: &serde_json::Value,
    figures: &Round,
) {
    let dir = results.join(format!("runs/clients/latency/{count}/{server}/{number}"));
    std::fs::create_dir_all(&dir).unwrap();
    let report = report_with(template, figures);
    std::fs::write(dir.join("load.json"), report.to_string()).unwrap();
    let stats = format!(
        "processes=1\nthreads={}\nanon_bytes={}\ncache_bytes={}\ncpu_ns={}\n",
        figures.threads,
        3 << 20,
        50 << 20,
        figures.cpu_ns
    );
    std::fs::write(dir.join("stats.txt"), stats).unwrap();
}

#[test]
fn clients_part_shows_medians_ratios_resources_and_a_chart() {
    if Command::new("python3").arg("--version").output().is_err() {
        eprintln!("SKIP: python3 is not installed");
        return;
    }
    let server = BrokenServer::start();
    let results = temp_dir("disk-bound-report");
    let template_path = results.join("template.json");
    let target = format!("amped={}", server.url("/good"));
    let output = ampd_bench(&[
        "file",
        "--target",
        &target,
        "--clients",
        "1",
        "--requests",
        "20",
        "--warmup",
        "0",
        "--json",
        template_path.to_str().unwrap(),
    ]);
    assert_succeeded(&output);
    let template = json(&template_path);
    std::fs::remove_file(&template_path).unwrap();
    std::fs::write(
        results.join("settings.txt"),
        "SERVERS=amped mt\nFILE_SIZE=102400\nCLIENTS_FILES=1920\nMEMORY=64M\n",
    )
    .unwrap();
    // Rounds out of order, so that a median taken as "the middle round" would be wrong.
    let amped_64 = [
        round(7_000.0, 10.6, 37, 1_400_000_000),
        round(7_400.0, 10.4, 37, 1_480_000_000),
        round(7_200.0, 10.5, 37, 1_440_000_000),
    ];
    let mt_64 = [
        round(7_300.0, 10.4, 66, 1_500_000_000),
        round(7_100.0, 10.5, 66, 1_460_000_000),
        round(7_250.0, 10.4, 66, 1_490_000_000),
    ];
    let amped_256 = [
        round(10_600.0, 25.3, 37, 3_700_000_000),
        round(10_900.0, 25.0, 37, 3_800_000_000),
        round(10_400.0, 25.6, 37, 3_650_000_000),
    ];
    let mt_256 = [
        round(7_200.0, 33.7, 66, 3_000_000_000),
        round(7_300.0, 33.5, 66, 3_020_000_000),
        round(7_250.0, 33.8, 66, 3_010_000_000),
    ];
    for (count, server, rounds) in [
        (64, "amped", &amped_64),
        (64, "mt", &mt_64),
        (256, "amped", &amped_256),
        (256, "mt", &mt_256),
    ] {
        for (index, figures) in rounds.iter().enumerate() {
            write_round(&results, count, server, index + 1, &template, figures);
        }
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/disk_bound_report.py");
    let output = Command::new("python3")
        .arg(&script)
        .arg(&results)
        .arg(env!("CARGO_BIN_EXE_ampd-bench"))
        .output()
        .unwrap();
    assert_succeeded(&output);
    let markdown = std::fs::read_to_string(results.join("results.md")).unwrap();
    let section = markdown
        .split("## Concurrent clients, latency device: 188 MiB (1920 files)")
        .nth(1)
        .unwrap_or_else(|| panic!("no clients section:\n{markdown}"));
    let lines: Vec<&str> = section.lines().collect();
    let has = |row: &str| assert!(lines.contains(&row), "no row {row:?} in:\n{section}");
    // Requests/s: the median of the three rounds, server by server.
    has("| clients | amped | mt |");
    has("| 64 | 7,200 | 7,250 |");
    has("| 256 | 10,600 | 7,250 |");
    // Ratios of the medians: 7,200 / 7,250 and 10,600 / 7,250.
    has("| clients | amped/mt |");
    has("| 64 | 0.99 |");
    has("| 256 | 1.46 |");
    // Median p50 and p99, threads, memory and CPU per request (1.44e9 ns / 28,800 requests = 50 µs;
    // mt at 256 clients: 3.01e9 ns / 29,000 requests = 103.8 µs).
    has("| 64 | amped | 10.50 | 21.00 | 37 | 1 | 3.0 | 50.0 | 50.0 | 0 |");
    has("| 256 | mt | 33.70 | 67.40 | 66 | 1 | 3.0 | 50.0 | 103.8 | 0 |");
    let chart = std::fs::read_to_string(results.join("clients-latency.svg")).unwrap();
    for text in ["64 clients", "256 clients", ">amped<", ">mt<"] {
        assert!(chart.contains(text), "the chart has no {text:?}");
    }
    std::fs::remove_dir_all(&results).unwrap();
}
