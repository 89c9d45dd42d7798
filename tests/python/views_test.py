"""tests/python: views from Python (strata/_views.py, docs/views.md): every view method and basic
indexing against numpy's own views on fresh random inputs (values, shapes, strides, shared storage),
gradients through views against numpy float64, the refusals as the exceptions torch raises, and, where the
peer's environment has PyTorch (the ctest entry runs under it then), strides, values and gradients against
torch on the same inputs. Runs under ctest with PYTHONPATH pointing at build/python."""
import random
import unittest

import numpy as np

import strata

try:
    import torch
except ImportError:  # Debian's python3 without the peer's environment (scripts/install-python-deps)
    torch = None


def strides_in_elements(a):
    return tuple(s // a.itemsize for s in a.strides)


# (what, strata view of x, numpy view of a) on a [4, 6, 5] tensor.
CASES = [
    ("t of a matrix", lambda x: x[0].t(), lambda a: a[0].T),
    ("T", lambda x: x.T, lambda a: a.transpose(2, 1, 0)),
    ("transpose(0, 2)", lambda x: x.transpose(0, 2), lambda a: a.swapaxes(0, 2)),
    ("transpose(-1, 1)", lambda x: x.transpose(-1, 1), lambda a: a.swapaxes(-1, 1)),
    ("permute(2, 0, 1)", lambda x: x.permute(2, 0, 1), lambda a: a.transpose(2, 0, 1)),
    ("permute((1, 2, 0))", lambda x: x.permute((1, 2, 0)), lambda a: a.transpose(1, 2, 0)),
    ("view(24, 5)", lambda x: x.view(24, 5), lambda a: a.reshape(24, 5)),
    ("view(-1)", lambda x: x.view(-1), lambda a: a.reshape(-1)),
    ("reshape of a transpose (a copy)", lambda x: x.transpose(0, 1).reshape(6, 20), lambda a: a.swapaxes(0, 1).reshape(6, 20)),
    ("expand", lambda x: x[:, :1].expand(4, 3, 5), lambda a: np.broadcast_to(a[:, :1], (4, 3, 5))),
    ("expand with a new dim and -1", lambda x: x[0].expand(2, -1, -1), lambda a: np.broadcast_to(a[0], (2, 6, 5))),
    ("unsqueeze(1)", lambda x: x.unsqueeze(1), lambda a: a[:, None]),
    ("unsqueeze(-1)", lambda x: x.unsqueeze(-1), lambda a: a[..., None]),
    ("squeeze(1) of [4,1,5]", lambda x: x[:, 2:3].squeeze(1), lambda a: a[:, 2]),
    ("squeeze() of [1,6,1]", lambda x: x[1:2, :, 3:4].squeeze(), lambda a: a[1, :, 3]),
    ("narrow", lambda x: x.narrow(1, 2, 3), lambda a: a[:, 2:5]),
    ("select", lambda x: x.select(2, -2), lambda a: a[:, :, -2]),
    ("x[1]", lambda x: x[1], lambda a: a[1]),
    ("x[-1, 2]", lambda x: x[-1, 2], lambda a: a[-1, 2]),
    ("x[1:3]", lambda x: x[1:3], lambda a: a[1:3]),
    ("x[::2, 1::3]", lambda x: x[::2, 1::3], lambda a: a[::2, 1::3]),
    ("x[-3:, :-1, ::4]", lambda x: x[-3:, :-1, ::4], lambda a: a[-3:, :-1, ::4]),
    ("x[0, None, ..., None]", lambda x: x[0, None, ..., None], lambda a: a[0, None, ..., None]),
    ("x[..., 2]", lambda x: x[..., 2], lambda a: a[..., 2]),
    ("x[1, None, 2:]", lambda x: x[1, None, 2:], lambda a: a[1, None, 2:]),
    ("x[10:20] (empty)", lambda x: x[10:20], lambda a: a[10:20]),
    ("x[np.int64(2)]", lambda x: x[np.int64(2)], lambda a: a[np.int64(2)]),
    ("x[1, np.int32(-1)]", lambda x: x[1, np.int32(-1)], lambda a: a[1, np.int32(-1)]),
    ("x[1, ..., 2] (Ellipsis in the middle)", lambda x: x[1, ..., 2], lambda a: a[1, ..., 2]),
    ("x[:, ..., None, ::2]", lambda x: x[:, ..., None, ::2], lambda a: a[:, ..., None, ::2]),
    ("x[np.int64(1):np.int32(4):np.uint8(2)]", lambda x: x[np.int64(1):np.int32(4):np.uint8(2)],
     lambda a: a[np.int64(1):np.int32(4):np.uint8(2)]),
    ("x[np.int16(-2), 1:2**63 - 1]", lambda x: x[np.int16(-2), 1:2**63 - 1], lambda a: a[np.int16(-2), 1:]),
]

# Indices for the two walks of x[index] (Note [Indexing in the extension] in apps/python/indexing.cpp) on a
# [4, 6, 5] tensor: what each takes, and each refusal (too many, two Ellipses, out of range, past int64,
# steps < 1, and the types only the Python walk takes, to refuse them).
WALK_INDICES = [
    1, -1, np.int64(2), np.uint8(3), (1, 2), (-1, 2, 3), slice(1, 3), (slice(None, None, 2), slice(1, None, 3)),
    (0, None, Ellipsis, None), (Ellipsis, 2), (1, Ellipsis, 2), (slice(None), Ellipsis, slice(None, None, 2)),
    None, (), Ellipsis, slice(None), (slice(None), slice(None)), slice(0, 2**63 - 1, 1), (None, None, None),
    (np.int64(1), slice(np.int32(1), np.int64(5), np.int64(2))), slice(10, 20), (2, slice(-3, None), None),
    4, -5, (0, 0, 0, 0), (Ellipsis, Ellipsis), (0, Ellipsis, 0, Ellipsis), slice(None, None, -1),
    (1, slice(None, None, -2)), slice(None, None, 0), 2**70, -2**63 - 1, (0, 2**64), slice(2**64, None),
    slice(None, -2**70), slice(None, None, 2**70), np.uint64(2**64 - 1), (None,) * 5, True, (0, False),
    1.5, (0, 1.5), [0, 1], "a", (slice(0.0, None),), (slice(None, None, True),), slice(1.5, None),
    tuple(range(20)), (Ellipsis,) * 17,
]


class ViewsTest(unittest.TestCase):
    def setUp(self):
        self.seed = random.SystemRandom().randrange(2**32)
        self.rng = random.Random(self.seed)

    def rand(self, *shape, dtype="float32", requires_grad=False):
        return strata.randn(*shape, dtype=dtype, seed=self.rng.randrange(2**63), requires_grad=requires_grad)

    def test_views_match_numpy_views_and_share_storage(self):
        for dtype in ("float32", "float64"):
            x = self.rand(4, 6, 5, dtype=dtype)
            a = x.numpy()
            for what, view, ref in CASES:
                with self.subTest(what=what, dtype=dtype, seed=self.seed):
                    v, r = view(x), ref(a)
                    self.assertEqual(v.shape, r.shape)
                    np.testing.assert_array_equal(np.asarray(v), r)
                    if "copy" in what:
                        self.assertTrue(v.is_contiguous())
                        continue
                    if v.numel() > 1:  # numpy's strides for dims of size 1 are its own choice
                        for i, (s, n) in enumerate(zip(v.shape, r.shape)):
                            if s > 1:
                                self.assertEqual(v.stride(i), strides_in_elements(r)[i], what)
                    # Same storage: the view's first element is at its offset in x's memory.
                    if v.numel() > 0:
                        itemsize = a.itemsize
                        self.assertEqual(v.data_ptr(), x.data_ptr() + v.storage_offset() * itemsize)
                        self.assertEqual(v.is_contiguous(), r.flags["C_CONTIGUOUS"] or v.numel() <= 1)

    def test_contiguous_returns_itself_or_a_copy(self):
        x = self.rand(3, 4)
        self.assertEqual(x.contiguous().data_ptr(), x.data_ptr())
        c = x.t().contiguous()
        self.assertTrue(c.is_contiguous())
        self.assertNotEqual(c.data_ptr(), x.data_ptr())
        self.assertEqual(c.stride(), (3, 1))
        np.testing.assert_array_equal(c.numpy(), x.numpy().T)

    def test_kernels_read_views_as_their_contiguous_copies(self):
        x, w = self.rand(5, 7), self.rand(3, 7)
        np.testing.assert_allclose((x @ w.t()).numpy(), x.numpy() @ w.numpy().T, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(strata.relu(x[:, ::2]).numpy(), np.maximum(x.numpy()[:, ::2], 0))
        np.testing.assert_allclose(strata.add(x.t(), x.t().contiguous()).numpy(), 2 * x.numpy().T)
        np.testing.assert_allclose(strata.linear(x, w.t().t()).numpy(), x.numpy() @ w.numpy().T, rtol=1e-5, atol=1e-5)

    def test_backward_through_views_against_numpy(self):
        x = self.rand(4, 6, dtype="float64", requires_grad=True)
        up = self.rand(3, 2, dtype="float64")
        # y = sum(relu(x.t()[1:4, ::2].contiguous()) * up): the gradient lands on the picked positions.
        picked = x.t()[1:4, ::2]
        y = strata.sum(strata.linear(strata.relu(picked.contiguous()).view(1, 6), up.reshape(1, 6)))
        y.backward()
        want = np.zeros((6, 4))
        a = x.numpy()
        mask = (a.T[1:4, ::2] > 0).astype(float)
        want[1:4, ::2] = mask * up.numpy()
        np.testing.assert_allclose(x.grad.numpy(), want.T, rtol=1e-12, atol=1e-12)
        # expand's gradient sums; select's and unsqueeze's route back.
        b = self.rand(1, 5, dtype="float64", requires_grad=True)
        strata.sum(b.expand(3, 5)[2].unsqueeze(0).expand(4, 5)).backward()
        np.testing.assert_allclose(b.grad.numpy(), np.full((1, 5), 4.0))

    def test_bad_input_raises_as_torch(self):
        x = self.rand(2, 3)
        with self.assertRaisesRegex(IndexError, r"dim 2 is out of range for a tensor of size \[2x3\]"):
            x.transpose(0, 2)
        with self.assertRaisesRegex(IndexError, r"index 3 is out of range for dim 0 of size 2"):
            x[3]
        with self.assertRaisesRegex(IndexError, "too many indices for tensor of dimension 2"):
            x[0, 0, 0]
        with self.assertRaisesRegex(ValueError, r"shape \(4, 2\) is invalid for input of size 6"):
            x.view(4, 2)
        with self.assertRaisesRegex(ValueError, "needs a copy"):
            x.t().view(6)
        with self.assertRaisesRegex(ValueError, "step must be greater than zero"):
            x[::-1]
        with self.assertRaisesRegex(ValueError, "cannot expand dim 1 of size 3 to 4"):
            x.expand(2, 4)
        with self.assertRaisesRegex(ValueError, "at most 4 dims"):
            x.view(1, 1, 1, 2, 3)
        with self.assertRaisesRegex(TypeError, "must be a tuple of ints, but found element of type float"):
            x.view(2.0, 3)
        with self.assertRaisesRegex(TypeError, "torch's advanced indexing, x\\[\\[0, 2\\]\\] or a mask: strata has no "
                                               "index_select or gather operator"):
            x[True]
        # A 0-d tensor takes no index, as torch's (the int fast path of __getitem__ falls back to say so).
        with self.assertRaisesRegex(IndexError, "too many indices for tensor of dimension 0"):
            x.sum()[0]
        with self.assertRaisesRegex(IndexError, "too many indices for tensor of dimension 0"):
            x.sum()[:]
        with self.assertRaisesRegex(IndexError, r"index -3 is out of range for dim 0 of size 2"):
            x[-3]
        # An int past int64 (the extension's exact-int fast path hands it to the general branch's words).
        with self.assertRaisesRegex(ValueError, r"must be an int in \[-2\*\*63, 2\*\*63\)"):
            x.transpose(0, 2**70)
        self.assertTrue(issubclass(strata.IndexRangeError, strata.UsageError))

    def test_huge_expanded_views_raise_when_materialised(self):
        # An expanded view holds one element; laying its elements out needs their bytes, counted once and
        # overflow-checked: f64 [2**61 + 7] is just past 2**64 bytes and wrapped to a 56-byte buffer that
        # the kernels wrote past. Every op that materialises it raises strata.UsageError instead.
        one = self.rand(1).double()
        huge = one.expand(2**61 + 7)
        self.assertEqual(huge.shape, (2**61 + 7,))
        for what, f in [("contiguous", lambda: huge.contiguous()), ("clone", lambda: huge.clone()),
                        ("mul", lambda: huge * 3.0), ("add", lambda: huge + huge), ("relu", lambda: strata.relu(huge)),
                        ("sum", lambda: huge.sum()), ("index after mul", lambda: (huge * 3.0)[2**21].item())]:
            with self.subTest(what), self.assertRaisesRegex(strata.UsageError, r"at most 2\^63 - 1 bytes"):
                f()
        with self.assertRaisesRegex(ValueError, "more elements than fit in 64 bits"):
            self.rand(1, 1).expand(2**62, 4)
        # A small view of it is fine, and reads the one element.
        self.assertEqual(huge[2**60:2**60 + 3].contiguous().tolist(), [one.item()] * 3)

    def test_extreme_narrow_and_slice_arguments(self):
        x = self.rand(4, 6)
        for length in (2**63 - 1, 2**63 - 2, 2**62):
            with self.subTest(length=length), self.assertRaisesRegex(ValueError, "exceeds dim 0 of size 4"):
                x.narrow(0, 1, length)
        # A step past the size takes one element; near 2**63 it once made a negative size.
        for step in (5, 100, 2**62, 2**63 - 3, 2**63 - 1):
            with self.subTest(step=step):
                self.assertEqual(x[1::step].shape, (1, 6))
                self.assertEqual(x[1::step].contiguous().tolist(), [x[1].tolist()])
                self.assertEqual(x[:, 2::step].shape, (4, 1))
        if torch is not None:  # torch agrees where its own stride * step does not wrap
            t = torch.tensor(np.asarray(x))
            for step in (5, 100, 2**40):
                self.assertEqual(tuple(t[1::step].shape), x[1::step].shape)
                self.assertEqual(tuple(t[:, 2::step].shape), x[:, 2::step].shape)

    def test_bad_indices_raise_as_torch(self):
        x = self.rand(2, 3)
        # A negative step, as torch's basic indexing (numpy would reverse).
        for index in ((slice(None, None, -1),), (0, slice(None, None, -2)), (slice(None), slice(3, 0, -1))):
            with self.assertRaisesRegex(ValueError, "step must be greater than zero"):
                x[index]
        # Past int64: the operator's argument names itself.
        with self.assertRaisesRegex(ValueError, r"select\(\): argument 'index' \(position 3\) must be an int in "
                                    r"\[-2\*\*63, 2\*\*63\), got 1180591620717411303424"):
            x[2**70]
        with self.assertRaisesRegex(ValueError, r"slice\(\): argument 'end' \(position 4\) must be an int"):
            x[0, :2**64]
        with self.assertRaisesRegex(ValueError, r"select\(\): argument 'index' \(position 3\) must be an int in "
                                    r"\[-2\*\*63, 2\*\*63\), got 18446744073709551615"):
            x[np.uint64(2**64 - 1)]
        # A bool, a Tensor, a list and an array are advanced indexing, which strata does not have; a float
        # is no index.
        for index in (True, (0, False), x[0], (slice(None), x), [0, 1], (0, [1]), np.array([0, 1])):
            with self.assertRaisesRegex(TypeError, r"^strata indexes with ints, slices, None and \.\.\.; not "
                                        r"(bool|Tensor|list|ndarray) \(torch's advanced indexing, x\[\[0, 2\]\] or a "
                                        r"mask: strata has no index_select or gather operator; select the rows one "
                                        r"by one, or slice\)$"):
                x[index]
        with self.assertRaisesRegex(TypeError, "not float$"):
            x[0, 1.5]
        with self.assertRaisesRegex(IndexError, "an index can only have a single ellipsis"):
            x[..., 0, ...]

    def test_the_extension_walks_an_index_as_the_python_walk_does(self):
        # x[index] walks in C++ (_strata._index) while the python and pybind11 rows are off, in Python
        # (strata._views._walk) while they are on: the same views (sizes, strides, storage, autograd
        # history), the same object for an index that calls nothing, and the same errors, word for word.
        from strata import _views

        def outcome(walk, x, index):
            try:
                v = walk(x, index)
            except Exception as e:  # noqa: BLE001 (the exception is what is compared)
                return type(e), str(e)
            return (v is x, v.shape, v.stride(), v.storage_offset(), v.data_ptr(), v.requires_grad, v.grad_fn,
                    v.numpy().tolist())

        def extension(x, index):
            return x[index]

        for x in (self.rand(4, 6, 5, dtype="float64", requires_grad=True), self.rand(3), strata.sum(self.rand(3))):
            for index in WALK_INDICES:
                with self.subTest(shape=x.shape, index=index):
                    self.assertEqual(outcome(extension, x, index), outcome(_views._walk, x, index))
        # The extension takes the commonest forms itself and hands the others back (None) to the Python
        # walk, before calling any operator.
        x = self.rand(4, 6, 5)
        for index in (1, np.int64(1), (slice(None), slice(None, None, 2)), (0, None, Ellipsis), slice(np.int8(1), 3)):
            self.assertIsNotNone(strata._strata._index(x, index), index)
        for index in (True, x, 1.5, [0], (0, slice(0.0, None)), tuple(range(20))):
            self.assertIsNone(strata._strata._index(x, index))

    def test_indexing_inside_a_profile_has_the_python_rows(self):
        # While a profile records, x[...] walks in Python so that each view it calls gets the python and
        # pybind11 rows, as any operator called from Python does (Note [The python and pybind11 rows]).
        x = self.rand(4, 6)
        with strata.profile() as p:
            v, w = x[1], x[:, ::2]
        np.testing.assert_array_equal(v.numpy(), x.numpy()[1])
        np.testing.assert_array_equal(w.numpy(), x.numpy()[:, ::2])
        doc = p.json()
        self.assertEqual([op["op"] for op in doc["ops"]], ["strata.select", "strata.slice"])
        for op in doc["ops"]:
            rows = {r["layer"]: r for r in op["steady"]["rows"] if r["applicable"]}
            self.assertEqual(list(rows), ["python", "pybind11", "binding", "dispatch", "library"], op["op"])
            self.assertEqual(rows["python"]["names"], [op["op"]])
            self.assertEqual(rows["python"]["time"]["count"], 1)
        self.assertEqual([s[1] for s in p.spans() if s[0] == "python"], ["strata.select", "strata.slice"])

    def test_from_numpy_of_a_strided_array_is_a_strided_view(self):
        # As torch.from_numpy: the array's memory, its strides (in elements), no copy; writes either way.
        a = np.arange(12.).reshape(3, 4)
        cases = [("x[:, ::2]", a[:, ::2], (4, 2)), ("x.T", a.T, (1, 4)), ("x[::2, 1:]", a[::2, 1:], (8, 1)),
                 ("x[1:, ::3].T", a[1:, ::3].T, (3, 4))]
        for what, array, strides in cases:
            with self.subTest(what=what):
                t = strata.from_numpy(array)
                self.assertEqual(t.shape, array.shape)
                self.assertEqual(tuple(t.stride(i) for i in range(t.ndim)), strides)
                self.assertEqual(strides_in_elements(array), strides)
                self.assertFalse(t.is_contiguous())
                self.assertEqual(t.data_ptr(), array.ctypes.data)
                np.testing.assert_array_equal(t.numpy(), array)
                np.testing.assert_array_equal(t.contiguous().numpy(), array)  # a kernel reads it as it lies
        x = np.arange(12.).reshape(3, 4)
        t = strata.from_numpy(x[:, ::2])
        x[2, 2] = -5.0  # numpy's write, seen through the tensor
        self.assertEqual(t.numpy()[2, 1], -5.0)
        t.add_(strata.from_numpy(np.full((3, 2), 100.0)))  # the tensor's write, seen through numpy
        np.testing.assert_array_equal(x, [[100, 1, 102, 3], [104, 5, 106, 7], [108, 9, 95, 11]])
        np.testing.assert_array_equal(strata.relu(t).numpy(), x[:, ::2])  # kernels read the strided view

    def test_from_numpy_refuses_what_torch_refuses(self):
        a = np.arange(12.).reshape(3, 4)
        for array in (a[::-1], a[:, ::-2]):
            with self.assertRaises(ValueError) as cm:
                strata.from_numpy(array)
            self.assertIn("At least one stride in the given numpy array is negative", str(cm.exception))
        # Read-only and byte-swapped arrays are still copied first (the tensor may be written).
        for array in (np.broadcast_to(a[:1], (3, 4)), a.astype(">f8")):
            t = strata.from_numpy(array)
            self.assertTrue(t.is_contiguous())
            np.testing.assert_array_equal(t.numpy(), array)


@unittest.skipIf(torch is None, "PyTorch is not in this Python (the peer's environment, scripts/install-python-deps, has it)")
class AgainstTorchTest(unittest.TestCase):
    def test_views_strides_values_and_gradients_agree_with_torch(self):
        seed = random.SystemRandom().randrange(2**32)
        for what, view, _ in CASES:
            with self.subTest(what=what, seed=seed):
                x = strata.randn(4, 6, 5, dtype="float64", seed=seed, requires_grad=True)
                tx = torch.tensor(x.numpy(), requires_grad=True)
                v, tv = view(x), view(tx)
                self.assertEqual(v.shape, tuple(tv.shape))
                np.testing.assert_array_equal(np.asarray(v), tv.detach().numpy())
                if "copy" not in what and v.numel() > 1:
                    for i, s in enumerate(v.shape):
                        if s > 1:
                            self.assertEqual(v.stride(i), tv.stride(i), what)
                    self.assertEqual(v.storage_offset(), tv.storage_offset(), what)
                if v.numel() == 0:
                    continue
                w = strata.randn(*v.shape, dtype="float64", seed=seed + 1) if v.ndim else None
                tw = torch.tensor(w.numpy()) if w is not None else None
                flat = v.contiguous().reshape(1, v.numel())
                (strata.sum(strata.linear(flat, w.reshape(1, v.numel()))) if w is not None else strata.sum(v)).backward()
                ((tv * tw).sum() if tw is not None else tv.sum()).backward()
                np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12, atol=1e-12)


    def test_from_numpy_strides_agree_with_torch(self):
        seed = random.SystemRandom().randrange(2**32)
        a = np.random.default_rng(seed).standard_normal((4, 6, 5))
        # a[:0, ::2]: no element, strides not row-major; torch calls it contiguous, and so does strata.
        for array in (a[:, ::2], a.transpose(2, 0, 1), a[1:3, :, ::4], a[:, 1:2], a[:0, ::2]):
            with self.subTest(shape=array.shape, strides=array.strides, seed=seed):
                t, tt = strata.from_numpy(array), torch.from_numpy(array)
                self.assertEqual(t.shape, tuple(tt.shape))
                self.assertEqual(tuple(t.stride(i) for i in range(t.ndim)), tt.stride())
                self.assertEqual(t.is_contiguous(), tt.is_contiguous())
                np.testing.assert_array_equal(t.numpy(), tt.numpy())
        for array in (a[::-1], a[:, :, ::-1]):
            with self.assertRaises(ValueError) as torch_error:
                torch.from_numpy(array)
            with self.assertRaises(ValueError) as strata_error:
                strata.from_numpy(array)
            self.assertEqual(str(strata_error.exception), str(torch_error.exception))


if __name__ == "__main__":
    unittest.main()
