#!/usr/bin/env bash
# specweb96.sh - the SPECweb96 static mix (AFPA §5.1): classes of 0.1-0.9 KB, 1-9 KB, 10-90 KB
# and 100-900 KB requested 35/50/14/1 %, over DIRS directories of /specweb/, for ampd and the
# Debian peers side by side (servers on CPU 0, ampd-bench on CPU 1).
#
#   sudo bash bench/setup.sh && cargo build --release
#   bash bench/specweb96.sh           # about 1.5 minutes with the defaults
#
# DIRS [10] (the file set is created if missing), and the knobs of bench/peers_lib.sh.
source "$(dirname "${BASH_SOURCE[0]}")/peers_lib.sh"
DIRS=${DIRS:-10}
prepare
"$BENCH" specweb96 --dirs "$DIRS" --create "$WWW"
start_all
TITLE="SPECweb96 mix, $DIRS directories, $CLIENTS clients" measure specweb96 specweb96 --dirs "$DIRS"
