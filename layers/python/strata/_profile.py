"""strata.profile(): the breakdown `strata trace` prints, for the strata calls a block of Python makes.

    with strata.profile() as p:
        strata.matmul(a, b)
    print(p.table())                 # one breakdown per operator called, as `strata trace` prints it
    p.json()                         # {"calls": N, "ops": [<the JSON strata trace --json writes>, ...]}
    p.export_chrome_trace("t.json")  # every span, for Perfetto / chrome://tracing (written atomically)

Rows: python (the frontend function, entry -> the call into the extension), pybind11 (the crossing:
overload resolution, argument and result conversion), then binding, dispatch (one per key), library:
Note [The python and pybind11 rows] in layers/python/probes.h, docs/python.md.
"""
import json as _json
import time as _time

from . import _ops, _strata

__all__ = ["profile"]


def _python_probe_cost_ns():
    """What the three row probes cost per call from Python, measured here: a loop of _enter/_cross/_exit
    into a scratch profile minus the same loop empty, best of five rounds."""
    enter, cross, exit_ = _strata._enter, _strata._cross, _strata._exit
    n = 2000
    best_probe, best_empty = float("inf"), float("inf")
    scratch = _strata._Profile()
    scratch.start()
    try:
        for _ in range(5):
            t0 = _time.perf_counter_ns()
            for _ in range(n):
                enter(0)
                cross()
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


class profile:
    """Context manager: records every strata operator called from Python inside the block (on this
    thread), each call under its own op id, through every layer from the Python frontend down."""

    def __init__(self):
        self._p = _strata._Profile()
        self._previous_rows = None
        self._probe_ns = None

    def __enter__(self):
        self._p.start()
        self._previous_rows = _ops.set_rows(True)
        return self

    def __exit__(self, *exc):
        _ops.set_rows(self._previous_rows)
        self._p.stop()
        return False

    @property
    def calls(self):
        """How many strata operator calls were recorded."""
        return self._p.calls

    def _probe_cost(self):
        if self._probe_ns is None:
            self._probe_ns = _python_probe_cost_ns()
        return self._probe_ns

    def table(self):
        """The breakdown as `strata trace` prints it, one block per operator called (first-called order)."""
        return self._p.table(self._probe_cost())

    def json(self):
        """{"calls": N, "ops": [report, ...]}: each report is what `strata trace --json` writes."""
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
