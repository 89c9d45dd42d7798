// Which build of loops.cpp this process runs (Note [One loop source per instruction set] in loops.h).
#include <cpuid.h>

#include <cstdlib>
#include <string>

#include "layers/kernels/cpu/cpu_kernels.h"
#include "layers/kernels/cpu/vectorized/loops.h"
#include "lib/error.h"

namespace strata::kernels::cpu::vectorized {

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kAvx512:
      return "AVX-512";
    case Isa::kAvx2:
      return "AVX2";
    case Isa::kPortable:
      break;
  }
  return "portable";
}

namespace {
// F16C (the half conversions of the vector builds), from CPUID leaf 1 (ECX bit 29): Clang's
// __builtin_cpu_supports has no name for it.
bool cpu_has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
}
}  // namespace

bool cpu_runs(Isa isa) {
  switch (isa) {
    case Isa::kAvx512:
      // SLEEF's avx512f functions and the loops need AVX-512 Foundation (and F16C); GCC's check includes
      // the operating system's support for the registers' state.
      return __builtin_cpu_supports("avx512f") && cpu_has_f16c();
    case Isa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c();
    case Isa::kPortable:
      break;
  }
  return true;
}

Loops loops_for(Isa isa) {
  if (!cpu_runs(isa)) throw UnavailableError(std::string("this CPU does not run the ") + isa_name(isa) + " loops");
  switch (isa) {
    case Isa::kAvx512:
      return make_loops_avx512();
    case Isa::kAvx2:
      return make_loops_avx2();
    case Isa::kPortable:
      break;
  }
  return make_loops_portable();
}

namespace {

Isa widest_allowed() {
  Isa want = Isa::kAvx512;
  if (const char* env = std::getenv("STRATA_CPU_ISA"); env != nullptr) {
    const std::string v = env;
    // An unknown value is not worth failing a run for: it asks for nothing narrower.
    if (v == "portable") want = Isa::kPortable;
    if (v == "avx2") want = Isa::kAvx2;
  }
  for (Isa isa : {Isa::kAvx512, Isa::kAvx2}) {
    if (int(isa) <= int(want) && cpu_runs(isa)) return isa;
  }
  return Isa::kPortable;
}

}  // namespace

}  // namespace strata::kernels::cpu::vectorized

namespace strata::kernels::cpu {

std::string cpu_loops() {
  const vectorized::Isa isa = vectorized::loops().isa;
  return std::string(vectorized::isa_name(isa)) + (isa == vectorized::Isa::kPortable ? ", libm" : " + SLEEF");
}

int cpu_vector_bytes() {
  switch (vectorized::loops().isa) {
    case vectorized::Isa::kAvx512:
      return 64;
    case vectorized::Isa::kAvx2:
      return 32;
    case vectorized::Isa::kPortable:
      break;
  }
  return 0;
}

}  // namespace strata::kernels::cpu

namespace strata::kernels::cpu::vectorized {

const Loops& loops() {
  static const Loops kChosen = loops_for(widest_allowed());
  return kChosen;
}

}  // namespace strata::kernels::cpu::vectorized
