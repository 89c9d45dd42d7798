// The spec of conv2d, the one that reads the conv options (its gradients reuse it: gradients.h).
// Part of layers/frontend/specs/specs.h (Note [An op's spec beside the frontend] in spec_format.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "layers/frontend/specs/spec_format.h"

namespace strata::frontend {

// The call of `conv NxCxHxW` with the conv options (conv2d's, and the base of its gradients').
inline SpecCall conv_spec(std::vector<int64_t>& d, const ConvOptions& options, std::string_view typed) {
  constexpr int64_t kMaxDim = 2147483647;  // BLAS and CUDA index with int
  if (d.size() != 4)
    throw UsageError("conv takes NxCxHxW (batch, channels, height, width), got '" + std::string(typed) + "'");
  const int64_t k = options.out_channels.value_or(d[1]), r = options.kernel, stride = options.stride,
                pad = options.pad, dilation = options.dilation, groups = options.groups;
  auto range = [&](const char* option, int64_t v, int64_t low) {
    if (v < low || v > kMaxDim) {
      throw UsageError(std::string(option) + " must be between " + std::to_string(low) + " and " +
                       std::to_string(kMaxDim) + ", got " + std::to_string(v));
    }
  };
  range("--out-channels", k, 1);
  range("--kernel", r, 1);
  range("--stride", stride, 1);
  range("--pad", pad, 0);
  range("--dilation", dilation, 1);
  range("--groups", groups, 1);
  if (d[1] % groups != 0 || k % groups != 0) {
    throw UsageError("conv: --groups " + std::to_string(groups) + " must divide the input channels " +
                     std::to_string(d[1]) + " and --out-channels " + std::to_string(k));
  }
  const int64_t h = d[2] + 2 * pad, w = d[3] + 2 * pad, extent = dilation * (r - 1) + 1;  // both < 2^33
  if (extent > h || extent > w) {
    throw UsageError("conv: --kernel " + std::to_string(r) + (dilation > 1 ? " at --dilation " + std::to_string(dilation) : "") +
                     " is larger than the padded input " + std::to_string(h) + "x" + std::to_string(w) +
                     " (use a smaller --kernel" + (dilation > 1 ? " or --dilation" : "") + ", or more --pad)");
  }
  SpecCall c;
  const int64_t group_channels = d[1] / groups;
  const Shape input{d[0], d[1], d[2], d[3]}, weight{k, group_channels, r, r}, bias{k};
  const op_shapes::Conv2dGeometry g = op_shapes::conv2d(input, weight, &bias, {stride}, {pad}, {dilation}, groups);
  c.args = {SpecArg::tensor(input),          SpecArg::tensor(weight),       SpecArg::tensor(bias),
            SpecArg::int_list({stride, stride}), SpecArg::int_list({pad, pad}), SpecArg::int_list({dilation, dilation}),
            SpecArg::integer(groups)};
  c.outputs = {g.output()};
  c.description = "input [" + input.str() + "] weight [" + weight.str() + "] stride " + std::to_string(stride) +
                  " pad " + std::to_string(pad) + (dilation > 1 ? " dilation " + std::to_string(dilation) : "") +
                  (groups > 1 ? " groups " + std::to_string(groups) : "") + " -> [" + g.output().str() + "]";
  // Sizes this large are refused by the frontend's byte count; here they must only not overflow. The GEMM
  // is one group's (there are `groups` of them per image).
  int64_t crr = 0, plane = 0;
  if (!__builtin_mul_overflow(group_channels, r, &crr) && !__builtin_mul_overflow(crr, r, &crr) &&
      !__builtin_mul_overflow(g.out_height, g.out_width, &plane))
    c.gemm_shape = Shape{k / groups, crr, plane}.str();
  // The GEMMs' multiply-adds (each output reads C/G*R*R inputs), then one bias add per output element, as
  // linear counts its bias.
  c.flops = 2.0 * double(d[0]) * double(k) * double(group_channels) * double(r) * double(r) * double(g.out_height) *
                double(g.out_width) +
            double(d[0]) * double(k) * double(g.out_height) * double(g.out_width);
  c.workspace_dims = {group_channels, r, r, g.out_height, g.out_width};  // im2col columns of one group (the CPU's)
  return c;
}

template <>
struct OpSpecFormat<ops::Conv2d> {
  static constexpr const char* kHelp =
      "  conv NxCxHxW             input [N,C,H,W]; --out-channels K --kernel R --stride S --pad P --dilation D --groups G\n"
      "                           e.g. conv 32x64x56x56 --out-channels 64 --kernel 3 --pad 1\n";
  static constexpr bool kReadsConvOptions = true;  // --out-channels, --kernel, --stride, --pad, --dilation, --groups
  static SpecCall call(std::vector<int64_t>& d, const ConvOptions& options, std::string_view typed) {
    return conv_spec(d, options, typed);
  }
};

}  // namespace strata::frontend
