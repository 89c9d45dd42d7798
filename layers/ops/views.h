// The views (Note [Views through the dispatcher]) and contiguous (Note [Contiguous inputs]).
// Part of layers/ops/operators.h (Note [One declaration per operator]): included there, after the
// declaration machinery and in the order the list there gives; not a header to include on its own.
#pragma once

namespace strata::ops {

// ---- Views ----------------------------------------------------------------------------------------------
// Note [Views through the dispatcher]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A view is an operator like any other (schema, binding, dispatch, an Autograd node), whose kernel builds
// a tensor header over the input's Storage (Note [Views share storage] in lib/tensor.h): no data moves,
// so its cost is binding + dispatch + one header, and its library row says so. The kernels are
// lib/views.cpp's, the same function for the CPU and the CUDA key (they read no memory). Kernels that need
// contiguous memory get their inputs through contiguous() (Note [Contiguous inputs]); the GEMM kernels
// read a transposed operand as it is (Note [Transposed GEMM operands], layers/kernels/cpu/gemm.cpp).
// The backward of a view is a view or a copy of the gradient: transpose and permute transpose it back,
// view/reshape/(un)squeeze reshape it, expand sums it down (sum_to), narrow/select/slice write it into
// zeros of the input's shape (slice_backward). Each node saves its input, which costs nothing (the view
// holds the same Storage) and gives the formula the input's sizes (docs/autograd.md).

// The spec of a view op ("transpose 5x7x3"): the tensor typed, the ints or int[] the op takes; a view
// moves no data, so no flops and no elements moved.
inline SpecCall view_spec(const std::vector<int64_t>& d, std::vector<SpecArg> extra, const Shape& out,
                          const std::string& what) {
  SpecCall c;
  const Shape s = spec_text::shape(d);
  c.args = {SpecArg::tensor(s)};
  for (SpecArg& a : extra) c.args.push_back(a);
  c.outputs = {out};
  c.description = spec_text::bracket(s) + " " + what + " -> " + spec_text::bracket(out);
  return c;
}
inline void view_spec_dims(const char* op, const std::vector<int64_t>& d, size_t low, size_t high, std::string_view typed) {
  if (d.size() < low || d.size() > high) {
    throw UsageError(std::string(op) + " takes a shape of " + std::to_string(low) + " to " + std::to_string(high) +
                     " sizes, got '" + std::string(typed) + "'");
  }
}
inline std::string int_list_text(const Shape& s) {
  std::string out = "(";
  for (int i = 0; i < s.ndim; ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + ")";
}

struct Transpose {
  static constexpr const char* kName = "transpose";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "transpose(Tensor self, int dim0, int dim1) -> Tensor";
  using Signature = Tensor(const Tensor& self, int64_t dim0, int64_t dim1);
  static constexpr KernelDecl kCpu{&views::transpose, "lib/views.cpp (view: strides swapped)"};
  static constexpr KernelDecl kCuda{&views::transpose, "lib/views.cpp (view: strides swapped)"};
  static constexpr auto kReference = &reference::transpose;
  static constexpr auto kReferenceBackward = &reference::transpose_backward;
  static constexpr BackwardDecl kBackward{"TransposeBackward", 0b1};
  static GradList backward(const RecordedNode& node, const Tensor& grad);
  static constexpr bool kStridedInputs = true;
  static constexpr const char* kSpecHelp =
      "views (no data moved; docs/views.md):\n"
      "  transpose shape          dims 0 and last swapped                    e.g. transpose 1024x1024\n";
  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions&, std::string_view typed) {
    view_spec_dims("transpose", d, 2, 4, typed);
    const auto last = static_cast<int64_t>(d.size() - 1);
    Shape out = spec_text::shape(d);
    std::swap(out[0], out[static_cast<int>(last)]);
    return view_spec(d, {SpecArg::integer(0), SpecArg::integer(last)}, out, "transpose(0, " + std::to_string(last) + ")");
  }
};
inline constexpr EntryPoint<Transpose> transpose{};  // NOLINT(readability-identifier-naming): called like a function

struct TransposeMatrix {
  static constexpr const char* kName = "t";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "t(Tensor self) -> Tensor";
  using Signature = Tensor(const Tensor& self);
  static constexpr KernelDecl kCpu{&views::t, "lib/views.cpp (view: strides swapped)"};
  static constexpr KernelDecl kCuda{&views::t, "lib/views.cpp (view: strides swapped)"};
  static constexpr auto kReference = &reference::t;
  static constexpr auto kReferenceBackward = &reference::t_backward;
  static constexpr BackwardDecl kBackward{"TBackward", 0b1};
  static GradList backward(const RecordedNode& node, const Tensor& grad);
  static constexpr bool kStridedInputs = true;
  static constexpr const char* kSpecHelp = "  t N | MxN                the matrix transposed ([N,N] for N)         e.g. t 1024\n";
  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions&, std::string_view typed) {
    if (d.size() == 1) d = {d[0], d[0]};
    view_spec_dims("t", d, 2, 2, typed);
    return view_spec(d, {}, Shape{d[1], d[0]}, "t()");
  }
};
inline constexpr EntryPoint<TransposeMatrix> t{};  // NOLINT(readability-identifier-naming): called like a function

struct Permute {
  static constexpr const char* kName = "permute";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "permute(Tensor self, int[] dims) -> Tensor";
  using Signature = Tensor(const Tensor& self, const Shape& dims);
  static constexpr KernelDecl kCpu{&views::permute, "lib/views.cpp (view: strides reordered)"};
  static constexpr KernelDecl kCuda{&views::permute, "lib/views.cpp (view: strides reordered)"};
  static constexpr auto kReference = &reference::permute;
  static constexpr auto kReferenceBackward = &reference::permute_backward;
  static constexpr BackwardDecl kBackward{"PermuteBackward", 0b1};
  static GradList backward(const RecordedNode& node, const Tensor& grad);
  static constexpr bool kStridedInputs = true;
  static constexpr const char* kSpecHelp = "  permute shape            dims reversed                              e.g. permute 32x64x56x56\n";
  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions&, std::string_view typed) {
    view_spec_dims("permute", d, 1, 4, typed);
    Shape dims, out;
    for (size_t i = d.size(); i-- > 0;) {
      dims[dims.ndim++] = static_cast<int64_t>(i);
      out[out.ndim++] = d[i];
    }
    return view_spec(d, {SpecArg::int_list(dims)}, out, "permute" + int_list_text(dims));
  }
};
inline constexpr EntryPoint<Permute> permute{};  // NOLINT(readability-identifier-naming): called like a function

// The spec of view and reshape: the last two sizes merged, given as -1 (inferred).
inline SpecCall merge_spec(const char* op, std::vector<int64_t>& d, std::string_view typed) {
  view_spec_dims(op, d, 1, 4, typed);
  Shape size, out;
  if (d.size() == 1) {
    size = Shape{1, -1};
    out = Shape{1, d[0]};
  } else {
    for (size_t i = 0; i + 2 < d.size(); ++i) size[size.ndim++] = d[i];
    out = size;
    size[size.ndim++] = -1;
    out[out.ndim++] = d[d.size() - 2] * d[d.size() - 1];
  }
  return view_spec(d, {SpecArg::int_list(size)}, out, std::string(op) + int_list_text(size));
}

struct View {
  static constexpr const char* kName = "view";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "view(Tensor self, int[] size) -> Tensor";
  using Signature = Tensor(const Tensor& self, const Shape& size);
  static constexpr KernelDecl kCpu{&views::view, "lib/views.cpp (view: new sizes and strides; refused if a copy is needed)"};
  static constexpr KernelDecl kCuda{&views::view, "lib/views.cpp (view: new sizes and strides; refused if a copy is needed)"};
  static constexpr auto kReference = &reference::view;
  static constexpr auto kReferenceBackward = &reference::reshape_backward;
  static constexpr BackwardDecl kBackward{"ViewBackward", 0b1};
  static GradList backward(const RecordedNode& node, const Tensor& grad);
  static constexpr bool kStridedInputs = true;
  static constexpr const char* kSpecHelp = "  view shape               the last two dims merged (-1)              e.g. view 64x1024x1024\n";
  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions&, std::string_view typed) { return merge_spec("view", d, typed); }
};
inline constexpr EntryPoint<View> view{};  // NOLINT(readability-identifier-naming): called like a function

// reshape's kernel (PyTorch's reshape: a view when the strides allow one, else contiguous() and a view of
// the copy). Defined below the contiguous operator it calls.
inline Tensor reshape_kernel(const Tensor& self, const Shape& shape);

struct Reshape {
  static constexpr const char* kName = "reshape";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "reshape(Tensor self, int[] shape) -> Tensor";
  using Signature = Tensor(const Tensor& self, const Shape& shape);
  static constexpr KernelDecl kCpu{&reshape_kernel, "layers/ops/operators.h (a view, or contiguous() then a view)"};
  static constexpr KernelDecl kCuda{&reshape_kernel, "layers/ops/operators.h (a view, or contiguous() then a view)"};
  static constexpr auto kReference = &reference::reshape;
  static constexpr auto kReferenceBackward = &reference::reshape_backward;
  static constexpr BackwardDecl kBackward{"ReshapeBackward", 0b1};
  static GradList backward(const RecordedNode& node, const Tensor& grad);
  static constexpr bool kStridedInputs = true;
  static constexpr const char* kSpecHelp = "  reshape shape            as view; copies when the strides need it   e.g. reshape 64x1024x1024\n";
  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions&, std::string_view typed) { return merge_spec("reshape", d, typed); }
};
inline constexpr EntryPoint<Reshape> reshape{};  // NOLINT(readability-identifier-naming): called like a function

struct Expand {
  static constexpr const char* kName = "expand";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "expand(Tensor self, int[] size) -> Tensor";
  using Signature = Tensor(const Tensor& self, const Shape& size);
  static constexpr KernelDecl kCpu{&views::expand, "lib/views.cpp (view: stride 0 where broadcast)"};
  static constexpr KernelDecl kCuda{&views::expand, "lib/views.cpp (view: stride 0 where broadcast)"};
  static constexpr auto kReference = &reference::expand;
  static constexpr auto kReferenceBackward = &reference::expand_backward;
  static constexpr BackwardDecl kBackward{"ExpandBackward", 0b1};
  static GradList backward(const RecordedNode& node, const Tensor& grad);
  static constexpr bool kStridedInputs = true;
  static constexpr const char* kSpecHelp = "  expand shape             [1,...] expanded to the shape (last as -1)  e.g. expand 1024x1024\n";
  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions&, std::string_view typed) {
    view_spec_dims("expand", d, 1, 4, typed);
    std::vector<int64_t> in = d;
    in[0] = 1;
    Shape size = spec_text::shape(d);
    if (d.size() > 1) size[size.ndim - 1] = -1;
    return view_spec(in, {SpecArg::int_list(size)}, spec_text::shape(d), "expand" + int_list_text(size));
  }
};
inline constexpr EntryPoint<Expand> expand{};  // NOLINT(readability-identifier-naming): called like a function

struct Narrow {
  static constexpr const char* kName = "narrow";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "narrow(Tensor self, int dim, int start, int length) -> Tensor";
  using Signature = Tensor(const Tensor& self, int64_t dim, int64_t start, int64_t length);
  static constexpr KernelDecl kCpu{&views::narrow, "lib/views.cpp (view: offset and size)"};
  static constexpr KernelDecl kCuda{&views::narrow, "lib/views.cpp (view: offset and size)"};
  static constexpr auto kReference = &reference::narrow;
  static constexpr auto kReferenceBackward = &reference::narrow_backward;
  static constexpr BackwardDecl kBackward{"NarrowBackward", 0b1};
  static GradList backward(const RecordedNode& node, const Tensor& grad);
  static constexpr bool kStridedInputs = true;
  static constexpr const char* kSpecHelp = "  narrow shape             the last dim from 1, two fewer             e.g. narrow 1024x1024\n";
  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions&, std::string_view typed) {
    view_spec_dims("narrow", d, 1, 4, typed);
    if (d.back() < 3) throw UsageError("narrow: the last size must be at least 3, got '" + std::string(typed) + "'");
    const auto last = static_cast<int64_t>(d.size() - 1);
    Shape out = spec_text::shape(d);
    out[static_cast<int>(last)] -= 2;
    return view_spec(d, {SpecArg::integer(last), SpecArg::integer(1), SpecArg::integer(d.back() - 2)}, out,
                     "narrow(" + std::to_string(last) + ", 1, " + std::to_string(d.back() - 2) + ")");
  }
};
inline constexpr EntryPoint<Narrow> narrow{};  // NOLINT(readability-identifier-naming): called like a function

struct Select {
  static constexpr const char* kName = "select";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "select(Tensor self, int dim, int index) -> Tensor";
  using Signature = Tensor(const Tensor& self, int64_t dim, int64_t index);
  static constexpr KernelDecl kCpu{&views::select, "lib/views.cpp (view: offset, one dim fewer)"};
  static constexpr KernelDecl kCuda{&views::select, "lib/views.cpp (view: offset, one dim fewer)"};
  static constexpr auto kReference = &reference::select;
  static constexpr auto kReferenceBackward = &reference::select_backward;
  static constexpr BackwardDecl kBackward{"SelectBackward", 0b1};
  static GradList backward(const RecordedNode& node, const Tensor& grad);
  static constexpr bool kStridedInputs = true;
  static constexpr const char* kSpecHelp = "  select shape             index -1 of the last dim                   e.g. select 1024x1024\n";
  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions&, std::string_view typed) {
    view_spec_dims("select", d, 1, 4, typed);
    const auto last = static_cast<int64_t>(d.size() - 1);
    Shape out;
    for (size_t i = 0; i + 1 < d.size(); ++i) out[out.ndim++] = d[i];
    return view_spec(d, {SpecArg::integer(last), SpecArg::integer(-1)}, out, "select(" + std::to_string(last) + ", -1)");
  }
};
inline constexpr EntryPoint<Select> select{};  // NOLINT(readability-identifier-naming): called like a function

struct Slice {
  static constexpr const char* kName = "slice";
  static constexpr std::string_view kAlias = "";
  // PyTorch's slice.Tensor with its defaults (end: the largest int64, clamped to the size).
  static constexpr const char* kSchema =
      "slice(Tensor self, int dim=0, int start=0, int end=9223372036854775807, int step=1) -> Tensor";
  using Signature = Tensor(const Tensor& self, int64_t dim, int64_t start, int64_t end, int64_t step);
  static constexpr KernelDecl kCpu{&views::slice, "lib/views.cpp (view: offset and stride)"};
  static constexpr KernelDecl kCuda{&views::slice, "lib/views.cpp (view: offset and stride)"};
  static constexpr auto kReference = &reference::slice;
  static constexpr auto kReferenceBackward = &reference::slice_backward_of;
  static constexpr BackwardDecl kBackward{"SliceBackward", 0b1};
  static GradList backward(const RecordedNode& node, const Tensor& grad);
  static constexpr bool kStridedInputs = true;
  static constexpr const char* kSpecHelp = "  slice shape              the last dim [1::2] (every second, from 1)  e.g. slice 1024x1024\n";
  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions&, std::string_view typed) {
    view_spec_dims("slice", d, 1, 4, typed);
    if (d.back() < 2) throw UsageError("slice: the last size must be at least 2, got '" + std::string(typed) + "'");
    const auto last = static_cast<int64_t>(d.size() - 1);
    Shape out = spec_text::shape(d);
    out[static_cast<int>(last)] = d.back() / 2;
    return view_spec(d, {SpecArg::integer(last), SpecArg::integer(1), SpecArg::integer(d.back()), SpecArg::integer(2)},
                     out, "slice(" + std::to_string(last) + ", 1, " + std::to_string(d.back()) + ", 2)");
  }
};
inline constexpr EntryPoint<Slice> slice{};  // NOLINT(readability-identifier-naming): called like a function

struct Unsqueeze {
  static constexpr const char* kName = "unsqueeze";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "unsqueeze(Tensor self, int dim) -> Tensor";
  using Signature = Tensor(const Tensor& self, int64_t dim);
  static constexpr KernelDecl kCpu{&views::unsqueeze, "lib/views.cpp (view: a dim of size 1 added)"};
  static constexpr KernelDecl kCuda{&views::unsqueeze, "lib/views.cpp (view: a dim of size 1 added)"};
  static constexpr auto kReference = &reference::unsqueeze;
  static constexpr auto kReferenceBackward = &reference::squeeze_backward;
  static constexpr BackwardDecl kBackward{"UnsqueezeBackward", 0b1};
  static GradList backward(const RecordedNode& node, const Tensor& grad);
  static constexpr bool kStridedInputs = true;
  static constexpr const char* kSpecHelp = "  unsqueeze shape          a dim of size 1 at 1 (at most 3 sizes)     e.g. unsqueeze 1024x1024\n";
  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions&, std::string_view typed) {
    view_spec_dims("unsqueeze", d, 1, 3, typed);
    std::vector<int64_t> out = d;
    out.insert(out.begin() + 1, 1);
    return view_spec(d, {SpecArg::integer(1)}, spec_text::shape(out), "unsqueeze(1)");
  }
};
inline constexpr EntryPoint<Unsqueeze> unsqueeze{};  // NOLINT(readability-identifier-naming): called like a function

struct Squeeze {
  static constexpr const char* kName = "squeeze";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "squeeze(Tensor self, int dim) -> Tensor";
  using Signature = Tensor(const Tensor& self, int64_t dim);
  static constexpr KernelDecl kCpu{&views::squeeze, "lib/views.cpp (view: a dim of size 1 removed)"};
  static constexpr KernelDecl kCuda{&views::squeeze, "lib/views.cpp (view: a dim of size 1 removed)"};
  static constexpr auto kReference = &reference::squeeze;
  static constexpr auto kReferenceBackward = &reference::squeeze_backward;
  static constexpr BackwardDecl kBackward{"SqueezeBackward", 0b1};
  static GradList backward(const RecordedNode& node, const Tensor& grad);
  static constexpr bool kStridedInputs = true;
  static constexpr const char* kSpecHelp = "  squeeze shape            [a,1,b...] squeezed at 1 (at most 3 sizes)  e.g. squeeze 1024x1024\n";
  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions&, std::string_view typed) {
    view_spec_dims("squeeze", d, 1, 3, typed);
    std::vector<int64_t> in = d;
    in.insert(in.begin() + 1, 1);
    return view_spec(in, {SpecArg::integer(1)}, spec_text::shape(d), "squeeze(1)");
  }
};
inline constexpr EntryPoint<Squeeze> squeeze{};  // NOLINT(readability-identifier-naming): called like a function

// contiguous(): the tensor itself when it is contiguous (nothing allocated, no data moved), else a copy
// in row-major order: the copy views need before kernels that read memory as it lies (Note [Contiguous
// inputs]), and what reshape calls when a view cannot express the new shape.
struct Contiguous {
  static constexpr const char* kName = "contiguous";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "contiguous(Tensor self) -> Tensor";
  using Signature = Tensor(const Tensor& self);
  static constexpr KernelDecl kCpu{&kernels::cpu::contiguous, "layers/kernels/cpu/copy.cpp (strided copy loop)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::contiguous, "layers/kernels/cuda/pointwise.cu (strata's own strided copy)"};
  static constexpr auto kReference = &reference::contiguous;
  static constexpr auto kReferenceBackward = &reference::contiguous_backward;
  static constexpr BackwardDecl kBackward{"ContiguousBackward", 0};
  static GradList backward(const RecordedNode& node, const Tensor& grad);
  static constexpr bool kStridedInputs = true;
  static constexpr const char* kSpecHelp = "  contiguous N | shape     the tensor itself: the spec's input is contiguous (copies: docs/views.md)\n";
  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    SpecCall c = pointwise_spec(d, 1, "");
    c.flops = 0;
    c.elements_moved = 0;  // a contiguous input: nothing is copied
    return c;
  }
};
inline constexpr EntryPoint<Contiguous> contiguous{};  // NOLINT(readability-identifier-naming): called like a function

// Note [Contiguous inputs]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// A backend kernel that reads memory as it lies (the pointwise loops, im2col, reductions) gets a
// non-contiguous input through contiguous() first, instead of refusing it: its registered kernel is
// wrapped (layers/ops/register_kernels.h) so that such an input is copied by a call of the contiguous
// operator, a real call with its own dispatch and library rows ("contiguous:CPU", Note [Calls made by a
// wrapper kernel]), as PyTorch's kernels call .contiguous(). The call is made below the Autograd key: the
// outer op already recorded its node on the view, so the copy records none. A contiguous input costs one
// check per tensor and no call.
inline Tensor contiguous_for_kernel(const Tensor& t) {
  if (!t.defined() || t.is_contiguous()) return t;
  const ExcludeKeyGuard below_autograd(DispatchKey::kAutograd);
  const InnerCallGuard inner;
  return ops::contiguous(t);
}

inline Tensor reshape_kernel(const Tensor& self, const Shape& shape) {
  const Shape sizes = views::infer_size("reshape", shape, self);
  if (views::view_strides(self, sizes)) return views::view(self, sizes);
  return views::view(contiguous_for_kernel(self), sizes);
}

}  // namespace strata::ops
