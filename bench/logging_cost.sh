#!/usr/bin/env bash
# logging_cost.sh - what the access log costs: the 1 KiB keep-alive benchmark (peers.sh row a)
# against nginx, each with its access log off and on, interleaved in one run.
#
#   sudo bash bench/setup.sh      # once: nginx, wrk, /tmp/bench/www
#   cargo build --release
#   flock /tmp/ampd-bench.lock bash bench/logging_cost.sh
#
# ampd: `ampd run -c` (reactor, one loop, combined format, the log thread writes 64 KiB
# buffers). nginx: one worker, the same combined format with `buffer=64k flush=1s` (its
# cheapest way to log; without a buffer it writes once per request). Servers on CPU 0,
# wrk -t1 -c$CONNS on CPU 1, REPS interleaved runs of DUR seconds, medians of requests/s.
# The claim checked: ratio(ampd/nginx) with logs on does not fall more than 5% below the
# ratio with logs off.
# 127.0.0.1 only; every run bounded by timeout; only PIDs started here are signalled.
set -euo pipefail
# As peers.sh: run in a session of our own whose autogroup gets nice -20 (PRIO=1, default), so
# that busy processes outside the benchmark on this shared machine distort it less.
if [ "${PRIO:-1}" = 1 ] && [ -z "${_LOGCOST_SETSID:-}" ]; then
  export _LOGCOST_SETSID=1
  exec setsid --wait bash "$0" "$@"
fi
if [ "${PRIO:-1}" = 1 ] && [ -w /proc/self/autogroup ]; then
  echo -20 > /proc/self/autogroup 2>/dev/null || true
fi
cd "$(dirname "$0")/.."
source bench/nginx_conf.sh
AMPD=${AMPD:-$PWD/target/release/ampd}
WWW=${WWW:-/tmp/bench/www}
DUR=${DUR:-5}
REPS=${REPS:-7}
CONNS=${CONNS:-50}
PORT=${PORT:-28390}
WORK=$(mktemp -d /tmp/ampd-logcost.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
chmod 755 "$WORK"

median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

ampd_config() { # log: on|off
  local access=off
  [ "$1" = on ] && access="$WORK/ampd-access.log"
  cat > "$WORK/ampd-$1.toml" <<TOML
listen = "127.0.0.1:$PORT"
arch = "reactor"
threads = 1
[log]
access = "$access"
format = "combined"
[[site]]
root = "$WWW"
TOML
}

nginx_config() { # log: on|off
  local access="access_log off;"
  [ "$1" = on ] && access="access_log $WORK/nginx-access.log combined buffer=64k flush=1s;"
  mkdir -p "$WORK/nginx"
  chown www-data "$WORK/nginx" 2>/dev/null || true
  nginx_conf "$WORK" "$PORT" "$WWW" "$access" > "$WORK/nginx-$1.conf"
}

measure() { # server log -> requests/s
  local pid
  case $1 in
    ampd) taskset -c 0 "$AMPD" run -c "$WORK/ampd-$2.toml" >/dev/null 2>&1 & pid=$! ;;
    nginx) taskset -c 0 nginx -c "$WORK/nginx-$2.conf" -e "$WORK/nginx.err" >/dev/null 2>&1 & pid=$! ;;
  esac
  for _ in $(seq 200); do curl -sf -o /dev/null "http://127.0.0.1:$PORT/f1k.bin" && break; sleep 0.05; done
  timeout $((DUR + 10)) taskset -c 1 wrk -t1 -c"$CONNS" -d1 "http://127.0.0.1:$PORT/f1k.bin" >/dev/null 2>&1 || true
  timeout $((DUR + 10)) taskset -c 1 wrk -t1 -c"$CONNS" -d"$DUR" "http://127.0.0.1:$PORT/f1k.bin" 2>/dev/null \
    | awk '/Requests\/sec/ {print $2}'
  kill -TERM "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

for log in off on; do ampd_config $log; nginx_config $log; done
declare -A results
for rep in $(seq "$REPS"); do
  for server in ampd nginx; do
    for log in off on; do
      rate=$(measure $server $log)
      results[$server-$log]+="$rate "
      echo "run $rep: $server log $log: $rate req/s" >&2
    done
  done
done
lines_ampd=$(wc -l < "$WORK/ampd-access.log" 2>/dev/null || echo 0)
lines_nginx=$(wc -l < "$WORK/nginx-access.log" 2>/dev/null || echo 0)

declare -A med
for key in ampd-off ampd-on nginx-off nginx-on; do
  med[$key]=$(printf '%s\n' ${results[$key]} | median)
done
echo "| access log | ampd (req/s) | nginx (req/s) | ampd / nginx |"
echo "|---|---:|---:|---:|"
for log in off on; do
  awk -v l="$log" -v a="${med[ampd-$log]}" -v n="${med[nginx-$log]}" \
    'BEGIN { printf "| %s | %.0f | %.0f | %.3f |\n", l, a, n, a / n }'
done
# The same from the runs of each round (the four runs of a round are back to back), which
# cancels drift in what else the machine is doing between rounds.
paired() { # expression over a0 a1 n0 n1 -> median over rounds
  paste <(printf '%s\n' ${results[ampd-off]}) <(printf '%s\n' ${results[ampd-on]}) \
        <(printf '%s\n' ${results[nginx-off]}) <(printf '%s\n' ${results[nginx-on]}) \
    | awk "{ a0=\$1; a1=\$2; n0=\$3; n1=\$4; print $1 }" | median
}
change=$(paired "(a1 / n1) / (a0 / n0)")
awk -v r0="${med[ampd-off]}" -v n0="${med[nginx-off]}" -v a1="${med[ampd-on]}" -v n1="${med[nginx-on]}" \
    -v change="$change" -v ampd="$(paired "a1 / a0")" -v nginx="$(paired "n1 / n0")" \
  'BEGIN { m = (a1 / n1) / (r0 / n0);
           printf "\nratio with logs / ratio without: %.3f from medians, %.3f median of rounds\n", m, change;
           printf "ratio kept (no drop past 5%%): %s\n", (change >= 0.95 && m >= 0.95) ? "yes" : "NO";
           printf "throughput with logs / without (median of rounds): ampd %.3f, nginx %.3f\n", ampd, nginx }'
echo "lines logged: ampd $lines_ampd, nginx $lines_nginx (every request of every run, warm-ups included)"
