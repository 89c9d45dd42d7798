"""tests/python: in-place ops through views autograd did not record (Note [Views and their base's history] in
lib/tensor.h), against torch on the same float64 values: w[0].add_(c) with w needing no grad (w's grad_fn
CopySlices, the view's AsStridedBackward, requires_grad of both, the gradients of c and of leaves upstream,
the version), a base that is not contiguous, a view made under no_grad (torch's error in both, nothing
written), an expanded view, detach. Skipped, saying so, where torch is not importable (ctest runs it with the
peer's Python, which has it). PYTHONPATH points at build/python."""
import random
import unittest

import numpy as np

import strata

try:
    import torch
except ImportError:  # Debian's python3 without the peer's environment (scripts/install-python-deps)
    torch = None


def name(grad_fn):
    """A grad_fn's name as strata spells it: torch's class name without its overload number."""
    if grad_fn is None or isinstance(grad_fn, str):
        return grad_fn
    return type(grad_fn).__name__.rstrip("0123456789")


def no_grad(lib):
    return strata.no_grad() if lib is strata else torch.no_grad()


@unittest.skipIf(torch is None, "PyTorch is not importable in this Python: these tests compare with torch")
class UnrecordedViewsAgainstTorch(unittest.TestCase):
    def setUp(self):
        self.seed = random.SystemRandom().randrange(2**32)
        self.rng = random.Random(self.seed)

    def values(self, *shape):
        """The same float64 values for both libraries, as tensors that need no grad."""
        s = strata.randn(*shape, dtype=strata.float64, seed=self.rng.randrange(2**63))
        return {strata: s, torch: torch.from_numpy(s.numpy_float64())}

    def leaves(self, *shape):
        pair = self.values(*shape)
        return {strata: pair[strata].requires_grad_(), torch: pair[torch].requires_grad_()}

    def same(self, strata_tensor, torch_tensor):
        np.testing.assert_allclose(strata_tensor.numpy_float64(), torch_tensor.detach().numpy(), rtol=1e-13,
                                   atol=1e-13, err_msg=f"seed {self.seed}")

    def state(self, *tensors):
        return [(name(t.grad_fn), t.requires_grad, t.is_leaf, t._version) for t in tensors]

    def test_a_view_of_a_tensor_that_needs_no_grad(self):
        w0, c, weights = self.values(3, 3), self.leaves(3), self.values(3, 3)
        states, losses = {}, {}
        for lib in (strata, torch):
            w = w0[lib] * 1
            early = w.t()
            v = w[0]
            before = self.state(w, v, early)
            v.add_(c[lib])
            states[lib] = before, self.state(w, v, early)
            losses[lib] = ((w * weights[lib]).sum() + (early * 2).sum(), w)
            losses[lib][0].backward()
        self.assertEqual(states[strata], states[torch])
        self.assertEqual(states[strata][1][0][0], "CopySlices")
        self.assertEqual(states[strata][1][1][:2], ("AsStridedBackward", True))
        self.same(losses[strata][1], losses[torch][1])
        self.same(c[strata].grad, c[torch].grad)

    def test_the_brief_case_gives_ones(self):
        w, c = strata.randn(3, 3), strata.randn(3, requires_grad=True)
        w[0].add_(c)
        self.assertEqual((w.grad_fn, w.requires_grad), ("CopySlices", True))
        w.sum().backward()
        np.testing.assert_array_equal(c.grad.numpy_float64(), np.ones(3))

    def test_leaves_upstream_and_a_view_of_a_view(self):
        w0, x, c, d, weights = self.values(3, 4), self.leaves(3, 4), self.leaves(2), self.leaves(4), self.values(3, 4)
        states = {}
        for lib in (strata, torch):
            w = w0[lib] * 1
            w[1:][:, 2].mul_(c[lib])  # a view of a view, neither recorded
            w.mul_(x[lib])  # w itself: MulBackward over CopySlices
            row = w[0]  # recorded now: w requires grad
            row.add_(d[lib], alpha=-0.5)
            states[lib] = self.state(w, row)
            (w * weights[lib]).sum().backward()
        self.assertEqual(states[strata], states[torch])
        for leaf in (x, c, d):
            self.same(leaf[strata].grad, leaf[torch].grad)

    def test_a_base_that_is_not_contiguous(self):
        w0, c, x, weights = self.values(4, 3), self.leaves(4), self.leaves(3, 4), self.values(3, 4)
        states = {}
        for lib in (strata, torch):
            base = (w0[lib] * 1).t().detach()  # strides (1, 3): a tensor of its own, not contiguous
            self.assertFalse(base.is_contiguous())
            column = base[:, 1]
            base[2].add_(c[lib], alpha=2.0)
            base.mul_(x[lib])
            base[:, 0][::2].relu_()
            states[lib] = self.state(base, column)
            (base * weights[lib]).sum().backward()
        self.assertEqual(states[strata], states[torch])
        self.same(c[strata].grad, c[torch].grad)
        self.same(x[strata].grad, x[torch].grad)

    def test_a_view_made_under_no_grad_is_refused_in_both(self):
        c = self.leaves(3)
        for base_requires_grad in (False, True):
            w0 = self.leaves(3, 3) if base_requires_grad else self.values(3, 3)
            for lib in (strata, torch):
                w = w0[lib] * 1
                with no_grad(lib):
                    v = w[1]
                with self.assertRaisesRegex(RuntimeError, r"^A view was created in no_grad mode and is being "
                                            r"modified inplace with grad mode enabled\. Given that this use case "
                                            "is ambiguous and error-prone, it is forbidden."):
                    v.add_(c[lib])
                self.assertEqual(w._version, 0)
                with no_grad(lib):
                    v.add_(c[lib])  # both inside: allowed, not recorded
                self.assertEqual((w._version, name(w.grad_fn)), (1, "MulBackward" if base_requires_grad else None))

    def test_requires_grad_follows_the_base_and_the_node_the_write(self):
        states = {}
        for lib in (strata, torch):
            w = self.values(3, 3)[lib] * 1
            v = w[0]
            before = self.state(v)
            w.requires_grad_(True)  # no write: v requires grad, with no node (torch's view rule)
            middle = self.state(v)
            with no_grad(lib):
                w.mul_(2.0)  # a write: v's node over w's history
            states[lib] = before, middle, self.state(v)
            (v * 3).sum().backward()
            states[lib] += (w.grad.numpy() if lib is torch else w.grad.numpy_float64()).tolist(),
        self.assertEqual(states[strata], states[torch])
        self.assertEqual(states[strata][1][0][:2], (None, True))
        self.assertEqual(states[strata][2][0][:2], ("AsStridedBackward", True))

    def test_an_expanded_view_is_refused_in_both(self):
        w0, c = self.values(1, 4), self.leaves(3, 4)
        for lib in (strata, torch):
            w = w0[lib] * 1
            with self.assertRaisesRegex(RuntimeError, "^unsupported operation: more than one element of the "
                                        "written-to tensor refers to a single memory location"):
                w.expand(3, 4).mul_(c[lib])
            self.assertEqual((w._version, w.requires_grad), (0, False))

    def test_detach_is_a_tensor_of_its_own(self):
        x, c = self.leaves(2, 3), self.leaves(2, 3)
        states = {}
        for lib in (strata, torch):
            d = x[lib].detach()
            d.add_(c[lib])
            states[lib] = self.state(x[lib], d), d._is_view()
        self.assertEqual(states[strata], states[torch])

    def test_augmented_assignment_on_an_index(self):
        # w[1] /= c runs as v = w[1]; v /= c (div_ through the view); w[1] = v: the last step stores the same
        # view back (torch's copy_ of it onto itself), so every in-place operator through an index agrees.
        w0, c = self.values(3, 3), self.leaves(3)
        results = {}
        for lib in (strata, torch):
            w = w0[lib] * 1
            c3 = c[lib] * 3
            w[0] -= c3
            w[1] /= c3
            w[2] += 1.5
            w[:, 1] *= c3[0]
            (w * w).sum().backward()
            results[lib] = w, name(w.grad_fn), w._version
        self.same(results[strata][0], results[torch][0])
        self.same(c[strata].grad, c[torch].grad)
        self.assertEqual(results[strata][1:], ("CopySlices", 4))
        self.assertEqual(results[torch][1], "CopySlices")

    def test_assigning_other_values_to_an_index_is_refused(self):
        w = strata.randn(3, 3)
        for value in (5.0, strata.randn(3), w[0]):
            with self.subTest(value=value), self.assertRaisesRegex(TypeError, "copy_ / fill_"):
                w[1] = value


if __name__ == "__main__":
    unittest.main()
