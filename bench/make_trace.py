#!/usr/bin/env python3
"""make_trace.py - a synthetic access log shaped like one of the Rice traces Flash replayed in
figure 8 (section 6.2), for bench/evaluation/trace_replay.sh. Deterministic: the same arguments
always write the same log (Common Log Format, GET lines only, one file per path).

    python3 bench/make_trace.py PROFILE MEMORY [REQUESTS] > trace.log

PROFILE is `cs` or `owlnet`; MEMORY is the server's memory in bytes (the memory cgroup the
replay runs it in), which the data-set size is scaled to; REQUESTS [60000] is the log's length.
A summary (files, data-set size, mean and median file and transfer size) goes to stderr.

What the Flash paper says of the two traces is relative only: the CS trace (Rice's computer
science department server) has a larger data set and is disk-intensive; the Owlnet trace
(personal pages of about 4,500 students and staff) has a smaller data set, better cache
locality and a smaller average transfer size, so that the two give roughly equal Mbit/s. It
gives no sizes or means for them. The parameters below keep those relations, sized against the
server's memory as the paper's 128 MB machine was against its traces, and take the shapes from
the published characterisations of Web server workloads of the period:

  popularity  Zipf: the file of rank r is requested in proportion to 1 / r^alpha. alpha 0.8
              for CS (a department's wide mix; Breslau et al., INFOCOM 1999, fit 0.64-0.83),
              1.0 for Owlnet (a few home pages draw most requests: Zipf's law proper, as
              Arlitt and Williamson, SIGMETRICS 1996, found for Web servers). Rank and size
              are drawn independently (as SURGE assumes).
  file sizes  a lognormal body and a Pareto tail (Barford and Crovella's SURGE, SIGMETRICS
              1998: body mu 9.357, sigma 1.318, median 11.6 KB, mean 27.6 KB; tail
              k = 133 KB, alpha 1.1, 7 % of files), capped at 8 MiB. CS takes SURGE as it is;
              Owlnet's body median is 4 KB (mu 8.3) and 3 % of its files are in the tail:
              small personal pages and images.
  data set    CS 2.5 x MEMORY (disk-bound: most of it cannot stay cached), Owlnet 0.5 x
              MEMORY (fits). Every file of the data set is requested at least once, so the
              data-set size is exactly what the log names.
"""
import math
import random
import sys

PROFILES = {
    # name: (Zipf alpha, body mu, body sigma, tail share, data set / memory, seed)
    "cs": (0.8, 9.357, 1.318, 0.07, 2.5, 1999),
    "owlnet": (1.0, 8.3, 1.318, 0.03, 0.5, 2000),
}
TAIL_K = 133_000
TAIL_ALPHA = 1.1
MAX_SIZE = 8 << 20
MIN_SIZE = 64
FILES_PER_DIRECTORY = 500


def file_size(rng, mu, sigma, tail_share):
    if rng.random() < tail_share:
        size = TAIL_K / (1.0 - rng.random()) ** (1.0 / TAIL_ALPHA)
    else:
        size = rng.lognormvariate(mu, sigma)
    return int(min(MAX_SIZE, max(MIN_SIZE, size)))


def main():
    if len(sys.argv) not in (3, 4) or sys.argv[1] not in PROFILES:
        sys.stderr.write(__doc__)
        return 2
    profile = sys.argv[1]
    try:
        memory = int(sys.argv[2])
        requests = int(sys.argv[3]) if len(sys.argv) == 4 else 60_000
    except ValueError:
        sys.stderr.write("make_trace.py: MEMORY and REQUESTS must be whole numbers\n")
        return 2
    alpha, mu, sigma, tail_share, scale, seed = PROFILES[profile]
    rng = random.Random(seed)
    target = int(memory * scale)
    sizes = []
    while sum(sizes) < target:
        sizes.append(file_size(rng, mu, sigma, tail_share))
    if requests < len(sizes):
        sys.stderr.write(f"make_trace.py: {requests} requests cannot name all {len(sizes)} files\n")
        return 2
    paths = [f"/{profile}/{index // FILES_PER_DIRECTORY:02d}/{index:05d}.bin" for index in range(len(sizes))]
    # File i has popularity rank i + 1; sizes were drawn independently of the order.
    weights = [1.0 / (rank + 1) ** alpha for rank in range(len(sizes))]
    draws = rng.choices(range(len(sizes)), weights, k=requests - len(sizes))
    order = draws + list(range(len(sizes)))
    rng.shuffle(order)
    out = sys.stdout
    for line, index in enumerate(order):
        second = line // 20
        stamp = f"[10/Jun/1999:{8 + second // 3600 % 16:02d}:{second // 60 % 60:02d}:{second % 60:02d} -0500]"
        out.write(f'10.0.{line % 250}.{line % 253 + 1} - - {stamp} "GET {paths[index]} HTTP/1.0" 200 {sizes[index]}\n')
    transfers = sorted(sizes[index] for index in order)
    ordered = sorted(sizes)
    sys.stderr.write(
        f"{profile}: {len(sizes)} files, data set {sum(sizes) / (1 << 20):.1f} MiB; file size mean "
        f"{sum(sizes) / len(sizes) / 1024:.1f} KiB, median {ordered[len(ordered) // 2] / 1024:.1f} KiB; "
        f"{requests} requests, transfer mean {sum(transfers) / len(transfers) / 1024:.1f} KiB, "
        f"median {transfers[len(transfers) // 2] / 1024:.1f} KiB; zipf alpha {alpha}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
