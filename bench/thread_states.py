#!/usr/bin/env python3
"""thread_states.py - where a running server's threads spend their time: samples every thread's
scheduler state (R running, S sleeping, D uninterruptible: waiting for the disk or a page lock)
and, for threads in D, the kernel function they wait in, every INTERVAL seconds for SECONDS.

    python3 bench/thread_states.py PID [SECONDS=2] [INTERVAL=0.0005]

Prints one line per thread name: the share of samples in each state, and the most frequent
wait functions in D. docs/research/architectures.md ("The loop does not wait for reads in flight") uses
it to show an `amped` event loop that waits for reads in flight asleep in `folio_wait_bit_common`
in 69 % of samples: an event loop should show R and S only. /proc/PID/task/TID/wchan needs root (or the same user with kernel.kptr_restrict 0) to
name the function; without it the states are still counted.
"""
import collections
import os
import sys
import time


def thread_names(pid):
    names = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as comm:
                names[tid] = comm.read().strip()
        except OSError:
            pass
    return names


def sample(pid, tid):
    """(state letter, wait function or '') of one thread, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/task/{tid}/stat") as stat:
            # The command name may hold spaces and parentheses: the state follows the last ')'.
            state = stat.read().rsplit(")", 1)[1].split()[0]
        wchan = ""
        if state == "D":
            with open(f"/proc/{pid}/task/{tid}/wchan") as wait:
                wchan = wait.read().strip()
        return state, wchan
    except OSError:
        return None


def main():
    if len(sys.argv) not in (2, 3, 4):
        sys.stderr.write(__doc__)
        return 2
    pid = sys.argv[1]
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 2.0
    interval = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0005
    if not os.path.isdir(f"/proc/{pid}"):
        sys.stderr.write(f"thread_states.py: no process {pid}\n")
        return 1
    states = collections.defaultdict(collections.Counter)
    waits = collections.defaultdict(collections.Counter)
    names = thread_names(pid)
    deadline = time.monotonic() + seconds
    rounds = 0
    while time.monotonic() < deadline:
        if rounds % 200 == 0:
            names.update(thread_names(pid))  # helpers start and end during a run
        for tid, name in list(names.items()):
            found = sample(pid, tid)
            if found is None:
                names.pop(tid, None)
                continue
            state, wchan = found
            # Threads of one name (helpers) are summed: the share is of their samples.
            states[name][state] += 1
            if wchan:
                waits[name][wchan] += 1
        rounds += 1
        time.sleep(interval)
    print(f"{rounds} rounds over {seconds:g} s")
    for name in sorted(states):
        total = sum(states[name].values())
        shares = " ".join(f"{state} {count * 100 / total:.1f}%" for state, count in states[name].most_common())
        line = f"{name:24s} {shares}"
        if waits[name]:
            line += "  D in: " + ", ".join(f"{wchan} {count}" for wchan, count in waits[name].most_common(3))
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
