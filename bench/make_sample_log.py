#!/usr/bin/env python3
"""make_sample_log.py - writes bench/sample-access.log, the access log that bench/replay.sh
replays.  It is synthetic (no real visitor's data) and deterministic (fixed seed), shaped like
the department-server logs Flash replayed (section 6.2): Zipf-like popularity over a few hundred
files, many small files and a heavy tail of large ones, a mix of Common and Combined Log Format
lines, and the lines a real log has that are not GETs of a file (HEAD, POST, 304s, 404s, a 408
with "-" as the request).  Every path is under /sample/ so its files can live in the shared
bench document root.

    python3 bench/make_sample_log.py > bench/sample-access.log
"""
import random

rng = random.Random(1999)
KINDS = [  # (directory, extension, median size, spread)
    ("img", "gif", 3000, 1.0),
    ("img", "jpg", 25000, 1.0),
    ("docs", "html", 6000, 0.8),
    ("pub", "pdf", 300000, 1.0),
    ("pub", "tar.gz", 1500000, 0.8),
]
WEIGHTS = [40, 15, 35, 8, 2]
files = []
for index in range(300):
    directory, extension, median, spread = rng.choices(KINDS, WEIGHTS)[0]
    size = max(120, min(8_000_000, int(rng.lognormvariate(0, spread) * median)))
    files.append((f"/sample/{directory}/{index:03d}.{extension}", size))
files[0] = ("/sample/", 2400)  # the home page, an index file
# Zipf popularity (s = 1): the i-th file is requested in proportion to 1/(i+1).
popularity = [1.0 / (rank + 1) for rank in range(len(files))]
agents = ['"Mozilla/4.0 (compatible; MSIE 5.0; Windows 98)"', '"Mozilla/4.61 [en] (X11; I; Linux 2.2.5 i686)"']
second = 0
for line in range(1500):
    second += rng.randint(0, 3)
    stamp = f"[10/Jun/1999:{8 + second // 3600:02d}:{second // 60 % 60:02d}:{second % 60:02d} -0500]"
    host = f"10.{rng.randint(0, 3)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}"
    path, size = rng.choices(files, popularity)[0]
    roll = rng.random()
    if roll < 0.02:
        request, status, sent = f"POST /sample/cgi-bin/search HTTP/1.0", 200, rng.randint(500, 4000)
    elif roll < 0.04:
        request, status, sent = f"HEAD {path} HTTP/1.0", 200, 0
    elif roll < 0.10:
        request, status, sent = f"GET {path} HTTP/1.0", 304, "-"
    elif roll < 0.12:
        request, status, sent = f"GET /sample/missing/{rng.randint(0, 99)}.html HTTP/1.0", 404, 287
    elif roll < 0.125:
        request, status, sent = "-", 408, "-"
    else:
        request, status, sent = f"GET {path} HTTP/1.{rng.randint(0, 1)}", 200, size
    entry = f'{host} - - {stamp} "{request}" {status} {sent}'
    if rng.random() < 0.5:
        entry += f' "http://www.example.edu/sample/" {rng.choice(agents)}'
    print(entry)
