#!/usr/bin/env bash
# trace_replay.sh - Flash figure 8: two access logs shaped like the Rice CS and Owlnet traces
# (bench/make_trace.py says which parameters and why) replayed in a loop against ampd's
# engines, the default command line and nginx, with the server in a memory cgroup on a
# throttled disk (the trace part of bench/disk_bound.sh). About 5 minutes with the defaults.
#
#   sudo bash bench/setup.sh && cargo build --release -p ampd -p ampd-bench -p ampd-slowfs
#   sudo bash bench/evaluation/trace_replay.sh
#   sudo LOG=/var/log/nginx/access.log bash bench/evaluation/trace_replay.sh   # your own log
#
# LOG [] replays that access log (Common or Combined Log Format) instead of the two synthetic
# traces: every file it names is made with its logged size on the throttled device, the most
# requested that fit the memory limit are read in first, and its GET lines are replayed in
# logged order. Knobs: SERVERS ["sped amped mt mp default nginx nginx-aio"], CLIENTS [64],
# MEMORY [64M] (the data sets are sized against it), REQUESTS [60000] lines per synthetic log,
# REPEAT [3], DURATION [4] s, and the other knobs of bench/disk_bound.sh. Needs root and cgroup
# v1 (memory, blkio) with loop devices, as bench/disk_bound.sh says.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$EVAL_DIR/disk_lib.sh"
eval_begin trace-replay

export MEMORY=${MEMORY:-64M}
export SERVERS=${SERVERS:-"sped amped mt mp default nginx nginx-aio"}
export CLIENTS=${CLIENTS:-64}
export REPEAT=${REPEAT:-3}
export DURATION=${DURATION:-4}
REQUESTS=${REQUESTS:-60000}
memory_bytes=$(numfmt --from=iec "$MEMORY")

if [ -n "${LOG:-}" ]; then
  [ -r "$LOG" ] || { echo "trace_replay.sh: cannot read LOG=$LOG" >&2; exit 2; }
  TRACES="site=$(realpath "$LOG")"
  what="your log $(basename "$LOG")"
else
  TRACES=""
  for profile in cs owlnet; do
    python3 "$PROJECT_DIR/bench/make_trace.py" "$profile" "$memory_bytes" "$REQUESTS" \
      > "$OUT/$profile.log" 2> "$OUT/$profile.summary"
    cat "$OUT/$profile.summary"
    TRACES="$TRACES $profile=$OUT/$profile.log"
  done
  what="synthetic CS and Owlnet traces"
fi

rm -rf "$OUT/runs"
TRACES=$TRACES DEVICES=throttle RESULTS=$OUT/runs bash "$PROJECT_DIR/bench/disk_bound.sh" trace
charts=()
for json in "$OUT"/runs/trace-throttle-*.json; do
  [ -e "$json" ] || continue
  trace=$(basename "$json" .json)
  trace=${trace#trace-throttle-}
  cp "$json" "$OUT/trace-replay-$trace.json"
  redraw "$json" "$OUT/trace-replay-$trace.svg" mbit_per_second \
    "Trace replay ($trace): output bandwidth" \
    "$(conditions "$what, $CLIENTS clients, ${DURATION} s x $REPEAT, median; $(disk_conditions)")"
  charts+=("$OUT/trace-replay-$trace.svg")
done
cp "$OUT/runs/results.md" "$OUT/results.md"
[ -z "${LOG:-}" ] || PUBLISH=0
[ ${#charts[@]} -eq 0 ] || publish "${charts[@]}"
echo "results: $OUT/results.md; charts: ${charts[*]}"
