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

# Python's operators, where the stack has the operator they mean.
if "matmul" in OPERATORS:
    Tensor.__matmul__ = lambda self, other: OPERATORS["matmul"](self, other)
if "add" in OPERATORS:
    Tensor.__add__ = lambda self, other: OPERATORS["add"](self, other)

__all__ = ["Tensor", "Error", "UsageError", "UnavailableError", "float32", "float64", "float16", "bfloat16",
           "zeros", "rand", "randn", "from_numpy", "manual_seed", "OPERATORS", "SCHEMAS", "profile", *OPERATORS]
