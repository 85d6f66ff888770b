#!/usr/bin/env python3
"""disk_bound_log.py - the access log one point of bench/disk_bound.sh replays: LINES requests
drawn uniformly at random (fixed seed) from the first FILES files of the data set
/ds/slowNNNNN.bin, each SIZE bytes, in Common Log Format. LINES = 0 writes each of the FILES
files once, in order: the log `ampd-bench replay --create` makes the whole data set from.

    python3 bench/disk_bound_log.py FILES SIZE LINES > point.log

Uniform draws make the cache arithmetic plain: with a page cache of C bytes and a data set of D
bytes (D > C), a request finds its file cached with probability about C / D, whatever the
server, so what differs between servers is only what they do while a miss waits for the disk.
(Flash section 6.2 truncated a real log instead; its popular files stay cached, which shifts
the knee of the curve but not the comparison.) The files are named slow* so that the FUSE
device of the latency experiment (tests/fixtures/slowfs.py) delays their reads.
"""
import random
import sys


def main():
    if len(sys.argv) != 4:
        sys.stderr.write(__doc__)
        return 2
    try:
        files, size, lines = (int(argument) for argument in sys.argv[1:])
    except ValueError:
        sys.stderr.write("disk_bound_log.py: FILES, SIZE and LINES must be whole numbers\n")
        return 2
    if files < 1 or size < 1 or lines < 0:
        sys.stderr.write("disk_bound_log.py: need FILES >= 1, SIZE >= 1 and LINES >= 0\n")
        return 2
    rng = random.Random(1999 + files)
    if lines == 0:
        order = range(files)
    else:
        order = [rng.randrange(files) for _ in range(lines)]
    out = sys.stdout
    for number, index in enumerate(order):
        second = number // 50
        stamp = f"[10/Jun/1999:{8 + second // 3600 % 16:02d}:{second // 60 % 60:02d}:{second % 60:02d} -0500]"
        out.write(f'10.0.0.1 - - {stamp} "GET /ds/slow{index:05d}.bin HTTP/1.0" 200 {size}\n')
    return 0


if __name__ == "__main__":
    sys.exit(main())
