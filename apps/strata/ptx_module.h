// The strata program's side of its PTX module: loading libstrata_ptx.so (Note [The PTX module] in
// apps/ptx_module/ptx_module_abi.h, with the table both share).
#pragma once

#include "apps/ptx_module/ptx_module_abi.h"

namespace strata::app {

// The PTX module, loading libstrata_ptx.so on the first call; throws UnavailableError (exit 4) with the
// reason when this build has none (no CUDA toolkit) or it cannot be loaded.
const StrataPtxModule& require_ptx_module();

}  // namespace strata::app
