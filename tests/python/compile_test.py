"""tests/python: strata.compile (apps/python/strata/_compile.py over layers/compiler): compiled results
against eager and a float64 numpy reference on fresh random inputs (the seed is in every failure message),
guards and recompiles with their reasons, graph breaks with theirs, backward through a compiled function
against eager's gradients, the cold phases and a cache hit, and the refusals. The JIT runs the system C++
compiler into a temporary cache. Runs under ctest with PYTHONPATH pointing at build/python."""
import math
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

import numpy as np

import strata

TOLERANCE = {"float64": 1e-12, "float32": 1e-5}
_erf = np.vectorize(math.erf)
CACHE = tempfile.mkdtemp(prefix="strata-compile-test-")
os.environ["STRATA_CACHE_DIR"] = CACHE  # for the compiles that name no cache_dir


def tearDownModule():
    shutil.rmtree(CACHE, ignore_errors=True)


def relative_error(out, ref):
    return float(np.linalg.norm(out - ref) / np.linalg.norm(np.maximum(np.abs(ref), 0.25)))


def gelu64(z):
    return 0.5 * z * (1 + _erf(z / math.sqrt(2)))


# The functions compiled, each with its float64 reference over numpy arrays.
def relu_matmul(x, w):
    return strata.relu(strata.matmul(x, w))


def linear_gelu(x, w, b):
    return strata.gelu(strata.linear(x, w, b))


def add_tree(x, y):
    return strata.relu(strata.add(strata.gelu(strata.add(x, y, alpha=0.5)), x))


def gelu_tanh(x):  # the tanh GELU, seven pointwise ops in one generated loop
    inner = strata.mul(strata.add(x, strata.mul(strata.pow(x, 3.0), 0.044715)), math.sqrt(2 / math.pi))
    return strata.mul(strata.mul(x, 0.5), strata.add(strata.tanh(inner), 1.0))


def two_outputs(x, w):
    h = strata.matmul(x, w)
    return strata.relu(h), strata.gelu(h)


REFERENCES = {
    relu_matmul: lambda x, w: np.maximum(x @ w, 0),
    linear_gelu: lambda x, w, b: gelu64(x @ w.T + b),
    add_tree: lambda x, y: np.maximum(gelu64(x + 0.5 * y) + x, 0),
    gelu_tanh: lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))),
}


class CompileTest(unittest.TestCase):
    def setUp(self):
        self.seed = random.SystemRandom().randrange(2**32)
        self.rng = random.Random(self.seed)

    def t(self, *shape, dtype="float32", requires_grad=False):
        return strata.randn(*shape, dtype=dtype, seed=self.rng.randrange(2**63), requires_grad=requires_grad)

    def inputs(self, fn, dtype):
        m, k, n = (self.rng.randrange(3, 40) for _ in range(3))
        if fn is relu_matmul:
            return [self.t(m, k, dtype=dtype), self.t(k, n, dtype=dtype)]
        if fn is linear_gelu:
            return [self.t(m, k, dtype=dtype), self.t(n, k, dtype=dtype), self.t(n, dtype=dtype)]
        if fn is gelu_tanh:
            return [self.t(m, n, dtype=dtype)]
        return [self.t(m, n, dtype=dtype), self.t(m, n, dtype=dtype)]

    def close(self, out, ref, dtype, what):
        err = relative_error(out, ref)
        self.assertLessEqual(err, TOLERANCE[dtype], f"{what} {dtype}: relative error {err:.3g} (seed {self.seed})")

    def test_compiled_against_eager_and_the_float64_reference(self):
        for fn, ref in REFERENCES.items():
            for dtype in TOLERANCE:
                compiled = strata.compile(fn, cache_dir=CACHE)
                first = self.inputs(fn, dtype)
                compiled(*first)
                # Fresh values of the same shapes: the compiled version runs, no recompile.
                args = [self.t(*a.shape, dtype=dtype) for a in first]
                out = compiled(*args)
                self.assertEqual(len(compiled.versions), 1)
                self.assertEqual(compiled.recompiles, [])
                self.assertIsInstance(out, strata.Tensor)
                self.assertEqual(out.dtype, dtype)
                what = f"{fn.__name__}"
                self.close(out.numpy_float64(), ref(*[a.numpy_float64() for a in args]), dtype, what + " vs float64")
                self.close(out.numpy_float64(), fn(*args).numpy_float64(), dtype, what + " vs eager")
                self.assertEqual(compiled.versions[0].calls, 2)

    def test_gelu_tanh_is_one_kernel_and_its_backward_matches_eager(self):
        for dtype in TOLERANCE:
            compiled = strata.compile(gelu_tanh, cache_dir=CACHE)
            x = self.t(33, 17, dtype=dtype, requires_grad=True)
            y = compiled(x)
            self.assertEqual([k["kind"] for k in compiled.kernels], ["pointwise"], compiled.plan)
            self.assertEqual(len(compiled.versions[0].ops), 8)  # mul(x, 0.5) besides the seven of the formula
            strata.sum(y).backward()
            got = x.grad.numpy_float64()
            x._zero_grad()
            strata.sum(gelu_tanh(x)).backward()
            self.close(got, x.grad.numpy_float64(), dtype, "gelu_tanh grad vs eager")

    def test_plan_listing_code_and_several_outputs(self):
        compiled = strata.compile(two_outputs, cache_dir=CACHE)
        x, w = self.t(9, 7, dtype="float64"), self.t(7, 5, dtype="float64")
        relu, gelu = compiled(x, w)
        h = x.numpy_float64() @ w.numpy_float64()
        self.close(relu.numpy_float64(), np.maximum(h, 0), "float64", "relu output")
        self.close(gelu.numpy_float64(), gelu64(h), "float64", "gelu output")
        self.assertIn("= matmul(%0, %1)", compiled.graph)
        self.assertEqual(compiled.versions[0].ops, ["matmul", "relu", "gelu"])
        # h has two users: written once by the (extern) GEMM, then one kernel per output.
        kinds = [k["kind"] for k in compiled.kernels]
        self.assertEqual(kinds, ["extern", "pointwise", "pointwise"], compiled.plan)
        self.assertIn("nothing fused after it", compiled.kernels[0]["extern_reason"])
        self.assertIn("strata_kernel", compiled.code)
        self.assertEqual(compiled.explain().graph_count, 1)
        self.assertEqual(compiled.explain().ops_per_graph, [["matmul", "relu", "gelu"]])

    def test_guards_recompile_and_say_why(self):
        @strata.compile(cache_dir=CACHE)
        def scaled(x, alpha):
            return strata.relu(strata.add(x, x, alpha=alpha))

        x = self.t(4, 8)
        scaled(x, 0.5)
        scaled(self.t(4, 8), 0.5)  # same guards
        self.assertEqual(len(scaled.versions), 1)
        scaled(self.t(8, 8), 0.5)
        scaled(self.t(8, 8, dtype="float64"), 0.5)
        out = scaled(x, -2.0)
        self.assertEqual([r["reasons"] for r in scaled.recompiles],
                         [["x: shape [4, 8] -> [8, 8]"], ["x: dtype float32 -> float64"],
                          ["x: shape [8, 8] -> [4, 8]", "x: dtype float64 -> float32", "alpha: value 0.5 -> -2.0"]])
        self.assertEqual([r["version"] for r in scaled.recompiles], [1, 2, 3])
        self.close(out.numpy_float64(), np.maximum(x.numpy_float64() * -1.0, 0), "float32", "alpha=-2")
        # An earlier version is kept: its guards pass again, nothing recompiles.
        scaled(self.t(8, 8), 0.5)
        self.assertEqual(len(scaled.versions), 4)
        self.assertEqual(scaled.versions[1].calls, 2)
        scaled(x, 0.5)
        self.assertEqual(len(scaled.recompiles), 3)
        self.assertEqual(scaled.versions[0].calls, 3)

    def test_a_constant_guard_compares_bits_signed_zeros_and_nan(self):
        # mul(x, -0.0) and mul(x, 0.0) differ in the sign of every zero: -0.0 == 0.0 must not reuse a version.
        @strata.compile(cache_dir=CACHE)
        def scaled(x, s):
            return strata.mul(x, s)

        x = self.t(3, 5)
        pos = scaled(x, 0.0).numpy()
        neg = scaled(x, -0.0).numpy()
        self.assertEqual(len(scaled.versions), 2)
        self.assertEqual(scaled.recompiles[0]["reasons"], ["s: value 0.0 -> -0.0"])
        self.assertEqual(int(np.signbit(pos[x.numpy() > 0]).sum()), 0)
        self.assertEqual(int(np.signbit(neg[x.numpy() > 0]).sum()), int((x.numpy() > 0).sum()))
        scaled(x, float("nan"))
        scaled(x, float("nan"))  # another NaN object, the same bits: the same version
        scaled(x, (-0.0) * 1)
        self.assertEqual(len(scaled.versions), 3)

    def test_a_recompile_for_a_new_shape_is_a_cache_hit(self):
        cache = tempfile.mkdtemp(prefix="strata-compile-shape-")
        try:
            compiled = strata.compile(add_tree, cache_dir=cache)
            compiled(self.t(4, 8), self.t(4, 8))
            compiled(self.t(16, 3), self.t(16, 3))
            self.assertEqual([(v.timings["cache_misses"], v.timings["cache_hits"]) for v in compiled.versions],
                             [(1, 0), (0, 1)])
            self.assertEqual(compiled.versions[0].builds[0]["key"], compiled.versions[1].builds[0]["key"])
        finally:
            shutil.rmtree(cache, ignore_errors=True)

    def test_one_tensor_passed_twice_is_a_guard(self):
        compiled = strata.compile(add_tree, cache_dir=CACHE)
        x, y = self.t(3, 3), self.t(3, 3)
        compiled(x, x)
        out = compiled(x, y)
        self.assertEqual(compiled.recompiles[0]["reasons"], ["aliasing of tensor arguments: (0, 0) -> (0, 1)"])
        self.close(out.numpy_float64(), REFERENCES[add_tree](x.numpy_float64(), y.numpy_float64()), "float32", "out")

    def test_a_compiled_function_inside_another_is_inlined(self):
        inner = strata.compile(relu_matmul, cache_dir=CACHE)
        outer = strata.compile(lambda x, w, y: strata.add(inner(x, w), y), cache_dir=CACHE)
        x, w, y = self.t(5, 4), self.t(4, 3), self.t(5, 3)
        out = outer(x, w, y)
        self.assertEqual(outer.versions[0].ops, ["matmul", "relu", "add"])
        self.assertEqual(inner.versions, [])
        ref = np.maximum(x.numpy_float64() @ w.numpy_float64(), 0) + y.numpy_float64()
        self.close(out.numpy_float64(), ref, "float32", "outer(inner)")

    def test_autocast_state_is_a_guard(self):
        compiled = strata.compile(relu_matmul, cache_dir=CACHE)
        x, w = self.t(6, 5), self.t(5, 4)
        self.assertEqual(compiled(x, w).dtype, "float32")
        with strata.autocast("bf16"):
            out = compiled(x, w)
        self.assertEqual(out.dtype, "bfloat16")
        self.assertEqual(compiled.recompiles[0]["reasons"], ["autocast: off -> bf16"])
        # bf16 has no generated code: both ops stay extern, and explain says why.
        self.assertEqual([k["kind"] for k in compiled.versions[1].kernels], ["extern", "extern"])
        self.assertIn("bf16", compiled.versions[1].kernels[1]["extern_reason"])

    def test_more_tensors_needing_grad_than_a_node_has_edges_run_eagerly(self):
        def add8(a, b, c, d, e, f, g, h):
            return strata.add(strata.add(strata.add(a, b), strata.add(c, d)),
                              strata.add(strata.add(e, f), strata.add(g, h)))

        compiled = strata.compile(add8, cache_dir=CACHE)
        leaves = [self.t(3, 2, requires_grad=True) for _ in range(8)]
        y = compiled(*leaves)
        self.assertEqual(y.grad_fn, "AddBackward")  # eager's own node
        self.assertIn("8 tensors require grad", compiled.eager_calls[0]["reason"])
        strata.sum(y).backward()
        for leaf in leaves:
            self.close(leaf.grad.numpy_float64(), np.ones((3, 2)), "float32", "grad")
        y = compiled(*[self.t(3, 2) for _ in range(8)])  # no grad needed: compiled
        self.assertIsNone(y.grad_fn)

    def test_cache_size_limit_runs_new_keys_eagerly(self):
        compiled = strata.compile(relu_matmul, cache_dir=CACHE, cache_size_limit=2)
        for m in (3, 4, 5):
            x, w = self.t(m, 6), self.t(6, 2)
            out = compiled(x, w)
            self.close(out.numpy_float64(), np.maximum(x.numpy_float64() @ w.numpy_float64(), 0), "float32", "out")
        self.assertEqual(len(compiled.versions), 2)
        self.assertEqual(len(compiled.eager_calls), 1)
        self.assertIn("cache_size_limit (2) reached: x: shape [4, 6] -> [5, 6]", compiled.eager_calls[0]["reason"])

    def test_graph_breaks_run_eagerly_with_their_reasons(self):
        def reads_item(x):
            y = strata.relu(x)
            s = strata.sum(y).item()
            return strata.add(y, y, alpha=s)

        def branches(x):
            y = strata.relu(x)
            if y:
                return y
            return x

        def reads_numpy(x):
            return strata.add(x, x, alpha=float(np.asarray(x).sum()))

        def creates(x):
            return strata.add(x, strata.zeros(*x.shape))

        def returns_float(x):
            return 1.5

        cases = [(reads_item, "Tensor.item()", "s = strata.sum(y).item()"), (branches, "bool(tensor)", "if y:"),
                 (reads_numpy, "np.asarray(tensor)", "np.asarray(x).sum()"),
                 (creates, "strata.zeros()", "strata.zeros(*x.shape)"), (returns_float, "returned float", "returns_float")]
        for fn, reason, line in cases:
            compiled = strata.compile(fn, cache_dir=CACHE)
            x = self.t(5, 3)
            out = compiled(x)
            compiled(self.t(5, 3))  # same guards: eager again, no second break
            explanation = compiled.explain()
            self.assertEqual(explanation.graph_break_count, 1, fn.__name__)
            self.assertEqual(explanation.graph_count, 0, fn.__name__)
            self.assertIn(reason, explanation.break_reasons[0]["reason"])
            self.assertIn(os.path.basename(__file__), explanation.break_reasons[0]["where"])
            self.assertIn(line, explanation.break_reasons[0]["where"])
            self.assertFalse(compiled.versions[0].compiled)
            self.assertEqual(compiled.versions[0].calls, 2)
            if isinstance(out, strata.Tensor):
                self.close(out.numpy_float64(), fn(x).numpy_float64(), "float32", fn.__name__ + " vs eager")
            else:
                self.assertEqual(out, 1.5)
        # Outside a capture the same reads work as ever.
        x = self.t(1, 1)
        self.assertEqual(strata.sum(x).item(), float(x.numpy()[0, 0]))
        self.assertTrue(bool(x))
        self.assertEqual(x.tolist(), [[float(x.numpy()[0, 0])]])

    def test_an_op_with_no_lowering_is_an_extern_kernel_not_a_break(self):
        def widen(x, y):
            return strata.relu(strata.to_copy(strata.add(x, y), dtype="float64"))

        explanation = strata.explain(widen, self.t(6, 4), self.t(6, 4))
        self.assertEqual(explanation.graph_break_count, 0)
        self.assertEqual(explanation.graph_count, 1)
        self.assertEqual(explanation.ops_per_graph, [["add", "to_copy", "relu"]])
        self.assertEqual([e["op"] for e in explanation.extern_kernels], ["to_copy"])
        self.assertIn("no lowering for to_copy", explanation.extern_kernels[0]["reason"])
        compiled = strata.compile(widen, cache_dir=CACHE)
        x, y = self.t(6, 4), self.t(6, 4)
        out = compiled(x, y)
        self.assertEqual(out.dtype, "float64")
        self.close(out.numpy_float64(), np.maximum(x.numpy_float64() + y.numpy_float64(), 0), "float32", "widen")

    def test_backward_through_a_compiled_function_matches_eager(self):
        for dtype in TOLERANCE:
            w_param = self.t(5, dtype=dtype, requires_grad=True)  # a parameter the function closes over

            def model(x, w):
                return strata.add(strata.gelu(strata.linear(x, w, w_param)), strata.linear(x, w, w_param))

            compiled = strata.compile(model, cache_dir=CACHE)
            x, w = self.t(7, 4, dtype=dtype, requires_grad=True), self.t(5, 4, dtype=dtype, requires_grad=True)
            y = compiled(x, w)
            self.assertEqual(y.grad_fn, "CompiledFunctionBackward")
            walk = strata.sum(y).backward()
            self.assertTrue(walk.startswith("SumBackward > CompiledFunctionBackward"), walk)
            compiled_grads = [t.grad.numpy_float64() for t in (x, w, w_param)]
            for t in (x, w, w_param):
                t._zero_grad()
            strata.sum(model(x, w)).backward()
            for got, t, name in zip(compiled_grads, (x, w, w_param), ("x", "w", "bias")):
                self.close(got, t.grad.numpy_float64(), dtype, f"grad of {name} vs eager")
            with self.assertRaises(strata.UsageError):  # the graph was freed after the first backward
                y2 = compiled(x, w)
                strata.sum(y2).backward()
                strata.sum(y2).backward()

    def test_compiled_backward_refuses_an_input_or_parameter_changed_in_place(self):
        # Eager raises torch's error when a tensor a node saved was changed in place; the compiled backward
        # replays from the inputs and parameters, so it must raise too rather than return a wrong gradient.
        w_param = self.t(4, 5, requires_grad=True)
        for changed in ("input", "parameter"):
            compiled = strata.compile(lambda x: strata.relu(strata.matmul(x, w_param)), cache_dir=CACHE)
            x = self.t(3, 4, requires_grad=True)
            y = compiled(x)
            self.assertEqual(y.grad_fn, "CompiledFunctionBackward")
            with strata.no_grad():  # an optimizer's step between forward and backward
                (x if changed == "input" else w_param).mul_(-2.5)
            with self.assertRaises(strata.UsageError) as caught:
                strata.sum(y).backward()
            self.assertIn("modified by an inplace operation", str(caught.exception))
            self.assertIn("expected version", str(caught.exception))
            # Unchanged, the same compiled function's backward runs.
            y = compiled(x)
            strata.sum(y).backward()
            self.assertIsNotNone(x.grad)

    def test_cold_phases_and_a_cache_hit_on_a_second_compile(self):
        cache = tempfile.mkdtemp(prefix="strata-compile-hit-")
        try:
            x, w = self.t(16, 8), self.t(8, 4)
            first = strata.compile(relu_matmul, cache_dir=cache)
            first(x, w)
            cold = first.timings
            for phase in ("capture_ns", "fusion_ns", "codegen_ns", "compile_ns", "load_ns"):
                self.assertGreater(cold[phase], 0, phase)
            self.assertEqual((cold["cache_misses"], cold["cache_hits"]), (1, 0))
            self.assertEqual(cold["cache_dir"], cache)
            second = strata.compile(relu_matmul, cache_dir=cache)
            second(x, w)
            warm = second.timings
            self.assertEqual((warm["cache_misses"], warm["cache_hits"]), (0, 1))
            self.assertEqual(warm["compile_ns"], 0)
            self.assertTrue(second.versions[0].builds[0]["cache_hit"])
            self.assertAlmostEqual(warm["total_ns"], sum(warm[p] for p in ("capture_ns", "fusion_ns", "codegen_ns",
                                                                            "compile_ns", "load_ns")))
        finally:
            shutil.rmtree(cache, ignore_errors=True)

    def test_profile_sees_the_compiled_calls(self):
        compiled = strata.compile(relu_matmul, cache_dir=CACHE)
        x, w = self.t(32, 16), self.t(16, 8)
        compiled(x, w)  # compiled outside the profile
        with strata.profile() as p:
            for _ in range(20):
                compiled(x, w)
            strata.relu(x)
            with self.assertRaises(strata.UsageError):  # a guard refuses inside the run: a failed call
                compiled.versions[0]._compiled.run([x])
        self.assertEqual(p.calls, 21)
        self.assertEqual(p.failed_calls, 1)
        self.assertEqual([name for _, name in p.call_ops()][:2], ["compile(relu_matmul)"] * 2)
        report = next(r for r in p.json()["ops"] if r["op"] == "strata.compile(relu_matmul)")
        layers = {row["layer"] for row in report["steady"]["rows"] if row.get("applicable", True)}
        self.assertTrue({"binding", "dispatch", "library"} <= layers, layers)
        library = [row for row in report["steady"]["rows"] if row["layer"] == "library"]
        self.assertGreater(library[0]["time"]["median"], 0)
        # The table has a block for the compiled function, headed by its name.
        self.assertTrue(any(line.startswith("strata.compile(relu_matmul)  ") for line in p.table().splitlines()))

    def test_ctrl_c_during_the_compile_raises_keyboardinterrupt_kills_the_compiler_and_keeps_nothing(self):
        # A compiler that writes its pid and sleeps; the compile holds the GIL, so without strata's check
        # (Note [Ctrl-C while strata waits for a child] in apps/python/crossing.cpp) the KeyboardInterrupt
        # would come only after the sleep. Run in a child Python, which gets the SIGINT a terminal's Ctrl-C
        # would send it; the compiler is in a process group of its own, as then.
        work = tempfile.mkdtemp(prefix="strata-compile-sigint-")
        self.addCleanup(shutil.rmtree, work, ignore_errors=True)
        cxx, pid_file, cache = (os.path.join(work, name) for name in ("slow-c++", "compiler.pid", "cache"))
        with open(cxx, "w") as f:
            f.write(f"#!/bin/sh\necho $$ > '{pid_file}.tmp'\nmv '{pid_file}.tmp' '{pid_file}'\nexec sleep 60\n")
        os.chmod(cxx, 0o755)
        script = textwrap.dedent(f"""
            import strata
            f = strata.compile(lambda a: strata.relu(a) * 2.0, cache_dir={cache!r}, cxx={cxx!r})
            try:
                f(strata.randn(16))
            except KeyboardInterrupt:
                print("KeyboardInterrupt")
            """)
        package = os.path.dirname(os.path.dirname(strata.__file__))
        env = dict(os.environ, PYTHONPATH=package + os.pathsep + os.environ.get("PYTHONPATH", ""))
        child = subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        self.addCleanup(lambda: child.poll() is None and child.kill())
        deadline = time.monotonic() + 60
        while not os.path.exists(pid_file):
            self.assertIsNone(child.poll(), "the child ended before its compiler started")
            self.assertLess(time.monotonic(), deadline, "the compiler never started")
            time.sleep(0.02)
        compiler = int(open(pid_file).read())
        sent = time.monotonic()
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=30)
        self.assertEqual(child.returncode, 0, err)
        self.assertEqual(out.strip(), "KeyboardInterrupt", err)
        self.assertLess(time.monotonic() - sent, 10)  # the compiler sleeps 60 s
        with self.assertRaises(ProcessLookupError):  # killed and reaped, not left running
            os.kill(compiler, 0)
        self.assertEqual(os.listdir(cache), [])  # no temporary, no kernel

    def test_refusals(self):
        x, w = self.t(3, 4), self.t(4, 2)
        with self.assertRaises(strata.CompilerUnavailableError) as caught:
            strata.compile(relu_matmul, cache_dir=CACHE, cxx="/nonexistent/c++")(x, w)
        self.assertIsInstance(caught.exception, strata.UnavailableError)
        self.assertIn("/nonexistent/c++", str(caught.exception))
        saved = os.environ.get("CXX")
        os.environ["CXX"] = "/nowhere/g++"
        try:
            with self.assertRaises(strata.CompilerUnavailableError) as caught:
                strata.compile(relu_matmul, cache_dir=CACHE)(x, w)
            self.assertIn("/nowhere/g++", str(caught.exception))
        finally:
            if saved is None:
                del os.environ["CXX"]
            else:
                os.environ["CXX"] = saved
        with self.assertRaises(TypeError):
            strata.compile(3)
        with self.assertRaises(ValueError):
            strata.compile(relu_matmul, cache_size_limit=0)
        with self.assertRaises(TypeError):
            strata.compile(relu_matmul, cxx=5)
        compiled = strata.compile(lambda x, opts: strata.relu(x), cache_dir=CACHE)
        with self.assertRaises(TypeError):
            compiled(x, {"a": 1})  # an unhashable constant
        with self.assertRaises(TypeError):
            compiled(x, [x])  # a tensor inside a list
        with self.assertRaises(strata.Error):
            strata.compile(relu_matmul).graph  # nothing compiled yet
        compiled = strata.compile(relu_matmul, cache_dir=CACHE)
        compiled(x, w)
        with self.assertRaises(strata.UsageError):  # the function's own error, as eagerly
            compiled(x, self.t(5, 2))
        self.assertEqual((len(compiled.versions), compiled.recompiles), (1, []))  # nothing kept of it


if __name__ == "__main__":
    unittest.main()
