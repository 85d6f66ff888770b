"""The case registry: suites, groups (numbered by RFC section as h2spec numbers them) and cases
(numbered within their group), with the ids h2spec uses ("http2/5.1.1/2", "generic/3.5/1").

It owns the tree and how one case runs (a fresh connection, the verdict, the time it took);
the suites own the cases, h2spec.py owns the command line and the reports.
"""

import time

from h2conn import Conn, Failure, Skipped


class Result:
    def __init__(self, case, status, seconds, expected=None, actual=None, reason="", trace=None):
        self.case = case
        self.trace = trace or []
        self.status = status  # "passed", "failed", "skipped"
        self.seconds = seconds
        self.expected = expected or []
        self.actual = actual
        self.reason = reason


class Case:
    def __init__(self, group, number, description, requirement, run, strict):
        self.group = group
        self.number = number
        self.description = description
        self.requirement = requirement
        self.run = run
        self.strict = strict

    @property
    def id(self):
        return "%s/%d" % (self.group.id, self.number)

    def execute(self, config):
        started = time.monotonic()
        conn = None
        try:
            conn = Conn(config)
            self.run(conn)
            return Result(self, "passed", time.monotonic() - started)
        except Skipped as skip:
            return Result(self, "skipped", time.monotonic() - started, reason=str(skip))
        except Failure as failure:
            trace = conn.trace if conn is not None else []
            return Result(self, "failed", time.monotonic() - started, failure.expected, failure.actual, trace=trace)
        except OSError as error:
            return Result(self, "failed", time.monotonic() - started, ["a working connection"], "Error: %s" % error)
        except Exception as error:  # a runner bug must show as this case's failure, not end the run
            return Result(self, "failed", time.monotonic() - started, ["(runner)"], "Runner error: %r" % error)
        finally:
            if conn is not None:
                conn.close()


class Group:
    def __init__(self, suite, parent, section, title):
        self.suite = suite
        self.parent = parent
        self.section = section
        self.title = title
        self.children = []  # Group or Case, in order

    @property
    def id(self):
        return "%s/%s" % (self.suite.key, self.section)

    @property
    def depth(self):
        return 1 if self.parent is None else self.parent.depth + 1

    @property
    def heading(self):
        # h2spec prints "3. Starting HTTP/2" for top-level sections, "3.5. HTTP/2 ..." below.
        return "%s. %s" % (self.section, self.title)

    def group(self, section, title):
        child = Group(self.suite, self, section, title)
        self.children.append(child)
        return child

    def case(self, number, description, requirement, strict=False):
        """Decorator: registers the function as case `number` of this group."""

        def register(run):
            expected = sum(1 for child in self.children if isinstance(child, Case)) + 1
            if number != expected:
                raise AssertionError("%s: case %d registered as %d" % (self.id, expected, number))
            self.children.append(Case(self, number, description, requirement, run, strict))
            return run

        return register

    def cases(self):
        for child in self.children:
            if isinstance(child, Case):
                yield child
            else:
                yield from child.cases()


class Suite:
    def __init__(self, key, title):
        self.key = key
        self.title = title
        self.groups = []

    def group(self, section, title):
        group = Group(self, None, section, title)
        self.groups.append(group)
        return group

    def cases(self):
        for group in self.groups:
            yield from group.cases()


def selected(case, sections):
    """h2spec's section filter: "http2", "http2/5.1", "http2/5.1/3" (a prefix of the id)."""
    if not sections:
        return True
    for section in sections:
        if case.id == section or case.id.startswith(section + "/") or case.group.id == section:
            return True
        # "http2/5" selects 5.1, 5.1.1, ... (whole section levels only).
        if case.group.id.startswith(section + "."):
            return True
    return False
