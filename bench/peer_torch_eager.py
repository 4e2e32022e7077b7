#!/usr/bin/python3
"""PyTorch eager training throughput: the one-process peer of Cohort's CPU trainer.

Trains the models of examples/mnist_mlp.keras, mnist_cnn.keras and mnist_residual.keras,
built in plain PyTorch with the same shapes, on synthetic data of MNIST's shape that is in
memory before timing starts, with Adam (lr 1e-3) and softmax cross-entropy, and prints
ONE JSON line:

  {"peer": "torch_eager", "model": "mlp", "batch": 128, "threads": 2, "steps": 900,
   "seconds": 10.1, "samples_per_second": 11400.0, "user_s": 9.9, "sys_s": 10.2,
   "minor_faults": 1234567, "max_rss_kb": 312000, "final_loss": 2.30,
   "torch": "1.13.0a0", "allocator": "glibc"}

Only the measured window counts: warm-up steps are excluded, and user_s, sys_s and
minor_faults are resource.getrusage(RUSAGE_SELF) differences over that window (every
thread of the process); max_rss_kb is the process's peak resident memory. `allocator` reports what the environment selected (LD_PRELOAD
of jemalloc, MALLOC_*_ tunables raised, or plain glibc); this script changes nothing.

Run it with Debian's /usr/bin/python3 (python3-torch 1.13, the LibTorch Cohort links).
--steps fixes the number of measured steps; --seconds instead times the warm-up and
picks the step count that should take that long.
"""
import argparse
import json
import os
import resource
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn

IMAGE_SHAPE = (1, 28, 28)  # NCHW: the memory layout does not matter for a speed peer
CLASSES = 10


class ResidualBlock(nn.Module):
    """relu(x + Dense(Dense(x, relu))): one block of examples' mnist_residual."""

    def __init__(self, width):
        super().__init__()
        self.inner = nn.Linear(width, width)
        self.outer = nn.Linear(width, width)

    def forward(self, x):
        return F.relu(x + self.outer(F.relu(self.inner(x))))


MODELS = ("mlp", "cnn", "residual")
PRECISIONS = ("float32", "mixed_bfloat16")  # Cohort's fit.precision values


def BuildModel(name):
    """The mnist_mlp / mnist_cnn / mnist_residual architectures of
    examples/make_models.py."""
    if name == "mlp":
        return nn.Sequential(
            nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
            nn.Linear(128, CLASSES))
    if name == "cnn":
        return nn.Sequential(
            nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(5 * 5 * 64, CLASSES))
    if name == "residual":
        return nn.Sequential(
            nn.Linear(784, 256), nn.ReLU(), ResidualBlock(256), ResidualBlock(256),
            nn.Linear(256, CLASSES))
    raise ValueError(f"unknown model {name!r}")


def SyntheticBatches(model_name, batch, seed, rows):
    """Distinct batches holding `rows` rows in all (at least one batch), cycled."""
    generator = torch.Generator().manual_seed(seed)
    shape = (batch, *IMAGE_SHAPE) if model_name == "cnn" else (batch, 784)
    return [(torch.rand(shape, generator=generator),
             torch.randint(0, CLASSES, (batch,), generator=generator))
            for _ in range(max(1, rows // batch))]


def Train(model, optimizer, batches, steps, first_step=0, precision="float32"):
    """`steps` optimizer steps; returns the last loss (a tensor, to avoid a sync).
    mixed_bfloat16: the forward pass under torch.autocast in bfloat16, the loss in
    float32, as Cohort's fit.precision of that name."""
    loss = None
    for step in range(first_step, first_step + steps):
        x, y = batches[step % len(batches)]
        optimizer.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16,
                            enabled=precision == "mixed_bfloat16"):
            logits = model(x)
        loss = F.cross_entropy(logits.float(), y)
        loss.backward()
        optimizer.step()
    return loss


def Allocator():
    preload = os.environ.get("LD_PRELOAD", "")
    if "jemalloc" in preload:
        return "jemalloc"
    if "tcmalloc" in preload:
        return "tcmalloc"
    if any(k.startswith("MALLOC_") and k.endswith("_") for k in os.environ) or \
            "glibc.malloc" in os.environ.get("GLIBC_TUNABLES", ""):
        return "glibc-tuned"
    return "glibc"


class Window:
    """Wall time and CPU usage of this process between Start() and Stop()."""

    def Start(self):
        self._usage = resource.getrusage(resource.RUSAGE_SELF)
        self._start = time.perf_counter()

    def Stop(self):
        seconds = time.perf_counter() - self._start
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return {
            "seconds": seconds,
            "user_s": usage.ru_utime - self._usage.ru_utime,
            "sys_s": usage.ru_stime - self._usage.ru_stime,
            "minor_faults": usage.ru_minflt - self._usage.ru_minflt,
            "max_rss_kb": usage.ru_maxrss,
        }


def WarmUp(model, optimizer, batches, args, sync=lambda: None):
    """args.warmup untimed steps; returns (seconds, steps) of their second half, from
    which StepsFor sizes the measured run: the first steps are slow (allocations,
    oneDNN's kernels), and sized from them the run measured a fraction of --seconds.
    `sync` ends the timed half (DDP: a barrier)."""
    half = args.warmup // 2
    Train(model, optimizer, batches, half, precision=args.precision)
    start = time.perf_counter()
    Train(model, optimizer, batches, args.warmup - half, first_step=half,
          precision=args.precision)
    sync()
    return time.perf_counter() - start, args.warmup - half


def StepsFor(seconds, warmup_seconds, warmup_steps):
    return max(10, int(seconds * warmup_steps / max(warmup_seconds, 1e-9)))


def DataRows(args):
    return args.data_rows or 8 * args.batch


def AddCommonArguments(parser):
    parser.add_argument("--model", choices=MODELS, required=True)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--warmup", type=int, default=20, help="untimed steps first")
    length = parser.add_mutually_exclusive_group(required=True)
    length.add_argument("--steps", type=int, help="measured steps")
    length.add_argument("--seconds", type=float,
                        help="measure about this long (steps chosen from the warm-up)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data-rows", type=int,
                        help="rows of synthetic data held in memory (all ranks together), "
                             "cycled in batches; default 8 batches. bench/run passes the "
                             "rows of Cohort's data file, so peak memory compares the same "
                             "data")
    parser.add_argument("--precision", choices=PRECISIONS, default="float32",
                        help="mixed_bfloat16: the forward pass under bfloat16 autocast")
    parser.add_argument("--tuned", action="store_true",
                        help="flush denormals to zero and compute on one thread pool, as "
                             "Cohort does (see IntraOpThreads)")


def IntraOpThreads(args):
    """LibTorch's intra-op threads. Tuned, as Cohort's ranks (worker/trainer/cpu_threads.h):
    the threads go to one pool, since both busy-wait and fight for the cores: OpenBLAS's
    (bench/run sets OPENBLAS_NUM_THREADS) for the Dense models, the intra-op pool for the
    cnn; and denormals are flushed to zero (torch.set_flush_denormal, before the pools
    start)."""
    if not args.tuned:
        return args.threads
    torch.set_flush_denormal(True)
    return args.threads if args.model == "cnn" else 1


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    AddCommonArguments(parser)
    parser.add_argument("--threads", type=int, default=os.cpu_count(),
                        help="intra-op threads (default: every core)")
    args = parser.parse_args(argv)

    torch.set_num_threads(IntraOpThreads(args))
    torch.manual_seed(args.seed)
    model = BuildModel(args.model)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    batches = SyntheticBatches(args.model, args.batch, args.seed, DataRows(args))

    warm = WarmUp(model, optimizer, batches, args)
    steps = args.steps or StepsFor(args.seconds, *warm)

    window = Window()
    window.Start()
    loss = Train(model, optimizer, batches, steps, first_step=args.warmup,
                 precision=args.precision)
    result = window.Stop()

    result.update({
        "peer": "torch_eager", "model": args.model, "batch": args.batch,
        "threads": args.threads, "steps": steps, "precision": args.precision,
        "samples_per_second": steps * args.batch / result["seconds"],
        "final_loss": float(loss), "torch": torch.__version__, "allocator": Allocator(),
    })
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
