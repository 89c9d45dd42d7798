#include "lib/op_shapes.h"

#include <string>

#include "lib/error.h"

namespace strata::op_shapes {
namespace {

std::string bracket(const Shape& s) { return "[" + s.str() + "]"; }

}  // namespace

Shape matmul(const Shape& self, const Shape& other) {
  if (self.ndim != 2 || other.ndim != 2) {
    throw UsageError("matmul: expected two 2-D tensors [M,K] and [K,N], got " + bracket(self) + " and " +
                     bracket(other));
  }
  if (self[1] != other[0]) {
    throw UsageError("matmul: inner dimensions differ: " + bracket(self) + " @ " + bracket(other) +
                     " (the second size of the first operand must equal the first size of the second)");
  }
  return Shape{self[0], other[1]};
}

Shape linear(const Shape& input, const Shape& weight, const Shape* bias) {
  if (input.ndim != 2 || weight.ndim != 2) {
    throw UsageError("linear: expected input [B,IN] and weight [OUT,IN], got " + bracket(input) + " and " +
                     bracket(weight));
  }
  if (input[1] != weight[1]) {
    throw UsageError("linear: input features differ: input " + bracket(input) + " has " +
                     std::to_string(input[1]) + ", weight " + bracket(weight) + " expects " +
                     std::to_string(weight[1]));
  }
  if (bias != nullptr && (bias->ndim != 1 || (*bias)[0] != weight[0])) {
    throw UsageError("linear: bias must be [" + std::to_string(weight[0]) + "] to match weight " +
                     bracket(weight) + ", got " + bracket(*bias));
  }
  return Shape{input[0], weight[0]};
}

Shape elementwise(const Shape& self, const Shape& other) {
  if (!(self == other)) {
    throw UsageError("add: shapes differ: " + bracket(self) + " and " + bracket(other) +
                     " (strata's add does not broadcast; give both operands the same shape)");
  }
  return self;
}

Conv2dGeometry conv2d(const Shape& input, const Shape& weight, const Shape* bias, int64_t stride,
                      int64_t padding) {
  if (input.ndim != 4 || weight.ndim != 4) {
    throw UsageError("conv2d: expected input [N,C,H,W] and weight [K,C,R,S], got " + bracket(input) +
                     " and " + bracket(weight));
  }
  if (stride < 1) throw UsageError("conv2d: stride must be at least 1, got " + std::to_string(stride));
  if (padding < 0) throw UsageError("conv2d: padding must be 0 or more, got " + std::to_string(padding));
  if (input[1] != weight[1]) {
    throw UsageError("conv2d: channels differ: input " + bracket(input) + " has " + std::to_string(input[1]) +
                     " channels, weight " + bracket(weight) + " expects " + std::to_string(weight[1]));
  }
  Conv2dGeometry g{input[0], input[1], input[2], input[3], weight[0], weight[2], weight[3],
                   stride,   padding,  0,        0};
  int64_t padded_h = g.height + 2 * padding, padded_w = g.width + 2 * padding;
  if (g.kernel_h > padded_h || g.kernel_w > padded_w) {
    throw UsageError("conv2d: kernel " + std::to_string(g.kernel_h) + "x" + std::to_string(g.kernel_w) +
                     " is larger than the padded input " + std::to_string(padded_h) + "x" +
                     std::to_string(padded_w) + " (use a smaller --kernel or more --pad)");
  }
  g.out_height = (padded_h - g.kernel_h) / stride + 1;
  g.out_width = (padded_w - g.kernel_w) / stride + 1;
  if (bias != nullptr && (bias->ndim != 1 || (*bias)[0] != g.out_channels)) {
    throw UsageError("conv2d: bias must be [" + std::to_string(g.out_channels) + "], got " + bracket(*bias));
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
