"""One Python function per operator, generated from the schemas the binding layer parsed from
ops::AllOps (Note [One declaration per operator] in layers/ops/operators.h): no operator is named here.

Each function validates like torch/functional.py and torch's python_arg_parser: a wrong Python type is a
TypeError naming the argument and its position. Everything else (shapes that do not fit, dtypes or
devices that differ, strides < 1) is checked once, by strata's C++ layers (lib/op_shapes.h), and
arrives as strata.UsageError (a ValueError). Then the call goes through the extension into
the binding layer: boxed values -> the operator's BoundOperator::call(...), entered through _strata._op
(the common call) or _strata.call (keywords, conversions): Note [Two entries into the extension] in
apps/python/crossing.cpp.

With the python and pybind11 rows on (while a strata.profile() records on any thread, or forced by an
embedder with set_rows(True)), each function also calls the probes of the extension: _enter at its
entry, the crossing's open (the hot entry does it itself when given ~index; _cross_call before the
general entry), and on the way out _exit (the hot entry does that too when it returns a result), or
_exit_failed when the call raised, so that a profile counts failed calls apart. See Note [The python
and pybind11 rows] in apps/python/probes.h.
"""
import inspect
import math
import numbers
import threading

import numpy as np

from . import _strata
from ._errors import UsageError
from ._tensor import Tensor, _dtype_arg, _torch_name

_Parameter = inspect.Parameter

# A required argument that was not given (Note [The frontend's fast path]).
_MISSING = object()

# Whether the frontend functions call the row probes. A module global: the untraced call pays one cached
# global load for it.
#
# Note [One switch for the rows, many threads]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# Recording is per thread (a profile records the calls of the thread that entered it: the C++ side keeps
# the active timeline thread-local, and the probes do nothing on a thread without one), but this switch
# is one global load so that an untraced call pays almost nothing. So it means "some thread may be
# recording", and it is on while ANY profile records: each profile holds it (hold_rows) and lets go when
# it ends (release_rows), and it goes off only when the last holder lets go. A thread that records
# nothing pays the probe calls while another thread records, and its calls are not recorded. Setting it
# from one profile's exit ("back to what it was when I started") would switch off a profile still
# recording on another thread, which then silently counted only the calls made before.
_rows_on = False
_rows_lock = threading.Lock()
_rows_holders = 0     # profiles recording now, on every thread
_rows_forced = None   # set_rows(): an embedder's or a benchmark's explicit setting; None: follow the holders


# The globals of every generated function: each reads _rows_on as a global of its own (a cached dict
# load), kept equal to this module's.
_function_globals = []


def _publish_rows():
    global _rows_on
    _rows_on = _rows_holders > 0 if _rows_forced is None else _rows_forced
    for env in _function_globals:
        env["_rows_on"] = _rows_on


def follow_rows(env):
    """Keeps env["_rows_on"] equal to the switch from now on: for a module whose functions read it as a
    global of their own, as the generated functions do (strata/_views.py's __getitem__)."""
    with _rows_lock:
        env["_rows_on"] = _rows_on
        _function_globals.append(env)


def hold_rows():
    """The rows on for as long as this hold lasts (a profile starting to record, on any thread)."""
    global _rows_holders
    with _rows_lock:
        _rows_holders += 1
        _publish_rows()


def release_rows():
    """Lets go of one hold_rows(); the rows go off when no profile holds them (and set_rows forces nothing)."""
    global _rows_holders
    with _rows_lock:
        if _rows_holders == 0:
            raise RuntimeError("strata: release_rows() without hold_rows()")
        _rows_holders -= 1
        _publish_rows()


def set_rows(on):
    """Forces the python and pybind11 rows on (True) or off (False) for every frontend function, whatever
    the profiles hold, or gives the switch back to them (None): for embedders with an active timeline and
    for benchmarks (see Note [The python and pybind11 rows] and Note [One switch for the rows, many
    threads]). Returns the previous forced setting, to pass back to set_rows when done."""
    global _rows_forced
    if on is not None:
        on = bool(on)
    with _rows_lock:
        previous = _rows_forced
        _rows_forced = on
        _publish_rows()
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
                # C++ takes int64; each operator then checks its own range (conv2d's padding: lib/op_shapes).
                raise ValueError(f"{op}(): argument '{arg['name']}' (position {position}) must be an int in "
                                 f"[-2**63, 2**63), got {value}")
            return value
    elif kind == "int[]" or kind.startswith("int["):
        # A tuple or list of ints (view's size, permute's dims), as torch takes; the extension checks the
        # count (at most 4: strata's tensors have at most 4 dims) and each int's range. int[2] (conv2d's
        # stride) takes one int for both too, as torch does.
        if kind != "int[]" and not isinstance(value, bool) and isinstance(value, numbers.Integral):
            return _check(op, dict(arg, type="int"), position, value)
        if isinstance(value, (tuple, list)):
            for v in value:
                if isinstance(v, bool) or not isinstance(v, numbers.Integral):
                    raise TypeError(f"{op}(): argument '{arg['name']}' (position {position}) must be a tuple of "
                                    f"ints, but found element of type {type(v).__name__}")
            return tuple(int(v) for v in value)
    elif kind in ("float", "float?"):
        if value is None and kind == "float?":
            return value
        if not isinstance(value, bool) and isinstance(value, numbers.Real):
            try:
                return float(value)
            except OverflowError:  # an int past the largest double
                raise ValueError(f"{op}(): argument '{arg['name']}' (position {position}) must be a float within "
                                 f"+-1.8e308, got an int of {int(value).bit_length()} bits") from None
    elif kind == "bool":
        if isinstance(value, bool):
            return value
    elif kind in ("ScalarType", "ScalarType?"):
        if value is None and kind == "ScalarType?":
            return value
        if (isinstance(value, (str, type, np.dtype))
                or _torch_name(value, "dtype") is not None):  # torch.float64, as a torch user writes it
            return _dtype_arg(value, op)  # strata's short name; an unknown one is a ValueError
    expected = {"Tensor?": "Tensor or None", "ScalarType": "a dtype", "ScalarType?": "a dtype or None",
                "float?": "float or None",
                "int[]": "a tuple of ints"}.get(kind, "an int or a tuple of ints" if kind.startswith("int[") else kind)
    raise TypeError(f"{op}(): argument '{arg['name']}' (position {position}) must be {expected}, "
                    f"not {_type_name(value)}")


def _type_name(value):
    """The name of value's type for a message: a torch.Tensor (or any other library's Tensor) by its module,
    with the way across, where its bare name would read "must be Tensor, not Tensor"."""
    cls = type(value)
    if cls.__name__ == "Tensor" and cls is not Tensor:
        return (f"{cls.__module__}.Tensor (strata's operators take a strata.Tensor: convert it with "
                "strata.tensor(x) or strata.from_numpy(x.numpy()))")
    return cls.__name__


def _default(arg):
    """An argument's default as the schema writes it: `int[2] stride=1` is 1 (the binding layer widens an
    int to both dims, as torch's signature shows it), not the widened (1, 1) the extension reports."""
    value = arg["default"]
    if (arg["type"].startswith("int[") and arg["type"] != "int[]" and isinstance(value, tuple) and value
            and all(v == value[0] for v in value)):
        return value[0]
    return value


def _make(op):
    name = op["name"]
    arguments = op["arguments"]
    params = []
    for a in arguments:
        kind = _Parameter.KEYWORD_ONLY if a["keyword_only"] else _Parameter.POSITIONAL_OR_KEYWORD
        params.append(_Parameter(a["name"], kind, default=_default(a) if a["has_default"] else _Parameter.empty))
    signature = inspect.Signature(params)
    positional_args = [a for a in arguments if not a["keyword_only"]]
    required = sum(1 for a in positional_args if not a["has_default"])
    all_tensors = all(a["type"] == "Tensor" for a in positional_args)
    _call = _strata.call
    op_index = op["index"]

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

    # Note [The frontend's fast path]
    # Each function is generated with the schema's own parameters (CPython binds them: no *args tuple,
    # no **kwargs dict), so that the common call costs one exact type check per argument and one call of
    # the extension's hot entry (Note [Two entries into the extension] in crossing.cpp):
    #     def matmul(self=_M, other=_M, *_extra):
    #         if _rows_on: ...                                  (the same, with the probes)
    #         if type(self) is _T and type(other) is _T and not _extra:
    #             return _op(0, self, other)
    #         return _call("matmul", *_general((self, other), _extra))
    # Required parameters default to the sentinel _M, so that a missing one reaches the general path
    # (slow() below: the error quotes the schema) instead of CPython's own message; so do extra
    # positional values (*_extra). Positional defaults are the schema's, passed on explicitly (the binding
    # layer would fill in the same values); keyword-only arguments take the fast path only at their
    # defaults (left out: the binding fills them in), otherwise _strata.call with a keyword. A value of
    # another type takes the general path, which converts or raises TypeError naming the argument.
    # Measured in docs/performance.md.
    for a in arguments:
        if not a["name"].isidentifier() or a["name"].startswith("_"):
            raise RuntimeError(f"strata: {schema}: argument '{a['name']}' cannot be a Python parameter name")
    names = [a["name"] for a in arguments]
    env = {"_M": _MISSING, "_T": Tensor, "_call": _call, "_op": _strata._op, "_enter": _strata._enter,
           "_cross_call": _strata._cross_call, "_exit": _strata._exit,
           "_exit_failed": _strata._exit_failed,
           "_rows_on": _rows_on, "_index": op_index, "_traced": ~op_index, "_name": name}
    signature_text, fast, positional_values, keyword_items = [], [], [], []
    for i, a in enumerate(arguments):
        if a["keyword_only"] and "*_extra" not in signature_text:
            signature_text.append("*_extra")
        default = "_M"
        if a["has_default"]:
            env[f"_d{i}"] = _default(a)
            default = f"_d{i}"
        signature_text.append(f"{a['name']}={default}")
        check = {"Tensor": "type({0}) is _T", "Tensor?": "({0} is None or type({0}) is _T)",
                 "int": "type({0}) is int", "float": "type({0}) is float", "bool": "type({0}) is bool",
                 "float?": "({0} is None or type({0}) is float)",
                 # The extension checks each element of a tuple (an int, in range) as it boxes it.
                 "int[]": "type({0}) is tuple",
                 # int[2] (conv2d's stride): an int stands for both dims; the binding layer widens it.
                 "int[2]": "(type({0}) is int or type({0}) is tuple)",
                 # A dtype is converted to strata's short name by _check, on the general path; None is None.
                 "ScalarType": "False", "ScalarType?": "{0} is None"}[a["type"]]
        fast.append(check.format(a["name"]))
        if a["keyword_only"]:
            keyword_items.append(a["name"])
        else:
            positional_values.append(a["name"])
    if "*_extra" not in signature_text:
        signature_text.append("*_extra")
    fast.append("not _extra")
    fast += [f"{k} is _d{names.index(k)}" for k in keyword_items]
    op_args = "".join(", " + v for v in positional_values)
    values_text = "(" + "".join(n + ", " for n in names) + ")"
    py_name = name.replace(".", "_")  # an overload's name ("mul.Scalar") is not a Python identifier
    source = f"""
def {py_name}({", ".join(signature_text)}):
    if _rows_on:
        _enter(_index)
        try:
            if {" and ".join(fast)}:
                return _op(_traced{op_args})  # ~index: the entry opens the pybind11 span and closes both
            args, kwargs = _general({values_text}, _extra)
            _cross_call()
            result = _call(_name, args, kwargs)
        except BaseException:
            _exit_failed()
            raise
        _exit()
        return result
    if {" and ".join(fast)}:
        return _op(_index{op_args})
    return _call(_name, *_general({values_text}, _extra))
"""

    def general(values, extra):
        # Back to the (args, kwargs) a caller wrote, as far as it matters: the given positional values up
        # to the first missing one, everything after by name; then slow() checks and converts.
        if extra:
            return slow(tuple(v for v in values[:n_positional]) + tuple(extra), {})
        args, kwargs = [], {}
        for i, v in enumerate(values):
            if v is _MISSING:
                continue
            if i < n_positional and len(args) == i:
                args.append(v)
            else:
                kwargs[names[i]] = v
        return slow(tuple(args), kwargs)

    n_positional = len(positional_args)
    env["_general"] = general
    exec(compile(source, f"<strata frontend: {name}>", "exec"), env)
    _function_globals.append(env)
    fn = env[py_name]

    fn.__name__ = fn.__qualname__ = name
    fn.__signature__ = signature
    fn.__doc__ = f"{op['schema']}\n\nstrata's {name}, through the binding layer and the dispatcher."
    return fn


def _resolver(base, overloads):
    """The public function of a name with several operators (Note [Overloads] in layers/ops/operators.h):
    strata.mul(x, y) calls mul, strata.mul(x, 2.0) mul.Scalar, as torch's python_arg_parser picks among a
    name's signatures. strata's overloads come in pairs that differ in one argument, a Tensor in one and a
    number in the other (aten::mul.Tensor / aten::mul.Scalar); that argument's type picks."""
    if len(overloads) != 2:
        raise RuntimeError(f"strata: {base} has {len(overloads)} overloads; the frontend resolves pairs only")
    (op_a, fn_a), (op_b, fn_b) = overloads
    args_a, args_b = op_a["arguments"], op_b["arguments"]
    position = next((i for i, (a, b) in enumerate(zip(args_a, args_b))
                     if (a["type"] == "Tensor") != (b["type"] == "Tensor")), None)
    if position is None or args_a[position]["name"] != args_b[position]["name"] or args_a[position]["keyword_only"]:
        raise RuntimeError(f"strata: the overloads of {base} ({op_a['schema']}; {op_b['schema']}) do not differ "
                           "in one positional argument that is a Tensor in one of them")
    if args_a[position]["type"] != "Tensor":
        (op_a, fn_a), (op_b, fn_b) = (op_b, fn_b), (op_a, fn_a)
    tensor_fn, number_fn, number_arg = fn_a, fn_b, op_b["arguments"][position]
    key = number_arg["name"]
    number_kind = number_arg["type"]
    schemas = f"{op_a['schema']} | {op_b['schema']}"

    tensor_pick, number_pick = (op_a["name"], tensor_fn), (op_b["name"], number_fn)

    def pick(args, kwargs):
        value = args[position] if len(args) > position else kwargs.get(key, _MISSING)
        if type(value) is Tensor:
            return tensor_pick
        if value is _MISSING:  # the overload with a default takes it; else the Tensor one says what is missing
            return number_pick if number_arg["has_default"] else tensor_pick
        if number_kind in ("float", "int") and (isinstance(value, bool) or not isinstance(value, numbers.Real)):
            raise TypeError(f"{base}(): argument '{key}' (position {position + 1}) must be Tensor or "
                            f"{number_kind}, not {_type_name(value)}; schemas: {schemas}")
        return number_pick

    def resolved(*args, **kwargs):
        return pick(args, kwargs)[1](*args, **kwargs)

    resolved.overload = lambda *args, **kwargs: pick(args, kwargs)[0]
    resolved.__name__ = resolved.__qualname__ = base
    resolved.__doc__ = (f"{op_a['schema']}\n{op_b['schema']}\n\nstrata's {base}: {op_a['name']} for a Tensor "
                        f"'{key}', {op_b['name']} for a number, each through the binding layer and the dispatcher.")
    return resolved


def _takes_dim(op):
    return any(a["name"] == "dim" and a["type"] == "int[]" for a in op["arguments"])


def _dim_resolver(base, overloads):
    """The public function of a reduction with a dim overload (sum and sum.dim_IntList, mean and mean.dim;
    Note [Reductions over dims] in layers/ops/operators.h), called as torch's: strata.sum(x) and
    x.sum(dim=None) the plain op, x.sum(1), x.sum((0, -1), keepdim=True), x.sum([]) the dim overload.
    dim=None with keepdim=True (or a dtype the plain op does not take) is the dim overload over every dim."""
    (plain_op, plain_fn), (dim_op, dim_fn) = sorted(overloads, key=lambda pair: _takes_dim(pair[0]))
    plain_takes_dtype = any(a["name"] == "dtype" for a in plain_op["arguments"])
    schemas = f"{plain_op['schema']} | {dim_op['schema']}"

    def plain(dim, keepdim, dtype):
        return dim is None and keepdim is False and (dtype is None or plain_takes_dtype)

    def resolved(input, dim=None, keepdim=False, *, dtype=None):
        if plain(dim, keepdim, dtype):
            return plain_fn(input) if dtype is None else plain_fn(input, dtype=dtype)
        if dim is None:
            dim = ()
        elif isinstance(dim, numbers.Integral) and not isinstance(dim, bool):
            dim = (int(dim),)
        elif not isinstance(dim, (tuple, list)):
            raise TypeError(f"{base}(): argument 'dim' (position 2) must be None, an int or a tuple of ints, "
                            f"not {type(dim).__name__}; schemas: {schemas}")
        return dim_fn(input, tuple(dim), keepdim) if dtype is None else dim_fn(input, tuple(dim), keepdim,
                                                                                 dtype=dtype)

    def overload(input, dim=None, keepdim=False, *, dtype=None):
        return plain_op["name"] if plain(dim, keepdim, dtype) else dim_op["name"]

    resolved.overload = overload
    resolved.__name__ = resolved.__qualname__ = base
    resolved.__doc__ = (f"{plain_op['schema']}\n{dim_op['schema']}\n\nstrata's {base}: {plain_op['name']} "
                        f"without dim, {dim_op['name']} with one, each through the binding layer and the "
                        "dispatcher.")
    return resolved


def _public(operators, functions):
    """The module's functions by Python name: an operator's own function, or for a name with overloads
    ("mul" and "mul.Scalar") one function that picks between them; its overload(*args, **kwargs) names the
    operator a call with those arguments runs (the embedded frontend checks it calls the op it traces)."""
    groups = {}
    for op in operators:
        groups.setdefault(op["name"].split(".")[0], []).append((op, functions[op["name"]]))

    def public(base, group):
        if len(group) == 1:
            return group[0][1]
        if len(group) == 2 and _takes_dim(group[0][0]) != _takes_dim(group[1][0]):
            return _dim_resolver(base, group)
        return _resolver(base, group)

    return {base: public(base, group) for base, group in groups.items()}


SCHEMAS = {op["name"]: op["schema"] for op in _strata.operators()}
# Every operator's own function, by the operator's name ("mul", "mul.Scalar"): what torch.ops.aten.mul.Scalar is.
OPERATORS = {op["name"]: _make(op) for op in _strata.operators()}
# What `strata.<name>` is: OPERATORS' functions, with one function per overloaded name.
FUNCTIONS = _public(_strata.operators(), OPERATORS)


# Note [Torch's forms of an operator's arguments]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# Some arguments torch takes are forms of the same operator call, which torch itself turns into it before
# its kernel runs: conv2d on an unbatched [C,H,W] input is the batched call on input.unsqueeze(0), then
# squeeze(0); padding='valid' is 0 and padding='same' the symmetric padding dilation*(k-1)/2 of each
# spatial dim. strata.conv2d takes them the same way, each as the strata calls torch makes (an unsqueeze,
# the conv2d, a squeeze); what would need an operator strata does not have (the asymmetric padding of
# 'same' with an even kernel extent, torch's F.pad) is refused saying so. The function keeps the operator's
# overload() (the embedded frontend asks which operator a call runs).
def _conv2d_as_torch(conv2d):
    def resolved(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
        if isinstance(padding, str):
            padding = _padding_from_string(padding, weight, stride, dilation)
        if type(input) is Tensor and input.ndim == 3:
            out = conv2d(OPERATORS["unsqueeze"](input, 0), weight, bias, stride, padding, dilation, groups)
            return OPERATORS["squeeze"](out, 0)
        return conv2d(input, weight, bias, stride, padding, dilation, groups)

    resolved.overload = lambda *args, **kwargs: "conv2d"
    resolved.__name__ = resolved.__qualname__ = "conv2d"
    resolved.__signature__ = inspect.signature(conv2d)
    resolved.__doc__ = (f"{SCHEMAS['conv2d']}\n\nstrata's conv2d, with torch's forms: an unbatched [C,H,W] input "
                        "(unsqueezed, then squeezed) and padding='valid' or 'same' (Note [Torch's forms of an "
                        "operator's arguments] in strata/_ops.py).")
    return resolved


def _padding_from_string(padding, weight, stride, dilation):
    if padding == "valid":
        return 0
    if padding != "same":
        raise ValueError(f"conv2d(): invalid padding string '{padding}', should be one of {{'valid', 'same'}}")
    strides = stride if isinstance(stride, (tuple, list)) else (stride, stride)
    if any(s != 1 for s in strides):
        raise ValueError("conv2d(): padding='same' is not supported for strided convolutions (as torch)")
    if type(weight) is not Tensor or weight.ndim != 4:
        raise TypeError("conv2d(): padding='same' needs a 4-D weight [K, C/groups, R, S]")
    dilations = dilation if isinstance(dilation, (tuple, list)) else (dilation, dilation)
    pads = []
    for extent, d in zip(weight.shape[2:], dilations):
        total = d * (extent - 1)
        if total % 2:
            raise UsageError(f"conv2d(): padding='same' with a kernel extent of {total + 1} (dilation {d}, size "
                             f"{extent}) needs {total // 2} zeros before and {total - total // 2} after, an "
                             "asymmetric padding strata's conv2d does not have (torch pads the input first with "
                             "F.pad); give padding as ints, or an odd kernel size")
        pads.append(total // 2)
    return tuple(pads)


FUNCTIONS["conv2d"] = _conv2d_as_torch(FUNCTIONS["conv2d"])


def _gelu_as_torch(gelu):
    """gelu(x, approximate='none' | 'tanh') as torch.nn.functional.gelu: 'none' is strata's gelu (erf); 'tanh'
    is the tanh form, made of strata's pointwise operators as the gelu_tanh program makes it (eight calls:
    strata has no fused kernel for it; docs/compiled.md fuses them). Note [Torch's forms of an operator's
    arguments]."""
    k = math.sqrt(2.0 / math.pi)

    def resolved(self, approximate="none"):
        if approximate == "none":
            return gelu(self)
        if approximate != "tanh":
            raise ValueError(f"gelu(): approximate argument must be either none or tanh, not {approximate!r}")
        inner = OPERATORS["add"](self, OPERATORS["mul.Scalar"](OPERATORS["pow"](self, 3.0), 0.044715))
        t = OPERATORS["add.Scalar"](OPERATORS["tanh"](OPERATORS["mul.Scalar"](inner, k)), 1.0)
        return OPERATORS["mul"](OPERATORS["mul.Scalar"](self, 0.5), t)

    resolved.overload = lambda *args, **kwargs: "gelu"
    resolved.__name__ = resolved.__qualname__ = "gelu"
    resolved.__doc__ = f"{SCHEMAS['gelu']}\n\n" + _gelu_as_torch.__doc__
    return resolved


FUNCTIONS["gelu"] = _gelu_as_torch(FUNCTIONS["gelu"])


def _div_as_torch(div, name):
    """div(x, y, *, rounding_mode=None) as torch's: None is true division (div / div.Scalar); 'trunc' and
    'floor' round the quotient, which needs a kernel strata does not have, and say so rather than
    "unexpected keyword argument"."""
    def resolved(*args, rounding_mode=None, **kwargs):
        if rounding_mode is None:
            return div(*args, **kwargs)
        if rounding_mode not in ("trunc", "floor"):
            raise ValueError(f"{name}(): expected rounding_mode to be one of None, 'trunc', or 'floor' but found "
                             f"{rounding_mode!r} (as torch)")
        raise TypeError(f"{name}(): rounding_mode={rounding_mode!r} rounds the quotient, and strata has no "
                        f"{rounding_mode} division kernel (torch's aten::div.Tensor_mode, floor_divide); use "
                        "rounding_mode=None, true division")

    resolved.overload = div.overload
    resolved.true_division = div  # for x / y and x /= y, which take no rounding_mode: no frame more per call
    resolved.__name__ = resolved.__qualname__ = name
    resolved.__doc__ = div.__doc__ + "\n\nrounding_mode=None only: " + _div_as_torch.__doc__
    return resolved


for _name in ("div", "div_"):
    FUNCTIONS[_name] = _div_as_torch(FUNCTIONS[_name], _name)
