// The reductions over dims (Note [Reductions over dims]): sum.dim_IntList, mean.dim, mean.
// Part of layers/ops/operators.h (Note [One declaration per operator]): included there, after the
// declaration machinery and in the order the list there gives; not a header to include on its own.
#pragma once

namespace strata::ops {

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
// sum_backward/mean_backward. On the GPU, strata's own kernels (Note [CUDA reductions over dims] in
// layers/kernels/cuda/reduce_plan.h).

struct SumDim {
  static constexpr const char* kName = "sum.dim_IntList";
  static constexpr const char* kTorchName = "torch.sum";  // the --peer torch counterpart
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema =
      "sum.dim_IntList(Tensor self, int[] dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor";
  using Signature = Tensor(const Tensor& self, const Shape& dim, bool keepdim, std::optional<DType> dtype);
  static constexpr KernelDecl kCpu{&kernels::cpu::sum_dim, "layers/kernels/cpu/reduce.cpp (loop, f64 accumulator)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::sum_dim, "layers/kernels/cuda/inplace_reduce.cu (strata's own kernel, f64 accumulator)"};
  static constexpr auto kReference = &reference::sum_dim;
  static constexpr auto kReferenceBackward = &reference::sum_dim_backward;
  static constexpr BackwardDecl kBackward{"SumBackward1", 0};  // the input's sizes and dtype are kept anyway
  static GradList backward(const RecordedNode& node, const Tensor& grad);
};
inline constexpr EntryPoint<SumDim> sum_dim{};  // NOLINT(readability-identifier-naming): called like a function

struct MeanDim {
  static constexpr const char* kName = "mean.dim";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema =
      "mean.dim(Tensor self, int[] dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor";
  using Signature = Tensor(const Tensor& self, const Shape& dim, bool keepdim, std::optional<DType> dtype);
  static constexpr KernelDecl kCpu{&kernels::cpu::mean_dim, "layers/kernels/cpu/reduce.cpp (loop, f64 accumulator)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::mean_dim, "layers/kernels/cuda/inplace_reduce.cu (strata's own kernel, f64 accumulator)"};
  static constexpr auto kReference = &reference::mean_dim;
  static constexpr auto kReferenceBackward = &reference::mean_dim_backward;
  static constexpr BackwardDecl kBackward{"MeanBackward1", 0};
  static GradList backward(const RecordedNode& node, const Tensor& grad);
};
inline constexpr EntryPoint<MeanDim> mean_dim{};  // NOLINT(readability-identifier-naming): called like a function

struct Mean {
  static constexpr const char* kName = "mean";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "mean(Tensor self, *, ScalarType? dtype=None) -> Tensor";
  using Signature = Tensor(const Tensor& self, std::optional<DType> dtype);
  static constexpr KernelDecl kCpu{&kernels::cpu::mean, "layers/kernels/cpu/reduce.cpp (loop, f64 accumulator)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::mean, "layers/kernels/cuda/inplace_reduce.cu (strata's own kernel, f64 accumulator)"};
  static constexpr auto kReference = &reference::mean;
  static constexpr auto kReferenceBackward = &reference::mean_backward;
  static constexpr BackwardDecl kBackward{"MeanBackward0", 0};
  static GradList backward(const RecordedNode& node, const Tensor& grad);
};
inline constexpr EntryPoint<Mean> mean{};  // NOLINT(readability-identifier-naming): called like a function

}  // namespace strata::ops
