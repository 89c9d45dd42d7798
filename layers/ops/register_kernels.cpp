// The one explicit list of kernels (ggml's backend registry is the model): the dispatcher's entries and
// every kernel it can reach are registered here, from the operator declarations (Note [One declaration
// per operator]), instead of through static initialisers scattered across files that the linker may drop.
// CUDA kernels are registered by register_kernels_cuda.cpp, compiled only where the CUDA layers are, into
// libstrata_cuda.so: the loader calls it when that module is loaded, on the first CUDA use (Note [The CUDA
// module] in measure/devices/cuda_module.h). Until then the CUDA key of every operator has no kernel.
#include "layers/ops/copy_slices.h"
#include "layers/ops/operators.h"
#include "layers/ops/register_kernels.h"

namespace strata {
namespace ops {
namespace {

template <typename Op, typename Signature = typename Op::Signature>
struct AutogradKernel;
template <typename Op, typename... Args>
struct AutogradKernel<Op, Tensor(Args...)> {
  static Tensor fn(DispatchKeySet ks, Args... args) {
    return record_backward<KernelFn<Op>>(op_index<Op>(), Op::kName, Op::kBackward, backward_formula<Op>(), ks, args...);
  }
};

// The Autograd kernel of an in-place op (Note [In-place operators]). Reached only when some argument
// requires grad and grad mode is on (the key set has no Autograd key otherwise, so no_grad() writes
// leaves freely, as torch's optimizers do).
inline std::string described(const Tensor& t) {
  return "[" + std::string(dtype_name(t.dtype())) + " [" + t.sizes().str() + "] " + t.device().str() + "]";
}
// What PyTorch refuses: a leaf that requires grad; and, for a view, what CopySlices cannot record
// (Note [CopySlices] in layers/ops/copy_slices.h).
template <typename Op>
void refuse_unrecordable(const Tensor& self) {
  if (self.is_view()) {
    if (std::string why = copy_slices_refusal(Op::kName, self); !why.empty()) throw UsageError(why);
    return;
  }
  if (self.requires_grad() && self.is_leaf()) {
    throw UsageError(std::string("a leaf Variable that requires grad is being used in an in-place operation. (") +
                     Op::kName + " on " + described(self) +
                     "; under no_grad() it is allowed, as an optimizer's update is)");
  }
}
// Saves what the node's formula reads, as PyTorch's VariableType does for the in-place op: an operand
// only when another argument needs a gradient (Mul: d self reads other, d other reads self), or, for an
// op whose operand's own gradient reads it (div_: d other = -grad * self / other^2, kOperandReadsItself),
// when it does; and self, which the write is about to change, as a copy of its value now (a to_copy call
// below Autograd: a row of its own, and no node, since only its values are read).
inline void save_in_place_input(RecordedNode& node, const BackwardDecl& decl, size_t i, const Tensor& t, size_t count,
                                bool operand_reads_itself) {
  if (!((decl.saved_inputs >> i) & 1u)) return;
  bool another_needs_grad = i != 0 && operand_reads_itself && node.needs_grad(i);
  for (size_t j = 0; j < count; ++j) another_needs_grad = another_needs_grad || (j != i && node.needs_grad(j));
  if (!another_needs_grad) return;
  if (i != 0) {
    node.save_input(i, t);
    return;
  }
  const ExcludeKeyGuard below_autograd(DispatchKey::kAutograd);
  node.save_input(0, ops::to_copy(t, std::nullopt));
}
template <typename T>
void record_in_place_arg(RecordedNode& node, size_t i, const T& v) {
  if constexpr (std::is_same_v<T, Tensor>) {
    node.set_next(i, gradient_edge(v));
    node.save_input_sizes(i, v.sizes());
    node.save_input_dtype(i, v.dtype());
  } else if constexpr (std::is_arithmetic_v<T>) {
    node.save_scalar(i, static_cast<double>(v));
  }
}
template <typename Op>
constexpr bool kOperandReadsItself = requires { requires Op::kOperandReadsItself; };
template <typename Op, typename T>
void save_in_place_arg(RecordedNode& node, size_t i, const T& v, size_t count) {
  if constexpr (std::is_same_v<T, Tensor>) save_in_place_input(node, Op::kBackward, i, v, count, kOperandReadsItself<Op>);
}

template <typename Op, typename Signature = typename Op::Signature>
struct InPlaceAutogradKernel;
template <typename Op, typename... Rest>
struct InPlaceAutogradKernel<Op, Tensor(const Tensor&, Rest...)> {
  static Tensor fn(DispatchKeySet ks, const Tensor& self, Rest... rest) {
    refuse_unrecordable<Op>(self);
    // The node: its edges are self's history before the write (edge 0) and the operands'.
    auto node = std::make_shared<RecordedNode>(Op::kBackward.node, Op::kName, backward_formula<Op>());
    constexpr size_t kCount = 1 + sizeof...(Rest);
    {
      size_t i = 0;
      record_in_place_arg(*node, i++, self);
      (record_in_place_arg(*node, i++, rest), ...);
      i = 0;
      save_in_place_arg<Op>(*node, i++, self, kCount);
      (save_in_place_arg<Op>(*node, i++, rest, kCount), ...);
    }
    Tensor out = Dispatcher::instance().redispatch<KernelFn<Op>>(op_index<Op>(), ks.remove(DispatchKey::kAutograd),
                                                                 self, rest...);
    if (Op::kBackward.saves_result) node->save_result(self);  // after the write: its version counts it
    if (!self.is_view()) [[likely]] {
      self.rebase_history(std::move(node));
      return out;
    }
    // Through a view: the base's history becomes CopySlices over the op's node; the view's grad_fn is
    // regenerated over it when next read, its version being behind now (Note [CopySlices]).
    const Tensor base = self.view_base();
    base.rebase_history(std::make_shared<CopySlices>(base, self, std::move(node)));
    return out;
  }
};

// What Autocast casts with: the cast operator's entry point, so that every cast is a call through the
// dispatcher like any other (its own key set, Autograd recording ToCopyBackward, the backend kernel).
Tensor autocast_cast(const Tensor& t, DType to) { return to_copy(t, to); }

template <typename Op, typename Signature = typename Op::Signature>
struct AutocastKernel;
template <typename Op, typename... Args>
struct AutocastKernel<Op, Tensor(Args...)> {
  static Tensor fn(DispatchKeySet ks, Args... args) {
    static_assert(Op::kAutocast == AutocastPolicy::kLowerPrecision, "a new autocast policy needs its kernel here");
    return autocast_lower_precision<KernelFn<Op>>(op_index<Op>(), &autocast_cast, ks, args...);
  }
};

bool contiguous_or_absent(const Tensor& t) { return !t.defined() || t.is_contiguous(); }

// What the CPU GEMM kernels read as it lies (Note [Transposed GEMM operands], layers/kernels/cpu/gemm.cpp):
// an f32/f64 matrix with unit stride along either dim and a leading dimension BLAS accepts (a transposed or
// column-narrowed view); anything else (expanded, stepped, a half type that is widened first) is copied.
bool gemm_reads_as_is(const Tensor& t) {
  if (contiguous_or_absent(t)) return true;
  if (t.dim() < 2 || (t.dtype() != DType::kF32 && t.dtype() != DType::kF64)) return false;
  // The last two dims are the matrix; batch dims before them may have any strides (0 for an expanded one).
  const int r = t.dim() - 2, c = t.dim() - 1;
  const int64_t rows = t.size(r), cols = t.size(c);
  return (t.stride(c) == 1 && t.stride(r) >= std::max<int64_t>(1, cols)) ||
         (t.stride(r) == 1 && t.stride(c) >= std::max<int64_t>(1, rows));
}

// A binary op that promotes (Note [Type promotion] in lib/op_shapes.h): operands of different dtypes are
// cast to the common one by to_copy calls (rows of their own) before Inner, the kernel as registered
// otherwise, sees them. Operands of one dtype cost one comparison.
template <typename Inner, typename Signature>
struct WithPromotion;
template <typename Inner, typename... Rest>
struct WithPromotion<Inner, Tensor(const Tensor&, const Tensor&, Rest...)> {
  static Tensor fn(DispatchKeySet ks, const Tensor& self, const Tensor& other, Rest... rest) {
    if (self.dtype() == other.dtype()) [[likely]]
      return Inner::fn(ks, self, other, rest...);
    const DType common = op_shapes::result_type(self, other);
    return Inner::fn(ks, promoted_for_kernel(self, common), promoted_for_kernel(other, common), rest...);
  }
};

// The CPU kernel of Op as the table holds it: as declared for ops that read strides themselves (views,
// contiguous), the GEMM ops with the operands above, every other op with contiguous inputs; the ops that
// promote cast their operands first.
template <typename Op>
void* cpu_kernel() {
  if constexpr (kInPlace<Op>) {
    return reinterpret_cast<void*>(&InPlaceKernel<Op::kCpu.fn>::fn);
  } else if constexpr (requires { Op::kPromotesTypes; }) {
    using Contiguous = WithInputs<Op::kCpu.fn, &contiguous_or_absent, &contiguous_for_kernel>;
    return reinterpret_cast<void*>(&WithPromotion<Contiguous, typename Op::Signature>::fn);
  } else if constexpr (requires { Op::kStridedInputs; }) {
    return reinterpret_cast<void*>(&DropKeySet<Op::kCpu.fn>::fn);
  } else if constexpr (requires { Op::kGemmOperands; }) {
    return reinterpret_cast<void*>(&WithInputs<Op::kCpu.fn, &gemm_reads_as_is, &contiguous_for_kernel>::fn);
  } else {
    return reinterpret_cast<void*>(&WithInputs<Op::kCpu.fn, &contiguous_or_absent, &contiguous_for_kernel>::fn);
  }
}

}  // namespace
}  // namespace ops

Dispatcher& Dispatcher::instance() {
  static Dispatcher* dispatcher = [] {
    std::vector<OperatorEntry> entries;
    ops::AllOps::for_each([&](auto op) {
      using Op = decltype(op);
      entries.emplace_back(Op::kName, Op::kSchema);  // the schema is parsed by the binding layer
    });
    auto* d = new Dispatcher(std::move(entries));
    // AccumulateGrad (layers/dispatch) adds gradients with an operator it cannot name itself.
    autograd_detail::g_add = [](const Tensor& a, const Tensor& b) { return ops::add(a, b, 1.0); };  // never destroyed: kernels may run during static destruction
    // A view's grad_fn regenerated over its base's history (Note [Views and their base's history]).
    tensor_detail::g_view_grad_fn = &ops::regenerate_view_grad_fn;
    ops::AllOps::for_each([&](auto op) {
      using Op = decltype(op);
      if constexpr (ops::kHasKernel<decltype(Op::kCpu)>) {
        static_assert(std::is_same_v<decltype(Op::kCpu.fn), typename Op::Signature*>,
                      "an operator's CPU kernel must have the operator's Signature");
      }
      OperatorEntry& e = d->entry(ops::op_index<Op>());
      if constexpr (ops::kInPlace<Op>) {
        e.set_kernel(DispatchKey::kAutograd, reinterpret_cast<void*>(&ops::InPlaceAutogradKernel<Op>::fn),
                     std::string("layers/ops/register_kernels.cpp (in place: records ") + Op::kBackward.node +
                         " and rebases self's history onto it)");
      } else {
        e.set_kernel(DispatchKey::kAutograd, reinterpret_cast<void*>(&ops::AutogradKernel<Op>::fn),
                     std::string("layers/dispatch/autograd.cpp (records ") + Op::kBackward.node + ")");
      }
      if constexpr (ops::kHasAutocastPolicy<Op>) {
        e.set_kernel(DispatchKey::kAutocast, reinterpret_cast<void*>(&ops::AutocastKernel<Op>::fn),
                     std::string("layers/dispatch/autocast.h (") + autocast_policy_name(Op::kAutocast) +
                         ": casts f32 inputs to the autocast dtype with to_copy, redispatches)");
      } else {
        // c10's fallthrough: with nothing to do for this op, Autocast is masked out of its key set.
        e.set_fallthrough(DispatchKey::kAutocast, "fallthrough (no autocast policy: the key is skipped)");
      }
      if constexpr (ops::kHasKernel<decltype(Op::kCpu)>) {
        e.set_kernel(DispatchKey::kCPU, ops::cpu_kernel<Op>(), Op::kCpu.where);
      }
    });
    return d;
  }();
  return *dispatcher;
}

}  // namespace strata
