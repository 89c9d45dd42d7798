// The unary ops of layers/kernels/pointwise_math.h, add, the tanh GELU's ops and to_copy on the GPU: strata's own kernels (pointwise.cu), no library in between, so the library row
// is only argument checks, the output allocation and the launch call itself.
#include <array>
#include <string>
#include <utility>

#include "layers/kernels/cuda/cuda_common.h"
#include "layers/kernels/cuda/cuda_kernels.h"
#include "layers/kernels/cuda/pointwise_launch.h"
#include "layers/kernels/pointwise_math.h"
#include "lib/op_shapes.h"
#include "lib/zone.h"

namespace strata::kernels::cuda {

namespace {
// Zone names must live as long as the timeline: one per (from, to) pair, built once.
const char* cast_zone_name(DType from, DType to) {
  static const auto kNames = [] {
    std::array<std::string, 16> names;
    for (DType a : kAllDTypes)
      for (DType b : kAllDTypes)
        names[static_cast<size_t>(a) * 4 + static_cast<size_t>(b)] =
            "cast_kernel<" + std::string(dtype_name(a)) + "," + std::string(dtype_name(b)) + "><<<>>>";
    return names;
  }();
  return kNames[static_cast<size_t>(from) * 4 + static_cast<size_t>(to)].c_str();
}
}  // namespace

Tensor to_copy(const Tensor& self, std::optional<DType> dtype) {
  STRATA_ZONE(zone, Layer::kLibrary, "to_copy (cuda)");
  check_cuda_input("to_copy", self);
  const DType to = dtype.value_or(self.dtype());
  const cudaStream_t stream = device_stream(self);
  Tensor out = Tensor::empty(self.sizes(), to, self.device());
  STRATA_ZONE(launch, Layer::kLibrary, cast_zone_name(self.dtype(), to));
  launch_cast(self.dtype(), to, self.data_ptr(), out.data_ptr(), self.numel(), stream);
  return out;
}

Tensor add(const Tensor& self, const Tensor& other, double alpha) {
  STRATA_ZONE(zone, Layer::kLibrary, "add (cuda)");
  op_shapes::check_operands("add", check_cuda_input, self, other);
  const Shape out_shape = op_shapes::elementwise(self.sizes(), other.sizes());
  const cudaStream_t stream = device_stream(self);
  Tensor out = Tensor::empty(out_shape, self.dtype(), self.device());
  STRATA_ZONE(launch, Layer::kLibrary, "add_kernel<<<>>>");
  launch_add(self.dtype(), self.data_ptr(), other.data_ptr(), alpha, out.data_ptr(), out.numel(), stream);
  return out;
}

// ---- The tanh GELU's ops (mul, sub, tanh, pow and their scalar forms) -------------------------------

Tensor mul(const Tensor& self, const Tensor& other) {
  STRATA_ZONE(zone, Layer::kLibrary, "mul (cuda)");
  op_shapes::check_operands("mul", check_cuda_input, self, other);
  const Shape shape = op_shapes::same_shape("mul", self.sizes(), other.sizes());
  const cudaStream_t stream = device_stream(self);
  Tensor out = Tensor::empty(shape, self.dtype(), self.device());
  STRATA_ZONE(launch, Layer::kLibrary, "mul_tensor_kernel<<<>>>");
  launch_mul(self.dtype(), self.data_ptr(), other.data_ptr(), out.data_ptr(), out.numel(), stream);
  return out;
}

// True division (PyTorch's CUDA div.Scalar multiplies by the reciprocal instead; strata divides, as its CPU
// kernel and PyTorch's CPU kernel do).
Tensor div(const Tensor& self, const Tensor& other) {
  STRATA_ZONE(zone, Layer::kLibrary, "div (cuda)");
  op_shapes::check_operands("div", check_cuda_input, self, other);
  const Shape shape = op_shapes::same_shape("div", self.sizes(), other.sizes());
  const cudaStream_t stream = device_stream(self);
  Tensor out = Tensor::empty(shape, self.dtype(), self.device());
  STRATA_ZONE(launch, Layer::kLibrary, "div_tensor_kernel<<<>>>");
  launch_div(self.dtype(), self.data_ptr(), other.data_ptr(), out.data_ptr(), out.numel(), stream);
  return out;
}

Tensor div_scalar(const Tensor& self, double other) {
  STRATA_ZONE(zone, Layer::kLibrary, "div.Scalar (cuda)");
  check_cuda_input("div.Scalar", self);
  const cudaStream_t stream = device_stream(self);
  Tensor out = Tensor::empty(self.sizes(), self.dtype(), self.device());
  STRATA_ZONE(launch, Layer::kLibrary, "div_kernel<<<>>>");
  launch_div_scalar(self.dtype(), self.data_ptr(), other, out.data_ptr(), out.numel(), stream);
  return out;
}

// a - alpha * b as a + (-alpha) * b: the same rounding (negation is exact), PyTorch's sub does the same.
Tensor sub(const Tensor& self, const Tensor& other, double alpha) {
  STRATA_ZONE(zone, Layer::kLibrary, "sub (cuda)");
  op_shapes::check_operands("sub", check_cuda_input, self, other);
  const Shape shape = op_shapes::same_shape("sub", self.sizes(), other.sizes());
  const cudaStream_t stream = device_stream(self);
  Tensor out = Tensor::empty(shape, self.dtype(), self.device());
  STRATA_ZONE(launch, Layer::kLibrary, "add_kernel<<<>>>");
  launch_add(self.dtype(), self.data_ptr(), other.data_ptr(), -alpha, out.data_ptr(), out.numel(), stream);
  return out;
}

namespace {
// x + alpha * other, other a Python float: add.Scalar, and sub.Scalar with -alpha.
Tensor add_scalar_on(const char* op, const char* zone_name, const Tensor& self, double other, double alpha) {
  STRATA_ZONE(zone, Layer::kLibrary, zone_name);
  check_cuda_input(op, self);
  const cudaStream_t stream = device_stream(self);
  Tensor out = Tensor::empty(self.sizes(), self.dtype(), self.device());
  STRATA_ZONE(launch, Layer::kLibrary, "add_scalar_kernel<<<>>>");
  launch_add_scalar(self.dtype(), self.data_ptr(), number_in(self.dtype(), other), alpha, out.data_ptr(),
                    out.numel(), stream);  // Note [A number added to a half tensor]
  return out;
}
}  // namespace

Tensor add_scalar(const Tensor& self, double other, double alpha) {
  return add_scalar_on("add.Scalar", "add.Scalar (cuda)", self, other, alpha);
}

Tensor sub_scalar(const Tensor& self, double other, double alpha) {
  return add_scalar_on("sub.Scalar", "sub.Scalar (cuda)", self, other, -alpha);
}

Tensor pow(const Tensor& self, double exponent) {
  STRATA_ZONE(zone, Layer::kLibrary, "pow (cuda)");
  check_cuda_input("pow", self);
  const cudaStream_t stream = device_stream(self);
  Tensor out = Tensor::empty(self.sizes(), self.dtype(), self.device());
  STRATA_ZONE(launch, Layer::kLibrary, "pow_kernel<<<>>>");
  launch_pow(self.dtype(), self.data_ptr(), exponent, out.data_ptr(), self.numel(), stream);
  return out;
}

// ---- Gradient ops ------------------------------------------------------------------------------------

Tensor mul_scalar(const Tensor& self, double other) {
  STRATA_ZONE(zone, Layer::kLibrary, "mul.Scalar (cuda)");
  check_cuda_input("mul.Scalar", self);
  const cudaStream_t stream = device_stream(self);
  Tensor out = Tensor::empty(self.sizes(), self.dtype(), self.device());
  STRATA_ZONE(launch, Layer::kLibrary, "mul_kernel<<<>>>");
  launch_mul_scalar(self.dtype(), self.data_ptr(), other, out.data_ptr(), out.numel(), stream);
  return out;
}

Tensor threshold_backward(const Tensor& grad_output, const Tensor& self, double threshold) {
  STRATA_ZONE(zone, Layer::kLibrary, "threshold_backward (cuda)");
  op_shapes::check_operands("threshold_backward", check_cuda_input, grad_output, self);
  op_shapes::same_shape("threshold_backward", grad_output.sizes(), self.sizes());
  const cudaStream_t stream = device_stream(self);
  Tensor out = Tensor::empty(self.sizes(), self.dtype(), self.device());
  STRATA_ZONE(launch, Layer::kLibrary, "threshold_backward_kernel<<<>>>");
  launch_threshold_backward(self.dtype(), grad_output.data_ptr(), self.data_ptr(), threshold, out.data_ptr(),
                            out.numel(), stream);
  return out;
}

namespace {

// The first pass's per-block sums of a reduction split into `parts` per channel (launch_channel_sum):
// `count` doubles on x's device from the caching allocator, none when one block per channel suffices.
Tensor reduction_partials(const Tensor& x, int64_t count, int64_t parts) {
  if (parts <= 1) return Tensor();
  return Tensor::empty(Shape{count}, DType::kF64, x.device());
}

double* partials_ptr(const Tensor& partials) {
  return partials.defined() ? static_cast<double*>(partials.data_ptr()) : nullptr;
}

}  // namespace

Tensor bias_backward(const Tensor& grad_output) {
  STRATA_ZONE(zone, Layer::kLibrary, "bias_backward (cuda)");
  check_cuda_input("bias_backward", grad_output);
  const Shape& s = grad_output.sizes();
  const cudaStream_t stream = device_stream(grad_output);
  Tensor out = Tensor::empty(op_shapes::bias_backward(s), grad_output.dtype(), grad_output.device());
  const int64_t inner = s.ndim == 4 ? s[2] * s[3] : 1;
  const int64_t parts = channel_sum_parts(s[0], s[1], inner);
  const Tensor partials = reduction_partials(grad_output, s[1] * parts, parts);
  STRATA_ZONE(launch, Layer::kLibrary, "channel_sum_kernel<<<>>>");
  launch_channel_sum(grad_output.dtype(), grad_output.data_ptr(), out.data_ptr(), s[0], s[1], inner,
                     partials_ptr(partials), parts, stream);
  return out;
}

Tensor sum(const Tensor& self) {
  STRATA_ZONE(zone, Layer::kLibrary, "sum (cuda)");
  check_cuda_input("sum", self);
  const cudaStream_t stream = device_stream(self);
  Tensor out = Tensor::empty(Shape{}, self.dtype(), self.device());
  const int64_t parts = channel_sum_parts(1, 1, self.numel());
  const Tensor partials = reduction_partials(self, parts, parts);
  STRATA_ZONE(launch, Layer::kLibrary, "channel_sum_kernel<<<>>>");
  launch_channel_sum(self.dtype(), self.data_ptr(), out.data_ptr(), 1, 1, self.numel(), partials_ptr(partials), parts,
                     stream);
  return out;
}

Tensor ones_like(const Tensor& self) {
  STRATA_ZONE(zone, Layer::kLibrary, "ones_like (cuda)");
  check_cuda_input("ones_like", self);
  const cudaStream_t stream = device_stream(self);
  Tensor out = Tensor::empty(self.sizes(), self.dtype(), self.device());
  STRATA_ZONE(launch, Layer::kLibrary, "fill_kernel<<<>>>");
  launch_fill(self.dtype(), nullptr, 1.0, out.data_ptr(), out.numel(), stream);
  return out;
}

Tensor expand_as(const Tensor& self, const Tensor& other) {
  STRATA_ZONE(zone, Layer::kLibrary, "expand_as (cuda)");
  op_shapes::check_operands("expand_as", check_cuda_input, self, other);
  const cudaStream_t stream = device_stream(self);
  Tensor out = Tensor::empty(op_shapes::expand_as(self.sizes(), other.sizes()), self.dtype(), self.device());
  STRATA_ZONE(launch, Layer::kLibrary, "fill_kernel<<<>>>");
  launch_fill(self.dtype(), self.data_ptr(), 0.0, out.data_ptr(), out.numel(), stream);
  return out;
}

Tensor contiguous(const Tensor& self) {
  if (!self.device().is_cuda()) throw UsageError("contiguous: CUDA kernel got " + self.str());
  if (self.is_contiguous()) return self;  // nothing to copy, nothing allocated
  STRATA_ZONE(zone, Layer::kLibrary, "contiguous (cuda)");
  const cudaStream_t stream = device_stream(self);
  Tensor out = Tensor::empty(self.sizes(), self.dtype(), self.device());
  // The kernel walks four dims; a tensor with more would write past the geometry's arrays.
  static_assert(Shape::kMaxDims <= 4, "strided_copy_kernel walks at most four dims");
  StridedGeometry g{{1, 1, 1, 1}, {0, 0, 0, 0}};
  const int pad = 4 - self.dim();
  for (int i = 0; i < self.dim(); ++i) {
    g.size[pad + i] = self.size(i);
    g.stride[pad + i] = self.stride(i);
  }
  STRATA_ZONE(launch, Layer::kLibrary, "strided_copy_kernel<<<>>>");
  launch_strided_copy(element_size(self.dtype()), self.data_ptr(), g, out.data_ptr(), out.numel(), stream);
  return out;
}


// ---- The unary ops of layers/kernels/pointwise_math.h ------------------------------------------------------
// Note [Pointwise math written once]: one host side for every functor; the kernel is pointwise.cu's.

namespace {

// "gelu (cuda)" and "gelu_kernel<<<>>>" for an op named "gelu", built once per name (zone names must
// outlive the timeline).
template <typename Tag>
const std::array<std::string, 2>& zone_names_of(const char* name) {
  static const std::array<std::string, 2> kNames{std::string(name) + " (cuda)", std::string(name) + "_kernel<<<>>>"};
  return kNames;
}

struct GradientTag {};  // gives a functor's gradient op its own names

}  // namespace

template <typename Fn>
Tensor unary(const Tensor& self) {
  const auto& names = zone_names_of<Fn>(Fn::kName);
  STRATA_ZONE(zone, Layer::kLibrary, names[0].c_str());
  check_cuda_input(Fn::kName, self);
  const cudaStream_t stream = device_stream(self);
  Tensor out = Tensor::empty(self.sizes(), self.dtype(), self.device());
  STRATA_ZONE(launch, Layer::kLibrary, names[1].c_str());
  launch_unary<Fn>(self.dtype(), self.data_ptr(), out.data_ptr(), self.numel(), stream);
  return out;
}

template <typename Fn>
Tensor unary_gradient(const Tensor& grad_output, const Tensor& saved) {
  const auto& names = zone_names_of<std::pair<Fn, GradientTag>>(Fn::kGradientName);
  STRATA_ZONE(zone, Layer::kLibrary, names[0].c_str());
  op_shapes::check_operands(Fn::kGradientName, check_cuda_input, grad_output, saved);
  op_shapes::same_shape(Fn::kGradientName, grad_output.sizes(), saved.sizes());
  const cudaStream_t stream = device_stream(saved);
  Tensor out = Tensor::empty(saved.sizes(), saved.dtype(), saved.device());
  STRATA_ZONE(launch, Layer::kLibrary, names[1].c_str());
  launch_unary_gradient<Fn>(saved.dtype(), grad_output.data_ptr(), saved.data_ptr(), out.data_ptr(), out.numel(),
                            stream);
  return out;
}

// Every functor's host side, instantiated (the addresses in a table with external linkage make the compiler
// emit each one here, for the declarations in layers/ops to name).
template <typename... Fns>
constexpr std::array<Tensor (*)(const Tensor&), sizeof...(Fns)> unary_table(math::MathList<Fns...>) {
  return {&unary<Fns>...};
}
template <typename... Fns>
constexpr std::array<Tensor (*)(const Tensor&, const Tensor&), sizeof...(Fns)> gradient_table(math::MathList<Fns...>) {
  return {&unary_gradient<Fns>...};
}
extern const decltype(unary_table(math::UnaryMath{})) kUnaryKernels;
extern const decltype(gradient_table(math::UnaryGradientMath{})) kUnaryGradientKernels;
const decltype(unary_table(math::UnaryMath{})) kUnaryKernels = unary_table(math::UnaryMath{});
const decltype(gradient_table(math::UnaryGradientMath{})) kUnaryGradientKernels =
    gradient_table(math::UnaryGradientMath{});

// The named kernels of the ops that had their own before the functors (callers and tests name them).
Tensor relu(const Tensor& self) { return unary<math::Relu>(self); }
Tensor gelu(const Tensor& self) { return unary<math::Gelu>(self); }
Tensor tanh(const Tensor& self) { return unary<math::Tanh>(self); }
Tensor gelu_backward(const Tensor& grad_output, const Tensor& self) {
  return unary_gradient<math::Gelu>(grad_output, self);
}
Tensor tanh_backward(const Tensor& grad_output, const Tensor& output) {
  return unary_gradient<math::Tanh>(grad_output, output);
}

}  // namespace strata::kernels::cuda
