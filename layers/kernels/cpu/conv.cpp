// conv2d as im2col + GEMM, the classic CPU lowering (Caffe, and PyTorch's slow_conv2d): unfold each
// image's channels of one group into a [C/G*R*S, OH*OW] column matrix, then one GEMM per image and group
// with that group's weight rows viewed as [K/G, C/G*R*S]. Stride, padding and dilation are per dim (H, W);
// with groups=1 it is one GEMM per image. The column buffer (one group's) is the workspace the frontend
// counts when it sizes a request.
#include <algorithm>
#include <utility>
#include <vector>

#include "layers/kernels/cpu/cpu_common.h"
#include "layers/kernels/cpu/cpu_kernels.h"
#include "lib/op_shapes.h"
#include "lib/parallel.h"
#include "lib/zone.h"

namespace strata::kernels::cpu {

void gemm_for_conv(DType dtype, int64_t m, int64_t n, int64_t k, const void* a, const void* b, void* c);
void gemm_for_conv_backward(DType dtype, bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k,
                            const void* a, const void* b, double beta, void* c);

namespace {

// The input pixel (ih, iw) that output pixel (oh, ow) reads through kernel tap (r, s); outside the
// image (padding) when out of range.
inline int64_t input_row(const op_shapes::Conv2dGeometry& g, int64_t oh, int64_t r) {
  return oh * g.stride_h - g.pad_h + r * g.dilation_h;
}
inline int64_t input_col(const op_shapes::Conv2dGeometry& g, int64_t ow, int64_t s) {
  return ow * g.stride_w - g.pad_w + s * g.dilation_w;
}

// One group's channels of one image (`image` points at the group's first channel) as columns; the channels
// split across the intra-op threads (Note [Intra-op threads] in lib/parallel.h), each writing its own rows.
template <typename T>
void im2col_channel(const T* image, const op_shapes::Conv2dGeometry& g, int64_t c, T* columns) {
  const int64_t out_hw = g.out_height * g.out_width;
  for (int64_t r = 0; r < g.kernel_h; ++r) {
    for (int64_t s = 0; s < g.kernel_w; ++s) {
      T* row = columns + ((c * g.kernel_h + r) * g.kernel_w + s) * out_hw;
      for (int64_t oh = 0; oh < g.out_height; ++oh) {
        const int64_t ih = input_row(g, oh, r);
        T* dst = row + oh * g.out_width;
        if (ih < 0 || ih >= g.height) {
          std::fill(dst, dst + g.out_width, T(0));
          continue;
        }
        const T* src = image + (c * g.height + ih) * g.width;
        for (int64_t ow = 0; ow < g.out_width; ++ow) {
          const int64_t iw = input_col(g, ow, s);
          dst[ow] = (iw >= 0 && iw < g.width) ? src[iw] : T(0);
        }
      }
    }
  }
}

template <typename T>
void im2col(const T* image, const op_shapes::Conv2dGeometry& g, T* columns) {
  const int64_t per_channel = std::max<int64_t>(1, g.kernel_h * g.kernel_w * g.out_height * g.out_width);
  parallel::parallel_for(0, g.group_in_channels(), std::max<int64_t>(1, parallel::kGrainSize / per_channel),
                         [&](int64_t begin, int64_t end) {
                           for (int64_t c = begin; c < end; ++c) im2col_channel(image, g, c, columns);
                         });
}

// The adjoint of im2col: every column entry is added back onto the input pixel it was copied from
// (padding positions are dropped). `image` (the group's first channel) must be zeroed first.
template <typename T>
void col2im(const T* columns, const op_shapes::Conv2dGeometry& g, T* image) {
  const int64_t out_hw = g.out_height * g.out_width;
  for (int64_t c = 0; c < g.group_in_channels(); ++c) {
    for (int64_t r = 0; r < g.kernel_h; ++r) {
      for (int64_t s = 0; s < g.kernel_w; ++s) {
        const T* row = columns + ((c * g.kernel_h + r) * g.kernel_w + s) * out_hw;
        for (int64_t oh = 0; oh < g.out_height; ++oh) {
          const int64_t ih = input_row(g, oh, r);
          if (ih < 0 || ih >= g.height) continue;
          T* dst = image + (c * g.height + ih) * g.width;
          const T* src = row + oh * g.out_width;
          for (int64_t ow = 0; ow < g.out_width; ++ow) {
            const int64_t iw = input_col(g, ow, s);
            if (iw >= 0 && iw < g.width) dst[iw] += src[ow];
          }
        }
      }
    }
  }
}

// The per-group sizes of the GEMMs: a group reads C/G input channels and writes K/G output channels.
struct GroupSizes {
  int64_t crs;        // rows of the column matrix: C/G * R * S
  int64_t out_hw;     // its columns: OH * OW
  int64_t in_plane;   // elements of one group's input channels: C/G * H * W
  int64_t out_plane;  // of one group's output channels: K/G * OH * OW
  int64_t weight;     // of one group's weight rows: K/G * C/G * R * S
  explicit GroupSizes(const op_shapes::Conv2dGeometry& g)
      : crs(g.group_in_channels() * g.kernel_h * g.kernel_w),
        out_hw(g.out_height * g.out_width),
        in_plane(g.group_in_channels() * g.height * g.width),
        out_plane(g.group_out_channels() * out_hw),
        weight(g.group_out_channels() * crs) {}
};

const char* gemm_name(DType dtype) { return dtype == DType::kF32 ? "cblas_sgemm" : "cblas_dgemm"; }

// dX: per image and group, columns [CRS, P] = W_g^T [CRS, K/G] @ dY_ng [K/G, P], then col2im onto dX_ng.
template <typename T>
void conv2d_input_backward_impl(const Tensor& grad_output, const Tensor& weight, const op_shapes::Conv2dGeometry& g,
                                Tensor& grad_input) {
  const GroupSizes size(g);
  std::vector<T> columns(static_cast<size_t>(size.crs * size.out_hw));
  T* dx = grad_input.data<T>();
  std::fill(dx, dx + grad_input.numel(), T(0));
  const T* dy = grad_output.data<T>();
  const T* w = weight.data<T>();
  for (int64_t n = 0; n < g.batch; ++n) {
    for (int64_t group = 0; group < g.groups; ++group) {
      {
        STRATA_ZONE(gemm_zone, Layer::kLibrary, gemm_name(grad_output.dtype()));
        gemm_for_conv_backward(grad_output.dtype(), true, false, size.crs, size.out_hw, g.group_out_channels(),
                               w + group * size.weight, dy + (n * g.groups + group) * size.out_plane, 0.0,
                               columns.data());
      }
      STRATA_ZONE(zone, Layer::kLibrary, "col2im");
      col2im(columns.data(), g, dx + (n * g.groups + group) * size.in_plane);
    }
  }
}

// dW_g [K/G, CRS] = sum over images of dY_ng [K/G, P] @ columns_ng^T [P, CRS]; the GEMM accumulates
// (beta = 1) after the first image.
template <typename T>
void conv2d_weight_backward_impl(const Tensor& grad_output, const Tensor& input, const op_shapes::Conv2dGeometry& g,
                                 Tensor& grad_weight) {
  if (g.batch == 0) {
    // The GEMMs below write dW only inside the loop over images: an empty batch's gradient is zeros,
    // not the allocation's old bytes (Note [Empty reductions] in layers/kernels/cuda/cuda_common.h).
    std::fill_n(grad_weight.data<T>(), grad_weight.numel(), T(0));
    return;
  }
  const GroupSizes size(g);
  std::vector<T> columns(static_cast<size_t>(size.crs * size.out_hw));
  const T* x = input.data<T>();
  const T* dy = grad_output.data<T>();
  T* dw = grad_weight.data<T>();
  for (int64_t n = 0; n < g.batch; ++n) {
    for (int64_t group = 0; group < g.groups; ++group) {
      {
        STRATA_ZONE(zone, Layer::kLibrary, "im2col");
        im2col(x + (n * g.groups + group) * size.in_plane, g, columns.data());
      }
      STRATA_ZONE(gemm_zone, Layer::kLibrary, gemm_name(grad_output.dtype()));
      gemm_for_conv_backward(grad_output.dtype(), false, true, g.group_out_channels(), size.crs, size.out_hw,
                             dy + (n * g.groups + group) * size.out_plane, columns.data(), n == 0 ? 0.0 : 1.0,
                             dw + group * size.weight);
    }
  }
}

template <typename T>
void conv2d_impl(const Tensor& input, const Tensor& weight, const Tensor& bias,
                 const op_shapes::Conv2dGeometry& g, Tensor& out) {
  const GroupSizes size(g);
  std::vector<T> columns(static_cast<size_t>(size.crs * size.out_hw));
  const T* in = input.data<T>();
  const T* w = weight.data<T>();
  T* dst = out.data<T>();
  for (int64_t n = 0; n < g.batch; ++n) {
    for (int64_t group = 0; group < g.groups; ++group) {
      {
        STRATA_ZONE(zone, Layer::kLibrary, "im2col");
        im2col(in + (n * g.groups + group) * size.in_plane, g, columns.data());
      }
      STRATA_ZONE(gemm_zone, Layer::kLibrary, gemm_name(input.dtype()));
      gemm_for_conv(input.dtype(), g.group_out_channels(), size.out_hw, size.crs, w + group * size.weight,
                    columns.data(), dst + (n * g.groups + group) * size.out_plane);
    }
    if (bias.defined()) {
      const T* b = bias.data<T>();
      T* image_out = dst + n * g.out_channels * size.out_hw;
      const int64_t grain = std::max<int64_t>(1, parallel::kGrainSize / std::max<int64_t>(1, size.out_hw));
      parallel::parallel_for(0, g.out_channels, grain, [&](int64_t k_begin, int64_t k_end) {
        for (int64_t k = k_begin; k < k_end; ++k) {
          T* plane = image_out + k * size.out_hw;
          for (int64_t i = 0; i < size.out_hw; ++i) plane[i] += b[k];
        }
      });
    }
  }
}

}  // namespace

Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, const Shape& stride, const Shape& padding,
              const Shape& dilation, int64_t groups) {
  STRATA_ZONE(zone, Layer::kLibrary, input.dtype() == DType::kBF16  ? "conv2d (cpu, bf16 widened to f32)"
                                     : input.dtype() == DType::kF16 ? "conv2d (cpu, f16 widened to f32)"
                                                                    : "conv2d (cpu)");
  op_shapes::check_operands("conv2d", check_cpu_input, input, weight, bias);
  auto g = op_shapes::conv2d(input.sizes(), weight.sizes(), bias.defined() ? &bias.sizes() : nullptr, stride,
                             padding, dilation, groups);
  Tensor wide_x, wide_w, wide_b;
  const Tensor &x = as_f32(input, wide_x), &w = as_f32(weight, wide_w), &b = as_f32(bias, wide_b);
  Tensor out = Tensor::empty(g.output(), x.dtype(), input.device());
  if (x.dtype() == DType::kF32) {
    conv2d_impl<float>(x, w, b, g, out);
  } else {
    conv2d_impl<double>(x, w, b, g, out);
  }
  return round_from_f32(std::move(out), input.dtype());
}

Tensor conv2d_input_backward(const Tensor& grad_output, const Tensor& input, const Tensor& weight, const Shape& stride,
                             const Shape& padding, const Shape& dilation, int64_t groups) {
  // Half types: computed on f32 copies and rounded back (Note [Half types on the CPU]); the widen and
  // round zones name that in the library row.
  if (is_half(input.dtype()))
    return round_from_f32(conv2d_input_backward(widen_to_f32(grad_output), widen_to_f32(input), widen_to_f32(weight),
                                                stride, padding, dilation, groups),
                          input.dtype());
  STRATA_ZONE(zone, Layer::kLibrary, "conv2d_input_backward (cpu)");
  op_shapes::check_operands("conv2d_input_backward", check_cpu_input, grad_output, input, weight);
  const auto g = op_shapes::conv2d_backward("conv2d_input_backward", grad_output.sizes(), input.sizes(), weight.sizes(),
                                            stride, padding, dilation, groups);
  Tensor out = Tensor::empty(input.sizes(), input.dtype(), input.device());
  if (input.dtype() == DType::kF32) {
    conv2d_input_backward_impl<float>(grad_output, weight, g, out);
  } else {
    conv2d_input_backward_impl<double>(grad_output, weight, g, out);
  }
  return out;
}

Tensor conv2d_weight_backward(const Tensor& grad_output, const Tensor& input, const Tensor& weight, const Shape& stride,
                              const Shape& padding, const Shape& dilation, int64_t groups) {
  // Half types: computed on f32 copies and rounded back (Note [Half types on the CPU]); the widen and
  // round zones name that in the library row.
  if (is_half(input.dtype()))
    return round_from_f32(conv2d_weight_backward(widen_to_f32(grad_output), widen_to_f32(input), widen_to_f32(weight),
                                                 stride, padding, dilation, groups),
                          input.dtype());
  STRATA_ZONE(zone, Layer::kLibrary, "conv2d_weight_backward (cpu)");
  op_shapes::check_operands("conv2d_weight_backward", check_cpu_input, grad_output, input, weight);
  const auto g = op_shapes::conv2d_backward("conv2d_weight_backward", grad_output.sizes(), input.sizes(),
                                            weight.sizes(), stride, padding, dilation, groups);
  Tensor out = Tensor::empty(weight.sizes(), weight.dtype(), weight.device());
  if (input.dtype() == DType::kF32) {
    conv2d_weight_backward_impl<float>(grad_output, input, g, out);
  } else {
    conv2d_weight_backward_impl<double>(grad_output, input, g, out);
  }
  return out;
}

}  // namespace strata::kernels::cpu
