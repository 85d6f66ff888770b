//! Every program ampd starts begins with default signal handling, under every engine: an
//! application, a CGI script, a helper process (`--helpers-mode process`) and the new process of
//! a binary upgrade, although the server blocks the signals it reads from its signalfd, some of
//! its threads block nearly all, and it was itself started with signals ignored (as a shell's
//! background job is, or a program under `nohup`). An application and a script start with an
//! empty mask and nothing ignored; a copy of ampd starts with exactly the signals ampd handles
//! blocked (they wait for its signalfd) and only `SIGPIPE` ignored (Rust's runtime does that).
//! So an application gets `SIGTERM` when the server stops and ends at once, long before its
//! `stop_timeout`.

use crate::support;

use std::time::{Duration, Instant};

use support::gateway::fetch;
use support::processes::{alive, signal, wait_gone};
use support::*;

const WITHIN: Duration = Duration::from_secs(15);

/// Far beyond `WITHIN`: a stop that waits it out fails the test instead of passing slowly.
const STOP_TIMEOUT: &str = "120s";

/// Starts ampd with `SIGINT`, `SIGQUIT` (as `sh` does for `cmd &`) and `SIGALRM` ignored.
const IGNORING: [&str; 3] = [
    "perl",
    "-e",
    "$SIG{INT} = $SIG{QUIT} = $SIG{ALRM} = 'IGNORE'; exec { $ARGV[0] } @ARGV or die \"exec: $!\"",
];

/// A CGI script that answers with its own `SigBlk` and `SigIgn` (Perl leaves both as it found
/// them but for `SIGFPE`, which it ignores itself; a shell would clear its mask itself).
const SIGNALS_CGI: &str = r#"#!/usr/bin/perl
open(my $status, '<', "/proc/$$/status") or die "status: $!";
print "Content-Type: text/plain\r\n\r\n";
print grep { /^Sig(Blk|Ign):/ } <$status>;
"#;

/// ampd's handled signals: HUP, INT, QUIT, USR1, USR2, TERM.
const HANDLED: u64 = 0x4a07;
const SIGPIPE: u64 = 1 << (13 - 1);
const SIGFPE: u64 = 1 << (8 - 1);
const SIGCHLD: u64 = 1 << (17 - 1);

/// `SigBlk` and `SigIgn` in the text of a `/proc/PID/status`.
fn blocked_and_ignored(status: &str) -> (u64, u64) {
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|value| u64::from_str_radix(value.trim(), 16).ok())
            .unwrap_or_else(|| panic!("no {name} in {status}"))
    };
    (field("SigBlk:"), field("SigIgn:"))
}

fn signals_of(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_else(|error| panic!("/proc/{pid}/status: {error}"));
    blocked_and_ignored(&status)
}

/// The children of `parent` whose command line has `word`.
fn children_with(parent: u32, word: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
        if fields[0] == "Z" || fields[1] != parent.to_string() {
            continue;
        }
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if cmdline
            .split(|&byte| byte == 0)
            .any(|arg| arg == word.as_bytes())
        {
            found.push(pid);
        }
    }
    found
}

fn wait_until<T>(what: &str, mut found: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + WITHIN;
    loop {
        if let Some(value) = found() {
            return value;
        }
        assert!(Instant::now() < deadline, "not within {WITHIN:?}: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The process an upgrade started, stopped (`SIGTERM`) however the test ends.
struct Successor(Option<u32>);

impl Drop for Successor {
    fn drop(&mut self) {
        if let Some(pid) = self.0.take() {
            signal("TERM", pid, false);
            if !wait_gone(pid, WITHIN) {
                signal("KILL", pid, false);
            }
        }
    }
}

fn config(root: &TempRoot, arch: &str) -> std::path::PathBuf {
    let outside = root.outside_dir();
    write_config(
        root,
        arch,
        &format!(
            "pid_file = \"ampd.pid\"\n\
             [application.probe]\ncommand = [\"sleep\", \"600\"]\nsocket = \"{}\"\nstop_timeout = \"{STOP_TIMEOUT}\"\n\n\
             [[site]]\nroot = \"www\"\n\n\
             [[site.location]]\npath = \"/cgi-bin/\"\nhandler = \"cgi\"\n",
            outside.join("probe.sock").display()
        ),
    )
}

for_each_arch!(fn programs_start_with_default_signals_and_applications_stop_on_sigterm(arch) {
    let root = TempRoot::new();
    let script = root.path().join("cgi-bin/signals.pl");
    std::fs::create_dir_all(script.parent().unwrap()).unwrap();
    support::write_executable(&script, SIGNALS_CGI);
    let file = config(&root, arch);
    let mut server = Server::start(Options::config_file(&file).wrapped(IGNORING));
    let (own_blocked, own_ignored) = signals_of(server.pid());
    assert_eq!(own_ignored & (1 << (14 - 1)), 1 << (14 - 1), "the wrapper left SIGALRM ignored in ampd");
    assert_eq!(own_blocked & HANDLED, HANDLED);

    // The application: nothing blocked, nothing ignored.
    let application = wait_until("the application's process", || children_with(server.pid(), "600").first().copied());
    assert_eq!(signals_of(application), (0, 0), "application {application}");

    // A CGI script, started by the launcher thread: the same.
    let answer = fetch(server.addr(), "GET", "/cgi-bin/signals.pl", &[]);
    assert_eq!(answer.status, 200, "{answer:?}\n{}", server.stderr());
    let (blocked, ignored) = blocked_and_ignored(&answer.body_text());
    assert_eq!((blocked, ignored & !SIGFPE), (0, 0), "CGI script: {}", answer.body_text());

    // Helper processes are copies of ampd: its handled signals blocked, only SIGPIPE ignored.
    if arch.contains("--helpers-mode process") {
        let helpers = children_with(server.pid(), "__helper");
        assert!(!helpers.is_empty(), "no helper process");
        for helper in helpers {
            assert_eq!(signals_of(helper), (HANDLED, SIGPIPE), "helper process {helper}");
        }
    }

    // The new process of an upgrade: the same as a helper.
    let pid_file = root.outside_dir().join("ampd.pid");
    server.signal("USR2");
    let mut successor = Successor(None);
    let new_pid = wait_until("the new process's pid file", || {
        std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|text| text.trim().parse::<u32>().ok())
            .filter(|&pid| pid != server.pid())
    });
    successor.0 = Some(new_pid);
    // Read once it is ready, and until the mask settles: while it starts threads and programs
    // its main thread blocks every signal for a moment (glibc's posix_spawn does, and so do the
    // threads' starts), which is its own doing, not what it was started with.
    assert!(
        server.wait_for_stderr(&format!("upgrade: process {new_pid} is ready"), WITHIN),
        "{}",
        server.stderr()
    );
    // (An `mp` master blocks SIGCHLD itself, for the wait in its loop.)
    let own = if arch == "mp" { SIGCHLD } else { 0 };
    let settled = |(blocked, ignored): (u64, u64)| (blocked & !own, ignored);
    let deadline = Instant::now() + WITHIN;
    let mut seen = settled(signals_of(new_pid));
    while seen != (HANDLED, SIGPIPE) && Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
        seen = settled(signals_of(new_pid));
    }
    assert_eq!(seen, (HANDLED, SIGPIPE), "the upgraded process");

    // The old server drains and stops its application with SIGTERM, which ends it at once:
    // nothing waits for the stop_timeout.
    let began = Instant::now();
    assert_eq!(server.wait_exit(WITHIN), Some(0), "{}", server.stderr());
    assert!(!alive(application), "the application outlived the old server");
    assert!(!server.stderr().contains("still running after its stop_timeout"), "{}", server.stderr());
    assert!(began.elapsed() < WITHIN, "{:?}", began.elapsed());

    // The new server's application, started by it, stops the same way.
    let newer = wait_until("the new server's application", || children_with(new_pid, "600").first().copied());
    assert_eq!(signals_of(newer), (0, 0), "application {newer} of the new server");
    signal("TERM", new_pid, false);
    assert!(wait_gone(new_pid, WITHIN), "the new server did not stop within {WITHIN:?}");
    successor.0 = None;
    assert!(!alive(newer), "the new server's application outlived it");
    assert!(!root.outside_dir().join("probe.sock").exists(), "the socket file is left");
});
