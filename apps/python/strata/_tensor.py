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


def _torch_name(value, kind):
    """'float64' for torch.float64, 'cuda:1' for torch.device('cuda', 1): a torch object's name, so a torch
    user's dtype= and device= are taken as the strata names they stand for (strata does not import torch);
    None for anything else."""
    cls = type(value)
    if cls.__module__ == "torch" and cls.__name__ == kind:
        return str(value).removeprefix("torch.")
    return None


def _dtype_arg(dtype, fn):
    if isinstance(dtype, str):
        key = dtype
    elif _torch_name(dtype, "dtype") is not None:
        key = _torch_name(dtype, "dtype")
    elif isinstance(dtype, type) or isinstance(dtype, np.dtype):
        try:
            key = np.dtype(dtype).name
        except TypeError:
            key = None
    else:
        raise TypeError(f"{fn}(): dtype must be a strata dtype (strata.float32), a string such as 'float32', a numpy "
                        f"or a torch dtype, not {type(dtype).__name__}")
    if key not in _DTYPES:
        raise ValueError(f"{fn}(): unknown dtype {dtype!r}: strata has the floating dtypes float32, float64, float16 "
                         "and bfloat16 only")
    return _DTYPES[key]


def _factory_dtype(dtype, fn):
    """A factory's dtype=: None is float32, as torch's default dtype."""
    return _DTYPES["float32"] if dtype is None else _dtype_arg(dtype, fn)


def _device_arg(device, fn):
    """'cpu', 'cuda', 'cuda:N' (checked by the extension); as torch also takes them, None is the CPU, an int N
    is 'cuda:N' and a torch.device its name."""
    if device is None:
        return "cpu"
    if _torch_name(device, "device") is not None:
        return _torch_name(device, "device")
    if isinstance(device, numbers.Integral) and not isinstance(device, bool):
        if device < 0:
            raise ValueError(f"{fn}(): device index must be non-negative, got {device}")
        return f"cuda:{int(device)}"
    if not isinstance(device, str):
        raise TypeError(f"{fn}(): device must be a string ('cpu', 'cuda', 'cuda:N'), an int (a CUDA device's index) "
                        f"or a torch.device, not {type(device).__name__}")
    return device


def _sizes_arg(size, fn, size_keyword=None):
    """size_keyword: the factory's size= (None when not given)."""
    # zeros(2, 3), zeros((2, 3)) and zeros(size=(2, 3)) as in torch.
    if size_keyword is not None:
        if size:
            raise TypeError(f"{fn}(): the size is given both positionally {tuple(size)} and as size={size_keyword!r}")
        if not isinstance(size_keyword, (tuple, list)):
            raise TypeError(f"{fn}(): argument 'size' must be a tuple of ints, not {type(size_keyword).__name__}")
        size = (size_keyword,)
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


def zeros(*sizes, size=None, dtype=None, device="cpu", requires_grad=False):
    """A tensor of zeros."""
    break_if_capturing(_MADE.format("zeros"))
    t = _strata.zeros(_sizes_arg(sizes, "zeros", size), _factory_dtype(dtype, "zeros"), _device_arg(device, "zeros"))
    return _finish(t, requires_grad, "zeros")


def ones(*sizes, size=None, dtype=None, device="cpu", requires_grad=False):
    """A tensor of ones."""
    return _filled(_sizes_arg(sizes, "ones", size), 1.0, dtype, device, requires_grad, "ones")


def _too_large(value):
    """A number beyond float64's range, named without printing its hundreds of digits."""
    what = f"an int of {value.bit_length()} bits" if isinstance(value, numbers.Integral) else repr(value)[:40]
    return f"{what} is out of float64's range (about +-1.8e308)"


def _fill_number(fill_value, fn):
    if isinstance(fill_value, bool) or not isinstance(fill_value, numbers.Real):
        raise TypeError(f"{fn}(): fill_value must be a real number (int or float), not {type(fill_value).__name__}")
    try:
        return float(fill_value)
    except OverflowError:
        raise OverflowError(f"{fn}(): fill_value: {_too_large(fill_value)}") from None


def full(size, fill_value, *, dtype=None, device="cpu", requires_grad=False):
    """A tensor of `size` holding fill_value in every element (torch.full; float32 unless dtype says)."""
    value = _fill_number(fill_value, "full")
    if not isinstance(size, (tuple, list)):
        raise TypeError(f"full(): argument 'size' must be a tuple of ints, not {type(size).__name__}")
    return _filled(_sizes_arg((size,), "full"), value, dtype, device, requires_grad, "full")


def empty(*sizes, size=None, dtype=None, device="cpu", requires_grad=False):
    """A tensor whose values are unspecified, as torch.empty's (strata's are zeros: a fresh buffer is filled)."""
    return _filled(_sizes_arg(sizes, "empty", size), 0.0, dtype, device, requires_grad, "empty")


def _filled(sizes, value, dtype, device, requires_grad, fn):
    break_if_capturing(_MADE.format(fn))
    t = _strata.full(sizes, value, _factory_dtype(dtype, fn), _device_arg(device, fn))
    return _finish(t, requires_grad, fn)


_ONE_SHAPE = "tensor(): data must be a real number or a (nested) sequence of real numbers of one shape"


def _plain(data):
    """data with each strata.Tensor inside lists or tuples as its values (torch.tensor([a, b]) of one-element
    tensors): numpy alone takes a tensor in a list for a sequence and fails on a 0-d one."""
    if isinstance(data, Tensor):
        return data.tolist()
    if isinstance(data, (list, tuple)):
        return [_plain(item) for item in data]
    return data


def _float64_values(data):
    """data's numbers as a float64 array. numpy alone would read None as NaN, '1' as 1.0 and drop a complex
    number's imaginary part; torch.tensor refuses each, and so does this."""
    try:
        raw = np.asarray(_plain(data))
    except (TypeError, ValueError) as e:  # ragged lists
        raise TypeError(f"{_ONE_SHAPE}, not {type(data).__name__} ({e})") from None
    if raw.dtype.kind in "biuf":
        return raw.astype(np.float64)
    if raw.dtype.kind != "O":  # strings, bytes, complex, dates
        raise TypeError(f"{_ONE_SHAPE}, not {type(data).__name__} holding {raw.dtype} (numpy's kind {raw.dtype.kind!r})")
    values = np.empty(raw.shape, dtype=np.float64)
    for index, value in np.ndenumerate(raw):  # ints beyond int64, or mixed objects
        where = f"element {index}" if raw.ndim else "data"
        if not isinstance(value, numbers.Real):
            raise TypeError(f"{_ONE_SHAPE}; {where} is {type(value).__name__}")
        try:
            values[index] = float(value)
        except OverflowError:
            raise OverflowError(f"tensor(): {where}: {_too_large(value)}") from None
    return values


def tensor(data, *, dtype=None, device="cpu", requires_grad=False):
    """A new tensor holding a copy of data: a number, nested lists or tuples of numbers, or a numpy array
    (torch.tensor). The values are read as float64 and cast to dtype (float32 by default, and for ints and
    bools, which strata has no dtype for; float64 for a float64 array, as torch keeps an array's dtype)."""
    break_if_capturing(_MADE.format("tensor"))
    if isinstance(data, Tensor):
        raise TypeError("tensor(): data is already a strata.Tensor; use x.clone() (or x.detach().clone()) to copy it")
    key = None if dtype is None else _dtype_arg(dtype, "tensor")
    target = _device_arg(device, "tensor")
    if isinstance(data, np.ndarray) and key is None and data.dtype in _NUMPY_DTYPES:
        key = _DTYPES[data.dtype.name]
    values = _float64_values(data)
    if values.ndim > 4:
        raise ValueError(f"tensor(): strata tensors have at most 4 dimensions, got {values.ndim}")
    t = _strata.from_numpy(values).to(next(d for d in _DTYPE_OBJECTS.values() if _DTYPES[d] == (key or "f32")))
    t = t._to(target) if target != "cpu" else t
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


def rand(*sizes, size=None, dtype=None, device="cpu", requires_grad=False, seed=None):
    """Uniform in [0, 1). With seed=None the process generator (manual_seed) is used and advanced."""
    break_if_capturing(_MADE.format("rand"))
    t = _strata.rand(_sizes_arg(sizes, "rand", size), _factory_dtype(dtype, "rand"), _device_arg(device, "rand"),
                     _seed_arg(seed, "rand"))
    return _finish(t, requires_grad, "rand")


def randn(*sizes, size=None, dtype=None, device="cpu", requires_grad=False, seed=None):
    """Standard normal. With seed=None the process generator (manual_seed) is used and advanced."""
    break_if_capturing(_MADE.format("randn"))
    t = _strata.randn(_sizes_arg(sizes, "randn", size), _factory_dtype(dtype, "randn"), _device_arg(device, "randn"),
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
        raise TypeError(f"from_numpy(): strata takes float32, float64 or float16 arrays, not {dt} (strata has "
                        "floating dtypes only: float32, float64, float16, bfloat16; convert first, "
                        "a.astype(np.float32))")
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


def _is_dtype(target):
    return (isinstance(target, (type, np.dtype)) or (isinstance(target, str) and target in _DTYPES)
            or _torch_name(target, "dtype") is not None)


def _to_dtype(self, target):
    key = _dtype_arg(target, "to")
    if _DTYPES.get(self.dtype) == key:
        return self
    from ._ops import FUNCTIONS  # _ops imports this module
    name = next(n for n in (float32, float64, float16, bfloat16) if _DTYPES[n] == key)
    return FUNCTIONS["to_copy"](self, dtype=name)


def _device_target(target):
    if isinstance(target, str) and not target.startswith(("cpu", "cuda", "gpu", "auto")):
        raise ValueError(f"to(): {target!r} is neither a dtype (float32, float64, float16, bfloat16) nor a device "
                         "('cpu', 'cuda', 'cuda:N')")
    if target is None:
        raise TypeError("to(): give a dtype (strata.float64, 'float16', ...) or a device ('cpu', 'cuda', 'cuda:N'), "
                        "not None")
    return _device_arg(target, "to")


def _to(self, *targets, dtype=None, device=None, non_blocking=False, copy=False):
    """x.to("cuda") / x.to("cpu"): a copy on that device; x.to(strata.float64) (a dtype name, a numpy or a
    torch dtype): a to_copy call (its own rows; differentiable, ToCopyBackward casts the gradient back). As
    torch's, also x.to(device, dtype), x.to(other) (other's device and dtype), the keywords dtype= and
    device=, copy=True (a copy even when nothing changes) and non_blocking (taken; strata's copies are
    synchronous); the tensor itself when it already has that dtype."""
    if len(targets) > 2:
        raise TypeError(f"to() takes at most 2 positional arguments (a device and a dtype), {len(targets)} were given")
    if len(targets) == 1 and isinstance(targets[0], Tensor):
        targets = (targets[0].device, targets[0].dtype)
    for target in targets:
        if _is_dtype(target):
            if dtype is not None:
                raise TypeError("to(): the dtype is given twice")
            dtype = target
        else:
            if device is not None:
                raise TypeError("to(): the device is given twice")
            device = _device_target(target)
    if not isinstance(non_blocking, bool) or not isinstance(copy, bool):
        raise TypeError("to(): non_blocking and copy must be bools")
    if dtype is None and device is None:
        raise TypeError("to(): give a dtype (strata.float64, 'float16', ...) or a device ('cpu', 'cuda', 'cuda:N')")
    result = self if device is None else self._to(_device_arg(device, "to"))
    result = result if dtype is None else _to_dtype(result, dtype)
    return _clone(result) if copy and result is self else result


def _cpu(self):
    return self._to("cpu")


def _cuda(self, device=None):
    """x.to("cuda"), x.cuda(1) x.to("cuda:1"): a copy on the GPU (strata.UnavailableError where there is none)."""
    return self._to("cuda" if device is None else _device_arg(device, "cuda"))


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
def _size(self, dim=None):
    """The shape, or the size of one dim (negative counts from the last), as torch's size()."""
    if dim is None:
        return self.shape
    if isinstance(dim, bool) or not isinstance(dim, numbers.Integral):
        raise TypeError(f"size(): dim must be an int, not {type(dim).__name__}")
    if self.ndim == 0:
        raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
    rank = self.ndim
    if not -rank <= dim < rank:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-rank}, {rank - 1}], but got {dim})")
    return self.shape[dim]


Tensor.size = _size


zeros_like = _like("zeros_like", zeros, "zeros")
_full_like = _like("full_like", full, "full")


def full_like(input, fill_value, *, dtype=None, device=None, requires_grad=False):  # noqa: A002 (torch's name)
    """full() with input's shape, and its dtype and device unless given (torch.full_like); contiguous."""
    return _full_like(input, fill_value, dtype=dtype, device=device, requires_grad=requires_grad)


empty_like = _like("empty_like", empty, "empty")
randn_like = _like("randn_like", randn, "randn")
