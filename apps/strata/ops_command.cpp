// `strata ops`: every operator, its schema, and which dispatch keys have kernels, with who registered
// them (the analogue of torch._C._dispatch_dump).
#include <algorithm>
#include <fstream>
#include <iostream>
#include <sstream>
#include <utility>
#include <vector>

#include "apps/strata/commands.h"
#include "layers/binding/binding.h"
#include "layers/dispatch/dispatch.h"
#include "layers/ops/operators.h"
#include "lib/error.h"
#include "reports/chrome_trace.h"
#if STRATA_WITH_CUDA
#include "apps/strata/cuda_module.h"
#endif

namespace strata::app {
namespace {

// Each operator's declared CUDA kernel, in dispatcher order; "" where it has none. Read at compile time, so
// the executable never refers to the kernels themselves (they are in libstrata_cuda.so).
std::vector<std::string> declared_cuda_kernels() {
  std::vector<std::string> where;
  ops::AllOps::for_each([&](auto op) {
    using Op = decltype(op);
    constexpr const char* w = Op::kCuda.fn != nullptr ? Op::kCuda.where : "";
    where.emplace_back(w);
  });
  return where;
}

}  // namespace

int run_ops() {
  const Dispatcher& d = Dispatcher::instance();
  // `strata ops` does not load libstrata_cuda.so (Note [The CUDA module]): a question about operators
  // should not map the CUDA libraries. Until the module is loaded the CUDA kernels are not in the
  // dispatcher; they are listed from their declarations, marked as such.
  bool cuda_unloaded = false;
#if STRATA_WITH_CUDA
  cuda_unloaded = !cuda_backend_loaded();
#endif
  const std::vector<std::string> declared_cuda = declared_cuda_kernels();
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
  }
  std::cout << "\nkeys in priority order (highest first): ";
  for (int k = kNumDispatchKeys - 1; k > 0; --k) {
    std::cout << dispatch_key_name(static_cast<DispatchKey>(k)) << (k > 1 ? " > " : "\n");
  }
  // A key in the list above that no operator has a kernel for is only a place in the order: say so, so
  // that nobody reads "Autocast" as a feature (a key set that includes it ends in a missing-kernel error).
  for (int k = kNumDispatchKeys - 1; k > 0; --k) {
    const auto key = static_cast<DispatchKey>(k);
    bool any = false;
    for (const OperatorEntry& e : d.operators()) any = any || e.kernel(key) != nullptr;
    if (!any) std::cout << dispatch_key_name(key) << ": no operator has a kernel for this key in this build\n";
  }
  return 0;
}

int run_check_trace(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UsageError("cannot read '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  const auto errors = reports::check_chrome_trace(text.str());
  for (const std::string& e : errors) std::cout << path << ": " << e << "\n";
  if (errors.empty()) std::cout << path << ": valid (every invariant of DESIGN.md holds)\n";
  return errors.empty() ? 0 : static_cast<int>(ExitCode::kFailure);
}

}  // namespace strata::app
