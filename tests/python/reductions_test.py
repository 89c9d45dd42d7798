"""sum and mean with dim and keepdim (Note [Reductions over dims] in layers/ops/operators.h): values and
shapes against numpy float64 on fresh random inputs, gradients, the refusals as the exceptions torch raises,
and, where torch is importable, agreement with torch on the same inputs (NaN, infinities, empty tensors,
keepdim). Runs under ctest with PYTHONPATH pointing at build/python."""
import random
import unittest
import warnings

import numpy as np

import strata

try:
    import torch
except ImportError:
    torch = None

# (shape, dim, keepdim): dim None is the plain op, [] every dim (as torch).
CASES = [((3, 4), None, False), ((3, 4), 1, False), ((3, 4), -1, True), ((3, 4), 0, True),
         ((2, 3, 5), (0, 2), False), ((2, 3, 5), (0, -1), True), ((2, 3, 5), [1], False),
         ((2, 3, 4, 5), [], False), ((2, 3, 4, 5), (1, 2, 3), True), ((2, 3, 4, 5), (-4, 2), False),
         ((), 0, False), ((), -1, True), ((7,), 0, False), ((0, 3), 0, False), ((0, 3), 1, True)]
TOLERANCE = {np.float64: 1e-12, np.float32: 1e-5}


def numpy_axis(dim, ndim):
    if ndim == 0 or dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0):
        return None
    return tuple(dim) if isinstance(dim, (tuple, list)) else dim


def call(x, name, dim, keepdim):
    if dim is None and not keepdim:
        return getattr(x, name)()
    return getattr(x, name)(dim, keepdim=keepdim)


class ReductionsTest(unittest.TestCase):
    def setUp(self):
        # Fresh inputs on every run; every subTest names the seed to replay a failure.
        self.seed = random.SystemRandom().randrange(2**32)
        self.rng = np.random.default_rng(self.seed)

    def values(self, shape, dtype):
        return np.asarray(self.rng.standard_normal(shape) + 0.25, dtype=dtype)

    def test_values_and_shapes_against_numpy(self):
        for dtype in (np.float64, np.float32):
            for shape, dim, keepdim in CASES:
                a = self.values(shape, dtype)
                x = strata.from_numpy(a.copy())
                for name, ref in (("sum", np.sum), ("mean", np.mean)):
                    with self.subTest(dtype=dtype.__name__, shape=shape, dim=dim, keepdim=keepdim, op=name,
                                      seed=self.seed):
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore")  # numpy's mean of nothing warns; it is NaN
                            want = ref(a.astype(np.float64), axis=numpy_axis(dim, len(shape)), keepdims=keepdim)
                        got = call(x, name, dim, keepdim).numpy()
                        self.assertEqual(got.shape, np.shape(want))
                        self.assertEqual(got.dtype, dtype)
                        np.testing.assert_allclose(got, want, rtol=TOLERANCE[dtype], atol=TOLERANCE[dtype])

    def test_functions_and_dtype(self):
        with self.subTest(seed=self.seed):
            a = self.values((4, 6), np.float32)
            x = strata.from_numpy(a.copy())
            np.testing.assert_allclose(strata.sum(x, dim=1).numpy(), a.sum(1, dtype=np.float64), rtol=1e-5)
            np.testing.assert_allclose(strata.mean(x, dim=(0,), keepdim=True).numpy(), a.mean(0, keepdims=True,
                                       dtype=np.float64), rtol=1e-5)
            np.testing.assert_allclose(strata.mean(x).numpy(), a.mean(dtype=np.float64), rtol=1e-5)
            y = x.sum(1, dtype=strata.float64)
            self.assertEqual(y.numpy().dtype, np.float64)
            self.assertEqual(x.sum(dim=None, keepdim=True).numpy().shape, (1, 1))
            self.assertEqual(x.mean([]).numpy().shape, ())

    def test_gradients(self):
        for dtype in (np.float64, np.float32):
            for shape, dim, keepdim in CASES:
                for name in ("sum", "mean"):
                    with self.subTest(dtype=dtype.__name__, shape=shape, dim=dim, keepdim=keepdim, op=name,
                                      seed=self.seed):
                        a = self.values(shape, dtype)
                        x = strata.from_numpy(a.copy()).requires_grad_()
                        y = call(x, name, dim, keepdim)
                        w = self.values(y.numpy().shape, dtype)
                        strata.mul(y, strata.from_numpy(w.copy())).sum().backward()
                        axis = numpy_axis(dim, len(shape))
                        kept = np.expand_dims(w, axis) if (axis is not None and not keepdim) else w
                        want = np.broadcast_to(kept.astype(np.float64), shape)
                        if name == "mean":
                            want = want / max(a.size // max(np.size(w), 1), 1) if a.size else want
                        got = x.grad.numpy()
                        self.assertEqual(got.shape, shape)
                        np.testing.assert_allclose(got, want, rtol=TOLERANCE[dtype], atol=TOLERANCE[dtype])

    def test_refusals(self):
        x = strata.from_numpy(self.values((3, 4), np.float32))
        with self.assertRaisesRegex(IndexError, r"Dimension out of range \(expected to be in range of \[-2, 1\], "
                                                r"but got 2\)"):
            x.sum(2)
        with self.assertRaisesRegex(IndexError, "but got -3"):
            x.mean((0, -3))
        with self.assertRaisesRegex(RuntimeError, "dim 1 appears multiple times in the list of dims"):
            x.sum((1, -1))
        with self.assertRaises(strata.UsageError):
            x.mean((0, 0), keepdim=True)
        with self.assertRaises(TypeError):
            x.sum(1.5)
        with self.assertRaises(TypeError):
            x.sum(1, keepdim=1)

    @unittest.skipIf(torch is None, "torch is not importable")
    def test_agrees_with_torch(self):
        for dtype in (np.float64, np.float32):
            for shape, dim, keepdim in CASES:
                a = self.values(shape, dtype)
                if a.size >= 4:  # NaN and both infinities where there is room
                    flat = a.reshape(-1)
                    flat[0], flat[1], flat[-1] = np.nan, np.inf, -np.inf
                x, t = strata.from_numpy(a.copy()), torch.from_numpy(a.copy())
                for name in ("sum", "mean"):
                    with self.subTest(dtype=dtype.__name__, shape=shape, dim=dim, keepdim=keepdim, op=name,
                                      seed=self.seed):
                        got = call(x, name, dim, keepdim).numpy()
                        if dim is None and not keepdim:
                            want = getattr(t, name)().numpy()
                        else:
                            torch_dim = dim if dim is not None else []
                            want = getattr(t, name)(torch_dim, keepdim=keepdim).numpy()
                        self.assertEqual(got.shape, want.shape)
                        self.assertEqual(got.dtype, want.dtype)
                        np.testing.assert_allclose(got, want, rtol=TOLERANCE[dtype], atol=TOLERANCE[dtype],
                                                   equal_nan=True)


if __name__ == "__main__":
    unittest.main()
