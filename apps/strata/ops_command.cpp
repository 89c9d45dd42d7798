// `strata ops`: every operator, its schema, and which dispatch keys have kernels, with who registered
// them (the analogue of torch._C._dispatch_dump).
#include <fstream>
#include <iostream>
#include <sstream>

#include "apps/strata/commands.h"
#include "layers/binding/binding.h"
#include "layers/dispatch/dispatch.h"
#include "lib/error.h"
#include "reports/chrome_trace.h"

namespace strata::app {

int run_ops() {
  const Dispatcher& d = Dispatcher::instance();
  for (const OperatorEntry& e : d.operators()) {
    const binding::Schema schema = binding::parse_schema(e.schema());
    std::cout << schema.text << "\n";
    for (DispatchKey key : e.keys_with_kernels()) {
      std::string name = dispatch_key_name(key);
      name.resize(10, ' ');
      std::cout << "  " << name << e.registered_by(key) << "\n";
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
