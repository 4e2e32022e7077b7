"""The markdown report of bench/run: machine facts, result tables, targets, all-reduce.

A training result is a dict: system ("floor", "eager", "ddp", "keras_torch",
"keras_jax", "cohort", "cohort_replicas": Cohort's ranks with a replica of the model
each), label, allocator, model, batch, ranks, threads, other_load,
and either failure (a one-line reason) or samples_per_second, samples, user_s, sys_s
(the measured window) and max_rss_kb (the largest process's peak resident memory).
"""
import os
import platform
import subprocess
import time

from measure import CpuModel

# issue 7's targets on the CPU
MIN_FLOOR_SHARE = 0.85
MIN_EAGER_RATIO = {"mlp": 1.3, "cnn": 1.2}
MAX_SYS_SHARE = 0.10
MIN_DDP_RATIO = 3.0
MIN_SCALING = 0.85
MIN_KERAS_RATIO = {"keras_torch": 4.0, "keras_jax": 1.5}
MIN_TCP_SHARE = 0.90
MIN_C10D_RATIO = 2.0
MAX_SMALL_MEDIAN_US = 100.0


def Fmt(value, digits=0):
    return "-" if value is None else f"{value:,.{digits}f}"


def Setting(r):
    return f"{r['ranks']} x {r['threads']}"


def Speed(r):
    return r.get("samples_per_second")


TRAINING_HEAD = (
    "| batch | ranks x threads | system | samples/s | % of floor | Cohort ÷ this | "
    "user s | sys s | sys/user | peak RSS MiB | other load |\n"
    "|--:|---|---|--:|--:|--:|--:|--:|--:|--:|--:|")


def TrainingRow(r, floor, cohort):
    head = f"| {r['batch']} | {Setting(r)} | {r['label']} | "
    if "failure" in r:
        return head + f"failed: {r['failure']} | | | | | | | {r['other_load']:.0%} |"
    sps, user, system = Speed(r), r["user_s"], r["sys_s"]
    share = f"{sps / floor:.0%}" if floor and r["system"] != "floor" else "-"
    ratio = f"{cohort / sps:.2f}" if cohort and r["system"] != "cohort" else "-"
    return head + (f"{Fmt(sps)} | {share} | {ratio} | {Fmt(user, 2)} | {Fmt(system, 2)} | "
                   f"{system / user if user else 0:.2f} | {r['max_rss_kb'] / 1024:,.0f} | "
                   f"{r['other_load']:.0%} |")


def Find(results, **where):
    found = [r for r in results if all(r.get(k) == v for k, v in where.items())
             and "failure" not in r]
    return found


def Best(results, **where):
    found = Find(results, **where)
    return max(found, key=Speed) if found else None


def TrainingTables(args, results):
    parts = []
    for model in args.models:
        parts += [f"### {model}", "", TRAINING_HEAD]
        for r in [r for r in results if r["model"] == model]:
            same = dict(model=model, batch=r["batch"], ranks=r["ranks"], threads=r["threads"])
            floor = Best(results, system="floor", **same)
            cohort = Best(results, system="cohort", **same)
            parts.append(TrainingRow(r, floor and Speed(floor), cohort and Speed(cohort)))
        parts.append("")
    return parts


def Check(value, ok, text):
    """A target cell: the measured value and whether it meets the target."""
    if value is None:
        return "-"
    return f"{text} {'✓' if ok else '✗'}"


def Targets(args, results):
    """One row per target, one column per (model, batch); ✓ met, ✗ missed, - not run."""
    columns = [(m, b) for m in args.models for b in args.batches]
    many = args.ranks
    rows = []

    def Add(name, cell):
        rows.append(f"| {name} | " + " | ".join(cell(m, b) for m, b in columns) + " |")

    for threads in sorted({args.threads, 1}, reverse=True):
        def FloorShare(m, b, threads=threads):
            c = Best(results, system="cohort", model=m, batch=b, ranks=1, threads=threads)
            f = Best(results, system="floor", model=m, batch=b, ranks=1, threads=threads)
            if not c or not f:
                return "-"
            share = Speed(c) / Speed(f)
            return Check(share, share >= MIN_FLOOR_SHARE, f"{share:.0%}")
        if args.precision == "float32":  # the floor multiplies in float32
            Add(f"1 x {threads}: Cohort ≥ {MIN_FLOOR_SHARE:.0%} of the kernel floor",
                FloorShare)

        def EagerRatio(m, b, threads=threads):
            c = Best(results, system="cohort", model=m, batch=b, ranks=1, threads=threads)
            e = Best(results, system="eager", model=m, batch=b, ranks=1, threads=threads)
            if not c or not e:
                return "-"
            ratio = Speed(c) / Speed(e)
            target = MIN_EAGER_RATIO.get(m)
            if target is None:  # no target for this model: the ratio alone
                return f"{ratio:.2f}x"
            return Check(ratio, ratio >= target, f"{ratio:.2f}x")
        Add(f"1 x {threads}: Cohort ÷ the best PyTorch eager ≥ "
            f"{MIN_EAGER_RATIO['mlp']} (mlp), {MIN_EAGER_RATIO['cnn']} (cnn)", EagerRatio)

        for system, target in MIN_KERAS_RATIO.items():
            def KerasRatio(m, b, threads=threads, system=system, target=target):
                c = Best(results, system="cohort", model=m, batch=b, ranks=1, threads=threads)
                k = Best(results, system=system, model=m, batch=b, ranks=1, threads=threads)
                if not c or not k:
                    return "-"
                ratio = Speed(c) / Speed(k)
                return Check(ratio, ratio >= target, f"{ratio:.2f}x")
            Add(f"1 x {threads}: Cohort ÷ Keras {system[6:]} ≥ {target}", KerasRatio)

    def SysShare(m, b):
        cs = Find(results, system="cohort", model=m, batch=b)
        if not cs:
            return "-"
        worst = max(c["sys_s"] / c["user_s"] if c["user_s"] else 0 for c in cs)
        return Check(worst, worst < MAX_SYS_SHARE, f"{worst:.2f}")
    Add(f"Cohort's sys/user, worst setting < {MAX_SYS_SHARE}", SysShare)

    def DdpRatio(m, b):
        c = Best(results, system="cohort", model=m, batch=b, ranks=many)
        d = Best(results, system="ddp", model=m, batch=b, ranks=many)
        if not c or not d:
            return "-"
        ratio = Speed(c) / Speed(d)
        return Check(ratio, ratio >= MIN_DDP_RATIO, f"{ratio:.2f}x")
    Add(f"{many} x 1: Cohort ÷ the best PyTorch DDP ≥ {MIN_DDP_RATIO}", DdpRatio)

    def Scaling(m, b, system="cohort"):
        c = Best(results, system=system, model=m, batch=b, ranks=many)
        one = Best(results, system=system, model=m, batch=b, ranks=1, threads=1)
        if not c or not one:
            return "-"
        share = Speed(c) / (many * Speed(one))
        return Check(share, share >= MIN_SCALING, f"{share:.0%}")
    Add(f"Cohort's scaling efficiency ({many} x 1 ÷ {many} × 1 x 1) ≥ {MIN_SCALING:.0%}",
        Scaling)
    rows.append("| (the kernel floor's, for reference) | " + " | ".join(
        Scaling(m, b, "floor").replace(" ✓", "").replace(" ✗", "") for m, b in columns) + " |")

    def SharedModelGain(m, b):
        c = Best(results, system="cohort", model=m, batch=b, ranks=many)
        r = Best(results, system="cohort_replicas", model=m, batch=b, ranks=many)
        return f"{Speed(c) / Speed(r):.2f}x" if c and r else "-"
    Add(f"({many} x 1: Cohort sharing one model ÷ Cohort with a replica per rank)",
        SharedModelGain)

    def FloorDrift(m, b):
        """How far the machine moved within a setting: the floor runs first and last."""
        drifts = []
        for ranks, threads in {(r["ranks"], r["threads"]) for r in results}:
            runs = [Speed(f) for f in Find(results, system="floor", model=m, batch=b,
                                            ranks=ranks, threads=threads)]
            if len(runs) > 1:
                drifts.append(min(runs) / max(runs))
        return f"{min(drifts):.0%}" if drifts else "-"
    Add("(the kernel floor's slower run ÷ its faster, in the setting where they differ most)",
        FloorDrift)

    def Memory(m, b):
        worst = None
        for c in Find(results, system="cohort", model=m, batch=b, ranks=1):
            e = Find(results, system="eager", model=m, batch=b, threads=c["threads"])
            if e:
                ratio = c["max_rss_kb"] / min(x["max_rss_kb"] for x in e)
                worst = ratio if worst is None else max(worst, ratio)
        return Check(worst, worst is not None and worst <= 1.0,
                     f"{worst:.2f}" if worst is not None else "")
    Add("1 rank: Cohort's peak RSS ÷ PyTorch eager's (the smallest of its runs) ≤ 1", Memory)

    head = "| target | " + " | ".join(f"{m} {b}" for m, b in columns) + " |"
    rule = "|---|" + "--:|" * len(columns)
    return [head, rule] + rows


def AllReduceTables(all_reduce):
    if all_reduce is None:
        return ["Not run (--no-all-reduce).", ""]
    parts = []
    tcp = all_reduce["tcp"]
    load = all_reduce["other_load"]
    names = {"cohort": "Cohort, shared memory", "cohort_tcp": "Cohort, TCP", "c10d": "c10d"}
    parts.append("Loopback TCP, both directions at once, per direction, the best of 8 rounds "
                 "at each size (measured by cohort_collective_bench in the same run; it falls "
                 "as the buffers leave the caches): "
                 + (", ".join(f"{size >> 20} MiB **{Fmt(tcp[size], 3)} GB/s**" for size in sorted(tcp))
                    or "-")
                 + ". A 2-rank all-reduce's busbw is what each rank sends per second, so "
                 "loopback TCP at the same size bounds it. Cohort's rows: through shared "
                 "memory, as its ranks on one machine all-reduce, and over loopback TCP "
                 "(`--tcp`), as ranks on several machines do. Other load: "
                 + ", ".join(f"{names[n]} {load.get(n, 0):.0%}" for n in names) + ".")
    parts.append("")
    rows = {}
    for name in names:
        if isinstance(all_reduce.get(name), str):
            parts += [f"{names[name]} failed: {all_reduce[name]}", ""]
        rows[name] = {r["bytes"]: r for r in all_reduce.get(name) or [] if isinstance(r, dict)}
    theirs = rows["c10d"]
    parts += [
        "| bytes | c10d median µs | c10d busbw GB/s | Cohort TCP algorithm | Cohort TCP median µs | "
        "Cohort TCP busbw GB/s | Cohort shm median µs | Cohort shm busbw GB/s | "
        "TCP ÷ c10d | shm ÷ c10d | loopback TCP GB/s | TCP ÷ loopback | shm ÷ loopback |",
        "|--:|--:|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for size in sorted(set(rows["cohort"]) | set(rows["cohort_tcp"]) | set(theirs)):
        t, o, m = theirs.get(size), rows["cohort_tcp"].get(size), rows["cohort"].get(size)

        def Ratio(a, b):
            return f"{a['busbw_gbps'] / b['busbw_gbps']:.2f}" if a and b else "-"

        def Share(a):
            return f"{a['busbw_gbps'] / tcp[size]:.0%}" if a and size in tcp else "-"

        parts.append(
            f"| {size:,} | {Fmt(t and t['median_us'], 1)} | {Fmt(t and t['busbw_gbps'], 3)} | "
            f"{o['algorithm'] if o else '-'} | {Fmt(o and o['median_us'], 1)} | "
            f"{Fmt(o and o['busbw_gbps'], 3)} | {Fmt(m and m['median_us'], 1)} | "
            f"{Fmt(m and m['busbw_gbps'], 3)} | {Ratio(o, t)} | {Ratio(m, t)} | "
            f"{Fmt(tcp.get(size), 3)} | {Share(o)} | {Share(m)} |")
    parts.append("")
    for name in ("cohort", "cohort_tcp"):
        ours = rows[name]
        big = [size for size in ours if size >= 1 << 20]
        label = names[name]
        measured = [size for size in big if size in tcp]
        if measured:
            worst = min(ours[s]["busbw_gbps"] / tcp[s] for s in measured)
            # The stricter reading too: against loopback's best figure at any size.
            strict = min(ours[s]["busbw_gbps"] for s in measured) / max(tcp.values())
            parts.append(f"- {label}: busbw ≥ {MIN_TCP_SHARE:.0%} of loopback TCP at the same "
                         f"size for ≥ 1 MiB: worst {worst:.0%} "
                         f"{'✓' if worst >= MIN_TCP_SHARE else '✗'} (against loopback's best "
                         f"figure at any size: worst {strict:.0%})")
        both = [s for s in big if s in theirs]
        if both:
            worst = min(ours[s]["busbw_gbps"] / theirs[s]["busbw_gbps"] for s in both)
            parts.append(f"- {label}: ≥ {MIN_C10D_RATIO}x c10d's busbw for ≥ 1 MiB: worst "
                         f"{worst:.2f}x {'✓' if worst >= MIN_C10D_RATIO else '✗'}")
        if 4096 in ours:
            median = ours[4096]["median_us"]
            parts.append(f"- {label}: 4 KiB all-reduce median ≤ {MAX_SMALL_MEDIAN_US:.0f} µs: "
                         f"{median:.1f} µs {'✓' if median <= MAX_SMALL_MEDIAN_US else '✗'}")
    parts.append("")
    return parts


def Report(args, machine, training, all_reduce, notes):
    """The generated part of docs/benchmarks.md. `args`: bench/run's arguments plus
    `command` (how to rerun it), `models`, `batches`, `keras_backends`."""
    loads = [r["other_load"] for r in training]
    parts = [
        f"Generated by `bench/run` on {machine['date']}:",
        "",
        f"    {args.command}",
        "",
        "### Machine",
        "",
        f"- {machine['nproc']} CPUs (nproc): {machine['cpu']}",
        f"- {machine['os']}, glibc {machine['glibc']}, Python {machine['python']}, "
        f"PyTorch {machine['torch']} (Debian python3-torch, the LibTorch Cohort links)",
        f"- BLAS behind LibTorch's CPU matrix products (libblas.so.3): {machine['blas']}; "
        f"OPENBLAS_CORETYPE {machine['openblas_core']}",
        f"- jemalloc: {machine['jemalloc']}",
        f"- load average when the run started: {machine['loadavg']}; the benchmark ran "
        f"at nice {os.nice(0)}; other load during the training runs: "
        f"{min(loads, default=0):.0%} to {max(loads, default=0):.0%} "
        f"(median {sorted(loads)[len(loads) // 2] if loads else 0:.0%})",
        "",
        "### Method",
        "",
        "- Models: mlp = Dense 784-256-128-10 relu (examples/mnist_mlp.keras); cnn = "
        "Conv2D 32 3x3, MaxPool 2, Conv2D 64 3x3, MaxPool 2, Flatten, Dense 10 "
        "(examples/mnist_cnn.keras); residual = Functional, Dense 256 then two residual "
        "blocks (Dense 256 relu, Dense 256, Add, ReLU), Dense 10 "
        "(examples/mnist_residual.keras). Adam lr 1e-3, softmax cross-entropy, global "
        f"batches {', '.join(map(str, args.batches))}; synthetic data of MNIST's shape, in "
        "memory (peers) or in .npy files (Cohort), the same number of rows (24 MiB, 16 "
        "batches at least) for Cohort and the PyTorch peers.",
        "- Settings: "
        + (f"1 rank x {args.threads} threads, " if args.threads != 1 else "")
        + f"1 rank x 1 thread, {args.ranks} ranks x 1 thread, each confined to as many CPUs "
        "as it has threads "
        "in all (sched_setaffinity; every system alike). In each, the kernel floor runs first, then "
        f"every other system {args.rounds} time(s) in rounds (the first in an order that rotates "
        "from setting to setting, each next one reversed), then the floor again; each run for "
        f"about {args.seconds:g} s measured after a warm-up. A system's figure in % of floor, "
        "Cohort ÷ this and the targets is its fastest run, the floor's included (so a machine "
        "that slowed down during the setting does not flatter Cohort); the table lists every "
        "run.",
        f"- Precision: {args.precision}"
        + ("" if args.precision == "float32" else
           " (Cohort's fit.precision; the PyTorch peers' forward pass under "
           "torch.autocast in bfloat16, the loss in float32; Keras under its "
           "mixed_bfloat16 dtype policy; the kernel floor stays float32, for reference)")
        + ".",
        "- Kernel floor: bench/kernel_floor.cc, the model's forward and backward matrix "
        "products and convolutions alone, back to back, one process per rank on its "
        "share of the batch.",
        "- PyTorch eager / DDP (Gloo, loopback, 1 thread per rank) under each allocator of "
        f"{', '.join(args.allocators) or '(none)'} (glibc: as installed; glibc-tuned: "
        "MALLOC_MMAP_THRESHOLD_=32 MiB, MALLOC_TRIM_THRESHOLD_=1 GiB; jemalloc: "
        "LD_PRELOAD). The runs with a tuned allocator are tuned as Cohort's ranks are, too "
        "(`--tuned`): denormals flushed to zero, and the threads in one pool (OpenBLAS's "
        "for the Dense models, LibTorch's intra-op pool for the cnn). Keras 3 model.fit on "
        "the same .keras file, torch and JAX backends.",
        "- Cohort: `cohort-worker train` on a job with as many epochs as the time needs; "
        "the first is warm-up; samples/s is what the trainer reports for the others; CPU "
        "time is the ranks' from the end of the first epoch to their exit (it includes "
        "writing the model). On several ranks the ranks share one copy of the model "
        "(as they train by default on one machine); \"Cohort, a replica per rank\" is the "
        "same with `--replica-per-rank` (a replica each, gradients all-reduced).",
        "- user s / sys s: CPU seconds of the measured window, summed over threads and "
        "ranks. peak RSS: the largest process's (per rank) ru_maxrss, shared libraries "
        "included. % of floor: samples/s over the kernel floor's in the same setting (the "
        "fastest floor). "
        "other load: the share of the machine that processes outside the benchmark used "
        "during the run; rows with more than a few percent are noisy.",
        "",
    ]
    for note in notes:
        parts += [f"- {note}", ""]
    parts += ["### Targets (issue 7; ✓ met, ✗ missed)", ""] + Targets(args, training) + [""]
    parts += ["### Training throughput", ""] + TrainingTables(args, training)
    parts += ["### All-reduce between 2 processes on loopback", ""] + \
        AllReduceTables(all_reduce)
    return "\n".join(parts)


def Machine(python, jemalloc):
    """Facts about this machine and the peers' PyTorch, for the report's header."""
    try:
        torch_version = subprocess.run(
            [python, "-c", "import torch; print(torch.__version__)"],
            capture_output=True, text=True, timeout=120).stdout.strip() or "not found"
    except (OSError, subprocess.TimeoutExpired):
        torch_version = "not found"
    os_name = platform.platform()
    try:
        with open("/etc/os-release") as f:
            fields = dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)
        os_name = fields.get("PRETTY_NAME", os_name).strip('"') + ", Linux " + \
            platform.release()
    except OSError:
        pass
    return {
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "nproc": os.cpu_count(), "cpu": CpuModel(), "os": os_name,
        "glibc": os.confstr("CS_GNU_LIBC_VERSION").split()[-1],
        "python": platform.python_version(), "torch": torch_version,
        "jemalloc": jemalloc if os.path.exists(jemalloc) else "not installed (rows skipped)",
        "loadavg": " ".join(open("/proc/loadavg").read().split()[:3]),
        "blas": Blas(),
        "openblas_core": os.environ.get("OPENBLAS_CORETYPE", "unset (OpenBLAS detects the CPU)"),
    }


def Blas():
    """Which library Debian's alternatives (or LD_LIBRARY_PATH) make libblas.so.3."""
    for directory in os.environ.get("LD_LIBRARY_PATH", "").split(":") + [
            "/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu"]:
        path = os.path.join(directory, "libblas.so.3") if directory else ""
        if path and os.path.exists(path):
            real = os.path.realpath(path)
            if "openblas" in real:
                return f"OpenBLAS ({real})"
            if "/blas/libblas.so" in real:
                return (f"the netlib reference BLAS ({real}): unoptimized and single-threaded, "
                        "so Dense layers are BLAS-bound; scripts/setup installs "
                        "libopenblas0-pthread, which replaces it")
            return real
    return "not found"
