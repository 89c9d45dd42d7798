"""strata.compile: TorchDynamo's front end at strata's scale (docs/python.md, "strata.compile").

    @strata.compile
    def f(x, w):
        return strata.relu(strata.matmul(x, w))

    y = f(a, b)          # first call: capture, fuse, generate C++, compile (or a cache hit), run
    f.explain()          # graphs, breaks with reasons, ops per graph, recompiles
    f.graph, f.plan, f.code, f.timings

The first call for a given set of input shapes, dtypes and devices (and constant arguments) calls the
function once with the Capture dispatch key on: every strata op it calls runs for real and is recorded
(layers/compiler). That graph is compiled; later calls that pass the guards run it. See Note [Guards and
versions] and Note [Graph breaks].
"""
import functools
import inspect
import struct
import threading

from . import _strata
from ._errors import Error, GraphBreak, UnavailableError

# The extension's class; the strata program's embedded module has no compiler layer (compile.cpp is the
# extension's only), and strata.compile refuses there with this same class.
CompilerUnavailableError = getattr(_strata, "CompilerUnavailableError", None)
if CompilerUnavailableError is None:
    class CompilerUnavailableError(UnavailableError):  # noqa: N818 (the C++ class's name)
        pass

# Note [Guards and versions]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~
# A version is compiled for one guard key: per argument, a tensor's shape, dtype, device and contiguity,
# or a constant's type and value (a non-tensor argument is a constant of the graph, as Dynamo
# specialises on ints); which tensor arguments were one tensor; and the thread's autocast state (it
# changes what a matmul computes). A call whose key has a version runs it; another key compiles a new
# version and records why, against the latest version, argument by argument ("x: shape [4, 8] -> [8,
# 8]"). Earlier versions stay (a call that matches one runs it), up to cache_size_limit (torch's default,
# 8); past it, new keys run eagerly and that is recorded too. The tensors' half of the key is one C++
# call (_strata._guard_key), the constants' is Python; the compiled graph checks its own guards again in
# C++, as `run` does for every caller. Tensors the
# function closed over (parameters) are constants of the graph: their values are read at each run (same
# storage), but a closure rebound to another tensor is not guarded.
_DEFAULT_CACHE_SIZE_LIMIT = 8


class _ExactFloat:
    """A float constant as the guard key holds it: equal by its bits, since == makes -0.0 equal 0.0 (a
    graph specialised on a zero's sign would be reused for the other sign) and NaN unequal to itself (a
    NaN constant would never find its version). Printed as the float."""
    __slots__ = ("value", "bits")

    def __init__(self, value):
        self.value = value
        self.bits = struct.pack("<d", value)

    def __eq__(self, other):
        return isinstance(other, _ExactFloat) and self.bits == other.bits

    def __hash__(self):
        return hash(self.bits)

    def __repr__(self):
        return repr(self.value)


def _exact(value):
    """A constant with every float in it compared by its bits (_ExactFloat)."""
    if type(value) is float:
        return _ExactFloat(value)
    if isinstance(value, tuple):
        return tuple(_exact(v) for v in value)
    return value


def _describe(value):
    """A constant argument's part of the guard key (tensors are described in C++: _strata._guard_key)."""
    if isinstance(value, (list, tuple)):
        if any(isinstance(v, _strata.Tensor) for v in value):
            raise TypeError("strata.compile: tensors inside a list or tuple argument are not supported; pass each "
                            "tensor as an argument of its own")
        return ("constant", type(value).__name__, _exact(tuple(value)))
    try:
        hash(value)
    except TypeError:
        raise TypeError(f"strata.compile: a non-tensor argument is a constant of the graph and must be hashable "
                        f"(int, float, str, bool, None, a tuple of them); got {type(value).__name__}") from None
    return ("constant", type(value).__name__, _exact(value))


def _key(args, kwargs, values):
    """(guard key, tensors, how many require grad), or None inside another capture. The tensors' half is
    one C++ call (_strata._guard_key); constants are described here."""
    guards = _strata._guard_key(values)
    if guards is None:
        return None
    described, aliasing, autocast, needs_grad = guards
    if None in described:
        described = tuple(_describe(v) if d is None else d for d, v in zip(described, values))
    tensors = [v for v, d in zip(values, described) if d[0] == "tensor"]
    return ((len(args), tuple(kwargs)), described, aliasing, autocast), tensors, needs_grad


def _why(old, new, names):
    """What changed between two guard keys, one entry per difference: 'x: shape [4, 8] -> [8, 8]'."""
    reasons = []
    if old[0] != new[0]:
        reasons.append(f"arguments: {old[0][0]} positional + keywords {list(old[0][1])} -> {new[0][0]} positional "
                       f"+ keywords {list(new[0][1])}")
        return reasons
    fields = ("kind", "shape", "dtype", "device", "contiguous")
    for name, a, b in zip(names, old[1], new[1]):
        if a == b:
            continue
        if a[0] != b[0]:
            reasons.append(f"{name}: {a[0]} -> {b[0]}")
        elif a[0] == "constant":
            reasons.append(f"{name}: value {a[2]!r} -> {b[2]!r}" if a[1] == b[1] else f"{name}: type {a[1]} -> {b[1]}")
        else:
            for field, x, y in zip(fields[1:], a[1:], b[1:]):
                if x != y and field == "shape":
                    reasons.append(f"{name}: shape {list(x)} -> {list(y)}")
                elif x != y:
                    reasons.append(f"{name}: {field} {x} -> {y}")
    if old[2] != new[2]:
        reasons.append(f"aliasing of tensor arguments: {old[2]} -> {new[2]}")
    if old[3] != new[3]:
        state = lambda s: s[1] if s[0] else "off"  # noqa: E731
        reasons.append(f"autocast: {state(old[3])} -> {state(new[3])}")
    return reasons


class Version:
    """One compiled version of the function, for one guard key: its graph (None when the capture broke),
    or the reason it runs eagerly."""

    def __init__(self, key, compiled=None, captured=None, eager_reason=None, structure=None):
        self.key = key
        self._compiled = compiled
        self._captured = captured
        self.eager_reason = eager_reason  # None, or why this version runs eagerly
        self._structure = structure       # "tensor", "tuple" or "list": what the function returned
        self.calls = 0
        # Parameters that require grad, counted once (a node's edges: Note [Backward through a compiled
        # function]); the C++ run counts again per output and refuses what does not fit.
        self.constants_requiring_grad = compiled.constants_requiring_grad if compiled is not None else 0

    @property
    def compiled(self):
        return self._compiled is not None

    @property
    def graph(self):
        """The captured graph, as FX prints one ('%2 = matmul(%0, %1)  : f32[64x32]')."""
        return self._compiled.graph if self._compiled is not None else None

    @property
    def plan(self):
        """The fusion plan: which ops each kernel computes."""
        return self._compiled.plan if self._compiled is not None else None

    @property
    def code(self):
        """The generated C++ of every generated kernel (strata's --emit cpp)."""
        return self._compiled.emit_cpp() if self._compiled is not None else None

    @property
    def timings(self):
        """The cold phases as measured (ns): capture, fusion, codegen, compile (0 on a cache hit), load,
        total; cache hits and misses; the cache directory and the compiler."""
        return self._compiled.timings() if self._compiled is not None else None

    @property
    def kernels(self):
        """The plan's kernels: name, kind (pointwise, gemm_epilogue, extern), ops, and why an extern is one."""
        return self._compiled.kernels() if self._compiled is not None else []

    @property
    def builds(self):
        return self._compiled.builds() if self._compiled is not None else []

    @property
    def ops(self):
        return self._captured.ops if self._captured is not None else []

    def run(self, tensors):
        out = self._compiled.run(tensors)
        if self._structure == "tensor":
            return out[0]
        return tuple(out) if self._structure == "tuple" else list(out)


class CompiledFunction:
    """What strata.compile returns: call it as the function. See the module's docstring."""

    def __init__(self, fn, cache_dir="", cxx="", cache_size_limit=_DEFAULT_CACHE_SIZE_LIMIT):
        if not callable(fn):
            raise TypeError(f"strata.compile(): expected a callable, not {type(fn).__name__}")
        if isinstance(cache_size_limit, bool) or not isinstance(cache_size_limit, int) or cache_size_limit < 1:
            raise ValueError(f"strata.compile(): cache_size_limit must be an int >= 1, got {cache_size_limit!r}")
        for name, value in (("cache_dir", cache_dir), ("cxx", cxx)):
            if not isinstance(value, str):
                raise TypeError(f"strata.compile(): {name} must be a str ('' for the default), not "
                                f"{type(value).__name__}")
        if not hasattr(_strata, "_capture"):
            raise CompilerUnavailableError("strata.compile: this strata module has no compiler layer (the strata "
                                           "program's embedded module); import the package built in build/python")
        functools.update_wrapper(self, fn)
        self._label = getattr(fn, "__qualname__", None) or type(fn).__name__  # strata.profile()'s block name
        self._fn = fn
        self._cache_dir = cache_dir
        self._cxx = cxx
        self.cache_size_limit = cache_size_limit
        self._versions = {}      # guard key -> Version, in compile order
        self._latest = None
        self.recompiles = []     # {"version": i, "reasons": [...]}
        self.breaks = []         # {"reason": ..., "where": ..., "version": i}
        self.eager_calls = []    # {"reason": ...} for calls that ran eagerly past the limit or for grad
        self._lock = threading.RLock()  # a compiled function may call itself
        try:
            self._positional = [p.name for p in inspect.signature(fn).parameters.values()
                                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        except (TypeError, ValueError):  # a builtin without a signature
            self._positional = []

    def _names(self, args, kwargs):
        """The arguments' names, for the reasons: the parameters' own where the signature gives them."""
        p = self._positional
        return [p[i] if i < len(p) else f"arg{i}" for i in range(len(args))] + list(kwargs)

    def __call__(self, *args, **kwargs):
        found = _key(args, kwargs, args + tuple(kwargs.values()) if kwargs else args)
        if found is None:  # called inside another compiled function's capture: inlined into its graph
            return self._fn(*args, **kwargs)
        key, tensors, needs_grad = found
        with self._lock:
            version = self._versions.get(key)
            if version is None:
                names = self._names(args, kwargs)
                if len(self._versions) >= self.cache_size_limit:
                    why = "; ".join(_why(self._latest.key, key, names))
                    self.eager_calls.append({"reason": f"cache_size_limit ({self.cache_size_limit}) reached: {why}; "
                                                       f"this call runs eagerly"})
                    return self._fn(*args, **kwargs)
                version = self._compile(key, names, tensors, args, kwargs)
            version.calls += 1
        if version.eager_reason is not None:
            return self._fn(*args, **kwargs)
        needing = needs_grad + version.constants_requiring_grad
        if needing > _strata._max_grad_edges:
            self.eager_calls.append({"reason": f"{needing} tensors require grad; the compiled backward node has "
                                     f"{_strata._max_grad_edges} edges, so this call runs eagerly"})
            return self._fn(*args, **kwargs)
        return version.run(tensors)

    def _compile(self, key, names, tensors, args, kwargs):
        index = len(self._versions)
        # Against the latest version; recorded once this one exists (a compile that raises leaves none).
        reasons = _why(self._latest.key, key, names) if self._latest is not None else None
        not_contiguous = [n for n, d in zip(names, key[1]) if d[0] == "tensor" and not d[4]]
        structure = []

        def body(_inputs):
            out = self._fn(*args, **kwargs)
            if isinstance(out, _strata.Tensor):
                structure.append("tensor")
                return [out]
            if isinstance(out, (tuple, list)) and all(isinstance(o, _strata.Tensor) for o in out):
                structure.append(type(out).__name__ if type(out) in (tuple, list) else "tuple")
                return list(out)
            code = getattr(self._fn, "__code__", None)
            where = f"{code.co_filename}:{code.co_firstlineno}: {self._label}" if code is not None else "?"
            raise GraphBreak(f"the function returned {type(out).__name__}: a compiled function returns a tensor "
                             f"or a tuple or list of tensors", where)

        if not_contiguous:
            version = Version(key, eager_reason=f"{', '.join(not_contiguous)} not contiguous: compiled kernels read "
                                                f"contiguous rows")
        else:
            try:
                captured = _strata._capture(body, tensors)
            except GraphBreak as e:
                self.breaks.append({"reason": str(e), "where": getattr(e, "where", "?"), "version": index})
                version = Version(key, eager_reason=f"graph break: {e}")
            else:
                compiled = _strata._compile(captured, self._cache_dir, self._cxx, self._label)
                version = Version(key, compiled, captured, structure=structure[0])
        if reasons is not None:
            self.recompiles.append({"version": index, "reasons": reasons})
        self._versions[key] = version
        self._latest = version
        return version

    # ---- what was compiled ------------------------------------------------------------------------------
    @property
    def versions(self):
        """Every version, in compile order (each a Version: graph, plan, code, timings, kernels)."""
        return list(self._versions.values())

    def _last(self):
        if self._latest is None:
            raise Error(f"strata.compile({self._label}): not compiled yet; call it first (it compiles for the "
                        f"inputs of its first call)")
        return self._latest

    graph = property(lambda self: self._last().graph, doc="The latest version's captured graph listing.")
    plan = property(lambda self: self._last().plan, doc="The latest version's fusion plan.")
    code = property(lambda self: self._last().code, doc="The latest version's generated C++.")
    timings = property(lambda self: self._last().timings, doc="The latest version's cold phases (ns).")
    kernels = property(lambda self: self._last().kernels, doc="The latest version's kernels.")

    def explain(self):
        """What torch._dynamo.explain reports, for the calls made so far: graphs, breaks with their
        reasons and lines, ops per graph, extern kernels and why, recompiles and why."""
        return Explanation(self)

    def __repr__(self):
        compiled = sum(v.compiled for v in self._versions.values())
        return (f"<strata.compile({self._label}): {len(self._versions)} version(s), {compiled} compiled, "
                f"{len(self.breaks)} graph break(s), {len(self.recompiles)} recompile(s), cache_size_limit "
                f"{self.cache_size_limit}; backward: eager (replays the graph, then the autograd engine)>")


class Explanation:
    """strata.compile's explain view (torch._dynamo.explain's ExplainOutput): graph_count,
    graph_break_count, break_reasons, op_count, ops_per_graph, graphs, extern_kernels, recompiles,
    eager_calls; str() prints it."""

    def __init__(self, cf):
        compiled = [v for v in cf.versions if v.compiled]
        self.graphs = [v.graph for v in compiled]
        self.graph_count = len(compiled)
        self.ops_per_graph = [v.ops for v in compiled]
        self.op_count = sum(len(ops) for ops in self.ops_per_graph)
        self.break_reasons = list(cf.breaks)
        self.graph_break_count = len(cf.breaks)
        self.extern_kernels = [{"version": i, "op": k["name"], "reason": k["extern_reason"]}
                               for i, v in enumerate(cf.versions) for k in v.kernels if k["kind"] == "extern"]
        self.recompiles = list(cf.recompiles)
        self.eager_calls = list(cf.eager_calls)
        self.backward = ("eager: each output's CompiledFunctionBackward replays the captured graph with autograd "
                         "on and runs the engine from it (Note [Backward through a compiled function])")

    def __str__(self):
        lines = [f"Graph Count: {self.graph_count}", f"Graph Break Count: {self.graph_break_count}",
                 f"Op Count: {self.op_count}", "Break Reasons:"]
        lines += [f"  Break Reason {i + 1}: {b['reason']}\n    at {b['where']}" for i, b in enumerate(self.break_reasons)]
        lines.append("Ops per Graph:")
        lines += [f"  Ops {i + 1}: {', '.join(ops)}" for i, ops in enumerate(self.ops_per_graph)]
        lines.append("Extern kernels (no generated code; not breaks):")
        lines += [f"  version {e['version']}: {e['op']}: {e['reason']}" for e in self.extern_kernels]
        lines.append("Recompiles:")
        lines += [f"  version {r['version']}: {'; '.join(r['reasons'])}" for r in self.recompiles]
        lines += [f"Eager call: {e['reason']}" for e in self.eager_calls]
        lines.append(f"Backward: {self.backward}")
        return "\n".join(lines)

    __repr__ = __str__


def compile(fn=None, *, cache_dir="", cxx="", cache_size_limit=_DEFAULT_CACHE_SIZE_LIMIT):  # noqa: A001
    """Compiles `fn` on its first call (and again for inputs its guards refuse): @strata.compile, or
    strata.compile(fn, cache_dir=..., cxx=..., cache_size_limit=8). cache_dir '' is $STRATA_CACHE_DIR,
    else ~/.cache/strata/kernels; cxx '' is $CXX, else c++, g++ or clang++ on PATH."""
    if fn is None:
        return lambda f: CompiledFunction(f, cache_dir, cxx, cache_size_limit)
    return CompiledFunction(fn, cache_dir, cxx, cache_size_limit)


def explain(fn, *args, **kwargs):
    """torch._dynamo.explain's analogue: compiles `fn` afresh, calls it once with the arguments, and
    returns the Explanation (graphs, breaks with reasons, ops per graph)."""
    cf = fn if isinstance(fn, CompiledFunction) else CompiledFunction(fn)
    cf(*args, **kwargs)
    return cf.explain()
