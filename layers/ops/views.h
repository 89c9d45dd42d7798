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
// zeros of the input's shape (slice_backward). A node saves no tensor: the formula needs only the input's
// sizes, which every node keeps (RecordedNode::input_sizes), as torch's view nodes keep self_sym_sizes. A
// saved input would carry its version (Note [Saved tensors and versions]), and an in-place write into the
// base after the view, which changes none of the sizes the formula reads, would fail backward for nothing:
// b = L * 1; b[2].add_(b[0]); b.sum().backward().

struct Transpose {
  static constexpr const char* kName = "transpose";
  static constexpr const char* kTorchName = "torch.transpose";  // the --peer torch counterpart
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "transpose(Tensor self, int dim0, int dim1) -> Tensor";
  using Signature = Tensor(const Tensor& self, int64_t dim0, int64_t dim1);
  static constexpr KernelDecl kCpu{&views::transpose, "lib/views.cpp (view: strides swapped)"};
  static constexpr KernelDecl kCuda{&views::transpose, "lib/views.cpp (view: strides swapped)"};
  static constexpr auto kReference = &reference::transpose;
  static constexpr auto kReferenceBackward = &reference::transpose_backward;
  static constexpr BackwardDecl kBackward{"TransposeBackward", 0};
  static GradList backward(const RecordedNode& node, const Tensor& grad);
  static constexpr bool kStridedInputs = true;
};
inline constexpr EntryPoint<Transpose> transpose{};  // NOLINT(readability-identifier-naming): called like a function

struct TransposeMatrix {
  static constexpr const char* kName = "t";
  static constexpr const char* kTorchName = "torch.t";  // the --peer torch counterpart
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "t(Tensor self) -> Tensor";
  using Signature = Tensor(const Tensor& self);
  static constexpr KernelDecl kCpu{&views::t, "lib/views.cpp (view: strides swapped)"};
  static constexpr KernelDecl kCuda{&views::t, "lib/views.cpp (view: strides swapped)"};
  static constexpr auto kReference = &reference::t;
  static constexpr auto kReferenceBackward = &reference::t_backward;
  static constexpr BackwardDecl kBackward{"TBackward", 0};
  static GradList backward(const RecordedNode& node, const Tensor& grad);
  static constexpr bool kStridedInputs = true;
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
  static constexpr BackwardDecl kBackward{"PermuteBackward", 0};
  static GradList backward(const RecordedNode& node, const Tensor& grad);
  static constexpr bool kStridedInputs = true;
};
inline constexpr EntryPoint<Permute> permute{};  // NOLINT(readability-identifier-naming): called like a function

struct View {
  static constexpr const char* kName = "view";
  static constexpr const char* kTorchName = "torch.Tensor.view";  // the --peer torch counterpart
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "view(Tensor self, int[] size) -> Tensor";
  using Signature = Tensor(const Tensor& self, const Shape& size);
  static constexpr KernelDecl kCpu{&views::view, "lib/views.cpp (view: new sizes and strides; refused if a copy is needed)"};
  static constexpr KernelDecl kCuda{&views::view, "lib/views.cpp (view: new sizes and strides; refused if a copy is needed)"};
  static constexpr auto kReference = &reference::view;
  static constexpr auto kReferenceBackward = &reference::reshape_backward;
  static constexpr BackwardDecl kBackward{"ViewBackward", 0};
  static GradList backward(const RecordedNode& node, const Tensor& grad);
  static constexpr bool kStridedInputs = true;
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
  static constexpr BackwardDecl kBackward{"ReshapeBackward", 0};
  static GradList backward(const RecordedNode& node, const Tensor& grad);
  static constexpr bool kStridedInputs = true;
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
  static constexpr BackwardDecl kBackward{"ExpandBackward", 0};
  static GradList backward(const RecordedNode& node, const Tensor& grad);
  static constexpr bool kStridedInputs = true;
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
  static constexpr BackwardDecl kBackward{"NarrowBackward", 0};
  static GradList backward(const RecordedNode& node, const Tensor& grad);
  static constexpr bool kStridedInputs = true;
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
  static constexpr BackwardDecl kBackward{"SelectBackward", 0};
  static GradList backward(const RecordedNode& node, const Tensor& grad);
  static constexpr bool kStridedInputs = true;
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
  static constexpr BackwardDecl kBackward{"SliceBackward", 0};
  static GradList backward(const RecordedNode& node, const Tensor& grad);
  static constexpr bool kStridedInputs = true;
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
  static constexpr BackwardDecl kBackward{"UnsqueezeBackward", 0};
  static GradList backward(const RecordedNode& node, const Tensor& grad);
  static constexpr bool kStridedInputs = true;
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
  static constexpr BackwardDecl kBackward{"SqueezeBackward", 0};
  static GradList backward(const RecordedNode& node, const Tensor& grad);
  static constexpr bool kStridedInputs = true;
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
