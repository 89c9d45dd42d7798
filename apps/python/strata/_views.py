"""Views as Tensor methods and indexing (docs/views.md): x.t(), x.T, x.transpose(a, b), x.permute(...),
x.view/reshape(...), x.expand(...), x.unsqueeze/squeeze, x.narrow/select, x.contiguous(), and x[...]
with ints, slices (with steps), None and Ellipsis. Each is a call of the view operator through the
frontend function generated from its schema (strata._ops): the python, pybind11, binding, dispatch and
library rows of a view are those of any operator, and a view shares its tensor's storage."""
import numbers

from . import _strata
from ._ops import OPERATORS

Tensor = _strata.Tensor
_INT64_MAX = 2**63 - 1


def _size_args(size):
    """view(2, 3) and view((2, 3)) as in torch."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        return tuple(size[0])
    return tuple(size)


def _transpose(self, dim0, dim1):
    return OPERATORS["transpose"](self, dim0, dim1)


def _T(self):
    # torch: t() for at most 2 dims, else every dim reversed.
    if self.ndim <= 2:
        return OPERATORS["t"](self)
    return OPERATORS["permute"](self, tuple(range(self.ndim - 1, -1, -1)))


def _squeeze(self, dim=None):
    if dim is not None:
        return OPERATORS["squeeze"](self, dim)
    # Every dim of size 1 removed: one reshape, always a view (dims of size 1 carry no layout).
    return OPERATORS["reshape"](self, tuple(s for s in self.shape if s != 1))


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
    items = index if isinstance(index, tuple) else (index,)
    ellipses = sum(1 for it in items if it is Ellipsis)
    if ellipses > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    consumed = sum(1 for it in items if it is not None and it is not Ellipsis)
    if consumed > self.ndim:
        raise IndexError(f"too many indices for tensor of dimension {self.ndim} (got {consumed})")
    out, dim = self, 0
    for it in items:
        if it is Ellipsis:
            dim += self.ndim - consumed
        elif it is None:
            out = OPERATORS["unsqueeze"](out, dim)
            dim += 1
        elif isinstance(it, bool) or isinstance(it, Tensor):
            raise TypeError(f"strata indexes with ints, slices, None and ...; not {type(it).__name__} "
                            "(advanced indexing is not implemented)")
        elif isinstance(it, numbers.Integral):
            out = OPERATORS["select"](out, dim, int(it))
        elif isinstance(it, slice):
            start = 0 if it.start is None else it.start
            stop = _INT64_MAX if it.stop is None else it.stop
            step = 1 if it.step is None else it.step
            if (start, stop, step) != (0, _INT64_MAX, 1):
                out = OPERATORS["slice"](out, dim, start, stop, step)
            dim += 1
        else:
            raise TypeError(f"strata indexes with ints, slices, None and ...; not {type(it).__name__}")
    return out


Tensor.t = lambda self: OPERATORS["t"](self)
Tensor.T = property(_T)
Tensor.transpose = _transpose
Tensor.permute = lambda self, *dims: OPERATORS["permute"](self, _size_args(dims))
Tensor.view = lambda self, *size: OPERATORS["view"](self, _size_args(size))
Tensor.reshape = lambda self, *size: OPERATORS["reshape"](self, _size_args(size))
Tensor.expand = lambda self, *size: OPERATORS["expand"](self, _size_args(size))
Tensor.unsqueeze = lambda self, dim: OPERATORS["unsqueeze"](self, dim)
Tensor.squeeze = _squeeze
Tensor.narrow = lambda self, dim, start, length: OPERATORS["narrow"](self, dim, start, length)
Tensor.select = lambda self, dim, index: OPERATORS["select"](self, dim, index)
Tensor.contiguous = lambda self: OPERATORS["contiguous"](self)
Tensor.stride = _stride
Tensor.__getitem__ = _getitem
