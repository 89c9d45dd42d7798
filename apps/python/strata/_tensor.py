"""Tensors: creation (zeros, rand, randn, from_numpy), dtypes and devices, and the Python side of
strata._strata.Tensor (numpy(), cpu(), to(), repr, operators)."""
import numbers

import numpy as np

from . import _strata
from ._errors import break_if_capturing

Tensor = _strata.Tensor

class dtype(str):  # noqa: N801 (torch.dtype's name)
    """A tensor's element type, as torch.dtype: strata.float32, float64, float16, bfloat16; x.dtype returns
    one. It is a str holding numpy's name, so it compares equal to the strings strata took before
    (x.dtype == "float32") and is accepted wherever a dtype string is; repr() names it as torch's does."""
    __slots__ = ()

    def __repr__(self):
        return f"strata.{str.__str__(self)}"

    @property
    def itemsize(self):
        return 8 if self == "float64" else 4 if self == "float32" else 2

    @property
    def is_floating_point(self):
        return True  # every strata dtype is


float32 = dtype("float32")
float64 = dtype("float64")
float16 = dtype("float16")
bfloat16 = dtype("bfloat16")
_DTYPE_OBJECTS = {str(d): d for d in (float32, float64, float16, bfloat16)}
# strata's own short names ("f32") and numpy dtypes are accepted too.
_DTYPES = {
    "float32": "f32", "f32": "f32", "float": "f32",
    "float64": "f64", "f64": "f64", "double": "f64",
    "float16": "f16", "f16": "f16", "half": "f16",
    "bfloat16": "bf16", "bf16": "bf16",
}


def _dtype_arg(dtype, fn):
    if isinstance(dtype, str):
        key = dtype
    elif isinstance(dtype, type) or isinstance(dtype, np.dtype):
        try:
            key = np.dtype(dtype).name
        except TypeError:
            key = None
    else:
        raise TypeError(f"{fn}(): dtype must be a string such as 'float32' or a numpy dtype, "
                        f"not {type(dtype).__name__}")
    if key not in _DTYPES:
        raise ValueError(f"{fn}(): unknown dtype {dtype!r}: use float32, float64, float16 or bfloat16")
    return _DTYPES[key]


def _device_arg(device, fn):
    if not isinstance(device, str):
        raise TypeError(f"{fn}(): device must be a string ('cpu', 'cuda', 'cuda:N'), not {type(device).__name__}")
    return device


def _sizes_arg(size, fn):
    # zeros(2, 3) and zeros((2, 3)) as in torch.
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    out = []
    for i, s in enumerate(size):
        if isinstance(s, bool) or not isinstance(s, numbers.Integral):
            raise TypeError(f"{fn}(): size must be a sequence of ints, but element {i} is "
                            f"{type(s).__name__}")
        if s < 0:
            raise ValueError(f"{fn}(): sizes must be non-negative, got {s} in {tuple(size)}")
        if s >= 2**63:
            raise ValueError(f"{fn}(): size {s} does not fit in 64 bits")
        out.append(int(s))
    if len(out) > 4:
        raise ValueError(f"{fn}(): strata tensors have at most 4 dimensions, got {len(out)}")
    return out


def _seed_arg(seed, fn):
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or not 0 <= seed < 2**64:
        raise ValueError(f"{fn}(): seed must be an int in [0, 2**64), got {seed!r}")
    return int(seed)


def _finish(t, requires_grad, fn):
    if not isinstance(requires_grad, bool):
        raise TypeError(f"{fn}(): requires_grad must be a bool, not {type(requires_grad).__name__}")
    t.requires_grad = requires_grad
    return t


# Creating a tensor inside strata.compile's capture breaks the graph (Note [Graph breaks] in _errors.py).
_MADE = ("strata.{}() inside a compiled function: its values would be frozen into the graph as a constant; "
         "create the tensor outside and pass it in")
_DATA = "data-dependent Python: {} reads a captured tensor's values, which the graph cannot know"
_CONTROL = "Python control flow on a tensor's value ({}(tensor)): the branch would be fixed at capture"


def zeros(*size, dtype=float32, device="cpu", requires_grad=False):
    """A tensor of zeros."""
    break_if_capturing(_MADE.format("zeros"))
    t = _strata.zeros(_sizes_arg(size, "zeros"), _dtype_arg(dtype, "zeros"), _device_arg(device, "zeros"))
    return _finish(t, requires_grad, "zeros")


def ones(*size, dtype=float32, device="cpu", requires_grad=False):
    """A tensor of ones."""
    return _filled(size, 1.0, dtype, device, requires_grad, "ones")


def full(size, fill_value, *, dtype=float32, device="cpu", requires_grad=False):
    """A tensor of `size` holding fill_value in every element (torch.full; float32 unless dtype says)."""
    if isinstance(fill_value, bool) or not isinstance(fill_value, numbers.Real):
        raise TypeError(f"full(): fill_value must be a real number, not {type(fill_value).__name__}")
    if not isinstance(size, (tuple, list)):
        raise TypeError(f"full(): argument 'size' must be a tuple of ints, not {type(size).__name__}")
    return _filled((size,), float(fill_value), dtype, device, requires_grad, "full")


def empty(*size, dtype=float32, device="cpu", requires_grad=False):
    """A tensor whose values are unspecified, as torch.empty's (strata's are zeros: a fresh buffer is filled)."""
    return _filled(size, 0.0, dtype, device, requires_grad, "empty")


def _filled(size, value, dtype, device, requires_grad, fn):
    break_if_capturing(_MADE.format(fn))
    t = _strata.full(_sizes_arg(size, fn), value, _dtype_arg(dtype, fn), _device_arg(device, fn))
    return _finish(t, requires_grad, fn)


def _number_in(value, dtype):
    """value (a float) rounded to dtype as a tensor of that dtype stores it (strata.full's conversion)."""
    return float(_strata.full([], value, _dtype_arg(dtype, "number"), "cpu")._values_float64())


def tensor(data, *, dtype=None, device="cpu", requires_grad=False):
    """A new tensor holding a copy of data: a number, nested lists or tuples of numbers, or a numpy array
    (torch.tensor). The values are read as float64 and cast to dtype (float32 by default, and for ints and
    bools, which strata has no dtype for; float64 for a float64 array, as torch keeps an array's dtype)."""
    break_if_capturing(_MADE.format("tensor"))
    if isinstance(data, Tensor):
        raise TypeError("tensor(): data is already a strata.Tensor; use x.clone() (or x.detach().clone()) to copy it")
    if isinstance(data, np.ndarray) and dtype is None and data.dtype in _NUMPY_DTYPES:
        dtype = _DTYPE_OBJECTS[data.dtype.name]
    try:
        values = np.array(data, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise TypeError(f"tensor(): data must be a number or a (nested) sequence of numbers of one shape, "
                        f"not {type(data).__name__} ({e})") from None
    if values.ndim > 4:
        raise ValueError(f"tensor(): strata tensors have at most 4 dimensions, got {values.ndim}")
    t = _strata.from_numpy(values).to(float32 if dtype is None else dtype)
    t = t._to(_device_arg(device, "tensor")) if device != "cpu" else t
    return _finish(t, requires_grad, "tensor")


def _like(fn, make, made):
    """zeros_like etc.: make(size, dtype=, device=, requires_grad=) with the tensor's shape, and its dtype
    and device unless given."""
    def like(input, *args, dtype=None, device=None, requires_grad=False, **kwargs):  # noqa: A002 (torch's name)
        if not isinstance(input, Tensor):
            raise TypeError(f"{fn}(): argument 'input' must be a strata.Tensor, not {type(input).__name__}")
        return make(input.shape, *args, dtype=input.dtype if dtype is None else dtype,
                    device=input.device if device is None else device, requires_grad=requires_grad, **kwargs)
    like.__name__ = fn
    like.__doc__ = f"{made}() with input's shape, and its dtype and device unless given (torch.{fn}); contiguous."
    return like


def rand(*size, dtype=float32, device="cpu", requires_grad=False, seed=None):
    """Uniform in [0, 1). With seed=None the process generator (manual_seed) is used and advanced."""
    break_if_capturing(_MADE.format("rand"))
    t = _strata.rand(_sizes_arg(size, "rand"), _dtype_arg(dtype, "rand"), _device_arg(device, "rand"),
                     _seed_arg(seed, "rand"))
    return _finish(t, requires_grad, "rand")


def randn(*size, dtype=float32, device="cpu", requires_grad=False, seed=None):
    """Standard normal. With seed=None the process generator (manual_seed) is used and advanced."""
    break_if_capturing(_MADE.format("randn"))
    t = _strata.randn(_sizes_arg(size, "randn"), _dtype_arg(dtype, "randn"), _device_arg(device, "randn"),
                      _seed_arg(seed, "randn"))
    return _finish(t, requires_grad, "randn")


def manual_seed(seed):
    """Seeds the process generator that rand/randn use when they are given no seed."""
    _strata.manual_seed(_seed_arg(seed, "manual_seed"))


_NUMPY_DTYPES = (np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.float16))


def from_numpy(array, requires_grad=False):
    """A CPU tensor sharing the array's memory, with the array's strides (a non-contiguous array gives a
    strided view, as torch.from_numpy does), when the array is aligned, writeable and in native byte order;
    otherwise the array is copied once first (the tensor then shares memory with that copy, not with
    `array`). Negative strides are refused, as torch refuses them. float32, float64 and float16 only."""
    break_if_capturing(_MADE.format("from_numpy"))
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy(): expected a numpy.ndarray, not {type(array).__name__}")
    dt = array.dtype
    if dt.newbyteorder("=") not in _NUMPY_DTYPES:
        raise TypeError(f"from_numpy(): strata takes float32, float64 or float16 arrays, not {dt}")
    if array.ndim > 4:
        raise ValueError(f"from_numpy(): strata tensors have at most 4 dimensions, got {array.ndim}")
    if not dt.isnative:
        array = array.astype(dt.newbyteorder("="))
    array = np.require(array, requirements=["ALIGNED", "WRITEABLE"])
    return _finish(_strata.from_numpy(array), requires_grad, "from_numpy")


def _numpy(self):
    """The values as a numpy array: a zero-copy view of a contiguous (or strided) CPU tensor in float32,
    float64 or float16. A CUDA tensor raises TypeError (copy with .cpu() first); bfloat16, which numpy
    lacks, raises TypeError (use .numpy_float64())."""
    break_if_capturing(_DATA.format("Tensor.numpy()"))
    why = self._no_host_view()
    if why:
        raise TypeError(why)
    return np.asarray(self)


def _array(self, dtype=None, copy=None):
    """numpy's entry for np.asarray(t) / np.array(t) when the buffer protocol has no view to give (a
    bfloat16 or CUDA tensor; float32/64/16 CPU tensors are viewed through the buffer, no copy).

    Without a dtype, refused with the reason, as torch refuses bf16 .numpy(): numpy has no bfloat16, and
    widening silently would hand back a float32 copy where a view was asked for (writes to it would not
    reach the tensor) with a dtype nobody chose; numpy's fallback made a 0-d object array holding the
    tensor. With an explicit dtype a CPU bfloat16 tensor gives a converted copy: np.asarray(t,
    dtype=np.float32) is exact (every bfloat16 value is a float32). A CUDA tensor is refused either way:
    copy it to the host with .cpu() first."""
    break_if_capturing(_DATA.format("np.asarray(tensor)"))
    why = self._no_host_view()
    if not why:
        return np.asarray(memoryview(self), dtype=dtype)
    if dtype is None or self.device != "cpu":
        raise TypeError(why + ("" if self.device != "cpu" else
                               "; or ask numpy for a converted copy: np.asarray(t, dtype=np.float32)"))
    return self._values_float64().astype(dtype)


def _numpy_float64(self):
    """A float64 copy of the values, from any dtype and device."""
    break_if_capturing(_DATA.format("Tensor.numpy_float64()"))
    return self._values_float64()


def _item(self):
    """The value of a one-element tensor as a Python float (torch's item())."""
    break_if_capturing(_DATA.format("Tensor.item()"))
    if self.numel() != 1:
        raise ValueError(f"item(): a Tensor with {self.numel()} elements cannot be converted to a Python number "
                         f"(only one element can)")
    return float(self._values_float64().reshape(-1)[0])


def _tolist(self):
    """The values as nested Python lists of floats (torch's tolist())."""
    break_if_capturing(_DATA.format("Tensor.tolist()"))
    return self._values_float64().tolist()


def _bool(self):
    # An object is true, as it was before strata.compile: only a capture refuses, where an `if` on a
    # tensor would fix the branch taken on the first call into the graph.
    break_if_capturing(_CONTROL.format("bool"))
    return True


def _number(kind):
    def convert(self):
        break_if_capturing(_CONTROL.format(kind))
        raise TypeError(f"{kind}() argument must be a string or a real number, not 'Tensor' (use .item())")
    return convert


def _backward(self, gradient=None, retain_graph=False):
    break_if_capturing("Tensor.backward() inside a compiled function: call backward() on its result")
    return self._backward_impl(gradient, retain_graph)


def _to(self, target):
    """x.to("cuda") / x.to("cpu"): a copy on that device; x.to(strata.float64) (a dtype name or a numpy
    dtype): a to_copy call (its own rows; differentiable, ToCopyBackward casts the gradient back). As torch,
    the tensor itself when it already has that dtype."""
    if isinstance(target, (type, np.dtype)) or (isinstance(target, str) and target in _DTYPES):
        key = _dtype_arg(target, "to")
        if _DTYPES.get(self.dtype) == key:
            return self
        from ._ops import FUNCTIONS  # _ops imports this module
        name = next(n for n in (float32, float64, float16, bfloat16) if _DTYPES[n] == key)
        return FUNCTIONS["to_copy"](self, dtype=name)
    return self._to(_device_arg(target, "to"))


def _cpu(self):
    return self._to("cpu")


def _cuda(self):
    """x.to("cuda"): a copy on the GPU (strata.UnavailableError where there is none)."""
    return self._to("cuda")


def _clone(self):
    """A copy with its own storage (torch's clone): one to_copy call to self's own dtype, through the
    dispatcher (its rows; differentiable, ToCopyBackward). Contiguous, where torch keeps a dense input's
    strides."""
    from ._ops import FUNCTIONS  # _ops imports this module
    return FUNCTIONS["to_copy"](self, dtype=self.dtype)


def _len(self):
    if self.ndim == 0:
        raise TypeError("len() of a 0-d tensor")
    return self.shape[0]


def _cast_to(target):
    def cast(self):
        return _to(self, target)
    cast.__name__ = {float32: "float", float64: "double", float16: "half", bfloat16: "bfloat16"}[target]
    cast.__doc__ = f"x.to(strata.{target}) (torch's x.{cast.__name__}()): self when it has that dtype already."
    return cast


def _repr(self):
    grad = f", grad_fn=<{self.grad_fn}>" if self.grad_fn else (", requires_grad=True" if self.requires_grad else "")
    return f"strata.Tensor(shape={self.shape}, dtype={self.dtype}, device={self.device}{grad})"


_dtype_name = Tensor.dtype  # the extension's property: numpy's name as a str
Tensor.dtype = property(lambda self: _DTYPE_OBJECTS[_dtype_name.__get__(self)],
                        doc="The element type: strata.float32, float64, float16 or bfloat16.")
Tensor.numpy = _numpy
Tensor.numpy_float64 = _numpy_float64
Tensor.item = _item
Tensor.tolist = _tolist
Tensor.__bool__ = _bool
Tensor.__float__ = _number("float")
Tensor.__int__ = _number("int")
Tensor.__index__ = _number("index")
Tensor._backward_impl = Tensor.backward
Tensor.backward = _backward
Tensor.backward.__doc__ = Tensor._backward_impl.__doc__
Tensor.__array__ = _array
Tensor.to = _to
Tensor.cpu = _cpu
Tensor.cuda = _cuda
Tensor.clone = _clone
Tensor.__len__ = _len
for _target in (float32, float64, float16, bfloat16):
    _cast = _cast_to(_target)
    setattr(Tensor, _cast.__name__, _cast)
Tensor.__repr__ = _repr
Tensor.size = lambda self, dim=None: self.shape if dim is None else self.shape[dim]


zeros_like = _like("zeros_like", zeros, "zeros")
full_like = _like("full_like", full, "full")
randn_like = _like("randn_like", randn, "randn")
