"""matmul with torch.matmul's shape rules (1-D, 2-D, batched with broadcast batch dims) and linear on N-D
input (Note [matmul's shape rules] in lib/op_shapes.h): values against numpy float64 on fresh random
inputs, transposed views in a batch, gradients (summed over broadcast batch dims), the refusals as the
exceptions torch raises, and, where torch is importable, agreement with torch on the same inputs.
Runs under ctest with PYTHONPATH pointing at build/python."""
import random
import unittest

import numpy as np

import strata

try:
    import torch
except ImportError:
    torch = None

# (self shape, other shape, result shape): torch.matmul's cases.
CASES = [((4,), (4,), ()), ((4,), (4, 5), (5,)), ((3, 4), (4,), (3,)), ((3, 4), (4, 5), (3, 5)),
         ((2, 3, 4), (2, 4, 5), (2, 3, 5)), ((2, 1, 3, 4), (5, 4, 6), (2, 5, 3, 6)), ((4,), (2, 4, 5), (2, 5)),
         ((2, 3, 4), (4,), (2, 3)), ((3, 4), (2, 4, 5), (2, 3, 5)), ((2, 3, 4), (4, 5), (2, 3, 5)),
         ((1, 3, 4), (2, 4, 5), (2, 3, 5)), ((2, 0, 4), (4, 3), (2, 0, 3)), ((2, 3, 0), (2, 0, 5), (2, 3, 5))]
TOLERANCE = {np.float64: 1e-12, np.float32: 1e-5}


class MatmulTest(unittest.TestCase):
    def setUp(self):
        # Fresh inputs on every run; every failure names the seed (in close()) to replay it.
        self.seed = random.SystemRandom().randrange(2**32)
        self.rng = np.random.default_rng(self.seed)

    def leaves(self, sa, sb):
        """Random float64 operands of shapes sa and sb, and strata leaves over copies of them that require grad."""
        a, b = self.rng.standard_normal(sa), self.rng.standard_normal(sb)
        x, y = strata.from_numpy(a.copy()), strata.from_numpy(b.copy())
        x.requires_grad = True
        y.requires_grad = True
        return a, b, x, y

    def close(self, got, want, dtype, what):
        what = f"{what} (seed {self.seed})"
        self.assertEqual(got.shape, want.shape, what)
        np.testing.assert_allclose(got, want, rtol=TOLERANCE[dtype], atol=TOLERANCE[dtype] * 10, err_msg=what)

    def test_values_and_shapes(self):
        for dtype in (np.float32, np.float64):
            for sa, sb, out in CASES:
                a = self.rng.standard_normal(sa).astype(dtype)
                b = self.rng.standard_normal(sb).astype(dtype)
                got = (strata.from_numpy(a.copy()) @ strata.from_numpy(b.copy())).numpy()
                want = np.matmul(a.astype(np.float64), b.astype(np.float64))
                self.assertEqual(got.shape, out)
                self.close(got, want.astype(dtype), dtype, f"{sa} @ {sb} {dtype.__name__}")
                got2 = strata.matmul(strata.from_numpy(a.copy()), strata.from_numpy(b.copy())).numpy()
                self.close(got2, want.astype(dtype), dtype, f"strata.matmul {sa} {sb}")

    def test_transposed_views_in_a_batch(self):
        for dtype in (np.float32, np.float64):
            a = self.rng.standard_normal((2, 4, 3)).astype(dtype)  # read as [2,3,4] through transpose(1, 2)
            b = self.rng.standard_normal((6, 4)).astype(dtype)     # read as [4,6] through t()
            got = (strata.transpose(strata.from_numpy(a.copy()), 1, 2) @ strata.t(strata.from_numpy(b.copy()))).numpy()
            want = np.matmul(np.swapaxes(a, 1, 2).astype(np.float64), b.T.astype(np.float64))
            self.close(got, want.astype(dtype), dtype, "transposed views")
            c = self.rng.standard_normal((5, 2, 4, 3)).astype(dtype)  # a batch transposed in its batch dims too
            cv = strata.permute(strata.from_numpy(c.copy()), [1, 0, 3, 2])  # [2,5,3,4]
            got = (cv @ strata.from_numpy(b.T.copy())).numpy()
            want = np.matmul(np.transpose(c, (1, 0, 3, 2)).astype(np.float64), b.T.astype(np.float64))
            self.close(got, want.astype(dtype), dtype, "permuted batch")

    def test_gradients(self):
        for sa, sb, _ in CASES:
            a, b, x, y = self.leaves(sa, sb)
            out = x @ y
            g = self.rng.standard_normal(out.shape)
            out.backward(strata.from_numpy(np.array(g)))
            # d/da sum(g * (a @ b)): through the broadcast batch, summed back to each operand's shape.
            a2 = a.reshape(1, -1) if a.ndim == 1 else a
            b2 = b.reshape(-1, 1) if b.ndim == 1 else b
            g2 = np.asarray(g).reshape(np.matmul(a2, b2).shape)
            ga = np.matmul(g2, np.swapaxes(b2, -1, -2))
            gb = np.matmul(np.swapaxes(a2, -1, -2), g2)

            def reduce(grad, shape2, shape):
                while grad.ndim > len(shape2):
                    grad = grad.sum(axis=0)
                for d, s in enumerate(shape2):
                    if s == 1 and grad.shape[d] != 1:
                        grad = grad.sum(axis=d, keepdims=True)
                return grad.reshape(shape)

            self.close(x.grad.numpy(), reduce(ga, a2.shape, sa), np.float64, f"d/dself {sa} @ {sb}")
            self.close(y.grad.numpy(), reduce(gb, b2.shape, sb), np.float64, f"d/dother {sa} @ {sb}")

    def test_linear_nd(self):
        for dtype in (np.float32, np.float64):
            for shape in ((5,), (3, 5), (2, 3, 5), (2, 2, 3, 5)):
                x = self.rng.standard_normal(shape).astype(dtype)
                w = self.rng.standard_normal((4, 5)).astype(dtype)
                b = self.rng.standard_normal((4,)).astype(dtype)
                got = strata.linear(strata.from_numpy(x.copy()), strata.from_numpy(w.copy()), strata.from_numpy(b.copy()))
                want = x.astype(np.float64) @ w.T.astype(np.float64) + b
                self.close(got.numpy(), want.astype(dtype), dtype, f"linear {shape}")
                nob = strata.linear(strata.from_numpy(x.copy()), strata.from_numpy(w.copy()))
                self.close(nob.numpy(), (x.astype(np.float64) @ w.T.astype(np.float64)).astype(dtype), dtype, "no bias")
        # a transposed view as N-D input, and gradients
        x = self.rng.standard_normal((2, 5, 3))
        w = self.rng.standard_normal((4, 5))
        b = self.rng.standard_normal((4,))
        xs = strata.from_numpy(x.copy())
        xs.requires_grad = True
        ws, bs = strata.from_numpy(w.copy()), strata.from_numpy(b.copy())
        ws.requires_grad = True
        bs.requires_grad = True
        y = strata.linear(strata.transpose(xs, 1, 2), ws, bs)
        xt = np.swapaxes(x, 1, 2)
        self.close(y.numpy(), xt @ w.T + b, np.float64, "linear on a transposed view")
        g = self.rng.standard_normal((2, 3, 4))
        y.backward(strata.from_numpy(g.copy()))
        self.close(xs.grad.numpy(), np.swapaxes(g @ w, 1, 2), np.float64, "linear d/dinput")
        self.close(ws.grad.numpy(), np.einsum("bro,bri->oi", g, xt), np.float64, "linear d/dweight")
        self.close(bs.grad.numpy(), g.sum(axis=(0, 1)), np.float64, "linear d/dbias")

    def test_refusals(self):
        def fails(sa, sb, words):
            a = strata.from_numpy(np.zeros(sa, np.float32))
            b = strata.from_numpy(np.zeros(sb, np.float32))
            with self.assertRaises(ValueError) as e:
                a @ b
            self.assertIn(words, str(e.exception))
            self.assertIsInstance(e.exception, strata.UsageError)
            if torch is not None:
                with self.assertRaises(RuntimeError) as t:
                    torch.zeros(sa) @ torch.zeros(sb)
                self.assertIn(words, str(t.exception))

        fails((3, 4), (5, 6), "mat1 and mat2 shapes cannot be multiplied (3x4 and 5x6)")
        fails((3,), (4,), "inconsistent tensor size")
        fails((2, 3, 4), (3, 5, 6), "must match the size of tensor b")
        with self.assertRaises(strata.UsageError) as e:
            strata.linear(strata.from_numpy(np.zeros((2, 3, 4), np.float32)),
                          strata.from_numpy(np.zeros((5, 3), np.float32)))
        self.assertIn("mat1 and mat2 shapes cannot be multiplied (6x4 and 3x5)", str(e.exception))

    @unittest.skipIf(torch is None, "torch is not importable")
    def test_torch_agreement(self):
        for sa, sb, _ in CASES:
            a, b, x, y = self.leaves(sa, sb)
            out = x @ y
            tx, ty = torch.from_numpy(a.copy()).requires_grad_(), torch.from_numpy(b.copy()).requires_grad_()
            tout = tx @ ty
            self.close(out.numpy(), tout.detach().numpy(), np.float64, f"torch {sa} @ {sb}")
            g = self.rng.standard_normal(tout.shape)
            out.backward(strata.from_numpy(np.array(g)))
            tout.backward(torch.from_numpy(np.array(g)))
            self.close(x.grad.numpy(), tx.grad.numpy(), np.float64, f"torch d/dself {sa} @ {sb}")
            self.close(y.grad.numpy(), ty.grad.numpy(), np.float64, f"torch d/dother {sa} @ {sb}")
        x = self.rng.standard_normal((2, 3, 5))
        w = self.rng.standard_normal((4, 5))
        got = strata.linear(strata.from_numpy(x.copy()), strata.from_numpy(w.copy())).numpy()
        want = torch.nn.functional.linear(torch.from_numpy(x), torch.from_numpy(w)).numpy()
        self.close(got, want, np.float64, "torch linear")


if __name__ == "__main__":
    unittest.main()
