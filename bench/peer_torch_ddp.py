#!/usr/bin/python3
"""PyTorch DDP over Gloo: the multi-process peer of Cohort's CPU trainer.

Starts --ranks processes of itself on this machine (MASTER_ADDR=127.0.0.1, a free
MASTER_PORT, RANK, WORLD_SIZE: torchrun is broken with Debian's python3-torch on Python
3.11), each with --threads intra-op threads, each training the same model as
peer_torch_eager.py wrapped in DistributedDataParallel (Gloo, default 25 MiB buckets)
on its share of the global --batch. Prints ONE JSON line:

  {"peer": "torch_ddp", "model": "mlp", "batch": 128, "ranks": 2, "threads": 1,
   "steps": 300, "seconds": 10.2, "samples_per_second": 3760.0, "user_s": 11.0,
   "sys_s": 9.1, "minor_faults": 123456, "max_rss_kb": 300000, "final_loss": 2.30,
   "torch": "1.13.0a0", "allocator": "glibc"}

samples_per_second is global: batch * steps / the slowest rank's window. user_s, sys_s
and minor_faults are summed over the ranks' windows (resource.getrusage in each rank,
warm-up excluded; the window starts and ends at a barrier); max_rss_kb is the largest
rank's peak resident memory. The ranks inherit the
environment, so LD_PRELOAD or MALLOC_*_ set by the caller apply to every rank.
"""
import argparse
import json
import os
import socket
import subprocess
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from peer_torch_eager import (AddCommonArguments, Allocator, BuildModel, DataRows,
                              IntraOpThreads, StepsFor, SyntheticBatches, Train, WarmUp,
                              Window)

RANK_TIMEOUT_S = 600


def FreePort():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def RunRank(args):
    """One rank, started by Launch with the torch.distributed env:// variables set."""
    torch.set_num_threads(IntraOpThreads(args))
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(args.seed)  # DDP broadcasts rank 0's parameters anyway
    model = DistributedDataParallel(BuildModel(args.model))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    batches = SyntheticBatches(args.model, args.batch // world, args.seed + rank,
                               DataRows(args) // world)

    warm = WarmUp(model, optimizer, batches, args, sync=dist.barrier)
    steps = args.steps
    if steps is None:  # every rank must run the same count: rank 0's choice
        choice = torch.tensor([StepsFor(args.seconds, *warm)])
        dist.broadcast(choice, 0)
        steps = int(choice.item())

    window = Window()
    window.Start()
    loss = Train(model, optimizer, batches, steps, first_step=args.warmup,
                 precision=args.precision)
    dist.barrier()
    result = window.Stop()
    result.update({"rank": rank, "steps": steps, "final_loss": float(loss)})
    print(json.dumps(result), flush=True)
    dist.destroy_process_group()


def Launch(args, argv):
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(FreePort()),
               WORLD_SIZE=str(args.ranks), OMP_NUM_THREADS=str(args.threads),
               GLOO_SOCKET_IFNAME="lo")
    ranks = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--as-rank"] + argv,
                              env=dict(env, RANK=str(r), LOCAL_RANK=str(r)),
                              stdout=subprocess.PIPE, text=True)
             for r in range(args.ranks)]
    results, failed = [], []
    for r, process in enumerate(ranks):
        try:
            out, _ = process.communicate(timeout=RANK_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            out, _ = process.communicate()
        if process.returncode != 0:
            failed.append(f"rank {r} exited with {process.returncode}")
            for other in ranks:  # a rank that died leaves the others blocked in Gloo
                if other.poll() is None:
                    other.kill()
            continue
        results.append(json.loads(out.strip().splitlines()[-1]))
    if failed:
        print("peer_torch_ddp: " + "; ".join(failed), file=sys.stderr)
        return 1

    seconds = max(r["seconds"] for r in results)
    steps = results[0]["steps"]
    print(json.dumps({
        "peer": "torch_ddp", "model": args.model, "batch": args.batch,
        "ranks": args.ranks, "threads": args.threads, "steps": steps,
        "seconds": seconds, "samples_per_second": steps * args.batch / seconds,
        "user_s": sum(r["user_s"] for r in results),
        "sys_s": sum(r["sys_s"] for r in results),
        "minor_faults": sum(r["minor_faults"] for r in results),
        "max_rss_kb": max(r["max_rss_kb"] for r in results),
        "final_loss": results[0]["final_loss"], "torch": torch.__version__,
        "allocator": Allocator(),
    }), flush=True)
    return 0


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    AddCommonArguments(parser)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads per rank")
    parser.add_argument("--as-rank", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.batch % args.ranks != 0:
        parser.error(f"--batch {args.batch} is not divisible by --ranks {args.ranks}")
    if args.as_rank:
        RunRank(args)
        return 0
    return Launch(args, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
