#include "layers/kernels/reference/reference.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "lib/error.h"
#include "lib/op_shapes.h"

namespace strata::reference {

float half_to_float(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  const uint32_t mant = h & 0x3ff;
  float value;
  if (exp == 0) {
    value = std::ldexp(static_cast<float>(mant), -24);  // subnormal
  } else if (exp == 31) {
    value = mant ? NAN : INFINITY;
  } else {
    value = std::ldexp(static_cast<float>(mant | 0x400), static_cast<int>(exp) - 25);
  }
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  bits |= sign;
  std::memcpy(&value, &bits, 4);
  return value;
}

uint16_t float_to_half(float f) {
  // Round to nearest even through the float's bits. NaN is a quiet NaN with its sign (c10::Half's): the
  // exponent test below would make it inf, and strata.full(..., nan) stores through here.
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);
  const int32_t exp = static_cast<int32_t>((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffff;
  if (exp <= 0) {
    if (exp < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000;
    const int shift = 14 - exp;
    uint32_t half = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00);
  uint32_t half = sign | (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) ++half;
  return static_cast<uint16_t>(half);
}

float bf16_to_float(uint16_t b) {
  uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t float_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  // NaN stays a quiet NaN with its sign: rounding could carry a large payload into the sign bit.
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  x += 0x7fff + ((x >> 16) & 1);  // round to nearest even
  return static_cast<uint16_t>(x >> 16);
}

std::vector<double> to_double(const Tensor& t) {
  if (!t.defined()) return {};
  Tensor host = t.to(kCPU);
  const int64_t n = host.numel();
  std::vector<double> out(static_cast<size_t>(n));
  // Row-major over the logical index, each element read through the tensor's own strides: a view
  // (transposed, sliced, expanded) reads as its values, in the order its sizes give.
  Shape idx;
  idx.ndim = host.dim();
  for (int64_t i = 0; i < n; ++i) {
    int64_t at = 0;
    for (int d = 0; d < idx.ndim; ++d) at += idx[d] * host.stride(d);
    switch (host.dtype()) {
      case DType::kF32: out[static_cast<size_t>(i)] = host.data<float>()[at]; break;
      case DType::kF64: out[static_cast<size_t>(i)] = host.data<double>()[at]; break;
      case DType::kF16: out[static_cast<size_t>(i)] = half_to_float(host.data<uint16_t>()[at]); break;
      case DType::kBF16: out[static_cast<size_t>(i)] = bf16_to_float(host.data<uint16_t>()[at]); break;
    }
    for (int d = idx.ndim - 1; d >= 0 && ++idx[d] == host.size(d); --d) idx[d] = 0;
  }
  return out;
}

namespace {

// Row-major strides of `sizes` (to_double's layout).
Shape row_major_strides(const Shape& sizes) {
  Shape st;
  st.ndim = sizes.ndim;
  int64_t step = 1;
  for (int d = sizes.ndim - 1; d >= 0; --d) {
    st[d] = step;
    step *= sizes[d];
  }
  return st;
}

// torch.matmul in loops (Note [matmul's shape rules] in lib/op_shapes.h): each (matrix i, row r, column j,
// inner p) of the broadcast product, with the element of self, of other and of the output it reads and
// writes as indices into to_double's row-major vectors. A 1-D self is one row, a 1-D other one column.
template <typename F>
void for_each_product_term(const Tensor& self, const Tensor& other, F&& f) {
  const op_shapes::MatmulGeometry g = op_shapes::matmul_geometry(self.sizes(), other.sizes());
  const Shape sa = row_major_strides(self.sizes()), sb = row_major_strides(other.sizes());
  for (int64_t i = 0; i < g.batch_count; ++i) {
    const int64_t base_a = self.dim() > 2 ? op_shapes::batch_offset(g.batch, i, self.sizes(), sa) : 0;
    const int64_t base_b = other.dim() > 2 ? op_shapes::batch_offset(g.batch, i, other.sizes(), sb) : 0;
    for (int64_t r = 0; r < g.m; ++r)
      for (int64_t j = 0; j < g.n; ++j)
        for (int64_t p = 0; p < g.k; ++p)
          f(static_cast<size_t>(base_a + r * g.k + p), static_cast<size_t>(base_b + p * g.n + j),
            static_cast<size_t>((i * g.m + r) * g.n + j));
  }
}

}  // namespace

std::vector<double> matmul(const Tensor& self, const Tensor& other) {
  const Shape out = op_shapes::matmul(self.sizes(), other.sizes());
  const auto a = to_double(self), b = to_double(other);
  std::vector<double> c(static_cast<size_t>(out.numel()), 0.0);
  for_each_product_term(self, other, [&](size_t ia, size_t ib, size_t ic) { c[ic] += a[ia] * b[ib]; });
  return c;
}

std::vector<double> linear(const Tensor& input, const Tensor& weight, const Tensor& bias) {
  const Shape out = op_shapes::linear(input.sizes(), weight.sizes(), bias.defined() ? &bias.sizes() : nullptr);
  const int64_t rows = op_shapes::linear_rows(input.sizes()), cols = out[out.ndim - 1], k = input.size(input.dim() - 1);
  const auto x = to_double(input), w = to_double(weight), b = to_double(bias);
  std::vector<double> y(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      double acc = bias.defined() ? b[static_cast<size_t>(c)] : 0.0;
      for (int64_t p = 0; p < k; ++p) acc += x[static_cast<size_t>(r * k + p)] * w[static_cast<size_t>(c * k + p)];
      y[static_cast<size_t>(r * cols + c)] = acc;
    }
  return y;
}

namespace {
// Every (output pixel, kernel tap) pair of a conv2d that touches the input, within each group: the one
// loop nest the forward and both gradients are sums over. f(y index, x index, w index).
template <typename F>
void for_each_tap(const op_shapes::Conv2dGeometry& g, F&& f) {
  const int64_t group_in = g.group_in_channels(), group_out = g.group_out_channels();
  for (int64_t n = 0; n < g.batch; ++n)
    for (int64_t k = 0; k < g.out_channels; ++k)
      for (int64_t oh = 0; oh < g.out_height; ++oh)
        for (int64_t ow = 0; ow < g.out_width; ++ow) {
          const size_t o = static_cast<size_t>(((n * g.out_channels + k) * g.out_height + oh) * g.out_width + ow);
          const int64_t first_channel = (k / group_out) * group_in;  // output channel k reads its group's
          for (int64_t c = 0; c < group_in; ++c)
            for (int64_t r = 0; r < g.kernel_h; ++r) {
              const int64_t ih = oh * g.stride_h - g.pad_h + r * g.dilation_h;
              if (ih < 0 || ih >= g.height) continue;
              for (int64_t s = 0; s < g.kernel_w; ++s) {
                const int64_t iw = ow * g.stride_w - g.pad_w + s * g.dilation_w;
                if (iw < 0 || iw >= g.width) continue;
                f(o, static_cast<size_t>(((n * g.in_channels + first_channel + c) * g.height + ih) * g.width + iw),
                  static_cast<size_t>(((k * group_in + c) * g.kernel_h + r) * g.kernel_w + s));
              }
            }
        }
}
}  // namespace

std::vector<double> conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, const Shape& stride,
                           const Shape& padding, const Shape& dilation, int64_t groups) {
  const auto g = op_shapes::conv2d(input.sizes(), weight.sizes(), bias.defined() ? &bias.sizes() : nullptr,
                                   stride, padding, dilation, groups);
  const auto x = to_double(input), w = to_double(weight), b = to_double(bias);
  std::vector<double> y(static_cast<size_t>(g.output().numel()), 0.0);
  for_each_tap(g, [&](size_t o, size_t xi, size_t wi) { y[o] += x[xi] * w[wi]; });
  if (bias.defined()) {
    const int64_t plane = g.out_height * g.out_width;
    for (size_t o = 0; o < y.size(); ++o) y[o] += b[static_cast<size_t>((int64_t(o) / plane) % g.out_channels)];
  }
  return y;
}

std::vector<double> relu(const Tensor& self) {
  auto v = to_double(self);
  for (double& x : v) x = x < 0 ? 0 : x;  // NaN and -0.0 pass through, as PyTorch's relu
  return v;
}

std::vector<double> gelu(const Tensor& self) {
  auto v = to_double(self);
  for (double& x : v) x = 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
  return v;
}

std::vector<double> silu(const Tensor& self) {
  auto v = to_double(self);
  for (double& x : v) x = x * (1.0 / (1.0 + std::exp(-x)));
  return v;
}

std::vector<double> sigmoid(const Tensor& self) {
  auto v = to_double(self);
  for (double& x : v) x = 1.0 / (1.0 + std::exp(-x));
  return v;
}

namespace {

// Broadcasting in the reference: each output element's coordinates, mapped to an operand's flat index by
// dropping the dims it lacks (in front) and reading index 0 along its dims of size 1. Coordinate
// arithmetic of its own (no views, no strides): the CPU kernels expand views and read strides instead.
std::vector<size_t> broadcast_index(const Shape& out, const Shape& in) {
  std::vector<size_t> at(static_cast<size_t>(out.numel()));
  std::vector<int64_t> coord(static_cast<size_t>(out.ndim), 0);
  for (size_t e = 0; e < at.size(); ++e) {
    int64_t flat = 0;
    for (int d = 0; d < in.ndim; ++d) {
      const int64_t c = coord[static_cast<size_t>(out.ndim - in.ndim + d)];
      flat = flat * in[d] + (in[d] == 1 ? 0 : c);
    }
    at[e] = static_cast<size_t>(flat);
    for (int d = out.ndim - 1; d >= 0 && ++coord[static_cast<size_t>(d)] == out[d]; --d) coord[static_cast<size_t>(d)] = 0;
  }
  return at;
}

// f(a, b) over the broadcast shape of self and other.
template <typename F>
std::vector<double> binary(const char* op, const Tensor& self, const Tensor& other, F f) {
  const Shape out = op_shapes::broadcast(op, self.sizes(), other.sizes());
  const auto a = to_double(self), b = to_double(other);
  const auto ia = broadcast_index(out, self.sizes()), ib = broadcast_index(out, other.sizes());
  std::vector<double> v(ia.size());
  for (size_t i = 0; i < v.size(); ++i) v[i] = f(a[ia[i]], b[ib[i]]);
  return v;
}

// A gradient of the broadcast shape summed into an operand's shape (each element where it was read).
std::vector<double> reduce_to(const std::vector<double>& g, const Shape& out, const Shape& in) {
  const auto at = broadcast_index(out, in);
  std::vector<double> r(static_cast<size_t>(in.numel()), 0.0);
  for (size_t i = 0; i < g.size(); ++i) r[at[i]] += g[i];
  return r;
}

}  // namespace

std::vector<double> add(const Tensor& self, const Tensor& other, double alpha) {
  return binary("add", self, other, [alpha](double a, double b) { return a + alpha * b; });
}

// The tanh GELU's ops: each is its definition in double, element by element.
std::vector<double> mul(const Tensor& self, const Tensor& other) {
  return binary("mul", self, other, [](double a, double b) { return a * b; });
}

std::vector<double> mul_scalar(const Tensor& self, double other) {
  auto v = to_double(self);
  for (double& x : v) x *= other;
  return v;
}

std::vector<double> div(const Tensor& self, const Tensor& other) {
  return binary("div", self, other, [](double a, double b) { return a / b; });
}

std::vector<double> div_scalar(const Tensor& self, double other) {
  auto v = to_double(self);
  for (double& x : v) x /= other;
  return v;
}

std::vector<double> add_scalar(const Tensor& self, double other, double alpha) {
  auto v = to_double(self);
  for (double& x : v) x += alpha * other;
  return v;
}

std::vector<double> sub(const Tensor& self, const Tensor& other, double alpha) {
  return binary("sub", self, other, [alpha](double a, double b) { return a - alpha * b; });
}

std::vector<double> sub_scalar(const Tensor& self, double other, double alpha) {
  auto v = to_double(self);
  for (double& x : v) x -= alpha * other;
  return v;
}

std::vector<double> tanh(const Tensor& self) {
  auto v = to_double(self);
  for (double& x : v) x = std::tanh(x);
  return v;
}

// pow's definition, with the special values of PyTorch's pow (sqrt for 0.5: sqrt(-0) = -0, sqrt(-inf) =
// NaN; reciprocal for -1; x^0 = 1 for every x); elsewhere std::pow in double.
std::vector<double> pow(const Tensor& self, double exponent) {
  auto v = to_double(self);
  for (double& x : v) {
    if (exponent == 0.0) x = 1.0;
    else if (exponent == 0.5) x = std::sqrt(x);
    else if (exponent == -0.5) x = 1.0 / std::sqrt(x);
    else if (exponent == -1.0) x = 1.0 / x;
    else if (exponent != 1.0) x = std::pow(x, exponent);
  }
  return v;
}

std::vector<double> tanh_backward(const Tensor& grad_output, const Tensor& output) {
  op_shapes::same_shape("tanh_backward", grad_output.sizes(), output.sizes());
  auto g = to_double(grad_output);
  const auto y = to_double(output);
  for (size_t i = 0; i < g.size(); ++i) g[i] *= 1.0 - y[i] * y[i];
  return g;
}

std::vector<double> gemm(const Tensor& self, const Tensor& other, int64_t transpose_self, int64_t transpose_other) {
  const Shape out = op_shapes::gemm(self.sizes(), other.sizes(), transpose_self, transpose_other);
  const int64_t m = out[0], n = out[1], k = transpose_self ? self.size(0) : self.size(1);
  const auto a = to_double(self), b = to_double(other);
  // Element (i, p) of op(A) and (p, j) of op(B), read through the stored layouts.
  auto at = [&](int64_t i, int64_t p) {
    return a[static_cast<size_t>(transpose_self ? p * m + i : i * k + p)];
  };
  auto bt = [&](int64_t p, int64_t j) {
    return b[static_cast<size_t>(transpose_other ? j * k + p : p * n + j)];
  };
  std::vector<double> c(static_cast<size_t>(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < k; ++p) acc += at(i, p) * bt(p, j);
      c[static_cast<size_t>(i * n + j)] = acc;
    }
  return c;
}

std::vector<double> sum(const Tensor& self) {
  double acc = 0;
  for (double x : to_double(self)) acc += x;
  return {acc};
}

std::vector<double> ones_like(const Tensor& self) { return std::vector<double>(static_cast<size_t>(self.numel()), 1.0); }

std::vector<double> expand_as(const Tensor& self, const Tensor& other) {
  const Shape out = op_shapes::expand_as(self.sizes(), other.sizes());
  return std::vector<double>(static_cast<size_t>(out.numel()), to_double(self)[0]);
}

std::vector<double> threshold_backward(const Tensor& grad_output, const Tensor& self, double threshold) {
  op_shapes::same_shape("threshold_backward", grad_output.sizes(), self.sizes());
  auto g = to_double(grad_output);
  const auto x = to_double(self);
  for (size_t i = 0; i < g.size(); ++i) g[i] = x[i] <= threshold ? 0.0 : g[i];
  return g;
}

std::vector<double> gelu_backward(const Tensor& grad_output, const Tensor& self) {
  op_shapes::same_shape("gelu_backward", grad_output.sizes(), self.sizes());
  auto g = to_double(grad_output);
  const auto x = to_double(self);
  const double pi = std::acos(-1.0);
  for (size_t i = 0; i < g.size(); ++i) {
    const double cdf = 0.5 * (1.0 + std::erf(x[i] / std::sqrt(2.0)));
    const double pdf = std::exp(-0.5 * x[i] * x[i]) / std::sqrt(2.0 * pi);
    g[i] *= cdf + x[i] * pdf;
  }
  return g;
}

std::vector<double> bias_backward(const Tensor& grad_output) {
  const Shape& s = grad_output.sizes();
  const Shape out = op_shapes::bias_backward(s);
  const auto g = to_double(grad_output);
  const int64_t channels = s[1], inner = s.ndim == 4 ? s[2] * s[3] : 1;
  std::vector<double> b(static_cast<size_t>(out.numel()), 0.0);
  for (size_t i = 0; i < g.size(); ++i) b[static_cast<size_t>((int64_t(i) / inner) % channels)] += g[i];
  return b;
}

std::vector<double> conv2d_input_backward(const Tensor& grad_output, const Tensor& input, const Tensor& weight,
                                          const Shape& stride, const Shape& padding, const Shape& dilation,
                                          int64_t groups) {
  const auto g = op_shapes::conv2d_backward("conv2d_input_backward", grad_output.sizes(), input.sizes(),
                                            weight.sizes(), stride, padding, dilation, groups);
  const auto dy = to_double(grad_output), w = to_double(weight);
  std::vector<double> dx(static_cast<size_t>(input.numel()), 0.0);
  for_each_tap(g, [&](size_t o, size_t x, size_t wi) { dx[x] += dy[o] * w[wi]; });
  return dx;
}

std::vector<double> conv2d_weight_backward(const Tensor& grad_output, const Tensor& input, const Tensor& weight,
                                           const Shape& stride, const Shape& padding, const Shape& dilation,
                                           int64_t groups) {
  const auto g = op_shapes::conv2d_backward("conv2d_weight_backward", grad_output.sizes(), input.sizes(),
                                            weight.sizes(), stride, padding, dilation, groups);
  const auto dy = to_double(grad_output), x = to_double(input);
  std::vector<double> dw(static_cast<size_t>(weight.numel()), 0.0);
  for_each_tap(g, [&](size_t o, size_t xi, size_t wi) { dw[wi] += dy[o] * x[xi]; });
  return dw;
}

// Every product term a*b adds grad*b to a's gradient and grad*a to b's: a broadcast matrix collects the
// terms of every batch entry that read it (the sum over broadcast dims).
Grads matmul_backward(const Tensor& grad, const Tensor& self, const Tensor& other) {
  const auto g = to_double(grad), a = to_double(self), b = to_double(other);
  std::vector<double> ga(a.size(), 0.0), gb(b.size(), 0.0);
  for_each_product_term(self, other, [&](size_t ia, size_t ib, size_t ic) {
    ga[ia] += g[ic] * b[ib];
    gb[ib] += g[ic] * a[ia];
  });
  return {ga, gb};
}

// input [..., IN] as rows [R, IN]; grad [..., OUT] as [R, OUT].
Grads linear_backward(const Tensor& grad, const Tensor& input, const Tensor& weight, const Tensor& bias) {
  const int64_t rows = op_shapes::linear_rows(input.sizes()), k = input.size(input.dim() - 1), cols = weight.size(0);
  const auto g = to_double(grad), x = to_double(input), w = to_double(weight);
  Grads out{std::vector<double>(x.size(), 0.0), std::vector<double>(w.size(), 0.0), {}};
  if (bias.defined()) out[2].assign(static_cast<size_t>(cols), 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const double gv = g[static_cast<size_t>(r * cols + c)];
      if (bias.defined()) out[2][static_cast<size_t>(c)] += gv;
      for (int64_t p = 0; p < k; ++p) {
        out[0][static_cast<size_t>(r * k + p)] += gv * w[static_cast<size_t>(c * k + p)];
        out[1][static_cast<size_t>(c * k + p)] += gv * x[static_cast<size_t>(r * k + p)];
      }
    }
  return out;
}

Grads conv2d_backward(const Tensor& grad, const Tensor& input, const Tensor& weight, const Tensor& bias,
                      const Shape& stride, const Shape& padding, const Shape& dilation, int64_t groups) {
  Grads g{conv2d_input_backward(grad, input, weight, stride, padding, dilation, groups),
          conv2d_weight_backward(grad, input, weight, stride, padding, dilation, groups), {}, {}, {}, {}, {}};
  if (bias.defined()) g[2] = bias_backward(grad);
  return g;
}

Grads relu_backward(const Tensor& grad, const Tensor& self) { return {threshold_backward(grad, self, 0.0)}; }

// Each operand's gradient is the upstream one (scaled) summed over the dims it was broadcast along.
Grads add_backward(const Tensor& grad, const Tensor& self, const Tensor& other, double alpha) {
  const Shape out = op_shapes::broadcast("add", self.sizes(), other.sizes());
  std::vector<double> g = to_double(grad), scaled = g;
  for (double& x : scaled) x *= alpha;
  return {reduce_to(g, out, self.sizes()), reduce_to(scaled, out, other.sizes()), {}};
}

Grads gelu_backward_of(const Tensor& grad, const Tensor& self) { return {gelu_backward(grad, self)}; }

// d/dx x * s(x) = s(x) + x * s(x) * (1 - s(x)), s the logistic sigmoid.
std::vector<double> silu_backward(const Tensor& grad_output, const Tensor& self) {
  op_shapes::same_shape("silu_backward", grad_output.sizes(), self.sizes());
  auto g = to_double(grad_output);
  const auto x = to_double(self);
  for (size_t i = 0; i < g.size(); ++i) {
    const double s = 1.0 / (1.0 + std::exp(-x[i]));
    g[i] *= s + x[i] * s * (1.0 - s);
  }
  return g;
}

Grads silu_backward_of(const Tensor& grad, const Tensor& self) { return {silu_backward(grad, self)}; }

std::vector<double> sigmoid_backward(const Tensor& grad_output, const Tensor& output) {
  op_shapes::same_shape("sigmoid_backward", grad_output.sizes(), output.sizes());
  auto g = to_double(grad_output);
  const auto y = to_double(output);
  for (size_t i = 0; i < g.size(); ++i) g[i] *= y[i] * (1.0 - y[i]);
  return g;
}

// From x itself (s(x) * (1 - s(x)) in double), not from a kernel's rounded output.
Grads sigmoid_backward_of(const Tensor& grad, const Tensor& self) {
  auto g = to_double(grad);
  const auto x = to_double(self);
  for (size_t i = 0; i < g.size(); ++i) {
    const double s = 1.0 / (1.0 + std::exp(-x[i]));
    g[i] *= s * (1.0 - s);
  }
  return {g};
}

Grads sum_backward(const Tensor& grad, const Tensor& self) { return {expand_as(grad, self)}; }

Grads mul_backward(const Tensor& grad, const Tensor& self, const Tensor& other) {
  const Shape out = op_shapes::broadcast("mul", self.sizes(), other.sizes());
  return {reduce_to(mul(grad, other), out, self.sizes()), reduce_to(mul(grad, self), out, other.sizes())};
}

Grads mul_scalar_backward(const Tensor& grad, const Tensor&, double other) { return {mul_scalar(grad, other), {}}; }

// d/dself (a / b) = 1 / b, d/dother (a / b) = -a / b^2, each read where the operand was broadcast.
Grads div_backward(const Tensor& grad, const Tensor& self, const Tensor& other) {
  const Shape out = op_shapes::broadcast("div", self.sizes(), other.sizes());
  const auto g = to_double(grad), a = to_double(self), b = to_double(other);
  const auto ia = broadcast_index(out, self.sizes()), ib = broadcast_index(out, other.sizes());
  std::vector<double> gs(g.size()), go(g.size());
  for (size_t i = 0; i < g.size(); ++i) {
    const double bi = b[ib[i]];
    gs[i] = g[i] / bi;
    go[i] = -g[i] * a[ia[i]] / (bi * bi);
  }
  return {reduce_to(gs, out, self.sizes()), reduce_to(go, out, other.sizes())};
}

Grads div_scalar_backward(const Tensor& grad, const Tensor&, double other) { return {div_scalar(grad, other), {}}; }

Grads add_scalar_backward(const Tensor& grad, const Tensor&, double, double) { return {to_double(grad), {}, {}}; }

Grads sub_backward(const Tensor& grad, const Tensor& self, const Tensor& other, double alpha) {
  const Shape out = op_shapes::broadcast("sub", self.sizes(), other.sizes());
  return {reduce_to(to_double(grad), out, self.sizes()), reduce_to(mul_scalar(grad, -alpha), out, other.sizes()), {}};
}

Grads sub_scalar_backward(const Tensor& grad, const Tensor&, double, double) { return {to_double(grad), {}, {}}; }

// From x itself (1 - tanh(x)^2 in double), not from a kernel's rounded output.
Grads tanh_backward_of(const Tensor& grad, const Tensor& self) {
  auto g = to_double(grad);
  const auto x = to_double(self);
  for (size_t i = 0; i < g.size(); ++i) g[i] *= 1.0 - std::tanh(x[i]) * std::tanh(x[i]);
  return {g};
}

// e * x^(e-1), and 0 for e = 0 (PyTorch's pow_backward: x^-1 * 0 would be NaN at x = 0).
Grads pow_backward(const Tensor& grad, const Tensor& self, double exponent) {
  auto g = to_double(grad);
  const auto x = to_double(self);
  for (size_t i = 0; i < g.size(); ++i) g[i] = exponent == 0.0 ? 0.0 : g[i] * exponent * std::pow(x[i], exponent - 1);
  return {g, {}};
}

// The cast's gradient is the incoming one (cast back, which the float64 reference does not see).
Grads to_copy_backward(const Tensor& grad, const Tensor&, std::optional<DType>) { return {to_double(grad), {}}; }
std::vector<double> to_copy(const Tensor& self, std::optional<DType>) { return to_double(self); }

// ---- Reductions over dims ------------------------------------------------------------------------------
namespace {

// For every element of self, row-major, the row-major position of the output element it goes into: its
// coordinates with the reduced dims set to 0, in the keepdim shape.
std::vector<int64_t> reduction_map(const Tensor& self, const op_shapes::Reduction& r) {
  const Shape& s = self.sizes();
  std::vector<int64_t> map(static_cast<size_t>(s.numel()));
  for (int64_t e = 0; e < s.numel(); ++e) {
    int64_t rest = e, at = 0, scale = 1;
    for (int i = s.ndim - 1; i >= 0; --i) {
      const int64_t coord = rest % s[i];
      rest /= s[i];
      if (!r.reduced[static_cast<size_t>(i)]) at += coord * scale;
      scale *= r.kept[i];
    }
    map[static_cast<size_t>(e)] = at;
  }
  return map;
}

std::vector<double> reduce_mean(const Tensor& self, const Shape& dim, bool keepdim, bool is_mean) {
  const op_shapes::Reduction r = op_shapes::reduce_dims(is_mean ? "mean" : "sum", self.sizes(), dim, keepdim);
  const std::vector<double> x = to_double(self);
  const std::vector<int64_t> map = reduction_map(self, r);
  std::vector<double> out(static_cast<size_t>(r.out.numel()), 0.0);
  for (size_t e = 0; e < x.size(); ++e) out[static_cast<size_t>(map[e])] += x[e];
  if (is_mean) {
    for (double& o : out) o /= double(r.count);
  }
  return out;
}

Grads reduce_backward(const Tensor& grad, const Tensor& self, const Shape& dim, bool keepdim, bool is_mean) {
  const op_shapes::Reduction r = op_shapes::reduce_dims(is_mean ? "mean" : "sum", self.sizes(), dim, keepdim);
  const std::vector<double> g = to_double(grad);
  const std::vector<int64_t> map = reduction_map(self, r);
  std::vector<double> out(map.size());
  for (size_t e = 0; e < map.size(); ++e) {
    out[e] = g[static_cast<size_t>(map[e])] / (is_mean ? double(r.count) : 1.0);
  }
  return {out, {}, {}, {}};
}

}  // namespace

std::vector<double> sum_dim(const Tensor& self, const Shape& dim, bool keepdim, std::optional<DType>) {
  return reduce_mean(self, dim, keepdim, false);
}
std::vector<double> mean_dim(const Tensor& self, const Shape& dim, bool keepdim, std::optional<DType>) {
  return reduce_mean(self, dim, keepdim, true);
}
std::vector<double> mean(const Tensor& self, std::optional<DType>) { return reduce_mean(self, Shape{}, false, true); }

Grads sum_dim_backward(const Tensor& grad, const Tensor& self, const Shape& dim, bool keepdim, std::optional<DType>) {
  return reduce_backward(grad, self, dim, keepdim, false);
}
Grads mean_dim_backward(const Tensor& grad, const Tensor& self, const Shape& dim, bool keepdim, std::optional<DType>) {
  return reduce_backward(grad, self, dim, keepdim, true);
}
Grads mean_backward(const Tensor& grad, const Tensor& self, std::optional<DType>) {
  Grads g = reduce_backward(grad, self, Shape{}, false, true);
  g.resize(2);
  return g;
}

// ---- Views (docs/views.md) ------------------------------------------------------------------------------
// Each view is its index map: for every output element, in row-major order, the row-major position in
// self of the element it shows. The forward gathers through the map, the gradient scatters back through
// it (adding, so that expand's repeated reads sum). The maps are coordinate arithmetic written here from
// the definitions, not lib/views.cpp's stride arithmetic, so that a wrong stride cannot hide in both.
namespace {

using IndexMap = std::vector<int64_t>;

int64_t wrap(int64_t dim, int64_t n) { return dim < 0 ? dim + n : dim; }
int64_t clamp_index(int64_t i, int64_t n) { return i < 0 ? std::max<int64_t>(i + n, 0) : std::min(i, n); }

// The map of an output of sizes `out`, where in_coord(c, in) sets self's coordinates from output coordinates c.
template <typename F>
IndexMap index_map(const Shape& in_sizes, const Shape& out, F in_coord) {
  IndexMap map(static_cast<size_t>(out.numel()));
  Shape c, in;
  c.ndim = out.ndim;
  in.ndim = in_sizes.ndim;
  for (auto& at : map) {
    in_coord(c, in);
    int64_t pos = 0;
    for (int d = 0; d < in.ndim; ++d) pos = pos * in_sizes[d] + in[d];
    at = pos;
    for (int d = c.ndim - 1; d >= 0 && ++c[d] == out[d]; --d) c[d] = 0;
  }
  return map;
}

std::vector<double> gather(const Tensor& self, const IndexMap& map) {
  const auto x = to_double(self);
  std::vector<double> out(map.size());
  for (size_t j = 0; j < map.size(); ++j) out[j] = x[static_cast<size_t>(map[j])];
  return out;
}

std::vector<double> scatter_add(const Tensor& grad, const Tensor& self, const IndexMap& map) {
  const auto g = to_double(grad);
  std::vector<double> out(static_cast<size_t>(self.numel()), 0.0);
  for (size_t j = 0; j < map.size(); ++j) out[static_cast<size_t>(map[j])] += g[j];
  return out;
}

IndexMap identity_map(const Tensor& self) {
  IndexMap map(static_cast<size_t>(self.numel()));
  for (size_t j = 0; j < map.size(); ++j) map[j] = static_cast<int64_t>(j);
  return map;
}

IndexMap transpose_map(const Tensor& self, int64_t dim0, int64_t dim1) {
  const int n = self.dim();
  if (n == 0) return identity_map(self);
  const auto a = static_cast<int>(wrap(dim0, n)), b = static_cast<int>(wrap(dim1, n));
  Shape out = self.sizes();
  std::swap(out[a], out[b]);
  return index_map(self.sizes(), out, [&](const Shape& c, Shape& in) {
    for (int d = 0; d < n; ++d) in[d] = c[d];
    std::swap(in[a], in[b]);
  });
}

IndexMap permute_map(const Tensor& self, const Shape& dims) {
  Shape out;
  out.ndim = self.dim();
  for (int i = 0; i < out.ndim; ++i) out[i] = self.size(static_cast<int>(wrap(dims[i], out.ndim)));
  return index_map(self.sizes(), out, [&](const Shape& c, Shape& in) {
    for (int i = 0; i < c.ndim; ++i) in[static_cast<int>(wrap(dims[i], c.ndim))] = c[i];
  });
}

IndexMap expand_map(const Tensor& self, const Shape& size) {
  const int lead = size.ndim - self.dim();
  Shape out = size;
  for (int i = lead; i < size.ndim; ++i)
    if (out[i] == -1) out[i] = self.size(i - lead);
  return index_map(self.sizes(), out, [&](const Shape& c, Shape& in) {
    for (int i = 0; i < in.ndim; ++i) in[i] = self.size(i) == 1 ? 0 : c[i + lead];
  });
}

IndexMap slice_map(const Tensor& self, int64_t dim, int64_t start, int64_t end, int64_t step) {
  const auto d = static_cast<int>(wrap(dim, self.dim()));
  const int64_t n = self.size(d), first = clamp_index(start, n), last = std::max(clamp_index(end, n), first);
  Shape out = self.sizes();
  out[d] = (last - first + step - 1) / step;
  return index_map(self.sizes(), out, [&](const Shape& c, Shape& in) {
    for (int i = 0; i < in.ndim; ++i) in[i] = c[i];
    in[d] = first + c[d] * step;
  });
}

IndexMap select_map(const Tensor& self, int64_t dim, int64_t index) {
  const auto d = static_cast<int>(wrap(dim, self.dim()));
  Shape out;
  for (int i = 0; i < self.dim(); ++i)
    if (i != d) out[out.ndim++] = self.size(i);
  const int64_t at = wrap(index, self.size(d));
  return index_map(self.sizes(), out, [&](const Shape& c, Shape& in) {
    for (int i = 0, j = 0; i < in.ndim; ++i) in[i] = i == d ? at : c[j++];
  });
}

IndexMap narrow_map(const Tensor& self, int64_t dim, int64_t start, int64_t length) {
  const int64_t first = wrap(start, self.size(static_cast<int>(wrap(dim, self.dim()))));
  return slice_map(self, dim, first, first + length, 1);
}

}  // namespace

std::vector<double> transpose(const Tensor& self, int64_t dim0, int64_t dim1) { return gather(self, transpose_map(self, dim0, dim1)); }
std::vector<double> t(const Tensor& self) { return gather(self, transpose_map(self, 0, self.dim() < 2 ? 0 : 1)); }
std::vector<double> permute(const Tensor& self, const Shape& dims) { return gather(self, permute_map(self, dims)); }
std::vector<double> view(const Tensor& self, const Shape&) { return to_double(self); }
std::vector<double> reshape(const Tensor& self, const Shape&) { return to_double(self); }
std::vector<double> expand(const Tensor& self, const Shape& size) { return gather(self, expand_map(self, size)); }
std::vector<double> narrow(const Tensor& self, int64_t dim, int64_t start, int64_t length) {
  return gather(self, narrow_map(self, dim, start, length));
}
std::vector<double> select(const Tensor& self, int64_t dim, int64_t index) { return gather(self, select_map(self, dim, index)); }
std::vector<double> slice(const Tensor& self, int64_t dim, int64_t start, int64_t end, int64_t step) {
  return gather(self, slice_map(self, dim, start, end, step));
}
std::vector<double> unsqueeze(const Tensor& self, int64_t) { return to_double(self); }
std::vector<double> squeeze(const Tensor& self, int64_t) { return to_double(self); }
std::vector<double> contiguous(const Tensor& self) { return to_double(self); }

std::vector<double> slice_backward(const Tensor& grad_output, const Tensor& self, int64_t dim, int64_t start, int64_t step) {
  const int64_t len = grad_output.size(static_cast<int>(wrap(dim, self.dim())));
  return scatter_add(grad_output, self, slice_map(self, dim, start, start + len * step, step));
}
std::vector<double> sum_to(const Tensor& grad_output, const Tensor& self) {
  return scatter_add(grad_output, self, expand_map(self, grad_output.sizes()));
}
// self's values (row-major), then each src element (row-major) stored at offset + sum(index * stride).
std::vector<double> as_strided_scatter(const Tensor& self, const Tensor& src, const Shape& size, const Shape& stride,
                                       int64_t storage_offset) {
  std::vector<double> out = to_double(self);
  const std::vector<double> values = to_double(src);
  for (size_t e = 0; e < values.size(); ++e) {
    int64_t rest = static_cast<int64_t>(e), at = storage_offset;
    for (int i = size.ndim - 1; i >= 0; --i) {
      at += (rest % size[i]) * stride[i];
      rest /= size[i];
    }
    out.at(static_cast<size_t>(at)) = values[e];
  }
  return out;
}

Grads transpose_backward(const Tensor& grad, const Tensor& self, int64_t dim0, int64_t dim1) {
  return {scatter_add(grad, self, transpose_map(self, dim0, dim1)), {}, {}};
}
Grads t_backward(const Tensor& grad, const Tensor& self) {
  return {scatter_add(grad, self, transpose_map(self, 0, self.dim() < 2 ? 0 : 1))};
}
Grads permute_backward(const Tensor& grad, const Tensor& self, const Shape& dims) {
  return {scatter_add(grad, self, permute_map(self, dims)), {}};
}
Grads reshape_backward(const Tensor& grad, const Tensor& self, const Shape&) {
  return {scatter_add(grad, self, identity_map(self)), {}};
}
Grads expand_backward(const Tensor& grad, const Tensor& self, const Shape& size) {
  return {scatter_add(grad, self, expand_map(self, size)), {}};
}
Grads narrow_backward(const Tensor& grad, const Tensor& self, int64_t dim, int64_t start, int64_t length) {
  return {scatter_add(grad, self, narrow_map(self, dim, start, length)), {}, {}, {}};
}
Grads select_backward(const Tensor& grad, const Tensor& self, int64_t dim, int64_t index) {
  return {scatter_add(grad, self, select_map(self, dim, index)), {}, {}};
}
Grads slice_backward_of(const Tensor& grad, const Tensor& self, int64_t dim, int64_t start, int64_t end, int64_t step) {
  return {scatter_add(grad, self, slice_map(self, dim, start, end, step)), {}, {}, {}, {}};
}
Grads squeeze_backward(const Tensor& grad, const Tensor& self, int64_t) { return {scatter_add(grad, self, identity_map(self)), {}}; }
Grads contiguous_backward(const Tensor& grad, const Tensor& self) { return {scatter_add(grad, self, identity_map(self))}; }

namespace {

// Note [A result past the output dtype's range]: the float64 reference holds values no output dtype can.
// Inputs in [-1, 1) give f16 divisors below 1.5e-5 on almost every run of a large shape, and their
// quotients pass 65504, f16's largest finite value: a correctly rounded kernel returns inf there (IEEE
// overflow, torch's result too) while the reference holds, say, 8e6; and a divisor of exactly zero (not
// from strata's random inputs, which hold none, but from a user's) makes the reference itself +-inf.
// Measured as they are, inf - 8e6 and inf - inf make the error infinite (or NaN) and a correct kernel
// fail. So each element is judged against the reference as the output dtype would hold it: a value at or
// past the overflow threshold (the largest finite value plus half its unit in the last place, where
// round-to-nearest-even starts giving infinity; f64 has none) is that dtype's infinity with its sign.
//  - Where that rounded reference is +-inf or NaN, the element is exact when the result is the same
//    infinity, or a NaN for a NaN: it adds nothing to the difference and counts at the scale floor in the
//    norm, so that its huge magnitude cannot hide the other elements' errors. Anything else there (the
//    other infinity, a finite number, a NaN for an infinity) makes the error infinite.
//  - Where it is finite, an infinity or NaN in the result makes the error infinite, with one exception:
//    a reference that rounds to the largest finite value, and an infinity of its sign. That is one unit in
//    the last place off, as a kernel of two rounded steps gives (div's gradient for other is
//    (self / other) / other: the first rounding can carry 65500 past 65520), and it counts as that: the
//    infinity stands for the value one ulp past the largest (65536 in f16) in the difference.
struct FiniteRange {
  double largest = DBL_MAX;     // the largest finite value
  double threshold = INFINITY;  // from here on, round-to-nearest-even gives infinity
};

FiniteRange finite_range(DType dtype) {
  // (2 - 2^-m) * 2^e and (2 - 2^-(m+1)) * 2^e, for m mantissa bits and the largest exponent e.
  const auto range = [](int mantissa_bits, int max_exponent) {
    return FiniteRange{std::ldexp(2.0 - std::ldexp(1.0, -mantissa_bits), max_exponent),
                       std::ldexp(2.0 - std::ldexp(1.0, -mantissa_bits - 1), max_exponent)};
  };
  switch (dtype) {
    case DType::kF16: return range(10, 15);   // 65504, 65520
    case DType::kBF16: return range(7, 127);  // 0x1.fep127, 0x1.ffp127
    case DType::kF32: return range(23, 127);  // FLT_MAX, FLT_MAX + half its ulp
    case DType::kF64: return {};              // the reference's own range
  }
  return {};
}

// The reference as the output dtype would hold it where that decides exactness: +-inf at or past the
// overflow threshold, every other value unchanged.
double clamp_to_range(double ref, const FiniteRange& range) {
  return std::fabs(ref) >= range.threshold ? std::copysign(INFINITY, ref) : ref;
}

// The value a result counts as against a finite reference: itself, except an infinity of the reference's
// sign where the reference rounds to the largest finite value, which is one ulp past that value.
double counted_value(double got, double ref, const FiniteRange& range) {
  if (!std::isinf(got) || std::signbit(got) != std::signbit(ref) || !std::isfinite(range.threshold)) return got;
  const double half_ulp = range.threshold - range.largest;
  if (std::fabs(ref) <= range.largest - half_ulp) return got;  // rounds below the largest: wrong
  return std::copysign(range.largest + 2 * half_ulp, ref);
}

}  // namespace

double relative_error(const Tensor& out, const std::vector<double>& ref) {
  const auto got = to_double(out);
  if (got.size() != ref.size()) {
    throw Error("relative_error: result has " + std::to_string(got.size()) + " elements, reference " +
                std::to_string(ref.size()));
  }
  // Note [Error against the inputs' scale]: inputs are uniform in [-1, 1), so every output is built from
  // terms of order one. An output that happens to cancel to nearly zero (one product plus a bias, say)
  // would make a plain norm-relative error explode on ordinary rounding, and a test on small shapes fail
  // for some seeds. So each reference value counts at least kScaleFloor in the denominator: a wrong
  // kernel still errs by the inputs' scale and fails, a correct one is never judged by a cancellation.
  constexpr double kScaleFloor = 0.25;
  const FiniteRange range = finite_range(out.defined() ? out.dtype() : DType::kF64);
  double diff = 0, norm = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double want = clamp_to_range(ref[i], range);
    if (!std::isfinite(want)) {  // Note [A result past the output dtype's range]
      const bool exact = std::isnan(want) ? std::isnan(got[i]) : got[i] == want;
      if (!exact) return INFINITY;
      norm += kScaleFloor * kScaleFloor;
      continue;
    }
    const double value = counted_value(got[i], ref[i], range);
    diff += (value - ref[i]) * (value - ref[i]);
    norm += std::max(ref[i] * ref[i], kScaleFloor * kScaleFloor);
  }
  if (!std::isfinite(diff)) return INFINITY;
  return ref.empty() ? 0.0 : std::sqrt(diff / norm);
}

double tolerance(DType dtype, bool tf32) {
  // Relative-norm bounds: a few unit roundoffs times the growth of a long dot product. f32 GEMM with
  // K = 4096 measures ~1e-7 here; the bounds leave head-room without letting a wrong kernel through
  // (a transposed operand or a missed bias gives errors of order 1).
  if (tf32) return 5e-3;  // 10-bit mantissa inputs
  switch (dtype) {
    case DType::kF64: return 1e-12;
    case DType::kF32: return 1e-5;
    case DType::kF16: return 5e-3;
    case DType::kBF16: return 3e-2;
  }
  return 0;
}

}  // namespace strata::reference
