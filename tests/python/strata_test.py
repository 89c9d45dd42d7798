"""tests/python: the Python package (apps/python) end to end, through the real extension.

Every operator strata declares is checked against a float64 numpy reference on fresh random inputs
(the seed is printed with any failure) with a per-dtype tolerance; bad input must raise the right Python
exception, never crash. Runs under ctest with PYTHONPATH pointing at build/python.
"""
import gc
import inspect
import math
import random
import sys
import threading
import unittest

import numpy as np

import strata

# ||out - ref||_2 / ||max(|ref|, 0.25)||_2, as strata's reference::relative_error, per result dtype.
TOLERANCE = {"float64": 1e-12, "float32": 1e-5, "float16": 5e-3, "bfloat16": 3e-2}
DTYPES = ["float32", "float64", "float16", "bfloat16"]


def relative_error(out, ref):
    return float(np.linalg.norm(out - ref) / np.linalg.norm(np.maximum(np.abs(ref), 0.25)))


_erf = np.vectorize(math.erf)


def _pair(v):
    """An int[2] argument as (H, W): one int, or a list of one, is both (torch's rule)."""
    if isinstance(v, int):
        return v, v
    return (v[0], v[0]) if len(v) == 1 else tuple(v)


def _conv_windows(x, w, stride, padding, dilation, groups):
    """The padded input and, for each group and kernel tap (i, j), the group's channel slices and the
    [N, C/G, OH, OW] window of the padded input that the tap reads."""
    (sh, sw), (ph, pw), (dh, dw) = _pair(stride), _pair(padding), _pair(dilation)
    _, _, h, wd = x.shape
    k, cg, r, s = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    oh, ow = (h + 2 * ph - dh * (r - 1) - 1) // sh + 1, (wd + 2 * pw - dw * (s - 1) - 1) // sw + 1
    kg = k // groups
    windows = []
    for group in range(groups):
        cin, cout = slice(group * cg, (group + 1) * cg), slice(group * kg, (group + 1) * kg)
        for i in range(r):
            for j in range(s):
                rows = slice(i * dh, i * dh + sh * (oh - 1) + 1, sh)
                cols = slice(j * dw, j * dw + sw * (ow - 1) + 1, sw)
                windows.append((cin, cout, i, j, rows, cols))
    return xp, (ph, pw), (oh, ow), windows


def conv2d_reference(x, w, b, stride=1, padding=0, dilation=1, groups=1):
    xp, _, (oh, ow), windows = _conv_windows(x, w, stride, padding, dilation, groups)
    out = np.zeros((x.shape[0], w.shape[0], oh, ow))
    for cin, cout, i, j, rows, cols in windows:
        out[:, cout] += np.einsum("nchw,kc->nkhw", xp[:, cin, rows, cols], w[cout, :, i, j])
    if b is not None:
        out += b[None, :, None, None]
    return out


# For each operator: (inputs from a random generator, float64 reference over the inputs' values).
# A declared operator missing here fails test_every_operator_has_a_reference.
def _inputs_matmul(rng, t):
    m, k, n = rng.randint(1, 40), rng.randint(1, 40), rng.randint(1, 40)
    return [t(m, k), t(k, n)], {}


def _inputs_linear(rng, t):
    b, i, o = rng.randint(1, 20), rng.randint(1, 40), rng.randint(1, 30)
    bias = t(o) if rng.random() < 0.7 else None
    return [t(b, i), t(o, i), bias], {}


def _inputs_conv2d(rng, t):
    # torch's arguments: an int or an (H, W) pair for stride, padding and dilation, and groups.
    groups = rng.choice([1, 1, 2, 3])
    n, c, k = rng.randint(1, 3), groups * rng.randint(1, 3), groups * rng.randint(1, 3)
    r, s = rng.randint(1, 3), rng.randint(1, 3)
    pair = lambda low, high: rng.randint(low, high) if rng.random() < 0.5 else (rng.randint(low, high), rng.randint(low, high))
    stride, padding, dilation = pair(1, 2), pair(0, 1), pair(1, 2)
    dh, dw = _pair(dilation)
    h, w = rng.randint(dh * (r - 1) + 1, 9), rng.randint(dw * (s - 1) + 1, 9)
    bias = t(k) if rng.random() < 0.7 else None
    return [t(n, c, h, w), t(k, c // groups, r, s), bias], {"stride": stride, "padding": padding,
                                                             "dilation": dilation, "groups": groups}


def _inputs_pointwise(rng, t):
    shape = [rng.randint(1, 9) for _ in range(rng.randint(1, 4))]
    return [t(*shape)], {}


def _inputs_add(rng, t):
    shape = [rng.randint(1, 9) for _ in range(rng.randint(1, 4))]
    return [t(*shape), t(*shape)], {"alpha": rng.choice([1, 0.5, -2.0])}


def _inputs_mul(rng, t):
    shape = [rng.randint(1, 9) for _ in range(rng.randint(1, 4))]
    return [t(*shape), rng.choice([0.5, -3.0, 1e-8])], {}


def _inputs_add_scalar(rng, t):
    shape = [rng.randint(1, 9) for _ in range(rng.randint(1, 4))]
    return [t(*shape), rng.choice([1.0, -0.5, 0.044715, 3])], {"alpha": rng.choice([1, 0.5, -2.0])}


def _inputs_pow(rng, t):
    shape = [rng.randint(1, 9) for _ in range(rng.randint(1, 4))]
    exponent = rng.choice([3.0, 2, 0.5, -1.0, 1.5, 0.0])
    x = t(*shape)
    if exponent % 1:  # a fractional power of a negative number is NaN: positive bases (|x|) for those
        x = strata.pow(strata.pow(x, 2.0), 0.5)
    if exponent < 0:
        # x ** -1 of a base under 1 / 65504 overflows float16 to inf (IEEE, as torch's) where the float64
        # reference stays finite (seed 3412651265: |x| 3.5e-6): bases away from 0, |x| >= 0.5, both signs.
        x = (x * x + 0.5) * rng.choice([1.0, -1.0])
    return [x, exponent], {}


def _inputs_gemm(rng, t):
    m, k, n = rng.randint(1, 30), rng.randint(1, 30), rng.randint(1, 30)
    ts, to = rng.randint(0, 1), rng.randint(0, 1)
    a = t(k, m) if ts else t(m, k)
    b = t(n, k) if to else t(k, n)
    return [a, b], {"transpose_self": ts, "transpose_other": to}


def _inputs_div(rng, t):
    # The divisor drawn away from 0 (|b| in [0.5, 1.5), one sign): the quotient has no pole near the inputs.
    shape = [rng.randint(1, 9) for _ in range(rng.randint(1, 4))]
    b = t(*shape)
    return [t(*shape), (b * b + 0.5) * rng.choice([1.0, -1.0])], {}


def _inputs_div_scalar(rng, t):
    shape = [rng.randint(1, 9) for _ in range(rng.randint(1, 4))]
    return [t(*shape), rng.choice([2.0, -0.5, 3, 1e-3])], {}


def _inputs_pair(rng, t):
    shape = [rng.randint(1, 9) for _ in range(rng.randint(1, 4))]
    return [t(*shape), t(*shape)], {}


def _inputs_threshold_backward(rng, t):
    args, _ = _inputs_pair(rng, t)
    return args, {"threshold": rng.choice([0.0, 0.3])}


def _inputs_expand_as(rng, t):
    shape = [rng.randint(1, 9) for _ in range(rng.randint(1, 4))]
    return [t(1), t(*shape)], {}


def _inputs_bias_backward(rng, t):
    shape = [rng.randint(1, 9) for _ in range(rng.choice([2, 4]))]
    return [t(*shape)], {}


def _inputs_conv_backward(rng, t):
    (x, w, _), kw = _inputs_conv2d(rng, t)
    _, _, (oh, ow), _ = _conv_windows(np.zeros(x.shape), np.zeros(w.shape), **kw)
    return [t(x.shape[0], w.shape[0], oh, ow), x, w], kw


def _conv_backward_reference(g, x, w, want_input, **options):
    xp, (ph, pw), _, windows = _conv_windows(x, w, **options)
    dxp, dw = np.zeros_like(xp), np.zeros_like(w)
    for cin, cout, i, j, rows, cols in windows:
        dxp[:, cin, rows, cols] += np.einsum("nkhw,kc->nchw", g[:, cout], w[cout, :, i, j])
        dw[cout, :, i, j] += np.einsum("nkhw,nchw->kc", g[:, cout], xp[:, cin, rows, cols])
    if not want_input:
        return dw
    return dxp[:, :, ph:ph + x.shape[2], pw:pw + x.shape[3]]


def _gelu_derivative(x):
    return 0.5 * (1 + _erf(x / math.sqrt(2))) + x * np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)


def _random_shape(rng, low=1, high=4):
    return [rng.randint(1, 6) for _ in range(rng.randint(low, high))]


def _inputs_transpose(rng, t):
    shape = _random_shape(rng, 2)
    return [t(*shape), rng.randrange(-len(shape), len(shape)), rng.randrange(-len(shape), len(shape))], {}


def _inputs_permute(rng, t):
    shape = _random_shape(rng)
    dims = list(range(len(shape)))
    rng.shuffle(dims)
    return [t(*shape), tuple(dims)], {}


def _inputs_view(rng, t):
    shape = _random_shape(rng, 2)
    return [t(*shape), (-1, shape[-1])], {}


def _inputs_expand(rng, t):
    shape = _random_shape(rng, 1, 3)
    small = [1 if rng.random() < 0.5 else s for s in shape]
    return [t(*small), tuple([2] + shape)], {}


def _inputs_narrow(rng, t):
    shape = _random_shape(rng)
    d = rng.randrange(len(shape))
    start = rng.randrange(shape[d])
    return [t(*shape), d, start, rng.randint(1, shape[d] - start)], {}  # not empty: relative_error needs values


def _inputs_select(rng, t):
    shape = _random_shape(rng)
    d = rng.randrange(len(shape))
    return [t(*shape), d, rng.randrange(-shape[d], shape[d])], {}


def _inputs_slice(rng, t):
    shape = _random_shape(rng)
    d = rng.randrange(len(shape))
    start = rng.randrange(shape[d])  # negative half the time; the end past it (clamped past the size): not empty
    end = rng.randint(start + 1, shape[d] + 2)
    return [t(*shape), d, start - shape[d] if rng.random() < 0.5 else start, end, rng.randint(1, 3)], {}


def _inputs_unsqueeze(rng, t):
    shape = _random_shape(rng, 1, 3)
    return [t(*shape), rng.randint(-len(shape) - 1, len(shape))], {}


def _inputs_squeeze(rng, t):
    shape = _random_shape(rng, 1, 3)
    d = rng.randrange(len(shape))
    shape[d] = rng.choice([1, shape[d]])
    return [t(*shape), d], {}


def _inputs_slice_backward(rng, t):
    shape = _random_shape(rng)
    d = rng.randrange(len(shape))
    start, step = rng.randrange(shape[d]), rng.randint(1, 3)
    grad = list(shape)
    grad[d] = len(range(start, shape[d], step))
    return [t(*grad), t(*shape), d, start, step], {}


def _slice_backward_reference(g, x, dim, start, step):
    out = np.zeros_like(x)
    index = [slice(None)] * x.ndim
    index[dim] = slice(start, start + g.shape[dim] * step, step)
    out[tuple(index)] = g
    return out


def _inputs_as_strided_scatter(rng, t):
    """A slice's region of a contiguous self (one dim stepped), as CopySlices writes one."""
    shape = _random_shape(rng)
    d = rng.randrange(len(shape))
    start, step = rng.randrange(shape[d]), rng.randint(1, 3)
    strides = [int(np.prod(shape[i + 1:])) for i in range(len(shape))]
    size = list(shape)
    size[d] = len(range(start, shape[d], step))
    stride = list(strides)
    stride[d] *= step
    return [t(*shape), t(*size), size, stride, start * strides[d]], {}


def _as_strided_scatter_reference(x, src, size, stride, offset):
    out = x.copy().reshape(-1)
    for index in np.ndindex(*size):
        out[offset + sum(i * s for i, s in zip(index, stride))] = src[index]
    return out.reshape(x.shape)


def _inputs_sum_to(rng, t):
    shape = _random_shape(rng, 1, 3)
    small = [1 if rng.random() < 0.5 else s for s in shape]
    return [t(*([3] + shape)), t(*small)], {}


def _inputs_reduce_dims(rng, t):
    # Note [Reductions over dims]: some of the dims (none: every dim), either sign, keepdim either way.
    shape = _random_shape(rng, 1, 4)
    dims = tuple(d - len(shape) if rng.random() < 0.5 else d
                 for d in rng.sample(range(len(shape)), rng.randint(0, len(shape))))
    return [t(*shape), dims, rng.random() < 0.5], {}


def _reduce_dims_reference(fn):
    def reference(x, dims, keepdim):
        axis = tuple(dims) if dims else None
        return np.asarray(fn(x, axis=axis, keepdims=keepdim))
    return reference


def _sum_to_reference(g, x):
    lead = g.ndim - x.ndim
    axes = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(x.shape) if s == 1 and g.shape[lead + i] != 1)
    return g.sum(axis=axes).reshape(x.shape)


# Note [Normalization ops]: a random dim of either sign; the norms over 1 or more last dims, weight and bias
# present or not.
def _inputs_softmax(rng, t):
    shape = _random_shape(rng, 1, 4)
    dim = rng.randrange(len(shape))
    return [t(*shape), dim - len(shape) if rng.random() < 0.5 else dim], {}


def _inputs_softmax_backward(rng, t):
    shape = _random_shape(rng, 1, 4)
    return [t(*shape), t(*shape), rng.randrange(len(shape))], {}


def _inputs_norm(rng, t, params, grad=False, weight_grad=False):
    shape = _random_shape(rng, 1, 4)
    ns = tuple(shape[len(shape) - rng.randint(1, len(shape)):])
    args = ([t(*shape)] if grad else []) + [t(*shape), ns]
    if not weight_grad:
        args += [t(*ns) if rng.random() < 0.7 else None for _ in range(params)]
    args.append(rng.choice([1e-5, 1e-3, 0.1]))
    return args, {}


def _np_softmax(x, dim, log=False):
    m = np.max(x, axis=dim, keepdims=True)
    s = np.sum(np.exp(x - m), axis=dim, keepdims=True)
    return x - m - np.log(s) if log else np.exp(x - m) / s


def _np_norm(x, ns, w, b, eps, rms):
    axes = tuple(range(x.ndim - len(ns), x.ndim))
    mean = 0.0 if rms else np.mean(x, axis=axes, keepdims=True)
    y = (x - mean) / np.sqrt(np.mean((x - mean) ** 2, axis=axes, keepdims=True) + eps)
    return y * (1 if w is None else w) + (0 if b is None else b)


def _np_norm_input_grad(g, x, ns, w, eps, rms):
    axes = tuple(range(x.ndim - len(ns), x.ndim))
    mean = 0.0 if rms else np.mean(x, axis=axes, keepdims=True)
    rstd = 1 / np.sqrt(np.mean((x - mean) ** 2, axis=axes, keepdims=True) + eps)
    xhat, gw = (x - mean) * rstd, g * (1 if w is None else w)
    return rstd * (gw - (0 if rms else np.mean(gw, axis=axes, keepdims=True))
                   - xhat * np.mean(gw * xhat, axis=axes, keepdims=True))


def _np_norm_weight_grad(g, x, ns, eps, rms):
    axes = tuple(range(x.ndim - len(ns), x.ndim))
    mean = 0.0 if rms else np.mean(x, axis=axes, keepdims=True)
    rstd = 1 / np.sqrt(np.mean((x - mean) ** 2, axis=axes, keepdims=True) + eps)
    return np.sum(g * (x - mean) * rstd, axis=tuple(range(x.ndim - len(ns))))


CASES = {
    "softmax": (_inputs_softmax, lambda x, dim: _np_softmax(x, dim)),
    "log_softmax": (_inputs_softmax, lambda x, dim: _np_softmax(x, dim, True)),
    "_softmax_backward_data": (_inputs_softmax_backward,
                               lambda g, y, dim: y * (g - np.sum(g * y, axis=dim, keepdims=True))),
    "_log_softmax_backward_data": (_inputs_softmax_backward,
                                   lambda g, y, dim: g - np.exp(y) * np.sum(g, axis=dim, keepdims=True)),
    "layer_norm": (lambda rng, t: _inputs_norm(rng, t, 2),
                   lambda x, ns, w=None, b=None, eps=1e-5: _np_norm(x, ns, w, b, eps, False)),
    # eps given: None means finfo of the input's dtype, which the reference (over float64 values) cannot
    # know; tests/python/normalization_test.py checks None per dtype.
    "rms_norm": (lambda rng, t: _inputs_norm(rng, t, 1),
                 lambda x, ns, w=None, eps=None: _np_norm(x, ns, w, None, eps, True)),
    "layer_norm_input_backward": (lambda rng, t: _inputs_norm(rng, t, 1, grad=True),
                                  lambda g, x, ns, w=None, eps=1e-5: _np_norm_input_grad(g, x, ns, w, eps, False)),
    "rms_norm_input_backward": (lambda rng, t: _inputs_norm(rng, t, 1, grad=True),
                                lambda g, x, ns, w=None, eps=1e-6: _np_norm_input_grad(g, x, ns, w, eps, True)),
    "layer_norm_weight_backward": (lambda rng, t: _inputs_norm(rng, t, 0, grad=True, weight_grad=True),
                                   lambda g, x, ns, eps=1e-5: _np_norm_weight_grad(g, x, ns, eps, False)),
    "rms_norm_weight_backward": (lambda rng, t: _inputs_norm(rng, t, 0, grad=True, weight_grad=True),
                                 lambda g, x, ns, eps=1e-6: _np_norm_weight_grad(g, x, ns, eps, True)),
    "matmul": (_inputs_matmul, lambda a, b: a @ b),
    "linear": (_inputs_linear, lambda x, w, b: x @ w.T + (0 if b is None else b)),
    "conv2d": (_inputs_conv2d, conv2d_reference),
    "relu": (_inputs_pointwise, lambda x: np.maximum(x, 0)),
    "add": (_inputs_add, lambda a, b, alpha=1: a + alpha * b),
    "gelu": (_inputs_pointwise, lambda x: x * 0.5 * (1 + _erf(x / math.sqrt(2)))),
    "to_copy": (_inputs_pointwise, lambda x: x),  # dtype=None: a copy in the input's dtype
    # The gradient ops the autograd engine calls (docs/autograd.md).
    "gemm": (_inputs_gemm, lambda a, b, transpose_self=0, transpose_other=0:
             (a.T if transpose_self else a) @ (b.T if transpose_other else b)),
    "sum": (_inputs_pointwise, lambda x: np.array(np.sum(x))),
    "ones_like": (_inputs_pointwise, np.ones_like),
    "expand_as": (_inputs_expand_as, lambda a, b: np.full(b.shape, a.reshape(-1)[0])),
    "threshold_backward": (_inputs_threshold_backward, lambda g, x, threshold=0: np.where(x <= threshold, 0, g)),
    "gelu_backward": (_inputs_pair, lambda g, x: g * _gelu_derivative(x)),
    "bias_backward": (_inputs_bias_backward, lambda g: g.sum(axis=(0, 2, 3) if g.ndim == 4 else 0)),
    "conv2d_input_backward": (_inputs_conv_backward,
                              lambda g, x, w, **options: _conv_backward_reference(g, x, w, True, **options)),
    "conv2d_weight_backward": (_inputs_conv_backward,
                               lambda g, x, w, **options: _conv_backward_reference(g, x, w, False, **options)),
    "mul.Scalar": (_inputs_mul, lambda x, other=1: x * other),
    # The tanh GELU's ops (Note [Overloads]: mul is two tensors, mul.Scalar a tensor and a number).
    "mul": (_inputs_pair, lambda a, b: a * b),
    "add.Scalar": (_inputs_add_scalar, lambda x, other, alpha=1: x + alpha * other),
    "sub": (_inputs_add, lambda a, b, alpha=1: a - alpha * b),
    "sub.Scalar": (_inputs_add_scalar, lambda x, other, alpha=1: x - alpha * other),
    "tanh": (_inputs_pointwise, np.tanh),
    "pow": (_inputs_pow, lambda x, exponent: x ** exponent),
    "tanh_backward": (_inputs_pair, lambda g, y: g * (1 - y * y)),
    # Views (docs/views.md) and their gradient ops.
    "transpose": (_inputs_transpose, lambda x, a, b: np.swapaxes(x, a, b)),
    "t": (lambda rng, t: ([t(*_random_shape(rng, 1, 2))], {}), lambda x: x.T),
    "permute": (_inputs_permute, lambda x, dims: np.transpose(x, dims)),
    "view": (_inputs_view, lambda x, size: x.reshape(size)),
    "reshape": (_inputs_view, lambda x, shape: x.reshape(shape)),
    "expand": (_inputs_expand, lambda x, size: np.broadcast_to(x, size)),
    "narrow": (_inputs_narrow, lambda x, d, start, length: np.take(x, range(start, start + length), axis=d)),
    "select": (_inputs_select, lambda x, d, i: np.take(x, i, axis=d)),
    "slice": (_inputs_slice, lambda x, d, start, end, step:
              x[(slice(None),) * d + (slice(start, end, step),)]),
    "unsqueeze": (_inputs_unsqueeze, lambda x, d: np.expand_dims(x, d)),
    "squeeze": (_inputs_squeeze, lambda x, d: np.squeeze(x, d) if x.shape[d] == 1 else x),
    "contiguous": (_inputs_pointwise, lambda x: x),
    "slice_backward": (_inputs_slice_backward, _slice_backward_reference),
    "sum_to": (_inputs_sum_to, _sum_to_reference),
    "as_strided_scatter": (_inputs_as_strided_scatter, _as_strided_scatter_reference),
    # The in-place ops (docs/autograd.md): self written and returned; the reference is taken from the
    # inputs as they were before the call. other may broadcast to self's shape.
    "relu_": (_inputs_pointwise, lambda x: np.maximum(x, 0)),
    "add_": (_inputs_add, lambda a, b, alpha=1: a + alpha * b),
    "mul_": (_inputs_pair, lambda a, b: a * b),
    "mul_.Scalar": (_inputs_mul, lambda x, other=1: x * other),
    "add_.Scalar": (_inputs_add_scalar, lambda x, other, alpha=1: x + alpha * other),
    "sub_": (_inputs_add, lambda a, b, alpha=1: a - alpha * b),
    "sub_.Scalar": (_inputs_add_scalar, lambda x, other, alpha=1: x - alpha * other),
    "div_": (_inputs_div, lambda a, b: a / b),
    "div_.Scalar": (_inputs_div_scalar, lambda x, other=1: x / other),
    "sum.dim_IntList": (_inputs_reduce_dims, _reduce_dims_reference(np.sum)),
    "mean.dim": (_inputs_reduce_dims, _reduce_dims_reference(np.mean)),
    "mean": (_inputs_pointwise, lambda x: np.array(np.mean(x))),
    # True division (Note [Overloads]: div is two tensors, div.Scalar a tensor and a number).
    "div": (_inputs_div, lambda a, b: a / b),
    "div.Scalar": (_inputs_div_scalar, lambda x, other=1: x / other),
}


def _declared_reference(name):
    """The declaration's own float64 reference (layers/kernels/reference, which shares no code with any
    kernel), reached through the binding layer with the same values."""
    def reference(*values):
        tensors = tuple(strata.from_numpy(np.array(v, dtype=np.float64)) for v in values)
        return np.array(strata._strata.reference(name, tensors)).reshape(np.shape(values[0]))
    return reference


def _declared_cases():
    """Every operator without a case above whose arguments are one or two tensors (a new pointwise op, its
    gradient op): random inputs of one shape, checked against the declaration's reference, so that adding
    such an op needs no edit here. Any other new operator needs its own case (test_every_operator_has_a_reference)."""
    cases = {}
    for op in strata._strata.operators():
        arguments = op["arguments"]
        if op["name"] in CASES or not 1 <= len(arguments) <= 2 or any(a["type"] != "Tensor" for a in arguments):
            continue
        cases[op["name"]] = (_inputs_pointwise if len(arguments) == 1 else _inputs_pair, _declared_reference(op["name"]))
    return cases


CASES.update(_declared_cases())


def values(v):
    return v.numpy_float64() if isinstance(v, strata.Tensor) else v


class OperatorsTest(unittest.TestCase):
    def test_every_operator_has_a_reference(self):
        self.assertTrue(strata.OPERATORS)
        self.assertEqual(sorted(strata.OPERATORS), sorted(CASES), "add a reference for each declared operator")

    def test_overloads_pick_by_the_argument_type(self):
        """strata.mul(x, y) is mul (aten::mul.Tensor), strata.mul(x, 2.0) mul.Scalar, as torch.mul picks."""
        x, y = strata.randn(3, 4, seed=1), strata.randn(3, 4, seed=2)
        xv, yv = x.numpy_float64(), y.numpy_float64()
        np.testing.assert_allclose(strata.mul(x, y).numpy_float64(), xv * yv, rtol=1e-6)
        np.testing.assert_allclose(strata.mul(x, 2.5).numpy_float64(), xv * 2.5, rtol=1e-6)
        np.testing.assert_allclose(strata.mul(x, 3).numpy_float64(), xv * 3, rtol=1e-6)  # an int is a number
        np.testing.assert_allclose(strata.mul(x, other=y).numpy_float64(), xv * yv, rtol=1e-6)
        np.testing.assert_allclose(strata.mul(x).numpy_float64(), xv, rtol=0)  # mul.Scalar's default, 1
        np.testing.assert_allclose(strata.add(x, 1.0).numpy_float64(), xv + 1, rtol=1e-6)
        np.testing.assert_allclose(strata.add(x, 1.0, 2.0).numpy_float64(), xv + 2, rtol=1e-6)
        np.testing.assert_allclose(strata.add(x, y, alpha=-0.5).numpy_float64(), xv - 0.5 * yv, rtol=1e-6)
        np.testing.assert_allclose(strata.sub(x, y).numpy_float64(), xv - yv, rtol=1e-6)
        np.testing.assert_allclose(strata.sub(x, 0.25).numpy_float64(), xv - 0.25, rtol=1e-6)
        np.testing.assert_allclose(strata.pow(x, 3.0).numpy_float64(), xv ** 3, rtol=1e-5)
        self.assertEqual(strata.OPERATORS["mul.Scalar"].__name__, "mul.Scalar")
        self.assertIn("mul.Scalar(Tensor self, float other=1) -> Tensor", strata.mul.__doc__)
        with self.assertRaisesRegex(TypeError, r"mul\(\): argument 'other' \(position 2\) must be Tensor or float, "
                                               r"not str; schemas: mul\(Tensor self, Tensor other\)"):
            strata.mul(x, "2")
        with self.assertRaisesRegex(TypeError, "must be Tensor or float, not bool"):
            strata.add(x, True)
        with self.assertRaisesRegex(TypeError, r"sub\(\) missing required argument 'other'"):
            strata.sub(x)
        with self.assertRaisesRegex(strata.UsageError, r"mul: shapes \[3x4\] and \[4x3\] cannot broadcast"):
            strata.mul(x, strata.randn(4, 3, seed=3))

    def test_python_operators_write_the_tanh_gelu(self):
        """0.5*x*(1+tanh(sqrt(2/pi)*(x+0.044715*x**3))) with Python's operators and numbers, as a user writes it."""
        x = strata.randn(5, 7, dtype="float64", seed=4)
        xv = x.numpy_float64()
        k = math.sqrt(2 / math.pi)
        y = 0.5 * x * (1 + strata.tanh(k * (x + 0.044715 * x ** 3)))
        np.testing.assert_allclose(y.numpy_float64(), 0.5 * xv * (1 + np.tanh(k * (xv + 0.044715 * xv ** 3))),
                                   rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose((x - x).numpy_float64(), np.zeros_like(xv), rtol=0)

    def test_star_import_leaves_builtins_alone(self):
        namespace = {}
        exec("from strata import *", namespace)
        self.assertIn("matmul", namespace)
        self.assertIn("sum", strata.OPERATORS)  # the gradient op is there, as strata.sum
        self.assertNotIn("sum", namespace)  # but a star import does not shadow the builtin
        # strata.sum picks sum or sum.dim_IntList by dim, as torch.sum (Note [Reductions over dims])
        x = strata.randn(3, 4, seed=5)
        np.testing.assert_array_equal(strata.sum(x).numpy(), strata.OPERATORS["sum"](x).numpy())
        np.testing.assert_array_equal(strata.sum(x, 1).numpy(), strata.OPERATORS["sum.dim_IntList"](x, (1,)).numpy())

    def test_functions_follow_the_schemas(self):
        for op in strata._strata.operators():
            fn = strata.OPERATORS[op["name"]]
            params = list(inspect.signature(fn).parameters.values())
            self.assertEqual([p.name for p in params], [a["name"] for a in op["arguments"]])
            self.assertIn(op["schema"], fn.__doc__)

    def test_every_operator_against_float64_numpy(self):
        seed = random.SystemRandom().randrange(2**32)
        rng = random.Random(seed)
        for name, (make, reference) in CASES.items():
            for dtype in DTYPES:
                for trial in range(3):
                    with self.subTest(op=name, dtype=dtype, trial=trial, seed=seed):
                        t = lambda *shape: strata.randn(*shape, dtype=dtype, seed=rng.randrange(2**63))
                        args, kwargs = make(rng, t)
                        before = [values(a) for a in args]  # an in-place op writes its first argument
                        # Every dtype computes on the CPU: f16/bf16 are widened to f32 and rounded back.
                        out = strata.OPERATORS[name](*args, **kwargs)
                        self.assertEqual(out.dtype, dtype)
                        self.assertEqual(out.device, "cpu")
                        ref = reference(*before, **kwargs)
                        self.assertEqual(out.shape, ref.shape)
                        err = relative_error(out.numpy_float64(), ref)
                        self.assertLessEqual(err, TOLERANCE[dtype], f"{name} {dtype}: relative error {err:.3g}")

    def test_both_entries_agree(self):
        # Note [Two entries into the extension] (apps/python/crossing.cpp): the hot entry _op and the
        # general entry call (pybind11's dispatcher) box alike and reach the same operator.
        seed = random.SystemRandom().randrange(2**32)
        rng = random.Random(seed)
        for op in strata._strata.operators():
            name = op["name"]
            with self.subTest(op=name, seed=seed):
                t = lambda *shape: strata.randn(*shape, seed=rng.randrange(2**63))
                args, kwargs = CASES[name][0](rng, t)
                if kwargs:
                    continue  # keywords take the general entry only
                # An in-place op writes its first argument: each entry gets its own copy of the inputs.
                copies = [strata.from_numpy(a.numpy().copy()) if isinstance(a, strata.Tensor) else a for a in args]
                fast = strata._strata._op(op["index"], *args)
                general = strata._strata.call(name, tuple(copies), {})
                self.assertIs(type(fast), strata.Tensor)
                self.assertEqual((fast.shape, fast.dtype), (general.shape, general.dtype))
                np.testing.assert_array_equal(fast.numpy_float64(), general.numpy_float64())
        a = strata.randn(2, 2, seed=1)
        with self.assertRaises(TypeError):
            strata._strata._op()
        with self.assertRaises(ValueError):
            strata._strata._op(len(strata.OPERATORS), a)
        with self.assertRaises(strata.UsageError):
            strata._strata._op(0, a, "not a tensor")
        with self.assertRaises(strata.UsageError):
            strata._strata._op(0, *([a] * 12))  # more than the binding takes: it says so

    def test_to_copy_and_autocast(self):
        x = strata.randn(8, 16, seed=11)
        y = strata.to_copy(x, dtype="bfloat16")
        self.assertEqual(y.dtype, "bfloat16")
        self.assertLessEqual(relative_error(y.numpy_float64(), x.numpy_float64()), TOLERANCE["bfloat16"])
        self.assertEqual(strata.to_copy(x, dtype=np.float64).dtype, "float64")
        with self.assertRaises(TypeError):
            strata.to_copy(x, dtype=3)
        with self.assertRaises(ValueError):
            strata.to_copy(x, dtype="float8")
        w = strata.randn(16, 4, seed=12)
        for name, low in (("bf16", "bfloat16"), ("float16", "float16")):
            with strata.autocast(name):
                out = strata.matmul(x, w)  # cast by the Autocast key
                self.assertEqual(strata.relu(x).dtype, "float32")  # relu falls through
            self.assertEqual(out.dtype, low)
            self.assertLessEqual(relative_error(out.numpy_float64(), x.numpy() @ w.numpy()), TOLERANCE[low])
        self.assertEqual(strata.matmul(x, w).dtype, "float32")  # off again after the block
        with self.assertRaises(strata.UsageError):
            with strata.autocast("float32"):
                pass

    def test_out_of_range_integers_are_refused_naming_the_argument(self):
        # Every int that crosses into C++: the crossing takes int64, then each operator its own range.
        # padding=2**62 reported negative sizes and 2**63-1 returned a 1x1 tensor of zeros (the padded
        # size wrapped around); now each is a ValueError naming the argument and what it may be.
        x, w = strata.randn(1, 1, 4, 4, seed=1), strata.randn(1, 1, 1, 1, seed=2)
        g = strata.randn(1, 1, 4, 4, seed=3)
        cases = [
            (lambda: strata.conv2d(x, w, padding=2**62), "padding must be between 0 and 2147483647"),
            (lambda: strata.conv2d(x, w, padding=2**63 - 1), "padding must be between 0 and 2147483647"),
            (lambda: strata.conv2d(x, w, padding=2**31), "padding must be between 0 and 2147483647"),
            (lambda: strata.conv2d(x, w, padding=-1), "negative padding is not supported, got padding=[-1, -1]"),
            (lambda: strata.conv2d(x, w, None, 2**31), "stride must be between 1 and 2147483647"),
            (lambda: strata.conv2d(x, w, None, 0), "non-positive stride is not supported, got stride=[0, 0]"),
            (lambda: strata.conv2d(x, w, None, (1, 2**31)), "stride must be between 1 and 2147483647, got 2147483648"),
            (lambda: strata.conv2d(x, w, dilation=2**40), "dilation must be between 1 and 2147483647"),
            (lambda: strata.conv2d(x, w, padding=2**64), "argument 'padding' (position 5) must be an int in [-2**63"),
            (lambda: strata.conv2d(x, w, None, -2**63 - 1), "argument 'stride' (position 4) must be an int in [-2**63"),
            (lambda: strata._strata._op(strata.OPERATORS["conv2d"].__globals__["_index"], x, w, None, 1, 2**64),
             "argument 'padding' (position 5) must be an int"),
            (lambda: strata.conv2d_input_backward(g, x, w, 1, 2**62), "padding must be between 0 and 2147483647"),
            (lambda: strata.conv2d_weight_backward(g, x, w, 2**62, 0), "stride must be between 1 and 2147483647"),
            (lambda: strata.gemm(strata.randn(2, 2), strata.randn(2, 2), 2, 0),
             "transpose_self must be 0 or 1"),
            (lambda: strata.add(x, x, alpha=2**2000), "argument 'alpha' (position 3) must be a float"),
            (lambda: strata.zeros(0, 2**62, 2**62), "product must fit in 64 bits"),
            (lambda: strata.zeros(2**63), "does not fit in 64 bits"),
            (lambda: strata.randn(2, seed=2**64), "seed must be an int in [0, 2**64)"),
            (lambda: strata.manual_seed(-1), "seed must be an int in [0, 2**64)"),
            # The shape error names the Python arguments (weight, padding), not the CLI's --kernel/--pad.
            (lambda: strata.conv2d(strata.randn(1, 1, 2, 2), strata.randn(1, 1, 5, 5)),
             "Calculated padded input size per channel: (2 x 2). Kernel size: (5 x 5). Kernel size can't be greater "
             "than actual input size (the kernel is weight's last two sizes, spread by dilation): give a weight "
             "with a smaller kernel, less dilation, or more padding"),
        ]
        for call, message in cases:
            with self.assertRaises(ValueError) as cm:
                call()
            self.assertIn(message, str(cm.exception))

    def matmul_dtype(self):
        return strata.matmul(strata.randn(2, 2, seed=1), strata.randn(2, 2, seed=2)).dtype

    def test_autocast_contexts_exited_out_of_order_leave_it_off(self):
        # Note [Autocast contexts] in strata/__init__.py.
        outer, inner = strata.autocast("bf16"), strata.autocast("f16")
        outer.__enter__()
        inner.__enter__()
        outer.__exit__(None, None, None)  # out of order: the inner one is still open
        self.assertEqual(self.matmul_dtype(), "float16")
        inner.__exit__(None, None, None)
        self.assertEqual(self.matmul_dtype(), "float32")  # was bfloat16: the leak
        # Three, the middle one first; and one object entered twice, nested.
        a, b, c = strata.autocast("bf16"), strata.autocast("f16"), strata.autocast("bf16")
        for ctx in (a, b, c):
            ctx.__enter__()
        b.__exit__(None, None, None)
        c.__exit__(None, None, None)
        self.assertEqual(self.matmul_dtype(), "bfloat16")  # a is still open
        a.__exit__(None, None, None)
        self.assertEqual(self.matmul_dtype(), "float32")
        twice = strata.autocast("f16")
        with twice:
            with twice:
                self.assertEqual(self.matmul_dtype(), "float16")
            self.assertEqual(self.matmul_dtype(), "float16")
        self.assertEqual(self.matmul_dtype(), "float32")

    def test_autocast_is_per_thread_and_exits_only_where_it_was_entered(self):
        worker_ctx = strata.autocast("f16")
        entered, checked, done = threading.Event(), threading.Event(), threading.Event()
        seen = {}

        def worker():
            worker_ctx.__enter__()
            seen["worker inside"] = self.matmul_dtype()
            entered.set()
            checked.wait()
            seen["worker still"] = self.matmul_dtype()
            worker_ctx.__exit__(None, None, None)
            seen["worker after"] = self.matmul_dtype()
            done.set()

        t = threading.Thread(target=worker)
        with strata.autocast("bf16"):
            t.start()
            entered.wait()
            self.assertEqual(self.matmul_dtype(), "bfloat16")  # the worker's context is not this thread's
            with self.assertRaises(strata.UsageError) as cm:
                worker_ctx.__exit__(None, None, None)  # used to turn this thread's autocast off
            self.assertIn("thread that entered it", str(cm.exception))
            self.assertEqual(self.matmul_dtype(), "bfloat16")
            checked.set()
            done.wait()
        t.join()
        self.assertEqual(seen, {"worker inside": "float16", "worker still": "float16", "worker after": "float32"})
        self.assertEqual(self.matmul_dtype(), "float32")

    def test_autocast_misuse_is_a_clear_error(self):
        with self.assertRaises(strata.UsageError) as cm:
            strata.autocast().__exit__(None, None, None)  # was a bare IndexError
        self.assertIn("without a matching __enter__", str(cm.exception))
        ctx = strata.autocast()
        with ctx:
            pass
        with self.assertRaises(strata.UsageError):
            ctx.__exit__(None, None, None)  # exited twice
        with self.assertRaises(strata.UsageError):
            strata.autocast("float64").__enter__()  # autocast casts to bf16 or f16
        self.assertEqual(self.matmul_dtype(), "float32")  # a refused enter changed nothing

    def test_an_operator_name_with_a_typo_is_answered_with_the_nearest(self):
        x = strata.randn(4, seed=1)
        with self.assertRaises(strata.UsageError) as cm:
            strata._strata.call("sliu", (x,), {})  # the lookup by name, as the general entry makes it
        self.assertIn("unknown operator 'sliu': did you mean 'silu'?", str(cm.exception))

    def test_keywords_and_defaults_reach_the_binding_layer(self):
        x, w = strata.randn(1, 2, 5, 5, seed=3), strata.randn(3, 2, 3, 3, seed=4)
        self.assertEqual(strata.conv2d(x, w).shape, (1, 3, 3, 3))
        self.assertEqual(strata.conv2d(x, w, padding=1).shape, (1, 3, 5, 5))
        self.assertEqual(strata.conv2d(input=x, weight=w, stride=2, padding=1).shape, (1, 3, 3, 3))
        a, b = strata.randn(4, seed=5), strata.randn(4, seed=6)
        np.testing.assert_allclose(strata.add(a, b, alpha=3).numpy(), a.numpy() + 3 * b.numpy(), rtol=1e-6)
        np.testing.assert_allclose((a + b).numpy(), a.numpy() + b.numpy(), rtol=1e-6)
        m = strata.randn(3, 4, seed=7)
        np.testing.assert_allclose((m @ strata.randn(4, 2, seed=8)).numpy(),
                                   m.numpy() @ strata.randn(4, 2, seed=8).numpy(), rtol=1e-5)

    def test_autograd_records_the_declared_node(self):
        x = strata.randn(3, 3, requires_grad=True, seed=1)
        self.assertIsNone(x.grad_fn)
        self.assertTrue(x.requires_grad)
        self.assertEqual(strata.matmul(x, x).grad_fn, "MmBackward")
        self.assertEqual(strata.relu(x).grad_fn, "ReluBackward")
        self.assertEqual(strata.gelu(x).grad_fn, "GeluBackward")
        self.assertIsNone(strata.relu(strata.randn(3, seed=2)).grad_fn)


class TensorTest(unittest.TestCase):
    def test_creation(self):
        for dtype in DTYPES:
            z = strata.zeros(2, 3, dtype=dtype)
            self.assertEqual((z.shape, z.dtype, z.device), ((2, 3), dtype, "cpu"))
            self.assertTrue(np.all(z.numpy_float64() == 0))
        self.assertEqual(strata.zeros((4, 5)).shape, (4, 5))
        self.assertEqual(strata.zeros(np.int64(3)).shape, (3,))
        self.assertEqual(strata.zeros(0, 3).numel(), 0)
        self.assertEqual(strata.randn(2, dtype=np.float64).dtype, "float64")
        self.assertEqual(strata.randn(2, dtype="f16").dtype, "float16")
        u = strata.rand(10000, seed=9).numpy()
        self.assertTrue(0 <= u.min() and u.max() < 1)
        n = strata.randn(10000, seed=9, dtype="float64").numpy()
        self.assertLess(abs(n.mean()), 0.05)
        self.assertLess(abs(n.std() - 1), 0.05)

    def test_seeds(self):
        np.testing.assert_array_equal(strata.randn(5, seed=42).numpy(), strata.randn(5, seed=42).numpy())
        self.assertFalse(np.array_equal(strata.randn(5, seed=42).numpy(), strata.randn(5, seed=43).numpy()))
        strata.manual_seed(7)
        first = strata.rand(5).numpy().copy()
        second = strata.rand(5).numpy().copy()
        self.assertFalse(np.array_equal(first, second))
        strata.manual_seed(7)
        np.testing.assert_array_equal(strata.rand(5).numpy(), first)

    def test_from_numpy_shares_memory(self):
        for dtype in (np.float32, np.float64, np.float16):
            a = np.arange(12, dtype=dtype).reshape(3, 4)
            t = strata.from_numpy(a)
            self.assertEqual((t.shape, t.dtype), ((3, 4), np.dtype(dtype).name))
            self.assertEqual(t.data_ptr(), a.ctypes.data)
            a[1, 2] = 99
            self.assertEqual(t.numpy()[1, 2], 99)

    def test_numpy_is_a_view(self):
        t = strata.randn(3, 4, seed=1)
        v = t.numpy()
        self.assertEqual(v.ctypes.data, t.data_ptr())
        self.assertFalse(v.flags.owndata)

    def test_np_asarray_of_bfloat16_is_refused_unless_a_dtype_is_asked_for(self):
        # numpy's fallback gave a 0-d object array holding the tensor; now the refusal torch gives for
        # bf16 .numpy(), and an explicit dtype gives a converted copy (exact: bf16 values are float32s).
        b = strata.randn(2, 3, dtype="bfloat16", seed=4)
        for convert in (np.asarray, np.array, lambda t: t.numpy()):
            with self.assertRaises(TypeError) as cm:
                convert(b)
            self.assertIn("numpy has no bfloat16", str(cm.exception))
        copy = np.asarray(b, dtype=np.float32)
        self.assertEqual((copy.dtype, copy.shape), (np.dtype(np.float32), (2, 3)))
        np.testing.assert_array_equal(copy, b.numpy_float64())
        # The dtypes numpy has stay views.
        for dtype in ("float32", "float64", "float16"):
            t = strata.randn(2, 3, dtype=dtype, seed=5)
            self.assertEqual(np.asarray(t).ctypes.data, t.data_ptr())

    def test_lifetimes(self):
        a = np.ones((64, 64), dtype=np.float32)
        t = strata.from_numpy(a)
        del a
        gc.collect()
        self.assertEqual(float(strata.relu(t).numpy().sum()), 64 * 64)
        v = strata.randn(8, 8, seed=2).numpy()  # the tensor has no name: the view keeps it alive
        gc.collect()
        self.assertEqual(v.shape, (8, 8))
        self.assertTrue(np.isfinite(v).all())

    def test_no_reference_leaks(self):
        a = np.ones((4, 4), dtype=np.float32)
        before = sys.getrefcount(a)
        for _ in range(100):
            t = strata.from_numpy(a, requires_grad=True)
            y = strata.matmul(strata.relu(t), t)  # MmBackward saves both inputs
            self.assertEqual(y.grad_fn, "MmBackward")
            v = t.numpy()
            del t, y, v
        gc.collect()
        self.assertEqual(sys.getrefcount(a), before)

    def test_from_numpy_copies_when_it_must(self):
        # A strided array is shared as a strided view (tests/python/views_test.py); a byte-swapped or
        # read-only one is copied.
        a = np.arange(24, dtype=np.float32).reshape(4, 6)
        for array in (a.astype(">f4"), np.frombuffer(a.tobytes(), dtype=np.float32)):
            t = strata.from_numpy(array)
            self.assertNotEqual(t.data_ptr(), array.ctypes.data)
            np.testing.assert_array_equal(t.numpy(), array)

    def test_cpu_and_to(self):
        t = strata.randn(2, 2, seed=1)
        self.assertIs(type(t.cpu()), strata.Tensor)
        np.testing.assert_array_equal(t.to("cpu").numpy(), t.numpy())


class BadInputTest(unittest.TestCase):
    def assertRaisesMessage(self, exc, fn, *fragments):
        with self.assertRaises(exc) as cm:
            fn()
        for f in fragments:
            self.assertIn(f, str(cm.exception))
        return cm.exception

    def test_exception_classes(self):
        self.assertTrue(issubclass(strata.UsageError, ValueError))
        self.assertTrue(issubclass(strata.UsageError, strata.Error))
        self.assertTrue(issubclass(strata.UnavailableError, RuntimeError))
        self.assertTrue(issubclass(strata.Error, RuntimeError))

    def test_wrong_types(self):
        a = strata.randn(2, 2, seed=1)
        self.assertRaisesMessage(TypeError, lambda: strata.matmul(a, [[1, 2], [3, 4]]), "'other'", "position 2", "list")
        self.assertRaisesMessage(TypeError, lambda: strata.matmul(np.ones((2, 2)), a), "'self'", "ndarray")
        self.assertRaisesMessage(TypeError, lambda: strata.relu(3.0), "relu()")
        self.assertRaisesMessage(TypeError, lambda: strata.conv2d(a, a, None, 1.5), "'stride'", "int")
        self.assertRaisesMessage(TypeError, lambda: strata.conv2d(a, a, None, True), "'stride'", "bool")
        self.assertRaisesMessage(TypeError, lambda: strata.add(a, a, alpha="2"), "'alpha'", "float")
        self.assertRaisesMessage(TypeError, lambda: strata.linear(a, a, 5), "'bias'", "Tensor or None")
        self.assertRaisesMessage(TypeError, lambda: strata.matmul(a), "missing", "schema: matmul(")
        self.assertRaisesMessage(TypeError, lambda: strata.matmul(a, a, a), "too many")
        self.assertRaisesMessage(TypeError, lambda: strata.add(a, a, 2.0), "too many")  # alpha is keyword-only
        self.assertRaisesMessage(TypeError, lambda: strata.relu(a, beta=1), "unexpected keyword")
        self.assertRaisesMessage(TypeError, lambda: strata.zeros(2.5), "size")
        self.assertRaisesMessage(TypeError, lambda: strata.zeros("3"), "size")
        self.assertRaisesMessage(TypeError, lambda: strata.zeros(2, device=1.5), "device")
        self.assertRaisesMessage(TypeError, lambda: strata.zeros(2, dtype=3), "dtype")
        self.assertRaisesMessage(TypeError, lambda: strata.from_numpy([1.0, 2.0]), "ndarray")
        self.assertRaisesMessage(TypeError, lambda: strata.from_numpy(np.arange(3)), "int64")
        self.assertRaisesMessage(TypeError, lambda: strata.randn(2, dtype="bf16").numpy(), "bfloat16")
        # The raw buffer protocol refuses too (pybind11 2.10 would terminate on a throw there).
        self.assertRaisesMessage(TypeError, lambda: memoryview(strata.randn(2, dtype="bf16")), "bfloat16")

    def test_mismatched_shapes(self):
        e = self.assertRaisesMessage(ValueError, lambda: strata.matmul(strata.randn(2, 3), strata.randn(2, 3)),
                                     "mat1 and mat2 shapes cannot be multiplied (2x3 and 2x3)")
        self.assertIsInstance(e, strata.UsageError)
        cases = [
            lambda: strata.add(strata.randn(2, 3), strata.randn(3, 2)),
            lambda: strata.linear(strata.randn(2, 3), strata.randn(4, 5)),
            lambda: strata.linear(strata.randn(2, 3), strata.randn(4, 3), strata.randn(5)),
            lambda: strata.conv2d(strata.randn(1, 2, 5, 5), strata.randn(3, 4, 3, 3)),
            lambda: strata.conv2d(strata.randn(1, 2, 2, 2), strata.randn(3, 2, 3, 3)),
            lambda: strata.conv2d(strata.randn(1, 2, 5, 5), strata.randn(3, 2, 3, 3), stride=0),
            lambda: strata.conv2d(strata.randn(1, 2, 5, 5), strata.randn(3, 2, 3, 3), padding=-1),
            lambda: strata.matmul(strata.randn(2, 3, 4), strata.randn(3, 4, 2)),  # batch dims 2 and 3 do not broadcast
        ]
        for i, case in enumerate(cases):
            with self.subTest(case=i):
                self.assertRaises(ValueError, case)

    def test_mixed_dtypes(self):
        # add/sub/mul promote (docs/broadcasting.md); the other ops refuse operands of different dtypes.
        self.assertRaisesMessage(ValueError,
                                 lambda: strata.matmul(strata.randn(2, 2), strata.randn(2, 2, dtype="float64")),
                                 "dtypes differ")

    def test_bad_sizes(self):
        self.assertRaisesMessage(ValueError, lambda: strata.zeros(-1), "non-negative")
        self.assertRaisesMessage(ValueError, lambda: strata.randn(2, -3), "non-negative")
        self.assertRaisesMessage(ValueError, lambda: strata.zeros(1, 1, 1, 1, 1), "at most 4")
        self.assertRaisesMessage(ValueError, lambda: strata.from_numpy(np.zeros((1,) * 5, np.float32)), "at most 4")
        e = self.assertRaisesMessage(ValueError, lambda: strata.zeros(2**40, 2**40), "choose smaller sizes")
        self.assertIsInstance(e, strata.UsageError)
        self.assertRaisesMessage(ValueError, lambda: strata.zeros(2**64), "64 bits")
        self.assertRaisesMessage(ValueError, lambda: strata.zeros(2**62, 2**62), "choose smaller sizes")
        self.assertRaises(ValueError, lambda: strata.randn(2, seed=-1))
        self.assertRaises(ValueError, lambda: strata.conv2d(strata.randn(1, 1, 3, 3), strata.randn(1, 1, 1, 1),
                                                            stride=2**64))

    def test_unknown_device_and_dtype(self):
        self.assertRaisesMessage(ValueError, lambda: strata.zeros(2, device="tpu"), "unknown device 'tpu'")
        self.assertRaisesMessage(ValueError, lambda: strata.zeros(2, device="cuda:x"), "cuda:x")
        self.assertRaisesMessage(ValueError, lambda: strata.zeros(2, dtype="int8"), "unknown dtype")

    def test_cuda_without_a_gpu_is_a_clear_runtime_error(self):
        try:
            t = strata.randn(2, 2, device="cuda", seed=1)
        except strata.UnavailableError as e:
            self.assertIsInstance(e, RuntimeError)
            self.assertIn("cuda", str(e))
            self.assertIn("device='cpu'", str(e))
            self.assertRaises(strata.UnavailableError, lambda: strata.randn(2).to("cuda"))
        else:
            self.assertEqual(t.device, "cuda:0")  # a machine with a GPU
            self.assertRaisesMessage(TypeError, t.numpy, ".cpu()")
            self.assertRaisesMessage(ValueError, lambda: strata.add(t, strata.randn(2, 2)), "devices differ")

    def test_first_cuda_use_loads_the_cuda_module_and_its_kernels(self):
        # The CUDA kernels live in libstrata_cuda.so, which the extension loads on the first CUDA use (GPU or
        # not: the toolkit's runtime loads without a driver), so a CUDA call finds a kernel, and a machine
        # without a GPU hears why (the driver), not "no kernel for dispatch key CUDA".
        if not strata._strata.cuda_build:
            self.skipTest("this strata was built without CUDA support")
        try:
            strata.zeros(1, device="cuda")
        except strata.UnavailableError as e:
            self.assertNotIn("no kernel", str(e))
            self.assertNotIn("could not be loaded", str(e))
        registered = strata._strata._cuda_kernel_ops()
        for op in ("matmul", "linear", "conv2d", "relu", "add", "gelu", "sum", "to_copy"):
            self.assertIn(op, registered)


if __name__ == "__main__":
    unittest.main(verbosity=2 if "-v" in sys.argv else 1)
