"""softmax, log_softmax, sigmoid, layer_norm and rms_norm (Note [Normalization ops] in
layers/ops/normalization.h): values and gradients against numpy float64 on fresh random inputs, NaN,
infinities and empty tensors, the refusals (a dim out of range, shapes that do not agree), and, where torch
is importable, agreement with torch.nn.functional on the same inputs, gradients included. Runs under ctest
with PYTHONPATH pointing at build/python."""
import random
import unittest
import warnings

import numpy as np

import strata

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    torch = None

TOLERANCE = {np.float64: 1e-10, np.float32: 1e-5}


def np_softmax(a, dim, log=False):
    m = np.max(a, axis=dim, keepdims=True)
    e = np.exp(a - m)
    s = np.sum(e, axis=dim, keepdims=True)
    return a - m - np.log(s) if log else e / s


def np_norm(a, ndims, w=None, b=None, eps=1e-5, rms=False):
    axes = tuple(range(a.ndim - ndims, a.ndim))
    mean = 0.0 if rms else np.mean(a, axis=axes, keepdims=True)
    var = np.mean((a - mean) ** 2, axis=axes, keepdims=True)
    y = (a - mean) / np.sqrt(var + eps)
    if w is not None:
        y = y * w
    if b is not None:
        y = y + b
    return y


def close(test, got, want, dtype):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    test.assertEqual(got.shape, want.shape)
    scale = np.linalg.norm(np.maximum(np.abs(want), 0.25)) or 1.0
    test.assertLessEqual(np.linalg.norm(got - want) / scale, TOLERANCE[dtype])


class NormalizationTest(unittest.TestCase):
    def setUp(self):
        self.seed = random.SystemRandom().randrange(2**32)
        self.rng = np.random.default_rng(self.seed)

    def values(self, shape, dtype=np.float64):
        return np.asarray(self.rng.standard_normal(shape), dtype=dtype)

    def test_softmax_values(self):
        for dtype in (np.float64, np.float32):
            for shape, dim in (((4, 7), -1), ((4, 7), 0), ((2, 3, 5), 1), ((6,), 0), ((2, 3, 4, 5), 2)):
                a = self.values(shape, dtype)
                for log in (False, True):
                    with self.subTest(dtype=dtype.__name__, shape=shape, dim=dim, log=log, seed=self.seed):
                        x = strata.from_numpy(a.copy())
                        got = (strata.log_softmax if log else strata.softmax)(x, dim).numpy()
                        self.assertEqual(got.dtype, dtype)
                        close(self, got, np_softmax(a.astype(np.float64), dim, log), dtype)
                        method = (x.log_softmax if log else x.softmax)(dim).numpy()
                        np.testing.assert_array_equal(method, got)

    def test_softmax_huge_logits_and_specials(self):
        a = np.array([[1000.0, 1001.0, 999.0], [-np.inf, -np.inf, -np.inf], [-np.inf, 0.0, 1.0],
                      [np.nan, 0.0, 1.0]])
        y = strata.softmax(strata.from_numpy(a.copy()), 1).numpy()
        np.testing.assert_allclose(y[0], np_softmax(a[0], 0), rtol=1e-12)
        self.assertTrue(np.isnan(y[1]).all())  # a row of -inf is NaN, as torch's
        np.testing.assert_allclose(y[2], [0.0, 1 / (1 + np.e), np.e / (1 + np.e)], rtol=1e-12)
        self.assertTrue(np.isnan(y[3]).all())
        ly = strata.log_softmax(strata.from_numpy(a.copy()), 1).numpy()
        self.assertTrue(np.isfinite(ly[0]).all())
        self.assertEqual(ly[2][0], -np.inf)

    def test_sigmoid(self):
        a = np.array([-1000.0, -3.0, -0.0, 0.0, 2.5, 1000.0, np.inf, -np.inf, np.nan])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = 1.0 / (1.0 + np.exp(-a))
        got = strata.sigmoid(strata.from_numpy(a.copy())).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-15)
        self.assertTrue(np.isnan(got[-1]))
        x = strata.from_numpy(self.values((5,))).requires_grad_()
        strata.sigmoid(x).sum().backward()
        s = 1.0 / (1.0 + np.exp(-x.numpy()))
        np.testing.assert_allclose(x.grad.numpy(), s * (1 - s), rtol=1e-12)

    def test_norm_values(self):
        for dtype in (np.float64, np.float32):
            for shape, ndims in (((4, 8), 1), ((2, 3, 5), 2), ((7,), 1), ((2, 2, 3, 4), 1)):
                a = self.values(shape, dtype)
                ns = shape[len(shape) - ndims:]
                w, b = self.values(ns, dtype), self.values(ns, dtype)
                with self.subTest(dtype=dtype.__name__, shape=shape, seed=self.seed):
                    x = strata.from_numpy(a.copy())
                    sw, sb = strata.from_numpy(w.copy()), strata.from_numpy(b.copy())
                    a64, w64, b64 = (v.astype(np.float64) for v in (a, w, b))
                    close(self, strata.layer_norm(x, ns, sw, sb).numpy(), np_norm(a64, ndims, w64, b64), dtype)
                    close(self, strata.layer_norm(x, ns).numpy(), np_norm(a64, ndims), dtype)
                    close(self, strata.layer_norm(x, ns, sw, eps=0.5).numpy(), np_norm(a64, ndims, w64, eps=0.5),
                          dtype)
                    eps = float(np.finfo(dtype).eps)
                    close(self, strata.rms_norm(x, ns, sw).numpy(), np_norm(a64, ndims, w64, eps=eps, rms=True), dtype)
                    close(self, strata.rms_norm(x, ns, eps=1e-3).numpy(), np_norm(a64, ndims, eps=1e-3, rms=True),
                          dtype)

    def test_norm_gradients_by_finite_differences(self):
        # d/dv sum(r * f(...)) for a random r, by central differences in float64.
        shape, ns = (3, 5), (5,)
        a, w, b, r = self.values(shape), self.values(ns), self.values(ns), self.values(shape)
        for rms in (False, True):
            with self.subTest(rms=rms, seed=self.seed):
                x, sw = strata.from_numpy(a.copy()).requires_grad_(), strata.from_numpy(w.copy()).requires_grad_()
                sb = strata.from_numpy(b.copy()).requires_grad_()
                y = strata.rms_norm(x, ns, sw, eps=1e-5) if rms else strata.layer_norm(x, ns, sw, sb)
                strata.mul(y, strata.from_numpy(r.copy())).sum().backward()

                def objective(a_, w_, b_):
                    return np.sum(r * (np_norm(a_, 1, w_, None if rms else b_, 1e-5, rms)))

                for name, value, got in (("input", a, x.grad), ("weight", w, sw.grad)) + (
                        () if rms else (("bias", b, sb.grad),)):
                    numeric = np.zeros_like(value)
                    for i in np.ndindex(value.shape):
                        args = {"input": a.copy(), "weight": w.copy(), "bias": b.copy()}
                        args[name][i] += 1e-6
                        up = objective(args["input"], args["weight"], args["bias"])
                        args[name][i] -= 2e-6
                        down = objective(args["input"], args["weight"], args["bias"])
                        numeric[i] = (up - down) / 2e-6
                    np.testing.assert_allclose(got.numpy(), numeric, rtol=1e-5, atol=1e-6, err_msg=name)

    def test_empty_and_eps_zero(self):
        for shape in ((0, 4), (3, 0)):
            x = strata.from_numpy(np.zeros(shape))
            self.assertEqual(strata.softmax(x, -1).numpy().shape, shape)
            self.assertEqual(strata.layer_norm(x, (shape[1],)).numpy().shape, shape)
            self.assertEqual(strata.rms_norm(x, (shape[1],)).numpy().shape, shape)
        # eps = 0: a constant row is 0 / 0, NaN, as torch's
        y = strata.layer_norm(strata.from_numpy(np.full((2, 3), 1.5)), (3,), eps=0.0).numpy()
        self.assertTrue(np.isnan(y).all())

    def test_refusals(self):
        x = strata.from_numpy(self.values((2, 3)))
        for fn in (strata.softmax, strata.log_softmax):
            with self.assertRaises(strata.IndexRangeError) as e:
                fn(x, 2)
            self.assertIn("Dimension out of range", str(e.exception))
        with self.assertRaises(strata.UsageError) as e:
            strata.layer_norm(x, (4,))
        self.assertIn("[4]", str(e.exception))
        self.assertIn("2x3", str(e.exception))
        with self.assertRaises(strata.UsageError) as e:
            strata.layer_norm(x, (3,), strata.from_numpy(self.values((4,))))
        self.assertIn("weight of shape [4]", str(e.exception))
        self.assertIn("normalized_shape = [3]", str(e.exception))
        with self.assertRaises(strata.UsageError) as e:
            strata.rms_norm(x, (2, 3), strata.from_numpy(self.values((3,))))
        self.assertIn("weight", str(e.exception))
        with self.assertRaises(TypeError):
            strata.rms_norm(x, (3,), eps="1")

    @unittest.skipIf(torch is None, "torch is not importable")
    def test_agreement_with_torch(self):
        for dtype, tdtype in ((np.float64, torch.float64), (np.float32, torch.float32)):
            a = self.values((4, 6), dtype)
            a[1, 2] = 300.0  # a huge logit
            w, b, r = self.values((6,), dtype), self.values((6,), dtype), self.values((4, 6), dtype)
            cases = (
                ("softmax", lambda m, x, w_, b_: m.softmax(x, 1) if m is strata else F.softmax(x, 1)),
                ("log_softmax", lambda m, x, w_, b_: m.log_softmax(x, 0) if m is strata else F.log_softmax(x, 0)),
                ("sigmoid", lambda m, x, w_, b_: m.sigmoid(x)),
                ("layer_norm", lambda m, x, w_, b_: (strata.layer_norm if m is strata else F.layer_norm)(
                    x, (6,), w_, b_, 1e-5)),
                ("rms_norm", lambda m, x, w_, b_: (strata.rms_norm if m is strata else F.rms_norm)(x, (6,), w_)),
            )
            for name, fn in cases:
                if name == "rms_norm" and not hasattr(F, "rms_norm"):
                    continue
                with self.subTest(op=name, dtype=dtype.__name__, seed=self.seed):
                    sx, sw, sb = (strata.from_numpy(v.copy()).requires_grad_() for v in (a, w, b))
                    tx, tw, tb = (torch.tensor(v, dtype=tdtype, requires_grad=True) for v in (a, w, b))
                    sy, ty = fn(strata, sx, sw, sb), fn(torch, tx, tw, tb)
                    close(self, sy.numpy(), ty.detach().numpy(), dtype)
                    strata.mul(sy, strata.from_numpy(r.copy())).sum().backward()
                    (ty * torch.tensor(r)).sum().backward()
                    close(self, sx.grad.numpy(), tx.grad.numpy(), dtype)
                    if name in ("layer_norm", "rms_norm"):
                        close(self, sw.grad.numpy(), tw.grad.numpy(), dtype)
                    if name == "layer_norm":
                        close(self, sb.grad.numpy(), tb.grad.numpy(), dtype)
        # NaN, infinities and empty tensors as torch gives them
        specials = np.array([[np.nan, 1.0, 2.0], [np.inf, 1.0, 2.0], [-np.inf, -np.inf, -np.inf], [0.0, 1.0, 2.0]])
        for name in ("softmax", "log_softmax"):
            got = getattr(strata, name)(strata.from_numpy(specials.copy()), 1).numpy()
            want = getattr(torch, name)(torch.tensor(specials), 1).numpy()
            np.testing.assert_array_equal(got, want)
        got = strata.layer_norm(strata.from_numpy(specials.copy()), (3,)).numpy()
        want = F.layer_norm(torch.tensor(specials), (3,)).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-12, equal_nan=True)
        self.assertEqual(strata.softmax(strata.from_numpy(np.zeros((0, 3))), 1).numpy().shape,
                         tuple(torch.softmax(torch.zeros(0, 3), 1).shape))


if __name__ == "__main__":
    unittest.main()
