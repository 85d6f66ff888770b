//! HTTP/2 conformance of the whole server: the project's runner of h2spec's cases
//! (tests/h2spec/h2spec.py: the generic, http2 and hpack suites of h2spec 2.6, same ids and pass
//! criteria) against ampd's two ways in, an `h2c` listener (cleartext, prior knowledge) and a
//! TLS listener (ALPN h2), under every engine: each serves HTTP/2 inside its own connection
//! loop, so each can get a frame sequence wrong in its own way. Every case must pass; a failure
//! prints the runner's tree of what was sent and what came back.

use crate::support;

use std::io::Read;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::certificates::write_self_signed;
use support::tls::listeners;
use support::{config_head, Options, Server, TempRoot};

/// h2spec 2.6 runs 146 cases by default (44 generic, 94 http2, 8 hpack; the strict-only
/// http2/5.4.1/2 is not among them). The count is checked so a case the runner stops running
/// cannot pass silently.
const CASES: u64 = 146;

/// Seconds the runner waits for each answer. No case passes by waiting (a timeout is always a
/// failure), so this only bounds how long a failing case takes; it is above h2spec's 2 s
/// because the debug build shares two cores with other suites.
const ANSWER_TIMEOUT: &str = "5";

/// A whole run must end within this, even if every case failed by timing out.
const RUN_LIMIT: Duration = Duration::from_secs(300);

const INDEX: &str = "<!doctype html>\n<title>ampd</title>\n<p>HTTP/2 conformance page.</p>\n";

for_each_arch!(fn h2spec_cases_pass_on_h2c_and_tls(arch) {
    let root = TempRoot::new();
    root.file("index.html", INDEX);
    let pki = root.outside_dir().join("pki");
    let (cert, key) = write_self_signed(&pki, "localhost", &["localhost"]);
    let head = config_head(arch).replacen(
        "listen = \"127.0.0.1:0\"",
        "listen = [\"127.0.0.1:0 h2c\", \"127.0.0.1:0 tls\"]",
        1,
    );
    let config = root.outside_dir().join("ampd.toml");
    let body = format!(
        "[tls]\ncertificate = \"{}\"\ncertificate_key = \"{}\"\n\n\
         [[site]]\ndefault = true\nroot = \"{}\"\n",
        cert.display(),
        key.display(),
        root.path().display(),
    );
    std::fs::write(&config, format!("{head}{body}")).expect("write ampd.toml");
    let server = Server::start(Options::config_file(&config));
    let found = listeners(server.ready_line());
    let first = |want_tls: bool| {
        found.iter().find(|(tls, _)| *tls == want_tls).map(|(_, addr)| *addr)
    };
    let h2c = first(false).expect("the h2c listener");
    let tls = first(true).expect("the TLS listener");

    let mut problems = Vec::new();
    for (label, addr, over_tls) in [("h2c", h2c, false), ("tls", tls, true)] {
        let report = root.outside_dir().join(format!("h2spec-{label}.json"));
        if let Err(problem) = run_runner(addr, over_tls, &report) {
            problems.push(format!("{arch} over {label} ({addr}):\n{problem}"));
        }
    }
    assert!(
        problems.is_empty(),
        "h2spec cases failed:\n{}\nserver stderr:\n{}",
        problems.join("\n"),
        server.stderr()
    );
});

/// Runs the conformance runner against `addr`; Err with its output unless all CASES passed.
fn run_runner(addr: SocketAddr, tls: bool, report: &Path) -> Result<(), String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/h2spec/h2spec.py");
    let mut command = Command::new("/usr/bin/python3");
    command
        .arg(&script)
        .args(["-h", &addr.ip().to_string(), "-p", &addr.port().to_string()])
        // One case at a time, as h2spec runs them: parallel cases could wait on each other
        // for a blocking engine's workers, a verdict h2spec would never give.
        .args(["-o", ANSWER_TIMEOUT, "-j", "1", "--json"])
        .arg(report)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if tls {
        command.args(["-t", "-k"]);
    }
    let (status, stdout, stderr) = run_bounded(command, RUN_LIMIT)?;
    let summary: Value = std::fs::read_to_string(report)
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .ok_or_else(|| format!("no JSON report (exit {status:?})\n{stdout}{stderr}"))?;
    let count = |key: &str| summary[key].as_u64().unwrap_or(u64::MAX);
    if status == Some(0) && count("tests") == CASES && count("passed") == CASES {
        return Ok(());
    }
    let failures = stdout
        .find("Failures:")
        .map_or(stdout.as_str(), |at| &stdout[at..]);
    Err(format!(
        "exit {status:?}; {} tests, {} passed, {} skipped, {} failed \
         (expected {CASES} passed)\n{failures}{stderr}",
        count("tests"),
        count("passed"),
        count("skipped"),
        count("failed"),
    ))
}

/// Runs `command` to its end or for `limit` at most (then kills it): exit code, stdout, stderr.
fn run_bounded(
    mut command: Command,
    limit: Duration,
) -> Result<(Option<i32>, String, String), String> {
    let mut child = command
        .spawn()
        .map_err(|error| format!("start /usr/bin/python3: {error}"))?;
    let mut stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    let out_reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let err_reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|error| error.to_string())? {
            break status;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("the runner took longer than {limit:?}"));
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = out_reader.join().unwrap_or_default();
    let stderr = err_reader.join().unwrap_or_default();
    Ok((status.code(), stdout, stderr))
}
