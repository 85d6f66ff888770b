//! A mounted tests/fixtures/slowfs.py: a passthrough FUSE filesystem whose reads of files named
//! `slow*` sleep, and which the kernel does not report changes of (inotify on the mount cannot
//! see edits made in its source directory), as with network filesystems. Unmounted, and its
//! process reaped, on drop. Needs /dev/fuse, fusermount and Debian's python3-fusepy; with
//! AMPD_SKIP_FUSE=1 a test that cannot mount skips instead of failing.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const MOUNT_TIMEOUT: Duration = Duration::from_secs(10);

/// A mounted slowfs; unmounted and its process reaped on Drop.
pub struct SlowFs {
    child: Child,
    mountpoint: PathBuf,
}

/// Mount `source` on `mountpoint` with reads of `slow*` files taking `delay_seconds`. `None`
/// (after saying why) when FUSE is unavailable and AMPD_SKIP_FUSE=1; a panic naming what is
/// missing otherwise.
pub fn mount_or_skip(source: &Path, mountpoint: &Path, delay_seconds: &str) -> Option<SlowFs> {
    match SlowFs::mount(source, mountpoint, delay_seconds) {
        Ok(mounted) => Some(mounted),
        Err(reason) if std::env::var("AMPD_SKIP_FUSE").as_deref() == Ok("1") => {
            println!("skipped (AMPD_SKIP_FUSE=1): {reason}");
            None
        }
        Err(reason) => panic!(
            "FUSE unavailable: {reason}. Install fuse3 and python3-fusepy, run as root with \
             /dev/fuse, or set AMPD_SKIP_FUSE=1"
        ),
    }
}

impl SlowFs {
    /// Mounts `source` on `mountpoint`. `Err` says why FUSE is unavailable.
    pub fn mount(source: &Path, mountpoint: &Path, delay_seconds: &str) -> Result<SlowFs, String> {
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
            .arg(delay_seconds)
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
