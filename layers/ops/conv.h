// conv2d and its spec (the options only it reads). Its gradient ops are in gradients.h.
// Part of layers/ops/operators.h (Note [One declaration per operator]): included there, after the
// declaration machinery and in the order the list there gives; not a header to include on its own.
#pragma once

namespace strata::ops {

struct Conv2d {
  static constexpr const char* kName = "conv2d";
  static constexpr std::string_view kAlias = "conv";
  static constexpr const char* kSchema =
      "conv2d(Tensor input, Tensor weight, Tensor? bias=None, int stride=1, int padding=0) -> Tensor";
  static constexpr const char* kTorchName = "torch.nn.functional.conv2d";  // the --peer torch counterpart
  using Signature = Tensor(const Tensor& input, const Tensor& weight, const Tensor& bias, int64_t stride,
                           int64_t padding);
  static constexpr KernelDecl kCpu{&kernels::cpu::conv2d, "layers/kernels/cpu/conv.cpp (im2col + OpenBLAS gemm)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::conv2d, "layers/kernels/cuda/cudnn_conv.cpp (cuDNN)"};
  static constexpr auto kReference = &reference::conv2d;
  static constexpr auto kReferenceBackward = &reference::conv2d_backward;  // float64 gradients
  static constexpr BackwardDecl kBackward{"ConvolutionBackward", 0b11};
  // ConvolutionBackward: conv2d_input_backward, conv2d_weight_backward, bias_backward (defined below AllOps: it calls other operators).
  static GradList backward(const RecordedNode& node, const Tensor& grad);
  static constexpr AutocastPolicy kAutocast = AutocastPolicy::kLowerPrecision;
  static constexpr const char* kSpecHelp =
      "  conv NxCxHxW             input [N,C,H,W]; --out-channels K --kernel R --stride S --pad P\n"
      "                           e.g. conv 32x64x56x56 --out-channels 64 --kernel 3 --pad 1\n";

  static constexpr bool kReadsConvOptions = true;  // --out-channels, --kernel, --stride, --pad
  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions& conv, std::string_view typed);
};
inline constexpr EntryPoint<Conv2d> conv2d{};  // NOLINT(readability-identifier-naming): called like a function

inline SpecCall Conv2d::spec(std::vector<int64_t>& d, const ConvOptions& options, std::string_view typed) {
  return conv_spec(d, options, typed);
}

inline SpecCall conv_spec(std::vector<int64_t>& d, const ConvOptions& options, std::string_view typed) {
  constexpr int64_t kMaxDim = 2147483647;  // BLAS and CUDA index with int32
  if (d.size() != 4)
    throw UsageError("conv takes NxCxHxW (batch, channels, height, width), got '" + std::string(typed) + "'");
  const int64_t k = options.out_channels.value_or(d[1]), r = options.kernel, stride = options.stride,
                pad = options.pad;
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
  const int64_t h = d[2] + 2 * pad, w = d[3] + 2 * pad;
  if (r > h || r > w) {
    throw UsageError("conv: --kernel " + std::to_string(r) + " is larger than the padded input " + std::to_string(h) +
                     "x" + std::to_string(w) + " (use a smaller --kernel or more --pad)");
  }
  SpecCall c;
  const Shape input{d[0], d[1], d[2], d[3]}, weight{k, d[1], r, r}, bias{k};
  const op_shapes::Conv2dGeometry g = op_shapes::conv2d(input, weight, &bias, stride, pad);
  c.args = {SpecArg::tensor(input), SpecArg::tensor(weight), SpecArg::tensor(bias), SpecArg::integer(stride),
            SpecArg::integer(pad)};
  c.outputs = {g.output()};
  c.description = "input [" + input.str() + "] weight [" + weight.str() + "] stride " + std::to_string(stride) +
                  " pad " + std::to_string(pad) + " -> [" + g.output().str() + "]";
  // Sizes this large are refused by the frontend's byte count; here they must only not overflow.
  int64_t crr = 0, plane = 0;
  if (!__builtin_mul_overflow(d[1], r, &crr) && !__builtin_mul_overflow(crr, r, &crr) &&
      !__builtin_mul_overflow(g.out_height, g.out_width, &plane))
    c.gemm_shape = Shape{k, crr, plane}.str();
  // The GEMM's multiply-adds, then one bias add per output element, as linear counts its bias.
  c.flops = 2.0 * double(d[0]) * double(k) * double(d[1]) * double(r) * double(r) * double(g.out_height) *
                double(g.out_width) +
            double(d[0]) * double(k) * double(g.out_height) * double(g.out_width);
  c.workspace_dims = {d[1], r, r, g.out_height, g.out_width};  // im2col columns of one image (the CPU's)
  return c;
}

}  // namespace strata::ops
