#!/usr/bin/env bash
# engines.sh - every engine on the same cached workload (Flash §6: one code base, only the
# architecture differs): one 1 KiB file, keep-alive, wrk -t1 -c$CONNS.
#
#   bash ../shared/bench/setup.sh      # once: wrk and the /tmp/bench/www files
#   cargo build --release
#   flock /tmp/ampd-bench.lock bash bench/engines.sh
#
# Each configuration ("arch" or "arch:threads") is started pinned to CPU 0 (its threads and
# processes inherit the pin); wrk runs pinned to CPU 1. REPS interleaved runs of DUR seconds after
# a one-second warm-up; medians of requests/s and the ratio to the first configuration.
# WRK_EXTRA adds wrk arguments (e.g. a pipelining script). 127.0.0.1 only; bounded by timeout.
set -euo pipefail
cd "$(dirname "$0")/.."
# Like ../shared/bench/peers.sh: a session of our own whose autogroup gets nice -20, so busy
# processes elsewhere on the machine do not distort the figures (PRIO=0 to skip).
if [ "${PRIO:-1}" = 1 ] && [ -z "${_ENGINES_SETSID:-}" ]; then
  export _ENGINES_SETSID=1
  exec setsid --wait bash "$0" "$@"
fi
if [ "${PRIO:-1}" = 1 ] && [ -w /proc/self/autogroup ]; then
  echo -20 > /proc/self/autogroup 2>/dev/null || true
fi
AMPD=${AMPD:-$PWD/target/release/ampd}
WWW=${WWW:-/tmp/bench/www}
FILE=${FILE:-f1k.bin}
DUR=${DUR:-5}
REPS=${REPS:-3}
CONNS=${CONNS:-50}
CONFIGS=${CONFIGS:-"amped mt:1 mt:8 mt:64 tpc mp:1 mp:8 uring:1 reactor:1 sped"}
PORT=${PORT:-28390}
WRK_EXTRA=${WRK_EXTRA:-}

median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

run() { # config -> req/s
  local arch=${1%%:*} threads=()
  [ "$arch" != "$1" ] && threads=(--threads "${1#*:}")
  taskset -c 0 "$AMPD" serve "$WWW" --listen "127.0.0.1:$PORT" --arch "$arch" "${threads[@]}" >/dev/null 2>&1 &
  local pid=$!
  for _ in $(seq 100); do curl -sf -o /dev/null "http://127.0.0.1:$PORT/$FILE" && break; sleep 0.05; done
  # shellcheck disable=SC2086
  timeout 20 taskset -c 1 wrk -t1 -c"$CONNS" -d1 $WRK_EXTRA "http://127.0.0.1:$PORT/$FILE" >/dev/null 2>&1 || true
  # shellcheck disable=SC2086
  timeout $((DUR + 20)) taskset -c 1 wrk -t1 -c"$CONNS" -d"$DUR" $WRK_EXTRA "http://127.0.0.1:$PORT/$FILE" 2>/dev/null \
    | awk '/Requests\/sec/ {print $2}'
  kill -TERM "$pid"; wait "$pid" 2>/dev/null || true
}

declare -A results
for _ in $(seq "$REPS"); do
  for config in $CONFIGS; do
    results[$config]+="$(run "$config") "
  done
done
first=${CONFIGS%% *}
base=$(printf '%s\n' ${results[$first]} | median)
echo "| engine | req/s (median of $REPS) | runs | vs $first |"
echo "|---|---:|---|---:|"
for config in $CONFIGS; do
  m=$(printf '%s\n' ${results[$config]} | median)
  awk -v c="$config" -v m="$m" -v b="$base" -v r="${results[$config]}" \
    'BEGIN { printf "| %s | %.0f | %s | %.2f |\n", c, m, r, m / b }'
done
