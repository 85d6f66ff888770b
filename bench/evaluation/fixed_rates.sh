#!/usr/bin/env bash
# fixed_rates.sh - Abyss table 2 and figures 13-14: httperf-style fixed request rates, rising from
# well below to past what the server can do, each request on a new connection (httperf
# --num-conns/--rate, as the paper measured), and for each offered rate the reply rate, the
# response time (median and 99th percentile) and the errors. ampd with its default engine and
# default settings (`ampd serve DIR`, the reactor) beside nginx, lighttpd, h2o and Apache (event
# MPM; Abyss's comparison was Apache 2.0), and howl (bench/howl.c: a pre-built answer, what one
# core can do at best with a connection per request, so the client's own ceiling shows).
#
#   sudo bash bench/setup.sh && cargo build --release -p ampd -p ampd-bench
#   bash bench/evaluation/fixed_rates.sh       # about 5 minutes with the defaults
#
# Writes $OUT/fixed-rates.{json,csv,txt} and three charts (reply rate, response time, errors
# against the offered rate), published to docs/research/evaluation/.
#
# Knobs: RATES [2.5k (the paper's rate),5k,...,25k requests/s; above ~25k/s one client core cannot open the connections
#   in time, which the table's `offered` column shows]  URL_PATH [/f1k.bin: 1 KiB, within the
#   paper's 20 B-4 KB]  CLIENTS [10000: connections open at once at most, like httperf's
#   descriptor limit; high enough that requests queue in the server, not in the client]
#   TIMEOUT [1s: httperf --timeout; a request not answered this long after it was due is an error]
#   DURATION [5s]  WARMUP [1s]  REPEAT [1]  SERVERS ["ampd nginx lighttpd h2o apache2 howl"]
#   BASE_PORT [29581]  and the other knobs of bench/peers_lib.sh. The paper's scale: DURATION=600s
#   REPEAT=3 (ten-minute tests, three samples).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
eval_begin fixed-rates
RESULTS=$OUT
SERVERS=${SERVERS:-"ampd nginx lighttpd h2o apache2 howl"}
BASE_PORT=${BASE_PORT:-29581}
CLIENTS=${CLIENTS:-10000}
REPEAT=${REPEAT:-1}
AMPD_ARCH=${AMPD_ARCH:-reactor}
source "$EVAL_DIR/../peers_lib.sh"
RATES=${RATES:-2.5k,5k,10k,15k,20k,25k}
URL_PATH=${URL_PATH:-/f1k.bin}
TIMEOUT=${TIMEOUT:-1s}

prepare
start_all
targets=()
for server in $LIVE; do
  targets+=(--target "$server=http://127.0.0.1:${PORT[$server]}$URL_PATH")
done
log "offered rates $RATES on:$LIVE"
flock /tmp/ampd-bench.lock taskset -c "$CLIENT_CPU" "$BENCH" rates --rates "$RATES" --close \
  "${targets[@]}" --clients "$CLIENTS" --timeout "$TIMEOUT" --duration "$DURATION" \
  --warmup "$WARMUP" --repeat "$REPEAT" --json "$OUT/fixed-rates.json" \
  --csv "$OUT/fixed-rates.csv" | tee "$OUT/fixed-rates.txt"

what="$URL_PATH, a new connection per request, $DURATION per rate, at most $CLIENTS open, timeout $TIMEOUT"
[ "$REPEAT" = 1 ] || what="$what, median of $REPEAT runs"
subtitle=$(conditions "$what")
"$BENCH" plot "$OUT/fixed-rates.json" -o "$OUT/fixed-rates-replies.svg" \
  --title "Reply rate against offered rate" --subtitle "$subtitle"
"$BENCH" plot "$OUT/fixed-rates.json" -o "$OUT/fixed-rates-response-time.svg" \
  --metric latency_p50_ms,latency_p99_ms \
  --title "Response time against offered rate (median, p99 dashed)" --subtitle "$subtitle"
"$BENCH" plot "$OUT/fixed-rates.json" -o "$OUT/fixed-rates-errors.svg" \
  --metric errors_per_second --title "Errors against offered rate" --subtitle "$subtitle"
publish "$OUT"/fixed-rates-{replies,response-time,errors}.svg

# The figures table of docs/research/evaluation.md: per server and offered rate, replies/s, median and
# p99 response time, errors/s, and the errors by kind.
python3 - "$OUT/fixed-rates.json" <<'EOF' | tee "$OUT/fixed-rates.md"
import json, sys
report = json.load(open(sys.argv[1]))
print("| offered/s | server | offered | replies/s | median ms | p99 ms | errors/s | timeouts | refused | reset | other | waiting at the end |")
print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for point in sorted(report["points"], key=lambda p: (p["x"], report["points"].index(p))):
    m = point["median"]
    e = m["errors"]
    other = m["errors_total"] - e["timeout"] - e["connect_refused"] - e["reset"]
    waiting = m["offered"] - m["responses"] - m["errors_total"]
    print(f"| {point['x']:,.0f} | {point['target']} | {m['offered']:,} | {m['requests_per_second']:,.0f} | "
          f"{m['latency_ms']['p50']:.2f} | {m['latency_ms']['p99']:.2f} | "
          f"{m['errors_total'] / m['seconds']:,.0f} | {e['timeout']:,} | "
          f"{e['connect_refused']:,} | {e['reset']:,} | {other:,} | {waiting:,} |")
EOF
log "results: $OUT"
