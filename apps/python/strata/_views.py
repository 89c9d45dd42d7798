"""Views as Tensor methods and indexing (docs/views.md): x.t(), x.T, x.transpose(a, b), x.permute(...),
x.view/reshape(...), x.expand(...), x.unsqueeze/squeeze, x.narrow/select, x.contiguous(), and x[...]
with ints, slices (with steps), None and Ellipsis. Each is a call of the view operator through the
frontend function generated from its schema (strata._ops): the python, pybind11, binding, dispatch and
library rows of a view are those of any operator, and a view shares its tensor's storage."""
import numbers

import numpy as np

from . import _strata
from ._errors import UsageError
from ._ops import OPERATORS, follow_rows

Tensor = _strata.Tensor
_INT64_MAX = 2**63 - 1
_index = _strata._index
# _getitem reads the rows switch as a global of this module (one dict load), kept equal to strata._ops'.
_rows_on = False
follow_rows(globals())


def _size_args(size):
    """view(2, 3) and view((2, 3)) as in torch."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        return tuple(size[0])
    return tuple(size)


def _T(self):
    # torch: t() for at most 2 dims, else every dim reversed.
    if self.ndim <= 2:
        return OPERATORS["t"](self)
    return OPERATORS["permute"](self, tuple(range(self.ndim - 1, -1, -1)))


def _squeeze(self, dim=None):
    """torch's squeeze: every dim of size 1 (dim=None), one dim, or a tuple of dims (torch 2.0), each left
    as it is when its size is not 1."""
    if dim is None:
        # Every dim of size 1 removed: one reshape, always a view (dims of size 1 carry no layout).
        return OPERATORS["reshape"](self, tuple(s for s in self.shape if s != 1))
    if not isinstance(dim, (tuple, list)):
        return OPERATORS["squeeze"](self, dim)
    dims = [_dim_index(d, self.ndim, "squeeze") for d in dim]
    for d in dims:
        if dims.count(d) > 1:
            raise UsageError(f"squeeze(): dim {d} appears multiple times in the list of dims")
    out = OPERATORS["reshape"](self, tuple(self.shape)) if not dims else self  # a view, as torch's, for ()
    for d in sorted(dims, reverse=True):  # the highest first: each squeeze leaves the lower dims' numbers
        out = OPERATORS["squeeze"](out, d)
    return out


# The one operator a call runs, where it is one (the embedded frontend asks: strata._ops._public).
_squeeze.overload = lambda self, dim=None: "squeeze" if isinstance(dim, numbers.Integral) else ""


def _mT(self):  # noqa: N802 (torch's name)
    if self.ndim < 2:
        raise UsageError(f"tensor.mT is only supported on matrices or batches of matrices. Got {self.ndim}-D tensor.")
    return OPERATORS["transpose"](self, -2, -1)


def _dim_index(dim, ndim, fn):
    """dim in [-ndim, ndim) (a 0-d tensor counts as 1-d, as torch's), as an index from 0."""
    if isinstance(dim, bool) or not isinstance(dim, numbers.Integral):
        raise TypeError(f"{fn}(): dims must be ints, not {type(dim).__name__}")
    rank = max(ndim, 1)
    if not -rank <= dim < rank:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-rank}, {rank - 1}], but got {dim})")
    return dim % rank


def _flatten(self, start_dim=0, end_dim=-1):
    """Dims start_dim..end_dim merged into one, by a reshape call: a view when the strides allow, else a
    copy, as torch's flatten. The tensor itself when there is nothing to merge (torch's too)."""
    ndim = self.ndim
    start, end = _dim_index(start_dim, ndim, "flatten"), _dim_index(end_dim, ndim, "flatten")
    if start > end:
        raise UsageError("flatten() has invalid args: start_dim cannot come after end_dim")
    if ndim == 0:
        return OPERATORS["reshape"](self, (1,))
    if start == end:
        return self
    shape = self.shape
    merged = 1
    for size in shape[start:end + 1]:
        merged *= size
    return OPERATORS["reshape"](self, (*shape[:start], merged, *shape[end + 1:]))


def _stride(self, dim=None):
    strides = self._strides()
    if dim is None:
        return strides
    if isinstance(dim, bool) or not isinstance(dim, numbers.Integral):
        raise TypeError(f"stride(): dim must be an int, not {type(dim).__name__}")
    if not -max(len(strides), 1) <= dim < max(len(strides), 1):
        raise IndexError(f"stride(): dim {dim} is out of range for a tensor of size {list(self.shape)} "
                         f"(expected a dim in [{-max(len(strides), 1)}, {max(len(strides), 1) - 1}])")
    return strides[dim]


def _getitem(self, index):
    """x[i], x[a:b:s], x[None], x[..., i], and tuples of them: each int a select, each slice a slice (a
    full ':' is no call), each None an unsqueeze, as torch's basic indexing; every result is a view."""
    # The walk is the extension's (_strata._index, Note [Indexing in the extension] in
    # apps/python/indexing.cpp): in Python it cost more than the views it calls. Not while the python and
    # pybind11 rows are on: _index calls the operators from C++, past their frontend functions, so a
    # profile would get no python or pybind11 row for them (Note [The python and pybind11 rows]); the
    # Python walk below calls each through its frontend function. _index also hands back None for an
    # index it does not take (a bool, a Tensor, a float...), for the walk below to refuse in its words.
    if not _rows_on:
        out = _index(self, index)
        if out is not None:
            return out
    return _walk(self, index)


def _walk(self, index):
    """_getitem's walk in Python: each int a select, each slice a slice, each None an unsqueeze."""
    # The commonest form first, without the general walk below and without asking for ndim (a
    # property costs ~140 ns): measured by bench/python_views_bench.py. A 0-d tensor makes the operator
    # refuse; the general walk then raises torch's IndexError.
    if type(index) is int:
        try:
            return _select(self, 0, index)
        except UsageError:
            if self.ndim > 0:
                raise  # the operator's own error (an index out of range names the dim and its size)
    items = index if type(index) is tuple else (index,)
    ellipses = consumed = 0
    for it in items:
        if it is Ellipsis:
            ellipses += 1
        elif it is not None:
            consumed += 1
    if ellipses > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    ndim = self.ndim  # once: a property costs ~140 ns
    if consumed > ndim:
        raise IndexError(f"too many indices for tensor of dimension {ndim} (got {consumed})")
    out, dim = self, 0
    for it in items:
        if it is Ellipsis:
            dim += ndim - consumed
        elif it is None:
            out = _unsqueeze(out, dim)
            dim += 1
        elif type(it) is int:
            out = _select(out, dim, it)
        elif type(it) is slice:
            out = _slice_dim(out, dim, it)
            dim += 1
        elif isinstance(it, (bool, Tensor, list, np.ndarray)):
            raise TypeError(f"strata indexes with ints, slices, None and ...; not {type(it).__name__} "
                            "(torch's advanced indexing, x[[0, 2]] or a mask: strata has no index_select or gather operator; "
                            "select the rows one by one, or slice)")
        elif isinstance(it, numbers.Integral):  # numpy's ints and other integral types
            out = _select(out, dim, int(it))
        else:
            raise TypeError(f"strata indexes with ints, slices, None and ...; not {type(it).__name__}")
    return out


def _slice_dim(tensor, dim, it):
    """One slice of an index on `dim`: a full ':' is no call, as in torch."""
    start = 0 if it.start is None else it.start
    stop = _INT64_MAX if it.stop is None else it.stop
    step = 1 if it.step is None else it.step
    if start == 0 and stop == _INT64_MAX and step == 1:
        return tensor
    return _slice(tensor, dim, start, stop, step)


# The operators' frontend functions are the methods themselves where their parameters are the method's
# (self first): a lambda in between would add a Python frame to every view (~60 ns, bench/python_views_bench.py).
_select = OPERATORS["select"]
_slice = OPERATORS["slice"]
_unsqueeze = OPERATORS["unsqueeze"]

Tensor.t = OPERATORS["t"]
Tensor.T = property(_T)
Tensor.mT = property(_mT)
Tensor.flatten = _flatten
Tensor.transpose = OPERATORS["transpose"]
Tensor.permute = lambda self, *dims: OPERATORS["permute"](self, _size_args(dims))
Tensor.view = lambda self, *size: OPERATORS["view"](self, _size_args(size))
Tensor.reshape = lambda self, *size: OPERATORS["reshape"](self, _size_args(size))
Tensor.expand = lambda self, *size: OPERATORS["expand"](self, _size_args(size))
Tensor.unsqueeze = _unsqueeze
Tensor.squeeze = _squeeze
Tensor.narrow = OPERATORS["narrow"]
Tensor.select = _select
Tensor.contiguous = OPERATORS["contiguous"]
Tensor.stride = _stride
Tensor.__getitem__ = _getitem


def _setitem(self, index, value):
    """x[i] += y and the other augmented assignments on an index: Python runs them as
    `v = x[i]; v = v.__iadd__(y); x[i] = v`, and v.__iadd__ has already written through the view (add_),
    so storing the same view back has nothing left to copy (torch's x[i] = v is copy_, here of a view onto
    itself). Any other assignment needs copy_ or fill_, which strata does not have: refused by name."""
    if isinstance(value, Tensor):
        target = _getitem(self, index)
        if (value.data_ptr() == target.data_ptr() and tuple(value.shape) == tuple(target.shape)
                and value.stride() == target.stride() and value.dtype == target.dtype):
            return
    raise TypeError("x[index] = value is torch's copy_ / fill_, which strata does not have: assigning to an "
                    "index is not supported; write in place through the view instead (x[index].add_(y), "
                    "x[index] *= 2, x[index] += y, ...)")


Tensor.__setitem__ = _setitem
