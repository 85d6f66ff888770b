//! The scoreboard as Prometheus text (exposition format 0.0.4), for the `status` handler.
//!
//! Owns: metric names and their rendering. Must not touch: the counters' updates (`stats`),
//! reading `/proc` (`process`).
//! Lives beside `stats` rather than in `ops` because `conn` answers the status location and
//! may only import modules to its left.

use super::build_info;
use super::process;
use super::stats::{LoopStats, Stats, CACHES, LATENCY_BOUNDS, STATES};
use std::fmt::Write;

/// `Content-Type` of the text.
pub const CONTENT_TYPE: &[u8] = b"text/plain; version=0.0.4; charset=utf-8";

/// Render every metric; `draining` is whether a graceful stop is under way.
#[must_use]
pub fn render(stats: &Stats, draining: bool) -> String {
    let loops = stats.loops();
    let sum = |read: &dyn Fn(&LoopStats) -> u64| -> u64 { loops.iter().map(read).sum() };
    let mut out = String::with_capacity(4096);

    family(
        &mut out,
        "ampd_connections",
        "gauge",
        "Open connections by state (the scoreboard).",
    );
    for (index, state) in STATES.iter().enumerate() {
        let open: i64 = loops.iter().map(|shard| shard.connections(index)).sum();
        let _ = writeln!(out, "ampd_connections{{state=\"{state}\"}} {}", open.max(0));
    }
    family(
        &mut out,
        "ampd_connections_accepted_total",
        "counter",
        "Connections accepted.",
    );
    let _ = writeln!(
        out,
        "ampd_connections_accepted_total {}",
        sum(&|shard| shard.accepted_total())
    );
    family(
        &mut out,
        "ampd_requests_total",
        "counter",
        "Responses sent, by status class.",
    );
    for class in 0..5 {
        let _ = writeln!(
            out,
            "ampd_requests_total{{class=\"{}xx\"}} {}",
            class + 1,
            sum(&|shard| shard.responses(class))
        );
    }
    family(
        &mut out,
        "ampd_sent_bytes_total",
        "counter",
        "Response bytes queued, heads and bodies.",
    );
    let _ = writeln!(out, "ampd_sent_bytes_total {}", sum(&|shard| shard.bytes()));

    family(
        &mut out,
        "ampd_request_duration_seconds",
        "histogram",
        "From the end of a request head to its response queued.",
    );
    let mut cumulative = 0;
    for (index, bound) in LATENCY_BOUNDS.iter().enumerate() {
        cumulative += sum(&|shard| shard.latency(index));
        let _ = writeln!(
            out,
            "ampd_request_duration_seconds_bucket{{le=\"{bound}\"}} {cumulative}"
        );
    }
    cumulative += sum(&|shard| shard.latency(LATENCY_BOUNDS.len()));
    let _ = writeln!(
        out,
        "ampd_request_duration_seconds_bucket{{le=\"+Inf\"}} {cumulative}"
    );
    let micros = sum(&|shard| shard.latency_micros());
    let _ = writeln!(
        out,
        "ampd_request_duration_seconds_sum {}",
        micros as f64 / 1e6
    );
    let _ = writeln!(out, "ampd_request_duration_seconds_count {cumulative}");

    family(
        &mut out,
        "ampd_cache_hits_total",
        "counter",
        "Cache hits, per Flash cache.",
    );
    for (index, cache) in CACHES.iter().enumerate() {
        let _ = writeln!(
            out,
            "ampd_cache_hits_total{{cache=\"{cache}\"}} {}",
            sum(&|shard| shard.cache(index).0)
        );
    }
    family(
        &mut out,
        "ampd_cache_misses_total",
        "counter",
        "Cache misses, per Flash cache.",
    );
    for (index, cache) in CACHES.iter().enumerate() {
        let _ = writeln!(
            out,
            "ampd_cache_misses_total{{cache=\"{cache}\"}} {}",
            sum(&|shard| shard.cache(index).1)
        );
    }
    family(
        &mut out,
        "ampd_cache_entries",
        "gauge",
        "Entries held by the path and header caches.",
    );
    for (index, cache) in CACHES.iter().enumerate().take(2) {
        let _ = writeln!(
            out,
            "ampd_cache_entries{{cache=\"{cache}\"}} {}",
            sum(&|shard| shard.cache(index).2)
        );
    }
    family(
        &mut out,
        "ampd_cache_bytes",
        "gauge",
        "Bytes held by the file cache and by the cache of files compressed on the fly.",
    );
    let _ = writeln!(
        out,
        "ampd_cache_bytes{{cache=\"file\"}} {}",
        sum(&|shard| shard.cache(2).2)
    );
    let _ = writeln!(
        out,
        "ampd_cache_bytes{{cache=\"compressed\"}} {}",
        sum(&|shard| shard.cache(3).2)
    );

    family(
        &mut out,
        "ampd_helper_queue_depth",
        "gauge",
        "Disk jobs waiting for a helper.",
    );
    let _ = writeln!(
        out,
        "ampd_helper_queue_depth {}",
        sum(&|shard| shard.helper_queue())
    );
    family(
        &mut out,
        "ampd_helpers_busy",
        "gauge",
        "Helpers running a disk job.",
    );
    let _ = writeln!(
        out,
        "ampd_helpers_busy {}",
        sum(&|shard| shard.helper_busy())
    );

    family(
        &mut out,
        "ampd_shed_total",
        "counter",
        "Connections and requests turned away by admission control.",
    );
    for (index, reason) in ["connections", "address", "rate"].iter().enumerate() {
        let _ = writeln!(
            out,
            "ampd_shed_total{{reason=\"{reason}\"}} {}",
            sum(&|shard| shard.shed_total(index))
        );
    }
    family(
        &mut out,
        "ampd_proxy_protocol_refused_total",
        "counter",
        "Connections closed before a PROXY protocol header was used: from an untrusted \
         source, or with a header that was malformed or never came.",
    );
    for (index, reason) in ["untrusted", "invalid"].iter().enumerate() {
        let _ = writeln!(
            out,
            "ampd_proxy_protocol_refused_total{{reason=\"{reason}\"}} {}",
            sum(&|shard| shard.proxy_refused_total(index))
        );
    }
    family(
        &mut out,
        "ampd_connections_dropped_total",
        "counter",
        "Connections closed without an answer, far over a cap (also in ampd_shed_total).",
    );
    for (index, reason) in ["connections", "address"].iter().enumerate() {
        let _ = writeln!(
            out,
            "ampd_connections_dropped_total{{reason=\"{reason}\"}} {}",
            sum(&|shard| shard.dropped_total(index))
        );
    }
    family(
        &mut out,
        "ampd_internal_errors_total",
        "counter",
        "Responses 500: failures of the server's own (each also in the error log, throttled).",
    );
    let _ = writeln!(
        out,
        "ampd_internal_errors_total {}",
        sum(&|shard| shard.internal_errors())
    );
    family(
        &mut out,
        "ampd_reloads_total",
        "counter",
        "Configuration reloads, by result.",
    );
    let _ = writeln!(
        out,
        "ampd_reloads_total{{result=\"ok\"}} {}",
        stats.reloads()
    );
    let _ = writeln!(
        out,
        "ampd_reloads_total{{result=\"failed\"}} {}",
        stats.reload_failures()
    );
    family(
        &mut out,
        "ampd_config_generation",
        "gauge",
        "The configuration generation serving new requests.",
    );
    let _ = writeln!(out, "ampd_config_generation {}", stats.generation());
    family(
        &mut out,
        "ampd_draining",
        "gauge",
        "1 while a graceful stop is under way.",
    );
    let _ = writeln!(out, "ampd_draining {}", u8::from(draining));
    family(
        &mut out,
        "ampd_uptime_seconds",
        "gauge",
        "Seconds since start.",
    );
    let _ = writeln!(
        out,
        "ampd_uptime_seconds {:.3}",
        stats.started.elapsed().as_secs_f64()
    );
    render_process(&mut out, stats.server_pid);
    render_build_info(&mut out);
    out
}

/// `# HELP` and `# TYPE` of a metric family.
pub fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// The Prometheus client libraries' `process_*` families, summed over the server's processes
/// (`process.rs` says which), and how many processes that is.
fn render_process(out: &mut String, server_pid: u32) {
    let figures = process::read(server_pid);
    let rows: [(&str, &str, &str, String); 6] = [
        (
            "process_cpu_seconds_total",
            "counter",
            "User and system CPU time of the server's processes, in seconds.",
            figures.cpu_seconds.to_string(),
        ),
        (
            "process_resident_memory_bytes",
            "gauge",
            "Resident memory of the server's processes, summed, in bytes.",
            figures.resident_bytes.to_string(),
        ),
        (
            "process_open_fds",
            "gauge",
            "Open file descriptors of the server's processes, summed.",
            figures.open_fds.to_string(),
        ),
        (
            "process_max_fds",
            "gauge",
            "The descriptor limit of each process (RLIMIT_NOFILE, soft).",
            figures.max_fds.to_string(),
        ),
        (
            "process_start_time_seconds",
            "gauge",
            "Start time of the server's first process, in seconds since the Unix epoch.",
            format!("{:.2}", figures.start_time_seconds),
        ),
        (
            "ampd_processes",
            "gauge",
            "Processes the process_* figures cover (mp workers, helper processes).",
            figures.processes.to_string(),
        ),
    ];
    for (name, kind, help, value) in rows {
        family(out, name, kind, help);
        let _ = writeln!(out, "{name} {value}");
    }
}

/// `ampd_build_info{version,commit,rustc} 1`: the build as labels, joinable to other series.
fn render_build_info(out: &mut String) {
    family(
        out,
        "ampd_build_info",
        "gauge",
        "Always 1; the labels say which build is running.",
    );
    let _ = writeln!(
        out,
        "ampd_build_info{{version=\"{}\",commit=\"{}\",rustc=\"{}\"}} 1",
        build_info::VERSION,
        build_info::COMMIT,
        build_info::rustc_version(),
    );
}
