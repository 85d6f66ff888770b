//! The flup WSGI application (tests/fixtures/flup_app.py) and the Python that can run it: flup
//! comes from PyPI only, so scripts/test-python.sh installs it in a virtual environment under
//! `target/test-python` (Debian bookworm's pip refuses system-wide installs, PEP 668).
//! `PyFastCgi` runs it (or tests/fixtures/fastcgi_faults.py, a responder that misbehaves on
//! purpose) as an external FastCGI server on 127.0.0.1:0; for an `[application.NAME]` ampd runs
//! `command_toml()` itself.
//! Owns: the external application's process. Must not touch: ampd.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

const READY_TIMEOUT: Duration = Duration::from_secs(15);

/// The Python with flup: `$AMPD_TEST_PYTHON`, else the virtual environment scripts/test-python.sh
/// makes.
///
/// # Panics
/// If it is missing, with the command that installs it.
pub fn python() -> PathBuf {
    let python = std::env::var_os("AMPD_TEST_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-python/bin/python3")
        });
    assert!(
        python.exists(),
        "{} is missing: run scripts/test-python.sh (flup from PyPI in a venv; scripts/test.sh does)",
        python.display()
    );
    python
}

/// tests/fixtures/flup_app.py.
pub fn app_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/flup_app.py")
}

/// The `command` of an `[application.NAME]` running the app with its socket on descriptor 0,
/// as TOML.
pub fn command_toml() -> String {
    format!(
        "[\"{}\", \"{}\"]",
        python().display(),
        app_script().display()
    )
}

/// A Python FastCGI server over TCP, a child of the test.
pub struct PyFastCgi {
    child: Child,
    addr: SocketAddr,
}

impl PyFastCgi {
    /// flup_app.py on 127.0.0.1:0 with `FLUP_STATE_DIR=state_dir`.
    pub fn flup(state_dir: &Path) -> PyFastCgi {
        let mut command = Command::new(python());
        command
            .arg(app_script())
            .args(["--tcp", "127.0.0.1:0"])
            .env("FLUP_STATE_DIR", state_dir)
            .env("FLUP_TEST_ENV", "tcp");
        PyFastCgi::start(command, "flup_app.py")
    }

    /// tests/fixtures/fastcgi_faults.py (standard library only) on 127.0.0.1:0.
    pub fn faults() -> PyFastCgi {
        let mut command = Command::new("/usr/bin/python3");
        command.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fastcgi_faults.py"));
        PyFastCgi::start(command, "fastcgi_faults.py")
    }

    /// Runs `command` and waits (bounded) for its `listening ADDR` line.
    ///
    /// # Panics
    /// If it cannot start or does not listen within 15 s.
    fn start(mut command: Command, name: &str) -> PyFastCgi {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|error| panic!("spawn {name}: {error}"));
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
        let addr = lines_rx
            .recv_timeout(READY_TIMEOUT)
            .ok()
            .and_then(|line| line.strip_prefix("listening ")?.parse().ok());
        let Some(addr) = addr else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{name} printed no `listening ADDR` within {READY_TIMEOUT:?}");
        };
        PyFastCgi { child, addr }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for PyFastCgi {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
