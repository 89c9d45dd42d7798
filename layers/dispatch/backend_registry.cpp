// The one explicit list of backends (ggml's backend registry is the model): every backend kernel that
// the dispatcher can reach is registered here, in one place, guarded by #if for CUDA, instead of through
// static initialisers scattered across files that the linker may drop.
#include "layers/dispatch/dispatch.h"
#include "layers/kernels/cpu/cpu_kernels.h"
#if STRATA_WITH_CUDA
#include "layers/kernels/cuda/cuda_kernels.h"
#endif

namespace strata {
namespace {

// Backend kernels have plain signatures (they never redispatch); this adapts one to the table's
// signature, which starts with the key set, at compile time.
template <auto Kernel>
struct DropKeySet;
template <typename... Args, Tensor (*Kernel)(Args...)>
struct DropKeySet<Kernel> {
  static Tensor fn(DispatchKeySet, Args... args) { return Kernel(args...); }
};

template <OpId Op, auto Kernel>
void add(Dispatcher& d, DispatchKey key, const std::string& where) {
  d.register_kernel<Op>(key, &DropKeySet<Kernel>::fn, where);
}

}  // namespace

void register_backends(Dispatcher& d) {
  namespace cpu = kernels::cpu;
  const DispatchKey kCPU = DispatchKey::kCPU;
  add<OpId::kMatmul, &cpu::matmul>(d, kCPU, "layers/kernels/cpu/gemm.cpp (OpenBLAS cblas_sgemm / cblas_dgemm)");
  add<OpId::kLinear, &cpu::linear>(d, kCPU, "layers/kernels/cpu/gemm.cpp (bias rows + OpenBLAS gemm, beta=1)");
  add<OpId::kConv2d, &cpu::conv2d>(d, kCPU, "layers/kernels/cpu/conv.cpp (im2col + OpenBLAS gemm)");
  add<OpId::kRelu, &cpu::relu>(d, kCPU, "layers/kernels/cpu/pointwise.cpp (vectorised loop)");
  add<OpId::kAdd, &cpu::add>(d, kCPU, "layers/kernels/cpu/pointwise.cpp (vectorised loop)");
#if STRATA_WITH_CUDA
  namespace cuda = kernels::cuda;
  const DispatchKey kCUDA = DispatchKey::kCUDA;
  add<OpId::kMatmul, &cuda::matmul>(d, kCUDA, "layers/kernels/cuda/cublas_gemm.cpp (cuBLAS)");
  add<OpId::kLinear, &cuda::linear>(d, kCUDA, "layers/kernels/cuda/cublas_gemm.cpp (cuBLAS, bias epilogue)");
  add<OpId::kConv2d, &cuda::conv2d>(d, kCUDA, "layers/kernels/cuda/cudnn_conv.cpp (cuDNN)");
  add<OpId::kRelu, &cuda::relu>(d, kCUDA, "layers/kernels/cuda/pointwise.cu (strata's own kernel)");
  add<OpId::kAdd, &cuda::add>(d, kCUDA, "layers/kernels/cuda/pointwise.cu (strata's own kernel)");
#endif
}

}  // namespace strata
