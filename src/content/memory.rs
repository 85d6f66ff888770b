//! How much memory the data caches may take: the default, unless the process runs under a
//! memory limit (a container, a systemd unit's `MemoryMax`, a cgroup) that the default would
//! not fit.
//!
//! Owns: finding the process's own cgroup memory limit (cgroup v2 `memory.max`, else v1
//! `memory.limit_in_bytes`, the lowest along the path from the process's cgroup up to the
//! mount, since every ancestor's limit applies) and sizing the file cache under it. The file
//! cache is memory the kernel cannot reclaim; the page cache, which `sendfile` serves every
//! larger file from, is what a cgroup's reclaim shrinks first when the caches crowd it out.
//! So the data caches together take at most a quarter of the limit, split between the loops,
//! rings or processes that own one, and never more than the default; the rest is left for the
//! page cache, connection buffers and the heap. A size in the configuration always wins.
//! Must not touch: the caches (they take the size they are given).

use std::path::{Path, PathBuf};

/// The file cache of one loop, ring or process when nothing limits memory.
pub const DEFAULT_FILE_CACHE_BYTES: u64 = 64 << 20;
/// The share of a memory limit the data caches take in all (one part in this many).
const SHARE_OF_LIMIT: u64 = 4;
/// The least a limited file cache gets: below it, caching small files would save nothing.
const AT_LEAST: u64 = 1 << 20;
/// Limits at or above this mean none (cgroup v1 writes `PAGE_COUNTER_MAX` pages as bytes).
const UNLIMITED: u64 = 1 << 60;

/// A memory limit that applies to this process, and the file that set it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryLimit {
    pub bytes: u64,
    pub file: PathBuf,
}

/// How big one set of caches' file cache is, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileCacheSize {
    /// `caches.file_cache_bytes` in the configuration.
    Configured(u64),
    /// No memory limit (or one the default fits under).
    Default(u64),
    /// Made smaller to fit under `limit`.
    Limited { bytes: u64, limit: MemoryLimit },
}

impl FileCacheSize {
    /// The size for one of `owners` sets of caches: `configured` if set, else the default,
    /// made smaller if `limit` could not hold a quarter's worth of them.
    #[must_use]
    pub fn choose(configured: Option<u64>, limit: Option<MemoryLimit>, owners: usize) -> Self {
        if let Some(bytes) = configured {
            return FileCacheSize::Configured(bytes);
        }
        let Some(limit) = limit else {
            return FileCacheSize::Default(DEFAULT_FILE_CACHE_BYTES);
        };
        let fits = limit.bytes / SHARE_OF_LIMIT / owners.max(1) as u64;
        if fits >= DEFAULT_FILE_CACHE_BYTES {
            return FileCacheSize::Default(DEFAULT_FILE_CACHE_BYTES);
        }
        FileCacheSize::Limited {
            bytes: fits.max(AT_LEAST),
            limit,
        }
    }

    #[must_use]
    pub fn bytes(&self) -> u64 {
        match self {
            FileCacheSize::Configured(bytes) | FileCacheSize::Default(bytes) => *bytes,
            FileCacheSize::Limited { bytes, .. } => *bytes,
        }
    }
}

/// The memory limit of this process's own cgroup (v2, else v1), if any.
#[must_use]
pub fn cgroup_memory_limit() -> Option<MemoryLimit> {
    let cgroup = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    limit_of(&cgroup, &mountinfo, |path| {
        std::fs::read_to_string(path).ok()
    })
}

/// The limit `cgroup` (the text of /proc/self/cgroup) and `mountinfo` (/proc/self/mountinfo)
/// lead to, reading limit files with `read`.
fn limit_of(
    cgroup: &str,
    mountinfo: &str,
    read: impl Fn(&Path) -> Option<String>,
) -> Option<MemoryLimit> {
    let mounts: Vec<Mount<'_>> = mountinfo.lines().filter_map(Mount::parse).collect();
    // cgroup v2: "0::/path", in the one cgroup2 hierarchy.
    let v2 = cgroup
        .lines()
        .find_map(|line| line.strip_prefix("0::"))
        .and_then(|path| {
            let mount = mounts.iter().find(|mount| mount.fstype == "cgroup2")?;
            lowest(mount, path, "memory.max", &read)
        });
    if v2.is_some() {
        return v2;
    }
    // cgroup v1: "N:memory[,...]:/path", in the hierarchy mounted with the memory controller.
    let path = cgroup.lines().find_map(|line| {
        let mut fields = line.splitn(3, ':');
        let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
        controllers
            .split(',')
            .any(|c| c == "memory")
            .then_some(path)
    })?;
    let mount = mounts.iter().find(|mount| {
        mount.fstype == "cgroup" && mount.super_options.split(',').any(|o| o == "memory")
    })?;
    lowest(mount, path, "memory.limit_in_bytes", &read)
}

/// The lowest limit in `file` from the cgroup `path` up to the top of `mount`.
fn lowest(
    mount: &Mount<'_>,
    path: &str,
    file: &str,
    read: &impl Fn(&Path) -> Option<String>,
) -> Option<MemoryLimit> {
    // The path is relative to the hierarchy's root, and the mount shows `mount.root` of it;
    // in a cgroup namespace the path is already relative to what the mount shows.
    let below = path.strip_prefix(mount.root).unwrap_or(path);
    let top = PathBuf::from(mount.point);
    let mut dir = top.join(below.trim_start_matches('/'));
    let mut found: Option<MemoryLimit> = None;
    loop {
        let limit = read(&dir.join(file))
            .and_then(|text| parse_limit(&text))
            .map(|bytes| MemoryLimit {
                bytes,
                file: dir.join(file),
            });
        if let Some(limit) = limit {
            if found.as_ref().is_none_or(|known| limit.bytes < known.bytes) {
                found = Some(limit);
            }
        }
        if dir == top || !dir.pop() || !dir.starts_with(&top) {
            return found;
        }
    }
}

/// A limit file's value: `None` for "max" (v2) or a number that means none (v1).
fn parse_limit(text: &str) -> Option<u64> {
    let bytes: u64 = text.trim().parse().ok()?;
    (bytes < UNLIMITED).then_some(bytes)
}

/// The fields of a /proc/self/mountinfo line this needs.
struct Mount<'a> {
    root: &'a str,
    point: &'a str,
    fstype: &'a str,
    super_options: &'a str,
}

impl<'a> Mount<'a> {
    /// `ID PARENT MAJ:MIN ROOT POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER_OPTIONS`.
    fn parse(line: &'a str) -> Option<Mount<'a>> {
        let (left, right) = line.split_once(" - ")?;
        let mut left = left.split(' ');
        let root = left.nth(3)?;
        let point = left.next()?;
        let mut right = right.split(' ');
        let fstype = right.next()?;
        let super_options = right.nth(1).unwrap_or("");
        Some(Mount {
            root,
            point,
            fstype,
            super_options,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    const MOUNTINFO_V2: &str = "\
25 30 0:23 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
33 25 0:28 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
";
    const MOUNTINFO_V1: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
40 31 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";
    /// A container's view: the hierarchy mounted from the container's own cgroup.
    const MOUNTINFO_CONTAINER: &str = "\
700 690 0:28 /kubepods/pod1/abc /sys/fs/cgroup ro,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 rw
";

    fn files(entries: &[(&str, &str)]) -> impl Fn(&Path) -> Option<String> {
        let map: HashMap<PathBuf, String> = entries
            .iter()
            .map(|(path, text)| (PathBuf::from(path), (*text).to_owned()))
            .collect();
        move |path| map.get(path).cloned()
    }

    #[test]
    fn cgroup_v2_reads_memory_max_of_the_process_cgroup_and_its_ancestors() {
        let read = files(&[
            ("/sys/fs/cgroup/system.slice/memory.max", "1073741824\n"),
            (
                "/sys/fs/cgroup/system.slice/ampd.service/memory.max",
                "max\n",
            ),
        ]);
        let limit = limit_of("0::/system.slice/ampd.service\n", MOUNTINFO_V2, read);
        assert_eq!(
            limit,
            Some(MemoryLimit {
                bytes: 1 << 30,
                file: PathBuf::from("/sys/fs/cgroup/system.slice/memory.max"),
            }),
            "the parent's limit applies to the child"
        );
        let read = files(&[("/sys/fs/cgroup/a/memory.max", "max\n")]);
        assert_eq!(limit_of("0::/a\n", MOUNTINFO_V2, read), None);
    }

    #[test]
    fn cgroup_v2_in_a_container_is_relative_to_the_mounted_root() {
        let read = files(&[("/sys/fs/cgroup/memory.max", "268435456\n")]);
        let limit = limit_of("0::/\n", MOUNTINFO_CONTAINER, &read).unwrap();
        assert_eq!(limit.bytes, 256 << 20);
        // Seen from the host's namespace, the path includes the mounted root.
        let limit = limit_of("0::/kubepods/pod1/abc\n", MOUNTINFO_CONTAINER, &read).unwrap();
        assert_eq!(limit.bytes, 256 << 20);
    }

    #[test]
    fn cgroup_v1_reads_memory_limit_in_bytes_where_the_memory_controller_is_mounted() {
        let cgroup = "9:name=systemd:/\n4:memory:/process_api/81b8\n0::/\n";
        let read = files(&[
            (
                "/sys/fs/cgroup/memory/memory.limit_in_bytes",
                "9223372036854771712\n",
            ),
            (
                "/sys/fs/cgroup/memory/process_api/81b8/memory.limit_in_bytes",
                "536870912\n",
            ),
        ]);
        let limit = limit_of(cgroup, MOUNTINFO_V1, read).unwrap();
        assert_eq!(limit.bytes, 512 << 20);
        assert_eq!(
            limit.file,
            PathBuf::from("/sys/fs/cgroup/memory/process_api/81b8/memory.limit_in_bytes")
        );
        // No limit set anywhere: PAGE_COUNTER_MAX means none.
        let read = files(&[(
            "/sys/fs/cgroup/memory/memory.limit_in_bytes",
            "9223372036854771712\n",
        )]);
        assert_eq!(limit_of("4:memory:/\n", MOUNTINFO_V1, read), None);
    }

    #[test]
    fn the_file_cache_fits_a_quarter_of_the_limit_and_a_configured_size_wins() {
        let limit = |bytes| {
            Some(MemoryLimit {
                bytes,
                file: PathBuf::from("/sys/fs/cgroup/memory.max"),
            })
        };
        assert_eq!(
            FileCacheSize::choose(None, None, 2),
            FileCacheSize::Default(64 << 20)
        );
        // 512 MiB over two loops: 64 MiB each fits in a quarter.
        assert_eq!(
            FileCacheSize::choose(None, limit(512 << 20), 2).bytes(),
            64 << 20
        );
        // 256 MiB over two loops: 32 MiB each.
        let sized = FileCacheSize::choose(None, limit(256 << 20), 2);
        assert!(matches!(sized, FileCacheSize::Limited { bytes, .. } if bytes == 32 << 20));
        // Never below a mebibyte.
        assert_eq!(
            FileCacheSize::choose(None, limit(8 << 20), 8).bytes(),
            1 << 20
        );
        assert_eq!(
            FileCacheSize::choose(Some(100 << 20), limit(256 << 20), 2),
            FileCacheSize::Configured(100 << 20)
        );
    }
}
