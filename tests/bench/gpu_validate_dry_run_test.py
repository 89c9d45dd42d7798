#!/usr/bin/env python3
"""scripts/gpu-validate --dry-run end to end: the steps in their order, the report and the tarball written,
the budget honoured. Needs python3 and the usual tools; no GPU, no build (the dry run builds nothing).
Dependency discovery runs for real against an empty .deps, so what it finds depends on the machine and is
not asserted here."""
import glob
import os
import subprocess
import sys
import tarfile
import unittest

from gpu_validate_test_support import ROOT, WorkFolder

SCRIPT = os.path.join(ROOT, "scripts", "gpu-validate")
SECTIONS = ["1. Machine", "2. Dependencies", "3. Build", "4. Devices", "5. Traces", "6. Eager vs CUDA Graph",
            "7. GPU test suite", "8. Kernel paths through the CLI", "9. CUDA module", "10. Sweeps on the GPU",
            "11. Python package on cuda", "12. Host test suite"]


def read(path):
    with open(path) as f:
        return f.read()


def dry_run(scratch, *extra):
    deps = os.path.join(scratch, "deps")
    os.makedirs(deps, exist_ok=True)
    env = dict(os.environ, PYTHON=sys.executable, STRATA_COMMIT="test-commit")
    env.pop("OUT", None)
    proc = subprocess.run([sys.executable, SCRIPT, "--dry-run", "--out", os.path.join(scratch, "out"), "--build",
                           os.path.join(scratch, "build"), "--deps", deps, "--jobs", "1", *extra],
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=240)
    reports = glob.glob(os.path.join(scratch, "out", "gpu-validate-*.md"))
    return proc, reports


class DryRun(unittest.TestCase):
    def setUp(self):
        self.scratch = WorkFolder()

    def tearDown(self):
        self.scratch.remove()

    def test_walks_every_step_and_writes_the_report(self):
        proc, reports = dry_run(self.scratch.path)
        self.assertEqual(proc.returncode, 0, proc.stdout[-3000:])
        self.assertEqual(len(reports), 1, proc.stdout[-3000:])
        text = read(reports[0])
        self.assertIn("- commit: `test-commit` (from STRATA_COMMIT)", text)
        self.assertIn("- result: DRY RUN", text)
        self.assertNotIn("IN PROGRESS", text)
        at = [text.find("\n## " + s) for s in SECTIONS]
        self.assertTrue(all(i > 0 for i in at), list(zip(SECTIONS, at)))
        self.assertEqual(at, sorted(at), "sections out of order")
        for check in ("build: strata and the raw baselines", "traces exit 0", "raw library calls measured",
                      "compare runs exit 0", "raw graph floor measured", "gpu tests (ctest -L gpu)",
                      "kernel paths through the CLI (--check)", "compiled programs on the GPU (--check)",
                      "compiled column on the GPU (CUDA Graph replay)",
                      "compiled kernels attributed to their fused kernel (trace --mode compiled)",
                      "cuBLASLt candidates listed and forced (--algos, --algo)", "compiled path benchmark measured",
                      "CUDA module (libstrata_cuda.so)",
                      "sweep runs exit 0", "sweep checks (gpu figures at every size; host share at 1024)",
                      "Python package on cuda", "host tests (ctest -LE gpu)"):
            self.assertIn(f"\n| {check} | skipped | dry run", text)
        # The commands it would have run, with the shapes the checks need.
        for command in ("trace matmul 1024 --tf32 --device cuda", "trace conv 32x64x56x56 --kernel 3 --pad 1",
                        "--no-device-timing", "compare relu 1048576 --device cuda --ops-per-graph 16",
                        "raw_cuda_bench --markdown", "raw_graph_bench --markdown", "the checks of `traces` would be computed",
                        # the steps added for the GPU paths of later issues
                        "trace gelu 1048576 --device cuda --dtype f32 --check",
                        "trace gelu 1048576 --device cuda --dtype bf16 --check",
                        "trace linear 32x768x3072 --requires-grad --backward --device cuda --dtype f32 --check",
                        "trace matmul 1024 --device cuda --dtype f32 --autocast bf16 --requires-grad --check",
                        "trace matmul 1024 --device cuda --dtype f32 --autocast f16 --requires-grad --check",
                        "trace relu_matmul 1024 --mode compiled --device cuda --dtype f32 --check",
                        "--mode compiled --device cuda --dtype f32 --check --repeat 5 --warmup 1 --json ",
                        "the checks of `compiled_trace_attribution` would be computed",
                        "trace gelu_tanh 1048577 --mode compiled --device cuda --dtype f64 --check",
                        "compare relu_matmul 1024 --device cuda --dtype f32 --check",
                        "compare gelu_tanh 1048577 --device cuda --dtype f32 --check",
                        "trace relu_matmul 1024 --mode compiled --device cuda --dtype f32 --repeat 3",
                        "trace matmul 4096 --algos 8 --time --repeat 20 --warmup 1 --device cuda --json ",
                        "trace matmul 1024 --algo 1 --check --repeat 20 --warmup 1 --device cuda",
                        "trace matmul 1024 --tf32 --algos 4 --time --check --repeat 20 --warmup 1 --device cuda",
                        "trace linear 32x768x3072 --dtype bf16 --algos 4 --algo 1 --time --check --repeat 20 "
                        "--warmup 1 --device cuda",
                        "bench/compiled_cuda_bench --json ",
                        "| readelf_strata | 0 | dry run: readelf -d ", "/apps/strata/libstrata_cuda.so |",
                        "dry run: env LD_DEBUG=files ", "sweep matmul 16:4096 --sweep-budget 20 --device cuda --json ",
                        "sweep relu 1k:16M --compare", "--plot ", "the checks of `sweep` would be computed",
                        f"-DSTRATA_PYTHON=AUTO -DPython3_EXECUTABLE={sys.executable}", "--target strata_python",
                        "tests/python/cuda_smoke.py --json "):
            self.assertIn(command, text)
        tarballs = glob.glob(os.path.join(self.scratch.path, "out", "*-artifacts.tar.gz"))
        self.assertEqual(len(tarballs), 1)
        with tarfile.open(tarballs[0]) as t:
            names = t.getnames()
        self.assertIn("status.tsv", names)
        self.assertIn("logs/configure.log", names)

    def test_a_short_budget_skips_the_later_steps(self):
        proc, reports = dry_run(self.scratch.path, "--budget", "30")
        self.assertEqual(len(reports), 1, proc.stdout[-3000:])
        text = read(reports[0])
        self.assertRegex(text, r"\| trace matmul_1024_f32 \| skipped \| time budget: \d+ s left of 30 s \|")
        self.assertRegex(text, r"\| compare_relu_1048576_k16 \| skipped \| time budget")
        for check in ("CUDA module \\(libstrata_cuda.so\\)", "sweep matmul 16:4096", "sweep relu 1k:16M --compare",
                      "Python package on cuda"):
            self.assertRegex(text, r"\| " + check + r" \| skipped \| time budget: \d+ s left of 30 s \|")
        self.assertIn("- result: DRY RUN", text)

    def test_bad_options_are_usage_errors(self):
        for bad in (["--budget", "x"], ["--budget", "0"], ["--dry-run", "--rehearse-on-cpu"], ["--frobnicate"]):
            proc = subprocess.run([sys.executable, SCRIPT, *bad], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True, timeout=60)
            self.assertEqual(proc.returncode, 2, (bad, proc.stdout))


if __name__ == "__main__":
    unittest.main()
