"""Judges a Chrome trace (the JSON "traceEvents" format) from `cohort-worker train --trace`.

    check_trace.py TRACE.json RANKS

Checks what chrome://tracing and Perfetto need and what the issue asks: valid JSON with
a "traceEvents" list; every event has a name, a phase, pid and tid; complete events
("X") have numeric ts and dur >= 0; there is one process per rank 0..RANKS-1, named
"rank R", each with a "compute" and an "all-reduce" track; and on every track the spans
nest properly (a span that starts inside another ends inside it). Prints a JSON summary
({"ranks": {rank: {"steps": n, "phases": {name: count}, "buckets": n}}}) and exits 0,
or prints what is wrong and exits 1.
"""

import collections
import json
import sys


def fail(message):
    print(message, file=sys.stderr)
    sys.exit(1)


def main():
    path, ranks = sys.argv[1], int(sys.argv[2])
    with open(path) as f:
        trace = json.load(f)
    events = trace.get("traceEvents") if isinstance(trace, dict) else None
    if not isinstance(events, list) or not events:
        fail("no traceEvents list")
    names = {}
    threads = collections.defaultdict(dict)
    spans = collections.defaultdict(list)
    for e in events:
        for key in ("name", "ph", "pid", "tid"):
            if key not in e:
                fail(f"event without {key}: {e}")
        if e["ph"] == "M":
            if e["name"] == "process_name":
                names[e["pid"]] = e["args"]["name"]
            elif e["name"] == "thread_name":
                threads[e["pid"]][e["tid"]] = e["args"]["name"]
        elif e["ph"] == "X":
            if not isinstance(e.get("ts"), (int, float)) or not isinstance(e.get("dur"), (int, float)):
                fail(f"complete event without numeric ts/dur: {e}")
            if e["dur"] < 0:
                fail(f"negative duration: {e}")
            spans[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"], e["name"]))
        else:
            fail(f"unexpected phase {e['ph']}")
    if sorted(names) != list(range(ranks)):
        fail(f"processes {sorted(names)}, wanted ranks 0..{ranks - 1}")
    summary = {}
    for rank in range(ranks):
        if names[rank] != f"rank {rank}":
            fail(f"pid {rank} is named {names[rank]!r}")
        if threads[rank] != {0: "compute", 1: "all-reduce"}:
            fail(f"rank {rank} tracks: {threads[rank]}")
        for tid in (0, 1):
            stack = []
            # Parents first: by start, then the longer one.
            for start, end, name in sorted(spans[(rank, tid)], key=lambda s: (s[0], -s[1])):
                while stack and stack[-1][1] <= start:
                    stack.pop()
                if stack and end > stack[-1][1]:
                    fail(f"rank {rank} track {tid}: {name} [{start}, {end}] overlaps "
                         f"{stack[-1][2]} [{stack[-1][0]}, {stack[-1][1]}] without nesting")
                stack.append((start, end, name))
        phases = collections.Counter(name for _, _, name in spans[(rank, 0)])
        summary[rank] = {"steps": phases.pop("step", 0), "phases": phases,
                         "buckets": len(spans[(rank, 1)])}
    json.dump({"ranks": summary}, sys.stdout, sort_keys=True)
    print()


if __name__ == "__main__":
    main()
