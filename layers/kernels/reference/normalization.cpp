// The float64 reference of the normalization ops (Note [Normalization ops] in layers/ops/normalization.h):
// each written from its definition in double, sharing no code with the kernels; the gradients from the
// input itself (not from a kernel's rounded output), checked against finite differences by the tests.
#include <cmath>
#include <limits>
#include <vector>

#include "layers/kernels/reference/reference.h"
#include "lib/op_shapes.h"

namespace strata::reference {
namespace {

// The flat index of element j of row (o, i) around the dim.
int64_t at(const op_shapes::RowsAround& r, int64_t o, int64_t i, int64_t j) { return (o * r.size + j) * r.inner + i; }

// f(row values, row output) over every row around `dim`.
template <typename F>
void for_rows(const op_shapes::RowsAround& r, F&& f) {
  std::vector<int64_t> idx(static_cast<size_t>(r.size));
  for (int64_t o = 0; o < r.outer; ++o) {
    for (int64_t i = 0; i < r.inner; ++i) {
      for (int64_t j = 0; j < r.size; ++j) idx[static_cast<size_t>(j)] = at(r, o, i, j);
      f(idx);
    }
  }
}

// softmax(x)_j = exp(x_j - max) / sum_k exp(x_k - max); log_softmax = x_j - max - log(sum).
std::vector<double> softmax_of(const char* op, const Tensor& self, int64_t dim, bool log) {
  const op_shapes::RowsAround r = op_shapes::rows_around(op, self.sizes(), dim);
  const auto x = to_double(self);
  std::vector<double> y(x.size());
  for_rows(r, [&](const std::vector<int64_t>& idx) {
    double max = -std::numeric_limits<double>::infinity();
    for (int64_t k : idx) max = std::isnan(x[k]) || x[k] > max ? x[k] : max;
    if (std::isnan(max)) max = std::numeric_limits<double>::quiet_NaN();
    double sum = 0;
    for (int64_t k : idx) sum += std::exp(x[k] - max);
    for (int64_t k : idx) y[k] = log ? x[k] - max - std::log(sum) : std::exp(x[k] - max) / sum;
  });
  return y;
}

struct Norm {
  op_shapes::NormRows n;
  std::vector<double> x, w;  // w empty: no weight
};

Norm norm_of(const char* op, const Tensor& input, const Shape& normalized_shape, const Tensor& weight,
             const Tensor& bias) {
  const Shape ws = weight.defined() ? weight.sizes() : Shape{}, bs = bias.defined() ? bias.sizes() : Shape{};
  Norm m{op_shapes::norm_rows(op, input.sizes(), normalized_shape, weight.defined() ? &ws : nullptr,
                              bias.defined() ? &bs : nullptr),
         to_double(input), weight.defined() ? to_double(weight) : std::vector<double>{}};
  return m;
}

// mean and 1 / sqrt(var + eps) of row r: var the biased variance, or for rms_norm the mean square.
void stats(const Norm& m, int64_t r, double eps, bool rms, double& mean, double& rstd) {
  const int64_t c = m.n.cols;
  mean = 0;
  if (!rms) {
    for (int64_t j = 0; j < c; ++j) mean += m.x[r * c + j];
    mean /= double(c);
  }
  double var = 0;
  for (int64_t j = 0; j < c; ++j) var += (m.x[r * c + j] - mean) * (m.x[r * c + j] - mean);
  rstd = 1.0 / std::sqrt(var / double(c) + eps);
}

std::vector<double> norm_forward(const char* op, const Tensor& input, const Shape& normalized_shape,
                                 const Tensor& weight, const Tensor& bias, double eps, bool rms) {
  const Norm m = norm_of(op, input, normalized_shape, weight, bias);
  const std::vector<double> b = bias.defined() ? to_double(bias) : std::vector<double>{};
  const int64_t c = m.n.cols;
  std::vector<double> y(m.x.size());
  for (int64_t r = 0; r < m.n.rows; ++r) {
    double mean = 0, rstd = 0;
    stats(m, r, eps, rms, mean, rstd);
    for (int64_t j = 0; j < c; ++j) {
      double v = (m.x[r * c + j] - mean) * rstd;
      if (!m.w.empty()) v *= m.w[j];
      if (!b.empty()) v += b[j];
      y[r * c + j] = v;
    }
  }
  return y;
}

// d input = rstd * (gw - mean(gw) - xhat * mean(gw * xhat)), gw = g * w (rms_norm: no mean(gw) term,
// xhat = x * rstd): the derivative of (x - mean) * rstd through mean and rstd.
std::vector<double> norm_input_grad(const char* op, const Tensor& grad_output, const Tensor& input,
                                    const Shape& normalized_shape, const Tensor& weight, double eps, bool rms) {
  op_shapes::same_shape(op, grad_output.sizes(), input.sizes());
  const Norm m = norm_of(op, input, normalized_shape, weight, Tensor());
  const auto g = to_double(grad_output);
  const int64_t c = m.n.cols;
  std::vector<double> gi(m.x.size());
  for (int64_t r = 0; r < m.n.rows; ++r) {
    double mean = 0, rstd = 0;
    stats(m, r, eps, rms, mean, rstd);
    double sum_gw = 0, sum_gw_xhat = 0;
    for (int64_t j = 0; j < c; ++j) {
      const double gw = g[r * c + j] * (m.w.empty() ? 1.0 : m.w[j]);
      sum_gw += gw;
      sum_gw_xhat += gw * (m.x[r * c + j] - mean) * rstd;
    }
    for (int64_t j = 0; j < c; ++j) {
      const double gw = g[r * c + j] * (m.w.empty() ? 1.0 : m.w[j]);
      const double xhat = (m.x[r * c + j] - mean) * rstd;
      gi[r * c + j] = rstd * (gw - (rms ? 0.0 : sum_gw / double(c)) - xhat * sum_gw_xhat / double(c));
    }
  }
  return gi;
}

// d weight = sum over rows of g * xhat.
std::vector<double> norm_weight_grad(const char* op, const Tensor& grad_output, const Tensor& input,
                                     const Shape& normalized_shape, double eps, bool rms) {
  op_shapes::same_shape(op, grad_output.sizes(), input.sizes());
  const Norm m = norm_of(op, input, normalized_shape, Tensor(), Tensor());
  const auto g = to_double(grad_output);
  const int64_t c = m.n.cols;
  std::vector<double> gw(static_cast<size_t>(c), 0.0);
  for (int64_t r = 0; r < m.n.rows; ++r) {
    double mean = 0, rstd = 0;
    stats(m, r, eps, rms, mean, rstd);
    for (int64_t j = 0; j < c; ++j) gw[j] += g[r * c + j] * (m.x[r * c + j] - mean) * rstd;
  }
  return gw;
}

// d bias = sum over rows of g.
std::vector<double> bias_grad(const Tensor& grad, int64_t cols) {
  const auto g = to_double(grad);
  std::vector<double> gb(static_cast<size_t>(cols), 0.0);
  for (size_t i = 0; i < g.size(); ++i) gb[i % static_cast<size_t>(cols)] += g[i];
  return gb;
}

}  // namespace

std::vector<double> softmax(const Tensor& self, int64_t dim) { return softmax_of("softmax", self, dim, false); }
std::vector<double> log_softmax(const Tensor& self, int64_t dim) { return softmax_of("log_softmax", self, dim, true); }

std::vector<double> softmax_backward_data(const Tensor& grad_output, const Tensor& output, int64_t dim) {
  op_shapes::same_shape("_softmax_backward_data", grad_output.sizes(), output.sizes());
  const op_shapes::RowsAround r = op_shapes::rows_around("_softmax_backward_data", output.sizes(), dim);
  const auto g = to_double(grad_output), y = to_double(output);
  std::vector<double> gi(g.size());
  for_rows(r, [&](const std::vector<int64_t>& idx) {
    double dot = 0;
    for (int64_t k : idx) dot += g[k] * y[k];
    for (int64_t k : idx) gi[k] = y[k] * (g[k] - dot);
  });
  return gi;
}

std::vector<double> log_softmax_backward_data(const Tensor& grad_output, const Tensor& output, int64_t dim) {
  op_shapes::same_shape("_log_softmax_backward_data", grad_output.sizes(), output.sizes());
  const op_shapes::RowsAround r = op_shapes::rows_around("_log_softmax_backward_data", output.sizes(), dim);
  const auto g = to_double(grad_output), y = to_double(output);
  std::vector<double> gi(g.size());
  for_rows(r, [&](const std::vector<int64_t>& idx) {
    double sum = 0;
    for (int64_t k : idx) sum += g[k];
    for (int64_t k : idx) gi[k] = g[k] - std::exp(y[k]) * sum;
  });
  return gi;
}

// From x: the forward in double, then the same formulas over the exact output.
Grads softmax_backward_of(const Tensor& grad, const Tensor& self, int64_t dim) {
  const op_shapes::RowsAround r = op_shapes::rows_around("softmax", self.sizes(), dim);
  const auto g = to_double(grad), y = softmax(self, dim);
  std::vector<double> gi(g.size());
  for_rows(r, [&](const std::vector<int64_t>& idx) {
    double dot = 0;
    for (int64_t k : idx) dot += g[k] * y[k];
    for (int64_t k : idx) gi[k] = y[k] * (g[k] - dot);
  });
  return {gi, {}};
}

Grads log_softmax_backward_of(const Tensor& grad, const Tensor& self, int64_t dim) {
  const op_shapes::RowsAround r = op_shapes::rows_around("log_softmax", self.sizes(), dim);
  const auto g = to_double(grad), p = softmax(self, dim);
  std::vector<double> gi(g.size());
  for_rows(r, [&](const std::vector<int64_t>& idx) {
    double sum = 0;
    for (int64_t k : idx) sum += g[k];
    for (int64_t k : idx) gi[k] = g[k] - p[k] * sum;
  });
  return {gi, {}};
}

std::vector<double> layer_norm(const Tensor& input, const Shape& normalized_shape, const Tensor& weight,
                               const Tensor& bias, double eps) {
  return norm_forward("layer_norm", input, normalized_shape, weight, bias, eps, false);
}
std::vector<double> layer_norm_input_backward(const Tensor& grad_output, const Tensor& input,
                                              const Shape& normalized_shape, const Tensor& weight, double eps) {
  return norm_input_grad("layer_norm_input_backward", grad_output, input, normalized_shape, weight, eps, false);
}
std::vector<double> layer_norm_weight_backward(const Tensor& grad_output, const Tensor& input,
                                               const Shape& normalized_shape, double eps) {
  return norm_weight_grad("layer_norm_weight_backward", grad_output, input, normalized_shape, eps, false);
}
Grads layer_norm_backward(const Tensor& grad, const Tensor& input, const Shape& normalized_shape, const Tensor& weight,
                          const Tensor& bias, double eps) {
  const int64_t cols = op_shapes::norm_rows("layer_norm", input.sizes(), normalized_shape, nullptr, nullptr).cols;
  return {layer_norm_input_backward(grad, input, normalized_shape, weight, eps),
          {},
          weight.defined() ? layer_norm_weight_backward(grad, input, normalized_shape, eps) : std::vector<double>{},
          bias.defined() ? bias_grad(grad, cols) : std::vector<double>{},
          {}};
}

std::vector<double> rms_norm(const Tensor& input, const Shape& normalized_shape, const Tensor& weight,
                             std::optional<double> eps) {
  return norm_forward("rms_norm", input, normalized_shape, weight, Tensor(),
                      op_shapes::rms_norm_eps(input.dtype(), eps), true);
}
std::vector<double> rms_norm_input_backward(const Tensor& grad_output, const Tensor& input,
                                            const Shape& normalized_shape, const Tensor& weight, double eps) {
  return norm_input_grad("rms_norm_input_backward", grad_output, input, normalized_shape, weight, eps, true);
}
std::vector<double> rms_norm_weight_backward(const Tensor& grad_output, const Tensor& input,
                                             const Shape& normalized_shape, double eps) {
  return norm_weight_grad("rms_norm_weight_backward", grad_output, input, normalized_shape, eps, true);
}
Grads rms_norm_backward(const Tensor& grad, const Tensor& input, const Shape& normalized_shape, const Tensor& weight,
                        std::optional<double> eps) {
  const double e = op_shapes::rms_norm_eps(input.dtype(), eps);
  return {rms_norm_input_backward(grad, input, normalized_shape, weight, e),
          {},
          weight.defined() ? rms_norm_weight_backward(grad, input, normalized_shape, e) : std::vector<double>{},
          {}};
}

}  // namespace strata::reference
