// The in-place ops and the reductions over dims on the GPU: strata's own kernels (inplace_reduce.cu), laid
// out by the plans of reduce_plan.h. The in-place kernels write self through its strides (a view is
// written where it lies, no temporary); the reductions read a contiguous input (Note [Contiguous inputs]).
// The version bump of an in-place write is the registration's (layers/ops/register_kernels.h), as on
// the CPU.
#include <string>

#include "layers/kernels/cuda/cuda_common.h"
#include "layers/kernels/cuda/cuda_kernels.h"
#include "layers/kernels/cuda/inplace_reduce_launch.h"
#include "layers/kernels/cuda/reduce_plan.h"
#include "lib/op_shapes.h"
#include "lib/views.h"
#include "lib/zone.h"

namespace strata::kernels::cuda {
namespace {

// A contiguous copy of t that shares no memory with anything else.
Tensor fresh_copy(const Tensor& t, cudaStream_t stream) {
  if (!t.is_contiguous()) return contiguous(t);
  Tensor copy = Tensor::empty(t.sizes(), t.dtype(), t.device());
  STRATA_CUDA_CHECK(cudaMemcpyAsync(copy.data_ptr(), t.data_ptr(), t.nbytes(), cudaMemcpyDeviceToDevice, stream));
  return copy;
}

void check_self(const char* op, const Tensor& self) {
  if (!self.device().is_cuda()) throw UsageError(std::string(op) + ": CUDA kernel got " + self.str());
  // A self whose elements share memory (an expanded tensor) would have its writes race on the GPU, and
  // no order of them gives torch's answer: refused in torch's words, as the CPU kernels refuse it.
  if (has_internal_overlap(self.sizes(), self.strides())) {
    throw UsageError(std::string(op) + "(): unsupported operation: more than one element of the written-to tensor " +
                     self.str() + " refers to a single memory location; clone() it before the in-place operation");
  }
}

// other as the kernel reads it: self's dtype and device (the registration casts it), broadcast to self's
// shape without growing it (the CPU kernel's message), and copied first when it overlaps self other than
// element for element (x.add_(x) is read and written at the same element by the same thread).
Tensor operand_of(const char* op, const Tensor& self, const Tensor& other, cudaStream_t stream) {
  if (other.device() != self.device() || other.dtype() != self.dtype()) {
    throw UsageError(std::string(op) + ": other " + other.str() + " must be on self's device with self's dtype, " +
                     self.str());
  }
  const Shape shape = op_shapes::broadcast(op, self.sizes(), other.sizes());
  if (!(shape == self.sizes())) {
    throw UsageError(std::string(op) + "(): output with shape [" + self.sizes().str() +
                     "] doesn't match the broadcast shape [" + shape.str() + "]");
  }
  const Tensor expanded = views::expand(other, self.sizes());
  const bool same_elements = expanded.data_ptr() == self.data_ptr() && expanded.strides() == self.strides();
  if (other.storage() != self.storage() || same_elements) return expanded;
  return views::expand(fresh_copy(other, stream), self.sizes());
}

Tensor in_place(const char* op, const char* kernel_zone, InPlaceMath math, const Tensor& self, const Tensor* other,
                double scalar) {
  check_self(op, self);
  const cudaStream_t stream = device_stream(self);
  const Tensor operand = other != nullptr ? operand_of(op, self, *other, stream) : Tensor();
  const InPlaceGeometry geometry =
      plan_in_place(self.sizes(), self.strides(), operand.defined() ? operand.strides() : self.strides());
  STRATA_ZONE(launch, Layer::kLibrary, kernel_zone);
  launch_in_place(math, self.dtype(), self.data_ptr(), operand.defined() ? operand.data_ptr() : nullptr, scalar,
                  geometry, self.numel(), stream);
  return self;
}

const char* reduce_kernel_zone(const ReducePlan& plan) {
  return plan.layout == ReduceLayout::kRows ? "reduce_rows_kernel<<<>>>" : "reduce_columns_kernel<<<>>>";
}

// op names the operator in shape errors ("sum", "mean", as the CPU kernel does).
Tensor reduce(const char* op, const Tensor& self, const Shape& dim, bool keepdim, std::optional<DType> dtype,
              bool mean) {
  check_cuda_input(op, self);
  const op_shapes::Reduction r = op_shapes::reduce_dims(op, self.sizes(), dim, keepdim);
  const cudaStream_t stream = device_stream(self);
  Tensor out = Tensor::empty(r.out, dtype.value_or(self.dtype()), self.device());
  const ReducePlan plan = plan_reduction(self.sizes(), r.reduced);
  // The first pass's per-part sums, from the caching allocator; none when one part per output suffices.
  const Tensor partials =
      plan.parts > 1 ? Tensor::empty(Shape{plan.outputs * plan.parts}, DType::kF64, self.device()) : Tensor();
  STRATA_ZONE(launch, Layer::kLibrary, reduce_kernel_zone(plan));
  launch_reduce(self.dtype(), out.dtype(), self.data_ptr(), out.data_ptr(), plan, mean,
                partials.defined() ? static_cast<double*>(partials.data_ptr()) : nullptr, stream);
  return out;
}

// alpha * other rounded once in the computation type (f64 for f64, f32 otherwise), as the CPU kernel and
// add.Scalar's kernel compute it, so the kernel adds one number: the same two roundings.
// The number is first rounded to a half self's dtype (Note [A number added to a half tensor]).
double scaled_scalar(DType dtype, double number, double alpha) {
  const double other = number_in(dtype, number);
  if (dtype == DType::kF64) return alpha * other;
  return static_cast<double>(static_cast<float>(alpha) * static_cast<float>(other));
}

}  // namespace

Tensor relu_inplace(const Tensor& self) {
  STRATA_ZONE(zone, Layer::kLibrary, "relu_ (cuda, in place)");
  return in_place("relu_", "in_place_kernel<relu><<<>>>", InPlaceMath::kRelu, self, nullptr, 0.0);
}

Tensor add_inplace(const Tensor& self, const Tensor& other, double alpha) {
  STRATA_ZONE(zone, Layer::kLibrary, "add_ (cuda, in place)");
  return in_place("add_", "in_place_kernel<add><<<>>>", InPlaceMath::kAdd, self, &other, alpha);
}

Tensor mul_inplace(const Tensor& self, const Tensor& other) {
  STRATA_ZONE(zone, Layer::kLibrary, "mul_ (cuda, in place)");
  return in_place("mul_", "in_place_kernel<mul><<<>>>", InPlaceMath::kMul, self, &other, 0.0);
}

Tensor mul_scalar_inplace(const Tensor& self, double other) {
  STRATA_ZONE(zone, Layer::kLibrary, "mul_.Scalar (cuda, in place)");
  return in_place("mul_.Scalar", "in_place_kernel<mul_scalar><<<>>>", InPlaceMath::kMulScalar, self, nullptr, other);
}

Tensor add_scalar_inplace(const Tensor& self, double other, double alpha) {
  STRATA_ZONE(zone, Layer::kLibrary, "add_.Scalar (cuda, in place)");
  return in_place("add_.Scalar", "in_place_kernel<add_scalar><<<>>>", InPlaceMath::kAddScalar, self, nullptr,
                  scaled_scalar(self.dtype(), other, alpha));
}

Tensor sub_inplace(const Tensor& self, const Tensor& other, double alpha) {
  STRATA_ZONE(zone, Layer::kLibrary, "sub_ (cuda, in place)");
  return in_place("sub_", "in_place_kernel<add><<<>>>", InPlaceMath::kAdd, self, &other, -alpha);
}

Tensor sub_scalar_inplace(const Tensor& self, double other, double alpha) {
  STRATA_ZONE(zone, Layer::kLibrary, "sub_.Scalar (cuda, in place)");
  return in_place("sub_.Scalar", "in_place_kernel<add_scalar><<<>>>", InPlaceMath::kAddScalar, self, nullptr,
                  scaled_scalar(self.dtype(), other, -alpha));
}

Tensor div_inplace(const Tensor& self, const Tensor& other) {
  STRATA_ZONE(zone, Layer::kLibrary, "div_ (cuda, in place)");
  return in_place("div_", "in_place_kernel<div><<<>>>", InPlaceMath::kDiv, self, &other, 0.0);
}

Tensor div_scalar_inplace(const Tensor& self, double other) {
  STRATA_ZONE(zone, Layer::kLibrary, "div_.Scalar (cuda, in place)");
  return in_place("div_.Scalar", "in_place_kernel<div_scalar><<<>>>", InPlaceMath::kDivScalar, self, nullptr, other);
}

Tensor sum_dim(const Tensor& self, const Shape& dim, bool keepdim, std::optional<DType> dtype) {
  STRATA_ZONE(zone, Layer::kLibrary, "sum.dim_IntList (cuda)");
  return reduce("sum", self, dim, keepdim, dtype, false);
}

Tensor mean_dim(const Tensor& self, const Shape& dim, bool keepdim, std::optional<DType> dtype) {
  STRATA_ZONE(zone, Layer::kLibrary, "mean.dim (cuda)");
  return reduce("mean", self, dim, keepdim, dtype, true);
}

Tensor mean(const Tensor& self, std::optional<DType> dtype) {
  STRATA_ZONE(zone, Layer::kLibrary, "mean (cuda)");
  return reduce("mean", self, Shape{}, false, dtype, true);
}

}  // namespace strata::kernels::cuda
