#!/usr/bin/env bash
# optimisations.sh - Flash figure 11: what each of amped's caches (path translation, response
# head, file data) and its residency test is worth, each turned off alone and all together.
# Two workloads, about 7 minutes with the defaults (without waiting for the benchmark lock):
#   cached  the single-file test (Flash §6.1, as the paper measured figure 11): CLIENTS
#           clients request one cached file of each size of SIZES; the six variants run side by
#           side in one ampd-bench invocation, interleaved;
#   disk    the hot part of bench/disk_bound.sh: LOAD clients on 2,000 files of 100 KiB (three
#           times the memory cgroup) with HOT_CLIENTS clients on a cached 1 KiB file beside
#           them, on the throttled device: the disk-bound rate and the cached file's rate; with
#           the default command line (`ampd serve DIR`), amped tuned as bench/disk_bound.sh
#           tunes it (--revalidate-after 60 --no-precompressed), nginx and nginx with aio
#           threads beside the variants (defaults-hot.svg).
# Every variant is `ampd serve DIR --arch amped` with no other option than the ones it turns
# off (the defaults a user gets), so the baseline is the default configuration of amped.
#
#   sudo bash bench/setup.sh && cargo build --release -p ampd -p ampd-bench -p ampd-slowfs
#   sudo bash bench/evaluation/optimisations.sh [cached] [disk]
#
# Knobs: SIZES [1k,8k,32k,128k]   CLIENTS [50]   DURATION [2s]   WARMUP [1s]   REPEAT [3]
# (cached); LOAD [64]   HOT_CLIENTS [2]   DISK_DURATION [4] s   DISK_REPEAT [3]   MEMORY [64M]
# and the knobs of bench/disk_bound.sh (disk); BASE_PORT [28680]   SERVER_CPU [0]
# CLIENT_CPU [1]. The disk workload needs root and cgroup v1 (memory, blkio) with loop devices.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$EVAL_DIR/disk_lib.sh"
eval_begin optimisations

# A session of our own whose autogroup gets nice -20, as bench/peers_lib.sh explains.
if [ "${PRIO:-1}" = 1 ] && [ -z "${_AMPD_EVAL_SESSION:-}" ]; then
  export _AMPD_EVAL_SESSION=1
  exec setsid -w bash "$0" "$@"
fi
if [ "${PRIO:-1}" = 1 ] && [ -w /proc/self/autogroup ]; then
  echo -20 > /proc/self/autogroup 2>/dev/null || true
fi

PARTS=${*:-cached disk}
SIZES=${SIZES:-1k,8k,32k,128k}
CLIENTS=${CLIENTS:-50}
DURATION=${DURATION:-2s}
WARMUP=${WARMUP:-1s}
REPEAT=${REPEAT:-3}
BASE_PORT=${BASE_PORT:-28680}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
AMPD=$PROJECT_DIR/target/release/ampd
BENCH=$PROJECT_DIR/target/release/ampd-bench
# name: the flags it adds to `ampd serve DIR --arch amped`
VARIANTS=(all-on no-path-cache no-header-cache no-file-cache no-residency-test all-off)
# Chart labels, short enough for a bar chart's axis.
declare -A LABEL=([all-on]="all on" [no-path-cache]="no path" [no-header-cache]="no header"
                  [no-file-cache]="no file" [no-residency-test]="no residency" [all-off]="all off")
declare -A FLAGS=(
  [all-on]=""
  [no-path-cache]="--no-path-cache"
  [no-header-cache]="--no-header-cache"
  [no-file-cache]="--no-file-cache"
  [no-residency-test]="--no-residency-test"
  [all-off]="--no-path-cache --no-header-cache --no-file-cache --no-residency-test"
)
PIDS=()
stop_servers() {
  local pid
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  PIDS=()
}
trap stop_servers EXIT
trap 'exit 130' INT TERM

cached_part() {
  local www=$OUT/www index=0 variant port targets=() _
  mkdir -p "$www"
  "$BENCH" sweep --sizes "$SIZES" --create "$www" > /dev/null
  for variant in "${VARIANTS[@]}"; do
    port=$((BASE_PORT + index))
    index=$((index + 1))
    # shellcheck disable=SC2086 # FLAGS holds a list of words
    taskset -c "$SERVER_CPU" "$AMPD" serve "$www" --listen "127.0.0.1:$port" --arch amped \
      ${FLAGS[$variant]} > "$OUT/server-$variant.log" 2>&1 &
    PIDS+=($!)
    for _ in $(seq 100); do
      curl -s -o /dev/null --max-time 2 "http://127.0.0.1:$port/" && break
      sleep 0.1
    done
    targets+=(--target "$variant=http://127.0.0.1:$port/")
  done
  flock /tmp/ampd-bench.lock taskset -c "$CLIENT_CPU" "$BENCH" sweep --sizes "$SIZES" \
    "${targets[@]}" --clients "$CLIENTS" --duration "$DURATION" --warmup "$WARMUP" \
    --repeat "$REPEAT" --json "$OUT/optimisations-cached.json" \
    --csv "$OUT/optimisations-cached.csv" | tee "$OUT/optimisations-cached.txt"
  stop_servers
  local labelled=()
  for variant in "${VARIANTS[@]}"; do labelled+=("$variant=${LABEL[$variant]}"); done
  subset "$OUT/optimisations-cached.json" "$OUT/optimisations-cached-labelled.json" "${labelled[@]}"
  redraw "$OUT/optimisations-cached-labelled.json" "$OUT/optimisations-cached.svg" requests_per_second \
    "Flash's optimisations one at a time: cached single file (amped)" \
    "$(conditions "$CLIENTS clients, keep-alive, one file per size, ${DURATION} x $REPEAT interleaved, median")"
  publish "$OUT/optimisations-cached.svg"
}

disk_part() {
  local device=$OUT/runs load=${LOAD:-64} variant servers=() names=() subtitle json
  for variant in "${VARIANTS[@]}"; do
    case $variant in
      all-on) servers+=(amped) ; names+=("amped=${LABEL[$variant]}") ;;
      *) servers+=("amped+$variant") ; names+=("amped+$variant=${LABEL[$variant]}") ;;
    esac
  done
  # Beside them, what a user gets against a tuned line and nginx: plain `ampd serve DIR`, amped
  # with the options bench/disk_bound.sh gives its engines, and nginx with and without aio.
  servers+=(default "amped+revalidate-after_60+no-precompressed" nginx nginx-aio)
  rm -rf "$device"
  # AMPD_OPTIONS empty: the variants differ from the defaults only in what they turn off.
  SERVERS="${servers[*]}" CHART_SERVERS="${servers[*]}" AMPD_OPTIONS="" DEVICES=throttle \
    LOADS=$load REPEAT=${DISK_REPEAT:-3} DURATION=${DISK_DURATION:-4} WARMUP=1 \
    RESULTS=$device bash "$PROJECT_DIR/bench/disk_bound.sh" hot
  subtitle=$(conditions "$load clients on 2,000 files of 100 KiB, ${HOT_CLIENTS:-2} on a cached 1 KiB file, ${DISK_DURATION:-4} s x ${DISK_REPEAT:-3}, median; $(disk_conditions)")
  json=$device/hot-throttle-c$load
  subset "$json-load.json" "$OUT/optimisations-disk.json" "${names[@]}"
  subset "$json.json" "$OUT/optimisations-disk-hot.json" "${names[@]}"
  subset "$json.json" "$OUT/defaults-hot.json" "amped=amped, defaults" default \
    "amped+revalidate-after_60+no-precompressed=amped tuned" nginx nginx-aio
  redraw "$OUT/optimisations-disk.json" "$OUT/optimisations-disk.svg" requests_per_second \
    "Flash's optimisations one at a time: disk-bound requests (amped)" "$subtitle"
  redraw "$OUT/optimisations-disk-hot.json" "$OUT/optimisations-disk-hot.svg" requests_per_second \
    "Flash's optimisations one at a time: cached file beside the disk load" "$subtitle"
  redraw "$OUT/defaults-hot.json" "$OUT/defaults-hot.svg" requests_per_second \
    "Cached file beside the disk load: defaults, tuned, nginx" "$subtitle"
  cp "$device/results.md" "$OUT/results-disk.md"
  publish "$OUT/optimisations-disk.svg" "$OUT/optimisations-disk-hot.svg" "$OUT/defaults-hot.svg"
}

for part in $PARTS; do
  case $part in
    cached) cached_part ;;
    disk) disk_part ;;
    *) echo "optimisations.sh: unknown part '$part' (cached, disk)" >&2; exit 2 ;;
  esac
done
