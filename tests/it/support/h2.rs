//! HTTP/2 clients for the whole-server tests: tests/fixtures/h2_client.py (Python `h2`: many
//! streams on one connection, small windows, request bodies, resets, a signal mid-download),
//! tests/fixtures/h2_flood.py (one connection sending one kind of abusive frame sequence) and
//! `h2load` (nghttp2-client) for a request rate. All run Debian's `/usr/bin/python3`, which has
//! python3-h2, python3-hpack and python3-hyperframe.
//! Owns: those client processes (killed on Drop or when their time is up). Must not touch: the
//! server (only the bytes on the wire and, for a graceful stop, a signal the client sends).

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use serde_json::Value;

/// The Python that has `h2`, `hpack` and `hyperframe` (the shell's `python3` may be another).
pub const PYTHON: &str = "/usr/bin/python3";

fn fixture(name: &str) -> PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// Spawns `python3 FIXTURE` with `command` as one JSON line on stdin; its stdout lines arrive on
/// the returned channel.
fn spawn_fixture(name: &str, command: &Value) -> (Child, mpsc::Receiver<String>) {
    let mut child = Command::new(PYTHON)
        .arg(fixture(name))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|error| panic!("{PYTHON} must be installed (python3-h2): {error}"));
    let mut stdin = child.stdin.take().expect("piped stdin");
    stdin
        .write_all(format!("{command}\n").as_bytes())
        .expect("write the command");
    drop(stdin);
    let stdout = child.stdout.take().expect("piped stdout");
    let (lines, receiver) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    (child, receiver)
}

/// The next line of a fixture within `within`, or a panic naming what it wrote on stderr.
fn next_line(
    child: &mut Child,
    lines: &mpsc::Receiver<String>,
    within: Duration,
    what: &str,
) -> String {
    match lines.recv_timeout(within) {
        Ok(line) => line,
        Err(_) => {
            let _ = child.kill();
            let _ = child.wait();
            let mut stderr = String::new();
            if let Some(mut pipe) = child.stderr.take() {
                let _ = pipe.read_to_string(&mut stderr);
            }
            panic!("{what} wrote nothing within {within:?}; stderr:\n{stderr}");
        }
    }
}

fn parse(line: &str, what: &str) -> Value {
    serde_json::from_str(line).unwrap_or_else(|_| panic!("{what} said {line:?}"))
}

/// Runs h2_client.py once (see its header for the command and the answer). Bounded by the
/// command's `timeout` (default 30 s) plus 10 s.
pub fn h2_client(command: Value) -> Value {
    let limit = Duration::from_secs(command["timeout"].as_u64().unwrap_or(30) + 10);
    let (mut child, lines) = spawn_fixture("h2_client.py", &command);
    let line = next_line(&mut child, &lines, limit, "h2_client.py");
    let _ = child.wait();
    parse(&line, "h2_client.py")
}

/// The same, asserting the exchange went through (`ok`): every request answered or reset as
/// asked, no flow-control or protocol error seen by the `h2` library.
pub fn h2_client_ok(command: Value) -> Value {
    let answer = h2_client(command);
    assert_eq!(answer["ok"], true, "h2_client.py: {answer}");
    answer
}

/// One answer's header `name` (fields are lower case in HTTP/2).
pub fn field<'a>(response: &'a Value, name: &str) -> Option<&'a str> {
    response["headers"].as_array()?.iter().find_map(|pair| {
        let pair = pair.as_array()?;
        (pair[0].as_str()? == name).then(|| pair[1].as_str())?
    })
}

/// A running h2_flood.py: started once its flood began, finished by `result`.
pub struct Flooder {
    child: Child,
    lines: mpsc::Receiver<String>,
    limit: Duration,
}

impl Flooder {
    /// Starts the flooder and waits (bounded) until it says `flooding`: the connection is up and
    /// the first burst is on its way.
    pub fn start(command: Value) -> Flooder {
        let limit = Duration::from_secs(command["duration"].as_u64().unwrap_or(5) + 15);
        let (mut child, lines) = spawn_fixture("h2_flood.py", &command);
        let first = next_line(&mut child, &lines, Duration::from_secs(10), "h2_flood.py");
        assert_eq!(first, "flooding", "h2_flood.py {command}: {first}");
        Flooder {
            child,
            lines,
            limit,
        }
    }

    /// Waits for the flooder's report (bounded: its duration plus 15 s).
    pub fn result(mut self) -> Value {
        let line = next_line(&mut self.child, &self.lines, self.limit, "h2_flood.py");
        parse(&line, "h2_flood.py")
    }
}

impl Drop for Flooder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What `h2load` measured.
#[derive(Clone, Copy, Debug)]
pub struct Rate {
    pub per_second: f64,
    pub succeeded: u64,
    pub failed: u64,
}

/// `h2load -c CONNECTIONS -m STREAMS -D SECONDS URL` (HTTP/2; `http://` is prior knowledge):
/// its requests per second. Bounded by `timeout` 20 s past the duration.
pub fn h2load(url: &str, connections: u32, streams: u32, seconds: u32) -> Rate {
    let output = Command::new("timeout")
        .args(["-k", "2", &(seconds + 20).to_string(), "h2load"])
        .args(["-c", &connections.to_string(), "-m", &streams.to_string()])
        .args(["-D", &seconds.to_string(), url])
        .stdin(Stdio::null())
        .output()
        .expect("h2load must be installed (apt-get install nghttp2-client)");
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let number_before = |line: &str, unit: &str| -> Option<f64> {
        let end = line.find(unit)?;
        line[..end].split_whitespace().last()?.parse().ok()
    };
    let finished = text
        .lines()
        .find(|line| line.starts_with("finished in"))
        .unwrap_or_else(|| panic!("h2load said no rate:\n{text}"));
    let requests = text
        .lines()
        .find(|line| line.starts_with("requests:"))
        .unwrap_or_else(|| panic!("h2load said no request count:\n{text}"));
    Rate {
        per_second: number_before(finished, " req/s").expect("a rate"),
        succeeded: number_before(requests, " succeeded").expect("a count") as u64,
        failed: number_before(requests, " failed").expect("a count") as u64,
    }
}
