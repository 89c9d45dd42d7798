"""tests/python: the in-place methods x.relu_(), x.add_(y, alpha=...), x.mul_(y) and x._version (docs/python.md,
Note [In-place operators]): values against numpy float64 on fresh random inputs, self returned, the version
shared through views, the backward that refuses a saved tensor changed in place, the leaf refusal, in-place
writes through views (CopySlices: gradients and grad_fn names against torch), and, where torch is
importable, the same sequences raising torch's RuntimeError too. Runs under ctest with
PYTHONPATH pointing at build/python."""
import random
import unittest

import numpy as np

import strata

try:
    import torch
except ImportError:  # Debian's python3 without the peer's environment (scripts/install-python-deps)
    torch = None

TOLERANCE = {"float64": 1e-12, "float32": 1e-6}


class InPlaceTest(unittest.TestCase):
    def setUp(self):
        self.seed = random.SystemRandom().randrange(2**32)
        self.rng = random.Random(self.seed)

    def randn(self, *shape, dtype="float32", requires_grad=False):
        return strata.randn(*shape, dtype=getattr(strata, dtype), seed=self.rng.randrange(2**63),
                            requires_grad=requires_grad)

    def close(self, t, ref, dtype):
        err = float(np.max(np.abs(t.numpy_float64() - ref) / np.maximum(np.abs(ref), 1.0)))
        self.assertLessEqual(err, TOLERANCE[dtype], f"{dtype}: error {err:.3g} (seed {self.seed})")

    def test_values_self_and_version(self):
        for dtype in TOLERANCE:
            x, y, row = self.randn(4, 6, dtype=dtype), self.randn(4, 6, dtype=dtype), self.randn(6, dtype=dtype)
            ref = x.numpy_float64()
            self.assertEqual(x._version, 0)
            self.assertIs(x.relu_(), x)
            ref = np.maximum(ref, 0.0)
            self.close(x, ref, dtype)
            self.assertIs(x.add_(y, alpha=-0.5), x)
            ref = ref - 0.5 * y.numpy_float64()
            self.close(x, ref, dtype)
            self.assertIs(x.mul_(row), x)  # row broadcasts over x's rows
            ref = ref * row.numpy_float64()
            self.close(x, ref, dtype)
            self.assertIs(x.mul_(-2.5), x)  # mul_.Scalar
            ref = ref * -2.5
            self.close(x, ref, dtype)
            self.assertEqual(x._version, 4)
            self.assertEqual(y._version, 0)

    def test_views_share_the_version_and_the_write(self):
        base = self.randn(3, 5, dtype="float64")
        before = base.numpy_float64()
        column, t = base[:, 1], base.t()
        other = self.randn(3, dtype="float64")
        column.add_(other, alpha=3.0)
        self.assertEqual((base._version, column._version, t._version), (1, 1, 1))
        expected = before.copy()
        expected[:, 1] += 3.0 * other.numpy_float64()
        np.testing.assert_allclose(base.numpy_float64(), expected, rtol=1e-12)
        t.relu_()
        self.assertEqual(base._version, 2)
        self.assertGreaterEqual(base.numpy_float64().min(), 0.0)
        self.assertEqual(base.contiguous()._version, 2)  # contiguous already: the same tensor
        self.assertEqual(base.t().contiguous()._version, 0)  # a copy: its own storage and count

    def test_backward_refuses_a_saved_tensor_modified_in_place(self):
        x = self.randn(3, 4, requires_grad=True)
        y = strata.relu(x)
        with strata.no_grad():
            y.mul_(self.randn(3, 4))
        with self.assertRaises(strata.UsageError) as caught:
            strata.sum(y).backward()
        message = str(caught.exception)
        self.assertIn("one of the variables needed for gradient computation has been modified by an inplace "
                      "operation: [f32 [3x4] cpu], which is output 0 of ReluBackward, is at version 1; expected "
                      "version 0 instead.", message)
        self.assertIsInstance(caught.exception, RuntimeError)  # as torch's
        self.assertIsNone(x.grad)

    def test_leaf_refusal_and_non_leaf_rebase(self):
        x = self.randn(2, 3, requires_grad=True)
        with self.assertRaisesRegex(strata.UsageError, "a leaf Variable that requires grad is being used in an "
                                    "in-place operation."):
            x.relu_()
        self.assertEqual(x._version, 0)
        y = strata.relu(x)
        self.assertIs(y.add_(self.randn(2, 3)), y)
        self.assertEqual(y.grad_fn, "AddBackward")  # y's history rebased onto the in-place op's node
        with strata.no_grad():  # an optimizer's step
            x.add_(self.randn(2, 3), alpha=-0.1)
        self.assertEqual(x._version, 1)
        self.assertTrue(x.is_leaf)

    def test_view_refusals_name_the_view(self):
        x = self.randn(3, 4, requires_grad=True)
        with self.assertRaisesRegex(strata.UsageError, r"^a view of a leaf Variable that requires grad is being used "
                                    r"in an in-place operation\. \(relu_ on \[f32 \[4\] cpu\]"):
            x[1].relu_()
        z = self.randn(3, 4)  # needs no gradient: a view of it made under no_grad is refused, as torch's
        with strata.no_grad():
            row = z[0]
        with self.assertRaisesRegex(strata.UsageError, r"^A view was created in no_grad mode and is being modified "
                                    r"inplace with grad mode enabled\."):
            row.add_(self.randn(4, requires_grad=True))
        y = x * 2
        with self.assertRaisesRegex(strata.UsageError, "^unsupported operation: more than one element of the "
                                    "written-to tensor refers to a single memory location"):
            y[:1].expand(3, 4).mul_(2.0)
        self.assertEqual((x._version, y._version, z._version), (0, 0, 0))
        self.assertFalse(z.requires_grad)

    def test_rebase_seen_through_every_python_handle(self):
        z = self.randn(5, dtype="float64")
        same = z.contiguous()  # contiguous already: another handle of the same tensor
        w = self.randn(5, dtype="float64", requires_grad=True)
        z.mul_(w)
        self.assertTrue(same.requires_grad)
        self.assertEqual(same.grad_fn, "MulBackward")
        self.assertFalse(same.is_leaf)

    @unittest.skipIf(torch is None, "PyTorch is not importable in this Python")
    def test_torch_raises_on_the_same_sequences(self):
        x = torch.randn(3, 4, requires_grad=True)
        y = torch.relu(x)
        with torch.no_grad():
            y.mul_(torch.randn(3, 4))
        with self.assertRaisesRegex(RuntimeError, "modified by an inplace operation.*output 0 of Relu(Backward0)?, "
                                    "is at version 1; expected version 0 instead"):
            y.sum().backward()
        with self.assertRaisesRegex(RuntimeError, "a leaf Variable that requires grad is being used in an "
                                    "in-place operation."):
            torch.randn(2, 3, requires_grad=True).relu_()
        a = torch.randn(3, 5, dtype=torch.float64)
        a[:, 1].add_(torch.randn(3, dtype=torch.float64), alpha=3.0)
        self.assertEqual(a._version, 1)  # the count strata's test_views expects too



@unittest.skipIf(torch is None, "PyTorch is not importable in this Python")
class InPlaceGradientsAgainstTorch(unittest.TestCase):
    """The same in-place sequences through strata and torch on the same float64 values: the same grad_fn
    chain and the same gradients (float64 throughout, so they agree to rounding)."""

    def setUp(self):
        self.seed = random.SystemRandom().randrange(2**32)
        self.rng = random.Random(self.seed)

    def pair(self, *shape, requires_grad=True):
        s = strata.randn(*shape, dtype=strata.float64, seed=self.rng.randrange(2**63), requires_grad=requires_grad)
        t = torch.from_numpy(s.numpy_float64()).requires_grad_(requires_grad)
        return s, t

    def same(self, strata_tensor, torch_tensor):
        np.testing.assert_allclose(strata_tensor.numpy_float64(), torch_tensor.detach().numpy(), rtol=1e-13,
                                   atol=1e-13, err_msg=f"seed {self.seed}")

    def run_both(self, program, *shapes):
        """program(lib, *inputs) -> y, run once with strata's inputs and once with torch's; both y.sum()
        backward; the inputs' gradients compared."""
        inputs = [self.pair(*shape) for shape in shapes]
        ys = program(strata, *[s for s, _ in inputs]), program(torch, *[t for _, t in inputs])
        self.same(ys[0], ys[1])
        ys[0].sum().backward()
        ys[1].sum().backward()
        for s, t in inputs:
            if t.grad is None:
                self.assertIsNone(s.grad)
            else:
                self.same(s.grad, t.grad)
        return ys

    def test_write_into_the_base_after_views_of_it(self):
        # b[2].add_(b[0]) raised "modified by an inplace operation" (b[0]'s SelectBackward saved b), where
        # torch computes the gradient: a view's backward reads only its input's sizes. Variants through
        # narrow, a stepped slice, unsqueeze + expand and reshape, with a multiplier so that the view's own
        # gradient is not all ones.
        programs = {
            "select": lambda lib, L: (lambda b: (b[2].add_(b[0]), b * 3.0)[1])(L * 1),
            "narrow": lambda lib, L: (lambda b: (b.narrow(0, 1, 2).add_(b.narrow(0, 0, 1)), b * b)[1])(L * 1),
            "stepped slice": lambda lib, L: (lambda b: (b[1:3].add_(b[::3]), b * 2.0)[1])(L * 1),
            "unsqueeze + expand": lambda lib, L: (lambda b: (b[1:3].sub_(b[0].unsqueeze(0).expand(2, 5)),
                                                             b * b)[1])(L * 1),
            "reshape": lambda lib, L: (lambda b: (b[3].add_(b.reshape(20)[5:10]), b * 1.5)[1])(L * 1),
        }
        for name, program in programs.items():
            with self.subTest(name, seed=self.seed):
                self.run_both(program, (4, 5))

    def test_relu_after_mul(self):
        def program(lib, x):
            y = x * 2
            y.relu_()
            return y
        ys = self.run_both(program, (4, 6))
        self.assertEqual(ys[0].grad_fn, "ReluBackward")
        self.assertEqual(type(ys[1].grad_fn).__name__, "ReluBackward0")

    def test_add_with_alpha_broadcast(self):
        def program(lib, x, w):
            y = x * 1.5
            y.add_(w, alpha=-0.75)
            return y
        self.run_both(program, (3, 5), (5,))

    def test_mul_by_a_tensor_that_requires_grad(self):
        def program(lib, x, w):
            y = x * 2
            y.mul_(w)
            return y
        ys = self.run_both(program, (2, 7), (2, 7))
        self.assertEqual(ys[0].grad_fn, "MulBackward")

    def test_chain(self):
        def program(lib, x, w, b):
            y = x * 2
            y.mul_(w)
            y.add_(b, alpha=0.5)
            y.mul_(-3.0)
            y.add_(x)
            y.relu_()  # last: a write after it would change the result ReluBackward saved
            return y
        self.run_both(program, (3, 4), (3, 4), (4,))

    def test_self_without_grad_takes_the_operands_history(self):
        def program(lib, z, w):
            with (strata.no_grad() if lib is strata else torch.no_grad()):
                z = z * 1.0  # a tensor that needs no gradient
            z.mul_(w)
            return z
        self.run_both(program, (6,), (6,))

    # ---- In-place ops through views (Note [CopySlices] in layers/ops/copy_slices.h) --------------------------
    def weights(self, *shape):
        """Fixed float64 weights, the same values for both libraries, so each element's gradient differs."""
        s, t = self.pair(*shape, requires_grad=False)
        return {strata: s, torch: t}

    @staticmethod
    def name(grad_fn):
        """A grad_fn's name as strata spells it: torch's class name without its overload number."""
        if grad_fn is None or isinstance(grad_fn, str):
            return grad_fn
        return type(grad_fn).__name__.rstrip("0123456789")

    def test_relu_through_a_slice_and_the_grad_fn_names(self):
        w = self.weights(4, 3)
        names = {}

        def program(lib, x):
            b = x * 1
            v = b[1:3]
            before = self.name(v.grad_fn)
            v.relu_()
            names[lib] = (before, self.name(v.grad_fn), self.name(b.grad_fn))
            return b * w[lib]
        self.run_both(program, (4, 3))
        self.assertEqual(names[strata], ("SliceBackward", "AsStridedBackward", "CopySlices"))
        self.assertEqual(names[strata], names[torch])

    def test_add_through_a_transpose_with_an_operand_that_requires_grad(self):
        w = self.weights(4, 3)

        def program(lib, x, c):
            b = x * 2
            b.t().add_(c, alpha=-0.75)
            return b * w[lib]
        self.run_both(program, (4, 3), (3, 4))

    def test_mul_through_a_stepped_slice(self):
        w = self.weights(3, 5)
        for other_shape in ((3, 3), (3,)):  # (3,): broadcast over the rows
            def program(lib, x, c):
                b = x * 1
                b[:, ::2].mul_(c)
                return b * w[lib]
            self.run_both(program, (3, 5), other_shape)

    def test_a_chain_of_views_written_twice(self):
        w = self.weights(3, 4)

        def program(lib, x):
            b = x * 1
            v = b[1][::2]
            v.mul_(-3.0)
            v.relu_()
            return b * w[lib]
        self.run_both(program, (3, 4))

    def test_a_view_taken_before_the_write_reads_the_new_history(self):
        names = {}

        def program(lib, x):
            b = x * 2
            early = b.t()  # taken before b was written through another view
            b[0].mul_(5.0)
            names[lib] = self.name(early.grad_fn)
            return early * 1
        self.run_both(program, (3, 4))
        self.assertEqual(names[strata], "AsStridedBackward")
        self.assertEqual(names[strata], names[torch])

    def test_nan_and_inf_in_values_and_gradients(self):
        values = np.array([[np.nan, -1.0, 2.0], [np.inf, -np.inf, -0.5], [0.25, np.nan, -np.inf]])
        weights = np.array([[1.0, np.inf, -2.0], [np.inf, 3.0, -np.inf], [0.5, 1.0, np.inf]])
        xs = strata.from_numpy(values.copy()).requires_grad_(), torch.from_numpy(values.copy()).requires_grad_()
        outs = []
        for lib, x in zip((strata, torch), xs):
            b = x * 1
            b[1:].relu_()
            w = strata.from_numpy(weights.copy()) if lib is strata else torch.from_numpy(weights.copy())
            y = b * w
            y.sum().backward()
            outs.append(y)
        self.same(outs[0], outs[1])
        self.same(xs[0].grad, xs[1].grad)

    def test_a_saved_tensor_written_through_a_view_raises_in_both(self):
        # The node named differs: torch names b's grad_fn now (CopySlices, since its saved input keeps
        # b's identity), strata the node that made b when it was saved (its saved copy keeps no identity:
        # Note [Autograd identity]).
        for x, maker in zip(self.pair(3, 4), ("MulBackward", "torch::autograd::CopySlices")):
            b = x * 1
            z = b * b  # MulBackward saves b
            b[0].mul_(2.0)
            with self.assertRaisesRegex(RuntimeError, f"output 0 of {maker}, is at version 1; expected version 0 "
                                        "instead"):
                z.sum().backward()

    def test_a_view_of_a_leaf_is_refused_in_both(self):
        for x in self.pair(3, 4):
            with self.assertRaisesRegex(RuntimeError, "^a view of a leaf Variable that requires grad is being used "
                                        r"in an in-place operation\."):
                x[1:].mul_(2.0)

    def test_saved_tensor_modified_afterwards_raises_in_both(self):
        for x in self.pair(5):
            y = x * 2
            y.relu_()
            y.mul_(3.0)
            with self.assertRaisesRegex(RuntimeError, "output 0 of Relu.*is at version 2; expected version 1 instead"):
                y.sum().backward()


if __name__ == "__main__":
    unittest.main()
