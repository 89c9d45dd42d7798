// The shape rules of every operator: what each accepts and what it returns. One place, shared by the
// frontend (which refuses a bad spec, and sizes the memory it needs, before allocating anything) and the
// kernels (which refuse whatever reaches them through the binding layer). Violations are UsageErrors that
// say what was given and what would be accepted.
#pragma once

#include <array>
#include <cstdint>
#include <optional>

#include "lib/tensor.h"

namespace strata::op_shapes {

// Note [matmul's shape rules]
// torch.matmul's: 1-D @ 1-D is a dot product (a 0-d result); a 1-D first operand is a row [1,K] and a
// 1-D second one a column [K,1], the added dim removed from the result; 2-D @ 2-D is [M,K] @ [K,N]; with
// more dims the leading ones are a batch of matrices, broadcast against each other (Note [Broadcasting]):
// [2,1,3,4] @ [5,4,6] -> [2,5,3,6]. Errors are torch's words.
Shape matmul(const Shape& self, const Shape& other);
struct MatmulGeometry {
  Shape out;                  // the result (1-D operands' added dims removed)
  Shape batch;                // the broadcast batch dims (none for 1-D and 2-D operands)
  int64_t batch_count = 1;    // matrices in the batch
  int64_t m = 1, k = 0, n = 1;
};
MatmulGeometry matmul_geometry(const Shape& self, const Shape& other);
// Where matrix `i` of `batch` (row-major) starts in an operand of `sizes` and `strides` (elements), whose
// leading sizes.ndim - 2 dims are its batch dims, aligned with batch's last ones; a size-1 dim broadcasts.
int64_t batch_offset(const Shape& batch, int64_t i, const Shape& sizes, const Shape& strides);
// input [..., IN] (1-D to 4-D) x [OUT,IN]^T + [OUT] -> [..., OUT]; rows() is the input's rows.
Shape linear(const Shape& input, const Shape& weight, const Shape* bias);
int64_t linear_rows(const Shape& input);  // the product of the input's leading dims (1 for 1-D)
Shape elementwise(const Shape& self, const Shape& other);                       // identical shapes (CUDA add)
// Note [Broadcasting]
// PyTorch's rule for two operands: align the shapes at their last dims (the shorter padded with 1s in
// front); each pair of sizes must be equal or one of them 1, and the result takes the larger. A 0-d
// tensor (a scalar) broadcasts to anything. `op` names the operator in the message, which gives both
// shapes and the first dim that disagrees.
Shape broadcast(const char* op, const Shape& self, const Shape& other);
// Note [Type promotion]
// PyTorch's rule for two tensors of strata's floating types: the wider wins (f32 + f64 -> f64, f16 + f32
// -> f32), and f16 with bf16, neither of which holds the other's values, gives f32. A Python number is not
// a tensor here (mul.Scalar and friends keep the tensor's dtype), as torch's wrapped numbers do not promote.
// A 0-d tensor beside a dimensioned one takes part only when its category is higher (torch's
// result_type: integral < floating < complex); every strata dtype is floating, so the dimensioned
// operand's dtype wins: [n] f32 * 0-d f64 is f32, [n] bf16 * 0-d f16 is bf16. Two 0-d tensors, or two
// dimensioned ones, promote by promote_types.
DType promote_types(DType a, DType b);
// The dtype a binary op of `self` and `other` computes in, by the rule above.
DType result_type(const Tensor& self, const Tensor& other);

// The largest stride, padding and dilation conv2d takes (BLAS and cuDNN index with int).
inline constexpr int64_t kMaxConvArgument = 2147483647;

// conv2d with torch's arguments: stride, padding and dilation per spatial dim (H, W), and groups: the
// channels split into `groups` independent convolutions, weight [K, C/groups, R, S].
struct Conv2dGeometry {
  int64_t batch, in_channels, height, width;  // input NCHW
  int64_t out_channels, kernel_h, kernel_w;   // weight [K, C/groups, R, S]
  int64_t stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w, groups;
  int64_t out_height, out_width;
  int64_t group_in_channels() const { return in_channels / groups; }
  int64_t group_out_channels() const { return out_channels / groups; }
  Shape output() const { return Shape{batch, out_channels, out_height, out_width}; }
};
// stride, padding and dilation hold one int (both dims) or two (H, W), as torch's int[2] arguments do.
// Refusals are worded as torch's ("Given groups=2, weight of size [4, 3, 3, 3], expected input[1, 5, 8, 8]
// to have 6 channels, but got 5 channels instead").
Conv2dGeometry conv2d(const Shape& input, const Shape& weight, const Shape* bias, const Shape& stride,
                      const Shape& padding, const Shape& dilation, int64_t groups);

// The gradient ops (layers/ops/operators.h, the backward formulas' calls).
// op(A) @ op(B) with op = transpose when the flag is 1: [M,K] @ [K,N] after the transposes.
Shape gemm(const Shape& self, const Shape& other, int64_t transpose_self, int64_t transpose_other);
Shape same_shape(const char* op, const Shape& self, const Shape& other);  // identical shapes, named op
Shape bias_backward(const Shape& grad);                 // [B,C] or [N,C,H,W] -> [C]: sum over all but dim 1
Shape expand_as(const Shape& self, const Shape& other);  // a one-element self, broadcast to other's shape
// A conv2d's geometry from its input and weight, checked against the gradient of its output.
Conv2dGeometry conv2d_backward(const char* op, const Shape& grad_output, const Shape& input, const Shape& weight,
                               const Shape& stride, const Shape& padding, const Shape& dilation, int64_t groups);

// Tensors of one call must agree on dtype and device; `op` names the operator in the message.
void check_same_dtype_and_device(const char* op, const Tensor& a, const Tensor& b);

// The argument checks every kernel starts with: the defined operands agree with the first on dtype and
// device, then each passes the backend's own check (`backend_check(op, tensor)`: device, dtype, layout).
// Agreement comes first on every backend: `add(cuda_tensor, cpu_tensor)` reaches the CUDA kernel (the
// highest key of the two), whose own check sees one operand and could only say "CUDA kernel got a CPU
// tensor"; the caller's mistake is the mismatch, and its message names both devices.
// An undefined tensor is an absent optional one (a bias) and is skipped.
template <typename BackendCheck, typename... Rest>
void check_operands(const char* op, BackendCheck&& backend_check, const Tensor& first, const Rest&... rest) {
  auto agrees = [&](const Tensor& t) {
    if (t.defined()) check_same_dtype_and_device(op, first, t);
  };
  (agrees(rest), ...);
  backend_check(op, first);
  auto own = [&](const Tensor& t) {
    if (t.defined()) backend_check(op, t);
  };
  (own(rest), ...);
}

}  // namespace strata::op_shapes

namespace strata::op_shapes {

// sum.dim_IntList / mean.dim (PyTorch's reduction shape rule): the dims of `self` listed in `dim` are
// reduced, negative ones counted from the end; an empty list means every dim (torch's dim=[] or None).
// A dim out of range is an IndexRangeError, one listed twice a UsageError, in torch's words. `out` drops
// the reduced dims, or keeps them as 1 with keepdim; `kept` is the keepdim shape either way (the shape a
// gradient is reshaped to before it is expanded back); `count` is how many elements each output sums.
struct Reduction {
  Shape out;
  Shape kept;
  std::array<bool, Shape::kMaxDims> reduced{};
  int64_t count = 1;
};
Reduction reduce_dims(const char* op, const Shape& self, const Shape& dim, bool keepdim);

}  // namespace strata::op_shapes

namespace strata::op_shapes {

// softmax / log_softmax and their gradients (Note [Normalization ops] in layers/ops/normalization.h): the
// tensor seen as [outer, size, inner] around `dim`, which is wrapped as torch wraps it (a 0-d tensor takes
// 0 or -1 and is one row of one element); a dim out of range is an IndexRangeError in torch's words.
struct RowsAround {
  int64_t dim = 0;  // wrapped into [0, ndim)
  int64_t outer = 1, size = 1, inner = 1;
};
RowsAround rows_around(const char* op, const Shape& self, int64_t dim);

// layer_norm / rms_norm and their gradients: `normalized_shape` must be the input's last dims (at least
// one), and a weight or bias (null: absent) must have exactly that shape; either mistake is a UsageError
// naming both shapes, in torch's words. The input is then [rows, cols], cols the normalized elements.
struct NormRows {
  int64_t rows = 1, cols = 1;
};
NormRows norm_rows(const char* op, const Shape& input, const Shape& normalized_shape, const Shape* weight,
                   const Shape* bias);
// rms_norm's eps: as given, or for None torch.finfo(dtype).eps of the input's dtype (torch's default).
double rms_norm_eps(DType dtype, std::optional<double> eps);

}  // namespace strata::op_shapes
