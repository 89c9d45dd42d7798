"""tests/python: the Python a torch user types (docs/python.md): `c - x`, the in-place operators (x += y,
x -= 2.0, x *= y, x /= y) through views and autograd, len/flatten/float()/clone()/cuda()/mT, comparisons
and `2 ** x` refused, and the factories (ones, full, empty, tensor, *_like). Against torch on the same
inputs, bit for bit where the value is the point (random values with NaN, infinities and signed zeros, every
dtype), with shapes, strides, dtypes and errors; without torch (Debian's python3), against numpy float64.
Runs under ctest with PYTHONPATH pointing at build/python."""
import math
import random
import unittest

import numpy as np

import strata

try:
    import torch
except ImportError:  # Debian's python3 without the peer's environment (scripts/install-python-deps)
    torch = None
if torch is not None and int(torch.__version__.split(".")[0]) < 2:
    # The reference is torch 2.x (the peer's environment); Debian's torch 1.13 rounds a number for a half
    # tensor's mul and div differently. Without 2.x the tests compare with numpy and strata's own ops.
    torch = None

DTYPES = (strata.float32, strata.float64, strata.float16, strata.bfloat16)
SPECIALS = [0.0, -0.0, math.nan, math.inf, -math.inf, 1.0, -1.0, 2.0, 0.5, 1e-8, -3.0]
SCALARS = [1, 0.0, -0.0, 2.5, -3, 0.1, 1e-3, math.nan, math.inf, -math.inf]
IN_PLACE = {"+=": lambda x, y: x.__iadd__(y), "-=": lambda x, y: x.__isub__(y),
            "*=": lambda x, y: x.__imul__(y), "/=": lambda x, y: x.__itruediv__(y)}
OUT_OF_PLACE = {"+=": lambda x, y: x + y, "-=": lambda x, y: x - y, "*=": lambda x, y: x * y, "/=": lambda x, y: x / y}


def values(seed, shape=(4, 6)):
    """Random normals with the IEEE specials written over the first elements."""
    data = np.random.default_rng(seed).standard_normal(shape)
    flat = data.reshape(-1)
    count = min(len(SPECIALS), flat.size)
    flat[:count] = SPECIALS[:count]
    return data


def as_torch(t):
    return torch.from_numpy(t.numpy_float64()).to(getattr(torch, str(t.dtype)))


def torch_values(t):
    return t.detach().to(torch.float64).numpy()


class TorchApiTest(unittest.TestCase):
    def setUp(self):
        self.seed = random.SystemRandom().randrange(2**32)

    def assertBitwise(self, got, want, what):
        """got (a strata.Tensor) holds want (a float64 array) exactly: NaN where want is NaN, every other
        value and the sign of each zero equal (each strata dtype is exact in float64)."""
        got = got.numpy_float64()
        self.assertEqual(got.shape, want.shape, what)
        nan = np.isnan(want)
        np.testing.assert_array_equal(np.isnan(got), nan, err_msg=f"{what} (seed {self.seed})")
        np.testing.assert_array_equal(got[~nan].view(np.uint64), want[~nan].view(np.uint64),
                                      err_msg=f"{what} (seed {self.seed})")

    def tensor(self, dtype, seed_offset=0, shape=(4, 6)):
        return strata.from_numpy(values(self.seed + seed_offset, shape)).to(dtype)

    # ---- c - x --------------------------------------------------------------------------------------------

    def test_rsub_is_torch_bitwise(self):
        for dtype in DTYPES:
            x = self.tensor(dtype)
            for c in SCALARS:
                with self.subTest(dtype=dtype, c=c, seed=self.seed):
                    got = c - x
                    self.assertEqual(got.dtype, dtype)
                    if torch is not None:
                        self.assertBitwise(got, torch_values(c - as_torch(x)), f"{c} - x, {dtype}")
                    elif dtype == strata.float64:
                        self.assertBitwise(got, np.float64(c) - x.numpy(), f"{c} - x")

    def test_number_operators_are_torch_bitwise(self):
        # Note [A number added to a half tensor]: add and sub round the number to a half dtype as torch's
        # do, whether reached through an operator, a function or a method.
        ops = {"x + c": lambda x, c: x + c, "c + x": lambda x, c: c + x, "x - c": lambda x, c: x - c,
               "x * c": lambda x, c: x * c, "c * x": lambda x, c: c * x, "x / c": lambda x, c: x / c,
               "c / x": lambda x, c: c / x, "add(x, c)": lambda x, c: type(x).add(x, c),
               "sub(x, c)": lambda x, c: type(x).sub(x, c)}
        # (Not with alpha other than 1: torch's CPU kernel fuses x + alpha * c into one FMA where strata
        # rounds the product first, 1 ulp apart at most; docs/python.md.)
        if torch is None:
            self.skipTest("torch is not importable here")
        for dtype in DTYPES:
            x = self.tensor(dtype)
            for c in SCALARS:
                for what, op in ops.items():
                    with self.subTest(dtype=dtype, c=c, op=what, seed=self.seed):
                        self.assertBitwise(op(x, c), torch_values(op(as_torch(x), c)), f"{what}, {dtype}")

    def test_rsub_at_equal_values_is_positive_zero_and_differentiable(self):
        x = strata.tensor([2.0, -0.0, 0.0], dtype=strata.float64, requires_grad=True)
        y = 2.0 - x
        self.assertEqual(y.tolist(), [0.0, 2.0, 2.0])
        self.assertEqual(math.copysign(1, y.tolist()[0]), 1.0)  # +0, as c - x in IEEE
        self.assertEqual([math.copysign(1, v) for v in (0.0 - x).tolist()], [-1.0, 1.0, 1.0])
        self.assertEqual(math.copysign(1, (-0.0 - x).tolist()[2]), -1.0)  # -0 - (+0) is -0
        strata.sum(y).backward()
        self.assertEqual(x.grad.tolist(), [-1.0, -1.0, -1.0])

    def test_rsub_refuses_what_is_not_a_number(self):
        x = strata.zeros(3)
        for other in ("a", [1.0], None, True):
            with self.subTest(other=other):
                with self.assertRaises(TypeError):
                    other - x

    # ---- x += y and friends -------------------------------------------------------------------------------

    def in_place_cases(self, dtype):
        """(what, other): a tensor of x's shape, a broadcast row, and numbers."""
        yield "tensor", self.tensor(dtype, 1)
        yield "row", self.tensor(dtype, 2, shape=(6,))
        for c in SCALARS:
            yield f"number {c}", c

    def test_in_place_operators_write_self_bitwise_as_torch(self):
        for dtype in DTYPES:
            for symbol, op in IN_PLACE.items():
                for what, other in self.in_place_cases(dtype):
                    with self.subTest(dtype=dtype, op=symbol, other=what, seed=self.seed):
                        x = self.tensor(dtype)
                        expected = OUT_OF_PLACE[symbol](x, other).numpy_float64()  # strata's out-of-place op
                        before, handle, alias = x._version, x, x.view(-1)
                        self.assertIs(op(x, other), handle)
                        self.assertEqual(x.dtype, dtype)
                        self.assertGreater(x._version, before)
                        self.assertBitwise(x, expected, f"x {symbol} {what}: the out-of-place op's value")
                        self.assertBitwise(alias, expected.reshape(-1), f"a view sees x {symbol} {what}")
                        if torch is not None:
                            t = as_torch(self.tensor(dtype))
                            t_other = as_torch(other) if isinstance(other, strata.Tensor) else other
                            want = torch_values(IN_PLACE[symbol](t, t_other))
                            self.assertBitwise(x, want, f"x {symbol} {what} against torch")

    def test_in_place_statement_rebinds_nothing(self):
        x = strata.randn(2, 3, dtype=strata.float64, seed=self.seed)
        y = strata.randn(2, 3, dtype=strata.float64, seed=self.seed + 1)
        row = x[0]
        want = x.numpy() * 3.0 + y.numpy()
        handle = x
        x *= 3.0
        x += y
        self.assertIs(x, handle)
        np.testing.assert_array_equal(row.numpy(), want[0])  # the view saw both writes

    def test_in_place_through_a_view_writes_the_base(self):
        for symbol, op in IN_PLACE.items():
            with self.subTest(op=symbol, seed=self.seed):
                base = self.tensor(strata.float64)
                want = base.numpy().copy()
                column = base[:, 1]
                op(column, 4.0)
                want[:, 1] = OUT_OF_PLACE[symbol](strata.from_numpy(want[:, 1].copy()), 4.0).numpy()
                self.assertBitwise(base, want, f"base[:, 1] {symbol} 4.0")

    def test_in_place_operators_record_torchs_nodes_and_gradients(self):
        names = {"+=": "AddBackward", "-=": "SubBackward", "*=": "MulBackward", "/=": "DivBackward"}
        for symbol, op in IN_PLACE.items():
            for what in ("tensor", "number"):
                with self.subTest(op=symbol, other=what, seed=self.seed):
                    leaf = strata.randn(3, 4, dtype=strata.float64, seed=self.seed, requires_grad=True)
                    y = strata.randn(3, 4, dtype=strata.float64, seed=self.seed + 1, requires_grad=True)
                    other = (y * y + 0.5) if what == "tensor" else -2.5
                    x = leaf * 1.0
                    op(x, other)
                    self.assertEqual(x.grad_fn, names[symbol])
                    strata.sum(x).backward()
                    if torch is None:
                        continue
                    t_leaf, t_y = as_torch(leaf).requires_grad_(), as_torch(y).requires_grad_()
                    t_x = t_leaf * 1.0
                    IN_PLACE[symbol](t_x, (t_y * t_y + 0.5) if what == "tensor" else -2.5)
                    self.assertEqual(t_x.grad_fn.name().rstrip("0123456789"), names[symbol])
                    t_x.sum().backward()
                    np.testing.assert_allclose(leaf.grad.numpy(), t_leaf.grad.numpy(), rtol=1e-12, atol=0)
                    if what == "tensor":
                        np.testing.assert_allclose(y.grad.numpy(), t_y.grad.numpy(), rtol=1e-12, atol=0)

    def test_in_place_gradients_through_a_view_and_into_a_plain_tensor(self):
        # b[:, 1] /= w: CopySlices over DivBackward, as torch's; z /= w with z plain: only w needs a gradient,
        # and div_'s node must still have saved w (its own gradient reads it).
        if torch is None:
            self.skipTest("torch is not importable here")
        for symbol, op in IN_PLACE.items():
            with self.subTest(op=symbol, seed=self.seed):
                leaf = strata.randn(3, 4, dtype=strata.float64, seed=self.seed, requires_grad=True)
                w = strata.randn(3, dtype=strata.float64, seed=self.seed + 1) * 0.5 + 2.0
                w.requires_grad = True
                z = strata.randn(3, dtype=strata.float64, seed=self.seed + 2)
                t_leaf, t_w, t_z = as_torch(leaf).requires_grad_(), as_torch(w).requires_grad_(), as_torch(z)
                b = leaf * 1.0
                op(b[:, 1], w)
                op(z, w)
                strata.sum(b * b).backward()
                strata.sum(z).backward()
                t_b = t_leaf * 1.0
                IN_PLACE[symbol](t_b[:, 1], t_w)
                IN_PLACE[symbol](t_z, t_w)
                (t_b * t_b).sum().backward()
                t_z.sum().backward()
                self.assertEqual(b.grad_fn, t_b.grad_fn.name().split("::")[-1])  # CopySlices
                np.testing.assert_allclose(leaf.grad.numpy(), t_leaf.grad.numpy(), rtol=1e-12, atol=0)
                np.testing.assert_allclose(w.grad.numpy(), t_w.grad.numpy(), rtol=1e-12, atol=0)

    def test_in_place_keeps_self_dtype_with_a_wider_other(self):
        # torch allows every floating dtype into every other in place (f32 += f64); self keeps its dtype.
        # strata casts other to self's dtype first, torch computes in the common dtype and rounds once: the
        # values agree within self's rounding.
        for symbol, op in IN_PLACE.items():
            with self.subTest(op=symbol, seed=self.seed):
                x = strata.randn(3, 4, seed=self.seed)
                y = strata.randn(3, 4, dtype=strata.float64, seed=self.seed + 1) * 0.5 + 2.0
                want = OUT_OF_PLACE[symbol](x.numpy().astype(np.float64), y.numpy())
                bound = 2**-23 * (np.abs(x.numpy()) + np.abs(y.numpy()) + np.abs(want))  # two f32 roundings
                op(x, y)
                self.assertEqual(x.dtype, strata.float32)
                self.assertTrue(np.all(np.abs(x.numpy() - want) <= bound), f"x {symbol} y_f64 (seed {self.seed})")

    def test_in_place_refusals(self):
        x = strata.zeros(3)
        with self.assertRaisesRegex(strata.UsageError, r"output with shape \[3\] doesn't match the broadcast shape "
                                                      r"\[2x3\]"):
            x += strata.zeros(2, 3)
        for other in ("a", None, [1.0], True):
            with self.subTest(other=other):
                with self.assertRaises(TypeError):
                    x += other
        leaf = strata.zeros(3, requires_grad=True)
        with self.assertRaisesRegex(strata.UsageError, "leaf"):
            leaf -= 1.0
        with strata.no_grad():
            leaf -= 1.0  # an optimizer's update, as torch allows
        self.assertEqual(leaf.tolist(), [-1.0, -1.0, -1.0])
        if torch is not None:
            with self.assertRaisesRegex(RuntimeError, r"doesn't match the broadcast shape \[2, 3\]"):
                t = torch.zeros(3)
                t += torch.zeros(2, 3)

    def test_in_place_methods(self):
        x = strata.randn(3, dtype=strata.float64, seed=self.seed)
        want = (x.numpy() - 2 * 0.5) / 4.0
        self.assertIs(x.sub_(strata.full((3,), 0.5, dtype=strata.float64), alpha=2).div_(4.0), x)
        np.testing.assert_array_equal(x.numpy(), want)

    # ---- Methods -----------------------------------------------------------------------------------------

    def test_len(self):
        self.assertEqual(len(strata.zeros(5, 2)), 5)
        self.assertEqual(len(strata.zeros(0)), 0)
        with self.assertRaisesRegex(TypeError, "len\\(\\) of a 0-d tensor"):
            len(strata.tensor(1.0))

    def test_flatten_shapes_views_and_errors(self):
        x = strata.randn(2, 3, 4, seed=self.seed)
        for args in [(), (0,), (1,), (0, 1), (1, 2), (-2, -1), (0, -1), (2, 2)]:
            with self.subTest(args=args):
                got = x.flatten(*args)
                self.assertEqual(got.data_ptr(), x.data_ptr())  # a view: contiguous input
                np.testing.assert_array_equal(got.numpy(), x.numpy().reshape(got.shape))
                if torch is not None:
                    want = as_torch(x).flatten(*args)
                    self.assertEqual(got.shape, tuple(want.shape))
                    self.assertEqual(got.stride(), want.stride())
        self.assertIs(x.flatten(1, 1), x)
        self.assertEqual(strata.tensor(3.0).flatten().shape, (1,))
        t = x.transpose(0, 2)  # not viewable as one dim: a copy, as torch's reshape
        np.testing.assert_array_equal(t.flatten().numpy(), np.ascontiguousarray(t.numpy()).reshape(-1))
        self.assertEqual(x.flatten(start_dim=1).shape, (2, 12))
        with self.assertRaisesRegex(IndexError, r"Dimension out of range \(expected to be in range of \[-3, 2\], "
                                                r"but got 5\)"):
            x.flatten(0, 5)
        with self.assertRaisesRegex(strata.UsageError, "start_dim cannot come after end_dim"):
            x.flatten(2, 1)
        with self.assertRaises(TypeError):
            x.flatten(0.5)

    def test_dtype_methods(self):
        x = strata.randn(3, 4, dtype=strata.float64, seed=self.seed)
        for method, dtype in (("float", strata.float32), ("double", strata.float64), ("half", strata.float16),
                              ("bfloat16", strata.bfloat16)):
            with self.subTest(method=method):
                got = getattr(x, method)()
                self.assertEqual(got.dtype, dtype)
                self.assertBitwise(got, x.to(dtype).numpy_float64(), method)
                if torch is not None:
                    self.assertBitwise(got, torch_values(getattr(as_torch(x), method)()), f"{method} against torch")
        self.assertIs(x.double(), x)  # already that dtype, as torch

    def test_clone_is_a_copy_through_the_dispatcher(self):
        for dtype in DTYPES:
            with self.subTest(dtype=dtype):
                x = self.tensor(dtype)
                y = x.clone()
                self.assertIsNot(y, x)
                self.assertNotEqual(y.data_ptr(), x.data_ptr())
                self.assertEqual((y.shape, y.stride(), y.dtype), (x.shape, x.stride(), x.dtype))
                self.assertBitwise(y, x.numpy_float64(), "clone")
                copied = y.numpy_float64()
                x.mul_(2.0)
                self.assertBitwise(y, copied, "own storage: the write to x does not reach y")
        leaf = strata.randn(3, dtype=strata.float64, seed=self.seed, requires_grad=True)
        copy = leaf.clone()
        self.assertTrue(copy.requires_grad)
        strata.sum(copy * 3.0).backward()
        self.assertEqual(leaf.grad.tolist(), [3.0, 3.0, 3.0])
        self.assertEqual(copy.grad_fn, "ToCopyBackward")  # the to_copy call's node

    def test_cuda_without_a_gpu_is_unavailable(self):
        x = strata.zeros(2)
        try:
            y = x.cuda()
        except strata.UnavailableError as e:
            self.assertIn("cuda", str(e).lower())
            with self.assertRaises(strata.UnavailableError):
                x.to("cuda")
            return
        self.assertTrue(str(y.device).startswith("cuda"))
        np.testing.assert_array_equal(y.cpu().numpy(), x.numpy())

    def test_mT_and_size(self):
        x = strata.randn(2, 3, 4, seed=self.seed)
        m = x.mT
        self.assertEqual((m.shape, m.stride()), ((2, 4, 3), (12, 1, 4)))
        self.assertEqual(m.data_ptr(), x.data_ptr())
        np.testing.assert_array_equal(m.numpy(), np.swapaxes(x.numpy(), -2, -1))
        if torch is not None:
            self.assertEqual(m.stride(), as_torch(x).mT.stride())
        with self.assertRaisesRegex(strata.UsageError, "only supported on matrices or batches of matrices. Got 1-D"):
            strata.zeros(3).mT
        self.assertEqual(x.size(), (2, 3, 4))
        self.assertEqual(x.size(-1), 4)

    # ---- Comparisons and 2 ** x --------------------------------------------------------------------------

    def test_comparisons_are_refused_not_identity(self):
        x, y = strata.zeros(3), strata.zeros(3)
        for symbol in ("==", "!=", "<", "<=", ">", ">="):
            for other in (x, y, 0.0, 1):
                with self.subTest(op=symbol, other=type(other).__name__):
                    with self.assertRaisesRegex(TypeError, "strata has no comparison operators"):
                        eval(f"x {symbol} other")  # noqa: S307 (the operator is the point)
        self.assertFalse(x == None)  # noqa: E711 (as torch: not an elementwise comparison)
        self.assertTrue(x != "a")
        # Hashing by identity, as torch's: tensors as dict keys and set members, list membership by identity.
        self.assertEqual({x: 1, y: 2}[y], 2)
        self.assertEqual(len({x, y, x}), 2)
        self.assertIn(x, [x])

    def test_tensor_exponent_refused(self):
        x = strata.zeros(3)
        with self.assertRaisesRegex(TypeError, "float exponent"):
            2 ** x
        with self.assertRaises(TypeError):
            x // 2

    # ---- Factories ---------------------------------------------------------------------------------------

    def test_filled_factories(self):
        cases = [("ones", lambda **k: strata.ones(2, 3, **k), lambda **k: torch.ones(2, 3, **k), 1.0),
                 ("ones tuple", lambda **k: strata.ones((2, 3), **k), lambda **k: torch.ones((2, 3), **k), 1.0)]
        for value in (-0.0, 0.1, math.nan, -math.inf, 1 + 2**-11 + 2**-40, 7):
            cases.append((f"full {value}", lambda v=value, **k: strata.full((2, 3), v, **k),
                          lambda v=value, **k: torch.full((2, 3), v, **k), value))
        for dtype in DTYPES:
            for what, make, torch_make, value in cases:
                with self.subTest(what=what, dtype=dtype):
                    got = make(dtype=dtype)
                    self.assertEqual((got.shape, got.stride(), got.dtype, got.requires_grad),
                                     ((2, 3), (3, 1), dtype, False))
                    if torch is not None:
                        self.assertBitwise(got, torch_values(torch_make(dtype=getattr(torch, str(dtype)))), what)
                    elif dtype == strata.float64:
                        self.assertBitwise(got, np.full((2, 3), float(value)), what)
        self.assertEqual(strata.ones(3).dtype, strata.float32)
        self.assertTrue(strata.full((2,), 1.5, requires_grad=True).requires_grad)
        empty = strata.empty(4, 0, dtype="float16")
        self.assertEqual((empty.shape, empty.dtype), ((4, 0), strata.float16))
        self.assertEqual(strata.empty((3,)).shape, (3,))

    def test_factory_refusals(self):
        with self.assertRaisesRegex(TypeError, "size' must be a tuple of ints, not int"):
            strata.full(3, 1.0)
        with self.assertRaisesRegex(TypeError, "fill_value must be a real number"):
            strata.full((3,), "1")
        with self.assertRaisesRegex(ValueError, "unknown dtype"):
            strata.ones(3, dtype="int64")
        with self.assertRaisesRegex(ValueError, "non-negative"):
            strata.empty(-1)
        with self.assertRaisesRegex(TypeError, "must be a strata.Tensor"):
            strata.zeros_like(np.zeros(3))
        with self.assertRaisesRegex(TypeError, "already a strata.Tensor"):
            strata.tensor(strata.zeros(2))
        with self.assertRaisesRegex(TypeError, "sequence of real numbers of one shape"):
            strata.tensor([[1.0, 2.0], [3.0]])
        with self.assertRaisesRegex(TypeError, "requires_grad must be a bool"):
            strata.ones(2, requires_grad=1)

    def test_tensor(self):
        data = [[0.1, -0.0, math.inf], [math.nan, 1e-8, -2.5]]
        for dtype in (None, *DTYPES):
            with self.subTest(dtype=dtype):
                got = strata.tensor(data, dtype=dtype, requires_grad=True)
                self.assertTrue(got.requires_grad and got.is_leaf)
                self.assertEqual((got.shape, got.stride()), ((2, 3), (3, 1)))
                self.assertEqual(got.dtype, dtype or strata.float32)
                if torch is not None:
                    want = torch.tensor(data, dtype=None if dtype is None else getattr(torch, str(dtype)))
                    self.assertBitwise(got, torch_values(want), f"tensor(dtype={dtype})")
        scalar = strata.tensor(2.5)
        self.assertEqual((scalar.shape, scalar.item()), ((), 2.5))
        self.assertEqual(strata.tensor(np.arange(3.0)).dtype, strata.float64)  # an array keeps its dtype
        self.assertEqual(strata.tensor((1, 2)).tolist(), [1.0, 2.0])  # ints as float32: strata has no int dtype

    def test_like_factories(self):
        x = strata.randn(2, 5, dtype=strata.float16, seed=self.seed)
        z = strata.zeros_like(x)
        self.assertEqual((z.shape, z.dtype, z.device), (x.shape, x.dtype, x.device))
        self.assertEqual(z.tolist(), [[0.0] * 5] * 2)
        f = strata.full_like(x, -0.0, dtype=strata.float64, requires_grad=True)
        self.assertEqual((f.dtype, f.requires_grad), (strata.float64, True))
        self.assertBitwise(f, np.full((2, 5), -0.0), "full_like")
        r = strata.randn_like(x)
        self.assertEqual((r.shape, r.dtype), (x.shape, x.dtype))
        self.assertGreater(float(np.abs(r.numpy_float64()).sum()), 0.0)
        if torch is not None:
            t = as_torch(x)
            for mine, theirs in ((z, torch.zeros_like(t)), (f, torch.full_like(t, -0.0, dtype=torch.float64))):
                self.assertEqual((mine.shape, mine.stride()), (tuple(theirs.shape), theirs.stride()))
                self.assertBitwise(mine, torch_values(theirs), "against torch")

    def test_no_module_leaks_into_the_namespace(self):
        import types
        leaked = [name for name, v in vars(strata).items()
                  if isinstance(v, types.ModuleType) and not name.startswith("_")]
        self.assertEqual(leaked, [])
        for name in ("ones", "full", "empty", "tensor", "zeros_like", "full_like", "randn_like"):
            self.assertIn(name, strata.__all__)


if __name__ == "__main__":
    unittest.main()
