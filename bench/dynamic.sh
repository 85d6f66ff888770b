#!/usr/bin/env bash
# dynamic.sh - ampd's dynamic content beside the servers users know for it, side by side in one
# run, the same back end behind each server:
#
#   php  GET /hello.php (`<?php echo "hello\n";`) through ampd (`fastcgi_pass` to a unix socket)
#        and through nginx (`fastcgi_pass unix:`), both to ONE php-fpm pool (pm = static,
#        PHP_CHILDREN workers) that neither server starts
#   cgi  GET /hello.cgi, a shell CGI script (the same file), through ampd (`handler = "cgi"`)
#        and through lighttpd's mod_cgi
#   app  Flash's persistent CGI: the same Perl program (FCGI.pm's responder loop) as an
#        `[application.hello]` ampd starts and keeps (GET /app/), against that file run as a CGI
#        script per request (GET /hello.pl), both through ampd
#   wsgi the same again for a Python WSGI application: served by flup's FastCGI server as an
#        `[application.wsgi]` (GET /wsgi/), against that file run per request as a CGI script
#        through wsgiref's CGIHandler (GET /hello.py). flup is on PyPI only: the script makes a
#        virtual environment with it in $FLUP_VENV when it is missing (python3 -m venv, pip).
#
#   sudo bash bench/setup.sh          # once: nginx, lighttpd, php8.2-fpm, libfcgi-perl,
#                                     # python3-venv, wrk
#   cargo build --release
#   bash bench/dynamic.sh             # about 3 minutes with the defaults
#   bash bench/dynamic.sh --configs DIR   # only write the configurations and scripts into DIR
#
# Every server has one worker (ampd --arch reactor with one loop, nginx worker_processes 1,
# lighttpd as it is) pinned to CPU $SERVER_CPU; CGI scripts and ampd's application processes are
# the server's children and inherit that CPU; php-fpm and wrk -t1 share CPU $CLIENT_CPU (as the
# upstream of bench/proxy.sh). No access logs; a new FastCGI connection per request on both
# servers (nginx's fastcgi_keep_conn off, ampd's FastCGI default keepalive = 0). Runs alternate
# between a row's two sides (A B A B) so that a change in the machine's load falls on both alike.
#
# For each row and side, the medians of REPS runs of: requests/s answered without error (wrk's
# requests less its errors: a 503 is not a served request); the server's CPU time per such
# request (user + system of the server's own processes, /proc/PID/stat); the CPU of the
# programs it runs, per request (CGI scripts: the reaped children's time, cutime + cstime of
# the server; ampd's application processes: their own time); php-fpm's CPU per request (php
# row); latency p50/p99 (wrk). Written to $RESULTS: summary.md, results.json, runs.csv, raw wrk
# output and the configurations.
#
# Knobs [defaults]: ROWS ["php cgi app wsgi"]  SERVERS ["ampd nginx lighttpd"]: a row runs the
#   sides whose server is listed  DUR [5] seconds per run  REPS [3]  WARM [1] seconds of warm-up
#   per row and side  CONNS [50]  PHP_CHILDREN [4] php-fpm workers  APP_PROCESSES [2] each
#   application's processes  MAX_SCRIPTS [64, ampd's default] ampd's [cgi] max_scripts (lighttpd
#   has no such cap)  FLUP_VENV [/tmp/ampd-bench-dynamic/venv]  AMPD_ARCH [reactor]
#   DYNAMIC_PORT [BASE_PORT + 30]: +0 ampd, +1 nginx, +2 lighttpd  PHP_FPM [php-fpm8.2]  and
#   those of bench/peers_lib.sh (BASE_PORT, SERVER_CPU, CLIENT_CPU, RESULTS, PRIO).
# Every wrk run is bounded by `timeout`; only the processes this script started are signalled.
if [ "${1:-}" = -h ] || [ "${1:-}" = --help ]; then
  awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$0"
  exit 0
fi

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SERVERS=${SERVERS:-"ampd nginx lighttpd"}
AMPD_ARCH=${AMPD_ARCH:-reactor}
ROWS=${ROWS:-"php cgi app wsgi"}
DUR=${DUR:-5}
REPS=${REPS:-3}
WARM=${WARM:-1}
CONNS=${CONNS:-50}
PHP_CHILDREN=${PHP_CHILDREN:-4}
APP_PROCESSES=${APP_PROCESSES:-2}
MAX_SCRIPTS=${MAX_SCRIPTS:-64}
PHP_FPM=${PHP_FPM:-php-fpm8.2}
FLUP_VENV=${FLUP_VENV:-/tmp/ampd-bench-dynamic/venv}
BASE_PORT=${BASE_PORT:-28581}
DYNAMIC_PORT=${DYNAMIC_PORT:-$((BASE_PORT + 30))}
declare -A DYN_PORTS=([ampd]=$DYNAMIC_PORT [nginx]=$((DYNAMIC_PORT + 1)) [lighttpd]=$((DYNAMIC_PORT + 2)))
# A row's two sides: "label:server:path".
declare -A ROW_SIDES=([php]="ampd:ampd:/hello.php nginx:nginx:/hello.php"
                      [cgi]="ampd:ampd:/hello.cgi lighttpd:lighttpd:/hello.cgi"
                      [app]="persistent:ampd:/app/ cgi:ampd:/hello.pl"
                      [wsgi]="persistent:ampd:/wsgi/ cgi:ampd:/hello.py")
declare -A ROW_NAME=([php]="php-fpm hello" [cgi]="CGI hello (sh)"
                     [app]="Perl FCGI application" [wsgi]="Python WSGI application")

# write_dynamic_configs DIR: the documents (www/hello.php, hello.cgi, hello.pl, hello.py) and
# php-fpm.conf, nginx-fastcgi.conf, lighttpd-cgi.conf, ampd-dynamic.toml; the unix sockets live
# in DIR too.
write_dynamic_configs() {
  local dir=$1 www=$1/www
  source "$HERE/nginx_conf.sh"
  mkdir -p "$www" "$dir/nginx/nginx" "$dir/lighttpd"
  chmod 755 "$dir" "$www"
  chown -R www-data:www-data "$dir/nginx" "$dir/lighttpd" 2>/dev/null || true
  printf '<?php echo "hello\\n";\n' > "$www/hello.php"
  cat > "$www/hello.cgi" <<'EOF'
#!/bin/sh
# A CGI hello world (bench/dynamic.sh): a head, a blank line, the body.
printf 'Content-Type: text/plain\n\nhello\n'
EOF
  # One program, two ways to run it: FCGI.pm answers requests in a loop when fd 0 is a listening
  # socket (an ampd application) and exactly once, from the CGI environment, otherwise.
  cat > "$www/hello.pl" <<'EOF'
#!/usr/bin/perl
# A Perl FastCGI responder (bench/dynamic.sh): persistent under ampd's [application], or run as
# a CGI script per request (FCGI's Accept then returns once).
use strict;
use warnings;
use FCGI;

my $request = FCGI::Request();
while ($request->Accept() >= 0) {
    print "Content-Type: text/plain\r\n\r\nhello\n";
}
EOF
  # The same file again for WSGI; $FLUP_VENV's interpreter both ways, so that the two sides
  # differ only in how the program is run.
  printf '#!%s/bin/python3\n' "$FLUP_VENV" > "$www/hello.py"
  cat >> "$www/hello.py" <<'EOF'
"""A WSGI hello (bench/dynamic.sh): flup's FastCGI server when fd 0 is a listening socket (an
ampd application), wsgiref's CGIHandler for one request otherwise (a CGI script)."""
import socket


def application(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"hello\n"]


def listening_on_stdin():
    try:
        sock = socket.socket(fileno=0)
    except OSError:
        return False  # not a socket: a pipe or a file
    try:
        return sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN) == 1
    finally:
        sock.detach()  # fd 0 stays open


if __name__ == "__main__":
    if listening_on_stdin():
        from flup.server.fcgi import WSGIServer

        WSGIServer(application).run()
    else:
        from wsgiref.handlers import CGIHandler

        CGIHandler().run(application)
EOF
  chmod 644 "$www/hello.php"
  chmod 755 "$www/hello.cgi" "$www/hello.pl" "$www/hello.py"

  cat > "$dir/php-fpm.conf" <<EOF
; bench/dynamic.sh: the one php-fpm pool behind both ampd and nginx.
[global]
pid = $dir/php-fpm.pid
error_log = $dir/php-fpm.err
daemonize = no

[bench]
user = www-data
group = www-data
listen = $dir/php.sock
listen.mode = 0666
listen.backlog = 4096
pm = static
pm.max_children = $PHP_CHILDREN
pm.max_requests = 0
EOF

  nginx_conf "$dir/nginx" "${DYN_PORTS[nginx]}" "$www" "access_log off;" \
    "location ~ \\.php\$ {
        fastcgi_pass unix:$dir/php.sock;
        include /etc/nginx/fastcgi_params;
        fastcgi_param SCRIPT_FILENAME \$document_root\$fastcgi_script_name; }" \
    > "$dir/nginx-fastcgi.conf"

  cat > "$dir/lighttpd-cgi.conf" <<EOF
# bench/dynamic.sh: lighttpd's mod_cgi, configured as bench/peers_lib.sh's lighttpd.
server.document-root     = "$www"
server.bind              = "127.0.0.1"
server.port              = ${DYN_PORTS[lighttpd]}
server.username          = "www-data"
server.groupname         = "www-data"
server.pid-file          = "$dir/lighttpd/lighttpd.pid"
server.errorlog          = "$dir/lighttpd/lighttpd.err"
server.modules           = ( "mod_cgi" )
server.max-worker        = 0
server.event-handler     = "linux-sysepoll"
server.network-backend   = "sendfile"
server.max-fds           = 65536
server.max-connections   = 16384
server.listen-backlog    = 4096
server.max-keep-alive-requests = 100000000
server.max-keep-alive-idle     = 65
server.stat-cache-engine = "simple"
cgi.assign               = ( ".cgi" => "" )
mimetype.assign          = ( ".html" => "text/html", "" => "application/octet-stream" )
EOF

  cat > "$dir/ampd-dynamic.toml" <<TOML
# bench/dynamic.sh: ampd with one loop; php-fpm over a unix socket, CGI scripts, and the Perl
# program both as a persistent application and as a CGI script.
listen = "127.0.0.1:${DYN_PORTS[ampd]}"
arch = "$AMPD_ARCH"
threads = 1

# Scripts running at once (beyond: 503); 64 is ampd's default.
[cgi]
max_scripts = $MAX_SCRIPTS

[application.hello]
command = ["perl", "$www/hello.pl"]
processes = $APP_PROCESSES
socket = "$dir/hello-app.sock"

[application.wsgi]
command = ["$FLUP_VENV/bin/python3", "$www/hello.py"]
processes = $APP_PROCESSES
socket = "$dir/wsgi-app.sock"
# flup under Python 3 notes SIGTERM but stays in its select(): SIGKILL it sooner than 10 s.
stop_timeout = "1s"

[[site]]
root = "$www"

  [[site.location]]
  extension = ".php"
  fastcgi_pass = "unix:$dir/php.sock"

  [[site.location]]
  extension = ".cgi"
  handler = "cgi"

  [[site.location]]
  extension = ".pl"
  handler = "cgi"

  [[site.location]]
  extension = ".py"
  handler = "cgi"

  [[site.location]]
  path = "/app/"
  fastcgi_pass = "hello"

  [[site.location]]
  path = "/wsgi/"
  fastcgi_pass = "wsgi"
TOML
}

if [ "${1:-}" = --configs ]; then
  [ -n "${2:-}" ] || { echo "usage: $0 --configs DIR" >&2; exit 2; }
  mkdir -p "$2"
  write_dynamic_configs "$(cd "$2" && pwd)"
  exit 0
fi

source "$HERE/peers_lib.sh"
RUN=/tmp/ampd-bench-dynamic/run
HZ=$(getconf CLK_TCK)
declare -A PROC=()
# Up to 20 s for a server to stop: ampd stops its applications first (SIGTERM, stop_timeout,
# SIGKILL), and a SIGKILL to ampd before that would leave them running.
STOP_WAIT=20
declare -A COMM=([ampd]=ampd [nginx]=nginx [lighttpd]=lighttpd)

command -v wrk >/dev/null || die "wrk is not installed: run bench/setup.sh"
command -v curl >/dev/null || die "curl is not installed: run bench/setup.sh"

# sides_of ROW: the row's sides ("label:server:path") whose server is in $SERVERS.
sides_of() {
  local side
  for side in ${ROW_SIDES[$1]}; do
    [[ " $SERVERS " == *" $(cut -d: -f2 <<< "$side") "* ]] && echo "$side"
  done
  return 0
}

# The servers each row needs.
NEEDED=""
for row in $ROWS; do
  [ -n "${ROW_SIDES[$row]:-}" ] || die "unknown row $row (php, cgi, app)"
  [ -n "$(sides_of "$row")" ] || die "row $row has no side in SERVERS ($SERVERS)"
  for side in $(sides_of "$row"); do
    server=$(cut -d: -f2 <<< "$side")
    [[ " $NEEDED " == *" $server "* ]] || NEEDED="$NEEDED $server"
  done
done
[[ " $ROWS " == *" php "* ]] && NEEDED="php-fpm $NEEDED"
for server in $NEEDED; do
  case $server in
    ampd) ;;
    php-fpm) command -v "$PHP_FPM" >/dev/null || die "$PHP_FPM is not installed: run bench/setup.sh" ;;
    *) command -v "$server" >/dev/null || die "$server is not installed: run bench/setup.sh" ;;
  esac
done
if [[ " $ROWS " == *" app "* ]]; then
  perl -MFCGI -e 1 2>/dev/null || die "Perl's FCGI module is missing (libfcgi-perl): run bench/setup.sh"
fi
if [[ " $ROWS " == *" wsgi "* ]] && ! "$FLUP_VENV/bin/python3" -c 'import flup.server.fcgi' 2>/dev/null; then
  log "making $FLUP_VENV with flup (python3 -m venv; pip install flup)"
  { python3 -m venv "$FLUP_VENV" && "$FLUP_VENV/bin/pip" install -q flup; } >&2 ||
    die "could not make $FLUP_VENV with flup (python3-venv, network to PyPI): ROWS without wsgi"
  chmod -R a+rX "$FLUP_VENV"
fi

# start NAME CPU READY COMMAND...: pinned to CPU; waits (bounded) until READY (a port number or
# a socket path) answers.
start() {
  local name=$1 cpu=$2 ready=$3 _; shift 3
  if [[ $ready =~ ^[0-9]+$ ]]; then
    port_busy "$ready" && die "port $ready is in use (set BASE_PORT or DYNAMIC_PORT)"
  else
    rm -f "$ready"
  fi
  taskset -c "$cpu" "$@" > "$RUN/$name.out" 2>&1 &
  PROC[$name]=$!
  for _ in $(seq 1 100); do
    kill -0 "${PROC[$name]}" 2>/dev/null || { tail -n 5 "$RUN/$name.out" >&2; die "$name exited at start"; }
    if [[ $ready =~ ^[0-9]+$ ]]; then port_busy "$ready" && break; else [ -S "$ready" ] && break; fi
    sleep 0.1
  done
  if [[ $ready =~ ^[0-9]+$ ]]; then port_busy "$ready"; else [ -S "$ready" ]; fi ||
    die "$name did not open $ready"
  log "started $name (pid ${PROC[$name]}) on $ready, CPU $cpu"
}


# ticks NAME: three clock-tick counts of the server started as NAME: "OWN CHILDREN": OWN is
# user + system of its own processes (those of its process tree running the server's program:
# nginx's worker, not a CGI script), CHILDREN is the CGI scripts' and applications' time:
# the reaped children's (cutime + cstime of the server's processes) plus the live processes of
# its tree running another program (ampd's application processes).
ticks() {
  local root=${PROC[$1]} comm=${COMM[$1]} own=0 children=0 pid stat
  for pid in $(tree "$root"); do
    stat=$(sed 's/.*) //' /proc/"$pid"/stat 2>/dev/null) || continue
    [ -n "$stat" ] || continue
    # After "comm) ": field 14 of stat is word 12 (utime), then stime, cutime, cstime.
    set -- $stat
    if [ "$(cat /proc/"$pid"/comm 2>/dev/null)" = "$comm" ]; then
      own=$((own + ${12} + ${13}))
      children=$((children + ${14} + ${15}))
    else
      children=$((children + ${12} + ${13}))
    fi
  done
  echo "$own $children"
}

# preflight LABEL SERVER PATH: the answer must be 200 "hello", or the run stops.
preflight() {
  local label=$1 server=$2 path=$3 got
  got=$(curl -s -m 10 -w ' %{http_code}' "http://127.0.0.1:${DYN_PORTS[$server]}$path" | tr '\n' ' ')
  [ "$got" = "hello  200" ] || die "$label ($server $path) answered '$got' (want 200 with body hello)"
}

# run_once ROW LABEL SERVER PATH REP SECONDS [OUT]: one wrk run; appends a line to runs.csv
# unless OUT is given.
run_once() {
  local row=$1 label=$2 server=$3 path=$4 rep=$5 seconds=$6 out=${7:-$RESULTS/raw/$1-$2-$5.txt}
  local own_before own_after fpm_before=0 fpm_after=0
  own_before=$(ticks "$server")
  [ "$row" = php ] && fpm_before=$(cpu_ticks "${PROC[php-fpm]}")
  timeout -k 2 $((seconds + 20)) taskset -c "$CLIENT_CPU" wrk -t1 -c"$CONNS" -d"${seconds}s" \
    --timeout 5s -s "$REPO/bench/wrk/result.lua" "http://127.0.0.1:${DYN_PORTS[$server]}$path" \
    > "$out" 2>&1 || true
  own_after=$(ticks "$server")
  [ "$row" = php ] && fpm_after=$(cpu_ticks "${PROC[php-fpm]}")
  [ -n "${7:-}" ] && return
  awk -v row="$row" -v label="$label" -v rep="$rep" -v hz="$HZ" \
      -v own=$(( ${own_after% *} - ${own_before% *} )) \
      -v children=$(( ${own_after#* } - ${own_before#* } )) \
      -v backend=$((fpm_after - fpm_before)) '
    /^RESULT / { for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }; found = 1 }
    END {
      if (!found || v["requests"] == 0) { printf "%s,%s,%s,0,0,0,0,0,0,-1\n", row, label, rep; exit }
      n = v["requests"] - v["errors"]
      if (n <= 0) { printf "%s,%s,%s,0,0,0,0,0,0,%d\n", row, label, rep, v["errors"]; exit }
      printf "%s,%s,%s,%.0f,%.2f,%.2f,%.2f,%.3f,%.3f,%d\n", row, label, rep,
        n / (v["duration_us"] / 1e6), 1e6 * own / hz / n, 1e6 * children / hz / n,
        1e6 * backend / hz / n, v["p50_us"] / 1000, v["p99_us"] / 1000, v["errors"]
    }' "$out" >> "$RESULTS/runs.csv"
  tail -n 1 "$RESULTS/runs.csv" | awk -F, '{printf "  %-4s %-10s run %s: %8s req/s  server %7s µs/req  scripts %7s µs/req  php-fpm %7s µs/req  p50 %s ms p99 %s ms  errors %s\n", $1, $2, $3, $4, $5, $6, $7, $8, $9, $10}' >&2
}

median_of() { # ROW LABEL COLUMN
  awk -F, -v row="$1" -v label="$2" -v column="$3" '$1 == row && $2 == label {print $column}' \
    "$RESULTS/runs.csv" | sort -g |
    awk '{v[NR] = $1} END {if (NR == 0) print 0; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}
errors_of() { awk -F, -v r="$1" -v s="$2" '$1 == r && $2 == s {e += $10} END {print e + 0}' "$RESULTS/runs.csv"; }

mkdir -p "$RUN" "$RESULTS/raw"
if [[ " $NEEDED " == *" ampd "* ]] && [ ! -x "$AMPD" ]; then
  log "building ampd (cargo build --release)"
  (cd "$REPO" && cargo build --release -p ampd >&2)
fi
write_dynamic_configs "$RUN"
cp "$RUN"/php-fpm.conf "$RUN"/nginx-fastcgi.conf "$RUN"/lighttpd-cgi.conf "$RUN"/ampd-dynamic.toml \
  "$RUN"/www/hello.* "$RESULTS/"
trap stop_all_procs EXIT
trap 'exit 130' INT TERM
echo "row,side,rep,rps,server_cpu_us,scripts_cpu_us,php_fpm_cpu_us,p50_ms,p99_ms,errors" > "$RESULTS/runs.csv"

for server in $NEEDED; do
  case $server in
    php-fpm) start php-fpm "$CLIENT_CPU" "$RUN/php.sock" "$PHP_FPM" -F -y "$RUN/php-fpm.conf" ;;
    ampd) start ampd "$SERVER_CPU" "${DYN_PORTS[ampd]}" "$AMPD" run -c "$RUN/ampd-dynamic.toml" ;;
    nginx) start nginx "$SERVER_CPU" "${DYN_PORTS[nginx]}" nginx -c "$RUN/nginx-fastcgi.conf" -e "$RUN/nginx/error.log" ;;
    lighttpd) start lighttpd "$SERVER_CPU" "${DYN_PORTS[lighttpd]}" lighttpd -D -f "$RUN/lighttpd-cgi.conf" ;;
  esac
done
for row in $ROWS; do
  for side in $(sides_of "$row"); do
    IFS=: read -r label server path <<< "$side"
    preflight "$label" "$server" "$path"
  done
done

# One benchmark at a time on this machine (bench/peers_lib.sh's lock), for the whole measurement.
exec 9> /tmp/ampd-bench.lock
log "waiting for /tmp/ampd-bench.lock (another benchmark) if held"
flock -w 900 9 || die "another benchmark held /tmp/ampd-bench.lock for 15 minutes"
for row in $ROWS; do
  log "row $row (${ROW_NAME[$row]}):" $(sides_of "$row")
  for side in $(sides_of "$row"); do
    IFS=: read -r label server path <<< "$side"
    [ "$WARM" -gt 0 ] && run_once "$row" "$label" "$server" "$path" warm "$WARM" "$RESULTS/raw/warm-$row-$label.txt"
  done
  for rep in $(seq 1 "$REPS"); do
    for side in $(sides_of "$row"); do
      IFS=: read -r label server path <<< "$side"
      run_once "$row" "$label" "$server" "$path" "$rep" "$DUR"
    done
  done
done

labels_of() { local side; for side in $(sides_of "$1"); do echo "${side%%:*}"; done; }

# results.json and summary.md from the medians.
{
  echo "{"
  echo "  \"date\": \"$(date -u '+%Y-%m-%dT%H:%M:%SZ')\", \"kernel\": \"$(uname -sr)\","
  echo "  \"commit\": \"$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)\","
  echo "  \"ampd\": \"$("$AMPD" --version 2>/dev/null | head -n1) --arch $AMPD_ARCH, 1 loop\","
  echo "  \"nginx\": \"$(nginx -v 2>&1 | sed 's/.*: //'), worker_processes 1\","
  echo "  \"lighttpd\": \"$(lighttpd -v 2>&1 | head -n1 | cut -d' ' -f1)\","
  echo "  \"php_fpm\": \"$("$PHP_FPM" -v 2>/dev/null | head -n1 | cut -d' ' -f1,2), pm static, $PHP_CHILDREN workers\","
  echo "  \"application_processes\": $APP_PROCESSES,"
  echo "  \"server_cpu\": $SERVER_CPU, \"client_and_php_fpm_cpu\": $CLIENT_CPU,"
  echo "  \"connections\": $CONNS, \"seconds\": $DUR, \"repetitions\": $REPS,"
  echo "  \"rows\": ["
  first=1
  for row in $ROWS; do
    [ "$first" = 1 ] || echo ","
    first=0
    printf '    {"row": "%s", "name": "%s"' "$row" "${ROW_NAME[$row]}"
    for label in $(labels_of "$row"); do
      printf ', "%s": {"requests_per_second": %s, "server_cpu_us_per_request": %s, "scripts_cpu_us_per_request": %s, "php_fpm_cpu_us_per_request": %s, "p50_ms": %s, "p99_ms": %s, "errors": %s}' \
        "$label" "$(median_of "$row" "$label" 4)" "$(median_of "$row" "$label" 5)" \
        "$(median_of "$row" "$label" 6)" "$(median_of "$row" "$label" 7)" \
        "$(median_of "$row" "$label" 8)" "$(median_of "$row" "$label" 9)" "$(errors_of "$row" "$label")"
    done
    printf '}'
  done
  echo
  echo "  ]"
  echo "}"
} > "$RESULTS/results.json"

{
  echo "# bench/dynamic.sh, $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo
  echo "$(uname -sr), $(nproc) CPUs; servers (and their CGI scripts and applications) on CPU $SERVER_CPU,"
  echo "php-fpm ($PHP_CHILDREN workers) and wrk -t1 -c$CONNS on CPU $CLIENT_CPU; medians of $REPS interleaved runs of ${DUR}s."
  echo "CPU: user + system time per request of the server's own processes, of the scripts or"
  echo "application processes it ran, and of php-fpm."
  echo
  echo "| row | side | req/s | server µs/req | scripts µs/req | php-fpm µs/req | p50 ms | p99 ms | errors |"
  echo "|---|---|---:|---:|---:|---:|---:|---:|---:|"
  for row in $ROWS; do
    for label in $(labels_of "$row"); do
      # The php row runs no scripts; only the php row uses php-fpm.
      scripts="$(median_of "$row" "$label" 6)" fpm="–"
      [ "$row" = php ] && scripts="–" fpm="$(median_of "$row" "$label" 7)"
      echo "| ${ROW_NAME[$row]} | $label | $(median_of "$row" "$label" 4) | $(median_of "$row" "$label" 5) | $scripts | $fpm | $(median_of "$row" "$label" 8) | $(median_of "$row" "$label" 9) | $(errors_of "$row" "$label") |"
    done
  done
  header=0
  for row in $ROWS; do
    set -- $(labels_of "$row")
    [ $# = 2 ] || continue
    if [ "$header" = 0 ]; then
      header=1
      echo
      echo "Ratios (first side / second side):"
      echo
      echo "| row | req/s | server µs/req | server + scripts µs/req | p99 |"
      echo "|---|---:|---:|---:|---:|"
    fi
    awk -v name="${ROW_NAME[$row]} ($1 / $2)" \
        -v ar="$(median_of "$row" "$1" 4)" -v br="$(median_of "$row" "$2" 4)" \
        -v as="$(median_of "$row" "$1" 5)" -v bs="$(median_of "$row" "$2" 5)" \
        -v ac="$(median_of "$row" "$1" 6)" -v bc="$(median_of "$row" "$2" 6)" \
        -v al="$(median_of "$row" "$1" 9)" -v bl="$(median_of "$row" "$2" 9)" 'BEGIN {
      printf "| %s | %.2f | %.2f | %.2f | %.2f |\n", name, (br > 0) ? ar / br : 0,
        (bs > 0) ? as / bs : 0, (bs + bc > 0) ? (as + ac) / (bs + bc) : 0, (bl > 0) ? al / bl : 0 }'
  done
  errors=$(awk -F, 'NR > 1 && $10 != 0 {n++} END {print n + 0}' "$RESULTS/runs.csv")
  if [ "$errors" != 0 ]; then echo; echo "$errors runs had errors (runs.csv, raw/)."; fi
} > "$RESULTS/summary.md"
cat "$RESULTS/summary.md"
log "results: $RESULTS (summary.md, results.json, runs.csv, raw/)"
