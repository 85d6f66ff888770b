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

# bandwidth_charts PART NAME TITLE WHAT: bench/disk_bound.sh PART's report for each of $DEVICES
# ($OUT/runs/PART-DEVICE.json) kept as NAME-DEVICE.json and drawn as NAME-DEVICE.svg (output
# bandwidth), titled "TITLE, DEVICE device", the subtitle WHAT and the device's conditions; then
# the charts published and the run's results.md kept.
bandwidth_charts() {
  local part=$1 name=$2 title=$3 what=$4 device json charts=()
  for device in $DEVICES; do
    json=$OUT/runs/$part-$device.json
    [ -e "$json" ] || continue
    cp "$json" "$OUT/$name-$device.json"
    redraw "$json" "$OUT/$name-$device.svg" mbit_per_second "$title, $device device" \
      "$(conditions "$what; $(disk_conditions)")"
    charts+=("$OUT/$name-$device.svg")
  done
  cp "$OUT/runs/results.md" "$OUT/results.md"
  [ ${#charts[@]} -eq 0 ] || publish "${charts[@]}"
  echo "results: $OUT/results.md; charts: ${charts[*]}"
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
