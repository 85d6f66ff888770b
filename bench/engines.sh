#!/usr/bin/env bash
# engines.sh - every engine on the same cached workload (Flash §6: one code base, only the
# architecture differs): one 1 KiB file, keep-alive, wrk -t1 -c$CONNS.
#
#   sudo bash bench/setup.sh      # once: wrk and the /tmp/bench/www files
#   cargo build --release
#   flock /tmp/ampd-bench.lock bash bench/engines.sh
#
# Each configuration ("arch" or "arch:threads") is started pinned to CPU 0 (its threads and
# processes inherit the pin); wrk runs pinned to CPU 1. REPS interleaved runs of DUR seconds after
# a one-second warm-up; medians of requests/s, and of the server's CPU time per request (user +
# system of the server and its worker processes, from /proc: on a shared machine this moves less
# than requests/s does), with ratios to the first configuration.
# WRK_EXTRA adds wrk arguments (e.g. a pipelining script). 127.0.0.1 only; bounded by timeout.
set -euo pipefail
cd "$(dirname "$0")/.."
# As bench/peers_lib.sh: a session of our own whose autogroup gets nice -20, so busy
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

# CPU time (clock ticks) of a process and its children, from /proc/PID/stat fields 14 and 15.
ticks() {
  local total=0 pid
  for pid in "$1" $(cat /proc/"$1"/task/*/children 2>/dev/null); do
    total=$((total + $(awk '{sub(/.*\) /, ""); print $12 + $13}' /proc/"$pid"/stat 2>/dev/null || echo 0)))
  done
  echo "$total"
}

run() { # config -> "req/s cpu-us-per-request"
  local arch=${1%%:*} threads=()
  [ "$arch" != "$1" ] && threads=(--threads "${1#*:}")
  taskset -c 0 "$AMPD" serve "$WWW" --listen "127.0.0.1:$PORT" --arch "$arch" "${threads[@]}" >/dev/null 2>&1 &
  local pid=$!
  for _ in $(seq 100); do curl -sf -o /dev/null "http://127.0.0.1:$PORT/$FILE" && break; sleep 0.05; done
  # shellcheck disable=SC2086
  timeout 20 taskset -c 1 wrk -t1 -c"$CONNS" -d1 $WRK_EXTRA "http://127.0.0.1:$PORT/$FILE" >/dev/null 2>&1 || true
  local before after out
  before=$(ticks "$pid")
  # shellcheck disable=SC2086
  out=$(timeout $((DUR + 20)) taskset -c 1 wrk -t1 -c"$CONNS" -d"$DUR" $WRK_EXTRA "http://127.0.0.1:$PORT/$FILE" 2>/dev/null)
  after=$(ticks "$pid")
  kill -TERM "$pid"; wait "$pid" 2>/dev/null || true
  echo "$out" | awk -v t=$((after - before)) -v hz="$(getconf CLK_TCK)" \
    '/requests in/ {n=$1} /Requests\/sec/ {r=$2} END {printf "%s %.2f\n", r, (n > 0) ? t * 1e6 / hz / n : 0}'
}

declare -A rates cpus
for _ in $(seq "$REPS"); do
  for config in $CONFIGS; do
    read -r rate cpu < <(run "$config")
    rates[$config]+="$rate "
    cpus[$config]+="$cpu "
  done
done
first=${CONFIGS%% *}
base_rate=$(printf '%s\n' ${rates[$first]} | median)
base_cpu=$(printf '%s\n' ${cpus[$first]} | median)
echo "| engine | req/s | vs $first | server CPU µs/req | vs $first | runs (req/s) |"
echo "|---|---:|---:|---:|---:|---|"
for config in $CONFIGS; do
  r=$(printf '%s\n' ${rates[$config]} | median); c=$(printf '%s\n' ${cpus[$config]} | median)
  awk -v k="$config" -v r="$r" -v c="$c" -v br="$base_rate" -v bc="$base_cpu" -v runs="${rates[$config]}" \
    'BEGIN { printf "| %s | %.0f | %.2f | %.2f | %.2f | %s|\n", k, r, r / br, c, c / bc, runs }'
done
