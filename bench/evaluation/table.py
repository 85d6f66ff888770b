#!/usr/bin/env python3
"""table.py - Markdown tables from ampd-bench JSON reports, for the sections of
docs/research/evaluation.md (the median run of each point, as the charts show).

  table.py grid FILE.json METRIC            one row per server, one column per point (size,
                                            client count)
  table.py servers FILE.json [FILE-cpu.csv] one row per server: requests/s, Mbit/s, mean
                                            response, latency p50/p99, errors, and with the CPU
                                            file (bench/peers_lib.sh's measure) the server's CPU
                                            time per request
  table.py cpu FILE.json FILE-cpu.csv       one row per server: its CPU time per request over
                                            every point of the invocation

The CPU time per request divides the server's CPU time over the whole invocation by the
responses it sent in it; warm-ups are not counted in the report, so their responses are
estimated at the rate of the measured runs (the servers sit idle while the others take turns).
"""
import csv
import json
import sys

METRICS = {
    "requests_per_second": lambda s: s["requests_per_second"],
    "mbit_per_second": lambda s: s["mbit_per_second"],
    "latency_p50_ms": lambda s: s["latency_ms"]["p50"],
    "latency_p99_ms": lambda s: s["latency_ms"]["p99"],
    "errors": lambda s: s["errors_total"],
}


def figure(value):
    if isinstance(value, int):
        return f"{value:,}"
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def targets_in_order(report):
    names = []
    for point in report["points"]:
        if point["target"] not in names:
            names.append(point["target"])
    return names


def grid(report, metric):
    value = METRICS[metric]
    labels = []
    for point in report["points"]:
        if point["label"] not in labels:
            labels.append(point["label"])
    cells = {(p["target"], p["label"]): value(p["median"]) for p in report["points"]}
    print("| server | " + " | ".join(labels) + " |")
    print("|---|" + "---:|" * len(labels))
    for target in targets_in_order(report):
        row = [figure(cells[(target, label)]) if (target, label) in cells else "–" for label in labels]
        print(f"| {target} | " + " | ".join(row) + " |")


def cpu_seconds(cpu_file):
    ticks = {}
    if cpu_file:
        with open(cpu_file) as handle:
            for row in csv.DictReader(handle):
                ticks[row["server"]] = int(row["ticks"]) / int(row["clk_tck"])
    return ticks


def responses_sent(report, target):
    """The target's responses in the invocation, warm-ups estimated at the measured rate."""
    warmup = report["settings"]["warmup_s"]
    return sum(
        run["responses"] * (run["seconds"] + warmup) / run["seconds"]
        for point in report["points"]
        if point["target"] == target
        for run in point["runs"]
        if run["seconds"] > 0
    )


def cpu(report, cpu_file):
    ticks = cpu_seconds(cpu_file)
    print("| server | server CPU per request (µs) | server CPU busy during its turns |")
    print("|---|---:|---:|")
    warmup = report["settings"]["warmup_s"]
    for target in targets_in_order(report):
        turns = sum(
            run["seconds"] + warmup
            for point in report["points"]
            if point["target"] == target
            for run in point["runs"]
        )
        sent = responses_sent(report, target)
        seconds = ticks.get(target)
        if seconds is None or not sent:
            continue
        print(f"| {target} | {1e6 * seconds / sent:.1f} | {100 * seconds / turns:.0f} % |")


def servers(report, cpu_file):
    ticks = cpu_seconds(cpu_file)
    header = "| server | requests/s | Mbit/s | mean response (bytes) | latency p50 / p99 (ms) | errors |"
    rule = "|---|---:|---:|---:|---:|---:|"
    if ticks:
        header += " server CPU per request (µs) |"
        rule += "---:|"
    print(header)
    print(rule)
    for point in report["points"]:
        median = point["median"]
        mean = median["bytes_received"] / median["responses"] if median["responses"] else 0
        line = (
            f"| {point['target']} | {figure(median['requests_per_second'])} "
            f"| {figure(median['mbit_per_second'])} | {mean:,.0f} "
            f"| {median['latency_ms']['p50']:.2f} / {median['latency_ms']['p99']:.2f} "
            f"| {median['errors_total']} |"
        )
        if ticks:
            sent = responses_sent(report, point["target"])
            seconds = ticks.get(point["target"])
            line += f" {1e6 * seconds / sent:.1f} |" if seconds is not None and sent else " – |"
        print(line)


def main(arguments):
    if len(arguments) >= 3 and arguments[0] == "grid":
        with open(arguments[1]) as handle:
            grid(json.load(handle), arguments[2])
    elif len(arguments) == 3 and arguments[0] == "cpu":
        with open(arguments[1]) as handle:
            cpu(json.load(handle), arguments[2])
    elif len(arguments) in (2, 3) and arguments[0] == "servers":
        with open(arguments[1]) as handle:
            servers(json.load(handle), arguments[2] if len(arguments) == 3 else None)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
