// The GEMM-like operators: matmul (torch.matmul's shapes) and linear. gemm, their gradient op, is in
// gradients.h.
// Part of layers/ops/operators.h (Note [One declaration per operator]): included there, after the
// declaration machinery and in the order the list there gives; not a header to include on its own.
#pragma once

namespace strata::ops {

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

}  // namespace strata::ops
