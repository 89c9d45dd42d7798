#!/usr/bin/env python3
"""A short smoke check of the Python package on device='cuda', for scripts/gpu-validate (tests/python/
strata_test.py is the full suite; on a machine without a GPU it checks that cuda is a clear error).

    PYTHONPATH=<build>/python python3 tests/python/cuda_smoke.py [--json FILE] [--device DEV]

matmul, relu and gelu on device='cuda' in float32 (and matmul, gelu in bfloat16, matmul in float16), each
against a float64 numpy reference of the same inputs, with strata's relative-error measure and
tests/python's per-dtype tolerance; then a backward pass (sum(a @ b).backward(), both gradients against
float64), strata.profile() around CUDA calls (every call recorded, its host rows there) and linear on views
at an offset (x[1:], b[1:]: cuBLASLt's plans per operand alignment). One line per case on stdout; --json FILE writes the same as JSON
(scripts/gpu_validate/tables.py python_smoke formats it). --device (default cuda) exists to exercise this
script on a machine without a GPU: with --device cpu only the float32 cases run (the CPU kernels refuse
float16 and bfloat16).

Exit status: 0 every case within tolerance; 1 a case failed or raised; 2 `import strata` failed;
3 CUDA is not available to strata (strata.UnavailableError on the first CUDA tensor).
"""
import json
import math
import platform
import sys
import time
import traceback

TOLERANCE = {"float64": 1e-12, "float32": 1e-5, "float16": 5e-3, "bfloat16": 3e-2}
# (op, dtype, input shapes); every input is randn with its own seed, made on the device.
CASES = [
    ("matmul", "float32", [(256, 384), (384, 128)]),
    ("matmul", "float16", [(256, 384), (384, 128)]),
    ("matmul", "bfloat16", [(256, 384), (384, 128)]),
    ("relu", "float32", [(1048577,)]),
    ("gelu", "float32", [(1048577,)]),
    ("gelu", "bfloat16", [(1048577,)]),
]


def main(argv):
    json_path = argv[argv.index("--json") + 1] if "--json" in argv[:-1] else None
    device = argv[argv.index("--device") + 1] if "--device" in argv[:-1] else "cuda"
    cases = [c for c in CASES if device != "cpu" or c[1] in ("float32", "float64")]
    doc = {"python": platform.python_version(), "executable": sys.executable, "cases": []}

    def done(code, error=None):
        doc["exit"] = code
        if error:
            doc["error"] = error
            print("error: " + error)
        if json_path:
            with open(json_path, "w") as f:
                json.dump(doc, f, indent=1)
        return code

    try:
        import numpy as np
        import strata
    except Exception as e:  # ImportError, or the extension failing to load its libraries
        return done(2, f"import failed: {type(e).__name__}: {e}")
    if getattr(strata, "__file__", None) is None or not hasattr(strata, "UnavailableError"):
        # an empty build/python/strata folder imports as a namespace package: no extension was built
        return done(2, f"import failed: {list(getattr(strata, '__path__', []))} is not the built package")
    doc["strata"] = getattr(strata, "__file__", "?")
    doc["numpy"] = np.__version__
    erf = np.vectorize(math.erf)
    reference = {
        "matmul": lambda a, b: a @ b,
        "relu": lambda x: np.maximum(x, 0),
        "gelu": lambda x: x * 0.5 * (1 + erf(x / math.sqrt(2))),
    }
    try:
        probe = strata.randn(2, 2, device=device, seed=1)
        doc["device"] = probe.device
    except strata.UnavailableError as e:
        return done(3, f"cuda unavailable: {e}")
    except Exception as e:
        return done(1, f"first CUDA tensor: {type(e).__name__}: {e}")
    failed = 0
    for i, (op, dtype, shapes) in enumerate(cases):
        case = {"op": op, "dtype": dtype, "shape": " x ".join("x".join(map(str, s)) for s in shapes),
                "tolerance": TOLERANCE[dtype]}
        try:
            inputs = [strata.randn(*s, dtype=dtype, device=device, seed=100 + 10 * i + j)
                      for j, s in enumerate(shapes)]
            t0 = time.perf_counter()
            out = getattr(strata, op)(*inputs)
            host_s = time.perf_counter() - t0
            values = out.cpu().numpy_float64()  # the copy back synchronises
            ref = reference[op](*[t.cpu().numpy_float64() for t in inputs])
            err = float(np.linalg.norm(values - ref) / np.linalg.norm(np.maximum(np.abs(ref), 0.25)))
            case.update(device=out.device, out_dtype=str(out.dtype), error=err, first_call_s=host_s)
            problems = []
            if not str(out.device).startswith(device):
                problems.append(f"result on {out.device}")
            if tuple(out.shape) != tuple(ref.shape):
                problems.append(f"shape {tuple(out.shape)}, expected {tuple(ref.shape)}")
            if not err <= TOLERANCE[dtype]:  # NaN fails too
                problems.append(f"relative error {err:.3g} over {TOLERANCE[dtype]:g}")
            case["ok"] = not problems
            if problems:
                case["problem"] = "; ".join(problems)
        except Exception as e:
            case.update(ok=False, problem=f"{type(e).__name__}: {e}",
                        traceback=traceback.format_exc(limit=3))
        failed += not case["ok"]
        doc["cases"].append(case)
        print(f"{op} {dtype} {case['shape']}: " + ("ok" if case["ok"] else "FAILED") +
              (f", relative error {case['error']:.3g} (tolerance {case['tolerance']:g})" if "error" in case else "") +
              (f": {case['problem']}" if "problem" in case else ""))
    for name, shape, check in (("matmul backward", "64x96 x 96x32", backward_case),
                               ("profile rows", "64x96 x 96x32", profile_case),
                               ("linear on views at an offset", "x[1:] of 33x5, w 7x5, b[1:] of 8", offset_views_case)):
        case = {"op": name, "dtype": "float32", "shape": shape, "tolerance": TOLERANCE["float32"]}
        try:
            problems = check(strata, np, device, case)
        except Exception as e:
            problems = [f"{type(e).__name__}: {e}"]
            case["traceback"] = traceback.format_exc(limit=3)
        case["ok"] = not problems
        if problems:
            case["problem"] = "; ".join(problems)
        failed += not case["ok"]
        doc["cases"].append(case)
        print(f"{name}: " + ("ok" if case["ok"] else "FAILED: " + case["problem"]))
    return done(1 if failed else 0, f"{failed} of {len(doc['cases'])} cases failed" if failed else None)


def backward_case(strata, np, device, case):
    """sum(a @ b).backward() on the device: both gradients against float64 (ones @ b^T, a^T @ ones)."""
    a = strata.randn(64, 96, device=device, seed=7, requires_grad=True)
    b = strata.randn(96, 32, device=device, seed=8, requires_grad=True)
    strata.sum(strata.matmul(a, b)).backward()
    a64, b64 = a.cpu().numpy_float64(), b.cpu().numpy_float64()
    ones = np.ones((64, 32))
    errors = []
    for name, t, ref in (("a", a, ones @ b64.T), ("b", b, a64.T @ ones)):
        if t.grad is None:
            errors.append(f"{name}.grad is None")
            continue
        got = t.grad.cpu().numpy_float64()
        errors.append(float(np.linalg.norm(got - ref) / np.linalg.norm(np.maximum(np.abs(ref), 0.25))))
    problems = [e for e in errors if isinstance(e, str)]
    measured = [e for e in errors if not isinstance(e, str)]
    if measured:
        case["error"] = max(measured)
        if not case["error"] <= case["tolerance"]:
            problems.append(f"gradient relative error {case['error']:.3g} over {case['tolerance']:g}")
    return problems


def offset_views_case(strata, np, device, case):
    """linear on contiguous views at an offset: x[1:] of an f32 [33, 5] starts 20 bytes into its block, b[1:]
    4 bytes in. The same shapes run first at the allocator's alignment, so that a cuBLASLt plan cached for
    256-byte-aligned pointers would be reused if plans were cached by shape alone (Note [cuBLASLt operand
    alignment] in layers/kernels/cuda/gemm_candidates.h: cublasLtMatmul then refuses the algorithm or its
    kernel faults with a misaligned address). Each result against float64."""
    x0 = strata.randn(33, 5, device=device, seed=11)
    w = strata.randn(7, 5, device=device, seed=12)
    b0 = strata.randn(8, device=device, seed=13)
    x64, w64, b64 = x0.cpu().numpy_float64(), w.cpu().numpy_float64(), b0.cpu().numpy_float64()
    runs = (("aligned", x0[:32], b0[:7], x64[:32], b64[:7]),
            ("x[1:]", x0[1:], b0[:7], x64[1:], b64[:7]),
            ("x[1:], b[1:]", x0[1:], b0[1:], x64[1:], b64[1:]))
    problems, errors = [], []
    for what, x, b, x_ref, b_ref in runs:
        got = strata.linear(x, w, b).cpu().numpy_float64()
        ref = x_ref @ w64.T + b_ref
        err = float(np.linalg.norm(got - ref) / np.linalg.norm(np.maximum(np.abs(ref), 0.25)))
        errors.append(err)
        if not err <= case["tolerance"]:
            problems.append(f"{what}: relative error {err:.3g} over {case['tolerance']:g}")
    case["error"] = max(errors)
    return problems


def profile_case(strata, np, device, case):
    """strata.profile() around CUDA calls: every call recorded, with the host rows measured."""
    a = strata.randn(64, 96, device=device, seed=9)
    b = strata.randn(96, 32, device=device, seed=10)
    with strata.profile() as p:
        for _ in range(5):
            strata.matmul(a, b)
    doc = p.json()
    problems = [] if doc["calls"] == 5 else [f"{doc['calls']} calls recorded, expected 5"]
    rows = {r["layer"]: r for r in doc["ops"][0]["steady"]["rows"] if r["applicable"]} if doc["ops"] else {}
    for layer in ("python", "pybind11", "binding", "dispatch", "library"):
        if layer not in rows or not rows[layer]["time"]["median"] >= 0:
            problems.append(f"no {layer} row")
    return problems


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
