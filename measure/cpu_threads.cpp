#include "measure/cpu_threads.h"

#include <cstdlib>

#include "layers/kernels/cpu/cpu_kernels.h"
#include "lib/parallel.h"

namespace strata::measure {

void set_cpu_threads(int n, const std::string& source) {
  parallel::set_num_threads(n, source);
  kernels::cpu::set_blas_threads(n);
}

void set_cpu_threads(const std::string& text) { set_cpu_threads(parallel::parse_num_threads(text, "--threads"), "--threads"); }

void apply_cpu_threads_from_environment() {
  if (std::getenv("STRATA_NUM_THREADS") == nullptr) return;
  kernels::cpu::set_blas_threads(parallel::num_threads());  // num_threads() parses and checks the variable
}

}  // namespace strata::measure
