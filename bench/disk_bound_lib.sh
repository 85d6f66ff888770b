# disk_bound_lib.sh - the devices, servers and runs of bench/disk_bound.sh (sourced by it, not
# run; it uses the knobs and state that script sets).

# --- devices --------------------------------------------------------------------------------

# latency_missing: prints what the latency device lacks (nothing when it can run).
latency_missing() {
  [ -e /dev/fuse ] || { echo "/dev/fuse"; return; }
  command -v fusermount >/dev/null 2>&1 || command -v fusermount3 >/dev/null 2>&1 ||
    { echo "fusermount (fuse3 or fuse)"; return; }
  [ -x "$SLOWFS" ] || { echo "$SLOWFS (cargo build --release -p ampd-slowfs)"; return; }
}

max_files() {
  local most=$HOT_FILES point
  for point in $POINTS $CLIENTS_FILES; do [ "$point" -gt "$most" ] && most=$point; done
  echo "$most"
}

# trace_log NAME: the log file TRACES names NAME.
trace_log() {
  local trace
  for trace in $TRACES; do
    [ "${trace%%=*}" = "$1" ] && { echo "${trace#*=}"; return; }
  done
}

# trace_lists LOG PREFIX MEMORY_BYTES: writes PREFIX.all (every file the log names, relative
# to the root, most requested first) and PREFIX.warm (the most requested files that fit in nine
# tenths of MEMORY_BYTES); prints the bytes of all the files.
trace_lists() {
  python3 - "$1" "$2" "$3" <<'EOF'
import collections, re, sys
log, prefix, memory = sys.argv[1], sys.argv[2], int(sys.argv[3])
line_re = re.compile(r'"GET (\S+)[^"]*" (\d{3}) (\d+|-)')
counts, sizes = collections.Counter(), {}
for line in open(log, errors="replace"):
    match = line_re.search(line)
    if match and match.group(2).startswith(("2", "3")):
        path = match.group(1).split("?")[0].lstrip("/")
        counts[path] += 1
        if match.group(3) != "-" and match.group(2) == "200":
            sizes[path] = max(sizes.get(path, 0), int(match.group(3)))
ranked = [path for path, _ in counts.most_common()]
with open(prefix + ".all", "w") as out:
    out.writelines(path + "\n" for path in ranked)
used = 0
with open(prefix + ".warm", "w") as out:
    for path in ranked:
        if used + sizes.get(path, 0) > memory * 9 // 10:
            break
        used += sizes.get(path, 0)
        out.write(path + "\n")
print(sum(sizes.values()))
EOF
}

# make_files ROOT: the data set, the files of the traces and the hot file below ROOT.
make_files() {
  local root=$1 trace
  mkdir -p "$root"
  "$BENCH" replay --log "$WORK/logs/all.log" --create "$root" --quiet >/dev/null
  for trace in $TRACES; do
    "$BENCH" replay --log "${trace#*=}" --create "$root" --quiet >/dev/null
  done
  head -c "$HOT_SIZE" /dev/urandom > "$root/hot.bin"
  chmod -R a+rX "$root"
}

setup_devices() {
  local most missing number maj_min trace trace_bytes=0 _
  most=$(max_files)
  mkdir -p "$WORK/logs" "$WORK/run"
  chmod 755 "$WORK"
  # Logs: every file once (to create them), and one log of uniform draws per data set.
  python3 "$REPO/bench/disk_bound_log.py" "$most" "$FILE_SIZE" 0 > "$WORK/logs/all.log"
  awk '{ sub(/^\/ds\//, "", $7); print $7 }' "$WORK/logs/all.log" > "$WORK/names"
  for number in $POINTS $HOT_FILES $CLIENTS_FILES; do
    [ -e "$WORK/logs/$number.log" ] ||
      python3 "$REPO/bench/disk_bound_log.py" "$number" "$FILE_SIZE" "$LOG_LINES" > "$WORK/logs/$number.log"
  done

  mkdir -p "$MEM_CG" "$BLKIO_CG"
  [ -n "$CPU_CG" ] && mkdir -p "$CPU_CG"
  echo "$MEMORY" > "$MEM_CG/memory.limit_in_bytes"
  for trace in $TRACES; do
    trace_bytes=$(( trace_bytes + $(trace_lists "${trace#*=}" "$WORK/logs/trace-${trace%%=*}" \
      "$(cat "$MEM_CG/memory.limit_in_bytes")") ))
  done

  case " $DEVICES " in
    *" throttle "*)
      log "throttle device: ext4 image for $most files of $FILE_SIZE bytes"
      mkdir -p "$EXT4_ROOT"
      truncate -s $(( (most * FILE_SIZE + trace_bytes) * 12 / 10 + (96 << 20) )) "$IMAGE"
      # No lazy inode-table initialisation: it would write in the background while we measure.
      mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$IMAGE" ||
        die "mkfs.ext4 failed on $IMAGE"
      # Direct I/O from the loop device to its image file: no second copy of each block in the
      # host's page cache (the cgroup limit bounds the only cache that matters).
      LOOP=$(losetup --find --show --direct-io=on "$IMAGE" 2>/dev/null) ||
        skip "no free loop device could be attached (losetup --find failed: a container?)"
      mount -o noatime "$LOOP" "$EXT4_ROOT" 2>/dev/null ||
        skip "cannot mount an ext4 loop device here (mount $LOOP failed: a container?)"
      make_files "$EXT4_ROOT"
      maj_min=$(cat "/sys/block/$(basename "$LOOP")/dev")
      echo "$maj_min $IOPS" > "$BLKIO_CG/blkio.throttle.read_iops_device"
      echo "$maj_min $BPS" > "$BLKIO_CG/blkio.throttle.read_bps_device"
      log "throttle device: $LOOP ($maj_min) on $EXT4_ROOT, reads limited to $IOPS/s and $BPS bytes/s"
      HAVE_THROTTLE=1
      ;;
  esac
  case " $DEVICES " in
    *" latency "*)
      missing=$(latency_missing)
      if [ -n "$missing" ]; then
        echo "$SELF: SKIP: latency device: needs $missing" >&2
      else
        log "latency device: FUSE (ampd-slowfs), ${DELAY}s per read of a slow* file"
        mkdir -p "$FUSE_ROOT"
        make_files "$FUSE_SOURCE"
        # On the client's CPU: the device is not the server, and its little CPU (a pread and a
        # reply per read; the wait is a timer) must not come out of the server's core.
        taskset -c "$CLIENT_CPU" "$SLOWFS" "$FUSE_SOURCE" "$FUSE_ROOT" "$DELAY" ${FUSE_COUNTS:+"$FUSE_COUNTS"} \
          > "$WORK/run/fuse.log" 2>&1 9>&- &
        FUSE_PID=$!
        for _ in $(seq 100); do mountpoint -q "$FUSE_ROOT" && break; sleep 0.1; done
        mountpoint -q "$FUSE_ROOT" || die "the FUSE filesystem did not mount: $(tail -n 3 "$WORK/run/fuse.log")"
        HAVE_LATENCY=1
      fi
      ;;
  esac
  [ "$HAVE_THROTTLE$HAVE_LATENCY" != 00 ] || skip "no slow device could be set up (DEVICES=$DEVICES)"
  write_nginx_configs
}

device_root() {
  case $1 in
    throttle) echo "$EXT4_ROOT" ;;
    latency) echo "$FUSE_ROOT" ;;
    cached) echo "$WORK/cached" ;;
  esac
}

available_devices() {
  local device
  for device in $DEVICES; do
    case $device in
      throttle) [ "$HAVE_THROTTLE" = 1 ] && echo throttle ;;
      latency) [ "$HAVE_LATENCY" = 1 ] && echo latency ;;
    esac
  done
  return 0
}

# --- servers --------------------------------------------------------------------------------

source "$REPO/bench/nginx_conf.sh"

# nginx with one worker, as bench/peers_lib.sh, and the same with `aio threads` (a pool of 32
# threads does file reads and sendfile, so the event loop does not wait for the disk).
write_nginx_configs() {
  local device root aio
  mkdir -p "$WORK/run/nginx"
  chown www-data "$WORK/run/nginx" 2>/dev/null || true
  for device in throttle latency cached; do
    root=$(device_root "$device")
    for aio in "" aio; do
      nginx_conf "$WORK/run" "$PORT" "$root" "access_log off; ${aio:+aio threads;}" \
        > "$WORK/run/nginx-$device${aio:+-aio}.conf"
    done
  done
}

# drop_unavailable LIST: the servers of LIST this machine can run (says which it cannot).
drop_unavailable() {
  local server kept=""
  for server in $1; do
    case $server in
      nginx | nginx-aio)
        if ! command -v nginx >/dev/null 2>&1; then log "nginx is not installed: skipping $server"; continue; fi ;;
    esac
    kept="$kept $server"
  done
  echo "$kept"
}

# server_command NAME DEVICE: sets COMMAND (array) and CPUS.
server_command() {
  local name=$1 root
  root=$(device_root "$2")
  # shellcheck disable=SC2206 # AMPD_OPTIONS is a list of words
  local ampd=("$AMPD" serve "$root" --listen "127.0.0.1:$PORT" $AMPD_OPTIONS)
  CPUS=$SERVER_CPU
  case $name in
    # What a user gets: no engine chosen, no option.
    default) COMMAND=("$AMPD" serve "$root" --listen "127.0.0.1:$PORT") ;;
    default-*) COMMAND=("$AMPD" serve "$root" --listen "127.0.0.1:$PORT" --arch "${name#default-}") ;;
    *+*)
      local word flags=()
      for word in $(echo "${name#*+}" | tr + ' '); do
        case $word in
          all-off) flags+=(--no-path-cache --no-header-cache --no-file-cache --no-residency-test) ;;
          *_*) flags+=("--${word%%_*}" "${word#*_}") ;;
          *) flags+=("--$word") ;;
        esac
      done
      COMMAND=("${ampd[@]}" --arch "${name%%+*}" "${flags[@]}")
      ;;
    sped | amped | mt | tpc | mp) COMMAND=("${ampd[@]}" --arch "$name") ;;
    amped-proc) COMMAND=("${ampd[@]}" --arch amped --helpers-mode process) ;;
    # amped-N: N helper threads (amped-32: as many as nginx's thread pool has threads).
    amped-[0-9]*) COMMAND=("${ampd[@]}" --arch amped --helpers "${name#amped-}") ;;
    # amped-maxN: helpers grown on demand up to N (the default cap is 32).
    amped-max[0-9]*) COMMAND=("${ampd[@]}" --arch amped --helpers-max "${name#amped-max}") ;;
    # mt-N: a pool of N threads (the default is 64): as many as there are clients, so that no
    # client waits for a thread.
    mt-[0-9]*) COMMAND=("${ampd[@]}" --arch mt --threads "${name#mt-}") ;;
    # Two loops or rings: one per core of this machine, all on the server's CPU.
    reactor | reactor2) COMMAND=("${ampd[@]}" --arch reactor --threads 2) ;;
    uring | uring2) COMMAND=("${ampd[@]}" --arch uring --threads 2) ;;
    reactor1) COMMAND=("${ampd[@]}" --arch reactor --threads 1) ;;
    uring1) COMMAND=("${ampd[@]}" --arch uring --threads 1) ;;
    # Two loops on two CPUs (sharing CLIENT_CPU with the client): cross-CPU costs show.
    reactor2-spread)
      COMMAND=("${ampd[@]}" --arch reactor --threads 2)
      CPUS=$SERVER_CPU,$CLIENT_CPU
      ;;
    nginx) COMMAND=(nginx -c "$WORK/run/nginx-$2.conf" -e "$WORK/run/nginx.err") ;;
    nginx-aio) COMMAND=(nginx -c "$WORK/run/nginx-$2-aio.conf" -e "$WORK/run/nginx.err") ;;
    *) die "unknown server '$name'" ;;
  esac
}

# start_server NAME DEVICE OUT LIMITED: starts NAME pinned to CPUS, in our cpuacct cgroup and,
# when LIMITED=1, in the memory and blkio cgroups; waits (at most 10 s) until it serves
# /hot.bin. Returns non-zero if it does not.
start_server() {
  local name=$1 device=$2 out=$3 limited=$4 _
  server_command "$name" "$device"
  (
    if [ "$limited" = 1 ]; then
      echo "$BASHPID" > "$MEM_CG/cgroup.procs"
      echo "$BASHPID" > "$BLKIO_CG/cgroup.procs"
    fi
    if [ -n "$CPU_CG" ]; then echo "$BASHPID" > "$CPU_CG/cgroup.procs"; fi
    exec taskset -c "$CPUS" "${COMMAND[@]}"
  ) > "$out" 2>&1 9>&- &
  SERVER_PID=$!
  for _ in $(seq 100); do
    kill -0 "$SERVER_PID" 2>/dev/null || break
    curl -sf -o /dev/null --max-time 2 "http://127.0.0.1:$PORT/hot.bin" && return 0
    sleep 0.1
  done
  log "$name did not start serving: $(tail -n 2 "$out" | tr '\n' ' ')"
  stop_server
  return 1
}

stop_server() {
  kill_pid "$SERVER_PID"
  SERVER_PID=""
  cgroup_leftovers
}

# descendants PID: PID and every process below it.
descendants() {
  local pid=$1 child
  echo "$pid"
  for child in $(cat /proc/"$pid"/task/*/children 2>/dev/null); do descendants "$child"; done
}

cpu_ns() {
  if [ -n "$CPU_CG" ]; then cat "$CPU_CG/cpuacct.usage"; else echo 0; fi
}

# server_stats LIMITED: processes, threads and memory of the running server, as key=value lines.
server_stats() {
  local limited=$1 pids pid processes=0 threads=0 rss=0 pss=0 value
  pids=$(descendants "$SERVER_PID")
  for pid in $pids; do
    [ -d /proc/"$pid" ] || continue
    processes=$((processes + 1))
    threads=$((threads + $(ls /proc/"$pid"/task 2>/dev/null | wc -l)))
    value=$(awk '/^VmRSS:/ {print $2}' /proc/"$pid"/status 2>/dev/null || true)
    rss=$((rss + ${value:-0}))
    value=$(awk '/^Pss:/ {print $2}' /proc/"$pid"/smaps_rollup 2>/dev/null || true)
    pss=$((pss + ${value:-0}))
  done
  echo "processes=$processes"
  echo "threads=$threads"
  echo "rss_kib=$rss"
  echo "pss_kib=$pss"
  if [ "$limited" = 1 ]; then
    awk '$1 == "rss" {print "anon_bytes=" $2} $1 == "cache" {print "cache_bytes=" $2}' "$MEM_CG/memory.stat"
    echo "kmem_bytes=$(cat "$MEM_CG/memory.kmem.usage_in_bytes" 2>/dev/null || echo 0)"
    echo "max_usage_bytes=$(cat "$MEM_CG/memory.max_usage_in_bytes")"
    echo "failcnt=$(cat "$MEM_CG/memory.failcnt")"
  fi
}

# prewarm DEVICE FILES: in the server's memory cgroup (so the pages are charged to it) but not
# its blkio cgroup (unthrottled): every file's metadata, the data of as many files as the
# memory limit holds, and the hot file. Bounded to 120 s.
prewarm() {
  local root files=$2 warm limit
  root=$(device_root "$1")
  limit=$(cat "$MEM_CG/memory.limit_in_bytes")
  warm=$(( limit * 9 / 10 / FILE_SIZE ))
  [ "$warm" -gt "$files" ] && warm=$files
  (
    echo "$BASHPID" > "$MEM_CG/cgroup.procs"
    cd "$root/ds"
    head -n "$files" "$WORK/names" | timeout 120 xargs -n 256 stat --format=%s > /dev/null
    head -n "$warm" "$WORK/names" | timeout 120 xargs -P 16 -n 16 cat > /dev/null
    cat "$root/hot.bin" > /dev/null
  ) 9>&- &
  wait_bg $!
}

# prewarm_trace DEVICE NAME: as prewarm, for a trace: every file's metadata, and the data of
# the most requested files that fit the memory limit (trace_lists).
prewarm_trace() {
  local root lists=$WORK/logs/trace-$2
  root=$(device_root "$1")
  (
    echo "$BASHPID" > "$MEM_CG/cgroup.procs"
    cd "$root"
    timeout 120 xargs -d '\n' -n 256 stat --format=%s < "$lists.all" > /dev/null 2>&1
    timeout 120 xargs -d '\n' -P 16 -n 16 cat < "$lists.warm" > /dev/null 2>&1
    cat "$root/hot.bin" > /dev/null
  ) 9>&- &
  wait_bg $!
}

# --- runs -----------------------------------------------------------------------------------

# client OUT ARGS...: one ampd-bench run pinned to CLIENT_CPU in the background, bounded.
client() {
  local out=$1
  shift
  timeout $((WARMUP + DURATION + 60)) taskset -c "$CLIENT_CPU" "$BENCH" "$@" \
    --timeout 20s --quiet --json "$out" > /dev/null 2> "${out%.json}.err" 9>&- &
  CLIENT_PIDS+=($!)
}

# run_disk PART DEVICE POINT SERVER ROUND FILES CLIENTS HOT [LOG]: one run on a slow device,
# replaying the uniform log of FILES files, or LOG (a trace: FILES is its name).
run_disk() {
  local part=$1 device=$2 point=$3 server=$4 round=$5 files=$6 clients=$7 hot=$8 log=${9:-}
  local dir=$RESULTS/runs/$part/$device/$point/$server/$round url
  mkdir -p "$dir"
  drop_caches
  echo 0 > "$MEM_CG/memory.max_usage_in_bytes"
  echo 0 > "$MEM_CG/memory.failcnt" 2>/dev/null || true
  if ! start_server "$server" "$device" "$dir/server.log" 1; then
    echo "did not start" > "$dir/failed"
    return 0
  fi
  if [ -n "$log" ]; then prewarm_trace "$device" "$files"; else prewarm "$device" "$files"; fi
  url=http://127.0.0.1:$PORT
  CLIENT_PIDS=()
  client "$dir/load.json" replay --log "${log:-$WORK/logs/$files.log}" --target "$server=$url/" \
    --clients "$clients" --duration "${DURATION}s" --warmup "${WARMUP}s"
  if [ "$hot" = 1 ]; then
    client "$dir/hot.json" file --target "$server=$url/hot.bin" --clients "$HOT_CLIENTS" \
      --duration "${DURATION}s" --warmup "${WARMUP}s"
  fi
  measure_and_stop "$dir" "$WARMUP" "$DURATION" 1 "$part $device $point $server round $round"
}

# measure_and_stop DIR WARMUP DURATION LIMITED LABEL: with the clients running, wait out the
# warm-up, take the server's CPU time over the measured seconds and its resources one second
# before the end, wait for the clients, stop the server, and log the run's summary.
measure_and_stop() {
  local dir=$1 warmup=$2 duration=$3 limited=$4 label=$5 cpu_before cpu_after
  pause "$warmup"
  cpu_before=$(cpu_ns)
  pause $((duration - 1))
  server_stats "$limited" > "$dir/stats.txt"
  pause 1
  cpu_after=$(cpu_ns)
  echo "cpu_ns=$((cpu_after - cpu_before))" >> "$dir/stats.txt"
  wait_bg "${CLIENT_PIDS[@]}"
  CLIENT_PIDS=()
  stop_server
  grep -q "serving with reactor instead" "$dir/server.log" && echo "fell_back=1" >> "$dir/stats.txt"
  log "$label: $(summary_line "$dir")"
}

# summary_line DIR: requests/s of the run (and of the hot file) for the progress log.
summary_line() {
  python3 - "$1" <<'EOF'
import json, os, sys
out = []
for name in ("load", "hot"):
    path = os.path.join(sys.argv[1], name + ".json")
    if os.path.exists(path):
        median = json.load(open(path))["points"][0]["median"]
        out.append(f"{name} {median['requests_per_second']:.0f} req/s p50 {median['latency_ms']['p50']:.3f} ms errors {median['errors_total']}")
print("; ".join(out) or "no results")
EOF
}

# part_disk sweep|hot|clients: every round, point and server on each slow device. A sweep point
# is a data set of POINT files under CLIENTS clients; a hot point is LOAD clients on the
# HOT_FILES data set, with the hot-file clients alongside; a clients point is that many clients
# on the CLIENTS_FILES data set.
part_disk() {
  local part=$1 servers device round point server values
  servers=$(drop_unavailable "$SERVERS")
  case $part in
    sweep) values=$POINTS ;;
    hot) values=$LOADS ;;
    clients) values=$CLIENT_COUNTS ;;
    trace) values=$(for trace in $TRACES; do echo "${trace%%=*}"; done) ;;
  esac
  for device in $(available_devices); do
    # Trace files are not slow*: only the throttle device makes them slow.
    [ "$part" = trace ] && [ "$device" != throttle ] && continue
    for round in $(seq "$REPEAT"); do
      for point in $values; do
        for server in $servers; do
          case $part in
            sweep) run_disk sweep "$device" "$point" "$server" "$round" "$point" "$CLIENTS" 0 ;;
            hot) run_disk hot "$device" "$point" "$server" "$round" "$HOT_FILES" "$point" 1 ;;
            clients) run_disk clients "$device" "$point" "$server" "$round" "$CLIENTS_FILES" "$point" 0 ;;
            trace) run_disk trace "$device" "$point" "$server" "$round" "$point" "$CLIENTS" 0 "$(trace_log "$point")" ;;
          esac
        done
      done
    done
  done
}

# run_cached WORKLOAD SERVER ROUND: one run on the cached 1 KiB file (no cgroup limits).
run_cached() {
  local workload=$1 server=$2 round=$3 dir=$RESULTS/runs/engines/cached/$1/$2/$3
  local options=(--clients "$CLIENTS_CACHED")
  case $workload in
    pipelined) options+=(--pipeline "$PIPELINE") ;;
    many) options=(--clients "$MANY") ;;
  esac
  mkdir -p "$dir"
  if ! start_server "$server" cached "$dir/server.log" 0; then
    echo "did not start" > "$dir/failed"
    return 0
  fi
  CLIENT_PIDS=()
  timeout $((ENGINE_DURATION + 60)) taskset -c "$CLIENT_CPU" "$BENCH" file \
    --target "$server=http://127.0.0.1:$PORT/f1k.bin" "${options[@]}" --duration "${ENGINE_DURATION}s" \
    --warmup 1s --timeout 20s --quiet --json "$dir/load.json" > /dev/null 2> "$dir/load.err" 9>&- &
  CLIENT_PIDS+=($!)
  measure_and_stop "$dir" 1 "$ENGINE_DURATION" 0 "engines $workload $server round $round"
}

part_engines() {
  local servers round workload server
  if [ -z "$CPU_CG" ]; then
    echo "$SELF: SKIP: engines part: needs the cgroup v1 cpuacct controller at $CG/cpuacct" >&2
    return 0
  fi
  mkdir -p "$CPU_CG" "$WORK/cached" "$WORK/run"
  [ -e "$WORK/run/nginx-cached.conf" ] || write_nginx_configs
  head -c 1024 /dev/urandom > "$WORK/cached/f1k.bin"
  head -c "$HOT_SIZE" /dev/urandom > "$WORK/cached/hot.bin"
  chmod -R a+rX "$WORK/cached"
  ulimit -n 65536 2>/dev/null || true
  servers=$(drop_unavailable "$ENGINE_SERVERS")
  for round in $(seq "$REPEAT"); do
    for workload in keepalive pipelined many; do
      for server in $servers; do
        run_cached "$workload" "$server" "$round"
      done
    done
  done
}
