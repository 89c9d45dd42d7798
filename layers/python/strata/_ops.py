"""One Python function per operator, generated from the schemas the binding layer parsed from
ops::AllOps (Note [One declaration per operator] in layers/ops/operators.h): no operator is named here.

Each function validates like torch/functional.py and torch's python_arg_parser: a wrong Python type is a
TypeError naming the argument and its position. Everything else (shapes that do not fit, dtypes or
devices that differ, strides < 1) is checked once, by strata's C++ layers (lib/op_shapes.h), and
arrives as strata.UsageError (a ValueError). Then the call goes through the extension into
the binding layer: boxed values -> binding::find_operator(name).call(...).

With the python and pybind11 rows on (set_rows(True); strata.profile() does it), each function also
calls three probes of the extension: _enter at its entry, _cross just before the extension call, _exit
on the way out. See Note [The python and pybind11 rows] in layers/python/probes.h.
"""
import inspect
import numbers

from . import _strata
from ._tensor import Tensor

_Parameter = inspect.Parameter

# Whether the frontend functions call the row probes. A module global: the untraced call pays one cached
# global load for it.
_rows_on = False


def set_rows(on):
    """Turns the python and pybind11 rows on or off for every frontend function (for strata.profile() and
    for embedders with an active timeline; see Note [The python and pybind11 rows]). Returns the previous
    setting."""
    global _rows_on
    previous = _rows_on
    _rows_on = bool(on)
    return previous


def _check(op, arg, position, value):
    """The value as the schema's type, or TypeError naming the argument (python_arg_parser's rule)."""
    kind = arg["type"]
    if kind == "Tensor":
        if type(value) is Tensor:
            return value
    elif kind == "Tensor?":
        if value is None or type(value) is Tensor:
            return value
    elif kind == "int":
        if not isinstance(value, bool) and isinstance(value, numbers.Integral):
            value = int(value)
            if not -2**63 <= value < 2**63:
                raise ValueError(f"{op}(): argument '{arg['name']}' (position {position}) does not fit in 64 bits: "
                                 f"{value}")
            return value
    elif kind == "float":
        if not isinstance(value, bool) and isinstance(value, numbers.Real):
            return float(value)
    elif kind == "bool":
        if isinstance(value, bool):
            return value
    expected = {"Tensor?": "Tensor or None"}.get(kind, kind)
    raise TypeError(f"{op}(): argument '{arg['name']}' (position {position}) must be {expected}, "
                    f"not {type(value).__name__}")


def _make(op):
    name = op["name"]
    arguments = op["arguments"]
    params = []
    for a in arguments:
        kind = _Parameter.KEYWORD_ONLY if a["keyword_only"] else _Parameter.POSITIONAL_OR_KEYWORD
        params.append(_Parameter(a["name"], kind, default=a["default"] if a["has_default"] else _Parameter.empty))
    signature = inspect.Signature(params)
    positional_args = [a for a in arguments if not a["keyword_only"]]
    required = sum(1 for a in positional_args if not a["has_default"])
    all_tensors = all(a["type"] == "Tensor" for a in positional_args)
    _call = _strata.call
    _enter, _cross, _exit = _strata._enter, _strata._cross, _strata._exit
    op_index = op["index"]
    _empty = {}

    index = {a["name"]: i for i, a in enumerate(arguments)}
    schema = op["schema"]

    def slow(args, kwargs):
        # Keywords, or a call that does not fit: matched by hand (inspect.Signature.bind costs ~7 us).
        if len(args) > len(positional_args):
            raise TypeError(f"{name}() takes {len(positional_args)} positional argument"
                            f"{'' if len(positional_args) == 1 else 's'} but {len(args)} "
                            f"{'was' if len(args) == 1 else 'were'} given (too many); schema: {schema}")
        given = dict(enumerate(args))
        for key, value in kwargs.items():
            i = index.get(key)
            if i is None:
                raise TypeError(f"{name}() got an unexpected keyword argument '{key}'; schema: {schema}")
            if i in given:
                raise TypeError(f"{name}() got multiple values for argument '{key}'; schema: {schema}")
            given[i] = value
        positional, keywords = [], {}
        for i, a in enumerate(arguments):
            if i not in given:
                if not a["has_default"]:
                    raise TypeError(f"{name}() missing required argument '{a['name']}' (position {i + 1}); "
                                    f"schema: {schema}")
                continue  # the binding layer fills in the schema's default
            value = _check(name, a, i + 1, given[i])
            if not a["keyword_only"] and len(positional) == i:
                positional.append(value)
            else:
                keywords[a["name"]] = value
        return tuple(positional), keywords

    n_positional = len(positional_args)

    def checked(args):
        # A positional call with an argument that is not exactly a Tensor: each value as its schema type,
        # or TypeError naming it.
        return tuple(_check(name, arguments[i], i + 1, v) for i, v in enumerate(args))

    def fn(*args, **kwargs):
        # The common call, positional only, costs one type check per argument; everything else takes the
        # general path. Shapes, dtypes and devices are checked once, by the C++ layers (UsageError).
        # Note [The frontend's fast path]: no enumerate, no per-call len() of a list, no helper call when
        # every argument is a Tensor; measured in docs/performance.md.
        if _rows_on:
            # The same steps as below, between the probes (kept inline: a helper call would add its own
            # cost to the python row it is meant to measure).
            _enter(op_index)
            try:
                if not kwargs and required <= len(args) <= n_positional:
                    if all_tensors:
                        for v in args:
                            if type(v) is not Tensor:
                                args = checked(args)
                                break
                    else:
                        args = checked(args)
                    _cross()
                    return _call(name, args, _empty)
                args, kwargs = slow(args, kwargs)
                _cross()
                return _call(name, args, kwargs)
            finally:
                _exit()
        if not kwargs and required <= len(args) <= n_positional:
            if all_tensors:
                for v in args:
                    if type(v) is not Tensor:
                        args = checked(args)
                        break
            else:
                args = checked(args)
            return _call(name, args, _empty)
        return _call(name, *slow(args, kwargs))

    fn.__name__ = fn.__qualname__ = name
    fn.__signature__ = signature
    fn.__doc__ = f"{op['schema']}\n\nstrata's {name}, through the binding layer and the dispatcher."
    return fn


SCHEMAS = {op["name"]: op["schema"] for op in _strata.operators()}
OPERATORS = {op["name"]: _make(op) for op in _strata.operators()}
