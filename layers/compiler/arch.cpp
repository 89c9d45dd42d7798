// The GPU architectures the generated CUDA kernels are compiled for, and the words of a ptxas figure
// (compiler_cuda.h). In strata_compiler, not strata_compiler_cuda: the executable validates --arch and
// prints the PTX module's results in every build, and does not link NVRTC.
#include <algorithm>
#include <string>
#include <vector>

#include "layers/compiler/compiler_cuda.h"

namespace strata::compiler::cuda {

const std::vector<std::string>& known_archs() {
  static const std::vector<std::string> kArchs = {"sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120"};
  return kArchs;
}

void check_arch(const std::string& arch) {
  const auto& a = known_archs();
  if (std::find(a.begin(), a.end(), arch) != a.end()) return;
  std::string allowed;
  for (const std::string& x : a) allowed += (allowed.empty() ? "" : ", ") + x;
  throw UsageError("unknown GPU architecture '" + arch + "'; allowed: " + allowed);
}

std::string PtxasResources::str() const {
  return function + " " + arch + ": " + std::to_string(registers) + " registers, " +
         std::to_string(shared_bytes) + " B smem, " + std::to_string(stack_frame_bytes) + " B stack frame, " +
         std::to_string(spill_store_bytes) + " B spill stores, " + std::to_string(spill_load_bytes) +
         " B spill loads";
}

}  // namespace strata::compiler::cuda
