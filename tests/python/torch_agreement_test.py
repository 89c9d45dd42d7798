"""strata's pointwise ops of the tanh GELU (mul, sub, tanh, pow, and the scalar overloads) and div against PyTorch on
the same inputs: random values, NaN, +-inf, signed zeros and empty tensors, forward and gradients.

Run by ctest under the peer's Python (the PyTorch 2.x virtual environment, cmake/PeerPython.cmake), with
strata's package on PYTHONPATH: both are imported in one process, so each input is the same bits on both
sides. Without that environment ctest does not register this test (it says why instead).

Two lists of cases: DERIVED, read from the declarations (strata._strata.operators(): every op whose
declaration names its torch function, kTorchName, and that takes one or two tensors and nothing else that
has no default, and is elementwise), so that a new pointwise op is covered with no edit here; and CASES by
hand, for the calls with arguments of other kinds (scalars, exponents, alpha)."""
import functools
import math
import random
import sys
import unittest

import numpy as np
import torch

import strata
from ieee_specials import same

# (name, strata's function, torch's, how many tensors): the calls with arguments other than tensors (the
# tensor-only calls of these ops, mul, sub, tanh, div, are DERIVED's).
CASES = [
    ("mul.Scalar", lambda a: strata.mul(a, 0.044715), lambda a: torch.mul(a, 0.044715), 1),
    ("add.Scalar", lambda a: strata.add(a, 1.0), lambda a: torch.add(a, 1.0), 1),
    ("add.Scalar alpha", lambda a: strata.add(a, 3.0, 0.5), lambda a: torch.add(a, 3.0, alpha=0.5), 1),
    ("sub alpha", lambda a, b: strata.sub(a, b, alpha=-0.25), lambda a, b: torch.sub(a, b, alpha=-0.25), 2),
    ("sub.Scalar", lambda a: strata.sub(a, 0.5), lambda a: torch.sub(a, 0.5), 1),
    ("pow 3", lambda a: strata.pow(a, 3.0), lambda a: torch.pow(a, 3.0), 1),
    ("pow 2", lambda a: strata.pow(a, 2), lambda a: torch.pow(a, 2), 1),
    ("pow 0.5", lambda a: strata.pow(a, 0.5), lambda a: torch.pow(a, 0.5), 1),
    ("pow 0", lambda a: strata.pow(a, 0.0), lambda a: torch.pow(a, 0.0), 1),
    ("pow -1", lambda a: strata.pow(a, -1.0), lambda a: torch.pow(a, -1.0), 1),
    ("div.Scalar", lambda a: strata.div(a, -0.3), lambda a: torch.div(a, -0.3), 1),
    ("rtruediv", lambda a: 2.0 / a, lambda a: 2.0 / a, 1),
]
DTYPES = {"float32": (np.float32, torch.float32, 1e-6), "float64": (np.float64, torch.float64, 1e-13)}
SPECIALS = [math.nan, math.inf, -math.inf, 0.0, -0.0, 1.0, -1.0, 2.5, -3.0, 1e-30, 40.0, -100.0, -1000.0]
# Where strata and torch differ on purpose, by (op, dtype): {input: strata's value}, taken instead of torch's.
DELIBERATE = {
    # torch's float32 gelu on the CPU (its vectorised erf) gives NaN at +inf; x * Phi(x) is +inf there, which
    # is strata's value and torch's own in float64 (whose case keeps torch's value).
    ("gelu", "float32"): {math.inf: math.inf},
}
# Absolute tolerances, by (op, dtype), where the error of both sides is absolute. gelu is x/2 * (1 + erf(x/sqrt 2))
# on both (PyTorch's exact form, strata's math::Gelu): for negative x, 1 + erf cancels, so each side is off by
# about |x| * eps / 2 whatever its erf, and the two erfs differ (torch's float32 one is a vectorised
# approximation: up to 6e-3 relative error near x = -4 against erfc, strata's erff 5e-4; 1.2e-6 apart at most
# in absolute terms over [-8, 8], 4.4e-16 in float64). An erfc form would avoid the cancellation in strata,
# but not in torch, and would no longer be PyTorch's formula.
ABSOLUTE = {("gelu", "float32"): 2e-6, ("gelu", "float64"): 2e-15}


def torch_function(dotted):
    """A declaration's kTorchName ("torch.nn.functional.silu", "torch.Tensor.relu_") as torch's callable."""
    target = torch
    for part in dotted.split(".")[1:]:
        target = getattr(target, part)
    return target


def tensor_only(op):
    """How many tensors op takes if it takes one or two tensors and nothing else but keyword-only arguments
    with defaults (add's alpha), else 0. A positional number with a default (mul.Scalar's other=1) is not
    tensor-only: torch's function (torch.mul) requires it."""
    positional = [a for a in op["arguments"] if not a["keyword_only"]]
    required = [a for a in positional if not a["has_default"]]
    if 1 <= len(required) <= 2 and all(a["type"] in ("Tensor", "Tensor?") for a in positional):
        return len(required)
    return 0


def elementwise(fn, n_tensors, module, from_numpy):
    """The output shape of fn on n tensors of one shape (2, 3), or the exception's type name if it refuses."""
    try:
        return tuple(fn(*[from_numpy(np.full((2, 3), 0.5)) for _ in range(n_tensors)]).shape)
    except Exception as error:  # noqa: BLE001: any refusal counts; the two sides' are compared, not their kinds
        return type(error).__name__


@functools.cache
def derived():
    """(cases, others, disagreements): the tensor-only ops with a kTorchName that are elementwise on both sides,
    as CASES' tuples; the names of those that neither side treats as elementwise (matmul: covered by their
    own tests); and the ops where strata and torch disagree about that."""
    cases, others, disagreements = [], [], []
    for op in strata._strata.operators():
        n = tensor_only(op)
        if op["torch_name"] is None or n == 0:
            continue
        ours, theirs = strata.OPERATORS[op["name"]], torch_function(op["torch_name"])
        shape_ours = elementwise(ours, n, strata, strata.from_numpy)
        shape_theirs = elementwise(theirs, n, torch, torch.from_numpy)
        if shape_ours == (2, 3) and shape_theirs == (2, 3):
            cases.append((op["name"], ours, theirs, n))
        elif shape_ours != (2, 3) and shape_theirs != (2, 3):
            others.append(op["name"])
        else:
            disagreements.append(f"{op['name']}: strata gives {shape_ours}, {op['torch_name']} {shape_theirs}")
    return cases, others, disagreements


class TorchAgreementTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cases, others, _ = derived()
        # In the test's output, so that a reader sees which ops the declarations gave (a new one among them).
        print(f"derived from the declarations: {', '.join(c[0] for c in cases)}; "
              f"not elementwise (not derived): {', '.join(others)}", file=sys.stderr)

    def all_cases(self):
        return derived()[0] + CASES

    def test_derived_cases(self):
        cases, others, disagreements = derived()
        # An empty list would let every test below pass on the hand list alone.
        self.assertTrue(cases, "no operator derived from the declarations (strata._strata.operators())")
        self.assertEqual(disagreements, [], "strata and torch disagree on which ops are elementwise")
        self.assertEqual(len({c[0] for c in cases} & {c[0] for c in CASES}), 0, "a hand case repeats a derived one")

    def run_case(self, name, ours, theirs, n_tensors, values_of):
        for dtype, (np_dtype, torch_dtype, rtol) in DTYPES.items():
            with self.subTest(op=name, dtype=dtype):
                arrays = [values_of(i).astype(np_dtype) for i in range(n_tensors)]
                got = ours(*[strata.from_numpy(a.copy()) for a in arrays]).numpy()
                want = theirs(*[torch.from_numpy(a.copy()) for a in arrays]).numpy()
                for value, ours_there in DELIBERATE.get((name, dtype), {}).items():
                    want = np.where(arrays[0] == value, np.array(ours_there, dtype=np_dtype), want)
                atol = ABSOLUTE.get((name, dtype), 0.0)
                if name.endswith("_backward"):
                    # A derivative formula crosses zero (silu's near x = -1.28) as a difference of terms the
                    # size of the largest: near the crossing its error is relative to the tensor's scale.
                    finite = np.abs(want[np.isfinite(want)])
                    atol = max(atol, rtol * float(finite.max()) if finite.size else 0.0)
                same(self, got, want, rtol, f"{name} {dtype}", atol)

    def test_random_values(self):
        seed = random.SystemRandom().randrange(2**32)
        rng = np.random.default_rng(seed)
        for name, ours, theirs, n in self.all_cases():
            shape = tuple(int(s) for s in rng.integers(1, 9, size=int(rng.integers(1, 4))))
            with self.subTest(seed=seed):
                # In [-4, 4): both tails of tanh; pow 0.5 gives NaN for the negatives on both sides.
                self.run_case(name, ours, theirs, n, lambda i: rng.uniform(-4, 4, size=shape))

    def test_nan_inf_and_signed_zeros(self):
        values = np.array(SPECIALS)
        for name, ours, theirs, n in self.all_cases():
            # The second operand is the first reversed, so every pair of specials meets some other one.
            self.run_case(name, ours, theirs, n, lambda i: values if i == 0 else values[::-1].copy())

    def test_empty_tensors(self):
        for name, ours, theirs, n in self.all_cases():
            self.run_case(name, ours, theirs, n, lambda i: np.zeros((0, 3)))

    def test_gradients_agree(self):
        """y.backward(g) through strata's engine and torch's autograd, on the same x and upstream g."""
        seed = random.SystemRandom().randrange(2**32)
        rng = np.random.default_rng(seed)
        checked, refused, no_node, no_derivative = set(), set(), set(), set()
        for name, ours, theirs, n in self.all_cases():
            for dtype, (np_dtype, torch_dtype, rtol) in DTYPES.items():
                with self.subTest(op=name, dtype=dtype, seed=seed):
                    # Away from 0, where pow -1 and pow 0.5 are smooth; both signs where the op allows.
                    positive = name in ("pow 0.5",)
                    arrays = [rng.uniform(0.5, 2, size=(3, 4)) * (1 if positive else rng.choice([-1, 1], size=(3, 4)))
                              for _ in range(n)]
                    arrays = [a.astype(np_dtype) for a in arrays]
                    upstream = rng.uniform(-1, 1, size=(3, 4)).astype(np_dtype)
                    xs = [strata.from_numpy(a.copy()) for a in arrays]
                    for x in xs:
                        x.requires_grad = True
                    ts = [torch.from_numpy(a.copy()).requires_grad_() for a in arrays]
                    try:
                        y = ours(*xs)
                    except strata.UsageError as refusal:
                        # An in-place op on a leaf that requires grad: torch refuses it too.
                        with self.assertRaises(RuntimeError, msg=f"{name}: strata refused ({refusal}), torch not"):
                            theirs(*ts)
                        refused.add(name)
                        continue
                    if y.grad_fn is None:
                        no_node.add(name)  # strata records no backward node: not differentiable in strata
                        continue
                    try:
                        y.backward(strata.from_numpy(upstream.copy()))
                    except strata.UnavailableError:
                        # A gradient op (silu_backward): its node says strata has no higher-order gradients.
                        no_derivative.add(name)
                        continue
                    checked.add(name)
                    theirs(*ts).backward(torch.from_numpy(upstream.copy()))
                    for i, (x, t) in enumerate(zip(xs, ts)):
                        # A derivative that crosses zero (silu's near x = -1.28) is a difference of terms the
                        # size of the largest: its error is relative to the tensor's scale there, not to the
                        # element, so the bound has an absolute part scaled by the largest gradient.
                        want = t.grad.numpy()
                        scale = float(np.abs(want).max()) if want.size else 0.0
                        same(self, x.grad.numpy(), want, 4 * rtol, f"{name} {dtype} d/d input {i}",
                             atol=4 * rtol * scale)
        print(f"gradients checked: {', '.join(sorted(checked))}; refused on a leaf by both (in-place): "
              f"{', '.join(sorted(refused)) or '-'}; no backward node in strata: {', '.join(sorted(no_node)) or '-'}; "
              f"no derivative in strata (higher order): {', '.join(sorted(no_derivative)) or '-'}",
              file=sys.stderr)
        self.assertTrue(checked & {c[0] for c in derived()[0]}, "no derived op's gradient was checked")


if __name__ == "__main__":
    unittest.main()
