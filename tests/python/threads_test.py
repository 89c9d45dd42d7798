"""The CPU's threads from Python (Note [Intra-op threads] in lib/parallel.h): strata.set_num_threads and
get_num_threads as torch's, their refusals, the same bits on 1, 2 and 3 threads for the vectorised loops,
reductions and copies (sizes that are not a multiple of the vector width or of the grain, NaN, infinities,
signed zeros, broadcast and strided inputs), the same results when several Python threads call at once,
what the reports say, and agreement with torch on the same inputs where torch is importable. Runs under
ctest with PYTHONPATH pointing at build/python."""
import os
import random
import subprocess
import sys
import threading
import unittest

import numpy as np

import strata

try:
    import torch
except ImportError:
    torch = None

N = 3 * 32768 + 13  # past the grain on every thread count, and not a multiple of any vector width


def values(seed, n=N, specials=True):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-4, 4, size=n).astype(np.float32)
    if specials:
        idx = rng.choice(n, size=64, replace=False)
        x[idx] = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30, -1e-30, 80.0] * 8, dtype=np.float32)
    return x


def calls(x, y, m):
    """Every kernel the threads split, as (name, result)."""
    return [("relu", strata.relu(x)), ("tanh", strata.tanh(x)), ("gelu", strata.gelu(x)), ("silu", strata.silu(x)),
            ("add", strata.add(x, y, alpha=0.5)), ("div", strata.div(x, y)), ("mul.Scalar", strata.mul(x, 3.0)),
            ("pow 2.5", strata.pow(y, 2.5)), ("pow 3", strata.pow(x, 3.0)),
            ("gelu_backward", strata.gelu_backward(y, x)), ("sum", strata.sum(y)), ("mean", strata.mean(y)),
            ("sum(-1)", strata.sum(m, -1)), ("sum(0)", strata.sum(m, 0)),
            ("row broadcast add", strata.add(m, m[0])), ("transposed copy", m.t().contiguous()),
            ("f16 round trip", x.to(strata.float16).to(strata.float32))]


def as_bits(t):
    a = np.ascontiguousarray(t.numpy())
    return a.view(np.uint32 if a.dtype == np.float32 else np.uint16)


class ThreadsTest(unittest.TestCase):
    def setUp(self):
        self.seed = random.randrange(2**32)
        self.saved = strata.get_num_threads()

    def tearDown(self):
        strata.set_num_threads(self.saved)

    def test_set_and_get(self):
        for n in (1, 2, 3, 256):
            strata.set_num_threads(n)
            self.assertEqual(strata.get_num_threads(), n)

    def test_refusals(self):
        for bad in (0, -1, 257, 2**70, -2**70):
            with self.subTest(bad=bad), self.assertRaises(strata.UsageError):
                strata.set_num_threads(bad)
        for bad in ("2", 2.0, True, None, [2]):
            with self.subTest(bad=bad), self.assertRaises(TypeError):
                strata.set_num_threads(bad)
        self.assertEqual(strata.get_num_threads(), self.saved)

    def test_same_bits_on_every_thread_count(self):
        x = strata.from_numpy(values(self.seed))
        y = strata.from_numpy(np.abs(values(self.seed + 1, specials=False)) + 0.5)
        m = strata.from_numpy(values(self.seed + 2, n=301 * 1031, specials=False).reshape(301, 1031))
        results = {}
        for threads in (1, 2, 3):
            strata.set_num_threads(threads)
            results[threads] = [(name, as_bits(t)) for name, t in calls(x, y, m)]
        for threads in (2, 3):
            for (name, got), (_, want) in zip(results[threads], results[1]):
                with self.subTest(op=name, threads=threads, seed=self.seed):
                    np.testing.assert_array_equal(got, want)

    def test_several_python_threads_at_once(self):
        strata.set_num_threads(2)
        x = strata.from_numpy(values(self.seed))
        y = strata.from_numpy(np.abs(values(self.seed + 1, specials=False)) + 0.5)
        m = strata.from_numpy(values(self.seed + 2, n=64 * 2048, specials=False).reshape(64, 2048))
        want = [(name, as_bits(t)) for name, t in calls(x, y, m)]
        errors = []

        def worker():
            try:
                for _ in range(3):
                    for (name, got), (_, w) in zip([(n, as_bits(t)) for n, t in calls(x, y, m)], want):
                        if not np.array_equal(got, w):
                            errors.append(name)
            except Exception as e:  # noqa: BLE001: reported below, with the seed
                errors.append(repr(e))

        threads = [threading.Thread(target=worker) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [], f"seed {self.seed}")

    def test_reports_name_the_threads(self):
        strata.set_num_threads(2)
        x = strata.from_numpy(values(self.seed, specials=False))
        small = strata.from_numpy(values(self.seed, n=100, specials=False))
        with strata.profile() as p:
            strata.tanh(x)
            strata.tanh(small)
        ops = p.json()["ops"]
        env = ops[0]["environment"]
        self.assertEqual(env["intra_op_threads"], 2)
        self.assertEqual(env["intra_op_threads_source"], "strata.set_num_threads")
        self.assertTrue(env["cpu_loops"])
        names = [n for op in ops for row in op["steady"]["rows"] if row["layer"] == "library" for n in row["names"]]
        self.assertTrue(any(n.endswith(", 2 threads)") for n in names), names)  # 98K elements, split in two
        self.assertTrue(any(n.endswith(", 1 thread)") for n in names), names)   # 100, below the grain: not

    def test_bad_environment_variable_fails_the_import(self):
        env = dict(os.environ, STRATA_NUM_THREADS="0")
        r = subprocess.run([sys.executable, "-c", "import strata"], env=env, capture_output=True, text=True)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("STRATA_NUM_THREADS", r.stderr)
        env["STRATA_NUM_THREADS"] = "3"
        r = subprocess.run([sys.executable, "-c", "import strata; print(strata.get_num_threads())"], env=env,
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "3")

    @unittest.skipIf(torch is None, "torch is not importable here")
    def test_vectorised_ops_agree_with_torch(self):
        # SLEEF's functions on both sides (1 ulp), specials included: 1e-5 relative, and a few ulp of the
        # terms (|x| <= 4) absolute where a result is small after a cancellation (gelu's 1 + erf(x) at x < -3).
        strata.set_num_threads(2)
        torch.set_num_threads(2)
        a = values(self.seed)
        x, tx = strata.from_numpy(a), torch.from_numpy(a)
        pairs = [("tanh", strata.tanh(x), torch.tanh(tx)), ("gelu", strata.gelu(x), torch.nn.functional.gelu(tx)),
                 ("silu", strata.silu(x), torch.nn.functional.silu(tx)), ("relu", strata.relu(x), torch.relu(tx)),
                 ("pow 2.5", strata.pow(x, 2.5), torch.pow(tx, 2.5)), ("pow 3", strata.pow(x, 3.0), torch.pow(tx, 3.0)),
                 ("pow -0.5", strata.pow(x, -0.5), torch.pow(tx, -0.5))]
        # torch's f32 gelu gives NaN at +inf and -inf (its vectorised erf path; its f64 gelu gives inf and
        # -0, as strata's f32 does): compared where the input is finite.
        finite = np.isfinite(a)
        for name, got, want in pairs:
            with self.subTest(op=name, seed=self.seed):
                g, w = got.numpy().astype(np.float64), want.numpy().astype(np.float64)
                if name == "gelu":
                    g, w = g[finite], w[finite]
                np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
                np.testing.assert_allclose(g, w, rtol=1e-5, atol=4e-6)


if __name__ == "__main__":
    unittest.main()
