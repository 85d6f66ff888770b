#!/usr/bin/env bash
# replay.sh - trace replay (Flash §6.2): the GET lines of an access log, in logged order, in a
# loop, optionally truncated to a data-set size; ampd and the Debian peers side by side
# (servers on CPU 0, ampd-bench on CPU 1).
#
#   sudo bash bench/setup.sh && cargo build --release
#   bash bench/replay.sh              # about 1.5 minutes with the defaults
#
# LOG [bench/sample-access.log] (Common or Combined Log Format; the files it names are created
# under $WWW with their logged sizes), DATASET [] (e.g. 4m: keep the longest prefix of the log
# whose files fit), and the knobs of bench/peers_lib.sh.
source "$(dirname "${BASH_SOURCE[0]}")/peers_lib.sh"
LOG=${LOG:-$REPO/bench/sample-access.log}
DATASET=${DATASET:-}
dataset=()
[ -n "$DATASET" ] && dataset=(--dataset "$DATASET")
prepare
"$BENCH" replay --log "$LOG" "${dataset[@]}" --create "$WWW"
start_all
TITLE="Replay of $(basename "$LOG")${DATASET:+, data set $DATASET}, $CLIENTS clients" \
  measure replay replay --log "$LOG" "${dataset[@]}"
