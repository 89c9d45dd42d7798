// The pointwise operators: relu, add, gelu, silu (and silu_backward), the tanh GELU's ops with their
// scalar overloads (and the Overloads entry point, Note [Overloads]), div, tanh, pow.
// Part of layers/ops/operators.h (Note [One declaration per operator]): included there, after the
// declaration machinery and in the order the list there gives; not a header to include on its own.
#pragma once

namespace strata::ops {

struct Relu {
  static constexpr const char* kName = "relu";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "relu(Tensor self) -> Tensor";
  static constexpr const char* kTorchName = "torch.relu";  // the --peer torch counterpart
  using Signature = Tensor(const Tensor& self);
  static constexpr KernelDecl kCpu{&kernels::cpu::relu, "layers/kernels/cpu/pointwise.cpp (unary loop over math::Relu)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::relu, "layers/kernels/cuda/pointwise.cu (unary_kernel<math::Relu>)"};
  static constexpr auto kReference = &reference::relu;
  static constexpr auto kReferenceBackward = &reference::relu_backward;  // float64 gradients
  static constexpr BackwardDecl kBackward{"ReluBackward", 0, /*saves_result=*/true};
  // ReluBackward: threshold_backward(grad, result, 0) (defined below AllOps: it calls other operators).
  static GradList backward(const RecordedNode& node, const Tensor& grad);
};
inline constexpr EntryPoint<Relu> relu{};  // NOLINT(readability-identifier-naming): called like a function

struct Add {
  static constexpr const char* kName = "add";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "add(Tensor self, Tensor other, *, float alpha=1) -> Tensor";
  static constexpr const char* kTorchName = "torch.add";  // the --peer torch counterpart
  using Signature = Tensor(const Tensor& self, const Tensor& other, double alpha);
  static constexpr KernelDecl kCpu{&kernels::cpu::add, "layers/kernels/cpu/pointwise.cpp (vectorised loop)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::add, "layers/kernels/cuda/pointwise.cu (strata's own kernel)"};
  static constexpr auto kReference = &reference::add;
  static constexpr auto kReferenceBackward = &reference::add_backward;  // float64 gradients
  static constexpr BackwardDecl kBackward{"AddBackward", 0};  // add saves nothing
  static constexpr bool kPromotesTypes = true;  // f32 + f64 -> f64 with a to_copy first (Note [Type promotion])
  // AddBackward: grad, alpha * grad (defined below AllOps: it calls other operators).
  static GradList backward(const RecordedNode& node, const Tensor& grad);
};
// ops::add is declared with add.Scalar below (one C++ name, two operators).

struct Gelu {
  static constexpr const char* kName = "gelu";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "gelu(Tensor self) -> Tensor";
  static constexpr const char* kTorchName = "torch.nn.functional.gelu";  // the --peer torch counterpart
  using Signature = Tensor(const Tensor& self);
  static constexpr KernelDecl kCpu{&kernels::cpu::gelu, "layers/kernels/cpu/pointwise.cpp (unary loop over math::Gelu)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::gelu, "layers/kernels/cuda/pointwise.cu (unary_kernel<math::Gelu>)"};
  static constexpr auto kReference = &reference::gelu;
  static constexpr auto kReferenceBackward = &reference::gelu_backward_of;  // float64 gradients
  static constexpr BackwardDecl kBackward{"GeluBackward", 0b1};  // dx needs x: Phi(x) + x * phi(x)
  // GeluBackward: gelu_backward(grad, self) (defined below AllOps: it calls other operators).
  static GradList backward(const RecordedNode& node, const Tensor& grad);
};
inline constexpr EntryPoint<Gelu> gelu{};  // NOLINT(readability-identifier-naming): called like a function

// The first op added as Note [Pointwise math written once] has it: a functor (math::Silu), this
// declaration and its gradient op's, and the float64 reference; the backends' loops are the generic ones.
struct Silu {
  static constexpr const char* kName = "silu";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "silu(Tensor self) -> Tensor";
  static constexpr const char* kTorchName = "torch.nn.functional.silu";  // the --peer torch counterpart
  using Signature = Tensor(const Tensor& self);
  static constexpr KernelDecl kCpu{&kernels::cpu::unary<kernels::math::Silu>,
                                   "layers/kernels/cpu/pointwise.cpp (unary loop over math::Silu)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::unary<kernels::math::Silu>,
                                    "layers/kernels/cuda/pointwise.cu (unary_kernel<math::Silu>)"};
  static constexpr auto kReference = &reference::silu;
  static constexpr auto kReferenceBackward = &reference::silu_backward_of;  // float64 gradients
  static constexpr BackwardDecl kBackward{"SiluBackward", 0b1};  // dx needs x: s(x) * (1 + x * (1 - s(x)))
  // SiluBackward: silu_backward(grad, self) (defined below SiluBackward, whose entry point it calls).
  static GradList backward(const RecordedNode& node, const Tensor& grad);
};
inline constexpr EntryPoint<Silu> silu{};  // NOLINT(readability-identifier-naming): called like a function

// SiluBackward's call (PyTorch's aten::silu_backward): grad * s * (1 + x * (1 - s)), s = sigmoid(x).
struct SiluBackward {
  static constexpr const char* kName = "silu_backward";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "silu_backward(Tensor grad_output, Tensor self) -> Tensor";
  static constexpr const char* kTorchName = "torch.ops.aten.silu_backward";  // the --peer torch counterpart
  using Signature = Tensor(const Tensor& grad_output, const Tensor& self);
  static constexpr KernelDecl kCpu{&kernels::cpu::unary_gradient<kernels::math::Silu>,
                                   "layers/kernels/cpu/pointwise.cpp (gradient loop over math::Silu)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::unary_gradient<kernels::math::Silu>,
                                    "layers/kernels/cuda/pointwise.cu (unary_gradient_kernel<math::Silu>)"};
  static constexpr auto kReference = &reference::silu_backward;
  static constexpr BackwardDecl kBackward{"SiluBackwardBackward", 0};
};
inline constexpr EntryPoint<SiluBackward> silu_backward{};  // NOLINT(readability-identifier-naming)

inline GradList Silu::backward(const RecordedNode& node, const Tensor& grad) {
  GradList g;
  g[0] = ops::silu_backward(grad, node.input(0));
  return g;
}

// The logistic function (torch.sigmoid, torch.nn.functional.sigmoid): a functor op, saving its result
// as PyTorch's SigmoidBackward0 does (the gradient is y * (1 - y)).
struct Sigmoid {
  static constexpr const char* kName = "sigmoid";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "sigmoid(Tensor self) -> Tensor";
  static constexpr const char* kTorchName = "torch.sigmoid";  // the --peer torch counterpart
  using Signature = Tensor(const Tensor& self);
  static constexpr KernelDecl kCpu{&kernels::cpu::unary<kernels::math::Sigmoid>,
                                   "layers/kernels/cpu/pointwise.cpp (unary loop over math::Sigmoid)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::unary<kernels::math::Sigmoid>,
                                    "layers/kernels/cuda/pointwise.cu (unary_kernel<math::Sigmoid>)"};
  static constexpr auto kReference = &reference::sigmoid;
  static constexpr auto kReferenceBackward = &reference::sigmoid_backward_of;  // float64 gradients
  static constexpr BackwardDecl kBackward{"SigmoidBackward", 0, /*saves_result=*/true};  // y * (1 - y) needs y
  // SigmoidBackward: sigmoid_backward(grad, result) (defined below SigmoidBackward, whose entry point it calls).
  static GradList backward(const RecordedNode& node, const Tensor& grad);
};
inline constexpr EntryPoint<Sigmoid> sigmoid{};  // NOLINT(readability-identifier-naming): called like a function

// SigmoidBackward's call (PyTorch's aten::sigmoid_backward(grad_output, output)): grad * y * (1 - y).
struct SigmoidBackward {
  static constexpr const char* kName = "sigmoid_backward";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "sigmoid_backward(Tensor grad_output, Tensor output) -> Tensor";
  static constexpr const char* kTorchName = "torch.ops.aten.sigmoid_backward";  // the --peer torch counterpart
  using Signature = Tensor(const Tensor& grad_output, const Tensor& output);
  static constexpr KernelDecl kCpu{&kernels::cpu::unary_gradient<kernels::math::Sigmoid>,
                                   "layers/kernels/cpu/pointwise.cpp (gradient loop over math::Sigmoid)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::unary_gradient<kernels::math::Sigmoid>,
                                    "layers/kernels/cuda/pointwise.cu (unary_gradient_kernel<math::Sigmoid>)"};
  static constexpr auto kReference = &reference::sigmoid_backward;
  static constexpr BackwardDecl kBackward{"SigmoidBackwardBackward", 0};
};
inline constexpr EntryPoint<SigmoidBackward> sigmoid_backward{};  // NOLINT(readability-identifier-naming)

inline GradList Sigmoid::backward(const RecordedNode& node, const Tensor& grad) {
  GradList g;
  g[0] = ops::sigmoid_backward(grad, node.result());
  return g;
}

// The pointwise ops declared after AllOps was split by family, in `strata ops` order: they follow the
// core list in AllOps (layers/ops/operators.h). A new pointwise op joins this list, here.
using PointwiseFunctorOps = OpList<Silu, SiluBackward, Sigmoid, SigmoidBackward>;

// ---- The tanh GELU's ops ---------------------------------------------------------------------------------
// 0.5*x*(1+tanh(sqrt(2/pi)*(x+0.044715*x^3))), the program the compiled path fuses (docs/compiled.md).
//
// Note [Overloads]
// ~~~~~~~~~~~~~~~~
// PyTorch has one name for several operators: aten::mul.Tensor (two tensors) and aten::mul.Scalar (a
// tensor and a Python number) are both `mul`, each with its own schema and kernels. strata's binding layer
// matches one schema per name, so an overload is an operator of its own whose name carries the overload
// (kName "mul.Scalar", the schema "mul.Scalar(...)": the binding, dispatcher, reports and `strata trace
// mul.Scalar` use that name), and the unqualified name is the Tensor overload, as in PyTorch. Choosing
// between them is the caller's language: in C++ an Overloads set (ops::mul(t, 2.0) picks mul.Scalar by
// overload resolution, as at::mul does), in Python the frontend (strata.mul(x, 2.0) picks by the type of
// the argument, as torch's python_arg_parser does: apps/python/strata/_ops.py).

// The C++ entry point of a name with several operators: each call resolved by its argument types.
template <typename... Entries>
struct Overloads : Entries... {
  using Entries::operator()...;
};

struct Mul {
  static constexpr const char* kName = "mul";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "mul(Tensor self, Tensor other) -> Tensor";  // aten::mul.Tensor
  static constexpr const char* kTorchName = "torch.mul";  // the --peer torch counterpart
  using Signature = Tensor(const Tensor& self, const Tensor& other);
  static constexpr KernelDecl kCpu{&kernels::cpu::mul, "layers/kernels/cpu/pointwise.cpp (vectorised loop)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::mul, "layers/kernels/cuda/pointwise.cu (strata's own kernel)"};
  static constexpr auto kReference = &reference::mul;
  static constexpr auto kReferenceBackward = &reference::mul_backward;  // float64 gradients
  static constexpr BackwardDecl kBackward{"MulBackward", 0b11};  // d self = grad * other, d other = grad * self
  static constexpr bool kPromotesTypes = true;  // f32 + f64 -> f64 with a to_copy first (Note [Type promotion])
  static GradList backward(const RecordedNode& node, const Tensor& grad);
};

struct MulScalar {
  static constexpr const char* kName = "mul.Scalar";
  static constexpr std::string_view kAlias = "";
  // aten::mul.Scalar; also what AddBackward and SubBackward call for alpha * grad. The default lets the
  // CLI's spec trace it alone.
  static constexpr const char* kSchema = "mul.Scalar(Tensor self, float other=1) -> Tensor";
  static constexpr const char* kTorchName = "torch.mul";  // the --peer torch counterpart
  using Signature = Tensor(const Tensor& self, double other);
  static constexpr KernelDecl kCpu{&kernels::cpu::mul_scalar, "layers/kernels/cpu/pointwise.cpp (vectorised loop)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::mul_scalar, "layers/kernels/cuda/pointwise.cu (strata's own kernel)"};
  static constexpr auto kReference = &reference::mul_scalar;
  static constexpr auto kReferenceBackward = &reference::mul_scalar_backward;  // float64 gradients
  static constexpr BackwardDecl kBackward{"MulBackward", 0};  // grad * other: saves nothing
  static GradList backward(const RecordedNode& node, const Tensor& grad);
};
inline constexpr Overloads<EntryPoint<Mul>, EntryPoint<MulScalar>> mul{};  // NOLINT(readability-identifier-naming)

// True division (aten::div.Tensor / aten::div.Scalar with rounding_mode=None), IEEE as PyTorch's: x / 0 is
// +-inf, 0 / 0 NaN, the sign of a zero quotient the XOR of the operands' signs. Python's `x / y` and
// `x / 2.0`; `2.0 / x` is torch's reciprocal(x) * 2.0 (pow(x, -1) then mul.Scalar: apps/python/strata).
struct Div {
  static constexpr const char* kName = "div";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "div(Tensor self, Tensor other) -> Tensor";  // aten::div.Tensor
  static constexpr const char* kTorchName = "torch.div";  // the --peer torch counterpart
  using Signature = Tensor(const Tensor& self, const Tensor& other);
  static constexpr KernelDecl kCpu{&kernels::cpu::div, "layers/kernels/cpu/pointwise.cpp (vectorised loop)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::div, "layers/kernels/cuda/pointwise.cu (strata's own kernel)"};
  static constexpr auto kReference = &reference::div;
  static constexpr auto kReferenceBackward = &reference::div_backward;  // float64 gradients
  // d self = grad / other, d other = -grad * ((self / other) / other): saves both
  static constexpr BackwardDecl kBackward{"DivBackward", 0b11};
  static constexpr bool kPromotesTypes = true;  // f32 / f64 -> f64 with a to_copy first (Note [Type promotion])
  static GradList backward(const RecordedNode& node, const Tensor& grad);
};

struct DivScalar {
  static constexpr const char* kName = "div.Scalar";
  static constexpr std::string_view kAlias = "";
  // aten::div.Scalar. The default lets the CLI's spec trace it alone.
  static constexpr const char* kSchema = "div.Scalar(Tensor self, float other=1) -> Tensor";
  static constexpr const char* kTorchName = "torch.div";  // the --peer torch counterpart
  using Signature = Tensor(const Tensor& self, double other);
  static constexpr KernelDecl kCpu{&kernels::cpu::div_scalar, "layers/kernels/cpu/pointwise.cpp (vectorised loop)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::div_scalar, "layers/kernels/cuda/pointwise.cu (strata's own kernel)"};
  static constexpr auto kReference = &reference::div_scalar;
  static constexpr auto kReferenceBackward = &reference::div_scalar_backward;  // float64 gradients
  static constexpr BackwardDecl kBackward{"DivBackward", 0};  // grad / other: saves nothing
  static GradList backward(const RecordedNode& node, const Tensor& grad);
};
inline constexpr Overloads<EntryPoint<Div>, EntryPoint<DivScalar>> div{};  // NOLINT(readability-identifier-naming)

struct AddScalar {
  static constexpr const char* kName = "add.Scalar";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "add.Scalar(Tensor self, float other, float alpha=1) -> Tensor";
  static constexpr const char* kTorchName = "torch.add";  // the --peer torch counterpart
  using Signature = Tensor(const Tensor& self, double other, double alpha);
  static constexpr KernelDecl kCpu{&kernels::cpu::add_scalar, "layers/kernels/cpu/pointwise.cpp (vectorised loop)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::add_scalar, "layers/kernels/cuda/pointwise.cu (strata's own kernel)"};
  static constexpr auto kReference = &reference::add_scalar;
  static constexpr auto kReferenceBackward = &reference::add_scalar_backward;  // float64 gradients
  static constexpr BackwardDecl kBackward{"AddBackward", 0};
  static GradList backward(const RecordedNode& node, const Tensor& grad);
};
inline constexpr Overloads<EntryPoint<Add>, EntryPoint<AddScalar>> add{};  // NOLINT(readability-identifier-naming)

struct Sub {
  static constexpr const char* kName = "sub";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "sub(Tensor self, Tensor other, *, float alpha=1) -> Tensor";
  static constexpr const char* kTorchName = "torch.sub";  // the --peer torch counterpart
  using Signature = Tensor(const Tensor& self, const Tensor& other, double alpha);
  static constexpr KernelDecl kCpu{&kernels::cpu::sub, "layers/kernels/cpu/pointwise.cpp (vectorised loop)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::sub, "layers/kernels/cuda/pointwise.cu (add's kernel, -alpha)"};
  static constexpr auto kReference = &reference::sub;
  static constexpr auto kReferenceBackward = &reference::sub_backward;  // float64 gradients
  static constexpr BackwardDecl kBackward{"SubBackward", 0};  // grad, -alpha * grad: saves nothing
  static constexpr bool kPromotesTypes = true;  // f32 + f64 -> f64 with a to_copy first (Note [Type promotion])
  static GradList backward(const RecordedNode& node, const Tensor& grad);
};

struct SubScalar {
  static constexpr const char* kName = "sub.Scalar";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "sub.Scalar(Tensor self, float other, float alpha=1) -> Tensor";
  static constexpr const char* kTorchName = "torch.sub";  // the --peer torch counterpart
  using Signature = Tensor(const Tensor& self, double other, double alpha);
  static constexpr KernelDecl kCpu{&kernels::cpu::sub_scalar, "layers/kernels/cpu/pointwise.cpp (vectorised loop)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::sub_scalar, "layers/kernels/cuda/pointwise.cu (add.Scalar's kernel, -alpha)"};
  static constexpr auto kReference = &reference::sub_scalar;
  static constexpr auto kReferenceBackward = &reference::sub_scalar_backward;  // float64 gradients
  static constexpr BackwardDecl kBackward{"SubBackward", 0};
  static GradList backward(const RecordedNode& node, const Tensor& grad);
};
inline constexpr Overloads<EntryPoint<Sub>, EntryPoint<SubScalar>> sub{};  // NOLINT(readability-identifier-naming)

struct Tanh {
  static constexpr const char* kName = "tanh";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "tanh(Tensor self) -> Tensor";
  static constexpr const char* kTorchName = "torch.tanh";  // the --peer torch counterpart
  using Signature = Tensor(const Tensor& self);
  static constexpr KernelDecl kCpu{&kernels::cpu::tanh, "layers/kernels/cpu/pointwise.cpp (unary loop over math::Tanh)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::tanh, "layers/kernels/cuda/pointwise.cu (unary_kernel<math::Tanh>)"};
  static constexpr auto kReference = &reference::tanh;
  static constexpr auto kReferenceBackward = &reference::tanh_backward_of;  // float64 gradients
  static constexpr BackwardDecl kBackward{"TanhBackward", 0, /*saves_result=*/true};  // 1 - y^2 needs y
  static GradList backward(const RecordedNode& node, const Tensor& grad);
};
inline constexpr EntryPoint<Tanh> tanh{};  // NOLINT(readability-identifier-naming): called like a function

struct Pow {
  static constexpr const char* kName = "pow";
  static constexpr std::string_view kAlias = "";
  // aten::pow.Tensor_Scalar, the only pow strata has, so it takes the plain name.
  static constexpr const char* kSchema = "pow(Tensor self, float exponent) -> Tensor";
  static constexpr const char* kTorchName = "torch.pow";  // the --peer torch counterpart
  using Signature = Tensor(const Tensor& self, double exponent);
  static constexpr KernelDecl kCpu{&kernels::cpu::pow, "layers/kernels/cpu/pointwise.cpp (pow loop)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::pow, "layers/kernels/cuda/pointwise.cu (strata's own kernel)"};
  static constexpr auto kReference = &reference::pow;
  static constexpr auto kReferenceBackward = &reference::pow_backward;  // float64 gradients
  static constexpr BackwardDecl kBackward{"PowBackward", 0b1};  // exponent * x^(exponent - 1) needs x
  static GradList backward(const RecordedNode& node, const Tensor& grad);
};
inline constexpr EntryPoint<Pow> pow{};  // NOLINT(readability-identifier-naming): called like a function

}  // namespace strata::ops
