//! Persistent FastCGI applications ampd starts and keeps (Flash's persistent CGI, `[application.
//! NAME]`), under every engine, with a real one: tests/fixtures/flup_app.py, a WSGI app under
//! PyPI's flup, given its listening socket as descriptor 0. It answers through `fastcgi_pass =
//! "NAME"` in its directory with its environment, its stderr reaches the error log; killed in
//! the middle of a request, that request gets 502 and the next one is answered by the restarted
//! process; a reload that changes it replaces it; stopping ampd stops it and removes its socket.

mod support;

use std::path::{Path, PathBuf};
use std::thread;
use std::time::Duration;

use support::bulk::sha256;
use support::gateway::fetch;
use support::processes::{alive, signal, wait_gone, wait_pid_file};
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

    /// The configuration: the application (its environment says `label`) and `/flup/`.
    fn config(&self, label: &str) -> String {
        format!(
            r#"
[application.flup]
command = {command}
processes = 1
socket = "{socket}"
directory = "{directory}"
env = {{ FLUP_STATE_DIR = "{state}", FLUP_TEST_ENV = "{label}" }}
stop_timeout = "2s"

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
    assert!(!alive(pid));
    assert_eq!(next.body_text(), "flup GET /flup|/after| body=0\n");

    // Stopping ampd stops the application and removes the socket it made.
    drop(server);
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
