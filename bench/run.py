#!/usr/bin/python3
"""The engine of bench/run: Cohort's CPU training and all-reduce against every peer.

  bench/run [--build-dir build] [--out docs/benchmarks.md] [--seconds 5] ...

For each model (mlp, cnn, residual: examples/mnist_*.keras), global batch (128, 1024)
and setting (1 rank x every core, 1 rank x 1 thread, --ranks ranks x 1 thread), it runs
back to back the kernel floor first, then the others --rounds times (2; in an order that
rotates from one setting to the next, reversed each round), then the floor again; each
system's figure is its fastest run:
  - the kernel floor: BUILD/bench/kernel_floor, the model's matrix products and
    convolutions alone on the same threads (one process per rank, each on its share),
  - PyTorch eager (1 rank) or DDP over Gloo (N ranks) under each allocator of
    --allocators (as installed, tuned glibc, jemalloc),
  - Keras 3 model.fit on the torch and JAX backends (1 rank; only with --keras-python,
    the virtualenv bench/setup-peers makes),
  - Cohort's trainer, BUILD/worker/cohort-worker train, 1 or N ranks (N ranks: once
    sharing one copy of the model, as it trains by default, and once with
    --replica-per-rank, a replica each, to show what sharing gains),
and then the all-reduce table: Cohort's Gloo all-reduce between 2 processes
(BUILD/worker/trainer/collective/cohort_collective_bench --json, which also measures
loopback TCP in the same run; once through shared memory, as ranks of one machine run
it, and once with --tcp) against c10d's ProcessGroupGloo (bench/peer_c10d_allreduce.py).
It prints a markdown report (machine, method, one table per model, the targets of
issue 7 with their ratios, the all-reduce table) and writes it to --out: between the
markers `<!-- bench/run begin -->` and `<!-- bench/run end -->` when the file has
them, else the whole file.

Every row carries its user and system CPU seconds, the peak resident memory of its
largest process, and `other load`: the share of the machine that processes outside the
benchmark used meanwhile (from /proc/stat). The runner waits (up to --max-wait s) for a
quiet machine before each run and runs again (up to --retries times) while other load
exceeded NOISY_LOAD, keeping the least disturbed run. Standard library only; the
PyTorch peers need Debian's python3-torch, so run it with /usr/bin/python3.
"""
import argparse
import array
import json
import os
import random
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading

import measure
from measure import CpuInfoField, ProcessCpuSeconds, Run, WaitForQuiet
from report import Machine, Report

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_DIR = os.path.dirname(BENCH_DIR)
JEMALLOC = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"
# Environment changes per allocator. glibc ignores an mmap threshold above 32 MiB (its
# maximum on 64-bit); setting it also turns off the dynamic threshold.
ALLOCATORS = {
    "glibc": {},
    "glibc-tuned": {"MALLOC_MMAP_THRESHOLD_": str(32 << 20),
                    "MALLOC_TRIM_THRESHOLD_": str(1 << 30)},
    "jemalloc": {"LD_PRELOAD": JEMALLOC},
}
ALLOCATOR_VARIABLES = ("LD_PRELOAD", "GLIBC_TUNABLES", "MALLOC_MMAP_THRESHOLD_",
                       "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_ARENA_MAX")
PRECISIONS = ("float32", "mixed_bfloat16")  # fit.precision (docs/job-spec.md)
MODELS = {  # the .keras file Cohort trains and the shape of one sample
    "mlp": ("mnist_mlp.keras", (784,)),
    "cnn": ("mnist_cnn.keras", (28, 28, 1)),
    "residual": ("mnist_residual.keras", (784,)),
}
CLASSES = 10
NOISY_LOAD = 0.10  # a run during which other processes used more of the machine is redone
# Cohort reads its data from .npy files (memory-mapped, so touched pages count in its
# resident memory): at most this much data, and as many epochs as --seconds needs.
COHORT_DATA_BYTES = 24 << 20
COHORT_MAX_EPOCHS = 400

# ---------------------------------------------------------------------------------
# What the runner expects from the Cohort trainer (worker/trainer/events.h has it):
#
#   cohort-worker train JOB.yaml --rank R --world N --rendezvous file://DIR --out DIR
#       --threads T
#
# is started once per rank, all ranks at once, with the same JOB.yaml, rendezvous
# directory and --out directory; it exits 0 when training is done. Its stdout carries
# JSON lines; a line counts as the end of an epoch when it is an object with a number
# under "samples_per_second" (and "event", when present, is "epoch_end"):
#
#   {"event": "epoch_end", "epoch": 1, "samples_per_second": 61234.5, ...}
#
# samples_per_second is global (all ranks) over that epoch. Only rank 0's lines are
# read. The first epoch is warm-up; samples/s is total rows / total time of the others.
# CPU time is measured from outside: each rank's /proc/PID/stat when rank 0's first
# epoch line arrives, subtracted from the totals os.wait4 reports when the rank exits.
# ---------------------------------------------------------------------------------


def JobYaml(name, model_path, x_path, y_path, epochs, batch, ranks, precision):
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
  precision: {precision}
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


def Tuned(allocator):
    """Whether a PyTorch peer runs tuned as Cohort does (peer_torch_eager.py --tuned):
    the runs with a tuned allocator are."""
    return allocator != "glibc"


def OpenBlasCoreType():
    """The OPENBLAS_CORETYPE that names this CPU's kernels, from its flags; None when
    nothing better than OpenBLAS' own detection is known. OpenBLAS picks kernels by the
    CPU's model number, and on a CPU newer than it knows (0.3.21 on an Emerald Rapids,
    family 6, model 207) it falls back to Prescott's SSE3 kernels: there a 1024x784 @
    784x256 product in PyTorch took 12.8 ms on one thread, 2.9 ms as SkylakeX, and
    PyTorch eager ran 3-5x slower than on a CPU OpenBLAS knows. Every system of the
    benchmark runs with it (cohort-worker would set it for itself: cpu_threads.h)."""
    flags = set((CpuInfoField("flags") or "").split())
    if {"avx512f", "avx512vl", "avx512bw", "avx512dq"} <= flags:
        return "SkylakeX"
    if {"avx2", "fma"} <= flags:
        return "Haswell"
    return None


def PeerEnvironment(allocator, threads, model=None):
    env = {k: v for k, v in os.environ.items() if k not in ALLOCATOR_VARIABLES}
    env.update(ALLOCATORS[allocator])
    # torch.set_num_threads does not reach an OpenBLAS behind libblas.so.3, which would
    # otherwise start a thread per core in every process. Tuned, the threads go to one
    # pool: OpenBLAS's for the Dense models, LibTorch's for the cnn.
    intra = blas = threads
    if Tuned(allocator) and model is not None:
        intra, blas = (threads, 1) if model == "cnn" else (1, threads)
    env.update(OMP_NUM_THREADS=str(intra), OPENBLAS_NUM_THREADS=str(blas))
    return env


def LastJson(lines):
    for line in reversed(lines):
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


def RunJsonProcesses(commands, envs, timeout_s):
    """Starts the commands together; one result per command (its last JSON line), or a
    failure. Each result gets max_rss_kb from os.wait4 unless it reported its own."""
    run = Run(commands, envs)
    run.Wait(timeout_s)
    failure = run.Failure()
    results = [LastJson(lines) for lines in run.lines]
    if failure is None and any(r is None for r in results):
        failure = "printed no JSON line"
    if failure:
        return None, {"failure": failure, "other_load": run.other_load}
    for result, usage in zip(results, run.usage):
        result.setdefault("max_rss_kb", usage.ru_maxrss)
    return results, {"other_load": run.other_load}


def RunPeer(command, env, timeout_s):
    results, info = RunJsonProcesses([command], [env], timeout_s)
    if results is None:
        return info
    result = results[0]
    result.update(info)
    result["samples"] = result["steps"] * result["batch"]
    return result


def RunFloor(args, model, batch, ranks, threads):
    """The kernel floor: one kernel_floor process per rank, at once, each on its share of
    the batch; samples/s is their sum."""
    command = [args.kernel_floor, "--model", model, "--batch", str(batch // ranks),
               "--threads", str(threads), "--seconds", str(args.seconds)]
    env = PeerEnvironment("glibc", threads)
    results, info = RunJsonProcesses([command] * ranks, [env] * ranks, 10 * args.seconds + 60)
    if results is None:
        return info
    info.update({
        "samples_per_second": sum(r["samples_per_second"] for r in results),
        "samples": sum(r["steps"] * r["batch"] for r in results),
        "user_s": sum(r["user_s"] for r in results),
        "sys_s": sum(r["sys_s"] for r in results),
        "max_rss_kb": max(r["max_rss_kb"] for r in results)})
    return info


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


def RowValues(model):
    row = 1
    for d in MODELS[model][1]:
        row *= d
    return row


def WriteSyntheticData(directory, model, rows):
    """x: float32 uniform in [0, 1) of the model's input shape (1,024 distinct rows,
    repeated); y: int64 labels in [0, 10). Returns (x_path, y_path)."""
    if sys.byteorder != "little":
        raise RuntimeError("WriteNpy writes native floats; this machine is big-endian")
    x_path = os.path.join(directory, f"{model}_{rows}_x.npy")
    y_path = os.path.join(directory, f"{model}_{rows}_y.npy")
    if os.path.exists(y_path):
        return x_path, y_path
    rng = random.Random(0)
    shape = MODELS[model][1]
    row = RowValues(model)
    distinct = min(rows, 1024)
    block = array.array("f", (rng.random() for _ in range(row * distinct)))
    x = array.array("f")
    while len(x) < row * rows:
        x.extend(block[:row * rows - len(x)])
    y = array.array("q", (rng.randrange(CLASSES) for _ in range(rows)))
    WriteNpy(x_path, "<f4", (rows,) + shape, x)
    WriteNpy(y_path, "<i8", (rows,), y)
    return x_path, y_path


def DataRows(model, batch):
    """The rows of synthetic data each system trains on: Cohort's .npy file, the PyTorch
    peers' batches in memory (the same bytes, so that peak memory compares like with
    like). Small enough to keep its pages out of the picture; 16 steps at least."""
    rows = COHORT_DATA_BYTES // (4 * RowValues(model))
    return max(16 * batch, rows // batch * batch)


def CohortShape(model, batch, expected_speed, seconds):
    """(rows, epochs): DataRows, and enough epochs after the warm-up one for about
    `seconds` of training."""
    rows = DataRows(model, batch)
    measured = max(1, round(expected_speed * seconds / rows))
    return rows, min(COHORT_MAX_EPOCHS, 1 + measured)


def RunCohort(args, model, batch, ranks, threads, expected_speed, flags=()):
    rows, epochs = CohortShape(model, batch, expected_speed, args.seconds)
    x_path, y_path = WriteSyntheticData(args.work_dir, model, rows)
    name = f"bench-{model}-{ranks}"
    job_dir = tempfile.mkdtemp(prefix=name + "-", dir=args.work_dir)  # fresh each attempt
    rendezvous = os.path.join(job_dir, "rendezvous")
    out = os.path.join(job_dir, "out")
    os.makedirs(rendezvous)
    os.makedirs(out)
    job = os.path.join(job_dir, "job.yaml")
    with open(job, "w") as f:
        f.write(JobYaml(name, os.path.join(REPO_DIR, "examples", MODELS[model][0]),
                        x_path, y_path, epochs, batch, ranks, args.precision))
    commands = [[args.cohort_worker, "train", job, "--rank", str(r), "--world", str(ranks),
                 "--rendezvous", "file://" + rendezvous, "--out", out,
                 "--threads", str(threads)] + list(flags)
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
    run.Wait(20 * args.seconds + 120)
    shutil.rmtree(job_dir, ignore_errors=True)
    result = {"other_load": run.other_load}
    failure = run.Failure()
    if failure is None and len(reported) < 2:
        failure = f"{len(reported)} epoch lines on stdout (expected {epochs})"
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
    result["max_rss_kb"] = max(u.ru_maxrss for u in run.usage)
    return result


# --- the plan -----------------------------------------------------------------------

def Measure(args, run_once):
    """run_once() after waiting for a quiet machine, again (up to --retries times) while
    other processes took more than NOISY_LOAD of it; the least disturbed result."""
    best = None
    for attempt in range(1 + args.retries):
        if attempt:
            print(f"    noisy ({best['other_load']:.0%} other load): again", file=sys.stderr)
        WaitForQuiet(args.max_wait)
        result = run_once()
        if best is None or result["other_load"] < best["other_load"]:
            best = result
        if "failure" in result or result["other_load"] <= NOISY_LOAD:
            return result
    return best


def Systems(args, ranks, threads):
    """(system, label, allocator) of one setting, in run order before rotation."""
    systems = [("floor", "kernel floor", "-")]
    peer = "eager" if ranks == 1 else "ddp"
    for allocator in args.allocators:
        systems.append((peer, f"PyTorch {'eager' if ranks == 1 else 'DDP'} {allocator}",
                        allocator))
    if ranks == 1:
        for backend in args.keras_backends:
            systems.append(("keras_" + backend, f"Keras {backend}", "-"))
    systems.append(("cohort", "Cohort", "as built"))
    if ranks > 1:  # the ranks share one model (shared_replica.h); this is the other way
        systems.append(("cohort_replicas", "Cohort, a replica per rank", "as built"))
    return systems


def RunOne(args, system, allocator, model, batch, ranks, threads, group):
    common = ["--model", model, "--batch", str(batch), "--seconds", str(args.seconds),
              "--threads", str(threads)]
    data = ["--data-rows", str(DataRows(model, batch)), "--precision", args.precision]
    timeout_s = 10 * args.seconds + 180
    if system == "floor":
        return RunFloor(args, model, batch, ranks, threads)
    tuned = ["--tuned"] if Tuned(allocator) else []
    if system == "eager":
        return RunPeer([args.python, os.path.join(BENCH_DIR, "peer_torch_eager.py")] + common +
                       data + tuned, PeerEnvironment(allocator, threads, model), timeout_s)
    if system == "ddp":
        return RunPeer([args.python, os.path.join(BENCH_DIR, "peer_torch_ddp.py")] + common +
                       data + ["--ranks", str(ranks)] + tuned,
                       PeerEnvironment(allocator, threads, model), timeout_s)
    if system.startswith("keras_"):
        return RunPeer([args.keras_python, os.path.join(BENCH_DIR, "peer_keras.py"),
                        "--backend", system[len("keras_"):], "--precision", args.precision] +
                       common,
                       PeerEnvironment("glibc", threads), timeout_s)
    # Cohort's epochs are sized from the fastest system so far, the floor included. Sized
    # from a slower peer (DDP, when Cohort ran first in its setting), a 2-rank mlp 128 run
    # measured 0.6 s of CPU per rank instead of 3, and the fixed cost at its end (writing
    # the model, exiting) read as sys/user 0.10, against 0.04 in the run sized right.
    speeds = [r["samples_per_second"] for r in group if "samples_per_second" in r]
    expected = max(speeds or [10000.0])
    flags = ["--replica-per-rank"] if system == "cohort_replicas" else []
    return RunCohort(args, model, batch, ranks, threads, expected, flags)


def Settings(args):
    """(ranks, threads) of each setting."""
    settings = [(1, args.threads)]
    if args.threads != 1:
        settings.append((1, 1))
    settings.append((args.ranks, 1))
    return settings


def SettingCpus(ranks, threads):
    """The CPUs a setting runs on: as many as it has threads in all, the first of those
    this process may use. Every system of the setting is confined to them (the children
    inherit the affinity), so that "1 x 1" means one core for all: left free, Keras on
    JAX used 1.8 cores with its intra-op pool at one thread (a data thread beside it)."""
    cpus = sorted(os.sched_getaffinity(0))
    return set(cpus[:max(1, min(len(cpus), ranks * threads))])


def RunTraining(args):
    results = []
    turn = 0
    every_cpu = os.sched_getaffinity(0)
    for model in args.models:
        for batch in args.batches:
            for ranks, threads in Settings(args):
                os.sched_setaffinity(0, SettingCpus(ranks, threads))
                systems = Systems(args, ranks, threads)
                # The floor runs first (Cohort's data size is chosen from it) and again
                # last, so that the machine drifting during the setting shows. The rest
                # run in --rounds rounds, the first in an order that rotates from setting
                # to setting, each next one in the reverse of the one before, so that no
                # system always runs right after another; each system's figure is its
                # fastest run (the neighbours on this VM only ever slow a run down).
                floor, rest = systems[0], systems[1:]
                turn += 1
                rounds = [rest[turn % len(rest):] + rest[:turn % len(rest)]]
                while len(rounds) < args.rounds:
                    rounds.append(rounds[-1][::-1])
                order = [floor] + [s for r in rounds for s in r] + [floor]
                group = []
                ran = set()
                for system, label, allocator in order:
                    if (system, allocator) in ran:
                        label += ", again"
                    ran.add((system, allocator))
                    print(f"{model} batch {batch} {ranks}x{threads}: {label}", file=sys.stderr)
                    result = Measure(args, lambda: RunOne(args, system, allocator, model, batch,
                                                          ranks, threads, group))
                    result.update({"system": system, "label": label, "allocator": allocator,
                                   "model": model, "batch": batch, "ranks": ranks,
                                   "threads": threads})
                    sps = result.get("samples_per_second")
                    print(f"    {sps:,.0f} samples/s, other load {result['other_load']:.0%}"
                          if sps else f"    failed: {result['failure']}", file=sys.stderr)
                    group.append(result)
                results += group
                os.sched_setaffinity(0, every_cpu)
    return results


def RunAllReduce(args):
    """Cohort's and c10d's all-reduce rows and the loopback TCP figures (bytes -> GB/s,
    the better of the two Cohort runs' measurements), interleaved."""
    rows = {"cohort": [], "cohort_tcp": [], "c10d": [], "tcp": {}, "other_load": {}}
    if not args.all_reduce:
        return None
    bench = [args.collective_bench, "--json", "--max-bytes", str(args.max_bytes)]
    for name, command, env in (
            # Shared memory: what ranks on one machine (these) use.
            ("cohort", bench, dict(os.environ)),
            # Loopback TCP: what ranks on several machines use.
            ("cohort_tcp", bench + ["--tcp"], dict(os.environ)),
            ("c10d", [args.python, os.path.join(BENCH_DIR, "peer_c10d_allreduce.py"),
                      "--max-bytes", str(args.max_bytes)], PeerEnvironment("glibc", 1))):
        print(f"all-reduce: {name}", file=sys.stderr)

        def Once():
            run = Run([command], [env])
            run.Wait(900)
            failure = run.Failure()
            return {"failure": failure, "other_load": run.other_load, "lines": run.lines[0]}

        result = Measure(args, Once)
        rows["other_load"][name] = result["other_load"]
        if result["failure"]:
            rows[name] = result["failure"]
            continue
        for line in result["lines"]:
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if value.get("what") == "loopback_tcp":
                rows["tcp"][value["bytes"]] = max(rows["tcp"].get(value["bytes"], 0), value["gbps"])
            elif value.get("what") == "all_reduce":
                rows[name].append(value)
    return rows


def KerasBackends(python):
    """The Keras backends `python` can run (keras plus torch / jax importable)."""
    if not python:
        return [], "Keras peers not run: no --keras-python (bench/setup-peers makes one)"
    if not os.access(python, os.X_OK):
        return [], f"Keras peers not run: {python} is not there (run bench/setup-peers)"
    backends, missing = [], []
    for backend in ("torch", "jax"):
        probe = subprocess.run([python, "-c", f"import keras, {backend}"], capture_output=True,
                               env=dict(os.environ, KERAS_BACKEND=backend), timeout=300)
        (backends if probe.returncode == 0 else missing).append(backend)
    note = None
    if missing:
        note = (f"Keras on {', '.join(missing)} not run: {python} cannot import it "
                "(bench/setup-peers installs both)")
    return backends, note


def RerunArguments(argv):
    rest, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--out":
            skip = True
        elif not arg.startswith("--out="):
            rest.append(arg)
    return rest


def WriteOut(path, report):
    begin, end = "<!-- bench/run begin -->", "<!-- bench/run end -->"
    text = report
    if os.path.exists(path):
        with open(path) as f:
            old = f.read()
        if begin in old and end in old:
            text = old[:old.index(begin) + len(begin)] + "\n" + report + "\n" + \
                old[old.index(end):]
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def Stop(signum, frame):
    raise SystemExit(128 + signum)  # unwinds through Run.Wait, which kills the runs


def Split(text, cast=str):
    return [cast(v) for v in text.split(",") if v]


def main(argv):
    signal.signal(signal.SIGTERM, Stop)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build-dir", default=os.path.join(REPO_DIR, "build"),
                        help="where cohort-worker, kernel_floor and cohort_collective_bench "
                             "were built")
    parser.add_argument("--out", help="write the markdown report here too")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--batches", default="128,1024")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--threads", type=int, default=os.cpu_count(),
                        help="intra-op threads of the '1 rank, every core' setting")
    parser.add_argument("--seconds", type=float, default=5.0,
                        help="measured seconds per run")
    parser.add_argument("--rounds", type=int, default=2,
                        help="runs of each system per setting; its figure is the fastest")
    parser.add_argument("--allocators", default=",".join(ALLOCATORS),
                        help="the PyTorch peers' allocators; empty: no PyTorch peers")
    parser.add_argument("--keras-python", default=os.path.join(REPO_DIR, ".venv-peers",
                                                               "bin", "python"),
                        help="a Python with keras, torch and jax (bench/setup-peers)")
    parser.add_argument("--no-all-reduce", dest="all_reduce", action="store_false",
                        help="skip the all-reduce table")
    parser.add_argument("--max-bytes", type=int, default=64 << 20,
                        help="largest all-reduce message")
    parser.add_argument("--max-wait", type=float, default=30.0,
                        help="seconds to wait for a quiet machine before each run")
    parser.add_argument("--retries", type=int, default=1,
                        help=f"runs again while other load exceeds {NOISY_LOAD:.0%}%")
    parser.add_argument("--nice", type=int, default=0,
                        help="change the benchmark's priority by this much (-20: take "
                             "the CPU from builds on a shared machine; needs root)")
    parser.add_argument("--precision", choices=PRECISIONS, default="float32",
                        help="Cohort's fit.precision, the PyTorch peers' (bfloat16 "
                             "autocast) and Keras' dtype policy; the kernel floor stays "
                             "float32")
    parser.add_argument("--python", default="/usr/bin/python3",
                        help="the Python whose torch the PyTorch peers use")
    args = parser.parse_args(argv)
    args.build_dir = os.path.abspath(args.build_dir)
    args.cohort_worker = os.path.join(args.build_dir, "worker", "cohort-worker")
    args.kernel_floor = os.path.join(args.build_dir, "bench", "kernel_floor")
    args.collective_bench = os.path.join(args.build_dir, "worker", "trainer", "collective",
                                         "cohort_collective_bench")
    args.out = os.path.abspath(args.out) if args.out else None
    args.models = Split(args.models)
    args.batches = Split(args.batches, int)
    args.allocators = Split(args.allocators)
    for names, known, what in ((args.models, MODELS, "model"),
                               (args.allocators, ALLOCATORS, "allocator")):
        unknown = [n for n in names if n not in known]
        if unknown:
            parser.error(f"unknown {what} {unknown[0]!r}; known: {', '.join(known)}")
    if args.rounds < 1:
        parser.error(f"--rounds: {args.rounds} is not a positive count")
    for batch in args.batches:
        if batch <= 0 or batch % args.ranks != 0:
            parser.error(f"--batches: {batch} is not a positive multiple of --ranks "
                         f"{args.ranks}")
    for path in (args.cohort_worker, args.kernel_floor, args.collective_bench):
        if not os.access(path, os.X_OK):
            parser.error(f"{path} is not an executable: build it (cmake --build "
                         f"{os.path.relpath(args.build_dir)} --target cohort-worker "
                         "kernel_floor cohort_collective_bench) or pass --build-dir")
    if "jemalloc" in args.allocators and not os.path.exists(JEMALLOC):
        print(f"skipping jemalloc: {JEMALLOC} is not installed", file=sys.stderr)
        args.allocators.remove("jemalloc")
    if args.nice:
        try:
            os.nice(args.nice)
        except PermissionError:
            parser.error(f"--nice {args.nice}: not permitted (a negative value needs root)")
        measure.SESSION_NICE = args.nice
    args.keras_backends, keras_note = KerasBackends(args.keras_python)
    args.command = "bench/run " + shlex.join(RerunArguments(argv))

    if "OPENBLAS_CORETYPE" not in os.environ:
        core = OpenBlasCoreType()
        if core:
            os.environ["OPENBLAS_CORETYPE"] = core
    machine = Machine(args.python, JEMALLOC)
    args.work_dir = tempfile.mkdtemp(prefix="cohort-bench-")
    try:
        training = RunTraining(args)
        all_reduce = RunAllReduce(args)
    finally:
        shutil.rmtree(args.work_dir, ignore_errors=True)
    report = Report(args, machine, training, all_reduce, [n for n in (keras_note,) if n])
    print(report)
    if args.out:
        WriteOut(args.out, report)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
