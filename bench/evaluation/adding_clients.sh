#!/usr/bin/env bash
# adding_clients.sh - Flash figure 12: throughput as concurrent (persistent) connections are
# added, on a data set larger than the server's memory (the clients part of
# bench/disk_bound.sh, at a scale that takes about 7 minutes; its chart is redrawn with the
# conditions as subtitle). docs/research/architectures.md shows the full run.
#
#   sudo bash bench/setup.sh && cargo build --release -p ampd -p ampd-bench -p ampd-slowfs
#   sudo bash bench/evaluation/adding_clients.sh
#
# Knobs: SERVERS ["sped amped mt mp default nginx nginx-aio"] (default: plain `ampd serve
# DIR`; the engines get bench/disk_bound.sh's AMPD_OPTIONS), CLIENT_COUNTS ["16 64 256 512"],
# CLIENTS_FILES [1920] files of 100 KiB (a data set three times MEMORY [64M]), DEVICES
# [throttle], REPEAT [2], DURATION [4] s, and the other knobs of bench/disk_bound.sh. Needs
# root and cgroup v1 (memory, blkio) with loop devices.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$EVAL_DIR/disk_lib.sh"
eval_begin adding-clients

export SERVERS=${SERVERS:-"sped amped mt mp default nginx nginx-aio"}
export CLIENT_COUNTS=${CLIENT_COUNTS:-"16 64 256 512"}
export CLIENTS_FILES=${CLIENTS_FILES:-1920}
export DEVICES=${DEVICES:-throttle}
export REPEAT=${REPEAT:-2}
export DURATION=${DURATION:-4}
export CHART_SERVERS=${CHART_SERVERS:-"sped amped mt mp default nginx-aio"}

rm -rf "$OUT/runs"
RESULTS=$OUT/runs bash "$PROJECT_DIR/bench/disk_bound.sh" clients
bandwidth_charts clients adding-clients "Concurrent clients against output bandwidth" \
  "$CLIENTS_FILES files of 100 KiB, uniform requests, ${DURATION} s x $REPEAT, median"
