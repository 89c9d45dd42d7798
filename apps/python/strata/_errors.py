"""strata's exceptions (created by the extension; see Note [Errors across the language boundary] in
apps/python/crossing.cpp).

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


class GraphBreak(Error):
    """Raised inside strata.compile's capture at what cannot be captured (Note [Graph breaks]);
    strata.compile catches it, records the reason and where, and runs that call eagerly."""

    def __init__(self, reason, where="?"):
        super().__init__(reason)
        self.where = where


# Note [Graph breaks]
# ~~~~~~~~~~~~~~~~~~~
# Capture sees strata ops at the dispatcher; Python between them runs for real and is not recorded. So
# whatever makes the Python depend on a tensor's VALUES would be baked into the graph as it happened on
# the first call (a branch taken, a number read): those reads raise GraphBreak while a capture runs on
# this thread: item(), tolist(), numpy() and numpy_float64(), np.asarray(t) (the buffer protocol, checked
# in C++: module.cpp's get_buffer), bool(t) (an `if` on a tensor), float(t), int(t); so do backward() and
# creating a tensor (zeros, rand, randn, from_numpy: the capture would freeze its values as a constant)
# and returning anything but tensors. torch.compile splits the function at a break into graphs around the
# Python; strata does the simplest honest thing: the calls with those guards run eagerly, and the break
# is recorded with its reason and the line that caused it (explain()). The function ran once partly under
# capture before the break, so its Python side effects up to that point happen twice on that first call.
# Ops with no lowering (to_copy, conv2d) are NOT breaks: they run inside the compiled graph as extern
# kernels (their own kernel through dispatch, Inductor's fallbacks), listed with the reason in explain().
def break_if_capturing(what):
    """Raises GraphBreak(what) when a capture runs on this thread (one C++ call otherwise)."""
    if _strata._capturing():
        raise GraphBreak(what, _where())


def _where():
    """The innermost line outside the strata package: where the user's code broke the graph."""
    import os
    import traceback
    package = os.path.dirname(os.path.abspath(__file__))
    for frame in reversed(traceback.extract_stack()):
        if not os.path.abspath(frame.filename).startswith(package + os.sep):
            return f"{frame.filename}:{frame.lineno}: {frame.line}"
    return "?"
