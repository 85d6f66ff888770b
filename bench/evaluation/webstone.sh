#!/usr/bin/env bash
# webstone.sh - JAWS (Hu, Pyarali, Schmidt 1997): the WebStone file mix (500 B 35 %, 5 KB
# 50 %, 50 KB 14 %, 5 MB 1 %) under rising client counts, throughput and latency for every
# concurrency strategy of ampd, then the send-path threshold: one file per size sent from the
# file cache by writev (head and body in one call) against sendfile from the open file.
#
#   sudo bash bench/setup.sh && cargo build --release     # once
#   bash bench/evaluation/webstone.sh                     # about 6 minutes with the defaults
#
# Strategies (JAWS's names): ampd-mt = the synchronous thread pool (64 threads), ampd-tpc =
# thread-per-connection, which with a connection per request (below) is JAWS's
# thread-per-request, ampd-uring-1 = the asynchronous proactor (io_uring, one ring), and the
# event-driven ampd-reactor-1 and ampd-amped (one loop each) and ampd-mp (8 processes). All on
# CPU 0, ampd-bench on CPU 1, interleaved per client count and repetition.
# WebStone 2.0 opened a connection per request (HTTP/1.0), as JAWS measured: CLOSE=1. The
# threshold runs use persistent connections, so they time the send path, not the handshake.
#
# Knobs [defaults]: SERVERS ["ampd-mt ampd-tpc ampd-uring-1 ampd-reactor-1 ampd-amped ampd-mp"]
# COUNTS [1,4,16,64,256]  CLOSE [1]  DURATION [2s]  WARMUP [500ms]  REPEAT [3]
# THRESHOLD [1: run the send-path part]  THRESHOLD_SIZES [500,5k,50k,500k,5m] (JAWS's sizes)
# THRESHOLD_CLIENTS [50]  OUT [/tmp/ampd-eval/webstone]  PUBLISH [1], and those of
# bench/peers_lib.sh. The paper's scale: DURATION=60s, COUNTS up to the server's saturation.
# Writes to OUT: webstone.json/.csv, threshold.json/.csv, webstone-throughput.svg,
# webstone-latency-p50.svg, webstone-latency-p99.svg, webstone-threshold.svg, tables.md; the
# charts are copied to docs/research/evaluation/.
case ${1:-} in -h | --help) sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;; esac
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
eval_begin webstone
SERVERS=${SERVERS:-"ampd-mt ampd-tpc ampd-uring-1 ampd-reactor-1 ampd-amped ampd-mp"}
DURATION=${DURATION:-2s}
WARMUP=${WARMUP:-500ms}
RESULTS=$OUT
source "$EVAL_DIR/../peers_lib.sh"
COUNTS=${COUNTS:-1,4,16,64,256}
CLOSE=${CLOSE:-1}
THRESHOLD=${THRESHOLD:-1}
THRESHOLD_SIZES=${THRESHOLD_SIZES:-500,5k,50k,500k,5m}
THRESHOLD_CLIENTS=${THRESHOLD_CLIENTS:-50}
close=()
connections="persistent connections"
if [ "$CLOSE" = 1 ]; then close=(--close); connections="a connection per request"; fi

prepare
declare -A PROC=()
trap 'stop_all; stop_all_procs' EXIT
"$BENCH" webstone --create "$WWW"
start_all
TITLE="WebStone mix against clients" \
  measure webstone clients --counts "$COUNTS" --of webstone "${close[@]}"
stop_all

subtitle=$(conditions "WebStone mix, $connections, ${DURATION} x $REPEAT runs, median; servers on CPU $SERVER_CPU, client on CPU $CLIENT_CPU")
"$BENCH" plot "$OUT/webstone.json" -o "$OUT/webstone-throughput.svg" \
  --title "WebStone mix: throughput against clients" --subtitle "$subtitle"
"$BENCH" plot "$OUT/webstone.json" -o "$OUT/webstone-latency-p50.svg" --metric latency_p50_ms \
  --title "WebStone mix: median latency against clients" --subtitle "$subtitle"
"$BENCH" plot "$OUT/webstone.json" -o "$OUT/webstone-latency-p99.svg" --metric latency_p99_ms \
  --title "WebStone mix: 99th percentile latency against clients" --subtitle "$subtitle"
charts=("$OUT/webstone-throughput.svg" "$OUT/webstone-latency-p50.svg" "$OUT/webstone-latency-p99.svg")

if [ "$THRESHOLD" = 1 ]; then
  # The same engine (amped, one loop) twice: every file from the file cache by writev (a
  # threshold above the largest size), and every file by sendfile (threshold 0).
  "$BENCH" sweep --sizes "$THRESHOLD_SIZES" --create "$WWW"
  writev_port=$((BASE_PORT + 30)) sendfile_port=$((BASE_PORT + 31))
  start_proc writev "$SERVER_CPU" "$writev_port" "$AMPD" serve "$WWW" \
    --listen "127.0.0.1:$writev_port" --arch amped --sendfile-threshold 1GiB
  start_proc sendfile "$SERVER_CPU" "$sendfile_port" "$AMPD" serve "$WWW" \
    --listen "127.0.0.1:$sendfile_port" --arch amped --sendfile-threshold 0
  log "measuring the send-path threshold"
  flock /tmp/ampd-bench.lock taskset -c "$CLIENT_CPU" "$BENCH" sweep --sizes "$THRESHOLD_SIZES" \
    --target "writev from the file cache=http://127.0.0.1:$writev_port/" \
    --target "sendfile=http://127.0.0.1:$sendfile_port/" \
    --clients "$THRESHOLD_CLIENTS" --duration "$DURATION" --warmup "$WARMUP" --repeat "$REPEAT" \
    --json "$OUT/threshold.json" --csv "$OUT/threshold.csv" | tee "$OUT/threshold.txt"
  stop_all_procs
  "$BENCH" plot "$OUT/threshold.json" -o "$OUT/webstone-threshold.svg" --metric mbit_per_second \
    --title "Send path by file size: writev from memory or sendfile" \
    --subtitle "$(conditions "ampd amped, $THRESHOLD_CLIENTS clients, keep-alive, ${DURATION} x $REPEAT runs, median")"
  charts+=("$OUT/webstone-threshold.svg")
fi

{
  echo "WebStone mix, $connections: requests/s (median run):"; echo
  python3 "$EVAL_DIR/table.py" grid "$OUT/webstone.json" requests_per_second
  echo; echo "Mbit/s:"; echo
  python3 "$EVAL_DIR/table.py" grid "$OUT/webstone.json" mbit_per_second
  echo; echo "Latency p50, ms:"; echo
  python3 "$EVAL_DIR/table.py" grid "$OUT/webstone.json" latency_p50_ms
  echo; echo "Latency p99, ms:"; echo
  python3 "$EVAL_DIR/table.py" grid "$OUT/webstone.json" latency_p99_ms
  echo; echo "Errors:"; echo
  python3 "$EVAL_DIR/table.py" grid "$OUT/webstone.json" errors
  echo; echo "Server CPU over every client count:"; echo
  python3 "$EVAL_DIR/table.py" cpu "$OUT/webstone.json" "$OUT/webstone-cpu.csv"
  if [ "$THRESHOLD" = 1 ]; then
    echo; echo "Send path, requests/s by file size (median run):"; echo
    python3 "$EVAL_DIR/table.py" grid "$OUT/threshold.json" requests_per_second
  fi
} > "$OUT/tables.md"
cat "$OUT/tables.md"
publish "${charts[@]}"
log "results: $OUT"
