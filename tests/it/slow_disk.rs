//! AMPED is real (Flash §3, §6): while one request waits on a slow disk (a FUSE filesystem whose
//! reads sleep 1.5 s), `amped` and `reactor` keep serving a cached file at full speed; `sped`,
//! which does disk work inline, stalls. Needs /dev/fuse, fusermount and Debian's python3-fusepy;
//! set AMPD_SKIP_FUSE=1 to skip where FUSE cannot work (otherwise a missing install fails loudly).

use crate::support;

use std::time::{Duration, Instant};
use support::root::pattern_bytes;
use support::*;

const SLOW_READ_SECONDS: &str = "1.5";

for_each_arch!(fn hot_file_served_while_disk_is_slow(arch) {
    let root = TempRoot::new();
    root.file("hot.txt", "hot and cached");
    let source = root.outside_dir().join("slow-source");
    std::fs::create_dir_all(&source).unwrap();
    // One read-ahead window (128 KiB): the whole range is in the page cache, not yet filled, as
    // soon as the first read starts, which is when a residency test is wrong (engine::page_ins).
    let slow_data = pattern_bytes(100 * 1024, 17);
    std::fs::write(source.join("slow.bin"), &slow_data).unwrap();
    let mountpoint = root.dir("fuse");
    let Some(slowfs) = slowfs::mount_or_skip(&source, &mountpoint, SLOW_READ_SECONDS) else {
        return;
    };

    let server = Server::start(Options::new(root.path(), arch));
    let addr = server.addr();
    let mut warm = Conn::open(addr);
    for _ in 0..5 {
        assert_eq!(warm.get("/hot.txt", &[]).body, b"hot and cached");
    }

    // Under `mp` a process holding an idle keep-alive connection takes a new client once that
    // has waited 2 ms for an idle process, and the held connection then waits behind that
    // client's disk read (docs/architecture.md, "Blocking engines"). On a loaded machine the
    // idle processes often miss those 2 ms: the hot connection's process took the slow client
    // and the hot connection's next request waited the whole read (1.35 s, its first request
    // of the window). What `mp` promises is that a process blocked on the disk holds up only
    // its own connections: so no connection is held while the slow client arrives, and the hot
    // connection is opened after its read has begun (the blocked process cannot accept it).
    let warm = (arch != "mp").then_some(warm);
    // Two clients want the slow file. The second arrives while a helper is reading the file in
    // for the first: its pages are then in the page cache but not yet filled, and an event loop
    // that trusted a residency test there would wait for the read itself (engine::page_ins).
    // Under `mp` the second would block a second process, for nothing the first does not show.
    let slow_clients = if arch == "mp" { 1 } else { 2 };
    let slow_requests: Vec<_> = (0..slow_clients)
        .map(|_| {
            let expected = slow_data.clone();
            let request = std::thread::spawn(move || {
                let mut conn = Conn::open(addr);
                conn.set_read_timeout(Duration::from_secs(30));
                let response = conn.get("/fuse/slow.bin", &[]);
                assert_eq!(response.status, 200);
                assert!(response.body == expected, "slow file body differs");
            });
            // Let this request reach the server and start its first read (which takes 1.5 s).
            std::thread::sleep(Duration::from_millis(150));
            request
        })
        .collect();
    let mut hot = warm.unwrap_or_else(|| Conn::open(addr));

    let window = Duration::from_secs(2);
    let started = Instant::now();
    let mut latencies = Vec::new();
    // Which request took longest, and whether it was the first on a new connection.
    let mut slowest = (Duration::ZERO, 0, false);
    let mut fresh = false;
    while started.elapsed() < window {
        let sent = Instant::now();
        let response = hot.get("/hot.txt", &[]);
        let took = sent.elapsed();
        if took > slowest.0 {
            slowest = (took, latencies.len(), fresh);
        }
        latencies.push(took);
        assert_eq!(response.body, b"hot and cached");
        fresh = false;
        // The server ends a connection after its request cap (like nginx's
        // keepalive_requests); a fast client simply reconnects.
        if response.connection_has("close") {
            hot = Conn::open(addr);
            fresh = true;
        }
    }
    let max = latencies.iter().max().copied().unwrap_or_default();
    for request in slow_requests {
        request.join().expect("slow request thread");
    }
    drop(server);
    drop(slowfs);

    if arch == "sped" {
        assert!(
            max >= Duration::from_secs(1),
            "sped does disk reads inline, so a hot request should have stalled ≥ 1 s; max latency \
             {max:?} over {} requests",
            latencies.len()
        );
    } else {
        // A request that waited on the slow read waits ~1.35 s or more (1.5 s less the head
        // start); a loaded machine delays others by a few hundred ms. One second tells them apart.
        assert!(
            latencies.len() >= 50 && max < Duration::from_secs(1),
            "{arch} must keep serving the hot file while the disk is slow: {} requests in {window:?}, \
             max latency {max:?} (request {}, {})",
            latencies.len(),
            slowest.1,
            if slowest.2 { "first on a new connection" } else { "on a kept connection" }
        );
    }
});

// A file larger than the socket's buffers, each read from a disk that answers slowly, to a client
// that does not read at first: under `amped` and `reactor` a helper sends what the socket takes
// (`job::send_or_touch`), pages in the rest, and the loop goes on from where it stopped. The
// body, a range of it and the next request on the connection must come out exact.
for_each_arch!(fn large_file_from_slow_disk_to_slow_reader_arrives_whole(arch) {
    let root = TempRoot::new();
    root.file("after.txt", "next request");
    let source = root.outside_dir().join("slow-large");
    std::fs::create_dir_all(&source).unwrap();
    let data = pattern_bytes(6 << 20, 23);
    std::fs::write(source.join("large.bin"), &data).unwrap();
    let mountpoint = root.dir("fuse");
    let Some(slowfs) = slowfs::mount_or_skip(&source, &mountpoint, "0.003") else {
        return;
    };
    let server = Server::start(Options::new(root.path(), arch));
    let mut conn = Conn::open(server.addr());
    conn.set_read_timeout(Duration::from_secs(30));

    conn.send(support::http::build_request("GET", "/fuse/large.bin", &[]));
    // Not reading yet: the server's writes fill the socket and must wait for the client.
    std::thread::sleep(Duration::from_millis(300));
    let whole = conn.read_response("GET");
    assert_eq!(whole.status, 200);
    assert!(whole.body == data, "whole body differs ({} bytes)", whole.body.len());

    let first = 1_234_567;
    let last = 4_999_999;
    conn.send(support::http::build_request(
        "GET",
        "/fuse/large.bin",
        &[("Range", &format!("bytes={first}-{last}"))],
    ));
    std::thread::sleep(Duration::from_millis(100));
    let part = conn.read_response("GET");
    assert_eq!(part.status, 206);
    assert!(part.body == data[first..=last], "range body differs");

    assert_eq!(conn.get("/after.txt", &[]).body, b"next request");
    drop(server);
    drop(slowfs);
});
