// The cast to_copy, and the promoted operand a type-promoting op's kernel gets (Note [Type promotion]).
// Part of layers/ops/operators.h (Note [One declaration per operator]): included there, after the
// declaration machinery and in the order the list there gives; not a header to include on its own.
#pragma once

namespace strata::ops {

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

}  // namespace strata::ops
