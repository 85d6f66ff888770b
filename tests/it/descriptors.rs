//! Running out of file descriptors (EMFILE) must not spin the event loop at 100% CPU or drop
//! the listener: the server pauses accepting, keeps serving the connections it has, and takes
//! the waiting ones once descriptors are free again.

use crate::support;

use std::net::TcpStream;
use std::process::Command;
use std::time::Duration;
use support::*;

/// CPU time (user + system) of a process, in clock ticks, from /proc/PID/stat.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("read /proc/PID/stat");
    // Fields after the command name, which is in parentheses and may contain spaces.
    let rest = &stat[stat.rfind(')').expect("comm") + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

for_each_arch!(fn out_of_descriptors_pauses_accept(arch) {
    let root = TempRoot::new();
    root.file("ok.txt", "ok");
    let server = Server::start(Options::new(root.path(), arch).args(["--threads", "1"]));
    let limit = Command::new("prlimit")
        .args(["--pid", &server.pid().to_string(), "--nofile=48:48"])
        .status()
        .expect("run prlimit (util-linux)");
    assert!(limit.success(), "prlimit failed");

    // Far more connections than descriptors: the server accepts what it can, the rest wait in
    // the backlog.
    let mut held: Vec<TcpStream> = (0..120)
        .map(|_| TcpStream::connect(server.addr()).expect("connect (backlog)"))
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let before = cpu_ticks(server.pid());
    std::thread::sleep(Duration::from_secs(1));
    let spent = cpu_ticks(server.pid()) - before;
    assert!(spent < 30, "{arch}: {spent} ticks of CPU in 1 s while out of descriptors (spinning?)");

    // Free the descriptors; the listener must still be there and serving. The server closes
    // its side of each connection as it reads the end of stream (the waiting ones once it has
    // accepted them): until then a request may still find the table full and be answered
    // 503 + Retry-After (tests/it/descriptor_budget.rs), never anything else; within a bounded
    // time every request is served.
    held.clear();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut served = 0;
    while served < 20 {
        let mut conn = Conn::open(server.addr());
        let response = conn.get("/ok.txt", &[]);
        match response.status {
            200 => served += 1,
            503 if std::time::Instant::now() < deadline => {
                assert!(response.header("Retry-After").is_some(), "{response:?}");
                std::thread::sleep(Duration::from_millis(20));
            }
            status => panic!("{arch}: {status} after the clients left: {response:?}"),
        }
    }
});
