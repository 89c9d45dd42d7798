"""strata.compile beside torch.compile (Inductor's C++ backend, CPU), in one run, on the same functions and
the same input values: the steady time per call of eager and compiled on each side, and each side's cold
compile (first call: capture, fusion, codegen, the C++ compiler, load), both with an empty kernel cache,
then strata's again with a warm one (a cache hit). The results of the four are compared (relative
difference against strata eager). Without an importable torch (2.x: torch.compile) only strata's columns
are printed, and the output says so.

    PYTHONPATH=build/python ~/.cache/strata/venv/bin/python -B bench/compiled_bench_torch.py [--quick] [--threads N]

Results and the command: docs/performance.md, "strata.compile vs torch.compile"."""
import argparse
import math
import os
import sys

# --threads N: OpenBLAS reads its thread count when it is loaded (with import strata), so it is set here,
# before; torch's is set after import.
if "--threads" in sys.argv[1:-1]:
    os.environ["OPENBLAS_NUM_THREADS"] = sys.argv[sys.argv.index("--threads") + 1]
import shutil
import statistics
import tempfile
import time

# Inductor's caches in a fresh directory, so that its cold compile is cold (set before torch is imported).
_TORCH_CACHE = tempfile.mkdtemp(prefix="strata-bench-inductor-")
os.environ["TORCHINDUCTOR_CACHE_DIR"] = _TORCH_CACHE
os.environ.setdefault("TORCHINDUCTOR_FX_GRAPH_CACHE", "0")

import numpy as np  # noqa: E402

import strata  # noqa: E402

try:
    import torch  # noqa: E402
    _TORCH = torch if hasattr(torch, "compile") else None
    _NO_TORCH = None if _TORCH else f"torch {torch.__version__} has no torch.compile (needs 2.x)"
except ImportError as e:
    _TORCH, _NO_TORCH = None, f"torch is not importable ({e})"


def relu_matmul(ns):
    return lambda x, w: ns.relu(ns.matmul(x, w))


def linear_gelu(ns):
    if ns is strata:
        return lambda x, w, b: strata.gelu(strata.linear(x, w, b))
    return lambda x, w, b: ns.nn.functional.gelu(ns.nn.functional.linear(x, w, b))


def add_gelu_relu(ns):
    if ns is strata:
        return lambda x, y: strata.relu(strata.add(strata.gelu(strata.add(x, y, alpha=0.5)), x))
    return lambda x, y: ns.relu(ns.add(ns.nn.functional.gelu(ns.add(x, y, alpha=0.5)), x))


def gelu_tanh(ns):
    c = math.sqrt(2 / math.pi)
    if ns is strata:
        return lambda x: strata.mul(strata.mul(x, 0.5), strata.add(strata.tanh(
            strata.mul(strata.add(x, strata.mul(strata.pow(x, 3.0), 0.044715)), c)), 1.0))
    return lambda x: ns.mul(ns.mul(x, 0.5), ns.add(ns.tanh(ns.mul(ns.add(x, ns.mul(ns.pow(x, 3.0), 0.044715)), c)), 1.0))


CASES = [  # name, function maker, input shapes
    ("relu(matmul) 256", relu_matmul, [(256, 256), (256, 256)]),
    ("gelu(linear) 128x512x512", linear_gelu, [(128, 512), (512, 512), (512,)]),
    ("relu(gelu(x+y/2)+x) 512x1024", add_gelu_relu, [(512, 1024), (512, 1024)]),
    ("gelu_tanh 1M (seven ops)", gelu_tanh, [(1024, 1024)]),
]


def per_call_us(fn, args, calls, batches):
    """Median over `batches` of the mean time per call in a batch of `calls` (after 3 warm-up calls)."""
    for _ in range(3):
        fn(*args)
    samples = []
    for _ in range(batches):
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            fn(*args)
        samples.append((time.perf_counter_ns() - t0) / calls / 1e3)
    return statistics.median(samples)


def first_call_s(fn, args):
    t0 = time.perf_counter_ns()
    out = fn(*args)
    return (time.perf_counter_ns() - t0) / 1e9, out


def fmt_ns(ns):
    return f"{ns / 1e6:.1f} ms" if ns >= 1e6 else f"{ns / 1e3:.1f} us"


def torch_setup_s():
    """torch.compile's one-time cost in a process (Dynamo and Inductor set up, their first compile), on a
    trivial function, so that each case's cold compile below is that function's own."""
    torch._dynamo.reset()
    x = torch.randn(2)
    t0 = time.perf_counter_ns()
    torch.compile(lambda v: torch.relu(v) + 1, backend="inductor")(x)
    return (time.perf_counter_ns() - t0) / 1e9


def guard_overhead_us(calls, batches, cache):
    """What strata.compile's Python wrapper adds per call (the guard key, the version lookup, the result):
    a compiled call of a tiny relu minus the same version's C++ run called directly."""
    compiled = strata.compile(lambda x: strata.relu(x), cache_dir=cache)
    x = strata.randn(4)
    compiled(x)
    run = compiled.versions[0]._compiled.run
    whole = per_call_us(compiled, [x], calls * 20, batches)
    inner = per_call_us(lambda v: run([v]), [x], calls * 20, batches)
    return whole, inner


def rel_diff(a, b):
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def run_case(name, make, shapes, calls, batches, cache):
    values = [np.random.default_rng(i).standard_normal(s).astype(np.float32) for i, s in enumerate(shapes)]
    sargs = [strata.from_numpy(v.copy()) for v in values]
    eager = make(strata)
    row = {"case": name, "strata eager": per_call_us(eager, sargs, calls, batches)}
    ref = eager(*sargs).numpy_float64()
    compiled = strata.compile(make(strata), cache_dir=cache)
    row["strata cold s"], out = first_call_s(compiled, sargs)
    t = compiled.timings
    row["strata phases"] = ", ".join(f"{p[:-3]} {fmt_ns(t[p])}" for p in
                                     ("capture_ns", "fusion_ns", "codegen_ns", "compile_ns", "load_ns"))
    row["kernels"] = compiled.plan.splitlines()[0]
    row["diff strata compiled"] = rel_diff(out.numpy_float64(), ref)
    row["strata compiled"] = per_call_us(compiled, sargs, calls, batches)
    again = strata.compile(make(strata), cache_dir=cache)
    row["strata cache-hit s"], _ = first_call_s(again, sargs)
    if _TORCH is not None:
        targs = [torch.from_numpy(v.copy()) for v in values]
        teager = make(torch)
        with torch.no_grad():
            row["torch eager"] = per_call_us(teager, targs, calls, batches)
            row["diff torch eager"] = rel_diff(teager(*targs).double().numpy(), ref)
            torch._dynamo.reset()
            tcompiled = torch.compile(make(torch), backend="inductor")
            row["torch cold s"], tout = first_call_s(tcompiled, targs)
            row["diff torch compiled"] = rel_diff(tout.double().numpy(), ref)
            row["torch compiled"] = per_call_us(tcompiled, targs, calls, batches)
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls (a smoke run, not for the record)")
    parser.add_argument("--threads", type=int, default=None,
                        help="threads on both sides: OpenBLAS (strata) and torch's intra-op pool (default: each "
                             "library's own choice)")
    args = parser.parse_args()
    if args.threads is not None and _TORCH is not None:
        torch.set_num_threads(args.threads)
    calls, batches = (5, 3) if args.quick else (50, 9)
    cache = tempfile.mkdtemp(prefix="strata-bench-kernels-")
    threads = os.environ.get("OPENBLAS_NUM_THREADS", "OpenBLAS default")
    print(f"strata.compile vs torch.compile, CPU, f32; python {sys.version.split()[0]}; OpenBLAS threads: {threads}")
    if _TORCH is not None:
        print(f"torch {torch.__version__}: {torch.get_num_threads()} intra-op threads; inductor cache {_TORCH_CACHE}")
    else:
        print(f"torch: not run: {_NO_TORCH}")
    print(f"steady: median over {batches} batches of the mean per call over {calls} calls; cold: the first call, "
          f"empty kernel caches on both sides")
    if _TORCH is not None:
        with torch.no_grad():
            print(f"torch.compile's one-time setup in this process (a trivial function, first): {torch_setup_s():.3f} s")
    try:
        whole, inner = guard_overhead_us(calls, batches, cache)
        print(f"strata.compile's Python wrapper per call: {whole - inner:.2f} us (a compiled relu on 4 elements: "
              f"{whole:.2f} us; its C++ run called directly: {inner:.2f} us)")
        for name, make, shapes in CASES:
            r = run_case(name, make, shapes, calls, batches, cache)
            print(f"\n{r['case']}   ({r['kernels']})")
            line = f"  steady per call   strata eager {r['strata eager']:9.1f} us   strata.compile {r['strata compiled']:9.1f} us"
            if "torch eager" in r:
                line += f"   torch eager {r['torch eager']:9.1f} us   torch.compile {r['torch compiled']:9.1f} us"
            print(line)
            line = f"  cold first call   strata.compile {r['strata cold s']:.3f} s ({r['strata phases']})"
            print(line)
            line = f"                    strata.compile, cache hit {r['strata cache-hit s']:.3f} s"
            if "torch cold s" in r:
                line += f"   torch.compile {r['torch cold s']:.3f} s"
            print(line)
            diffs = ", ".join(f"{k[5:]} {v:.1e}" for k, v in r.items() if k.startswith("diff "))
            print(f"  relative difference against strata eager: {diffs}")
    finally:
        shutil.rmtree(cache, ignore_errors=True)
        shutil.rmtree(_TORCH_CACHE, ignore_errors=True)


if __name__ == "__main__":
    main()
