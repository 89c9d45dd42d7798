"""strata: trace one tensor op through every layer of a tensor stack, from Python.

    import strata
    a = strata.randn(64, 128)
    b = strata.randn(128, 32)
    c = strata.matmul(a, b)      # Python -> pybind11 -> binding -> dispatcher -> OpenBLAS
    c.numpy()

The operators (strata.OPERATORS) are generated from the C++ declarations; see docs/python.md.
"""
import numbers as _numbers
import threading as _threading

from . import _strata
from ._compile import CompilerUnavailableError, compile, explain  # noqa: A004 (strata.compile, as torch.compile)
from ._errors import Error, GraphBreak, IndexRangeError, UnavailableError, UsageError
from ._ops import FUNCTIONS, OPERATORS, SCHEMAS
from ._profile import profile
from ._tensor import (Tensor, bfloat16, dtype, empty, empty_like, float16, float32, float64, from_numpy, full,
                      full_like,
                      manual_seed, ones, rand, randn, randn_like, tensor, zeros, zeros_like)

globals().update(FUNCTIONS)  # strata.mul picks mul or mul.Scalar (Note [Overloads])

_strata._apply_thread_environment()  # STRATA_NUM_THREADS, checked (a bad value raises strata.UsageError)
get_num_threads = _strata.get_num_threads


def set_num_threads(n):
    """The CPU threads strata's loops and OpenBLAS use from now on, as torch.set_num_threads(n).

    n is an int from 1 to 256; the default is STRATA_NUM_THREADS, else the CPUs this process may run on.
    Reports name the count in their header and JSON, and each library row the threads its call used."""
    if isinstance(n, bool) or not isinstance(n, _numbers.Integral):
        raise TypeError(f"set_num_threads: n must be an int, not {type(n).__name__}")
    _strata._set_num_threads(max(min(int(n), 2**62), -2**62))


# Note [Autocast contexts]
# ~~~~~~~~~~~~~~~~~~~~~~~~
# Autocast state (on or off, and the dtype) is per thread, in C++ (layers/dispatch/autocast.h), and a
# context changes only the state of the thread that entered it. Each thread keeps its open contexts in
# entry order, each with the state it found on entry. Exiting the innermost puts that state back.
# Exiting one out of order (a contextlib.ExitStack, generators closed late) leaves the state as the
# contexts still open define it, and hands what it saved to the context entered right after it: when
# that one exits, the thread goes back to the state from before both, as if they had exited in order
# (restoring each context's own saved state instead leaves autocast on after the last exit). A context
# exited on a thread that did not enter it, or never entered, raises strata.UsageError and changes
# nothing: the thread that entered it keeps its state until it exits there.
_autocast_local = _threading.local()


def _open_contexts():
    """This thread's open autocast entries, innermost last: each a one-element list [saved state]."""
    stack = getattr(_autocast_local, "stack", None)
    if stack is None:
        stack = _autocast_local.stack = []
    return stack


class autocast:  # noqa: N801 (named like torch.autocast)
    """Autocast on for the calls made inside the block, on this thread (torch.autocast's analogue):

        with strata.autocast("bf16"):
            c = strata.matmul(a, b)   # keys: Autocast > (Autograd >) CPU; a and b cast by to_copy

    matmul, linear and conv2d cast their f32 inputs to the dtype (bf16 or f16); other ops fall through.
    One object may be entered again, nested, and on several threads; each entry is exited on the thread
    that made it. See docs/autocast.md and Note [Autocast contexts].
    """

    def __init__(self, dtype="bf16"):
        from ._tensor import _dtype_arg
        self._dtype = _dtype_arg(dtype, "autocast")
        self._entries = _threading.local()  # this object's open entries on each thread
        self._open = 0                     # on every thread

    def _mine(self):
        entries = getattr(self._entries, "list", None)
        if entries is None:
            entries = self._entries.list = []
        return entries

    def __enter__(self):
        saved = _strata._autocast_state()
        _strata._set_autocast_state(True, self._dtype)  # UsageError for f32/f64, and nothing changed
        entry = [saved]
        _open_contexts().append(entry)
        self._mine().append(entry)
        self._open += 1
        return self

    def __exit__(self, *exc):
        mine = self._mine()
        if not mine:
            if self._open:
                raise UsageError("strata.autocast: __exit__ on a thread that did not enter this context; autocast "
                                 "state is per thread, so exit it on the thread that entered it (nothing was "
                                 "changed on either thread)")
            raise UsageError("strata.autocast: __exit__ without a matching __enter__ (nothing was changed)")
        entry = mine.pop()
        self._open -= 1
        stack = _open_contexts()
        i = next(k for k, e in enumerate(stack) if e is entry)
        del stack[i]
        if i == len(stack):  # the innermost: back to what it found
            _strata._set_autocast_state(*entry[0])
        else:  # out of order: the next one restores what this one found (Note [Autocast contexts])
            stack[i][0] = entry[0]
        return False


def _reflected_number(other, symbol):
    """c - x and c / x take a real number c (Python calls these only once c's own operator gave up)."""
    if isinstance(other, bool) or not isinstance(other, _numbers.Real):
        raise TypeError(f"`{type(other).__name__} {symbol} strata.Tensor` is not supported: the left operand must be "
                        "a real number (int or float) or a strata.Tensor (a numpy array: convert it with "
                        "strata.tensor or strata.from_numpy first)")


# numpy defers to the tensor's reflected operators (np.float64(1) - x is a strata.Tensor, as it is a torch
# tensor with torch's); without this numpy converted the tensor and returned an ndarray.
Tensor.__array_priority__ = 1000

# Python's operators, where the stack has the operator they mean.
if "matmul" in OPERATORS:
    Tensor.__matmul__ = lambda self, other: OPERATORS["matmul"](self, other)
if "add" in FUNCTIONS:
    Tensor.__add__ = Tensor.__radd__ = lambda self, other: FUNCTIONS["add"](self, other)  # a number: add.Scalar
if "mul" in FUNCTIONS:
    Tensor.__mul__ = Tensor.__rmul__ = lambda self, other: FUNCTIONS["mul"](self, other)
if "sub" in FUNCTIONS:
    Tensor.__sub__ = lambda self, other: FUNCTIONS["sub"](self, other)
if "mul" in FUNCTIONS and "add" in FUNCTIONS:
    def _rsub(self, other):
        """2.0 - x as (x * -1.0) + 2.0 (mul.Scalar, then add.Scalar): negation is exact and -x + c is c - x
        in IEEE arithmetic (+0 where x == c, as torch's rsub), so the value is torch's bit for bit, signed
        zeros and NaN included (add.Scalar rounds the number to a half tensor's dtype first, as torch's
        rsub does: Note [A number added to a half tensor] in layers/kernels/cpu/cpu_common.h); strata has no
        rsub operator of its own."""
        _reflected_number(other, "-")
        return FUNCTIONS["add"](FUNCTIONS["mul"](self, -1.0), other)
    Tensor.__rsub__ = _rsub
if "div" in FUNCTIONS:
    # x / y (div), x / 2.0 (div.Scalar): true division, IEEE as torch's (x / 0 is inf, 0 / 0 NaN).
    _true_division = FUNCTIONS["div"].true_division
    Tensor.__truediv__ = lambda self, other: _true_division(self, other)
if "div" in FUNCTIONS and "pow" in FUNCTIONS:
    def _rtruediv(self, other):
        """2.0 / x as torch computes it (torch.Tensor.__rtruediv__ is reciprocal(self) * other): pow(x, -1),
        which is one division 1 / x as torch's reciprocal, then mul.Scalar by the number."""
        _reflected_number(other, "/")
        return FUNCTIONS["mul"](FUNCTIONS["pow"](self, -1.0), other)
    Tensor.__rtruediv__ = _rtruediv


def _no_floor_division(self, other):
    raise TypeError("strata has no floor division (torch's aten::floor_divide / div with rounding_mode='floor'): "
                    "`//` is not supported; use `/` or strata.div for true division")


Tensor.__floordiv__ = Tensor.__rfloordiv__ = Tensor.__ifloordiv__ = _no_floor_division
if "pow" in FUNCTIONS:
    Tensor.__pow__ = lambda self, exponent: FUNCTIONS["pow"](self, exponent)
if "mul" in FUNCTIONS:
    # -x as x * -1.0 (mul.Scalar, its row): negation is exact, so the value is torch's neg, signed zeros
    # and NaN included; strata has no neg operator of its own yet.
    Tensor.__neg__ = lambda self: FUNCTIONS["mul"](self, -1.0)


def _method(fn):
    return lambda self, *args, **kwargs: fn(self, *args, **kwargs)


# The operators as Tensor methods, as torch's: x.relu(), x.matmul(w), x.add(y, alpha=2), x.sum(). Each is
# the function strata.NAME with the tensor first, so the checks, overloads and rows are the same.
for _name in ("matmul", "relu", "tanh", "add", "sub", "mul", "div", "pow", "sum", "mean", "sigmoid", "softmax",
              "log_softmax"):  # the ones torch.Tensor has
    if _name in FUNCTIONS:
        setattr(Tensor, _name, _method(FUNCTIONS[_name]))


class no_grad:  # noqa: N801 (torch's name)
    """with strata.no_grad(): ops record no autograd node and their outputs do not require grad, as in
    torch.no_grad(); an in-place op may then write a leaf that requires grad (an optimizer's update)."""

    def __enter__(self):
        self._saved = _strata._grad_enabled()
        _strata._set_grad_enabled(False)
        return self

    def __exit__(self, *exc):
        _strata._set_grad_enabled(self._saved)
        return False


def is_grad_enabled():
    """Whether ops record autograd nodes now (False inside strata.no_grad())."""
    return _strata._grad_enabled()


# The in-place operators as torch's methods: x.relu_(), x.add_(y, alpha=2), x.mul_(y) write x (through a
# view, its base) and return x itself, the same Python object, as torch's do. Each is one call of the
# operator relu_ / add_ / mul_ (its own binding and dispatch rows); x._version counts the writes to x's
# storage (Note [Version counter]). x.mul_(y) calls mul_, x.mul_(2.0) mul_.Scalar (Note [Overloads]).
def _in_place(name):
    fn = FUNCTIONS[name]

    def method(self, *args, **kwargs):
        fn(self, *args, **kwargs)
        return self
    method.__name__ = name
    method.__doc__ = f"{name}: in place on self (the operator {name}), returns self."
    return method


for _name in ("relu_", "add_", "sub_", "mul_", "div_"):
    if _name in FUNCTIONS:
        setattr(Tensor, _name, _in_place(_name))


# x += y, x -= 2.0, x *= y, x /= y: the in-place operator, as torch's Tensor.__iadd__ calls add_ (a number
# picks the .Scalar overload): x itself is written, so its views and other handles see the new values,
# and autograd records the op as torch does. x keeps its dtype (a wider other is cast to it, as torch
# allows for every floating dtype); an other that would grow x's shape is refused. Anything else than a
# Tensor or a real number gives Python's TypeError.
def _python_in_place(dunder, name):
    fn = getattr(FUNCTIONS[name], "true_division", FUNCTIONS[name])  # x /= y: div_ without rounding_mode

    def method(self, other):
        if not isinstance(other, Tensor) and (isinstance(other, bool) or not isinstance(other, _numbers.Real)):
            return NotImplemented
        fn(self, other)
        return self
    method.__name__ = dunder
    return method


for _dunder, _name in (("__iadd__", "add_"), ("__isub__", "sub_"), ("__imul__", "mul_"), ("__itruediv__", "div_")):
    if _name in FUNCTIONS:
        setattr(Tensor, _dunder, _python_in_place(_dunder, _name))


# strata has no comparison operators (torch's eq, ne, lt, le, gt, ge): `x == y` would otherwise be Python's
# identity test, a bool where torch gives an elementwise tensor, a silent wrong answer. A comparison with
# a tensor or a number raises; with anything else (`x == None`) Python's default stands (False, as torch
# says). Hashing stays by identity, as torch's, so tensors remain dict keys and set members.
def _no_comparison(symbol):
    def compare(self, other):
        if isinstance(other, Tensor) or isinstance(other, _numbers.Number):
            raise TypeError(f"strata has no comparison operators (torch's eq, ne, lt, le, gt, ge): `tensor {symbol} "
                            f"{type(other).__name__}` is not supported; compare values with x.numpy() or x.tolist(), "
                            "or identity with `is`")
        return NotImplemented
    return compare


for _dunder, _symbol in (("__eq__", "=="), ("__ne__", "!="), ("__lt__", "<"), ("__le__", "<="), ("__gt__", ">"),
                         ("__ge__", ">=")):
    setattr(Tensor, _dunder, _no_comparison(_symbol))
Tensor.__hash__ = object.__hash__


def _no_rpow(self, other):
    raise TypeError(f"strata's pow takes a tensor base and a float exponent (x ** 2.0); a {type(other).__name__} "
                    "base with a tensor exponent (2 ** x) is not supported")


Tensor.__rpow__ = _no_rpow


def _requires_grad_(self, requires_grad=True):
    """Sets requires_grad in place and returns the tensor (torch's requires_grad_). Only a leaf's flag
    can change: a computed tensor's follows its inputs."""
    if not isinstance(requires_grad, bool):
        raise TypeError(f"requires_grad_(): argument 'requires_grad' must be bool, not {type(requires_grad).__name__}")
    if not self.is_leaf and not requires_grad:
        raise UsageError("requires_grad_(): you can only change requires_grad flags of leaf tensors; this one "
                         f"was computed by {self.grad_fn}")
    if self.is_leaf:
        self.requires_grad = requires_grad
    return self


Tensor.requires_grad_ = _requires_grad_

from . import _views  # noqa: E402,F401  (Tensor's view methods and indexing)

# strata.squeeze(x, (0, 2)) and strata.squeeze(x), as x.squeeze takes them; FUNCTIONS too, so that the
# embedded frontend times what a user's strata.squeeze runs.
FUNCTIONS["squeeze"] = squeeze = _views._squeeze

# `from strata import *` brings every operator except those named like a Python builtin (the gradient op
# `sum`, and `pow`): a star import must not shadow them. They stay strata.sum etc.
import builtins as _builtins  # noqa: E402

__all__ = ["Tensor", "autocast", "Error", "UsageError", "IndexRangeError", "UnavailableError",
           "dtype", "float32", "float64", "float16", "bfloat16",
           "zeros", "ones", "full", "empty", "tensor", "zeros_like", "full_like", "randn_like", "empty_like",
           "rand", "randn", "from_numpy", "manual_seed", "set_num_threads", "get_num_threads", "no_grad", "is_grad_enabled", "OPERATORS", "SCHEMAS", "profile",
           "explain", "GraphBreak", "CompilerUnavailableError",
           *(name for name in FUNCTIONS if not hasattr(_builtins, name))]
