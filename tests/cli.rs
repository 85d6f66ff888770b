//! The command line: `--version`, `--help`, and start-up failures, each of which must print one
//! `ampd: ` line on stderr and exit 1 without a panic.

mod support;

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
fn version_prints_name_and_version() {
    let (code, stdout, _) = run_to_exit(&["--version"]);
    assert_eq!(code, Some(0));
    assert_eq!(stdout.trim(), "ampd 0.1.0");
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

#[test]
fn bad_flags_fail_cleanly() {
    let root = TempRoot::new();
    let dir = root.path().display().to_string();
    assert_one_line_failure(&["serve", &dir, "--no-such-flag"]);
    assert_one_line_failure(&["serve", &dir, "--listen", "127.0.0.1:0", "--arch", "bogus"]);
    assert_one_line_failure(&["serve", &dir, "--listen", "not-an-address"]);
    assert_one_line_failure(&[
        "serve",
        &dir,
        "--listen",
        "127.0.0.1:0",
        "--threads",
        "zero",
    ]);
    assert_one_line_failure(&["serve", &dir, "--listen"]);
    assert_one_line_failure(&[
        "serve",
        &dir,
        "--listen",
        "127.0.0.1:0",
        "--helpers-mode",
        "goblins",
    ]);
    assert_one_line_failure(&[
        "serve",
        &dir,
        "--listen",
        "127.0.0.1:0",
        "--helpers",
        "8",
        "--helpers-max",
        "2",
    ]);
    for bad in ["0", "-1", "soon"] {
        assert_one_line_failure(&[
            "serve",
            &dir,
            "--listen",
            "127.0.0.1:0",
            "--revalidate-after",
            bad,
        ]);
    }
    assert_one_line_failure(&["frobnicate"]);
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
