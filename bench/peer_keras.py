#!/usr/bin/env python3
"""Keras 3 model.fit throughput: the peer Cohort replaces, on the torch or JAX backend.

Loads the same .keras file Cohort trains (examples/mnist_{mlp,cnn,residual}.keras, Adam
lr 1e-3, sparse categorical cross-entropy, accuracy), fits it on synthetic data of
MNIST's shape in memory, and prints ONE JSON line in the format of
peer_torch_eager.py:

  {"peer": "keras_jax", "model": "mlp", "batch": 128, "threads": 2, "steps": 900,
   "seconds": 10.1, "samples_per_second": 11400.0, "user_s": 9.9, "sys_s": 0.2,
   "max_rss_kb": 500000, "keras": "3.15.1", "backend": "jax"}

Only the measured window counts: one untimed fit of --warmup steps first (it traces
and compiles), then one fit of the step count that should take --seconds; the window
is that fit (getrusage over it), fitted again with a step count sized from it while it
ends short of 70% of --seconds (up to 3 times). --threads 1 limits the backend to one
intra-op thread (torch.set_num_threads; XLA's Eigen pool off for JAX).
--precision mixed_bfloat16 rebuilds the loaded model under Keras' policy of that name
(the file stores float32 per layer, which load_model keeps), with the same weights and
compile settings.

Needs a Python with keras and the backend: the virtualenv bench/setup-peers makes.
"""
import argparse
import json
import os
import resource
import sys
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(os.path.dirname(BENCH_DIR), "examples")
SHAPES = {"mlp": (784,), "cnn": (28, 28, 1), "residual": (784,)}
FILES = {"mlp": "mnist_mlp.keras", "cnn": "mnist_cnn.keras", "residual": "mnist_residual.keras"}


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=("torch", "jax"), required=True)
    parser.add_argument("--model", choices=tuple(SHAPES), required=True)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--precision", choices=("float32", "mixed_bfloat16"), default="float32")
    args = parser.parse_args(argv)

    os.environ["KERAS_BACKEND"] = args.backend
    if args.backend == "jax":
        os.environ["JAX_PLATFORMS"] = "cpu"
        if args.threads == 1:
            os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                                       " --xla_cpu_multi_thread_eigen=false"
                                       " intra_op_parallelism_threads=1")
    import numpy as np
    import keras
    if args.backend == "torch":
        import torch
        torch.set_num_threads(args.threads)

    model = keras.saving.load_model(os.path.join(EXAMPLES, FILES[args.model]))
    if args.precision != "float32":
        loaded = model
        model = keras.models.clone_model(
            loaded, clone_function=lambda layer: layer.__class__.from_config(
                {**layer.get_config(), "dtype": args.precision}))
        model.set_weights(loaded.get_weights())
        model.compile_from_config(loaded.get_compile_config())
    rng = np.random.default_rng(0)

    def Data(steps):
        rows = steps * args.batch
        distinct = min(rows, 1024)
        x = rng.random((distinct,) + SHAPES[args.model], dtype=np.float32)
        x = np.resize(x, (rows,) + SHAPES[args.model])
        return x, rng.integers(0, 10, rows)

    x, y = Data(args.warmup)
    start = time.perf_counter()
    model.fit(x, y, batch_size=args.batch, epochs=1, shuffle=False, verbose=0)
    warmup_s = time.perf_counter() - start
    # the first fit includes tracing: a second short one times a step
    start = time.perf_counter()
    model.fit(x, y, batch_size=args.batch, epochs=1, shuffle=False, verbose=0)
    per_step = (time.perf_counter() - start) / args.warmup
    # Steps of the first fits can cost more than later ones (torch.compile traces again),
    # so a window that ends far short of --seconds is sized again from itself and rerun.
    for _ in range(3):
        steps = max(10, int(args.seconds / max(per_step, 1e-9)))
        x, y = Data(steps)
        usage0 = resource.getrusage(resource.RUSAGE_SELF)
        start = time.perf_counter()
        model.fit(x, y, batch_size=args.batch, epochs=1, shuffle=False, verbose=0)
        seconds = time.perf_counter() - start
        usage = resource.getrusage(resource.RUSAGE_SELF)
        if seconds >= 0.7 * args.seconds:
            break
        per_step = seconds / steps
    print(json.dumps({
        "peer": "keras_" + args.backend, "model": args.model, "batch": args.batch,
        "threads": args.threads, "steps": steps, "seconds": seconds,
        "samples_per_second": steps * args.batch / seconds,
        "user_s": usage.ru_utime - usage0.ru_utime, "sys_s": usage.ru_stime - usage0.ru_stime,
        "max_rss_kb": usage.ru_maxrss, "warmup_s": warmup_s, "keras": keras.__version__,
        "backend": args.backend,
        "precision": model.layers[-1].dtype_policy.name}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
