// The CUDA kernels of the in-place ops and the reductions over dims (layers/kernels/cuda/inplace_reduce.cu)
// against the float64 reference, on fresh random inputs, with the per-dtype tolerance. Part of the gpu
// program test_kernels_cuda_gpu (skipped without a device). The launch plans are checked without a GPU
// in reduce_plan_test.cpp.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "layers/frontend/frontend.h"
#include "layers/kernels/cpu/cpu_kernels.h"
#include "layers/kernels/cuda/cuda_kernels.h"
#include "layers/kernels/reference/reference.h"
#include "layers/ops/operators.h"
#include "layers/runtime/cuda/cuda_runtime_layer.h"
#include "tests/kernels/fresh_seed.h"
#include "lib/error.h"
#include "lib/views.h"

using namespace strata;
namespace cuda = strata::kernels::cuda;

namespace {

const Device kGpu{DeviceType::kCUDA, 0};
constexpr DType kDTypes[] = {DType::kF32, DType::kF64, DType::kF16, DType::kBF16};

// Fresh inputs on every run: the seed is printed with any failure, STRATA_TEST_SEED replays it.
uint64_t g_seed = testing::run_seed() + 5000;
Tensor random(const Shape& shape, DType dtype) { return frontend::random_tensor(shape, dtype, kGpu, g_seed++); }

void check_close(const Tensor& out, const std::vector<double>& ref, DType dtype) {
  INFO("seed " << testing::run_seed());
  REQUIRE(out.device() == kGpu);
  REQUIRE(out.dtype() == dtype);
  const double error = reference::relative_error(out, ref);
  CAPTURE(error);
  CHECK(error <= reference::tolerance(dtype));
}

Shape dims(std::initializer_list<int64_t> list) {
  Shape s;
  for (int64_t d : list) s.dims[static_cast<size_t>(s.ndim++)] = d;
  return s;
}

}  // namespace

TEST_CASE("every operator with a new CUDA kernel, through its declaration: binding, dispatch, kernel against float64") {
  runtime::cuda::init_device(0);
  for (const char* name : {"relu_", "add_", "mul_", "mul_.Scalar", "add_.Scalar", "sub_", "sub_.Scalar", "div_",
                           "div_.Scalar", "sum.dim_IntList", "mean.dim", "mean"}) {
    CAPTURE(std::string(name));
    const frontend::OpSpec spec = frontend::parse_op_spec(name, "65x4099");
    for (DType dtype : kDTypes) {
      CAPTURE(dtype_name(dtype));
      const frontend::PreparedCall call =
          frontend::prepare_call(spec, dtype, kGpu, testing::run_seed() + 11, false, SIZE_MAX);
      // An in-place op writes its input: the reference is taken first, and the version counts the write
      // exactly as on the CPU (tests/ops/operators_test.cpp).
      const std::vector<double> expected = frontend::reference_result(spec, call);
      const Tensor self = call.args.front().tensor();
      const uint32_t before = self.storage()->version();
      const binding::IValue out = call.op->call(call.args);
      REQUIRE(out.is_tensor());
      if (std::string(name).back() == '_' || std::string(name).ends_with("_.Scalar")) {
        CHECK(out.tensor().storage() == self.storage());
        CHECK(self.storage()->version() == before + 1);
      } else {
        CHECK(out.tensor().sizes() == spec.call.outputs.front());
        CHECK(self.storage()->version() == before);
      }
      check_close(out.tensor(), expected, dtype);
    }
  }
}

TEST_CASE("sum.dim_IntList and mean.dim: every dim set, keepdim, dtype=, rows and columns, many blocks") {
  runtime::cuda::init_device(0);
  struct Case {
    Shape shape;
    Shape dim;
  };
  const Case cases[] = {
      {dims({64, 128}), dims({-1})},           {dims({1000, 3}), dims({0})},         // rows; columns split along y
      {dims({257, 4099}), dims({1})},          {dims({4099, 257}), dims({0})},       // odd tails both ways
      {dims({3, 5, 7, 9}), dims({0, 2})},      {dims({3, 5, 7, 9}), dims({1, 3})},   // alternating kept/reduced
      {dims({3, 5, 7, 9}), dims({})},          {dims({2, 1, 3}), dims({1})},         // everything; a size-1 dim
      {dims({(1 << 20) + 7}), dims({0})},      {dims({8, 70001}), dims({-1})},       // long rows: parts > 1
      {dims({70001, 8}), dims({0})},           {dims({4, 0, 3}), dims({1})},         // long columns; empty
  };
  for (DType dtype : kDTypes) {
    CAPTURE(dtype_name(dtype));
    for (const Case& c : cases) {
      CAPTURE(c.shape.str());
      CAPTURE(c.dim.str());
      const Tensor x = random(c.shape, dtype);
      for (bool keepdim : {false, true}) {
        CAPTURE(keepdim);
        const Tensor sum = cuda::sum_dim(x, c.dim, keepdim, std::nullopt);
        CHECK(sum.sizes() == kernels::cpu::sum_dim(x.to(kCPU), c.dim, keepdim, std::nullopt).sizes());
        check_close(sum, reference::sum_dim(x, c.dim, keepdim, std::nullopt), dtype);
        const Tensor mean = cuda::mean_dim(x, c.dim, keepdim, std::nullopt);
        const std::vector<double> want = reference::mean_dim(x, c.dim, keepdim, std::nullopt);
        if (c.shape.numel() == 0) {
          // The mean of nothing is 0/0 = NaN, as torch's; the sum of nothing 0.
          for (double v : reference::to_double(mean)) CHECK(std::isnan(v));
          for (double v : reference::to_double(sum)) CHECK(v == 0.0);
          continue;
        }
        check_close(mean, want, dtype);
      }
    }
    // dtype=: the output's dtype, the accumulation still double.
    const Tensor x = random(dims({33, 517}), dtype);
    check_close(cuda::sum_dim(x, dims({1}), false, DType::kF64), reference::sum_dim(x, dims({1}), false, DType::kF64),
                DType::kF64);
    check_close(cuda::mean(x, DType::kF32), reference::mean(x, DType::kF32), DType::kF32);
    check_close(cuda::mean(x, std::nullopt), reference::mean(x, std::nullopt), dtype);
  }
  CHECK_THROWS_AS(cuda::sum_dim(random(dims({3, 4}), DType::kF32), dims({2}), false, std::nullopt), IndexRangeError);
}

TEST_CASE("in-place ops on views: self written where it lies, the rest of its storage untouched, versions bumped") {
  runtime::cuda::init_device(0);
  for (DType dtype : kDTypes) {
    CAPTURE(dtype_name(dtype));
    const Tensor base = random(dims({33, 66}), dtype);
    const std::vector<double> base_before = reference::to_double(base);
    const Tensor stepped = views::slice(base, 1, 1, 66, 2);  // every 2nd column: [33, 33], stride 2
    const Tensor other = random(dims({33, 33}), dtype);
    const std::vector<double> want = reference::add(stepped, other, -0.5);
    const uint32_t before = base.storage()->version();
    ops::add_(stepped, other, -0.5);
    CHECK(base.storage()->version() == before + 1);
    check_close(stepped, want, dtype);
    const std::vector<double> base_after = reference::to_double(base);
    for (size_t i = 0; i < base_after.size(); ++i)
      if (i % 2 == 0) CHECK(base_after[i] == base_before[i]);  // the columns the view does not name

    const Tensor square = random(dims({40, 40}), dtype);
    const Tensor transposed = views::t(square);
    const Tensor row = random(dims({40}), dtype);  // broadcast along dim 0
    const uint32_t square_before = square.storage()->version();
    std::vector<double> expect = reference::mul(transposed, views::expand(row, dims({40, 40})));
    ops::mul_(transposed, row);
    check_close(transposed, expect, dtype);
    expect = reference::mul_scalar(transposed, -2.0);
    ops::mul_(transposed, -2.0);
    check_close(transposed, expect, dtype);
    expect = reference::relu(transposed);
    ops::relu_(transposed);
    check_close(transposed, expect, dtype);
    CHECK(square.storage()->version() == square_before + 3);

    // x.add_(x): every element read and written by one thread. A contiguous operand that overlaps self one
    // element along (the registration passes it as it is) is read whole before anything is written, as
    // on the CPU.
    const Tensor x = random(dims({4097}), dtype);
    expect = reference::add(x, x, 1.0);
    ops::add_(x, x, 1.0);
    check_close(x, expect, dtype);
    const Tensor flat = random(dims({4097}), dtype);
    const Tensor left = views::narrow(flat, 0, 0, 4096), right = views::narrow(flat, 0, 1, 4096);
    expect = reference::add(left, right, 1.0);
    ops::add_(left, right, 1.0);
    check_close(left, expect, dtype);
  }
  // An expanded self names one location many times: refused, in torch's words.
  const Tensor one = random(dims({1, 8}), DType::kF32);
  CHECK_THROWS_WITH_AS(ops::relu_(views::expand(one, dims({4, 8}))),
                       doctest::Contains("more than one element of the written-to tensor"), UsageError);
  // other may broadcast to self's shape, never grow it.
  CHECK_THROWS_WITH_AS(ops::add_(random(dims({3}), DType::kF32), random(dims({2, 3}), DType::kF32), 1.0),
                       doctest::Contains("doesn't match the broadcast shape"), UsageError);
}
