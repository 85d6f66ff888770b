//! What the integration tests share: a deliberately broken HTTP server on 127.0.0.1 (port 0)
//! and a runner for the built `ampd-bench` binary.
//!
//! The server answers by path, one behaviour per path, so a replayed log decides exactly which
//! faults a run meets:
//!
//! | path       | answer                                                               |
//! |------------|----------------------------------------------------------------------|
//! | `/good`    | 200, `Content-Length: 5`, `hello`                                    |
//! | `/chunked` | 200, chunked `hello world` (11 bytes)                               |
//! | `/long`    | 200, `Content-Length: 5` but `hello world` (wrong length)            |
//! | `/short`   | 200, `Content-Length: 10`, `hello`, then close (truncated)           |
//! | `/slow`    | nothing for 1.5 s (a timeout when `--timeout` is shorter)            |
//! | `/late`    | `/good` after 150 ms (a slow first byte within the timeout)          |
//! | `/status`  | `HTTP/1.1 2x0 OK` (bad status line)                                  |
//! | `/header`  | a header line without a colon (bad header)                           |
//! | other      | 404 with a 9-byte body                                               |

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

pub struct BrokenServer {
    pub port: u16,
    /// Connections accepted so far.
    pub accepted: Arc<AtomicU64>,
    /// Every request target received, in arrival order.
    pub paths: Arc<Mutex<Vec<String>>>,
}

impl BrokenServer {
    pub fn start() -> BrokenServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let accepted = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&accepted);
        let paths = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&paths);
        thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                counter.fetch_add(1, Ordering::SeqCst);
                let seen = Arc::clone(&seen);
                thread::spawn(move || serve_connection(stream, &seen));
            }
        });
        BrokenServer {
            port,
            accepted,
            paths,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

fn serve_connection(mut stream: TcpStream, seen: &Mutex<Vec<String>>) {
    let mut pending = Vec::new();
    let mut chunk = [0u8; 4096];
    // Bounded: a test connection lives a few seconds at most.
    stream.set_read_timeout(Some(Duration::from_secs(20))).ok();
    loop {
        while let Some(end) = pending.windows(4).position(|window| window == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&pending[..end]).into_owned();
            pending.drain(..end + 4);
            let path = head.split(' ').nth(1).unwrap_or("/").to_owned();
            seen.lock().unwrap().push(path.clone());
            let close = head.to_ascii_lowercase().contains("connection: close");
            if !answer(&mut stream, &path) || close {
                return;
            }
        }
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(count) => pending.extend_from_slice(&chunk[..count]),
        }
    }
}

/// Writes the answer for `path`; false when the connection must end.
fn answer(stream: &mut TcpStream, path: &str) -> bool {
    let (bytes, keep): (&[u8], bool) = match path {
        "/good" => (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", true),
        "/chunked" => (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
            true,
        ),
        "/long" => (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello world", true),
        "/short" => (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello", false),
        "/slow" => {
            thread::sleep(Duration::from_millis(1500));
            (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", true)
        }
        "/late" => {
            thread::sleep(Duration::from_millis(150));
            (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", true)
        }
        "/status" => (b"HTTP/1.1 2x0 OK\r\nContent-Length: 0\r\n\r\n", true),
        "/header" => (b"HTTP/1.1 200 OK\r\nNo colon\r\nContent-Length: 0\r\n\r\n", true),
        _ => (b"HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\nnot found", true),
    };
    // One write per response, so a wrong-length answer arrives in one piece.
    stream.write_all(bytes).is_ok() && keep
}

/// Runs the built binary with a time bound.
pub fn ampd_bench(arguments: &[&str]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ampd-bench"))
        .args(arguments)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            child.kill().ok();
            panic!("ampd-bench {arguments:?} ran for more than 30 s");
        }
        thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().unwrap()
}

/// `ampd-bench` exited 0; its standard error otherwise.
pub fn assert_succeeded(output: &Output) {
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A fresh temporary directory for one test, removed when the test is done with it.
pub fn temp_dir(name: &str) -> TempDir {
    let dir = std::env::temp_dir().join(format!("ampd-bench-it-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    TempDir(dir)
}

/// A directory under the system's temporary directory, removed on drop.
pub struct TempDir(std::path::PathBuf);

impl std::ops::Deref for TempDir {
    type Target = std::path::Path;

    fn deref(&self) -> &std::path::Path {
        &self.0
    }
}

impl AsRef<std::path::Path> for TempDir {
    fn as_ref(&self) -> &std::path::Path {
        &self.0
    }
}

impl AsRef<std::ffi::OsStr> for TempDir {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.0.as_os_str()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A Common Log Format line for a GET of `path` answered `status` with `bytes`.
pub fn log_line(path: &str, status: u16, bytes: u64) -> String {
    format!("127.0.0.1 - - [23/Nov/2026:00:00:00 +0000] \"GET {path} HTTP/1.1\" {status} {bytes}\n")
}

pub fn json(path: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}
