//! AMPED is real (Flash §3, §6): while one request waits on a slow disk (a FUSE filesystem whose
//! reads sleep 1.5 s), `amped` and `reactor` keep serving a cached file at full speed; `sped`,
//! which does disk work inline, stalls. Needs /dev/fuse, fusermount and Debian's python3-fusepy;
//! set AMPD_SKIP_FUSE=1 to skip where FUSE cannot work (otherwise a missing install fails loudly).

mod support;

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::root::pattern_bytes;
use support::*;

const SLOW_READ_SECONDS: &str = "1.5";
const MOUNT_TIMEOUT: Duration = Duration::from_secs(10);

/// A mounted slowfs; unmounted and its process reaped on Drop.
struct SlowFs {
    child: Child,
    mountpoint: PathBuf,
}

impl SlowFs {
    /// Mounts `source` on `mountpoint`. `Err` says why FUSE is unavailable.
    fn mount(source: &Path, mountpoint: &Path) -> Result<SlowFs, String> {
        if !Path::new("/dev/fuse").exists() {
            return Err("/dev/fuse does not exist".into());
        }
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/slowfs.py");
        let parent_dev = std::fs::metadata(mountpoint.parent().unwrap())
            .map_err(|error| error.to_string())?
            .dev();
        let child = Command::new("/usr/bin/python3")
            .arg(&script)
            .arg(source)
            .arg(mountpoint)
            .arg(SLOW_READ_SECONDS)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|error| format!("cannot run /usr/bin/python3: {error}"))?;
        let mut mounted = SlowFs {
            child,
            mountpoint: mountpoint.to_path_buf(),
        };
        let deadline = Instant::now() + MOUNT_TIMEOUT;
        loop {
            let dev = std::fs::metadata(mountpoint)
                .map(|meta| meta.dev())
                .unwrap_or(parent_dev);
            if dev != parent_dev {
                return Ok(mounted);
            }
            if let Ok(Some(status)) = mounted.child.try_wait() {
                let mut stderr = String::new();
                if let Some(mut pipe) = mounted.child.stderr.take() {
                    use std::io::Read;
                    let _ = pipe.read_to_string(&mut stderr);
                }
                return Err(format!(
                    "slowfs.py exited ({status}) before mounting: {stderr}"
                ));
            }
            if Instant::now() > deadline {
                return Err(format!("slowfs did not mount within {MOUNT_TIMEOUT:?}"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for SlowFs {
    fn drop(&mut self) {
        let unmounted = Command::new("fusermount")
            .arg("-u")
            .arg(&self.mountpoint)
            .stderr(Stdio::null())
            .status()
            .map(|status| status.success())
            .unwrap_or(false);
        if !unmounted {
            let _ = Command::new("umount")
                .arg("-l")
                .arg(&self.mountpoint)
                .status();
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

for_each_arch!(fn hot_file_served_while_disk_is_slow(arch) {
    let root = TempRoot::new();
    root.file("hot.txt", "hot and cached");
    let source = root.outside_dir().join("slow-source");
    std::fs::create_dir_all(&source).unwrap();
    // One read-ahead window (128 KiB): the whole range is in the page cache, not yet filled, as
    // soon as the first read starts, which is when a residency test is wrong (engine::page_ins).
    let slow_data = pattern_bytes(100 * 1024, 17);
    std::fs::write(source.join("slow.bin"), &slow_data).unwrap();
    let mountpoint = root.dir("fuse");
    let slowfs = match SlowFs::mount(&source, &mountpoint) {
        Ok(mounted) => mounted,
        Err(reason) if std::env::var("AMPD_SKIP_FUSE").as_deref() == Ok("1") => {
            println!("skipped (AMPD_SKIP_FUSE=1): {reason}");
            return;
        }
        Err(reason) => panic!(
            "FUSE unavailable: {reason}. Install fuse3 and python3-fusepy, run as root with \
             /dev/fuse, or set AMPD_SKIP_FUSE=1"
        ),
    };

    let server = Server::start(Options::new(root.path(), arch));
    let addr = server.addr();
    let mut hot = Conn::open(addr);
    for _ in 0..5 {
        assert_eq!(hot.get("/hot.txt", &[]).body, b"hot and cached");
    }

    // Two clients want the slow file. The second arrives while a helper is reading the file in
    // for the first: its pages are then in the page cache but not yet filled, and an event loop
    // that trusted a residency test there would wait for the read itself (engine::page_ins).
    // Under `mp` a process holding an idle keep-alive connection may take a new client, and the
    // held connection then waits behind that client's disk read (docs/architecture.md, `mp`):
    // with a second slow client the hot connection's process can be the one that blocks.
    let slow_clients = if arch == "mp" { 1 } else { 2 };
    let slow_requests: Vec<_> = (0..slow_clients)
        .map(|_| {
            let expected = slow_data.clone();
            let request = std::thread::spawn(move || {
                let mut conn = Conn::open(addr);
                conn.set_read_timeout(Duration::from_secs(30));
                let response = conn.get("/fuse/slow.bin", &[]);
                assert_eq!(response.status, 200);
                assert!(response.body == expected, "slow file body differs");
            });
            // Let this request reach the server and start its first read (which takes 1.5 s).
            std::thread::sleep(Duration::from_millis(150));
            request
        })
        .collect();

    let window = Duration::from_secs(2);
    let started = Instant::now();
    let mut latencies = Vec::new();
    while started.elapsed() < window {
        let sent = Instant::now();
        let response = hot.get("/hot.txt", &[]);
        latencies.push(sent.elapsed());
        assert_eq!(response.body, b"hot and cached");
        // The server ends a connection after its request cap (like nginx's
        // keepalive_requests); a fast client simply reconnects.
        if response.connection_has("close") {
            hot = Conn::open(addr);
        }
    }
    let max = latencies.iter().max().copied().unwrap_or_default();
    for request in slow_requests {
        request.join().expect("slow request thread");
    }
    drop(server);
    drop(slowfs);

    if arch == "sped" {
        assert!(
            max >= Duration::from_secs(1),
            "sped does disk reads inline, so a hot request should have stalled ≥ 1 s; max latency \
             {max:?} over {} requests",
            latencies.len()
        );
    } else {
        assert!(
            latencies.len() >= 50 && max < Duration::from_millis(200),
            "{arch} must keep serving the hot file while the disk is slow: {} requests in {window:?}, \
             max latency {max:?}",
            latencies.len()
        );
    }
});
