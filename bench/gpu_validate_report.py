#!/usr/bin/env python3
"""The report of scripts/gpu-validate: what it computes from logs and how it prints them.

scripts/gpu-validate runs commands; everything it records goes into files in its work folder WORK, and
this program turns them into the markdown report (and into a few tables the run appends to the body):

    WORK/meta.tsv      key<TAB>value, appended; the last value of a key wins (stamp, commit, budget, start, ...)
    WORK/status.tsv    step<TAB>pass|fail|skip|info<TAB>detail: one line per check, the report's summary table
                       (gpu_validate_analyze.py appends its lines here too)
    WORK/body.md       the report's sections, appended by the run
    WORK/timings.tsv   command<TAB>seconds<TAB>exit status (or why it did not run)
    WORK/logs/NAME.log every command's output

    gpu_validate_report.py render WORK REPORT [--final]   write REPORT (atomically); with --final, decide the
                                                          result, print it and exit with the run's status
    gpu_validate_report.py gpu-info NVIDIA_SMI_CSV        the first GPU's name, compute capability and the
                                                          CMAKE_CUDA_ARCHITECTURES for it, one a line
    gpu_validate_report.py header-version LIB INCLUDE_DIR the version LIB's headers declare
    gpu_validate_report.py libraries TSV                  the CUDA library table (TSV from gpu-validate-deps)
    gpu_validate_report.py ctest-list LOG                 the test names `ctest -N` printed
    gpu_validate_report.py gpu-tests WORK [--no-gpu] TEST...   the gpu test table; appends its status line
    gpu_validate_report.py kernel-paths WORK NAME|OP SPEC|DTYPE...   the CLI --check table; its status line
    gpu_validate_report.py cuda-module WORK [--no-gpu]   libstrata_cuda.so: readelf of strata and of the module,
                                                          the module loaded by `strata devices`; its status line
    gpu_validate_report.py python-smoke WORK [--no-gpu]  the Python package on cuda (tests/python/cuda_smoke.py's
                                                          JSON); its status line
    gpu_validate_report.py host-tests WORK               the host suite's summary; its status line

Only the standard library: the GPU machine has python3 but nothing else of ours.
"""
import json
import os
import re
import sys
import time

RESULT_CELL = {"pass": "pass", "fail": "**FAIL**", "skip": "skipped", "info": "info"}
# Exit statuses of scripts/gpu-validate (docs/validation/README.md).
EXIT_PASSED, EXIT_FAILED, EXIT_NO_GPU, EXIT_OUT_OF_TIME = 0, 1, 3, 5
# What `run` in scripts/gpu-validate writes as the exit status of a command that did not run or was stopped.
NOT_RUN_FOR_TIME = "not run (time budget)"
TIMEOUT_STATUSES = ("124", "137")


def read_text(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def read_tsv(path, fields):
    """Rows of a tab-separated file with at least `fields` columns (the last one keeps any further tabs)."""
    rows = []
    for line in read_text(path).splitlines():
        if not line.strip():
            continue
        parts = line.split("\t", fields - 1)
        rows.append(parts + [""] * (fields - len(parts)))
    return rows


def read_meta(work):
    meta = {}
    for key, value in read_tsv(os.path.join(work, "meta.tsv"), 2):
        meta[key] = value
    return meta


def add_status(work, step, result, detail):
    with open(os.path.join(work, "status.tsv"), "a") as f:
        f.write(f"{step}\t{result}\t{clean(detail)}\n")


def clean(text):
    return " ".join(str(text).replace("\t", " ").split("\n")).strip()


def cell(text):
    return clean(text).replace("|", "\\|")


def block(text):
    return "```\n" + text + ("" if text.endswith("\n") or not text else "\n") + "```\n"


# ---- the result of a run ---------------------------------------------------------------------------------

def ran_out_of_time(statuses, timings):
    if any(detail.startswith("time budget") for _, result, detail in statuses if result == "skip"):
        return True
    return any(rc in TIMEOUT_STATUSES or rc == NOT_RUN_FOR_TIME for _, _, rc in timings)


def decide(meta, statuses, timings, elapsed_s):
    """(result line, exit status) of a finished or interrupted run."""
    if meta.get("interrupted"):
        return f"INTERRUPTED by a signal after {elapsed_s} s: later steps did not run", EXIT_FAILED
    if meta.get("dry_run"):
        return "DRY RUN: no command was run; the steps below say what would have run", EXIT_PASSED
    if any(result == "fail" for _, result, _ in statuses):
        return "SOME STEPS FAILED (see below)", EXIT_FAILED
    if meta.get("no_gpu_reason"):
        return (f"NOT VALIDATED: no usable GPU ({meta['no_gpu_reason']}); the build and the non-GPU steps ran",
                EXIT_NO_GPU)
    if ran_out_of_time(statuses, timings):
        return "INCOMPLETE: the time budget ran out before every step ran (nothing failed)", EXIT_OUT_OF_TIME
    return "every step passed", EXIT_PASSED


def render(work, now=None, final=None):
    """The whole report as text. `final` is the result line of a finished run; None while it runs."""
    meta = read_meta(work)
    statuses = read_tsv(os.path.join(work, "status.tsv"), 3)
    timings = read_tsv(os.path.join(work, "timings.tsv"), 3)
    now = time.time() if now is None else now
    elapsed = int(now - float(meta.get("start", now)))
    budget = meta.get("budget", "?")
    result = final or (f"IN PROGRESS: the run stopped here if this line remains ({elapsed} s into a "
                       f"{budget} s budget)")
    out = [f"# strata GPU validation, {meta.get('stamp', '?')}", ""]
    out.append(f"- commit: `{meta.get('commit', 'unknown')}` (from {meta.get('commit_from', '?')})")
    out.append(f"- machine: {meta.get('machine', '?')}, {meta.get('gpu_name') or 'GPU not identified'}")
    # README.md's and `strata devices`' status line quotes this line of the newest committed report
    # (cmake/ValidationStatus.cmake).
    out.append(f"- device: {meta.get('gpu_name') or 'no GPU identified'}")
    if meta.get("mode"):
        out.append(f"- mode: {meta['mode']}")
    out.append(f"- budget: {budget} s, used {elapsed} s; CUDA archs built: "
               f"`{meta.get('archs') or 'not configured yet'}`")
    out.append(f"- artifacts: `{meta.get('artifacts', '?')}` ({meta.get('artifact_note', 'not written yet')}); "
               f"work folder on the machine: `{meta.get('work', work)}`")
    out.append(f"- result: {result}")
    out += ["", "| check | result | detail |", "|---|---|---|"]
    for step, res, detail in statuses:
        out.append(f"| {cell(step)} | {RESULT_CELL.get(res, 'info')} | {cell(detail)} |")
    text = "\n".join(out) + "\n"
    text += read_text(os.path.join(work, "body.md"))
    if timings:
        text += "\n## Step timings\n\n| command | seconds | exit |\n|---|---:|---:|\n"
        text += "".join(f"| {cell(n)} | {s} | {cell(rc)} |\n" for n, s, rc in timings)
    return text


def write_atomically(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def cmd_render(args):
    if len(args) < 2:
        return usage()
    work, report = args[0], args[1]
    if "--final" not in args[2:]:
        write_atomically(report, render(work))
        return 0
    meta = read_meta(work)
    now = time.time()
    elapsed = int(now - float(meta.get("start", now)))
    line, code = decide(meta, read_tsv(os.path.join(work, "status.tsv"), 3),
                        read_tsv(os.path.join(work, "timings.tsv"), 3), elapsed)
    write_atomically(report, render(work, now, final=line))
    print(line)
    return code


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


def libraries_table(tsv_path):
    """gpu-validate-deps writes lib<TAB>path (resolved)<TAB>found in<TAB>include dir; '' path = not found."""
    out = ["| library | using | from | headers | version (headers) |", "|---|---|---|---|---|"]
    for lib, path, where, inc in read_tsv(tsv_path, 4):
        if not path:
            out.append(f"| lib{lib} | **not found** | | | |")
        else:
            out.append(f"| lib{lib} | `{path}` | {where} | `{inc}` | {header_version(lib, inc)} |")
    return "\n".join(out) + "\n"


def ctest_list(text):
    return re.findall(r"^\s*Test\s*#\d+:\s*(\S+)", text, re.M)


def timing_of(work, name):
    """(seconds, exit status) of the command the run logged as `name`; None when it did not run."""
    found = None
    for n, secs, rc in read_tsv(os.path.join(work, "timings.tsv"), 3):
        if n == name:
            found = (secs, rc)  # the last run of that name
    return found


# ---- tables of the later steps -------------------------------------------------------------------------------

def gpu_tests(work, tests, no_gpu):
    """Markdown for the gpu tests (one ctest call each, logs/ctest_gpu_<test>.log) and their status line."""
    out = ["| gpu test | result | seconds |", "|---|---|---:|"]
    passed, skipped, failed, not_run = [], [], [], []
    for t in tests:
        timing = timing_of(work, f"ctest_gpu_{t}")
        if timing is None or timing[1] == NOT_RUN_FOR_TIME:
            not_run.append(t)
            continue
        secs, rc = timing
        log = read_text(os.path.join(work, "logs", f"ctest_gpu_{t}.log"))
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
        tail = read_text(os.path.join(work, "logs", f"ctest_gpu_{t}.log")).splitlines()[-40:]
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


def kernel_paths(work, cases):
    """cases: (log name, op spec, dtype). Markdown table of the `strata trace ... --check` runs, status line.
    A dtype "autocast-bf16" (--dtype f32 --autocast bf16 --requires-grad) must also show AUTOCAST_KEYS."""
    out = ["| op | dtype | check line | exit |", "|---|---|---|---|"]
    n_run, failures, not_run = 0, 0, 0
    for name, spec, dtype in cases:
        timing = timing_of(work, name)
        if timing is None or timing[1] == NOT_RUN_FOR_TIME:
            not_run += 1
            continue
        rc = timing[1]
        log = read_text(os.path.join(work, "logs", name + ".log"))
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


def cuda_module(work, no_gpu):
    """`readelf -d strata` (logs/readelf_strata.log), `readelf -d libstrata_cuda.so` (logs/readelf_module.log)
    and `LD_DEBUG=files strata devices` (logs/devices_module.log): markdown and the status line."""
    strata_needed = needed(read_text(os.path.join(work, "logs", "readelf_strata.log")))
    module_needed = needed(read_text(os.path.join(work, "logs", "readelf_module.log")))
    devices = read_text(os.path.join(work, "logs", "devices_module.log"))
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
           f"- `strata devices` (LD_DEBUG=files): " + (f"loaded `{loaded.group(1)}`" if loaded else "module not loaded")
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


def python_smoke(work, no_gpu):
    """The Python package on cuda: what configure said (meta python_package), the extension's build
    (build_python) and tests/python/cuda_smoke.py (json/python_smoke.json, logs/python_smoke.log)."""
    meta = read_meta(work)
    configured = meta.get("python_package", "")
    text = f"- configure: {configured or 'no Python package line'}\n"
    if meta.get("python_configure_failed"):
        return text, ("fail", "configure with the Python package failed (logs/configure_with_python.log); "
                              "configured without it")
    if not configured.startswith("strata: Python package ON"):
        return text, ("skip", "not built on this machine: " + (configured or "configure said nothing about it"))
    build = timing_of(work, "build_python")
    if build is None or build[1] in (NOT_RUN_FOR_TIME,) + TIMEOUT_STATUSES:
        return text + "- build: not run or stopped (time budget)\n", ("skip", "time budget: the extension was not built")
    if build[1] != "0":
        errors = [l for l in read_text(os.path.join(work, "logs", "build_python.log")).splitlines()
                  if re.search(r"error|FAILED", l)][:20]
        text += f"- build: **failed** (exit {build[1]}, logs/build_python.log)\n" + (block("\n".join(errors)) if errors else "")
        return text, ("fail", f"the extension did not build (exit {build[1]}, logs/build_python.log)")
    text += f"- build: the extension built in {build[0]} s\n"
    smoke = timing_of(work, "python_smoke")
    if smoke is None or smoke[1] == NOT_RUN_FOR_TIME:
        return text, ("skip", "time budget: the smoke check did not run")
    if smoke[1] in TIMEOUT_STATUSES:
        return text, ("fail", f"tests/python/cuda_smoke.py stopped after {smoke[0]} s (logs/python_smoke.log)")
    doc = {}
    try:
        with open(os.path.join(work, "json", "python_smoke.json")) as f:
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
    error = doc.get("error") or "; ".join(read_text(os.path.join(work, "logs", "python_smoke.log")).splitlines()[-3:])
    if str(code) == "0" and smoke[1] == "0":
        return text, ("pass", f"{len(cases)} ops on {doc.get('device', 'cuda')} within tolerance of numpy float64 "
                              f"(python {doc.get('python', '?')})")
    if str(code) == "3" and no_gpu:
        return text, ("skip", f"no GPU: {error}")
    text += "\n" + block("\n".join(read_text(os.path.join(work, "logs", "python_smoke.log")).splitlines()[-20:]))
    failed = [f"{c.get('op')} {c.get('dtype')}" for c in cases if not c.get("ok")]
    return text, ("fail", (f"{len(failed)} of {len(cases)} failed: {', '.join(failed)}" if failed else
                           f"exit {code}: {error}") + " (logs/python_smoke.log)")


def host_tests(work):
    log = read_text(os.path.join(work, "logs", "ctest_host.log"))
    timing = timing_of(work, "ctest_host")
    summary = ([l for l in log.splitlines() if re.search(r"tests passed|tests failed", l)] or ["no ctest summary"])[-1]
    text = f"{summary} (logs/ctest_host.log)\n"
    if timing and timing[1] == "0":
        return text, ("pass", summary)
    bad = [l for l in log.splitlines() if re.search(r"\(Failed\)|\(Timeout\)|Not Run", l)][:30]
    if bad:
        text += block("\n".join(bad))
    return text, ("fail", f"{summary} (logs/ctest_host.log)")


# ---- command line ----------------------------------------------------------------------------------------------

def usage():
    print(__doc__, file=sys.stderr)
    return 2


def main(argv):
    if len(argv) < 2:
        return usage()
    cmd, args = argv[1], argv[2:]
    if cmd == "render":
        return cmd_render(args)
    if cmd == "gpu-info" and len(args) == 1:
        name, cc = gpu_info(read_text(args[0]))
        print(f"{name}\n{cc}\n{cuda_archs_for(cc)}")
        return 0
    if cmd == "header-version" and len(args) == 2:
        print(header_version(args[0], args[1]))
        return 0
    if cmd == "libraries" and len(args) == 1:
        sys.stdout.write(libraries_table(args[0]))
        return 0
    if cmd == "ctest-list" and len(args) == 1:
        print("\n".join(ctest_list(read_text(args[0]))))
        return 0
    if cmd == "gpu-tests" and args:
        work, rest = args[0], args[1:]
        no_gpu = "--no-gpu" in rest
        text, (result, detail) = gpu_tests(work, [t for t in rest if t != "--no-gpu"], no_gpu)
        sys.stdout.write(text)
        add_status(work, "gpu tests (ctest -L gpu)", result, detail)
        return 0
    if cmd == "kernel-paths" and args:
        cases = [tuple((c.split("|") + ["", ""])[:3]) for c in args[1:]]
        text, (result, detail) = kernel_paths(args[0], cases)
        sys.stdout.write(text)
        add_status(args[0], "kernel paths through the CLI (--check)", result, detail)
        return 0
    if cmd in ("cuda-module", "python-smoke") and args:
        fn, check = {"cuda-module": (cuda_module, "CUDA module (libstrata_cuda.so)"),
                     "python-smoke": (python_smoke, "Python package on cuda")}[cmd]
        text, (result, detail) = fn(args[0], "--no-gpu" in args[1:])
        sys.stdout.write(text)
        add_status(args[0], check, result, detail)
        return 0
    if cmd == "host-tests" and len(args) == 1:
        text, (result, detail) = host_tests(args[0])
        sys.stdout.write(text)
        add_status(args[0], "host tests (ctest -LE gpu)", result, detail)
        return 0
    return usage()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
