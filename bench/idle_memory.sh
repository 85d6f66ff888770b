#!/usr/bin/env bash
# idle_memory.sh - memory per idle keep-alive connection, ampd against nginx, in one run.
#
#   sudo bash bench/setup.sh          # once: nginx and the /tmp/bench/www docroot
#   cargo build --release
#   bash bench/idle_memory.sh              # CONNS=10000 by default
#
# Each server (one worker / one loop, pinned to CPU 0) gets CONNS connections that each send
# one request for a 1 KiB file, read the response and then stay open and idle. The figure is
# (server RSS with the idle connections - RSS before them) / CONNS, where RSS sums VmRSS over
# the server's processes, and the total RSS / CONNS (nginx preallocates its connection array
# from worker_connections at start-up, so its "before" already holds part of the per-connection
# cost; worker_connections is set to CONNS + 64 to keep that part fair). Kernel socket buffers are not in RSS for either server. Traffic goes
# to 127.0.0.1 only; the client holds the connections for HOLD seconds and then exits.
set -euo pipefail
cd "$(dirname "$0")/.."
CONNS=${CONNS:-10000}
HOLD=${HOLD:-3}
WWW=${WWW:-/tmp/bench/www}
OUT=${OUT:-/tmp/bench/idle-memory}
AMPD=${AMPD:-$PWD/target/release/ampd}
mkdir -p "$OUT"
ulimit -n "$(ulimit -Hn)"   # 10,000 connections plus a margin

rss_kib() { # sum of VmRSS over a process and its children
  local total=0 pid
  for pid in "$@" $(pgrep -P "$(echo "$@" | tr ' ' ',')" 2>/dev/null || true); do
    local kib
    kib=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
    total=$((total + ${kib:-0}))
  done
  echo "$total"
}

wait_port() {
  for _ in $(seq 100); do
    curl -sf -o /dev/null "http://127.0.0.1:$1/f1k.bin" && return 0
    sleep 0.05
  done
  echo "server on port $1 did not come up" >&2
  return 1
}

hold_idle() { # port -> prints "opened N" when all are idle, then holds them
  python3 - "$1" "$CONNS" "$HOLD" <<'PY'
import socket, sys, time
port, count, hold = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
request = b"GET /f1k.bin HTTP/1.1\r\nHost: bench\r\n\r\n"
socks = []
deadline = time.time() + 120
for _ in range(count):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(request)
    socks.append(s)
for s in socks:
    got = b""
    while b"\r\n\r\n" not in got or len(got) < got.index(b"\r\n\r\n") + 4 + 1024:
        chunk = s.recv(65536)
        if not chunk or time.time() > deadline:
            sys.exit("connection closed or timed out before its response")
        got += chunk
print(f"opened {len(socks)}", flush=True)
time.sleep(hold)
PY
}

measure() { # name port pid...
  local name=$1 port=$2; shift 2
  wait_port "$port"
  local before after
  before=$(rss_kib "$@")
  hold_idle "$port" > "$OUT/$name.client" &
  local client=$!
  for _ in $(seq 1200); do grep -q opened "$OUT/$name.client" 2>/dev/null && break; sleep 0.1; done
  sleep 0.6   # let ampd's 250 ms sweep shed the buffers of idle connections
  after=$(rss_kib "$@")
  wait "$client" || { echo "$name: client failed" >&2; return 1; }
  awk -v n="$name" -v b="$before" -v a="$after" -v c="$CONNS" \
    'BEGIN { printf "| %s | %d | %d | %.0f | %.0f |\n", n, b, a, (a - b) * 1024 / c, a * 1024 / c }'
}

cat > "$OUT/nginx.conf" <<NGX
worker_processes 1;
worker_rlimit_nofile 65536;
daemon off;
pid $OUT/nginx.pid;
error_log $OUT/nginx.err;
events { worker_connections $((CONNS + 64)); }
http {
  access_log off;
  sendfile on;
  keepalive_timeout 75s;
  keepalive_requests 100000;
  server { listen 127.0.0.1:28181; root $WWW; }
}
NGX

echo "| server | RSS before (KiB) | RSS with $CONNS idle (KiB) | added bytes per connection | total RSS per connection (bytes) |"
echo "|---|---:|---:|---:|---:|"
taskset -c 0 nginx -c "$OUT/nginx.conf" &
nginx_pid=$!
trap 'kill $nginx_pid ${ampd_pid:-} 2>/dev/null || true' EXIT
measure nginx 28181 "$nginx_pid"
kill "$nginx_pid"; wait "$nginx_pid" 2>/dev/null || true

taskset -c 0 "$AMPD" serve "$WWW" --listen 127.0.0.1:28182 --arch amped > "$OUT/ampd.out" &
ampd_pid=$!
measure ampd 28182 "$ampd_pid"
kill "$ampd_pid"; wait "$ampd_pid" 2>/dev/null || true
