"""tests/python: dtype objects, the operators as Tensor methods (x.relu(), x.matmul(w), x.sum(), ...), unary minus,
x.to(dtype) / x.to("cpu") and x.requires_grad_() (docs/python.md), on fresh random inputs: each method
against its strata function and numpy float64, gradients through -x and x.to(dtype), the refusals as the
exceptions torch raises, and, where the peer's environment has PyTorch (the ctest entry runs under it then),
against torch's methods on the same inputs. Runs under ctest with PYTHONPATH pointing at build/python."""
import math
import random
import unittest

import numpy as np

import strata

try:
    import torch
except ImportError:  # Debian's python3 without the peer's environment (scripts/install-python-deps)
    torch = None

# (method call, the same with strata's function): x is [3,4], w is [4,5], y is [3,4].
METHODS = [
    ("relu", lambda x, w, y: x.relu(), lambda x, w, y: strata.relu(x)),
    ("tanh", lambda x, w, y: x.tanh(), lambda x, w, y: strata.tanh(x)),
    ("matmul", lambda x, w, y: x.matmul(w), lambda x, w, y: strata.matmul(x, w)),
    ("add alpha", lambda x, w, y: x.add(y, alpha=0.5), lambda x, w, y: strata.add(x, y, alpha=0.5)),
    ("sub", lambda x, w, y: x.sub(y), lambda x, w, y: strata.sub(x, y)),
    ("mul scalar", lambda x, w, y: x.mul(3.0), lambda x, w, y: strata.mul(x, 3.0)),
    ("div", lambda x, w, y: x.div(y * y + 0.5), lambda x, w, y: strata.div(x, y * y + 0.5)),
    ("div scalar", lambda x, w, y: x.div(-4.0), lambda x, w, y: strata.div(x, -4.0)),
    ("pow", lambda x, w, y: x.pow(2.0), lambda x, w, y: strata.pow(x, 2.0)),
    ("sum", lambda x, w, y: x.sum(), lambda x, w, y: strata.sum(x)),
]


class TensorMethodsTest(unittest.TestCase):
    def setUp(self):
        self.seed = random.SystemRandom().randrange(2**32)

    def inputs(self, dtype="float64", requires_grad=False):
        return (strata.randn(3, 4, dtype=dtype, seed=self.seed, requires_grad=requires_grad),
                strata.randn(4, 5, dtype=dtype, seed=self.seed + 1),
                strata.randn(3, 4, dtype=dtype, seed=self.seed + 2))

    def test_methods_are_the_functions(self):
        x, w, y = self.inputs()
        for what, method, function in METHODS:
            with self.subTest(what=what, seed=self.seed):
                got, want = method(x, w, y), function(x, w, y)
                self.assertEqual(got.shape, want.shape)
                self.assertEqual(got.dtype, want.dtype)
                np.testing.assert_array_equal(got.numpy(), want.numpy())
        self.assertEqual(x.sum().shape, ())
        self.assertAlmostEqual(x.sum().item(), float(x.numpy().sum()), places=12)

    def test_neg_is_exact_and_differentiable(self):
        x, _, _ = self.inputs(requires_grad=True)
        np.testing.assert_array_equal((-x).numpy(), -x.numpy())
        self.assertEqual(math.copysign(1.0, (-strata.zeros(1)).item()), -1.0)  # -0.0, as torch's neg
        up = strata.randn(3, 4, dtype="float64", seed=self.seed + 3)
        strata.sum(-x * up).backward()
        np.testing.assert_array_equal(x.grad.numpy(), -up.numpy())

    def test_to_dtype_is_a_differentiable_to_copy(self):
        x, _, _ = self.inputs(dtype="float32", requires_grad=True)
        for target in (strata.float64, "float64", np.float64):
            with self.subTest(target=target):
                y = x.to(target)
                self.assertEqual(y.dtype, strata.float64)
                self.assertEqual(y.grad_fn, "ToCopyBackward")
                np.testing.assert_array_equal(y.numpy(), x.numpy().astype(np.float64))
        h = x.to(strata.float16)
        np.testing.assert_array_equal(h.numpy(), x.numpy().astype(np.float16))
        self.assertIs(x.to(strata.float32), x)  # as torch: nothing to change, the tensor itself
        self.assertEqual(x.to("cpu").device, "cpu")
        strata.sum(x.to(strata.float64) * 2.0).backward()
        self.assertEqual(x.grad.dtype, strata.float32)
        np.testing.assert_array_equal(x.grad.numpy(), np.full((3, 4), 2.0, np.float32))
        with self.assertRaises(ValueError):
            x.to("float8")

    def test_dtype_objects(self):
        for name in ("float32", "float64", "float16", "bfloat16"):
            with self.subTest(dtype=name):
                d = getattr(strata, name)
                self.assertIsInstance(d, strata.dtype)
                self.assertEqual(repr(d), f"strata.{name}")
                x = strata.randn(2, 3, dtype=d, seed=self.seed)
                self.assertIs(x.dtype, d)  # x.dtype returns the object, and compares equal to it
                self.assertEqual(x.dtype, d)
                self.assertEqual(x.dtype, name)  # the strings accepted before still are
                self.assertEqual(strata.randn(2, dtype=name).dtype, d)
                self.assertEqual(d.itemsize, {"float64": 8, "float32": 4}.get(name, 2))
        self.assertNotEqual(strata.float32, strata.float64)

    def test_requires_grad_(self):
        x = strata.randn(2, 2, seed=self.seed)
        self.assertIs(x.requires_grad_(), x)
        self.assertTrue(x.requires_grad)
        self.assertFalse(x.requires_grad_(False).requires_grad)
        y = strata.relu(x.requires_grad_())
        self.assertIs(y.requires_grad_(), y)
        with self.assertRaisesRegex(RuntimeError, "only change requires_grad flags of leaf tensors"):
            y.requires_grad_(False)
        with self.assertRaises(TypeError):
            x.requires_grad_(1)

    def test_detach_shares_memory_and_stops_the_gradient(self):
        x = strata.randn(3, 4, dtype="float64", seed=self.seed, requires_grad=True)
        c = x.detach()
        self.assertEqual(c.data_ptr(), x.data_ptr())
        self.assertEqual(c.stride(), x.stride())
        self.assertFalse(c.requires_grad)
        self.assertIsNone(c.grad_fn)
        np.testing.assert_array_equal(c.numpy(), x.numpy())
        # d/dx sum(detach(x) * x) = detach(x): the detached factor is a constant.
        strata.sum(c * x).backward()
        np.testing.assert_array_equal(x.grad.numpy(), x.numpy())
        # A view detached keeps its layout.
        t = x.t().detach()
        self.assertEqual(t.stride(), (1, 4))
        self.assertEqual(t.data_ptr(), x.data_ptr())


@unittest.skipIf(torch is None, "PyTorch is not in this Python (the peer's environment, scripts/install-python-deps, has it)")
class AgainstTorchTest(unittest.TestCase):
    def test_methods_agree_with_torch(self):
        seed = random.SystemRandom().randrange(2**32)
        x = strata.randn(3, 4, dtype="float64", seed=seed)
        w = strata.randn(4, 5, dtype="float64", seed=seed + 1)
        y = strata.randn(3, 4, dtype="float64", seed=seed + 2)
        tx, tw, ty = (torch.tensor(t.numpy()) for t in (x, w, y))
        for what, method, _ in METHODS:
            with self.subTest(what=what, seed=seed):
                np.testing.assert_allclose(method(x, w, y).numpy(), method(tx, tw, ty).numpy(), rtol=1e-12, atol=1e-12)
        np.testing.assert_array_equal((-x).numpy(), (-tx).numpy())
        np.testing.assert_array_equal(x.to(strata.float16).numpy(), tx.to(torch.float16).numpy())
        for name in ("float32", "float64", "float16", "bfloat16"):
            self.assertEqual(repr(getattr(strata, name)), repr(getattr(torch, name)).replace("torch", "strata"))
            self.assertEqual(getattr(strata, name).itemsize, getattr(torch, name).itemsize)
        with self.assertRaises(RuntimeError):
            torch.relu(tx.requires_grad_()).requires_grad_(False)


if __name__ == "__main__":
    unittest.main()
