#!/usr/bin/python3
"""slowfs_mount.py - mounts tests/fixtures/slowfs.py (reads of files named slow* sleep DELAY
seconds) the way bench/disk_bound.sh needs it as a latency-type slow device:

    slowfs_mount.py SOURCE_DIR MOUNTPOINT DELAY_SECONDS

* allow_other: nginx's worker runs as www-data, not as the root who mounts;
* kernel_cache: the page cache of a file survives its next open, as on a disk filesystem (FUSE
  otherwise drops it on every open, and no request would ever be a cache hit);
* many threads (libfuse 2 starts one per concurrent request), so concurrent reads overlap, as on
  a device with many requests in flight (an SSD's queue, a RAID's spindles, network storage).

Runs in the foreground until unmounted (fusermount -u MOUNTPOINT).
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures"))

from slowfs import FUSE, SlowPassthrough  # noqa: E402  (the fixture of tests/slow_disk.rs)


def main():
    if len(sys.argv) != 4:
        sys.stderr.write(__doc__)
        return 2
    source, mountpoint, delay = sys.argv[1], sys.argv[2], float(sys.argv[3])
    FUSE(
        SlowPassthrough(source, delay),
        mountpoint,
        foreground=True,
        nothreads=False,
        ro=True,
        allow_other=True,
        kernel_cache=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
