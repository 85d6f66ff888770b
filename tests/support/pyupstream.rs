//! `PyUpstream`: tests/fixtures/upstream.py (Python's `http.server`, standard library only) as a
//! child process: GET/HEAD, body echo with its sha256, streamed downloads of the test pattern, a
//! WebSocket echo. Killed on Drop; `kill` ends it abruptly (SIGKILL) while a test runs.
//! Owns: the child process. Must not touch: ampd.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// A running tests/fixtures/upstream.py.
pub struct PyUpstream {
    child: Child,
    addr: SocketAddr,
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
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/upstream.py");
        let mut child = Command::new("/usr/bin/python3")
            .arg(&script)
            .args(["--name", name, "--port", &port.to_string()])
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
        let line = lines_rx.recv_timeout(READY_TIMEOUT);
        let addr = line
            .ok()
            .and_then(|line| line.strip_prefix("listening ")?.parse().ok());
        let Some(addr) = addr else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("upstream.py {name} printed no `listening ADDR` within {READY_TIMEOUT:?}");
        };
        PyUpstream {
            child,
            addr,
            name: name.to_string(),
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
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

impl Drop for PyUpstream {
    fn drop(&mut self) {
        self.kill();
    }
}
