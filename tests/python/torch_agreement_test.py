"""strata's pointwise ops of the tanh GELU (mul, sub, tanh, pow, and the scalar overloads) and div against PyTorch on
the same inputs: random values, NaN, +-inf, signed zeros and empty tensors, forward and gradients.

Run by ctest under the peer's Python (the PyTorch 2.x virtual environment, cmake/PeerPython.cmake), with
strata's package on PYTHONPATH: both are imported in one process, so each input is the same bits on both
sides. Without that environment ctest does not register this test (it says why instead)."""
import math
import random
import unittest

import numpy as np
import torch

import strata
from ieee_specials import same

# (strata's public function, torch's, extra arguments after the tensors)
CASES = [
    ("mul", lambda a, b: strata.mul(a, b), lambda a, b: torch.mul(a, b), 2),
    ("mul.Scalar", lambda a: strata.mul(a, 0.044715), lambda a: torch.mul(a, 0.044715), 1),
    ("add.Scalar", lambda a: strata.add(a, 1.0), lambda a: torch.add(a, 1.0), 1),
    ("add.Scalar alpha", lambda a: strata.add(a, 3.0, 0.5), lambda a: torch.add(a, 3.0, alpha=0.5), 1),
    ("sub", lambda a, b: strata.sub(a, b), lambda a, b: torch.sub(a, b), 2),
    ("sub alpha", lambda a, b: strata.sub(a, b, alpha=-0.25), lambda a, b: torch.sub(a, b, alpha=-0.25), 2),
    ("sub.Scalar", lambda a: strata.sub(a, 0.5), lambda a: torch.sub(a, 0.5), 1),
    ("tanh", lambda a: strata.tanh(a), lambda a: torch.tanh(a), 1),
    ("pow 3", lambda a: strata.pow(a, 3.0), lambda a: torch.pow(a, 3.0), 1),
    ("pow 2", lambda a: strata.pow(a, 2), lambda a: torch.pow(a, 2), 1),
    ("pow 0.5", lambda a: strata.pow(a, 0.5), lambda a: torch.pow(a, 0.5), 1),
    ("pow 0", lambda a: strata.pow(a, 0.0), lambda a: torch.pow(a, 0.0), 1),
    ("pow -1", lambda a: strata.pow(a, -1.0), lambda a: torch.pow(a, -1.0), 1),
    ("div", lambda a, b: strata.div(a, b), lambda a, b: torch.div(a, b), 2),
    ("div.Scalar", lambda a: strata.div(a, -0.3), lambda a: torch.div(a, -0.3), 1),
    ("rtruediv", lambda a: 2.0 / a, lambda a: 2.0 / a, 1),
]
DTYPES = {"float32": (np.float32, torch.float32, 1e-6), "float64": (np.float64, torch.float64, 1e-13)}
SPECIALS = [math.nan, math.inf, -math.inf, 0.0, -0.0, 1.0, -1.0, 2.5, -3.0, 1e-30, 40.0]



class TorchAgreementTest(unittest.TestCase):
    def run_case(self, name, ours, theirs, n_tensors, values_of):
        for dtype, (np_dtype, torch_dtype, rtol) in DTYPES.items():
            with self.subTest(op=name, dtype=dtype):
                arrays = [values_of(i).astype(np_dtype) for i in range(n_tensors)]
                got = ours(*[strata.from_numpy(a.copy()) for a in arrays]).numpy()
                want = theirs(*[torch.from_numpy(a.copy()) for a in arrays]).numpy()
                same(self, got, want, rtol, f"{name} {dtype}")

    def test_random_values(self):
        seed = random.SystemRandom().randrange(2**32)
        rng = np.random.default_rng(seed)
        for name, ours, theirs, n in CASES:
            shape = tuple(int(s) for s in rng.integers(1, 9, size=int(rng.integers(1, 4))))
            with self.subTest(seed=seed):
                # In [-4, 4): both tails of tanh; pow 0.5 gives NaN for the negatives on both sides.
                self.run_case(name, ours, theirs, n, lambda i: rng.uniform(-4, 4, size=shape))

    def test_nan_inf_and_signed_zeros(self):
        values = np.array(SPECIALS)
        for name, ours, theirs, n in CASES:
            # The second operand is the first reversed, so every pair of specials meets some other one.
            self.run_case(name, ours, theirs, n, lambda i: values if i == 0 else values[::-1].copy())

    def test_empty_tensors(self):
        for name, ours, theirs, n in CASES:
            self.run_case(name, ours, theirs, n, lambda i: np.zeros((0, 3)))

    def test_gradients_agree(self):
        """y.backward(g) through strata's engine and torch's autograd, on the same x and upstream g."""
        seed = random.SystemRandom().randrange(2**32)
        rng = np.random.default_rng(seed)
        for name, ours, theirs, n in CASES:
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
                    ours(*xs).backward(strata.from_numpy(upstream.copy()))
                    ts = [torch.from_numpy(a.copy()).requires_grad_() for a in arrays]
                    theirs(*ts).backward(torch.from_numpy(upstream.copy()))
                    for i, (x, t) in enumerate(zip(xs, ts)):
                        same(self, x.grad.numpy(), t.grad.numpy(), 4 * rtol, f"{name} {dtype} d/d input {i}")


if __name__ == "__main__":
    unittest.main()
