#!/usr/bin/env python3
"""scripts/gpu_validate: the report (record.py) and the tables of the later steps (tables.py)."""
import json
import os
import unittest

from gpu_validate_test_support import WorkFolder
import record as report_record
import tables

NVIDIA_SMI = """index, name, compute_cap, driver_version, memory.total [MiB], clocks.max.sm [MHz], clocks.max.mem [MHz], power.limit [W]
0, NVIDIA H200, 9.0, 580.65.06, 143771 MiB, 1980 MHz, 3201 MHz, 700.00 W
"""


class Work(unittest.TestCase):
    def setUp(self):
        self.work = WorkFolder()
        self.work.record.meta.update(stamp="2026-11-23-070000Z", budget="540", commit="abc123", commit_from="git",
                                     machine="gpu-box", gpu_name="NVIDIA H200")

    def tearDown(self):
        self.work.remove()

    def status(self, step, result, detail):
        self.work.record.add(step, result, detail)

    def timing(self, name, secs, rc):
        self.work.timing(name, secs, rc)


class Render(Work):
    def test_header_summary_body_and_timings(self):
        self.status("toolchain and CUDA libraries", "pass", "cmake 3.25.1")
        self.status("kernel time matmul_1024_f32", "fail", "strata 10.5 us | raw 10.0 us")
        self.work.record.section("Machine")
        self.work.record.say("some text")
        self.timing("configure", 4, 0)
        text = self.work.record.render(now=1100)
        self.assertTrue(text.startswith("# strata GPU validation, 2026-11-23-070000Z\n"))
        self.assertIn("- commit: `abc123` (from git)", text)
        self.assertIn("- machine: gpu-box, NVIDIA H200", text)
        self.assertIn("\n- device: NVIDIA H200\n", text)
        self.assertIn("- budget: 540 s, used 100 s; CUDA archs built: `not configured yet`", text)
        self.assertIn("- result: IN PROGRESS: the run stopped here if this line remains (100 s into a 540 s budget)",
                      text)
        self.assertIn("| toolchain and CUDA libraries | pass | cmake 3.25.1 |", text)
        self.assertIn("| kernel time matmul_1024_f32 | **FAIL** | strata 10.5 us \\| raw 10.0 us |", text)
        self.assertLess(text.index("| check | result | detail |"), text.index("## 1. Machine"))
        self.assertIn("## Step timings\n\n| command | seconds | exit |\n|---|---:|---:|\n| configure | 4 | 0 |", text)

    def test_final_result_replaces_in_progress(self):
        text = self.work.record.render(now=1100, final="every step passed")
        self.assertIn("- result: every step passed", text)
        self.assertNotIn("IN PROGRESS", text)

    def test_the_report_is_written_atomically_and_decided_at_the_end(self):
        from runner import Runner
        path = os.path.join(self.work.path, "report.md")
        runner = Runner(self.work.record, 540, path, os.path.join(self.work.path, "a.tar.gz"), dry_run=False)
        self.status("GPU found by strata devices", "pass", "cuda:0: NVIDIA H200")
        runner.write_report()
        self.assertIn("IN PROGRESS", self.work.read("report.md"))
        self.assertEqual(self.work.record.decide(), ("every step passed", report_record.EXIT_PASSED))
        self.assertFalse(os.path.exists(path + ".tmp"))


def decide(meta, checks, timings, elapsed):
    """The result of a run with this meta, these checks and timings, `elapsed` seconds after its start."""
    rec = report_record.Record("/nonexistent", start=1000)
    rec.meta.update(meta)
    rec.dry_run = bool(meta.get("dry_run"))
    rec.checks, rec.timings = list(checks), list(timings)
    return rec.decide(now=1000 + elapsed)


class Decide(unittest.TestCase):
    def test_results_in_order_of_precedence(self):
        ok = [("build", "pass", "")]
        failed = ok + [("kernel time x", "fail", "")]
        budget = ok + [("trace x", "skip", "time budget: 10 s left of 540 s")]
        self.assertEqual(decide({}, ok, [], 5), ("every step passed", 0))
        self.assertEqual(decide({}, failed, [], 5)[1], 1)
        self.assertEqual(decide({"no_gpu_reason": "cuda: no driver"}, ok, [], 5),
                         ("NOT VALIDATED: no usable GPU (cuda: no driver); the build and the non-GPU steps ran", 3))
        self.assertEqual(decide({"no_gpu_reason": "x"}, failed, [], 5)[1], 1)
        self.assertEqual(decide({}, budget, [], 5)[1], 5)
        self.assertEqual(decide({}, ok, [("trace", "90", "124")], 5)[1], 5)
        self.assertEqual(decide({}, ok, [("trace", "0", "not run (time budget)")], 5)[1], 5)
        self.assertEqual(decide({"interrupted": "1"}, ok, [], 7),
                         ("INTERRUPTED by a signal after 7 s: later steps did not run", 1))
        self.assertEqual(decide({"dry_run": "1"}, failed, [], 5)[1], 0)

    def test_a_plain_skip_is_not_a_budget_skip(self):
        statuses = [("host tests (ctest -LE gpu)", "skip", "not run: under 90 s left (CI runs it on every change)")]
        self.assertEqual(decide({}, statuses, [], 5)[1], 0)


class Parsers(unittest.TestCase):
    def test_gpu_info(self):
        self.assertEqual(tables.gpu_info(NVIDIA_SMI), ("NVIDIA H200", "9.0"))
        self.assertEqual(tables.gpu_info(""), ("", ""))
        self.assertEqual(tables.gpu_info("dry run: nvidia-smi ...\n"), ("", ""))

    def test_cuda_archs_for(self):
        self.assertEqual(tables.cuda_archs_for("9.0"), "90-real")
        self.assertEqual(tables.cuda_archs_for("12.0"), "120-real")
        self.assertEqual(tables.cuda_archs_for(""), "90-real")

    def test_header_version(self):
        work = WorkFolder()
        try:
            work.write("cuda_runtime_api.h", "#define CUDART_VERSION  13000\n")
            work.write("cublas_api.h", "#define CUBLAS_VER_MAJOR 13\n#define CUBLAS_VER_MINOR 1\n#define CUBLAS_VER_PATCH 0\n")
            work.write("cudnn_version.h", "#define CUDNN_MAJOR 9\n#define CUDNN_MINOR 19\n#define CUDNN_PATCHLEVEL 0\n")
            work.write("cupti_version.h", "#define CUPTI_API_VERSION 130001\n")
            self.assertEqual(tables.header_version("cudart", work.path), "13.0")
            self.assertEqual(tables.header_version("cublas", work.path), "13.1.0")
            self.assertEqual(tables.header_version("cublasLt", work.path), "13.1.0")
            self.assertEqual(tables.header_version("cudnn", work.path), "9.19.0")
            self.assertEqual(tables.header_version("cupti", work.path), "API 130001")
            self.assertEqual(tables.header_version("cudnn", "/nonexistent"), "")
        finally:
            work.remove()

    def test_libraries_table(self):
        work = WorkFolder()
        try:
            table = tables.libraries_table([("cudart", "/usr/local/cuda/lib64/libcudart.so.13", "toolkit", "/nonexistent"),
                                            ("cudnn", "", "", "")])
            self.assertIn("| libcudart | `/usr/local/cuda/lib64/libcudart.so.13` | toolkit | `/nonexistent` |  |", table)
            self.assertIn("| libcudnn | **not found** | | | |", table)
        finally:
            work.remove()

    def test_ctest_list(self):
        text = ("Test project /b\n  Test  #12: cupti_gpu_test.kernels recorded\n  Test #140: compare_gpu\n\n"
                "Total Tests: 2\n")
        self.assertEqual(tables.ctest_list(text), ["cupti_gpu_test.kernels", "compare_gpu"])


class GpuTests(Work):
    def ctest(self, name, rc, log):
        self.timing(f"ctest_gpu_{name}", 3, rc)
        self.work.write(f"logs/ctest_gpu_{name}.log", log)

    def test_all_passed(self):
        self.ctest("a", 0, "100% tests passed\n")
        self.ctest("b", 0, "100% tests passed\n")
        text, status = tables.gpu_tests(self.work.record, ["a", "b"], no_gpu=False)
        self.assertEqual(status, ("pass", "all 2 passed"))
        self.assertIn("| a | passed | 3 |", text)

    def test_a_skip_on_a_gpu_machine_is_a_failure(self):
        self.ctest("a", 0, "***Skipped\nSKIPPED: no usable CUDA device: no CUDA driver\n")
        self.ctest("b", 8, "1 failed\n")
        text, status = tables.gpu_tests(self.work.record, ["a", "b"], no_gpu=False)
        self.assertEqual(status, ("fail", "0 passed, 1 failed, b 1 skipped on a GPU machine, of 2"))
        self.assertIn("| a | skipped: no usable CUDA device: no CUDA driver | 3 |", text)
        self.assertIn("| b | **FAILED** (exit 8; logs/ctest_gpu_b.log) | 3 |", text)
        self.assertIn("#### b (last 40 lines)", text)

    def test_without_a_gpu_skips_are_expected(self):
        self.ctest("a", 0, "***Skipped\nSKIPPED: no GPU\n")
        _, status = tables.gpu_tests(self.work.record, ["a"], no_gpu=True)
        self.assertEqual(status, ("skip", "skipped: no GPU (1 of 1 tests skipped themselves)"))

    def test_tests_not_run_for_time(self):
        self.ctest("a", 0, "ok\n")
        _, status = tables.gpu_tests(self.work.record, ["a", "b"], no_gpu=False)
        self.assertEqual(status, ("skip", "time budget: 1 of 2 passed; the rest not run"))

    def test_no_gpu_tests_listed(self):
        self.assertEqual(tables.gpu_tests(self.work.record, [], no_gpu=False)[1][0], "fail")


class KernelPathsAndHostTests(Work):
    def test_kernel_paths(self):
        self.timing("check_a", 2, 0)
        self.work.write("logs/check_a.log", "table\ncheck: max abs err 1e-7 within 1e-5 (float64 reference)\n")
        self.timing("check_b", 2, 1)
        self.work.write("logs/check_b.log", "error: tolerance exceeded\n")
        text, status = tables.kernel_paths(self.work.record, [("check_a", "matmul 257x129x63", "f64"),
                                                            ("check_b", "relu 1048577", "f16"),
                                                            ("check_c", "add 1048577", "f64")])
        self.assertIn("| matmul 257x129x63 | f64 | check: max abs err 1e-7 within 1e-5 (float64 reference) | 0 |", text)
        self.assertIn("| relu 1048577 | f16 | error: tolerance exceeded | 1 |", text)
        self.assertEqual(status, ("fail", "1 of 2 CLI runs failed"))

    def test_kernel_paths_autocast_needs_its_key_path(self):
        self.timing("check_ac", 2, 0)
        self.work.write("logs/check_ac.log", "matmul ... keys: Autocast > Autograd > CUDA\ncheck: relative error 0.003 "
                                             "(tolerance 0.03): PASS\n")
        self.timing("check_wrong", 2, 0)
        self.work.write("logs/check_wrong.log", "matmul ... keys: Autograd > CUDA\ncheck: relative error 0: PASS\n")
        text, status = tables.kernel_paths(self.work.record, [("check_ac", "matmul 1024", "autocast-bf16")])
        self.assertEqual(status, ("pass", "1 CLI runs within tolerance"))
        text, status = tables.kernel_paths(self.work.record, [("check_wrong", "matmul 1024", "autocast-f16")])
        self.assertIn("(but not 'keys: Autocast > Autograd > CUDA')", text)
        self.assertEqual(status, ("fail", "1 of 1 CLI runs failed"))

    def test_host_tests(self):
        self.timing("ctest_host", 11, 0)
        self.work.write("logs/ctest_host.log", "100% tests passed, 0 tests failed out of 172\n")
        text, status = tables.host_tests(self.work.record)
        self.assertEqual(status, ("pass", "100% tests passed, 0 tests failed out of 172"))
        self.timing("ctest_host", 11, 8)
        self.work.write("logs/ctest_host.log", "  3 - x (Failed)\n99% tests passed, 1 tests failed out of 172\n")
        text, status = tables.host_tests(self.work.record)
        self.assertEqual(status[0], "fail")
        self.assertIn("3 - x (Failed)", text)

    def test_host_tests_a_crash_lists_the_test_and_its_native_frames(self):
        # As the GPU machine's run 3 printed python_profile_test's crash: listed as (SEGFAULT), which the
        # table once missed; with STRATA_NATIVE_BACKTRACE the frames in strata's libraries are resolved.
        self.timing("ctest_host", 36, 8)
        self.work.write("logs/ctest_host.log", "\n".join([
            "529/544 Test #553: python_profile_test ....***Exception: SegFault  0.67 sec",
            "strata: fatal signal 11 (SIGSEGV); native backtrace (STRATA_NATIVE_BACKTRACE, Note [...]):",
            "/b/python/strata/_strata.cpython-312-x86_64-linux-gnu.so(+0xd5c45)[0x7efe6e4d5c45]",
            "/lib/x86_64-linux-gnu/libc.so.6(+0x3c050)[0x7efe6ea5a050]",
            "553: /b/python/strata/_strata.cpython-312-x86_64-linux-gnu.so(_ZN6strata1fEv+0x12)[0x7efe6e4d0012]",
            "strata: end of native backtrace",
            "/not/a/frame(+0x1)[0x2]",
            "99% tests passed, 1 tests failed out of 544",
            "The following tests FAILED:",
            "\t553 - python_profile_test (SEGFAULT)"]) + "\n")
        asked = []
        def resolve(library, offset):
            asked.append((library, offset))
            return "strata::python::Profile::table() const at profile.cpp:148"
        text, status = tables.host_tests(self.work.record, resolve)
        self.assertEqual(status[0], "fail")
        self.assertIn("553 - python_profile_test (SEGFAULT)", text)
        # Only the offset into strata's own library is resolved; libc's and a named symbol's are listed as is.
        self.assertEqual(asked, [("/b/python/strata/_strata.cpython-312-x86_64-linux-gnu.so", "0xd5c45")])
        frames = tables.native_backtraces(self.work.read("logs/ctest_host.log"), resolve)
        self.assertEqual(frames, [
            "fatal signal 11 (SIGSEGV); native backtrace (STRATA_NATIVE_BACKTRACE, Note [...]):",
            "  _strata.cpython-312-x86_64-linux-gnu.so(+0xd5c45)  strata::python::Profile::table() const at profile.cpp:148",
            "  libc.so.6(+0x3c050)",
            "  _strata.cpython-312-x86_64-linux-gnu.so(_ZN6strata1fEv+0x12)"])


READELF_STRATA = """
Dynamic section at offset 0x2c1d30 contains 34 entries:
  Tag        Type                         Name/Value
 0x0000000000000001 (NEEDED)             Shared library: [libopenblas.so.0]
 0x0000000000000001 (NEEDED)             Shared library: [libfmt.so.9]
 0x0000000000000001 (NEEDED)             Shared library: [libc.so.6]
"""
READELF_MODULE = """ 0x0000000000000001 (NEEDED)             Shared library: [libcudart.so.13]
 0x0000000000000001 (NEEDED)             Shared library: [libcublas.so.13]
 0x0000000000000001 (NEEDED)             Shared library: [libcublasLt.so.13]
 0x0000000000000001 (NEEDED)             Shared library: [libcudnn.so.9]
 0x0000000000000001 (NEEDED)             Shared library: [libcupti.so.13]
 0x0000000000000001 (NEEDED)             Shared library: [libc.so.6]
"""
DEVICES_LOADED = """     14851:\tfile=/b/apps/strata/libstrata_cuda.so [0];  dynamically loaded by /b/apps/strata/strata [0]
     14851:\tfile=libcudart.so.13 [0];  needed by /b/apps/strata/libstrata_cuda.so [0]
cpu: 22594 MiB available
cuda:0: NVIDIA H100 80GB HBM3, sm_90, 132 SMs, 79.1 GiB free
"""


class CudaModule(Work):
    def logs(self, strata=READELF_STRATA, module=READELF_MODULE, devices=DEVICES_LOADED):
        self.work.write("logs/readelf_strata.log", strata)
        self.work.write("logs/readelf_module.log", module)
        self.work.write("logs/devices_module.log", devices)

    def test_loaded_and_no_cuda_library_in_strata(self):
        self.logs()
        text, status = tables.cuda_module(self.work.record, no_gpu=False)
        self.assertEqual(status, ("pass", "strata needs no CUDA library; the module needs cudart, cublas, cublasLt, "
                                          "cudnn, cupti; loaded from /b/apps/strata/libstrata_cuda.so; "
                                          "cuda:0: NVIDIA H100 80GB HBM3, sm_90, 132 SMs"))
        self.assertIn("- `readelf -d strata`: NEEDED libopenblas.so.0, libfmt.so.9, libc.so.6\n", text)
        self.assertIn("- `strata devices` (LD_DEBUG=files): loaded `/b/apps/strata/libstrata_cuda.so`; cuda:0: NVIDIA", text)

    def test_a_cuda_library_needed_by_strata_fails(self):
        self.logs(strata=READELF_STRATA + " 0x01 (NEEDED)             Shared library: [libcudart.so.13]\n"
                                          " 0x01 (NEEDED)             Shared library: [libcudnn_ops.so.9]\n")
        _, status = tables.cuda_module(self.work.record, no_gpu=False)
        self.assertEqual(status, ("fail", "strata needs libcudart.so.13, libcudnn_ops.so.9"))

    def test_module_not_loaded(self):
        self.logs(devices="cpu: 1 MiB available\ncuda: none: the CUDA module could not be loaded: "
                          "libcudnn.so.9: cannot open shared object file\n")
        _, status = tables.cuda_module(self.work.record, no_gpu=True)
        self.assertEqual(status, ("fail", "the CUDA module could not be loaded: libcudnn.so.9: cannot open shared "
                                          "object file"))
        os.remove(os.path.join(self.work.path, "logs", "devices_module.log"))
        self.work.write("logs/devices_module.log", "cpu: 1 MiB available\n")
        _, status = tables.cuda_module(self.work.record, no_gpu=True)
        self.assertIn("did not load libstrata_cuda.so", status[1])

    def test_without_a_gpu_a_loaded_module_is_a_skip(self):
        self.logs(devices=DEVICES_LOADED.replace("cuda:0: NVIDIA H100 80GB HBM3, sm_90, 132 SMs, 79.1 GiB free",
                                                 "cuda: none: no CUDA driver (cudaErrorInsufficientDriver)"))
        self.assertEqual(tables.cuda_module(self.work.record, no_gpu=True)[1][0], "skip")
        self.assertEqual(tables.cuda_module(self.work.record, no_gpu=False)[1], ("fail", "strata devices reported no cuda:0"))


SMOKE_OK = {"python": "3.12.3", "executable": "/usr/bin/python3", "strata": "/b/python/strata/__init__.py",
            "numpy": "2.1.0", "device": "cuda:0", "exit": 0,
            "cases": [{"op": "matmul", "dtype": "float32", "shape": "256x384 x 384x128", "tolerance": 1e-05,
                       "error": 2.4e-07, "ok": True},
                      {"op": "gelu", "dtype": "bfloat16", "shape": "1048577", "tolerance": 0.03, "error": 0.0041,
                       "ok": True}]}
PY_ON = "strata: Python package ON (/usr/bin/python3, pybind11 2.13.6)"


class PythonSmoke(Work):
    def smoke(self, doc, rc="0", configured=PY_ON, build_rc="0"):
        self.work.record.meta["python_package"] = configured
        if build_rc is not None:
            self.timing("build_python", 41, build_rc)
        if doc is not None:
            self.timing("python_smoke", 3, rc)
            self.work.write("json/python_smoke.json", json.dumps(doc))
            self.work.write("logs/python_smoke.log", "matmul float32 256x384 x 384x128: ok\n")

    def test_every_case_within_tolerance(self):
        self.smoke(SMOKE_OK)
        text, status = tables.python_smoke(self.work.record, no_gpu=False)
        self.assertEqual(status, ("pass", "2 ops on cuda:0 within tolerance of numpy float64 (python 3.12.3)"))
        self.assertIn("- configure: " + PY_ON, text)
        self.assertIn("- build: the extension built in 41 s", text)
        self.assertIn("| op | dtype | shape | relative error | tolerance | result |", text)
        self.assertIn("| gelu | bfloat16 | 1048577 | 0.0041 | 0.03 | ok |", text)

    def test_a_case_out_of_tolerance_fails(self):
        doc = json.loads(json.dumps(SMOKE_OK))
        doc["exit"] = 1
        doc["cases"][1].update(ok=False, error=0.5, problem="relative error 0.5 over 0.03")
        self.smoke(doc, rc="1")
        text, status = tables.python_smoke(self.work.record, no_gpu=False)
        self.assertEqual(status, ("fail", "1 of 2 failed: gelu bfloat16 (logs/python_smoke.log)"))
        self.assertIn("| gelu | bfloat16 | 1048577 | 0.5 | 0.03 | **FAILED**: relative error 0.5 over 0.03 |", text)

    def test_not_buildable_on_the_machine_is_a_skip(self):
        off = "strata: Python package OFF (no pybind11-dev or python3-dev; scripts/install-deps installs them)"
        self.smoke(None, configured=off, build_rc=None)
        self.assertEqual(tables.python_smoke(self.work.record, no_gpu=False)[1], ("skip", "not built on this machine: " + off))

    def test_configure_failure_and_build_failure_fail(self):
        self.smoke(None, build_rc="1")
        self.work.write("logs/build_python.log", "FAILED: apps/python/CMakeFiles/module.cpp.o\nmodule.cpp:3: error: x\n")
        text, status = tables.python_smoke(self.work.record, no_gpu=False)
        self.assertEqual(status, ("fail", "the extension did not build (exit 1, logs/build_python.log)"))
        self.assertIn("module.cpp:3: error: x", text)
        self.work.record.meta["python_configure_failed"] = "1"
        self.assertIn("configure with the Python package failed", tables.python_smoke(self.work.record, False)[1][1])

    def test_time_budget_and_no_gpu(self):
        self.smoke(None, build_rc="124")
        self.assertEqual(tables.python_smoke(self.work.record, no_gpu=False)[1][0], "skip")
        work2 = WorkFolder()
        try:
            self.work, keep = work2, self.work
            self.smoke({"python": "3.12.3", "cases": [], "exit": 3, "error": "cuda unavailable: no CUDA driver"}, rc="3")
            self.assertEqual(tables.python_smoke(self.work.record, no_gpu=True)[1],
                             ("skip", "no GPU: cuda unavailable: no CUDA driver"))
            self.assertEqual(tables.python_smoke(self.work.record, no_gpu=False)[1],
                             ("fail", "exit 3: cuda unavailable: no CUDA driver (logs/python_smoke.log)"))
        finally:
            self.work = keep
            work2.remove()


if __name__ == "__main__":
    unittest.main()
