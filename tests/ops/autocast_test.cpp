// The Autocast key (layers/dispatch/autocast.h, docs/autocast.md) on the CPU: its place in the key order,
// the casts as real to_copy calls through the dispatcher, Autograd recording on the cast tensors, inputs
// that are not cast, the fallthrough for ops without a policy, and the guard's thread-local state.
#include <doctest/doctest.h>

#include <string>
#include <thread>
#include <vector>

#include "layers/dispatch/autocast.h"
#include "layers/frontend/frontend.h"
#include "layers/kernels/reference/reference.h"
#include "layers/ops/operators.h"
#include "lib/error.h"

using namespace strata;

namespace {

Tensor rnd(const Shape& s, uint64_t seed, DType dtype = DType::kF32, bool grad = false) {
  Tensor t = frontend::random_tensor(s, dtype, kCPU, seed);
  t.set_requires_grad(grad);
  return t;
}

// The names of the spans of one layer, in the order they opened, indented by their depth among spans of
// that layer ("Autocast", " to_copy:Autograd", "  to_copy:CPU").
std::vector<std::string> path(const Timeline& t, Layer layer) {
  std::vector<std::string> out;
  for (const Span& s : t.spans()) {
    if (s.layer != layer) continue;
    int depth = 0;
    for (int32_t p = s.parent; p >= 0; p = t.spans()[static_cast<size_t>(p)].parent)
      depth += t.spans()[static_cast<size_t>(p)].layer == layer ? 1 : 0;
    out.push_back(std::string(static_cast<size_t>(depth), ' ') + s.name);
  }
  return out;
}

}  // namespace

TEST_CASE("Autocast casts matmul's f32 inputs with to_copy calls, then Autograd records on the cast tensors") {
  const Tensor a = rnd(Shape{8, 16}, 1, DType::kF32, true), b = rnd(Shape{16, 4}, 2, DType::kF32, true);
  for (DType to : kAutocastDTypes) {
    CAPTURE(dtype_name(to));
    Timeline t;
    Tensor out;
    {
      tracing::ActiveScope scope(&t);
      AutocastGuard autocast(to);
      out = ops::matmul(a, b);
    }
    CHECK(out.dtype() == to);
    REQUIRE(out.grad_fn() != nullptr);
    CHECK(std::string(out.grad_fn()->name()) == "MmBackward");
    CHECK(out.grad_fn()->num_saved() == 2);
    // Against the float64 reference on the f32 inputs, at the low-precision dtype's tolerance.
    CHECK(reference::relative_error(out, reference::matmul(a, b)) <= reference::tolerance(to));
    CHECK(reference::relative_error(out, reference::matmul(a, b)) > 0);  // it really was rounded
#if STRATA_TRACING
    // Key order: Autocast first; each cast is its own call (Autograd records ToCopyBackward, then the CPU
    // kernel), then the op is redispatched below Autocast: Autograd, then CPU.
    CHECK(path(t, Layer::kDispatch) == std::vector<std::string>{"Autocast", " to_copy:Autograd", "  to_copy:CPU",
                                                                 " to_copy:Autograd", "  to_copy:CPU", " Autograd",
                                                                 "  CPU"});
    const std::string cast = "to_copy f32->" + std::string(dtype_name(to)) + " (cpu loop)";
    const std::string gemm = "cblas_sgemm (" + std::string(dtype_name(to)) + " widened to f32)";
    const std::string widen = "widen " + std::string(dtype_name(to)) + "->f32";
    const std::string round = "round f32->" + std::string(dtype_name(to));
    CHECK(path(t, Layer::kLibrary) == std::vector<std::string>{cast, cast, gemm, " " + widen, " " + widen, " " + round});
#endif
  }
  // The guard's end restores the thread's state: no Autocast key, the previous dtype.
  CHECK_FALSE(local_dispatch_key_set().included.has(DispatchKey::kAutocast));
  CHECK(autocast_dtype() == DType::kBF16);
  CHECK(ops::matmul(a, b).dtype() == DType::kF32);
}

TEST_CASE("inputs that already have the autocast dtype, f64 inputs and an absent bias are not cast") {
  Timeline t;
  Tensor out;
  {
    tracing::ActiveScope scope(&t);
    AutocastGuard autocast(DType::kBF16);
    out = ops::matmul(rnd(Shape{4, 4}, 1, DType::kBF16), rnd(Shape{4, 4}, 2, DType::kBF16));
  }
  CHECK(out.dtype() == DType::kBF16);
#if STRATA_TRACING
  CHECK(path(t, Layer::kDispatch) == std::vector<std::string>{"Autocast", " CPU"});
#endif
  {
    AutocastGuard autocast(DType::kBF16);
    // f16 is cast to bf16 (another low-precision dtype is eligible, as in PyTorch).
    CHECK(ops::matmul(rnd(Shape{4, 4}, 1, DType::kF16), rnd(Shape{4, 4}, 2, DType::kF32)).dtype() == DType::kBF16);
    // f64 is left alone, as PyTorch's autocast leaves doubles: the GEMM runs in f64.
    CHECK(ops::matmul(rnd(Shape{4, 4}, 1, DType::kF64), rnd(Shape{4, 4}, 2, DType::kF64)).dtype() == DType::kF64);
    // linear without a bias: the undefined tensor passes through as it is.
    const Tensor x = rnd(Shape{3, 5}, 3), w = rnd(Shape{2, 5}, 4);
    const Tensor y = ops::linear(x, w, Tensor());
    CHECK(y.dtype() == DType::kBF16);
    CHECK(reference::relative_error(y, reference::linear(x, w, Tensor())) <= reference::tolerance(DType::kBF16));
  }
  CHECK_FALSE(autocast_eligible(Tensor(), DType::kBF16));
  CHECK_FALSE(autocast_eligible(rnd(Shape{2}, 1, DType::kBF16), DType::kBF16));
  CHECK(autocast_eligible(rnd(Shape{2}, 1, DType::kF32), DType::kBF16));
}

TEST_CASE("conv2d autocasts too - ops without a policy fall through: the key is skipped, not an error") {
  const Tensor x = rnd(Shape{1, 2, 5, 5}, 1), w = rnd(Shape{3, 2, 3, 3}, 2), bias = rnd(Shape{3}, 3);
  {
    AutocastGuard autocast(DType::kF16);
    const Tensor y = ops::conv2d(x, w, bias, {1}, {1}, {1}, 1);
    CHECK(y.dtype() == DType::kF16);
    CHECK(reference::relative_error(y, reference::conv2d(x, w, bias, {1}, {1}, {1}, 1)) <= reference::tolerance(DType::kF16));
  }
  size_t with_policy = 0;
  ops::AllOps::for_each([&](auto decl) {
    using Op = decltype(decl);
    CAPTURE(std::string(Op::kName));
    const OperatorEntry& e = ops::entry<Op>();
    if constexpr (ops::kHasAutocastPolicy<Op>) {
      ++with_policy;
      CHECK(e.kernel(DispatchKey::kAutocast) != nullptr);
      CHECK_FALSE(e.fallthrough_keys().has(DispatchKey::kAutocast));
    } else {
      CHECK(e.kernel(DispatchKey::kAutocast) == nullptr);
      CHECK(e.fallthrough_keys().has(DispatchKey::kAutocast));
      CHECK(e.registered_by(DispatchKey::kAutocast).find("fallthrough") != std::string::npos);
    }
  });
  CHECK(with_policy == 3);  // matmul, linear, conv2d
  const Tensor g = rnd(Shape{64}, 4, DType::kF32, true);
  Timeline t;
  Tensor out;
  {
    tracing::ActiveScope scope(&t);
    AutocastGuard autocast(DType::kBF16);
    out = ops::relu(g);
  }
  CHECK(out.dtype() == DType::kF32);  // relu is not cast
  CHECK(std::string(out.grad_fn()->name()) == "ReluBackward");
  CHECK(reference::relative_error(out, reference::relu(g)) == 0.0);
#if STRATA_TRACING
  CHECK(path(t, Layer::kDispatch) == std::vector<std::string>{"Autograd", " CPU"});  // no Autocast zone at all
#endif
}

TEST_CASE("to_copy is an operator like any other: binding, schema default, Autograd node, plain call") {
  const Tensor x = rnd(Shape{33}, 5, DType::kF32, true);
  const binding::BoundOperator& op = binding::find_operator("to_copy");
  const binding::Kwarg to_bf16{"dtype", binding::IValue(DType::kBF16)};
  const binding::IValue y = op.call(std::vector<binding::IValue>{x}, std::span(&to_bf16, 1));
  REQUIRE(y.is_tensor());
  CHECK(y.tensor().dtype() == DType::kBF16);
  CHECK(std::string(y.tensor().grad_fn()->name()) == "ToCopyBackward");
  CHECK(y.tensor().grad_fn()->num_saved() == 1);  // the input, for the dtype its gradient is cast back to
  CHECK(reference::relative_error(y.tensor(), reference::to_double(x)) <= reference::tolerance(DType::kBF16));
  // dtype=None keeps the dtype: an exact copy into new memory.
  const binding::IValue same = op.call(std::vector<binding::IValue>{x});
  CHECK(same.tensor().dtype() == DType::kF32);
  CHECK(same.tensor().data_ptr() != x.data_ptr());
  CHECK(reference::relative_error(same.tensor(), reference::to_double(x)) == 0.0);
  // dtype is keyword-only and must be a ScalarType.
  CHECK_THROWS_WITH_AS(op.call(std::vector<binding::IValue>{x, binding::IValue(DType::kF16)}),
                       doctest::Contains("takes 1 positional argument but 2 were given"), UsageError);
  const binding::Kwarg wrong{"dtype", binding::IValue(3)};
  CHECK_THROWS_WITH_AS(op.call(std::vector<binding::IValue>{x}, std::span(&wrong, 1)),
                       doctest::Contains("argument 'dtype' (position 2) must be ScalarType?, not int"), UsageError);
}

TEST_CASE("AutocastGuard takes bf16 or f16 only, and nests") {
  CHECK_THROWS_WITH_AS(AutocastGuard{DType::kF32}, "autocast casts to bf16 or f16, not f32 (f32 is what it casts from)",
                       UsageError);
  CHECK_THROWS_AS(AutocastGuard{DType::kF64}, UsageError);
  CHECK_FALSE(local_dispatch_key_set().included.has(DispatchKey::kAutocast));  // a refused guard changed nothing
  {
    AutocastGuard outer(DType::kF16);
    {
      AutocastGuard inner(DType::kBF16);
      CHECK(autocast_dtype() == DType::kBF16);
    }
    CHECK(autocast_dtype() == DType::kF16);
    CHECK(local_dispatch_key_set().included.has(DispatchKey::kAutocast));
  }
  CHECK_FALSE(local_dispatch_key_set().included.has(DispatchKey::kAutocast));
}

TEST_CASE("set_autocast_state changes only the Autocast key and dtype of this thread, and refuses f32/f64") {
  const AutocastState before = autocast_state();
  CHECK_FALSE(before.enabled);
  ExcludeKeyGuard other(DispatchKey::kAutograd);  // another key of the thread's set: left alone
  set_autocast_state({true, DType::kF16});
  CHECK(autocast_state().enabled);
  CHECK(autocast_dtype() == DType::kF16);
  CHECK(local_dispatch_key_set().excluded.has(DispatchKey::kAutograd));
  CHECK_THROWS_AS(set_autocast_state({true, DType::kF32}), UsageError);
  CHECK(autocast_dtype() == DType::kF16);  // a refused state changed nothing
  bool other_thread_enabled = true;
  std::thread([&] { other_thread_enabled = autocast_state().enabled; }).join();
  CHECK_FALSE(other_thread_enabled);  // per thread
  set_autocast_state(before);
  CHECK_FALSE(local_dispatch_key_set().included.has(DispatchKey::kAutocast));
  CHECK(local_dispatch_key_set().excluded.has(DispatchKey::kAutograd));
}
