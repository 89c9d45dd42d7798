// What `strata trace` was asked for: the options as typed, checked by prepare_trace (prepared_trace.h).
// compare and sweep hold one too, for the call they measure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "layers/frontend/frontend.h"

namespace strata::app {

// --algos N, --algo K, --time: cuBLASLt's candidates for matmul and linear on a GPU (Note [Which cuBLASLt
// algorithm] in layers/kernels/cuda/gemm_candidates.h), checked by gemm_algo_options.h.
struct GemmAlgoOptions {
  std::optional<int64_t> algos;  // list the heuristic's first N
  std::optional<int64_t> algo;   // run candidate K instead of the first
  bool time = false;             // measure every candidate listed
  bool any() const { return algos.has_value() || algo.has_value(); }
};

struct TraceOptions {
  std::string op;
  std::string spec;
  std::string device = "auto";
  std::string dtype = "f32";
  std::optional<int64_t> repeat;  // unset = auto
  int64_t warmup = 3;
  double budget_s = 1.0;
  std::optional<std::string> threads;  // --threads as typed (measure/cpu_threads.h), unset when not given
  bool budget_given = false;  // --budget typed: refused beside --repeat, which leaves it nothing to size
  uint64_t seed = 42;
  bool requires_grad = false;
  bool backward = false;  // y.sum().backward() after each call (needs requires_grad); docs/autograd.md
  bool check = false;
  std::vector<std::string> views;  // --view NAME=KIND: inputs given as views (docs/views.md)
  bool tf32 = false;
  GemmAlgoOptions gemm_algo;
  std::string autocast;  // "" = off; bf16 | f16 (docs/autocast.md)
  bool no_device_timing = false;
  std::string json_path;
  std::string chrome_trace_path;
  frontend::ConvOptions conv;
  std::string frontend = "cli";  // --frontend cli | python (python_frontend.h)
  std::string peer;              // --peer torch, or "" for none
  std::string count;             // --count instructions, or "" (docs/instructions.md)
  // trace PROGRAM --mode eager | graph | compiled (program_command.cpp, docs/compiled.md); --emit cpp
  // prints the compiled graph's generated source, --emit ptx its kernels as CUDA C and PTX for --arch
  // ("" = the GPU's, else sm_90).
  std::string mode = "eager";
  std::string emit;
  std::string arch;
};

}  // namespace strata::app
