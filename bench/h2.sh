#!/usr/bin/env bash
# h2.sh - ampd beside nginx and h2o over HTTP/2, side by side in one run: the same certificate
# (ECDSA P-256, made here with openssl), the same suite (TLS 1.3 TLS_AES_128_GCM_SHA256, X25519),
# each server's HTTP/2 settings at their defaults (ampd's [http2] section absent).
#
#   sudo bash bench/setup.sh          # once: nginx, h2o, nghttp2-client (h2load, nghttp), /tmp/bench/www
#   cargo build --release             # ampd
#   bash bench/h2.sh                  # about 4 minutes with the defaults
#   bash bench/h2.sh --configs DIR    # only write the certificate, the configurations and the page
#
# Rows (ROWS, default all):
#   1k      GET /f1k.bin over TLS (ALPN h2): h2load -c $H2_CONNS -m $H2_STREAMS (10 connections,
#           10 streams in flight on each), for DUR seconds
#   page    a page of 120 resources ($WWW/h2page: index.html linking 40 style sheets, 40 scripts
#           and 40 images of 1-20 KiB): `nghttp -ans`, which fetches the page and then every
#           resource it links over the same connection, PAGE_LOADS times; the time to load is
#           nghttp's last responseEnd: from the end of the TCP and TLS handshakes to the last
#           byte of the last response
#   100k    GET /f100k.bin over TLS, as 1k
#   1m      GET /f1m.bin over TLS, as 1k
#   h2c-1k  GET /f1k.bin in cleartext HTTP/2 with prior knowledge (ampd `ADDR h2c`, nginx
#           `listen PORT http2`, h2o's plain listener), as 1k
#
# The servers: ampd (--arch $AMPD_ARCH with one loop), nginx (worker_processes 1, `listen ... ssl
# http2`) and h2o (num-threads: 1), each one process pinned to CPU $SERVER_CPU with a TLS and a
# cleartext HTTP/2 listener, no access log; the clients (h2load -t1, nghttp) pinned to CPU
# $CLIENT_CPU. Each server must answer every file over HTTP/2 with 200 and its exact size; a
# server that does not speak HTTP/2 on a listener (checked with curl --http2 and
# --http2-prior-knowledge) is left out of that listener's rows, and the summary says so. Runs
# alternate ampd, nginx, h2o, ampd... so that a change in the machine's load falls on all alike.
# For each row and server, the medians of REPS runs of: requests/s, MB/s (h2load's bytes on the
# wire: frames, heads and bodies, decrypted), the server's CPU time per request (user + system of
# its processes, /proc/PID/stat), the client's CPU use (‡ at 90 % or more: the client is the
# limit, and CPU per request tells the servers apart) and h2load's mean request time; for the
# page, the median time to load and the server's CPU per page load (/proc/PID/task/*/schedstat,
# finer than the clock ticks of /proc/PID/stat for a few ms). Written to $RESULTS:
# summary.md (the table), results.json (settings, every run and the medians), runs.csv, the raw
# client output, the configurations and what each server negotiated (negotiated.txt).
# PROFILE="ampd": afterwards, one more run of row PROFILE_ROW per server listed under `perf record
# -g` (not measured), its report in perf-SERVER.txt.
#
# Knobs [defaults]: ROWS ["1k page 100k 1m h2c-1k"]  SERVERS ["ampd nginx h2o"]  DUR [5] seconds
#   per h2load run  REPS [3]  WARM [1] seconds of warm-up per row and server  H2_CONNS [10]
#   H2_STREAMS [10]  PAGE_LOADS [15] page loads per run  AMPD_ARCH [reactor]  PROFILE []
#   PROFILE_ROW [1k] (an h2load row)
#   H2_PORT [BASE_PORT + 50]: +0 ampd, +1 nginx, +2 h2o over TLS; +3, +4, +5 their h2c listeners
#   and those of bench/peers_lib.sh (BASE_PORT, SERVER_CPU, CLIENT_CPU, WWW, RESULTS, PRIO).
# Every client run is bounded by `timeout`; only the processes this script started are signalled.
if [ "${1:-}" = -h ] || [ "${1:-}" = --help ]; then
  awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$0"
  exit 0
fi

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SERVERS=${SERVERS:-"ampd nginx h2o"}
AMPD_ARCH=${AMPD_ARCH:-reactor}
ROWS=${ROWS:-"1k page 100k 1m h2c-1k"}
DUR=${DUR:-5}
REPS=${REPS:-3}
WARM=${WARM:-1}
H2_CONNS=${H2_CONNS:-10}
H2_STREAMS=${H2_STREAMS:-10}
PAGE_LOADS=${PAGE_LOADS:-15}
PAGE_RESOURCES=120
PROFILE=${PROFILE:-}
PROFILE_ROW=${PROFILE_ROW:-1k}
BASE_PORT=${BASE_PORT:-28581}
H2_PORT=${H2_PORT:-$((BASE_PORT + 50))}
WWW=${WWW:-/tmp/bench/www}
SUITE=TLS_AES_128_GCM_SHA256
declare -A TLS_PORT=([ampd]=$H2_PORT [nginx]=$((H2_PORT + 1)) [h2o]=$((H2_PORT + 2)))
declare -A H2C_PORT=([ampd]=$((H2_PORT + 3)) [nginx]=$((H2_PORT + 4)) [h2o]=$((H2_PORT + 5)))
H2LOAD="h2load -c$H2_CONNS -m$H2_STREAMS"
declare -A ROW_NAME=([1k]="1 KiB, $H2LOAD" [page]="page of $PAGE_RESOURCES resources, nghttp -ans"
  [100k]="100 KiB, $H2LOAD" [1m]="1 MiB, $H2LOAD" [h2c-1k]="1 KiB, h2c (cleartext), $H2LOAD")
declare -A ROW_PATH=([1k]=/f1k.bin [100k]=/f100k.bin [1m]=/f1m.bin [h2c-1k]=/f1k.bin
  [page]=/h2page/index.html)
declare -A PATH_BYTES=([/f1k.bin]=1024 [/f100k.bin]=102400 [/f1m.bin]=1048576)
# What issue 19 asks of each row against the best peer: requests/s at least its and CPU per
# request at most its (rps+cpu), requests/s at least its (rps), a time to load at most its
# (page); none for h2c.
declare -A ROW_TARGET=([1k]=rps+cpu [100k]=rps [1m]=rps [page]=page [h2c-1k]=none)

row_listener() { case $1 in h2c-*) echo h2c ;; *) echo tls ;; esac; }
row_url() {
  if [ "$(row_listener "$1")" = h2c ]; then echo "http://127.0.0.1:${H2C_PORT[$2]}${ROW_PATH[$1]}"
  else echo "https://127.0.0.1:${TLS_PORT[$2]}${ROW_PATH[$1]}"; fi
}

# make_page DIR: index.html linking PAGE_RESOURCES resources, a third each style sheets, scripts
# and images, of 1-20 KiB (random bytes: no server compresses them); kept if already complete.
make_page() {
  local dir=$1 i bytes name
  if [ -f "$dir/index.html" ] && [ "$(find "$dir" -type f | wc -l)" = $((PAGE_RESOURCES + 1)) ]; then
    return 0
  fi
  rm -rf "$dir.part"
  mkdir -p "$dir.part/css" "$dir.part/js" "$dir.part/img"
  {
    echo '<!DOCTYPE html>'
    echo '<html lang="en"><head><meta charset="utf-8"><title>bench/h2.sh: a page of '"$PAGE_RESOURCES"' resources</title>'
    for ((i = 0; i < PAGE_RESOURCES; i++)); do
      # 1 KiB + (i * 2659 mod 19457) bytes: spread over 1-20 KiB, the same on every machine.
      bytes=$((1024 + i * 2659 % 19457))
      case $((i % 3)) in
        0) printf -v name 'css/s%03d.css' "$i"; echo "<link rel=\"stylesheet\" href=\"$name\">" ;;
        1) printf -v name 'js/s%03d.js' "$i"; echo "<script src=\"$name\"></script>" ;;
        2) printf -v name 'img/i%03d.png' "$i"; echo "<img src=\"$name\" alt=\"\">" ;;
      esac
      head -c "$bytes" /dev/urandom > "$dir.part/$name"
    done
    echo '</head><body><p>bench/h2.sh</p></body></html>'
  } > "$dir.part/index.html"
  chmod -R a+rX "$dir.part"
  rm -rf "$dir"
  mv "$dir.part" "$dir"
}

# write_h2_configs DIR: the certificate (ecdsa.pem/.key), OpenSSL's settings for h2o and the
# clients (openssl.cnf: only the suite and group under test) and each server's configuration.
write_h2_configs() {
  local dir=$1
  source "$HERE/nginx_conf.sh"
  mkdir -p "$dir/nginx/nginx" "$dir/h2o"
  chown -R www-data:www-data "$dir/nginx" "$dir/h2o" 2>/dev/null || true
  [ -f "$dir/ecdsa.pem" ] || openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -days 30 -subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 \
    -keyout "$dir/ecdsa.key" -out "$dir/ecdsa.pem" 2>/dev/null
  chmod 644 "$dir/ecdsa.key"
  # h2o 2.2.5 has no setting for TLS 1.3 suites: OpenSSL's system defaults (OPENSSL_CONF) give
  # it the one under test, as they give the clients.
  cat > "$dir/openssl.cnf" <<CNF
openssl_conf = openssl_init
[openssl_init]
ssl_conf = ssl_section
[ssl_section]
system_default = defaults
[defaults]
MinProtocol = TLSv1.3
Ciphersuites = $SUITE
Groups = X25519
CNF
  nginx_conf "$dir/nginx" "${TLS_PORT[nginx]}" "$WWW" "access_log off;
    ssl_protocols TLSv1.3;
    ssl_conf_command Ciphersuites $SUITE;
    ssl_ecdh_curve X25519;
    ssl_certificate $dir/ecdsa.pem; ssl_certificate_key $dir/ecdsa.key;
    server { listen 127.0.0.1:${H2C_PORT[nginx]} backlog=4096 http2; root $WWW; }" \
    "" "ssl http2" > "$dir/nginx.conf"
  cat > "$dir/h2o.conf" <<EOF
# bench/h2.sh: h2o, one thread, no access log; a TLS and a cleartext (h2c) listener.
user: www-data
pid-file: $dir/h2o/h2o.pid
error-log: $dir/h2o/h2o.err
num-threads: 1
max-connections: 16384
listen:
  host: 127.0.0.1
  port: ${TLS_PORT[h2o]}
  ssl:
    certificate-file: $dir/ecdsa.pem
    key-file: $dir/ecdsa.key
    minimum-version: TLSv1.2
    ocsp-update-interval: 0
listen:
  host: 127.0.0.1
  port: ${H2C_PORT[h2o]}
hosts:
  "default":
    paths:
      /:
        file.dir: $WWW
EOF
  cat > "$dir/ampd.toml" <<TOML
# bench/h2.sh: ampd, one loop, a TLS listener (ALPN h2) and an h2c one; [http2] at its defaults.
listen = ["127.0.0.1:${TLS_PORT[ampd]} tls", "127.0.0.1:${H2C_PORT[ampd]} h2c"]
arch = "$AMPD_ARCH"
threads = 1

[tls]
ciphers = ["TLS13_AES_128_GCM_SHA256"]

[[site]]
root = "$WWW"
certificate = "$dir/ecdsa.pem"
certificate_key = "$dir/ecdsa.key"
TOML
}

if [ "${1:-}" = --configs ]; then
  [ -n "${2:-}" ] || { echo "usage: $0 --configs DIR" >&2; exit 2; }
  write_h2_configs "$2"
  make_page "$WWW/h2page"
  exit 0
fi

source "$HERE/peers_lib.sh"
RUN=/tmp/ampd-bench-h2/run
HZ=$(getconf CLK_TCK)
declare -A PROC=()
declare -A SPEAKS=()   # SERVER-tls / SERVER-h2c: 1 when it answered HTTP/2 there
SKIPPED=""

for tool in h2load nghttp curl openssl; do
  command -v "$tool" >/dev/null || die "$tool is not installed: run bench/setup.sh"
done
[ -f "$WWW/f1m.bin" ] || die "no $WWW/f1m.bin: run bench/setup.sh"
for row in $ROWS; do [ -n "${ROW_NAME[$row]:-}" ] || die "unknown row $row (${!ROW_NAME[*]})"; done
for server in $SERVERS; do [ -n "${TLS_PORT[$server]:-}" ] || die "unknown server $server (ampd nginx h2o)"; done
case $PROFILE_ROW in page | "") die "PROFILE_ROW must be an h2load row" ;; esac
[ -n "${ROW_NAME[$PROFILE_ROW]:-}" ] || die "unknown PROFILE_ROW $PROFILE_ROW"

# row_servers ROW: the servers that take part in ROW (started and speaking HTTP/2 there).
row_servers() {
  local server list=""
  for server in $SERVERS; do
    [ "${SPEAKS[$server-$(row_listener "$1")]:-0}" = 1 ] && list="$list $server"
  done
  echo "$list"
}

# check_listener SERVER LISTENER: does SERVER answer HTTP/2 there, every file with 200 and its
# exact size? If not (curl fell back to HTTP/1.1, or failed), SERVER is left out of that
# listener's rows, and the log and the summary say why.
check_listener() {
  local server=$1 listener=$2 path got want
  for path in /f1k.bin /f100k.bin /f1m.bin; do
    if [ "$listener" = tls ]; then
      got=$(curl -sk --http2 -o /dev/null -m 5 -w '%{http_code} %{size_download} %{http_version}' \
            "https://127.0.0.1:${TLS_PORT[$server]}$path" || true)
    else
      got=$(curl -s --http2-prior-knowledge -o /dev/null -m 5 \
            -w '%{http_code} %{size_download} %{http_version}' \
            "http://127.0.0.1:${H2C_PORT[$server]}$path" || true)
    fi
    want="200 ${PATH_BYTES[$path]} 2"
    if [ "$got" != "$want" ]; then
      log "$server does not serve HTTP/2 on its $listener listener ($path: '$got', want '$want'): left out of its rows"
      SKIPPED="$SKIPPED $server-$listener"
      return 1
    fi
  done
  SPEAKS[$server-$listener]=1
}

# negotiated SERVER: what the TLS listener negotiated with the clients' OpenSSL settings.
negotiated() {
  local server=$1
  echo "$server:"
  OPENSSL_CONF=$RUN/openssl.cnf openssl s_client -connect "127.0.0.1:${TLS_PORT[$server]}" -alpn h2 \
      < /dev/null 2>&1 |
    grep -E '^New, |Peer signature type|Server Temp Key|ALPN protocol' | sed 's/^/  /'
}

# The page must come whole: index.html and every resource it links, each 200.
check_page() {
  local server=$1 out=$RUN/page-check-$1.txt count
  OPENSSL_CONF=$RUN/openssl.cnf timeout 20 nghttp -ans "$(row_url page "$server")" > "$out" 2>&1 || true
  count=$(awk '$5 == 200' "$out" | wc -l)
  [ "$count" = $((PAGE_RESOURCES + 1)) ] ||
    die "$server: nghttp -ans loaded $count of $((PAGE_RESOURCES + 1)) responses with 200 ($out)"
}

# client_time OUT COMMAND...: runs COMMAND pinned to the client's CPU, bounded; its output goes
# to OUT, its wall, user and system seconds to OUT.time.
client_time() {
  local out=$1; shift
  { TIMEFORMAT='%R %U %S'; time timeout -k 2 $((DUR + 20)) taskset -c "$CLIENT_CPU" \
      env OPENSSL_CONF="$RUN/openssl.cnf" "$@" > "$out" 2>&1; } 2> "$out.time" || true
}

h2load_run() { # ROW SERVER SECONDS OUT
  client_time "$4" h2load -t1 -c "$H2_CONNS" -m "$H2_STREAMS" -D "$3" \
    --tls13-ciphers="$SUITE" "$(row_url "$1" "$2")"
}

# The columns of runs.csv; the h2load rows leave page_ms/page_cpu_ms empty, the page row leaves
# rps/MBps/cpu_us_per_request/mean_ms empty.
CSV_HEADER=row,server,rep,rps,MBps,cpu_us_per_request,client_cpu_pct,mean_ms,errors,page_ms,page_cpu_ms

# run_h2load ROW SERVER REP: one measured h2load run into runs.csv.
run_h2load() {
  local row=$1 server=$2 rep=$3 out before after protocol
  out=$RESULTS/raw/$row-$server-$rep.txt
  before=$(cpu_ticks "${PROC[$server]}")
  h2load_run "$row" "$server" "$DUR" "$out"
  after=$(cpu_ticks "${PROC[$server]}")
  # h2load prints what it negotiated; a run that is not HTTP/2 with the suite under test is
  # not this benchmark.
  protocol=$(awk '/^Application protocol:/ {print $3}' "$out")
  [ "$protocol" = h2 ] || [ "$protocol" = h2c ] || die "$row $server: h2load negotiated '$protocol' ($out)"
  if [ "$(row_listener "$row")" = tls ]; then
    grep -q "^Cipher: $SUITE" "$out" || die "$row $server: not $SUITE ($out)"
  fi
  awk -v row="$row" -v server="$server" -v rep="$rep" -v ticks=$((after - before)) -v hz="$HZ" \
      -v times="$(cat "$out.time")" '
    function ms(v) { if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0; if (v ~ /s$/) return v * 1000; return v }
    /^finished in / { seconds = $3 + 0 }
    /^requests: / { ok = $8; bad = $10 + $12 + $14 }
    /^traffic: / { bytes = $3; gsub(/[()]/, "", bytes) }
    /^time for request:/ { mean = ms($6) }
    END {
      if (seconds == 0 || ok == 0) { printf "%s,%s,%s,0,0,0,0,0,-1,,\n", row, server, rep; exit }
      split(times, t, " ")
      client = (t[1] > 0) ? 100 * (t[2] + t[3]) / t[1] : 0
      printf "%s,%s,%s,%.0f,%.1f,%.2f,%.0f,%.3f,%d,,\n", row, server, rep, ok / seconds,
        bytes / seconds / 1e6, 1e6 * ticks / hz / ok, client, mean, bad
    }' "$out" >> "$RESULTS/runs.csv"
  tail -n 1 "$RESULTS/runs.csv" | awk -F, '{printf "  %-7s %-5s run %s: %8s req/s %7s MB/s %8s µs CPU/req  client %s%%  mean %s ms  errors %s\n", $1, $2, $3, $4, $5, $6, $7, $8, $9}' >&2
}

# page_load SERVER OUT: one page load; prints its time to load in ms (the last response's end,
# which nghttp counts from the end of the TCP and TLS handshakes) and the number of 200
# responses.
page_load() {
  client_time "$2" nghttp -ans "$(row_url page "$1")"
  awk '
    function ms(v) { sub(/^\+/, "", v); if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0; if (v ~ /s$/) return v * 1000; return v }
    /^ *[0-9]+ +\+/ { end = ms($2); if (end > last) last = end; if ($5 == 200) ok++ }
    END { printf "%.3f %d\n", last, ok }' "$2"
}

# cpu_ns PID: nanoseconds on CPU of every thread of the server's processes
# (/proc/PID/task/TID/schedstat): a page load costs the server a few ms, below the 10 ms of
# /proc/PID/stat's clock ticks.
cpu_ns() {
  local pid
  for pid in $(tree "$1"); do cat /proc/"$pid"/task/*/schedstat 2>/dev/null || true; done |
    awk '{total += $1} END {printf "%.0f\n", total}'
}

# run_page SERVER REP: PAGE_LOADS page loads; the median time to load and the server CPU per load
# into runs.csv.
run_page() {
  local server=$1 rep=$2 out before after i load wall loads="" errors=0 busy=0 total=0 result
  out=$RESULTS/raw/page-$server-$rep
  mkdir -p "$out"
  before=$(cpu_ns "${PROC[$server]}")
  for i in $(seq 1 "$PAGE_LOADS"); do
    result=$(page_load "$server" "$out/$i.txt")
    load=${result% *}
    [ "${result#* }" = $((PAGE_RESOURCES + 1)) ] || errors=$((errors + 1))
    read -r wall user system < "$out/$i.txt.time"
    busy=$(awk -v a="$busy" -v u="$user" -v s="$system" 'BEGIN {print a + u + s}')
    total=$(awk -v a="$total" -v w="$wall" 'BEGIN {print a + w}')
    loads="$loads $load"
  done
  after=$(cpu_ns "${PROC[$server]}")
  printf '%s\n' $loads | sort -g | awk -v row=page -v server="$server" -v rep="$rep" \
      -v ns=$((after - before)) -v n="$PAGE_LOADS" -v errors="$errors" \
      -v busy="$busy" -v total="$total" '
    { v[NR] = $1 }
    END {
      median = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
      printf "%s,%s,%s,,,,%.0f,,%d,%.3f,%.3f\n", row, server, rep, (total > 0) ? 100 * busy / total : 0,
        errors, median, ns / 1e6 / n
    }' >> "$RESULTS/runs.csv"
  tail -n 1 "$RESULTS/runs.csv" | awk -F, '{printf "  %-7s %-5s run %s: %8s ms to load (median of '"$PAGE_LOADS"')  %s ms CPU/load  client %s%%  errors %s\n", $1, $2, $3, $10, $11, $7, $9}' >&2
}

# profile SERVER: one more PROFILE_ROW run under `perf record -g` (perf_profile): perf-SERVER.txt
# and perf-SERVER.data.
profile() {
  log "profiling $1 (row $PROFILE_ROW, ${DUR}s, perf record -g)"
  perf_profile "${PROC[$1]}" "$RESULTS/perf-$1" \
    h2load_run "$PROFILE_ROW" "$1" "$DUR" "$RESULTS/raw/profile-$1.txt"
}

mkdir -p "$RUN" "$RESULTS/raw"
if [[ " $SERVERS " == *" ampd "* ]] && [ ! -x "$AMPD" ]; then
  log "building ampd (cargo build --release)"
  (cd "$REPO" && cargo build --release -p ampd >&2)
fi
write_h2_configs "$RUN"
make_page "$WWW/h2page"
cp "$RUN"/*.conf "$RUN"/*.toml "$RUN/openssl.cnf" "$RESULTS/"
trap stop_all_procs EXIT
trap 'exit 130' INT TERM
echo "$CSV_HEADER" > "$RESULTS/runs.csv"
: > "$RESULTS/negotiated.txt"

for server in $SERVERS; do
  case $server in
    ampd) start_proc ampd "$SERVER_CPU" "${TLS_PORT[ampd]}" "$AMPD" run "$RUN/ampd.toml" ;;
    nginx) start_proc nginx "$SERVER_CPU" "${TLS_PORT[nginx]}" nginx -c "$RUN/nginx.conf" -e "$RUN/nginx/error.log" ;;
    h2o) start_proc h2o "$SERVER_CPU" "${TLS_PORT[h2o]}" env OPENSSL_CONF="$RUN/openssl.cnf" h2o -c "$RUN/h2o.conf" ;;
  esac
  if check_listener "$server" tls; then
    negotiated "$server" >> "$RESULTS/negotiated.txt"
    [[ " $ROWS " == *" page "* ]] && check_page "$server"
  fi
  if port_busy "${H2C_PORT[$server]}"; then check_listener "$server" h2c || true
  else log "$server has no h2c listener on ${H2C_PORT[$server]}: left out of its rows"; SKIPPED="$SKIPPED $server-h2c"; fi
done

# One benchmark at a time on this machine (bench/peers_lib.sh's lock).
exec 9> /tmp/ampd-bench.lock
flock -n 9 || { log "waiting for another benchmark (/tmp/ampd-bench.lock)"; flock 9; }

for row in $ROWS; do
  servers=$(row_servers "$row")
  if [ -z "$servers" ]; then log "row $row: no server speaks HTTP/2 there, skipped"; continue; fi
  log "row $row (${ROW_NAME[$row]}):$servers"
  for server in $servers; do
    if [ "$row" = page ]; then
      for i in 1 2 3; do page_load "$server" "$RESULTS/raw/warm-page-$server-$i.txt" > /dev/null; done
    elif [ "$WARM" -gt 0 ]; then
      h2load_run "$row" "$server" "$WARM" "$RESULTS/raw/warm-$row-$server.txt"
    fi
  done
  for rep in $(seq 1 "$REPS"); do
    for server in $servers; do
      if [ "$row" = page ]; then run_page "$server" "$rep"; else run_h2load "$row" "$server" "$rep"; fi
    done
  done
done

for server in $PROFILE; do
  [ "${SPEAKS[$server-$(row_listener "$PROFILE_ROW")]:-0}" = 1 ] ||
    { log "PROFILE: $server does not serve row $PROFILE_ROW"; continue; }
  command -v perf >/dev/null || { log "PROFILE: perf is not installed"; break; }
  profile "$server"
done
flock -u 9

# median ROW SERVER COLUMN: the median of runs.csv's COLUMN for ROW and SERVER.
median() { median_csv "$RESULTS/runs.csv" "$3" "$1" "$2"; }

# The best peer of a row (every server but ampd): the highest requests/s, the least CPU per
# request, the shortest time to load.
best_peer() { # ROW COLUMN max|min
  local server value best="" best_value=""
  for server in $(row_servers "$1"); do
    [ "$server" = ampd ] && continue
    value=$(median "$1" "$server" "$2")
    [ -n "$value" ] || continue
    if [ -z "$best_value" ] || awk -v a="$value" -v b="$best_value" -v way="$3" \
        'BEGIN {exit !((way == "max") ? a > b : a < b)}'; then
      best=$server best_value=$value
    fi
  done
  echo "$best $best_value"
}

# verdict ROW: "ratios | target | met" against the best peer of the row, for the table: ampd's
# requests/s over the highest, its CPU per request over the least (page: its time to load over
# the shortest, its CPU per load over the least).
verdict() {
  local row=$1 value_column=4 cpu_column=6 way=max value cpu
  [[ " $(row_servers "$row") " == *" ampd "* ]] || { echo "| | |"; return; }
  [ "$row" = page ] && value_column=10 cpu_column=11 way=min
  read -r _ value <<< "$(best_peer "$row" "$value_column" "$way")"
  read -r _ cpu <<< "$(best_peer "$row" "$cpu_column" min)"
  awk -v av="$(median "$row" ampd "$value_column")" -v ac="$(median "$row" ampd "$cpu_column")" \
      -v bv="$value" -v bc="$cpu" -v target="${ROW_TARGET[$row]}" 'BEGIN {
    if (bv == "" || bv == 0 || bc == "" || bc == 0) { print "| | |"; exit }
    vr = av / bv; cr = ac / bc
    if (target == "page") { ratios = sprintf("%.2f × time, %.2f × CPU", vr, cr); goal = "time ≤ 1.0 ×"; met = vr <= 1.0 }
    else { ratios = sprintf("%.2f × req/s, %.2f × CPU/req", vr, cr)
      if (target == "rps") { goal = "req/s ≥ 1.0 ×"; met = vr >= 1.0 }
      else if (target == "rps+cpu") { goal = "req/s ≥ 1.0 ×, CPU/req ≤ 1.0 ×"; met = vr >= 1.0 && cr <= 1.0 }
      else { goal = "-"; met = -1 } }
    printf "%s | %s | %s |\n", ratios, goal, (met < 0) ? "" : (met ? "yes" : "no")
  }'
}

# cell ROW SERVER: "req/s ‡ / µs CPU/req" (or "ms to load / ms CPU/load") for the table.
cell() {
  local row=$1 server=$2
  [[ " $(row_servers "$row") " == *" $server "* ]] || { echo "-"; return; }
  if [ "$row" = page ]; then
    awk -v t="$(median page "$server" 10)" -v c="$(median page "$server" 11)" \
      'BEGIN {printf "%.1f ms, %.2f ms CPU", t, c}'
  else
    awk -v r="$(median "$row" "$server" 4)" -v c="$(median "$row" "$server" 6)" \
        -v b="$(median "$row" "$server" 7)" \
      'BEGIN {printf "%.0f%s, %.1f µs", r, (b >= 90) ? " ‡" : "", c}'
  fi
}

{
  echo "# bench/h2.sh, $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo
  echo "$(uname -sr), $(nproc) CPUs; servers on CPU $SERVER_CPU, the client on CPU $CLIENT_CPU"
  echo "(h2load -t1 -c$H2_CONNS -m$H2_STREAMS, ${DUR}s per run; nghttp -ans, $PAGE_LOADS page loads per run);"
  echo "medians of $REPS interleaved runs; TLS 1.3 $SUITE, X25519, ECDSA P-256."
  echo "ampd: $("$AMPD" -V 2>/dev/null) at $(cd "$REPO" && git rev-parse --short HEAD) --arch $AMPD_ARCH, 1 loop;"
  echo "nginx: $(nginx -v 2>&1 | sed 's/.*: //'), 1 worker; h2o: $(h2o --version 2>/dev/null | head -n1 | sed 's/h2o version //'), 1 thread; $(openssl version | cut -d' ' -f1-2)."
  echo "h2load rows: requests/s, server µs CPU per request (‡: the client's core was 90 % busy or"
  echo "more). Page: median time to load (handshakes done to the last byte), server CPU per load."
  echo
  printf '| row |'; for server in $SERVERS; do printf ' %s |' "$server"; done; echo ' ampd / best peer | target | met |'
  printf '|---|'; for server in $SERVERS; do printf -- '---:|'; done; echo '---|---|---|'
  for row in $ROWS; do
    printf '| %s |' "${ROW_NAME[$row]}"
    for server in $SERVERS; do printf ' %s |' "$(cell "$row" "$server")"; done
    echo " $(verdict "$row")"
  done
  echo
  echo "MB/s, h2load's mean request time (ms) and the client's CPU use (%):"
  for row in $ROWS; do
    [ "$row" = page ] && continue
    for server in $(row_servers "$row"); do
      echo "  ${ROW_NAME[$row]}, $server: $(median "$row" "$server" 5) MB/s, mean $(median "$row" "$server" 8) ms, client $(median "$row" "$server" 7) %"
    done
  done
  errors=$(awk -F, 'NR > 1 && $9 != 0 {n++} END {print n + 0}' "$RESULTS/runs.csv")
  if [ "$errors" != 0 ]; then echo; echo "$errors runs had errors (runs.csv, raw/)."; fi
  for skipped in $SKIPPED; do
    echo; echo "${skipped%-*} does not serve HTTP/2 on its ${skipped##*-} listener: left out of those rows."
  done
  echo
  echo "What each server negotiated (openssl s_client with the clients' settings):"
  sed 's/^/    /' "$RESULTS/negotiated.txt"
} > "$RESULTS/summary.md"

# results.json: the settings, every run and the medians per row and server.
/usr/bin/python3 - "$RESULTS" "$ROWS" "$SERVERS" <<PY
import csv, json, statistics, sys
results, rows, servers = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
runs = list(csv.DictReader(open(results + "/runs.csv")))
number = lambda v: float(v) if v not in ("", None) else None
for run in runs:
    for key in run:
        if key not in ("row", "server"):
            run[key] = number(run[key])
medians = {}
for row in rows:
    for server in servers:
        mine = [r for r in runs if r["row"] == row and r["server"] == server]
        if not mine:
            continue
        medians.setdefault(row, {})[server] = {
            key: statistics.median(r[key] for r in mine)
            for key in mine[0] if key not in ("row", "server", "rep") and mine[0][key] is not None}
json.dump({
    "script": "bench/h2.sh",
    "settings": {"duration_s": $DUR, "reps": $REPS, "h2load_connections": $H2_CONNS,
                 "h2load_streams": $H2_STREAMS, "page_loads": $PAGE_LOADS,
                 "page_resources": $PAGE_RESOURCES, "suite": "$SUITE", "server_cpu": $SERVER_CPU,
                 "client_cpu": $CLIENT_CPU, "ampd_arch": "$AMPD_ARCH"},
    "skipped": "$SKIPPED".split(),
    "runs": runs, "medians": medians}, open(results + "/results.json", "w"), indent=1)
PY
cat "$RESULTS/summary.md"
log "results: $RESULTS (summary.md, results.json, runs.csv, raw/, negotiated.txt)"
