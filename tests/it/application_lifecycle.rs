//! The life of persistent applications (`[application.NAME]`) with the server's, under every
//! engine: the processes run once the server is ready and answer on the socket ampd bound
//! (descriptor 0), one that is killed is started again, `SIGHUP` with a changed command
//! replaces them, `SIGTERM` and `SIGQUIT` stop them and remove the socket file, a binary
//! upgrade hands the socket path to the new server's processes, a server killed outright takes
//! them with it, and one that cannot start fails the start-up. A plain echo loop is enough here;
//! tests/it/applications.rs drives a real FastCGI application (flup) through `fastcgi_pass`.

use crate::support;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use support::*;

const WITHIN: Duration = Duration::from_secs(15);

/// Far beyond `WITHIN`: the processes end at their `SIGTERM` (Python's default action), so a
/// stop that waits this out fails here instead of passing slowly (SIGQUIT cuts it to 1 s).
const STOP_TIMEOUT: &str = "120s";

/// Accepts on descriptor 0 and answers every connection (once it has sent something) with its
/// first argument and its pid.
const ECHO_APP: &str = r#"
import os, socket, sys
listener = socket.socket(fileno=0)
print("serving as", sys.argv[1], flush=True)
while True:
    connection, _ = listener.accept()
    connection.recv(100)
    connection.sendall(("%s %d" % (sys.argv[1], os.getpid())).encode())
    connection.close()
"#;

fn config(root: &TempRoot, arch: &str, socket: &Path, generation: &str) -> PathBuf {
    write_config(
        root,
        arch,
        &format!(
            "pid_file = \"ampd.pid\"\n[application.echo]\ncommand = [\"python3\", \"app.py\", \"{generation}\"]\nprocesses = 2\nsocket = \"{}\"\nstop_timeout = \"{STOP_TIMEOUT}\"\n\n[[site]]\nroot = \"{}\"\n",
            socket.display(),
            root.path().display()
        ),
    )
}

/// The children of process `parent` running app.py with `generation` as argument.
fn app_processes(parent: u32, generation: &str) -> Vec<u32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // pid (comm) state ppid ...: comm may hold spaces, so split after the last ')'.
        let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
        if fields[0] == "Z" || fields[1] != parent.to_string() {
            continue;
        }
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let words: Vec<&[u8]> = cmdline.split(|&byte| byte == 0).collect();
        if words.iter().any(|word| word.ends_with(b"app.py"))
            && words.contains(&generation.as_bytes())
        {
            pids.push(pid);
        }
    }
    pids.sort_unstable();
    pids
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|stat| !stat[stat.rfind(')').unwrap()..].starts_with(") Z"))
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + WITHIN;
    while !done() {
        assert!(Instant::now() < deadline, "not within {WITHIN:?}: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn ask(socket: &Path) -> String {
    let mut stream = UnixStream::connect(socket).unwrap();
    stream.set_read_timeout(Some(WITHIN)).unwrap();
    let _ = stream.write_all(b"?");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
}

for_each_arch!(fn applications_start_restart_reload_and_stop_with_the_server(arch) {
    let root = TempRoot::new();
    root.file("index.html", "home");
    root.outside_file("app.py", ECHO_APP);
    let socket = root.outside_dir().join("echo.sock");
    let file = config(&root, arch, &socket, "one");
    let mut server = Server::start(Options::config_file(&file));

    // Running once the server is ready, both answering on the socket ampd bound.
    // The list that showed two is the one kept: /proc read again may catch a process between
    // states.
    let mut first = Vec::new();
    wait_until("two processes of generation one", || {
        first = app_processes(server.pid(), "one");
        first.len() == 2
    });
    let answer = ask(&socket);
    let (generation, pid) = answer.split_once(' ').unwrap();
    assert_eq!(generation, "one");
    assert!(first.contains(&pid.parse().unwrap()), "{answer} from {first:?}");
    wait_until("their output in the error log", || {
        first.iter().all(|pid| server.stderr().contains(&format!("application echo[{pid}]: serving as one")))
    });

    // One killed is started again (the other is left alone).
    let victim = first[0];
    assert!(std::process::Command::new("kill").args(["-KILL", &victim.to_string()]).status().unwrap().success());
    wait_until("the killed process replaced", || {
        let now = app_processes(server.pid(), "one");
        now.len() == 2 && !now.contains(&victim) && now.contains(&first[1])
    });
    assert!(server.stderr().contains(&format!("application echo[{victim}] was killed by signal 9; starting it again in 100ms")), "{}", server.stderr());

    // SIGHUP with a changed command: new processes, the old ones stopped.
    let before = app_processes(server.pid(), "one");
    config(&root, arch, &socket, "two");
    server.signal("HUP");
    wait_until("two processes of generation two", || app_processes(server.pid(), "two").len() == 2);
    wait_until("generation one stopped", || before.iter().all(|&pid| !alive(pid)));
    assert!(ask(&socket).starts_with("two "));
    let last = app_processes(server.pid(), "two");

    // The site still serves beside them.
    let response = get(server.addr(), "/index.html");
    assert_eq!((response.status, response.body.as_slice()), (200, &b"home"[..]));

    // SIGTERM: the server drains, stops its applications, removes the socket and exits 0.
    server.signal("TERM");
    assert_eq!(server.wait_exit(WITHIN), Some(0), "{}", server.stderr());
    assert!(last.iter().all(|&pid| !alive(pid)), "applications outlived the server");
    assert!(!socket.exists(), "the socket file is left behind");
    assert!(server.stderr().contains("application echo: stopped"), "{}", server.stderr());
    assert!(!server.stderr().contains("after its stop_timeout"), "{}", server.stderr());
});

#[test]
fn an_application_that_cannot_start_is_a_start_up_failure_naming_it() {
    let root = TempRoot::new();
    let socket = root.outside_dir().join("broken.sock");
    let file = write_config(
        &root,
        "reactor",
        &format!(
            "[application.broken]\ncommand = [\"no-such-program-ampd\"]\nsocket = \"{}\"\n\n[[site]]\nroot = \"{}\"\n",
            socket.display(),
            root.path().display()
        ),
    );
    let (code, _, stderr) = run_to_exit(&["run", "-c", file.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("ampd: application broken: cannot run no-such-program-ampd: "),
        "{stderr}"
    );
    assert!(!socket.exists());
}

/// Sends `SIGTERM` to the upgraded process when the test ends, however it ends, and waits for
/// it (so its applications are stopped, not orphaned).
struct Successor(Option<u32>);

impl Drop for Successor {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            let _ = std::process::Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status();
            let deadline = Instant::now() + WITHIN;
            while alive(pid) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

for_each_arch!(fn a_binary_upgrade_hands_the_socket_path_to_the_new_processes(arch) {
    let root = TempRoot::new();
    root.outside_file("app.py", ECHO_APP);
    let socket = root.outside_dir().join("echo.sock");
    let file = config(&root, arch, &socket, "one");
    let pid_file = root.outside_dir().join("ampd.pid");
    let mut server = Server::start(Options::config_file(&file));
    wait_until("the first server's processes", || app_processes(server.pid(), "one").len() == 2);
    let old = app_processes(server.pid(), "one");

    server.signal("USR2");
    let mut successor = Successor(None);
    wait_until("the new process's pid file", || {
        successor.0 = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|text| text.trim().parse().ok())
            .filter(|&pid| pid != server.pid());
        successor.0.is_some()
    });
    let new_pid = successor.0.unwrap();
    assert_eq!(server.wait_exit(WITHIN), Some(0), "{}", server.stderr());

    // The old server stopped its own processes (at their SIGTERM) and left the new socket
    // file in place.
    assert!(old.iter().all(|&pid| !alive(pid)), "the old server's applications outlived it");
    assert!(!server.stderr().contains("after its stop_timeout"), "{}", server.stderr());
    wait_until("the new server's processes", || app_processes(new_pid, "one").len() == 2);
    let new = app_processes(new_pid, "one");
    assert!(socket.exists(), "the old server removed the new socket file");
    let answer = ask(&socket);
    let pid: u32 = answer.split_once(' ').unwrap().1.parse().unwrap();
    assert!(new.contains(&pid), "{answer} from {new:?}");

    drop(successor);
    assert!(new.iter().all(|&pid| !alive(pid)));
    assert!(!socket.exists());
});

for_each_arch!(fn sigquit_stops_the_applications_before_the_server_exits(arch) {
    let root = TempRoot::new();
    // Ignores SIGTERM: on SIGQUIT it gets a second, then SIGKILL.
    root.outside_file(
        "app.py",
        format!("import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n{ECHO_APP}"),
    );
    let socket = root.outside_dir().join("echo.sock");
    let file = config(&root, arch, &socket, "one");
    let mut server = Server::start(Options::config_file(&file));
    wait_until("the processes", || app_processes(server.pid(), "one").len() == 2);
    let running = app_processes(server.pid(), "one");
    wait_until("SIGTERM ignored", || {
        running.iter().all(|pid| server.stderr().contains(&format!("application echo[{pid}]: serving as one")))
    });
    let began = Instant::now();
    server.signal("QUIT");
    assert_eq!(server.wait_exit(WITHIN), Some(0), "{}", server.stderr());
    assert!(began.elapsed() < Duration::from_secs(5), "{:?}", began.elapsed());
    assert!(running.iter().all(|&pid| !alive(pid)), "applications outlived SIGQUIT");
    assert!(!socket.exists());
});

for_each_arch!(fn applications_die_with_a_server_killed_outright(arch) {
    let root = TempRoot::new();
    root.outside_file("app.py", ECHO_APP);
    let socket = root.outside_dir().join("echo.sock");
    let file = config(&root, arch, &socket, "one");
    let mut server = Server::start(Options::config_file(&file));
    wait_until("the processes", || app_processes(server.pid(), "one").len() == 2);
    let running = app_processes(server.pid(), "one");
    wait_until("the programs running", || {
        running.iter().all(|pid| server.stderr().contains(&format!("application echo[{pid}]: serving as one")))
    });
    server.signal("KILL");
    assert!(server.wait_exit(WITHIN).is_some());
    // Nobody is left to stop them: the kernel's parent-death signal does.
    wait_until("the orphaned processes ended", || running.iter().all(|&pid| !alive(pid)));
});
