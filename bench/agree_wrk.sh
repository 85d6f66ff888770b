#!/usr/bin/env bash
# agree_wrk.sh - does ampd-bench agree with wrk, and can it drive at least as much load?
#
# 1. Agreement: nginx (one worker, pinned to CPU 0) serves the 1 KiB file; wrk -t1 -c50 and
#    ampd-bench --clients 50, both keep-alive and both pinned to CPU 1, take turns (REPS
#    interleaved runs of DUR seconds, each tool warmed up for a second first). nginx is the
#    bottleneck, so both tools should report the same requests/s.
# 2. Capacity: the same against howl (bench/howl.c: a pre-built answer, the fastest
#    server this machine has), where the load generator's own core becomes the limit: the tool
#    that reaches more requests/s can drive more load from one core.
# For each run: requests/s, the ratio ampd-bench/wrk, and each client's CPU time per request
# (user + system time of the client process / requests it completed).
#
#   sudo bash bench/setup.sh && cargo build --release -p ampd-bench
#   bash bench/agree_wrk.sh          # about 2 minutes with the defaults
#
# REPS [5] DUR [5] CONNS [50] FILE [/f1k.bin], and BASE_PORT/SERVER_CPU/CLIENT_CPU/PRIO of
# bench/peers_lib.sh. Results: $RESULTS (agree-nginx.csv, agree-howl.csv, raw outputs).
SERVERS="nginx howl"
# Hold the benchmark lock for the whole comparison, so that no other benchmark runs between a
# wrk run and the ampd-bench run it is compared with.
if [ -z "${AGREE_LOCKED:-}" ]; then
  AGREE_LOCKED=1 exec flock /tmp/ampd-bench.lock bash "$0" "$@"
fi
source "$(dirname "${BASH_SOURCE[0]}")/peers_lib.sh"
REPS=${REPS:-5}
DUR=${DUR:-5}
CONNS=${CONNS:-50}
FILE=${FILE:-/f1k.bin}
command -v wrk >/dev/null || die "wrk is not installed: run bench/setup.sh"
prepare
start_all

median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

# timed FILE COMMAND...: runs COMMAND on $CLIENT_CPU; writes "user sys" CPU seconds to FILE.time.
timed() {
  local out=$1; shift
  { TIMEFORMAT='%U %S'; time taskset -c "$CLIENT_CPU" "$@" > "$out" 2>&1; } 2>> "$out.time"
}

# rounds SERVER: REPS interleaved wrk / ampd-bench runs against SERVER; prints the table.
rounds() {
  local server=$1 url="http://127.0.0.1:${PORT[$1]}$FILE" csv="$RESULTS/agree-$1.csv" rep
  taskset -c "$CLIENT_CPU" wrk -t1 -c"$CONNS" -d1s "$url" > /dev/null
  taskset -c "$CLIENT_CPU" "$BENCH" file --target "$url" --clients "$CONNS" --duration 1s \
    --warmup 0 --quiet > /dev/null
  printf '\n%s, %s, %s connections, keep-alive (server CPU %s, clients CPU %s):\n\n' \
    "$server" "$FILE" "$CONNS" "$SERVER_CPU" "$CLIENT_CPU"
  printf '| run | wrk req/s | ampd-bench req/s | ampd-bench/wrk | wrk CPU µs/req | ampd-bench CPU µs/req |\n'
  printf '|---|---:|---:|---:|---:|---:|\n'
  : > "$csv"
  for rep in $(seq 1 "$REPS"); do
    local w=$RESULTS/wrk-$server-$rep.txt b=$RESULTS/bench-$server-$rep.json
    : > "$w.time"; : > "$b.out.time"
    timed "$w" wrk -t1 -c"$CONNS" -d"${DUR}s" "$url"
    timed "$b.out" "$BENCH" file --target "$server=$url" --clients "$CONNS" --duration "${DUR}s" \
      --warmup 0 --quiet --json "$b"
    local wrk_rps wrk_requests wrk_cpu bench_rps bench_requests bench_cpu
    wrk_rps=$(awk '/Requests\/sec/ {print $2}' "$w")
    wrk_requests=$(awk '/requests in/ {print $1}' "$w")
    wrk_cpu=$(awk '{print $1 + $2}' "$w.time")
    bench_rps=$(grep -m1 '"requests_per_second"' "$b" | tr -dc '0-9.')
    bench_requests=$(grep -m1 '"responses"' "$b" | tr -dc '0-9')
    bench_cpu=$(awk '{print $1 + $2}' "$b.out.time")
    echo "$wrk_rps,$bench_rps,$wrk_cpu,$wrk_requests,$bench_cpu,$bench_requests" >> "$csv"
    awk -v r="$rep" -v w="$wrk_rps" -v b="$bench_rps" -v wc="$wrk_cpu" -v wn="$wrk_requests" \
        -v bc="$bench_cpu" -v bn="$bench_requests" \
      'BEGIN {printf "| %d | %.0f | %.0f | %.3f | %.2f | %.2f |\n", r, w, b, b / w, 1e6 * wc / wn, 1e6 * bc / bn}'
  done
  MEDIAN_WRK=$(cut -d, -f1 "$csv" | median)
  MEDIAN_BENCH=$(cut -d, -f2 "$csv" | median)
  local wrk_cost bench_cost
  wrk_cost=$(awk -F, '{print 1e6 * $3 / $4}' "$csv" | median)
  bench_cost=$(awk -F, '{print 1e6 * $5 / $6}' "$csv" | median)
  awk -v w="$MEDIAN_WRK" -v b="$MEDIAN_BENCH" -v wc="$wrk_cost" -v bc="$bench_cost" \
    'BEGIN {printf "| median | %.0f | %.0f | %.3f | %.2f | %.2f |\n", w, b, b / w, wc, bc}'
}

case " $LIVE " in *" nginx "*) ;; *) die "nginx did not start" ;; esac
rounds nginx
awk -v w="$MEDIAN_WRK" -v b="$MEDIAN_BENCH" 'BEGIN {
  d = 100 * (b - w) / w
  printf "\nAgreement on nginx: ampd-bench %+.1f%% requests/s against wrk (%s 10%%)\n", d, (d < 10 && d > -10) ? "within" : "NOT within" }'
case " $LIVE " in
  *" howl "*)
    rounds howl
    awk -v w="$MEDIAN_WRK" -v b="$MEDIAN_BENCH" 'BEGIN {
      printf "\nCapacity on howl: ampd-bench drives %.0f requests/s from one core, wrk %.0f (%s)\n", b, w, (b >= w) ? "ampd-bench at least as many" : "FEWER than wrk" }'
    ;;
  *) log "howl is not built (run bench/setup.sh): capacity check skipped" ;;
esac
log "raw output: $RESULTS"
