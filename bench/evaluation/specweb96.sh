#!/usr/bin/env bash
# specweb96.sh - AFPA figure 2: the SPECweb96 static mix (classes of 0.1-0.9 KB, 1-9 KB,
# 10-90 KB and 100-900 KB requested 35/50/14/1 %, over DIRS directories of /specweb/) against
# ampd, the peers (nginx, lighttpd, Apache event MPM, h2o) and Howl, in one interleaved run.
#
#   sudo bash bench/setup.sh && cargo build --release     # once
#   bash bench/evaluation/specweb96.sh                    # about 4 minutes with the defaults
#
# SPECweb96 opens a connection per request (HTTP/1.0), as AFPA measured it: that is the chart.
# The same mix over persistent connections follows as a second run (KEEPALIVE=0 skips it).
# Howl (bench/howl.c) reads a request only to find where its head ends and answers every one
# with the same response built at start; here its body is the mix's mean body (15,027 bytes),
# so it sends the bytes the mix sends, with no lookup, no file and no per-request head: the
# bound of a server that only writes pre-built responses. Requests for Howl are not checked
# against the file sizes (ampd-bench --no-verify-size for the whole run, so that Howl takes
# its turns with the others); the table's mean response size shows every server sent the mix.
#
# Servers on CPU 0, one worker each (ampd: amped, one loop), ampd-bench on CPU 1.
# Knobs [defaults]: SERVERS ["ampd-amped nginx lighttpd apache2 h2o howl"]  DIRS [10]
# CLIENTS [50]  DURATION [5s]  WARMUP [1s]  REPEAT [3]  KEEPALIVE [1]
# OUT [/tmp/ampd-eval/specweb96]  PUBLISH [1], and those of bench/peers_lib.sh.
# The paper's scale: DIRS as SPECweb96 sizes it for the expected rate (about 1 per 8 ops/s
# at AFPA's 10,000 ops/s: DIRS=1250), DURATION=300s.
# Writes to OUT: specweb96-close.json/.csv/-cpu.csv, specweb96-keepalive.*, specweb96.svg,
# tables.md; the chart is copied to docs/research/evaluation/specweb96.svg.
case ${1:-} in -h | --help) sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;; esac
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
eval_begin specweb96
SERVERS=${SERVERS:-"ampd-amped nginx lighttpd apache2 h2o howl"}
RESULTS=$OUT
source "$EVAL_DIR/../peers_lib.sh"
DIRS=${DIRS:-10}
KEEPALIVE=${KEEPALIVE:-1}

# The mix's mean body: class C file I holds (I+1) * 1024 * 10^C / 10 bytes (rounded down), the
# nine files of a class equally likely, the classes 35/50/14/1 % (crates/bench's specweb96.rs).
HOWL_BYTES=$(awk 'BEGIN {
  split("35 50 14 1", percent, " ")
  for (class = 0; class < 4; class++)
    for (index_ = 0; index_ < 9; index_++)
      mean += percent[class + 1] / 100 / 9 * int((index_ + 1) * 1024 * 10 ^ class / 10)
  printf "%d", mean + 0.5
}')
export HOWL_BYTES

prepare
"$BENCH" specweb96 --dirs "$DIRS" --create "$WWW"
start_all
TITLE="SPECweb96, a connection per request" \
  measure specweb96-close specweb96 --dirs "$DIRS" --close --no-verify-size
if [ "$KEEPALIVE" = 1 ]; then
  TITLE="SPECweb96, persistent connections" \
    measure specweb96-keepalive specweb96 --dirs "$DIRS" --no-verify-size
fi

"$BENCH" plot "$OUT/specweb96-close.json" -o "$OUT/specweb96.svg" \
  --title "SPECweb96 mix, a connection per request: requests/s" \
  --subtitle "$(conditions "$CLIENTS clients, $DIRS directories, ${DURATION} x $REPEAT runs, median; Howl: $HOWL_BYTES-byte pre-built answer")"
{
  echo "SPECweb96, a new connection per request (median run):"; echo
  python3 "$EVAL_DIR/table.py" servers "$OUT/specweb96-close.json" "$OUT/specweb96-close-cpu.csv"
  if [ "$KEEPALIVE" = 1 ]; then
    echo; echo "SPECweb96, persistent connections (median run):"; echo
    python3 "$EVAL_DIR/table.py" servers "$OUT/specweb96-keepalive.json" "$OUT/specweb96-keepalive-cpu.csv"
  fi
} > "$OUT/tables.md"
cat "$OUT/tables.md"
publish "$OUT/specweb96.svg"
log "results: $OUT"
