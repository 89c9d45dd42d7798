#!/usr/bin/env python3
"""scripts/gpu_validate/checks.py: the checks computed from strata's JSON and the raw baselines' JSON."""
import os
import unittest

from gpu_validate_test_support import WorkFolder, gpu_sweep, gpu_trace, load_data, timing
import checks

CASE = "matmul_1024_f32"
KERNEL = "sm90_xmma_gemm_f32f32_tn"


def raw_cuda(median_ns, names=(KERNEL,), key=CASE):
    return {"cases": [{"key": key, "kernel": {"count": 500, "median_ns": median_ns},
                       "kernels": [{"name": n} for n in names]}]}


class TraceChecks(unittest.TestCase):
    def setUp(self):
        self.work = WorkFolder()

    def tearDown(self):
        self.work.remove()

    def run_traces(self, doc, raw, nodt=None, rehearsal=False):
        self.work.write_json(CASE, doc)
        if nodt is not None:
            self.work.write_json(CASE + ".nodt", nodt)
        if raw is not None:
            self.work.write_json("raw_cuda", raw)
        self.work.record.rehearsal = rehearsal
        checks.traces(self.work.record, [CASE])
        return self.work.text(), self.work.statuses()

    def test_kernel_time_within_tolerance_passes(self):
        text, st = self.run_traces(gpu_trace([10000, 10100, 10050, 9990, 10020]), raw_cuda(10000))
        result, detail = st[f"kernel time {CASE}"]
        self.assertEqual(result, "pass", detail)
        self.assertIn("strata 10.02 us vs raw 10.00 us (+0.2%; raw with kernel records only)", detail)
        self.assertIn(f"| {CASE} | 10.02 | 10.00 | +0.2% | PASS |", text)

    def test_kernel_time_off_by_five_percent_fails(self):
        _, st = self.run_traces(gpu_trace([10500] * 5), raw_cuda(10000))
        result, detail = st[f"kernel time {CASE}"]
        self.assertEqual(result, "fail")
        self.assertIn("+5.0%", detail)

    def test_different_kernels_are_named(self):
        text, st = self.run_traces(gpu_trace([10000] * 5), raw_cuda(10000, names=("other_gemm",)))
        self.assertEqual(st[f"kernel time {CASE}"][0], "pass")
        self.assertIn("ran different kernels", st[f"kernel time {CASE}"][1])
        self.assertIn("PASS (different kernels)", text)

    def test_conv_is_the_union_of_the_cudnn_kernels_held_against_the_raw_call_traced_alike(self):
        conv = "conv_32x64x56x56_k3p1_f32"
        doc = gpu_trace([150000, 147000, 149000, 151000, 148000],
                        kernel_names=("void fft2d_r2c_32x32<float>", "void bias_channels_kernel<float>"))
        steady = doc["steady"]
        steady["kernels"][0]["time"] = timing([10000] * 20)  # four launches per call: no per-call samples
        steady["kernels"][1]["time"] = timing([35000] * 5)
        steady["kernel_sum"] = timing([205000] * 5)
        raw = {"cases": [{"key": conv, "kernel": {"count": 500, "median_ns": 137530},
                          "kernel_api_traced": {"count": 500, "median_ns": 114000},
                          "kernel_sum": {"count": 500, "median_ns": 183500},
                          "kernels": [{"name": "void fft2d_r2c_32x32<float>"}]}]}
        self.work.write_json(conv, doc)
        self.work.write_json("raw_cuda", raw)
        checks.traces(self.work.record, [conv])
        result, detail = self.work.statuses()[f"kernel time {conv}"]
        # the gpu row less the bias kernel, call by call: median of 115, 112, 114, 116, 113 us
        self.assertEqual(result, "pass", detail)
        self.assertIn("strata 114.00 us vs raw 114.00 us (+0.0%; raw with CUPTI API records, as strata measures); "
                      "raw with kernel records only 137.53 us; kernel durations summed per call: strata 170.00 us, "
                      "raw 183.50 us (-7.4%)", detail)

    def test_strata_own_kernel_is_stated_not_compared(self):
        doc = gpu_trace([900] * 5, kernel_names=("relu_kernel<float>",))
        self.work.write_json("relu_1048576_f32", doc)
        self.work.write_json("raw_cuda", raw_cuda(10000))
        checks.traces(self.work.record, ["relu_1048576_f32"])
        st = self.work.statuses()
        self.assertEqual(st["kernel time relu_1048576_f32"],
                         ("info", "strata's own kernel, no library call to compare with: 0.90 us"))
        self.assertEqual(st["accounting relu_1048576_f32"][0], "pass")

    def test_the_cold_call_is_stated_with_its_parts(self):
        doc = gpu_trace([10000] * 5)
        for name, value in (("cold.handle_creation_ns", 250000), ("cold.algorithm_search_ns", 0),
                            ("cold.context_creation_ns", 90000000)):
            doc["figures"][name] = {"value": value, "unit": "ns"}
        text, st = self.run_traces(doc, raw_cuda(10000))
        result, detail = st[f"cold call {CASE}"]
        self.assertEqual(result, "info")
        self.assertRegex(detail, r"^rows [0-9.]+ us of a [0-9.]+ us wall \([0-9.]+\); handle creation 250.00 us$")
        self.assertIn("### The cold first call", text)

    def test_missing_raw_baseline_fails(self):
        text, st = self.run_traces(gpu_trace([10000] * 5), None)
        self.assertIn("No raw baseline", text)
        self.assertEqual(st[f"kernel time {CASE}"], ("fail", "missing the raw kernel time"))

    def test_missing_json_fails(self):
        self.work.write_json("raw_cuda", raw_cuda(10000))
        checks.traces(self.work.record, [CASE])
        self.assertEqual(self.work.statuses()[f"kernel time {CASE}"][0], "fail")
        self.assertIn("(no JSON)", self.work.text())

    def test_binding_dispatch_per_call(self):
        _, st = self.run_traces(gpu_trace([10000] * 5, binding_dispatch=200), raw_cuda(10000))
        self.assertEqual(st[f"binding+dispatch {CASE}"], ("pass", "0.200 us per call (<= 0.300)"))
        _, st = self.run_traces(gpu_trace([10000] * 5, binding_dispatch=400), raw_cuda(10000))
        self.assertEqual(st[f"binding+dispatch {CASE}"][0], "fail")

    def test_binding_dispatch_from_the_real_cpu_rows(self):
        # The fixture's own rows: binding [40 20 19 21 20] + dispatch [50 20 1 20 20] per call -> median 40 ns.
        _, st = self.run_traces(gpu_trace([10000] * 5), raw_cuda(10000))
        self.assertEqual(st[f"binding+dispatch {CASE}"], ("pass", "0.040 us per call (<= 0.300)"))

    def test_tracing_overhead_is_stated(self):
        doc = gpu_trace([10000] * 5)
        nodt = gpu_trace([10000] * 5)
        nodt["untraced_wall_median_ns"] = doc["untraced_wall_median_ns"] - 100
        _, st = self.run_traces(doc, raw_cuda(10000), nodt=nodt)
        result, detail = st[f"tracing overhead {CASE}"]
        self.assertEqual(result, "info")
        self.assertIn("0.10 us to call+sync", detail)
        os.remove(os.path.join(self.work.path, "json", CASE + ".nodt.json"))
        _, st = self.run_traces(doc, raw_cuda(10000))
        self.assertIn("no --no-device-timing run", st[f"tracing overhead {CASE}"][1])

    def test_every_kernel_accounted_for(self):
        _, st = self.run_traces(gpu_trace([10000] * 5), raw_cuda(10000))
        self.assertEqual(st[f"accounting {CASE}"][0], "pass")
        doc = gpu_trace([10000] * 5)
        doc["cold"]["unmatched_launches"] = 1
        _, st = self.run_traces(doc, raw_cuda(10000))
        self.assertEqual(st[f"accounting {CASE}"][0], "fail")
        self.assertIn("cold: device_records=True, unmatched launches 1", st[f"accounting {CASE}"][1])

    def test_unmatched_launches_say_where_they_were_made(self):
        doc = gpu_trace([10000] * 5)
        doc["cold"].update({"unmatched_launches": 52, "unmatched_launches_in_search": 50, "captured_launches": 3,
                            "unmatched_launch_zones": {"cudnnFindConvolutionForwardAlgorithmEx": 50,
                                                       "conv2d (cuda)": 2}})
        text, st = self.run_traces(doc, raw_cuda(10000))
        self.assertEqual(st[f"accounting {CASE}"][0], "fail")
        self.assertIn("unmatched launches 52 (50 of them inside an algorithm search; by zone: "
                      "cudnnFindConvolutionForwardAlgorithmEx: 50, conv2d (cuda): 2)", st[f"accounting {CASE}"][1])
        self.assertIn(f"| {CASE} | cold | True | 52 | 50 | 0 | 0 | 3 |", text)
        self.assertIn("52 unmatched launches and kernels (50 launches inside an algorithm search), 0 failed launches "
                      "(an error returned, no kernel expected), 3 captured launches",
                      st["confirm: no nested driver/runtime double count"][1])

    def test_captured_launches_alone_pass(self):
        doc = gpu_trace([10000] * 5)
        doc["cold"].update({"captured_launches": 26, "unmatched_launches_in_search": 0, "unmatched_launch_zones": {}})
        _, st = self.run_traces(doc, raw_cuda(10000))
        self.assertEqual(st[f"accounting {CASE}"][0], "pass")
        self.assertEqual(st["confirm: no nested driver/runtime double count"][0], "pass")

    def test_cupti_behaviour_confirmed_in_so_many_words(self):
        text, st = self.run_traces(gpu_trace([10000] * 5), raw_cuda(10000))
        self.assertIn("### CUPTI behaviour to confirm", text)
        for what in ("latency timestamps enabled before CUDA initialised",
                     "queued/submitted present and in order (queued <= submitted <= start)",
                     "CUPTI's timestamps on strata's clock (the timestamp callback works)",
                     "no dropped or untimed records", "no nested driver/runtime double count"):
            self.assertEqual(st[f"confirm: {what}"][0], "pass", what)
        self.assertEqual(st["confirm: latency timestamps enabled before CUDA initialised"][1],
                         "asked for before CUDA initialised in 1 of 1 runs")

        doc = gpu_trace([10000] * 5)
        doc["figures"]["cupti.latency_timestamps_before_init"]["value"] = 0
        doc["cold"]["timestamps"]["kernels_before_launch"] = 2
        doc["steady"]["timestamps"]["kernels_latency_disordered"] = 1
        doc["notes"] = ["CUPTI: latency timestamps enabled only after CUDA initialised"]
        _, st = self.run_traces(doc, raw_cuda(10000))
        self.assertEqual(st["confirm: latency timestamps enabled before CUDA initialised"][0], "fail")
        self.assertIn(f"only after, or not at all, in {CASE}",
                      st["confirm: latency timestamps enabled before CUDA initialised"][1])
        clock = st["confirm: CUPTI's timestamps on strata's clock (the timestamp callback works)"]
        self.assertEqual(clock, ("fail", "0 launch calls outside every host zone of their op, 2 kernels starting "
                                         "before their launch call (queue < 0) (over 2 phases with device records)"))
        self.assertEqual(st["confirm: queued/submitted present and in order (queued <= submitted <= start)"],
                         ("fail", "0 kernels without them, 1 out of order (over 2 phases with device records)"))
        self.assertEqual(st["confirm: CUPTI's own warnings"],
                         ("info", "CUPTI: latency timestamps enabled only after CUDA initialised"))

    def test_cupti_behaviour_without_the_checks_fails(self):
        # The CPU JSON as it is: no latency figures, no device records.
        _, st = self.run_traces(load_data("trace_relu_1024_cpu.json"), raw_cuda(10000))
        self.assertEqual(st["confirm: latency timestamps enabled before CUDA initialised"][0], "fail")
        self.assertIn("no cupti.latency_timestamps figures", st["confirm: latency timestamps enabled before CUDA initialised"][1])
        # Counts of 0 from phases without device records checked nothing: no pass.
        for what in ("queued/submitted present and in order (queued <= submitted <= start)",
                     "CUPTI's timestamps on strata's clock (the timestamp callback works)",
                     "no nested driver/runtime double count"):
            result, detail = st[f"confirm: {what}"]
            self.assertEqual(result, "fail", what)
            self.assertIn(f"(over 0 phases with device records; none in {CASE} steady, {CASE} cold)", detail)

    def test_cpu_run_has_no_device_records(self):
        # The real CPU JSON as it is: no device records, no gpu row.
        _, st = self.run_traces(load_data("trace_relu_1024_cpu.json"), raw_cuda(10000))
        self.assertEqual(st[f"accounting {CASE}"][0], "fail")
        self.assertEqual(st[f"kernel time {CASE}"], ("fail", "missing strata's gpu row"))

    def test_rehearsal_turns_verdicts_into_skips(self):
        _, st = self.run_traces(load_data("trace_relu_1024_cpu.json"), raw_cuda(10000), rehearsal=True)
        for check, (result, detail) in st.items():
            self.assertIn(result, ("skip", "info"), check)
        self.assertTrue(st[f"accounting {CASE}"][1].startswith("CPU rehearsal, not a validation: would be fail"))


class CompareChecks(unittest.TestCase):
    def setUp(self):
        self.work = WorkFolder()

    def tearDown(self):
        self.work.remove()

    def run_compare(self, doc, case="compare_relu_1024_k4"):
        self.work.write_json(case, doc)
        self.work.record.rehearsal = False
        checks.compare(self.work.record, [case])
        return self.work.text(), self.work.statuses()["compare relu 1024 K=4"]

    def test_cpu_plan_replay_has_no_device_records(self):
        text, (result, detail) = self.run_compare(load_data("compare_relu_1024_k4_cpu.json"))
        self.assertEqual(result, "fail", detail)  # no device records on the CPU
        self.assertIn("device records: eager False, replay False", detail)
        self.assertIn("| relu 1024 | 4 |", text)

    def test_graph_replay_needs_its_attribution(self):
        doc = load_data("compare_relu_1024_k4_cpu.json")
        doc["eager"]["device_records"] = doc["replay"]["device_records"] = True
        doc["replay"]["label"] = "CUDA Graph"
        doc["notes"] = []
        doc["figures"] = {}
        _, (result, detail) = self.run_compare(doc)
        self.assertEqual(result, "fail")
        self.assertIn("no graph attribution figures", detail)

        def attribution(attributed, replayed):
            return {"graph_replay.attributed_kernels": {"value": attributed, "unit": "count"},
                    "graph_replay.replayed_kernels": {"value": replayed, "unit": "count"}}

        doc["figures"] = attribution(64, 64)
        _, (result, detail) = self.run_compare(doc)
        self.assertEqual(result, "pass", detail)
        self.assertIn("attribution 64 of 64", detail)
        doc["figures"] = attribution(60, 64)
        _, (result, detail) = self.run_compare(doc)
        self.assertEqual(result, "fail")

    def test_graph_node_source_is_stated(self):
        doc = compare_doc(64, 64)
        doc["figures"]["graph_replay.attributed_by_capture_info"] = {"value": 16, "unit": "count"}
        self.work.write_json("compare_relu_1024_k4", doc)
        checks.compare(self.work.record, ["compare_relu_1024_k4"])
        what = "confirm: graph nodes attributed (GRAPHNODE_CREATED or the capture-info fallback)"
        self.assertEqual(self.work.statuses()[what],
                         ("pass", "64 of 64 replayed kernels over 1 runs: 48 through CUPTI's node callbacks, 16 "
                                  "through the capture-info fallback"))
        self.assertIn("**PASS**", self.work.text())

        # A CPU plan replay has no graph nodes to confirm.
        self.work.write_json("compare_relu_1024_k4", load_data("compare_relu_1024_k4_cpu.json"))
        checks.compare(self.work.record, ["compare_relu_1024_k4"])
        self.assertEqual(self.work.statuses()[what], ("fail", "no CUDA Graph comparison to read"))


class SweepChecks(unittest.TestCase):
    def setUp(self):
        self.work = WorkFolder()

    def tearDown(self):
        self.work.remove()

    def run_sweep(self, docs, rehearsal=False):
        for case, doc in docs.items():
            if doc is not None:
                self.work.write_json(case, doc)
        self.work.record.rehearsal = rehearsal
        checks.sweep(self.work.record, list(docs))
        return self.work.text(), self.work.statuses()

    def test_the_size_where_the_host_share_falls_under_five_percent(self):
        doc = gpu_sweep(host_share=lambda n: {16: 0.9, 32: 0.04, 64: 0.3}.get(n, 0.03))
        _, st = self.run_sweep({"sweep_matmul_16_1024": doc})
        result, detail = st["host under 5% (sweep matmul 16:1024)"]
        self.assertEqual(result, "info")
        self.assertRegex(detail, r"^from matmul 128\S* on \(host share 3.0% there\)$")  # 32 dips, 64 does not stay
        doc = gpu_sweep(host_share=lambda n: 0.5)
        _, st = self.run_sweep({"sweep_matmul_16_1024": doc})
        self.assertRegex(st["host under 5% (sweep matmul 16:1024)"][1], r"^at no size up to matmul 1024\S* \(host "
                                                                        r"share there 50.0%\)$")

    def test_case_names(self):
        self.assertEqual(checks.sweep_case_name("sweep_matmul_16_4096"), "matmul 16:4096")
        self.assertEqual(checks.sweep_case_name("sweep_relu_1k_16M_compare"), "relu 1k:16M --compare")

    def test_gpu_figures_at_every_size_and_the_host_share_at_1024_stated(self):
        doc = gpu_sweep(host_share=lambda n: 0.0432 if n == 1024 else 0.5)
        text, st = self.run_sweep({"sweep_matmul_16_1024": doc})
        self.assertEqual(st["sweep matmul 16:1024"], ("pass", "7 sizes, gpu figures at every size"))
        result, detail = st["host overhead at matmul 1024 (sweep matmul 16:1024)"]
        self.assertEqual(result, "info")
        self.assertTrue(detail.startswith("4.3% of the wall at matmul 1024 (host "), detail)
        self.assertIn("host = binding + dispatch + library + runtime + launch); issue 14 expected ~5%", detail)
        self.assertIn("#### strata sweep matmul 16:1024: f32 on cuda:0 (NVIDIA H100 80GB HBM3, sm_90), 7 sizes", text)
        self.assertIn("| size | compute (us) | host (us) | wall (us) | host share |", text)
        self.assertIn("| 1024 | 64.00 | ", text)  # gpu row: 1000 * 1024 / 16 ns
        self.assertIn("| 4.3% |", text)
        self.assertIn("**Host overhead at 1024** (issue 14): 4.3% of the wall", text)
        self.assertIn("- crossover: host overhead", text)

    def test_a_size_without_gpu_figures_fails(self):
        doc = gpu_sweep(gpu_ns=lambda n: 0.0 if n in (16, 512) else 100.0)
        _, st = self.run_sweep({"sweep_matmul_16_1024": doc})
        self.assertEqual(st["sweep matmul 16:1024"], ("fail", "no gpu figures at 16, 512"))

    def test_a_cpu_sweep_is_no_gpu_run(self):
        _, st = self.run_sweep({"sweep_matmul_16_1024": load_data("sweep_matmul_16_1024_cpu.json")})
        result, detail = st["sweep matmul 16:1024"]
        self.assertEqual(result, "fail")
        self.assertIn("(the compute row is 'library': not a GPU run)", detail)
        _, st = self.run_sweep({"sweep_matmul_16_1024": load_data("sweep_matmul_16_1024_cpu.json")}, rehearsal=True)
        self.assertEqual(st["sweep matmul 16:1024"][0], "skip")

    def test_compare_columns_and_missing_compare_figures(self):
        doc = gpu_sweep("sweep_relu_1k_16k_compare_cpu.json")
        del doc["points"][2]["compare"]
        text, st = self.run_sweep({"sweep_relu_1k_16k_compare": doc})
        self.assertIn("| eager/op (us) | plan replay/op (us) | speed-up | noise |", text)
        self.assertIn("| 0.26 | 0.17 | 1.47x | 62% |", text)
        self.assertIn("| 4096 | 256.00 | 0.04 | 0.38 | 10.5% | - | - | - | - |", text)
        self.assertEqual(st["sweep relu 1k:16k --compare"], ("fail", "no eager/replay figures at 4096"))
        # the issue-14 line is about matmul only
        self.assertFalse(any(k.startswith("host overhead") for k in st), st)

    def test_missing_json_fails(self):
        text, st = self.run_sweep({"sweep_matmul_16_4096": None})
        result, detail = st["sweep matmul 16:4096"]
        self.assertEqual(result, "fail")
        self.assertIn("sweep_matmul_16_4096.json", detail)
        self.assertIn("no JSON", text)


def figures(**values):
    return {name.replace("__", "."): {"value": v, "unit": "count"} for name, v in values.items()}


def compare_doc(replayed, attributed, notes=()):
    mode = {"wall": 10000.0, "device_records": True}
    return {"eager": dict(mode, label="eager"), "replay": dict(mode, label="CUDA Graph"),
            "speedup_wall_per_op": 1.5, "verdict": "v", "notes": list(notes),
            "figures": figures(graph_replay__replayed_kernels=replayed, graph_replay__attributed_kernels=attributed,
                               device_timing__enabled=1)}


def trace_doc(dropped=0, untimed=0):
    measured = {"median": 1000, "samples": [1000]}
    phase = {"calls": 1, "rows": [{"layer": name, "applicable": True, "time": measured}
                                  for name in ("launch", "queue", "gpu")],
             "kernels": [], "device_records": True, "unmatched_launches": 0, "unmatched_kernels": 0}
    return {"steady": phase, "cold": phase, "notes": ["a note that says nothing the script reads"],
            "figures": figures(device_timing__enabled=1, cupti__dropped_records=dropped,
                               cupti__untimed_records=untimed)}


class FiguresNotProse(unittest.TestCase):
    """Graph attribution and CUPTI problems are read from the JSON's figures (Note [Figures, not prose] in
    reports/model/figures.h), never from the notes' wording."""
    def run_case(self, command, case, doc):
        work = WorkFolder()
        try:
            work.write_json(case, doc)
            getattr(checks, command)(work.record, [case])
            return work.text(), [list(c) for c in work.record.checks]
        finally:
            work.remove()

    def test_attribution_from_figures(self):
        out, status = self.run_case("compare", "compare_matmul_1024_k8", compare_doc(8, 8))
        self.assertIn("| 8 of 8 |", out)
        self.assertEqual(status[0][1], "pass")
        # A note that looks like an attribution count is not read: only the figures count.
        out, status = self.run_case("compare", "compare_matmul_1024_k8",
                                    compare_doc(8, 6, notes=["graph replay: 8 of 8 replayed kernels attributed"]))
        self.assertEqual(status[0][1], "fail")
        self.assertIn("graph attribution 6 of 8", status[0][2])

    def test_no_replayed_kernels(self):
        _, status = self.run_case("compare", "compare_relu_1024_k8", compare_doc(0, 0))
        self.assertEqual(status[0][1], "fail")
        self.assertIn("CUPTI reported no replayed kernels", status[0][2])

    def test_dropped_records_from_figures(self):
        _, status = self.run_case("traces", "matmul_1024_f32", trace_doc(dropped=3))
        accounting = [s for s in status if s[0] == "accounting matmul_1024_f32"][0]
        self.assertEqual(accounting[1], "fail")
        self.assertIn("CUPTI dropped 3 activity records (its buffers were full)", accounting[2])
        _, status = self.run_case("traces", "matmul_1024_f32", trace_doc())
        accounting = [s for s in status if s[0] == "accounting matmul_1024_f32"][0]
        self.assertEqual(accounting[1], "pass")

    def test_rows_and_kernel_geometry_must_be_measured(self):
        doc = trace_doc()
        doc["steady"] = dict(doc["steady"], rows=doc["steady"]["rows"][:2],
                             kernels=[{"name": "relu_kernel<float>", "grid": [0, 1, 1], "block": [256, 1, 1],
                                       "registers_per_thread": 16, "shared_bytes": 0, "time": {"median": 900}}])
        text, status = self.run_case("traces", "relu_1048576_f32", doc)
        accounting = [s for s in status if s[0] == "accounting relu_1048576_f32"][0]
        self.assertEqual(accounting[1], "fail")
        self.assertIn("gpu row not measured", accounting[2])
        self.assertIn("kernel relu_kernel<float> without its launch geometry", accounting[2])
        self.assertIn("| relu_1048576_f32 | `relu_kernel<float>` | 0x1x1 | 256x1x1 | 16 | 0 | 0.90 |", text)
        # Without its gpu row even strata's own kernel has no time to state.
        kernel_time = [s for s in status if s[0] == "kernel time relu_1048576_f32"]
        self.assertEqual(kernel_time, [["kernel time relu_1048576_f32", "fail", "missing strata's gpu row"]])

    def test_gpu_timing_off_only_matters_on_a_cuda_session(self):
        doc = trace_doc()
        doc["figures"]["device_timing.enabled"]["value"] = 0
        _, status = self.run_case("traces", "relu_1024_f32", doc)  # a CPU run: no "GPU timing" in its environment
        self.assertEqual([s for s in status if s[0] == "accounting relu_1024_f32"][0][1], "pass")
        doc["environment"] = {"device": {"GPU timing": "off: Nsight Systems holds CUPTI"}}
        _, status = self.run_case("traces", "relu_1024_f32", doc)
        accounting = [s for s in status if s[0] == "accounting relu_1024_f32"][0]
        self.assertEqual(accounting[1], "fail")
        self.assertIn("GPU timing unavailable: Nsight Systems holds CUPTI; launch, queue and gpu rows are not "
                      "measured (host timers only)", accounting[2])



def by_fused_kernel(kernels=6, unattributed=0, groups=((3, "fused_matmul_relu"), (3, "fused_add")), names=()):
    """A `by_fused_kernel` object as strata writes it (docs/compiled.md)."""
    return {"kernels": kernels, "attributed_kernels": kernels - unattributed, "unattributed_kernels": unattributed,
            "unattributed_names": list(names),
            "groups": [{"kernel": f"k{i}", "name": name, "ops": [], "device_kernels": n, "gpu_ns": 100.0 * n,
                        "device_kernel_names": [name]} for i, (n, name) in enumerate(groups)]}


def compiled_compare_doc(replayed=6, attributed=6, kind="CUDA Graph", passed=True, by_fused=None):
    return {"check": {"passed": passed},
            "three_way": {"eager": {"wall_ns": 9000.0}, "graph": {"wall_ns": 7000.0},
                          "compiled": {"label": "compiled+graph", "wall_ns": 4000.0},
                          "compiled_replay": {"kind": kind, "forwards_captured": 2, "replayed_kernels": replayed,
                                              "attributed_kernels": attributed,
                                              "by_fused_kernel": by_fused_kernel() if by_fused is None else by_fused}}}


class CompiledReplayChecks(unittest.TestCase):
    def setUp(self):
        self.work = WorkFolder()

    def tearDown(self):
        self.work.remove()

    def run_case(self, doc, case="compiled_compare_gelu_tanh_1048577_f32"):
        self.work.write_json(case, doc)
        checks.compiled_replay(self.work.record, [case])
        return self.work.text(), self.work.statuses()["compiled replay " + case]

    def test_every_replayed_kernel_attributed_passes(self):
        text, (result, detail) = self.run_case(compiled_compare_doc())
        self.assertEqual(result, "pass", detail)
        self.assertIn("| compiled_compare_gelu_tanh_1048577_f32 | 4.00 | 6 | 6 | 6 | PASS |", text)

    def test_what_fails_and_why(self):
        no_column = compiled_compare_doc()
        no_column["three_way"]["compiled"] = None
        no_column["three_way"]["compiled_unavailable"] = "no C++ compiler"
        for doc, why in ((compiled_compare_doc(attributed=5), "5 of 6 replayed compiled kernels attributed"),
                         (compiled_compare_doc(replayed=0, attributed=0), "no replayed kernel"),
                         (compiled_compare_doc(kind=None), "compiled replay kind None"),
                         (compiled_compare_doc(passed=False), "--check failed"),
                         (compiled_compare_doc(by_fused={}), "no by_fused_kernel attribution"),
                         (compiled_compare_doc(by_fused=by_fused_kernel(unattributed=1, names=["mystery"])),
                          "1 compiled kernels attributed to no fused kernel (mystery)"),
                         (compiled_compare_doc(by_fused=by_fused_kernel(kernels=5)),
                          "5 device kernels attributed by fused kernel, 6 ran"),
                         (compiled_compare_doc(by_fused=by_fused_kernel(groups=((6, "fused_matmul_relu"),
                                                                               (0, "fused_add")))),
                          "fused kernel k1 fused_add: 0 device kernels for 2 forwards"),
                         (no_column, "no compiled column: no C++ compiler")):
            _, (result, detail) = self.run_case(doc)
            self.assertEqual(result, "fail")
            self.assertIn(why, detail)

    def test_missing_json_fails(self):
        _, (result, detail) = self.run_case_missing()
        self.assertEqual(result, "fail")
        self.assertIn("compiled_compare_x.json", detail)

    def run_case_missing(self):
        checks.compiled_replay(self.work.record, ["compiled_compare_x"])
        return None, self.work.statuses()["compiled replay compiled_compare_x"]

class CompiledTraceAttributionChecks(unittest.TestCase):
    def setUp(self):
        self.work = WorkFolder()

    def tearDown(self):
        self.work.remove()

    def run_case(self, doc, case="compiled_relu_matmul_1024_f32"):
        self.work.write_json(case, doc)
        checks.compiled_trace_attribution(self.work.record, [case])
        return self.work.text(), self.work.statuses()["compiled attribution " + case]

    def test_every_kernel_attributed_passes(self):
        text, (result, detail) = self.run_case({"compiled": {"by_fused_kernel": by_fused_kernel()}})
        self.assertEqual(result, "pass", detail)
        self.assertIn("| compiled_relu_matmul_1024_f32 | 6 | 6 | PASS |", text)

    def test_what_fails_and_why(self):
        for doc, why in (({"compiled": {}}, "no compiled.by_fused_kernel in the JSON"),
                         ({"compiled": {"by_fused_kernel": by_fused_kernel(kernels=0, groups=())}},
                          "no device kernel of the timed calls"),
                         ({"compiled": {"by_fused_kernel": by_fused_kernel(unattributed=2, names=["a", "b"])}},
                          "2 compiled kernels attributed to no fused kernel (a, b)")):
            _, (result, detail) = self.run_case(doc)
            self.assertEqual(result, "fail")
            self.assertIn(why, detail)

    def test_missing_json_fails(self):
        checks.compiled_trace_attribution(self.work.record, ["compiled_x"])
        result, detail = self.work.statuses()["compiled attribution compiled_x"]
        self.assertEqual(result, "fail")
        self.assertIn("compiled_x.json", detail)


if __name__ == "__main__":
    unittest.main()
