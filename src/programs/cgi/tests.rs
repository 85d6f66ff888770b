//! The launcher against real scripts: each test writes small shell scripts to a directory of
//! its own and talks to them over a socket pair, as an engine does.

use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use super::*;
use crate::config::CgiLimits;
use crate::programs::test_support::{capture_log, eventually, log_lines, script, TempDir};

const WITHIN: Duration = Duration::from_secs(10);

fn launcher(max_scripts: usize) -> Launcher {
    Launcher::new(&CgiLimits { max_scripts })
}

struct Started {
    stream: UnixStream,
    failure: Arc<OnceLock<LaunchFailure>>,
}

fn start(
    launcher: &Launcher,
    script: Script,
    root: &Path,
    env: &[(&str, &str)],
    timeout: Duration,
) -> Started {
    let (ours, theirs) = UnixStream::pair().unwrap();
    ours.set_read_timeout(Some(WITHIN)).unwrap();
    let failure = Arc::new(OnceLock::new());
    Launch {
        slot: launcher.reserve().expect("a free slot"),
        script,
        document_root: root.to_path_buf(),
        env: env
            .iter()
            .map(|(name, value)| (name.as_bytes().to_vec(), value.as_bytes().to_vec()))
            .collect(),
        timeout,
        failure: failure.clone(),
    }
    .start(OwnedFd::from(theirs));
    Started {
        stream: ours,
        failure,
    }
}

fn search(dir: &Path, rest: &str) -> Script {
    Script::Search {
        directory: dir.to_path_buf(),
        url_base: "/cgi-bin".to_owned(),
        rest: rest.to_owned(),
    }
}

fn read_all(stream: &mut UnixStream) -> String {
    let mut out = Vec::new();
    stream.read_to_end(&mut out).unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn the_script_gets_exactly_its_meta_variables_and_runs_in_its_directory() {
    let dir = TempDir::new("env");
    std::fs::create_dir(dir.path().join("bin")).unwrap();
    script(
        &dir.path().join("bin/env.sh"),
        "#!/bin/sh\nprintf 'Content-Type: text/plain\\n\\n'\nenv\necho \"cwd=$(pwd)\"\n",
    );
    let launcher = launcher(4);
    let mut started = start(
        &launcher,
        search(&dir.path().join("bin"), "/env.sh/a/b"),
        dir.path(),
        &[
            ("REQUEST_METHOD", "GET"),
            ("QUERY_STRING", "x=1"),
            ("GATEWAY_INTERFACE", "CGI/1.1"),
        ],
        WITHIN,
    );
    let output = read_all(&mut started.stream);
    let root = dir.path().display();
    for expected in [
        "REQUEST_METHOD=GET".to_owned(),
        "QUERY_STRING=x=1".to_owned(),
        "GATEWAY_INTERFACE=CGI/1.1".to_owned(),
        "SCRIPT_NAME=/cgi-bin/env.sh".to_owned(),
        format!("SCRIPT_FILENAME={root}/bin/env.sh"),
        "PATH_INFO=/a/b".to_owned(),
        format!("PATH_TRANSLATED={root}/a/b"),
        format!("cwd={root}/bin"),
    ] {
        assert!(
            output.lines().any(|line| line == expected),
            "{expected} missing in:\n{output}"
        );
    }
    assert!(
        output.starts_with("Content-Type: text/plain\n\n"),
        "{output}"
    );
    // ampd's own environment is not passed on (PATH aside, which `#!/usr/bin/env` needs).
    for name in ["HOME=", "CARGO", "RUST_"] {
        assert!(
            !output.lines().any(|line| line.starts_with(name)),
            "{name} leaked:\n{output}"
        );
    }
    assert!(
        output.lines().any(|line| line.starts_with("PATH=")),
        "{output}"
    );
    assert_eq!(started.failure.get(), None);
    assert!(
        eventually(WITHIN, || launcher.running() == 0),
        "the slot is freed once reaped"
    );
}

#[test]
fn without_path_info_neither_path_info_nor_path_translated_is_set() {
    let dir = TempDir::new("nopathinfo");
    script(&dir.path().join("env.sh"), "#!/bin/sh\nenv\n");
    let launcher = launcher(4);
    let mut started = start(
        &launcher,
        Script::Fixed {
            filename: dir.path().join("env.sh"),
            script_name: "/env.sh".to_owned(),
            path_info: String::new(),
        },
        dir.path(),
        &[],
        WITHIN,
    );
    let output = read_all(&mut started.stream);
    assert!(output.contains("SCRIPT_NAME=/env.sh\n"), "{output}");
    assert!(
        !output.contains("PATH_INFO") && !output.contains("PATH_TRANSLATED"),
        "{output}"
    );
}

#[test]
fn the_request_body_on_stdin_comes_back_on_stdout_streamed() {
    let dir = TempDir::new("echo");
    script(&dir.path().join("cat.sh"), "#!/bin/sh\nexec cat\n");
    let launcher = launcher(4);
    let started = start(
        &launcher,
        search(dir.path(), "/cat.sh"),
        dir.path(),
        &[],
        WITHIN,
    );
    // 4 MiB: far more than the socket holds, so the script must read while it writes.
    let body: Vec<u8> = (0..4 << 20).map(|at: u32| (at % 251) as u8).collect();
    let mut writer = started.stream.try_clone().unwrap();
    let sent = body.clone();
    let feeding = std::thread::spawn(move || {
        writer.write_all(&sent).unwrap();
        writer.shutdown(std::net::Shutdown::Write).unwrap();
    });
    let mut back = Vec::new();
    let mut reader = started.stream;
    reader.read_to_end(&mut back).unwrap();
    feeding.join().unwrap();
    assert_eq!(back.len(), body.len());
    assert!(back == body, "the bytes came back changed");
}

#[test]
fn stderr_lines_reach_the_error_log_with_the_scripts_path() {
    capture_log();
    let dir = TempDir::new("stderr");
    script(
        &dir.path().join("noisy.sh"),
        "#!/bin/sh\necho 'first complaint 7f3a' >&2\nprintf 'second complaint 7f3a without newline' >&2\necho out\n",
    );
    let launcher = launcher(4);
    let mut started = start(
        &launcher,
        search(dir.path(), "/noisy.sh"),
        dir.path(),
        &[],
        WITHIN,
    );
    assert_eq!(read_all(&mut started.stream), "out\n");
    let path = dir.path().join("noisy.sh").display().to_string();
    let first = log_lines(&["first complaint 7f3a"], WITHIN);
    assert_eq!(first.len(), 1, "{first:?}");
    assert!(
        first[0].contains(&format!("[error] cgi {path}: first complaint 7f3a")),
        "{first:?}"
    );
    let second = log_lines(&["second complaint 7f3a without newline"], WITHIN);
    assert!(second[0].contains(&path), "{second:?}");
}

#[test]
fn a_script_past_its_timeout_is_killed_with_its_process_group() {
    capture_log();
    let dir = TempDir::new("timeout");
    // The script starts a child that would outlive it, says both pids, then waits.
    script(
        &dir.path().join("slow.sh"),
        "#!/bin/sh\nsleep 60 &\necho \"$$ $!\"\nwait\n",
    );
    let launcher = launcher(4);
    let began = Instant::now();
    let mut started = start(
        &launcher,
        search(dir.path(), "/slow.sh"),
        dir.path(),
        &[],
        Duration::from_millis(300),
    );
    let output = read_all(&mut started.stream);
    let took = began.elapsed();
    assert!(
        took >= Duration::from_millis(250) && took < Duration::from_secs(5),
        "{took:?}"
    );
    let pids: Vec<i32> = output
        .split_whitespace()
        .map(|pid| pid.parse().unwrap())
        .collect();
    assert_eq!(pids.len(), 2, "{output}");
    for pid in pids {
        // Gone, or a zombie until its new parent reaps it: either way not running.
        assert!(
            eventually(WITHIN, || !std::fs::read_to_string(format!(
                "/proc/{pid}/stat"
            ))
            .is_ok_and(|stat| !stat.contains(") Z "))),
            "process {pid} survived the timeout"
        );
    }
    let path = dir.path().join("slow.sh").display().to_string();
    assert!(!log_lines(&[&path, "still running after 300ms"], WITHIN).is_empty());
    assert!(eventually(WITHIN, || launcher.running() == 0));
}

#[test]
fn missing_scripts_directories_and_plain_files_fail_before_the_socket_closes() {
    let dir = TempDir::new("failures");
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    std::fs::write(dir.path().join("plain.txt"), "text").unwrap();
    let launcher = launcher(4);
    for (rest, expected) in [
        ("/missing.sh", LaunchFailure::NotFound),
        ("/sub", LaunchFailure::Forbidden),
        ("/plain.txt", LaunchFailure::Forbidden),
    ] {
        let mut started = start(&launcher, search(dir.path(), rest), dir.path(), &[], WITHIN);
        assert_eq!(read_all(&mut started.stream), "", "{rest}");
        // The end of stream came after the failure was set.
        assert_eq!(started.failure.get(), Some(&expected), "{rest}");
    }
    assert!(eventually(WITHIN, || launcher.running() == 0));
}

#[test]
fn a_script_that_cannot_be_executed_is_a_spawn_failure_in_the_log() {
    capture_log();
    let dir = TempDir::new("spawn");
    script(
        &dir.path().join("broken.sh"),
        "#!/nonexistent/interpreter-5c1d\n",
    );
    let launcher = launcher(4);
    // Many times: the failure is set before the end of stream, every time.
    for _ in 0..20 {
        let mut started = start(
            &launcher,
            search(dir.path(), "/broken.sh"),
            dir.path(),
            &[],
            WITHIN,
        );
        assert_eq!(read_all(&mut started.stream), "");
        assert_eq!(started.failure.get(), Some(&LaunchFailure::Spawn));
    }
    let path = dir.path().join("broken.sh").display().to_string();
    assert!(!log_lines(&["cannot run", &path], WITHIN).is_empty());
    assert!(eventually(WITHIN, || launcher.running() == 0));
}

#[test]
fn at_max_scripts_reserve_says_no_until_a_script_is_reaped() {
    let dir = TempDir::new("cap");
    script(
        &dir.path().join("wait.sh"),
        "#!/bin/sh\nread line\necho \"got $line\"\n",
    );
    let launcher = launcher(2);
    let mut first = start(
        &launcher,
        search(dir.path(), "/wait.sh"),
        dir.path(),
        &[],
        WITHIN,
    );
    let spare = launcher.reserve().expect("the second place");
    assert!(launcher.reserve().is_none(), "two of two are taken");
    assert_eq!(launcher.running(), 2);
    drop(spare);
    assert_eq!(
        launcher.running(),
        1,
        "a slot dropped unused is free at once"
    );
    let clone = launcher.clone();
    let second = clone.reserve().expect("clones share the count");
    assert!(launcher.reserve().is_none());
    drop(second);
    // The running script holds its place until it ends and is reaped.
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(launcher.running(), 1);
    first.stream.write_all(b"hello\n").unwrap();
    assert_eq!(read_all(&mut first.stream), "got hello\n");
    assert!(eventually(WITHIN, || launcher.running() == 0));
}

#[test]
fn scripts_that_ended_are_reaped_while_new_ones_keep_arriving() {
    // Many clients each running one short script after another, as a CGI location under load:
    // ended scripts must be reaped (their places freed) between starts, or the cap fills with
    // finished ones and requests are refused although few scripts run.
    let dir = TempDir::new("stream");
    script(&dir.path().join("hello.sh"), "#!/bin/sh\necho hello\n");
    let clients = 24;
    let launcher = launcher(64);
    let refused = std::sync::atomic::AtomicUsize::new(0);
    let deadline = Instant::now() + Duration::from_secs(3);
    std::thread::scope(|scope| {
        for _ in 0..clients {
            scope.spawn(|| {
                while Instant::now() < deadline {
                    let Some(slot) = launcher.reserve() else {
                        refused.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        std::thread::sleep(Duration::from_millis(1));
                        continue;
                    };
                    let (mut ours, theirs) = UnixStream::pair().unwrap();
                    ours.set_read_timeout(Some(WITHIN)).unwrap();
                    Launch {
                        slot,
                        script: search(dir.path(), "/hello.sh"),
                        document_root: dir.path().to_path_buf(),
                        env: Vec::new(),
                        timeout: WITHIN,
                        failure: Arc::new(OnceLock::new()),
                    }
                    .start(OwnedFd::from(theirs));
                    assert_eq!(read_all(&mut ours), "hello\n");
                }
            });
        }
    });
    assert_eq!(
        refused.load(std::sync::atomic::Ordering::Relaxed),
        0,
        "{clients} clients never need more than 64 places"
    );
    assert!(eventually(WITHIN, || launcher.running() == 0));
}
