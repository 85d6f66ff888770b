#!/usr/bin/env bash
# dataset_size.sh - Flash figures 9 and 10: output bandwidth against data-set size, the server
# in a memory cgroup on a throttled disk, so that past the limit every server is disk-bound
# (the sweep part of bench/disk_bound.sh, at a scale that takes about 7 minutes; its charts
# are redrawn with the conditions as subtitle). docs/research/architectures.md shows the full sweep.
#
#   sudo bash bench/setup.sh && cargo build --release -p ampd -p ampd-bench -p ampd-slowfs
#   sudo bash bench/evaluation/dataset_size.sh
#
# Knobs: SERVERS ["sped amped mt mp default nginx nginx-aio"] (default: plain `ampd serve
# DIR`; the engines get bench/disk_bound.sh's AMPD_OPTIONS), POINTS ["320 640 1280 2560"]
# files of FILE_SIZE [100 KiB] each, CLIENTS [64], MEMORY [64M], DEVICES [throttle] (add
# latency for the FUSE device), REPEAT [2], DURATION [4] s, and the other knobs of
# bench/disk_bound.sh. Needs root and cgroup v1 (memory, blkio) with loop devices.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$EVAL_DIR/disk_lib.sh"
eval_begin dataset-size

export SERVERS=${SERVERS:-"sped amped mt mp default nginx nginx-aio"}
export POINTS=${POINTS:-"320 640 1280 2560"}
export DEVICES=${DEVICES:-throttle}
export REPEAT=${REPEAT:-2}
export CLIENTS=${CLIENTS:-64}
export DURATION=${DURATION:-4}
export CHART_SERVERS=${CHART_SERVERS:-"sped amped mt mp default nginx-aio"}

rm -rf "$OUT/runs"
RESULTS=$OUT/runs bash "$PROJECT_DIR/bench/disk_bound.sh" sweep
bandwidth_charts sweep dataset-size "Data-set size against output bandwidth" \
  "$CLIENTS clients replaying uniform requests to 100 KiB files, ${DURATION} s x $REPEAT, median"
