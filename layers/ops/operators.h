// Note [One declaration per operator]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Every operator strata knows is one struct in this file, and the list at the bottom names them all:
// the analogue of PyTorch's native_functions.yaml (plus the node name derivatives.yaml gives). A
// declaration says
//   kName, kAlias     the operator's name (binding, dispatcher, reports) and another the CLI accepts
//   kSchema           the public contract, parsed by the binding layer; its argument types must match
//   Signature         the C++ arguments of every kernel, in schema order
//   kCpu, kCuda       the backend kernels and where they live (`strata ops` prints it); NoKernel: none
//   kReference        the float64 reference every kernel is checked against (--check and the tests)
//   kBackward         the node the Autograd key records and what it saves
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
  using Signature = Tensor(const Tensor& self, const Tensor& other);
  static constexpr KernelDecl kCpu{&kernels::cpu::matmul, "layers/kernels/cpu/gemm.cpp (OpenBLAS cblas_sgemm / cblas_dgemm)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::matmul, "layers/kernels/cuda/cublas_gemm.cpp (cuBLAS)"};
  static constexpr auto kReference = &reference::matmul;
  static constexpr BackwardDecl kBackward{"MmBackward", 0b11};
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
  using Signature = Tensor(const Tensor& input, const Tensor& weight, const Tensor& bias);
  static constexpr KernelDecl kCpu{&kernels::cpu::linear, "layers/kernels/cpu/gemm.cpp (bias rows + OpenBLAS gemm, beta=1)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::linear, "layers/kernels/cuda/cublas_gemm.cpp (cuBLAS, bias epilogue)"};
  static constexpr auto kReference = &reference::linear;
  static constexpr BackwardDecl kBackward{"AddmmBackward", 0b11};
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
  using Signature = Tensor(const Tensor& input, const Tensor& weight, const Tensor& bias, int64_t stride,
                           int64_t padding);
  static constexpr KernelDecl kCpu{&kernels::cpu::conv2d, "layers/kernels/cpu/conv.cpp (im2col + OpenBLAS gemm)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::conv2d, "layers/kernels/cuda/cudnn_conv.cpp (cuDNN)"};
  static constexpr auto kReference = &reference::conv2d;
  static constexpr BackwardDecl kBackward{"ConvolutionBackward", 0b11};
  static constexpr AutocastPolicy kAutocast = AutocastPolicy::kLowerPrecision;
  static constexpr const char* kSpecHelp =
      "  conv NxCxHxW             input [N,C,H,W]; --out-channels K --kernel R --stride S --pad P\n"
      "                           e.g. conv 32x64x56x56 --out-channels 64 --kernel 3 --pad 1\n";

  static constexpr bool kReadsConvOptions = true;  // --out-channels, --kernel, --stride, --pad
  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions& conv, std::string_view typed);
};
inline constexpr EntryPoint<Conv2d> conv2d{};  // NOLINT(readability-identifier-naming): called like a function

inline SpecCall Conv2d::spec(std::vector<int64_t>& d, const ConvOptions& options, std::string_view typed) {
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
  c.flops = 2.0 * double(d[0]) * double(k) * double(d[1]) * double(r) * double(r) * double(g.out_height) *
            double(g.out_width);
  c.workspace_dims = {d[1], r, r, g.out_height, g.out_width};  // im2col columns of one image (the CPU's)
  return c;
}

struct Relu {
  static constexpr const char* kName = "relu";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "relu(Tensor self) -> Tensor";
  using Signature = Tensor(const Tensor& self);
  static constexpr KernelDecl kCpu{&kernels::cpu::relu, "layers/kernels/cpu/pointwise.cpp (vectorised loop)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::relu, "layers/kernels/cuda/pointwise.cu (strata's own kernel)"};
  static constexpr auto kReference = &reference::relu;
  static constexpr BackwardDecl kBackward{"ReluBackward", 0, /*saves_result=*/true};
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
  using Signature = Tensor(const Tensor& self, const Tensor& other, double alpha);
  static constexpr KernelDecl kCpu{&kernels::cpu::add, "layers/kernels/cpu/pointwise.cpp (vectorised loop)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::add, "layers/kernels/cuda/pointwise.cu (strata's own kernel)"};
  static constexpr auto kReference = &reference::add;
  static constexpr BackwardDecl kBackward{"AddBackward", 0};  // add saves nothing
  static constexpr const char* kSpecHelp = "  add N | shape            a + b, same shapes                         e.g. add 1048576\n";

  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    return pointwise_spec(d, 2, " + ");  // alpha keeps its default, 1
  }

};
inline constexpr EntryPoint<Add> add{};  // NOLINT(readability-identifier-naming): called like a function

struct Gelu {
  static constexpr const char* kName = "gelu";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "gelu(Tensor self) -> Tensor";
  using Signature = Tensor(const Tensor& self);
  static constexpr KernelDecl kCpu{&kernels::cpu::gelu, "layers/kernels/cpu/pointwise.cpp (erf loop)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::gelu, "layers/kernels/cuda/pointwise.cu (strata's own kernel)"};
  static constexpr auto kReference = &reference::gelu;
  static constexpr BackwardDecl kBackward{"GeluBackward", 0b1};  // dx needs x: Phi(x) + x * phi(x)
  static constexpr const char* kSpecHelp = "  gelu N | shape           N elements, x * Phi(x) (exact, erf)         e.g. gelu 1048576\n";

  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    return pointwise_spec(d, 1, "");  // flops: one per element, as relu (erf is a library call, not counted)
  }

};
inline constexpr EntryPoint<Gelu> gelu{};  // NOLINT(readability-identifier-naming): called like a function

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
  // The gradient is the incoming one cast back to the input's dtype: nothing to save (PyTorch's
  // ToCopyBackward0 keeps only the input's options).
  static constexpr BackwardDecl kBackward{"ToCopyBackward", 0};
  static constexpr const char* kSpecHelp = "  to_copy N | shape        a copy (the cast Autocast calls; --dtype sets both sides)  e.g. to_copy 1048576\n";

  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    return pointwise_spec(d, 1, "");  // dtype keeps its default: a same-dtype copy
  }
};
inline constexpr EntryPoint<ToCopy> to_copy{};  // NOLINT(readability-identifier-naming): called like a function

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
      ((i++ == index ? (f(Ops{}), true) : false) || ...);
    } else {
      R result{};
      size_t i = 0;
      ((i++ == index ? (result = f(Ops{}), true) : false) || ...);
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

using AllOps = OpList<Matmul, Linear, Conv2d, Relu, Add, Gelu, ToCopy>;

template <typename Op>
constexpr size_t op_index() {
  constexpr size_t kIndex = AllOps::index_of<Op>();
  static_assert(kIndex < AllOps::kSize, "not an operator in AllOps");
  return kIndex;
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
