#!/usr/bin/env python3
"""bench/gpu_validate_analyze.py reads graph attribution and CUPTI problems from the JSON's figures
(Note [Figures, not prose] in reports/figures.h), not from the notes' wording."""
import contextlib
import io
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import gpu_validate_analyze as analyze  # noqa: E402


def figures(**values):
    return {name.replace("__", "."): {"value": v, "unit": "count"} for name, v in values.items()}


def compare_doc(replayed, attributed, notes=()):
    mode = {"wall": 10000.0, "device_records": True}
    return {"eager": dict(mode, label="eager"), "replay": dict(mode, label="CUDA Graph"),
            "speedup_wall_per_op": 1.5, "verdict": "v", "notes": list(notes),
            "figures": figures(graph_replay__replayed_kernels=replayed, graph_replay__attributed_kernels=attributed,
                               device_timing__enabled=1)}


def trace_doc(dropped=0, untimed=0):
    phase = {"calls": 1, "rows": [], "kernels": [], "device_records": True, "unmatched_launches": 0,
             "unmatched_kernels": 0}
    return {"steady": phase, "cold": phase, "notes": ["a note that says nothing the script reads"],
            "figures": figures(device_timing__enabled=1, cupti__dropped_records=dropped,
                               cupti__untimed_records=untimed)}


class AnalyzeTest(unittest.TestCase):
    def run_case(self, command, case, doc):
        with tempfile.TemporaryDirectory() as work:
            os.makedirs(os.path.join(work, "json"))
            with open(os.path.join(work, "json", case + ".json"), "w") as f:
                json.dump(doc, f)
            with contextlib.redirect_stdout(io.StringIO()) as out:
                analyze.main(["gpu_validate_analyze.py", command, work, case])
            with open(os.path.join(work, "status.tsv")) as f:
                return out.getvalue(), [line.rstrip("\n").split("\t") for line in f]

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


if __name__ == "__main__":
    unittest.main()
