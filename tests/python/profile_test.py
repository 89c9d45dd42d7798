"""tests/python: strata.profile() and the python / pybind11 rows (Note [The python and pybind11 rows]).

Runs under ctest with PYTHONPATH pointing at build/python; STRATA_BIN, when set, is the strata CLI used
to check the exported Chrome trace (strata check-trace). No timing assertions: the figures are checked
for structure (every call's rows add up to its wall, spans nest as the layers do), not for speed.
"""
import json
import os
import re
import subprocess
import tempfile
import threading
import unittest

import numpy as np

import strata
from strata import _ops

ROWS_FROM_PYTHON = ["python", "pybind11", "binding", "dispatch", "library"]


def format_ns(ns):
    """A duration as the tables print it (reports::format_ns)."""
    if abs(ns) < 1e6:
        return f"{ns / 1e3:.2f} us"
    if abs(ns) < 1e9:
        return f"{ns / 1e6:.2f} ms"
    return f"{ns / 1e9:.3f} s"


def blocks_of(text):
    """The table's blocks, one per operator, by the operator each header names."""
    blocks = {}
    for block in text.strip("\n").split("\n\n"):
        lines = block.split("\n")
        blocks[lines[0].split("  ")[0]] = lines
    return blocks


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class ProfileTest(unittest.TestCase):
    def setUp(self):
        self.a = strata.randn(16, 16, seed=11)
        self.b = strata.randn(16, 16, seed=12)

    def test_rows_of_a_matmul(self):
        with strata.profile() as p:
            for _ in range(50):
                c = strata.matmul(self.a, self.b)
        ref = self.a.numpy().astype(np.float64) @ self.b.numpy().astype(np.float64)
        self.assertLess(np.abs(c.numpy() - ref).max(), 1e-4)  # profiling changes nothing in the result
        self.assertEqual(p.calls, 50)
        doc = p.json()
        self.assertEqual(doc["calls"], 50)
        self.assertEqual(len(doc["ops"]), 1)
        rep = doc["ops"][0]
        self.assertEqual(rep["op"], "strata.matmul")
        rows = [r for r in rep["steady"]["rows"] if r["applicable"]]
        self.assertEqual([r["layer"] for r in rows], ROWS_FROM_PYTHON)
        self.assertEqual(rows[0]["names"], ["strata.matmul"])
        self.assertEqual(rows[1]["names"], ["_strata._op"])  # the hot entry (crossing.cpp)
        for r in rows:
            self.assertEqual(r["time"]["count"], 50, r["layer"])
            self.assertTrue(all(x >= 0 for x in r["time"]["samples"]), r["layer"])
        self.assertGreater(rows[0]["time"]["median"], 0)
        self.assertGreater(rows[1]["time"]["median"], 0)
        # The spans of one call nest (python > pybind11 > binding > ...), so the rows' self times add up
        # to the call's wall, call by call (up to the rounding of each tick -> ns conversion).
        walls = rep["steady"]["wall"]["samples"]
        for i, wall in enumerate(walls):
            total = sum(r["time"]["samples"][i] for r in rows)
            self.assertAlmostEqual(total, wall, delta=8, msg=f"call {i}")

    def test_the_pybind11_row_names_the_entry_the_call_took(self):
        # Note [Two entries into the extension]: a keyword away from its default, or a value that needs a
        # conversion, goes through pybind11's dispatcher into _strata.call; the plain call through _op.
        with strata.profile() as p:
            strata.add(self.a, self.b)
            strata.add(self.a, self.b, alpha=2.0)
            strata.add(self.a, self.b, alpha=2)  # an int for a float: converted on the general path
        spans = [s for s in p.spans() if s[0] == "pybind11"]
        self.assertEqual([s[1] for s in spans], ["_strata._op", "_strata.call", "_strata.call"])

    def test_spans_nest_as_the_layers_do(self):
        with strata.profile() as p:
            strata.matmul(self.a, self.b)
            strata.matmul(self.a, self.b)
        spans = p.spans()
        by_op = {}
        for i, (layer, name, begin, end, parent, op) in enumerate(spans):
            self.assertLessEqual(begin, end)
            by_op.setdefault(op, []).append((i, layer, parent))
        self.assertEqual(sorted(by_op), [1, 2])  # each call its own op id
        self.assertEqual(p.call_ops(), [(1, "matmul"), (2, "matmul")])
        for op, items in by_op.items():
            layers = {layer: (i, parent) for i, layer, parent in items}
            self.assertEqual(layers["python"][1], -1)
            self.assertEqual(layers["pybind11"][1], layers["python"][0])
            self.assertEqual(layers["binding"][1], layers["pybind11"][0])

    def test_table_has_one_block_per_operator(self):
        with strata.profile() as p:
            for _ in range(3):
                strata.add(self.a, self.b)
                strata.matmul(self.a, self.b)
        text = p.table()
        doc = p.json()
        self.assertEqual([o["op"] for o in doc["ops"]], ["strata.add", "strata.matmul"])  # first-called order
        blocks = blocks_of(text)
        self.assertEqual(list(blocks), ["strata.add", "strata.matmul"])
        for rep in doc["ops"]:
            lines = blocks[rep["op"]]
            self.assertEqual(rep["repeat"], 3)
            # The header: the operator and its description (the first call's arguments, the call count).
            self.assertTrue(lines[0].startswith(rep["op"] + "  " + rep["description"]), lines[0])
            self.assertTrue(rep["description"].startswith("(Tensor[16x16] f32 cpu, Tensor[16x16] f32 cpu)"))
            # A line per row of the report, in its order, with the row's median; then the wall's.
            rows = rep["steady"]["rows"]
            table_rows = lines[2:2 + len(rows)]
            self.assertEqual([line.split()[0] for line in table_rows], [r["layer"] for r in rows])
            self.assertEqual([r["layer"] for r in rows if r["applicable"]], ROWS_FROM_PYTHON)
            for row, line in zip(rows, table_rows):
                if row["applicable"]:
                    self.assertIn(format_ns(row["time"]["median"]), line)
            wall = lines[2 + len(rows)]
            self.assertTrue(wall.startswith("wall "), wall)
            self.assertIn(format_ns(rep["steady"]["wall"]["median"]), wall)
            # The wall is timed from Python's entry: what the row says it spans is the point.
            self.assertIn("python entry -> return", wall)

    def test_chrome_trace(self):
        with strata.profile() as p:
            for _ in range(5):
                strata.matmul(self.a, self.b)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "t.json")
            p.export_chrome_trace(path)
            with open(path) as f:
                doc = json.load(f)
            cats = {e.get("cat") for e in doc["traceEvents"]}
            self.assertTrue({"python", "pybind11", "binding", "dispatch", "library"} <= cats, cats)
            steps = [e for e in doc["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#")]
            self.assertEqual(len(steps), 5)
            cli = os.environ.get("STRATA_BIN")
            if cli:
                r = subprocess.run([cli, "check-trace", path], capture_output=True, text=True)
                self.assertEqual(r.returncode, 0, r.stderr)
            # Unwritable places: a clear error naming the path, and nothing written.
            for bad in (os.path.join(d, "missing", "t.json"), d, ""):
                with self.assertRaises(strata.UsageError) as cm:
                    p.export_chrome_trace(bad)
                self.assertIn(repr(bad)[1:-1] if bad else "empty", str(cm.exception))
            self.assertEqual(sorted(os.listdir(d)), ["t.json"])
        with self.assertRaises(TypeError):
            p.export_chrome_trace(3)

    def test_the_same_words_as_strata_trace_frontend_python(self):
        # One report builder (Note [One report builder]): the rows strata.profile() and `strata trace
        # --frontend python` both have are worded alike. The library row differs on purpose: trace knows
        # the GEMM's shape and that the call allocated its output.
        cli = os.environ.get("STRATA_BIN")
        if not cli:
            self.skipTest("STRATA_BIN not set")
        r = subprocess.run([cli, "trace", "matmul", "16", "--frontend", "python", "--repeat", "20"],
                           capture_output=True, text=True)
        if r.returncode == 4:  # the program's Python module is not built here
            self.skipTest(r.stderr.strip())
        self.assertEqual(r.returncode, 0, r.stderr)
        with strata.profile() as p:
            for _ in range(20):
                strata.matmul(self.a, self.b)

        def words(table):
            # The row's label and words, without the figures (the first duration on the line and after).
            rows = {}
            for line in table.splitlines():
                m = re.match(r"^(python|pybind11|binding|dispatch|launch|queue|gpu|wall)\s+(.*?)(\s+[0-9.]+ [mun]?s\*?\s.*)?$",
                             line)
                if m:
                    rows[m.group(1)] = m.group(2).rstrip()
            return rows

        from_cli, from_profile = words(r.stdout), words(p.table())
        self.assertEqual(set(from_cli), {"python", "pybind11", "binding", "dispatch", "launch", "queue", "gpu", "wall"})
        self.assertEqual(from_profile, from_cli)

    def test_errors_inside_a_profile_are_python_exceptions(self):
        wrong = strata.randn(3, 5, seed=1)
        with strata.profile() as p:
            with self.assertRaises(strata.UsageError) as cm:
                strata.matmul(self.a, wrong)  # shapes that do not multiply: the C++ layers refuse
            self.assertIsInstance(cm.exception, ValueError)
            with self.assertRaises(TypeError):
                strata.matmul(self.a, 3)  # a wrong Python type: the frontend refuses
            with self.assertRaises(TypeError):
                strata.matmul(self.a)  # missing: the general path refuses, quoting the schema
            with self.assertRaises(TypeError):
                strata.matmul(self.a, self.b, bogus=1)  # CPython refuses before the function runs: no call
            strata.matmul(self.a, self.b)
        # Every call, failed or not, closed its spans: the last call's python span is a root again.
        spans = p.spans()
        self.assertTrue(all(end >= begin for _, _, begin, end, _, _ in spans))
        roots = [s for s in spans if s[0] == "python"]
        self.assertEqual(len(roots), 4)
        self.assertTrue(all(s[4] == -1 for s in roots))
        # The failed calls stopped before the crossing (TypeError) or inside the layers (UsageError).
        self.assertEqual(sum(1 for s in spans if s[0] == "pybind11"), 2)
        # The three that raised are counted apart from the one that returned (Note in probes.h: _exit_failed).
        self.assertEqual((p.calls, p.failed_calls), (1, 3))
        self.assertEqual(len(p.call_ops()), 4)
        doc = p.json()
        self.assertEqual((doc["calls"], doc["failed_calls"]), (1, 3))
        self.assertEqual(doc["failed"], [{"op": "strata.matmul", "calls": 3}])
        self.assertEqual(doc["ops"][0]["repeat"], 1)
        self.assertEqual(doc["ops"][0]["figures"]["python.failed_calls"], {"value": 3, "unit": "count"})
        # The table's header counts the call that returned and the ones left out, as the report does.
        self.assertEqual(blocks_of(p.table())["strata.matmul"][0].split("  ")[2],
                         "1 call from Python (+3 that raised, left out) (arguments of the first)")

    def test_failed_calls_stay_out_of_the_figures(self):
        # 50 good matmuls and 80 calls that raise inside the C++ layers: the report is of the 50 alone.
        # An operator whose every call raised gets a line, no breakdown.
        wrong = strata.randn(3, 5, seed=13)
        with strata.profile() as p:
            for i in range(130):
                try:
                    strata.matmul(self.a, self.b if i % 13 < 5 else wrong)
                except strata.UsageError:
                    pass
            for _ in range(7):
                with self.assertRaises(strata.UsageError):
                    strata.add(self.a, wrong)
        self.assertEqual((p.calls, p.failed_calls), (50, 87))
        doc = p.json()
        self.assertEqual([o["op"] for o in doc["ops"]], ["strata.matmul"])
        self.assertEqual(doc["ops"][0]["repeat"], 50)
        self.assertEqual(len(doc["ops"][0]["steady"]["wall"]["samples"]), 50)
        self.assertEqual(doc["failed"], [{"op": "strata.matmul", "calls": 80}, {"op": "strata.add", "calls": 7}])
        table = p.table()
        blocks = blocks_of(table)
        self.assertEqual(blocks["strata.matmul"][0].split("  ")[2],
                         "50 calls from Python (+80 that raised, left out) (arguments of the first)")
        # An operator with no call that returned has no block, one line that says why (its wording is the
        # point: the calls are in no figure); one with a block has no such line (its block says it).
        self.assertEqual(len(blocks), 2)
        self.assertTrue(list(blocks)[1].startswith("strata.add: 7 calls raised an exception"), list(blocks))
        self.assertNotIn("strata.matmul: 80 calls raised", table)

    def test_misuse_is_refused_clearly(self):
        p = strata.profile()
        with self.assertRaises(strata.UsageError):
            p.table()  # nothing recorded
        with p:
            with self.assertRaises(strata.UsageError) as cm:
                with strata.profile():
                    pass
            self.assertIn("do not nest", str(cm.exception))
            with self.assertRaises(strata.UsageError) as cm:
                p.table()
            self.assertIn("still recording", str(cm.exception))
            strata.relu(self.a)
        self.assertFalse(_ops._rows_on)  # the rows are off again after the block
        with self.assertRaises(strata.UsageError):
            with p:  # a profile records once
                pass
        self.assertFalse(_ops._rows_on)
        self.assertEqual(list(blocks_of(p.table())), ["strata.relu"])
        with strata.profile():
            self.assertEqual(list(blocks_of(p.table())), ["strata.relu"])  # a finished profile reads inside another one
        with strata.profile():
            with self.assertRaises(strata.UsageError):
                strata.profile.crosscheck(calls=1, batches=1)  # the cross-check runs untraced

    def test_no_timeline_no_spans(self):
        # Rows on with no profile (an embedder that has not activated a timeline): the probes do nothing.
        previous = _ops.set_rows(True)
        try:
            c = strata.matmul(self.a, self.b)
        finally:
            _ops.set_rows(previous)
        self.assertEqual(c.shape, (16, 16))

    def test_other_threads_are_not_recorded(self):
        out = []
        with strata.profile() as p:
            t = threading.Thread(target=lambda: out.append(strata.matmul(self.a, self.b)))
            t.start()
            t.join()
            strata.add(self.a, self.b)
        self.assertEqual(len(out), 1)
        self.assertEqual(p.call_ops(), [(1, "add")])

    def test_a_profile_ending_on_another_thread_does_not_stop_this_one(self):
        # Thread B's profile starts first; thread A's starts next and records 200 calls, and B's ends
        # after A's first 100. A's profile must count all 200 (it counted 100 when a profile's exit put
        # the rows back to what they were when it started, off, for every thread: Note [One switch for
        # the rows, many threads] in strata/_ops.py).
        b_started, halfway, b_done = threading.Event(), threading.Event(), threading.Event()
        results = {}

        def b():
            with strata.profile() as pb:
                strata.relu(self.a)
                b_started.set()
                halfway.wait()
            results["b"] = (pb.calls, pb.failed_calls)
            b_done.set()

        t = threading.Thread(target=b)
        t.start()
        b_started.wait()
        with strata.profile() as pa:
            for i in range(200):
                if i == 100:
                    halfway.set()
                    b_done.wait()
                strata.matmul(self.a, self.b)
        t.join()
        self.assertEqual(results["b"], (1, 0))
        self.assertEqual((pa.calls, pa.failed_calls), (200, 0))
        self.assertEqual(pa.json()["ops"][0]["repeat"], 200)
        rows = {r["layer"] for r in pa.json()["ops"][0]["steady"]["rows"] if r.get("applicable")}
        self.assertTrue({"python", "pybind11"} <= rows, rows)
        self.assertFalse(_ops._rows_on)  # off again once no profile records

    def test_a_profile_belongs_to_the_thread_that_entered_it(self):
        p = strata.profile()
        p.__enter__()
        errors = []

        def other():
            try:
                p.__exit__(None, None, None)
            except strata.UsageError as e:
                errors.append(str(e))

        t = threading.Thread(target=other)
        t.start()
        t.join()
        self.assertEqual(len(errors), 1)
        self.assertIn("exit it on that thread", errors[0])
        strata.relu(self.a)  # still recording here: the refused exit changed nothing
        p.__exit__(None, None, None)
        self.assertEqual(p.calls, 1)
        self.assertFalse(_ops._rows_on)

    def test_reading_inside_the_block_says_it_is_still_recording(self):
        with strata.profile() as p:
            strata.relu(self.a)
            for read in (p.table, p.json):
                with self.assertRaises(strata.UsageError) as cm:
                    read()
                self.assertIn("still recording", str(cm.exception))
                self.assertNotIn("nest", str(cm.exception))
        self.assertEqual(list(blocks_of(p.table())), ["strata.relu"])

    def test_no_leak_after_many_calls(self):
        # 10^5 calls through the frontend, the probes (rows on, no timeline) and the extension: the
        # reference counts of the inputs come back and RSS stays flat (a leaked tensor or IValue per call
        # would be at least 1 KiB x 10^5 = 100 MiB here).
        a, b = self.a, self.b
        matmul = strata.matmul
        for _ in range(10000):
            matmul(a, b)
        refs = (os.sys.getrefcount(a), os.sys.getrefcount(b))
        before = rss_bytes()
        previous = _ops.set_rows(True)
        try:
            for i in range(100000):
                matmul(a, b)
        finally:
            _ops.set_rows(previous)
        grown = rss_bytes() - before
        self.assertEqual((os.sys.getrefcount(a), os.sys.getrefcount(b)), refs)
        self.assertLess(grown, 8 << 20, f"RSS grew by {grown} bytes over 10^5 calls")

    def test_profile_memory_is_released(self):
        before = rss_bytes()
        for _ in range(5):
            with strata.profile() as p:
                for _ in range(20000):
                    strata.relu(self.a)
            self.assertEqual(p.json()["ops"][0]["repeat"], 20000)  # 10^5 spans read in well under a second
            self.assertIn("strata.relu", blocks_of(p.table()))
            del p
        self.assertLess(rss_bytes() - before, 32 << 20)

    def test_crosscheck(self):
        r = strata.profile.crosscheck(n=8, calls=20, batches=3)
        self.assertEqual(set(r["levels"]), {"strata.matmul", "_strata._op", "binding", "dispatcher", "kernel",
                                            "cblas_sgemm", "_strata.call"})
        self.assertTrue(all(v > 0 for v in r["levels"].values()), r["levels"])
        self.assertEqual(set(r["differences"]), {"python", "pybind11", "binding", "dispatch", "library"})
        self.assertTrue({"python", "pybind11", "binding", "library", "wall"} <= set(r["rows"]))
        text = strata.profile.format_crosscheck(r)
        self.assertIn("pybind11", text)
        with self.assertRaises(ValueError):
            strata.profile.crosscheck(n=0)
        with self.assertRaises(TypeError):
            strata.profile.crosscheck(calls=2.5)


if __name__ == "__main__":
    unittest.main()
