#include "lib/op_shapes.h"

#include <algorithm>
#include <array>
#include <string>
#include <utility>

#include "lib/error.h"

namespace strata::op_shapes {
namespace {

std::string bracket(const Shape& s) { return "[" + s.str() + "]"; }

}  // namespace

namespace {
std::string by(const Shape& s) { return s.ndim == 0 ? "[]" : s.str(); }  // "3x4"
}  // namespace

MatmulGeometry matmul_geometry(const Shape& self, const Shape& other) {
  if (self.ndim == 0 || other.ndim == 0) {
    throw UsageError("matmul: both arguments to matmul need to be at least 1D, but they are " +
                     std::to_string(self.ndim) + "D and " + std::to_string(other.ndim) + "D");
  }
  MatmulGeometry g;
  if (self.ndim == 1 && other.ndim == 1) {
    if (self[0] != other[0]) {
      throw UsageError("matmul: inconsistent tensor size, expected tensor [" + std::to_string(self[0]) +
                       "] and src [" + std::to_string(other[0]) +
                       "] to have the same number of elements, but got " + std::to_string(self[0]) + " and " +
                       std::to_string(other[0]) + " elements respectively");
    }
    g.k = self[0];
    return g;  // out: 0-d
  }
  const int64_t self_k = self[self.ndim - 1];
  const int64_t other_k = other.ndim == 1 ? other[0] : other[other.ndim - 2];
  g.m = self.ndim == 1 ? 1 : self[self.ndim - 2];
  g.n = other.ndim == 1 ? 1 : other[other.ndim - 1];
  g.k = self_k;
  // The batch: each operand's dims before its last two, broadcast (torch's words on a mismatch).
  const int self_nb = std::max(0, self.ndim - 2), other_nb = std::max(0, other.ndim - 2);
  g.batch.ndim = std::max(self_nb, other_nb);
  for (int i = 0; i < g.batch.ndim; ++i) {  // i counts from the batch's last dim
    const int sd = self_nb - 1 - i, od = other_nb - 1 - i;
    const int64_t a = sd >= 0 ? self[sd] : 1, b = od >= 0 ? other[od] : 1;
    if (a != b && a != 1 && b != 1) {
      throw UsageError("matmul: The size of tensor a (" + std::to_string(a) + ") must match the size of tensor b (" +
                       std::to_string(b) + ") at non-singleton dimension " + std::to_string(g.batch.ndim - 1 - i) +
                       " (batch dims of " + bracket(self) + " @ " + bracket(other) + ")");
    }
    g.batch[g.batch.ndim - 1 - i] = a == 1 ? b : a;
  }
  g.batch_count = g.batch.numel();
  if (self_k != other_k) {
    if (self.ndim <= 2 && other.ndim <= 2) {
      if (self.ndim == 2 && other.ndim == 1) {
        throw UsageError("matmul: size mismatch, got input (" + std::to_string(self[0]) + "), mat (" + by(self) +
                         "), vec (" + std::to_string(other[0]) + ")");
      }
      const Shape a = self.ndim == 1 ? Shape{1, self[0]} : self;
      throw UsageError("matmul: mat1 and mat2 shapes cannot be multiplied (" + by(a) + " and " + by(other) + ")");
    }
    throw UsageError("matmul: Expected size for first two dimensions of batch2 tensor to be: [" +
                     std::to_string(g.batch_count) + ", " + std::to_string(self_k) + "] but got: [" +
                     std::to_string(g.batch_count) + ", " + std::to_string(other_k) + "] (" + bracket(self) +
                     " @ " + bracket(other) + ")");
  }
  g.out = g.batch;
  if (self.ndim >= 2) g.out[g.out.ndim++] = g.m;
  if (other.ndim >= 2) g.out[g.out.ndim++] = g.n;
  return g;
}

Shape matmul(const Shape& self, const Shape& other) { return matmul_geometry(self, other).out; }

int64_t batch_offset(const Shape& batch, int64_t i, const Shape& sizes, const Shape& strides) {
  const int nb = std::max(0, sizes.ndim - 2);
  int64_t at = 0;
  for (int d = batch.ndim - 1; d >= 0; --d) {
    const int64_t idx = i % batch[d];
    i /= batch[d];
    const int od = d - (batch.ndim - nb);  // the operand's dim aligned with batch dim d
    if (od >= 0 && sizes[od] != 1) at += idx * strides[od];
  }
  return at;
}

int64_t linear_rows(const Shape& input) {
  int64_t rows = 1;
  for (int d = 0; d + 1 < input.ndim; ++d) rows *= input[d];
  return rows;
}

Shape linear(const Shape& input, const Shape& weight, const Shape* bias) {
  if (input.ndim < 1 || weight.ndim != 2) {
    throw UsageError("linear: expected input [..., IN] (at least 1-D) and weight [OUT,IN], got " + bracket(input) +
                     " and " + bracket(weight));
  }
  const int64_t in = input[input.ndim - 1];
  if (in != weight[1]) {
    throw UsageError("linear: mat1 and mat2 shapes cannot be multiplied (" + std::to_string(linear_rows(input)) + "x" +
                     std::to_string(in) + " and " + std::to_string(weight[1]) + "x" + std::to_string(weight[0]) +
                     ") (input " + bracket(input) + ", weight " + bracket(weight) + ")");
  }
  if (bias != nullptr && (bias->ndim != 1 || (*bias)[0] != weight[0])) {
    throw UsageError("linear: bias must be [" + std::to_string(weight[0]) + "] to match weight " +
                     bracket(weight) + ", got " + bracket(*bias));
  }
  Shape out = input;
  out[out.ndim - 1] = weight[0];
  return out;
}

Shape elementwise(const Shape& self, const Shape& other) {
  if (!(self == other)) {
    throw UsageError("add: shapes differ: " + bracket(self) + " and " + bracket(other) +
                     " (strata's add does not broadcast; give both operands the same shape)");
  }
  return self;
}

Shape broadcast(const char* op, const Shape& self, const Shape& other) {
  Shape out;
  out.ndim = std::max(self.ndim, other.ndim);
  for (int i = 0; i < out.ndim; ++i) {  // i counts dims from the last
    const int a_dim = self.ndim - 1 - i, b_dim = other.ndim - 1 - i;
    const int64_t a = a_dim >= 0 ? self[a_dim] : 1, b = b_dim >= 0 ? other[b_dim] : 1;
    if (a != b && a != 1 && b != 1) {
      throw UsageError(std::string(op) + ": shapes " + bracket(self) + " and " + bracket(other) +
                       " cannot broadcast: size " + std::to_string(a) + " and size " + std::to_string(b) +
                       " at dim " + std::to_string(-1 - i) +
                       " (aligned from the last dim, each pair of sizes must be equal or one of them 1)");
    }
    out[out.ndim - 1 - i] = a == 1 ? b : a;
  }
  return out;
}

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::kF64 || b == DType::kF64) return DType::kF64;
  return DType::kF32;  // f32 with a half type, or f16 with bf16
}

DType result_type(const Tensor& self, const Tensor& other) {
  // Note [Type promotion]: one category (floating) for every strata dtype, so a 0-d operand never wins.
  if (self.dim() == 0 && other.dim() > 0) return other.dtype();
  if (other.dim() == 0 && self.dim() > 0) return self.dtype();
  return promote_types(self.dtype(), other.dtype());
}

namespace {
// torch's size text: "[4, 3, 3, 3]".
std::string sizes_text(const Shape& s) {
  std::string out = "[";
  for (int i = 0; i < s.ndim; ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// One of conv2d's int[2] arguments as its two values: one int serves both dims (torch's
// expand_param_if_needed), and every value lies in [low, kMaxConvArgument], the kernels' int range.
std::array<int64_t, 2> conv_pair(const char* name, const Shape& v, int64_t low, const char* below_low) {
  if (v.ndim != 1 && v.ndim != 2) {
    throw UsageError(std::string("conv2d: expected ") + name +
                     " to be a single integer value or a list of 2 values to match the convolution dimensions, "
                     "but got " + name + "=" + sizes_text(v));
  }
  const std::array<int64_t, 2> pair{v[0], v[v.ndim - 1]};
  for (int64_t x : pair) {
    if (x < low) throw UsageError(std::string("conv2d: ") + below_low + ", got " + name + "=" + sizes_text(v));
    if (x > kMaxConvArgument) {
      throw UsageError(std::string("conv2d: ") + name + " must be between " + std::to_string(low) + " and " +
                       std::to_string(kMaxConvArgument) + ", got " + std::to_string(x));
    }
  }
  return pair;
}

// The checks on the channels, in torch's order and words (ConvUtils.h's check_shape_forward).
void check_conv_channels(const Shape& input, const Shape& weight, const Shape* bias, int64_t groups) {
  const std::string given = "conv2d: Given groups=" + std::to_string(groups) + ", ";
  if (weight[0] % groups != 0) {
    throw UsageError(given + "expected weight to be divisible by " + std::to_string(groups) +
                     " at dimension 0, but got weight of size " + sizes_text(weight) + " instead");
  }
  int64_t expected = 0;
  const bool overflows = __builtin_mul_overflow(weight[1], groups, &expected);
  if (overflows || input[1] != expected) {
    throw UsageError(given + "weight of size " + sizes_text(weight) + ", expected input" + sizes_text(input) +
                     " to have " +
                     (overflows ? std::to_string(weight[1]) + " x " + std::to_string(groups) : std::to_string(expected)) +
                     " channels, but got " + std::to_string(input[1]) + " channels instead");
  }
  if (bias != nullptr && (bias->ndim != 1 || (*bias)[0] != weight[0])) {
    throw UsageError("conv2d: Given weight of size " + sizes_text(weight) + ", expected bias to be 1-dimensional with " +
                     std::to_string(weight[0]) + " elements, but got bias of size " + sizes_text(*bias) + " instead");
  }
}
}  // namespace

Conv2dGeometry conv2d(const Shape& input, const Shape& weight, const Shape* bias, const Shape& stride,
                      const Shape& padding, const Shape& dilation, int64_t groups) {
  if (input.ndim != 4 || weight.ndim != 4) {
    throw UsageError("conv2d: expected input [N,C,H,W] and weight [K,C/groups,R,S], got " + bracket(input) +
                     " and " + bracket(weight));
  }
  // The kernels index with int (BLAS, cuDNN), and the padded size must not overflow: the CLI's own
  // limits on --stride and --pad, for every caller (a Python int reaches here as any int64).
  if (groups < 1) throw UsageError("conv2d: non-positive groups is not supported, got groups=" + std::to_string(groups));
  if (groups > kMaxConvArgument) {
    throw UsageError("conv2d: groups must be between 1 and " + std::to_string(kMaxConvArgument) + ", got " +
                     std::to_string(groups));
  }
  const auto [stride_h, stride_w] = conv_pair("stride", stride, 1, "non-positive stride is not supported");
  const auto [pad_h, pad_w] = conv_pair("padding", padding, 0, "negative padding is not supported");
  const auto [dilation_h, dilation_w] = conv_pair("dilation", dilation, 1, "dilation should be greater than zero");
  check_conv_channels(input, weight, bias, groups);
  Conv2dGeometry g{input[0], input[1], input[2], input[3], weight[0], weight[2], weight[3], stride_h, stride_w,
                   pad_h,    pad_w,    dilation_h, dilation_w, groups, 0, 0};
  int64_t padded_h = 0, padded_w = 0, extent_h = 0, extent_w = 0;
  if (__builtin_add_overflow(g.height, 2 * pad_h, &padded_h) || __builtin_add_overflow(g.width, 2 * pad_w, &padded_w)) {
    throw UsageError("conv2d: input " + bracket(input) + " padded by " + sizes_text(padding) +
                     " on each side is larger than int64 can index");
  }
  // The kernel's extent on the input: a dilated kernel spans dilation * (R - 1) + 1 pixels.
  const bool too_wide = __builtin_mul_overflow(dilation_h, g.kernel_h - 1, &extent_h) ||
                        __builtin_mul_overflow(dilation_w, g.kernel_w - 1, &extent_w);
  ++extent_h;
  ++extent_w;
  if (too_wide || extent_h > padded_h || extent_w > padded_w) {
    // Worded as torch's, with the schema's argument names (which are Python's too); the CLI checks its
    // own flags first.
    throw UsageError("conv2d: Calculated padded input size per channel: (" + std::to_string(padded_h) + " x " +
                     std::to_string(padded_w) + "). Kernel size: (" + std::to_string(extent_h) + " x " +
                     std::to_string(extent_w) + "). Kernel size can't be greater than actual input size (the kernel " +
                     "is weight's last two sizes, spread by dilation): give a weight with a smaller kernel, less " +
                     "dilation, or more padding");
  }
  g.out_height = (padded_h - extent_h) / stride_h + 1;
  g.out_width = (padded_w - extent_w) / stride_w + 1;
  return g;
}

Shape gemm(const Shape& self, const Shape& other, int64_t transpose_self, int64_t transpose_other) {
  auto flag = [](const char* name, int64_t v) {
    if (v != 0 && v != 1) throw UsageError(std::string("gemm: ") + name + " must be 0 or 1, got " + std::to_string(v));
  };
  flag("transpose_self", transpose_self);
  flag("transpose_other", transpose_other);
  if (self.ndim != 2 || other.ndim != 2) {
    throw UsageError("gemm: expected two 2-D tensors, got " + bracket(self) + " and " + bracket(other));
  }
  const int64_t m = transpose_self ? self[1] : self[0], k = transpose_self ? self[0] : self[1];
  const int64_t k2 = transpose_other ? other[1] : other[0], n = transpose_other ? other[0] : other[1];
  if (k != k2) {
    throw UsageError("gemm: inner dimensions differ: op(" + bracket(self) + ") @ op(" + bracket(other) +
                     ") with transposes " + std::to_string(transpose_self) + ", " + std::to_string(transpose_other) +
                     " is [" + std::to_string(m) + "x" + std::to_string(k) + "] @ [" + std::to_string(k2) + "x" +
                     std::to_string(n) + "]");
  }
  return Shape{m, n};
}

Shape same_shape(const char* op, const Shape& self, const Shape& other) {
  if (!(self == other)) {
    throw UsageError(std::string(op) + ": shapes differ: " + bracket(self) + " and " + bracket(other) +
                     " (both tensors must have the same shape)");
  }
  return self;
}

Shape bias_backward(const Shape& grad) {
  if (grad.ndim != 2 && grad.ndim != 4) {
    throw UsageError("bias_backward: expected a gradient [B,C] or [N,C,H,W], got " + bracket(grad));
  }
  return Shape{grad[1]};
}

Shape expand_as(const Shape& self, const Shape& other) {
  if (self.numel() != 1) {
    throw UsageError("expand_as: expected a one-element tensor to broadcast, got " + bracket(self));
  }
  return other;
}

Conv2dGeometry conv2d_backward(const char* op, const Shape& grad_output, const Shape& input, const Shape& weight,
                               const Shape& stride, const Shape& padding, const Shape& dilation, int64_t groups) {
  const Conv2dGeometry g = conv2d(input, weight, nullptr, stride, padding, dilation, groups);
  if (!(grad_output == g.output())) {
    throw UsageError(std::string(op) + ": grad_output must be the conv2d output's shape " + bracket(g.output()) +
                     ", got " + bracket(grad_output));
  }
  return g;
}

void check_same_dtype_and_device(const char* op, const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype()) {
    throw UsageError(std::string(op) + ": dtypes differ: " + a.str() + " and " + b.str());
  }
  if (!(a.device() == b.device())) {
    throw UsageError(std::string(op) + ": devices differ: " + a.str() + " and " + b.str());
  }
}

}  // namespace strata::op_shapes

namespace strata::op_shapes {

Reduction reduce_dims(const char* op, const Shape& self, const Shape& dim, bool keepdim) {
  Reduction r;
  const int64_t n = self.ndim == 0 ? 1 : self.ndim;  // a 0-d tensor takes dim 0 or -1, as torch
  for (int i = 0; i < dim.ndim; ++i) {
    if (dim[i] < -n || dim[i] >= n) {
      throw IndexRangeError(std::string(op) + "(): Dimension out of range (expected to be in range of [" +
                            std::to_string(-n) + ", " + std::to_string(n - 1) + "], but got " +
                            std::to_string(dim[i]) + ") for a tensor of size " + bracket(self));
    }
    const auto d = static_cast<size_t>(dim[i] < 0 ? dim[i] + n : dim[i]);
    if (r.reduced[d]) {
      throw UsageError(std::string(op) + "(): dim " + std::to_string(d) +
                       " appears multiple times in the list of dims");
    }
    r.reduced[d] = true;
  }
  if (dim.ndim == 0) r.reduced.fill(true);
  r.out.ndim = 0;
  r.kept.ndim = self.ndim;
  for (int i = 0; i < self.ndim; ++i) {
    const bool reduced = r.reduced[static_cast<size_t>(i)];
    r.kept[i] = reduced ? 1 : self[i];
    if (reduced) r.count *= self[i];
    if (!reduced || keepdim) r.out[r.out.ndim++] = r.kept[i];
  }
  return r;
}

}  // namespace strata::op_shapes

namespace strata::op_shapes {

RowsAround rows_around(const char* op, const Shape& self, int64_t dim) {
  const int64_t n = self.ndim == 0 ? 1 : self.ndim;
  if (dim < -n || dim >= n) {
    throw IndexRangeError(std::string(op) + "(): Dimension out of range (expected to be in range of [" +
                          std::to_string(-n) + ", " + std::to_string(n - 1) + "], but got " + std::to_string(dim) +
                          ") for a tensor of size " + bracket(self));
  }
  RowsAround r;
  r.dim = dim < 0 ? dim + n : dim;
  for (int i = 0; i < self.ndim; ++i) {
    if (i < r.dim) r.outer *= self[i];
    else if (i == r.dim) r.size = self[i];
    else r.inner *= self[i];
  }
  return r;
}

double rms_norm_eps(DType dtype, std::optional<double> eps) {
  if (eps) return *eps;
  switch (dtype) {
    case DType::kF32: return 1.1920928955078125e-07;  // 2^-23
    case DType::kF64: return 2.220446049250313e-16;   // 2^-52
    case DType::kF16: return 0.0009765625;            // 2^-10
    case DType::kBF16: return 0.0078125;              // 2^-7
  }
  return 0;
}

NormRows norm_rows(const char* op, const Shape& input, const Shape& normalized_shape, const Shape* weight,
                   const Shape* bias) {
  if (normalized_shape.ndim == 0) {
    throw UsageError(std::string(op) + "(): Expected normalized_shape to be at least 1-dimensional, i.e., "
                     "containing at least one element, but got normalized_shape = []");
  }
  const int lead = input.ndim - normalized_shape.ndim;
  bool fits = lead >= 0;
  for (int i = 0; fits && i < normalized_shape.ndim; ++i) fits = input[lead + i] == normalized_shape[i];
  if (!fits) {
    throw UsageError(std::string(op) + "(): Given normalized_shape=" + bracket(normalized_shape) +
                     ", expected input with shape [*, " + normalized_shape.str() + "], but got input of size " +
                     bracket(input));
  }
  for (const auto& [what, shape] : {std::pair{"weight", weight}, std::pair{"bias", bias}}) {
    if (shape != nullptr && !(*shape == normalized_shape)) {
      throw UsageError(std::string(op) + "(): Expected " + what + " to be of same shape as normalized_shape, but got " +
                       what + " of shape " + bracket(*shape) + " and normalized_shape = " + bracket(normalized_shape));
    }
  }
  NormRows r;
  for (int i = 0; i < input.ndim; ++i) (i < lead ? r.rows : r.cols) *= input[i];
  return r;
}

}  // namespace strata::op_shapes
