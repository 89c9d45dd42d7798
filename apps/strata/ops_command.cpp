// `strata ops`: every operator, its schema, and which dispatch keys have kernels, with who registered
// them (the analogue of torch._C._dispatch_dump).
#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <utility>
#include <vector>

#include "apps/strata/commands.h"
#include "layers/binding/binding.h"
#include "layers/dispatch/dispatch.h"
#include "layers/ops/operators.h"
#include "lib/error.h"
#include "measure/harness.h"
#if STRATA_WITH_CUDA
#include "measure/devices/cuda_module.h"
#endif

namespace strata::app {
namespace {

// Each operator's declared CUDA kernel, in dispatcher order; "" where it has none. Read at compile time, so
// the executable never refers to the kernels themselves (they are in libstrata_cuda.so).
std::vector<std::string> declared_cuda_kernels() {
  std::vector<std::string> where;
  ops::AllOps::for_each([&](auto op) {
    using Op = decltype(op);
    where.emplace_back(ops::kHasKernel<decltype(Op::kCuda)> ? Op::kCuda.where : "");
  });
  return where;
}

// Each operator's in-place note (Note [In-place operators]), in dispatcher order; "" for the others.
std::vector<std::string> in_place_notes() {
  std::vector<std::string> notes;
  ops::AllOps::for_each([&](auto op) {
    using Op = decltype(op);
    notes.emplace_back(ops::kInPlace<Op> ? "writes self through its strides and bumps its version" : "");
  });
  return notes;
}

}  // namespace

int run_ops() {
  const Dispatcher& d = Dispatcher::instance();
  // `strata ops` does not load libstrata_cuda.so (Note [The CUDA module]): a question about operators
  // should not map the CUDA libraries. Until the module is loaded the CUDA kernels are not in the
  // dispatcher; they are listed from their declarations, marked as such.
  bool cuda_unloaded = false;
#if STRATA_WITH_CUDA
  cuda_unloaded = !measure::cuda_backend_loaded();
#endif
  const std::vector<std::string> declared_cuda = declared_cuda_kernels();
  const std::vector<std::string> in_place = in_place_notes();
  size_t index = 0;
  for (const OperatorEntry& e : d.operators()) {
    const binding::Schema schema = binding::parse_schema(e.schema());
    std::cout << schema.text << "\n";
    std::vector<std::pair<DispatchKey, std::string>> lines;
    bool has_cuda = false;
    for (DispatchKey key : e.keys_with_kernels()) {
      lines.emplace_back(key, e.registered_by(key));
      has_cuda = has_cuda || key == DispatchKey::kCUDA;
    }
    // A fallthrough is no kernel, but a reader asking "what does Autocast do for relu" wants the answer.
    for (int k = kNumDispatchKeys - 1; k > 0; --k) {
      const auto key = static_cast<DispatchKey>(k);
      if (e.fallthrough_keys().has(key)) lines.emplace_back(key, e.registered_by(key));
    }
    const std::string& note = in_place.at(index);
    const std::string& cuda = declared_cuda.at(index++);
    if (cuda_unloaded && !cuda.empty() && !has_cuda) {
      lines.emplace_back(DispatchKey::kCUDA, cuda + "  [in libstrata_cuda.so, registered on the first CUDA use]");
    }
    std::stable_sort(lines.begin(), lines.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    for (const auto& [key, by] : lines) {
      std::string name = dispatch_key_name(key);
      name.resize(10, ' ');
      std::cout << "  " << name << by << "\n";
    }
    if (!note.empty()) std::cout << "  in place  " << note << "\n";
  }
  std::cout << "\nkeys in priority order (highest first): ";
  for (int k = kNumDispatchKeys - 1; k > 0; --k) {
    std::cout << dispatch_key_name(static_cast<DispatchKey>(k)) << (k > 1 ? " > " : "\n");
  }
  // Which ops Autocast changes, in one line (the per-op lines above say how).
  std::string casts, skips;
  for (const OperatorEntry& e : d.operators()) {
    std::string& list = e.kernel(DispatchKey::kAutocast) != nullptr ? casts : skips;
    list += (list.empty() ? "" : ", ") + std::string(e.name());
  }
  std::cout << "Autocast (--autocast bf16|f16) casts the inputs of: " << (casts.empty() ? "none" : casts)
            << "; falls through for: " << (skips.empty() ? "none" : skips) << "\n";
  // A key in the list above that no operator has a kernel for is only a place in the order: say so, so
  // that nobody reads "Autocast" as a feature (a key set that includes it ends in a missing-kernel error).
  for (int k = kNumDispatchKeys - 1; k > 0; --k) {
    const auto key = static_cast<DispatchKey>(k);
    bool any = false;
    for (const OperatorEntry& e : d.operators()) any = any || e.kernel(key) != nullptr;
    // The CUDA kernels of a CUDA build are declared (listed above) but registered only when the module loads.
    if (key == DispatchKey::kCUDA && cuda_unloaded)
      any = std::any_of(declared_cuda.begin(), declared_cuda.end(), [](const std::string& w) { return !w.empty(); });
    if (!any) std::cout << dispatch_key_name(key) << ": no operator has a kernel for this key in this build\n";
  }
  // Programs are no operators (Note [Sequences are not operators]) but are run like them: list them here.
  std::cout << "\nsequences, run like ops (strata trace, strata compare):\n"
            << frontend::sequence_help();
  return 0;
}

}  // namespace strata::app
