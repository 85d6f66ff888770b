//! The supervisor with real programs: a Python application that accepts on descriptor 0 and
//! answers, one that exits at once (the backoff), one that ignores `SIGTERM` (the kill).

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use super::*;
use crate::programs::test_support::{capture_log, log_lines, script, TempDir};

const WITHIN: Duration = Duration::from_secs(10);

/// Accepts on descriptor 0 and answers each connection with its pid, `APP_ENV`, its working
/// directory and what it was sent; says `ready` on stdout and `stderr works` on stderr.
const ECHO_APP: &str = r#"
import os, socket, sys
listener = socket.socket(fileno=0)
print("ready", flush=True)
print("stderr works", file=sys.stderr, flush=True)
while True:
    connection, _ = listener.accept()
    data = connection.recv(1000)
    answer = "%d %s %s %s" % (os.getpid(), os.environ.get("APP_ENV"), os.getcwd(), data.decode())
    connection.sendall(answer.encode())
    connection.close()
"#;

fn application(name: &str, dir: &Path, command: &[&str], processes: usize) -> Application {
    Application {
        name: name.to_owned(),
        command: command.iter().map(|&part| part.to_owned()).collect(),
        processes,
        socket: dir.join(format!("{name}.sock")),
        directory: dir.to_path_buf(),
        env: vec![("APP_ENV".to_owned(), "test".to_owned())],
        stop_timeout: Duration::from_secs(5),
    }
}

fn echo_app(name: &str, dir: &Path, processes: usize) -> Application {
    std::fs::write(dir.join("app.py"), ECHO_APP).unwrap();
    application(name, dir, &["python3", "app.py"], processes)
}

/// Tend `supervisor` until `done` holds (at most `WITHIN`).
fn tend_until(supervisor: &mut Supervisor, mut done: impl FnMut(&Supervisor) -> bool) -> bool {
    let deadline = Instant::now() + WITHIN;
    while !done(supervisor) {
        if Instant::now() >= deadline {
            return false;
        }
        supervisor.tend(Duration::from_millis(20), None);
    }
    true
}

fn ask(socket: &Path, what: &str) -> String {
    let mut stream = UnixStream::connect(socket).unwrap();
    stream.set_read_timeout(Some(WITHIN)).unwrap();
    stream.write_all(what.as_bytes()).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
}

fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| !stat.contains(") Z "))
}

fn pids_of(supervisor: &Supervisor, name: &str) -> Vec<i32> {
    let mut pids: Vec<i32> = supervisor
        .pids()
        .into_iter()
        .filter(|(of, _)| of == name)
        .map(|(_, pid)| pid)
        .collect();
    pids.sort_unstable();
    pids
}

#[test]
fn processes_answer_on_the_socket_with_their_env_and_directory_and_one_killed_is_restarted() {
    capture_log();
    let dir = TempDir::new("echo-app");
    let settings = echo_app("echo-b41", dir.path(), 2);
    let mut supervisor = Supervisor::start(std::slice::from_ref(&settings)).unwrap();
    let pids = pids_of(&supervisor, "echo-b41");
    assert_eq!(pids.len(), 2);
    assert!(pids.iter().all(|&pid| alive(pid)));
    let answer = ask(&settings.socket, "hello");
    let words: Vec<&str> = answer.split(' ').collect();
    assert_eq!(words.len(), 4, "{answer}");
    assert!(
        pids.contains(&words[0].parse().unwrap()),
        "{answer} from {pids:?}"
    );
    assert_eq!(
        words[1..],
        ["test", &dir.path().display().to_string(), "hello"]
    );
    // Both processes' stdout and stderr reach the log under their names.
    tend_until(&mut supervisor, |_| {
        log_lines(
            &["application echo-b41[", "]: stderr works"],
            Duration::ZERO,
        )
        .len()
            == 2
    });
    for pid in &pids {
        let prefix = format!("[warn] application echo-b41[{pid}]: ");
        assert!(
            !log_lines(&[&prefix, "ready"], Duration::ZERO).is_empty(),
            "{prefix}ready"
        );
        assert!(!log_lines(&[&prefix, "stderr works"], Duration::ZERO).is_empty());
    }

    let victim = pids[0];
    ampd_sys::child::kill(victim, SIGKILL).unwrap();
    assert!(
        tend_until(&mut supervisor, |supervisor| {
            let now = pids_of(supervisor, "echo-b41");
            now.len() == 2 && !now.contains(&victim)
        }),
        "the killed process was not replaced"
    );
    let restarted = log_lines(
        &[&format!(
            "application echo-b41[{victim}] was killed by signal 9; starting it again in 100ms"
        )],
        WITHIN,
    );
    assert_eq!(restarted.len(), 1, "{restarted:?}");
    assert!(ask(&settings.socket, "again").ends_with(" again"));

    let last = pids_of(&supervisor, "echo-b41");
    supervisor.stop();
    assert!(!settings.socket.exists(), "the socket file is removed");
    for pid in last {
        assert!(!alive(pid), "process {pid} outlived the stop");
    }
    assert!(!log_lines(&["application echo-b41: stopped"], WITHIN).is_empty());
}

#[test]
fn a_process_that_exits_at_once_is_started_again_with_a_doubling_backoff() {
    capture_log();
    let dir = TempDir::new("exits");
    let settings = application(
        "quitter-9c2",
        dir.path(),
        &["sh", "-c", "echo bye; exit 3"],
        1,
    );
    let mut supervisor = Supervisor::start(std::slice::from_ref(&settings)).unwrap();
    let began = Instant::now();
    assert!(tend_until(&mut supervisor, |_| {
        !log_lines(
            &[
                "application quitter-9c2[",
                "exited with status 3; starting it again in 800ms",
            ],
            Duration::ZERO,
        )
        .is_empty()
    }));
    // 100 + 200 + 400 ms of waits passed before the fourth end.
    assert!(
        began.elapsed() >= Duration::from_millis(700),
        "{:?}",
        began.elapsed()
    );
    let lines = log_lines(
        &["application quitter-9c2[", "exited with status 3"],
        Duration::ZERO,
    );
    let waits: Vec<&str> = lines
        .iter()
        .map(|line| line.rsplit(' ').next().unwrap())
        .collect();
    assert_eq!(waits, ["100ms", "200ms", "400ms", "800ms"], "{lines:?}");
    assert!(log_lines(&["application quitter-9c2[", "]: bye"], Duration::ZERO).len() >= 4);
    supervisor.stop();
    assert!(!settings.socket.exists());
}

#[test]
fn a_process_that_ignores_sigterm_is_killed_after_its_stop_timeout() {
    capture_log();
    let dir = TempDir::new("stubborn");
    script(
        &dir.path().join("stubborn.sh"),
        "#!/bin/sh\ntrap '' TERM\necho trapped\nwhile :; do sleep 1; done\n",
    );
    let mut settings = application("stubborn-e07", dir.path(), &["./stubborn.sh"], 1);
    settings.stop_timeout = Duration::from_millis(300);
    let mut supervisor = Supervisor::start(std::slice::from_ref(&settings)).unwrap();
    let pid = pids_of(&supervisor, "stubborn-e07")[0];
    // The trap is set once it said so.
    assert!(tend_until(&mut supervisor, |_| !log_lines(
        &["stubborn-e07[", "trapped"],
        Duration::ZERO
    )
    .is_empty()));
    let began = Instant::now();
    supervisor.stop();
    let took = began.elapsed();
    assert!(
        took >= Duration::from_millis(250) && took < Duration::from_secs(4),
        "{took:?}"
    );
    assert!(!alive(pid));
    assert!(!log_lines(
        &[&format!(
            "application stubborn-e07[{pid}]: still running after its stop_timeout; killed"
        )],
        WITHIN
    )
    .is_empty());
}

#[test]
fn a_stale_socket_is_replaced_and_any_other_file_is_refused_by_name() {
    let dir = TempDir::new("sockets");
    let settings = echo_app("stale-51a", dir.path(), 1);
    // A socket file nobody listens on any more.
    drop(std::os::unix::net::UnixListener::bind(&settings.socket).unwrap());
    assert!(settings.socket.exists());
    let supervisor = Supervisor::start(std::slice::from_ref(&settings)).unwrap();
    assert!(ask(&settings.socket, "x").ends_with(" x"));
    supervisor.stop();

    let mut plain = echo_app("plain-51a", dir.path(), 1);
    plain.socket = dir.path().join("precious.txt");
    std::fs::write(&plain.socket, "keep me").unwrap();
    let failure = Supervisor::start(&[plain.clone()]).unwrap_err();
    assert!(
        matches!(failure, ProgramError::NotASocket { .. }),
        "{failure:?}"
    );
    let message = failure.to_string();
    assert!(
        message.contains("application plain-51a")
            && message.contains(&plain.socket.display().to_string()),
        "{message}"
    );
    assert_eq!(std::fs::read_to_string(&plain.socket).unwrap(), "keep me");
}

#[test]
fn a_program_that_cannot_run_fails_the_start_and_stops_the_ones_started() {
    let dir = TempDir::new("cannot");
    let good = echo_app("good-77d", dir.path(), 1);
    let bad = application("bad-77d", dir.path(), &["no-such-program-77d"], 1);
    let failure = Supervisor::start(&[good.clone(), bad.clone()]).unwrap_err();
    let message = failure.to_string();
    assert!(
        message.starts_with("application bad-77d: cannot run no-such-program-77d: "),
        "{message}"
    );
    assert!(
        !good.socket.exists() && !bad.socket.exists(),
        "no socket file is left behind"
    );
}

#[test]
fn a_reload_keeps_unchanged_applications_restarts_changed_ones_and_stops_removed_ones() {
    capture_log();
    let dir = TempDir::new("reload");
    let kept = echo_app("kept-3e8", dir.path(), 1);
    let changed = echo_app("changed-3e8", dir.path(), 1);
    let removed = echo_app("removed-3e8", dir.path(), 1);
    let mut supervisor =
        Supervisor::start(&[kept.clone(), changed.clone(), removed.clone()]).unwrap();
    let kept_pids = pids_of(&supervisor, "kept-3e8");
    let changed_pids = pids_of(&supervisor, "changed-3e8");
    let removed_pids = pids_of(&supervisor, "removed-3e8");

    let mut kept_again = kept.clone();
    kept_again.stop_timeout = Duration::from_secs(1);
    let mut changed_again = changed.clone();
    changed_again.env = vec![("APP_ENV".to_owned(), "changed".to_owned())];
    changed_again.processes = 2;
    let added = echo_app("added-3e8", dir.path(), 1);
    supervisor.reload(&[kept_again.clone(), changed_again.clone(), added.clone()]);

    assert_eq!(
        pids_of(&supervisor, "kept-3e8"),
        kept_pids,
        "unchanged: untouched"
    );
    let new_changed = pids_of(&supervisor, "changed-3e8");
    assert_eq!(new_changed.len(), 2);
    assert!(new_changed.iter().all(|pid| !changed_pids.contains(pid)));
    assert!(
        ask(&changed.socket, "q").contains(" changed "),
        "new connections reach the new processes"
    );
    assert!(ask(&added.socket, "q").ends_with(" q"));
    assert!(
        !removed.socket.exists(),
        "a removed application's socket goes at once"
    );
    assert!(
        tend_until(&mut supervisor, |_| {
            changed_pids
                .iter()
                .chain(&removed_pids)
                .all(|&pid| !alive(pid))
        }),
        "old processes were not stopped"
    );
    assert!(
        changed.socket.exists(),
        "the old processes' stop left the new socket file alone"
    );

    // A changed application that cannot start leaves the old one serving.
    let mut broken = changed_again.clone();
    broken.command = vec!["no-such-program-3e8".to_owned()];
    supervisor.reload(&[kept_again, broken, added]);
    assert_eq!(pids_of(&supervisor, "changed-3e8"), new_changed);
    assert!(ask(&changed.socket, "still").ends_with(" still"));
    assert!(!log_lines(
        &["reload: application changed-3e8: cannot run no-such-program-3e8"],
        WITHIN
    )
    .is_empty());
    supervisor.stop();
}
