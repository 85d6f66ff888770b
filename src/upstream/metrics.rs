//! The pools' state as Prometheus text, appended to the status handler's answer.
//!
//! Owns: the `ampd_upstream_*` metric names and their rendering. Must not touch: the counters'
//! updates (`health`, `pool`). The figures are this process's: under `mp` each worker keeps its
//! own (the worker answering `/status` reports what it has seen).

use std::fmt::Write;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use super::health::ServerHealth;
use super::pool::Pool;
use crate::log::metrics::family;

/// One family: its name, type, help, and a row per server (the label set after
/// `pool`/`server`, the value); no rows leaves the server out of the family.
struct Family {
    name: &'static str,
    kind: &'static str,
    help: &'static str,
    rows: fn(&Pool, &ServerHealth, u64) -> Vec<(&'static str, u64)>,
}

const FAMILIES: [Family; 8] = [
    Family {
        name: "ampd_upstream_server_up",
        kind: "gauge",
        help: "1 while the server takes requests, 0 while passive or active health keeps it out.",
        rows: |_, server, now_ms| vec![("", u64::from(server.is_up(now_ms)))],
    },
    Family {
        name: "ampd_upstream_in_flight",
        kind: "gauge",
        help: "Requests on the server now.",
        rows: |_, server, _| vec![("", server.in_flight.load(Ordering::Relaxed))],
    },
    Family {
        name: "ampd_upstream_attempts_total",
        kind: "counter",
        help: "Attempts of requests on the server, by outcome (success: a valid response head).",
        rows: |_, server, _| {
            vec![
                (
                    ",outcome=\"success\"",
                    server.successes.load(Ordering::Relaxed),
                ),
                (
                    ",outcome=\"failure\"",
                    server.failures.load(Ordering::Relaxed),
                ),
            ]
        },
    },
    Family {
        name: "ampd_upstream_marked_down_total",
        kind: "counter",
        help: "Times the server was taken out, by what took it out.",
        rows: |_, server, _| {
            vec![
                (
                    ",by=\"failures\"",
                    server.marked_down_by_failures.load(Ordering::Relaxed),
                ),
                (
                    ",by=\"health_check\"",
                    server.marked_down_by_checks.load(Ordering::Relaxed),
                ),
            ]
        },
    },
    Family {
        name: "ampd_upstream_health_checks_total",
        kind: "counter",
        help: "Active health checks of the server, by result.",
        rows: |pool, server, _| {
            if pool.settings().active.is_none() {
                return Vec::new();
            }
            vec![
                (
                    ",result=\"pass\"",
                    server.checks_passed.load(Ordering::Relaxed),
                ),
                (
                    ",result=\"fail\"",
                    server.checks_failed.load(Ordering::Relaxed),
                ),
            ]
        },
    },
    Family {
        name: "ampd_upstream_fastcgi_max_conns",
        kind: "gauge",
        help: "FCGI_MAX_CONNS the FastCGI application answered: the connections it accepts at once.",
        rows: |_, server, _| learned(server.fastcgi.max_conns()),
    },
    Family {
        name: "ampd_upstream_fastcgi_max_reqs",
        kind: "gauge",
        help: "FCGI_MAX_REQS the FastCGI application answered: the requests it serves at once.",
        rows: |_, server, _| learned(server.fastcgi.max_reqs()),
    },
    Family {
        name: "ampd_upstream_fastcgi_mpxs_conns",
        kind: "gauge",
        help: "FCGI_MPXS_CONNS the FastCGI application answered: 1 if it multiplexes requests on a connection.",
        rows: |_, server, _| learned(server.fastcgi.mpxs_conns()),
    },
];

/// A row for a value the application gave; none (the server left out) for one it did not.
fn learned(value: Option<u64>) -> Vec<(&'static str, u64)> {
    value.map(|value| ("", value)).into_iter().collect()
}

/// Append every `ampd_upstream_*` family for `pools` at `now`.
pub(super) fn render(pools: &[Arc<Pool>], out: &mut String, now: Instant) {
    if pools.is_empty() {
        return;
    }
    for metric in &FAMILIES {
        let mut rows = String::new();
        for pool in pools {
            let now_ms = pool.millis(now);
            for (id, server) in pool.servers.iter().enumerate() {
                for (labels, value) in (metric.rows)(pool, server, now_ms) {
                    let _ = writeln!(
                        rows,
                        "{}{{pool=\"{}\",server=\"{}\"{labels}}} {value}",
                        metric.name,
                        escape(&pool.settings().name),
                        escape(&pool.server_name(id)),
                    );
                }
            }
        }
        if !rows.is_empty() {
            family(out, metric.name, metric.kind, metric.help);
            out.push_str(&rows);
        }
    }
}

/// A label value as the exposition format wants it: `\`, `"` and line feeds escaped (a unix
/// socket's path may hold any of them).
fn escape(value: &str) -> String {
    let mut escaped = String::with_capacity(value.len());
    for character in value.chars() {
        match character {
            '\\' => escaped.push_str("\\\\"),
            '"' => escaped.push_str("\\\""),
            '\n' => escaped.push_str("\\n"),
            other => escaped.push(other),
        }
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{UpstreamAddress, UpstreamPool, UpstreamServer};
    use crate::upstream::{BalanceKey, Report};
    use std::path::PathBuf;

    fn pools() -> Vec<Arc<Pool>> {
        let servers = vec![
            UpstreamServer {
                address: UpstreamAddress::Tcp(([127, 0, 0, 1], 9001).into()),
                weight: 1,
                backup: false,
            },
            UpstreamServer {
                address: UpstreamAddress::Unix(PathBuf::from("/run/a \"b\".sock")),
                weight: 1,
                backup: false,
            },
        ];
        vec![Arc::new(Pool::new(UpstreamPool::new(
            "app".into(),
            servers,
        )))]
    }

    #[test]
    fn every_server_has_its_rows() {
        let pools = pools();
        let key = BalanceKey {
            client: [10, 0, 0, 1].into(),
            uri: "/",
        };
        let held = pools[0].choose(key, &[1]).unwrap();
        pools[0].report(0, Report::Success);
        pools[0].report(1, Report::Failure);
        let mut out = String::new();
        render(&pools, &mut out, Instant::now());
        let tcp = "pool=\"app\",server=\"127.0.0.1:9001\"";
        let unix = "pool=\"app\",server=\"unix:/run/a \\\"b\\\".sock\"";
        for line in [
            "# TYPE ampd_upstream_server_up gauge".to_string(),
            format!("ampd_upstream_server_up{{{tcp}}} 1"),
            format!("ampd_upstream_server_up{{{unix}}} 0"),
            format!("ampd_upstream_in_flight{{{tcp}}} 1"),
            format!("ampd_upstream_in_flight{{{unix}}} 0"),
            format!("ampd_upstream_attempts_total{{{tcp},outcome=\"success\"}} 1"),
            format!("ampd_upstream_attempts_total{{{unix},outcome=\"failure\"}} 1"),
            format!("ampd_upstream_marked_down_total{{{unix},by=\"failures\"}} 1"),
            format!("ampd_upstream_marked_down_total{{{tcp},by=\"health_check\"}} 0"),
        ] {
            assert!(out.lines().any(|got| got == line), "{line} not in\n{out}");
        }
        // No active checks configured: no check counts.
        assert!(!out.contains("ampd_upstream_health_checks_total"), "{out}");
        drop(held);
    }

    #[test]
    fn fastcgi_limits_have_rows_only_once_answered() {
        let pools = pools();
        let mut out = String::new();
        render(&pools, &mut out, Instant::now());
        assert!(!out.contains("ampd_upstream_fastcgi"), "{out}");
        let answer = Ok(crate::upstream::fastcgi::AppValues {
            max_conns: Some(5),
            max_reqs: None,
            mpxs_conns: Some(0),
        });
        pools[0].record_values(0, &answer);
        out.clear();
        render(&pools, &mut out, Instant::now());
        let tcp = "pool=\"app\",server=\"127.0.0.1:9001\"";
        for line in [
            "# TYPE ampd_upstream_fastcgi_max_conns gauge".to_string(),
            format!("ampd_upstream_fastcgi_max_conns{{{tcp}}} 5"),
            format!("ampd_upstream_fastcgi_mpxs_conns{{{tcp}}} 0"),
        ] {
            assert!(out.lines().any(|got| got == line), "{line} not in\n{out}");
        }
        assert!(!out.contains("ampd_upstream_fastcgi_max_reqs"), "{out}");
        assert_eq!(out.matches("ampd_upstream_fastcgi_max_conns{").count(), 1);
    }

    #[test]
    fn no_pools_no_text() {
        let mut out = String::new();
        render(&[], &mut out, Instant::now());
        assert!(out.is_empty());
    }
}
