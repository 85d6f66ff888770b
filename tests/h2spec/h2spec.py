#!/usr/bin/python3
"""HTTP/2 conformance runner: h2spec's cases (generic, http2, hpack suites; same ids, same pass
criteria) against any server, over TLS with ALPN h2 or cleartext with prior knowledge.

    /usr/bin/python3 tests/h2spec/h2spec.py -h 127.0.0.1 -p 8443 -t -k
    /usr/bin/python3 tests/h2spec/h2spec.py -p 8080 http2/5.1 hpack --json out.json

Prints a tree with ✔/× like h2spec, then "N tests, P passed, S skipped, F failed"; exits 1 when
a case failed, 2 on a bad command line. Owns the command line, the schedule and the reports;
the cases live in suite_*.py, the wire and verdicts in h2conn.py.
"""

import argparse
import json
import os
import sys
import time
import xml.etree.ElementTree as ElementTree
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import suite_generic  # noqa: E402
import suite_hpack  # noqa: E402
import suite_http2  # noqa: E402
from h2conn import Config, Conn, Failure  # noqa: E402
from spec import Case, selected  # noqa: E402

SUITES = [suite_generic.SUITE, suite_http2.SUITE, suite_hpack.SUITE]
PASS, FAIL, SKIP = "✔", "×", "-"


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="h2spec.py",
        add_help=False,
        description="HTTP/2 conformance cases of h2spec 2.6 (generic, http2, hpack).",
    )
    parser.add_argument("sections", nargs="*", help='ids to run, e.g. "http2/5.1", "generic/3.3/2", "hpack" (default: all)')
    parser.add_argument("-h", "--host", default="127.0.0.1", help="target host (default 127.0.0.1)")
    parser.add_argument("-p", "--port", type=int, help="target port (default 443 with -t, else 80)")
    parser.add_argument("-t", "--tls", action="store_true", help="connect over TLS, ALPN h2 (default: cleartext, prior knowledge)")
    parser.add_argument("-k", "--insecure", action="store_true", help="do not verify the server certificate")
    parser.add_argument("-o", "--timeout", type=float, default=2.0, help="seconds to wait for each answer (default 2)")
    parser.add_argument("-P", "--path", default="/", help="request path (default /); its response should have a body of 5+ octets")
    parser.add_argument("-S", "--strict", action="store_true", help="also run the cases h2spec runs only in strict mode")
    parser.add_argument("-j", "--jobs", type=int, default=4, help="cases run at once, each on its own connection (default 4)")
    parser.add_argument("--max-header-length", type=int, default=4000, help="length of the padding header values (default 4000)")
    parser.add_argument("-v", "--verbose", action="store_true", help="print the frames sent and received of each failed case")
    parser.add_argument("--json", metavar="FILE", help="write a JSON summary to FILE")
    parser.add_argument("--junit", metavar="FILE", help="write a JUnit XML report to FILE")
    parser.add_argument("--dryrun", action="store_true", help="list the cases without connecting")
    parser.add_argument("--help", action="help", help="show this help and exit")
    args = parser.parse_args(argv)
    if args.port is None:
        args.port = 443 if args.tls else 80
    if args.jobs < 1 or args.timeout <= 0:
        parser.error("--jobs must be >= 1 and --timeout > 0")
    known = {case.id for suite in SUITES for case in suite.cases()}
    for section in args.sections:
        if not any(case_id == section or case_id.startswith(section + "/") or case_id.startswith(section + ".") for case_id in known):
            parser.error("no case matches %r" % section)
    return args


def chosen_cases(args):
    return [
        case
        for suite in SUITES
        for case in suite.cases()
        if selected(case, args.sections) and (args.strict or not case.strict)
    ]


VERBOSE = False


def print_result(result, out, indent):
    case = result.case
    pad = "  " * indent
    if result.status == "passed":
        out.write("%s%s %d: %s\n" % (pad, PASS, case.number, case.description))
    elif result.status == "skipped":
        out.write("%s%s %d: %s (skipped: %s)\n" % (pad, SKIP, case.number, case.description, result.reason))
    else:
        out.write("%s%s %d: %s\n" % (pad, FAIL, case.number, case.description))
        out.write("%s  -> %s\n" % (pad, case.requirement))
        for index, expected in enumerate(result.expected):
            label = "Expected: " if index == 0 else "          "
            out.write("%s     %s%s\n" % (pad, label, expected))
        out.write("%s       Actual: %s\n" % (pad, result.actual))
        if VERBOSE:
            for line in result.trace:
                out.write("%s         %s\n" % (pad, line))


def print_tree(results, out, only_failed=False):
    """h2spec's layout: suite title, sections indented by depth, then the cases."""
    by_case = {result.case: result for result in results}
    for suite in SUITES:
        if not any(case in by_case and (not only_failed or by_case[case].status == "failed") for case in suite.cases()):
            continue
        out.write("%s\n" % suite.title)
        for group in suite.groups:
            print_group(group, by_case, out, only_failed)
        out.write("\n")


def print_group(group, by_case, out, only_failed):
    wanted = [case for case in group.cases() if case in by_case and (not only_failed or by_case[case].status == "failed")]
    if not wanted:
        return
    out.write("%s%s\n" % ("  " * group.depth, group.heading))
    printed_case = False
    for child in group.children:
        if isinstance(child, Case):
            if child in wanted:
                print_result(by_case[child], out, group.depth + 1)
                printed_case = True
        else:
            if printed_case:
                out.write("\n")
                printed_case = False
            print_group(child, by_case, out, only_failed)
    if printed_case:
        out.write("\n")


def write_json(path, args, results, seconds):
    summary = {
        "target": {"host": args.host, "port": args.port, "tls": args.tls, "path": args.path},
        "tests": len(results),
        "passed": sum(r.status == "passed" for r in results),
        "skipped": sum(r.status == "skipped" for r in results),
        "failed": sum(r.status == "failed" for r in results),
        "seconds": round(seconds, 3),
        "cases": [
            {
                "id": r.case.id,
                "description": r.case.description,
                "status": r.status,
                "seconds": round(r.seconds, 3),
                **(
                    {"requirement": r.case.requirement, "expected": r.expected, "actual": r.actual, "trace": r.trace}
                    if r.status == "failed"
                    else {}
                ),
                **({"reason": r.reason} if r.status == "skipped" else {}),
            }
            for r in results
        ],
    }
    with open(path, "w", encoding="utf-8") as file:
        json.dump(summary, file, indent=2, ensure_ascii=False)
        file.write("\n")


def write_junit(path, results, seconds):
    suites = ElementTree.Element("testsuites", tests=str(len(results)), time="%.3f" % seconds)
    for suite in SUITES:
        mine = [r for r in results if r.case.group.suite is suite]
        if not mine:
            continue
        element = ElementTree.SubElement(
            suites,
            "testsuite",
            name=suite.key,
            tests=str(len(mine)),
            failures=str(sum(r.status == "failed" for r in mine)),
            skipped=str(sum(r.status == "skipped" for r in mine)),
            time="%.3f" % sum(r.seconds for r in mine),
        )
        for r in mine:
            case = ElementTree.SubElement(element, "testcase", classname=r.case.group.id, name="%s: %s" % (r.case.id, r.case.description), time="%.3f" % r.seconds)
            if r.status == "failed":
                failure = ElementTree.SubElement(case, "failure", message=r.case.requirement)
                failure.text = "Expected: %s\nActual: %s" % (" | ".join(r.expected), r.actual)
            elif r.status == "skipped":
                ElementTree.SubElement(case, "skipped", message=r.reason)
    ElementTree.ElementTree(suites).write(path, encoding="utf-8", xml_declaration=True)


def preflight(config):
    """One connection before the run: a wrong port or a server without h2 is one clear error,
    not 146 failures. Returns the reason, or None."""
    try:
        Conn(config).close()
    except Failure as failure:
        return "%s (expected %s)" % (failure.actual, failure.expected[0])
    except OSError as error:
        return str(error)
    return None


def main(argv):
    global VERBOSE
    args = parse_args(argv)
    VERBOSE = args.verbose
    cases = chosen_cases(args)
    if args.dryrun:
        for case in cases:
            print("%s: %s%s" % (case.id, case.description, " (strict)" if case.strict else ""))
        print("%d tests" % len(cases))
        return 0
    config = Config(args.host, args.port, args.tls, args.insecure, args.timeout, args.path, args.max_header_length, args.strict)
    unreachable = preflight(config)
    if unreachable:
        sys.stderr.write("h2spec.py: cannot test %s:%d: %s\n" % (args.host, args.port, unreachable))
        return 2
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        results = list(pool.map(lambda case: case.execute(config), cases))
    seconds = time.monotonic() - started
    out = sys.stdout
    print_tree(results, out)
    failed = [r for r in results if r.status == "failed"]
    if failed:
        out.write("Failures: \n\n")
        print_tree(results, out, only_failed=True)
    passed = sum(r.status == "passed" for r in results)
    skipped = sum(r.status == "skipped" for r in results)
    out.write("Finished in %.4f seconds\n" % seconds)
    out.write("%d tests, %d passed, %d skipped, %d failed\n" % (len(results), passed, skipped, len(failed)))
    if args.json:
        write_json(args.json, args, results, seconds)
    if args.junit:
        write_junit(args.junit, results, seconds)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
