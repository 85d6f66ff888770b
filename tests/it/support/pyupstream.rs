//! `PyUpstream`: tests/fixtures/upstream.py (Python's `http.server`, standard library only) as a
//! child process: GET/HEAD, body echo with its sha256, streamed downloads of the test pattern, a
//! WebSocket echo. Killed on Drop; `kill` ends it abruptly (SIGKILL) while a test runs.
//! Owns: the child process. Must not touch: ampd.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// A running tests/fixtures/upstream.py.
pub struct PyUpstream {
    child: Child,
    /// `None` when it listens on a unix socket.
    addr: Option<SocketAddr>,
    unix: Option<PathBuf>,
    name: String,
}

impl PyUpstream {
    /// Starts the script on 127.0.0.1:0 naming itself `name` (its `X-Upstream`), and waits
    /// (bounded) for its `listening ADDR` line.
    ///
    /// # Panics
    /// If python3 cannot run it or it prints no ready line within 10 s.
    pub fn start(name: &str) -> PyUpstream {
        PyUpstream::start_on(name, 0)
    }

    /// The same on a given port (0: any), to bring a stopped upstream back where it was.
    pub fn start_on(name: &str, port: u16) -> PyUpstream {
        let (child, listening) = spawn(name, &["--port", &port.to_string()]);
        let addr = listening.parse().ok();
        assert!(
            addr.is_some(),
            "upstream.py {name}: listening on {listening:?}"
        );
        PyUpstream {
            child,
            addr,
            unix: None,
            name: name.to_string(),
        }
    }

    /// The same on a unix stream socket at `path`.
    pub fn start_unix(name: &str, path: &Path) -> PyUpstream {
        let (child, listening) = spawn(name, &["--unix", &path.display().to_string()]);
        assert_eq!(listening, format!("unix:{}", path.display()));
        PyUpstream {
            child,
            addr: None,
            unix: Some(path.to_path_buf()),
            name: name.to_string(),
        }
    }

    /// Where it listens over TCP.
    ///
    /// # Panics
    /// If it listens on a unix socket.
    pub fn addr(&self) -> SocketAddr {
        self.addr.expect("a TCP upstream")
    }

    /// Its unix socket, if it listens on one.
    pub fn unix_path(&self) -> Option<&Path> {
        self.unix.as_deref()
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL, and reap: its sockets close as a crashed server's do.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs the script with `args`; the child and what follows `listening ` on its ready line.
fn spawn(name: &str, args: &[&str]) -> (Child, String) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/upstream.py");
    let mut child = Command::new("/usr/bin/python3")
        .arg(&script)
        .args(["--name", name])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|error| panic!("run /usr/bin/python3 {}: {error}", script.display()));
    let stdout = child.stdout.take().expect("piped stdout");
    let (lines_tx, lines_rx) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if lines_tx.send(line).is_err() {
                // Nobody waits any more: keep draining.
            }
        }
    });
    let listening = lines_rx
        .recv_timeout(READY_TIMEOUT)
        .ok()
        .and_then(|line| Some(line.strip_prefix("listening ")?.to_string()));
    let Some(listening) = listening else {
        let _ = child.kill();
        let _ = child.wait();
        panic!("upstream.py {name} printed no `listening ...` within {READY_TIMEOUT:?}");
    };
    (child, listening)
}

impl Drop for PyUpstream {
    fn drop(&mut self) {
        self.kill();
    }
}
