// Shared by the CPU and CUDA kernel tests: accumulating kernels over an empty reduced dimension.
#pragma once

#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "layers/frontend/frontend.h"
#include "layers/kernels/reference/reference.h"
#include "lib/tensor.h"

namespace strata::testing {

// Note [Empty reductions] (layers/kernels/cuda/cuda_common.h): every kernel that sums over a dimension
// writes its whole output when that dimension is empty: zeros, or the bias alone. The block the output
// is allocated from is first filled with NaN and released, so that a kernel leaving it unwritten fails.
// Kernels: a struct naming the backend's kernels as static function pointers (kMatmul, kGemm, kLinear,
// kConv2d, kConv2dInputBackward, kConv2dWeightBackward, kBiasBackward, kSum).
template <typename Kernels>
void check_empty_reductions(Kernels k, const Device& device, DType dtype) {
  CAPTURE(dtype_name(dtype));
  auto dirty_then = [&](const Shape& out_shape, auto&& compute) {
    {
      Tensor dirty = Tensor::empty(out_shape, dtype, kCPU);
      std::memset(dirty.data_ptr(), 0xFF, dirty.nbytes());  // NaN in every dtype
      if (device.is_cuda()) Tensor on_device = dirty.to(device);
    }
    return compute();
  };
  auto make = [&](const Shape& s, uint64_t seed) { return frontend::random_tensor(s, dtype, device, seed); };
  auto expect = [&](const Tensor& out, const std::vector<double>& ref, const char* what) {
    CAPTURE(std::string(what));
    const std::vector<double> v = reference::to_double(out.to(kCPU));
    REQUIRE(v.size() == ref.size());
    for (size_t i = 0; i < v.size(); ++i) CHECK(v[i] == ref[i]);
  };
  const Tensor x0 = make({2, 0}, 1), w0 = make({0, 3}, 2), wt0 = make({3, 0}, 3), bias = make({3}, 4);
  expect(dirty_then({2, 3}, [&] { return k.kMatmul(x0, w0); }), std::vector<double>(6, 0.0), "matmul K=0");
  expect(dirty_then({2, 3}, [&] { return k.kGemm(make({0, 2}, 5), w0, 1, 0); }), std::vector<double>(6, 0.0),
         "gemm K=0, transposed self");
  expect(dirty_then({2, 3}, [&] { return k.kLinear(x0, wt0, Tensor()); }), std::vector<double>(6, 0.0), "linear IN=0");
  std::vector<double> bias_rows;
  for (int r = 0; r < 2; ++r)
    for (double b : reference::to_double(bias.to(kCPU))) bias_rows.push_back(b);
  expect(dirty_then({2, 3}, [&] { return k.kLinear(x0, wt0, bias); }), bias_rows, "linear IN=0 with bias");
  const Tensor image = make({1, 0, 4, 4}, 6), filter = make({3, 0, 3, 3}, 7);
  expect(dirty_then({1, 3, 2, 2}, [&] { return k.kConv2d(image, filter, Tensor(), {1}, {0}, {1}, 1); }),
         std::vector<double>(12, 0.0), "conv2d C=0");
  std::vector<double> bias_planes;
  for (double b : reference::to_double(bias.to(kCPU)))
    for (int i = 0; i < 4; ++i) bias_planes.push_back(b);
  expect(dirty_then({1, 3, 2, 2}, [&] { return k.kConv2d(image, filter, bias, {1}, {0}, {1}, 1); }), bias_planes,
         "conv2d C=0 with bias");
  const Tensor x = make({1, 2, 5, 5}, 8), no_filters = make({0, 2, 3, 3}, 9);
  expect(dirty_then({1, 2, 5, 5}, [&] { return k.kConv2dInputBackward(make({1, 0, 3, 3}, 10), x, no_filters, {1}, {0}, {1}, 1); }),
         std::vector<double>(50, 0.0), "conv2d_input_backward K=0");
  const Tensor w = make({2, 1, 3, 3}, 11);
  expect(dirty_then({2, 1, 3, 3}, [&] { return k.kConv2dWeightBackward(make({0, 2, 3, 3}, 12), make({0, 1, 5, 5}, 13), w, {1}, {0}, {1}, 1); }),
         std::vector<double>(18, 0.0), "conv2d_weight_backward N=0");
  expect(dirty_then({3}, [&] { return k.kBiasBackward(make({0, 3}, 14)); }), std::vector<double>(3, 0.0),
         "bias_backward N=0");
  expect(dirty_then({}, [&] { return k.kSum(make({0}, 15)); }), std::vector<double>(1, 0.0), "sum of nothing");
}

}  // namespace strata::testing
