// Note [One declaration per operator]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Every operator strata knows is one struct in this file, and the list at the bottom names them all:
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
//   kSpecHelp, spec   the CLI's spec ("matmul 1024"): its help line, and the call it builds, checked with
//                     the op's shape rule (lib/op_shapes.h), with the figures the report needs
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
#include "layers/dispatch/dispatch.h"
#include "layers/kernels/cpu/cpu_kernels.h"
#include "layers/kernels/cuda/cuda_kernels.h"  // declarations only: a build without CUDA never uses kCuda
#include "layers/kernels/reference/reference.h"
#include "layers/ops/op_declaration.h"
#include "lib/error.h"
#include "lib/op_shapes.h"
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

namespace spec_text {
inline std::string dims(const std::vector<int64_t>& d, size_t from, size_t to) {
  std::string s;
  for (size_t i = from; i < to; ++i) s += (i > from ? "x" : "") + std::to_string(d[i]);
  return s;
}
inline std::string bracket(const Shape& s) { return "[" + s.str() + "]"; }
// Elements as a double: a spec's product of sizes may not fit in int64 (the frontend refuses those,
// and computes bytes in 128 bits, before anything is allocated).
inline double elements(const std::vector<int64_t>& d) {
  double n = 1;
  for (int64_t x : d) n *= double(x);
  return n;
}
inline Shape shape(const std::vector<int64_t>& d) {
  Shape s;
  for (int64_t x : d) s[s.ndim++] = x;
  return s;
}
}  // namespace spec_text

// The spec of an op that reads the conv options, as conv2d's (defined with Conv2d below).
inline SpecCall conv_spec(std::vector<int64_t>& d, const ConvOptions& options, std::string_view typed);

// The spec of a pointwise op over `tensors` inputs of the shape typed ("relu 1024", "add 32x32"): one
// operation per element, and memory-bound (each input read once, the output written once).
inline SpecCall pointwise_spec(const std::vector<int64_t>& d, int tensors, const char* joiner) {
  SpecCall c;
  const Shape s = spec_text::shape(d);
  for (int i = 0; i < tensors; ++i) {
    c.args.push_back(SpecArg::tensor(s));
    c.description += (i > 0 ? joiner : "") + spec_text::bracket(s);
  }
  c.outputs = {s};
  c.flops = spec_text::elements(d);
  c.elements_moved = double(tensors + 1) * spec_text::elements(d);
  return c;
}

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

struct Matmul {
  static constexpr const char* kName = "matmul";
  static constexpr std::string_view kAlias = "mm";
  static constexpr const char* kSchema = "matmul(Tensor self, Tensor other) -> Tensor";
  static constexpr const char* kTorchName = "torch.matmul";  // the --peer torch counterpart
  using Signature = Tensor(const Tensor& self, const Tensor& other);
  static constexpr KernelDecl kCpu{&kernels::cpu::matmul, "layers/kernels/cpu/gemm.cpp (OpenBLAS cblas_sgemm / cblas_dgemm; a loop of them over a batch)"};
  static constexpr bool kGemmOperands = true;  // a transposed view is read as it lies (Note [Transposed GEMM operands])
  static constexpr KernelDecl kCuda{&kernels::cuda::matmul, "layers/kernels/cuda/cublas_gemm.cpp (cuBLAS; cublasGemmStridedBatchedEx for a batch)"};
  static constexpr bool kCudaGemmOperands = true;  // cublasGemmEx reads a transposed view with an op flag
  static constexpr auto kReference = &reference::matmul;
  static constexpr auto kReferenceBackward = &reference::matmul_backward;  // float64 gradients
  static constexpr BackwardDecl kBackward{"MmBackward", 0b11};
  // MmBackward: grad @ other^T, self^T @ grad (defined below AllOps: it calls other operators).
  static GradList backward(const RecordedNode& node, const Tensor& grad);
  static constexpr AutocastPolicy kAutocast = AutocastPolicy::kLowerPrecision;
  static constexpr const char* kSpecHelp = "  matmul N | MxKxN         [M,K] @ [K,N]            e.g. matmul 1024, matmul 512x1024x256\n";

  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions&, std::string_view typed) {
    if (d.size() == 1) d = {d[0], d[0], d[0]};
    else if (d.size() != 3) throw UsageError("matmul takes N (square) or MxKxN, got '" + std::string(typed) + "'");
    SpecCall c;
    const Shape a{d[0], d[1]}, b{d[1], d[2]};
    c.args = {SpecArg::tensor(a), SpecArg::tensor(b)};
    c.outputs = {op_shapes::matmul(a, b)};
    c.description = spec_text::bracket(a) + " @ " + spec_text::bracket(b);
    c.gemm_shape = spec_text::dims(d, 0, 3);
    c.flops = 2.0 * spec_text::elements(d);
    return c;
  }
};
inline constexpr EntryPoint<Matmul> matmul{};  // NOLINT(readability-identifier-naming): called like a function

struct Linear {
  static constexpr const char* kName = "linear";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor";
  static constexpr const char* kTorchName = "torch.nn.functional.linear";  // the --peer torch counterpart
  using Signature = Tensor(const Tensor& input, const Tensor& weight, const Tensor& bias);
  static constexpr KernelDecl kCpu{&kernels::cpu::linear, "layers/kernels/cpu/gemm.cpp (bias rows + OpenBLAS gemm, beta=1)"};
  static constexpr bool kGemmOperands = true;  // a transposed view is read as it lies (Note [Transposed GEMM operands])
  static constexpr KernelDecl kCuda{&kernels::cuda::linear, "layers/kernels/cuda/cublas_gemm.cpp (cuBLAS, bias epilogue)"};
  static constexpr auto kReference = &reference::linear;
  static constexpr auto kReferenceBackward = &reference::linear_backward;  // float64 gradients
  static constexpr BackwardDecl kBackward{"AddmmBackward", 0b11};
  // AddmmBackward: grad @ weight, grad^T @ input, bias_backward(grad) (defined below AllOps: it calls other operators).
  static GradList backward(const RecordedNode& node, const Tensor& grad);
  static constexpr AutocastPolicy kAutocast = AutocastPolicy::kLowerPrecision;
  static constexpr const char* kSpecHelp = "  linear BxINxOUT          input [B,IN], weight [OUT,IN], bias [OUT]   e.g. linear 32x768x3072\n";

  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions&, std::string_view typed) {
    if (d.size() != 3)
      throw UsageError("linear takes BxINxOUT (batch, in features, out features), got '" + std::string(typed) + "'");
    SpecCall c;
    const Shape input{d[0], d[1]}, weight{d[2], d[1]}, bias{d[2]};
    c.args = {SpecArg::tensor(input), SpecArg::tensor(weight), SpecArg::tensor(bias)};
    c.outputs = {op_shapes::linear(input, weight, &bias)};
    c.description = "input " + spec_text::bracket(input) + " weight " + spec_text::bracket(weight) + " bias " +
                    spec_text::bracket(bias);
    c.gemm_shape = spec_text::dims(d, 0, 3);
    c.flops = 2.0 * spec_text::elements(d) + double(d[0]) * double(d[2]);
    return c;
  }
};
inline constexpr EntryPoint<Linear> linear{};  // NOLINT(readability-identifier-naming): called like a function

struct Conv2d {
  static constexpr const char* kName = "conv2d";
  static constexpr std::string_view kAlias = "conv";
  static constexpr const char* kSchema =
      "conv2d(Tensor input, Tensor weight, Tensor? bias=None, int stride=1, int padding=0) -> Tensor";
  static constexpr const char* kTorchName = "torch.nn.functional.conv2d";  // the --peer torch counterpart
  using Signature = Tensor(const Tensor& input, const Tensor& weight, const Tensor& bias, int64_t stride,
                           int64_t padding);
  static constexpr KernelDecl kCpu{&kernels::cpu::conv2d, "layers/kernels/cpu/conv.cpp (im2col + OpenBLAS gemm)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::conv2d, "layers/kernels/cuda/cudnn_conv.cpp (cuDNN)"};
  static constexpr auto kReference = &reference::conv2d;
  static constexpr auto kReferenceBackward = &reference::conv2d_backward;  // float64 gradients
  static constexpr BackwardDecl kBackward{"ConvolutionBackward", 0b11};
  // ConvolutionBackward: conv2d_input_backward, conv2d_weight_backward, bias_backward (defined below AllOps: it calls other operators).
  static GradList backward(const RecordedNode& node, const Tensor& grad);
  static constexpr AutocastPolicy kAutocast = AutocastPolicy::kLowerPrecision;
  static constexpr const char* kSpecHelp =
      "  conv NxCxHxW             input [N,C,H,W]; --out-channels K --kernel R --stride S --pad P\n"
      "                           e.g. conv 32x64x56x56 --out-channels 64 --kernel 3 --pad 1\n";

  static constexpr bool kReadsConvOptions = true;  // --out-channels, --kernel, --stride, --pad
  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions& conv, std::string_view typed);
};
inline constexpr EntryPoint<Conv2d> conv2d{};  // NOLINT(readability-identifier-naming): called like a function

inline SpecCall Conv2d::spec(std::vector<int64_t>& d, const ConvOptions& options, std::string_view typed) {
  return conv_spec(d, options, typed);
}

inline SpecCall conv_spec(std::vector<int64_t>& d, const ConvOptions& options, std::string_view typed) {
  constexpr int64_t kMaxDim = 2147483647;  // BLAS and CUDA index with int32
  if (d.size() != 4)
    throw UsageError("conv takes NxCxHxW (batch, channels, height, width), got '" + std::string(typed) + "'");
  const int64_t k = options.out_channels.value_or(d[1]), r = options.kernel, stride = options.stride,
                pad = options.pad;
  auto range = [&](const char* option, int64_t v, int64_t low) {
    if (v < low || v > kMaxDim) {
      throw UsageError(std::string(option) + " must be between " + std::to_string(low) + " and " +
                       std::to_string(kMaxDim) + ", got " + std::to_string(v));
    }
  };
  range("--out-channels", k, 1);
  range("--kernel", r, 1);
  range("--stride", stride, 1);
  range("--pad", pad, 0);
  const int64_t h = d[2] + 2 * pad, w = d[3] + 2 * pad;
  if (r > h || r > w) {
    throw UsageError("conv: --kernel " + std::to_string(r) + " is larger than the padded input " + std::to_string(h) +
                     "x" + std::to_string(w) + " (use a smaller --kernel or more --pad)");
  }
  SpecCall c;
  const Shape input{d[0], d[1], d[2], d[3]}, weight{k, d[1], r, r}, bias{k};
  const op_shapes::Conv2dGeometry g = op_shapes::conv2d(input, weight, &bias, stride, pad);
  c.args = {SpecArg::tensor(input), SpecArg::tensor(weight), SpecArg::tensor(bias), SpecArg::integer(stride),
            SpecArg::integer(pad)};
  c.outputs = {g.output()};
  c.description = "input [" + input.str() + "] weight [" + weight.str() + "] stride " + std::to_string(stride) +
                  " pad " + std::to_string(pad) + " -> [" + g.output().str() + "]";
  // Sizes this large are refused by the frontend's byte count; here they must only not overflow.
  int64_t crr = 0, plane = 0;
  if (!__builtin_mul_overflow(d[1], r, &crr) && !__builtin_mul_overflow(crr, r, &crr) &&
      !__builtin_mul_overflow(g.out_height, g.out_width, &plane))
    c.gemm_shape = Shape{k, crr, plane}.str();
  // The GEMM's multiply-adds, then one bias add per output element, as linear counts its bias.
  c.flops = 2.0 * double(d[0]) * double(k) * double(d[1]) * double(r) * double(r) * double(g.out_height) *
                double(g.out_width) +
            double(d[0]) * double(k) * double(g.out_height) * double(g.out_width);
  c.workspace_dims = {d[1], r, r, g.out_height, g.out_width};  // im2col columns of one image (the CPU's)
  return c;
}

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
  static constexpr const char* kSpecHelp = "  relu N | shape           N elements (or a shape like 1024x1024)   e.g. relu 1048576\n";

  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    return pointwise_spec(d, 1, "");
  }

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
  static constexpr const char* kSpecHelp = "  add N | shape            a + b, same shapes                         e.g. add 1048576\n";

  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    return pointwise_spec(d, 2, " + ");  // alpha keeps its default, 1
  }

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
  static constexpr const char* kSpecHelp = "  gelu N | shape           N elements, x * Phi(x) (exact, erf)         e.g. gelu 1048576\n";

  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    return pointwise_spec(d, 1, "");  // flops: one per element, as relu (erf is a library call, not counted)
  }

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
  // SiluBackward: silu_backward(grad, self) (defined below AllOps: it calls other operators).
  static GradList backward(const RecordedNode& node, const Tensor& grad);
  static constexpr const char* kSpecHelp = "  silu N | shape           N elements, x * sigmoid(x)                  e.g. silu 1048576\n";

  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    return pointwise_spec(d, 1, "");  // flops: one per element, as gelu (exp is a library call)
  }
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
  static constexpr const char* kSpecHelp = "  silu_backward N          grad * s (1 + x (1 - s)), s = sigmoid(x) (SiluBackward's call)\n";

  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    return pointwise_spec(d, 2, ", ");
  }
};
inline constexpr EntryPoint<SiluBackward> silu_backward{};  // NOLINT(readability-identifier-naming)

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
// the argument, as torch's python_arg_parser does: layers/python/strata/_ops.py).

// The C++ entry point of a name with several operators: each call resolved by its argument types.
template <typename... Entries>
struct Overloads : Entries... {
  using Entries::operator()...;
};

// The spec of a pointwise op over one tensor and a Python float given as `value` (an int in the spec:
// SpecArg carries ints, and the binding layer takes an int for a float), with the op's other arguments
// at their defaults.
inline SpecCall scalar_spec(const std::vector<int64_t>& d, const char* joiner, int64_t value) {
  SpecCall c = pointwise_spec(d, 1, "");
  c.args.push_back(SpecArg::integer(value));
  c.description += joiner + std::to_string(value);
  return c;
}

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
  static constexpr const char* kSpecHelp = "  mul N | shape            a * b, same shapes                         e.g. mul 1048576\n";

  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    return pointwise_spec(d, 2, " * ");
  }
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
  static constexpr const char* kSpecHelp = "  mul.Scalar N | shape     self * other, a number (2 here)           e.g. mul.Scalar 1048576\n";

  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    return scalar_spec(d, " * ", 2);
  }
};
inline constexpr Overloads<EntryPoint<Mul>, EntryPoint<MulScalar>> mul{};  // NOLINT(readability-identifier-naming)

// True division (aten::div.Tensor / aten::div.Scalar with rounding_mode=None), IEEE as PyTorch's: x / 0 is
// +-inf, 0 / 0 NaN, the sign of a zero quotient the XOR of the operands' signs. Python's `x / y` and
// `x / 2.0`; `2.0 / x` is torch's reciprocal(x) * 2.0 (pow(x, -1) then mul.Scalar: layers/python/strata).
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
  static constexpr const char* kSpecHelp = "  div N | shape            a / b, same shapes                         e.g. div 1048576\n";

  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    return pointwise_spec(d, 2, " / ");
  }
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
  static constexpr const char* kSpecHelp = "  div.Scalar N | shape     self / other, a number (2 here)           e.g. div.Scalar 1048576\n";

  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    return scalar_spec(d, " / ", 2);
  }
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
  static constexpr const char* kSpecHelp = "  add.Scalar N | shape     self + other, a number (1 here)           e.g. add.Scalar 1048576\n";

  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    return scalar_spec(d, " + ", 1);
  }
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
  static constexpr const char* kSpecHelp = "  sub N | shape            a - b, same shapes                         e.g. sub 1048576\n";

  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    return pointwise_spec(d, 2, " - ");  // alpha keeps its default, 1
  }
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
  static constexpr const char* kSpecHelp = "  sub.Scalar N | shape     self - other, a number (1 here)           e.g. sub.Scalar 1048576\n";

  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    return scalar_spec(d, " - ", 1);
  }
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
  static constexpr const char* kSpecHelp = "  tanh N | shape           N elements, tanh(x)                        e.g. tanh 1048576\n";

  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    return pointwise_spec(d, 1, "");  // flops: one per element, as gelu (tanh is a library call)
  }
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
  static constexpr const char* kSpecHelp = "  pow N | shape            x ^ exponent (3 here, the tanh GELU's cube) e.g. pow 1048576\n";

  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    return scalar_spec(d, " ^ ", 3);
  }
};
inline constexpr EntryPoint<Pow> pow{};  // NOLINT(readability-identifier-naming): called like a function

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

// ---- Gradient ops ---------------------------------------------------------------------------------------
// What the backward formulas call (Note [The autograd graph], layers/autograd). Each is an operator like
// any other: a schema, kernels on both backends, a float64 reference, a spec so `strata trace` can trace
// it alone. Their own Autograd nodes have no formula: strata computes first derivatives only.

struct Gemm {
  static constexpr const char* kName = "gemm";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema =
      "gemm(Tensor self, Tensor other, int transpose_self=0, int transpose_other=0) -> Tensor";
  using Signature = Tensor(const Tensor& self, const Tensor& other, int64_t transpose_self, int64_t transpose_other);
  static constexpr KernelDecl kCpu{&kernels::cpu::gemm, "layers/kernels/cpu/gemm.cpp (OpenBLAS gemm with Trans flags)"};
  static constexpr bool kGemmOperands = true;  // a transposed view is read as it lies (Note [Transposed GEMM operands])
  static constexpr KernelDecl kCuda{&kernels::cuda::gemm, "layers/kernels/cuda/cublas_gemm.cpp (cublasGemmEx with op flags)"};
  static constexpr bool kCudaGemmOperands = true;  // cublasGemmEx reads a transposed view with an op flag
  static constexpr auto kReference = &reference::gemm;
  static constexpr BackwardDecl kBackward{"GemmBackward", 0};
  static constexpr const char* kSpecHelp =
      "gradient ops (what --backward calls; each traces alone too):\n"
      "  gemm MxKxN               op(A) @ op(B), transposes as flags (0 here)   e.g. gemm 3072x32x768\n";

  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions&, std::string_view typed) {
    if (d.size() != 3) throw UsageError("gemm takes MxKxN, got '" + std::string(typed) + "'");
    SpecCall c;
    const Shape a{d[0], d[1]}, b{d[1], d[2]};
    c.args = {SpecArg::tensor(a), SpecArg::tensor(b), SpecArg::integer(0), SpecArg::integer(0)};
    c.outputs = {op_shapes::gemm(a, b, 0, 0)};
    c.description = spec_text::bracket(a) + " @ " + spec_text::bracket(b);
    c.gemm_shape = spec_text::dims(d, 0, 3);
    c.flops = 2.0 * spec_text::elements(d);
    return c;
  }
};
inline constexpr EntryPoint<Gemm> gemm{};  // NOLINT(readability-identifier-naming): called like a function

struct Sum {
  static constexpr const char* kName = "sum";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "sum(Tensor self) -> Tensor";
  using Signature = Tensor(const Tensor& self);
  static constexpr KernelDecl kCpu{&kernels::cpu::sum, "layers/kernels/cpu/pointwise.cpp (loop, f64 accumulator)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::sum, "layers/kernels/cuda/pointwise.cu (strata's own reduction)"};
  static constexpr auto kReference = &reference::sum;
  static constexpr auto kReferenceBackward = &reference::sum_backward;  // float64 gradients
  // Saves self for its shape only: strata's nodes save tensors, not sizes (docs/autograd.md).
  static constexpr BackwardDecl kBackward{"SumBackward", 0b1};
  // SumBackward: expand_as(grad, self).
  static GradList backward(const RecordedNode& node, const Tensor& grad);
  static constexpr const char* kSpecHelp = "  sum N | shape            all elements -> one (the seed of y.sum().backward())\n";

  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    SpecCall c = pointwise_spec(d, 1, "");
    c.outputs = {Shape{}};
    c.elements_moved = spec_text::elements(d) + 1;
    return c;
  }
};
inline constexpr EntryPoint<Sum> sum{};  // NOLINT(readability-identifier-naming): called like a function

struct OnesLike {
  static constexpr const char* kName = "ones_like";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "ones_like(Tensor self) -> Tensor";
  using Signature = Tensor(const Tensor& self);
  static constexpr KernelDecl kCpu{&kernels::cpu::ones_like, "layers/kernels/cpu/pointwise.cpp (fill loop)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::ones_like, "layers/kernels/cuda/pointwise.cu (strata's own fill kernel)"};
  static constexpr auto kReference = &reference::ones_like;
  static constexpr BackwardDecl kBackward{"OnesLikeBackward", 0};
  static constexpr const char* kSpecHelp = "  ones_like N | shape      ones of self's shape (the gradient a backward pass starts from)\n";

  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    SpecCall c = pointwise_spec(d, 1, "");
    c.flops = 0;
    c.elements_moved = spec_text::elements(d);  // written only
    return c;
  }
};
inline constexpr EntryPoint<OnesLike> ones_like{};  // NOLINT(readability-identifier-naming): called like a function

struct ExpandAs {
  static constexpr const char* kName = "expand_as";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "expand_as(Tensor self, Tensor other) -> Tensor";
  using Signature = Tensor(const Tensor& self, const Tensor& other);
  static constexpr KernelDecl kCpu{&kernels::cpu::expand_as, "layers/kernels/cpu/pointwise.cpp (fill loop)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::expand_as, "layers/kernels/cuda/pointwise.cu (strata's own fill kernel)"};
  static constexpr auto kReference = &reference::expand_as;
  static constexpr BackwardDecl kBackward{"ExpandBackward", 0};
  static constexpr const char* kSpecHelp = "  expand_as N | shape      one element broadcast to the shape (SumBackward's call)\n";

  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    SpecCall c;
    const Shape one{1}, s = spec_text::shape(d);
    c.args = {SpecArg::tensor(one), SpecArg::tensor(s)};
    c.outputs = {s};
    c.description = spec_text::bracket(one) + " -> " + spec_text::bracket(s);
    c.elements_moved = spec_text::elements(d) + 1;
    return c;
  }
};
inline constexpr EntryPoint<ExpandAs> expand_as{};  // NOLINT(readability-identifier-naming): called like a function


// The gradient ops of views (Note [Views through the dispatcher]).
struct SliceBackward {
  static constexpr const char* kName = "slice_backward";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema =
      "slice_backward(Tensor grad_output, Tensor self, int dim, int start, int step=1) -> Tensor";
  using Signature = Tensor(const Tensor& grad_output, const Tensor& self, int64_t dim, int64_t start, int64_t step);
  static constexpr KernelDecl kCpu{&kernels::cpu::slice_backward, "layers/kernels/cpu/copy.cpp (zero fill + strided copy)"};
  static constexpr NoKernel kCuda{};
  static constexpr auto kReference = &reference::slice_backward;
  static constexpr BackwardDecl kBackward{"SliceBackwardBackward", 0};
  static constexpr const char* kSpecHelp =
      "  slice_backward shape     grad of `slice shape` written into zeros (SliceBackward's call)\n";
  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions&, std::string_view typed) {
    view_spec_dims("slice_backward", d, 1, 4, typed);
    if (d.back() < 2) throw UsageError("slice_backward: the last size must be at least 2, got '" + std::string(typed) + "'");
    const auto last = static_cast<int64_t>(d.size() - 1);
    SpecCall c;
    Shape grad = spec_text::shape(d);
    grad[static_cast<int>(last)] = d.back() / 2;
    c.args = {SpecArg::tensor(grad), SpecArg::tensor(spec_text::shape(d)), SpecArg::integer(last), SpecArg::integer(1),
              SpecArg::integer(2)};
    c.outputs = {spec_text::shape(d)};
    c.description = spec_text::bracket(grad) + " into zeros " + spec_text::bracket(spec_text::shape(d));
    c.elements_moved = spec_text::elements(d) + double(grad.numel());
    return c;
  }
};
inline constexpr EntryPoint<SliceBackward> slice_backward{};  // NOLINT(readability-identifier-naming)

struct SumTo {
  static constexpr const char* kName = "sum_to";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "sum_to(Tensor grad_output, Tensor self) -> Tensor";
  using Signature = Tensor(const Tensor& grad_output, const Tensor& self);
  static constexpr KernelDecl kCpu{&kernels::cpu::sum_to, "layers/kernels/cpu/copy.cpp (loop, f64 accumulator)"};
  static constexpr NoKernel kCuda{};
  static constexpr auto kReference = &reference::sum_to;
  static constexpr BackwardDecl kBackward{"SumToBackward", 0};
  static constexpr const char* kSpecHelp =
      "  sum_to shape             summed over dim 0 to [1,...] (ExpandBackward's call)\n";
  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions&, std::string_view typed) {
    view_spec_dims("sum_to", d, 1, 4, typed);
    std::vector<int64_t> small = d;
    small[0] = 1;
    SpecCall c;
    c.args = {SpecArg::tensor(spec_text::shape(d)), SpecArg::tensor(spec_text::shape(small))};
    c.outputs = {spec_text::shape(small)};
    c.description = spec_text::bracket(spec_text::shape(d)) + " -> " + spec_text::bracket(spec_text::shape(small));
    c.flops = spec_text::elements(d);
    c.elements_moved = spec_text::elements(d) + spec_text::elements(small);
    return c;
  }
};
inline constexpr EntryPoint<SumTo> sum_to{};  // NOLINT(readability-identifier-naming)

// ---- Reductions over dims ------------------------------------------------------------------------------
// Note [Reductions over dims]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// PyTorch's sum.dim_IntList, mean.dim and mean, with torch's shape rule (op_shapes::reduce_dims): negative
// dims, several dims, keepdim, an empty list meaning every dim, IndexRangeError for a dim out of range and
// UsageError for a dim listed twice. PyTorch's schemas say `int[1]? dim`; strata's schema parser has no
// optional int list, so the dim argument is `int[] dim` (required, as torch's is; None is the plain op:
// the Python frontend sends x.sum(dim=None) to `sum`, x.mean(dim=None) to `mean`). The gradient is the
// output's gradient reshaped to the keepdim shape and expanded back over the reduced dims (divided by the
// count for mean): reshape, expand and contiguous/mul, dispatcher calls with their rows, as PyTorch's
// sum_backward/mean_backward. CPU only: `strata ops` shows the CUDA key empty.
//
// The spec of `strata trace` reduces the last dim (dim=[-1], keepdim=False): `sum.dim_IntList 64x128`
// is [64,128] -> [64]. The CLI has no option for other dims yet.
inline SpecCall reduction_spec(const char* op, std::vector<int64_t>& d, std::string_view typed, bool last_dim) {
  view_spec_dims(op, d, 1, 4, typed);
  SpecCall c;
  const Shape s = spec_text::shape(d);
  const Shape dim = last_dim ? Shape{-1} : Shape{};
  const Shape out = op_shapes::reduce_dims(op, s, dim, false).out;
  c.args = {SpecArg::tensor(s)};
  if (last_dim) c.args.push_back(SpecArg::int_list(dim));
  c.outputs = {out};
  c.description = spec_text::bracket(s) + (last_dim ? " over dim -1 -> " : " -> ") + spec_text::bracket(out);
  c.flops = spec_text::elements(d);
  c.elements_moved = spec_text::elements(d) + double(out.numel());
  return c;
}

struct SumDim {
  static constexpr const char* kName = "sum.dim_IntList";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema =
      "sum.dim_IntList(Tensor self, int[] dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor";
  using Signature = Tensor(const Tensor& self, const Shape& dim, bool keepdim, std::optional<DType> dtype);
  static constexpr KernelDecl kCpu{&kernels::cpu::sum_dim, "layers/kernels/cpu/reduce.cpp (loop, f64 accumulator)"};
  static constexpr NoKernel kCuda{};
  static constexpr auto kReference = &reference::sum_dim;
  static constexpr auto kReferenceBackward = &reference::sum_dim_backward;
  static constexpr BackwardDecl kBackward{"SumBackward1", 0};  // the input's sizes and dtype are kept anyway
  static GradList backward(const RecordedNode& node, const Tensor& grad);
  static constexpr const char* kSpecHelp =
      "reductions (CPU only; docs/python.md):\n"
      "  sum.dim_IntList shape    summed over the last dim (dim=[-1])          e.g. sum.dim_IntList 64x128\n";
  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions&, std::string_view typed) {
    return reduction_spec("sum.dim_IntList", d, typed, true);
  }
};
inline constexpr EntryPoint<SumDim> sum_dim{};  // NOLINT(readability-identifier-naming): called like a function

struct MeanDim {
  static constexpr const char* kName = "mean.dim";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema =
      "mean.dim(Tensor self, int[] dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor";
  using Signature = Tensor(const Tensor& self, const Shape& dim, bool keepdim, std::optional<DType> dtype);
  static constexpr KernelDecl kCpu{&kernels::cpu::mean_dim, "layers/kernels/cpu/reduce.cpp (loop, f64 accumulator)"};
  static constexpr NoKernel kCuda{};
  static constexpr auto kReference = &reference::mean_dim;
  static constexpr auto kReferenceBackward = &reference::mean_dim_backward;
  static constexpr BackwardDecl kBackward{"MeanBackward1", 0};
  static GradList backward(const RecordedNode& node, const Tensor& grad);
  static constexpr const char* kSpecHelp =
      "  mean.dim shape           the mean over the last dim (dim=[-1])        e.g. mean.dim 64x128\n";
  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions&, std::string_view typed) {
    return reduction_spec("mean.dim", d, typed, true);
  }
};
inline constexpr EntryPoint<MeanDim> mean_dim{};  // NOLINT(readability-identifier-naming): called like a function

struct Mean {
  static constexpr const char* kName = "mean";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "mean(Tensor self, *, ScalarType? dtype=None) -> Tensor";
  using Signature = Tensor(const Tensor& self, std::optional<DType> dtype);
  static constexpr KernelDecl kCpu{&kernels::cpu::mean, "layers/kernels/cpu/reduce.cpp (loop, f64 accumulator)"};
  static constexpr NoKernel kCuda{};
  static constexpr auto kReference = &reference::mean;
  static constexpr auto kReferenceBackward = &reference::mean_backward;
  static constexpr BackwardDecl kBackward{"MeanBackward0", 0};
  static GradList backward(const RecordedNode& node, const Tensor& grad);
  static constexpr const char* kSpecHelp =
      "  mean N | shape           the mean of all elements -> one              e.g. mean 1048576\n";
  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions&, std::string_view typed) {
    return reduction_spec("mean", d, typed, false);
  }
};
inline constexpr EntryPoint<Mean> mean{};  // NOLINT(readability-identifier-naming): called like a function

struct ThresholdBackward {
  static constexpr const char* kName = "threshold_backward";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema =
      "threshold_backward(Tensor grad_output, Tensor self, float threshold=0) -> Tensor";
  using Signature = Tensor(const Tensor& grad_output, const Tensor& self, double threshold);
  static constexpr KernelDecl kCpu{&kernels::cpu::threshold_backward, "layers/kernels/cpu/pointwise.cpp (vectorised loop)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::threshold_backward, "layers/kernels/cuda/pointwise.cu (strata's own kernel)"};
  static constexpr auto kReference = &reference::threshold_backward;
  static constexpr BackwardDecl kBackward{"ThresholdBackwardBackward", 0};
  static constexpr const char* kSpecHelp = "  threshold_backward N     grad where self > 0, else 0 (ReluBackward's call)\n";

  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    return pointwise_spec(d, 2, ", ");  // threshold keeps its default, 0
  }
};
inline constexpr EntryPoint<ThresholdBackward> threshold_backward{};  // NOLINT(readability-identifier-naming)

struct GeluBackward {
  static constexpr const char* kName = "gelu_backward";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "gelu_backward(Tensor grad_output, Tensor self) -> Tensor";
  using Signature = Tensor(const Tensor& grad_output, const Tensor& self);
  static constexpr KernelDecl kCpu{&kernels::cpu::gelu_backward, "layers/kernels/cpu/pointwise.cpp (gradient loop over math::Gelu)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::gelu_backward, "layers/kernels/cuda/pointwise.cu (unary_gradient_kernel<math::Gelu>)"};
  static constexpr auto kReference = &reference::gelu_backward;
  static constexpr BackwardDecl kBackward{"GeluBackwardBackward", 0};
  static constexpr const char* kSpecHelp = "  gelu_backward N          grad * (Phi(x) + x phi(x)) (GeluBackward's call)\n";

  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    return pointwise_spec(d, 2, ", ");
  }
};
inline constexpr EntryPoint<GeluBackward> gelu_backward{};  // NOLINT(readability-identifier-naming)

struct TanhBackward {
  static constexpr const char* kName = "tanh_backward";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "tanh_backward(Tensor grad_output, Tensor output) -> Tensor";
  using Signature = Tensor(const Tensor& grad_output, const Tensor& output);
  static constexpr KernelDecl kCpu{&kernels::cpu::tanh_backward, "layers/kernels/cpu/pointwise.cpp (gradient loop over math::Tanh)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::tanh_backward, "layers/kernels/cuda/pointwise.cu (unary_gradient_kernel<math::Tanh>)"};
  static constexpr auto kReference = &reference::tanh_backward;
  static constexpr BackwardDecl kBackward{"TanhBackwardBackward", 0};
  static constexpr const char* kSpecHelp = "  tanh_backward N          grad * (1 - y^2) (TanhBackward's call)\n";

  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    return pointwise_spec(d, 2, ", ");
  }
};
inline constexpr EntryPoint<TanhBackward> tanh_backward{};  // NOLINT(readability-identifier-naming)

struct BiasBackward {
  static constexpr const char* kName = "bias_backward";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "bias_backward(Tensor grad_output) -> Tensor";
  using Signature = Tensor(const Tensor& grad_output);
  static constexpr KernelDecl kCpu{&kernels::cpu::bias_backward, "layers/kernels/cpu/pointwise.cpp (loop, f64 accumulator)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::bias_backward, "layers/kernels/cuda/pointwise.cu (strata's own reduction)"};
  static constexpr auto kReference = &reference::bias_backward;
  static constexpr BackwardDecl kBackward{"BiasBackwardBackward", 0};
  static constexpr const char* kSpecHelp =
      "  bias_backward BxC | NxCxHxW   sum over all dims but C (linear's and conv's bias gradient)\n";

  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions&, std::string_view typed) {
    if (d.size() != 2 && d.size() != 4)
      throw UsageError("bias_backward takes BxC or NxCxHxW, got '" + std::string(typed) + "'");
    SpecCall c = pointwise_spec(d, 1, "");
    c.outputs = {op_shapes::bias_backward(spec_text::shape(d))};
    c.elements_moved = spec_text::elements(d) + double(d[1]);
    return c;
  }
};
inline constexpr EntryPoint<BiasBackward> bias_backward{};  // NOLINT(readability-identifier-naming)

// The spec of a conv2d gradient: the conv's own spec, with the gradient of its output in front.
inline SpecCall conv_backward_spec(std::vector<int64_t>& d, const ConvOptions& options, std::string_view typed,
                                   const char* what) {
  SpecCall conv = conv_spec(d, options, typed);
  SpecCall c;
  c.args = {SpecArg::tensor(conv.outputs.front()), conv.args[0], conv.args[1], conv.args[3], conv.args[4]};
  c.outputs = {what[0] == 'i' ? conv.args[0].shape : conv.args[1].shape};
  c.description = std::string(what) + " of conv2d " + conv.description;
  c.gemm_shape = conv.gemm_shape;
  // Each gradient is one GEMM of the forward's size, with no bias add.
  const Shape& out = conv.outputs.front();
  c.flops = conv.flops - double(out.dims[0]) * double(out.dims[1]) * double(out.dims[2]) * double(out.dims[3]);
  c.workspace_dims = conv.workspace_dims;
  return c;
}

struct Conv2dInputBackward {
  static constexpr const char* kName = "conv2d_input_backward";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema =
      "conv2d_input_backward(Tensor grad_output, Tensor input, Tensor weight, int stride=1, int padding=0) -> Tensor";
  using Signature = Tensor(const Tensor& grad_output, const Tensor& input, const Tensor& weight, int64_t stride,
                           int64_t padding);
  static constexpr KernelDecl kCpu{&kernels::cpu::conv2d_input_backward, "layers/kernels/cpu/conv.cpp (OpenBLAS gemm + col2im)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::conv2d_input_backward, "layers/kernels/cuda/cudnn_conv.cpp (cuDNN backward data)"};
  static constexpr auto kReference = &reference::conv2d_input_backward;
  static constexpr BackwardDecl kBackward{"ConvolutionBackwardBackward", 0};
  static constexpr const char* kSpecHelp =
      "  conv2d_input_backward NxCxHxW    the input gradient of `conv NxCxHxW` (same options)\n";
  static constexpr bool kReadsConvOptions = true;
  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions& conv, std::string_view typed) {
    return conv_backward_spec(d, conv, typed, "input gradient");
  }
};
inline constexpr EntryPoint<Conv2dInputBackward> conv2d_input_backward{};  // NOLINT(readability-identifier-naming)

struct Conv2dWeightBackward {
  static constexpr const char* kName = "conv2d_weight_backward";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema =
      "conv2d_weight_backward(Tensor grad_output, Tensor input, Tensor weight, int stride=1, int padding=0) -> Tensor";
  using Signature = Tensor(const Tensor& grad_output, const Tensor& input, const Tensor& weight, int64_t stride,
                           int64_t padding);
  static constexpr KernelDecl kCpu{&kernels::cpu::conv2d_weight_backward, "layers/kernels/cpu/conv.cpp (im2col + OpenBLAS gemm)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::conv2d_weight_backward, "layers/kernels/cuda/cudnn_conv.cpp (cuDNN backward filter)"};
  static constexpr auto kReference = &reference::conv2d_weight_backward;
  static constexpr BackwardDecl kBackward{"ConvolutionBackwardBackward", 0};
  static constexpr const char* kSpecHelp =
      "  conv2d_weight_backward NxCxHxW   the weight gradient of `conv NxCxHxW` (same options)\n";
  static constexpr bool kReadsConvOptions = true;
  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions& conv, std::string_view typed) {
    return conv_backward_spec(d, conv, typed, "weight gradient");
  }
};
inline constexpr EntryPoint<Conv2dWeightBackward> conv2d_weight_backward{};  // NOLINT(readability-identifier-naming)
// The cast: PyTorch's _to_copy(Tensor self, *, ScalarType? dtype=None), a copy in another dtype (the
// input's own when dtype is None). Autocast calls it for every input it casts (layers/dispatch/autocast.h),
// so the casts are real calls with their own dispatch and library work in the breakdown. It has no autocast
// policy of its own: the Autocast key falls through for it, as for any op without one.
struct ToCopy {
  static constexpr const char* kName = "to_copy";
  static constexpr std::string_view kAlias = "_to_copy";
  static constexpr const char* kSchema = "to_copy(Tensor self, *, ScalarType? dtype=None) -> Tensor";
  using Signature = Tensor(const Tensor& self, std::optional<DType> dtype);
  static constexpr KernelDecl kCpu{&kernels::cpu::to_copy, "layers/kernels/cpu/convert.cpp (conversion loop)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::to_copy, "layers/kernels/cuda/pointwise.cu (strata's own kernel)"};
  static constexpr auto kReference = &reference::to_copy;
  static constexpr auto kReferenceBackward = &reference::to_copy_backward;  // float64 gradients
  // ToCopyBackward: the incoming gradient cast back to the input's dtype, so that a leaf's .grad has the
  // leaf's dtype under Autocast. PyTorch's ToCopyBackward0 keeps only the input's options; strata's nodes
  // save tensors, not options, so the input is saved (it is alive anyway: it is the leaf or its producer's
  // output).
  static constexpr BackwardDecl kBackward{"ToCopyBackward", 0b1};
  static GradList backward(const RecordedNode& node, const Tensor& grad);
  static constexpr const char* kSpecHelp = "  to_copy N | shape        a copy (the cast Autocast calls; --dtype sets both sides)  e.g. to_copy 1048576\n";

  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    return pointwise_spec(d, 1, "");  // dtype keeps its default: a same-dtype copy
  }
};
inline constexpr EntryPoint<ToCopy> to_copy{};  // NOLINT(readability-identifier-naming): called like a function

// An operand cast to the dtype its op computes in (Note [Type promotion]): a to_copy call of its own, made
// below the Autograd key (the op's node records the operand as given, and its formula casts the gradient
// back) and inside an InnerCallGuard, as contiguous_for_kernel's copy is.
inline Tensor promoted_for_kernel(const Tensor& t, DType dtype) {
  if (t.dtype() == dtype) return t;
  const ExcludeKeyGuard below_autograd(DispatchKey::kAutograd);
  const InnerCallGuard inner;
  return ops::to_copy(t, dtype);
}

// ---- In-place ops ------------------------------------------------------------------------------------
// Note [In-place operators]
// relu_, add_, mul_ and mul_.Scalar write self and return it (schema `Tensor(a!) self ... -> Tensor(a!)`, PyTorch's
// alias annotation: the binding layer reads the '!'). kInPlace makes the registration
//   - on the CPU key: cast `other` to self's dtype and make it contiguous (to_copy / contiguous calls of
//     their own), pass self as it is (its kernel writes through its strides), then bump self's storage's
//     version (Note [Version counter] in lib/storage.h), so it is bumped under no_grad too;
//   - on the Autograd key: record nothing and refuse what strata cannot differentiate: a leaf that
//     requires grad (PyTorch's own error), and a non-leaf that requires grad or an operand that does
//     (PyTorch would rebase the tensor's history onto a new node; strata refuses, docs/autograd.md).
// No CUDA kernels yet (NoKernel): the dispatcher refuses a CUDA call with the keys that have kernels.
// The reference is the out-of-place op's: the values self holds after the call.
struct ReluInPlace {
  static constexpr const char* kName = "relu_";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "relu_(Tensor(a!) self) -> Tensor(a!)";
  static constexpr const char* kTorchName = "torch.Tensor.relu_";  // the --peer torch counterpart
  using Signature = Tensor(const Tensor& self);
  static constexpr KernelDecl kCpu{&kernels::cpu::relu_inplace, "layers/kernels/cpu/inplace.cpp (relu loop, written into self)"};
  static constexpr NoKernel kCuda{"none (in-place ops are CPU only for now)"};
  static constexpr auto kReference = &reference::relu;
  static constexpr bool kInPlace = true;
  static constexpr BackwardDecl kBackward{"(none: in-place, refused when grad is needed)", 0};
  static constexpr const char* kSpecHelp = "  relu_ N | shape          relu in place on self                     e.g. relu_ 1048576\n";

  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    return pointwise_spec(d, 1, "");
  }
};
inline constexpr EntryPoint<ReluInPlace> relu_{};  // NOLINT(readability-identifier-naming): called like a function

struct AddInPlace {
  static constexpr const char* kName = "add_";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "add_(Tensor(a!) self, Tensor other, *, float alpha=1) -> Tensor(a!)";  // aten::add_.Tensor
  static constexpr const char* kTorchName = "torch.Tensor.add_";  // the --peer torch counterpart
  using Signature = Tensor(const Tensor& self, const Tensor& other, double alpha);
  static constexpr KernelDecl kCpu{&kernels::cpu::add_inplace, "layers/kernels/cpu/inplace.cpp (add loop, written into self)"};
  static constexpr NoKernel kCuda{"none (in-place ops are CPU only for now)"};
  static constexpr auto kReference = &reference::add;
  static constexpr bool kInPlace = true;
  static constexpr BackwardDecl kBackward{"(none: in-place, refused when grad is needed)", 0};
  static constexpr const char* kSpecHelp = "  add_ N | shape           self += other, same shapes                e.g. add_ 1048576\n";

  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    return pointwise_spec(d, 2, " += ");
  }
};
inline constexpr EntryPoint<AddInPlace> add_{};  // NOLINT(readability-identifier-naming): called like a function

struct MulInPlace {
  static constexpr const char* kName = "mul_";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "mul_(Tensor(a!) self, Tensor other) -> Tensor(a!)";  // aten::mul_.Tensor
  static constexpr const char* kTorchName = "torch.Tensor.mul_";  // the --peer torch counterpart
  using Signature = Tensor(const Tensor& self, const Tensor& other);
  static constexpr KernelDecl kCpu{&kernels::cpu::mul_inplace, "layers/kernels/cpu/inplace.cpp (mul loop, written into self)"};
  static constexpr NoKernel kCuda{"none (in-place ops are CPU only for now)"};
  static constexpr auto kReference = &reference::mul;
  static constexpr bool kInPlace = true;
  static constexpr BackwardDecl kBackward{"(none: in-place, refused when grad is needed)", 0};
  static constexpr const char* kSpecHelp = "  mul_ N | shape           self *= other, same shapes                e.g. mul_ 1048576\n";

  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    return pointwise_spec(d, 2, " *= ");
  }
};

struct MulScalarInPlace {
  static constexpr const char* kName = "mul_.Scalar";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "mul_.Scalar(Tensor(a!) self, float other=1) -> Tensor(a!)";  // aten::mul_.Scalar
  static constexpr const char* kTorchName = "torch.Tensor.mul_";  // the --peer torch counterpart
  using Signature = Tensor(const Tensor& self, double other);
  static constexpr KernelDecl kCpu{&kernels::cpu::mul_scalar_inplace, "layers/kernels/cpu/inplace.cpp (mul.Scalar loop, written into self)"};
  static constexpr NoKernel kCuda{"none (in-place ops are CPU only for now)"};
  static constexpr auto kReference = &reference::mul_scalar;
  static constexpr bool kInPlace = true;
  static constexpr BackwardDecl kBackward{"(none: in-place, refused when grad is needed)", 0};
  // -1: every timed call flips the signs, so thousands of calls neither overflow nor drift to zero.
  static constexpr const char* kSpecHelp = "  mul_.Scalar N | shape    self *= other, a number (-1 here)         e.g. mul_.Scalar 1048576\n";

  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    return scalar_spec(d, " *= ", -1);
  }
};
// x.mul_(y) and x.mul_(2.0): one C++ name, two operators (Note [Overloads]).
inline constexpr Overloads<EntryPoint<MulInPlace>, EntryPoint<MulScalarInPlace>> mul_{};  // NOLINT(readability-identifier-naming)

// Whether an op writes its first argument in place (Note [In-place operators]).
template <typename Op>
inline constexpr bool kInPlace = requires { Op::kInPlace; };
// Whether an op names its PyTorch counterpart (kTorchName), the function --peer torch calls.
template <typename Op>
inline constexpr bool kHasTorchName = requires { Op::kTorchName; };

// Whether an op's spec reads the conv options; an op declares kReadsConvOptions only if it does, and the
// frontend refuses those options for every other op.
template <typename Op>
inline constexpr bool kReadsConvOptions = requires { Op::kReadsConvOptions; };
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

using AllOps = OpList<Matmul, Linear, Conv2d, Relu, Add, Gelu, ToCopy, Mul, MulScalar, AddScalar, Sub, SubScalar, Tanh,
                      Pow, Gemm, Sum, OnesLike, ExpandAs, ThresholdBackward, GeluBackward, TanhBackward, BiasBackward,
                      Conv2dInputBackward, Conv2dWeightBackward, Transpose, TransposeMatrix, Permute, View,
                      Reshape, Expand, Narrow, Select, Slice, Unsqueeze, Squeeze, Contiguous, SliceBackward, SumTo,
                      ReluInPlace, AddInPlace, MulInPlace, MulScalarInPlace, SumDim, MeanDim, Mean, Div, DivScalar,
                      Silu, SiluBackward>;

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

// A gradient of `shape`'s broadcast (the batch dims matmul broadcast) summed back to `shape`, as sum_to
// does for the broadcasting ops (Note [Broadcast gradients] below).
inline Tensor summed_to(const Tensor& g, const Shape& shape) {
  if (g.sizes() == shape) return g;
  Shape zeros;
  zeros.ndim = shape.ndim;
  return ops::sum_to(g, g.as_strided(shape, zeros, g.storage_offset()));
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
  const auto stride = static_cast<int64_t>(node.scalar(3)), padding = static_cast<int64_t>(node.scalar(4));
  if (node.needs_grad(0)) g[0] = ops::conv2d_input_backward(grad, node.input(0), node.input(1), stride, padding);
  if (node.needs_grad(1)) g[1] = ops::conv2d_weight_backward(grad, node.input(0), node.input(1), stride, padding);
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
  if (!(g.sizes() == operand)) {
    Shape zeros;
    zeros.ndim = operand.ndim;
    g = ops::sum_to(g, g.as_strided(operand, zeros, g.storage_offset()));
  }
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

inline GradList Silu::backward(const RecordedNode& node, const Tensor& grad) {
  GradList g;
  g[0] = ops::silu_backward(grad, node.input(0));
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
  g[0] = ops::expand_as(grad, node.input(0));
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
  g[0] = ops::reshape(grad, node.input(0).sizes());
  return g;
}
inline GradList View::backward(const RecordedNode& node, const Tensor& grad) { return reshape_back(node, grad); }
inline GradList Reshape::backward(const RecordedNode& node, const Tensor& grad) { return reshape_back(node, grad); }
inline GradList Unsqueeze::backward(const RecordedNode& node, const Tensor& grad) { return reshape_back(node, grad); }
inline GradList Squeeze::backward(const RecordedNode& node, const Tensor& grad) { return reshape_back(node, grad); }

inline GradList Expand::backward(const RecordedNode& node, const Tensor& grad) {
  GradList g;
  g[0] = ops::sum_to(grad, node.input(0));
  return g;
}

inline GradList Narrow::backward(const RecordedNode& node, const Tensor& grad) {
  const Tensor& self = node.input(0);
  const int64_t dim = views::wrap_dim("narrow", static_cast<int64_t>(node.scalar(1)), self.dim(), self);
  const auto start = static_cast<int64_t>(node.scalar(2));
  GradList g;
  g[0] = ops::slice_backward(grad, self, dim, start < 0 ? start + self.size(static_cast<int>(dim)) : start, 1);
  return g;
}

inline GradList Select::backward(const RecordedNode& node, const Tensor& grad) {
  const Tensor& self = node.input(0);
  const int64_t dim = views::wrap_dim("select", static_cast<int64_t>(node.scalar(1)), self.dim(), self);
  const auto index = static_cast<int64_t>(node.scalar(2));
  GradList g;
  g[0] = ops::slice_backward(ops::unsqueeze(grad, dim), self, dim,
                             index < 0 ? index + self.size(static_cast<int>(dim)) : index, 1);
  return g;
}

inline GradList Slice::backward(const RecordedNode& node, const Tensor& grad) {
  const Tensor& self = node.input(0);
  const int64_t dim = views::wrap_dim("slice", static_cast<int64_t>(node.scalar(1)), self.dim(), self);
  // The start the forward used: clamped into [0, size] as Python's slices are. Saved as a double, exact
  // for every start that can be inside a tensor (below 2^53).
  const int64_t n = self.size(static_cast<int>(dim)), start = static_cast<int64_t>(node.scalar(2));
  const int64_t first = start < 0 ? std::max<int64_t>(start + n, 0) : std::min(start, n);
  GradList g;
  g[0] = ops::slice_backward(grad, self, dim, first, static_cast<int64_t>(node.scalar(4)));
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
