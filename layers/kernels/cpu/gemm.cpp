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
void openblas_set_num_threads(int num_threads);
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

// How BLAS reads `t`'s matrices (its last two dims; a batch of them for more dims) as op(t): `transpose`
// asks for t^T. A non-contiguous operand reached here with unit stride along one of those dims and a
// leading dimension BLAS accepts (gemm_reads_as_is in layers/ops/register_kernels.cpp).
Operand operand(const Tensor& t, bool transpose) {
  const int r = t.dim() - 2, c = t.dim() - 1;
  const int64_t rows = t.size(r), cols = t.size(c);
  Operand o{false, std::max<int64_t>(1, cols)};
  if (!t.is_contiguous()) {
    if (t.stride(c) == 1 && t.stride(r) >= std::max<int64_t>(1, cols)) o = Operand{false, t.stride(r)};
    else if (t.stride(r) == 1 && t.stride(c) >= std::max<int64_t>(1, rows)) o = Operand{true, t.stride(c)};
  }
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

// A batched product: one BLAS call per matrix of the broadcast batch, in a loop (OpenBLAS's
// cblas_sgemm_batch is not in Debian's 0.3.21), the flags as above when an operand came as a view.
const char* gemm_loop_name(DType dtype, bool views, const Operand& a, const Operand& b) {
  static constexpr const char* kF32[] = {"cblas_sgemm NN, loop over the batch", "cblas_sgemm NT, loop over the batch",
                                         "cblas_sgemm TN, loop over the batch", "cblas_sgemm TT, loop over the batch"};
  static constexpr const char* kF64[] = {"cblas_dgemm NN, loop over the batch", "cblas_dgemm NT, loop over the batch",
                                         "cblas_dgemm TN, loop over the batch", "cblas_dgemm TT, loop over the batch"};
  switch (dtype) {
    case DType::kBF16: return "cblas_sgemm, loop over the batch (bf16 widened to f32)";
    case DType::kF16: return "cblas_sgemm, loop over the batch (f16 widened to f32)";
    default: break;
  }
  if (!views) return dtype == DType::kF64 ? "cblas_dgemm, loop over the batch" : "cblas_sgemm, loop over the batch";
  const size_t i = (a.transposed ? 2 : 0) + (b.transposed ? 1 : 0);
  return dtype == DType::kF64 ? kF64[i] : kF32[i];
}

// Only contiguous inputs and 2-D operands BLAS reads as they lie reach the GEMM kernels (the
// registration copies the rest); half types are widened, which needs contiguous memory.
void check_gemm_input(const char* op, const Tensor& t) {
  if (!t.device().is_cpu()) throw UsageError(std::string(op) + ": CPU kernel got " + t.str());
  if (!t.is_contiguous() && (t.dim() < 2 || is_half(t.dtype())))
    throw UsageError(std::string(op) + ": CPU kernel needs contiguous tensors or f32/f64 views with a unit stride in their last two dims");
}

}  // namespace

// Note [Batched matmul on the CPU]
// torch.matmul's shapes (Note [matmul's shape rules] in lib/op_shapes.h): a 1-D first operand is read as
// one row [1,K] and a 1-D second one as a column [K,1] (contiguous memory either way), so every case is
// a GEMM; with batch dims, one GEMM per matrix of the broadcast batch, each operand's matrix found through
// its own batch strides (a broadcast dim reads the same matrix again, nothing is copied). The output is
// contiguous: batch, then [M,N], which is also the layout of the shape with the 1-D dims removed.
Tensor matmul(const Tensor& self, const Tensor& other) {
  STRATA_ZONE(zone, Layer::kLibrary, "matmul (cpu)");
  op_shapes::check_operands("matmul", check_gemm_input, self, other);
  const op_shapes::MatmulGeometry g = op_shapes::matmul_geometry(self.sizes(), other.sizes());
  Tensor wide_a, wide_b;
  const Tensor &a = as_f32(self, wide_a), &b = as_f32(other, wide_b);
  const bool views = !self.is_contiguous() || !other.is_contiguous();
  if (self.dim() == 2 && other.dim() == 2) {  // the 2-D product, as it always was
    const Operand oa = operand(a, false), ob = operand(b, false);
    zone.rename(views ? gemm_name(self.dtype(), oa, ob) : gemm_name(self.dtype()));
    Tensor out = Tensor::empty(g.out, a.dtype(), self.device());
    gemm_operands(a.dtype(), oa, ob, g.m, g.n, g.k, a.data_ptr(), b.data_ptr(), 0.0, out.data_ptr());
    return round_from_f32(std::move(out), self.dtype());
  }
  const Operand oa = self.dim() == 1 ? Operand{false, std::max<int64_t>(1, g.k)} : operand(a, false);
  const Operand ob = other.dim() == 1 ? Operand{false, 1} : operand(b, false);
  zone.rename(g.batch_count > 1 ? gemm_loop_name(self.dtype(), views, oa, ob)
                                : (views ? gemm_name(self.dtype(), oa, ob) : gemm_name(self.dtype())));
  Tensor out = Tensor::empty(g.out, a.dtype(), self.device());
  if (out.numel() == 0) return round_from_f32(std::move(out), self.dtype());
  const size_t esize = element_size(a.dtype());
  if (g.k == 0) {  // an empty sum: zeros (BLAS would need a leading dimension of at least 1 anyway)
    std::memset(out.data_ptr(), 0, static_cast<size_t>(out.numel()) * esize);
    return round_from_f32(std::move(out), self.dtype());
  }
  const auto* pa = static_cast<const char*>(a.data_ptr());
  const auto* pb = static_cast<const char*>(b.data_ptr());
  auto* pc = static_cast<char*>(out.data_ptr());
  for (int64_t i = 0; i < g.batch_count; ++i) {
    const int64_t at_a = self.dim() > 2 ? op_shapes::batch_offset(g.batch, i, a.sizes(), a.strides()) : 0;
    const int64_t at_b = other.dim() > 2 ? op_shapes::batch_offset(g.batch, i, b.sizes(), b.strides()) : 0;
    gemm_operands(a.dtype(), oa, ob, g.m, g.n, g.k, pa + static_cast<size_t>(at_a) * esize,
                  pb + static_cast<size_t>(at_b) * esize, 0.0, pc + static_cast<size_t>(i * g.m * g.n) * esize);
  }
  return round_from_f32(std::move(out), self.dtype());
}

// linear on input [..., IN]: a contiguous input's leading dims are the GEMM's rows (one call, as for
// 2-D); a batch of strided [R,IN] matrices (a transposed view with more dims) is one GEMM per matrix.
Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias) {
  STRATA_ZONE(zone, Layer::kLibrary, "linear (cpu)");
  op_shapes::check_operands("linear", check_gemm_input, input, weight, bias);
  Shape out_shape = op_shapes::linear(input.sizes(), weight.sizes(), bias.defined() ? &bias.sizes() : nullptr);
  Tensor wide_x, wide_w, wide_b;
  const Tensor &x = as_f32(input, wide_x), &w = as_f32(weight, wide_w), &b = as_f32(bias, wide_b);
  const bool matrices = input.dim() >= 2 && !input.is_contiguous();  // read matrix by matrix
  const Operand ox = input.dim() == 1 || input.is_contiguous() ? Operand{false, std::max<int64_t>(1, x.size(x.dim() - 1))}
                                                                : operand(x, false);
  const Operand ow = operand(w, true);  // input @ weight^T
  const bool views = !input.is_contiguous() || !weight.is_contiguous();
  const Shape batch = [&] {
    Shape s;
    if (matrices) s.ndim = input.dim() - 2;
    for (int d = 0; d < s.ndim; ++d) s[d] = input.size(d);
    return s;
  }();
  const int64_t batch_count = batch.numel();
  zone.rename(batch_count > 1 ? gemm_loop_name(input.dtype(), views, ox, ow)
                              : (views ? gemm_name(input.dtype(), ox, ow) : gemm_name(input.dtype())));
  Tensor out = Tensor::empty(out_shape, x.dtype(), input.device());
  const int64_t cols = out_shape[out_shape.ndim - 1];
  const int64_t rows = matrices ? input.size(input.dim() - 2) : op_shapes::linear_rows(input.sizes());
  const int64_t in = input.size(input.dim() - 1);
  // addmm: seed every output row with the bias, then let the GEMM accumulate onto it (beta = 1).
  if (b.defined()) {
    const size_t row_bytes = static_cast<size_t>(cols) * element_size(out.dtype());
    auto* dst = static_cast<char*>(out.data_ptr());
    for (int64_t r = 0; r < rows * batch_count; ++r) std::memcpy(dst + r * row_bytes, b.data_ptr(), row_bytes);
  }
  if (input.dim() == 2 || (input.is_contiguous() && in > 0)) {
    gemm_operands(x.dtype(), ox, ow, rows, cols, in, x.data_ptr(), w.data_ptr(), b.defined() ? 1.0 : 0.0, out.data_ptr());
  } else if (in == 0) {  // an empty sum: the bias alone, or zeros
    if (!b.defined()) std::memset(out.data_ptr(), 0, static_cast<size_t>(out.numel()) * element_size(out.dtype()));
  } else {
    const size_t esize = element_size(x.dtype());
    for (int64_t i = 0; i < batch_count; ++i) {
      const int64_t at = op_shapes::batch_offset(batch, i, x.sizes(), x.strides());
      gemm_operands(x.dtype(), ox, ow, rows, cols, in, static_cast<const char*>(x.data_ptr()) + static_cast<size_t>(at) * esize,
                    w.data_ptr(), b.defined() ? 1.0 : 0.0,
                    static_cast<char*>(out.data_ptr()) + static_cast<size_t>(i * rows * cols) * esize);
    }
  }
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
void set_blas_threads(int n) { openblas_set_num_threads(n); }

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
