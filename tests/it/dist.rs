//! `dist/`: the Kubernetes manifests parse and agree with the shipped ampd.toml, the
//! Containerfile has its parts, the systemd unit allows an upgrade, and `ampd check` accepts the
//! shipped configuration (`dist/check.py`, which needs python3-yaml).

use crate::support;

#[test]
fn dist_files_parse_and_agree() {
    let output = std::process::Command::new("python3")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/dist/check.py"))
        .arg(support::server::binary())
        .output()
        .expect("python3 must be installed (apt-get install python3 python3-yaml)");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("dist: OK (5 manifests"), "{stdout}");
}

/// `dist/ampd.service`'s sandbox: `systemd-analyze security` rates it under 5 (it rated the
/// unit 9.2 UNSAFE before), and `systemd-analyze verify` accepts it (with the built binary in
/// place of /usr/local/bin/ampd, which verify checks is there).
#[test]
fn the_systemd_unit_is_sandboxed_and_valid() {
    let unit = concat!(env!("CARGO_MANIFEST_DIR"), "/dist/ampd.service");
    let output = std::process::Command::new("systemd-analyze")
        .args(["security", "--offline=yes", unit])
        .output()
        .expect("systemd-analyze (scripts/test.sh installs systemd)");
    let text = String::from_utf8_lossy(&output.stdout);
    let score: f64 = text
        .lines()
        .find_map(|line| {
            line.split("Overall exposure level for ampd.service: ")
                .nth(1)
        })
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|number| number.parse().ok())
        .unwrap_or_else(|| {
            panic!(
                "no exposure level in:\n{text}{}",
                String::from_utf8_lossy(&output.stderr)
            )
        });
    assert!(score < 5.0, "exposure {score} (want < 5):\n{text}");

    let dir = support::TempRoot::new();
    let copy = dir.outside_dir().join("ampd.service");
    let text = std::fs::read_to_string(unit).unwrap();
    std::fs::write(
        &copy,
        text.replace("/usr/local/bin/ampd", support::server::binary()),
    )
    .unwrap();
    let output = std::process::Command::new("systemd-analyze")
        .arg("verify")
        .arg(&copy)
        .output()
        .expect("systemd-analyze");
    assert!(
        output.status.success() && output.stderr.is_empty(),
        "systemd-analyze verify: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Every system call named by `systemd-analyze syscall-filter GROUP`, groups expanded.
fn syscall_group(group: &str, into: &mut std::collections::BTreeSet<String>) {
    let output = std::process::Command::new("systemd-analyze")
        .args(["syscall-filter", group])
        .output()
        .expect("systemd-analyze");
    assert!(output.status.success(), "syscall-filter {group}");
    for line in String::from_utf8_lossy(&output.stdout).lines().skip(1) {
        let name = line.trim();
        if name.is_empty() || name.starts_with('#') {
            continue;
        }
        if name.starts_with('@') {
            syscall_group(name, into);
        } else {
            into.insert(name.to_owned());
        }
    }
}

/// Calls a filter may refuse because ampd does without them: `cachestat` (451, Linux 6.5;
/// newer than this systemd's table, and than strace's here, which prints its number) is refused
/// with EPERM or ENOSYS, and ampd then tests residency with `mincore` as before Linux 6.5.
const HANDLED_REFUSALS: [&str; 2] = ["cachestat", "syscall_0x1c3"];

/// The unit's `SystemCallFilter=` lets through every system call ampd makes: each engine
/// (io_uring's `uring`, `reactor`, forking `mp`, `amped` with helper processes, which exec
/// ampd again) runs under `strace -f` through start-up, requests (a small file, one sent by
/// sendfile, a 404, a HEAD), a reload, a log reopen and a graceful stop. A call outside the
/// filter fails with EPERM in production, which no test without systemd would show.
#[test]
fn the_unit_s_syscall_filter_allows_what_ampd_calls() {
    let unit =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/dist/ampd.service")).unwrap();
    let mut allowed = std::collections::BTreeSet::new();
    for line in unit.lines() {
        if let Some(list) = line.strip_prefix("SystemCallFilter=") {
            for item in list.split_whitespace() {
                if item.starts_with('@') {
                    syscall_group(item, &mut allowed);
                } else {
                    allowed.insert(item.to_owned());
                }
            }
        }
    }
    assert!(allowed.contains("io_uring_setup"), "{allowed:?}");
    let root = support::TempRoot::new();
    root.file("small.txt", "hello");
    root.file("big.bin", support::root::pattern_bytes(256 << 10, 3));
    let mut refused = std::collections::BTreeMap::<String, Vec<&str>>::new();
    for arch in ["uring", "reactor", "mp", "amped --helpers-mode process"] {
        let log = root.outside_dir().join("strace.log");
        let pid_file = root.outside_dir().join("ampd.pid");
        let _ = std::fs::remove_file(&pid_file);
        let config = support::write_config(
            &root,
            arch,
            "pid_file = \"ampd.pid\"\n[log]\naccess = \"access.log\"\n[[site]]\nroot = \"www\"\n",
        );
        let log_arg = log.display().to_string();
        let mut server = support::Server::start(
            support::Options::config_file(&config).wrapped(["strace", "-f", "-qq", "-o", &log_arg]),
        );
        let pid = support::processes::wait_pid_file(&pid_file, std::time::Duration::from_secs(10));
        for (method, path, status) in [
            ("GET", "/small.txt", 200),
            ("GET", "/big.bin", 200),
            ("GET", "/missing", 404),
            ("HEAD", "/small.txt", 200),
        ] {
            let response = support::request(server.addr(), method, path, &[]);
            assert_eq!(response.status, status, "{arch}: {method} {path}");
        }
        support::processes::signal("HUP", pid, false);
        assert!(
            server.wait_for_stderr("reload", std::time::Duration::from_secs(10)),
            "{arch}: {}",
            server.stderr()
        );
        support::processes::signal("USR1", pid, false);
        assert_eq!(support::get(server.addr(), "/small.txt").status, 200);
        support::processes::signal("TERM", pid, false);
        assert_eq!(
            server.wait_exit(std::time::Duration::from_secs(30)),
            Some(0),
            "{arch}: strace and ampd end: {}",
            server.stderr()
        );
        let trace = std::fs::read_to_string(&log).expect("strace's log");
        let mut calls = std::collections::BTreeSet::new();
        for line in trace.lines() {
            // `PID name(args…` or `PID <... name resumed>`: the first form names each call.
            let Some((_, rest)) = line.split_once(' ') else {
                continue;
            };
            let rest = rest.trim_start();
            if let Some((name, _)) = rest.split_once('(') {
                if !name.is_empty()
                    && name
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
                {
                    calls.insert(name.to_owned());
                }
            }
        }
        assert!(
            calls.contains("accept4") || calls.contains("io_uring_enter"),
            "{arch}: {calls:?}"
        );
        for call in calls {
            if !allowed.contains(&call) && !HANDLED_REFUSALS.contains(&call.as_str()) {
                refused.entry(call).or_default().push(arch);
            }
        }
    }
    assert!(
        refused.is_empty(),
        "system calls the unit's filter refuses (EPERM): {refused:?}"
    );
}

/// docs/deploy.md shows `dist/haproxy.cfg` whole, and HAProxy itself accepts it: a reader who
/// copies the block gets a configuration that starts.
#[test]
fn haproxy_sample_is_whole_and_valid() {
    let root = env!("CARGO_MANIFEST_DIR");
    let config = std::fs::read_to_string(format!("{root}/dist/haproxy.cfg")).unwrap();
    let deploy = std::fs::read_to_string(format!("{root}/docs/deploy.md")).unwrap();
    assert!(
        deploy.contains(&format!("```\n{config}```\n")),
        "docs/deploy.md must show dist/haproxy.cfg verbatim"
    );
    let output = std::process::Command::new("haproxy")
        .args(["-c", "-f", &format!("{root}/dist/haproxy.cfg")])
        .output()
        .expect("haproxy must be installed (scripts/test.sh installs it)");
    assert!(
        output.status.success(),
        "haproxy -c refused dist/haproxy.cfg: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
