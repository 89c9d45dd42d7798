// The in-place operators (Note [In-place operators]): relu_, add_, mul_, mul_.Scalar, and the ones Python's
// x += c, x -= y, x /= y call: add_.Scalar, sub_, sub_.Scalar, div_, div_.Scalar.
// Part of layers/ops/operators.h (Note [One declaration per operator]): included there, after the
// declaration machinery and in the order the list there gives; not a header to include on its own.
#pragma once

namespace strata::ops {

// ---- In-place ops ------------------------------------------------------------------------------------
// Note [In-place operators]
// relu_, add_, mul_ and mul_.Scalar write self and return it (schema `Tensor(a!) self ... -> Tensor(a!)`, PyTorch's
// alias annotation: the binding layer reads the '!'). kInPlace makes the registration
//   - on the CPU and CUDA keys: cast `other` to self's dtype and make it contiguous (to_copy / contiguous calls of
//     their own), pass self as it is (its kernel writes through its strides), then bump self's storage's
//     version (Note [Version counter] in lib/storage.h), so it is bumped under no_grad too;
//   - on the Autograd key: refuse a leaf that requires grad (PyTorch's own error), record the out-of-place
//     op's node (ReluBackward, AddBackward, MulBackward) and rebase self's history onto it, as PyTorch
//     does: its edge 0 is self's old grad_fn, and every handle of self sees the new one (Note [Autograd
//     identity] in lib/tensor.h). When self is a view, the base's history is rebased instead, onto a
//     CopySlices node around the op's node, and the view's grad_fn is regenerated over it when next read
//     (Note [CopySlices] in layers/ops/copy_slices.h, which also says what is refused: a view of a leaf
//     that requires grad, in PyTorch's words, among others). What the node saves is taken as PyTorch's
//     VariableType takes it: relu_'s result after the write; mul_'s `other` only when self needs a
//     gradient, and self's value before the write (a to_copy, below Autograd) only when `other` needs one
//     (docs/autograd.md).
// The CUDA kernels (layers/kernels/cuda/inplace_reduce.cu) get the same registration: operands cast and
// made contiguous, self written through its strides, the same version bump.
// The reference is the out-of-place op's: the values self holds after the call.
struct ReluInPlace {
  static constexpr const char* kName = "relu_";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "relu_(Tensor(a!) self) -> Tensor(a!)";
  static constexpr const char* kTorchName = "torch.Tensor.relu_";  // the --peer torch counterpart
  using Signature = Tensor(const Tensor& self);
  static constexpr KernelDecl kCpu{&kernels::cpu::relu_inplace, "layers/kernels/cpu/inplace.cpp (relu loop, written into self)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::relu_inplace, "layers/kernels/cuda/inplace_reduce.cu (strata's own kernel, written into self)"};
  static constexpr auto kReference = &reference::relu;
  static constexpr bool kInPlace = true;
  // The out-of-place op's node and formula, recorded by the in-place Autograd kernel (Note [In-place operators]).
  static constexpr BackwardDecl kBackward = Relu::kBackward;
  static GradList backward(const RecordedNode& node, const Tensor& grad) { return Relu::backward(node, grad); }
};
inline constexpr EntryPoint<ReluInPlace> relu_{};  // NOLINT(readability-identifier-naming): called like a function

struct AddInPlace {
  static constexpr const char* kName = "add_";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "add_(Tensor(a!) self, Tensor other, *, float alpha=1) -> Tensor(a!)";  // aten::add_.Tensor
  static constexpr const char* kTorchName = "torch.Tensor.add_";  // the --peer torch counterpart
  using Signature = Tensor(const Tensor& self, const Tensor& other, double alpha);
  static constexpr KernelDecl kCpu{&kernels::cpu::add_inplace, "layers/kernels/cpu/inplace.cpp (add loop, written into self)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::add_inplace, "layers/kernels/cuda/inplace_reduce.cu (strata's own kernel, written into self)"};
  static constexpr auto kReference = &reference::add;
  static constexpr bool kInPlace = true;
  static constexpr BackwardDecl kBackward = Add::kBackward;
  static GradList backward(const RecordedNode& node, const Tensor& grad) { return Add::backward(node, grad); }
};

struct MulInPlace {
  static constexpr const char* kName = "mul_";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "mul_(Tensor(a!) self, Tensor other) -> Tensor(a!)";  // aten::mul_.Tensor
  static constexpr const char* kTorchName = "torch.Tensor.mul_";  // the --peer torch counterpart
  using Signature = Tensor(const Tensor& self, const Tensor& other);
  static constexpr KernelDecl kCpu{&kernels::cpu::mul_inplace, "layers/kernels/cpu/inplace.cpp (mul loop, written into self)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::mul_inplace, "layers/kernels/cuda/inplace_reduce.cu (strata's own kernel, written into self)"};
  static constexpr auto kReference = &reference::mul;
  static constexpr bool kInPlace = true;
  static constexpr BackwardDecl kBackward = Mul::kBackward;
  static GradList backward(const RecordedNode& node, const Tensor& grad) { return Mul::backward(node, grad); }
};

struct MulScalarInPlace {
  static constexpr const char* kName = "mul_.Scalar";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "mul_.Scalar(Tensor(a!) self, float other=1) -> Tensor(a!)";  // aten::mul_.Scalar
  static constexpr const char* kTorchName = "torch.Tensor.mul_";  // the --peer torch counterpart
  using Signature = Tensor(const Tensor& self, double other);
  static constexpr KernelDecl kCpu{&kernels::cpu::mul_scalar_inplace, "layers/kernels/cpu/inplace.cpp (mul.Scalar loop, written into self)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::mul_scalar_inplace, "layers/kernels/cuda/inplace_reduce.cu (strata's own kernel, written into self)"};
  static constexpr auto kReference = &reference::mul_scalar;
  static constexpr bool kInPlace = true;
  static constexpr BackwardDecl kBackward = MulScalar::kBackward;
  static GradList backward(const RecordedNode& node, const Tensor& grad) { return MulScalar::backward(node, grad); }
};
// x.mul_(y) and x.mul_(2.0): one C++ name, two operators (Note [Overloads]).
inline constexpr Overloads<EntryPoint<MulInPlace>, EntryPoint<MulScalarInPlace>> mul_{};  // NOLINT(readability-identifier-naming)

// The in-place forms of add.Scalar, sub, sub.Scalar, div and div.Scalar: what Python's `x += 2.0`,
// `x -= y`, `x -= 2.0`, `x /= y` and `x /= 2.0` call, as torch's Tensor.__iadd__ etc. call add_, sub_ and
// div_. Each writes the value its out-of-place op computes (the same expression, one rounding in the same
// type) and records the out-of-place op's node, as ReluInPlace does (Note [In-place operators]).
struct AddScalarInPlace {
  static constexpr const char* kName = "add_.Scalar";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "add_.Scalar(Tensor(a!) self, float other, float alpha=1) -> Tensor(a!)";  // aten::add_.Scalar
  static constexpr const char* kTorchName = "torch.Tensor.add_";  // the --peer torch counterpart
  using Signature = Tensor(const Tensor& self, double other, double alpha);
  static constexpr KernelDecl kCpu{&kernels::cpu::add_scalar_inplace, "layers/kernels/cpu/inplace.cpp (add.Scalar loop, written into self)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::add_scalar_inplace, "layers/kernels/cuda/inplace_reduce.cu (strata's own kernel, written into self)"};
  static constexpr auto kReference = &reference::add_scalar;
  static constexpr bool kInPlace = true;
  static constexpr BackwardDecl kBackward = AddScalar::kBackward;
  static GradList backward(const RecordedNode& node, const Tensor& grad) { return AddScalar::backward(node, grad); }
};
// x.add_(y) and x.add_(2.0): one C++ name, two operators (Note [Overloads]).
inline constexpr Overloads<EntryPoint<AddInPlace>, EntryPoint<AddScalarInPlace>> add_{};  // NOLINT(readability-identifier-naming)

struct SubInPlace {
  static constexpr const char* kName = "sub_";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "sub_(Tensor(a!) self, Tensor other, *, float alpha=1) -> Tensor(a!)";  // aten::sub_.Tensor
  static constexpr const char* kTorchName = "torch.Tensor.sub_";  // the --peer torch counterpart
  using Signature = Tensor(const Tensor& self, const Tensor& other, double alpha);
  static constexpr KernelDecl kCpu{&kernels::cpu::sub_inplace, "layers/kernels/cpu/inplace.cpp (sub loop, written into self)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::sub_inplace, "layers/kernels/cuda/inplace_reduce.cu (add_'s kernel, -alpha, written into self)"};
  static constexpr auto kReference = &reference::sub;
  static constexpr bool kInPlace = true;
  static constexpr BackwardDecl kBackward = Sub::kBackward;
  static GradList backward(const RecordedNode& node, const Tensor& grad) { return Sub::backward(node, grad); }
};

struct SubScalarInPlace {
  static constexpr const char* kName = "sub_.Scalar";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "sub_.Scalar(Tensor(a!) self, float other, float alpha=1) -> Tensor(a!)";  // aten::sub_.Scalar
  static constexpr const char* kTorchName = "torch.Tensor.sub_";  // the --peer torch counterpart
  using Signature = Tensor(const Tensor& self, double other, double alpha);
  static constexpr KernelDecl kCpu{&kernels::cpu::sub_scalar_inplace, "layers/kernels/cpu/inplace.cpp (sub.Scalar loop, written into self)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::sub_scalar_inplace, "layers/kernels/cuda/inplace_reduce.cu (add_.Scalar's kernel, -alpha, written into self)"};
  static constexpr auto kReference = &reference::sub_scalar;
  static constexpr bool kInPlace = true;
  static constexpr BackwardDecl kBackward = SubScalar::kBackward;
  static GradList backward(const RecordedNode& node, const Tensor& grad) { return SubScalar::backward(node, grad); }
};
inline constexpr Overloads<EntryPoint<SubInPlace>, EntryPoint<SubScalarInPlace>> sub_{};  // NOLINT(readability-identifier-naming)

struct DivInPlace {
  static constexpr const char* kName = "div_";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "div_(Tensor(a!) self, Tensor other) -> Tensor(a!)";  // aten::div_.Tensor
  static constexpr const char* kTorchName = "torch.Tensor.div_";  // the --peer torch counterpart
  using Signature = Tensor(const Tensor& self, const Tensor& other);
  static constexpr KernelDecl kCpu{&kernels::cpu::div_inplace, "layers/kernels/cpu/inplace.cpp (div loop, written into self)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::div_inplace, "layers/kernels/cuda/inplace_reduce.cu (strata's own kernel, written into self)"};
  static constexpr auto kReference = &reference::div;
  static constexpr bool kInPlace = true;
  // DivBackward saves self and other: self's value before the write, as mul_ saves it, only when other needs a
  // gradient; other whenever either does, since other's own gradient reads it (Note [In-place operators]).
  static constexpr BackwardDecl kBackward = Div::kBackward;
  static constexpr bool kOperandReadsItself = true;
  static GradList backward(const RecordedNode& node, const Tensor& grad) { return Div::backward(node, grad); }
};

struct DivScalarInPlace {
  static constexpr const char* kName = "div_.Scalar";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "div_.Scalar(Tensor(a!) self, float other=1) -> Tensor(a!)";  // aten::div_.Scalar
  static constexpr const char* kTorchName = "torch.Tensor.div_";  // the --peer torch counterpart
  using Signature = Tensor(const Tensor& self, double other);
  static constexpr KernelDecl kCpu{&kernels::cpu::div_scalar_inplace, "layers/kernels/cpu/inplace.cpp (div.Scalar loop, written into self)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::div_scalar_inplace, "layers/kernels/cuda/inplace_reduce.cu (strata's own kernel, written into self)"};
  static constexpr auto kReference = &reference::div_scalar;
  static constexpr bool kInPlace = true;
  static constexpr BackwardDecl kBackward = DivScalar::kBackward;
  static GradList backward(const RecordedNode& node, const Tensor& grad) { return DivScalar::backward(node, grad); }
};
inline constexpr Overloads<EntryPoint<DivInPlace>, EntryPoint<DivScalarInPlace>> div_{};  // NOLINT(readability-identifier-naming)

// The in-place ops added after the core list, in `strata ops` order: they follow PointwiseFunctorOps in
// AllOps (layers/ops/operators.h). A new in-place op joins this list, here.
using InPlaceArithmeticOps = OpList<AddScalarInPlace, SubInPlace, SubScalarInPlace, DivInPlace, DivScalarInPlace>;

}  // namespace strata::ops
