"""The implicit copy, strata against PyTorch and against a plain copy of the same bytes, side by side in
one process (issue 31's target: the implicit copy within 1.5x of memcpy of the same bytes):

    PYTHONPATH=build/python ~/.cache/strata/venv/bin/python -B bench/python_copy_bench.py
        [--shapes 256x256,512x512,...] [--rounds 15] [--runs 3]
    (or: cmake --build build --target python_copy_bench)

For each float32 shape R x C it times, from Python, in the calling thread's CPU time:
  - strata `x.t().contiguous()` and torch's transposed copy `d.copy_(x.t())` into a [C,R] tensor,
  - the stepped view on both: strata `x[:, ::2].contiguous()`, torch `h.copy_(x[:, ::2])` (every second
    column, half the bytes),
  - the memory-speed reference: torch `d.copy_(y)` of a contiguous tensor of the same bytes (a memcpy).
torch's copies and the reference write into tensors made once and already touched; strata's
contiguous() allocates its output in every call (strata's Python API has no copy_), so strata's figure
includes an allocation the others do not pay: it is the upper bound of its copy. (torch's own
contiguous() of a 4 MiB tensor is not used: each call maps fresh pages from the OS and takes ~5x as
long as the copy.) torch runs on one thread (torch.set_num_threads(1)), as strata's copy does. CPU time, not the wall clock: on a shared
VM the scheduler's slices otherwise fall on whole rounds of one variant (docs/performance.md). Variants are
interleaved within each round, each one warmed by an untimed call first; a figure is the median over
rounds, and the runs' median and spread are printed at the end. Results: docs/performance.md.
"""
import argparse
import os
import sys
import time

import strata

DEFAULT_SHAPES = "256x256,512x512,1000x1000,1024x1024,2048x2048,512x2048,2048x512"


# torch's row -> strata's row of the same copy (labels of variants()).
STRATA_OF = {"t() copy_  torch": "t().contiguous()  strata",
             "[:, ::2] copy_  torch": "[:, ::2].contiguous() strata"}


def parse_shapes(text):
    shapes = []
    for item in text.split(","):
        parts = item.split("x")
        if len(parts) != 2 or not all(p.isdigit() for p in parts):
            raise ValueError(f"--shapes: '{item}' is not RxC (e.g. 512x512)")
        rows, cols = int(parts[0]), int(parts[1])
        if not (2 <= rows <= 8192 and 2 <= cols <= 8192):
            raise ValueError(f"--shapes: '{item}': each side must be in [2, 8192]")
        shapes.append((rows, cols))
    return shapes


def cpu_ns(call, reps):
    """The calling thread's CPU time per call over reps calls, after one untimed call."""
    call()
    start = time.thread_time_ns()
    for _ in range(reps):
        call()
    return (time.thread_time_ns() - start) / reps


def median(values):
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def variants(torch, rows, cols):
    """(label, call) pairs for one shape: the copies and the references of the same bytes."""
    x = strata.randn(rows, cols, seed=1)
    tx = torch.from_numpy(x.numpy()).clone()  # the same values, torch's own memory
    xt, txt = x.t(), tx.t()
    xs, txs = x[:, ::2], tx[:, ::2]
    full_src, full = torch.randn(cols, rows), torch.randn(cols, rows)  # the transposed copy's bytes
    half_src, half = torch.randn(rows, (cols + 1) // 2), torch.randn(rows, (cols + 1) // 2)  # the stepped's
    dst_t, dst_s = torch.randn(cols, rows), torch.randn(rows, (cols + 1) // 2)  # torch's copies' outputs
    if not strata_equal(xt.contiguous(), txt.contiguous()) or not strata_equal(xs.contiguous(),
                                                                              txs.contiguous()):
        sys.exit(f"python_copy_bench: strata's and torch's copies of {rows}x{cols} differ")
    return (
        ("t().contiguous()  strata", lambda: xt.contiguous()),
        ("t() copy_  torch", lambda: dst_t.copy_(txt)),
        ("memcpy, same bytes", lambda: full.copy_(full_src)),
        ("[:, ::2].contiguous() strata", lambda: xs.contiguous()),
        ("[:, ::2] copy_  torch", lambda: dst_s.copy_(txs)),
        ("memcpy, same bytes (half)", lambda: half.copy_(half_src)),
    )


def strata_equal(s, t):
    import numpy
    return numpy.array_equal(s.numpy(), t.numpy())


def measure_shape(torch, rows, cols, rounds):
    """{label: median ns over rounds} for one shape, variants interleaved in every round."""
    calls = variants(torch, rows, cols)
    reps = max(1, int(2e6 // (rows * cols)))  # ~8 MB written per timed batch
    series = {label: [] for label, _ in calls}
    for _ in range(rounds):
        for label, call in calls:
            series[label].append(cpu_ns(call, reps))
    return {label: median(values) for label, values in series.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default=DEFAULT_SHAPES, help=f"RxC list (default {DEFAULT_SHAPES})")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--runs", type=int, default=3, help="whole measurements, for the median and spread")
    args = parser.parse_args()
    try:
        shapes = parse_shapes(args.shapes)
    except ValueError as e:
        parser.error(str(e))
    if args.rounds < 1 or args.runs < 1:
        parser.error("--rounds and --runs must be at least 1")
    try:
        import torch
    except ImportError as e:
        sys.exit(f"python_copy_bench: PyTorch is not importable ({e}): run it with the peer's python "
                 "(~/.cache/strata/venv/bin/python, made by scripts/install-python-deps)")
    torch.set_num_threads(1)

    print(f"float32 copies, thread CPU time per call, medians over {args.rounds} rounds; python "
          f"{sys.version.split()[0]}, torch {torch.__version__} on {torch.get_num_threads()} thread, "
          f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    ratios = {}  # (shape, which) -> [ratio per run]
    for run in range(args.runs):
        print(f"== run {run + 1} of {args.runs}")
        for rows, cols in shapes:
            m = measure_shape(torch, rows, cols, args.rounds)
            labels = list(m)
            ref_full, ref_half = m[labels[2]], m[labels[5]]
            print(f"  {rows}x{cols}")
            for i, label in enumerate(labels):
                ref = ref_full if i < 3 else ref_half
                print(f"    {label:30} {m[label] / 1e3:9.1f} us   / memcpy {m[label] / ref:5.2f}x")
                ratios.setdefault((f"{rows}x{cols}", label), []).append(m[label] / ref)
    print(f"over {args.runs} runs, median (min..max): each copy / memcpy of the same bytes (target <= 1.50; "
          "strata's includes its allocation), and strata / torch")
    for (shape, label), values in ratios.items():
        if "memcpy" in label:
            continue
        mid = median(values)
        line = f"  {shape:10} {label:30} {mid:5.2f}x ({min(values):.2f}..{max(values):.2f})"
        if label in STRATA_OF:  # the same copy's strata row was printed just before
            own = ratios[(shape, STRATA_OF[label])]
            per_run = [s / t for s, t in zip(own, values)]
            line += f"   strata / torch {median(per_run):4.2f} ({min(per_run):.2f}..{max(per_run):.2f})"
        print(line)

if __name__ == "__main__":
    main()
