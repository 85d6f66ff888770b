#!/usr/bin/env bash
# compression.sh - gzip on the fly: ampd beside nginx and Caddy, side by side in one run, on a
# 100 KiB JSON and a 20 KiB HTML page, served as static files and through each server as a
# reverse proxy. Every server compresses with gzip at the same level (LEVEL, default 5) and gets
# `Accept-Encoding: gzip`; each runs one worker pinned to CPU $SERVER_CPU (ampd --arch reactor,
# one loop; nginx worker_processes 1; Caddy GOMAXPROCS=1); the origin (an nginx serving the
# same files plain) and wrk -t1 share CPU $CLIENT_CPU. Runs alternate between the servers so a
# change in the machine's load falls on all alike.
#
#   sudo bash bench/setup.sh            # once: nginx, wrk (and apt-get install caddy)
#   cargo build --release
#   bash bench/compression.sh           # about 4 minutes with the defaults
#
# Rows: json        GET /data.json (100 KiB) static: ampd compresses it once and keeps it,
#                   nginx and Caddy compress it per request
#       html        GET /page.html (20 KiB) static, as json
#       json-gz     GET /gz/data.json with a data.json.gz sibling made by `gzip -LEVEL`
#                   (ampd `precompressed`, nginx `gzip_static`, Caddy `precompressed gzip`):
#                   what no compression at request time costs
#       proxy-json  GET /data.json through each server's reverse proxy to the origin
#                   (ampd `compress = true`, nginx `gzip_proxied any`, Caddy `encode` +
#                   `reverse_proxy`)
#       proxy-html  as proxy-json, /page.html
# For each row and server: the medians of REPS runs of requests/s, the server's CPU time per
# request (user + system of its processes), and bytes received per response (head and body, from
# wrk's byte count). Written to $RESULTS: summary.md, runs.csv, raw wrk output, configurations.
#
# Knobs [defaults]: SERVERS ["ampd nginx caddy"]  ROWS ["json html json-gz proxy-json
#   proxy-html"]  LEVEL [5]  DUR [5]  REPS [3]  WARM [1]  CONNS [20]  COMPRESS_PORT
#   [BASE_PORT + 40]: +0 ampd, +1 nginx, +2 caddy, +3 the origin; and those of
#   bench/peers_lib.sh (BASE_PORT, SERVER_CPU, CLIENT_CPU, RESULTS).
# Every wrk run is bounded by `timeout`; only the processes this script started are signalled.
if [ "${1:-}" = -h ] || [ "${1:-}" = --help ]; then
  awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$0"
  exit 0
fi

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SERVERS=${SERVERS:-"ampd nginx caddy"}
source "$HERE/peers_lib.sh"
ROWS=${ROWS:-"json html json-gz proxy-json proxy-html"}
LEVEL=${LEVEL:-5}
DUR=${DUR:-5}
REPS=${REPS:-3}
WARM=${WARM:-1}
CONNS=${CONNS:-20}
COMPRESS_PORT=${COMPRESS_PORT:-$((BASE_PORT + 40))}
declare -A PORTS=([ampd]=$COMPRESS_PORT [nginx]=$((COMPRESS_PORT + 1)) [caddy]=$((COMPRESS_PORT + 2))
  [origin]=$((COMPRESS_PORT + 3)))
# Proxied rows are under /p/, which each server passes to the origin without the prefix.
declare -A ROW_PATH=([json]=/data.json [html]=/page.html [json-gz]=/gz/data.json
  [proxy-json]=/p/data.json [proxy-html]=/p/page.html)
declare -A ROW_NAME=([json]="static JSON 100 KiB" [html]="static HTML 20 KiB"
  [json-gz]="precompressed .gz JSON" [proxy-json]="proxied JSON 100 KiB"
  [proxy-html]="proxied HTML 20 KiB")
RUN=/tmp/ampd-bench-compression/run
DOCS=/tmp/ampd-bench-compression/www
HZ=$(getconf CLK_TCK)
declare -A PROC=()

command -v wrk >/dev/null || die "wrk is not installed: run bench/setup.sh"
for name in $SERVERS; do
  [ "$name" = ampd ] && continue
  command -v "$name" >/dev/null || die "$name is not installed (apt-get install $name)"
done

# The documents: JSON records and an HTML table, text as real pages are (repeated structure,
# varied values), the same bytes for every run (a fixed seed).
make_documents() {
  mkdir -p "$DOCS/gz"
  python3 - "$DOCS" <<'PY'
import json, random, sys
root = sys.argv[1]
rng = random.Random(1996)
words = "alpha beta gamma delta epsilon server cache request response header body flash".split()
records, size = [], 0
while size < 100 * 1024:
    record = {"id": len(records), "name": " ".join(rng.choices(words, k=3)),
              "price": round(rng.uniform(1, 500), 2), "tags": rng.sample(words, 3),
              "active": rng.random() < 0.5}
    records.append(record)
    size += len(json.dumps(record)) + 2
text = json.dumps(records, indent=1)[: 100 * 1024 - 2]
text = text[: text.rfind("}") + 1] + "\n]"
open(f"{root}/data.json", "w").write(text)
rows = []
while sum(map(len, rows)) < 19 * 1024:
    rows.append("<tr><td>%d</td><td>%s</td><td class=\"n\">%.2f</td></tr>\n"
                % (len(rows), " ".join(rng.choices(words, k=4)), rng.uniform(1, 99)))
page = ("<!doctype html>\n<html><head><title>bench</title><link rel=stylesheet href=s.css>"
        "</head><body><table>\n" + "".join(rows) + "</table></body></html>\n")
open(f"{root}/page.html", "w").write(page)
PY
  cp "$DOCS/data.json" "$DOCS/gz/data.json"
  gzip -"$LEVEL" -k -f -n "$DOCS/gz/data.json"
  chmod -R a+rX "$DOCS"
}

write_configs() {
  source "$HERE/nginx_conf.sh"
  local origin=127.0.0.1:${PORTS[origin]} gzip="gzip on; gzip_comp_level $LEVEL; gzip_min_length 512;
    gzip_types application/json text/css application/javascript; gzip_vary on;"
  mkdir -p "$RUN/origin/nginx" "$RUN/nginx/nginx"
  chown -R www-data:www-data "$RUN/origin" "$RUN/nginx" 2>/dev/null || true
  nginx_conf "$RUN/origin" "${PORTS[origin]}" "$DOCS" "access_log off;" > "$RUN/nginx-origin.conf"
  nginx_conf "$RUN/nginx" "${PORTS[nginx]}" "$DOCS" \
    "access_log off; $gzip gzip_proxied any; upstream origin { server $origin; keepalive 32; }" \
    "location /gz/ { gzip_static on; }
      location /p/ { proxy_pass http://origin/; proxy_http_version 1.1; proxy_set_header Connection \"\";
        proxy_buffers 16 16k; proxy_max_temp_file_size 0; }" > "$RUN/nginx.conf"
  cat > "$RUN/Caddyfile" <<CADDY
{
	admin off
	auto_https off
}
http://127.0.0.1:${PORTS[caddy]} {
	encode {
		gzip $LEVEL
		minimum_length 512
	}
	handle_path /p/* {
		reverse_proxy $origin
	}
	handle /gz/* {
		root * $DOCS
		file_server {
			precompressed gzip
		}
	}
	handle {
		root * $DOCS
		file_server
	}
}
CADDY
  cat > "$RUN/ampd.toml" <<TOML
# bench/compression.sh: ampd serving files and proxying, one loop, gzip level $LEVEL.
listen = "127.0.0.1:${PORTS[ampd]}"
arch = "reactor"
threads = 1

[upstream.origin]
servers = ["$origin"]
keepalive = 32

[[site]]
root = "$DOCS"
compress_levels = { gzip = $LEVEL }

  [[site.location]]
  path = "/p/"
  proxy_pass = "http://origin/"
  compress = true
TOML
}

# Each server must answer every row with gzip (and the body must decode to the document).
preflight() {
  local name=$1 row path file got want
  for row in $ROWS; do
    path=${ROW_PATH[$row]}
    got=$(curl -s -m 5 -H 'Accept-Encoding: gzip' -D "$RUN/head" "http://127.0.0.1:${PORTS[$name]}$path" |
      gzip -dc | md5sum)
    file=$path
    [[ $path == /p/* ]] && file=${path:2}
    want=$(md5sum < "$DOCS$file")
    grep -qi '^content-encoding: gzip' "$RUN/head" || die "$name: $row ($path) not gzip: $(head -c 300 "$RUN/head")"
    [ "$got" = "$want" ] || die "$name: $row ($path) decodes to other bytes"
  done
}

# run_once ROW NAME REP SECONDS [OUT]: one wrk run; appends to runs.csv unless OUT is given.
run_once() {
  local row=$1 name=$2 rep=$3 seconds=$4 out=${5:-$RESULTS/raw/$1-$2-$3.txt} before after
  before=$(cpu_ticks "${PROC[$name]}")
  timeout -k 2 $((seconds + 20)) taskset -c "$CLIENT_CPU" wrk -t1 -c"$CONNS" -d"${seconds}s" \
    --timeout 5s -H 'Accept-Encoding: gzip' -s "$REPO/bench/wrk/result.lua" \
    "http://127.0.0.1:${PORTS[$name]}${ROW_PATH[$row]}" > "$out" 2>&1 || true
  after=$(cpu_ticks "${PROC[$name]}")
  [ -n "${5:-}" ] && return
  awk -v row="$row" -v name="$name" -v rep="$rep" -v ticks=$((after - before)) -v hz="$HZ" '
    /^RESULT / { for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }; found = 1 }
    END {
      if (!found || v["requests"] == 0) { printf "%s,%s,%s,0,0,0,-1\n", row, name, rep; exit }
      printf "%s,%s,%s,%.0f,%.2f,%.0f,%d\n", row, name, rep, v["requests"] / (v["duration_us"] / 1e6),
        1e6 * ticks / hz / v["requests"], v["bytes"] / v["requests"], v["errors"]
    }' "$out" >> "$RESULTS/runs.csv"
  tail -n 1 "$RESULTS/runs.csv" | awk -F, '{printf "  %-10s %-5s run %s: %8s req/s %8s µs CPU/req %7s B/resp  errors %s\n", $1, $2, $3, $4, $5, $6, $7}' >&2
}

median_of() { median_csv "$RESULTS/runs.csv" "$3" "$1" "$2"; }

mkdir -p "$RUN" "$RESULTS/raw"
if [[ " $SERVERS " == *" ampd "* ]] && [ ! -x "$AMPD" ]; then
  log "building ampd (cargo build --release)"
  (cd "$REPO" && cargo build --release -p ampd >&2)
fi
make_documents
write_configs
cp "$RUN"/nginx.conf "$RUN"/Caddyfile "$RUN"/ampd.toml "$RESULTS/"
trap stop_all_procs EXIT
trap 'exit 130' INT TERM
echo "row,server,rep,rps,cpu_us_per_request,bytes_per_response,errors" > "$RESULTS/runs.csv"

start_proc origin "$CLIENT_CPU" "${PORTS[origin]}" nginx -c "$RUN/nginx-origin.conf" -e "$RUN/origin/error.log"
for name in $SERVERS; do
  case $name in
    ampd) start_proc ampd "$SERVER_CPU" "${PORTS[ampd]}" "$AMPD" run -c "$RUN/ampd.toml" ;;
    nginx) start_proc nginx "$SERVER_CPU" "${PORTS[nginx]}" nginx -c "$RUN/nginx.conf" -e "$RUN/nginx/error.log" ;;
    caddy) GOMAXPROCS=1 XDG_DATA_HOME=$RUN/caddy XDG_CONFIG_HOME=$RUN/caddy \
      start_proc caddy "$SERVER_CPU" "${PORTS[caddy]}" caddy run --config "$RUN/Caddyfile" --adapter caddyfile ;;
    *) die "unknown server $name (ampd, nginx, caddy)" ;;
  esac
  preflight "$name"
done

for row in $ROWS; do
  [ -n "${ROW_PATH[$row]:-}" ] || die "unknown row $row"
  log "row $row (${ROW_NAME[$row]}): $SERVERS"
  if [ "$WARM" -gt 0 ]; then
    for name in $SERVERS; do run_once "$row" "$name" warm "$WARM" "$RESULTS/raw/warm-$row-$name.txt"; done
  fi
  for rep in $(seq 1 "$REPS"); do
    for name in $SERVERS; do run_once "$row" "$name" "$rep" "$DUR"; done
  done
done

{
  echo "# bench/compression.sh, $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo
  echo "$(uname -sr), $(nproc) CPUs; servers on CPU $SERVER_CPU, the origin (nginx) and wrk -t1 -c$CONNS"
  echo "on CPU $CLIENT_CPU; gzip level $LEVEL, \`Accept-Encoding: gzip\`; medians of $REPS interleaved runs of ${DUR}s."
  echo "CPU: the server's user + system time per request; bytes: received per response, head and body."
  echo
  printf '| row |'; for name in $SERVERS; do printf ' %s req/s | %s µs CPU/req | %s B/resp |' "$name" "$name" "$name"; done; echo
  printf '|---|'; for name in $SERVERS; do printf -- '---:|---:|---:|'; done; echo
  for row in $ROWS; do
    printf '| %s |' "${ROW_NAME[$row]}"
    for name in $SERVERS; do
      printf ' %s | %s | %s |' "$(median_of "$row" "$name" 4)" "$(median_of "$row" "$name" 5)" "$(median_of "$row" "$name" 6)"
    done
    echo
  done
  if [[ " $SERVERS " == *" ampd "* && " $SERVERS " == *" nginx "* ]]; then
    echo
    echo "| row | ampd/nginx req/s | ampd/nginx CPU/req | ampd/nginx bytes |"
    echo "|---|---:|---:|---:|"
    for row in $ROWS; do
      awk -v name="${ROW_NAME[$row]}" -v ar="$(median_of "$row" ampd 4)" -v nr="$(median_of "$row" nginx 4)" \
          -v ac="$(median_of "$row" ampd 5)" -v nc="$(median_of "$row" nginx 5)" \
          -v ab="$(median_of "$row" ampd 6)" -v nb="$(median_of "$row" nginx 6)" 'BEGIN {
        printf "| %s | %.2f | %.2f | %.3f |\n", name, (nr > 0) ? ar / nr : 0, (nc > 0) ? ac / nc : 0,
          (nb > 0) ? ab / nb : 0 }'
    done
  fi
  errors=$(awk -F, 'NR > 1 && $7 != 0 {n++} END {print n + 0}' "$RESULTS/runs.csv")
  if [ "$errors" != 0 ]; then echo; echo "$errors runs had errors (runs.csv, raw/)."; fi
} > "$RESULTS/summary.md"
cat "$RESULTS/summary.md"
log "results: $RESULTS (summary.md, runs.csv, raw/)"
