"""tests/python: Tensor.backward() and Tensor.grad (layers/autograd through the Python package), every
differentiable op's gradients against numpy float64 on fresh random inputs, and the refusals as Python
exceptions. Runs under ctest with PYTHONPATH pointing at build/python."""
import math
import os
import random
import subprocess
import sys
import unittest

import numpy as np

import strata

TOLERANCE = {"float64": 1e-12, "float32": 1e-5}
_erf = np.vectorize(math.erf)


def relative_error(out, ref):
    return float(np.linalg.norm(out - ref) / np.linalg.norm(np.maximum(np.abs(ref), 0.25)))


class BackwardTest(unittest.TestCase):
    def setUp(self):
        self.seed = random.SystemRandom().randrange(2**32)
        self.rng = random.Random(self.seed)

    def leaf(self, *shape, dtype):
        return strata.randn(*shape, dtype=dtype, seed=self.rng.randrange(2**63), requires_grad=True)

    def check(self, t, ref, dtype, what):
        self.assertIsNotNone(t.grad, what)
        self.assertEqual(t.grad.shape, t.shape)
        err = relative_error(t.grad.numpy_float64(), ref)
        self.assertLessEqual(err, TOLERANCE[dtype], f"{what} {dtype}: relative error {err:.3g} (seed {self.seed})")

    def test_linear_relu_chain_against_numpy(self):
        for dtype in TOLERANCE:
            x, w, b = self.leaf(7, 5, dtype=dtype), self.leaf(3, 5, dtype=dtype), self.leaf(3, dtype=dtype)
            walk = strata.sum(strata.relu(strata.linear(x, w, b))).backward()
            self.assertEqual(walk, "SumBackward > ReluBackward > AddmmBackward > AccumulateGrad > AccumulateGrad"
                                   " > AccumulateGrad")
            xv, wv, bv = x.numpy_float64(), w.numpy_float64(), b.numpy_float64()
            mask = (xv @ wv.T + bv > 0).astype(np.float64)
            self.check(x, mask @ wv, dtype, "x")
            self.check(w, mask.T @ xv, dtype, "w")
            self.check(b, mask.sum(0), dtype, "b")

    def test_matmul_gelu_add_with_an_upstream_gradient(self):
        for dtype in TOLERANCE:
            a, b, c = self.leaf(4, 6, dtype=dtype), self.leaf(6, 3, dtype=dtype), self.leaf(4, 3, dtype=dtype)
            y = strata.add(strata.gelu(strata.matmul(a, b)), c, alpha=-2.0)
            g = strata.randn(4, 3, dtype=dtype, seed=self.rng.randrange(2**63))
            y.backward(g)
            av, bv, gv = a.numpy_float64(), b.numpy_float64(), g.numpy_float64()
            z = av @ bv
            dz = gv * (0.5 * (1 + _erf(z / math.sqrt(2))) + z * np.exp(-0.5 * z * z) / math.sqrt(2 * math.pi))
            self.check(a, dz @ bv.T, dtype, "a")
            self.check(b, av.T @ dz, dtype, "b")
            self.check(c, -2.0 * gv, dtype, "c")

    def test_conv2d_against_numpy(self):
        x, w, b = self.leaf(2, 3, 6, 6, dtype="float64"), self.leaf(4, 3, 3, 3, dtype="float64"), self.leaf(4, dtype="float64")
        strata.sum(strata.conv2d(x, w, b, stride=2, padding=1)).backward()
        xv, wv = x.numpy_float64(), w.numpy_float64()
        xp = np.pad(xv, ((0, 0), (0, 0), (1, 1), (1, 1)))
        dxp, dw = np.zeros_like(xp), np.zeros_like(wv)
        for i in range(3):
            for j in range(3):
                dxp[:, :, 2 * i:2 * i + 3, 2 * j:2 * j + 3] += wv.sum(0)[None]
                dw += xp[:, :, 2 * i:2 * i + 3, 2 * j:2 * j + 3].sum(0)[None]
        self.check(x, dxp[:, :, 1:7, 1:7], "float64", "x")
        self.check(w, dw, "float64", "w")
        self.check(b, np.full(4, 2 * 3 * 3.0), "float64", "b")

    def test_grads_accumulate_and_a_second_pass_is_refused(self):
        x = self.leaf(5, dtype="float64")
        self.assertIsNone(x.grad)
        self.assertTrue(x.is_leaf)
        y = strata.sum(strata.relu(x))
        self.assertFalse(y.is_leaf)
        y.backward(retain_graph=True)
        y.backward()
        mask = (x.numpy_float64() > 0).astype(np.float64)
        self.check(x, 2 * mask, "float64", "x")
        with self.assertRaises(strata.UsageError) as cm:
            y.backward()
        self.assertIn("backward through the graph a second time", str(cm.exception))
        x._zero_grad()
        self.assertIsNone(x.grad)

    def test_bad_input_raises(self):
        plain = strata.randn(3, seed=1)
        with self.assertRaises(strata.UsageError) as cm:
            plain.backward()
        self.assertIn("does not require grad", str(cm.exception))
        y = strata.relu(strata.randn(3, seed=2, requires_grad=True))
        with self.assertRaises(strata.UsageError) as cm:
            y.backward()
        self.assertIn("only for scalar outputs", str(cm.exception))
        with self.assertRaises(strata.UsageError):
            y.backward(strata.randn(4, seed=3))
        with self.assertRaises(TypeError):
            y.backward("ones")


class RequiresGradFlagTest(unittest.TestCase):
    def test_only_a_leafs_flag_changes_as_torch(self):
        # torch raises RuntimeError "you can only change requires_grad flags of leaf variables." for a
        # computed tensor, a view of one that requires grad included, whichever value is set; the
        # flag was accepted and dropped silently before.
        x = strata.randn(4, 3, seed=5, requires_grad=True)
        for what, make in [("mul", lambda: x * 2.0), ("view", lambda: x[1]), ("transpose", lambda: x.t()),
                           ("view of a view", lambda: x[1:3].unsqueeze(0))]:
            for value in (False, True):
                y = make()
                with self.subTest(what, value=value), self.assertRaisesRegex(
                        RuntimeError, "you can only change requires_grad flags of leaf variables"):
                    y.requires_grad = value
                self.assertTrue(y.requires_grad)
                self.assertIsNotNone(y.grad_fn)
        # A leaf, and a view of a tensor that needs no grad (a leaf too), take either value.
        leaf = strata.randn(3, seed=6)
        leaf.requires_grad = True
        self.assertTrue(leaf.requires_grad)
        leaf.requires_grad = False
        self.assertFalse(leaf.requires_grad)
        v = strata.randn(3, 2, seed=7)[0]
        v.requires_grad = True
        self.assertTrue(v.requires_grad and v.is_leaf)


class AddBackwardTest(unittest.TestCase):
    def test_alpha_scales_the_gradient_without_cancelling(self):
        # torch: b.grad == alpha; strata gave exactly 0 for 1e-8 (grad + (alpha - 1) * grad in f32).
        for dtype in ("float32", "float64"):
            for alpha in (1e-8, 1e-3, -2.5):
                a = strata.randn(5, dtype=dtype, seed=1, requires_grad=True)
                b = strata.randn(5, dtype=dtype, seed=2, requires_grad=True)
                walk = strata.sum(strata.add(a, b, alpha=alpha)).backward()
                self.assertEqual(walk, "SumBackward > AddBackward > AccumulateGrad > AccumulateGrad")
                expected = np.full(5, np.dtype(dtype).type(alpha))
                np.testing.assert_array_equal(b.grad.numpy(), expected, f"{dtype} alpha={alpha}")
                np.testing.assert_array_equal(a.grad.numpy(), np.ones(5, dtype))


class GraphLifetimeTest(unittest.TestCase):
    def test_a_long_chain_frees_at_exit_without_crashing(self):
        # 250,000 relus used to segfault the interpreter when the graph was freed (one nested destructor
        # per node); freed iteratively now (Note [Freeing a long graph] in layers/dispatch/autograd.h).
        # A child interpreter, so that a crash is an exit status here and not the end of this test run.
        code = ("import strata\n"
                "z = strata.randn(4, requires_grad=True)\n"
                "h = z\n"
                "for _ in range(300000):\n"
                "    h = strata.relu(h)\n"
                "print(h.grad_fn)\n")
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                             env=dict(os.environ))
        self.assertEqual(run.returncode, 0, run.stderr[-2000:])
        self.assertEqual(run.stdout.strip(), "ReluBackward")


if __name__ == "__main__":
    unittest.main()
