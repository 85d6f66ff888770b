#!/usr/bin/env bash
# webstone.sh - the WebStone file mix of JAWS table 1 (500 B 35%, 5 KB 50%, 50 KB 14%,
# 5 MB 1%), for ampd and the Debian peers side by side (servers on CPU 0, ampd-bench on CPU 1).
#
#   sudo bash bench/setup.sh && cargo build --release
#   bash bench/webstone.sh            # about 1.5 minutes with the defaults
#
# The four files are created in $WWW/webstone/ if missing. Knobs: bench/peers_lib.sh.
source "$(dirname "${BASH_SOURCE[0]}")/peers_lib.sh"
prepare
"$BENCH" webstone --create "$WWW"
start_all
TITLE="WebStone mix (JAWS table 1), $CLIENTS clients" measure webstone webstone
