#!/usr/bin/env bash
# instructions.sh - ampd's own instructions per request on a cached file (callgrind), the one
# figure of this machine that does not move with its load: CPU time per request on row a swings
# by ±5 % from run to run, the count of instructions by well under 1 %, so a change to the code
# on the request path can be judged here first and confirmed with bench/peers.sh.
#
#   sudo bash bench/setup.sh          # once: wrk, valgrind, /tmp/bench/www
#   cargo build --release
#   bash bench/instructions.sh        # about 20 s
#
# ampd (`serve`, one loop of ARCH) runs under `valgrind --tool=callgrind`, counting only what
# the event loop's turns run (`--toggle-collect` on the loop's `drive`); `wrk -t1 -cCONNS`
# fetches PATH for DUR seconds (callgrind slows ampd some fifty times, so the client is idle
# most of the time and the turns hold one or two requests each). Prints the requests, the
# instructions counted and their quotient; with TOP=N also the N functions with the most
# instructions of their own. Only the callgrind output (OUT) is written.
#
# Knobs [defaults]: ARCH [reactor]  CONNS [10]  DUR [4]  PATH_ [/f1k.bin]  WWW [/tmp/bench/www]
#   PORT [28997]  SERVER_CPU [0]  CLIENT_CPU [1]  OUT [/tmp/ampd-instructions.out]  TOP [0]
set -euo pipefail
if [ "${1:-}" = -h ] || [ "${1:-}" = --help ]; then
  awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$0"
  exit 0
fi

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
AMPD=$REPO/target/release/ampd
ARCH=${ARCH:-reactor}
CONNS=${CONNS:-10}
DUR=${DUR:-4}
PATH_=${PATH_:-/f1k.bin}
WWW=${WWW:-/tmp/bench/www}
PORT=${PORT:-28997}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
OUT=${OUT:-/tmp/ampd-instructions.out}
TOP=${TOP:-0}

die() { echo "instructions.sh: $*" >&2; exit 1; }
for tool in valgrind callgrind_annotate wrk; do
  command -v "$tool" >/dev/null || die "$tool is not installed: run bench/setup.sh"
done
[ -x "$AMPD" ] || die "$AMPD is missing: cargo build --release"
[ -d "$WWW" ] || die "$WWW is missing: run bench/setup.sh"

rm -f "$OUT"
taskset -c "$SERVER_CPU" valgrind --tool=callgrind --callgrind-out-file="$OUT" \
  --toggle-collect='ampd::engine::event_loop::drive::*' \
  "$AMPD" serve "$WWW" --arch "$ARCH" --threads 1 --listen "127.0.0.1:$PORT" \
  > "$OUT.log" 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null || true' EXIT
ready=0
for _ in $(seq 300); do
  if (exec 3<> "/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then ready=1; break; fi
  kill -0 "$server" 2>/dev/null || die "ampd under valgrind exited ($OUT.log)"
  sleep 0.1
done
[ "$ready" = 1 ] || die "ampd under valgrind did not listen within 30 s ($OUT.log)"

result=$(timeout $((DUR + 30)) taskset -c "$CLIENT_CPU" \
  wrk -t1 -c"$CONNS" -d"${DUR}s" "http://127.0.0.1:$PORT$PATH_" 2>&1) || die "wrk failed: $result"
kill -INT "$server"
wait "$server" 2>/dev/null || true
trap - EXIT

requests=$(awk '/requests in/ {print $1}' <<< "$result")
[ -n "$requests" ] && [ "$requests" -gt 0 ] || die "wrk completed no request: $result"
grep -q "Non-2xx" <<< "$result" && die "some responses were not 2xx: $result"
instructions=$(callgrind_annotate "$OUT" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
[ -n "$instructions" ] || die "no instruction count in $OUT"
echo "ampd $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo '?') --arch $ARCH, $PATH_:" \
  "$requests requests, $instructions instructions, $((instructions / requests)) per request"
if [ "$TOP" -gt 0 ]; then
  callgrind_annotate "$OUT" 2>/dev/null | awk '/file:function/ {on = 1; next} on && /%\)/' | head -n "$TOP"
fi
