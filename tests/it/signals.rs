//! Signals and lifecycle over real sockets: `SIGHUP` reload under load (no error, no reset, new
//! requests see the new config), a bad reload keeps the old config, `SIGTERM` under load
//! finishes every in-flight request and exits 0, the grace period bounds it, `SIGQUIT` exits at
//! once, health says `503` while draining, the pid file, systemd notify and socket activation,
//! and dropping privileges after binding.

use crate::support;

use std::io::Read;
use std::net::SocketAddr;
use std::os::unix::net::UnixDatagram;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};
use support::*;

fn versioned(root: &TempRoot, arch: &str, version: &str, extra: &str) -> std::path::PathBuf {
    write_config(
        root,
        arch,
        &format!(
            "grace_period = \"10s\"\n{extra}\n[[site]]\nroot = \"{version}\"\n\n  [[site.location]]\n  path = \"/health\"\n  exact = true\n  handler = \"health\"\n"
        ),
    )
}

for_each_arch!(fn reload_under_load_drops_nothing(arch) {
    let root = TempRoot::new();
    root.outside_file("one/v.txt", "one");
    root.outside_file("two/v.txt", "two");
    let config = versioned(&root, arch, "one", "");
    let server = Server::start(Options::config_file(&config));
    let addr = server.addr();
    let stop = Arc::new(AtomicBool::new(false));
    let seen_two = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let mut clients = Vec::new();
    for client in 0..4 {
        let (stop, seen_two, done) = (stop.clone(), seen_two.clone(), done.clone());
        clients.push(thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(20);
            let mut conn = Conn::open(addr);
            while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                // Half the clients keep one connection alive across the reload (pipelining
                // two requests at a time); the others open a connection per request.
                if client % 2 == 1 {
                    conn = Conn::open(addr);
                }
                conn.send(support::http::build_request("GET", "/v.txt", &[]).repeat(2));
                for _ in 0..2 {
                    let response = conn.try_read_response("GET").expect("no error or reset during reload");
                    assert_eq!(response.status, 200, "{response:?}");
                    let body = response.body_text();
                    assert!(body == "one" || body == "two", "{body}");
                    if body == "two" {
                        seen_two.fetch_add(1, Ordering::Relaxed);
                    }
                    done.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    let wait_for = |count: usize| {
        let deadline = Instant::now() + Duration::from_secs(10);
        while done.load(Ordering::Relaxed) < count && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(5));
        }
    };
    wait_for(200);
    versioned(&root, arch, "two", "");
    server.signal("HUP");
    assert!(server.wait_for_stderr("configuration reloaded", Duration::from_secs(5)), "{}", server.stderr());
    // New requests see the new root.
    let deadline = Instant::now() + Duration::from_secs(5);
    while seen_two.load(Ordering::Relaxed) < 50 && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(5));
    }
    let before = done.load(Ordering::Relaxed);
    wait_for(before + 200);
    stop.store(true, Ordering::Relaxed);
    for client in clients {
        client.join().expect("a client saw an error");
    }
    assert!(seen_two.load(Ordering::Relaxed) >= 50, "new config not seen");
    assert_eq!(get(addr, "/v.txt").body_text(), "two");
});

for_each_arch!(fn a_bad_reload_keeps_the_old_config(arch) {
    let root = TempRoot::new();
    root.outside_file("one/v.txt", "one");
    let config = versioned(&root, arch, "one", "");
    let server = Server::start(Options::config_file(&config));
    let mut kept = Conn::open(server.addr());
    assert_eq!(kept.get("/v.txt", &[]).body_text(), "one");
    std::fs::write(
        &config,
        "listen = \"127.0.0.1:0\"\n[[site]]\nroot = \"one\"\nautoindx = true\n",
    )
    .unwrap();
    server.signal("HUP");
    assert!(server.wait_for_stderr("reload rejected", Duration::from_secs(5)));
    let stderr = server.stderr();
    assert!(stderr.contains("generation 1 keeps serving"), "{stderr}");
    assert!(
        stderr.contains("ampd.toml:4:1: site.autoindx: unknown field"),
        "{stderr}"
    );
    assert_eq!(
        kept.get("/v.txt", &[]).body_text(),
        "one",
        "open connection unharmed"
    );
    assert_eq!(get(server.addr(), "/v.txt").body_text(), "one");
    // A root that vanished is rejected as well, with the old config still serving.
    std::fs::write(
        &config,
        "listen = \"127.0.0.1:0\"\n[[site]]\nroot = \"gone\"\n",
    )
    .unwrap();
    server.signal("HUP");
    let deadline = Instant::now() + Duration::from_secs(5);
    while server.stderr().matches("reload rejected").count() < 2 && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(10));
    }
    assert!(server.stderr().contains("site.root"), "{}", server.stderr());
    assert_eq!(get(server.addr(), "/v.txt").body_text(), "one");
});

/// Reads a response slowly (so it is in flight when the signal arrives); `begun` counts the
/// downloads whose first bytes have arrived.
fn slow_download(addr: SocketAddr, path: &str, begun: &AtomicUsize) -> std::io::Result<Vec<u8>> {
    let mut conn = Conn::open(addr);
    conn.send(support::http::build_request("GET", path, &[]));
    let stream = conn.stream();
    let mut all = Vec::new();
    let mut chunk = [0u8; 64 << 10];
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut reader = stream;
    loop {
        let read = support::read_some(&mut reader, &mut chunk)?;
        if read == 0 || Instant::now() > deadline {
            return Ok(all);
        }
        if all.is_empty() {
            begun.fetch_add(1, Ordering::Relaxed);
        }
        all.extend_from_slice(&chunk[..read]);
        if let Some(head_end) = support::http::find(&all, b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&all[..head_end]).to_lowercase();
            let length: usize = head
                .lines()
                .find_map(|line| line.strip_prefix("content-length: "))
                .and_then(|value| value.trim().parse().ok())
                .unwrap_or(0);
            if all.len() >= head_end + 4 + length {
                return Ok(all[head_end + 4..].to_vec());
            }
        }
        thread::sleep(Duration::from_millis(15));
    }
}

/// Starts `count` slow downloads of `path` and returns once each has its first bytes: every
/// one is then a response in flight.
fn downloads_in_flight(
    addr: SocketAddr,
    path: &'static str,
    count: usize,
) -> Vec<thread::JoinHandle<std::io::Result<Vec<u8>>>> {
    let begun = Arc::new(AtomicUsize::new(0));
    let downloads = (0..count)
        .map(|_| {
            let begun = begun.clone();
            thread::spawn(move || slow_download(addr, path, &begun))
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(10);
    while begun.load(Ordering::Relaxed) < count {
        assert!(Instant::now() < deadline, "downloads never began");
        thread::sleep(Duration::from_millis(5));
    }
    downloads
}

/// Sends a request for `path` on a new connection that is then never read, and returns it once
/// the first bytes of the response have arrived: a response stuck in flight.
fn stuck_in_flight(addr: SocketAddr, path: &str) -> Conn {
    let mut stuck = Conn::open(addr);
    stuck.send(support::http::build_request("GET", path, &[]));
    stuck.set_read_timeout(Duration::from_secs(10));
    let mut first = [0u8; 1];
    (&mut stuck.stream())
        .read_exact(&mut first)
        .expect("the response begins");
    stuck
}

for_each_arch!(fn sigterm_finishes_in_flight_requests(arch) {
    let root = TempRoot::new();
    let big = support::root::pattern_bytes(3 << 20, 7);
    root.outside_file("one/big.bin", &big);
    root.outside_file("one/v.txt", "one");
    let config = versioned(&root, arch, "one", "[limits]\nmin_send_rate = 0\n");
    let mut server = Server::start(Options::config_file(&config));
    let addr = server.addr();
    // An idle keep-alive connection: closed cleanly (EOF, not a reset) by the drain.
    let mut idle = Conn::open(addr);
    assert_eq!(idle.get("/v.txt", &[]).body_text(), "one");
    // A connection with half a request: answered (Connection: close) once it completes.
    let mut partial = Conn::open(addr);
    partial.send("GET /health HTTP/1.1\r\nHost: t\r\n");
    let downloads = downloads_in_flight(addr, "/big.bin", 4);
    server.signal("TERM");
    assert!(server.wait_for_stderr("graceful stop", Duration::from_secs(5)));
    partial.send("\r\n");
    let health = partial.read_response("GET");
    assert_eq!(health.status, 503, "health says draining: {health:?}");
    assert!(health.connection_has("close"));
    for download in downloads {
        let body = download.join().unwrap().expect("download completes without error");
        assert!(body == big, "in-flight body cut short: {} of {} bytes", body.len(), big.len());
    }
    assert_eq!(idle.read_to_end().expect("clean close, no reset"), b"");
    assert_eq!(server.wait_exit(Duration::from_secs(10)), Some(0), "{}", server.stderr());
    assert!(std::net::TcpStream::connect(addr).is_err(), "still accepting after exit");
});

for_each_arch!(fn grace_period_bounds_the_drain_and_quit_is_immediate(arch) {
    let root = TempRoot::new();
    root.outside_file("one/big.bin", support::root::pattern_bytes(8 << 20, 3));
    let config = versioned(&root, arch, "one", "").with_file_name("ampd.toml");
    std::fs::write(
        &config,
        std::fs::read_to_string(&config)
            .unwrap()
            .replace("grace_period = \"10s\"", "grace_period = \"1s\""),
    )
    .unwrap();
    let mut server = Server::start(Options::config_file(&config));
    // A client that never reads keeps its response in flight forever.
    let _stuck = stuck_in_flight(server.addr(), "/big.bin");
    let started = Instant::now();
    server.signal("TERM");
    assert_eq!(server.wait_exit(Duration::from_secs(10)), Some(0));
    let took = started.elapsed();
    // Not before the 1 s grace period; the stuck client would hold the drain forever, so any
    // bound tells "bounded" from "not": 5 s leaves a loaded machine room.
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(5),
        "{took:?}"
    );

    // SIGQUIT does not wait for the grace period: with 10 s of it (`versioned`'s), an exit
    // within 5 s is one that did not wait, on a machine however loaded.
    let config = versioned(&root, arch, "one", "");
    let mut server = Server::start(Options::config_file(&config));
    let _stuck = stuck_in_flight(server.addr(), "/big.bin");
    let started = Instant::now();
    server.signal("QUIT");
    assert_eq!(server.wait_exit(Duration::from_secs(12)), Some(0));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
});

// Under mp only the master talks to systemd (NotifyAccess=main): the same four messages.
for_each_arch!(fn pid_file_and_systemd_notify(arch) {
    let root = TempRoot::new();
    root.outside_file("one/v.txt", "one");
    let pid_file = root.outside_dir().join("ampd.pid");
    let socket_path = root.outside_dir().join("notify.sock");
    let notify = UnixDatagram::bind(&socket_path).unwrap();
    notify
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let config = versioned(&root, arch, "one", "pid_file = \"ampd.pid\"");
    let mut server = Server::start(
        Options::config_file(&config).env("NOTIFY_SOCKET", &socket_path.display().to_string()),
    );
    let mut message = [0u8; 256];
    let mut next = || {
        // A signal to this test process (the harness's children exiting) may cut the wait.
        let count = loop {
            match notify.recv(&mut message) {
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
                received => break received.expect("a notification"),
            }
        };
        String::from_utf8_lossy(&message[..count]).into_owned()
    };
    assert_eq!(next(), format!("READY=1\nMAINPID={}", server.pid()));
    assert_eq!(
        std::fs::read_to_string(&pid_file).unwrap().trim(),
        server.pid().to_string()
    );
    server.signal("HUP");
    assert!(next().starts_with("RELOADING=1\nMONOTONIC_USEC="));
    assert_eq!(next(), "READY=1");
    server.signal("TERM");
    assert_eq!(next(), "STOPPING=1");
    assert_eq!(server.wait_exit(Duration::from_secs(10)), Some(0));
    assert!(!pid_file.exists(), "pid file removed on a graceful exit");
});

for_each_arch!(fn socket_activation_serves_the_passed_socket(arch) {
    let root = TempRoot::new();
    root.outside_file("one/v.txt", "activated");
    // What systemd does: bind, put the socket at descriptor 3, set LISTEN_PID/LISTEN_FDS, exec.
    let wrapper = r#"
import os, socket, sys
listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", 0))
listener.listen(64)
if listener.fileno() != 3:
    os.dup2(listener.fileno(), 3)
os.set_inheritable(3, True)
os.environ["LISTEN_PID"] = str(os.getpid())
os.environ["LISTEN_FDS"] = "1"
os.execv(sys.argv[1], sys.argv[1:])
"#;
    let config = versioned(&root, arch, "one", "");
    // listen in the file is ignored: the passed socket is used (by every loop, ring, thread or
    // worker process).
    let server = Server::start(Options::config_file(&config).wrapped(["python3", "-c", wrapper]));
    for _ in 0..4 {
        assert_eq!(get(server.addr(), "/v.txt").body_text(), "activated");
    }
});

for_each_arch!(fn privileges_are_dropped_after_binding(arch) {
    let root = TempRoot::new();
    root.outside_file("one/v.txt", "as nobody");
    let config = versioned(&root, arch, "one", "user = \"nobody\"");
    if !is_root_user() {
        // Without root the switch is impossible: a clear one-line failure.
        let output = std::process::Command::new(support::server::binary())
            .args(["run", "-c", &config.display().to_string()])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(1));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("needs ampd to start as root"), "{stderr}");
        return;
    }
    // The temporary root must be readable by nobody.
    let server = Server::start(Options::config_file(&config));
    let status = std::fs::read_to_string(format!("/proc/{}/status", server.pid())).unwrap();
    let uid_line = status
        .lines()
        .find(|line| line.starts_with("Uid:"))
        .unwrap()
        .to_owned();
    let uids: Vec<&str> = uid_line.split_whitespace().skip(1).collect();
    assert_eq!(uids, ["65534"; 4], "{uid_line}");
    let gid_line = status
        .lines()
        .find(|line| line.starts_with("Gid:"))
        .unwrap();
    assert!(
        !gid_line.split_whitespace().skip(1).any(|gid| gid == "0"),
        "{gid_line}"
    );
    assert_eq!(get(server.addr(), "/v.txt").body_text(), "as nobody");
});

// What a load balancer needs to see (docs/deploy.md): for `drain_delay` after SIGTERM the
// health endpoint answers 503 while new connections are still accepted and served (every
// response with `Connection: close`, so persistent clients reconnect through the balancer);
// then the listener closes and the usual drain runs.
for_each_arch!(fn drain_delay_announces_the_stop_before_the_listener_closes(arch) {
    let root = TempRoot::new();
    root.outside_file("one/v.txt", "one");
    let config = versioned(&root, arch, "one", "drain_delay = \"2s\"");
    let mut server = Server::start(Options::config_file(&config));
    let addr = server.addr();
    let mut kept = Conn::open(addr);
    assert_eq!(kept.get("/v.txt", &[]).body_text(), "one");
    assert_eq!(get(addr, "/health").status, 200);
    let signalled = Instant::now();
    server.signal("TERM");
    assert!(server.wait_for_stderr("graceful stop", Duration::from_secs(5)), "{}", server.stderr());
    // Health turns 503 first (bounded wait: the state reaches every loop on its next wake-up).
    let deadline = Instant::now() + Duration::from_secs(1);
    let health = loop {
        let health = get(addr, "/health");
        if health.status == 503 || Instant::now() >= deadline {
            break health;
        }
        thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(health.status, 503, "{health:?}");
    assert!(health.connection_has("close"), "{health:?}");
    // New connections are still served during the delay, and so is a kept-alive one, each
    // told to close.
    let fresh = get(addr, "/v.txt");
    assert_eq!(fresh.status, 200, "{fresh:?}");
    assert!(fresh.connection_has("close"), "{fresh:?}");
    let again = kept.get("/v.txt", &[]);
    assert_eq!(again.status, 200, "{again:?}");
    assert!(again.connection_has("close"), "{again:?}");
    assert!(
        signalled.elapsed() < Duration::from_millis(1800),
        "checks took too long to mean anything: {:?}",
        signalled.elapsed()
    );
    // Then the listener closes and the server exits: not before the delay.
    assert_eq!(server.wait_exit(Duration::from_secs(10)), Some(0), "{}", server.stderr());
    assert!(
        signalled.elapsed() >= Duration::from_millis(1900),
        "exited before drain_delay: {:?}",
        signalled.elapsed()
    );
    assert!(std::net::TcpStream::connect(addr).is_err(), "still accepting after exit");
});

// A second SIGTERM during the delay stops at once.
for_each_arch!(fn a_second_sigterm_cuts_the_drain_delay_short(arch) {
    let root = TempRoot::new();
    root.outside_file("one/v.txt", "one");
    let config = versioned(&root, arch, "one", "drain_delay = \"30s\"");
    let mut server = Server::start(Options::config_file(&config));
    server.signal("TERM");
    assert!(server.wait_for_stderr("graceful stop", Duration::from_secs(5)));
    let started = Instant::now();
    server.signal("TERM");
    assert_eq!(server.wait_exit(Duration::from_secs(5)), Some(0), "{}", server.stderr());
    assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
});

// Once the delay is over the port refuses (a balancer retries elsewhere at once) while a
// request in flight still finishes: no connection waits in a backlog nobody accepts from.
for_each_arch!(fn after_drain_delay_the_port_refuses_while_requests_finish(arch) {
    let root = TempRoot::new();
    let big = support::root::pattern_bytes(16 << 20, 5);
    root.outside_file("one/big.bin", &big);
    let config = versioned(&root, arch, "one", "drain_delay = \"1s\"\n[limits]\nmin_send_rate = 0\n");
    let mut server = Server::start(Options::config_file(&config));
    let addr = server.addr();
    let download = downloads_in_flight(addr, "/big.bin", 1).pop().unwrap();
    let signalled = Instant::now();
    server.signal("TERM");
    assert!(server.wait_for_stderr("graceful stop", Duration::from_secs(5)));
    // Connections are accepted for the 1 s of the delay, then refused.
    let deadline = Instant::now() + Duration::from_secs(4);
    let refused = loop {
        match std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(500)) {
            Err(error) => break Some(error),
            Ok(_) if Instant::now() >= deadline => break None,
            Ok(_) => thread::sleep(Duration::from_millis(50)),
        }
    };
    let refused = refused.unwrap_or_else(|| panic!("still accepting {:?} after SIGTERM", signalled.elapsed()));
    assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused, "{refused}");
    assert!(server.is_running(), "the download should still be in flight");
    let body = download.join().unwrap().expect("download completes");
    assert!(body == big, "in-flight body cut short: {} of {} bytes", body.len(), big.len());
    assert_eq!(server.wait_exit(Duration::from_secs(10)), Some(0), "{}", server.stderr());
});

// Requests waiting in the listen backlog when a graceful stop begins were sent before it: every
// engine takes the backlog (`engine::core::take_backlog`) and answers them, none is reset with
// the listener. The server is stopped (SIGSTOP) while they connect and send, so that the stop
// and the waiting connections meet in the same turn.
for_each_arch!(fn requests_waiting_in_the_backlog_at_a_stop_are_answered(arch) {
    let root = TempRoot::new();
    root.outside_file("one/v.txt", "one");
    let config = versioned(&root, arch, "one", "");
    let mut server = Server::start(Options::config_file(&config));
    let addr = server.addr();
    assert_eq!(support::http::get(addr, "/v.txt").status, 200);
    server.signal("STOP");
    let mut waiting: Vec<Conn> = (0..16)
        .map(|_| {
            let mut conn = Conn::open(addr);
            conn.send(support::http::build_request("GET", "/v.txt", &[]));
            conn
        })
        .collect();
    server.signal("TERM");
    server.signal("CONT");
    for (number, conn) in waiting.iter_mut().enumerate() {
        conn.set_read_timeout(Duration::from_secs(10));
        let response = conn
            .try_read_response("GET")
            .unwrap_or_else(|error| {
                panic!("request {number} of the backlog: {error}\n{}", server.stderr())
            });
        assert_eq!((response.status, &response.body[..]), (200, &b"one"[..]), "request {number}");
    }
    assert_eq!(server.wait_exit(Duration::from_secs(15)), Some(0), "{}", server.stderr());
});
