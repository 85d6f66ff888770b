#!/usr/bin/env bash
# single_file.sh - Flash figures 6 and 7, AFPA figure 3: every client requests the same cached
# file over and over, one point per file size from 64 B to 10 MB, requests/s and Mbit/s, for
# every ampd engine and the peers (nginx, lighttpd, Apache event MPM, h2o) in one interleaved
# run, and Howl (bench/howl.c: pre-built responses, nothing parsed) as the bound.
#
#   sudo bash bench/setup.sh && cargo build --release     # once
#   bash bench/evaluation/single_file.sh                  # about 7 minutes with the defaults
#
# The servers run on CPU 0 with one worker each, as the paper compared one-CPU servers: ampd
# as sped and amped (one loop each), reactor-1 and uring-1 (one loop), mt-1 (a pool of one
# thread), tpc (a thread per connection: 50 threads at 50 clients) and mp-1 (one worker
# process); ampd-bench runs on CPU 1. Every server takes its turn per size and repetition
# (A B C ... A B C). Howl answers any request with one response built at start, so it is
# measured after the others, restarted once per size with a body of that size.
#
# Knobs [defaults]: SIZES [64,1k,4k,16k,100k,1m,10m]  SERVERS [the seven engines and four
# peers]  HOWL [1: measure Howl too]  CLIENTS [50]  DURATION [1s]  WARMUP [500ms]  REPEAT [3]
# (the figures are the median run), OUT [/tmp/ampd-eval/single-file], PUBLISH [1], and the
# knobs of bench/peers_lib.sh. The paper's scale: DURATION=10s REPEAT=5.
# Writes to OUT: single-file.json/.csv (the interleaved run), howl.json, single-file.svg
# (requests/s), single-file-mbit.svg, tables.md; the two charts are copied to docs/research/evaluation/.
case ${1:-} in -h | --help) sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;; esac
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
eval_begin single-file
SERVERS=${SERVERS:-"ampd-sped ampd-amped ampd-reactor-1 ampd-uring-1 ampd-mt-1 ampd-tpc ampd-mp-1 nginx lighttpd apache2 h2o"}
DURATION=${DURATION:-1s}
WARMUP=${WARMUP:-500ms}
RESULTS=$OUT
source "$EVAL_DIR/../peers_lib.sh"
SIZES=${SIZES:-64,1k,4k,16k,100k,1m,10m}
HOWL=${HOWL:-1}

# bytes LABEL: a size label as ampd-bench reads it (64, 1k = 1024, 10m = 10 MiB).
bytes() {
  case $1 in
    *k) echo $((${1%k} * 1024)) ;;
    *m) echo $((${1%m} * 1024 * 1024)) ;;
    *) echo "$1" ;;
  esac
}

prepare
"$BENCH" sweep --sizes "$SIZES" --create "$WWW"
rm -f "$OUT/howl.json" "$OUT"/howl-*.json
start_all
TITLE="One file of growing size" measure single-file sweep --sizes "$SIZES"
stop_all

series=("$OUT/single-file.json")
# howl_runs: one Howl run per size, each with a body of that size; the caller holds the lock.
howl_runs() {
  local label
  for label in ${SIZES//,/ }; do
    HOWL_BYTES=$(bytes "$label")
    export HOWL_BYTES
    start_server howl || return 1
    log "measuring howl, $label"
    taskset -c "$CLIENT_CPU" "$BENCH" file \
      --target "howl=http://127.0.0.1:${PORT[howl]}/f$label.bin" --clients "$CLIENTS" \
      --duration "$DURATION" --warmup "$WARMUP" --repeat "$REPEAT" --quiet \
      --json "$OUT/howl-$label.json"
    stop_server howl
    # Place the point on the size axis, as the sweep's own points are.
    jq --argjson x "$HOWL_BYTES" --arg size "$label" \
      '.points[0].x = $x | .points[0]["label"] = $size | .swept = "file size (bytes)"' \
      "$OUT/howl-$label.json" > "$OUT/howl-$label.json.part"
    mv "$OUT/howl-$label.json.part" "$OUT/howl-$label.json"
  done
}
if [ "$HOWL" = 1 ] && [ -x "${BENCH_ROOT:-/tmp/bench}/bin/howl" ]; then
  # One hold of the benchmark lock for all the sizes: the runs are short, and taking the lock
  # per size would leave them queued behind every other benchmark on the machine.
  exec 9> /tmp/ampd-bench.lock
  flock 9
  howl_runs
  flock -u 9
  exec 9>&-
  jq -s '.[0] + {points: [.[].points[]]}' "$OUT"/howl-*.json > "$OUT/howl.json"
  series+=("$OUT/howl.json")
fi

subtitle=$(conditions "$CLIENTS clients, keep-alive, ${DURATION} x $REPEAT runs, median; servers on CPU $SERVER_CPU, client on CPU $CLIENT_CPU")
"$BENCH" plot "${series[@]}" -o "$OUT/single-file.svg" \
  --title "One cached file of growing size: requests/s" --subtitle "$subtitle"
"$BENCH" plot "${series[@]}" -o "$OUT/single-file-mbit.svg" --metric mbit_per_second \
  --title "One cached file of growing size: output bandwidth" --subtitle "$subtitle"
{
  echo "Requests/s (median run):"; echo
  python3 "$EVAL_DIR/table.py" grid <(jq -s '.[0] + {points: [.[].points[]]}' "${series[@]}") requests_per_second
  echo; echo "Mbit/s (median run):"; echo
  python3 "$EVAL_DIR/table.py" grid <(jq -s '.[0] + {points: [.[].points[]]}' "${series[@]}") mbit_per_second
  echo; echo "Errors:"; echo
  python3 "$EVAL_DIR/table.py" grid <(jq -s '.[0] + {points: [.[].points[]]}' "${series[@]}") errors
} > "$OUT/tables.md"
cat "$OUT/tables.md"
publish "$OUT/single-file.svg" "$OUT/single-file-mbit.svg"
log "results: $OUT"
