#!/usr/bin/env bash
# threshold.sh - where the writev/sendfile threshold belongs on this machine (JAWS §4.3).
#
#   sudo bash bench/setup.sh      # once: wrk and the /tmp/bench/www files
#   cargo build --release
#   bash bench/threshold.sh
#
# For each file size, ampd (amped, one loop, pinned to CPU 0) serves the file two ways: from
# the file cache by one writev of head + body (--sendfile-threshold above the size) and by
# sendfile from the open file (--sendfile-threshold 0). wrk -t1 -c50 keep-alive, pinned to
# CPU 1, REPS interleaved runs of DUR seconds; medians of requests/s. 127.0.0.1 only.
set -euo pipefail
cd "$(dirname "$0")/.."
AMPD=${AMPD:-$PWD/target/release/ampd}
WWW=${WWW:-/tmp/bench/www}
DUR=${DUR:-4}
REPS=${REPS:-3}
FILES=${FILES:-"f4k.bin f16k.bin f100k.bin f1m.bin"}
PORT=${PORT:-28290}

# Files the set lacks are made (random bytes) from their names: f64k.bin = 64 KiB, f1m.bin = 1 MiB.
mkdir -p "$WWW"
for file in $FILES; do
  [ -e "$WWW/$file" ] && continue
  case "$file" in
    f*k.bin) bytes=$(( ${file:1:-5} * 1024 )) ;;
    f*m.bin) bytes=$(( ${file:1:-5} * 1024 * 1024 )) ;;
    *) echo "threshold.sh: $WWW/$file is missing and its size is not in its name" >&2; exit 1 ;;
  esac
  head -c "$bytes" /dev/urandom > "$WWW/$file"
done

median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

run() { # threshold file -> req/s
  taskset -c 0 "$AMPD" serve "$WWW" --listen "127.0.0.1:$PORT" --arch amped --sendfile-threshold "$1" >/dev/null 2>&1 &
  local pid=$!
  for _ in $(seq 100); do curl -sf -o /dev/null "http://127.0.0.1:$PORT/$2" && break; sleep 0.05; done
  timeout $((DUR + 10)) taskset -c 1 wrk -t1 -c50 -d1 "http://127.0.0.1:$PORT/$2" >/dev/null 2>&1 || true
  timeout $((DUR + 10)) taskset -c 1 wrk -t1 -c50 -d"$DUR" "http://127.0.0.1:$PORT/$2" 2>/dev/null \
    | awk '/Requests\/sec/ {print $2}'
  kill "$pid"; wait "$pid" 2>/dev/null || true
}

echo "| file | writev from memory (req/s) | sendfile (req/s) | sendfile / writev |"
echo "|---|---:|---:|---:|"
for file in $FILES; do
  mem=(); sf=()
  for _ in $(seq "$REPS"); do
    mem+=("$(run 1073741824 "$file")")
    sf+=("$(run 0 "$file")")
  done
  m=$(printf '%s\n' "${mem[@]}" | median); s=$(printf '%s\n' "${sf[@]}" | median)
  awk -v f="$file" -v m="$m" -v s="$s" 'BEGIN { printf "| %s | %.0f | %.0f | %.2f |\n", f, m, s, s / m }'
done
