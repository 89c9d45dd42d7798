"""What a matmul costs from Python, side by side in one process (issue 13's benchmark):

    PYTHONPATH=build/python ~/.cache/strata/venv/bin/python bench/python_overhead_bench.py [--n 16] [--calls 200]
        [--batches 40] [--runs 5]
    (or: cmake --build build --target python_overhead_bench; the peer's environment has torch 2.x, docs/build.md)

n x n float32 matmul on the CPU, per-call medians over interleaved batches, every figure on strata's host
clock:
  strata.matmul from Python (tracing off)       torch.matmul from Python (PyTorch, as installed)
  raw cblas_sgemm timed in C++ on the same buffers (the floor both stacks call into at this size)
  strata.matmul inside strata.profile() with the python/pybind11 rows on, and with them off
Targets: strata's overhead over raw cblas_sgemm at most half of PyTorch's; the python and pybind11 rows
add at most 0.2 us per call. Then the differential cross-check (strata.profile.crosscheck). Prints the
figures of each of --runs runs (the whole measurement, one after the other), then the median of the runs
and their spread (min..max) for each target: on a shared machine one run says little (the figures move
together with the machine's speed). Results: docs/performance.md.
"""
import argparse
import os
import sys

import strata
from strata import _ops, _strata
from strata._profile import _empty_loop_ns, _median, _python_loop_ns, crosscheck, format_crosscheck


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=16)
    parser.add_argument("--calls", type=int, default=200, help="calls per batch")
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--runs", type=int, default=5, help="whole measurements, for the median and spread")
    parser.add_argument("--no-torch", action="store_true", help="leave PyTorch out")
    o = parser.parse_args()
    if o.n < 1 or o.n > 4096 or o.calls < 1 or o.batches < 1 or o.runs < 1:
        parser.error("--n must be in [1, 4096], --calls, --batches and --runs at least 1")

    torch = None
    torch_why = "left out (--no-torch)"
    if not o.no_torch:
        try:
            import torch
        except ImportError as e:
            torch_why = f"not importable: {e}"

    a = strata.randn(o.n, o.n, seed=1)
    b = strata.randn(o.n, o.n, seed=2)
    ta = tb = None
    if torch is not None:
        ta = torch.from_numpy(a.numpy())  # the same values, torch's own tensors (shared memory)
        tb = torch.from_numpy(b.numpy())
        assert torch.allclose(torch.matmul(ta, tb), torch.from_numpy(strata.matmul(a, b).numpy()), rtol=1e-4, atol=1e-4)
    ratios, rows = [], []
    for run in range(o.runs):
        print(f"== run {run + 1} of {o.runs}")
        ratio, rows_cost = measure(o, torch, torch_why, a, b, ta, tb)
        if ratio is not None:
            ratios.append(ratio)
        rows.append(rows_cost)
        print()
    print(f"over {o.runs} runs: median, spread (min..max)")
    if ratios:
        print(f"  strata overhead / torch overhead       {_median(ratios):7.2f}      ({min(ratios):.2f}..{max(ratios):.2f})"
              f"   target <= 0.50: {'met' if _median(ratios) <= 0.5 else 'MISSED'} by the median")
    print(f"  the python + pybind11 rows add         {_median(rows) / 1000:7.3f} us   ({min(rows) / 1000:.3f}.."
          f"{max(rows) / 1000:.3f})   target <= 0.200 us: {'met' if _median(rows) <= 200 else 'MISSED'} by the median")
    print()
    print(format_crosscheck(crosscheck(n=o.n, calls=o.calls, batches=max(10, o.batches // 2))))


def measure(o, torch, torch_why, a, b, ta, tb):
    """One whole measurement: prints its figures; returns (strata/torch overhead ratio or None, rows' ns)."""
    matmul = strata.matmul
    series = {k: [] for k in ("strata", "torch", "cblas_sgemm", "profile_rows_on", "profile_rows_off")}
    for i in range(o.batches + 1):
        loop = _empty_loop_ns(o.calls)
        s = _python_loop_ns(matmul, (a, b), o.calls) - loop
        t = _python_loop_ns(torch.matmul, (ta, tb), o.calls) - loop if torch is not None else None
        raw = _strata._time_matmul_layers(a, b, o.calls, 1)["cblas_sgemm"][0]
        with strata.profile():
            on = _python_loop_ns(matmul, (a, b), o.calls) - loop
            forced = _ops.set_rows(False)  # the same profile, C++ zones only: what the two rows add is the difference
            off = _python_loop_ns(matmul, (a, b), o.calls) - loop
            _ops.set_rows(forced)
        if i == 0:
            continue  # warm-up batch
        series["strata"].append(s)
        if t is not None:
            series["torch"].append(t)
        series["cblas_sgemm"].append(raw)
        series["profile_rows_on"].append(on)
        series["profile_rows_off"].append(off)
    m = {k: _median(v) for k, v in series.items() if v}

    us = lambda ns: f"{ns / 1000:7.3f} us"
    print(f"matmul {o.n}x{o.n} @ {o.n}x{o.n} float32, CPU; {o.batches} batches x {o.calls} calls, per-call medians "
          f"(empty-loop cost {us(loop).strip()} taken off Python figures)")
    print(f"python {sys.version.split()[0]}; OpenBLAS threads {strata.SCHEMAS and _blas_threads()}; "
          + (f"torch {torch.__version__} ({torch.get_num_threads()} intra-op threads)" if torch else f"torch {torch_why}")
          + f"; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    floor = m["cblas_sgemm"]
    print(f"  raw cblas_sgemm (C++, same buffers)    {us(floor)}")
    print(f"  strata.matmul from Python              {us(m['strata'])}   overhead over cblas_sgemm {us(m['strata'] - floor)}")
    ratio = None
    if "torch" in m:
        print(f"  torch.matmul from Python               {us(m['torch'])}   overhead over cblas_sgemm {us(m['torch'] - floor)}")
        ratio = (m["strata"] - floor) / (m["torch"] - floor)
        print(f"  strata overhead / torch overhead       {ratio:7.2f}      target <= 0.50: {'met' if ratio <= 0.5 else 'MISSED'}")
    rows_cost = m["profile_rows_on"] - m["profile_rows_off"]
    print(f"  strata.matmul in strata.profile()      {us(m['profile_rows_on'])}   (all tracing: "
          f"{us(m['profile_rows_on'] - m['strata']).strip()} over untraced)")
    print(f"  same, python/pybind11 rows off         {us(m['profile_rows_off'])}   (C++ zones only)")
    print(f"  the python + pybind11 rows add         {us(rows_cost)}   target <= 0.200 us: "
          f"{'met' if rows_cost <= 200 else 'MISSED'}")
    return ratio, rows_cost


def _blas_threads():
    with strata.profile() as p:
        strata.matmul(strata.zeros(2, 2), strata.zeros(2, 2))
    return p.json()["ops"][0]["environment"]["blas_threads"]


if __name__ == "__main__":
    main()
