#!/usr/bin/env bash
# disk_lib.sh - what the disk-bound experiments (trace_replay, dataset_size, optimisations,
# adding_clients) share on top of lib.sh (sourced, not run): the conditions of the throttled
# device for a subtitle, and redrawing a chart bench/disk_bound.sh made with that subtitle.

# disk_conditions: the memory limit and the device's throttle, as bench/disk_bound.sh sets them.
disk_conditions() {
  printf '%s memory cgroup, reads throttled to %s/s and %s MiB/s' \
    "${MEMORY:-64M}" "${IOPS:-200}" "$(( ${BPS:-20971520} >> 20 ))"
}

# redraw JSON SVG METRIC TITLE SUBTITLE: a chart of JSON (an ampd-bench report) with a subtitle.
redraw() {
  "$PROJECT_DIR/target/release/ampd-bench" plot "$1" -o "$2" --metric "$3" --title "$4" \
    --subtitle "$5"
}

# subset JSON OUT NAME[=LABEL]...: the points of JSON (an ampd-bench report) whose target is one
# of the NAMEs, in that order, each renamed LABEL when one is given, written to OUT.
subset() {
  python3 - "$@" <<'PY'
import json, sys
source, out, wanted = sys.argv[1], sys.argv[2], sys.argv[3:]
report = json.load(open(source))
points = []
for entry in wanted:
    name, _, label = entry.partition("=")
    for point in report["points"]:
        if point["target"] == name:
            points.append(dict(point, target=label or name))
report["points"] = points
json.dump(report, open(out, "w"), indent=1)
PY
}
