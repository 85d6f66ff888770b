//! The command line: every spelling of `serve`, `run` and `check` (short flags, `--flag=value`,
//! nginx's `-t -c FILE`), address forms and unit suffixes, `--version` and per-subcommand
//! `--help`; usage mistakes exit 2 with clap's message, start-up failures print one `ampd: `
//! line on stderr and exit 1, never a panic.

use crate::support;

use std::process::Command;
use std::time::{Duration, Instant};
use support::*;

fn assert_one_line_failure(args: &[&str]) {
    let (code, stdout, stderr) = run_to_exit(args);
    assert_eq!(code, Some(1), "{args:?}: exit code; stderr {stderr:?}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(
        lines.len(),
        1,
        "{args:?}: exactly one stderr line, got {stderr:?}"
    );
    assert!(lines[0].starts_with("ampd: "), "{args:?}: {stderr:?}");
    for text in [&stdout, &stderr] {
        assert!(!text.contains("panicked"), "{args:?}: {text}");
        assert!(!text.contains("RUST_BACKTRACE"), "{args:?}: {text}");
    }
}

#[test]
fn short_version_prints_name_and_version() {
    let (code, stdout, _) = run_to_exit(&["-V"]);
    assert_eq!(code, Some(0));
    assert_eq!(stdout.trim(), "ampd 0.1.0");
}

#[test]
fn long_version_names_the_build() {
    let (code, stdout, stderr) = run_to_exit(&["--version"]);
    assert_eq!(code, Some(0), "{stderr}");
    let mut lines = stdout.lines();
    assert_eq!(lines.next(), Some("ampd 0.1.0"), "{stdout}");
    let field = |name: &str| {
        stdout
            .lines()
            .find_map(|line| line.strip_prefix(&format!("{name}: ")))
            .unwrap_or_else(|| panic!("no '{name}: ' line in {stdout}"))
            .to_owned()
    };
    let commit = field("commit");
    assert!(
        commit == "unknown" || (commit.len() >= 7 && commit.bytes().all(|b| b.is_ascii_hexdigit())),
        "{commit}"
    );
    assert!(field("rustc").starts_with("rustc 1."), "{stdout}");
    assert!(field("target").contains("linux"), "{stdout}");
    let engines = field("engines");
    for arch in ["sped", "amped", "mt", "tpc", "mp", "uring", "reactor"] {
        assert!(engines.contains(arch), "{engines}");
    }
    assert!(
        field("io_uring").starts_with("available") || field("io_uring").starts_with("unavailable")
    );
}
#[test]
fn help_mentions_serve_and_flags() {
    let (code, stdout, _) = run_to_exit(&["--help"]);
    assert_eq!(code, Some(0));
    for needle in ["serve", "--listen", "--arch"] {
        assert!(stdout.contains(needle), "--help lacks {needle}: {stdout}");
    }
}

#[test]
fn port_in_use_fails_cleanly() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a port");
    let addr = taken.local_addr().unwrap().to_string();
    let root = TempRoot::new();
    let dir = root.path().display().to_string();
    assert_one_line_failure(&["serve", &dir, "--listen", &addr]);
}

#[test]
fn missing_dir_fails_cleanly() {
    let root = TempRoot::new();
    let missing = root.path().join("does-not-exist").display().to_string();
    assert_one_line_failure(&["serve", &missing, "--listen", "127.0.0.1:0"]);
}

#[test]
fn file_instead_of_dir_fails_cleanly() {
    let root = TempRoot::new();
    let file = root.file("plain.txt", "x").display().to_string();
    assert_one_line_failure(&["serve", &file, "--listen", "127.0.0.1:0"]);
}

#[test]
fn unreadable_dir_fails_cleanly() {
    use std::os::unix::fs::PermissionsExt;
    if is_root_user() {
        println!("skipped: running as root, chmod 000 does not stop root from reading");
        return;
    }
    let root = TempRoot::new();
    let locked = root.dir("locked");
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
    assert_one_line_failure(&[
        "serve",
        &locked.display().to_string(),
        "--listen",
        "127.0.0.1:0",
    ]);
}

/// A usage mistake: exit 2 and clap's message (what is wrong, and where help is).
fn assert_usage_error(args: &[&str], needle: &str) {
    let (code, stdout, stderr) = run_to_exit(args);
    assert_eq!(code, Some(2), "{args:?}: exit code; stderr {stderr:?}");
    assert!(stderr.starts_with("error: "), "{args:?}: {stderr:?}");
    assert!(
        stderr.contains(needle),
        "{args:?}: {needle:?} not in {stderr:?}"
    );
    assert!(stderr.contains("try '--help'"), "{args:?}: {stderr:?}");
    for text in [&stdout, &stderr] {
        assert!(!text.contains("panicked"), "{args:?}: {text}");
    }
}

#[test]
fn usage_errors_exit_2_with_the_usage() {
    let root = TempRoot::new();
    let dir = root.path().display().to_string();
    let dir = dir.as_str();
    assert_usage_error(&["serve", dir, "--no-such-flag"], "--no-such-flag");
    assert_usage_error(&["serve", dir, "--arch", "bogus"], "bogus");
    assert_usage_error(
        &["serve", dir, "--listen", "not-an-address"],
        "not-an-address",
    );
    assert_usage_error(&["serve", dir, "--threads", "zero"], "zero");
    assert_usage_error(&["serve", dir, "--threads", "0"], "--threads");
    assert_usage_error(&["serve", dir, "--listen"], "--listen");
    assert_usage_error(&["serve", dir, "--helpers-mode", "goblins"], "goblins");
    assert_usage_error(
        &["serve", dir, "--helpers", "8", "--helpers-max", "2"],
        "--helpers-max",
    );
    for bad in ["0", "-1", "soon"] {
        assert_usage_error(
            &["serve", dir, "--revalidate-after", bad],
            &format!("'{bad}'"),
        );
    }
    assert_usage_error(&["serve", dir, "--max-body", "1 parsec"], "parsec");
    // Binary units only: "10MB" names the spelling that means what ampd reads.
    assert_usage_error(&["serve", dir, "--max-body", "10MB"], "10MiB");
    assert_usage_error(&["serve", dir, "--header", "NoColon"], "NoColon");
    assert_usage_error(&["serve", dir, "--header", "Bad Name: x"], "Bad Name");
    assert_usage_error(&["serve", dir, "--status", "no-slash"], "no-slash");
    assert_usage_error(&["serve", dir, "--log-level", "chatty"], "chatty");
    assert_usage_error(&["serve", dir, "extra-dir"], "extra-dir");
    assert_usage_error(&["frobnicate"], "frobnicate");
    assert_usage_error(&["check"], "FILE");
    assert_usage_error(&["check", "a.toml", "b.toml"], "b.toml");
    assert_usage_error(&["run"], "FILE");
    assert_usage_error(&["-t"], "FILE");
}

/// A valid configuration listening on port 0, with one site serving `hello.txt`.
fn valid_config(root: &TempRoot) -> String {
    root.file("hello.txt", "hello");
    write_config(root, "amped", "[[site]]\nroot = \"www\"\n")
        .display()
        .to_string()
}

#[test]
fn check_accepts_every_spelling() {
    let root = TempRoot::new();
    let file = valid_config(&root);
    let with_equals = format!("--config={file}");
    for args in [
        vec!["check", &file],
        vec!["check", "-c", &file],
        vec!["check", "--config", &file],
        vec!["check", &with_equals],
        vec!["-t", "-c", &file],
        vec!["-tc", &file],
        vec!["-t", &with_equals],
    ] {
        let (code, stdout, stderr) = run_to_exit(&args);
        assert_eq!(code, Some(0), "{args:?}: {stderr}");
        assert!(stdout.contains("configuration OK"), "{args:?}: {stdout}");
    }
    // A bad file is still one `ampd: ` line and exit 1 under every spelling.
    let bad = root
        .outside_file("bad.toml", "listn = 1\n")
        .display()
        .to_string();
    assert_one_line_failure(&["check", "-c", &bad]);
    assert_one_line_failure(&["-t", "-c", &bad]);
}

#[test]
fn run_accepts_every_spelling() {
    let root = TempRoot::new();
    let file = valid_config(&root);
    let with_equals = format!("--config={file}");
    for args in [
        vec!["run", "-c", &file],
        vec!["run", &file],
        vec!["run", &with_equals],
        vec!["-c", &file],
    ] {
        let server = Server::start(Options::exact(args.iter().copied()));
        assert_eq!(
            get(server.addr(), "/hello.txt").body_text(),
            "hello",
            "{args:?}"
        );
    }
}

#[test]
fn short_flags_and_equals_forms() {
    let root = TempRoot::new();
    root.file("hello.txt", "hello");
    let dir = root.path().display().to_string();
    for args in [
        vec!["serve", &dir, "-l", "127.0.0.1:0", "-a", "amped"],
        vec!["serve", &dir, "--listen=127.0.0.1:0", "--arch=amped"],
        vec!["serve", "-l127.0.0.1:0", "-aamped", &dir],
    ] {
        let server = Server::start(Options::exact(args.iter().copied()));
        assert!(
            server.ready_line().contains("arch amped"),
            "{args:?}: {}",
            server.ready_line()
        );
        assert_eq!(
            get(server.addr(), "/hello.txt").body_text(),
            "hello",
            "{args:?}"
        );
    }
}

#[test]
fn address_forms() {
    let root = TempRoot::new();
    root.file("hello.txt", "hello");
    let dir = root.path().display().to_string();
    // `localhost` is the IPv4 loopback; a bare port keeps the default host, 127.0.0.1.
    for listen in ["localhost:0", "0", "127.0.0.1:0"] {
        let server = Server::start(Options::exact(["serve", &dir, "--listen", listen]));
        assert!(
            server.addr().ip().is_loopback() && server.addr().is_ipv4(),
            "{listen}: {}",
            server.ready_line()
        );
        assert_eq!(
            get(server.addr(), "/hello.txt").body_text(),
            "hello",
            "{listen}"
        );
    }
    // `:PORT` is every address, IPv4 and IPv6, on one port (as Caddy reads it): the ready line
    // names both sockets, and both loopbacks answer.
    let ipv6 = std::net::TcpListener::bind("[::1]:0").is_ok();
    for every in [":0", "*:0"] {
        let server = Server::start(Options::exact(["serve", &dir, "--listen", every]));
        let port = server.addr().port();
        assert!(
            server
                .ready_line()
                .contains(&format!("http://0.0.0.0:{port}/")),
            "{every}: {}",
            server.ready_line()
        );
        let v4 = std::net::SocketAddr::from(([127, 0, 0, 1], port));
        assert_eq!(
            get(v4, "/hello.txt").body_text(),
            "hello",
            "{every} over IPv4"
        );
        if ipv6 {
            assert!(
                server
                    .ready_line()
                    .contains(&format!("http://[::]:{port}/")),
                "{every}: {}",
                server.ready_line()
            );
            let v6 = std::net::SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, port));
            assert_eq!(
                get(v6, "/hello.txt").body_text(),
                "hello",
                "{every} over IPv6"
            );
        }
    }
    if ipv6 {
        let server = Server::start(Options::exact(["serve", &dir, "--listen", "[::1]:0"]));
        assert_eq!(
            server.addr().ip(),
            "::1".parse::<std::net::IpAddr>().unwrap()
        );
        assert_eq!(get(server.addr(), "/hello.txt").body_text(), "hello");
    } else {
        println!("skipped [::1]: no IPv6 loopback here");
    }
}

#[test]
fn durations_and_sizes_take_the_config_files_units() {
    let root = TempRoot::new();
    root.file("a.txt", "alpha");
    let dir = root.path().display().to_string();
    let server = Server::start(Options::exact([
        "serve",
        &dir,
        "--listen",
        "127.0.0.1:0",
        "--arch",
        "amped",
        "--header-timeout",
        "1500ms",
        "--keepalive-timeout=1m",
        "--send-timeout",
        "60s",
        "--revalidate-after",
        "0.5",
        "--sendfile-threshold",
        "64KiB",
        "--max-body",
        "1KiB",
    ]));
    let mut conn = Conn::open(server.addr());
    conn.send("GET /a.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 1024\r\n\r\n");
    conn.send(vec![b'x'; 1024]);
    assert_eq!(
        conn.read_response("GET").status,
        200,
        "exactly 1KiB is allowed"
    );
    conn.send("GET /a.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 1025\r\n\r\n");
    assert_eq!(conn.read_response("GET").status, 413);
    // 1500ms to send a whole head: a head that stops half-way is cut after it (a 408 then a
    // close, or a plain close, as tests/it/timeouts.rs allows).
    let started = Instant::now();
    let mut slow = Conn::open(server.addr());
    slow.send("GET /a.txt HTTP/1.1\r\nHost:");
    slow.set_read_timeout(Duration::from_secs(8));
    let bytes = slow.read_to_end().expect("read until close");
    let waited = started.elapsed();
    if !bytes.is_empty() {
        assert_eq!(support::http::parse_all(&bytes, "GET")[0].status, 408);
    }
    assert!(
        waited >= Duration::from_millis(1400) && waited < Duration::from_secs(8),
        "{waited:?}"
    );
}

#[test]
fn serve_takes_logs_status_health_and_headers() {
    let root = TempRoot::new();
    root.file("a.txt", "alpha");
    let dir = root.path().display().to_string();
    let access = root.outside_dir().join("access.log");
    let errors = root.outside_dir().join("error.log");
    let mut server = Server::start(Options::exact([
        "serve",
        &dir,
        "--listen",
        "127.0.0.1:0",
        "--arch",
        "amped",
        "--access-log",
        &access.display().to_string(),
        "--log-format",
        "common",
        "--error-log",
        &errors.display().to_string(),
        "--log-level",
        "info",
        "--status",
        "/metrics",
        "--health",
        "/healthz",
        "-H",
        "X-Frame-Options: DENY",
        "--header=Cache-Tag:  ampd ",
    ]));
    let file = get(server.addr(), "/a.txt");
    assert_eq!(file.body_text(), "alpha");
    assert_eq!(file.header("x-frame-options"), Some("DENY"));
    assert_eq!(file.header("cache-tag"), Some("ampd"));
    let status = get(server.addr(), "/metrics");
    assert_eq!(status.status, 200);
    assert!(
        status.body_text().contains("ampd_requests_total"),
        "{}",
        status.body_text()
    );
    assert_eq!(
        status.header("x-frame-options"),
        Some("DENY"),
        "every response"
    );
    let health = get(server.addr(), "/healthz");
    assert_eq!((health.status, health.body_text().as_str()), (200, "ok\n"));
    // The status and health paths are exact: below them is the document root.
    assert_eq!(get(server.addr(), "/metrics/x").status, 404);
    server.signal("TERM");
    assert_eq!(server.wait_exit(Duration::from_secs(10)), Some(0));
    let log = std::fs::read_to_string(&access).expect("the access log was written");
    assert!(log.contains("\"GET /a.txt HTTP/1.1\" 200 5"), "{log}");
    let error_log = std::fs::read_to_string(&errors).expect("the error log was written");
    assert!(error_log.contains("stopped"), "{error_log}");
    assert!(
        !server.stderr().contains("stopped"),
        "went to the file: {}",
        server.stderr()
    );

    // `--log-level warn` leaves out info lines such as "stopped"; `--access-log -` is stdout.
    let errors = root.outside_dir().join("quiet.log");
    let mut server = Server::start(Options::exact([
        "serve",
        &dir,
        "--listen",
        "127.0.0.1:0",
        "--arch",
        "amped",
        "--error-log",
        &errors.display().to_string(),
        "--log-level",
        "warn",
    ]));
    get(server.addr(), "/a.txt");
    server.signal("TERM");
    assert_eq!(server.wait_exit(Duration::from_secs(10)), Some(0));
    let error_log = std::fs::read_to_string(&errors).unwrap_or_default();
    assert!(!error_log.contains("stopped"), "{error_log}");
}

#[test]
fn access_log_dash_is_standard_output() {
    let root = TempRoot::new();
    root.file("a.txt", "alpha");
    let dir = root.path().display().to_string();
    let mut child = Command::new(support::server::binary())
        .args([
            "serve",
            &dir,
            "--listen",
            "127.0.0.1:0",
            "--arch",
            "amped",
            "--access-log",
            "-",
        ])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn ampd");
    let (lines, receive) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            let _ = lines.send(line);
        }
    });
    let ready = receive
        .recv_timeout(Duration::from_secs(10))
        .expect("a ready line");
    let addr = support::server::parse_ready_line(&ready).expect(&ready);
    assert_eq!(get(addr, "/a.txt").status, 200);
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut logged = false;
    while !logged && Instant::now() < deadline {
        if let Ok(line) = receive.recv_timeout(Duration::from_millis(100)) {
            logged = line.contains("\"GET /a.txt HTTP/1.1\" 200");
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(logged, "no access log line on stdout within 5 s");
}

#[test]
fn each_subcommand_has_its_own_help() {
    for (args, usage, absent) in [
        (
            vec!["serve", "--help"],
            "Usage: ampd serve",
            "Usage: ampd check",
        ),
        (
            vec!["help", "serve"],
            "Usage: ampd serve",
            "Usage: ampd check",
        ),
        (vec!["run", "--help"], "Usage: ampd run", "--autoindex"),
        (vec!["check", "-h"], "Usage: ampd check", "--autoindex"),
    ] {
        let (code, stdout, _) = run_to_exit(&args);
        assert_eq!(code, Some(0), "{args:?}");
        assert!(stdout.contains(usage), "{args:?}: {stdout}");
        assert!(!stdout.contains(absent), "{args:?}: {stdout}");
    }
    let (_, serve, _) = run_to_exit(&["serve", "--help"]);
    for flag in [
        "-l, --listen",
        "-a, --arch",
        "-H, --header",
        "--access-log",
        "--status",
        "--health",
        "--error-log",
        "--log-level",
        "64KiB",
        "500ms",
    ] {
        assert!(serve.contains(flag), "serve --help lacks {flag}: {serve}");
    }
    let (_, top, _) = run_to_exit(&["--help"]);
    for needle in ["serve", "run", "check", "-t", "-c, --config"] {
        assert!(top.contains(needle), "--help lacks {needle}: {top}");
    }
}

#[test]
fn ready_line_names_dir_and_arch() {
    let root = TempRoot::new();
    for arch in ["sped", "amped", "mt", "tpc", "mp", "uring", "reactor"] {
        let server = Server::start(Options::new(root.path(), arch));
        if server.ready_line().contains("uring unavailable") {
            continue;
        }
        let line = server.ready_line().to_string();
        assert!(line.starts_with("ampd 0.1.0 serving "), "{line}");
        assert!(line.contains(&root.path().display().to_string()), "{line}");
        assert!(line.contains(&format!("arch {arch}")), "{line}");
        assert!(
            line.contains(&format!("http://{}/", server.addr())),
            "{line}"
        );
    }
}

#[test]
fn sigterm_stops_the_server() {
    let root = TempRoot::new();
    let mut server = Server::start(Options::new(root.path(), "amped"));
    let pid = server.pid().to_string();
    let status = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(5);
    while server.is_running() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!server.is_running(), "still running 5 s after SIGTERM");
    assert!(!server.stderr().contains("panicked"));
}

#[test]
fn serve_help_lists_every_engine_on_one_line_each() {
    let output = Command::new(support::server::binary())
        .args(["serve", "--help"])
        .output()
        .expect("run ampd");
    assert!(output.status.success());
    let text = String::from_utf8_lossy(&output.stdout);
    for arch in ["sped", "amped", "mt", "tpc", "mp", "uring", "reactor"] {
        let lines: Vec<&str> = text
            .lines()
            .filter(|line| line.trim_start().starts_with(&format!("{arch} ")))
            .collect();
        assert_eq!(lines.len(), 1, "{arch}: {lines:?} in\n{text}");
        assert!(
            lines[0].len() > arch.len() + 20,
            "{arch} has no description: {lines:?}"
        );
    }
    assert!(text.contains("--helpers-mode"), "{text}");
    assert!(text.contains("--helpers-max"), "{text}");
    assert!(text.contains("--revalidate-after"), "{text}");
}

#[test]
fn config_file_listen_takes_the_same_address_forms() {
    let root = TempRoot::new();
    root.file("hello.txt", "hello");
    // `listen = 0`: a TOML integer is a bare port, as the string "0" is.
    for listen in ["\"localhost:0\"", "\"0\"", "0", "[0]"] {
        let file = root.outside_file(
            "forms.toml",
            format!("listen = {listen}\narch = \"amped\"\n[[site]]\nroot = \"www\"\n"),
        );
        let server = Server::start(Options::config_file(&file));
        assert!(
            server.addr().ip().is_loopback() && server.addr().is_ipv4(),
            "{listen}"
        );
        assert_eq!(
            get(server.addr(), "/hello.txt").body_text(),
            "hello",
            "{listen}"
        );
    }
    let bad = root.outside_file(
        "bad.toml",
        "listen = \"localhost\"\n[[site]]\nroot = \"www\"\n",
    );
    assert_one_line_failure(&["check", &bad.display().to_string()]);
}

/// Runs `ampd ARGS`; (exit code, stdout, stderr).
fn ampd(args: &[&str]) -> (Option<i32>, String, String) {
    run_to_exit(args)
}

/// `ampd reload|reopen|stop -c FILE` find the server FILE started by the pid file it wrote
/// where FILE sets none (the default path, keyed by FILE: tests running side by side never
/// share one), and each does what its signal does.
#[test]
fn reload_reopen_and_stop_find_the_server_by_its_configuration_file() {
    let root = TempRoot::new();
    root.file("hello.txt", "hello");
    let access = root.outside_dir().join("access.log");
    let body = |generation: &str| {
        format!(
            "[log]\naccess = \"access.log\"\n[[site]]\nroot = \"www\"\nheaders = {{ \"X-Generation\" = \"{generation}\" }}\n"
        )
    };
    let file = write_config(&root, "reactor", &body("1"));
    let path = file.display().to_string();
    let mut server = Server::start(Options::config_file(&file));
    assert_eq!(
        get(server.addr(), "/hello.txt").header("x-generation"),
        Some("1")
    );

    // reload: checks the file, then HUP; the change is served once the reload is done.
    write_config(&root, "reactor", &body("2"));
    let (code, stdout, stderr) = ampd(&["reload", "-c", &path]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("configuration OK"), "{stdout}");
    assert!(
        stdout.contains(&format!("sent HUP to process {}", server.pid())),
        "{stdout}"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while get(server.addr(), "/hello.txt").header("x-generation") != Some("2") {
        assert!(
            Instant::now() < deadline,
            "never reloaded: {}",
            server.stderr()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // A file the server would refuse is refused here, and nothing is sent.
    std::fs::write(&file, "listn = 1\n").unwrap();
    let (code, _, stderr) = ampd(&["reload", &path]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("listn"), "{stderr}");
    write_config(&root, "reactor", &body("2"));

    // reopen: USR1; after a rename the log starts afresh at the configured path.
    let rotated = root.outside_dir().join("access.log.1");
    std::fs::rename(&access, &rotated).unwrap();
    let (code, stdout, stderr) = ampd(&["reopen", "--config", &path]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("sent USR1"), "{stdout}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !std::fs::read_to_string(&access)
        .unwrap_or_default()
        .contains("/hello.txt?reopened")
    {
        assert!(Instant::now() < deadline, "the log was not reopened");
        get(server.addr(), "/hello.txt?reopened");
        std::thread::sleep(Duration::from_millis(50));
    }

    // stop: TERM; the server drains, exits 0 and removes its pid file.
    let (code, stdout, stderr) = ampd(&["stop", "-c", &path]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert_eq!(server.wait_exit(Duration::from_secs(10)), Some(0));
    let (code, _, stderr) = ampd(&["stop", "-c", &path]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.starts_with("ampd: no pid file at ") && stderr.contains("ampd run -c"),
        "the pid file went with the server: {stderr}"
    );
}

/// `--pid-file` names the file directly (a server started by `ampd serve --pid-file`); a pid
/// file naming a process that is gone, or that is not an ampd, is refused, and nothing is sent.
#[test]
fn orders_by_pid_file_and_their_refusals() {
    let root = TempRoot::new();
    let pid_file = root.outside_dir().join("serve.pid");
    let pid_path = pid_file.display().to_string();
    let mut server =
        Server::start(Options::new(root.path(), "amped").args(["--pid-file", &pid_path]));
    assert_eq!(
        std::fs::read_to_string(&pid_file).unwrap().trim(),
        server.pid().to_string()
    );
    // A server without a configuration file has nothing to reload: it says so, and serves on.
    let (code, stdout, stderr) = ampd(&["reload", "--pid-file", &pid_path]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(
        server.wait_for_stderr("no configuration file to reload", Duration::from_secs(10)),
        "{}",
        server.stderr()
    );
    assert!(server.is_running());

    // A pid that is this test program's, not an ampd's.
    let other = root.outside_dir().join("other.pid");
    std::fs::write(&other, format!("{}\n", std::process::id())).unwrap();
    let (code, _, stderr) = ampd(&["stop", "--pid-file", &other.display().to_string()]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("not ampd"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");

    let (code, _, stderr) = ampd(&["stop", "--pid-file", &pid_path]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(server.wait_exit(Duration::from_secs(10)), Some(0));
    // The server removed its file; one left behind by a killed server names a dead process.
    std::fs::write(&pid_file, "4194305\n").unwrap();
    let (code, _, stderr) = ampd(&["reopen", "--pid-file", &pid_path]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("which is not running"), "{stderr}");
    let (code, _, stderr) = ampd(&["stop", "-c", "/no/such/ampd.toml"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("/no/such/ampd.toml: no such file"),
        "{stderr}"
    );
}

/// `ampd` alone is a usage mistake (clap's convention: the help on stderr, exit 2); `ampd help
/// --help` and `ampd help COMMAND` work; the top-level page names the signals and the orders.
#[test]
fn bare_ampd_and_the_help_command() {
    let (code, stdout, stderr) = ampd(&[]);
    assert_eq!(code, Some(2), "{stdout}{stderr}");
    assert!(stderr.contains("Usage: ampd"), "{stderr}");
    let (code, stdout, stderr) = ampd(&["help", "--help"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("Usage: ampd help"), "{stdout}");
    let (code, stdout, _) = ampd(&["help", "reload"]);
    assert_eq!(code, Some(0));
    assert!(stdout.contains("Usage: ampd reload"), "{stdout}");
    let (code, _, stderr) = ampd(&["help", "bogus"]);
    assert_eq!(code, Some(2), "{stderr}");
    let (_, top, _) = ampd(&["--help"]);
    for needle in [
        "reload", "stop", "reopen", "HUP", "TERM", "USR1", "USR2", "QUIT",
    ] {
        assert!(top.contains(needle), "--help lacks {needle}: {top}");
    }
}
