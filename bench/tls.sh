#!/usr/bin/env bash
# tls.sh - ampd beside nginx over TLS, side by side in one run: the same certificates (ECDSA
# P-256 and RSA 2048, made here with openssl), the same suites (TLS 1.3 AES-128-GCM; TLS 1.2
# ECDHE-ECDSA/RSA-AES128-GCM-SHA256), session tickets and a session cache on both.
#
#   sudo bash bench/setup.sh          # once: nginx, wrk, /tmp/bench/www
#   cargo build --release             # ampd and ampd-bench
#   bash bench/tls.sh                 # about 5 minutes with the defaults
#   bash bench/tls.sh --configs DIR   # only write the certificates and configurations into DIR
#
# Rows (ROWS, default all but wrk-close):
#   ka1k           GET /f1k.bin over TLS keep-alive (wrk -t1)
#   full-ecdsa     a new TLS connection per request, full handshakes, ECDSA P-256 certificate
#   full-rsa       the same with the RSA 2048 certificate
#   resumed-ecdsa  a new TLS connection per request, every handshake resumed (ticket), ECDSA
#   resumed-rsa    the same with the RSA 2048 certificate
#   ka100k, ka1m   GET /f100k.bin, /f1m.bin over TLS keep-alive (wrk -t1)
#   wrk-close      GET /f1k.bin from wrk with `Connection: close` (not in the default rows: wrk
#                  resumes the session of each of its connections, and its OpenSSL 3 client
#                  spends more CPU per connection than either server, so it measures itself)
# The new-connection rows use `ampd-bench handshakes` (rustls threads, GET /f1k.bin with
# `Connection: close`; --resume for the resumed rows), which counts the resumed handshakes so
# that each row is what it says. HS_TLS picks the handshakes' TLS version.
#
# Both servers get one worker pinned to CPU $SERVER_CPU (ampd --arch reactor with one loop, nginx
# worker_processes 1), no access log; the client is pinned to CPU $CLIENT_CPU. One process per
# server and certificate (ampd-ecdsa, ampd-rsa, nginx-ecdsa, nginx-rsa); the keep-alive rows use
# the ECDSA ones. Runs alternate ampd, nginx, ampd, nginx... so that a change in the machine's
# load falls on both alike. For each row and server, the medians of REPS runs of requests/s
# (= handshakes/s in the new-connection rows), MB/s, the server's CPU time per request (user +
# system of its processes, /proc/PID/stat), the client's CPU use (‡ at 90 % or more: the client
# is the limit, and CPU per request is the figure that tells the servers apart), latency p50/p99
# and the share of resumed handshakes. Written to $RESULTS: summary.md, runs.csv, the raw client
# output, the configurations and what each server negotiated (negotiated.txt). wrk runs with
# OPENSSL_CONF=client-openssl.cnf: its OpenSSL offers only the suites and group under test.
#
# Knobs [defaults]: ROWS ["ka1k full-ecdsa full-rsa resumed-ecdsa resumed-rsa ka100k ka1m"]
#   SERVERS ["ampd nginx"]  DUR [5] seconds per run  REPS [3]  WARM [1] seconds of warm-up per
#   row and server  CONNS [50] wrk's connections  HS_CONNS [32] ampd-bench handshakes' threads
#   HS_TLS [1.3] or 1.2  AMPD_ARCH [reactor]  TLS_PORT [BASE_PORT + 40]: +0 ampd-ecdsa,
#   +1 ampd-rsa, +2 nginx-ecdsa, +3 nginx-rsa  and those of bench/peers_lib.sh (BASE_PORT,
#   SERVER_CPU, CLIENT_CPU, WWW, RESULTS, PRIO).
# Every client run is bounded by `timeout`; only the processes this script started are signalled.
if [ "${1:-}" = -h ] || [ "${1:-}" = --help ]; then
  awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$0"
  exit 0
fi

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SERVERS=${SERVERS:-"ampd nginx"}
AMPD_ARCH=${AMPD_ARCH:-reactor}
ROWS=${ROWS:-"ka1k full-ecdsa full-rsa resumed-ecdsa resumed-rsa ka100k ka1m"}
DUR=${DUR:-5}
REPS=${REPS:-3}
WARM=${WARM:-1}
CONNS=${CONNS:-50}
HS_CONNS=${HS_CONNS:-32}
HS_TLS=${HS_TLS:-1.3}
HS_WARMUP=0.5
BASE_PORT=${BASE_PORT:-28581}
TLS_PORT=${TLS_PORT:-$((BASE_PORT + 40))}
WWW=${WWW:-/tmp/bench/www}
declare -A PORTS=([ampd-ecdsa]=$TLS_PORT [ampd-rsa]=$((TLS_PORT + 1))
                  [nginx-ecdsa]=$((TLS_PORT + 2)) [nginx-rsa]=$((TLS_PORT + 3)))
declare -A ROW_NAME=([ka1k]="1 KiB, keep-alive"
  [full-ecdsa]="new connection, full handshake, ECDSA P-256"
  [full-rsa]="new connection, full handshake, RSA 2048"
  [resumed-ecdsa]="new connection, resumed handshake, ECDSA P-256"
  [resumed-rsa]="new connection, resumed handshake, RSA 2048"
  [ka100k]="100 KiB, keep-alive" [ka1m]="1 MiB, keep-alive"
  [wrk-close]="1 KiB, wrk with Connection: close")
declare -A ROW_PATH=([ka1k]=/f1k.bin [ka100k]=/f100k.bin [ka1m]=/f1m.bin [wrk-close]=/f1k.bin
  [full-ecdsa]=/f1k.bin [full-rsa]=/f1k.bin [resumed-ecdsa]=/f1k.bin [resumed-rsa]=/f1k.bin)
declare -A PATH_BYTES=([/f1k.bin]=1024 [/f100k.bin]=102400 [/f1m.bin]=1048576)
# What issue 18 asks of each row: ampd's CPU per request at most nginx's (cpu), or ampd's
# requests/s at least nginx's (rps).
declare -A ROW_TARGET=([ka1k]=cpu [ka100k]=rps [ka1m]=rps [wrk-close]=rps [full-ecdsa]=rps
  [full-rsa]=rps [resumed-ecdsa]=rps [resumed-rsa]=rps)

row_certificate() { case $1 in *-rsa) echo rsa ;; *) echo ecdsa ;; esac; }

# write_tls_configs DIR: the certificates (ecdsa.pem/.key, rsa.pem/.key) and, per server and
# certificate, its configuration.
write_tls_configs() {
  local dir=$1 cert port
  source "$HERE/nginx_conf.sh"
  mkdir -p "$dir"
  [ -f "$dir/ecdsa.pem" ] || openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -days 30 -subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 \
    -keyout "$dir/ecdsa.key" -out "$dir/ecdsa.pem" 2>/dev/null
  [ -f "$dir/rsa.pem" ] || openssl req -x509 -newkey rsa:2048 -nodes \
    -days 30 -subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 \
    -keyout "$dir/rsa.key" -out "$dir/rsa.pem" 2>/dev/null
  # wrk's OpenSSL offers only the suites and group under test, whatever either server prefers.
  cat > "$dir/client-openssl.cnf" <<'CNF'
openssl_conf = openssl_init
[openssl_init]
ssl_conf = ssl_section
[ssl_section]
system_default = client_defaults
[client_defaults]
Ciphersuites = TLS_AES_128_GCM_SHA256
CipherString = ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256
Groups = X25519
CNF
  for cert in ecdsa rsa; do
    port=${PORTS[nginx-$cert]}
    mkdir -p "$dir/nginx-$cert/nginx"
    chown -R www-data:www-data "$dir/nginx-$cert" 2>/dev/null || true
    nginx_conf "$dir/nginx-$cert" "$port" "$WWW" "access_log off;
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_ciphers ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256;
    ssl_conf_command Ciphersuites TLS_AES_128_GCM_SHA256;
    ssl_ecdh_curve X25519:prime256v1;
    ssl_session_tickets on;
    ssl_session_cache shared:SSL:10m;" \
      "ssl_certificate $dir/$cert.pem; ssl_certificate_key $dir/$cert.key;" ssl \
      > "$dir/nginx-$cert.conf"
    cat > "$dir/ampd-$cert.toml" <<TOML
# bench/tls.sh: ampd over TLS, one loop, the $cert certificate.
listen = ["127.0.0.1:${PORTS[ampd-$cert]} tls"]
arch = "$AMPD_ARCH"
threads = 1

[tls]
ciphers = ["TLS13_AES_128_GCM_SHA256", "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
           "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"]
session_tickets = true

[[site]]
root = "$WWW"
certificate = "$dir/$cert.pem"
certificate_key = "$dir/$cert.key"
TOML
  done
}

if [ "${1:-}" = --configs ]; then
  [ -n "${2:-}" ] || { echo "usage: $0 --configs DIR" >&2; exit 2; }
  write_tls_configs "$2"
  exit 0
fi

source "$HERE/peers_lib.sh"
RUN=/tmp/ampd-bench-tls/run
HZ=$(getconf CLK_TCK)
declare -A PROC=()

command -v wrk >/dev/null || die "wrk is not installed: run bench/setup.sh"
command -v nginx >/dev/null || die "nginx is not installed: run bench/setup.sh"
[ -f "$WWW/f1m.bin" ] || die "no $WWW/f1m.bin: run bench/setup.sh"
for row in $ROWS; do [ -n "${ROW_NAME[$row]:-}" ] || die "unknown row $row"; done

# The instances the rows need: SERVER-CERTIFICATE.
INSTANCES=""
for server in $SERVERS; do
  for cert in ecdsa rsa; do
    for row in $ROWS; do
      if [ "$(row_certificate "$row")" = "$cert" ]; then INSTANCES="$INSTANCES $server-$cert"; break; fi
    done
  done
done

# Each instance must answer every row's file over TLS with 200 and its exact size, with the
# suite and group configured; what it negotiated goes to negotiated.txt.
preflight() {
  local instance=$1 port=${PORTS[$1]} row path got
  for row in $ROWS; do
    [ "$(row_certificate "$row")" = "${instance#*-}" ] || continue
    path=${ROW_PATH[$row]}
    got=$(curl -sk -o /dev/null -m 5 -w '%{http_code} %{size_download}' "https://127.0.0.1:$port$path")
    [ "$got" = "200 ${PATH_BYTES[$path]}" ] || die "$instance: $path answered '$got' (want 200 ${PATH_BYTES[$path]})"
  done
  {
    echo "$instance:"
    openssl s_client -connect "127.0.0.1:$port" -brief < /dev/null 2>&1 |
      grep -E 'Protocol version|Ciphersuite|Peer signature type|Server Temp Key|Negotiated TLS1.3 group' | sed 's/^/  /'
    openssl s_client -connect "127.0.0.1:$port" -tls1_2 -brief < /dev/null 2>&1 |
      grep -E 'Protocol version|Ciphersuite' | sed 's/^/  TLS 1.2 /'
    OPENSSL_CONF=$RUN/client-openssl.cnf openssl s_client -connect "127.0.0.1:$port" -brief < /dev/null 2>&1 |
      grep -E 'Ciphersuite|Server Temp Key' | sed 's/^/  as wrk is configured: /'
  } >> "$RESULTS/negotiated.txt"
}

# client ROW INSTANCE SECONDS OUT: one client run; its own user+system seconds go to OUT.time.
client() {
  local row=$1 url=https://127.0.0.1:${PORTS[$2]}${ROW_PATH[$1]} command
  case $row in
    ka*) command=(env OPENSSL_CONF="$RUN/client-openssl.cnf" wrk -t1 -c"$CONNS" -d"$3"s --timeout 5s -s "$REPO/bench/wrk/result.lua" "$url") ;;
    wrk-close) command=(env OPENSSL_CONF="$RUN/client-openssl.cnf" wrk -t1 -c"$CONNS" -d"$3"s --timeout 5s -H 'Connection: close'
                        -s "$REPO/bench/wrk/result.lua" "$url") ;;
    full-*) command=("$BENCH" handshakes --url "$url" --connections "$HS_CONNS" --tls "$HS_TLS"
                     --duration "$3"s --warmup "$HS_WARMUP"s) ;;
    resumed-*) command=("$BENCH" handshakes --url "$url" --connections "$HS_CONNS" --tls "$HS_TLS"
                        --duration "$3"s --warmup "$HS_WARMUP"s --resume) ;;
  esac
  { TIMEFORMAT='%R %U %S'; time timeout -k 2 $(($3 + 20)) taskset -c "$CLIENT_CPU" "${command[@]}" \
      > "$4" 2>&1; } 2> "$4.time" || true
}

# run_once ROW SERVER REP: one measured run; appends row,server,rep,rps,MBps,cpu_us_per_request,
# client_cpu_pct,p50_ms,p99_ms,errors,resumed_share to runs.csv.
run_once() {
  local row=$1 server=$2 rep=$3 instance out before after
  instance=$server-$(row_certificate "$row")
  out=$RESULTS/raw/$row-$server-$rep.txt
  case $row in
    full-* | resumed-*)
      # The server's CPU is counted over the client's measured window, after its warm-up (in
      # which it gets the sessions it resumes).
      client "$row" "$instance" "$DUR" "$out" &
      sleep "$HS_WARMUP"
      before=$(cpu_ticks "${PROC[$instance]}")
      wait $! || true ;;
    *)
      before=$(cpu_ticks "${PROC[$instance]}")
      client "$row" "$instance" "$DUR" "$out" ;;
  esac
  after=$(cpu_ticks "${PROC[$instance]}")
  awk -v row="$row" -v server="$server" -v rep="$rep" -v ticks=$((after - before)) -v hz="$HZ" \
      -v times="$(cat "$out.time")" '
    /^RESULT / { for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }; found = 1 }
    END {
      if (!found || v["requests"] == 0) { printf "%s,%s,%s,0,0,0,0,0,0,-1,0\n", row, server, rep; exit }
      seconds = v["duration_us"] / 1e6
      split(times, t, " ")
      client = (t[1] > 0) ? 100 * (t[2] + t[3]) / t[1] : 0
      printf "%s,%s,%s,%.0f,%.1f,%.2f,%.0f,%.3f,%.3f,%d,%.3f\n", row, server, rep,
        v["requests"] / seconds, v["bytes"] / seconds / 1e6, 1e6 * ticks / hz / v["requests"],
        client, v["p50_us"] / 1000, v["p99_us"] / 1000, v["errors"],
        ("resumed" in v) ? v["resumed"] / v["requests"] : -1
    }' "$out" >> "$RESULTS/runs.csv"
  tail -n 1 "$RESULTS/runs.csv" | awk -F, '{printf "  %-13s %-5s run %s: %8s req/s %7s MB/s %8s µs CPU/req  client %s%%  errors %s  resumed %s\n", $1, $2, $3, $4, $5, $6, $7, $10, $11}' >&2
}

mkdir -p "$RUN" "$RESULTS/raw"
if [[ " $SERVERS " == *" ampd "* ]] && { [ ! -x "$AMPD" ] || [ ! -x "$BENCH" ]; }; then
  log "building ampd and ampd-bench (cargo build --release)"
  (cd "$REPO" && cargo build --release -p ampd -p ampd-bench >&2)
fi
[ -x "$BENCH" ] || (cd "$REPO" && cargo build --release -p ampd-bench >&2)
write_tls_configs "$RUN"
cp "$RUN"/*.conf "$RUN"/*.toml "$RESULTS/"
trap stop_all_procs EXIT
trap 'exit 130' INT TERM
echo "row,server,rep,rps,MBps,cpu_us_per_request,client_cpu_pct,p50_ms,p99_ms,errors,resumed_share" > "$RESULTS/runs.csv"
: > "$RESULTS/negotiated.txt"

for instance in $INSTANCES; do
  case $instance in
    ampd-*) start_proc "$instance" "$SERVER_CPU" "${PORTS[$instance]}" "$AMPD" run -c "$RUN/$instance.toml" ;;
    nginx-*) start_proc "$instance" "$SERVER_CPU" "${PORTS[$instance]}" \
               nginx -c "$RUN/$instance.conf" -e "$RUN/$instance/error.log" ;;
    *) die "unknown server ${instance%-*} (ampd, nginx)" ;;
  esac
  preflight "$instance"
done

for row in $ROWS; do
  log "row $row (${ROW_NAME[$row]}):$SERVERS"
  if [ "$WARM" -gt 0 ]; then
    for server in $SERVERS; do
      client "$row" "$server-$(row_certificate "$row")" "$WARM" "$RESULTS/raw/warm-$row-$server.txt"
    done
  fi
  for rep in $(seq 1 "$REPS"); do
    for server in $SERVERS; do run_once "$row" "$server" "$rep"; done
  done
done

{
  echo "# bench/tls.sh, $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo
  echo "$(uname -sr), $(nproc) CPUs; servers on CPU $SERVER_CPU, the client on CPU $CLIENT_CPU (wrk -t1 -c$CONNS;"
  echo "ampd-bench handshakes, $HS_CONNS threads, TLS $HS_TLS); medians of $REPS interleaved runs of ${DUR}s."
  echo "ampd: $("$AMPD" --version 2>/dev/null | head -n1) --arch $AMPD_ARCH, 1 loop; nginx: $(nginx -v 2>&1 | sed 's/.*: //'),"
  echo "1 worker, $(openssl version | cut -d' ' -f1-2). ‡: the client's core was 90 % busy or more (the client is the limit)."
  echo
  if [[ " $SERVERS " == *" ampd "* && " $SERVERS " == *" nginx "* ]]; then
    echo "| row | ampd req/s | nginx req/s | ratio | ampd µs CPU/req | nginx µs CPU/req | ratio | target | met |"
    echo "|---|---:|---:|---:|---:|---:|---:|---|---|"
    for row in $ROWS; do
      awk -v name="${ROW_NAME[$row]}" -v target="${ROW_TARGET[$row]}" \
          -v ar="$(median_csv "$RESULTS/runs.csv" 4 "$row" ampd)" -v nr="$(median_csv "$RESULTS/runs.csv" 4 "$row" nginx)" \
          -v ac="$(median_csv "$RESULTS/runs.csv" 6 "$row" ampd)" -v nc="$(median_csv "$RESULTS/runs.csv" 6 "$row" nginx)" \
          -v ab="$(median_csv "$RESULTS/runs.csv" 7 "$row" ampd)" -v nb="$(median_csv "$RESULTS/runs.csv" 7 "$row" nginx)" '
        BEGIN {
          rr = (nr > 0) ? ar / nr : 0; cr = (nc > 0) ? ac / nc : 0
          if (target == "cpu") { goal = "CPU/req ≤ 1.0 ×"; met = (cr > 0 && cr <= 1.0) ? "yes" : "no" }
          else { goal = "req/s ≥ 1.0 ×"; met = (rr >= 1.0) ? "yes" : "no" }
          printf "| %s | %.0f%s | %.0f%s | %.2f | %.1f | %.1f | %.2f | %s | %s |\n", name,
            ar, (ab >= 90) ? " ‡" : "", nr, (nb >= 90) ? " ‡" : "", rr, ac, nc, cr, goal, met
        }'
    done
  else
    echo "| row | server | req/s | µs CPU/req |"
    echo "|---|---|---:|---:|"
    for row in $ROWS; do
      for server in $SERVERS; do
        echo "| ${ROW_NAME[$row]} | $server | $(median_csv "$RESULTS/runs.csv" 4 "$row" "$server") | $(median_csv "$RESULTS/runs.csv" 6 "$row" "$server") |"
      done
    done
  fi
  echo
  echo "Latency p50 / p99 (ms), MB/s and the share of resumed handshakes (-1: not counted by wrk):"
  for row in $ROWS; do
    for server in $SERVERS; do
      echo "  ${ROW_NAME[$row]}, $server: $(median_csv "$RESULTS/runs.csv" 8 "$row" "$server") / $(median_csv "$RESULTS/runs.csv" 9 "$row" "$server"), $(median_csv "$RESULTS/runs.csv" 5 "$row" "$server") MB/s, resumed $(median_csv "$RESULTS/runs.csv" 11 "$row" "$server")"
    done
  done
  errors=$(awk -F, 'NR > 1 && $10 != 0 {n++} END {print n + 0}' "$RESULTS/runs.csv")
  if [ "$errors" != 0 ]; then echo; echo "$errors runs had errors (runs.csv, raw/)."; fi
  echo
  echo "What each server negotiated (openssl s_client):"
  sed 's/^/    /' "$RESULTS/negotiated.txt"
} > "$RESULTS/summary.md"
cat "$RESULTS/summary.md"
log "results: $RESULTS (summary.md, runs.csv, raw/, negotiated.txt)"
