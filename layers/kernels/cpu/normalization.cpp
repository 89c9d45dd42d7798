// softmax, log_softmax, layer_norm, rms_norm and their gradient ops on the CPU (Note [Normalization ops]
// in layers/ops/normalization.h): plain loops, one row at a time, sums in a double accumulator (as
// reduce.cpp's), the elementwise math in the tensor's own type (f32, f64; half types widened to f32, Note
// [Half types on the CPU]). The rows split across the intra-op threads: each row is independent, so the
// thread count changes no result (the weight gradient's column sums stay on one thread, rows in order).
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "layers/kernels/cpu/cpu_common.h"
#include "layers/kernels/cpu/cpu_kernels.h"
#include "lib/op_shapes.h"
#include "lib/parallel.h"
#include "lib/zone.h"

namespace strata::kernels::cpu {
namespace {

void check(const char* op, const Tensor& t) {
  if (t.defined()) check_cpu_input(op, t);
}

// ---- softmax and log_softmax over one dim: rows of `size` elements `inner` apart -------------------------

// The rows split across the intra-op threads (Note [Intra-op threads] in lib/parallel.h): `fn(o)` for each
// outer index o, every one of which covers `per_outer` elements no other touches.
template <typename F>
void for_outer(int64_t outer, int64_t per_outer, const F& fn) {
  const int64_t grain = std::max<int64_t>(1, parallel::kGrainSize / std::max<int64_t>(1, per_outer));
  parallel::parallel_for(0, outer, grain, [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o) fn(o);
  });
}

template <typename T>
void softmax_rows(const T* x, T* y, const op_shapes::RowsAround& r, bool log) {
  for_outer(r.outer, r.size * r.inner, [&](int64_t o) {
    for (int64_t i = 0; i < r.inner; ++i) {
      const T* xr = x + o * r.size * r.inner + i;
      T* yr = y + o * r.size * r.inner + i;
      // Subtract the row's max so that exp never overflows; a row of -inf gives -inf - -inf = NaN, as torch.
      T max = -std::numeric_limits<T>::infinity();
      for (int64_t j = 0; j < r.size; ++j) max = xr[j * r.inner] > max || std::isnan(xr[j * r.inner]) ? xr[j * r.inner] : max;
      double sum = 0;
      for (int64_t j = 0; j < r.size; ++j) sum += std::exp(double(xr[j * r.inner] - max));
      if (log) {
        const T log_sum = T(std::log(sum));
        for (int64_t j = 0; j < r.size; ++j) yr[j * r.inner] = xr[j * r.inner] - max - log_sum;
      } else {
        const double inv = 1.0 / sum;
        for (int64_t j = 0; j < r.size; ++j) yr[j * r.inner] = T(std::exp(double(xr[j * r.inner] - max)) * inv);
      }
    }
  });
}

// softmax: grad_input = y * (g - sum(g * y)); log_softmax: g - exp(y) * sum(g), over each row.
template <typename T>
void softmax_backward_rows(const T* g, const T* y, T* gi, const op_shapes::RowsAround& r, bool log) {
  for_outer(r.outer, r.size * r.inner, [&](int64_t o) {
    for (int64_t i = 0; i < r.inner; ++i) {
      const int64_t base = o * r.size * r.inner + i;
      double sum = 0;
      for (int64_t j = 0; j < r.size; ++j) {
        const int64_t at = base + j * r.inner;
        sum += log ? double(g[at]) : double(g[at]) * double(y[at]);
      }
      for (int64_t j = 0; j < r.size; ++j) {
        const int64_t at = base + j * r.inner;
        gi[at] = log ? T(double(g[at]) - std::exp(double(y[at])) * sum) : T(double(y[at]) * (double(g[at]) - sum));
      }
    }
  });
}

Tensor softmax_op(const char* op, const Tensor& self, int64_t dim, bool log) {
  check_cpu_input(op, self);
  const op_shapes::RowsAround r = op_shapes::rows_around(op, self.sizes(), dim);
  if (is_half(self.dtype())) return round_from_f32(softmax_op(op, widen_to_f32(self), dim, log), self.dtype());
  STRATA_ZONE(zone, Layer::kLibrary, log ? "log_softmax (row loop)" : "softmax (row loop)");
  Tensor out = Tensor::empty(self.sizes(), self.dtype(), self.device());
  if (self.dtype() == DType::kF32) {
    softmax_rows(self.data<float>(), out.data<float>(), r, log);
  } else {
    softmax_rows(self.data<double>(), out.data<double>(), r, log);
  }
  return out;
}

Tensor softmax_backward_op(const char* op, const Tensor& grad_output, const Tensor& output, int64_t dim, bool log) {
  op_shapes::check_operands(op, check_cpu_input, grad_output, output);
  op_shapes::same_shape(op, grad_output.sizes(), output.sizes());
  const op_shapes::RowsAround r = op_shapes::rows_around(op, output.sizes(), dim);
  if (is_half(output.dtype())) {
    return round_from_f32(softmax_backward_op(op, widen_to_f32(grad_output), widen_to_f32(output), dim, log),
                          output.dtype());
  }
  STRATA_ZONE(zone, Layer::kLibrary, log ? "_log_softmax_backward_data (row loop)" : "_softmax_backward_data (row loop)");
  Tensor out = Tensor::empty(output.sizes(), output.dtype(), output.device());
  if (output.dtype() == DType::kF32) {
    softmax_backward_rows(grad_output.data<float>(), output.data<float>(), out.data<float>(), r, log);
  } else {
    softmax_backward_rows(grad_output.data<double>(), output.data<double>(), out.data<double>(), r, log);
  }
  return out;
}

// ---- layer_norm and rms_norm over the last dims: rows of `cols` contiguous elements --------------------

// A row's statistics: mean (0 for rms_norm) and rstd = 1 / sqrt(var + eps), var the biased variance
// (layer_norm, two passes) or the mean square (rms_norm). What torch's native_layer_norm returns as its
// second and third outputs; strata recomputes them in the gradient ops (Note [Normalization ops]).
template <typename T>
void row_stats(const T* x, int64_t cols, double eps, bool rms, double& mean, double& rstd) {
  mean = 0;
  if (!rms) {
    for (int64_t j = 0; j < cols; ++j) mean += double(x[j]);
    mean /= double(cols);
  }
  double var = 0;
  for (int64_t j = 0; j < cols; ++j) var += (double(x[j]) - mean) * (double(x[j]) - mean);
  var /= double(cols);
  rstd = 1.0 / std::sqrt(var + eps);
}

template <typename T>
void norm_rows(const T* x, const T* w, const T* b, T* y, const op_shapes::NormRows& n, double eps, bool rms) {
  for_outer(n.rows, n.cols, [&](int64_t r) {
    const T* xr = x + r * n.cols;
    T* yr = y + r * n.cols;
    double mean = 0, rstd = 0;
    row_stats(xr, n.cols, eps, rms, mean, rstd);
    for (int64_t j = 0; j < n.cols; ++j) {
      double v = (double(xr[j]) - mean) * rstd;
      if (w != nullptr) v *= double(w[j]);
      if (b != nullptr) v += double(b[j]);
      yr[j] = T(v);
    }
  });
}

// d input: rstd * (gw - mean(gw) - xhat * mean(gw * xhat)), gw = g * weight, xhat = (x - mean) * rstd;
// rms_norm has no mean term. d weight (into gw_out, when given): sum over rows of g * xhat.
template <typename T>
void norm_backward_rows(const T* g, const T* x, const T* w, T* gi, double* gw_out, const op_shapes::NormRows& n,
                        double eps, bool rms) {
  if (gw_out != nullptr) {  // one accumulator per column across all rows: one thread, rows in order
    for (int64_t r = 0; r < n.rows; ++r) {
      const T* xr = x + r * n.cols;
      const T* gr = g + r * n.cols;
      double mean = 0, rstd = 0;
      row_stats(xr, n.cols, eps, rms, mean, rstd);
      for (int64_t j = 0; j < n.cols; ++j) gw_out[j] += double(gr[j]) * (double(xr[j]) - mean) * rstd;
    }
    return;
  }
  for_outer(n.rows, n.cols, [&](int64_t r) {
    const T* xr = x + r * n.cols;
    const T* gr = g + r * n.cols;
    double mean = 0, rstd = 0;
    row_stats(xr, n.cols, eps, rms, mean, rstd);
    double sum_gw = 0, sum_gw_xhat = 0;
    for (int64_t j = 0; j < n.cols; ++j) {
      const double gw = double(gr[j]) * (w != nullptr ? double(w[j]) : 1.0);
      sum_gw += gw;
      sum_gw_xhat += gw * (double(xr[j]) - mean) * rstd;
    }
    const double mean_gw = rms ? 0.0 : sum_gw / double(n.cols), mean_gw_xhat = sum_gw_xhat / double(n.cols);
    T* gir = gi + r * n.cols;
    for (int64_t j = 0; j < n.cols; ++j) {
      const double gw = double(gr[j]) * (w != nullptr ? double(w[j]) : 1.0);
      const double xhat = (double(xr[j]) - mean) * rstd;
      gir[j] = T(rstd * (gw - mean_gw - xhat * mean_gw_xhat));
    }
  });
}

template <typename T>
const T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

Tensor norm_op(const char* op, const Tensor& input, const Shape& normalized_shape, const Tensor& weight,
               const Tensor& bias, double eps, bool rms) {
  op_shapes::check_operands(op, check_cpu_input, input, weight, bias);
  const Shape ws = weight.defined() ? weight.sizes() : Shape{}, bs = bias.defined() ? bias.sizes() : Shape{};
  const op_shapes::NormRows n = op_shapes::norm_rows(op, input.sizes(), normalized_shape,
                                                     weight.defined() ? &ws : nullptr, bias.defined() ? &bs : nullptr);
  if (is_half(input.dtype())) {
    return round_from_f32(norm_op(op, widen_to_f32(input), normalized_shape, widen_to_f32(weight), widen_to_f32(bias),
                                  eps, rms),
                          input.dtype());
  }
  STRATA_ZONE(zone, Layer::kLibrary, rms ? "rms_norm (row loop, f64 statistics)" : "layer_norm (row loop, f64 statistics)");
  Tensor out = Tensor::empty(input.sizes(), input.dtype(), input.device());
  if (input.dtype() == DType::kF32) {
    norm_rows(input.data<float>(), data_or_null<float>(weight), data_or_null<float>(bias), out.data<float>(), n, eps, rms);
  } else {
    norm_rows(input.data<double>(), data_or_null<double>(weight), data_or_null<double>(bias), out.data<double>(), n, eps,
              rms);
  }
  return out;
}

Tensor norm_input_backward_op(const char* op, const Tensor& grad_output, const Tensor& input,
                              const Shape& normalized_shape, const Tensor& weight, double eps, bool rms) {
  op_shapes::check_operands(op, check_cpu_input, grad_output, input, weight);
  op_shapes::same_shape(op, grad_output.sizes(), input.sizes());
  const Shape ws = weight.defined() ? weight.sizes() : Shape{};
  const op_shapes::NormRows n =
      op_shapes::norm_rows(op, input.sizes(), normalized_shape, weight.defined() ? &ws : nullptr, nullptr);
  if (is_half(input.dtype())) {
    return round_from_f32(norm_input_backward_op(op, widen_to_f32(grad_output), widen_to_f32(input), normalized_shape,
                                                 widen_to_f32(weight), eps, rms),
                          input.dtype());
  }
  STRATA_ZONE(zone, Layer::kLibrary, rms ? "rms_norm_input_backward (row loop)" : "layer_norm_input_backward (row loop)");
  Tensor out = Tensor::empty(input.sizes(), input.dtype(), input.device());
  if (input.dtype() == DType::kF32) {
    norm_backward_rows(grad_output.data<float>(), input.data<float>(), data_or_null<float>(weight), out.data<float>(),
                       nullptr, n, eps, rms);
  } else {
    norm_backward_rows(grad_output.data<double>(), input.data<double>(), data_or_null<double>(weight),
                       out.data<double>(), nullptr, n, eps, rms);
  }
  return out;
}

Tensor norm_weight_backward_op(const char* op, const Tensor& grad_output, const Tensor& input,
                               const Shape& normalized_shape, double eps, bool rms) {
  op_shapes::check_operands(op, check_cpu_input, grad_output, input);
  op_shapes::same_shape(op, grad_output.sizes(), input.sizes());
  const op_shapes::NormRows n = op_shapes::norm_rows(op, input.sizes(), normalized_shape, nullptr, nullptr);
  if (is_half(input.dtype())) {
    return round_from_f32(
        norm_weight_backward_op(op, widen_to_f32(grad_output), widen_to_f32(input), normalized_shape, eps, rms),
        input.dtype());
  }
  STRATA_ZONE(zone, Layer::kLibrary, rms ? "rms_norm_weight_backward (row loop, f64 accumulator)"
                                         : "layer_norm_weight_backward (row loop, f64 accumulator)");
  std::vector<double> acc(static_cast<size_t>(n.cols), 0.0);
  if (input.dtype() == DType::kF32) {
    norm_backward_rows<float>(grad_output.data<float>(), input.data<float>(), nullptr, nullptr, acc.data(), n, eps, rms);
  } else {
    norm_backward_rows<double>(grad_output.data<double>(), input.data<double>(), nullptr, nullptr, acc.data(), n, eps,
                               rms);
  }
  Tensor out = Tensor::empty(normalized_shape, input.dtype(), input.device());
  for (size_t j = 0; j < acc.size(); ++j) {
    if (input.dtype() == DType::kF32) {
      out.data<float>()[j] = static_cast<float>(acc[j]);
    } else {
      out.data<double>()[j] = acc[j];
    }
  }
  return out;
}

}  // namespace

Tensor softmax(const Tensor& self, int64_t dim) { return softmax_op("softmax", self, dim, false); }
Tensor log_softmax(const Tensor& self, int64_t dim) { return softmax_op("log_softmax", self, dim, true); }
Tensor softmax_backward_data(const Tensor& grad_output, const Tensor& output, int64_t dim) {
  return softmax_backward_op("_softmax_backward_data", grad_output, output, dim, false);
}
Tensor log_softmax_backward_data(const Tensor& grad_output, const Tensor& output, int64_t dim) {
  return softmax_backward_op("_log_softmax_backward_data", grad_output, output, dim, true);
}

Tensor layer_norm(const Tensor& input, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  return norm_op("layer_norm", input, normalized_shape, weight, bias, eps, false);
}
Tensor layer_norm_input_backward(const Tensor& grad_output, const Tensor& input, const Shape& normalized_shape,
                                 const Tensor& weight, double eps) {
  return norm_input_backward_op("layer_norm_input_backward", grad_output, input, normalized_shape, weight, eps, false);
}
Tensor layer_norm_weight_backward(const Tensor& grad_output, const Tensor& input, const Shape& normalized_shape,
                                  double eps) {
  return norm_weight_backward_op("layer_norm_weight_backward", grad_output, input, normalized_shape, eps, false);
}

Tensor rms_norm(const Tensor& input, const Shape& normalized_shape, const Tensor& weight, std::optional<double> eps) {
  return norm_op("rms_norm", input, normalized_shape, weight, Tensor(), op_shapes::rms_norm_eps(input.dtype(), eps), true);
}
Tensor rms_norm_input_backward(const Tensor& grad_output, const Tensor& input, const Shape& normalized_shape,
                               const Tensor& weight, double eps) {
  return norm_input_backward_op("rms_norm_input_backward", grad_output, input, normalized_shape, weight, eps, true);
}
Tensor rms_norm_weight_backward(const Tensor& grad_output, const Tensor& input, const Shape& normalized_shape,
                                double eps) {
  return norm_weight_backward_op("rms_norm_weight_backward", grad_output, input, normalized_shape, eps, true);
}

}  // namespace strata::kernels::cpu
