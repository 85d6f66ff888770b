#!/usr/bin/env bash
# agree_wrk.sh - does ampd-bench agree with wrk, and can it drive at least as much load?
#
# nginx (one worker, pinned to CPU 0) serves the 1 KiB file; wrk -t1 -c50 and ampd-bench
# --clients 50, both keep-alive and both pinned to CPU 1, take turns (REPS interleaved runs of
# DUR seconds, each tool warmed up for a second first). Prints requests/s of each run, the
# medians, the ratio ampd-bench/wrk, and each client's CPU time per request (the cost of
# generating the load: the lower, the more load one core can drive).
#
#   bash ../shared/bench/setup.sh && cargo build --release -p ampd-bench
#   bash bench/agree_wrk.sh          # about 1 minute with the defaults
#
# REPS [5] DUR [5] CONNS [50] FILE [/f1k.bin], and BASE_PORT/SERVER_CPU/CLIENT_CPU of
# bench/peers_lib.sh.
SERVERS=nginx
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
command -v wrk >/dev/null || die "wrk is not installed: run ../shared/bench/setup.sh"
prepare
start_all
URL="http://127.0.0.1:${PORT[nginx]}$FILE"

median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

# timed FILE COMMAND...: runs COMMAND on $CLIENT_CPU; writes "user sys" CPU seconds to FILE.time.
timed() {
  local out=$1; shift
  { TIMEFORMAT='%U %S'; time taskset -c "$CLIENT_CPU" "$@" > "$out" 2>&1; } 2>> "$out.time"
}

taskset -c "$CLIENT_CPU" wrk -t1 -c"$CONNS" -d1s "$URL" > /dev/null
taskset -c "$CLIENT_CPU" "$BENCH" file --target "$URL" \
  --clients "$CONNS" --duration 1s --warmup 0 --quiet > /dev/null
printf '| run | wrk req/s | ampd-bench req/s | ampd-bench/wrk | wrk CPU µs/req | ampd-bench CPU µs/req |\n'
printf '|---|---:|---:|---:|---:|---:|\n'
: > "$RESULTS/agree.csv"
for rep in $(seq 1 "$REPS"); do
  w=$RESULTS/wrk-$rep.txt; b=$RESULTS/bench-$rep.json
  : > "$w.time"; : > "$b.time"
  timed "$w" wrk -t1 -c"$CONNS" -d"${DUR}s" "$URL"
  timed "$b.out" "$BENCH" file --target "nginx=$URL" --clients "$CONNS" --duration "${DUR}s" \
    --warmup 0 --quiet --json "$b"
  wrk_rps=$(awk '/Requests\/sec/ {print $2}' "$w")
  wrk_requests=$(awk '/requests in/ {print $1}' "$w")
  wrk_cpu=$(awk '{print $1 + $2}' "$w.time")
  bench_rps=$(grep -m1 '"requests_per_second"' "$b" | tr -dc '0-9.')
  bench_requests=$(grep -m1 '"responses"' "$b" | tr -dc '0-9')
  bench_cpu=$(awk '{print $1 + $2}' "$b.out.time")
  echo "$wrk_rps,$bench_rps,$wrk_cpu,$wrk_requests,$bench_cpu,$bench_requests" >> "$RESULTS/agree.csv"
  awk -v r="$rep" -v w="$wrk_rps" -v b="$bench_rps" -v wc="$wrk_cpu" -v wn="$wrk_requests" \
      -v bc="$bench_cpu" -v bn="$bench_requests" \
    'BEGIN {printf "| %d | %.0f | %.0f | %.3f | %.2f | %.2f |\n", r, w, b, b / w, 1e6 * wc / wn, 1e6 * bc / bn}'
done
wrk_median=$(cut -d, -f1 "$RESULTS/agree.csv" | median)
bench_median=$(cut -d, -f2 "$RESULTS/agree.csv" | median)
wrk_cost=$(awk -F, '{print 1e6 * $3 / $4}' "$RESULTS/agree.csv" | median)
bench_cost=$(awk -F, '{print 1e6 * $5 / $6}' "$RESULTS/agree.csv" | median)
awk -v w="$wrk_median" -v b="$bench_median" -v wc="$wrk_cost" -v bc="$bench_cost" \
  'BEGIN {printf "| median | %.0f | %.0f | %.3f | %.2f | %.2f |\n", w, b, b / w, wc, bc}'
awk -v w="$wrk_median" -v b="$bench_median" -v wc="$wrk_cost" -v bc="$bench_cost" 'BEGIN {
  d = 100 * (b - w) / w; printf "\nampd-bench vs wrk: %+.1f%% requests/s (%s 10%%); ", d, (d < 10 && d > -10) ? "within" : "NOT within"
  printf "client CPU per request %.2f vs %.2f µs (%s)\n", bc, wc, (bc <= wc) ? "ampd-bench drives at least as much load per core" : "ampd-bench costs more per request" }'
log "raw output: $RESULTS"
