# peers_lib.sh - shared by the ampd-bench scripts in bench/ (sourced, not run).
#
# Starts ampd and the Debian peers (nginx, lighttpd, Apache with the event MPM, h2o), each serving
# $WWW on its own 127.0.0.1 port and pinned to CPU $SERVER_CPU, then measures them all in ONE
# ampd-bench invocation pinned to CPU $CLIENT_CPU, so the runs interleave A B C D A B C D.
# Only the processes started here are ever signalled (by pid). Every ampd-bench run holds
# /tmp/ampd-bench.lock, so two benchmarks on this machine never overlap.
#
# Every peer is configured alike (one worker process or thread, no access log, sendfile where the
# server has it, unlimited keep-alive); the configurations are written under $RUN. bench/setup.sh
# installs the peers and makes $WWW.
#
# Knobs (environment, defaults in brackets):
#   SERVERS ["ampd nginx lighttpd apache2"]   BASE_PORT [28581]: +0 ampd, +1 nginx, +2 lighttpd,
#   +3 apache2, +4 howl, +5 h2o, +10 on: the ampd-ENGINE entries   SERVER_CPU [0]   CLIENT_CPU [1]
#   WWW [/tmp/bench/www]   HOWL_BYTES [1024]: the body howl answers every request with
#   RESULTS [/tmp/ampd-bench-results/<script>-<timestamp>]   AMPD_ARCH [amped]
#   CLIENTS [50]   DURATION [5s]   WARMUP [1s]   REPEAT [3]   EXTRA [] more ampd-bench options
#   PRIO [1]: run in a session of our own with autogroup nice -20 (0: ordinary priority)
#
# SERVERS may name ampd engines one by one, "ampd-ENGINE" or "ampd-ENGINE-N" (e.g. ampd-sped,
# ampd-mt-1): ampd with --arch ENGINE (and --threads N), each on its own port, so that several
# architectures take turns in one interleaved run; the name is the series on the charts.

set -euo pipefail

# Run in a session of our own whose autogroup gets nice -20 (PRIO=1, the default): Linux shares
# CPU between sessions (autogroups) before it looks at nice values, so on a shared machine this is
# what keeps other busy processes from taking the two cores during a measurement. PRIO=0 runs at
# ordinary priority.
if [ "${PRIO:-1}" = 1 ] && [ -z "${_AMPD_BENCH_SESSION:-}" ]; then
  export _AMPD_BENCH_SESSION=1
  exec setsid -w bash "$0" "$@"
fi
if [ "${PRIO:-1}" = 1 ] && [ -w /proc/self/autogroup ]; then
  echo -20 > /proc/self/autogroup 2>/dev/null || true
fi

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$REPO/bench/nginx_conf.sh"
SCRIPT=$(basename "$0" .sh)
WWW=${WWW:-/tmp/bench/www}
SERVERS=${SERVERS:-"ampd nginx lighttpd apache2"}
BASE_PORT=${BASE_PORT:-28581}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
AMPD_ARCH=${AMPD_ARCH:-amped}
CLIENTS=${CLIENTS:-50}
DURATION=${DURATION:-5s}
WARMUP=${WARMUP:-1s}
REPEAT=${REPEAT:-3}
EXTRA=${EXTRA:-}
RESULTS=${RESULTS:-/tmp/ampd-bench-results/$SCRIPT-$(date +%Y%m%d-%H%M%S)}
# The servers' configurations, pid files and logs: one directory per invocation, since Apache
# refuses to start while another instance's pid file names a live process.
RUN=/tmp/ampd-bench-peers/$SCRIPT-$$
AMPD=$REPO/target/release/ampd
BENCH=$REPO/target/release/ampd-bench

declare -A PORT=([ampd]=$BASE_PORT [nginx]=$((BASE_PORT + 1)) [lighttpd]=$((BASE_PORT + 2))
                 [apache2]=$((BASE_PORT + 3)) [howl]=$((BASE_PORT + 4)) [h2o]=$((BASE_PORT + 5)))
declare -A PID=()

# Ports for the ampd-ENGINE[-N] entries of SERVERS: BASE_PORT+10 on, in the order named.
assign_engine_ports() {
  local name next=$((BASE_PORT + 10))
  for name in $SERVERS; do
    case $name in ampd-*) PORT[$name]=$next; next=$((next + 1)) ;; esac
  done
}
assign_engine_ports

log() { printf '[%s %s] %s\n' "$SCRIPT" "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

port_busy() { (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null; }

# Stop every process a script started into its PROC array (name → pid): SIGTERM, up to
# STOP_WAIT seconds (default 5) for it to exit, then SIGKILL.
stop_all_procs() {
  local name pid _
  for name in "${!PROC[@]}"; do
    pid=${PROC[$name]}
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 $((${STOP_WAIT:-5} * 10))); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null || true
  done
}

# start_proc NAME CPU PORT COMMAND...: runs COMMAND pinned to CPU into PROC[NAME] (output in
# $RUN/NAME.out) and waits, bounded, until it accepts on 127.0.0.1:PORT; dies if it cannot.
start_proc() {
  local name=$1 cpu=$2 port=$3 _; shift 3
  port_busy "$port" && die "port $port is in use (set BASE_PORT)"
  taskset -c "$cpu" "$@" > "$RUN/$name.out" 2>&1 &
  PROC[$name]=$!
  for _ in $(seq 1 100); do
    kill -0 "${PROC[$name]}" 2>/dev/null || { tail -n 5 "$RUN/$name.out" >&2; die "$name exited at start"; }
    port_busy "$port" && { log "started $name (pid ${PROC[$name]}) on 127.0.0.1:$port, CPU $cpu"; return; }
    sleep 0.1
  done
  die "$name did not open port $port"
}

# median_csv FILE COLUMN KEY1 [KEY2]: the median of COLUMN over FILE's rows whose first column
# is KEY1 (and second KEY2); empty when there are none.
median_csv() {
  awk -F, -v column="$2" -v first="$3" -v second="${4:-}" \
    '$1 == first && (second == "" || $2 == second) {print $column}' "$1" | sort -g |
    awk '{v[NR] = $1} END {if (NR == 0) print ""; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}

# The server's processes: the one started and its descendants (nginx's worker, Apache's child,
# ampd's helper processes).
tree() {
  local pid=$1 child
  [ -d "/proc/$pid" ] || return 0
  echo "$pid"
  for child in $(cat /proc/"$pid"/task/*/children 2>/dev/null); do tree "$child"; done
}

# perf_profile PID OUT COMMAND...: `perf record -g` of the processes of server PID (`tree`) on
# CPU $CLIENT_CPU while COMMAND runs (a client run: not measured); the samples with their call
# chains into OUT.data (`perf report -i`), and into OUT.txt the server's time by object (kernel,
# libc, the server's own code) and by function, so two servers' profiles of one run read side by
# side.
perf_profile() {
  local pid=$1 out=$2 perf_pid
  shift 2
  command -v perf >/dev/null || { log "perf is not installed: no profile"; return 0; }
  taskset -c "$CLIENT_CPU" perf record -g -q -o "$out.data" -p "$(tree "$pid" | paste -sd,)" \
    > "$out.perf.log" 2>&1 &
  perf_pid=$!
  sleep 0.5
  "$@"
  kill -INT "$perf_pid" 2>/dev/null || true
  wait "$perf_pid" || true
  {
    perf report -i "$out.data" --stdio --no-children -g none --sort dso 2>/dev/null | grep -v '^#' || true
    perf report -i "$out.data" --stdio --no-children -g none --percent-limit 0.3 --sort dso,symbol \
      2>/dev/null | grep -v '^#' | head -n 200 || true
  } > "$out.txt"
}

# cpu_ticks PID [user]: user + system clock ticks of every thread of the server's processes
# (/proc/PID/stat 14, 15); with `user`, user space only (14: the server's own code and its
# libraries).
cpu_ticks() {
  local total=0 pid ticks kernel=1
  [ "${2:-}" = user ] && kernel=0
  for pid in $(tree "$1"); do
    ticks=$(awk -v kernel="$kernel" '{sub(/.*\) /, ""); print $12 + kernel * $13}' \
      /proc/"$pid"/stat 2>/dev/null || echo 0)
    total=$((total + ${ticks:-0}))
  done
  echo "$total"
}

prepare() {
  [ -d "$WWW" ] || die "no document root $WWW: run bench/setup.sh first"
  if [ ! -x "$AMPD" ] || [ ! -x "$BENCH" ]; then
    log "building ampd and ampd-bench (cargo build --release)"
    (cd "$REPO" && cargo build --release -p ampd -p ampd-bench >&2)
  fi
  mkdir -p "$RUN" "$RESULTS"
  for dir in nginx lighttpd apache2 h2o; do mkdir -p "$RUN/$dir"; done
  chown www-data:www-data "$RUN/nginx" "$RUN/lighttpd" "$RUN/h2o" 2>/dev/null || true
  write_configs
  trap stop_all EXIT
  trap 'exit 130' INT TERM
}

write_configs() {
  nginx_conf "$RUN" "${PORT[nginx]}" "$WWW" "access_log off;" "index index.html;" > "$RUN/nginx.conf"
  cat > "$RUN/lighttpd.conf" <<EOF
server.document-root     = "$WWW"
server.bind              = "127.0.0.1"
server.port              = ${PORT[lighttpd]}
server.username          = "www-data"
server.groupname         = "www-data"
server.pid-file          = "$RUN/lighttpd/lighttpd.pid"
server.errorlog          = "$RUN/lighttpd/lighttpd.err"
server.modules           = ( )
server.max-worker        = 0
server.event-handler     = "linux-sysepoll"
server.network-backend   = "sendfile"
server.max-fds           = 65536
server.max-connections   = 16384
server.listen-backlog    = 4096
server.max-keep-alive-requests = 100000000
server.max-keep-alive-idle     = 65
server.stat-cache-engine = "simple"
index-file.names         = ( "index.html" )
mimetype.assign          = ( ".html" => "text/html", "" => "application/octet-stream" )
EOF
  cat > "$RUN/apache2.conf" <<EOF
ServerRoot /etc/apache2
DefaultRuntimeDir $RUN/apache2
PidFile $RUN/apache2.pid
ServerName localhost
Listen 127.0.0.1:${PORT[apache2]}
ListenBacklog 4096
LoadModule mpm_event_module /usr/lib/apache2/modules/mod_mpm_event.so
LoadModule authz_core_module /usr/lib/apache2/modules/mod_authz_core.so
LoadModule mime_module /usr/lib/apache2/modules/mod_mime.so
LoadModule dir_module /usr/lib/apache2/modules/mod_dir.so
User www-data
Group www-data
ErrorLog $RUN/apache2.err
LogLevel warn
StartServers 1
ServerLimit 1
ThreadLimit 64
ThreadsPerChild 64
MaxRequestWorkers 64
MinSpareThreads 1
MaxSpareThreads 128
MaxConnectionsPerChild 0
KeepAlive On
MaxKeepAliveRequests 0
KeepAliveTimeout 65
EnableSendfile On
EnableMMAP On
HostnameLookups Off
ServerTokens Prod
TypesConfig /etc/mime.types
DocumentRoot $WWW
<Directory />
    Options FollowSymLinks
    AllowOverride None
    Require all denied
</Directory>
<Directory $WWW>
    Options FollowSymLinks
    AllowOverride None
    Require all granted
</Directory>
DirectoryIndex index.html
EOF
  # h2o: one event-loop thread, no access log (h2o sends files without sendfile).
  cat > "$RUN/h2o.conf" <<EOF
user: www-data
pid-file: $RUN/h2o/h2o.pid
error-log: $RUN/h2o/h2o.err
num-threads: 1
max-connections: 16384
listen:
  host: 127.0.0.1
  port: ${PORT[h2o]}
hosts:
  "default":
    paths:
      /:
        file.dir: $WWW
EOF
}

server_cmd() {
  case $1 in
    ampd)     echo "$AMPD serve $WWW --listen 127.0.0.1:${PORT[ampd]} --arch $AMPD_ARCH" ;;
    ampd-*)
      local engine=${1#ampd-} threads=""
      case $engine in *-*) threads="--threads ${engine#*-}"; engine=${engine%%-*} ;; esac
      echo "$AMPD serve $WWW --listen 127.0.0.1:${PORT[$1]} --arch $engine $threads" ;;
    nginx)    echo "nginx -c $RUN/nginx.conf -e $RUN/nginx.err" ;;
    lighttpd) echo "lighttpd -D -f $RUN/lighttpd.conf" ;;
    apache2)  echo "apache2 -f $RUN/apache2.conf -DFOREGROUND" ;;
    h2o)      echo "h2o -c $RUN/h2o.conf" ;;
    # The AFPA paper's 'Howl': a pre-built answer of HOWL_BYTES to every request (bench/howl.c,
    # built by bench/setup.sh).
    howl)     echo "${BENCH_ROOT:-/tmp/bench}/bin/howl ${PORT[howl]} ${HOWL_BYTES:-1024} 127.0.0.1" ;;
    *)        die "unknown server $1" ;;
  esac
}

# start_server NAME: pinned to $SERVER_CPU; returns non-zero (and says why) if it cannot serve.
start_server() {
  local name=$1 port=${PORT[$1]} cmd
  cmd=$(server_cmd "$name")
  if port_busy "$port"; then log "port $port is in use: skipping $name"; return 1; fi
  command -v "${cmd%% *}" >/dev/null 2>&1 || { log "$name is not installed: skipping"; return 1; }
  # shellcheck disable=SC2086
  taskset -c "$SERVER_CPU" $cmd > "$RUN/$name.out" 2>&1 &
  PID[$name]=$!
  local _
  for _ in $(seq 1 100); do
    kill -0 "${PID[$name]}" 2>/dev/null || { log "$name exited at start:"; tail -n 5 "$RUN/$name.out" >&2; unset "PID[$name]"; return 1; }
    port_busy "$port" && break
    sleep 0.1
  done
  port_busy "$port" || { log "$name did not open port $port"; stop_server "$name"; return 1; }
  log "started $name (pid ${PID[$name]}) on 127.0.0.1:$port, CPU $SERVER_CPU"
}

stop_server() {
  local name=$1 pid=${PID[$1]:-} _
  [ -n "$pid" ] || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null || true
  unset "PID[$name]"
}

stop_all() {
  local name
  for name in "${!PID[@]}"; do stop_server "$name"; done
}

# start_all: starts every server of $SERVERS that can run; sets LIVE.
start_all() {
  LIVE=""
  local name
  assign_engine_ports
  for name in $SERVERS; do
    if start_server "$name"; then LIVE="$LIVE $name"; fi
  done
  [ -n "$LIVE" ] || die "no server started"
}

# measure NAME WORKLOAD [ampd-bench options...]: one interleaved ampd-bench run over every live
# server, pinned to $CLIENT_CPU, holding the benchmark lock; writes NAME.json/.csv/.txt and
# NAME.svg (plus NAME-mbit.svg) into $RESULTS and prints the ratios ampd/peer. NAME-cpu.csv
# gets each server's CPU time over the whole invocation (warm-ups included: the servers are
# idle while the others take their turns), in clock ticks of CLK_TCK per second.
measure() {
  local name=$1 workload=$2; shift 2
  local targets=() server
  declare -A ticks_before=()
  for server in $LIVE; do
    targets+=(--target "$server=http://127.0.0.1:${PORT[$server]}/")
    ticks_before[$server]=$(cpu_ticks "${PID[$server]}")
  done
  log "measuring $name ($workload) on:$LIVE"
  # shellcheck disable=SC2086
  flock /tmp/ampd-bench.lock taskset -c "$CLIENT_CPU" "$BENCH" "$workload" "${targets[@]}" \
    --clients "$CLIENTS" --duration "$DURATION" --warmup "$WARMUP" --repeat "$REPEAT" \
    --json "$RESULTS/$name.json" --csv "$RESULTS/$name.csv" $EXTRA "$@" | tee "$RESULTS/$name.txt"
  {
    echo "server,ticks,clk_tck"
    for server in $LIVE; do
      echo "$server,$(($(cpu_ticks "${PID[$server]}") - ${ticks_before[$server]})),$(getconf CLK_TCK)"
    done
  } > "$RESULTS/$name-cpu.csv"
  "$BENCH" plot "$RESULTS/$name.json" -o "$RESULTS/$name.svg" --title "${TITLE:-$name}"
  "$BENCH" plot "$RESULTS/$name.json" -o "$RESULTS/$name-mbit.svg" --metric mbit_per_second \
    --title "${TITLE:-$name}: output bandwidth"
  case " $LIVE " in
    *" ampd "*)
      echo
      echo "Requests/s, median of $REPEAT interleaved runs, and ratios ampd/peer:"
      "$BENCH" compare "$RESULTS/$name.json" --base ampd | tee "$RESULTS/$name-ratios.md"
      ;;
  esac
  log "results: $RESULTS/$name.{json,csv,txt,svg}"
}
