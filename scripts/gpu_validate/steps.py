"""The validation's steps, in order of importance (docs/validation/README.md numbers them the same way).
Each adds its section and its checks through the Runner; what a step needs from an earlier one lives in
the State.
"""
import json
import os
import re
import shutil
from dataclasses import dataclass, field

import checks
import deps as deps_module
import tables

TRACES = {  # case -> strata trace arguments
    "matmul_1024_f32": "matmul 1024",
    "matmul_1024_tf32": "matmul 1024 --tf32",
    "matmul_1024_bf16": "matmul 1024 --dtype bf16",
    "linear_32x768x3072_f32": "linear 32x768x3072",
    "conv_32x64x56x56_k3p1_f32": "conv 32x64x56x56 --kernel 3 --pad 1",
    # strata's own kernels: traced and accounted for; no library call exists to compare their time with
    "relu_1048576_f32": "relu 1048576",
    "gelu_1048576_f32": "gelu 1048576",
}
COMPARES = [(spec, k) for spec in ("matmul 64", "matmul 256", "matmul 1024", "matmul 4096", "relu 1048576")
            for k in (1, 16)]
# Shapes and dtypes the gpu tests do not run through the CLI, gelu, backward passes (every gradient op's CUDA
# kernel against float64) and autocast (docs/autocast.md: f32 inputs cast by to_copy, GEMM in bf16/f16).
KERNEL_PATHS = [
    ("matmul 257x129x63", "f64"), ("matmul 257x129x63", "f16"), ("linear 32x768x3072", "tf32"),
    ("linear 32x768x3072", "f64"), ("conv 4x3x31x29 --out-channels 16 --kernel 5 --stride 2", "bf16"),
    ("conv 4x3x31x29 --out-channels 16 --kernel 5 --stride 2", "tf32"), ("relu 1048577", "f16"),
    ("add 1048577", "f64"), ("gelu 1048576", "f32"), ("gelu 1048576", "bf16"),
    ("linear 32x768x3072 --requires-grad --backward", "f32"), ("matmul 257x129x63 --requires-grad --backward", "f32"),
    ("conv 4x3x31x29 --out-channels 16 --kernel 5 --stride 2 --pad 1 --requires-grad --backward", "f32"),
    # cuDNN's group count and dilation (torch's conv2d options), both gradients too.
    ("conv 4x8x31x29 --out-channels 16 --kernel 3 --stride 2 --pad 2 --dilation 2 --groups 4 --requires-grad --backward",
     "f32"),
    ("relu 1048577 --requires-grad --backward", "f32"), ("matmul 1024", "autocast-bf16"),
    ("matmul 1024", "autocast-f16"),
    # The tanh GELU's ops (strata's own kernels, docs/compiled.md) and their gradients.
    ("mul 1048577", "f32"), ("sub 1048577 --requires-grad --backward", "f32"), ("tanh 1048577", "bf16"),
    ("pow 1048577 --requires-grad --backward", "f64"), ("add.Scalar 1048577", "f16"),
    # The generic unary kernel every pointwise functor instantiates (layers/kernels/pointwise_math.h), through
    # the op added last that way, silu, and its gradient's kernel.
    ("silu 1048577 --requires-grad --backward", "f32"), ("silu 1048577", "bf16"),
    # Views (docs/views.md): a transposed GEMM operand read through cuBLAS's op flags (no copy), and a
    # stepped view that the pointwise kernel gets through contiguous() (strata's strided copy kernel).
    ("matmul 1024 --view other=t", "f32"), ("linear 32x768x3072 --view input=t", "f32"),
    ("relu 1048576 --view self=slice2", "f32"),
    # The in-place ops (strata's own kernels, written into self; the version bump is the registration's), a
    # stepped self written where it lies, and the reductions over dims: rows (the spec reduces the last dim)
    # with one part per output and with several, and mean over every element across many blocks.
    ("relu_ 1048577", "f32"), ("add_ 1048577", "bf16"), ("mul_ 1048577", "f16"), ("mul_.Scalar 1048577", "f64"),
    ("add_.Scalar 1048577", "f16"), ("sub_ 1048577", "f64"), ("sub_.Scalar 1048577", "bf16"),
    ("div_ 1048577", "f32"), ("div_.Scalar 1048577", "bf16"),
    ("add_ 1024x1024 --view self=slice2", "f32"),
    ("sum.dim_IntList 257x4099", "f32"), ("sum.dim_IntList 8x70001", "bf16"), ("mean.dim 4099x257", "f16"),
    ("mean 1048577", "f64"),
    # Never run on a GPU before: true division and its gradient (div, mul.Scalar, mul on the device), the
    # scalar forms in half types, a transposed self written in place, and a reduction of a transposed view
    # (strata's strided copy first).
    ("div 1048577 --requires-grad --backward", "f32"), ("div.Scalar 1048577", "bf16"), ("sub.Scalar 1048577", "f16"),
    ("mul_ 1024x1024 --view self=t", "bf16"), ("sum.dim_IntList 257x4099 --view self=t", "f32"),
]
# The compiled path on the GPU (docs/compiled.md): relu_matmul's GEMM + relu as one cublasLtMatmul with the
# RELU epilogue, linear_gelu's erf gelu as cuBLAS + the generated epilogue's PTX, gelu_tanh's eight calls as
# one generated kernel, in f32 and f64; each with --check against float64 and eager.
COMPILED_PROGRAMS = [("relu_matmul 1024", "f32"), ("relu_matmul 257x129x63", "f64"),
                     ("linear_gelu 32x768x3072", "f32"), ("gelu_tanh 1048577", "f32"), ("gelu_tanh 1048577", "f64")]
# The compiled column of compare on the GPU: K compiled forwards captured into a CUDA Graph and replayed,
# each replayed kernel attributed to the forward that captured it and to the fused kernel that launched it
# (docs/compiled.md).
COMPILED_COMPARES = [("relu_matmul 1024", "f32"), ("linear_gelu 32x768x3072", "f32"), ("gelu_tanh 1048577", "f32")]
GPU_SWEEPS = [("sweep_matmul_16_4096", "matmul 16:4096 --sweep-budget 20", 60),
              ("sweep_relu_1k_16M_compare", "relu 1k:16M --compare --sweep-budget 30", 75)]
CPU_SWEEPS = [("sweep_matmul_16_256", "matmul 16:256 --repeat 3 --warmup 0", 20),
              ("sweep_relu_1k_64k_compare", "relu 1k:64k --compare --repeat 3 --warmup 0", 20)]


@dataclass
class State:
    root: str
    build: str
    deps_dir: str
    jobs: int
    python: str
    rehearse: bool
    gpu_archs: str = "90-real"
    deps: deps_module.Deps = None
    no_gpu_reason: str = ""
    device: str = "cuda"
    python_bin: str = ""
    configure_log: str = ""
    quick: list = field(default_factory=list)
    chrome_repeat: int = 200

    @property
    def strata(self):
        return os.path.join(self.build, "apps", "strata", "strata")

    def bench(self, name):
        return os.path.join(self.build, "bench", name)

    def gpu_step_runs(self):
        return not self.no_gpu_reason or self.device == "cpu"


def words(text):
    return text.split()


# ---- 1. Machine ----

def machine(r, st):
    r.section("Machine")
    nvsmi = ["nvidia-smi", "--query-gpu=index,name,compute_cap,driver_version,memory.total,clocks.max.sm,"
             "clocks.max.mem,power.limit", "--format=csv"]
    if shutil.which("nvidia-smi") or r.dry_run:
        r.run("nvidia_smi", 30, nvsmi)
        text = r.log_text("nvidia_smi")
        r.record.block(text)
        name, cc = tables.gpu_info(text)
        st.gpu_archs = tables.cuda_archs_for(cc) if cc else "90-real"
        r.record.meta["gpu_name"] = name
    else:
        r.record.say("nvidia-smi not found.")
    tools = []
    for tool in ("g++", "cmake", "ninja", st.python, "dpkg-deb"):
        found = shutil.which(tool)
        tools.append(f"{tool:<9} " + (deps_module.first_line(deps_module.capture([found, "--version"], 10))
                                      if found else "not found"))
    os_name = next((l.split("=", 1)[1].strip().strip('"') for l in open("/etc/os-release")
                    if l.startswith("PRETTY_NAME")), "?") if os.path.exists("/etc/os-release") else "?"
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")),
               "?") if os.path.exists("/proc/cpuinfo") else "?"
    r.record.block("\n".join([deps_module.first_line(deps_module.capture(["uname", "-a"], 10)), os_name,
                              deps_module.first_line(deps_module.capture(["ldd", "--version"], 10)),
                              f"CPU: {cpu} x {os.cpu_count()}"] + tools))


# ---- 2. Dependencies ----

def dependencies(r, st):
    r.section("Dependencies")
    r.record.say("The packages carried in `.deps`, the toolchain and the CUDA libraries: the two sections below.")
    st.deps = deps_module.discover(r.record, st.build, st.deps_dir, st.python, r.dry_run)
    r.env = st.deps.env
    r.write_report()
    return st.deps.ok or r.dry_run


# ---- 3. Build ----

def python_args(st):
    """The Python package for the machine's own python3 and its pybind11 (not Debian's 3.11)."""
    st.python_bin = shutil.which(st.python) or ""
    if not st.python_bin:
        return []
    args = ["-DSTRATA_PYTHON=AUTO", f"-DPython3_EXECUTABLE={st.python_bin}"]
    cmakedir = (deps_module.capture([st.python_bin, "-m", "pybind11", "--cmakedir"], 20).strip().splitlines() or [""])[-1]
    if cmakedir and os.path.isdir(cmakedir):
        args.append(f"-Dpybind11_DIR={cmakedir}")
    return args


def configure(r, st):
    """Configures the build; a configure that fails with the Python package is retried without it."""
    archs = os.environ.get("GPU_VALIDATE_CUDA_ARCHS", st.gpu_archs)
    base = [st.deps.cmake or "cmake", "-S", st.root, "-B", st.build, "-G", st.deps.generator,
            "-DCMAKE_BUILD_TYPE=Release", "-DSTRATA_CUDA=ON"] + st.deps.cmake_args
    if archs != "default":
        base.append(f"-DCMAKE_CUDA_ARCHITECTURES={archs}")
    py = python_args(st)
    rc = r.run("configure", 240, base + py)
    if rc not in (0, 124, 125, 137) and py:
        os.replace(r.log_path("configure"), r.log_path("configure_with_python"))
        r.record.meta["python_configure_failed"] = "1"
        r.record.say(f"Configure with the Python package (`{' '.join(py)}`) failed (logs/configure_with_python.log); "
                     "configured again without it.")
        rc = r.run("configure", 240, base + ["-DSTRATA_PYTHON=OFF"])
    st.configure_log = r.log_text("configure")
    if rc != 0:
        r.record.block("\n".join(st.configure_log.splitlines()[-40:]))
        r.verdict("fail", "build: configure", f"cmake failed (logs/configure.log); compilers: {deps_module.compilers(st.deps)}")
        return False
    summary = [l for l in st.configure_log.splitlines() if re.search(r"strata: CUDA layers|strata: Python package", l)]
    if summary:
        r.record.block("\n".join(summary))
    found = re.search(r"strata: Python package.*", st.configure_log)
    r.record.meta["python_package"] = found.group(0) if found else ""
    built = built_archs(st, archs)
    r.record.meta["archs"] = built
    r.record.say(f"CUDA architectures: `{built}`.")
    if st.deps.prefix_libs and not r.dry_run:
        prefix_includes(r, st)
    return True


def built_archs(st, asked):
    """The CUDA architectures configured: the cache's, else what the last configure said it builds (a
    configure that CMake re-ran from an empty cache prints a second line)."""
    cache = os.path.join(st.build, "CMakeCache.txt")
    text = open(cache, errors="replace").read() if os.path.exists(cache) else ""
    m = re.search(r"^CMAKE_CUDA_ARCHITECTURES:[A-Z]*=(.*)$", text, re.M)
    if m:
        return m.group(1).strip()
    said = re.findall(r"archs ([^)]*)\)", st.configure_log)
    return said[-1] if said else f"{asked} (asked for)"


def prefix_includes(r, st):
    """The carried packages must come from the prefix, not from wherever the machine has headers."""
    try:
        with open(os.path.join(st.build, "compile_commands.json")) as f:
            commands = [c.get("command", " ".join(c.get("arguments", []))) for c in json.load(f)]
    except (OSError, ValueError):
        return
    include = f"-isystem {st.deps.prefix}/usr/include"
    named = [c for c in commands if include in c]
    tests = [c for c in named if "-o tests/" in c]
    r.record.say(f"Compile commands with the prefix's headers (`{include}`): {len(named)}, of them {len(tests)} for "
                 "tests/ (doctest).")
    if not tests:
        r.record.say("Warning: no test compile command names the prefix's include dir: doctest comes from somewhere else.")


def build(r, st):
    r.section("Build")
    if not configure(r, st):
        return False
    rc = r.run("build_core", 420, [st.deps.cmake or "cmake", "--build", st.build, "-j", str(st.jobs), "--target",
                                   "strata", "raw_cuda_bench", "raw_graph_bench"])
    if rc != 0:
        r.record.block("\n".join([l for l in r.log_text("build_core").splitlines()
                                  if re.search(r"error:|Error |FAILED", l)][:40]))
        why = "stopped for time" if rc in (124, 125, 137) else f"exit {rc}"
        r.verdict("fail", "build: strata and the raw baselines",
                  f"did not build ({why}, logs/build_core.log); compilers: {deps_module.compilers(st.deps)}")
        return False
    r.verdict("pass", "build: strata and the raw baselines", "strata, raw_cuda_bench, raw_graph_bench (STRATA_CUDA=ON, "
              f"archs {r.record.meta.get('archs', '?')}; logs/build_core.log)")
    if not r.dry_run:
        linked_libraries(r, st)
    return True


def linked_libraries(r, st):
    """What strata and its CUDA module resolve: libcuda must not be linked (the runtime loads it)."""
    module = os.path.join(st.build, "apps", "strata", "libstrata_cuda.so")
    r.run("ldd_strata", 30, ["ldd", st.strata])
    r.run("ldd_module", 30, ["ldd", module])
    strata_ldd, module_ldd = r.log_text("ldd_strata"), r.log_text("ldd_module")
    pick = lambda text, pattern: [l for l in text.splitlines() if re.search(pattern, l)]
    r.record.say("Libraries strata and its CUDA module (libstrata_cuda.so) resolve (libcuda must not be linked: "
                 "the runtime loads it):")
    r.record.block("\n".join(["strata:"] + pick(strata_ldd, r"cuda|cublas|cudnn|cupti|openblas|spdlog|fmt|not found")
                             + ["libstrata_cuda.so:"] + pick(module_ldd, r"cuda|cublas|cudnn|cupti|not found|No such")))
    if "not found" in strata_ldd + module_ldd:
        r.verdict("fail", "libraries resolved", "strata or libstrata_cuda.so has unresolved libraries (see ldd above)")
    for name, built_against in st.deps.lib_path.items():
        got = re.search(rf"^\s*lib{re.escape(name)}\.so\S*\s+=>\s+(\S+)", module_ldd, re.M)
        if got and os.path.realpath(got.group(1)) != os.path.realpath(built_against):
            r.record.say(f"Warning: lib{name} resolves to `{os.path.realpath(got.group(1))}`, not the copy built "
                         f"against (`{os.path.realpath(built_against)}`).")


# ---- 4. Devices ----

def devices(r, st):
    r.section("Devices (strata devices)")
    r.run("devices", 30, [st.strata, "devices"])
    text = r.log_text("devices")
    r.record.block(text)
    gpu = re.search(r"^cuda:0: .*$", text, re.M)
    if r.dry_run:
        r.verdict("skip", "GPU found by strata devices", "dry run: the steps below are walked as if a GPU were there")
    elif gpu:
        r.verdict("pass", "GPU found by strata devices", ",".join(gpu.group(0).split(",")[:3]))
    else:
        line = re.search(r"^cuda.*$", text, re.M)
        st.no_gpu_reason = line.group(0) if line else "strata devices failed"
        r.record.meta["no_gpu_reason"] = st.no_gpu_reason
        r.verdict("skip", "GPU found by strata devices", "no GPU: " + st.no_gpu_reason)
    if st.no_gpu_reason and st.rehearse:
        st.device, st.quick, st.chrome_repeat = "cpu", ["--repeat", "3", "--warmup", "0"], 5
        r.record.rehearsal = True
        r.record.say("**CPU rehearsal** (--rehearse-on-cpu): the trace and compare steps below run with --device cpu "
                     "and few calls, to exercise this program and its checks; nothing below validates the GPU path.")


def analyze(r, check, fn, cases):
    """The checks computed from the JSON (checks.py), in the report."""
    if r.dry_run:
        r.record.say(f"Dry run: the checks of `{fn.__name__}` would be computed from the JSON here.")
        r.verdict("skip", check, "dry run: not computed")
        return
    try:
        fn(r.record, cases)
    except Exception as e:  # a check that breaks on unexpected JSON must not end the run
        r.verdict("fail", check, f"{fn.__name__} raised {type(e).__name__}: {e}")
    r.write_report()


def skip_without_gpu(r, st, *checks):
    """A GPU step on a machine without a usable GPU: the report says why, and each of its checks is a skip."""
    r.record.say(f"Skipped: no GPU ({st.no_gpu_reason}).")
    for check in checks:
        r.verdict("skip", check, "skipped: no GPU")


# ---- 5. Traces next to the raw library calls ----


def traces(r, st):
    r.section("Traces, next to the raw library calls on the same shapes")
    if not st.gpu_step_runs():
        skip_without_gpu(r, st, "traces exit 0", "raw library calls measured")
        rc = r.run("raw_cuda_nogpu", 30, [st.bench("raw_cuda_bench"), "--iterations", "1"])
        r.record.say(f"raw_cuda_bench without a GPU (exit {rc}): `{(r.log_text('raw_cuda_nogpu').splitlines() or [''])[-1]}`")
        return
    failures = 0
    cases = [c for c in TRACES if st.device != "cpu" or "--tf32" not in TRACES[c]]
    if len(cases) < len(TRACES):
        r.record.say("(rehearsal: the TF32 case left out: TF32 needs a GPU)")
    for case in cases:
        args = TRACES[case]
        if not r.have_time(25):
            r.budget_skip(f"trace {case}")
            continue
        base = [st.strata, "trace"] + words(args) + ["--device", st.device] + st.quick
        rc = r.run(case, 90, base + ["--json", f"{r.record.work}/json/{case}.json"])
        r.record.say(f"### strata trace {args} --device {st.device}")
        r.record.block(r.log_text(case))
        if rc != 0:
            failures += 1
            r.record.say(f"exit status {rc}")
        # The same without CUPTI: what tracing costs.
        r.run(case + ".nodt", 60, base + ["--no-device-timing", "--json", f"{r.record.work}/json/{case}.nodt.json"])
        r.write_report()
    chrome_ok = chrome_trace(r, st, "chrome_matmul_1024_f32", "matmul_1024_f32",
                             ["trace", "matmul", "1024", "--repeat", str(st.chrome_repeat), "--check"],
                             "Chrome trace of matmul 1024")
    if failures == 0 and chrome_ok:
        r.verdict("pass", "traces exit 0", f"{len(cases)} traces + {len(cases)} without CUPTI; matmul 1024 Chrome trace "
                  "valid and --check passing")
    else:
        r.verdict("fail", "traces exit 0", f"{failures} trace runs failed; Chrome trace ok={int(chrome_ok)} (logs/)")
    raw_baseline(r, st, "raw_cuda", "raw_cuda_bench", ["--markdown", "--iterations", "500"], "raw library calls measured",
                 "### Raw library calls (bench/raw_cuda_bench.cpp)",
                 "cuBLAS / cuBLASLt / cuDNN measured directly, kernel time from CUPTI")
    r.record.say("\n### Checks from the trace JSON")
    analyze(r, "trace checks (kernel time, binding + dispatch, overhead, accounting)", checks.traces, cases)


def chrome_trace(r, st, name, trace_name, args, what):
    """A small Chrome trace for people to open, checked by `strata check-trace`; False when either failed."""
    if not r.have_time(20):
        r.budget_skip(what)  # recorded as skipped, not as a failure
        return True
    path = f"{r.record.work}/traces/{trace_name}.trace.json"
    ok = r.run(name, 60, [st.strata] + args + ["--device", st.device, "--json", f"{r.record.work}/json/{name}.json",
                                                "--chrome-trace", path]) == 0
    ok = r.run("check_trace_" + trace_name, 60, [st.strata, "check-trace", path]) == 0 and ok
    check = next((l for l in r.log_text(name).splitlines() if l.startswith("check")), "no check line")
    last = (r.log_text("check_trace_" + trace_name).splitlines() or [""])[-1]
    r.record.say(f"Chrome trace `traces/{trace_name}.trace.json` ({' '.join(args[1:])}): {check}; check-trace: {last}")
    return ok


def raw_baseline(r, st, name, program, args, check, title, what):
    r.record.say("\n" + title)
    if st.device == "cpu":
        r.record.say("Skipped: no GPU.")
        r.verdict("skip", check, "skipped: no GPU")
    elif r.have_time(30):
        rc = r.run(name, 120, [st.bench(program)] + args + ["--json", f"{r.record.work}/json/{name}.json"])
        r.record.say(r.log_text(name))
        if rc == 0:
            r.verdict("pass", check, what)
        else:
            r.verdict("fail", check, f"{program} exit {rc} (logs/{name}.log)")
    else:
        r.budget_skip(check)


# ---- 6. Eager vs CUDA Graph replay ----

def compare_case(spec, k):
    return f"compare_{spec.replace(' ', '_')}_k{k}"


def compares(r, st):
    r.section("Eager vs CUDA Graph replay, next to the raw floor")
    cases = [compare_case(spec, k) for spec, k in COMPARES]
    if not st.gpu_step_runs():
        skip_without_gpu(r, st, "compare runs exit 0", "raw graph floor measured")
        return
    failures = 0
    for spec, k in COMPARES:
        case = compare_case(spec, k)
        if st.device == "cpu" and spec == "matmul 4096":
            r.record.say(f"(rehearsal: {case} left out, too slow on a CPU)")
            continue
        if not r.have_time(20):
            r.budget_skip(case)
            continue
        # No --check: test_apps_compare_gpu checks replay results, and the float64 reference of 4096 is slow.
        rc = r.run(case, 90, [st.strata, "compare"] + words(spec) + ["--device", st.device, "--ops-per-graph", str(k)]
                   + st.quick + ["--json", f"{r.record.work}/json/{case}.json"])
        r.record.say(f"### strata compare {spec} --device {st.device} --ops-per-graph {k}")
        r.record.block(r.log_text(case))
        if rc != 0:
            failures += 1
            r.record.say(f"exit status {rc}")
        r.write_report()
    chrome_ok = chrome_trace(r, st, "chrome_compare", "compare_matmul_256_k16",
                             ["compare", "matmul", "256", "--ops-per-graph", "16", "--repeat", str(st.chrome_repeat // 4)],
                             "Chrome trace of compare matmul 256")
    if failures == 0 and chrome_ok:
        r.verdict("pass", "compare runs exit 0", "every compare run exited 0; Chrome trace valid")
    else:
        r.verdict("fail", "compare runs exit 0", f"{failures} compare runs failed; Chrome trace ok={int(chrome_ok)}")
    raw_baseline(r, st, "raw_graph", "raw_graph_bench", ["--markdown"], "raw graph floor measured",
                 "### Raw floor: the same call eager vs graph (bench/raw_graph_bench.cpp)",
                 "cublasGemmEx / strata's relu kernel, eager vs graph")
    r.record.say("\n### Checks from the compare JSON")
    analyze(r, "graph replay checks (attribution, device records)", checks.compare, cases)


# ---- 7. GPU tests ----

def build_rest(r, st):
    """The rest of the build, `-k 0` so that one broken test target does not stop the others."""
    if not r.have_time(40):
        r.budget_skip("build: tests")
        return
    rc = r.run("build_rest", 300, [st.deps.cmake or "cmake", "--build", st.build, "-j", str(st.jobs), "--"]
               + st.deps.keep_going)
    failed = re.findall(r"^FAILED:.*$", r.log_text("build_rest"), re.M)
    if rc == 0:
        r.verdict("pass", "build: tests", "every target built")
    elif rc in (124, 125, 137):
        r.verdict("skip", "build: tests", "time budget: the build was stopped (logs/build_rest.log); tests not built "
                  "fail or are not run below")
    elif failed and all(re.search(r"apps/python|python/strata", f) for f in failed):
        r.verdict("pass", "build: tests", "every target built but the Python extension (section 11 reports it)")
    else:
        r.record.block("\n".join([l for l in r.log_text("build_rest").splitlines()
                                  if re.search(r"^FAILED:|error:", l)][:30]))
        r.verdict("fail", "build: tests", f"some targets did not build (exit {rc}, logs/build_rest.log; compilers: "
                  f"{deps_module.compilers(st.deps)}); their tests fail below")


def gpu_tests(r, st):
    r.section("GPU test suite (ctest -L gpu)")
    build_rest(r, st)
    # One ctest call per gpu test, each under its own limit: their TIMEOUT property (300 s) takes precedence
    # over ctest's --timeout, so that flag alone would not bound them.
    check = "gpu tests (ctest -L gpu)"
    if r.dry_run:
        r.run("ctest_gpu_list", 30, ["ctest", "--test-dir", st.build, "-N", "-L", "gpu"])
        r.run("ctest_gpu_TEST", 130, ["ctest", "--test-dir", st.build, "-R", "^TEST$", "-L", "gpu", "--timeout", "120", "-V"])
        r.verdict("skip", check, "dry run: each gpu test would run in its own ctest call")
        return
    if not r.have_time(30):
        r.budget_skip(check)
        return
    r.run("ctest_gpu_list", 30, ["ctest", "--test-dir", st.build, "-N", "-L", "gpu"])
    tests = tables.ctest_list(r.log_text("ctest_gpu_list"))
    for t in tests:
        if not r.have_time(20):
            r.log(f"SKIP gpu test {t}: time budget")
            continue
        r.run(f"ctest_gpu_{t}", 130, ["ctest", "--test-dir", st.build, "-R", f"^{t}$", "-L", "gpu", "--timeout", "120", "-V"])
        r.write_report()
    text, (result, detail) = tables.gpu_tests(r.record, tests, bool(st.no_gpu_reason))
    r.record.say(text)
    r.verdict(result, check, detail)


# ---- 8. Kernel paths through the CLI ----

def kernel_path_name(spec, dtype):
    return "check_" + re.sub(r"[^a-zA-Z0-9]", "_", f"{spec} {dtype}")


def kernel_path_args(dtype):
    if dtype == "tf32":
        return ["--dtype", "f32", "--tf32"]
    if dtype.startswith("autocast-"):
        return ["--dtype", "f32", "--autocast", dtype[len("autocast-"):], "--requires-grad"]
    return ["--dtype", dtype]


def kernel_paths(r, st):
    r.section("Kernel paths through the CLI (strata trace --check)")
    r.record.say("test_kernels_cuda_gpu checks every op x dtype (and TF32) against float64 in-process, and "
                 "test_trace_cuda_gpu runs strata trace --check for ten op/dtype cases; these add odd shapes and the "
                 "remaining dtypes through the CLI, gelu, the in-place ops and the reductions over dims, and backward "
                 "passes (--requires-grad --backward --check: every gradient op's CUDA kernel against float64).")
    check = "kernel paths through the CLI (--check)"
    if not st.gpu_step_runs() or st.device == "cpu":
        skip_without_gpu(r, st, check)
        return
    cases = []
    for spec, dtype in KERNEL_PATHS:
        name = kernel_path_name(spec, dtype)
        cases.append((name, spec, dtype))
        if not r.have_time(15):
            r.log(f"SKIP kernel path {spec} {dtype}: time budget")
            continue
        r.run(name, 60, [st.strata, "trace"] + words(spec) + ["--device", "cuda"] + kernel_path_args(dtype)
              + ["--check", "--repeat", "3", "--warmup", "1", "--json", f"{r.record.work}/json/{name}.json"])
    if r.dry_run:
        r.verdict("skip", check, f"dry run: {len(cases)} CLI runs recorded")
    else:
        text, (result, detail) = tables.kernel_paths(r.record, cases)
        r.record.say(text)
        r.verdict(result, check, detail)
    # The backward and autocast passes launch the gradient kernels and the casts: every one accounted for.
    wrapped = [name for name, spec, dtype in cases if "--backward" in spec or dtype.startswith("autocast")]
    r.record.say("\n### Accounting of the backward and autocast runs")
    analyze(r, "accounting of the backward and autocast runs", checks.accounting, wrapped)


def compiled_gpu_lines(log):
    """The `gpu ...` lines strata prints for each generated kernel on the GPU (its path, and for loaded PTX the
    driver's binary and PTX versions)."""
    return [l for l in log.splitlines() if l.startswith("gpu ")]


def compiled_programs(r, st):
    """Part of step 8: the compiled path on the GPU, checked against float64 and eager."""
    r.record.say("\n### Compiled programs on the GPU (strata trace PROGRAM --mode compiled --device cuda --check)")
    r.record.say("Each generated kernel as cuBLASLt's epilogue or NVRTC's PTX loaded by the driver "
                 "(docs/compiled.md); the `gpu` lines say which, and what the driver's JIT made of the PTX.")
    check = "compiled programs on the GPU (--check)"
    if not st.gpu_step_runs() or st.device == "cpu":
        skip_without_gpu(r, st, check, "compiled kernels attributed to their fused kernel (trace --mode compiled)",
                         "compiled column on the GPU (CUDA Graph replay)")
        return
    failed, ran, cases = [], 0, []
    for spec, dtype in COMPILED_PROGRAMS:
        name = "compiled_" + re.sub(r"[^a-zA-Z0-9]", "_", f"{spec} {dtype}")
        if not r.have_time(15):
            r.log(f"SKIP compiled {spec} {dtype}: time budget")
            continue
        ran += 1
        rc = r.run(name, 90, [st.strata, "trace"] + words(spec) + ["--mode", "compiled", "--device", "cuda", "--dtype",
                                                                   dtype, "--check", "--repeat", "5", "--warmup", "1",
                                                                   "--json", f"{r.record.work}/json/{name}.json"])
        cases.append(name)
        log = r.log_text(name)
        r.record.say(f"- `{spec}` {dtype}: exit {rc}; " + "; ".join(compiled_gpu_lines(log) or ["no gpu lines"]))
        if rc != 0 or (not r.dry_run and not compiled_gpu_lines(log)):
            failed.append(f"{spec} {dtype} (exit {rc})")
    if r.dry_run:
        r.verdict("skip", check, f"dry run: {ran} CLI runs recorded")
    elif failed:
        r.verdict("fail", check, "failed: " + ", ".join(failed) + " (logs/compiled_*.log)")
    else:
        r.verdict("pass", check, f"{ran} programs compiled for the GPU, --check passing")
    r.write_report()
    r.record.say("\nEach device kernel of the timed calls attributed to the fused kernel that launched it "
                 "(docs/compiled.md, \"Which fused kernel launched a GPU kernel\").")
    analyze(r, "compiled kernels attributed to their fused kernel (trace --mode compiled)",
            checks.compiled_trace_attribution, cases)
    compiled_compares(r, st)


def compiled_compare_name(spec, dtype):
    return "compiled_compare_" + re.sub(r"[^a-zA-Z0-9]", "_", f"{spec} {dtype}")


def compiled_compares(r, st):
    """Part of step 8: compare's compiled column on the GPU, replayed from a CUDA Graph; and the PTX cache:
    the first compiled program traced again, its kernels' PTX now read from the cache."""
    r.record.say("\n### The compiled column on the GPU (strata compare PROGRAM --device cuda --check)")
    cases = []
    for spec, dtype in COMPILED_COMPARES:
        name = compiled_compare_name(spec, dtype)
        if not r.have_time(20):
            r.budget_skip(name)
            continue
        cases.append(name)
        rc = r.run(name, 120, [st.strata, "compare"] + words(spec) + ["--device", "cuda", "--dtype", dtype, "--check",
                                                                     "--repeat", "5", "--warmup", "1", "--json",
                                                                     f"{r.record.work}/json/{name}.json"])
        r.record.say(f"- `compare {spec}` {dtype}: exit {rc}")
        r.record.block("\n".join(l for l in r.log_text(name).splitlines()
                                 if l.startswith(("compiled", "per forward", "wall", "one-time"))))
    spec, dtype = COMPILED_PROGRAMS[0]
    name = "compiled_again_" + re.sub(r"[^a-zA-Z0-9]", "_", f"{spec} {dtype}")
    rc = r.run(name, 90, [st.strata, "trace"] + words(spec) + ["--mode", "compiled", "--device", "cuda", "--dtype",
                                                               dtype, "--repeat", "3", "--warmup", "1"])
    hits = [l for l in compiled_gpu_lines(r.log_text(name)) if " PTX: " in l]
    r.record.say(f"- `{spec}` {dtype} traced again (exit {rc}), PTX cache: " + ("; ".join(hits) or "no PTX lines"))
    analyze(r, "compiled column on the GPU (CUDA Graph replay)", checks.compiled_replay, cases)


# cuBLASLt's candidates for one GEMM shape (Note [Which cuBLASLt algorithm] in
# layers/kernels/cuda/gemm_candidates.h): listed and timed at 4096 (no --check: a float64 reference of a 4096
# GEMM takes minutes on the host), and candidate 1 forced at 1024 with --check.
# Each plan kind once: matmul's DEFAULT-epilogue plan (f32, and tf32's compute type), linear's bias-epilogue
# plan in bf16 (its bias in the output's type) with a forced candidate, every one timed (--time).
GEMM_ALGOS = [("gemm_algos_matmul_4096", "matmul 4096 --algos 8 --time --repeat 20 --warmup 1"),
              ("gemm_algo_1_matmul_1024", "matmul 1024 --algo 1 --check --repeat 20 --warmup 1"),
              ("gemm_algos_matmul_1024_tf32", "matmul 1024 --tf32 --algos 4 --time --check --repeat 20 --warmup 1"),
              ("gemm_algo_1_linear_bf16", "linear 32x768x3072 --dtype bf16 --algos 4 --algo 1 --time --check "
                                          "--repeat 20 --warmup 1")]


def gemm_candidates(r, st):
    """Part of step 8: which library kernel ran, and the others cuBLASLt's heuristic offered."""
    r.record.say("\n### cuBLASLt's candidates (strata trace matmul / linear --algos N --time, --algo 1)")
    check = "cuBLASLt candidates listed and forced (--algos, --algo)"
    if not st.gpu_step_runs() or st.device == "cpu":
        skip_without_gpu(r, st, check)
        return
    failed = []
    for name, args in GEMM_ALGOS:
        if not r.have_time(20):
            r.budget_skip(check)
            return
        rc = r.run(name, 60, [st.strata, "trace"] + words(args) + ["--device", "cuda", "--json",
                                                                   f"{r.record.work}/json/{name}.json"])
        r.record.say(f"strata trace {args} --device cuda: exit {rc}")
        # The table's lines, which strata prints as notes: its title, header, rows and the fastest.
        r.record.block("\n".join(l for l in r.log_text(name).splitlines()
                                  if re.match(r"note: ([ *] +(\d+|#) |.*candidate)", l)))
        if rc != 0:
            failed.append(f"{name} (exit {rc})")
    if failed:
        r.verdict("fail", check, "failed: " + ", ".join(failed) + " (logs/gemm_algo*.log)")
    else:
        r.verdict("pass", check, "candidates listed and timed (matmul 4096 f32, 1024 tf32, linear bf16); candidate 1 "
                                 "run with --check passing (matmul 1024, linear bf16)")
    r.write_report()


def compiled_bench(r, st):
    """Part of step 8: bench/compiled_cuda_bench.cpp, the compiled path's figures against the copy engine's
    bandwidth, cuBLAS's GEMM alone and eager. Built by the test build (step 7)."""
    title = "### The compiled path against memcpy, cuBLAS and eager (bench/compiled_cuda_bench.cpp)"
    check = "compiled path benchmark measured"
    built = r.dry_run or os.path.exists(st.bench("compiled_cuda_bench"))
    if not st.gpu_step_runs():
        r.record.say("\n" + title)
        skip_without_gpu(r, st, check)
        if built:  # what it says without a GPU: "no GPU: skipped" and why, exit 4
            rc = r.run("compiled_cuda_nogpu", 30, [st.bench("compiled_cuda_bench")])
            last = (r.log_text("compiled_cuda_nogpu").splitlines() or [""])[-1]
            r.record.say(f"compiled_cuda_bench without a GPU (exit {rc}): `{last}`")
        return
    if not built:
        r.record.say("\n" + title)
        r.verdict("skip", check, "compiled_cuda_bench was not built (step 7's build)")
        return
    raw_baseline(r, st, "compiled_cuda_bench", "compiled_cuda_bench", [], check, title,
                 "generated kernel vs device-to-device copy; relu_matmul 4096 epilogue vs cuBLAS GEMM and eager")


# ---- 9. The CUDA module ----

def cuda_module(r, st):
    r.section("CUDA module (libstrata_cuda.so)")
    r.record.say("strata links no CUDA library: `libstrata_cuda.so` carries them and is loaded on the first CUDA use "
                 "(docs/build.md).")
    check = "CUDA module (libstrata_cuda.so)"
    if not r.dry_run and not shutil.which("readelf"):
        r.record.say("readelf not found on this machine.")
        r.verdict("skip", check, "not checked: no readelf")
        return
    if not r.have_time(10):
        r.budget_skip(check)
        return
    r.run("readelf_strata", 20, ["readelf", "-d", st.strata])
    r.run("readelf_module", 20, ["readelf", "-d", os.path.join(st.build, "apps", "strata", "libstrata_cuda.so")])
    r.run("devices_module", 30, ["env", "LD_DEBUG=files", st.strata, "devices"])
    if r.dry_run:
        r.verdict("skip", check, "dry run: readelf -d of strata and of the module, LD_DEBUG=files strata devices")
        return
    text, (result, detail) = tables.cuda_module(r.record, bool(st.no_gpu_reason))
    r.record.say(text)
    r.verdict(result, check, detail)


# ---- 10. Sweeps ----

def sweeps(r, st):
    r.section("Sweeps on the GPU (strata sweep)")
    if not st.gpu_step_runs():
        skip_without_gpu(r, st, "sweep runs exit 0")
        return
    # A CPU rehearsal sweeps smaller ranges with few calls, its checks recorded as a rehearsal.
    r.record.rehearsal = st.device == "cpu"
    failures, done = 0, []
    for case, args, need in (CPU_SWEEPS if st.device == "cpu" else GPU_SWEEPS):
        if not r.have_time(need):
            r.budget_skip("sweep " + args.split(" --sweep-budget")[0])
            continue
        rc = r.run(case, 120, [st.strata, "sweep"] + words(args) + ["--device", st.device, "--json",
                                                                    f"{r.record.work}/json/{case}.json", "--plot",
                                                                    f"{r.record.work}/traces/{case}.svg"])
        r.record.say(f"### strata sweep {args} --device {st.device}")
        r.record.block(r.log_text(case))
        if rc != 0:
            failures += 1
            r.record.say(f"exit status {rc}")
        else:
            done.append(case)
        r.write_report()
    if failures:
        r.verdict("fail", "sweep runs exit 0", f"{failures} sweeps failed (logs/sweep_*.log)")
    elif done:
        r.verdict("pass", "sweep runs exit 0", f"{len(done)} sweeps exited 0 (plots in traces/)")
    if done:
        r.record.say("\n### Checks from the sweep JSON")
        analyze(r, "sweep checks (gpu figures at every size; host share at 1024)", checks.sweep, done)
    r.record.rehearsal = False


# ---- 11. The Python package on the GPU ----

def python_package(r, st):
    r.section("Python package on cuda (apps/python, tests/python/cuda_smoke.py)")
    r.record.say(f"The extension built for `{st.python_bin or 'no python3'}`; matmul, relu and gelu on device='cuda' "
                 "against numpy float64.")
    check = "Python package on cuda"
    smoke = ["env", f"PYTHONPATH={st.build}/python", "PYTHONNOUSERSITE=1", st.python_bin or "python3", "-B",
             os.path.join(st.root, "tests", "python", "cuda_smoke.py"), "--json", f"{r.record.work}/json/python_smoke.json"]
    build_python = [st.deps.cmake or "cmake", "--build", st.build, "-j", str(st.jobs), "--target", "strata_python"]
    if not r.dry_run and "strata: Python package ON" not in st.configure_log:
        text, (result, detail) = tables.python_smoke(r.record, bool(st.no_gpu_reason))  # says why it was not built
        r.record.say(text)
        r.verdict(result, check, detail)
    elif not r.have_time(30):
        r.budget_skip(check)
    elif r.dry_run:
        r.run("build_python", 240, build_python)
        r.run("python_smoke", 90, smoke)
        r.verdict("skip", check, "dry run: the extension's build and tests/python/cuda_smoke.py recorded")
    else:
        if r.run("build_python", 240, build_python) == 0 and r.have_time(15):
            r.run("python_smoke", 90, smoke)
        text, (result, detail) = tables.python_smoke(r.record, bool(st.no_gpu_reason))
        r.record.say(text)
        r.verdict(result, check, detail)


# ---- 12. Host tests (CI runs them on every change) ----

def host_tests(r, st):
    r.section("Host test suite (ctest -LE gpu)")
    check = "host tests (ctest -LE gpu)"
    if not r.have_time(90):
        r.record.say("Not run: under 90 s of the budget left. CI runs the host suite on every change.")
        r.verdict("skip", check, "not run: under 90 s left (CI runs it on every change)")
        return
    # A test that dies of a signal prints its native frames and its Python stack (Note [A native backtrace on
    # a crash] in apps/python/native_backtrace.cpp): this machine has no gdb, and a crash seen only here
    # is otherwise a bare "(SEGFAULT)".
    env = dict(r.env, STRATA_NATIVE_BACKTRACE="1", PYTHONFAULTHANDLER="1")
    r.run("ctest_host", 240, ["ctest", "--test-dir", st.build, "-LE", "gpu", "-j", str(st.jobs), "--timeout", "90",
                              "--output-on-failure"], env=env)
    if r.dry_run:
        r.verdict("skip", check, "dry run: not run")
        return
    text, (result, detail) = tables.host_tests(r.record, addr2line)
    r.record.say(text)
    r.verdict(result, check, detail)


def addr2line(library, offset):
    """`function at file:line` for an offset into one of strata's libraries, or "" without addr2line."""
    lines = deps_module.capture(["addr2line", "-f", "-C", "-e", library, offset], 20).strip().splitlines()
    if len(lines) < 2 or lines[0].startswith("??"):
        return ""
    # Without debug info the place is "??:0" or ":?": the function alone then.
    return lines[0] if lines[1].startswith(("?", ":")) else f"{lines[0]} at {lines[1]}"


def run_all(r, st):
    """Every step in order; the build's failure ends the run (nothing after it can run)."""
    machine(r, st)
    if not dependencies(r, st):
        return
    if not build(r, st) and not r.dry_run:
        return
    devices(r, st)
    traces(r, st)
    r.pack_artifacts()
    compares(r, st)
    r.pack_artifacts()
    r.record.rehearsal = False
    for step in (gpu_tests, kernel_paths, compiled_programs, gemm_candidates, compiled_bench, cuda_module, sweeps):
        step(r, st)
    r.pack_artifacts()
    python_package(r, st)
    r.pack_artifacts()
    host_tests(r, st)
