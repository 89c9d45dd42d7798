"""tests/python: broadcasting for add, sub and mul (docs/broadcasting.md) from Python, against numpy
float64 on fresh random inputs (values and the gradients summed over each operand's broadcast dims), a
mismatch refused as torch refuses it (a RuntimeError naming both shapes), and, where the peer's environment
has PyTorch (the ctest entry runs under it then), values and gradients against torch on the same inputs.
Runs under ctest with PYTHONPATH pointing at build/python."""
import random
import unittest

import numpy as np

import strata

try:
    import torch
except ImportError:  # Debian's python3 without the peer's environment (scripts/install-python-deps)
    torch = None

# (self shape, other shape): trailing alignment, dims of 1 on either side, 0-d scalars.
SHAPES = [((3, 4), (4,)), ((4,), (3, 4)), ((2, 1, 4), (3, 1)), ((), (2, 3)), ((2, 3), ()),
          ((4, 1), (1, 5)), ((1,), (3, 1, 2)), ((2, 3, 1, 5), (3, 4, 1))]
OPS = [("add", lambda a, b: a + b), ("sub", lambda a, b: a - b), ("mul", lambda a, b: a * b)]
TOLERANCE = {"float32": 1e-5, "float64": 1e-12, "bfloat16": 1e-2, "float16": 2e-3}


def reduce_to(g, shape):
    """numpy's gradient of a broadcast operand: summed over the dims it was broadcast along."""
    lead = g.ndim - len(shape)
    g = g.sum(axis=tuple(range(lead))) if lead else g
    keep = tuple(i for i, s in enumerate(shape) if s == 1 and g.shape[i] != 1)
    return g.sum(axis=keep, keepdims=True) if keep else g


class BroadcastTest(unittest.TestCase):
    def setUp(self):
        self.seed = random.SystemRandom().randrange(2**32)

    def rand(self, shape, dtype, k, requires_grad=False):
        return strata.randn(*shape, dtype=dtype, seed=self.seed + k, requires_grad=requires_grad)

    def test_values_against_numpy_float64(self):
        for name, f in OPS:
            for sa, sb in SHAPES:
                for dtype in TOLERANCE:
                    with self.subTest(op=name, shapes=(sa, sb), dtype=dtype, seed=self.seed):
                        x, y = self.rand(sa, dtype, 0), self.rand(sb, dtype, 1)
                        out = f(x, y)
                        want = f(x.numpy_float64(), y.numpy_float64())
                        self.assertEqual(out.shape, want.shape)
                        np.testing.assert_allclose(out.numpy_float64(), want, rtol=TOLERANCE[dtype],
                                                   atol=TOLERANCE[dtype] * np.abs(want).max())

    def test_gradients_sum_over_broadcast_dims(self):
        for name, f in OPS:
            for sa, sb in SHAPES:
                with self.subTest(op=name, shapes=(sa, sb), seed=self.seed):
                    x = self.rand(sa, "float64", 0, requires_grad=True)
                    y = self.rand(sb, "float64", 1, requires_grad=True)
                    out = f(x, y)
                    up = self.rand(out.shape, "float64", 2)
                    strata.sum(out * up).backward()
                    a, b, u = x.numpy(), y.numpy(), up.numpy()
                    ga = {"add": u, "sub": u, "mul": u * b}[name]
                    gb = {"add": u, "sub": -u, "mul": u * a}[name]
                    self.assertEqual(x.grad.shape, sa)
                    self.assertEqual(y.grad.shape, sb)
                    np.testing.assert_allclose(x.grad.numpy(), reduce_to(np.broadcast_to(ga, out.shape), sa),
                                               rtol=1e-12, atol=1e-12)
                    np.testing.assert_allclose(y.grad.numpy(), reduce_to(np.broadcast_to(gb, out.shape), sb),
                                               rtol=1e-12, atol=1e-12)

    def test_mismatch_is_a_runtime_error_naming_both_shapes(self):
        x, y = self.rand((3, 4), "float32", 0), self.rand((3,), "float32", 1)
        for _, f in OPS:
            with self.assertRaises(RuntimeError) as caught:
                f(x, y)
            self.assertIn("[3x4] and [3] cannot broadcast", str(caught.exception))


@unittest.skipIf(torch is None, "PyTorch is not in this Python (the peer's environment, scripts/install-python-deps, has it)")
class AgainstTorchTest(unittest.TestCase):
    def test_values_and_gradients_agree_with_torch(self):
        seed = random.SystemRandom().randrange(2**32)
        for name, f in OPS:
            for sa, sb in SHAPES:
                with self.subTest(op=name, shapes=(sa, sb), seed=seed):
                    x = strata.randn(*sa, dtype="float64", seed=seed, requires_grad=True)
                    y = strata.randn(*sb, dtype="float64", seed=seed + 1, requires_grad=True)
                    tx = torch.tensor(x.numpy(), requires_grad=True)
                    ty = torch.tensor(y.numpy(), requires_grad=True)
                    out, tout = f(x, y), f(tx, ty)
                    self.assertEqual(out.shape, tuple(tout.shape))
                    np.testing.assert_allclose(out.numpy(), tout.detach().numpy(), rtol=1e-15, atol=0)
                    up = strata.randn(*out.shape, dtype="float64", seed=seed + 2)
                    strata.sum(out * up).backward()
                    (tout * torch.tensor(up.numpy())).sum().backward()
                    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12, atol=1e-12)
                    np.testing.assert_allclose(y.grad.numpy(), ty.grad.numpy(), rtol=1e-12, atol=1e-12)

    def test_type_promotion_agrees_with_torch(self):
        seed = random.SystemRandom().randrange(2**32)
        tdt = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
               "bfloat16": torch.bfloat16}
        for name, f in OPS:
            for da, db in (("float32", "float64"), ("float16", "bfloat16"), ("bfloat16", "float32")):
                with self.subTest(op=name, dtypes=(da, db), seed=seed):
                    x = strata.randn(3, 4, dtype=da, seed=seed, requires_grad=True)
                    y = strata.randn(4, dtype=db, seed=seed + 1, requires_grad=True)
                    tx = torch.tensor(x.numpy_float64(), dtype=tdt[da], requires_grad=True)
                    ty = torch.tensor(y.numpy_float64(), dtype=tdt[db], requires_grad=True)
                    out, tout = f(x, y), f(tx, ty)
                    self.assertEqual(tdt[out.dtype], tout.dtype)
                    np.testing.assert_allclose(out.numpy_float64(), tout.detach().double().numpy(),
                                               rtol=TOLERANCE[out.dtype], atol=TOLERANCE[out.dtype])
                    strata.sum(out).backward()
                    tout.sum().backward()
                    self.assertEqual(x.grad.dtype, da)
                    self.assertEqual(tdt[y.grad.dtype], ty.grad.dtype)
                    np.testing.assert_allclose(y.grad.numpy_float64(), ty.grad.double().numpy(),
                                               rtol=TOLERANCE[db], atol=TOLERANCE[db] * 4)
        # A Python number does not promote a tensor: float16 * 2.0 stays float16, as torch's.
        self.assertEqual((strata.randn(3, dtype="float16") * 2.0).dtype, "float16")
        self.assertEqual((torch.randn(3).half() * 2.0).dtype, torch.float16)

    def test_zero_dim_operands_promote_as_torch(self):
        # torch's result_type: a 0-d tensor beside a dimensioned one of the same category (every strata
        # dtype is floating) does not promote it; two 0-d or two dimensioned tensors promote as usual.
        seed = random.SystemRandom().randrange(2**32)
        tdt = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
               "bfloat16": torch.bfloat16}
        shapes = [((3, 2), ()), ((), (2,)), ((), ()), ((1,), (4,))]
        for name, f in OPS:
            for da in tdt:
                for db in tdt:
                    for sa, sb in shapes:
                        with self.subTest(op=name, dtypes=(da, db), shapes=(sa, sb), seed=seed):
                            x = strata.randn(*sa, dtype=da, seed=seed, requires_grad=True)
                            y = strata.randn(*sb, dtype=db, seed=seed + 1, requires_grad=True)
                            tx = torch.tensor(x.numpy_float64(), dtype=tdt[da], requires_grad=True)
                            ty = torch.tensor(y.numpy_float64(), dtype=tdt[db], requires_grad=True)
                            out, tout = f(x, y), f(tx, ty)
                            self.assertEqual(tdt[out.dtype], tout.dtype)
                            self.assertEqual(out.shape, tuple(tout.shape))
                            # strata casts the 0-d operand to the result's dtype; torch reads it in
                            # float for a half result: one more rounding of the scalar, within 2 ulps.
                            tol = 2 * TOLERANCE[out.dtype]
                            np.testing.assert_allclose(out.numpy_float64(), tout.detach().double().numpy(),
                                                       rtol=tol, atol=tol)
                            strata.sum(out).backward()
                            tout.sum().backward()
                            self.assertEqual(tdt[x.grad.dtype], tx.grad.dtype)
                            self.assertEqual(tdt[y.grad.dtype], ty.grad.dtype)
                            self.assertEqual(y.grad.shape, tuple(ty.grad.shape))

    def test_mismatch_raises_what_torch_raises(self):
        with self.assertRaises(RuntimeError):
            torch.ones(3, 4) + torch.ones(3)
        with self.assertRaises(RuntimeError):
            strata.randn(3, 4) + strata.randn(3)


if __name__ == "__main__":
    unittest.main()
