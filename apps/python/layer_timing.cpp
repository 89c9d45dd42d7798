// The C++ half of the differential cross-check (Note [The differential cross-check] in
// apps/python/strata/_profile.py): the same matmul entered at each C++ layer with the layers above it
// skipped, untraced, timed on the host clock. Python enters the two layers above (strata.matmul, then
// _strata.call) itself.
#include <cblas.h>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <vector>

#include "apps/python/profile.h"
#include "layers/binding/binding.h"
#include "layers/kernels/cpu/cpu_kernels.h"
#include "layers/ops/operators.h"
#include "lib/error.h"
#include "lib/op_shapes.h"

namespace py = pybind11;

namespace strata::python {
namespace {

// Per-call ns of `calls` calls of `fn`, one figure per batch.
template <typename Fn>
double per_call_ns(int calls, Fn&& fn) {
  const uint64_t t0 = host_clock::ticks();
  for (int i = 0; i < calls; ++i) fn();
  const uint64_t t1 = host_clock::ticks();
  return double(host_clock::ticks_to_ns(t1) - host_clock::ticks_to_ns(t0)) / calls;
}

void check_matmul_inputs(const Tensor& a, const Tensor& b, int calls, int batches) {
  if (calls < 1 || calls > 1'000'000 || batches < 1 || batches > 100'000)
    throw UsageError("calls must be in [1, 1000000] and batches in [1, 100000], got calls=" + std::to_string(calls) +
                     ", batches=" + std::to_string(batches));
  if (!a.device().is_cpu() || !b.device().is_cpu() || a.dtype() != DType::kF32 || b.dtype() != DType::kF32)
    throw UsageError("the layer timing takes float32 CPU tensors (it compares against raw cblas_sgemm)");
  if (!a.is_contiguous() || !b.is_contiguous()) throw UsageError("the layer timing takes contiguous tensors");
  (void)op_shapes::matmul(a.sizes(), b.sizes());  // UsageError for shapes that do not multiply
  if (a.dim() != 2 || b.dim() != 2) throw UsageError("the layer timing takes 2-D tensors");
  if (tracing::active() != nullptr)
    throw UsageError("the layer timing runs untraced: call it outside strata.profile()");
}

// {"binding": [...], "dispatcher": [...], "kernel": [...], "cblas_sgemm": [...]}: per-call ns of each
// batch, the layers interleaved batch by batch so that all see the same machine state.
py::dict time_matmul_layers(const Tensor& a, const Tensor& b, int calls, int batches) {
  check_matmul_inputs(a, b, calls, batches);
  const binding::BoundOperator& op = binding::find_operator("matmul");
  const std::vector<binding::IValue> boxed{binding::IValue(a), binding::IValue(b)};
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  Tensor c = Tensor::empty(op_shapes::matmul(a.sizes(), b.sizes()), DType::kF32, kCPU);
  const auto* pa = a.data<float>();
  const auto* pb = b.data<float>();
  float* pc = c.data<float>();
  std::vector<double> bound, dispatched, kernel, raw;
  for (int batch = 0; batch < batches; ++batch) {
    bound.push_back(per_call_ns(calls, [&] { (void)op.call(boxed); }));
    dispatched.push_back(per_call_ns(calls, [&] { (void)ops::matmul(a, b); }));
    kernel.push_back(per_call_ns(calls, [&] { (void)kernels::cpu::matmul(a, b); }));
    raw.push_back(per_call_ns(calls, [&] {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, blasint(m), blasint(n), blasint(k), 1.0f, pa, blasint(k), pb,
                  blasint(n), 0.0f, pc, blasint(n));
    }));
  }
  py::dict out;
  out["binding"] = bound;
  out["dispatcher"] = dispatched;
  out["kernel"] = kernel;
  out["cblas_sgemm"] = raw;
  return out;
}

}  // namespace

void bind_layer_timing(py::module_& m) {
  m.def("_time_matmul_layers", &time_matmul_layers, py::arg("a"), py::arg("b"), py::arg("calls"), py::arg("batches"),
        "per-call ns of matmul entered at the binding layer, the dispatcher, the CPU kernel and raw cblas_sgemm "
        "(the same buffers), one figure per batch");
}

}  // namespace strata::python
