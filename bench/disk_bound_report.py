#!/usr/bin/env python3
"""disk_bound_report.py - the tables and charts of bench/disk_bound.sh from its runs.

    python3 bench/disk_bound_report.py RESULTS_DIR AMPD_BENCH_BINARY

Reads RESULTS_DIR/runs/PART/DEVICE/POINT/SERVER/ROUND/ (load.json and hot.json written by
ampd-bench, stats.txt written by the script) and writes RESULTS_DIR/results.md, one ampd-bench
JSON report per chart (sweep-DEVICE.json, hot-DEVICE-cN.json, clients-DEVICE.json,
trace-DEVICE-NAME.json, ...) and the charts themselves with `ampd-bench plot`. Every figure in the tables is the median of the rounds, taken figure by figure
(the median requests/s, the median p50 latency, ...); a chart's point is the run with the median
requests/s, as ampd-bench reports a point itself.

CHART_SERVERS (environment, space-separated) replaces the servers of the charts (sweep, hot,
clients), e.g. to show the default command line beside the tuned engines.
"""
import json
import os
import statistics
import subprocess
import sys

MIB = 1024 * 1024
# Which servers each chart shows (every server is in the tables): Flash figures 9/10 had its
# four architectures; the other engines get a chart of their own; six lines at most per chart.
FLASH_CHART = tuple(os.environ.get("CHART_SERVERS", "sped amped mt mp nginx nginx-aio").split())
ENGINES_CHART = ("amped", "amped-proc", "amped-32", "reactor", "tpc", "uring")
HOT_CHART = tuple(os.environ.get("CHART_SERVERS", "sped amped amped-32 mt mp uring nginx nginx-aio").split())


def read_stats(path):
    stats = {}
    if os.path.exists(path):
        for line in open(path):
            key, _, value = line.strip().partition("=")
            if key:
                try:
                    stats[key] = float(value)
                except ValueError:
                    stats[key] = value
    return stats


def read_summary(path):
    if not os.path.exists(path):
        return None
    try:
        report = json.load(open(path))
        return report, report["points"][0]["median"]
    except (ValueError, KeyError, IndexError):
        return None


class Cell:
    """All rounds of one server at one point."""

    def __init__(self):
        self.load = []  # Summary dicts
        self.hot = []
        self.stats = []
        self.report = None  # one load report, for its settings
        self.failed = 0

    def median(self, values):
        values = [value for value in values if value is not None]
        return statistics.median(values) if values else None

    def load_figure(self, pick):
        return self.median([pick(summary) for summary in self.load])

    def hot_figure(self, pick):
        return self.median([pick(summary) for summary in self.hot])

    def stat(self, key):
        return self.median([stats.get(key) for stats in self.stats])

    def cpu_us_per_request(self):
        values = []
        for load, hot, stats in zip(self.load, self.hot or [None] * len(self.load), self.stats):
            cpu = stats.get("cpu_ns")
            requests = load["responses"] + (hot["responses"] if hot else 0)
            if cpu and requests:
                values.append(cpu / 1000.0 / requests)
        return self.median(values)

    def median_run(self):
        ordered = sorted(self.load, key=lambda summary: summary["requests_per_second"])
        return ordered[(len(ordered) - 1) // 2] if ordered else None


def collect(results):
    """cells[part][device][point][server] = Cell, with points and servers in run order."""
    cells = {}
    runs = os.path.join(results, "runs")
    if not os.path.isdir(runs):
        return cells
    for part in sorted(os.listdir(runs)):
        for device in sorted(os.listdir(os.path.join(runs, part))):
            for point in os.listdir(os.path.join(runs, part, device)):
                for server in os.listdir(os.path.join(runs, part, device, point)):
                    cell = Cell()
                    base = os.path.join(runs, part, device, point, server)
                    for round_ in sorted(os.listdir(base)):
                        directory = os.path.join(base, round_)
                        if os.path.exists(os.path.join(directory, "failed")):
                            cell.failed += 1
                            continue
                        load = read_summary(os.path.join(directory, "load.json"))
                        if load is None:
                            cell.failed += 1
                            continue
                        cell.report = load[0]
                        cell.load.append(load[1])
                        hot = read_summary(os.path.join(directory, "hot.json"))
                        if hot is not None:
                            cell.hot.append(hot[1])
                        cell.stats.append(read_stats(os.path.join(directory, "stats.txt")))
                    cells.setdefault(part, {}).setdefault(device, {}).setdefault(point, {})[server] = cell
    return cells


def settings(path):
    values = {}
    if os.path.exists(path):
        for line in open(path):
            key, _, value = line.strip().partition("=")
            values[key] = value
    return values


def order(names, preferred):
    known = [name for index, name in enumerate(preferred) if name in names and name not in preferred[:index]]
    return known + sorted(name for name in names if name not in known)


def number(value, digits=0):
    if value is None:
        return "-"
    if digits == 0:
        return f"{value:,.0f}"
    return f"{value:,.{digits}f}"


def ratio(a, b):
    if a is None or b is None or b == 0:
        return "-"
    return f"{a / b:.2f}"


def mib(value):
    return "-" if value is None else f"{value / MIB:.1f}"


def parse_size(text):
    """64M, 1G, 65536: bytes (binary units, as the memory cgroup reads them)."""
    text = text.strip().upper()
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def size_label(size):
    return f"{size / MIB:.0f} MiB" if size >= 10 * MIB else f"{size / MIB:.1f} MiB"


def write_report(path, template, workload, swept, points):
    report = {
        "tool": template.get("tool", "ampd-bench"),
        "version": template.get("version", ""),
        "workload": workload,
        "swept": swept,
        "settings": template["settings"],
        "points": points,
    }
    with open(path, "w") as out:
        json.dump(report, out, indent=1)


def plot(bench, source, output, metric, title):
    subprocess.run([bench, "plot", source, "-o", output, "--metric", metric, "--title", title],
                   check=False)


def clients_section(device, counts, knobs, servers_order, file_size, results, bench):
    """Flash figure 12: one data set under a growing number of clients."""
    files = int(knobs.get("CLIENTS_FILES", "1920"))
    label = size_label(files * file_size)
    count_names = sorted(counts, key=int)
    servers = order({server for count in counts.values() for server in count}, servers_order)
    out = [f"\n## Concurrent clients, {device} device: {label} ({files} files), requests/s "
           "(Flash figure 12)\n",
           "| clients | " + " | ".join(servers) + " |",
           "|---|" + "---:|" * len(servers)]
    entries, template = [], None
    for count in count_names:
        row = [count]
        for server in servers:
            cell = counts[count].get(server)
            if cell is None or not cell.load:
                row.append("-")
                continue
            template = template or cell.report
            row.append(number(cell.load_figure(lambda s: s["requests_per_second"])))
            if server in FLASH_CHART + ("tpc",) or server.startswith("mt-"):
                entries.append({"target": server, "url": cell.report["points"][0]["url"],
                                "x": float(count), "label": f"{count} clients",
                                "median": cell.median_run(), "runs": cell.load})
        out.append("| " + " | ".join(row) + " |")
    peers = [server for server in servers if server != "amped"]
    if "amped" in servers and peers:
        out.append("\nRatios of amped to others (requests/s):\n")
        out.append("| clients | " + " | ".join(f"amped/{peer}" for peer in peers) + " |")
        out.append("|---|" + "---:|" * len(peers))
        for count in count_names:
            amped = counts[count].get("amped")
            amped_rate = amped.load_figure(lambda s: s["requests_per_second"]) if amped else None
            row = [count]
            for peer in peers:
                cell = counts[count].get(peer)
                row.append(ratio(amped_rate, cell.load_figure(lambda s: s["requests_per_second"])
                                 if cell else None))
            out.append("| " + " | ".join(row) + " |")
    out.append("\nLatency and server resources (end of each run; errors summed over rounds):\n")
    out.append("| clients | server | p50 ms | p99 ms | threads | processes | anon MiB | "
               "page cache MiB | CPU µs/request | errors |")
    out.append("|---|---|" + "---:|" * 8)
    for count in count_names:
        for server in servers:
            cell = counts[count].get(server)
            if cell is None or not cell.load:
                continue
            out.append(f"| {count} | {server} | "
                       f"{number(cell.load_figure(lambda s: s['latency_ms']['p50']), 2)} | "
                       f"{number(cell.load_figure(lambda s: s['latency_ms']['p99']), 2)} | "
                       f"{number(cell.stat('threads'))} | {number(cell.stat('processes'))} | "
                       f"{mib(cell.stat('anon_bytes'))} | {mib(cell.stat('cache_bytes'))} | "
                       f"{number(cell.cpu_us_per_request(), 1)} | "
                       f"{sum(s['errors_total'] for s in cell.load)} |")
    if template and entries:
        json_path = os.path.join(results, f"clients-{device}.json")
        write_report(json_path, template, "replay", "concurrent clients", entries)
        plot(bench, json_path, os.path.join(results, f"clients-{device}.svg"), "mbit_per_second",
             f"Concurrent clients, {label} data set, {device} device")
    return out


def trace_section(device, traces, servers_order, results, bench):
    """Flash figure 8: each trace replayed by every server, as bars of output bandwidth."""
    out = []
    for trace in sorted(traces):
        cells_here = traces[trace]
        servers = order(set(cells_here), servers_order)
        out.append(f"\n## Trace {trace}, {device} device (Flash figure 8)\n")
        out.append("| server | Mbit/s | req/s | p50 ms | p99 ms | page cache MiB | CPU µs/request | errors |")
        out.append("|---|" + "---:|" * 7)
        bars, template = [], None
        for server in servers:
            cell = cells_here[server]
            if not cell.load:
                out.append(f"| {server} | did not run | | | | | | |")
                continue
            template = template or cell.report
            out.append(f"| {server} | {number(cell.load_figure(lambda s: s['mbit_per_second']), 1)} | "
                       f"{number(cell.load_figure(lambda s: s['requests_per_second']))} | "
                       f"{number(cell.load_figure(lambda s: s['latency_ms']['p50']), 2)} | "
                       f"{number(cell.load_figure(lambda s: s['latency_ms']['p99']), 2)} | "
                       f"{mib(cell.stat('cache_bytes'))} | {number(cell.cpu_us_per_request(), 1)} | "
                       f"{sum(s['errors_total'] for s in cell.load)} |")
            bars.append({"target": server, "url": cell.report["points"][0]["url"], "x": None,
                         "label": trace, "median": cell.median_run(), "runs": cell.load})
        if template and bars:
            json_path = os.path.join(results, f"trace-{device}-{trace}.json")
            write_report(json_path, template, "replay", None, bars)
            plot(bench, json_path, os.path.join(results, f"trace-{device}-{trace}.svg"),
                 "mbit_per_second", f"Trace {trace}, {device} device")
    return out


def main():
    if len(sys.argv) != 3:
        sys.stderr.write(__doc__)
        return 2
    results, bench = sys.argv[1], sys.argv[2]
    knobs = settings(os.path.join(results, "settings.txt"))
    servers_order = knobs.get("SERVERS", "").split() + knobs.get("ENGINE_SERVERS", "").split()
    file_size = int(knobs.get("FILE_SIZE", "102400"))
    cells = collect(results)
    out = [f"# bench/disk_bound.sh results\n",
           "Settings: " + ", ".join(f"{key}={value}" for key, value in knobs.items()) + "\n",
           "Every figure is the median of the rounds (REPEAT), figure by figure.\n"]

    for device, points in sorted(cells.get("sweep", {}).items()):
        point_names = sorted(points, key=int)
        servers = order({server for point in points.values() for server in point}, servers_order)
        out.append(f"\n## Sweep, {device} device: output bandwidth (Mbit/s) against data-set size\n")
        out.append("| data set | " + " | ".join(servers) + " |")
        out.append("|---|" + "---:|" * len(servers))
        chart_points, zoom_points, template = [], [], None
        for point in point_names:
            size = int(point) * file_size
            row = [f"{size_label(size)} ({point} files)"]
            for server in servers:
                cell = points[point].get(server)
                if cell is None or not cell.load:
                    row.append("-")
                    continue
                template = template or cell.report
                row.append(number(cell.load_figure(lambda s: s["mbit_per_second"]), 1))
                entry = {"target": server, "url": cell.report["points"][0]["url"], "x": float(size),
                         "label": size_label(size), "median": cell.median_run(), "runs": cell.load}
                chart_points.append(entry)
                if size > parse_size(knobs.get("MEMORY", "64M")):
                    zoom_points.append(entry)
            out.append("| " + " | ".join(row) + " |")
        out.append("\nRequests/s, and ratios of amped to others (requests/s):\n")
        peers = [server for server in ("sped", "mt", "mp", "nginx", "nginx-aio", "reactor", "uring",
                                       "amped-proc", "tpc") if server in servers]
        out.append("| data set | amped req/s | " + " | ".join(f"amped/{peer}" for peer in peers) + " |")
        out.append("|---|---:|" + "---:|" * len(peers))
        for point in point_names:
            amped = points[point].get("amped")
            amped_rate = amped.load_figure(lambda s: s["requests_per_second"]) if amped else None
            row = [size_label(int(point) * file_size), number(amped_rate)]
            for peer in peers:
                cell = points[point].get(peer)
                row.append(ratio(amped_rate, cell.load_figure(lambda s: s["requests_per_second"]) if cell else None))
            out.append("| " + " | ".join(row) + " |")
        # Resources where memory decides most (the largest data set that still fits the memory
        # limit, the knee of the curve) and at the largest data set.
        memory = parse_size(knobs.get("MEMORY", "64M"))
        fitting = [point for point in point_names if int(point) * file_size <= memory]
        shown = ([fitting[-1]] if fitting else []) + [point_names[-1]]
        for point in dict.fromkeys(shown):
            out.append(f"\nServer resources at {size_label(int(point) * file_size)} (end of the run; anon = "
                       "the cgroup's anonymous memory, which the page cache cannot use; page cache = "
                       "what the cgroup holds; errors summed over rounds):\n")
            out.append("| server | Mbit/s | processes | threads | anon MiB | Pss MiB | page cache MiB | "
                       "CPU µs/request | errors |")
            out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
            for server in servers:
                cell = points[point].get(server)
                if cell is None or not cell.load:
                    continue
                pss = cell.stat("pss_kib")
                out.append(f"| {server} | {number(cell.load_figure(lambda s: s['mbit_per_second']), 1)} | "
                           f"{number(cell.stat('processes'))} | {number(cell.stat('threads'))} | "
                           f"{mib(cell.stat('anon_bytes'))} | {'-' if pss is None else f'{pss / 1024:.1f}'} | "
                           f"{mib(cell.stat('cache_bytes'))} | {number(cell.cpu_us_per_request(), 1)} | "
                           f"{sum(s['errors_total'] for s in cell.load)} |")
        if template:
            # Two charts of at most six lines each (Flash's four architectures with nginx, then
            # the other engines), each over the whole sweep and over its disk-bound points.
            for suffix, chart_servers, what in (("", FLASH_CHART, "architectures"),
                                                ("-engines", ENGINES_CHART, "engines")):
                for zoom, entries in (("", chart_points), ("-disk", zoom_points)):
                    entries = [entry for entry in entries if entry["target"] in chart_servers]
                    if not entries:
                        continue
                    name = f"sweep-{device}{suffix}{zoom}"
                    json_path = os.path.join(results, name + ".json")
                    write_report(json_path, template, "replay", "data-set size (bytes)", entries)
                    title = (f"Disk-bound data sets, {device} device, {what}" if zoom
                             else f"Data-set size sweep, {device} device, {what}")
                    plot(bench, json_path, os.path.join(results, name + ".svg"), "mbit_per_second", title)

    for device, loads in sorted(cells.get("hot", {}).items()):
        for load in sorted(loads, key=int):
            cells_here = loads[load]
            servers = order(set(cells_here), servers_order)
            out.append(f"\n## Hot file beside disk-bound load, {device} device, {load} disk-bound clients\n")
            out.append("| server | disk-bound req/s | hot req/s | hot p50 ms | hot p99 ms | hot max ms | "
                       "CPU µs/request | processes | threads | anon MiB | Pss MiB | errors |")
            out.append("|---|" + "---:|" * 11)
            bars, load_bars, template = [], [], None
            for server in servers:
                cell = cells_here[server]
                if not cell.load:
                    out.append(f"| {server} | did not run | | | | | | | | | | |")
                    continue
                pss = cell.stat("pss_kib")
                errors = sum(s["errors_total"] for s in cell.load + cell.hot)
                out.append(
                    f"| {server} | {number(cell.load_figure(lambda s: s['requests_per_second']))} | "
                    f"{number(cell.hot_figure(lambda s: s['requests_per_second']))} | "
                    f"{number(cell.hot_figure(lambda s: s['latency_ms']['p50']), 3)} | "
                    f"{number(cell.hot_figure(lambda s: s['latency_ms']['p99']), 3)} | "
                    f"{number(cell.hot_figure(lambda s: s['latency_ms']['max']), 1)} | "
                    f"{number(cell.cpu_us_per_request(), 1)} | {number(cell.stat('processes'))} | "
                    f"{number(cell.stat('threads'))} | {mib(cell.stat('anon_bytes'))} | "
                    f"{'-' if pss is None else f'{pss / 1024:.1f}'} | {errors} |")
                if cell.hot and server in HOT_CHART:
                    ordered = sorted(cell.hot, key=lambda s: s["requests_per_second"])
                    template = template or cell.report
                    bars.append({"target": server, "url": "", "x": None, "label": "hot", "median":
                                 ordered[(len(ordered) - 1) // 2], "runs": cell.hot})
                    load_bars.append({"target": server, "url": "", "x": None, "label": "disk-bound",
                                      "median": cell.median_run(), "runs": cell.load})
            if template and bars:
                json_path = os.path.join(results, f"hot-{device}-c{load}.json")
                write_report(json_path, template, "file", None, bars)
                plot(bench, json_path, os.path.join(results, f"hot-{device}-c{load}.svg"),
                     "requests_per_second", f"Hot file beside {load} disk-bound clients, {device}")
                plot(bench, json_path, os.path.join(results, f"hot-{device}-c{load}-p50.svg"),
                     "latency_p50_ms", f"Hot file latency beside {load} disk-bound clients, {device}")
                json_path = os.path.join(results, f"hot-{device}-c{load}-load.json")
                write_report(json_path, template, "replay", None, load_bars)
                plot(bench, json_path, os.path.join(results, f"hot-{device}-c{load}-load.svg"),
                     "requests_per_second", f"{load} disk-bound clients beside the hot file, {device}")

    for device, counts in sorted(cells.get("clients", {}).items()):
        out += clients_section(device, counts, knobs, servers_order, file_size, results, bench)

    for device, traces in sorted(cells.get("trace", {}).items()):
        out += trace_section(device, traces, servers_order, results, bench)

    engines = cells.get("engines", {}).get("cached", {})
    if engines:
        out.append("\n## Cached 1 KiB file: requests/s and server CPU time per request\n")
        workloads = [name for name in ("keepalive", "pipelined", "many") if name in engines]
        servers = order({server for cells_here in engines.values() for server in cells_here}, servers_order)
        out.append("| server | " + " | ".join(f"{w} req/s | {w} CPU µs/req" for w in workloads) + " |")
        out.append("|---|" + "---:|---:|" * len(workloads))
        for server in servers:
            row = [server]
            for workload in workloads:
                cell = engines[workload].get(server)
                if cell is None or not cell.load:
                    row += ["-", "-"]
                    continue
                row += [number(cell.load_figure(lambda s: s["requests_per_second"])),
                        number(cell.cpu_us_per_request(), 2)]
            out.append("| " + " | ".join(row) + " |")
        out.append("\nRatios (requests/s; CPU time per request):\n")
        pairs = [("reactor2", "amped"), ("reactor1", "amped"), ("reactor2-spread", "amped"),
                 ("uring1", "reactor1"), ("uring2", "reactor2")]
        out.append("| pair | " + " | ".join(f"{w} req/s | {w} CPU/req" for w in workloads) + " |")
        out.append("|---|" + "---:|---:|" * len(workloads))
        for a, b in pairs:
            if not any(a in engines[w] and b in engines[w] for w in workloads):
                continue
            row = [f"{a} / {b}"]
            for workload in workloads:
                first, second = engines[workload].get(a), engines[workload].get(b)
                if not first or not second or not first.load or not second.load:
                    row += ["-", "-"]
                    continue
                row += [ratio(first.load_figure(lambda s: s["requests_per_second"]),
                              second.load_figure(lambda s: s["requests_per_second"])),
                        ratio(first.cpu_us_per_request(), second.cpu_us_per_request())]
            out.append("| " + " | ".join(row) + " |")

    fallbacks = [f"{part}/{device}/{point}/{server}"
                 for part, devices in cells.items() for device, points in devices.items()
                 for point, servers in points.items() for server, cell in servers.items()
                 if any(stats.get("fell_back") for stats in cell.stats)]
    if fallbacks:
        out.append("\nio_uring was unavailable, these uring runs served with reactor: " + ", ".join(fallbacks))
    failures = [f"{part}/{device}/{point}/{server} ({cell.failed})"
                for part, devices in cells.items() for device, points in devices.items()
                for point, servers in points.items() for server, cell in servers.items() if cell.failed]
    if failures:
        out.append("\nRuns that did not start or left no results: " + ", ".join(failures))
    with open(os.path.join(results, "results.md"), "w") as file:
        file.write("\n".join(out) + "\n")
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
