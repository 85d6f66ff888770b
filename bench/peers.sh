#!/usr/bin/env bash
# peers.sh - the table of docs/research/benchmarks.md: ampd beside nginx, lighttpd, Apache (event MPM),
# h2o and howl, each serving /tmp/bench/www from CPU $SERVER_CPU, driven by wrk -t1 from CPU
# $CLIENT_CPU, the servers taking turns run by run (A B C A B C) so that a change in the machine's
# load falls on all of them alike.
#
#   sudo bash bench/setup.sh          # once: the peers, wrk, the document root, howl
#   cargo build --release
#   bash bench/peers.sh               # about 8 minutes with the defaults
#
# Rows (ROWS, default "a b c d e"):
#   a  /f1k.bin, keep-alive            b  /f1k.bin, one connection per request
#   c  /f100k.bin, keep-alive          d  /f1m.bin, keep-alive
#   e  the SPECweb96 mix (bench/wrk/specweb.lua), keep-alive
# howl answers every request with the same 1 KiB, so it takes part in rows a and b only.
#
# For each row and server, the medians of REPS runs: requests/s and MB/s (wrk's count, heads
# included), the server's CPU time per request (user + system of the server's processes, from
# /proc: where wrk's own core is saturated, marked ‡, requests/s is the client's limit and this
# is the figure that tells servers apart) and the user-space part of it, peak resident memory (VmHWM, reset before the row) and
# latency p50/p99. Written to $RESULTS: summary.md, runs.csv, the raw wrk output.
#
# PROFILE="ampd nginx": afterwards, one more run of row PROFILE_ROW per server listed under
# `perf record -g` (not measured): where each server's time goes, by object and by function, in
# perf-SERVER.txt (perf_profile in bench/peers_lib.sh).
#
# Knobs [defaults]: SERVERS ["nginx lighttpd apache2 h2o howl ampd"]  ROWS ["a b c d e"]
#   DUR [5] seconds per run  REPS [3]  WARM [1] seconds of warm-up per row and server
#   CONNS [50]  AMPD_ARCH [amped]  WRK_EXTRA [] more wrk arguments  PROFILE []
#   PROFILE_ROW [c]  and those of
#   bench/peers_lib.sh (BASE_PORT, SERVER_CPU, CLIENT_CPU, WWW, RESULTS, PRIO).
# Every wrk run is bounded by `timeout`; only the servers this script started are signalled.
SERVERS=${SERVERS:-"nginx lighttpd apache2 h2o howl ampd"}
source "$(dirname "${BASH_SOURCE[0]}")/peers_lib.sh"
ROWS=${ROWS:-"a b c d e"}
DUR=${DUR:-5}
REPS=${REPS:-3}
WARM=${WARM:-1}
CONNS=${CONNS:-50}
WRK_EXTRA=${WRK_EXTRA:-}
PROFILE=${PROFILE:-}
PROFILE_ROW=${PROFILE_ROW:-c}
WRK_DIR=$REPO/bench/wrk
HZ=$(getconf CLK_TCK)

declare -A ROW_PATH=([a]=/f1k.bin [b]=/f1k.bin [c]=/f100k.bin [d]=/f1m.bin [e]=/)
declare -A ROW_BYTES=([a]=1024 [b]=1024 [c]=102400 [d]=1048576 [e]=5120)
declare -A ROW_NAME=([a]="1 KiB, keep-alive" [b]="1 KiB, new connection per request"
                     [c]="100 KiB, keep-alive" [d]="1 MiB, keep-alive"
                     [e]="SPECweb96-like mix, keep-alive")

command -v wrk >/dev/null || die "wrk is not installed: run bench/setup.sh"
[ -n "${ROW_PATH[$PROFILE_ROW]:-}" ] || die "unknown PROFILE_ROW $PROFILE_ROW (a b c d e)"
[ -d "$WWW/specweb" ] || die "no $WWW/specweb: run bench/setup.sh"
DIRS=$(find "$WWW/specweb" -mindepth 1 -maxdepth 1 -name 'dir*' -type d | wc -l)

in_row() { [ "$1" != howl ] || [ "$2" = a ] || [ "$2" = b ]; }

peak_reset() { local pid; for pid in $(tree "$1"); do echo 5 > /proc/"$pid"/clear_refs 2>/dev/null || true; done; }
peak_kib() {
  local total=0 pid kib
  for pid in $(tree "$1"); do
    kib=$(awk '/^VmHWM:/ {print $2}' /proc/"$pid"/status 2>/dev/null || echo 0)
    total=$((total + ${kib:-0}))
  done
  echo "$total"
}

# Each server must answer every row's file with 200 and its exact size, or it leaves the run.
preflight() {
  local server=$1 row path code bytes
  for row in $ROWS; do
    in_row "$server" "$row" || continue
    path=${ROW_PATH[$row]}
    [ "$row" = e ] && path=/specweb/dir00000/class1_4
    read -r code bytes < <(curl -s -o /dev/null -m 5 -w '%{http_code} %{size_download}\n' \
      "http://127.0.0.1:${PORT[$server]}$path")
    if [ "$code" != 200 ] || [ "$bytes" != "${ROW_BYTES[$row]}" ]; then
      log "$server: $path answered $code with $bytes bytes (want 200, ${ROW_BYTES[$row]}): left out"
      return 1
    fi
  done
}

# wrk ROW SERVER SECONDS OUT: one wrk run; its own user+system seconds go to OUT.time.
wrk_run() {
  local url=http://127.0.0.1:${PORT[$2]} args
  case $1 in
    b) args=(-H 'Connection: close' -s "$WRK_DIR/result.lua" "$url${ROW_PATH[$1]}") ;;
    e) args=(-s "$WRK_DIR/specweb.lua" "$url/" -- "$DIRS") ;;
    *) args=(-s "$WRK_DIR/result.lua" "$url${ROW_PATH[$1]}") ;;
  esac
  # shellcheck disable=SC2086
  { TIMEFORMAT='%R %U %S'; time timeout -k 2 $(($3 + 20)) taskset -c "$CLIENT_CPU" \
      wrk -t1 -c"$CONNS" -d"$3"s --timeout 5s $WRK_EXTRA "${args[@]}" > "$4" 2>&1; } 2> "$4.time" || true
}

# TCP connections accepted on this machine so far (/proc/net/snmp PassiveOpens): row b must
# see one per request, or the client kept its connections open and the row measured keep-alive.
passive_opens() { awk '/^Tcp:/ && $2 ~ /^[0-9]/ {print $7}' /proc/net/snmp; }

# One measured run: appends row,server,rep,rps,MBps,cpu_us_per_request,wrk_cpu_pct,p50_ms,p99_ms,
# errors,opens_per_request,user_us_per_request.
run_once() {
  local row=$1 server=$2 rep=$3 out before after user_before user_after opens
  out=$RESULTS/raw/$row-$server-$rep.txt
  before=$(cpu_ticks "${PID[$server]}")
  user_before=$(cpu_ticks "${PID[$server]}" user)
  opens=$(passive_opens)
  wrk_run "$row" "$server" "$DUR" "$out"
  after=$(cpu_ticks "${PID[$server]}")
  user_after=$(cpu_ticks "${PID[$server]}" user)
  opens=$(($(passive_opens) - opens))
  awk -v row="$row" -v server="$server" -v rep="$rep" -v ticks=$((after - before)) -v hz="$HZ" \
      -v user_ticks=$((user_after - user_before)) -v opens="$opens" \
      -v times="$(cat "$out.time")" '
    /^RESULT / {
      for (i = 2; i <= NF; i++) { split($i, kv, "="); value[kv[1]] = kv[2] }
      found = 1
    }
    END {
      if (!found) { printf "%s,%s,%s,0,0,0,0,0,0,-1,0,0\n", row, server, rep; exit }
      seconds = value["duration_us"] / 1e6
      split(times, t, " ")
      wrk_cpu = (t[1] > 0) ? 100 * (t[2] + t[3]) / t[1] : 0
      per_request = (value["requests"] > 0) ? 1e6 * ticks / hz / value["requests"] : 0
      user_per_request = (value["requests"] > 0) ? 1e6 * user_ticks / hz / value["requests"] : 0
      printf "%s,%s,%s,%.0f,%.1f,%.2f,%.0f,%.3f,%.3f,%d,%.2f,%.2f\n", row, server, rep,
        value["requests"] / seconds, value["bytes"] / seconds / 1e6, per_request, wrk_cpu,
        value["p50_us"] / 1000, value["p99_us"] / 1000, value["errors"],
        (value["requests"] > 0) ? opens / value["requests"] : 0, user_per_request
    }' "$out" >> "$RESULTS/runs.csv"
  tail -n 1 "$RESULTS/runs.csv" | awk -F, '{printf "  %s %-9s run %s: %8s req/s %7s MB/s %7s µs/req  wrk %s%%  errors %s  connections/request %s\n", $1, $2, $3, $4, $5, $6, $7, $10, $11}' >&2
}

median_of() { # ROW SERVER COLUMN
  awk -F, -v row="$1" -v server="$2" -v column="$3" '$1 == row && $2 == server {print $column}' \
    "$RESULTS/runs.csv" | sort -g |
    awk '{v[NR] = $1} END {if (NR == 0) print ""; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}

prepare
mkdir -p "$RESULTS/raw"
echo "row,server,rep,rps,MBps,cpu_us_per_request,wrk_cpu_pct,p50_ms,p99_ms,errors,opens_per_request,user_us_per_request" > "$RESULTS/runs.csv"
start_all
ALIVE=""
for server in $LIVE; do
  if preflight "$server"; then ALIVE="$ALIVE $server"; else stop_server "$server"; fi
done
[ -n "$ALIVE" ] || die "no server passed the preflight"

# One benchmark at a time on this machine (the lock every bench script takes).
exec 9> /tmp/ampd-bench.lock
flock -n 9 || { log "waiting for another benchmark (/tmp/ampd-bench.lock)"; flock 9; }

declare -A PEAK=()
for row in $ROWS; do
  servers=""
  for server in $ALIVE; do in_row "$server" "$row" && servers="$servers $server"; done
  log "row $row (${ROW_NAME[$row]}):$servers"
  for server in $servers; do
    peak_reset "${PID[$server]}"
    [ "$WARM" -gt 0 ] && wrk_run "$row" "$server" "$WARM" "$RESULTS/raw/warm-$row-$server.txt"
  done
  for rep in $(seq 1 "$REPS"); do
    for server in $servers; do run_once "$row" "$server" "$rep"; done
  done
  for server in $servers; do PEAK[$row,$server]=$(peak_kib "${PID[$server]}"); done
done

for server in $PROFILE; do
  if [[ " $ALIVE " != *" $server "* ]] || ! in_row "$server" "$PROFILE_ROW"; then
    log "PROFILE: $server does not take part in row $PROFILE_ROW"
    continue
  fi
  log "profiling $server (row $PROFILE_ROW, ${DUR}s, perf record -g)"
  perf_profile "${PID[$server]}" "$RESULTS/perf-$server" \
    wrk_run "$PROFILE_ROW" "$server" "$DUR" "$RESULTS/raw/profile-$server.txt"
done
flock -u 9

{
  echo "# bench/peers.sh, $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo
  echo "$(uname -sr), $(nproc) CPUs; servers on CPU $SERVER_CPU, wrk -t1 -c$CONNS on CPU $CLIENT_CPU;"
  echo "medians of $REPS interleaved runs of ${DUR}s. ‡: wrk's core was 90% busy or more (the client is the limit)."
  echo "ampd: $("$AMPD" --version 2>/dev/null | head -n1) --arch $AMPD_ARCH"
  [ -f "${BENCH_ROOT:-/tmp/bench}/versions.txt" ] && sed 's/^/    /' "${BENCH_ROOT:-/tmp/bench}/versions.txt"
  header="| workload |"; rule="|---|"
  for server in $ALIVE; do header="$header $server |"; rule="$rule---:|"; done
  table() { # TITLE CELL-FUNCTION
    echo; echo "$1"; echo; echo "$header"; echo "$rule"
    local row line server
    for row in $ROWS; do
      line="| $row. ${ROW_NAME[$row]} |"
      for server in $ALIVE; do
        if in_row "$server" "$row"; then line="$line $($2 "$row" "$server") |"; else line="$line – |"; fi
      done
      echo "$line"
    done
  }
  requests_cell() {
    local mark=""
    awk -v busy="$(median_of "$1" "$2" 7)" 'BEGIN {exit !(busy >= 90)}' && mark=" ‡"
    [ "$(awk -F, -v r="$1" -v s="$2" '$1 == r && $2 == s {e += $10} END {print e + 0}' "$RESULTS/runs.csv")" = 0 ] || mark="$mark (errors)"
    printf '%.0f (%s MB/s)%s' "$(median_of "$1" "$2" 4)" "$(median_of "$1" "$2" 5)" "$mark"
  }
  cpu_cell() { median_of "$1" "$2" 6; }
  user_cell() { median_of "$1" "$2" 12; }
  memory_cell() { awk -v kib="${PEAK[$1,$2]:-0}" 'BEGIN {printf "%.1f", kib / 1024}'; }
  latency_cell() { echo "$(median_of "$1" "$2" 8) / $(median_of "$1" "$2" 9)"; }
  table "Requests/s (MB/s):" requests_cell
  table "Server CPU time per request, µs (lower is better):" cpu_cell
  table "Of which in user space (the server's own code and its libraries), µs; the rest is the kernel's:" user_cell
  table "Peak resident memory of the server during the row, MiB:" memory_cell
  table "Latency p50 / p99, ms:" latency_cell
  case " $ROWS " in *" b "*)
    echo; echo "Row b, new TCP connections per request (1.00: one per request, as the row intends):"
    for server in $ALIVE; do echo "  $server: $(median_of b "$server" 11)"; done ;;
  esac
} > "$RESULTS/summary.md"
cat "$RESULTS/summary.md"
log "results: $RESULTS (summary.md, runs.csv, raw/)"
