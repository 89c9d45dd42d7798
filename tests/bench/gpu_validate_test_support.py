"""Shared by the tests of scripts/gpu-validate: its modules (scripts/gpu_validate) on sys.path, a scratch work
folder laid out as the validation lays it out with the Record of a run in it, and GPU-shaped JSON made from
real CPU runs of strata.

data/trace_relu_1024_cpu.json is `strata trace relu 1024 --repeat 5 --warmup 1 --json` and
data/compare_relu_1024_k4_cpu.json `strata compare relu 1024 --repeat 5 --warmup 1 --ops-per-graph 4 --json`,
both on the CPU; data/sweep_matmul_16_1024_cpu.json is `strata sweep matmul 16:1024 --repeat 3 --warmup 1
--json` and data/sweep_relu_1k_16k_compare_cpu.json `strata sweep relu 1k:16k --compare --repeat 3 --warmup 1
--json`. A CPU run has no kernels and its gpu row is not applicable: `gpu_trace` fills in what a GPU
run adds, so the analysis reads the JSON strata really writes, with GPU figures we choose.
"""
import copy
import json
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "scripts", "gpu_validate"))
sys.dont_write_bytecode = True


def load_data(name):
    with open(os.path.join(HERE, "data", name)) as f:
        return json.load(f)


def timing(samples):
    s = sorted(samples)
    return {"count": len(s), "min": s[0], "max": s[-1], "mean": sum(s) / len(s),
            "median": s[(len(s) + 1) // 2 - 1], "p90": s[-1], "samples": list(samples), "unit": "ns"}


def gpu_trace(kernel_samples, kernel_names=("sm90_xmma_gemm_f32f32_tn",), binding_dispatch=None):
    """The CPU trace made to look like a GPU one: the gpu row's per-call samples, one kernel record per name
    (each with the same samples), device records in both phases. binding_dispatch (ns per call) replaces the
    binding and dispatch samples."""
    doc = load_data("trace_relu_1024_cpu.json")
    calls = doc["steady"]["calls"]
    assert len(kernel_samples) == calls
    for phase in ("steady", "cold"):
        b = doc[phase]
        b["device_records"] = True
        b["unmatched_launches"] = 0
        b["unmatched_kernels"] = 0
        b["timestamps"] = {"launches_outside_zones": 0, "kernels_before_launch": 0, "kernels_without_latency": 0,
                           "kernels_latency_disordered": 0}
        n = b["calls"]
        b["kernels"] = [{"name": name, "grid": [128, 8, 1], "block": [256, 1, 1], "registers_per_thread": 128,
                         "shared_bytes": 49152, "time": timing(kernel_samples[:n])} for name in kernel_names]
        for row in b["rows"]:
            if row["layer"] == "gpu":
                row.update(applicable=True, names=list(kernel_names), time=timing(kernel_samples[:n]))
            if row["layer"] in ("launch", "queue"):  # measured from CUPTI's API and kernel records on a GPU
                row.update(applicable=True, time=timing([3000] * n))
            if binding_dispatch is not None and phase == "steady" and row["layer"] in ("binding", "dispatch"):
                row["time"] = timing([binding_dispatch / 2] * n)
    doc.setdefault("figures", {})["cupti.latency_timestamps_before_init"] = {"value": 1, "unit": "bool"}
    return doc


def gpu_sweep(name="sweep_matmul_16_1024_cpu.json", gpu_ns=None, host_share=None):
    """A CPU sweep made to look like a GPU one: compute row "gpu" with a gpu row per size (gpu_ns(size) ns,
    default 1000 * size / 16), the host share per size from host_share(size) (default unchanged)."""
    doc = load_data(name)
    doc["compute_row"] = "gpu"
    doc["device"] = "cuda:0 (NVIDIA H100 80GB HBM3, sm_90)"
    doc["host_rows"] = "binding + dispatch + library + runtime + launch"
    doc["notes"] = []
    for p in doc["points"]:
        ns = gpu_ns(p["size"]) if gpu_ns else 1000.0 * p["size"] / 16
        p["rows"] = [r for r in p["rows"] if r["row"] != "library"] + [{"row": "gpu", "median_ns": ns, "p90_ns": ns}]
        if host_share:
            p["host_share"] = host_share(p["size"])
    return doc


class WorkFolder:
    """A scratch folder with json/ and logs/, removed afterwards, and the Record of a run that started at
    t = 1000 s writing there."""

    def __init__(self):
        from record import Record  # after the path above
        self.path = tempfile.mkdtemp(prefix="gpu-validate-test-")
        os.makedirs(os.path.join(self.path, "json"))
        os.makedirs(os.path.join(self.path, "logs"))
        self.record = Record(self.path, start=1000)

    def timing(self, name, secs, rc):
        self.record.timings.append((name, secs, str(rc)))

    def text(self):
        """The markdown the checks and tables added."""
        return "".join(self.record.body)

    def write_json(self, name, doc):
        with open(os.path.join(self.path, "json", name + ".json"), "w") as f:
            json.dump(doc, f)

    def write(self, relpath, text):
        with open(os.path.join(self.path, relpath), "a") as f:
            f.write(text)

    def read(self, relpath):
        with open(os.path.join(self.path, relpath)) as f:
            return f.read()

    def statuses(self):
        """{check: (result, detail)} of the Record's summary."""
        return {check: (result, detail) for check, result, detail in self.record.checks}

    def remove(self):
        shutil.rmtree(self.path, ignore_errors=True)


def copy_of(doc):
    return copy.deepcopy(doc)
