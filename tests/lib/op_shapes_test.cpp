#include "lib/op_shapes.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <memory>
#include <string>

#include "lib/error.h"
#include "lib/storage.h"

using namespace strata;

namespace {
std::string usage_message(auto&& fn) {
  try {
    fn();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "<no UsageError>";
}
}  // namespace

TEST_CASE("matmul shapes: MxK @ KxN -> MxN") {
  CHECK(op_shapes::matmul(Shape{2, 3}, Shape{3, 5}) == Shape{2, 5});
  CHECK(op_shapes::matmul(Shape{1, 1}, Shape{1, 7}) == Shape{1, 7});
  const std::string inner = usage_message([] { op_shapes::matmul(Shape{3, 4}, Shape{5, 6}); });
  CHECK(inner.find("mat1 and mat2 shapes cannot be multiplied (3x4 and 5x6)") != std::string::npos);
}

TEST_CASE("matmul shapes: torch.matmul's 1-D and batched rules") {
  CHECK(op_shapes::matmul(Shape{4}, Shape{4}).ndim == 0);  // a dot product: 0-d
  CHECK(op_shapes::matmul(Shape{4}, Shape{4, 5}) == Shape{5});
  CHECK(op_shapes::matmul(Shape{3, 4}, Shape{4}) == Shape{3});
  CHECK(op_shapes::matmul(Shape{2, 1, 3, 4}, Shape{5, 4, 6}) == Shape{2, 5, 3, 6});
  CHECK(op_shapes::matmul(Shape{4}, Shape{2, 4, 5}) == Shape{2, 5});
  CHECK(op_shapes::matmul(Shape{2, 3, 4}, Shape{4}) == Shape{2, 3});
  const op_shapes::MatmulGeometry g = op_shapes::matmul_geometry(Shape{2, 1, 3, 4}, Shape{5, 4, 6});
  CHECK(g.batch == Shape{2, 5});
  CHECK(g.batch_count == 10);
  CHECK((g.m == 3 && g.k == 4 && g.n == 6));
  // Matrix 7 of the [2,5] batch is (1, 2): self's [2,1] batch reads matrix (1, 0), other's [5] matrix 2.
  CHECK(op_shapes::batch_offset(g.batch, 7, Shape{2, 1, 3, 4}, Shape{12, 12, 4, 1}) == 12);
  CHECK(op_shapes::batch_offset(g.batch, 7, Shape{5, 4, 6}, Shape{24, 6, 1}) == 48);
  CHECK(usage_message([] { op_shapes::matmul(Shape{3}, Shape{4}); }).find("inconsistent tensor size") !=
        std::string::npos);
  CHECK(usage_message([] { op_shapes::matmul(Shape{2, 3, 4}, Shape{3, 4, 5}); })
            .find("The size of tensor a (2) must match the size of tensor b (3) at non-singleton dimension 0") !=
        std::string::npos);
  CHECK(usage_message([] { op_shapes::matmul(Shape{2, 3, 4}, Shape{2, 5, 6}); })
            .find("Expected size for first two dimensions of batch2 tensor to be: [2, 4] but got: [2, 5]") !=
        std::string::npos);
  CHECK(usage_message([] { op_shapes::matmul(Shape{}, Shape{2, 3}); })
            .find("both arguments to matmul need to be at least 1D, but they are 0D and 2D") != std::string::npos);
}

TEST_CASE("linear shapes, with and without bias") {
  const Shape bias{5};
  CHECK(op_shapes::linear(Shape{2, 3}, Shape{5, 3}, nullptr) == Shape{2, 5});
  CHECK(op_shapes::linear(Shape{2, 3}, Shape{5, 3}, &bias) == Shape{2, 5});
  CHECK(op_shapes::linear(Shape{3}, Shape{5, 3}, &bias) == Shape{5});
  CHECK(op_shapes::linear(Shape{4, 2, 3}, Shape{5, 3}, &bias) == Shape{4, 2, 5});
  CHECK(op_shapes::linear_rows(Shape{4, 2, 3}) == 8);
  const Shape wrong_bias{3};
  CHECK(usage_message([&] {
          op_shapes::linear(Shape{2, 3}, Shape{5, 3}, &wrong_bias);
        }).find("bias must be [5]") != std::string::npos);
  CHECK(usage_message([] {
          op_shapes::linear(Shape{2, 3, 4}, Shape{5, 3}, nullptr);
        }).find("mat1 and mat2 shapes cannot be multiplied (6x4 and 3x5)") != std::string::npos);
}

TEST_CASE("elementwise shapes must be identical: no broadcasting") {
  CHECK(op_shapes::elementwise(Shape{4, 4}, Shape{4, 4}) == Shape{4, 4});
  CHECK(usage_message([] {
          op_shapes::elementwise(Shape{4, 4}, Shape{4});
        }).find("does not broadcast") != std::string::npos);
}

TEST_CASE("conv2d geometry: output size from stride, padding and dilation per dim, and groups") {
  // (H + 2P - D(R - 1) - 1) / S + 1: (7 + 2 - 3) / 2 + 1 = 4, (5 + 2 - 3) / 2 + 1 = 3
  auto g = op_shapes::conv2d(Shape{2, 3, 7, 5}, Shape{4, 3, 3, 3}, nullptr, {2}, {1}, {1}, 1);
  CHECK(g.out_height == 4);
  CHECK(g.out_width == 3);
  CHECK(g.output() == Shape{2, 4, 4, 3});
  // A kernel exactly as large as the padded input gives a 1x1 output.
  auto exact = op_shapes::conv2d(Shape{1, 1, 3, 3}, Shape{1, 1, 5, 5}, nullptr, {1}, {1}, {1}, 1);
  CHECK(exact.output() == Shape{1, 1, 1, 1});
  // Per dim, as torch: H (9 + 2 - 2*2 - 1) / 2 + 1 = 4, W (8 + 0 - 1*2 - 1) / 1 + 1 = 6; groups split C and K.
  auto both = op_shapes::conv2d(Shape{1, 6, 9, 8}, Shape{4, 3, 3, 3}, nullptr, {2, 1}, {1, 0}, {2, 1}, 2);
  CHECK(both.output() == Shape{1, 4, 4, 6});
  CHECK(both.group_in_channels() == 3);
  CHECK(both.group_out_channels() == 2);
  CHECK((both.stride_h == 2 && both.stride_w == 1 && both.pad_h == 1 && both.pad_w == 0 && both.dilation_h == 2 &&
         both.dilation_w == 1));
}

TEST_CASE("conv2d refusals name the problem, in torch's words where torch has them") {
  auto refusal = [](const Shape& input, const Shape& weight, const Shape& stride, const Shape& padding,
                    const Shape& dilation, int64_t groups) {
    return usage_message([&] { op_shapes::conv2d(input, weight, nullptr, stride, padding, dilation, groups); });
  };
  const Shape x{1, 1, 4, 4}, w{1, 1, 3, 3};
  CHECK(refusal(Shape{1, 1, 2, 2}, w, {1}, {0}, {1}, 1) ==
        "conv2d: Calculated padded input size per channel: (2 x 2). Kernel size: (3 x 3). Kernel size can't be greater "
        "than actual input size (the kernel is weight's last two sizes, spread by dilation): give a weight with a "
        "smaller kernel, less dilation, or more padding");
  CHECK(refusal(Shape{1, 1, 5, 5}, w, {1}, {0}, {3}, 1).find("Kernel size: (7 x 7)") != std::string::npos);
  CHECK(refusal(x, w, {0}, {0}, {1}, 1) == "conv2d: non-positive stride is not supported, got stride=[0]");
  CHECK(refusal(x, w, {1, 0}, {0}, {1}, 1) == "conv2d: non-positive stride is not supported, got stride=[1, 0]");
  CHECK(refusal(x, w, {1}, {-1}, {1}, 1) == "conv2d: negative padding is not supported, got padding=[-1]");
  CHECK(refusal(x, w, {1}, {0}, {-1, 1}, 1) == "conv2d: dilation should be greater than zero, got dilation=[-1, 1]");
  CHECK(refusal(x, w, {1}, {0}, {1}, 0) == "conv2d: non-positive groups is not supported, got groups=0");
  CHECK(refusal(x, w, {1, 2, 3}, {0}, {1}, 1) ==
        "conv2d: expected stride to be a single integer value or a list of 2 values to match the convolution "
        "dimensions, but got stride=[1, 2, 3]");
  CHECK(refusal(Shape{1, 5, 8, 8}, Shape{4, 3, 3, 3}, {1}, {0}, {1}, 2) ==
        "conv2d: Given groups=2, weight of size [4, 3, 3, 3], expected input[1, 5, 8, 8] to have 6 channels, but got "
        "5 channels instead");
  CHECK(refusal(Shape{1, 6, 8, 8}, Shape{3, 3, 3, 3}, {1}, {0}, {1}, 2) ==
        "conv2d: Given groups=2, expected weight to be divisible by 2 at dimension 0, but got weight of size "
        "[3, 3, 3, 3] instead");
  CHECK(refusal(Shape{1, 2, 4, 4}, Shape{1, 3, 3, 3}, {1}, {0}, {1}, 1).find("to have 3 channels, but got 2") !=
        std::string::npos);
  // Past the int range the kernels index with, and where the padded size would overflow int64 (it wrapped
  // to a negative size, or to a small one that let a 1x1 kernel through).
  CHECK(refusal(x, w, {1}, {int64_t{1} << 62}, {1}, 1) ==
        "conv2d: padding must be between 0 and 2147483647, got 4611686018427387904");
  CHECK(refusal(x, Shape{1, 1, 1, 1}, {1}, {INT64_MAX}, {1}, 1).find("padding must be between 0") != std::string::npos);
  CHECK(refusal(x, Shape{1, 1, 1, 1}, {int64_t{1} << 31}, {0}, {1}, 1) ==
        "conv2d: stride must be between 1 and 2147483647, got 2147483648");
  CHECK(refusal(x, w, {1}, {0}, {int64_t{1} << 40}, 1).find("dilation must be between 1") != std::string::npos);
  CHECK(refusal(x, w, {1}, {0}, {1}, int64_t{1} << 40).find("groups must be between 1") != std::string::npos);
  CHECK(refusal(Shape{0, 1, INT64_MAX - 2, 4}, Shape{1, 1, 1, 1}, {1}, {2}, {1}, 1).find("larger than int64 can index") !=
        std::string::npos);
  // Worded for every caller: the schema's argument names, not the CLI's flags.
  CHECK(refusal(Shape{1, 1, 2, 2}, Shape{1, 1, 5, 5}, {1}, {1}, {1}, 1).find("--") == std::string::npos);
  const Shape bad_bias{2};
  CHECK(usage_message([&] {
          op_shapes::conv2d(x, Shape{3, 1, 3, 3}, &bad_bias, {1}, {0}, {1}, 1);
        }) == "conv2d: Given weight of size [3, 1, 3, 3], expected bias to be 1-dimensional with 3 elements, but got "
              "bias of size [2] instead");
  CHECK(refusal(Shape{1, 4, 4}, w, {1}, {0}, {1}, 1).find("[N,C,H,W]") != std::string::npos);
  // The gradients' rule is the forward's, checked against the gradient's shape.
  CHECK(usage_message([] {
          op_shapes::conv2d_backward("conv2d_input_backward", Shape{1, 2, 3, 3}, Shape{1, 4, 5, 5}, Shape{2, 2, 3, 3},
                                     {1}, {1}, {1}, 2);
        }) == "conv2d_input_backward: grad_output must be the conv2d output's shape [1x2x5x5], got [1x2x3x3]");
}

TEST_CASE("tensors of one call must share dtype and device") {
  Tensor a = Tensor::empty(Shape{2}, DType::kF32, kCPU);
  Tensor b = Tensor::empty(Shape{2}, DType::kF64, kCPU);
  CHECK_NOTHROW(op_shapes::check_same_dtype_and_device("add", a, a));
  CHECK(usage_message([&] { op_shapes::check_same_dtype_and_device("add", a, b); }) ==
        "add: dtypes differ: [2] f32 cpu and [2] f64 cpu");
}

namespace {
// A tensor that claims to live on cuda:0, over host memory no kernel touches: the checks read only its
// dtype, device and shape, so no GPU is needed.
Tensor labelled_cuda_tensor(float* host_memory, int64_t n) {
  auto storage = std::make_shared<Storage>(host_memory, size_t(n) * sizeof(float), Device{DeviceType::kCUDA, 0},
                                           nullptr, nullptr);
  return Tensor::from_storage(storage, Shape{n}, DType::kF32);
}

// What a CUDA kernel's own check says about an operand that is not on the GPU.
void cuda_only(const char* op, const Tensor& t) {
  if (!t.device().is_cuda()) throw UsageError(std::string(op) + ": CUDA kernel got " + t.str());
}
}  // namespace

TEST_CASE("check_operands reports a dtype or device mismatch before the backend's own check") {
  float memory[2] = {1.0F, 2.0F};
  const Tensor gpu = labelled_cuda_tensor(memory, 2);
  const Tensor cpu = Tensor::empty(Shape{2}, DType::kF32, kCPU);
  // add(cuda, cpu) reaches the CUDA kernel: the message names both devices, not the kernel's own rule.
  const std::string devices = usage_message([&] { op_shapes::check_operands("add", cuda_only, gpu, cpu); });
  CHECK(devices.find("add: devices differ") == 0);
  CHECK(devices.find("cuda:0") != std::string::npos);
  CHECK(devices.find("cpu") != std::string::npos);
  // The first operand itself on the wrong backend: still the agreement message when the second differs.
  CHECK(usage_message([&] { op_shapes::check_operands("add", cuda_only, cpu, gpu); }).find("add: devices differ") == 0);
  // Operands that agree still go through the backend's check, each of them.
  CHECK(usage_message([&] { op_shapes::check_operands("add", cuda_only, cpu, cpu); }).find("CUDA kernel got") !=
        std::string::npos);
  CHECK_NOTHROW(op_shapes::check_operands("add", cuda_only, gpu, gpu));
  // An absent optional operand (an undefined bias) is skipped by both checks.
  CHECK_NOTHROW(op_shapes::check_operands("linear", cuda_only, gpu, gpu, Tensor()));
  const Tensor f64 = Tensor::empty(Shape{2}, DType::kF64, kCPU);
  CHECK(usage_message([&] { op_shapes::check_operands("add", cuda_only, cpu, f64); }).find("add: dtypes differ") == 0);
}
