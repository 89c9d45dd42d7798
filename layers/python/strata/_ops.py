"""One Python function per operator, generated from the schemas the binding layer parsed from
ops::AllOps (Note [One declaration per operator] in layers/ops/operators.h): no operator is named here.

Each function validates like torch/functional.py and torch's python_arg_parser: a wrong Python type is a
TypeError naming the argument and its position; tensors on different devices or with different dtypes
are a ValueError; everything else (shapes that do not fit, strides < 1) is checked by strata's C++
layers and arrives as strata.UsageError (a ValueError). Then the call goes through the extension into
the binding layer: boxed values -> binding::find_operator(name).call(...).
"""
import inspect
import numbers

from . import _strata
from ._tensor import Tensor

_Parameter = inspect.Parameter


def _check(op, arg, position, value):
    kind = arg["type"]
    where = f"{op}(): argument '{arg['name']}' (position {position})"
    if kind == "Tensor":
        if not isinstance(value, Tensor):
            raise TypeError(f"{where} must be Tensor, not {type(value).__name__}")
    elif kind == "Tensor?":
        if value is not None and not isinstance(value, Tensor):
            raise TypeError(f"{where} must be Tensor or None, not {type(value).__name__}")
    elif kind == "int":
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise TypeError(f"{where} must be int, not {type(value).__name__}")
        value = int(value)
        if not -2**63 <= value < 2**63:
            raise ValueError(f"{where} does not fit in 64 bits: {value}")
    elif kind == "float":
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"{where} must be float, not {type(value).__name__}")
        value = float(value)
    elif kind == "bool":
        if not isinstance(value, bool):
            raise TypeError(f"{where} must be bool, not {type(value).__name__}")
    return value


def _make(op):
    name = op["name"]
    arguments = op["arguments"]
    params = []
    for a in arguments:
        kind = _Parameter.KEYWORD_ONLY if a["keyword_only"] else _Parameter.POSITIONAL_OR_KEYWORD
        params.append(_Parameter(a["name"], kind, default=a["default"] if a["has_default"] else _Parameter.empty))
    signature = inspect.Signature(params)
    _call = _strata.call

    def fn(*args, **kwargs):
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{name}(): {e}; schema: {op['schema']}") from None
        positional, keywords, tensors = [], {}, []
        for i, a in enumerate(arguments):
            if a["name"] not in bound.arguments:
                continue  # the binding layer fills in the schema's default
            value = _check(name, a, i + 1, bound.arguments[a["name"]])
            if isinstance(value, Tensor):
                tensors.append((a["name"], value))
            if a["keyword_only"]:
                keywords[a["name"]] = value
            elif len(positional) == i:
                positional.append(value)
            else:
                keywords[a["name"]] = value
        if tensors:
            first_name, first = tensors[0]
            for other_name, other in tensors[1:]:
                if other.device != first.device:
                    raise ValueError(f"{name}(): expected all tensors on the same device, but '{first_name}' is on "
                                     f"{first.device} and '{other_name}' on {other.device}")
                if other.dtype != first.dtype:
                    raise ValueError(f"{name}(): expected all tensors of the same dtype, but '{first_name}' is "
                                     f"{first.dtype} and '{other_name}' {other.dtype}")
        return _call(name, tuple(positional), keywords)

    fn.__name__ = fn.__qualname__ = name
    fn.__signature__ = signature
    fn.__doc__ = f"{op['schema']}\n\nstrata's {name}, through the binding layer and the dispatcher."
    return fn


SCHEMAS = {op["name"]: op["schema"] for op in _strata.operators()}
OPERATORS = {op["name"]: _make(op) for op in _strata.operators()}
