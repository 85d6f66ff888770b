#!/usr/bin/python3
"""slowfs_mount.py - mounts tests/fixtures/slowfs.py (reads of files named slow* sleep DELAY
seconds) the way bench/disk_bound.sh needs it as a latency-type slow device:

    slowfs_mount.py SOURCE_DIR MOUNTPOINT DELAY_SECONDS [COUNTS_FILE]

* allow_other: nginx's worker runs as www-data, not as the root who mounts;
* kernel_cache: the page cache of a file survives its next open, as on a disk filesystem (FUSE
  otherwise drops it on every open, and no request would ever be a cache hit);
* many threads (libfuse 2 starts one per concurrent request), so concurrent reads overlap, as on
  a device with many requests in flight (an SSD's queue, a RAID's spindles, network storage).

With COUNTS_FILE, the operations served are counted by type (`read`, `getattr` - which is also
every lookup -, `open`, `flush`, `release`, ...) and, as `TYPE:THREAD`, by the name of the
thread that asked (`amped-0-helper-`, `nginx`, ...), and the counts are written to COUNTS_FILE
as JSON every half second. Two snapshots around a measurement divided by its requests give the
FUSE round trips per request: how docs/architectures.md ("Third run") found ampd reopening
files that nginx kept open. Counting costs the daemon a little CPU per operation.

Runs in the foreground until unmounted (fusermount -u MOUNTPOINT).
"""
import collections
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures"))

from slowfs import FUSE, SlowPassthrough  # noqa: E402  (the fixture of tests/slow_disk.rs)

try:
    from fusepy import fuse_get_context  # noqa: E402  Debian's python3-fusepy
except ImportError:
    from fuse import fuse_get_context  # noqa: E402  pip's fusepy


class CountingPassthrough(SlowPassthrough):
    """SlowPassthrough that counts the operations it serves, by type and by calling thread."""

    def __init__(self, source, delay):
        super().__init__(source, delay)
        self.counts = collections.Counter()
        self.counts_lock = threading.Lock()  # not `lock`: that name is a FUSE operation

    def __call__(self, op, *args):
        caller = caller_name(fuse_get_context()[2])
        with self.counts_lock:
            self.counts[op] += 1
            self.counts[f"{op}:{caller}"] += 1
        return super().__call__(op, *args)

    def write_counts_forever(self, path):
        while True:
            time.sleep(0.5)
            with self.counts_lock:
                snapshot = dict(self.counts)
            partial = path + ".partial"
            with open(partial, "w") as out:
                json.dump(snapshot, out, sort_keys=True)
            os.replace(partial, path)  # readers never see half a file


def caller_name(tid):
    """The name of the thread that made the request (the kernel gives its thread id)."""
    try:
        with open(f"/proc/{tid}/comm") as comm:
            return comm.read().strip()
    except OSError:
        return "?"


def main():
    if len(sys.argv) not in (4, 5):
        sys.stderr.write(__doc__)
        return 2
    source, mountpoint, delay = sys.argv[1], sys.argv[2], float(sys.argv[3])
    if len(sys.argv) == 5:
        operations = CountingPassthrough(source, delay)
        threading.Thread(target=operations.write_counts_forever, args=(sys.argv[4],), daemon=True).start()
    else:
        operations = SlowPassthrough(source, delay)
    FUSE(
        operations,
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
