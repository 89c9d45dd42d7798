// A second process for tests/compiler/jit_test.cpp's cache test: compiles relu(add(x, y)) with the kernel
// cache of $STRATA_CACHE_DIR, runs it, and prints how many kernels came from the cache and the result's
// error against the float64 reference.
#include <cstdio>
#include <exception>
#include <string>

#include "layers/compiler/compiler.h"
#include "layers/frontend/frontend.h"
#include "layers/kernels/reference/reference.h"
#include "layers/ops/operators.h"

int main() {
  using namespace strata;
  try {
    const Tensor x = frontend::random_tensor({1000}, DType::kF32, kCPU, 1);
    const Tensor y = frontend::random_tensor({1000}, DType::kF32, kCPU, 2);
    const compiler::Captured c = compiler::capture(
        [](const std::vector<Tensor>& in) { return std::vector<Tensor>{ops::relu(ops::add(in[0], in[1], 1.0))}; }, {x, y});
    const compiler::CompiledGraph g = compiler::compile(c);
    const Tensor out = g.run({x, y}).at(0);
    std::vector<double> ref = reference::add(x, y, 1.0);
    for (double& v : ref) v = v > 0 ? v : 0;
    const bool refused = !g.builds().empty() && !g.builds()[0].cache_refused.empty() &&
                         g.timings().cache_note.find("was refused") != std::string::npos;
    std::printf("hits %d misses %d error %.3g refused %d\n", g.timings().cache_hits, g.timings().cache_misses,
                reference::relative_error(out, ref), refused ? 1 : 0);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cache_probe: %s\n", e.what());
    return 1;
  }
}
