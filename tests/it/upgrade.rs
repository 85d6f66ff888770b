//! The binary upgrade (`SIGUSR2`) over real sockets, under every engine: the running server
//! starts the binary it was started from (after that file was replaced on disk), with the same
//! arguments, passing it the very listening sockets (every per-loop `SO_REUSEPORT` one); once
//! the new process is ready the old one drains and exits. Under load, no connection is refused
//! and no request fails. A new process that cannot start leaves the old one serving.

use crate::support;

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};
use support::*;

fn config(root: &TempRoot, arch: &str) -> PathBuf {
    write_config(
        root,
        arch,
        "pid_file = \"ampd.pid\"\ngrace_period = \"10s\"\n[[site]]\nroot = \"www\"\n",
    )
}

/// A copy of the server binary in `dir`, started through its own path, so the test can replace
/// the file as a package upgrade does.
fn copy_binary(dir: &Path) -> PathBuf {
    let target = dir.join("ampd");
    support::install_file(support::server::binary().as_ref(), &target, 0o755);
    target
}

/// Replace `path` by a fresh copy (a new inode: the running process's file is now deleted).
fn replace_binary(path: &Path) {
    let fresh = path.with_extension("new");
    support::install_file(support::server::binary().as_ref(), &fresh, 0o755);
    std::fs::rename(&fresh, path).unwrap();
}

fn start_copy(binary: &Path, config: &Path) -> Server {
    let script = format!("shift; exec '{}' \"$@\"", binary.display());
    Server::start(Options::config_file(config).wrapped(["sh", "-c", &script, "sh"]))
}

fn read_pid(pid_file: &Path) -> Option<u32> {
    std::fs::read_to_string(pid_file).ok()?.trim().parse().ok()
}

/// The inodes of the listening TCP sockets on `port` (from /proc/net/tcp).
fn listening_inodes(port: u16) -> BTreeSet<u64> {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let local_port = u16::from_str_radix(fields[1].rsplit(':').next()?, 16).ok()?;
            (local_port == port && fields[3] == "0A").then(|| fields[9].parse().ok())?
        })
        .collect()
}

/// Kills the upgraded process when the test ends, however it ends.
struct Reaper(Arc<Mutex<Option<u32>>>);

impl Drop for Reaper {
    fn drop(&mut self) {
        if let Some(pid) = *self.0.lock().unwrap() {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }
}

/// Connection-per-request clients until `stop`: (requests answered 200, failures with why).
/// `answered` counts the 200s as they come, for the test to wait on.
fn load(
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    answered: Arc<AtomicUsize>,
) -> thread::JoinHandle<(usize, Vec<String>)> {
    thread::spawn(move || {
        let mut done = 0;
        let mut failures = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(40);
        while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
            match one_request(addr) {
                Ok(()) => {
                    done += 1;
                    answered.fetch_add(1, Ordering::Relaxed);
                }
                Err(why) => failures.push(why),
            }
        }
        (done, failures)
    })
}

/// Waits (at most 15 s) until the load clients have had `count` requests answered in all.
fn wait_answered(answered: &AtomicUsize, count: usize) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while answered.load(Ordering::Relaxed) < count {
        assert!(
            Instant::now() < deadline,
            "the load got {} of {count} answers",
            answered.load(Ordering::Relaxed)
        );
        thread::sleep(Duration::from_millis(10));
    }
}

/// One request on a connection of its own, read to the server's close.
fn one_request(addr: SocketAddr) -> Result<(), String> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .map_err(|error| format!("connect: {error}"))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream
        .write_all(b"GET /v.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .map_err(|error| format!("write: {error}"))?;
    let mut reply = Vec::new();
    stream
        .read_to_end(&mut reply)
        .map_err(|error| format!("read: {error}"))?;
    let text = String::from_utf8_lossy(&reply);
    if text.starts_with("HTTP/1.1 200 ") && text.ends_with("\r\n\r\nv") {
        Ok(())
    } else {
        Err(format!("reply: {text:?}"))
    }
}

for_each_arch!(fn sigusr2_replaces_the_binary_without_refusing_a_connection(arch) {
    let root = TempRoot::new();
    root.outside_file("www/v.txt", "v");
    let config = config(&root, arch);
    let binary = copy_binary(root.outside_dir());
    let pid_file = root.outside_dir().join("ampd.pid");
    let mut server = start_copy(&binary, &config);
    let addr = server.addr();
    let old_pid = server.pid();
    let sockets = listening_inodes(addr.port());
    assert!(!sockets.is_empty());
    let new_pid = Arc::new(Mutex::new(None));
    let _reaper = Reaper(new_pid.clone());

    let stop = Arc::new(AtomicBool::new(false));
    let counted = Arc::new(AtomicUsize::new(0));
    let clients: Vec<_> = (0..4)
        .map(|_| load(addr, stop.clone(), counted.clone()))
        .collect();
    let answered = || get(addr, "/v.txt").status;
    assert_eq!(answered(), 200);
    replace_binary(&binary);
    // Every client under way before the signal, so the upgrade happens under load.
    wait_answered(&counted, 20);
    server.signal("USR2");
    // The new process writes the pid file once ready; the old one then drains and exits.
    let deadline = Instant::now() + Duration::from_secs(15);
    let upgraded = loop {
        match read_pid(&pid_file) {
            Some(pid) if pid != old_pid => break pid,
            _ if Instant::now() >= deadline => panic!("no new process: {}", server.stderr()),
            _ => thread::sleep(Duration::from_millis(20)),
        }
    };
    *new_pid.lock().unwrap() = Some(upgraded);
    assert_eq!(server.wait_exit(Duration::from_secs(15)), Some(0), "{}", server.stderr());
    // Served by the new process for a while after the old one left.
    wait_answered(&counted, counted.load(Ordering::Relaxed) + 20);
    stop.store(true, Ordering::Relaxed);
    let mut total = 0;
    let mut failures = Vec::new();
    for client in clients {
        let (done, failed) = client.join().unwrap();
        total += done;
        failures.extend(failed);
    }
    assert!(failures.is_empty(), "{} failures of {total}: {:?}", failures.len(), &failures[..failures.len().min(5)]);
    assert!(total > 50, "too little load to mean anything: {total}");
    assert_eq!(answered(), 200);

    // The new process is the replaced file (not the deleted inode), with the same arguments,
    // serving the very same listening sockets.
    let exe = std::fs::read_link(format!("/proc/{upgraded}/exe")).unwrap();
    assert_eq!(exe, binary, "{}", exe.display());
    let cmdline = std::fs::read(format!("/proc/{upgraded}/cmdline")).unwrap();
    let words: Vec<String> = cmdline
        .split(|&byte| byte == 0)
        .filter(|word| !word.is_empty())
        .map(|word| String::from_utf8_lossy(word).into_owned())
        .collect();
    assert_eq!(
        words,
        [binary.display().to_string(), "run".into(), "-c".into(), config.display().to_string()]
    );
    assert_eq!(listening_inodes(addr.port()), sockets, "the same sockets, every one");
    let stderr = server.stderr();
    assert!(stderr.contains(&format!("upgrade: process {upgraded} is ready")), "{stderr}");
});

for_each_arch!(fn a_new_process_that_fails_leaves_the_old_one_serving(arch) {
    let root = TempRoot::new();
    root.outside_file("www/v.txt", "v");
    let config = config(&root, arch);
    let pid_file = root.outside_dir().join("ampd.pid");
    let mut server = Server::start(Options::config_file(&config));
    let addr = server.addr();
    let mut kept = Conn::open(addr);
    assert_eq!(kept.get("/v.txt", &[]).status, 200);
    // The new process reads the file again and refuses it.
    std::fs::write(&config, "listen = \"127.0.0.1:0\"\n[[site]]\nroot = \"www\"\nautoindx = 1\n").unwrap();
    server.signal("USR2");
    assert!(
        server.wait_for_stderr("upgrade failed", Duration::from_secs(15)),
        "{}",
        server.stderr()
    );
    let stderr = server.stderr();
    assert!(stderr.contains("exited with status 1 before it was ready"), "{stderr}");
    assert!(stderr.contains("keeps serving"), "{stderr}");
    assert!(server.is_running());
    assert_eq!(read_pid(&pid_file), Some(server.pid()));
    assert_eq!(kept.get("/v.txt", &[]).status, 200);
    assert_eq!(get(addr, "/v.txt").status, 200);
});

// A server that switched to `user` after binding upgrades as that user: the new process is
// started by it, finds the sockets bound, and has nothing to switch.
#[test]
fn an_upgrade_after_dropping_privileges_runs_as_the_same_user() {
    if !is_root_user() {
        return;
    }
    let root = TempRoot::new();
    root.outside_file("www/v.txt", "v");
    let config = write_config(
        &root,
        "reactor",
        "user = \"nobody\"\n[[site]]\nroot = \"www\"\n",
    );
    let mut server = Server::start(Options::config_file(&config));
    let addr = server.addr();
    let new_pid = Arc::new(Mutex::new(None));
    let _reaper = Reaper(new_pid.clone());
    server.signal("USR2");
    let deadline = Instant::now() + Duration::from_secs(15);
    let pid = loop {
        let stderr = server.stderr();
        if let Some(at) = stderr.find("upgrade: process ") {
            let rest = &stderr[at + "upgrade: process ".len()..];
            break rest.split(' ').next().unwrap().parse::<u32>().unwrap();
        }
        assert!(!stderr.contains("upgrade failed"), "{stderr}");
        assert!(Instant::now() < deadline, "{stderr}");
        thread::sleep(Duration::from_millis(20));
    };
    *new_pid.lock().unwrap() = Some(pid);
    assert_eq!(
        server.wait_exit(Duration::from_secs(15)),
        Some(0),
        "{}",
        server.stderr()
    );
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let uid_line = status
        .lines()
        .find(|line| line.starts_with("Uid:"))
        .unwrap();
    assert!(
        uid_line
            .split_whitespace()
            .skip(1)
            .all(|uid| uid == "65534"),
        "{uid_line}"
    );
    assert_eq!(get(addr, "/v.txt").status, 200);
}
