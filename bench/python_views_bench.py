"""What a view costs from Python, strata against PyTorch, side by side in one process (issue 31's target:
a view op from Python at most half of torch's):

    PYTHONPATH=build/python ~/.cache/strata/venv/bin/python -B bench/python_views_bench.py [--n 512]
        [--calls 500] [--batches 40] [--runs 5]
    (or: cmake --build build --target python_views_bench)

For each view (x.t(), x.transpose(0, 1), x[1], x[:, ::2], x.unsqueeze(0)) on an n x n float32 CPU tensor:
the per-call median over interleaved batches of the whole call from Python (Python's method lookup, the
crossing into C++, the binding, the dispatcher, the new tensor header and its Python object), the empty
loop's cost taken off, on strata's host clock. A view moves no data, so this is all overhead: the ratio
strata / torch is the figure the target is about. Prints each run, then the median of the runs and their
spread (min..max): on a shared machine one run says little. Results: docs/performance.md.
"""
import argparse
import os
import sys

import strata
from strata._profile import _empty_loop_ns, _median, _python_loop_ns

# (label, strata call, torch call): the same view, written as a user types it.
VIEWS = (
    ("x.t()", lambda x: x.t()),
    ("x.transpose(0, 1)", lambda x: x.transpose(0, 1)),
    ("x[1]", lambda x: x[1]),
    ("x[:, ::2]", lambda x: x[:, ::2]),
    ("x.unsqueeze(0)", lambda x: x.unsqueeze(0)),
)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=512)
    parser.add_argument("--calls", type=int, default=500, help="calls per batch")
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--runs", type=int, default=5, help="whole measurements, for the median and spread")
    o = parser.parse_args()
    if o.n < 2 or o.n > 8192 or o.calls < 1 or o.batches < 1 or o.runs < 1:
        parser.error("--n must be in [2, 8192], --calls, --batches and --runs at least 1")
    try:
        import torch
    except ImportError as e:
        sys.exit(f"python_views_bench: PyTorch is not importable ({e}): run it with the peer's python "
                 "(~/.cache/strata/venv/bin/python, made by scripts/install-python-deps)")

    x = strata.randn(o.n, o.n, seed=1)
    tx = torch.from_numpy(x.numpy())  # the same values and layout, torch's own tensor
    for label, view in VIEWS:  # the same view: same sizes and strides on both sides
        s, t = view(x), view(tx)
        if tuple(s.shape) != tuple(t.shape) or tuple(s.stride()) != tuple(t.stride()):
            sys.exit(f"python_views_bench: {label} differs: strata {tuple(s.shape)} {s.stride()}, "
                     f"torch {tuple(t.shape)} {t.stride()}")

    print(f"views of a {o.n}x{o.n} float32 CPU tensor; {o.batches} batches x {o.calls} calls, per-call medians "
          f"with the empty loop's cost taken off; python {sys.version.split()[0]}, torch {torch.__version__}, "
          f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    ratios = {label: [] for label, _ in VIEWS}
    for run in range(o.runs):
        print(f"== run {run + 1} of {o.runs}")
        for label, (strata_ns, torch_ns) in measure(o, x, tx).items():
            ratios[label].append(strata_ns / torch_ns)
            print(f"  {label:20} strata {strata_ns:7.1f} ns   torch {torch_ns:7.1f} ns   strata / torch "
                  f"{strata_ns / torch_ns:5.2f}")
    print(f"over {o.runs} runs: strata / torch, median (min..max); target <= 0.50")
    for label, values in ratios.items():
        m = _median(values)
        print(f"  {label:20} {m:5.2f}  ({min(values):.2f}..{max(values):.2f})   {'met' if m <= 0.5 else 'MISSED'}")


def measure(o, x, tx):
    """One whole measurement: {label: (strata ns, torch ns)}, per-call medians over the batches."""
    series = {label: ([], []) for label, _ in VIEWS}
    for i in range(o.batches + 1):
        loop = _empty_loop_ns(o.calls)
        for label, view in VIEWS:
            s = _python_loop_ns(view, (x,), o.calls) - loop
            t = _python_loop_ns(view, (tx,), o.calls) - loop
            if i > 0:  # batch 0 warms both up
                series[label][0].append(s)
                series[label][1].append(t)
    return {label: (_median(s), _median(t)) for label, (s, t) in series.items()}


if __name__ == "__main__":
    main()
