// Private to layers/compiler: which operators the compiler can lower, and into what C++ expression.
// Fusion (what may join a kernel) and codegen (what the kernel computes) read the same table, so an op
// is fusable exactly when there is code for it.
#pragma once

#include <string>
#include <vector>

#include "layers/compiler/compiler.h"

namespace strata::compiler::lowering {

// A pointwise op's value at one element: `tensors` are the C++ expressions of its tensor arguments at
// that element (in argument order), `node` gives the scalars. The expression has type T (the kernel's
// element type, float or double), and is written as the eager CPU kernel computes it, so that fused and
// eager agree to rounding. Math functions are spelled m_erf, m_exp: the kernel's prelude maps them onto
// the libm function of its type, declared with a SIMD variant (codegen.cpp, Note [Vector math]).
using PointwiseExpr = std::string (*)(const std::vector<std::string>& tensors, const Node& node);

// The lowering of a pointwise op, or null: a pointwise op the table does not know is not fused.
PointwiseExpr find_pointwise(const std::string& op);

// Every op find_pointwise() lowers: the table's rows and the functors' ops, sorted (what the tests
// iterate to hold every lowering to its eager kernel).
std::vector<std::string> pointwise_ops();

// matmul and linear: a GEMM whose output tile can carry an epilogue.
bool is_gemm(const std::string& op);

// Generated kernels are for contiguous f32 and f64 tensors on the CPU, or on a CUDA device when the
// compile has device kernels (CompileOptions::device_kernel); anything else stays extern.
inline bool lowerable(const ValueMeta& m, bool cuda = false) {
  return (m.device.is_cpu() || (cuda && m.device.is_cuda())) && (m.dtype == DType::kF32 || m.dtype == DType::kF64);
}

}  // namespace strata::compiler::lowering
