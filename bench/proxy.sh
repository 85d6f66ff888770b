#!/usr/bin/env bash
# proxy.sh - ampd beside nginx as a reverse proxy to the same upstream, side by side in one run.
# Both proxies get one worker (ampd --arch reactor with one loop, nginx worker_processes 1),
# keep-alive connections to the upstream (a pool of 32), run pinned to CPU
# $SERVER_CPU; the upstream (an nginx serving the benchmark's document root) and wrk -t1 share
# CPU $CLIENT_CPU. Runs alternate ampd, nginx, ampd, nginx... so that a change in the machine's
# load falls on both alike.
#
#   sudo bash bench/setup.sh          # once: nginx, wrk, /tmp/bench/www
#   cargo build --release
#   bash bench/proxy.sh               # about 2 minutes with the defaults
#   bash bench/proxy.sh --configs DIR # only write the three configurations into DIR
#
# Rows: get1k   GET /f1k.bin (1 KiB responses), keep-alive
#       get100k GET /f100k.bin (100 KiB responses), keep-alive
#       post1m  POST of 1 MiB bodies to /upload (bench/wrk/post.lua), answered "ok" once the
#               upstream has read the whole body
# For each row and proxy, the medians of REPS runs of requests/s and the proxy's CPU time per
# request (user + system of its processes, /proc/PID/stat utime + stime deltas), and the ratios
# ampd/nginx (requests/s: higher is better for ampd; CPU: lower is). Written to $RESULTS:
# summary.md (the table), results.json, runs.csv, raw wrk output, and the configurations.
#
# How the proxies are set up alike: nginx `proxy_http_version 1.1`, `Connection ""`, an upstream
# `keepalive 32`, responses buffered in memory only (`proxy_buffers 16 16k`,
# `proxy_max_temp_file_size 0`: no temporary files), request bodies streamed
# (`proxy_request_buffering off`); ampd's location `proxy_pass` with `[upstream]` keepalive 32
# and `max_body = "2MiB"`. No access logs. ampd adds X-Forwarded-For/-Proto/-Host and
# Forwarded to every request; nginx adds nothing unless configured.
#
# Knobs [defaults]: SERVERS ["ampd nginx"]  ROWS ["get1k get100k post1m"]  DUR [5] seconds per
#   run  REPS [3]  WARM [1] seconds of warm-up per row and proxy  CONNS [50]
#   AMPD_ARCH [reactor]  PROXY_PORT [BASE_PORT + 20]: +0 ampd, +1 nginx, +2 the upstream
#   and those of bench/peers_lib.sh (BASE_PORT, SERVER_CPU, CLIENT_CPU, WWW, RESULTS, PRIO).
# Every wrk run is bounded by `timeout`; only the processes this script started are signalled.
if [ "${1:-}" = -h ] || [ "${1:-}" = --help ]; then
  awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$0"
  exit 0
fi

SERVERS=${SERVERS:-"ampd nginx"}
AMPD_ARCH=${AMPD_ARCH:-reactor}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROWS=${ROWS:-"get1k get100k post1m"}
DUR=${DUR:-5}
REPS=${REPS:-3}
WARM=${WARM:-1}
CONNS=${CONNS:-50}
BASE_PORT=${BASE_PORT:-28581}
PROXY_PORT=${PROXY_PORT:-$((BASE_PORT + 20))}
declare -A PROXY_PORTS=([ampd]=$PROXY_PORT [nginx]=$((PROXY_PORT + 1)) [upstream]=$((PROXY_PORT + 2)))
declare -A ROW_PATH=([get1k]=/f1k.bin [get100k]=/f100k.bin [post1m]=/upload)
declare -A ROW_NAME=([get1k]="GET 1 KiB" [get100k]="GET 100 KiB" [post1m]="POST 1 MiB")
WWW=${WWW:-/tmp/bench/www}

# write_proxy_configs DIR: nginx-upstream.conf, nginx-proxy.conf, ampd-proxy.toml (and the run
# directories nginx writes into).
write_proxy_configs() {
  local dir=$1 upstream=127.0.0.1:${PROXY_PORTS[upstream]}
  source "$HERE/nginx_conf.sh"
  mkdir -p "$dir/upstream/nginx" "$dir/nginx-proxy/nginx"
  chown -R www-data:www-data "$dir/upstream" "$dir/nginx-proxy" 2>/dev/null || true
  # /upload reads the whole body before it answers (an answer before the body ends would make
  # either proxy close the client's connection): nginx buffers it in memory, then asks itself
  # for /ok without it.
  nginx_conf "$dir/upstream" "${PROXY_PORTS[upstream]}" "$WWW" \
    "access_log off; upstream self { server $upstream; keepalive 8; }" \
    'location = /upload { client_max_body_size 2m; client_body_buffer_size 2m;
        proxy_pass http://self/ok; proxy_pass_request_body off; proxy_set_header Content-Length "";
        proxy_http_version 1.1; proxy_set_header Connection ""; }
      location = /ok { return 200 "ok\n"; }' > "$dir/nginx-upstream.conf"
  nginx_conf "$dir/nginx-proxy" "${PROXY_PORTS[nginx]}" "$WWW" \
    "access_log off; upstream app { server $upstream; keepalive 32; }" \
    'location / { proxy_pass http://app; proxy_http_version 1.1; proxy_set_header Connection "";
        proxy_buffers 16 16k; proxy_max_temp_file_size 0; proxy_request_buffering off;
        client_max_body_size 2m; }' > "$dir/nginx-proxy.conf"
  cat > "$dir/ampd-proxy.toml" <<TOML
# bench/proxy.sh: ampd as a reverse proxy, one loop, keep-alive to the upstream.
listen = "127.0.0.1:${PROXY_PORTS[ampd]}"
arch = "$AMPD_ARCH"
threads = 1

[upstream.app]
servers = ["$upstream"]
keepalive = 32

[[site]]
root = "$WWW"

  [[site.location]]
  path = "/"
  proxy_pass = "http://app"
  max_body = "2MiB"
TOML
}

if [ "${1:-}" = --configs ]; then
  [ -n "${2:-}" ] || { echo "usage: $0 --configs DIR" >&2; exit 2; }
  write_proxy_configs "$2"
  exit 0
fi

source "$HERE/peers_lib.sh"
RUN=/tmp/ampd-bench-proxy/run
HZ=$(getconf CLK_TCK)
declare -A PROC=()

command -v wrk >/dev/null || die "wrk is not installed: run bench/setup.sh"
command -v nginx >/dev/null || die "nginx is not installed: run bench/setup.sh"
[ -f "$WWW/f100k.bin" ] || die "no $WWW/f100k.bin: run bench/setup.sh"

# start NAME CPU COMMAND...: pinned; waits (bounded) for its port.
start() {
  local name=$1 cpu=$2 port=${PROXY_PORTS[$1]} _; shift 2
  port_busy "$port" && die "port $port is in use (set BASE_PORT or PROXY_PORT)"
  taskset -c "$cpu" "$@" > "$RUN/$name.out" 2>&1 &
  PROC[$name]=$!
  for _ in $(seq 1 100); do
    kill -0 "${PROC[$name]}" 2>/dev/null || { tail -n 5 "$RUN/$name.out" >&2; die "$name exited at start"; }
    port_busy "$port" && { log "started $name (pid ${PROC[$name]}) on 127.0.0.1:$port, CPU $cpu"; return; }
    sleep 0.1
  done
  die "$name did not open port $port"
}


# Each proxy must answer every row correctly through the upstream, or the run stops.
preflight() {
  local name=$1 url=http://127.0.0.1:${PROXY_PORTS[$1]} got
  got=$(curl -s -o /dev/null -m 5 -w '%{http_code} %{size_download}' "$url/f1k.bin")
  [ "$got" = "200 1024" ] || die "$name: /f1k.bin answered '$got' (want 200 1024)"
  got=$(curl -s -o /dev/null -m 5 -w '%{http_code} %{size_download}' "$url/f100k.bin")
  [ "$got" = "200 102400" ] || die "$name: /f100k.bin answered '$got' (want 200 102400)"
  got=$(head -c 1048576 /dev/zero | curl -s -m 5 -H 'Expect:' --data-binary @- "$url/upload")
  [ "$got" = ok ] || die "$name: POST /upload answered '$got' (want ok)"
}

# run_once ROW NAME REP SECONDS [OUT]: one wrk run; appends a line to runs.csv unless OUT is given.
run_once() {
  local row=$1 name=$2 rep=$3 seconds=$4 out=${5:-$RESULTS/raw/$1-$2-$3.txt} before after script
  script=$REPO/bench/wrk/result.lua
  [ "$row" = post1m ] && script=$REPO/bench/wrk/post.lua
  before=$(cpu_ticks "${PROC[$name]}")
  timeout -k 2 $((seconds + 20)) taskset -c "$CLIENT_CPU" wrk -t1 -c"$CONNS" -d"${seconds}s" \
    --timeout 5s -s "$script" "http://127.0.0.1:${PROXY_PORTS[$name]}${ROW_PATH[$row]}" > "$out" 2>&1 || true
  after=$(cpu_ticks "${PROC[$name]}")
  [ -n "${5:-}" ] && return
  awk -v row="$row" -v name="$name" -v rep="$rep" -v ticks=$((after - before)) -v hz="$HZ" '
    /^RESULT / { for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }; found = 1 }
    END {
      if (!found || v["requests"] == 0) { printf "%s,%s,%s,0,0,-1\n", row, name, rep; exit }
      printf "%s,%s,%s,%.0f,%.2f,%d\n", row, name, rep, v["requests"] / (v["duration_us"] / 1e6),
        1e6 * ticks / hz / v["requests"], v["errors"]
    }' "$out" >> "$RESULTS/runs.csv"
  tail -n 1 "$RESULTS/runs.csv" | awk -F, '{printf "  %-7s %-5s run %s: %8s req/s %8s µs CPU/req  errors %s\n", $1, $2, $3, $4, $5, $6}' >&2
}

median_of() { # ROW NAME COLUMN
  awk -F, -v row="$1" -v name="$2" -v column="$3" '$1 == row && $2 == name {print $column}' \
    "$RESULTS/runs.csv" | sort -g |
    awk '{v[NR] = $1} END {if (NR == 0) print 0; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}

mkdir -p "$RUN" "$RESULTS/raw"
if [[ " $SERVERS " == *" ampd "* ]] && [ ! -x "$AMPD" ]; then
  log "building ampd (cargo build --release)"
  (cd "$REPO" && cargo build --release -p ampd >&2)
fi
write_proxy_configs "$RUN"
cp "$RUN"/nginx-upstream.conf "$RUN"/nginx-proxy.conf "$RUN"/ampd-proxy.toml "$RESULTS/"
trap stop_all_procs EXIT
trap 'exit 130' INT TERM
echo "row,server,rep,rps,cpu_us_per_request,errors" > "$RESULTS/runs.csv"

start upstream "$CLIENT_CPU" nginx -c "$RUN/nginx-upstream.conf" -e "$RUN/upstream/error.log"
for name in $SERVERS; do
  case $name in
    ampd) start ampd "$SERVER_CPU" "$AMPD" run -c "$RUN/ampd-proxy.toml" ;;
    nginx) start nginx "$SERVER_CPU" nginx -c "$RUN/nginx-proxy.conf" -e "$RUN/nginx-proxy/error.log" ;;
    *) die "unknown proxy $name (ampd, nginx)" ;;
  esac
  preflight "$name"
done

for row in $ROWS; do
  [ -n "${ROW_PATH[$row]:-}" ] || die "unknown row $row"
  log "row $row (${ROW_NAME[$row]}):$SERVERS"
  if [ "$WARM" -gt 0 ]; then
    for name in $SERVERS; do run_once "$row" "$name" warm "$WARM" "$RESULTS/raw/warm-$row-$name.txt"; done
  fi
  for rep in $(seq 1 "$REPS"); do
    for name in $SERVERS; do run_once "$row" "$name" "$rep" "$DUR"; done
  done
done

# results.json and summary.md from the medians.
{
  echo "{"
  echo "  \"date\": \"$(date -u '+%Y-%m-%dT%H:%M:%SZ')\", \"kernel\": \"$(uname -sr)\","
  echo "  \"ampd\": \"$("$AMPD" --version 2>/dev/null | head -n1) --arch $AMPD_ARCH, 1 loop\","
  echo "  \"nginx\": \"$(nginx -v 2>&1 | sed 's/.*: //'), worker_processes 1\","
  echo "  \"proxy_cpu\": $SERVER_CPU, \"client_and_upstream_cpu\": $CLIENT_CPU,"
  echo "  \"connections\": $CONNS, \"seconds\": $DUR, \"repetitions\": $REPS,"
  echo "  \"rows\": ["
  first=1
  for row in $ROWS; do
    [ "$first" = 1 ] || echo ","
    first=0
    printf '    {"row": "%s", "name": "%s"' "$row" "${ROW_NAME[$row]}"
    for name in $SERVERS; do
      printf ', "%s": {"requests_per_second": %s, "cpu_us_per_request": %s, "errors": %s}' "$name" \
        "$(median_of "$row" "$name" 4)" "$(median_of "$row" "$name" 5)" \
        "$(awk -F, -v r="$row" -v s="$name" '$1 == r && $2 == s {e += $6} END {print e + 0}' "$RESULTS/runs.csv")"
    done
    printf '}'
  done
  echo
  echo "  ]"
  echo "}"
} > "$RESULTS/results.json"

{
  echo "# bench/proxy.sh, $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo
  echo "$(uname -sr), $(nproc) CPUs; proxies on CPU $SERVER_CPU, the upstream (nginx) and wrk -t1 -c$CONNS on"
  echo "CPU $CLIENT_CPU; medians of $REPS interleaved runs of ${DUR}s. CPU: the proxy's user + system time per request."
  echo
  if [[ " $SERVERS " == *" ampd "* && " $SERVERS " == *" nginx "* ]]; then
    echo "| row | ampd req/s | nginx req/s | ratio | ampd µs CPU/req | nginx µs CPU/req | ratio |"
    echo "|---|---:|---:|---:|---:|---:|---:|"
    for row in $ROWS; do
      awk -v name="${ROW_NAME[$row]}" -v ar="$(median_of "$row" ampd 4)" -v nr="$(median_of "$row" nginx 4)" \
          -v ac="$(median_of "$row" ampd 5)" -v nc="$(median_of "$row" nginx 5)" 'BEGIN {
        printf "| %s | %.0f | %.0f | %.2f | %.1f | %.1f | %.2f |\n", name, ar, nr, (nr > 0) ? ar / nr : 0,
          ac, nc, (nc > 0) ? ac / nc : 0 }'
    done
  else
    echo "| row | proxy | req/s | µs CPU/req |"
    echo "|---|---|---:|---:|"
    for row in $ROWS; do
      for name in $SERVERS; do
        echo "| ${ROW_NAME[$row]} | $name | $(median_of "$row" "$name" 4) | $(median_of "$row" "$name" 5) |"
      done
    done
  fi
  errors=$(awk -F, 'NR > 1 && $6 != 0 {n++} END {print n + 0}' "$RESULTS/runs.csv")
  if [ "$errors" != 0 ]; then echo; echo "$errors runs had errors (runs.csv, raw/)."; fi
} > "$RESULTS/summary.md"
cat "$RESULTS/summary.md"
log "results: $RESULTS (summary.md, results.json, runs.csv, raw/)"
