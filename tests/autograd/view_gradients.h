// What the tests of in-place ops through views share (copy_slices_test.cpp, unrecorded_views_test.cpp):
// fresh float64 inputs from the program's seed (tests/kernels/fresh_seed.h: printed by the checks below,
// STRATA_TEST_SEED replays it), and autograd's gradients against central finite differences.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "layers/autograd/engine.h"
#include "layers/dispatch/autograd.h"
#include "layers/frontend/frontend.h"
#include "layers/ops/operators.h"
#include "tests/kernels/fresh_seed.h"

namespace strata::testing::views {

// The end of a slice taken to the end of its dim.
constexpr int64_t kEnd = std::numeric_limits<int64_t>::max();

inline uint64_t next_seed() {
  static std::mt19937_64 rng{run_seed()};
  return rng();
}

// Fresh uniform values in [-1, 1), float64 on the CPU; a leaf of them that requires grad.
inline Tensor rnd(const Shape& s) { return frontend::random_tensor(s, DType::kF64, kCPU, next_seed()); }
inline Tensor leaf(const Shape& s) {
  Tensor t = rnd(s);
  t.set_requires_grad(true);
  return t;
}
inline double& at(const Tensor& t, size_t i) { return t.data<double>()[i]; }
inline std::string grad_fn_name(const Tensor& t) {
  const std::shared_ptr<GradNode> fn = t.grad_fn();
  return fn != nullptr ? fn->name() : "None";
}

// A program of leaves: returns the scalar loss (recording when grad mode is on).
using Program = std::function<Tensor(const std::vector<Tensor>&)>;

// The largest |autograd - central difference| / max(|difference|, 1) over every element of every leaf.
inline double worst_gradient_error(const std::vector<Tensor>& leaves, const Program& program) {
  autograd::backward(program(leaves));
  const NoGradGuard no_grad;
  double worst = 0;
  const double h = 1e-6;
  for (const Tensor& x : leaves) {
    REQUIRE(x.grad().defined());
    const Tensor g = ops::contiguous(x.grad());
    for (size_t i = 0; i < size_t(x.numel()); ++i) {
      const double v = at(x, i);
      at(x, i) = v + h;
      const double up = at(program(leaves), 0);
      at(x, i) = v - h;
      const double down = at(program(leaves), 0);
      at(x, i) = v;
      const double fd = (up - down) / (2 * h);
      worst = std::max(worst, std::abs(at(g, i) - fd) / std::max(std::abs(fd), 1.0));
    }
  }
  return worst;
}

// Checks the program's gradients of every leaf against finite differences, naming the seed on failure.
inline void check_gradients(const std::vector<Tensor>& leaves, const Program& program, double tolerance = 1e-6) {
  INFO("seed " << run_seed() << " (STRATA_TEST_SEED replays it)");
  CHECK(worst_gradient_error(leaves, program) <= tolerance);
}

// sum(b * w) with fixed random weights, so that every element of b has a gradient of its own.
inline Tensor weighted_sum(const Tensor& b, const Tensor& w) { return ops::sum(ops::mul(b, w)); }

}  // namespace strata::testing::views
