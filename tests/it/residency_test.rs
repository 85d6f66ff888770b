//! The residency test (`caches.residency_test`, `--no-residency-test`): with it on, an event
//! loop reads and sends a file whose pages are cached itself; with it off, every read the file
//! cache does not answer goes to a helper thread, even of a cached file (Flash without
//! `mincore`, §5.7). Who read is told by the per-thread I/O counters of /proc (`rchar` counts
//! `read` and `sendfile`), summed over the helper threads (named `LOOP-helper-N`, which the
//! kernel cuts to 15 bytes: `reactor-0-helpe`).

use crate::support;

use support::*;

/// Bytes read so far by the server's helper threads.
fn helpers_read(pid: u32) -> u64 {
    let mut total = 0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).expect("the server's threads") {
        let task = task.expect("a thread").path();
        let name = std::fs::read_to_string(task.join("comm")).unwrap_or_default();
        if !name.contains("-helpe") {
            continue;
        }
        let io = std::fs::read_to_string(task.join("io")).unwrap_or_default();
        total += io
            .lines()
            .find_map(|line| line.strip_prefix("rchar: "))
            .and_then(|value| value.trim().parse::<u64>().ok())
            .unwrap_or(0);
    }
    total
}

const SMALL: usize = 10 << 10;
const LARGE: usize = 300 << 10;

/// Fetches a small file (file cache, `writev`) and a large one (`sendfile`), both just written
/// and so in the page cache, and returns what the helpers read meanwhile.
fn read_by_helpers(options: Options, root: &TempRoot) -> u64 {
    let small = vec![b's'; SMALL];
    let large = vec![b'l'; LARGE];
    root.file("small.bin", &small);
    root.file("large.bin", &large);
    let server = Server::start(options);
    let before = helpers_read(server.pid());
    let mut conn = Conn::open(server.addr());
    assert_eq!(conn.get("/small.bin", &[]).body, small);
    assert_eq!(conn.get("/large.bin", &[]).body, large);
    helpers_read(server.pid()) - before
}

#[test]
fn with_the_residency_test_the_loop_reads_cached_files_itself() {
    for arch in ["amped", "reactor"] {
        let root = TempRoot::new();
        let read = read_by_helpers(Options::new(root.path(), arch), &root);
        assert!(read < SMALL as u64, "{arch}: the helpers read {read} bytes");
    }
}

#[test]
fn without_it_every_read_goes_to_a_helper() {
    for arch in ["amped", "reactor"] {
        let root = TempRoot::new();
        let options = Options::new(root.path(), arch).arg("--no-residency-test");
        let read = read_by_helpers(options, &root);
        assert!(
            read >= (SMALL + LARGE) as u64,
            "{arch}: the helpers read only {read} bytes"
        );
    }
}

#[test]
fn the_config_key_switches_it_off() {
    let root = TempRoot::new();
    let config = write_config(
        &root,
        "amped",
        "[caches]\nresidency_test = false\n[[site]]\nroot = \"www\"\n",
    );
    let read = read_by_helpers(Options::config_file(&config), &root);
    assert!(
        read >= (SMALL + LARGE) as u64,
        "the helpers read only {read} bytes"
    );
}
