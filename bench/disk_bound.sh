#!/usr/bin/env bash
# disk_bound.sh - Flash figures 9/10 on this machine (throughput against data-set size, every
# architecture), a hot cached file served alongside disk-bound load, Flash figure 12 (throughput
# against concurrent clients on a disk-bound data set), and the CPU cost per request of the
# event-driven engines. docs/research/architectures.md shows and explains the results.
#
#   cargo build --release -p ampd -p ampd-bench -p ampd-slowfs
#   sudo flock /tmp/ampd-bench.lock bash bench/disk_bound.sh [PART...]   # default: sweep hot engines
#   sudo flock /tmp/ampd-bench.lock bash bench/disk_bound.sh clients     # figure 12
#   sudo TRACES="cs=cs.log" bash bench/disk_bound.sh trace                 # figure 8
#
# Needs root, Linux with cgroup v1 `memory`, `blkio` (and, for CPU time, `cpuacct`) controllers
# mounted under /sys/fs/cgroup, loop devices, mkfs.ext4; the latency device also needs /dev/fuse,
# fusermount and ampd-slowfs (built above); nginx is measured when installed. When something the run needs
# is missing, the script prints one line starting with "disk_bound.sh: SKIP:" naming it and
# exits 0 without touching anything (a part that cannot run is skipped the same way while the
# others run). Any other failure exits non-zero.
#
# Two slow devices, each holding the same files (/ds/slowNNNNN.bin of FILE_SIZE bytes, and
# /hot.bin of HOT_SIZE bytes):
#   throttle  an ext4 image on a loop device whose reads the server's blkio cgroup throttles to
#             IOPS requests/s and BPS bytes/s: a bandwidth-bound disk, where concurrency cannot
#             raise the disk-bound rate;
#   latency   ampd-slowfs (crates/slowfs), a FUSE passthrough pinned to CLIENT_CPU: every read
#             of a slow* file is answered DELAY seconds after it arrives, and any number wait at
#             once (up to 256): a latency-bound device with many requests in flight, where
#             concurrent disk requests do raise the rate.
# The server runs in a memory cgroup of MEMORY bytes, which bounds its page cache (a cgroup's
# page cache is charged to it); caches are dropped before every run. Only one server runs at a
# time, pinned to SERVER_CPU; ampd-bench runs pinned to CLIENT_CPU.
#
# Parts:
#   sweep    for each data set of POINTS files (uniform random requests, bench/disk_bound_log.py)
#            and each server: CLIENTS clients replay the log; figure: output bandwidth (Flash
#            figures 9/10), on each device of DEVICES.
#   hot      HOT_FILES files under LOADS clients (one run per client count), and HOT_CLIENTS
#            clients requesting /hot.bin at the same time: the disk-bound rate, and the rate and
#            latency of a cached file while the disk is busy.
#   trace    each access log of TRACES (NAME=FILE ...: Common or Combined Log Format; its
#            files are made with their logged sizes) replayed in a loop by CLIENTS clients, the
#            most requested files that fit the memory limit read in first (Flash figure 8; the
#            logs of bench/make_trace.py, or a site's own). The files are not named slow*: the
#            latency device does not delay them, so this part runs on the throttle device.
#   clients  CLIENTS_FILES files (a data set past the memory limit) under each of CLIENT_COUNTS
#            clients: the disk-bound rate against concurrent connections (Flash figure 12). A
#            pool with fewer threads than clients (mt's 64) caps the reads in flight; an event
#            loop's do not depend on threads.
#   engines  no disk: one cached 1 KiB file, keep-alive (CLIENTS_CACHED clients), pipelined
#            (PIPELINE deep) and with MANY clients, for ENGINE_SERVERS: requests/s and server CPU
#            time per request (cpuacct), e.g. reactor with 2 loops against one amped loop.
# Every run: caches dropped, server started in the cgroups, metadata of the data set and its
# first MEMORY bytes read in (unthrottled, charged to the server's memory cgroup), WARMUP
# seconds of load left out, DURATION seconds measured; REPEAT rounds interleave the servers.
# Medians of the rounds go to $RESULTS/results.md with threads, processes and memory of each
# server, and the charts to $RESULTS/*.svg (bench/disk_bound_report.py, ampd-bench plot).
#
# Knobs (environment, defaults in brackets):
#   SERVERS ["sped amped amped-proc amped-32 reactor mt tpc mp uring nginx nginx-aio"]: amped-proc
#     has helper processes, amped-N N helper threads from the start, amped-maxN helpers grown
#     up to N, mt-N a pool of N threads (mt's default is 64), reactor and uring 2 loops or rings;
#     default is plain `ampd serve ROOT` (no --arch, no AMPD_OPTIONS: what a user gets),
#     default-ARCH the same with --arch ARCH;
#     ARCH+WORD[+WORD...] is ARCH with the flags --WORD (e.g. amped+no-path-cache; FLAG_VALUE
#     is --FLAG VALUE, e.g. amped+revalidate-after_60; the word all-off: every cache and the
#     residency test off)
#   ENGINE_SERVERS ["amped reactor1 reactor2 uring1 uring2"] (also: reactor2-spread, two loops
#     on both CPUs)
#   DEVICES ["throttle latency"]   POINTS [320 640 960 1920 3840] files per data set
#   FILE_SIZE [102400]   HOT_FILES [2000]   HOT_SIZE [1024]   LOADS [64]   HOT_CLIENTS [2]
#   CLIENT_COUNTS ["64 128 256"]   CLIENTS_FILES [1920]   TRACES [] NAME=LOG ... (trace part)
#   CLIENTS [64]   CLIENTS_CACHED [50]   MANY [1000]   PIPELINE [16]
#   MEMORY [64M]   IOPS [200]   BPS [20971520]   DELAY [0.01] seconds per read of a slow* file
#   DURATION [4]   WARMUP [1]   ENGINE_DURATION [4]   REPEAT [3]   SERVER_CPU [0]   CLIENT_CPU [1]
# With these defaults a whole run takes about 44 minutes (about 5.5 s per disk run: 11 servers,
# 3 rounds, 2 devices, 5 sweep points and one hot load; 45 runs of the engines part).
#   PORT [28790]   WORK [/tmp/ampd-disk-bound] (image, FUSE source; removed at the end unless
#   KEEP=1)   RESULTS [/tmp/ampd-bench-results/disk_bound-<timestamp>]   LOCK_WAIT [7200] s
#   PRIO [1]: run in a session of our own whose autogroup gets nice -20 (0: ordinary priority)
#   AMPD, BENCH [target/release/ampd, target/release/ampd-bench]: the binaries measured
#   SLOWFS [target/release/ampd-slowfs]: the latency device; FUSE_COUNTS [unset]: a file it
#     writes its operation counts to every half second (by type and calling thread, JSON)
#   AMPD_OPTIONS ["--revalidate-after 60 --no-precompressed"]: given to every ampd server, so
#     that it works as the nginx peers are configured (open_file_cache_valid 60s: a cached open
#     is trusted for 60 s; no gzip_static: no .gz sibling looked for). AMPD_OPTIONS="" measures
#     ampd's defaults (1 s, .br/.gz looked for), which cost lookups on the FUSE device.
#
# The whole run holds /tmp/ampd-bench.lock (taking it itself, or the one an enclosing
# `flock /tmp/ampd-bench.lock` holds). It cleans up after itself, on Ctrl-C, kill and errors
# too: servers and clients it started (by pid; leftovers only from its own cgroups), FUSE and
# ext4 mounts, the loop device, the cgroups, and WORK; and at start, once it holds the lock,
# what a run killed with SIGKILL left (cgroups ampd-disk-bound-*, mounts below WORK, the loop
# device of WORK's image). Every wait and every run is bounded in time.
set -euo pipefail

SELF=$(basename "$0")
skip() { echo "$SELF: SKIP: $*" >&2; exit 0; }
log() { printf '[%s %s] %s\n' "${SELF%.sh}" "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
AMPD=${AMPD:-$REPO/target/release/ampd}
BENCH=${BENCH:-$REPO/target/release/ampd-bench}
SLOWFS=${SLOWFS:-$REPO/target/release/ampd-slowfs}
CG=/sys/fs/cgroup

# --- what the machine must have: one line and exit 0 when it lacks it ----------------------
PARTS=${*:-sweep hot engines}
for part in $PARTS; do
  case $part in
    sweep | hot | clients | trace | engines) ;;
    *) echo "$SELF: unknown part '$part' (sweep, hot, clients, trace, engines)" >&2; exit 2 ;;
  esac
done
disk_parts=0
case " $PARTS " in *" sweep "* | *" hot "* | *" clients "* | *" trace "*) disk_parts=1 ;; esac
[ "$(uname -s)" = Linux ] || skip "needs Linux"
[ "$(id -u)" = 0 ] || skip "needs root (cgroups, loop devices, mounts, dropping caches)"
for tool in taskset flock setsid curl python3; do
  command -v "$tool" >/dev/null 2>&1 || skip "needs $tool"
done
[ -x "$AMPD" ] && [ -x "$BENCH" ] || skip "build first: cargo build --release -p ampd -p ampd-bench -p ampd-slowfs"
if [ "$disk_parts" = 1 ]; then
  [ -e $CG/memory/memory.limit_in_bytes ] \
    || skip "needs the cgroup v1 memory controller mounted at $CG/memory"
  [ -e $CG/blkio/blkio.throttle.read_iops_device ] \
    || skip "needs the cgroup v1 blkio controller (throttling) mounted at $CG/blkio"
  for tool in losetup mkfs.ext4 mount umount; do
    command -v "$tool" >/dev/null 2>&1 || skip "needs $tool"
  done
  [ -e /dev/loop-control ] || skip "needs loop devices (/dev/loop-control)"
  [ -w /proc/sys/vm/drop_caches ] || skip "needs a writable /proc/sys/vm/drop_caches"
elif [ ! -e $CG/cpuacct/cpuacct.usage ]; then
  skip "engines part: needs the cgroup v1 cpuacct controller mounted at $CG/cpuacct"
fi

# --- a session of our own at high priority, and the benchmark lock -------------------------
# As bench/peers_lib.sh: Linux shares CPU between sessions (autogroups) before nice
# values, so only a session of our own with autogroup nice -20 keeps compilations elsewhere on
# the machine from taking the cores. The parent forwards Ctrl-C (the terminal sends it to the
# parent only) so that the child cleans up.
if [ "${PRIO:-1}" = 1 ] && [ -z "${_DISK_BOUND_SESSION:-}" ]; then
  export _DISK_BOUND_SESSION=1
  setsid bash "$0" "$@" &
  child=$!
  trap 'kill -TERM $child 2>/dev/null' INT TERM HUP
  rc=0
  wait $child || rc=$?
  while kill -0 $child 2>/dev/null; do wait $child || rc=$?; done
  exit $rc
fi
if [ "${PRIO:-1}" = 1 ] && [ -w /proc/self/autogroup ]; then
  echo -20 > /proc/self/autogroup 2>/dev/null || true
fi

SERVERS=${SERVERS:-"sped amped amped-proc amped-32 reactor mt tpc mp uring nginx nginx-aio"}
ENGINE_SERVERS=${ENGINE_SERVERS:-"amped reactor1 reactor2 uring1 uring2"}
DEVICES=${DEVICES:-"throttle latency"}
AMPD_OPTIONS=${AMPD_OPTIONS-"--revalidate-after 60 --no-precompressed"}
POINTS=${POINTS:-"320 640 960 1920 3840"}
FILE_SIZE=${FILE_SIZE:-102400}
HOT_FILES=${HOT_FILES:-2000}
HOT_SIZE=${HOT_SIZE:-1024}
LOADS=${LOADS:-64}
HOT_CLIENTS=${HOT_CLIENTS:-2}
CLIENTS=${CLIENTS:-64}
CLIENT_COUNTS=${CLIENT_COUNTS:-"64 128 256"}
CLIENTS_FILES=${CLIENTS_FILES:-1920}
TRACES=${TRACES:-}
case " $PARTS " in
  *" trace "*)
    [ -n "$TRACES" ] || { echo "$SELF: the trace part needs TRACES=\"NAME=LOG ...\"" >&2; exit 2; }
    for trace in $TRACES; do
      [ "${trace%%=*}" != "$trace" ] && [ -r "${trace#*=}" ] ||
        { echo "$SELF: TRACES: '$trace' is not NAME=LOG with a readable LOG" >&2; exit 2; }
    done
    ;;
esac
CLIENTS_CACHED=${CLIENTS_CACHED:-50}
MANY=${MANY:-1000}
PIPELINE=${PIPELINE:-16}
MEMORY=${MEMORY:-64M}
IOPS=${IOPS:-200}
BPS=${BPS:-20971520}
DELAY=${DELAY:-0.01}
FUSE_COUNTS=${FUSE_COUNTS:-}
DURATION=${DURATION:-4}
WARMUP=${WARMUP:-1}
ENGINE_DURATION=${ENGINE_DURATION:-4}
REPEAT=${REPEAT:-3}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
PORT=${PORT:-28790}
WORK=${WORK:-/tmp/ampd-disk-bound}
KEEP=${KEEP:-0}
RESULTS=${RESULTS:-/tmp/ampd-bench-results/disk_bound-$(date +%Y%m%d-%H%M%S)}
LOCK_WAIT=${LOCK_WAIT:-7200}
LOG_LINES=50000

# --- state, and cleanup that runs however the script ends ----------------------------------
NAME=ampd-disk-bound-$$
MEM_CG=$CG/memory/$NAME
BLKIO_CG=$CG/blkio/$NAME
CPU_CG=""
[ -e $CG/cpuacct/cpuacct.usage ] && CPU_CG=$CG/cpuacct/$NAME
IMAGE=$WORK/ext4.img
EXT4_ROOT=$WORK/ext4
FUSE_SOURCE=$WORK/fuse-source
FUSE_ROOT=$WORK/fuse
LOOP=""
FUSE_PID=""
SERVER_PID=""
CLIENT_PIDS=()
HAVE_LATENCY=0
HAVE_THROTTLE=0
WORK_CREATED=0

kill_pid() { # pid: TERM, up to 5 s, then KILL; only ever a pid this script started
  local pid=$1 _
  [ -n "$pid" ] || return 0
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

cgroup_leftovers() { # kills what is still in our own cgroups: only processes this script started
  local group pid
  for group in "$MEM_CG" "$BLKIO_CG" "$CPU_CG"; do
    [ -n "$group" ] && [ -e "$group/cgroup.procs" ] || continue
    for pid in $(cat "$group/cgroup.procs" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
  done
}

cleanup() {
  local status=$? pid group _
  # A second signal must not cut the cleanup short: `pkill -f disk_bound.sh` reaches this
  # shell twice (directly, and forwarded by the outer one), and the second one, run as a trap
  # in the middle of this function, left the server, the FUSE mount and the cgroups behind.
  CLEANING=1
  trap - EXIT
  trap '' INT TERM HUP
  set +e
  for pid in "${CLIENT_PIDS[@]}"; do kill_pid "$pid"; done
  kill_pid "$SERVER_PID"
  cgroup_leftovers
  if [ -n "$FUSE_PID" ]; then
    fusermount -u "$FUSE_ROOT" 2>/dev/null || umount -l "$FUSE_ROOT" 2>/dev/null
    kill_pid "$FUSE_PID"
  fi
  if [ -n "$LOOP" ]; then
    if mountpoint -q "$EXT4_ROOT" 2>/dev/null; then
      umount "$EXT4_ROOT" 2>/dev/null || umount -l "$EXT4_ROOT"
    fi
    losetup -d "$LOOP" 2>/dev/null
  fi
  for group in "$MEM_CG" "$BLKIO_CG" "$CPU_CG"; do
    [ -n "$group" ] && [ -d "$group" ] || continue
    for _ in $(seq 20); do rmdir "$group" 2>/dev/null && break; sleep 0.25; done
    [ -d "$group" ] && log "could not remove cgroup $group"
  done
  [ "$KEEP" = 1 ] || [ "$WORK_CREATED" = 0 ] || rm -rf "$WORK"
  [ "$status" = 0 ] || log "stopped (status $status); cleaned up"
  exit "$status"
}
CLEANING=0
trap cleanup EXIT
trap '[ "$CLEANING" = 1 ] || exit 130' INT
trap '[ "$CLEANING" = 1 ] || exit 143' TERM HUP

# The benchmark lock, held (by our descriptor 9) until the script ends. Run as
# `flock /tmp/ampd-bench.lock bash bench/disk_bound.sh`, the script inherits flock's descriptor,
# whose open file already holds the lock: it takes that one over (a second open of the file
# would wait for ourselves). Otherwise the wait runs in the background so that Ctrl-C ends it at
# once; the lock belongs to the open file, so it stays held after that flock process exits.
inherited=""
for fd in /proc/$$/fd/*; do
  [ "$(readlink "$fd" 2>/dev/null)" = /tmp/ampd-bench.lock ] && inherited=${fd##*/}
done
if [ -n "$inherited" ] && flock -n "$inherited"; then
  eval "exec 9>&$inherited $inherited>&-"
else
  exec 9> /tmp/ampd-bench.lock
fi
if ! flock -n 9; then
  log "waiting for /tmp/ampd-bench.lock (another benchmark is running; at most ${LOCK_WAIT}s)"
  flock -w "$LOCK_WAIT" 9 &
  CLIENT_PIDS=($!)
  wait "${CLIENT_PIDS[0]}" || die "gave up waiting for /tmp/ampd-bench.lock after ${LOCK_WAIT}s"
  CLIENT_PIDS=()
fi

# wait_bg PID...: waits for background jobs in a way a signal interrupts at once.
wait_bg() {
  local pid
  for pid in "$@"; do wait "$pid" || true; done
}

# pause SECONDS: a sleep that Ctrl-C interrupts at once (bash runs traps between waits).
pause() { sleep "$1" & wait $! || true; }

drop_caches() { sync; echo 3 > /proc/sys/vm/drop_caches; }

# clean_leftovers: what a run that was killed with SIGKILL (or lost its machine) left behind:
# the servers still in its cgroups (named ampd-disk-bound-PID; only this script makes them, and
# while we hold the lock no other run is alive), its mounts below WORK and the loop device of
# its image. Says what it removes.
clean_leftovers() {
  local group pid mounted loop _
  for group in $CG/memory/ampd-disk-bound-* $CG/blkio/ampd-disk-bound-* $CG/cpuacct/ampd-disk-bound-*; do
    [ -d "$group" ] && [ "$group" != "$MEM_CG" ] && [ "$group" != "$BLKIO_CG" ] && [ "$group" != "$CPU_CG" ] || continue
    # A run still alive (which could only be one started without the lock) keeps its cgroups.
    kill -0 "${group##*-}" 2>/dev/null && continue
    log "removing cgroup $group left by an earlier run"
    for pid in $(cat "$group/cgroup.procs" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
    for _ in $(seq 20); do rmdir "$group" 2>/dev/null && break; sleep 0.25; done
  done
  if mountpoint -q "$FUSE_ROOT" 2>/dev/null; then
    log "unmounting $FUSE_ROOT left by an earlier run"
    fusermount -u "$FUSE_ROOT" 2>/dev/null || umount -l "$FUSE_ROOT"
  fi
  if mountpoint -q "$EXT4_ROOT" 2>/dev/null; then
    log "unmounting $EXT4_ROOT left by an earlier run"
    umount "$EXT4_ROOT" 2>/dev/null || umount -l "$EXT4_ROOT"
  fi
  if [ -e "$IMAGE" ]; then
    for loop in $(losetup -j "$IMAGE" -O NAME -n 2>/dev/null); do
      log "detaching $loop (of $IMAGE) left by an earlier run"
      losetup -d "$loop"
    done
  fi
  for mounted in "$EXT4_ROOT" "$FUSE_ROOT"; do
    mountpoint -q "$mounted" 2>/dev/null && die "$mounted is still mounted: umount it first"
  done
  return 0
}

source "$REPO/bench/disk_bound_lib.sh"

case $WORK in /* ) [ "$WORK" != / ] || die "WORK must not be /" ;; *) die "WORK must be an absolute path" ;; esac
clean_leftovers
rm -rf "$WORK"
mkdir -p "$WORK" "$RESULTS"
WORK_CREATED=1
log "results: $RESULTS"
{
  echo "date=$(date -Iseconds)"; echo "kernel=$(uname -r)"; echo "cpus=$(nproc)"
  echo "commit=$(git -c safe.directory='*' -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "nginx=$(nginx -v 2>&1 | sed 's/.*nginx\///' || true)"
  for knob in PARTS SERVERS ENGINE_SERVERS DEVICES POINTS FILE_SIZE HOT_FILES HOT_SIZE LOADS \
    HOT_CLIENTS CLIENT_COUNTS CLIENTS_FILES TRACES CLIENTS CLIENTS_CACHED MANY PIPELINE MEMORY IOPS BPS DELAY DURATION WARMUP \
    ENGINE_DURATION REPEAT SERVER_CPU CLIENT_CPU AMPD_OPTIONS; do
    echo "$knob=${!knob}"
  done
} > "$RESULTS/settings.txt"

[ "$disk_parts" = 1 ] && setup_devices
for part in $PARTS; do
  case $part in
    sweep | hot | clients | trace) part_disk "$part" ;;
    engines) part_engines ;;
  esac
done
python3 "$REPO/bench/disk_bound_report.py" "$RESULTS" "$BENCH"
log "done: $RESULTS/results.md"
