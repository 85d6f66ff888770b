//! Starting and stopping the `ampd` binary under test, and running curl.
//! Owns: child processes of the server (killed on Drop) and the parse of the ready line.
//! Must not touch: anything inside the document root (that is `root.rs`).

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// How long the server may take to print its ready line.
const READY_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a SIGTERM'd server may take to exit before it is SIGKILLed.
const STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// Path of the server binary Cargo built for these tests.
pub fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_ampd")
}

/// What to start: `ampd serve ROOT --listen 127.0.0.1:0 --arch ARCH [extra args]`.
#[derive(Clone, Debug)]
pub struct Options {
    root: PathBuf,
    arch: String,
    extra: Vec<String>,
    /// `ampd run -c FILE` instead of `serve`.
    config: Option<PathBuf>,
    env: Vec<(String, String)>,
    /// A program that execs ampd (with its arguments appended), e.g. a socket-activation
    /// wrapper.
    wrapper: Vec<String>,
    /// `ampd ARGS…` exactly as given, instead of `serve` or `run` (command-line spellings).
    exact: Option<Vec<String>>,
}

impl Options {
    /// `arch` is an engine name, optionally followed by arguments that select a variant of it
    /// (`"amped --helpers-mode process"`, as `for_each_arch!` lists it).
    pub fn new(root: &Path, arch: &str) -> Self {
        let mut words = arch.split_whitespace().map(str::to_string);
        Options {
            root: root.to_path_buf(),
            arch: words.next().unwrap_or_default(),
            extra: words.collect(),
            config: None,
            env: Vec::new(),
            wrapper: Vec::new(),
            exact: None,
        }
    }

    /// `ampd ARGS…` exactly as given (the arguments must make it listen on port 0).
    pub fn exact<I, S>(args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Options {
            exact: Some(args.into_iter().map(Into::into).collect()),
            ..Options::new(Path::new("/"), "")
        }
    }

    /// `ampd run -c FILE` (the file sets listen and arch itself).
    pub fn config_file(file: &Path) -> Self {
        Options {
            config: Some(file.to_path_buf()),
            ..Options::new(Path::new("/"), "")
        }
    }

    /// An environment variable for the server process.
    pub fn env(mut self, name: &str, value: &str) -> Self {
        self.env.push((name.to_string(), value.to_string()));
        self
    }

    /// Start ampd through `program args… AMPD AMPD-ARGS…`.
    pub fn wrapped<I, S>(mut self, program: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.wrapper = program.into_iter().map(Into::into).collect();
        self
    }

    /// Adds one command-line argument after the standard ones.
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.extra.push(arg.into());
        self
    }

    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.extra.extend(args.into_iter().map(Into::into));
        self
    }

    fn command_line(&self) -> Vec<String> {
        if let Some(exact) = &self.exact {
            return exact.clone();
        }
        if let Some(file) = &self.config {
            let mut line = vec![
                "run".to_string(),
                "-c".to_string(),
                file.display().to_string(),
            ];
            line.extend(self.extra.iter().cloned());
            return line;
        }
        let mut line = vec![
            "serve".to_string(),
            self.root.display().to_string(),
            "--listen".to_string(),
            "127.0.0.1:0".to_string(),
            "--arch".to_string(),
            self.arch.clone(),
        ];
        line.extend(self.extra.iter().cloned());
        line
    }
}

/// A running server. Dropping it sends SIGTERM, waits (bounded), then SIGKILLs.
pub struct Server {
    child: Child,
    addr: SocketAddr,
    ready_line: String,
    stderr: Arc<Mutex<String>>,
    /// The stderr reader met the pipe's end: everything ampd (and the programs that share its
    /// stderr) wrote is in `stderr`.
    stderr_ended: Arc<AtomicBool>,
}

impl Server {
    /// Spawns the server and waits for `... at http://ADDR/ ...` on stdout.
    ///
    /// # Panics
    /// If the binary cannot be spawned, exits early, or prints no ready line within 10 s; the
    /// message carries whatever it wrote on stderr.
    pub fn start(options: Options) -> Server {
        let line = options.command_line();
        let mut command = match options.wrapper.split_first() {
            Some((program, args)) => {
                let mut command = Command::new(program);
                command.args(args).arg(binary());
                command
            }
            None => Command::new(binary()),
        };
        let mut child = command
            .args(&line)
            .envs(options.env.iter().map(|(name, value)| (name, value)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|error| panic!("cannot spawn {}: {error}", binary()));
        let stderr = Arc::new(Mutex::new(String::new()));
        let stderr_ended = drain_into(
            child.stderr.take().expect("piped stderr"),
            Arc::clone(&stderr),
        );
        let (lines_tx, lines_rx) = mpsc::channel::<String>();
        let stdout = child.stdout.take().expect("piped stdout");
        thread::spawn(move || {
            // Keep reading after the ready line so the server never blocks on a full pipe.
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if lines_tx.send(line).is_err() {
                    // Receiver gone: keep draining silently.
                }
            }
        });
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match lines_rx.recv_timeout(left.max(Duration::from_millis(1))) {
                Ok(text) => {
                    if let Some(addr) = parse_ready_line(&text) {
                        return Server {
                            child,
                            addr,
                            ready_line: text,
                            stderr,
                            stderr_ended,
                        };
                    }
                }
                Err(_) => {
                    let status = child.try_wait().ok().flatten();
                    let _ = child.kill();
                    let _ = child.wait();
                    wait_flag(&stderr_ended, STDERR_AFTER_EXIT);
                    panic!(
                        "ampd {line:?} printed no ready line within {READY_TIMEOUT:?} \
                         (exit status: {status:?}); stderr:\n{}",
                        stderr.lock().unwrap()
                    );
                }
            }
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn ready_line(&self) -> &str {
        &self.ready_line
    }

    /// Everything the server has written on stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// The server process id (for tests that inspect it).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends a signal by name (`HUP`, `TERM`, `USR1`, …).
    pub fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .args([format!("-{name}"), self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{name} failed");
    }

    /// Waits (bounded) for the process to exit; its exit code, or `None` if it did not.
    pub fn wait_exit(&mut self, within: Duration) -> Option<i32> {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                // Its last lines may still be in the pipe: read them before a test looks.
                wait_flag(&self.stderr_ended, STDERR_AFTER_EXIT);
                return Some(status.code().unwrap_or(-1));
            }
            thread::sleep(Duration::from_millis(10));
        }
        None
    }

    /// Waits (bounded) until stderr contains `needle`.
    pub fn wait_for_stderr(&self, needle: &str, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if self.stderr().contains(needle) {
                return true;
            }
            thread::sleep(Duration::from_millis(10));
        }
        false
    }

    /// True while the process has not exited.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let deadline = Instant::now() + STOP_TIMEOUT;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `ampd 0.1.0 serving /dir at http://127.0.0.1:PORT/ (arch ...)` → the socket address (of
/// the first listener named, `http://` or `https://`).
pub fn parse_ready_line(line: &str) -> Option<SocketAddr> {
    let start = line.find("://")? + "://".len();
    if !line[..start].ends_with("http://") && !line[..start].ends_with("https://") {
        return None;
    }
    let rest = &line[start..];
    let end = rest.find('/')?;
    rest[..end].parse().ok()
}

/// How long, after ampd exits, its stderr may take to reach its end: a program it started
/// that outlives it keeps the pipe open, and then the wait gives up.
const STDERR_AFTER_EXIT: Duration = Duration::from_secs(2);

/// Waits (bounded) until `flag` is set.
fn wait_flag(flag: &AtomicBool, within: Duration) {
    let deadline = Instant::now() + within;
    while !flag.load(Ordering::Acquire) && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(5));
    }
}

/// Appends what `source` yields to `sink` on a thread of its own; the flag returned is set at
/// the end of `source`.
fn drain_into(mut source: impl Read + Send + 'static, sink: Arc<Mutex<String>>) -> Arc<AtomicBool> {
    let ended = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&ended);
    thread::spawn(move || {
        let mut chunk = [0u8; 4096];
        loop {
            match super::read_some(&mut source, &mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => sink
                    .lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&chunk[..n])),
            }
        }
        flag.store(true, Ordering::Release);
    });
    ended
}

/// Runs `curl` with the given arguments (plus `--max-time 20`), returning its output.
///
/// # Panics
/// If curl is not installed (install the `curl` package).
pub fn curl<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    Command::new("curl")
        .args(["--max-time", "20", "--noproxy", "*"])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("curl must be installed (apt-get install curl)")
}

/// Tests run as root in CI; permission checks (chmod 000) mean nothing for root.
pub fn is_root_user() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|line| line.starts_with("Uid:"))
                .and_then(|line| line.split_whitespace().nth(2).map(|euid| euid == "0"))
        })
        .unwrap_or(false)
}

/// Runs ampd with `args`, bounded to 10 s; returns (exit code, stdout, stderr).
pub fn run_to_exit(args: &[&str]) -> (Option<i32>, String, String) {
    let mut child = Command::new(binary())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ampd");
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            let output = child.wait_with_output().expect("collect output");
            return (
                output.status.code(),
                String::from_utf8_lossy(&output.stdout).into_owned(),
                String::from_utf8_lossy(&output.stderr).into_owned(),
            );
        }
        thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("ampd {args:?} did not exit within 10 s");
}

#[cfg(test)]
mod tests {
    use super::parse_ready_line;

    #[test]
    fn ready_line_yields_address() {
        let line = "ampd 0.1.0 serving /tmp/x at http://127.0.0.1:41234/ (arch amped, 1 thread)";
        assert_eq!(
            parse_ready_line(line),
            Some("127.0.0.1:41234".parse().unwrap())
        );
        assert_eq!(parse_ready_line("ampd: something else"), None);
        let tls = "ampd 0.1.0 serving /tmp/x at https://127.0.0.1:41235/ (arch amped)";
        assert_eq!(
            parse_ready_line(tls),
            Some("127.0.0.1:41235".parse().unwrap())
        );
    }
}
