// strata's own CUDA kernels (layers/kernels/cuda/pointwise.cu, inplace_reduce.cu) on what the other gpu
// tests leave out: the tanh GELU's ops and the functor kernels against float64 on fresh random inputs,
// NaN / +-inf / signed zeros (each result as the CPU kernel gives it, which tests/kernels/cpu pins to
// PyTorch's values), empty and non-contiguous inputs, and tensors of more than 2^31 elements (64-bit
// indexing). Part of the gpu program test_kernels_cuda_gpu (skipped without a device).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "layers/frontend/frontend.h"
#include "layers/kernels/cpu/cpu_kernels.h"
#include "layers/kernels/cuda/cuda_kernels.h"
#include "layers/kernels/pointwise_math.h"
#include "layers/kernels/reference/reference.h"
#include "layers/ops/operators.h"
#include "layers/runtime/cuda/cuda_runtime_layer.h"
#include "lib/views.h"
#include "tests/kernels/fresh_seed.h"

using namespace strata;
using strata::testing::run_seed;
namespace cuda = strata::kernels::cuda;
namespace cpu = strata::kernels::cpu;
namespace math = strata::kernels::math;

namespace {

const Device kGpu{DeviceType::kCUDA, 0};
constexpr DType kDTypes[] = {DType::kF32, DType::kF64, DType::kF16, DType::kBF16};

uint64_t g_stream = 0;
// Fresh inputs on every run (the seed is printed with any failure; STRATA_TEST_SEED replays it).
Tensor random(const Shape& shape, DType dtype) {
  return frontend::random_tensor(shape, dtype, kGpu, run_seed() + 7919 * ++g_stream);
}

void check_close(const Tensor& out, const std::vector<double>& ref, DType dtype) {
  INFO("seed " << run_seed());
  REQUIRE(out.device() == kGpu);
  REQUIRE(out.dtype() == dtype);
  const double error = reference::relative_error(out, ref);
  CAPTURE(error);
  CHECK(error <= reference::tolerance(dtype));
}

// v as a tensor of `dtype` on `device` (every value used here is exact in every dtype).
Tensor make(const std::vector<double>& v, DType dtype, Device device) {
  Tensor t = Tensor::empty(Shape{int64_t(v.size())}, DType::kF64, kCPU);
  for (size_t i = 0; i < v.size(); ++i) t.data<double>()[i] = v[i];
  return (dtype == DType::kF64 ? t : cpu::to_copy(t, dtype)).to(device);
}

// The GPU's result element by element against the CPU kernel's on the same input: NaN where it has NaN,
// zeros and infinities exactly and with their sign, other values within the dtype's tolerance of
// reference::tolerance, relative to the value or to 0.25, whichever is larger (the device's erf, tanh and
// exp are not the host's to the bit, and gelu(-2) = -2 * (1 + erf(-1.41)) / 2 cancels: a unit in the last
// place of erf is twenty of the result's).
void check_like_cpu(const Tensor& gpu, const Tensor& host) {
  REQUIRE(gpu.device() == kGpu);
  REQUIRE(gpu.dtype() == host.dtype());
  REQUIRE(gpu.sizes() == host.sizes());
  const std::vector<double> got = reference::to_double(gpu), want = reference::to_double(host);
  for (size_t i = 0; i < want.size(); ++i) {
    CAPTURE(i);
    CAPTURE(got[i]);
    CAPTURE(want[i]);
    if (std::isnan(want[i])) {
      CHECK(std::isnan(got[i]));
    } else if (want[i] == 0.0 || std::isinf(want[i])) {
      CHECK(got[i] == want[i]);
      CHECK(std::signbit(got[i]) == std::signbit(want[i]));
    } else {
      CHECK(std::abs(got[i] - want[i]) <=
            reference::tolerance(host.dtype()) * std::max(std::abs(want[i]), 0.25));
    }
  }
}

}  // namespace

TEST_CASE(
    "the tanh GELU's ops, div and the functor kernels against float64 on fresh random inputs, every dtype") {
  runtime::cuda::init_device(0);
  for (DType dtype : kDTypes) {
    for (int64_t n : {int64_t{1}, int64_t{257}, (int64_t{1} << 20) + 3}) {
      CAPTURE(dtype_name(dtype));
      CAPTURE(n);
      const Tensor a = random({n}, dtype), b = random({n}, dtype);
      check_close(cuda::mul(a, b), reference::mul(a, b), dtype);
      check_close(cuda::sub(a, b, 0.75), reference::sub(a, b, 0.75), dtype);
      check_close(cuda::add_scalar(a, 0.375, -2.0), reference::add_scalar(a, 0.375, -2.0), dtype);
      check_close(cuda::sub_scalar(a, 0.375, 3.0), reference::sub_scalar(a, 0.375, 3.0), dtype);
      check_close(cuda::mul_scalar(a, -1.25), reference::mul_scalar(a, -1.25), dtype);
      check_close(cuda::div_scalar(a, -0.3), reference::div_scalar(a, -0.3), dtype);
      check_close(cuda::tanh(a), reference::tanh(a), dtype);
      check_close(cuda::tanh_backward(b, a), reference::tanh_backward(b, a), dtype);
      check_close(cuda::unary<math::Silu>(a), reference::silu(a), dtype);
      check_close(cuda::unary_gradient<math::Silu>(b, a), reference::silu_backward(b, a), dtype);
      // A divisor b * b + 0.5 in [0.5, 1.5): quotients of order one, no pole.
      const Tensor divisor = cuda::add_scalar(cuda::mul(b, b), 0.5, 1.0);
      check_close(cuda::div(a, divisor), reference::div(a, divisor), dtype);
      for (double e : {2.0, 3.0, 0.0, 1.0}) {
        CAPTURE(e);
        check_close(cuda::pow(a, e), reference::pow(a, e), dtype);
      }
      // Bases in [0.5, 1.5): a negative one gives NaN for 0.5 and 1.7, and 1 / x of an input near 0
      // passes f16's largest value (65504), an infinity the float64 reference does not round to.
      for (double e : {0.5, -0.5, 1.7, -2.0, -1.0}) {
        CAPTURE(e);
        check_close(cuda::pow(divisor, e), reference::pow(divisor, e), dtype);
      }
    }
  }
}

TEST_CASE("NaN, +-inf and signed zeros through every CUDA pointwise kernel give what the CPU kernel gives") {
  runtime::cuda::init_device(0);
  const double nan = std::nan(""), inf = HUGE_VAL;
  const std::vector<double> xs{nan, -0.0, 0.0, inf, -inf, -2.0, 1.5, -0.5, 0.0, inf};
  const std::vector<double> ys{1.0, 5.0, -1.0, 0.0, -2.0, -0.0, inf, nan, -0.0, inf};
  for (DType dtype : kDTypes) {
    CAPTURE(dtype_name(dtype));
    const Tensor x = make(xs, dtype, kGpu), y = make(ys, dtype, kGpu);
    const Tensor hx = make(xs, dtype, kCPU), hy = make(ys, dtype, kCPU);
    check_like_cpu(cuda::relu(x), cpu::relu(hx));  // NaN kept, -0.0 kept
    check_like_cpu(cuda::gelu(x), cpu::unary<math::Gelu>(hx));
    check_like_cpu(cuda::tanh(x), cpu::tanh(hx));
    check_like_cpu(cuda::unary<math::Silu>(x), cpu::unary<math::Silu>(hx));
    for (double e : {3.0, 2.0, 0.0, -1.0, 0.5, -0.5, 1.7}) {
      CAPTURE(e);
      check_like_cpu(cuda::pow(x, e), cpu::pow(hx, e));
    }
    check_like_cpu(cuda::mul_scalar(x, 0.0), cpu::mul_scalar(hx, 0.0));
    check_like_cpu(cuda::mul(x, y), cpu::mul(hx, hy));
    check_like_cpu(cuda::div(x, y), cpu::div(hx, hy));
    for (double d : {0.0, -0.0, -2.0}) {
      CAPTURE(d);
      check_like_cpu(cuda::div_scalar(x, d), cpu::div_scalar(hx, d));
    }
    check_like_cpu(cuda::add(x, y, 1.0), cpu::add(hx, hy, 1.0));
    check_like_cpu(cuda::sub(x, x, 1.0), cpu::sub(hx, hx, 1.0));
    check_like_cpu(cuda::add_scalar(x, 0.0, 1.0), cpu::add_scalar(hx, 0.0, 1.0));  // -0 + 0 = +0
    check_like_cpu(cuda::sub_scalar(x, 0.0, 1.0), cpu::sub_scalar(hx, 0.0, 1.0));  // -0 - 0 = -0
    check_like_cpu(cuda::threshold_backward(y, x, 0.0), cpu::threshold_backward(hy, hx, 0.0));
    check_like_cpu(cuda::tanh_backward(y, x), cpu::tanh_backward(hy, hx));
    check_like_cpu(cuda::gelu_backward(y, x), cpu::unary_gradient<math::Gelu>(hy, hx));
    check_like_cpu(cuda::unary_gradient<math::Silu>(y, x), cpu::unary_gradient<math::Silu>(hy, hx));
    for (DType to : kDTypes) {
      CAPTURE(dtype_name(to));
      check_like_cpu(cuda::to_copy(x, to), cpu::to_copy(hx, to));
    }
    // The in-place kernels on fresh copies (they write their self).
    auto gpu_copy = [&] { return cuda::to_copy(x, std::nullopt); };
    auto cpu_copy = [&] { return cpu::to_copy(hx, std::nullopt); };
    check_like_cpu(cuda::relu_inplace(gpu_copy()), cpu::relu_inplace(cpu_copy()));
    check_like_cpu(cuda::add_inplace(gpu_copy(), y, -1.0), cpu::add_inplace(cpu_copy(), hy, -1.0));
    check_like_cpu(cuda::mul_inplace(gpu_copy(), y), cpu::mul_inplace(cpu_copy(), hy));
    check_like_cpu(cuda::mul_scalar_inplace(gpu_copy(), -0.0), cpu::mul_scalar_inplace(cpu_copy(), -0.0));
    // The strided copy moves bits: NaN payloads and zero signs included.
    const Tensor grid = views::t(cuda::contiguous(views::expand(views::unsqueeze(x, 0), Shape{3, 10})));
    const Tensor copied = cuda::contiguous(grid).to(kCPU), expected = cpu::contiguous(grid.to(kCPU));
    REQUIRE(copied.sizes() == expected.sizes());
    CHECK(std::memcmp(copied.data_ptr(), expected.data_ptr(), expected.nbytes()) == 0);
  }
}

TEST_CASE("a NaN or an infinity in a reduction reaches exactly the outputs it belongs to") {
  runtime::cuda::init_device(0);
  const double nan = std::nan(""), inf = HUGE_VAL;
  for (DType dtype : kDTypes) {
    CAPTURE(dtype_name(dtype));
    // [4, 3]: row 1 holds a NaN, row 2 +inf and -inf (NaN), row 3 +inf; column sums get one of each.
    const std::vector<double> values{0.5, -1.5, 2.0, 1.0, nan, -0.25, inf, 0.75, -inf, 1.25, inf, -2.0};
    const Tensor x = views::view(make(values, dtype, kGpu), Shape{4, 3});
    const Tensor hx = views::view(make(values, dtype, kCPU), Shape{4, 3});
    for (bool keepdim : {false, true}) {
      for (const Shape& dim : {Shape{1}, Shape{0}, Shape{}}) {
        CAPTURE(keepdim);
        CAPTURE(dim.str());
        check_like_cpu(cuda::sum_dim(x, dim, keepdim, std::nullopt),
                       cpu::sum_dim(hx, dim, keepdim, std::nullopt));
        check_like_cpu(cuda::mean_dim(x, dim, keepdim, std::nullopt),
                       cpu::mean_dim(hx, dim, keepdim, std::nullopt));
      }
    }
    check_like_cpu(cuda::mean(x, std::nullopt), cpu::mean(hx, std::nullopt));
    check_like_cpu(cuda::sum(x), cpu::sum(hx));
    check_like_cpu(cuda::bias_backward(x), cpu::bias_backward(hx));
    // One NaN among two million elements, in reductions split across many blocks (parts > 1): the whole
    // sum, and the column sums of [2^20 + 5, 2] (kColumns, the NaN in column 0 only).
    const int64_t rows = (int64_t{1} << 20) + 5;
    Tensor long_data = random({rows * 2}, dtype).to(kCPU);
    const Tensor poison = make({nan}, dtype, kCPU);
    std::memcpy(static_cast<char*>(long_data.data_ptr()) + 2 * 777777 * element_size(dtype),
                poison.data_ptr(), element_size(dtype));
    const Tensor on_gpu = long_data.to(kGpu);
    CHECK(std::isnan(reference::to_double(cuda::sum(on_gpu))[0]));
    CHECK(std::isnan(reference::to_double(cuda::mean(on_gpu, std::nullopt))[0]));
    const std::vector<double> by_column = reference::to_double(
        cuda::sum_dim(views::view(on_gpu, Shape{rows, 2}), Shape{0}, false, std::nullopt));
    REQUIRE(by_column.size() == 2);
    CHECK(std::isnan(by_column[0]));
    CHECK(std::isfinite(by_column[1]));
  }
}

TEST_CASE(
    "empty tensors through every CUDA pointwise, in-place and reduction kernel: empty results, no launch "
    "fault") {
  runtime::cuda::init_device(0);
  for (DType dtype : kDTypes) {
    CAPTURE(dtype_name(dtype));
    // [4, 0] and [3, 0, 2] get a stride 0 on a dim of size > 1 from Tensor::empty: the in-place ops take
    // them.
    for (const Shape& shape : {Shape{0}, Shape{0, 4}, Shape{4, 0}, Shape{3, 0, 2}}) {
      CAPTURE(shape.str());
      const Tensor e = Tensor::empty(shape, dtype, kGpu);
      for (const Tensor& out : {cuda::relu(e),
                                cuda::gelu(e),
                                cuda::tanh(e),
                                cuda::unary<math::Silu>(e),
                                cuda::add(e, e, 1.0),
                                cuda::mul(e, e),
                                cuda::div(e, e),
                                cuda::sub(e, e, 2.0),
                                cuda::mul_scalar(e, 3.0),
                                cuda::div_scalar(e, 3.0),
                                cuda::add_scalar(e, 1.0, 1.0),
                                cuda::sub_scalar(e, 1.0, 1.0),
                                cuda::pow(e, 2.5),
                                cuda::ones_like(e),
                                cuda::threshold_backward(e, e, 0.0),
                                cuda::tanh_backward(e, e),
                                cuda::gelu_backward(e, e),
                                cuda::to_copy(e, DType::kF64),
                                cuda::relu_inplace(e),
                                cuda::add_inplace(e, e, 1.0),
                                cuda::mul_inplace(e, e),
                                cuda::mul_scalar_inplace(e, 2.0),
                                cuda::contiguous(views::t(Tensor::empty(Shape{0, 5}, dtype, kGpu)))}) {
        CHECK(out.numel() == 0);
      }
      // The sum of nothing is 0 and its mean NaN, written even though nothing is read.
      CHECK(reference::to_double(cuda::sum(e)) == std::vector<double>{0.0});
      CHECK(std::isnan(reference::to_double(cuda::mean(e, std::nullopt))[0]));
    }
    runtime::cuda::synchronize(0);  // a faulting launch would surface here
  }
}

TEST_CASE(
    "non-contiguous inputs through the operators: copied by contiguous(), results as on the contiguous "
    "data") {
  runtime::cuda::init_device(0);
  for (DType dtype : kDTypes) {
    CAPTURE(dtype_name(dtype));
    // A transposed and a stepped view of fresh data, both [33, 40]; the references read the views.
    const Tensor wide = random({40, 33}, dtype), stepped_base = random({33, 80}, dtype);
    const Tensor a = views::t(wide), b = views::slice(stepped_base, 1, 1, 80, 2);
    REQUIRE_FALSE(a.is_contiguous());
    REQUIRE_FALSE(b.is_contiguous());
    check_close(ops::relu(a), reference::relu(a), dtype);
    check_close(ops::tanh(b), reference::tanh(b), dtype);
    check_close(ops::mul(a, b), reference::mul(a, b), dtype);
    check_close(ops::sub(a, b, 2.0), reference::sub(a, b, 2.0), dtype);
    check_close(ops::pow(b, 3.0), reference::pow(b, 3.0), dtype);
    check_close(ops::sum_dim(a, Shape{0}, false, std::nullopt),
                reference::sum_dim(a, Shape{0}, false, std::nullopt), dtype);
    check_close(ops::sum_dim(b, Shape{1}, true, std::nullopt),
                reference::sum_dim(b, Shape{1}, true, std::nullopt), dtype);
    check_close(ops::mean(a, std::nullopt), reference::mean(a, std::nullopt), dtype);
    check_close(ops::to_copy(b, DType::kF64), reference::to_copy(b, DType::kF64), DType::kF64);
  }
}

// 64-bit indexing: more than 2^31 elements (bf16, 4 GiB a tensor). Grid-stride indices, the strided copy's
// offsets and the in-place kernels' offsets all pass INT_MAX; sums of ones in double are exact, so each
// result is known to the unit. Skipped on a device with too little free memory.
TEST_CASE(
    "tensors of more than 2^31 elements: unary, in-place, strided copy and reductions index with 64 bits") {
  runtime::cuda::init_device(0);
  const int64_t columns = (int64_t{1} << 30) + 3, n = 2 * columns;  // 2^31 + 6 elements
  const size_t bytes = size_t(n) * 2;
  if (runtime::cuda::free_bytes(0) < 7 * bytes) {
    MESSAGE("skipped: needs " << 7 * bytes / (1 << 20) << " MiB of free device memory");
    return;
  }
  {
    const Tensor ones = cuda::ones_like(Tensor::empty(Shape{n}, DType::kBF16, kGpu));
    const Tensor negated = cuda::mul_scalar(ones, -1.0);
    // One exact f64 sum over every element: -n, and after relu 0 (every element clipped).
    CHECK(reference::to_double(cuda::sum_dim(negated, Shape{0}, false, DType::kF64))[0] == -double(n));
    CHECK(reference::to_double(cuda::sum_dim(cuda::relu(negated), Shape{0}, false, DType::kF64))[0] == 0.0);
    CHECK(reference::to_double(cuda::mean_dim(negated, Shape{0}, false, DType::kF64))[0] == -1.0);
  }
  // [2, 2^30 + 3] written through its transpose ([2^30 + 3, 2], strides [1, 2^30 + 3]): row 1 of the base is
  // negated in place through the view's column 1, at offsets past 2^31.
  const Tensor base = cuda::ones_like(Tensor::empty(Shape{2, columns}, DType::kBF16, kGpu));
  const Tensor transposed = views::t(base);
  cuda::mul_inplace(transposed, make({1.0, -1.0}, DType::kBF16, kGpu));
  const std::vector<double> rows_sum =
      reference::to_double(cuda::sum_dim(base, Shape{1}, false, DType::kF64));
  CHECK(rows_sum == std::vector<double>{double(columns), -double(columns)});
  // The strided copy reads the base's two rows interleaved, and back again: the round trip is the base,
  // element for element (a sum of squared differences, exact in f64, is 0).
  const Tensor copied = cuda::contiguous(transposed);
  CHECK(reference::to_double(views::narrow(copied, 0, 0, 1)) == std::vector<double>{1.0, -1.0});
  CHECK(reference::to_double(views::narrow(copied, 0, columns - 1, 1)) == std::vector<double>{1.0, -1.0});
  const Tensor back = cuda::contiguous(views::t(copied));
  const Tensor diff = cuda::sub(back, base, 1.0);
  CHECK(reference::to_double(cuda::sum_dim(cuda::mul(diff, diff), Shape{}, false, DType::kF64))[0] == 0.0);
}
