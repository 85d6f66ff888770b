#!/usr/bin/env bash
# Scale-out: three ampd instances, each in a network namespace of its own, behind HAProxy with
# HTTP health checks on /health in one more namespace (a veth pair to each instance), under wrk
# load through the balancer (wrk runs beside HAProxy):
#
#   1. kill -9 one instance          -> 0 failed requests (HAProxy retries: retry-on, redispatch)
#   2. rolling reload (SIGHUP) x3    -> 0 failed requests, 0 refused connections
#   3. rolling upgrade (SIGUSR2) x3  -> 0 failed requests, 0 refused connections (the binary on
#                                       disk is replaced first; each new process inherits the
#                                       listening sockets)
#   4. SIGTERM one instance          -> 0 failed requests, 0 retried (drain_delay: health says
#                                       503, HAProxy takes it out, then the listener closes; a
#                                       request refused or cut would have been retried. The
#                                       refused connections counted here are HAProxy's health
#                                       checks of the stopped instance, which go on)
#
# "Failed" is what wrk saw (socket errors + non-2xx). "Refused" is the balancer namespace's
# TcpAttemptFails (/proc/net/snmp): connections HAProxy tried to open and that were refused or
# reset; nothing else runs in that namespace. "Retried" is HAProxy's retries and redispatches
# (wretr + wredis). Without `ip netns` (not root, or no netns support) the instances listen on
# 127.0.0.2..4 and HAProxy on 127.0.0.1 instead (the script says so); refused connections
# cannot be told apart from the rest of the machine's then and are not checked. Every wait is bounded; everything started here is stopped and
# every namespace and veth removed on exit, also on failure.
#
# usage: tests/scale_out.sh [AMPD_BINARY]   (default: target/debug/ampd)
# env:   DUR (seconds of load per phase, 6), MODE (netns | lo; default: netns when possible),
#        PROXY_V2 (default 1: HAProxy sends PROXY v2 headers, each instance's file has proxy_protocol and
#        proxy_protocol_from, and the access log must show the client's own address; 0 leaves it out)
# needs: haproxy, wrk, curl, iproute2 (Debian packages; scripts/test.sh installs them)
set -euo pipefail

AMPD=${1:-target/debug/ampd}
DUR=${DUR:-6}
PROXY_V2=${PROXY_V2:-1}
N=3
[ -x "$AMPD" ] || { echo "scale_out: no ampd binary at $AMPD (cargo build first)"; exit 2; }
for tool in haproxy wrk curl; do
  command -v "$tool" >/dev/null || { echo "scale_out: $tool is missing (apt-get install $tool)"; exit 2; }
done

WORK=$(mktemp -d /tmp/ampd-scale-out.XXXXXX)
TAG=$$
NS_PREFIX="ampd-so-$TAG"
# Unique per run: two runs at once use different namespaces, veths, subnets and ports.
NET_A=$(( (TAG / 256) % 256 ))
NET_B=$(( TAG % 256 ))
LB_PORT=$(( 20000 + TAG % 20000 ))
STATS_PORT=$(( LB_PORT + 1 ))

if [ -z "${MODE:-}" ]; then
  MODE=lo
  if [ "$(id -u)" = 0 ] && command -v ip >/dev/null && ip netns add "$NS_PREFIX-probe" 2>/dev/null; then
    ip netns del "$NS_PREFIX-probe"
    MODE=netns
  fi
fi
if [ "$MODE" = lo ]; then
  echo "scale_out: no network namespaces (not root, no netns support, or MODE=lo): instances listen on 127.0.0.2..4 instead"
  BACKEND_PORT=$(( LB_PORT + 2 ))
  CLIENT_IP=127.0.0.5   # the client's own address, distinct from the balancer's hop (127.0.0.1)
else
  BACKEND_PORT=8080
  CLIENT_IP=127.0.0.1   # the balancer's hop comes from the veth address, 10.A.B.x
fi

LB_NS="$NS_PREFIX-lb"
addr() { if [ "$MODE" = lo ]; then echo "127.0.0.$(( $1 + 1 ))"; else echo "10.$NET_A.$NET_B.$(( $1 * 4 + 2 ))"; fi; }
lb_side_addr() { echo "10.$NET_A.$NET_B.$(( $1 * 4 + 1 ))"; }
in_ns() { local i=$1; shift; if [ "$MODE" = lo ]; then "$@"; else ip netns exec "$NS_PREFIX-$i" "$@"; fi; }
in_lb() { if [ "$MODE" = lo ]; then "$@"; else ip netns exec "$LB_NS" "$@"; fi; }

cleanup() {
  local status=$?
  set +e
  [ -f "$WORK/haproxy.pid" ] && kill "$(cat "$WORK/haproxy.pid")" 2>/dev/null
  [ -n "${WRK:-}" ] && kill "$WRK" 2>/dev/null
  for i in $(seq "$N"); do
    # Upgrades change an instance's pid: the pid file names the current one.
    for pid in $(cat "$WORK/b$i.pid" "$WORK/b$i.first" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
    if [ "$MODE" = netns ]; then
      ip netns pids "$NS_PREFIX-$i" 2>/dev/null | xargs -r kill -KILL 2>/dev/null
      ip netns del "$NS_PREFIX-$i" 2>/dev/null
    fi
  done
  if [ "$MODE" = netns ]; then
    ip netns pids "$LB_NS" 2>/dev/null | xargs -r kill -KILL 2>/dev/null
    ip netns del "$LB_NS" 2>/dev/null   # takes the veths with it
  fi
  if [ "$status" != 0 ]; then
    echo "scale_out: FAILED; logs:"
    tail -n 20 "$WORK"/*.log 2>/dev/null
  fi
  rm -rf "$WORK"
  exit "$status"
}
trap cleanup EXIT INT TERM

# --- the instances -----------------------------------------------------------------------------
mkdir -p "$WORK/www" "$WORK/bin"
printf 'hello from ampd\n' > "$WORK/www/hello.txt"
cp "$AMPD" "$WORK/bin/ampd"

write_config() {  # instance, generation
  local i=$1 generation=$2
  {
    echo "# generation $generation"
    echo "listen = \"$(addr "$i"):$BACKEND_PORT\""
    echo "arch = \"reactor\""
    echo "threads = 2"
    echo "pid_file = \"$WORK/b$i.pid\""
    # HAProxy checks every 300 ms and takes an instance out after 2 failures: 2 s covers it.
    echo "drain_delay = \"2s\""
    echo "grace_period = \"10s\""
    if [ "$PROXY_V2" = 1 ]; then
      # --- PROXY protocol v2 (needs ampd's PROXY protocol support) ---
      echo "proxy_protocol = true"
      echo "proxy_protocol_from = [\"10.0.0.0/8\", \"127.0.0.1\"]"
    fi
    echo "[log]"
    echo "access = \"$WORK/b$i.access\""
    echo "[[site]]"
    echo "root = \"$WORK/www\""
    echo "  [[site.location]]"
    echo "  path = \"/health\""
    echo "  exact = true"
    echo "  handler = \"health\""
  } > "$WORK/b$i.toml"
}

start_instance() {  # instance
  local i=$1
  rm -f "$WORK/b$i.pid"
  in_ns "$i" setsid "$WORK/bin/ampd" run -c "$WORK/b$i.toml" </dev/null >>"$WORK/b$i.log" 2>&1 &
  wait_for "instance $i ready" 10 test -s "$WORK/b$i.pid"
  cat "$WORK/b$i.pid" > "$WORK/b$i.first"
}

wait_for() {  # what, seconds, command...
  local what=$1 seconds=$2; shift 2
  local deadline=$(( SECONDS + seconds ))
  until "$@" >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$deadline" ] || { echo "scale_out: timed out waiting for $what"; return 1; }
    sleep 0.05
  done
}

if [ "$MODE" = netns ]; then
  ip netns add "$LB_NS"
  ip -n "$LB_NS" link set lo up
fi
for i in $(seq "$N"); do
  if [ "$MODE" = netns ]; then
    ns="$NS_PREFIX-$i"
    ip netns add "$ns"
    ip -n "$LB_NS" link add "to$i" type veth peer name eth0 netns "$ns"
    ip -n "$LB_NS" addr add "$(lb_side_addr "$i")/30" dev "to$i"
    ip -n "$LB_NS" link set "to$i" up
    ip netns exec "$ns" ip addr add "$(addr "$i")/30" dev eth0
    ip netns exec "$ns" ip link set eth0 up
    ip netns exec "$ns" ip link set lo up
  fi
  write_config "$i" 1
  start_instance "$i"
done

# --- the balancer ------------------------------------------------------------------------------
SEND_PROXY=""
[ "$PROXY_V2" = 1 ] && SEND_PROXY=" send-proxy-v2"
cat > "$WORK/haproxy.cfg" <<EOF
global
  maxconn 4000
  pidfile $WORK/haproxy.pid
defaults
  mode http
  timeout connect 1s
  timeout client 30s
  timeout server 30s
  option http-keep-alive
  # A request whose instance failed (refused, reset, closed without answering) goes again,
  # to another instance.
  retries 3
  option redispatch 1
  retry-on all-retryable-errors
frontend stats
  bind 127.0.0.1:$STATS_PORT
  stats enable
  stats uri /stats
frontend fe
  bind 127.0.0.1:$LB_PORT
  default_backend ampd
backend ampd
  balance roundrobin
  option httpchk GET /health
  http-check expect status 200
  default-server check inter 300 fall 2 rise 2$SEND_PROXY
EOF
for i in $(seq "$N"); do echo "  server b$i $(addr "$i"):$BACKEND_PORT" >> "$WORK/haproxy.cfg"; done
haproxy -c -q -f "$WORK/haproxy.cfg"
in_lb haproxy -D -f "$WORK/haproxy.cfg"

# One row of HAProxy's CSV statistics per instance: name status econ wretr wredis.
stats() {
  in_lb curl -s -m 2 "http://127.0.0.1:$STATS_PORT/stats;csv" | awk -F, '
    NR == 1 { for (f = 1; f <= NF; f++) col[$f] = f; next }
    $1 == "ampd" && $2 ~ /^b/ {
      status = $col["status"]; gsub(/ /, "_", status)   # "UP 1/2" while changing
      print $2, status, $col["econ"] + 0, $col["wretr"] + 0, $col["wredis"] + 0
    }'
}
all_up() { [ "$(stats | awk '$2 == "UP"' | wc -l)" = "$N" ]; }
is_state() { stats | awk -v name="$1" -v want="$2" '$1 == name && $2 == want { found = 1 } END { exit !found }'; }
# Connections the balancer's namespace failed to open (RFC 4022 tcpAttemptFails).
refused() {
  if [ "$MODE" = lo ]; then echo 0; return; fi
  in_lb awk '$1 == "Tcp:" { if (!n++) for (f = 2; f <= NF; f++) col[$f] = f; else print $col["AttemptFails"] }' /proc/net/snmp
}
retried() { stats | awk '{ sum += $4 + $5 } END { print sum + 0 }'; }

wait_for "HAProxy to see every instance up" 20 all_up
echo "scale_out: mode $MODE, 3 instances (reactor, 2 loops each) behind HAProxy $(haproxy -v | awk 'NR==1{print $3}')"

# --- load and the figures ------------------------------------------------------------------------
TOTAL_FAILED=0
RESULTS=()
load_start() { in_lb wrk -t2 -c32 -d"${DUR}s" "http://127.0.0.1:$LB_PORT/hello.txt" > "$WORK/wrk.out" 2>&1 & WRK=$!; }
load_end() {  # phase name; checks and records the figures
  local phase=$1 refused_before=$2 retried_before=$3 want_zero=$4   # none | refused | retried
  wait "$WRK"
  local requests errors non2xx seconds refused_now retried_now
  requests=$(awk '/requests in/ { print $1 }' "$WORK/wrk.out")
  seconds=$(awk '/requests in/ { sub(/s,$/, "", $4); print $4 }' "$WORK/wrk.out")
  # wrk prints these lines only when there is something to count.
  errors=$({ grep 'Socket errors' "$WORK/wrk.out" || echo 0; } | grep -oE '[0-9]+' | paste -sd+ | bc)
  non2xx=$(awk '/Non-2xx/ { print $NF }' "$WORK/wrk.out" || true)
  errors=$(( ${errors:-0} + ${non2xx:-0} ))
  refused_now=$(( $(refused) - refused_before ))
  retried_now=$(( $(retried) - retried_before ))
  if [ "$MODE" = lo ]; then refused_now="(not measured)"; fi
  local line="$phase: $requests requests in ${seconds}s, $errors failed, $refused_now refused connections, $retried_now retried by HAProxy"
  echo "scale_out: $line"
  RESULTS+=("$line")
  if [ "$errors" != 0 ] || [ -z "$requests" ] || [ "$requests" -lt 100 ]; then
    echo "scale_out: FAIL $phase"; cat "$WORK/wrk.out"; TOTAL_FAILED=$(( TOTAL_FAILED + 1 ))
  fi
  if [ "$MODE" = netns ] && [ "$want_zero" = refused ] && [ "$refused_now" != 0 ]; then
    echo "scale_out: FAIL $phase: HAProxy could not connect $refused_now times"; TOTAL_FAILED=$(( TOTAL_FAILED + 1 ))
  fi
  if [ "$want_zero" = retried ] && [ "$retried_now" != 0 ]; then
    echo "scale_out: FAIL $phase: HAProxy had to retry $retried_now requests"; TOTAL_FAILED=$(( TOTAL_FAILED + 1 ))
  fi
}

# 1. kill -9 one instance under load; then start it again.
r0=$(refused); t0=$(retried)
load_start
sleep 1
kill -KILL "$(cat "$WORK/b2.pid")"
load_end "kill -9 one instance" "$r0" "$t0" none
start_instance 2
wait_for "instance 2 back in the balancer" 20 all_up

# 2. Rolling reload: each instance gets a changed file and SIGHUP, one after the other.
r0=$(refused); t0=$(retried)
load_start
sleep 1
for i in $(seq "$N"); do
  write_config "$i" 2
  before=$(grep -c "configuration reloaded" "$WORK/b$i.log" || true)
  kill -HUP "$(cat "$WORK/b$i.pid")"
  wait_for "instance $i to reload" 10 bash -c "[ \$(grep -c 'configuration reloaded' '$WORK/b$i.log') -gt $before ]"
done
load_end "rolling reload (SIGHUP) of all three" "$r0" "$t0" refused

# 3. Rolling upgrade: a new binary replaces the file on disk, then each instance gets SIGUSR2.
cp "$AMPD" "$WORK/bin/ampd.new" && mv -f "$WORK/bin/ampd.new" "$WORK/bin/ampd"
r0=$(refused); t0=$(retried)
load_start
sleep 1
for i in $(seq "$N"); do
  old=$(cat "$WORK/b$i.pid")
  kill -USR2 "$old"
  wait_for "instance $i's new process" 15 bash -c "[ -s '$WORK/b$i.pid' ] && [ \"\$(cat '$WORK/b$i.pid')\" != $old ]"
  wait_for "instance $i's old process to exit" 15 bash -c "! kill -0 $old"
done
load_end "rolling upgrade (SIGUSR2) of all three" "$r0" "$t0" refused
for i in $(seq "$N"); do
  exe=$(readlink "/proc/$(cat "$WORK/b$i.pid")/exe")
  case "$exe" in *deleted*) echo "scale_out: FAIL instance $i runs a deleted binary: $exe"; TOTAL_FAILED=$(( TOTAL_FAILED + 1 ));; esac
done

# 4. SIGTERM one instance under load: HAProxy sees 503 during drain_delay and takes it out
#    before its listener closes.
r0=$(refused); t0=$(retried)
load_start
sleep 1
victim=$(cat "$WORK/b3.pid")
kill -TERM "$victim"
wait_for "HAProxy to mark the draining instance down" 5 is_state b3 DOWN
wait_for "the drained instance to exit" 15 bash -c "! kill -0 $victim"
load_end "SIGTERM (drain_delay 2s) of one instance" "$r0" "$t0" retried

# --- PROXY protocol v2: the client's own address in the access log (PROXY_V2=1) ------------------
if [ "$PROXY_V2" = 1 ]; then
  for _ in 1 2 3 4; do in_lb curl -s -o /dev/null -m 5 --interface "$CLIENT_IP" "http://127.0.0.1:$LB_PORT/hello.txt?proxy-v2"; done
  # The access log is written by a log thread, a moment later.
  if wait_for "the access log" 5 bash -c "grep -h 'proxy-v2' '$WORK'/b*.access | grep -q '^$CLIENT_IP '"; then
    echo "scale_out: PROXY v2: the access log shows the client's address $CLIENT_IP"
  else
    echo "scale_out: FAIL PROXY v2: the access log does not show $CLIENT_IP:"; grep -h "proxy-v2" "$WORK"/b*.access || true
    TOTAL_FAILED=$(( TOTAL_FAILED + 1 ))
  fi
fi

echo "RESULT scale_out mode=$MODE phases=${#RESULTS[@]} failed_checks=$TOTAL_FAILED"
[ "$TOTAL_FAILED" = 0 ]
