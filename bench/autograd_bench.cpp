// The autograd engine's own cost per backward node next to PyTorch's, in one run (docs/performance.md).
//
// Two graphs on tiny tensors (4 elements), N nodes each, built identically in both stacks:
//   add chain:  h = h + c, N times (c needs no grad): AddBackward passes the gradient through and calls
//               no operator, so its time per node is the engine alone: walk, buffers, release.
//   relu chain: h = relu(h), N times: ReluBackward calls threshold_backward, one dispatcher call per node.
// Only the backward pass is timed (the forward builds a fresh graph before each repetition), divided by
// the nodes the walk ran (N + SumBackward + AccumulateGrad). PyTorch's side is bench/autograd_bench_torch.py
// under /usr/bin/python3 (Debian's python3-torch), started from here so both run on the same machine state.
//
//   build/bench/autograd_bench [nodes=1000] [repeat=200]
#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "layers/autograd/engine.h"
#include "layers/frontend/frontend.h"
#include "layers/ops/operators.h"
#include "lib/host_clock.h"

using namespace strata;

namespace {

template <typename Make>
double per_node_ns(Make make, int nodes, int repeat) {
  std::vector<double> samples;
  for (int r = 0; r < repeat; ++r) {
    const Tensor root = make(nodes);
    const uint64_t t0 = host_clock::ticks();
    autograd::backward(root);
    samples.push_back(host_clock::elapsed_ns(t0) / double(nodes + 2));
  }
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

std::string torch_json(int nodes, int repeat) {
  const std::string cmd = "/usr/bin/python3 " STRATA_BENCH_DIR "/autograd_bench_torch.py " + std::to_string(nodes) +
                          " " + std::to_string(repeat) + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return "";
  std::string out;
  std::array<char, 512> buf{};
  while (fgets(buf.data(), buf.size(), pipe) != nullptr) out += buf.data();
  const int status = pclose(pipe);
  if (status != 0) {
    std::fprintf(stderr, "autograd_bench: PyTorch's side failed (%s):\n%s", cmd.c_str(), out.c_str());
    return "";
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const int nodes = argc > 1 ? std::atoi(argv[1]) : 1000;
  const int repeat = argc > 2 ? std::atoi(argv[2]) : 200;
  if (nodes < 1 || repeat < 1) {
    std::fprintf(stderr, "usage: autograd_bench [nodes >= 1] [repeat >= 1]\n");
    return 2;
  }
  const Tensor c = frontend::random_tensor({4}, DType::kF32, kCPU, 1);
  auto add_chain = [&](int n) {
    Tensor h = frontend::random_tensor({4}, DType::kF32, kCPU, 2);
    h.set_requires_grad(true);
    for (int i = 0; i < n; ++i) h = ops::add(h, c, 1.0);
    return ops::sum(h);
  };
  auto relu_chain = [&](int n) {
    Tensor h = frontend::random_tensor({4}, DType::kF32, kCPU, 3);
    h.set_requires_grad(true);
    for (int i = 0; i < n; ++i) h = ops::relu(h);
    return ops::sum(h);
  };
  per_node_ns(add_chain, nodes, 3);  // warm-up
  per_node_ns(relu_chain, nodes, 3);
  const double strata_add = per_node_ns(add_chain, nodes, repeat);
  const double strata_relu = per_node_ns(relu_chain, nodes, repeat);

  const std::string text = torch_json(nodes, repeat);
  std::printf("autograd engine, ns per backward node (median of %d backward passes over %d-node chains, 4-element f32)\n",
              repeat, nodes);
  std::printf("%-44s %10s %10s %8s\n", "graph", "strata", "PyTorch", "ratio");
  if (text.empty()) {
    std::printf("%-44s %10.0f %10s\n", "add chain (engine only: no gradient op)", strata_add, "n/a");
    std::printf("%-44s %10.0f %10s\n", "relu chain (one threshold_backward per node)", strata_relu, "n/a");
    std::printf("PyTorch unavailable: /usr/bin/python3 with torch (Debian's python3-torch) is needed for the comparison\n");
    return 1;
  }
  const auto doc = nlohmann::json::parse(text.substr(text.find('{')));
  const double torch_add = doc["add_chain_ns_per_node"], torch_relu = doc["relu_chain_ns_per_node"];
  std::printf("%-44s %10.0f %10.0f %8.2f\n", "add chain (engine only: no gradient op)", strata_add, torch_add,
              strata_add / torch_add);
  std::printf("%-44s %10.0f %10.0f %8.2f\n", "relu chain (one threshold_backward per node)", strata_relu, torch_relu,
              strata_relu / torch_relu);
  std::printf("PyTorch %s (torch.autograd.backward, 1 intra-op thread); target: strata/PyTorch <= 0.5 on the add chain\n",
              doc["torch"].get<std::string>().c_str());
  return 0;
}
