// Note [One declaration per operator]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Every operator strata knows is one struct, in its family's header (gemm.h, conv.h, pointwise.h, views.h,
// gradients.h, reductions.h, copy.h, inplace.h, normalization.h: parts of this file), and the list below names them all:
// the analogue of PyTorch's native_functions.yaml (plus the node name derivatives.yaml gives). A
// declaration says
//   kName, kAlias     the operator's name (binding, dispatcher, reports) and another the CLI accepts
//   kSchema           the public contract, parsed by the binding layer; its argument types must match
//   kTorchName        (optional) PyTorch's function for it, what --peer torch calls (python_embed.cpp)
//   Signature         the C++ arguments of every kernel, in schema order
//   kCpu, kCuda       the backend kernels and where they live (`strata ops` prints it); NoKernel: none
//   kReference        the float64 reference every kernel is checked against (--check and the tests)
//   kBackward         the node the Autograd key records and what it saves
//   backward          the node's formula, for a differentiable op: gradients through other operators
//   kReferenceBackward its float64 gradients (the tests and --backward --check)
//   kAutocast         what the Autocast key does for the op (layers/dispatch/autocast.h); an op without
//                     one falls through: the key is skipped for it
// The CLI's spec of an op ("matmul 1024": its help line, the call it builds, the figures the report needs)
// is not part of the op's contract: it lives beside the frontend (Note [An op's spec beside the frontend]
// in layers/frontend/specs/spec_format.h), and a functor op needs none of its own.
// Code that needs a list of operators reads AllOps: the dispatcher's tables and registration
// (register_kernels*.cpp), the binding layer's typed calls, the frontend's spec parser, `strata ops`.
// Kernel bodies stay in their layers (layers/kernels/{cpu,cuda,reference}); the shape rules in
// lib/op_shapes.h, because kernels check their arguments with them too. docs/adding-an-op.md walks through
// adding one.
#pragma once

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

#include "layers/dispatch/autocast.h"
#include "layers/dispatch/autograd.h"  // BackwardDecl, GradList, RecordedNode
#include "layers/dispatch/dispatch.h"
#include "layers/kernels/cpu/cpu_kernels.h"
#include "layers/kernels/cuda/cuda_kernels.h"  // declarations only: a build without CUDA never uses kCuda
#include "layers/kernels/reference/reference.h"
#include "lib/error.h"
#include "lib/op_shapes.h"
#include "lib/tensor.h"
#include "lib/views.h"

namespace strata::ops {

// A backend kernel and where it lives, for `strata ops` (c10 keeps such debug text beside the table).
template <typename Fn>
struct KernelDecl {
  Fn* fn;
  const char* where;
};
template <typename Fn>
KernelDecl(Fn*, const char*) -> KernelDecl<Fn>;
// What a declaration says for a backend that has no kernel for the op. Absence is a type, not a null
// pointer, so that it is known at compile time everywhere (GCC's UBSan build refuses a function
// pointer compared with nullptr in a constant expression, and the executable must not refer to CUDA
// kernels that live in libstrata_cuda.so).
struct NoKernel {
  const char* where = "none";
};
template <typename Decl>
inline constexpr bool kHasKernel = !std::is_same_v<std::remove_cv_t<Decl>, NoKernel>;

// The table's kernel type of an operator (its Signature with the key set first).
template <typename Op>
using KernelFn = typename KernelFnOf<typename Op::Signature>::type;

// An operator's position in AllOps: its entry in the dispatcher. Defined below the list.
template <typename Op>
constexpr size_t op_index();

// An operator's entry point, what the binding layer (and C++ callers) call: ops::matmul(a, b). It opens
// the zone that the first key's row owns (computing the key set is dispatch work) and dispatches.
template <typename Op, typename Signature = typename Op::Signature>
struct EntryPoint;
template <typename Op, typename... Args>
struct EntryPoint<Op, Tensor(Args...)> {
  Tensor operator()(Args... args) const {
    STRATA_ZONE(zone, Layer::kDispatch, "keys");
    return Dispatcher::instance().call<KernelFn<Op>>(zone, op_index<Op>(), compute_dispatch_key_set(args...),
                                                     args...);
  }
};


// Every operator, in the order `strata ops` lists them (defined below): declared here so that a family
// header can name the list of the ops it adds (PointwiseFunctorOps).
template <typename... Ops>
struct OpList;

// The declarations, by family (each header is part of this one; the order is the one they need).
}  // namespace strata::ops

#include "layers/ops/gemm.h"  // IWYU pragma: export
#include "layers/ops/conv.h"  // IWYU pragma: export
#include "layers/ops/pointwise.h"  // IWYU pragma: export
#include "layers/ops/views.h"  // IWYU pragma: export
#include "layers/ops/gradients.h"  // IWYU pragma: export
#include "layers/ops/reductions.h"  // IWYU pragma: export
#include "layers/ops/copy.h"  // IWYU pragma: export
#include "layers/ops/inplace.h"  // IWYU pragma: export
#include "layers/ops/normalization.h"  // IWYU pragma: export

namespace strata::ops {

// Whether an op writes its first argument in place (Note [In-place operators]).
template <typename Op>
inline constexpr bool kInPlace = requires { Op::kInPlace; };
// Whether an op names its PyTorch counterpart (kTorchName), the function --peer torch calls.
template <typename Op>
inline constexpr bool kHasTorchName = requires { Op::kTorchName; };

// Whether an op declares an autocast policy; the Autocast key falls through for the others.
template <typename Op>
inline constexpr bool kHasAutocastPolicy = requires { Op::kAutocast; };

// Every operator, in the order `strata ops` lists them; an op's index here is its id in the dispatcher.
template <typename... Ops>
struct OpList {
  static constexpr size_t kSize = sizeof...(Ops);
  // f(Op{}) for each op, in order.
  template <typename F>
  static void for_each(F&& f) {
    (f(Ops{}), ...);
  }
  // f(Op{}) for the op at `index` (< kSize); returns what f returns.
  template <typename F>
  static decltype(auto) visit(size_t index, F&& f) {
    using R = std::invoke_result_t<F, std::tuple_element_t<0, std::tuple<Ops...>>>;
    if constexpr (std::is_void_v<R>) {
      size_t i = 0;
      static_cast<void>(((i++ == index ? (f(Ops{}), true) : false) || ...));  // the fold stops at the op
    } else {
      R result{};
      size_t i = 0;
      static_cast<void>(((i++ == index ? (result = f(Ops{}), true) : false) || ...));
      return result;
    }
  }
  template <typename Op>
  static constexpr size_t index_of() {
    size_t i = 0, found = kSize;
    ((std::is_same_v<Op, Ops> ? (found = i, ++i) : ++i), ...);
    return found;
  }
};

// Lists joined in order: AllOps is the ops declared before the family lists, then each family's list of
// the ops added since (a new op goes in its family's list, in its family's header, and nowhere else).
template <typename... Lists>
struct JoinedLists;
template <typename... Ops>
struct JoinedLists<OpList<Ops...>> {
  using type = OpList<Ops...>;
};
template <typename... First, typename... Second, typename... Rest>
struct JoinedLists<OpList<First...>, OpList<Second...>, Rest...> {
  using type = typename JoinedLists<OpList<First..., Second...>, Rest...>::type;
};

using CoreOps = OpList<Matmul, Linear, Conv2d, Relu, Add, Gelu, ToCopy, Mul, MulScalar, AddScalar, Sub, SubScalar, Tanh,
                      Pow, Gemm, Sum, OnesLike, ExpandAs, ThresholdBackward, GeluBackward, TanhBackward, BiasBackward,
                      Conv2dInputBackward, Conv2dWeightBackward, Transpose, TransposeMatrix, Permute, View,
                      Reshape, Expand, Narrow, Select, Slice, Unsqueeze, Squeeze, Contiguous, SliceBackward, SumTo,
                      ReluInPlace, AddInPlace, MulInPlace, MulScalarInPlace, SumDim, MeanDim, Mean, Div, DivScalar,
                      AsStridedScatter>;
using AllOps = JoinedLists<CoreOps, PointwiseFunctorOps, InPlaceArithmeticOps, NormalizationOps>::type;

template <typename Op>
constexpr size_t op_index() {
  constexpr size_t kIndex = AllOps::index_of<Op>();
  static_assert(kIndex < AllOps::kSize, "not an operator in AllOps");
  return kIndex;
}

// ---- Backward formulas --------------------------------------------------------------------------------
// One per differentiable op, declared in its struct; here because they call operators declared after it.
// Each returns the gradient of every argument whose needs_grad is true, by argument position, and calls
// only operators (dispatcher calls): see Note [The autograd graph].

// A tensor of `sizes` for a gradient op's argument that gives only a shape (sum_to's, expand_as's and
// slice_backward's `self`): zero strides over the gradient's first element, in its dtype and on its
// device, so nothing is allocated and the forward's input is not kept alive (Note [Broadcast gradients]).
inline Tensor shape_header(const Tensor& grad, const Shape& sizes) {
  Shape zeros;
  zeros.ndim = sizes.ndim;
  return grad.as_strided(sizes, zeros, grad.storage_offset());
}

// A gradient of `shape`'s broadcast (the batch dims matmul broadcast) summed back to `shape`, as sum_to
// does for the broadcasting ops (Note [Broadcast gradients] below).
inline Tensor summed_to(const Tensor& g, const Shape& shape) {
  if (g.sizes() == shape) return g;
  return ops::sum_to(g, shape_header(g, shape));
}

// Note [matmul's gradient]
// 2-D: grad @ other^T and self^T @ grad, two gemm calls (MmBackward). Otherwise as torch.matmul's
// composite backward: a 1-D self is the row [1,K] and a 1-D other the column [K,1] (reshape calls), the
// gradient gets the removed dims back ([..., M, N]), the same two products become batched matmul calls
// over the transposed operands (transpose views), each summed over the batch dims its operand was
// broadcast along (sum_to) and reshaped to the operand's own shape.
inline GradList Matmul::backward(const RecordedNode& node, const Tensor& grad) {
  GradList g;
  const Tensor& self = node.input(0);
  const Tensor& other = node.input(1);
  if (self.dim() == 2 && other.dim() == 2) {
    if (node.needs_grad(0)) g[0] = ops::gemm(grad, other, 0, 1);  // [M,N] @ [K,N]^T
    if (node.needs_grad(1)) g[1] = ops::gemm(self, grad, 1, 0);   // [M,K]^T @ [M,N]
    return g;
  }
  const op_shapes::MatmulGeometry geo = op_shapes::matmul_geometry(self.sizes(), other.sizes());
  const Shape self2 = self.dim() == 1 ? Shape{1, geo.k} : self.sizes();
  const Shape other2 = other.dim() == 1 ? Shape{geo.k, 1} : other.sizes();
  Shape out2 = geo.batch;
  out2[out2.ndim++] = geo.m;
  out2[out2.ndim++] = geo.n;
  const Tensor grad2 = grad.sizes() == out2 ? grad : ops::reshape(grad, out2);
  if (node.needs_grad(0)) {
    const Tensor b = other.dim() == 1 ? ops::reshape(other, other2) : other;
    const Tensor ga = summed_to(ops::matmul(grad2, ops::transpose(b, b.dim() - 2, b.dim() - 1)), self2);
    g[0] = self.dim() == 1 ? ops::reshape(ga, self.sizes()) : ga;
  }
  if (node.needs_grad(1)) {
    const Tensor a = self.dim() == 1 ? ops::reshape(self, self2) : self;
    const Tensor gb = summed_to(ops::matmul(ops::transpose(a, a.dim() - 2, a.dim() - 1), grad2), other2);
    g[1] = other.dim() == 1 ? ops::reshape(gb, other.sizes()) : gb;
  }
  return g;
}

inline GradList Linear::backward(const RecordedNode& node, const Tensor& grad) {
  GradList g;
  const Tensor& input = node.input(0);
  if (input.dim() != 2) {  // input [..., IN] as rows [R, IN], grad [..., OUT] as [R, OUT]
    const int64_t rows = op_shapes::linear_rows(input.sizes());
    const Shape rows_in{rows, input.size(input.dim() - 1)}, rows_out{rows, grad.size(grad.dim() - 1)};
    const Tensor grad2 = ops::reshape(grad, rows_out);
    if (node.needs_grad(0)) g[0] = ops::reshape(ops::gemm(grad2, node.input(1), 0, 0), input.sizes());
    if (node.needs_grad(1)) g[1] = ops::gemm(grad2, ops::reshape(input, rows_in), 1, 0);
    if (node.needs_grad(2)) g[2] = ops::bias_backward(grad2);
    return g;
  }
  if (node.needs_grad(0)) g[0] = ops::gemm(grad, node.input(1), 0, 0);  // [B,OUT] @ [OUT,IN]
  if (node.needs_grad(1)) g[1] = ops::gemm(grad, node.input(0), 1, 0);  // [B,OUT]^T @ [B,IN]
  if (node.needs_grad(2)) g[2] = ops::bias_backward(grad);              // sum over the batch
  return g;
}

inline GradList Conv2d::backward(const RecordedNode& node, const Tensor& grad) {
  GradList g;
  const Shape &stride = node.int_list(3), &padding = node.int_list(4), &dilation = node.int_list(5);
  const auto groups = static_cast<int64_t>(node.scalar(6));
  if (node.needs_grad(0))
    g[0] = ops::conv2d_input_backward(grad, node.input(0), node.input(1), stride, padding, dilation, groups);
  if (node.needs_grad(1))
    g[1] = ops::conv2d_weight_backward(grad, node.input(0), node.input(1), stride, padding, dilation, groups);
  if (node.needs_grad(2)) g[2] = ops::bias_backward(grad);
  return g;
}

inline GradList Relu::backward(const RecordedNode& node, const Tensor& grad) {
  GradList g;
  g[0] = ops::threshold_backward(grad, node.result(), 0.0);  // the result is positive exactly where x is
  return g;
}

// Note [Broadcast gradients]
// An operand that was broadcast (docs/broadcasting.md) read each of its elements for several outputs, so
// its gradient is the output's gradient summed over the broadcast dims: sum_to, a dispatcher call with its
// own row, as PyTorch's formulas call at::sum_to(grad, self_sym_sizes). sum_to's `self` argument gives only
// the shape, so it is a header of that shape with zero strides over the gradient's first element (nothing
// allocated, the operand itself not kept alive); an operand of the output's shape takes the gradient as is.
//
// A promoted operand (Note [Type promotion] in lib/op_shapes.h: an f32 added to an f64) gets its gradient
// in the output's dtype; it is cast back to the operand's with a to_copy call, as PyTorch's engine casts a
// gradient to its input's dtype (validate_outputs), so a leaf's .grad has the leaf's dtype.
inline Tensor gradient_of_operand(const RecordedNode& node, size_t i, const Tensor& grad) {
  const Shape& operand = node.input_sizes(i);
  Tensor g = grad;
  if (!(g.sizes() == operand)) g = ops::sum_to(g, shape_header(g, operand));
  return g.dtype() == node.input_dtype(i) ? g : ops::to_copy(g, node.input_dtype(i));
}

inline GradList Add::backward(const RecordedNode& node, const Tensor& grad) {
  GradList g;
  const double alpha = node.scalar(2);
  if (node.needs_grad(0)) g[0] = gradient_of_operand(node, 0, grad);
  // alpha * grad with one multiply per element (PyTorch: grad * alpha). Not grad + (alpha - 1) * grad,
  // which cancels: alpha = 1e-8 gave exactly 0 in f32.
  if (node.needs_grad(1)) g[1] = gradient_of_operand(node, 1, alpha == 1.0 ? grad : ops::mul(grad, alpha));
  return g;
}

inline GradList Gelu::backward(const RecordedNode& node, const Tensor& grad) {
  GradList g;
  g[0] = ops::gelu_backward(grad, node.input(0));
  return g;
}

inline GradList Mul::backward(const RecordedNode& node, const Tensor& grad) {
  GradList g;
  if (node.needs_grad(0)) g[0] = gradient_of_operand(node, 0, ops::mul(grad, node.input(1)));
  if (node.needs_grad(1)) g[1] = gradient_of_operand(node, 1, ops::mul(grad, node.input(0)));
  return g;
}

inline GradList MulScalar::backward(const RecordedNode& node, const Tensor& grad) {
  GradList g;
  g[0] = ops::mul(grad, node.scalar(1));
  return g;
}

// PyTorch's div_tensor_self_backward (grad / other) and div_tensor_other_backward
// (-grad * ((self / other) / other)), each summed to its operand's shape and cast to its dtype.
inline GradList Div::backward(const RecordedNode& node, const Tensor& grad) {
  GradList g;
  if (node.needs_grad(0)) g[0] = gradient_of_operand(node, 0, ops::div(grad, node.input(1)));
  if (node.needs_grad(1)) {
    const Tensor quotient = ops::div(ops::div(node.input(0), node.input(1)), node.input(1));
    g[1] = gradient_of_operand(node, 1, ops::mul(ops::mul(grad, -1.0), quotient));
  }
  return g;
}

inline GradList DivScalar::backward(const RecordedNode& node, const Tensor& grad) {
  GradList g;
  g[0] = ops::div(grad, node.scalar(1));  // PyTorch: grad / other
  return g;
}

inline GradList AddScalar::backward(const RecordedNode&, const Tensor& grad) {
  GradList g;
  g[0] = grad;
  return g;
}

inline GradList Sub::backward(const RecordedNode& node, const Tensor& grad) {
  GradList g;
  if (node.needs_grad(0)) g[0] = gradient_of_operand(node, 0, grad);
  // PyTorch: -grad * alpha, the same value
  if (node.needs_grad(1)) g[1] = gradient_of_operand(node, 1, ops::mul(grad, -node.scalar(2)));
  return g;
}

inline GradList SubScalar::backward(const RecordedNode&, const Tensor& grad) {
  GradList g;
  g[0] = grad;
  return g;
}

inline GradList Tanh::backward(const RecordedNode& node, const Tensor& grad) {
  GradList g;
  g[0] = ops::tanh_backward(grad, node.result());
  return g;
}

// PyTorch's pow_backward: grad * (exponent * x^(exponent - 1)), and zeros for exponent 0 (where x^-1 * 0
// would put NaN at x = 0, and grad * 0 NaN where grad is inf).
inline GradList Pow::backward(const RecordedNode& node, const Tensor& grad) {
  GradList g;
  const double exponent = node.scalar(1);
  if (exponent == 0.0) {
    g[0] = ops::mul(ops::ones_like(node.input(0)), 0.0);
  } else {
    g[0] = ops::mul(grad, ops::mul(ops::pow(node.input(0), exponent - 1), exponent));
  }
  return g;
}

inline GradList ToCopy::backward(const RecordedNode& node, const Tensor& grad) {
  GradList g;
  g[0] = ops::to_copy(grad, node.input(0).dtype());
  return g;
}

inline GradList Sum::backward(const RecordedNode& node, const Tensor& grad) {
  GradList g;
  g[0] = ops::expand_as(grad, shape_header(grad, node.input_sizes(0)));
  return g;
}

inline GradList Transpose::backward(const RecordedNode& node, const Tensor& grad) {
  GradList g;
  g[0] = ops::transpose(grad, static_cast<int64_t>(node.scalar(1)), static_cast<int64_t>(node.scalar(2)));
  return g;
}

inline GradList TransposeMatrix::backward(const RecordedNode&, const Tensor& grad) {
  GradList g;
  g[0] = ops::t(grad);
  return g;
}

inline GradList Permute::backward(const RecordedNode& node, const Tensor& grad) {
  const Shape& dims = node.int_list();
  Shape inverse;
  inverse.ndim = dims.ndim;
  for (int i = 0; i < dims.ndim; ++i) inverse[static_cast<int>(dims[i] < 0 ? dims[i] + dims.ndim : dims[i])] = i;
  GradList g;
  g[0] = ops::permute(grad, inverse);
  return g;
}

// view, reshape, unsqueeze and squeeze keep the elements' order: the gradient is reshaped back (a view of
// it when its strides allow, as PyTorch's ViewBackward).
inline GradList reshape_back(const RecordedNode& node, const Tensor& grad) {
  GradList g;
  g[0] = ops::reshape(grad, node.input_sizes(0));
  return g;
}
inline GradList View::backward(const RecordedNode& node, const Tensor& grad) { return reshape_back(node, grad); }
inline GradList Reshape::backward(const RecordedNode& node, const Tensor& grad) { return reshape_back(node, grad); }
inline GradList Unsqueeze::backward(const RecordedNode& node, const Tensor& grad) { return reshape_back(node, grad); }
inline GradList Squeeze::backward(const RecordedNode& node, const Tensor& grad) { return reshape_back(node, grad); }

inline GradList Expand::backward(const RecordedNode& node, const Tensor& grad) {
  GradList g;
  g[0] = ops::sum_to(grad, shape_header(grad, node.input_sizes(0)));
  return g;
}

inline GradList Narrow::backward(const RecordedNode& node, const Tensor& grad) {
  const Tensor self = shape_header(grad, node.input_sizes(0));  // only its sizes are read
  const int64_t dim = views::wrap_dim("narrow", static_cast<int64_t>(node.scalar(1)), self.dim(), self);
  const auto start = static_cast<int64_t>(node.scalar(2));
  GradList g;
  g[0] = ops::slice_backward(grad, self, dim, start < 0 ? start + self.size(static_cast<int>(dim)) : start, 1);
  return g;
}

inline GradList Select::backward(const RecordedNode& node, const Tensor& grad) {
  const Tensor self = shape_header(grad, node.input_sizes(0));  // only its sizes are read
  const int64_t dim = views::wrap_dim("select", static_cast<int64_t>(node.scalar(1)), self.dim(), self);
  const auto index = static_cast<int64_t>(node.scalar(2));
  GradList g;
  g[0] = ops::slice_backward(ops::unsqueeze(grad, dim), self, dim,
                             index < 0 ? index + self.size(static_cast<int>(dim)) : index, 1);
  return g;
}

inline GradList Slice::backward(const RecordedNode& node, const Tensor& grad) {
  const Tensor self = shape_header(grad, node.input_sizes(0));  // only its sizes are read
  const int64_t dim = views::wrap_dim("slice", static_cast<int64_t>(node.scalar(1)), self.dim(), self);
  // The start the forward used: clamped into [0, size] as Python's slices are. Saved as a double, exact
  // for every start that can be inside a tensor (below 2^53).
  // Past 2^53 the double is not the int, and past 2^63 casting it back is undefined: such a start is past
  // the end (any size is below 2^63), and a step past the size took one element, where any step reads
  // the same (x[1::2**62]).
  const int64_t n = self.size(static_cast<int>(dim));
  const double start_saved = node.scalar(2), step_saved = node.scalar(4);
  const int64_t start = start_saved >= 0x1p62 ? n : start_saved <= -0x1p62 ? -n : static_cast<int64_t>(start_saved);
  const int64_t first = start < 0 ? std::max<int64_t>(start + n, 0) : std::min(start, n);
  const int64_t step = grad.size(static_cast<int>(dim)) <= 1 ? 1 : static_cast<int64_t>(step_saved);
  GradList g;
  g[0] = ops::slice_backward(grad, self, dim, first, step);
  return g;
}

inline GradList Contiguous::backward(const RecordedNode&, const Tensor& grad) {
  GradList g;
  g[0] = grad;
  return g;
}

// Note [Reductions over dims]: the gradient reshaped to the keepdim shape, expanded over the reduced dims
// (a view), then materialised (sum: contiguous) or divided by the count (mean: mul.Scalar), and cast back
// to the input's dtype when dtype= changed it.
inline Tensor reduction_gradient(const RecordedNode& node, const Tensor& grad, const Shape& dim, bool keepdim,
                                 bool mean) {
  const Shape& in = node.input_sizes(0);
  const op_shapes::Reduction r = op_shapes::reduce_dims(node.op(), in, dim, keepdim);
  Tensor g = grad.sizes() == r.kept ? grad : ops::reshape(grad, r.kept);
  if (!(g.sizes() == in)) g = ops::expand(g, in);
  g = mean ? ops::mul(g, 1.0 / double(r.count)) : ops::contiguous(g);
  return g.dtype() == node.input_dtype(0) ? g : ops::to_copy(g, node.input_dtype(0));
}

inline GradList SumDim::backward(const RecordedNode& node, const Tensor& grad) {
  GradList g;
  g[0] = reduction_gradient(node, grad, node.int_list(), node.scalar(2) != 0.0, false);
  return g;
}

inline GradList MeanDim::backward(const RecordedNode& node, const Tensor& grad) {
  GradList g;
  g[0] = reduction_gradient(node, grad, node.int_list(), node.scalar(2) != 0.0, true);
  return g;
}

inline GradList Mean::backward(const RecordedNode& node, const Tensor& grad) {
  GradList g;
  g[0] = reduction_gradient(node, grad, Shape{}, false, true);
  return g;
}

// An op's backward formula, or null for the gradient ops (which have none).
template <typename Op>
constexpr BackwardFormula backward_formula() {
  if constexpr (requires { &Op::backward; }) {
    return &Op::backward;
  } else {
    return nullptr;
  }
}

// Typed access to an operator's entry in the dispatcher, and registration of a kernel that lasts as long
// as the returned handle (tests, temporary wrappers).
template <typename Op>
const OperatorEntry& entry() {
  return Dispatcher::instance().entry(op_index<Op>());
}
template <typename Op>
RegistrationHandle register_kernel(DispatchKey key, KernelFn<Op>* fn, std::string where) {
  return Dispatcher::instance().entry(op_index<Op>()).register_kernel(key, reinterpret_cast<void*>(fn),
                                                                      std::move(where));
}
// For wrapper kernels: the next key's kernel, with the caller's own key already removed from ks.
template <typename Op, typename... Args>
Tensor redispatch(DispatchKeySet ks, const Args&... args) {
  return Dispatcher::instance().redispatch<KernelFn<Op>>(op_index<Op>(), ks, args...);
}

}  // namespace strata::ops
