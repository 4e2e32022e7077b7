"""Reads TensorBoard event files with TensorBoard's own reader and prints what it found.

    read_events.py LOGDIR

Every directory under LOGDIR (LOGDIR included) that holds an events.out.tfevents.* file
is a run, named by its path relative to LOGDIR ("." for LOGDIR itself). Prints one JSON
object: {"runs": {run: {"file_version": v, "scalars": {tag: [[step, value, wall_time],
...]}}}}. Exits 1 when LOGDIR holds no event file. Used by the Catch2 tests of the event
writer and of the trainer, which judge the contents.
"""

import json
import os
import sys

from tensorboard.backend.event_processing import event_accumulator as ea


def read_run(path):
    acc = ea.EventAccumulator(path, size_guidance={ea.SCALARS: 0})
    acc.Reload()
    scalars = {}
    for tag in acc.Tags()[ea.SCALARS]:
        scalars[tag] = [[e.step, e.value, e.wall_time] for e in acc.Scalars(tag)]
    return {"file_version": acc.file_version, "scalars": scalars}


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    logdir = sys.argv[1]
    runs = {}
    for root, _, files in os.walk(logdir):
        if any(f.startswith("events.out.tfevents.") for f in files):
            runs[os.path.relpath(root, logdir)] = read_run(root)
    if not runs:
        print(f"no event files under {logdir}", file=sys.stderr)
        return 1
    json.dump({"runs": runs}, sys.stdout, sort_keys=True)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
