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
};
inline constexpr EntryPoint<Linear> linear{};  // NOLINT(readability-identifier-naming): called like a function

}  // namespace strata::ops
