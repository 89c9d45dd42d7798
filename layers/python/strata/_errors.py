"""strata's exceptions (created by the extension; see Note [Errors across the language boundary] in
layers/python/crossing.cpp).

    Error(RuntimeError)              a library call failed, or a bug
    UsageError(Error, ValueError)    the call asked for something malformed or impossible
    IndexRangeError(UsageError, IndexError)  a dim or an index out of range (as torch's IndexError)
    UnavailableError(Error)          valid, but this machine cannot serve it (no GPU, out of memory)

Wrong Python types raise the built-in TypeError.
"""
from . import _strata

Error = _strata.Error
UsageError = _strata.UsageError
IndexRangeError = _strata.IndexRangeError
UnavailableError = _strata.UnavailableError
