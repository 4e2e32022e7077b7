#!/usr/bin/python3
"""PyTorch's c10d ProcessGroupGloo all-reduce on loopback: the peer of Cohort's Gloo
collective (worker/trainer/collective/collective_bench.cc measures Cohort's side).

Starts --ranks processes of itself (MASTER_ADDR=127.0.0.1, a free port,
GLOO_SOCKET_IFNAME=lo), each with one thread, and all-reduces (sum) float32 tensors of
4 KiB, 16 KiB, ... up to --max-bytes, the same iteration counts as collective_bench
(about 1 GiB moved per size, 5 to 1000 iterations, after one warm-up and a barrier).
Rank 0 prints one JSON line per size, in collective_bench's --json format:

  {"what": "all_reduce", "bytes": 4096, "algorithm": "c10d gloo", "mean_us": 80.0,
   "median_us": 75.0, "algbw_gbps": 0.05, "busbw_gbps": 0.05, "iterations": 1000}

busbw = bytes / mean time * 2(n-1)/n. Run with Debian's /usr/bin/python3 (python3-torch).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from peer_torch_ddp import FreePort

RANK_TIMEOUT_S = 600


def RunRank(args):
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    bus_factor = 2.0 * (world - 1) / world
    size = 4 << 10
    while size <= args.max_bytes:
        tensor = torch.ones(size // 4)
        iterations = max(5, min(1000, (1 << 30) // size))
        dist.all_reduce(tensor)
        dist.barrier()
        times = []
        start = time.perf_counter()
        for _ in range(iterations):
            one = time.perf_counter()
            dist.all_reduce(tensor)
            times.append(time.perf_counter() - one)
        mean = (time.perf_counter() - start) / iterations
        if rank == 0:
            algbw = size / mean / 1e9
            print(json.dumps({
                "what": "all_reduce", "bytes": size, "algorithm": "c10d gloo",
                "mean_us": mean * 1e6, "median_us": statistics.median(times) * 1e6,
                "algbw_gbps": algbw, "busbw_gbps": algbw * bus_factor,
                "iterations": iterations}), flush=True)
        size *= 4
    dist.destroy_process_group()


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--max-bytes", type=int, default=64 << 20)
    parser.add_argument("--as-rank", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.as_rank:
        RunRank(args)
        return 0
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(FreePort()),
               WORLD_SIZE=str(args.ranks), OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo")
    ranks = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--as-rank"] + argv,
                              env=dict(env, RANK=str(r)),
                              stdout=None if r == 0 else subprocess.DEVNULL)
             for r in range(args.ranks)]
    failed = []
    for r, process in enumerate(ranks):
        try:
            process.wait(timeout=RANK_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.returncode != 0:
            failed.append(f"rank {r} exited with {process.returncode}")
            for other in ranks:  # a rank that died leaves the others blocked in Gloo
                if other.poll() is None:
                    other.kill()
    if failed:
        print("peer_c10d_allreduce: " + "; ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
