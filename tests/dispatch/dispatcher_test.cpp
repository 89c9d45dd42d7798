// The dispatcher (layers/dispatch): key sets from tensors and thread-local state, the kernel tables,
// wrapper keys that redispatch with their own key removed, and the missing-kernel error.
#include <doctest/doctest.h>

#include <optional>
#include <string>
#include <vector>

#include "layers/dispatch/dispatch.h"
#include "layers/ops/operators.h"
#include "layers/frontend/frontend.h"
#include "layers/kernels/reference/reference.h"

using namespace strata;

namespace {

Tensor rnd(const Shape& s, uint64_t seed, bool grad = false) {
  Tensor t = frontend::random_tensor(s, DType::kF32, kCPU, seed);
  t.set_requires_grad(grad);
  return t;
}

const DispatchKeySet kCpuOnly(DispatchKey::kCPU);
const DispatchKeySet kGradCpu = DispatchKeySet(DispatchKey::kCPU).add(DispatchKey::kAutograd);

// The names of the dispatch spans of one call, in the order they opened, with their nesting depth
// among dispatch spans ("Autograd", " CPU").
std::vector<std::string> dispatch_path(const Timeline& t) {
  std::vector<std::string> out;
  for (const Span& s : t.spans()) {
    if (s.layer != Layer::kDispatch) continue;
    int depth = 0;
    for (int32_t p = s.parent; p >= 0; p = t.spans()[static_cast<size_t>(p)].parent) {
      depth += t.spans()[static_cast<size_t>(p)].layer == Layer::kDispatch ? 1 : 0;
    }
    out.push_back(std::string(static_cast<size_t>(depth), ' ') + s.name);
  }
  return out;
}

}  // namespace

TEST_CASE("the key set comes from the tensors: backend, plus Autograd when any input requires grad") {
  Tensor a = rnd(Shape{2, 2}, 1), g = rnd(Shape{2, 2}, 2, true);
  CHECK(compute_dispatch_key_set(a) == kCpuOnly);
  CHECK(compute_dispatch_key_set(a, a) == kCpuOnly);
  CHECK(compute_dispatch_key_set(a, g) == kGradCpu);
  CHECK(compute_dispatch_key_set(a, Tensor()) == kCpuOnly);  // an absent optional tensor adds nothing
  CHECK(compute_dispatch_key_set(Tensor()).empty());
}

TEST_CASE("thread-local guards include and exclude keys, nest, and restore the previous state") {
  Tensor g = rnd(Shape{2, 2}, 2, true), a = rnd(Shape{2, 2}, 1);
  {
    NoGradGuard no_grad;
    CHECK(compute_dispatch_key_set(g) == kCpuOnly);
  }
  CHECK(compute_dispatch_key_set(g) == kGradCpu);
  {
    ExcludeKeyGuard exclude(DispatchKey::kAutograd);
    CHECK(compute_dispatch_key_set(g) == kCpuOnly);
    {
      IncludeKeyGuard include(DispatchKey::kAutocast);
      CHECK(compute_dispatch_key_set(a) == kCpuOnly.add(DispatchKey::kAutocast));
      CHECK(compute_dispatch_key_set(g) == kCpuOnly.add(DispatchKey::kAutocast));  // still excluded
    }
    CHECK(compute_dispatch_key_set(a) == kCpuOnly);
  }
  {
    IncludeKeyGuard include(DispatchKey::kAutograd);
    CHECK(compute_dispatch_key_set(a) == kGradCpu);
  }
  CHECK(compute_dispatch_key_set(a) == kCpuOnly);
  CHECK(local_dispatch_key_set().included.empty());
  CHECK(local_dispatch_key_set().excluded.empty());
  CHECK(grad_mode_enabled());
}

TEST_CASE("requires_grad routes through Autograd, which records the backward node and redispatches to CPU") {
  Tensor a = rnd(Shape{3, 4}, 1, true), b = rnd(Shape{4, 5}, 2);
  Timeline t;
  Tensor out;
  {
    tracing::ActiveScope scope(&t);
    out = ops::matmul(a, b);
  }
  REQUIRE(out.grad_fn() != nullptr);
  CHECK(std::string(out.grad_fn()->name()) == "MmBackward");
  CHECK(out.grad_fn()->num_saved() == 2);
  CHECK(out.requires_grad());
  // The result is the product, whatever path it took.
  CHECK(reference::relative_error(out, reference::matmul(a, b)) <= reference::tolerance(DType::kF32));
#if STRATA_TRACING
  CHECK(dispatch_path(t) == std::vector<std::string>{"Autograd", " CPU"});
  // The library zone of the kernel nests inside the CPU key's zone.
  bool library_under_cpu = false;
  for (const Span& s : t.spans()) {
    if (s.layer == Layer::kLibrary && s.parent >= 0 &&
        std::string(t.spans()[static_cast<size_t>(s.parent)].name) == "CPU")
      library_under_cpu = true;
  }
  CHECK(library_under_cpu);
#endif
}

TEST_CASE("without requires_grad, or with Autograd excluded, no backward node is recorded") {
  Tensor a = rnd(Shape{3, 4}, 1), b = rnd(Shape{4, 5}, 2), ga = rnd(Shape{3, 4}, 3, true);
  Timeline t;
  {
    tracing::ActiveScope scope(&t);
    Tensor out = ops::matmul(a, b);
    CHECK(out.grad_fn() == nullptr);
    CHECK_FALSE(out.requires_grad());
  }
#if STRATA_TRACING
  CHECK(dispatch_path(t) == std::vector<std::string>{"CPU"});
#endif
  {
    ExcludeKeyGuard exclude(DispatchKey::kAutograd);
    CHECK(ops::matmul(ga, b).grad_fn() == nullptr);
  }
  {
    NoGradGuard no_grad;
    CHECK(ops::matmul(ga, b).grad_fn() == nullptr);
  }
  {
    IncludeKeyGuard include(DispatchKey::kAutograd);  // forced on even without requires_grad
    CHECK(ops::matmul(a, b).grad_fn() != nullptr);
  }
}

TEST_CASE("every operator's Autograd kernel records its own node") {
  Tensor x = rnd(Shape{2, 3}, 1, true), w = rnd(Shape{4, 3}, 2), bias = rnd(Shape{4}, 3);
  Tensor out = ops::linear(x, w, bias);
  CHECK(std::string(out.grad_fn()->name()) == "AddmmBackward");
  CHECK(out.grad_fn()->num_saved() == 2);
  Tensor ci = rnd(Shape{1, 3, 5, 5}, 4, true), cw = rnd(Shape{2, 3, 3, 3}, 5);
  out = ops::conv2d(ci, cw, Tensor(), {1}, {1}, {1}, 1);
  CHECK(std::string(out.grad_fn()->name()) == "ConvolutionBackward");
  out = ops::relu(x);
  CHECK(std::string(out.grad_fn()->name()) == "ReluBackward");
  CHECK(out.grad_fn()->num_saved() == 1);
  out = ops::add(x, x, 1.0);
  CHECK(std::string(out.grad_fn()->name()) == "AddBackward");
  CHECK(out.grad_fn()->num_saved() == 0);
  out = ops::gelu(x);
  CHECK(std::string(out.grad_fn()->name()) == "GeluBackward");
  CHECK(out.grad_fn()->num_saved() == 1);
}

TEST_CASE("a missing kernel is an error that lists the keys that do have kernels") {
  // The CUDA key of a build whose CUDA kernels are not loaded (they come with libstrata_cuda.so on the
  // first CUDA use, which this test never makes).
  const OperatorEntry& mm = ops::entry<ops::Matmul>();
  if (mm.kernel(DispatchKey::kCUDA) != nullptr) {
    MESSAGE("skipped: matmul has a CUDA kernel in this process");
    return;
  }
  std::string have;
  for (DispatchKey k : mm.keys_with_kernels())
    have += (have.empty() ? "" : ", ") + std::string(dispatch_key_name(k));
  CHECK(have == "Autocast, Autograd, CPU");
  Tensor a = rnd(Shape{2, 2}, 1);
  IncludeKeyGuard include(DispatchKey::kCUDA);
  CHECK_THROWS_WITH_AS(
      ops::matmul(a, a),
      ("matmul has no kernel for dispatch key CUDA (key set: CUDA > CPU); kernels exist for: " + have).c_str(),
      UnavailableError);
}

TEST_CASE("registering a second kernel for a key, or one for Undefined, is refused and names who was first") {
  auto fn = [](DispatchKeySet, const Tensor& t) { return t; };
  CHECK_THROWS_WITH_AS(
      (void)ops::register_kernel<ops::Relu>(DispatchKey::kCPU, fn, "test"),
      doctest::Contains("relu already has a CPU kernel, registered by layers/kernels/cpu/pointwise.cpp"),
      Error);
  CHECK_THROWS_WITH_AS((void)ops::register_kernel<ops::Relu>(DispatchKey::kUndefined, fn, "test"),
                       doctest::Contains("cannot register a kernel for key Undefined"), Error);
}

namespace {
int g_autocast_calls = 0;
DispatchKeySet g_autocast_saw;
// A test wrapper kernel: note the call, then redispatch below Autocast exactly as autograd.cpp does.
Tensor relu_autocast(DispatchKeySet ks, const Tensor& self) {
  ++g_autocast_calls;
  g_autocast_saw = ks;
  return ops::redispatch<ops::Relu>(ks.remove(DispatchKey::kAutocast), self);
}
}  // namespace

TEST_CASE("a registered wrapper key runs first and redispatches through the lower keys in priority order") {
  // relu has no autocast policy: its Autocast key falls through. The test takes the key over for its own
  // wrapper and gives the fallthrough back at the end.
  OperatorEntry& relu = Dispatcher::instance().entry(ops::op_index<ops::Relu>());
  REQUIRE(relu.fallthrough_keys().has(DispatchKey::kAutocast));
  const std::string fallthrough_by = relu.registered_by(DispatchKey::kAutocast);
  struct GiveBack {
    OperatorEntry& e;
    std::string by;
    ~GiveBack() {
      e.clear_kernel(DispatchKey::kAutocast);
      e.set_fallthrough(DispatchKey::kAutocast, by);
    }
  } give_back{relu, fallthrough_by};
  relu.clear_kernel(DispatchKey::kAutocast);
  REQUIRE(relu.kernel(DispatchKey::kAutocast) == nullptr);
  std::optional<RegistrationHandle> handle;
  handle.emplace(ops::register_kernel<ops::Relu>(DispatchKey::kAutocast, relu_autocast,
                                                 "tests/dispatch/dispatcher_test.cpp"));
  CHECK(relu.registered_by(DispatchKey::kAutocast) == "tests/dispatch/dispatcher_test.cpp");
  CHECK(relu.keys_with_kernels().front() == DispatchKey::kAutocast);  // priority order
  Tensor g = rnd(Shape{16}, 1, true);
  Timeline t;
  Tensor out;
  {
    tracing::ActiveScope scope(&t);
    IncludeKeyGuard include(DispatchKey::kAutocast);
    out = ops::relu(g);
  }
  CHECK(g_autocast_calls == 1);
  CHECK(g_autocast_saw == kGradCpu.add(DispatchKey::kAutocast));
  CHECK(std::string(out.grad_fn()->name()) == "ReluBackward");
  CHECK(reference::relative_error(out, reference::relu(g)) == 0.0);
#if STRATA_TRACING
  CHECK(dispatch_path(t) == std::vector<std::string>{"Autocast", " Autograd", "  CPU"});
#endif
  // Without the key in the set the wrapper does not run.
  ops::relu(g);
  CHECK(g_autocast_calls == 1);
  // The handle's end is the registration's end: the table is as it was (c10's RegistrationHandleRAII).
  handle.reset();
  CHECK(relu.kernel(DispatchKey::kAutocast) == nullptr);
  CHECK(relu.registered_by(DispatchKey::kAutocast).empty());
  {
    IncludeKeyGuard include(DispatchKey::kAutocast);
    CHECK_THROWS_AS(ops::relu(g), UnavailableError);
  }
  CHECK(g_autocast_calls == 1);
}

TEST_CASE("a fallthrough key is masked out before the kernel is picked, and only wrapper keys can fall through") {
  OperatorEntry& relu = Dispatcher::instance().entry(ops::op_index<ops::Relu>());
  CHECK(relu.fallthrough_keys() == DispatchKeySet(DispatchKey::kAutocast));
  CHECK(relu.keys_with_kernels() == std::vector<DispatchKey>{DispatchKey::kAutograd, DispatchKey::kCPU});
  Tensor x = rnd(Shape{8}, 1);
  Timeline t;
  {
    tracing::ActiveScope scope(&t);
    IncludeKeyGuard include(DispatchKey::kAutocast);
    ops::relu(x);
  }
#if STRATA_TRACING
  CHECK(dispatch_path(t) == std::vector<std::string>{"CPU"});
#endif
  CHECK_THROWS_WITH_AS(relu.set_fallthrough(DispatchKey::kCPU, "test"),
                       "set_fallthrough: relu: only a wrapper key can fall through, not CPU", Error);
  CHECK_THROWS_WITH_AS(relu.set_fallthrough(DispatchKey::kAutocast, "test"),
                       doctest::Contains("relu already has a kernel or a fallthrough for Autocast, registered by fallthrough"), Error);
  auto fn = [](DispatchKeySet, const Tensor& t) { return t; };
  CHECK_THROWS_AS((void)ops::register_kernel<ops::Relu>(DispatchKey::kAutocast, fn, "test"), Error);
}

TEST_CASE("calls made inside a wrapper kernel name their dispatch zones after their op") {
  Tensor x = rnd(Shape{8}, 1);
  Timeline t;
  {
    tracing::ActiveScope scope(&t);
    InnerCallGuard inner;
    ops::relu(x);
  }
#if STRATA_TRACING
  CHECK(dispatch_path(t) == std::vector<std::string>{"relu:CPU"});
#endif
  CHECK(std::string(ops::entry<ops::Matmul>().inner_zone_name(DispatchKey::kAutograd)) == "matmul:Autograd");
}
