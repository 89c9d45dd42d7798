"""tests/python: conv2d with torch.nn.functional.conv2d's arguments (stride, padding and dilation as an int or
an (H, W) pair, groups): values and gradients against a float64 numpy reference on fresh random inputs, the
refusals in torch's words, an empty batch, and, where the peer's environment has PyTorch (the ctest entry
runs under it then), values, gradients and error messages against torch on the same inputs. Runs under
ctest with PYTHONPATH pointing at build/python."""
import inspect
import random
import unittest

import numpy as np

import strata

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # Debian's python3 without the peer's environment (scripts/install-python-deps)
    torch = None

# (input shape, weight shape, keyword arguments): every option alone, then together.
CASES = [
    ((2, 3, 9, 7), (4, 3, 3, 3), dict(stride=(2, 1), padding=(1, 0))),
    ((1, 2, 10, 9), (3, 2, 3, 2), dict(padding=(2, 1), dilation=(2, 3))),
    ((2, 4, 8, 8), (6, 2, 3, 3), dict(padding=1, groups=2)),
    ((1, 4, 9, 11), (4, 1, 3, 3), dict(stride=(2, 3), padding=2, dilation=2, groups=4)),  # depthwise
    ((2, 6, 7, 7), (9, 2, 2, 3), dict(stride=(3, 2), padding=(0, 1), dilation=(3, 1), groups=3)),
    ((1, 4, 8, 8), (4, 2, 3, 3), dict(stride=(2, 1), padding=(1, 0), dilation=2, groups=2)),  # the call
    ((2, 2, 5, 6), (2, 2, 1, 1), dict(stride=[2], padding=[0], dilation=[1])),  # lists of one, as torch takes
]


def reference(x, w, b, stride=1, padding=0, dilation=1, groups=1):
    """conv2d in float64 numpy, straight from the definition (a different computation from strata's)."""
    pair = lambda v: (v, v) if isinstance(v, int) else (v[0], v[-1])  # noqa: E731
    (sh, sw), (ph, pw), (dh, dw) = pair(stride), pair(padding), pair(dilation)
    n, c, h, wd = x.shape
    k, cg, r, s = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    oh, ow = (h + 2 * ph - dh * (r - 1) - 1) // sh + 1, (wd + 2 * pw - dw * (s - 1) - 1) // sw + 1
    out = np.zeros((n, k, oh, ow))
    for o in range(k):
        group = o // (k // groups)
        for y in range(oh):
            for z in range(ow):
                rows, cols = y * sh + dh * np.arange(r), z * sw + dw * np.arange(s)
                window = xp[:, group * cg:(group + 1) * cg][:, :, rows][:, :, :, cols]
                out[:, o, y, z] = np.einsum("ncrs,crs->n", window, w[o])
    return out + (b[None, :, None, None] if b is not None else 0)


class ConvTest(unittest.TestCase):
    def setUp(self):
        self.seed = random.SystemRandom().randrange(2**32)
        self.rng = np.random.default_rng(self.seed)

    def tensors(self, *shapes, dtype=np.float64):
        return [self.rng.standard_normal(s).astype(dtype) for s in shapes]

    def test_values_and_gradients_against_numpy(self):
        for xs, ws, kwargs in CASES:
            with self.subTest(input=xs, weight=ws, **{k: str(v) for k, v in kwargs.items()}, seed=self.seed):
                x, w, b = self.tensors(xs, ws, (ws[0],))
                sx, sw, sb = (strata.from_numpy(a.copy(), requires_grad=True) for a in (x, w, b))
                out = strata.conv2d(sx, sw, sb, **kwargs)
                want = reference(x, w, b, **kwargs)
                self.assertEqual(out.shape, want.shape)
                np.testing.assert_allclose(out.numpy(), want, rtol=1e-12, atol=1e-12)
                # Gradients of sum(out * g) by central differences of the reference, on a few elements each.
                (g,) = self.tensors(want.shape)
                out.backward(strata.from_numpy(g.copy()))
                for got, array in ((sx.grad, x), (sw.grad, w), (sb.grad, b)):
                    for index in list(np.ndindex(array.shape))[::max(1, array.size // 7)]:
                        saved = array[index]
                        array[index] = saved + 1e-6
                        up = np.sum(reference(x, w, b, **kwargs) * g)
                        array[index] = saved - 1e-6
                        down = np.sum(reference(x, w, b, **kwargs) * g)
                        array[index] = saved
                        self.assertAlmostEqual(got.numpy()[index], (up - down) / 2e-6, delta=1e-5 * max(1, abs(up)))

    def test_positional_and_keyword_arguments_as_torch_takes_them(self):
        x, w = (strata.randn(*s, seed=i) for i, s in enumerate([(1, 4, 8, 8), (4, 2, 3, 3)]))
        by_keyword = strata.conv2d(x, w, None, stride=(2, 1), padding=(1, 0), dilation=2, groups=2)
        by_position = strata.conv2d(x, w, None, (2, 1), (1, 0), 2, 2)
        self.assertEqual(by_keyword.shape, (1, 4, 3, 4))
        np.testing.assert_array_equal(by_keyword.numpy(), by_position.numpy())
        np.testing.assert_array_equal(strata.conv2d(x, w, stride=2, groups=2).numpy(),
                                      strata.conv2d(x, w, stride=(2, 2), groups=2).numpy())
        # The signature's defaults as torch.nn.functional.conv2d shows them: one int for both dims.
        defaults = {name: p.default for name, p in inspect.signature(strata.conv2d).parameters.items()
                    if p.default is not inspect.Parameter.empty}
        self.assertEqual(defaults, {"bias": None, "stride": 1, "padding": 0, "dilation": 1, "groups": 1})
        np.testing.assert_array_equal(strata.conv2d(x, w, None, 1, 0, 1, 2).numpy(), strata.conv2d(x, w, groups=2).numpy())

    def test_an_empty_batch_gives_empty_outputs_and_zero_gradients(self):
        x = strata.zeros(0, 4, 6, 6, requires_grad=True)
        w = strata.randn(6, 2, 3, 3, seed=1, requires_grad=True)
        b = strata.randn(6, seed=2, requires_grad=True)
        out = strata.conv2d(x, w, b, padding=1, dilation=2, groups=2)
        self.assertEqual(out.shape, (0, 6, 4, 4))
        strata.sum(out).backward()
        self.assertEqual(x.grad.shape, (0, 4, 6, 6))
        np.testing.assert_array_equal(w.grad.numpy(), np.zeros((6, 2, 3, 3)))  # zeros, not old memory
        np.testing.assert_array_equal(b.grad.numpy(), np.zeros(6))

    def test_bad_arguments_are_refused_in_torchs_words(self):
        x = strata.randn(1, 5, 8, 8, seed=1)
        cases = [
            (lambda: strata.conv2d(x, strata.randn(4, 3, 3, 3), groups=2),
             "Given groups=2, weight of size [4, 3, 3, 3], expected input[1, 5, 8, 8] to have 6 channels, but got "
             "5 channels instead"),
            (lambda: strata.conv2d(strata.randn(1, 6, 8, 8), strata.randn(3, 3, 3, 3), groups=2),
             "Given groups=2, expected weight to be divisible by 2 at dimension 0, but got weight of size "
             "[3, 3, 3, 3] instead"),
            (lambda: strata.conv2d(x, strata.randn(4, 5, 3, 3), dilation=-1), "dilation should be greater than zero"),
            (lambda: strata.conv2d(x, strata.randn(4, 5, 3, 3), dilation=(1, 0)), "dilation should be greater than zero"),
            (lambda: strata.conv2d(x, strata.randn(4, 5, 3, 3), stride=0), "non-positive stride is not supported"),
            (lambda: strata.conv2d(x, strata.randn(4, 5, 3, 3), stride=(2, 0)), "non-positive stride is not supported"),
            (lambda: strata.conv2d(x, strata.randn(4, 5, 3, 3), padding=(0, -1)), "negative padding is not supported"),
            (lambda: strata.conv2d(x, strata.randn(4, 5, 3, 3), groups=0), "non-positive groups is not supported"),
            (lambda: strata.conv2d(x, strata.randn(4, 5, 3, 3), stride=(1, 2, 3)),
             "expected stride to be a single integer value or a list of 2 values to match the convolution "
             "dimensions, but got stride=[1, 2, 3]"),
            (lambda: strata.conv2d(strata.randn(1, 5, 5, 5), strata.randn(4, 5, 3, 3), dilation=3),
             "Calculated padded input size per channel: (5 x 5). Kernel size: (7 x 7). Kernel size can't be greater "
             "than actual input size"),
        ]
        for call, message in cases:
            with self.subTest(message=message):
                with self.assertRaises(ValueError) as cm:
                    call()
                self.assertIn(message, str(cm.exception))
        with self.assertRaises(TypeError) as cm:
            strata.conv2d(x, strata.randn(4, 5, 3, 3), stride=(1, 2.0))
        self.assertIn("must be a tuple of ints, but found element of type float", str(cm.exception))


@unittest.skipIf(torch is None, "PyTorch is not in this Python (the peer's environment, scripts/install-python-deps, has it)")
class AgainstTorchTest(unittest.TestCase):
    def test_values_and_gradients_agree_with_torch(self):
        seed = random.SystemRandom().randrange(2**32)
        rng = np.random.default_rng(seed)
        for dtype, tolerance in ((np.float64, 1e-12), (np.float32, 2e-5)):
            for xs, ws, kwargs in CASES:
                with self.subTest(input=xs, weight=ws, dtype=dtype.__name__, seed=seed, **{k: str(v) for k, v in kwargs.items()}):
                    x, w, b, = (rng.standard_normal(s).astype(dtype) for s in (xs, ws, (ws[0],)))
                    sx, sw, sb = (strata.from_numpy(a.copy(), requires_grad=True) for a in (x, w, b))
                    tx, tw, tb = (torch.from_numpy(a.copy()).requires_grad_() for a in (x, w, b))
                    out, tout = strata.conv2d(sx, sw, sb, **kwargs), F.conv2d(tx, tw, tb, **kwargs)
                    self.assertEqual(out.shape, tuple(tout.shape))
                    scale = max(1.0, float(np.abs(tout.detach().numpy()).max()))
                    np.testing.assert_allclose(out.numpy(), tout.detach().numpy(), rtol=tolerance, atol=tolerance * scale)
                    g = rng.standard_normal(out.shape).astype(dtype)
                    out.backward(strata.from_numpy(g.copy()))
                    tout.backward(torch.from_numpy(g.copy()))
                    for got, want in ((sx.grad, tx.grad), (sw.grad, tw.grad), (sb.grad, tb.grad)):
                        scale = max(1.0, float(want.abs().max()))
                        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=tolerance, atol=tolerance * scale)

    def test_refusals_carry_torchs_message(self):
        bad = [
            ((1, 5, 8, 8), (4, 3, 3, 3), dict(groups=2)),
            ((1, 6, 8, 8), (3, 3, 3, 3), dict(groups=2)),
            ((1, 6, 8, 8), (4, 6, 3, 3), dict(stride=0)),
            ((1, 6, 8, 8), (4, 6, 3, 3), dict(padding=-1)),
            ((1, 6, 8, 8), (4, 6, 3, 3), dict(groups=0)),
            ((1, 6, 8, 8), (4, 6, 3, 3), dict(stride=(1, 2, 3))),
            ((1, 6, 2, 2), (4, 6, 3, 3), {}),
            ((1, 6, 5, 5), (4, 6, 3, 3), dict(dilation=3)),
        ]
        for xs, ws, kwargs in bad:
            with self.subTest(input=xs, weight=ws, **{k: str(v) for k, v in kwargs.items()}):
                with self.assertRaises(RuntimeError) as torch_error:
                    F.conv2d(torch.zeros(xs), torch.zeros(ws), **kwargs)
                with self.assertRaises(ValueError) as strata_error:
                    strata.conv2d(strata.zeros(*xs), strata.zeros(*ws), **kwargs)
                torch_words = str(torch_error.exception).replace("[[", "[").replace("]]", "]")  # torch's typo
                self.assertIn(torch_words, str(strata_error.exception))

    def test_empty_batch_agrees_with_torch(self):
        out = strata.conv2d(strata.zeros(0, 4, 6, 6), strata.zeros(6, 2, 3, 3), stride=(2, 1), groups=2)
        tout = F.conv2d(torch.zeros(0, 4, 6, 6), torch.zeros(6, 2, 3, 3), stride=(2, 1), groups=2)
        self.assertEqual(out.shape, tuple(tout.shape))


if __name__ == "__main__":
    unittest.main()
