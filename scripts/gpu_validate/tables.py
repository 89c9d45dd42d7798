"""The parsers the run needs and the tables of its later steps (gpu tests, kernel paths through the CLI, the
CUDA module, the Python package, the host tests). Each table function reads the command logs in the work
folder and the Record's timings, and returns (markdown, (result, detail)) for the step to add.
Only the standard library: the GPU machine has python3 but nothing else of ours.
"""
import json
import os
import re

from record import NOT_RUN_FOR_TIME, TIMEOUT_STATUSES, block, cell, read_text


def log_text(record, name):
    return read_text(os.path.join(record.work, "logs", name))


# ---- small parsers the run needs ---------------------------------------------------------------------------

def gpu_info(csv_text):
    """(name, compute capability "9.0") of the first GPU in `nvidia-smi --query-gpu=index,name,compute_cap,...
    --format=csv` output; ("", "") when there is none."""
    lines = [l for l in csv_text.splitlines() if l.strip()]
    if len(lines) < 2 or not lines[0].startswith("index"):
        return "", ""
    fields = [f.strip() for f in lines[1].split(",")]
    if len(fields) < 3:
        return "", ""
    return fields[1], fields[2]


def cuda_archs_for(compute_cap):
    """The CMAKE_CUDA_ARCHITECTURES value that builds for one GPU only: "9.0" -> "90-real"."""
    m = re.fullmatch(r"(\d+)\.(\d+)", compute_cap.strip())
    return f"{m.group(1)}{m.group(2)}-real" if m else "90-real"


HEADER_VERSION = {
    "cudart": ("cuda_runtime_api.h", [r"#define CUDART_VERSION\s+(\d+)"]),
    "cublas": ("cublas_api.h", [r"#define CUBLAS_VER_MAJOR\s+(\d+)", r"#define CUBLAS_VER_MINOR\s+(\d+)",
                                r"#define CUBLAS_VER_PATCH\s+(\d+)"]),
    "cudnn": ("cudnn_version.h", [r"#define CUDNN_MAJOR\s+(\d+)", r"#define CUDNN_MINOR\s+(\d+)",
                                  r"#define CUDNN_PATCHLEVEL\s+(\d+)"]),
    "cupti": ("cupti_version.h", [r"#define CUPTI_API_VERSION\s+(\d+)"]),
}
HEADER_VERSION["cublasLt"] = HEADER_VERSION["cublas"]


def header_version(lib, include_dir):
    if lib not in HEADER_VERSION:
        return ""
    header, patterns = HEADER_VERSION[lib]
    text = read_text(os.path.join(include_dir, header))
    found = [m.group(1) for m in (re.search(p, text) for p in patterns) if m]
    if len(found) != len(patterns):
        return ""
    if lib == "cudart":
        v = int(found[0])
        return f"{v // 1000}.{(v % 1000) // 10}"
    if lib == "cupti":
        return "API " + found[0]
    return ".".join(found)


def libraries_table(rows):
    """rows: (lib, path (resolved), found in, include dir) from dependency discovery; '' path = not found."""
    out = ["| library | using | from | headers | version (headers) |", "|---|---|---|---|---|"]
    for lib, path, where, inc in rows:
        if not path:
            out.append(f"| lib{lib} | **not found** | | | |")
        else:
            out.append(f"| lib{lib} | `{path}` | {where} | `{inc}` | {header_version(lib, inc)} |")
    return "\n".join(out) + "\n"


def ctest_list(text):
    return re.findall(r"^\s*Test\s*#\d+:\s*(\S+)", text, re.M)


# ---- tables of the later steps -------------------------------------------------------------------------------

def gpu_tests(record, tests, no_gpu):
    """Markdown for the gpu tests (one ctest call each, logs/ctest_gpu_<test>.log) and their status line."""
    out = ["| gpu test | result | seconds |", "|---|---|---:|"]
    passed, skipped, failed, not_run = [], [], [], []
    for t in tests:
        timing = record.timing(f"ctest_gpu_{t}")
        if timing is None or timing[1] == NOT_RUN_FOR_TIME:
            not_run.append(t)
            continue
        secs, rc = timing
        log = log_text(record, f"ctest_gpu_{t}.log")
        if "***Skipped" in log:
            m = re.search(r"SKIPPED: (.*)", log)
            result = "skipped: " + (m.group(1)[:150] if m else "no reason printed")
            skipped.append(t)
        elif rc == "0":
            result = "passed"
            passed.append(t)
        else:
            result = f"**FAILED** (exit {rc}; logs/ctest_gpu_{t}.log)"
            failed.append(t)
        out.append(f"| {t} | {cell(result)} | {secs} |")
    text = "\n".join(out) + "\n"
    for t in failed:
        tail = log_text(record, f"ctest_gpu_{t}.log").splitlines()[-40:]
        text += f"\n#### {t} (last 40 lines)\n\n" + block("\n".join(tail))
    total = len(tests)
    names = "".join(" " + t for t in failed)
    if total == 0:
        status = ("fail", "ctest lists no test labelled gpu (logs/ctest_gpu_list.log)")
    elif no_gpu:
        status = (("skip", f"skipped: no GPU ({len(skipped)} of {total} tests skipped themselves)") if not failed
                  else ("fail", f"{len(failed)} of {total} failed even without a GPU:{names}"))
    elif failed or skipped:
        status = ("fail", f"{len(passed)} passed, {len(failed)} failed,{names} {len(skipped)} skipped on a GPU "
                          f"machine, of {total}")
    elif not_run:
        status = ("skip", f"time budget: {len(passed)} of {total} passed; the rest not run")
    else:
        status = ("pass", f"all {total} passed")
    return text, status


def check_line(log):
    for line in log.splitlines():
        if line.startswith("check"):
            return line
    lines = [l for l in log.splitlines() if l.strip()]
    return lines[-1] if lines else "(no output)"


# The key path an autocast run must take on the GPU (docs/autocast.md): the casts before Autograd records.
AUTOCAST_KEYS = "keys: Autocast > Autograd > CUDA"


def kernel_paths(record, cases):
    """cases: (log name, op spec, dtype). Markdown table of the `strata trace ... --check` runs, status line.
    A dtype "autocast-bf16" (--dtype f32 --autocast bf16 --requires-grad) must also show AUTOCAST_KEYS."""
    out = ["| op | dtype | check line | exit |", "|---|---|---|---|"]
    n_run, failures, not_run = 0, 0, 0
    for name, spec, dtype in cases:
        timing = record.timing(name)
        if timing is None or timing[1] == NOT_RUN_FOR_TIME:
            not_run += 1
            continue
        rc = timing[1]
        log = log_text(record, name + ".log")
        line = check_line(log)
        wrong_keys = dtype.startswith("autocast") and AUTOCAST_KEYS not in log
        if wrong_keys:
            line += f" (but not '{AUTOCAST_KEYS}')"
        out.append(f"| {spec} | {dtype} | {cell(line)} | {rc} |")
        n_run += 1
        failures += rc != "0" or wrong_keys
    if failures:
        status = ("fail", f"{failures} of {n_run} CLI runs failed")
    elif not_run:
        status = ("skip", f"time budget: {n_run} CLI runs within tolerance, {not_run} not run")
    else:
        status = ("pass", f"{n_run} CLI runs within tolerance")
    return "\n".join(out) + "\n", status


# The CUDA libraries strata's executable must not need: libstrata_cuda.so carries them (docs/build.md).
CUDA_LIBRARY = re.compile(r"\[(lib(?:cuda|cudart|cublas|cublasLt|cudnn\w*|cupti|nvrtc|nvJitLink|nvperf\w*)\.so[^\]]*)\]")
MODULE_LIBRARIES = ("cudart", "cublas", "cublasLt", "cudnn", "cupti")


def needed(readelf_text):
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", readelf_text)


def cuda_module(record, no_gpu):
    """`readelf -d strata` (logs/readelf_strata.log), `readelf -d libstrata_cuda.so` (logs/readelf_module.log)
    and `LD_DEBUG=files strata devices` (logs/devices_module.log): markdown and the status line."""
    strata_needed = needed(log_text(record, "readelf_strata.log"))
    module_needed = needed(log_text(record, "readelf_module.log"))
    devices = log_text(record, "devices_module.log")
    problems = []
    cuda_in_strata = [n for n in strata_needed if CUDA_LIBRARY.fullmatch(f"[{n}]")]
    if not strata_needed:
        problems.append("readelf -d strata listed no NEEDED entry (logs/readelf_strata.log)")
    elif cuda_in_strata:
        problems.append("strata needs " + ", ".join(cuda_in_strata))
    module_libs = [lib for lib in MODULE_LIBRARIES if any(n.startswith(f"lib{lib}.so") for n in module_needed)]
    if not module_needed:
        problems.append("readelf -d libstrata_cuda.so listed no NEEDED entry (logs/readelf_module.log)")
    loaded = re.search(r"file=(\S*libstrata_cuda\.so)\s.*dynamically loaded by", devices)
    not_loaded = re.search(r"^cuda: none: (the CUDA module.*)$", devices, re.M)
    gpu = re.search(r"^(cuda:0: .*)$", devices, re.M)
    if not_loaded:
        problems.append(not_loaded.group(1))
    elif not loaded:
        problems.append("strata devices did not load libstrata_cuda.so (no dlopen in logs/devices_module.log)")
    if not gpu and not no_gpu:
        problems.append("strata devices reported no cuda:0")
    out = [f"- `readelf -d strata`: NEEDED {', '.join(strata_needed) or '(none)'}",
           f"- `readelf -d libstrata_cuda.so`: NEEDED {', '.join(module_needed) or '(none)'}",
           "- `strata devices` (LD_DEBUG=files): " + (f"loaded `{loaded.group(1)}`" if loaded else "module not loaded")
           + (f"; {gpu.group(1)}" if gpu else "")]
    text = "\n".join(out) + "\n"
    if problems:
        status = ("fail", "; ".join(problems))
    else:
        detail = (f"strata needs no CUDA library; the module needs {', '.join(module_libs) or 'none of cudart/cuBLAS/cuDNN/CUPTI'}"
                  f"; loaded from {loaded.group(1)}")
        if gpu:
            status = ("pass", detail + "; " + ",".join(gpu.group(1).split(",")[:3]))
        else:
            status = ("skip", "no GPU: " + detail + "; no cuda:0 to report")
    return text, status


def python_smoke(record, no_gpu):
    """The Python package on cuda: what configure said (meta python_package), the extension's build
    (build_python) and tests/python/cuda_smoke.py (json/python_smoke.json, logs/python_smoke.log)."""
    meta = record.meta
    configured = meta.get("python_package", "")
    text = f"- configure: {configured or 'no Python package line'}\n"
    if meta.get("python_configure_failed"):
        return text, ("fail", "configure with the Python package failed (logs/configure_with_python.log); "
                              "configured without it")
    if not configured.startswith("strata: Python package ON"):
        return text, ("skip", "not built on this machine: " + (configured or "configure said nothing about it"))
    build = record.timing("build_python")
    if build is None or build[1] in (NOT_RUN_FOR_TIME,) + TIMEOUT_STATUSES:
        return text + "- build: not run or stopped (time budget)\n", ("skip", "time budget: the extension was not built")
    if build[1] != "0":
        errors = [l for l in log_text(record, "build_python.log").splitlines()
                  if re.search(r"error|FAILED", l)][:20]
        text += f"- build: **failed** (exit {build[1]}, logs/build_python.log)\n" + (block("\n".join(errors)) if errors else "")
        return text, ("fail", f"the extension did not build (exit {build[1]}, logs/build_python.log)")
    text += f"- build: the extension built in {build[0]} s\n"
    smoke = record.timing("python_smoke")
    if smoke is None or smoke[1] == NOT_RUN_FOR_TIME:
        return text, ("skip", "time budget: the smoke check did not run")
    if smoke[1] in TIMEOUT_STATUSES:
        return text, ("fail", f"tests/python/cuda_smoke.py stopped after {smoke[0]} s (logs/python_smoke.log)")
    doc = {}
    try:
        with open(os.path.join(record.work, "json", "python_smoke.json")) as f:
            doc = json.load(f)
    except (OSError, ValueError):
        pass
    if doc:
        text += (f"- python {doc.get('python', '?')} (`{doc.get('executable', '?')}`), numpy {doc.get('numpy', '?')}, "
                 f"strata from `{doc.get('strata', '?')}`\n\n")
    cases = doc.get("cases", [])
    if cases:
        text += "| op | dtype | shape | relative error | tolerance | result |\n|---|---|---|---:|---:|---|\n"
        for c in cases:
            err = f"{c['error']:.3g}" if isinstance(c.get("error"), (int, float)) else "-"
            result = "ok" if c.get("ok") else "**FAILED**" + (f": {c['problem']}" if c.get("problem") else "")
            text += (f"| {cell(c.get('op', '?'))} | {cell(c.get('dtype', '?'))} | {cell(c.get('shape', ''))} | {err} | "
                     f"{c.get('tolerance', '-')} | {cell(result)} |\n")
    code = doc.get("exit", smoke[1])
    error = doc.get("error") or "; ".join(log_text(record, "python_smoke.log").splitlines()[-3:])
    if str(code) == "0" and smoke[1] == "0":
        return text, ("pass", f"{len(cases)} ops on {doc.get('device', 'cuda')} within tolerance of numpy float64 "
                              f"(python {doc.get('python', '?')})")
    if str(code) == "3" and no_gpu:
        return text, ("skip", f"no GPU: {error}")
    text += "\n" + block("\n".join(log_text(record, "python_smoke.log").splitlines()[-20:]))
    failed = [f"{c.get('op')} {c.get('dtype')}" for c in cases if not c.get("ok")]
    return text, ("fail", (f"{len(failed)} of {len(cases)} failed: {', '.join(failed)}" if failed else
                           f"exit {code}: {error}") + " (logs/python_smoke.log)")


# A test that died of a signal is listed by ctest as (SEGFAULT), (Child aborted), (Subprocess aborted),
# (ILLEGAL), (BUS_ERROR), (OTHER_FAULT) or ***Exception; a failure as (Failed), a hang as (Timeout).
FAILED_TEST = re.compile(r"\((Failed|Timeout|SEGFAULT|ILLEGAL|BUS_ERROR|OTHER_FAULT|Child aborted|Subprocess aborted)\)|Not Run")

# One frame of backtrace_symbols_fd(3), as the extension writes it on a crash (Note [A native backtrace on
# a crash] in apps/python/native_backtrace.cpp): `library(symbol+0xoff)[0xaddr]` or `library(+0xoff)[...]`,
# after ctest's optional `N: ` prefix.
NATIVE_FRAME = re.compile(r"^(?:\d+: )?(/\S+?)\(([^()]*)\)\[0x[0-9a-f]+\]\s*$")


def native_backtraces(log, resolve=None):
    """The native backtraces a crashed test wrote, each frame in strata's own libraries (the extension, the
    CUDA module) resolved to its function by `resolve(library, offset)` (steps.py: addr2line), when given:
    what the next session needs to find a crash seen only here."""
    out, inside = [], False
    for line in log.splitlines():
        if "strata: fatal signal" in line:
            inside = True
            out.append(line.split("strata: ", 1)[1])
            continue
        if "strata: end of native backtrace" in line:
            inside = False
            continue
        found = NATIVE_FRAME.match(line) if inside else None
        if not found:
            continue
        library, where = found.groups()
        resolved = ""
        if resolve and where.startswith("+0x") and re.search(r"/_strata[.]|/libstrata", library):
            resolved = resolve(library, where[1:])
        out.append(f"  {os.path.basename(library)}({where})" + (f"  {resolved}" if resolved else ""))
    return out


def host_tests(record, resolve=None):
    log = log_text(record, "ctest_host.log")
    timing = record.timing("ctest_host")
    summary = ([l for l in log.splitlines() if re.search(r"tests passed|tests failed", l)] or ["no ctest summary"])[-1]
    text = f"{summary} (logs/ctest_host.log)\n"
    if timing and timing[1] == "0":
        return text, ("pass", summary)
    bad = [l for l in log.splitlines() if FAILED_TEST.search(l)][:30]
    if bad:
        text += block("\n".join(bad))
    frames = native_backtraces(log, resolve)
    if frames:
        text += "Native backtraces of the tests that died of a signal (STRATA_NATIVE_BACKTRACE=1):\n"
        text += block("\n".join(frames[:120]))
    return text, ("fail", f"{summary} (logs/ctest_host.log)")
