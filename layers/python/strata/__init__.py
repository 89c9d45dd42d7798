"""strata: trace one tensor op through every layer of a tensor stack, from Python.

    import strata
    a = strata.randn(64, 128)
    b = strata.randn(128, 32)
    c = strata.matmul(a, b)      # Python -> pybind11 -> binding -> dispatcher -> OpenBLAS
    c.numpy()

The operators (strata.OPERATORS) are generated from the C++ declarations; see docs/python.md.
"""
from . import _strata
from ._errors import Error, UnavailableError, UsageError
from ._ops import OPERATORS, SCHEMAS
from ._profile import profile
from ._tensor import (Tensor, bfloat16, float16, float32, float64, from_numpy, manual_seed, rand, randn,
                      zeros)

globals().update(OPERATORS)


class autocast:  # noqa: N801 (named like torch.autocast)
    """Autocast on for the calls made inside the block, on this thread (torch.autocast's analogue):

        with strata.autocast("bf16"):
            c = strata.matmul(a, b)   # keys: Autocast > (Autograd >) CPU; a and b cast by to_copy

    matmul, linear and conv2d cast their f32 inputs to the dtype (bf16 or f16); other ops fall through.
    See docs/autocast.md.
    """

    def __init__(self, dtype="bf16"):
        from ._tensor import _dtype_arg
        self._dtype = _dtype_arg(dtype, "autocast")
        self._guards = []

    def __enter__(self):
        self._guards.append(_strata._AutocastGuard(self._dtype))  # UsageError for f32/f64
        return self

    def __exit__(self, *exc):
        self._guards.pop()  # the guard's destructor restores the thread's previous state
        return False


# Python's operators, where the stack has the operator they mean.
if "matmul" in OPERATORS:
    Tensor.__matmul__ = lambda self, other: OPERATORS["matmul"](self, other)
if "add" in OPERATORS:
    Tensor.__add__ = lambda self, other: OPERATORS["add"](self, other)

# `from strata import *` brings every operator except those named like a Python builtin (the gradient op
# `sum`): a star import must not shadow them. They stay strata.sum etc.
import builtins as _builtins  # noqa: E402

__all__ = ["Tensor", "autocast", "Error", "UsageError", "UnavailableError", "float32", "float64", "float16", "bfloat16",
           "zeros", "rand", "randn", "from_numpy", "manual_seed", "OPERATORS", "SCHEMAS", "profile",
           *(name for name in OPERATORS if not hasattr(_builtins, name))]
