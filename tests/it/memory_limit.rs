//! Under a memory limit the caches size themselves to fit (issue 15, finding 16): the server
//! is started inside a real memory cgroup of its own (v2 `memory.max`, or v1
//! `memory.limit_in_bytes` where that is the memory hierarchy), says at start-up how it sized
//! the file cache, and holds no more than that; a size in the configuration still wins. The
//! parsing of /proc/self/cgroup and mountinfo is unit-tested with fixtures in
//! src/content/memory.rs.

use crate::support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use support::*;

/// A memory cgroup made for one server, removed when dropped (after the server is gone).
struct MemoryCgroup {
    dir: PathBuf,
}

impl MemoryCgroup {
    /// A new cgroup limited to `bytes`, in the hierarchy that has the memory controller.
    fn new(name: &str, bytes: u64) -> MemoryCgroup {
        assert!(
            is_root_user(),
            "this test needs root, to make a memory cgroup (scripts/test.sh runs as root)"
        );
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        let mut v2 = None;
        let mut v1 = None;
        for line in mountinfo.lines() {
            let Some((left, right)) = line.split_once(" - ") else {
                continue;
            };
            let point = left.split(' ').nth(4).unwrap_or("");
            let mut right = right.split(' ');
            let fstype = right.next().unwrap_or("");
            let options = right.nth(1).unwrap_or("");
            if fstype == "cgroup2" {
                let controllers =
                    std::fs::read_to_string(Path::new(point).join("cgroup.subtree_control"))
                        .unwrap_or_default();
                if controllers.split_whitespace().any(|c| c == "memory") {
                    v2 = Some(PathBuf::from(point));
                }
            } else if fstype == "cgroup" && options.split(',').any(|o| o == "memory") {
                v1 = Some(PathBuf::from(point));
            }
        }
        let (top, file) = match (v2, v1) {
            (Some(top), _) => (top, "memory.max"),
            (None, Some(top)) => (top, "memory.limit_in_bytes"),
            (None, None) => panic!("no cgroup hierarchy with the memory controller is mounted"),
        };
        let dir = top.join(format!("ampd-test-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir(&dir);
        std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
        std::fs::write(dir.join(file), bytes.to_string())
            .unwrap_or_else(|e| panic!("write {file}: {e}"));
        MemoryCgroup { dir }
    }

    /// `sh -c '...'` that moves itself into the cgroup, then execs the server.
    fn wrapper(&self) -> Vec<String> {
        vec![
            "sh".into(),
            "-c".into(),
            "echo $$ > \"$0/cgroup.procs\" && exec \"$@\"".into(),
            self.dir.display().to_string(),
        ]
    }
}

impl Drop for MemoryCgroup {
    fn drop(&mut self) {
        // The server was stopped first (declared after this); a cgroup goes once it is empty.
        let deadline = Instant::now() + Duration::from_secs(5);
        while std::fs::remove_dir(&self.dir).is_err() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

const STATUS: &str =
    "\n  [[site.location]]\n  path = \"/status\"\n  exact = true\n  handler = \"status\"\n";

fn file_cache_bytes(server: &Server) -> u64 {
    get(server.addr(), "/status")
        .body_text()
        .lines()
        .find_map(|line| {
            line.strip_prefix("ampd_cache_bytes{cache=\"file\"} ")?
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

#[test]
fn the_file_cache_fits_under_the_cgroup_memory_limit() {
    let cgroup = MemoryCgroup::new("sized", 256 << 20);
    let root = TempRoot::new();
    // 72 MiB of small files (each under the 64 KiB sendfile threshold, so each is cached).
    let body = vec![b'x'; 48 << 10];
    for index in 0..1536 {
        root.file(&format!("small/{index}.bin"), &body);
    }
    let config = write_config(
        &root,
        "reactor",
        &format!("[[site]]\nroot = \"www\"\n{STATUS}"),
    );
    let server = Server::start(Options::config_file(&config).wrapped(cgroup.wrapper()));
    assert!(
        server.wait_for_stderr("memory limit 256 MiB", Duration::from_secs(5)),
        "no start-up line about the limit:\n{}",
        server.stderr()
    );
    assert!(
        server
            .stderr()
            .contains("file cache 32 MiB per loop (64 MiB in all)"),
        "{}",
        server.stderr()
    );
    for index in 0..1536 {
        assert_eq!(
            get(server.addr(), &format!("/small/{index}.bin")).status,
            200
        );
    }
    // The loops publish their counts a few times a second.
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut held = file_cache_bytes(&server);
    while held < 48 << 20 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        held = file_cache_bytes(&server);
    }
    assert!(held >= 48 << 20, "the file cache was used: {held}");
    assert!(
        held <= 64 << 20,
        "{held} bytes cached, over the 64 MiB the limit allows"
    );
    drop(server);
    drop(cgroup);
}

#[test]
fn a_configured_file_cache_size_wins_over_the_limit() {
    let cgroup = MemoryCgroup::new("configured", 256 << 20);
    let root = TempRoot::new();
    root.file("a.txt", "a");
    let config = write_config(
        &root,
        "mp",
        "[caches]\nfile_cache_bytes = \"100MiB\"\n[[site]]\nroot = \"www\"\n",
    );
    let server = Server::start(Options::config_file(&config).wrapped(cgroup.wrapper()));
    assert_eq!(get(server.addr(), "/a.txt").status, 200);
    assert!(
        !server.stderr().contains("memory limit"),
        "{}",
        server.stderr()
    );
    drop(server);

    // Without the size, mp's four processes share the limit: 16 MiB each.
    let config = write_config(&root, "mp", "[[site]]\nroot = \"www\"\n");
    let server = Server::start(Options::config_file(&config).wrapped(cgroup.wrapper()));
    assert!(
        server.wait_for_stderr(
            "file cache 16 MiB per process (64 MiB in all)",
            Duration::from_secs(5)
        ),
        "{}",
        server.stderr()
    );
    drop(server);
    drop(cgroup);
}
