#!/usr/bin/env bash
# sweep.sh - the single-file test (Flash §6.1, figures 6 and 7; AFPA figure 3): every client
# requests the same cached file over and over, one run per file size from 64 B to 10 MB, for
# ampd and the Debian peers side by side (servers on CPU 0, ampd-bench on CPU 1).
#
#   sudo bash bench/setup.sh     # once: peers, wrk, /tmp/bench/www
#   cargo build --release
#   bash bench/sweep.sh               # about 8 minutes with the defaults
#
# SIZES [64,1k,4k,16k,100k,1m,10m] (files /f{size}.bin; missing ones are created), and the
# knobs of bench/peers_lib.sh (SERVERS, CLIENTS, DURATION [3s], REPEAT, RESULTS...).
# Writes sweep.json/.csv/.txt, sweep.svg (requests/s) and sweep-mbit.svg to $RESULTS and prints
# the ratios ampd/peer per size.
DURATION=${DURATION:-3s}
source "$(dirname "${BASH_SOURCE[0]}")/peers_lib.sh"
SIZES=${SIZES:-64,1k,4k,16k,100k,1m,10m}
prepare
"$BENCH" sweep --sizes "$SIZES" --create "$WWW"
start_all
TITLE="Single-file test, $CLIENTS clients, keep-alive" measure sweep sweep --sizes "$SIZES"
