// The one explicit list of kernels (ggml's backend registry is the model): the dispatcher's entries and
// every kernel it can reach are registered here, from the operator declarations (Note [One declaration
// per operator]), instead of through static initialisers scattered across files that the linker may drop.
// CUDA kernels are registered by register_kernels_cuda.cpp, compiled only where the CUDA layers are, into
// libstrata_cuda.so: the loader calls it when that module is loaded, on the first CUDA use (Note [The CUDA
// module] in apps/strata/cuda_module.h). Until then the CUDA key of every operator has no kernel.
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
    ops::AllOps::for_each([&](auto op) {
      using Op = decltype(op);
      if constexpr (ops::kHasKernel<decltype(Op::kCpu)>) {
        static_assert(std::is_same_v<decltype(Op::kCpu.fn), typename Op::Signature*>,
                      "an operator's CPU kernel must have the operator's Signature");
      }
      OperatorEntry& e = d->entry(ops::op_index<Op>());
      e.set_kernel(DispatchKey::kAutograd, reinterpret_cast<void*>(&ops::AutogradKernel<Op>::fn),
                   std::string("layers/dispatch/autograd.cpp (records ") + Op::kBackward.node + ")");
      if constexpr (ops::kHasKernel<decltype(Op::kCpu)>) {
        e.set_kernel(DispatchKey::kCPU, reinterpret_cast<void*>(&ops::DropKeySet<Op::kCpu.fn>::fn), Op::kCpu.where);
      }
    });
    return d;
  }();
  return *dispatcher;
}

}  // namespace strata
