#!/usr/bin/env bash
# lib.sh - what every experiment in bench/evaluation/ shares (sourced, not run): where its
# results go, the conditions line every chart carries as its subtitle, and publishing a chart
# into docs/research/evaluation/.
#
# Knobs: OUT [/tmp/ampd-eval/NAME]  PUBLISH [1: copy the charts into docs/research/evaluation/]

EVAL_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PROJECT_DIR=$(cd "$EVAL_DIR/../.." && pwd)

# eval_begin NAME: sets EVAL_NAME and OUT, and makes OUT.
eval_begin() {
  EVAL_NAME=$1
  OUT=${OUT:-/tmp/ampd-eval/$EVAL_NAME}
  mkdir -p "$OUT"
}

# conditions WHAT: one line naming what was run and where, for a chart's subtitle, e.g.
# "50 clients, 3 s x 3 runs, median | Intel Xeon ... (2 cores), Linux 6.1 | ampd 1a2b3c4".
conditions() {
  local cpu cores kernel commit
  cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1 | tr -s ' ')
  cores=$(nproc)
  kernel=$(uname -r | cut -d- -f1)
  commit=$(git -C "$PROJECT_DIR" rev-parse --short HEAD 2>/dev/null || echo unknown)
  if [ -n "$(git -C "$PROJECT_DIR" status --porcelain --untracked-files=no 2>/dev/null)" ]; then
    commit="$commit+changes"
  fi
  printf '%s | %s (%s cores), Linux %s | ampd %s' "$1" "${cpu:-unknown CPU}" "$cores" "$kernel" "$commit"
}

# publish FILE...: copies charts into docs/research/evaluation/ (unless PUBLISH=0).
publish() {
  [ "${PUBLISH:-1}" = 1 ] || return 0
  mkdir -p "$PROJECT_DIR/docs/research/evaluation"
  cp "$@" "$PROJECT_DIR/docs/research/evaluation/"
}
