// `strata ops`: every operator, its schema, and which dispatch keys have kernels, with who registered
// them (the analogue of torch._C._dispatch_dump).
#include <iostream>

#include "apps/strata/commands.h"
#include "layers/binding/binding.h"
#include "layers/dispatch/dispatch.h"

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
  return 0;
}

}  // namespace strata::app
