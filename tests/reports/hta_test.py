"""strata's Chrome traces in Holistic Trace Analysis (HTA, from PyPI: scripts/install-python-deps).

    hta_test.py STRATA_BINARY [GPU_SHAPED_TRACE_BINARY]

Runs under the python of the environment scripts/install-python-deps makes (ctest passes it); exits 77
(ctest: skipped) with the reason when HTA is not importable. Two traces, each alone in a directory as HTA
wants (one file per rank):
  - a CPU trace: `strata trace matmul 64 --device cpu --chrome-trace` from the real binary;
  - a GPU-shaped trace: tests/device/cupti/gpu_shaped_trace.cpp's synthetic CUPTI records through strata's
    real record conversion and Chrome-trace writer (five matmul calls, each a cuLaunchKernel gemm, a
    cudaLaunchKernel bias kernel, a 1 MiB DtoH copy and a stream synchronisation; docs/traces.md).
Both load with no warning about their content. Every single-rank analysis HTA offers runs on the
GPU-shaped trace and finds the figures the records hold. On the CPU trace, the analyses that have
nothing to work on without GPU events run and say so (empty frames); four raise, and the test holds that
they raise because there is no GPU event, and that the same calls pass on the GPU-shaped trace.
"""
import logging
import os
import subprocess
import sys
import tempfile
import unittest

try:
    from hta.trace_analysis import TraceAnalysis
except ImportError as e:  # the peer's environment is not there: say why, ctest reports a skip
    print(f"skipped: Holistic Trace Analysis is not importable by {sys.executable} ({e}); "
          "scripts/install-python-deps installs it (docs/build.md)")
    sys.exit(77)

STRATA = GPU_SHAPED = None
# What HTA logs at WARNING on every trace, torch.profiler's included: progress and its ns -> us rounding
# (docs/traces.md). Anything else it logs while loading is about the trace's content, and a failure.
ROUTINE = ("Parsed ", "Overall parsing", "leaving parse", "Rounding down ns resolution events")


class Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def load(trace_dir):
    """TraceAnalysis over trace_dir, and what HTA logged at WARNING or above while loading, routine left out."""
    records = Records()
    logger = logging.getLogger("hta")
    logger.addHandler(records)
    try:
        analyzer = TraceAnalysis(trace_dir=trace_dir)
    finally:
        logger.removeHandler(records)
    return analyzer, [m for m in records.messages if not m.startswith(ROUTINE)]


def check_trace(path):
    r = subprocess.run([STRATA, "check-trace", path], capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


class TraceDirs(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.cpu_dir = os.path.join(cls.tmp.name, "cpu")
        cls.gpu_dir = os.path.join(cls.tmp.name, "gpu")
        os.makedirs(cls.cpu_dir)
        os.makedirs(cls.gpu_dir)
        cls.cpu_path = os.path.join(cls.cpu_dir, "rank0.json")
        r = subprocess.run([STRATA, "trace", "matmul", "64", "--repeat", "5", "--warmup", "1", "--device", "cpu",
                            "--chrome-trace", cls.cpu_path], capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
        cls.cpu, cls.cpu_warnings = load(cls.cpu_dir)
        cls.gpu = None
        if GPU_SHAPED:
            cls.gpu_path = os.path.join(cls.gpu_dir, "rank0.json")
            subprocess.run([GPU_SHAPED, cls.gpu_path], check=True)
            cls.gpu, cls.gpu_warnings = load(cls.gpu_dir)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def need_gpu_shaped(self):
        if self.gpu is None:
            self.skipTest("no strata_gpu_shaped_trace: this build has no CUDA toolkit (CUPTI's headers)")


def decoded(analyzer):
    """The rank-0 DataFrame with s_name and s_cat decoded (HTA's own columns, not modified in place)."""
    df = analyzer.t.get_trace(0).copy()
    analyzer.t.symbol_table.decode_df(df, create_new_columns=True)
    return df


class CpuTrace(TraceDirs):
    def test_loads_without_a_warning_and_passes_check_trace(self):
        self.assertEqual(self.cpu_warnings, [])
        with open(self.cpu_path) as fh:
            self.assertIn('"rank": 0', fh.read())  # what HTA's rank pattern "rank":\s+(\d+) needs
        self.assertEqual(check_trace(self.cpu_path)[0], 0, check_trace(self.cpu_path)[1])

    def test_steps_and_iterations(self):
        # Timed calls are ops 2..6, one ProfilerStep each; HTA leaves out the last step (as for torch's).
        self.assertEqual(self.cpu.get_profiler_steps(), [2, 3, 4, 5])
        df = decoded(self.cpu)
        ops = df[df.s_cat == "cpu_op"]
        # HTA drops the last step's events with the step (op 6), as it does in a torch.profiler trace.
        self.assertEqual(sorted(ops.external_id), [1, 2, 3, 4, 5])
        self.assertTrue((ops.s_name == "aten::matmul").all())
        for op in ops.itertuples():
            # Each step is numbered by its op; the cold call (op 1) is no step: iteration -1.
            self.assertEqual(op.iteration, op.external_id if op.external_id >= 2 else -1, op)
        self.assertEqual(set(df.s_cat) - {"cpu_op"}, {"binding", "dispatch", "library", "user_annotation"})

    def test_analyses_with_nothing_to_work_on_say_so(self):
        a = self.cpu
        summary, kernels = a.get_gpu_kernel_breakdown(visualize=False)
        self.assertTrue(summary.empty and kernels.empty)
        self.assertTrue(a.get_cuda_kernel_launch_stats(visualize=False)[0].empty)
        self.assertEqual(a.get_queue_length_time_series(), {})
        self.assertIsNone(a.get_queue_length_summary())
        self.assertIsNone(a.get_memory_bw_summary())
        self.assertEqual(a.get_memory_bw_time_series(), {})
        self.assertIsNone(a.get_gpu_kernels_with_user_annotations(0))
        self.assertIsNone(a.get_gpu_user_annotation_breakdown(visualize=False))
        self.assertEqual(a.get_cupti_counter_data_with_operators(), [])
        with tempfile.TemporaryDirectory() as out:
            self.assertTrue(a.get_frequent_cuda_kernel_sequences("aten::matmul", out).empty)

    def test_the_analyses_that_raise_need_gpu_events(self):
        # Each of these works from the GPU's side of the trace (kernels, the streams' idle time, the
        # launches' kernels): with no event on a stream they raise inside HTA. The GPU-shaped trace
        # (GpuShapedTrace below) runs every one of them.
        df = decoded(self.cpu)
        self.assertEqual(int((df.stream != -1).sum()), 0, "a CPU trace with GPU events")
        a = self.cpu
        raising = {
            "get_temporal_breakdown": (IndexError, lambda: a.get_temporal_breakdown(visualize=False)),
            "get_idle_time_breakdown": (ValueError, lambda: a.get_idle_time_breakdown(visualize=False)),
            "get_aten_op_kernels_and_delay": (KeyError, lambda: a.get_aten_op_kernels_and_delay()),
            "critical_path_analysis": (TypeError, lambda: a.critical_path_analysis(0, "ProfilerStep", None)),
        }
        for name, (error, call) in raising.items():
            with self.subTest(name), self.assertRaises(error):
                call()


class GpuShapedTrace(TraceDirs):
    def setUp(self):
        self.need_gpu_shaped()

    def test_loads_without_a_warning_and_passes_check_trace(self):
        self.assertEqual(self.gpu_warnings, [])
        self.assertEqual(check_trace(self.gpu_path)[0], 0, check_trace(self.gpu_path)[1])

    def test_kernel_breakdown_and_temporal_breakdown(self):
        summary, kernels = self.gpu.get_gpu_kernel_breakdown(visualize=False)
        self.assertEqual(set(summary.kernel_type), {"COMPUTATION", "MEMORY"})
        by_name = {k.name: k for k in kernels.itertuples()}
        # Four calls (HTA leaves out the last step's): 30 us gemm, 4.5 us bias kernel (whole us), 9.5 us copy.
        self.assertAlmostEqual(by_name["sm90_xmma_gemm_f32f32_tn_n"]._2, 4 * 30, delta=4)
        self.assertIn("Memcpy DtoH", by_name)
        self.assertEqual(by_name["Memcpy DtoH"].kernel_type, "MEMORY")
        t = self.gpu.get_temporal_breakdown(visualize=False).iloc[0]
        self.assertGreater(t["compute_time(us)"], 0)
        self.assertGreater(t["non_compute_time(us)"], 0)  # the copies
        self.assertGreater(t["idle_time(us)"], 0)  # the GPU waits for the host between calls

    def test_idle_time_queue_and_launches(self):
        idle, stats = self.gpu.get_idle_time_breakdown(visualize=False, show_idle_interval_stats=True)
        self.assertEqual(set(idle.stream), {7})
        self.assertGreater(idle[idle.idle_category == "host_wait"].idle_time.iloc[0], 0)
        self.assertIsNotNone(stats)
        summary = self.gpu.get_queue_length_summary()
        self.assertEqual(summary.loc[(0, 7)][("queue_length", "max")], 2)  # the bias kernel queued behind the gemm
        self.assertIsNotNone(self.gpu.get_time_spent_blocked_on_full_queue(self.gpu.get_queue_length_time_series()))
        launches = self.gpu.get_cuda_kernel_launch_stats(visualize=False)[0]
        # HTA counts runtime launches and copies (cudaLaunchKernel, cudaMemcpyAsync), not driver launches.
        self.assertEqual(len(launches), 8)
        bias = launches[launches.correlation % 10 == 1]
        self.assertTrue((bias.cpu_duration == 4).all() and (bias.launch_delay.between(28, 29)).all(), bias)

    def test_op_analyses_find_the_cpu_op(self):
        ops = self.gpu.get_aten_op_kernels_and_delay()[0]
        self.assertEqual(ops.aten_op_name.tolist(), ["aten::matmul"])
        self.assertEqual(ops.occurrence_count.tolist(), [4])
        self.assertTrue(ops.kernel_sequence.iloc[0].startswith("sm90_xmma_gemm_f32f32_tn_n -> void bias_rows_kernel"))
        self.assertEqual(ops.avg_aten_op_launch_delay.iloc[0], 3)  # cuLaunchKernel 3 us into the op
        with tempfile.TemporaryDirectory() as out:
            seq = self.gpu.get_frequent_cuda_kernel_sequences("aten::matmul", out)
        self.assertFalse(seq.empty)
        self.assertTrue(seq.pattern.iloc[0].startswith("aten::matmul|sm90_xmma_gemm_f32f32_tn_n"))

    def test_memory_bandwidth(self):
        bw = self.gpu.get_memory_bw_summary()
        mean = bw.loc[(0, "Memcpy DtoH")][("memory_bw_gbps", "mean")]
        self.assertAlmostEqual(mean, (1 << 20) / 9500, places=2)  # 1 MiB in 9.5 us
        self.assertIn(0, self.gpu.get_memory_bw_time_series())

    def test_user_annotations(self):
        kernels = self.gpu.get_gpu_kernels_with_user_annotations(0)
        self.assertTrue((kernels.s_user_annotation == "matmul").all())
        b = self.gpu.get_gpu_user_annotation_breakdown(visualize=False)
        self.assertEqual(b.name.tolist(), ["matmul"])
        self.assertEqual(b["mean (us)"].iloc[0], 45)  # the gemm's start to the copy's end

    def test_critical_path_counters_and_trace_with_counters(self):
        graph, ok = self.gpu.critical_path_analysis(0, "ProfilerStep", None)
        self.assertTrue(ok)
        self.assertGreater(len(graph.critical_path_nodes), 0)
        # strata collects no CUPTI counters (HTA's profiler-range mode): nothing to join, no error.
        self.assertEqual(self.gpu.get_cupti_counter_data_with_operators(), [])
        self.gpu.generate_trace_with_counters()
        self.assertTrue(any("with_counters" in f for f in os.listdir(self.gpu_dir)))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    STRATA = sys.argv[1]
    GPU_SHAPED = sys.argv[2] if len(sys.argv) > 2 and sys.argv[2] else None
    unittest.main(argv=sys.argv[:1], verbosity=2)
