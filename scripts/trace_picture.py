#!/usr/bin/env python3
"""Draws a few steps of a Cohort step trace (`cohort-worker train --trace`) as an SVG.

    scripts/trace_picture.py TRACE.json OUT.svg [--first-step 50] [--steps 3]

One row per track of every rank ("rank 0 compute", "rank 0 all-reduce", ...), spans as
boxes coloured by phase, a millisecond axis. The window runs from the start of rank 0's
step --first-step (counted over the whole run, 1-based) to the end of the --steps'th
step after it. Standard library only: the picture in docs/observability.md comes from
it, and Perfetto or chrome://tracing show the same file interactively.
"""

import argparse
import html
import json

COLOURS = {
    "step": "#e8eaed", "data": "#fbbc04", "forward": "#4285f4", "backward": "#0b57d0",
    "metrics": "#a142f4", "all-reduce wait": "#ea4335", "optimizer": "#34a853",
}
BUCKET = "#ff8a65"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace")
    parser.add_argument("out")
    parser.add_argument("--first-step", type=int, default=50)
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()
    with open(args.trace) as f:
        events = json.load(f)["traceEvents"]
    processes, threads, spans = {}, {}, []
    for e in events:
        if e["ph"] == "M" and e["name"] == "process_name":
            processes[e["pid"]] = e["args"]["name"]
        elif e["ph"] == "M" and e["name"] == "thread_name":
            threads[(e["pid"], e["tid"])] = e["args"]["name"]
        elif e["ph"] == "X":
            spans.append(e)
    steps0 = sorted((s for s in spans if s["pid"] == 0 and s["name"] == "step"), key=lambda s: s["ts"])
    first = steps0[args.first_step - 1]
    last = steps0[args.first_step - 2 + args.steps]
    t0, t1 = first["ts"] - 200, last["ts"] + last["dur"] + 200

    rows = sorted(threads)
    label_w, width, row_h, top = 170, 1100, 34, 40
    scale = (width - label_w - 20) / (t1 - t0)
    height = top + row_h * len(rows) + 40
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="DejaVu Sans, sans-serif" font-size="11">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="10" y="20" font-size="13" font-weight="bold">{html.escape(args.trace.split("/")[-1])}: '
           f'steps {args.first_step}-{args.first_step + args.steps - 1} of every rank</text>']
    for i, (pid, tid) in enumerate(rows):
        y = top + i * row_h
        out.append(f'<text x="10" y="{y + 21}">{html.escape(processes.get(pid, str(pid)))} '
                   f'{html.escape(threads[(pid, tid)])}</text>')
        out.append(f'<line x1="{label_w}" x2="{width - 10}" y1="{y + row_h - 2}" y2="{y + row_h - 2}" stroke="#ddd"/>')
        mine = [s for s in spans if (s["pid"], s["tid"]) == (pid, tid)
                and s["ts"] < t1 and s["ts"] + s["dur"] > t0]
        # Parents first, so children are drawn over them.
        for s in sorted(mine, key=lambda s: (s["name"] != "step", s["ts"])):
            x = label_w + (max(s["ts"], t0) - t0) * scale
            w = max(1.0, (min(s["ts"] + s["dur"], t1) - max(s["ts"], t0)) * scale)
            inner = s["name"] != "step"
            h, dy = (row_h - 12, 5) if inner else (row_h - 6, 2)
            colour = BUCKET if s["name"].startswith("bucket") else COLOURS.get(s["name"], "#999")
            out.append(f'<rect x="{x:.1f}" y="{y + dy}" width="{w:.1f}" height="{h}" fill="{colour}" '
                       f'stroke="white" stroke-width="0.5"><title>{html.escape(s["name"])}: '
                       f'{s["dur"] / 1000:.3f} ms</title></rect>')
            if w > 7 * len(s["name"]) and inner:
                out.append(f'<text x="{x + 3:.1f}" y="{y + dy + h / 2 + 4:.1f}" fill="white">'
                           f'{html.escape(s["name"])}</text>')
    axis_y = top + row_h * len(rows) + 14
    span_ms = (t1 - t0) / 1000
    tick = next(t for t in (0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000) if span_ms / t <= 12)
    k = 0
    while k * tick <= span_ms:
        x = label_w + k * tick * 1000 * scale
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{axis_y - 6}" y2="{axis_y}" stroke="#666"/>')
        out.append(f'<text x="{x:.1f}" y="{axis_y + 12}" text-anchor="middle" fill="#444">{k * tick:g} ms</text>')
        k += 1
    out.append("</svg>")
    with open(args.out, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
