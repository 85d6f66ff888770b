//! ampd-slowfs mounted for real: what it serves is the source's, reads of `slow*` files wait,
//! many waits overlap, and it cannot be written. Needs /dev/fuse and fusermount (root in CI);
//! with AMPD_SKIP_FUSE=1 the test skips where FUSE cannot work.

use std::io::ErrorKind;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const DELAY: Duration = Duration::from_millis(400);

struct Mounted {
    child: Child,
    mountpoint: PathBuf,
}

impl Mounted {
    fn start(source: &Path, mountpoint: &Path, counts: &Path) -> Result<Mounted, String> {
        if !Path::new("/dev/fuse").exists() {
            return Err("/dev/fuse does not exist".into());
        }
        let parent = std::fs::metadata(mountpoint.parent().unwrap())
            .unwrap()
            .dev();
        let child = Command::new(env!("CARGO_BIN_EXE_ampd-slowfs"))
            .arg(source)
            .arg(mountpoint)
            .arg(DELAY.as_secs_f64().to_string())
            .arg(counts)
            .stdin(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|error| error.to_string())?;
        let mut mounted = Mounted {
            child,
            mountpoint: mountpoint.to_path_buf(),
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if std::fs::metadata(mountpoint).is_ok_and(|meta| meta.dev() != parent) {
                return Ok(mounted);
            }
            if let Ok(Some(status)) = mounted.child.try_wait() {
                let mut stderr = String::new();
                if let Some(mut pipe) = mounted.child.stderr.take() {
                    use std::io::Read;
                    let _ = pipe.read_to_string(&mut stderr);
                }
                return Err(format!("ampd-slowfs exited ({status}): {stderr}"));
            }
            if Instant::now() > deadline {
                return Err("ampd-slowfs did not mount within 10 s".into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let unmounted = Command::new("fusermount")
            .arg("-u")
            .arg(&self.mountpoint)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
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

fn content(index: usize) -> Vec<u8> {
    (0..100_000 + index)
        .map(|byte| (byte * 7 + index) as u8)
        .collect()
}

#[test]
fn serves_the_source_and_delays_only_slow_files_with_reads_overlapping() {
    let root = std::env::temp_dir().join(format!("ampd-slowfs-test-{}", std::process::id()));
    let source = root.join("source");
    let mountpoint = root.join("mount");
    std::fs::create_dir_all(source.join("ds")).unwrap();
    std::fs::create_dir_all(&mountpoint).unwrap();
    for index in 0..16 {
        std::fs::write(
            source.join(format!("ds/slow{index:02}.bin")),
            content(index),
        )
        .unwrap();
    }
    std::fs::write(source.join("hot.bin"), b"hot").unwrap();
    let counts = root.join("counts.json");

    let mounted = match Mounted::start(&source, &mountpoint, &counts) {
        Ok(mounted) => mounted,
        Err(reason) if std::env::var("AMPD_SKIP_FUSE").as_deref() == Ok("1") => {
            println!("skipped (AMPD_SKIP_FUSE=1): {reason}");
            std::fs::remove_dir_all(&root).unwrap();
            return;
        }
        Err(reason) => panic!("FUSE unavailable: {reason} (AMPD_SKIP_FUSE=1 skips)"),
    };

    // A file not named slow* is answered at once.
    let started = Instant::now();
    assert_eq!(std::fs::read(mountpoint.join("hot.bin")).unwrap(), b"hot");
    assert!(started.elapsed() < DELAY, "hot.bin waited");

    // One slow read waits the delay and returns the source's bytes.
    let started = Instant::now();
    assert_eq!(
        std::fs::read(mountpoint.join("ds/slow00.bin")).unwrap(),
        content(0)
    );
    assert!(started.elapsed() >= DELAY, "slow00.bin did not wait");

    // Fifteen at once overlap: one after another they would take 15 delays.
    let started = Instant::now();
    let readers: Vec<_> = (1..16)
        .map(|index| {
            let path = mountpoint.join(format!("ds/slow{index:02}.bin"));
            std::thread::spawn(move || (index, std::fs::read(path).unwrap()))
        })
        .collect();
    for reader in readers {
        let (index, bytes) = reader.join().unwrap();
        assert_eq!(bytes, content(index), "slow{index:02}.bin");
    }
    let elapsed = started.elapsed();
    assert!(elapsed >= DELAY, "{elapsed:?}");
    assert!(elapsed < DELAY * 5, "reads did not overlap: {elapsed:?}");

    // The listing is the source's; what is not there is not found; nothing can be written.
    let mut names: Vec<String> = std::fs::read_dir(mountpoint.join("ds"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names.len(), 16);
    assert_eq!(names[0], "slow00.bin");
    assert_eq!(
        std::fs::metadata(mountpoint.join("ds/slow03.bin"))
            .unwrap()
            .len(),
        100_003
    );
    assert_eq!(
        std::fs::read(mountpoint.join("ds/missing"))
            .unwrap_err()
            .kind(),
        ErrorKind::NotFound
    );
    let written = std::fs::OpenOptions::new()
        .write(true)
        .open(mountpoint.join("hot.bin"));
    assert!(written.is_err(), "a read-only mount took a write");

    // The counts file tells how many reads were served and who asked.
    let deadline = Instant::now() + Duration::from_secs(5);
    let counts = loop {
        let text = std::fs::read_to_string(&counts).unwrap_or_default();
        if text.contains("\"read\":") || Instant::now() > deadline {
            break text;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(counts.contains("\"read\":"), "{counts}");
    assert!(counts.contains("\"open\":"), "{counts}");

    drop(mounted);
    std::fs::remove_dir_all(&root).unwrap();
}
