// conv2d as im2col + GEMM, the classic CPU lowering (Caffe, and PyTorch's slow_conv2d): unfold each
// image into a [C*R*S, OH*OW] column matrix, then one GEMM per image with the weight viewed as
// [K, C*R*S]. The column buffer is the workspace the frontend counts when it sizes a request.
#include <algorithm>
#include <utility>
#include <vector>

#include "layers/kernels/cpu/cpu_common.h"
#include "layers/kernels/cpu/cpu_kernels.h"
#include "lib/op_shapes.h"
#include "lib/zone.h"

namespace strata::kernels::cpu {

void gemm_for_conv(DType dtype, int64_t m, int64_t n, int64_t k, const void* a, const void* b, void* c);

namespace {

template <typename T>
void im2col(const T* image, const op_shapes::Conv2dGeometry& g, T* columns) {
  const int64_t out_hw = g.out_height * g.out_width;
  for (int64_t c = 0; c < g.in_channels; ++c) {
    for (int64_t r = 0; r < g.kernel_h; ++r) {
      for (int64_t s = 0; s < g.kernel_w; ++s) {
        T* row = columns + ((c * g.kernel_h + r) * g.kernel_w + s) * out_hw;
        for (int64_t oh = 0; oh < g.out_height; ++oh) {
          const int64_t ih = oh * g.stride - g.padding + r;
          T* dst = row + oh * g.out_width;
          if (ih < 0 || ih >= g.height) {
            std::fill(dst, dst + g.out_width, T(0));
            continue;
          }
          const T* src = image + (c * g.height + ih) * g.width;
          for (int64_t ow = 0; ow < g.out_width; ++ow) {
            const int64_t iw = ow * g.stride - g.padding + s;
            dst[ow] = (iw >= 0 && iw < g.width) ? src[iw] : T(0);
          }
        }
      }
    }
  }
}

template <typename T>
void conv2d_impl(const Tensor& input, const Tensor& weight, const Tensor& bias,
                 const op_shapes::Conv2dGeometry& g, Tensor& out) {
  const int64_t crs = g.in_channels * g.kernel_h * g.kernel_w;
  const int64_t out_hw = g.out_height * g.out_width;
  std::vector<T> columns(static_cast<size_t>(crs * out_hw));
  const T* in = input.data<T>();
  T* dst = out.data<T>();
  for (int64_t n = 0; n < g.batch; ++n) {
    {
      STRATA_ZONE(zone, Layer::kLibrary, "im2col");
      im2col(in + n * g.in_channels * g.height * g.width, g, columns.data());
    }
    T* image_out = dst + n * g.out_channels * out_hw;
    STRATA_ZONE(gemm_zone, Layer::kLibrary, input.dtype() == DType::kF32 ? "cblas_sgemm" : "cblas_dgemm");
    gemm_for_conv(input.dtype(), g.out_channels, out_hw, crs, weight.data_ptr(), columns.data(), image_out);
    if (bias.defined()) {
      const T* b = bias.data<T>();
      for (int64_t k = 0; k < g.out_channels; ++k) {
        T* plane = image_out + k * out_hw;
        for (int64_t i = 0; i < out_hw; ++i) plane[i] += b[k];
      }
    }
  }
}

}  // namespace

Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, int64_t stride, int64_t padding) {
  STRATA_ZONE(zone, Layer::kLibrary, input.dtype() == DType::kBF16  ? "conv2d (cpu, bf16 widened to f32)"
                                     : input.dtype() == DType::kF16 ? "conv2d (cpu, f16 widened to f32)"
                                                                    : "conv2d (cpu)");
  op_shapes::check_operands("conv2d", check_cpu_input, input, weight, bias);
  auto g = op_shapes::conv2d(input.sizes(), weight.sizes(), bias.defined() ? &bias.sizes() : nullptr, stride,
                             padding);
  const Tensor x = widen_to_f32(input), w = widen_to_f32(weight), b = widen_to_f32(bias);
  Tensor out = Tensor::empty(g.output(), x.dtype(), input.device());
  if (x.dtype() == DType::kF32) {
    conv2d_impl<float>(x, w, b, g, out);
  } else {
    conv2d_impl<double>(x, w, b, g, out);
  }
  return round_from_f32(std::move(out), input.dtype());
}

}  // namespace strata::kernels::cpu
