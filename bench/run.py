#!/usr/bin/python3
"""Cohort's CPU training benchmark against its PyTorch peers, in one run.

  /usr/bin/python3 bench/run.py --cohort-worker build/worker/cohort-worker \
      --out docs/benchmarks.md

For each model (mlp: 784-256-128-10; cnn: examples/mnist_cnn.keras), batch 128, Adam:
  - PyTorch eager, one process on every core        (bench/peer_torch_eager.py)
  - PyTorch DDP over Gloo, --ranks processes, 1 thread each (bench/peer_torch_ddp.py)
  each under every allocator of ALLOCATORS (as installed, and tuned two ways), and
  - Cohort's trainer, 1 rank and --ranks ranks.
It prints a markdown report (machine, method, one table per side, Cohort's ratio to
each peer) and writes it to --out. Standard library only; the peers need Debian's
python3-torch, so run it with /usr/bin/python3.

Every number comes with the user and system CPU seconds of its measured window: with
glibc's malloc LibTorch returns big blocks to the OS every step and takes them back as
page faults, which shows up as sys time rivalling user time. `other load` is the share
of the machine's CPU that processes outside the benchmark used during the run, from
/proc/stat; a row with much of it is noise, so the runner first waits (up to
--max-wait seconds) for the machine to be quiet before each run, and runs again (up to
--retries times) when other load exceeded NOISY_LOAD, keeping the least disturbed run.
On a machine that is never quiet, --nice -20 (as root) gives the benchmark the CPU for
its few minutes.
"""
import argparse
import array
import json
import os
import random
import shlex
import shutil
import signal
import sys
import tempfile
import threading

import measure
from measure import ProcessCpuSeconds, Run, WaitForQuiet
from report import Machine, Report, Row

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_DIR = os.path.dirname(BENCH_DIR)
JEMALLOC = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"
# Environment changes per allocator. glibc ignores an mmap threshold above 32 MiB (its
# maximum on 64-bit); setting it also turns off the dynamic threshold. The biggest
# buffers here (the cnn's first activation, 128x32x26x26 floats) are 11 MiB.
ALLOCATORS = {
    "glibc": {},
    "glibc-tuned": {"MALLOC_MMAP_THRESHOLD_": str(32 << 20),
                    "MALLOC_TRIM_THRESHOLD_": str(1 << 30)},
    "jemalloc": {"LD_PRELOAD": JEMALLOC},
}
ALLOCATOR_VARIABLES = ("LD_PRELOAD", "GLIBC_TUNABLES", "MALLOC_MMAP_THRESHOLD_",
                       "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_ARENA_MAX")
MODELS = {  # the .keras file Cohort trains and the shape of one sample
    "mlp": ("mnist_mlp.keras", (784,)),
    "cnn": ("mnist_cnn.keras", (28, 28, 1)),
}
CLASSES = 10
QUIET_BUSY_SHARE = 0.10
COHORT_EPOCHS = 4  # the first is warm-up; the other three are measured
NOISY_LOAD = 0.10  # a run during which other processes used more of the machine is redone
FALLBACK_SAMPLES_PER_SECOND = {"mlp": 20000.0, "cnn": 2000.0}  # when no peer ran

# ---------------------------------------------------------------------------------
# What the runner expects from the Cohort trainer (worker/trainer/events.h has it):
#
#   cohort-worker train JOB.yaml --rank R --world N --rendezvous file://DIR --out DIR
#       --threads T
#
# is started once per rank, all ranks at once, with the same JOB.yaml, rendezvous
# directory and --out directory, and T = --eager-threads for 1 rank, 1 for N ranks (as
# the peers); it exits 0 when training is done. Its stdout carries
# JSON lines (one object per line; other lines are ignored). A line counts as the end
# of an epoch when it is an object with a number under "samples_per_second":
#
#   {"event": "epoch_end", "epoch": 1, "samples_per_second": 61234.5, ...}
#
#   samples_per_second  global training samples (all ranks together) per second over
#                       that epoch: the epoch's rows / its wall time.
#   event, epoch        not required; "event" other than "epoch_end" is ignored when
#                       present, so other events may carry samples_per_second too.
# Only rank 0's lines are read (other ranks may print the same or nothing). The job runs
# COHORT_EPOCHS epochs; the first is warm-up, and samples/s is the harmonic mean of the
# others (total rows / total time). CPU time is measured from outside: each rank's
# /proc/PID/stat when rank 0's first epoch line arrives, subtracted from the totals
# os.wait4 reports when the rank exits. The job YAML is JobYaml() below (the fields of
# common/job/job_spec.h; docs/job-spec.md).
# ---------------------------------------------------------------------------------


def JobYaml(name, model_path, x_path, y_path, epochs, batch, ranks):
    return f"""\
name: {name}
model: {model_path}
data:
  x: {x_path}
  y: {y_path}
fit:
  epochs: {epochs}
  batch_size: {batch}
  shuffle: true
  seed: 0
resources:
  workers: {ranks}
  device: cpu
checkpoint:
  every_epochs: 0
max_restarts: 0
"""


def IsEpochLine(event):
    return (isinstance(event, dict)
            and isinstance(event.get("samples_per_second"), (int, float))
            and event.get("event", "epoch_end") == "epoch_end")


def PeerEnvironment(allocator, threads):
    env = {k: v for k, v in os.environ.items() if k not in ALLOCATOR_VARIABLES}
    env.update(ALLOCATORS[allocator])
    # torch.set_num_threads does not reach an OpenBLAS behind libblas.so.3, which would
    # otherwise start a thread per core in every process
    env.update(OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
    return env


def RunPeer(python, script, args, allocator, threads, timeout_s):
    run = Run([[python, os.path.join(BENCH_DIR, script)] + args],
              [PeerEnvironment(allocator, threads)])
    run.Wait(timeout_s)
    failure = run.Failure()
    result = None
    for line in reversed(run.lines[0]):
        try:
            result = json.loads(line)
            break
        except ValueError:
            continue
    if failure is None and result is None:
        failure = "printed no JSON line"
    if failure:
        return {"failure": failure, "other_load": run.other_load}
    result["other_load"] = run.other_load
    result["samples"] = result["steps"] * result["batch"]
    return result


# --- Cohort -----------------------------------------------------------------------

def WriteNpy(path, descr, shape, data):
    """A .npy (format 1.0) file; `data` is an array.array of little-endian items."""
    dims = f"({shape[0]},)" if len(shape) == 1 else "(" + ", ".join(map(str, shape)) + ")"
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, dims)
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little"))
        f.write(header.encode("latin1"))
        data.tofile(f)


def WriteSyntheticData(directory, model, rows):
    """x: float32 uniform in [0, 1) of the model's input shape (1,024 distinct rows,
    repeated); y: int64 labels in [0, 10). Returns (x_path, y_path)."""
    if sys.byteorder != "little":
        raise RuntimeError("WriteNpy writes native floats; this machine is big-endian")
    rng = random.Random(0)
    shape = MODELS[model][1]
    row = 1
    for d in shape:
        row *= d
    distinct = min(rows, 1024)
    block = array.array("f", (rng.random() for _ in range(row * distinct)))
    x = array.array("f")
    while len(x) < row * rows:
        x.extend(block[:row * rows - len(x)])
    y = array.array("q", (rng.randrange(CLASSES) for _ in range(rows)))
    x_path = os.path.join(directory, f"{model}_x.npy")
    y_path = os.path.join(directory, f"{model}_y.npy")
    WriteNpy(x_path, "<f4", (rows,) + shape, x)
    WriteNpy(y_path, "<i8", (rows,), y)
    return x_path, y_path


def RunCohort(worker, work_dir, model, x_path, y_path, rows, batch, ranks, threads,
              timeout_s):
    name = f"bench-{model}-{ranks}"
    job_dir = tempfile.mkdtemp(prefix=name + "-", dir=work_dir)  # fresh for each attempt
    rendezvous = os.path.join(job_dir, "rendezvous")
    out = os.path.join(job_dir, "out")
    os.makedirs(rendezvous)
    os.makedirs(out)
    job = os.path.join(job_dir, "job.yaml")
    with open(job, "w") as f:
        f.write(JobYaml(name, os.path.join(REPO_DIR, "examples", MODELS[model][0]),
                        x_path, y_path, COHORT_EPOCHS, batch, ranks))
    commands = [[worker, "train", job, "--rank", str(r), "--world", str(ranks),
                 "--rendezvous", "file://" + rendezvous, "--out", out,
                 "--threads", str(threads)]
                for r in range(ranks)]

    reported = []  # rank 0's samples_per_second, per epoch
    snapshot = {}  # rank -> (user, sys) CPU seconds when rank 0's first epoch ended
    lock = threading.Lock()

    def OnLine(rank, line):
        if rank != 0:
            return
        try:
            event = json.loads(line)
        except ValueError:
            return
        if not IsEpochLine(event):
            return
        with lock:
            reported.append(float(event["samples_per_second"]))
            if not snapshot:
                for r, process in enumerate(run.processes):
                    snapshot[r] = ProcessCpuSeconds(process.pid)

    run = None
    with lock:  # OnLine waits until `run` is assigned
        run = Run(commands, [dict(os.environ)] * ranks, OnLine)
    run.Wait(timeout_s)
    result = {"system": "cohort", "model": model, "ranks": ranks, "threads": threads,
              "allocator": "as built", "batch": batch, "other_load": run.other_load}
    failure = run.Failure()
    if failure is None and len(reported) < 2:
        failure = (f"{len(reported)} epoch lines with samples_per_second on stdout "
                   f"(expected {COHORT_EPOCHS})")
    if failure is None and any(snapshot.get(r) is None for r in range(ranks)):
        failure = "a rank exited before rank 0's first epoch line was read"
    if failure:
        result["failure"] = failure
        return result
    measured = reported[1:]
    result["samples_per_second"] = len(measured) / sum(1.0 / s for s in measured)
    result["samples"] = rows * len(measured)
    result["user_s"] = sum(u.ru_utime - snapshot[r][0] for r, u in enumerate(run.usage))
    result["sys_s"] = sum(u.ru_stime - snapshot[r][1] for r, u in enumerate(run.usage))
    return result


def Measure(args, run_once):
    """run_once() after waiting for a quiet machine, again (up to --retries times) while
    other processes took more than NOISY_LOAD of it; the least disturbed result."""
    best = None
    for attempt in range(1 + args.retries):
        if attempt:
            print(f"  noisy ({best['other_load']:.0%} other load): again", file=sys.stderr)
        WaitForQuiet(args.max_wait)
        result = run_once()
        if best is None or result["other_load"] < best["other_load"]:
            best = result
        if "failure" in result or result["other_load"] <= NOISY_LOAD:
            return result
    return best


def RunPeers(args, allocators):
    peers = []
    for model in args.models:
        for allocator in allocators:
            for label, script, ranks, threads in (
                    ("eager", "peer_torch_eager.py", 1, args.eager_threads),
                    ("DDP", "peer_torch_ddp.py", args.ranks, 1)):
                print(f"{model} {label} {allocator}", file=sys.stderr)
                command = ["--model", model, "--batch", str(args.batch),
                           "--seconds", str(args.seconds), "--threads", str(threads)]
                if label == "DDP":
                    command += ["--ranks", str(ranks)]
                result = Measure(args, lambda: RunPeer(args.python, script, command,
                                                       allocator, threads,
                                                       10 * args.seconds + 120))
                result.update({"system": "torch_" + label.lower(), "model": model,
                               "allocator": allocator, "label": f"{label} {allocator}",
                               "ranks": ranks, "threads": threads})
                print("  " + Row(result), file=sys.stderr)
                peers.append(result)
    return peers


def RunCohorts(args, peers):
    """Cohort's rows, and a note for the report (None when every row has a result)."""
    if not os.access(args.cohort_worker, os.X_OK):
        return [], (f"Cohort not run: {args.cohort_worker} is not an executable "
                    "(build it, or pass --cohort-worker).")
    cohort = []
    work_dir = tempfile.mkdtemp(prefix="cohort-bench-")
    try:
        for model in args.models:
            speeds = [p["samples_per_second"] for p in peers
                      if p["model"] == model and "failure" not in p]
            speed = max(speeds) if speeds else FALLBACK_SAMPLES_PER_SECOND[model]
            # about --seconds of measured epochs at the best peer's speed
            rows = int(speed * args.seconds / (COHORT_EPOCHS - 1))
            rows = max(20 * args.batch, rows // args.batch * args.batch)
            x_path, y_path = WriteSyntheticData(work_dir, model, rows)
            for ranks in sorted({1, args.ranks}):
                threads = args.eager_threads if ranks == 1 else 1  # as the peers
                print(f"{model} cohort {ranks} x {threads}, {rows} rows", file=sys.stderr)
                result = Measure(args, lambda: RunCohort(
                    args.cohort_worker, work_dir, model, x_path, y_path, rows, args.batch,
                    ranks, threads, 10 * args.seconds + 120))
                print("  " + Row(result), file=sys.stderr)
                cohort.append(result)
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
    failed = any("failure" in c for c in cohort)
    return cohort, "Rows marked failed produced no result (reason shown)." if failed else None


def RerunArguments(argv, args):
    """This run's arguments, for the report: paths inside the repository relative to it,
    --cohort-worker and --out always present."""
    def Shown(path):
        inside = os.path.commonpath([path, REPO_DIR]) == REPO_DIR
        return os.path.relpath(path, REPO_DIR) if inside else path

    rest, skip = [], False
    for i, arg in enumerate(argv):
        if skip:
            skip = False
        elif arg in ("--cohort-worker", "--out"):
            skip = True
        elif not arg.startswith(("--cohort-worker=", "--out=")):
            rest.append(arg)
    return (["--cohort-worker", Shown(args.cohort_worker),
             "--out", Shown(args.out) if args.out else "docs/benchmarks.md"] + rest)


def Stop(signum, frame):
    raise SystemExit(128 + signum)  # unwinds through Run.Wait, which kills the runs


def main(argv):
    signal.signal(signal.SIGTERM, Stop)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cohort-worker",
                        default=os.path.join(REPO_DIR, "build", "worker", "cohort-worker"))
    parser.add_argument("--out", help="write the markdown report here too")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--eager-threads", type=int, default=os.cpu_count())
    parser.add_argument("--seconds", type=float, default=10.0,
                        help="measured seconds per peer run")
    parser.add_argument("--allocators", default=",".join(ALLOCATORS),
                        help="the peers' allocators; empty: no peers")
    parser.add_argument("--max-wait", type=float, default=60.0,
                        help="seconds to wait for a quiet machine before each run")
    parser.add_argument("--retries", type=int, default=2,
                        help=f"runs again while other load exceeds {NOISY_LOAD:.0%}")
    parser.add_argument("--nice", type=int, default=0,
                        help="change the benchmark's priority by this much (-20: take "
                             "the CPU from builds on a shared machine; needs root)")
    parser.add_argument("--python", default="/usr/bin/python3",
                        help="the Python whose torch the peers use")
    args = parser.parse_args(argv)
    args.cohort_worker = os.path.abspath(args.cohort_worker)
    args.out = os.path.abspath(args.out) if args.out else None
    args.models = [m for m in args.models.split(",") if m]
    allocators = [a for a in args.allocators.split(",") if a]
    for names, known, what in ((args.models, MODELS, "model"),
                               (allocators, ALLOCATORS, "allocator")):
        unknown = [n for n in names if n not in known]
        if unknown:
            parser.error(f"unknown {what} {unknown[0]!r}; known: {', '.join(known)}")
    if args.batch % args.ranks != 0:
        parser.error(f"--batch {args.batch} is not divisible by --ranks {args.ranks}")
    if "jemalloc" in allocators and not os.path.exists(JEMALLOC):
        print(f"skipping jemalloc: {JEMALLOC} is not installed", file=sys.stderr)
        allocators.remove("jemalloc")
    if args.nice:
        try:
            os.nice(args.nice)
        except PermissionError:
            parser.error(f"--nice {args.nice}: not permitted (a negative value needs root)")
        measure.SESSION_NICE = args.nice
    args.cohort_epochs = COHORT_EPOCHS
    args.command = "/usr/bin/python3 bench/run.py " + shlex.join(RerunArguments(argv, args))

    machine = Machine(args.python, JEMALLOC)
    peers = RunPeers(args, allocators)
    cohort, cohort_note = RunCohorts(args, peers)
    report = Report(args, machine, peers, cohort, cohort_note)
    print(report)
    if args.out:
        os.makedirs(os.path.dirname(args.out), exist_ok=True)
        with open(args.out + ".tmp", "w") as f:
            f.write(report)
        os.replace(args.out + ".tmp", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
