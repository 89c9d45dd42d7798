#!/usr/bin/env python3
"""bench/gpu_validate_report.py: the report scripts/gpu-validate writes, from the files of its work folder."""
import os
import unittest

from gpu_validate_test_support import WorkFolder
import gpu_validate_report as report

NVIDIA_SMI = """index, name, compute_cap, driver_version, memory.total [MiB], clocks.max.sm [MHz], clocks.max.mem [MHz], power.limit [W]
0, NVIDIA H200, 9.0, 580.65.06, 143771 MiB, 1980 MHz, 3201 MHz, 700.00 W
"""


class Work(unittest.TestCase):
    def setUp(self):
        self.work = WorkFolder()
        self.work.write("meta.tsv", "stamp\t2026-11-23-070000Z\nstart\t1000\nbudget\t540\ncommit\tabc123\n"
                                    "commit_from\tgit\nmachine\tgpu-box\ngpu_name\tNVIDIA H200\n")

    def tearDown(self):
        self.work.remove()

    def status(self, step, result, detail):
        self.work.write("status.tsv", f"{step}\t{result}\t{detail}\n")

    def timing(self, name, secs, rc):
        self.work.write("timings.tsv", f"{name}\t{secs}\t{rc}\n")


class Render(Work):
    def test_header_summary_body_and_timings(self):
        self.status("toolchain and CUDA libraries", "pass", "cmake 3.25.1")
        self.status("kernel time matmul_1024_f32", "fail", "strata 10.5 us | raw 10.0 us")
        self.work.write("body.md", "\n## 1. Machine\n\nsome text\n")
        self.timing("configure", 4, 0)
        text = report.render(self.work.path, now=1100)
        self.assertTrue(text.startswith("# strata GPU validation, 2026-11-23-070000Z\n"))
        self.assertIn("- commit: `abc123` (from git)", text)
        self.assertIn("- machine: gpu-box, NVIDIA H200", text)
        self.assertIn("- budget: 540 s, used 100 s; CUDA archs built: `not configured yet`", text)
        self.assertIn("- result: IN PROGRESS: the run stopped here if this line remains (100 s into a 540 s budget)",
                      text)
        self.assertIn("| toolchain and CUDA libraries | pass | cmake 3.25.1 |", text)
        self.assertIn("| kernel time matmul_1024_f32 | **FAIL** | strata 10.5 us \\| raw 10.0 us |", text)
        self.assertLess(text.index("| check | result | detail |"), text.index("## 1. Machine"))
        self.assertIn("## Step timings\n\n| command | seconds | exit |\n|---|---:|---:|\n| configure | 4 | 0 |", text)

    def test_final_result_replaces_in_progress(self):
        text = report.render(self.work.path, now=1100, final="every step passed")
        self.assertIn("- result: every step passed", text)
        self.assertNotIn("IN PROGRESS", text)

    def test_render_command_writes_the_report_and_exits_with_the_result(self):
        path = os.path.join(self.work.path, "report.md")
        self.status("GPU found by strata devices", "pass", "cuda:0: NVIDIA H200")
        self.assertEqual(report.main(["x", "render", self.work.path, path]), 0)
        self.assertIn("IN PROGRESS", self.work.read("report.md"))
        self.assertEqual(report.main(["x", "render", self.work.path, path, "--final"]), report.EXIT_PASSED)
        self.assertIn("- result: every step passed", self.work.read("report.md"))
        self.assertFalse(os.path.exists(path + ".tmp"))


class Decide(unittest.TestCase):
    def test_results_in_order_of_precedence(self):
        ok = [("build", "pass", "")]
        failed = ok + [("kernel time x", "fail", "")]
        budget = ok + [("trace x", "skip", "time budget: 10 s left of 540 s")]
        self.assertEqual(report.decide({}, ok, [], 5), ("every step passed", 0))
        self.assertEqual(report.decide({}, failed, [], 5)[1], 1)
        self.assertEqual(report.decide({"no_gpu_reason": "cuda: no driver"}, ok, [], 5),
                         ("NOT VALIDATED: no usable GPU (cuda: no driver); the build and the non-GPU steps ran", 3))
        self.assertEqual(report.decide({"no_gpu_reason": "x"}, failed, [], 5)[1], 1)
        self.assertEqual(report.decide({}, budget, [], 5)[1], 5)
        self.assertEqual(report.decide({}, ok, [("trace", "90", "124")], 5)[1], 5)
        self.assertEqual(report.decide({}, ok, [("trace", "0", "not run (time budget)")], 5)[1], 5)
        self.assertEqual(report.decide({"interrupted": "1"}, ok, [], 7),
                         ("INTERRUPTED by a signal after 7 s: later steps did not run", 1))
        self.assertEqual(report.decide({"dry_run": "1"}, failed, [], 5)[1], 0)

    def test_a_plain_skip_is_not_a_budget_skip(self):
        statuses = [("host tests (ctest -LE gpu)", "skip", "not run: under 90 s left (CI runs it on every change)")]
        self.assertEqual(report.decide({}, statuses, [], 5)[1], 0)


class Parsers(unittest.TestCase):
    def test_gpu_info(self):
        self.assertEqual(report.gpu_info(NVIDIA_SMI), ("NVIDIA H200", "9.0"))
        self.assertEqual(report.gpu_info(""), ("", ""))
        self.assertEqual(report.gpu_info("dry run: nvidia-smi ...\n"), ("", ""))

    def test_cuda_archs_for(self):
        self.assertEqual(report.cuda_archs_for("9.0"), "90-real")
        self.assertEqual(report.cuda_archs_for("12.0"), "120-real")
        self.assertEqual(report.cuda_archs_for(""), "90-real")

    def test_gpu_info_command_prints_one_field_a_line(self):
        work = WorkFolder()
        try:
            work.write("smi.csv", "")
            import contextlib, io
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                report.main(["x", "gpu-info", os.path.join(work.path, "smi.csv")])
            self.assertEqual(out.getvalue(), "\n\n90-real\n")  # empty name and capability keep their lines
        finally:
            work.remove()

    def test_header_version(self):
        work = WorkFolder()
        try:
            work.write("cuda_runtime_api.h", "#define CUDART_VERSION  13000\n")
            work.write("cublas_api.h", "#define CUBLAS_VER_MAJOR 13\n#define CUBLAS_VER_MINOR 1\n#define CUBLAS_VER_PATCH 0\n")
            work.write("cudnn_version.h", "#define CUDNN_MAJOR 9\n#define CUDNN_MINOR 19\n#define CUDNN_PATCHLEVEL 0\n")
            work.write("cupti_version.h", "#define CUPTI_API_VERSION 130001\n")
            self.assertEqual(report.header_version("cudart", work.path), "13.0")
            self.assertEqual(report.header_version("cublas", work.path), "13.1.0")
            self.assertEqual(report.header_version("cublasLt", work.path), "13.1.0")
            self.assertEqual(report.header_version("cudnn", work.path), "9.19.0")
            self.assertEqual(report.header_version("cupti", work.path), "API 130001")
            self.assertEqual(report.header_version("cudnn", "/nonexistent"), "")
        finally:
            work.remove()

    def test_libraries_table(self):
        work = WorkFolder()
        try:
            work.write("libraries.tsv", "cudart\t/usr/local/cuda/lib64/libcudart.so.13\ttoolkit\t/nonexistent\n"
                                        "cudnn\t\t\t\n")
            table = report.libraries_table(os.path.join(work.path, "libraries.tsv"))
            self.assertIn("| libcudart | `/usr/local/cuda/lib64/libcudart.so.13` | toolkit | `/nonexistent` |  |", table)
            self.assertIn("| libcudnn | **not found** | | | |", table)
        finally:
            work.remove()

    def test_ctest_list(self):
        text = ("Test project /b\n  Test  #12: cupti_gpu_test.kernels recorded\n  Test #140: compare_gpu\n\n"
                "Total Tests: 2\n")
        self.assertEqual(report.ctest_list(text), ["cupti_gpu_test.kernels", "compare_gpu"])


class GpuTests(Work):
    def ctest(self, name, rc, log):
        self.timing(f"ctest_gpu_{name}", 3, rc)
        self.work.write(f"logs/ctest_gpu_{name}.log", log)

    def test_all_passed(self):
        self.ctest("a", 0, "100% tests passed\n")
        self.ctest("b", 0, "100% tests passed\n")
        text, status = report.gpu_tests(self.work.path, ["a", "b"], no_gpu=False)
        self.assertEqual(status, ("pass", "all 2 passed"))
        self.assertIn("| a | passed | 3 |", text)

    def test_a_skip_on_a_gpu_machine_is_a_failure(self):
        self.ctest("a", 0, "***Skipped\nSKIPPED: no usable CUDA device: no CUDA driver\n")
        self.ctest("b", 8, "1 failed\n")
        text, status = report.gpu_tests(self.work.path, ["a", "b"], no_gpu=False)
        self.assertEqual(status, ("fail", "0 passed, 1 failed, b 1 skipped on a GPU machine, of 2"))
        self.assertIn("| a | skipped: no usable CUDA device: no CUDA driver | 3 |", text)
        self.assertIn("| b | **FAILED** (exit 8; logs/ctest_gpu_b.log) | 3 |", text)
        self.assertIn("#### b (last 40 lines)", text)

    def test_without_a_gpu_skips_are_expected(self):
        self.ctest("a", 0, "***Skipped\nSKIPPED: no GPU\n")
        _, status = report.gpu_tests(self.work.path, ["a"], no_gpu=True)
        self.assertEqual(status, ("skip", "skipped: no GPU (1 of 1 tests skipped themselves)"))

    def test_tests_not_run_for_time(self):
        self.ctest("a", 0, "ok\n")
        _, status = report.gpu_tests(self.work.path, ["a", "b"], no_gpu=False)
        self.assertEqual(status, ("skip", "time budget: 1 of 2 passed; the rest not run"))

    def test_no_gpu_tests_listed(self):
        self.assertEqual(report.gpu_tests(self.work.path, [], no_gpu=False)[1][0], "fail")


class KernelPathsAndHostTests(Work):
    def test_kernel_paths(self):
        self.timing("check_a", 2, 0)
        self.work.write("logs/check_a.log", "table\ncheck: max abs err 1e-7 within 1e-5 (float64 reference)\n")
        self.timing("check_b", 2, 1)
        self.work.write("logs/check_b.log", "error: tolerance exceeded\n")
        text, status = report.kernel_paths(self.work.path, [("check_a", "matmul 257x129x63", "f64"),
                                                            ("check_b", "relu 1048577", "f16"),
                                                            ("check_c", "add 1048577", "f64")])
        self.assertIn("| matmul 257x129x63 | f64 | check: max abs err 1e-7 within 1e-5 (float64 reference) | 0 |", text)
        self.assertIn("| relu 1048577 | f16 | error: tolerance exceeded | 1 |", text)
        self.assertEqual(status, ("fail", "1 of 2 CLI runs failed"))

    def test_host_tests(self):
        self.timing("ctest_host", 11, 0)
        self.work.write("logs/ctest_host.log", "100% tests passed, 0 tests failed out of 172\n")
        text, status = report.host_tests(self.work.path)
        self.assertEqual(status, ("pass", "100% tests passed, 0 tests failed out of 172"))
        self.timing("ctest_host", 11, 8)
        self.work.write("logs/ctest_host.log", "  3 - x (Failed)\n99% tests passed, 1 tests failed out of 172\n")
        text, status = report.host_tests(self.work.path)
        self.assertEqual(status[0], "fail")
        self.assertIn("3 - x (Failed)", text)


if __name__ == "__main__":
    unittest.main()
