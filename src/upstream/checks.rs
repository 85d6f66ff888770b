//! Active health checks: one scheduling thread per generation and process, started on first
//! use in the process that serves, ending when the generation's `Upstreams` is dropped.
//!
//! Owns: when each server is checked, the threads that run the checks, starting them lazily
//! per process id. Must not touch: the check's request (`probe`), what a result does to the
//! server (`health`).
//!
//! Why lazily, per process id: under `--arch mp` the generation is built in the master, which
//! stays single-threaded so that it can fork; a thread started there would not exist in the
//! forked workers. The first `Upstreams::pool` (or metrics scrape) in a process whose id
//! differs from that of the process the thread was started in starts one there: every `mp`
//! worker checks for itself, as it balances for itself.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::thread;
use std::time::{Duration, Instant};

use super::pool::Pool;
use super::probe::probe;
use crate::config::Level;
use crate::log::error::{self, Throttle};

/// The shortest interval honoured: each check is a thread and a connection, so a typo of
/// `interval = "1ms"` must not become a thousand of each per second and server.
const MIN_INTERVAL: Duration = Duration::from_millis(10);

/// The checks of one generation's pools in this process.
#[derive(Debug, Default)]
pub(super) struct HealthChecks {
    /// Whether any pool has a `health_check` (nothing to start otherwise).
    wanted: bool,
    /// The process id the thread was started in; 0: not started. Read on every
    /// `Upstreams::pool`, so a process already checking pays one load and a `getpid`.
    started_in: AtomicU32,
    running: Mutex<Option<Running>>,
}

#[derive(Debug)]
struct Running {
    pid: u32,
    /// Dropped with `Upstreams` (or replaced in a new process): the thread's wait ends and it
    /// returns at once.
    _stop: Sender<()>,
    /// The thread holds the strong side while it runs (the tests watch it end).
    #[cfg_attr(not(test), allow(dead_code))]
    alive: Weak<()>,
}

impl HealthChecks {
    pub(super) fn new(pools: &[Arc<Pool>]) -> HealthChecks {
        HealthChecks {
            wanted: pools.iter().any(|pool| pool.settings().active.is_some()),
            ..HealthChecks::default()
        }
    }

    /// Start this process's check thread unless it runs already.
    pub(super) fn ensure(&self, pools: &Arc<[Arc<Pool>]>) {
        if self.wanted {
            self.ensure_for(pools, std::process::id());
        }
    }

    fn ensure_for(&self, pools: &Arc<[Arc<Pool>]>, pid: u32) {
        if !self.wanted || self.started_in.load(Ordering::Acquire) == pid {
            return;
        }
        let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        if running.as_ref().is_some_and(|running| running.pid == pid) {
            return;
        }
        let (stop, stopped) = mpsc::channel();
        let alive = Arc::new(());
        let liveness = Arc::downgrade(&alive);
        let weak = Arc::downgrade(pools);
        let spawned = thread::Builder::new()
            .name("ampd-health".into())
            .spawn(move || schedule(&weak, &stopped, alive));
        match spawned {
            // Replacing a thread of another process id drops its `Sender`: in a forked child
            // that thread does not exist and nothing waits; in the same process (tests) it ends.
            Ok(_) => {
                *running = Some(Running {
                    pid,
                    _stop: stop,
                    alive: liveness,
                });
            }
            Err(failure) => error::log(
                Level::Error,
                format_args!("upstream health checks: cannot start a thread: {failure}"),
            ),
        }
        // Also after a failure: one line, not one attempt per request.
        self.started_in.store(pid, Ordering::Release);
    }

    #[cfg(test)]
    pub(super) fn liveness(&self) -> Option<Weak<()>> {
        let running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        running.as_ref().map(|running| running.alive.clone())
    }
}

/// The thread: check every pool's servers when due, until the generation goes away.
fn schedule(pools: &Weak<[Arc<Pool>]>, stop: &Receiver<()>, _alive: Arc<()>) {
    let Some(strong) = pools.upgrade() else {
        return;
    };
    let mut lanes: Vec<Vec<Lane>> = strong
        .iter()
        .map(|pool| pool.servers.iter().map(|_| Lane::default()).collect())
        .collect();
    let start = Instant::now();
    let mut due: Vec<Option<Instant>> = strong
        .iter()
        .map(|pool| pool.settings().active.as_ref().map(|_| start))
        .collect();
    drop(strong);
    while let Some(next) = due.iter().flatten().min().copied() {
        match stop.recv_timeout(next.saturating_duration_since(Instant::now())) {
            Err(RecvTimeoutError::Timeout) => {}
            Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
        }
        let Some(pools) = pools.upgrade() else {
            return;
        };
        let now = Instant::now();
        for (index, pool) in pools.iter().enumerate() {
            let (Some(when), Some(check)) = (due[index], &pool.settings().active) else {
                continue;
            };
            if when > now {
                continue;
            }
            for (id, lane) in lanes[index].iter_mut().enumerate() {
                lane.start(pool, id, now);
            }
            due[index] = Some(now + check.interval.max(MIN_INTERVAL));
        }
    }
}

/// One server's checks: at most one at a time, each on a thread of its own, so a server that
/// takes the whole timeout does not delay the others' checks.
#[derive(Debug, Default)]
struct Lane {
    running: Arc<AtomicBool>,
    started: Option<Instant>,
}

static SPAWN_FAILED: Throttle = Throttle::new();

impl Lane {
    fn start(&mut self, pool: &Arc<Pool>, id: usize, now: Instant) {
        let Some(check) = &pool.settings().active else {
            return;
        };
        if self.running.load(Ordering::Acquire) {
            // Only a unix connect to a full backlog can outlast the timeout (it has none):
            // each interval it stays blocked counts as a failed check.
            if self
                .started
                .is_some_and(|started| now.saturating_duration_since(started) > check.timeout)
            {
                pool.record_check(id, Err("timed out (connect still blocked)".into()));
            }
            return;
        }
        self.running.store(true, Ordering::Release);
        self.started = Some(now);
        let (pool, running) = (pool.clone(), self.running.clone());
        let spawned = thread::Builder::new()
            .name("ampd-check".into())
            .spawn(move || {
                if let Some(check) = &pool.settings().active {
                    let verdict = match probe(&pool.settings().servers[id].address, check) {
                        Ok(status) if status == check.expect => Ok(()),
                        Ok(status) => Err(format!("status {status}, expected {}", check.expect)),
                        Err(failure) => Err(failure.to_string()),
                    };
                    pool.record_check(id, verdict);
                }
                running.store(false, Ordering::Release);
            });
        if let Err(failure) = spawned {
            self.running.store(false, Ordering::Release);
            SPAWN_FAILED.log(
                Level::Error,
                format_args!("upstream health check: cannot start a thread: {failure}"),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::config::{UpstreamAddress, UpstreamPool, UpstreamServer};
    use crate::upstream::probe::tests::{check, closed_address, TestServer};
    use crate::upstream::{BalanceKey, Upstreams};
    use std::net::TcpListener;
    use std::sync::atomic::Ordering;
    use std::time::{Duration, Instant};

    fn server(address: UpstreamAddress) -> UpstreamServer {
        UpstreamServer {
            address,
            weight: 1,
            backup: false,
        }
    }

    /// Poll `condition` every few milliseconds until it holds; fail after `limit`.
    fn wait_until(limit: Duration, what: &str, mut condition: impl FnMut() -> bool) {
        let deadline = Instant::now() + limit;
        while !condition() {
            assert!(Instant::now() < deadline, "not within {limit:?}: {what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn up(upstreams: &Upstreams, id: usize) -> bool {
        upstreams.pool(0).servers[id].is_up(upstreams.pool(0).millis(Instant::now()))
    }

    #[test]
    fn checks_mark_servers_down_and_up_again() {
        let healthy = TestServer::tcp(200);
        let failing = TestServer::tcp(500);
        let closed = closed_address();
        let mut settings = UpstreamPool::new(
            "app".into(),
            vec![
                server(healthy.address.clone()),
                server(failing.address.clone()),
                server(UpstreamAddress::Tcp(closed)),
            ],
        );
        settings.active = Some(check(Duration::from_secs(2)));
        let upstreams = Upstreams::new(&[settings]);
        // First use in this process starts the checks.
        let _ = upstreams.pool(0);
        wait_until(
            Duration::from_secs(10),
            "500 and closed marked down",
            || up(&upstreams, 0) && !up(&upstreams, 1) && !up(&upstreams, 2),
        );
        let key = BalanceKey {
            client: [10, 0, 0, 1].into(),
            uri: "/",
        };
        for _ in 0..10 {
            assert_eq!(upstreams.pool(0).choose(key, &[]).unwrap().id, 0);
        }
        assert!(healthy.heads.lock().unwrap().len() >= 2);
        failing.status.store(200, Ordering::Relaxed);
        let reopened = TestServer::tcp_on(TcpListener::bind(closed).unwrap(), 200);
        wait_until(Duration::from_secs(10), "both back up", || {
            up(&upstreams, 1) && up(&upstreams, 2)
        });
        let mut metrics = String::new();
        upstreams.render_metrics(&mut metrics);
        assert!(metrics.contains(&format!(
            "ampd_upstream_marked_down_total{{pool=\"app\",server=\"{}\",by=\"health_check\"}} 1",
            failing.address
        )));
        assert!(metrics.contains("ampd_upstream_health_checks_total{pool=\"app\""));
        assert!(!reopened.heads.lock().unwrap().is_empty());
    }

    #[test]
    fn the_thread_ends_when_the_generation_is_dropped() {
        let healthy = TestServer::tcp(200);
        let mut settings = UpstreamPool::new("app".into(), vec![server(healthy.address)]);
        settings.active = Some(check(Duration::from_secs(2)));
        let upstreams = Upstreams::new(&[settings]);
        upstreams.start_health_checks();
        let alive = upstreams.checks.liveness().unwrap();
        wait_until(Duration::from_secs(10), "a check ran", || {
            !healthy.heads.lock().unwrap().is_empty()
        });
        drop(upstreams);
        wait_until(Duration::from_secs(10), "the thread ended", || {
            alive.strong_count() == 0
        });
    }

    #[test]
    fn a_new_process_id_starts_its_own_thread_once() {
        let healthy = TestServer::tcp(200);
        let mut settings = UpstreamPool::new("app".into(), vec![server(healthy.address)]);
        settings.active = Some(check(Duration::from_secs(2)));
        let upstreams = Upstreams::new(&[settings]);
        // As if this were the master: 1, then a forked worker: 2.
        upstreams.checks.ensure_for(&upstreams.pools, 1);
        let master = upstreams.checks.liveness().unwrap();
        upstreams.checks.ensure_for(&upstreams.pools, 1);
        assert_eq!(master.strong_count(), 1, "started twice in one process");
        upstreams.checks.ensure_for(&upstreams.pools, 2);
        let worker = upstreams.checks.liveness().unwrap();
        assert!(!worker.ptr_eq(&master));
        // The thread of the other process id is told to stop (in a real fork it does not exist).
        wait_until(Duration::from_secs(10), "the old thread ended", || {
            master.strong_count() == 0
        });
        assert_eq!(worker.strong_count(), 1);
    }

    #[test]
    fn no_active_checks_no_thread() {
        let upstreams = Upstreams::new(&[UpstreamPool::new(
            "app".into(),
            vec![server(UpstreamAddress::Tcp(closed_address()))],
        )]);
        upstreams.start_health_checks();
        assert!(upstreams.checks.liveness().is_none());
    }
}
