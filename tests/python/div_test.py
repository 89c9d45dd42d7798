"""tests/python: true division (div and div.Scalar, docs/python.md): Python's `x / y`, `x / 2.0` and `2.0 / x`,
x.div(y), strata.div, on fresh random inputs against numpy float64 with the per-dtype tolerance, broadcasting,
gradients against the formulas d self = g / b, d other = -g * a / b^2 (summed over broadcast dims), IEEE
specials (x / 0 = inf, 0 / 0 = NaN, signed zeros), `//` refused; and where torch is importable (Debian's
python3 has it), agreement with torch on the same bits. Divisors are drawn away from 0 except in the
explicit specials. Runs under ctest with PYTHONPATH pointing at build/python."""
import math
import random
import unittest

import numpy as np

import strata
from ieee_specials import same

try:
    import torch
except ImportError:
    torch = None

TOLERANCE = {"float32": 1e-5, "float64": 1e-12, "float16": 2e-3, "bfloat16": 1.6e-2}
DTYPES = list(TOLERANCE)
SPECIALS = [math.nan, math.inf, -math.inf, 0.0, -0.0, 1.0, -1.0, 2.5, -3.0, 1e-30, 40.0]


def relative_error(out, ref):
    return float(np.linalg.norm(out - ref) / np.linalg.norm(np.maximum(np.abs(ref), 0.25)))


def divisor(shape, dtype, seed, rng):
    """|b| in [0.5, 1.5), both signs, in dtype: no pole near the random inputs."""
    b = strata.randn(*shape, dtype=dtype, seed=seed)
    return (b * b + 0.5) * rng.choice([1.0, -1.0])



class DivTest(unittest.TestCase):
    def setUp(self):
        self.seed = random.SystemRandom().randrange(2**32)
        self.rng = random.Random(self.seed)

    def test_every_spelling_against_float64_numpy(self):
        for dtype in DTYPES:
            for trial in range(3):
                with self.subTest(dtype=dtype, trial=trial, seed=self.seed):
                    shape = [self.rng.randint(1, 6) for _ in range(self.rng.randint(1, 3))]
                    x = strata.randn(*shape, dtype=dtype, seed=self.rng.randrange(2**63))
                    y = divisor(shape, dtype, self.rng.randrange(2**63), self.rng)
                    xv, yv = x.numpy_float64(), y.numpy_float64()
                    for what, got in (("x / y", x / y), ("strata.div", strata.div(x, y)), ("x.div(y)", x.div(y)),
                                      ("OPERATORS['div']", strata.OPERATORS["div"](x, y))):
                        self.assertEqual(got.dtype, dtype, what)
                        self.assertLessEqual(relative_error(got.numpy_float64(), xv / yv), TOLERANCE[dtype], what)
                    for s in (2.0, -0.5, 3, 1e-3):
                        for what, got in (("x / s", x / s), ("strata.div(x, s)", strata.div(x, s)),
                                          ("x.div(s)", x.div(s))):
                            self.assertEqual(got.dtype, dtype, what)  # a Python number does not promote
                            self.assertLessEqual(relative_error(got.numpy_float64(), xv / s), TOLERANCE[dtype],
                                                 f"{what} s={s}")
                    r = 2.0 / y
                    self.assertEqual(r.dtype, dtype)
                    self.assertLessEqual(relative_error(r.numpy_float64(), 2.0 / yv), TOLERANCE[dtype] * 2)

    def test_div_scalar_is_one_division_and_overloads_resolve(self):
        x = strata.from_numpy(np.array([1.0, 7.0, -10.0], dtype=np.float32))
        np.testing.assert_array_equal((x / 3.0).numpy(), np.array([1, 7, -10], dtype=np.float32) / np.float32(3))
        self.assertEqual(strata.OPERATORS["div.Scalar"].__name__, "div.Scalar")
        self.assertIn("div.Scalar(Tensor self, float other=1) -> Tensor", strata.div.__doc__)
        self.assertIn("div(Tensor self, Tensor other) -> Tensor", strata.div.__doc__)
        np.testing.assert_array_equal(strata.div(x).numpy(), x.numpy())  # div.Scalar's default, 1
        with self.assertRaisesRegex(TypeError, r"div\(\): argument 'other' \(position 2\) must be Tensor or float, "
                                               r"not str"):
            strata.div(x, "2")
        with self.assertRaisesRegex(TypeError, "must be Tensor or float, not bool"):
            x / True
        with self.assertRaises(TypeError):
            "2" / x  # noqa: B018 (not a number: Python's own TypeError)

    def test_rtruediv_is_reciprocal_times_the_number(self):
        """2.0 / x as torch's __rtruediv__: reciprocal(x) * 2.0, here pow(x, -1) then mul.Scalar, bit for bit."""
        for dtype in DTYPES:
            with self.subTest(dtype=dtype, seed=self.seed):
                x = divisor([4, 5], dtype, self.rng.randrange(2**63), self.rng)
                np.testing.assert_array_equal((2.0 / x).numpy_float64(), strata.mul(strata.pow(x, -1.0), 2.0).numpy_float64())
                np.testing.assert_array_equal((1 / x).numpy_float64(), strata.pow(x, -1.0).numpy_float64())

    def test_broadcasting(self):
        for a_shape, b_shape, out in (([3, 4], [4], (3, 4)), ([4], [3, 4], (3, 4)), ([2, 1, 4], [3, 1], (2, 3, 4)),
                                      ([], [2, 3], (2, 3)), ([2, 3], [], (2, 3))):
            with self.subTest(a=a_shape, b=b_shape, seed=self.seed):
                a = strata.randn(*a_shape, dtype="float64", seed=self.rng.randrange(2**63))
                b = divisor(b_shape, "float64", self.rng.randrange(2**63), self.rng)
                got = a / b
                self.assertEqual(got.shape, out)
                np.testing.assert_allclose(got.numpy(), a.numpy() / b.numpy(), rtol=1e-15)
        with self.assertRaisesRegex(strata.UsageError, r"div: shapes \[3x4\] and \[4x3\] cannot broadcast"):
            strata.randn(3, 4, seed=1) / strata.randn(4, 3, seed=2)

    def test_type_promotion(self):
        a = strata.randn(3, 4, dtype="float32", seed=self.seed)
        b = divisor([4], "float64", self.rng.randrange(2**63), self.rng)
        out = a / b
        self.assertEqual(out.dtype, "float64")
        np.testing.assert_allclose(out.numpy(), a.numpy().astype(np.float64) / b.numpy(), rtol=1e-15)

    def test_gradients_against_the_formulas(self):
        for dtype, tol in (("float64", 1e-12), ("float32", 1e-5)):
            for a_shape, b_shape in (([3, 4], [3, 4]), ([3, 4], [4]), ([2, 1, 4], [3, 1]), ([3], [])):
                with self.subTest(dtype=dtype, a=a_shape, b=b_shape, seed=self.seed):
                    a = strata.randn(*a_shape, dtype=dtype, seed=self.rng.randrange(2**63), requires_grad=True)
                    b = divisor(b_shape, dtype, self.rng.randrange(2**63), self.rng).requires_grad_()
                    y = a / b
                    self.assertIn("DivBackward", str(y.grad_fn))
                    g = strata.randn(*y.shape, dtype=dtype, seed=self.rng.randrange(2**63))
                    y.backward(g)
                    av, bv, gv = a.numpy_float64(), b.numpy_float64(), g.numpy_float64()
                    ga = np.broadcast_to(gv / bv, y.shape)
                    gb = -gv * av / (bv * bv)
                    ga = _sum_to(ga, av.shape)
                    gb = _sum_to(gb, bv.shape)
                    self.assertEqual(a.grad.shape, tuple(a_shape))
                    self.assertEqual(b.grad.shape, tuple(b_shape))
                    self.assertLessEqual(relative_error(a.grad.numpy_float64(), ga), tol)
                    self.assertLessEqual(relative_error(b.grad.numpy_float64(), gb), tol)
        x = strata.randn(5, dtype="float64", seed=self.seed, requires_grad=True)
        strata.sum(x / -4.0).backward()
        np.testing.assert_array_equal(x.grad.numpy(), np.full(5, -0.25))

    def test_ieee_specials(self):
        for dtype, np_dtype in (("float32", np.float32), ("float64", np.float64)):
            x = np.array([1.0, -1.0, 0.0, -0.0, 0.0, math.nan, math.inf, -math.inf, 2.0, -2.0, math.inf, 0.0], np_dtype)
            y = np.array([0.0, 0.0, 0.0, 0.0, -0.0, 1.0, 2.0, -0.0, math.inf, math.inf, math.inf, -4.0], np_dtype)
            want = np.array([math.inf, -math.inf, math.nan, math.nan, math.nan, math.nan, math.inf, math.inf, 0.0,
                             -0.0, math.nan, -0.0])
            with self.subTest(dtype=dtype):
                same(self, (strata.from_numpy(x) / strata.from_numpy(y)).numpy(), want, 0, f"x / y {dtype}")
                same(self, (strata.from_numpy(x) / -0.0).numpy(),
                     np.array([-math.inf, math.inf, math.nan, math.nan, math.nan, math.nan, -math.inf, math.inf,
                               -math.inf, math.inf, -math.inf, math.nan]), 0, f"x / -0.0 {dtype}")

    def test_floor_division_is_refused(self):
        x = strata.randn(3, seed=1)
        for call in (lambda: x // x, lambda: x // 2.0, lambda: 2.0 // x):
            with self.assertRaisesRegex(TypeError, r"strata has no floor division.*use `/` or strata.div"):
                call()

    def test_rounding_mode_none_is_true_division_and_the_others_say_why_not(self):
        x, y = strata.randn(4, seed=2), strata.randn(4, seed=3)
        np.testing.assert_array_equal(strata.div(x, y, rounding_mode=None).numpy(), (x / y).numpy())
        np.testing.assert_array_equal(x.div(2.0, rounding_mode=None).numpy(), (x / 2.0).numpy())
        for mode in ("trunc", "floor"):
            for call in (lambda: strata.div(x, y, rounding_mode=mode), lambda: x.div(2.0, rounding_mode=mode),
                         lambda: x.clone().div_(y, rounding_mode=mode)):
                with self.assertRaisesRegex(TypeError, f"rounding_mode='{mode}' rounds the quotient, and strata has "
                                                       f"no {mode} division kernel"):
                    call()
        with self.assertRaisesRegex(ValueError, "expected rounding_mode to be one of None, 'trunc', or 'floor' but "
                                                "found 'round'"):
            strata.div(x, y, rounding_mode="round")


def _sum_to(g, shape):
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(shape) if s == 1 and g.shape[lead + i] != 1)
    return np.asarray(g.sum(axis=axes)).reshape(shape)


@unittest.skipIf(torch is None, "PyTorch is not in this Python")
class AgainstTorchTest(unittest.TestCase):
    CASES = [
        ("x / y", lambda a, b: a / b, 2),
        ("x.div(y)", lambda a, b: a.div(b), 2),
        ("x / 2.0", lambda a: a / 2.0, 1),
        ("x / -0.3", lambda a: a / -0.3, 1),
        ("x / 0.0", lambda a: a / 0.0, 1),
        ("2.0 / x", lambda a: 2.0 / a, 1),
        ("-3 / x", lambda a: -3 / a, 1),
    ]
    DTYPES = {"float32": (np.float32, 1e-6), "float64": (np.float64, 1e-13)}

    def run_case(self, name, f, n, values_of, exact=False):
        for dtype, (np_dtype, rtol) in self.DTYPES.items():
            with self.subTest(op=name, dtype=dtype):
                arrays = [values_of(i).astype(np_dtype) for i in range(n)]
                got = f(*[strata.from_numpy(a.copy()) for a in arrays]).numpy()
                want = f(*[torch.from_numpy(a.copy()) for a in arrays]).numpy()
                same(self, got, want, 0 if exact else rtol, f"{name} {dtype}")

    def test_random_values(self):
        seed = random.SystemRandom().randrange(2**32)
        rng = np.random.default_rng(seed)
        for name, f, n in self.CASES:
            shape = tuple(int(s) for s in rng.integers(1, 9, size=int(rng.integers(1, 4))))
            with self.subTest(seed=seed):
                # Divisors away from 0: uniform magnitude in [0.5, 4), both signs. Bit for bit: one IEEE
                # division (or torch's reciprocal then multiply) on each side.
                self.run_case(name, f, n, lambda i: rng.uniform(0.5, 4, size=shape) * rng.choice([-1, 1], size=shape),
                              exact=True)

    def test_nan_inf_and_signed_zeros(self):
        values = np.array(SPECIALS)
        for name, f, n in self.CASES:
            self.run_case(name, f, n, lambda i: values if i == 0 else values[::-1].copy())

    def test_empty_tensors(self):
        for name, f, n in self.CASES:
            self.run_case(name, f, n, lambda i: np.zeros((0, 3)))

    def test_broadcast_and_gradients_agree(self):
        seed = random.SystemRandom().randrange(2**32)
        rng = np.random.default_rng(seed)
        for a_shape, b_shape in (((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 4), (3, 1))):
            for dtype, (np_dtype, rtol) in self.DTYPES.items():
                with self.subTest(a=a_shape, b=b_shape, dtype=dtype, seed=seed):
                    av = rng.uniform(-2, 2, size=a_shape).astype(np_dtype)
                    bv = (rng.uniform(0.5, 2, size=b_shape) * rng.choice([-1, 1], size=b_shape)).astype(np_dtype)
                    a, b = strata.from_numpy(av.copy()), strata.from_numpy(bv.copy())
                    a.requires_grad = b.requires_grad = True
                    ta = torch.from_numpy(av.copy()).requires_grad_()
                    tb = torch.from_numpy(bv.copy()).requires_grad_()
                    y, ty = a / b, ta / tb
                    same(self, y.numpy(), ty.detach().numpy(), rtol, "forward")
                    up = rng.uniform(-1, 1, size=ty.shape).astype(np_dtype)
                    y.backward(strata.from_numpy(up.copy()))
                    ty.backward(torch.from_numpy(up.copy()))
                    # d/d self sums up / b over a's size-1 dims ((2, 1, 4) against (3, 1)): terms of both
                    # signs again, so the bound is relative to the sum of their magnitudes as for d/d other.
                    self_terms = np.abs(np.broadcast_to(up / bv.astype(np.float64), ty.shape))
                    self_terms = self_terms.sum(axis=tuple(i for i, n in enumerate(av.shape) if n == 1), keepdims=True)
                    same(self, a.grad.numpy(), ta.grad.numpy(), 4 * rtol, "d/d self", atol=4 * rtol * self_terms.max())
                    # Broadcast: d/d other sums -up * a / b^2 over the broadcast dims, terms of both signs, so
                    # its rounding error is relative to the sum of their magnitudes, not to the (cancelled) sum.
                    terms = np.abs(up * av / bv.astype(np.float64) ** 2)
                    lead = terms.ndim - bv.ndim
                    terms = terms.sum(axis=tuple(range(lead)))  # the dims other lacks, then its size-1 dims
                    terms = terms.sum(axis=tuple(i for i, n in enumerate(bv.shape) if n == 1), keepdims=True)
                    got, want = b.grad.numpy(), tb.grad.numpy()
                    self.assertEqual(got.shape, want.shape, "d/d other")
                    for g, w, t in zip(got.ravel(), want.ravel(), terms.ravel()):
                        self.assertLessEqual(abs(float(g) - float(w)), 8 * rtol * (abs(float(w)) + float(t)),
                                             f"d/d other: {g} vs {w}")
                    # 2.0 / x: reciprocal's gradient through pow(x, -1) then mul.Scalar.
                    x = strata.from_numpy(bv.copy())
                    x.requires_grad = True
                    tx = torch.from_numpy(bv.copy()).requires_grad_()
                    strata.sum(2.0 / x).backward()
                    (2.0 / tx).sum().backward()
                    same(self, x.grad.numpy(), tx.grad.numpy(), 4 * rtol, "d/dx of 2.0 / x")


if __name__ == "__main__":
    unittest.main()
