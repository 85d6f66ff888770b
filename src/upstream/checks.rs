//! Active health checks and FastCGI learning: one scheduling thread per generation and
//! process, started on first use in the process that serves, ending when the generation's
//! `Upstreams` is dropped (or, with no active checks, once every FastCGI server has answered).
//!
//! Owns: when each server is checked, when a FastCGI server is asked for its limits, the
//! threads that run those exchanges, starting them lazily per process id. Must not touch: the
//! exchanges themselves (`probe`, `fastcgi`), what a result does to the server (`health`,
//! `fastcgi::LearnedLimits`).
//!
//! A FastCGI pool's servers are asked for their limits (`FCGI_GET_VALUES`) once, when the
//! thread starts: with a `health_check`, each check is that same exchange and keeps the values
//! current; without, a server not reached is asked again after a backoff, until it answers.
//! Never on a serving loop: the exchange blocks for up to its timeout.
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

use super::fastcgi::{get_values, Learning};
use super::pool::Pool;
use super::probe::probe;
use crate::config::{Level, UpstreamProtocol};
use crate::log::error::{self, Throttle};

/// The shortest interval honoured: each check is a thread and a connection, so a typo of
/// `interval = "1ms"` must not become a thousand of each per second and server.
const MIN_INTERVAL: Duration = Duration::from_millis(10);

/// The first wait before asking an unreached FastCGI server for its limits again; it doubles
/// up to `LEARN_RETRY_MAX` (an application ampd starts may take a moment to listen).
const LEARN_RETRY_FIRST: Duration = Duration::from_millis(250);
const LEARN_RETRY_MAX: Duration = Duration::from_secs(30);

/// What one server's exchange is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Job {
    /// The pool's `health_check`: the verdict goes to health (for a FastCGI pool the exchange
    /// is `FCGI_GET_VALUES`, and its answer is learnt too).
    Check,
    /// Only learning a FastCGI server's limits (the pool has no `health_check`).
    Learn,
}

/// Whether the thread has anything to do for `pool`: active checks, or FastCGI learning.
fn needs_thread(pool: &Pool) -> bool {
    pool.settings().active.is_some() || pool.settings().protocol == UpstreamProtocol::FastCgi
}

/// The checks of one generation's pools in this process.
#[derive(Debug, Default)]
pub(super) struct HealthChecks {
    /// Whether any pool has a `health_check` or speaks FastCGI (nothing to start otherwise).
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
            wanted: pools.iter().any(|pool| needs_thread(pool)),
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

/// The thread: check every pool's servers when due, and ask FastCGI servers for their limits
/// until each answered, until the generation goes away or nothing is left to do.
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
        .map(|pool| needs_thread(pool).then_some(start))
        .collect();
    let mut learn_retry: Vec<Duration> = strong.iter().map(|_| LEARN_RETRY_FIRST).collect();
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
            let Some(when) = due[index] else {
                continue;
            };
            if when > now {
                continue;
            }
            due[index] = match &pool.settings().active {
                Some(check) => {
                    for (id, lane) in lanes[index].iter_mut().enumerate() {
                        lane.start(pool, id, now, Job::Check);
                    }
                    Some(now + check.interval.max(MIN_INTERVAL))
                }
                None => {
                    let mut waiting = false;
                    for (id, lane) in lanes[index].iter_mut().enumerate() {
                        if pool.servers[id].fastcgi.learning() == Learning::Pending {
                            waiting = true;
                            lane.start(pool, id, now, Job::Learn);
                        }
                    }
                    let retry = learn_retry[index];
                    learn_retry[index] = (retry * 2).min(LEARN_RETRY_MAX);
                    waiting.then_some(now + retry)
                }
            };
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
    fn start(&mut self, pool: &Arc<Pool>, id: usize, now: Instant, job: Job) {
        let settings = pool.settings();
        let timeout = match (job, &settings.active) {
            (Job::Check, Some(check)) => check.timeout,
            (Job::Check, None) => return,
            (Job::Learn, _) => settings.connect_timeout,
        };
        if self.running.load(Ordering::Acquire) {
            // Only a unix connect to a full backlog can outlast the timeout (it has none):
            // each interval it stays blocked counts as a failed check.
            if job == Job::Check
                && self
                    .started
                    .is_some_and(|started| now.saturating_duration_since(started) > timeout)
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
                let verdict = exchange(&pool, id, timeout);
                if job == Job::Check {
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

/// One exchange with server `id` of `pool` within `timeout`: the pool's `health_check`
/// request for HTTP, `FCGI_GET_VALUES` for FastCGI (whose answer is kept). `Err` says why the
/// server failed it.
fn exchange(pool: &Pool, id: usize, timeout: Duration) -> Result<(), String> {
    let settings = pool.settings();
    let address = &settings.servers[id].address;
    match settings.protocol {
        UpstreamProtocol::FastCgi => {
            let answer = get_values(address, timeout);
            pool.record_values(id, &answer);
            answer.map(|_| ()).map_err(|failure| failure.to_string())
        }
        UpstreamProtocol::Http => {
            let Some(check) = &settings.active else {
                return Ok(());
            };
            match probe(address, check) {
                Ok(status) if status == check.expect => Ok(()),
                Ok(status) => Err(format!("status {status}, expected {}", check.expect)),
                Err(failure) => Err(failure.to_string()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::config::{UpstreamAddress, UpstreamPool, UpstreamProtocol, UpstreamServer};
    use crate::upstream::fastcgi::tests::{Answer, Responder};
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

    fn fastcgi_pool(servers: Vec<UpstreamServer>) -> UpstreamPool {
        let mut settings = UpstreamPool::new("php".into(), servers);
        settings.protocol = UpstreamProtocol::FastCgi;
        settings
    }

    #[test]
    fn fastcgi_checks_ask_get_values_and_mark_down_and_up() {
        let healthy = Responder::start(
            "healthy",
            Answer::Values(vec![("FCGI_MAX_CONNS", "10"), ("FCGI_MPXS_CONNS", "0")]),
        );
        let silent = Responder::start("silent", Answer::Silent);
        let http = Responder::start("http", Answer::Http);
        let mut settings = fastcgi_pool(vec![
            server(healthy.address.clone()),
            server(silent.address.clone()),
            server(http.address.clone()),
        ]);
        settings.active = Some(check(Duration::from_millis(300)));
        let upstreams = Upstreams::new(&[settings]);
        let _ = upstreams.pool(0);
        wait_until(
            Duration::from_secs(10),
            "silent and HTTP marked down",
            || up(&upstreams, 0) && !up(&upstreams, 1) && !up(&upstreams, 2),
        );
        assert!(healthy.asked.load(Ordering::Relaxed) >= 2);
        // A check is a GET_VALUES exchange, never an HTTP request.
        assert_eq!(healthy.names.lock().unwrap().len(), 3);
        *silent.answer.lock().unwrap() = Answer::UnknownType;
        *http.answer.lock().unwrap() = Answer::Values(vec![("FCGI_MAX_CONNS", "2")]);
        wait_until(Duration::from_secs(10), "both back up", || {
            up(&upstreams, 1) && up(&upstreams, 2)
        });
        let pool = upstreams.pool(0);
        wait_until(
            Duration::from_secs(10),
            "limits learnt by the checks",
            || pool.keepalive_for(0) == 10 && pool.keepalive_for(2) == 2,
        );
        assert_eq!(pool.keepalive_for(1), 32, "UNKNOWN_TYPE: keepalive stands");
        let mut metrics = String::new();
        upstreams.render_metrics(&mut metrics);
        for line in [
            format!(
                "ampd_upstream_fastcgi_max_conns{{pool=\"php\",server=\"{}\"}} 10",
                healthy.address
            ),
            format!(
                "ampd_upstream_fastcgi_mpxs_conns{{pool=\"php\",server=\"{}\"}} 0",
                healthy.address
            ),
            format!(
                "ampd_upstream_marked_down_total{{pool=\"php\",server=\"{}\",by=\"health_check\"}} 1",
                silent.address
            ),
        ] {
            assert!(metrics.lines().any(|got| got == line), "{line} not in\n{metrics}");
        }
        assert!(!metrics.contains(&format!(
            "ampd_upstream_fastcgi_max_conns{{pool=\"php\",server=\"{}\"}}",
            silent.address
        )));
    }

    #[test]
    fn fastcgi_limits_are_learnt_once_per_server_on_first_use() {
        let small = Responder::start(
            "small",
            Answer::Values(vec![
                ("FCGI_MAX_CONNS", "3"),
                ("FCGI_MAX_REQS", "3"),
                ("FCGI_MPXS_CONNS", "0"),
            ]),
        );
        let fpm = Responder::start("fpm", Answer::Values(vec![("FCGI_MPXS_CONNS", "0")]));
        let upstreams = Upstreams::new(&[fastcgi_pool(vec![
            server(small.address.clone()),
            server(fpm.address.clone()),
        ])]);
        // Nothing is asked before the pool is used.
        assert!(upstreams.checks.liveness().is_none());
        assert_eq!(small.asked.load(Ordering::Relaxed), 0);
        let pool = upstreams.pool(0).clone();
        assert_eq!(pool.keepalive_for(0), 32, "not learnt yet: the setting");
        let alive = upstreams.checks.liveness().expect("the thread started");
        wait_until(Duration::from_secs(10), "FCGI_MAX_CONNS learnt", || {
            pool.keepalive_for(0) == 3
        });
        // Both answered: nothing more to do, the thread ends (no health_check is set).
        wait_until(Duration::from_secs(10), "the thread ended", || {
            alive.strong_count() == 0
        });
        assert_eq!(
            pool.keepalive_for(1),
            32,
            "php-fpm does not say FCGI_MAX_CONNS"
        );
        let _ = upstreams.pool(0);
        assert_eq!(small.asked.load(Ordering::Relaxed), 1);
        assert_eq!(fpm.asked.load(Ordering::Relaxed), 1);
        assert!(
            upstreams.checks.liveness().unwrap().ptr_eq(&alive),
            "not started again"
        );
        let mut metrics = String::new();
        upstreams.render_metrics(&mut metrics);
        let labels = format!("pool=\"php\",server=\"{}\"", small.address);
        for line in [
            format!("ampd_upstream_fastcgi_max_conns{{{labels}}} 3"),
            format!("ampd_upstream_fastcgi_max_reqs{{{labels}}} 3"),
            format!("ampd_upstream_fastcgi_mpxs_conns{{{labels}}} 0"),
        ] {
            assert!(
                metrics.lines().any(|got| got == line),
                "{line} not in\n{metrics}"
            );
        }
        assert!(!metrics.contains("ampd_upstream_health_checks_total"));
    }

    #[test]
    fn fastcgi_learning_asks_again_until_the_application_answers() {
        let app = Responder::start("late", Answer::Silent);
        let mut settings = fastcgi_pool(vec![server(app.address.clone())]);
        // The learning exchange's timeout.
        settings.connect_timeout = Duration::from_millis(200);
        let upstreams = Upstreams::new(&[settings]);
        let pool = upstreams.pool(0).clone();
        wait_until(
            Duration::from_secs(10),
            "a first, unanswered attempt",
            || app.asked.load(Ordering::Relaxed) >= 1,
        );
        *app.answer.lock().unwrap() = Answer::Values(vec![("FCGI_MAX_CONNS", "1")]);
        wait_until(Duration::from_secs(20), "learnt on a later attempt", || {
            pool.keepalive_for(0) == 1
        });
        assert!(app.asked.load(Ordering::Relaxed) >= 2);
    }

    #[test]
    fn fastcgi_learning_gives_up_on_an_application_that_never_answers() {
        let app = Responder::start("mute", Answer::Close);
        let upstreams = Upstreams::new(&[fastcgi_pool(vec![server(app.address.clone())])]);
        let pool = upstreams.pool(0).clone();
        let alive = upstreams.checks.liveness().unwrap();
        wait_until(Duration::from_secs(10), "the thread ended", || {
            alive.strong_count() == 0
        });
        assert_eq!(app.asked.load(Ordering::Relaxed), 1);
        assert_eq!(pool.keepalive_for(0), 32);
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
