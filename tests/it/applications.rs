//! Persistent FastCGI applications ampd starts and keeps (Flash's persistent CGI, `[application.
//! NAME]`), under every engine, with a real one: tests/fixtures/flup_app.py, a WSGI app under
//! PyPI's flup, given its listening socket as descriptor 0. It answers through `fastcgi_pass =
//! "NAME"` in its directory with its environment, its stderr reaches the error log; killed in
//! the middle of a request, that request gets 502 (or, once its head went out, a response cut
//! short) and the next one is answered by the restarted process; a reload that changes it replaces it; stopping ampd stops it and removes its socket.

use crate::support;

use std::path::{Path, PathBuf};
use std::thread;
use std::time::Duration;

use support::bulk::sha256;
use support::gateway::fetch;
use support::processes::{signal, wait_gone, wait_pid_file};
use support::*;

const WAIT: Duration = Duration::from_secs(15);

struct App {
    socket: PathBuf,
    directory: PathBuf,
    state: PathBuf,
}

impl App {
    fn new(root: &TempRoot) -> App {
        let base = root.outside_dir();
        let app = App {
            socket: base.join("flup.sock"),
            directory: base.join("app"),
            state: base.join("state"),
        };
        std::fs::create_dir_all(&app.directory).unwrap();
        std::fs::create_dir_all(&app.state).unwrap();
        app
    }

    /// The configuration: the application (its environment says `label`) and `/flup/`. Its
    /// `stop_timeout` is far beyond what a test waits: flup ends at `SIGTERM`, so a stop that
    /// waits it out fails instead of passing slowly.
    fn config(&self, label: &str) -> String {
        format!(
            r#"
[application.flup]
command = {command}
processes = 1
socket = "{socket}"
directory = "{directory}"
env = {{ FLUP_STATE_DIR = "{state}", FLUP_TEST_ENV = "{label}" }}
stop_timeout = "120s"

[[site]]
root = "www"

[[site.location]]
path = "/flup/"
fastcgi_pass = "flup"
"#,
            command = support::flup::command_toml(),
            socket = self.socket.display(),
            directory = self.directory.display(),
            state = self.state.display(),
        )
    }
}

fn pid_of(response: &Response) -> u32 {
    response
        .header("x-pid")
        .and_then(|pid| pid.parse().ok())
        .unwrap_or_else(|| panic!("no X-Pid in {response:?}"))
}

fn wait_answer(server: &Server, path: &str) -> Response {
    let response = fetch(server.addr(), "GET", path, &[]);
    assert_eq!(response.status, 200, "{response:?}\n{}", server.stderr());
    response
}

for_each_arch!(fn application_is_kept_and_restarted(arch) {
    let root = TempRoot::new();
    let app = App::new(&root);
    let config = write_config(&root, arch, &app.config("kept"));
    let server = Server::start(Options::config_file(&config));

    // Answers at /flup/: SCRIPT_NAME is the location, PATH_INFO the rest; its directory and
    // environment are the configured ones.
    let first = wait_answer(&server, "/flup/a/b?q=1");
    assert_eq!(first.body_text(), "flup GET /flup|/a/b|q=1 body=0\n");
    assert_eq!(first.header("x-fcgi"), Some("flup"));
    assert_eq!(first.header("x-app-env"), Some("kept"));
    assert_eq!(first.header("x-cwd").map(Path::new), Some(app.directory.as_path()));
    let pid = pid_of(&first);
    let body = b"hello";
    let posted = {
        let mut conn = support::http::Conn::open(server.addr());
        conn.send(b"POST /flup/x HTTP/1.1\r\nHost: test\r\nContent-Length: 5\r\n\r\nhello");
        conn.read_proxied("POST")
    };
    assert_eq!(posted.status, 200, "{posted:?}");
    assert_eq!(posted.body_text(), "flup POST /flup|/x| body=5\n");
    assert_eq!(posted.header("x-body-sha256"), Some(sha256(body).as_str()));
    // Its stderr is in ampd's error log.
    assert!(
        server.wait_for_stderr(&format!("flup app ready pid={pid}"), WAIT),
        "the application's stderr is not in the error log:\n{}",
        server.stderr()
    );

    // Killed while a request waits on it: that request gets 502.
    let waiting = {
        let addr = server.addr();
        thread::spawn(move || fetch(addr, "GET", "/flup/sleep", &[]))
    };
    let sleeping = wait_pid_file(&app.state.join("sleeping.pid"), WAIT);
    assert_eq!(sleeping, pid, "one process: the sleeper is the one that answered");
    signal("KILL", sleeping, false);
    let cut = waiting.join().expect("the waiting client");
    assert_eq!(cut.status, 502, "{cut:?}");

    // The next request is answered by the restarted process.
    let next = wait_answer(&server, "/flup/after");
    let restarted = pid_of(&next);
    assert_ne!(restarted, pid, "{next:?}");
    assert!(wait_gone(pid, WAIT), "the killed process is gone");
    assert_eq!(next.body_text(), "flup GET /flup|/after| body=0\n");

    // Dead after its head went out: the client gets a response cut short (fewer bytes than
    // its length, then the close), never one that looks whole; then the next one is answered.
    let mut conn = support::http::Conn::open(server.addr());
    conn.send(support::http::build_request("GET", "/flup/partial", &[]));
    let cut = conn
        .read_to_end()
        .unwrap_or_else(|error| panic!("read until the close: {error}\n{}", server.stderr()));
    let cut = String::from_utf8_lossy(&cut).into_owned();
    assert!(cut.starts_with("HTTP/1.1 200"), "{cut}");
    let body = &cut[cut.find("\r\n\r\n").expect("a whole head") + 4..];
    assert!(!cut.to_ascii_lowercase().contains("transfer-encoding: chunked") || !body.ends_with("0\r\n\r\n"), "{cut:?}");
    // (The 8 bytes sent before the death may be lost too, when the close is a reset.)
    assert!(body.len() < 1000, "{cut:?}");
    assert!(wait_gone(restarted, WAIT), "the process that died is gone");
    let last = wait_answer(&server, "/flup/again");
    let restarted = pid_of(&last);

    // Stopping ampd stops the application at its SIGTERM (flup ends then: the stop_timeout
    // is never reached) and removes the socket it made.
    let mut server = server;
    server.signal("TERM");
    assert_eq!(server.wait_exit(WAIT), Some(0), "{}", server.stderr());
    assert!(server.stderr().contains("application flup: stopped"), "{}", server.stderr());
    assert!(!server.stderr().contains("after its stop_timeout"), "{}", server.stderr());
    assert!(wait_gone(restarted, WAIT), "application {restarted} outlived ampd");
    assert!(!app.socket.exists(), "{} left behind", app.socket.display());
});

for_each_arch!(fn application_changed_by_reload_is_replaced(arch) {
    let root = TempRoot::new();
    let app = App::new(&root);
    let config = write_config(&root, arch, &app.config("before"));
    let server = Server::start(Options::config_file(&config));
    let before = wait_answer(&server, "/flup/");
    assert_eq!(before.header("x-app-env"), Some("before"));
    let old = pid_of(&before);

    // Same application, another environment: the reload replaces its process.
    write_config(&root, arch, &app.config("after"));
    server.signal("HUP");
    assert!(server.wait_for_stderr("configuration reloaded", WAIT), "{}", server.stderr());
    let deadline = std::time::Instant::now() + WAIT;
    let after = loop {
        let response = fetch(server.addr(), "GET", "/flup/", &[]);
        if response.header("x-app-env") == Some("after") {
            break response;
        }
        assert!(std::time::Instant::now() < deadline, "still the old application: {response:?}");
        thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(after.status, 200);
    assert_ne!(pid_of(&after), old);
    assert!(wait_gone(old, WAIT), "the replaced process {old} still runs");
});
