// The normalization ops on the GPU (Note [Normalization ops] in layers/ops/normalization.h): argument
// checks with the shape rules the CPU kernels use, the output allocated, strata's own kernels
// (normalization.cu) queued on the tensor's stream inside a Library zone.
#include <optional>
#include <string>

#include "layers/kernels/cuda/cuda_common.h"
#include "layers/kernels/cuda/cuda_kernels.h"
#include "layers/kernels/cuda/normalization_launch.h"
#include "lib/op_shapes.h"
#include "lib/zone.h"

namespace strata::kernels::cuda {
namespace {

const void* data_or_null(const Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }

Tensor softmax_op(const char* op, const char* zone_name, const Tensor& self, int64_t dim, bool log) {
  check_cuda_input(op, self);
  const op_shapes::RowsAround r = op_shapes::rows_around(op, self.sizes(), dim);
  Tensor out = Tensor::empty(self.sizes(), self.dtype(), self.device());
  if (out.numel() == 0) return out;
  const cudaStream_t stream = device_stream(self);
  STRATA_ZONE(zone, Layer::kLibrary, zone_name);
  launch_softmax(self.dtype(), self.data_ptr(), out.data_ptr(), r.outer, r.size, r.inner, log, stream);
  return out;
}

Tensor softmax_backward_op(const char* op, const char* zone_name, const Tensor& grad_output, const Tensor& output,
                           int64_t dim, bool log) {
  op_shapes::check_operands(op, check_cuda_input, grad_output, output);
  op_shapes::same_shape(op, grad_output.sizes(), output.sizes());
  const op_shapes::RowsAround r = op_shapes::rows_around(op, output.sizes(), dim);
  Tensor out = Tensor::empty(output.sizes(), output.dtype(), output.device());
  if (out.numel() == 0) return out;
  const cudaStream_t stream = device_stream(output);
  STRATA_ZONE(zone, Layer::kLibrary, zone_name);
  launch_softmax_backward(output.dtype(), grad_output.data_ptr(), output.data_ptr(), out.data_ptr(), r.outer, r.size,
                          r.inner, log, stream);
  return out;
}

op_shapes::NormRows norm_rows_of(const char* op, const Tensor& input, const Shape& normalized_shape,
                                 const Tensor& weight, const Tensor& bias) {
  const Shape ws = weight.defined() ? weight.sizes() : Shape{}, bs = bias.defined() ? bias.sizes() : Shape{};
  return op_shapes::norm_rows(op, input.sizes(), normalized_shape, weight.defined() ? &ws : nullptr,
                              bias.defined() ? &bs : nullptr);
}

Tensor norm_op(const char* op, const char* zone_name, const Tensor& input, const Shape& normalized_shape,
               const Tensor& weight, const Tensor& bias, double eps, bool rms) {
  op_shapes::check_operands(op, check_cuda_input, input, weight, bias);
  const op_shapes::NormRows n = norm_rows_of(op, input, normalized_shape, weight, bias);
  Tensor out = Tensor::empty(input.sizes(), input.dtype(), input.device());
  if (out.numel() == 0) return out;
  const cudaStream_t stream = device_stream(input);
  STRATA_ZONE(zone, Layer::kLibrary, zone_name);
  launch_norm(input.dtype(), input.data_ptr(), data_or_null(weight), data_or_null(bias), out.data_ptr(), n.rows, n.cols,
              eps, rms, stream);
  return out;
}

Tensor norm_input_backward_op(const char* op, const char* zone_name, const Tensor& grad_output, const Tensor& input,
                              const Shape& normalized_shape, const Tensor& weight, double eps, bool rms) {
  op_shapes::check_operands(op, check_cuda_input, grad_output, input, weight);
  op_shapes::same_shape(op, grad_output.sizes(), input.sizes());
  const op_shapes::NormRows n = norm_rows_of(op, input, normalized_shape, weight, Tensor());
  Tensor out = Tensor::empty(input.sizes(), input.dtype(), input.device());
  if (out.numel() == 0) return out;
  const cudaStream_t stream = device_stream(input);
  STRATA_ZONE(zone, Layer::kLibrary, zone_name);
  launch_norm_input_backward(input.dtype(), grad_output.data_ptr(), input.data_ptr(), data_or_null(weight),
                             out.data_ptr(), n.rows, n.cols, eps, rms, stream);
  return out;
}

Tensor norm_weight_backward_op(const char* op, const char* zone_name, const Tensor& grad_output, const Tensor& input,
                               const Shape& normalized_shape, double eps, bool rms) {
  op_shapes::check_operands(op, check_cuda_input, grad_output, input);
  op_shapes::same_shape(op, grad_output.sizes(), input.sizes());
  const op_shapes::NormRows n = norm_rows_of(op, input, normalized_shape, Tensor(), Tensor());
  Tensor out = Tensor::empty(normalized_shape, input.dtype(), input.device());
  if (out.numel() == 0) return out;
  const cudaStream_t stream = device_stream(input);
  if (n.rows == 0) {  // the sum over no rows is 0 (Note [Empty reductions])
    fill_zeros(out, stream);
    return out;
  }
  // Each row's mean and rstd, from the caching allocator like any tensor.
  Tensor stats = Tensor::empty(Shape{n.rows, 2}, DType::kF64, input.device());
  STRATA_ZONE(zone, Layer::kLibrary, zone_name);
  launch_norm_weight_backward(input.dtype(), grad_output.data_ptr(), input.data_ptr(), out.data_ptr(),
                              static_cast<double*>(stats.data_ptr()), n.rows, n.cols, eps, rms, stream);
  return out;
}

}  // namespace

Tensor softmax(const Tensor& self, int64_t dim) {
  return softmax_op("softmax", "softmax_kernel<<<>>>", self, dim, false);
}
Tensor log_softmax(const Tensor& self, int64_t dim) {
  return softmax_op("log_softmax", "log_softmax (softmax_kernel<<<>>>)", self, dim, true);
}
Tensor softmax_backward_data(const Tensor& grad_output, const Tensor& output, int64_t dim) {
  return softmax_backward_op("_softmax_backward_data", "softmax_backward_kernel<<<>>>", grad_output, output, dim,
                             false);
}
Tensor log_softmax_backward_data(const Tensor& grad_output, const Tensor& output, int64_t dim) {
  return softmax_backward_op("_log_softmax_backward_data", "log_softmax_backward (softmax_backward_kernel<<<>>>)",
                             grad_output, output, dim, true);
}

Tensor layer_norm(const Tensor& input, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  return norm_op("layer_norm", "layer_norm (norm_kernel<<<>>>)", input, normalized_shape, weight, bias, eps, false);
}
Tensor rms_norm(const Tensor& input, const Shape& normalized_shape, const Tensor& weight, std::optional<double> eps) {
  return norm_op("rms_norm", "rms_norm (norm_kernel<<<>>>)", input, normalized_shape, weight, Tensor(),
                 op_shapes::rms_norm_eps(input.dtype(), eps), true);
}
Tensor layer_norm_input_backward(const Tensor& grad_output, const Tensor& input, const Shape& normalized_shape,
                                 const Tensor& weight, double eps) {
  return norm_input_backward_op("layer_norm_input_backward", "layer_norm_input_backward (norm_input_backward_kernel<<<>>>)",
                                grad_output, input, normalized_shape, weight, eps, false);
}
Tensor layer_norm_weight_backward(const Tensor& grad_output, const Tensor& input, const Shape& normalized_shape,
                                  double eps) {
  return norm_weight_backward_op("layer_norm_weight_backward", "layer_norm_weight_backward (two kernels)", grad_output,
                                 input, normalized_shape, eps, false);
}
Tensor rms_norm_input_backward(const Tensor& grad_output, const Tensor& input, const Shape& normalized_shape,
                               const Tensor& weight, double eps) {
  return norm_input_backward_op("rms_norm_input_backward", "rms_norm_input_backward (norm_input_backward_kernel<<<>>>)",
                                grad_output, input, normalized_shape, weight, eps, true);
}
Tensor rms_norm_weight_backward(const Tensor& grad_output, const Tensor& input, const Shape& normalized_shape,
                                double eps) {
  return norm_weight_backward_op("rms_norm_weight_backward", "rms_norm_weight_backward (two kernels)", grad_output,
                                 input, normalized_shape, eps, true);
}

}  // namespace strata::kernels::cuda
