"""strata.profile(): the breakdown `strata trace` prints, for the strata calls a block of Python makes.

    with strata.profile() as p:
        strata.matmul(a, b)
    print(p.table())                 # one breakdown per operator called, as `strata trace` prints it
    p.json()                         # {"calls": N, "ops": [<the JSON strata trace --json writes>, ...]}
    p.export_chrome_trace("t.json")  # every span, for Perfetto / chrome://tracing (written atomically)

Rows: python (the frontend function, entry -> the call into the extension), pybind11 (the crossing:
overload resolution, argument and result conversion), then binding, dispatch (one per key), library:
Note [The python and pybind11 rows] in apps/python/probes.h, docs/python.md.
"""
import json as _json
import threading as _threading
import time as _time

from . import _ops, _strata

__all__ = ["profile"]


def _python_probe_cost_ns():
    """What the row probes cost per call from Python, measured here: a loop of _enter/_exit into a
    scratch profile minus the same loop empty, best of five rounds. A call on the hot entry pays _enter
    from Python and _op does the crossing's open and the close itself (one more clock read than this
    loop, one Python call fewer): about the same cost. Calls on the general entry pay _cross_call too."""
    enter, exit_ = _strata._enter, _strata._exit
    n = 2000
    best_probe, best_empty = float("inf"), float("inf")
    scratch = _strata._Profile()
    scratch.start()
    try:
        for _ in range(5):
            t0 = _time.perf_counter_ns()
            for _ in range(n):
                enter(0)
                exit_()
            t1 = _time.perf_counter_ns()
            for _ in range(n):
                pass
            t2 = _time.perf_counter_ns()
            best_probe = min(best_probe, (t1 - t0) / n)
            best_empty = min(best_empty, (t2 - t1) / n)
    finally:
        scratch.stop()
    return max(0.0, best_probe - best_empty)


# The profile recording on each thread, held here so that the object cannot be freed (by another thread
# dropping the last reference) while its thread still records into it.
_recording = _threading.local()


class profile:
    """Context manager: records every strata operator called from Python inside the block (on this
    thread), each call under its own op id, through every layer from the Python frontend down."""

    def __init__(self):
        self._p = _strata._Profile()
        self._holds_rows = False
        self._probe_ns = None

    def __enter__(self):
        self._p.start()  # UsageError: nested, re-entered, or already recording
        _recording.profile = self
        _ops.hold_rows()  # on while any profile records (Note [One switch for the rows, many threads])
        self._holds_rows = True
        return self

    def __exit__(self, *exc):
        self._p.stop()  # UsageError on a thread other than the one recording: nothing changes
        if self._holds_rows:
            self._holds_rows = False
            _recording.profile = None
            _ops.release_rows()
        if self._p.calls or self._p.failed_calls:
            # Measured here, while no profile records (profiles do not nest), so that reading this one
            # later works inside another.
            self._probe_ns = _python_probe_cost_ns()
        return False

    @property
    def calls(self):
        """How many strata operator calls were recorded that returned (the calls the figures are of)."""
        return self._p.calls

    @property
    def failed_calls(self):
        """How many recorded calls raised an exception: counted apart, in no figure."""
        return self._p.failed_calls

    def _probe_cost(self):
        if self._probe_ns is None:
            self._probe_ns = _python_probe_cost_ns()
        return self._probe_ns

    def table(self):
        """The breakdown as `strata trace` prints it, one block per operator called (first-called order),
        then a line per operator whose calls raised (those calls are in no figure)."""
        self._p.check_readable()  # still recording, or nothing recorded: said before measuring the probes
        return self._p.table(self._probe_cost())

    def json(self):
        """{"calls": returned, "failed_calls": raised, "failed": [{"op", "calls"}, ...], "ops": [report, ...]}:
        each report is what `strata trace --json` writes, over the calls that returned."""
        self._p.check_readable()
        return _json.loads(self._p.json(self._probe_cost()))

    def export_chrome_trace(self, path):
        """Writes every recorded span as a Chrome trace (atomically: the file is complete or absent). An
        unwritable path raises strata.UsageError naming it and why."""
        if not isinstance(path, str):
            raise TypeError(f"export_chrome_trace(): path must be a str, not {type(path).__name__}")
        self._p.export_chrome_trace(path)

    def spans(self):
        """Every recorded span as (layer, name, begin_ns, end_ns, parent index, op id)."""
        return self._p.spans()

    def call_ops(self):
        """(op id, operator name) for each recorded call, in call order."""
        return self._p.call_ops()


# Note [The differential cross-check]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# The rows are measured by probes inside the call; the cross-check measures the same layers without any
# probe: the same matmul entered at each layer with the layers above it skipped, untraced, per-call
# medians on the host clock, every level interleaved batch by batch:
#   strata.matmul(a, b)                 from Python (the frontend)
#   _strata._op(index, a, b)            from Python (the extension's hot entry: the frontend skipped)
#   BoundOperator::call(boxed)          from C++    (the binding layer: pybind11 skipped)
#   ops::matmul(a, b)                   from C++    (the dispatcher's entry point: binding skipped)
#   kernels::cpu::matmul(a, b)          from C++    (the CPU kernel: dispatch skipped)
#   cblas_sgemm on the same buffers     from C++    (the library alone: output allocation skipped)
# Python levels have the cost of an empty loop iteration taken off. Each difference of neighbours is
# what one layer adds, and should agree with that layer's row from strata.profile(). Two expected gaps:
# the python difference also holds the Python call of the frontend function itself (frame set-up and the
# *args tuple, before the first statement where _enter runs), which no probe inside the function can
# see; and the rows carry their probes' own cost, the differences none. The general entry,
# _strata.call("matmul", (a, b), {}) through pybind11's dispatcher, is timed too, beside the chain (Note
# [Two entries into the extension] in crossing.cpp): what the hot entry saves.

def _median(xs):
    s = sorted(xs)
    return s[(len(s) - 1) // 2]


def _python_loop_ns(fn, args, calls):
    ticks = _strata._ticks
    t0 = ticks()
    for _ in range(calls):
        fn(*args)
    t1 = ticks()
    return (_strata._ticks_to_ns(t1) - _strata._ticks_to_ns(t0)) / calls


def _empty_loop_ns(calls):
    ticks = _strata._ticks
    t0 = ticks()
    for _ in range(calls):
        pass
    t1 = ticks()
    return (_strata._ticks_to_ns(t1) - _strata._ticks_to_ns(t0)) / calls


def crosscheck(n=16, calls=200, batches=30, seed=0):
    """The differential cross-check of the python and pybind11 rows (Note [The differential cross-check]
    in strata/_profile.py): n x n float32 matmul on the CPU entered at each layer, per-call medians, and
    the rows strata.profile() measures for the same call. Returns a dict; format_crosscheck() prints it."""
    from ._tensor import randn
    for label, value, low, high in (("n", n, 1, 4096), ("calls", calls, 1, 100000), ("batches", batches, 1, 10000)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"crosscheck(): {label} must be an int, not {type(value).__name__}")
        if not low <= value <= high:
            raise ValueError(f"crosscheck(): {label} must be in [{low}, {high}], got {value}")
    if _ops._rows_on:
        raise _strata.UsageError("crosscheck(): runs untraced, but the python and pybind11 rows are on (a "
                                 "strata.profile() is recording on this or another thread, or set_rows forced "
                                 "them); call it when no profile records")
    a = randn(n, n, seed=seed)
    b = randn(n, n, seed=seed + 1)
    matmul = _ops.OPERATORS["matmul"]
    index = next(o["index"] for o in _strata.operators() if o["name"] == "matmul")
    levels = {k: [] for k in ("strata.matmul", "_strata._op", "binding", "dispatcher", "kernel", "cblas_sgemm",
                              "_strata.call")}
    for i in range(batches + 1):
        frontend = _python_loop_ns(matmul, (a, b), calls)
        extension = _python_loop_ns(_strata._op, (index, a, b), calls)
        general = _python_loop_ns(_strata.call, ("matmul", (a, b), {}), calls)
        loop = _empty_loop_ns(calls)
        cpp = _strata._time_matmul_layers(a, b, calls, 1)
        if i == 0:
            continue  # the first batch warms every level up
        levels["strata.matmul"].append(frontend - loop)
        levels["_strata._op"].append(extension - loop)
        levels["_strata.call"].append(general - loop)
        for k in ("binding", "dispatcher", "kernel", "cblas_sgemm"):
            levels[k].append(cpp[k][0])
    medians = {k: _median(v) for k, v in levels.items()}
    with profile() as p:
        for _ in range(calls * min(batches, 20)):
            matmul(a, b)
    report = p.json()["ops"][0]
    rows = {}
    for r in report["steady"]["rows"]:
        if r.get("applicable") and "time" in r:
            rows[r["layer"]] = rows.get(r["layer"], 0.0) + r["time"]["median"]
    rows["wall"] = report["steady"]["wall"]["median"]
    m = medians
    differences = {
        "python": m["strata.matmul"] - m["_strata._op"],
        "pybind11": m["_strata._op"] - m["binding"],
        "binding": m["binding"] - m["dispatcher"],
        "dispatch": m["dispatcher"] - m["kernel"],
        "library": m["kernel"],
    }
    return {"n": n, "calls": calls, "batches": batches, "levels": medians, "differences": differences,
            "rows": rows, "probe_ns": p._probe_cost()}


def format_crosscheck(result):
    """The cross-check as a table: each layer's difference beside its row."""
    lines = [f"differential cross-check: matmul {result['n']}x{result['n']} f32 on the CPU, "
             f"{result['batches']} batches x {result['calls']} calls, per-call medians",
             "entered at                          per call"]
    for k, v in result["levels"].items():
        if k == "_strata.call":
            k = "_strata.call (general entry)"  # beside the chain, not in it
        lines.append(f"  {k:<32}{v:9.0f} ns")
    lines.append("layer      difference   row (strata.profile)")
    for k, v in result["differences"].items():
        row = result["rows"].get(k)
        lines.append(f"  {k:<10}{v:8.0f} ns   " + (f"{row:8.0f} ns" if row is not None else "       -"))
    lines.append(f"  {'wall':<10}{result['levels']['strata.matmul']:8.0f} ns   {result['rows']['wall']:8.0f} ns"
                 f"   (untraced call vs traced wall)")
    lines.append(f"python probes: about {result['probe_ns']:.0f} ns per call; the python difference also holds "
                 f"the call of the frontend function itself, before its first statement")
    return "\n".join(lines)


profile.crosscheck = staticmethod(crosscheck)
profile.format_crosscheck = staticmethod(format_crosscheck)
