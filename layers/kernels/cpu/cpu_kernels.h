// CPU kernels: OpenBLAS for GEMM (matmul, linear, and conv2d as im2col + GEMM), plain loops the compiler
// vectorises for relu and add. f32 and f64 natively; bf16 and f16 tensors are widened to f32, computed in
// f32 and rounded back (Note [Half types on the CPU] in convert.cpp). Each kernel validates its arguments
// (lib/op_shapes.h), allocates its output, and runs inside a Library-layer zone.
#pragma once

#include <optional>
#include <string>

#include "lib/tensor.h"

namespace strata::kernels::cpu {

Tensor matmul(const Tensor& self, const Tensor& other);
Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias);  // bias may be undefined
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, int64_t stride, int64_t padding);
Tensor relu(const Tensor& self);
Tensor add(const Tensor& self, const Tensor& other, double alpha);
Tensor gelu(const Tensor& self);  // exact (erf) form
// A copy converted to `dtype` (the input's own when empty): PyTorch's _to_copy, the cast Autocast calls.
Tensor to_copy(const Tensor& self, std::optional<DType> dtype);

// What the environment report prints: OpenBLAS's own config string and thread count.
std::string blas_config();
int blas_threads();
// "" or one line: OpenBLAS runs pre-AVX kernels on a CPU with AVX2/AVX-512 (its CPU detection did not
// recognise the CPU, common in VMs), so the library row measures slower kernels than the CPU could run.
std::string blas_kernel_warning();

}  // namespace strata::kernels::cpu
