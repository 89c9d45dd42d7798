#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>

#include "layers/kernels/cpu/cpu_common.h"
#include "layers/kernels/cpu/cpu_kernels.h"
#include "lib/op_shapes.h"
#include "lib/zone.h"

// OpenBLAS declares these in its own cblas.h; Debian's generic cblas.h may not.
extern "C" {
char* openblas_get_config(void);
char* openblas_get_corename(void);
int openblas_get_num_threads(void);
}

namespace strata::kernels::cpu {
namespace {

// Row-major C[M,N] = A[M,K] * op(B) + beta * C, with op(B) = B ([K,N]) or B^T (B stored [N,K]).
void gemm(DType dtype, bool transpose_b, int64_t m, int64_t n, int64_t k, const void* a, const void* b,
          double beta, void* c) {
  const CBLAS_TRANSPOSE tb = transpose_b ? CblasTrans : CblasNoTrans;
  const auto ldb = static_cast<blasint>(transpose_b ? k : n);
  const auto bm = static_cast<blasint>(m), bn = static_cast<blasint>(n), bk = static_cast<blasint>(k);
  if (dtype == DType::kF32) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, tb, bm, bn, bk, 1.0f, static_cast<const float*>(a), bk,
                static_cast<const float*>(b), ldb, static_cast<float>(beta), static_cast<float*>(c), bn);
  } else {
    cblas_dgemm(CblasRowMajor, CblasNoTrans, tb, bm, bn, bk, 1.0, static_cast<const double*>(a), bk,
                static_cast<const double*>(b), ldb, beta, static_cast<double*>(c), bn);
  }
}

// Row-major C[M,N] = op(A) @ op(B) + beta * C with op(A) [M,K] and op(B) [K,N]; A and B are stored as they
// are before the transpose (a transposed A is stored [K,M]), each contiguous.
void gemm_transposed(DType dtype, bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, const void* a,
                     const void* b, double beta, void* c) {
  const CBLAS_TRANSPOSE ta = transpose_a ? CblasTrans : CblasNoTrans, tb = transpose_b ? CblasTrans : CblasNoTrans;
  const auto lda = static_cast<blasint>(transpose_a ? m : k), ldb = static_cast<blasint>(transpose_b ? k : n);
  const auto bm = static_cast<blasint>(m), bn = static_cast<blasint>(n), bk = static_cast<blasint>(k);
  if (dtype == DType::kF32) {
    cblas_sgemm(CblasRowMajor, ta, tb, bm, bn, bk, 1.0f, static_cast<const float*>(a), lda, static_cast<const float*>(b),
                ldb, static_cast<float>(beta), static_cast<float*>(c), bn);
  } else {
    cblas_dgemm(CblasRowMajor, ta, tb, bm, bn, bk, 1.0, static_cast<const double*>(a), lda,
                static_cast<const double*>(b), ldb, beta, static_cast<double*>(c), bn);
  }
}

// Note [Transposed GEMM operands]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// BLAS reads a matrix through a transpose flag and a leading dimension, so a view with unit stride along
// either dim is an operand as it lies: x @ w.t() is one GEMM with CblasTrans on w and no copy, as in
// PyTorch (at::native's addmm picks the flags from the strides). The registration lets such operands
// through (gemm_reads_as_is, layers/ops/register_kernels.cpp); anything else arrives contiguous. The row
// names the flags when an operand came as a view ("cblas_sgemm NT"), so a trace shows that no copy ran.
struct Operand {
  bool transposed;  // the memory holds the operand's transpose, row-major
  int64_t ld;       // its leading dimension
};

// How BLAS reads `t` (a 2-D matrix) as op(t): `transpose` asks for t^T.
Operand operand(const Tensor& t, bool transpose) {
  Operand o{false, std::max<int64_t>(1, t.size(1))};
  if (!t.is_contiguous()) o = t.stride(1) == 1 ? Operand{false, t.stride(0)} : Operand{true, t.stride(1)};
  o.transposed = o.transposed != transpose;
  return o;
}

// Row-major C[M,N] = op(A) @ op(B) + beta * C, with A and B as Operand says, C contiguous.
void gemm_operands(DType dtype, const Operand& a, const Operand& b, int64_t m, int64_t n, int64_t k, const void* pa,
                   const void* pb, double beta, void* c) {
  const CBLAS_TRANSPOSE ta = a.transposed ? CblasTrans : CblasNoTrans, tb = b.transposed ? CblasTrans : CblasNoTrans;
  const auto lda = static_cast<blasint>(a.ld), ldb = static_cast<blasint>(b.ld);
  const auto bm = static_cast<blasint>(m), bn = static_cast<blasint>(n), bk = static_cast<blasint>(k);
  if (dtype == DType::kF32) {
    cblas_sgemm(CblasRowMajor, ta, tb, bm, bn, bk, 1.0f, static_cast<const float*>(pa), lda,
                static_cast<const float*>(pb), ldb, static_cast<float>(beta), static_cast<float*>(c), bn);
  } else {
    cblas_dgemm(CblasRowMajor, ta, tb, bm, bn, bk, 1.0, static_cast<const double*>(pa), lda,
                static_cast<const double*>(pb), ldb, beta, static_cast<double*>(c), bn);
  }
}

// The kernel's zone is named after the BLAS routine it ends up calling: one zone per call keeps the
// probe cost down (bench/overhead_bench), and the routine is what users want to see in the row.
// Half types are widened (Note [Half types on the CPU]): the row says which routine really computed.
const char* gemm_name(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "cblas_sgemm";
    case DType::kF64: return "cblas_dgemm";
    case DType::kBF16: return "cblas_sgemm (bf16 widened to f32)";
    case DType::kF16: return "cblas_sgemm (f16 widened to f32)";
  }
  return "?";
}

// The routine with its flags, for a call that read a view (Note [Transposed GEMM operands]); zone names
// must outlive the zone, so they are literals.
const char* gemm_name(DType dtype, const Operand& a, const Operand& b) {
  static constexpr const char* kF32[] = {"cblas_sgemm NN", "cblas_sgemm NT", "cblas_sgemm TN", "cblas_sgemm TT"};
  static constexpr const char* kF64[] = {"cblas_dgemm NN", "cblas_dgemm NT", "cblas_dgemm TN", "cblas_dgemm TT"};
  const size_t i = (a.transposed ? 2 : 0) + (b.transposed ? 1 : 0);
  return dtype == DType::kF64 ? kF64[i] : kF32[i];
}

// Only contiguous inputs and 2-D operands BLAS reads as they lie reach the GEMM kernels (the
// registration copies the rest); half types are widened, which needs contiguous memory.
void check_gemm_input(const char* op, const Tensor& t) {
  if (!t.device().is_cpu()) throw UsageError(std::string(op) + ": CPU kernel got " + t.str());
  if (!t.is_contiguous() && (t.dim() != 2 || is_half(t.dtype())))
    throw UsageError(std::string(op) + ": CPU kernel needs contiguous tensors or 2-D f32/f64 views with a unit stride");
}

}  // namespace

Tensor matmul(const Tensor& self, const Tensor& other) {
  STRATA_ZONE(zone, Layer::kLibrary, "matmul (cpu)");
  op_shapes::check_operands("matmul", check_gemm_input, self, other);
  Shape out_shape = op_shapes::matmul(self.sizes(), other.sizes());
  const Tensor a = widen_to_f32(self), b = widen_to_f32(other);
  const Operand oa = operand(a, false), ob = operand(b, false);
  const bool views = !self.is_contiguous() || !other.is_contiguous();
  zone.rename(views ? gemm_name(self.dtype(), oa, ob) : gemm_name(self.dtype()));
  Tensor out = Tensor::empty(out_shape, a.dtype(), self.device());
  gemm_operands(a.dtype(), oa, ob, out_shape[0], out_shape[1], self.size(1), a.data_ptr(), b.data_ptr(), 0.0,
                out.data_ptr());
  return round_from_f32(std::move(out), self.dtype());
}

Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias) {
  STRATA_ZONE(zone, Layer::kLibrary, "linear (cpu)");
  op_shapes::check_operands("linear", check_gemm_input, input, weight, bias);
  Shape out_shape = op_shapes::linear(input.sizes(), weight.sizes(), bias.defined() ? &bias.sizes() : nullptr);
  const Tensor x = widen_to_f32(input), w = widen_to_f32(weight), b = widen_to_f32(bias);
  const Operand ox = operand(x, false), ow = operand(w, true);  // input @ weight^T
  const bool views = !input.is_contiguous() || !weight.is_contiguous();
  zone.rename(views ? gemm_name(input.dtype(), ox, ow) : gemm_name(input.dtype()));
  Tensor out = Tensor::empty(out_shape, x.dtype(), input.device());
  const int64_t rows = out_shape[0], cols = out_shape[1];
  // addmm: seed every output row with the bias, then let the GEMM accumulate onto it (beta = 1).
  if (b.defined()) {
    const size_t row_bytes = static_cast<size_t>(cols) * element_size(out.dtype());
    auto* dst = static_cast<char*>(out.data_ptr());
    for (int64_t r = 0; r < rows; ++r) std::memcpy(dst + r * row_bytes, b.data_ptr(), row_bytes);
  }
  gemm_operands(x.dtype(), ox, ow, rows, cols, input.size(1), x.data_ptr(), w.data_ptr(), b.defined() ? 1.0 : 0.0,
                out.data_ptr());
  return round_from_f32(std::move(out), input.dtype());
}

Tensor gemm(const Tensor& self, const Tensor& other, int64_t transpose_self, int64_t transpose_other) {
  // Half types: computed on f32 copies and rounded back (Note [Half types on the CPU]); the widen and
  // round zones name that in the library row.
  if (is_half(self.dtype()))
    return round_from_f32(gemm(widen_to_f32(self), widen_to_f32(other), transpose_self, transpose_other), self.dtype());
  STRATA_ZONE(zone, Layer::kLibrary, "gemm (cpu)");
  op_shapes::check_operands("gemm", check_gemm_input, self, other);
  const Shape out_shape = op_shapes::gemm(self.sizes(), other.sizes(), transpose_self, transpose_other);
  const Operand oa = operand(self, transpose_self != 0), ob = operand(other, transpose_other != 0);
  const bool views = !self.is_contiguous() || !other.is_contiguous();
  zone.rename(views ? gemm_name(self.dtype(), oa, ob) : gemm_name(self.dtype()));
  Tensor out = Tensor::empty(out_shape, self.dtype(), self.device());
  const int64_t k = transpose_self ? self.size(0) : self.size(1);
  gemm_operands(self.dtype(), oa, ob, out_shape[0], out_shape[1], k, self.data_ptr(), other.data_ptr(), 0.0,
                out.data_ptr());
  return out;
}

// Shared with conv.cpp: C = op(A) @ op(B) + beta * C.
void gemm_for_conv_backward(DType dtype, bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k,
                            const void* a, const void* b, double beta, void* c) {
  gemm_transposed(dtype, transpose_a, transpose_b, m, n, k, a, b, beta, c);
}

// Shared with conv.cpp.
void gemm_for_conv(DType dtype, int64_t m, int64_t n, int64_t k, const void* a, const void* b, void* c) {
  gemm(dtype, false, m, n, k, a, b, 0.0, c);
}

// The build's config names its baseline target (Debian builds for Prescott with DYNAMIC_ARCH); the
// kernels that actually run are the core chosen at run time, so the report names that one too.
std::string blas_config() { return std::string(openblas_get_config()) + " (running core: " + openblas_get_corename() + ")"; }
int blas_threads() { return openblas_get_num_threads(); }

std::string blas_kernel_warning() {
  const std::string core = openblas_get_corename();
  // OpenBLAS's cores without AVX: what it falls back to when it does not know the CPU.
  static constexpr const char* kPreAvx[] = {"Prescott", "Core2", "Penryn", "Dunnington", "Nehalem", "Atom", "Katmai",
                                            "Coppermine", "Northwood", "Banias", "Opteron", "Barcelona"};
  bool pre_avx = false;
  for (const char* c : kPreAvx) pre_avx = pre_avx || core == c;
  if (!pre_avx) return "";
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  bool avx2 = false, avx512 = false;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    avx2 = line.find(" avx2") != std::string::npos && line.find(" fma") != std::string::npos;
    avx512 = line.find(" avx512f") != std::string::npos;
    break;
  }
  if (!avx2) return "";
  const std::string suggest = avx512 ? "SkylakeX" : "Haswell";
  return "OpenBLAS runs its " + core + " kernels on a CPU with " + (avx512 ? "AVX-512" : "AVX2") +
         " (it did not recognise this CPU, common in VMs), so the library row measures slower kernels than "
         "this CPU can run; OPENBLAS_CORETYPE=" + suggest + " selects the " + (avx512 ? "AVX-512" : "AVX2") + " ones";
}

}  // namespace strata::kernels::cpu
