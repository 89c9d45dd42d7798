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

TEST_CASE("conv2d geometry: output size from stride and padding") {
  // (H + 2P - R) / S + 1: (7 + 2 - 3) / 2 + 1 = 4, (5 + 2 - 3) / 2 + 1 = 3
  auto g = op_shapes::conv2d(Shape{2, 3, 7, 5}, Shape{4, 3, 3, 3}, nullptr, 2, 1);
  CHECK(g.out_height == 4);
  CHECK(g.out_width == 3);
  CHECK(g.output() == Shape{2, 4, 4, 3});
  // A kernel exactly as large as the padded input gives a 1x1 output.
  auto exact = op_shapes::conv2d(Shape{1, 1, 3, 3}, Shape{1, 1, 5, 5}, nullptr, 1, 1);
  CHECK(exact.output() == Shape{1, 1, 1, 1});
}

TEST_CASE("conv2d refusals name the problem") {
  CHECK(usage_message([] {
          op_shapes::conv2d(Shape{1, 1, 2, 2}, Shape{1, 1, 3, 3}, nullptr, 1, 0);
        }).find("larger than the padded input 2x2") != std::string::npos);
  CHECK(usage_message([] {
          op_shapes::conv2d(Shape{1, 1, 4, 4}, Shape{1, 1, 3, 3}, nullptr, 0, 0);
        }).find("stride must be between 1 and 2147483647, got 0") != std::string::npos);
  CHECK(usage_message([] {
          op_shapes::conv2d(Shape{1, 1, 4, 4}, Shape{1, 1, 3, 3}, nullptr, 1, -1);
        }).find("padding must be between 0 and 2147483647, got -1") != std::string::npos);
  // Past the int range the kernels index with, and where the padded size would overflow int64 (it wrapped
  // to a negative size, or to a small one that let a 1x1 kernel through).
  CHECK(usage_message([] {
          op_shapes::conv2d(Shape{1, 1, 4, 4}, Shape{1, 1, 3, 3}, nullptr, 1, int64_t{1} << 62);
        }).find("padding must be between 0 and 2147483647, got 4611686018427387904") != std::string::npos);
  CHECK(usage_message([] {
          op_shapes::conv2d(Shape{1, 1, 4, 4}, Shape{1, 1, 1, 1}, nullptr, 1, INT64_MAX);
        }).find("padding must be between 0") != std::string::npos);
  CHECK(usage_message([] {
          op_shapes::conv2d(Shape{1, 1, 4, 4}, Shape{1, 1, 1, 1}, nullptr, int64_t{1} << 31, 0);
        }).find("stride must be between 1 and 2147483647, got 2147483648") != std::string::npos);
  CHECK(usage_message([] {
          op_shapes::conv2d(Shape{0, 1, INT64_MAX - 2, 4}, Shape{1, 1, 1, 1}, nullptr, 1, 2);
        }).find("larger than int64 can index") != std::string::npos);
  // Worded for every caller: the schema's argument names, not the CLI's flags.
  const std::string kernel = usage_message([] { op_shapes::conv2d(Shape{1, 1, 2, 2}, Shape{1, 1, 5, 5}, nullptr, 1, 1); });
  CHECK(kernel.find("weight's last two sizes") != std::string::npos);
  CHECK(kernel.find("more padding") != std::string::npos);
  CHECK(kernel.find("--") == std::string::npos);
  CHECK(usage_message([] {
          op_shapes::conv2d(Shape{1, 2, 4, 4}, Shape{1, 3, 3, 3}, nullptr, 1, 0);
        }).find("channels differ") != std::string::npos);
  const Shape bad_bias{2};
  CHECK(usage_message([&] {
          op_shapes::conv2d(Shape{1, 1, 4, 4}, Shape{3, 1, 3, 3}, &bad_bias, 1, 0);
        }).find("bias must be [3]") != std::string::npos);
  CHECK(usage_message([] {
          op_shapes::conv2d(Shape{1, 4, 4}, Shape{1, 1, 3, 3}, nullptr, 1, 0);
        }).find("[N,C,H,W]") != std::string::npos);
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
